/*
  DDLAYERACTIVATION: exact values at a few points; every type on P ranks equals 1 rank in every
  format (outputs and input gradients); finite differences away from the kinks; the output keeps
  the input's distribution and format; the identity passes the adjoint test; options; bad input.
*/
#include "layertest.hpp"

using namespace ddtest;

static std::function<void(DDLayer)> Configure(DDActivationType t, PetscReal slope = 0.01)
{
  return [t, slope](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERACTIVATION));
    DDT(DDLayerActivationSetType(l, t));
    DDT(DDLayerActivationSetNegativeSlope(l, slope));
  };
}

/* f and f' of the type at the given points, through Forward and Backward (dy = 1) on one rank */
static void Evaluate(DDActivationType t, PetscReal slope, const std::vector<double> &pts, std::vector<double> &f, std::vector<double> &df)
{
  PetscInt n = (PetscInt)pts.size();
  DDTensor x = MakeInput({{1, n}, {}, {}, {}}, DD_FLOAT64, 1), y, dy, dx;
  DDT(DDTensorSetValuesGlobal(x, pts.data()));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(t, slope)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  f = GatherAll(y);
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSet(dy, 1.0));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  df = GatherAll(dx);
  for (DDTensor *p : {&x, &dy, &dx}) DDT(DDTensorDestroy(p));
  DDT(DDLayerDestroy(&l));
}

TEST(Activation, ExactValues)
{
  std::vector<double> f, df;
  Evaluate(DD_ACT_GELU, 0.01, {1.0, 0.0, -1.0}, f, df);
  EXPECT_NEAR(f[0], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(f[1], 0.0, 1e-15);
  EXPECT_NEAR(f[2], -0.15865525393145707, 1e-15);
  EXPECT_NEAR(df[0], 0.8413447460685429 + 0.24197072451914337, 1e-15); /* Phi(1) + phi(1) */
  EXPECT_NEAR(df[1], 0.5, 1e-15);
  Evaluate(DD_ACT_SIGMOID, 0.01, {0.0, 2.0, -800.0}, f, df);
  EXPECT_EQ(f[0], 0.5);
  EXPECT_NEAR(f[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
  EXPECT_EQ(f[2], 0.0); /* no overflow */
  EXPECT_EQ(df[0], 0.25);
  Evaluate(DD_ACT_LEAKYRELU, 0.1, {-2.0, 3.0, 0.0}, f, df);
  EXPECT_NEAR(f[0], -0.2, 1e-16);
  EXPECT_EQ(f[1], 3.0);
  EXPECT_EQ(df[0], 0.1);
  EXPECT_EQ(df[1], 1.0);
  EXPECT_EQ(df[2], 0.1); /* PyTorch: the slope at 0 */
  Evaluate(DD_ACT_LEAKYRELU, 0.01, {-2.0}, f, df); /* the default slope */
  EXPECT_NEAR(f[0], -0.02, 1e-16);
  Evaluate(DD_ACT_RELU, 0.01, {-1.5, 0.0, 2.5}, f, df);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[1], 0.0);
  EXPECT_EQ(f[2], 2.5);
  EXPECT_EQ(df[0], 0.0);
  EXPECT_EQ(df[1], 0.0); /* PyTorch: 0 at 0 */
  EXPECT_EQ(df[2], 1.0);
  Evaluate(DD_ACT_TANH, 0.01, {0.5, 0.0}, f, df);
  EXPECT_NEAR(f[0], 0.46211715726000974, 1e-15);
  EXPECT_NEAR(df[0], 1 - 0.46211715726000974 * 0.46211715726000974, 1e-15);
  EXPECT_EQ(df[1], 1.0);
  Evaluate(DD_ACT_IDENTITY, 0.01, {-3.25, 7.0}, f, df);
  EXPECT_EQ(f[0], -3.25);
  EXPECT_EQ(f[1], 7.0);
  EXPECT_EQ(df[0], 1.0);
}

TEST(Activation, EveryTypeOnPRanksEqualsOneRank)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (int t = DD_ACT_RELU; t <= DD_ACT_IDENTITY; t++)
    for (size_t i = 0; i < f.size(); i += 2) {
      auto     &ps = f[i];
      InputSpec in;
      in.shape  = {2 * ps[0] + 1, 3 * ps[1] + 1, 4 * ps[2] + 3};
      in.pshape = ps;
      in.lo     = -3;
      in.hi     = 3;
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
        in.fmt        = fmt;
        RunResult par = RunLayer(Configure((DDActivationType)t, 0.2), {in}, DD_FLOAT64, 3), ser = RunLayer(Configure((DDActivationType)t, 0.2), {Serial(in)}, DD_FLOAT64, 3);
        ExpectSameRun(par, ser, 1e-15, std::string(DDActivationTypes[t]) + " in format " + DDTensorFormats[fmt]);
      }
    }
}

