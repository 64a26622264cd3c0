!
!  Tutorial 7 (Fortran): a PDE code that runs a PyTorch-trained network, domain-decomposed,
!  inside its time loop (what FTorch and TorchFort do with LibTorch, here without it).
!
!  The PDE is tutorial 4's: 2-D advection-diffusion on the unit square, homogeneous Dirichlet,
!
!      u_t + a . grad u = nu Laplacian u,
!
!  forward Euler with central differences on a DMDA of M x M interior points. The coarse model
!  knows only the diffusion; a closure C trained offline in PyTorch (tutorials/ex7_train_closure.py)
!  supplies the missing physics:
!
!      u^{n+1} = u^n + dt nu Lap_h u^n + (dt/h) C(u^n).
!
!  C is a small convolutional network (conv 3x3 1 -> 8, tanh, conv 1x1 8 -> 1) described by
!  options with the prefix closure_ (defaults below), whose weights come from the PyTorch
!  state_dict written by the script: -closure_net_load_weights file.h5 loads it at the end of
!  DDNetSetUp(), on any number of ranks; -closure_c1_layer_weights_name conv1 maps ddnn's layer c1
!  to torch's module conv1. The network's input and output tensors have the DMDA's
!  decomposition, so each rank evaluates the closure on the rows it owns (the 3x3 convolution
!  exchanges a halo with its neighbours), in the same loop as the stencil.
!
!  The run: from a Gaussian bump, -steps steps of the corrected model, of the coarse model alone,
!  and of the reference; prints both relative L2 errors. -require_progress fails unless the
!  closure cuts the coarse model's error 10x. -torch_reference file.h5 (written by the script's
!  --reference: torch's rollout of the same corrected model) compares the final state with
!  PyTorch's: relative difference below -torch_tol (default 1e-10; float64 throughout).
!
!    python3 tutorials/ex7_train_closure.py --weights closure.h5     # PyTorch: train, export
!    mpiexec -n 2 ./ex7_torch_closure -closure_net_load_weights closure.h5 -m 32 -steps 100
!
!  tutorials/ex7_closure.h5 is such a file, committed (made by the script with its defaults), so
!  the tutorial runs where PyTorch is not installed.
!
#include <petsc/finclude/petsc.h>
#include "ddnn/finclude/ddnn.h"

module ex7_heat
  use petsc
  implicit none

  ! the problem: grid, time step, physics (ex7_train_closure.py uses the same)
  type Problem
    PetscInt :: m = 32
    PetscReal :: nu = 0.01d0, ax = 0.5d0, ay = 0.25d0, dt = 0.005d0, h
  end type Problem

