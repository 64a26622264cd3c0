/*
  DDLAYERBATCHNORM: hand-checked numbers; a naive serial formula; P ranks equal 1 rank (outputs,
  input and parameter gradients) over batch, spatial, channel and mixed partitions, unbalanced
  and subset partitions, N x C and 1-3 spatial dimensions, training and evaluation; running
  statistics after several Forwards; channels-last and blocked (float32, bs 16) inputs against
  plain float64; inputs and outputs with halos; accuracy with a large mean; finite differences;
  the adjoint test of the linear parts; options; bad input.
*/
#include "layertest.hpp"

using namespace ddtest;

struct BNCfg {
  PetscReal momentum = 0.1, eps = 1e-5;
  PetscBool affine   = PETSC_TRUE;
  bool      uniform  = true; /* random weight and bias instead of ones and zeros */
  bool      training = true;
};

static std::function<void(DDLayer)> Configure(const BNCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
    DDT(DDLayerBatchNormSetMomentum(l, c.momentum));
    DDT(DDLayerBatchNormSetEpsilon(l, c.eps));
    DDT(DDLayerBatchNormSetAffine(l, c.affine));
    if (c.uniform) DDT(DDLayerSetInitType(l, DD_INIT_UNIFORM));
    DDT(DDLayerSetTraining(l, c.training ? PETSC_TRUE : PETSC_FALSE));
  };
}

static void CheckAgainstSerial(const BNCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64, double tol = 1e-12)
{
  for (bool tr : {true, false}) {
    RunResult par = RunLayer(Configure(c), {in}, dt, 11, true, tr), ser = RunLayer(Configure(c), {Serial(in)}, dt, 11, true, tr);
    ExpectSameRun(par, ser, tol, what + (tr ? " (training)" : " (evaluation)"));
  }
}

/* naive batch norm of a global C-order array: per channel mean and biased variance over all other dimensions */
static void NaiveBatchNorm(const std::vector<PetscInt> &shape, const std::vector<double> &x, const std::vector<double> &w, const std::vector<double> &b, double eps, std::vector<double> &y, std::vector<double> &mean, std::vector<double> &var)
{
  const PetscInt N = shape[0], C = shape[1];
  PetscInt       S = 1;
  for (size_t k = 2; k < shape.size(); k++) S *= shape[k];
  mean.assign(C, 0);
  var.assign(C, 0);
  y.assign(x.size(), 0);
  for (PetscInt c = 0; c < C; c++) {
    long double s = 0, q = 0;
    for (PetscInt n = 0; n < N; n++)
      for (PetscInt i = 0; i < S; i++) s += x[(n * C + c) * S + i];
    mean[c] = (double)(s / (N * S));
    for (PetscInt n = 0; n < N; n++)
      for (PetscInt i = 0; i < S; i++) q += ((long double)x[(n * C + c) * S + i] - mean[c]) * ((long double)x[(n * C + c) * S + i] - mean[c]);
    var[c] = (double)(q / (N * S));
    for (PetscInt n = 0; n < N; n++)
      for (PetscInt i = 0; i < S; i++) y[(n * C + c) * S + i] = w[c] * (x[(n * C + c) * S + i] - mean[c]) / std::sqrt(var[c] + eps) + b[c];
  }
}

