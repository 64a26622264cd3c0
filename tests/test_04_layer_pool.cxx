/*
  DDLAYERPOOL: P ranks equal 1 rank (outputs and input gradients) for max and average pooling
  over spatial, batch and channel splits, unbalanced and subset partitions, formats, 1-3-D and
  a sweep of kernel / stride / padding / dilation / ceil_mode / count_include_pad; the
  Appendix B.4 and B.5 pooling cases (halo widths and the sequential answer); the adjoint test
  of average pooling; oneDNN against the reference loops; finite differences; PyTorch's numbers
  derived by hand; ties; inputs whose layout changed since set-up; bad input.
*/
#include "layertest.hpp"
#include <ddnn/private/ddlayerimpl.h> /* DDLayerSetOutputHalo_Private: an output halo as a consumer grows it */
#include <fstream>
#include <sstream>
#include <cstdio>
#include <unistd.h>

using namespace ddtest;

struct PoolCfg {
  DDPoolType            type = DD_POOL_MAX;
  std::vector<PetscInt> k = {2}, s = {}, p = {0}, d = {1};
  PetscBool             ceil = PETSC_FALSE, cip = PETSC_TRUE;
};

static std::function<void(DDLayer)> Configure(const PoolCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERPOOL));
    DDT(DDLayerPoolSetType(l, c.type));
    DDT(DDLayerPoolSetKernel(l, (PetscInt)c.k.size(), c.k.data()));
    if (!c.s.empty()) DDT(DDLayerPoolSetStride(l, (PetscInt)c.s.size(), c.s.data()));
    DDT(DDLayerPoolSetPadding(l, (PetscInt)c.p.size(), c.p.data()));
    DDT(DDLayerPoolSetDilation(l, (PetscInt)c.d.size(), c.d.data()));
    DDT(DDLayerPoolSetCeilMode(l, c.ceil));
    DDT(DDLayerPoolSetCountIncludePad(l, c.cip));
  };
}

static std::string Describe(const PoolCfg &c)
{
  std::ostringstream o;
  o << (c.type == DD_POOL_MAX ? "max" : "avg") << " k" << c.k[0] << " s" << (c.s.empty() ? c.k[0] : c.s[0]) << " p" << c.p[0] << " d" << c.d[0] << (c.ceil ? " ceil" : "") << (c.type == DD_POOL_AVG ? (c.cip ? " cip" : " nocip") : "");
  return o.str();
}

static void CheckAgainstSerial(const PoolCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64, double tol = 1e-14)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 11), ser = RunLayer(Configure(c), {Serial(in)}, dt, 11);
  ExpectSameRun(par, ser, tol, what + " (" + Describe(c) + ")");
}


/* Runs a layer on given global input values and output gradient; returns y and dx (global, C order) */
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
  DDT(DDLayerCreateOutput(l, &dy));
  if (!dyv.empty()) {
    PetscInt N;
    DDT(DDTensorGetSize(dy, &N));
    EXPECT_EQ((size_t)N, dyv.size());
    if ((size_t)N == dyv.size()) SetValues(dy, dyv);
    DDT(DDTensorDuplicate(x, &dx));
    DDT(DDTensorSet(dx, 777.0));
    DDT(DDLayerBackward(l, dy, dx));
    R.dx.push_back(GatherAll(dx));
    DDT(DDTensorDestroy(&dx));
  }
  DDT(DDTensorDestroy(&dy));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  return R;
}

static void ExpectValues(const std::vector<double> &got, const std::vector<double> &want, double tol, const std::string &what)
{
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++) EXPECT_NEAR(got[i], want[i], tol) << what << " entry " << i;
}

/* a partition along the last dimension over as many ranks as it has entries to spare (at most W) */
static InputSpec SplitLast(std::vector<PetscInt> shape, PetscInt maxP)
{
  InputSpec in;
  in.shape  = shape;
  in.pshape = std::vector<PetscInt>(shape.size(), 1);
  in.pshape.back() = PetscMin((PetscInt)Size(), maxP);
  for (PetscInt r = 0; r < in.pshape.back(); r++) in.ranks.push_back((PetscMPIInt)r);
  return in;
}

TEST(Pool, SpatialDistribution1D2D3D)
{
  int W = Size();
  for (int D = 1; D <= 3; D++) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, D, f);
    for (auto &ps : f) {
      InputSpec in;
      in.shape  = {2, 3};
      in.pshape = {1, 1};
      for (int j = 0; j < D; j++) {
        in.shape.push_back(4 * ps[j] + 3 + j);
        in.pshape.push_back(ps[j]);
      }
      PoolCfg c;
      c.k = {3};
      c.s = {2};
      c.p = {1};
      CheckAgainstSerial(c, in, "spatial");
      c.type = DD_POOL_AVG;
      c.ceil = PETSC_TRUE;
      CheckAgainstSerial(c, in, "spatial");
      c      = PoolCfg(); /* k2 s2: unbalanced and negative halos on odd pieces */
      CheckAgainstSerial(c, in, "spatial");
    }
  }
}

TEST(Pool, HyperParameterSweep2D)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto ps  = f[f.size() / 2];
  int  cnt = 0;
  for (int type = 0; type < 2; type++)
    for (PetscInt k = 1; k <= 4; k++)
      for (PetscInt s = 1; s <= 3; s++)
        for (PetscInt p = 0; 2 * p <= k; p++)
          for (PetscInt d = 1; d <= (type == 0 ? 2 : 1); d++)
            for (int ceil = 0; ceil < 2; ceil++)
              for (int cip = 0; cip < (type == 1 ? 2 : 1); cip++) {
                PoolCfg c;
                c.type           = (DDPoolType)type;
                c.k              = {k};
                c.s              = {s};
                c.p              = {p};
                c.d              = {d};
                c.ceil           = ceil ? PETSC_TRUE : PETSC_FALSE;
                c.cip            = cip ? PETSC_TRUE : PETSC_FALSE;
                const PetscInt e = d * (k - 1) + 1;
                InputSpec      in;
                in.shape  = {1, 2, ps[0] * (e + s + 2) + cnt % 3, ps[1] * (e + s + 1) + 1};
                in.pshape = {1, 1, ps[0], ps[1]};
                CheckAgainstSerial(c, in, "sweep");
                cnt++;
              }
  EXPECT_EQ(cnt, 192);
}

