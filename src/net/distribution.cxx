/*
  Automatic per-layer distribution (issue 16, item 3): -net_distribution auto chooses, for the
  ranks of the network's communicator, the partition of every layer's input that the user did not
  choose, to minimise the performance model's predicted time of a training step under a memory
  cap per rank, and inserts the repartitions between layers whose distributions differ (the
  conversions of paper 002).

  The method is paper 003 sec. V-C ("Parallel execution strategies"):
  - "decision" layers are the ones with weights (conv, convtranspose, affine, the norms, ...) of one
    input; every other layer inherits the distribution of its input 0 ("other layers simply
    inherit the distribution of their parent"), so a decision layer owns the segment of layers up
    to the next decision layer;
  - the candidates of a decision layer are the partition its input has under the given
    distribution ("keep") and every factorisation of P over the input's dimensions (sample,
    channel/filter, spatial splits and their products: paper 001's Pr x Pc sample x spatial grid);
  - Cost_D(segment) is read from the model (DDNetGetLayerModelTime(), DDLayerGetModelMemory())
    after trial set-ups of the whole network, each with an explicit repartition before every
    decision layer (so that segments are independent); set-up builds plans, it runs no kernel;
  - Shuffle(D_i, D_j) is the model's time of the repartition layer from the tensor that arrives
    at layer j when layer i's segment runs under D_i onto D_j (its exact messages and bytes of the
    forward and the adjoint, priced with alpha-beta, and its copies); 0 when the partitions agree.
    It is computed without building the repartition: its messages and bytes are the intersections
    of the two partitions' ownership boxes (DDRepartitionGetCommVolume_Private()), and each
    distinct pair is priced once;
  - the decision layers form a forest (each has the owner of its input 0 as parent): the heaviest
    root-to-leaf chain is solved first as a shortest path over (layer, candidate) vertices, then
    the heaviest chain of the layers left, whose first layer starts from its parent's chosen
    partition ("longest path first"); under a memory cap the path keeps the Pareto front of
    (time, memory) labels per vertex, with the memory the other layers need at least reserved;
  - layers with several inputs (concatenations, sums, losses) get a repartition of every input
    whose partition differs from input 0's (a "join"); unlike the paper, its price (from the
    candidate of the input's owner onto that of the layer's owner) is part of the path search:
    exact when both owners are on the chain being solved or one is fixed already, left to the later
    chain when the other owner is on a chain not solved yet.
*/
#include <ddnn/private/ddnetimpl.h>
#include <ddmodel.h>
#include <model/modelimpl.hpp>
#include <tensor/layout.hpp>
#include <algorithm>
#include <map>
#include <cstring>
#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include <sys/ddcxx.hpp>
#include <primitive/sfutil.hpp>

using ddnn::NetImpl;
using Node = ddnn::NetNode;

const char *const DDNetDistributions[] = {"given", "auto", "DDNetDistribution", "DD_NET_DISTRIBUTION_", nullptr};

/*@
  DDNetSetDistribution - How the layers of a network are distributed over its ranks

  Logically collective

  Input Parameters:
+ net  - the network
- dist - `DD_NET_DISTRIBUTION_GIVEN` (default): every layer inherits the partition of its input
         (the network inputs' partitions and the user's repartition layers decide);
         `DD_NET_DISTRIBUTION_AUTO`: `DDNetSetUp()` chooses the partition of every decision layer
         by the performance model and inserts the repartitions

  Options Database Keys:
+ -net_distribution <given,auto> - the choice
. -net_distribution_calibrate <bool> - calibrate the model when the cache lacks it (default true); false: keep the given distribution
- -net_distribution_full_trials <bool> - (developer) price the candidates with full set-ups, as before the pricing-only ones

  Notes:
  In auto mode, `DDNetSetUp()` follows paper 003 sec. V-C. The decision layers are those with
  weights and one input (conv, convtranspose, affine, batchnorm, ...); the others inherit the
  partition of their input 0. The candidates of a decision layer are its input's partition under
  the given distribution and every factorisation of the communicator's size P over the input's
  dimensions (sample, channel, spatial splits and their products, e.g. the sample x spatial
  Pr x Pc grid of paper 001) that the layer accepts; the plan minimises the model's predicted
  time of a forward and backward (`DDNetGetModelTime()`) under the memory cap
  (`DDNetSetMemoryLimit()`), a repartition between two layers costing its forward and its adjoint,
  and so does the repartition of a concatenation's or loss's input k > 0 onto the partition of its
  input 0 (a U-Net's skip, a loss's target), priced for every pair of the two owners' candidates.
  The heaviest chain is solved first (paper 003's longest-path-first rule, a heuristic), then the
  others, each with the chains solved before fixed: a join between the chain being solved and a
  later one is priced when the later one is solved, so the first chain's choice does not weigh it.
  The chosen repartitions are inserted as `DDLAYERREPARTITION` layers named
  "<layer>_auto_in<k>" (input k of the layer); `DDNetView()` prints the plan.

  The inserted layers count in `DDNetGetNumLayers()` and `DDNetGetLayerByIndex()`; parameters are
  initialised by the index among the user's layers, so a seed gives the same weights in both modes.
  Another `DDNetSetUp()` plans again (replacing the inserted layers). The network's output keeps
  the partition chosen for its layer: read it with a repartition (`DDPRIMITIVEREPARTITION`) where the
  given one is needed.

  Kept as given: the network inputs' partitions, the user's repartition layers and every layer
  after one (up to the output), and a conv or convtranspose whose -layer_conv_channel_workers
  (-layer_convtranspose_channel_workers) option is given.

  The model needs the calibration of this machine for the network's backend and data type: if
  the cache (`DDModelGetCachePath()`) lacks it, set-up calibrates first (`DDModelCalibrate()`,
  some seconds, written to the cache for the next runs); with -net_distribution_calibrate 0 it
  keeps the given distribution instead and says so. On one rank there is nothing to choose. A
  network computing on a device backend (/gpu/cuda) keeps the given distribution and says so: the
  model calibrates host backends only (`DDModelCalibrate()`).

  The trial set-ups that price the candidates only count: the halo, repartition and scatter
  primitives find their messages, bytes and buffers without building star forests or exchange
  plans, no weights are drawn, and the checks the first set-up made are not repeated
  (-net_distribution_full_trials: full set-ups, the same numbers, slower).

  Level: intermediate

.seealso: `DDNetSetUp()`, `DDNetSetMemoryLimit()`, `DDNetViewDistribution()`, `DDNetGetModelTime()`, `DDLAYERREPARTITION`
@*/
PetscErrorCode DDNetSetDistribution(DDNet net, DDNetDistribution dist)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(dist == DD_NET_DISTRIBUTION_GIVEN || dist == DD_NET_DISTRIBUTION_AUTO, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "Unknown network distribution %d: DD_NET_DISTRIBUTION_GIVEN or DD_NET_DISTRIBUTION_AUTO", (int)dist);
  if (net->impl->distribution != dist) net->setupcalled = PETSC_FALSE;
  net->impl->distribution = dist;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetDistribution - How the layers of a network are distributed (`DDNetSetDistribution()`)

  Not collective

  Input Parameter:
. net - the network

  Output Parameter:
. dist - the distribution mode

  Level: intermediate

.seealso: `DDNetSetDistribution()`
@*/
PetscErrorCode DDNetGetDistribution(DDNet net, DDNetDistribution *dist)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidPointer(dist, 2);
  *dist = net->impl->distribution;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetSetMemoryLimit - The memory per rank the automatic distribution may plan for

  Logically collective

  Input Parameters:
+ net   - the network
- bytes - the cap per rank, in bytes, of the model's memory of the whole network (activations,
          halos, weights and gradients, work tensors: `DDLayerGetModelMemory()` summed over the
          layers); 0 (default): no cap

  Options Database Key:
. -net_memory_limit <bytes> - the cap

  Notes:
  Used by `DD_NET_DISTRIBUTION_AUTO` only. When no plan fits, `DDNetSetUp()` stops with an error
  naming the cap and a lower bound of any plan's memory per rank (each layer's smallest share,
  summed: no plan needs less). The plans are priced by per-layer tables (each layer set up next to
  an explicit repartition); the chosen plan, once set up, can differ from its tables by a few
  percent, and `-net_view` notes when that puts it above the cap.

  Level: intermediate

.seealso: `DDNetSetDistribution()`, `DDLayerGetModelMemory()`
@*/
PetscErrorCode DDNetSetMemoryLimit(DDNet net, PetscInt64 bytes)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(bytes >= 0, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "The memory limit per rank must be >= 0 bytes (0: no limit), not %" PetscInt64_FMT, bytes);
  if (net->impl->memlimit != bytes) net->setupcalled = PETSC_FALSE;
  net->impl->memlimit = bytes;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetMemoryLimit - The memory cap per rank of the automatic distribution (`DDNetSetMemoryLimit()`)

  Not collective

  Input Parameter:
