/*
  DDLAYERACTIVATION: exact values at a few points; every type on P ranks equals 1 rank in every
  format (outputs and input gradients); finite differences away from the kinks; the output keeps
  the input's distribution and format; the identity passes the adjoint test; options; bad input.
*/
#include "layertest.hpp"
#include <ddnn/private/ddbackendimpl.h> /* HostArray: the output changed behind its state */

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

/* an unfused tanh's or sigmoid's backward reads f'(v) from its output while that is as the forward left it (the
   same bits as from its input); once the output's state changes, from the input again */
TEST(Activation, BackwardFromItsUnchangedOutput)
{
  for (DDActivationType t : {DD_ACT_TANH, DD_ACT_SIGMOID})
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
      DDTensor x = MakeInput({{2, 3, 5, 7}}, dt, 7), y, dy, dx[3];
      DDLayer  l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(t)(l);
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerForward(l, x, y));
      DDT(DDLayerCreateOutput(l, &dy));
      DDT(DDTensorSetRandomGlobal(dy, 5, -1, 1));
      for (DDTensor &d : dx) DDT(DDTensorDuplicate(x, &d));
      DDT(DDLayerBackward(l, dy, dx[0]));
      /* the output's storage halved without a change of its state: the backward reads it */
      for (PetscInt i = 0; i < y->layout.bulksize; i++) {
        if (dt == DD_FLOAT64) ddnn::HostArray<double>(y)[i] *= 0.5;
        else ddnn::HostArray<float>(y)[i] *= 0.5f;
      }
      DDT(DDLayerBackward(l, dy, dx[1]));
      /* its state changed: from the input, as before the output was touched */
      DDT(PetscObjectStateIncrease((PetscObject)y));
      DDT(DDLayerBackward(l, dy, dx[2]));
      const std::vector<double> d0 = GatherAll(dx[0]), d1 = GatherAll(dx[1]), d2 = GatherAll(dx[2]);
      EXPECT_NE(d1, d0) << DDActivationTypes[t] << ": the backward did not read the unchanged output";
      EXPECT_EQ(d2, d0) << DDActivationTypes[t] << ": from the input, the bits differ from the output's";
      for (DDTensor *p : {&x, &dy, &dx[0], &dx[1], &dx[2]}) DDT(DDTensorDestroy(p));
      DDT(DDLayerDestroy(&l));
    }
}

/* an output wrapping a PETSc Vec (DDTensorPlaceVec()) written through the Vec after the forward: its content
   state changes (the Vec's), and the backward takes the input */
TEST(Activation, BackwardFromInputWhenOutputWrapsVec)
{
  for (DDActivationType t : {DD_ACT_TANH, DD_ACT_SIGMOID}) {
    DDTensor x = MakeInput({{2, 1, 5, 7}}, DD_FLOAT64, 9), y, dy, dx[2];
    DDLayer  l;
    Vec      v;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(t)(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerCreateOutput(l, &y));
    DDT(VecCreateMPI(PETSC_COMM_WORLD, y->layout.size, PETSC_DETERMINE, &v));
    DDT(DDLayerForward(l, x, y)); /* y's own storage */
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 5, -1, 1));
    for (DDTensor &d : dx) DDT(DDTensorDuplicate(x, &d));
    DDT(DDLayerBackward(l, dy, dx[0]));
    DDT(DDTensorPlaceVec(y, v));
    DDT(DDLayerForward(l, x, y)); /* into the Vec */
    DDT(VecScale(v, 0.5));        /* through PETSc: the tensor's state does not change */
    DDT(DDLayerBackward(l, dy, dx[1]));
    EXPECT_EQ(GatherAll(dx[1]), GatherAll(dx[0])) << DDActivationTypes[t] << ": the backward read an output written through its Vec";
    DDT(DDTensorResetVec(y, v));
    DDT(VecDestroy(&v));
    for (DDTensor *p : {&x, &y, &dy, &dx[0], &dx[1]}) DDT(DDTensorDestroy(p));
    DDT(DDLayerDestroy(&l));
  }
}

/* an input changed through a PETSc Vec on its storage (DDTensorPlaceVec(), DDTensorCreateVec()) after the
   forward read it: the backward fails as it does for a change through the tensor; reading the Vec does not */
