/*
  Issue 16, item 4: the analytic form of the performance model (DDModelPredictLayer(), for layers
  that are not set up) is the same model as the set-up one. Small U-Net-like chains, 2-D and 3-D,
  with unbalanced pieces and sample, spatial and hybrid partitions, are set up on every rank; on
  each rank and for each layer the analytic messages and bytes equal DDLayerGetModelComm(), the
  collectives DDLayerGetModelCollectives(), the memory DDLayerGetModelMemory(), the work and runs
  DDLayerGetModelWork() and DDLayerGetModelRuns() exactly, and the times DDLayerGetModelTime() to
  round-off, with a synthetic calibration (no timing). Bad descriptions are errors naming the fault.
  Run at 1, 2, 4 and 8 ranks.
*/
#include "ddtest.hpp"
#include <ddnn.h>
#include <ddmodel.h>
#include <fstream>
#include <unistd.h>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

using namespace ddtest;

static std::string Host()
{
  char h[256] = {0};
  if (gethostname(h, sizeof(h) - 1)) std::strcpy(h, "unknown");
  for (char *c = h; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  return h;
}

/* a cache (version 5) with known fits for every kind the chains use (backend bname, data type dt) and
   alpha-beta: conv with its five GEMM terms (the direct passes' flops: the chain's Winograd choice per
   pass, float64 /cpu/blas's for >= 16 channels), its backward without input gradient (conv-wgrad), cold
   fits of conv and activation (the others fall back to the warm ones), on P > 1 ranks fits measured
   on P ranks for conv and activation ("<backend>@P", preferred), and the broadcast and reduce of
   P ranks measured (the all-sums priced by Thakur et al.'s formula) */
static const double coldConvC0 = 1.0; /* seconds: a cold conv is unmistakable */
static std::string  SyntheticCache(const char *bname, const char *dt = "float64")
{
  std::string file = std::string("/tmp/ddnn_test16a_") + std::to_string(getppid()) + ".txt";
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) {
    std::ofstream     f(file);
    const std::string b = std::string(bname) + " " + dt + " ", bp = std::string(bname) + "@" + std::to_string(Size()) + " " + dt + " ";
    f << "ddnn-model-cache 16\nhost " << Host() << "\ncomm 2.5e-06 3e-10\n";
    const char *kinds[] = {"conv", "conv-pointwise", "batchnorm", "activation", "pool", "pool-avg", "pool-avg-blocked", "upsample", "concat", "concat-halo", "loss", "halo"};
    int         i       = 1;
    for (const char *k : kinds)
      for (const char *d : {"f", "b"}) {
        f << "kernel " << b << k << " " << d << " " << 1e-6 * i << " " << 3e-11 * i;
        if (!strncmp(k, "conv", 4)) f << " " << 1e-12 * i << " " << 2e-12 * i << " " << 5e-13 * i << " " << 2e-9 * i << " " << 1.5e-11 * i; /* + the column rows' and the direct passes' flops' terms */
        if (!strncmp(k, "pool", 4) || !strcmp(k, "upsample") || !strcmp(k, "concat-halo")) f << " " << 4e-9 * i << " 0 0 0"; /* the window kinds' (and a concatenation into a halo's) output rows */
        f << "\n";
        i++;
      }
    f << "kernel " << b << "conv-wgrad b 4e-06 7e-11\n";
    f << "kernel " << b << "conv:cold f " << coldConvC0 << " 1e-10 1e-12 1e-12 1e-12\nkernel " << b << "conv:cold b 2 2e-10 1e-12 1e-12 1e-12\n";
    f << "kernel " << b << "activation:cold f 0.5 1e-10\nkernel " << b << "activation:cold b 0.75 1e-10\n";
    if (Size() > 1) {
      f << "kernel " << bp << "conv f 9e-06 4e-11 3e-12 3e-12 7e-13 3e-9 2e-11\nkernel " << bp << "conv b 1.1e-05 5e-11 4e-12 4e-12 8e-13 4e-9 2.5e-11\n";
      f << "kernel " << bp << "activation f 8e-06 8e-11\nkernel " << bp << "activation b 9e-06 9e-11\n";
      f << "kernel " << bname << " " << dt << " bcast-g" << Size() << " f 3e-05 2e-09\nkernel " << bname << " " << dt << " bcast-g" << Size() << " b 4e-05 3e-09\n";
    }
    f << "runcost " << b << "activation-rows f 1.1e-08\nruncost " << b << "activation-rows b 1.3e-08\n";
    f << "runcost " << b << "activation-rows-len f 2e-10\nruncost " << b << "activation-rows-len b 3e-10\n"; /* the rows' length term: the entries per run as the set-up layer's */
    f << "runcost " << b << "activation f 5e-09\nruncost " << b << "activation b 7e-09\n";
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  return file;
}

static void DropCache(const std::string &file)
{
  DDT(DDModelReset());
  DDT(PetscOptionsClearValue(NULL, "-dd_model_cache"));
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) std::remove(file.c_str());
}