TEST(Activation, OutputKeepsDistributionAndFormat)
{
  int       W = Size();
  InputSpec in;
  in.shape  = {2, 9, 3 * W + 1};
  in.pshape = {1, 1, W};
  in.lx     = {{}, {}, std::vector<PetscInt>(W, 3)};
  in.lx[2][0] += 1;
  in.fmt     = DD_FORMAT_BLOCKED;
  DDTensor x = MakeInput(in, DD_FLOAT32, 1), y, xh, yh, dx, dy;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(DD_ACT_GELU)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  PetscBool      ok;
  DDTensorFormat fy;
  DDT(DDTensorCompatible(x, y, &ok));
  DDT(DDTensorGetFormat(y, &fy));
  EXPECT_TRUE(ok);
  EXPECT_EQ(fy, DD_FORMAT_BLOCKED);
  DDT(DDLayerForward(l, x, y));
  std::vector<double> y0 = GatherAll(y), xg = GatherAll(x);
  for (size_t i = 0; i < xg.size(); i++) EXPECT_NEAR(y0[i], 0.5 * xg[i] * (1 + std::erf(xg[i] / std::sqrt(2.0))), 1e-6);
  /* an input with a halo and another format, an output with a halo */
  PetscInt lo[3] = {0, 0, 2}, hi[3] = {1, 0, 1};
  DDT(DDTensorDuplicate(x, &xh));
  DDT(DDTensorSetFormat(xh, DD_FORMAT_PLAIN));
  DDT(DDTensorSetHalo(xh, lo, hi));
  DDT(DDTensorCopy(x, xh));
  DDT(DDLayerCreateOutput(l, &yh));
  DDT(DDTensorSetHalo(yh, hi, lo));
  DDT(DDLayerForward(l, xh, yh));
  EXPECT_LT(RelDiff(GatherAll(yh), y0), 1e-7);
  DDT(DDTensorDuplicate(yh, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 4, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  std::vector<double> dxg = GatherAll(dx), dyg = GatherAll(dy);
  for (size_t i = 0; i < xg.size(); i++) {
    const double v = xg[i], d = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(dxg[i], d * dyg[i], 1e-6);
  }
  for (DDTensor *t : {&x, &xh, &yh, &dx, &dy}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
}

TEST(Activation, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 3, 4};
  in.pshape = {1, 1, Size() > 1 ? 2 : 1};
  for (int t = DD_ACT_RELU; t <= DD_ACT_IDENTITY; t++) {
    for (auto range : {std::make_pair(-2.0, -0.1), std::make_pair(0.1, 2.0), std::make_pair(-3.0, 3.0)}) {
      if ((t == DD_ACT_RELU || t == DD_ACT_LEAKYRELU) && range.first < 0 && range.second > 0) continue; /* the kink */
      in.lo = range.first;
      in.hi = range.second;
      SCOPED_TRACE(DDActivationTypes[t]);
      ExpectFiniteDifferences(Configure((DDActivationType)t, 0.3), {in}, 5, 1e-8, 1e-6);
    }
  }
}

TEST(Activation, IdentityAdjointTest)
{
  DDTensor  x = MakeInput({{2, 3, 2 * Size() + 1}, {1, 1, Size()}, {}, {}}, DD_FLOAT64, 3);
  DDLayer   l;
  PetscReal err;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(DD_ACT_IDENTITY)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
  EXPECT_LT(err, 1e-15);
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Activation, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-act_layer_type", "activation"));
  DDT(PetscOptionsSetValue(NULL, "-act_layer_activation_type", "leakyrelu"));
  DDT(PetscOptionsSetValue(NULL, "-act_layer_activation_negative_slope", "0.25"));
  std::vector<double> pts = {-4.0, 1.0};
  DDTensor            x   = MakeInput({{1, 2}, {}, {}, {}}, DD_FLOAT64, 1), y;
  DDT(DDTensorSetValuesGlobal(x, pts.data()));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "act_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yv = GatherAll(y);
  EXPECT_EQ(yv[0], -1.0);
  EXPECT_EQ(yv[1], 1.0);
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-act_layer_type", "-act_layer_activation_type", "-act_layer_activation_negative_slope"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(ActivationBadInput, UnknownTypeAndWrongLayer)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DD_EXPECT_ERROR(DDLayerActivationSetType(l, (DDActivationType)17), PETSC_ERR_ARG_OUTOFRANGE, "Unknown activation type 17");
  DD_EXPECT_ERROR(DDLayerDropoutSetProbability(l, 0.5), PETSC_ERR_ARG_WRONG, "needs a dropout layer");
  DDT(DDLayerDestroy(&l));
}
