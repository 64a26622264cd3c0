/*
  DDLAYERUPSAMPLE: P ranks equal 1 rank (outputs and input gradients) for nearest and linear
  interpolation, align_corners both ways, 1-3-D, scales 1-3 (also different per dimension),
  spatial/batch/channel splits, unbalanced and subset partitions, formats, both data types;
  the adjoint test (the layer is linear); finite differences; PyTorch's numbers derived by
  hand; inputs whose layout changed since set-up; bad input.
*/
#include "layertest.hpp"
#include <sstream>

using namespace ddtest;

struct UpCfg {
  DDUpsampleMode        mode  = DD_UPSAMPLE_LINEAR;
  std::vector<PetscInt> scale = {2};
  PetscBool             align = PETSC_FALSE;
};

static std::function<void(DDLayer)> Configure(const UpCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
    DDT(DDLayerUpsampleSetMode(l, c.mode));
    DDT(DDLayerUpsampleSetScale(l, (PetscInt)c.scale.size(), c.scale.data()));
    DDT(DDLayerUpsampleSetAlignCorners(l, c.align));
  };
}

static std::string Describe(const UpCfg &c)
{
  std::ostringstream o;
  o << (c.mode == DD_UPSAMPLE_LINEAR ? "linear" : "nearest") << " scale";
  for (auto s : c.scale) o << " " << s;
  if (c.align) o << " align_corners";
  return o.str();
}

static void CheckAgainstSerial(const UpCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 11), ser = RunLayer(Configure(c), {Serial(in)}, dt, 11);
  /* the outputs are computed from the same global indices and weights: identical; gradients sum in another order */
  ExpectSameRun(par, ser, dt == DD_FLOAT64 ? 1e-14 : 1e-6, what + " (" + Describe(c) + ")");
}

static std::vector<UpCfg> AllModes(std::vector<PetscInt> scale)
{
  std::vector<UpCfg> v(3);
  v[0].mode = DD_UPSAMPLE_NEAREST;
  v[1].align = PETSC_FALSE;
  v[2].align = PETSC_TRUE;
  for (auto &c : v) c.scale = scale;
  return v;
}

TEST(Upsample, SpatialDistribution1D2D3D)
{
  int W = Size();
  for (int D = 1; D <= 3; D++) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, D, f);
    for (auto &ps : f) {
      InputSpec in;
      in.shape  = {2, 3};
      in.pshape = {1, 1};
      std::vector<PetscInt> scale;
      for (int j = 0; j < D; j++) {
        in.shape.push_back(2 * ps[j] + 1 + j);
        in.pshape.push_back(ps[j]);
        scale.push_back(2 + (j % 2)); /* 2, 3, 2 */
      }
      for (auto &c : AllModes(scale)) CheckAgainstSerial(c, in, "spatial");
    }
  }
}

TEST(Upsample, ScalesAndOddSizes1D)
{
  int W = Size();
  for (PetscInt s = 1; s <= 3; s++)
    for (PetscInt n = W; n <= 3 * W + 2; n++) { /* pieces of 1 to 4: thin ones need input from beyond the neighbors */
      InputSpec in;
      in.shape  = {1, 2, n};
      in.pshape = {1, 1, W};
      for (auto &c : AllModes({s})) CheckAgainstSerial(c, in, "1-D n " + std::to_string(n));
    }
}

