/*
  DDLAYERGROUPNORM: hand-checked numbers; a naive serial formula; P ranks equal 1 rank over
  spatial and batch partitions (1-3 spatial dimensions, N x C), unbalanced and subset ones, and
  channel splits aligned with the groups; blocked (float32, bs 16) and channels-last inputs
  against plain float64; finite differences (input, weight, bias); the adjoint test wrt the
  affine parameters; options; bad input.
*/
#include "layertest.hpp"

using namespace ddtest;

struct GNCfg {
  PetscInt  groups  = 2;
  PetscReal eps     = 1e-5;
  bool      uniform = true;
};

static std::function<void(DDLayer)> Configure(const GNCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
    DDT(DDLayerGroupNormSetGroups(l, c.groups));
    DDT(DDLayerGroupNormSetEpsilon(l, c.eps));
    if (c.uniform) DDT(DDLayerSetInitType(l, DD_INIT_UNIFORM));
  };
}

static void CheckAgainstSerial(const GNCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64, double tol = 1e-12)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 13), ser = RunLayer(Configure(c), {Serial(in)}, dt, 13);
  ExpectSameRun(par, ser, tol, what);
}

static std::vector<double> NaiveGroupNorm(const std::vector<PetscInt> &shape, PetscInt G, const std::vector<double> &x, const std::vector<double> &w, const std::vector<double> &b, double eps)
{
  const PetscInt N = shape[0], C = shape[1], cpg = C / G;
  PetscInt       S = 1;
  for (size_t k = 2; k < shape.size(); k++) S *= shape[k];
  std::vector<double> y(x.size());
  for (PetscInt n = 0; n < N; n++)
    for (PetscInt g = 0; g < G; g++) {
      long double s = 0, q = 0;
      const PetscInt o = (n * C + g * cpg) * S, m = cpg * S;
      for (PetscInt i = 0; i < m; i++) s += x[o + i];
      const double mu = (double)(s / m);
      for (PetscInt i = 0; i < m; i++) q += ((long double)x[o + i] - mu) * ((long double)x[o + i] - mu);
      const double r = 1.0 / std::sqrt((double)(q / m) + eps);
      for (PetscInt i = 0; i < m; i++) {
        const PetscInt c = g * cpg + i / S;
        y[o + i]         = w[c] * (x[o + i] - mu) * r + b[c];
      }
    }
  return y;
}

TEST(GroupNorm, HandCheckedTinyCase)
{
  /* N x C x L = 1 x 4 x 2, two groups: (1, 2, 3, 4) and (2, 4, 6, 8); L split over up to 2 ranks */
  const int P = std::min(Size(), 2);
  InputSpec in;
  in.shape  = {1, 4, 2};
  in.pshape = {1, 1, P};
  DDTensor x     = MakeInput(in, DD_FLOAT64, 1);
  double   xv[8] = {1, 2, 3, 4, 2, 4, 6, 8};
  DDT(DDTensorSetValuesGlobal(x, xv));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
  DDT(DDLayerGroupNormSetGroups(l, 2));
  DDT(DDLayerSetUp(l, x));
  DDTensor y;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yv = GatherAll(y);
  for (int i = 0; i < 4; i++) {
    EXPECT_NEAR(yv[i], (xv[i] - 2.5) / std::sqrt(1.25 + 1e-5), 1e-14);
    EXPECT_NEAR(yv[4 + i], (xv[4 + i] - 5.0) / std::sqrt(5.0 + 1e-5), 1e-14);
  }
  /* evaluation mode behaves the same */
  DDT(DDLayerSetTraining(l, PETSC_FALSE));
  DDT(DDLayerForward(l, x, y));
  EXPECT_LT(RelDiff(GatherAll(y), yv), 1e-15);
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(GroupNorm, MatchesNaiveFormula)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    for (PetscInt G : {1, 3, 6}) {
      InputSpec in;
      in.shape  = {2, 6, 3 * ps[0] + 1, 2 * ps[1] + 3};
      in.pshape = {1, 1, ps[0], ps[1]};
      DDTensor x = MakeInput(in, DD_FLOAT64, 4), y, *p;
      DDLayer  l;
      PetscInt np;
      GNCfg    c;
      c.groups = G;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerInitializeParameters(l, 5));
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerGetParameters(l, &np, &p));
      ASSERT_EQ(np, 2);
      EXPECT_LT(RelDiff(GatherAll(y), NaiveGroupNorm(in.shape, G, GatherAll(x), GatherAll(p[0]), GatherAll(p[1]), 1e-5)), 1e-13) << "groups " << G;
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
  }
}