TEST(BatchNorm, HandCheckedTinyCase)
{
  /* N x C = 4 x 2: channel 0 holds 1, 2, 3, 4 and channel 1 holds 2, 4, 6, 8; the batch split over up to 4 ranks */
  const int P = std::min(Size(), 4);
  InputSpec in;
  in.shape  = {4, 2};
  in.pshape = {P, 1};
  DDTensor x = MakeInput(in, DD_FLOAT64, 1);
  double   xv[8] = {1, 2, 2, 4, 3, 6, 4, 8};
  DDT(DDTensorSetValuesGlobal(x, xv));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
  DDT(DDLayerSetUp(l, x));
  DDTensor y, rm, rv;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yv = GatherAll(y);
  const double        s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(5.0 + 1e-5);
  for (int n = 0; n < 4; n++) {
    EXPECT_NEAR(yv[2 * n], (xv[2 * n] - 2.5) / s0, 1e-14);
    EXPECT_NEAR(yv[2 * n + 1], (xv[2 * n + 1] - 5.0) / s1, 1e-14);
  }
  DDT(DDLayerBatchNormGetRunningStatistics(l, &rm, &rv));
  std::vector<double> m = GatherAll(rm), v = GatherAll(rv);
  EXPECT_NEAR(m[0], 0.1 * 2.5, 1e-15);
  EXPECT_NEAR(m[1], 0.1 * 5.0, 1e-15);
  EXPECT_NEAR(v[0], 0.9 * 1 + 0.1 * (5.0 / 3.0), 1e-15); /* unbiased: 5/4 * 4/3 */
  EXPECT_NEAR(v[1], 0.9 * 1 + 0.1 * (20.0 / 3.0), 1e-15);
  /* evaluation: the running statistics */
  DDT(DDLayerSetTraining(l, PETSC_FALSE));
  DDT(DDLayerForward(l, x, y));
  yv = GatherAll(y);
  for (int n = 0; n < 4; n++) {
    EXPECT_NEAR(yv[2 * n], (xv[2 * n] - m[0]) / std::sqrt(v[0] + 1e-5), 1e-14);
    EXPECT_NEAR(yv[2 * n + 1], (xv[2 * n + 1] - m[1]) / std::sqrt(v[1] + 1e-5), 1e-14);
  }
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(BatchNorm, MatchesNaiveFormula)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    InputSpec in;
    in.shape  = {3, 5, 4 * ps[0] + 1, 3 * ps[1] + 2};
    in.pshape = {1, 1, ps[0], ps[1]};
    DDTensor x = MakeInput(in, DD_FLOAT64, 4);
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(BNCfg())(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerInitializeParameters(l, 3));
    DDTensor  y, *ps_;
    PetscInt  np;
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDLayerForward(l, x, y));
    DDT(DDLayerGetParameters(l, &np, &ps_));
    ASSERT_EQ(np, 2);
    std::vector<double> yr, mean, var, xg = GatherAll(x), w = GatherAll(ps_[0]), b = GatherAll(ps_[1]);
    NaiveBatchNorm(in.shape, xg, w, b, 1e-5, yr, mean, var);
    EXPECT_LT(RelDiff(GatherAll(y), yr), 1e-13);
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(BatchNorm, SpatialBatchChannelAndMixedPartitions)
{
  int W = Size();
  for (int D = 0; D <= 3; D++) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, D + 2, f);
    /* at most 7 partitions per dimension count, spread over the list, with all-spatial first and all-batch last */
    std::vector<size_t> pick;
    for (size_t i = 0; i < f.size(); i += (f.size() + 5) / 6) pick.push_back(i);
    if (pick.back() != f.size() - 1) pick.push_back(f.size() - 1);
    for (size_t i : pick) {
      auto     &ps = f[i];
      InputSpec in;
      in.shape  = {2 * ps[0] + 1, 2 * ps[1] + 1};
      in.pshape = {ps[0], ps[1]};
      for (int j = 0; j < D; j++) {
        in.shape.push_back(2 * ps[2 + j] + (D == 3 ? 1 : 3));
        in.pshape.push_back(ps[2 + j]);
      }
      char what[64];
      snprintf(what, sizeof(what), "%dD partition %d x %d x ...", D, (int)ps[0], (int)ps[1]);
      CheckAgainstSerial(BNCfg(), in, what);
    }
  }
  /* without affine parameters */
  InputSpec in;
  in.shape  = {W + 1, 3, 5};
  in.pshape = {W, 1, 1};
  BNCfg c;
  c.affine = PETSC_FALSE;
  CheckAgainstSerial(c, in, "no affine");
}

TEST(BatchNorm, UnbalancedAndSubsetPartitions)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in;
  in.shape  = {2, 3, 4, 5 * W};
  in.pshape = {1, 1, 1, W};
  in.lx     = {{}, {}, {}, std::vector<PetscInt>(W, 5)};
  in.lx[3][0] += 3;
  in.lx[3][W - 1] -= 3;
  CheckAgainstSerial(BNCfg(), in, "unbalanced spatial");
  /* batch and channel unbalanced */
  InputSpec ub;
  ub.shape  = {3, 2 * W + 1, 4};
  ub.pshape = W % 2 ? std::vector<PetscInt>{1, W, 1} : std::vector<PetscInt>{2, W / 2, 1};
  ub.lx     = {{}, std::vector<PetscInt>(ub.pshape[1], 2), {}};
  ub.lx[1][0] += 2 * W + 1 - 2 * ub.pshape[1];
  if (ub.pshape[0] == 2) ub.lx[0] = {2, 1};
  CheckAgainstSerial(BNCfg(), ub, "unbalanced batch and channel");
  /* a subset: the last W-1 ranks */
  InputSpec sub;
  sub.shape  = {2, 3, 3 * W};
  sub.pshape = {1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  CheckAgainstSerial(BNCfg(), sub, "subset of ranks");
  /* a subset split over channels and space */
  if (W >= 5) {
    InputSpec s2;
    s2.shape  = {2, 4, 6};
    s2.pshape = {1, 2, 2};
    s2.ranks  = {4, 2, 3, 1};
    CheckAgainstSerial(BNCfg(), s2, "subset, channel x spatial, permuted ranks");
  }
}