TEST(Upsample, BatchChannelSplitsFormatsAndFloat32)
{
  int W = Size();
  for (auto fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, 4, f);
    for (size_t i = 0; i < f.size(); i += 2) {
      auto     &ps = f[i];
      InputSpec in;
      in.shape  = {2 * ps[0], 3 * ps[1], 2 * ps[2] + 1, 3 * ps[3]};
      in.pshape = ps;
      in.fmt    = fmt;
      for (auto &c : AllModes({3, 2})) {
        CheckAgainstSerial(c, in, std::string("format ") + DDTensorFormats[fmt]);
        CheckAgainstSerial(c, in, std::string("float32, format ") + DDTensorFormats[fmt], DD_FLOAT32);
      }
    }
    /* the format changes no number, and the output keeps it */
    InputSpec in;
    in.shape = {2, 5, 3, 4};
    in.fmt   = fmt;
    InputSpec plain(in);
    plain.fmt = DD_FORMAT_PLAIN;
    UpCfg c;
    ExpectSameRun(RunLayer(Configure(c), {in}, DD_FLOAT64, 4), RunLayer(Configure(c), {plain}, DD_FLOAT64, 4), 1e-15, std::string("format ") + DDTensorFormats[fmt] + " vs plain");
    DDTensor x = MakeInput(in, DD_FLOAT64, 1), y;
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerGetOutput(l, &y));
    DDTensorFormat yf;
    DDT(DDTensorGetFormat(y, &yf));
    EXPECT_EQ(yf, fmt);
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(Upsample, UnbalancedAndSubsetPartitions)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in;
  in.shape  = {1, 2, 3, 4 * W};
  in.pshape = {1, 1, 1, W};
  in.lx     = {{}, {}, {}, std::vector<PetscInt>(W, 4)};
  in.lx[3][0] += 2;
  in.lx[3][W - 1] -= 2;
  for (auto &c : AllModes({2})) CheckAgainstSerial(c, in, "unbalanced");
  InputSpec sub;
  sub.shape  = {1, 2, 3, 2 * W + 1};
  sub.pshape = {1, 1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  for (auto &c : AllModes({3})) CheckAgainstSerial(c, sub, "subset of ranks");
}

TEST(Upsample, ReplicatedDimensions)
{
  int      W  = Size();
  PetscInt Pr = W % 2 == 0 ? 2 : W, Ps = W / Pr;
  for (PetscInt rep : {1, 2}) {
    std::vector<PetscInt> shape = {2, 3, 4, 3 * Ps + 1}, ps = {1, 1, 1, Ps};
    ps[rep]                     = Pr;
    for (auto &c : AllModes({2, 3})) {
      InputSpec in;
      in.shape = shape;
      ExpectSameRun(RunReplicated(Configure(c), shape, ps, rep, 11), RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 11), 1e-14, "replicated dimension " + std::to_string(rep) + " (" + Describe(c) + ")");
    }
  }
}

TEST(Upsample, AdjointTest)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f)
    for (auto &c : AllModes({2, 3})) {
      DDTensor x = MakeInput({{2, 3, 3 * ps[0] + 1, 2 * ps[1] + 2}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
      DDLayer  l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      PetscReal err;
      DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
      EXPECT_LT(err, 1e-14) << Describe(c);
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
}

TEST(Upsample, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 2, 3, 4};
  in.pshape = {1, 1, 1, Size() > 1 ? 2 : 1};
  for (auto &c : AllModes({2, 3})) ExpectFiniteDifferences(Configure(c), {in}, 9, 1e-7);
  InputSpec in3;
  in3.shape  = {1, 2, 2, 3, 3};
  in3.pshape = {1, 1, 1, 1, Size() > 1 ? 2 : 1};
  for (auto &c : AllModes({2})) ExpectFiniteDifferences(Configure(c), {in3}, 10, 1e-7);
}

/* Runs a layer on given global input values and output gradient; returns y and dx */
static RunResult RunValues(const std::function<void(DDLayer)> &configure, const InputSpec &spec, const std::vector<double> &xv, const std::vector<double> &dyv, DDDataType dt)
{
  RunResult R;
  DDTensor  x = MakeInput(spec, dt, 1), y, dy, dx;
  SetValues(x, xv);
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  R.y = GatherAll(y);
  if (!dyv.empty()) {
    PetscInt N;
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorGetSize(dy, &N));
    EXPECT_EQ((size_t)N, dyv.size());
    if ((size_t)N == dyv.size()) SetValues(dy, dyv);
    DDT(DDTensorDuplicate(x, &dx));
    DDT(DDTensorSet(dx, 777.0));
    DDT(DDLayerBackward(l, dy, dx));
    R.dx.push_back(GatherAll(dx));
    DDT(DDTensorDestroy(&dx));
    DDT(DDTensorDestroy(&dy));
  }
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  return R;
}

static void ExpectValues(const std::vector<double> &got, const std::vector<double> &want, double tol, const std::string &what)
{
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++) EXPECT_NEAR(got[i], want[i], tol) << what << " entry " << i;
}

