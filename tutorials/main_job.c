static const char help[] = "The main job: a PETSc solver makes Poisson data on a DMDA, ddnn trains a domain-decomposed CNN surrogate.\n\n"
                           "  -nsamples <n>     samples to generate (the last -ntest are held out)\n"
                           "  -ntest <n>        held-out samples\n"
                           "  -grid <n>         grid points per side\n"
                           "  -data <file>      HDF5 file of the samples (generated if missing or -regenerate)\n"
                           "  -epochs <n>       training epochs\n"
                           "  -batch <n>        batch size\n"
                           "  -checkpoint <f>   checkpoint file written at the end of every epoch\n"
                           "  -restart          continue from the checkpoint\n"
                           "  -require_progress fail unless the training loss fell and the surrogate beats the trivial predictor\n"
                           "  -dataset_cache_limit <MiB> memory per rank for the samples kept in memory (default 1024; 0: read every batch)\n"
                           "  -eval_grid <n>    after training, also evaluate on the held-out samples solved on an n x n grid\n"
                           "  -eval_data <file> HDF5 file of those samples (default <data>_grid<n>.h5; generated if missing)\n"
                           "  -dd_backend /gpu/cuda  train on the GPU: the batch tensors, the network and the optimizer in device memory\n"
                           "The network and the optimizer come from the options database (share/ddnn/main_job.opts).\n";
/*
  1. Data. For every sample, a random coefficient field kappa(x, y) = exp(sum of a few random
     Fourier modes), and the solution u of -div(kappa grad u) = 1 on the unit square with u = 0 on
     the boundary, solved with KSP on a DMDA spread over the ranks. Inputs log(kappa) and targets
     u are written sample by sample with parallel HDF5 (datasets "input" and "target", shape
     (S, 1, n, n)), each rank writing the rows it owns.
  2. Training. The surrogate network (-net_...) is built from the options database and trained
     on the first S - ntest samples with the domain decomposition of the DMDA: the batch tensors
     are split along H and W exactly as the simulation's grid, so every rank reads only its piece.
  3. Evaluation. The relative L2 error of the surrogate on the held-out samples, against the
     trivial predictor (the mean training target).
  4. With -eval_grid n: resolution invariance. The held-out samples (the same coefficient fields:
     same seeds, same law) are solved again on an n x n DMDA; a second network is built from the
     same options at that shape, gets the trained weights through DDNetSaveWeights() and
     DDNetLoadWeights(), and its relative L2 error there is reported. Grid-independent networks
     (the FNO of main_job_fno.opts; a fully convolutional U-Net too, whose kernels then see a finer
     spacing than in training) run at any n their layers accept.

    mpiexec -n 2 ./main_job -options_file share/ddnn/main_job.opts
    mpiexec -n 2 ./main_job -options_file share/ddnn/main_job.opts -dd_backend /gpu/cuda -float32   (on a GPU)
*/
#include <ddnn.h>
#include <petscksp.h>
#include <unistd.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/resource.h>

typedef struct {
  PetscInt  n;
  PetscReal a[6][6];
} Field;

/* log kappa = sum_{i,j < 4} a_ij cos(pi i x) cos(pi j y) / (1 + i^2 + j^2), a_ij ~ U(-1.5, 1.5) */
static PetscReal LogKappa(const Field *f, PetscReal x, PetscReal y)
{
  PetscReal v = 0;
  for (PetscInt i = 0; i < 4; i++)
    for (PetscInt j = 0; j < 4; j++) v += f->a[i][j] * PetscCosReal(PETSC_PI * i * x) * PetscCosReal(PETSC_PI * j * y) / (1.0 + i * i + j * j);
  return 2.0 * v;
}

