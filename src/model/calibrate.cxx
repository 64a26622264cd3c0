/*
  The calibration run of the performance model (issue 16 items 2 and 4; paper 003 sec. V-A:
  "empirical estimates ... from a simple benchmark that times the appropriate function", combined
  with an analytic alpha-beta communication model, sec. II-B):
  - MPI: pairs of ranks exchange n bytes both ways at once (MPI_Sendrecv, as the halo and
    repartition exchanges do) at several n; t(n) = alpha + beta n by least squares; the
    collectives (broadcast, reduce, all-reduce) measured as such in groups of 2 ... P ranks;
  - kernels: each calibrated layer kind, on the chosen backend and data type, at four sizes (conv
    and affine: over a design of shapes), timed on every rank at once on PETSC_COMM_SELF (the ranks
    share the machine as in a run), each call the slowest rank's, forward and backward separately
    (medians of the repetitions), fitted as t = c0 + c1 work (DDLayerGetModelWork()) (conv,
    affine: + terms in input, output bytes and idle lanes or weight bytes), once warm (tensors out of
    L2) and once cold (tensors out of every cache). The timed layer takes the output of a layer of
    the same kind as its input, so its input is in the format a chain of ddnn layers hands over.
  - every call is timed as the smaller of its wall time and the process's CPU time (Elapsed()), so
    that other processes' time slices on a shared machine do not enter the fits.
*/
#include <sys/shmarena.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddoptimizerimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <ddoptimizer.h>
#include <ddmodel.h>
#include <ddprimitive.h>
#include "modelimpl.hpp"
#include <petsctime.h>
#include <vector>
#include <map>
#include <functional>
#include <array>
#include <string>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <unistd.h>
#include <ctime>
#include <sys/ddcxx.hpp>

namespace ddnn
{
/* model.cxx's store and cache */
PetscErrorCode ModelStoreComm_Private(PetscReal alpha, PetscReal beta);
PetscErrorCode ModelStoreKernel_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, const std::vector<double> &work, const std::vector<double> &t);
PetscErrorCode ModelSave_Private(MPI_Comm comm);
PetscErrorCode ModelStoreRunCost_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, double c);
PetscErrorCode ModelKernelTime_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, double w, double *t);
PetscErrorCode ModelStoreGemmKernel_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, const std::vector<std::vector<double>> &X, const std::vector<double> &t);
PetscErrorCode ModelGemmBytes_Private(DDLayer layer, PetscBool backward, double e[5]);
} // namespace ddnn

/* the median of repeated timings, the statistic bench_model reports of a layer in the network (the
   median over the steps): robust against other processes taking the core for a while (a shared
   machine), unlike the mean. Until cache version 8 the fits took the lower quartile, the machine's
   quiet moments: on 2 cores whose loops run 1-2x slower at times (a 2 x 2 max pool of 8x32x16x16,
   float64, hot: 0.093 ms in 1-2 of 6 processes and some calls of the others, 0.13-0.15 ms otherwise),
   that priced the typical step low. Calibrated both ways the same evening and run interleaved
   (bench_model, 1 rank 9 runs, 2 ranks 5 runs), the mean step ratio rose from 0.92-0.94 to 0.95-0.96
   at 1 rank and from 0.76-0.82 to 0.86-0.92 at 2 ranks, and the U-Net's entries within 20 % by
   1.5-4.8 on average (within their run-to-run spread; bench/README.md, "Medians, not lower quartiles") */
static double MedianOf(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/* a moment on two clocks: the wall clock and the CPU time of this process (all its threads) */
struct Stamp {
  double wall, cpu;
};

static PetscErrorCode Now(Stamp *s)
{
  struct timespec ts;

  PetscFunctionBegin;
  PetscCall(PetscTime(&s->wall));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  s->cpu = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the time from a to b as an idle core would see it: the smaller of the wall time and the process's
   CPU time. On a shared machine the wall time of a call includes the time slices other processes
   took (a 50 us kernel preempted for a 4 ms slice reads 80x too slow), the CPU time does not; with
   several threads the CPU time adds theirs, and the wall time is the smaller. MPI waits spin (the
   CPU time counts them) */
static double Elapsed(const Stamp &a, const Stamp &b)
{
  return std::min(b.wall - a.wall, b.cpu - a.cpu);
}

/* reads twice the core's L2 cache: a layer in a network finds its tensors where the layers
   before it pushed them (out of L2), not in the cache its own previous call left them in, so the
   kernels are timed that way (timed back to back on hot caches they ran 2-3x faster than in a net) */
static void EvictL2(void)
{
  static std::vector<char> buf;
  if (buf.empty()) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    buf.assign((size_t)2 * (size_t)(l2 > 0 ? l2 : 2097152), 0);
  }
  volatile char sink = 0; /* reads: the evicting lines are clean, so the timed kernel pays no write-backs for them */
  char          acc  = 0;
  for (size_t i = 0; i < buf.size(); i += 64) acc ^= buf[i];
  sink = acc;
  (void)sink;
}

/* t(n) of one exchange of n bytes with the partner rank (median), on every rank of a pair */
static PetscErrorCode CalibrateComm(MPI_Comm comm, PetscReal *alpha, PetscReal *beta)
{
  PetscMPIInt         rank, size;
  const int           sizes[] = {8, 512, 4096, 32768, 131072, 524288, 2097152};
  std::vector<double> w, t;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscMPIInt         partner = (rank ^ 1) < size ? (rank ^ 1) : MPI_PROC_NULL;
  std::vector<char>   sb(2097152, 1), rb(2097152);
  for (int n : sizes) {
    int                 reps = n <= 32768 ? 200 : 30;
    std::vector<double> ts;
    PetscCallMPI(MPI_Barrier(comm));
    for (int r = 0; r < reps + 5; r++) {
      Stamp t0, t1;
      PetscCall(Now(&t0));
      PetscCallMPI(MPI_Sendrecv(sb.data(), n, MPI_BYTE, partner, 77, rb.data(), n, MPI_BYTE, partner, 77, comm, MPI_STATUS_IGNORE));
      PetscCall(Now(&t1));
      if (r >= 5) ts.push_back(Elapsed(t0, t1));
    }
    double m = MedianOf(ts);
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, comm));
    w.push_back(n);
    t.push_back(m);
  }
  /* least squares of t = alpha + beta n */
  double nn = (double)w.size(), sw = 0, st = 0, sww = 0, swt = 0;
  for (size_t i = 0; i < w.size(); i++) {
    sw += w[i];
    st += t[i];
    sww += w[i] * w[i];
    swt += w[i] * t[i];
  }
  double b = (nn * swt - sw * st) / (nn * sww - sw * sw), a = (st - b * sw) / nn;
  if (b < 0) b = t.back() / w.back();
  if (a < 0) a = t.front(); /* the smallest message's time: the latency */
  *alpha = a;
  *beta  = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The collectives as the primitives call them (DDPRIMITIVEBROADCAST: MPI_Ibcast and a wait, its
   adjoint MPI_Reduce; DDPRIMITIVEALLSUMREDUCE: MPI_Allreduce), in groups of g consecutive ranks
   (g = 2, 4, ... up to the size of comm, and that size), at 256 B to 1 MiB: per repetition the
   slowest rank of the slowest group (all start together after a barrier), median; stored
   as the fits "bcast-g<g>" (forward: broadcast, backward: reduce) and "allsum-g<g>" of t = c0 + c1 bytes */
