/*
  DDLAYERLOSS: mean squared error, L1 and cross-entropy (paper 000 sec. 4.3).

  The loss is computed pointwise up to a sum: every worker sums its piece, and the partial sums
  (a tensor of ones replicated over the partition) are sum-reduced onto one worker, the first
  of the input's partition. The adjoint of that sum-reduction is a broadcast, so Backward
  receives dL on every worker without an extra all-reduce. DDLayerLossGetValue() reports the
  value on every rank (outside the differentiated graph): a broadcast primitive copies the
  output onto a partition of all the communicator's ranks (paper 000 sec. 3.2.1).

  Cross-entropy follows torch.nn.CrossEntropyLoss (1.13, aten/src/ATen/native/LossNLL.cpp), per
  position i (batch and spatial index), logp = log_softmax over the classes, eps the label
  smoothing, w the class weights (ones by default), W = sum_c w_c:
    class index y_i (not ignore_index): l_i = (1 - eps) w_y (-logp_y) + (eps / C) sum_c w_c (-logp_c)
                                        (ignored positions: 0); mean divides by sum_i w_{y_i} over
                                        the positions not ignored (the same sum reduced like the loss)
    probabilities t_i (soft targets):   l_i = -sum_c t'_c w_c logp_c, t' = (1 - eps) t + eps / C;
                                        mean divides by the number of positions
  Gradients: class index: dl/dx_c = (1 - eps) w_y (p_c - [c = y]) + (eps / C) (W p_c - w_c);
  probabilities: dl/dx_c = p_c sum_k t'_k w_k - t'_c w_c, dl/dt_c = -(1 - eps) w_c logp_c.
  Reduction none: the output is l itself (per position; elementwise for mse and l1), distributed
  like the batch; no reduction is applied to it, and Backward takes dy of its shape.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <tensor/layout.hpp>
#include <vector>
#include <cmath>

using namespace ddnn;

namespace
{
struct Loss {
  DDLossType          type = DD_LOSS_MSE;
  DDReduction         red  = DD_REDUCTION_MEAN;
  std::vector<double> weights;           /* class weights (empty: ones) */
  PetscInt            ignore = -100;     /* ignore_index (class-index targets) */
  PetscReal           smoothing = 0;     /* label_smoothing */
  PetscBool           prob = PETSC_FALSE; /* probability (soft) targets */
  DDPartition         Pone = NULL;
  DDTensor            part = NULL, dpart = NULL; /* per-worker partial sums, replicated over the input partition */
  DDTensor            ys = NULL;                 /* the reduced scalar (the output unless reduction none) */
  DDTensor            yden = NULL;               /* scratch laid out like ys: the mean's weight sum */
  DDPrimitive         R    = NULL;
  DDPartition         Pall = NULL; /* every rank of the layer's communicator */
  DDPartition         Pnone = NULL; /* reduction none with soft targets: the logits' partition without the class dimension */
  DDTensor            yall = NULL; /* the loss, replicated over Pall */
  DDPrimitive         B    = NULL; /* ys -> yall, for DDLayerLossGetValue() */
  double              count = 1;  /* what the mean divides by (the last Forward's) */
  PetscReal           value = 0;
  PetscBool           generic = PETSC_FALSE; /* Backward takes the generic walk (tests: DDLayerLossSetGeneric_Private()) */
  PetscBool           lastfast = PETSC_FALSE; /* whether the last Backward took a fast path (on this rank) */
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
  numbers, like torch.nn.CrossEntropyLoss, or class probabilities of the logits' shape (see
  `DDLayerLossSetProbabilityTargets()`); the class dimension must not be split.

  Options Database Key:
. -layer_loss_type <mse,l1,crossentropy> - the loss

  Level: beginner

