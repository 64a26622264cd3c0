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
#include <memory>
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
  std::unique_ptr<LossKernel> kern;              /* the local passes, from the layer's backend chain */
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
  s->kern.reset();
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
  PetscCall(DDTensorSetMemType(*y, p->memtype));
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
  PetscCall(DDTensorSetMemType(s->part, p->memtype));
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
  { /* the local passes */
    LossKernelSpec spec;
    spec.type      = s->type;
    spec.prob      = s->prob ? true : false;
    spec.ignore    = s->ignore;
    spec.smoothing = (double)s->smoothing;
    spec.weights   = s->weights;
    PetscCall(DispatchType(p->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      decltype(KernelTable<T>::losscreate) fn;
      PetscFunctionBegin;
      PetscCall(LayerKernel<T>(l, &KernelTable<T>::losscreate, DD_KERNEL_LOSS, &fn, NULL));
      PetscCall(fn(spec, &s->kern));
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the first entry of a one-entry tensor's piece (a device tensor: copied to the host) */
static PetscErrorCode FirstValue(DDTensor t, double *v)
{
  const void *a;

  PetscFunctionBegin;
  PetscCall(DDTensorGetArrayRead(t, &a));
  *v = t->dtype == DD_FLOAT32 ? (double)((const float *)a)[0] : ((const double *)a)[0];
  PetscCall(DDTensorRestoreArrayRead(t, &a));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Loss_Forward(DDLayer l, PetscInt n, DDTensor xs[], DDTensor y)
{
  Loss          *s   = (Loss *)l->data;
  const PetscInt C   = xs[0]->shape[1];
  const bool     dyn = s->type == DD_LOSS_CROSSENTROPY && !s->prob && s->red == DD_REDUCTION_MEAN; /* the mean's divisor depends on the targets */
  double         local = 0, den = 0, bad = 0;
  PetscInt       nbad  = 0;

  PetscFunctionBegin;
  PetscCall(s->kern->Forward(xs[0], xs[1], s->red == DD_REDUCTION_NONE ? y : NULL, &local, &den, &nbad, &bad));
  if (s->type == DD_LOSS_CROSSENTROPY && !s->prob) /* class indices must be valid (checked on every rank) */
    DDCheckAll(PetscObjectComm((PetscObject)l), nbad == 0, PETSC_ERR_ARG_OUTOFRANGE, "Cross-entropy target holds %g, which is neither a class index in [0, %" PetscInt_FMT ") nor the ignore_index %" PetscInt_FMT, bad, C, s->ignore);
  if (dyn) { /* the sum of the weights of the targets not ignored, onto every rank through R and B */
    PetscCall(DDTensorSet(s->part, den));
    PetscCall(DDPrimitiveApply(s->R, s->part, s->yden));
    PetscCall(DDPrimitiveApply(s->B, s->yden, s->yall));
    PetscCall(FirstValue(s->yall, &s->count));
  }
  const double div = s->red == DD_REDUCTION_MEAN ? s->count : 1.0;
  PetscCall(DDTensorSet(s->part, local / div));
  PetscCall(DDPrimitiveApply(s->R, s->part, s->ys));
  /* report the value everywhere */
  PetscCall(DDPrimitiveApply(s->B, s->ys, s->yall));
  {
    double v;
    PetscCall(FirstValue(s->yall, &v));
    s->value = (PetscReal)v;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
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
  DDTensor        dp = dxs[0], dt = n > 1 ? dxs[1] : NULL;
  double          g0 = 1.0;
  const DDLayout &Lp = p->layout, &Lt = t->layout;
  const bool      ce = s->type == DD_LOSS_CROSSENTROPY, wantt = dt && (!ce || s->prob);
  if (!none) {
    g0 = 0;
    if (p->active && s->dpart->layout.bulksize) {
      PetscCall(FirstValue(s->dpart, &g0));
      g0 /= s->red == DD_REDUCTION_MEAN ? s->count : 1.0;
    }
  }
  /* the fast paths: the gradients stored like the prediction (the target's: or like the target); element losses: dy too; cross-entropy: the class dimension not blocked */
  bool       fast   = !s->generic && p->active;
  const bool tlikeb = wantt && LayoutSameStorage(dt->layout, Lt);
  if (dp) fast = fast && LayoutSameStorage(dp->layout, Lp);
  if (wantt) fast = fast && (tlikeb || LayoutSameStorage(dt->layout, Lp));
  if (none && dy && !ce) fast = fast && LayoutSameStorage(dy->layout, Lp);
  if (ce) fast = fast && Lp.bdim != 1 && (!s->prob || Lt.bdim != 1);
  /* every storage entry written: no zeroing first */
  if (dp && !(fast && LayoutBulkIsContiguous(dp->layout))) PetscCall(DDTensorZeroEntries(dp));
  if (dt && !(fast && wantt && LayoutBulkIsContiguous(dt->layout))) PetscCall(DDTensorZeroEntries(dt));
  s->lastfast = fast ? PETSC_TRUE : PETSC_FALSE;
  if (!p->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(s->kern->Backward(p, t, none ? dy : NULL, g0, dp, wantt ? dt : NULL, fast, tlikeb));
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
  targets that are not ignored (probability targets: by the number of positions). Non-finite
  logits as PyTorch's: a class masked with a -inf logit gives a finite loss and no gradient, a -inf
  logit at the target a loss of +inf, and a nan logit at an ignored position leaves the loss alone
  and makes that position's gradient nan.

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
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda loss kernel, the reductions on the device */
  l->ops->destroy        = Loss_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}