/* runs several training Forwards on inputs drawn with the seeds, returns the running statistics and the final evaluation output */
static void RunningStats(const InputSpec &in, DDDataType dt, std::vector<double> &rm, std::vector<double> &rv, std::vector<double> &yeval, std::vector<std::vector<double>> *xs = nullptr)
{
  DDTensor x = MakeInput(in, dt, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  BNCfg c;
  c.momentum = 0.3;
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  DDTensor y, m, v;
  DDT(DDLayerGetOutput(l, &y));
  for (int it = 0; it < 3; it++) {
    DDT(DDTensorSetRandomGlobal(x, 100 + it, -1 + it, 2 + 3 * it));
    if (xs) xs->push_back(GatherAll(x));
    DDT(DDLayerForward(l, x, y));
  }
  DDT(DDLayerBatchNormGetRunningStatistics(l, &m, &v));
  rm = GatherAll(m);
  rv = GatherAll(v);
  DDT(DDLayerSetTraining(l, PETSC_FALSE));
  DDT(DDLayerForward(l, x, y));
  yeval = GatherAll(y);
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(BatchNorm, RunningStatisticsAfterSeveralForwards)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  std::vector<double> rm1, rv1, ye1;
  InputSpec           base;
  base.shape = {5, 4, 7};
  std::vector<std::vector<double>> xs;
  RunningStats(Serial(base), DD_FLOAT64, rm1, rv1, ye1, &xs);
  /* the serial values against the formula */
  {
    std::vector<double> m(4, 0.0), v(4, 1.0), yr, mean, var;
    for (auto &xg : xs) {
      NaiveBatchNorm(base.shape, xg, std::vector<double>(4, 1.0), std::vector<double>(4, 0.0), 1e-5, yr, mean, var);
      for (int c = 0; c < 4; c++) {
        m[c] = 0.7 * m[c] + 0.3 * mean[c];
        v[c] = 0.7 * v[c] + 0.3 * var[c] * 35.0 / 34.0;
      }
    }
    EXPECT_LT(RelDiff(rm1, m), 1e-14);
    EXPECT_LT(RelDiff(rv1, v), 1e-14);
  }
  for (auto &ps : f) {
    InputSpec in = base;
    in.shape     = {5, 4, 7};
    in.pshape    = ps;
    if (ps[0] > 5 || ps[1] > 4 || ps[2] > 7) continue;
    std::vector<double> rm, rv, ye;
    RunningStats(in, DD_FLOAT64, rm, rv, ye);
    EXPECT_LT(RelDiff(rm, rm1), 1e-14) << "running mean, partition " << ps[0] << "x" << ps[1] << "x" << ps[2];
    EXPECT_LT(RelDiff(rv, rv1), 1e-14) << "running variance";
    EXPECT_LT(RelDiff(ye, ye1), 1e-13) << "evaluation output";
  }
}

/* RunLayer with the input in the blocked format of block size bs */
static RunResult RunBlocked(const BNCfg &c, InputSpec in, DDDataType dt, PetscInt bs, PetscInt64 seed)
{
  RunResult R;
  in.fmt     = DD_FORMAT_PLAIN;
  DDTensor x = MakeInput(in, dt, seed + 1), dx;
  DDT(DDTensorSetBlockSize(x, bs));
  DDT(DDTensorSetFormat(x, DD_FORMAT_BLOCKED));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerInitializeParameters(l, seed));
  DDTensor y, dy;
  DDT(DDLayerGetOutput(l, &y));
  DDTensorFormat fy;
  DDT(DDTensorGetFormat(y, &fy));
  EXPECT_EQ(fy, DD_FORMAT_BLOCKED) << "the output keeps the input's format";
  DDT(DDLayerForward(l, x, y));
  R.y = GatherAll(y);
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, seed + 7, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  R.dx.push_back(GatherAll(dx));
  PetscInt  np;
  DDTensor *ps, *gs;
  DDT(DDLayerGetParameters(l, &np, &ps));
  DDT(DDLayerGetGradients(l, &np, &gs));
  for (PetscInt i = 0; i < np; i++) {
    R.params.push_back(GatherAll(ps[i]));
    R.grads.push_back(GatherAll(gs[i]));
  }
  DDT(DDTensorDestroy(&dx));
  DDT(DDTensorDestroy(&dy));
  DDT(DDTensorDestroy(&x));
  DDT(DDLayerDestroy(&l));
  return R;
}

