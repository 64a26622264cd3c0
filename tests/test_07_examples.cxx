/*
  The example networks of share/ddnn (paper 000 sec. 5: LeNet-5, a VGG-style net, the general
  ResNet of sec. 5.2, a 3-D U-Net of sec. 5.3), read from their options files into per-test
  prefixes:
   (a) each builds, has the parameter count computed here by hand, and leaves no option unused;
   (b) training a few steps in float64 on all ranks (batch, spatial and mixed partitions) gives
       the parameters, losses and batch-normalization statistics of training on rank 0 alone;
   (c) the ResNet built in code with DDNetAddLayer() and from the YAML variant equals the one
       built from resnet.opts;
  (d) a run interrupted by a checkpoint and restarted on the same partition and on one rank
      continues exactly as the uninterrupted run, in training and in evaluation mode (the
      checkpoint holds the batch-norm running statistics and the dropout counter);
  and bad network files: an unknown layer type, a layer fed by a name that does not exist, a
  residual add of mismatched shapes, a misspelled option.
*/
#include "layertest.hpp"
#include <fstream>
#include <set>
#include <algorithm>
#include <unistd.h>
#include <cstdarg>
#include <cstdio>

using namespace ddtest;

#ifndef DDNN_SHARE_DIR
  #error "DDNN_SHARE_DIR (the source tree's share/ddnn) must be defined"
#endif

static std::string ShareFile(const char *name)
{
  return std::string(DDNN_SHARE_DIR) + "/" + name;
}

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test07_") + std::to_string(getppid()) + "_" + name;
}

/* the options of a file, each under the given prefix (inserted once per prefix) */
static void InsertFile(const std::string &prefix, const std::string &file, bool yaml = false)
{
  static std::set<std::string> done;
  if (done.count(prefix)) return;
  done.insert(prefix);
  DDT(PetscOptionsPrefixPush(NULL, prefix.c_str()));
  if (yaml) DDT(PetscOptionsInsertFileYAML(PETSC_COMM_WORLD, NULL, file.c_str(), PETSC_TRUE));
  else DDT(PetscOptionsInsertFile(PETSC_COMM_WORLD, NULL, file.c_str(), PETSC_TRUE));
  DDT(PetscOptionsPrefixPop(NULL));
}

/* writes a small options file (rank 0) that every rank then reads */
static void WriteFile(const std::string &file, const std::string &text)
{
  if (Rank() == 0) {
    std::ofstream f(file);
    f << text;
  }
  MPI_Barrier(PETSC_COMM_WORLD);
}

/* the data section of an example's file (the options of tutorials/ex6_example_nets.c) */
struct Data {
  std::string           kind;
  std::vector<PetscInt> sample; /* C, spatial... */
  PetscInt              classes = 0, batch = 0;
  PetscBool             labelsonroot = PETSC_FALSE; /* the classifier's features are gathered onto rank 0 (a repartition layer) */
};

static Data ReadData(const std::string &prefix)
{
  Data      d;
  char      s[64];
  PetscInt  sh[4], n = 4;
  PetscReal r;
  PetscBool flg;
  DDT(PetscOptionsGetString(NULL, prefix.c_str(), "-data_kind", s, sizeof(s), &flg));
  EXPECT_TRUE(flg);
  d.kind = s;
  DDT(PetscOptionsGetIntArray(NULL, prefix.c_str(), "-data_shape", sh, &n, &flg));
  EXPECT_TRUE(flg);
  d.sample.assign(sh, sh + n);
  DDT(PetscOptionsGetInt(NULL, prefix.c_str(), "-data_classes", &d.classes, &flg));
  EXPECT_TRUE(flg);
  DDT(PetscOptionsGetInt(NULL, prefix.c_str(), "-data_batch", &d.batch, &flg));
  EXPECT_TRUE(flg);
  /* read (so that a misspelling shows as unused) but not needed here */
  DDT(PetscOptionsGetReal(NULL, prefix.c_str(), "-data_noise", &r, NULL));
  DDT(PetscOptionsGetReal(NULL, prefix.c_str(), "-data_phase", &r, NULL));
  DDT(PetscOptionsGetString(NULL, prefix.c_str(), "-data_split", s, sizeof(s), NULL));
  DDT(PetscOptionsGetBool(NULL, prefix.c_str(), "-data_labels_on_root", &d.labelsonroot, NULL));
  return d;
}

