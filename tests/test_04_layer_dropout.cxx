/*
  DDLAYERDROPOUT: the same mask on P ranks as on 1 rank (any partition, format, unbalanced and
  subset ones); the fraction kept is 1 - p statistically and kept entries are scaled by
  1/(1 - p); evaluation is the identity; Backward applies the mask of the last Forward; masks
  change from call to call and repeat after DDLayerDropoutSetSeed(); the adjoint test; options;
  bad input.
*/
#include "layertest.hpp"

using namespace ddtest;

static std::function<void(DDLayer)> Configure(PetscReal p, PetscInt64 seed)
{
  return [p, seed](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERDROPOUT));
    DDT(DDLayerDropoutSetProbability(l, p));
    DDT(DDLayerDropoutSetSeed(l, seed));
  };
}

TEST(Dropout, SameMaskOnAnyPartition)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (auto &ps : f)
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
      InputSpec in;
      in.shape  = {ps[0] + 1, 2 * ps[1] + 3, 5 * ps[2] + 2};
      in.pshape = ps;
      in.fmt    = fmt;
      RunResult par = RunLayer(Configure(0.3, 77), {in}, DD_FLOAT64, 3), ser = RunLayer(Configure(0.3, 77), {Serial(in)}, DD_FLOAT64, 3);
      ExpectSameRun(par, ser, 1e-15, std::string("format ") + DDTensorFormats[fmt]);
      size_t zeros = 0;
      for (double v : par.y) zeros += v == 0;
      EXPECT_GT(zeros, 0u) << "some entries dropped";
      EXPECT_LT(zeros, par.y.size()) << "some entries kept";
    }
  if (W >= 2) { /* unbalanced, on a subset */
    InputSpec in;
    in.shape  = {2, 3, 4 * W};
    in.pshape = {1, 1, W - 1};
    in.lx     = {{}, {}, std::vector<PetscInt>(W - 1, 4)};
    in.lx[2][0] += 4;
    for (int r = W - 1; r >= 1; r--) in.ranks.push_back(r);
    RunResult par = RunLayer(Configure(0.5, 5), {in}, DD_FLOAT32, 3), ser = RunLayer(Configure(0.5, 5), {Serial(in)}, DD_FLOAT32, 3);
    ExpectSameRun(par, ser, 1e-7, "unbalanced subset, float32");
  }
}

/* the fraction of entries kept and the value of the kept entries for x = 1 */
static void KeptFraction(PetscReal p, PetscInt64 seed, const InputSpec &in, double *frac, double *maxdev)
{
  DDTensor x = MakeInput(in, DD_FLOAT64, 1), y;
  DDT(DDTensorSet(x, 1.0));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(p, seed)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yv = GatherAll(y);
  size_t              kept = 0;
  *maxdev                  = 0;
  for (double v : yv)
    if (v != 0) {
      kept++;
      *maxdev = std::max(*maxdev, std::fabs(v - 1.0 / (1.0 - p)));
    }
  *frac = (double)kept / yv.size();
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Dropout, KeptFractionIsOneMinusP)
{
  InputSpec in;
  in.shape  = {4, 5, 100, 100}; /* 200000 entries */
  in.pshape = {1, 1, Size(), 1};
  for (PetscReal p : {0.1, 0.5, 0.8}) {
    double frac, dev;
    KeptFraction(p, 3, in, &frac, &dev);
    const double sigma = std::sqrt(p * (1 - p) / 200000.0);
    EXPECT_NEAR(frac, 1 - p, 5 * sigma) << "p = " << p;
    EXPECT_LT(dev, 1e-15) << "kept entries are scaled by 1/(1 - p)";
  }
  double frac, dev;
  KeptFraction(0.0, 3, in, &frac, &dev);
  EXPECT_EQ(frac, 1.0) << "p = 0 keeps everything";
}

