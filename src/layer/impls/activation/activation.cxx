/*
  DDLAYERACTIVATION: pointwise activation functions, hyper-local (paper 000 sec. 4): no data
  movement. The output has the input's partition, ownership and storage format; Backward uses
  the input saved by Forward: dx = f'(x) dy. The loops are the pointwise
  entries (actfwd, actbwd) of the layer's backend chain.

  prelu has a learnable weight (one, or one per channel). Like the per-channel parameters of the
  normalization layers (paper 000 sec. 4.2.2) it lives on the input's channel split (on the
  workers with coordinate 0 in the other dimensions; a single weight on the first worker);
  Forward broadcasts it to every worker (DDPRIMITIVEBROADCAST), and Backward sums the workers'
  partial gradients onto it with the broadcast's adjoint (paper 000 sec. 2.2.4).
*/
#include <sys/ddcxx.hpp>
#include <layer/impls/common/layerutil.hpp>
#include <layer/impls/batchnorm/normcommon.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <backend/cpu/fastkernels.hpp>

using namespace ddnn;

namespace
{
struct Activation {
  DDActivationType  type  = DD_ACT_RELU;
  PetscReal         slope = 0.01, alpha = 1.0, beta = 1.0, threshold = 20.0;
  DDGeluApproximate approx = DD_GELU_APPROXIMATE_NONE;
  PetscInt          nparam = 1;    /* prelu: 1, or the number of channels */
  PetscReal         init   = 0.25; /* prelu's initial weight */
  /* prelu set-up */
  ChannelParams cp;
  DDTensor      w = NULL, wh = NULL, dwh = NULL, tmp = NULL; /* w: owned by the layer's parameter list */
  PetscInt      Cl = 0;                                       /* local channels of the input */
  /*
    conv/affine + activation fusion (marked by DDNetSetUp, -net_fuse): the producing convolution or
    dense layer writes act(v) into its output (fusedtype: the act it writes), and this layer's
    output views that storage (viewof: the input, referenced, at set-up; viewarr: the shared array,
    NULL where the output could not view it), so that Forward has nothing to do
  */
  PetscBool        fused     = PETSC_FALSE;
  DDActivationType fusedtype = DD_ACT_RELU;
  DDTensor         viewof    = NULL;
  void            *viewarr   = NULL;

  template <class T>
  ActParams<T> Params() const
  {
    ActParams<T> p;
    p.slope     = (T)slope;
    p.alpha     = (T)alpha;
    p.beta      = (T)beta;
    p.threshold = (T)threshold;
    p.gelutanh  = approx == DD_GELU_APPROXIMATE_TANH;
    return p;
  }
};

/*
  Calls f(c, o, len) for runs of the bulk of the layouts L[0..nl) (same bulk sizes) on which the
  local channel c (dimension 1; 0 for order-1 tensors) is constant: o[i] is the run's offset in
  L[i]. Runs are contiguous in every layout (length 1 when the channel is the fastest dimension).
*/
template <class F>
void ForEachChannelRun(const DDLayout *const L[], int nl, F &&f)
{
  const PetscInt d = L[0]->order;
  const PetscInt k = L[0]->perm[d - 1];
  bool           run = d > 1 && k != 1;
  for (int i = 0; i < nl; i++) run = run && L[i]->bdim < 0 && L[i]->perm[d - 1] == k;
  PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM];
  for (PetscInt j = 0; j < d; j++) {
    a[j] = 0;
    b[j] = L[0]->n[j];
    if (b[j] <= 0) return;
  }
  const PetscInt len = run ? b[k] : 1;
  if (run) b[k] = 1;
  ForEachIndex(d, a, b, L[0]->perm, [&](const PetscInt *j) {
    PetscInt o[4], jj[DD_MAX_DIM];
    for (int i = 0; i < nl; i++) {
      for (PetscInt q = 0; q < d; q++) jj[q] = j[q] + L[i]->lo[q];
      o[i] = LayoutOffset(*L[i], jj);
    }
    f(d > 1 ? j[1] : 0, (const PetscInt *)o, len);
  });
}
} // namespace

const char *const DDGeluApproximates[] = {"none", "tanh", "DDGeluApproximate", "DD_GELU_APPROXIMATE_", nullptr};

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
         PyTorch's default, or its tanh approximation), `DD_ACT_IDENTITY`, `DD_ACT_SILU`, `DD_ACT_ELU`,
         `DD_ACT_SOFTPLUS` or `DD_ACT_PRELU` (learnable)

  Options Database Key:
. -layer_activation_type <relu,leakyrelu,tanh,sigmoid,gelu,identity,silu,elu,softplus,prelu> - the function

  Level: beginner

