/*
  Issue 16, item 6: conv/affine + activation fusion (-net_fuse, DDNetSetUp; src/net/net.cxx). A
  network with fusion equals the same network without (-net_fuse 0): loss, the fused activation
  layers' outputs, every parameter gradient, and the parameters after a few optimizer steps, in 2-D
  and 3-D, float32 (/cpu/dnnl) and float64 (/cpu/blas), the activation applied in place after the
  convolution's or GEMM's kernel (with -dd_dnnl_eltwise_postop oneDNN's post-ops: tanh and sigmoid to
  1e-5, oneDNN's approximations differ from ours in the last bits), with the batch and a spatial dimension split
  at 2 ranks; dense layers + relu, tanh, sigmoid (applied in place after the GEMM and after the sum
  over input-feature workers of a spatially split input); LeNet-5 itself (share/ddnn/lenet5.opts:
  conv + tanh and affine + tanh); the fused network on P ranks equals it on one rank (float64). The
  pairs that must not fuse stay unfused: a producer whose output has two consumers, prelu, an
  activation on another backend than its producer, and an activation whose output needs a halo its
  convolution's output has not (its consumer is a 3x3 convolution). Run at 1 and 2 ranks.
*/
#include "layertest.hpp"
#include <ddnn/private/ddnetimpl.h>
#include <ddconf.h>
#include <ddmodel.h>
#include <fstream>
#include <unistd.h>
#include <sstream>

using namespace ddtest;

static std::vector<std::string> setopts; /* the options set here: PETSc's table is finite */

static void ForgetOptions()
{
  for (auto &o : setopts) DDT(PetscOptionsClearValue(NULL, o.c_str()));
  setopts.clear();
}

static int netcount = 0;

/* a network from "-key value" lines, each given a fresh prefix; -net_fuse as asked */
static DDNet MakeNet(const std::string &text, bool fuse)
{
  DDNet              net;
  std::string        prefix = "f" + std::to_string(netcount++) + "_";
  std::istringstream in(text + "-net_fuse " + (fuse ? "1" : "0") + "\n");
  std::string        line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string        key, value;
    ls >> key >> value;
    if (key.size() < 2 || key[0] != '-') continue;
    setopts.push_back("-" + prefix + key.substr(1));
    DDT(PetscOptionsSetValue(NULL, setopts.back().c_str(), value.c_str()));
  }
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, prefix.c_str()));
  DDT(DDNetSetFromOptions(net));
  return net;
}

/* whether layer `name` is fused: a convolution or dense layer that says so in its view, an activation whose output is its input's storage */
static bool Fused(DDNet net, const char *name)
{
  DDLayer   l;
  PetscBool isconv, isaffine;
  DDT(DDNetGetLayer(net, name, &l));
  DDT(PetscObjectTypeCompare((PetscObject)l, DDLAYERCONV, &isconv));
  DDT(PetscObjectTypeCompare((PetscObject)l, DDLAYERAFFINE, &isaffine));
  if (isconv || isaffine) return LayerViewText(l).find("fused with the next activation") != std::string::npos;
  int all, mine = l->output->array == l->setupin[0]->array && l->output->layout.size > 0 ? 1 : 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, PETSC_COMM_WORLD);
  return all != 0;
}

struct Trace {
  std::vector<double>              losses;
  std::vector<std::vector<double>> outs, grads, params; /* after the first step: outputs and gradients; at the end: parameters */
};

/* forward, backward, then `steps` Adam steps; the losses of every step, the outputs of `outs` and the gradients of the first, the final parameters */
static Trace Train(DDNet net, DDTensor x, DDTensor t, const std::vector<const char *> &outs, int steps)
{
  Trace       r;
  DDTensor    xs[2] = {x, t}, *ps, *gs, y;
  PetscInt    n;
  DDOptimizer opt;
  DDT(DDNetSetUp(net, 2, xs));
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, DDOPTIMIZERADAM));
  DDT(DDOptimizerSetLearningRate(opt, 0.05));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  for (int s = 0; s < steps; s++) {
    PetscReal loss;
    DDT(DDNetZeroGradients(net));
    DDT(DDNetForward(net, 2, xs));
    DDT(DDNetBackward(net, NULL));
    DDT(DDNetGetLoss(net, &loss));
    r.losses.push_back(loss);
    if (s == 0) {
      for (const char *o : outs) {
        DDT(DDNetGetLayerOutput(net, o, &y));
        r.outs.push_back(GatherAll(y));
      }
      for (PetscInt i = 0; i < n; i++) r.grads.push_back(GatherAll(gs[i]));
    }
    DDT(DDOptimizerStep(opt));
  }
  for (PetscInt i = 0; i < n; i++) r.params.push_back(GatherAll(ps[i]));
  DDT(DDOptimizerDestroy(&opt));
  return r;
}

