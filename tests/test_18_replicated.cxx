/*
  Replicated weights (issue 16 item 6; DDNetSetWeightMode(), src/net/replicas.cxx): a network that
  keeps its weights' replicas and sums their gradients once per backward, bucketed, equals the
  same network broadcasting them on every call (paper 000 sec. 4.1: the same operator pair, B and
  its adjoint) -- outputs, loss, every gradient, after SGD and Adam steps, after DDNetLoadWeights(),
  a checkpoint restart and a user's write of a parameter -- and the one-rank network; U-Net-like
  and LeNet-like nets on spatial, sample and hybrid splits, a channel-split convolution,
  unbalanced pieces; and it makes one broadcast per worker group after a step and one all-reduce
  per group per backward, no per-layer broadcast. The data-parallel mode (the replicas updated by
  the optimizer where they live) equals the broadcast mode the same ways, with SGD, Adam, AdamW,
  clipping, a gradient scaled by the user, accumulated gradients, two optimizers and a user's
  optimizer type, and its copies equal their parameters bitwise after training.
*/
#include "layertest.hpp"
#include <ddnn/private/ddnetimpl.h>
#include <ddnn/private/ddoptimizerimpl.h>
#include <limits>
#include <unistd.h>

using namespace ddtest;

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test18_") + std::to_string(getppid()) + "_" + name;
}

/* a U-Net-like net: conv (no bias: a batchnorm follows, the bias's gradient would be rounding noise), batchnorm, relu, pool, conv, prelu, upsample, concat, conv (bias), loss */
static const char *kUNet = "-net_inputs x,target -net_layers c1,n1,a1,p1,c2,a2,u1,k1,c3,loss "
                           "-c1_layer_type conv -c1_layer_conv_out_channels 3 -c1_layer_conv_kernel 3 -c1_layer_conv_padding 1 -c1_layer_conv_bias false "
                           "-n1_layer_type batchnorm -a1_layer_type activation "
                           "-p1_layer_type pool -p1_layer_pool_type max -p1_layer_pool_kernel 2 "
                           "-c2_layer_type conv -c2_layer_conv_out_channels 4 -c2_layer_conv_kernel 3 -c2_layer_conv_padding 1 "
                           "-a2_layer_type activation -a2_layer_activation_type prelu "
                           "-u1_layer_type upsample -u1_layer_upsample_scale 2 -u1_layer_upsample_mode linear "
                           "-k1_layer_type concat -k1_layer_inputs u1,a1 "
                           "-c3_layer_type conv -c3_layer_conv_out_channels 1 -c3_layer_conv_kernel 3 -c3_layer_conv_padding 1 "
                           "-loss_layer_type loss -loss_layer_inputs c3,target";

/* a LeNet-like net: conv, tanh, avg pool, flatten, affine, affine, loss */
static const char *kLeNet = "-net_inputs x,target -net_layers c1,a1,s1,flat,f1,a2,f2,loss "
                            "-c1_layer_type conv -c1_layer_conv_out_channels 3 -c1_layer_conv_kernel 3 "
                            "-a1_layer_type activation -a1_layer_activation_type tanh "
                            "-s1_layer_type pool -s1_layer_pool_type avg -s1_layer_pool_kernel 2 "
                            "-flat_layer_type flatten -f1_layer_type affine -f1_layer_affine_out_features 5 "
                            "-a2_layer_type activation -a2_layer_activation_type tanh "
                            "-f2_layer_type affine -f2_layer_affine_out_features 2 "
                            "-loss_layer_type loss -loss_layer_inputs f2,target";

/* a convolution over output-channel workers (-c1_layer_conv_channel_workers), then a norm over the channel split */
static const char *kChannel = "-net_inputs x,target -net_layers c1,n1,c2,loss "
                              "-c1_layer_type conv -c1_layer_conv_out_channels 4 -c1_layer_conv_kernel 3 -c1_layer_conv_padding 1 -c1_layer_conv_channel_workers 2 "
                              "-n1_layer_type batchnorm "
                              "-c2_layer_type conv -c2_layer_conv_out_channels 2 -c2_layer_conv_kernel 3 -c2_layer_conv_padding 1 "
                              "-loss_layer_type loss -loss_layer_inputs c2,target";

/* a convolution over input-channel workers (the input's channel split), a norm, a convolution */
static const char *kEmpty = "-net_inputs x,target -net_layers c1,n1,c2,loss "
                            "-c1_layer_type conv -c1_layer_conv_out_channels 4 -c1_layer_conv_kernel 3 -c1_layer_conv_padding 1 "
                            "-n1_layer_type batchnorm "
                            "-c2_layer_type conv -c2_layer_conv_out_channels 2 -c2_layer_conv_kernel 3 -c2_layer_conv_padding 1 "
                            "-loss_layer_type loss -loss_layer_inputs c2,target";

/*
  A network from the options above, in the given weight mode, under a prefix per options string
  and variant (the options database holds a few hundred options: the same ones are reused); variant
  'w': -net_weights replicated sets the mode; 's': parameters from seed 7
*/
static DDNet MakeNet(const char *opts, DDNetWeightMode mode, char variant = 'a')
{
  DDNet       net;
  const bool  byoption = variant == 'w';
  std::string pre = std::string("r18") + (opts == kUNet ? "u" : opts == kLeNet ? "l" : opts == kEmpty ? "e" : "c") + variant + "_", s;
  std::string o   = std::string(opts) + (byoption ? " -net_weights replicated" : "") + (variant == 's' ? " -net_seed 7" : "");
  /* prefix every option */
  for (size_t i = 0; i < o.size(); i++) {
    if (o[i] == '-' && (i == 0 || o[i - 1] == ' ')) s += "-" + pre;
    else s += o[i];
  }
  DDT(PetscOptionsInsertString(NULL, s.c_str()));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, pre.c_str()));
  DDT(DDNetSetFromOptions(net));
  if (!byoption) DDT(DDNetSetWeightMode(net, mode));
  return net;
}

static std::vector<std::vector<double>> All(PetscInt n, DDTensor *ts)
{
  std::vector<std::vector<double>> r;
  for (PetscInt i = 0; i < n; i++) r.push_back(GatherAll(ts[i]));
  return r;
}

