/*
  DDLAYERAFFINE: P ranks equal 1 rank (outputs, input, weight and bias gradients) for input-feature,
  output-feature, Pfo x Pfi, batch and all work partitions, unbalanced features and subsets of
  ranks; adjoint tests wrt input and parameters; BLAS against the reference loops; finite
  differences; a hand-computed case; float32 against float64; options; bad input.
*/
#include "layertest.hpp"
#include <backend/kernels.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <random>

using namespace ddtest;

struct AffCfg {
  PetscInt  fo   = 5;
  PetscBool bias = PETSC_TRUE;
  PetscInt  pfo  = 1;
  bool      ref  = false; /* reference loops instead of BLAS */
};

static std::function<void(DDLayer)> Configure(const AffCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERAFFINE));
    DDT(DDLayerAffineSetOutputFeatures(l, c.fo));
    DDT(DDLayerAffineSetBias(l, c.bias));
    DDT(DDLayerAffineSetOutputWorkers(l, c.pfo));
    if (c.ref) {
      DDT(DDLayerSetOptionsPrefix(l, "affref_"));
      DDT(PetscOptionsSetValue(NULL, "-affref_dd_backend", "/cpu/ref"));
      DDT(DDLayerSetFromOptions(l));
      DDT(PetscOptionsClearValue(NULL, "-affref_dd_backend"));
    }
  };
}

static void CheckAgainstSerial(const AffCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64, double tol = 1e-12)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 11), ser = RunLayer(Configure(c), {Serial(in)}, dt, 11);
  ASSERT_EQ(par.params.size(), c.bias ? 2u : 1u);
  ExpectSameRun(par, ser, tol, what);
}

static void ExpectEqualVectorsAff(const std::vector<double> &a, const std::vector<double> &b, const std::string &what)
{
  ASSERT_EQ(a.size(), b.size()) << what;
  double m = 0;
  for (size_t i = 0; i < a.size(); i++) m = std::max(m, std::fabs(a[i] - b[i]));
  EXPECT_LE(m, 1e-14) << what;
}

static InputSpec Spec(PetscInt N, PetscInt Fi, PetscInt Pn, PetscInt Pfi)
{
  InputSpec in;
  in.shape  = {N, Fi};
  in.pshape = {Pn, Pfi};
  return in;
}

TEST(Affine, InputFeatureSplit)
{
  int    W = Size();
  AffCfg c;
  c.fo = 4;
  CheckAgainstSerial(c, Spec(3, 2 * W + 1, 1, W), "Pfi only (y = R y^)");
  c.bias = PETSC_FALSE;
  CheckAgainstSerial(c, Spec(3, 3 * W, 1, W), "Pfi only, no bias");
}

TEST(Affine, OutputFeatureSplit)
{
  int       W  = Size();
  InputSpec in = Spec(3, 4, 1, 1);
  in.ranks     = {0};
  AffCfg c;
  c.fo  = 2 * W + 1;
  c.pfo = W;
  CheckAgainstSerial(c, in, "Pfo only (x^ = B x)");
  /* the input on the last rank: the extra workers are the lowest free ranks */
  in.ranks = {W - 1};
  CheckAgainstSerial(c, in, "Pfo only, input on the last rank");
}

TEST(Affine, OutputByInputFeatureGrid)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &p : f) {
    AffCfg c;
    c.fo  = 2 * p[1] + 1;
    c.pfo = p[1];
    CheckAgainstSerial(c, Spec(4, 2 * p[0] + 1, 1, p[0]), "Pfo " + std::to_string(p[1]) + " x Pfi " + std::to_string(p[0]));
  }
}

TEST(Affine, BatchSplit)
{
  int    W = Size();
  AffCfg c;
  CheckAgainstSerial(c, Spec(2 * W + 1, 6, W, 1), "batch (weights broadcast, gradients sum-reduced)");
  /* fewer samples than batch workers: empty pieces */
  if (W > 2) CheckAgainstSerial(c, Spec(2, 3, W, 1), "batch with empty pieces");
}

TEST(Affine, AllWorkPartitions)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (auto &p : f) { /* Pn x Pfi x Pfo */
    AffCfg c;
    c.fo  = 2 * p[2] + 1;
    c.pfo = p[2];
    char what[96];
    snprintf(what, sizeof(what), "Pn %d x Pfi %d x Pfo %d", (int)p[0], (int)p[1], (int)p[2]);
    CheckAgainstSerial(c, Spec(2 * p[0] + 1, 3 * p[1] + 1, p[0], p[1]), what);
  }
}