TEST(Pool, BatchChannelSplitsAndFormats)
{
  int W = Size();
  for (auto fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, 4, f);
    for (auto &ps : f) {
      InputSpec in;
      in.shape  = {2 * ps[0], 3 * ps[1], 5 * ps[2] + 1, 4 * ps[3] + 2};
      in.pshape = ps;
      in.fmt    = fmt;
      PoolCfg c;
      c.k = {3, 2};
      c.s = {2, 1};
      c.p = {1, 0};
      CheckAgainstSerial(c, in, std::string("batch/channel/spatial, format ") + DDTensorFormats[fmt]);
      c.type = DD_POOL_AVG;
      c.ceil = PETSC_TRUE;
      c.cip  = PETSC_FALSE;
      CheckAgainstSerial(c, in, std::string("batch/channel/spatial, format ") + DDTensorFormats[fmt]);
    }
    /* the format does not change the numbers, and the output keeps the input's format */
    InputSpec in;
    in.shape = {2, 5, 7, 6};
    in.fmt   = fmt;
    InputSpec plain(in);
    plain.fmt = DD_FORMAT_PLAIN;
    PoolCfg c;
    c.k = {3};
    c.s = {2};
    c.p = {1};
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

TEST(Pool, UnbalancedAndSubsetPartitions)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in;
  in.shape  = {1, 2, 5, 6 * W};
  in.pshape = {1, 1, 1, W};
  in.lx     = {{}, {}, {}, std::vector<PetscInt>(W, 6)};
  in.lx[3][0] += 3;
  in.lx[3][W - 1] -= 3;
  PoolCfg c;
  c.k = {3};
  c.s = {2};
  c.p = {1};
  CheckAgainstSerial(c, in, "unbalanced");
  c.type = DD_POOL_AVG;
  CheckAgainstSerial(c, in, "unbalanced");
  InputSpec sub;
  sub.shape  = {1, 2, 5, 4 * W + 1};
  sub.pshape = {1, 1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  CheckAgainstSerial(c, sub, "subset of ranks");
  c.type = DD_POOL_MAX;
  c.ceil = PETSC_TRUE;
  CheckAgainstSerial(c, sub, "subset of ranks");
}

TEST(Pool, ReplicatedDimensions)
{
  int      W  = Size();
  PetscInt Pr = W % 2 == 0 ? 2 : W, Ps = W / Pr;
  PoolCfg  c;
  c.k = {3};
  c.s = {2};
  c.p = {1};
  for (PetscInt rep : {1, 2}) { /* channels, or the first spatial dimension, replicated over Pr workers */
    std::vector<PetscInt> shape = {2, 3, 7, 5 * Ps + 1}, ps = {1, 1, 1, Ps};
    ps[rep]                     = Pr;
    for (int type = 0; type < 2; type++) {
      c.type = (DDPoolType)type;
      InputSpec in;
      in.shape = shape;
      ExpectSameRun(RunReplicated(Configure(c), shape, ps, rep, 11), RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 11), 1e-14, "replicated dimension " + std::to_string(rep) + " (" + Describe(c) + ")");
    }
  }
}

/* Appendix B.4 / B.5: right-looking k = 2, s = 2 pooling of n entries on P workers */
static void AppendixB(PetscInt n, PetscInt P, const std::vector<PetscInt> &wanthi, const std::vector<PetscInt> &wantskip)
{
  InputSpec in;
  in.shape  = {1, 1, n};
  in.pshape = {1, 1, P};
  for (PetscInt r = 0; r < P; r++) in.ranks.push_back((PetscMPIInt)r);
  for (int type = 0; type < 2; type++) {
    PoolCfg c;
    c.type   = (DDPoolType)type;
    DDTensor x = MakeInput(in, DD_FLOAT64, 1);
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    PetscInt lo[3], hi[3];
    DDT(DDTensorGetHalo(x, lo, hi));
    PetscMPIInt r = Rank();
    if (r < P) {
      EXPECT_EQ(lo[2], 0) << "worker " << r << ": no left halo in App. B";
      EXPECT_EQ(hi[2], wanthi[r]) << "worker " << r << ": right halo";
    }
    /* the extra input a worker skips: its bulk starts before its window */
    PetscInt start[3], nn[3];
    DDT(DDTensorGetCorners(x, start, nn));
    if (r < P) {
      DDTensor        y;
      PetscInt        ys[3], yn[3];
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDTensorGetCorners(y, ys, yn));
      EXPECT_EQ(2 * ys[2] - start[2], wantskip[r]) << "worker " << r << ": extra input";
    }
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
    CheckAgainstSerial(c, in, "Appendix B");
  }
}

TEST(Pool, AppendixB4SimpleUnbalanced)
{
  if (Size() < 3) GTEST_SKIP() << "needs 3 ranks";
  /* n = 10 on 3 workers: bulks [0,4) [4,7) [7,10), outputs [0,2) [2,4) [4,5) */
  AppendixB(10, 3, {0, 1, 0}, {0, 0, 1});
}

TEST(Pool, AppendixB5ComplexUnbalanced)
{
  if (Size() < 6) GTEST_SKIP() << "needs 6 ranks";
  /* n = 20 on 6 workers: bulks of 4,4,3,3,3,3, outputs of 2,2,2,2,1,1 */
  AppendixB(20, 6, {0, 0, 1, 2, 1, 0}, {0, 0, 0, 1, 2, 1});
}

