/*
  DDLAYERLAYERNORM: PyTorch's values (torch.nn.LayerNorm on (N, C, H, W) normalizing the last 2
  and 3 dimensions: output, input gradient, weight and bias gradients, float64 and float32) on
  every partition of the ranks, the normalized dimensions split included; P ranks equal 1 rank on
  unbalanced, empty-piece, subset and channels-last inputs; finite differences; the
  adjoint test wrt the affine parameters; options; bad settings.
*/
#include "layertest.hpp"

using namespace ddtest;

/* torch 1.13, float64: x_i = sin(0.37 i + 0.1) (1 + 0.3 (i mod 5)), w_i = 1 + 0.1 cos(i), b_i = 0.05 i - 0.2, dy_i = cos(0.5 i) */
static const double k2_y[]  = {-1.814352432318258, -0.96350949725337953, -0.017707073526814946, 0.77905725712115992, 1.421618157712377, -0.24581584994718417, 1.3299049719989788, 0.95940618564372149, 0.21423267883906194, -0.69252377575477242, -0.64921070202631515, -1.3521785729535998, -0.9860043361357449, -1.2838079874469435, -1.1212554236487386, 0.42346399153957287, 0.78955813545748688, 1.5777146650071199, -1.7654924058887551, 1.2721309841942132, -1.2380431400811847, 0.044574498429796529, 0.70713573294337739, 0.46118842371123497, 1.5270827200157511, 0.62403194157160469, 0.18769042436980662, -0.30579183961474266, -0.84442970641285642, -1.4074307161620006, -1.1266270388402335, -1.2307293518866951, -0.84286917285769225, -0.0781395614421595, 1.0853715348185717, 1.6057106184554844};
static const double k2_dx[] = {0.33685018096872144, 0.51354345931033052, 0.45887826322435066, 0.32315373482457166, 0.046614828537963504, -1.6790404668659376, 0.14480807122685513, -0.0050657810607603881, -0.13642190176151947, -0.43382870756054348, 0.18866356057353872, 0.24184475858242999, 0.30840489540656862, 0.0091037343619290167, -0.36991556486438981, 0.28317993399806496, -0.046714366351368442, -0.18405863255080412, -0.97315132816951699, -2.9960571075800093, -0.42276948385467872, 0.05740837498140916, 1.1681004013515204, 3.1664691432712759, -0.30061999986743754, 0.18361738838763508, 0.19922017529839664, 0.13510493191972472, 0.015061242405292719, -0.23238373814361124, 0.15517921477366869, -0.037845450642721934, -0.025143567440496006, -0.073067364400813739, -0.28215867524738591, 0.26303584295774735};
static const double k2_dw[] = {-0.26902220600917903, -2.3229255418684107, 1.0397896776732296, 0.20068959131339106, -1.3926593023615612, -0.60192669030812107};
static const double k2_db[] = {0.14321357403891444, -0.060113839509082112, -0.24872328860180848, -0.37643660211686497, -0.41198510674824229, -0.34666528876473712};
static const double k3_y[]  = {-0.11469754552514781, 0.3784921658149159, 0.88126597666241469, 1.3304221907280411, 1.7740732126826499, 0.86892319174941091, 0.99459360975487598, 0.79127379268995335, 0.32342389644491265, -0.25121821618013568, -0.19416983230349655, -0.62467882849312617, -1.0915863320432335, -1.3214703362165807, -1.1392610517985786, 0.067683190821623676, 0.32674360329392554, 0.78505680550481804, 0.60964619186747626, 1.3485208394415833, 0.66128246876245345, 0.95369455916054824, 1.1917868200018846, 1.2705744888028052, 0.97890272841469239, 0.18410895519566381, -0.16304885751130063, -0.57407784035679699, -1.0537036006300384, -1.6020151713351884, -0.57515713036282679, -0.63896505231060363, -0.37463501572817831, 0.12505465775550859, 0.76825963235334405, 1.0161326917680369};
static const double k3_dx[] = {0.88826568049173549, 0.88182294845961007, 0.7078995131658059, 0.48843175009058909, 0.22145093343553673, -0.53322216556075852, -0.75282772204099535, -0.76058385758688862, -0.60741094282474606, -0.44702408263248533, -0.051528775082906451, 0.18879804864622074, 0.33927091587300739, 0.27489142767716379, 0.016331054108645757, 0.0068534887457706722, -0.30955584308796558, -0.55186237187734, -0.75668526809165737, -0.82292786817599106, -0.58366193807074263, -0.26255957969606658, 0.11415389175167792, 0.55253191561211923, 0.94348776294040537, 1.1003352460858375, 0.95590052932901237, 0.6617549943475225, 0.31401049005347859, -0.094350480022817734, -0.54388604116529582, -0.75560270692395992, -0.6749373948709283, -0.40432813803688927, -0.072563265415773237, 0.32932785035006806};
static const double k3_dw[] = {-0.59308244759572082, -0.97766431915583485, -0.11330534119309361, -0.42136105244546518, -0.78426333963222217, -0.064340530298608173, -0.13136238825218949, -0.52677740726277333, -0.41617815336971886, -0.42316179229876416, -0.35507204349614668, 0.0020912025487854033, -0.63756095716342287, -0.60921166674990523, -0.39286811840985153, 0.14208645369023712, -0.007232714941773433, -0.0009888701207310148};
static const double k3_db[] = {0.08886973811532306, -0.11958959430600569, -0.29876922320831267, -0.40479972632828959, -0.41172113855909165, -0.31783885679392782, -0.14613853786795328, 0.061341591887784319, 0.25380316058658425, 0.38412486387911232, 0.42039940367105988, 0.35374550750255501, 0.20048237379154465, -0.0018658370908607447, -0.20375722598008006, -0.3557617396676877, -0.42066337186021047, -0.38257193947336432};