static InputSpec SplitLast(std::vector<PetscInt> shape, PetscInt maxP)
{
  InputSpec in;
  in.shape  = shape;
  in.pshape = std::vector<PetscInt>(shape.size(), 1);
  in.pshape.back() = PetscMin((PetscInt)Size(), maxP);
  for (PetscInt r = 0; r < in.pshape.back(); r++) in.ranks.push_back((PetscMPIInt)r);
  return in;
}

/*
  PyTorch's numbers, derived by hand from torch.nn.Upsample's definitions:
  1-D [1,2,3], scale 2: linear [1, 1.25, 1.75, 2.25, 2.75, 3] (sources 0, .25, .75, 1.25, 1.75,
  2.25 with the first clamped at 0 and the last index clamped at 2); align_corners sources
  o 2/5: [1, 1.4, 1.8, 2.2, 2.6, 3]; nearest [1,1,2,2,3,3], scale 3 [1,1,1,2,2,2,3,3,3].
  Gradient of linear for dy = [1..6]: x0 gets 1 + .75*2 + .25*3, x1 .25*2 + .75*3 + .75*4 +
  .25*5, x2 .25*4 + .75*5 + 6 = [3.25, 7, 10.75].
  2-D [[1,2],[3,4]], scale 2 (the torch.nn.Upsample documentation's example).
*/
TEST(Upsample, HandComputedPyTorch)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    const double tol = dt == DD_FLOAT64 ? 1e-15 : 1e-6;
    InputSpec    s3  = SplitLast({1, 1, 3}, 3);
    UpCfg        c;
    RunResult    r = RunValues(Configure(c), s3, {1, 2, 3}, {1, 2, 3, 4, 5, 6}, dt);
    ExpectValues(r.y, {1, 1.25, 1.75, 2.25, 2.75, 3}, tol, "linear");
    ExpectValues(r.dx[0], {3.25, 7, 10.75}, tol, "linear gradient");
    c.align = PETSC_TRUE;
    r       = RunValues(Configure(c), s3, {1, 2, 3}, {1, 2, 3, 4, 5, 6}, dt);
    ExpectValues(r.y, {1, 1.4, 1.8, 2.2, 2.6, 3}, 4 * tol, "linear align_corners");
    /* sources 0, .4, .8, 1.2, 1.6, 2: x0 1 + .6*2 + .2*3, x1 .4*2 + .8*3 + .8*4 + .4*5, x2 .2*4 + .6*5 + 6 */
    ExpectValues(r.dx[0], {2.8, 8.4, 9.8}, 8 * tol, "linear align_corners gradient");
    c = UpCfg();
    c.mode = DD_UPSAMPLE_NEAREST;
    r      = RunValues(Configure(c), s3, {1, 2, 3}, {1, 2, 3, 4, 5, 6}, dt);
    ExpectValues(r.y, {1, 1, 2, 2, 3, 3}, 0, "nearest");
    ExpectValues(r.dx[0], {3, 7, 11}, 0, "nearest gradient");
    c.scale = {3};
    r       = RunValues(Configure(c), s3, {1, 2, 3}, {}, dt);
    ExpectValues(r.y, {1, 1, 1, 2, 2, 2, 3, 3, 3}, 0, "nearest scale 3");
    /* 2-D */
    InputSpec s22 = SplitLast({1, 1, 2, 2}, 2);
    c             = UpCfg();
    r             = RunValues(Configure(c), s22, {1, 2, 3, 4}, {}, dt);
    ExpectValues(r.y, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}, tol, "bilinear");
    c.align = PETSC_TRUE;
    r       = RunValues(Configure(c), s22, {1, 2, 3, 4}, {}, dt);
    const double t = 1. / 3;
    ExpectValues(r.y, {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t, 3 + 2 * t, 4}, 8 * tol, "bilinear align_corners");
    c.mode  = DD_UPSAMPLE_NEAREST;
    c.align = PETSC_FALSE;
    r       = RunValues(Configure(c), s22, {1, 2, 3, 4}, {}, dt);
    ExpectValues(r.y, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0, "nearest 2-D");
  }
}