TEST(Dropout, EvaluationIsTheIdentity)
{
  InputSpec in;
  in.shape  = {2, 3, 4 * Size()};
  in.pshape = {1, 1, Size()};
  RunResult r = RunLayer(Configure(0.6, 1), {in}, DD_FLOAT64, 3, true, false);
  DDTensor  x = MakeInput(in, DD_FLOAT64, 3 + 1), dy;
  EXPECT_EQ(RelDiff(r.y, GatherAll(x)), 0.0);
  DDT(DDTensorDuplicate(x, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 3 + 7, -1, 1));
  EXPECT_EQ(RelDiff(r.dx[0], GatherAll(dy)), 0.0);
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&dy));
}

TEST(Dropout, BackwardAppliesTheMaskOfTheLastForward)
{
  InputSpec in;
  in.shape   = {3, 4, 10 * Size()};
  in.pshape  = {1, 1, Size()};
  in.lo      = 0.5; /* no zeros in x or dy */
  in.hi      = 1.5;
  DDTensor x = MakeInput(in, DD_FLOAT64, 1), y, dy, dx;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(0.4, 9)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 2, 0.5, 1.5));
  DDT(DDTensorDuplicate(x, &dx));
  std::vector<double>              xg = GatherAll(x), dyg = GatherAll(dy);
  std::vector<std::vector<double>> masks;
  for (int call = 0; call < 3; call++) {
    if (call == 2) DDT(DDLayerDropoutSetSeed(l, 9)); /* restarts: the third mask is the first */
    DDT(DDLayerForward(l, x, y));
    DDT(DDLayerBackward(l, dy, dx));
    std::vector<double> yg = GatherAll(y), dxg = GatherAll(dx), m(xg.size());
    for (size_t i = 0; i < xg.size(); i++) {
      m[i] = yg[i] / xg[i];
      EXPECT_NEAR(dxg[i] / dyg[i], m[i], 1e-14) << "entry " << i << " of call " << call;
    }
    masks.push_back(m);
  }
  EXPECT_GT(RelDiff(masks[1], masks[0]), 0.5) << "the second Forward draws another mask";
  EXPECT_EQ(RelDiff(masks[2], masks[0]), 0.0) << "the same seed gives the same masks again";
  /* an evaluation Forward does not advance the masks */
  DDT(DDLayerDropoutSetSeed(l, 9));
  DDT(DDLayerSetTraining(l, PETSC_FALSE));
  DDT(DDLayerForward(l, x, y));
  DDT(DDLayerSetTraining(l, PETSC_TRUE));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yg = GatherAll(y);
  for (size_t i = 0; i < xg.size(); i++) EXPECT_NEAR(yg[i] / xg[i], masks[0][i], 1e-14);
  for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
}

TEST(Dropout, AdjointTest)
{
  /* DDLayerAdjointTest runs Forward at 0 and at x (two masks): F(0) = 0 under any mask, and
     Backward uses the mask of the second Forward, which made F(x); so J is the fixed-mask map */
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    DDTensor  x = MakeInput({{2, 3, 4 * ps[0] + 1, 3 * ps[1]}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
    DDLayer   l;
    PetscReal err;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(0.5, 4)(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
    EXPECT_LT(err, 1e-15);
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(Dropout, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-drop_layer_type", "dropout"));
  DDT(PetscOptionsSetValue(NULL, "-drop_layer_dropout_p", "0.25"));
  DDT(PetscOptionsSetValue(NULL, "-drop_layer_dropout_seed", "12345678901"));
  InputSpec in;
  in.shape  = {2, 3, 50};
  in.pshape = {1, 1, Size()};
  auto byOptions = [](DDLayer l) {
    DDT(DDLayerSetOptionsPrefix(l, "drop_"));
    DDT(DDLayerSetFromOptions(l));
  };
  ExpectSameRun(RunLayer(byOptions, {in}, DD_FLOAT64, 1), RunLayer(Configure(0.25, 12345678901LL), {in}, DD_FLOAT64, 1), 1e-15, "options");
  DDT(PetscOptionsSetValue(NULL, "-drop_layer_dropout_seed", "12x"));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "drop_"));
  DD_EXPECT_ERROR(DDLayerSetFromOptions(l), PETSC_ERR_ARG_WRONG, "-layer_dropout_seed 12x is not an integer");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-drop_layer_type", "-drop_layer_dropout_p", "-drop_layer_dropout_seed"}) DDT(PetscOptionsClearValue(NULL, o));
}

TEST(DropoutBadInput, ProbabilityOutOfRange)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERDROPOUT));
  DD_EXPECT_ERROR(DDLayerDropoutSetProbability(l, -0.1), PETSC_ERR_ARG_OUTOFRANGE, "Dropout probability -0.1 must lie in [0, 1)");
  DD_EXPECT_ERROR(DDLayerDropoutSetProbability(l, 1.0), PETSC_ERR_ARG_OUTOFRANGE, "must lie in [0, 1)");
  DD_EXPECT_ERROR(DDLayerDropoutSetProbability(l, 1.5), PETSC_ERR_ARG_OUTOFRANGE, "must lie in [0, 1)");
  DD_EXPECT_ERROR(DDLayerActivationSetType(l, DD_ACT_RELU), PETSC_ERR_ARG_WRONG, "needs a activation layer");
  DDT(DDLayerDestroy(&l));
}