TEST(GroupNorm, SpatialAndBatchPartitions)
{
  int W = Size();
  for (int D = 0; D <= 3; D++) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, D + 1, f);
    std::vector<size_t> pick;
    for (size_t i = 0; i < f.size(); i += (f.size() + 4) / 5) pick.push_back(i);
    if (pick.back() != f.size() - 1) pick.push_back(f.size() - 1);
    for (size_t i : pick) {
      auto     &ps = f[i];
      InputSpec in;
      in.shape  = {ps[0] + 1, 6};
      in.pshape = {ps[0], 1};
      for (int j = 0; j < D; j++) {
        in.shape.push_back(2 * ps[1 + j] + (D == 3 ? 1 : 2));
        in.pshape.push_back(ps[1 + j]);
      }
      char what[64];
      snprintf(what, sizeof(what), "%dD, batch workers %d", D, (int)ps[0]);
      CheckAgainstSerial(GNCfg(), in, what);
    }
  }
}

TEST(GroupNorm, UnbalancedAndSubsetPartitions)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in;
  in.shape  = {2, 4, 3, 4 * W};
  in.pshape = {1, 1, 1, W};
  in.lx     = {{}, {}, {}, std::vector<PetscInt>(W, 4)};
  in.lx[3][0] += 3;
  in.lx[3][W - 1] -= 3;
  CheckAgainstSerial(GNCfg(), in, "unbalanced spatial");
  InputSpec sub;
  sub.shape  = {3, 4, 2 * W};
  sub.pshape = {1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  CheckAgainstSerial(GNCfg(), sub, "subset of ranks");
}

TEST(GroupNorm, ChannelSplitAlignedWithGroups)
{
  int            W  = Size();
  const PetscInt Pc = std::min(W, 4);
  InputSpec      in;
  GNCfg          c;
  c.groups  = 4; /* 3 channels per group */
  in.shape  = {2, 12, 5, 4};
  in.pshape = {1, Pc, 1, 1};
  in.lx     = {{}, std::vector<PetscInt>(Pc, 0), {}, {}};
  for (PetscInt g = 0; g < 4; g++) in.lx[1][g % Pc] += 3; /* whole groups, unevenly */
  if (Pc == 3) in.lx[1] = {6, 3, 3};
  if (Pc == 2) in.lx[1] = {9, 3};
  CheckAgainstSerial(c, in, "channel split along the groups");
  /* channels and space */
  if (W >= 4) {
    InputSpec cs;
    cs.shape  = {2, 12, 6, 5};
    cs.pshape = {1, 2, W / 2, 1};
    CheckAgainstSerial(c, cs, "channel x spatial");
    /* batch x channel x spatial */
    if (W >= 8) {
      cs.shape  = {3, 12, 6, 5};
      cs.pshape = {2, 2, 2, 1};
      CheckAgainstSerial(c, cs, "batch x channel x spatial");
    }
  }
  /* one channel per group (instance normalization), channels split anyhow */
  GNCfg inst;
  inst.groups = 5;
  InputSpec ii;
  ii.shape  = {2, 5, 7};
  ii.pshape = {1, std::min(W, 5), 1};
  CheckAgainstSerial(inst, ii, "instance normalization, channel split");
}

static RunResult RunBlocked(const GNCfg &c, InputSpec in, DDDataType dt, PetscInt bs, PetscInt64 seed)
{
  RunResult R;
  DDTensor  x = MakeInput(in, dt, seed + 1), dx, y, dy;
  DDT(DDTensorSetBlockSize(x, bs));
  DDT(DDTensorSetFormat(x, DD_FORMAT_BLOCKED));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerInitializeParameters(l, seed));
  DDT(DDLayerGetOutput(l, &y));
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
  for (DDTensor *t : {&dx, &dy, &x}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
  return R;
}

