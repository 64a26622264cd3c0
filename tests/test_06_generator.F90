!
!  test_06_generator - a public C function added to a header is callable from Fortran with no other
!  edit: tests/CMakeLists.txt copies the headers, appends DDTensorScratchShift() to the copy of
!  ddtensor.h, runs c_api/generate.py on the copy and compiles its ABI shims and Fortran modules with
!  this program; DDTensorScratchShift (test_06_generator_impl.c) gives the tensor's size + shift.
!  A null tensor gives the ABI's null-handle error, not a crash.
!
#include <petsc/finclude/petsc.h>

program test_06_generator
  use, intrinsic :: iso_c_binding
  use petsc
  use ddnn
  implicit none
  PetscErrorCode :: ierr, ierr2
  type(tDDPartition) :: part
  type(tDDTensor) :: t
  PetscReal :: v
  PetscInt :: shift = 5, two = 2, pshape(2) = [1, 1], shape(2) = [3, 4]
  character(len=256) :: msg
  integer :: nfail = 0

  PetscCallA(DDInitialize(ierr))
  PetscCallA(DDPartitionCreateCartesian(PETSC_COMM_WORLD, two, pshape, part, ierr))
  PetscCallA(DDTensorCreateFromPartition(part, DD_FLOAT64, two, shape, t, ierr))
  PetscCallA(DDTensorScratchShift(t, shift, v, ierr))
  if (v /= 12 + 5) nfail = nfail + 1
  PetscCallA(DDPushReturnErrorHandler(ierr))
  call DDTensorScratchShift(DD_NULL_TENSOR, shift, v, ierr)
  call DDGetErrorMessage(ierr, msg, ierr2)
  call DDPopErrorHandler(ierr2) ! (PetscCallA would test ierr, which holds the expected error)
  if (ierr /= PETSC_ERR_ARG_NULL .or. index(msg, 'Null DDTensor handle (argument 1)') == 0) nfail = nfail + 1
  PetscCallA(DDTensorDestroy(t, ierr))
  PetscCallA(DDPartitionDestroy(part, ierr))
  print '(a, f6.1, a, i0, a)', 'test_06_generator: DDTensorScratchShift from Fortran = ', v, ', ', nfail, ' failures'
  PetscCallA(DDFinalize(ierr))
  if (nfail > 0) error stop 1
end program test_06_generator