static void ExpectSame(const Trace &a, const Trace &b, double tol, const std::string &what, bool params = true)
{
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); s++) EXPECT_NEAR(a.losses[s], b.losses[s], tol * (1 + std::fabs(b.losses[s]))) << what << ": loss of step " << s;
  ASSERT_EQ(a.outs.size(), b.outs.size());
  for (size_t i = 0; i < a.outs.size(); i++) EXPECT_LT(RelDiff(a.outs[i], b.outs[i]), tol) << what << ": layer output " << i;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); i++) EXPECT_LT(RelDiff(a.grads[i], b.grads[i]), tol) << what << ": gradient of parameter " << i;
  for (size_t i = 0; i < a.params.size() && params; i++) EXPECT_LT(RelDiff(a.params[i], b.params[i]), tol) << what << ": parameter " << i << " after the steps";
}

/*
  2-D: c2 -> a2 (tanh) -> c3 (1x1), c3 -> a3 (sigmoid) and c5 -> a5 (relu) -> pool fuse (c2
  overlapping its halo exchange with the interior: one kernel per region, each fused); c1 -> a1
  (relu) does not (a1's output needs the halo of the 3x3 convolution c2), nor c4 -> a4 (c4's output
  also feeds the concatenation k), c6 -> a6 (prelu).
*/
static const char *Net2D = "-net_inputs x,target\n"
                           "-net_layers c1,a1,c2,a2,c3,a3,c4,a4,k,c5,a5,p,c6,a6,out,loss\n"
                           "-c1_layer_type conv\n-c1_layer_conv_out_channels 4\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
                           "-a1_layer_type activation\n"
                           "-c2_layer_type conv\n-c2_layer_conv_out_channels 5\n-c2_layer_conv_kernel 3\n-c2_layer_conv_padding 1\n-c2_layer_conv_overlap 1\n"
                           "-a2_layer_type activation\n-a2_layer_activation_type tanh\n"
                           "-c3_layer_type conv\n-c3_layer_conv_out_channels 4\n-c3_layer_conv_kernel 1\n"
                           "-a3_layer_type activation\n-a3_layer_activation_type sigmoid\n"
                           "-c4_layer_type conv\n-c4_layer_conv_out_channels 3\n-c4_layer_conv_kernel 1\n"
                           "-a4_layer_type activation\n"
                           "-k_layer_type concat\n-k_layer_inputs a4,c4\n"
                           "-c5_layer_type conv\n-c5_layer_conv_out_channels 4\n-c5_layer_conv_kernel 1\n"
                           "-a5_layer_type activation\n"
                           "-p_layer_type pool\n-p_layer_pool_type max\n-p_layer_pool_kernel 2\n"
                           "-c6_layer_type conv\n-c6_layer_conv_out_channels 3\n-c6_layer_conv_kernel 1\n"
                           "-a6_layer_type activation\n-a6_layer_activation_type prelu\n"
                           "-out_layer_type conv\n-out_layer_conv_out_channels 1\n-out_layer_conv_kernel 1\n"
                           "-loss_layer_type loss\n-loss_layer_inputs out,target\n-loss_layer_loss_type mse\n";

/* 3-D: c2 -> a2 (relu) -> c3 (1x1x1) and c3 -> a3 (tanh) fuse; c1 -> a1 (its output needs c2's halo) does not */
static const char *Net3D = "-net_inputs x,target\n"
                           "-net_layers c1,a1,c2,a2,c3,a3,out,loss\n"
                           "-c1_layer_type conv\n-c1_layer_conv_out_channels 3\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
                           "-a1_layer_type activation\n"
                           "-c2_layer_type conv\n-c2_layer_conv_out_channels 4\n-c2_layer_conv_kernel 3\n-c2_layer_conv_padding 1\n"
                           "-a2_layer_type activation\n"
                           "-c3_layer_type conv\n-c3_layer_conv_out_channels 3\n-c3_layer_conv_kernel 1\n"
                           "-a3_layer_type activation\n-a3_layer_activation_type tanh\n"
                           "-out_layer_type conv\n-out_layer_conv_out_channels 1\n-out_layer_conv_kernel 1\n"
                           "-loss_layer_type loss\n-loss_layer_inputs out,target\n-loss_layer_loss_type mse\n";

struct Case {
  const char               *name, *text;
  std::vector<PetscInt>     xshape, tshape;
  std::vector<const char *> fused, unfused, outs;
};