/* the examples */
enum Net { LENET, VGG, RESNET, UNET };
struct Example {
  const char *file, *prefix;
};
static const Example examples[] = {
  {"lenet5.opts", "t7lenet_"},
  {"vgg.opts", "t7vgg_"},
  {"resnet.opts", "t7resnet_"},
  {"unet3d.opts", "t7unet_"},
};

/* parameter counts by hand: conv (Co Ci k^D + bias), batchnorm 2C, affine (Fo Fi + Fo) */
static PetscInt64 Conv(PetscInt64 ci, PetscInt64 co, PetscInt64 kk, bool bias = true)
{
  return co * ci * kk + (bias ? co : 0);
}
static PetscInt64 Dense(PetscInt64 fi, PetscInt64 fo)
{
  return fo * fi + fo;
}
static PetscInt64 ExpectedParameters(Net n)
{
  switch (n) {
  case LENET:
    return Conv(1, 6, 25) + Conv(6, 16, 25) + Dense(16 * 5 * 5, 120) + Dense(120, 84) + Dense(84, 10); /* 61,706 as in LeCun 1998 */
  case VGG:
    return Conv(3, 8, 9) + Conv(8, 8, 9) + Conv(8, 16, 9) + Conv(16, 16, 9) + Conv(16, 32, 9) + Conv(32, 32, 9) + Dense(32 * 2 * 2, 64) + Dense(64, 10);
  case RESNET: /* stem, 3 blocks of 2 (conv without bias + batchnorm), classifier */
    return Conv(1, 10, 9, false) + 2 * 10 + 3 * 2 * (Conv(10, 10, 9, false) + 2 * 10) + Dense(10, 4);
  case UNET:
    return Conv(1, 4, 27, false) + 8 + Conv(4, 8, 27, false) + 16 + Conv(8, 16, 27, false) + 32 /* down, bottom */
         + (16 * 8 * 8 + 8) /* convtranspose 16 -> 8, 2x2x2, bias */ + Conv(16, 8, 27, false) + 16 + Conv(8, 4, 1) /* 1x1x1 after the upsampling */
         + Conv(8, 4, 27, false) + 8 + Conv(4, 2, 1);
  }
  return -1;
}

/*
  The input (N, C, spatial...) on partition pshape (ranks 0, 1, ...) and the labels where the
  logits will be: (N) on the first worker of each batch slice (or on rank 0 for a network that
  gathers its features), or (N, spatial...) on the input's partition for a segmentation.
*/
static void MakeTensors(const Data &d, PetscInt N, const std::vector<PetscInt> &pshape, bool serial, DDTensor *x, DDTensor *label)
{
  InputSpec xs, ls;
  xs.shape = {N};
  xs.shape.insert(xs.shape.end(), d.sample.begin(), d.sample.end());
  xs.pshape = pshape;
  if (d.kind == "patterns") {
    ls.shape = {N};
    if (d.labelsonroot) ls.pshape = {1};
    else {
      PetscInt P = 1;
      for (auto p : pshape) P *= p;
      ls.pshape = {pshape[0]};
      for (PetscInt i = 0; i < pshape[0]; i++) ls.ranks.push_back((PetscMPIInt)(i * (P / pshape[0])));
    }
  } else {
    ls.shape  = {N};
    ls.pshape = {pshape[0]};
    for (size_t k = 2; k < xs.shape.size(); k++) {
      ls.shape.push_back(xs.shape[k]);
      ls.pshape.push_back(pshape[k]);
    }
  }
  if (serial) {
    xs = Serial(xs);
    ls = Serial(ls);
  }
  *x     = MakeInput(xs, DD_FLOAT64, 1);
  *label = MakeInput(ls, DD_FLOAT64, 2);
}

