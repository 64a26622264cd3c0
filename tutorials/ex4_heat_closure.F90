!
!  Tutorial 4 (Fortran): an explicit PDE time stepper with a learnable convolutional closure,
!  trained online while the simulation runs.
!
!  The reference is 2-D advection-diffusion on the unit square, homogeneous Dirichlet,
!
!      u_t + a . grad u = nu Laplacian u,
!
!  forward Euler with central differences on a DMDA of M x M interior points. The coarse model
!  the code "has" knows only the diffusion; its missing physics is replaced by a closure
!
!      u^{n+1} = u^n + dt nu Lap_h u^n + (dt/h) C_theta(u^n),
!
!  C_theta a small distributed convolutional network (ddnn), configured only by options with the
!  prefix closure_ (the defaults below fill in what the command line does not give, unless it
!  defines its own -closure_net_layers). While
!  the reference runs, each step trains the closure on the state it just saw: forward, MSE loss
!  against the missing term (h/dt)(u_ref^{n+1} - model step of u_ref^n), backward, optimizer step.
!  The closure's tensors are the DMDA's decomposition, so every rank trains on the rows it owns.
!
!  The test: roll the corrected model out from another initial state, before and after the
!  training, and compare with the reference; the relative L2 error must drop.
!
!    mpiexec -n 2 ./ex4_heat_closure -m 32 -train_steps 300 -test_steps 100
!
#include <petsc/finclude/petsc.h>
#include "ddnn/finclude/ddnn.h"