static PetscErrorCode CalibrateCollectives(MPI_Comm comm, const char bname[], DDDataType dt)
{
  PetscMPIInt      rank, size;
  const int        sizes[] = {256, 8192, 131072, 1048576};
  std::vector<int> gs;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  for (int g = 2; g < size; g *= 2) gs.push_back(g);
  if (size > 1) gs.push_back(size);
  std::vector<char> a(1048576, 1), b(1048576);
  for (int g : gs) {
    MPI_Comm    gc;
    const bool  full = (rank / g + 1) * g <= size; /* the ranks of a last, smaller group only keep step */
    PetscCallMPI(MPI_Comm_split(comm, rank / g, rank, &gc));
    std::vector<double> w, t[3];
    for (int n : sizes) {
      const int           reps = n <= 8192 ? 60 : 20;
      std::vector<double> ts[3];
      for (int op = 0; op < 3; op++) {
        for (int r = 0; r < reps + 3; r++) {
          Stamp t0, t1;
          PetscCallMPI(MPI_Barrier(comm));
          PetscCall(Now(&t0));
          if (op == 0) {
            MPI_Request req;
            PetscCallMPI(MPI_Ibcast(a.data(), n, MPI_BYTE, 0, gc, &req));
            PetscCallMPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
          } else if (op == 1) PetscCallMPI(MPI_Reduce(a.data(), b.data(), n / 4, MPI_FLOAT, MPI_SUM, 0, gc));
          else PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, b.data(), n / 4, MPI_FLOAT, MPI_SUM, gc));
          PetscCall(Now(&t1));
          double e = full ? Elapsed(t0, t1) : 0;
          PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_DOUBLE, MPI_MAX, comm));
          if (r >= 3) ts[op].push_back(e);
        }
        t[op].push_back(MedianOf(ts[op]));
      }
      w.push_back(n);
    }
    PetscCallMPI(MPI_Comm_free(&gc));
    const std::string bk = "bcast-g" + std::to_string(g), ak = "allsum-g" + std::to_string(g);
    PetscCall(ddnn::ModelStoreKernel_Private(bname, dt, bk.c_str(), PETSC_FALSE, w, t[0]));
    PetscCall(ddnn::ModelStoreKernel_Private(bname, dt, bk.c_str(), PETSC_TRUE, w, t[1]));
    PetscCall(ddnn::ModelStoreKernel_Private(bname, dt, ak.c_str(), PETSC_FALSE, w, t[2]));
    PetscCall(ddnn::ModelStoreKernel_Private(bname, dt, ak.c_str(), PETSC_TRUE, w, t[2]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FillTensor(DDTensor t, PetscReal shift)
{
  void    *a;
  PetscInt n;
  DDDataType dt;

  PetscFunctionBegin;
  PetscCall(DDTensorGetLocalStorageSize(t, &n));
  PetscCall(DDTensorGetDataType(t, &dt));
  PetscCall(DDTensorGetArray(t, &a));
  for (PetscInt i = 0; i < n; i++) {
    double v = std::sin(0.37 * (double)i + shift);
    if (dt == DD_FLOAT32) ((float *)a)[i] = (float)v;
    else ((double *)a)[i] = v;
  }
  PetscCall(DDTensorRestoreArray(t, &a));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a layer of a calibrated kind, set up on x (outhalo: its output with a halo of 1 along H and W, as a 3 x 3 convolution consuming it grows) */
static PetscErrorCode MakeLayer(const std::string &kind, const char backend[], DDTensor x, PetscInt ch, DDLayer *l, bool outhalo = false)
{
  PetscFunctionBegin;
  PetscCall(DDLayerCreate(PETSC_COMM_SELF, l));
  if (outhalo) {
    const PetscInt lo[4] = {0, 0, 1, 1}, hi[4] = {0, 0, 1, 1};
    PetscCall(DDLayerSetOutputHalo_Private(*l, lo, hi));
  }
  const bool pool = kind.rfind(DDLAYERPOOL, 0) == 0; /* "pool" (max) or "pool-avg" */
  PetscCall(DDLayerSetType(*l, kind.rfind(DDLAYERACTIVATION, 0) == 0 ? DDLAYERACTIVATION : (pool ? DDLAYERPOOL : (kind == ddnn::ModelKindFlattenBlocked ? DDLAYERFLATTEN : kind.c_str()))));
  if (backend) PetscCall(DDLayerSetBackend(*l, backend));
  const PetscInt k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2}, s2[2] = {2, 2};
  if (kind == DDLAYERCONV) {
    PetscCall(DDLayerConvSetOutputChannels(*l, ch));
    PetscCall(DDLayerConvSetKernel(*l, 2, k3));
    PetscCall(DDLayerConvSetPadding(*l, 2, p1));
  } else if (kind == DDLAYERCONVTRANSPOSE) {
    PetscCall(DDLayerConvSetOutputChannels(*l, ch));
    PetscCall(DDLayerConvSetKernel(*l, 2, k2));
    PetscCall(DDLayerConvSetStride(*l, 2, s2));
  } else if (kind == DDLAYERAFFINE) {
    PetscCall(DDLayerAffineSetOutputFeatures(*l, ch));
  } else if (kind == DDLAYERACTIVATION) {
    PetscCall(DDLayerActivationSetType(*l, DD_ACT_RELU));
  } else if (kind.rfind(std::string(DDLAYERACTIVATION) + "-", 0) == 0) { /* "activation-tanh": another function */
    PetscInt  t;
    PetscBool found;
    PetscCall(PetscEListFind(DD_ACT_PRELU + 1, DDActivationTypes, kind.c_str() + strlen(DDLAYERACTIVATION) + 1, &t, &found));
    PetscCheck(found, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Unknown calibration kind %s", kind.c_str());
    PetscCall(DDLayerActivationSetType(*l, (DDActivationType)t));
  } else if (pool) {
    PetscCall(DDLayerPoolSetType(*l, kind == DDLAYERPOOL ? DD_POOL_MAX : DD_POOL_AVG));
    PetscCall(DDLayerPoolSetKernel(*l, 2, k2));
    PetscCall(DDLayerPoolSetStride(*l, 2, s2));
  } else if (kind == DDLAYERUPSAMPLE) {
    PetscCall(DDLayerUpsampleSetMode(*l, DD_UPSAMPLE_LINEAR));
    PetscCall(DDLayerUpsampleSetScale(*l, 2, s2));
  }
  PetscCall(DDLayerSetUp(*l, x));
  PetscCall(DDLayerInitializeParameters(*l, 7));
  PetscCall(DDLayerSetTraining(*l, PETSC_TRUE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the ranks DDModelCalibrate() measures on: every rank times its own copy of a kernel, all start
   each call together, and a call takes the slowest rank's time, as a layer whose ranks meet at its
   exchanges does in a network (on P > 1 ranks, the wait for the slowest is part of a layer's time) */
static MPI_Comm calcomm = MPI_COMM_NULL;
/* the kernels are timed cold: their tensors written back to memory and out of every cache before each call */
static bool calflush = false;

/* writes the tensors' lines back and out of every cache level */
static PetscErrorCode FlushTensors(PetscInt n, DDTensor t[])
{
  PetscFunctionBegin;
#if defined(__x86_64__)
  for (PetscInt i = 0; i < n; i++) {
    const void *a;
    PetscInt    m;
    DDDataType  dt;
    size_t      es;
    if (!t[i]) continue;
    PetscCall(DDTensorGetLocalStorageSize(t[i], &m));
    PetscCall(DDTensorGetDataType(t[i], &dt));
    PetscCall(DDDataTypeGetSize(dt, &es));
    PetscCall(DDTensorGetArrayRead(t[i], &a));
    for (size_t o = 0; o < (size_t)m * es; o += 64) __builtin_ia32_clflush((const char *)a + o);
    PetscCall(DDTensorRestoreArrayRead(t[i], &a));
  }
  __builtin_ia32_mfence();
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Median times of a layer's forward (tm[0]) and backward (tm[1]), each called with the caches
   evicted as inside a network (L2, or every level when calflush): two warm-up calls, then at least
   minreps and at most maxreps timed calls, repeated until they add up to mintime seconds; on P > 1
   ranks each call is the slowest rank's */
static PetscErrorCode TimeForwardBackwardMulti(DDLayer B, PetscInt nin, DDTensor xs[], DDTensor y, DDTensor dy, DDTensor dxs[], int minreps, int maxreps, PetscLogDouble mintime, double tm[2])
{
  std::vector<double> tf, tb;
  PetscLogDouble      spent = 0;
  PetscMPIInt         P     = 1;

  PetscFunctionBegin;
  if (calcomm != MPI_COMM_NULL) PetscCallMPI(MPI_Comm_size(calcomm, &P));
  std::vector<DDTensor> all(xs, xs + nin);
  all.push_back(y);
  all.push_back(dy);
  for (PetscInt i = 0; i < nin; i++) all.push_back(dxs[i]);
  const bool flush = calflush;
  if (flush) { /* the second, cold pass: fewer repetitions (each writes the tensors back first) */
    maxreps = PetscMin(maxreps, 30);
    mintime *= 0.5;
  }
  for (int r = 0; r < maxreps + 2 && (r < minreps + 2 || spent < mintime); r++) { /* the same repetitions on every rank: spent is the ranks' maximum */
    Stamp t0, t1, t1b, t2;
    EvictL2();
    if (flush) PetscCall(FlushTensors((PetscInt)all.size(), all.data()));
    if (P > 1) PetscCallMPI(MPI_Barrier(calcomm));
    PetscCall(Now(&t0));
    PetscCall(DDLayerForwardMulti(B, nin, xs, y));
    PetscCall(Now(&t1));
    EvictL2();
    if (flush) PetscCall(FlushTensors((PetscInt)all.size(), all.data()));
    if (P > 1) PetscCallMPI(MPI_Barrier(calcomm));
    PetscCall(Now(&t1b));
    PetscCall(DDLayerBackwardMulti(B, dy, nin, dxs));
    PetscCall(Now(&t2));
    if (r >= 2) { /* two warm-up calls */
      double e[2] = {Elapsed(t0, t1), Elapsed(t1b, t2)};
      if (P > 1) PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, e, 2, MPI_DOUBLE, MPI_MAX, calcomm));
      tf.push_back(e[0]);
      tb.push_back(e[1]);
      spent += tf.back() + tb.back();
    }
  }
  tm[0] = MedianOf(tf);
  tm[1] = MedianOf(tb);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode TimeForwardBackward(DDLayer B, DDTensor x, DDTensor y, DDTensor dy, DDTensor dx, int minreps, int maxreps, PetscLogDouble mintime, double tm[2])
{
  PetscFunctionBegin;
  PetscCall(TimeForwardBackwardMulti(B, 1, &x, y, dy, &dx, minreps, maxreps, mintime, tm));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* times one kind at one size (wsize > 0: the planes' width at that size, their height at size; rows, if
   not NULL: the output's rows, ModelWindowRows_Private()); returns the timed layer's work and median times */
static PetscErrorCode TimeKindShape(const std::string &kind, const char backend[], DDDataType dt, PetscInt size, PetscInt wsize, double work[2], double tm[2], double *rows)
{
  DDPartition part;
  DDTensor    x0, dx, dy;
  DDLayer     A, B;
  PetscInt    shape[4], order, ch;

  PetscFunctionBegin;
  if (kind == DDLAYERAFFINE) {
    order    = 2;
    shape[0] = 32;
    shape[1] = 16 * size; /* 16 ... 256 features */
    ch       = shape[1];
  } else {
    order    = 4;
    shape[0] = 4;
    shape[1] = 16;
    shape[2] = shape[3] = (kind.rfind(ddnn::ModelKindPoolAvg, 0) == 0 ? 8 : 4) * size; /* an average pool halves (pool-avg: A, itself one, halves them first) */
    if (kind == DDLAYERCONVTRANSPOSE) shape[2] = shape[3] = 2 * size; /* A doubles: B sees 4 ... 64 */
    if (wsize > 0) shape[3] = shape[2] / size * wsize;
    ch = 16;
  }
  const PetscInt pshape[4] = {1, 1, 1, 1};
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, order, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, order, shape, &x0));
  PetscCall(FillTensor(x0, 0.1));
  /* an upsampling follows a convolution in the networks (a U-Net's decoder): A is one (3 x 3, same
     size), so that B gets the format a convolution hands over (oneDNN's blocked one in float32), whose
     fast separable kernels differ from the plain tensors' by 2-3x */
  /* a max pool too (a U-Net's or VGG's encoder: convolution, pool, convolution), and its output has
     the halo of the 3 x 3 convolution that consumes it there: on /cpu/dnnl that output takes the
     /cpu/blas loops (oneDNN would stage it), on blocked storage; a max pool timed on plain tensors
     without that halo (oneDNN's plain kernels) had priced the main job's pools 6-7x too dear */
  /* and an average pool on a blocked input ("pool-avg-blocked": LeNet-5's s4 after c3's 16 channels takes
     oneDNN's jit kernel there, which the plain "pool-avg" fit, the loops of s2 after c1's 6 plain
     channels, had priced 2.6-5.4x too dear) */
  /* and a flatten after a convolution ("flatten-blocked": LeNet-5's flat after s4's blocked output
     converts the format, which the plain fit had priced at 0.2-0.35 of the measured time) */
  const bool fromconv = kind == DDLAYERUPSAMPLE || kind == DDLAYERPOOL || kind == ddnn::ModelKindPoolAvgBlocked || kind == ddnn::ModelKindFlattenBlocked;
  PetscCall(MakeLayer(fromconv ? std::string(DDLAYERCONV) : kind, backend, x0, ch, &A));
  DDTensor x;
  PetscCall(DDLayerGetOutput(A, &x));
  PetscCall(DDLayerForward(A, x0, x)); /* x: in the format a layer of this kind hands over */
  PetscCall(MakeLayer(kind, backend, x, ch, &B, kind == DDLAYERPOOL));
  DDTensor y;
  PetscCall(DDLayerGetOutput(B, &y));
  PetscCall(DDTensorDuplicate(y, &dy));
  PetscCall(FillTensor(dy, 0.3));
  PetscCall(DDTensorDuplicate(x, &dx));
  PetscReal f, b;
  for (int d = 0; d < 2; d++) {
    PetscCall(DDLayerGetModelWork(B, d ? PETSC_TRUE : PETSC_FALSE, &f, &b));
    work[d] = (kind == DDLAYERCONV || kind == DDLAYERCONVTRANSPOSE || kind == DDLAYERAFFINE) ? f : b;
  }
  if (rows) *rows = ddnn::ModelWindowRows_Private(y);
  PetscCall(TimeForwardBackward(B, x, y, dy, dx, 5, 58, 0.08, tm));
  PetscCall(PetscInfo(NULL, "calibration: %s %s size %" PetscInt_FMT " x %" PetscInt_FMT ": work %g %g, forward %g s, backward %g s\n", kind.c_str(), DDDataTypes[dt], size, wsize > 0 ? wsize : size, work[0], work[1], tm[0], tm[1]));
  PetscCall(DDTensorDestroy(&dx));
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDLayerDestroy(&B));
  PetscCall(DDLayerDestroy(&A));
  PetscCall(DDTensorDestroy(&x0));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode TimeKind(const std::string &kind, const char backend[], DDDataType dt, PetscInt size, double work[2], double tm[2])
{
  PetscFunctionBegin;
  PetscCall(TimeKindShape(kind, backend, dt, size, 0, work, tm, NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a shape of the GEMM kinds' design: conv (n, c, h, h) -> cout channels, k x k (padding 1 for
   3 x 3, none otherwise: LeNet's 5 x 5 shrink); affine (n, c) -> cout */
struct GemmShape {
  PetscInt n, c, h, cout, k, w; /* w: the width (0: h, square) */
};

/* conv: 3 x 3 with 16 channels (the U-Net's body) at 4 sizes, and the shapes whose rate differs:
   one input channel (first layers), one output channel 1 x 1 and 3 x 3 (output layers), LeNet's
   5 x 5 with 1 -> 6 and 6 -> 16, wider 32 and 64 channels, 32 -> 16 (a decoder after a concat) */
static const GemmShape convShapes[] = {
  {4, 16, 4, 16, 3, 0},  {4, 16, 16, 16, 3, 0}, {4, 16, 32, 16, 3, 0}, {4, 1, 32, 16, 3, 0}, {4, 16, 32, 1, 1, 0}, {4, 16, 32, 1, 3, 0},
  {4, 1, 32, 6, 5, 0},   {4, 6, 14, 16, 5, 0},  {4, 32, 16, 32, 3, 0}, {4, 64, 8, 64, 3, 0}, {4, 32, 32, 16, 3, 0}, {16, 1, 32, 6, 5, 0},
  /* an encoder's channel doubling and a decoder's reduction after a concatenation (the U-Net's
     16 -> 32, 96 -> 32 and 48 -> 16 at batch 8): in float64 (im2col and GEMM on /cpu/blas) the
     decoders' backward ran at 0.7-0.75 of the rate the shapes above gave, the doubling's at 1.3 */
  {8, 16, 16, 32, 3, 0}, {8, 96, 16, 32, 3, 0}, {8, 48, 32, 16, 3, 0},
  /* narrow pieces (a W split, as on 2 ranks): as many column rows for half the flops */
  {8, 16, 32, 16, 3, 16}, {8, 96, 16, 32, 3, 8}, {8, 48, 32, 16, 3, 16},
};
/* conv-pointwise (ModelKindConvPointwise): 1 x 1 convolutions on plain inputs, the FNO main job's (its lift 3 -> 24,
   pointwise paths 24 -> 24, projection 24 -> 128 and output 128 -> 1 at batch 8 on 32 x 32, and its 24 -> 24 on half
   the width, as on 2 ranks), square ones from 16 to 256 channels (on /cpu/dnnl OpenBLAS's GEMM below 128 x 128
   channels, oneDNN's from there) and a small one for the per-call cost */
static const GemmShape pointwiseShapes[] = {
  {8, 3, 32, 24, 1, 0}, {8, 24, 32, 24, 1, 0}, {8, 24, 32, 128, 1, 0}, {8, 128, 32, 1, 1, 0}, {8, 24, 32, 24, 1, 16}, {1, 16, 4, 16, 1, 0},
  {4, 16, 16, 16, 1, 0}, {4, 32, 8, 32, 1, 0}, {4, 64, 16, 64, 1, 0}, {8, 96, 16, 96, 1, 0}, {4, 256, 8, 256, 1, 0},
  {8, 16, 32, 1, 1, 0}, /* the U-Net's output layer where its input is plain (float64, /cpu/blas) */
};
/* affine: square layers at batch 32, and the GEMM shapes of a classifier head on small batches (LeNet's 400 -> 120 -> 84 -> 10) */
static const GemmShape affineShapes[] = {
  {32, 16, 1, 16, 1, 0}, {32, 64, 1, 64, 1, 0}, {32, 256, 1, 256, 1, 0}, {16, 400, 1, 120, 1, 0}, {16, 120, 1, 84, 1, 0}, {16, 84, 1, 10, 1, 0}, {8, 400, 1, 120, 1, 0}, {4, 1024, 1, 64, 1, 0},
  {8, 120, 1, 84, 1, 0}, {8, 84, 1, 10, 1, 0}, /* the head at batch 8 (LeNet-5's 16 on two ranks) */
};

/* times a conv or affine layer of one shape; its input comes from a layer of the same kind (for conv
   a 3 x 3 one of the same size), in the format that kind hands over in a network. Not a 1 x 1 one: on
   /cpu/dnnl a 1 x 1 convolution of a plain input keeps plain storage (DnnlConvFormats()), so every
   timed convolution converted its plain input, and the float32 U-Net's 3 x 3 convolutions, which pass
   blocked tensors along, were priced at 1.5-2.7x their time in the step (the step at 1.9-2.0x).
   X: (flops, input, output, weight bytes) */
static PetscErrorCode TimeGemm(const std::string &kind, const char backend[], DDDataType dt, const GemmShape &g, double X[2][6], double tm[3])
{
  DDPartition part;
  DDTensor    x0, x, y, dx, dy, x1 = NULL;
  DDLayer     A, B;
  const bool  pointwise = kind == ddnn::ModelKindConvPointwise, conv = kind == DDLAYERCONV || pointwise;
  const PetscInt order = conv ? 4 : 2, shape[4] = {g.n, conv ? 2 : 16, g.h, g.w > 0 ? g.w : g.h}, pshape[4] = {1, 1, 1, 1};

  PetscFunctionBegin;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, order, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, order, shape, &x0));
  PetscCall(FillTensor(x0, 0.1));
  for (int l = 0; l < 2; l++) {
    DDLayer *L = l ? &B : &A;
    PetscCall(DDLayerCreate(PETSC_COMM_SELF, L));
    PetscCall(DDLayerSetType(*L, conv ? DDLAYERCONV : kind.c_str()));
    if (backend) PetscCall(DDLayerSetBackend(*L, backend));
    if (conv) {
      const PetscInt k[2] = {l ? g.k : 3, l ? g.k : 3}, p[2] = {!l || g.k == 3 ? 1 : 0, !l || g.k == 3 ? 1 : 0};
      PetscCall(DDLayerConvSetOutputChannels(*L, l ? g.cout : g.c));
      PetscCall(DDLayerConvSetKernel(*L, 2, k));
      PetscCall(DDLayerConvSetPadding(*L, 2, p));
    } else PetscCall(DDLayerAffineSetOutputFeatures(*L, l ? g.cout : g.c));
    PetscCall(DDLayerSetUp(*L, l ? x : x0));
    PetscCall(DDLayerInitializeParameters(*L, 7));
    PetscCall(DDLayerSetTraining(*L, PETSC_TRUE));
    if (!l) {
      PetscCall(DDLayerGetOutput(A, &x));
      PetscCall(DDLayerForward(A, x0, x));
      if (conv && (g.c == 1 || pointwise)) { /* one channel: a first layer, on the network's (plain) input; a pointwise one on a plain input */
        const PetscInt s1[4] = {g.n, g.c, g.h, g.w > 0 ? g.w : g.h};
        PetscCall(DDTensorCreateFromPartition(part, dt, 4, s1, &x1));
        PetscCall(FillTensor(x1, 0.15));
        x = x1;
      }
    }
  }
  PetscCall(DDLayerGetOutput(B, &y));
  PetscCall(DDTensorDuplicate(y, &dy));
  PetscCall(FillTensor(dy, 0.3));
  PetscCall(DDTensorDuplicate(x, &dx));
  for (int d = 0; d < 2; d++) {
    PetscReal f, b;
    double    e[5];
    PetscCall(ddnn::ModelGemmBytes_Private(B, d ? PETSC_TRUE : PETSC_FALSE, e));
    PetscCall(DDLayerGetModelWork(B, d ? PETSC_TRUE : PETSC_FALSE, &f, &b));
    X[d][0] = f;
    for (int j = 0; j < 5; j++) X[d][1 + j] = e[j];
  }
  PetscCall(TimeForwardBackward(B, x, y, dy, dx, 5, 58, 0.08, tm));
  { /* the backward of a network's first layer: no input gradient, the weight's alone */
    double tn[2];
    PetscCall(TimeForwardBackward(B, x, y, dy, NULL, 5, 58, 0.04, tn));
    tm[2] = tn[1];
  }
  PetscCall(PetscInfo(NULL, "calibration: %s %s n %" PetscInt_FMT " c %" PetscInt_FMT " h %" PetscInt_FMT " cout %" PetscInt_FMT " k %" PetscInt_FMT ": forward %g s, backward %g s, without dx %g s\n", kind.c_str(), DDDataTypes[dt], g.n, g.c, g.h, g.cout, g.k, tm[0], tm[1], tm[2]));
  PetscCall(DDTensorDestroy(&dx));
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDLayerDestroy(&B));
  PetscCall(DDLayerDestroy(&A));
  PetscCall(DDTensorDestroy(&x1));
  PetscCall(DDTensorDestroy(&x0));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* times a layer kind whose inputs are not one layer's output: concat (two (4, 16, 4s, 4s) along
   C), flatten ((4, 16, 4s, 4s)), loss (mse of (4, 1, 8s, 8s) against a target of that shape) and
   loss-crossentropy ((16 s, 10) logits against class indices); the bytes of DDLayerGetModelWork() */
/* TimeOther() on inputs of H x W planes where hw is not NULL ("concat-halo"); *rows (not NULL): the output's rows (ModelWindowRows_Private()) */
static PetscErrorCode TimeOtherShape(const std::string &kind, const char backend[], DDDataType dt, PetscInt size, const PetscInt hw[], double work[2], double tm[2], double *rows)
{
  DDPartition part, pl = NULL;
  DDTensor    xs[2] = {NULL, NULL}, dxs[2] = {NULL, NULL}, y, dy;
  DDLayer     B;
  PetscInt    nin = 1;
  const PetscInt pshape[4] = {1, 1, 1, 1};

  PetscFunctionBegin;
  const bool ce = kind == "loss-crossentropy";
  PetscInt   order = ce ? 2 : 4, shape[4] = {4, 16, 4 * size, 4 * size};
  if (kind == DDLAYERLOSS) {
    shape[1] = 1;
    shape[2] = shape[3] = 8 * size;
  }
  if (hw) {
    shape[2] = hw[0];
    shape[3] = hw[1];
  }
  if (ce) {
    shape[0] = 16 * size;
    shape[1] = 10;
  }
  /* a concatenation of two convolutions' outputs into the halo its consumer convolution grows
     ("concat-blocked": a U-Net's decoder after /cpu/dnnl's convolutions in float32): its copies walk
     the rows of blocked tensors with a halo, which the plain fit, timed on contiguous plain tensors,
     priced at 0.5-0.56 of the U-Net's concatenations' backward */
  const bool cb = kind == ddnn::ModelKindConcatBlocked, ch = kind == ddnn::ModelKindConcatHalo, concat = cb || ch || kind == DDLAYERCONCAT;
  DDLayer    A[2] = {NULL, NULL};
  DDTensor   x0   = NULL;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, order, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, order, shape, cb ? &x0 : &xs[0]));
  if (cb) {
    PetscCall(FillTensor(x0, 0.1));
    for (int i = 0; i < 2; i++) {
      PetscCall(MakeLayer(DDLAYERCONV, backend, x0, 16, &A[i]));
      PetscCall(DDLayerCreateOutput(A[i], &xs[i]));
      PetscCall(DDLayerForward(A[i], x0, xs[i])); /* in the format a convolution hands over */
    }
  } else PetscCall(FillTensor(xs[0], 0.1));
  PetscCall(DDLayerCreate(PETSC_COMM_SELF, &B));
  PetscCall(DDLayerSetType(B, kind.rfind(DDLAYERLOSS, 0) == 0 ? DDLAYERLOSS : concat ? DDLAYERCONCAT : kind.c_str()));
  if (backend) PetscCall(DDLayerSetBackend(B, backend));
  if (cb || ch) { /* into the halo of a 3 x 3 consumer convolution ("concat-halo": plain inputs, as the loss's and the plain concatenation's) */
    const PetscInt lo[4] = {0, 0, 1, 1};
    PetscCall(DDLayerSetOutputHalo_Private(B, lo, lo));
  }
  if (cb) nin = 2;
  else if (concat || kind == DDLAYERLOSS) {
    nin = 2;
    PetscCall(DDTensorCreateFromPartition(part, dt, order, shape, &xs[1]));
    PetscCall(FillTensor(xs[1], 0.2));
  } else if (ce) {
    nin = 2;
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, 1, pshape, PETSC_DECIDE, NULL, &pl));
    PetscCall(DDTensorCreateFromPartition(pl, dt, 1, shape, &xs[1]));
    std::vector<double> lab(shape[0]);
    for (PetscInt i = 0; i < shape[0]; i++) lab[i] = (double)(i % 10);
    if (dt == DD_FLOAT64) PetscCall(DDTensorSetValuesGlobal(xs[1], lab.data()));
    else {
      std::vector<float> f(lab.begin(), lab.end());
      PetscCall(DDTensorSetValuesGlobal(xs[1], f.data()));
    }
    PetscCall(DDLayerLossSetType(B, DD_LOSS_CROSSENTROPY));
  }
  if (concat) PetscCall(DDLayerConcatSetDimension(B, 1));
  PetscCall(DDLayerSetUpMulti(B, nin, xs));
  PetscCall(DDLayerSetTraining(B, PETSC_TRUE));
  PetscCall(DDLayerGetOutput(B, &y));
  PetscCall(DDTensorDuplicate(y, &dy));
  PetscCall(FillTensor(dy, 0.3));
  PetscCall(DDTensorDuplicate(xs[0], &dxs[0]));
  if (concat) PetscCall(DDTensorDuplicate(xs[1], &dxs[1])); /* a loss's target has no gradient */
  for (int d = 0; d < 2; d++) {
    PetscReal f, b;
    PetscCall(DDLayerGetModelWork(B, d ? PETSC_TRUE : PETSC_FALSE, &f, &b));
    work[d] = b;
  }
  /* a loss's backward is called as DDNetBackward() calls a network's output layer: dy = NULL (dL = 1;
     the layer makes the ones itself: priced with dy given it was 2-3x under the network's) */
  PetscCall(TimeForwardBackwardMulti(B, nin, xs, y, kind.rfind(DDLAYERLOSS, 0) == 0 ? NULL : dy, dxs, 5, 58, 0.05, tm));
  if (rows) *rows = ddnn::ModelWindowRows_Private(y);
  for (int i = 0; i < 2; i++) {
    PetscCall(DDTensorDestroy(&xs[i]));
    PetscCall(DDTensorDestroy(&dxs[i]));
  }
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDLayerDestroy(&B));
  for (int i = 0; i < 2; i++) PetscCall(DDLayerDestroy(&A[i]));
  PetscCall(DDTensorDestroy(&x0));
  PetscCall(DDPartitionDestroy(&pl));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* concat, flatten and the losses at their calibration shapes */
static PetscErrorCode TimeOther(const std::string &kind, const char backend[], DDDataType dt, PetscInt size, double work[2], double tm[2])
{
  PetscFunctionBegin;
  PetscCall(TimeOtherShape(kind, backend, dt, size, NULL, work, tm, NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a ReLU from a plain input to a channels-last output (mode 0: the walk converts element by
   element), to a plain output with a halo of 1 in H and W (mode 1: the walk goes row by row, as
   into the halo a consumer convolution grew), or from a convolution's blocked output to a blocked
   output with that halo (mode 2: rows of W x block entries, 1 KiB here, with the halo's gap between
   them; where the backend hands over no blocked format, *runs = 0 and nothing is timed), or as mode 1
   on planes of 8 x 8 (mode 3: rows of 8 entries, for the plain rows' length term ModelKindRowsLen): its
   bytes, runs (DDLayerGetModelRuns()), entries per run (*len) and median times, for the per-run cost. Cold, a blocked row
   costs about a memory latency (the gap stops the prefetcher's stream: the U-Net's unfused ReLUs in
   float32 took 0.032 ms cold against 0.0096 without the halo, 8x64x8x8), a plain row of the same
   bytes far less (its 8-byte gaps do not). Modes 1-3 also time the same walk into an output without
   the halo (tm0: one run, the same bytes), next to it, so that the rows' cost is a difference of two
   times taken together rather than of one time and a fit taken minutes apart: since the walk keeps its
   offsets by additions a row costs a few nanoseconds, and the fit's error over 2048 rows was as large */
static PetscErrorCode TimeConversion(const char backend[], DDDataType dt, int mode, double work[2], double *runs, double *len, double tm[2], double tm0[2])
{
  DDPartition    part;
  DDTensor       x0, x, y, dy = NULL, dx = NULL;
  DDLayer        A = NULL, B = NULL;
  const PetscInt shape[4] = {4, 16, 32, 32}, bshape[4] = {4, 32, 16, 16}, sshape[4] = {16, 16, 8, 8}, pshape[4] = {1, 1, 1, 1};
  PetscInt64     r;

  PetscFunctionBegin;
  *runs = *len = 0;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, 4, mode == 2 ? bshape : mode == 3 ? sshape : shape, &x0));
  PetscCall(FillTensor(x0, 0.1));
  x = x0;
  if (mode == 2) { /* the convolution's output: blocked where the backend blocks it */
    PetscCall(MakeLayer(DDLAYERCONV, backend, x0, 32, &A));
    PetscCall(DDLayerGetOutput(A, &x));
    PetscCall(DDLayerForward(A, x0, x));
  }
  if (mode != 2 || x->layout.bdim >= 0) {
    PetscCall(MakeLayer(DDLAYERACTIVATION, backend, x, 16, &B, mode == 2));
    PetscCall(DDLayerGetOutput(B, &y));
    if (mode == 1 || mode == 3) {
      const PetscInt lo[4] = {0, 0, 1, 1};
      PetscCall(DDTensorSetHalo(y, lo, lo));
    } else if (mode == 0) PetscCall(DDTensorSetFormat(y, DD_FORMAT_CHANNELS_LAST)); /* as a consumer may ask of it */
    PetscCheck(mode != 2 || (y->layout.bdim == x->layout.bdim && y->layout.bs == x->layout.bs), PETSC_COMM_SELF, PETSC_ERR_PLIB, "The calibration's blocked walk has an output of another format");
    PetscCall(DDLayerGetModelRuns(B, &r));
    *runs = (double)r;
    *len  = (double)y->layout.bulksize / (double)r;
    PetscCheck(r > 1, PETSC_COMM_SELF, PETSC_ERR_PLIB, "The calibration's format conversion walks %" PetscInt64_FMT " run(s)", r);
    PetscCall(DDTensorDuplicate(y, &dy));
    PetscCall(FillTensor(dy, 0.3));
    PetscCall(DDTensorDuplicate(x, &dx));
    for (int d = 0; d < 2; d++) {
      PetscReal f, b;
      PetscCall(DDLayerGetModelWork(B, d ? PETSC_TRUE : PETSC_FALSE, &f, &b));
      work[d] = b;
    }
    PetscCall(TimeForwardBackward(B, x, y, dy, dx, 20, 20, 0, tm));
    tm0[0] = tm0[1] = -1;
    if (mode) { /* the same walk into an output without the halo (one run), timed next: the rows' cost is the difference */
      DDLayer  B0;
      DDTensor y0, dy0;
      PetscCall(MakeLayer(DDLAYERACTIVATION, backend, x, 16, &B0));
      PetscCall(DDLayerGetOutput(B0, &y0));
      PetscCall(DDTensorDuplicate(y0, &dy0));
      PetscCall(FillTensor(dy0, 0.3));
      PetscCall(TimeForwardBackward(B0, x, y0, dy0, dx, 20, 20, 0, tm0));
      PetscCall(DDTensorDestroy(&dy0));
      PetscCall(DDLayerDestroy(&B0));
    }
  }
  PetscCall(DDTensorDestroy(&dx));
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDLayerDestroy(&B));
  PetscCall(DDLayerDestroy(&A));
  PetscCall(DDTensorDestroy(&x0));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  An add of a plain tensor (4 x 16 x 32 x 32) and a convolution's output of the same shape, stored as the backend
  stores it (blocked on /cpu/dnnl in float32), against the add of two plain tensors, forward and backward (tm,
  tm0): the difference is the format conversion of the second input, entry by entry (ModelKindAddConvert);
  *entries 0 where the convolution's output is plain (nothing to convert)
*/
static PetscErrorCode TimeAddConversion(const char backend[], DDDataType dt, double *entries, double tm[2], double tm0[2])
{
  DDPartition    part;
  DDTensor       x0, x1, xb, y, y0, dy, dx[2], db;
  DDLayer        A, C, C0;
  const PetscInt shape[4] = {4, 16, 32, 32}, pshape[4] = {1, 1, 1, 1};

  PetscFunctionBegin;
  *entries = 0;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, 4, shape, &x0));
  PetscCall(DDTensorCreateFromPartition(part, dt, 4, shape, &x1));
  PetscCall(FillTensor(x0, 0.1));
  PetscCall(FillTensor(x1, 0.2));
  PetscCall(MakeLayer(DDLAYERCONV, backend, x0, 16, &A));
  PetscCall(DDLayerGetOutput(A, &xb));
  PetscCall(DDLayerForward(A, x0, xb));
  if (xb->format != x0->format || xb->layout.bdim >= 0) {
    DDTensor xs[2] = {x0, xb}, ps[2] = {x0, x1};
    for (int k = 0; k < 2; k++) {
      DDLayer *l = k ? &C0 : &C;
      PetscCall(DDLayerCreate(PETSC_COMM_SELF, l));
      PetscCall(DDLayerSetType(*l, DDLAYERADD));
      if (backend) PetscCall(DDLayerSetBackend(*l, backend));
      PetscCall(DDLayerSetUpMulti(*l, 2, k ? ps : xs));
    }
    PetscCall(DDLayerGetOutput(C, &y));
    PetscCall(DDLayerGetOutput(C0, &y0));
    PetscCall(DDTensorDuplicate(y, &dy));
    PetscCall(FillTensor(dy, 0.3));
    PetscCall(DDTensorDuplicate(x0, &dx[0]));
    PetscCall(DDTensorDuplicate(xb, &dx[1]));
    PetscCall(DDTensorDuplicate(x1, &db));
    PetscCall(TimeForwardBackwardMulti(C, 2, xs, y, dy, dx, 20, 20, 0, tm));
    {
      DDTensor dps[2] = {dx[0], db};
      PetscCall(TimeForwardBackwardMulti(C0, 2, ps, y0, dy, dps, 20, 20, 0, tm0));
    }
    *entries = (double)xb->layout.bulksize;
    PetscCall(DDTensorDestroy(&dy));
    PetscCall(DDTensorDestroy(&dx[0]));
    PetscCall(DDTensorDestroy(&dx[1]));
    PetscCall(DDTensorDestroy(&db));
    PetscCall(DDLayerDestroy(&C));
    PetscCall(DDLayerDestroy(&C0));
  }
  PetscCall(DDLayerDestroy(&A));
  PetscCall(DDTensorDestroy(&x0));
  PetscCall(DDTensorDestroy(&x1));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the median time of call(): two warm-up calls, then at least 10 and at most maxreps - 2
   timed ones, until they add up to 30 ms; before each, L2 evicted and the nflush tensors flush[]
   written back to memory */
static PetscErrorCode TimeCalls(int maxreps, PetscInt nflush, DDTensor flush[], const std::function<PetscErrorCode()> &call, double *tm)
{
  std::vector<double> ts;
  PetscLogDouble      spent = 0;

  PetscFunctionBegin;
  for (int r = 0; r < maxreps && (r < 12 || spent < 0.03); r++) {
    Stamp t0, t1;
    EvictL2();
    if (nflush) PetscCall(FlushTensors(nflush, flush));
    PetscCall(Now(&t0));
    PetscCall(call());
    PetscCall(Now(&t1));
    if (r >= 2) {
      ts.push_back(Elapsed(t0, t1));
      spent += ts.back();
    }
  }
  *tm = MedianOf(ts);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the per-configuration kernel times measured in this process (ModelMeasureKernels_Private()):
   "<backend> <configuration>" -> {forward, backward} warm, then cold, and whether they were measured */
struct KernelMeasured {
  double t[2][2];
  bool   measured;
};
static std::map<std::string, KernelMeasured> kernelMeasured;

namespace ddnn
{
/* Paper 003 sec. V-A's estimate of a convolution: "a simple benchmark that times the appropriate
   function" for the configuration at hand; a pooling's likewise (its kernel's speed turns on more than its
   bytes: oneDNN's plain average pool over LeNet-5's 6 channels takes 1.8x the time per byte of 16 channels).
   The local kernels of a set-up conv layer (DDLayerConvKernelRun_Private(): forward with the activation its
   kernel fuses, backward data and weights), pool layer (DDLayerPoolKernelRun_Private(): forward, backward)
   or spectral layer (DDLayerSpectralKernelRun_Private(): the FFT stages and the mode mixing, with a local copy in place of
   each repartition unless nomoves) on this rank, on copies of its tensors, without exchanges, each called with L2 evicted (warm) and with
   its tensors flushed from every cache (cold), medians as the calibration's; remembered per
   configuration for the process, so that layers of the same local shape are timed once.
   t[0]: warm {forward, backward}, t[1]: cold; zeros where this rank has no local output; measured false
   where copies on this rank alone cannot reproduce the layer's local storage (the fit prices it then) */
PetscErrorCode ModelMeasureKernels_Private(DDLayer layer, PetscBool nodx, PetscBool nomoves, double t[2][2], PetscBool *measured)
{
  LayerKernelRun run;
  const char    *bname;
  PetscBool      ispool;

  PetscFunctionBegin;
  PetscCall(DDLayerGetBackend(layer, &bname));
  PetscBool      isspectral;
  PetscCall(PetscObjectTypeCompare((PetscObject)layer, DDLAYERPOOL, &ispool));
  PetscCall(PetscObjectTypeCompare((PetscObject)layer, DDLAYERSPECTRAL, &isspectral));
  auto make = [&](bool copies) {
    if (ispool) return DDLayerPoolKernelRun_Private(layer, nodx ? true : false, copies, &run);
    if (isspectral) return DDLayerSpectralKernelRun_Private(layer, nodx ? true : false, nomoves ? false : true, copies, &run);
    return DDLayerConvKernelRun_Private(layer, nodx ? true : false, copies, &run);
  };
  PetscCall(make(false)); /* the configuration's key alone: no copies where it is known */
  const std::string key = std::string(bname) + " " + run.key;
  auto              it  = kernelMeasured.find(key);
  *measured             = run.untimed ? PETSC_FALSE : PETSC_TRUE;
  for (int c = 0; c < 2; c++)
    for (int b = 0; b < 2; b++) t[c][b] = it != kernelMeasured.end() ? it->second.t[c][b] : 0;
  if (run.key.empty()) PetscFunctionReturn(PETSC_SUCCESS); /* no local output, or (untimed) nothing to reproduce */
  if (it != kernelMeasured.end()) {
    *measured = it->second.measured ? PETSC_TRUE : PETSC_FALSE;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(make(true));
  if (run.untimed) {
    kernelMeasured[key] = {{{0, 0}, {0, 0}}, false};
    *measured           = PETSC_FALSE;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode ierr = PETSC_SUCCESS;
  for (int c = 0; c < 2 && !ierr; c++) {
    double tm[3] = {0, 0, 0};
    for (int p = 0; p < 3 && !ierr; p++)
      if (run.pass[p]) ierr = TimeCalls(30, c ? (PetscInt)run.tensors.size() : 0, run.tensors.data(), run.pass[p], &tm[p]);
    t[c][0] = tm[0];
    t[c][1] = tm[1] + tm[2];
  }
  PetscCall(LayerKernelRunDestroy(&run)); /* also after an error */
  PetscCall(ierr);
  kernelMeasured[key] = {{{t[0][0], t[0][1]}, {t[1][0], t[1][1]}}, true};
  PetscCall(PetscInfo(layer, "model: measured %s: forward %g s, backward %g s (warm), %g s, %g s (cold)\n", key.c_str(), t[0][0], t[0][1], t[1][0], t[1][1]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* forgets the measured configurations (DDModelReset()) */
void ModelForgetMeasured_Private(void)
{
  kernelMeasured.clear();
}
} // namespace ddnn

/* two vectors of n entries on this rank, filled with 0.1 and 0.2 (their 1-D partition returned for its destruction) */
static PetscErrorCode VectorPair(DDDataType dt, PetscInt n, DDPartition *part, DDTensor *x, DDTensor *y)
{
  const PetscInt p1 = 1;

  PetscFunctionBegin;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, 1, &p1, PETSC_DECIDE, NULL, part));
  PetscCall(DDTensorCreateFromPartition(*part, dt, 1, &n, x));
  PetscCall(DDTensorCreateFromPartition(*part, dt, 1, &n, y));
  PetscCall(FillTensor(*x, 0.1));
  PetscCall(FillTensor(*y, 0.2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* DDTensorZeroEntries (axpy false) or DDTensorAXPY (true) of n entries: bytes (written; read and written) and median time */
static PetscErrorCode TimeAux(bool axpy, DDDataType dt, PetscInt n, double *work, double *tm)
{
  DDPartition part;
  DDTensor    x, y;
  size_t      es;

  PetscFunctionBegin;
  PetscCall(DDDataTypeGetSize(dt, &es));
  PetscCall(VectorPair(dt, n, &part, &x, &y));
  PetscCall(TimeCalls(200, 0, NULL, [&]() { return axpy ? DDTensorAXPY(y, 1e-3, x) : DDTensorZeroEntries(y); }, tm));
  *work = (double)es * (double)n * (axpy ? 3 : 1);
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* DDOptimizerStep() of one parameter tensor of n entries (streams 3: plain SGD, 5: SGD with
   momentum, 7: Adam; learning rate 1e-30, so that the values stay): its parameter bytes and
   median time, warm (out of L2) or cold (calflush: the parameter, its gradient and the
   optimizer's state written back to memory first: a training step touches them once, its
   backward long before). The time holds the whole call: the gradient norm's pass (the call's
   all-reduce is on one rank here; the model adds it on P) and the update's arithmetic (Adam's
   square root and division per entry, which the copy kernels' fits had priced 4-10x too low) */
static PetscErrorCode TimeUpdate(PetscInt streams, DDDataType dt, PetscInt n, double *work, double *tm)
{
  DDPartition part;
  DDTensor    p, g;
  DDOptimizer opt;
  size_t      es;

  PetscFunctionBegin;
  PetscCall(DDDataTypeGetSize(dt, &es));
  PetscCall(VectorPair(dt, n, &part, &p, &g));
  PetscCall(DDOptimizerCreate(PETSC_COMM_SELF, &opt));
  PetscCall(DDOptimizerSetType(opt, streams == 7 ? DDOPTIMIZERADAM : DDOPTIMIZERSGD));
  if (streams == 5) PetscCall(DDOptimizerSetMomentum(opt, 0.9, PETSC_FALSE));
  PetscCall(DDOptimizerSetLearningRate(opt, 1e-30));
  PetscCall(DDOptimizerSetUp(opt, 1, &p, &g));
  std::vector<DDTensor> all = {p, g};
  for (PetscInt k = 0; k < opt->nstate; k++) {
    DDTensor t;
    PetscCall(DDOptimizerGetParameterState_Private(opt, 0, k, &t));
    all.push_back(t);
  }
  PetscCall(TimeCalls(calflush ? 40 : 200, calflush ? (PetscInt)all.size() : 0, all.data(), [&]() { return DDOptimizerStep(opt); }, tm));
  *work = (double)es * (double)n;
  PetscCall(DDOptimizerDestroy(&opt));
  PetscCall(DDTensorDestroy(&p));
  PetscCall(DDTensorDestroy(&g));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the median time of a halo exchange of width 1 (and of its adjoint) on (4, 16, n, n P) split over W
   across comm, applied back to back as a network's layers apply it (packing, the messages, the
   wait for the neighbour and unpacking), and the bytes a rank sends or receives (the most) */
static PetscErrorCode TimeHalo(MPI_Comm comm, DDDataType dt, PetscInt n, double work[2], double tm[2])
{
  PetscMPIInt P;
  DDPartition part;
  DDTensor    x;
  DDPrimitive H;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &P));
  const PetscInt ps[4] = {1, 1, 1, P}, sh[4] = {4, 16, n, n * P};
  PetscCall(DDPartitionCreateCartesian(comm, 4, ps, P, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, 4, sh, &x));
  PetscCall(FillTensor(x, 0.2));
  PetscCall(DDPrimitiveCreate(comm, &H));
  PetscCall(DDPrimitiveSetType(H, DDPRIMITIVEHALO));
  for (PetscInt d = 2; d < 4; d++) PetscCall(DDPrimitiveHaloSetKernel(H, d, 3, 1, 1, 1, PETSC_DECIDE));
  PetscCall(DDPrimitiveSetUp(H, x, NULL));
  for (int d = 0; d < 2; d++) {
    PetscInt64 v[4];
    PetscCall(DDPrimitiveGetCommVolume(H, d ? PETSC_TRUE : PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
    work[d] = (double)PetscMax(v[1], v[3]);
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &work[d], 1, MPI_DOUBLE, MPI_MAX, comm));
  }
  std::vector<double> ts[2];
  PetscCallMPI(MPI_Barrier(comm));
  for (int r = 0; r < 62; r++) {
    Stamp t0, t1, t2;
    PetscCall(Now(&t0));
    PetscCall(DDPrimitiveApply(H, x, x));
    PetscCall(Now(&t1));
    PetscCall(DDPrimitiveApplyAdjoint(H, x, x));
    PetscCall(Now(&t2));
    if (r >= 2) {
      ts[0].push_back(Elapsed(t0, t1));
      ts[1].push_back(Elapsed(t1, t2));
    }
  }
  for (int d = 0; d < 2; d++) {
    std::sort(ts[d].begin(), ts[d].end());
    tm[d] = ts[d][ts[d].size() / 2];
  }
  PetscCall(DDPrimitiveDestroy(&H));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the median time of a repartition (and of its adjoint) of sh, from a partition splitting dimension a over
   the P ranks to one splitting dimension b, as a network's layers apply it (the copies of the rank's own
   part, packing, the messages, the wait for the peers and unpacking), with every rank's L2 evicted first
   (tm[0]: warm, as the kernels' fits) and with its tensors flushed from every cache (tm[1]: cold); each call
   after a barrier, a fixed number of them (collective), the slowest rank's; and its terms on this rank: the
   bytes it sends or receives (the most), the runs it sends from, receives into and copies within the rank,
   the bytes of its own part (DDPrimitiveGetExchangeWork_Private()). tm[c][d]: d 0 forward, 1 adjoint */
static PetscErrorCode TimeRepartition(MPI_Comm comm, DDDataType dt, PetscInt order, const PetscInt sh[], PetscInt a, PetscInt b, double work[2][5], double tm[2][2])
{
  PetscMPIInt P;
  DDPartition pa, pb;
  DDTensor    t[2];
  DDPrimitive R;
  PetscInt    psa[DD_MAX_DIM], psb[DD_MAX_DIM];

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &P));
  for (PetscInt k = 0; k < order; k++) psa[k] = psb[k] = 1;
  psa[a] = psb[b] = P;
  PetscCall(DDPartitionCreateCartesian(comm, order, psa, P, NULL, &pa));
  PetscCall(DDPartitionCreateCartesian(comm, order, psb, P, NULL, &pb));
  PetscCall(DDTensorCreateFromPartition(pa, dt, order, sh, &t[0]));
  PetscCall(DDTensorCreateFromPartition(pb, dt, order, sh, &t[1]));
  PetscCall(FillTensor(t[0], 0.2));
  PetscCall(DDPrimitiveCreate(comm, &R));
  PetscCall(DDPrimitiveSetType(R, DDPRIMITIVEREPARTITION));
  PetscCall(DDPrimitiveSetUp(R, t[0], t[1]));
  for (int d = 0; d < 2; d++) {
    PetscInt64 v[4], w[4];
    PetscCall(DDPrimitiveGetCommVolume(R, d ? PETSC_TRUE : PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
    PetscCall(DDPrimitiveGetExchangeWork_Private(R, d ? PETSC_TRUE : PETSC_FALSE, w));
    work[d][0] = (double)PetscMax(v[1], v[3]);
    for (int k = 0; k < 4; k++) work[d][1 + k] = (double)w[k];
  }
  for (int c = 0; c < 2; c++) {
    std::vector<double> ts[2];
    for (int r = 0; r < 42; r++)
      for (int d = 0; d < 2; d++) {
        Stamp t0, t1;
        EvictL2();
        if (c) PetscCall(FlushTensors(2, t));
        PetscCallMPI(MPI_Barrier(comm));
        PetscCall(Now(&t0));
        if (d) PetscCall(DDPrimitiveApplyAdjoint(R, t[1], t[0]));
        else PetscCall(DDPrimitiveApply(R, t[0], t[1]));
        PetscCall(Now(&t1));
        if (r >= 2) ts[d].push_back(Elapsed(t0, t1));
      }
    for (int d = 0; d < 2; d++) tm[c][d] = MedianOf(ts[d]);
  }
  PetscCall(DDPrimitiveDestroy(&R));
  PetscCall(DDTensorDestroy(&t[0]));
  PetscCall(DDTensorDestroy(&t[1]));
  PetscCall(DDPartitionDestroy(&pa));
  PetscCall(DDPartitionDestroy(&pb));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDModelCalibrate - Measures this machine for the performance model and caches the result: an alpha-beta fit of MPI and the kernel times of each calibrated layer kind on a backend and data type

  Collective

  Input Parameters:
+ comm    - the ranks to measure on (as in the runs to be predicted: one rank per core)
. backend - the backend's name (NULL: the default)
- dt      - the data type

  Options Database Keys:
+ -dd_model_calibrate    - `DDNetView()` (-net_view) calibrates first when the cache lacks the network's backend and data type
- -dd_model_cache <path> - the cache file (`DDModelGetCachePath()`)

  Notes:
  Every call is timed as the smaller of its wall time and the process's CPU time (other processes'
  time slices on a shared machine are not the kernel's), and each layer kind twice: with its tensors
  pushed out of the core's L2 cache before each call (warm: the layers before it in a small network
  did that), and with them written back to memory and out of every cache (cold, stored as
  "<kind>:cold": a network whose memory per rank exceeds L2 finds them there).
  Pairs of ranks exchange 8 B to 2 MiB both ways at once (MPI_Sendrecv, as the exchange engine's
  halo and repartition messages go), and t = alpha + beta n is fitted to the slowest pair's
  medians by least squares; on one rank alpha and beta are kept from the cache (none are
  needed there). Every rank then times, after warm-up, one forward and one backward of:
  conv over 18 shapes (3x3 with 16 channels at 4x4 to 32x32, 32 and 64 channels, 1 -> 16 and
  16 -> 1 channels, 1x1, LeNet's 5x5 1 -> 6 and 6 -> 16, a channel doubling 16 -> 32 and decoder
  reductions 96 -> 32 and 48 -> 16 at batch 8, square and of half width; each on the output of a 3 x 3
  convolution, so in the storage a convolution hands on), 1 x 1 convolutions on plain inputs over 12
  ("conv-pointwise": an FNO's lift, pointwise paths, projection and output, a U-Net's 16 -> 1 output, square ones of 16 to 256
  channels; on `/cpu/dnnl` they keep plain storage and run as GEMMs) and affine over 10
  (square at batch 32, a classifier head 400 -> 120 -> 84 -> 10 at batch 4 to 16), fitted as
  t = c0 + c1 flops + c2 input bytes + c3 output bytes + c4 (conv: flops of idle vector lanes,
  affine: weight bytes) + c5 (conv: rows of the column matrix, N Hout Ci K^d: the GEMM kernels'
  im2col and col2im copy one per row) + c6 (conv: the flops of the passes that do not run Winograd's
  algorithm, as the backend chain chooses per pass: `-dd_conv_winograd`; c1 is then the Winograd
  passes' rate, c6 what a direct flop costs more) by non-negative least squares in relative error, and their
  backward without the input gradient (a network's first layer, "<kind>-wgrad"); at four sizes
  (4x4 to 64x64: the small ones fix the per-call cost) convtranspose (2x2 stride 2), ReLU, batch
  norm, max and average pool 2x2 ("pool", "pool-avg"; "pool-avg-blocked" after a convolution), bilinear upsampling x2, the other
  activation functions (tanh, sigmoid, ...), concat (and of two convolutions' outputs into a
  consumer convolution's halo, "concat-blocked": copies over blocked rows; of two plain tensors into
  such a halo, "concat-halo", with a term in the output's rows as the window kinds, over six
  planes up to 64 x 64), flatten (and after a
  convolution, "flatten-blocked": a format conversion from oneDNN's blocked storage), the mse loss and the cross-entropy
  loss against class indices (the losses' backward with dy = NULL, as `DDNetBackward()` calls a
  network's output layer), fitted as t = c0 + c1 work (`DDLayerGetModelWork()`).
  All ranks run at once on PETSC_COMM_SELF, start each call together, and a call takes the slowest
  rank's time (the wait for it is part of a layer's time in a network); on P > 1 ranks the fits are
  stored as those of "<backend>@P", used for predictions on P ranks (else the one-rank fits).
  A ReLU from a plain to a channels-last tensor gives the per-run cost of a format conversion
  (`DDLayerGetModelRuns()`), two into a tensor with a halo (rows of 32 and of 8 entries) the cost of
  a row of a row-by-row walk, a constant ("activation-rows") and a term per entry of the row
  ("activation-rows-len"), and where the backend hands over a blocked format (/cpu/dnnl in float32), one from a
  convolution's blocked output into a blocked tensor with a halo that of a row-by-row walk between
  blocked tensors ("activation-rows-blocked": cold, each row restarts the prefetcher's stream)
  (all warm and cold),
  and `DDTensorZeroEntries()` and `DDTensorAXPY()` at 256 to 1M entries the network's own work
  (`DDNetGetModelTime()`), and `DDOptimizerStep()` of plain SGD, SGD with momentum and Adam on one
  parameter of 4K to 1M entries, warm and cold (the optimizer's update, `DDNetGetModelUpdateTime()`). On more than one rank, a halo exchange of
  width 1 along a W split, applied back to back as layers apply it (median: packing, waiting and
  unpacking included), is fitted as t = c0 + c1 bytes and prices the layers' halo exchanges in
  place of alpha-beta (twice where the system allows -dd_exchange_direct: with and without it, the
  fit of the mode a run uses pricing its halos); repartitions ("repartition", "repartition-direct"),
  forward and adjoint, over 15 transposes (batch, channel or spatial splits into spatial ones, most
  both ways; runs of a few complex entries, of a row, of whole planes; a partition onto itself), each
  call after a barrier with L2 evicted and, stored as ":cold", with their tensors flushed, are
  fitted as t = c0 + c1 bytes sent or received (the most) + c2 runs sent from + c3 runs received
  into + c4 runs copied within the rank + c5 bytes copied within the rank (the exchange plan's runs
  of consecutive entries) and price every repartition a layer runs, those inside a spectral layer's
  FFTs included, in place of alpha-beta; and MPI_Ibcast, MPI_Reduce and MPI_Allreduce of 256 B to
  1 MiB in groups of
  2, 4, ... and P ranks (the slowest rank, median) the weight broadcasts, gradient
  reductions and all-reductions in place of Thakur's formulas.
  Rank 0 writes the merged cache. Measured on 2 cores shared with other work (load 10-15): about
  20 s on one rank, 2.5-3 min on two (every call waits at a barrier for the other rank's time
  slice; far less on an idle machine). Paper 003 sec. V-A.

  Host backends only: a backend that computes in device memory (/gpu/cuda) is an error
  (`PETSC_ERR_SUP`), since the timing above (CPU time, cache eviction, flushed lines) is a host
  kernel's; networks on such a backend are not priced (`DDNetViewModel()` says so, and
  -net_distribution auto and -net_weights auto keep the given distribution and the broadcast mode).

  Level: intermediate

.seealso: `DDModelLoad()`, `DDLayerGetModelTime()`, `DDNetViewModel()`
@*/
PetscErrorCode DDModelCalibrate(MPI_Comm comm, const char backend[], DDDataType dt)
DD_CXX_TRY
{
  PetscMPIInt size;
  const char *bname = backend;
  PetscBool   have;

  PetscFunctionBegin;
  PetscCall(DDInitializePackage());
  PetscCheck(dt == DD_FLOAT32 || dt == DD_FLOAT64, comm, PETSC_ERR_ARG_OUTOFRANGE, "DDModelCalibrate(): unknown data type %d", (int)dt);
  if (!bname) PetscCall(DDBackendGetDefault(&bname));
  {
    DDBackend b;
    DDMemType mt;
    PetscCall(DDBackendGet(bname, &b)); /* an unknown backend's name is an error here */
    PetscCall(DDBackendGetMemType(b, &mt));
    PetscCheck(mt == DD_MEMTYPE_HOST, comm, PETSC_ERR_SUP, "DDModelCalibrate(): the performance model calibrates host backends only; %s computes in %s memory, whose kernels it cannot time yet", bname, DDMemTypes[mt]);
  }
  PetscCall(DDModelLoad(comm, bname, dt, &have)); /* a corrupt cache is an error before any measurement */
  calcomm  = comm;
  calflush = false;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  /* the fits are stored under the backend's name, on P > 1 ranks under "<name>@P" (model.cxx, FindKern()) */
  const std::string bkey = size > 1 ? std::string(bname) + "@" + std::to_string(size) : std::string(bname);
  if (size > 1) {
    PetscReal a, b;
    PetscCall(CalibrateComm(comm, &a, &b));
    PetscCall(ddnn::ModelStoreComm_Private(a, b));
  }
  /* twice: with the tensors in the caches below L2 (warm), and written back to memory before each
     call (cold, ":cold"): a network whose tensors exceed the core's L2 finds them in memory (model.cxx, NetCold()) */
  for (int cold = 0; cold < 2; cold++) {
    const std::string sfx = cold ? ":cold" : "";
    calflush              = cold == 1;
    for (const std::string gk : {DDLAYERCONV, DDLAYERAFFINE, ddnn::ModelKindConvPointwise}) { /* t = c0 + c1 flops + c2 input + c3 output bytes + c4 (idle-lane flops or weight bytes) + c5 column rows + c6 direct passes' flops over a design of shapes */
      std::vector<std::vector<double>> X[3];
      std::vector<double>              t[3];
      const bool                       pw = gk == ddnn::ModelKindConvPointwise, conv = gk == DDLAYERCONV || pw;
      const size_t                     ns = pw ? sizeof(pointwiseShapes) / sizeof(pointwiseShapes[0]) : conv ? sizeof(convShapes) / sizeof(convShapes[0]) : sizeof(affineShapes) / sizeof(affineShapes[0]);
      for (size_t i = 0; i < ns; i++) {
        const GemmShape &g = pw ? pointwiseShapes[i] : conv ? convShapes[i] : affineShapes[i];
        double           Xi[2][6], tm[3];
        PetscCall(TimeGemm(gk, bname, dt, g, Xi, tm));
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 3, MPI_DOUBLE, MPI_MAX, comm));
        for (int d = 0; d < 3; d++) {
          if (d == 1 && conv && g.c == 1) continue; /* one input channel: a first layer, whose input gradient is not computed (d = 2) */
          X[d].push_back(std::vector<double>(Xi[d ? 1 : 0], Xi[d ? 1 : 0] + 6));
          t[d].push_back(tm[d]);
        }
      }
      for (int d = 0; d < 2; d++) PetscCall(ddnn::ModelStoreGemmKernel_Private(bkey.c_str(), dt, (gk + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, X[d], t[d]));
      PetscCall(ddnn::ModelStoreGemmKernel_Private(bkey.c_str(), dt, (gk + "-wgrad" + sfx).c_str(), PETSC_TRUE, X[2], t[2]));
    }
    /* a memory-bound kind's fit t = c0 + c1 work over four sizes, each the slowest rank's time */
    auto fit = [&](const std::string &kind, std::initializer_list<PetscInt> sizes, decltype(&TimeKind) timer) -> PetscErrorCode {
      std::vector<double> w[2], t[2];
      PetscFunctionBegin;
      for (PetscInt s : sizes) {
        double wk[2], tm[2];
        PetscCall(timer(kind, bname, dt, s, wk, tm));
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, comm));
        for (int d = 0; d < 2; d++) {
          w[d].push_back(wk[d]);
          t[d].push_back(tm[d]);
        }
      }
      for (int d = 0; d < 2; d++) PetscCall(ddnn::ModelStoreKernel_Private(bkey.c_str(), dt, (kind + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, w[d], t[d]));
      PetscFunctionReturn(PETSC_SUCCESS);
    };
    /* a kind whose fit has a term in its output's rows: t = c0 + c1 bytes + c2 output rows (ModelWindowRows_Private()) over
       planes hw, timed by time(hw, work, times, rows), each the slowest rank's */
    using RowsTimer = std::function<PetscErrorCode(const PetscInt[2], double[2], double[2], double *)>;
    auto fitrows    = [&](const std::string &kind, std::initializer_list<std::array<PetscInt, 2>> hw, const RowsTimer &time) -> PetscErrorCode {
      std::vector<std::vector<double>> X[2];
      std::vector<double>              t[2];
      PetscFunctionBegin;
      for (const auto &s : hw) {
        double wk[2], tm[2], rows;
        PetscCall(time(s.data(), wk, tm, &rows));
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, comm));
        for (int d = 0; d < 2; d++) {
          X[d].push_back({wk[d], rows});
          t[d].push_back(tm[d]);
        }
      }
      for (int d = 0; d < 2; d++) PetscCall(ddnn::ModelStoreGemmKernel_Private(bkey.c_str(), dt, (kind + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, X[d], t[d]));
      PetscFunctionReturn(PETSC_SUCCESS);
    };
    for (const std::string ok : {DDLAYERCONCAT, DDLAYERFLATTEN, DDLAYERLOSS, "loss-crossentropy", ddnn::ModelKindConcatBlocked}) PetscCall(fit(ok, {1, 2, 4, 8}, TimeOther));
    /* plain inputs into a halo ("concat-halo"): each row of the output starts inside a cache line; over 4 x 16 x H x W
       inputs, square planes up to 2 MiB per float64 input (past the core's L2, where the output's write-backs run
       during the copies) and two oblong ones of the same bytes, so that rows and bytes vary apart. Cold, float64,
       the U-Net's k1 (8 x (32 + 16) x 32 x 32, rows of 32) copied at 15 GB/s, concatenations of 64 x 64 planes at 17-25 GB/s */
    PetscCall(fitrows(ddnn::ModelKindConcatHalo, {{8, 8}, {16, 16}, {32, 32}, {64, 64}, {64, 16}, {16, 64}}, [&](const PetscInt s[2], double wk[2], double tm[2], double *rows) { return TimeOtherShape(ddnn::ModelKindConcatHalo, bname, dt, 1, s, wk, tm, rows); }));
    std::vector<std::string> kinds = {DDLAYERCONVTRANSPOSE, DDLAYERACTIVATION, DDLAYERBATCHNORM, DDLAYERPOOL, ddnn::ModelKindPoolAvg, ddnn::ModelKindPoolAvgBlocked, DDLAYERUPSAMPLE, ddnn::ModelKindFlattenBlocked};
    for (DDActivationType a : {DD_ACT_LEAKYRELU, DD_ACT_TANH, DD_ACT_SIGMOID, DD_ACT_GELU, DD_ACT_IDENTITY, DD_ACT_SILU, DD_ACT_ELU, DD_ACT_SOFTPLUS}) kinds.push_back(std::string(DDLAYERACTIVATION) + "-" + DDActivationTypes[a]); /* model.cxx's calibratedActs */
    for (const std::string &ks : kinds) {
      if (!ddnn::ModelIsWindowKind_Private(ks)) {
        PetscCall(fit(ks, {1, 4, 8, 16}, TimeKind)); /* 4x4 (the per-call cost: LeNet's small layers) to 64x64 */
        continue;
      }
      /* the window kinds: over the same square planes and two oblong ones (tall and narrow: many short rows; short and
         wide: few long ones), so that rows and bytes vary apart; on blocked storage the rows are proportional to the bytes
         and the fit drops the term */
      PetscCall(fitrows(ks, {{1, 1}, {4, 4}, {8, 8}, {16, 16}, {16, 2}, {2, 16}}, [&](const PetscInt s[2], double wk[2], double tm[2], double *rows) { return TimeKindShape(ks, bname, dt, s[0], s[1], wk, tm, rows); }));
    }
  }
  /* the per-run cost of a walk over two layouts, warm and cold (":cold", each less the same walk without
     the halo for the row walks, the ReLU's fit of the same kind for a format conversion: a row-by-row walk into a tensor with a halo touches partial cache lines at
     every row, which costs more when they come from memory; the U-Net's ReLUs into a convolution's
     halo were 0.45-0.75 of the measured time with the warm per-run cost alone) */
  for (int cold = 0; cold < 2; cold++) {
    const std::string sfx = cold ? ":cold" : "";
    double            row[4][2] = {{0, 0}}, rowlen[4] = {0}; /* modes 1 and 3: the cost per row, and its entries */
    calflush              = cold == 1;
    for (int mode = 0; mode < 4; mode++) {
      double wk[2], tm[2], tm0[2] = {-1, -1}, runs, len;
      PetscCall(TimeConversion(bname, dt, mode, wk, &runs, &len, tm, tm0));
      { /* no blocked format on this backend: skipped on every rank together (a rank that skipped alone would leave the others in the all-reduce below) */
        int have[2] = {runs > 0, -(runs > 0)};
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, have, 2, MPI_INT, MPI_MIN, comm));
        PetscCheck(have[0] == -have[1], comm, PETSC_ERR_ARG_INCOMP, "DDModelCalibrate(): backend %s hands a convolution's output over in a blocked format on some ranks and not on others (-dd_backend or the data type differ between ranks)", bname);
        if (!have[0]) continue;
      }
      PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, comm));
      PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm0, 2, MPI_DOUBLE, MPI_MAX, comm));
      for (int d = 0; d < 2; d++) {
        double base = tm0[d]; /* the row walks: the same walk into an output without halo, timed next to it */
        if (base < 0) PetscCall(ddnn::ModelKernelTime_Private(bkey.c_str(), dt, (DDLAYERACTIVATION + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, wk[d], &base)); /* a format conversion: the ReLU's fit at its bytes */
        const double per = std::max(0.0, (tm[d] - base) / (runs - 1));
        row[mode][d]     = per;
        rowlen[mode]     = len;
        if (mode == 0 || mode == 2) PetscCall(ddnn::ModelStoreRunCost_Private(bkey.c_str(), dt, (std::string(mode == 2 ? ddnn::ModelKindRowsBlocked : DDLAYERACTIVATION) + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, per));
      }
    }
    { /* an add converting one input's format (ModelKindAddConvert): its cost per entry beyond the add of two tensors stored alike */
      double entries, tm[2], tm0[2];
      PetscCall(TimeAddConversion(bname, dt, &entries, tm, tm0));
      int have[2] = {entries > 0, -(entries > 0)};
      PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, have, 2, MPI_INT, MPI_MIN, comm));
      PetscCheck(have[0] == -have[1], comm, PETSC_ERR_ARG_INCOMP, "DDModelCalibrate(): backend %s stores a convolution's output in another format than plain on some ranks and not on others (-dd_backend or the data type differ between ranks)", bname);
      if (have[0]) {
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, comm));
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm0, 2, MPI_DOUBLE, MPI_MAX, comm));
        for (int d = 0; d < 2; d++) PetscCall(ddnn::ModelStoreRunCost_Private(bkey.c_str(), dt, (std::string(ddnn::ModelKindAddConvert) + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, std::max(0.0, (tm[d] - tm0[d]) / entries)));
      }
    }
    for (int d = 0; d < 2; d++) { /* plain rows: per row c + l n over mode 1's rows of 32 and mode 3's of 8 entries (l >= 0; c >= 0) */
      const double l = rowlen[1] > rowlen[3] ? std::max(0.0, (row[1][d] - row[3][d]) / (rowlen[1] - rowlen[3])) : 0;
      PetscCall(ddnn::ModelStoreRunCost_Private(bkey.c_str(), dt, ("activation-rows" + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, std::max(0.0, row[1][d] - l * rowlen[1])));
      PetscCall(ddnn::ModelStoreRunCost_Private(bkey.c_str(), dt, (ddnn::ModelKindRowsLen + sfx).c_str(), d ? PETSC_TRUE : PETSC_FALSE, l));
    }
  }
  calflush = false;
  if (size > 1) PetscCall(CalibrateCollectives(comm, bkey.c_str(), dt));
  if (size > 1) { /* through the exchange engine's copies ("halo"), and with on-node pairs reading each other's storage ("halo-direct", -dd_exchange_direct) where every rank can */
    PetscBool direct;
    ddnn::ShmArenaForce(1);
    direct = ddnn::ShmArenaEnabled() ? PETSC_TRUE : PETSC_FALSE;
    ddnn::ShmArenaForce(-1); /* the option again before anything can return early */
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &direct, 1, MPIU_BOOL, MPI_LAND, comm));
    for (int mode = 0; mode < (direct ? 2 : 1); mode++) {
      std::vector<double> w[2], t[2];
      ddnn::ShmArenaForce(mode);
      PetscErrorCode ierr = PETSC_SUCCESS;
      for (PetscInt n : {4, 16, 32, 64}) {
        double wk[2], tm[2];
        if ((ierr = TimeHalo(comm, dt, n, wk, tm))) break;
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, comm));
        for (int d = 0; d < 2; d++) {
          w[d].push_back(wk[d]);
          t[d].push_back(tm[d]);
        }
      }
      /* repartitions ("repartition", "repartition-direct"): t = c0 + c1 bytes moved + c2 runs sent from + c3 runs
         received into + c4 runs copied within the rank + c5 bytes copied within the rank (short runs cost
         more on the sending side, where they are packed, than on the receiving one), over transposes
         whose runs are long (a batch or channel split), a row (a spatial split of plain tensors, the FFT
         stages' real transforms) or a few complex entries (the modes of the FFT stages' later
         transforms), most both ways, and the copy of a partition onto itself */
      struct RCase {
        PetscInt order, sh[5], a, b;
      };
      const RCase         rcases[] = {{4, {8, 16, 32, 32}, 3, 2}, {4, {2, 16, 32, 32}, 2, 3}, {4, {8, 24, 32, 32}, 2, 3}, {4, {4, 24, 32, 32}, 3, 2}, {5, {8, 24, 32, 8, 2}, 2, 3}, {5, {8, 24, 32, 8, 2}, 3, 2}, {5, {2, 24, 32, 8, 2}, 3, 2}, {5, {8, 16, 64, 16, 2}, 3, 2}, {5, {4, 16, 64, 16, 2}, 2, 3}, {4, {4, 16, 128, 128}, 3, 2}, {4, {2, 16, 128, 128}, 2, 3}, {4, {8, 16, 32, 32}, 0, 2}, {4, {8, 16, 64, 64}, 1, 3}, {4, {8, 16, 32, 32}, 2, 2}, {4, {1, 8, 16, 16}, 2, 3}};
      std::vector<std::vector<double>> rw[2];
      std::vector<double>              rt[2][2];
      for (const RCase &c : rcases) {
        double wk[2][5], tm[2][2];
        if (ierr) break;
        if (c.sh[c.a] < size || c.sh[c.b] < size) continue; /* no empty pieces */
        if ((ierr = TimeRepartition(comm, dt, c.order, c.sh, c.a, c.b, wk, tm))) break;
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, tm, 4, MPI_DOUBLE, MPI_MAX, comm));
        for (int d = 0; d < 2; d++) {
          PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, wk[d], 5, MPI_DOUBLE, MPI_MAX, comm));
          rw[d].push_back({wk[d][0], wk[d][1], wk[d][2], wk[d][3], wk[d][4]});
          for (int k = 0; k < 2; k++) rt[k][d].push_back(tm[k][d]);
          PetscCall(PetscInfo(NULL, "model: repartition %s %" PetscInt_FMT " -> %" PetscInt_FMT " %s: bytes %g runs sent from %g received into %g own %g, own bytes %g: %g s warm, %g s cold\n", d ? "adjoint" : "forward", c.a, c.b, mode ? "direct" : "engine", wk[d][0], wk[d][1], wk[d][2], wk[d][3], wk[d][4], tm[0][d], tm[1][d]));
        }
      }
      ddnn::ShmArenaForce(-1); /* the option again, also after an error */
      PetscCall(ierr);
      for (int d = 0; d < 2; d++) PetscCall(ddnn::ModelStoreKernel_Private(bkey.c_str(), dt, mode ? "halo-direct" : "halo", d ? PETSC_TRUE : PETSC_FALSE, w[d], t[d]));
      for (int k = 0; k < 2; k++)
        for (int d = 0; d < 2; d++) PetscCall(ddnn::ModelStoreGemmKernel_Private(bkey.c_str(), dt, (std::string(mode ? ddnn::ModelKindRepartitionDirect : ddnn::ModelKindRepartition) + (k ? ":cold" : "")).c_str(), d ? PETSC_TRUE : PETSC_FALSE, rw[d], rt[k][d]));
    }
  }
  for (int a = 0; a < 2; a++) {
    std::vector<double> w, t;
    for (PetscInt n : {256, 4096, 65536, 1048576}) {
      double wk, tm;
      PetscCall(TimeAux(a == 1, dt, n, &wk, &tm));
      PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &tm, 1, MPI_DOUBLE, MPI_MAX, comm));
      w.push_back(wk);
      t.push_back(tm);
    }
    PetscCall(ddnn::ModelStoreKernel_Private(bkey.c_str(), dt, a ? "tensoraxpy" : "tensorzero", PETSC_FALSE, w, t));
  }
  /* the optimizers' updates, warm and cold (DDNetGetModelUpdateTime()) */
  for (int cold = 0; cold < 2; cold++) {
    calflush = cold == 1;
    for (PetscInt streams : {3, 5, 7}) {
      std::vector<double> w, t;
      for (PetscInt n : {4096, 32768, 262144, 1048576}) {
        double wk, tm;
        PetscCall(TimeUpdate(streams, dt, n, &wk, &tm));
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &tm, 1, MPI_DOUBLE, MPI_MAX, comm));
        w.push_back(wk);
        t.push_back(tm);
      }
      PetscCall(ddnn::ModelStoreKernel_Private(bkey.c_str(), dt, (std::string(ddnn::ModelKindUpdate(streams)) + (cold ? ":cold" : "")).c_str(), PETSC_FALSE, w, t));
    }
  }
  calflush = false;
  calcomm = MPI_COMM_NULL;
  PetscCall(ddnn::ModelSave_Private(comm));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