TEST(BatchNorm, BlockedAndChannelsLastFormats)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto      ps = f[f.size() / 2];
  InputSpec in;
  in.shape  = {2, 20, 3 * ps[0] + 2, 4 * ps[1] + 1}; /* 20 channels: a full block of 16 and a partial one */
  in.pshape = {1, 1, ps[0], ps[1]};
  for (bool tr : {true, false}) {
    BNCfg c;
    c.training    = tr;
    RunResult ref = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 21, true, tr);
    ExpectSameRun(RunBlocked(c, in, DD_FLOAT32, 16, 21), ref, 2e-5, "blocked bs 16 float32 on P ranks vs plain float64");
    ExpectSameRun(RunBlocked(c, Serial(in), DD_FLOAT32, 16, 21), ref, 2e-5, "blocked bs 16 float32 serial vs plain float64");
    ExpectSameRun(RunBlocked(c, in, DD_FLOAT64, 8, 21), ref, 1e-12, "blocked bs 8 float64 vs plain float64");
    InputSpec cl = in;
    cl.fmt       = DD_FORMAT_CHANNELS_LAST;
    ExpectSameRun(RunLayer(Configure(c), {cl}, DD_FLOAT64, 21, true, tr), ref, 1e-12, "channels-last float64");
    ExpectSameRun(RunLayer(Configure(c), {cl}, DD_FLOAT32, 21, true, tr), ref, 2e-5, "channels-last float32");
  }
  /* a channel split of a blocked input (pieces that start inside a block) */
  if (W >= 2) {
    InputSpec ch;
    ch.shape  = {3, 21, 5, 4};
    ch.pshape = {1, 2, 1, 1};
    ch.lx     = {{}, {13, 8}, {}, {}};
    if (W >= 4) ch.pshape = {1, 2, 2, 1};
    RunResult ref = RunLayer(Configure(BNCfg()), {Serial(ch)}, DD_FLOAT64, 5);
    ExpectSameRun(RunBlocked(BNCfg(), ch, DD_FLOAT64, 8, 5), ref, 1e-12, "blocked, channel split at 13");
  }
}

TEST(BatchNorm, InputsAndOutputsWithHalos)
{
  int       W = Size();
  InputSpec in;
  in.shape  = {2, 3, 5, 3 * W + 1};
  in.pshape = {1, 1, 1, W};
  for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST}) {
    in.fmt     = fmt;
    DDTensor x = MakeInput(in, DD_FLOAT64, 3), xh, y, yh, dy, dyh, dx, dxh;
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(BNCfg())(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDLayerForward(l, x, y));
    std::vector<double> y0 = GatherAll(y);
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 9, -1, 1));
    DDT(DDTensorDuplicate(x, &dx));
    DDT(DDLayerBackward(l, dy, dx));
    std::vector<double> dx0 = GatherAll(dx);
    /* the same tensors with halos (and the channels of the plain one in another format) */
    PetscInt lo[4] = {0, 0, 1, 2}, hi[4] = {1, 0, 2, 1};
    DDT(DDTensorDuplicate(x, &xh));
    DDT(DDTensorSetHalo(xh, lo, hi));
    if (fmt == DD_FORMAT_PLAIN) DDT(DDTensorSetFormat(xh, DD_FORMAT_CHANNELS_LAST));
    DDT(DDTensorCopy(x, xh));
    DDT(DDLayerCreateOutput(l, &yh));
    DDT(DDTensorSetHalo(yh, hi, lo));
    DDT(DDLayerForward(l, xh, yh));
    EXPECT_LT(RelDiff(GatherAll(yh), y0), 1e-14) << "halos, format " << DDTensorFormats[fmt];
    DDT(DDTensorDuplicate(yh, &dyh));
    DDT(DDTensorCopy(dy, dyh));
    DDT(DDTensorDuplicate(xh, &dxh));
    DDT(DDLayerBackward(l, dyh, dxh));
    EXPECT_LT(RelDiff(GatherAll(dxh), dx0), 1e-14) << "halos, format " << DDTensorFormats[fmt];
    for (DDTensor *t : {&x, &xh, &yh, &dy, &dyh, &dx, &dxh}) DDT(DDTensorDestroy(t));
    DDT(DDLayerDestroy(&l));
  }
}

