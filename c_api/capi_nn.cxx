/*
  capi_nn.cxx - the binding ABI (ddnn_capi.h) of DDLayer, DDNet, DDOptimizer, DDDataset and
  checkpoints. Each entry point converts its arguments and forwards to the C function named in
  its man page.
*/
#include "capi.hpp"

using namespace ddcapi;

/* layer setters taking (n, array) */
static PetscErrorCode LayerIntArray(ddnn_handle lh, ddnn_int n, const ddnn_int a[], PetscErrorCode (*f)(DDLayer, PetscInt, const PetscInt[]))
{
  DDLayer               l;
  std::vector<PetscInt> v;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(IntArray(n, a, DD_MAX_DIM, 3, v));
  PetscCall(f(l, (PetscInt)n, v.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* layer setters taking one enumeration value in [0, n) */
template <class E>
static PetscErrorCode LayerEnum(ddnn_handle lh, int v, int n, const char name[], PetscErrorCode (*f)(DDLayer, E))
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Enum(v, n, name, 2));
  PetscCall(f(l, (E)v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* parameters and their gradients into arrays of capacity cap; cap = 0 (or null arrays) only counts them */
static PetscErrorCode PutParams(PetscInt np, DDTensor *ps, DDTensor *gs, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n)
{
  PetscFunctionBegin;
  PetscCall(Out(n, 5));
  *n = np;
  if (cap == 0 || !(params || grads)) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCheck(cap >= np, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Room for %" PetscInt64_FMT " parameter tensors (argument 2); there are %" PetscInt_FMT, (PetscInt64)cap, np);
  for (PetscInt i = 0; i < np; i++) {
    if (params) params[i] = (ddnn_handle)ps[i];
    if (grads) grads[i] = (ddnn_handle)gs[i];
  }
  *n = np;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* layer */

/*@C
  ddnn_layer_create - ABI of `DDLayerCreate()`

  Level: developer
@*/
int ddnn_layer_create(ddnn_fint fcomm, ddnn_handle *lh)
{
  return Create<DDLayer>(fcomm, lh, DDLayerCreate);
}

/*@C
  ddnn_layer_set_type - ABI of `DDLayerSetType()`

  Level: developer
@*/
int ddnn_layer_set_type(ddnn_handle lh, const char *type, ddnn_int len)
{
  return CallStr<DDLayer>(lh, type, len, DDLayerSetType);
}

/*@C
  ddnn_layer_get_type - ABI of `DDLayerGetType()`: the type name into buf (empty when unset)

  Level: developer
@*/
int ddnn_layer_get_type(ddnn_handle lh, char *buf, ddnn_int buflen)
{
  DDLayer     l;
  DDLayerType type;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerGetType(l, &type));
  PetscCall(PutStr(type, buf, buflen, 2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_set_options_prefix - ABI of `DDLayerSetOptionsPrefix()`

  Level: developer
@*/
int ddnn_layer_set_options_prefix(ddnn_handle lh, const char *prefix, ddnn_int len)
{
  DDLayer l;
  Str     s;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(s.Set(prefix, len, 2, true));
  PetscCall(DDLayerSetOptionsPrefix(l, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_append_options_prefix - ABI of `DDLayerAppendOptionsPrefix()`

  Level: developer
@*/
int ddnn_layer_append_options_prefix(ddnn_handle lh, const char *prefix, ddnn_int len)
{
  DDLayer l;
  Str     s;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(s.Set(prefix, len, 2, true));
  PetscCall(DDLayerAppendOptionsPrefix(l, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_set_from_options - ABI of `DDLayerSetFromOptions()`

  Level: developer
@*/
int ddnn_layer_set_from_options(ddnn_handle lh)
{
  return Call<DDLayer>(lh, DDLayerSetFromOptions);
}

/*@C
  ddnn_layer_set_up - ABI of `DDLayerSetUp()`

  Level: developer
@*/
int ddnn_layer_set_up(ddnn_handle lh, ddnn_handle xh)
{
  DDLayer  l;
  DDTensor x;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Get(xh, 2, &x));
  PetscCall(DDLayerSetUp(l, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_set_up_multi - ABI of `DDLayerSetUpMulti()`

  Level: developer
@*/
int ddnn_layer_set_up_multi(ddnn_handle lh, ddnn_int n, const ddnn_handle xs[])
{
  DDLayer               l;
  std::vector<DDTensor> x;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(GetArray(n, xs, 3, x));
  PetscCall(DDLayerSetUpMulti(l, (PetscInt)n, x.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_get_output - ABI of `DDLayerGetOutput()` (a borrowed handle: do not destroy it)

  Level: developer
@*/
int ddnn_layer_get_output(ddnn_handle lh, ddnn_handle *yh)
{
  DDLayer  l;
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Out(yh, 2));
  PetscCall(DDLayerGetOutput(l, &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_create_output - ABI of `DDLayerCreateOutput()` (a new tensor the caller destroys)

  Level: developer
@*/
int ddnn_layer_create_output(ddnn_handle lh, ddnn_handle *yh)
{
  DDLayer  l;
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Out(yh, 2));
  PetscCall(DDLayerCreateOutput(l, &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_forward - ABI of `DDLayerForward()`

  Level: developer
@*/
int ddnn_layer_forward(ddnn_handle lh, ddnn_handle xh, ddnn_handle yh)
{
  DDLayer  l;
  DDTensor x, y;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Get(xh, 2, &x));
  PetscCall(Get(yh, 3, &y));
  PetscCall(DDLayerForward(l, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_forward_multi - ABI of `DDLayerForwardMulti()`

  Level: developer
@*/
int ddnn_layer_forward_multi(ddnn_handle lh, ddnn_int n, const ddnn_handle xs[], ddnn_handle yh)
{
  DDLayer               l;
  std::vector<DDTensor> x;
  DDTensor              y;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(GetArray(n, xs, 3, x));
  PetscCall(Get(yh, 4, &y));
  PetscCall(DDLayerForwardMulti(l, (PetscInt)n, x.data(), y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_backward - ABI of `DDLayerBackward()`: dx = J^* dy; dx may be 0 when only the parameters' gradients are wanted

  Level: developer
@*/
int ddnn_layer_backward(ddnn_handle lh, ddnn_handle dyh, ddnn_handle dxh)
{
  DDLayer  l;
  DDTensor dy, dx;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Get(dyh, 2, &dy));
  PetscCall(Get(dxh, 3, &dx, true));
  PetscCall(DDLayerBackward(l, dy, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_backward_multi - ABI of `DDLayerBackwardMulti()`; entries of dxs may be 0 (no gradient wanted)

  Level: developer
@*/
int ddnn_layer_backward_multi(ddnn_handle lh, ddnn_handle dyh, ddnn_int n, const ddnn_handle dxs[])
{
  DDLayer               l;
  DDTensor              dy;
  std::vector<DDTensor> dx;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Get(dyh, 2, &dy));
  PetscCheck(n >= 0 && n <= DD_LAYER_MAX_INPUTS, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Invalid number of inputs %" PetscInt64_FMT " (argument 3)", (PetscInt64)n);
  PetscCheck(n == 0 || dxs, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null array of DDTensor handles (argument 4)");
  dx.resize((size_t)n);
  for (ddnn_int i = 0; i < n; i++) {
    PetscCall(CheckHandle(dxs[i], DD_TENSOR_CLASSID, "DDTensor", 4, (PetscInt)i, true));
    dx[i] = (DDTensor)dxs[i];
  }
  PetscCall(DDLayerBackwardMulti(l, dy, (PetscInt)n, dx.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_get_parameters - ABI of `DDLayerGetParameters()` and `DDLayerGetGradients()` (borrowed handles)

  Input Parameters:
+ l   - the layer
- cap - capacity of params and grads; 0 only counts the tensors

  Output Parameters:
+ params - the parameter tensors (or a null pointer)
. grads  - their gradients (or a null pointer)
- n      - the number of parameter tensors

  Level: developer
@*/
int ddnn_layer_get_parameters(ddnn_handle lh, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n)
{
  DDLayer   l;
  PetscInt  np, ng;
  DDTensor *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerGetParameters(l, &np, &ps));
  PetscCall(DDLayerGetGradients(l, &ng, &gs));
  PetscCall(PutParams(np, ps, gs, cap, params, grads, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_get_num_parameters - ABI of `DDLayerGetNumParameters()` (global count of scalar parameters)

  Level: developer
@*/
int ddnn_layer_get_num_parameters(ddnn_handle lh, ddnn_int *count)
{
  DDLayer    l;
  PetscInt64 c;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Out(count, 2));
  PetscCall(DDLayerGetNumParameters(l, &c));
  *count = c;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_zero_gradients - ABI of `DDLayerZeroGradients()`

  Level: developer
@*/
int ddnn_layer_zero_gradients(ddnn_handle lh)
{
  return Call<DDLayer>(lh, DDLayerZeroGradients);
}

/*@C
  ddnn_layer_initialize_parameters - ABI of `DDLayerInitializeParameters()`

  Level: developer
@*/
int ddnn_layer_initialize_parameters(ddnn_handle lh, int64_t seed)
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerInitializeParameters(l, (PetscInt64)seed));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_set_init_type - ABI of `DDLayerSetInitType()`: type is a `DDInitType` value

  Level: developer
@*/
int ddnn_layer_set_init_type(ddnn_handle lh, int type)
{
  return LayerEnum<DDInitType>(lh, type, 7, "DDInitType", DDLayerSetInitType);
}

/*@C
  ddnn_layer_set_init_scale - ABI of `DDLayerSetInitScale()`

  Level: developer
@*/
int ddnn_layer_set_init_scale(ddnn_handle lh, double scale)
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerSetInitScale(l, scale));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_set_training - ABI of `DDLayerSetTraining()`

  Level: developer
@*/
int ddnn_layer_set_training(ddnn_handle lh, int flg)
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerSetTraining(l, flg ? PETSC_TRUE : PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_adjoint_test - ABI of `DDLayerAdjointTest()`

  Level: developer
@*/
int ddnn_layer_adjoint_test(ddnn_handle lh, int wrtparams, int64_t seed, double *err)
{
  DDLayer   l;
  PetscReal e;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Out(err, 4));
  PetscCall(DDLayerAdjointTest(l, wrtparams ? PETSC_TRUE : PETSC_FALSE, (PetscInt64)seed, &e));
  *err = e;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_view - ABI of `DDLayerView()`

  Level: developer
@*/
int ddnn_layer_view(ddnn_handle lh, ddnn_petsc_handle vh)
{
  return View<DDLayer>(lh, vh, DDLayerView);
}

/*@C
  ddnn_layer_destroy - ABI of `DDLayerDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_layer_destroy(ddnn_handle *lh)
{
  return Destroy<DDLayer>(lh, DDLayerDestroy);
}

/*@C
  ddnn_layer_conv_set_output_channels - ABI of `DDLayerConvSetOutputChannels()`

  Level: developer
@*/
int ddnn_layer_conv_set_output_channels(ddnn_handle lh, ddnn_int co)
{
  DDLayer  l;
  PetscInt c;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Int(co, 2, &c));
  PetscCall(DDLayerConvSetOutputChannels(l, c));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_conv_set_kernel - ABI of `DDLayerConvSetKernel()`

  Level: developer
@*/
int ddnn_layer_conv_set_kernel(ddnn_handle lh, ddnn_int n, const ddnn_int k[])
{
  return LayerIntArray(lh, n, k, DDLayerConvSetKernel);
}

/*@C
  ddnn_layer_conv_set_stride - ABI of `DDLayerConvSetStride()`

  Level: developer
@*/
int ddnn_layer_conv_set_stride(ddnn_handle lh, ddnn_int n, const ddnn_int s[])
{
  return LayerIntArray(lh, n, s, DDLayerConvSetStride);
}

/*@C
  ddnn_layer_conv_set_padding - ABI of `DDLayerConvSetPadding()`

  Level: developer
@*/
int ddnn_layer_conv_set_padding(ddnn_handle lh, ddnn_int n, const ddnn_int p[])
{
  return LayerIntArray(lh, n, p, DDLayerConvSetPadding);
}

/*@C
  ddnn_layer_conv_set_dilation - ABI of `DDLayerConvSetDilation()`

  Level: developer
@*/
int ddnn_layer_conv_set_dilation(ddnn_handle lh, ddnn_int n, const ddnn_int d[])
{
  return LayerIntArray(lh, n, d, DDLayerConvSetDilation);
}

/*@C
  ddnn_layer_conv_set_bias - ABI of `DDLayerConvSetBias()`

  Level: developer
@*/
int ddnn_layer_conv_set_bias(ddnn_handle lh, int flg)
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerConvSetBias(l, flg ? PETSC_TRUE : PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_conv_set_padding_mode - ABI of `DDLayerConvSetPaddingMode()`: mode is a `DDPaddingMode` value

  Level: developer
@*/
int ddnn_layer_conv_set_padding_mode(ddnn_handle lh, int mode)
{
  return LayerEnum<DDPaddingMode>(lh, mode, 4, "DDPaddingMode", DDLayerConvSetPaddingMode);
}

/*@C
  ddnn_layer_pool_set_type - ABI of `DDLayerPoolSetType()`: type is a `DDPoolType` value

  Level: developer
@*/
int ddnn_layer_pool_set_type(ddnn_handle lh, int type)
{
  return LayerEnum<DDPoolType>(lh, type, 2, "DDPoolType", DDLayerPoolSetType);
}

/*@C
  ddnn_layer_pool_set_kernel - ABI of `DDLayerPoolSetKernel()`

  Level: developer
@*/
int ddnn_layer_pool_set_kernel(ddnn_handle lh, ddnn_int n, const ddnn_int k[])
{
  return LayerIntArray(lh, n, k, DDLayerPoolSetKernel);
}

/*@C
  ddnn_layer_pool_set_stride - ABI of `DDLayerPoolSetStride()`

  Level: developer
@*/
int ddnn_layer_pool_set_stride(ddnn_handle lh, ddnn_int n, const ddnn_int s[])
{
  return LayerIntArray(lh, n, s, DDLayerPoolSetStride);
}

/*@C
  ddnn_layer_pool_set_padding - ABI of `DDLayerPoolSetPadding()`

  Level: developer
@*/
int ddnn_layer_pool_set_padding(ddnn_handle lh, ddnn_int n, const ddnn_int p[])
{
  return LayerIntArray(lh, n, p, DDLayerPoolSetPadding);
}

/*@C
  ddnn_layer_affine_set_output_features - ABI of `DDLayerAffineSetOutputFeatures()`

  Level: developer
@*/
int ddnn_layer_affine_set_output_features(ddnn_handle lh, ddnn_int n)
{
  DDLayer  l;
  PetscInt m;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Int(n, 2, &m));
  PetscCall(DDLayerAffineSetOutputFeatures(l, m));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_affine_set_bias - ABI of `DDLayerAffineSetBias()`

  Level: developer
@*/
int ddnn_layer_affine_set_bias(ddnn_handle lh, int flg)
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerAffineSetBias(l, flg ? PETSC_TRUE : PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_activation_set_type - ABI of `DDLayerActivationSetType()`: type is a `DDActivationType` value

  Level: developer
@*/
int ddnn_layer_activation_set_type(ddnn_handle lh, int type)
{
  return LayerEnum<DDActivationType>(lh, type, 6, "DDActivationType", DDLayerActivationSetType);
}

/*@C
  ddnn_layer_activation_set_negative_slope - ABI of `DDLayerActivationSetNegativeSlope()`

  Level: developer
@*/
int ddnn_layer_activation_set_negative_slope(ddnn_handle lh, double slope)
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerActivationSetNegativeSlope(l, slope));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_upsample_set_mode - ABI of `DDLayerUpsampleSetMode()`: mode is a `DDUpsampleMode` value

  Level: developer
@*/
int ddnn_layer_upsample_set_mode(ddnn_handle lh, int mode)
{
  return LayerEnum<DDUpsampleMode>(lh, mode, 2, "DDUpsampleMode", DDLayerUpsampleSetMode);
}

/*@C
  ddnn_layer_upsample_set_scale - ABI of `DDLayerUpsampleSetScale()`

  Level: developer
@*/
int ddnn_layer_upsample_set_scale(ddnn_handle lh, ddnn_int n, const ddnn_int s[])
{
  return LayerIntArray(lh, n, s, DDLayerUpsampleSetScale);
}

/*@C
  ddnn_layer_concat_set_dimension - ABI of `DDLayerConcatSetDimension()`

  Level: developer
@*/
int ddnn_layer_concat_set_dimension(ddnn_handle lh, ddnn_int dim)
{
  DDLayer  l;
  PetscInt d;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Int(dim, 2, &d));
  PetscCall(DDLayerConcatSetDimension(l, d));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_layer_loss_set_type - ABI of `DDLayerLossSetType()`: type is a `DDLossType` value

  Level: developer
@*/
int ddnn_layer_loss_set_type(ddnn_handle lh, int type)
{
  return LayerEnum<DDLossType>(lh, type, 3, "DDLossType", DDLayerLossSetType);
}

/*@C
  ddnn_layer_loss_set_reduction - ABI of `DDLayerLossSetReduction()`: reduction is a `DDReduction` value

  Level: developer
@*/
int ddnn_layer_loss_set_reduction(ddnn_handle lh, int reduction)
{
  return LayerEnum<DDReduction>(lh, reduction, 2, "DDReduction", DDLayerLossSetReduction);
}

/*@C
  ddnn_layer_loss_get_value - ABI of `DDLayerLossGetValue()`

  Level: developer
@*/
int ddnn_layer_loss_get_value(ddnn_handle lh, double *value)
{
  DDLayer   l;
  PetscReal v;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(Out(value, 2));
  PetscCall(DDLayerLossGetValue(l, &v));
  *value = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* net */

/*@C
  ddnn_net_create - ABI of `DDNetCreate()`

  Level: developer
@*/
int ddnn_net_create(ddnn_fint fcomm, ddnn_handle *nh)
{
  return Create<DDNet>(fcomm, nh, DDNetCreate);
}

/*@C
  ddnn_net_set_options_prefix - ABI of `DDNetSetOptionsPrefix()`

  Level: developer
@*/
int ddnn_net_set_options_prefix(ddnn_handle nh, const char *prefix, ddnn_int len)
{
  DDNet net;
  Str   s;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(s.Set(prefix, len, 2, true));
  PetscCall(DDNetSetOptionsPrefix(net, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_set_input_names - ABI of `DDNetSetInputNames()`: n NUL-terminated names

  Level: developer
@*/
int ddnn_net_set_input_names(ddnn_handle nh, ddnn_int n, const char *const names[])
{
  DDNet                    net;
  std::vector<std::string> keep;
  std::vector<const char *> ptrs;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(StrArray(n, names, 3, keep, ptrs));
  PetscCall(DDNetSetInputNames(net, (PetscInt)n, ptrs.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_add_layer - ABI of `DDNetAddLayer()`: the layer's name as (name, len), its n inputs as NUL-terminated names

  Level: developer
@*/
int ddnn_net_add_layer(ddnn_handle nh, ddnn_handle lh, const char *name, ddnn_int len, ddnn_int n, const char *const inputs[])
{
  DDNet                     net;
  DDLayer                   l;
  Str                       s;
  std::vector<std::string>  keep;
  std::vector<const char *> ptrs;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Get(lh, 2, &l));
  PetscCall(s.Set(name, len, 3));
  PetscCall(StrArray(n, inputs, 6, keep, ptrs));
  PetscCall(DDNetAddLayer(net, l, s.c(), (PetscInt)n, n ? ptrs.data() : NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_set_output - ABI of `DDNetSetOutput()`

  Level: developer
@*/
int ddnn_net_set_output(ddnn_handle nh, const char *name, ddnn_int len)
{
  return CallStr<DDNet>(nh, name, len, DDNetSetOutput);
}

/*@C
  ddnn_net_set_from_options - ABI of `DDNetSetFromOptions()`

  Level: developer
@*/
int ddnn_net_set_from_options(ddnn_handle nh)
{
  return Call<DDNet>(nh, DDNetSetFromOptions);
}

/*@C
  ddnn_net_set_up - ABI of `DDNetSetUp()`

  Level: developer
@*/
int ddnn_net_set_up(ddnn_handle nh, ddnn_int n, const ddnn_handle xs[])
{
  DDNet                 net;
  std::vector<DDTensor> x;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(GetArray(n, xs, 3, x));
  PetscCall(DDNetSetUp(net, (PetscInt)n, x.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_forward - ABI of `DDNetForward()`

  Level: developer
@*/
int ddnn_net_forward(ddnn_handle nh, ddnn_int n, const ddnn_handle xs[])
{
  DDNet                 net;
  std::vector<DDTensor> x;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(GetArray(n, xs, 3, x));
  PetscCall(DDNetForward(net, (PetscInt)n, x.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_backward - ABI of `DDNetBackward()`; dy may be 0 when the output layer is a loss

  Level: developer
@*/
int ddnn_net_backward(ddnn_handle nh, ddnn_handle dyh)
{
  DDNet    net;
  DDTensor dy;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Get(dyh, 2, &dy, true));
  PetscCall(DDNetBackward(net, dy));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_output - ABI of `DDNetGetOutput()` (a borrowed handle)

  Level: developer
@*/
int ddnn_net_get_output(ddnn_handle nh, ddnn_handle *yh)
{
  DDNet    net;
  DDTensor y;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Out(yh, 2));
  PetscCall(DDNetGetOutput(net, &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_layer - ABI of `DDNetGetLayer()` (a borrowed handle)

  Level: developer
@*/
int ddnn_net_get_layer(ddnn_handle nh, const char *name, ddnn_int len, ddnn_handle *lh)
{
  DDNet   net;
  DDLayer l;
  Str     s;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(s.Set(name, len, 2));
  PetscCall(Out(lh, 4));
  PetscCall(DDNetGetLayer(net, s.c(), &l));
  *lh = (ddnn_handle)l;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_num_layers - ABI of `DDNetGetNumLayers()`

  Level: developer
@*/
int ddnn_net_get_num_layers(ddnn_handle nh, ddnn_int *n)
{
  DDNet    net;
  PetscInt m;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Out(n, 2));
  PetscCall(DDNetGetNumLayers(net, &m));
  *n = m;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_layer_output - ABI of `DDNetGetLayerOutput()` (a borrowed handle)

  Level: developer
@*/
int ddnn_net_get_layer_output(ddnn_handle nh, const char *name, ddnn_int len, ddnn_handle *yh)
{
  DDNet    net;
  DDTensor y;
  Str      s;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(s.Set(name, len, 2));
  PetscCall(Out(yh, 4));
  PetscCall(DDNetGetLayerOutput(net, s.c(), &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_parameters - ABI of `DDNetGetParameters()` (borrowed handles; see `ddnn_layer_get_parameters()`)

  Level: developer
@*/
int ddnn_net_get_parameters(ddnn_handle nh, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n)
{
  DDNet     net;
  PetscInt  np;
  DDTensor *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
  PetscCall(PutParams(np, ps, gs, cap, params, grads, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_num_parameters - ABI of `DDNetGetNumParameters()`

  Level: developer
@*/
int ddnn_net_get_num_parameters(ddnn_handle nh, ddnn_int *count)
{
  DDNet      net;
  PetscInt64 c;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Out(count, 2));
  PetscCall(DDNetGetNumParameters(net, &c));
  *count = c;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_zero_gradients - ABI of `DDNetZeroGradients()`

  Level: developer
@*/
int ddnn_net_zero_gradients(ddnn_handle nh)
{
  return Call<DDNet>(nh, DDNetZeroGradients);
}

/*@C
  ddnn_net_initialize_parameters - ABI of `DDNetInitializeParameters()`

  Level: developer
@*/
int ddnn_net_initialize_parameters(ddnn_handle nh, int64_t seed)
{
  DDNet net;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(DDNetInitializeParameters(net, (PetscInt64)seed));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_set_training - ABI of `DDNetSetTraining()`

  Level: developer
@*/
int ddnn_net_set_training(ddnn_handle nh, int flg)
{
  DDNet net;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(DDNetSetTraining(net, flg ? PETSC_TRUE : PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_get_loss - ABI of `DDNetGetLoss()`

  Level: developer
@*/
int ddnn_net_get_loss(ddnn_handle nh, double *loss)
{
  DDNet     net;
  PetscReal v;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Out(loss, 2));
  PetscCall(DDNetGetLoss(net, &v));
  *loss = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_net_view - ABI of `DDNetView()`

  Level: developer
@*/
int ddnn_net_view(ddnn_handle nh, ddnn_petsc_handle vh)
{
  return View<DDNet>(nh, vh, DDNetView);
}

/*@C
  ddnn_net_destroy - ABI of `DDNetDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_net_destroy(ddnn_handle *nh)
{
  return Destroy<DDNet>(nh, DDNetDestroy);
}

/* ------------------------------------------------------------------------------------------ */
/* optimizer */

/*@C
  ddnn_optimizer_create - ABI of `DDOptimizerCreate()`

  Level: developer
@*/
int ddnn_optimizer_create(ddnn_fint fcomm, ddnn_handle *oh)
{
  return Create<DDOptimizer>(fcomm, oh, DDOptimizerCreate);
}

/*@C
  ddnn_optimizer_set_type - ABI of `DDOptimizerSetType()`

  Level: developer
@*/
int ddnn_optimizer_set_type(ddnn_handle oh, const char *type, ddnn_int len)
{
  return CallStr<DDOptimizer>(oh, type, len, DDOptimizerSetType);
}

/*@C
  ddnn_optimizer_set_options_prefix - ABI of `DDOptimizerSetOptionsPrefix()`

  Level: developer
@*/
int ddnn_optimizer_set_options_prefix(ddnn_handle oh, const char *prefix, ddnn_int len)
{
  DDOptimizer opt;
  Str         s;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(s.Set(prefix, len, 2, true));
  PetscCall(DDOptimizerSetOptionsPrefix(opt, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_from_options - ABI of `DDOptimizerSetFromOptions()`

  Level: developer
@*/
int ddnn_optimizer_set_from_options(ddnn_handle oh)
{
  return Call<DDOptimizer>(oh, DDOptimizerSetFromOptions);
}

/*@C
  ddnn_optimizer_set_learning_rate - ABI of `DDOptimizerSetLearningRate()`

  Level: developer
@*/
int ddnn_optimizer_set_learning_rate(ddnn_handle oh, double lr)
{
  DDOptimizer opt;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(DDOptimizerSetLearningRate(opt, lr));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_get_learning_rate - ABI of `DDOptimizerGetLearningRate()`

  Level: developer
@*/
int ddnn_optimizer_get_learning_rate(ddnn_handle oh, double *lr)
{
  DDOptimizer opt;
  PetscReal   v;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(Out(lr, 2));
  PetscCall(DDOptimizerGetLearningRate(opt, &v));
  *lr = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_momentum - ABI of `DDOptimizerSetMomentum()`

  Level: developer
@*/
int ddnn_optimizer_set_momentum(ddnn_handle oh, double momentum, int nesterov)
{
  DDOptimizer opt;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(DDOptimizerSetMomentum(opt, momentum, nesterov ? PETSC_TRUE : PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_weight_decay - ABI of `DDOptimizerSetWeightDecay()`

  Level: developer
@*/
int ddnn_optimizer_set_weight_decay(ddnn_handle oh, double wd)
{
  DDOptimizer opt;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(DDOptimizerSetWeightDecay(opt, wd));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_clip_norm - ABI of `DDOptimizerSetClipNorm()`

  Level: developer
@*/
int ddnn_optimizer_set_clip_norm(ddnn_handle oh, double clip)
{
  DDOptimizer opt;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(DDOptimizerSetClipNorm(opt, clip));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_up - ABI of `DDOptimizerSetUp()`: n parameter tensors and their gradients

  Level: developer
@*/
int ddnn_optimizer_set_up(ddnn_handle oh, ddnn_int n, const ddnn_handle params[], const ddnn_handle grads[])
{
  DDOptimizer           opt;
  std::vector<DDTensor> ps, gs;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(GetArray(n, params, 3, ps));
  PetscCall(GetArray(n, grads, 4, gs));
  PetscCall(DDOptimizerSetUp(opt, (PetscInt)n, ps.data(), gs.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_up_from_net - `DDOptimizerSetUp()` on the parameters and gradients of `DDNetGetParameters()`

  Notes:
  A convenience of the ABI (the two C calls in one), for bindings where arrays of handles are awkward.

  Level: developer
@*/
int ddnn_optimizer_set_up_from_net(ddnn_handle oh, ddnn_handle nh)
{
  DDOptimizer opt;
  DDNet       net;
  PetscInt    np;
  DDTensor   *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(Get(nh, 2, &net));
  PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
  PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_set_up_from_layer - `DDOptimizerSetUp()` on the parameters of `DDLayerGetParameters()` and `DDLayerGetGradients()`

  Notes:
  A convenience of the ABI (the C calls in one), for a single learnable layer.

  Level: developer
@*/
int ddnn_optimizer_set_up_from_layer(ddnn_handle oh, ddnn_handle lh)
{
  DDOptimizer opt;
  DDLayer     l;
  PetscInt    np, ng;
  DDTensor   *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(Get(lh, 2, &l));
  PetscCall(DDLayerGetParameters(l, &np, &ps));
  PetscCall(DDLayerGetGradients(l, &ng, &gs));
  PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_step - ABI of `DDOptimizerStep()`

  Level: developer
@*/
int ddnn_optimizer_step(ddnn_handle oh)
{
  return Call<DDOptimizer>(oh, DDOptimizerStep);
}

/*@C
  ddnn_optimizer_end_epoch - ABI of `DDOptimizerEndEpoch()`

  Level: developer
@*/
int ddnn_optimizer_end_epoch(ddnn_handle oh)
{
  return Call<DDOptimizer>(oh, DDOptimizerEndEpoch);
}

/*@C
  ddnn_optimizer_get_step_count - ABI of `DDOptimizerGetStepCount()`; either output may be a null pointer

  Level: developer
@*/
int ddnn_optimizer_get_step_count(ddnn_handle oh, ddnn_int *step, ddnn_int *epoch)
{
  DDOptimizer opt;
  PetscInt    s, e;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(DDOptimizerGetStepCount(opt, &s, &e));
  if (step) *step = s;
  if (epoch) *epoch = e;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_optimizer_view - ABI of `DDOptimizerView()`

  Level: developer
@*/
int ddnn_optimizer_view(ddnn_handle oh, ddnn_petsc_handle vh)
{
  return View<DDOptimizer>(oh, vh, DDOptimizerView);
}

/*@C
  ddnn_optimizer_destroy - ABI of `DDOptimizerDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_optimizer_destroy(ddnn_handle *oh)
{
  return Destroy<DDOptimizer>(oh, DDOptimizerDestroy);
}

/* ------------------------------------------------------------------------------------------ */
/* dataset and checkpoints */

/*@C
  ddnn_dataset_create - ABI of `DDDatasetCreate()`

  Level: developer
@*/
int ddnn_dataset_create(ddnn_fint fcomm, ddnn_handle *dh)
{
  return Create<DDDataset>(fcomm, dh, DDDatasetCreate);
}

/*@C
  ddnn_dataset_set_file - ABI of `DDDatasetSetFile()`

  Level: developer
@*/
int ddnn_dataset_set_file(ddnn_handle dh, const char *file, ddnn_int len)
{
  return CallStr<DDDataset>(dh, file, len, DDDatasetSetFile);
}

/*@C
  ddnn_dataset_set_fields - ABI of `DDDatasetSetFields()`: n NUL-terminated dataset names

  Level: developer
@*/
int ddnn_dataset_set_fields(ddnn_handle dh, ddnn_int n, const char *const fields[])
{
  DDDataset                 ds;
  std::vector<std::string>  keep;
  std::vector<const char *> ptrs;

  PetscFunctionBegin;
  PetscCall(Get(dh, 1, &ds));
  PetscCall(StrArray(n, fields, 3, keep, ptrs));
  PetscCall(DDDatasetSetFields(ds, (PetscInt)n, ptrs.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_dataset_set_range - ABI of `DDDatasetSetRange()`

  Level: developer
@*/
int ddnn_dataset_set_range(ddnn_handle dh, ddnn_int start, ddnn_int count)
{
  DDDataset ds;
  PetscInt  s, c;

  PetscFunctionBegin;
  PetscCall(Get(dh, 1, &ds));
  PetscCall(Int(start, 2, &s));
  PetscCall(Int(count, 3, &c));
  PetscCall(DDDatasetSetRange(ds, s, c));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_dataset_set_options_prefix - ABI of `DDDatasetSetOptionsPrefix()`

  Level: developer
@*/
int ddnn_dataset_set_options_prefix(ddnn_handle dh, const char *prefix, ddnn_int len)
{
  DDDataset ds;
  Str       s;

  PetscFunctionBegin;
  PetscCall(Get(dh, 1, &ds));
  PetscCall(s.Set(prefix, len, 2, true));
  PetscCall(DDDatasetSetOptionsPrefix(ds, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_dataset_set_from_options - ABI of `DDDatasetSetFromOptions()`

  Level: developer
@*/
int ddnn_dataset_set_from_options(ddnn_handle dh)
{
  return Call<DDDataset>(dh, DDDatasetSetFromOptions);
}

/*@C
  ddnn_dataset_set_up - ABI of `DDDatasetSetUp()`

  Level: developer
@*/
int ddnn_dataset_set_up(ddnn_handle dh)
{
  return Call<DDDataset>(dh, DDDatasetSetUp);
}

/*@C
  ddnn_dataset_get_num_samples - ABI of `DDDatasetGetNumSamples()`

  Level: developer
@*/
int ddnn_dataset_get_num_samples(ddnn_handle dh, ddnn_int *n)
{
  DDDataset ds;
  PetscInt  m;

  PetscFunctionBegin;
  PetscCall(Get(dh, 1, &ds));
  PetscCall(Out(n, 2));
  PetscCall(DDDatasetGetNumSamples(ds, &m));
  *n = m;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_dataset_shuffle - ABI of `DDDatasetShuffle()`

  Level: developer
@*/
int ddnn_dataset_shuffle(ddnn_handle dh, int64_t seed)
{
  DDDataset ds;

  PetscFunctionBegin;
  PetscCall(Get(dh, 1, &ds));
  PetscCall(DDDatasetShuffle(ds, (PetscInt64)seed));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_dataset_read_batch - ABI of `DDDatasetReadBatch()`

  Level: developer
@*/
int ddnn_dataset_read_batch(ddnn_handle dh, ddnn_int field, ddnn_int start, ddnn_int count, ddnn_handle th)
{
  DDDataset ds;
  DDTensor  t;
  PetscInt  f, s, c;

  PetscFunctionBegin;
  PetscCall(Get(dh, 1, &ds));
  PetscCall(Int(field, 2, &f));
  PetscCall(Int(start, 3, &s));
  PetscCall(Int(count, 4, &c));
  PetscCall(Get(th, 5, &t));
  PetscCall(DDDatasetReadBatch(ds, f, s, c, t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_dataset_destroy - ABI of `DDDatasetDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_dataset_destroy(ddnn_handle *dh)
{
  return Destroy<DDDataset>(dh, DDDatasetDestroy);
}

/*@C
  ddnn_checkpoint_save - ABI of `DDCheckpointSave()`; opt may be 0

  Level: developer
@*/
int ddnn_checkpoint_save(ddnn_handle nh, ddnn_handle oh, const char *file, ddnn_int len)
{
  DDNet       net;
  DDOptimizer opt;
  Str         s;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Get(oh, 2, &opt, true));
  PetscCall(s.Set(file, len, 3));
  PetscCall(DDCheckpointSave(net, opt, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_checkpoint_load - ABI of `DDCheckpointLoad()`; opt may be 0

  Level: developer
@*/
int ddnn_checkpoint_load(ddnn_handle nh, ddnn_handle oh, const char *file, ddnn_int len)
{
  DDNet       net;
  DDOptimizer opt;
  Str         s;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(Get(oh, 2, &opt, true));
  PetscCall(s.Set(file, len, 3));
  PetscCall(DDCheckpointLoad(net, opt, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}