static PetscInt64 Fallbacks(DDNet net)
{
  PetscInt64 f = 0;
  for (auto &nd : net->impl->nodes)
    for (PetscInt k = 0; k < nd.layer->nreplicas; k++) f += nd.layer->replicas[k].nfallback;
  return f;
}

static PetscInt Replicas(DDNet net)
{
  PetscInt f = 0;
  for (auto &nd : net->impl->nodes) f += nd.layer->nreplicas;
  return f;
}

struct Trace {
  std::vector<double>                           losses;
  std::vector<std::vector<double>>              out;     /* the layer before the loss, per step */
  std::vector<std::vector<std::vector<double>>> grads;   /* every gradient, per step */
  std::vector<std::vector<double>>              params;  /* after the steps */
  std::vector<PetscInt64>                       bcasts, reduces; /* the replicated mode's collectives per step */
  std::vector<PetscInt64>                       stepped, synced; /* the data-parallel mode's buckets per optimizer step: updated in place / refreshed from the root */
  double                                        drift = 0;       /* data-parallel: the output's change when every replica is refreshed from its root after the steps (0: the copies equal w bitwise) */
  PetscInt64                                    checks = 0;      /* data-parallel: the copies checked against their parameters (every step here) */
  PetscInt64                                    fallbacks = 0;
  PetscInt                                      nreplicas = 0;
  PetscInt64                                    early = 0;       /* bucket all-reduces started before a backward's last layer */
};

/* a user's optimizer type without the steparrays op: p -= lr g (the data-parallel mode refreshes the copies after each of its steps) */
static PetscErrorCode PlainSetUp(DDOptimizer opt)
{
  opt->nstate = 0;
  return PETSC_SUCCESS;
}
static PetscErrorCode PlainStep(DDOptimizer opt, PetscReal lr)
{
  for (size_t i = 0; i < opt->params->size(); i++) {
    DDTensor p = (*opt->params)[i], g = (*opt->grads)[i];
    PetscCall(DDTensorAXPY(p, -lr, g));
  }
  return PETSC_SUCCESS;
}
static PetscErrorCode CreatePlain(DDOptimizer opt)
{
  opt->ops->setup = PlainSetUp;
  opt->ops->step  = PlainStep;
  return PETSC_SUCCESS;
}

/* more ways to train (Train()'s last argument) */
struct Extra {
  double clip   = 0;     /* DDOptimizerSetClipNorm() */
  bool   gscale = false; /* in step 1, the gradients halved between the backward and the optimizer step */
  bool   split  = false; /* two optimizers, one per half of the parameters (learning rates 0.05 and 0.02) */
  bool   accumulate = false; /* two backwards per step (the gradients accumulate) */
  bool   reload = false; /* a checkpoint saved after step 0 is loaded into the same network and optimizer after step 1 */
  double bucketmb = -1;  /* >= 0: DDNetSetWeightBucketSize() */
};