TEST(Activation, BackwardFailsAfterInputChangedThroughItsVec)
{
  for (int shared = 0; shared < 2; shared++) {
    DDTensor x = MakeInput({{2, 1, 5, 7}}, DD_FLOAT64, 9), y, dy, dx;
    DDLayer  l;
    Vec      v;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(DD_ACT_TANH)(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerCreateOutput(l, &y));
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 5, -1, 1));
    DDT(DDTensorDuplicate(x, &dx));
    if (shared) DDT(DDTensorCreateVec(x, &v));
    else {
      DDT(VecCreateMPI(PETSC_COMM_WORLD, x->layout.size, PETSC_DETERMINE, &v));
      DDT(DDTensorPlaceVec(x, v));
      DDT(DDTensorSetRandomGlobal(x, 3, -2, 2));
    }
    PetscReal nrm;
    DDT(DDLayerForward(l, x, y));
    DDT(VecNorm(v, NORM_2, &nrm)); /* a read */
    DDT(DDLayerBackward(l, dy, dx));
    DDT(DDLayerForward(l, x, y));
    DDT(VecScale(v, 0.5));
    DD_EXPECT_ERROR(DDLayerBackward(l, dy, dx), PETSC_ERR_ARG_WRONGSTATE, "was modified after DDLayerForward()");
    DDT(DDLayerForward(l, x, y));
    DDT(DDLayerBackward(l, dy, dx));
    if (shared) DDT(VecDestroy(&v));
    else {
      DDT(DDLayerForward(l, x, y));
      DDT(DDTensorResetVec(x, v)); /* the input's own storage again: other values */
      DD_EXPECT_ERROR(DDLayerBackward(l, dy, dx), PETSC_ERR_ARG_WRONGSTATE, "was modified after DDLayerForward()");
      DDT(VecDestroy(&v));
    }
    for (DDTensor *p : {&x, &y, &dy, &dx}) DDT(DDTensorDestroy(p));
    DDT(DDLayerDestroy(&l));
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

/*
  The main job's case: a blocked input without halo (whole channel blocks), an output and output
  gradient with the halo a consumer convolution grows, an input gradient like the input. Forward
  and backward walk the pair of storages run by run (ForEachBulkRunPair, same block order,
  different halos) and backward reads dy in place; DDTensorCopy between the two storages takes the
  same walk. Checked entry by entry against relu and its derivative.
*/
TEST(Activation, BlockedWholeBlocksOutputWithHalo)
{
  int       W = Size();
  InputSpec in;
  in.shape  = {2, 16, 3, 3 * W + 2}; /* 16 channels: two whole blocks of 8 */
  in.pshape = {1, 1, 1, W};
  in.fmt    = DD_FORMAT_BLOCKED;
  DDTensor x = MakeInput(in, DD_FLOAT32, 5), yh, dy, dx, yc;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(DD_ACT_RELU)(l);
  DDT(DDLayerSetUp(l, x));
  PetscInt lo[4] = {0, 0, 1, 1}, hi[4] = {0, 0, 1, 2};
  DDT(DDLayerCreateOutput(l, &yh));
  DDT(DDTensorSetHalo(yh, lo, hi));
  DDT(DDLayerForward(l, x, yh));
  std::vector<double> xg = GatherAll(x), yg = GatherAll(yh);
  ASSERT_EQ(yg.size(), xg.size());
  for (size_t i = 0; i < xg.size(); i++) EXPECT_EQ(yg[i], xg[i] < 0 ? 0.0 : xg[i]) << "entry " << i;
  DDT(DDTensorDuplicate(yh, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 6, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDTensorSet(dx, 7.0)); /* overwritten, not accumulated */
  DDT(DDLayerBackward(l, dy, dx));
  std::vector<double> dxg = GatherAll(dx), dyg = GatherAll(dy);
  for (size_t i = 0; i < xg.size(); i++) EXPECT_EQ(dxg[i], xg[i] <= 0 ? 0.0 : dyg[i]) << "entry " << i;
  DDT(DDTensorDuplicate(x, &yc));
  DDT(DDTensorCopy(dy, yc));
  EXPECT_EQ(GatherAll(yc), dyg);
  for (DDTensor *t : {&x, &yh, &dy, &dx, &yc}) DDT(DDTensorDestroy(t));
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

/* ---- PyTorch parity: gelu tanh, silu, elu, softplus, prelu (values from torch 1.13, float64) ---- */

/* a configuration: a type and its parameters */
struct ActCfg {
  DDActivationType  t;
  DDGeluApproximate approx    = DD_GELU_APPROXIMATE_NONE;
  PetscReal         alpha     = 1, beta = 1, threshold = 20;
  PetscInt          nprelu    = 1;
  PetscReal         preluinit = 0.25;
  std::string       name() const
  {
    std::string s = DDActivationTypes[t];
    if (t == DD_ACT_GELU && approx == DD_GELU_APPROXIMATE_TANH) s += " (tanh)";
    if (t == DD_ACT_PRELU) s += nprelu == 1 ? " (one weight)" : " (per channel)";
    return s;
  }
};

static std::function<void(DDLayer)> ConfigureCfg(const ActCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERACTIVATION));
    DDT(DDLayerActivationSetType(l, c.t));
    DDT(DDLayerActivationSetGeluApproximate(l, c.approx));
    DDT(DDLayerActivationSetAlpha(l, c.alpha));
    DDT(DDLayerActivationSetSoftplus(l, c.beta, c.threshold));
    DDT(DDLayerActivationSetPReLU(l, c.nprelu, c.preluinit));
  };
}