TEST(Pool, AdjointTestAverage)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f)
    for (int cip = 0; cip < 2; cip++) {
      DDTensor x = MakeInput({{2, 3, 6 * ps[0] + 1, 6 * ps[1] + 2}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
      DDLayer  l;
      PoolCfg  c;
      c.type = DD_POOL_AVG;
      c.k    = {3};
      c.s    = {2};
      c.p    = {1};
      c.ceil = PETSC_TRUE;
      c.cip  = cip ? PETSC_TRUE : PETSC_FALSE;
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

/* RunLayer for one input whose blocked format has block size bs */
static RunResult RunBlocked(const std::function<void(DDLayer)> &configure, const InputSpec &spec, DDDataType dt, PetscInt64 seed, PetscInt bs)
{
  RunResult R;
  DDTensor  x = MakeInput(spec, dt, seed + 1), y, dy, dx;
  DDT(DDTensorSetBlockSize(x, bs));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  R.y = GatherAll(y);
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, seed + 7, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDTensorSet(dx, 12345.0));
  DDT(DDLayerBackward(l, dy, dx));
  R.dx.push_back(GatherAll(dx));
  for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
  return R;
}

TEST(Pool, FastKernelsMatchReference)
{
  /* oneDNN (float32) against the reference loops (float64), every format, 1-3-D */
  struct {
    DDTensorFormat fmt;
    PetscInt       bs;
  } fmts[] = {{DD_FORMAT_PLAIN, 1}, {DD_FORMAT_CHANNELS_LAST, 1}, {DD_FORMAT_BLOCKED, 8}, {DD_FORMAT_BLOCKED, 16}};
  std::vector<PoolCfg> cfgs(5);
  cfgs[0].k = {3}, cfgs[0].s = {2}, cfgs[0].p = {1};
  cfgs[1]   = cfgs[0], cfgs[1].type = DD_POOL_AVG, cfgs[1].ceil = PETSC_TRUE; /* include-pad with a ceil overhang */
  cfgs[2]   = cfgs[1], cfgs[2].cip = PETSC_FALSE;
  cfgs[3].k = {3}, cfgs[3].s = {1}, cfgs[3].d = {2}, cfgs[3].ceil = PETSC_TRUE;
  cfgs[4].k = {4}, cfgs[4].s = {2}, cfgs[4].p = {2}, cfgs[4].ceil = PETSC_TRUE, cfgs[4].type = DD_POOL_AVG;
  for (auto &F : fmts)
    for (int D = 1; D <= 3; D++)
      for (size_t ci = 0; ci < cfgs.size(); ci++) {
        const PoolCfg &c = cfgs[ci];
        if (D != 2 && ci >= 2) continue; /* all configurations in 2-D, two in 1-D and 3-D (suite time under oversubscribed MPI) */
        InputSpec in;
        in.shape = {2, F.fmt == DD_FORMAT_BLOCKED ? 2 * F.bs + 3 : 5};
        for (int j = 0; j < D; j++) in.shape.push_back(D == 3 ? 6 + j : 10 - j);
        in.fmt = F.fmt;
        RunResult f32 = RunBlocked(Configure(c), in, DD_FLOAT32, 5, F.bs), f64 = RunBlocked(Configure(c), in, DD_FLOAT64, 5, F.bs);
        ExpectSameRun(f32, f64, 2e-6, std::string("oneDNN vs reference, ") + DDTensorFormats[F.fmt] + ", " + std::to_string(D) + "-D, " + Describe(c));
      }
}

TEST(Pool, FastKernelsAreJitOnTheirOwnFormats)
{
  /* a blocked (16c and 8c) float32 input, set up like the layer sees it after a oneDNN convolution */
  for (PetscInt bs : {8, 16})
    for (int type = 0; type < 2; type++) {
      InputSpec in = SplitLast({2, 32, 12, 16 * Size()}, Size());
      DDTensor  x  = MakeInput(in, DD_FLOAT32, 2);
      DDT(DDTensorSetBlockSize(x, bs));
      DDT(DDTensorSetFormat(x, DD_FORMAT_BLOCKED));
      PoolCfg c;
      c.type = (DDPoolType)type;
      DDLayer l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      std::string text = LayerViewText(l);
      if (Rank() == 0) printf("[ pool %s, %" PetscInt_FMT "c blocked float32 ] %s", c.type == DD_POOL_MAX ? "max" : "avg", bs, text.c_str());
      /* oneDNN's pooling has jit kernels for 8c blocks from AVX2 on, for 16c blocks only with AVX-512
         (on an AVX2-only processor its convolutions prefer 8c, so the network hands on 8c there) */
      if (bs == 8 || __builtin_cpu_supports("avx512f")) EXPECT_NE(text.find("kernel: jit:"), std::string::npos) << text;
      else EXPECT_NE(text.find("kernel: fast loops"), std::string::npos) << text; /* oneDNN's reference declined: the /cpu/blas loops */
      EXPECT_EQ(text.find("window copied"), std::string::npos) << text; /* k = s = 2 on even pieces: the window is the storage */
      /* and the numbers match the plain float64 reference */
      DDTensor y, x64, y64;
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerForward(l, x, y));
      std::vector<double> a = GatherAll(y);
      DDLayer l64;
      x64 = MakeInput(in, DD_FLOAT64, 2);
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l64));
      Configure(c)(l64);
      DDT(DDLayerSetUp(l64, x64));
      DDT(DDLayerGetOutput(l64, &y64));
      DDT(DDLayerForward(l64, x64, y64));
      EXPECT_LT(RelDiff(a, GatherAll(y64)), 1e-6);
      DDT(DDLayerDestroy(&l64));
      DDT(DDTensorDestroy(&x64));
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
}

