/*
  DDLayer: the object, registry, life cycle, parameters, initialization and the adjoint test.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <tensor/layout.hpp>
#include <sys/ddsysimpl.h>
#include <tensor/argcheck.hpp>
#include <primitive/exchange.hpp>
#include <primitive/sfutil.hpp>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>
#include <cmath>

namespace
{
/* the layer being set up, for the message of a C++ exception beneath its set-up */
struct SetUpContext {
  DDLayer   layer;
  PetscInt  n;
  DDTensor *xs;
};
/* 'while setting up layer "name" (type) on an input of global shape 2x3x8x8, 96 entries on this rank':
   the name is the options prefix (a layer's name in a network) */
static void DescribeSetUp(const void *ctx, char buf[], size_t len)
{
  const SetUpContext *c    = (const SetUpContext *)ctx;
  const char         *type = ((PetscObject)c->layer)->type_name ? ((PetscObject)c->layer)->type_name : "no type";
  const char         *pre  = ((PetscObject)c->layer)->prefix;
  char                name[256], sh[256] = "?";
  size_t              l;

  snprintf(name, sizeof(name), "%s", pre && pre[0] ? pre : "(no prefix)");
  l = strlen(name);
  if (l > 1 && name[l - 1] == '_') name[l - 1] = 0;
  if (c->n > 0 && c->xs[0]) (void)DDShapeToString_Private(c->xs[0]->order, c->xs[0]->shape, sh, sizeof(sh));
  snprintf(buf, len, "while setting up layer \"%s\" (%s) on an input of global shape %s, %" PetscInt_FMT " entries on this rank", name, type, sh, c->n > 0 && c->xs[0] ? c->xs[0]->layout.size : 0);
}

/* the layer being set up, while it is: DDLayerSettingUp_Private() names it (also on an error return),
   and so does the message of a C++ exception beneath its set-up */
struct SettingUpGuard {
  SettingUpGuard(DDLayer l, PetscInt n, DDTensor xs[]);
  ~SettingUpGuard();
  SetUpContext          what;
  ddnn::CxxErrorContext context;
};
} // namespace

using namespace ddnn;

PetscClassId      DD_LAYER_CLASSID;
PetscFunctionList DDLayerList = NULL;
static PetscBool  DDLayerRegisterAllCalled = PETSC_FALSE;
const char *const DDInitTypes[] = {"default", "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal", "uniform", "zeros", "DDInitType", "DD_INIT_", nullptr};
const char *const DDPoolTypes[] = {"max", "avg", "DDPoolType", "DD_POOL_", nullptr};
const char *const DDActivationTypes[] = {"relu", "leakyrelu", "tanh", "sigmoid", "gelu", "identity", "silu", "elu", "softplus", "prelu", "DDActivationType", "DD_ACT_", nullptr};
const char *const DDUpsampleModes[]   = {"nearest", "linear", "nearest-exact", "DDUpsampleMode", "DD_UPSAMPLE_", nullptr};
const char *const DDLossTypes[]       = {"mse", "l1", "crossentropy", "DDLossType", "DD_LOSS_", nullptr};
const char *const DDReductions[]      = {"mean", "sum", "none", "DDReduction", "DD_REDUCTION_", nullptr};

static std::map<std::string, std::pair<PetscLogEvent, PetscLogEvent>> &LayerEvents()
{
  static std::map<std::string, std::pair<PetscLogEvent, PetscLogEvent>> m;
  return m;
}

PetscErrorCode DDLayerInitializePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Layer", &DD_LAYER_CLASSID));
  LayerEvents().clear();
  PetscCall(DDLayerRegisterAll());
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDLayerFinalizePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscFunctionListDestroy(&DDLayerList));
  DDLayerRegisterAllCalled = PETSC_FALSE;
  LayerEvents().clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerGetEvents(const char type[], PetscLogEvent *fwd, PetscLogEvent *bwd)
{
  PetscFunctionBegin;
  auto it = LayerEvents().find(type);
  if (it == LayerEvents().end()) {
    char          name[64];
    PetscLogEvent f, b;
    PetscCall(PetscSNPrintf(name, sizeof(name), "DDLayer%sFwd", type));
    name[7] = (char)toupper(name[7]);
    PetscCall(PetscLogEventRegister(name, DD_LAYER_CLASSID, &f));
    PetscCall(PetscSNPrintf(name, sizeof(name), "DDLayer%sBwd", type));
    name[7] = (char)toupper(name[7]);
    PetscCall(PetscLogEventRegister(name, DD_LAYER_CLASSID, &b));
    it = LayerEvents().emplace(type, std::make_pair(f, b)).first;
  }
  *fwd = it->second.first;
  *bwd = it->second.second;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDLayerRegister - Adds a layer type

  Not collective

  Input Parameters:
+ name     - the type name, used with `DDLayerSetType()` and -layer_type
- function - the constructor that fills the ops table and data of a new layer

  Notes:
  The built-in types are registered by `DDLayerRegisterAll()` when the package initializes.
  Registering a name again replaces its constructor. The constructor fills the struct of
  `ddnn/private/ddlayerimpl.h`: the ops, data, minin and maxin, and nulldy = `PETSC_TRUE` if the
  type's backward takes a NULL output gradient (dL = 1, as a loss does); for the others
  `DDLayerBackwardMulti()` and `DDNetBackward()` refuse NULL.

  Level: advanced

.seealso: `DDLayerSetType()`, `DDLayerRegisterAll()`
@*/
PetscErrorCode DDLayerRegister(const char name[], PetscErrorCode (*function)(DDLayer))
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDInitializePackage());
  PetscCall(PetscFunctionListAdd(&DDLayerList, name, function));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PETSC_EXTERN PetscErrorCode DDLayerCreate_Activation(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Add(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Affine(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_BatchNorm(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Concat(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Conv(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_ConvTranspose(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Dropout(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Flatten(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_GroupNorm(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_LayerNorm(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Reshape(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Loss(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Spectral(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Pool(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Repartition(DDLayer);
PETSC_EXTERN PetscErrorCode DDLayerCreate_Upsample(DDLayer);

/*@C
  DDLayerRegisterAll - Registers the built-in layer types

  Not collective

  Notes:
  Called by `DDInitializePackage()`; calling it again does nothing (it does not replace a
  constructor the user registered under a built-in name). Types of the user are added with
  `DDLayerRegister()`.

  Level: developer

.seealso: `DDLayerRegister()`, `DDLayerSetType()`
@*/
PetscErrorCode DDLayerRegisterAll(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (DDLayerRegisterAllCalled) PetscFunctionReturn(PETSC_SUCCESS);
  DDLayerRegisterAllCalled = PETSC_TRUE;
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERCONV, DDLayerCreate_Conv));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERCONVTRANSPOSE, DDLayerCreate_ConvTranspose));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERPOOL, DDLayerCreate_Pool));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERAFFINE, DDLayerCreate_Affine));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERACTIVATION, DDLayerCreate_Activation));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERBATCHNORM, DDLayerCreate_BatchNorm));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERGROUPNORM, DDLayerCreate_GroupNorm));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERDROPOUT, DDLayerCreate_Dropout));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERUPSAMPLE, DDLayerCreate_Upsample));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERFLATTEN, DDLayerCreate_Flatten));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERREPARTITION, DDLayerCreate_Repartition));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERADD, DDLayerCreate_Add));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERCONCAT, DDLayerCreate_Concat));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERLOSS, DDLayerCreate_Loss));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERSPECTRAL, DDLayerCreate_Spectral));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERLAYERNORM, DDLayerCreate_LayerNorm));
  PetscCall(PetscFunctionListAdd(&DDLayerList, DDLAYERRESHAPE, DDLayerCreate_Reshape));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerCreate - Creates a distributed layer

  Collective

  Input Parameter:
. comm - the communicator of the tensors the layer will see

  Output Parameter:
. layer - the layer; choose its type with `DDLayerSetType()` or -layer_type

  Level: beginner

