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
    and one all-reduce per bucket sums them; the parameter's root adds the sum to its gradient at
    the end of DDNetBackward(), so gradients are exact after every DDNetBackward(). A worker group
    has one bucket, summed after the backward's last layer; with -net_weights_bucket_mb (PyTorch
    DistributedDataParallel's bucket_cap_mb) its parameters are cut into buckets of at most that
    size from the last layer back, and a bucket's all-reduce starts as soon as the backward has
    passed its first layer, to overlap the backwards of the layers before it
    (NetReplicasSumReady_Private()).

  A worker group is the set of ranks sharing one piece of a parameter (the root holding w's
  piece, and the workers holding its copies), as DDPRIMITIVEBROADCAST forms it: every layer on a
  sample or spatial split of all ranks shares one group; layers whose weights are split over
  channel workers have one group per piece. The sums are the sums of the sum-reduction, in the
  order MPI_Allreduce adds them (MPI_Reduce's order in broadcast mode: the same at 2 ranks,
  possibly another association, so a rounding difference, at more).

  In the data-parallel mode (DD_NET_WEIGHTS_DATAPARALLEL, PyTorch's DistributedDataParallel) the
  replicas are also kept, and the broadcast after every update is gone: B w_{k+1} = B U(w_k, g_k)
  = U(B w_k, B g_k) for an elementwise update U (SGD, Adam, AdamW: every entry from its own weight,
  gradient and state), so every worker applies the optimizer's update to its copy, with B g_k (the
  summed gradient, which the all-reduce leaves on every rank of the group) and B s_k (the
  optimizer's state, kept on every worker): the same numbers as the root's, bitwise (the same
  kernel on the same values). To that end:

  - the backward's all-reduce includes the root's gradient so far, so that every rank of the
    group ends with the parameter's whole gradient, the root's included (DDNetBackward()
    accumulates: dw = dw + sum);
  - DDOptimizerStep() calls this file's begin and end (DDParameterMirror, composed on every kept
    parameter): begin checks, per bucket, that the copies are in step (each replica fresh; on the
    root, the gradient unchanged since the sum and the optimizer's state tensors unchanged since
    the last step; on the others, an optimizer state of this optimizer) and the group agrees
    (one small all-reduce per bucket, MIN); end updates each copy where it lives (members that are
    not the root: the optimizer's steparrays op on the packed copy; the root copies w into its own
    replica), or, for a bucket that is not in step, broadcasts w and its optimizer state from the
    root (one MPI_Ibcast per group): a checkpoint restart, DDNetLoadWeights(), a gradient the user
    scaled between the backward and the step, an optimizer without steparrays, the first step;
  - the forward's refresh still catches every other write of a parameter, as in the replicated mode.

  The refresh is decided by each group together: every rank looks at its own copy of the
  parameters' states, and one small all-reduce per group (MAX of a flag per bucket) makes a
  change seen on any rank of the group a refresh on all of them, so a parameter written on some
  ranks only (DDTensorGetArray() on one rank) is refreshed, not a hang.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddnetimpl.h>
#include <ddnn/private/ddbackendimpl.h> /* HostArray */
#include <ddnn/private/ddoptimizerimpl.h> /* DDParameterMirror, steparrays */
#include <ddmodel.h> /* DDNetGetModelTime(): -net_weights auto */
#include <tensor/layout.hpp>
#include <primitive/bcastgroups.hpp>
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using ddnn::NetImpl;

const char *const DDNetWeightModes[] = {"broadcast", "replicated", "auto", "dataparallel", "DDNetWeightMode", "DD_NET_WEIGHTS_", nullptr};

namespace ddnn
{
/* one parameter piece of a bucket on this rank */
struct ReplicaEntry {
  DDLayer  l;
  PetscInt k;             /* the replica's index in l->replicas */
  int      node = 0;      /* l's index in the network */
  DDTensor wh;            /* to check that the layer was not set up again */
  PetscInt off, count;    /* entries in the bucket */
  bool     root, member;  /* this rank holds w's piece / a copy */
  /* the data-parallel mode */
  bool                          gset   = false; /* a sum set the gradient (root) / the copy's gradient in mgbuf (member) */
  PetscObjectState              gstate = 0;     /* root: the gradient's state after that sum */
  PetscObjectId                 optid  = 0;     /* the optimizer the copy's state is in step with (0: none) */
  std::vector<PetscObjectId>    sid;            /* root: that optimizer's state tensors of w, and their states, when last in step */
  std::vector<PetscObjectState> sst;
  std::vector<char>             mstate;         /* member, not root: the copy's optimizer state, nstate x count entries */
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
  std::vector<char>         mgbuf;      /* data-parallel, members: the summed gradients the copies are updated with */
  std::vector<char>         xbuf;       /* data-parallel: weights and optimizer state, broadcast at a step not in step */
  int                       stepok = -1; /* data-parallel, between begin and end of a step: -1 not stepped, 0 refresh, 1 update in place */
  int                       trigger = 0; /* its first entry's node (the lowest): the sum starts once the backward has passed it */
  bool                      started = false;            /* its sum started in this backward */
  MPI_Request               req     = MPI_REQUEST_NULL; /* the sum's all-reduce in flight */
};

struct NetReplicas {
  std::vector<ReplicaBucket>                          buckets;
  std::map<std::vector<PetscMPIInt>, MPI_Comm>        comms; /* per distinct group */
  bool                                                dataparallel = false;
  DDParameterMirror                                   mirror{};  /* data-parallel: the optimizer's hooks, composed on every kept parameter */
  std::vector<DDTensor>                               composed;  /* the parameters it is composed on (referenced) */
  std::map<DDTensor, std::vector<std::pair<size_t, size_t>>> byw; /* a parameter's (bucket, entry) pairs on this rank */
};
} // namespace ddnn