/*
  An output with a halo (a 3x3 convolution consumes it, as in the main job's U-Net): oneDNN would
  stage its output through a dense buffer, so /cpu/dnnl declines and the /cpu/blas loops take the
  layer; forward and backward equal the float64 reference, and the halo is left alone. Plain
  storage takes the loops as well where oneDNN has no jit kernel for it (without AVX-512).
*/
TEST(Pool, StagedOutputTakesTheLoops)
{
  for (int type = 0; type < 2; type++) {
    InputSpec in = SplitLast({2, 16, 12, 16 * Size()}, Size());
    DDTensor  x  = MakeInput(in, DD_FLOAT32, 3), x64 = MakeInput(in, DD_FLOAT64, 3);
    DDT(DDTensorSetBlockSize(x, 8));
    DDT(DDTensorSetFormat(x, DD_FORMAT_BLOCKED));
    PoolCfg c;
    c.type = (DDPoolType)type;
    DDLayer  l, l64;
    PetscInt lo[4] = {0, 0, 1, 1}, hi[4] = {0, 0, 1, 1};
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetOutputHalo_Private(l, lo, hi));
    DDT(DDLayerSetUp(l, x));
    std::string text = LayerViewText(l);
    EXPECT_NE(text.find("kernel: fast loops"), std::string::npos) << text;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l64));
    Configure(c)(l64);
    DDT(DDLayerSetUp(l64, x64));
    DDTensor y, y64, dx, dx64;
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDLayerGetOutput(l64, &y64));
    { /* the whole storage 7: the halo must keep it */
      PetscInt m;
      float   *a;
      DDT(DDTensorGetLocalStorageSize(y, &m));
      DDT(DDTensorGetArray(y, (void **)&a));
      std::fill(a, a + m, 7.0f);
      DDT(DDTensorRestoreArray(y, (void **)&a));
    }
    DDT(DDLayerForward(l, x, y));
    DDT(DDLayerForward(l64, x64, y64));
    EXPECT_LT(RelDiff(GatherAll(y), GatherAll(y64)), 1e-6) << text;
    {
      PetscInt m;
      float   *a;
      DDT(DDTensorGetLocalStorageSize(y, &m));
      DDT(DDTensorGetArray(y, (void **)&a));
      PetscInt sevens = 0, bulk;
      for (PetscInt i = 0; i < m; i++) sevens += a[i] == 7.0f;
      DDT(DDTensorRestoreArray(y, (void **)&a));
      DDT(DDTensorGetLocalSize(y, &bulk));
      EXPECT_EQ(sevens, m - bulk) << "the halo was written, or the bulk not"; /* the inputs are in [-1, 1]: no bulk entry is 7 */
    }
    DDTensor dy, dy64;
    DDT(DDTensorDuplicate(y, &dy));
    DDT(DDTensorDuplicate(y64, &dy64));
    DDT(DDTensorSetRandomGlobal(dy, 4, -1, 1));
    DDT(DDTensorSetRandomGlobal(dy64, 4, -1, 1));
    DDT(DDTensorDuplicate(x, &dx));
    DDT(DDTensorDuplicate(x64, &dx64));
    DDT(DDLayerBackward(l, dy, dx));
    DDT(DDLayerBackward(l64, dy64, dx64));
    EXPECT_LT(RelDiff(GatherAll(dx), GatherAll(dx64)), 1e-6) << text;
    for (DDTensor *t : {&x, &x64, &dx, &dx64, &dy, &dy64}) DDT(DDTensorDestroy(t));
    DDT(DDLayerDestroy(&l));
    DDT(DDLayerDestroy(&l64));
  }
  /* plain storage (LeNet-5's s2 after c1's 6 channels): without AVX-512 oneDNN 2.6 has only its
     simple_nchw kernel there, so the loops take it; with AVX-512 it has a jit kernel for plain
     storage, which runs (the rule: oneDNN only where it has a jit kernel, never its simple or ref ones) */
  InputSpec in = SplitLast({2, 6, 12, 16 * Size()}, Size());
  DDTensor  x  = MakeInput(in, DD_FLOAT32, 3);
  DDLayer   l;
  PoolCfg   c;
  c.type = DD_POOL_AVG;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  std::string text = LayerViewText(l);
  EXPECT_TRUE(text.find("kernel: fast loops") != std::string::npos || text.find("kernel: jit:") != std::string::npos) << text;
  EXPECT_EQ(text.find("kernel: simple"), std::string::npos) << text;
  EXPECT_EQ(text.find("kernel: ref"), std::string::npos) << text;
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Pool, Float32DistributedMatchesSerial)
{
  /* oneDNN on P ranks, including windows with extra input (copied) and halos, vs 1 rank */
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto fmt : {DD_FORMAT_PLAIN, DD_FORMAT_BLOCKED}) {
    InputSpec in;
    in.shape  = {2, 16, 5 * f.back()[0] + 1, 5 * f.back()[1]};
    in.pshape = {1, 1, f.back()[0], f.back()[1]};
    in.fmt    = fmt;
    PoolCfg c;
    CheckAgainstSerial(c, in, "float32 k2 s2", DD_FLOAT32, 1e-15);
    c.k = {3};
    c.s = {2};
    c.p = {1};
    CheckAgainstSerial(c, in, "float32 k3 s2 p1", DD_FLOAT32, 1e-6); /* overlapping windows: the halo's adjoint sums in another order */
    c.type = DD_POOL_AVG;
    c.ceil = PETSC_TRUE;
    CheckAgainstSerial(c, in, "float32 avg", DD_FLOAT32, 1e-6);
  }
}

TEST(Pool, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 2, 5, 7};
  in.pshape = {1, 1, 1, Size() > 1 ? 2 : 1};
  PoolCfg c;
  c.k = {3};
  c.s = {2};
  c.p = {1};
  ExpectFiniteDifferences(Configure(c), {in}, 9, 1e-7); /* random inputs: no ties */
  c.d = {2};
  c.p = {0};
  c.s = {1};
  ExpectFiniteDifferences(Configure(c), {in}, 10, 1e-7);
  c      = PoolCfg();
  c.type = DD_POOL_AVG;
  c.k    = {3};
  c.s    = {2};
  c.p    = {1};
  c.ceil = PETSC_TRUE;
  ExpectFiniteDifferences(Configure(c), {in}, 11, 1e-7);
}

/*
  PyTorch's numbers, derived by hand from its definitions (torch.nn.MaxPool2d / AvgPool2d):
  x = arange(16).view(1,1,4,4), k = 2, s = 2: max [[5,7],[13,15]], avg [[2.5,4.5],[10.5,12.5]];
  x = arange(25).view(1,1,5,5), k = 2, s = 2, ceil_mode: 3 x 3 outputs, the last row and column
  of windows overhang (avg divides by the entries that exist, as p = 0).
*/
TEST(Pool, HandComputedPyTorch2D)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    std::vector<double> x16(16), x25(25);
    for (int i = 0; i < 16; i++) x16[i] = i;
    for (int i = 0; i < 25; i++) x25[i] = i;
    InputSpec s4 = SplitLast({1, 1, 4, 4}, 2), s5 = SplitLast({1, 1, 5, 5}, 3);
    PoolCfg   c;
    c.k = {2};
    RunResult r = RunValues(Configure(c), s4, x16, {1, 1, 1, 1}, dt);
    ExpectValues(r.y, {5, 7, 13, 15}, 0, "max 4x4");
    ExpectValues(r.dx[0], {0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1}, 0, "max 4x4 gradient");
    c.type = DD_POOL_AVG;
    r      = RunValues(Configure(c), s4, x16, {1, 2, 3, 4}, dt);
    ExpectValues(r.y, {2.5, 4.5, 10.5, 12.5}, 0, "avg 4x4");
    ExpectValues(r.dx[0], {.25, .25, .5, .5, .25, .25, .5, .5, .75, .75, 1, 1, .75, .75, 1, 1}, 0, "avg 4x4 gradient");
    c.ceil = PETSC_TRUE;
    c.type = DD_POOL_MAX;
    r      = RunValues(Configure(c), s5, x25, {}, dt);
    ExpectValues(r.y, {6, 8, 9, 16, 18, 19, 21, 23, 24}, 0, "max 5x5 ceil_mode");
    c.type = DD_POOL_AVG;
    r      = RunValues(Configure(c), s5, x25, {}, dt);
    ExpectValues(r.y, {3, 5, 6.5, 13, 15, 16.5, 20.5, 22.5, 24}, 1e-6, "avg 5x5 ceil_mode");
  }
}

