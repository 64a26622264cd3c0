/*
  Issue 16, item 3: the automatic per-layer distribution (-net_distribution auto, paper 003
  sec. V-C). With synthetic model parameters (a model cache written here: every kernel fit and
  alpha-beta chosen by the test) the chooser picks the expected plans (the sample split when
  communication is dear, the user's partitions kept), its plan is the cheapest of a brute-force
  enumeration of all plans of a small net (with and without a memory cap), an auto-distributed
  U-Net (the main job's layers) and LeNet-like net compute the same loss, output and parameter
  gradients as the same net on one rank (float64), and bad input gives clear errors.
  Run at 1, 2 and 4 ranks.
*/
#include "layertest.hpp"
#include <cstring>
#include <ddmodel.h>
#include <ddnn/private/ddnetimpl.h>
#include <fstream>
#include <sstream>
#include <map>
#include <random>
#include <unistd.h>

using namespace ddtest;

#ifndef DDNN_SHARE_DIR
  #error "DDNN_SHARE_DIR (the source tree's share/ddnn) must be defined"
#endif

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test17_") + std::to_string(getppid()) + "_" + name;
}

/* the synthetic model cache below is read by many tests: removed when they are done */
class RemoveModelCache : public ::testing::Environment {
public:
  void TearDown() override { RemoveTestFile(Tmp("model.txt")); }
};
static ::testing::Environment *const removecache = ::testing::AddGlobalTestEnvironment(new RemoveModelCache);

/* A model cache with synthetic parameters: alpha, beta; every kernel t = c0 + c1 work
   (GEMM kinds: c1 per flop; the others per byte), for both data types; then loaded */
/* repart: repartitions priced by their own fit (as a calibration on P > 1 ranks writes it): alpha-beta and terms in
   the runs they send from, receive into and copy within the rank and the bytes they copy within the rank
   (Exchange::PlannedWork(), which a pricing-only set-up answers too) */
static void UseSyntheticModel(double alpha, double beta, double c0 = 1e-6, double gemm = 1e-10, double mem = 1e-10, bool repart = false)
{
  const char *bname;
  char        host[256] = {0};
  DDT(DDBackendGetDefault(&bname));
  gethostname(host, sizeof(host) - 1);
  for (char *c = host; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  std::ostringstream s;
  s << "ddnn-model-cache 16\nhost " << host << "\ncomm " << alpha << " " << beta << "\n";
  const char *kinds[] = {"activation", "activation-elu", "activation-gelu", "activation-identity", "activation-leakyrelu", "activation-sigmoid", "activation-silu", "activation-softplus", "activation-tanh", "affine", "batchnorm", "concat", "conv", "convtranspose", "flatten", "halo", "loss", "loss-crossentropy", "pool", "pool-avg", "pool-avg-blocked", "upsample"};
  for (const char *dt : {"float32", "float64"}) {
    for (const char *k : kinds)
      for (const char *d : {"f", "b"}) {
        bool g = !strcmp(k, "conv") || !strcmp(k, "convtranspose") || !strcmp(k, "affine");
        if (!strcmp(k, "halo")) s << "kernel " << bname << " " << dt << " halo " << d << " " << alpha << " " << beta << "\n"; /* a halo exchange as called: alpha-beta too */
        else s << "kernel " << bname << " " << dt << " " << k << " " << d << " " << c0 << " " << (g ? gemm : mem) << "\n";
      }
    if (repart)
      for (const char *k : {"repartition", "repartition:cold", "repartition-direct", "repartition-direct:cold"})
        for (const char *d : {"f", "b"}) s << "kernel " << bname << " " << dt << " " << k << " " << d << " " << alpha << " " << beta << " 3e-09 2e-09 1e-09 2e-11\n";
    for (const char *k : {"affine-wgrad", "conv-wgrad", "convtranspose-wgrad"}) s << "kernel " << bname << " " << dt << " " << k << " b " << c0 << " " << gemm << "\n"; /* first layers: the weight gradient alone */
    for (const char *k : {"tensoraxpy", "tensorzero"}) s << "kernel " << bname << " " << dt << " " << k << " f " << c0 << " " << mem << "\n";
    for (const char *k : {"activation", "activation-rows"})
      for (const char *d : {"f", "b"}) s << "runcost " << bname << " " << dt << " " << k << " " << d << " 1e-9\n";
  }
  std::string file = Tmp("model.txt");
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) {
    std::ofstream f(file);
    f << s.str();
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    PetscBool cal;
    DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, dt, &cal));
    ASSERT_TRUE(cal) << "the synthetic model cache lacks a kernel the model needs (a new calibrated kind?)";
  }
}

/* a model cache path with no file behind it (a machine never calibrated), in use */
static std::string UseMissingModelCache(const char *name)
{
  std::string cache = Tmp(name);
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) remove(cache.c_str());
  MPI_Barrier(PETSC_COMM_WORLD);
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", cache.c_str()));
  DDT(DDModelReset());
  return cache;
}

static std::vector<std::string> setopts; /* the options SetOptions() set: PETSc's table is finite */

/* clears them (after the networks that read them are set up or destroyed) */
static void ForgetOptions()
{
  for (auto &o : setopts) DDT(PetscOptionsClearValue(NULL, o.c_str()));
  setopts.clear();
}

/* options "-key value" lines, each given the prefix (the network's and its layers' options) */
static void SetOptions(const std::string &prefix, const std::string &text)
{
  std::istringstream in(text);
  std::string        line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string        key, value;
    ls >> key;
    std::getline(ls, value);
    value.erase(0, value.find_first_not_of(' '));
    if (key.size() < 2 || key[0] != '-') continue;
    if (key == "-optimizer_type" || key.rfind("-optimizer_", 0) == 0 || key == "-epochs" || key == "-nsamples" || key == "-ntest") continue; /* not the network's */
    setopts.push_back("-" + prefix + key.substr(1));
    DDT(PetscOptionsSetValue(NULL, setopts.back().c_str(), value.empty() ? NULL : value.c_str()));
  }
}