TEST(Upsample, InputLayoutChangedSinceSetUp)
{
  InputSpec in = SplitLast({2, 3, 3, 3 * Size() + 1}, Size());
  UpCfg     c;
  DDTensor  x = MakeInput(in, DD_FLOAT64, 3), y, dy, dx, dx2, y2;
  DDLayer   l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> y0 = GatherAll(y);
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 4, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  std::vector<double> dx0 = GatherAll(dx);
  PetscInt            lo[4] = {0, 1, 2, 3}, hi[4] = {1, 0, 1, 2};
  DDT(DDTensorEnsureHalo(x, lo, hi));
  DDT(DDTensorDuplicate(y, &y2));
  DDT(DDTensorSetHalo(y2, lo, hi));
  DDT(DDTensorDuplicate(x, &dx2));
  DDT(DDLayerForward(l, x, y2));
  EXPECT_LT(RelDiff(GatherAll(y2), y0), 1e-15);
  DDT(DDTensorSetHalo(dy, lo, hi));
  DDT(DDLayerBackward(l, dy, dx2));
  EXPECT_LT(RelDiff(GatherAll(dx2), dx0), 1e-15);
  for (DDTensor *t : {&dy, &dx, &dx2, &y2, &x}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
}

TEST(Upsample, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_type", "upsample"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_upsample_mode", "linear"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_upsample_scale", "3,2"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_upsample_align_corners", "true"));
  InputSpec in          = SplitLast({1, 2, 3, 2 * Size() + 1}, Size());
  auto      fromOptions = [](DDLayer l) {
    DDT(DDLayerSetOptionsPrefix(l, "up1_"));
    DDT(DDLayerSetFromOptions(l));
  };
  DDTensor x = MakeInput(in, DD_FLOAT64, 1), y;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  fromOptions(l);
  DDT(DDLayerSetUp(l, x));
  const PetscInt *shape;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[2], 9);
  EXPECT_EQ(shape[3], 2 * (2 * Size() + 1));
  DDT(DDLayerDestroy(&l));
  UpCfg c;
  c.scale = {3, 2};
  c.align = PETSC_TRUE;
  ExpectSameRun(RunLayer(fromOptions, {in}, DD_FLOAT64, 2), RunLayer(Configure(c), {in}, DD_FLOAT64, 2), 1e-15, "options vs setters");
  /* wrong arity: three factors for a 2-D input */
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_upsample_scale", "2,2,2"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  fromOptions(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "-up1_layer_upsample_scale has 3 entries but the input has 2 spatial dimension");
  DDT(DDLayerDestroy(&l));
  /* a factor below 1 given as an option */
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_upsample_scale", "0"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  fromOptions(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "-up1_layer_upsample_scale entry 0 must be at least 1");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-up1_layer_type", "-up1_layer_upsample_mode", "-up1_layer_upsample_scale", "-up1_layer_upsample_align_corners"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(UpsampleBadInput, ScaleArityModeAndShape)
{
  DDTensor x = MakeInput(SplitLast({1, 2, 3, 2 * Size()}, Size()), DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
  /* no scale */
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs -layer_upsample_scale");
  /* a factor below 1 (downsampling is a pooling) */
  PetscInt bad[2] = {2, 0};
  DD_EXPECT_ERROR(DDLayerUpsampleSetScale(l, 2, bad), PETSC_ERR_ARG_OUTOFRANGE, "Scale factor 0 (entry 1) must be at least 1");
  /* four factors */
  PetscInt four[4] = {2, 2, 2, 2};
  DD_EXPECT_ERROR(DDLayerUpsampleSetScale(l, 4, four), PETSC_ERR_ARG_SIZ, "The scale needs 1 to 3 entries");
  /* three factors for a 2-D input */
  PetscInt three[3] = {2, 2, 2};
  DDT(DDLayerUpsampleSetScale(l, 3, three));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "-layer_upsample_scale has 3 entries but the input has 2 spatial dimension");
  /* align_corners with nearest, as torch.nn.Upsample refuses it */
  PetscInt two = 2;
  DDT(DDLayerUpsampleSetScale(l, 1, &two));
  DDT(DDLayerUpsampleSetMode(l, DD_UPSAMPLE_NEAREST));
  DDT(DDLayerUpsampleSetAlignCorners(l, PETSC_TRUE));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "align_corners applies to linear interpolation only");
  DDT(DDLayerDestroy(&l));
  /* setters of another type; a tensor that is not N x C x spatial */
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERPOOL));
  DD_EXPECT_ERROR(DDLayerUpsampleSetMode(l, DD_UPSAMPLE_LINEAR), PETSC_ERR_ARG_WRONG, "needs a upsample layer");
  DDT(DDLayerDestroy(&l));
  DDTensor x2 = MakeInput({{3, 8}, {}, {}, {}}, DD_FLOAT64, 1);
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(UpCfg())(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x2), PETSC_ERR_ARG_INCOMP, "1 to 3 spatial dimensions");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x2));
  DDT(DDTensorDestroy(&x));
}