/*
  1-D, x = [1,2,3,4,5,6], k = 3, s = 2, p = 1, ceil_mode (torch.nn.MaxPool1d / AvgPool1d): four
  windows starting at -1, 1, 3, 5; the last one overhangs the padded input [-1, 7).
  max [2,4,6,6]; avg count_include_pad [3/3, 9/3, 15/3, 6/2] = [1,3,5,3] (the overhang is not
  counted); avg without [3/2, 3, 5, 6/1]. Gradients for dy = 1 follow by hand. Also kernel 4 on
  3 entries with ceil_mode (allowed by PyTorch: one overhanging window) and dilation.
*/
TEST(Pool, HandComputedPyTorch1D)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    const double tol = dt == DD_FLOAT64 ? 1e-15 : 1e-6;
    InputSpec    s6  = SplitLast({1, 1, 6}, 2);
    std::vector<double> x = {1, 2, 3, 4, 5, 6}, ones = {1, 1, 1, 1};
    PoolCfg c;
    c.k        = {3};
    c.s        = {2};
    c.p        = {1};
    c.ceil     = PETSC_TRUE;
    RunResult r = RunValues(Configure(c), s6, x, ones, dt);
    ExpectValues(r.y, {2, 4, 6, 6}, 0, "max ceil pad");
    ExpectValues(r.dx[0], {0, 1, 0, 1, 0, 2}, 0, "max ceil pad gradient");
    c.type = DD_POOL_AVG;
    r      = RunValues(Configure(c), s6, x, ones, dt);
    ExpectValues(r.y, {1, 3, 5, 3}, tol, "avg ceil pad count_include_pad");
    ExpectValues(r.dx[0], {1. / 3, 2. / 3, 1. / 3, 2. / 3, 1. / 3, 1. / 3 + 1. / 2}, tol, "avg ceil pad count_include_pad gradient");
    c.cip = PETSC_FALSE;
    r     = RunValues(Configure(c), s6, x, ones, dt);
    ExpectValues(r.y, {1.5, 3, 5, 6}, tol, "avg ceil pad no count_include_pad");
    ExpectValues(r.dx[0], {.5, .5 + 1. / 3, 1. / 3, 2. / 3, 1. / 3, 1. / 3 + 1}, tol, "avg ceil pad no count_include_pad gradient");
    /* kernel 4, stride 2 on 3 entries in ceil mode: one window [0, 4) */
    PoolCfg k4;
    k4.k    = {4};
    k4.s    = {2};
    k4.ceil = PETSC_TRUE;
    r       = RunValues(Configure(k4), SplitLast({1, 1, 3}, 1), {1, 5, 2}, {1}, dt);
    ExpectValues(r.y, {5}, 0, "max kernel beyond the input");
    ExpectValues(r.dx[0], {0, 1, 0}, 0, "max kernel beyond the input gradient");
    k4.type = DD_POOL_AVG;
    r       = RunValues(Configure(k4), SplitLast({1, 1, 3}, 1), {1, 5, 2}, {3}, dt);
    ExpectValues(r.y, {8. / 3}, tol, "avg kernel beyond the input");
    ExpectValues(r.dx[0], {1, 1, 1}, tol, "avg kernel beyond the input gradient");
    /* dilation 2, kernel 2, stride 1 on [3,1,4,1,5]: windows {0,2},{1,3},{2,4}: [4, 1, 5]; the tie goes to the first */
    PoolCfg dl;
    dl.k = {2};
    dl.s = {1};
    dl.d = {2};
    r    = RunValues(Configure(dl), SplitLast({1, 1, 5}, 2), {3, 1, 4, 1, 5}, {1, 1, 1}, dt);
    ExpectValues(r.y, {4, 1, 5}, 0, "dilated max");
    ExpectValues(r.dx[0], {0, 1, 1, 0, 1}, 0, "dilated max gradient (tie to the first)");
  }
}

TEST(Pool, TiesGoToTheFirstMaximum)
{
  /* constant input: every window's gradient goes to its first (top-left) entry, as in PyTorch */
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (auto fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
      InputSpec in = SplitLast({1, 16, 4, 4 * Size()}, Size());
      in.fmt       = fmt;
      PetscInt            N = 16 * 16 * Size();
      std::vector<double> x(N, 1.0), dy(N / 4, 1.0), want(N, 0.0);
      for (PetscInt c = 0; c < 16; c++)
        for (PetscInt i = 0; i < 4; i += 2)
          for (PetscInt j = 0; j < 4 * Size(); j += 2) want[(c * 4 + i) * 4 * Size() + j] = 1;
      RunResult r = RunValues(Configure(PoolCfg()), in, x, dy, dt);
      ExpectValues(r.dx[0], want, 0, std::string("ties, ") + DDDataTypes[dt] + " " + DDTensorFormats[fmt]);
    }
}

TEST(Pool, InputLayoutChangedSinceSetUpAndInference)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    InputSpec in = SplitLast({2, 3, 5, 6 * Size() + 1}, Size());
    PoolCfg   c;
    c.k = {3};
    c.s = {2};
    c.p = {1};
    DDTensor x = MakeInput(in, dt, 3), y, dy, dx, dx2, y2;
    DDLayer  l;
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
    /* another layer grew x's halo; the output and gradients are tensors with halos of their own */
    PetscInt lo[4] = {0, 0, 2, 3}, hi[4] = {1, 0, 1, 2};
    DDT(DDTensorEnsureHalo(x, lo, hi));
    DDT(DDTensorDuplicate(y, &y2));
    DDT(DDTensorSetHalo(y2, lo, hi));
    DDT(DDTensorDuplicate(x, &dx2));
    DDT(DDLayerSetTraining(l, PETSC_FALSE)); /* inference: max pooling must still give its gradient */
    DDT(DDLayerForward(l, x, y2));
    EXPECT_LT(RelDiff(GatherAll(y2), y0), 1e-15);
    DDT(DDTensorSetHalo(dy, lo, hi));
    DDT(DDLayerBackward(l, dy, dx2));
    EXPECT_LT(RelDiff(GatherAll(dx2), dx0), 1e-15);
    for (DDTensor *t : {&dy, &dx, &dx2, &y2, &x}) DDT(DDTensorDestroy(t));
    DDT(DDLayerDestroy(&l));
  }
}