static void EvaluateCfg(const ActCfg &c, const std::vector<double> &pts, std::vector<double> &f, std::vector<double> &df)
{
  PetscInt n = (PetscInt)pts.size();
  DDTensor x = MakeInput({{1, n}, {}, {}, {}}, DD_FLOAT64, 1), y, dy, dx;
  DDT(DDTensorSetValuesGlobal(x, pts.data()));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureCfg(c)(l);
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

static void ExpectTorch(const std::vector<double> &got, const std::vector<double> &ref, double tol, const std::string &what)
{
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); i++) {
    if (std::isnan(ref[i])) EXPECT_TRUE(std::isnan(got[i])) << what << " entry " << i << ": PyTorch gives NaN, got " << got[i];
    else EXPECT_NEAR(got[i], ref[i], tol * (1 + std::fabs(ref[i]))) << what << " entry " << i;
  }
}

TEST(ActivationTorch, ValuesAndDerivativesIncludingNaN)
{
  const double              nan = std::nan("");
  const std::vector<double> pts = {-3.0, -0.5, 0.0, 0.7, 2.5, nan};
  std::vector<double>       f, df;
  /* torch.nn.GELU(approximate='tanh') */
  EvaluateCfg({DD_ACT_GELU, DD_GELU_APPROXIMATE_TANH}, pts, f, df);
  ExpectTorch(f, {-0.0036373920817729943, -0.15428599017485606, 0.0, 0.5305701347051167, 2.484915733910001, nan}, 1e-14, "gelu tanh");
  ExpectTorch(df, {-0.011584166630969648, 0.13263009646535764, 0.5, 0.976357218656104, 1.037951576212666, nan}, 1e-14, "gelu tanh'");
  /* torch.nn.SiLU() */
  EvaluateCfg({DD_ACT_SILU}, pts, f, df);
  ExpectTorch(f, {-0.14227761953270035, -0.1887703343990727, 0.0, 0.46773144051771626, 2.3103545499468914, nan}, 1e-14, "silu");
  ExpectTorch(df, {-0.08810410601516962, 0.2600388126973482, 0.5, 0.8233867834733425, 1.0994011113415267, nan}, 1e-14, "silu'");
  /* torch.nn.ELU(alpha=1.5): NaN input passes dy */
  ActCfg elu{DD_ACT_ELU};
  elu.alpha = 1.5;
  EvaluateCfg(elu, pts, f, df);
  ExpectTorch(f, {-1.4253193974482041, -0.5902040104310499, 0.0, 0.7, 2.5, nan}, 1e-14, "elu");
  ExpectTorch(df, {0.07468060255179591, 0.9097959895689501, 1.5, 1.0, 1.0, 1.0}, 1e-14, "elu'");
  /* torch.nn.Softplus(beta=2, threshold=3) */
  ActCfg sp{DD_ACT_SOFTPLUS};
  sp.beta      = 2;
  sp.threshold = 3;
  EvaluateCfg(sp, pts, f, df);
  ExpectTorch(f, {0.0012378425688652247, 0.15663084375911143, 0.34657359027997264, 0.8102087049592255, 2.5, nan}, 1e-14, "softplus");
  ExpectTorch(df, {0.0024726231566347748, 0.2689414213699951, 0.5, 0.8021838885585817, 1.0, nan}, 1e-14, "softplus'");
  /* torch.nn.PReLU(init=0.25): the weight at 0 and for NaN */
  EvaluateCfg({DD_ACT_PRELU}, pts, f, df);
  ExpectTorch(f, {-0.75, -0.125, 0.0, 0.7, 2.5, nan}, 1e-15, "prelu");
  ExpectTorch(df, {0.25, 0.25, 0.25, 1.0, 1.0, 0.25}, 1e-15, "prelu'");
}

