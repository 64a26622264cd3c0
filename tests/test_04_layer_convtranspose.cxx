/*
  DDLAYERCONVTRANSPOSE: a hand-computed case; P ranks equal 1 rank (outputs, input and
  parameter gradients) for spatial partitions in 1-3-D over kernels, strides, padding, output
  padding and dilation, unbalanced and subset partitions, channel distributions (Pci, Pco,
  both, with space); adjoint tests wrt input and weights; the transposed convolution is the
  adjoint of the convolution with the same weights; oneDNN against the reference loops
  (including the workers that fall back to them); finite differences; options; bad input.
*/
#include "layertest.hpp"
#include <iostream>
#include <fstream>
#include <cstdio>
#include <unistd.h>

using namespace ddtest;

struct CTCfg {
  PetscInt              co = 3;
  std::vector<PetscInt> k = {3}, s = {2}, p = {1}, op = {0}, d = {1};
  PetscBool             bias = PETSC_TRUE;
  PetscInt              pco  = 1;
};

static std::function<void(DDLayer)> Configure(const CTCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
    DDT(DDLayerConvSetOutputChannels(l, c.co));
    DDT(DDLayerConvSetKernel(l, (PetscInt)c.k.size(), c.k.data()));
    DDT(DDLayerConvSetStride(l, (PetscInt)c.s.size(), c.s.data()));
    DDT(DDLayerConvSetPadding(l, (PetscInt)c.p.size(), c.p.data()));
    DDT(DDLayerConvSetOutputPadding(l, (PetscInt)c.op.size(), c.op.data()));
    DDT(DDLayerConvSetDilation(l, (PetscInt)c.d.size(), c.d.data()));
    DDT(DDLayerConvSetBias(l, c.bias));
    DDT(DDLayerConvSetChannelWorkers(l, c.pco));
  };
}

static std::string Describe(const CTCfg &c)
{
  char b[128];
  snprintf(b, sizeof(b), "k%d s%d p%d op%d d%d co%d pco%d bias %d", (int)c.k[0], (int)c.s[0], (int)c.p[0], (int)c.op[0], (int)c.d[0], (int)c.co, (int)c.pco, (int)c.bias);
  return b;
}

static void CheckAgainstSerial(const CTCfg &c, const InputSpec &in, const std::string &what, DDDataType dt = DD_FLOAT64, double tol = 1e-12)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 11), ser = RunLayer(Configure(c), {Serial(in)}, dt, 11);
  ExpectSameRun(par, ser, tol, what + " " + Describe(c));
}

/* the text of DDLayerView() (what rank 0 prints), on every rank */
static std::string ViewString(DDLayer l)
{
  char        name[PETSC_MAX_PATH_LEN] = "/tmp/ddnn_convt_viewXXXXXX";
  PetscViewer v;
  if (Rank() == 0) {
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
  }
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, PETSC_COMM_WORLD);
  DDT(PetscViewerASCIIOpen(PETSC_COMM_WORLD, name, &v));
  DDT(DDLayerView(l, v));
  DDT(PetscViewerDestroy(&v));
  std::string text;
  int         len = 0;
  if (Rank() == 0) {
    std::ifstream f(name);
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    std::remove(name);
    len = (int)text.size();
  }
  MPI_Bcast(&len, 1, MPI_INT, 0, PETSC_COMM_WORLD);
  text.resize(len);
  MPI_Bcast(&text[0], len, MPI_CHAR, 0, PETSC_COMM_WORLD);
  return text;
}