. net - the network

  Output Parameter:
. bytes - the cap; 0: none

  Level: intermediate

.seealso: `DDNetSetMemoryLimit()`
@*/
PetscErrorCode DDNetGetMemoryLimit(DDNet net, PetscInt64 *bytes)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidPointer(bytes, 2);
  *bytes = net->impl->memlimit;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetDistributionPlan - What the automatic distribution chose at the last `DDNetSetUp()`

  Not collective

  Input Parameter:
. net - the set-up network

  Output Parameters:
+ inserted  - the repartition layers it inserted (or NULL); -1 when the network is not in auto mode
. predicted - the predicted time of a step: the sum over the layers (the inserted repartitions
              included) of the slowest rank's forward and backward, in seconds (or NULL)
- memory    - the predicted memory per rank of the whole network, in bytes (or NULL)

  Level: advanced

.seealso: `DDNetSetDistribution()`, `DDNetViewDistribution()`
@*/
PetscErrorCode DDNetGetDistributionPlan(DDNet net, PetscInt *inserted, PetscReal *predicted, PetscInt64 *memory)
DD_CXX_TRY
{
  NetImpl *I;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  I = net->impl;
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  if (inserted) *inserted = I->plan.done ? I->plan.inserted : -1;
  if (predicted) *predicted = I->plan.predicted;
  if (memory) *memory = I->plan.memory;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetViewDistribution - Prints the automatic distribution's plan: per decision layer the chosen partition and its predicted time, the alternatives' times, the inserted repartitions, the predicted step time and peak memory per rank

  Collective

  Input Parameters:
+ net    - the set-up network
- viewer - an ASCII viewer (NULL: stdout of the network's communicator)

  Notes:
  `DDNetView()` (-net_view) prints this after the model; nothing is printed in given mode.

  Level: intermediate

.seealso: `DDNetSetDistribution()`, `DDNetView()`
@*/
PetscErrorCode DDNetViewDistribution(DDNet net, PetscViewer viewer)
DD_CXX_TRY
{
  PetscBool iascii;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)net), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii || !net->impl->plan.done) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerASCIIPrintf(viewer, "%s", net->impl->plan.view.c_str()));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetDistributionTables_Private - Every number the automatic distribution priced at the last `DDNetSetUp()`

  Not collective

  Input Parameter:
. net - the set-up network in auto mode

  Output Parameters:
+ n - how many (0 when nothing was chosen: one rank, no decision layer, a forced plan)
- v - the numbers, owned by the network: the layers no decision layer owns (time, memory); per
      decision layer its chosen candidate, per candidate the time and memory of its segment, per
      (parent's candidate, candidate) the shuffle's time, memory and whether no data moves; per join
      and pair of candidates the same; the shortest path's cost

  Notes:
  For the test that the pricing-only trial set-ups (the default) price exactly as full set-ups
  (-net_distribution_full_trials).

  Level: developer

.seealso: `DDNetSetDistribution()`, `DDNetGetDistributionPlan()`
@*/
PETSC_EXTERN PetscErrorCode DDNetGetDistributionTables_Private(DDNet net, PetscInt *n, const PetscReal **v)
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Call DDNetSetUp() first");
  *n = (PetscInt)net->impl->plan.tables.size();
  *v = net->impl->plan.tables.data();
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Removes the repartitions an earlier automatic distribution inserted: the user's graph again */
PetscErrorCode ddnn::NetRemoveAutoLayers_Private(DDNet net)
{
  NetImpl          *I = net->impl;
  std::vector<int>  map(I->nodes.size(), -1);
  std::vector<Node> keep;

  PetscFunctionBegin;
  for (size_t i = 0; i < I->nodes.size(); i++) {
    Node &nd = I->nodes[i];
    if (nd.autoinserted) continue;
    Node c = nd;
    for (int &k : c.inputs) {
      while (k >= 0 && I->nodes[k].autoinserted) k = I->nodes[k].inputs[0];
      if (k >= 0) k = map[k];
    }
    map[i] = (int)keep.size();
    keep.push_back(c);
  }
  for (auto &nd : I->nodes)
    if (nd.autoinserted) {
      PetscCall(DDTensorDestroy(&nd.dy));
      PetscCall(DDLayerDestroy(&nd.layer));
    }
  I->nodes = keep;
  PetscFunctionReturn(PETSC_SUCCESS);
}

namespace
{
const int FROM_INPUTS = -1; /* owner of a layer fed (through inheriting layers) by the network inputs */
const int USER_FIXED  = -2; /* owner of a layer after a user's repartition: kept as given */

/* one candidate distribution of a decision layer: the input's partition */
struct Cand {
  DDPartition part = NULL;
  std::string name;
};

struct Decision {
  int                 node;   /* in the user's graph */
  int                 pred;   /* the decision layer owning its input 0, or FROM_INPUTS / USER_FIXED */
  bool                fromnetinput = false; /* input 0 is a network input itself */
  std::vector<Cand>   cands;
  std::vector<double> time, mem;            /* per candidate: its segment's cost (inf: not accepted) */
  /* shuffle[a][c]: from the tensor arriving under the parent's candidate a onto candidate c */
  std::vector<std::vector<double>> stime, smem;
  std::vector<std::vector<int>>    sident; /* 1: the arriving partition is already candidate c's */
  std::vector<DDTensor>            arrive; /* per parent candidate: a tensor laid out as what arrives (kept from the trials) */
  std::vector<std::vector<PetscInt>> halo; /* per candidate: the halo widths (lo, hi) the layer wants on its input */
  int                              chosen = -1;
};

/* an insertion into the user's graph: a repartition before node `before` on its input `slot` */
struct Ins {
  int         before, slot;
  DDPartition part;  /* the target; NULL: match the node's input 0 */
};

/* a join: input `slot` > 0 of the multi-input layer `node` (a concatenation, sum or loss: a U-Net's
   skip, a loss's target) is repartitioned onto the partition of its input 0 ("<node>_auto_in<slot>");
   its price depends on the candidates of two decision layers, the owner of the input (src) and the
   owner of the layer (dst); -1: an owner without a choice (a network input, a layer after a user's
   repartition) */
struct Join {
  int                              node, slot, src, dst;
  std::vector<DDTensor>            arrive; /* per src candidate: what arrives at the slot (kept from the trials) */
  std::vector<DDPartition>         target; /* per dst candidate: the partition of input 0 */
  std::vector<std::vector<PetscInt>> halo; /* per dst candidate: the halo the layer wants on the input */
  std::vector<std::vector<double>> t, m;   /* [src candidate][dst candidate] */
  std::vector<std::vector<int>>    ident;
};

const double INF = std::numeric_limits<double>::infinity();
} // namespace

/* The user's graph with repartitions inserted (the user's nodes keep their order) */
static PetscErrorCode NetInsert(DDNet net, const std::vector<Node> &user, std::vector<Ins> ins)
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);
  std::vector<int>  map(user.size(), -1);
  std::vector<Node> out;

  PetscFunctionBegin;
  std::sort(ins.begin(), ins.end(), [](const Ins &a, const Ins &b) { return a.before != b.before ? a.before < b.before : a.slot < b.slot; });
  size_t q = 0;
  for (size_t j = 0; j < user.size(); j++) {
    Node              nd = user[j];
    std::vector<int>  matches;
    for (int &k : nd.inputs)
      if (k >= 0) k = map[k];
    for (; q < ins.size() && ins[q].before == (int)j; q++) {
      Node r;
      r.name         = user[j].name + "_auto_in" + std::to_string(ins[q].slot);
      r.autoinserted = true;
      r.inputs.push_back(nd.inputs[ins[q].slot]);
      PetscCall(DDLayerCreate(comm, &r.layer));
      PetscCall(DDLayerSetType(r.layer, DDLAYERREPARTITION));
      if (ins[q].part) PetscCall(DDLayerRepartitionSetPartition(r.layer, ins[q].part));
      else matches.push_back((int)out.size());
      nd.inputs[ins[q].slot] = (int)out.size();
      out.push_back(r);
    }
    map[j] = (int)out.size();
    for (int m : matches) out[m].automatch = map[j];
    out.push_back(nd);
  }
  I->nodes = out;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Destroys the inserted layers and restores the user's graph */
