/* ddnn/private/ddnetimpl.h - the DDNet class struct (C++), for implementers working on networks. */
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <ddnet.h>
#include <string>
#include <vector>

namespace ddnn
{
/* one layer of the graph */
struct NetNode {
  std::string      name;
  DDLayer          layer = NULL;
  std::vector<int> inputs;   /* >= 0: node index; < 0: net input -1-k */
  DDTensor         dy = NULL; /* gradient of the node's output */
  int              consumers = 0;
  std::string      weightsname;            /* the module name in weights files (DDNetSetLayerWeightsName()) */
  bool             weightsnameset = false; /* else the layer's name */
  bool             autoinserted   = false; /* a repartition inserted by the automatic distribution (src/net/distribution.cxx) */
  PetscLogDouble   tfwd = -1, tbwd = -1;    /* -net_layer_timing: the wall times of the layer's last forward and backward as the network ran them (-1: not run since timing began) */
  int              automatch      = -1;    /* >= 0: such a repartition onto the partition of input 0 of node automatch */
};

/* the plan of the automatic distribution, for DDNetView() */
struct NetPlan {
  bool        done = false;
  std::string view;                /* the plan, as printed */
  PetscInt    inserted = 0;        /* repartitions inserted */
  PetscReal   predicted = 0;       /* predicted step time of the plan's decision layers and shuffles, seconds */
  PetscInt64  memory    = 0;       /* predicted memory per rank of the whole network, bytes */
  std::vector<PetscInt> ncands;    /* candidates per decision layer, in layer order */
  std::vector<PetscReal> tables;   /* every number the planner priced, in a fixed order (DDNetGetDistributionTables_Private(), tests) */
};

struct NetReplicas; /* src/net/replicas.cxx: the buckets of the replicated weight mode */

/* -net_weights auto: what set-up chose and why (replicas.cxx, NetReplicasChoose()) */
struct NetWeightChoice {
  bool        decided     = false;
  PetscReal   tbroadcast  = 0, treplicated = 0, tdataparallel = 0; /* predicted step, seconds (0: not priced) */
  DDNetWeightMode chosen  = DD_NET_WEIGHTS_BROADCAST;
  std::string why;
};

/* the graph, evaluated in insertion order */
struct NetImpl {
  std::vector<std::string> innames;
  std::vector<NetNode>     nodes;
  int                      output = -1;
  std::string              outname;
  std::vector<DDTensor>    inputs;  /* references to the tensors of the last set-up/forward */
  std::vector<DDTensor>    ingrads; /* gradients of the net inputs (made on request) */
  std::vector<bool>        wantgrad;
  std::vector<DDTensor>    params, grads;
  std::vector<std::string> pnames;
  std::vector<DDTensor>    scratch; /* per node: a buffer for one consumer's contribution */
  bool                     forwarddone = false;
  bool                     checkfinite = false; /* -dd_check_finite: every layer's output and gradients */
  bool                     layertiming = false; /* -net_layer_timing: NetNode::tfwd, tbwd (DDNetSetLayerTiming()) */
  PetscInt64               step        = 0;     /* DDNetForward() calls since set-up, for messages */
  DDNetDistribution        distribution = DD_NET_DISTRIBUTION_GIVEN; /* -net_distribution */
  PetscInt64               memlimit     = 0;                         /* -net_memory_limit, bytes per rank; 0: none */
  NetPlan                  plan;
  std::vector<int>         forcedplan; /* tests only: the candidate of every decision layer, instead of the choice */
  DDNetWeightMode          weightmode  = DD_NET_WEIGHTS_BROADCAST; /* -net_weights */
  NetReplicas             *replicas    = nullptr;                  /* the replicated mode's buckets */
  NetWeightChoice          weightchoice;                           /* -net_weights auto's decision */
  PetscInt64               nreplbcast  = 0, nreplreduce = 0;       /* the replicated mode's collectives so far (bucket broadcasts, all-reduces) */
  PetscInt64               nreplstepped = 0, nreplsync = 0;        /* the data-parallel mode's buckets updated in place by an optimizer step, and refreshed (weights and optimizer state) at a step instead */
  PetscInt                 weightcheck  = 100;                     /* -net_weights_check: every this many optimizer steps the data-parallel mode checks its copies against their parameters (0: never) */
  PetscInt64               nreplchecks  = 0;                       /* such checks made */
  PetscReal                bucketmb     = 0;                       /* -net_weights_bucket_mb: the replicated and data-parallel modes' buckets hold at most this many MiB, their sums started during the backward (PyTorch DDP's bucket_cap_mb); 0: one bucket per worker group, summed at the end */
  PetscInt64               nreplearly   = 0;                       /* bucket all-reduces started during a backward, before its last layer (overlapped with it) */
};

/* net.cxx: the two set-up passes over the current graph (no parameters initialised) */
PetscErrorCode NetSetUpLayers_Private(DDNet, std::vector<DDTensor> &);
/* distribution.cxx: chooses and inserts the repartitions of -net_distribution auto, and leaves the layers set up */
PetscErrorCode NetDistribute_Private(DDNet, std::vector<DDTensor> &);
PetscErrorCode NetRemoveAutoLayers_Private(DDNet);
/* distribution.cxx: whether the model is calibrated for l0's backend and data type, calibrating unless <what>_calibrate is false (then why) */
PetscErrorCode NetModelCalibrated_Private(DDNet, DDLayer l0, const char what[], PetscBool *ready, std::string &why);
/* replicas.cxx: the replicated and data-parallel weight modes (DDNetSetWeightMode()): set-up (after the layers'), B before a forward, B^* after a backward */
PetscErrorCode NetReplicasSetUp_Private(DDNet);
PetscErrorCode NetReplicasDestroy_Private(DDNet);
PetscErrorCode NetReplicasRefresh_Private(DDNet);
PetscErrorCode NetReplicasSumBegin_Private(DDNet);
PetscErrorCode NetReplicasZero_Private(DDNet);
PetscErrorCode NetReplicasSumReady_Private(DDNet, int node, bool more);
PetscErrorCode NetReplicasSum_Private(DDNet);
/* one bucket of the replicated weight mode on this rank, as the performance model prices it (model.cxx) */
struct NetReplicaBucketInfo {
  PetscMPIInt group   = 1;          /* the ranks of its worker group (1: no collective) */
  DDDataType  dtype   = DD_FLOAT64;
  PetscInt64  count   = 0;          /* the entries it packs */
  PetscInt64  rootcount = 0;        /* the entries this rank packs as the parameters' root (forward) and adds the sums to (backward) */
  PetscInt64  membercount = 0;      /* the entries this rank unpacks into its replicas (forward) and adds their gradients from (backward) */
  PetscInt64  mirrorcount = 0;      /* data-parallel mode: the entries of replicas this rank updates with the optimizer (members that are not the root) */
  bool        dataparallel = false; /* the data-parallel mode's bucket: refreshed only when a parameter changed outside an optimizer step */
};
/* the buckets of the replicated mode (none in the broadcast mode) */
PetscErrorCode NetReplicasGetBuckets_Private(DDNet, std::vector<NetReplicaBucketInfo> &);
} // namespace ddnn

struct _DDNetOps {
  int dummy; /* a network has no types (yet): its behaviour is the graph of its layers */
};

struct _p_DDNet {
  PETSCHEADER(struct _DDNetOps);
  ddnn::NetImpl *impl;
  PetscBool      setupcalled;
};