/* x = [1, 2], w = [1, 1, 1], stride 2: y = [1, 1, 3, 2, 2]; with padding 1, output padding 1: [1, 3, 2, 2] */
TEST(ConvTranspose, HandComputed1D)
{
  const PetscInt P = Size() > 1 ? 2 : 1;
  for (int padded = 0; padded < 2; padded++) {
    DDTensor x = MakeInput({{1, 1, 2}, {1, 1, P}, {}, {}}, DD_FLOAT64, 1);
    double   xv[2] = {1, 2}, wv[3] = {1, 1, 1}, bv = 0.5;
    DDT(DDTensorSetValuesGlobal(x, xv));
    DDLayer l;
    CTCfg   c;
    c.co = 1;
    c.k  = {3};
    c.s  = {2};
    c.p  = {padded};
    c.op = {padded};
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    PetscInt  np;
    DDTensor *ps, *gs;
    DDT(DDLayerGetParameters(l, &np, &ps));
    ASSERT_EQ(np, 2);
    DDT(DDTensorSetValuesGlobal(ps[0], wv));
    DDT(DDTensorSetValuesGlobal(ps[1], &bv));
    DDTensor y, dy, dx;
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDLayerForward(l, x, y));
    std::vector<double> got = GatherAll(y), want = padded ? std::vector<double>{1, 3, 2, 2} : std::vector<double>{1, 1, 3, 2, 2};
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) EXPECT_DOUBLE_EQ(got[i], want[i] + 0.5) << "y[" << i << "], padded " << padded;
    /* dx_i = sum_t w_t dy[2i + t - p], dw_t = sum_i x_i dy[2i + t - p], db = sum dy */
    std::vector<double> dyv = padded ? std::vector<double>{1, 2, 3, 4} : std::vector<double>{1, 2, 3, 4, 5};
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetValuesGlobal(dy, dyv.data()));
    DDT(DDTensorDuplicate(x, &dx));
    DDT(DDLayerBackward(l, dy, dx));
    std::vector<double> gx = GatherAll(dx), gw, gb;
    DDT(DDLayerGetGradients(l, &np, &gs));
    gw = GatherAll(gs[0]);
    gb = GatherAll(gs[1]);
    std::vector<double> wantdx = padded ? std::vector<double>{3, 9} : std::vector<double>{6, 12}, wantdw = padded ? std::vector<double>{0 + 2 * 2, 1 + 2 * 3, 2 + 2 * 4} : std::vector<double>{7, 10, 13};
    for (int i = 0; i < 2; i++) EXPECT_DOUBLE_EQ(gx[i], wantdx[i]) << "dx[" << i << "], padded " << padded;
    for (int t = 0; t < 3; t++) EXPECT_DOUBLE_EQ(gw[t], wantdw[t]) << "dw[" << t << "], padded " << padded;
    EXPECT_DOUBLE_EQ(gb[0], padded ? 10 : 15);
    DDT(DDTensorDestroy(&dy));
    DDT(DDTensorDestroy(&dx));
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(ConvTranspose, SpatialDistribution1D2D3D)
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
        in.shape.push_back(3 * ps[j] + 1 + j);
        in.pshape.push_back(ps[j]);
      }
      CTCfg c; /* k3 s2 p1 */
      c.op = {1};
      CheckAgainstSerial(c, in, "spatial U-Net upsampling");
      c.k  = {2};
      c.p  = {0};
      c.op = {0};
      CheckAgainstSerial(c, in, "spatial k2 s2");
      c.k  = {D == 3 ? 3 : 4};
      c.s  = {D == 3 ? 1 : 3};
      c.p  = {2};
      c.op = {0};
      c.d  = {2};
      CheckAgainstSerial(c, in, "spatial dilated");
    }
  }
}

TEST(ConvTranspose, KernelStridePaddingOutputPaddingDilationSweep2D)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto ps  = f[f.size() / 2];
  int  cnt = 0;
  for (PetscInt k = 2; k <= 4; k++)
    for (PetscInt s = 1; s <= 3; s++)
      for (PetscInt d = 1; d <= 2; d++)
        for (PetscInt p = 0; p <= 2; p++)
          for (PetscInt op = 0; op < PetscMax(s, d); op++) {
            if ((k + s + d + p + op) % 3) continue;
            cnt++;
            InputSpec in;
            in.shape  = {1, 2, 5 * ps[0] + 1, 5 * ps[1] + 2};
            in.pshape = {1, 1, ps[0], ps[1]};
            CTCfg c;
            c.co   = 2;
            c.k    = {k};
            c.s    = {s};
            c.d    = {d};
            c.p    = {p};
            c.op   = {op};
            c.bias = cnt % 3 ? PETSC_TRUE : PETSC_FALSE;
            CheckAgainstSerial(c, in, "sweep");
          }
  EXPECT_GT(cnt, 20);
  /* different parameters per dimension */
  InputSpec in;
  in.shape  = {1, 2, 3 * ps[0] + 2, 4 * ps[1] + 1};
  in.pshape = {1, 1, ps[0], ps[1]};
  CTCfg c;
  c.k  = {2, 4};
  c.s  = {3, 2};
  c.p  = {0, 1};
  c.op = {2, 1};
  c.d  = {1, 2};
  CheckAgainstSerial(c, in, "anisotropic");
}