/* torch.nn.PReLU(num_parameters=3), weight (0.1, -0.2, 0.3), x = 0.5 arange(12) - 2.75, dy = 0.25 arange(12) - 1, shape (2, 3, 2) */
TEST(ActivationTorch, PReLUPerChannelOnEveryPartition)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 3, fs);
  std::vector<double> xv(12), gv(12), w = {0.1, -0.2, 0.3};
  for (int i = 0; i < 12; i++) {
    xv[i] = 0.5 * i - 2.75;
    gv[i] = 0.25 * i - 1;
  }
  const std::vector<double> yref  = {-0.275, -0.225, 0.35000000000000003, 0.25, -0.22499999999999998, -0.075, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75};
  const std::vector<double> dxref = {-0.1, -0.07500000000000001, 0.1, 0.05, 0.0, 0.075, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75};
  const std::vector<double> dwref = {4.4375, 1.1875, -0.0625};
  for (auto &ps : fs) {
    if (ps[0] > 2 || ps[1] > 3 || ps[2] > 2) continue;
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST}) {
        InputSpec in;
        in.shape  = {2, 3, 2};
        in.pshape = ps;
        in.fmt    = fmt;
        DDTensor x = MakeInput(in, dt, 1), y, dy, dx;
        SetValues(x, xv);
        DDLayer l;
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        ActCfg c{DD_ACT_PRELU};
        c.nprelu = 3;
        ConfigureCfg(c)(l);
        DDT(DDLayerSetUp(l, x));
        PetscInt  np;
        DDTensor *ps_, *gs;
        DDT(DDLayerGetParameters(l, &np, &ps_));
        ASSERT_EQ(np, 1);
        EXPECT_EQ(GatherAll(ps_[0]), std::vector<double>(3, 0.25)) << "PyTorch's init";
        SetValues(ps_[0], w);
        DDT(DDLayerZeroGradients(l));
        DDT(DDLayerGetOutput(l, &y));
        DDT(DDLayerForward(l, x, y));
        DDT(DDLayerCreateOutput(l, &dy));
        SetValues(dy, gv);
        DDT(DDTensorDuplicate(x, &dx));
        DDT(DDLayerBackward(l, dy, dx));
        DDT(DDLayerGetGradients(l, &np, &gs));
        const double tol = dt == DD_FLOAT64 ? 1e-15 : 1e-6;
        std::string  what = "partition " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]) + (dt == DD_FLOAT64 ? " float64" : " float32");
        ExpectTorch(GatherAll(y), yref, tol, what + " y");
        ExpectTorch(GatherAll(dx), dxref, tol, what + " dx");
        ExpectTorch(GatherAll(gs[0]), dwref, tol, what + " dweight");
        for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
        DDT(DDLayerDestroy(&l));
      }
  }
}

static std::vector<ActCfg> NewConfigs()
{
  ActCfg g{DD_ACT_GELU}, e{DD_ACT_ELU}, s{DD_ACT_SOFTPLUS}, p1{DD_ACT_PRELU}, pc{DD_ACT_PRELU};
  g.approx    = DD_GELU_APPROXIMATE_TANH;
  e.alpha     = 0.7;
  s.beta      = 1.5;
  s.threshold = 2;
  pc.nprelu   = PETSC_DETERMINE;
  return {g, {DD_ACT_SILU}, e, s, p1, pc};
}

TEST(ActivationTorch, NewTypesOnPRanksEqualOneRank)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (const ActCfg &c : NewConfigs())
    for (size_t i = 0; i < f.size(); i++) {
      auto     &ps = f[i];
      InputSpec in;
      in.shape  = {2 * ps[0] + 1, 3 * ps[1] + 1, 4 * ps[2] + 3};
      in.pshape = ps;
      in.lo     = -3;
      in.hi     = 3;
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
        for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
          in.fmt        = fmt;
          RunResult par = RunLayer(ConfigureCfg(c), {in}, dt, 3), ser = RunLayer(ConfigureCfg(c), {Serial(in)}, dt, 3);
          /* prelu's weight gradient is a sum over the whole tensor (or channel), in a partition-dependent order */
          const double tol = c.t == DD_ACT_PRELU ? (dt == DD_FLOAT64 ? 1e-12 : 5e-5) : (dt == DD_FLOAT64 ? 1e-14 : 2e-6);
          ExpectSameRun(par, ser, tol, c.name() + " in format " + DDTensorFormats[fmt] + (dt == DD_FLOAT64 ? " float64" : " float32"));
        }
    }
}

TEST(ActivationTorch, NewTypesFiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 3, 4};
  in.pshape = {1, 1, Size() > 1 ? 2 : 1};
  for (const ActCfg &c : NewConfigs())
    for (auto range : {std::make_pair(-2.0, -0.1), std::make_pair(0.1, 2.0), std::make_pair(-3.0, 3.0)}) {
      if (c.t == DD_ACT_PRELU && range.first < 0 && range.second > 0) continue; /* the kink */
      in.lo = range.first;
      in.hi = range.second;
      SCOPED_TRACE(c.name());
      ExpectFiniteDifferences(ConfigureCfg(c), {in}, 5, 1e-8, 1e-6);
    }
}

