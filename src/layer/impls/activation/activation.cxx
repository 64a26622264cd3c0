/*
  DDLAYERACTIVATION: pointwise activation functions, hyper-local (paper 000 sec. 4): no data
  movement. The output has the input's partition, ownership and storage format; Backward uses
  the input saved by Forward: dx = f'(x) dy.
*/
#include <layer/impls/batchnorm/normcommon.hpp>
#include <cmath>

using namespace ddnn;

namespace
{
struct Activation {
  DDActivationType type  = DD_ACT_RELU;
  PetscReal        slope = 0.01;
};

constexpr double kInvSqrt2   = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <class T>
inline T Sigmoid(T x)
{
  if (x >= 0) return (T)1 / ((T)1 + std::exp(-x));
  const T e = std::exp(x);
  return e / ((T)1 + e);
}

/* y[i] = f(x[i]) over runs, one loop per type so that the simple ones vectorize */
template <class T>
void ForwardRun(DDActivationType type, T slope, const T *x, T *y, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU:
    for (PetscInt i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (T)0;
    break;
  case DD_ACT_LEAKYRELU:
    for (PetscInt i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : slope * x[i];
    break;
  case DD_ACT_TANH:
    for (PetscInt i = 0; i < n; i++) y[i] = std::tanh(x[i]);
    break;
  case DD_ACT_SIGMOID:
    for (PetscInt i = 0; i < n; i++) y[i] = Sigmoid(x[i]);
    break;
  case DD_ACT_GELU:
    for (PetscInt i = 0; i < n; i++) y[i] = (T)(0.5 * (double)x[i] * (1.0 + std::erf((double)x[i] * kInvSqrt2)));
    break;
  case DD_ACT_IDENTITY:
    for (PetscInt i = 0; i < n; i++) y[i] = x[i];
    break;
  }
}

/* dx[i] = f'(x[i]) dy[i] (dy may alias dx) */
template <class T>
void BackwardRun(DDActivationType type, T slope, const T *x, const T *dy, T *dx, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU: /* f'(0) = 0, as PyTorch */
    for (PetscInt i = 0; i < n; i++) dx[i] = x[i] > 0 ? dy[i] : (T)0;
    break;
  case DD_ACT_LEAKYRELU:
    for (PetscInt i = 0; i < n; i++) dx[i] = x[i] > 0 ? dy[i] : slope * dy[i];
    break;
  case DD_ACT_TANH:
    for (PetscInt i = 0; i < n; i++) {
      const T t = std::tanh(x[i]);
      dx[i]     = ((T)1 - t * t) * dy[i];
    }
    break;
  case DD_ACT_SIGMOID:
    for (PetscInt i = 0; i < n; i++) {
      const T s = Sigmoid(x[i]);
      dx[i]     = s * ((T)1 - s) * dy[i];
    }
    break;
  case DD_ACT_GELU: /* Phi(x) + x phi(x) */
    for (PetscInt i = 0; i < n; i++) {
      const double v = (double)x[i];
      dx[i]          = (T)((0.5 * (1.0 + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v)) * (double)dy[i]);
    }
    break;
  case DD_ACT_IDENTITY:
    for (PetscInt i = 0; i < n; i++) dx[i] = dy[i];
    break;
  }
}
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
    const T *xa  = (const T *)x->array;
    T       *ya  = (T *)y->array;
    const T  slp = (T)s->slope;
    ForEachBulkRunPair(x->layout, y->layout, [&](PetscInt ox, PetscInt oy, PetscInt len) { ForwardRun<T>(s->type, slp, xa + ox, ya + oy, len); });
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
    const T *xa  = (const T *)x->array, *ga = (const T *)dy->array;
    T       *da  = (T *)dx->array;
    const T  slp = (T)s->slope;
    ForEachBulkRunPair(x->layout, dx->layout, [&](PetscInt ox, PetscInt od, PetscInt len) { BackwardRun<T>(s->type, slp, xa + ox, withx ? ga + ox : (withdx ? ga + od : da + od), da + od, len); });
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
  input saved by Forward (f'(0) = 0 for relu, the slope for leakyrelu, as PyTorch).

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

