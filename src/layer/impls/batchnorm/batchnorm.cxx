/*
  DDLAYERBATCHNORM: distributed batch normalization, paper 000 sec. 4.2.2.

  x on Px = Pn x Pc x Ps (any of them 1), y on Px. Per channel c, over the batch and the
  spatial dimensions (n = N |S| entries):
    mean_c = (1/n) sum x,  var_c = (1/n) sum (x - mean_c)^2,  y = w_c (x - mean_c) / sqrt(var_c + eps) + b_c
  Forward (training):
    local moments per channel (count, mean, M2; exact, kernels in norm_ref.cxx)
    S  = A (local sums)                      A: DDPRIMITIVEALLSUMREDUCE over the dims splitting N and S
    M2 = A (M2_i + n_i (mean_i - S/n)^2)      Chan's parallel formula: a sum of non-negative terms
    w^ = B w, b^ = B b                        B: broadcast from Pc (the channel split) to the workers
    y  = w^ (x - mean) rstd + b^
    running_mean = (1 - m) running_mean + m mean, running_var = (1 - m) running_var + m var n/(n-1)  (on Pc)
    (m = 1 / num_batches_tracked with momentum None, PyTorch's cumulative moving average)
  Backward (training), with xhat = (x - mean) rstd:
    local sums s1 = sum dy, s2 = sum dy (x - mean)
    dw += B^* (s2 rstd), db += B^* s1         the broadcast's adjoint: a sum-reduction onto Pc
    (S1, S2) = A (s1, s2)                     the adjoint of the forward's all-reduce (sec. 4.2.2)
    dx = w rstd (dy - S1/n - xhat S2 rstd / n)
  Evaluation uses the running statistics (broadcast to the workers); dx = w rstd dy. Without
  track_running_stats there are none: evaluation normalizes with the batch statistics, exactly as
  training does (and Backward is the training one).
  A channel split needs no communication for the statistics.
*/
#include <sys/ddcxx.hpp>
#include <layer/impls/batchnorm/normcommon.hpp>
#include <cmath>

using namespace ddnn;

namespace
{
struct BatchNorm {
  PetscReal  momentum = 0.1, eps = 1e-5;
  PetscBool  affine   = PETSC_TRUE;
  PetscBool  cumulative = PETSC_FALSE; /* momentum None: the cumulative moving average */
  PetscBool  track      = PETSC_TRUE;  /* track_running_stats */
  PetscInt64 nbt        = 0;           /* num_batches_tracked: the same on every rank */
  /* set-up */
  ChannelParams cp;
  DDTensor      w = NULL, b = NULL;                                                   /* parameters (owned by the layer's list) */
  DDTensor      rm = NULL, rv = NULL;                                                 /* running statistics, on Pc */
  DDTensor      wh = NULL, bh = NULL, rmh = NULL, rvh = NULL, dwh = NULL, dbh = NULL; /* the workers' copies */
  DDTensor      tmp = NULL;                                                           /* laid out like a parameter */
  DDTensor      st1 = NULL, st2 = NULL;                                               /* statistics (1 and 2 per channel) */
  DDPrimitive   A1 = NULL, A2 = NULL;
  DDTensor      xc = NULL, yc = NULL, dyc = NULL, dxc = NULL; /* conforming copies */
  PetscInt      Cl    = 0;                                    /* local channels */
  double        count = 0;                                    /* entries per channel, global */
  /* the forward state */
  bool                fwdtraining = true, xconformed = false;
  std::vector<double> cnt, mean, m2, mu, rstd, sc, sh, s1, s2, ka, kb, kc;
};
} // namespace