TEST(Pool, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_type", "pool"));
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_type", "avg"));
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_kernel", "3,2"));
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_stride", "2"));
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_padding", "1,0"));
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_ceil_mode", "true"));
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_count_include_pad", "false"));
  PetscInt  Wd = 6 * Size() + 1;
  InputSpec in = SplitLast({1, 2, 8, Wd}, Size());
  auto      fromOptions = [](DDLayer l) {
    DDT(DDLayerSetOptionsPrefix(l, "pool1_"));
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
  EXPECT_EQ(shape[2], 5); /* ceil((8 + 2 - 3) / 2) + 1 = 5; (5 - 1) 2 = 8 < 8 + 1 */
  EXPECT_EQ(shape[3], (Wd - 2 + 1) / 2 + 1);
  DDT(DDLayerDestroy(&l));
  PoolCfg c;
  c.type = DD_POOL_AVG;
  c.k    = {3, 2};
  c.s    = {2};
  c.p    = {1, 0};
  c.ceil = PETSC_TRUE;
  c.cip  = PETSC_FALSE;
  ExpectSameRun(RunLayer(fromOptions, {in}, DD_FLOAT64, 2), RunLayer(Configure(c), {in}, DD_FLOAT64, 2), 1e-15, "options vs setters");
  /* -pool1_layer_pool_kernel 3,3,3 for a 2-D input */
  DDT(PetscOptionsSetValue(NULL, "-pool1_layer_pool_kernel", "3,3,3"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  fromOptions(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "-pool1_layer_pool_kernel has 3 entries but the input has 2 spatial dimension");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-pool1_layer_type", "-pool1_layer_pool_type", "-pool1_layer_pool_kernel", "-pool1_layer_pool_stride", "-pool1_layer_pool_padding", "-pool1_layer_pool_ceil_mode", "-pool1_layer_pool_count_include_pad"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(PoolBadInput, KernelPaddingDilationAndMissingKernel)
{
  DDTensor x = MakeInput(SplitLast({1, 2, 4, 4 * Size()}, Size()), DD_FLOAT64, 1);
  DDLayer  l;
  PoolCfg  c;
  /* no kernel */
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERPOOL));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs -layer_pool_kernel");
  DDT(DDLayerDestroy(&l));
  /* kernel larger than the padded input: 4 + 2 x 1 < 7 */
  c.k = {7, 2};
  c.p = {1, 0};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "is larger than the padded input (4 + 2 x 1)");
  DDT(DDLayerDestroy(&l));
  /* padding more than half the kernel (PyTorch's rule) */
  c.k = {3};
  c.p = {2};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "Padding 2 along spatial dimension 0 must be at most half the kernel size 3");
  DDT(DDLayerDestroy(&l));
  /* average pooling with a dilation */
  c      = PoolCfg();
  c.type = DD_POOL_AVG;
  c.d    = {1, 2};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "Average pooling has no dilation");
  DDT(DDLayerDestroy(&l));
  /* zero stride */
  c   = PoolCfg();
  c.s = {0};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "-layer_pool_stride entry 0 must be at least 1");
  DDT(DDLayerDestroy(&l));
  /* setters of another type, and a tensor that is not N x C x spatial */
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONV));
  DD_EXPECT_ERROR(DDLayerPoolSetCeilMode(l, PETSC_TRUE), PETSC_ERR_ARG_WRONG, "needs a pool layer");
  DDT(DDLayerDestroy(&l));
  DDTensor x2 = MakeInput({{3, 8}, {}, {}, {}}, DD_FLOAT64, 1);
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(PoolCfg())(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x2), PETSC_ERR_ARG_INCOMP, "1 to 3 spatial dimensions");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x2));
  DDT(DDTensorDestroy(&x));
}

/*
  Pieces thinner than the window's reach, and the pooled output having fewer rows than there are
  workers (a global pool): the halo comes from beyond the adjacent workers.
*/
TEST(Pool, PartitionFinerThanTheWindow)
{
  int W = Size();
  for (int t = 0; t < 2; t++) {
    PoolCfg   c;
    InputSpec in;
    c.type    = t ? DD_POOL_AVG : DD_POOL_MAX;
    c.k       = {7};
    c.s       = {1};
    c.p       = {3};
    in.shape  = {1, 2, 2 * W};
    in.pshape = {1, 1, W};
    CheckAgainstSerial(c, in, "1-D pieces of 2");
    /* a global pool over a 2-D partition: one output entry */
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, 2, f);
    for (auto &ps : f) {
      c.k       = {2 * ps[0] + 1, 3 * ps[1]};
      c.s       = c.k;
      c.p       = {0, 0};
      in.shape  = {2, 3, 2 * ps[0] + 1, 3 * ps[1]};
      in.pshape = {1, 1, ps[0], ps[1]};
      CheckAgainstSerial(c, in, "global pool");
    }
    /* VGG's case: 4 rows pooled by 2 on 4 workers (2 outputs) */
    c.k       = {2};
    c.s       = {2};
    c.p       = {0};
    in.shape  = {2, 2, std::max(W, 2), 3};
    in.pshape = {1, 1, W, 1};
    CheckAgainstSerial(c, in, "fewer outputs than workers");
  }
}

/* ---- divisor_override (torch 1.13: F.avg_pool2d / avg_pool3d(..., divisor_override=n)) ---- */

static std::function<void(DDLayer)> ConfigureDiv(const PoolCfg &c, PetscInt divisor)
{
  return [c, divisor](DDLayer l) {
    Configure(c)(l);
    DDT(DDLayerPoolSetDivisorOverride(l, divisor));
  };
}

