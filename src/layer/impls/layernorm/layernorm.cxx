/*
  DDLAYERLAYERNORM: distributed layer normalization (torch.nn.LayerNorm), normalizing over the
  last k dimensions; paper 000 sec. 4.2.2 (normalization layers: local moments, then an
  all-sum-reduce over the workers the statistics span, as DDLAYERGROUPNORM).

  x of order d on Px; the leading d - k dimensions index the rows (batch-like: a split there
  needs no communication), the last k the m = prod(normalized shape) entries of each row:
    mean = (1/m) sum x,  var = (1/m) sum (x - mean)^2,  xhat = (x - mean) rstd,
    rstd = 1 / sqrt(var + eps),  y = w xhat + b  (w, b of the normalized shape)
  A split of the normalized dimensions all-sum-reduces (DDPRIMITIVEALLSUMREDUCE) per-row sums
  held in a float64 statistics tensor (leading shape, then 1, ..., 1, 2) replicated along them.
  Forward:  S1 = A(sum x); mean = S1/m; S2 = A(sum (x - mean)^2); rstd
  Backward: g = w dy; dw += B^* sum_rows dy xhat; db += B^* sum_rows dy;
            (G1, G2) = A(sum g, sum g xhat); dx = rstd (g - G1/m - xhat G2/m)
  The weight and bias live on the partition of the normalized dimensions (the workers with
  coordinate 0 in the leading ones), are broadcast to every worker (Pc -> Pw, aligned at the
  trailing dimension) and their gradients sum-reduced by the broadcast's adjoint, the pattern
  of ChannelParams (normcommon.hpp), whose worker copies, broadcast and reduction it uses on partitions
  of the k normalized dimensions set up here.
  The local loops (KernelTable<T>::lnsums, lnapply, lnbwdsums, lnbwdapply of the layer's backend
  chain; /cpu/ref's plain loops) run on a plain (C-order, halo-free) view of the rank's piece:
  R rows by M entries.
*/
#include <sys/ddcxx.hpp>
#include <layer/impls/batchnorm/normcommon.hpp>
#include <cmath>

using namespace ddnn;

namespace
{
struct LayerNorm {
  PetscInt              k = 0;  /* normalized dimensions */
  std::vector<PetscInt> nshape; /* normalized_shape, when given */
  PetscReal             eps = 1e-5;
  /* set-up */
  ChannelParams cp; /* Pc (the normalized dimensions' workers), Pw, the broadcast B: set up here for k dimensions */
  DDPrimitive   A = NULL;
  DDTensor    w = NULL, b = NULL; /* owned by the layer's parameter list */
  DDTensor    wh = NULL, bh = NULL, dwh = NULL, dbh = NULL, tmp = NULL, st = NULL;
  DDTensor    pm = NULL; /* the plain model layout */
  DDTensor    xc = NULL, yc = NULL, dyc = NULL, dxc = NULL;
  PetscInt    R = 0, M = 0; /* local rows, local entries per row */
  double      m = 0;        /* entries per row, global */
  /* the forward state */
  bool                xconformed = false, forwarded = false; /* the forward read the plain copy xc */
  std::vector<double> mean, rstd, q, q2;
};
} // namespace