/* one layer of a chain: its description for the analytic model and the set-up layer */
struct Node {
  DDModelLayerSpec spec;
  DDLayer          layer = NULL;
  int              consumer = -1; /* the node whose halo grows this one's output */
};

/* plain: every entry compared; otherwise (oneDNN's blocked float32 storage) the storage-dependent
   ones (halo memory: storage and message buffers; the pointwise runs and so the times) are not */
static void ExpectSameModel(std::vector<Node> &net, const char *what, bool plain)
{
  const PetscMPIInt rank    = Rank();
  int               blocked = 0;
  for (size_t i = 0; i < net.size(); i++) {
    Node                  &n = net[i];
    DDModelLayerPrediction p;
    const char            *bname;
    DDTensor               y;
    DDTensorFormat         fmt;
    DDT(DDLayerGetBackend(n.layer, &bname));
    DDT(DDModelPredictLayer(&n.spec, n.consumer >= 0 ? &net[n.consumer].spec : NULL, bname, rank, &p));
    SCOPED_TRACE(std::string(what) + ", layer " + std::to_string(i) + " (" + n.spec.type + "), rank " + std::to_string(rank));
    DDT(DDLayerGetOutput(n.layer, &y));
    DDT(DDTensorGetFormat(y, &fmt));
    if (plain) EXPECT_EQ(fmt, DD_FORMAT_PLAIN); /* the analytic model's storage */
    if (fmt == DD_FORMAT_BLOCKED) blocked++;
    const PetscInt *ys;
    DDT(DDTensorGetShape(y, &ys));
    for (PetscInt k = 0; k < n.spec.order && n.spec.type != std::string(DDLAYERLOSS); k++) EXPECT_EQ(p.outshape[k], ys[k]);
    for (int b = 0; b < 2; b++) {
      PetscInt64 v[4];
      PetscReal  f, by;
      DDT(DDLayerGetModelComm(n.layer, b ? PETSC_TRUE : PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
      for (int k = 0; k < 4; k++) EXPECT_EQ(p.comm[b][k], v[k]) << "comm " << (b ? "backward" : "forward") << " entry " << k;
      DDT(DDLayerGetModelWork(n.layer, b ? PETSC_TRUE : PETSC_FALSE, &f, &by));
      EXPECT_EQ(p.flops[b], f);
      EXPECT_EQ(p.bytes[b], by);
    }
    PetscInt64 runs, calls, cbytes, mem[4];
    DDT(DDLayerGetModelRuns(n.layer, &runs));
    if (plain) EXPECT_EQ(p.runs, runs);
    DDT(DDLayerGetModelCollectives(n.layer, PETSC_FALSE, &calls, &cbytes));
    EXPECT_EQ(p.collcalls, calls);
    EXPECT_EQ(p.collbytes, cbytes);
    DDT(DDLayerGetModelMemory(n.layer, &mem[0], &mem[1], &mem[2], &mem[3]));
    for (int k = 0; k < 4; k++)
      if (plain || k != 1) EXPECT_EQ(p.memory[k], mem[k]) << "memory entry " << k;
    PetscReal t[4];
    PetscBool ok;
    DDT(DDLayerGetModelTime(n.layer, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_TRUE(ok);
    EXPECT_EQ(p.calibrated, ok);
    for (int k = 0; k < 4; k++)
      if (plain || k % 2) EXPECT_NEAR(p.time[k], t[k], 1e-12 * PetscMax(1e-6, PetscAbsReal(t[k]))) << "time entry " << k;
  }
  if (!plain) EXPECT_GT(blocked, 0) << what << ": no blocked storage to compare against"; /* the case this checks */
}

static const char *backend = NULL; /* of the chains' layers (NULL: the default) */

static DDLayer NewLayer(DDLayerType type)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, type));
  if (backend) DDT(DDLayerSetBackend(l, backend));
  return l;
}

static DDDataType dtype = DD_FLOAT64; /* of the chains */

static Node Conv(const PetscInt shape[], PetscInt order, const PetscInt parts[], PetscInt co, PetscInt k, PetscInt s, PetscInt p, PetscBool bias)
{
  Node           n;
  const PetscInt D = order - 2;
  PetscInt       kk[3] = {k, k, k}, ss[3] = {s, s, s}, pp[3] = {p, p, p};
  DDT(DDModelLayerSpecInitialize(&n.spec, DDLAYERCONV, dtype, order, shape, parts));
  n.spec.channels = co;
  n.spec.bias     = bias;
  for (PetscInt j = 0; j < D; j++) {
    n.spec.kernel[j]  = k;
    n.spec.stride[j]  = s;
    n.spec.padding[j] = p;
  }
  n.layer = NewLayer(DDLAYERCONV);
  DDT(DDLayerConvSetOutputChannels(n.layer, co));
  DDT(DDLayerConvSetKernel(n.layer, D, kk));
  DDT(DDLayerConvSetStride(n.layer, D, ss));
  DDT(DDLayerConvSetPadding(n.layer, D, pp));
  DDT(DDLayerConvSetBias(n.layer, bias));
  return n;
}

/* a node of the given type on input shape */
static Node Simple(DDLayerType type, const PetscInt shape[], PetscInt order, const PetscInt parts[])
{
  Node n;
  DDT(DDModelLayerSpecInitialize(&n.spec, type, dtype, order, shape, parts));
  n.layer = NewLayer(type);
  return n;
}

/* output shape of a set-up layer */
static std::vector<PetscInt> OutShape(DDLayer l)
{
  DDTensor        y;
  PetscInt        o;
  const PetscInt *ys;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetOrder(y, &o));
  DDT(DDTensorGetShape(y, &ys));
  std::vector<PetscInt> s(DD_MAX_DIM, 1);
  for (PetscInt k = 0; k < o; k++) s[k] = ys[k];
  return s;
}