TEST(Affine, UnbalancedFeatures)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in = Spec(3, 4 * W, 1, W);
  in.lx        = {{}, std::vector<PetscInt>(W, 4)};
  in.lx[1][0] += 3; /* the first piece larger, the last smaller */
  in.lx[1][W - 1] -= 3;
  AffCfg c;
  c.fo = 5;
  CheckAgainstSerial(c, in, "unbalanced input features");
  /* unbalanced input features with the output features split too */
  if (W % 2 == 0) {
    InputSpec in2 = Spec(3, 7, 1, 2);
    in2.lx        = {{}, {6, 1}};
    c.pfo         = W / 2;
    c.fo          = W / 2 + 3;
    CheckAgainstSerial(c, in2, "unbalanced input features, Pfo x Pfi");
  }
}

TEST(Affine, SubsetRanks)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  /* the input on the last W-1 ranks, reversed; rank 0 is idle or an extra output worker */
  InputSpec in = Spec(3, 2 * W, 1, W - 1);
  for (int r = W - 1; r >= 1; r--) in.ranks.push_back(r);
  AffCfg c;
  CheckAgainstSerial(c, in, "subset, Pfo 1 (rank 0 idle)");
  if (W - 1 >= 1 && 2 * (W - 1) <= W) {
    c.pfo = 2;
    CheckAgainstSerial(c, in, "subset, Pfo 2 (rank 0 an output worker)");
  }
  /* batch split on a subset with one extra output worker */
  InputSpec inb = Spec(2 * W, 3, W - 1, 1);
  for (int r = 1; r < W; r++) inb.ranks.push_back(r);
  c.pfo = 1;
  CheckAgainstSerial(c, inb, "subset, batch split");
}

TEST(Affine, InputsWithHalosAndBlockedFormat)
{
  int    W = Size();
  PetscInt pfi = W >= 2 ? 2 : 1, pfo = W / pfi;
  AffCfg c;
  c.fo  = 2 * pfo + 1;
  c.pfo = pfo;
  /* a blocked (padded rows) input against the plain one on 1 rank */
  InputSpec in = Spec(3, 11, 1, pfi), ser = Serial(in);
  in.fmt       = DD_FORMAT_BLOCKED;
  ExpectSameRun(RunLayer(Configure(c), {in}, DD_FLOAT64, 12), RunLayer(Configure(c), {ser}, DD_FLOAT64, 12), 1e-12, "blocked input");
  /* the same layer run on tensors whose halos grew after set-up */
  for (PetscInt Pn : {1, 2}) {
    if (Pn * pfi * pfo > W) continue;
    DDTensor x = MakeInput(Spec(2 * Pn + 1, 9, Pn, pfi), DD_FLOAT64, 5), xh, y, y2, dy, dx, dxh;
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDLayerCreateOutput(l, &y2));
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 6, -1, 1));
    DDT(DDTensorDuplicate(x, &xh));
    DDT(DDTensorDuplicate(x, &dx));
    PetscInt lo[2] = {1, 2}, hi[2] = {0, 3};
    DDT(DDTensorSetHalo(xh, lo, hi));
    DDT(DDTensorCopy(x, xh));
    DDT(DDTensorSetHalo(y2, hi, lo));
    DDT(DDTensorDuplicate(xh, &dxh));
    DDT(DDLayerForward(l, x, y));
    DDT(DDLayerBackward(l, dy, dx));
    std::vector<double> gy = GatherAll(y), gdx = GatherAll(dx);
    DDT(DDLayerForward(l, xh, y2));
    DDT(DDLayerBackward(l, dy, dxh));
    ExpectEqualVectorsAff(GatherAll(y2), gy, "output with halos, Pn " + std::to_string(Pn));
    ExpectEqualVectorsAff(GatherAll(dxh), gdx, "input gradient with halos, Pn " + std::to_string(Pn));
    for (DDTensor *t : {&xh, &y2, &dy, &dx, &dxh, &x}) DDT(DDTensorDestroy(t));
    DDT(DDLayerDestroy(&l));
  }
}