/* data of step s: x uniform in [-1, 1), labels uniform classes; the same on any partition */
static void SetData(const Data &d, PetscInt s, DDTensor x, DDTensor label)
{
  PetscInt M;
  DDT(DDTensorSetRandomGlobal(x, 100 + s, -1, 1));
  DDT(DDTensorGetSize(label, &M));
  std::vector<double> g(M);
  for (PetscInt i = 0; i < M; i++) g[i] = (double)((i * 7 + s * 3 + (i * i) % 5) % d.classes);
  DDT(DDTensorSetValuesGlobal(label, g.data()));
}

static DDNet NetFromOptions(const std::string &prefix)
{
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, prefix.c_str()));
  DDT(DDNetSetFromOptions(net));
  return net;
}

static DDOptimizer OptimizerFor(DDNet net, const std::string &prefix)
{
  DDOptimizer opt;
  PetscInt    n;
  DDTensor   *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetOptionsPrefix(opt, prefix.c_str()));
  DDT(DDOptimizerSetFromOptions(opt));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  return opt;
}

static std::vector<std::vector<double>> Params(DDNet net)
{
  PetscInt                         n;
  DDTensor                        *ps;
  std::vector<std::vector<double>> r;
  DDT(DDNetGetParameters(net, &n, &ps, NULL));
  for (PetscInt i = 0; i < n; i++) r.push_back(GatherAll(ps[i]));
  return r;
}

/* the running statistics of every batchnorm layer */
static std::vector<std::vector<double>> RunningStats(DDNet net)
{
  PetscInt                         nl;
  std::vector<std::vector<double>> r;
  DDT(DDNetGetNumLayers(net, &nl));
  for (PetscInt i = 0; i < nl; i++) {
    DDLayer     l;
    DDLayerType type;
    DDT(DDNetGetLayerByIndex(net, i, &l, NULL));
    DDT(DDLayerGetType(l, &type));
    if (std::string(type) != DDLAYERBATCHNORM) continue;
    DDTensor m, v;
    DDT(DDLayerBatchNormGetRunningStatistics(l, &m, &v));
    r.push_back(GatherAll(m));
    r.push_back(GatherAll(v));
  }
  return r;
}

struct TrainRun {
  std::vector<double>              losses;
  std::vector<std::vector<double>> params, stats;
};

/* `steps` training steps of the network of example e (options and optimizer from its file) in float64 */
static TrainRun Train(const Example &e, const Data &d, PetscInt N, const std::vector<PetscInt> &pshape, bool serial, int steps, DDNet net = NULL)
{
  TrainRun R;
  DDTensor x, label;
  MakeTensors(d, N, pshape, serial, &x, &label);
  DDTensor in[2] = {x, label};
  if (!net) net = NetFromOptions(e.prefix);
  else DDT(PetscObjectReference((PetscObject)net));
  DDT(DDNetSetUp(net, 2, in));
  DDOptimizer opt = OptimizerFor(net, e.prefix);
  for (int s = 0; s < steps; s++) {
    PetscReal l;
    SetData(d, s, x, label);
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, &l));
    R.losses.push_back(l);
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
  }
  R.params = Params(net);
  R.stats  = RunningStats(net);
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&label));
  return R;
}

static void ExpectSame(const TrainRun &p, const TrainRun &s, double tol, const std::string &what)
{
  ASSERT_EQ(p.losses.size(), s.losses.size());
  for (size_t i = 0; i < p.losses.size(); i++) EXPECT_NEAR(p.losses[i], s.losses[i], tol * std::fabs(s.losses[i])) << what << ": loss of step " << i;
  ASSERT_EQ(p.params.size(), s.params.size()) << what;
  for (size_t i = 0; i < p.params.size(); i++) EXPECT_LT(RelDiff(p.params[i], s.params[i]), tol) << what << ": parameter " << i;
  ASSERT_EQ(p.stats.size(), s.stats.size()) << what;
  for (size_t i = 0; i < p.stats.size(); i++) EXPECT_LT(RelDiff(p.stats[i], s.stats[i]), tol) << what << ": batchnorm running statistic " << i;
}