/*
  conv(k3, p1, bias) - batchnorm - relu --(skip)----------------------------------+
                                       `- pool(2) - conv(k3, p1) - relu - up(x2, nearest or linear) - concat - conv(k3, s2, p1) - conv(k1) - loss
*/
static void UNetLike(PetscInt order, const PetscInt shape[], const PetscInt parts[], bool linear, const char *what, PetscInt wide = 1, bool plain = true)
{
  const PetscInt D = order - 2;
  DDPartition    part;
  DDTensor       x, target = NULL;
  std::vector<Node> net;

  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order, parts, PETSC_DECIDE, NULL, &part));
  DDT(DDTensorCreateFromPartition(part, dtype, order, shape, &x));
  /* 0 conv */
  net.push_back(Conv(shape, order, parts, 4 * wide, 3, 1, 1, PETSC_TRUE));
  DDT(DDLayerSetUp(net[0].layer, x));
  /* 1 batchnorm, 2 relu */
  for (DDLayerType t : {DDLAYERBATCHNORM, DDLAYERACTIVATION}) {
    std::vector<PetscInt> s = OutShape(net.back().layer);
    DDTensor              in;
    DDT(DDLayerGetOutput(net.back().layer, &in));
    net.push_back(Simple(t, s.data(), order, parts));
    if (t == DDLAYERACTIVATION) DDT(DDLayerActivationSetType(net.back().layer, DD_ACT_RELU));
    DDT(DDLayerSetUp(net.back().layer, in));
  }
  DDTensor skip;
  DDT(DDLayerGetOutput(net[2].layer, &skip));
  /* 3 pool */
  {
    std::vector<PetscInt> s = OutShape(net[2].layer);
    PetscInt              k2[3] = {2, 2, 2};
    net.push_back(Simple(DDLAYERPOOL, s.data(), order, parts));
    for (PetscInt j = 0; j < D; j++) net.back().spec.kernel[j] = net.back().spec.stride[j] = 2;
    net.back().spec.average = linear ? PETSC_TRUE : PETSC_FALSE; /* average pooling with the linear upsampling: its own fit ("pool-avg") */
    DDT(DDLayerPoolSetType(net.back().layer, linear ? DD_POOL_AVG : DD_POOL_MAX));
    DDT(DDLayerPoolSetKernel(net.back().layer, D, k2));
    DDT(DDLayerSetUp(net.back().layer, skip));
  }
  /* 4 conv (no bias), 5 relu */
  {
    std::vector<PetscInt> s = OutShape(net[3].layer);
    DDTensor              in;
    DDT(DDLayerGetOutput(net[3].layer, &in));
    net.push_back(Conv(s.data(), order, parts, 5 * wide, 3, 1, 1, PETSC_FALSE));
    DDT(DDLayerSetUp(net.back().layer, in));
    s = OutShape(net[4].layer);
    DDT(DDLayerGetOutput(net[4].layer, &in));
    net.push_back(Simple(DDLAYERACTIVATION, s.data(), order, parts));
    DDT(DDLayerSetUp(net.back().layer, in));
  }
  /* 6 upsample x2 */
  {
    std::vector<PetscInt> s = OutShape(net[5].layer);
    PetscInt              sc[3] = {2, 2, 2};
    DDTensor              in;
    DDT(DDLayerGetOutput(net[5].layer, &in));
    net.push_back(Simple(DDLAYERUPSAMPLE, s.data(), order, parts));
    for (PetscInt j = 0; j < D; j++) net.back().spec.stride[j] = 2;
    net.back().spec.linear = linear ? PETSC_TRUE : PETSC_FALSE;
    DDT(DDLayerUpsampleSetMode(net.back().layer, linear ? DD_UPSAMPLE_LINEAR : DD_UPSAMPLE_NEAREST));
    DDT(DDLayerUpsampleSetScale(net.back().layer, D, sc));
    DDT(DDLayerSetUp(net.back().layer, in));
  }
  /* 7 concat (upsampled, skip) */
  {
    std::vector<PetscInt> s = OutShape(net[6].layer);
    DDTensor              in[2];
    DDT(DDLayerGetOutput(net[6].layer, &in[0]));
    in[1] = skip;
    net.push_back(Simple(DDLAYERCONCAT, s.data(), order, parts));
    net.back().spec.channels = 4 * wide;
    DDT(DDLayerSetUpMulti(net.back().layer, 2, in));
  }
  /* 8 conv (k3, s2, p1), 9 conv (k1: "conv-pointwise" where its kernel's storage is plain), 10 loss */
  {
    std::vector<PetscInt> s = OutShape(net[7].layer);
    DDTensor              in[2];
    DDT(DDLayerGetOutput(net[7].layer, &in[0]));
    net.push_back(Conv(s.data(), order, parts, 2, 3, 2, 1, PETSC_TRUE));
    DDT(DDLayerSetUp(net.back().layer, in[0]));
    s = OutShape(net[8].layer);
    DDT(DDLayerGetOutput(net[8].layer, &in[0]));
    net.push_back(Conv(s.data(), order, parts, 2, 1, 1, 0, PETSC_TRUE));
    DDT(DDLayerSetUp(net.back().layer, in[0]));
    s = OutShape(net[9].layer);
    DDT(DDLayerGetOutput(net[9].layer, &in[0]));
    DDT(DDTensorDuplicate(in[0], &target));
    in[1] = target;
    net.push_back(Simple(DDLAYERLOSS, s.data(), order, parts));
    DDT(DDLayerLossSetType(net.back().layer, DD_LOSS_MSE));
    DDT(DDLayerLossSetReduction(net.back().layer, DD_REDUCTION_MEAN));
    DDT(DDLayerSetUpMulti(net.back().layer, 2, in));
  }
  /* whose halo grows each output */
  net[0].consumer = -1; /* batchnorm: no halo */
  net[2].consumer = 3;  /* relu -> pool (and concat, which needs none) */
  net[3].consumer = 4;  /* pool -> conv */
  net[5].consumer = 6;  /* relu -> upsample */
  net[7].consumer = 8;  /* concat -> conv */
  ExpectSameModel(net, what, plain);
  for (auto &n : net) DDT(DDLayerDestroy(&n.layer));
  DDT(DDTensorDestroy(&target));
  DDT(DDTensorDestroy(&x));
  DDT(DDPartitionDestroy(&part));
}

