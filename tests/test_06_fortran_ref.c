/*
  test_06_fortran_ref.c - the C side of test_06_fortran: the same computations as the Fortran
  program, with the C API, for the options the Fortran program put in the database (prefix
  t6f_). The Fortran program calls test06_reference() in the same run and compares.

  vals: 0 sum(y), 1 |y|_2, 2 |dx|_2, 3 |dW|_2, 4 |db|_2, 5 parameter count of the conv layer,
        6 sum_i (i+1) y_i over the gathered y (rank 0; 0 elsewhere), 7 adjoint test of a halo
        exchange, 8 a net's loss, 9 its loss after 3 optimizer steps, 10 its parameter count
*/
#include <ddnn.h>

#define T6_NVALS 11

/* the grid of the test: a DMDA of 13 x 9 points with dof components */
static PetscErrorCode test06_dmda(MPI_Comm comm, PetscInt dof, DM *da)
{
  PetscFunctionBeginUser;
  PetscCall(DMDACreate2d(comm, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 13, 9, PETSC_DECIDE, PETSC_DECIDE, dof, 1, NULL, NULL, da));
  PetscCall(DMSetUp(*da));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Reference(MPI_Comm comm, double vals[])
{
  DM          da2, da1;
  DDTensor    x, y, dy, dx, *grads, u, t, xs[2];
  DDLayer     conv;
  DDNet       net;
  DDOptimizer opt;
  DDPrimitive halo;
  PetscInt    n, N;
  PetscInt64  count;
  PetscMPIInt rank;
  PetscReal   v;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  /* a conv layer from options on a (1, 2, 9, 13) DMDA tensor: forward, backward with dy = y */
  PetscCall(test06_dmda(comm, 2, &da2));
  PetscCall(DDTensorCreateFromDMDA(da2, DD_FLOAT64, &x));
  PetscCall(DDTensorSetRandomGlobal(x, 5, -1, 1));
  PetscCall(DDLayerCreate(comm, &conv));
  PetscCall(DDLayerSetOptionsPrefix(conv, "t6f_conv_"));
  PetscCall(DDLayerSetFromOptions(conv));
  PetscCall(DDLayerSetUp(conv, x));
  PetscCall(DDLayerCreateOutput(conv, &y));
  PetscCall(DDLayerForward(conv, x, y));
  PetscCall(DDTensorDuplicate(y, &dy));
  PetscCall(DDTensorCopy(y, dy));
  PetscCall(DDTensorDuplicate(x, &dx));
  PetscCall(DDLayerZeroGradients(conv));
  PetscCall(DDLayerBackward(conv, dy, dx));
  PetscCall(DDTensorSum(y, &v));
  vals[0] = v;
  PetscCall(DDTensorNorm(y, NORM_2, &v));
  vals[1] = v;
  PetscCall(DDTensorNorm(dx, NORM_2, &v));
  vals[2] = v;
  PetscCall(DDLayerGetGradients(conv, &n, &grads));
  PetscCall(DDTensorNorm(grads[0], NORM_2, &v));
  vals[3] = v;
  PetscCall(DDTensorNorm(grads[1], NORM_2, &v));
  vals[4] = v;
  PetscCall(DDLayerGetNumParameters(conv, &count));
  vals[5] = (double)count;
  PetscCall(DDTensorGetSize(y, &N));
  {
    double *g = NULL;
    if (!rank) PetscCall(PetscMalloc1(N, &g));
    PetscCall(DDTensorGatherToRoot(y, 0, g));
    vals[6] = 0;
    if (!rank)
      for (PetscInt i = 0; i < N; i++) vals[6] += (i + 1) * g[i];
    PetscCall(PetscFree(g));
  }
  /* a halo exchange for a 5x3 kernel on x: its adjoint test */
  PetscCall(DDPrimitiveCreate(comm, &halo));
  PetscCall(DDPrimitiveSetType(halo, DDPRIMITIVEHALO));
  PetscCall(DDPrimitiveHaloSetKernel(halo, 2, 5, 1, 1, 2, PETSC_DECIDE));
  PetscCall(DDPrimitiveHaloSetKernel(halo, 3, 3, 1, 1, 1, PETSC_DECIDE));
  PetscCall(DDPrimitiveSetUp(halo, dx, NULL));
  PetscCall(DDPrimitiveAdjointTest(halo, NULL, NULL, 11, &v));
  vals[7] = v;
  /* a net from options (x, t) -> loss, and three optimizer steps */
  PetscCall(test06_dmda(comm, 1, &da1));
  PetscCall(DDTensorCreateFromDMDA(da1, DD_FLOAT64, &u));
  PetscCall(DDTensorCreateFromDMDA(da1, DD_FLOAT64, &t));
  PetscCall(DDTensorSetRandomGlobal(u, 7, -1, 1));
  PetscCall(DDTensorSetRandomGlobal(t, 8, 0, 1));
  xs[0] = u;
  xs[1] = t;
  PetscCall(DDNetCreate(comm, &net));
  PetscCall(DDNetSetOptionsPrefix(net, "t6f_"));
  PetscCall(DDNetSetFromOptions(net));
  PetscCall(DDNetSetUp(net, 2, xs));
  PetscCall(DDOptimizerCreate(comm, &opt));
  PetscCall(DDOptimizerSetOptionsPrefix(opt, "t6f_"));
  PetscCall(DDOptimizerSetFromOptions(opt));
  {
    PetscInt  np;
    DDTensor *ps, *gs;
    PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
    PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  }
  for (int s = 0; s <= 3; s++) {
    PetscCall(DDNetForward(net, 2, xs));
    PetscCall(DDNetGetLoss(net, &v));
    if (s == 0) vals[8] = v;
    if (s == 3) vals[9] = v;
    if (s == 3) break;
    PetscCall(DDNetZeroGradients(net));
    PetscCall(DDNetBackward(net, NULL));
    PetscCall(DDOptimizerStep(opt));
  }
  PetscCall(DDNetGetNumParameters(net, &count));
  vals[10] = (double)count;

  PetscCall(DDOptimizerDestroy(&opt));
  PetscCall(DDNetDestroy(&net));
  PetscCall(DDPrimitiveDestroy(&halo));
  PetscCall(DDLayerDestroy(&conv));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDTensorDestroy(&dx));
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDTensorDestroy(&u));
  PetscCall(DDTensorDestroy(&t));
  PetscCall(DMDestroy(&da1));
  PetscCall(DMDestroy(&da2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* called from Fortran: fills vals[0..n) (n must be T6_NVALS) */
int test06_reference(MPI_Fint fcomm, double vals[], int n)
{
  PetscFunctionBeginUser;
  PetscCheck(n == T6_NVALS, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "test06_reference computes %d values, not %d", T6_NVALS, n);
  PetscCall(Reference(MPI_Comm_f2c(fcomm), vals));
  PetscFunctionReturn(PETSC_SUCCESS);
}