/* the most even factorization of n into k factors, largest first (as MPI_Dims_create) */
static std::vector<PetscInt> Even(int n, int k)
{
  std::vector<std::vector<PetscInt>> f;
  Factorizations(n, k, f);
  std::vector<PetscInt> best;
  PetscInt              bm = -1;
  for (auto &c : f) {
    PetscInt mx = *std::max_element(c.begin(), c.end());
    if (bm < 0 || mx < bm || (mx == bm && c > best)) {
      bm   = mx;
      best = c;
    }
  }
  std::sort(best.rbegin(), best.rend());
  return best;
}

/* partitions of the input on all W ranks: the batch (or batch x spatial), and the spatial dimensions */
static std::vector<std::vector<PetscInt>> Partitions(const Data &d, int W)
{
  const int                          ns = (int)d.sample.size() - 1;
  std::vector<std::vector<PetscInt>> r;
  std::vector<PetscInt>              p(ns + 2, 1), sp;
  /* the batch (LeNet, VGG), or batch x spatial for the networks whose point is the spatial split */
  if (d.kind == "patterns" && !d.labelsonroot) p[0] = W;
  else {
    p[0] = W % 2 == 0 ? 2 : 1;
    sp   = Even(W / (int)p[0], ns);
    for (int k = 0; k < ns; k++) p[k + 2] = sp[k];
  }
  r.push_back(p);
  /* spatial only, on all workers: at 8 ranks LeNet's and VGG's small maps (5 x 5, 2 x 2) leave
     workers with no rows, whose windows reach past their neighbors */
  std::fill(p.begin(), p.end(), 1);
  sp = Even(W, ns);
  for (int k = 0; k < ns; k++) p[k + 2] = sp[k];
  if (p == r[0]) std::reverse(r[0].begin() + 2, r[0].end()); /* e.g. 3 ranks: split W first, then D or H */
  if (p != r[0]) r.push_back(p);
  return r;
}

static std::string Str(const std::vector<PetscInt> &v)
{
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

/* ---------------------------------------------------------------------- */

/* (a) every file builds the network it documents, and every option in it is used */
TEST(Examples, FilesBuildWithHandCountedParameters)
{
  const PetscInt layers[] = {13, 21, 30, 24};
  for (int n = LENET; n <= UNET; n++) {
    const Example &e = examples[n];
    InsertFile(e.prefix, ShareFile(e.file));
    Data d = ReadData(e.prefix);
    DDNet net = NetFromOptions(e.prefix);
    PetscInt nl;
    DDT(DDNetGetNumLayers(net, &nl));
    EXPECT_EQ(nl, layers[n]) << e.file;
    DDTensor x, label;
    MakeTensors(d, 2, std::vector<PetscInt>(d.sample.size() + 1, 1), true, &x, &label);
    DDTensor in[2] = {x, label};
    DDT(DDNetSetUp(net, 2, in));
    PetscInt64 np;
    DDT(DDNetGetNumParameters(net, &np));
    EXPECT_EQ(np, ExpectedParameters((Net)n)) << e.file;
    DDOptimizer opt = OptimizerFor(net, e.prefix);
    /* a forward pass gives a finite loss near log(classes) */
    SetData(d, 0, x, label);
    DDT(DDNetForward(net, 2, in));
    PetscReal l;
    DDT(DDNetGetLoss(net, &l));
    EXPECT_TRUE(std::isfinite(l) && l > 0 && l < 3 * std::log((double)d.classes)) << e.file << ": loss " << l;
    /* the file holds no misspelled or unused option */
    PetscErrorCode err = Catch([&]() { return DDOptionsCheckUnused(PETSC_COMM_WORLD, e.prefix); });
    EXPECT_EQ(err, 0) << e.file << " has options no object read";
    DDT(DDOptimizerDestroy(&opt));
    DDT(DDNetDestroy(&net));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&label));
  }
}