static std::string ReadFile(const std::string &path)
{
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

static int netcount = 0;

/* a network from options text, with a fresh prefix */
static DDNet MakeNet(const std::string &text, DDNetDistribution dist, PetscInt64 cap = 0)
{
  DDNet       net;
  std::string prefix = "n" + std::to_string(netcount++) + "_";
  SetOptions(prefix, text);
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, prefix.c_str()));
  DDT(DDNetSetFromOptions(net));
  DDT(DDNetSetDistribution(net, dist));
  DDT(DDNetSetMemoryLimit(net, cap));
  return net;
}

/* the predicted time of a step of the set-up network's layers, as the chooser minimises it:
   the sum over the layers of the slowest rank's forward and backward */
static double LayerSum(DDNet net, double *mem = nullptr)
{
  PetscInt n;
  double   t = 0, m = 0;
  DDT(DDNetGetNumLayers(net, &n));
  for (PetscInt i = 0; i < n; i++) {
    PetscReal  c[4];
    PetscBool  cal;
    DDLayer    l;
    PetscInt64 mm[4];
    DDT(DDNetGetLayerModelTime(net, i, &c[0], &c[1], &c[2], &c[3], &cal));
    DDT(DDNetGetLayerByIndex(net, i, &l, NULL));
    DDT(DDLayerGetModelMemory(l, &mm[0], &mm[1], &mm[2], &mm[3]));
    PetscReal v[2] = {c[0] + c[1] + c[2] + c[3], (PetscReal)(mm[0] + mm[1] + mm[2] + mm[3])};
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPIU_REAL, MPIU_MAX, PETSC_COMM_WORLD);
    t += v[0];
    m += v[1];
  }
  if (mem) *mem = m;
  return t;
}

/* the partition shape of a layer's input 0 */
static std::vector<PetscInt> InputPartition(DDNet net, const char *name)
{
  DDLayer l;
  DDT(DDNetGetLayer(net, name, &l));
  DDTensor x = l->setupin[0];
  return std::vector<PetscInt>(x->part->shape, x->part->shape + x->part->order);
}

static std::string Str(const std::vector<PetscInt> &v)
{
  std::string s = "[";
  for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string((long long)v[i]);
  return s + "]";
}

static std::string UNetText()
{
  return ReadFile(std::string(DDNN_SHARE_DIR) + "/main_job.opts");
}

/* a LeNet-like net: conv, pool, conv, pool, flatten, affine, affine, mse loss */
static const char *LeNetText = "-net_inputs x,target\n"
                               "-net_layers c1,a1,s2,c3,a3,s4,flat,f5,a5,out,loss\n"
                               "-c1_layer_type conv\n-c1_layer_conv_out_channels 4\n-c1_layer_conv_kernel 3\n"
                               "-a1_layer_type activation\n-a1_layer_activation_type tanh\n"
                               "-s2_layer_type pool\n-s2_layer_pool_type avg\n-s2_layer_pool_kernel 2\n"
                               "-c3_layer_type conv\n-c3_layer_conv_out_channels 8\n-c3_layer_conv_kernel 3\n"
                               "-a3_layer_type activation\n-a3_layer_activation_type tanh\n"
                               "-s4_layer_type pool\n-s4_layer_pool_type avg\n-s4_layer_pool_kernel 2\n"
                               "-flat_layer_type flatten\n"
                               "-f5_layer_type affine\n-f5_layer_affine_out_features 12\n"
                               "-a5_layer_type activation\n-a5_layer_activation_type tanh\n"
                               "-out_layer_type affine\n-out_layer_affine_out_features 4\n"
                               "-loss_layer_type loss\n-loss_layer_inputs out,target\n-loss_layer_loss_type mse\n";

/* a line of convolutions for the brute force */
static const char *LineText = "-net_inputs x\n"
                              "-net_layers c1,a1,c2,a2,c3\n"
                              "-c1_layer_type conv\n-c1_layer_conv_out_channels 4\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
                              "-a1_layer_type activation\n"
                              "-c2_layer_type conv\n-c2_layer_conv_out_channels 4\n-c2_layer_conv_kernel 3\n-c2_layer_conv_padding 1\n"
                              "-a2_layer_type activation\n"
                              "-c3_layer_type conv\n-c3_layer_conv_out_channels 2\n-c3_layer_conv_kernel 1\n";

/* spatial split of the rows over P (as the main job's DMDA on P ranks: the batch tensors split in H) */
static std::vector<PetscInt> RowSplit(PetscInt order)
{
  std::vector<PetscInt> p(order, 1);
  p[2] = Size();
  return p;
}

/* forward and backward of a set-up net; the loss, the output of `out`, the parameter gradients */
static RunResult Run(DDNet net, std::vector<DDTensor> xs, const char *out)
{
  RunResult r;
  DDTensor  y;
  PetscInt  n;
  DDTensor *ps, *gs;
  DDT(DDNetZeroGradients(net));
  DDT(DDNetForward(net, (PetscInt)xs.size(), xs.data()));
  DDT(DDNetBackward(net, NULL));
  DDT(DDNetGetLoss(net, &r.loss));
  DDT(DDNetGetLayerOutput(net, out, &y));
  r.y = GatherAll(y);
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  for (PetscInt i = 0; i < n; i++) {
    r.params.push_back(GatherAll(ps[i]));
    r.grads.push_back(GatherAll(gs[i]));
  }
  return r;
}