/*
  Trains `steps` steps (opttype) on fixed random batches; every `restart` steps (0: never) the
  network is saved to a checkpoint and a new one (same mode) loads it and goes on; loadw: after the
  first step, a weights file written by another network replaces the weights; write: after the
  second step the first parameter is overwritten with DDTensorSetValuesGlobal(); writer (>= 0):
  in the second step, between its two forwards, that rank alone rewrites its pieces of every
  parameter through DDTensorGetArray().
*/
static Trace Train(const char *opts, const char *outname, const InputSpec &xs, const InputSpec &ts, DDDataType dt, DDNetWeightMode mode, const char *opttype, int steps, int restart = 0, bool loadw = false, bool write = false, PetscMPIInt writer = -1, const Extra &ex = Extra())
{
  Trace       T;
  DDTensor    x = MakeInput(xs, dt, 5), t = MakeInput(ts, dt, 6);
  DDTensor    in[2] = {x, t};
  DDNet       net   = NULL;
  DDOptimizer opt = NULL, opt2 = NULL;
  PetscInt    n;
  DDTensor   *ps, *gs;
  std::string ck = Tmp("ck.h5"), wf = Tmp("w.h5");
  auto        make = [&]() {
    net = MakeNet(opts, mode);
    DDT(DDNetSetWeightCheckInterval(net, 1)); /* data-parallel: the copies compared with their parameters before every step */
    if (ex.bucketmb >= 0) DDT(DDNetSetWeightBucketSize(net, ex.bucketmb));
    DDT(DDNetSetUp(net, 2, in));
    DDT(DDNetGetParameters(net, &n, &ps, &gs));
    for (int o = 0; o < (ex.split ? 2 : 1); o++) {
      DDOptimizer &q = o ? opt2 : opt;
      DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &q));
      DDT(DDOptimizerSetType(q, opttype));
      DDT(DDOptimizerSetLearningRate(q, o ? 0.02 : 0.05));
      if (std::string(opttype) == "sgd") DDT(DDOptimizerSetMomentum(q, 0.9, PETSC_FALSE));
      if (std::string(opttype) != "plain") DDT(DDOptimizerSetWeightDecay(q, 1e-3));
      if (ex.clip > 0) DDT(DDOptimizerSetClipNorm(q, ex.clip));
      if (!ex.split) DDT(DDOptimizerSetUp(q, n, ps, gs));
      else if (o == 0) DDT(DDOptimizerSetUp(q, n / 2, ps, gs));
      else DDT(DDOptimizerSetUp(q, n - n / 2, ps + n / 2, gs + n / 2));
    }
  };
  make();
  T.nreplicas = Replicas(net);
  if (loadw) { /* another network's weights (other seed), written in the broadcast mode */
    DDNet o = MakeNet(opts, DD_NET_WEIGHTS_BROADCAST, 's');
    DDT(DDNetSetUp(o, 2, in));
    DDT(DDNetSaveWeights(o, wf.c_str()));
    DDT(DDNetDestroy(&o));
  }
  for (int s = 0; s < steps; s++) {
    PetscReal  l;
    DDTensor   y;
    PetscInt64 b0 = net->impl->nreplbcast, r0 = net->impl->nreplreduce, st0 = net->impl->nreplstepped, sy0 = net->impl->nreplsync;
    DDT(DDTensorSetRandomGlobal(x, 100 + s, -1, 1));
    DDT(DDNetForward(net, 2, in));
    if (writer >= 0 && s == 1 && Rank() == writer) { /* this rank alone writes its pieces of every parameter (not collective), between two forwards: nothing else changed them */
      for (PetscInt i = 0; i < n; i++) {
        PetscInt m;
        void    *a;
        DDT(DDTensorGetLocalStorageSize(ps[i], &m));
        DDT(DDTensorGetArray(ps[i], &a));
        for (PetscInt j = 0; j < m; j++) {
          if (dt == DD_FLOAT64) ((double *)a)[j] = 0.5 * ((double *)a)[j] + 0.01;
          else ((float *)a)[j] = 0.5f * ((float *)a)[j] + 0.01f;
        }
        DDT(DDTensorRestoreArray(ps[i], &a));
      }
    }
    DDT(DDNetForward(net, 2, in)); /* a second forward with the same weights: no broadcast (but for the write above) */
    DDT(DDNetGetLoss(net, &l));
    DDT(DDNetGetLayerOutput(net, outname, &y));
    T.losses.push_back(l);
    T.out.push_back(GatherAll(y));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    if (ex.accumulate) DDT(DDNetBackward(net, NULL));
    T.grads.push_back(All(n, gs));
    T.bcasts.push_back(net->impl->nreplbcast - b0);
    T.reduces.push_back(net->impl->nreplreduce - r0);
    if (ex.gscale && s == 1)
      for (PetscInt i = 0; i < n; i++) DDT(DDTensorScale(gs[i], 0.5));
    DDT(DDOptimizerStep(opt));
    if (opt2) DDT(DDOptimizerStep(opt2));
    T.stepped.push_back(net->impl->nreplstepped - st0);
    T.synced.push_back(net->impl->nreplsync - sy0);
    if (ex.reload && s == 0) DDT(DDCheckpointSave(net, opt, ck.c_str()));
    if (ex.reload && s == 1) DDT(DDCheckpointLoad(net, opt, ck.c_str()));
    if (loadw && s == 0) DDT(DDNetLoadWeights(net, wf.c_str()));
    if (write && s == 1) {
      PetscInt N;
      DDT(DDTensorGetSize(ps[0], &N));
      std::vector<double> v(N);
      for (PetscInt i = 0; i < N; i++) v[i] = 0.1 * std::sin(1.0 + i);
      SetValues(ps[0], v);
    }
    if (restart && (s + 1) % restart == 0 && s + 1 < steps) {
      T.fallbacks += Fallbacks(net);
      DDT(DDCheckpointSave(net, opt, ck.c_str()));
      DDT(DDOptimizerDestroy(&opt));
      DDT(DDOptimizerDestroy(&opt2));
      DDT(DDNetDestroy(&net));
      make();
      DDT(DDCheckpointLoad(net, opt, ck.c_str()));
    }
  }
  T.params = All(n, ps);
  T.fallbacks += Fallbacks(net);
  T.checks = net->impl->nreplchecks;
  T.early  = net->impl->nreplearly;
  { /* the copies the data-parallel mode updated in place against a refresh from the roots: every parameter's state bumped, the same output */
    DDTensor y;
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLayerOutput(net, outname, &y));
    std::vector<double> a = GatherAll(y);
    for (PetscInt i = 0; i < n; i++) DDT(DDTensorScale(ps[i], 1.0));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetGetLayerOutput(net, outname, &y));
    T.drift = RelDiff(GatherAll(y), a);
  }
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDOptimizerDestroy(&opt2));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
  if (Rank() == 0) {
    unlink(ck.c_str());
    unlink(wf.c_str());
  }
  return T;
}

/* RelDiff() of two gradients, relative to at least 1e-3 (the nets' gradients are O(0.1-1)): a gradient that is zero up to rounding (a
   bias before a normalization: entries of 1e-17) differs by its rounding, not relatively */
static double GradDiff(const std::vector<double> &a, const std::vector<double> &b)
{
  double den = 0;
  for (double v : b) den = std::max(den, std::fabs(v));
  return RelDiff(a, b) * (den > 0 ? den : 1) / std::max(den, 1e-3);
}

static void ExpectSame(const Trace &a, const Trace &b, double tol, const std::string &what)
{
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t s = 0; s < a.losses.size(); s++) {
    EXPECT_NEAR(a.losses[s], b.losses[s], tol * (1 + std::fabs(b.losses[s]))) << what << ": loss of step " << s;
    EXPECT_LE(RelDiff(a.out[s], b.out[s]), tol) << what << ": output of step " << s;
    ASSERT_EQ(a.grads[s].size(), b.grads[s].size()) << what;
    for (size_t i = 0; i < a.grads[s].size(); i++) EXPECT_LE(GradDiff(a.grads[s][i], b.grads[s][i]), tol) << what << ": gradient " << i << " of step " << s;
  }
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (size_t i = 0; i < a.params.size(); i++) EXPECT_LE(RelDiff(a.params[i], b.params[i]), tol) << what << ": parameter " << i << " after the steps";
}

/* the replicated mode's collectives: one broadcast per group at the first forward after a step, one all-reduce per group per backward */
static void ExpectCounts(const Trace &r, const Trace &bc, PetscInt64 groups, const std::string &what)
{
  EXPECT_EQ(r.fallbacks, 0) << what << ": a layer broadcast its weights itself";
  for (size_t s = 0; s < r.bcasts.size(); s++) {
    EXPECT_EQ(r.bcasts[s], groups) << what << ": bucket broadcasts in step " << s;
    EXPECT_EQ(r.reduces[s], groups) << what << ": bucket all-reduces in step " << s;
    EXPECT_EQ(bc.bcasts[s], 0) << what;
    EXPECT_EQ(bc.reduces[s], 0) << what;
  }
}

struct Case {
  const char *name, *opts, *out;
  InputSpec   xs, ts;
  PetscInt64  groups; /* expected worker groups of this rank */
};

