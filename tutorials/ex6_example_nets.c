static const char help[] = "Example networks from options files: builds the network of share/ddnn/<net>.opts, makes\n"
                           "synthetic data on a batch or spatial partition, trains a few steps and prints the loss.\n\n"
                           "  -steps <n>               training steps (one fresh mini-batch each)\n"
                           "  -print_every <k>         print the loss every k steps\n"
                           "  -eval_batches <n>        held-out mini-batches evaluated before and after training\n"
                           "  -data_partition <p,...>  partition of the input (N, C, spatial...), e.g. 1,1,1,2 (default: -data_split)\n"
                           "  -float64                 train in double precision (reference kernels) instead of float32\n"
                           "  -require_progress        exit with an error unless the training loss fell\n"
                           "The options file holds the network (-net_...), the optimizer (-optimizer_...) and the data:\n"
                           "  -data_kind <patterns,phantoms>  oriented gratings per class (images), or 3-D ellipsoid phantoms (segmentation)\n"
                           "  -data_shape <C,H,W | C,D,H,W>   one sample's shape\n"
                           "  -data_classes <K>               classes\n"
                           "  -data_batch <B>                 mini-batch size\n"
                           "  -data_noise <s>                 amplitude of the uniform noise\n"
                           "  -data_phase <f>                 patterns: random phase in [0, 2 pi f)\n"
                           "  -data_seed <s>                  seed of the data\n"
                           "  -data_split <batch,spatial>     default partition: the batch, or the spatial dimensions, over all ranks\n"
                           "  -data_labels_on_root            patterns: the network gathers its features onto rank 0 (a repartition layer), so do the labels\n";
/*
  Example networks of paper 000 sec. 5, each an options file in share/ddnn/:

    mpiexec -n 2 ./ex6_example_nets -options_file share/ddnn/lenet5.opts -steps 20
    mpiexec -n 2 ./ex6_example_nets -options_file share/ddnn/vgg.opts -steps 20
    mpiexec -n 2 ./ex6_example_nets -options_file share/ddnn/resnet.opts -steps 20
    mpiexec -n 2 ./ex6_example_nets -options_file_yaml share/ddnn/resnet.yaml -steps 20
    mpiexec -n 4 ./ex6_example_nets -options_file share/ddnn/unet3d.opts -steps 20

  Data. As in the paper, the inputs are generated in parallel: every rank computes the entries of
  its own piece from the global index and a seed (the values do not depend on the partition), so
  the same run on any number of ranks sees the same mini-batches.
   - patterns: sample s has class k = label(s) in [0, K) and is the grating
       cos(2 pi f (u cos(theta_k) + v sin(theta_k)) + phi_s + c pi / 3),  theta_k = pi k / K,
     on the unit square (u down, v across), channel c phase-shifted, with a random phase phi_s in [0, 2 pi f) (-data_phase f),
     plus uniform noise (DDTensorSetRandomGlobal); MakeBatch() evaluates it separably (a sin/cos per
     row and column of a sample) straight into the local array. Labels (N) live with the logits: on the first
     worker of each batch slice (where DDLAYERFLATTEN gathers the features), or on rank 0 for a
     network that gathers its features there (-data_labels_on_root: resnet.opts).
   - phantoms: sample s holds 1 to 3 ellipsoids with random centers, semi-axes and intensities
     on a smooth random background, plus noise; the label of a voxel is 1 inside an ellipsoid,
     else 0. Labels (N, D, H, W) live with the logits (N, 2, D, H, W): on the input's partition.
  Training: DDOptimizer from the options (-optimizer_type ...), a fresh mini-batch every step.
  Evaluation: loss and accuracy (per image, or per voxel with the foreground's intersection over
  union) on held-out mini-batches, in evaluation mode, before and after training.
*/
#include <ddnn.h>
#include <stdint.h>

typedef struct {
  char      kind[32];
  PetscInt  nshape, shape[4]; /* one sample: C, spatial... */
  PetscInt  classes, batch;
  PetscReal noise, phase;
  PetscInt  seed;
  PetscBool labelsonroot;
} Data;

