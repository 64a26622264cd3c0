/*
  DDLAYERLOSS: mean squared error, L1 and cross-entropy (paper 000 sec. 4.3).

  The loss is computed pointwise up to a sum: every worker sums its piece, and the partial sums
  (a tensor of ones replicated over the partition) are sum-reduced onto one worker, the first
  of the input's partition. The adjoint of that sum-reduction is a broadcast, so Backward
  receives dL on every worker without an extra all-reduce. DDLayerLossGetValue() reports the
  value on every rank (outside the differentiated graph): a broadcast primitive copies the
  output onto a partition of all the communicator's ranks (paper 000 sec. 3.2.1).
*/
#include <ddnn/private/ddlayerimpl.h>
#include <tensor/layout.hpp>
#include <vector>
#include <cmath>

using namespace ddnn;

namespace
{
struct Loss {
  DDLossType  type = DD_LOSS_MSE;
  DDReduction red  = DD_REDUCTION_MEAN;
  DDPartition Pone = NULL;
  DDTensor    part = NULL, dpart = NULL; /* per-worker partial sums, replicated over the input partition */
  DDPrimitive R    = NULL;
  DDPartition Pall = NULL; /* every rank of the layer's communicator */
  DDTensor    yall = NULL; /* the loss, replicated over Pall */
  DDPrimitive B    = NULL; /* output -> yall, for DDLayerLossGetValue() */
  double      count = 1;  /* elements the mean divides by */
  PetscReal   value = 0;
};
} // namespace