static PetscErrorCode NetRestore(DDNet net, const std::vector<Node> &user)
{
  PetscFunctionBegin;
  PetscCall(ddnn::NetRemoveAutoLayers_Private(net));
  net->impl->nodes = user;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A trial set-up: ok on every rank when it succeeded on every rank; errors stay silent */
static PetscErrorCode NetTrySetUp(DDNet net, std::vector<DDTensor> &xin, PetscBool *ok)
{
  PetscErrorCode ierr;

  PetscFunctionBegin;
  PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
  ierr = ddnn::NetSetUpLayers_Private(net, xin);
  PetscCall(PetscPopErrorHandler());
  *ok = ierr ? PETSC_FALSE : PETSC_TRUE;
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, ok, 1, MPIU_BOOL, MPI_LAND, PetscObjectComm((PetscObject)net)));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Per node of the set-up graph: the model's time of a forward and backward and memory, max over ranks */
static PetscErrorCode NetNodeCosts(DDNet net, std::vector<double> &t, std::vector<double> &m)
{
  NetImpl *I = net->impl;
  size_t   n = I->nodes.size();
  std::vector<PetscReal> v(2 * n);

  PetscFunctionBegin;
  for (size_t i = 0; i < n; i++) {
    PetscReal  c[4];
    PetscInt64 mm[4];
    PetscBool  cal;
    PetscCall(DDNetGetLayerModelTime(net, (PetscInt)i, &c[0], &c[1], &c[2], &c[3], &cal));
    PetscCall(DDLayerGetModelMemory(I->nodes[i].layer, &mm[0], &mm[1], &mm[2], &mm[3]));
    v[2 * i]     = c[0] + c[1] + c[2] + c[3];
    v[2 * i + 1] = (PetscReal)(mm[0] + mm[1] + mm[2] + mm[3]);
  }
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, v.data(), (PetscMPIInt)(2 * n), MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)net)));
  t.resize(n);
  m.resize(n);
  for (size_t i = 0; i < n; i++) {
    t[i] = v[2 * i];
    m[i] = v[2 * i + 1];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The layout of x agrees with the balanced one on part on every rank (no data would move) */
static PetscErrorCode SameLayout(DDTensor x, DDTensor y, PetscBool *same)
{
  PetscBool eq;

  PetscFunctionBegin;
  PetscCall(DDPartitionEqual(x->part, y->part, &eq));
  *same = eq;
  if (eq)
    for (PetscInt k = 0; k < x->order; k++)
      if (x->layout.n[k] != y->layout.n[k] || x->layout.start[k] != y->layout.start[k] || x->active != y->active) *same = PETSC_FALSE;
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, same, 1, MPIU_BOOL, MPI_LAND, PetscObjectComm((PetscObject)x)));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The bulk box [a, b) in global indices of worker w (C order over the partition's shape) of a
   tensor whose ownership offsets along k are r[k] */
struct Box {
  PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM];
};
static Box WorkerBox(PetscInt order, const PetscInt pshape[], const PetscInt *const r[], PetscInt w)
{
  Box B;
  for (PetscInt k = order - 1; k >= 0; k--) {
    PetscInt c = w % pshape[k];
    w /= pshape[k];
    B.a[k] = r[k][c];
    B.b[k] = r[k][c + 1];
  }
  return B;
}
static PetscInt64 Meet(PetscInt order, const Box &X, const Box &Y)
{
  PetscInt64 n = 1;
  for (PetscInt k = 0; k < order; k++) {
    PetscInt lo = PetscMax(X.a[k], Y.a[k]), hi = PetscMin(X.b[k], Y.b[k]);
    if (hi <= lo) return 0;
    n *= hi - lo;
  }
  return n;
}

/* The repartition of x onto the balanced tensor on part (DDTensorCreateRepartition()): its
   ownership offsets rp (empty pieces where a dimension has fewer entries than workers); false when
   the repartition cannot be set up (another order; a replicated dimension: DDPRIMITIVEREPARTITION
   moves split tensors only) */
static bool BalancedRanges(DDTensor x, DDPartition part, std::vector<PetscInt> rp[DD_MAX_DIM])
{
  if (part->order != x->order) return false;
  for (PetscInt k = 0; k < x->order; k++) {
    if (x->replicated[k]) return false;
    rp[k].resize(part->shape[k] + 1);
    DDSplitOwnership_Private(x->shape[k], part->shape[k], rp[k].data());
  }
  return true;
}