static const Case cases[] = {
  {"2-D", Net2D, {4, 2, 12, 8}, {4, 1, 6, 4}, {"c2", "a2", "c3", "a3", "c5", "a5"}, {"c1", "a1", "c4", "a4", "c6", "a6", "out"}, {"a1", "a2", "a3", "a4", "a5", "a6", "out"}},
  {"3-D", Net3D, {2, 2, 8, 6, 4}, {2, 1, 8, 6, 4}, {"c2", "a2", "c3", "a3"}, {"c1", "a1", "out"}, {"a1", "a2", "a3", "out"}},
};

/* the partition at P ranks: the batch split by 2 where P is even, the first spatial dimension by the rest */
static std::vector<PetscInt> Split(size_t order)
{
  std::vector<PetscInt> p(order, 1);
  const PetscInt        P = Size();
  if (P % 2 == 0 && P > 2) {
    p[0] = 2;
    p[2] = P / 2;
  } else p[2] = P;
  return p;
}

/* fused == unfused on the same partition (both dtypes), the fusion marks as expected, the fused network on P ranks == on 1 rank (float64) */
TEST(Fusion, FusedEqualsUnfused)
{
  for (const Case &c : cases)
    for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
      const std::string what = std::string(c.name) + " " + DDDataTypes[dt] + " at " + std::to_string(Size()) + " ranks";
      const double      tol  = dt == DD_FLOAT32 ? 1e-6 : 1e-12;
      DDNet             f = MakeNet(c.text, true), u = MakeNet(c.text, false);
      DDTensor          x = RandomInput(c.xshape, Split(c.xshape.size()), dt, 31), t = RandomInput(c.tshape, Split(c.tshape.size()), dt, 32);
      Trace             tf = Train(f, x, t, c.outs, 3), tu = Train(u, x, t, c.outs, 3);
      for (const char *n : c.fused) {
        EXPECT_TRUE(Fused(f, n)) << what << ": " << n << " should be fused";
        EXPECT_FALSE(Fused(u, n)) << what << ": " << n << " fused with -net_fuse 0";
      }
      for (const char *n : c.unfused) EXPECT_FALSE(Fused(f, n)) << what << ": " << n << " must not be fused";
      ExpectSame(tf, tu, tol, what + ", fused vs unfused");
      if (dt == DD_FLOAT64 && Size() > 1) { /* P ranks = 1 rank, fused */
        DDNet    s  = MakeNet(c.text, true);
        DDTensor xs = RandomInput(c.xshape, {}, dt, 31, true), ts = RandomInput(c.tshape, {}, dt, 32, true);
        Trace    t1 = Train(s, xs, ts, c.outs, 3);
        for (const char *n : c.fused) EXPECT_TRUE(Fused(s, n)) << what << ": " << n << " should be fused on one rank";
        ExpectSame(tf, t1, 1e-11, what + ", fused, P ranks vs 1 rank");
        DDT(DDNetDestroy(&s));
        DDT(DDTensorDestroy(&xs));
        DDT(DDTensorDestroy(&ts));
      }
      DDT(DDNetDestroy(&f));
      DDT(DDNetDestroy(&u));
      DDT(DDTensorDestroy(&x));
      DDT(DDTensorDestroy(&t));
      ForgetOptions();
    }
}

/* set up again without fusion after a fused set-up: the pair is unfused and the results are still right */
TEST(Fusion, SetUpAgainUnfuses)
{
  const Case &c = cases[0];
  DDNet       f = MakeNet(c.text, true), u = MakeNet(c.text, false);
  DDTensor    x = RandomInput(c.xshape, Split(4), DD_FLOAT64, 41), t = RandomInput(c.tshape, Split(4), DD_FLOAT64, 42);
  Trace       tu = Train(u, x, t, c.outs, 2);
  (void)Train(f, x, t, c.outs, 1);
  EXPECT_TRUE(Fused(f, "a2"));
  DDT(PetscOptionsSetValue(NULL, (std::string("-") + ((PetscObject)f)->prefix + "net_fuse").c_str(), "0"));
  Trace tf = Train(f, x, t, c.outs, 2);
  EXPECT_FALSE(Fused(f, "a2"));
  EXPECT_FALSE(Fused(f, "c2"));
  ExpectSame(tf, tu, 1e-12, "set up again with -net_fuse 0");
  DDT(DDNetDestroy(&f));
  DDT(DDNetDestroy(&u));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  ForgetOptions();
}