TEST(Affine, AdjointTestsInputAndParameters)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  for (auto &p : f) {
    DDTensor x = MakeInput(Spec(2 * p[0] + 1, 3 * p[1] + 2, p[0], p[1]), DD_FLOAT64, 3);
    DDLayer  l;
    AffCfg   c;
    c.fo  = 2 * p[2] + 3;
    c.pfo = p[2];
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    PetscReal err;
    DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
    EXPECT_LT(err, 1e-13) << "wrt input, Pn " << p[0] << " Pfi " << p[1] << " Pfo " << p[2];
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
    EXPECT_LT(err, 1e-13) << "wrt weight and bias, Pn " << p[0] << " Pfi " << p[1] << " Pfo " << p[2];
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

/* the kernels themselves, on strided matrices with odd sizes: each backend's GEMM entries against the loops */
template <class T>
static void KernelCase(const char *backend, PetscInt N, PetscInt Fi, PetscInt Fo, double tol)
{
  DDBackend be;
  decltype(ddnn::KernelTable<T>::affinefwd)        fwd;
  decltype(ddnn::KernelTable<T>::affinebwddata)    bwdd;
  decltype(ddnn::KernelTable<T>::affinebwdweights) bwdw;
  DDT(DDBackendGet(backend, &be));
  DDT(ddnn::DDBackendFind<T>(be, &ddnn::KernelTable<T>::affinefwd, ddnn::DD_KERNEL_GEMM, &fwd));
  DDT(ddnn::DDBackendFind<T>(be, &ddnn::KernelTable<T>::affinebwddata, ddnn::DD_KERNEL_GEMM, &bwdd));
  DDT(ddnn::DDBackendFind<T>(be, &ddnn::KernelTable<T>::affinebwdweights, ddnn::DD_KERNEL_GEMM, &bwdw));
  std::mt19937                           gen(17 + (unsigned)(N * 100 + Fi * 10 + Fo));
  std::uniform_real_distribution<double> U(-1, 1);
  ddnn::AffineGeom                       g;
  g.N = N;
  g.Fi = Fi;
  g.Fo = Fo;
  const PetscInt ldx = Fi + 3, ldw = Fi + 1, ldy = Fo + 2;
  std::vector<T> x(N * ldx + 1), w(Fo * ldw + 1), b(Fo + 1), dy(N * ldy + 1);
  for (auto *v : {&x, &w, &b, &dy})
    for (auto &e : *v) e = (T)U(gen);
  std::vector<T> y1(N * ldy + 1, (T)7), y2(y1), dx1(N * ldx + 1, (T)7), dx2(dx1), dw1(Fo * ldw + 1), db1(Fo + 1);
  for (size_t i = 0; i < dw1.size(); i++) dw1[i] = (T)U(gen); /* gradients accumulate */
  for (size_t i = 0; i < db1.size(); i++) db1[i] = (T)U(gen);
  std::vector<T> dw2(dw1), db2(db1);
  fwd(g, x.data(), ldx, w.data(), ldw, b.data(), y1.data(), ldy);
  ddnn::AffineForwardRef<T>(g, x.data(), ldx, w.data(), ldw, b.data(), y2.data(), ldy);
  bwdd(g, dy.data(), ldy, w.data(), ldw, dx1.data(), ldx);
  ddnn::AffineBackwardDataRef<T>(g, dy.data(), ldy, w.data(), ldw, dx2.data(), ldx);
  bwdw(g, x.data(), ldx, dy.data(), ldy, dw1.data(), ldw, db1.data());
  ddnn::AffineBackwardWeightsRef<T>(g, x.data(), ldx, dy.data(), ldy, dw2.data(), ldw, db2.data());
  auto cmp = [&](const std::vector<T> &a, const std::vector<T> &c, const char *what) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) m = std::max(m, (double)std::fabs(a[i] - c[i]));
    EXPECT_LT(m, tol) << backend << " " << what << " N " << N << " Fi " << Fi << " Fo " << Fo;
  };
  cmp(y1, y2, "forward");
  cmp(dx1, dx2, "backward data");
  cmp(dw1, dw2, "backward weights");
  cmp(db1, db2, "backward bias");
  /* the padding between rows is left alone */
  for (PetscInt n = 0; n < N; n++)
    for (PetscInt o = Fo; o < ldy; o++) EXPECT_EQ(y1[n * ldy + o], (T)7);
}