static std::vector<Case> Cases()
{
  const int         W = Size();
  std::vector<Case> c;
  const PetscInt64  g = W > 1 ? 1 : 0; /* every layer on one split of all ranks: one group */
  { /* spatial split of H, unbalanced */
    InputSpec x{{2, 1, 4 * W + 4, 8}, {1, 1, W, 1}, {}, {}};
    x.lx = {{}, {}, std::vector<PetscInt>(W, 4), {}};
    x.lx[2][0] += 4;
    InputSpec t = x;
    t.lx.clear(); /* the convolutions' outputs are balanced */
    c.push_back({"unet spatial (unbalanced)", kUNet, "c3", x, t, g});
  }
  { /* sample split */
    InputSpec x{{2 * W, 1, 8, 8}, {W, 1, 1, 1}, {}, {}}, t = x;
    c.push_back({"unet sample", kUNet, "c3", x, t, g});
  }
  { /* hybrid: samples x W */
    int       a = W % 2 == 0 ? 2 : 1, b = W / a;
    InputSpec x{{2 * a, 1, 8, 4 * b}, {a, 1, 1, b}, {}, {}}, t = x;
    c.push_back({"unet hybrid", kUNet, "c3", x, t, g});
  }
  { /* LeNet-like on a sample split, unbalanced (3 samples on rank 0) */
    InputSpec x{{W + 2, 1, 8, 8}, {W, 1, 1, 1}, {}, {}}, t{{W + 2, 2}, {W, 1}, {}, {}};
    x.lx = {std::vector<PetscInt>(W, 1), {}, {}, {}};
    x.lx[0][0] += 2;
    t.lx = {x.lx[0], {}};
    c.push_back({"lenet sample (unbalanced)", kLeNet, "f2", x, t, g});
  }
  if (W >= 4) { /* the first conv over 2 output-channel workers, each piece's weights replicated over 2 sample workers: a group per piece */
    InputSpec x{{4, 2, 6, 6}, {2, 1, 1, 1}, {0, 1}, {}}, t{{4, 2, 6, 6}, {2, 1, 1, 1}, {0, 1}, {}};
    c.push_back({"channel-split conv", kChannel, "c2", x, t, -1});
    /* the input's channels split 3 | 0 (an empty weight piece) and its samples over 2: the convolution's weights on 2 channel pieces, each replicated over the sample workers */
    InputSpec xe{{4, 3, 6, 6}, {2, 2, 1, 1}, {0, 1, 2, 3}, {{}, {3, 0}, {}, {}}}, te{{4, 2, 6, 6}, {2, 1, 1, 1}, {0, 2}, {}};
    c.push_back({"input-channel split with an empty piece", kEmpty, "c2", xe, te, -1});
  }
  return c;
}

TEST(Replicated, EqualsBroadcastSGDAndAdam)
{
  for (auto &c : Cases())
    for (const char *opt : {"sgd", "adam"}) {
      std::string what = std::string(c.name) + ", " + opt;
      Trace       r = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_REPLICATED, opt, 3);
      Trace       b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, opt, 3);
      ExpectSame(r, b, 1e-12, what);
      if (c.groups >= 0) ExpectCounts(r, b, c.groups, what);
      else { /* several groups: as many broadcasts after a step as all-reduces per backward, every step alike, none in broadcast mode */
        EXPECT_EQ(r.fallbacks, 0) << what;
        EXPECT_FALSE(AllTrue(r.bcasts[0] == 0)) << what << ": no group anywhere"; /* ranks holding only empty pieces have none */
        for (size_t s = 0; s < r.bcasts.size(); s++) {
          EXPECT_EQ(r.bcasts[s], r.bcasts[0]) << what;
          EXPECT_EQ(r.reduces[s], r.bcasts[0]) << what;
        }
      }
      EXPECT_EQ(r.nreplicas, b.nreplicas) << what;
      if (Size() > 1) EXPECT_TRUE(AllTrue(r.nreplicas > 0 || c.groups != 0)) << what;
    }
}

TEST(Replicated, PRanksEqualsOneRank)
{
  for (auto &c : Cases()) {
    if (c.groups < 0) continue; /* needs 4 ranks by construction */
    Trace r = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_REPLICATED, "adam", 3);
    Trace s = Train(c.opts, c.out, Serial(c.xs), Serial(c.ts), DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "adam", 3);
    ExpectSame(r, s, 1e-11, std::string(c.name) + " on P ranks vs 1");
  }
}

TEST(Replicated, Float32EqualsBroadcast)
{
  auto  c = Cases()[1];
  Trace r = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT32, DD_NET_WEIGHTS_REPLICATED, "adam", 2);
  Trace b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT32, DD_NET_WEIGHTS_BROADCAST, "adam", 2);
  ExpectSame(r, b, Size() <= 2 ? 0 : 1e-5, "float32 unet sample"); /* at 2 ranks a + b either way: bitwise */
}

TEST(Replicated, AfterLoadWeightsCheckpointAndUserWrites)
{
  for (auto &c : Cases()) {
    if (c.groups < 0) continue;
    std::string what = c.name;
    { /* DDNetLoadWeights() after step 0, a DDTensorSetValuesGlobal() after step 1 */
      Trace r = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_REPLICATED, "sgd", 4, 0, true, true);
      Trace b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "sgd", 4, 0, true, true);
      ExpectSame(r, b, 1e-12, what + ", weights loaded and written");
      ExpectCounts(r, b, c.groups, what + ", weights loaded and written");
    }
    { /* checkpoint restarts every 2 steps against an uninterrupted broadcast run */
      Trace r = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_REPLICATED, "adam", 4, 2);
      Trace b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "adam", 4);
      ExpectSame(r, b, 1e-12, what + ", checkpoint restart");
      EXPECT_EQ(r.fallbacks, 0) << what;
    }
    break; /* one case is enough here */
  }
}

/* a parameter written on one rank only (DDTensorGetArray() there: not collective) is refreshed on
   every rank of its group (the group agrees on the stale buckets), as the broadcast mode sees it:
   no hang, no collective matched against another, the same trace */