.seealso: `DDLayerSetType()`, `DDLayerSetUp()`, `DDLayerForward()`, `DDLayerBackward()`
@*/
PetscErrorCode DDLayerCreate(MPI_Comm comm, DDLayer *layer)
DD_CXX_TRY
{
  DDLayer l;

  PetscFunctionBegin;
  PetscValidPointer(layer, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(l, DD_LAYER_CLASSID, "DDLayer", "Distributed layer", "DDLayer", comm, DDLayerDestroy, DDLayerView));
  l->training  = PETSC_TRUE;
  l->minin     = 1;
  l->maxin     = 1;
  l->inittype  = DD_INIT_DEFAULT;
  l->initscale = 1.0;
  *layer       = l;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerReleaseSaved(DDLayer l)
{
  PetscFunctionBegin;
  for (PetscInt i = 0; i < l->nincap; i++) PetscCall(DDTensorDestroy(&l->saved[i]));
  PetscCall(DDTensorDestroy(&l->savedout));
  l->forwarddone = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DDLayerClearParameters_Private(DDLayer l)
DD_CXX_TRY
{
  PetscFunctionBegin;
  for (PetscInt i = 0; i < l->nparams; i++) {
    if (l->params[i]) l->params[i]->retired = PETSC_TRUE; /* an optimizer holding it must not step it silently */
    if (l->grads[i]) l->grads[i]->retired = PETSC_TRUE;
    PetscCall(DDTensorDestroy(&l->params[i]));
    PetscCall(DDTensorDestroy(&l->grads[i]));
    PetscCall(PetscFree(l->paramnames[i]));
  }
  PetscCall(PetscFree(l->params));
  PetscCall(PetscFree(l->grads));
  PetscCall(PetscFree(l->paramnames));
  l->nparams = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerClearBuffers(DDLayer l)
{
  PetscFunctionBegin;
  for (PetscInt i = 0; i < l->nbuffers; i++) {
    PetscCall(DDTensorDestroy(&l->buffers[i]));
    PetscCall(PetscFree(l->buffernames[i]));
  }
  PetscCall(PetscFree(l->buffers));
  PetscCall(PetscFree(l->counters));
  PetscCall(PetscFree(l->buffernames));
  l->nbuffers = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerReset(DDLayer l)
{
  PetscFunctionBegin;
  if (l->ops->reset) PetscCall((*l->ops->reset)(l));
  PetscCall(DDLayerReleaseSaved(l));
  for (PetscInt i = 0; i < l->nincap; i++) PetscCall(DDTensorDestroy(&l->setupin[i]));
  PetscCall(DDLayerClearParameters_Private(l));
  PetscCall(DDLayerClearBuffers(l));
  PetscCall(PetscFree(l->replicas));
  l->nreplicas = 0;
  PetscCall(DDTensorDestroy(&l->output));
  l->setupcalled = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDLayerSetType - Chooses the layer's type

  Collective

  Input Parameters:
+ layer - the layer
- type  - `DDLAYERCONV`, `DDLAYERPOOL`, `DDLAYERAFFINE`, ... or a registered type

  Options Database Key:
. -layer_type <type> - the type

  Notes:
  Call it with the same type on every rank: a type that differs between ranks is an error on
  every rank naming both (one small all-reduce), and so is an unknown type (listing the known ones).

  Level: beginner

.seealso: `DDLayerCreate()`, `DDLayerRegister()`
@*/
PetscErrorCode DDLayerSetType(DDLayer layer, DDLayerType type)
DD_CXX_TRY
{
  PetscErrorCode (*create)(DDLayer);
  PetscBool match;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  DDCheckPointer(type, 2);
  /* on every rank, before any returns: a type that differs between ranks (or is unknown on some) must not
     leave the others in a later collective */
  PetscCall(DDCheckSameString(PetscObjectComm((PetscObject)layer), "DDLayerSetType()", type));
  PetscCall(PetscObjectTypeCompare((PetscObject)layer, type, &match));
  if (match) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscFunctionListFind(DDLayerList, type, &create));
  if (!create) {
    char known[1024];
    PetscCall(DDFunctionListKnownTypes_Private(DDLayerList, known, sizeof(known)));
    SETERRQ(PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_UNKNOWN_TYPE, "Unknown layer type \"%s\"%s%s (known types: %s)", type, ((PetscObject)layer)->prefix ? " for the layer with prefix " : "", ((PetscObject)layer)->prefix ? ((PetscObject)layer)->prefix : "", known);
  }
  PetscCall(DDLayerReset(layer));
  if (layer->ops->destroy) PetscCall((*layer->ops->destroy)(layer));
  PetscCall(PetscMemzero(layer->ops, sizeof(struct _DDLayerOps)));
  layer->data   = NULL;
  layer->minin  = layer->maxin = 1;
  layer->nulldy = PETSC_FALSE;
  layer->device = PETSC_FALSE;
  PetscCall(PetscObjectChangeTypeName((PetscObject)layer, type));
  PetscCall(DDLayerGetEvents(type, &layer->evfwd, &layer->evbwd));
  PetscCall((*create)(layer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetType - The layer's type

  Not collective

  Level: beginner

.seealso: `DDLayerSetType()`
@*/
PetscErrorCode DDLayerGetType(DDLayer layer, DDLayerType *type)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  *type = ((PetscObject)layer)->type_name;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerSetOptionsPrefix - Sets the prefix of the layer's options (e.g. "conv1_" for -conv1_layer_conv_kernel)

  Logically collective

  Level: beginner

.seealso: `DDLayerSetFromOptions()`
@*/
PetscErrorCode DDLayerSetOptionsPrefix(DDLayer layer, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectSetOptionsPrefix((PetscObject)layer, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerAppendOptionsPrefix - Appends to the prefix of the layer's options

  Logically collective

  Level: intermediate

.seealso: `DDLayerSetOptionsPrefix()`
@*/
PetscErrorCode DDLayerAppendOptionsPrefix(DDLayer layer, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectAppendOptionsPrefix((PetscObject)layer, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetOptionsPrefix - The prefix of the layer's options

  Not collective

  Level: intermediate

.seealso: `DDLayerSetOptionsPrefix()`
@*/
PetscErrorCode DDLayerGetOptionsPrefix(DDLayer layer, const char *prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)layer, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerSetFromOptions - Configures the layer from the options database

  Collective

  Options Database Keys:
+ -layer_type <type> - the type
. -layer_init <default,kaiming_uniform,...> - parameter initialization
. -layer_init_scale <s> - scale of the uniform initialization
. -layer_view - view the layer after set-up
  and the type's own keys, derived from its setters (e.g. -layer_conv_kernel 3,3)

  Level: beginner

.seealso: `DDLayerSetType()`, `DDLayerSetOptionsPrefix()`
@*/
PetscErrorCode DDLayerSetFromOptions(DDLayer layer)
DD_CXX_TRY
{
  char      type[256];
  PetscBool flg;
  PetscEnum it;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscObjectOptionsBegin((PetscObject)layer);
  PetscCall(PetscOptionsFList("-layer_type", "Layer type", "DDLayerSetType", DDLayerList, ((PetscObject)layer)->type_name ? ((PetscObject)layer)->type_name : "", type, sizeof(type), &flg));
  if (flg) PetscCall(DDLayerSetType(layer, type));
  PetscCheck(((PetscObject)layer)->type_name, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Layer %s has no type: call DDLayerSetType() or give -%slayer_type", ((PetscObject)layer)->prefix ? ((PetscObject)layer)->prefix : "", ((PetscObject)layer)->prefix ? ((PetscObject)layer)->prefix : "");
  it = (PetscEnum)layer->inittype;
  PetscCall(PetscOptionsEnum("-layer_init", "Parameter initialization", "DDLayerSetInitType", DDInitTypes, it, &it, &flg));
  if (flg) layer->inittype = (DDInitType)it;
  {
    PetscReal s = layer->initscale;
    PetscCall(PetscOptionsReal("-layer_init_scale", "Scale of the uniform initialization", "DDLayerSetInitScale", s, &s, &flg));
    if (flg) PetscCall(DDLayerSetInitScale(layer, s)); /* its checks */
  }
  {
    char      bname[64];
    PetscBool bset;
    PetscCall(PetscOptionsString("-dd_backend", "Backend of this layer's kernels (/cpu/ref, /cpu/blas, /cpu/dnnl)", "DDLayerSetBackend", "", bname, sizeof(bname), &bset));
    if (bset) PetscCall(DDLayerSetBackend(layer, bname));
  }
  if (layer->ops->setfromoptions) PetscCall((*layer->ops->setfromoptions)(layer, PetscOptionsObject));
  PetscCall(PetscObjectProcessOptionsHandlers((PetscObject)layer, PetscOptionsObject));
  PetscOptionsEnd();
  /* PETSc casts an integer option to PetscInt silently (a kernel of 4294967299 runs as 3) */
  PetscCall(DDOptionsCheckIntegers(PetscObjectComm((PetscObject)layer), ((PetscObject)layer)->prefix ? ((PetscObject)layer)->prefix : "layer_"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* The layer's description that every rank of its communicator must share: type, options prefix,
   hyper-parameters (its view and its options in the database), number, global shapes, data types
   and partitions of the inputs; after set-up (post), the output's global shape. */
static PetscErrorCode DDLayerCheckConsistent_Private(DDLayer layer, PetscInt n, DDTensor xs[], PetscBool post)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)layer);
  PetscMPIInt size;
  std::string d;
  char        what[PETSC_MAX_OPTION_NAME + 128], sh[256];
  const char *pfx = ((PetscObject)layer)->prefix;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  if (size == 1) PetscFunctionReturn(PETSC_SUCCESS);
  if (ddnn::PricingSkipChecks()) PetscFunctionReturn(PETSC_SUCCESS); /* a trial set-up of -net_distribution auto: checked at its first set-up */
  PetscCall(PetscSNPrintf(what, sizeof(what), "%s of the %s layer%s%s%s", post ? "The output shape" : "The hyper-parameters or input shapes", ((PetscObject)layer)->type_name, pfx ? " with prefix " : "", pfx ? pfx : "", ""));
  if (post) {
    PetscCall(DDShapeToString_Private(layer->output->order, layer->output->shape, sh, sizeof(sh)));
    d = std::string("output ") + sh + " " + DDDataTypes[layer->output->dtype];
    PetscCall(DDCheckSameString(comm, what, d.c_str()));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  d = std::string("type ") + ((PetscObject)layer)->type_name + "\n" + "inputs " + std::to_string((long long)n) + "\n";
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDShapeToString_Private(xs[i]->order, xs[i]->shape, sh, sizeof(sh)));
    d += "input " + std::to_string((long long)i) + " shape " + sh + " " + DDDataTypes[xs[i]->dtype];
    PetscCall(DDShapeToString_Private(xs[i]->part->order, xs[i]->part->shape, sh, sizeof(sh)));
    d += std::string(" partition ") + sh + "\n";
  }
  { /* the hyper-parameters as the type views them (a view on this rank alone) */
    char       *buf = NULL;
    size_t      len = 0;
    FILE       *fp  = open_memstream(&buf, &len);
    PetscViewer v;
    PetscCheck(fp, PETSC_COMM_SELF, PETSC_ERR_MEM, "open_memstream() failed");
    PetscCall(PetscViewerASCIIOpenWithFILE(PETSC_COMM_SELF, fp, &v));
    PetscCall(DDLayerView(layer, v));
    PetscCall(PetscViewerDestroy(&v));
    fclose(fp);
    if (buf) d += buf;
    free(buf);
  }
  { /* and the options of the layer in the database */
    char *opts;
    PetscCall(DDOptionsGetPrefixed_Private(pfx ? pfx : "layer_", &opts));
    d += opts;
    PetscCall(PetscFree(opts));
  }
  PetscCall(DDCheckSameString(comm, what, d.c_str()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerSetUpMulti - Sets the layer up for inputs with the given layouts

  Collective

  Input Parameters:
+ layer - the layer
. n     - number of inputs (add and concat take several; loss takes prediction and target)
- xs    - tensors laid out as the inputs will be

  Notes:
  Computes the output layout (`DDLayerGetOutput()`), builds the primitives (halo widths
  follow the kernel, and the inputs' halos may grow, `DDTensorEnsureHalo()`), creates and
  initializes the parameters with the layer's seed (0 unless `DDLayerInitializeParameters()`
  is called later). Errors name the option, shape or rank at fault on every rank.

  Device tensors (`DDTensorSetMemType()`, issue 11): every layer type but spectral runs on them
  (conv, convtranspose, pool, activation (relu, leakyrelu, tanh, sigmoid, exact gelu, identity),
  upsample, affine, batchnorm, groupnorm, layernorm, dropout, loss, add, concat, flatten,
  reshape, repartition) with the "/gpu/cuda" backend: its kernels (cuDNN, cuBLAS, CUDA), the
  primitives on the device, parameters, outputs and gradients in device memory. A layer without
  a backend of its own (`DDLayerSetBackend()`, -<prefix>dd_backend) computes where its inputs
  live: device inputs take /gpu/cuda whatever the default backend. Every input must be in one
  memory, the same on every rank, and later calls must pass tensors (outputs and gradients too)
  in that memory. The spectral layer and the activations without a device kernel (silu, elu,
  softplus, prelu, the tanh-approximated gelu) refuse device tensors with an error naming the
  type; a layer given a host backend refuses device tensors, and host tensors refuse a backend
  that computes in device memory.

  Level: beginner

.seealso: `DDLayerSetUp()`, `DDLayerForwardMulti()`, `DDLayerSetBackend()`
@*/
PetscErrorCode DDLayerSetUpMulti(DDLayer layer, PetscInt n, DDTensor xs[])
DD_CXX_TRY
{
  MPI_Comm comm;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  comm = PetscObjectComm((PetscObject)layer);
  PetscCheck(((PetscObject)layer)->type_name, comm, PETSC_ERR_ARG_WRONGSTATE, "Set the layer's type first (DDLayerSetType() or -layer_type)");
  {
    const char *pfx = ((PetscObject)layer)->prefix;
    char        range[96];
    if (layer->maxin == layer->minin) PetscCall(PetscSNPrintf(range, sizeof(range), "%" PetscInt_FMT, layer->minin));
    else if (layer->maxin == PETSC_MAX_INT) PetscCall(PetscSNPrintf(range, sizeof(range), "at least %" PetscInt_FMT, layer->minin));
    else PetscCall(PetscSNPrintf(range, sizeof(range), "%" PetscInt_FMT " to %" PetscInt_FMT, layer->minin, layer->maxin));
    PetscCheck(n >= layer->minin && n <= layer->maxin, comm, PETSC_ERR_ARG_SIZ, "A %s layer%s%s%s takes %s input(s), not %" PetscInt_FMT, ((PetscObject)layer)->type_name, pfx ? " (prefix " : "", pfx ? pfx : "", pfx ? ")" : "", range, n);
  }
  for (PetscInt i = 0; i < n; i++) PetscCall(DDTensorCheckSetUp_Private(xs[i], "DDLayerSetUp"));
  {
    /* the memory: every input in one (a tensor's memory is the same on every rank, DDTensorSetUp()
       checks it: so are these errors); device tensors run on the types that say so (issue 11:
       pooling and activations so far) with a backend computing in that memory */
    const char *tn = ((PetscObject)layer)->type_name;
    DDBackend   b;
    DDMemType   mt = n > 0 ? xs[0]->memtype : DD_MEMTYPE_HOST;
    for (PetscInt i = 1; i < n; i++) PetscCheck(xs[i]->memtype == mt, comm, PETSC_ERR_ARG_INCOMP, "Layer %s: input %" PetscInt_FMT " is in %s memory, input 0 in %s memory; give a layer its inputs in one memory", tn, i, DDMemTypes[xs[i]->memtype], DDMemTypes[mt]);
    PetscCheck(mt == DD_MEMTYPE_HOST || layer->device, comm, PETSC_ERR_SUP, "DDLayerSetUp() does not support device tensors yet for a %s layer (its input is in %s memory); copy it to a host tensor", tn, DDMemTypes[mt]);
    layer->memtype = mt; /* a layer without a backend of its own computes where its inputs live (DDLayerGetBackend_Private()) */
    PetscCall(DDLayerGetBackend_Private(layer, &b));
    if (mt == DD_MEMTYPE_HOST) PetscCheck(b->memtype == DD_MEMTYPE_HOST, comm, PETSC_ERR_SUP, "Layer %s: backend %s computes in %s memory, but the input is a host tensor: choose a /cpu backend for the layer, or give it device tensors (DDTensorSetMemType())", tn, b->name, DDMemTypes[b->memtype]);
    else PetscCheck(b->memtype == mt, comm, PETSC_ERR_SUP, "Layer %s: the input is in %s memory, but backend %s computes in %s memory: choose /gpu/cuda for the layer (-dd_backend, DDLayerSetBackend())", tn, DDMemTypes[mt], b->name, DDMemTypes[b->memtype]);
  }
  for (PetscInt i = 0; i < n; i++) {
    PetscMPIInt cmp;
    PetscCallMPI(MPI_Comm_compare(comm, PetscObjectComm((PetscObject)xs[i]), &cmp));
    PetscCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, comm, PETSC_ERR_ARG_NOTSAMECOMM, "Input %" PetscInt_FMT " lives on another communicator than the layer", i);
  }
  PetscCall(DDLayerReset(layer));
  PetscCall(DDLayerCheckConsistent_Private(layer, n, xs, PETSC_FALSE));
  if (n > layer->nincap) {
    PetscCall(PetscFree4(layer->inhash, layer->setupin, layer->saved, layer->savedstate));
    PetscCall(PetscCalloc4(n, &layer->inhash, n, &layer->setupin, n, &layer->saved, n, &layer->savedstate));
    layer->nincap = n;
  }
  layer->nin = n;
  {
    ddnn::ExchangeOwnerGuard owner(layer); /* the primitives set up here are the layer's, for the performance model */
    SettingUpGuard           current(layer, n, xs); /* helpers that register replicas find the layer; a C++ exception beneath names it */
    PetscErrorCode           ierr;
    try {
      ierr = (*layer->ops->setup)(layer, n, xs);
    } catch (const std::exception &e) { /* thrown by the type's own set-up code, while the context lives */
      return CxxError_Private(__LINE__, PETSC_FUNCTION_NAME, __FILE__, e);
    }
    PetscCall(ierr);
  }
  PetscCheck(layer->output, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Layer type %s did not create its output", ((PetscObject)layer)->type_name);
  for (PetscInt i = 0; i < n; i++) {
    layer->inhash[i] = xs[i]->layouthash;
    PetscCall(PetscObjectReference((PetscObject)xs[i]));
    layer->setupin[i] = xs[i];
  }
  PetscCall(DDLayerCheckConsistent_Private(layer, n, xs, PETSC_TRUE));
  layer->setupcalled = PETSC_TRUE;
  if (layer->nparams && !ddnn::PricingOnly()) PetscCall(DDLayerInitializeParameters(layer, 0)); /* a pricing-only set-up (-net_distribution auto's trials) runs nothing: no weights to draw */
  if (!ddnn::PricingOnly()) PetscCall(DDLayerViewFromOptions(layer, NULL, "-layer_view"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerSetUp - Sets up a single-input layer for inputs laid out like x

  Collective

  Level: beginner

.seealso: `DDLayerSetUpMulti()`
@*/
PetscErrorCode DDLayerSetUp(DDLayer layer, DDTensor x)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDLayerSetUpMulti(layer, 1, &x));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* For implementations: set the (owned) output tensor, with the halo the network asked for */
PetscErrorCode DDLayerSetOutput_Private(DDLayer l, DDTensor y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDTensorDestroy(&l->output));
  l->output = y;
  if (l->hasouthalo) PetscCall(DDTensorEnsureHalo(y, l->outlo, l->outhi));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* The halo widths (this rank's) the output should be created with; NULL clears the request */
PetscErrorCode DDLayerSetOutputHalo_Private(DDLayer l, const PetscInt lo[], const PetscInt hi[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  l->hasouthalo = (lo && hi) ? PETSC_TRUE : PETSC_FALSE;
  for (PetscInt k = 0; k < DD_MAX_DIM; k++) {
    l->outlo[k] = lo ? lo[k] : 0;
    l->outhi[k] = hi ? hi[k] : 0;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerGetOutput - The layer's own output tensor (not a new reference)

  Not collective

  Notes:
  Forward may write into it or into any tensor distributed alike with the same format
  (`DDLayerCreateOutput()`).

  Level: beginner

.seealso: `DDLayerCreateOutput()`
@*/
PetscErrorCode DDLayerGetOutput(DDLayer layer, DDTensor *y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  *y = layer->output;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerCreateOutput - Creates a tensor laid out as the layer's output

  Collective

  Level: beginner

.seealso: `DDLayerGetOutput()`
@*/
PetscErrorCode DDLayerCreateOutput(DDLayer layer, DDTensor *y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  PetscCall(DDTensorDuplicate(layer->output, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* A tensor given to a set-up layer is in the memory of its set-up inputs (a tensor's memory is the same on every rank: so is this error) */
static PetscErrorCode DDLayerCheckMemory(DDLayer l, DDTensor t, const char fn[], const char what[])
{
  PetscFunctionBegin;
  PetscCheck(t->memtype == l->memtype, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_INCOMP, "%s: the %s layer was set up on tensors in %s memory; this %s (tensor %s) is in %s memory", fn, ((PetscObject)l)->type_name, DDMemTypes[l->memtype], what, ((PetscObject)t)->name ? ((PetscObject)t)->name : "(unnamed)", DDMemTypes[t->memtype]);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* device layers: raises a failure that a kernel entry returning nothing (pointwise) kept during the layer's work */
static PetscErrorCode DDLayerCheckKernels(DDLayer l)
{
  DDBackend b;

  PetscFunctionBegin;
  if (l->memtype == DD_MEMTYPE_HOST) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDLayerGetBackend_Private(l, &b));
  if (b->mem.check) PetscCall(b->mem.check());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The output may have another halo than the layer's own output, but not another distribution or format */
static PetscErrorCode DDLayerCheckOutput(DDLayer l, DDTensor y, const char fn[])
{
  PetscBool ok;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(y, fn));
  PetscCall(DDLayerCheckMemory(l, y, fn, "output"));
  PetscCall(DDTensorCompatible(y, l->output, &ok));
  PetscCheck(ok && y->dtype == l->output->dtype, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_INCOMP, "%s: the output tensor is not distributed as the layer's output (use DDLayerGetOutput() or DDLayerCreateOutput())", fn);
  PetscCheck(y->format == l->output->format && (y->format != DD_FORMAT_BLOCKED || y->bs == l->output->bs), PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_INCOMP, "%s: the output tensor has format %s, the layer writes %s", fn, DDTensorFormats[y->format], DDTensorFormats[l->output->format]);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerForwardMulti - y = F(x_0, ..., x_{n-1})

  Collective

  Input Parameters:
+ layer - a set-up layer
. n     - number of inputs
. xs    - the inputs, laid out as at set-up (their halos may have grown since)
- y     - the output (`DDLayerGetOutput()` or a tensor distributed alike)

  Notes:
  The inputs are kept (referenced) for `DDLayerBackwardMulti()`; they must not be modified
  in between, or Backward raises an error. The output is referenced too, with its state after the
  forward: a tanh or sigmoid layer's Backward reads f' from it while that is unchanged (a write
  through the tensor or a PETSc Vec on its storage, or new storage, changes it), and from the input
  otherwise (the same values). Both references are released by the next Forward, a new type or
  set-up, and `DDLayerDestroy()`.

  Level: beginner

.seealso: `DDLayerBackwardMulti()`, `DDLayerForward()`
@*/
PetscErrorCode DDLayerForwardMulti(DDLayer layer, PetscInt n, DDTensor xs[], DDTensor y)
DD_CXX_TRY
{
  MPI_Comm comm;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  comm = PetscObjectComm((PetscObject)layer);
  PetscCheck(layer->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() before DDLayerForward()");
  PetscCheck(n == layer->nin, comm, PETSC_ERR_ARG_SIZ, "Layer was set up for %" PetscInt_FMT " input(s), %" PetscInt_FMT " given", layer->nin, n);
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDTensorCheckSetUp_Private(xs[i], "DDLayerForward"));
    PetscCall(DDLayerCheckMemory(layer, xs[i], "DDLayerForward", "input"));
    if (xs[i]->layouthash != layer->inhash[i]) { /* a halo grew, or another tensor: it must be distributed alike */
      PetscCall(DDTensorCheckCompatible_Private(xs[i], layer->setupin[i], "DDLayerForward"));
    }
  }
  PetscCall(DDLayerCheckOutput(layer, y, "DDLayerForward"));
  PetscCall(DDLayerReleaseSaved(layer));
  PetscCall(PetscLogEventBegin(layer->evfwd, layer, 0, 0, 0));
  PetscCall((*layer->ops->forward)(layer, n, xs, y));
  PetscCall(DDLayerCheckKernels(layer));
  PetscCall(PetscLogEventEnd(layer->evfwd, layer, 0, 0, 0));
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(PetscObjectReference((PetscObject)xs[i]));
    layer->saved[i] = xs[i];
    PetscCall(DDTensorContentState_Private(xs[i], &layer->savedstate[i]));
  }
  layer->forwarddone = PETSC_TRUE;
  PetscCall(DDTensorStateIncrease_Private(y));
  PetscCall(PetscObjectReference((PetscObject)y));
  layer->savedout = y;
  PetscCall(DDTensorContentState_Private(y, &layer->savedoutstate));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerForward - y = F(x) for a single-input layer

  Collective

  Level: beginner

.seealso: `DDLayerForwardMulti()`, `DDLayerBackward()`
@*/
PetscErrorCode DDLayerForward(DDLayer layer, DDTensor x, DDTensor y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDLayerForwardMulti(layer, 1, &x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the first of the inputs the last forward read whose content (through the tensor or a PETSc Vec on its
   storage) changed since, or -1 (on this rank) */
PetscErrorCode DDLayerSavedInputChanged_Private(DDLayer layer, PetscInt *changed)
{
  PetscFunctionBegin;
  *changed = -1;
  for (PetscInt i = 0; layer->forwarddone && i < layer->nin && *changed < 0; i++) {
    PetscObjectState st;
    PetscCall(DDTensorContentState_Private(layer->saved[i], &st));
    if (st != layer->savedstate[i]) *changed = i;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerBackwardMulti - dx_i = J_i^* dy at the state of the last Forward; parameter gradients accumulate

  Collective

  Input Parameters:
+ layer - the layer, after `DDLayerForwardMulti()`
. dy    - the gradient with respect to the output (distributed as the output); for a loss
          layer, NULL means dL = 1
. n     - number of inputs
- dxs   - the gradients with respect to the inputs, distributed as the inputs (overwritten);
          an entry may be NULL when that gradient is not needed

  Notes:
  This is the adjoint of the Jacobian (paper 000, sec. 2 and 4): the adjoints of the
  layer's primitives compose with the adjoint of its local kernel. Parameter gradients are
  added to `DDLayerGetGradients()`; call `DDLayerZeroGradients()` between steps.

  An input changed since the forward read it is an error (`PETSC_ERR_ARG_WRONGSTATE`, "Input i was
  modified after DDLayerForward()"), on the ranks where it changed (`DDNetBackward()` checks its
  layers' inputs on every rank first): a change through the tensor's
  functions, or through a PETSc Vec on its storage (`DDTensorPlaceVec()`, `DDTensorCreateVec()`),
  as well as placing or resetting such a Vec. A write through a pointer from
  `DDTensorGetArray()` counts once `DDTensorRestoreArray()` is called.

  Level: beginner

.seealso: `DDLayerForwardMulti()`, `DDLayerZeroGradients()`
@*/
PetscErrorCode DDLayerBackwardMulti(DDLayer layer, DDTensor dy, PetscInt n, DDTensor dxs[])
DD_CXX_TRY
{
  MPI_Comm comm;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  comm = PetscObjectComm((PetscObject)layer);
  PetscCheck(layer->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() and DDLayerForward() before DDLayerBackward()");
  PetscCheck(layer->forwarddone, comm, PETSC_ERR_ARG_WRONGSTATE, "DDLayerBackward() needs the state of a DDLayerForward() first (layer %s%s)", ((PetscObject)layer)->prefix ? ((PetscObject)layer)->prefix : "", ((PetscObject)layer)->type_name);
  PetscCheck(n == layer->nin, comm, PETSC_ERR_ARG_SIZ, "Layer has %" PetscInt_FMT " input(s), %" PetscInt_FMT " gradients given", layer->nin, n);
  {
    PetscInt changed;
    PetscCall(DDLayerSavedInputChanged_Private(layer, &changed));
    PetscCheck(changed < 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Input %" PetscInt_FMT " was modified after DDLayerForward(); its gradient would be wrong", changed);
  }
  for (PetscInt i = 0; i < n; i++) {
    if (dxs && dxs[i]) {
      PetscCall(DDTensorCheckSetUp_Private(dxs[i], "DDLayerBackward"));
      PetscCall(DDLayerCheckMemory(layer, dxs[i], "DDLayerBackward", "input gradient"));
      PetscCall(DDTensorCheckCompatible_Private(dxs[i], layer->saved[i], "DDLayerBackward (input gradient)"));
    }
  }
  {
    /* on this rank, as the other checks here (a collective check would cost every backward call an
       all-reduce); DDNetBackward() checks its own dy on every rank, once per step */
    const char *pfx = ((PetscObject)layer)->prefix;
    PetscCheck(dy || layer->nulldy, comm, PETSC_ERR_ARG_NULL, "DDLayerBackward: the output gradient dy is NULL, and the %s layer%s%s%s is not a loss (only a loss takes NULL: dL = 1); pass the gradient of its output", ((PetscObject)layer)->type_name, pfx ? " \"" : "", pfx ? pfx : "", pfx ? "\"" : "");
  }
  if (dy) {
    PetscBool ok;
    PetscCall(DDTensorCheckSetUp_Private(dy, "DDLayerBackward"));
    PetscCall(DDLayerCheckMemory(layer, dy, "DDLayerBackward", "output gradient"));
    PetscCall(DDTensorCompatible(dy, layer->output, &ok));
    PetscCheck(ok && dy->dtype == layer->output->dtype, comm, PETSC_ERR_ARG_INCOMP, "DDLayerBackward: the output gradient is not distributed as the layer's output");
  }
  PetscCall(PetscLogEventBegin(layer->evbwd, layer, 0, 0, 0));
  PetscCall((*layer->ops->backward)(layer, dy, n, dxs));
  PetscCall(DDLayerCheckKernels(layer));
  PetscCall(PetscLogEventEnd(layer->evbwd, layer, 0, 0, 0));
  for (PetscInt i = 0; i < n; i++) /* the primitives may touch the saved inputs' halos */
    PetscCall(DDTensorContentState_Private(layer->saved[i], &layer->savedstate[i]));
  for (PetscInt i = 0; i < n && dxs; i++)
    if (dxs[i]) PetscCall(DDTensorStateIncrease_Private(dxs[i]));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerBackward - dx = J^* dy for a single-input layer; parameter gradients accumulate

  Collective

  Level: beginner

.seealso: `DDLayerBackwardMulti()`
@*/
PetscErrorCode DDLayerBackward(DDLayer layer, DDTensor dy, DDTensor dx)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDLayerBackwardMulti(layer, dy, 1, &dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------- */
/* parameters */

PetscErrorCode DDLayerAddParameter_Private(DDLayer l, const char name[], DDTensor p)
DD_CXX_TRY
{
  DDTensor g;

  PetscFunctionBegin;
  PetscCall(PetscRealloc(sizeof(DDTensor) * (l->nparams + 1), &l->params));
  PetscCall(PetscRealloc(sizeof(DDTensor) * (l->nparams + 1), &l->grads));
  PetscCall(PetscRealloc(sizeof(char *) * (l->nparams + 1), &l->paramnames));
  PetscCall(DDTensorDuplicate(p, &g));
  l->params[l->nparams] = p;
  l->grads[l->nparams]  = g;
  PetscCall(PetscStrallocpy(name, &l->paramnames[l->nparams]));
  l->nparams++;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------- */
/*
  Replicated parameters (paper 000 sec. 4.1: a layer's weights are broadcast to the workers that
  use them, w^ = B w, and their gradients summed back, dw += B^* dw^). In the broadcast weight mode
  the layer applies B every Forward and B^* every Backward. In the replicated mode
  (DDNetSetWeightMode(), src/net/replicas.cxx) the network marks the replica kept: it refreshes w^
  with one bucketed broadcast per worker group when w changed, and sums the replicas' gradients,
  which the layer adds to its slot of the bucket here, with one all-reduce per group at the end of
  DDNetBackward(). The operator pair is the same; only when it runs changes.
*/

PetscErrorCode DDLayerAddReplica_Private(DDLayer l, DDTensor w, DDTensor wh, DDPrimitive B)
DD_CXX_TRY
{
  DDTensor grad = NULL;

  PetscFunctionBegin;
  PetscCheck(l, PETSC_COMM_SELF, PETSC_ERR_PLIB, "A replica registered outside a layer's set-up");
  for (PetscInt i = 0; i < l->nparams; i++)
    if (l->params[i] == w) grad = l->grads[i];
  if (!grad || !B || w == wh) PetscFunctionReturn(PETSC_SUCCESS); /* not a trainable parameter (running statistics), or not broadcast */
  for (PetscInt i = 0; i < l->nreplicas; i++) PetscCheck(l->replicas[i].wh != wh, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Replica registered twice");
  PetscCall(PetscRealloc(sizeof(DDLayerReplica) * (l->nreplicas + 1), &l->replicas));
  DDLayerReplica &r = l->replicas[l->nreplicas++];
  PetscCall(PetscMemzero(&r, sizeof(r)));
  r.w    = w;
  r.wh   = wh;
  r.B    = B;
  r.grad = grad;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static std::vector<DDLayer> &SettingUpStack()
{
  static std::vector<DDLayer> s;
  return s;
}
SettingUpGuard::SettingUpGuard(DDLayer l, PetscInt n, DDTensor xs[]) : what{l, n, xs}, context(DescribeSetUp, &what) { SettingUpStack().push_back(l); }
SettingUpGuard::~SettingUpGuard() { SettingUpStack().pop_back(); }

DDLayer DDLayerSettingUp_Private(void)
{
  return SettingUpStack().empty() ? NULL : SettingUpStack().back();
}

static DDLayerReplica *FindReplica(DDLayer l, DDTensor wh, DDTensor grad)
{
  for (PetscInt i = 0; l && i < l->nreplicas; i++)
    if ((wh && l->replicas[i].wh == wh) || (grad && l->replicas[i].grad == grad)) return &l->replicas[i];
  return NULL;
}

PetscErrorCode DDLayerReplicaForward_Private(DDLayer l, DDTensor wh, PetscBool *done)
DD_CXX_TRY
{
  DDLayerReplica  *r = FindReplica(l, wh, NULL);
  PetscObjectState st;

  PetscFunctionBegin;
  *done = PETSC_FALSE;
  if (!r || !r->kept) PetscFunctionReturn(PETSC_SUCCESS);
  *done = PETSC_TRUE;
  PetscCall(DDTensorContentState_Private(r->w, &st));
  if (r->fresh && st == r->wstate) PetscFunctionReturn(PETSC_SUCCESS);
  /* w changed since the network's last refresh (a layer run on its own): the layer's broadcast */
  PetscCall(DDPrimitiveApply(r->B, r->w, r->wh));
  r->wstate = st;
  r->fresh  = PETSC_TRUE;
  r->nfallback++;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDLayerReplicaBackward_Private(DDLayer l, DDTensor wh, DDTensor grad, DDTensor dwh, PetscBool *done)
DD_CXX_TRY
{
  DDLayerReplica *r = FindReplica(l, wh, grad);

  PetscFunctionBegin;
  *done = PETSC_FALSE;
  if (!r || !r->kept) PetscFunctionReturn(PETSC_SUCCESS);
  *done = PETSC_TRUE;
  if (!r->slot || !dwh->layout.bulksize) PetscFunctionReturn(PETSC_SUCCESS); /* no piece of the replica here */
  PetscCall(ddnn::DispatchType(dwh->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *s = (T *)r->slot, *a = ddnn::HostArray<T>(dwh);
    PetscFunctionBegin;
    if (!r->added) ddnn::BulkCOrderCopy<T>(dwh->layout, a, s, 0); /* the slot is zero after each sum: a copy is the sum */
    else {
      std::vector<T> tmp((size_t)dwh->layout.bulksize);
      ddnn::BulkCOrderCopy<T>(dwh->layout, a, tmp.data(), 0);
      for (size_t i = 0; i < tmp.size(); i++) s[i] += tmp[i];
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  r->added = PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------- */
/* buffers: non-trainable state (running statistics, counters) */

PetscErrorCode DDLayerAddBuffer_Private(DDLayer l, const char name[], DDTensor t, PetscInt64 *counter)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck((t != NULL) != (counter != NULL), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Buffer \"%s\": give a tensor or a counter, not both", name);
  for (PetscInt i = 0; i < l->nbuffers; i++) {
    PetscBool same;
    PetscCall(PetscStrcmp(l->buffernames[i], name, &same));
    PetscCheck(!same, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "The layer already has a buffer \"%s\"", name);
  }
  PetscCall(PetscRealloc(sizeof(DDTensor) * (l->nbuffers + 1), &l->buffers));
  PetscCall(PetscRealloc(sizeof(PetscInt64 *) * (l->nbuffers + 1), &l->counters));
  PetscCall(PetscRealloc(sizeof(char *) * (l->nbuffers + 1), &l->buffernames));
  if (t) PetscCall(PetscObjectReference((PetscObject)t));
  l->buffers[l->nbuffers]  = t;
  l->counters[l->nbuffers] = counter;
  PetscCall(PetscStrallocpy(name, &l->buffernames[l->nbuffers]));
  l->nbuffers++;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetBuffers - The layer's non-trainable state: running statistics, counters (PyTorch's buffers)

  Not collective

  Input Parameter:
. layer - a set-up layer

  Output Parameters:
+ n        - number of buffers
. names    - their names ("running_mean", "running_var", "num_batches_tracked", "calls", ...)
. tensors  - for each buffer the tensor holding it (owned by the layer), or NULL for a counter
- counters - for each buffer a pointer to the integer counter (owned by the layer), or NULL for a tensor

  Notes:
  Any output may be NULL. The values do not depend on the partition (a counter is the same on
  every rank). Buffers are not trained but change the layer's results: batch normalization
  evaluates with its running statistics, dropout draws its k-th mask from its call counter.
  `DDCheckpointSave()` saves every buffer and `DDCheckpointLoad()` restores them; a tensor or
  counter may be set directly (after which the layer uses the new values).

  Level: intermediate

.seealso: `DDLayerGetParameters()`, `DDCheckpointSave()`, `DDLayerBatchNormGetRunningStatistics()`
@*/
PetscErrorCode DDLayerGetBuffers(DDLayer layer, PetscInt *n, const char *const *names[], DDTensor *tensors[], PetscInt64 **counters[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  if (n) *n = layer->nbuffers;
  if (names) *names = (const char *const *)layer->buffernames;
  if (tensors) *tensors = layer->buffers;
  if (counters) *counters = layer->counters;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetParameters - The layer's parameter tensors (weight, bias, ...)

  Not collective

  Output Parameters:
+ n      - number of parameters
- params - array of tensors owned by the layer, distributed on the layer's parameter partitions

  Level: intermediate

.seealso: `DDLayerGetGradients()`, `DDLayerGetParameterName()`
@*/
PetscErrorCode DDLayerGetParameters(DDLayer layer, PetscInt *n, DDTensor *params[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  if (n) *n = layer->nparams;
  if (params) *params = layer->params;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetGradients - The gradients of the layer's parameters (accumulated by Backward)

  Not collective

  Level: intermediate

.seealso: `DDLayerGetParameters()`, `DDLayerZeroGradients()`
@*/
PetscErrorCode DDLayerGetGradients(DDLayer layer, PetscInt *n, DDTensor *grads[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  if (n) *n = layer->nparams;
  if (grads) *grads = layer->grads;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetParameterName - Name of a parameter ("weight", "bias", ...)

  Not collective

  Level: intermediate

.seealso: `DDLayerGetParameters()`
@*/
PetscErrorCode DDLayerGetParameterName(DDLayer layer, PetscInt i, const char *name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(i >= 0 && i < layer->nparams, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Parameter %" PetscInt_FMT " does not exist (the layer has %" PetscInt_FMT ")", i, layer->nparams);
  *name = layer->paramnames[i];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerGetNumParameters - Number of scalar parameters (global)

  Not collective

  Level: beginner

.seealso: `DDLayerGetParameters()`
@*/
PetscErrorCode DDLayerGetNumParameters(DDLayer layer, PetscInt64 *count)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  *count = 0;
  for (PetscInt i = 0; i < layer->nparams; i++) {
    PetscInt64 s = 1;
    for (PetscInt k = 0; k < layer->params[i]->order; k++) s *= layer->params[i]->shape[k];
    *count += s;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerZeroGradients - Sets the parameters' gradients to zero

  Not collective

  Level: beginner

.seealso: `DDLayerGetGradients()`
@*/
PetscErrorCode DDLayerZeroGradients(DDLayer layer)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  for (PetscInt i = 0; i < layer->nparams; i++) PetscCall(DDTensorZeroEntries(layer->grads[i]));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerSetInitType - How `DDLayerInitializeParameters()` draws the parameters

  Logically collective

  Input Parameters:
+ layer - the layer
- type  - a `DDInitType`; a value outside the enum is an error (`PETSC_ERR_ARG_OUTOFRANGE`)

  Options Database Key:
. -layer_init <type> - the scheme

  Level: intermediate

.seealso: `DDInitType`, `DDLayerInitializeParameters()`
@*/
PetscErrorCode DDLayerSetInitType(DDLayer layer, DDInitType type)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck((int)type >= (int)DD_INIT_DEFAULT && (int)type <= (int)DD_INIT_ZEROS, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerSetInitType(): unknown initialization type %d (-layer_init: default, kaiming_uniform, kaiming_normal, xavier_uniform, xavier_normal, uniform or zeros)", (int)type);
  layer->inittype = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerSetInitScale - Scale of `DD_INIT_UNIFORM`

  Logically collective

  Input Parameters:
+ layer - the layer
- s     - the scale: the parameters are drawn from U(-s, s); NaN and +-inf are errors
          (`PETSC_ERR_ARG_OUTOFRANGE`: they would make every parameter NaN or inf)

  Options Database Key:
. -layer_init_scale <s> - the scale

  Level: intermediate

.seealso: `DDLayerSetInitType()`
@*/
PetscErrorCode DDLayerSetInitScale(DDLayer layer, PetscReal s)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(!PetscIsInfOrNanReal(s), PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerSetInitScale(): the scale %g is not finite (-layer_init_scale)", (double)s);
  layer->initscale = s;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  Fills a parameter tensor from a counter-based generator keyed on the global index, so that
  the same seed gives the same global tensor on any partition (DESIGN.md, partition
  independence). bound_default is the PyTorch default's bound (for DD_INIT_DEFAULT).
*/
PetscErrorCode DDTensorInitialize_Private(DDTensor t, DDInitType type, PetscReal scale, PetscInt64 seed, PetscInt fan_in, PetscInt fan_out, PetscReal bound_default)
DD_CXX_TRY
{
  const DDLayout &L = t->layout;
  PetscInt        a[DD_MAX_DIM], b[DD_MAX_DIM];
  PetscInt64      gs[DD_MAX_DIM];

  PetscFunctionBegin;
  LayoutBulkBox(L, a, b);
  gs[t->order - 1] = 1;
  for (PetscInt k = t->order - 2; k >= 0; k--) gs[k] = gs[k + 1] * t->shape[k + 1];
  const PetscReal gain = PetscSqrtReal(2.0); /* ReLU */
  void *h;
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: drawn in a host copy, copied back */
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *arr  = (T *)h;
    ForEachIndex(L.order, a, b, L.perm, [&](const PetscInt *j) {
      PetscInt64 g = 0;
      for (PetscInt k = 0; k < L.order; k++) g += gs[k] * (j[k] - L.lo[k] + L.start[k]);
      double u = UniformFromCounter((uint64_t)seed, (uint64_t)(2 * g)), v = UniformFromCounter((uint64_t)seed, (uint64_t)(2 * g + 1)), val = 0;
      double nrm = std::sqrt(-2.0 * std::log(1.0 - u)) * std::cos(2.0 * M_PI * v);
      switch (type) {
      case DD_INIT_DEFAULT:
        val = bound_default * (2 * u - 1);
        break;
      case DD_INIT_KAIMING_UNIFORM:
        val = gain * std::sqrt(3.0 / fan_in) * (2 * u - 1);
        break;
      case DD_INIT_KAIMING_NORMAL:
        val = gain / std::sqrt((double)fan_in) * nrm;
        break;
      case DD_INIT_XAVIER_UNIFORM:
        val = std::sqrt(6.0 / (fan_in + fan_out)) * (2 * u - 1);
        break;
      case DD_INIT_XAVIER_NORMAL:
        val = std::sqrt(2.0 / (fan_in + fan_out)) * nrm;
        break;
      case DD_INIT_UNIFORM:
        val = scale * (2 * u - 1);
        break;
      case DD_INIT_ZEROS:
        val = 0;
        break;
      }
      arr[LayoutOffset(L, j)] = (T)val;
    });
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h)); /* (increases the state) */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerInitializeParameters - Draws the parameters, identically on any partition for a seed

  Collective

  Input Parameters:
+ layer - a set-up layer
- seed  - the seed (each parameter tensor derives its own stream from it)

  Notes:
  Uses the scheme of `DDLayerSetInitType()`; the default follows PyTorch's defaults.
  Also clears the gradients. `DDLayerSetUp()` calls it with seed 0.

  Level: beginner

.seealso: `DDLayerSetInitType()`
@*/
PetscErrorCode DDLayerInitializeParameters(DDLayer layer, PetscInt64 seed)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled || layer->output, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  if (layer->ops->initparams) PetscCall((*layer->ops->initparams)(layer, seed));
  PetscCall(DDLayerZeroGradients(layer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerSetTraining - Training mode (batch statistics, dropout) or evaluation mode

  Logically collective: a flag that differs between the layer's ranks is an error on every rank
  (one all-reduce; batch normalization's forward sums its statistics over the ranks in training
  only, so ranks in different modes would wait for each other forever)

  Level: beginner

.seealso: `DDLAYERBATCHNORM`, `DDLAYERDROPOUT`, `DDNetSetTraining()`
@*/
PetscErrorCode DDLayerSetTraining(DDLayer layer, PetscBool flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCall(DDCheckSameFlag_Private(PetscObjectComm((PetscObject)layer), flg, "DDLayerSetTraining"));
  layer->training = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerGetTraining - Whether the layer is in training mode

  Not collective

  Level: beginner

.seealso: `DDLayerSetTraining()`
@*/
PetscErrorCode DDLayerGetTraining(DDLayer layer, PetscBool *flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  *flg = layer->training;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerGetNumInputs - Number of inputs the layer was set up with

  Not collective

  Level: intermediate

.seealso: `DDLayerSetUpMulti()`
@*/
PetscErrorCode DDLayerGetNumInputs(DDLayer layer, PetscInt *n)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  *n = layer->nin;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDLayerCheckType_Private(DDLayer l, DDLayerType type, const char fn[])
DD_CXX_TRY
{
  PetscBool match;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(l, DD_LAYER_CLASSID, 1);
  PetscCall(PetscObjectTypeCompare((PetscObject)l, type, &match));
  PetscCheck(match, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONG, "%s() needs a %s layer, this one is %s", fn, type, ((PetscObject)l)->type_name ? ((PetscObject)l)->type_name : "untyped");
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* An integer-array option; keeps its count so that set-up can check it against the dimensions */
PetscErrorCode DDLayerGetArrayOption_Private(PetscOptionItems *PetscOptionsObject, const char opt[], const char text[], const char man[], PetscInt maxn, PetscInt *n, PetscInt v[], PetscBool *set)
DD_CXX_TRY
{
  PetscInt cnt = maxn;

  PetscFunctionBegin;
  PetscCall(PetscOptionsIntArray(opt, text, man, v, &cnt, set));
  if (*set) *n = cnt;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerView - Prints the layer: type, options prefix, input and output shapes, partitions, parameters

  Collective

  Level: beginner

.seealso: `DDLayerCreate()`
@*/
PetscErrorCode DDLayerView(DDLayer layer, PetscViewer viewer)
DD_CXX_TRY
{
  PetscBool iascii;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)layer), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscObjectPrintClassNamePrefixType((PetscObject)layer, viewer));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  if (layer->ops->view) PetscCall((*layer->ops->view)(layer, viewer));
  if (layer->setupcalled) {
    char       s[128], p[128];
    PetscInt64 np;
    PetscCall(DDShapeToString_Private(layer->output->order, layer->output->shape, s, sizeof(s)));
    PetscCall(DDShapeToString_Private(layer->output->part->order, layer->output->part->shape, p, sizeof(p)));
    PetscCall(DDLayerGetNumParameters(layer, &np));
    PetscCall(PetscViewerASCIIPrintf(viewer, "output %s %s on partition %s (%s); %" PetscInt64_FMT " parameters\n", s, DDDataTypes[layer->output->dtype], p, DDTensorFormats[layer->output->format], np));
  }
  {
    const char *bn;
    PetscCall(DDLayerGetBackend(layer, &bn));
    PetscCall(PetscViewerASCIIPrintf(viewer, "backend %s%s\n", bn, layer->backend ? "" : " (the default)"));
  }
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerViewFromOptions - Views the layer if an option asks for it

  Collective

  Level: intermediate

.seealso: `DDLayerView()`
@*/
PetscErrorCode DDLayerViewFromOptions(DDLayer layer, PetscObject obj, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectViewFromOptions((PetscObject)layer, obj, name));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerDestroy - Destroys a layer

  Collective

  Level: beginner

.seealso: `DDLayerCreate()`
@*/
PetscErrorCode DDLayerDestroy(DDLayer *layer)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (!*layer) PetscFunctionReturn(PETSC_SUCCESS);
  PetscValidHeaderSpecific(*layer, DD_LAYER_CLASSID, 1);
  if (--((PetscObject)(*layer))->refct > 0) {
    *layer = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDLayerReset(*layer));
  if ((*layer)->ops->destroy) PetscCall((*(*layer)->ops->destroy)(*layer));
  PetscCall(PetscFree4((*layer)->inhash, (*layer)->setupin, (*layer)->saved, (*layer)->savedstate));
  ddnn::ExchangeForget(*layer);
  PetscCall(PetscHeaderDestroy(layer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------- */

/*@
  DDLayerAdjointTest - Checks Backward against Forward on the layer's linear part (paper 000, eq. 26)

  Collective

  Input Parameters:
+ layer     - a set-up layer that is affine in its inputs (wrt = PETSC_FALSE) or linear in its
              parameters (wrt = PETSC_TRUE): conv, convtranspose, affine, average pooling,
              upsampling, repartition, add, concat, flatten
. wrtparams - test the Jacobian with respect to the parameters instead of the inputs
- seed      - seed of the random vectors

  Output Parameter:
. err - |<J x, y> - <x, J^* y>| / max(||J x|| ||y||, ||x|| ||J^* y||); near 1e-15 in float64

  Notes:
  With respect to the inputs, J x = F(x) - F(0) removes a bias. With respect to the
  parameters, J p = F(p) at fixed random inputs. The layer's parameters and gradients are
  restored afterwards.

  Level: intermediate

.seealso: `DDPrimitiveAdjointTest()`
@*/
PetscErrorCode DDLayerAdjointTest(DDLayer layer, PetscBool wrtparams, PetscInt64 seed, PetscReal *err)
DD_CXX_TRY
{
  PetscInt              n = layer->nin;
  std::vector<DDTensor> xs(n), dxs(n), px, pg, saveP, saveG;
  DDTensor              y, y0, ry;
  PetscReal             a = 0, b = 0, nJx, ny, nx = 0, nJty = 0;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Call DDLayerSetUp() first");
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDTensorDuplicate(layer->setupin[i], &xs[i]));
    PetscCall(DDTensorDuplicate(layer->setupin[i], &dxs[i]));
    PetscCall(DDTensorSetRandomGlobal(xs[i], seed + 17 * i + 1, -1, 1));
  }
  /* keep the parameters and gradients */
  for (PetscInt i = 0; i < layer->nparams; i++) {
    DDTensor p, g;
    PetscCall(DDTensorDuplicate(layer->params[i], &p));
    PetscCall(DDTensorCopy(layer->params[i], p));
    PetscCall(DDTensorDuplicate(layer->grads[i], &g));
    PetscCall(DDTensorCopy(layer->grads[i], g));
    saveP.push_back(p);
    saveG.push_back(g);
  }
  PetscCall(DDLayerCreateOutput(layer, &y));
  PetscCall(DDLayerCreateOutput(layer, &y0));
  PetscCall(DDLayerCreateOutput(layer, &ry));
  PetscCall(DDTensorSetRandomGlobal(ry, seed + 7, -1, 1));
  if (!wrtparams) {
    std::vector<DDTensor> zs(n);
    for (PetscInt i = 0; i < n; i++) {
      PetscCall(DDTensorDuplicate(layer->setupin[i], &zs[i]));
      PetscCall(DDTensorZeroEntries(zs[i]));
    }
    PetscCall(DDLayerForwardMulti(layer, n, zs.data(), y0));
    PetscCall(DDLayerForwardMulti(layer, n, xs.data(), y));
    PetscCall(DDTensorAXPY(y, -1.0, y0));
    PetscCall(DDLayerZeroGradients(layer));
    PetscCall(DDLayerBackwardMulti(layer, ry, n, dxs.data()));
    for (PetscInt i = 0; i < n; i++) {
      PetscReal t;
      PetscCall(DDTensorDot(xs[i], dxs[i], &t));
      b += t;
      PetscCall(DDTensorDot(xs[i], xs[i], &t));
      nx += t;
      PetscCall(DDTensorDot(dxs[i], dxs[i], &t));
      nJty += t;
      PetscCall(DDTensorDestroy(&zs[i]));
    }
  } else {
    for (PetscInt i = 0; i < layer->nparams; i++) PetscCall(DDTensorSetRandomGlobal(layer->params[i], seed + 31 * i + 3, -1, 1));
    PetscCall(DDLayerForwardMulti(layer, n, xs.data(), y));
    PetscCall(DDLayerZeroGradients(layer));
    PetscCall(DDLayerBackwardMulti(layer, ry, n, NULL));
    for (PetscInt i = 0; i < layer->nparams; i++) {
      PetscReal t;
      PetscCall(DDTensorDot(layer->params[i], layer->grads[i], &t));
      b += t;
      PetscCall(DDTensorDot(layer->params[i], layer->params[i], &t));
      nx += t;
      PetscCall(DDTensorDot(layer->grads[i], layer->grads[i], &t));
      nJty += t;
    }
  }
  PetscCall(DDTensorDot(y, ry, &a));
  PetscCall(DDTensorDot(y, y, &nJx));
  PetscCall(DDTensorDot(ry, ry, &ny));
  {
    PetscReal den = PetscMax(PetscSqrtReal(nJx * ny), PetscSqrtReal(nx * nJty));
    *err          = den > 0 ? PetscAbsReal(a - b) / den : PetscAbsReal(a - b);
  }
  for (PetscInt i = 0; i < layer->nparams; i++) {
    PetscCall(DDTensorCopy(saveP[i], layer->params[i]));
    PetscCall(DDTensorCopy(saveG[i], layer->grads[i]));
    PetscCall(DDTensorDestroy(&saveP[i]));
    PetscCall(DDTensorDestroy(&saveG[i]));
  }
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDTensorDestroy(&xs[i]));
    PetscCall(DDTensorDestroy(&dxs[i]));
  }
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDTensorDestroy(&y0));
  PetscCall(DDTensorDestroy(&ry));
  PetscCall(DDLayerReleaseSaved(layer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