/* a fused relu layer given an input other than its convolution's output: a clear error, not a silent result */
TEST(Fusion, FusedLayerGivenAnotherInput)
{
  const Case &c = cases[1];
  DDNet       f = MakeNet(c.text, true);
  DDTensor    x = RandomInput(c.xshape, Split(5), DD_FLOAT32, 51), t = RandomInput(c.tshape, Split(5), DD_FLOAT32, 52);
  (void)Train(f, x, t, c.outs, 1);
  ASSERT_TRUE(Fused(f, "a2"));
  DDLayer  a2;
  DDTensor other, y;
  DDT(DDNetGetLayer(f, "a2", &a2));
  DDT(DDTensorDuplicate(a2->setupin[0], &other));
  DDT(DDLayerGetOutput(a2, &y));
  std::string msg;
  EXPECT_NE(Catch([&] { return DDLayerForward(a2, other, y); }, &msg), PETSC_SUCCESS);
  EXPECT_NE(msg.find("-net_fuse"), std::string::npos) << msg;
  DDT(DDTensorDestroy(&other));
  DDT(DDNetDestroy(&f));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  ForgetOptions();
}

/*
  Dense layers: c1 -> a1 (sigmoid) -> avg pool, d1 -> a2 (tanh), d2 -> a3 (relu) fuse (the dense
  layers apply the activation after the GEMM, and after the sum over the input-feature workers
  when a spatial split reaches the flattened features); d3 -> a4 does not (d3 also feeds the
  concatenation k), nor d4 -> a5 (prelu), nor d5 -> a6 (d5 on /cpu/ref, a6 on the default backend).
*/
static const char *NetDense = "-net_inputs x,target\n"
                              "-net_layers c1,a1,s,flat,d1,a2,d2,a3,d3,a4,k,d4,a5,d5,a6,out,loss\n"
                              "-c1_layer_type conv\n-c1_layer_conv_out_channels 3\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
                              "-a1_layer_type activation\n-a1_layer_activation_type sigmoid\n"
                              "-s_layer_type pool\n-s_layer_pool_type avg\n-s_layer_pool_kernel 2\n"
                              "-flat_layer_type flatten\n"
                              "-d1_layer_type affine\n-d1_layer_affine_out_features 12\n"
                              "-a2_layer_type activation\n-a2_layer_activation_type tanh\n"
                              "-d2_layer_type affine\n-d2_layer_affine_out_features 10\n"
                              "-a3_layer_type activation\n"
                              "-d3_layer_type affine\n-d3_layer_affine_out_features 8\n"
                              "-a4_layer_type activation\n-a4_layer_activation_type tanh\n"
                              "-k_layer_type concat\n-k_layer_inputs a4,d3\n"
                              "-d4_layer_type affine\n-d4_layer_affine_out_features 6\n"
                              "-a5_layer_type activation\n-a5_layer_activation_type prelu\n"
                              "-d5_layer_type affine\n-d5_layer_affine_out_features 6\n-d5_dd_backend /cpu/ref\n"
                              "-a6_layer_type activation\n-a6_layer_activation_type tanh\n"
                              "-out_layer_type affine\n-out_layer_affine_out_features 1\n"
                              "-loss_layer_type loss\n-loss_layer_inputs out,target\n-loss_layer_loss_type mse\n";

/* LeNet-5 as share/ddnn/lenet5.opts builds it: conv + tanh twice, affine + tanh twice, cross-entropy */
static const char *NetLeNet5 = "-net_inputs x,label\n"
                               "-net_layers c1,a1,s2,c3,a3,s4,flat,f5,a5,f6,a6,out,loss\n"
                               "-c1_layer_type conv\n-c1_layer_conv_out_channels 6\n-c1_layer_conv_kernel 5\n"
                               "-a1_layer_type activation\n-a1_layer_activation_type tanh\n"
                               "-s2_layer_type pool\n-s2_layer_pool_type avg\n-s2_layer_pool_kernel 2\n"
                               "-c3_layer_type conv\n-c3_layer_conv_out_channels 16\n-c3_layer_conv_kernel 5\n"
                               "-a3_layer_type activation\n-a3_layer_activation_type tanh\n"
                               "-s4_layer_type pool\n-s4_layer_pool_type avg\n-s4_layer_pool_kernel 2\n"
                               "-flat_layer_type flatten\n"
                               "-f5_layer_type affine\n-f5_layer_affine_out_features 120\n"
                               "-a5_layer_type activation\n-a5_layer_activation_type tanh\n"
                               "-f6_layer_type affine\n-f6_layer_affine_out_features 84\n"
                               "-a6_layer_type activation\n-a6_layer_activation_type tanh\n"
                               "-out_layer_type affine\n-out_layer_affine_out_features 10\n"
                               "-loss_layer_type loss\n-loss_layer_inputs out,label\n-loss_layer_loss_type crossentropy\n";