TEST(Replicated, ParameterWrittenOnOneRankOnly)
{
  for (auto &c : Cases()) {
    if (c.groups < 0) continue;
    for (PetscMPIInt w = 0; w < std::min<PetscMPIInt>(Size(), 2); w++) {
      std::string what = std::string(c.name) + ", written on rank " + std::to_string(w);
      Trace       r    = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_REPLICATED, "sgd", 3, 0, false, false, w);
      Trace       b    = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "sgd", 3, 0, false, false, w);
      ExpectSame(r, b, 1e-12, what);
    }
  }
}

TEST(Replicated, ModeSwitchOnASetUpNetAndOptions)
{
  auto     c = Cases()[1];
  DDTensor x = MakeInput(c.xs, DD_FLOAT64, 5), t = MakeInput(c.ts, DD_FLOAT64, 6);
  DDTensor in[2] = {x, t};
  DDNet    a = MakeNet(c.opts, DD_NET_WEIGHTS_BROADCAST), b = MakeNet(c.opts, DD_NET_WEIGHTS_BROADCAST, 'w'); /* b: -net_weights replicated */
  DDNetWeightMode m;
  DDT(DDNetGetWeightMode(b, &m));
  EXPECT_EQ(m, DD_NET_WEIGHTS_REPLICATED);
  DDT(DDNetSetUp(a, 2, in));
  DDT(DDNetSetUp(b, 2, in));
  DDT(DDNetSetWeightMode(a, DD_NET_WEIGHTS_REPLICATED)); /* on a set-up network: at once */
  for (int s = 0; s < 2; s++) {
    PetscReal la, lb;
    DDT(DDNetForward(a, 2, in));
    DDT(DDNetForward(b, 2, in));
    DDT(DDNetGetLoss(a, &la));
    DDT(DDNetGetLoss(b, &lb));
    EXPECT_NEAR(la, lb, Size() <= 2 ? 0 : 1e-12 * std::fabs(lb));
    DDT(DDNetZeroGradients(a));
    DDT(DDNetZeroGradients(b));
    DDT(DDNetBackward(a, NULL));
    DDT(DDNetBackward(b, NULL));
    PetscInt  n;
    DDTensor *pa, *ga, *gb;
    DDT(DDNetGetParameters(a, &n, &pa, &ga));
    DDT(DDNetGetParameters(b, &n, NULL, &gb));
    /* MPI_Reduce and MPI_Allreduce add a + b alike; at more ranks they may associate differently */
    for (PetscInt i = 0; i < n; i++) EXPECT_LE(RelDiff(GatherAll(ga[i]), GatherAll(gb[i])), Size() <= 2 ? 0 : 1e-12) << "gradient " << i;
    for (PetscInt i = 0; i < n; i++) DDT(DDTensorAXPY(pa[i], -0.1, ga[i]));
    DDTensor *pb;
    DDT(DDNetGetParameters(b, &n, &pb, NULL));
    for (PetscInt i = 0; i < n; i++) DDT(DDTensorAXPY(pb[i], -0.1, gb[i]));
    DDT(DDNetSetWeightMode(a, s ? DD_NET_WEIGHTS_REPLICATED : DD_NET_WEIGHTS_BROADCAST)); /* and back */
  }
  DDT(DDNetDestroy(&a));
  DDT(DDNetDestroy(&b));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/*
  The data-parallel mode (DD_NET_WEIGHTS_DATAPARALLEL): every worker updates its copy with the
  optimizer, no broadcast after a step. Its collectives: one all-reduce per group per backward; a
  broadcast per group at the first forward (the copies made) and a refresh with the optimizer's
  state per group at the first step (no state on the workers yet), none after; every later step
  updates every group's copies in place. The copies equal w bitwise (drift 0).
*/
static void ExpectDataParallelCounts(const Trace &d, PetscInt64 groups, const std::string &what)
{
  EXPECT_EQ(d.fallbacks, 0) << what << ": a layer broadcast its weights itself";
  EXPECT_EQ(d.drift, 0) << what << ": a copy differs from its parameter";
  if (groups > 0) EXPECT_EQ(d.checks, (PetscInt64)d.bcasts.size()) << what << ": the copies checked before every step";
  for (size_t s = 0; s < d.bcasts.size(); s++) {
    EXPECT_EQ(d.bcasts[s], s == 0 ? groups : 0) << what << ": bucket broadcasts in the forwards of step " << s;
    EXPECT_EQ(d.reduces[s], groups) << what << ": bucket all-reduces in step " << s;
    EXPECT_EQ(d.synced[s], s == 0 ? groups : 0) << what << ": buckets refreshed at step " << s;
    EXPECT_EQ(d.stepped[s], s == 0 ? 0 : groups) << what << ": buckets updated in place at step " << s;
  }
}

TEST(DataParallel, EqualsBroadcastSGDAdamAdamW)
{
  for (auto &c : Cases())
    for (const char *opt : {"sgd", "adam", "adamw"}) {
      std::string what = std::string(c.name) + ", " + opt;
      Trace       d = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_DATAPARALLEL, opt, 3);
      Trace       b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, opt, 3);
      ExpectSame(d, b, 1e-12, what);
      if (c.groups >= 0) ExpectDataParallelCounts(d, c.groups, what);
      else { /* several groups, or none on ranks holding only empty pieces: as many everywhere as at step 0 */
        EXPECT_EQ(d.drift, 0) << what;
        EXPECT_FALSE(AllTrue(d.reduces[0] == 0)) << what << ": no group anywhere";
        for (size_t s = 1; s < d.bcasts.size(); s++) {
          EXPECT_EQ(d.bcasts[s], 0) << what;
          EXPECT_EQ(d.synced[s], 0) << what;
          EXPECT_EQ(d.stepped[s], d.reduces[0]) << what;
        }
      }
    }
}

