!
!  test_06_fortran - module ddnn from a PETSc Fortran program (`use petsc`, `use ddnn`):
!
!  1. the numbers of the C API: a conv layer's forward and backward, a halo exchange's adjoint
!     test, a net's loss before and after optimizer steps, all configured by the same options,
!     are computed by the Fortran calls and, in the same run, by the C calls of
!     test_06_fortran_ref.c; they must agree to the last bit (same calls, same order);
!  2. clear errors instead of crashes: a null handle, a destroyed handle (nulled by Destroy), a
!     handle of another class, a Vec not yet created (PETSc's Fortran marker) and a Vec of the
!     wrong size give ierr /= 0 with the expected PETSc error code and message;
!  3. every object destroyed: run with -malloc_debug -malloc_dump, the test fails on any
!     "[rank] N bytes Func() at file:line" line (see tests/CMakeLists.txt).
!
#include <petsc/finclude/petsc.h>
#include "ddnn/finclude/ddnn.h"

program test_06_fortran
  use, intrinsic :: iso_c_binding
  use petsc
  use ddnn
  implicit none

  interface
    function test06_reference(comm, vals, n) bind(C, name='test06_reference') result(ierr)
      import
      integer(c_int) :: ierr
      integer(c_int), value :: comm, n
      real(c_double) :: vals(*)
    end function test06_reference
  end interface

  integer, parameter :: NV = 11
  character(len=*), parameter :: opts = &
    '-t6f_conv_layer_type conv -t6f_conv_layer_conv_out_channels 3 -t6f_conv_layer_conv_kernel 3 -t6f_conv_layer_conv_padding 1 '// &
    '-t6f_net_inputs x,t -t6f_net_layers c1,a1,c2,loss '// &
    '-t6f_c1_layer_type conv -t6f_c1_layer_conv_out_channels 4 -t6f_c1_layer_conv_kernel 3 -t6f_c1_layer_conv_padding 1 '// &
    '-t6f_a1_layer_type activation -t6f_a1_layer_activation_type tanh '// &
    '-t6f_c2_layer_type conv -t6f_c2_layer_conv_out_channels 1 -t6f_c2_layer_conv_kernel 3 -t6f_c2_layer_conv_padding 1 '// &
    '-t6f_loss_layer_type loss -t6f_loss_layer_inputs c2,t -t6f_optimizer_type adam -t6f_optimizer_lr 0.01'
  character(len=12), parameter :: names(NV) = [character(len=12) :: 'sum(y)', '|y|', '|dx|', '|dW|', '|db|', 'params', &
                                               'checksum(y)', 'halo adjoint', 'loss', 'loss after 3', 'net params']
  PetscErrorCode :: ierr
  PetscMPIInt :: rank
  PetscInt :: nfail = 0, nchecks = 0, i
  real(c_double) :: fv(NV), cv(NV)

  PetscCallA(DDInitialize(ierr))
  PetscCallMPIA(MPI_Comm_rank(PETSC_COMM_WORLD, rank, ierr))
  PetscCallA(PetscOptionsInsertString(PETSC_NULL_OPTIONS, opts, ierr))

  ! 1. the same numbers as the C API
  call FortranValues(fv)
  ierr = test06_reference(int(PETSC_COMM_WORLD, c_int), cv, NV)
  CHKERRA(ierr)
  do i = 1, NV
    call Check(fv(i) == cv(i), 'Fortran '//trim(names(i))//' equals C')
    if (fv(i) /= cv(i) .and. rank == 0) print '(a, 2es24.16)', '  Fortran and C: ', fv(i), cv(i)
  end do
  call Check(fv(8) < 1d-14, 'the halo exchange passes the adjoint test')
  call Check(fv(10) < fv(9), 'the loss falls')
  call Check(fv(6) == 3 * 2 * 9 + 3, 'conv parameter count')

  ! 2. clear errors instead of crashes
  call ErrorChecks()

  if (rank == 0) then
    print '(a, i0, a, i0, a)', 'test_06_fortran: ', nchecks - nfail, ' of ', nchecks, ' checks passed'
    print '(a, es12.5, a, es12.5, a, es9.2)', '  loss (Fortran = C) ', fv(9), ' -> ', fv(10), ' after 3 steps; halo adjoint test ', fv(8)
  end if
  PetscCallA(DDFinalize(ierr))
  if (nfail > 0) error stop 1

contains

  subroutine Check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    nchecks = nchecks + 1
    if (.not. ok) then
      nfail = nfail + 1
      if (rank == 0) print '(2a)', 'FAILED: ', what
    end if
  end subroutine Check

  ! the computations of test_06_fortran_ref.c, through module ddnn
  subroutine FortranValues(vals)
    real(c_double), intent(out) :: vals(NV)
    DM :: da2, da1
    DDTensor :: x, y, dy, dx, grads(2), u, t, xs(2)
    DDLayer :: conv
    DDNet :: net
    DDOptimizer :: opt
    DDPrimitive :: halo
    PetscInt :: n, nn, s
    PetscInt, parameter :: two = 2, lead = 2
    PetscInt64 :: count
    PetscInt64, parameter :: seed5 = 5, seed7 = 7, seed8 = 8, seed11 = 11
    PetscReal :: v
    real(c_double), allocatable :: g(:)

    PetscCallA(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 13, 9, PETSC_DECIDE, PETSC_DECIDE, 2, 1, PETSC_NULL_INTEGER, PETSC_NULL_INTEGER, da2, ierr))
    PetscCallA(DMSetUp(da2, ierr))
    PetscCallA(DDTensorCreateFromDMDA(da2, DD_FLOAT64, x, ierr))
    PetscCallA(DDTensorSetRandomGlobal(x, seed5, -1.0d0, 1.0d0, ierr))
    PetscCallA(DDLayerCreate(PETSC_COMM_WORLD, conv, ierr))
    PetscCallA(DDLayerSetOptionsPrefix(conv, 't6f_conv_', ierr))
    PetscCallA(DDLayerSetFromOptions(conv, ierr))
    PetscCallA(DDLayerSetUp(conv, x, ierr))
    PetscCallA(DDLayerCreateOutput(conv, y, ierr))
    PetscCallA(DDLayerForward(conv, x, y, ierr))
    PetscCallA(DDTensorDuplicate(y, dy, ierr))
    PetscCallA(DDTensorCopy(y, dy, ierr))
    PetscCallA(DDTensorDuplicate(x, dx, ierr))
    PetscCallA(DDLayerZeroGradients(conv, ierr))
    PetscCallA(DDLayerBackward(conv, dy, dx, ierr))
    PetscCallA(DDTensorSum(y, v, ierr))
    vals(1) = v
    PetscCallA(DDTensorNorm(y, NORM_2, v, ierr))
    vals(2) = v
    PetscCallA(DDTensorNorm(dx, NORM_2, v, ierr))
    vals(3) = v
    PetscCallA(DDLayerGetGradients(conv, n, grads, ierr))
    PetscCallA(DDTensorNorm(grads(1), NORM_2, v, ierr))
    vals(4) = v
    PetscCallA(DDTensorNorm(grads(2), NORM_2, v, ierr))
    vals(5) = v
    PetscCallA(DDLayerGetNumParameters(conv, count, ierr))
    vals(6) = real(count, c_double)
    PetscCallA(DDTensorGetSize(y, nn, ierr))
    allocate (g(merge(nn, 0, rank == 0)))
    PetscCallA(DDTensorGatherToRoot(y, 0, g, ierr))
    vals(7) = 0
    do s = 1, size(g)
      vals(7) = vals(7) + s * g(s)
    end do
    deallocate (g)

    PetscCallA(DDPrimitiveCreate(PETSC_COMM_WORLD, halo, ierr))
    PetscCallA(DDPrimitiveSetType(halo, DDPRIMITIVEHALO, ierr))
    PetscCallA(DDPrimitiveHaloSetKernel(halo, 2, 5, 1, 1, 2, PETSC_DECIDE, ierr))
    PetscCallA(DDPrimitiveHaloSetKernel(halo, 3, 3, 1, 1, 1, PETSC_DECIDE, ierr))
    PetscCallA(DDPrimitiveSetUp(halo, dx, DD_NULL_TENSOR, ierr))
    PetscCallA(DDPrimitiveAdjointTest(halo, DD_NULL_TENSOR, DD_NULL_TENSOR, seed11, v, ierr))
    vals(8) = v

    PetscCallA(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 13, 9, PETSC_DECIDE, PETSC_DECIDE, 1, 1, PETSC_NULL_INTEGER, PETSC_NULL_INTEGER, da1, ierr))
    PetscCallA(DMSetUp(da1, ierr))
    PetscCallA(DDTensorCreateFromDMDA(da1, DD_FLOAT64, u, ierr))
    PetscCallA(DDTensorCreateFromDMDA(da1, DD_FLOAT64, t, ierr))
    PetscCallA(DDTensorSetRandomGlobal(u, seed7, -1.0d0, 1.0d0, ierr))
    PetscCallA(DDTensorSetRandomGlobal(t, seed8, 0.0d0, 1.0d0, ierr))
    xs = [u, t]
    PetscCallA(DDNetCreate(PETSC_COMM_WORLD, net, ierr))
    PetscCallA(DDNetSetOptionsPrefix(net, 't6f_', ierr))
    PetscCallA(DDNetSetFromOptions(net, ierr))
    PetscCallA(DDNetSetUp(net, two, xs, ierr))
    PetscCallA(DDOptimizerCreate(PETSC_COMM_WORLD, opt, ierr))
    PetscCallA(DDOptimizerSetOptionsPrefix(opt, 't6f_', ierr))
    PetscCallA(DDOptimizerSetFromOptions(opt, ierr))
    block ! the long form, as in C: the parameters and gradients as arrays
      DDTensor :: ps(8), gs(8)
      PetscInt :: np
      PetscCallA(DDNetGetParameters(net, np, ps, gs, ierr))
      PetscCallA(DDOptimizerSetUp(opt, np, ps, gs, ierr))
    end block
    do s = 0, 3
      PetscCallA(DDNetForward(net, two, xs, ierr))
      PetscCallA(DDNetGetLoss(net, v, ierr))
      if (s == 0) vals(9) = v
      if (s == 3) vals(10) = v
      if (s == 3) exit
      PetscCallA(DDNetZeroGradients(net, ierr))
      PetscCallA(DDNetBackward(net, DD_NULL_TENSOR, ierr))
      PetscCallA(DDOptimizerStep(opt, ierr))
    end do
    PetscCallA(DDNetGetNumParameters(net, count, ierr))
    vals(11) = real(count, c_double)
    block ! a checkpoint round trip: other parameters, then the saved ones again
      character(len=64) :: file
      PetscMPIInt :: size
      PetscInt64, parameter :: seed99 = 99
      PetscReal :: other, back
      PetscCallMPIA(MPI_Comm_size(PETSC_COMM_WORLD, size, ierr))
      write (file, '(a, i0, a)') 'test_06_fortran_np', size, '.h5'
      PetscCallA(DDCheckpointSave(net, opt, file, ierr))
      PetscCallA(DDNetInitializeParameters(net, seed99, ierr))
      PetscCallA(DDNetForward(net, two, xs, ierr))
      PetscCallA(DDNetGetLoss(net, other, ierr))
      PetscCallA(DDCheckpointLoad(net, opt, file, ierr))
      PetscCallA(DDNetForward(net, two, xs, ierr))
      PetscCallA(DDNetGetLoss(net, back, ierr))
      call Check(other /= vals(10) .and. back == vals(10), 'a checkpoint saved and loaded from Fortran restores the loss')
      ! a tensor written and read back with parallel HDF5
      PetscCallA(DDTensorWriteHDF5(u, file, 'fortran/u', PETSC_TRUE, ierr))
      PetscCallA(DDTensorZeroEntries(u, ierr))
      PetscCallA(DDTensorReadHDF5(u, file, 'fortran/u', ierr))
      PetscCallA(DDTensorNorm(u, NORM_INFINITY, other, ierr))
      call Check(other > 0.5d0 .and. other <= 1, 'a tensor written and read with HDF5 from Fortran')
      if (rank == 0) then
        open (unit=17, file=file, status='old', iostat=s)
        if (s == 0) close (17, status='delete')
      end if
    end block

    PetscCallA(DDOptimizerDestroy(opt, ierr))
    PetscCallA(DDNetDestroy(net, ierr))
    PetscCallA(DDPrimitiveDestroy(halo, ierr))
    PetscCallA(DDLayerDestroy(conv, ierr))
    PetscCallA(DDTensorDestroy(x, ierr))
    PetscCallA(DDTensorDestroy(y, ierr))
    PetscCallA(DDTensorDestroy(dx, ierr))
    PetscCallA(DDTensorDestroy(dy, ierr))
    PetscCallA(DDTensorDestroy(u, ierr))
    PetscCallA(DDTensorDestroy(t, ierr))
    call Check(x%v == 0 .and. conv%v == 0 .and. net%v == 0 .and. opt%v == 0 .and. halo%v == 0, 'Destroy nulls the handles')
    PetscCallA(DMDestroy(da1, ierr))
    PetscCallA(DMDestroy(da2, ierr))
  end subroutine FortranValues

  ! expects call's ierr to be code, with a message containing text
  subroutine ExpectError(e, code, text, what)
    PetscErrorCode, intent(in) :: e, code
    character(len=*), intent(in) :: text, what
    character(len=512) :: msg
    PetscErrorCode :: ierr2
    call DDGetErrorMessage(e, msg, ierr2)
    call Check(e == code .and. index(msg, text) > 0, what)
    if (.not. (e == code .and. index(msg, text) > 0) .and. rank == 0) print '(a, i0, 2a)', '  got error ', e, ': ', trim(msg)
  end subroutine ExpectError

  subroutine ErrorChecks()
    DM :: da
    Vec :: good, wrong, notcreated
    DDTensor :: t, none, d
    DDLayer :: l
    PetscInt :: nlocal
    PetscReal :: v
    PetscErrorCode :: e

    PetscCallA(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 13, 9, PETSC_DECIDE, PETSC_DECIDE, 1, 1, PETSC_NULL_INTEGER, PETSC_NULL_INTEGER, da, ierr))
    PetscCallA(DMSetUp(da, ierr))
    PetscCallA(DMCreateGlobalVector(da, good, ierr))
    PetscCallA(VecGetLocalSize(good, nlocal, ierr))
    PetscCallA(VecCreateMPI(PETSC_COMM_WORLD, nlocal + 2, PETSC_DETERMINE, wrong, ierr))
    PetscCallA(DDTensorCreateFromDMDA(da, DD_FLOAT64, t, ierr))
    PetscCallA(DDLayerCreate(PETSC_COMM_WORLD, l, ierr))

    PetscCallA(DDPushReturnErrorHandler(ierr))
    ! a handle never created
    call DDTensorNorm(none, NORM_2, v, e)
    call ExpectError(e, PETSC_ERR_ARG_NULL, 'Null DDTensor handle (argument 1)', 'a null tensor is an error')
    call DDLayerForward(l, t, none, e)
    call ExpectError(e, PETSC_ERR_ARG_NULL, 'Null DDTensor handle (argument 3)', 'a null output is an error')
    ! a destroyed handle: Destroy nulls it; a second Destroy does nothing, a use is an error
    PetscCallA(DDTensorDuplicate(t, d, ierr))
    PetscCallA(DDTensorDestroy(d, ierr))
    call Check(d%v == 0, 'DDTensorDestroy nulls the handle')
    call DDTensorDestroy(d, e)
    call Check(e == 0, 'destroying a null handle does nothing')
    call DDTensorSet(d, 1.0d0, e)
    call ExpectError(e, PETSC_ERR_ARG_NULL, 'Null DDTensor handle', 'a destroyed tensor is an error')
    ! a handle of another class
    call DDTensorSet(tDDTensor(l%v), 1.0d0, e)
    call ExpectError(e, PETSC_ERR_ARG_WRONG, 'a DDLayer where a DDTensor is expected', 'a layer is not a tensor')
    ! a Vec not yet created holds PETSc's Fortran marker
    call DDTensorCopyFromVec(t, notcreated, e)
    call ExpectError(e, PETSC_ERR_ARG_NULL, 'Fortran marker', 'a Vec not created is an error')
    ! a Vec of the wrong size
    call DDTensorPlaceVec(t, wrong, e)
    call ExpectError(e, PETSC_ERR_ARG_SIZ, 'Vec local size', 'placing a Vec of the wrong size is an error')
    call DDTensorCopyToVec(t, wrong, e)
    call ExpectError(e, PETSC_ERR_ARG_SIZ, 'Vec local size', 'copying to a Vec of the wrong size is an error')
    ! an enumeration out of range
    call DDTensorNorm(t, 9, v, e)
    call ExpectError(e, PETSC_ERR_ARG_OUTOFRANGE, 'Invalid NormType', 'an invalid NormType is an error')
    PetscCallA(DDPopErrorHandler(ierr))

    ! and the right Vec works
    PetscCallA(VecSet(good, 2.0d0, ierr))
    PetscCallA(DDTensorPlaceVec(t, good, ierr))
    PetscCallA(DDTensorSum(t, v, ierr))
    call Check(v == 2 * 13 * 9, 'a placed Vec is the tensor')
    PetscCallA(DDTensorResetVec(t, good, ierr))

    PetscCallA(DDLayerDestroy(l, ierr))
    PetscCallA(DDTensorDestroy(t, ierr))
    PetscCallA(VecDestroy(good, ierr))
    PetscCallA(VecDestroy(wrong, ierr))
    PetscCallA(DMDestroy(da, ierr))
  end subroutine ErrorChecks
end program test_06_fortran
