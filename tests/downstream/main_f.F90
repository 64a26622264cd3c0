!
!  A downstream Fortran program: `use petsc` and `use ddnn` from an installed ddnn, built with
!  CMake (find_package(DDNN), DDNN::ddnn_fortran) and with a Makefile (pkg-config ddnn).
!  A DMDA's Vec wrapped as a tensor without a copy, a 3x3 convolution applied to it.
!
#include <petsc/finclude/petsc.h>
#include "ddnn/finclude/ddnn.h"
program downstream_f
  use petsc
  use ddnn
  implicit none
  PetscErrorCode :: ierr
  DM :: da
  Vec :: u
  DDTensor :: x, y, layout
  DDLayer :: conv
  PetscInt :: start(4), n(4)
  PetscInt, parameter :: one = 1, three = 3
  PetscReal :: s, nrm

  PetscCallA(DDInitialize(ierr))
  PetscCallA(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 10, 7, PETSC_DECIDE, PETSC_DECIDE, 1, 1, PETSC_NULL_INTEGER, PETSC_NULL_INTEGER, da, ierr))
  PetscCallA(DMSetUp(da, ierr))
  PetscCallA(DMCreateGlobalVector(da, u, ierr))
  PetscCallA(VecSet(u, 1.0d0, ierr))

  ! the Vec as a (1, 1, 7, 10) tensor split as the DMDA: the same memory
  PetscCallA(DDTensorCreateFromDMDA(da, DD_FLOAT64, x, ierr))
  PetscCallA(DDTensorPlaceVec(x, u, ierr))
  PetscCallA(DDTensorSum(x, s, ierr))
  PetscCallA(DDTensorGetCorners(x, start, n, ierr))
  if (s /= 70) then
    SETERRA(PETSC_COMM_WORLD, PETSC_ERR_PLIB, 'the tensor does not hold the Vec')
  end if

  ! a 3x3 convolution of it (1 -> 2 channels, zero padding)
  PetscCallA(DDLayerCreate(PETSC_COMM_WORLD, conv, ierr))
  PetscCallA(DDLayerSetType(conv, DDLAYERCONV, ierr))
  PetscCallA(DDLayerConvSetOutputChannels(conv, 2, ierr))
  PetscCallA(DDLayerConvSetKernel(conv, one, three, ierr))
  PetscCallA(DDLayerConvSetPadding(conv, one, one, ierr))
  PetscCallA(DDLayerSetFromOptions(conv, ierr))
  ! set up on a tensor laid out as the DMDA (it receives the kernel's halo; x, wrapping u, cannot)
  PetscCallA(DDTensorCreateFromDMDA(da, DD_FLOAT64, layout, ierr))
  PetscCallA(DDLayerSetUp(conv, layout, ierr))
  PetscCallA(DDLayerCreateOutput(conv, y, ierr))
  PetscCallA(DDLayerForward(conv, x, y, ierr))
  PetscCallA(DDTensorNorm(y, NORM_2, nrm, ierr))
  PetscCallA(DDLayerView(conv, PETSC_VIEWER_STDOUT_WORLD, ierr))
  PetscCallA(PetscPrintf(PETSC_COMM_WORLD, 'downstream Fortran OK'//new_line('a'), ierr))

  PetscCallA(DDTensorResetVec(x, u, ierr))
  PetscCallA(DDTensorDestroy(y, ierr))
  PetscCallA(DDTensorDestroy(x, ierr))
  PetscCallA(DDTensorDestroy(layout, ierr))
  PetscCallA(DDLayerDestroy(conv, ierr))
  PetscCallA(VecDestroy(u, ierr))
  PetscCallA(DMDestroy(da, ierr))
  PetscCallA(DDFinalize(ierr))
end program downstream_f