/* ---- PyTorch parity: nearest-exact, real and per-dimension scale factors, target sizes (torch 1.13 F.interpolate) ---- */

struct TorchUp {
  DDUpsampleMode         mode;
  PetscBool              align;
  std::vector<PetscReal> sf;   /* scale factors (empty: a size) */
  std::vector<PetscInt>  size; /* output size (empty: scale factors) */
  std::vector<PetscInt>  out;  /* the output's spatial shape */
  std::vector<double>    y8;   /* its first 8 entries */
  double                 ysum, dxsum; /* sum y_i cos(0.37 i) and sum dx_i cos(0.37 i), dy_i = cos(0.1 i) */
};

/* x = sin(0.3 i), shape (1, 2, 4, 5) */
static const std::vector<TorchUp> kTorchUp = {
  {DD_UPSAMPLE_NEAREST_EXACT, PETSC_FALSE, {2.5}, {}, {10, 12}, {0.0, 0.0, 0.29552020666133955, 0.29552020666133955, 0.29552020666133955, 0.5646424733950354, 0.5646424733950354, 0.7833269096274833}, -20.144150426372363, 10.225560502505083},
  {DD_UPSAMPLE_NEAREST, PETSC_FALSE, {1.7, 2.3}, {}, {6, 11}, {0.0, 0.0, 0.0, 0.29552020666133955, 0.29552020666133955, 0.5646424733950354, 0.5646424733950354, 0.7833269096274833}, -6.339449310891129, 43.32037214358009},
  {DD_UPSAMPLE_LINEAR, PETSC_FALSE, {1.5, 2.25}, {}, {6, 11}, {0.0, 0.04925336777688991, 0.18059568184859637, 0.3104714437021004, 0.43008134002818743, 0.5496912363542744, 0.6496864208187652, 0.7468795035887419}, 1.6241987048668272, 39.212868882450586},
  {DD_UPSAMPLE_LINEAR, PETSC_TRUE, {}, {9, 11}, {9, 11}, {0.0, 0.11820808266453582, 0.23641616532907164, 0.34934466000807873, 0.4569935667015571, 0.5646424733950354, 0.6521162478880146, 0.7395900223809937}, 3.6431130311398734, -9.410499255860316},
  {DD_UPSAMPLE_LINEAR, PETSC_FALSE, {}, {7, 13}, {7, 13}, {0.0, 0.02273232358933382, 0.13639394153600287, 0.25005555948267194, 0.3576253451383463, 0.46113390926669084, 0.5646424733950354, 0.6487518719459769}, -1.8148587351134997, -5.920696213339387},
  {DD_UPSAMPLE_NEAREST_EXACT, PETSC_FALSE, {}, {3, 10}, {3, 10}, {0.0, 0.0, 0.29552020666133955, 0.29552020666133955, 0.5646424733950354, 0.5646424733950354, 0.7833269096274833, 0.7833269096274833}, -4.227954853496153, 0.6041710941761567},
  {DD_UPSAMPLE_NEAREST, PETSC_FALSE, {0.6}, {}, {2, 3}, {0.0, 0.29552020666133955, 0.7833269096274833, 0.9974949866040544, 0.9738476308781953, 0.675463180551151, -0.27941549819892586, 0.016813900484349713}, -1.4949111054898339, -0.7301096317017498},
  /* nearest with non-integer factors whose outputs are n and 2n long: torch's NCHW forward takes floor(o r) (W reads 0 0 0 1 1 2 ..., not 0 0 1 1 ...; H 0 0 1 2, not a copy);
     dxsum is the adjoint of that forward (torch's own backward takes nearest_idx()'s shortcuts and gives 2.4327124616880993) */
  {DD_UPSAMPLE_NEAREST, PETSC_FALSE, {1.2, 2.1}, {}, {4, 10}, {0.0, 0.0, 0.0, 0.29552020666133955, 0.29552020666133955, 0.5646424733950354, 0.5646424733950354, 0.7833269096274833}, -2.4625020544898253, 8.358112582760086},
  {DD_UPSAMPLE_LINEAR, PETSC_FALSE, {0.7, 1.3}, {}, {2, 6}, {0.2137489257008688, 0.36225514411749427, 0.520306664474868, 0.6539272779970083, 0.7551520164730391, 0.8067519806960687, 0.4469682146827913, 0.3158240452493444}, 3.801624132706969, -0.10047314902032017},
};

