/*
  Replicated weights (issue 16, item 6): the network's weight mode (DDNetSetWeightMode()).

  A layer whose input is split over samples or space broadcasts its weights to the workers that
  use them, w^ = B w, and sums their gradients back, dw += B^* dw^ (paper 000 sec. 4.1; B and its
  adjoint, the sum-reduction, sec. 3.2.1-3.2.2). In the broadcast mode every Forward applies B and
  every Backward B^*, one collective per parameter and call. In the replicated mode the network
  keeps the replicas w^ between calls and runs the same operator pair batched:

  - B: at the start of DDNetForward(), when some parameter changed since the last refresh (its
    PetscObjectState: the optimizer step, DDNetLoadWeights(), a checkpoint restart,
    DDNetInitializeParameters(), any DDTensor write), ONE broadcast per worker group of the
    packed parameters (a persistent bucket) refreshes every replica of the group;
  - B^*: the layers add their replicas' local gradients dw^ to the bucket during the backward,
    and at the end of DDNetBackward() ONE all-reduce per worker group sums them; the parameter's
    root adds the sum to its gradient, so gradients are exact after every DDNetBackward().

  A worker group is the set of ranks sharing one piece of a parameter (the root holding w's
  piece, and the workers holding its copies), as DDPRIMITIVEBROADCAST forms it: every layer on a
  sample or spatial split of all ranks shares one group; layers whose weights are split over
  channel workers have one group per piece. The sums are the sums of the sum-reduction, in the
  order MPI_Allreduce adds them (MPI_Reduce's order in broadcast mode: the same at 2 ranks,
  possibly another association, so a rounding difference, at more).

  The refresh is decided by each group together: every rank looks at its own copy of the
  parameters' states, and one small all-reduce per group (MAX of a flag per bucket) makes a
  change seen on any rank of the group a refresh on all of them, so a parameter written on some
  ranks only (DDTensorGetArray() on one rank) is refreshed, not a hang.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddnetimpl.h>
#include <ddnn/private/ddbackendimpl.h> /* HostArray */
#include <ddmodel.h> /* DDNetGetModelTime(): -net_weights auto */
#include <tensor/layout.hpp>
#include <primitive/bcastgroups.hpp>
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

using ddnn::NetImpl;

const char *const DDNetWeightModes[] = {"broadcast", "replicated", "auto", "DDNetWeightMode", "DD_NET_WEIGHTS_", nullptr};

namespace ddnn
{
/* one parameter piece of a bucket on this rank */
struct ReplicaEntry {
  DDLayer  l;
  PetscInt k;             /* the replica's index in l->replicas */
  DDTensor wh;            /* to check that the layer was not set up again */
  PetscInt off, count;    /* entries in the bucket */
  bool     root, member;  /* this rank holds w's piece / a copy */
};

/* the parameters of one worker group and data type, packed */
struct ReplicaBucket {
  std::vector<PetscMPIInt>  ranks; /* the root first, then the other workers, increasing */
  DDDataType                dtype;
  MPI_Datatype              mt;
  size_t                    es = 0;
  MPI_Comm                  comm = MPI_COMM_NULL; /* the group's (rank 0 the root); MPI_COMM_NULL: one rank */
  std::vector<ReplicaEntry> entries;
  PetscInt                  count = 0;
  std::vector<char>         wbuf, gbuf; /* the weights (refresh), the replicas' gradients (summed) */
};

struct NetReplicas {
  std::vector<ReplicaBucket>                          buckets;
  std::map<std::vector<PetscMPIInt>, MPI_Comm>        comms; /* per distinct group */
};
} // namespace ddnn

using ddnn::NetReplicas;
using ddnn::ReplicaBucket;
using ddnn::ReplicaEntry;

static PetscLogEvent NET_ReplBcast = 0, NET_ReplSum = 0;