struct LNCfg {
  PetscInt  k       = 2;
  PetscReal eps     = 1e-5;
  bool      uniform = true;
};

static std::function<void(DDLayer)> Configure(const LNCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERLAYERNORM));
    DDT(DDLayerLayerNormSetDimensions(l, c.k));
    DDT(DDLayerLayerNormSetEpsilon(l, c.eps));
    if (c.uniform) DDT(DDLayerSetInitType(l, DD_INIT_UNIFORM));
  };
}

static void CheckAgainstSerial(const LNCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64, double tol = 1e-12)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 13), ser = RunLayer(Configure(c), {Serial(in)}, dt, 13);
  ExpectSameRun(par, ser, tol, what);
}

static std::vector<double> Seq(PetscInt n, const std::function<double(PetscInt)> &f)
{
  std::vector<double> v(n);
  for (PetscInt i = 0; i < n; i++) v[i] = f(i);
  return v;
}

static double MaxDiff(const std::vector<double> &a, const double *b)
{
  double e = 0;
  for (size_t i = 0; i < a.size(); i++) e = std::max(e, std::fabs(a[i] - b[i]));
  return e;
}

TEST(LayerNorm, PyTorchValuesOnEveryPartition)
{
  const std::vector<PetscInt>        shape = {2, 3, 2, 3};
  std::vector<std::vector<PetscInt>> f;
  Factorizations(Size(), 4, f);
  int tried = 0;
  for (auto &ps : f) {
    bool fits = true;
    for (int j = 0; j < 4; j++) fits = fits && ps[j] <= shape[j];
    if (!fits) continue;
    tried++;
    for (PetscInt k : {2, 3})
      for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
        const double  tol = dt == DD_FLOAT64 ? 1e-13 : 2e-5;
        const double *ry = k == 2 ? k2_y : k3_y, *rdx = k == 2 ? k2_dx : k3_dx, *rdw = k == 2 ? k2_dw : k3_dw, *rdb = k == 2 ? k2_db : k3_db;
        const PetscInt m = k == 2 ? 6 : 18;
        DDTensor       x = MakeInput({shape, ps, {}, {}}, dt, 1), y, dy, dx, *p, *g;
        DDLayer        l;
        PetscInt       np;
        auto           xv = Seq(36, [](PetscInt i) { return std::sin(0.37 * i + 0.1) * (1 + 0.3 * (i % 5)); });
        auto           dv = Seq(36, [](PetscInt i) { return std::cos(0.5 * i); });
        SetValues(x, xv);
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        DDT(DDLayerSetType(l, DDLAYERLAYERNORM));
        DDT(DDLayerLayerNormSetNormalizedShape(l, k, shape.data() + 4 - k));
        DDT(DDLayerSetUp(l, x));
        DDT(DDLayerInitializeParameters(l, 3));
        DDT(DDLayerGetParameters(l, &np, &p));
        ASSERT_EQ(np, 2);
        EXPECT_EQ(GatherAll(p[0]), std::vector<double>(m, 1.0)) << "torch's initial weight";
        EXPECT_EQ(GatherAll(p[1]), std::vector<double>(m, 0.0)) << "torch's initial bias";
        auto wv = Seq(m, [](PetscInt i) { return 1 + 0.1 * std::cos((double)i); }), bv = Seq(m, [](PetscInt i) { return 0.05 * i - 0.2; });
        SetValues(p[0], wv);
        SetValues(p[1], bv);
        DDT(DDLayerGetOutput(l, &y));
        DDT(DDLayerForward(l, x, y));
        DDT(DDLayerCreateOutput(l, &dy));
        SetValues(dy, dv);
        DDT(DDTensorDuplicate(x, &dx));
        DDT(DDLayerZeroGradients(l));
        DDT(DDLayerBackward(l, dy, dx));
        DDT(DDLayerGetGradients(l, &np, &g));
        std::string what = "k " + std::to_string(k) + (dt == DD_FLOAT64 ? " float64" : " float32") + " partition " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]) + "x" + std::to_string(ps[3]);
        EXPECT_LT(MaxDiff(GatherAll(y), ry), tol) << what;
        EXPECT_LT(MaxDiff(GatherAll(dx), rdx), 4 * tol) << what;
        EXPECT_LT(MaxDiff(GatherAll(g[0]), rdw), 4 * tol) << what;
        EXPECT_LT(MaxDiff(GatherAll(g[1]), rdb), 4 * tol) << what;
        for (DDTensor *t : {&dx, &dy, &x}) DDT(DDTensorDestroy(t));
        DDT(DDLayerDestroy(&l));
      }
  }
  EXPECT_GT(tried, 0);
}

