/*
  DDNet: a directed acyclic graph of layers, evaluated in insertion order, with gradients
  accumulated over the consumers of every tensor in the backward sweep.
*/
#include <ddnn/private/ddnetimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <ddmodel.h>
#include <sys/ddsysimpl.h>
#include <tensor/layout.hpp>
#include <primitive/sfutil.hpp>
#include <petsctime.h>
#include <cmath>
#include <string>
#include <vector>
#include <new>
#include <stdexcept>
#include <map>
#include <sys/ddcxx.hpp>

using ddnn::NetImpl;
using Node = ddnn::NetNode;

PetscClassId DD_NET_CLASSID;

PetscErrorCode DDNetInitializePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Net", &DD_NET_CLASSID));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetCreate - Creates an empty network

  Collective

  Output Parameter:
. net - the network; add layers with `DDNetAddLayer()` or `DDNetSetFromOptions()`

  Level: beginner

.seealso: `DDNetAddLayer()`, `DDNetSetFromOptions()`, `DDNetSetUp()`
@*/
PetscErrorCode DDNetCreate(MPI_Comm comm, DDNet *net)
DD_CXX_TRY
{
  DDNet n;

  PetscFunctionBegin;
  PetscValidPointer(net, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(n, DD_NET_CLASSID, "DDNet", "Network of distributed layers", "DDNet", comm, DDNetDestroy, DDNetView));
  n->impl = new NetImpl;
  *net    = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetSetOptionsPrefix - Prefix of the network's options (-net_...)

  Logically collective

  Level: intermediate

.seealso: `DDNetSetFromOptions()`
@*/
PetscErrorCode DDNetSetOptionsPrefix(DDNet net, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectSetOptionsPrefix((PetscObject)net, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetSetInputNames - Names of the network's inputs (e.g. "x", "target")

  Logically collective

  Options Database Key:
. -net_inputs <a,b,...> - the names

  Level: beginner

.seealso: `DDNetAddLayer()`
@*/
PetscErrorCode DDNetSetInputNames(DDNet net, PetscInt n, const char *const names[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(!net->impl->nodes.size(), PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Name the inputs before adding layers");
  PetscCheck(n >= 0, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "%" PetscInt_FMT " input names", n);
  net->impl->innames.clear();
  for (PetscInt i = 0; i < n; i++) {
    PetscCheck(names[i] && names[i][0], PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_NULL, "Input name %" PetscInt_FMT " is NULL or empty", i);
    for (PetscInt j = 0; j < i; j++) PetscCheck(std::string(names[j]) != names[i], PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONG, "Inputs %" PetscInt_FMT " and %" PetscInt_FMT " are both named \"%s\": a network's input names are unique", j, i, names[i]);
    net->impl->innames.push_back(names[i]);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDNetFind(DDNet net, const std::string &name, int *idx)
{
  NetImpl *I = net->impl;

  PetscFunctionBegin;
  for (size_t i = 0; i < I->innames.size(); i++)
    if (I->innames[i] == name) {
      *idx = -1 - (int)i;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  for (size_t i = 0; i < I->nodes.size(); i++)
    if (I->nodes[i].name == name) {
      *idx = (int)i;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  *idx = INT32_MIN;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDNetAddLayer - Appends a layer fed by named inputs

  Collective

  Input Parameters:
+ net     - the network
. layer   - the layer (the network takes a reference)
. name    - its name, unique in the network
. n       - number of inputs
- inputs  - names of network inputs or of earlier layers (n = 0: the previous layer, or the
            first network input for the first layer)

  Notes:
  Layers are evaluated in the order they are added, so every input must be added before
  its consumers (a topological order). A tensor may feed several layers (skip connections), or
  one layer twice (concat(a, a)); the backward sweep sums their gradients. A layer object is one
  node: adding it again is an error (weights are not shared between nodes).

  Level: beginner

.seealso: `DDNetSetInputNames()`, `DDNetSetFromOptions()`
@*/
PetscErrorCode DDNetAddLayer(DDNet net, DDLayer layer, const char name[], PetscInt n, const char *const inputs[])
DD_CXX_TRY
{
  NetImpl *I = net->impl;
  Node     node;
  int      idx;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 2);
  PetscCall(DDNetFind(net, name, &idx));
  PetscCheck(idx == INT32_MIN, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONG, "The network already has an input or layer named \"%s\"", name);
  for (auto &other : I->nodes) PetscCheck(other.layer != layer, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONG, "Layer \"%s\": this layer object is already the network's layer \"%s\"; a layer is one node of the network (its weights are not shared): create another layer", name, other.name.c_str());
  node.name = name;
  if (n == 0) {
    if (I->nodes.empty()) {
      PetscCheck(!I->innames.empty(), PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Layer \"%s\" has no input: name the network's inputs first (DDNetSetInputNames() or -net_inputs)", name);
      node.inputs.push_back(-1);
    } else node.inputs.push_back((int)I->nodes.size() - 1);
  }
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDNetFind(net, inputs[i], &idx));
    PetscCheck(idx != INT32_MIN, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONG, "Layer \"%s\" takes input \"%s\", which is neither a network input nor an earlier layer", name, inputs[i]);
    node.inputs.push_back(idx);
  }
  PetscCall(PetscObjectReference((PetscObject)layer));
  node.layer = layer;
  I->nodes.push_back(node);
  net->setupcalled = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetSetOutput - The layer whose output is the network's output (default: the last one)

  Logically collective

  Notes:
  NULL or "" takes the last layer. A set-up network given another output must be set up again.

  Options Database Key:
. -net_output <name> - the layer

  Level: intermediate

.seealso: `DDNetGetOutput()`
@*/
PetscErrorCode DDNetSetOutput(DDNet net, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  const std::string o = name ? name : ""; /* NULL or "": the last layer */
  if (o != net->impl->outname) net->setupcalled = PETSC_FALSE; /* the output is found at set-up */
  net->impl->outname = o;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* A comma-separated list option, any length (PETSc's string-array options stop silently at the
   caller's array size: a 9th input, a 65th network input or a 257th layer would be dropped) */
static PetscErrorCode DDNetGetListOption(const char prefix[], const char name[], std::vector<std::string> &list, PetscBool *set)
{
  const char *value = NULL;

  PetscFunctionBegin;
  list.clear();
  PetscCall(PetscOptionsFindPair(NULL, prefix, name, &value, set));
  if (!*set || !value) PetscFunctionReturn(PETSC_SUCCESS);
  std::string v(value);
  size_t      a = 0;
  while (a <= v.size()) {
    size_t b = v.find(',', a);
    if (b == std::string::npos) b = v.size();
    if (b > a) list.push_back(v.substr(a, b - a));
    a = b + 1;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* room left in PETSc's option names (PETSC_MAX_OPTION_NAME) for a layer's own keys after its prefix */
#define DD_NET_OPTION_KEY_ROOM 64

/*@
  DDNetSetFromOptions - Builds the network from the options database (or a YAML options file)

  Collective

  Options Database Keys:
+ -net_inputs <x,target> - names of the network's inputs
. -net_layers <a,b,...> - the layers, in evaluation order; layer a is configured by the options
                          with prefix a_ (-a_layer_type conv -a_layer_conv_kernel 3,3 ...)
. -<layer>_layer_inputs <p,q> - a layer's inputs (default: the previous layer)
. -net_output <name> - the output layer (default: the last)
. -dd_check_finite - check every layer's output and gradients for nan/inf (`DDNetSetCheckFinite()`)
. -net_distribution <given,auto> - the layers' distribution (`DDNetSetDistribution()`)
. -net_memory_limit <bytes> - memory per rank for the automatic distribution (`DDNetSetMemoryLimit()`)
. -net_weights <broadcast,replicated,auto,dataparallel> - broadcast the weights every call, keep replicas, update the replicas where they live, or the mode of the shortest predicted step (`DDNetSetWeightMode()`)
. -net_weights_check <every> - data-parallel: compare the replicas with their parameters every this many optimizer steps (`DDNetSetWeightCheckInterval()`)
. -net_weights_bucket_mb <mb> - replicated and data-parallel: cut the gradient sums into buckets of at most this size, each started during the backward (`DDNetSetWeightBucketSize()`)
- -net_view - view the network after set-up

  Notes:
  Lists (inputs, layers, a layer's inputs) have no length limit; a layer's options prefix must
  fit in PETSc's option names (PETSC_MAX_OPTION_NAME) with room for its keys, or set-up stops
  with an error naming the limit. Integer options with the network's prefix that overflow a
  `PetscInt` are errors (`DDOptionsCheckIntegers()`).

  Layers already added in code come first. An options file given with -options_file, or a
  YAML file with -options_file_yaml, can hold a whole network (see share/ddnn/).

  Level: beginner

.seealso: `DDNetAddLayer()`, `DDLayerSetFromOptions()`
@*/
PetscErrorCode DDNetSetFromOptions(DDNet net)
DD_CXX_TRY
{
  PetscBool                flg, haslayers;
  const char              *prefix;
  std::vector<std::string> innames, names;
  char                     out[PETSC_MAX_OPTION_NAME];
  MPI_Comm                 comm;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  comm = PetscObjectComm((PetscObject)net);
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)net, &prefix));
  PetscObjectOptionsBegin((PetscObject)net);
  PetscCall(DDNetGetListOption(prefix, "-net_inputs", innames, &flg));
  if (flg) {
    std::vector<const char *> p;
    for (auto &x : innames) p.push_back(x.c_str());
    PetscCall(DDNetSetInputNames(net, (PetscInt)p.size(), p.data()));
  }
  PetscCall(DDNetGetListOption(prefix, "-net_layers", names, &haslayers));
  PetscCall(PetscOptionsString("-net_output", "Output layer", "DDNetSetOutput", net->impl->outname.c_str(), out, sizeof(out), &flg));
  if (flg) PetscCall(DDNetSetOutput(net, out));
  PetscCall(PetscOptionsBool("-dd_check_finite", "Check every layer's output and gradients for nan/inf", "DDNetSetCheckFinite", net->impl->checkfinite ? PETSC_TRUE : PETSC_FALSE, &flg, NULL));
  net->impl->checkfinite = flg ? true : false;
  PetscCall(PetscOptionsBool("-net_layer_timing", "Time every layer's forward and backward as the network runs them (DDNetGetLayerTimes(), DDNetView())", "DDNetSetLayerTiming", net->impl->layertiming ? PETSC_TRUE : PETSC_FALSE, &flg, NULL));
  PetscCall(DDNetSetLayerTiming(net, flg));
  {
    PetscEnum  d   = (PetscEnum)net->impl->distribution;
    PetscReal  lim = (PetscReal)net->impl->memlimit;
    PetscCall(PetscOptionsEnum("-net_distribution", "Distribution of the layers: given (inherited from the inputs and the user's repartitions) or auto (chosen by the performance model)", "DDNetSetDistribution", DDNetDistributions, d, &d, &flg));
    if (flg) PetscCall(DDNetSetDistribution(net, (DDNetDistribution)d));
    PetscCall(PetscOptionsReal("-net_memory_limit", "Memory per rank the automatic distribution may plan for (bytes; 0: no limit)", "DDNetSetMemoryLimit", lim, &lim, &flg));
    if (flg) {
      PetscCheck(!PetscIsInfOrNanReal(lim) && lim >= 0 && lim < 9.2e18 && lim == PetscFloorReal(lim), comm, PETSC_ERR_ARG_OUTOFRANGE, "-%snet_memory_limit %g must be a whole number of bytes >= 0 (0: no limit)", prefix ? prefix : "", (double)lim);
      PetscCall(DDNetSetMemoryLimit(net, (PetscInt64)lim));
    }
  }
  {
    PetscEnum m = (PetscEnum)net->impl->weightmode;
    PetscCall(PetscOptionsEnum("-net_weights", "Weights broadcast on every call; replicas kept and gradients summed once per backward; replicas updated by the optimizer where they live (data-parallel); or the one the performance model predicts fastest", "DDNetSetWeightMode", DDNetWeightModes, m, &m, &flg));
    if (flg) PetscCall(DDNetSetWeightMode(net, (DDNetWeightMode)m));
    PetscInt every = net->impl->weightcheck;
    PetscCall(PetscOptionsInt("-net_weights_check", "Data-parallel weights: check the replicas against their parameters every this many optimizer steps (0: never)", "DDNetSetWeightCheckInterval", every, &every, &flg));
    if (flg) PetscCall(DDNetSetWeightCheckInterval(net, every));
    PetscReal mb = net->impl->bucketmb;
    PetscCall(PetscOptionsReal("-net_weights_bucket_mb", "Replicated and data-parallel weights: the largest gradient bucket in MiB, its all-reduce started during the backward (0: one bucket per worker group, summed at the end)", "DDNetSetWeightBucketSize", mb, &mb, &flg));
    if (flg) PetscCall(DDNetSetWeightBucketSize(net, mb));
  }
  PetscOptionsEnd();
  {
    std::string np = std::string(prefix ? prefix : "") + "net_";
    PetscCall(DDOptionsCheckIntegers(comm, np.c_str()));
  }
  if (!haslayers) names.clear();
  { /* before any per-layer collective call: the lists must agree on every rank */
    std::string v = "inputs";
    for (auto &x : innames) v += " " + x;
    v += "\nlayers";
    for (auto &x : names) v += " " + x;
    PetscCall(DDCheckSameString(comm, "The network's -net_inputs or -net_layers", v.c_str()));
  }
  for (auto &name : names) {
    DDLayer                  l;
    std::vector<std::string> ins;
    std::vector<const char *> pins;
    PetscBool                has;
    std::string              lp = std::string(prefix ? prefix : "") + name + "_";
    PetscCheck(lp.size() + DD_NET_OPTION_KEY_ROOM < PETSC_MAX_OPTION_NAME, comm, PETSC_ERR_ARG_OUTOFRANGE, "Layer name \"%.40s...\" (%zu characters) is too long: with the network's prefix its options prefix must stay under %d characters (PETSC_MAX_OPTION_NAME %d less %d for the option keys)", name.c_str(), name.size(), PETSC_MAX_OPTION_NAME - DD_NET_OPTION_KEY_ROOM, PETSC_MAX_OPTION_NAME, DD_NET_OPTION_KEY_ROOM);
    PetscCall(DDLayerCreate(comm, &l));
    PetscCall(DDLayerSetOptionsPrefix(l, lp.c_str()));
    PetscCall(DDLayerSetFromOptions(l));
    PetscCall(DDNetGetListOption(lp.c_str(), "-layer_inputs", ins, &has));
    for (auto &x : ins) pins.push_back(x.c_str());
    PetscCall(DDNetAddLayer(net, l, name.c_str(), (PetscInt)pins.size(), pins.data()));
    PetscCall(DDLayerDestroy(&l));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetSetCheckFinite - Checks every layer's output (in `DDNetForward()`) and every input and
  parameter gradient (in `DDNetBackward()`) for nan and inf

  Logically collective: a flag that differs between ranks is an error on every rank

  Input Parameters:
+ net - the network
- flg - `PETSC_TRUE` to check

  Options Database Key:
. -dd_check_finite - check (with the network's prefix, if any)

  Notes:
  The check is collective: every rank learns whether any rank holds a non-finite value, and
  every rank stops with an error naming the step (the `DDNetForward()` call since set-up), the
  layer (its name, type and options prefix) and the tensor (its output, the gradient of its
  input i, or the gradient of its parameter "weight"). It costs one pass over every tensor and
  one `MPI_Allreduce()` per layer and direction. Without it, `DDNetTrainEpoch()` still checks
  the loss of every step.

  Level: intermediate

.seealso: `DDNetForward()`, `DDNetBackward()`, `DDNetTrainEpoch()`
@*/
PetscErrorCode DDNetSetCheckFinite(DDNet net, PetscBool flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(DDCheckSameFlag_Private(PetscObjectComm((PetscObject)net), flg, "DDNetSetCheckFinite"));
  net->impl->checkfinite = flg ? true : false;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetSetLayerTiming - Times every layer's forward and backward as `DDNetForward()` and `DDNetBackward()` run them

  Logically collective

  Input Parameters:
+ net - the network
- flg - `PETSC_TRUE` to time

  Options Database Key:
. -net_layer_timing - time (with the network's prefix, if any)

  Notes:
  Each layer's `DDLayerForwardMulti()` and `DDLayerBackwardMulti()` inside the network's sweeps is
  timed by the wall clock on every rank: its kernels, its primitives' exchanges and the waits at
  them, in the cache state the previous layers leave, as a step runs it. The network's own work
  between layers (the sum of the gradients of a tensor with several consumers, the replicated
  weights' collectives, the finite checks of `-dd_check_finite`) is in no layer's time.
  `DDNetGetLayerTimes()` returns the last sweep's times and `DDNetView()` prints them beside the
  performance model's predictions. A layer fused with its producer (`-net_fuse`) runs its forward
  inside the producer's kernel: the producer's time holds both. Timing costs two clock readings
  per layer and direction. Turning it off or on forgets the times taken so far.

  Level: intermediate

.seealso: `DDNetGetLayerTimes()`, `DDNetGetLayerModelTime()`, `DDNetView()`
@*/
PetscErrorCode DDNetSetLayerTiming(DDNet net, PetscBool flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  if (net->impl->layertiming != (flg ? true : false))
    for (auto &nd : net->impl->nodes) nd.tfwd = nd.tbwd = -1;
  net->impl->layertiming = flg ? true : false;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetLayerTimes - The wall times of a layer's last forward and backward as the network ran them, on this rank

  Not collective

  Input Parameters:
+ net - the network, with `DDNetSetLayerTiming()` on
- i   - the layer's index (`DDNetGetLayerByIndex()`)

  Output Parameters:
+ fwd - seconds of its forward in the last `DDNetForward()` (NULL if not wanted), -1 if it has
        not run since timing began
- bwd - seconds of its backward in the last `DDNetBackward()` that ran it (NULL if not wanted),
        -1 if none has since timing began (a layer upstream of no parameter and no requested
        input gradient is skipped by the backward)

  Notes:
  Errors if timing is off or the index is out of range. The times are this rank's; the slowest
  rank's is an `MPI_Allreduce()` with `MPI_MAX` away.

  Level: intermediate

.seealso: `DDNetSetLayerTiming()`, `DDNetGetLayerModelTime()`
@*/
PetscErrorCode DDNetGetLayerTimes(DDNet net, PetscInt i, PetscReal *fwd, PetscReal *bwd)
DD_CXX_TRY
{
  NetImpl *I;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  I = net->impl;
  PetscCheck(I->layertiming, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "DDNetGetLayerTimes(): layer timing is off; turn it on with DDNetSetLayerTiming() or -net_layer_timing before the steps");
  PetscCheck(i >= 0 && i < (PetscInt)I->nodes.size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "DDNetGetLayerTimes(): layer %" PetscInt_FMT " does not exist (the network has %zu)", i, I->nodes.size());
  if (fwd) *fwd = (PetscReal)I->nodes[i].tfwd;
  if (bwd) *bwd = (PetscReal)I->nodes[i].tbwd;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Collective over the network: an error on every rank when one of ts holds a nan or inf on some rank */
static PetscErrorCode DDNetCheckFinite(DDNet net, const Node &nd, const std::vector<DDTensor> &ts, const std::vector<std::string> &what)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)net);
  PetscMPIInt rank, size;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  /* flags: bitwise or; the lowest rank that holds one: minimum */
  std::vector<int> fl(ts.size()), rk(ts.size()), flo(ts.size()), rko(ts.size());
  for (size_t i = 0; i < ts.size(); i++) {
    PetscCall(DDTensorFiniteFlags_Private(ts[i], &fl[i]));
    rk[i] = fl[i] ? rank : size;
  }
  if (!ts.empty()) {
    PetscCallMPI(MPI_Allreduce(fl.data(), flo.data(), (int)ts.size(), MPI_INT, MPI_BOR, comm));
    PetscCallMPI(MPI_Allreduce(rk.data(), rko.data(), (int)ts.size(), MPI_INT, MPI_MIN, comm));
  }
  for (size_t i = 0; i < ts.size(); i++) {
    const char *pfx = ((PetscObject)nd.layer)->prefix;
    PetscCheck(!flo[i], comm, PETSC_ERR_FP, "Non-finite value (%s) in %s of layer \"%s\" (%s%s%s) at step %" PetscInt64_FMT " (DDNetForward() call since set-up), first on rank %d", flo[i] == 1 ? "nan" : flo[i] == 2 ? "inf" : "nan and inf", what[i].c_str(), nd.name.c_str(), ((PetscObject)nd.layer)->type_name, pfx ? ", prefix " : "", pfx ? pfx : "", net->impl->step, rko[i]);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDNetInputsOf(DDNet net, const Node &node, const std::vector<DDTensor> &xin, std::vector<DDTensor> &xs)
{
  NetImpl *I = net->impl;

  PetscFunctionBegin;
  xs.clear();
  for (int k : node.inputs) {
    if (k < 0) xs.push_back(xin[-1 - k]);
    else xs.push_back(I->nodes[k].layer->output);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDNetFreeGradients(NetImpl *I)
{
  PetscFunctionBegin;
  for (auto &nd : I->nodes) PetscCall(DDTensorDestroy(&nd.dy));
  for (auto &t : I->scratch) PetscCall(DDTensorDestroy(&t));
  for (auto &t : I->ingrads) PetscCall(DDTensorDestroy(&t));
  I->scratch.clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the clauses a C++ exception's message gets beneath a network's set-up, forward and backward */
static void DescribeNetSetUp(const void *ctx, char buf[], size_t len)
{
  const char *pre = ((PetscObject)ctx)->prefix;
  snprintf(buf, len, "in DDNetSetUp() of the network \"%s\"", pre && pre[0] ? pre : "(no prefix)");
}
template <bool forward>
static void DescribeRun(const void *ctx, char buf[], size_t len)
{
  const Node *nd   = (const Node *)ctx;
  const char *type = ((PetscObject)nd->layer)->type_name ? ((PetscObject)nd->layer)->type_name : "no type";
  snprintf(buf, len, "while running the %s of layer \"%s\" (%s) in %s()", forward ? "forward" : "backward", nd->name.c_str(), type, forward ? "DDNetForward" : "DDNetBackward");
}

/* Sets up one layer; an error also names the layer (its own message may not: the traceback shows which).
   C++ exceptions of a layer's set-up are turned into PETSc errors by DDLayerSetUpMulti(). */
static PetscErrorCode DDNetLayerSetUp(Node &nd, std::vector<DDTensor> &ins)
{
  PetscErrorCode ierr;
  const char    *type = ((PetscObject)nd.layer)->type_name ? ((PetscObject)nd.layer)->type_name : "no type";

  PetscFunctionBegin;
  ierr = DDLayerSetUpMulti(nd.layer, (PetscInt)ins.size(), ins.data());
  if (ierr) (void)(*PetscErrorPrintf)("while setting up layer \"%s\" (%s) of the network\n", nd.name.c_str(), type);
  PetscCall(ierr);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  a repartition inserted by -net_distribution auto before a multi-input layer moves its input onto
  the partition of that layer's input 0; a tensor of one dimension fewer (the class indices (N, ...)
  of a cross-entropy's logits (N, C, ...)) onto that partition without its dimension 1, whose
  workers keep their numbering (the class dimension on one worker, as cross-entropy requires)
*/
static PetscErrorCode NetAutoMatch(DDNet net, Node &nd, std::vector<DDTensor> &xin)
{
  NetImpl *I    = net->impl;
  int      k    = I->nodes[nd.automatch].inputs[0], src = nd.inputs[0];
  DDTensor in0  = k < 0 ? xin[-1 - k] : I->nodes[k].layer->output;
  DDTensor move = src < 0 ? xin[-1 - src] : I->nodes[src].layer->output;

  PetscFunctionBegin;
  if (move->order == in0->order - 1 && in0->order >= 2) {
    DDPartition           P = in0->part, Q;
    std::vector<PetscInt> ps;
    PetscCheck(P->shape[1] == 1, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_INCOMP, "-net_distribution auto: layer \"%s\" takes a tensor of order %" PetscInt_FMT " beside its input 0 of order %" PetscInt_FMT ", whose partition splits dimension 1 over %" PetscInt_FMT " workers: there is no partition of the smaller tensor that matches it", I->nodes[nd.automatch].name.c_str(), move->order, in0->order, P->shape[1]);
    for (PetscInt j = 0; j < P->order; j++)
      if (j != 1) ps.push_back(P->shape[j]);
    PetscCall(DDPartitionCreateCartesian(PetscObjectComm((PetscObject)net), (PetscInt)ps.size(), ps.data(), P->size, P->ranks, &Q));
    PetscCall(DDLayerRepartitionSetPartition(nd.layer, Q));
    PetscCall(DDPartitionDestroy(&Q));
  } else PetscCall(DDLayerRepartitionSetPartition(nd.layer, in0->part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Conv/affine + activation fusion (-net_fuse, default on), between the two set-up passes: a relu,
  tanh or sigmoid layer whose only input is a convolution's or a dense (affine) layer's output,
  which feeds nothing else and is not the network's output, on the same backend and laid out
  exactly alike after the first pass (partition, format and halo: a halo that only the
  activation's output needs would make the convolution's kernel stage its output through a copy,
  which is what the fusion saves), is marked fused with it: the producer then writes act(v) (a
  oneDNN post-op of the convolution in float32, or in place after its kernel) and the activation's
  output views that storage, so its Forward does nothing; its Backward reads f'(v) from act(v)
  (relu's mask, 1 - y^2, y (1 - y)). Every other activation, convolution and dense layer is
  unmarked. The second pass sets the pairs up so.
*/
static PetscErrorCode NetFuseActivations(DDNet net)
{
  NetImpl  *I   = net->impl;
  PetscBool fuse = PETSC_TRUE;

  PetscFunctionBegin;
  PetscCall(PetscOptionsGetBool(NULL, ((PetscObject)net)->prefix, "-net_fuse", &fuse, NULL));
  std::vector<bool>     fused(I->nodes.size(), false);
  std::vector<PetscInt> act(I->nodes.size(), -1); /* a producer's fused activation */
  for (size_t i = 0; i < I->nodes.size() && fuse; i++) {
    Node     &a = I->nodes[i];
    PetscBool isact, isconv;
    PetscCall(PetscObjectTypeCompare((PetscObject)a.layer, DDLAYERACTIVATION, &isact));
    if (!isact || a.inputs.size() != 1 || a.inputs[0] < 0) continue;
    const int k = a.inputs[0];
    Node     &c = I->nodes[k];
    PetscBool isaffine;
    PetscCall(PetscObjectTypeCompare((PetscObject)c.layer, DDLAYERCONV, &isconv));
    PetscCall(PetscObjectTypeCompare((PetscObject)c.layer, DDLAYERAFFINE, &isaffine));
    if ((!isconv && !isaffine) || c.consumers != 1 || k == I->output || fused[k]) continue;
    DDActivationType t;
    DDBackend        ba, bc;
    PetscCall(DDLayerActivationGetType(a.layer, &t));
    PetscCall(DDLayerGetBackend_Private(a.layer, &ba));
    PetscCall(DDLayerGetBackend_Private(c.layer, &bc));
    DDTensor ya = a.layer->output, yc = c.layer->output;
    if ((t != DD_ACT_RELU && t != DD_ACT_TANH && t != DD_ACT_SIGMOID) || ba != bc || ya->layouthash != yc->layouthash || ya->dtype != yc->dtype || ya->memtype != DD_MEMTYPE_HOST || yc->memtype != DD_MEMTYPE_HOST) continue;
    fused[i] = fused[k] = true;
    act[k]   = (PetscInt)t;
  }
  for (size_t i = 0; i < I->nodes.size(); i++) {
    DDLayer   l = I->nodes[i].layer;
    PetscBool isact, isconv, isaffine;
    PetscCall(PetscObjectTypeCompare((PetscObject)l, DDLAYERACTIVATION, &isact));
    PetscCall(PetscObjectTypeCompare((PetscObject)l, DDLAYERCONV, &isconv));
    PetscCall(PetscObjectTypeCompare((PetscObject)l, DDLAYERAFFINE, &isaffine));
    if (isact) PetscTryMethod(l, "DDLayerActivationSetFused_C", (DDLayer, PetscBool), (l, fused[i] ? PETSC_TRUE : PETSC_FALSE));
    if (isconv) PetscTryMethod(l, "DDLayerConvSetFusedActivation_C", (DDLayer, PetscInt), (l, fused[i] ? act[i] : -1));
    if (isaffine) PetscTryMethod(l, "DDLayerAffineSetFusedActivation_C", (DDLayer, PetscInt), (l, fused[i] ? act[i] : -1));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The two set-up passes over the current graph (also the trial set-ups of the automatic distribution) */
PetscErrorCode ddnn::NetSetUpLayers_Private(DDNet net, std::vector<DDTensor> &xin)
{
  NetImpl              *I    = net->impl;
  MPI_Comm              comm = PetscObjectComm((PetscObject)net);
  std::vector<DDTensor> ins;

  PetscFunctionBegin;
  /* consumers of every node, and the output */
  for (auto &nd : I->nodes) nd.consumers = 0;
  for (auto &nd : I->nodes)
    for (int k : nd.inputs)
      if (k >= 0) I->nodes[k].consumers++;
  I->output = (int)I->nodes.size() - 1;
  if (!I->outname.empty()) {
    int idx;
    PetscCall(DDNetFind(net, I->outname, &idx));
    PetscCheck(idx >= 0, comm, PETSC_ERR_ARG_WRONG, "The network output \"%s\" is not a layer", I->outname.c_str());
    I->output = idx;
  }
  /* pass 1: discover the halos every tensor needs */
  {
    ddnn::PricingNoPlansGuard noplans(true); /* in a pricing-only set-up (src/net/distribution.cxx): no exchanges, pass 2 prices them */
    for (auto &nd : I->nodes) {
      PetscCall(DDLayerSetOutputHalo_Private(nd.layer, NULL, NULL));
      PetscCall(DDNetInputsOf(net, nd, xin, ins));
      if (nd.automatch >= 0) PetscCall(NetAutoMatch(net, nd, xin));
      PetscCall(DDNetLayerSetUp(nd, ins));
    }
  }
  /* pass 2: outputs created with their final halos */
  std::vector<std::vector<PetscInt>> lo(I->nodes.size()), hi(I->nodes.size());
  for (size_t i = 0; i < I->nodes.size(); i++) {
    lo[i].assign(DD_MAX_DIM, 0);
    hi[i].assign(DD_MAX_DIM, 0);
    PetscCall(DDTensorGetHalo(I->nodes[i].layer->output, lo[i].data(), hi[i].data()));
  }
  PetscCall(NetFuseActivations(net));
  for (size_t i = 0; i < I->nodes.size(); i++) {
    Node &nd = I->nodes[i];
    PetscCall(DDLayerSetOutputHalo_Private(nd.layer, lo[i].data(), hi[i].data()));
    PetscCall(DDNetInputsOf(net, nd, xin, ins));
    if (nd.automatch >= 0) PetscCall(NetAutoMatch(net, nd, xin));
    PetscCall(DDNetLayerSetUp(nd, ins));
  }
  for (auto &nd : I->nodes) {
    PetscCall(DDNetInputsOf(net, nd, xin, ins));
    for (size_t k = 0; k < ins.size(); k++) PetscCheck(ins[k]->layouthash == nd.layer->inhash[k], comm, PETSC_ERR_PLIB, "Layouts did not settle for layer \"%s\" input %zu", nd.name.c_str(), k);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDNetSetUp - Sets every layer up for inputs laid out like the given tensors

  Collective

  Input Parameters:
+ net - the network
. n   - number of network inputs
- xs  - tensors laid out as the inputs will be

  Notes:
  Runs two passes: the first discovers every tensor's final halo (all its consumers' needs),
  the second sets the layers up with their outputs created with those halos, so that no
  consumer's communication plan is invalidated by another's. Then initializes the parameters
  (seed -net_seed, default 0) identically on any partition, and with -net_load_weights loads
  them (and the buffers) from a weights file: set-up is where the partitioned tensors exist, so the
  file is read there rather than in `DDNetSetFromOptions()`.

  Every rank must hold the same graph (inputs, layers, connections): a difference, such as
  an option given to some ranks only, is an error naming the ranks and the first difference.

  Calling it again on a set-up network (other inputs, another distribution) starts afresh: new
  parameter tensors, initialized again. An optimizer set up with the previous ones must be set up
  again with `DDNetGetParameters()`; stepping it is an error, not a silent update of tensors the
  network no longer uses. To keep trained weights across a new set-up, save them first
  (`DDNetSaveWeights()`, `DDCheckpointSave()`) and load them after.

  With `DD_NET_DISTRIBUTION_AUTO` (`DDNetSetDistribution()`, -net_distribution auto) set-up first
  chooses the partition of every layer with weights by the performance model and inserts the
  repartition layers (paper 003 sec. V-C; see `DDNetSetDistribution()`); given mode removes them again.

  Conv/affine + activation fusion (-net_fuse, default on): a relu, tanh or sigmoid layer whose
  input is a convolution's or a dense (affine) layer's output that feeds nothing else (and is not
  the network's output), on the same backend and laid out alike (partition, format, halo), is fused
  with it: the producer writes act(v) (in place after its kernel, with the activation layer's own
  kernel; with -dd_dnnl_eltwise_postop a convolution on /cpu/dnnl computes it in oneDNN's eltwise
  post-op instead) and the activation layer's output views the producer's output, so that the
  activation needs no output of its own and its forward does nothing, and its backward computes
  f'(v) from act(v) (tanh: 1 - y^2, no tanh evaluated). Outputs, loss and gradients are those of
  the unfused network, nan and inf included (with -dd_dnnl_eltwise_postop: oneDNN's relu turns a
  nan into 0, and its tanh and sigmoid differ from ours in the last bits).
  `DDNetGetLayerOutput()` of such a producer then gives act(v), the activation layer's output.

  Options Database Keys:
+ -net_seed <s> - seed of the parameters
. -net_load_weights <file.h5> - then load the parameters and buffers from a PyTorch state_dict in HDF5 (`DDNetLoadWeights()`)
. -dd_check_finite - check outputs and gradients for nan/inf (`DDNetSetCheckFinite()`)
. -net_fuse <bool> - fuse relu, tanh and sigmoid layers into the convolutions and dense layers that feed them (default true)
. -dd_dnnl_eltwise_postop <bool> - a convolution on /cpu/dnnl computes a fused relu, tanh or sigmoid in oneDNN's post-op (float32; default false: its relu turns nan into 0)
- -net_view - view the network

  Level: beginner

.seealso: `DDNetForward()`, `DDNetBackward()`
@*/
PetscErrorCode DDNetSetUp(DDNet net, PetscInt n, DDTensor xs[])
DD_CXX_TRY
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);
  PetscInt64 seed = 0;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  ddnn::CxxErrorContext context(DescribeNetSetUp, net); /* a C++ exception beneath names the network */
  PetscCheck(!I->nodes.empty(), comm, PETSC_ERR_ARG_WRONGSTATE, "The network has no layers (DDNetAddLayer() or -net_layers)");
  PetscCheck(n == (PetscInt)I->innames.size(), comm, PETSC_ERR_ARG_SIZ, "The network has %zu input(s), %" PetscInt_FMT " tensors given", I->innames.size(), n);
  { /* the graph must be the same on every rank (options given differently per rank) */
    std::string g = "inputs";
    for (auto &x : I->innames) g += " " + x;
    g += "\noutput " + I->outname + "\n";
    for (auto &nd : I->nodes) {
      g += nd.name + " (" + (((PetscObject)nd.layer)->type_name ? ((PetscObject)nd.layer)->type_name : "no type") + ") <-";
      for (int k : nd.inputs) g += " " + (k < 0 ? I->innames[-1 - k] : I->nodes[k].name);
      g += "\n";
    }
    PetscCall(DDCheckSameString(comm, "The network's inputs, layers or their connections", g.c_str()));
  }
  { /* the distribution mode and the memory cap decide which collective set-up work follows */
    std::string d = std::string(DDNetDistributions[I->distribution]) + ", memory limit " + std::to_string((long long)I->memlimit) + " bytes";
    PetscCall(DDCheckSameString(comm, "The network's -net_distribution or -net_memory_limit", d.c_str()));
  }
  {
    PetscBool cf = I->checkfinite ? PETSC_TRUE : PETSC_FALSE;
    PetscCall(PetscOptionsGetBool(NULL, ((PetscObject)net)->prefix, "-dd_check_finite", &cf, NULL));
    PetscCall(DDCheckSameString(comm, "-dd_check_finite", cf ? "true" : "false")); /* its checks are collective */
    I->checkfinite = cf ? true : false;
    I->step        = 0;
  }
  PetscCall(DDNetFreeGradients(I));
  PetscCall(ddnn::NetReplicasDestroy_Private(net)); /* the layers' replicas are about to be rebuilt */
  std::vector<DDTensor> xin(xs, xs + n);
  if (I->distribution == DD_NET_DISTRIBUTION_AUTO) PetscCall(ddnn::NetDistribute_Private(net, xin)); /* chooses and inserts the repartitions and sets the layers up (src/net/distribution.cxx) */
  else {
    PetscCall(ddnn::NetRemoveAutoLayers_Private(net));
    I->plan = ddnn::NetPlan();
    PetscCall(ddnn::NetSetUpLayers_Private(net, xin));
  }
  /* the parameters, in layer order */
  I->params.clear();
  I->grads.clear();
  I->pnames.clear();
  for (auto &nd : I->nodes)
    for (PetscInt k = 0; k < nd.layer->nparams; k++) {
      I->params.push_back(nd.layer->params[k]);
      I->grads.push_back(nd.layer->grads[k]);
      I->pnames.push_back(nd.name + "." + nd.layer->paramnames[k]);
    }
  I->wantgrad.assign(n, false);
  I->ingrads.assign(n, NULL);
  I->inputs = xin;
  net->setupcalled = PETSC_TRUE;
  {
    PetscInt s = 0;
    PetscCall(PetscOptionsGetInt(NULL, ((PetscObject)net)->prefix, "-net_seed", &s, NULL));
    seed = s;
  }
  PetscCall(ddnn::NetReplicasSetUp_Private(net)); /* -net_weights replicated: the buckets */
  PetscCall(DDNetInitializeParameters(net, seed));
  { /* weights from a PyTorch state_dict, replacing the initial ones */
    char      file[PETSC_MAX_PATH_LEN];
    PetscBool flg;
    PetscCall(PetscOptionsGetString(NULL, ((PetscObject)net)->prefix, "-net_load_weights", file, sizeof(file), &flg));
    if (flg) PetscCall(DDNetLoadWeights(net, file));
  }
  PetscCall(DDNetViewFromOptions(net, NULL, "-net_view"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetForward - Evaluates every layer on the network's inputs

  Collective

  Input Parameters:
+ net - a set-up network
. n   - number of inputs
- xs  - the inputs, laid out as at set-up

  Level: beginner

.seealso: `DDNetBackward()`, `DDNetGetOutput()`, `DDNetGetLoss()`
@*/
PetscErrorCode DDNetForward(DDNet net, PetscInt n, DDTensor xs[])
DD_CXX_TRY
{
  NetImpl              *I = net->impl;
  std::vector<DDTensor> xin(xs, xs + n), ins;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  PetscCheck(n == (PetscInt)I->innames.size(), PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_SIZ, "The network has %zu input(s), %" PetscInt_FMT " given", I->innames.size(), n);
  I->step++;
  PetscCall(ddnn::NetReplicasRefresh_Private(net)); /* replicated weights: one broadcast per group if they changed */
  for (auto &nd : I->nodes) {
    PetscCall(DDNetInputsOf(net, nd, xin, ins));
    ddnn::CxxErrorContext context(DescribeRun<true>, &nd); /* a C++ exception beneath names the layer */
    PetscLogDouble t0 = 0, t1;
    if (I->layertiming) PetscCall(PetscTime(&t0));
    PetscCall(DDLayerForwardMulti(nd.layer, (PetscInt)ins.size(), ins.data(), nd.layer->output));
    if (I->layertiming) {
      PetscCall(PetscTime(&t1));
      nd.tfwd = t1 - t0;
    }
    if (I->checkfinite) PetscCall(DDNetCheckFinite(net, nd, {nd.layer->output}, {"the output"}));
  }
  I->inputs      = xin;
  I->forwarddone = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetInputGradient - The gradient of a network input, computed by the following Backward sweeps

  Collective

  Input Parameters:
+ net - a set-up network
- i   - the input

  Output Parameter:
. dx - the gradient tensor (owned by the network), set up and filled by `DDNetBackward()`

  Notes:
  Input gradients are not computed unless asked for, which saves the first layer's
  backward-data pass in training. Call it on every rank: `DDNetBackward()` checks that the ranks
  want the same input gradients (an error on every rank otherwise).

  Level: intermediate

.seealso: `DDNetBackward()`
@*/
PetscErrorCode DDNetGetInputGradient(DDNet net, PetscInt i, DDTensor *dx)
DD_CXX_TRY
{
  NetImpl *I = net->impl;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  PetscCheck(i >= 0 && i < (PetscInt)I->innames.size(), PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "Input %" PetscInt_FMT " does not exist", i);
  /* not collective: the tensor gets its layout here and is set up (collectively) by DDNetBackward(), after its check that every rank wants it */
  if (!I->ingrads[i]) PetscCall(DDTensorLayoutLike_Private(I->inputs[i], I->inputs[i]->dtype, I->inputs[i]->memtype, &I->ingrads[i]));
  I->wantgrad[i] = true;
  *dx            = I->ingrads[i];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetBackward - Backward sweep: gradients of every layer's parameters (accumulated) and of the requested inputs

  Collective

  Input Parameters:
+ net - a network after `DDNetForward()`
- dy  - gradient of the network's output; NULL when the output layer is a loss (dL = 1)

  Notes:
  Layers run in reverse order; a tensor feeding several layers receives the sum of their
  input gradients. Parameter gradients accumulate: call `DDNetZeroGradients()` between steps.

  A tensor a layer's forward read that changed since (a network input, or a layer's output; through
  the tensor's functions or a PETSc Vec on its storage) is an error on every rank
  (`PETSC_ERR_ARG_WRONGSTATE`, naming the input and the layer), raised before any layer's backward,
  also when it changed on one rank only; run `DDNetForward()` again.

  A network whose output depends on no parameter and on no input whose gradient is wanted (a
  loss fed only by the network's inputs: a layer's inputs mistyped) has nothing to differentiate:
  an error on every rank (`PETSC_ERR_ARG_WRONGSTATE`, naming the output layer and the first layer
  with parameters), as PyTorch's backward() of a loss that requires no gradient, instead of a
  training that changes nothing. Parameters of layers the output does not depend on keep their
  gradients (zero after `DDNetZeroGradients()`), as PyTorch's unused parameters do.

  Level: beginner

.seealso: `DDNetForward()`, `DDNetZeroGradients()`, `DDNetGetInputGradient()`
@*/
PetscErrorCode DDNetBackward(DDNet net, DDTensor dy)
DD_CXX_TRY
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "DDNetBackward(): the network changed since it was set up (a layer added, another output): call DDNetSetUp() and DDNetForward() again");
  PetscCheck(I->forwarddone, comm, PETSC_ERR_ARG_WRONGSTATE, "DDNetBackward() needs a DDNetForward() first");
  {
    /* dy, and the inputs the layers' forwards read, unchanged since (through the tensors or a PETSc Vec on
       their storage): one check on every rank before any layer's backward, where DDLayerBackwardMulti()
       checks its layer's inputs on its own rank only (an input changed on one rank would leave the others
       waiting in the backward's exchanges) */
    char           msg[512] = "";
    PetscErrorCode code     = PETSC_ERR_ARG_NULL;
    if (!dy && !I->nodes[I->output].layer->nulldy) PetscCall(PetscSNPrintf(msg, sizeof(msg), "DDNetBackward: dy is NULL, and the network's output layer \"%s\" is a %s, not a loss (only a loss output takes NULL: dL = 1); pass the gradient of the output (distributed as DDNetGetOutput()'s tensor)", I->nodes[I->output].name.c_str(), ((PetscObject)I->nodes[I->output].layer)->type_name));
    for (size_t i = 0; i < I->nodes.size() && !msg[0]; i++) {
      PetscInt j;
      PetscCall(DDLayerSavedInputChanged_Private(I->nodes[i].layer, &j));
      if (j < 0 || j >= (PetscInt)I->nodes[i].inputs.size()) continue;
      const int k = I->nodes[i].inputs[j];
      code        = PETSC_ERR_ARG_WRONGSTATE;
      PetscCall(PetscSNPrintf(msg, sizeof(msg), "DDNetBackward: input %" PetscInt_FMT " (%s \"%s\") of layer \"%s\" was modified after DDNetForward() (through the tensor or a PETSc Vec on its storage); its gradient would be wrong: run DDNetForward() again", j, k < 0 ? "the network's input" : "the output of layer", k < 0 ? I->innames[-1 - k].c_str() : I->nodes[k].name.c_str(), I->nodes[i].name.c_str()));
    }
    /* in the same all-reduce: the input gradients wanted (DDNetGetInputGradient()) must be the same on every rank,
       or the ranks run different backward passes (a layer's data pass and its exchanges on some ranks only) */
    PetscMPIInt rank, size;
    uint64_t    h = 0; /* the inputs wanted, of any number: a sum of their indices' mixed bits, 62 bits */
    long long   v[3], w[3];
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    PetscCallMPI(MPI_Comm_size(comm, &size));
    for (size_t k = 0; k < I->wantgrad.size(); k++)
      if (I->wantgrad[k]) h += ddnn::SplitMix64(k + 1);
    const long long wg = (long long)(h & 0x3FFFFFFFFFFFFFFFull);
    v[0] = msg[0] ? rank : size, v[1] = wg, v[2] = -wg;
    PetscCallMPI(MPI_Allreduce(v, w, 3, MPI_LONG_LONG, MPI_MIN, comm));
    if (w[0] < size) PetscCall(DDCheckCollective(comm, msg[0] ? PETSC_FALSE : PETSC_TRUE, code, msg)); /* every rank: w is the same on all */
    PetscCheck(w[1] == -w[2], comm, PETSC_ERR_ARG_WRONG, "DDNetBackward: DDNetGetInputGradient() was called on some ranks only (or for other inputs on different ranks): the input gradients wanted differ between ranks; it is collective, call it on every rank");
    for (size_t k = 0; k < I->ingrads.size(); k++)
      if (I->wantgrad[k] && !I->ingrads[k]->setupcalled) PetscCall(DDTensorSetUp(I->ingrads[k]));
  }
  const int nn = (int)I->nodes.size();
  if (I->scratch.empty()) I->scratch.assign(nn, NULL);
  /* which nodes need their output gradient: those upstream of the output */
  std::vector<bool> live(nn, false);
  live[I->output] = true;
  for (int i = I->output; i >= 0; i--)
    if (live[i])
      for (int k : I->nodes[i].inputs)
        if (k >= 0) live[k] = true;
  {
    /* something to differentiate: a parameter upstream of the output, or a wanted input gradient (as PyTorch's
       backward() of a loss that requires no gradient is an error); the same on every rank (the graph is, and the
       wanted inputs were checked above) */
    bool        any   = false;
    const char *pname = NULL;
    for (int i = 0; i < nn; i++) {
      const Node &nd = I->nodes[i];
      if (live[i] && nd.layer->nparams > 0) any = true;
      if (!live[i] && nd.layer->nparams > 0 && !pname) pname = nd.name.c_str();
      if (live[i])
        for (int k : nd.inputs)
          if (k < 0 && I->wantgrad[-1 - k]) any = true;
    }
    PetscCheck(any, comm, PETSC_ERR_ARG_WRONGSTATE, "DDNetBackward: nothing to differentiate: the network's output (layer \"%s\") depends on no parameter%s%s%s and on no input whose gradient is wanted (DDNetGetInputGradient()); a loss fed only by the network's inputs trains nothing: check the layers' inputs", I->nodes[I->output].name.c_str(), pname ? " (the first layer with parameters, \"" : "", pname ? pname : "", pname ? "\", does not feed it)" : "");
  }
  for (int i = 0; i < nn; i++) {
    Node &nd = I->nodes[i];
    if (!live[i] || i == I->output) continue;
    if (!nd.dy) PetscCall(DDTensorDuplicate(nd.layer->output, &nd.dy)); /* created zero */
    /*
      Only a gradient that is summed over several consumers needs zeroing: a live tensor with one
      consumer has that consumer live too, and its DDLayerBackwardMulti() overwrites the gradient
      (the contract the accumulation below relies on for its scratch tensors as well).
    */
    else if (nd.consumers > 1) PetscCall(DDTensorZeroEntries(nd.dy));
  }
  for (size_t k = 0; k < I->ingrads.size(); k++)
    if (I->wantgrad[k]) PetscCall(DDTensorZeroEntries(I->ingrads[k]));
  int lastlive = I->output; /* the backward's last node */
  for (int i = I->output; i >= 0; i--)
    if (live[i]) lastlive = i;
  PetscCall(ddnn::NetReplicasSumBegin_Private(net));
  for (int i = I->output; i >= 0; i--) {
    Node &nd = I->nodes[i];
    if (!live[i]) continue;
    DDTensor              g = (i == I->output) ? dy : nd.dy;
    std::vector<DDTensor> dxs, add;
    std::vector<bool>     own; /* a temporary made for this input alone, destroyed once added */
    for (size_t j = 0; j < nd.inputs.size(); j++) {
      const int k      = nd.inputs[j];
      DDTensor  target = NULL;
      if (k >= 0) target = I->nodes[k].dy;
      else if (I->wantgrad[-1 - k]) target = I->ingrads[-1 - k];
      if (!target) {
        dxs.push_back(NULL);
        add.push_back(NULL);
        own.push_back(false);
        continue;
      }
      /* the same tensor taken twice by this layer (concat(a, a)): each occurrence needs its own buffer, or the second gradient overwrites the first */
      const bool again = std::find(nd.inputs.begin(), nd.inputs.begin() + (std::ptrdiff_t)j, k) != nd.inputs.begin() + (std::ptrdiff_t)j;
      /* a tensor with one consumer takes the gradient directly; otherwise accumulate */
      bool direct = (k >= 0 && I->nodes[k].consumers == 1 && !again);
      if (direct) {
        dxs.push_back(target);
        add.push_back(NULL);
        own.push_back(false);
      } else {
        DDTensor tmp;
        if (k >= 0 && !again) {
          if (!I->scratch[k]) PetscCall(DDTensorDuplicate(target, &I->scratch[k]));
          tmp = I->scratch[k];
        } else PetscCall(DDTensorDuplicate(target, &tmp));
        dxs.push_back(tmp);
        add.push_back(target);
        own.push_back(k < 0 || again);
      }
    }
    ddnn::CxxErrorContext context(DescribeRun<false>, &nd);
    PetscLogDouble t0 = 0, t1;
    if (I->layertiming) PetscCall(PetscTime(&t0));
    PetscCall(DDLayerBackwardMulti(nd.layer, g, (PetscInt)dxs.size(), dxs.data()));
    if (I->layertiming) {
      PetscCall(PetscTime(&t1));
      nd.tbwd = t1 - t0;
    }
    if (I->checkfinite) {
      std::vector<DDTensor>    ts;
      std::vector<std::string> what;
      for (size_t j = 0; j < dxs.size(); j++) {
        int k = nd.inputs[j];
        ts.push_back(dxs[j]);
        what.push_back("the gradient of input " + std::to_string(j) + " (\"" + (k < 0 ? I->innames[-1 - k] : I->nodes[k].name) + "\")");
      }
      for (PetscInt p = 0; p < nd.layer->nparams; p++) {
        ts.push_back(nd.layer->grads[p]);
        what.push_back(std::string("the gradient of parameter \"") + nd.layer->paramnames[p] + "\"");
      }
      PetscCall(DDNetCheckFinite(net, nd, ts, what));
    }
    for (size_t j = 0; j < dxs.size(); j++)
      if (add[j]) {
        PetscCall(DDTensorAXPY(add[j], 1.0, dxs[j]));
        if (own[j]) PetscCall(DDTensorDestroy(&dxs[j]));
      }
    PetscCall(ddnn::NetReplicasSumReady_Private(net, i, i > lastlive)); /* replicated weights: the buckets the backward has passed start their all-reduce */
  }
  PetscCall(ddnn::NetReplicasSum_Private(net)); /* replicated weights: the remaining buckets' all-reduces started, all completed and added */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetOutput - The network's output tensor (the output layer's own output)

  Not collective

  Level: beginner

.seealso: `DDNetSetOutput()`
@*/
PetscErrorCode DDNetGetOutput(DDNet net, DDTensor *y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  *y = net->impl->nodes[net->impl->output].layer->output;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetLayer - A layer by name (not a new reference)

  Not collective

  Level: intermediate

.seealso: `DDNetAddLayer()`
@*/
PetscErrorCode DDNetGetLayer(DDNet net, const char name[], DDLayer *layer)
DD_CXX_TRY
{
  int idx;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(DDNetFind(net, name, &idx));
  PetscCheck(idx >= 0, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONG, "The network has no layer named \"%s\"", name);
  *layer = net->impl->nodes[idx].layer;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetNumLayers - Number of layers

  Not collective

  Level: intermediate

.seealso: `DDNetGetLayerByIndex()`
@*/
PetscErrorCode DDNetGetNumLayers(DDNet net, PetscInt *n)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  *n = (PetscInt)net->impl->nodes.size();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetLayerByIndex - The i-th layer and its name

  Not collective

  Level: intermediate

.seealso: `DDNetGetNumLayers()`
@*/
PetscErrorCode DDNetGetLayerByIndex(DDNet net, PetscInt i, DDLayer *layer, const char *name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(i >= 0 && i < (PetscInt)net->impl->nodes.size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Layer %" PetscInt_FMT " does not exist", i);
  if (layer) *layer = net->impl->nodes[i].layer;
  if (name) *name = net->impl->nodes[i].name.c_str();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetLayerOutput - The output tensor of a named layer

  Not collective

  Level: intermediate

.seealso: `DDNetGetLayer()`
@*/
PetscErrorCode DDNetGetLayerOutput(DDNet net, const char name[], DDTensor *y)
DD_CXX_TRY
{
  DDLayer l;

  PetscFunctionBegin;
  PetscCall(DDNetGetLayer(net, name, &l));
  PetscCall(DDLayerGetOutput(l, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetParameters - All parameters and their gradients, in layer order

  Not collective

  Output Parameters:
+ n      - number of parameter tensors
. params - the parameters (owned by the layers)
- grads  - their gradients

  Notes:
  The arrays are the network's; they and the tensors in them are valid until the network is set
  up again: `DDNetSetUp()` on a set-up network makes new (re-initialized) parameter tensors, so an
  optimizer set up with the old ones must be set up again (`DDOptimizerStep()`,
  `DDCheckpointSave()` and `DDCheckpointLoad()` raise an error otherwise).

  Level: intermediate

.seealso: `DDNetGetParameterName()`, `DDOptimizerSetUp()`
@*/
PetscErrorCode DDNetGetParameters(DDNet net, PetscInt *n, DDTensor *params[], DDTensor *grads[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  if (n) *n = (PetscInt)net->impl->params.size();
  if (params) *params = net->impl->params.data();
  if (grads) *grads = net->impl->grads.data();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetParameterName - "layer.param" name of the i-th parameter

  Not collective

  Level: intermediate

.seealso: `DDNetGetParameters()`
@*/
PetscErrorCode DDNetGetParameterName(DDNet net, PetscInt i, const char *name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(i >= 0 && i < (PetscInt)net->impl->pnames.size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Parameter %" PetscInt_FMT " does not exist", i);
  *name = net->impl->pnames[i].c_str();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetNumParameters - Number of scalar parameters of the network

  Not collective

  Level: beginner

.seealso: `DDLayerGetNumParameters()`
@*/
PetscErrorCode DDNetGetNumParameters(DDNet net, PetscInt64 *count)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  *count = 0;
  for (auto &nd : net->impl->nodes) {
    PetscInt64 c;
    PetscCall(DDLayerGetNumParameters(nd.layer, &c));
    *count += c;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetZeroGradients - Zeros every parameter gradient

  Not collective (see the notes)

  Notes:
  In the replicated and data-parallel weight modes (`DDNetSetWeightMode()`) it also drops the
  gradient sums pending in the network's buckets: replica gradients a layer's own
  `DDLayerBackward()` added since the last `DDNetBackward()`, and the sums that a `DDNetBackward()`
  which stopped on an error (with `-net_weights_bucket_mb`) left in flight. It completes those
  first, so after such an error it is collective over their worker groups: call it on every rank.

  Level: beginner

.seealso: `DDNetBackward()`
@*/
PetscErrorCode DDNetZeroGradients(DDNet net)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(ddnn::NetReplicasZero_Private(net)); /* replicated weights: the sums pending in the buckets */
  for (auto &nd : net->impl->nodes) PetscCall(DDLayerZeroGradients(nd.layer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetInitializeParameters - Initializes every layer's parameters from one seed (partition independent)

  Collective

  Notes:
  Layer u (in the order added; the repartitions of -net_distribution auto do not count) gets
  `DDLayerInitializeParameters()` with seed * 1000003 + u: its weights, and for a dropout layer
  without a seed of its own its masks' seed (restarted), so that dropout layers draw independent masks.

  Level: intermediate

.seealso: `DDLayerInitializeParameters()`
@*/
PetscErrorCode DDNetInitializeParameters(DDNet net, PetscInt64 seed)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscInt64 u = 0; /* the index among the user's layers: the repartitions -net_distribution auto inserts change nothing */
  for (size_t i = 0; i < net->impl->nodes.size(); i++) {
    if (net->impl->nodes[i].autoinserted) continue;
    PetscCall(DDLayerInitializeParameters(net->impl->nodes[i].layer, seed * 1000003 + u));
    u++;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetSetTraining - Training or evaluation mode for every layer

  Logically collective: a flag that differs between ranks is an error on every rank

  Notes:
  The mode changes what the layers' forwards exchange (batch normalization's statistics are summed
  over the ranks in training only), so every rank must be in the same mode.

  Level: beginner

.seealso: `DDLayerSetTraining()`
@*/
PetscErrorCode DDNetSetTraining(DDNet net, PetscBool flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(DDCheckSameFlag_Private(PetscObjectComm((PetscObject)net), flg, "DDNetSetTraining"));
  for (auto &nd : net->impl->nodes) nd.layer->training = flg; /* checked above, once for all layers (DDLayerSetTraining() would check each) */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetLoss - The value of the output layer when it is a loss, on every rank

  Collective

  Level: beginner

.seealso: `DDLAYERLOSS`
@*/
PetscErrorCode DDNetGetLoss(DDNet net, PetscReal *v)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  PetscCall(DDLayerLossGetValue(net->impl->nodes[net->impl->output].layer, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetView - Prints the network: per layer its type, inputs, output shape, partition and parameter count

  Collective

  Notes:
  After set-up it also prints the performance model (`DDNetViewModel()`), the weight mode that
  `-net_weights auto` chose (`DDNetSetWeightMode()`) with the two predicted steps, and the
  automatic distribution's plan (`DDNetViewDistribution()`).

  Level: beginner

.seealso: `DDLayerView()`
@*/
PetscErrorCode DDNetView(DDNet net, PetscViewer viewer)
DD_CXX_TRY
{
  NetImpl  *I = net->impl;
  PetscBool iascii;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)net), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscObjectPrintClassNamePrefixType((PetscObject)net, viewer));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  std::string ins;
  for (auto &s : I->innames) ins += (ins.empty() ? "" : ", ") + s;
  PetscCall(PetscViewerASCIIPrintf(viewer, "inputs: %s; %zu layers\n", ins.c_str(), I->nodes.size()));
  for (size_t i = 0; i < I->nodes.size(); i++) {
    const Node &nd = I->nodes[i];
    DDLayerType type;
    std::string from;
    for (int k : nd.inputs) from += (from.empty() ? "" : ",") + (k < 0 ? I->innames[-1 - k] : I->nodes[k].name);
    PetscCall(DDLayerGetType(nd.layer, &type));
    if (net->setupcalled) {
      char       sh[128], ps[128];
      PetscInt64 np;
      DDTensor   y = nd.layer->output;
      PetscCall(DDShapeToString_Private(y->order, y->shape, sh, sizeof(sh)));
      PetscCall(DDShapeToString_Private(y->part->order, y->part->shape, ps, sizeof(ps)));
      PetscCall(DDLayerGetNumParameters(nd.layer, &np));
      PetscCall(PetscViewerASCIIPrintf(viewer, "%-12s %-13s <- %-16s out %-16s partition %-12s %-13s params %" PetscInt64_FMT "\n", nd.name.c_str(), type, from.c_str(), sh, ps, DDTensorFormats[y->format], np));
    } else PetscCall(PetscViewerASCIIPrintf(viewer, "%-12s %-13s <- %s\n", nd.name.c_str(), type, from.c_str()));
  }
  if (net->setupcalled) {
    PetscInt64 np;
    PetscCall(DDNetGetNumParameters(net, &np));
    PetscCall(PetscViewerASCIIPrintf(viewer, "total parameters: %" PetscInt64_FMT "\n", np));
    PetscCall(DDNetViewModel(net, viewer)); /* the performance model per layer and per step (issue 16) */
    const ddnn::NetWeightChoice &wc = I->weightchoice;
    if (wc.decided && wc.tbroadcast > 0) PetscCall(PetscViewerASCIIPrintf(viewer, "weights: auto -> %s (predicted step %.4f ms data-parallel, %.4f ms replicated, %.4f ms broadcast)\n", DDNetWeightModes[wc.chosen], 1e3 * (double)wc.tdataparallel, 1e3 * (double)wc.treplicated, 1e3 * (double)wc.tbroadcast));
    else if (wc.decided) PetscCall(PetscViewerASCIIPrintf(viewer, "weights: auto -> broadcast (%s)\n", wc.why.c_str()));
    if (I->replicas && I->bucketmb > 0) PetscCall(PetscViewerASCIIPrintf(viewer, "gradient buckets of at most %g MiB (-net_weights_bucket_mb), each summed as soon as the backward has passed its first layer\n", (double)I->bucketmb));
    PetscCall(DDNetViewDistribution(net, viewer)); /* the automatic distribution's plan, if any */
  }
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetViewFromOptions - Views the network if an option asks for it

  Collective

  Level: intermediate

.seealso: `DDNetView()`
@*/
PetscErrorCode DDNetViewFromOptions(DDNet net, PetscObject obj, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectViewFromOptions((PetscObject)net, obj, name));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetDestroy - Destroys a network and its references to its layers

  Collective

  Level: beginner

.seealso: `DDNetCreate()`
@*/
PetscErrorCode DDNetDestroy(DDNet *net)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (!*net) PetscFunctionReturn(PETSC_SUCCESS);
  PetscValidHeaderSpecific(*net, DD_NET_CLASSID, 1);
  if (--((PetscObject)(*net))->refct > 0) {
    *net = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  NetImpl *I = (*net)->impl;
  PetscCall(DDNetFreeGradients(I));
  PetscCall(ddnn::NetReplicasDestroy_Private(*net));
  for (auto &nd : I->nodes) PetscCall(DDLayerDestroy(&nd.layer));
  delete I;
  PetscCall(PetscHeaderDestroy(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