TEST(DataParallel, PRanksEqualsOneRankAndFloat32)
{
  for (auto &c : Cases()) {
    if (c.groups < 0) continue;
    Trace d = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_DATAPARALLEL, "adam", 3);
    Trace s = Train(c.opts, c.out, Serial(c.xs), Serial(c.ts), DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "adam", 3);
    ExpectSame(d, s, 1e-11, std::string(c.name) + " on P ranks vs 1");
  }
  auto  c = Cases()[1];
  Trace d = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT32, DD_NET_WEIGHTS_DATAPARALLEL, "adam", 3);
  Trace b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT32, DD_NET_WEIGHTS_BROADCAST, "adam", 3);
  ExpectSame(d, b, Size() <= 2 ? 0 : 1e-5, "float32 unet sample"); /* at 2 ranks 0 + a + b = a + b either way: bitwise */
  ExpectDataParallelCounts(d, c.groups, "float32 unet sample");
}

/* the data-parallel mode's training (Train()'s arguments from opttype on) against the broadcast mode's: the same trace, and copies equal to their parameters */
template <class... Args>
static Trace AgainstBroadcast(const Case &c, const std::string &what, const char *opttype, Args... args)
{
  Trace d = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_DATAPARALLEL, opttype, args...);
  Trace b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, opttype, args...);
  ExpectSame(d, b, 1e-12, what);
  EXPECT_EQ(d.drift, 0) << what << ": a copy differs from its parameter";
  return d;
}

/* every way a parameter, its gradient or the optimizer's state changes outside the in-place update
   leads to a refresh with the optimizer's state, and the training equals the broadcast mode's */
TEST(DataParallel, RefreshedWhenChangedOutsideTheUpdate)
{
  auto c = Cases()[0];
  { /* DDNetLoadWeights() after step 0, a DDTensorSetValuesGlobal() after step 1: the forwards refresh the weights */
    Trace d = AgainstBroadcast(c, "weights loaded and written", "sgd", 4, 0, true, true);
    for (size_t s = 1; s < 4; s++) EXPECT_EQ(d.bcasts[s], s <= 2 ? c.groups : 0) << "step " << s;
  }
  { /* checkpoint restarts every 2 steps: the new optimizer's first step refreshes */
    Trace d = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_DATAPARALLEL, "adam", 4, 2);
    Trace b = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "adam", 4);
    ExpectSame(d, b, 1e-12, "checkpoint restart");
    EXPECT_EQ(d.drift, 0);
    EXPECT_EQ(d.synced[2], c.groups);
    EXPECT_EQ(d.stepped[3], c.groups);
  }
  for (PetscMPIInt w = 0; w < std::min<PetscMPIInt>(Size(), 2); w++) { /* one rank alone rewrites its pieces between two forwards */
    AgainstBroadcast(c, "written on rank " + std::to_string(w), "sgd", 3, 0, false, false, w);
  }
  { /* the gradients halved by the user between the backward and the step (step 1), and clipped by the optimizer (every step) */
    Extra ex;
    ex.gscale = true;
    ex.clip   = 0.05;
    Trace d = AgainstBroadcast(c, "gradients scaled and clipped", "adam", 4, 0, false, false, -1, ex);
    EXPECT_EQ(d.synced[1], c.groups) << "the scaled gradient: a refresh";
    EXPECT_EQ(d.stepped[2], c.groups) << "clipping alone: in place";
    EXPECT_EQ(d.stepped[3], c.groups);
  }
  { /* gradients accumulated over two backwards: the second sum holds the first */
    Extra ex;
    ex.accumulate = true;
    Trace d = AgainstBroadcast(c, "gradients accumulated", "adam", 3, 0, false, false, -1, ex);
    EXPECT_EQ(d.stepped[2], c.groups);
  }
  { /* a checkpoint loaded into the running network and optimizer: the weights (forward) and the optimizer state (step) refreshed */
    Extra ex;
    ex.reload = true;
    Trace d = AgainstBroadcast(c, "checkpoint loaded in place", "adam", 4, 0, false, false, -1, ex);
    EXPECT_EQ(d.bcasts[2], c.groups) << "the loaded weights";
    EXPECT_EQ(d.synced[2], c.groups) << "the loaded optimizer state";
    EXPECT_EQ(d.stepped[3], c.groups);
  }
  { /* two optimizers, each over half of the parameters */
    Extra ex;
    ex.split = true;
    Trace d = AgainstBroadcast(c, "two optimizers", "adam", 3, 0, false, false, -1, ex);
    EXPECT_EQ(d.stepped[2], 2 * c.groups) << "each optimizer's step updates the group's copies of its half";
  }
  { /* an optimizer type without steparrays: the copies refreshed after every step */
    DDT(DDOptimizerRegister("plain", CreatePlain));
    Trace d = AgainstBroadcast(c, "a user's optimizer", "plain", 3);
    for (size_t s = 0; s < 3; s++) {
      EXPECT_EQ(d.synced[s], c.groups);
      EXPECT_EQ(d.stepped[s], 0);
    }
  }
}

/* a copy changed behind the network's back on one rank (as a rank whose arithmetic differs would):
   the check before the next step finds it, on every rank of the group, and names the group */