struct DenseCase {
  const char               *name, *text;
  std::vector<PetscInt>     xshape;
  PetscInt                  classes; /* cross-entropy labels (N); 0: an MSE target (N, 1) */
  std::vector<const char *> fused, unfused, outs;
  std::vector<const char *> halo; /* fused, except under a spatial split where their output needs a halo (an odd split before a pooling) */
};

static const DenseCase densecases[] = {
  {"dense", NetDense, {4, 2, 8, 8}, 0, {"c1", "a1", "d1", "a2", "d2", "a3"}, {"d3", "a4", "d4", "a5", "d5", "a6", "out"}, {"a1", "a2", "a3", "a4", "a5", "a6", "out"}, {}},
  {"LeNet-5", NetLeNet5, {8, 1, 32, 32}, 10, {"c1", "a1", "f5", "a5", "f6", "a6"}, {"out"}, {"a1", "a3", "a5", "a6", "out"}, {"c3", "a3"}},
};

/* the input split over the batch (spatial = false) or the height at P ranks, and the target where the network's output will be (the batch workers; rank 0 for a spatial split, which the dense layers gather) */
static void DenseTensors(const DenseCase &c, DDDataType dt, bool spatial, bool serial, DDTensor *x, DDTensor *t)
{
  const PetscInt P = serial ? 1 : Size();
  InputSpec      xs, ts;
  xs.shape  = c.xshape;
  xs.pshape = {spatial ? 1 : P, 1, spatial ? P : 1, 1};
  ts.shape  = {c.xshape[0]};
  ts.pshape = {spatial ? 1 : P};
  if (!c.classes) {
    ts.shape.push_back(1);
    ts.pshape.push_back(1);
  } else {
    ts.lo      = 0;
    ts.hi      = (PetscReal)c.classes;
    ts.integer = true;
  }
  if (serial) {
    xs = Serial(xs);
    ts = Serial(ts);
  }
  *x = MakeInput(xs, dt, 61);
  *t = MakeInput(ts, dt, 62);
}

/* affine + relu/tanh/sigmoid and LeNet-5: fused == unfused (both dtypes, batch and spatial splits), P ranks == 1 rank (float64) */
TEST(Fusion, DenseAndLeNet5FusedEqualsUnfused)
{
  for (const DenseCase &c : densecases)
    for (bool spatial : {false, true})
      for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
        if (spatial && Size() == 1) continue;
        const std::string what = std::string(c.name) + " " + DDDataTypes[dt] + (spatial ? ", spatial split" : ", batch split") + " at " + std::to_string(Size()) + " ranks";
        const double      tol  = dt == DD_FLOAT32 ? 1e-6 : 1e-12;
        DDNet             f = MakeNet(c.text, true), u = MakeNet(c.text, false);
        DDTensor          x, t;
        DenseTensors(c, dt, spatial, false, &x, &t);
        Trace tf = Train(f, x, t, c.outs, 3), tu = Train(u, x, t, c.outs, 3);
        for (const char *n : c.fused) {
          /* at 3+ ranks a spatial split leaves some ranks an odd number of rows before a pooling, whose
             windows then need a halo in the activation's output: such pairs rightly stay apart */
          if (!spatial || Size() <= 2) EXPECT_TRUE(Fused(f, n)) << what << ": " << n << " should be fused";
          EXPECT_FALSE(Fused(u, n)) << what << ": " << n << " fused with -net_fuse 0";
        }
        for (const char *n : c.unfused) EXPECT_FALSE(Fused(f, n)) << what << ": " << n << " must not be fused";
        for (const char *n : c.halo) EXPECT_EQ(Fused(f, n), !spatial || Size() == 1) << what << ": " << n << " is fused unless its output needs a halo";
        ExpectSame(tf, tu, tol, what + ", fused vs unfused");
        if (dt == DD_FLOAT64 && Size() > 1) { /* P ranks = 1 rank, fused */
          DDNet    s = MakeNet(c.text, true);
          DDTensor xs, ts;
          DenseTensors(c, dt, spatial, true, &xs, &ts);
          Trace t1 = Train(s, xs, ts, c.outs, 3);
          for (const char *n : c.fused) EXPECT_TRUE(Fused(s, n)) << what << ": " << n << " should be fused on one rank";
          ExpectSame(tf, t1, 1e-11, what + ", fused, P ranks vs 1 rank");
          DDT(DDNetDestroy(&s));
          DDT(DDTensorDestroy(&xs));
          DDT(DDTensorDestroy(&ts));
        }
        DDT(DDNetDestroy(&f));
        DDT(DDNetDestroy(&u));
        DDT(DDTensorDestroy(&x));
        DDT(DDTensorDestroy(&t));
        ForgetOptions();
      }
}

