/*
  The performance model's time formula (paper 003 sec. V-A), shared by the set-up model
  (model.cxx, LayerModelTime) and the analytic one (analytic.cxx, DDModelPredictLayer): both fill
  a ModelCostInput with plain data and price it with ModelLayerTimes_Private(), so that the two
  cannot drift apart.
*/
#pragma once
#include <ddmodel.h>
#include <array>
#include <string>
#include <vector>

namespace ddnn
{
/* average pooling's calibrated kind (max pooling is "pool"): it reads every tap and its backward spreads dy over the window, unlike max pooling's */
inline constexpr const char *ModelKindPoolAvg = "pool-avg";
/* average pooling on a blocked input (after a convolution of /cpu/dnnl in float32): oneDNN's jit kernel, 3-8x faster than the loops that plain storage takes */
inline constexpr const char *ModelKindPoolAvgBlocked = "pool-avg-blocked";

/* flatten of a blocked input (after a convolution of /cpu/dnnl in float32: LeNet-5's s4 -> flat): a format conversion, 4-5x the plain copy's time */
inline constexpr const char *ModelKindFlattenBlocked = "flatten-blocked";

/* a 1 x 1 unit-stride ungrouped convolution whose kernel runs on plain storage (an FNO's pointwise path: on
   /cpu/dnnl one GEMM per image on the tensors themselves, DnnlConvFormats()), with the conv terms (a GEMM
   kind): the conv fit, timed on 3 x 3 chains whose kernels pass blocked tensors on in float32, priced the
   FNO's 24 -> 24 1 x 1 convolutions' backward at 2x and its 128 -> 1 output layer's forward at 4x their time
   in the step. A cache without it prices them with the conv fit */
inline constexpr const char *ModelKindConvPointwise = "conv-pointwise";
/* a repartition as it is applied (DDModelCalibrate() times DDPrimitiveApply() and its adjoint on P > 1 ranks):
   t = c0 + c1 bytes sent or received (the most) + c2 runs sent from + c3 runs received into + c4 runs copied within
   the rank + c5 bytes copied within the rank; with on-node pairs reading each other's storage (-dd_exchange_direct)
   its own fit */
inline constexpr const char *ModelKindRepartition       = "repartition";
inline constexpr const char *ModelKindRepartitionDirect = "repartition-direct";

/* a concatenation of blocked inputs (convolutions' outputs of /cpu/dnnl in float32) into an output with a
   consumer convolution's halo: its copies walk rows of blocked tensors (a U-Net's decoder) */
inline constexpr const char *ModelKindConcatBlocked = "concat-blocked";

/* a concatenation of plain inputs into an output with a consumer convolution's halo (a U-Net's decoder in
   float64): its copies walk the output's rows, each starting inside a cache line; cold, float64, 8 x 16 x 32 x 32
   inputs, it took 0.24-0.28 ms into the halo against 0.14-0.17 without it; the plain fit, timed without a
   halo, sees only the latter (a version 9 cache without this fit prices such a concatenation by the plain one) */
inline constexpr const char *ModelKindConcatHalo = "concat-halo";

/* the per-run cost of a row-by-row walk between blocked tensors whose halos differ (a ReLU into the halo a
   consumer convolution grows, after a convolution of /cpu/dnnl in float32): cold, each row restarts the
   prefetcher's stream, 3-4x a plain row's cost */
inline constexpr const char *ModelKindRowsBlocked = "activation-rows-blocked";

/* the part of a plain row's cost (the runcost "activation-rows") that grows with the row: seconds per
   entry of a row; a row of n entries costs runcost + n times this. Interleaved, 395 calls each, float64,
   a ReLU into a 3 x 3 consumer's halo cost per row beyond the same walk without it 6.1-6.3 ns warm and
   9.3-10.1 cold in rows of 32 entries, 4.3 and 3.8 in rows of 16, 3.7 and 3.3 in rows of 8: one cost per
   row, calibrated on rows of 32, priced the U-Net's ReLUs on 16 x 16 and 8 x 8 planes at 1.6-2.1x */
inline constexpr const char *ModelKindRowsLen = "activation-rows-len";

/* the per-entry cost of an add's input stored in another order than its output (a convolution's blocked
   output added to a plain tensor: the FNO's Fourier layers join a spectral layer's plain output and a
   1 x 1 convolution's blocked one): its forward's DDTensorAXPY() and its backward's DDTensorCopy() convert
   the format entry by entry, beyond the add of two tensors stored alike. A cache without it prices such an
   add as one of tensors stored alike (0.19-0.26 of its time in the FNO) */
inline constexpr const char *ModelKindAddConvert = "add-convert";

/* the calibrated kind of an optimizer's update by the arrays it streams per parameter (3: plain SGD,
   5: SGD with momentum, 7: Adam or AdamW), NULL for another count (priced as copies) */
inline const char *ModelKindUpdate(PetscInt streams)
{
  return streams == 3 ? "update-sgd" : streams == 5 ? "update-momentum" : streams == 7 ? "update-adam" : nullptr;
}

/* a collective call of a layer spanning group > 1 ranks (model.cxx's CollectiveOf) */
struct ModelCollective {
  int         kind     = 0;     /* 1: broadcast or sum-reduce, 2: all-sum-reduce */
  PetscInt64  bytes    = 0;     /* the bytes a rank holds in it */
  PetscMPIInt group    = 1;     /* the ranks it spans */
  bool        isreduce = false; /* a sum-reduce forward (its adjoint a broadcast): priced the other way round */
};

/* what the time of one layer on one rank depends on; index [b]: 0 forward, 1 backward */
struct ModelCostInput {
  std::string backend;             /* the backend's name (the fits "<backend>@P" are preferred on P > 1 ranks) */
  DDDataType  dtype = DD_FLOAT64;  /* the output's data type */
  PetscMPIInt size  = 1;           /* the ranks the layer runs on */
  std::string kind;                /* the calibrated kind after the mapping ("conv", "activation-tanh", "loss-crossentropy", ...) */
  bool        nodx = false;        /* the backward computes no input gradient (a network's first layer) */
  double      cold = 0;            /* the share of the tensors found in memory (the ":cold" fits where there are), the rest out of L2 only (the warm fits): ModelColdFraction_Private() */
  PetscReal   flops[2] = {0, 0};   /* GEMM flops (DDLayerGetModelWork()) */
  PetscReal   bytes[2] = {0, 0};   /* bytes read and written (the other kinds) */
  double      gemm[2][5] = {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}; /* the GEMM kinds' further terms (model.cxx's GemmBytes()) */
  PetscInt64  runs = 0;            /* the runs of the pointwise walk (DDLayerGetModelRuns()) */
  bool        rows = false;        /* the walk is row by row (same storage order), else element by element */
  bool        blocked = false;     /* that row-by-row walk is between blocked tensors (its own run cost where the cache has one) */
  double      runlen = 0;          /* the walk's entries per run: the output's local bulk / runs (the plain rows' length term, ModelKindRowsLen) */
  double      addconvert = 0;      /* an add: the entries of its inputs stored in another order than its output (ModelKindAddConvert) */
  bool        outhalo = false;     /* a concatenation whose output has a halo its first input lacks (ModelKindConcatHalo's fit where the cache has it) */
  bool        pointwise = false;   /* a convolution whose kernel is 1 x 1, unit-stride, ungrouped, on plain storage (ModelKindConvPointwise's fit where the cache has it) */
  double      windowrows = 0;      /* the window kinds (pool, upsample): the output's rows (ModelWindowRows_Private()) */
  PetscInt64  p2p[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}}; /* point-to-point {msgs sent, bytes sent, msgs received, bytes received} */
  std::vector<std::array<PetscInt64, 4>> halo[2]; /* each halo exchange's volume (part of p2p) */
  std::vector<std::array<PetscInt64, 8>> repart[2]; /* each repartition's volume (part of p2p), the runs it sends from, receives into and copies within the rank, and the bytes it copies within the rank */
  std::vector<ModelCollective> colls;            /* the collectives (group > 1 only) */
};