TEST(DataParallel, DivergedCopiesAreAnError)
{
  if (Size() == 1) return; /* no other rank to differ from */
  auto     c = Cases()[1];
  DDTensor x = MakeInput(c.xs, DD_FLOAT64, 5), t = MakeInput(c.ts, DD_FLOAT64, 6);
  DDTensor in[2] = {x, t};
  DDNet    net = MakeNet(c.opts, DD_NET_WEIGHTS_DATAPARALLEL);
  DDT(DDNetSetWeightCheckInterval(net, 2));
  PetscInt every;
  DDT(DDNetGetWeightCheckInterval(net, &every));
  EXPECT_EQ(every, 2);
  DD_EXPECT_ERROR(DDNetSetWeightCheckInterval(net, -1), PETSC_ERR_ARG_OUTOFRANGE, "must be >= 0");
  { /* an interval that differs between ranks is an error at set-up, on every rank (else a rank that does not hash would read as diverged copies) */
    DDNet other = MakeNet(c.opts, DD_NET_WEIGHTS_DATAPARALLEL, 'k');
    DDT(DDNetSetWeightCheckInterval(other, Rank() == 1 ? 3 : 2));
    DD_EXPECT_ERROR(DDNetSetUp(other, 2, in), PETSC_ERR_ARG_INCOMP, "-net_weights_check");
    DDT(DDNetDestroy(&other));
  }
  DDT(DDNetSetUp(net, 2, in));
  PetscInt    n;
  DDTensor   *ps, *gs;
  DDOptimizer opt;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetType(opt, "adam"));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  for (int s = 0; s < 4; s++) { /* in step: checked before steps 2 and 4 */
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
  }
  EXPECT_EQ(net->impl->nreplchecks, 2);
  /* rank 1 (a worker, not the weights' root) changes one entry of its copy of the first kept replica */
  if (Rank() == 1)
    for (auto &nd : net->impl->nodes)
      if (nd.layer->nreplicas > 0) {
        DDTensor wh = nd.layer->replicas[0].wh;
        PetscInt m;
        DDT(DDTensorGetLocalStorageSize(wh, &m));
        ASSERT_GT(m, 0);
        ((double *)wh->array)[m / 2] += 1e-3;
        break;
      }
  for (int s = 0; s < 2; s++) { /* step 5: not checked; step 6: checked */
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    if (s == 0) DDT(DDOptimizerStep(opt));
    else DD_EXPECT_ERROR(DDOptimizerStep(opt), PETSC_ERR_PLIB, "Before optimizer step 6, the data-parallel weight copies of worker group (ranks 0,1");
  }
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

TEST(DataParallel, OptionViewAndModeSwitch)
{
  auto     c = Cases()[1];
  DDTensor x = MakeInput(c.xs, DD_FLOAT64, 5), t = MakeInput(c.ts, DD_FLOAT64, 6);
  DDTensor in[2] = {x, t};
  DDT(PetscOptionsSetValue(NULL, "-r18dp_net_weights", "dataparallel"));
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "r18dp_"));
  DDT(DDNetSetFromOptions(net));
  DDT(PetscOptionsClearValue(NULL, "-r18dp_net_weights"));
  DDNetWeightMode m;
  DDT(DDNetGetWeightMode(net, &m));
  EXPECT_EQ(m, DD_NET_WEIGHTS_DATAPARALLEL);
  DDT(DDNetDestroy(&net));
  /* a set-up network switched to the mode and back: the hooks come and go with it */
  net = MakeNet(c.opts, DD_NET_WEIGHTS_BROADCAST);
  DDT(DDNetSetUp(net, 2, in));
  PetscInt  n;
  DDTensor *ps, *gs;
  DDT(DDNetGetParameters(net, &n, &ps, &gs));
  DDOptimizer opt;
  DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
  DDT(DDOptimizerSetUp(opt, n, ps, gs));
  for (DDNetWeightMode mode : {DD_NET_WEIGHTS_DATAPARALLEL, DD_NET_WEIGHTS_BROADCAST, DD_NET_WEIGHTS_DATAPARALLEL}) {
    DDT(DDNetSetWeightMode(net, mode));
    PetscObject hook;
    DDT(PetscObjectQuery((PetscObject)ps[0], DD_PARAMETER_MIRROR, &hook));
    if (Size() > 1 || mode == DD_NET_WEIGHTS_BROADCAST) EXPECT_EQ(hook != NULL, mode == DD_NET_WEIGHTS_DATAPARALLEL);
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    DDT(DDOptimizerStep(opt));
  }
  DDTensor p0 = ps[0];
  DDT(DDNetDestroy(&net)); /* before the optimizer (which keeps its parameters): it then finds no hook on them */
  PetscObject hook;
  DDT(PetscObjectQuery((PetscObject)p0, DD_PARAMETER_MIRROR, &hook));
  EXPECT_EQ(hook, nullptr);
  /* and stepping tensors no network uses any more is an error, not a silent update */
  DD_EXPECT_ERROR(DDOptimizerStep(opt), PETSC_ERR_ARG_WRONGSTATE, "no longer its layer's");
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/*
  Buckets cut by DDNetSetWeightBucketSize() (DistributedDataParallel's): their sums start during the
  backward, and training equals one bucket per group and the broadcast mode -- bitwise at 2 ranks
  (0 + a + b = a + b whatever the cut) -- in both modes that keep replicas, with as many all-reduces
  per backward as buckets, some of them started before the backward's last layer.
*/
TEST(Replicated, BucketsOverlapTheBackward)
{
  for (auto &c : Cases())
    for (DDNetWeightMode mode : {DD_NET_WEIGHTS_REPLICATED, DD_NET_WEIGHTS_DATAPARALLEL})
      for (double mb : {1e-9, 0.0004}) { /* a bucket per parameter piece; about 52 doubles per bucket */
        std::string what = std::string(c.name) + (mode == DD_NET_WEIGHTS_REPLICATED ? ", replicated" : ", data-parallel") + ", cap " + std::to_string(mb) + " MiB";
        Extra       ex;
        ex.bucketmb = mb;
        ex.accumulate = true; /* two backwards per step: the second's sums add to the first's */
        /* SGD: Adam would turn the rounding-level gradient of a bias before a normalization into whole steps */
        Trace cut  = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, mode, "sgd", 3, 0, false, false, -1, ex);
        ex.bucketmb = -1;
        Trace one  = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, mode, "sgd", 3, 0, false, false, -1, ex);
        Trace bc   = Train(c.opts, c.out, c.xs, c.ts, DD_FLOAT64, DD_NET_WEIGHTS_BROADCAST, "sgd", 3, 0, false, false, -1, ex);
        ExpectSame(cut, one, Size() <= 2 ? 0 : 1e-12, what + " against one bucket per group");
        ExpectSame(cut, bc, 1e-12, what + " against the broadcast mode");
        EXPECT_EQ(cut.fallbacks, 0) << what;
        if (mode == DD_NET_WEIGHTS_DATAPARALLEL) EXPECT_EQ(cut.drift, 0) << what << ": a copy differs from its parameter";
        for (size_t s = 0; s < cut.reduces.size(); s++) {
          EXPECT_EQ(cut.reduces[s], cut.reduces[0]) << what << ": all-reduces per step";
          EXPECT_EQ(one.reduces[s], one.reduces[0]) << what;
        }
        if (c.groups > 0) { /* one group: more buckets than one, each summed once per backward (two per step), and some started early */
          EXPECT_EQ(one.reduces[0], 2 * c.groups) << what;
          EXPECT_GT(cut.reduces[0], one.reduces[0]) << what << ": the cap cut no bucket";
          EXPECT_GT(cut.early, 0) << what << ": no sum started during the backward";
          EXPECT_EQ(one.early, 0) << what << ": without a cap the sums start after the last layer";
        }
        if (c.groups == 0) EXPECT_EQ(cut.reduces[0] + cut.early, 0) << what << ": one rank needs no sum";
        if (c.groups < 0) EXPECT_EQ(one.early, 0) << what << ": without a cap the sums start after the last layer";
      }
}