/* (b) training on all ranks equals training on rank 0 alone, for every example and two partitions */
static void PRanksEqualsOneRank(Net n, PetscInt N, int steps)
{
  const Example &e = examples[n];
  InsertFile(e.prefix, ShareFile(e.file));
  Data d   = ReadData(e.prefix);
  auto one = std::vector<PetscInt>(d.sample.size() + 1, 1);
  TrainRun ser = Train(e, d, N, one, true, steps);
  /* the loss must change: the optimizer moved the parameters */
  EXPECT_NE(ser.losses.front(), ser.losses.back()) << e.file;
  /* 1e-9: a worker's convolution kernel depends on its piece's shape (im2col + GEMM, Winograd F(2x2, 3x3)
     or, from 12 x 12 outputs, F(4x4, 3x3), whose float64 rounding is some 10 ulps of the terms' sum), and
     Adam's steps g / sqrt(v) carry the relative rounding of small gradients into the parameters: 3 steps of
     VGG reach 1.0e-10 at 3 ranks (4.7e-14 with -dd_conv_winograd 0) */
  for (auto &p : Partitions(d, Size())) {
    TrainRun par = Train(e, d, N, p, false, steps);
    ExpectSame(par, ser, 1e-9, std::string(e.file) + " on partition " + Str(p));
  }
}

TEST(Examples, LeNet5TrainingOnPRanksEqualsOneRank)
{
  PRanksEqualsOneRank(LENET, 8, 3);
}

TEST(Examples, VGGTrainingOnPRanksEqualsOneRank)
{
  PRanksEqualsOneRank(VGG, 8, 3);
}

TEST(Examples, ResNetTrainingOnPRanksEqualsOneRank)
{
  PRanksEqualsOneRank(RESNET, 4, 3);
}

TEST(Examples, UNet3DTrainingOnPRanksEqualsOneRank)
{
  PRanksEqualsOneRank(UNET, 2, 3);
}

/* (d) restart from a checkpoint: `steps` training steps from step `first`, each followed by an
   evaluation Forward; the losses (train, eval, train, eval, ...) */
static std::vector<double> TrainAndEvaluate(const Data &d, DDNet net, DDOptimizer opt, DDTensor x, DDTensor label, int first, int steps)
{
  std::vector<double> r;
  DDTensor            in[2] = {x, label};
  for (int s = first; s < first + steps; s++) {
    PetscReal l;
    SetData(d, s, x, label);
    DDT(DDNetSetTraining(net, PETSC_TRUE));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, &l));
    r.push_back(l);
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
    DDT(DDNetSetTraining(net, PETSC_FALSE));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLoss(net, &l));
    r.push_back(l);
  }
  DDT(DDNetSetTraining(net, PETSC_TRUE));
  return r;
}

/* a fresh network and optimizer on the partition, optionally restarted from `ckpt`; runs the steps, optionally saves */
static std::vector<double> Segment(const Example &e, const Data &d, PetscInt N, const std::vector<PetscInt> &pshape, bool serial, const char *load, int first, int steps, const char *save)
{
  DDTensor x, label;
  MakeTensors(d, N, pshape, serial, &x, &label);
  DDTensor in[2] = {x, label};
  DDNet    net   = NetFromOptions(e.prefix);
  DDT(DDNetSetUp(net, 2, in));
  DDOptimizer opt = OptimizerFor(net, e.prefix);
  if (load) DDT(DDCheckpointLoad(net, opt, load));
  std::vector<double> r = TrainAndEvaluate(d, net, opt, x, label, first, steps);
  if (save) DDT(DDCheckpointSave(net, opt, save));
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&label));
  return r;
}

static void RestartEqualsUninterrupted(Net n, PetscInt N)
{
  const Example &e = examples[n];
  InsertFile(e.prefix, ShareFile(e.file));
  Data                  d    = ReadData(e.prefix);
  std::vector<PetscInt> part = Partitions(d, Size()).front(), one(d.sample.size() + 1, 1);
  std::string           ck   = Tmp((std::string(e.prefix) + "restart.h5").c_str());
  const int             k = 2, m = 2;
  std::vector<double>   full = Segment(e, d, N, part, false, NULL, 0, k + m, NULL);
  Segment(e, d, N, part, false, NULL, 0, k, ck.c_str());
  std::vector<double> same = Segment(e, d, N, part, false, ck.c_str(), k, m, NULL);
  std::vector<double> ser  = Segment(e, d, N, one, true, ck.c_str(), k, m, NULL);
  for (int i = 0; i < 2 * m; i++) {
    const double ref = full[2 * k + i];
    const char  *mode = i % 2 ? "evaluation" : "training";
    EXPECT_NEAR(same[i], ref, 1e-13 * std::fabs(ref)) << e.file << ": restart on the same partition " << Str(part) << ", step " << k + i / 2 << " in " << mode;
    EXPECT_NEAR(ser[i], ref, 1e-10 * std::fabs(ref)) << e.file << ": restart on one rank, step " << k + i / 2 << " in " << mode;
  }
  if (Rank() == 0) unlink(ck.c_str());
}