TEST(ActivationTorch, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-a2_layer_type", "activation"));
  DDT(PetscOptionsSetValue(NULL, "-a2_layer_activation_type", "softplus"));
  DDT(PetscOptionsSetValue(NULL, "-a2_layer_activation_beta", "2"));
  DDT(PetscOptionsSetValue(NULL, "-a2_layer_activation_threshold", "3"));
  std::vector<double> pts = {-0.5, 2.5};
  DDTensor            x   = MakeInput({{1, 2}, {}, {}, {}}, DD_FLOAT64, 1), y;
  DDT(DDTensorSetValuesGlobal(x, pts.data()));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "a2_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  ExpectTorch(GatherAll(y), {0.15663084375911143, 2.5}, 1e-14, "softplus from options");
  DDT(DDLayerDestroy(&l));
  DDT(PetscOptionsSetValue(NULL, "-a2_layer_activation_type", "gelu"));
  DDT(PetscOptionsSetValue(NULL, "-a2_layer_activation_gelu_approximate", "tanh"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "a2_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  ExpectTorch(GatherAll(y), {-0.15428599017485606, 2.484915733910001}, 1e-14, "gelu tanh from options");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-a2_layer_type", "-a2_layer_activation_type", "-a2_layer_activation_beta", "-a2_layer_activation_threshold", "-a2_layer_activation_gelu_approximate"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

/* The tester's NaN outputs: non-finite parameters are errors; PyTorch's legal values (a negative leaky slope, tiny values) stay legal */
TEST(ActivationTorchBadInput, NonFiniteParameters)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DD_EXPECT_ERROR(DDLayerActivationSetNegativeSlope(l, NAN), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetNegativeSlope(): leakyrelu slope nan");
  DD_EXPECT_ERROR(DDLayerActivationSetNegativeSlope(l, -INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_negative_slope");
  DD_EXPECT_ERROR(DDLayerActivationSetAlpha(l, NAN), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerActivationSetAlpha(): elu alpha nan");
  DD_EXPECT_ERROR(DDLayerActivationSetSoftplus(l, INFINITY, 20), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_beta");
  DD_EXPECT_ERROR(DDLayerActivationSetPReLU(l, 1, NAN), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_prelu_init");
  DDT(DDLayerActivationSetNegativeSlope(l, -0.5)); /* legal in torch.nn.LeakyReLU */
  DDT(DDLayerActivationSetAlpha(l, 1e-310));       /* subnormal but finite */
  DDT(DDLayerActivationSetSoftplus(l, 1.0, INFINITY)); /* torch.nn.Softplus takes threshold=inf */
  DDT(DDLayerDestroy(&l));
}

TEST(ActivationTorchBadInput, SettingsOutsideTheEnvelope)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DD_EXPECT_ERROR(DDLayerActivationSetSoftplus(l, 0.0, 20), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_beta");
  DD_EXPECT_ERROR(DDLayerActivationSetSoftplus(l, 1.0, std::nan("")), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_threshold");
  DD_EXPECT_ERROR(DDLayerActivationSetAlpha(l, INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_alpha");
  DD_EXPECT_ERROR(DDLayerActivationSetGeluApproximate(l, (DDGeluApproximate)5), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_gelu_approximate");
  DD_EXPECT_ERROR(DDLayerActivationSetPReLU(l, -3, 0.25), PETSC_ERR_ARG_OUTOFRANGE, "-layer_activation_prelu_num_parameters");
  /* prelu: num_parameters neither 1 nor C; C weights without a channel dimension */
  DDT(DDLayerActivationSetType(l, DD_ACT_PRELU));
  DDT(DDLayerActivationSetPReLU(l, 4, 0.25));
  DDTensor x = MakeInput({{2, 3, 5}, {1, 1, Size()}, {}, {}}, DD_FLOAT64, 1), x1 = MakeInput({{7}, {}, {}, {}}, DD_FLOAT64, 1);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "num_parameters 4 must be 1 or the number of channels 3");
  DDT(DDLayerDestroy(&l));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DDT(DDLayerActivationSetType(l, DD_ACT_PRELU));
  DDT(DDLayerActivationSetPReLU(l, PETSC_DETERMINE, 0.25));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x1), PETSC_ERR_ARG_INCOMP, "needs a channel dimension");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&x1));
}