/* x = 0.5 arange(30) - 3 (1,1,5,6), k 3, s 2, p 1, ceil_mode, count_include_pad False, divisor_override 5; dy = 0.25 arange(12) + 1 */
TEST(PoolDivisorOverride, PyTorch2DOnEveryPartition)
{
  std::vector<double> xv(30), dyv(12);
  for (int i = 0; i < 30; i++) xv[i] = 0.5 * i - 3;
  for (int i = 0; i < 12; i++) dyv[i] = 0.25 * i + 1;
  const std::vector<double> yref  = {-1.0, -0.6, 0.6, 0.4, 3.9, 7.2, 9.0, 3.3, 6.2, 10.2, 11.4, 4.0};
  const std::vector<double> dxref = {0.2, 0.45, 0.25, 0.55, 0.3, 0.6499999999999999, 0.6000000000000001, 1.3, 0.7, 1.5, 0.8, 1.7, 0.4, 0.8500000000000001, 0.45, 0.95, 0.5, 1.05, 1.0, 2.1, 1.1, 2.3, 1.2, 2.5, 0.6, 1.25, 0.65, 1.35, 0.7, 1.45};
  PoolCfg                   c;
  c.type = DD_POOL_AVG;
  c.k = {3}, c.s = {2}, c.p = {1}, c.ceil = PETSC_TRUE, c.cip = PETSC_FALSE;
  for (PetscInt P = 1; P <= PetscMin(Size(), 3); P++)
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST}) {
        InputSpec in = SplitLast({1, 1, 5, 6}, P);
        in.fmt       = fmt;
        RunResult r  = RunValues(ConfigureDiv(c, 5), in, xv, dyv, dt);
        std::string what = std::to_string(P) + " worker(s), " + (dt == DD_FLOAT64 ? "float64 " : "float32 ") + DDTensorFormats[fmt];
        ExpectValues(r.y, yref, dt == DD_FLOAT64 ? 1e-14 : 1e-5, "y, " + what);
        ExpectValues(r.dx[0], dxref, dt == DD_FLOAT64 ? 1e-14 : 1e-6, "dx, " + what);
      }
}

TEST(PoolDivisorOverride, PyTorch3DAndDistributedEqualsSerial)
{
  /* F.avg_pool3d(0.1 arange(120).reshape(1,2,3,4,5), 2, 1, 1, divisor_override=3): shape (1,2,4,5,6), sum 1904 */
  std::vector<double> xv(120);
  for (int i = 0; i < 120; i++) xv[i] = 0.1 * i;
  PoolCfg c;
  c.type = DD_POOL_AVG;
  c.k = {2}, c.s = {1}, c.p = {1};
  RunResult r = RunValues(ConfigureDiv(c, 3), SplitLast({1, 2, 3, 4, 5}, 2), xv, {}, DD_FLOAT64);
  ASSERT_EQ(r.y.size(), (size_t)240);
  double sum = 0;
  for (double v : r.y) sum += v;
  EXPECT_NEAR(sum, 1904.0, 1e-10);
  ExpectValues(std::vector<double>(r.y.begin(), r.y.begin() + 10), {0.0, 0.03333333333333333, 0.10000000000000002, 0.16666666666666666, 0.23333333333333336, 0.13333333333333333, 0.16666666666666666, 0.4000000000000001, 0.5333333333333333, 0.6666666666666666}, 1e-15, "3-D");
  /* P ranks = 1 rank, 1-3-D, both precisions, every format */
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (int D = 1; D <= 3; D++)
    for (auto &ps : f)
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
        for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
          InputSpec in;
          in.shape  = {2, 3};
          in.pshape = {1, 1};
          for (int j = 0; j < D; j++) {
            in.shape.push_back(j == D - 1 ? 5 * ps[1] + 2 : (j == 0 ? 4 * ps[0] + 1 : 5));
            in.pshape.push_back(j == D - 1 ? ps[1] : (j == 0 ? ps[0] : 1));
          }
          if (D == 1) in.pshape[1] = ps[0], in.shape[1] = 3 * ps[0];
          in.fmt = fmt;
          PoolCfg cc;
          cc.type = DD_POOL_AVG;
          cc.k = {3}, cc.s = {2}, cc.p = {1}, cc.ceil = PETSC_TRUE;
          RunResult par = RunLayer(ConfigureDiv(cc, 7), {in}, dt, 4), ser = RunLayer(ConfigureDiv(cc, 7), {Serial(in)}, dt, 4);
          ExpectSameRun(par, ser, dt == DD_FLOAT64 ? 1e-14 : 1e-6, std::to_string(D) + "-D divisor_override, " + DDTensorFormats[fmt]);
        }
}

TEST(PoolDivisorOverride, OneDNNDeclinesAndTheLoopsMatch)
{
  /* float32 blocked: oneDNN would take it, but not with an override; the result equals the float64 loops */
  InputSpec in = SplitLast({2, 16, 7, 6 * Size()}, Size());
  PoolCfg   c;
  c.type = DD_POOL_AVG;
  c.k = {3}, c.s = {2}, c.p = {1};
  DDTensor x = MakeInput(in, DD_FLOAT32, 2);
  DDT(DDTensorSetBlockSize(x, 8));
  DDT(DDTensorSetFormat(x, DD_FORMAT_BLOCKED));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureDiv(c, 4)(l);
  DDT(DDLayerSetUp(l, x));
  std::string text = LayerViewText(l);
  EXPECT_EQ(text.find("kernel: jit:"), std::string::npos) << text;
  EXPECT_NE(text.find("divisor_override 4"), std::string::npos) << text;
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  RunResult f32 = RunBlocked(ConfigureDiv(c, 4), in, DD_FLOAT32, 5, 8), f64 = RunBlocked(ConfigureDiv(c, 4), in, DD_FLOAT64, 5, 8);
  ExpectSameRun(f32, f64, 2e-6, "divisor_override: float32 loops vs float64");
  /* and the linear map passes the adjoint test */
  DDTensor  x64 = MakeInput(SplitLast({2, 3, 9, 4 * Size() + 1}, Size()), DD_FLOAT64, 3);
  PetscReal err;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureDiv(c, 4)(l);
  DDT(DDLayerSetUp(l, x64));
  DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
  EXPECT_LT(err, 1e-14);
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x64));
}