TEST(BatchNorm, LargeMeanIsAccurate)
{
  /* x + 1e6 normalizes like x: exact moments (Chan), not sum x^2 - (sum x)^2 / n */
  int       W = Size();
  InputSpec in;
  in.shape  = {2, 3, 8 * W};
  in.pshape = {1, 1, W};
  BNCfg c;
  c.eps           = 1e-12;
  RunResult small = RunLayer(Configure(c), {in}, DD_FLOAT64, 2);
  in.lo += 1e6;
  in.hi += 1e6;
  RunResult large = RunLayer(Configure(c), {in}, DD_FLOAT64, 2);
  EXPECT_LT(RelDiff(large.y, small.y), 1e-9);
  EXPECT_LT(RelDiff(large.dx[0], small.dx[0]), 1e-8);
}

TEST(BatchNorm, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {3, 2, 4, 3};
  in.pshape = {1, 1, Size() > 1 ? 2 : 1, 1};
  ExpectFiniteDifferences(Configure(BNCfg()), {in}, 9, 1e-7);
  BNCfg ev;
  ev.training = false;
  ExpectFiniteDifferences(Configure(ev), {in}, 10, 1e-7);
  InputSpec nc;
  nc.shape  = {5, 3};
  nc.pshape = {Size() > 1 ? 2 : 1, 1};
  ExpectFiniteDifferences(Configure(BNCfg()), {nc}, 11, 1e-7);
}

TEST(BatchNorm, AdjointTestsOfTheLinearParts)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (auto &ps : f) {
    if (ps[1] > 3) continue;
    DDTensor  x = MakeInput({{ps[0] + 1, 3, 4 * ps[2] + 1}, {ps[0], ps[1], ps[2]}, {}, {}}, DD_FLOAT64, 3);
    DDLayer   l;
    PetscReal err;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(BNCfg())(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err)); /* y is linear in (weight, bias) */
    EXPECT_LT(err, 1e-14) << "wrt weight and bias, training";
    DDT(DDLayerSetTraining(l, PETSC_FALSE));
    DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err)); /* evaluation: affine in x */
    EXPECT_LT(err, 1e-14) << "wrt input, evaluation";
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
    EXPECT_LT(err, 1e-14) << "wrt weight and bias, evaluation";
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(BatchNorm, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-bn_layer_type", "batchnorm"));
  DDT(PetscOptionsSetValue(NULL, "-bn_layer_batchnorm_momentum", "0.5"));
  DDT(PetscOptionsSetValue(NULL, "-bn_layer_batchnorm_eps", "0.25"));
  DDT(PetscOptionsSetValue(NULL, "-bn_layer_batchnorm_affine", "false"));
  InputSpec in;
  in.shape  = {4, 1};
  in.pshape = {1, 1};
  in.ranks  = {0};
  DDTensor x = MakeInput(in, DD_FLOAT64, 1);
  double   xv[4] = {1, 2, 3, 4};
  DDT(DDTensorSetValuesGlobal(x, xv));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "bn_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  PetscInt64 np;
  DDT(DDLayerGetNumParameters(l, &np));
  EXPECT_EQ(np, 0);
  DDTensor y, rm;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yv = GatherAll(y);
  EXPECT_NEAR(yv[0], -1.5 / std::sqrt(1.25 + 0.25), 1e-14);
  DDT(DDLayerBatchNormGetRunningStatistics(l, &rm, NULL));
  EXPECT_NEAR(GatherAll(rm)[0], 0.5 * 2.5, 1e-15);
  DDT(DDLayerDestroy(&l));
  DDT(PetscOptionsSetValue(NULL, "-bn_layer_batchnorm_eps", "-1"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "bn_"));
  DD_EXPECT_ERROR(DDLayerSetFromOptions(l), PETSC_ERR_ARG_OUTOFRANGE, "-layer_batchnorm_eps");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-bn_layer_type", "-bn_layer_batchnorm_momentum", "-bn_layer_batchnorm_eps", "-bn_layer_batchnorm_affine"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(BatchNormBadInput, OrderOneInput)
{
  DDTensor x = MakeInput({{6}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "input has order 1");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(BatchNormBadInput, EpsilonAndMomentumOutOfRange)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
  DD_EXPECT_ERROR(DDLayerBatchNormSetEpsilon(l, 0.0), PETSC_ERR_ARG_OUTOFRANGE, "eps 0. must be positive");
  DD_EXPECT_ERROR(DDLayerBatchNormSetEpsilon(l, -1e-5), PETSC_ERR_ARG_OUTOFRANGE, "must be positive");
  DD_EXPECT_ERROR(DDLayerBatchNormSetMomentum(l, 1.5), PETSC_ERR_ARG_OUTOFRANGE, "momentum 1.5 must lie in [0, 1]");
  DD_EXPECT_ERROR(DDLayerGroupNormSetGroups(l, 2), PETSC_ERR_ARG_WRONG, "needs a groupnorm layer");
  DDT(DDLayerDestroy(&l));
}

TEST(BatchNormBadInput, NonFiniteEpsilonAndMomentum)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
  DD_EXPECT_ERROR(DDLayerBatchNormSetEpsilon(l, INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerBatchNormSetEpsilon(): Batch normalization eps inf");
  DD_EXPECT_ERROR(DDLayerBatchNormSetEpsilon(l, NAN), PETSC_ERR_ARG_OUTOFRANGE, "-layer_batchnorm_eps");
  DD_EXPECT_ERROR(DDLayerBatchNormSetMomentum(l, NAN), PETSC_ERR_ARG_OUTOFRANGE, "-layer_batchnorm_momentum");
  DDT(DDLayerDestroy(&l));
}

TEST(BatchNormBadInput, OneValuePerChannelInTraining)
{
  DDTensor x = MakeInput({{1, 4}, {}, {}, {}}, DD_FLOAT64, 1), y;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DD_EXPECT_ERROR(DDLayerForward(l, x, y), PETSC_ERR_ARG_SIZ, "more than one value per channel");
  DDT(DDLayerSetTraining(l, PETSC_FALSE)); /* evaluation is fine */
  DDT(DDLayerForward(l, x, y));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(BatchNormBadInput, ReplicatedInput)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  DDPartition p;
  PetscInt    shape[3] = {1, 1, W}, gshape[3] = {2, 3, 4};
  DDTensor    x;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 3, shape, PETSC_DECIDE, NULL, &p));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &x));
  DDT(DDTensorSetPartition(x, p));
  DDT(DDTensorSetShape(x, 3, gshape));
  DDT(DDTensorSetReplicated(x, 2, PETSC_TRUE));
  DDT(DDTensorSetUp(x));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "cannot be replicated (dimension 2)");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  DDT(DDPartitionDestroy(&p));
}