contains

  ! unew = u + dt (nu Lap_h u - advect (ax d/dx + ay d/dy) u), u = 0 outside the grid
  subroutine EulerStep(da, uloc, u, unew, p, advect, ierr)
    DM, intent(in) :: da
    Vec, intent(inout) :: uloc
    Vec, intent(in) :: u
    Vec, intent(inout) :: unew
    type(Problem), intent(in) :: p
    PetscReal, intent(in) :: advect
    PetscErrorCode, intent(out) :: ierr
    PetscScalar, pointer :: ul(:, :), un(:, :)
    PetscInt :: xs, ys, xm, ym, i, j
    PetscReal :: lap, adv

    PetscCall(VecSet(uloc, 0.0d0, ierr)) ! the ghost points outside the grid stay 0 (Dirichlet)
    PetscCall(DMGlobalToLocalBegin(da, u, INSERT_VALUES, uloc, ierr))
    PetscCall(DMGlobalToLocalEnd(da, u, INSERT_VALUES, uloc, ierr))
    PetscCall(DMDAGetCorners(da, xs, ys, PETSC_NULL_INTEGER, xm, ym, PETSC_NULL_INTEGER, ierr))
    PetscCall(DMDAVecGetArrayReadF90(da, uloc, ul, ierr))
    PetscCall(DMDAVecGetArrayF90(da, unew, un, ierr))
    do j = ys, ys + ym - 1
      do i = xs, xs + xm - 1
        lap = (ul(i - 1, j) + ul(i + 1, j) + ul(i, j - 1) + ul(i, j + 1) - 4 * ul(i, j)) / p%h**2
        adv = (p%ax * (ul(i + 1, j) - ul(i - 1, j)) + p%ay * (ul(i, j + 1) - ul(i, j - 1))) / (2 * p%h)
        un(i, j) = ul(i, j) + p%dt * (p%nu * lap - advect * adv)
      end do
    end do
    PetscCall(DMDAVecRestoreArrayReadF90(da, uloc, ul, ierr))
    PetscCall(DMDAVecRestoreArrayF90(da, unew, un, ierr))
  end subroutine EulerStep

  ! a Gaussian bump of width 0.08 centered at (x0, y0); grid point (i, j) sits at ((i+1) h, (j+1) h)
  subroutine Bump(da, u, p, x0, y0, ierr)
    DM, intent(in) :: da
    Vec, intent(inout) :: u
    type(Problem), intent(in) :: p
    PetscReal, intent(in) :: x0, y0
    PetscErrorCode, intent(out) :: ierr
    PetscScalar, pointer :: a(:, :)
    PetscInt :: xs, ys, xm, ym, i, j
    PetscReal :: x, y

    PetscCall(DMDAGetCorners(da, xs, ys, PETSC_NULL_INTEGER, xm, ym, PETSC_NULL_INTEGER, ierr))
    PetscCall(DMDAVecGetArrayF90(da, u, a, ierr))
    do j = ys, ys + ym - 1
      do i = xs, xs + xm - 1
        x = (i + 1) * p%h
        y = (j + 1) * p%h
        a(i, j) = exp(-((x - x0)**2 + (y - y0)**2) / (2 * 0.08d0**2))
      end do
    end do
    PetscCall(DMDAVecRestoreArrayF90(da, u, a, ierr))
  end subroutine Bump
end module ex7_heat