/* auto on P ranks against given on one rank: same loss, output, parameters and gradients (float64) */
static void ExpectAutoEqualsSerial(const std::string &text, std::vector<PetscInt> xshape, std::vector<PetscInt> tshape, const char *out, const std::string &what, PetscInt classes = 0)
{
  DDNet    ref = MakeNet(text, DD_NET_DISTRIBUTION_GIVEN), au = MakeNet(text, DD_NET_DISTRIBUTION_AUTO);
  DDTensor x1 = RandomInput(xshape, {}, DD_FLOAT64, 11, true), t1 = RandomInput(tshape, {}, DD_FLOAT64, 12, true);
  std::vector<PetscInt> tp(tshape.size(), 1);
  if (tshape.size() == 4) tp = RowSplit(4);
  DDTensor xp = RandomInput(xshape, RowSplit(4), DD_FLOAT64, 11), tpt = RandomInput(tshape, tp, DD_FLOAT64, 12);
  if (classes) { /* class indices of a cross-entropy: (N) against the logits (N, classes) */
    std::vector<double> v((size_t)tshape[0]);
    for (size_t i = 0; i < v.size(); i++) v[i] = (double)((3 * i + 1) % (size_t)classes);
    DDT(DDTensorSetValuesGlobal(t1, v.data()));
    DDT(DDTensorSetValuesGlobal(tpt, v.data()));
  }
  DDTensor a[2] = {x1, t1}, b[2] = {xp, tpt};
  DDT(DDNetSetUp(ref, 2, a));
  DDT(DDNetSetUp(au, 2, b));
  PetscInt ins;
  DDT(DDNetGetDistributionPlan(au, &ins, NULL, NULL));
  EXPECT_GE(ins, 0) << what;
  ForgetOptions();
  RunResult r = Run(ref, {x1, t1}, out), s = Run(au, {xp, tpt}, out);
  ExpectSameRun(s, r, 1e-12, what + " (auto on " + std::to_string(Size()) + " ranks, " + std::to_string(ins) + " repartitions inserted, against 1 rank)");
  /* and a second step after set-up again (the inserted layers replaced, not added) */
  DDT(DDNetSetUp(au, 2, b));
  PetscInt ins2, n1, n2;
  DDT(DDNetGetDistributionPlan(au, &ins2, NULL, NULL));
  EXPECT_EQ(ins, ins2) << what;
  DDT(DDNetGetNumLayers(ref, &n1));
  DDT(DDNetGetNumLayers(au, &n2));
  EXPECT_EQ(n2, n1 + ins2) << what;
  RunResult s2 = Run(au, {xp, tpt}, out);
  ExpectSameRun(s2, r, 1e-12, what + " after a second set-up");
  for (DDTensor *t : {&x1, &t1, &xp, &tpt}) DDT(DDTensorDestroy(t));
  DDT(DDNetDestroy(&ref));
  DDT(DDNetDestroy(&au));
}

TEST(Distribution, AutoEqualsOneRankUNet)
{
  /* cheap and dear communication: different plans, the same numbers */
  for (double alpha : {1e-7, 1e-2}) {
    UseSyntheticModel(alpha, alpha * 1e-3);
    ExpectAutoEqualsSerial(UNetText(), {2, 1, 16, 16}, {2, 1, 16, 16}, "out", "main job U-Net, alpha " + std::to_string(alpha));
  }
  /* the convolutions' and poolings' compute timed per configuration (-dd_model_measure_convs,
     -dd_model_measure_pools) in the trial set-ups: every rank times its own pieces of each candidate, nothing
     collective (a candidate with empty pieces, or one whose ranks hold different parts, used to leave the
     ranks' tensor creations disagreeing) */
  UseSyntheticModel(1e-7, 1e-10);
  DDT(PetscOptionsSetValue(NULL, "-dd_model_measure_convs", "1"));
  DDT(PetscOptionsSetValue(NULL, "-dd_model_measure_pools", "1"));
  ExpectAutoEqualsSerial(UNetText(), {2, 1, 16, 16}, {2, 1, 16, 16}, "out", "main job U-Net, convolutions and poolings measured");
  DDT(PetscOptionsClearValue(NULL, "-dd_model_measure_pools"));
  DDT(PetscOptionsClearValue(NULL, "-dd_model_measure_convs"));
}

TEST(Distribution, AutoEqualsOneRankLeNet)
{
  for (double alpha : {1e-7, 1e-2}) {
    UseSyntheticModel(alpha, alpha * 1e-3);
    ExpectAutoEqualsSerial(LeNetText, {4, 1, 16, 16}, {4, 4}, "out", "LeNet-like, alpha " + std::to_string(alpha));
    /* cross-entropy: the target (class indices, one dimension fewer than the logits) goes onto the logits' partition without the class dimension (it used to be sent onto the logits' own partition: an error at set-up) */
    std::string ce = LeNetText;
    ce.replace(ce.find("loss_type mse"), std::strlen("loss_type mse"), "loss_type crossentropy");
    ExpectAutoEqualsSerial(ce, {4, 1, 16, 16}, {4}, "out", "LeNet-like, cross-entropy, alpha " + std::to_string(alpha), 4);
  }
}

/* dear bytes: the sample split everywhere (the weights' collectives, which every split has, but no
   halo exchanges and no partial sums of a channel split), the rows-split input moved once (8 rows:
   fewer bytes than the halos of the convolutions forward and backward) */
TEST(Distribution, DearCommunicationGivesSampleSplit)
{
  UseSyntheticModel(1e-7, 1e-5);
  PetscInt P   = Size();
  DDNet    net = MakeNet(LineText, DD_NET_DISTRIBUTION_AUTO);
  DDTensor x   = RandomInput({4 * P, 1, 8, 16}, RowSplit(4), DD_FLOAT32, 1);
  DDT(DDNetSetUp(net, 1, &x));
  ForgetOptions();
  for (const char *c : {"c1", "c2", "c3"}) EXPECT_EQ(Str(InputPartition(net, c)), Str({P, 1, 1, 1})) << "layer " << c << " on " << P << " ranks";
  PetscInt ins;
  DDT(DDNetGetDistributionPlan(net, &ins, NULL, NULL));
  EXPECT_EQ(ins, P > 1 ? 1 : 0) << "the input moves once";
  DDT(DDTensorDestroy(&x));
  DDT(DDNetDestroy(&net));
}