TEST(LayerNorm, NormalizedDimensionsSplitUnbalancedAndEmpty)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  LNCfg c;
  /* the last dimension split unevenly, one piece empty when W > 2 */
  InputSpec in;
  in.shape  = {3, 4, 2 * W + 1};
  in.pshape = {1, 1, W};
  in.lx     = {{}, {}, std::vector<PetscInt>(W, 2)};
  in.lx[2][0] += 1;
  if (W > 2) {
    in.lx[2][0] += 2;
    in.lx[2][1] = 0;
  }
  for (PetscInt k : {1, 2}) {
    c.k = k;
    CheckAgainstSerial(c, in, "unbalanced last dimension, k " + std::to_string(k));
    CheckAgainstSerial(c, in, "unbalanced last dimension float32, k " + std::to_string(k), DD_FLOAT32, 2e-5);
  }
  /* the two normalized dimensions and the batch split together */
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (auto &ps : f) {
    InputSpec b;
    b.shape  = {ps[0] + 1, 2 * ps[1] + 1, 3 * ps[2] - 1};
    b.pshape = ps;
    c.k      = 2;
    CheckAgainstSerial(c, b, "batch x normalized split " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]));
  }
  /* a subset of the ranks */
  InputSpec sub;
  sub.shape  = {2, 5, 2 * W};
  sub.pshape = {1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  CheckAgainstSerial(c, sub, "subset of ranks");
}