static std::function<void(DDLayer)> ConfigureTorch(const TorchUp &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
    DDT(DDLayerUpsampleSetMode(l, c.mode));
    DDT(DDLayerUpsampleSetAlignCorners(l, c.align));
    if (!c.sf.empty()) DDT(DDLayerUpsampleSetScaleFactors(l, (PetscInt)c.sf.size(), c.sf.data()));
    else DDT(DDLayerUpsampleSetSize(l, (PetscInt)c.size.size(), c.size.data()));
  };
}

TEST(UpsampleTorch, ScaleFactorsSizesAndNearestExactOnEveryPartition)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 2, fs);
  std::vector<double> xv(40);
  for (int i = 0; i < 40; i++) xv[i] = std::sin(0.3 * i);
  for (size_t ci = 0; ci < kTorchUp.size(); ci++) {
    const TorchUp &c = kTorchUp[ci];
    const PetscInt M = 2 * c.out[0] * c.out[1];
    std::vector<double> dyv(M);
    for (PetscInt i = 0; i < M; i++) dyv[i] = std::cos(0.1 * i);
    for (auto &ps : fs) {
      if (ps[0] > 4 || ps[1] > 5) continue;
      for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
        InputSpec in;
        in.shape    = {1, 2, 4, 5};
        in.pshape   = {1, 1, ps[0], ps[1]};
        RunResult r = RunValues(ConfigureTorch(c), in, xv, dyv, dt);
        std::string what = "case " + std::to_string(ci) + " (" + DDUpsampleModes[c.mode] + "), partition " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + (dt == DD_FLOAT64 ? " float64" : " float32");
        ASSERT_EQ(r.y.size(), (size_t)M) << what;
        const double tol = dt == DD_FLOAT64 ? 1e-13 : 1e-5;
        ExpectValues(std::vector<double>(r.y.begin(), r.y.begin() + 8), c.y8, tol, what + " y");
        double ys = 0, dxs = 0;
        for (PetscInt i = 0; i < M; i++) ys += r.y[i] * std::cos(0.37 * i);
        for (int i = 0; i < 40; i++) dxs += r.dx[0][i] * std::cos(0.37 * i);
        EXPECT_NEAR(ys, c.ysum, tol * 100) << what << " weighted sum of y";
        EXPECT_NEAR(dxs, c.dxsum, tol * 100) << what << " weighted sum of dx";
      }
    }
  }
}

