/*
  DDLAYERDROPOUT: inverted dropout, hyper-local (paper 000 sec. 4): no data movement.

  In training, entry g (its global C-order index) is kept with probability 1 - p and scaled by
  1/(1 - p), else multiplied by 0 (PyTorch's x * mask: nan for a nan or inf). The mask is drawn from a counter-based generator keyed on (seed, call,
  g), `UniformFromCounter()`, so it does not depend on the partition: the same seed gives the same
  mask on any number of ranks. `call` counts the Forwards in training mode; Backward recomputes
  the mask of the last Forward (nothing is stored). In evaluation mode the layer is the identity.
*/
#include <sys/ddcxx.hpp>
#include <layer/impls/common/layerutil.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <cstdlib>
#include <cerrno>

using namespace ddnn;

namespace
{
struct Dropout {
  PetscReal  p      = 0.5;
  PetscInt64 seed   = 0;
  bool       userseed = false; /* given by DDLayerDropoutSetSeed() (or its option): kept by DDLayerInitializeParameters() */
  PetscInt64 calls  = 0;     /* training Forwards so far */
  PetscInt64 lastkey = 0;    /* the call number of the last Forward's mask */
  bool       lasttraining = true;
};

/* the generator's key of call `call` */
inline uint64_t MaskKey(PetscInt64 seed, PetscInt64 call)
{
  return SplitMix64(SplitMix64((uint64_t)seed) ^ (0xD1B54A32D192ED03ull * ((uint64_t)call + 1)));
}

} // namespace