TEST(ReplicatedBadInput, BucketSize)
{
  auto     c = Cases()[1];
  DDTensor x = MakeInput(c.xs, DD_FLOAT64, 5), t = MakeInput(c.ts, DD_FLOAT64, 6);
  DDTensor in[2] = {x, t};
  DDNet    net = MakeNet(c.opts, DD_NET_WEIGHTS_REPLICATED);
  PetscReal mb;
  DDT(DDNetGetWeightBucketSize(net, &mb));
  EXPECT_EQ(mb, 0); /* one bucket per worker group */
  DD_EXPECT_ERROR(DDNetSetWeightBucketSize(net, -1), PETSC_ERR_ARG_OUTOFRANGE, "must be finite and >= 0");
  DD_EXPECT_ERROR(DDNetSetWeightBucketSize(net, std::numeric_limits<double>::quiet_NaN()), PETSC_ERR_ARG_OUTOFRANGE, "-net_weights_bucket_mb");
  DDT(DDNetGetWeightBucketSize(net, &mb));
  EXPECT_EQ(mb, 0);
  if (Size() > 1) { /* a cap that differs between ranks would cut a group's buckets differently: an error at set-up, on every rank */
    DDT(DDNetSetWeightBucketSize(net, Rank() == 1 ? 1 : 2));
    DD_EXPECT_ERROR(DDNetSetUp(net, 2, in), PETSC_ERR_ARG_INCOMP, "-net_weights_bucket_mb");
  }
  DDT(DDNetDestroy(&net));
  /* the option, and a set-up network's buckets cut again when it is set */
  DDT(PetscOptionsSetValue(NULL, "-r18b_net_weights_bucket_mb", "1e-9"));
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "r18b_"));
  DDT(DDNetSetFromOptions(net));
  DDT(PetscOptionsClearValue(NULL, "-r18b_net_weights_bucket_mb"));
  DDT(DDNetGetWeightBucketSize(net, &mb));
  EXPECT_EQ(mb, 1e-9);
  DDT(DDNetDestroy(&net));
  net = MakeNet(c.opts, DD_NET_WEIGHTS_REPLICATED);
  DDT(DDNetSetUp(net, 2, in));
  for (double cap : {0.0, 1e-9, 25.0}) { /* one bucket; one per parameter; one again (the net's weights are far below 25 MiB) */
    DDT(DDNetSetWeightBucketSize(net, cap));
    PetscInt64 r0 = net->impl->nreplreduce;
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
    if (Size() > 1) EXPECT_EQ(net->impl->nreplreduce - r0 > 1, cap == 1e-9) << "cap " << cap;
    std::string text = ViewedText([&](PetscViewer v) { return DDNetView(net, v); });
    EXPECT_EQ(text.find("gradient buckets of at most") != std::string::npos, cap > 0) << text;
  }
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

/* a backward that stops on an error (here -dd_check_finite at its last layer) with bucket sums in
   flight: DDNetZeroGradients() drops them, and the next step's gradients equal a fresh network's */
TEST(ReplicatedBadInput, FailedBackwardWithSumsInFlight)
{
  if (Size() == 1) return; /* nothing in flight on one rank */
  auto     c = Cases()[1];
  DDTensor x = MakeInput(c.xs, DD_FLOAT64, 5), t = MakeInput(c.ts, DD_FLOAT64, 6);
  DDTensor in[2] = {x, t};
  DDNet    a = MakeNet(c.opts, DD_NET_WEIGHTS_REPLICATED), b = MakeNet(c.opts, DD_NET_WEIGHTS_BROADCAST);
  DDT(DDNetSetWeightBucketSize(a, 1e-9));
  DDT(DDNetSetCheckFinite(a, PETSC_TRUE));
  DDT(DDNetSetUp(a, 2, in));
  DDT(DDNetSetUp(b, 2, in));
  PetscInt  n, nb;
  DDTensor *ps, *gs, *pb, *gb;
  DDT(DDNetGetParameters(a, &n, &ps, &gs));
  DDT(DDNetGetParameters(b, &nb, &pb, &gb));
  ASSERT_EQ(n, nb);
  DDT(DDNetForward(a, 2, in));
  DDT(DDNetZeroGradients(a));
  DDT(DDTensorScale(gs[0], std::numeric_limits<double>::quiet_NaN())); /* the first layer's weight gradient: checked after its backward, the last */
  PetscInt64 early = a->impl->nreplearly;
  DD_EXPECT_ERROR(DDNetBackward(a, NULL), PETSC_ERR_FP, "Non-finite value (nan) in the gradient of parameter");
  EXPECT_GT(a->impl->nreplearly, early) << "no sum was in flight";
  for (DDNet net : {a, b}) {
    DDT(DDNetZeroGradients(net));
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetBackward(net, NULL));
  }
  for (PetscInt i = 0; i < n; i++) EXPECT_LE(RelDiff(GatherAll(gs[i]), GatherAll(gb[i])), 1e-12) << "gradient " << i;
  DDT(DDNetDestroy(&a));
  DDT(DDNetDestroy(&b));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&t));
}

TEST(ReplicatedBadInput, UnknownMode)
{
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DD_EXPECT_ERROR(DDNetSetWeightMode(net, (DDNetWeightMode)5), PETSC_ERR_ARG_OUTOFRANGE, "Unknown weight mode 5");
  DDT(DDNetDestroy(&net));
}