/* cheap communication and a batch smaller than P: not the sample split; and layers after the user's own repartition keep its partition */
TEST(Distribution, SmallBatchAndUserPartitionsKept)
{
  UseSyntheticModel(1e-9, 1e-13);
  PetscInt    P    = Size();
  std::string text = std::string(LineText);
  /* the user repartitions before c2 onto the sample... or the rows: c2 and c3 keep it */
  text.replace(text.find("c1,a1,c2"), 8, "c1,a1,rp,c2");
  text += "-rp_layer_type repartition\n-rp_layer_repartition_shape 1,1," + std::to_string(P) + ",1\n";
  DDNet    net = MakeNet(text, DD_NET_DISTRIBUTION_AUTO);
  DDTensor x   = RandomInput({1, 2, 8, 8}, RowSplit(4), DD_FLOAT32, 1);
  DDT(DDNetSetUp(net, 1, &x));
  ForgetOptions();
  EXPECT_EQ(InputPartition(net, "c1")[0], 1) << "a batch of 1 cannot be split";
  EXPECT_EQ(Str(InputPartition(net, "c2")), Str({1, 1, P, 1})) << "after the user's repartition";
  EXPECT_EQ(Str(InputPartition(net, "c3")), Str({1, 1, P, 1})) << "after the user's repartition";
  PetscInt nl;
  DDT(DDNetGetNumLayers(net, &nl));
  DDT(DDTensorDestroy(&x));
  DDT(DDNetDestroy(&net));
}

/* a machine whose model cache lacks the calibration, with -net_distribution_calibrate 0 (CI, short
   runs): no calibration, the given distribution kept (and said), a network that runs */
TEST(Distribution, UncalibratedKeepsGiven)
{
  PetscInt    P     = Size();
  std::string cache = UseMissingModelCache("nomodel.txt");
  DDNet    net = MakeNet(std::string(LineText) + "-net_distribution_calibrate 0\n", DD_NET_DISTRIBUTION_AUTO);
  DDTensor x   = RandomInput({4 * P, 2, 8, 16}, RowSplit(4), DD_FLOAT32, 1);
  DDT(DDNetSetUp(net, 1, &x));
  ForgetOptions();
  PetscInt ins;
  DDT(DDNetGetDistributionPlan(net, &ins, NULL, NULL));
  if (P > 1) EXPECT_EQ(ins, -1) << "the given distribution, not a plan";
  for (const char *c : {"c1", "c2", "c3"}) EXPECT_EQ(Str(InputPartition(net, c)), Str(RowSplit(4))) << "layer " << c;
  DDT(DDNetForward(net, 1, &x));
  std::ifstream f(cache);
  EXPECT_FALSE(f.good()) << "nothing calibrated, nothing written to the cache";
  DDT(DDTensorDestroy(&x));
  DDT(DDNetDestroy(&net));
}

/* -net_weights auto chooses the weight mode of the shortest predicted step: with free
   communication (alpha = beta = 0) the replicated and data-parallel modes only add their copies,
   so broadcast; with dear messages (alpha 1 ms) their 3 collective calls per group and step beat
   the broadcast mode's 2 per parameter (6 here), and the cheaper copies decide between the two;
   with dear bytes (beta 1 us per byte) the data-parallel mode, which moves no
   weights after an update, so data-parallel. One rank: nothing is broadcast, so broadcast. The
   choice is printed by DDNetView() and the network trains in it */
TEST(WeightsAuto, ChoosesTheModeOfTheShortestPredictedStep)
{
  const PetscInt P = Size();
  for (auto ab : std::vector<std::pair<double, double>>{{0.0, 0.0}, {1e-3, 0.0}, {0.0, 1e-6}}) {
    const double alpha = ab.first, beta = ab.second;
    UseSyntheticModel(alpha, beta);
    DDNet net = MakeNet(std::string(LineText) + "-net_weights auto\n", DD_NET_DISTRIBUTION_GIVEN);
    DDTensor x = RandomInput({2, 2, 4 * P, 6}, RowSplit(4), DD_FLOAT64, 1);
    DDT(DDNetSetUp(net, 1, &x));
    ForgetOptions();
    DDNetWeightMode m;
    DDT(DDNetGetWeightMode(net, &m));
    EXPECT_EQ(m, DD_NET_WEIGHTS_AUTO);
    const ddnn::NetWeightChoice &c = net->impl->weightchoice;
    const bool                   replicated = net->impl->replicas != nullptr;
    std::string                  text       = ViewedText([&](PetscViewer v) { return DDNetView(net, v); });
    EXPECT_TRUE(c.decided);
    if (P == 1) {
      EXPECT_FALSE(replicated);
      EXPECT_NE(text.find("weights: auto -> broadcast (no weight is broadcast to another rank)"), std::string::npos) << text;
    } else {
      const PetscReal       tmin = std::min({c.tbroadcast, c.treplicated, c.tdataparallel});
      /* alpha: the replicated and data-parallel modes make as many calls, their copies decide */
      const DDNetWeightMode want = alpha > 0 ? (c.treplicated <= c.tdataparallel ? DD_NET_WEIGHTS_REPLICATED : DD_NET_WEIGHTS_DATAPARALLEL) : beta > 0 ? DD_NET_WEIGHTS_DATAPARALLEL : DD_NET_WEIGHTS_BROADCAST;
      if (alpha > 0) EXPECT_LT(std::max(c.treplicated, c.tdataparallel), 0.5 * c.tbroadcast);
      if (beta > 0) EXPECT_LT(c.tdataparallel, 0.75 * c.treplicated) << "the replicated mode's broadcast after an update";
      EXPECT_EQ(c.chosen, want) << "alpha " << alpha << ", beta " << beta << ": predicted step " << c.tdataparallel << " s data-parallel, " << c.treplicated << " s replicated, " << c.tbroadcast << " s broadcast";
      EXPECT_EQ(replicated, want != DD_NET_WEIGHTS_BROADCAST);
      EXPECT_EQ(tmin, c.chosen == DD_NET_WEIGHTS_BROADCAST ? c.tbroadcast : c.chosen == DD_NET_WEIGHTS_REPLICATED ? c.treplicated : c.tdataparallel);
      EXPECT_NE(text.find(std::string("weights: auto -> ") + DDNetWeightModes[want] + " (predicted step"), std::string::npos) << text;
      /* the prices are the model's of the three modes: the chosen one is the network's now */
      PetscReal tf, tb;
      DDT(DDNetGetModelTime(net, &tf, &tb, NULL));
      EXPECT_NEAR(tf + tb, tmin, 1e-12 * (tf + tb));
    }
    /* it trains: a forward and a backward, the replicated collectives counted when chosen */
    DDTensor y, dy;
    DDT(DDNetForward(net, 1, &x));
    DDT(DDNetGetOutput(net, &y));
    DDT(DDTensorDuplicate(y, &dy));
    DDT(DDTensorSet(dy, 1.0));
    DDT(DDNetBackward(net, dy));
    DDT(DDTensorDestroy(&dy));
    EXPECT_EQ(net->impl->nreplreduce > 0, replicated);
    DDT(DDTensorDestroy(&x));
    DDT(DDNetDestroy(&net));
  }
  /* uncalibrated with -net_weights_calibrate 0: broadcast, said aloud (on more than one rank) */
  std::string cache = UseMissingModelCache("nomodel_w.txt");
  DDNet    net = MakeNet(std::string(LineText) + "-net_weights auto\n-net_weights_calibrate 0\n", DD_NET_DISTRIBUTION_GIVEN);
  DDTensor x   = RandomInput({2, 2, 4 * P, 6}, RowSplit(4), DD_FLOAT64, 1);
  DDT(DDNetSetUp(net, 1, &x));
  ForgetOptions();
  EXPECT_EQ(net->impl->replicas, nullptr);
  std::string text = ViewedText([&](PetscViewer v) { return DDNetView(net, v); });
  if (P > 1) EXPECT_NE(text.find("weights: auto -> broadcast (the performance model is not calibrated"), std::string::npos) << text;
  DDT(DDNetForward(net, 1, &x));
  std::ifstream f(cache);
  EXPECT_FALSE(f.good()) << "nothing calibrated, nothing written to the cache";
  DDT(DDTensorDestroy(&x));
  DDT(DDNetDestroy(&net));
}