/*
  A fused tanh (dense layer d1 -> a2): forward into another tensor copies its input, which holds
  tanh(v) already (equal to the fused output); another input is a clear error, into another tensor
  or its own output, rather than tanh applied twice; so is a new type before the network is set up
  again, after which the pair is unfused and the network equals one built with the new type
*/
TEST(Fusion, FusedTanhGivenAnotherInputOrOutput)
{
  const DenseCase &c = densecases[0];
  DDNet            f = MakeNet(c.text, true);
  DDTensor         x, t;
  DenseTensors(c, DD_FLOAT64, false, false, &x, &t);
  (void)Train(f, x, t, c.outs, 1);
  ASSERT_TRUE(Fused(f, "a2"));
  DDLayer  a2;
  DDTensor other, y, y2;
  DDT(DDNetGetLayer(f, "a2", &a2));
  DDT(DDLayerGetOutput(a2, &y));
  DDT(DDTensorDuplicate(y, &y2));
  DDT(DDLayerForward(a2, a2->setupin[0], y2));
  EXPECT_EQ(GatherAll(y2), GatherAll(y)) << "a fused tanh's forward into another tensor";
  DDT(DDTensorDuplicate(a2->setupin[0], &other));
  DDT(DDTensorSet(other, 0.5));
  std::string msg;
  EXPECT_NE(Catch([&] { return DDLayerForward(a2, other, y2); }, &msg), PETSC_SUCCESS);
  EXPECT_NE(msg.find("-net_fuse"), std::string::npos) << msg;
  EXPECT_NE(Catch([&] { return DDLayerForward(a2, other, y); }, &msg), PETSC_SUCCESS);
  EXPECT_NE(msg.find("-net_fuse"), std::string::npos) << msg;
  DDT(DDTensorDestroy(&other));
  DDT(DDTensorDestroy(&y2));
  /* a new type: Forward refuses it until the network is set up again, which unfuses a gelu (as a network built with it) */
  DDT(DDLayerActivationSetType(a2, DD_ACT_GELU));
  EXPECT_NE(Catch([&] { return DDNetForward(f, 2, std::vector<DDTensor>{x, t}.data()); }, &msg), PETSC_SUCCESS);
  EXPECT_NE(msg.find("set the network up again"), std::string::npos) << msg;
  DDNet   u = MakeNet(c.text, false);
  DDLayer ua2;
  DDT(DDNetGetLayer(u, "a2", &ua2));
  DDT(DDLayerActivationSetType(ua2, DD_ACT_GELU));
  Trace tf = Train(f, x, t, c.outs, 2), tu = Train(u, x, t, c.outs, 2);
  EXPECT_FALSE(Fused(f, "a2"));
  EXPECT_FALSE(Fused(f, "d1"));
  EXPECT_TRUE(Fused(f, "a3"));
  ExpectSame(tf, tu, 1e-12, "a fused tanh made gelu, set up again");
  DDT(DDNetDestroy(&u));
  DDT(DDNetDestroy(&f));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  ForgetOptions();
}

/* whether a fused convolution's kernels write the activation (a oneDNN post-op) */
static bool KernelFused(DDNet net, const char *name)
{
  DDLayer l;
  DDT(DDNetGetLayer(net, name, &l));
  return LayerViewText(l).find("written by the kernel") != std::string::npos;
}

/*
  -dd_dnnl_eltwise_postop (float32, /cpu/dnnl): the convolutions fused with tanh and sigmoid write
  them in oneDNN's post-op, whose approximations differ from ours in the last bits: the first
  step's loss, activations and gradients agree to 1e-5 (not the parameters after Adam steps, whose
  normalized updates amplify last-bit differences of near-zero gradients); without the option the
  layer applies our kernels after the convolution and the results are bitwise (FusedEqualsUnfused)
*/
TEST(Fusion, DnnlEltwisePostOp)
{
#if !DDNN_WITH_DNNL
  GTEST_SKIP() << "built without oneDNN";
#endif
  DDT(PetscOptionsSetValue(NULL, "-dd_dnnl_eltwise_postop", "1"));
  for (const Case &c : cases) {
    const std::string what = std::string(c.name) + " float32 with -dd_dnnl_eltwise_postop at " + std::to_string(Size()) + " ranks";
    DDNet             f = MakeNet(c.text, true), u = MakeNet(c.text, false);
    DDTensor          x = RandomInput(c.xshape, Split(c.xshape.size()), DD_FLOAT32, 71), t = RandomInput(c.tshape, Split(c.tshape.size()), DD_FLOAT32, 72);
    Trace             tf = Train(f, x, t, c.outs, 1), tu = Train(u, x, t, c.outs, 1);
    EXPECT_TRUE(KernelFused(f, c.name[0] == '2' ? "c2" : "c3")) << what << ": the tanh should be oneDNN's post-op";
    ExpectSame(tf, tu, 1e-5, what + ", fused vs unfused", false);
    DDT(DDNetDestroy(&f));
    DDT(DDNetDestroy(&u));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&t));
    ForgetOptions();
  }
  DDT(PetscOptionsClearValue(NULL, "-dd_dnnl_eltwise_postop"));
}