/* the partition shapes of P ranks: sample, spatial (one and two dimensions), hybrid */
static std::vector<std::vector<PetscInt>> Partitions(PetscInt order, PetscMPIInt P)
{
  std::vector<std::vector<PetscInt>> v;
  std::vector<PetscInt>              a(order, 1);
  a[0] = P;
  v.push_back(a); /* sample */
  if (P == 1) return v;
  a.assign(order, 1);
  a[2] = P;
  if (P <= 4) v.push_back(a); /* spatial along the slowest spatial dimension */
  a.assign(order, 1);
  a[order - 1] = P >= 4 ? 2 : P;
  a[2]         = P / a[order - 1];
  v.push_back(a); /* spatial along two */
  if (P >= 4) {
    a.assign(order, 1);
    a[0]         = 2;
    a[order - 1] = P / 4 > 1 ? 2 : 1;
    a[2]         = P / (2 * a[order - 1]);
    v.push_back(a); /* hybrid: sample x spatial (paper 003 sec. VI) */
  }
  return v;
}

static std::string Name(const std::vector<PetscInt> &p)
{
  std::string s;
  for (size_t k = 0; k < p.size(); k++) s += (k ? "x" : "") + std::to_string(p[k]);
  return s;
}

TEST(ModelAnalytic, UNet2DEqualsSetUpModel)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string    file     = SyntheticCache(bname);
  const PetscInt shape[4] = {8, 3, 14, 10}; /* 14 over 4: 4,4,3,3; pooled 7: 2,2,2,1 (halos past the balanced pieces) */
  for (auto &p : Partitions(4, Size())) UNetLike(4, shape, p.data(), true, ("2-D linear, parts " + Name(p)).c_str());
  for (auto &p : Partitions(4, Size())) UNetLike(4, shape, p.data(), false, ("2-D nearest, parts " + Name(p)).c_str());
  DropCache(file);
}