static PetscErrorCode BatchNormGet(DDLayer l, BatchNorm **s, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERBATCHNORM, fn));
  *s = (BatchNorm *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerBatchNormSetMomentum - The momentum of the running statistics (default 0.1, as torch.nn.BatchNorm2d)

  Logically collective

  Input Parameters:
+ l        - a `DDLAYERBATCHNORM` layer
- momentum - in [0, 1]: running = (1 - momentum) running + momentum batch statistic

  Options Database Key:
. -layer_batchnorm_momentum <m> - the momentum

  Notes:
  The running variance is updated with the unbiased batch variance (times n / (n - 1), n the
  entries per channel), as PyTorch does; the normalization in training uses the biased one.
  PyTorch's momentum=None (a cumulative average) is `DDLayerBatchNormSetCumulativeAverage()`;
  setting a momentum turns it off.

  Level: intermediate

.seealso: `DDLAYERBATCHNORM`, `DDLayerBatchNormGetRunningStatistics()`
@*/
PetscErrorCode DDLayerBatchNormSetMomentum(DDLayer l, PetscReal momentum)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormSetMomentum"));
  PetscCheck(momentum >= 0 && momentum <= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Batch normalization momentum %g must lie in [0, 1] (-layer_batchnorm_momentum)", (double)momentum);
  s->momentum   = momentum;
  s->cumulative = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormSetCumulativeAverage - PyTorch's momentum=None: the running statistics are the cumulative moving average

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERBATCHNORM` layer
- flg - `PETSC_TRUE`: every training Forward updates running = (1 - f) running + f batch statistic
        with f = 1 / num_batches_tracked (after its increment), the plain average of the batches'
        statistics since the last reset; `PETSC_FALSE`: the momentum (default)

  Options Database Key:
. -layer_batchnorm_cumulative_average <bool> - the flag (momentum None)

  Level: intermediate

.seealso: `DDLAYERBATCHNORM`, `DDLayerBatchNormSetMomentum()`, `DDLayerBatchNormGetNumBatchesTracked()`
@*/
PetscErrorCode DDLayerBatchNormSetCumulativeAverage(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormSetCumulativeAverage"));
  s->cumulative = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormSetTrackRunningStats - Whether the layer keeps running statistics (default true, torch's track_running_stats)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERBATCHNORM` layer
- flg - `PETSC_FALSE`: no running statistics; evaluation mode normalizes with the batch statistics too

  Options Database Key:
. -layer_batchnorm_track_running_stats <bool> - the flag

  Notes:
  Without tracking, the running statistics tensors of `DDLayerBatchNormGetRunningStatistics()` still
  exist but are neither updated nor used, and num_batches_tracked stays 0.

  Level: intermediate

.seealso: `DDLAYERBATCHNORM`, `DDLayerSetTraining()`
@*/
PetscErrorCode DDLayerBatchNormSetTrackRunningStats(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormSetTrackRunningStats"));
  s->track = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormGetNumBatchesTracked - The number of training Forwards since the running statistics were reset (torch's num_batches_tracked buffer)

  Not collective

  Input Parameter:
. l - a `DDLAYERBATCHNORM` layer

  Output Parameter:
. n - the count (the same on every rank)

  Level: intermediate

.seealso: `DDLayerBatchNormSetNumBatchesTracked()`, `DDLayerBatchNormSetCumulativeAverage()`
@*/
PetscErrorCode DDLayerBatchNormGetNumBatchesTracked(DDLayer l, PetscInt64 *n)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormGetNumBatchesTracked"));
  *n = s->nbt;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormSetNumBatchesTracked - Sets num_batches_tracked (e.g. when loading a checkpoint)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERBATCHNORM` layer
- n - non-negative; the same on every rank

  Notes:
  `DDLayerInitializeParameters()` resets it to 0 with the running statistics, as torch's
  reset_running_stats().

  Level: intermediate

.seealso: `DDLayerBatchNormGetNumBatchesTracked()`
@*/
PetscErrorCode DDLayerBatchNormSetNumBatchesTracked(DDLayer l, PetscInt64 n)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormSetNumBatchesTracked"));
  PetscCheck(n >= 0, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "num_batches_tracked %" PetscInt64_FMT " must be non-negative", n);
  s->nbt = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormSetEpsilon - The eps added to the variance (default 1e-5)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERBATCHNORM` layer
- eps - positive and finite (NaN and inf are errors, `PETSC_ERR_ARG_OUTOFRANGE`)

  Options Database Key:
. -layer_batchnorm_eps <eps> - the value

  Level: intermediate

.seealso: `DDLAYERBATCHNORM`
@*/
PetscErrorCode DDLayerBatchNormSetEpsilon(DDLayer l, PetscReal eps)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormSetEpsilon"));
  PetscCheck(eps > 0 && !PetscIsInfOrNanReal(eps), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerBatchNormSetEpsilon(): Batch normalization eps %g must be positive and finite (-layer_batchnorm_eps)", (double)eps);
  s->eps = eps;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormSetAffine - Whether the layer has a learnable per-channel weight and bias (default true)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERBATCHNORM` layer
- flg - `PETSC_TRUE` for y = w xhat + b (parameters "weight", initialized to ones, and "bias", zeros)

  Options Database Key:
. -layer_batchnorm_affine <bool> - the flag

  Notes:
  Call before `DDLayerSetUp()`.

  Level: intermediate

.seealso: `DDLAYERBATCHNORM`
@*/
PetscErrorCode DDLayerBatchNormSetAffine(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormSetAffine"));
  s->affine = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBatchNormGetRunningStatistics - The running mean and (unbiased) variance, used in evaluation mode

  Not collective

  Input Parameter:
. l - a set-up `DDLAYERBATCHNORM` layer

  Output Parameters:
+ mean - the running mean, a (C) tensor (not a new reference; NULL if not wanted)
- var  - the running variance, a (C) tensor (not a new reference; NULL if not wanted)

  Notes:
  They live on the partition of the affine parameters: the input's channel split, on the workers
  with coordinate 0 in every other dimension. They start at zeros and ones, are reset by
  `DDLayerInitializeParameters()`, and are updated by every Forward in training mode; their
  values do not depend on the partition. They may be modified (e.g. loaded from a checkpoint).

  Level: intermediate

.seealso: `DDLAYERBATCHNORM`, `DDLayerBatchNormSetMomentum()`, `DDLayerSetTraining()`
@*/
PetscErrorCode DDLayerBatchNormGetRunningStatistics(DDLayer l, DDTensor *mean, DDTensor *var)
DD_CXX_TRY
{
  BatchNorm *s;

  PetscFunctionBegin;
  PetscCall(BatchNormGet(l, &s, "DDLayerBatchNormGetRunningStatistics"));
  PetscCheck(l->setupcalled, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  if (mean) *mean = s->rm;
  if (var) *var = s->rv;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode BatchNorm_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  BatchNorm *s = (BatchNorm *)l->data;
  PetscReal  v;
  PetscBool  flg, set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer batchnorm options");
  PetscCall(PetscOptionsReal("-layer_batchnorm_momentum", "Momentum of the running statistics", "DDLayerBatchNormSetMomentum", s->momentum, &v, &set));
  if (set) PetscCall(DDLayerBatchNormSetMomentum(l, v));
  PetscCall(PetscOptionsReal("-layer_batchnorm_eps", "Added to the variance", "DDLayerBatchNormSetEpsilon", s->eps, &v, &set));
  if (set) PetscCall(DDLayerBatchNormSetEpsilon(l, v));
  PetscCall(PetscOptionsBool("-layer_batchnorm_affine", "Learnable weight and bias", "DDLayerBatchNormSetAffine", s->affine, &flg, &set));
  if (set) PetscCall(DDLayerBatchNormSetAffine(l, flg));
  PetscCall(PetscOptionsBool("-layer_batchnorm_cumulative_average", "Running statistics as the cumulative average (momentum None)", "DDLayerBatchNormSetCumulativeAverage", s->cumulative, &flg, &set));
  if (set) PetscCall(DDLayerBatchNormSetCumulativeAverage(l, flg));
  PetscCall(PetscOptionsBool("-layer_batchnorm_track_running_stats", "Keep running statistics", "DDLayerBatchNormSetTrackRunningStats", s->track, &flg, &set));
  if (set) PetscCall(DDLayerBatchNormSetTrackRunningStats(l, flg));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_Reset(DDLayer l)
{
  BatchNorm *s = (BatchNorm *)l->data;

  PetscFunctionBegin;
  PetscCall(s->cp.Reset());
  s->w = s->b = NULL; /* owned by the layer's parameter list */
  for (DDTensor *t : {&s->rm, &s->rv, &s->wh, &s->bh, &s->rmh, &s->rvh, &s->dwh, &s->dbh, &s->tmp, &s->st1, &s->st2, &s->xc, &s->yc, &s->dyc, &s->dxc}) PetscCall(DDTensorDestroy(t));
  PetscCall(DDPrimitiveDestroy(&s->A1));
  PetscCall(DDPrimitiveDestroy(&s->A2));
  s->Cl = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(BatchNorm_Reset(l));
  delete (BatchNorm *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_ResetRunning(BatchNorm *s)
{
  PetscFunctionBegin;
  PetscCall(DDTensorSet(s->rm, 0.0));
  PetscCall(DDTensorSet(s->rv, 1.0));
  s->nbt = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  BatchNorm *s    = (BatchNorm *)l->data;
  DDTensor   x    = xs[0], y;
  MPI_Comm   comm = PetscObjectComm((PetscObject)l);

  PetscFunctionBegin;
  PetscCall(NormCheckInput(l, x, "Batch normalization"));
  s->count = 1;
  for (PetscInt k = 0; k < x->order; k++)
    if (k != 1) s->count *= (double)x->shape[k];
  s->Cl = x->active ? x->layout.n[1] : 0;
  /* the output: x's distribution and format, no halo */
  PetscCall(CreateLike(x, &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  /* per-channel tensors on Pc and their workers' copies */
  PetscCall(s->cp.SetUp(comm, x));
  PetscCall(s->cp.CreateParam(x, &s->rm));
  PetscCall(s->cp.CreateParam(x, &s->rv));
  PetscCall(s->cp.CreateParam(x, &s->tmp));
  PetscCall(s->cp.CreateWorkerCopy(s->rm, &s->rmh));
  PetscCall(s->cp.CreateWorkerCopy(s->rv, &s->rvh));
  PetscCall(BatchNorm_ResetRunning(s));
  PetscCall(DDLayerAddBuffer_Private(l, "running_mean", s->rm, NULL));
  PetscCall(DDLayerAddBuffer_Private(l, "running_var", s->rv, NULL));
  PetscCall(DDLayerAddBuffer_Private(l, "num_batches_tracked", NULL, &s->nbt));
  if (s->affine) {
    PetscCall(s->cp.CreateParam(x, &s->w));
    PetscCall(DDLayerAddParameter_Private(l, "weight", s->w));
    PetscCall(s->cp.CreateParam(x, &s->b));
    PetscCall(DDLayerAddParameter_Private(l, "bias", s->b));
    PetscCall(s->cp.CreateWorkerCopy(s->w, &s->wh));
    PetscCall(s->cp.CreateWorkerCopy(s->b, &s->bh));
    PetscCall(DDTensorDuplicate(s->wh, &s->dwh));
    PetscCall(DDTensorDuplicate(s->bh, &s->dbh));
  }
  /* statistics: one value per channel (forward), two (backward) */
  PetscCall(CreateStatistics(x, false, 1, 1, &s->st1, &s->A1));
  PetscCall(CreateStatistics(x, false, 2, 1, &s->st2, &s->A2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_InitParams(DDLayer l, PetscInt64 seed)
{
  BatchNorm *s = (BatchNorm *)l->data;

  PetscFunctionBegin;
  PetscCall(BatchNorm_ResetRunning(s));
  if (!s->affine) PetscFunctionReturn(PETSC_SUCCESS);
  if (l->inittype == DD_INIT_UNIFORM) {
    PetscCall(DDTensorInitialize_Private(s->w, DD_INIT_UNIFORM, l->initscale, 2 * seed + 1, 1, 1, 1.0));
    PetscCall(DDTensorInitialize_Private(s->b, DD_INIT_UNIFORM, l->initscale, 2 * seed + 2, 1, 1, 1.0));
  } else {
    PetscCall(DDTensorSet(s->w, l->inittype == DD_INIT_ZEROS ? 0.0 : 1.0));
    PetscCall(DDTensorSet(s->b, 0.0));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  BatchNorm     *s    = (BatchNorm *)l->data;
  MPI_Comm       comm = PetscObjectComm((PetscObject)l);
  DDTensor       x, yo;
  const PetscInt Cl  = s->Cl;
  const bool     act = xs[0]->active ? true : false;

  PetscFunctionBegin;
  PetscCall(NormConform(xs[0], l->output, &s->xc, &x, true));
  s->xconformed = x != xs[0];
  PetscCall(NormConform(y, l->output, &s->yc, &yo, false)); /* x matches the output's layout */
  s->fwdtraining = l->training || !s->track; /* batch statistics (and the training backward) */
  const bool update = l->training && s->track;
  s->mu.assign(Cl, 0.0);
  s->rstd.assign(Cl, 1.0);
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    if (s->fwdtraining) {
      char sh[128];
      PetscCall(DDShapeToString_Private(x->order, x->shape, sh, sizeof(sh)));
      PetscCheck(s->count > 1, comm, PETSC_ERR_ARG_SIZ, "Batch normalization in training needs more than one value per channel (input shape %s)", sh);
      s->cnt.resize(Cl);
      s->mean.resize(Cl);
      s->m2.resize(Cl);
      if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normmoments, x->layout, HostArray<const T>(x), false, s->cnt.data(), s->mean.data(), s->m2.data()));
      double *st = HostArray<double>(s->st1);
      if (act)
        for (PetscInt c = 0; c < Cl; c++) st[c] = s->cnt[c] * s->mean[c];
      PetscCall(AllSum(s->A1, s->st1));
      if (act)
        for (PetscInt c = 0; c < Cl; c++) {
          s->mu[c]       = st[c] / s->count;
          const double e = s->mean[c] - s->mu[c];
          st[c]          = s->m2[c] + s->cnt[c] * e * e; /* Chan: no cancellation */
        }
      PetscCall(AllSum(s->A1, s->st1));
      std::vector<double> var(Cl);
      for (PetscInt c = 0; c < Cl; c++) {
        var[c]     = act ? st[c] / s->count : 1.0;
        s->rstd[c] = 1.0 / std::sqrt(var[c] + (double)s->eps);
      }
      /* running statistics on Pc (whose workers hold the same channels as their input piece) */
      if (update) s->nbt++;
      if (update && s->rm->active) {
        HostValues<T> rm, rv;
        PetscCall(rm.Get(s->rm));
        PetscCall(rv.Get(s->rv));
        const double   m  = s->cumulative ? 1.0 / (double)s->nbt : (double)s->momentum, unb = s->count / (s->count - 1);
        const PetscInt nc = s->rm->layout.n[0];
        for (PetscInt c = 0; c < nc; c++) {
          rm()[c] = (T)((1 - m) * (double)rm()[c] + m * s->mu[c]);
          rv()[c] = (T)((1 - m) * (double)rv()[c] + m * var[c] * unb);
        }
        PetscCall(rm.Restore(true));
        PetscCall(rv.Restore(true));
      }
      PetscCall(DDTensorStateIncrease_Private(s->rm));
      PetscCall(DDTensorStateIncrease_Private(s->rv));
    } else {
      PetscCall(s->cp.ToWorkers(s->rm, s->rmh));
      PetscCall(s->cp.ToWorkers(s->rv, s->rvh));
      PetscCall(ParamValues<T>(s->rmh, Cl, 0.0, s->mu));
      std::vector<double> var;
      PetscCall(ParamValues<T>(s->rvh, Cl, 1.0, var));
      for (PetscInt c = 0; c < Cl; c++) s->rstd[c] = 1.0 / std::sqrt(var[c] + (double)s->eps);
    }
    if (s->affine) {
      PetscCall(s->cp.ToWorkers(s->w, s->wh));
      PetscCall(s->cp.ToWorkers(s->b, s->bh));
    }
    PetscCall(ParamValues<T>(s->affine ? s->wh : NULL, Cl, 1.0, s->sc));
    PetscCall(ParamValues<T>(s->affine ? s->bh : NULL, Cl, 0.0, s->sh));
    std::vector<double> a(Cl);
    for (PetscInt c = 0; c < Cl; c++) a[c] = s->sc[c] * s->rstd[c];
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normscaleshift, x->layout, HostArray<const T>(x), yo->layout, HostArray<T>(yo), false, s->mu.data(), a.data(), s->sh.data()));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  BatchNorm     *s  = (BatchNorm *)l->data;
  DDTensor       dx = dxs ? dxs[0] : NULL, x = s->xconformed ? s->xc : l->saved[0], g, dxo = NULL;
  const PetscInt Cl  = s->Cl;
  const bool     act = x->active ? true : false;

  PetscFunctionBegin;
  PetscCall(NormConform(dy, l->output, &s->dyc, &g, true));
  if (dx) PetscCall(NormConform(dx, l->output, &s->dxc, &dxo, false));
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    s->s1.assign(Cl, 0.0);
    s->s2.assign(Cl, 0.0);
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normbwdsums, x->layout, HostArray<const T>(x), g->layout, HostArray<const T>(g), false, s->mu.data(), s->s1.data(), s->s2.data()));
    if (s->affine) { /* local partial gradients; the broadcast's adjoint sums them onto Pc */
      if (s->dwh->active) {
        HostValues<T> dw, db;
        PetscCall(dw.Get(s->dwh));
        PetscCall(db.Get(s->dbh));
        for (PetscInt c = 0; c < Cl; c++) {
          dw()[c] = (T)(s->s2[c] * s->rstd[c]);
          db()[c] = (T)s->s1[c];
        }
        PetscCall(dw.Restore(true));
        PetscCall(db.Restore(true));
      }
      PetscCall(s->cp.FromWorkers(s->dwh, s->tmp, l->grads[0]));
      PetscCall(s->cp.FromWorkers(s->dbh, s->tmp, l->grads[1]));
    }
    if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
    s->ka.assign(Cl, 0.0);
    s->kb.assign(Cl, 0.0);
    s->kc.assign(Cl, 0.0);
    if (s->fwdtraining) {
      double *st = HostArray<double>(s->st2);
      if (act)
        for (PetscInt c = 0; c < Cl; c++) {
          st[c]      = s->s1[c];
          st[Cl + c] = s->s2[c];
        }
      PetscCall(AllSum(s->A2, s->st2));
      if (act)
        for (PetscInt c = 0; c < Cl; c++) {
          const double r = s->rstd[c], wr = s->sc[c] * r;
          s->ka[c]       = wr;
          s->kb[c]       = -wr * r * r * st[Cl + c] / s->count;
          s->kc[c]       = -wr * st[c] / s->count;
        }
    } else { /* evaluation with the running statistics: dx = w rstd dy, which does not read x (as PyTorch's: an inf or nan in x leaves dx finite, where 0 (x - mean) would be nan) */
      for (PetscInt c = 0; c < Cl; c++) s->ka[c] = s->sc[c] * s->rstd[c];
      if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normscaleshift, g->layout, HostArray<const T>(g), dxo->layout, HostArray<T>(dxo), false, s->kb.data(), s->ka.data(), s->kc.data())); /* ka (dy - kb) + kc, kb = kc = 0 */
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    if (act) PetscCall(NormKernel<T>(l, &KernelTable<T>::normbwdapply, x->layout, HostArray<const T>(x), g->layout, HostArray<const T>(g), dxo->layout, HostArray<T>(dxo), false, s->mu.data(), s->ka.data(), s->kb.data(), s->kc.data()));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  if (dx && dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BatchNorm_View(DDLayer l, PetscViewer viewer)
{
  BatchNorm *s = (BatchNorm *)l->data;

  PetscFunctionBegin;
  if (s->cumulative) PetscCall(PetscViewerASCIIPrintf(viewer, "momentum None (cumulative average), eps %g, affine %s, %s mode\n", (double)s->eps, s->affine ? "yes" : "no", l->training ? "training" : "evaluation"));
  else PetscCall(PetscViewerASCIIPrintf(viewer, "momentum %g, eps %g, affine %s, %s mode\n", (double)s->momentum, (double)s->eps, s->affine ? "yes" : "no", l->training ? "training" : "evaluation"));
  PetscCall(PetscViewerASCIIPrintf(viewer, "track_running_stats %s, num_batches_tracked %" PetscInt64_FMT "\n", s->track ? "yes" : "no", s->nbt));
  if (l->setupcalled) {
    DDPartition P  = l->output->part;
    PetscInt    Po = P->size / P->shape[1];
    PetscCall(PetscViewerASCIIPrintf(viewer, "per-channel statistics all-sum-reduced over %" PetscInt_FMT " worker(s); channels split over %" PetscInt_FMT " worker(s)%s\n", Po, P->shape[1], s->cp.bcast ? "; parameters broadcast to the workers" : ""));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERBATCHNORM - "batchnorm": distributed batch normalization (paper 000 sec. 4.2.2), torch.nn.BatchNorm1d/2d/3d

  Input N x C or N x C x spatial (any number of spatial dimensions); output of the same shape,
  distribution and storage format (plain, channels-last or blocked, e.g. after a oneDNN
  convolution). In training mode, every channel is normalized with the mean and biased variance
  over the batch and spatial dimensions, and the running mean and unbiased variance are updated
  with the momentum (or, momentum None, the cumulative average 1 / num_batches_tracked); in
  evaluation mode (`DDLayerSetTraining()`) the running statistics are used (and Backward's dx =
  weight dy / sqrt(running_var + eps) does not read x: a nan or inf in x leaves it finite, as in
  PyTorch), or, without track_running_stats, the batch statistics as in training. num_batches_tracked counts the
  training Forwards (`DDLayerBatchNormGetNumBatchesTracked()`; reset with the running statistics).
  With affine (default) y = weight xhat + bias, weight initialized to ones and bias to zeros
  (-layer_init uniform draws both from U(-s, s) instead; zeros zeroes both).

  Distribution: any partition of the input. The per-channel sums are all-sum-reduced
  (`DDPRIMITIVEALLSUMREDUCE`) over the partition dimensions that split the batch and spatial
  dimensions; a channel split needs no communication. The statistics combine local moments
  with Chan's formula (two small all-reduces), so they stay accurate when the mean is large.
  Backward all-sum-reduces the sums of dy and dy xhat: the adjoint of the forward's all-reduce.
  weight, bias and the running statistics live on the input's channel split, on the workers with
  coordinate 0 in the other dimensions; Forward broadcasts them to every worker, so their
  gradients are sum-reduced by the broadcast's adjoint. Results do not depend on the partition.

  Envelope: any partition of an N x C (x spatial) input that is not replicated, float32 and
  float64. Rejected (errors naming the setting): order 1, a replicated input, a blocked input that
  does not block the channel, momentum outside [0, 1], eps <= 0, one value per channel where
  batch statistics are used.

  Kernels: one read of the input for the statistics (exact two-pass moments per cache-sized
  chunk), one read and one write for the output; contiguous inner loops in every format.

  Options Database Keys:
+ -layer_batchnorm_momentum <m> - momentum of the running statistics (default 0.1)
. -layer_batchnorm_eps <eps> - added to the variance (default 1e-5)
. -layer_batchnorm_affine <bool> - learnable weight and bias (default true)
. -layer_batchnorm_cumulative_average <bool> - momentum None: the cumulative moving average
- -layer_batchnorm_track_running_stats <bool> - keep running statistics (default true)

  Level: beginner

.seealso: `DDLayerBatchNormSetMomentum()`, `DDLayerBatchNormSetEpsilon()`, `DDLayerBatchNormSetAffine()`,
          `DDLayerBatchNormGetRunningStatistics()`, `DDLayerBatchNormSetCumulativeAverage()`, `DDLayerBatchNormSetTrackRunningStats()`,
          `DDLayerBatchNormGetNumBatchesTracked()`, `DDLAYERGROUPNORM`, `DDPRIMITIVEALLSUMREDUCE`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_BatchNorm(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new BatchNorm;
  l->ops->setfromoptions = BatchNorm_SetFromOptions;
  l->ops->setup          = BatchNorm_SetUp;
  l->ops->forward        = BatchNorm_Forward;
  l->ops->backward       = BatchNorm_Backward;
  l->ops->initparams     = BatchNorm_InitParams;
  l->ops->view           = BatchNorm_View;
  l->ops->reset          = BatchNorm_Reset;
  l->ops->destroy        = BatchNorm_Destroy;
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda normalization kernels; per-channel values through host copies */
  PetscFunctionReturn(PETSC_SUCCESS);
}