TEST(GroupNorm, BlockedAndChannelsLastFormats)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto      ps = f[f.size() / 2];
  InputSpec in;
  in.shape  = {3, 20, 2 * ps[0] + 3, 3 * ps[1] + 1};
  in.pshape = {1, 1, ps[0], ps[1]};
  for (PetscInt G : {4, 5}) { /* groups of 5 and 4 channels: some straddle the blocks of 16 */
    GNCfg c;
    c.groups      = G;
    RunResult ref = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 23);
    ExpectSameRun(RunBlocked(c, in, DD_FLOAT32, 16, 23), ref, 2e-5, "blocked bs 16 float32 vs plain float64");
    ExpectSameRun(RunBlocked(c, in, DD_FLOAT64, 8, 23), ref, 1e-12, "blocked bs 8 float64 vs plain float64");
    InputSpec cl = in;
    cl.fmt       = DD_FORMAT_CHANNELS_LAST;
    ExpectSameRun(RunLayer(Configure(c), {cl}, DD_FLOAT64, 23), ref, 1e-12, "channels-last float64");
    ExpectSameRun(RunLayer(Configure(c), {cl}, DD_FLOAT32, 23), ref, 2e-5, "channels-last float32");
  }
}

TEST(GroupNorm, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 4, 3, 3};
  in.pshape = {1, 1, Size() > 1 ? 2 : 1, 1};
  ExpectFiniteDifferences(Configure(GNCfg()), {in}, 9, 1e-7);
  InputSpec nc; /* N x C: the statistics over the group's channels only */
  nc.shape = {3, 6};
  GNCfg c;
  c.groups = 2;
  ExpectFiniteDifferences(Configure(c), {nc}, 10, 1e-7);
}

TEST(GroupNorm, AdjointTestWrtParameters)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    DDTensor  x = MakeInput({{2, 4, 3 * ps[0] + 1, 2 * ps[1] + 1}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
    DDLayer   l;
    PetscReal err;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(GNCfg())(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err)); /* y is linear in (weight, bias) */
    EXPECT_LT(err, 1e-14);
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(GroupNorm, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-gn_layer_type", "groupnorm"));
  DDT(PetscOptionsSetValue(NULL, "-gn_layer_groupnorm_groups", "1"));
  DDT(PetscOptionsSetValue(NULL, "-gn_layer_groupnorm_eps", "0.75"));
  DDTensor x     = MakeInput({{1, 2, 2}, {}, {}, {}}, DD_FLOAT64, 1), y;
  double   xv[4] = {1, 2, 3, 4};
  DDT(DDTensorSetValuesGlobal(x, xv));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "gn_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  EXPECT_NEAR(GatherAll(y)[3], 1.5 / std::sqrt(1.25 + 0.75), 1e-14);
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-gn_layer_type", "-gn_layer_groupnorm_groups", "-gn_layer_groupnorm_eps"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(GroupNormBadInput, GroupsDoNotDivideChannels)
{
  DDTensor x = MakeInput({{2, 6, 4}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs its number of groups");
  DDT(DDLayerGroupNormSetGroups(l, 4));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "number of groups 4 does not divide the 6 channels");
  DD_EXPECT_ERROR(DDLayerGroupNormSetGroups(l, 0), PETSC_ERR_ARG_OUTOFRANGE, "positive number of groups");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(GroupNormBadInput, GroupStraddlesChannelSplit)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  /* 6 channels in 2 groups of 3, split 4 + 2 */
  DDTensor x = MakeInput({{2, 6, 4}, {1, 2, 1}, {}, {{}, {4, 2}, {}}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
  DDT(DDLayerGroupNormSetGroups(l, 2));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "Group 1 (channels 3 to 5) straddles channel workers 0 and 1 (dimension 1");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(GroupNormBadInput, NonFiniteEpsilon)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
  DD_EXPECT_ERROR(DDLayerGroupNormSetEpsilon(l, INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerGroupNormSetEpsilon(): Group normalization eps inf");
  DDT(DDLayerDestroy(&l));
}

TEST(GroupNormBadInput, EpsilonAndOrder)
{
  DDTensor x = MakeInput({{6}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
  DD_EXPECT_ERROR(DDLayerGroupNormSetEpsilon(l, 0.0), PETSC_ERR_ARG_OUTOFRANGE, "eps 0. must be positive");
  DD_EXPECT_ERROR(DDLayerGroupNormSetEpsilon(l, -1.0), PETSC_ERR_ARG_OUTOFRANGE, "must be positive");
  DDT(DDLayerGroupNormSetGroups(l, 1));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "input has order 1");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}