/* float32: 4-byte entries (the exchange engine's buffers are sized for doubles all the same), on the
   reference loops, whose storage is plain on every CPU (oneDNN's float32 formats follow the ISA) */
TEST(ModelAnalytic, UNet2DFloat32EqualsSetUpModel)
{
  std::string    file     = SyntheticCache("/cpu/ref", "float32");
  const PetscInt shape[4] = {8, 3, 14, 10};
  dtype                   = DD_FLOAT32;
  backend                 = "/cpu/ref";
  for (auto &p : Partitions(4, Size())) UNetLike(4, shape, p.data(), true, ("2-D linear float32, parts " + Name(p)).c_str());
  backend = NULL;
  dtype   = DD_FLOAT64;
  DropCache(file);
}

/* oneDNN's blocked float32 storage (16 and more channels): the same messages, bytes, collectives, work and memory but the halo's */
TEST(ModelAnalytic, UNet2DFloat32BlockedCountsEqualSetUpModel)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  if (std::string(bname) != "/cpu/dnnl") GTEST_SKIP() << "the default backend " << bname << " stores no float32 tensor blocked";
  std::string    file     = SyntheticCache(bname, "float32");
  const PetscInt shape[4] = {8, 3, 14, 10};
  dtype                   = DD_FLOAT32;
  for (auto &p : Partitions(4, Size())) UNetLike(4, shape, p.data(), true, ("2-D linear float32 wide, parts " + Name(p)).c_str(), 8, false);
  dtype = DD_FLOAT64;
  DropCache(file);
}