static PetscErrorCode SolveSample(DM da, KSP ksp, Mat A, Vec b, Vec u, Vec lk, PetscInt s)
{
  DMDALocalInfo info;
  Field         f;
  PetscRandom   r;
  PetscReal     h;

  PetscFunctionBeginUser;
  PetscCall(PetscRandomCreate(PETSC_COMM_SELF, &r));
  PetscCall(PetscRandomSetInterval(r, -1.5, 1.5));
  PetscCall(PetscRandomSetSeed(r, (unsigned long)(1000 + s)));
  PetscCall(PetscRandomSeed(r));
  for (PetscInt i = 0; i < 6; i++)
    for (PetscInt j = 0; j < 6; j++) PetscCall(PetscRandomGetValueReal(r, &f.a[i][j]));
  PetscCall(PetscRandomDestroy(&r));
  PetscCall(DMDAGetLocalInfo(da, &info));
  h = 1.0 / (info.mx - 1);
  PetscCall(MatZeroEntries(A));
  {
    PetscScalar **bb, **kk;
    PetscCall(DMDAVecGetArray(da, b, &bb));
    PetscCall(DMDAVecGetArray(da, lk, &kk));
    for (PetscInt j = info.ys; j < info.ys + info.ym; j++)
      for (PetscInt i = info.xs; i < info.xs + info.xm; i++) {
        MatStencil  row = {.i = i, .j = j}, col[5];
        PetscScalar v[5];
        PetscReal   x = i * h, y = j * h;
        kk[j][i]      = LogKappa(&f, x, y);
        if (i == 0 || j == 0 || i == info.mx - 1 || j == info.my - 1) {
          v[0]     = 1.0;
          col[0]   = row;
          bb[j][i] = 0;
          PetscCall(MatSetValuesStencil(A, 1, &row, 1, col, v, INSERT_VALUES));
          continue;
        }
        /* harmonic-free arithmetic averages of kappa at the faces */
        PetscReal ke = 0.5 * (PetscExpReal(LogKappa(&f, x, y)) + PetscExpReal(LogKappa(&f, x + h, y)));
        PetscReal kw = 0.5 * (PetscExpReal(LogKappa(&f, x, y)) + PetscExpReal(LogKappa(&f, x - h, y)));
        PetscReal kn = 0.5 * (PetscExpReal(LogKappa(&f, x, y)) + PetscExpReal(LogKappa(&f, x, y + h)));
        PetscReal ks = 0.5 * (PetscExpReal(LogKappa(&f, x, y)) + PetscExpReal(LogKappa(&f, x, y - h)));
        PetscInt  n  = 0;
        col[n].i = i;     col[n].j = j;     v[n++] = (ke + kw + kn + ks) / (h * h);
        col[n].i = i + 1; col[n].j = j;     v[n++] = -ke / (h * h);
        col[n].i = i - 1; col[n].j = j;     v[n++] = -kw / (h * h);
        col[n].i = i;     col[n].j = j + 1; v[n++] = -kn / (h * h);
        col[n].i = i;     col[n].j = j - 1; v[n++] = -ks / (h * h);
        PetscCall(MatSetValuesStencil(A, 1, &row, n, col, v, INSERT_VALUES));
        bb[j][i] = 1.0;
      }
    PetscCall(DMDAVecRestoreArray(da, b, &bb));
    PetscCall(DMDAVecRestoreArray(da, lk, &kk));
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPSolve(ksp, b, u));
  PetscCall(VecScale(u, 10.0)); /* targets of order one */
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The data file is written like a checkpoint: into "<file>.tmp" (a stale one from a killed run is
  removed first), and renamed to <file> only once complete (DDFileCommit() syncs it to disk first),
  so an interrupted generation never leaves a file that a later run would train on; each dataset is
  also marked incomplete until its last sample is written and then gets a content checksum, both
  checked by DDDatasetSetUp(). A path that exists and is not a regular file is never replaced.
*/
static PetscErrorCode GenerateData(DM da, const char *file, PetscInt s0, PetscInt S)
{
  Mat      A;
  Vec      b, u, lk;
  KSP      ksp;
  DDTensor tu, tk;
  double   t0 = MPI_Wtime();
  char     tmp[PETSC_MAX_PATH_LEN + 8];

  PetscFunctionBeginUser;
  PetscCall(PetscSNPrintf(tmp, sizeof(tmp), "%s.tmp", file));
  PetscCall(DDFileCheckWritable(PETSC_COMM_WORLD, file)); /* both paths missing or regular files */
  { /* a fresh temporary file: the datasets are written slice by slice into it */
    PetscMPIInt rank;
    PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
    if (!rank) unlink(tmp);
    PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
  }
  PetscCall(DMCreateMatrix(da, &A));
  PetscCall(DMCreateGlobalVector(da, &u));
  PetscCall(VecDuplicate(u, &b));
  PetscCall(VecDuplicate(u, &lk));
  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetType(ksp, KSPCG));
  PetscCall(KSPSetTolerances(ksp, 1e-10, PETSC_DEFAULT, PETSC_DEFAULT, PETSC_DEFAULT));
  PetscCall(KSPSetOptionsPrefix(ksp, "data_"));
  PetscCall(KSPSetFromOptions(ksp));
  /* the solution and the coefficient as tensors on the DMDA's decomposition, without copies */
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &tu));
  PetscCall(DDTensorCreateFromDMDA(da, DD_FLOAT64, &tk));
  { /* a write that fails (a full disk) removes the temporary, which would otherwise stay and fill the disk */
    PetscErrorCode ierr = PETSC_SUCCESS;
    for (PetscInt s = 0; s < S && !ierr; s++) {
      PetscCall(SolveSample(da, ksp, A, b, u, lk, s0 + s)); /* sample s0 + s: its coefficient field's seed */
      PetscCall(DDTensorPlaceVec(tu, u));
      PetscCall(DDTensorPlaceVec(tk, lk));
      ierr = DDTensorWriteHDF5Slice(tk, tmp, "input", s, S);
      if (!ierr) ierr = DDTensorWriteHDF5Slice(tu, tmp, "target", s, S);
      PetscCall(DDTensorResetVec(tu, u));
      PetscCall(DDTensorResetVec(tk, lk));
    }
    if (ierr) {
      PetscMPIInt rank;
      PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
      if (!rank) unlink(tmp);
      PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
      PetscCall(ierr);
    }
  }
  PetscCall(DDFileCommit(PETSC_COMM_WORLD, tmp, file));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "data: %" PetscInt_FMT " Poisson solves with random coefficients written to %s in %.1f s\n", S, file, MPI_Wtime() - t0));
  PetscCall(DDTensorDestroy(&tu));
  PetscCall(DDTensorDestroy(&tk));
  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&u));
  PetscCall(VecDestroy(&b));
  PetscCall(VecDestroy(&lk));
  PetscCall(MatDestroy(&A));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Two paths that name the same file (the same file when both exist; otherwise the same absolute path, the
  directory resolved) are refused: -checkpoint equal to -data would replace the data with the checkpoint