TEST(ConvTranspose, UnbalancedAndSubsetPartitions)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in;
  in.shape  = {1, 2, 4, 4 * W};
  in.pshape = {1, 1, 1, W};
  in.lx     = {{}, {}, {}, std::vector<PetscInt>(W, 4)};
  in.lx[3][0] += 2; /* the first piece larger, the last smaller: windows and boxes misalign */
  in.lx[3][W - 1] -= 2;
  CTCfg c;
  c.op = {1};
  CheckAgainstSerial(c, in, "unbalanced");
  c.k  = {4};
  c.s  = {3};
  c.p  = {0};
  c.op = {2};
  CheckAgainstSerial(c, in, "unbalanced, output padding beyond the padding");
  /* on the last W-1 ranks only */
  InputSpec sub;
  sub.shape  = {1, 2, 3, 3 * W};
  sub.pshape = {1, 1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  CheckAgainstSerial(CTCfg(), sub, "subset of ranks");
}

TEST(ConvTranspose, BatchChannelAndGeneralDistributions)
{
  int W = Size();
  /* batch (data parallel) */
  {
    InputSpec in;
    in.shape  = {2 * W, 3, 4, 5};
    in.pshape = {W, 1, 1, 1};
    CheckAgainstSerial(CTCfg(), in, "batch");
  }
  /* Pci only: y = R y^ */
  {
    InputSpec in;
    in.shape  = {2, 2 * W + 1, 4, 3};
    in.pshape = {1, W, 1, 1};
    CheckAgainstSerial(CTCfg(), in, "channel-in");
  }
  /* Pco only: x^ = B x, x on rank 0 */
  {
    InputSpec in;
    in.shape  = {2, 3, 4, 3};
    in.pshape = {1, 1, 1, 1};
    in.ranks  = {0};
    CTCfg c;
    c.co  = 2 * W + 1;
    c.pco = W;
    CheckAgainstSerial(c, in, "channel-out");
  }
  /* Pci x Pco */
  if (W % 2 == 0) {
    InputSpec in;
    in.shape  = {2, 5, 4, 3};
    in.pshape = {1, 2, 1, 1};
    CTCfg c;
    c.co  = W + 1;
    c.pco = W / 2;
    CheckAgainstSerial(c, in, "channel Pci x Pco");
  }
  /* general: Pci x Pco x spatial */
  if (W % 4 == 0) {
    InputSpec in;
    in.shape  = {2, 5, 7, 3};
    in.pshape = {1, 2, 2, 1};
    CTCfg c;
    c.co  = 5;
    c.pco = W / 4;
    c.op  = {1};
    CheckAgainstSerial(c, in, "general Pci x Pco x spatial");
  }
}

/* Inputs, outputs and gradients whose halos differ from the set-up layouts go through copies, one
   per role (x, x^, y, dy, dx): the results must not change. */
TEST(ConvTranspose, TensorsWithOtherHalosThanAtSetUp)
{
  int W = Size();
  for (int variant = 0; variant < 2; variant++) {
    InputSpec in;
    CTCfg     c;
    if (variant == 0) { /* spatial: x used in place (x^ = x) */
      in.shape  = {2, 3, 5, 3 * W};
      in.pshape = {1, 1, 1, W};
    } else { /* channel-in and channel-out: x broadcast over co, y sum-reduced over ci */
      in.shape  = {2, 4, 4, 3};
      in.pshape = {1, W > 1 ? 2 : 1, 1, 1};
      in.ranks  = W > 1 ? std::vector<PetscMPIInt>{0, 1} : std::vector<PetscMPIInt>{0};
      c.pco     = W >= 4 ? 2 : 1;
    }
    ExpectOtherHalosGiveSameResults(Configure(c), in, "variant " + std::to_string(variant));
  }
}