/* the groups of a broadcast w -> wh that this rank belongs to, as DDPRIMITIVEBROADCAST forms them,
   each group's ranks as the root and then the others increasing (a bucket's key) */
static void ReplicaGroups(DDTensor one, DDTensor many, std::vector<ddnn::BcastGroup> &mine)
{
  ddnn::BroadcastGroupsOf(one, many, mine);
  for (auto &g : mine) {
    std::sort(g.ranks.begin() + 1, g.ranks.end());
    g.ranks.erase(std::unique(g.ranks.begin() + 1, g.ranks.end()), g.ranks.end());
  }
}

/* Frees the buckets and the groups' communicators; the layers' replicas are no longer kept */
PetscErrorCode ddnn::NetReplicasDestroy_Private(DDNet net)
{
  NetImpl *I = net->impl;

  PetscFunctionBegin;
  if (!I->replicas) PetscFunctionReturn(PETSC_SUCCESS);
  for (auto &nd : I->nodes)
    for (PetscInt k = 0; nd.layer && k < nd.layer->nreplicas; k++) {
      DDLayerReplica &r = nd.layer->replicas[k];
      r.kept = r.fresh = r.added = PETSC_FALSE;
      r.slot = NULL;
    }
  for (auto &c : I->replicas->comms)
    if (c.second != MPI_COMM_NULL) PetscCallMPI(MPI_Comm_free(&c.second));
  delete I->replicas;
  I->replicas = nullptr;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode NetReplicasBuild(DDNet);
static PetscErrorCode NetReplicasChoose(DDNet);

/*
  The weight mode's set-up, after the layers': nothing in the broadcast mode; the buckets in the
  replicated mode; in the automatic one the buckets if the performance model predicts the smaller
  step with them (NetReplicasChoose()).
*/
PetscErrorCode ddnn::NetReplicasSetUp_Private(DDNet net)
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);

  PetscFunctionBegin;
  PetscCall(NetReplicasDestroy_Private(net));
  I->weightchoice = NetWeightChoice();
  PetscCall(DDCheckSameString(comm, "The network's weight mode (-net_weights)", DDNetWeightModes[I->weightmode]));
  if (I->weightmode == DD_NET_WEIGHTS_BROADCAST) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(NetReplicasBuild(net));
  if (I->weightmode == DD_NET_WEIGHTS_AUTO) PetscCall(NetReplicasChoose(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  -net_weights auto: prices one step (DDNetGetModelTime(): a forward after an update and a
  backward) with the buckets just built and without them, and keeps the buckets if that step is
  predicted shorter. Nothing to choose when no bucket spans two ranks (one rank, or no weight
  broadcast): broadcast. The model needs this machine's calibration for the network's backend and
  data type: set-up calibrates first if the cache lacks it (as -net_distribution auto does), or with
  -net_weights_calibrate 0 keeps the broadcast mode and says so.
*/
static PetscErrorCode NetReplicasChoose(DDNet net)
{
  NetImpl                                *I    = net->impl;
  MPI_Comm                                comm = PetscObjectComm((PetscObject)net);
  std::vector<ddnn::NetReplicaBucketInfo> buckets;
  PetscInt64                              spans = 0;
  ddnn::NetWeightChoice                  &c     = I->weightchoice;

  PetscFunctionBegin;
  PetscCall(ddnn::NetReplicasGetBuckets_Private(net, buckets));
  for (const auto &b : buckets) spans += b.group > 1;
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPIU_INT64, MPI_MAX, comm));
  c.decided = true;
  if (!spans) {
    c.why = "no weight is broadcast to another rank";
    PetscCall(ddnn::NetReplicasDestroy_Private(net));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  {
    PetscBool ready;
    PetscCall(ddnn::NetModelCalibrated_Private(net, I->nodes[0].layer, "-net_weights", &ready, c.why));
    if (!ready) {
      c.why += "; -net_weights_calibrate 0";
      PetscCall(PetscPrintf(comm, "-net_weights auto: %s; broadcasting the weights\n", c.why.c_str()));
      PetscCall(ddnn::NetReplicasDestroy_Private(net));
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  PetscReal t[2];
  PetscCall(DDNetGetModelTime(net, &t[0], &t[1], NULL));
  c.treplicated = t[0] + t[1];
  PetscCall(ddnn::NetReplicasDestroy_Private(net));
  PetscCall(DDNetGetModelTime(net, &t[0], &t[1], NULL));
  c.tbroadcast = t[0] + t[1];
  /* the same numbers on every rank (DDNetGetModelTime() reduces them): one decision */
  if (c.treplicated < c.tbroadcast) PetscCall(NetReplicasBuild(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Builds the buckets of the replicated mode: every layer's replicas, grouped by worker group and
  data type, each group's communicator created once (MPI_Comm_create_group, the groups in one order
  on every rank), and the persistent buffers.
*/
static PetscErrorCode NetReplicasBuild(DDNet net)
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);

  PetscFunctionBegin;
  if (!NET_ReplBcast) {
    PetscCall(PetscLogEventRegister("DDNetReplBcast", DD_NET_CLASSID, &NET_ReplBcast));
    PetscCall(PetscLogEventRegister("DDNetReplSum", DD_NET_CLASSID, &NET_ReplSum));
  }
  auto *R = new NetReplicas;
  I->replicas = R;
  std::map<std::pair<std::vector<PetscMPIInt>, int>, size_t> index; /* (group, data type) -> bucket */
  std::vector<ddnn::BcastGroup>                               groups;
  for (auto &nd : I->nodes) {
    DDLayer l = nd.layer;
    for (PetscInt k = 0; k < l->nreplicas; k++) {
      DDLayerReplica &r = l->replicas[k];
      r.kept  = PETSC_TRUE;
      r.fresh = r.added = PETSC_FALSE;
      r.slot  = NULL;
      ReplicaGroups(r.w, r.wh, groups);
      for (auto &g : groups) {
        if (!g.count) continue; /* every rank of the group holds the same empty box */
        auto key = std::make_pair(g.ranks, (int)r.w->dtype);
        auto it  = index.find(key);
        if (it == index.end()) {
          ReplicaBucket b;
          b.ranks = g.ranks;
          b.dtype = r.w->dtype;
          PetscCall(DDDataTypeGetMPIType(b.dtype, &b.mt));
          PetscCall(DDDataTypeGetSize(b.dtype, &b.es));
          R->buckets.push_back(b);
          it = index.emplace(key, R->buckets.size() - 1).first;
          R->comms.emplace(g.ranks, MPI_COMM_NULL);
        }
        ReplicaBucket &b = R->buckets[it->second];
        ReplicaEntry   e;
        e.l      = l;
        e.k      = k;
        e.wh     = r.wh;
        e.off    = b.count;
        e.count  = g.count;
        e.root   = g.root;
        e.member = g.member;
        b.entries.push_back(e);
        b.count += g.count;
      }
    }
  }
  /* the groups' communicators, in one (sorted) order on every rank: deadlock-free */
  {
    MPI_Group world;
    PetscCallMPI(MPI_Comm_group(comm, &world));
    for (auto &c : R->comms) {
      if (c.first.size() < 2) continue;
      MPI_Group grp;
      PetscCallMPI(MPI_Group_incl(world, (PetscMPIInt)c.first.size(), c.first.data(), &grp));
      PetscCallMPI(MPI_Comm_create_group(comm, grp, 8117, &c.second));
      PetscCallMPI(MPI_Group_free(&grp));
    }
    PetscCallMPI(MPI_Group_free(&world));
  }
  for (auto &b : R->buckets) {
    PetscCheck(b.count < PETSC_MPI_INT_MAX, PETSC_COMM_SELF, PETSC_ERR_SUP, "A bucket of replicated weights holds %" PetscInt_FMT " entries, more than one MPI message takes; use -net_weights broadcast", b.count);
    b.comm = R->comms[b.ranks];
    b.wbuf.assign(b.es * (size_t)b.count, 0);
    b.gbuf.assign(b.es * (size_t)b.count, 0);
    for (auto &e : b.entries)
      if (e.member) e.l->replicas[e.k].slot = b.gbuf.data() + b.es * (size_t)e.off;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode CheckEntry(const ReplicaEntry &e)
{
  PetscFunctionBegin;
  PetscCheck(e.k < e.l->nreplicas && e.l->replicas[e.k].wh == e.wh && e.l->replicas[e.k].kept, PetscObjectComm((PetscObject)e.l), PETSC_ERR_ARG_WRONGSTATE, "Layer %s was set up again after the network: call DDNetSetUp() again", ((PetscObject)e.l)->prefix ? ((PetscObject)e.l)->prefix : "");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  B, batched: at the start of DDNetForward(), every bucket one of whose parameters changed since
  the last refresh is broadcast from its root (one MPI_Ibcast per group, all in flight together)
  and unpacked into the replicas.
*/
PetscErrorCode ddnn::NetReplicasRefresh_Private(DDNet net)
{
  NetImpl                 *I = net->impl;
  NetReplicas             *R = I->replicas;
  std::vector<MPI_Request> reqs;
  std::vector<size_t>      stale;

  PetscFunctionBegin;
  if (!R) PetscFunctionReturn(PETSC_SUCCESS);
  std::vector<int> flags(R->buckets.size(), 0);
  for (size_t i = 0; i < R->buckets.size(); i++) {
    ReplicaBucket &b = R->buckets[i];
    bool           s = false;
    for (auto &e : b.entries) {
      PetscObjectState st;
      PetscCall(CheckEntry(e));
      DDLayerReplica &r = e.l->replicas[e.k];
      PetscCall(PetscObjectStateGet((PetscObject)r.w, &st));
      if (!r.fresh || st != r.wstate) s = true;
    }
    flags[i] = s ? 1 : 0;
  }
  /* the group agrees: a parameter written on some of its ranks only (DDTensorGetArray() on one
     rank) is stale on all of them, instead of one rank broadcasting alone (a hang, or a collective
     matched against another) */
  for (size_t i = 0; i < R->buckets.size(); i++) {
    if (R->buckets[i].comm == MPI_COMM_NULL) continue;
    reqs.push_back(MPI_REQUEST_NULL);
    PetscCallMPI(MPI_Iallreduce(MPI_IN_PLACE, &flags[i], 1, MPI_INT, MPI_MAX, R->buckets[i].comm, &reqs.back()));
  }
  if (!reqs.empty()) PetscCallMPI(MPI_Waitall((PetscMPIInt)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE));
  reqs.clear();
  for (size_t i = 0; i < R->buckets.size(); i++)
    if (flags[i]) stale.push_back(i);
  if (!stale.empty()) PetscCall(PetscLogEventBegin(NET_ReplBcast, net, 0, 0, 0));
  for (size_t i : stale) {
    ReplicaBucket &b = R->buckets[i];
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries)
        if (e.root) BulkCOrderCopy<T>(e.l->replicas[e.k].w->layout, HostArray<T>(e.l->replicas[e.k].w), (T *)b.wbuf.data() + e.off, 0);
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    if (b.comm != MPI_COMM_NULL) {
      reqs.push_back(MPI_REQUEST_NULL);
      PetscCallMPI(MPI_Ibcast(b.wbuf.data(), (PetscMPIInt)b.count, b.mt, 0, b.comm, &reqs.back()));
      I->nreplbcast++;
    }
  }
  if (!reqs.empty()) PetscCallMPI(MPI_Waitall((PetscMPIInt)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE));
  for (size_t i : stale) {
    ReplicaBucket &b = R->buckets[i];
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries) {
        if (!e.member) continue;
        DDTensor wh = e.l->replicas[e.k].wh;
        BulkCOrderCopy<T>(wh->layout, HostArray<T>(wh), (T *)b.wbuf.data() + e.off, 1);
        PetscCall(PetscObjectStateIncrease((PetscObject)wh)); /* kernels' caches of w^ (reordered weights) see the change */
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
  }
  if (!stale.empty()) PetscCall(PetscLogEventEnd(NET_ReplBcast, net, 0, 0, 0));
  /* every kept replica now holds B w (those of groups without pieces here have nothing to hold) */
  for (auto &nd : I->nodes)
    for (PetscInt k = 0; k < nd.layer->nreplicas; k++) {
      DDLayerReplica &r = nd.layer->replicas[k];
      if (!r.kept) continue;
      PetscCall(PetscObjectStateGet((PetscObject)r.w, &r.wstate));
      r.fresh = PETSC_TRUE;
    }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  B^*, batched: at the end of DDNetBackward(), one MPI_Iallreduce per bucket (all in flight
  together) sums the replicas' gradients the layers added; each parameter's root adds the sum to
  its gradient; the buckets are zeroed for the next backward.
*/
PetscErrorCode ddnn::NetReplicasSum_Private(DDNet net)
{
  NetImpl                 *I = net->impl;
  NetReplicas             *R = I->replicas;
  std::vector<MPI_Request> reqs;

  PetscFunctionBegin;
  if (!R) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscLogEventBegin(NET_ReplSum, net, 0, 0, 0));
  for (auto &b : R->buckets) {
    for (auto &e : b.entries) PetscCall(CheckEntry(e));
    if (b.comm == MPI_COMM_NULL) continue;
    reqs.push_back(MPI_REQUEST_NULL);
    PetscCallMPI(MPI_Iallreduce(MPI_IN_PLACE, b.gbuf.data(), (PetscMPIInt)b.count, b.mt, MPI_SUM, b.comm, &reqs.back()));
    I->nreplreduce++;
  }
  if (!reqs.empty()) PetscCallMPI(MPI_Waitall((PetscMPIInt)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE));
  for (auto &b : R->buckets) {
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries) {
        DDLayerReplica &r = e.l->replicas[e.k];
        r.added           = PETSC_FALSE;
        if (!e.root) continue;
        BulkCOrderCopy<T>(r.grad->layout, HostArray<T>(r.grad), (T *)b.gbuf.data() + e.off, 2); /* dw += the sum */
        PetscCall(PetscObjectStateIncrease((PetscObject)r.grad));
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    std::fill(b.gbuf.begin(), b.gbuf.end(), (char)0);
  }
  PetscCall(PetscLogEventEnd(NET_ReplSum, net, 0, 0, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the buckets as the performance model sees them (model.cxx prices their collectives and copies) */
PetscErrorCode ddnn::NetReplicasGetBuckets_Private(DDNet net, std::vector<ddnn::NetReplicaBucketInfo> &info)
{
  NetReplicas *R = net->impl->replicas;

  PetscFunctionBegin;
  info.clear();
  if (!R) PetscFunctionReturn(PETSC_SUCCESS);
  for (auto &b : R->buckets) {
    ddnn::NetReplicaBucketInfo d;
    d.group = (PetscMPIInt)b.ranks.size();
    d.dtype = b.dtype;
    d.count = b.count;
    for (auto &e : b.entries) {
      if (e.root) d.rootcount += e.count;
      if (e.member) d.membercount += e.count;
    }
    info.push_back(d);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDNetSetWeightMode - When a network broadcasts its weights to the workers that use them and sums their gradients

  Logically collective

  Input Parameters:
+ net  - the network
- mode - `DD_NET_WEIGHTS_BROADCAST` (default): every layer broadcasts its weights on every
         forward and sum-reduces their gradients on every backward (paper 000 sec. 4.1);
         `DD_NET_WEIGHTS_REPLICATED`: the network keeps the replicas between calls, refreshes
         them with one broadcast per worker group at the first forward after the weights
         changed, and sums all replicas' gradients with one all-reduce per worker group at the
         end of every `DDNetBackward()`;
         `DD_NET_WEIGHTS_AUTO`: at set-up, the one of the two whose training step the performance
         model predicts shorter (`DDNetGetModelTime()`; `DDNetView()` prints the choice)

  Options Database Key:
. -net_weights <broadcast,replicated,auto> - the mode
- -net_weights_calibrate <bool> - auto: calibrate the performance model at set-up if this machine's
                                  cache lacks it (default true); false keeps the broadcast mode then

  Notes:
  Both modes apply the same operators, the broadcast B and its adjoint (paper 000 sec. 3.2.1,
  4.1); the replicated one batches them, at a fraction of the collective calls: for a network
  on a sample or spatial split, one broadcast per optimizer step and one all-reduce per
  backward instead of one broadcast and one sum-reduction per parameter and call. Gradients are
  complete after every `DDNetBackward()`, in either mode. The sums are those of the
  sum-reduction, added in MPI_Allreduce's order (a rounding difference at more than 2 ranks).

  A weight change is seen through the parameter's state: the optimizer's step,
  `DDNetLoadWeights()`, checkpoint restarts, `DDNetInitializeParameters()` and every `DDTensor`
  function that writes a parameter bump it, as does `DDTensorRestoreArray()` on the ranks that
  called it: a change seen on any rank of a worker group refreshes the group's replicas (the
  group agrees with one small all-reduce per forward, so a parameter written on one rank only is
  refreshed everywhere; it does not hang).

  Setting the mode of a set-up network takes effect at once (a collective call then).

  The performance model prices the mode the network runs: in the replicated mode
  `DDNetGetModelTime()` and `-net_view` count no layer's weight broadcast or sum-reduction, and add
  the network's bucketed collectives and copies instead (a refresh per forward, as after every
  optimizer update, and a sum per backward). `-net_distribution auto` compares its candidates with
  the layers priced alone, that is with their weight broadcasts (the broadcast mode's cost).
  Switching the mode of a set-up network does not revise the distribution it chose.

  The automatic mode chooses once per `DDNetSetUp()` (and when set on a set-up network), on every
  rank alike: broadcast where no weight is broadcast to another rank (one rank), else the mode of
  the shorter predicted step, priced with this machine's calibration (calibrated first if the
  model cache lacks it, as `-net_distribution auto` does). On one node the two modes move the same
  bytes and the broadcast one usually wins; the replicated one saves two collective calls per
  parameter and step, which counts where latency does (many ranks, small layers).

  Level: intermediate

.seealso: `DDNetGetWeightMode()`, `DDNetSetUp()`, `DDNetBackward()`, `DDPRIMITIVEBROADCAST`
@*/
PetscErrorCode DDNetSetWeightMode(DDNet net, DDNetWeightMode mode)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(mode == DD_NET_WEIGHTS_BROADCAST || mode == DD_NET_WEIGHTS_REPLICATED || mode == DD_NET_WEIGHTS_AUTO, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "Unknown weight mode %d: DD_NET_WEIGHTS_BROADCAST, DD_NET_WEIGHTS_REPLICATED or DD_NET_WEIGHTS_AUTO", (int)mode);
  net->impl->weightmode = mode;
  if (net->setupcalled) PetscCall(ddnn::NetReplicasSetUp_Private(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetWeightMode - The network's weight mode (`DDNetSetWeightMode()`)

  Not collective

  Input Parameter:
. net - the network

  Output Parameter:
. mode - the weight mode

  Level: intermediate

.seealso: `DDNetSetWeightMode()`
@*/
PetscErrorCode DDNetGetWeightMode(DDNet net, DDNetWeightMode *mode)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidPointer(mode, 2);
  *mode = net->impl->weightmode;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