/* the calibrated times of one layer on one rank: compute and communication, forward and backward;
   tcoll (or NULL) the collectives' part of comm; ok false when a fit it needs is missing (that term 0) */
PetscErrorCode ModelLayerTimes_Private(const ModelCostInput &, PetscReal comp[2], PetscReal comm[2], PetscReal tcoll[2], PetscBool *ok);
/* the share of the tensors that kernels over bytes of them (cycling through the core's L2 cache) find in memory */
double ModelColdFraction_Private(double bytes);
/* the flops the idle vector lanes of a convolution with co output and ci input channels waste, f its forward flops */
double ModelConvIdleFlops_Private(size_t es, double co, double ci, double f, PetscBool backward);
/* the rows of the column matrix a convolution's im2col gathers (and col2im scatters) on this rank:
   (local output entries / (Co Wout)) Ci K^d, with Wout the local output's last extent */
double ModelConvColumnRows_Private(double ybulk, double wout, double co, double cikk);
/* the flops of a convolution's passes that do not run Winograd (wino: forward, backward data, backward weights; f: the forward's GEMM flops) */
double ModelConvDirectFlops_Private(const bool wino[3], double f, PetscBool backward);
/* one bucket of the replicated weight mode (DDNetSetWeightMode()) on one rank, on P ranks: a worker
   group of group ranks, count entries of dt, rootcount of them packed and summed into here (the
   parameters' root), membercount unpacked into replicas here, mirrorcount of them (members not
   the root) updated here in the data-parallel mode; t[0] a forward after an update, t[1] a
   backward, with the copies' update in the data-parallel mode (model.cxx: NetReplicaTime(),
   DDModelPredictReplicatedWeights()) */
PetscErrorCode ModelReplicaBucketTimes_Private(const std::string &bname, PetscMPIInt P, DDDataType dt, PetscMPIInt group, PetscInt64 count, PetscInt64 rootcount, PetscInt64 membercount, PetscInt64 mirrorcount, PetscBool dataparallel, PetscReal t[2], PetscBool *ok);
/* the rows of a window kind's output y on this rank: its local entries over its innermost storage extent */
double ModelWindowRows_Private(DDTensor y);
/* whether kind is a GEMM kind (conv, convtranspose, affine) */
bool ModelIsGemmKind_Private(const std::string &kind);
/* a set-up conv or pool layer's local kernels timed alone on this rank (paper 003 sec. V-A), remembered per
   configuration: t[0] warm {forward, backward}, t[1] cold (calibrate.cxx) */
PetscErrorCode ModelMeasureKernels_Private(DDLayer layer, PetscBool nodx, PetscBool nomoves, double t[2][2], PetscBool *measured);
/* forgets them (DDModelReset()) */
void ModelForgetMeasured_Private(void);
/* whether kind is a window kind (pool, pool-avg, pool-avg-blocked, upsample), whose fits have a term in the output's rows */
bool ModelIsWindowKind_Private(const std::string &kind);
} // namespace ddnn