static PetscErrorCode DropoutGet(DDLayer l, Dropout **s, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERDROPOUT, fn));
  *s = (Dropout *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerDropoutSetProbability - The probability p of zeroing an entry in training (default 0.5)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERDROPOUT` layer
- p - in [0, 1); kept entries are scaled by 1/(1 - p)

  Options Database Key:
. -layer_dropout_p <p> - the probability

  Level: beginner

.seealso: `DDLAYERDROPOUT`, `DDLayerDropoutSetSeed()`
@*/
PetscErrorCode DDLayerDropoutSetProbability(DDLayer l, PetscReal p)
DD_CXX_TRY
{
  Dropout *s;

  PetscFunctionBegin;
  PetscCall(DropoutGet(l, &s, "DDLayerDropoutSetProbability"));
  PetscCheck(p >= 0 && p < 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Dropout probability %g must lie in [0, 1) (-layer_dropout_p)", (double)p);
  s->p = p;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerDropoutSetSeed - The seed of the dropout masks; restarts the sequence of masks

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERDROPOUT` layer
- seed - the seed, the same on every rank

  Options Database Key:
. -layer_dropout_seed <seed> - the seed

  Notes:
  The k-th training Forward after this call draws the mask u(seed, k, g) >= p for the entry of
  global index g, whatever the partition.

  Without a seed given here, `DDLayerInitializeParameters()` sets it from its own seed: in a
  network each layer gets its own (`DDNetInitializeParameters()`: from -net_seed and the layer's
  position), so that its dropout layers draw independent masks, as PyTorch's do; a layer set up on
  its own gets 0. A seed given here is kept by both.

  Level: intermediate

.seealso: `DDLayerDropoutSetProbability()`
@*/
PetscErrorCode DDLayerDropoutSetSeed(DDLayer l, PetscInt64 seed)
DD_CXX_TRY
{
  Dropout *s;

  PetscFunctionBegin;
  PetscCall(DropoutGet(l, &s, "DDLayerDropoutSetSeed"));
  s->seed     = seed;
  s->userseed = true;
  s->calls    = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a fresh start: the masks from the first again, with the seed given (the network's per-layer one unless the user gave one) */
static PetscErrorCode Dropout_InitParams(DDLayer l, PetscInt64 seed)
{
  Dropout *s = (Dropout *)l->data;

  PetscFunctionBegin;
  if (!s->userseed) s->seed = seed;
  s->calls = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Dropout_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Dropout  *s = (Dropout *)l->data;
  PetscReal v;
  PetscBool set;
  char      str[64], def[64];

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer dropout options");
  PetscCall(PetscOptionsReal("-layer_dropout_p", "Probability of zeroing an entry", "DDLayerDropoutSetProbability", s->p, &v, &set));
  if (set) PetscCall(DDLayerDropoutSetProbability(l, v));
  PetscCall(PetscSNPrintf(def, sizeof(def), "%" PetscInt64_FMT, s->seed));
  PetscCall(PetscOptionsString("-layer_dropout_seed", "Seed of the masks (a 64-bit integer)", "DDLayerDropoutSetSeed", def, str, sizeof(str), &set));
  if (set) {
    char *end;
    errno              = 0;
    long long      val = std::strtoll(str, &end, 0);
    PetscCheck(!errno && end != str && *end == 0, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONG, "-layer_dropout_seed %s is not an integer", str);
    PetscCall(DDLayerDropoutSetSeed(l, (PetscInt64)val));
  }
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Dropout_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  delete (Dropout *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Dropout_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(CreateLike(xs[0], &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscCall(DDLayerAddBuffer_Private(l, "calls", NULL, &((Dropout *)l->data)->calls));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Dropout_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Dropout *s = (Dropout *)l->data;
  DDTensor x = xs[0];

  PetscFunctionBegin;
  s->lasttraining = l->training ? true : false;
  if (!l->training) {
    PetscCall(DDTensorCopy(x, y));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  s->lastkey = s->calls++;
  if (!x->active) PetscFunctionReturn(PETSC_SUCCESS);
  const uint64_t key = MaskKey(s->seed, s->lastkey);
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    return CallKernel<T>(l, &KernelTable<T>::dropout, DD_KERNEL_DROPOUT, key, (double)s->p, x->layout, HostArray<const T>(x), y->layout, HostArray<T>(y), (const PetscInt *)x->shape);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Dropout_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Dropout *s  = (Dropout *)l->data;
  DDTensor dx = dxs ? dxs[0] : NULL;

  PetscFunctionBegin;
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  if (!s->lasttraining) {
    PetscCall(DDTensorCopy(dy, dx));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (!dx->active) PetscFunctionReturn(PETSC_SUCCESS);
  const uint64_t key = MaskKey(s->seed, s->lastkey);
  PetscCall(DispatchType(dx->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    return CallKernel<T>(l, &KernelTable<T>::dropout, DD_KERNEL_DROPOUT, key, (double)s->p, dy->layout, HostArray<const T>(dy), dx->layout, HostArray<T>(dx), (const PetscInt *)dx->shape);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Dropout_View(DDLayer l, PetscViewer viewer)
{
  Dropout *s = (Dropout *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "p %g, seed %" PetscInt64_FMT ", %" PetscInt64_FMT " training Forward(s) so far\n", (double)s->p, s->seed, s->calls));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERDROPOUT - "dropout": inverted dropout (hyper-local, paper 000 sec. 4), torch.nn.Dropout

  In training mode each entry is zeroed with probability p (default 0.5) and the others are
  scaled by 1/(1 - p); in evaluation mode (`DDLayerSetTraining()`) the layer is the identity.
  As PyTorch's (x * mask), a dropped entry is the input times 0: a nan or an inf gives nan, and
  so does its gradient for a nan or inf output gradient.
  The output has the input's partition, ownership and format; no communication.

  Partition independence: the mask of entry g (global C-order index) in the k-th training Forward
  is u(seed, k, g) >= p with a counter-based generator (`UniformFromCounter()`), so the same seed
  gives the same masks on any partition. Backward applies the mask of the last Forward. In a
  network each dropout layer's seed derives from -net_seed and its position unless one is given
  (`DDLayerDropoutSetSeed()`): two dropout layers draw independent masks.

  For a fixed mask the layer is linear: `DDLayerAdjointTest()` (which runs Forward at 0 and then
  at x, two training Forwards with different masks) passes because F(0) = 0 under any mask and
  Backward uses the mask of the second Forward, the one that made F(x).

  Options Database Keys:
+ -layer_dropout_p <p> - the probability, in [0, 1)
- -layer_dropout_seed <seed> - the seed (restarts the masks)

  Level: beginner

.seealso: `DDLayerDropoutSetProbability()`, `DDLayerDropoutSetSeed()`, `DDLAYERACTIVATION`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Dropout(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Dropout;
  l->ops->setfromoptions = Dropout_SetFromOptions;
  l->ops->setup          = Dropout_SetUp;
  l->ops->forward        = Dropout_Forward;
  l->ops->backward       = Dropout_Backward;
  l->ops->view           = Dropout_View;
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda mask kernel (the same masks) */
  l->ops->initparams     = Dropout_InitParams;
  l->ops->destroy        = Dropout_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