.seealso: `DDLAYERACTIVATION`, `DDLayerActivationSetNegativeSlope()`, `DDLayerActivationSetGeluApproximate()`,
          `DDLayerActivationSetAlpha()`, `DDLayerActivationSetSoftplus()`, `DDLayerActivationSetPReLU()`
@*/
PetscErrorCode DDLayerActivationSetType(DDLayer l, DDActivationType type)
DD_CXX_TRY
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetType"));
  PetscCheck(type >= DD_ACT_RELU && type <= DD_ACT_PRELU, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown activation type %d", (int)type);
  s->type = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerActivationGetType - The activation function

  Not collective

  Input Parameter:
. l - a `DDLAYERACTIVATION` layer

  Output Parameter:
. type - the function

  Level: beginner

.seealso: `DDLAYERACTIVATION`, `DDLayerActivationSetType()`
@*/
PetscErrorCode DDLayerActivationGetType(DDLayer l, DDActivationType *type)
DD_CXX_TRY
{
  Activation *s;

  PetscFunctionBegin;
  PetscValidPointer(type, 2);
  PetscCall(ActivationGet(l, &s, "DDLayerActivationGetType"));
  *type = s->type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerActivationSetNegativeSlope - The slope of leakyrelu for negative inputs (default 0.01)

  Logically collective

  Input Parameters:
+ l     - a `DDLAYERACTIVATION` layer
- slope - the slope (torch.nn.LeakyReLU's negative_slope): any finite value, negative ones included
          as in PyTorch; NaN and +-inf are errors (`PETSC_ERR_ARG_OUTOFRANGE`)

  Options Database Key:
. -layer_activation_negative_slope <s> - the slope

  Level: beginner

.seealso: `DDLayerActivationSetType()`
@*/
PetscErrorCode DDLayerActivationSetNegativeSlope(DDLayer l, PetscReal slope)
DD_CXX_TRY
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetNegativeSlope"));
  PetscCheck(!PetscIsInfOrNanReal(slope), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetNegativeSlope(): leakyrelu slope %g must be finite (-layer_activation_negative_slope)", (double)slope);
  s->slope = slope;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerActivationSetGeluApproximate - gelu's form: exact (erf, default) or the tanh approximation

  Logically collective

  Input Parameters:
+ l      - a `DDLAYERACTIVATION` layer
- approx - `DD_GELU_APPROXIMATE_NONE` or `DD_GELU_APPROXIMATE_TANH` (torch.nn.GELU(approximate='tanh'):
           x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))

  Options Database Key:
. -layer_activation_gelu_approximate <none,tanh> - the form

  Level: intermediate

.seealso: `DDLayerActivationSetType()`
@*/
PetscErrorCode DDLayerActivationSetGeluApproximate(DDLayer l, DDGeluApproximate approx)
DD_CXX_TRY
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetGeluApproximate"));
  PetscCheck(approx == DD_GELU_APPROXIMATE_NONE || approx == DD_GELU_APPROXIMATE_TANH, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown gelu approximation %d (-layer_activation_gelu_approximate)", (int)approx);
  s->approx = approx;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerActivationSetAlpha - elu's alpha (default 1): elu(x) = alpha (exp(x) - 1) for x <= 0, x otherwise

  Logically collective

  Input Parameters:
+ l     - a `DDLAYERACTIVATION` layer
- alpha - any finite value (torch.nn.ELU's alpha)

  Options Database Key:
. -layer_activation_alpha <a> - the value

  Level: intermediate

.seealso: `DDLayerActivationSetType()`
@*/
PetscErrorCode DDLayerActivationSetAlpha(DDLayer l, PetscReal alpha)
DD_CXX_TRY
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetAlpha"));
  PetscCheck(!PetscIsInfOrNanReal(alpha), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetAlpha(): elu alpha %g must be finite (-layer_activation_alpha)", (double)alpha);
  s->alpha = alpha;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerActivationSetSoftplus - softplus's beta (default 1) and threshold (default 20)

  Logically collective

  Input Parameters:
+ l         - a `DDLAYERACTIVATION` layer
. beta      - positive: softplus(x) = log(1 + exp(beta x)) / beta
- threshold - where beta x > threshold, softplus(x) = x (torch.nn.Softplus's threshold)

  Options Database Keys:
+ -layer_activation_beta <b> - beta
- -layer_activation_threshold <t> - the threshold

  Notes:
  Below the threshold the value is computed as (max(beta x, 0) + log1p(exp(-|beta x|))) / beta, which
  does not overflow: with a threshold above 88.7 (float32) or 709.8 (float64), where PyTorch's
  log1p(exp(beta x)) gives inf for larger beta x, this gives the finite value (x, to rounding).
  Elsewhere the values are PyTorch's to a few ulp (the threshold's comparison is made in the
  tensor's precision, as PyTorch makes it).

  Level: intermediate

.seealso: `DDLayerActivationSetType()`
@*/
PetscErrorCode DDLayerActivationSetSoftplus(DDLayer l, PetscReal beta, PetscReal threshold)
DD_CXX_TRY
{
  Activation *s;
  MPI_Comm    comm;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetSoftplus"));
  comm = PetscObjectComm((PetscObject)l);
  PetscCheck(beta > 0 && !PetscIsInfOrNanReal(beta), comm, PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetSoftplus(): softplus beta %g must be positive and finite (-layer_activation_beta)", (double)beta);
  PetscCheck(!PetscIsNanReal(threshold), comm, PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetSoftplus(): softplus threshold must not be NaN (-layer_activation_threshold)");
  s->beta      = beta;
  s->threshold = threshold;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerActivationSetPReLU - prelu's number of weights and their initial value (torch.nn.PReLU's num_parameters and init)

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERACTIVATION` layer
. n    - 1 (one weight shared by all channels, the default) or the number of channels C of the input
         (dimension 1; `PETSC_DETERMINE`: C)
- init - the initial weight (default 0.25)

  Options Database Keys:
+ -layer_activation_prelu_num_parameters <n> - n (0: C)
- -layer_activation_prelu_init <v> - the initial weight

  Notes:
  Call before `DDLayerSetUp()`. The weight is the parameter "weight", shape (n). `DDLayerInitializeParameters()`
  sets it to init (-layer_init uniform: U(-s, s); zeros: 0).

  Level: intermediate

.seealso: `DDLayerActivationSetType()`, `DDLAYERACTIVATION`
@*/
PetscErrorCode DDLayerActivationSetPReLU(DDLayer l, PetscInt n, PetscReal init)
DD_CXX_TRY
{
  Activation *s;

  PetscFunctionBegin;
  PetscCall(ActivationGet(l, &s, "DDLayerActivationSetPReLU"));
  PetscCheck(n >= 1 || n == PETSC_DETERMINE || n == 0, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "prelu num_parameters %" PetscInt_FMT " must be 1 or the number of channels (-layer_activation_prelu_num_parameters)", n);
  PetscCheck(!PetscIsInfOrNanReal(init), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetPReLU(): prelu init %g must be finite (-layer_activation_prelu_init)", (double)init);
  s->nparam = n >= 1 ? n : PETSC_DETERMINE;
  s->init   = init;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Activation_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Activation *s = (Activation *)l->data;
  PetscEnum   e = (PetscEnum)s->type;
  PetscReal   v, v2;
  PetscInt    n;
  PetscBool   set, set2;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer activation options");
  PetscCall(PetscOptionsEnum("-layer_activation_type", "Activation function", "DDLayerActivationSetType", DDActivationTypes, e, &e, &set));
  if (set) PetscCall(DDLayerActivationSetType(l, (DDActivationType)e));
  PetscCall(PetscOptionsReal("-layer_activation_negative_slope", "Slope of leakyrelu for negative inputs", "DDLayerActivationSetNegativeSlope", s->slope, &v, &set));
  if (set) PetscCall(DDLayerActivationSetNegativeSlope(l, v));
  e = (PetscEnum)s->approx;
  PetscCall(PetscOptionsEnum("-layer_activation_gelu_approximate", "gelu's form", "DDLayerActivationSetGeluApproximate", DDGeluApproximates, e, &e, &set));
  if (set) PetscCall(DDLayerActivationSetGeluApproximate(l, (DDGeluApproximate)e));
  PetscCall(PetscOptionsReal("-layer_activation_alpha", "elu's alpha", "DDLayerActivationSetAlpha", s->alpha, &v, &set));
  if (set) PetscCall(DDLayerActivationSetAlpha(l, v));
  PetscCall(PetscOptionsReal("-layer_activation_beta", "softplus's beta", "DDLayerActivationSetSoftplus", s->beta, &v, &set));
  PetscCall(PetscOptionsReal("-layer_activation_threshold", "softplus's threshold", "DDLayerActivationSetSoftplus", s->threshold, &v2, &set2));
  if (set || set2) PetscCall(DDLayerActivationSetSoftplus(l, set ? v : s->beta, set2 ? v2 : s->threshold));
  PetscCall(PetscOptionsInt("-layer_activation_prelu_num_parameters", "prelu's number of weights (1 or C; 0: C)", "DDLayerActivationSetPReLU", s->nparam == PETSC_DETERMINE ? 0 : s->nparam, &n, &set));
  PetscCall(PetscOptionsReal("-layer_activation_prelu_init", "prelu's initial weight", "DDLayerActivationSetPReLU", s->init, &v, &set2));
  if (set || set2) PetscCall(DDLayerActivationSetPReLU(l, set ? n : s->nparam, set2 ? v : s->init));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Reset(DDLayer l)
{
  Activation *s = (Activation *)l->data;

  PetscFunctionBegin;
  PetscCall(s->cp.Reset());
  s->w = NULL; /* owned by the layer's parameter list */
  for (DDTensor *t : {&s->wh, &s->dwh, &s->tmp}) PetscCall(DDTensorDestroy(t));
  s->Cl = 0;
  PetscCall(DDTensorDestroy(&s->viewof)); /* fused stays: the network marks the layer before setting it up */
  s->viewarr = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Activation_Reset(l));
  delete (Activation *)l->data;
  l->data = NULL;
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerActivationSetFused_C", NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* prelu: the weight on Pc (the channel split, or the first worker for one weight), its workers' copies */
static PetscErrorCode Activation_SetUpPReLU(DDLayer l, DDTensor x)
{
  Activation *s    = (Activation *)l->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  DDPartition P    = x->part;
  char        sh[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(x->order, x->shape, sh, sizeof(sh)));
  for (PetscInt k = 0; k < x->order; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "prelu: the input cannot be replicated (dimension %" PetscInt_FMT "); the weight's gradient would count the copies", k);
  const bool perchannel = s->nparam == PETSC_DETERMINE || s->nparam > 1;
  if (perchannel) {
    PetscCheck(x->order >= 2, comm, PETSC_ERR_ARG_INCOMP, "prelu with num_parameters %" PetscInt_FMT " needs a channel dimension (dimension 1); the input has shape %s (-layer_activation_prelu_num_parameters)", s->nparam, sh);
    PetscCheck(s->nparam == PETSC_DETERMINE || s->nparam == x->shape[1], comm, PETSC_ERR_ARG_INCOMP, "prelu num_parameters %" PetscInt_FMT " must be 1 or the number of channels %" PetscInt_FMT " of the input (shape %s) (-layer_activation_prelu_num_parameters)", s->nparam, x->shape[1], sh);
    PetscCheck(x->format != DD_FORMAT_BLOCKED || x->blockdim == 1, comm, PETSC_ERR_SUP, "prelu: a blocked input must block the channel dimension (it blocks dimension %" PetscInt_FMT ")", x->blockdim);
    PetscCall(s->cp.SetUp(comm, x));
    PetscCall(s->cp.CreateParam(x, &s->w));
    PetscCall(s->cp.CreateParam(x, &s->tmp));
  } else { /* one weight on the first worker, broadcast to all */
    const PetscInt one = 1, shape[2] = {P->size, 1};
    PetscMPIInt    r0  = P->ranks[0];
    PetscCall(DDPartitionCreateCartesian(comm, 1, &one, 1, &r0, &s->cp.Pc));
    s->cp.bcast = P->size > 1;
    if (s->cp.bcast) PetscCall(DDPartitionCreateCartesian(comm, 2, shape, P->size, P->ranks, &s->cp.Pw));
    PetscCall(DDTensorCreateFromPartition(s->cp.Pc, x->dtype, 1, &one, &s->w));
    PetscCall(DDTensorCreateFromPartition(s->cp.Pc, x->dtype, 1, &one, &s->tmp));
  }
  PetscCall(DDLayerAddParameter_Private(l, "weight", s->w));
  PetscCall(DDTensorSet(s->w, s->init));
  PetscCall(s->cp.CreateWorkerCopy(s->w, &s->wh));
  PetscCall(DDTensorDuplicate(s->wh, &s->dwh));
  s->Cl = x->active && x->order > 1 ? x->layout.n[1] : 1;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Conv/affine + activation fusion, private to the network (src/net/net.cxx, -net_fuse): from the next
  set-up on, the input already holds y = act(v) of the convolution or dense layer (its producer
  writes it) and the output views the input's storage when both are laid out alike. relu, tanh and
  sigmoid fuse, because their derivatives are functions of y (ActivationBackwardFromOutput):
  relu's mask is the same on relu(v) as on v (x <= 0 exactly where relu(x) <= 0, NaN passing dy in
  both), tanh' = 1 - y^2, sigmoid' = y (1 - y); Backward reads them from the saved input, which is
  y. relu(relu(v)) = relu(v), so a fused relu's Forward into another tensor computes relu of the
  input; a fused tanh or sigmoid copies its input there.
*/
static PetscErrorCode DDLayerActivationSetFused_Activation(DDLayer l, PetscBool flg)
{
  Activation *s = (Activation *)l->data;

  PetscFunctionBegin;
  PetscCheck(!flg || s->type == DD_ACT_RELU || s->type == DD_ACT_TANH || s->type == DD_ACT_SIGMOID, PetscObjectComm((PetscObject)l), PETSC_ERR_SUP, "Only relu, tanh and sigmoid fuse with a convolution or a dense layer (this activation is %s)", DDActivationTypes[s->type]);
  s->fused     = flg;
  s->fusedtype = s->type;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Activation *s = (Activation *)l->data;
  DDTensor    y, x = xs[0];

  PetscFunctionBegin;
  /* device tensors (the /gpu/cuda pointwise kernels): relu, leaky relu, tanh, sigmoid, exact gelu, identity */
  PetscCheck(x->memtype == DD_MEMTYPE_HOST || (s->type <= DD_ACT_IDENTITY && s->approx != DD_GELU_APPROXIMATE_TANH), PetscObjectComm((PetscObject)l), PETSC_ERR_SUP, "An activation layer on device tensors computes relu, leakyrelu, tanh, sigmoid, gelu (exact) and identity; %s%s has no device kernel yet", DDActivationTypes[s->type], s->type == DD_ACT_GELU ? " (tanh approximation)" : "");
  PetscCall(CreateLike(x, &y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  if (s->type == DD_ACT_PRELU) PetscCall(Activation_SetUpPReLU(l, x));
  if (s->fused && s->type == s->fusedtype && x->memtype == DD_MEMTYPE_HOST) { /* else a mark of the previous set-up, which the network's first pass meets: it marks the layer again before the second */
    PetscCall(PetscObjectReference((PetscObject)x)); /* the producer writes act(v) into x */
    s->viewof = x;
  }
  if (s->viewof && y->memtype == DD_MEMTYPE_HOST && !y->placedvec && x->layouthash == y->layouthash && LayoutSameStorage(x->layout, y->layout)) {
    const struct _DDBackendMemOps *mem;
    PetscCall(DDMemOps_Private(y->memtype, &mem));
    if (y->ownsarray) PetscCall(mem->free(y->array));
    y->array     = x->array; /* the output views the input's storage */
    y->ownsarray = PETSC_FALSE;
    s->viewarr   = x->array;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_InitParams(DDLayer l, PetscInt64 seed)
{
  Activation *s = (Activation *)l->data;

  PetscFunctionBegin;
  if (!s->w) PetscFunctionReturn(PETSC_SUCCESS);
  if (l->inittype == DD_INIT_UNIFORM) PetscCall(DDTensorInitialize_Private(s->w, DD_INIT_UNIFORM, l->initscale, 2 * seed + 1, 1, 1, 1.0));
  else PetscCall(DDTensorSet(s->w, l->inittype == DD_INIT_ZEROS ? 0.0 : s->init));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the weight per local channel (prelu; a single weight repeated) */
template <class T>
static void PReLUWeights(Activation *s, std::vector<T> &wv)
{
  const bool perchannel = s->nparam != 1;
  wv.assign(s->Cl, (T)0);
  if (!s->wh->active) return;
  const T *a = HostArray<const T>(s->wh);
  for (PetscInt c = 0; c < s->Cl; c++) wv[c] = perchannel ? a[c] : a[0];
}

/*
  The bulk form of the pointwise entries (one call over the whole piece, each tensor in its own
  layout: a device backend's, one launch however a halo'd tensor breaks into rows) where the first
  backend of the layer's chain with pointwise kernels has it; NULL: the runs form
*/
template <class T>
static PetscErrorCode PointwiseBulk(DDLayer l, decltype(KernelTable<T>::actfwdbulk) *f, decltype(KernelTable<T>::actbwdbulk) *b, DDBackend *which)
{
  DDBackend bk;

  PetscFunctionBegin;
  *f = nullptr, *b = nullptr, *which = nullptr;
  PetscCall(DDLayerGetBackend_Private(l, &bk));
  for (DDBackend w = bk; w; w = DDBackendNext_Private(w)) {
    if (Table<T>(w).actfwdbulk && Table<T>(w).actbwdbulk) {
      *f = Table<T>(w).actfwdbulk, *b = Table<T>(w).actbwdbulk, *which = w;
      break;
    }
    if (Table<T>(w).actfwd) break;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Activation *s = (Activation *)l->data;
  DDTensor    x = xs[0];

  PetscFunctionBegin;
  PetscCheck(s->type != DD_ACT_PRELU || s->w, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "The activation became prelu after DDLayerSetUp(): set it up again so that it has its weight");
  PetscCheck(!s->fused || (s->viewof && s->type == s->fusedtype), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "The %s fused with its convolution or dense layer (-net_fuse) is now %s: set the network up again", DDActivationTypes[s->fusedtype], DDActivationTypes[s->type]);
  if (s->viewarr && y->array == s->viewarr) { /* fused: the output is the input (act written by the convolution or dense layer) */
    PetscCheck(s->type == s->fusedtype && x == s->viewof && x->array == s->viewarr, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "The activation fused with its convolution or dense layer (-net_fuse) was given another input, or a new type, or its input was laid out anew since set-up: set the network up again");
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (s->viewof && s->fusedtype != DD_ACT_RELU) { /* fused tanh or sigmoid into another tensor: the input holds act(v) already */
    PetscCheck(s->type == s->fusedtype && x == s->viewof, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "The %s fused with its convolution or dense layer (-net_fuse) was given another input, or a new type, since set-up: set the network up again", DDActivationTypes[s->fusedtype]);
    PetscCall(DDTensorCopy(x, y));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (s->type == DD_ACT_PRELU) PetscCall(s->cp.ToWorkers(s->w, s->wh)); /* collective: before any early return */
  if (!x->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T            = decltype(z);
    const T     *xa    = HostArray<const T>(x);
    T           *ya    = HostArray<T>(y);
    ActParams<T> p     = s->Params<T>();
    DDBackend which;
    decltype(KernelTable<T>::actfwd) fn;
    PetscCall(LayerKernel<T>(l, &KernelTable<T>::actfwd, DD_KERNEL_POINTWISE, &fn, &which));
    KernelEvent e(which, DD_KERNEL_POINTWISE);
    if (s->type == DD_ACT_PRELU) {
      std::vector<T> wv;
      PReLUWeights<T>(s, wv);
      const DDLayout *L[2] = {&x->layout, &y->layout};
      ForEachChannelRun(L, 2, [&](PetscInt c, const PetscInt *o, PetscInt len) {
        p.slope = wv[c];
        fn(DD_ACT_PRELU, p, xa + o[0], ya + o[1], len);
      });
    } else {
      decltype(KernelTable<T>::actfwdbulk) fb;
      decltype(KernelTable<T>::actbwdbulk) bb;
      DDBackend                            wb;
      PetscCall(PointwiseBulk<T>(l, &fb, &bb, &wb));
      if (fb) fb(s->type, p, x->layout, xa, y->layout, ya);
      else ForEachBulkRunPair(x->layout, y->layout, [&](PetscInt ox, PetscInt oy, PetscInt len) { fn(s->type, p, xa + ox, ya + oy, len); });
    }
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* prelu's backward: dx = (x > 0 ? 1 : w_c) dy, dw_c += sum over x <= 0 (and NaN) of x dy on the workers, then B^* onto the weight */
static PetscErrorCode Activation_BackwardPReLU(DDLayer l, DDTensor dy, DDTensor dx)
{
  Activation *s = (Activation *)l->data;
  DDTensor    x = l->saved[0];

  PetscFunctionBegin;
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    std::vector<double> acc(s->Cl, 0.0);
    if (x->active) {
      const T     *xa = HostArray<const T>(x), *ga = HostArray<const T>(dy);
      T           *da = dx ? HostArray<T>(dx) : nullptr;
      ActParams<T> p  = s->Params<T>();
      std::vector<T> wv;
      PReLUWeights<T>(s, wv);
      DDBackend which;
      decltype(KernelTable<T>::actbwd) fn;
      PetscCall(LayerKernel<T>(l, &KernelTable<T>::actbwd, DD_KERNEL_POINTWISE, &fn, &which));
      KernelEvent     e(which, DD_KERNEL_POINTWISE);
      const DDLayout *L[3] = {&x->layout, &dy->layout, dx ? &dx->layout : &x->layout};
      ForEachChannelRun(L, dx ? 3 : 2, [&](PetscInt c, const PetscInt *o, PetscInt len) {
        const T *xv = xa + o[0], *gv = ga + o[1];
        double   a  = 0;
        for (PetscInt i = 0; i < len; i++)
          if (!(xv[i] > (T)0)) a += (double)xv[i] * (double)gv[i];
        acc[c] += a;
        if (da) {
          p.slope = wv[c];
          fn(DD_ACT_PRELU, p, xv, gv, da + o[2], len);
        }
      });
    }
    if (s->dwh->active) {
      T *dw = HostArray<T>(s->dwh);
      if (s->nparam != 1) /* the workers' copy holds this worker's channels, as ParamValues reads it */
        for (PetscInt c = 0; c < s->Cl; c++) dw[c] = (T)acc[c];
      else {
        double t = 0;
        for (auto v : acc) t += v;
        dw[0] = (T)t;
      }
    }
    PetscCall(s->cp.FromWorkers(s->dwh, s->tmp, l->grads[0]));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Activation *s  = (Activation *)l->data;
  DDTensor    x  = l->saved[0], dx = dxs ? dxs[0] : NULL;

  PetscFunctionBegin;
  if (s->type == DD_ACT_PRELU) {
    PetscCall(Activation_BackwardPReLU(l, dy, dx));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  /* fused tanh or sigmoid: the saved input is y = act(v), written by the producer, and f'(v) is a function of y */
  const bool fromy = s->viewof && s->fusedtype != DD_ACT_RELU;
  PetscCheck(!fromy || (s->type == s->fusedtype && x == s->viewof), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "The %s fused with its convolution or dense layer (-net_fuse) was given another input, or a new type, since set-up: set the network up again", DDActivationTypes[s->fusedtype]);
  /*
    an unfused tanh or sigmoid whose output is as its forward left it (its content state unchanged: a
    write through the tensor or a PETSc Vec on its storage, or new storage, changes it) and stored as its
    input is: f'(v) from y, 1 - y^2 and y (1 - y), as torch's backward reads it, without computing f(v)
    again; the same bits as from x, since y holds exactly the forward's f(x) and the expressions are the
    same (ActivationBackwardFromOutput()). Host loops only (the bulk kernels of a device backend take x)
  */
  DDTensor       yout = NULL;
  const DDTensor yo   = l->savedout;
  if (!fromy && (s->type == DD_ACT_TANH || s->type == DD_ACT_SIGMOID) && yo && yo->memtype == DD_MEMTYPE_HOST && yo->dtype == x->dtype && LayoutSameStorage(yo->layout, x->layout)) {
    PetscObjectState st;
    PetscCall(DDTensorContentState_Private(yo, &st));
    if (st == l->savedoutstate) yout = yo;
  }
  /*
    dy walks with x when they share the storage layout, or with dx; when x and dx share theirs and
    dy differs (e.g. only in its halo: the output's halo grown by a consumer convolution), the
    pair walk of dy and dx reads dy in place; otherwise dy is copied into dx first
  */
  if (!fromy) { /* the bulk form takes every tensor in its own layout: no copy */
    bool done = false;
    PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      decltype(KernelTable<T>::actfwdbulk) fb;
      decltype(KernelTable<T>::actbwdbulk) bb;
      DDBackend                            wb;
      PetscFunctionBegin;
      PetscCall(PointwiseBulk<T>(l, &fb, &bb, &wb));
      if (bb && x->active) {
        KernelEvent e(wb, DD_KERNEL_POINTWISE);
        bb(s->type, s->Params<T>(), x->layout, HostArray<const T>(x), dy->layout, HostArray<const T>(dy), dx->layout, HostArray<T>(dx));
      }
      done = bb != nullptr;
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    if (done) PetscFunctionReturn(PETSC_SUCCESS);
  }
  const bool withx = LayoutSameStorage(x->layout, dy->layout), withdx = !withx && LayoutSameStorage(dx->layout, dy->layout);
  const bool xdx = !withx && !withdx && LayoutSameStorage(x->layout, dx->layout);
  if (!withx && !withdx && !xdx) PetscCall(DDTensorCopy(dy, dx));
  if (!x->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T          = decltype(z);
    const T     *xa  = HostArray<const T>(yout ? yout : x), *ga = HostArray<const T>(dy); /* walked with x's layout: yout's storage is the same */
    T           *da  = HostArray<T>(dx);
    ActParams<T> p   = s->Params<T>();
    DDBackend which;
    decltype(KernelTable<T>::actbwd) fn;
    PetscCall(LayerKernel<T>(l, &KernelTable<T>::actbwd, DD_KERNEL_POINTWISE, &fn, &which));
    KernelEvent e(which, DD_KERNEL_POINTWISE);
    auto        run = [&](const T *xv, const T *gv, T *dv, PetscInt len) {
      if (fromy || yout) (void)ActivationBackwardFromOutput<T>(s->type, xv, gv, dv, len);
      else fn(s->type, p, xv, gv, dv, len);
    };
    if (xdx) ForEachBulkRunPair(dy->layout, dx->layout, [&](PetscInt og, PetscInt od, PetscInt len) { run(xa + od, ga + og, da + od, len); });
    else ForEachBulkRunPair(x->layout, dx->layout, [&](PetscInt ox, PetscInt od, PetscInt len) { run(xa + ox, withx ? ga + ox : (withdx ? ga + od : da + od), da + od, len); });
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Activation_View(DDLayer l, PetscViewer viewer)
{
  Activation *s = (Activation *)l->data;

  PetscFunctionBegin;
  switch (s->type) {
  case DD_ACT_LEAKYRELU:
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s, negative slope %g\n", DDActivationTypes[s->type], (double)s->slope));
    break;
  case DD_ACT_GELU:
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s, approximate %s\n", DDActivationTypes[s->type], DDGeluApproximates[s->approx]));
    break;
  case DD_ACT_ELU:
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s, alpha %g\n", DDActivationTypes[s->type], (double)s->alpha));
    break;
  case DD_ACT_SOFTPLUS:
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s, beta %g, threshold %g\n", DDActivationTypes[s->type], (double)s->beta, (double)s->threshold));
    break;
  case DD_ACT_PRELU:
    if (s->nparam == 1) PetscCall(PetscViewerASCIIPrintf(viewer, "%s, one weight (init %g)\n", DDActivationTypes[s->type], (double)s->init));
    else PetscCall(PetscViewerASCIIPrintf(viewer, "%s, one weight per channel (init %g)%s\n", DDActivationTypes[s->type], (double)s->init, s->cp.bcast ? ", broadcast to the workers" : ""));
    break;
  default:
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s\n", DDActivationTypes[s->type]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERACTIVATION - "activation": pointwise activation functions (hyper-local, paper 000 sec. 4)

  As in torch.nn: relu, leakyrelu (negative slope, default 0.01), tanh, sigmoid, gelu (exact erf
  form, PyTorch's default, or approximate='tanh'), identity, silu, elu (alpha, default 1), softplus
  (beta > 0, default 1; threshold, default 20) and prelu (learnable: one weight, or one per channel,
  initialized to 0.25). No communication for the others: the output has the input's partition,
  ownership and storage format (any order, any format). Backward computes dx = f'(x) dy from the
  input saved by Forward (f'(0) = 0 for relu, the slope for leakyrelu and prelu, alpha for elu, as
  PyTorch); tanh and sigmoid read f'(x) from their output instead (1 - y^2, y (1 - y), as PyTorch's
  backward does) while that output is as Forward left it (its state unchanged, also through a PETSc
  Vec on its storage) and stored as the input is, on host tensors: the same bits as from the input, without computing f again. NaN propagates as in PyTorch: relu(NaN) = leakyrelu(NaN) = prelu(NaN) = elu(NaN) = NaN,
  relu's and elu's backward pass dy where x is NaN, leakyrelu's and prelu's give slope dy.

  prelu: the weight "weight" has shape (1) or (C), C the size of dimension 1 (which must exist for
  C weights). It lives on the input's channel split, on the workers with coordinate 0 in the other
  dimensions (one weight: on the first worker); Forward broadcasts it to every worker, and Backward
  sums the workers' partial gradients onto it (the broadcast's adjoint). Results do not depend on
  the partition.

  In a network (`DDNetSetUp()`, -net_fuse, default on) a relu, tanh or sigmoid whose input is a
  convolution's or a dense (affine) layer's output feeding nothing else, laid out alike, is fused
  with it: the producer writes y = act(v) and this layer's output views the producer's output, so
  that Forward does nothing (into another output tensor a relu computes relu of its input, which is
  exact: relu is idempotent, a tanh or sigmoid copies its input; from another input it raises an
  error, except a relu into another tensor). Backward computes f'(v) from y: relu's mask is the
  same on relu(v) as on v, tanh' = 1 - y^2, sigmoid' = y (1 - y) (bitwise the unfused results where
  y is this layer's own kernel's; a oneDNN post-op's tanh or sigmoid may differ in the last bits).

  Envelope: every type on any partition, order and storage format of the input, float32 and
  float64. Rejected (errors naming the setting): unknown type or gelu approximation; softplus beta
  <= 0 or not finite, a NaN threshold; non-finite elu alpha or prelu init; prelu with
  num_parameters other than 1 or C, C weights on an input of order 1, a replicated input, or a
  blocked input that does not block the channel.

  Options Database Keys:
+ -layer_activation_type <relu,leakyrelu,tanh,sigmoid,gelu,identity,silu,elu,softplus,prelu> - the function
. -layer_activation_negative_slope <s> - leakyrelu's slope
. -layer_activation_gelu_approximate <none,tanh> - gelu's form
. -layer_activation_alpha <a> - elu's alpha
. -layer_activation_beta <b> - softplus's beta
. -layer_activation_threshold <t> - softplus's threshold
. -layer_activation_prelu_num_parameters <n> - prelu's number of weights (1, or C; 0: C)
- -layer_activation_prelu_init <v> - prelu's initial weight

  Level: beginner

.seealso: `DDLayerActivationSetType()`, `DDLayerActivationSetNegativeSlope()`, `DDLayerActivationSetGeluApproximate()`,
          `DDLayerActivationSetAlpha()`, `DDLayerActivationSetSoftplus()`, `DDLayerActivationSetPReLU()`, `DDLAYERDROPOUT`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Activation(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Activation;
  l->device              = PETSC_TRUE; /* on device tensors: the types with a device kernel (Activation_SetUp) */
  l->ops->setfromoptions = Activation_SetFromOptions;
  l->ops->setup          = Activation_SetUp;
  l->ops->forward        = Activation_Forward;
  l->ops->backward       = Activation_Backward;
  l->ops->initparams     = Activation_InitParams;
  l->ops->view           = Activation_View;
  l->ops->reset          = Activation_Reset;
  l->ops->destroy        = Activation_Destroy;
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerActivationSetFused_C", DDLayerActivationSetFused_Activation));
  PetscFunctionReturn(PETSC_SUCCESS);
}