TEST(ModelAnalytic, UNet3DEqualsSetUpModel)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string    file     = SyntheticCache(bname);
  const PetscInt shape[5] = {8, 2, 10, 6, 6};
  for (auto &p : Partitions(5, Size())) UNetLike(5, shape, p.data(), true, ("3-D linear, parts " + Name(p)).c_str());
  DropCache(file);
}

/* a layer whose memory M on a rank exceeds the core's L2 cache is priced with the share 1 - L2 / M
   of the cold fits and the rest of the warm ones, as LayerCold() decides it for the set-up layer
   (8 MiB of output per rank); one without input gradient
   (a network's first layer) with the weight gradient's own fit (conv-wgrad, no cold one: the warm) */
TEST(ModelAnalytic, ColdLayerAndFirstLayer)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string       file     = SyntheticCache(bname);
  const PetscInt    shape[4] = {4 * Size(), 16, 128, 128}, parts[4] = {Size(), 1, 1, 1};
  DDPartition       part;
  DDTensor          x;
  std::vector<Node> net;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, parts, PETSC_DECIDE, NULL, &part));
  DDT(DDTensorCreateFromPartition(part, dtype, 4, shape, &x));
  net.push_back(Conv(shape, 4, parts, 16, 3, 1, 1, PETSC_TRUE));
  DDT(DDLayerSetUp(net[0].layer, x));
  ExpectSameModel(net, "cold conv", true);
  PetscInt64 mem[4];
  DDT(DDLayerGetModelMemory(net[0].layer, &mem[0], &mem[1], &mem[2], &mem[3]));
  long   l2   = sysconf(_SC_LEVEL2_CACHE_SIZE);
  double L2   = l2 > 0 ? (double)l2 : 1048576.0;
  double M    = (double)(mem[0] + mem[1] + mem[2] + mem[3]), share = M > L2 ? 1 - L2 / M : 0;
  DDModelLayerPrediction p;
  DDT(DDModelPredictLayer(&net[0].spec, NULL, bname, Rank(), &p));
  /* the cold fit's c0 (1 s) dominates: the time is share x 1 s plus the small rest (warm: c0 1 us, 3e-11 s per flop; cold: 1e-10 s per flop) */
  const double rest = 1e-6 + 1e-10 * p.flops[0] + 1e-12 * (p.memory[0] + p.memory[1]) * 4;
  EXPECT_GE(p.time[0], share * coldConvC0) << "memory " << M << " bytes, L2 " << L2;
  EXPECT_LE(p.time[0], share * coldConvC0 + rest) << "memory " << M << " bytes, L2 " << L2;
  if (L2 < 8.0 * 1048576) EXPECT_GT(share, 0.5);
  net[0].spec.noinputgradient = PETSC_TRUE;
  DDT(DDModelPredictLayer(&net[0].spec, NULL, bname, Rank(), &p));
  EXPECT_TRUE(p.calibrated);
  EXPECT_NEAR(p.time[2], 4e-06 + 7e-11 * p.flops[1], 1e-12 * p.time[2]);
  EXPECT_EQ(p.comm[1][0] + p.comm[1][2], 0);
  EXPECT_NEAR(p.time[3], p.tcoll[1], 1e-18);
  for (auto &n : net) DDT(DDLayerDestroy(&n.layer));
  DDT(DDTensorDestroy(&x));
  DDT(DDPartitionDestroy(&part));
  DropCache(file);
}

/* spec->replicated (a network in the replicated weight mode): a convolution makes no collective, a
   batch normalization keeps its statistics' two all-reductions; the compute and the halo are
   unchanged, and the communication time loses exactly the weights' collectives */