program ex7_torch_closure
  use petsc
  use ddnn
  use ex7_heat
  implicit none

  character(len=*), parameter :: help = &
    'Tutorial 7: a forward-Euler advection-diffusion stepper on a DMDA whose missing advection is a convolutional closure '// &
    'trained in PyTorch (tutorials/ex7_train_closure.py), run by ddnn domain-decomposed in the time loop.'//new_line('a')// &
    '  -closure_net_load_weights <file.h5>  the PyTorch state_dict (required)'//new_line('a')// &
    '  -m <n>                interior grid points per side'//new_line('a')// &
    '  -steps <n>            time steps'//new_line('a')// &
    '  -torch_reference <f>  PyTorch''s final state of the same rollout (dataset u), compared'//new_line('a')// &
    '  -torch_tol <tol>      the relative difference allowed (default 1e-10)'//new_line('a')// &
    '  -require_progress     fail unless the closure cuts the coarse model''s error 10x'//new_line('a')
  ! the closure (ex7_train_closure.py's Closure module): layer names c1, a1, c2; torch's modules conv1, conv2
  character(len=*), parameter :: defaults = &
    '-closure_net_inputs u -closure_net_layers c1,a1,c2 '// &
    '-closure_c1_layer_type conv -closure_c1_layer_conv_out_channels 8 -closure_c1_layer_conv_kernel 3 '// &
    '-closure_c1_layer_conv_padding 1 -closure_c1_layer_weights_name conv1 '// &
    '-closure_a1_layer_type activation -closure_a1_layer_activation_type tanh '// &
    '-closure_c2_layer_type conv -closure_c2_layer_conv_out_channels 1 -closure_c2_layer_conv_kernel 1 '// &
    '-closure_c2_layer_weights_name conv2'

  PetscErrorCode :: ierr
  type(Problem) :: p
  DM :: da
  Vec :: u, v, w, tmp, c, uloc
  DDNet :: net
  DDTensor :: x(1), pred
  PetscInt :: nsteps = 100, n
  PetscInt, parameter :: ninputs = 1
  PetscInt64 :: nscalars
  PetscBool :: flg, progress = PETSC_FALSE, hasref
  PetscReal :: err, err0, nd, nr, tol = 1.0d-10, diff
  PetscLogDouble :: t0, t1, ts, te, tnet
  character(len=PETSC_MAX_PATH_LEN) :: reffile

  PetscCallA(DDInitialize(PETSC_NULL_CHARACTER, help, ierr))
  PetscCallA(PetscOptionsHasName(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-closure_net_layers', flg, ierr))
  if (.not. flg) then ! the default network (a command line that defines its own takes over)
    PetscCallA(PetscOptionsInsertString(PETSC_NULL_OPTIONS, defaults, ierr))
  end if
  PetscCallA(PetscOptionsHasName(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-closure_net_load_weights', flg, ierr))
  if (.not. flg) then
    SETERRA(PETSC_COMM_WORLD, PETSC_ERR_USER, 'Give the PyTorch weights: -closure_net_load_weights file.h5 (tutorials/ex7_closure.h5, or made by tutorials/ex7_train_closure.py)')
  end if
  PetscCallA(PetscOptionsGetInt(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-m', p%m, flg, ierr))
  PetscCallA(PetscOptionsGetInt(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-steps', nsteps, flg, ierr))
  PetscCallA(PetscOptionsGetBool(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-require_progress', progress, flg, ierr))
  PetscCallA(PetscOptionsGetString(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-torch_reference', reffile, hasref, ierr))
  PetscCallA(PetscOptionsGetReal(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-torch_tol', tol, flg, ierr))
  p%h = 1.0d0 / (p%m + 1)

  ! the simulation's grid; ghosted boundaries hold the Dirichlet zeros
  PetscCallA(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_GHOSTED, DM_BOUNDARY_GHOSTED, DMDA_STENCIL_STAR, p%m, p%m, PETSC_DECIDE, PETSC_DECIDE, 1, 1, PETSC_NULL_INTEGER, PETSC_NULL_INTEGER, da, ierr))
  PetscCallA(DMSetFromOptions(da, ierr))
  PetscCallA(DMSetUp(da, ierr))
  PetscCallA(DMCreateGlobalVector(da, u, ierr))
  PetscCallA(VecDuplicate(u, v, ierr))
  PetscCallA(VecDuplicate(u, w, ierr))
  PetscCallA(VecDuplicate(u, tmp, ierr))
  PetscCallA(VecDuplicate(u, c, ierr))
  PetscCallA(DMCreateLocalVector(da, uloc, ierr))

  ! the closure: input u, a (1, 1, M, M) tensor split as the DMDA; the PyTorch weights load at the end of set-up
  PetscCallA(DDTensorCreateFromDMDA(da, DD_FLOAT64, x(1), ierr))
  PetscCallA(DDNetCreate(PETSC_COMM_WORLD, net, ierr))
  PetscCallA(DDNetSetOptionsPrefix(net, 'closure_', ierr))
  PetscCallA(DDNetSetFromOptions(net, ierr))
  PetscCallA(DDNetSetUp(net, ninputs, x, ierr))
  PetscCallA(DDNetSetTraining(net, PETSC_FALSE, ierr)) ! evaluation mode
  PetscCallA(DDNetGetLayerOutput(net, 'c2', pred, ierr))
  PetscCallA(DDNetGetNumParameters(net, nscalars, ierr))
  PetscCallA(DDOptionsCheckUnused(PETSC_COMM_WORLD, 'closure_', ierr))
  PetscCallA(PetscPrintf(PETSC_COMM_WORLD, 'closure with '//trim(itoa(int(nscalars)))//' parameters loaded from PyTorch'//new_line('a'), ierr))

  ! the time loop: the corrected model u, the reference v, the coarse model alone w
  PetscCallA(Bump(da, u, p, 0.35d0, 0.3d0, ierr))
  PetscCallA(VecCopy(u, v, ierr))
  PetscCallA(VecCopy(u, w, ierr))
  tnet = 0
  PetscCallA(PetscTime(t0, ierr))
  do n = 1, nsteps
    PetscCallA(PetscTime(ts, ierr))
    PetscCallA(DDTensorCopyFromVec(x(1), u, ierr))
    PetscCallA(DDNetForward(net, ninputs, x, ierr)) ! C(u^n), each rank on its piece
    PetscCallA(DDTensorCopyToVec(pred, c, ierr))
    PetscCallA(PetscTime(te, ierr))
    tnet = tnet + (te - ts)
    PetscCallA(EulerStep(da, uloc, u, tmp, p, 0.0d0, ierr))
    PetscCallA(VecWAXPY(u, p%dt / p%h, c, tmp, ierr))
    PetscCallA(EulerStep(da, uloc, v, tmp, p, 1.0d0, ierr))
    PetscCallA(VecCopy(tmp, v, ierr))
    PetscCallA(EulerStep(da, uloc, w, tmp, p, 0.0d0, ierr))
    PetscCallA(VecCopy(tmp, w, ierr))
  end do
  PetscCallA(PetscTime(t1, ierr))

  PetscCallA(VecNorm(v, NORM_2, nr, ierr))
  PetscCallA(VecWAXPY(tmp, -1.0d0, v, u, ierr))
  PetscCallA(VecNorm(tmp, NORM_2, nd, ierr))
  err = nd / nr
  PetscCallA(VecWAXPY(tmp, -1.0d0, v, w, ierr))
  PetscCallA(VecNorm(tmp, NORM_2, nd, ierr))
  err0 = nd / nr
  PetscCallA(PetscPrintf(PETSC_COMM_WORLD, trim(itoa(int(nsteps)))//' steps in '//trim(ftoa(t1 - t0))//' s (the network '//trim(ftoa(tnet))//' s); relative L2 error vs the reference: coarse model '//trim(rtoa(err0))//', with the PyTorch closure '//trim(rtoa(err))//new_line('a'), ierr))
  if (progress) then
    if (.not. (err < 0.1d0 * err0)) then
      SETERRA(PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, 'The closure did not cut the coarse model''s error 10x')
    end if
  end if

  ! the same rollout in PyTorch: read its final state (dataset u) through the tensor, compare
  if (hasref) then
    PetscCallA(DDTensorReadHDF5(x(1), reffile, 'u', ierr))
    PetscCallA(DDTensorCopyToVec(x(1), tmp, ierr))
    PetscCallA(VecNorm(tmp, NORM_2, nr, ierr))
    PetscCallA(VecAXPY(tmp, -1.0d0, u, ierr))
    PetscCallA(VecNorm(tmp, NORM_2, nd, ierr))
    diff = nd / nr
    PetscCallA(PetscPrintf(PETSC_COMM_WORLD, 'final state vs PyTorch''s rollout: relative L2 difference '//trim(rtoa(diff))//' (tolerance '//trim(rtoa(tol))//')'//new_line('a'), ierr))
    if (.not. (diff <= tol)) then
      SETERRA(PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, 'The rollout differs from PyTorch''s')
    end if
  end if

  PetscCallA(DDNetDestroy(net, ierr))
  PetscCallA(DDTensorDestroy(x(1), ierr))
  PetscCallA(VecDestroy(u, ierr))
  PetscCallA(VecDestroy(v, ierr))
  PetscCallA(VecDestroy(w, ierr))
  PetscCallA(VecDestroy(tmp, ierr))
  PetscCallA(VecDestroy(c, ierr))
  PetscCallA(VecDestroy(uloc, ierr))
  PetscCallA(DMDestroy(da, ierr))
  PetscCallA(DDFinalize(ierr))

contains

  function itoa(i) result(s)
    integer, intent(in) :: i
    character(len=24) :: s
    write (s, '(i0)') i
  end function itoa

  function rtoa(x) result(s)
    PetscReal, intent(in) :: x
    character(len=24) :: s
    write (s, '(es10.3)') x
    s = adjustl(s)
  end function rtoa

  function ftoa(x) result(s)
    PetscReal, intent(in) :: x
    character(len=24) :: s
    write (s, '(f10.3)') x
    s = adjustl(s)
  end function ftoa
end program ex7_torch_closure