PETSC_EXTERN PetscErrorCode DDNetGetDistributionTables_Private(DDNet, PetscInt *, const PetscReal **);

/* The trial set-ups price without building (the default: the halo, repartition and scatter
   primitives count their messages, bytes and buffers instead of building star forests and exchange
   plans) and give the very numbers of full set-ups (-net_distribution_full_trials, the old path):
   every table entry (each decision layer's segment time and memory per candidate, the shuffles and
   joins), the chosen partition of every layer, the inserted repartitions, the predicted step and
   memory, compared for equality, not within a tolerance */
static void ExpectPricingOnlyEqualsFull(const std::string &text, std::vector<std::vector<PetscInt>> shapes, DDDataType dt, const std::string &what)
{
  std::vector<PetscReal> tab[2];
  std::string            plan[2];
  PetscInt               ins[2];
  PetscReal              pred[2];
  PetscInt64             mem[2];
  std::vector<DDTensor>  xs;
  for (size_t i = 0; i < shapes.size(); i++) xs.push_back(RandomInput(shapes[i], shapes[i].size() == 4 ? RowSplit(4) : std::vector<PetscInt>(shapes[i].size(), 1), dt, 5 + (int)i));
  for (int full = 0; full < 2; full++) {
    DDNet            net = MakeNet(text + (full ? "-net_distribution_full_trials 1\n" : ""), DD_NET_DISTRIBUTION_AUTO);
    PetscInt         n, nl;
    const PetscReal *v;
    DDT(DDNetSetUp(net, (PetscInt)xs.size(), xs.data()));
    ForgetOptions();
    DDT(DDNetGetDistributionTables_Private(net, &n, &v));
    tab[full].assign(v, v + n);
    DDT(DDNetGetDistributionPlan(net, &ins[full], &pred[full], &mem[full]));
    DDT(DDNetGetNumLayers(net, &nl));
    for (PetscInt i = 0; i < nl; i++) {
      DDLayer     l;
      const char *name;
      DDT(DDNetGetLayerByIndex(net, i, &l, &name));
      DDTensor x = l->setupin[0];
      plan[full] += std::string(name) + " " + Str(std::vector<PetscInt>(x->part->shape, x->part->shape + x->part->order)) + "\n";
    }
    DDT(DDNetDestroy(&net));
  }
  EXPECT_EQ(plan[0], plan[1]) << what << ": the layers and their input partitions, pricing-only against full trial set-ups";
  EXPECT_EQ(ins[0], ins[1]) << what;
  EXPECT_EQ(pred[0], pred[1]) << what;
  EXPECT_EQ(mem[0], mem[1]) << what;
  ASSERT_EQ(tab[0].size(), tab[1].size()) << what;
  if (Size() > 1) EXPECT_GT(tab[0].size(), 2u) << what << ": nothing was priced";
  size_t bad = 0;
  for (size_t i = 0; i < tab[0].size(); i++)
    if (!(tab[0][i] == tab[1][i]) && ++bad <= 5) ADD_FAILURE() << what << ": table entry " << i << " is " << tab[0][i] << " priced only, " << tab[1][i] << " from the full set-ups";
  EXPECT_EQ(bad, 0u) << what << ": entries of " << tab[0].size() << " differ";
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
}

TEST(Distribution, PricingOnlyTrialsEqualFullTrials)
{
  PetscInt    P    = Size();
  std::string user = std::string(LineText); /* with a user's repartition (the layers after it are kept) */
  user.replace(user.find("c1,a1,c2"), 8, "c1,a1,rp,c2");
  user += "-rp_layer_type repartition\n-rp_layer_repartition_shape 1,1," + std::to_string(P) + ",1\n";
  for (double alpha : {1e-7, 1e-2}) {
    UseSyntheticModel(alpha, alpha * 1e-3, 1e-6, 1e-10, 1e-10, true);
    std::string a = ", alpha " + std::to_string(alpha);
    if (alpha < 1e-3) ExpectPricingOnlyEqualsFull(UNetText(), {{8, 1, 32, 32}, {8, 1, 32, 32}}, DD_FLOAT32, "main job U-Net (its shapes), float32" + a); /* once: 4 ranks take a while */
    ExpectPricingOnlyEqualsFull(UNetText(), {{2, 1, 16, 16}, {2, 1, 16, 16}}, DD_FLOAT64, "main job U-Net, float64" + a);
    ExpectPricingOnlyEqualsFull(LeNetText, {{4, 1, 16, 16}, {4, 4}}, DD_FLOAT64, "LeNet-like" + a);
    ExpectPricingOnlyEqualsFull(LineText, {{4 * P, 2, 8, 16}}, DD_FLOAT32, "line of convolutions" + a);
    ExpectPricingOnlyEqualsFull(user, {{2, 2, 8, 8}}, DD_FLOAT32, "line with a user's repartition" + a);
  }
}