/* a uniform number in [0, 1) that depends only on its keys: SplitMix64 */
static uint64_t Mix(uint64_t z)
{
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static PetscReal U01(PetscInt64 seed, PetscInt64 s, PetscInt64 k)
{
  return (PetscReal)(Mix(Mix(Mix((uint64_t)seed) ^ (uint64_t)s) ^ (uint64_t)k) >> 11) * 0x1.0p-53;
}

/* patterns: the class and phase of sample s */
static PetscInt PatternClass(const Data *d, PetscInt64 s)
{
  PetscInt k = (PetscInt)(d->classes * U01(d->seed, s, 0));
  return k < d->classes ? k : d->classes - 1;
}

/* phantoms: sample s's ellipsoids (center, semi-axes as fractions of the box; intensity) */
typedef struct {
  PetscInt  n;
  PetscReal c[3][3], a[3][3], amp[3], bg[4];
} Phantom;
static void PhantomOf(const Data *d, PetscInt64 s, Phantom *p)
{
  p->n = 1 + (PetscInt)(3 * U01(d->seed, s, 0));
  if (p->n > 3) p->n = 3;
  for (PetscInt e = 0; e < p->n; e++) {
    for (PetscInt k = 0; k < 3; k++) {
      p->c[e][k] = 0.25 + 0.5 * U01(d->seed, s, 10 + 10 * e + k);
      p->a[e][k] = 0.12 + 0.18 * U01(d->seed, s, 13 + 10 * e + k);
    }
    p->amp[e] = 0.6 + 0.6 * U01(d->seed, s, 16 + 10 * e);
  }
  for (PetscInt k = 0; k < 4; k++) p->bg[k] = U01(d->seed, s, 50 + k);
}
/* intensity (without noise) and mask at voxel (z, y, x) */
static void PhantomVoxel(const Data *d, const Phantom *p, PetscInt z, PetscInt y, PetscInt x, PetscReal *val, PetscInt *inside)
{
  const PetscReal r[3] = {(z + 0.5) / d->shape[1], (y + 0.5) / d->shape[2], (x + 0.5) / d->shape[3]};
  PetscReal       v    = 0.25 * PetscSinReal(2 * PETSC_PI * (p->bg[0] * r[0] + p->bg[1] * r[1] + p->bg[2] * r[2] + p->bg[3])); /* smooth background */
  *inside              = 0;
  for (PetscInt e = 0; e < p->n; e++) {
    PetscReal q = 0;
    for (PetscInt k = 0; k < 3; k++) q += PetscSqr((r[k] - p->c[e][k]) / p->a[e][k]);
    if (q <= 1) {
      v += p->amp[e];
      *inside = 1;
    }
  }
  *val = v;
}

/*
  Direct indexing of a rank's piece: the storage offset of the row of entries g[0..last-1], g[last] =
  first, ... along the last dimension, and its stride. Two offsets per row whatever the storage
  format the network chose for the tensor (plain, channels-last, blocked): offset(j) = row + j stride.
*/
static PetscErrorCode RowOffset(DDTensor t, PetscInt g[], PetscInt last, PetscInt first, PetscInt n, PetscInt *row, PetscInt *stride)
{
  PetscInt next;

  PetscFunctionBeginUser;
  g[last] = first;
  PetscCall(DDTensorGetLocalOffset(t, g, row));
  *stride = 1;
  if (n > 1) {
    g[last] = first + 1;
    PetscCall(DDTensorGetLocalOffset(t, g, &next));
    *stride = next - *row;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* writes n values of a row (float32 or float64 storage) */
static void PutRow(DDDataType dt, void *a, PetscInt row, PetscInt stride, PetscInt n, const PetscReal v[])
{
  if (dt == DD_FLOAT32)
    for (PetscInt j = 0; j < n; j++) ((float *)a)[row + j * stride] = (float)v[j];
  else
    for (PetscInt j = 0; j < n; j++) ((double *)a)[row + j * stride] = v[j];
}

/*
  Fills the mini-batch of samples first, first + 1, ...: every rank computes only its own piece
  of x (N, C, spatial...) and of the labels, from global indices, a row (the last dimension) at
  a time written straight into the local array (RowOffset()).
  Patterns: the grating is separable, cos(X_ci + Y_j) = cos X_ci cos Y_j - sin X_ci sin Y_j with
  X_ci = 2 pi f u_i cos(theta) + phi + c pi / 3 and Y_j = 2 pi f v_j sin(theta), so a sample costs
  one sin/cos per row and per column instead of a cos per pixel (the same values to round-off).
*/
static PetscErrorCode MakeBatch(const Data *d, PetscInt64 first, DDTensor x, DDTensor label, DDTensor noise)
{
  PetscInt   st[5], n[5], g[5], order, last, row, stride;
  DDDataType dt;
  void      *a;
  PetscReal *v, *cy, *sy;

  PetscFunctionBeginUser;
  PetscCall(DDTensorGetDataType(x, &dt));
  PetscCall(DDTensorGetOrder(x, &order));
  PetscCall(DDTensorGetCorners(x, st, n));
  last = order - 1;
  for (PetscInt k = 0; k < order; k++)
    if (!n[k]) n[0] = 0; /* an empty piece: no rows */
  PetscCall(PetscMalloc3(n[last], &v, n[last], &cy, n[last], &sy));
  PetscCall(DDTensorGetArray(x, &a));
  for (PetscInt i0 = st[0]; i0 < st[0] + n[0]; i0++) {
    const PetscInt64 s = first + i0;
    g[0]               = i0;
    if (order == 4) {
      /* the grating: the class, phase and direction once per sample, Y_j once per column, X_ci once per row */
      const PetscReal th = PETSC_PI * PatternClass(d, s) / d->classes, phi = 2 * PETSC_PI * d->phase * U01(d->seed, s, 1), k = 2 * PETSC_PI * 3.0;
      const PetscReal ct = PetscCosReal(th), sn = PetscSinReal(th);
      for (PetscInt j = 0; j < n[3]; j++) {
        const PetscReal y = k * (((st[3] + j) + 0.5) / d->shape[2]) * sn;
        cy[j]             = PetscCosReal(y);
        sy[j]             = PetscSinReal(y);
      }
      for (PetscInt i1 = st[1]; i1 < st[1] + n[1]; i1++)
        for (PetscInt i2 = st[2]; i2 < st[2] + n[2]; i2++) {
          const PetscReal X = k * ((i2 + 0.5) / d->shape[1]) * ct + phi + i1 * PETSC_PI / 3, cx = PetscCosReal(X), sx = PetscSinReal(X);
          for (PetscInt j = 0; j < n[3]; j++) v[j] = cx * cy[j] - sx * sy[j];
          g[1] = i1;
          g[2] = i2;
          PetscCall(RowOffset(x, g, 3, st[3], n[3], &row, &stride));
          PutRow(dt, a, row, stride, n[3], v);
        }
    } else {
      Phantom ph;
      PhantomOf(d, s, &ph);
      for (PetscInt i1 = st[1]; i1 < st[1] + n[1]; i1++)
        for (PetscInt i2 = st[2]; i2 < st[2] + n[2]; i2++)
          for (PetscInt i3 = st[3]; i3 < st[3] + n[3]; i3++) {
            for (PetscInt j = 0; j < n[4]; j++) {
              PetscInt in;
              PhantomVoxel(d, &ph, i2, i3, st[4] + j, &v[j], &in);
            }
            g[1] = i1;
            g[2] = i2;
            g[3] = i3;
            PetscCall(RowOffset(x, g, 4, st[4], n[4], &row, &stride));
            PutRow(dt, a, row, stride, n[4], v);
          }
    }
  }
  PetscCall(DDTensorRestoreArray(x, &a));
  PetscCall(PetscFree3(v, cy, sy));
  /* uniform noise, partition independent */
  PetscCall(DDTensorSetRandomGlobal(noise, 7919 * (PetscInt64)d->seed + first, -d->noise, d->noise));
  PetscCall(DDTensorAXPY(x, 1.0, noise));
  /* the labels: (N) classes or (N, D, H, W) masks */
  PetscCall(DDTensorGetOrder(label, &order));
  PetscCall(DDTensorGetCorners(label, st, n));
  last = order - 1;
  for (PetscInt k = 0; k < order; k++)
    if (!n[k]) n[0] = 0; /* an empty piece (e.g. a rank that holds no labels): no rows */
  PetscCall(PetscMalloc1(n[last], &v));
  PetscCall(DDTensorGetArray(label, &a));
  if (order == 1 && n[0]) { /* one row: the classes of the local samples */
    for (PetscInt j = 0; j < n[0]; j++) v[j] = (PetscReal)PatternClass(d, first + st[0] + j);
    PetscCall(RowOffset(label, g, 0, st[0], n[0], &row, &stride));
    PutRow(dt, a, row, stride, n[0], v);
  } else if (order > 1) {
    for (PetscInt i0 = st[0]; i0 < st[0] + n[0]; i0++) {
      Phantom ph;
      PhantomOf(d, first + i0, &ph);
      g[0] = i0;
      for (PetscInt i1 = st[1]; i1 < st[1] + n[1]; i1++)
        for (PetscInt i2 = st[2]; i2 < st[2] + n[2]; i2++) {
          for (PetscInt j = 0; j < n[3]; j++) {
            PetscReal val;
            PetscInt  in;
            PhantomVoxel(d, &ph, i1, i2, st[3] + j, &val, &in);
            v[j] = (PetscReal)in;
          }
          g[1] = i1;
          g[2] = i2;
          PetscCall(RowOffset(label, g, 3, st[3], n[3], &row, &stride));
          PutRow(dt, a, row, stride, n[3], v);
        }
    }
  }
  PetscCall(DDTensorRestoreArray(label, &a));
  PetscCall(PetscFree(v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The input x (B, C, spatial...) on the partition pshape (on ranks 0, 1, ...), and the labels
  distributed like the logits: (B) on the first worker of each batch slice for images, (B,
  spatial...) on x's partition for segmentations.
*/
static PetscErrorCode CreateTensors(const Data *d, const PetscInt pshape[], DDDataType dt, DDTensor *x, DDTensor *label)
{
  const PetscInt order = d->nshape + 1;
  PetscInt       shape[5], P = 1, lshape[5], lp[5];
  DDPartition    px, pl;
  PetscMPIInt   *ranks;

  PetscFunctionBeginUser;
  shape[0] = d->batch;
  for (PetscInt k = 0; k < d->nshape; k++) shape[k + 1] = d->shape[k];
  for (PetscInt k = 0; k < order; k++) P *= pshape[k];
  PetscCall(PetscMalloc1(P, &ranks));
  for (PetscInt i = 0; i < P; i++) ranks[i] = (PetscMPIInt)i;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order, pshape, P, ranks, &px));
  PetscCall(DDTensorCreateFromPartition(px, dt, order, shape, x));
  if (!strcmp(d->kind, "patterns")) {
    const PetscInt rest = P / pshape[0], Pl = d->labelsonroot ? 1 : pshape[0];
    for (PetscInt i = 0; i < Pl; i++) ranks[i] = (PetscMPIInt)(i * rest);
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, &Pl, Pl, ranks, &pl));
    PetscCall(DDTensorCreateFromPartition(pl, dt, 1, shape, label));
  } else {
    lshape[0] = shape[0];
    lp[0]     = pshape[0];
    for (PetscInt k = 2; k < order; k++) {
      lshape[k - 1] = shape[k];
      lp[k - 1]     = pshape[k];
    }
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order - 1, lp, P, ranks, &pl));
    PetscCall(DDTensorCreateFromPartition(pl, dt, order - 1, lshape, label));
  }
  PetscCall(DDPartitionDestroy(&px));
  PetscCall(DDPartitionDestroy(&pl));
  PetscCall(PetscFree(ranks));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* accuracy of argmax(logits) over dimension 1 against the labels, and the foreground's IoU (2 classes) */
static PetscErrorCode Accuracy(DDTensor logits, DDTensor label, PetscInt *correct, PetscInt *total, PetscInt *inter, PetscInt *uni)
{
  PetscInt        N, M, order;
  const PetscInt *shape;
  DDDataType      dt;
  size_t          es;
  char           *a = NULL, *b = NULL;
  PetscMPIInt     rank;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCall(DDTensorGetSize(logits, &N));
  PetscCall(DDTensorGetSize(label, &M));
  PetscCall(DDTensorGetShape(logits, &shape));
  PetscCall(DDTensorGetOrder(logits, &order));
  PetscCall(DDTensorGetDataType(logits, &dt));
  PetscCall(DDDataTypeGetSize(dt, &es));
  if (!rank) PetscCall(PetscMalloc2(N * es, &a, M * es, &b));
  PetscCall(DDTensorGatherToRoot(logits, 0, a));
  PetscCall(DDTensorGatherToRoot(label, 0, b));
  if (!rank) {
    const PetscInt C = shape[1], S = M / shape[0]; /* S: positions per sample */
    for (PetscInt i = 0; i < M; i++) {
      const PetscInt n = i / S, p = i % S;
      PetscInt       best = 0, t;
      PetscReal      bv   = -PETSC_MAX_REAL;
      for (PetscInt c = 0; c < C; c++) {
        const PetscInt  j = (n * C + c) * S + p;
        const PetscReal v = dt == DD_FLOAT32 ? ((float *)a)[j] : ((double *)a)[j];
        if (v > bv) {
          bv   = v;
          best = c;
        }
      }
      t = (PetscInt)(dt == DD_FLOAT32 ? ((float *)b)[i] : ((double *)b)[i]);
      *correct += best == t;
      *inter += best == 1 && t == 1;
      *uni += best == 1 || t == 1;
    }
    *total += M;
    PetscCall(PetscFree2(a, b));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* mean loss and accuracy on nb held-out mini-batches, in evaluation mode */
static PetscErrorCode Evaluate(DDNet net, const Data *d, PetscInt nb, const char *pred, DDTensor xs[], DDTensor noise, PetscReal *loss, PetscReal *acc, PetscReal *iou)
{
  DDTensor logits;
  PetscInt c = 0, t = 0, in = 0, un = 0, v[4];

  PetscFunctionBeginUser;
  PetscCall(DDNetSetTraining(net, PETSC_FALSE));
  PetscCall(DDNetGetLayerOutput(net, pred, &logits));
  *loss = 0;
  for (PetscInt b = 0; b < nb; b++) {
    PetscReal l;
    PetscCall(MakeBatch(d, 1000000000 + b * d->batch, xs[0], xs[1], noise));
    PetscCall(DDNetForward(net, 2, xs));
    PetscCall(DDNetGetLoss(net, &l));
    *loss += l / nb;
    PetscCall(Accuracy(logits, xs[1], &c, &t, &in, &un));
  }
  v[0] = c;
  v[1] = t;
  v[2] = in;
  v[3] = un;
  PetscCallMPI(MPI_Bcast(v, 4, MPIU_INT, 0, PETSC_COMM_WORLD));
  *acc = v[1] ? (PetscReal)v[0] / v[1] : 0;
  *iou = v[3] ? (PetscReal)v[2] / v[3] : 0;
  PetscCall(DDNetSetTraining(net, PETSC_TRUE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  Data        d = {.kind = "patterns", .nshape = 3, .shape = {1, 32, 32}, .classes = 10, .batch = 16, .noise = 0.5, .phase = 1, .seed = 1, .labelsonroot = PETSC_FALSE};
  char        split[32] = "batch", pred[64] = "out";
  PetscInt    steps = 20, every = 5, neval = 2, pshape[5], np = 5;
  PetscBool   f64 = PETSC_FALSE, progress = PETSC_FALSE, flg;
  PetscMPIInt size;
  DDNet       net;
  DDOptimizer opt;
  DDTensor    xs[2], noise;
  PetscReal  *losses, l0, a0, i0, l1, a1, i1;
  double      t0, t1, tdata = 0, td;

  PetscCall(DDInitialize(&argc, &argv, NULL, help));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscOptionsBegin(PETSC_COMM_WORLD, NULL, "Example networks", NULL);
  PetscCall(PetscOptionsInt("-steps", "Training steps", NULL, steps, &steps, NULL));
  PetscCall(PetscOptionsInt("-print_every", "Print the loss every k steps", NULL, every, &every, NULL));
  PetscCall(PetscOptionsInt("-eval_batches", "Held-out mini-batches", NULL, neval, &neval, NULL));
  PetscCall(PetscOptionsBool("-float64", "Double precision", NULL, f64, &f64, NULL));
  PetscCall(PetscOptionsBool("-require_progress", "Fail unless the training loss fell", NULL, progress, &progress, NULL));
  PetscCall(PetscOptionsString("-prediction_layer", "Layer whose output holds the logits", NULL, pred, pred, sizeof(pred), NULL));
  PetscCall(PetscOptionsString("-data_kind", "patterns or phantoms", NULL, d.kind, d.kind, sizeof(d.kind), NULL));
  d.nshape = 4;
  PetscCall(PetscOptionsIntArray("-data_shape", "One sample's shape (C, spatial...)", NULL, d.shape, &d.nshape, &flg));
  if (!flg) d.nshape = 3;
  PetscCall(PetscOptionsInt("-data_classes", "Classes", NULL, d.classes, &d.classes, NULL));
  PetscCall(PetscOptionsInt("-data_batch", "Mini-batch size", NULL, d.batch, &d.batch, NULL));
  PetscCall(PetscOptionsReal("-data_noise", "Noise amplitude", NULL, d.noise, &d.noise, NULL));
  PetscCall(PetscOptionsReal("-data_phase", "Random phase of the patterns, as a fraction of 2 pi", NULL, d.phase, &d.phase, NULL));
  PetscCall(PetscOptionsInt("-data_seed", "Seed of the data", NULL, d.seed, &d.seed, NULL));
  PetscCall(PetscOptionsString("-data_split", "batch or spatial", NULL, split, split, sizeof(split), NULL));
  PetscCall(PetscOptionsBool("-data_labels_on_root", "The labels live on rank 0 (the network gathers its features there)", NULL, d.labelsonroot, &d.labelsonroot, NULL));
  PetscCall(PetscOptionsIntArray("-data_partition", "Partition of the input (N, C, spatial...)", NULL, pshape, &np, &flg));
  PetscOptionsEnd();
  PetscCheck(!strcmp(d.kind, "patterns") || !strcmp(d.kind, "phantoms"), PETSC_COMM_WORLD, PETSC_ERR_ARG_UNKNOWN_TYPE, "-data_kind %s: patterns or phantoms", d.kind);
  PetscCheck(strcmp(d.kind, "patterns") || d.nshape == 3, PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "patterns are images: -data_shape C,H,W");
  PetscCheck(strcmp(d.kind, "phantoms") || (d.nshape == 4 && d.shape[0] == 1 && d.classes == 2), PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "phantoms are volumes with 2 classes: -data_shape 1,D,H,W -data_classes 2");
  PetscCheck(steps >= 1 && every >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-steps and -print_every must be positive");
  PetscCheck(d.batch >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-data_batch %" PetscInt_FMT ": the mini-batch size must be positive", d.batch);
  PetscCheck(d.classes >= 1 && neval >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-data_classes %" PetscInt_FMT " and -eval_batches %" PetscInt_FMT " must be positive", d.classes, neval);
  if (flg) {
    PetscInt P = 1;
    PetscCheck(np == d.nshape + 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "-data_partition needs %" PetscInt_FMT " entries (N, C, spatial...), not %" PetscInt_FMT, d.nshape + 1, np);
    for (PetscInt k = 0; k < np; k++) P *= pshape[k];
    PetscCheck(P <= size, PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "-data_partition has %" PetscInt_FMT " workers but there are %d ranks", P, size);
    PetscCheck(pshape[1] == 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-data_partition: this example does not split the channels");
  } else if (!strcmp(split, "batch")) { /* every rank a slice of the batch */
    for (PetscInt k = 0; k <= d.nshape; k++) pshape[k] = 1;
    pshape[0] = PetscMin(size, d.batch);
  } else { /* the spatial dimensions, as evenly as possible */
    int dims[3] = {0, 0, 0};
    PetscCheck(!strcmp(split, "spatial"), PETSC_COMM_WORLD, PETSC_ERR_ARG_UNKNOWN_TYPE, "-data_split %s: batch or spatial", split);
    PetscCallMPI(MPI_Dims_create(size, (int)d.nshape - 1, dims));
    pshape[0] = pshape[1] = 1;
    for (PetscInt k = 0; k < d.nshape - 1; k++) pshape[k + 2] = dims[k];
  }

  /* the data's tensors, the network and the optimizer */
  PetscCall(CreateTensors(&d, pshape, f64 ? DD_FLOAT64 : DD_FLOAT32, &xs[0], &xs[1]));
  PetscCall(DDNetCreate(PETSC_COMM_WORLD, &net));
  PetscCall(DDNetSetFromOptions(net));
  PetscCall(DDNetSetUp(net, 2, xs));
  PetscCall(DDTensorDuplicate(xs[0], &noise)); /* laid out like x, with the halo the network gave it */
  PetscCall(DDNetView(net, PETSC_VIEWER_STDOUT_WORLD));
  PetscCall(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  PetscCall(DDOptimizerSetFromOptions(opt));
  {
    PetscInt  n;
    DDTensor *ps, *gs;
    PetscCall(DDNetGetParameters(net, &n, &ps, &gs));
    PetscCall(DDOptimizerSetUp(opt, n, ps, gs));
  }
  PetscCall(DDOptionsCheckUnused(PETSC_COMM_WORLD, NULL));
  {
    char s[64] = "";
    for (PetscInt k = 0; k <= d.nshape; k++) PetscCall(PetscSNPrintf(s + strlen(s), sizeof(s) - strlen(s), "%s%" PetscInt_FMT, k ? "x" : "", pshape[k]));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "data: %s, batch %" PetscInt_FMT ", %" PetscInt_FMT " classes, input partition %s on %d rank(s), %s\n", d.kind, d.batch, d.classes, s, size, f64 ? "float64" : "float32"));
  }

  PetscCall(Evaluate(net, &d, neval, pred, xs, noise, &l0, &a0, &i0));
  PetscCall(PetscMalloc1(steps, &losses));
  t0 = MPI_Wtime();
  for (PetscInt s = 0; s < steps; s++) {
    td = MPI_Wtime();
    PetscCall(MakeBatch(&d, s * d.batch, xs[0], xs[1], noise));
    tdata += MPI_Wtime() - td;
    PetscCall(DDNetForward(net, 2, xs));
    PetscCall(DDNetGetLoss(net, &losses[s]));
    /* a diverged run must not end as a success (the loss is the same on every rank) */
    PetscCheck(!PetscIsInfOrNanReal(losses[s]), PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, "Training diverged: the loss is %g at step %" PetscInt_FMT "; lower -optimizer_lr, or run with -dd_check_finite to find the first layer and tensor that is not finite", (double)losses[s], s);
    PetscCall(DDNetZeroGradients(net));
    PetscCall(DDNetBackward(net, NULL));
    PetscCall(DDOptimizerStep(opt));
    if (s % every == 0 || s == steps - 1) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "step %4" PetscInt_FMT "  loss %.6f\n", s, (double)losses[s]));
  }
  t1 = MPI_Wtime();
  PetscCall(Evaluate(net, &d, neval, pred, xs, noise, &l1, &a1, &i1));
  /* the data generation (MakeBatch, local to each rank) separately: the slowest rank's total */
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &tdata, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%" PetscInt_FMT " steps in %.3f s (%.4f s/step; data %.3f s of it, training without data %.3f s)\n", steps, t1 - t0, (t1 - t0) / steps, tdata, t1 - t0 - tdata));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "held-out (%" PetscInt_FMT " batches): loss %.4f -> %.4f, accuracy %.3f -> %.3f", neval, (double)l0, (double)l1, (double)a0, (double)a1));
  if (!strcmp(d.kind, "phantoms")) PetscCall(PetscPrintf(PETSC_COMM_WORLD, ", foreground IoU %.3f -> %.3f", (double)i0, (double)i1));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
  {
    /* progress: the mean loss of the last quarter of the steps against that of the first */
    const PetscInt k = PetscMax(1, steps / 4);
    PetscReal      first = 0, last = 0;
    for (PetscInt s = 0; s < k; s++) {
      first += losses[s] / k;
      last += losses[steps - 1 - s] / k;
    }
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "training loss: mean of the first %" PetscInt_FMT " steps %.4f, of the last %" PetscInt_FMT " steps %.4f\n", k, (double)first, k, (double)last));
    if (progress) PetscCheck(last < first, PETSC_COMM_WORLD, PETSC_ERR_NOT_CONVERGED, "The training loss did not fall (%g over the first %" PetscInt_FMT " steps, %g over the last)", (double)first, k, (double)last);
  }
  PetscCall(PetscFree(losses));
  PetscCall(DDOptimizerDestroy(&opt));
  PetscCall(DDNetDestroy(&net));
  PetscCall(DDTensorDestroy(&xs[0]));
  PetscCall(DDTensorDestroy(&xs[1]));
  PetscCall(DDTensorDestroy(&noise));
  PetscCall(DDFinalize());
  return 0;
}
