static const char help[] = "Tutorial 1: a PETSc Poisson solve on a DMDA, its solution seen as a ddnn tensor without a copy.\n"
                           "Options: -da_grid_x, -da_grid_y (grid), -tensor_view (print the tensor's pieces)\n";
/*
  The bridge between a PDE code and ddnn: the solution Vec of a DMDA is wrapped as a
  DDTensor of shape (1, 1, My, Mx) whose pieces are exactly the rows each rank owns.

    mpiexec -n 2 ./ex1_dmda_tensor -da_grid_x 64 -da_grid_y 64
*/
#include <ddnn.h>
#include <petscksp.h>

/* -div grad u = 1 on the unit square, u = 0 on the boundary (5-point stencil) */
static PetscErrorCode AssemblePoisson(DM da, Mat A, Vec b)
{
  DMDALocalInfo info;
  PetscReal     hx, hy;

  PetscFunctionBeginUser;
  PetscCall(DMDAGetLocalInfo(da, &info));
  hx = 1.0 / (info.mx - 1);
  hy = 1.0 / (info.my - 1);
  for (PetscInt j = info.ys; j < info.ys + info.ym; j++)
    for (PetscInt i = info.xs; i < info.xs + info.xm; i++) {
      MatStencil row = {.i = i, .j = j}, col[5];
      PetscScalar v[5];
      PetscInt    n = 0;
      if (i == 0 || j == 0 || i == info.mx - 1 || j == info.my - 1) {
        v[0]   = 1.0;
        col[0] = row;
        PetscCall(MatSetValuesStencil(A, 1, &row, 1, col, v, INSERT_VALUES));
        continue;
      }
      col[n].i = i;     col[n].j = j;     v[n++] = 2.0 / (hx * hx) + 2.0 / (hy * hy);
      col[n].i = i - 1; col[n].j = j;     v[n++] = -1.0 / (hx * hx);
      col[n].i = i + 1; col[n].j = j;     v[n++] = -1.0 / (hx * hx);
      col[n].i = i;     col[n].j = j - 1; v[n++] = -1.0 / (hy * hy);
      col[n].i = i;     col[n].j = j + 1; v[n++] = -1.0 / (hy * hy);
      PetscCall(MatSetValuesStencil(A, 1, &row, n, col, v, INSERT_VALUES));
    }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  {
    PetscScalar **bb;
    PetscCall(DMDAVecGetArray(da, b, &bb));
    for (PetscInt j = info.ys; j < info.ys + info.ym; j++)
      for (PetscInt i = info.xs; i < info.xs + info.xm; i++) bb[j][i] = (i == 0 || j == 0 || i == info.mx - 1 || j == info.my - 1) ? 0.0 : 1.0;
    PetscCall(DMDAVecRestoreArray(da, b, &bb));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  DM          da;
  Mat         A;
  Vec         u, b;
  KSP         ksp;
  DDTensor    t;
  PetscReal   nrm, mx, sum;
  PetscInt    start[4], n[4];
  PetscMPIInt rank;

  PetscCall(DDInitialize(&argc, &argv, NULL, help));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 33, 33, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &da));
  PetscCall(DMSetFromOptions(da));
  PetscCall(DMSetUp(da));
  PetscCall(DMCreateMatrix(da, &A));
  PetscCall(DMCreateGlobalVector(da, &u));
  PetscCall(VecDuplicate(u, &b));
  PetscCall(AssemblePoisson(da, A, b));
  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPSetFromOptions(ksp));
  PetscCall(KSPSolve(ksp, b, u));

  /* the solution as a distributed tensor: same ownership, same memory */
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &t));
  PetscCall(DDTensorSetFromOptions(t));
  PetscCall(DDTensorPlaceVec(t, u));
  PetscCall(DDTensorGetCorners(t, start, n));
  PetscCall(PetscSynchronizedPrintf(PETSC_COMM_WORLD, "[%d] owns rows %" PetscInt_FMT "..%" PetscInt_FMT ", columns %" PetscInt_FMT "..%" PetscInt_FMT "\n", rank, start[2], start[2] + n[2] - 1, start[3], start[3] + n[3] - 1));
  PetscCall(PetscSynchronizedFlush(PETSC_COMM_WORLD, PETSC_STDOUT));
  PetscCall(DDTensorNorm(t, NORM_2, &nrm));
  PetscCall(DDTensorNorm(t, NORM_INFINITY, &mx));
  PetscCall(DDTensorSum(t, &sum));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "Poisson solution as a tensor: 2-norm %.6f, max %.6f (exact continuum max 0.0737), mean %.6f\n", (double)nrm, (double)mx, (double)(sum / (33.0 * 33.0))));
  PetscCheck(mx > 0.07 && mx < 0.075, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "unexpected maximum %g", (double)mx);
  PetscCall(DDTensorResetVec(t, u));

  PetscCall(DDTensorDestroy(&t));
  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&u));
  PetscCall(VecDestroy(&b));
  PetscCall(MatDestroy(&A));
  PetscCall(DMDestroy(&da));
  PetscCall(DDFinalize());
  return 0;
}