/* ---- PyTorch parity: momentum None, num_batches_tracked, track_running_stats (torch 1.13 values) ---- */

/* x_k = (1 + k) sin(0.3 i + k) + k / 2, shape (4, 3, 2, 3) */
static std::vector<double> TorchBatch(int k)
{
  std::vector<double> x(72);
  for (int i = 0; i < 72; i++) x[i] = std::sin(0.3 * i + k) * (1 + k) + 0.5 * k;
  return x;
}

TEST(BatchNormTorch, MomentumNoneAndNumBatchesTrackedOnEveryPartition)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 3, fs);
  for (auto &ps : fs) {
    if (ps[0] > 4 || ps[1] > 3 || ps[2] > 3) continue;
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
      InputSpec in;
      in.shape  = {4, 3, 2, 3};
      in.pshape = {ps[0], ps[1], 1, ps[2]};
      DDTensor x = MakeInput(in, dt, 1), y, rm, rv;
      DDLayer  l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
      DDT(DDLayerBatchNormSetCumulativeAverage(l, PETSC_TRUE));
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerGetOutput(l, &y));
      for (int k = 0; k < 3; k++) {
        SetValues(x, TorchBatch(k));
        DDT(DDLayerForward(l, x, y));
      }
      PetscInt64 nbt;
      DDT(DDLayerBatchNormGetNumBatchesTracked(l, &nbt));
      EXPECT_EQ(nbt, 3);
      DDT(DDLayerBatchNormGetRunningStatistics(l, &rm, &rv));
      const double tol  = dt == DD_FLOAT64 ? 1e-14 : 1e-5;
      auto         near = [&](const std::vector<double> &a, const std::vector<double> &b, const char *what) {
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); i++) EXPECT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << what << " " << i << " partition " << ps[0] << "x" << ps[1] << "x" << ps[2];
      };
      near(GatherAll(rm), {1.0430183945873035, 0.8804996036716659, -0.21591900855548746}, "running mean");
      near(GatherAll(rv), {1.5136565305749334, 2.2150949517185716, 1.4288088104349268}, "running var");
      DDT(DDLayerSetTraining(l, PETSC_FALSE));
      SetValues(x, TorchBatch(3));
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerBatchNormGetNumBatchesTracked(l, &nbt));
      EXPECT_EQ(nbt, 3) << "evaluation does not count";
      std::vector<double> ye = GatherAll(y);
      near(std::vector<double>(ye.begin(), ye.begin() + 6), {0.8302463150340315, -0.14142854302339988, -1.0672907678302088, -1.8646358442946938, -2.462239311430225, -2.8067190313308337}, "evaluation output");
      DDT(DDLayerInitializeParameters(l, 1));
      DDT(DDLayerBatchNormGetNumBatchesTracked(l, &nbt));
      EXPECT_EQ(nbt, 0) << "reset with the running statistics";
      DDT(DDLayerBatchNormSetNumBatchesTracked(l, 7));
      DDT(DDLayerBatchNormGetNumBatchesTracked(l, &nbt));
      EXPECT_EQ(nbt, 7);
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
  }
}