TEST(PoolDivisorOverride, OptionsAndBadSettings)
{
  DDT(PetscOptionsSetValue(NULL, "-pd_layer_type", "pool"));
  DDT(PetscOptionsSetValue(NULL, "-pd_layer_pool_type", "avg"));
  DDT(PetscOptionsSetValue(NULL, "-pd_layer_pool_kernel", "2"));
  DDT(PetscOptionsSetValue(NULL, "-pd_layer_pool_divisor_override", "2"));
  std::vector<double> xv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  RunResult           r  = RunValues([](DDLayer l) { DDT(DDLayerSetOptionsPrefix(l, "pd_")); DDT(DDLayerSetFromOptions(l)); }, SplitLast({1, 1, 4, 4}, 2), xv, {}, DD_FLOAT64);
  ExpectValues(r.y, {7, 11, 23, 27}, 0, "sums / 2 from the options");
  for (auto o : {"-pd_layer_type", "-pd_layer_pool_type", "-pd_layer_pool_kernel", "-pd_layer_pool_divisor_override"}) DDT(PetscOptionsClearValue(NULL, o));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  PoolCfg c;
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerPoolSetDivisorOverride(l, -2), PETSC_ERR_ARG_OUTOFRANGE, "-layer_pool_divisor_override");
  DDT(DDLayerPoolSetDivisorOverride(l, 3));
  DDTensor x = MakeInput(SplitLast({1, 1, 4, 4}, 2), DD_FLOAT64, 1);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "layer_pool_divisor_override 3 applies to average pooling");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(PoolDivisorOverride, EveryBackendEqualsTheReferenceLoops)
{
  /* the fast loops (/cpu/blas), oneDNN's chain (/cpu/dnnl: declines, falls back) and the reference loops agree, both precisions */
  PoolCfg c;
  c.type = DD_POOL_AVG;
  c.k = {3}, c.s = {2}, c.p = {1}, c.ceil = PETSC_TRUE, c.cip = PETSC_FALSE;
  InputSpec in = SplitLast({2, 8, 7, 5 * Size() + 2}, Size());
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    auto      on  = [&](const char *b) { return [c, b](DDLayer l) { ConfigureDiv(c, 5)(l); DDT(DDLayerSetBackend(l, b)); }; };
    RunResult ref = RunLayer(on("/cpu/ref"), {in}, dt, 6);
    for (const char *b : {"/cpu/blas", "/cpu/dnnl"}) ExpectSameRun(RunLayer(on(b), {in}, dt, 6), ref, dt == DD_FLOAT64 ? 1e-15 : 1e-6, std::string("divisor_override on ") + b);
  }
}

/*
  nan and inf as PyTorch's max pool takes them: a window holding a nan gives nan, and its gradient goes
  to the nan ((v > m) || isnan(v) in the taps' C order: the last nan of the window); +-inf are values.
  oneDNN's jit max pool (float32, /cpu/dnnl, outputs without a halo) dropped the nan, a finite maximum
  of the others coming out instead: its kernel now checks the input and runs the loops where a nan is.
  Every format and backend, windows without and with a halo (k3 s2 p1 across the ranks' boundaries),
  against a scalar model of PyTorch's loop written here.
*/
TEST(Pool, NanAndInfAsPyTorch)
{
  const PetscInt P = Size(), N = 2, C = 16, H = 6, W = 8 * P;
  std::vector<double> x((size_t)(N * C * H * W));
  for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.37 * (double)i + 0.1);
  auto at = [&](PetscInt n, PetscInt c, PetscInt h, PetscInt w) -> double & { return x[(size_t)(((n * C + c) * H + h) * W + w)]; };
  at(0, 1, 2, 3) = NAN;
  at(0, 1, 2, 2) = NAN; /* two nans in one 2x2 window: the gradient goes to the later one */
  at(1, 5, 4, W - 1) = NAN;
  at(0, 7, 3, 8 % W) = NAN; /* on the second rank's first column: in the first rank's halo for k3 */
  at(1, 0, 0, 0) = INFINITY;
  at(0, 2, 5, 5) = -INFINITY;
  for (PetscInt w = 0; w < 4; w++) at(1, 3, 1, w) = -INFINITY; /* a window of -inf alone */
  at(1, 3, 0, 0) = at(1, 3, 0, 1) = -INFINITY;
  for (const auto &kp : std::vector<std::array<PetscInt, 3>>{{2, 2, 0}, {3, 2, 1}}) {
    const PetscInt k = kp[0], s = kp[1], p = kp[2], Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
    std::vector<double> y((size_t)(N * C * Ho * Wo)), dy(y.size()), dx(x.size(), 0.0);
    for (size_t i = 0; i < dy.size(); i++) dy[i] = 1 + (double)(i % 3);
    for (PetscInt n = 0; n < N; n++) /* PyTorch's loop (aten max_pool2d): taps in C order, (v > m) || isnan(v) */
      for (PetscInt c = 0; c < C; c++)
        for (PetscInt i = 0; i < Ho; i++)
          for (PetscInt j = 0; j < Wo; j++) {
            double m = -INFINITY;
            size_t am = 0;
            bool   first = true;
            for (PetscInt a = 0; a < k; a++)
              for (PetscInt b = 0; b < k; b++) {
                const PetscInt h = i * s - p + a, w = j * s - p + b;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                const size_t q = (size_t)(((n * C + c) * H + h) * W + w);
                if (first) am = q, first = false;
                if (x[q] > m || std::isnan(x[q])) m = x[q], am = q;
              }
            const size_t o = (size_t)(((n * C + c) * Ho + i) * Wo + j);
            y[o] = m;
            dx[am] += dy[o];
          }
    PoolCfg c;
    c.k = {k}, c.s = {s}, c.p = {p};
    for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
      for (auto fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
        for (const char *b : {"default", "/cpu/ref", "/cpu/blas", "/cpu/dnnl"}) {
          InputSpec in = SplitLast({N, C, H, W}, P);
          in.fmt       = fmt;
          auto      cf = [c, b](DDLayer l) {
            Configure(c)(l);
            if (strcmp(b, "default")) DDT(DDLayerSetBackend(l, b));
          };
          const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmt] + " " + b + " " + Describe(c) + " at " + std::to_string(P) + " ranks";
          RunResult         r    = RunValues(cf, in, x, dy, dt);
          ASSERT_EQ(r.y.size(), y.size()) << what;
          size_t bady = 0, baddx = 0, nans = 0;
          for (size_t i = 0; i < y.size(); i++) {
            nans += std::isnan(y[i]) ? 1 : 0;
            if (std::isnan(y[i]) != std::isnan(r.y[i]) || (!std::isnan(y[i]) && r.y[i] != (dt == DD_FLOAT32 ? (double)(float)y[i] : y[i]))) bady++;
          }
          for (size_t i = 0; i < dx.size(); i++)
            if (r.dx[0][i] != dx[i]) baddx++;
          EXPECT_GE(nans, 3u) << what;
          EXPECT_EQ(bady, 0u) << what << ": outputs other than PyTorch's (a nan dropped?)";
          EXPECT_EQ(baddx, 0u) << what << ": input gradients other than PyTorch's";
        }
  }
}