using ddnn::NetReplicas;
using ddnn::ReplicaBucket;
using ddnn::ReplicaEntry;
using ddnn::BulkCOrderCopy;
using ddnn::HostArray;

static PetscLogEvent NET_ReplBcast = 0, NET_ReplSum = 0, NET_ReplStep = 0;

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

/* completes the buckets' sums in flight (every rank of their groups started them) */
static PetscErrorCode WaitSums(NetReplicas *R)
{
  std::vector<MPI_Request> reqs;

  PetscFunctionBegin;
  for (auto &b : R->buckets)
    if (b.req != MPI_REQUEST_NULL) reqs.push_back(b.req);
  if (!reqs.empty()) PetscCallMPI(MPI_Waitall((PetscMPIInt)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE));
  for (auto &b : R->buckets) b.req = MPI_REQUEST_NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a bucket ready for the next backward: no sum started, no replica gradient added */
static void ClearBucket(ReplicaBucket &b)
{
  b.started = false;
  std::fill(b.gbuf.begin(), b.gbuf.end(), (char)0);
  for (auto &e : b.entries)
    if (e.k < e.l->nreplicas) e.l->replicas[e.k].added = PETSC_FALSE;
}

/* Frees the buckets and the groups' communicators; the layers' replicas are no longer kept */
PetscErrorCode ddnn::NetReplicasDestroy_Private(DDNet net)
{
  NetImpl *I = net->impl;

  PetscFunctionBegin;
  if (!I->replicas) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(WaitSums(I->replicas)); /* sums a failed backward left in flight (MPI forbids freeing their requests) */
  for (auto &w : I->replicas->composed) { /* an optimizer holding these parameters no longer finds the hooks */
    PetscCall(PetscObjectCompose((PetscObject)w, DD_PARAMETER_MIRROR, NULL));
    PetscCall(DDTensorDestroy(&w));
  }
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

static PetscErrorCode NetReplicasBuild(DDNet, bool);
static PetscErrorCode NetReplicasChoose(DDNet);
static size_t         BucketCapBytes(PetscReal);

/*
  The weight mode's set-up, after the layers': nothing in the broadcast mode; the buckets in the
  replicated and data-parallel modes; in the automatic one the mode whose step the performance
  model predicts the shortest (NetReplicasChoose()).
*/
PetscErrorCode ddnn::NetReplicasSetUp_Private(DDNet net)
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);

  PetscFunctionBegin;
  PetscCall(NetReplicasDestroy_Private(net));
  I->weightchoice = NetWeightChoice();
  PetscCall(DDCheckSameString(comm, "The network's weight mode (-net_weights)", DDNetWeightModes[I->weightmode]));
  /* the interval decides which steps hash the copies inside a group's all-reduce: it must agree, or a rank that does not hash would read as diverged copies */
  PetscCall(DDCheckSameString(comm, "The data-parallel weight check interval (-net_weights_check)", std::to_string(I->weightcheck).c_str()));
  /* the cap cuts the buckets, and a group's ranks must cut theirs alike (one all-reduce each) */
  PetscCall(DDCheckSameString(comm, "The weight bucket size (-net_weights_bucket_mb)", std::to_string(BucketCapBytes(I->bucketmb)).c_str()));
  if (I->weightmode == DD_NET_WEIGHTS_BROADCAST) PetscFunctionReturn(PETSC_SUCCESS);
  { /* the buckets live in host memory: device tensors take the broadcast mode (auto chooses it; the others say so) */
    const char *dev = nullptr;
    for (const NetNode &nd : I->nodes)
      if (nd.layer->memtype != DD_MEMTYPE_HOST) dev = nd.name.c_str();
    if (dev) {
      PetscCheck(I->weightmode == DD_NET_WEIGHTS_AUTO, comm, PETSC_ERR_SUP, "The %s weight mode (-net_weights) keeps the weights' replicas in host buckets and does not support device tensors yet (layer \"%s\" is on the device): use broadcast, or auto (which takes broadcast there)", DDNetWeightModes[I->weightmode], dev);
      I->weightchoice.decided = true;
      I->weightchoice.chosen  = DD_NET_WEIGHTS_BROADCAST;
      I->weightchoice.why     = "device tensors (the buckets are host memory)";
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  PetscCall(NetReplicasBuild(net, I->weightmode == DD_NET_WEIGHTS_DATAPARALLEL));
  if (I->weightmode == DD_NET_WEIGHTS_AUTO) PetscCall(NetReplicasChoose(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  -net_weights auto: prices one step (DDNetGetModelTime(): a forward after an update and a
  backward, in the data-parallel mode with the copies' update) with the buckets just built, in the
  replicated and the data-parallel mode, and without them, and takes the mode of the shortest
  (a tie keeps the simpler: broadcast, then replicated). Nothing to choose when no bucket spans two ranks (one rank, or no weight
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
      PetscCall(PetscPrintf(comm, "-net_weights auto: %s; broadcasting the weights\n", c.why.c_str()));
      PetscCall(ddnn::NetReplicasDestroy_Private(net));
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  PetscReal t[2];
  PetscCall(DDNetGetModelTime(net, &t[0], &t[1], NULL));
  c.treplicated = t[0] + t[1];
  I->replicas->dataparallel = true; /* priced only: the hooks are composed by NetReplicasBuild() */
  PetscCall(DDNetGetModelTime(net, &t[0], &t[1], NULL));
  c.tdataparallel = t[0] + t[1];
  PetscCall(ddnn::NetReplicasDestroy_Private(net));
  PetscCall(DDNetGetModelTime(net, &t[0], &t[1], NULL));
  c.tbroadcast = t[0] + t[1];
  /* the same numbers on every rank (DDNetGetModelTime() reduces them): one decision */
  c.chosen = DD_NET_WEIGHTS_BROADCAST;
  if (c.treplicated < c.tbroadcast) c.chosen = DD_NET_WEIGHTS_REPLICATED;
  if (c.tdataparallel < PetscMin(c.treplicated, c.tbroadcast)) c.chosen = DD_NET_WEIGHTS_DATAPARALLEL;
  if (c.chosen != DD_NET_WEIGHTS_BROADCAST) PetscCall(NetReplicasBuild(net, c.chosen == DD_NET_WEIGHTS_DATAPARALLEL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Builds the buckets of the replicated mode: every layer's replicas, grouped by worker group and
  data type, each group's communicator created once (MPI_Comm_create_group, the groups in one order
  on every rank), and the persistent buffers.
*/
static PetscErrorCode MirrorBegin(void *, DDOptimizer, PetscInt, const PetscInt[]);
static PetscErrorCode MirrorEnd(void *, DDOptimizer, PetscReal, PetscReal, PetscInt, const PetscInt[]);

/* -net_weights_bucket_mb in bytes (MiB, as PyTorch's bucket_cap_mb); 0: no cap */
static size_t BucketCapBytes(PetscReal mb)
{
  return mb > 0 ? (size_t)PetscMin(mb * 1048576.0, 1e18) : SIZE_MAX;
}

/*
  PyTorch DistributedDataParallel's buckets: every (group, data type) bucket is cut, from its last
  layer's parameters back (the order the backward produces their gradients), into buckets of at
  most `cap` bytes (a parameter piece larger than the cap makes a bucket alone). A bucket's sum can
  then start as soon as the backward has passed its first node (its trigger), while the layers
  before it still run. The entries of a group are the same on all its ranks (the same parameters,
  in node order, with the same piece sizes), so the cuts and the order of the group's all-reduces
  are too.
*/
static std::vector<ReplicaBucket> SplitBuckets(const std::vector<ReplicaBucket> &whole, size_t cap)
{
  std::vector<ReplicaBucket> out;
  for (const auto &b : whole) {
    size_t j1 = b.entries.size();
    while (j1 > 0) {
      size_t j0    = j1 - 1;
      size_t bytes = b.es * (size_t)b.entries[j0].count;
      while (j0 > 0 && bytes + b.es * (size_t)b.entries[j0 - 1].count <= cap) bytes += b.es * (size_t)b.entries[--j0].count;
      ReplicaBucket c;
      c.ranks = b.ranks;
      c.dtype = b.dtype;
      c.mt    = b.mt;
      c.es    = b.es;
      c.entries.assign(b.entries.begin() + (std::ptrdiff_t)j0, b.entries.begin() + (std::ptrdiff_t)j1);
      const PetscInt off0 = c.entries.front().off;
      for (auto &e : c.entries) {
        e.off -= off0;
        c.count += e.count;
      }
      c.trigger = c.entries.front().node;
      out.push_back(std::move(c));
      j1 = j0;
    }
  }
  return out;
}

static PetscErrorCode NetReplicasBuild(DDNet net, bool dataparallel)
{
  NetImpl *I    = net->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)net);

  PetscFunctionBegin;
  if (!NET_ReplBcast) {
    PetscCall(PetscLogEventRegister("DDNetReplBcast", DD_NET_CLASSID, &NET_ReplBcast));
    PetscCall(PetscLogEventRegister("DDNetReplSum", DD_NET_CLASSID, &NET_ReplSum));
    PetscCall(PetscLogEventRegister("DDNetReplStep", DD_NET_CLASSID, &NET_ReplStep));
  }
  auto *R = new NetReplicas;
  I->replicas = R;
  std::map<std::pair<std::vector<PetscMPIInt>, int>, size_t> index; /* (group, data type) -> bucket */
  std::vector<ddnn::BcastGroup>                               groups;
  for (size_t node = 0; node < I->nodes.size(); node++) {
    DDLayer l = I->nodes[node].layer;
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
        e.node   = (int)node;
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
  R->buckets = SplitBuckets(R->buckets, BucketCapBytes(I->bucketmb));
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
  for (size_t i = 0; i < R->buckets.size(); i++) {
    ReplicaBucket &b = R->buckets[i];
    PetscCheck(b.count < PETSC_MPI_INT_MAX, PETSC_COMM_SELF, PETSC_ERR_SUP, "A bucket of replicated weights holds %" PetscInt_FMT " entries, more than one MPI message takes; use -net_weights broadcast", b.count);
    b.comm = R->comms[b.ranks];
    b.wbuf.assign(b.es * (size_t)b.count, 0);
    b.gbuf.assign(b.es * (size_t)b.count, 0);
    for (size_t j = 0; j < b.entries.size(); j++) {
      ReplicaEntry &e = b.entries[j];
      if (e.member) e.l->replicas[e.k].slot = b.gbuf.data() + b.es * (size_t)e.off;
      R->byw[e.l->replicas[e.k].w].push_back({i, j});
    }
    if (dataparallel) b.mgbuf.assign(b.es * (size_t)b.count, 0);
  }
  R->dataparallel = dataparallel;
  if (dataparallel) { /* the optimizer's hooks on every kept parameter, on every rank (DDOptimizerStep() calls them on all) */
    PetscContainer c;
    R->mirror.ctx   = net;
    R->mirror.begin = MirrorBegin;
    R->mirror.end   = MirrorEnd;
    PetscCall(PetscContainerCreate(PETSC_COMM_SELF, &c));
    PetscCall(PetscContainerSetPointer(c, &R->mirror));
    for (auto &nd : I->nodes)
      for (PetscInt k = 0; k < nd.layer->nreplicas; k++) {
        DDTensor w = nd.layer->replicas[k].w;
        if (std::find(R->composed.begin(), R->composed.end(), w) != R->composed.end()) continue;
        PetscCall(PetscObjectCompose((PetscObject)w, DD_PARAMETER_MIRROR, (PetscObject)c));
        PetscCall(PetscObjectReference((PetscObject)w));
        R->composed.push_back(w);
      }
    PetscCall(PetscContainerDestroy(&c));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* whether r holds B w for w as it is now (refreshed, or updated in step, since w last changed) */
static PetscErrorCode ReplicaCurrent(const DDLayerReplica &r, bool *current)
{
  PetscObjectState st;

  PetscFunctionBegin;
  PetscCall(DDTensorContentState_Private(r.w, &st));
  *current = r.fresh && st == r.wstate;
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
      bool current;
      PetscCall(CheckEntry(e));
      PetscCall(ReplicaCurrent(e.l->replicas[e.k], &current));
      if (!current) s = true;
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
        PetscCall(DDTensorStateIncrease_Private(wh)); /* kernels' caches of w^ (reordered weights) see the change */
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
      PetscCall(DDTensorContentState_Private(r.w, &r.wstate));
      r.fresh = PETSC_TRUE;
    }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  B^*, batched and overlapped with the backward (PyTorch DistributedDataParallel's scheme): a
  bucket's all-reduce (MPI_Iallreduce) starts as soon as the backward has passed the first node of
  its parameters (NetReplicasSumReady_Private(), after every live node's backward), the others at
  the end (NetReplicasSum_Private()), which waits for all, adds each sum to its parameter's
  gradient on the root, and zeroes the buckets for the next backward. Between two nodes'
  backwards the sums in flight are tested, which lets MPI progress them. The sums are the same
  elementwise sums whenever they start.
*/
/* the bucket's sum: in the data-parallel mode the root's gradient so far joins it (every rank ends
   with the whole gradient); the all-reduce when the group spans ranks */
static PetscErrorCode StartSum(NetImpl *I, ReplicaBucket &b, bool dataparallel)
{
  PetscFunctionBegin;
  for (auto &e : b.entries) PetscCall(CheckEntry(e));
  if (dataparallel)
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries)
        if (e.root) BulkCOrderCopy<T>(e.l->replicas[e.k].grad->layout, HostArray<T>(e.l->replicas[e.k].grad), (T *)b.gbuf.data() + e.off, 3);
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
  b.started = true;
  if (b.comm == MPI_COMM_NULL) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallMPI(MPI_Iallreduce(MPI_IN_PLACE, b.gbuf.data(), (PetscMPIInt)b.count, b.mt, MPI_SUM, b.comm, &b.req));
  I->nreplreduce++;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the started sums (all, at the end of a backward; at the start of one, those a backward that stopped
   on an error left in flight): completed, each added to its parameter's gradient on the root (as the
   layers that ran added theirs), the buckets zeroed */
static PetscErrorCode FinishSums(NetImpl *I)
{
  NetReplicas *R = I->replicas;

  PetscFunctionBegin;
  PetscCall(WaitSums(R));
  for (auto &b : R->buckets) {
    if (!b.started) continue;
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries) {
        PetscCall(CheckEntry(e));
        DDLayerReplica &r = e.l->replicas[e.k];
        if (R->dataparallel) e.gset = true;
        if (R->dataparallel && e.member && !e.root) std::copy((T *)b.gbuf.data() + e.off, (T *)b.gbuf.data() + e.off + e.count, (T *)b.mgbuf.data() + e.off);
        if (!e.root) continue;
        BulkCOrderCopy<T>(r.grad->layout, HostArray<T>(r.grad), (T *)b.gbuf.data() + e.off, R->dataparallel ? 1 : 2); /* dw += the sum (data-parallel: dw = the sum, which holds dw) */
        PetscCall(DDTensorStateIncrease_Private(r.grad));
        if (R->dataparallel) PetscCall(DDTensorContentState_Private(r.grad, &e.gstate));
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    ClearBucket(b);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  DDNetZeroGradients(): the sums pending in the buckets are part of the gradients, and go too -- the
  replicas' gradients added since the last sum (a layer's own DDLayerBackward()), and the sums a
  backward that stopped on an error left in flight (completed first: MPI forbids touching their
  buffers before, and every rank of the group started them)
*/
PetscErrorCode ddnn::NetReplicasZero_Private(DDNet net)
{
  NetReplicas *R = net->impl->replicas;

  PetscFunctionBegin;
  if (!R) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(WaitSums(R));
  for (auto &b : R->buckets) ClearBucket(b);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* before the backward's first node: sums a backward that stopped on an error left in flight,
   unless DDNetZeroGradients() dropped them since, are added as the layers that ran added theirs */
PetscErrorCode ddnn::NetReplicasSumBegin_Private(DDNet net)
{
  PetscFunctionBegin;
  if (net->impl->replicas) PetscCall(FinishSums(net->impl));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* after node `node`'s backward; more: a live node below it is still to run. Starts, in bucket order
   (the same on every rank of a group), the sums of the buckets whose first node is at or after this
   one, and tests those in flight */
PetscErrorCode ddnn::NetReplicasSumReady_Private(DDNet net, int node, bool more)
{
  NetImpl     *I = net->impl;
  NetReplicas *R = I->replicas;
  int          done = 0;

  PetscFunctionBegin;
  if (!R || !more || I->bucketmb <= 0) PetscFunctionReturn(PETSC_SUCCESS); /* the last node (NetReplicasSum_Private() starts the rest), or no overlap asked for */
  for (auto &b : R->buckets) {
    if (!b.started && b.trigger >= node) {
      PetscCall(PetscLogEventBegin(NET_ReplSum, net, 0, 0, 0));
      PetscCall(StartSum(I, b, R->dataparallel));
      PetscCall(PetscLogEventEnd(NET_ReplSum, net, 0, 0, 0));
      if (b.comm != MPI_COMM_NULL) I->nreplearly++;
    }
    if (b.req != MPI_REQUEST_NULL) PetscCallMPI(MPI_Test(&b.req, &done, MPI_STATUS_IGNORE)); /* progress */
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* at the end of DDNetBackward(): the remaining sums started, all completed and added */
PetscErrorCode ddnn::NetReplicasSum_Private(DDNet net)
{
  NetImpl     *I = net->impl;
  NetReplicas *R = I->replicas;

  PetscFunctionBegin;
  if (!R) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscLogEventBegin(NET_ReplSum, net, 0, 0, 0));
  for (auto &b : R->buckets)
    if (!b.started) PetscCall(StartSum(I, b, R->dataparallel));
  PetscCall(FinishSums(I));
  PetscCall(PetscLogEventEnd(NET_ReplSum, net, 0, 0, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The data-parallel mode's hooks in DDOptimizerStep() (DDParameterMirror; ctx: the network).
  begin: which buckets hold parameters this optimizer steps, and whether each is in step (see the
  head of this file): every rank decides for its entries, the group takes the MIN.
*/
/* a hash of the bulk of t (the sum of its entries' mixed bit patterns: independent of the storage order), 62 bits */
static PetscInt64 BulkHash(DDTensor t)
{
  uint64_t h = 0;
  PetscCallAbort(PETSC_COMM_SELF, ddnn::DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T      = decltype(z);
    const T *a   = (const T *)t->array;
    ddnn::ForEachBulkRun(t->layout, [&](PetscInt off, PetscInt len) {
      for (PetscInt q = 0; q < len; q++) {
        uint64_t bits = 0;
        std::memcpy(&bits, a + off + q, sizeof(T));
        h += ddnn::SplitMix64(bits);
      }
    });
    return PETSC_SUCCESS;
  }));
  return (PetscInt64)(h & 0x3FFFFFFFFFFFFFFFull);
}

static PetscErrorCode MirrorBegin(void *ctx, DDOptimizer opt, PetscInt n, const PetscInt idx[])
{
  DDNet                    net = (DDNet)ctx;
  NetImpl                 *I   = net->impl;
  NetReplicas             *R   = I->replicas;
  std::vector<MPI_Request> reqs;
  std::vector<PetscInt64>  flags; /* per bucket: not in step here (MAX: anywhere), the copies' hash and its negative (MAX of both: equal everywhere) */
  /* every weightcheck steps (the step count is the optimizer's, the same on every rank) the copies are compared */
  const bool check = I->weightcheck > 0 && (opt->step + 1) % I->weightcheck == 0;

  PetscFunctionBegin;
  if (!R || !R->dataparallel) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscLogEventBegin(NET_ReplStep, net, 0, 0, 0));
  for (auto &b : R->buckets) b.stepok = -1;
  flags.assign(3 * R->buckets.size(), 0);
  for (PetscInt j = 0; j < n; j++) {
    DDTensor w = (*opt->params)[idx[j]];
    auto     it = R->byw.find(w);
    if (it == R->byw.end()) continue;
    for (auto &be : it->second) {
      ReplicaBucket &b = R->buckets[be.first];
      ReplicaEntry  &e = b.entries[be.second];
      PetscCall(CheckEntry(e));
      DDLayerReplica  &r = e.l->replicas[e.k];
      PetscObjectState st;
      bool             current, ok = opt->ops->steparrays && (*opt->grads)[idx[j]] == r.grad;
      b.stepok = 0;
      PetscCall(ReplicaCurrent(r, &current));
      ok = ok && current && e.gset && e.optid == ((PetscObject)opt)->id;
      if (ok && e.root) {
        PetscCall(DDTensorContentState_Private(r.grad, &st));
        ok = st == e.gstate && e.sid.size() == (size_t)opt->nstate;
        for (PetscInt k = 0; ok && k < opt->nstate; k++) {
          DDTensor t;
          PetscCall(DDOptimizerGetParameterState_Private(opt, idx[j], k, &t));
          PetscCall(DDTensorContentState_Private(t, &st));
          ok = e.sid[k] == ((PetscObject)t)->id && e.sst[k] == st;
        }
      }
      if (ok && e.member && !e.root) ok = e.mstate.size() == b.es * (size_t)e.count * (size_t)opt->nstate;
      if (!ok) flags[3 * be.first] = 1;
      if (check) flags[3 * be.first + 1] = (flags[3 * be.first + 1] + BulkHash(e.member ? r.wh : r.w)) & 0x3FFFFFFFFFFFFFFFll;
    }
  }
  for (size_t i = 0; i < R->buckets.size(); i++) flags[3 * i + 2] = -flags[3 * i + 1];
  /* every rank of a group has the same parameters in its buckets (the optimizer's list is one list): the same buckets take part */
  for (size_t i = 0; i < R->buckets.size(); i++) {
    if (R->buckets[i].stepok < 0 || R->buckets[i].comm == MPI_COMM_NULL) continue;
    reqs.push_back(MPI_REQUEST_NULL);
    PetscCallMPI(MPI_Iallreduce(MPI_IN_PLACE, &flags[3 * i], 3, MPIU_INT64, MPI_MAX, R->buckets[i].comm, &reqs.back()));
  }
  if (!reqs.empty()) PetscCallMPI(MPI_Waitall((PetscMPIInt)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE));
  PetscInt bad = -1;
  for (size_t i = 0; i < R->buckets.size(); i++) {
    ReplicaBucket &b = R->buckets[i];
    if (b.stepok < 0) continue;
    b.stepok = flags[3 * i] ? 0 : 1;
    /* in step everywhere, so the copies must hold the parameters' values: the same hash on every rank of the group */
    if (check && b.stepok && flags[3 * i + 1] != -flags[3 * i + 2] && bad < 0) bad = (PetscInt)i;
  }
  if (check) I->nreplchecks++;
  if (bad >= 0) {
    std::string ranks;
    for (PetscMPIInt r : R->buckets[bad].ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    PetscCall(PetscLogEventEnd(NET_ReplStep, net, 0, 0, 0));
    SETERRQ(PETSC_COMM_SELF, PETSC_ERR_PLIB, "Before optimizer step %" PetscInt_FMT ", the data-parallel weight copies of worker group (ranks %s) differ from their parameters: its ranks' optimizer updates gave different numbers (nodes whose floating-point arithmetic differs?). Use -net_weights replicated, which broadcasts the parameters after each update (-net_weights_check sets how often this is checked)", opt->step + 1, ranks.c_str());
  }
  PetscCall(PetscLogEventEnd(NET_ReplStep, net, 0, 0, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the root's record of the optimizer state its copies are in step with */
static PetscErrorCode RecordRootState(ReplicaEntry &e, DDOptimizer opt, PetscInt i)
{
  PetscFunctionBegin;
  e.sid.resize(opt->nstate);
  e.sst.resize(opt->nstate);
  for (PetscInt k = 0; k < opt->nstate; k++) {
    DDTensor t;
    PetscCall(DDOptimizerGetParameterState_Private(opt, i, k, &t));
    e.sid[k] = ((PetscObject)t)->id;
    PetscCall(DDTensorContentState_Private(t, &e.sst[k]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  end, after the optimizer updated its parameters: a bucket in step updates its copies where they
  live (members that are not the root: the optimizer's steparrays on the packed copy, its summed
  gradient scaled as the optimizer scaled the parameters' and its own state; the root copies w
  into its replica); a bucket not in step gets w and the optimizer's state from the root (one
  MPI_Ibcast per group, all in flight together). Either way every replica of the bucket holds w.
*/
static PetscErrorCode MirrorEnd(void *ctx, DDOptimizer opt, PetscReal lr, PetscReal gscale, PetscInt n, const PetscInt idx[])
{
  DDNet                    net = (DDNet)ctx;
  NetImpl                 *I   = net->impl;
  NetReplicas             *R   = I->replicas;
  std::vector<MPI_Request> reqs;
  std::map<DDTensor, PetscInt> stepped; /* this optimizer's parameters in the buckets, and their index */
  const PetscInt           nst = opt->ops->steparrays ? opt->nstate : 0;

  PetscFunctionBegin;
  if (!R || !R->dataparallel) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscLogEventBegin(NET_ReplStep, net, 0, 0, 0));
  for (PetscInt j = 0; j < n; j++) stepped[(*opt->params)[idx[j]]] = idx[j];
  auto index = [&](const ReplicaEntry &e) -> PetscInt {
    auto it = stepped.find(e.l->replicas[e.k].w);
    return it == stepped.end() ? -1 : it->second;
  };
  /* in step: each copy updated where it lives */
  for (auto &b : R->buckets) {
    if (b.stepok != 1) continue;
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries) {
        const PetscInt i = index(e);
        if (i < 0) continue;
        DDLayerReplica &r = e.l->replicas[e.k];
        T              *wb = (T *)b.wbuf.data() + e.off;
        if (e.member && !e.root) {
          T                  *g = (T *)b.mgbuf.data() + e.off;
          std::vector<void *> s(opt->nstate);
          for (PetscInt k = 0; k < opt->nstate; k++) s[k] = (T *)e.mstate.data() + (size_t)k * (size_t)e.count;
          if (gscale != 1)
            for (PetscInt q = 0; q < e.count; q++) g[q] *= (T)gscale; /* as DDTensorScale() scaled the root's */
          BulkCOrderCopy<T>(r.wh->layout, HostArray<T>(r.wh), wb, 0);
          PetscCall((*opt->ops->steparrays)(opt, lr, b.dtype, e.count, wb, g, s.data()));
        } else if (e.root) {
          if (e.member) BulkCOrderCopy<T>(r.w->layout, HostArray<T>(r.w), wb, 0);
          PetscCall(RecordRootState(e, opt, i));
        }
        if (e.member) {
          BulkCOrderCopy<T>(r.wh->layout, HostArray<T>(r.wh), wb, 1);
          PetscCall(DDTensorStateIncrease_Private(r.wh));
        }
        PetscCall(DDTensorContentState_Private(r.w, &r.wstate));
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    if (b.comm != MPI_COMM_NULL) I->nreplstepped++;
  }
  /* not in step: w and its optimizer state from the root */
  for (auto &b : R->buckets) {
    if (b.stepok != 0) continue;
    const size_t region = b.es * (size_t)b.count;
    b.xbuf.assign(region * (size_t)(1 + nst), 0);
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries) {
        if (!e.root) continue;
        const PetscInt i = index(e);
        BulkCOrderCopy<T>(e.l->replicas[e.k].w->layout, HostArray<T>(e.l->replicas[e.k].w), (T *)b.xbuf.data() + e.off, 0);
        for (PetscInt k = 0; i >= 0 && k < nst; k++) {
          DDTensor t;
          PetscCall(DDOptimizerGetParameterState_Private(opt, i, k, &t));
          BulkCOrderCopy<T>(t->layout, HostArray<T>(t), (T *)(b.xbuf.data() + region * (size_t)(1 + k)) + e.off, 0);
        }
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    if (b.comm != MPI_COMM_NULL) {
      PetscCheck((size_t)b.count * (size_t)(1 + nst) < (size_t)PETSC_MPI_INT_MAX, PETSC_COMM_SELF, PETSC_ERR_SUP, "A bucket of replicated weights with its optimizer state holds %zu entries, more than one MPI message takes; use -net_weights replicated", (size_t)b.count * (size_t)(1 + nst));
      reqs.push_back(MPI_REQUEST_NULL);
      PetscCallMPI(MPI_Ibcast(b.xbuf.data(), (PetscMPIInt)(b.count * (1 + nst)), b.mt, 0, b.comm, &reqs.back()));
    }
  }
  if (!reqs.empty()) PetscCallMPI(MPI_Waitall((PetscMPIInt)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE));
  for (auto &b : R->buckets) {
    if (b.stepok != 0) continue;
    const size_t region = b.es * (size_t)b.count;
    PetscCall(ddnn::DispatchType(b.dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (auto &e : b.entries) {
        DDLayerReplica &r = e.l->replicas[e.k];
        const PetscInt  i = index(e);
        if (e.member) {
          BulkCOrderCopy<T>(r.wh->layout, HostArray<T>(r.wh), (T *)b.xbuf.data() + e.off, 1);
          PetscCall(DDTensorStateIncrease_Private(r.wh));
        }
        if (i >= 0 && e.member && !e.root) {
          e.mstate.resize(b.es * (size_t)e.count * (size_t)nst);
          for (PetscInt k = 0; k < nst; k++) std::copy((T *)(b.xbuf.data() + region * (size_t)(1 + k)) + e.off, (T *)(b.xbuf.data() + region * (size_t)(1 + k)) + e.off + e.count, (T *)e.mstate.data() + (size_t)k * (size_t)e.count);
        }
        if (i >= 0 && e.root) PetscCall(RecordRootState(e, opt, i));
        if (i >= 0) e.optid = nst ? ((PetscObject)opt)->id : 0;
        PetscCall(DDTensorContentState_Private(r.w, &r.wstate));
        r.fresh = PETSC_TRUE;
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
    b.xbuf.clear();
    b.xbuf.shrink_to_fit();
    if (b.comm != MPI_COMM_NULL) I->nreplsync++;
  }
  for (auto &b : R->buckets) b.stepok = -1;
  PetscCall(PetscLogEventEnd(NET_ReplStep, net, 0, 0, 0));
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
    d.dataparallel = R->dataparallel;
    for (auto &e : b.entries) {
      if (e.root) d.rootcount += e.count;
      if (e.member) d.membercount += e.count;
      if (e.member && !e.root) d.mirrorcount += e.count;
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
         `DD_NET_WEIGHTS_DATAPARALLEL`: the replicas are kept as in the replicated mode, the
         all-reduce at the end of `DDNetBackward()` leaves every parameter's whole gradient on every
         rank of its worker group, and `DDOptimizerStep()` updates every replica where it lives,
         with the optimizer's state kept there too (PyTorch's DistributedDataParallel): no
         broadcast after an update;
         `DD_NET_WEIGHTS_AUTO`: at set-up, the one of the three whose training step the performance
         model predicts shortest (`DDNetGetModelTime()`; `DDNetView()` prints the choice)

  Options Database Key:
. -net_weights <broadcast,replicated,auto,dataparallel> - the mode
. -net_weights_calibrate <bool> - auto: calibrate the performance model at set-up if this machine's
                                  cache lacks it (default true); false keeps the broadcast mode then
- -net_weights_check <every> - data-parallel: check the replicas every this many steps (`DDNetSetWeightCheckInterval()`)

  Notes:
  Both modes apply the same operators, the broadcast B and its adjoint (paper 000 sec. 3.2.1,
  4.1); the replicated one batches them, at a fraction of the collective calls: for a network
  on a sample or spatial split, one broadcast per optimizer step and one all-reduce per
  backward instead of one broadcast and one sum-reduction per parameter and call. Gradients are
  complete after every `DDNetBackward()`, in either mode. The sums are those of the
  sum-reduction, added in MPI_Allreduce's order (a rounding difference at more than 2 ranks).

  The data-parallel mode applies the same operators too: an elementwise update (SGD, Adam, AdamW)
  commutes with the broadcast, B U(w, g, s) = U(B w, B g, B s), so each worker applies it to its
  copy with the summed gradient and gets the root's numbers bitwise (the same kernel on the same
  values; `test_18_replicated` checks the copies against a refresh from the roots after training).
  `DDOptimizerStep()` finds the network's hook on the parameters (`DDParameterMirror` in
  ddnn/private/ddoptimizerimpl.h): per worker group it makes one small all-reduce to agree that the
  copies are in step, then updates them in place. Where they are not -- the first step, a checkpoint
  restart or `DDOptimizerSetUp()` (new optimizer state), a gradient changed between
  `DDNetBackward()` and the step other than by the optimizer's own clipping, a parameter written,
  an optimizer type without the steparrays op (ddnn/private/ddoptimizerimpl.h) -- the root
  broadcasts the parameter and its optimizer state to the group instead, so training equals the
  broadcast mode's in every case. The workers hold the optimizer's state of the replicas they
  update (Adam: two more copies of the weights per rank); a checkpoint saves the roots' state. Several
  optimizers over disjoint sets of the parameters work; the gradient the optimizer is given must be
  the network's own (`DDNetGetParameters()`).

  Device tensors (a network set up on `DDTensorSetMemType()` device inputs): the replicated and
  data-parallel modes keep their buckets in host memory and refuse them at `DDNetSetUp()` with an
  error naming a layer on the device; the automatic mode takes the broadcast mode there.

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
  the shortest predicted step, priced with this machine's calibration (calibrated first if the
  model cache lacks it, as `-net_distribution auto` does). On one node the modes move the same
  bytes and the broadcast one usually wins; the replicated and data-parallel ones save two
  collective calls per parameter and step, which counts where latency does (many ranks, small
  layers), and the data-parallel one also the bytes of the weight broadcast, which counts where
  bandwidth does (large weights). The model prices the copies' update as Adam's (7 streams).

  Level: intermediate

.seealso: `DDNetGetWeightMode()`, `DDNetSetWeightCheckInterval()`, `DDNetSetUp()`, `DDNetBackward()`, `DDOptimizerStep()`, `DDPRIMITIVEBROADCAST`
@*/
PetscErrorCode DDNetSetWeightMode(DDNet net, DDNetWeightMode mode)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(mode == DD_NET_WEIGHTS_BROADCAST || mode == DD_NET_WEIGHTS_REPLICATED || mode == DD_NET_WEIGHTS_AUTO || mode == DD_NET_WEIGHTS_DATAPARALLEL, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "Unknown weight mode %d: DD_NET_WEIGHTS_BROADCAST, DD_NET_WEIGHTS_REPLICATED, DD_NET_WEIGHTS_DATAPARALLEL or DD_NET_WEIGHTS_AUTO", (int)mode);
  net->impl->weightmode = mode;
  if (net->setupcalled) PetscCall(ddnn::NetReplicasSetUp_Private(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetSetWeightCheckInterval - How often the data-parallel weight mode checks that every replica still equals its parameter

  Logically collective

  Input Parameters:
+ net   - the network
- every - check before every this many optimizer steps (default 100); 0: never

  Options Database Key:
. -net_weights_check <every> - the interval

  Notes:
  In `DD_NET_WEIGHTS_DATAPARALLEL` every rank updates its replicas itself, which gives the
  parameters' root's numbers bitwise where the ranks compute alike (the same kernels on the same
  kind of processor). The check hashes the replicas on every rank of each worker group (a pass over
  the weights) and compares the hashes within the group's all-reduce that `DDOptimizerStep()` makes
  anyway; where they differ, the step fails with an error on the group's ranks that names them and
  suggests `-net_weights replicated`. Negative values are an error. No effect in the other modes.

  Level: advanced

.seealso: `DDNetSetWeightMode()`, `DDNetGetWeightCheckInterval()`, `DDOptimizerStep()`
@*/
PetscErrorCode DDNetSetWeightCheckInterval(DDNet net, PetscInt every)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(every >= 0, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "The weight check interval %" PetscInt_FMT " (-net_weights_check) must be >= 0 (0: never)", every);
  net->impl->weightcheck = every;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetWeightCheckInterval - How often the data-parallel weight mode checks its replicas (`DDNetSetWeightCheckInterval()`)

  Not collective

  Input Parameter:
. net - the network

  Output Parameter:
. every - the interval in optimizer steps (0: never)

  Level: advanced

.seealso: `DDNetSetWeightCheckInterval()`
@*/
PetscErrorCode DDNetGetWeightCheckInterval(DDNet net, PetscInt *every)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidIntPointer(every, 2);
  *every = net->impl->weightcheck;
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

/*@
  DDNetSetWeightBucketSize - Cuts the gradient sums of the replicated and data-parallel weight modes into buckets of at most this many MiB, each summed as soon as the backward has produced it (PyTorch DistributedDataParallel's bucket_cap_mb)

  Logically collective

  Input Parameters:
+ net - the network
- mb  - the cap in MiB (1 MiB = 2^20 bytes); 0 (the default): one bucket per worker group, summed at
        the end of the backward

  Options Database Key:
. -net_weights_bucket_mb <mb> - the cap

  Notes:
  In `DD_NET_WEIGHTS_REPLICATED` and `DD_NET_WEIGHTS_DATAPARALLEL` (`DDNetSetWeightMode()`) the
  gradients of a worker group's parameter replicas are summed by all-reduces of packed buckets. By
  default each group has one bucket, summed after the backward's last layer. With a cap, set-up
  packs each group's parameters from the network's last layer back, in the order the backward
  produces their gradients, into buckets of at most `mb` MiB (a parameter piece larger than the cap
  makes a bucket alone; a tiny cap, 1e-9, one bucket per parameter piece), and during
  `DDNetBackward()` a bucket's all-reduce (`MPI_Iallreduce`) starts as soon as the backward has
  passed the first layer of its parameters, so that it can run while the layers before it compute;
  between layers the sums in flight are tested (`MPI_Test`), which lets MPI progress them, and the
  backward waits for all at its end. Gradients are complete after every `DDNetBackward()` whatever
  the cap, and equal: the sums are the same elementwise sums (at more than 2 ranks MPI may
  associate them differently for another message size, a rounding difference).

  Whether this pays depends on MPI moving the bytes while the layers compute. On one node of 2
  cores (Open MPI 4.1, shared memory, MPI progressing inside its calls) it did not: a 74 MiB
  network (LeNet-5 with two 4096-wide dense layers, 2 ranks, data-parallel) trained 1.22x slower
  per step with a 25 MiB cap than with one bucket, and the main job's U-Net (0.4 MiB) 1.09x (noise level)
  (bench/README.md); hence the default. Networks whose MPI progresses in the background (offloading
  interconnects, a progress thread) are where to try it. The performance model prices the buckets'
  collectives without overlap.

  The value must be the same on every rank (checked at set-up); negative and non-finite values are
  an error. Setting it on a set-up network rebuilds the buckets (collective).

  Level: advanced

.seealso: `DDNetSetWeightMode()`, `DDNetGetWeightBucketSize()`, `DDNetBackward()`
@*/
PetscErrorCode DDNetSetWeightBucketSize(DDNet net, PetscReal mb)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(!PetscIsInfOrNanReal(mb) && mb >= 0, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "The weight bucket size %g MiB (-net_weights_bucket_mb) must be finite and >= 0 (0: one bucket per worker group)", (double)mb);
  net->impl->bucketmb = mb;
  if (net->setupcalled) PetscCall(ddnn::NetReplicasSetUp_Private(net));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDNetGetWeightBucketSize - The largest bucket of the replicated and data-parallel weight modes (`DDNetSetWeightBucketSize()`)

  Not collective

  Input Parameter:
. net - the network

  Output Parameter:
. mb - the cap in MiB

  Level: advanced

.seealso: `DDNetSetWeightBucketSize()`
@*/
PetscErrorCode DDNetGetWeightBucketSize(DDNet net, PetscReal *mb)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscValidRealPointer(mb, 2);
  *mb = net->impl->bucketmb;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