TEST(BatchNormTorch, NoTrackingUsesBatchStatisticsInEvaluation)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 3, fs);
  const std::vector<double> yref  = {0.9164731420137456, 1.0927679528537195, 1.1447744793832277, 1.0678471334758903, 0.8688576058326481, 0.5655810383170706};
  const std::vector<double> dxref = {0.2687336734049343, 0.18804791849689387, 0.16180731014146948, 0.19212100176583788, 0.2758904105594534, 0.4050869813222051};
  auto conf = [](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERBATCHNORM));
    DDT(DDLayerBatchNormSetTrackRunningStats(l, PETSC_FALSE));
    DDT(DDLayerSetTraining(l, PETSC_FALSE));
  };
  for (auto &ps : fs) {
    if (ps[0] > 4 || ps[1] > 3 || ps[2] > 3) continue;
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
      InputSpec in;
      in.shape  = {4, 3, 2, 3};
      in.pshape = {ps[0], ps[1], 1, ps[2]};
      DDTensor x = MakeInput(in, dt, 1), y, dy, dx, rm;
      DDLayer  l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      conf(l);
      DDT(DDLayerSetUp(l, x));
      SetValues(x, TorchBatch(1));
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerCreateOutput(l, &dy));
      std::vector<double> g(72);
      for (int i = 0; i < 72; i++) g[i] = std::cos(0.05 * i);
      SetValues(dy, g);
      DDT(DDTensorDuplicate(x, &dx));
      DDT(DDLayerBackward(l, dy, dx));
      const double        tol = dt == DD_FLOAT64 ? 1e-13 : 1e-5;
      std::vector<double> yv = GatherAll(y), dxv = GatherAll(dx);
      for (int i = 0; i < 6; i++) {
        EXPECT_NEAR(yv[i], yref[i], tol);
        EXPECT_NEAR(dxv[i], dxref[i], tol);
      }
      PetscInt64 nbt;
      DDT(DDLayerBatchNormGetNumBatchesTracked(l, &nbt));
      EXPECT_EQ(nbt, 0);
      DDT(DDLayerBatchNormGetRunningStatistics(l, &rm, NULL));
      EXPECT_EQ(GatherAll(rm), std::vector<double>(3, 0.0)) << "not updated";
      for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
      DDT(DDLayerDestroy(&l));
    }
  }
  /* P ranks = 1 rank and finite differences, in evaluation mode */
  InputSpec in;
  in.shape  = {3, 2, 2 * W + 1};
  in.pshape = {1, 1, W};
  RunResult par = RunLayer(conf, {in}, DD_FLOAT64, 5, true, false), ser = RunLayer(conf, {Serial(in)}, DD_FLOAT64, 5, true, false);
  ExpectSameRun(par, ser, 1e-12, "no tracking, evaluation");
  ExpectFiniteDifferences(conf, {in}, 6, 1e-7, 1e-6);
}

TEST(BatchNormTorch, OptionsAndBadSettings)
{
  DDT(PetscOptionsSetValue(NULL, "-bt_layer_type", "batchnorm"));
  DDT(PetscOptionsSetValue(NULL, "-bt_layer_batchnorm_cumulative_average", "1"));
  DDT(PetscOptionsSetValue(NULL, "-bt_layer_batchnorm_track_running_stats", "0"));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "bt_"));
  DDT(DDLayerSetFromOptions(l));
  InputSpec in;
  in.shape = {2, 3, 4};
  DDTensor x = MakeInput(in, DD_FLOAT64, 1), y;
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  PetscInt64 nbt;
  DDT(DDLayerBatchNormGetNumBatchesTracked(l, &nbt));
  EXPECT_EQ(nbt, 0) << "track_running_stats 0 from the options";
  DD_EXPECT_ERROR(DDLayerBatchNormSetNumBatchesTracked(l, -1), PETSC_ERR_ARG_OUTOFRANGE, "num_batches_tracked");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-bt_layer_type", "-bt_layer_batchnorm_cumulative_average", "-bt_layer_batchnorm_track_running_stats"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

