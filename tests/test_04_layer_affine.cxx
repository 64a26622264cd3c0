/*
  DDLAYERAFFINE: P ranks equal 1 rank (outputs, input, weight and bias gradients) for input-feature,
  output-feature, Pfo x Pfi, batch and all work partitions, unbalanced features and subsets of
  ranks; adjoint tests wrt input and parameters; BLAS against the reference loops; finite
  differences; a hand-computed case; float32 against float64; options; bad input. Inputs
  (N, T..., F) as torch.nn.Linear takes them: PyTorch's numbers, and the middle dimensions T...
  split (balanced, skewed and empty pieces) against one rank, adjoint tests and finite differences.
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

/* The tester's silent zero weights (init type 99) and NaN weights (init scale NaN): errors naming the setter */
TEST(AffineBadInput, InitTypeAndScaleOutOfRange)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERAFFINE));
  DD_EXPECT_ERROR(DDLayerSetInitType(l, (DDInitType)99), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerSetInitType(): unknown initialization type 99");
  DD_EXPECT_ERROR(DDLayerSetInitType(l, (DDInitType)-1), PETSC_ERR_ARG_OUTOFRANGE, "unknown initialization type -1");
  DD_EXPECT_ERROR(DDLayerSetInitScale(l, NAN), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerSetInitScale(): the scale nan");
  DD_EXPECT_ERROR(DDLayerSetInitScale(l, INFINITY), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerSetInitScale(): the scale inf");
  DDT(DDLayerSetInitType(l, DD_INIT_ZEROS));
  DDT(DDLayerSetInitScale(l, 0.5));
  /* the option goes through the setter */
  DDT(DDLayerSetOptionsPrefix(l, "badinit_"));
  DDT(PetscOptionsSetValue(NULL, "-badinit_layer_init_scale", "inf"));
  DD_EXPECT_ERROR(DDLayerSetFromOptions(l), PETSC_ERR_ARG_OUTOFRANGE, "-layer_init_scale");
  DDT(PetscOptionsClearValue(NULL, "-badinit_layer_init_scale"));
  DDT(DDLayerDestroy(&l));
}

TEST(AffineBadInput, Order1Input)
{
  DDTensor x = MakeInput({{6}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(AffCfg())(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "order at least 2; the input has order 1");
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

/* torch 1.13 float64, nn.Linear(4, 5) on (N, T, F) = (2, 3, 4): x_i = sin(0.7 i + 0.3), W_i = 0.1 cos(1.3 i) - 0.05 (row-major (5, 4)),
   b_i = 0.2 i - 0.3, dy_i = cos(0.9 i + 0.2) */
static const double lin_y[]  = {-0.52215338480657192, -0.20284786522842629, 0.076747246155113996, 0.23202499985136649, 0.3105236525252113, -0.042749676794133995, 0.042210540262036161, 0.1052232168597181, 0.29190131026194344, 0.61640556299513349, -0.56262061853102785, -0.26514003099847394, 0.11340989061411895, 0.38323653295131566, 0.47011650341053346, -0.062356295405554374, 0.068986712828917607, 0.069506586095190379, 0.15124404792499191, 0.43990823321264866, -0.48520579664527153, -0.25330608120865628, 0.14405326103461699, 0.49708582975370252, 0.64312310690405328, -0.18863362615342322, 0.019910116521401303, 0.047477480452561255, 0.07735860842869216, 0.2903841892055361};
static const double lin_dx[] = {0.3056672991789377, 0.19531687692775587, -0.14664510685228191, -0.21924354479170069, -0.13464696264019541, 0.077972386654883333, 0.048398789761453051, -0.18004236458804196, -0.24890127091760511, -0.22818938008463999, 0.12624058369378632, 0.29514789314118905, 0.23958164740502277, 0.018230338938227966, -0.10162075928213322, 0.055610492418027194, 0.147895661130235, 0.22050362234388415, -0.08339812531050611, -0.3185928095531837, -0.30193321564560593, -0.11119281363695149, 0.13678070827384611, 0.078705559547295592};
static const double lin_dw[] = {-0.51196709619366965, -0.23985394900415161, 0.14506625822335575, 0.46175953748560633, -0.64847173336074848, -0.66940187072032342, -0.37550184858737146, 0.095002560314454504, -0.29422589100392771, -0.59235980223341644, -0.61189764259529889, -0.34365046048020481, 0.28268423981802987, -0.067031645021938355, -0.38522149980974452, -0.52223566398505294, 0.64566457369173458, 0.50902472476298088, 0.13298259404747026, -0.30560332855891503};
static const double lin_db[] = {0.45345125205838632, 1.0089573013313586, 0.80090458007569409, -0.013256760113992461, -0.81738564854335494};

TEST(AffineLastDim, PyTorchLinearOnNTF)
{
  const int                          W = Size();
  int tried = 0;
  for (PetscInt pfo : {1, 2}) {
    if (W % pfo) continue;
    std::vector<std::vector<PetscInt>> f; /* Pn x Pt x Pfi of W / Pfo workers: Pfo Pn Pt Pfi = W */
    Factorizations(W / (int)pfo, 3, f);
    for (auto &ps : f) {
      if (ps[0] > 2 || ps[1] > 4 || ps[2] > 4) continue; /* Pt = 4 > T = 3: an empty piece */
      for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
        tried++;
        const double tol = dt == DD_FLOAT64 ? 1e-14 : 1e-5;
        DDTensor     x   = MakeInput({{2, 3, 4}, {ps[0], ps[1], ps[2]}, {}, {}}, dt, 1), y, dy, dx, *p, *g;
        DDLayer      l;
        PetscInt     np;
        AffCfg       c;
        c.pfo = pfo;
        std::vector<double> xv(24), wv(20), bv(5), dv(30);
        for (int i = 0; i < 24; i++) xv[i] = std::sin(0.7 * i + 0.3);
        for (int i = 0; i < 20; i++) wv[i] = 0.1 * std::cos(1.3 * i) - 0.05;
        for (int i = 0; i < 5; i++) bv[i] = 0.2 * i - 0.3;
        for (int i = 0; i < 30; i++) dv[i] = std::cos(0.9 * i + 0.2);
        SetValues(x, xv);
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        Configure(c)(l);
        DDT(DDLayerSetUp(l, x));
        DDT(DDLayerGetParameters(l, &np, &p));
        ASSERT_EQ(np, 2);
        SetValues(p[0], wv);
        SetValues(p[1], bv);
        DDT(DDLayerGetOutput(l, &y));
        const PetscInt *ys;
        DDT(DDTensorGetShape(y, &ys));
        EXPECT_EQ(std::vector<PetscInt>(ys, ys + 3), std::vector<PetscInt>({2, 3, 5}));
        DDT(DDLayerForward(l, x, y));
        DDT(DDLayerCreateOutput(l, &dy));
        SetValues(dy, dv);
        DDT(DDTensorDuplicate(x, &dx));
        DDT(DDLayerZeroGradients(l));
        DDT(DDLayerBackward(l, dy, dx));
        DDT(DDLayerGetGradients(l, &np, &g));
        std::string what = std::string(dt == DD_FLOAT64 ? "float64" : "float32") + " Pn " + std::to_string(ps[0]) + " Pt " + std::to_string(ps[1]) + " Pfi " + std::to_string(ps[2]) + " Pfo " + std::to_string(pfo);
        auto md = [](const std::vector<double> &a, const double *b) {
          double e = 0;
          for (size_t i = 0; i < a.size(); i++) e = std::max(e, std::fabs(a[i] - b[i]));
          return e;
        };
        EXPECT_LT(md(GatherAll(y), lin_y), tol) << what;
        EXPECT_LT(md(GatherAll(dx), lin_dx), tol) << what;
        EXPECT_LT(md(GatherAll(g[0]), lin_dw), tol) << what;
        EXPECT_LT(md(GatherAll(g[1]), lin_db), tol) << what;
        for (DDTensor *t : {&dx, &dy, &x}) DDT(DDTensorDestroy(t));
        DDT(DDLayerDestroy(&l));
      }
    }
  }
  EXPECT_GT(tried, 0);
}

TEST(AffineLastDim, Order4MatchesSerialOnBatchAndFeatureSplits)
{
  const int                          W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    InputSpec in;
    in.shape  = {ps[0] + 1, 2, 3, 3 * ps[1] + 2};
    in.pshape = {ps[0], 1, 1, ps[1]};
    in.lx     = {{}, {}, {}, std::vector<PetscInt>(ps[1], 3)};
    in.lx[3][0] += 2; /* unbalanced features */
    std::string what = "Pn " + std::to_string(ps[0]) + " Pfi " + std::to_string(ps[1]);
    AffCfg      c;
    CheckAgainstSerial(c, in, "order 4, " + what);
    c.ref = true;
    CheckAgainstSerial(c, in, "order 4, reference loops, " + what);
    InputSpec cl = in;
    cl.fmt       = DD_FORMAT_CHANNELS_LAST; /* not row-major: a plain copy */
    ExpectSameRun(RunLayer(Configure(AffCfg()), {cl}, DD_FLOAT64, 11), RunLayer(Configure(AffCfg()), {Serial(in)}, DD_FLOAT64, 11), 1e-12, "channels-last order 4, " + what);
  }
  /* Pfo = 2 output workers over Pn x Pfi = W / 2 */
  if (W % 2 == 0) {
    std::vector<std::vector<PetscInt>> h;
    Factorizations(W / 2, 2, h);
    for (auto &ps : h) {
      InputSpec in;
      in.shape  = {ps[0] + 1, 3, 2, 2 * ps[1] + 1};
      in.pshape = {ps[0], 1, 1, ps[1]};
      AffCfg c;
      c.pfo = 2;
      CheckAgainstSerial(c, in, "order 4, Pfo 2, Pn " + std::to_string(ps[0]) + " Pfi " + std::to_string(ps[1]));
    }
  }
}

TEST(AffineLastDim, AdjointAndFiniteDifferences)
{
  const int W = Size();
  InputSpec in;
  in.shape  = {2, 3, 4};
  in.pshape = {W > 1 ? 2 : 1, 1, 1};
  ExpectFiniteDifferences(Configure(AffCfg()), {in}, 7, 1e-8);
  for (PetscBool wrtp : {PETSC_FALSE, PETSC_TRUE}) {
    DDTensor  x = MakeInput({{2, 3, 2, 2 * W + 1}, {1, 1, 1, W}, {}, {}}, DD_FLOAT64, 3);
    DDLayer   l;
    PetscReal err;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(AffCfg())(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerInitializeParameters(l, 2));
    DDT(DDLayerAdjointTest(l, wrtp, 4, &err));
    EXPECT_LT(err, 1e-14) << (wrtp ? "wrt parameters" : "wrt input");
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

/*
  Unbalanced pieces with an empty one along every split dimension k of extent n over P workers:
  piece 0 empty, piece 1 n - (P - 2) entries, the others 1 each (balanced where n < P - 1)
*/
static std::vector<std::vector<PetscInt>> SkewedPieces(const std::vector<PetscInt> &shape, const std::vector<PetscInt> &pshape)
{
  std::vector<std::vector<PetscInt>> lx(shape.size());
  for (size_t k = 0; k < shape.size(); k++) {
    if (pshape[k] < 2 || shape[k] - (pshape[k] - 2) < 1) continue; /* too few entries: balanced */
    lx[k].assign(pshape[k], 1);
    lx[k][0] = 0;
    lx[k][1] = shape[k] - (pshape[k] - 2);
  }
  return lx;
}

/*
  (N, H, W, F) inputs with the middle dimensions H, W split (torch.nn.Linear's rows are
  independent: paper 000 sec. 4.1, the middle dimensions as extra batch dimensions): every
  factorization of the ranks over the four dimensions, balanced and with skewed/empty pieces,
  Pfo = 1 and 2, float64 and float32, against the one-rank run (outputs, input and parameter
  gradients)
*/
TEST(AffineLastDim, SplitMiddleDimensionsMatchOneRank)
{
  const int W     = Size();
  int       tried = 0, middle = 0;
  for (PetscInt pfo : {1, 2}) {
    if (W % pfo) continue;
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W / (int)pfo, 4, f);
    for (auto &ps : f) {
      for (bool skew : {false, true}) {
        InputSpec in;
        in.shape  = {2, 5, 4, 2 * ps[3] + 1};
        in.pshape = ps;
        if (skew) in.lx = SkewedPieces(in.shape, in.pshape);
        AffCfg c;
        c.fo             = 3;
        c.pfo            = pfo;
        std::string what = std::string(skew ? "skewed/empty" : "balanced") + " pieces, x partition " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]) + "x" + std::to_string(ps[3]) + ", Pfo " + std::to_string(pfo);
        CheckAgainstSerial(c, in, "float64, " + what);
        CheckAgainstSerial(c, in, "float32, " + what, DD_FLOAT32, 1e-5);
        c.ref = true;
        CheckAgainstSerial(c, in, "float64, reference loops, " + what);
        tried++;
        middle += ps[1] > 1 || ps[2] > 1;
      }
    }
  }
  EXPECT_GT(tried, 0);
  if (W > 1) EXPECT_GT(middle, 0) << "no partition split a middle dimension";
}

/* adjoint tests (float64) wrt input and parameters with the middle dimensions split, skewed and empty pieces */
TEST(AffineLastDim, SplitMiddleDimensionsAdjoint)
{
  const int                          W = Size();
  std::vector<std::vector<PetscInt>> parts = {{1, W, 1, 1}, {1, 1, W, 1}};
  if (W % 2 == 0) parts.push_back({1, 2, W / 2, 1});
  if (W % 2 == 0) parts.push_back({2, W / 2, 1, 1});
  for (auto &ps : parts) {
    for (bool skew : {false, true}) {
      InputSpec in;
      in.shape  = {3, W + 2, W + 1, 4};
      in.pshape = ps;
      if (skew) in.lx = SkewedPieces(in.shape, in.pshape);
      for (PetscBool wrtp : {PETSC_FALSE, PETSC_TRUE}) {
        DDTensor  x = MakeInput(in, DD_FLOAT64, 3);
        DDLayer   l;
        PetscReal err;
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        Configure(AffCfg())(l);
        DDT(DDLayerSetUp(l, x));
        DDT(DDLayerInitializeParameters(l, 2));
        DDT(DDLayerAdjointTest(l, wrtp, 4, &err));
        EXPECT_LT(err, 1e-14) << (wrtp ? "wrt parameters" : "wrt input") << ", x partition " << ps[0] << "x" << ps[1] << "x" << ps[2] << "x" << ps[3] << (skew ? " skewed" : "");
        DDT(DDLayerDestroy(&l));
        DDT(DDTensorDestroy(&x));
      }
    }
  }
  /* finite differences through a split middle dimension */
  InputSpec in;
  in.shape  = {2, 3, 4};
  in.pshape = {1, W > 1 ? 2 : 1, 1};
  ExpectFiniteDifferences(Configure(AffCfg()), {in}, 9, 1e-8);
}