TEST(Examples, LeNet5RestartEqualsUninterruptedRun)
{
  RestartEqualsUninterrupted(LENET, 8);
}

TEST(Examples, VGGRestartEqualsUninterruptedRun)
{
  RestartEqualsUninterrupted(VGG, 8);
}

TEST(Examples, ResNetRestartEqualsUninterruptedRun)
{
  RestartEqualsUninterrupted(RESNET, 4);
}

TEST(Examples, UNet3DRestartEqualsUninterruptedRun)
{
  RestartEqualsUninterrupted(UNET, 2);
}

/* (c) the ResNet of resnet.opts written in code */
static DDLayer NewLayer(DDLayerType type)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, type));
  return l;
}

static void Add(DDNet net, DDLayer l, const char *name, std::vector<const char *> inputs = {})
{
  DDT(DDNetAddLayer(net, l, name, (PetscInt)inputs.size(), inputs.empty() ? NULL : inputs.data()));
  DDT(DDLayerDestroy(&l));
}

static DDNet ResNetInCode()
{
  DDNet       net;
  const char *ins[] = {"x", "label"};
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetInputNames(net, 2, ins));
  auto conv = [&](const std::string &name) {
    PetscInt k = 3, p = 1;
    DDLayer  c = NewLayer(DDLAYERCONV);
    DDT(DDLayerConvSetOutputChannels(c, 10));
    DDT(DDLayerConvSetKernel(c, 1, &k));
    DDT(DDLayerConvSetPadding(c, 1, &p));
    DDT(DDLayerConvSetBias(c, PETSC_FALSE));
    Add(net, c, name.c_str());
  };
  auto bn = [&](const std::string &name) {
    DDLayer b = NewLayer(DDLAYERBATCHNORM);
    DDT(DDLayerBatchNormSetMomentum(b, 0.1));
    Add(net, b, name.c_str());
  };
  auto relu = [&](const std::string &name) {
    DDLayer a = NewLayer(DDLAYERACTIVATION);
    DDT(DDLayerActivationSetType(a, DD_ACT_RELU));
    Add(net, a, name.c_str());
  };
  auto avg = [&](const std::string &name, PetscInt k) {
    DDLayer p = NewLayer(DDLAYERPOOL);
    DDT(DDLayerPoolSetType(p, DD_POOL_AVG));
    DDT(DDLayerPoolSetKernel(p, 1, &k));
    Add(net, p, name.c_str());
  };
  conv("c0");
  bn("n0");
  relu("a0");
  std::string prev = "a0";
  for (int b = 1; b <= 3; b++) {
    std::string B = "b" + std::to_string(b);
    conv(B + "c1");
    bn(B + "n1");
    relu(B + "a1");
    conv(B + "c2");
    bn(B + "n2");
    std::string n2 = B + "n2";
    Add(net, NewLayer(DDLAYERADD), (B + "add").c_str(), {n2.c_str(), prev.c_str()}); /* x_{b} = F(x_{b-1}) + x_{b-1} */
    relu(B + "out");
    prev = B + "out";
  }
  avg("gap1", 4);
  {
    PetscInt one[4] = {1, 1, 1, 1};
    DDLayer  r      = NewLayer(DDLAYERREPARTITION);
    DDT(DDLayerRepartitionSetShape(r, 4, one));
    Add(net, r, "gather");
  }
  avg("gap", 6);
  Add(net, NewLayer(DDLAYERFLATTEN), "flat");
  {
    DDLayer a = NewLayer(DDLAYERAFFINE);
    DDT(DDLayerAffineSetOutputFeatures(a, 4));
    Add(net, a, "out");
  }
  {
    DDLayer l = NewLayer(DDLAYERLOSS);
    DDT(DDLayerLossSetType(l, DD_LOSS_CROSSENTROPY));
    Add(net, l, "loss", {"out", "label"});
  }
  return net;
}