/*
  Evaluation mode's backward with a nan and an inf in x: dx = w dy / sqrt(running_var + eps), which does not
  read x (PyTorch's), so dx is finite there; it was nan (0 (x - mean) added). Both types, three formats, P ranks.
*/
TEST(BatchNormTorch, EvaluationBackwardDoesNotReadX)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
      const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmt] + " at " + std::to_string(Size()) + " ranks";
      InputSpec         in;
      in.shape  = {2, 3, 4, 2 * Size()};
      in.pshape = {1, 1, 1, Size()};
      in.fmt    = fmt;
      BNCfg c;
      DDTensor x = MakeInput(in, dt, 3), y, dy, dx, rm, rv, w;
      DDLayer  l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerInitializeParameters(l, 5));
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerForward(l, x, y)); /* training: running statistics from finite data */
      DDT(DDLayerSetTraining(l, PETSC_FALSE));
      std::vector<double> xv = GatherAll(x);
      xv[5]                  = NAN;
      xv[30]                 = INFINITY;
      xv[xv.size() - 1]      = -INFINITY;
      SetValues(x, xv);
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerCreateOutput(l, &dy));
      DDT(DDTensorSetRandomGlobal(dy, 7, -1, 1));
      DDT(DDTensorDuplicate(x, &dx));
      DDT(DDLayerBackward(l, dy, dx));
      DDT(DDLayerBatchNormGetRunningStatistics(l, &rm, &rv));
      PetscInt  np;
      DDTensor *ps;
      DDT(DDLayerGetParameters(l, &np, &ps));
      w                          = ps[0];
      const std::vector<double> g = GatherAll(dy), d = GatherAll(dx), var = GatherAll(rv), wv = GatherAll(w);
      const PetscInt            S = in.shape[2] * in.shape[3];
      for (size_t i = 0; i < d.size(); i++) {
        const size_t ch   = (i / S) % 3;
        const double want = g[i] * wv[ch] / std::sqrt(var[ch] + c.eps);
        EXPECT_NEAR(d[i], want, (dt == DD_FLOAT64 ? 1e-13 : 1e-5) * (1 + std::fabs(want))) << what << ": dx entry " << i << (std::isfinite(xv[i]) ? "" : " (x non-finite)");
      }
      for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
      DDT(DDLayerDestroy(&l));
    }
}

/*
  A channel holding a -inf (or +inf, or nan) among finite entries: PyTorch's running mean becomes -inf (+inf,
  nan), its running variance nan. The local moments merged blocks by Chan's update, m + (mb - m) f, which
  turned -inf into nan (-inf + inf) on plain and blocked storage; an infinite difference now takes the
  plain weighted mean. Three formats, both types, P ranks.
*/
TEST(BatchNormTorch, InfiniteEntryGivesAnInfiniteRunningMean)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
      const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmt] + " at " + std::to_string(Size()) + " ranks";
      InputSpec         in;
      in.shape  = {2, 4, 4, 4 * Size()};
      in.pshape = {1, 1, 1, Size()};
      in.fmt    = fmt;
      BNCfg c;
      c.momentum = 0.5;
      DDTensor x = MakeInput(in, dt, 3), y, rm, rv;
      DDLayer  l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerGetOutput(l, &y));
      std::vector<double> xv = GatherAll(x);
      const PetscInt      S  = in.shape[2] * in.shape[3];
      xv[0 * S + 1]          = -INFINITY; /* channel 0, an early entry: finite ones follow */
      xv[1 * S + 2]          = INFINITY;  /* channel 1 */
      xv[4 * S + 2 * S + 5]  = NAN;       /* sample 1, channel 2 */
      SetValues(x, xv);
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerBatchNormGetRunningStatistics(l, &rm, &rv));
      const std::vector<double> m = GatherAll(rm), v = GatherAll(rv);
      EXPECT_EQ(m[0], -INFINITY) << what;
      EXPECT_EQ(m[1], INFINITY) << what;
      EXPECT_TRUE(std::isnan(m[2])) << what;
      EXPECT_TRUE(std::isfinite(m[3])) << what;
      for (int k = 0; k < 3; k++) EXPECT_TRUE(std::isnan(v[k])) << what << ": running variance of channel " << k;
      EXPECT_TRUE(std::isfinite(v[3])) << what;
      DDT(DDTensorDestroy(&x));
      DDT(DDLayerDestroy(&l));
    }
}