/*
  PyTorch's dropout is x * mask (mask 0 or 1/(1 - p)): a dropped nan or inf gives nan and a dropped
  negative entry -0, and the gradient likewise dy * mask. The layer had selected 0 for a dropped
  entry, so a nan vanished where it was dropped. Both types, three formats, P ranks.
*/
TEST(Dropout, DroppedNanAndInfGiveNanAsPyTorch)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
      const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmt];
      InputSpec         in;
      in.shape  = {2, 5, 6 * Size()};
      in.pshape = {1, 1, Size()};
      in.fmt    = fmt;
      DDTensor x = MakeInput(in, dt, 1), y, dy, dx;
      std::vector<double> xv = GatherAll(x), ones(xv.size(), 1.0), dyv(xv.size());
      for (size_t i = 0; i < xv.size(); i++) {
        if (i % 3 == 0) xv[i] = NAN;
        else if (i % 3 == 1) xv[i] = i % 2 ? INFINITY : -INFINITY;
        else xv[i] = -0.25 - 0.01 * (double)(i % 7);
        dyv[i] = i % 2 ? NAN : -INFINITY;
      }
      DDLayer l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(0.5, 21)(l);
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerGetOutput(l, &y));
      SetValues(x, ones); /* the mask: y of x = 1 */
      DDT(DDLayerForward(l, x, y));
      std::vector<double> mask = GatherAll(y);
      DDT(DDLayerDropoutSetSeed(l, 21)); /* the same mask again */
      SetValues(x, xv);
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerCreateOutput(l, &dy));
      SetValues(dy, dyv);
      DDT(DDTensorDuplicate(x, &dx));
      DDT(DDLayerBackward(l, dy, dx));
      std::vector<double> yv = GatherAll(y), dxv = GatherAll(dx);
      size_t dropped = 0, bad = 0;
      for (size_t i = 0; i < xv.size(); i++) {
        const bool drop = mask[i] == 0;
        dropped += drop;
        const double want = xv[i] * mask[i], wantdx = dyv[i] * mask[i]; /* PyTorch's products */
        const bool   same = (std::isnan(want) ? std::isnan(yv[i]) : yv[i] == (dt == DD_FLOAT32 ? (double)(float)want : want) && std::signbit(yv[i]) == std::signbit(want)) && (std::isnan(wantdx) ? std::isnan(dxv[i]) : dxv[i] == wantdx);
        if (!same) bad++;
        EXPECT_TRUE(same) << what << ": entry " << i << (drop ? " (dropped)" : " (kept)") << " x " << xv[i] << " -> " << yv[i] << " (want " << want << "), dy " << dyv[i] << " -> " << dxv[i] << " (want " << wantdx << ")";
        if (bad > 5) break;
      }
      EXPECT_GT(dropped, 0u) << what;
      EXPECT_LT(dropped, xv.size()) << what;
      for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
      DDT(DDLayerDestroy(&l));
    }
}