TEST(ModelAnalytic, ReplicatedWeightsDropOnlyTheWeightCollectives)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string    file     = SyntheticCache(bname);
  const PetscInt shape[4] = {2 * Size(), 8, 6 * Size(), 6}; /* no empty pieces on any partition of Partitions() */
  for (auto &parts : Partitions(4, Size())) {
    for (DDLayerType t : {DDLAYERCONV, DDLAYERBATCHNORM}) {
      Node n = t == std::string(DDLAYERCONV) ? Conv(shape, 4, parts.data(), 4, 3, 1, 1, PETSC_TRUE) : Simple(t, shape, 4, parts.data());
      DDModelLayerPrediction b, r;
      DDT(DDModelPredictLayer(&n.spec, NULL, bname, Rank(), &b));
      n.spec.replicated = PETSC_TRUE;
      DDT(DDModelPredictLayer(&n.spec, NULL, bname, Rank(), &r));
      const bool     conv = t == std::string(DDLAYERCONV);
      const PetscInt64 w  = Size() > 1 ? (conv ? 2 : 1) : 0; /* weight and bias; the normalization's one broadcast */
      EXPECT_EQ(r.collcalls, b.collcalls - w) << t << " parts " << Name(parts);
      if (conv) EXPECT_EQ(r.collcalls, 0);
      for (int k = 0; k < 2; k++) {
        EXPECT_EQ(r.time[2 * k], b.time[2 * k]) << t << ": compute unchanged";
        EXPECT_NEAR(b.time[2 * k + 1] - r.time[2 * k + 1], b.tcoll[k] - r.tcoll[k], 1e-15) << t << ": only collectives dropped";
        if (w) EXPECT_GT(b.tcoll[k], r.tcoll[k]) << t;
        for (int j = 0; j < 4; j++) EXPECT_EQ(r.comm[k][j], b.comm[k][j]) << t << ": the halo unchanged";
      }
      if (n.layer) DDT(DDLayerDestroy(&n.layer));
    }
  }
  /* the network's bucketed collectives: a group of one rank has no collective, only copies */
  PetscReal f1, b1, fP, bP;
  DDT(DDModelPredictReplicatedWeights(NULL, dtype, 1, 1000, &f1, &b1, NULL));
  DDT(DDModelPredictReplicatedWeights(NULL, dtype, 4, 1000, &fP, &bP, NULL));
  EXPECT_GT(fP, f1);
  EXPECT_GT(bP, b1);
  /* the data-parallel mode's: no broadcast forward (only the flag), the workers' update backward */
  PetscReal df1, db1, dfP, dbP;
  DDT(DDModelPredictDataParallelWeights(NULL, dtype, 1, 1000, &df1, &db1, NULL));
  DDT(DDModelPredictDataParallelWeights(NULL, dtype, 4, 1000, &dfP, &dbP, NULL));
  EXPECT_EQ(df1, 0);
  EXPECT_GT(dfP, 0);
  EXPECT_LT(dfP, fP) << "a flag all-reduce against a flag, a broadcast and the copies";
  EXPECT_GT(dbP, bP) << "the replicated backward plus a flag and the workers' update";
  EXPECT_GT(dbP, db1);
  DD_EXPECT_ERROR(DDModelPredictDataParallelWeights(NULL, dtype, 0, 1000, &f1, &b1, NULL), PETSC_ERR_ARG_OUTOFRANGE, "ranks 0");
  DD_EXPECT_ERROR(DDModelPredictReplicatedWeights(NULL, dtype, 0, 1000, &f1, &b1, NULL), PETSC_ERR_ARG_OUTOFRANGE, "ranks 0");
  DD_EXPECT_ERROR(DDModelPredictReplicatedWeights(NULL, dtype, 2, -1, &f1, &b1, NULL), PETSC_ERR_ARG_OUTOFRANGE, "entries -1");
  DropCache(file);
}