/* the chosen plan is the cheapest of all plans (every candidate of every conv, with the repartitions
   inserted where data must move), each set up and priced on its own; with a memory cap, the
   cheapest of those that fit. The chooser prices a layer with an explicit repartition before its
   successor, so a plan's own set-up may differ from its table by the layout of the tensor between
   them (a halo, a format): the tolerance rel */
struct BruteForce {
  double best = 0;        /* the cheapest plan's predicted step */
  double blind = 0;       /* the predicted step of the plan that is cheapest when the joins' repartitions are left out */
  bool   blindsame = true; /* that plan is the cheapest one */
};

/* a node inserted before input k > 0 of a multi-input layer: a join's repartition */
static bool IsJoin(const std::string &name)
{
  size_t p = name.rfind("_auto_in");
  return p != std::string::npos && name.substr(p + 8) != "0";
}

static BruteForce ExpectCheapestOfAllPlans(const std::string &line, std::vector<PetscInt> xs, double rel, const std::string &what)
{
  BruteForce bf;
  DDNet    net = MakeNet(line, DD_NET_DISTRIBUTION_AUTO);
  DDTensor x   = RandomInput(xs, RowSplit(4), DD_FLOAT64, 3);
  DDT(DDNetSetUp(net, 1, &x));
  ForgetOptions();
  double                m, t = LayerSum(net, &m);
  std::vector<PetscInt> nc   = net->impl->plan.ncands;
  std::string           plan;
  for (PetscInt i = 0, j = 0; i < (PetscInt)net->impl->nodes.size(); i++)
    if (!net->impl->nodes[i].autoinserted && net->impl->nodes[i].layer->nparams > 0) plan += Str(std::vector<PetscInt>(net->impl->nodes[i].layer->setupin[0]->part->shape, net->impl->nodes[i].layer->setupin[0]->part->shape + 4)) + " ", j++;
  DDT(DDNetDestroy(&net));
  std::vector<double>           allT, allM, allB;
  std::vector<std::vector<int>> plans;
  std::vector<int>              idx(nc.size(), 0);
  for (;;) {
    net                   = MakeNet(line, DD_NET_DISTRIBUTION_AUTO);
    net->impl->forcedplan = idx;
    std::string msg;
    PetscErrorCode ierr = Catch([&] { return DDNetSetUp(net, 1, &x); }, &msg);
    ForgetOptions();
    if (!ierr) {
      double mm, tt = LayerSum(net, &mm), joins = 0;
      for (PetscInt i = 0; i < (PetscInt)net->impl->nodes.size(); i++) /* the joins' share */
        if (IsJoin(net->impl->nodes[i].name)) {
          PetscReal c[4];
          PetscBool cal;
          DDT(DDNetGetLayerModelTime(net, i, &c[0], &c[1], &c[2], &c[3], &cal));
          PetscReal v = c[0] + c[1] + c[2] + c[3];
          MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPIU_REAL, MPIU_MAX, PETSC_COMM_WORLD);
          joins += v;
        }
      allT.push_back(tt);
      allM.push_back(mm);
      allB.push_back(tt - joins);
      plans.push_back(idx);
    }
    DDT(DDNetDestroy(&net));
    size_t j = 0;
    while (j < nc.size() && ++idx[j] == nc[j]) idx[j++] = 0;
    if (j == nc.size()) break;
  }
  EXPECT_FALSE(allT.empty()) << what;
  if (allT.empty()) return bf;
  size_t best = 0, blind = 0;
  for (size_t i = 0; i < allT.size(); i++) {
    if (allT[i] < allT[best]) best = i;
    if (allB[i] < allB[blind]) blind = i;
  }
  bf.best      = allT[best];
  bf.blind     = allT[blind];
  bf.blindsame = allT[blind] <= allT[best] * (1 + 1e-12);
  if (getenv("DDNN_TEST17_PLANS"))
    for (size_t i = 0; i < allT.size(); i++) {
      std::string q;
      for (int v : plans[i]) q += std::to_string(v) + " ";
      PetscPrintf(PETSC_COMM_WORLD, "plan %s: %g s, without the joins %g s\n", q.c_str(), allT[i], allB[i]);
    }
  std::string bp;
  for (int v : plans[best]) bp += std::to_string(v) + " ";
  EXPECT_LE(t, allT[best] * (1 + rel)) << what << ": the automatic plan " << plan << "against the brute force's minimum over " << allT.size() << " plans (candidates " << bp << ")";
  EXPECT_GE(t, allT[best] * (1 - 1e-12)) << what << ": the automatic plan is cheaper than every plan of the brute force";
  if (getenv("DDNN_TEST17_VIEW")) PetscPrintf(PETSC_COMM_WORLD, "%s: auto %g s, brute force %g s over %zu plans; blind to the joins %g s\n", what.c_str(), t, allT[best], allT.size(), allT[blind]);
  /* a memory cap below the unconstrained optimum's memory: the cheapest plan that fits */
  double cap = allM[best] - 1, capT = 1e300;
  for (size_t i = 0; i < allT.size(); i++)
    if (allM[i] <= cap && allT[i] < capT) capT = allT[i];
  if (capT < 1e300) {
    net = MakeNet(line, DD_NET_DISTRIBUTION_AUTO, (PetscInt64)cap);
    DDT(DDNetSetUp(net, 1, &x));
    ForgetOptions();
    t = LayerSum(net, &m);
    EXPECT_LE(m, cap * (1 + rel)) << what << ": the plan exceeds the memory cap";
    EXPECT_LE(t, capT * (1 + rel)) << what << ": with a memory cap of " << cap << " bytes";
    DDT(DDNetDestroy(&net));
  }
  DDT(DDTensorDestroy(&x));
  return bf;
}

TEST(Distribution, ShortestPathEqualsBruteForce)
{
  PetscInt    P    = Size();
  std::string line = LineText;
  if (P > 2) line.replace(line.find("c1,a1,c2,a2,c3"), 14, "c1,a1,c2"); /* 4 ranks: 10 candidates per layer */
  for (double alpha : {1e-5, 1e-8}) {
    UseSyntheticModel(alpha, 1e-9);
    ExpectCheapestOfAllPlans(line, {4, 2, 8, 8}, 0.02, "line of convolutions, alpha " + std::to_string(alpha));
  }
}