/*
  The model (src/model): a fused activation's forward runs in its producer, which applies the
  activation layer's own kernel in place after its own: a fused relu or tanh is priced forward as
  the unfused one, and a fused tanh backward as a relu (a streaming pass reading 1 - y^2), not as a tanh. Synthetic fits: every
  memory-bound kind 1e-10 s per byte, "activation-tanh" 1e-8 s per byte (the activations: no constant).
*/
TEST(Fusion, ModelPricesFusedActivations)
{
  const char *bname;
  char        host[256] = {0};
  DDT(DDBackendGetDefault(&bname));
  gethostname(host, sizeof(host) - 1);
  for (char *c = host; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  std::ostringstream m;
  m << "ddnn-model-cache 16\nhost " << host << "\ncomm 1e-6 1e-10\n";
  const char *kinds[] = {"activation", "activation-elu", "activation-gelu", "activation-identity", "activation-leakyrelu", "activation-sigmoid", "activation-silu", "activation-softplus", "activation-tanh", "affine", "batchnorm", "concat", "conv", "convtranspose", "flatten", "halo", "loss", "loss-crossentropy", "pool", "pool-avg", "pool-avg-blocked", "upsample"};
  for (const char *dt : {"float32", "float64"}) {
    for (const char *k : kinds)
      for (const char *d : {"f", "b"}) {
        const bool g = !strcmp(k, "conv") || !strcmp(k, "convtranspose") || !strcmp(k, "affine");
        if (!strcmp(k, "halo")) m << "kernel " << bname << " " << dt << " halo " << d << " 1e-6 1e-10\n";
        else m << "kernel " << bname << " " << dt << " " << k << " " << d << " " << (strncmp(k, "activation", 10) ? 1e-6 : 0.0) << " " << (g ? 1e-10 : !strcmp(k, "activation-tanh") ? 1e-8 : 1e-10) << "\n";
      }
    for (const char *k : {"affine-wgrad", "conv-wgrad", "convtranspose-wgrad"}) m << "kernel " << bname << " " << dt << " " << k << " b 1e-6 1e-10\n";
    for (const char *k : {"tensoraxpy", "tensorzero"}) m << "kernel " << bname << " " << dt << " " << k << " f 1e-6 1e-10\n";
    for (const char *k : {"activation", "activation-rows"})
      for (const char *d : {"f", "b"}) m << "runcost " << bname << " " << dt << " " << k << " " << d << " 1e-9\n";
  }
  const std::string file = std::string("/tmp/ddnn_test18_") + std::to_string(getppid()) + "_model.txt";
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) std::ofstream(file) << m.str();
  MPI_Barrier(PETSC_COMM_WORLD);
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  PetscBool cal;
  DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT64, &cal));
  ASSERT_TRUE(cal) << "the synthetic model cache lacks a kernel the model needs";

  const DenseCase &c = densecases[0]; /* d1 -> a2 (tanh), d2 -> a3 (relu) fused; a4 (tanh) not */
  DDNet            f = MakeNet(c.text, true), u = MakeNet(c.text, false);
  DDTensor         x, t, xs[2];
  DenseTensors(c, DD_FLOAT64, false, false, &x, &t);
  xs[0] = x;
  xs[1] = t;
  DDT(DDNetSetUp(f, 2, xs));
  DDT(DDNetSetUp(u, 2, xs));
  auto times = [&](DDNet net, const char *name) {
    PetscInt  n, i = -1;
    PetscReal v[4];
    PetscBool ok;
    DDT(DDNetGetNumLayers(net, &n));
    for (PetscInt k = 0; k < n; k++) {
      DDLayer     l;
      const char *nm;
      DDT(DDNetGetLayerByIndex(net, k, &l, &nm));
      if (!strcmp(nm, name)) i = k;
    }
    DDT(DDNetGetLayerModelTime(net, i, &v[0], &v[1], &v[2], &v[3], &ok));
    EXPECT_TRUE(ok) << name;
    std::vector<double> r = {v[0], v[2]}; /* compute forward, backward */
    MPI_Allreduce(MPI_IN_PLACE, r.data(), 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    return r;
  };
  ASSERT_TRUE(Fused(f, "a2") && Fused(f, "a3") && !Fused(f, "a4"));
  const auto ft = times(f, "a2"), ut = times(u, "a2"), fr = times(f, "a3"), ur = times(u, "a3"), f4 = times(f, "a4");
  EXPECT_GT(ut[0], 0);
  EXPECT_NEAR(ft[0], ut[0], 1e-9 * ut[0]) << "a fused tanh's forward runs in its producer, with the same kernel";
  EXPECT_LT(ft[1], 0.1 * ut[1]) << "a fused tanh's backward is priced as a relu's, not a tanh's";
  EXPECT_GT(ur[0], 0);
  EXPECT_NEAR(fr[0], ur[0], 1e-9 * ur[0]) << "a fused relu's forward runs in its producer, in place, with the same kernel";
  EXPECT_NEAR(fr[1], ur[1], 1e-9 * ur[1]) << "a fused relu's backward is unchanged";
  EXPECT_GT(f4[1], 0.5 * f4[0]) << "an unfused tanh's backward is priced as a tanh";
  DDT(DDNetDestroy(&f));
  DDT(DDNetDestroy(&u));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  ForgetOptions();
  DDT(PetscOptionsClearValue(NULL, "-dd_model_cache"));
  DDT(DDModelReset());
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) std::remove(file.c_str());
}