TEST(LayerNorm, BlockedAndChannelsLastFormats)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto      ps = f[f.size() / 2];
  InputSpec in;
  in.shape  = {2, 20, 2 * ps[0] + 1, 3 * ps[1]};
  in.pshape = {1, 1, ps[0], ps[1]};
  LNCfg c;
  c.k            = 3;
  RunResult  ref = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 23);
  InputSpec  cl  = in;
  cl.fmt         = DD_FORMAT_CHANNELS_LAST;
  ExpectSameRun(RunLayer(Configure(c), {cl}, DD_FLOAT64, 23), ref, 1e-12, "channels-last float64");
  ExpectSameRun(RunLayer(Configure(c), {cl}, DD_FLOAT32, 23), ref, 2e-5, "channels-last float32");
}

TEST(LayerNorm, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 3, 3, 4};
  in.pshape = {1, 1, Size() > 1 ? 2 : 1, 1};
  for (PetscInt k : {1, 2, 3}) {
    LNCfg c;
    c.k = k;
    ExpectFiniteDifferences(Configure(c), {in}, 9 + k, 1e-7);
  }
  InputSpec nf; /* (N, F): the transformer case */
  nf.shape = {3, 7};
  nf.pshape = {1, Size() > 1 ? 2 : 1};
  LNCfg c;
  c.k = 1;
  ExpectFiniteDifferences(Configure(c), {nf}, 10, 1e-7);
}

TEST(LayerNorm, AdjointTestWrtParameters)
{
  std::vector<std::vector<PetscInt>> f;
  Factorizations(Size(), 3, f);
  for (auto &ps : f) {
    DDTensor  x = MakeInput({{ps[0] + 1, 2 * ps[1] + 1, 3 * ps[2] + 1}, ps, {}, {}}, DD_FLOAT64, 3);
    DDLayer   l;
    PetscReal err;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(LNCfg())(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err)); /* y is linear in (weight, bias) */
    EXPECT_LT(err, 1e-14);
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(LayerNorm, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-ln_layer_type", "layernorm"));
  DDT(PetscOptionsSetValue(NULL, "-ln_layer_layernorm_normalized_shape", "4"));
  DDT(PetscOptionsSetValue(NULL, "-ln_layer_layernorm_eps", "0.75"));
  DDTensor x     = MakeInput({{1, 4}, {}, {}, {}}, DD_FLOAT64, 1), y;
  double   xv[4] = {1, 2, 3, 4};
  DDT(DDTensorSetValuesGlobal(x, xv));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "ln_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  EXPECT_NEAR(GatherAll(y)[3], 1.5 / std::sqrt(1.25 + 0.75), 1e-14);
  DDT(DDLayerView(l, PETSC_VIEWER_STDOUT_WORLD));
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-ln_layer_type", "-ln_layer_layernorm_normalized_shape", "-ln_layer_layernorm_eps"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(LayerNormBadInput, NonFiniteEpsilon)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERLAYERNORM));
  DD_EXPECT_ERROR(DDLayerLayerNormSetEpsilon(l, INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerLayerNormSetEpsilon(): Layer normalization eps inf");
  DDT(DDLayerDestroy(&l));
}

TEST(LayerNormBadInput, Settings)
{
  DDTensor x = MakeInput({{2, 6, 4}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERLAYERNORM));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "layer_layernorm_dims");
  DD_EXPECT_ERROR(DDLayerLayerNormSetDimensions(l, 0), PETSC_ERR_ARG_OUTOFRANGE, "-layer_layernorm_dims");
  DD_EXPECT_ERROR(DDLayerLayerNormSetEpsilon(l, 0.0), PETSC_ERR_ARG_OUTOFRANGE, "-layer_layernorm_eps");
  const PetscInt bad[2] = {5, 4}, neg[1] = {-2};
  DD_EXPECT_ERROR(DDLayerLayerNormSetNormalizedShape(l, 1, neg), PETSC_ERR_ARG_OUTOFRANGE, "-layer_layernorm_normalized_shape");
  DDT(DDLayerLayerNormSetNormalizedShape(l, 2, bad));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "normalized shape (-layer_layernorm_normalized_shape) entry 0 is 5");
  DDT(DDLayerLayerNormSetDimensions(l, 3));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "last 3 dimensions (-layer_layernorm_dims)");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}