static std::vector<std::string> ParamNames(DDNet net)
{
  PetscInt                 n;
  std::vector<std::string> r;
  DDT(DDNetGetParameters(net, &n, NULL, NULL));
  for (PetscInt i = 0; i < n; i++) {
    const char *s;
    DDT(DDNetGetParameterName(net, i, &s));
    r.push_back(s);
  }
  return r;
}

TEST(Examples, ResNetInCodeAndYAMLEqualTheOptionsFile)
{
  const Example &e = examples[RESNET];
  InsertFile(e.prefix, ShareFile(e.file));
  Data d = ReadData(e.prefix);
  auto p = Partitions(d, Size()).back(); /* spatial */
  /* the same layers, parameter names and initial parameters */
  DDTensor x, label;
  MakeTensors(d, 4, p, false, &x, &label);
  DDTensor in[2] = {x, label};
  DDNet    fromfile = NetFromOptions(e.prefix), incode = ResNetInCode();
  Example  ey       = {"resnet.yaml", "t7resnetyaml_"};
  InsertFile(ey.prefix, ShareFile(ey.file), true);
  DDNet fromyaml = NetFromOptions(ey.prefix);
  DDT(DDNetSetUp(fromfile, 2, in));
  DDT(DDNetSetUp(incode, 2, in));
  DDT(DDNetSetUp(fromyaml, 2, in));
  PetscInt64 nf, nc, ny;
  DDT(DDNetGetNumParameters(fromfile, &nf));
  DDT(DDNetGetNumParameters(incode, &nc));
  DDT(DDNetGetNumParameters(fromyaml, &ny));
  EXPECT_EQ(nf, ExpectedParameters(RESNET));
  EXPECT_EQ(nc, nf);
  EXPECT_EQ(ny, nf);
  EXPECT_EQ(ParamNames(incode), ParamNames(fromfile));
  EXPECT_EQ(ParamNames(fromyaml), ParamNames(fromfile));
  EXPECT_EQ(Params(incode), Params(fromfile));
  EXPECT_EQ(Params(fromyaml), Params(fromfile));
  /* the YAML file holds the same data and optimizer options */
  Data dy = ReadData(ey.prefix);
  EXPECT_EQ(dy.sample, d.sample);
  EXPECT_EQ(dy.classes, d.classes);
  EXPECT_EQ(dy.batch, d.batch);
  EXPECT_EQ(dy.labelsonroot, d.labelsonroot);
  {
    DDOptimizer opt = OptimizerFor(fromyaml, ey.prefix);
    PetscErrorCode err = Catch([&]() { return DDOptionsCheckUnused(PETSC_COMM_WORLD, ey.prefix); });
    EXPECT_EQ(err, 0) << "resnet.yaml has options no object read";
    DDT(DDOptimizerDestroy(&opt));
  }
  DDT(DDNetDestroy(&fromyaml));
  /* the same training (the optimizer from the file for all) */
  TrainRun a = Train(e, d, 4, p, false, 3, fromfile), b = Train(e, d, 4, p, false, 3, incode);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.stats, b.stats);
  DDT(DDNetDestroy(&fromfile));
  DDT(DDNetDestroy(&incode));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&label));
}

/* ---------------------------------------------------------------------- */

TEST(ExamplesBadInput, UnknownLayerTypeInAFile)
{
  std::string f = Tmp("unknown.opts");
  WriteFile(f, "# a network file with a typo in a layer type\n"
               "-net_inputs x\n-net_layers c1,c2\n"
               "-c1_layer_type conv\n-c1_layer_conv_out_channels 2\n-c1_layer_conv_kernel 3\n"
               "-c2_layer_type convolution\n");
  InsertFile("t7bad1_", f);
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t7bad1_"));
  DD_EXPECT_ERROR(DDNetSetFromOptions(net), PETSC_ERR_ARG_UNKNOWN_TYPE, "Unknown layer type \"convolution\" for the layer with prefix t7bad1_c2_");
  DDT(DDNetDestroy(&net));
  if (Rank() == 0) unlink(f.c_str());
}