TEST(Affine, BlasMatchesReference)
{
  for (PetscInt N : {1, 3, 17})
    for (PetscInt Fi : {0, 1, 5, 33})
      for (PetscInt Fo : {1, 4, 19})
        for (const char *b : {"/cpu/blas", DDNN_WITH_DNNL ? "/cpu/dnnl" : "/cpu/blas"}) {
          KernelCase<double>(b, N, Fi, Fo, 1e-13);
          KernelCase<float>(b, N, Fi, Fo, 2e-5);
        }
  /* the layer with either kernel, distributed */
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  auto  &p = f[f.size() / 2];
  AffCfg c;
  c.fo          = 2 * p[2] + 5;
  c.pfo         = p[2];
  InputSpec in  = Spec(2 * p[0] + 3, 4 * p[1] + 3, p[0], p[1]);
  RunResult bl  = RunLayer(Configure(c), {in}, DD_FLOAT64, 4);
  c.ref         = true;
  RunResult rf  = RunLayer(Configure(c), {in}, DD_FLOAT64, 4);
  ExpectSameRun(bl, rf, 1e-13, "BLAS vs reference loops (layer)");
}

TEST(Affine, FiniteDifferences)
{
  int    W = Size();
  AffCfg c;
  c.fo  = 3;
  c.pfo = W >= 4 ? 2 : 1;
  ExpectFiniteDifferences(Configure(c), {Spec(3, 4, 1, W >= 2 ? 2 : 1)}, 9, 1e-7);
  c.pfo = 1;
  ExpectFiniteDifferences(Configure(c), {Spec(W + 1, 3, W, 1)}, 10, 1e-7);
}

TEST(Affine, HandComputed2x3)
{
  /* x = [[1,2,3],[4,5,6]], W = [[1,0,-1],[2,1,0]], b = [0.5,-1] -> y = [[-1.5,3],[-1.5,12]] */
  int         W   = Size();
  PetscInt    pfi = std::min(3, W), pfo = W / pfi >= 2 ? 2 : 1;
  InputSpec   in  = Spec(2, 3, 1, pfi);
  DDTensor    x   = MakeInput(in, DD_FLOAT64, 1), y, dx, dy;
  const double xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {1, 0, -1, 2, 1, 0}, bv[2] = {0.5, -1}, ones[4] = {1, 1, 1, 1};
  DDT(DDTensorSetValuesGlobal(x, xv));
  DDLayer l;
  AffCfg  c;
  c.fo  = 2;
  c.pfo = pfo;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  PetscInt  np;
  DDTensor *ps, *gs;
  DDT(DDLayerGetParameters(l, &np, &ps));
  ASSERT_EQ(np, 2);
  const char *name;
  DDT(DDLayerGetParameterName(l, 0, &name));
  EXPECT_STREQ(name, "weight");
  DDT(DDLayerGetParameterName(l, 1, &name));
  EXPECT_STREQ(name, "bias");
  DDT(DDTensorSetValuesGlobal(ps[0], wv));
  DDT(DDTensorSetValuesGlobal(ps[1], bv));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  std::vector<double> yg = GatherAll(y), ye = {-1.5, 3, -1.5, 12};
  for (int i = 0; i < 4; i++) EXPECT_DOUBLE_EQ(yg[i], ye[i]) << "y[" << i << "]";
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetValuesGlobal(dy, ones));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  DDT(DDLayerGetGradients(l, &np, &gs));
  std::vector<double> dxg = GatherAll(dx), dwg = GatherAll(gs[0]), dbg = GatherAll(gs[1]);
  std::vector<double> dxe = {3, 1, -1, 3, 1, -1}, dwe = {5, 7, 9, 5, 7, 9}, dbe = {2, 2};
  for (int i = 0; i < 6; i++) EXPECT_DOUBLE_EQ(dxg[i], dxe[i]) << "dx[" << i << "]";
  for (int i = 0; i < 6; i++) EXPECT_DOUBLE_EQ(dwg[i], dwe[i]) << "dW[" << i << "]";
  for (int i = 0; i < 2; i++) EXPECT_DOUBLE_EQ(dbg[i], dbe[i]) << "db[" << i << "]";
  /* a second Backward accumulates the parameter gradients */
  DDT(DDLayerBackward(l, dy, dx));
  dwg = GatherAll(gs[0]);
  for (int i = 0; i < 6; i++) EXPECT_DOUBLE_EQ(dwg[i], 2 * dwe[i]) << "accumulated dW[" << i << "]";
  DDT(DDTensorDestroy(&dy));
  DDT(DDTensorDestroy(&dx));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Affine, Float32MatchesFloat64)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 3, f);
  auto  &p = f.back();
  AffCfg c;
  c.fo         = 2 * p[2] + 7;
  c.pfo        = p[2];
  InputSpec in = Spec(2 * p[0] + 2, 9 * p[1] + 4, p[0], p[1]);
  RunResult f32 = RunLayer(Configure(c), {in}, DD_FLOAT32, 8), f64 = RunLayer(Configure(c), {in}, DD_FLOAT64, 8);
  ExpectSameRun(f32, f64, 1e-5, "float32 vs float64");
  CheckAgainstSerial(c, in, "float32 on P ranks vs 1 rank", DD_FLOAT32, 1e-5);
}