/* the halo of a spatial split priced by hand: 2 x 2 workers of a 1 x 1 x 8 x 8 plane, 3 x 3 kernel, padding 1 */
TEST(ModelAnalytic, HaloClosedForm)
{
  DDModelLayerSpec       s;
  DDModelLayerPrediction p;
  const PetscInt         shape[4] = {1, 1, 8, 8}, parts[4] = {1, 1, 2, 2};
  const std::string      none = std::string("/tmp/ddnn_test16a_none_") + std::to_string(getppid()) + ".txt";
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", none.c_str())); /* no file: no kernel fits, alpha-beta as set */
  DDT(DDModelReset());
  DDT(DDModelSetCommParameters(1e-6, 1e-9));
  DDT(DDModelLayerSpecInitialize(&s, DDLAYERCONV, DD_FLOAT32, 4, shape, parts));
  s.channels  = 1;
  s.kernel[0] = s.kernel[1] = 3;
  s.padding[0] = s.padding[1] = 1;
  for (PetscInt r = 0; r < 4; r++) {
    DDT(DDModelPredictLayer(&s, NULL, NULL, r, &p));
    /* two faces of 4 entries and one corner: 3 messages, 9 entries of 4 bytes, each way */
    EXPECT_EQ(p.comm[0][0], 3);
    EXPECT_EQ(p.comm[0][1], 36);
    EXPECT_EQ(p.comm[0][2], 3);
    EXPECT_EQ(p.comm[0][3], 36);
    EXPECT_EQ(p.comm[1][0], 3);
    EXPECT_EQ(p.collcalls, 1); /* the weights' broadcast */
    EXPECT_EQ(p.collbytes, 4 * 9);
    EXPECT_EQ(p.memory[2], r == 0 ? 2 * 4 * 9 : 0);
    /* alpha-beta of the exchange (max of sent, received) and a binomial broadcast over 4 ranks */
    EXPECT_NEAR(p.tcoll[0], 2 * (1e-6 + 1e-9 * 36), 1e-18);
    EXPECT_NEAR(p.time[1], 3e-6 + 36e-9 + p.tcoll[0], 1e-18);
    EXPECT_NEAR(p.time[3], p.time[1], 1e-18);
    EXPECT_EQ(p.time[0], 0); /* no kernel fit */
    EXPECT_FALSE(p.calibrated);
  }
  s.noinputgradient = PETSC_TRUE;
  DDT(DDModelPredictLayerMax(&s, NULL, NULL, &p));
  EXPECT_EQ(p.comm[0][0], 3);
  EXPECT_EQ(p.comm[1][0], 0);
  EXPECT_EQ(p.memory[2], 2 * 4 * 9);
  EXPECT_NEAR(p.time[3], p.tcoll[1], 1e-18); /* no input gradient: the weights' reduction only */
  DDT(DDModelReset());
  DDT(PetscOptionsClearValue(NULL, "-dd_model_cache"));
}

TEST(ModelAnalytic, BadDescriptions)
{
  DDModelLayerSpec       s, c;
  DDModelLayerPrediction p;
  const PetscInt         shape[4] = {2, 4, 8, 8}, parts[4] = {1, 1, 2, 2}, cparts[4] = {1, 2, 1, 1};
  DDT(DDModelLayerSpecInitialize(&s, DDLAYERCONV, DD_FLOAT64, 4, shape, parts));
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 0, &p), PETSC_ERR_ARG_OUTOFRANGE, "output channels");
  s.channels = 3;
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 4, &p), PETSC_ERR_ARG_OUTOFRANGE, "rank 4");
  s.kernel[0] = 11;
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 0, &p), PETSC_ERR_ARG_SIZ, "larger than the padded input");
  s.kernel[0] = 3;
  DDT(DDModelLayerSpecInitialize(&c, DDLAYERACTIVATION, DD_FLOAT64, 4, shape, parts));
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, &c, NULL, 0, &p), PETSC_ERR_ARG_INCOMP, "consumer");
  DDT(DDModelLayerSpecInitialize(&s, DDLAYERBATCHNORM, DD_FLOAT64, 4, shape, cparts));
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 0, &p), PETSC_ERR_SUP, "splits the channels");
  DDT(DDModelLayerSpecInitialize(&s, DDLAYERAFFINE, DD_FLOAT64, 4, shape, parts));
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 0, &p), PETSC_ERR_SUP, "no form for layer type affine");
  DDT(DDModelLayerSpecInitialize(&s, DDLAYERUPSAMPLE, DD_FLOAT64, 4, shape, parts));
  s.stride[0] = 3;
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 0, &p), PETSC_ERR_SUP, "upsampling by 1 or 2");
  const PetscInt big[4] = {1, 1, 8, 9};
  DDT(DDModelLayerSpecInitialize(&s, DDLAYERPOOL, DD_FLOAT64, 4, shape, big));
  DD_EXPECT_ERROR(DDModelPredictLayer(&s, NULL, NULL, 0, &p), PETSC_ERR_ARG_OUTOFRANGE, "parts[3] = 9");
}