/*
  A nan reaching a fused relu stays nan, as in the unfused network and in PyTorch (relu = clamp_min:
  nan passes). oneDNN's relu post-op (max(v, 0), the constant second) turned it into 0, so a nan in
  a simulation's state fed to the network came out finite in inference; the convolution now applies
  our relu in place after its kernel unless -dd_dnnl_eltwise_postop asks for the post-op. c1 (3x3)
  -> a1 (relu, fused: c2 is 1x1 and needs no halo) -> c2; the input holds a nan and an inf.
*/
TEST(Fusion, FusedReluKeepsNan)
{
  static const char *text = "-net_inputs x\n-net_layers c1,a1,c2\n"
                            "-c1_layer_type conv\n-c1_layer_conv_out_channels 4\n-c1_layer_conv_kernel 3\n-c1_layer_conv_padding 1\n"
                            "-a1_layer_type activation\n"
                            "-c2_layer_type conv\n-c2_layer_conv_out_channels 2\n-c2_layer_conv_kernel 1\n";
  const std::vector<PetscInt> shape = {2, 3, 8, 6};
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    const std::string what = std::string(DDDataTypes[dt]) + " at " + std::to_string(Size()) + " ranks";
    DDNet             f = MakeNet(text, true), u = MakeNet(text, false);
    DDTensor          x = RandomInput(shape, Split(shape.size()), dt, 51);
    {
      std::vector<double> g = GatherAll(x);
      g[3 * 48 + 2 * 6 + 3] = NAN;      /* sample 1, channel 0, row 2, column 3 */
      g[4 * 48 + 5 * 6 + 1] = INFINITY; /* sample 1, channel 1, row 5, column 1 */
      SetValues(x, g);
    }
    std::vector<std::vector<double>> out[2];
    for (int k = 0; k < 2; k++) {
      DDNet    net = k ? u : f;
      DDTensor y;
      DDT(DDNetSetUp(net, 1, &x));
      DDT(DDNetForward(net, 1, &x));
      for (const char *o : {"a1", "c2"}) {
        DDT(DDNetGetLayerOutput(net, o, &y));
        out[k].push_back(GatherAll(y));
      }
    }
    EXPECT_TRUE(Fused(f, "a1")) << what;
    EXPECT_FALSE(Fused(u, "a1")) << what;
    for (size_t o = 0; o < 2; o++) {
      size_t nans = 0, differ = 0;
      ASSERT_EQ(out[0][o].size(), out[1][o].size());
      for (size_t i = 0; i < out[0][o].size(); i++) {
        const double a = out[0][o][i], b = out[1][o][i];
        if (std::isnan(b)) nans++;
        if (std::isnan(a) != std::isnan(b) || (!std::isnan(b) && a != b)) differ++;
      }
      EXPECT_GT(nans, 0u) << what << ": the unfused " << (o ? "c2" : "a1") << " keeps the nan";
      EXPECT_EQ(differ, 0u) << what << ": " << (o ? "c2" : "a1") << " fused differs from unfused (nan where it is not, or another value)";
    }
    DDT(DDNetDestroy(&f));
    DDT(DDNetDestroy(&u));
    DDT(DDTensorDestroy(&x));
    ForgetOptions();
  }
}