/* a skip connection: c1's activations (16 channels) feed c2 and join c3's output (2 channels) in a
   concatenation, which repartitions them from c1's partition onto c3's (the join: "k_auto_in1"),
   two decision layers apart */
static const char *JoinText = "-net_inputs x\n"
                              "-net_layers c1,a1,c2,a2,c3,k\n"
                              "-c1_layer_type conv\n-c1_layer_conv_out_channels 16\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
                              "-a1_layer_type activation\n"
                              "-c2_layer_type conv\n-c2_layer_conv_out_channels 1\n-c2_layer_conv_kernel 1\n"
                              "-a2_layer_type activation\n"
                              "-c3_layer_type conv\n-c3_layer_conv_out_channels 2\n-c3_layer_conv_kernel 7\n-c3_layer_conv_padding 3\n"
                              "-k_layer_type concat\n-k_layer_inputs c3,a1\n";

/* the joins are priced inside the path search: the plan is the cheapest of all plans, the joins'
   repartitions included, where the plan that is cheapest without them costs more (the synthetic
   model makes the join dear) */
TEST(Distribution, ShortestPathWithJoinEqualsBruteForce)
{
  if (Size() > 2) GTEST_SKIP() << "the brute force over 3 layers of 10 candidates each is too long at 4 ranks (ShortestPathEqualsBruteForce covers 4 ranks)";
  /* bytes dear: c3 alone prefers the sample split (its 7x7 halo moves more than a repartition of its
     1-channel input), which moves c1's 16 channels at the join; the optimum keeps the partitions of
     c1 and c3 equal (all sample), which the plan that ignores the join misses by some 80 % */
  UseSyntheticModel(1e-8, 1e-8);
  BruteForce bf = ExpectCheapestOfAllPlans(JoinText, {4, 4, 8, 8}, 0.02, "concatenation of a skip");
  if (Size() > 1) EXPECT_FALSE(bf.blindsame) << "the join's price does not change the optimum here (blind " << bf.blind << " s, best " << bf.best << " s): the test would not test it";
  if (Size() > 1) EXPECT_GT(bf.blind, 1.5 * bf.best);
}

TEST(Distribution, BadInput)
{
  UseSyntheticModel(1e-6, 1e-9);
  std::string msg;
  DDNet       net;
  /* an unknown -net_distribution */
  DDT(PetscOptionsSetValue(NULL, "-bad1_net_distribution", "magic"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "bad1_"));
  EXPECT_NE(Catch([&] { return DDNetSetFromOptions(net); }, &msg), 0);
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  DDT(DDNetDestroy(&net));
  DDT(PetscOptionsClearValue(NULL, "-bad1_net_distribution"));
  /* a negative memory limit, in code and as an option */
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  EXPECT_NE(Catch([&] { return DDNetSetMemoryLimit(net, -5); }, &msg), 0);
  EXPECT_NE(msg.find("-5"), std::string::npos) << msg;
  EXPECT_NE(Catch([&] { return DDNetSetDistribution(net, (DDNetDistribution)7); }, &msg), 0);
  EXPECT_NE(msg.find("Unknown network distribution 7"), std::string::npos) << msg;
  DDT(DDNetDestroy(&net));
  DDT(PetscOptionsSetValue(NULL, "-bad2_net_memory_limit", "-1"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "bad2_"));
  EXPECT_NE(Catch([&] { return DDNetSetFromOptions(net); }, &msg), 0);
  EXPECT_NE(msg.find("-bad2_net_memory_limit -1"), std::string::npos) << msg;
  DDT(DDNetDestroy(&net));
  DDT(PetscOptionsClearValue(NULL, "-bad2_net_memory_limit"));
  /* a cap no plan fits: the error names it and the smallest memory of any plan */
  if (Size() > 1) {
    net        = MakeNet(LineText, DD_NET_DISTRIBUTION_AUTO, 1000);
    DDTensor x = RandomInput({4, 2, 8, 8}, RowSplit(4), DD_FLOAT32, 3);
    EXPECT_NE(Catch([&] { return DDNetSetUp(net, 1, &x); }, &msg), 0);
    EXPECT_NE(msg.find("memory limit of 1000 bytes per rank"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no plan is predicted to need less than"), std::string::npos) << msg;
    /* the net is usable again with the cap lifted */
    DDT(DDNetSetMemoryLimit(net, 0));
    DDT(DDNetSetUp(net, 1, &x));
    DDT(DDNetForward(net, 1, &x));
    DDT(DDTensorDestroy(&x));
    DDT(DDNetDestroy(&net));
    ForgetOptions();
    /* a memory cap that differs between ranks: an error on every rank, not plans that differ */
    net = MakeNet(LineText, DD_NET_DISTRIBUTION_AUTO, Rank() == 0 ? 0 : 1 << 30);
    x   = RandomInput({4, 2, 8, 8}, RowSplit(4), DD_FLOAT32, 3);
    EXPECT_NE(Catch([&] { return DDNetSetUp(net, 1, &x); }, &msg), 0);
    EXPECT_NE(msg.find("-net_distribution or -net_memory_limit"), std::string::npos) << msg;
    DDT(DDTensorDestroy(&x));
    DDT(DDNetDestroy(&net));
    ForgetOptions();
  }
}

PETSC_EXTERN PetscErrorCode DDRepartitionGetCommVolume_Private(DDTensor, DDPartition, PetscInt64[4], PetscBool *);
PETSC_EXTERN PetscErrorCode DDRepartitionGetModelCost_Private(DDTensor, DDPartition, const PetscInt[], const PetscInt[], PetscReal *, PetscReal *, PetscBool *);

/* a random partition of up to P workers (a random subset of the ranks, in random order) whose
   factors along each dimension are at most cap[k] (no cap: -1) */
static DDPartition RandomPartition(std::mt19937 &g, PetscInt order, const PetscInt *cap)
{
  PetscInt                 P = Size(), nw = 1 + (PetscInt)(g() % P), left = nw;
  std::vector<PetscInt>    sh(order, 1);
  std::vector<PetscMPIInt> ranks(P);
  for (PetscInt f = 2; f <= left; f++)
    while (left % f == 0) { /* each prime factor onto a random dimension that can take it */
      PetscInt k = (PetscInt)(g() % order);
      for (PetscInt t = 0; t < order && cap && cap[k] >= 0 && sh[k] * f > cap[k]; t++) k = (k + 1) % order;
      sh[k] *= f;
      left /= f;
    }
  for (PetscInt i = 0; i < P; i++) ranks[i] = (PetscMPIInt)i;
  std::shuffle(ranks.begin(), ranks.end(), g);
  DDPartition part;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order, sh.data(), nw, ranks.data(), &part));
  return part;
}

