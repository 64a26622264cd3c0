static const char help[] = "Tutorial 3: a distributed convolution applied to a DMDA Vec in place of a stencil.\n"
                           "Options: -da_grid_x, -da_grid_y (grid), -conv_view (print the layer)\n";
/*
  A 3x3 convolution is a 9-point stencil. Here a ddnn conv layer, its weights set to the 5-point
  Laplacian -Delta_h of the unit square,

        [    0      -1/hy^2          0   ]
        [ -1/hx^2  2/hx^2+2/hy^2  -1/hx^2 ]
        [    0      -1/hy^2          0   ]

  is applied to a DMDA Vec wrapped as a tensor without a copy, and compared with MatMult of
  the matrix PETSc assembles on the same DMDA.

  The DMDA holds the interior unknowns of a Dirichlet problem (hx = 1/(mx+1), hy = 1/(my+1)):
  neighbours outside the grid are zero, which is the convolution's zero padding. The layer exchanges the one-cell halo the
  kernel needs between the ranks (the DMDA's own ghost exchange is not used), so the two
  results agree to rounding on every point, boundaries and rank interfaces included.

    mpiexec -n 2 ./ex3_conv_stencil -da_grid_x 64 -da_grid_y 48
*/
#include <ddnn.h>
#include <petscksp.h>

/* A = -Delta_h with homogeneous Dirichlet conditions (only the neighbours inside the grid) */
static PetscErrorCode AssembleLaplacian(DM da, Mat A)
{
  DMDALocalInfo info;
  PetscReal     ax, ay;

  PetscFunctionBeginUser;
  PetscCall(DMDAGetLocalInfo(da, &info));
  ax = (info.mx + 1.0) * (info.mx + 1.0); /* 1/hx^2 */
  ay = (info.my + 1.0) * (info.my + 1.0);
  for (PetscInt j = info.ys; j < info.ys + info.ym; j++)
    for (PetscInt i = info.xs; i < info.xs + info.xm; i++) {
      MatStencil  row = {.i = i, .j = j}, col[5];
      PetscScalar v[5];
      PetscInt    n = 0;
      col[n].i = i;
      col[n].j = j;
      v[n++]   = 2 * ax + 2 * ay;
      if (i > 0) { col[n].i = i - 1; col[n].j = j; v[n++] = -ax; }
      if (i < info.mx - 1) { col[n].i = i + 1; col[n].j = j; v[n++] = -ax; }
      if (j > 0) { col[n].i = i; col[n].j = j - 1; v[n++] = -ay; }
      if (j < info.my - 1) { col[n].i = i; col[n].j = j + 1; v[n++] = -ay; }
      PetscCall(MatSetValuesStencil(A, 1, &row, n, col, v, INSERT_VALUES));
    }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  DM        da;
  Mat       A;
  Vec       u, Au, Ku;
  DDLayer   conv;
  DDTensor  layout, x, y, *params;
  PetscInt  k = 3, p = 1, np, mx, my;
  PetscReal diff, nrm, ax, ay;
  double    laplacian[9];

  PetscCall(DDInitialize(&argc, &argv, NULL, help));
  PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 40, 30, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &da));
  PetscCall(DMSetFromOptions(da));
  PetscCall(DMSetUp(da));
  PetscCall(DMDAGetInfo(da, NULL, &mx, &my, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
  ax = (mx + 1.0) * (mx + 1.0);
  ay = (my + 1.0) * (my + 1.0);
  { /* the stencil as conv weights (out, in, kh, kw), C order: row kh is the y offset, column kw the x offset */
    const double w[9] = {0, -ay, 0, -ax, 2 * ax + 2 * ay, -ax, 0, -ay, 0};
    for (int i = 0; i < 9; i++) laplacian[i] = w[i];
  }
  PetscCall(DMCreateMatrix(da, &A));
  PetscCall(AssembleLaplacian(da, A));
  PetscCall(DMCreateGlobalVector(da, &u));
  PetscCall(VecDuplicate(u, &Au));
  PetscCall(VecDuplicate(u, &Ku));
  PetscCall(VecSetRandom(u, NULL));
  PetscCall(MatMult(A, u, Au));

  /* the layer: conv 1 -> 1 channel, 3x3, zero padding 1, no bias; its weights are the stencil */
  PetscCall(DDLayerCreate(PETSC_COMM_WORLD, &conv));
  PetscCall(DDLayerSetOptionsPrefix(conv, "conv_"));
  PetscCall(DDLayerSetType(conv, DDLAYERCONV));
  PetscCall(DDLayerConvSetOutputChannels(conv, 1));
  PetscCall(DDLayerConvSetKernel(conv, 1, &k));
  PetscCall(DDLayerConvSetPadding(conv, 1, &p));
  PetscCall(DDLayerConvSetBias(conv, PETSC_FALSE));
  PetscCall(DDLayerSetFromOptions(conv));
  /* set up on a tensor laid out like the DMDA: the layer gives it the halo the kernel needs */
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &layout));
  PetscCall(DDLayerSetUp(conv, layout));
  PetscCall(DDLayerGetParameters(conv, &np, &params));
  PetscCall(DDTensorSetValuesGlobal(params[0], laplacian));
  PetscCall(DDLayerViewFromOptions(conv, NULL, "-conv_view"));

  /* the Vecs as tensors, without copies: x reads u, y writes Ku */
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &x));
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &y));
  PetscCall(DDTensorPlaceVec(x, u));
  PetscCall(DDTensorPlaceVec(y, Ku));
  PetscCall(DDLayerForward(conv, x, y));
  PetscCall(DDTensorResetVec(x, u));
  PetscCall(DDTensorResetVec(y, Ku));

  /* the convolution is the stencil */
  PetscCall(VecNorm(Au, NORM_INFINITY, &nrm));
  PetscCall(VecAXPY(Ku, -1.0, Au));
  PetscCall(VecNorm(Ku, NORM_INFINITY, &diff));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "conv layer (5-point Laplacian weights) vs MatMult on the DMDA: max |difference| %.3e, relative to max |A u| = %.4g: %.1e\n", (double)diff, (double)nrm, (double)(diff / nrm)));
  PetscCheck(diff <= 1e-13 * nrm, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "The convolution differs from the stencil by %g", (double)diff);

  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDTensorDestroy(&layout));
  PetscCall(DDLayerDestroy(&conv));
  PetscCall(VecDestroy(&u));
  PetscCall(VecDestroy(&Au));
  PetscCall(VecDestroy(&Ku));
  PetscCall(MatDestroy(&A));
  PetscCall(DMDestroy(&da));
  PetscCall(DDFinalize());
  return 0;
}