TEST(UpsampleTorch, DistributedEqualsSerialAdjointAndFiniteDifferences)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 2, fs);
  for (size_t ci = 0; ci < kTorchUp.size(); ci++)
    for (auto &ps : fs) {
      InputSpec in;
      in.shape  = {2, 3, 3 * ps[0] + 1, 2 * ps[1] + 3};
      in.pshape = {1, 1, ps[0], ps[1]};
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST})
        for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
          in.fmt        = fmt;
          RunResult par = RunLayer(ConfigureTorch(kTorchUp[ci]), {in}, dt, 5), ser = RunLayer(ConfigureTorch(kTorchUp[ci]), {Serial(in)}, dt, 5);
          ExpectSameRun(par, ser, dt == DD_FLOAT64 ? 1e-14 : 1e-6, "case " + std::to_string(ci) + " " + DDTensorFormats[fmt]);
        }
      in.fmt = DD_FORMAT_PLAIN;
      DDTensor  x = MakeInput(in, DD_FLOAT64, 2);
      DDLayer   l;
      PetscReal err;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      ConfigureTorch(kTorchUp[ci])(l);
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
      EXPECT_LT(err, 1e-13) << "case " << ci;
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
  InputSpec in;
  in.shape  = {1, 2, 4, 2 * W + 1};
  in.pshape = {1, 1, 1, W};
  ExpectFiniteDifferences(ConfigureTorch(kTorchUp[2]), {in}, 3, 1e-8, 1e-6);
}

TEST(UpsampleTorch, OptionsAndBadSettings)
{
  DDT(PetscOptionsSetValue(NULL, "-ut_layer_type", "upsample"));
  DDT(PetscOptionsSetValue(NULL, "-ut_layer_upsample_mode", "nearest-exact"));
  DDT(PetscOptionsSetValue(NULL, "-ut_layer_upsample_size", "3,10"));
  std::vector<double> xv(40);
  for (int i = 0; i < 40; i++) xv[i] = std::sin(0.3 * i);
  InputSpec in;
  in.shape    = {1, 2, 4, 5};
  RunResult r = RunValues([](DDLayer l) { DDT(DDLayerSetOptionsPrefix(l, "ut_")); DDT(DDLayerSetFromOptions(l)); }, in, xv, {}, DD_FLOAT64);
  ASSERT_EQ(r.y.size(), (size_t)60);
  ExpectValues(std::vector<double>(r.y.begin(), r.y.begin() + 8), kTorchUp[5].y8, 1e-15, "nearest-exact size 3,10 from the options");
  for (auto o : {"-ut_layer_type", "-ut_layer_upsample_mode", "-ut_layer_upsample_size"}) DDT(PetscOptionsClearValue(NULL, o));
  DDLayer         l;
  const PetscReal bad[] = {1.5, -2}, small[] = {0.1};
  const PetscInt  zero[] = {0}, three[] = {2, 2, 2};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
  DD_EXPECT_ERROR(DDLayerUpsampleSetScaleFactors(l, 2, bad), PETSC_ERR_ARG_OUTOFRANGE, "-layer_upsample_scale_factor");
  DD_EXPECT_ERROR(DDLayerUpsampleSetSize(l, 1, zero), PETSC_ERR_ARG_OUTOFRANGE, "-layer_upsample_size");
  DDTensor x = MakeInput(in, DD_FLOAT64, 1);
  DDT(DDLayerUpsampleSetSize(l, 3, three));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "layer_upsample_size has 3 entries");
  DDT(DDLayerUpsampleSetScaleFactors(l, 1, small));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "gives an empty output");
  DDT(DDLayerUpsampleSetMode(l, DD_UPSAMPLE_NEAREST_EXACT));
  DDT(DDLayerUpsampleSetAlignCorners(l, PETSC_TRUE));
  DDT(DDLayerUpsampleSetSize(l, 1, three));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "align_corners applies to linear interpolation only");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(UpsampleTorch, EveryBackendEqualsTheReferenceLoops)
{
  InputSpec in;
  in.shape  = {2, 3, 5, 3 * Size() + 2};
  in.pshape = {1, 1, 1, Size()};
  for (size_t ci = 0; ci < kTorchUp.size(); ci++)
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
      auto on = [&](const char *b) {
        return [ci, b](DDLayer l) {
          ConfigureTorch(kTorchUp[ci])(l);
          DDT(DDLayerSetBackend(l, b));
        };
      };
      RunResult ref = RunLayer(on("/cpu/ref"), {in}, dt, 6);
      ExpectSameRun(RunLayer(on("/cpu/blas"), {in}, dt, 6), ref, dt == DD_FLOAT64 ? 1e-15 : 1e-6, "case " + std::to_string(ci) + " fast loops vs reference");
    }
}