static PetscErrorCode LayerNormGet(DDLayer l, LayerNorm **s, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERLAYERNORM, fn));
  *s = (LayerNorm *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerLayerNormSetDimensions - Number k of trailing dimensions a layer normalization normalizes over

  Logically collective

  Input Parameters:
+ l - a `DDLAYERLAYERNORM` layer
- k - positive, less than the input's order (the leading dimension indexes the samples)

  Options Database Key:
. -layer_layernorm_dims <k> - the number

  Notes:
  torch.nn.LayerNorm(normalized_shape) with len(normalized_shape) = k; either this or
  `DDLayerLayerNormSetNormalizedShape()` is required.

  Level: beginner

.seealso: `DDLAYERLAYERNORM`, `DDLayerLayerNormSetNormalizedShape()`, `DDLayerLayerNormSetEpsilon()`
@*/
PetscErrorCode DDLayerLayerNormSetDimensions(DDLayer l, PetscInt k)
DD_CXX_TRY
{
  LayerNorm *s;

  PetscFunctionBegin;
  PetscCall(LayerNormGet(l, &s, "DDLayerLayerNormSetDimensions"));
  PetscCheck(k >= 1 && k < DD_MAX_DIM, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Layer normalization over %" PetscInt_FMT " dimensions: give 1 to %d (-layer_layernorm_dims)", k, DD_MAX_DIM - 1);
  s->k = k;
  s->nshape.clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLayerNormSetNormalizedShape - The normalized shape (torch.nn.LayerNorm's normalized_shape)

  Logically collective

  Input Parameters:
+ l     - a `DDLAYERLAYERNORM` layer
. k     - its length, positive and less than the input's order
- shape - the extents, which must be the input's last k extents (checked at `DDLayerSetUp()`)

  Options Database Key:
. -layer_layernorm_normalized_shape <n1,...,nk> - the shape

  Level: beginner

.seealso: `DDLAYERLAYERNORM`, `DDLayerLayerNormSetDimensions()`
@*/
PetscErrorCode DDLayerLayerNormSetNormalizedShape(DDLayer l, PetscInt k, const PetscInt shape[])
DD_CXX_TRY
{
  LayerNorm *s;

  PetscFunctionBegin;
  PetscCall(LayerNormGet(l, &s, "DDLayerLayerNormSetNormalizedShape"));
  PetscCheck(k >= 1 && k < DD_MAX_DIM, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "A normalized shape of length %" PetscInt_FMT ": give 1 to %d extents (-layer_layernorm_normalized_shape)", k, DD_MAX_DIM - 1);
  PetscValidIntPointer(shape, 3);
  for (PetscInt j = 0; j < k; j++) PetscCheck(shape[j] >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Normalized shape entry %" PetscInt_FMT " is %" PetscInt_FMT "; extents must be positive (-layer_layernorm_normalized_shape)", j, shape[j]);
  s->k = k;
  s->nshape.assign(shape, shape + k);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLayerNormSetEpsilon - The eps added to the variance (default 1e-5)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERLAYERNORM` layer
- eps - positive and finite (NaN and inf are errors, `PETSC_ERR_ARG_OUTOFRANGE`)

  Options Database Key:
. -layer_layernorm_eps <eps> - the value

  Level: intermediate

.seealso: `DDLAYERLAYERNORM`
@*/
PetscErrorCode DDLayerLayerNormSetEpsilon(DDLayer l, PetscReal eps)
DD_CXX_TRY
{
  LayerNorm *s;

  PetscFunctionBegin;
  PetscCall(LayerNormGet(l, &s, "DDLayerLayerNormSetEpsilon"));
  PetscCheck(eps > 0 && !PetscIsInfOrNanReal(eps), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerLayerNormSetEpsilon(): Layer normalization eps %g must be positive and finite (-layer_layernorm_eps)", (double)eps);
  s->eps = eps;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode LayerNorm_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  LayerNorm *s = (LayerNorm *)l->data;
  PetscReal  v;
  PetscInt   k, sh[DD_MAX_DIM], n = DD_MAX_DIM;
  PetscBool  set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer layernorm options");
  PetscCall(PetscOptionsInt("-layer_layernorm_dims", "Number of trailing dimensions normalized", "DDLayerLayerNormSetDimensions", s->k, &k, &set));
  if (set) PetscCall(DDLayerLayerNormSetDimensions(l, k));
  PetscCall(PetscOptionsIntArray("-layer_layernorm_normalized_shape", "The normalized (trailing) shape", "DDLayerLayerNormSetNormalizedShape", sh, &n, &set));
  if (set) PetscCall(DDLayerLayerNormSetNormalizedShape(l, n, sh));
  PetscCall(PetscOptionsReal("-layer_layernorm_eps", "Added to the variance", "DDLayerLayerNormSetEpsilon", s->eps, &v, &set));
  if (set) PetscCall(DDLayerLayerNormSetEpsilon(l, v));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_Reset(DDLayer l)
{
  LayerNorm *s = (LayerNorm *)l->data;

  PetscFunctionBegin;
  s->w = s->b = NULL;
  s->forwarded = false;
  for (DDTensor *t : {&s->wh, &s->bh, &s->dwh, &s->dbh, &s->tmp, &s->st, &s->pm, &s->xc, &s->yc, &s->dyc, &s->dxc}) PetscCall(DDTensorDestroy(t));
  PetscCall(DDPrimitiveDestroy(&s->A));
  PetscCall(s->cp.Reset());
  s->R = s->M = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(LayerNorm_Reset(l));
  delete (LayerNorm *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A plain (default format, halo-free) tensor distributed as t */
static PetscErrorCode CreatePlain(DDTensor t, DDTensor *y)
{
  PetscFunctionBegin;
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)t), y));
  PetscCall(DDTensorSetPartition(*y, t->part));
  PetscCall(DDTensorSetShape(*y, t->order, t->shape));
  PetscCall(DDTensorSetDataType(*y, t->dtype));
  PetscCall(DDTensorSetEmptyPiecesAllowed(*y, PETSC_TRUE));
  for (PetscInt k = 0; k < t->order; k++) {
    std::vector<PetscInt> lx(t->part->shape[k]);
    for (PetscInt p = 0; p < t->part->shape[k]; p++) lx[p] = t->ranges[k][p + 1] - t->ranges[k][p];
    PetscCall(DDTensorSetOwnershipRanges(*y, k, lx.data()));
  }
  PetscCall(DDTensorSetMemType(*y, t->memtype));
  PetscCall(DDTensorSetUp(*y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  LayerNorm  *s    = (LayerNorm *)l->data;
  DDTensor    x    = xs[0], y;
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  DDPartition P    = x->part;
  const char *prefix;
  char        sx[128];

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  const PetscInt d = x->order, k = s->k, lead = d - k;
  PetscCheck(k > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs its normalized dimensions (DDLayerLayerNormSetDimensions() or -%slayer_layernorm_dims, or -%slayer_layernorm_normalized_shape)", prefix, prefix, prefix);
  PetscCheck(k < d, comm, PETSC_ERR_ARG_INCOMP, "Layer normalization over the last %" PetscInt_FMT " dimensions (-%slayer_layernorm_dims) of an input of order %" PetscInt_FMT " (shape %s): at least the first (batch) dimension must stay unnormalized", k, prefix, d, sx);
  if (!s->nshape.empty())
    for (PetscInt j = 0; j < k; j++) PetscCheck(s->nshape[j] == x->shape[lead + j], comm, PETSC_ERR_ARG_INCOMP, "The normalized shape (-%slayer_layernorm_normalized_shape) entry %" PetscInt_FMT " is %" PetscInt_FMT " but the input (shape %s) has extent %" PetscInt_FMT " there: it must be the input's last %" PetscInt_FMT " extents", prefix, j, s->nshape[j], sx, x->shape[lead + j], k);
  for (PetscInt j = 0; j < d; j++) PetscCheck(!x->replicated[j], comm, PETSC_ERR_ARG_INCOMP, "Layer normalization: the input cannot be replicated (dimension %" PetscInt_FMT "); its statistics would count the copies", j);
  s->m = 1;
  for (PetscInt j = lead; j < d; j++) s->m *= (double)x->shape[j];
  PetscCall(CreateLike(x, &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscCall(CreatePlain(x, &s->pm));
  s->R = s->M = 0;
  if (x->active) {
    s->R = s->M = 1;
    for (PetscInt j = 0; j < d; j++) (j < lead ? s->R : s->M) *= s->pm->layout.n[j];
  }
  /* the statistics: (leading shape, 1, ..., 1, 2), replicated along the split normalized dimensions */
  {
    PetscInt              shape[DD_MAX_DIM];
    std::vector<PetscInt> dims;
    for (PetscInt j = 0; j < d; j++) shape[j] = j < lead ? x->shape[j] : (j == d - 1 ? 2 : 1);
    PetscCall(DDTensorCreate(comm, &s->st));
    PetscCall(DDTensorSetPartition(s->st, P));
    PetscCall(DDTensorSetShape(s->st, d, shape));
    PetscCall(DDTensorSetDataType(s->st, DD_FLOAT64));
    PetscCall(DDTensorSetEmptyPiecesAllowed(s->st, PETSC_TRUE));
    for (PetscInt j = 0; j < d; j++) {
      if (P->shape[j] == 1) continue;
      if (j < lead) {
        std::vector<PetscInt> lx(P->shape[j]);
        for (PetscInt q = 0; q < P->shape[j]; q++) lx[q] = x->ranges[j][q + 1] - x->ranges[j][q];
        PetscCall(DDTensorSetOwnershipRanges(s->st, j, lx.data()));
      } else {
        PetscCall(DDTensorSetReplicated(s->st, j, PETSC_TRUE));
        dims.push_back(j);
      }
    }
    PetscCall(DDTensorSetUp(s->st));
    if (!dims.empty()) {
      PetscCall(DDPrimitiveCreate(comm, &s->A));
      PetscCall(DDPrimitiveSetType(s->A, DDPRIMITIVEALLSUMREDUCE));
      PetscCall(DDPrimitiveAllSumReduceSetDimensions(s->A, (PetscInt)dims.size(), dims.data()));
      PetscCall(DDPrimitiveSetUp(s->A, s->st, s->st));
    }
  }
  /* the parameters on Pc (the normalized dimensions' workers with leading coordinates 0), broadcast to Pw */
  {
    PetscInt Pk = 1, Po = 1;
    for (PetscInt j = lead; j < d; j++) Pk *= P->shape[j];
    for (PetscInt j = 0; j < lead; j++) Po *= P->shape[j];
    /* in C order the worker index is (leading index) Pk + (normalized index): P's ranks are Pw's, the first Pk Pc's */
    std::vector<PetscInt>    ps(P->shape + lead, P->shape + d), pw;
    std::vector<PetscMPIInt> rc(P->ranks, P->ranks + Pk), rw(P->ranks, P->ranks + P->size);
    PetscCall(MakePartition(comm, ps, rc, &s->cp.Pc));
    s->cp.bcast = Po > 1;
    if (s->cp.bcast) {
      pw.push_back(Po);
      pw.insert(pw.end(), ps.begin(), ps.end());
      PetscCall(MakePartition(comm, pw, rw, &s->cp.Pw));
    }
    for (DDTensor *p : {&s->w, &s->b, &s->tmp}) {
      PetscCall(DDTensorCreate(comm, p));
      PetscCall(DDTensorSetPartition(*p, s->cp.Pc));
      PetscCall(DDTensorSetShape(*p, k, x->shape + lead));
      PetscCall(DDTensorSetDataType(*p, x->dtype));
      PetscCall(DDTensorSetEmptyPiecesAllowed(*p, PETSC_TRUE));
      for (PetscInt j = 0; j < k; j++) {
        std::vector<PetscInt> lx(ps[j]);
        for (PetscInt q = 0; q < ps[j]; q++) lx[q] = x->ranges[lead + j][q + 1] - x->ranges[lead + j][q];
        PetscCall(DDTensorSetOwnershipRanges(*p, j, lx.data()));
      }
      PetscCall(DDTensorSetMemType(*p, x->memtype));
      PetscCall(DDTensorSetUp(*p));
    }
    PetscCall(DDLayerAddParameter_Private(l, "weight", s->w));
    PetscCall(DDLayerAddParameter_Private(l, "bias", s->b));
    PetscCall(s->cp.CreateWorkerCopy(s->w, &s->wh));
    PetscCall(s->cp.CreateWorkerCopy(s->b, &s->bh));
    PetscCall(DDTensorDuplicate(s->wh, &s->dwh));
    PetscCall(DDTensorDuplicate(s->bh, &s->dbh));
    if (x->active) PetscCheck(s->wh->active && s->wh->layout.bulksize == s->M, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Layer normalization: the weights' workers' piece does not match the input's");
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_InitParams(DDLayer l, PetscInt64 seed)
{
  LayerNorm *s = (LayerNorm *)l->data;

  PetscFunctionBegin;
  if (l->inittype == DD_INIT_UNIFORM) {
    PetscCall(DDTensorInitialize_Private(s->w, DD_INIT_UNIFORM, l->initscale, 2 * seed + 1, 1, 1, 1.0));
    PetscCall(DDTensorInitialize_Private(s->b, DD_INIT_UNIFORM, l->initscale, 2 * seed + 2, 1, 1, 1.0));
  } else { /* torch: ones and zeros */
    PetscCall(DDTensorSet(s->w, l->inittype == DD_INIT_ZEROS ? 0.0 : 1.0));
    PetscCall(DDTensorSet(s->b, 0.0));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  LayerNorm     *s = (LayerNorm *)l->data;
  DDTensor       x, yo;
  const PetscInt R = s->R, M = s->M;
  const bool     act = xs[0]->active ? true : false;

  PetscFunctionBegin;
  PetscCall(ConformLayout(xs[0], s->pm, &s->xc, &x, true));
  PetscCall(ConformLayout(y, s->pm, &s->yc, &yo, false));
  s->xconformed = x != xs[0];
  s->forwarded  = true;
  PetscCall(s->cp.ToWorkers(s->w, s->wh));
  PetscCall(s->cp.ToWorkers(s->b, s->bh));
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T     = decltype(z);
    double  *st = act ? (double *)s->st->array : nullptr;
    const T *xa = act ? HostArray<const T>(x) : nullptr;
    T       *ya = act ? HostArray<T>(yo) : nullptr;
    const T *wa = act && M ? (const T *)s->wh->array : nullptr;
    const T *ba = act && M ? (const T *)s->bh->array : nullptr;
    PetscFunctionBegin;
    s->mean.assign(R, 0.0);
    s->rstd.assign(R, 1.0);
    s->q.assign(R, 0.0);
    /* the row sums, then the squared deviations about the global means, each all-sum-reduced */
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::lnsums, R, M, xa, (const double *)nullptr, s->q.data()));
    for (PetscInt r = 0; r < R; r++) {
      st[2 * r]     = s->q[r];
      st[2 * r + 1] = 0;
    }
    PetscCall(AllSum(s->A, s->st));
    for (PetscInt r = 0; r < R; r++) s->mean[r] = st[2 * r] / s->m;
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::lnsums, R, M, xa, (const double *)s->mean.data(), s->q.data()));
    for (PetscInt r = 0; r < R; r++) st[2 * r] = s->q[r];
    PetscCall(AllSum(s->A, s->st));
    for (PetscInt r = 0; r < R; r++) s->rstd[r] = 1.0 / std::sqrt(st[2 * r] / s->m + (double)s->eps);
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::lnapply, R, M, xa, (const double *)s->mean.data(), (const double *)s->rstd.data(), wa, ba, ya));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  LayerNorm     *s  = (LayerNorm *)l->data;
  DDTensor       dx = dxs ? dxs[0] : NULL, x = s->xconformed ? s->xc : l->saved[0], g, dxo = NULL;
  const PetscInt R = s->R, M = s->M;
  const bool     act = dy->active ? true : false;

  PetscFunctionBegin;
  PetscCheck(s->forwarded && x, PetscObjectComm((PetscObject)l), PETSC_ERR_ORDER, "Layer normalization: call DDLayerForward() before DDLayerBackward()");
  PetscCall(ConformLayout(dy, s->pm, &s->dyc, &g, true));
  if (dx) PetscCall(ConformLayout(dx, s->pm, &s->dxc, &dxo, false));
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T     = decltype(z);
    const T *xa = act ? HostArray<const T>(x) : nullptr;
    const T *ga = act ? HostArray<const T>(g) : nullptr;
    const T *wa = act && M ? (const T *)s->wh->array : nullptr;
    T       *dw = act && M ? (T *)s->dwh->array : nullptr, *db = act && M ? (T *)s->dbh->array : nullptr;
    double  *st = act ? (double *)s->st->array : nullptr;
    PetscFunctionBegin;
    /* this worker's partial parameter gradients and the per-row sums (G1, G2) */
    s->q.assign(R, 0.0);
    s->q2.assign(R, 0.0);
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::lnbwdsums, R, M, xa, ga, (const double *)s->mean.data(), (const double *)s->rstd.data(), wa, dw, db, s->q.data(), s->q2.data()));
    PetscCall(s->cp.FromWorkers(s->dwh, s->tmp, l->grads[0]));
    PetscCall(s->cp.FromWorkers(s->dbh, s->tmp, l->grads[1]));
    if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
    for (PetscInt r = 0; r < R; r++) {
      st[2 * r]     = s->q[r];
      st[2 * r + 1] = s->q2[r];
    }
    PetscCall(AllSum(s->A, s->st));
    for (PetscInt r = 0; r < R; r++) {
      s->q[r]  = st[2 * r] / s->m;
      s->q2[r] = st[2 * r + 1] / s->m;
    }
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::lnbwdapply, R, M, xa, ga, (const double *)s->mean.data(), (const double *)s->rstd.data(), wa, (const double *)s->q.data(), (const double *)s->q2.data(), HostArray<T>(dxo)));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (dx && dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode LayerNorm_View(DDLayer l, PetscViewer viewer)
{
  LayerNorm *s = (LayerNorm *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "normalized dimensions %" PetscInt_FMT " (the last), eps %g%s\n", s->k, (double)s->eps, s->A ? ", statistics all-sum-reduced over the split normalized dimensions" : ""));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERLAYERNORM - "layernorm": distributed layer normalization (paper 000 sec. 4.2.2), torch.nn.LayerNorm

  Input of order d >= 2, output of the same shape, distribution and storage format. Each
  row (index of the leading d - k dimensions) is normalized with its mean and biased variance
  over the last k dimensions (-layer_layernorm_dims k, or -layer_layernorm_normalized_shape,
  which must be the input's last k extents), then scaled and shifted elementwise by the
  learnable weight (ones) and bias (zeros) of the normalized shape: PyTorch's
  elementwise_affine=True, the only mode here. Training and evaluation behave the same.

  Distribution: any partition. A split of the leading dimensions needs no communication; a
  split of the normalized ones all-sum-reduces per-row sums (`DDPRIMITIVEALLSUMREDUCE`), two
  reductions in Forward and one in Backward. weight and bias live on the normalized
  dimensions' split (on the workers with coordinate 0 in the leading dimensions) and are
  broadcast to every worker by Forward; the broadcast's adjoint sums their gradients.

  Envelope: k must be less than the input's order (the batch is never normalized over); a
  replicated input, a normalized shape that is not the input's trailing shape and eps <= 0 are
  errors naming the setting. The local kernels (the layer's backend chain, DD_KERNEL_NORM;
  /cpu/ref's loops) accumulate in float64 on a plain view of the piece (blocked and
  channels-last inputs are copied to one).

  Options Database Keys:
+ -layer_layernorm_dims <k> - number of trailing dimensions normalized
. -layer_layernorm_normalized_shape <n1,...> - or the normalized shape itself
- -layer_layernorm_eps <eps> - added to the variance (default 1e-5)

  Level: beginner

.seealso: `DDLayerLayerNormSetDimensions()`, `DDLayerLayerNormSetNormalizedShape()`, `DDLayerLayerNormSetEpsilon()`, `DDLAYERGROUPNORM`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_LayerNorm(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new LayerNorm;
  l->ops->setfromoptions = LayerNorm_SetFromOptions;
  l->ops->setup          = LayerNorm_SetUp;
  l->ops->forward        = LayerNorm_Forward;
  l->ops->backward       = LayerNorm_Backward;
  l->ops->initparams     = LayerNorm_InitParams;
  l->ops->view           = LayerNorm_View;
  l->ops->reset          = LayerNorm_Reset;
  l->ops->destroy        = LayerNorm_Destroy;
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda normalization kernels; per-channel values through host copies */
  PetscFunctionReturn(PETSC_SUCCESS);
}