module ex4_heat
  use petsc
  implicit none

  ! the problem: grid, time step, physics
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

  ! a Gaussian bump centered at (x0, y0); grid point (i, j) sits at ((i+1) h, (j+1) h)
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

  ! inserts the options of defaults ('-key value -flag ...') that the database does not hold yet
  subroutine InsertDefaults(defaults, ierr)
    character(len=*), intent(in) :: defaults
    PetscErrorCode, intent(out) :: ierr
    integer :: a, b, c, d
    PetscBool :: set

    ierr = 0
    a = 1
    do while (a <= len_trim(defaults))
      if (defaults(a:a) == ' ') then
        a = a + 1
        cycle
      end if
      b = index(defaults(a:)//' ', ' ') + a - 2  ! the key is defaults(a:b)
      c = verify(defaults(b + 1:)//'-', ' ') + b ! the next token starts at c
      d = b
      if (c <= len_trim(defaults)) then
        if (defaults(c:c) /= '-') d = index(defaults(c:)//' ', ' ') + c - 2 ! a value
      end if
      PetscCall(PetscOptionsHasName(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, defaults(a:b), set, ierr))
      if (.not. set) then
        PetscCall(PetscOptionsInsertString(PETSC_NULL_OPTIONS, defaults(a:d), ierr))
      end if
      a = d + 1
    end do
  end subroutine InsertDefaults
end module ex4_heat

program ex4_heat_closure
  use petsc
  use ddnn
  use ex4_heat
  implicit none

  character(len=*), parameter :: help = &
    'Tutorial 4: a forward-Euler advection-diffusion stepper on a DMDA whose missing advection is learned online by a '// &
    'convolutional closure (ddnn, configured by -closure_ options).'//new_line('a')// &
    '  -m <n>             interior grid points per side'//new_line('a')// &
    '  -train_steps <n>   reference steps, each one training step'//new_line('a')// &
    '  -test_steps <n>    steps of the rollouts that measure the error'//new_line('a')// &
    '  -closure_prediction <name>  the closure layer whose output is the correction (default c2)'//new_line('a')// &
    '  -require_progress  fail unless the loss fell and the rollout error dropped'//new_line('a')
  ! the closure when the options database has none: conv 3x3 (1 -> 4 channels), conv 1x1 (4 -> 1,
  ! starting at zero: no correction before training), MSE loss; Adam
  character(len=*), parameter :: defaults = &
    '-closure_net_inputs u,r -closure_net_layers c1,c2,loss '// &
    '-closure_c1_layer_type conv -closure_c1_layer_conv_out_channels 4 -closure_c1_layer_conv_kernel 3 '// &
    '-closure_c1_layer_conv_padding 1 -closure_c1_layer_conv_bias false '// &
    '-closure_c2_layer_type conv -closure_c2_layer_conv_out_channels 1 -closure_c2_layer_conv_kernel 1 '// &
    '-closure_c2_layer_conv_bias false -closure_c2_layer_init zeros '// &
    '-closure_loss_layer_type loss -closure_loss_layer_inputs c2,r '// &
    '-closure_optimizer_type adam -closure_optimizer_lr 2e-2'

  PetscErrorCode :: ierr
  type(Problem) :: p
  DM :: da
  Vec :: uref, unew, umod, uloc, r
  DDNet :: net
  DDOptimizer :: opt
  DDTensor :: xs(2), pred
  PetscInt :: ntrain = 300, ntest = 100, n, nparams
  PetscInt, parameter :: ninputs = 2, one = 1
  PetscInt64 :: nscalars
  PetscBool :: flg, progress = PETSC_FALSE
  PetscReal :: loss, firstloss = -1, lastloss = -1, err0, err1
  PetscLogDouble :: t0, t1
  character(len=64) :: prediction = 'c2'

  PetscCallA(DDInitialize(PETSC_NULL_CHARACTER, help, ierr))
  PetscCallA(PetscOptionsHasName(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-closure_net_layers', flg, ierr))
  if (.not. flg) then ! the default network; options given on the command line take precedence
    PetscCallA(InsertDefaults(defaults, ierr))
  end if
  PetscCallA(PetscOptionsGetInt(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-m', p%m, flg, ierr))
  PetscCallA(PetscOptionsGetInt(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-train_steps', ntrain, flg, ierr))
  PetscCallA(PetscOptionsGetInt(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-test_steps', ntest, flg, ierr))
  PetscCallA(PetscOptionsGetString(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-closure_prediction', prediction, flg, ierr))
  PetscCallA(PetscOptionsGetBool(PETSC_NULL_OPTIONS, PETSC_NULL_CHARACTER, '-require_progress', progress, flg, ierr))
  p%h = 1.0d0 / (p%m + 1)

  ! the simulation's grid; ghosted boundaries hold the Dirichlet zeros
  PetscCallA(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_GHOSTED, DM_BOUNDARY_GHOSTED, DMDA_STENCIL_STAR, p%m, p%m, PETSC_DECIDE, PETSC_DECIDE, 1, 1, PETSC_NULL_INTEGER, PETSC_NULL_INTEGER, da, ierr))
  PetscCallA(DMSetFromOptions(da, ierr))
  PetscCallA(DMSetUp(da, ierr))
  PetscCallA(DMCreateGlobalVector(da, uref, ierr))
  PetscCallA(VecDuplicate(uref, unew, ierr))
  PetscCallA(VecDuplicate(uref, umod, ierr))
  PetscCallA(VecDuplicate(uref, r, ierr))
  PetscCallA(DMCreateLocalVector(da, uloc, ierr))

  ! the closure: its inputs are the state u and the target r, (1, 1, M, M) tensors split as the DMDA
  PetscCallA(DDTensorCreateFromDMDA(da, DD_FLOAT64, xs(1), ierr))
  PetscCallA(DDTensorCreateFromDMDA(da, DD_FLOAT64, xs(2), ierr))
  PetscCallA(DDNetCreate(PETSC_COMM_WORLD, net, ierr))
  PetscCallA(DDNetSetOptionsPrefix(net, 'closure_', ierr))
  PetscCallA(DDNetSetFromOptions(net, ierr))
  PetscCallA(DDNetSetUp(net, ninputs, xs, ierr))
  PetscCallA(DDNetGetLayerOutput(net, prediction, pred, ierr))
  PetscCallA(DDNetGetNumParameters(net, nscalars, ierr))
  PetscCallA(DDOptimizerCreate(PETSC_COMM_WORLD, opt, ierr))
  PetscCallA(DDOptimizerSetOptionsPrefix(opt, 'closure_', ierr))
  PetscCallA(DDOptimizerSetFromOptions(opt, ierr))
  PetscCallA(DDOptimizerSetUp(opt, net, ierr)) ! the network's parameters and gradients
  PetscCallA(DDNetGetParameters(net, nparams, ierr))
  PetscCallA(DDOptionsCheckUnused(PETSC_COMM_WORLD, 'closure_', ierr))
  PetscCallA(DDNetView(net, PETSC_VIEWER_STDOUT_WORLD, ierr))

  call Rollout(err0)
  PetscCallA(PetscPrintf(PETSC_COMM_WORLD, 'closure with '//trim(itoa(int(nscalars)))//' parameters in '//trim(itoa(int(nparams)))//' tensors; rollout error before training: '//trim(rtoa(err0))//new_line('a'), ierr))

  ! online training: the reference runs, every step teaches the closure its missing term
  PetscCallA(Bump(da, uref, p, 0.3d0, 0.35d0, ierr))
  PetscCallA(PetscTime(t0, ierr))
  do n = 1, ntrain
    PetscCallA(EulerStep(da, uloc, uref, umod, p, 0.0d0, ierr)) ! the coarse model's step
    PetscCallA(EulerStep(da, uloc, uref, unew, p, 1.0d0, ierr)) ! the reference's step
    PetscCallA(VecWAXPY(r, -1.0d0, umod, unew, ierr))
    PetscCallA(VecScale(r, p%h / p%dt, ierr))                    ! the missing term, O(1)
    PetscCallA(DDTensorCopyFromVec(xs(1), uref, ierr))
    PetscCallA(DDTensorCopyFromVec(xs(2), r, ierr))
    PetscCallA(DDNetForward(net, ninputs, xs, ierr))
    PetscCallA(DDNetGetLoss(net, loss, ierr))
    PetscCallA(DDNetZeroGradients(net, ierr))
    PetscCallA(DDNetBackward(net, DD_NULL_TENSOR, ierr))
    PetscCallA(DDOptimizerStep(opt, ierr))
    if (firstloss < 0) firstloss = loss
    lastloss = loss
    if (n == 1 .or. mod(n, max(ntrain / 6, one)) == 0 .or. n == ntrain) then
      PetscCallA(PetscPrintf(PETSC_COMM_WORLD, '  step '//trim(itoa(int(n)))//'  t = '//trim(ftoa(n * p%dt))//'  loss '//trim(rtoa(loss))//new_line('a'), ierr))
    end if
    PetscCallA(VecCopy(unew, uref, ierr))
  end do
  PetscCallA(PetscTime(t1, ierr))

  call Rollout(err1)
  PetscCallA(PetscPrintf(PETSC_COMM_WORLD, 'training: '//trim(itoa(int(ntrain)))//' online steps in '//trim(ftoa(t1 - t0))//' s, loss '//trim(rtoa(firstloss))//' -> '//trim(rtoa(lastloss))//new_line('a'), ierr))
  PetscCallA(PetscPrintf(PETSC_COMM_WORLD, 'rollout of '//trim(itoa(int(ntest)))//' steps from a new state, relative L2 error vs the reference: before training '//trim(rtoa(err0))//', after training '//trim(rtoa(err1))//new_line('a'), ierr))
  if (progress) then
    if (.not. (lastloss < 0.01d0 * firstloss)) then
      SETERRA(PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, 'The training loss did not fall by 100x')
    end if
    if (.not. (err1 < 0.1d0 * err0)) then
      SETERRA(PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, 'The rollout error did not drop by 10x')
    end if
  end if

  PetscCallA(DDOptimizerDestroy(opt, ierr))
  PetscCallA(DDNetDestroy(net, ierr))
  PetscCallA(DDTensorDestroy(xs(1), ierr))
  PetscCallA(DDTensorDestroy(xs(2), ierr))
  PetscCallA(VecDestroy(uref, ierr))
  PetscCallA(VecDestroy(unew, ierr))
  PetscCallA(VecDestroy(umod, ierr))
  PetscCallA(VecDestroy(r, ierr))
  PetscCallA(VecDestroy(uloc, ierr))
  PetscCallA(DMDestroy(da, ierr))
  PetscCallA(DDFinalize(ierr))

contains

  ! the corrected model against the reference from a new initial state: ||u - u_ref|| / ||u_ref||
  subroutine Rollout(err)
    PetscReal, intent(out) :: err
    Vec :: u, v
    PetscInt :: k
    PetscReal :: nd, nr

    PetscCallA(VecDuplicate(uref, u, ierr))
    PetscCallA(VecDuplicate(uref, v, ierr))
    PetscCallA(Bump(da, u, p, 0.35d0, 0.3d0, ierr))
    PetscCallA(VecCopy(u, v, ierr)) ! v: the reference
    do k = 1, ntest
      PetscCallA(DDTensorCopyFromVec(xs(1), u, ierr))
      PetscCallA(DDNetForward(net, ninputs, xs, ierr)) ! the correction is the prediction layer's output
      PetscCallA(DDTensorCopyToVec(pred, r, ierr))
      PetscCallA(EulerStep(da, uloc, u, umod, p, 0.0d0, ierr))
      PetscCallA(VecWAXPY(u, p%dt / p%h, r, umod, ierr))
      PetscCallA(EulerStep(da, uloc, v, unew, p, 1.0d0, ierr))
      PetscCallA(VecCopy(unew, v, ierr))
    end do
    PetscCallA(VecNorm(v, NORM_2, nr, ierr))
    PetscCallA(VecAXPY(u, -1.0d0, v, ierr))
    PetscCallA(VecNorm(u, NORM_2, nd, ierr))
    err = nd / nr
    PetscCallA(VecDestroy(u, ierr))
    PetscCallA(VecDestroy(v, ierr))
  end subroutine Rollout

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
end program ex4_heat_closure