*/
static PetscErrorCode CheckDistinctPaths(const char *na, const char *a, const char *nb, const char *b)
{
  PetscMPIInt rank;
  int         same = 0;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  if (!rank) {
    struct stat sa, sb;
    if (!stat(a, &sa) && !stat(b, &sb)) same = sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    else {
      char        ra[2 * PETSC_MAX_PATH_LEN], rb[2 * PETSC_MAX_PATH_LEN];
      const char *p[2] = {a, b};
      char       *r[2] = {ra, rb};
      for (int i = 0; i < 2; i++) { /* the directory resolved, then the file's name */
        char        dir[PETSC_MAX_PATH_LEN], real[PETSC_MAX_PATH_LEN];
        const char *slash = strrchr(p[i], '/');
        if (slash) PetscCall(PetscSNPrintf(dir, sizeof(dir), "%.*s", (int)(slash - p[i]) + (slash == p[i]), p[i]));
        else PetscCall(PetscStrncpy(dir, ".", sizeof(dir)));
        if (!realpath(dir, real)) PetscCall(PetscStrncpy(real, dir, sizeof(real)));
        PetscCall(PetscSNPrintf(r[i], sizeof(ra), "%s/%s", real, slash ? slash + 1 : p[i]));
      }
      same = !strcmp(ra, rb);
    }
  }
  PetscCallMPI(MPI_Bcast(&same, 1, MPI_INT, 0, PETSC_COMM_WORLD));
  PetscCheck(!same, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "%s \"%s\" and %s \"%s\" name the same file: give them different paths", na, a, nb, b);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a batch tensor (B, 1, n, n) split like the DMDA, in the memory of the default backend (-dd_backend /gpu/cuda: the GPU's, so that the whole network trains there) */
static PetscErrorCode BatchTensor(DM da, PetscInt B, PetscInt n, DDDataType dt, DDTensor *t)
{
  DDPartition     p;
  const PetscInt *lx, *ly;
  PetscInt        m, nn, shape[4] = {B, 1, n, n};
  const char     *bname;
  DDBackend       be;
  DDMemType       mt;

  PetscFunctionBeginUser;
  PetscCall(DMDAGetInfo(da, NULL, NULL, NULL, NULL, &m, &nn, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
  PetscCall(DMDAGetOwnershipRanges(da, &lx, &ly, NULL));
  PetscCall(DDPartitionCreateFromDMDA(da, 2, &p));
  PetscCall(DDTensorCreate(PETSC_COMM_WORLD, t));
  PetscCall(DDTensorSetPartition(*t, p));
  PetscCall(DDTensorSetShape(*t, 4, shape));
  PetscCall(DDTensorSetDataType(*t, dt));
  PetscCall(DDTensorSetOwnershipRanges(*t, 2, ly));
  PetscCall(DDTensorSetOwnershipRanges(*t, 3, lx));
  PetscCall(DDBackendGetDefault(&bname));
  PetscCall(DDBackendGet(bname, &be));
  PetscCall(DDBackendGetMemType(be, &mt));
  PetscCall(DDTensorSetMemType(*t, mt));
  PetscCall(DDTensorSetUp(*t));
  PetscCall(DDPartitionDestroy(&p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* relative L2 error of the network's prediction on every held-out sample, and of the trivial predictor
   (the mean training target; not computed when train is NULL) */
static PetscErrorCode HeldOutError(DDNet net, DDDataset test, DDDataset train, DDTensor xs[], PetscInt B, const char *predname, PetscReal *err, PetscReal *trivial)
{
  PetscInt  S, St;
  DDTensor    pred, mean, diff;
  DDPrimitive T = NULL; /* the prediction onto the target's partition (-net_distribution auto may choose another) */
  PetscReal   enet = 0, etriv = 0;

  PetscFunctionBeginUser;
  PetscCall(DDNetSetTraining(net, PETSC_FALSE));
  PetscCall(DDNetGetLayerOutput(net, predname, &pred));
  PetscCall(DDTensorDuplicate(xs[1], &mean));
  PetscCall(DDTensorDuplicate(xs[1], &diff));
  PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &T));
  PetscCall(DDPrimitiveSetType(T, DDPRIMITIVEREPARTITION));
  PetscCall(DDPrimitiveSetUp(T, pred, diff));
  if (train) { /* mean training target, broadcast over the batch */
    PetscCall(DDDatasetGetNumSamples(train, &St));
    PetscCall(DDDatasetShuffle(train, 0));
    PetscCall(DDTensorZeroEntries(mean));
    for (PetscInt b = 0; b + B <= St; b += B) {
      PetscCall(DDDatasetReadBatch(train, 1, b, B, xs[1]));
      PetscCall(DDTensorAXPY(mean, 1.0, xs[1]));
    }
    { /* average over the batch rows too (the batch tensors are plain, without halo) */
      void      *a;
      DDDataType dt;
      PetscInt   st[4], n[4], strides[4];
      PetscCall(DDTensorGetDataType(mean, &dt));
      PetscCall(DDTensorGetCorners(mean, st, n));
      PetscCall(DDTensorGetLocalStrides(mean, strides));
      PetscCall(DDTensorGetArray(mean, &a));
      for (PetscInt i = 0; i < n[2] * n[3]; i++) {
        PetscReal s = 0;
        for (PetscInt r = 0; r < n[0]; r++) s += dt == DD_FLOAT32 ? ((float *)a)[r * strides[0] + i] : ((double *)a)[r * strides[0] + i];
        s /= B * (St / B);
        for (PetscInt r = 0; r < n[0]; r++) {
          if (dt == DD_FLOAT32) ((float *)a)[r * strides[0] + i] = (float)s;
          else ((double *)a)[r * strides[0] + i] = s;
        }
      }
      PetscCall(DDTensorRestoreArray(mean, &a));
    }
  }
  PetscCall(DDDatasetGetNumSamples(test, &S));
  PetscCall(DDDatasetShuffle(test, 0));
  PetscInt nb = 0;
  for (PetscInt b = 0; b + B <= S; b += B, nb++) {
    PetscReal nu, nd;
    PetscCall(DDDatasetReadBatch(test, 0, b, B, xs[0]));
    PetscCall(DDDatasetReadBatch(test, 1, b, B, xs[1]));
    PetscCall(DDNetForward(net, 2, xs));
    PetscCall(DDTensorNorm(xs[1], NORM_2, &nu));
    PetscCall(DDPrimitiveApply(T, pred, diff));
    PetscCall(DDTensorAXPY(diff, -1.0, xs[1]));
    PetscCall(DDTensorNorm(diff, NORM_2, &nd));
    enet += nd / nu;
    if (!train) continue;
    PetscCall(DDTensorCopy(mean, diff));
    PetscCall(DDTensorAXPY(diff, -1.0, xs[1]));
    PetscCall(DDTensorNorm(diff, NORM_2, &nd));
    etriv += nd / nu;
  }
  *err = enet / nb;
  if (trivial) *trivial = train ? etriv / nb : -1;
  PetscCall(DDNetSetTraining(net, PETSC_TRUE));
  PetscCall(DDTensorDestroy(&mean));
  PetscCall(DDTensorDestroy(&diff));
  PetscCall(DDPrimitiveDestroy(&T));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Resolution invariance (-eval_grid): the held-out samples s0, ..., s0 + ntest - 1 (the same
  coefficient fields as the training grid's held-out set) solved on an ng x ng DMDA, and a network
  built from the same options at that shape. Set up before training, so that a network that
  cannot run at ng (a spectral layer's modes, pooling) is an error before any work is done; it
  gets the trained weights after training (EvalGridError()).
*/
typedef struct {
  DM        da;
  DDNet     net;
  DDDataset test;
  DDTensor  xs[2];
} EvalGrid;

/* The DMDA's process grid for an n x n grid on size ranks, chosen as PETSc 3.18's DMSetUp_DA_2D does
   (m near sqrt(size) dividing it); a grid with fewer points than processes in a direction is refused
   here with the option's name instead of PETSc's "Partition in y direction is too fine". */
static PetscErrorCode CheckGridForRanks(const char *opt, PetscInt n)
{
  PetscMPIInt size;
  PetscInt    m, k;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  m = (PetscInt)(0.5 + PetscSqrtReal((PetscReal)size));
  if (m < 1) m = 1;
  while (m > 0 && size % m) m--;
  k = size / m;
  PetscCheck(n >= m && n >= k, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "%s %" PetscInt_FMT " is too small for %d ranks: the DMDA splits the grid over %" PetscInt_FMT " x %" PetscInt_FMT " processes and needs at least one point per process in each direction", opt, n, size, m, k);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode EvalGridSetUp(PetscInt ng, const char *efile, PetscBool regenerate, PetscInt s0, PetscInt ntest, PetscInt B, DDDataType dt, EvalGrid *E)
{
  const char *fields[] = {"input", "target"};
  PetscInt    total;
  int         exists = 0;
  PetscMPIInt rank;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCall(CheckGridForRanks("-eval_grid", ng));
  PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, ng, ng, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &E->da));
  PetscCall(DMSetUp(E->da));
  PetscCall(BatchTensor(E->da, B, ng, dt, &E->xs[0]));
  PetscCall(BatchTensor(E->da, B, ng, dt, &E->xs[1]));
  PetscCall(DDNetCreate(PETSC_COMM_WORLD, &E->net));
  PetscCall(DDNetSetFromOptions(E->net));
  PetscCall(DDNetSetUp(E->net, 2, E->xs));
  if (!rank) exists = access(efile, F_OK) == 0;
  PetscCallMPI(MPI_Bcast(&exists, 1, MPI_INT, 0, PETSC_COMM_WORLD));
  if (!exists || regenerate) PetscCall(GenerateData(E->da, efile, s0, ntest));
  else PetscCall(PetscPrintf(PETSC_COMM_WORLD, "eval data: reusing %s (-regenerate to make it again)\n", efile));
  PetscCall(DDDatasetCreate(PETSC_COMM_WORLD, &E->test));
  PetscCall(DDDatasetSetFile(E->test, efile));
  PetscCall(DDDatasetSetFields(E->test, 2, fields));
  PetscCall(DDDatasetSetUp(E->test));
  PetscCall(DDDatasetGetNumSamples(E->test, &total));
  PetscCheck(total == ntest, PETSC_COMM_WORLD, PETSC_ERR_FILE_UNEXPECTED, "-eval_data %s has %" PetscInt_FMT " samples, not the %" PetscInt_FMT " held-out ones (-regenerate to make it again)", efile, total, ntest);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the trained weights (saved to wfile) onto the -eval_grid network, and its held-out relative L2 error */
static PetscErrorCode EvalGridError(EvalGrid *E, PetscInt B, const char *pred, const char *wfile, PetscReal *err)
{
  PetscFunctionBeginUser;
  PetscCall(DDNetLoadWeights(E->net, wfile));
  PetscCall(HeldOutError(E->net, E->test, NULL, E->xs, B, pred, err, NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode EvalGridDestroy(EvalGrid *E)
{
  PetscFunctionBeginUser;
  PetscCall(DDNetDestroy(&E->net));
  PetscCall(DDTensorDestroy(&E->xs[0]));
  PetscCall(DDTensorDestroy(&E->xs[1]));
  PetscCall(DDDatasetDestroy(&E->test));
  PetscCall(DMDestroy(&E->da));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  DM          da;
  PetscInt    S = 160, ntest = 32, n = 32, epochs = 20, B = 8, egrid = 0, total;
  char        file[PETSC_MAX_PATH_LEN] = "main_job_data.h5", ckpt[PETSC_MAX_PATH_LEN] = "main_job_checkpoint.h5", pred[64] = "out";
  char        efile[PETSC_MAX_PATH_LEN] = "", wfile[PETSC_MAX_PATH_LEN + 16];
  PetscBool   eval = PETSC_FALSE;
  EvalGrid    E    = {NULL, NULL, NULL, {NULL, NULL}};
  PetscBool   regenerate = PETSC_FALSE, restart = PETSC_FALSE, f32 = PETSC_TRUE, progress = PETSC_FALSE;
  PetscReal   firstloss = -1, lastloss = -1;
  PetscInt    cachemb   = 1024;
  PetscBool   cacheset  = PETSC_FALSE;
  DDNet       net;
  DDOptimizer opt;
  DDDataset   train, test;
  DDTensor    xs[3] = {NULL, NULL, NULL};
  PetscMPIInt size, rank;

  PetscCall(DDInitialize(&argc, &argv, NULL, help));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscOptionsBegin(PETSC_COMM_WORLD, NULL, "Main job options", NULL);
  PetscCall(PetscOptionsInt("-nsamples", "Samples to generate", NULL, S, &S, NULL));
  PetscCall(PetscOptionsInt("-ntest", "Held-out samples", NULL, ntest, &ntest, NULL));
  PetscCall(PetscOptionsInt("-grid", "Grid points per side", NULL, n, &n, NULL));
  PetscCall(PetscOptionsInt("-epochs", "Epochs", NULL, epochs, &epochs, NULL));
  PetscCall(PetscOptionsInt("-batch", "Batch size", NULL, B, &B, NULL));
  PetscCall(PetscOptionsString("-data", "HDF5 data file", NULL, file, file, sizeof(file), NULL));
  PetscCall(PetscOptionsString("-checkpoint", "Checkpoint file", NULL, ckpt, ckpt, sizeof(ckpt), NULL));
  PetscCall(PetscOptionsString("-prediction_layer", "Layer whose output is the prediction", NULL, pred, pred, sizeof(pred), NULL));
  PetscCall(PetscOptionsBool("-regenerate", "Regenerate the data", NULL, regenerate, &regenerate, NULL));
  PetscCall(PetscOptionsBool("-restart", "Continue from the checkpoint", NULL, restart, &restart, NULL));
  PetscCall(PetscOptionsBool("-float32", "Train in float32 (oneDNN kernels)", NULL, f32, &f32, NULL));
  PetscCall(PetscOptionsBool("-require_progress", "Fail unless the loss fell and the surrogate beats the trivial predictor", NULL, progress, &progress, NULL));
  PetscCall(PetscOptionsInt("-dataset_cache_limit", "Memory per rank for the samples kept in memory, MiB (0: read every batch from the file)", "DDDatasetSetCacheLimit", cachemb, &cachemb, &cacheset));
  PetscCall(PetscOptionsInt("-eval_grid", "After training, evaluate on the held-out samples solved on this grid", NULL, egrid, &egrid, &eval));
  PetscCall(PetscOptionsString("-eval_data", "HDF5 file of the held-out samples on the -eval_grid grid", NULL, efile, efile, sizeof(efile), NULL));
  PetscOptionsEnd();
  { /* the main job's own options decide which collectives every rank runs (-regenerate writes the data, -restart reads the checkpoint, ...): the same on every rank (an MPMD launch can give them differently), or an error on all */
    char all[4 * PETSC_MAX_PATH_LEN + 512];
    PetscCall(PetscSNPrintf(all, sizeof(all), "-nsamples %" PetscInt_FMT " -ntest %" PetscInt_FMT " -grid %" PetscInt_FMT " -epochs %" PetscInt_FMT " -batch %" PetscInt_FMT " -data %s -checkpoint %s -prediction_layer %s -regenerate %d -restart %d -float32 %d -require_progress %d -dataset_cache_limit %" PetscInt_FMT " -eval_grid %" PetscInt_FMT " -eval_data %s", S, ntest, n, epochs, B, file, ckpt, pred, (int)regenerate, (int)restart, (int)f32, (int)progress, cachemb, eval ? egrid : 0, efile));
    PetscCall(DDCheckSameString(PETSC_COMM_WORLD, "the main job's options", all));
  }
  PetscCall(CheckDistinctPaths("-data", file, "-checkpoint", ckpt));
  PetscCheck(epochs >= 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-epochs %" PetscInt_FMT " must be >= 0", epochs);
  PetscCheck(cachemb >= 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-dataset_cache_limit %" PetscInt_FMT " MiB must be >= 0 (0: read every batch from the file)", cachemb);
  PetscCheck(!eval || egrid >= 3, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-eval_grid %" PetscInt_FMT ": the evaluation grid needs at least 3 points per side (one interior point)", egrid);
  if (eval) {
    size_t len;
    PetscCall(PetscStrlen(file, &len));
    if (!efile[0]) { /* <data>_grid<n>.h5 beside the training data */
      PetscBool h5 = PETSC_FALSE;
      if (len > 3) PetscCall(PetscStrcmp(file + len - 3, ".h5", &h5));
      PetscCall(PetscSNPrintf(efile, sizeof(efile), "%.*s_grid%" PetscInt_FMT ".h5", (int)(h5 ? len - 3 : len), file, egrid));
    }
    PetscCall(PetscSNPrintf(wfile, sizeof(wfile), "%s.weights.h5", ckpt));
    PetscCall(CheckDistinctPaths("-data", file, "-eval_data", efile));
    PetscCall(CheckDistinctPaths("-checkpoint", ckpt, "-eval_data", efile));
    PetscCall(CheckDistinctPaths("-data", file, "the weights file (the checkpoint's name + .weights.h5)", wfile));
    PetscCall(CheckDistinctPaths("-eval_data", efile, "the weights file (the checkpoint's name + .weights.h5)", wfile));
    PetscCall(DDFileCheckWritable(PETSC_COMM_WORLD, efile));
    PetscCall(DDFileCheckWritable(PETSC_COMM_WORLD, wfile));
  }
  PetscCheck(B >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-batch %" PetscInt_FMT ": the batch size must be positive", B);
  PetscCheck(ntest >= B && S - ntest >= B, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-batch %" PetscInt_FMT " needs at least a batch of training and of held-out samples: -nsamples %" PetscInt_FMT " with -ntest %" PetscInt_FMT " gives %" PetscInt_FMT " and %" PetscInt_FMT, B, S, ntest, S - ntest, ntest);
  /* the checkpoint path must be writable (and not a device or directory) before any work is done */
  PetscCall(DDFileCheckWritable(PETSC_COMM_WORLD, ckpt));

  /* the simulation's grid: its decomposition is the network's */
  PetscCall(CheckGridForRanks("-grid", n));
  PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, n, n, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &da));
  PetscCall(DMSetUp(da));
  { /* -regenerate replaces the file (atomically, by a rename) only when it is a regular file */
    int exists = 0;
    if (!rank) exists = access(file, F_OK) == 0;
    PetscCallMPI(MPI_Bcast(&exists, 1, MPI_INT, 0, PETSC_COMM_WORLD));
    if (!exists || regenerate) PetscCall(GenerateData(da, file, 0, S));
    else PetscCall(PetscPrintf(PETSC_COMM_WORLD, "data: reusing %s (-regenerate to make it again)\n", file));
  }

  /* datasets: train on the first samples, hold out the last ones */
  {
    const char *fields[] = {"input", "target"};
    PetscCall(DDDatasetCreate(PETSC_COMM_WORLD, &train));
    PetscCall(DDDatasetSetFile(train, file));
    PetscCall(DDDatasetSetFields(train, 2, fields));
    PetscCall(DDDatasetSetUp(train));
    PetscCall(DDDatasetGetNumSamples(train, &total));
    PetscCall(DDDatasetDestroy(&train));
    PetscCheck(total > ntest, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "The data file has %" PetscInt_FMT " samples, not more than -ntest %" PetscInt_FMT, total, ntest);
    PetscCall(DDDatasetCreate(PETSC_COMM_WORLD, &train));
    PetscCall(DDDatasetSetFile(train, file));
    PetscCall(DDDatasetSetFields(train, 2, fields));
    PetscCall(DDDatasetSetRange(train, 0, total - ntest));
    if (cacheset) PetscCall(DDDatasetSetCacheLimit(train, (PetscInt64)cachemb << 20));
    PetscCall(DDDatasetSetUp(train));
    PetscCall(DDDatasetCreate(PETSC_COMM_WORLD, &test));
    PetscCall(DDDatasetSetFile(test, file));
    PetscCall(DDDatasetSetFields(test, 2, fields));
    PetscCall(DDDatasetSetRange(test, total - ntest, ntest));
    if (cacheset) PetscCall(DDDatasetSetCacheLimit(test, (PetscInt64)cachemb << 20));
    PetscCall(DDDatasetSetUp(test));
  }

  /* the network and the optimizer, from the options database */
  PetscCall(BatchTensor(da, B, n, f32 ? DD_FLOAT32 : DD_FLOAT64, &xs[0]));
  PetscCall(BatchTensor(da, B, n, f32 ? DD_FLOAT32 : DD_FLOAT64, &xs[1]));
  PetscCall(DDNetCreate(PETSC_COMM_WORLD, &net));
  PetscCall(DDNetSetFromOptions(net));
  PetscCall(DDNetSetUp(net, 2, xs));
  PetscCall(DDNetView(net, PETSC_VIEWER_STDOUT_WORLD));
  PetscCall(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  PetscCall(DDOptimizerSetFromOptions(opt));
  {
    PetscInt  np;
    DDTensor *ps, *gs;
    PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
    PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  }
  if (eval) PetscCall(EvalGridSetUp(egrid, efile, regenerate, total - ntest, ntest, B, f32 ? DD_FLOAT32 : DD_FLOAT64, &E));
  PetscCall(DDOptionsCheckUnused(PETSC_COMM_WORLD, NULL));
  if (restart) {
    PetscInt step, epoch;
    PetscCall(DDCheckpointLoad(net, opt, ckpt));
    PetscCall(DDOptimizerGetStepCount(opt, &step, &epoch));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "restarted from %s at epoch %" PetscInt_FMT " (step %" PetscInt_FMT ")\n", ckpt, epoch, step));
  }

  {
    PetscReal err, triv;
    PetscCall(HeldOutError(net, test, train, xs, B, pred, &err, &triv));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "before training: held-out relative error %.4f (trivial predictor %.4f)\n", (double)err, (double)triv));
  }
  PetscInt e0;
  PetscCall(DDOptimizerGetStepCount(opt, NULL, &e0));
  for (PetscInt e = e0; e < epochs; e++) {
    DDTrainStats st;
    PetscReal    lr, tl;
    PetscCall(DDOptimizerGetLearningRate(opt, &lr));
    PetscCall(DDNetTrainEpoch(net, opt, train, B, 17 + e, xs, &st));
    PetscCall(DDNetEvaluate(net, test, B, xs, &tl));
    if (firstloss < 0) firstloss = st.loss;
    lastloss = st.loss;
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "epoch %3" PetscInt_FMT "  train loss %.5e  test loss %.5e  lr %.2e  %7.1f samples/s  %6.2f s\n", e + 1, (double)st.loss, (double)tl, (double)lr, (double)st.samples_per_s, (double)st.seconds));
    PetscCall(DDCheckpointSave(net, opt, ckpt));
  }
  {
    PetscReal err, triv;
    PetscCall(HeldOutError(net, test, train, xs, B, pred, &err, &triv));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "held-out relative L2 error: surrogate %.4f, trivial predictor (mean field) %.4f, ratio %.3f\n", (double)err, (double)triv, (double)(err / triv)));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "checkpoint: %s\n", ckpt));
    if (eval) { /* the trained weights onto a network built at the -eval_grid shape */
      PetscReal eerr;
      PetscCall(DDNetSaveWeights(net, wfile));
      PetscCall(EvalGridError(&E, B, pred, wfile, &eerr));
      PetscCheck(!PetscIsInfOrNanReal(eerr), PETSC_COMM_WORLD, PETSC_ERR_FP, "The held-out error on the %" PetscInt_FMT " x %" PetscInt_FMT " grid is %g", egrid, egrid, (double)eerr);
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "held-out relative L2 error on a %" PetscInt_FMT " x %" PetscInt_FMT " grid (trained on %" PetscInt_FMT " x %" PetscInt_FMT ", weights %s): surrogate %.4f (on %" PetscInt_FMT " x %" PetscInt_FMT ": %.4f)\n", egrid, egrid, n, n, wfile, (double)eerr, n, n, (double)err));
    }
    { /* peak resident memory of the ranks */
      struct rusage ru;
      double        mine, mx;
      getrusage(RUSAGE_SELF, &ru);
      mine = ru.ru_maxrss / 1024.0;
      PetscCallMPI(MPI_Allreduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "peak resident memory per rank: %.1f MiB (max over %d ranks)\n", mx, size));
    }
    if (progress) {
      PetscCheck(firstloss >= 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONGSTATE, "-require_progress: no epoch was trained (-epochs %" PetscInt_FMT ", starting at epoch %" PetscInt_FMT ")", epochs, e0);
      PetscCheck(lastloss < firstloss, PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, "The training loss did not fall (%g then %g)", (double)firstloss, (double)lastloss);
      PetscCheck(err < triv, PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, "The surrogate (%g) does not beat the trivial predictor (%g)", (double)err, (double)triv);
    }
  }
  if (eval) PetscCall(EvalGridDestroy(&E));
  PetscCall(DDTensorDestroy(&xs[0]));
  PetscCall(DDTensorDestroy(&xs[1]));
  PetscCall(DDDatasetDestroy(&train));
  PetscCall(DDDatasetDestroy(&test));
  PetscCall(DDOptimizerDestroy(&opt));
  PetscCall(DDNetDestroy(&net));
  PetscCall(DMDestroy(&da));
  PetscCall(DDFinalize());
  return 0;
}