.seealso: `DDLAYERLOSS`, `DDLayerLossSetReduction()`
@*/
PetscErrorCode DDLayerLossSetType(DDLayer l, DDLossType type)
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetType"));
  PetscCheck(type >= DD_LOSS_MSE && type <= DD_LOSS_CROSSENTROPY, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown loss type %d (-layer_loss_type)", (int)type);
  s->type = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLossSetReduction - mean (default), sum, or none

  Logically collective

  Notes:
  none (torch's reduction='none'): the output is the loss per element (mse, l1) or per position
  (cross-entropy: shape (N, spatial...), distributed like the batch), and Backward takes a dy of
  that shape; `DDLayerLossGetValue()` then reports the sum of the output's entries, and Backward
  with dy = NULL uses dy = ones (the gradient of that sum).

  Options Database Key:
. -layer_loss_reduction <mean,sum,none> - the reduction

  Level: beginner

.seealso: `DDLayerLossSetType()`
@*/
PetscErrorCode DDLayerLossSetReduction(DDLayer l, DDReduction red)
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetReduction"));
  PetscCheck(red >= DD_REDUCTION_MEAN && red <= DD_REDUCTION_NONE, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown reduction %d (-layer_loss_reduction)", (int)red);
  s->red = red;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLossSetClassWeights - Cross-entropy's per-class weights (torch.nn.CrossEntropyLoss's weight)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERLOSS` layer
. C - the number of classes (0 to remove the weights)
- w - the C weights, finite and non-negative (the same on every rank)

  Notes:
  With class-index targets and mean reduction the loss is divided by the sum of the weights of the
  targets that are not ignored; with probability targets by the number of positions (PyTorch's
  rules). `DDLayerSetUp()` checks that C is the logits' number of classes.

  Options Database Key:
. -layer_loss_weight <w0,w1,...> - the weights

  Level: intermediate

.seealso: `DDLayerLossSetIgnoreIndex()`, `DDLayerLossSetLabelSmoothing()`
@*/
PetscErrorCode DDLayerLossSetClassWeights(DDLayer l, PetscInt C, const PetscReal w[])
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetClassWeights"));
  PetscCheck(C >= 0, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Number of class weights %" PetscInt_FMT " must be non-negative (-layer_loss_weight)", C);
  for (PetscInt c = 0; c < C; c++) PetscCheck(w[c] >= 0 && !PetscIsInfOrNanReal(w[c]), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Class weight %" PetscInt_FMT " is %g: weights must be finite and non-negative (-layer_loss_weight)", c, (double)w[c]);
  s->weights.assign(w, w + C);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLossSetIgnoreIndex - Cross-entropy's ignore_index (default -100): targets with this class contribute nothing

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERLOSS` layer
- idx - the ignored class index (any integer; probability targets ignore it, as PyTorch)

  Options Database Key:
. -layer_loss_ignore_index <i> - the index

  Level: intermediate

.seealso: `DDLayerLossSetClassWeights()`
@*/
PetscErrorCode DDLayerLossSetIgnoreIndex(DDLayer l, PetscInt idx)
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetIgnoreIndex"));
  s->ignore = idx;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLossSetLabelSmoothing - Cross-entropy's label_smoothing eps in [0, 1] (default 0)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERLOSS` layer
- eps - the target becomes (1 - eps) target + eps / C (uniform over the classes)

  Options Database Key:
. -layer_loss_label_smoothing <eps> - the value

  Level: intermediate

.seealso: `DDLayerLossSetClassWeights()`
@*/
PetscErrorCode DDLayerLossSetLabelSmoothing(DDLayer l, PetscReal eps)
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetLabelSmoothing"));
  PetscCheck(eps >= 0 && eps <= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Label smoothing %g must lie in [0, 1] (-layer_loss_label_smoothing)", (double)eps);
  s->smoothing = eps;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLossSetProbabilityTargets - Cross-entropy's target holds class probabilities (logits' shape) instead of class indices

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERLOSS` layer
- flg - `PETSC_TRUE` for probability (soft) targets, distributed like the logits

  Notes:
  PyTorch chooses by the target's dtype; ddnn stores both as numbers, so it is a setting. The
  target then gets a gradient too.

  Options Database Key:
. -layer_loss_probability_targets <bool> - the flag

  Level: intermediate

.seealso: `DDLayerLossSetType()`
@*/
PetscErrorCode DDLayerLossSetProbabilityTargets(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetProbabilityTargets"));
  s->prob = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerLossGetValue - The loss of the last Forward, on every rank

  Collective

  Notes:
  With reduction none, the sum of the output's entries.

  Level: beginner

.seealso: `DDLAYERLOSS`
@*/
PetscErrorCode DDLayerLossGetValue(DDLayer l, PetscReal *v)
DD_CXX_TRY
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossGetValue"));
  PetscCheck(l->forwarddone, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "No loss computed yet: call DDLayerForward()");
  *v = s->value;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  DDLayerLossSetGeneric_Private - Makes Backward take the generic walk (an offset per entry) instead of its fast paths

  Not collective

  Notes:
  For the tests, which compare the two bit for bit.
*/
PETSC_EXTERN PetscErrorCode DDLayerLossSetGeneric_Private(DDLayer l, PetscBool flg)
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossSetGeneric_Private"));
  s->generic = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  DDLayerLossGetFastPathTaken_Private - Whether the last Backward on this rank took a fast path

  Not collective
*/
PETSC_EXTERN PetscErrorCode DDLayerLossGetFastPathTaken_Private(DDLayer l, PetscBool *flg)
{
  Loss *s;

  PetscFunctionBegin;
  PetscCall(LossGet(l, &s, "DDLayerLossGetFastPathTaken_Private"));
  *flg = s->lastfast;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Loss     *s = (Loss *)l->data;
  PetscEnum e;
  PetscBool set, flg;
  PetscInt  i;
  PetscReal v, w[1024];

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer loss options");
  e = (PetscEnum)s->type;
  PetscCall(PetscOptionsEnum("-layer_loss_type", "Loss", "DDLayerLossSetType", DDLossTypes, e, &e, &set));
  if (set) PetscCall(DDLayerLossSetType(l, (DDLossType)e));
  e = (PetscEnum)s->red;
  PetscCall(PetscOptionsEnum("-layer_loss_reduction", "Reduction", "DDLayerLossSetReduction", DDReductions, e, &e, &set));
  if (set) PetscCall(DDLayerLossSetReduction(l, (DDReduction)e));
  i = 1024;
  PetscCall(PetscOptionsRealArray("-layer_loss_weight", "Cross-entropy class weights", "DDLayerLossSetClassWeights", w, &i, &set));
  if (set) PetscCall(DDLayerLossSetClassWeights(l, i, w));
  PetscCall(PetscOptionsInt("-layer_loss_ignore_index", "Cross-entropy ignore_index", "DDLayerLossSetIgnoreIndex", s->ignore, &i, &set));
  if (set) PetscCall(DDLayerLossSetIgnoreIndex(l, i));
  PetscCall(PetscOptionsReal("-layer_loss_label_smoothing", "Cross-entropy label smoothing", "DDLayerLossSetLabelSmoothing", s->smoothing, &v, &set));
  if (set) PetscCall(DDLayerLossSetLabelSmoothing(l, v));
  PetscCall(PetscOptionsBool("-layer_loss_probability_targets", "Cross-entropy targets are class probabilities", "DDLayerLossSetProbabilityTargets", s->prob, &flg, &set));
  if (set) PetscCall(DDLayerLossSetProbabilityTargets(l, flg));
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
  PetscCall(DDTensorDestroy(&s->ys));
  PetscCall(DDTensorDestroy(&s->yden));
  PetscCall(DDPrimitiveDestroy(&s->R));
  PetscCall(DDPrimitiveDestroy(&s->B));
  PetscCall(DDTensorDestroy(&s->yall));
  PetscCall(DDPartitionDestroy(&s->Pall));
  PetscCall(DDPartitionDestroy(&s->Pnone));
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

/* reduction none, cross-entropy with probability targets: a (N, spatial...) tensor on the logits' workers, with their batch and spatial ownership */
static PetscErrorCode CreatePerPosition(Loss *s, DDTensor p, DDTensor *y)
{
  MPI_Comm              comm = PetscObjectComm((PetscObject)p);
  DDPartition           P    = p->part;
  std::vector<PetscInt> shape, pshape;

  PetscFunctionBegin;
  for (PetscInt k = 0; k < p->order; k++)
    if (k != 1) {
      shape.push_back(p->shape[k]);
      pshape.push_back(P->shape[k]);
    }
  /* the class dimension is not split: the workers keep their C-order numbering */
  PetscCall(MakePartition(comm, pshape, std::vector<PetscMPIInt>(P->ranks, P->ranks + P->size), &s->Pnone));
  PetscCall(DDTensorCreate(comm, y));
  PetscCall(DDTensorSetPartition(*y, s->Pnone));
  PetscCall(DDTensorSetShape(*y, (PetscInt)shape.size(), shape.data()));
  PetscCall(DDTensorSetDataType(*y, p->dtype));
  PetscCall(DDTensorSetEmptyPiecesAllowed(*y, PETSC_TRUE));
  for (PetscInt k = 0, q = 0; k < p->order; k++) {
    if (k == 1) continue;
    std::vector<PetscInt> lx(P->shape[k]);
    for (PetscInt r = 0; r < P->shape[k]; r++) lx[r] = p->ranges[k][r + 1] - p->ranges[k][r];
    PetscCall(DDTensorSetOwnershipRanges(*y, q++, lx.data()));
  }
  PetscCall(DDTensorSetUp(*y));
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
  const bool  ce = s->type == DD_LOSS_CROSSENTROPY;

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(p->order, p->shape, sp, sizeof(sp)));
  PetscCall(DDShapeToString_Private(t->order, t->shape, st, sizeof(st)));
  PetscCheck(p->dtype == t->dtype, comm, PETSC_ERR_ARG_INCOMP, "Prediction and target data types differ (%s and %s)", DDDataTypes[p->dtype], DDDataTypes[t->dtype]);
  if (!ce) {
    PetscCheck(s->weights.empty(), comm, PETSC_ERR_ARG_INCOMP, "Class weights (-layer_loss_weight) apply to cross-entropy only; the loss is %s", DDLossTypes[s->type]);
    PetscCheck(s->smoothing == 0, comm, PETSC_ERR_ARG_INCOMP, "Label smoothing (-layer_loss_label_smoothing) applies to cross-entropy only; the loss is %s", DDLossTypes[s->type]);
    PetscCheck(!s->prob, comm, PETSC_ERR_ARG_INCOMP, "Probability targets (-layer_loss_probability_targets) apply to cross-entropy only; the loss is %s", DDLossTypes[s->type]);
  }
  if (ce) {
    PetscCheck(d >= 2, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy takes logits (N, C, ...): shape %s", sp);
    PetscCheck(P->shape[1] == 1, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy needs the class dimension on one worker (the logits' partition splits it over %" PetscInt_FMT ")", P->shape[1]);
    PetscCheck(s->weights.empty() || (PetscInt)s->weights.size() == p->shape[1], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: %" PetscInt_FMT " class weights for %" PetscInt_FMT " classes (logits %s; -layer_loss_weight)", (PetscInt)s->weights.size(), p->shape[1], sp);
  }
  if (ce && !s->prob) {
    PetscCheck(t->order == d - 1, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy takes logits (N, C, ...) and class indices (N, ...): shapes %s and %s (probability targets: -layer_loss_probability_targets)", sp, st);
    PetscCheck(t->shape[0] == p->shape[0], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: batch sizes differ (%s and %s)", sp, st);
    for (PetscInt k = 2; k < d; k++) PetscCheck(t->shape[k - 1] == p->shape[k], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: spatial shapes differ (%s and %s)", sp, st);
    /* the targets live where the logits do: same workers, same ownership */
    PetscCheck(t->part->size == P->size, comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike");
    for (PetscInt i = 0; i < P->size; i++) PetscCheck(t->part->ranks[i] == P->ranks[i], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets live on different ranks");
    PetscCheck(t->part->shape[0] == P->shape[0], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike");
    for (PetscInt k = 0; k < t->order; k++) {
      PetscInt kp = k == 0 ? 0 : k + 1;
      PetscCheck(t->part->shape[k] == P->shape[kp], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike");
      for (PetscInt q = 0; q <= P->shape[kp]; q++) PetscCheck(t->ranges[k][q] == p->ranges[kp][q], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: logits and targets must be distributed alike (dimension %" PetscInt_FMT ")", k);
    }
    for (PetscInt k = 0; k < t->order; k++) PetscCheck(!t->replicated[k] && !p->replicated[k == 0 ? 0 : k + 1], comm, PETSC_ERR_ARG_INCOMP, "Cross-entropy: replicated inputs are not supported (dimension %" PetscInt_FMT ")", k);
  } else {
    PetscBool ok;
    PetscCall(DDTensorCompatible(p, t, &ok));
    PetscCheck(ok, comm, PETSC_ERR_ARG_INCOMP, "Prediction (%s) and target (%s) must be distributed alike%s", sp, st, ce ? " (probability targets have the logits' shape)" : "");
    if (s->red == DD_REDUCTION_NONE)
      for (PetscInt k = 0; k < d; k++) PetscCheck(!p->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "Loss with reduction none: replicated inputs are not supported (dimension %" PetscInt_FMT ")", k);
  }
  s->count = 1;
  for (PetscInt k = 0; k < d; k++)
    if (!ce || k != 1) s->count *= p->shape[k];
  /* partial sums: ones-shaped, replicated along every split dimension; the sum on the first worker */
  for (PetscInt k = 0; k < d; k++) ones[k] = 1;
  PetscCall(DDTensorCreate(comm, &s->part));
  PetscCall(DDTensorSetPartition(s->part, P));
  PetscCall(DDTensorSetShape(s->part, d, ones));
  PetscCall(DDTensorSetDataType(s->part, p->dtype));
  for (PetscInt k = 0; k < d; k++)
    if (P->shape[k] > 1) PetscCall(DDTensorSetReplicated(s->part, k, PETSC_TRUE));
  PetscCall(DDTensorSetUp(s->part));
  PetscCall(DDTensorDuplicate(s->part, &s->dpart));
  PetscCall(DDPartitionCreateCartesian(comm, d, ones, 1, &P->ranks[0], &s->Pone));
  PetscCall(DDTensorCreateSumReduce(s->part, s->Pone, &s->ys));
  PetscCall(DDTensorDuplicate(s->ys, &s->yden));
  if (s->red == DD_REDUCTION_NONE) {
    DDTensor y;
    if (!ce) PetscCall(CreateLike(p, &y));
    else if (s->prob) PetscCall(CreatePerPosition(s, p, &y));
    else PetscCall(CreateLike(t, &y));
    PetscCall(DDLayerSetOutput_Private(l, y));
  } else {
    PetscCall(PetscObjectReference((PetscObject)s->ys));
    PetscCall(DDLayerSetOutput_Private(l, s->ys));
  }
  PetscCall(DDPrimitiveCreate(comm, &s->R));
  PetscCall(DDPrimitiveSetType(s->R, DDPRIMITIVESUMREDUCE));
  PetscCall(DDPrimitiveSetUp(s->R, s->part, s->ys));
  { /* the value's broadcast onto every rank: (size, 1, ..., 1) workers, replicated along the first dimension */
    PetscMPIInt size;
    PetscInt    pshape[DD_MAX_DIM];
    PetscCallMPI(MPI_Comm_size(comm, &size));
    for (PetscInt k = 0; k < d; k++) pshape[k] = k ? 1 : size;
    PetscCall(DDPartitionCreateCartesian(comm, d, pshape, PETSC_DECIDE, NULL, &s->Pall));
    PetscCall(DDTensorCreateBroadcast(s->ys, s->Pall, &s->yall));
    PetscCall(DDPrimitiveCreate(comm, &s->B));
    PetscCall(DDPrimitiveSetType(s->B, DDPRIMITIVEBROADCAST));
    PetscCall(DDPrimitiveSetUp(s->B, s->ys, s->yall));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Walks the local positions of the logits p (every bulk index with class 0): calls f(j) with j the
  bulk coordinates (j[1] = 0). Off(L, j, c) is the storage offset of (j with class c) in a layout
  of p's order, or of j without the class dimension in a layout of order one less.
*/
template <class F>
static void ForEachPosition(const DDLayout &Lp, F &&f)
{
  PetscInt a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
  for (PetscInt k = 0; k < Lp.order; k++) {
    a0[k]  = 0;
    b0[k]  = k == 1 ? 1 : Lp.n[k];
    ord[k] = k;
  }
  ForEachIndex(Lp.order, a0, b0, ord, f);
}
static inline PetscInt Off(const DDLayout &L, PetscInt d, const PetscInt *j, PetscInt c)
{
  PetscInt q[DD_MAX_DIM];
  if (L.order == d) {
    for (PetscInt k = 0; k < d; k++) q[k] = j[k] + L.lo[k];
    q[1] = c + L.lo[1];
  } else {
    q[0] = j[0] + L.lo[0];
    for (PetscInt k = 2; k < d; k++) q[k - 1] = j[k] + L.lo[k - 1];
  }
  return LayoutOffset(L, q);
}

/*
  Cross-entropy at one position: logits v (C of them), target t (class index in t[0], or C
  probabilities); returns l and its weight in the mean's denominator; with g != 0 writes
  g dl/dv into dv and (probabilities, dtv non-NULL) g dl/dt into dtv.
*/
static double CrossEntropyAt(const Loss *s, PetscInt C, const double *v, const double *t, double *wden, double g, double *dv, double *dtv)
{
  const double eps = (double)s->smoothing;
  auto         W   = [&](PetscInt c) { return s->weights.empty() ? 1.0 : s->weights[c]; };
  double       mx  = -INFINITY, se = 0;
  for (PetscInt c = 0; c < C; c++) mx = std::max(mx, v[c]);
  for (PetscInt c = 0; c < C; c++) se += std::exp(v[c] - mx);
  const double lse = mx + std::log(se);
  double       l   = 0;
  if (!s->prob) {
    const PetscInt y = (PetscInt)std::llround(t[0]);
    if (y == s->ignore) {
      *wden = 0;
      if (dv)
        for (PetscInt c = 0; c < C; c++) dv[c] = 0;
      return 0;
    }
    const double wy = W(y);
    double       sm = 0, Wt = 0;
    for (PetscInt c = 0; c < C; c++) {
      sm += W(c) * (lse - v[c]);
      Wt += W(c);
    }
    l     = (1 - eps) * wy * (lse - v[y]) + eps / C * sm;
    *wden = wy;
    if (dv)
      for (PetscInt c = 0; c < C; c++) {
        const double pc = std::exp(v[c] - lse);
        dv[c]           = g * ((1 - eps) * wy * (pc - (c == y ? 1.0 : 0.0)) + eps / C * (Wt * pc - W(c)));
      }
    return l;
  }
  double S = 0;
  for (PetscInt c = 0; c < C; c++) {
    const double tc = (1 - eps) * t[c] + eps / C;
    l += tc * W(c) * (lse - v[c]);
    S += tc * W(c);
  }
  *wden = 1;
  if (dv)
    for (PetscInt c = 0; c < C; c++) dv[c] = g * (std::exp(v[c] - lse) * S - ((1 - eps) * t[c] + eps / C) * W(c));
  if (dtv)
    for (PetscInt c = 0; c < C; c++) dtv[c] = g * (-(1 - eps) * W(c) * (v[c] - lse));
  return l;
}

/*
  This worker's part of the loss: the sum of its terms (and, into *den, of the mean's weights);
  with reduction none, the terms are written to the output y.
*/
template <class T>
static double LocalLoss(Loss *s, DDTensor p, DDTensor t, DDTensor y, double *den)
{
  const DDLayout &Lp = p->layout, &Lt = t->layout;
  const T        *a = HostArray<const T>(p), *b = HostArray<const T>(t);
  T              *yo = y ? HostArray<T>(y) : nullptr;
  double          sum = 0;
  *den                = 0;
  if (!p->active || !Lp.bulksize) return 0;
  const PetscInt d = p->order;
  if (s->type != DD_LOSS_CROSSENTROPY && !yo) {
    ForEachBulkRunPair(Lp, Lt, [&](PetscInt oa, PetscInt ob, PetscInt len) {
      for (PetscInt i = 0; i < len; i++) {
        double r = (double)a[oa + i] - (double)b[ob + i];
        sum += s->type == DD_LOSS_MSE ? r * r : std::fabs(r);
      }
    });
    *den = s->count;
    return sum;
  }
  if (s->type != DD_LOSS_CROSSENTROPY) {
    PetscInt a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
    for (PetscInt k = 0; k < d; k++) {
      a0[k]  = 0;
      b0[k]  = Lp.n[k];
      ord[k] = k;
    }
    ForEachIndex(d, a0, b0, ord, [&](const PetscInt *j) {
      const double r = (double)a[Off(Lp, d, j, j[1])] - (double)b[Off(Lt, d, j, j[1])], v = s->type == DD_LOSS_MSE ? r * r : std::fabs(r);
      sum += v;
      if (yo) yo[Off(y->layout, d, j, j[1])] = (T)v;
    });
    *den = s->count;
    return sum;
  }
  const PetscInt      C = Lp.n[1];
  std::vector<double> v(C), tv(s->prob ? C : 1);
  ForEachPosition(Lp, [&](const PetscInt *j) {
    for (PetscInt c = 0; c < C; c++) v[c] = (double)a[Off(Lp, d, j, c)];
    if (s->prob)
      for (PetscInt c = 0; c < C; c++) tv[c] = (double)b[Off(Lt, d, j, c)];
    else tv[0] = (double)b[Off(Lt, d, j, 0)];
    double       wd;
    const double l = CrossEntropyAt(s, C, v.data(), tv.data(), &wd, 0, nullptr, nullptr);
    sum += l;
    *den += wd;
    if (yo) yo[Off(y->layout, d, j, 0)] = (T)l;
  });
  return sum;
}

static PetscErrorCode Loss_Forward(DDLayer l, PetscInt n, DDTensor xs[], DDTensor y)
{
  Loss          *s   = (Loss *)l->data;
  const PetscInt C   = xs[0]->shape[1];
  const bool     dyn = s->type == DD_LOSS_CROSSENTROPY && !s->prob && s->red == DD_REDUCTION_MEAN; /* the mean's divisor depends on the targets */

  PetscFunctionBegin;
  if (s->type == DD_LOSS_CROSSENTROPY && !s->prob) { /* class indices must be valid (checked on every rank) */
    PetscBool ok = PETSC_TRUE;
    double    bad = 0;
    if (xs[1]->active) PetscCall(DispatchType(xs[1]->dtype, [&](auto z) -> PetscErrorCode {
      using T    = decltype(z);
      const T *b = HostArray<const T>(xs[1]);
      ForEachBulkRun(xs[1]->layout, [&](PetscInt off, PetscInt len) {
        for (PetscInt i = 0; i < len; i++) {
          double v = (double)b[off + i];
          if (!((v >= 0 && v < C && v == std::floor(v)) || v == (double)s->ignore)) {
            if (ok) bad = v;
            ok = PETSC_FALSE;
          }
        }
      });
      return PETSC_SUCCESS;
    }));
    DDCheckAll(PetscObjectComm((PetscObject)l), ok, PETSC_ERR_ARG_OUTOFRANGE, "Cross-entropy target holds %g, which is neither a class index in [0, %" PetscInt_FMT ") nor the ignore_index %" PetscInt_FMT, bad, C, s->ignore);
  }
  double local = 0, den = 0;
  PetscCall(DispatchType(xs[0]->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    local   = LocalLoss<T>(s, xs[0], xs[1], s->red == DD_REDUCTION_NONE ? y : NULL, &den);
    return PETSC_SUCCESS;
  }));
  if (dyn) { /* the sum of the weights of the targets not ignored, onto every rank through R and B */
    PetscCall(DDTensorSet(s->part, den));
    PetscCall(DDPrimitiveApply(s->R, s->part, s->yden));
    PetscCall(DDPrimitiveApply(s->B, s->yden, s->yall));
    s->count = s->yall->dtype == DD_FLOAT32 ? (double)(HostArray<float>(s->yall))[0] : (HostArray<double>(s->yall))[0];
  }
  const double div = s->red == DD_REDUCTION_MEAN ? s->count : 1.0;
  PetscCall(DDTensorSet(s->part, local / div));
  PetscCall(DDPrimitiveApply(s->R, s->part, s->ys));
  /* report the value everywhere */
  PetscCall(DDPrimitiveApply(s->B, s->ys, s->yall));
  s->value = (PetscReal)(s->yall->dtype == DD_FLOAT32 ? (HostArray<float>(s->yall))[0] : (HostArray<double>(s->yall))[0]);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the derivative of an element loss (mse, l1) at r = prediction - target */
template <DDLossType K>
static inline double ElementDeriv(double r)
{
  return K == DD_LOSS_MSE ? 2 * r : (r > 0 ? 1.0 : (r < 0 ? -1.0 : 0.0));
}

/*
  The element losses' backward over the bulk runs (paper 000 sec. 4.3: dl/dp = g l'(p - t),
  dl/dt = -dl/dp), for gradients (and dy, reduction none) stored like the prediction: the same
  arithmetic per element as the generic walk, so the same bits. ga: dy (reduction none) or NULL
  for the scale g0; the target's gradient gt is stored like the target (tlikeb) or like the prediction.
*/
template <class T, DDLossType K>
static void ElementBackwardRuns(const DDLayout &Lp, const DDLayout &Lt, const T *a, const T *b, const T *ga, double g0, T *gp, T *gt, bool tlikeb)
{
  ForEachBulkRunPair(Lp, Lt, [&](PetscInt oa, PetscInt ob, PetscInt len) {
    const T *ap = a + oa, *bp = b + ob, *gg = ga ? ga + oa : nullptr;
    T       *dp = gp ? gp + oa : nullptr, *dt = gt ? gt + (tlikeb ? ob : oa) : nullptr;
    if (gg && dp && dt)
      for (PetscInt i = 0; i < len; i++) {
        const double dr = (double)gg[i] * ElementDeriv<K>((double)ap[i] - (double)bp[i]);
        dp[i]           = (T)dr;
        dt[i]           = (T)-dr;
      }
    else if (!gg && dp && dt)
      for (PetscInt i = 0; i < len; i++) {
        const double dr = g0 * ElementDeriv<K>((double)ap[i] - (double)bp[i]);
        dp[i]           = (T)dr;
        dt[i]           = (T)-dr;
      }
    else if (!gg && dp)
      for (PetscInt i = 0; i < len; i++) dp[i] = (T)(g0 * ElementDeriv<K>((double)ap[i] - (double)bp[i]));
    else
      for (PetscInt i = 0; i < len; i++) {
        const double dr = (gg ? (double)gg[i] : g0) * ElementDeriv<K>((double)ap[i] - (double)bp[i]);
        if (dp) dp[i] = (T)dr;
        if (dt) dt[i] = (T)-dr;
      }
  });
}

/*
  Cross-entropy's backward with the class dimension not blocked: per position one storage offset
  and the class stride (instead of an offset per entry); CrossEntropyAt() as the generic walk. The
  probability targets' gradient gt is stored like the targets (tlikeb) or like the logits.
*/
template <class T>
static void CrossEntropyBackwardStrided(const Loss *s, const DDLayout &Lp, const DDLayout &Lt, const DDLayout *Ly, const T *a, const T *b, const T *ga, double g0, T *gp, T *gt, bool tlikeb)
{
  const PetscInt      d = Lp.order, C = Lp.n[1], sp = Lp.stride[1], stt = s->prob ? Lt.stride[1] : 0;
  std::vector<double> v(C), tv(s->prob ? C : 1), dv(C), dtv(C);
  ForEachPosition(Lp, [&](const PetscInt *j) {
    const PetscInt op = Off(Lp, d, j, 0), ot = Off(Lt, d, j, 0);
    for (PetscInt c = 0; c < C; c++) v[c] = (double)a[op + c * sp];
    if (s->prob)
      for (PetscInt c = 0; c < C; c++) tv[c] = (double)b[ot + c * stt];
    else tv[0] = (double)b[ot];
    double wd;
    (void)CrossEntropyAt(s, C, v.data(), tv.data(), &wd, ga ? (double)ga[Off(*Ly, d, j, 0)] : g0, dv.data(), gt ? dtv.data() : nullptr);
    if (gp)
      for (PetscInt c = 0; c < C; c++) gp[op + c * sp] = (T)dv[c];
    if (gt)
      for (PetscInt c = 0; c < C; c++) gt[tlikeb ? ot + c * stt : op + c * sp] = (T)dtv[c];
  });
}

static PetscErrorCode Loss_Backward(DDLayer l, DDTensor dy, PetscInt n, DDTensor dxs[])
{
  Loss      *s    = (Loss *)l->data;
  DDTensor   p    = l->saved[0], t = l->saved[1];
  const bool none = s->red == DD_REDUCTION_NONE;

  PetscFunctionBegin;
  /* dL on every worker: the adjoint of the sum-reduction is a broadcast (reductions mean and sum).
     Without dy, dL = 1: its broadcast is 1 on every worker, set locally (no message, no tensor) */
  if (!none) {
    if (dy) PetscCall(DDPrimitiveApplyAdjoint(s->R, dy, s->dpart));
    else PetscCall(DDTensorSet(s->dpart, 1.0));
  }
  s->lastfast = PETSC_FALSE;
  if (!dxs) PetscFunctionReturn(PETSC_SUCCESS);
  DDTensor dp = dxs[0], dt = n > 1 ? dxs[1] : NULL;
  PetscCall(DispatchType(p->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    const double g0 = none ? 1.0 : (p->active && s->dpart->layout.bulksize ? (double)(HostArray<const T>(s->dpart))[0] / (s->red == DD_REDUCTION_MEAN ? s->count : 1.0) : 0);
    const T       *a  = HostArray<const T>(p), *b = HostArray<const T>(t);
    const T       *ga = none && dy ? HostArray<const T>(dy) : nullptr;
    const PetscInt d  = p->order;
    const DDLayout &Lp = p->layout, &Lt = t->layout;
    const bool      ce = s->type == DD_LOSS_CROSSENTROPY, wantt = dt && (!ce || s->prob);
    /* the fast paths: the gradients stored like the prediction (the target's: or like the target); element losses: dy too; cross-entropy: the class dimension not blocked */
    bool       fast   = !s->generic && p->active;
    const bool tlikeb = wantt && LayoutSameStorage(dt->layout, Lt);
    if (dp) fast = fast && LayoutSameStorage(dp->layout, Lp);
    if (wantt) fast = fast && (tlikeb || LayoutSameStorage(dt->layout, Lp));
    if (ga && !ce) fast = fast && LayoutSameStorage(dy->layout, Lp);
    if (ce) fast = fast && Lp.bdim != 1 && (!s->prob || Lt.bdim != 1);
    /* every storage entry written: no zeroing first */
    if (dp && !(fast && LayoutBulkIsContiguous(dp->layout))) PetscCall(DDTensorZeroEntries(dp));
    if (dt && !(fast && wantt && LayoutBulkIsContiguous(dt->layout))) PetscCall(DDTensorZeroEntries(dt));
    s->lastfast = fast ? PETSC_TRUE : PETSC_FALSE;
    if (!p->active) PetscFunctionReturn(PETSC_SUCCESS);
    T *gp = dp ? HostArray<T>(dp) : nullptr, *gt = wantt ? HostArray<T>(dt) : nullptr;
    if (fast) {
      if (s->type == DD_LOSS_MSE) ElementBackwardRuns<T, DD_LOSS_MSE>(Lp, Lt, a, b, ga, g0, gp, gt, tlikeb);
      else if (s->type == DD_LOSS_L1) ElementBackwardRuns<T, DD_LOSS_L1>(Lp, Lt, a, b, ga, g0, gp, gt, tlikeb);
      else CrossEntropyBackwardStrided<T>(s, Lp, Lt, ga ? &dy->layout : nullptr, a, b, ga, g0, gp, gt, tlikeb);
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    /* the generic walk (any layouts): the scale of position / element j is dy there (reduction none) or dL / divisor */
    auto g = [&](const PetscInt *j, PetscInt c) { return ga ? (double)ga[Off(dy->layout, d, j, c)] : g0; };
    if (!ce) {
      auto     deriv = [&](double r) { return s->type == DD_LOSS_MSE ? ElementDeriv<DD_LOSS_MSE>(r) : ElementDeriv<DD_LOSS_L1>(r); };
      PetscInt a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
      for (PetscInt k = 0; k < d; k++) {
        a0[k]  = 0;
        b0[k]  = Lp.n[k];
        ord[k] = k;
      }
      ForEachIndex(d, a0, b0, ord, [&](const PetscInt *j) {
        const double dr = g(j, j[1]) * deriv((double)a[Off(Lp, d, j, j[1])] - (double)b[Off(Lt, d, j, j[1])]);
        if (gp) gp[Off(dp->layout, d, j, j[1])] = (T)dr;
        if (gt) gt[Off(dt->layout, d, j, j[1])] = (T)-dr;
      });
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    /* cross-entropy: the logits' gradient; probability targets get one too, class indices none */
    const PetscInt      C = Lp.n[1];
    std::vector<double> v(C), tv(s->prob ? C : 1), dv(C), dtv(C);
    ForEachPosition(Lp, [&](const PetscInt *j) {
      for (PetscInt c = 0; c < C; c++) v[c] = (double)a[Off(Lp, d, j, c)];
      if (s->prob)
        for (PetscInt c = 0; c < C; c++) tv[c] = (double)b[Off(Lt, d, j, c)];
      else tv[0] = (double)b[Off(Lt, d, j, 0)];
      double wd;
      (void)CrossEntropyAt(s, C, v.data(), tv.data(), &wd, g(j, 0), dv.data(), gt ? dtv.data() : nullptr);
      if (gp)
        for (PetscInt c = 0; c < C; c++) gp[Off(dp->layout, d, j, c)] = (T)dv[c];
      if (gt)
        for (PetscInt c = 0; c < C; c++) gt[Off(dt->layout, d, j, c)] = (T)dtv[c];
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
  if (s->type == DD_LOSS_CROSSENTROPY)
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s targets, %s, ignore_index %" PetscInt_FMT ", label smoothing %g\n", s->prob ? "probability" : "class-index", s->weights.empty() ? "no class weights" : "class weights", s->ignore, (double)s->smoothing));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERLOSS - "loss": mse, l1 or cross-entropy between a prediction and a target (paper 000 sec. 4.3)

  Two inputs: the prediction and the target, distributed alike (for cross-entropy: logits
  (N, C, ...) and class indices (N, ...), or class probabilities of the logits' shape). With
  reduction mean or sum the output is a one-entry tensor on the first worker of the prediction's
  partition (the sum-reduction of the workers' partial sums); with reduction none it is the loss
  per element (mse, l1; the prediction's distribution) or per position (cross-entropy: (N, ...),
  distributed like the batch). Backward with dy = NULL means dL = 1 (reduction none: dy = ones);
  the prediction's gradient (and the target's, for mse, l1 and probability targets) follow.

  Cross-entropy is torch.nn.CrossEntropyLoss (1.13): class weights, ignore_index (default -100),
  label_smoothing, probability targets; the weighted mean divides by the sum of the weights of the
  targets that are not ignored (probability targets: by the number of positions).

  Envelope: any partition that does not split the class dimension, float32 and float64. Rejected
  (errors naming the setting): an unknown type or reduction; class weights that are negative or
  not finite, or whose number is not C; label smoothing outside [0, 1]; class weights, label
  smoothing or probability targets with mse or l1; a class-index target that is neither in
  [0, C) nor the ignore_index (at Forward, on every rank); a split class dimension; targets not
  distributed like the logits; replicated inputs with class-index targets or reduction none.

  Options Database Keys:
+ -layer_loss_type <mse,l1,crossentropy> - the loss
. -layer_loss_reduction <mean,sum,none> - mean (default), sum, or none
. -layer_loss_weight <w0,w1,...> - cross-entropy's class weights
. -layer_loss_ignore_index <i> - cross-entropy's ignore_index
. -layer_loss_label_smoothing <eps> - cross-entropy's label smoothing
- -layer_loss_probability_targets <bool> - cross-entropy's targets are probabilities

  Level: beginner

.seealso: `DDLayerLossSetType()`, `DDLayerLossGetValue()`, `DDLayerLossSetClassWeights()`, `DDLayerLossSetIgnoreIndex()`,
          `DDLayerLossSetLabelSmoothing()`, `DDLayerLossSetProbabilityTargets()`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Loss(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Loss;
  l->minin               = 2;
  l->maxin               = 2;
  l->nulldy              = PETSC_TRUE; /* dy = NULL: dL = 1 */
  l->ops->setfromoptions = Loss_SetFromOptions;
  l->ops->setup          = Loss_SetUp;
  l->ops->forward        = Loss_Forward;
  l->ops->backward       = Loss_Backward;
  l->ops->view           = Loss_View;
  l->ops->reset          = Loss_Reset;
  l->ops->destroy        = Loss_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}


