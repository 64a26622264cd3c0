/*
  DDLAYERACTIVATION: pointwise activation functions, hyper-local (paper 000 sec. 4): no data
  movement. The output has the input's partition, ownership and storage format; Backward uses
  the input saved by Forward: dx = f'(x) dy. The loops are the pointwise
  entries (actfwd, actbwd) of the layer's backend chain.
*/
#include <layer/impls/common/layerutil.hpp>
#include <ddnn/private/ddbackendimpl.h>

using namespace ddnn;

namespace
{
struct Activation {
  DDActivationType type  = DD_ACT_RELU;
  PetscReal        slope = 0.01;
};

} // namespace

static PetscErrorCode ActivationGet(DDLayer l, Activation **s, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERACTIVATION, fn));
  *s = (Activation *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerActivationSetType - The activation function (default relu)

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERACTIVATION` layer
- type - `DD_ACT_RELU`, `DD_ACT_LEAKYRELU`, `DD_ACT_TANH`, `DD_ACT_SIGMOID`, `DD_ACT_GELU` (exact, with erf,
         PyTorch's default) or `DD_ACT_IDENTITY`

  Options Database Key:
. -layer_activation_type <relu,leakyrelu,tanh,sigmoid,gelu,identity> - the function

  Level: beginner

.seealso: `DDLAYERACTIVATION`, `DDLayerActivationSetNegativeSlope()`
@*/
PetscErrorCode DDLayerActivationSetType(DDLayer l, DDActivationType type)
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetType"));
  PetscCheck(type >= DD_ACT_RELU && type <= DD_ACT_IDENTITY, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown activation type %d", (int)type);
  s->type = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerActivationSetNegativeSlope - The slope of leakyrelu for negative inputs (default 0.01)

  Logically collective

  Input Parameters:
+ l     - a `DDLAYERACTIVATION` layer
- slope - the slope (torch.nn.LeakyReLU's negative_slope)

  Options Database Key:
. -layer_activation_negative_slope <s> - the slope

  Level: beginner

.seealso: `DDLayerActivationSetType()`
@*/
PetscErrorCode DDLayerActivationSetNegativeSlope(DDLayer l, PetscReal slope)
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetNegativeSlope"));
  s->slope = slope;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Activation *s = (Activation *)l->data;
  PetscEnum   e = (PetscEnum)s->type;
  PetscReal   v;
  PetscBool   set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer activation options");
  PetscCall(PetscOptionsEnum("-layer_activation_type", "Activation function", "DDLayerActivationSetType", DDActivationTypes, e, &e, &set));
  if (set) PetscCall(DDLayerActivationSetType(l, (DDActivationType)e));
  PetscCall(PetscOptionsReal("-layer_activation_negative_slope", "Slope of leakyrelu for negative inputs", "DDLayerActivationSetNegativeSlope", s->slope, &v, &set));
  if (set) PetscCall(DDLayerActivationSetNegativeSlope(l, v));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  delete (Activation *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(CreateLike(xs[0], &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Activation *s = (Activation *)l->data;
  DDTensor    x = xs[0];

  PetscFunctionBegin;
  if (!x->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T      = decltype(z);
    const T *xa  = HostArray<const T>(x);
    T       *ya  = HostArray<T>(y);
    const T  slp = (T)s->slope;
    DDBackend which;
    decltype(KernelTable<T>::actfwd) fn;
    PetscCall(LayerKernel<T>(l, &KernelTable<T>::actfwd, DD_KERNEL_POINTWISE, &fn, &which));
    KernelEvent e(which, DD_KERNEL_POINTWISE);
    ForEachBulkRunPair(x->layout, y->layout, [&](PetscInt ox, PetscInt oy, PetscInt len) { fn(s->type, slp, xa + ox, ya + oy, len); });
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Activation *s  = (Activation *)l->data;
  DDTensor    x  = l->saved[0], dx = dxs ? dxs[0] : NULL;

  PetscFunctionBegin;
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  /* dy walks with x when they share the storage layout; otherwise it is copied into dx first */
  const bool withx = LayoutSameStorage(x->layout, dy->layout), withdx = !withx && LayoutSameStorage(dx->layout, dy->layout);
  if (!withx && !withdx) PetscCall(DDTensorCopy(dy, dx));
  if (!x->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T      = decltype(z);
    const T *xa  = HostArray<const T>(x), *ga = HostArray<const T>(dy);
    T       *da  = HostArray<T>(dx);
    const T  slp = (T)s->slope;
    DDBackend which;
    decltype(KernelTable<T>::actbwd) fn;
    PetscCall(LayerKernel<T>(l, &KernelTable<T>::actbwd, DD_KERNEL_POINTWISE, &fn, &which));
    KernelEvent e(which, DD_KERNEL_POINTWISE);
    ForEachBulkRunPair(x->layout, dx->layout, [&](PetscInt ox, PetscInt od, PetscInt len) { fn(s->type, slp, xa + ox, withx ? ga + ox : (withdx ? ga + od : da + od), da + od, len); });
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_View(DDLayer l, PetscViewer viewer)
{
  Activation *s = (Activation *)l->data;

  PetscFunctionBegin;
  if (s->type == DD_ACT_LEAKYRELU) PetscCall(PetscViewerASCIIPrintf(viewer, "%s, negative slope %g\n", DDActivationTypes[s->type], (double)s->slope));
  else PetscCall(PetscViewerASCIIPrintf(viewer, "%s\n", DDActivationTypes[s->type]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERACTIVATION - "activation": pointwise activation functions (hyper-local, paper 000 sec. 4)

  relu, leakyrelu (negative slope, default 0.01), tanh, sigmoid, gelu (exact erf form, PyTorch's
  default) and identity, as in torch.nn. No communication: the output has the input's partition,
  ownership and storage format (any order, any format). Backward computes dx = f'(x) dy from the
  input saved by Forward (f'(0) = 0 for relu, the slope for leakyrelu, as PyTorch). NaN propagates as in PyTorch: relu(NaN) =
  leakyrelu(NaN) = NaN, and relu's backward passes dy where x is NaN.

  Options Database Keys:
+ -layer_activation_type <relu,leakyrelu,tanh,sigmoid,gelu,identity> - the function
- -layer_activation_negative_slope <s> - leakyrelu's slope

  Level: beginner

.seealso: `DDLayerActivationSetType()`, `DDLayerActivationSetNegativeSlope()`, `DDLAYERDROPOUT`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Activation(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Activation;
  l->ops->setfromoptions = Activation_SetFromOptions;
  l->ops->setup          = Activation_SetUp;
  l->ops->forward        = Activation_Forward;
  l->ops->backward       = Activation_Backward;
  l->ops->view           = Activation_View;
  l->ops->destroy        = Activation_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