TEST(ConvTranspose, AdjointTestsInputAndWeights)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    DDTensor x = MakeInput({{2, 3, 3 * ps[0] + 1, 3 * ps[1] + 2}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
    for (int cfg = 0; cfg < 2; cfg++) {
      DDLayer l;
      CTCfg   c;
      c.op = {1};
      if (cfg) {
        c.k  = {2};
        c.s  = {3};
        c.p  = {0};
        c.op = {2};
      }
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      PetscReal err;
      DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
      EXPECT_LT(err, 1e-13) << "wrt input " << Describe(c);
      DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
      EXPECT_LT(err, 1e-13) << "wrt weights and bias " << Describe(c);
      DDT(DDLayerDestroy(&l));
    }
    DDT(DDTensorDestroy(&x));
  }
  /* channel distribution */
  {
    DDTensor x = MakeInput({{2, 2 * W, 4, 3}, {1, W, 1, 1}, {}, {}}, DD_FLOAT64, 4);
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(CTCfg())(l);
    DDT(DDLayerSetUp(l, x));
    PetscReal err;
    DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
    EXPECT_LT(err, 1e-13) << "channel-in, wrt input";
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
    EXPECT_LT(err, 1e-13) << "channel-in, wrt weights and bias";
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

/*
  PyTorch's definition: conv_transpose(z, W) is the input gradient of conv(., W) at dy = z, and
  the input gradient of conv_transpose(., W) at dy = x is conv(x, W), when the output padding
  makes the sizes match. Both layers get the same weights (Co_conv, Ci_conv, k...).
*/
TEST(ConvTranspose, IsTheAdjointOfConv)
{
  int W = Size();
  for (int D = 1; D <= 2; D++) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, D, f);
    for (int extra = 0; extra < 2; extra++) {
      auto                  ps = f.back();
      const PetscInt        Ci = 3, Co = 4, k = 3, s = 2, p = 1;
      std::vector<PetscInt> xs = {2, Ci}, zs = {2, Co}, pp = {1, 1};
      for (int j = 0; j < D; j++) {
        PetscInt L = 4 * ps[j] + 5 + extra; /* odd: output padding 0, even: 1 */
        xs.push_back(L);
        zs.push_back((L + 2 * p - k) / s + 1);
        pp.push_back(ps[j]);
      }
      DDTensor x = MakeInput({xs, pp, {}, {}}, DD_FLOAT64, 21), z = MakeInput({zs, pp, {}, {}}, DD_FLOAT64, 22);
      DDLayer  conv, convt;
      PetscInt kk[1] = {k}, ss[1] = {s}, pd[1] = {p}, op[1] = {extra};
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &conv));
      DDT(DDLayerSetType(conv, DDLAYERCONV));
      DDT(DDLayerConvSetOutputChannels(conv, Co));
      DDT(DDLayerConvSetKernel(conv, 1, kk));
      DDT(DDLayerConvSetStride(conv, 1, ss));
      DDT(DDLayerConvSetPadding(conv, 1, pd));
      DDT(DDLayerConvSetBias(conv, PETSC_FALSE));
      DDT(DDLayerSetUp(conv, x));
      DDT(DDLayerInitializeParameters(conv, 5));
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &convt));
      DDT(DDLayerSetType(convt, DDLAYERCONVTRANSPOSE));
      DDT(DDLayerConvSetOutputChannels(convt, Ci));
      DDT(DDLayerConvSetKernel(convt, 1, kk));
      DDT(DDLayerConvSetStride(convt, 1, ss));
      DDT(DDLayerConvSetPadding(convt, 1, pd));
      DDT(DDLayerConvSetOutputPadding(convt, 1, op));
      DDT(DDLayerConvSetBias(convt, PETSC_FALSE));
      DDT(DDLayerSetUp(convt, z));
      /* the same weights */
      PetscInt  np;
      DDTensor *pc, *pt;
      DDT(DDLayerGetParameters(conv, &np, &pc));
      DDT(DDLayerGetParameters(convt, &np, &pt));
      std::vector<double> wv = GatherAll(pc[0]);
      DDT(DDTensorSetValuesGlobal(pt[0], wv.data()));
      /* conv(x) and its input gradient at dy = z */
      DDTensor yc, dyc, dxc, yt, dyt, dzt;
      DDT(DDLayerGetOutput(conv, &yc));
      DDT(DDLayerForward(conv, x, yc));
      DDT(DDLayerCreateOutput(conv, &dyc));
      DDT(DDTensorSetRandomGlobal(dyc, 22, -1, 1)); /* the values of z */
      DDT(DDTensorDuplicate(x, &dxc));
      DDT(DDLayerBackward(conv, dyc, dxc));
      /* convtranspose(z) and its input gradient at dy = x */
      DDT(DDLayerGetOutput(convt, &yt));
      DDT(DDLayerForward(convt, z, yt));
      DDT(DDLayerCreateOutput(convt, &dyt));
      DDT(DDTensorSetRandomGlobal(dyt, 21, -1, 1)); /* the values of x */
      DDT(DDTensorDuplicate(z, &dzt));
      DDT(DDLayerBackward(convt, dyt, dzt));
      std::vector<double> a = GatherAll(yt), b = GatherAll(dxc), cz = GatherAll(dzt), cy = GatherAll(yc);
      EXPECT_LT(RelDiff(a, b), 1e-12) << "convtranspose(z) vs conv's input gradient at z, D " << D << " output padding " << extra;
      EXPECT_LT(RelDiff(cz, cy), 1e-12) << "convtranspose's input gradient at x vs conv(x), D " << D << " output padding " << extra;
      for (auto t : {&dyc, &dxc, &dyt, &dzt, &x, &z}) DDT(DDTensorDestroy(t));
      DDT(DDLayerDestroy(&conv));
      DDT(DDLayerDestroy(&convt));
    }
  }
}