/* The planner prices a repartition from the ownership boxes (no graph built): its messages and
   bytes equal those of the built layer's graph (DDLayerGetModelComm(), forward and adjoint) on
   random pairs of partitions, uneven ownership and empty pieces included, and its time equals the
   built layer's model time, its memory bounds the built layer's from above */
TEST(Distribution, ArithmeticShuffleEqualsBuiltRepartition)
{
  UseSyntheticModel(1e-6, 1e-9);
  std::mt19937 g(1234); /* the same stream on every rank */
  int          checked = 0, refused = 0, moved = 0;
  for (int it = 0; it < 120; it++) {
    PetscInt              order = 2 + (PetscInt)(g() % 3);
    std::vector<PetscInt> shape(order);
    for (auto &s : shape) s = 1 + (PetscInt)(g() % 6);
    DDPartition px = RandomPartition(g, order, nullptr), py = RandomPartition(g, order, (g() % 4) ? shape.data() : nullptr);
    DDTensor    x;
    DDDataType  dt = (g() % 2) ? DD_FLOAT32 : DD_FLOAT64;
    DDT(DDTensorCreate(PETSC_COMM_WORLD, &x));
    DDT(DDTensorSetPartition(x, px));
    DDT(DDTensorSetShape(x, order, shape.data()));
    DDT(DDTensorSetDataType(x, dt));
    DDT(DDTensorSetEmptyPiecesAllowed(x, PETSC_TRUE));
    if (order == 4 && g() % 3 == 0) DDT(DDTensorSetFormat(x, DD_FORMAT_CHANNELS_LAST));
    for (PetscInt k = 0; k < order; k++) { /* uneven ownership, empty pieces included */
      std::vector<PetscInt> lx(px->shape[k], 0);
      for (PetscInt i = 0; i < shape[k]; i++) lx[(g() % 3) ? (PetscInt)(g() % px->shape[k]) : 0]++;
      DDT(DDTensorSetOwnershipRanges(x, k, lx.data()));
    }
    DDT(DDTensorSetUp(x));
    PetscInt lo[DD_MAX_DIM] = {0}, hi[DD_MAX_DIM] = {0};
    for (PetscInt k = 0; k < order; k++) {
      lo[k] = (PetscInt)(g() % 2);
      hi[k] = (PetscInt)(g() % 2);
    }
    bool     withhalo = g() % 2;
    std::string what = "case " + std::to_string(it) + ": shape " + Str(shape) + " from " + Str(std::vector<PetscInt>(px->shape, px->shape + order)) + " onto " + Str(std::vector<PetscInt>(py->shape, py->shape + order));
    PetscInt64 v[4];
    PetscBool  ok;
    DDT(DDRepartitionGetCommVolume_Private(x, py, v, &ok));
    DDLayer r;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &r));
    DDT(DDLayerSetType(r, DDLAYERREPARTITION));
    DDT(DDLayerRepartitionSetPartition(r, py));
    if (withhalo) DDT(DDLayerSetOutputHalo_Private(r, lo, hi));
    std::string    msg;
    PetscErrorCode ierr = Catch([&] { return DDLayerSetUp(r, x); }, &msg);
    EXPECT_EQ(ierr == 0, ok == PETSC_TRUE) << what << ": the arithmetic says " << (ok ? "it sets up" : "it does not set up") << "; set-up: " << msg;
    if (!ierr && ok) {
      PetscInt64 f[4], b[4];
      DDT(DDLayerGetModelComm(r, PETSC_FALSE, &f[0], &f[1], &f[2], &f[3]));
      DDT(DDLayerGetModelComm(r, PETSC_TRUE, &b[0], &b[1], &b[2], &b[3]));
      for (int k = 0; k < 4; k++) {
        EXPECT_EQ(v[k], f[k]) << what << ", forward count " << k << " on rank " << Rank();
        EXPECT_EQ(v[(k + 2) % 4], b[k]) << what << ", adjoint count " << k << " on rank " << Rank();
      }
      PetscReal  c[4], t, m;
      PetscInt64 mm[4];
      PetscBool  cal, ident;
      DDT(DDLayerGetModelTime(r, &c[0], &c[1], &c[2], &c[3], &cal));
      DDT(DDLayerGetModelMemory(r, &mm[0], &mm[1], &mm[2], &mm[3]));
      DDT(DDRepartitionGetModelCost_Private(x, py, withhalo ? lo : NULL, withhalo ? hi : NULL, &t, &m, &ident));
      EXPECT_NEAR(t, c[0] + c[1] + c[2] + c[3], 1e-12 * t) << what << " on rank " << Rank();
      EXPECT_GE(m, (PetscReal)(mm[0] + mm[1] + mm[2] + mm[3])) << what << " on rank " << Rank();
      checked++;
      if (v[0] || v[2]) moved++;
    } else refused++;
    DDT(DDLayerDestroy(&r));
    DDT(DDTensorDestroy(&x));
    DDT(DDPartitionDestroy(&px));
    DDT(DDPartitionDestroy(&py));
  }
  EXPECT_GT(checked, 60);
  if (Size() > 1) EXPECT_GT(moved, 20);
  if (getenv("DDNN_TEST17_VIEW")) PetscPrintf(PETSC_COMM_WORLD, "arithmetic shuffles: %d checked (%d moving data), %d refused alike\n", checked, moved, refused);
}