static PetscErrorCode LossGet(DDLayer l, Loss **s, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERLOSS, fn));
  *s = (Loss *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerLossSetType - mse (default), l1 or crossentropy

  Logically collective

  Notes:
  Cross-entropy takes logits (N, C, spatial...) and class indices (N, spatial...) stored as
  numbers, like torch.nn.CrossEntropyLoss; the class dimension must not be split.

  Options Database Key:
. -layer_loss_type <mse,l1,crossentropy> - the loss

  Level: beginner

.seealso: `DDLAYERLOSS`, `DDLayerLossSetReduction()`
@*/
PetscErrorCode DDLayerLossSetType(DDLayer l, DDLossType type)
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetType"));
  s->type = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerLossSetReduction - mean (default) or sum over the elements

  Logically collective

  Options Database Key:
. -layer_loss_reduction <mean,sum> - the reduction

  Level: beginner

.seealso: `DDLayerLossSetType()`
@*/
PetscErrorCode DDLayerLossSetReduction(DDLayer l, DDReduction red)
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetReduction"));
  s->red = red;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerLossGetValue - The loss of the last Forward, on every rank

  Collective

  Level: beginner

.seealso: `DDLAYERLOSS`
@*/
PetscErrorCode DDLayerLossGetValue(DDLayer l, PetscReal *v)
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossGetValue"));
  PetscCheck(l->forwarddone, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "No loss computed yet: call DDLayerForward()");
  *v = s->value;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Loss     *s = (Loss *)l->data;
  PetscEnum e;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer loss options");
  e = (PetscEnum)s->type;
  PetscCall(PetscOptionsEnum("-layer_loss_type", "Loss", "DDLayerLossSetType", DDLossTypes, e, &e, &set));
  if (set) s->type = (DDLossType)e;
  e = (PetscEnum)s->red;
  PetscCall(PetscOptionsEnum("-layer_loss_reduction", "Reduction", "DDLayerLossSetReduction", DDReductions, e, &e, &set));
  if (set) s->red = (DDReduction)e;
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_Reset(DDLayer l)
{
  Loss *s = (Loss *)l->data;

  PetscFunctionBegin;
  PetscCall(DDPartitionDestroy(&s->Pone));
  PetscCall(DDTensorDestroy(&s->part));
  PetscCall(DDTensorDestroy(&s->dpart));
  PetscCall(DDPrimitiveDestroy(&s->R));
  PetscCall(DDPrimitiveDestroy(&s->B));
  PetscCall(DDTensorDestroy(&s->yall));
  PetscCall(DDPartitionDestroy(&s->Pall));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Loss_Reset(l));
  delete (Loss *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_SetUp(DDLayer l, PetscInt n, DDTensor xs[])
{
  Loss       *s = (Loss *)l->data;
  DDTensor    p = xs[0], t = xs[1];
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  DDPartition P    = p->part;
  PetscInt    d    = p->order, ones[DD_MAX_DIM];
  char        sp[128], st[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(p->order, p->shape, sp, sizeof(sp)));
  PetscCall(DDShapeToString_Private(t->order, t->shape, st, sizeof(st)));
  PetscCheck(p->dtype == t->dtype, comm, PETSC_ERR_ARG_INCOMP, "Prediction and target data types differ (%s and %s)", DDDataTypes[p->dtype], DDDataTypes[t->dtype]);
  if (s->type == DD_LOSS_CROSSENTROPY) {
    PetscCheck(d >= 2 && t->order == d - 1, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy takes logits (N, C, ...) and class indices (N, ...): shapes %s and %s", sp, st);
    PetscCheck(t->shape[0] == p->shape[0], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: batch sizes differ (%s and %s)", sp, st);
    for (PetscInt k = 2; k < d; k++) PetscCheck(t->shape[k - 1] == p->shape[k], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: spatial shapes differ (%s and %s)", sp, st);
    PetscCheck(P->shape[1] == 1, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy needs the class dimension on one worker (the logits' partition splits it over %" PetscInt_FMT ")", P->shape[1]);
    /* the targets live where the logits do: same workers, same ownership */
    PetscCheck(t->part->size == P->size, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike");
    for (PetscInt i = 0; i < P->size; i++) PetscCheck(t->part->ranks[i] == P->ranks[i], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets live on different ranks");
    PetscCheck(t->part->shape[0] == P->shape[0], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike");
    for (PetscInt k = 0; k < t->order; k++) {
      PetscInt kp = k == 0 ? 0 : k + 1;
      PetscCheck(t->part->shape[k] == P->shape[kp], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike");
      for (PetscInt q = 0; q <= P->shape[kp]; q++) PetscCheck(t->ranges[k][q] == p->ranges[kp][q], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike (dimension %" PetscInt_FMT ")", k);
    }
    s->count = (double)p->shape[0];
    for (PetscInt k = 2; k < d; k++) s->count *= p->shape[k];
  } else {
    PetscBool ok;
    PetscCall(DDTensorCompatible(p, t, &ok));
    PetscCheck(ok, comm, PETSC_ERR_ARG_INCOMP, "Prediction (%s) and target (%s) must be distributed alike", sp, st);
    s->count = 1;
    for (PetscInt k = 0; k < d; k++) s->count *= p->shape[k];
  }
  if (s->red == DD_REDUCTION_SUM) s->count = 1;
  /* partial sums: ones-shaped, replicated along every split dimension; the loss on the first worker */
  for (PetscInt k = 0; k < d; k++) ones[k] = 1;
  PetscCall(DDTensorCreate(comm, &s->part));
  PetscCall(DDTensorSetPartition(s->part, P));
  PetscCall(DDTensorSetShape(s->part, d, ones));
  PetscCall(DDTensorSetDataType(s->part, p->dtype));
  for (PetscInt k = 0; k < d; k++)
    if (P->shape[k] > 1) PetscCall(DDTensorSetReplicated(s->part, k, PETSC_TRUE));
  PetscCall(DDTensorSetUp(s->part));
  PetscCall(DDTensorDuplicate(s->part, &s->dpart));
  {
    DDTensor y;
    PetscCall(DDPartitionCreateCartesian(comm, d, ones, 1, &P->ranks[0], &s->Pone));
    PetscCall(DDTensorCreateSumReduce(s->part, s->Pone, &y));
    PetscCall(DDLayerSetOutput_Private(l, y));
  }
  PetscCall(DDPrimitiveCreate(comm, &s->R));
  PetscCall(DDPrimitiveSetType(s->R, DDPRIMITIVESUMREDUCE));
  PetscCall(DDPrimitiveSetUp(s->R, s->part, l->output));
  { /* the value's broadcast onto every rank: (size, 1, ..., 1) workers, replicated along the first dimension */
    PetscMPIInt size;
    PetscInt    pshape[DD_MAX_DIM];
    PetscCallMPI(MPI_Comm_size(comm, &size));
    for (PetscInt k = 0; k < d; k++) pshape[k] = k ? 1 : size;
    PetscCall(DDPartitionCreateCartesian(comm, d, pshape, PETSC_DECIDE, NULL, &s->Pall));
    PetscCall(DDTensorCreateBroadcast(l->output, s->Pall, &s->yall));
    PetscCall(DDPrimitiveCreate(comm, &s->B));
    PetscCall(DDPrimitiveSetType(s->B, DDPRIMITIVEBROADCAST));
    PetscCall(DDPrimitiveSetUp(s->B, l->output, s->yall));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* calls f(pred offset, target offset, class-stride info) over the local pieces */
template <class T>
static double LocalLoss(Loss *s, DDTensor p, DDTensor t)
{
  const DDLayout &Lp = p->layout, &Lt = t->layout;
  const T        *a = (const T *)p->array, *b = (const T *)t->array;
  double          sum = 0;
  if (!p->active || !Lp.bulksize) return 0;
  if (s->type != DD_LOSS_CROSSENTROPY) {
    ForEachBulkRunPair(Lp, Lt, [&](PetscInt oa, PetscInt ob, PetscInt len) {
      for (PetscInt i = 0; i < len; i++) {
        double r = (double)a[oa + i] - (double)b[ob + i];
        sum += s->type == DD_LOSS_MSE ? r * r : std::fabs(r);
      }
    });
    return sum;
  }
  /* cross-entropy: for every (n, spatial) position of the target, logsumexp over classes minus the target's logit */
  const PetscInt C = Lp.n[1];
  PetscInt       a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
  LayoutBulkBox(Lt, a0, b0);
  for (PetscInt k = 0; k < Lt.order; k++) ord[k] = k;
  ForEachIndex(Lt.order, a0, b0, ord, [&](const PetscInt *jt) {
    PetscInt jp[DD_MAX_DIM];
    jp[0] = jt[0] - Lt.lo[0] + Lp.lo[0];
    for (PetscInt k = 1; k < Lt.order; k++) jp[k + 1] = jt[k] - Lt.lo[k] + Lp.lo[k + 1];
    PetscInt cls = (PetscInt)std::llround((double)b[LayoutOffset(Lt, jt)]);
    double   mx  = -INFINITY, se = 0, tl = 0;
    for (PetscInt c = 0; c < C; c++) {
      jp[1]    = Lp.lo[1] + c;
      double v = (double)a[LayoutOffset(Lp, jp)];
      mx       = std::max(mx, v);
    }
    for (PetscInt c = 0; c < C; c++) {
      jp[1]    = Lp.lo[1] + c;
      double v = (double)a[LayoutOffset(Lp, jp)];
      se += std::exp(v - mx);
      if (c == cls) tl = v;
    }
    sum += mx + std::log(se) - tl;
  });
  return sum;
}

static PetscErrorCode Loss_Forward(DDLayer l, PetscInt n, DDTensor xs[], DDTensor y)
{
  Loss *s = (Loss *)l->data;

  PetscFunctionBegin;
  if (s->type == DD_LOSS_CROSSENTROPY) { /* class indices must be valid (checked on every rank) */
    PetscInt  C = xs[0]->shape[1];
    PetscBool ok = PETSC_TRUE;
    if (xs[1]->active) PetscCall(DispatchType(xs[1]->dtype, [&](auto z) -> PetscErrorCode {
      using T    = decltype(z);
      const T *b = (const T *)xs[1]->array;
      ForEachBulkRun(xs[1]->layout, [&](PetscInt off, PetscInt len) {
        for (PetscInt i = 0; i < len; i++) {
          double v = (double)b[off + i];
          if (!(v >= 0 && v < C && v == std::floor(v))) ok = PETSC_FALSE;
        }
      });
      return PETSC_SUCCESS;
    }));
    DDCheckAll(PetscObjectComm((PetscObject)l), ok, PETSC_ERR_ARG_OUTOFRANGE, "Cross-entropy target holds a value that is not a class index in [0, %" PetscInt_FMT ")", C);
  }
  double local = 0;
  PetscCall(DispatchType(xs[0]->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    local   = LocalLoss<T>(s, xs[0], xs[1]) / s->count;
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorSet(s->part, local));
  PetscCall(DDPrimitiveApply(s->R, s->part, y));
  /* report the value everywhere */
  PetscCall(DDPrimitiveApply(s->B, y, s->yall));
  s->value = (PetscReal)(s->yall->dtype == DD_FLOAT32 ? ((float *)s->yall->array)[0] : ((double *)s->yall->array)[0]);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_Backward(DDLayer l, DDTensor dy, PetscInt n, DDTensor dxs[])
{
  Loss    *s = (Loss *)l->data;
  DDTensor p = l->saved[0], t = l->saved[1];

  PetscFunctionBegin;
  /* dL on every worker: the adjoint of the sum-reduction is a broadcast */
  if (dy) PetscCall(DDPrimitiveApplyAdjoint(s->R, dy, s->dpart));
  else {
    DDTensor one;
    PetscCall(DDTensorDuplicate(l->output, &one));
    PetscCall(DDTensorSet(one, 1.0));
    PetscCall(DDPrimitiveApplyAdjoint(s->R, one, s->dpart));
    PetscCall(DDTensorDestroy(&one));
  }
  if (!dxs) PetscFunctionReturn(PETSC_SUCCESS);
  DDTensor dp = dxs[0], dt = n > 1 ? dxs[1] : NULL;
  PetscCall(DispatchType(p->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    const double g = p->active && s->dpart->layout.bulksize ? (double)((const T *)s->dpart->array)[0] / s->count : 0;
    if (dp) PetscCall(DDTensorZeroEntries(dp));
    if (dt) PetscCall(DDTensorZeroEntries(dt));
    if (!p->active) PetscFunctionReturn(PETSC_SUCCESS);
    const T *a = (const T *)p->array, *b = (const T *)t->array;
    if (s->type != DD_LOSS_CROSSENTROPY) {
      auto deriv = [&](double r) { return s->type == DD_LOSS_MSE ? 2 * r : (r > 0 ? 1.0 : (r < 0 ? -1.0 : 0.0)); };
      /* walk prediction, target and gradients together in logical index order */
      const DDLayout &Lp = p->layout, &Lt = t->layout;
      PetscInt        a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
      for (PetscInt k = 0; k < p->order; k++) {
        a0[k]  = 0;
        b0[k]  = Lp.n[k];
        ord[k] = k;
      }
      ForEachIndex(p->order, a0, b0, ord, [&](const PetscInt *j) {
        PetscInt jp[DD_MAX_DIM], jt[DD_MAX_DIM];
        for (PetscInt k = 0; k < p->order; k++) {
          jp[k] = j[k] + Lp.lo[k];
          jt[k] = j[k] + Lt.lo[k];
        }
        double dr = g * deriv((double)a[LayoutOffset(Lp, jp)] - (double)b[LayoutOffset(Lt, jt)]);
        if (dp) {
          PetscInt jd[DD_MAX_DIM];
          for (PetscInt k = 0; k < p->order; k++) jd[k] = j[k] + dp->layout.lo[k];
          ((T *)dp->array)[LayoutOffset(dp->layout, jd)] = (T)dr;
        }
        if (dt) {
          PetscInt jd[DD_MAX_DIM];
          for (PetscInt k = 0; k < p->order; k++) jd[k] = j[k] + dt->layout.lo[k];
          ((T *)dt->array)[LayoutOffset(dt->layout, jd)] = (T)-dr;
        }
      });
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    /* cross-entropy: d logits = g (softmax - onehot); the (integer) target gets no gradient */
    const DDLayout &Lp = p->layout, &Lt = t->layout;
    const PetscInt  C  = Lp.n[1];
    PetscInt        a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
    LayoutBulkBox(Lt, a0, b0);
    for (PetscInt k = 0; k < Lt.order; k++) ord[k] = k;
    if (dp)
      ForEachIndex(Lt.order, a0, b0, ord, [&](const PetscInt *jt) {
        PetscInt jp[DD_MAX_DIM], jd[DD_MAX_DIM];
        jp[0] = jt[0] - Lt.lo[0] + Lp.lo[0];
        jd[0] = jt[0] - Lt.lo[0] + dp->layout.lo[0];
        for (PetscInt k = 1; k < Lt.order; k++) {
          jp[k + 1] = jt[k] - Lt.lo[k] + Lp.lo[k + 1];
          jd[k + 1] = jt[k] - Lt.lo[k] + dp->layout.lo[k + 1];
        }
        PetscInt cls = (PetscInt)std::llround((double)b[LayoutOffset(Lt, jt)]);
        double   mx  = -INFINITY, se = 0;
        for (PetscInt c = 0; c < C; c++) {
          jp[1] = Lp.lo[1] + c;
          mx    = std::max(mx, (double)a[LayoutOffset(Lp, jp)]);
        }
        for (PetscInt c = 0; c < C; c++) {
          jp[1] = Lp.lo[1] + c;
          se += std::exp((double)a[LayoutOffset(Lp, jp)] - mx);
        }
        for (PetscInt c = 0; c < C; c++) {
          jp[1]                                          = Lp.lo[1] + c;
          jd[1]                                          = dp->layout.lo[1] + c;
          double sm                                      = std::exp((double)a[LayoutOffset(Lp, jp)] - mx) / se;
          ((T *)dp->array)[LayoutOffset(dp->layout, jd)] = (T)(g * (sm - (c == cls ? 1.0 : 0.0)));
        }
      });
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_View(DDLayer l, PetscViewer viewer)
{
  Loss *s = (Loss *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "%s loss, %s reduction\n", DDLossTypes[s->type], DDReductions[s->red]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERLOSS - "loss": mse, l1 or cross-entropy between a prediction and a target (paper 000 sec. 4.3)

  Two inputs: the prediction and the target, distributed alike (for cross-entropy: logits
  (N, C, ...) and class indices (N, ...)). The output is a one-entry tensor on the first worker
  of the prediction's partition (the sum-reduction of the workers' partial sums). Backward with
  dy = NULL means dL = 1; the prediction's gradient (and the target's, for mse and l1) follow.

  Options Database Keys:
+ -layer_loss_type <mse,l1,crossentropy> - the loss
- -layer_loss_reduction <mean,sum> - mean (default) or sum over the elements

  Level: beginner

.seealso: `DDLayerLossSetType()`, `DDLayerLossGetValue()`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Loss(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Loss;
  l->minin               = 2;
  l->maxin               = 2;
  l->ops->setfromoptions = Loss_SetFromOptions;
  l->ops->setup          = Loss_SetUp;
  l->ops->forward        = Loss_Forward;
  l->ops->backward       = Loss_Backward;
  l->ops->view           = Loss_View;
  l->ops->reset          = Loss_Reset;
  l->ops->destroy        = Loss_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