TEST(ExamplesBadInput, LayerInputThatDoesNotExist)
{
  std::string f = Tmp("noinput.opts");
  WriteFile(f, "-net_inputs x,label\n-net_layers c1,x1,loss\n"
               "-c1_layer_type conv\n-c1_layer_conv_out_channels 2\n-c1_layer_conv_kernel 3\n"
               "-x1_layer_type activation\n-x1_layer_inputs nothere\n"
               "-loss_layer_type loss\n-loss_layer_inputs x1,label\n");
  InsertFile("t7bad2_", f);
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t7bad2_"));
  DD_EXPECT_ERROR(DDNetSetFromOptions(net), PETSC_ERR_ARG_WRONG, "Layer \"x1\" takes input \"nothere\", which is neither a network input nor an earlier layer");
  DDT(DDNetDestroy(&net));
  if (Rank() == 0) unlink(f.c_str());
}

/* PetscErrorPrintf replacement that keeps what it is given */
static std::string &Captured()
{
  static std::string text;
  return text;
}

static PetscErrorCode CaptureErrorPrintf(const char format[], ...)
{
  char    buf[1024];
  va_list ap;
  va_start(ap, format);
  vsnprintf(buf, sizeof(buf), format, ap);
  va_end(ap);
  Captured() += buf;
  return 0;
}

TEST(ExamplesBadInput, ResidualAddOfMismatchedShapes)
{
  /* a residual block whose F changes the channels (4 -> 8) but whose skip does not */
  std::string f = Tmp("add.opts");
  WriteFile(f, "-net_inputs x\n-net_layers c1,c2,sum\n"
               "-c1_layer_type conv\n-c1_layer_conv_out_channels 4\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
               "-c2_layer_type conv\n-c2_layer_conv_out_channels 8\n-c2_layer_conv_kernel 3\n-c2_layer_conv_padding 1\n"
               "-sum_layer_type add\n-sum_layer_inputs c2,c1\n");
  InsertFile("t7bad3_", f);
  DDNet    net;
  DDTensor x = MakeInput({{2, 1, 8, 4 * Size()}, {1, 1, 1, Size()}, {}, {}}, DD_FLOAT64, 1);
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t7bad3_"));
  DDT(DDNetSetFromOptions(net));
  std::string shapes = "Add: input 1 has shape 2x4x8x" + std::to_string(4 * Size()) + " but input 0 has shape 2x8x8x" + std::to_string(4 * Size());
  /* the error printout also names the layer (captured from PetscErrorPrintf) */
  auto saved       = PetscErrorPrintf;
  PetscErrorPrintf = CaptureErrorPrintf;
  Captured().clear();
  DD_EXPECT_ERROR(DDNetSetUp(net, 1, &x), PETSC_ERR_ARG_SIZ, shapes);
  PetscErrorPrintf = saved;
  EXPECT_NE(Captured().find("while setting up layer \"sum\" (add) of the network"), std::string::npos) << Captured();
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  if (Rank() == 0) unlink(f.c_str());
}

TEST(ExamplesBadInput, MisspelledOptionInAFile)
{
  std::string f = Tmp("typo.opts");
  WriteFile(f, "-net_inputs x\n-net_layers c1\n"
               "-c1_layer_type conv\n-c1_layer_conv_out_channels 2\n-c1_layer_conv_kernal 3\n");
  InsertFile("t7bad4_", f);
  DDNet    net;
  DDTensor x = MakeInput({{2, 1, 6, 6}, {}, {}, {}}, DD_FLOAT64, 1);
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "t7bad4_"));
  DDT(DDNetSetFromOptions(net));
  DD_EXPECT_ERROR(DDOptionsCheckUnused(PETSC_COMM_WORLD, "t7bad4_"), PETSC_ERR_ARG_WRONG, "-t7bad4_c1_layer_conv_kernal");
  DDT(PetscOptionsClearValue(NULL, "-t7bad4_c1_layer_conv_kernal"));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  if (Rank() == 0) unlink(f.c_str());
}