/*@C
  DDRepartitionGetCommVolume_Private - The point-to-point messages and bytes, on this rank, of the
  repartition of x onto the balanced tensor on part (`DDTensorCreateRepartition()`,
  `DDPRIMITIVEREPARTITION`), computed from the ownership boxes without building its graph

  Not collective

  Input Parameters:
+ x    - a set-up tensor (any partition, ownership ranges and halo; empty pieces allowed)
- part - the target partition (balanced ownership)

  Output Parameters:
+ fwd - {messages sent, bytes sent, messages received, bytes received} of the forward; the
        adjoint's are {fwd[2], fwd[3], fwd[0], fwd[1]}
- ok  - false when the repartition cannot be set up (another order, a replicated dimension): fwd
        is then 0

  Notes:
  The primitive's graph has a leaf for every entry of y's bulk, whose root is the same global entry
  in x's bulk (paper 000 sec. 3.2.4), and the exchange engine sends one message per pair of
  different ranks with a nonempty meet and copies the rank's own part: rank r sends to the rank
  of worker s of part the entries of box_x(r) meet box_y(s), and receives from x's worker t the
  entries of box_y(r) meet box_x(t), where the boxes are products of ownership ranges. The test
  checks these counts against `DDLayerGetModelComm()` of built repartitions on random pairs.

  Level: developer

.seealso: `DDLayerGetModelComm()`, `DDPrimitiveGetCommVolume()`
@*/
PETSC_EXTERN PetscErrorCode DDRepartitionGetCommVolume_Private(DDTensor x, DDPartition part, PetscInt64 fwd[4], PetscBool *ok)
{
  std::vector<PetscInt> rp[DD_MAX_DIM];
  const PetscInt       *rx[DD_MAX_DIM], *ry[DD_MAX_DIM];
  PetscMPIInt           me;
  size_t                es;

  PetscFunctionBegin;
  for (int k = 0; k < 4; k++) fwd[k] = 0;
  *ok = BalancedRanges(x, part, rp) ? PETSC_TRUE : PETSC_FALSE;
  if (!*ok) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)x), &me));
  PetscCall(DDDataTypeGetSize(x->dtype, &es));
  for (PetscInt k = 0; k < x->order; k++) {
    rx[k] = x->ranges[k];
    ry[k] = rp[k].data();
  }
  const PetscInt order = x->order;
  if (x->part->index >= 0) { /* sends: my piece of x to y's workers */
    Box mine = WorkerBox(order, x->part->shape, rx, x->part->index);
    for (PetscInt s = 0; s < part->size; s++) {
      if (part->ranks[s] == me) continue;
      PetscInt64 n = Meet(order, mine, WorkerBox(order, part->shape, ry, s));
      if (n) {
        fwd[0]++;
        fwd[1] += (PetscInt64)es * n;
      }
    }
  }
  if (part->index >= 0) { /* receives: my piece of y from x's workers */
    Box mine = WorkerBox(order, part->shape, ry, part->index);
    for (PetscInt t = 0; t < x->part->size; t++) {
      if (x->part->ranks[t] == me) continue;
      PetscInt64 n = Meet(order, mine, WorkerBox(order, x->part->shape, rx, t));
      if (n) {
        fwd[2]++;
        fwd[3] += (PetscInt64)es * n;
      }
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Shuffle(D_i, D_j) on this rank: the model's time and memory of the repartition layer of x onto
   part with the given output halo (forward and adjoint; when x is a network input, whose gradient
   training does not need, the adjoint's communication is left out as DDNetGetLayerModelTime() does),
   and whether no data moves here, priced arithmetically as DDLayerGetModelTime() and
   DDLayerGetModelMemory() price the built layer: its communication from
   DDRepartitionGetCommVolume_Private(), its copies (DDLAYERREPARTITION is priced as a memory-bound
   kernel on its bytes, plus the runs of its walk when input and output pieces have one shape) from
   the output's layout on this rank, built here without a tensor. The exchange's message buffers
   are counted at their largest (8 bytes per entry, one per peer, as the engine allocates without
   MPI datatypes): an upper bound of the built layer's memory. t and m are this rank's; the caller
   takes the maximum over the ranks, and the pair moves no data when every rank's ident is 1. */
struct ShuffleLocal {
  double t = INF, m = INF;
  int    ident = 0;
};
static PetscErrorCode ShuffleCostLocal(DDTensor x, DDPartition part, const std::vector<PetscInt> &halo, bool fwdonly, ShuffleLocal *r)
{
  std::vector<PetscInt> rp[DD_MAX_DIM];
  PetscInt64            v[4];
  PetscBool             ok, eq;
  size_t                es;
  const char           *bname;

  PetscFunctionBegin;
  *r = ShuffleLocal();
  PetscCall(DDRepartitionGetCommVolume_Private(x, part, v, &ok));
  if (!ok) PetscFunctionReturn(PETSC_SUCCESS);
  BalancedRanges(x, part, rp);
  PetscCall(DDDataTypeGetSize(x->dtype, &es));
  const PetscInt order = x->order;
  const bool     act   = part->index >= 0;
  PetscInt       n[DD_MAX_DIM], start[DD_MAX_DIM], lo[DD_MAX_DIM], hi[DD_MAX_DIM];
  for (PetscInt k = 0; k < order; k++) {
    PetscInt c = act ? part->coords[k] : 0;
    start[k]   = act ? rp[k][c] : 0;
    n[k]       = act ? rp[k][c + 1] - rp[k][c] : 0;
    lo[k]      = act && !halo.empty() ? PetscMax(halo[k], 0) : 0;
    hi[k]      = act && !halo.empty() ? PetscMax(halo[DD_MAX_DIM + k], 0) : 0;
  }
  DDLayout Ly;
  PetscCall(ddnn::LayoutBuild(&Ly, order, n, start, lo, hi, x->format, x->bs, x->blockdim));
  /* no data moves on this rank: same partition, the same piece (SameLayout()) */
  PetscCall(DDPartitionEqual(x->part, part, &eq));
  r->ident = eq && (x->active ? true : false) == act;
  for (PetscInt k = 0; r->ident && k < order; k++)
    if (x->layout.n[k] != n[k] || x->layout.start[k] != start[k]) r->ident = 0;
  /* the model's input, as model.cxx's LayerModelTime() fills it for the built layer */
  const PetscInt64 bx = x->active ? (PetscInt64)x->layout.bulksize : 0, by = act ? (PetscInt64)Ly.bulksize : 0;
  double           bufs = 0;
  if (v[0]) bufs += 8.0 * (double)v[1] / (double)es + (double)v[0];
  if (v[2]) bufs += 8.0 * (double)v[3] / (double)es + (double)v[2];
  const double mem = (double)es * (double)(act ? Ly.size : 0) + bufs;
  ddnn::ModelCostInput in;
  PetscCall(DDBackendGetDefault(&bname));
  in.backend = bname;
  PetscCallMPI(MPI_Comm_size(PetscObjectComm((PetscObject)x), &in.size));
  in.dtype = x->dtype;
  in.kind  = DDLAYERACTIVATION; /* not a calibrated kind: the memory-bound fit on its bytes */
  in.cold  = ddnn::ModelColdFraction_Private(mem);
  for (int b = 0; b < 2; b++) in.bytes[b] = (PetscReal)es * (PetscReal)(bx + (b ? 2 : 1) * by);
  if (x->active && act) {
    const DDLayout &A = x->layout;
    bool            same = A.order == Ly.order;
    in.rows              = ddnn::LayoutSameOrder(A, Ly);
    for (PetscInt k = 0; same && k < A.order; k++) same = A.n[k] == Ly.n[k];
    if (same) ddnn::ForEachBulkRunPair(A, Ly, [&](PetscInt, PetscInt, PetscInt) { in.runs++; });
  }
  for (int k = 0; k < 4; k++) {
    in.p2p[0][k] = v[k];
    in.p2p[1][k] = v[(k + 2) % 4];
  }
  PetscReal comp[2], comm[2];
  PetscCall(ddnn::ModelLayerTimes_Private(in, comp, comm, NULL, &ok));
  r->t = comp[0] + comm[0] + comp[1] + (fwdonly ? 0 : comm[1]);
  r->m = mem;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDRepartitionGetModelCost_Private - The planner's price, on this rank, of a repartition layer of x onto part with the given output halo (forward and adjoint)

  Not collective

  Input Parameters:
+ x    - a set-up tensor
. part - the target partition (balanced ownership)
- lo, hi - the output's halo widths (NULL: none)

  Output Parameters:
+ t     - the model's time of a forward and a backward on this rank (infinite when it cannot be set up)
. m     - the memory on this rank: the output's storage and the largest message buffers
- ident - whether no data moves on this rank (same partition and piece)

  Notes:
  What `DDNetSetUp()` with -net_distribution auto uses instead of building the layer; the test
  compares it with `DDLayerGetModelTime()` and `DDLayerGetModelMemory()` of the built layer.

  Level: developer

.seealso: `DDRepartitionGetCommVolume_Private()`, `DDNetSetDistribution()`
@*/
PETSC_EXTERN PetscErrorCode DDRepartitionGetModelCost_Private(DDTensor x, DDPartition part, const PetscInt lo[], const PetscInt hi[], PetscReal *t, PetscReal *m, PetscBool *ident)
{
  std::vector<PetscInt> halo;
  ShuffleLocal          r;

  PetscFunctionBegin;
  if (lo && hi) {
    halo.assign(2 * DD_MAX_DIM, 0);
    for (PetscInt k = 0; k < x->order; k++) {
      halo[k]              = lo[k];
      halo[DD_MAX_DIM + k] = hi[k];
    }
  }
  PetscCall(ShuffleCostLocal(x, part, halo, false, &r));
  *t     = r.t;
  *m     = r.m;
  *ident = r.ident ? PETSC_TRUE : PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Shuffle(D_i, D_j) of many pairs at once: each distinct (tensor layout, data type, target
   partition, halo) priced once on this rank (cache), then one reduction over the ranks */
struct ShuffleJob {
  DDTensor                     x;
  DDPartition                  part;
  const std::vector<PetscInt> *halo;
  bool                         fwdonly;
  double                      *t, *m;
  int                         *ident;
};
static std::string ShuffleKey(const ShuffleJob &j)
{
  std::string s;
  auto        add = [&](PetscInt v) { s += std::to_string((long long)v) + ","; };
  DDTensor    x   = j.x;
  add(x->dtype), add(x->format), add(x->bs), add(x->blockdim), add(x->active), add(j.fwdonly), add(x->order);
  s += "|";
  for (PetscInt k = 0; k < x->order; k++) {
    add(x->shape[k]), add(x->lo[k]), add(x->hi[k]), add(x->replicated[k]), add(x->part->shape[k]);
    for (PetscInt p = 0; p <= x->part->shape[k]; p++) add(x->ranges[k][p]);
  }
  s += "|";
  for (PetscInt i = 0; i < x->part->size; i++) add(x->part->ranks[i]);
  s += "|";
  add(j.part->order);
  for (PetscInt k = 0; k < j.part->order; k++) add(j.part->shape[k]);
  for (PetscInt i = 0; i < j.part->size; i++) add(j.part->ranks[i]);
  s += "|";
  for (PetscInt h : *j.halo) add(h);
  return s;
}
static PetscErrorCode ShuffleCosts(MPI_Comm comm, std::vector<ShuffleJob> &jobs, PetscInt *distinct)
{
  std::map<std::string, ShuffleLocal> cache;
  std::vector<PetscReal>              v(3 * jobs.size());

  PetscFunctionBegin;
  for (size_t i = 0; i < jobs.size(); i++) {
    std::string key = ShuffleKey(jobs[i]);
    auto        it  = cache.find(key);
    if (it == cache.end()) {
      ShuffleLocal r;
      PetscCall(ShuffleCostLocal(jobs[i].x, jobs[i].part, *jobs[i].halo, jobs[i].fwdonly, &r));
      it = cache.emplace(key, r).first;
    }
    v[3 * i]     = it->second.t;
    v[3 * i + 1] = it->second.m;
    v[3 * i + 2] = it->second.ident ? 0 : 1;
  }
  *distinct = (PetscInt)cache.size();
  if (!v.empty()) PetscCall(MPIU_Allreduce(MPI_IN_PLACE, v.data(), (PetscMPIInt)v.size(), MPIU_REAL, MPIU_MAX, comm));
  for (size_t i = 0; i < jobs.size(); i++) {
    const bool ident = v[3 * i + 2] == 0 && v[3 * i] < INF;
    *jobs[i].ident   = ident ? 1 : 0;
    *jobs[i].t       = ident ? 0 : v[3 * i];
    *jobs[i].m       = ident ? 0 : v[3 * i + 1];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static std::string PartName(DDPartition p, PetscInt order)
{
  std::string s = "[";
  for (PetscInt k = 0; k < order; k++) s += (k ? "," : "") + std::to_string((long long)p->shape[k]);
  s += "]";
  /* the kind of split (dimension 0 is the sample, 1 the channel, the rest spatial) */
  bool n = p->shape[0] > 1, c = order > 1 && p->shape[1] > 1, sp = false;
  for (PetscInt k = 2; k < order; k++)
    if (p->shape[k] > 1) sp = true;
  std::string kind = !n && !c && !sp ? "serial" : n && !c && !sp ? "sample" : !n && c && !sp ? (order == 2 ? "feature" : "channel") : !n && !c && sp ? "spatial" : n && !c && sp ? "sample x spatial" : "mixed";
  return s + " " + kind;
}

/* all factorisations of P over dims with at most shape[k] workers along k */
static void Factorisations(PetscInt P, const PetscInt *shape, PetscInt order, PetscInt k, std::vector<PetscInt> &cur, std::vector<std::vector<PetscInt>> &out)
{
  if (k == order) {
    if (P == 1) out.push_back(cur);
    return;
  }
  for (PetscInt f = 1; f <= P; f++)
    if (P % f == 0 && f <= shape[k]) {
      cur.push_back(f);
      Factorisations(P / f, shape, order, k + 1, cur, out);
      cur.pop_back();
    }
}

/* a label of the constrained shortest path: time, memory, the vertex's candidate, the candidates of
   the earlier chain vertices a later join still needs (the chain's open joins), and where it came from */
struct Label {
  double           t, m;
  int              c;
  std::vector<int> open;
  int              prev;
};

/* keeps the Pareto front of (t, m); with no cap only the fastest */
static void Prune(std::vector<Label> &L, bool capped)
{
  std::sort(L.begin(), L.end(), [](const Label &a, const Label &b) { return a.t != b.t ? a.t < b.t : a.m < b.m; });
  std::vector<Label> o;
  double             best = INF;
  for (auto &l : L)
    if (l.m < best) {
      o.push_back(l);
      best = l.m;
      if (!capped) break;
    }
  L = o;
}

/*
  Whether the performance model holds this machine's calibration for the backend and data type of
  layer l0 (kernel fits and alpha-beta, on every rank): what an automatic choice of the network
  (-net_distribution auto, -net_weights auto) needs. Without it, set-up calibrates first
  (DDModelCalibrate(), cached for later runs), unless the option <what>_calibrate is false: then
  ready is false and why says what is missing and what to do. A backend that computes in device
  memory is never calibrated (DDModelCalibrate() times host kernels only): ready is false, and why
  says so.
*/
PetscErrorCode ddnn::NetModelCalibrated_Private(DDNet net, DDLayer l0, const char what[], PetscBool *ready, std::string &why)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)net);
  const char *bname;
  PetscBool   have, commok, calibrate = PETSC_TRUE;
  std::string option = std::string(what) + "_calibrate";

  PetscFunctionBegin;
  *ready = PETSC_TRUE;
  why.clear();
  PetscCall(DDLayerGetBackend(l0, &bname));
  {
    DDBackend b;
    DDMemType mt;
    PetscCall(DDBackendGet(bname, &b));
    PetscCall(DDBackendGetMemType(b, &mt));
    if (mt != DD_MEMTYPE_HOST) {
      why    = std::string("the performance model calibrates host backends only, and the network computes on ") + bname + " (" + DDMemTypes[mt] + " memory)";
      *ready = PETSC_FALSE;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  PetscCall(DDModelLoad(comm, bname, l0->output->dtype, &have));
  PetscCall(DDModelGetCommParameters(NULL, NULL, &commok));
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &commok, 1, MPIU_BOOL, MPI_LAND, comm));
  if (have && commok) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscOptionsGetBool(NULL, ((PetscObject)net)->prefix, option.c_str(), &calibrate, NULL));
  if (!calibrate) {
    const char *cache;
    PetscCall(DDModelGetCachePath(&cache));
    why    = std::string("the performance model is not calibrated on this machine for ") + bname + " " + DDDataTypes[l0->output->dtype] + " (model cache " + (cache ? cache : "(none)") + "; " + option + " 0: run once with -dd_model_calibrate or without that option to calibrate)";
    *ready = PETSC_FALSE;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(PetscInfo(net, "%s auto: calibrating the performance model (cached in the model cache for later runs)\n", what));
  PetscCall(DDModelCalibrate(comm, bname, l0->output->dtype));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Chooses the distribution and inserts the repartitions (paper 003 sec. V-C) */
PetscErrorCode ddnn::NetDistribute_Private(DDNet net, std::vector<DDTensor> &xin)
{
  NetImpl    *I    = net->impl;
  MPI_Comm    comm = PetscObjectComm((PetscObject)net);
  PetscMPIInt P;
  PetscBool   ok;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &P));
  PetscCall(NetRemoveAutoLayers_Private(net));
  I->plan = NetPlan();
  const std::vector<Node> user = I->nodes;
  const int               nu   = (int)user.size();
  I->wantgrad.assign(xin.size(), false); /* as after set-up: the model's first layers need no input gradient */

  /* the given distribution: which layers decide, the shapes of their inputs, their partitions */
  /* The set-ups below only price (paper 003 sec. V-C's Cost_D needs the model's inputs, not runnable
     layers): the halo, repartition and scatter primitives count their messages, bytes and buffers
     (BuildStoragePlan(), src/primitive/sfutil.hpp) instead of building star forests and exchange
     plans. -net_distribution_full_trials (developer: the test that both price alike) builds them. */
  PetscBool fulltrials = PETSC_FALSE;
  PetscCall(PetscOptionsGetBool(NULL, ((PetscObject)net)->prefix, "-net_distribution_full_trials", &fulltrials, NULL));
  PetscLogDouble tick[5];
  PetscCall(PetscTime(&tick[0]));
  {
    ddnn::PricingOnlyGuard pricing(!fulltrials);
    PetscCall(NetSetUpLayers_Private(net, xin));
  }
  std::vector<int>      owner(nu);
  std::vector<Decision> dec;
  std::vector<int>      decof(nu, -1);
  for (int i = 0; i < nu; i++) {
    const Node &nd = user[i];
    DDLayerType type;
    const char *prefix;
    PetscBool   pco = PETSC_FALSE;
    int         k0  = nd.inputs[0];
    int         up  = k0 < 0 ? FROM_INPUTS : owner[k0];
    PetscCall(DDLayerGetType(nd.layer, &type));
    PetscCall(PetscObjectGetOptionsPrefix((PetscObject)nd.layer, &prefix));
    if (!strcmp(type, DDLAYERCONV)) PetscCall(PetscOptionsHasName(NULL, prefix, "-layer_conv_channel_workers", &pco));
    if (!strcmp(type, DDLAYERCONVTRANSPOSE)) PetscCall(PetscOptionsHasName(NULL, prefix, "-layer_convtranspose_channel_workers", &pco));
    bool weights = nd.layer->nparams > 0 || !strcmp(type, DDLAYERCONV) || !strcmp(type, DDLAYERCONVTRANSPOSE) || !strcmp(type, DDLAYERAFFINE);
    if (!strcmp(type, DDLAYERREPARTITION)) owner[i] = USER_FIXED;
    else if (weights && nd.inputs.size() == 1 && up != USER_FIXED && !pco && P > 1) {
      Decision d;
      d.node         = i;
      d.pred         = up;
      d.fromnetinput = k0 < 0;
      owner[i]       = i;
      decof[i]       = (int)dec.size();
      dec.push_back(d);
    } else owner[i] = up;
  }
  /* candidates: the given partition ("keep") first, then the factorisations of P that differ from it */
  for (auto &d : dec) {
    DDTensor x = user[d.node].layer->setupin[0];
    Cand     keep;
    PetscCall(PetscObjectReference((PetscObject)x->part));
    keep.part = x->part;
    keep.name = "keep " + PartName(x->part, x->order);
    d.cands.push_back(keep);
    std::vector<std::vector<PetscInt>> fs;
    std::vector<PetscInt>              cur;
    Factorisations(P, x->shape, x->order, 0, cur, fs);
    for (auto &f : fs) {
      std::vector<PetscMPIInt> ranks(P);
      Cand                     c;
      PetscBool                eq;
      for (PetscMPIInt r = 0; r < P; r++) ranks[r] = r;
      PetscCall(DDPartitionCreateCartesian(comm, x->order, f.data(), P, ranks.data(), &c.part));
      PetscCall(DDPartitionEqual(c.part, keep.part, &eq));
      if (eq) {
        PetscCall(DDPartitionDestroy(&c.part));
        continue;
      }
      c.name = PartName(c.part, x->order);
      d.cands.push_back(c);
    }
    d.time.assign(d.cands.size(), INF);
    d.mem.assign(d.cands.size(), INF);
  }
  for (auto &d : dec) {
    size_t na = d.pred >= 0 ? dec[decof[d.pred]].cands.size() : 1;
    d.stime.assign(na, std::vector<double>(d.cands.size(), INF));
    d.smem.assign(na, std::vector<double>(d.cands.size(), INF));
    d.sident.assign(na, std::vector<int>(d.cands.size(), 0));
    d.arrive.assign(na, NULL);
    d.halo.assign(d.cands.size(), std::vector<PetscInt>());
  }
  double constT = 0, constM = 0; /* the layers no decision layer owns */
  std::vector<Join> joins;
  for (int i = 0; i < nu; i++)
    if (decof[i] < 0)
      for (size_t s = 1; s < user[i].inputs.size(); s++) {
        Join J;
        int  k = user[i].inputs[s];
        J.node = i;
        J.slot = (int)s;
        J.src  = k >= 0 && owner[k] >= 0 ? decof[owner[k]] : -1;
        J.dst  = owner[i] >= 0 ? decof[owner[i]] : -1;
        size_t ns = J.src >= 0 ? dec[J.src].cands.size() : 1, nd = J.dst >= 0 ? dec[J.dst].cands.size() : 1;
        J.arrive.assign(ns, NULL);
        J.target.assign(nd, NULL);
        J.halo.assign(nd, std::vector<PetscInt>());
        J.t.assign(ns, std::vector<double>(nd, INF));
        J.m.assign(ns, std::vector<double>(nd, INF));
        J.ident.assign(ns, std::vector<int>(nd, 0));
        joins.push_back(J);
      }
  auto destroyjoins = [&]() -> PetscErrorCode {
    PetscFunctionBegin;
    for (auto &J : joins) {
      for (auto &x : J.arrive) PetscCall(DDTensorDestroy(&x));
      for (auto &p : J.target) PetscCall(DDPartitionDestroy(&p));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  };

  I->plan.ncands.clear();
  for (auto &d : dec) I->plan.ncands.push_back((PetscInt)d.cands.size());
  const bool forced = !I->forcedplan.empty();
  if (forced) { /* a plan given by a test (the brute force): no choice */
    PetscCheck(I->forcedplan.size() == dec.size(), comm, PETSC_ERR_ARG_SIZ, "A forced plan needs %zu decision layers, not %zu", dec.size(), I->forcedplan.size());
    for (size_t j = 0; j < dec.size(); j++) {
      PetscCheck(I->forcedplan[j] >= 0 && I->forcedplan[j] < (int)dec[j].cands.size(), comm, PETSC_ERR_ARG_OUTOFRANGE, "Forced candidate %d of layer %s out of range", I->forcedplan[j], user[dec[j].node].name.c_str());
      dec[j].chosen = I->forcedplan[j];
      dec[j].time.assign(dec[j].cands.size(), 0);
      for (auto &v : dec[j].stime) v.assign(dec[j].cands.size(), 0);
    }
  }
  if (!dec.empty() && !forced) {
    { /* the model must be calibrated for the network's backend and data type */
      PetscBool   ready;
      std::string why;
      PetscCall(ddnn::NetModelCalibrated_Private(net, user[0].layer, "-net_distribution", &ready, why));
      if (!ready) { /* no calibration here (CI, short runs): the given distribution, said aloud */
        PetscCall(PetscPrintf(comm, "-net_distribution auto: %s; keeping the given distribution\n", why.c_str()));
        for (auto &d : dec)
          for (auto &c : d.cands) PetscCall(DDPartitionDestroy(&c.part));
        PetscCall(destroyjoins());
        I->plan = NetPlan();
        PetscCall(NetSetUpLayers_Private(net, xin));
        PetscFunctionReturn(PETSC_SUCCESS);
      }
    }
    PetscCall(PetscTime(&tick[1]));
    /* trial set-ups: trial t gives every decision layer its candidate t (or keep); one that fails
       is retried layer by layer, so that a candidate a layer does not accept is only that one's loss */
    size_t T = 0;
    for (auto &d : dec) T = std::max(T, d.cands.size());
    auto trial = [&](const std::vector<int> &a, const std::vector<bool> &record, PetscBool *tok) -> PetscErrorCode {
      std::vector<Ins> ins;
      PetscFunctionBegin;
      for (size_t j = 0; j < dec.size(); j++)
        if (!(a[j] == 0 && dec[j].fromnetinput)) ins.push_back({dec[j].node, 0, dec[j].cands[a[j]].part});
      for (int i = 0; i < nu; i++)
        if (decof[i] < 0)
          for (size_t s = 1; s < user[i].inputs.size(); s++) ins.push_back({i, (int)s, NULL});
      PetscCall(NetInsert(net, user, ins));
      {
        ddnn::PricingOnlyGuard pricing(!fulltrials, true); /* the user's layers were checked by the first set-up; the inserted repartitions are alike on every rank */
        PetscCall(NetTrySetUp(net, xin, tok));
      }
      if (*tok) {
        std::vector<double> t, m;
        std::vector<int>    pos(nu);
        PetscCall(NetNodeCosts(net, t, m));
        for (size_t i = 0, u = 0; i < I->nodes.size(); i++)
          if (!I->nodes[i].autoinserted) pos[u++] = (int)i;
        for (size_t j = 0; j < dec.size(); j++)
          if (record[j]) {
            double st = 0, sm = 0;
            for (int i = 0; i < nu; i++)
              if (owner[i] == dec[j].node) {
                st += t[pos[i]];
                sm += m[pos[i]];
              }
            dec[j].time[a[j]] = st;
            dec[j].mem[a[j]]  = sm;
          }
        if (std::all_of(a.begin(), a.end(), [](int v) { return v == 0; })) {
          for (int i = 0; i < nu; i++)
            if (owner[i] < 0) {
              constT += t[pos[i]];
              constM += m[pos[i]];
            }
        }
        /* at each join: what arrives under its source's candidate, the partition and halo it goes to under its owner's */
        for (auto &J : joins) {
          int as = J.src >= 0 ? a[J.src] : 0, bd = J.dst >= 0 ? a[J.dst] : 0;
          int r  = I->nodes[pos[J.node]].inputs[J.slot];
          if (r < 0 || !I->nodes[r].autoinserted) continue;
          DDLayer rl = I->nodes[r].layer;
          if (!J.arrive[as]) PetscCall(DDTensorDuplicateLayout(rl->setupin[0], rl->setupin[0]->dtype, &J.arrive[as]));
          if (!J.target[bd]) {
            PetscCall(PetscObjectReference((PetscObject)rl->output->part));
            J.target[bd] = rl->output->part;
            J.halo[bd].assign(2 * DD_MAX_DIM, 0);
            PetscCall(DDTensorGetHalo(rl->output, J.halo[bd].data(), J.halo[bd].data() + DD_MAX_DIM));
          }
        }
        /* what arrives at each decision layer under its parent's candidate, and the halo it wants under its own */
        for (size_t j = 0; j < dec.size(); j++) {
          Decision &d  = dec[j];
          int       ap = d.pred >= 0 ? a[decof[d.pred]] : 0;
          int       k0 = I->nodes[pos[d.node]].inputs[0];
          if (k0 >= 0 && I->nodes[k0].autoinserted) {
            DDTensor y = I->nodes[k0].layer->output;
            if (record[j]) {
              d.halo[a[j]].assign(2 * DD_MAX_DIM, 0);
              PetscCall(DDTensorGetHalo(y, d.halo[a[j]].data(), d.halo[a[j]].data() + DD_MAX_DIM));
            }
            k0 = I->nodes[k0].inputs[0];
          }
          if (!d.arrive[ap]) {
            DDTensor x = k0 < 0 ? xin[-1 - k0] : I->nodes[k0].layer->output;
            PetscCall(DDTensorDuplicateLayout(x, x->dtype, &d.arrive[ap]));
          }
        }
      }
      PetscCall(NetRestore(net, user));
      PetscFunctionReturn(PETSC_SUCCESS);
    };
    for (size_t t = 0; t < T; t++) {
      std::vector<int>  a(dec.size());
      std::vector<bool> rec(dec.size(), true);
      for (size_t j = 0; j < dec.size(); j++) a[j] = t < dec[j].cands.size() ? (int)t : 0;
      PetscCall(trial(a, rec, &ok));
      if (!ok && t == 0) SETERRQ(comm, PETSC_ERR_PLIB, "-net_distribution auto: the network does not set up with explicit repartitions onto its given partitions");
      if (!ok)
        for (size_t j = 0; j < dec.size(); j++) {
          if (t >= dec[j].cands.size()) continue;
          std::vector<int>  b(dec.size(), 0);
          std::vector<bool> r(dec.size(), false);
          b[j] = (int)t;
          r[j] = true;
          PetscCall(trial(b, r, &ok));
          if (!ok) PetscCall(PetscInfo(net, "-net_distribution auto: layer %s does not accept the partition %s\n", user[dec[j].node].name.c_str(), dec[j].cands[t].name.c_str()));
        }
    }
    PetscCall(PetscTime(&tick[2]));
    /* Shuffle(D_i, D_j): a repartition from what arrives onto each candidate, its output with the
       halo the layer wants there; priced from the ownership boxes, each distinct pair once */
    PetscInt distinct = 0;
    {
      std::vector<ShuffleJob> jobs;
      for (auto &d : dec)
        for (size_t ap = 0; ap < d.arrive.size(); ap++) {
          if (!d.arrive[ap]) continue;
          for (size_t c = 0; c < d.cands.size(); c++)
            if (d.time[c] < INF) jobs.push_back({d.arrive[ap], d.cands[c].part, &d.halo[c], d.fromnetinput, &d.stime[ap][c], &d.smem[ap][c], &d.sident[ap][c]});
        }
      for (auto &J : joins)
        for (size_t a = 0; a < J.arrive.size(); a++)
          for (size_t b = 0; b < J.target.size(); b++)
            if (J.arrive[a] && J.target[b]) jobs.push_back({J.arrive[a], J.target[b], &J.halo[b], user[J.node].inputs[J.slot] < 0, &J.t[a][b], &J.m[a][b], &J.ident[a][b]});
      PetscCall(ShuffleCosts(comm, jobs, &distinct));
      for (auto &d : dec)
        for (auto &a : d.arrive) PetscCall(DDTensorDestroy(&a));
    }
    for (auto &d : dec) { /* the tables, for -info */
      std::string t;
      for (size_t c = 0; c < d.cands.size(); c++) {
        t += " " + d.cands[c].name + ": " + std::to_string(1e3 * d.time[c]) + " ms, shuffles from the parent's candidates";
        for (size_t a = 0; a < d.stime.size(); a++) t += " " + std::to_string(1e3 * d.stime[a][c]) + (d.sident[a][c] ? "(none)" : "");
        t += ";";
      }
      PetscCall(PetscInfo(net, "-net_distribution auto: layer %s:%s\n", user[d.node].name.c_str(), t.c_str()));
    }
    for (auto &J : joins) {
      std::string t;
      for (size_t a = 0; a < J.t.size(); a++) {
        t += " [";
        for (size_t b = 0; b < J.t[a].size(); b++) t += (b ? " " : "") + std::to_string(1e3 * J.t[a][b]);
        t += "]";
      }
      PetscCall(PetscInfo(net, "-net_distribution auto: join %s input %d (ms, per candidate of %s, per candidate of %s):%s\n", user[J.node].name.c_str(), J.slot, J.src >= 0 ? user[dec[J.src].node].name.c_str() : "(fixed)", J.dst >= 0 ? user[dec[J.dst].node].name.c_str() : "(fixed)", t.c_str()));
    }
    PetscCall(PetscTime(&tick[3]));
    PetscCall(PetscInfo(net, "-net_distribution auto: %zu decision layers; set-up and calibration %g s, trials %g s, shuffles %g s (%" PetscInt_FMT " distinct on rank 0's side)\n", dec.size(), tick[1] - tick[0], tick[2] - tick[1], tick[3] - tick[2], distinct));
    /* the shortest path over the heaviest chain first (paper 003 sec. V-C), under the memory cap */
    const bool capped = I->memlimit > 0;
    double     usedM  = constM;
    std::vector<double> minM(dec.size(), INF), w(dec.size(), 0);
    for (size_t j = 0; j < dec.size(); j++) {
      double bt = INF;
      for (size_t c = 0; c < dec[j].cands.size(); c++) {
        if (dec[j].time[c] < bt) bt = dec[j].time[c];
        minM[j] = std::min(minM[j], dec[j].mem[c]);
      }
      w[j] = bt < INF ? bt : 0;
    }
    std::vector<bool> done(dec.size(), false);
    for (;;) {
      /* heaviest chain of undecided layers: best[j] = w[j] + max over undecided children */
      std::vector<double> best(dec.size(), 0);
      std::vector<int>    next(dec.size(), -1);
      for (int j = (int)dec.size() - 1; j >= 0; j--) { /* children come after their parents */
        if (done[j]) continue;
        best[j] += w[j];
        if (dec[j].pred >= 0) {
          int p = decof[dec[j].pred];
          if (!done[p] && (next[p] < 0 || best[j] > best[next[p]])) next[p] = j;
        }
      }
      for (int j = (int)dec.size() - 1; j >= 0; j--) /* best of a parent: its own weight plus its best child's */
        if (!done[j] && next[j] >= 0) best[j] = w[j] + best[next[j]];
      int start = -1;
      for (size_t j = 0; j < dec.size(); j++)
        if (!done[j] && (dec[j].pred < 0 || done[decof[dec[j].pred]]) && (start < 0 || best[j] > best[start])) start = (int)j;
      if (start < 0) break;
      std::vector<int> chain;
      for (int j = start; j >= 0; j = next[j]) chain.push_back(j);
      /* the memory the layers not yet placed need at least */
      double reserve = 0;
      for (size_t j = 0; j < dec.size(); j++)
        if (!done[j] && std::find(chain.begin(), chain.end(), (int)j) == chain.end()) reserve += minM[j];
      double budget = capped ? (double)I->memlimit - usedM - reserve : INF;
      /* The joins (left out of paper 003 sec. V-C) enter the path's cost. A join whose other end is
         fixed (decided on an earlier chain, or without a choice) is a cost on its chain vertex; one
         whose two ends are both on this chain is exact: the earlier vertex's candidate is carried in
         the labels up to the later one (the U-Net's skips: the encoder's candidate up to the decoder's
         concatenation). A join whose other end is on a chain not yet solved is left to that chain,
         which then sees this end fixed: a chain solved first does not know what its choice costs the
         joins of the branches solved after it, where the plan can miss the optimum. */
      const int        nq = (int)chain.size();
      std::vector<int> qof(dec.size(), -1);
      for (int q = 0; q < nq; q++) qof[chain[q]] = q;
      std::vector<std::vector<double>> ut(nq), um(nq);
      for (int q = 0; q < nq; q++) {
        ut[q].assign(dec[chain[q]].cands.size(), 0);
        um[q] = ut[q];
      }
      struct JPair {
        int         e, l; /* the earlier and the later chain position */
        const Join *J;
        bool        srcfirst;
      };
      std::vector<JPair> pairs;
      for (auto &J : joins) {
        int  qs = J.src >= 0 ? qof[J.src] : -1, qd = J.dst >= 0 ? qof[J.dst] : -1;
        bool sf = J.src < 0 || done[J.src], df = J.dst < 0 || done[J.dst];
        int  cs = J.src >= 0 ? dec[J.src].chosen : 0, cd = J.dst >= 0 ? dec[J.dst].chosen : 0;
        if (qs >= 0 && qd >= 0 && qs == qd)
          for (size_t c = 0; c < ut[qs].size(); c++) {
            ut[qs][c] += J.t[c][c];
            um[qs][c] += J.m[c][c];
          }
        else if (qs >= 0 && qd >= 0) pairs.push_back({std::min(qs, qd), std::max(qs, qd), &J, qs < qd});
        else if (qd >= 0 && sf)
          for (size_t c = 0; c < ut[qd].size(); c++) {
            ut[qd][c] += J.t[cs][c];
            um[qd][c] += J.m[cs][c];
          }
        else if (qs >= 0 && df)
          for (size_t c = 0; c < ut[qs].size(); c++) {
            ut[qs][c] += J.t[c][cd];
            um[qs][c] += J.m[c][cd];
          }
      }
      /* open[q]: the positions e <= q whose candidate a join at a later position needs */
      std::vector<std::vector<int>> open(nq);
      for (int q = 0; q < nq; q++) {
        for (auto &pr : pairs)
          if (pr.e <= q && pr.l > q && std::find(open[q].begin(), open[q].end(), pr.e) == open[q].end()) open[q].push_back(pr.e);
        std::sort(open[q].begin(), open[q].end());
      }
      auto at = [&](int q, int e) { return (int)(std::find(open[q].begin(), open[q].end(), e) - open[q].begin()); };
      std::vector<std::vector<Label>> L(nq);
      for (int q = 0; q < nq; q++) {
        Decision                                               &d = dec[chain[q]];
        std::map<std::pair<int, std::vector<int>>, std::vector<Label>> groups;
        for (size_t c = 0; c < d.cands.size(); c++) {
          if (!(d.time[c] < INF)) continue;
          auto extend = [&](const Label *a, int l) {
            int    ap = a ? a->c : (d.pred >= 0 ? dec[decof[d.pred]].chosen : 0);
            double t  = (a ? a->t : 0) + d.stime[ap][c] + d.time[c] + ut[q][c];
            double m  = (a ? a->m : 0) + d.smem[ap][c] + d.mem[c] + um[q][c];
            for (auto &pr : pairs) /* the joins closing here */
              if (pr.l == q) {
                int ce = a->open[at(q - 1, pr.e)];
                t += pr.srcfirst ? pr.J->t[ce][c] : pr.J->t[c][ce];
                m += pr.srcfirst ? pr.J->m[ce][c] : pr.J->m[c][ce];
              }
            if (!(t < INF) || m > budget) return;
            Label x{t, m, (int)c, std::vector<int>(open[q].size()), l};
            for (size_t o = 0; o < open[q].size(); o++) x.open[o] = open[q][o] == q ? (int)c : a->open[at(q - 1, open[q][o])];
            groups[{(int)c, x.open}].push_back(x);
          };
          if (q == 0) extend(nullptr, -1);
          else
            for (size_t l = 0; l < L[q - 1].size(); l++) extend(&L[q - 1][l], (int)l);
        }
        for (auto &g : groups) {
          Prune(g.second, capped);
          L[q].insert(L[q].end(), g.second.begin(), g.second.end());
        }
      }
      int bl = -1;
      for (size_t l = 0; l < L.back().size(); l++)
        if (bl < 0 || L.back()[l].t < L.back()[bl].t || (L.back()[l].t == L.back()[bl].t && L.back()[l].m < L.back()[bl].m)) bl = (int)l;
      if (bl < 0) { /* nothing fits: the smallest memory of any plan */
        double minplan = constM;
        for (size_t j = 0; j < dec.size(); j++) {
          double mj = INF;
          for (size_t c = 0; c < dec[j].cands.size(); c++)
            for (size_t a = 0; a < dec[j].stime.size(); a++) mj = std::min(mj, dec[j].mem[c] + dec[j].smem[a][c]);
          minplan += mj;
        }
        for (auto &J : joins) {
          double mj = INF;
          for (auto &r : J.m)
            for (double v : r) mj = std::min(mj, v);
          if (mj < INF) minplan += mj;
        }
        PetscCall(NetRestore(net, user));
        for (auto &d : dec)
          for (auto &c : d.cands) PetscCall(DDPartitionDestroy(&c.part));
        PetscCall(destroyjoins());
        SETERRQ(comm, PETSC_ERR_MEM, "-net_distribution auto: no distribution of the network fits the memory limit of %" PetscInt64_FMT " bytes per rank (-net_memory_limit, DDNetSetMemoryLimit()): no plan is predicted to need less than %.0f bytes per rank (each layer's smallest share, summed; the plans that combine them need more)", I->memlimit, minplan);
      }
      usedM += L.back()[bl].m;
      for (int q = nq - 1; q >= 0; q--) {
        const Label &lab = L[q][bl];
        dec[chain[q]].chosen = lab.c;
        done[chain[q]]       = true;
        bl                   = lab.prev;
      }
    }
  }
  /* the plan: a repartition before every decision layer whose candidate differs from what arrives,
     and before every input of a multi-input layer that inherits from another owner than its input 0 */
  std::vector<Ins> ins;
  double           predicted = constT;
  std::string      view      = "automatic distribution (-net_distribution auto; paper 003 sec. V-C) on " + std::to_string(P) + " rank(s)" + (forced ? " (a forced plan)" : "") + ":\n";
  if (!dec.empty()) view += "  per layer with weights: its input's partition, the predicted time (forward + backward) of it and the layers inheriting its partition; the alternatives\n";
  for (auto &d : dec) {
    int ap = d.pred >= 0 ? dec[decof[d.pred]].chosen : 0;
    int c  = d.chosen;
    if (!(d.fromnetinput && c == 0)) ins.push_back({d.node, 0, d.cands[c].part}); /* dropped below if no data would move */
    predicted += d.time[c] + d.stime[ap][c];
    char line[256];
    PetscCall(PetscSNPrintf(line, sizeof(line), "  %-12s %-28s %10.4f ms%s;", user[d.node].name.c_str(), d.cands[c].name.c_str(), 1e3 * d.time[c], d.sident[ap][c] ? "" : " + repartition"));
    view += line;
    view += " alternatives:";
    for (size_t k = 0; k < d.cands.size(); k++) {
      if ((int)k == c) continue;
      if (d.time[k] < INF) PetscCall(PetscSNPrintf(line, sizeof(line), " %s %.4f ms,", d.cands[k].name.c_str(), 1e3 * d.time[k]));
      else PetscCall(PetscSNPrintf(line, sizeof(line), " %s not accepted,", d.cands[k].name.c_str()));
      view += line;
    }
    if (view.back() == ',') view.pop_back();
    view += "\n";
  }
  if (!forced)
    for (auto &J : joins) predicted += J.t[J.src >= 0 ? dec[J.src].chosen : 0][J.dst >= 0 ? dec[J.dst].chosen : 0];
  bool setup = false; /* the net is set up with the final graph */
  { /* the inputs k > 0 of multi-input layers: a repartition onto input 0's partition; then every
       inserted repartition that moves no data (the partition arrives as wanted) is dropped */
    std::vector<Ins> all = ins, keep;
    for (int i = 0; i < nu; i++)
      if (decof[i] < 0)
        for (size_t s = 1; s < user[i].inputs.size(); s++) all.push_back({i, (int)s, NULL});
    if (!forced && !dec.empty()) { /* which move data is known from the tables (the arithmetic shuffles): no set-up to find out */
      for (auto &d : dec) {
        int ap = d.pred >= 0 ? dec[decof[d.pred]].chosen : 0;
        if (!(d.fromnetinput && d.chosen == 0) && !d.sident[ap][d.chosen]) keep.push_back({d.node, 0, d.cands[d.chosen].part});
      }
      for (auto &J : joins)
        if (!J.ident[J.src >= 0 ? dec[J.src].chosen : 0][J.dst >= 0 ? dec[J.dst].chosen : 0]) keep.push_back({J.node, J.slot, NULL});
    } else if (!all.empty()) {
      std::sort(all.begin(), all.end(), [](const Ins &a, const Ins &b) { return a.before != b.before ? a.before < b.before : a.slot < b.slot; });
      PetscCall(NetInsert(net, user, all));
      PetscCall(NetSetUpLayers_Private(net, xin));
      size_t q = 0;
      for (auto &n : I->nodes) {
        if (!n.autoinserted) continue;
        PetscBool same;
        PetscCall(SameLayout(n.layer->setupin[0], n.layer->output, &same));
        if (!same) keep.push_back(all[q]);
        q++;
      }
      if (keep.size() == all.size()) setup = true;
      else PetscCall(NetRestore(net, user));
    }
    ins = keep;
  }
  if (!setup) PetscCall(NetInsert(net, user, ins));
  for (auto &d : dec)
    for (auto &c : d.cands) PetscCall(DDPartitionDestroy(&c.part)); /* the inserted layers hold references */
  PetscCall(destroyjoins());
  PetscCall(PetscTime(&tick[4]));
  PetscCall(PetscInfo(net, "-net_distribution auto: plan and its repartitions %g s\n", tick[4] - tick[0]));
  /* the plan's own figures, from a set-up of it (which DDNetSetUp() keeps) */
  if (!setup) PetscCall(NetSetUpLayers_Private(net, xin));
  {
    std::vector<double> t, m;
    double              mem = 0, step = 0;
    PetscCall(NetNodeCosts(net, t, m));
    for (size_t i = 0; i < t.size(); i++) {
      mem += m[i];
      step += t[i];
      if (I->nodes[i].autoinserted) {
        char line[256];
        PetscCall(PetscSNPrintf(line, sizeof(line), "  inserted %s: repartition %s, %.4f ms\n", I->nodes[i].name.c_str(), I->nodes[i].automatch >= 0 ? ("onto the partition of input 0 of " + I->nodes[I->nodes[i].automatch].name).c_str() : "onto the chosen partition", 1e3 * t[i]));
        view += line;
      }
    }
    I->plan.inserted  = (PetscInt)ins.size();
    I->plan.predicted = step;
    I->plan.memory    = (PetscInt64)mem;
    char line[256];
    PetscCall(PetscSNPrintf(line, sizeof(line), "  predicted step (the layers, forward + backward): %.4f ms; memory per rank %.1f KiB%s\n", 1e3 * step, mem / 1024.0, I->memlimit > 0 ? (" (limit " + std::to_string((long long)(I->memlimit / 1024)) + " KiB)").c_str() : ""));
    view += line;
    if (I->memlimit > 0 && mem > (double)I->memlimit) { /* the tables price each layer next to an explicit repartition: the set-up may differ a little */
      PetscCall(PetscSNPrintf(line, sizeof(line), "  note: the plan's set-up predicts %.0f bytes per rank, above the limit %" PetscInt64_FMT " its tables met\n", mem, I->memlimit));
      view += line;
    }
  }
  if (!forced && !dec.empty()) {
    char line[256];
    PetscCall(PetscSNPrintf(line, sizeof(line), "  the shortest path's cost (the layers' times from the trials and the shuffles): %.4f ms\n", 1e3 * predicted));
    view += line;
  }
  if (!forced && !dec.empty()) { /* the tables, for the test that the pricing-only trials price as the full ones */
    auto &v = I->plan.tables;
    v.push_back(constT), v.push_back(constM);
    for (auto &d : dec) {
      v.push_back(d.chosen);
      for (size_t c = 0; c < d.cands.size(); c++) v.push_back(d.time[c]), v.push_back(d.mem[c]);
      for (size_t a = 0; a < d.stime.size(); a++)
        for (size_t c = 0; c < d.cands.size(); c++) v.push_back(d.stime[a][c]), v.push_back(d.smem[a][c]), v.push_back(d.sident[a][c]);
    }
    for (auto &J : joins)
      for (size_t a = 0; a < J.t.size(); a++)
        for (size_t b = 0; b < J.t[a].size(); b++) v.push_back(J.t[a][b]), v.push_back(J.m[a][b]), v.push_back(J.ident[a][b]);
    v.push_back(predicted);
  }
  I->plan.view = view;
  I->plan.done = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}