TEST(Affine, InitializationIsPyTorchsDefault)
{
  /* U(-1/sqrt(Fi), 1/sqrt(Fi)) for W and b, the same global values on any partition */
  int       W  = Size();
  InputSpec in = Spec(2, 16 * W, 1, W);
  AffCfg    c;
  c.fo          = 40;
  RunResult r   = RunLayer(Configure(c), {in}, DD_FLOAT64, 21);
  double    bnd = 1.0 / std::sqrt(16.0 * W), mx = 0;
  for (auto &v : r.params)
    for (double e : v) {
      EXPECT_LE(std::fabs(e), bnd);
      mx = std::max(mx, std::fabs(e));
    }
  EXPECT_GT(mx, 0.9 * bnd) << "the values should fill the interval";
}

TEST(Affine, OptionsDatabase)
{
  int W = Size();
  DDT(PetscOptionsSetValue(NULL, "-fc1_layer_type", "affine"));
  DDT(PetscOptionsSetValue(NULL, "-fc1_layer_affine_out_features", "7"));
  DDT(PetscOptionsSetValue(NULL, "-fc1_layer_affine_bias", "0"));
  DDT(PetscOptionsSetValue(NULL, "-fc1_layer_affine_out_workers", W >= 2 ? "2" : "1"));
  DDTensor x = MakeInput(Spec(3, 5, 1, 1), DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "fc1_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDTensor        y;
  DDPartition     py;
  const PetscInt *shape, *pshape;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[0], 3);
  EXPECT_EQ(shape[1], 7);
  DDT(DDTensorGetPartition(y, &py));
  DDT(DDPartitionGetShape(py, &pshape));
  EXPECT_EQ(pshape[1], W >= 2 ? 2 : 1);
  PetscInt64 np;
  DDT(DDLayerGetNumParameters(l, &np));
  EXPECT_EQ(np, 7 * 5);
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-fc1_layer_type", "-fc1_layer_affine_out_features", "-fc1_layer_affine_bias", "-fc1_layer_affine_out_workers"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(AffineBadInput, Order4InputAsksToFlatten)
{
  DDTensor x = MakeInput({{2, 3, 4, 4}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(AffCfg())(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "flatten it first");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(AffineBadInput, WeightPartitionNeedsMoreRanks)
{
  int      W = Size();
  DDTensor x = MakeInput(Spec(2, 2 * W, 1, W), DD_FLOAT64, 1);
  DDLayer  l;
  AffCfg   c;
  c.pfo = 2; /* 2 W workers */
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "work partition needs");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(AffineBadInput, NonPositiveOutputFeatures)
{
  DDTensor x = MakeInput(Spec(2, 3, 1, 1), DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERAFFINE));
  DD_EXPECT_ERROR(DDLayerAffineSetOutputFeatures(l, 0), PETSC_ERR_ARG_OUTOFRANGE, "must be positive");
  DD_EXPECT_ERROR(DDLayerAffineSetOutputFeatures(l, -3), PETSC_ERR_ARG_OUTOFRANGE, "must be positive");
  /* never set: set-up names the option */
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "-layer_affine_out_features");
  /* a setter of another type */
  DD_EXPECT_ERROR(DDLayerConvSetOutputChannels(l, 3), PETSC_ERR_ARG_WRONG, "needs a conv");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}