TEST(ConvTranspose, FastKernelsMatchReference)
{
  /* oneDNN deconvolution (float32, its preferred formats) against the reference loops (float64) */
  for (int D = 1; D <= 3; D++) {
    InputSpec in;
    in.shape = {2, 5};
    for (int j = 0; j < D; j++) in.shape.push_back(D == 3 ? 3 : 6 - j);
    CTCfg c;
    c.co = 17;
    c.op = {1};
    RunResult f32 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT32, 5), f64 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 5);
    ExpectSameRun(f32, f64, 2e-5, "oneDNN vs reference " + Describe(c));
    c.co = 16;
    c.k  = {4};
    c.s  = {2};
    c.d  = {2};
    c.p  = {2};
    c.op = {0};
    f32  = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT32, 6);
    f64  = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 6);
    ExpectSameRun(f32, f64, 2e-5, "oneDNN vs reference (dilated) " + Describe(c));
    in.fmt = DD_FORMAT_CHANNELS_LAST;
    c      = CTCfg();
    c.k    = {2};
    c.p    = {0};
    f32    = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT32, 7);
    f64    = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 7);
    ExpectSameRun(f32, f64, 2e-5, "oneDNN vs reference (channels-last input) " + Describe(c));
  }
  /* float32 on P ranks against float32 on 1 rank: summation order only */
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  InputSpec in;
  in.shape  = {2, 16, 3 * f.back()[0] + 1, 3 * f.back()[1]};
  in.pshape = {1, 1, f.back()[0], f.back()[1]};
  CTCfg c;
  c.co = 16;
  c.op = {1};
  CheckAgainstSerial(c, in, "float32 spatial", DD_FLOAT32, 1e-5);
  /* the kernels in use, for the record */
  DDTensor x = MakeInput(in, DD_FLOAT32, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  std::string v = ViewString(l);
  EXPECT_NE(v.find("kernels: "), std::string::npos) << v;
  EXPECT_EQ(v.find("reference loops"), std::string::npos) << v;
  EXPECT_EQ(v.find("no input reaches"), std::string::npos) << v;
  if (Rank() == 0) std::cout << "[ convtranspose float32 view ]\n" << v;
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/*
  Boxes that start or end with rows no input reaches (a negative crop, which oneDNN cannot
  take as padding): oneDNN computes the rest, the bias fills them, and their dy goes to db.
*/
TEST(ConvTranspose, RowsNoInputReaches)
{
  int W = Size();
  for (int cfg = 0; cfg < 3; cfg++) {
    InputSpec in;
    in.shape  = {2, 3, 2 * W + 1, 3};
    in.pshape = {1, 1, W, 1};
    CTCfg c;
    c.co = 17;
    if (cfg == 0) { /* gaps between the taps: s > (k - 1) d + 1, in the middle of the boxes and at their ends */
      c.k  = {1, 2};
      c.s  = {3, 4};
      c.p  = {0, 0};
      c.op = {2, 1};
    } else if (cfg == 1) { /* output padding beyond the padding: the last rows of the output */
      c.k  = {2};
      c.s  = {2};
      c.p  = {0};
      c.op = {1};
    } else { /* a box no input reaches at all: the last worker's (its input piece is empty), for W > 1 */
      in.shape = {2, 3, W > 1 ? W - 1 : 1, 3};
      c.k      = {1};
      c.s      = {2};
      c.p      = {0};
      c.op     = {1};
    }
    RunResult f32 = RunLayer(Configure(c), {in}, DD_FLOAT32, 8), f64 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 8);
    ExpectSameRun(f32, f64, 2e-5, "float32 on P ranks vs float64 " + Describe(c));
    RunResult p64 = RunLayer(Configure(c), {in}, DD_FLOAT64, 8);
    ExpectSameRun(p64, f64, 1e-12, "float64 on P ranks vs 1 rank " + Describe(c));
    DDTensor x = MakeInput(in, DD_FLOAT32, 1);
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    std::string v = ViewString(l);
    EXPECT_NE(v.find("have output rows no input reaches"), std::string::npos) << v;
    EXPECT_EQ(v.find("reference loops"), std::string::npos) << v;
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(ConvTranspose, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 2, 3, 4};
  in.pshape = {1, 1, 1, Size() > 1 ? 2 : 1};
  CTCfg c;
  c.co = 3;
  c.k  = {3, 2};
  c.d  = {2, 1};
  c.op = {1};
  ExpectFiniteDifferences(Configure(c), {in}, 9, 1e-7);
}

TEST(ConvTranspose, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_type", "convtranspose"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_out_channels", "6"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_kernel", "3,2"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_padding", "1,0"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_stride", "2"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_output_padding", "1,0"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_dilation", "1,2"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_bias", "false"));
  PetscInt Wd = 3 * Size() + 2;
  DDTensor x  = MakeInput({{1, 2, 5, Wd}, {1, 1, 1, Size()}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "up1_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDTensor        y;
  const PetscInt *shape;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[1], 6);
  EXPECT_EQ(shape[2], 10);                      /* 4 x 2 - 2 + 2 + 1 + 1 */
  EXPECT_EQ(shape[3], (Wd - 1) * 2 + 2 * 1 + 1); /* dilation 2, kernel 2 */
  PetscInt64 np;
  DDT(DDLayerGetNumParameters(l, &np));
  EXPECT_EQ(np, 2 * 6 * 3 * 2); /* no bias */
  DDT(DDLayerDestroy(&l));
  /* bad arity: a 3-D kernel for a 2-D transposed convolution */
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_kernel", "3,3,3"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "up1_"));
  DDT(DDLayerSetFromOptions(l));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "-up1_layer_convtranspose_kernel has 3 entries but the input has 2 spatial dimension");
  DDT(DDLayerDestroy(&l));
  /* too many entries */
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_kernel", "3"));
  DDT(PetscOptionsSetValue(NULL, "-up1_layer_convtranspose_output_padding", "1,1,1,1"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "up1_"));
  DD_EXPECT_ERROR(DDLayerSetFromOptions(l), PETSC_ERR_ARG_SIZ, "layer_convtranspose_output_padding has 4 entries; give 1 to 3");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-up1_layer_type", "-up1_layer_convtranspose_out_channels", "-up1_layer_convtranspose_kernel", "-up1_layer_convtranspose_padding", "-up1_layer_convtranspose_stride", "-up1_layer_convtranspose_output_padding", "-up1_layer_convtranspose_dilation", "-up1_layer_convtranspose_bias"})
    DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(ConvTransposeBadInput, OutputPaddingNotSmallerThanStrideOrDilation)
{
  DDTensor x = MakeInput({{1, 2, 4}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  CTCfg    c;
  c.s  = {2};
  c.d  = {1};
  c.op = {2};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "must be smaller than either the stride (2) or the dilation (1)");
  DDT(DDLayerDestroy(&l));
  /* smaller than the dilation only: allowed, as in PyTorch */
  c.s  = {1};
  c.d  = {2};
  c.op = {1};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DDT(DDLayerSetUp(l, x));
  DDTensor        y;
  const PetscInt *shape;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[2], 3 * 1 - 2 + 2 * 2 + 1 + 1);
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(ConvTransposeBadInput, MissingChannelsAndEmptyOutput)
{
  DDTensor x = MakeInput({{1, 2, 2, 2}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
  PetscInt k = 1, p = 1;
  DDT(DDLayerConvSetKernel(l, 1, &k));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs its number of output channels (-layer_convtranspose_out_channels)");
  DDT(DDLayerConvSetOutputChannels(l, 2));
  DDT(DDLayerConvSetPadding(l, 1, &p));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "is not positive");
  DDT(DDLayerDestroy(&l));
  /* no kernel */
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
  DDT(DDLayerConvSetOutputChannels(l, 2));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "layer_convtranspose_kernel");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* Pieces thinner than the kernel's reach: the halo comes from beyond the adjacent workers */
TEST(ConvTranspose, PartitionFinerThanTheKernel)
{
  int W = Size();
  for (PetscInt s : {1, 2}) {
    InputSpec in;
    CTCfg     c;
    c.k       = {9};
    c.s       = {s};
    c.p       = {s == 1 ? 0 : 3};
    in.shape  = {1, 2, W};
    in.pshape = {1, 1, W};
    CheckAgainstSerial(c, in, "1-D pieces of 1");
    in.shape  = {2, 1, 3, 2 * W};
    in.pshape = {1, 1, 1, W};
    c.k       = {2, 7};
    c.s       = {1, s};
    c.p       = {0, 1};
    CheckAgainstSerial(c, in, "2-D pieces of 2");
  }
}

TEST(ConvTransposeBadInput, MoreWorkRanksThanExist)
{
  int      W = Size();
  DDTensor x = MakeInput({{1, 1, W}, {1, 1, W}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  CTCfg    c;
  /* more work ranks than exist */
  c     = CTCfg();
  c.pco = W + 1;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "work partition needs");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* the shared setters dispatch per type; conv-only and convtranspose-only ones say so */
TEST(ConvTransposeBadInput, SettersOfTheOtherType)
{
  DDLayer  l;
  PetscInt op = 1, k = 3;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DD_EXPECT_ERROR(DDLayerConvSetKernel(l, 1, &k), PETSC_ERR_ARG_WRONG, "DDLayerConvSetKernel() needs a conv or convtranspose layer, this one is untyped");
  DDT(DDLayerSetType(l, DDLAYERCONV));
  DDT(DDLayerConvSetKernel(l, 1, &k));
  DD_EXPECT_ERROR(DDLayerConvSetOutputPadding(l, 1, &op), PETSC_ERR_ARG_WRONG, "needs a convtranspose layer, this one is conv");
  DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE)); /* conv's setters are replaced by convtranspose's */
  DDT(DDLayerConvSetKernel(l, 1, &k));
  DDT(DDLayerConvSetOutputPadding(l, 1, &op));
  DD_EXPECT_ERROR(DDLayerConvSetPaddingMode(l, DD_PADDING_REFLECT), PETSC_ERR_ARG_WRONG, "needs a conv layer, this one is convtranspose");
  DD_EXPECT_ERROR(DDLayerConvSetOutputChannels(l, 0), PETSC_ERR_ARG_OUTOFRANGE, "must be positive");
  DDT(DDLayerSetType(l, DDLAYERLOSS));
  DD_EXPECT_ERROR(DDLayerConvSetStride(l, 1, &k), PETSC_ERR_ARG_WRONG, "needs a conv or convtranspose layer, this one is loss");
  DDT(DDLayerDestroy(&l));
}
