static const char help[] = "Tutorial 2: a tour of ddnn's data-movement primitives on a DMDA-shaped tensor.\n"
                           "Options: -da_grid_x, -da_grid_y (grid), -view (print the primitives)\n";
/*
  Every data movement in a distributed network is a linear operator F with a derived adjoint F*
  (Hewett, Grady & Merizian, "Parallel Primitives for Domain Decomposition in Neural Networks").
  On a tensor laid out as a DMDA's Vec, this program runs:

  1. a halo exchange H for a 3x3 kernel (what a convolution does before its local kernel), and
     its adjoint H*, which adds the halo values back into their owners; the adjoint test
     |<H x, y> - <x, H* y>| / (norms) is printed, and must be near machine epsilon;
  2. a repartition T from the DMDA's decomposition to one split along y only (an all-to-all);
     T* T = I;
  3. a broadcast B of a small tensor (a 3x3 kernel's weights) from rank 0 to every worker of the
     DMDA's partition, and its adjoint, the sum-reduce R = B*: R B x = P x on P workers, which
     is how the gradients of replicated weights are summed.

    mpiexec -n 4 ./ex2_primitives_tour -da_grid_x 64 -da_grid_y 64
*/
#include <ddnn.h>

int main(int argc, char **argv)
{
  DM          da;
  DDTensor    x, xr, x2, w, wb, w2;
  DDPartition part, rows, root;
  DDPrimitive H, T, B, R;
  PetscInt    mx, my, start[4], n[4], lo[4], hi[4], pw;
  PetscReal   err, diff, nx, sx, sw, sw2;
  PetscMPIInt rank, size;
  PetscBool   view = PETSC_FALSE;

  PetscCall(DDInitialize(&argc, &argv, NULL, help));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-view", &view, NULL));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 24, 18, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &da));
  PetscCall(DMSetFromOptions(da));
  PetscCall(DMSetUp(da));
  PetscCall(DMDAGetInfo(da, NULL, &mx, &my, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));

  /* a tensor (1, 1, My, Mx) split as the DMDA splits its grid */
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &x));
  PetscCall(DDTensorGetPartition(x, &part));
  PetscCall(DDTensorSetRandomGlobal(x, 7, -1, 1)); /* the same global values on any number of ranks */

  /* 1. halo exchange for a 3x3 kernel with zero padding 1, and its adjoint */
  PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &H));
  PetscCall(DDPrimitiveSetType(H, DDPRIMITIVEHALO));
  PetscCall(DDPrimitiveHaloSetKernel(H, 2, 3, 1, 1, 1, PETSC_DECIDE)); /* y: kernel 3, stride 1, dilation 1, padding 1 */
  PetscCall(DDPrimitiveHaloSetKernel(H, 3, 3, 1, 1, 1, PETSC_DECIDE)); /* x */
  PetscCall(DDPrimitiveSetUp(H, x, NULL));                           /* grows x's halo to what the kernel reads */
  PetscCall(DDTensorGetCorners(x, start, n));
  PetscCall(DDTensorGetHalo(x, lo, hi));
  PetscCall(PetscSynchronizedPrintf(PETSC_COMM_WORLD, "[%d] rows %" PetscInt_FMT "..%" PetscInt_FMT ", columns %" PetscInt_FMT "..%" PetscInt_FMT "; halo widths y %" PetscInt_FMT "/%" PetscInt_FMT ", x %" PetscInt_FMT "/%" PetscInt_FMT "\n", rank, start[2], start[2] + n[2] - 1, start[3],
                                    start[3] + n[3] - 1, lo[2], hi[2], lo[3], hi[3]));
  PetscCall(PetscSynchronizedFlush(PETSC_COMM_WORLD, PETSC_STDOUT));
  PetscCall(DDPrimitiveApply(H, x, NULL)); /* in place: the halo now holds the neighbours' values (or zeros) */
  PetscCall(DDPrimitiveAdjointTest(H, NULL, NULL, 1, &err));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "1. halo exchange H for a 3x3 kernel: adjoint test |<Hx,y> - <x,H*y>| / norms = %.2e\n", (double)err));
  PetscCheck(err < 1e-13, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "Halo adjoint test failed: %g", (double)err);
  if (view) PetscCall(DDPrimitiveView(H, PETSC_VIEWER_STDOUT_WORLD));

  /* 2. repartition onto a partition that splits y only: rows of the grid on every rank */
  {
    PetscInt pshape[4] = {1, 1, size, 1};
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, pshape, PETSC_DECIDE, NULL, &rows));
  }
  PetscCall(DDTensorCreateRepartition(x, rows, &xr));
  PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &T));
  PetscCall(DDPrimitiveSetType(T, DDPRIMITIVEREPARTITION));
  PetscCall(DDPrimitiveSetUp(T, x, xr));
  PetscCall(DDPrimitiveApply(T, x, xr));
  PetscCall(DDTensorDuplicate(x, &x2));
  PetscCall(DDPrimitiveApplyAdjoint(T, xr, x2)); /* T* = T^-1: back to the DMDA's decomposition */
  PetscCall(DDTensorMaxAbsDiff(x, x2, &diff));
  PetscCall(DDTensorNorm(x, NORM_2, &nx));
  PetscCall(DDPrimitiveAdjointTest(T, NULL, NULL, 2, &err));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "2. repartition T (DMDA decomposition -> %d x 1 rows): |T* T x - x|_max = %.1e, adjoint test %.2e\n", (int)size, (double)diff, (double)err));
  PetscCheck(diff == 0 && err < 1e-13, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "Repartition failed: %g %g", (double)diff, (double)err);
  if (view) PetscCall(DDPrimitiveView(T, PETSC_VIEWER_STDOUT_WORLD));

  /* 3. broadcast a 3x3 kernel's weights from rank 0 to every worker of the DMDA's partition, sum-reduce back */
  {
    PetscInt    one[4] = {1, 1, 1, 1}, wshape[4] = {1, 1, 3, 3};
    PetscMPIInt r0     = 0;
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, one, 1, &r0, &root));
    PetscCall(DDTensorCreateFromPartition(root, DD_FLOAT64, 4, wshape, &w));
  }
  PetscCall(DDTensorSetRandomGlobal(w, 3, -1, 1));
  PetscCall(DDTensorCreateBroadcast(w, part, &wb));
  PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &B));
  PetscCall(DDPrimitiveSetType(B, DDPRIMITIVEBROADCAST));
  PetscCall(DDPrimitiveSetUp(B, w, wb));
  PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &R));
  PetscCall(DDPrimitiveSetType(R, DDPRIMITIVESUMREDUCE));
  PetscCall(DDPrimitiveSetUp(R, wb, w));
  PetscCall(DDTensorDuplicate(w, &w2));
  PetscCall(DDPrimitiveApply(B, w, wb));  /* every worker holds the weights */
  PetscCall(DDPrimitiveApply(R, wb, w2)); /* their sum, on rank 0 */
  PetscCall(DDPartitionGetSize(part, &pw));
  PetscCall(DDTensorSum(w, &sw));
  PetscCall(DDTensorSum(w2, &sw2));
  PetscCall(DDPrimitiveAdjointTest(B, NULL, NULL, 3, &err));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "3. broadcast B to %" PetscInt_FMT " workers and sum-reduce R = B*: sum(R B w) / sum(w) = %.12g, adjoint test %.2e\n", pw, (double)(sw2 / sw), (double)err));
  PetscCheck(PetscAbsReal(sw2 - pw * sw) <= 1e-12 * PetscAbsReal(pw * sw) && err < 1e-13, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "Broadcast/sum-reduce failed");
  PetscCall(DDTensorSum(x, &sx));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "grid %" PetscInt_FMT " x %" PetscInt_FMT " on %d rank(s); sum of the tensor %.12f (the same on any number of ranks)\n", mx, my, (int)size, (double)sx));

  PetscCall(DDPrimitiveDestroy(&H));
  PetscCall(DDPrimitiveDestroy(&T));
  PetscCall(DDPrimitiveDestroy(&B));
  PetscCall(DDPrimitiveDestroy(&R));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&x2));
  PetscCall(DDTensorDestroy(&xr));
  PetscCall(DDTensorDestroy(&w));
  PetscCall(DDTensorDestroy(&w2));
  PetscCall(DDTensorDestroy(&wb));
  PetscCall(DDPartitionDestroy(&rows));
  PetscCall(DDPartitionDestroy(&root));
  PetscCall(DMDestroy(&da));
  PetscCall(DDFinalize());
  return 0;
}
