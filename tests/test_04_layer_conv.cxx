/*
  DDLAYERCONV: P ranks equal 1 rank (outputs, input and parameter gradients) for spatial, batch,
  channel-in, channel-out and general distributions, unbalanced and subset partitions, 1-3-D;
  adjoint tests wrt input and weights; oneDNN against the reference loops; finite differences;
  grouped and depthwise convolutions over channel partitions (pieces that cut groups, unbalanced
  and empty ones); bad input.
*/
#include "layertest.hpp"

using namespace ddtest;

struct ConvCfg {
  PetscInt              co = 4;
  std::vector<PetscInt> k = {3}, s = {1}, p = {1}, d = {1};
  PetscBool             bias = PETSC_TRUE;
  DDPaddingMode         mode = DD_PADDING_ZEROS;
  PetscInt              pco  = 1;
  PetscBool             overlap = PETSC_FALSE;
  PetscInt              groups  = 1;
  std::vector<PetscInt> pafter; /* non-empty: asymmetric padding, p before and pafter after */
  DDConvPaddingType     ptype = DD_CONV_PADDING_EXPLICIT;
};

static std::function<void(DDLayer)> Configure(const ConvCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERCONV));
    DDT(DDLayerConvSetOutputChannels(l, c.co));
    DDT(DDLayerConvSetKernel(l, (PetscInt)c.k.size(), c.k.data()));
    DDT(DDLayerConvSetStride(l, (PetscInt)c.s.size(), c.s.data()));
    if (c.pafter.empty()) DDT(DDLayerConvSetPadding(l, (PetscInt)c.p.size(), c.p.data()));
    else DDT(DDLayerConvSetPaddingBeforeAfter(l, (PetscInt)c.p.size(), c.p.data(), c.pafter.data()));
    DDT(DDLayerConvSetPaddingType(l, c.ptype));
    DDT(DDLayerConvSetGroups(l, c.groups));
    DDT(DDLayerConvSetDilation(l, (PetscInt)c.d.size(), c.d.data()));
    DDT(DDLayerConvSetBias(l, c.bias));
    DDT(DDLayerConvSetPaddingMode(l, c.mode));
    DDT(DDLayerConvSetChannelWorkers(l, c.pco));
    DDT(DDLayerConvSetOverlap(l, c.overlap));
  };
}

static void CheckAgainstSerial(const ConvCfg &c, const InputSpec &in, const char *what, DDDataType dt = DD_FLOAT64, double tol = 1e-12)
{
  RunResult par = RunLayer(Configure(c), {in}, dt, 11), ser = RunLayer(Configure(c), {Serial(in)}, dt, 11);
  ExpectSameRun(par, ser, tol, what);
}

TEST(Conv, SpatialDistribution1D2D3D)
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
      ConvCfg c;
      c.k = {3};
      c.p = {1};
      CheckAgainstSerial(c, in, "spatial k3 p1");
      c.k = {D == 3 ? 2 : 5};
      c.s = {2};
      c.p = {0};
      CheckAgainstSerial(c, in, "spatial strided, no padding (unbalanced halos)");
    }
  }
}

TEST(Conv, KernelStridePaddingDilationSweep2D)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto ps  = f[f.size() / 2];
  int  cnt = 0;
  for (PetscInt k = 1; k <= 5; k += 2)
    for (PetscInt s = 1; s <= 3; s++)
      for (PetscInt d = 1; d <= 2; d++)
        for (PetscInt p = 0; p <= 2; p++) {
          if ((k + s + d + p) % 2) continue;
          cnt++;
          InputSpec in;
          in.shape  = {1, 2, ps[0] * ((k - 1) * d + 2 * s + p + 3), ps[1] * ((k - 1) * d + 2 * s + p + 3) + 1};
          in.pshape = {1, 1, ps[0], ps[1]};
          ConvCfg c;
          c.co   = 3;
          c.k    = {k};
          c.s    = {s};
          c.d    = {d};
          c.p    = {p};
          c.mode = (DDPaddingMode)(cnt % 4);
          c.bias = cnt % 3 ? PETSC_TRUE : PETSC_FALSE;
          char what[96];
          snprintf(what, sizeof(what), "k%d s%d d%d p%d mode %s", (int)k, (int)s, (int)d, (int)p, DDPaddingModes[c.mode]);
          CheckAgainstSerial(c, in, what);
        }
}

TEST(Conv, BatchChannelAndGeneralDistributions)
{
  int W = Size();
  /* batch (data parallel) */
  {
    InputSpec in;
    in.shape  = {2 * W, 3, 7, 6};
    in.pshape = {W, 1, 1, 1};
    CheckAgainstSerial(ConvCfg(), in, "batch");
  }
  /* channel-in only: y = R y^ */
  {
    InputSpec in;
    in.shape  = {2, 2 * W + 1, 6, 5};
    in.pshape = {1, W, 1, 1};
    CheckAgainstSerial(ConvCfg(), in, "channel-in");
  }
  /* channel-out only: x^ = B x, x on rank 0 */
  {
    InputSpec in;
    in.shape  = {2, 3, 6, 5};
    in.pshape = {1, 1, 1, 1};
    in.ranks  = {0};
    ConvCfg c;
    c.co  = 2 * W + 1;
    c.pco = W;
    CheckAgainstSerial(c, in, "channel-out");
  }
  /* general: Pci x Pco x spatial */
  if (W % 2 == 0) {
    InputSpec in;
    in.shape  = {2, 5, 9, 6};
    in.pshape = {1, 2, W / 4 > 0 && W % 4 == 0 ? 2 : 1, 1};
    PetscInt used = 2 * in.pshape[2];
    ConvCfg  c;
    c.co  = 5;
    c.pco = W / used;
    CheckAgainstSerial(c, in, "general Pci x Pco x spatial");
  }
}

TEST(Conv, UnbalancedAndSubsetPartitions)
{
  int W = Size();
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  InputSpec in;
  in.shape  = {1, 2, 5, 6 * W};
  in.pshape = {1, 1, 1, W};
  in.lx     = {{}, {}, {}, std::vector<PetscInt>(W, 6)};
  in.lx[3][0] += 2; /* the first piece larger, the last smaller: halos grow unequal */
  in.lx[3][W - 1] -= 2;
  CheckAgainstSerial(ConvCfg(), in, "unbalanced");
  /* on the last W-1 ranks only */
  InputSpec sub;
  sub.shape  = {1, 2, 5, 4 * W};
  sub.pshape = {1, 1, 1, W - 1};
  for (int r = 1; r < W; r++) sub.ranks.push_back(r);
  CheckAgainstSerial(ConvCfg(), sub, "subset of ranks");
}

TEST(Conv, AdjointTestsInputAndWeights)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f) {
    DDTensor  x = MakeInput({{2, 3, 8 * ps[0] + 1, 8 * ps[1] + 2}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
    DDLayer   l;
    ConvCfg   c;
    c.s = {2};
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(c)(l);
    DDT(DDLayerSetUp(l, x));
    PetscReal err;
    DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
    EXPECT_LT(err, 1e-13) << "wrt input";
    DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
    EXPECT_LT(err, 1e-13) << "wrt weights and bias";
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
  }
}

TEST(Conv, FastKernelsMatchReference)
{
  /* oneDNN (float32, blocked activations) against the reference loops (float64) */
  for (int D = 1; D <= 3; D++) {
    InputSpec in;
    in.shape = {2, 5};
    for (int j = 0; j < D; j++) in.shape.push_back(D == 3 ? 6 : 11 - j);
    ConvCfg c;
    c.co = 17;
    c.k  = {3};
    c.p  = {1};
    RunResult f32 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT32, 5), f64 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 5);
    ExpectSameRun(f32, f64, 2e-5, "oneDNN vs reference");
    c.s = {2};
    c.d = {2};
    c.p = {2};
    f32 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT32, 6);
    f64 = RunLayer(Configure(c), {Serial(in)}, DD_FLOAT64, 6);
    ExpectSameRun(f32, f64, 2e-5, "oneDNN vs reference (strided, dilated)");
  }
  /* float32 on P ranks against float32 on 1 rank: summation order only */
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  InputSpec in;
  in.shape  = {2, 16, 6 * f.back()[0], 5 * f.back()[1]};
  in.pshape = {1, 1, f.back()[0], f.back()[1]};
  ConvCfg c;
  c.co = 16;
  CheckAgainstSerial(c, in, "float32 spatial", DD_FLOAT32, 1e-5);
}

TEST(Conv, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 2, 5, 4};
  in.pshape = {1, 1, 1, Size() > 1 ? 2 : 1};
  ConvCfg c;
  c.co   = 3;
  c.mode = DD_PADDING_REFLECT;
  ExpectFiniteDifferences(Configure(c), {in}, 9, 1e-7);
}

TEST(Conv, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-conv1_layer_type", "conv"));
  DDT(PetscOptionsSetValue(NULL, "-conv1_layer_conv_out_channels", "6"));
  DDT(PetscOptionsSetValue(NULL, "-conv1_layer_conv_kernel", "3,5"));
  DDT(PetscOptionsSetValue(NULL, "-conv1_layer_conv_padding", "1,2"));
  DDT(PetscOptionsSetValue(NULL, "-conv1_layer_conv_stride", "2"));
  PetscInt Wd = 8 * Size() + 2;
  DDTensor x  = MakeInput({{1, 2, 9, Wd}, {1, 1, 1, Size()}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "conv1_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDTensor        y;
  const PetscInt *shape;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[1], 6);
  EXPECT_EQ(shape[2], 5); /* (9 + 2 - 3) / 2 + 1 */
  EXPECT_EQ(shape[3], (Wd + 4 - 5) / 2 + 1);
  PetscInt64 np;
  DDT(DDLayerGetNumParameters(l, &np));
  EXPECT_EQ(np, 6 * 2 * 3 * 5 + 6);
  DDT(DDLayerDestroy(&l));
  /* bad arity: a 3-D kernel for a 2-D convolution */
  DDT(PetscOptionsSetValue(NULL, "-conv1_layer_conv_kernel", "3,3,3"));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "conv1_"));
  DDT(DDLayerSetFromOptions(l));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "-conv1_layer_conv_kernel has 3 entries but the input has 2 spatial dimension");
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-conv1_layer_type", "-conv1_layer_conv_out_channels", "-conv1_layer_conv_kernel", "-conv1_layer_conv_padding", "-conv1_layer_conv_stride"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(ConvBadInput, KernelLargerThanPaddedInputAndMissingChannels)
{
  DDTensor x = MakeInput({{1, 2, 4, 4}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONV));
  PetscInt k = 7;
  DDT(DDLayerConvSetKernel(l, 1, &k));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "output channels");
  DDT(DDLayerConvSetOutputChannels(l, 2));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "larger than the padded input");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* The tester's crash (a huge mode) and silent zeros (mode 5, viewed as "DD_PADDING_"): the mode is range-checked */
TEST(ConvBadInput, PaddingModeOutOfRange)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONV));
  DD_EXPECT_ERROR(DDLayerConvSetPaddingMode(l, (DDPaddingMode)100000), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerConvSetPaddingMode(): unknown padding mode 100000");
  DD_EXPECT_ERROR(DDLayerConvSetPaddingMode(l, (DDPaddingMode)5), PETSC_ERR_ARG_OUTOFRANGE, "unknown padding mode 5");
  DD_EXPECT_ERROR(DDLayerConvSetPaddingMode(l, (DDPaddingMode)-1), PETSC_ERR_ARG_OUTOFRANGE, "unknown padding mode -1");
  DDT(DDLayerConvSetPaddingMode(l, DD_PADDING_CIRCULAR));
  DDT(DDLayerDestroy(&l));
}

TEST(ConvBadInput, BackwardBeforeForwardAndWrongTensors)
{
  DDTensor x = MakeInput({{1, 2, 6, 4 * Size()}, {1, 1, 1, Size()}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(ConvCfg())(l);
  DDT(DDLayerSetUp(l, x));
  DDTensor y, dx;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorDuplicate(x, &dx));
  DD_EXPECT_ERROR(DDLayerBackward(l, y, dx), PETSC_ERR_ARG_WRONGSTATE, "needs the state of a DDLayerForward()");
  /* an output tensor of the wrong shape */
  DD_EXPECT_ERROR(DDLayerForward(l, x, x), PETSC_ERR_ARG_INCOMP, "not distributed as the layer's output");
  DDT(DDLayerForward(l, x, y));
  DDT(DDTensorScale(x, 2.0));
  DD_EXPECT_ERROR(DDLayerBackward(l, y, dx), PETSC_ERR_ARG_WRONGSTATE, "modified after DDLayerForward");
  DDT(DDLayerForward(l, x, y));
  /* no output gradient: only a loss takes NULL (it had crashed here) */
  DD_EXPECT_ERROR(DDLayerBackward(l, NULL, dx), PETSC_ERR_ARG_NULL, "the output gradient dy is NULL, and the conv layer is not a loss");
  DDT(DDLayerBackward(l, y, dx));
  DDT(DDTensorDestroy(&dx));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* Pieces thinner than the kernel's reach: the halo comes from beyond the adjacent workers */
TEST(Conv, PartitionFinerThanTheKernel)
{
  int W = Size();
  for (PetscInt k : {5, 7}) {
    ConvCfg   c;
    InputSpec in;
    c.k       = {k};
    c.p       = {k / 2};
    in.shape  = {1, 2, 2 * W};
    in.pshape = {1, 1, W};
    CheckAgainstSerial(c, in, "1-D pieces of 2");
    c.mode    = DD_PADDING_CIRCULAR;
    in.shape  = {2, 1, 5, 3 * W - 1};
    in.pshape = {1, 1, 1, W};
    in.lx     = {{}, {}, {}, {}};
    for (int p = 0; p < W; p++) in.lx[3].push_back(W == 1 ? k + 1 : (p == 0 ? 2 : (p % 2 ? 4 : 1))); /* unbalanced */
    PetscInt n = 0;
    for (auto v : in.lx[3]) n += v;
    in.shape[3] = n;
    c.k         = {3, k};
    c.p         = {1, k / 2};
    CheckAgainstSerial(c, in, "2-D unbalanced pieces, circular padding");
  }
}

TEST(ConvBadInput, MoreWorkRanksThanExist)
{
  int      W = Size();
  DDTensor x = MakeInput({{1, 1, 2 * W}, {1, 1, W}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  ConvCfg  c;
  /* more work ranks than exist */
  c   = ConvCfg();
  c.pco = W + 1;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "work partition needs");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* Paper 000's adjacent-workers assumption on request: a partition too fine for the kernel's halo
   is then an error naming the rank and dimension, on every rank (issue 4's bad input) */
TEST(ConvBadInput, PartitionTooFineForTheKernelWhenNeighborsOnly)
{
  int W = Size();
  if (W < 3) GTEST_SKIP() << "needs 3 ranks";
  DDTensor x = MakeInput({{1, 1, 2 * W}, {1, 1, W}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  ConvCfg  c;
  c.k = {7};
  c.p = {3};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "fine_"));
  DDT(PetscOptionsSetValue(NULL, "-fine_primitive_halo_neighbors_only", "true"));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "beyond its neighbors");
  DDT(PetscOptionsClearValue(NULL, "-fine_primitive_halo_neighbors_only"));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* Inputs, outputs and gradients whose halos differ from the set-up layouts (another consumer grew
   them) go through copies, one per role: the results must not change. */
TEST(Conv, TensorsWithOtherHalosThanAtSetUp)
{
  int W = Size();
  for (int variant = 0; variant < 2; variant++) {
    InputSpec in;
    ConvCfg   c;
    if (variant == 0) { /* spatial */
      in.shape  = {2, 3, 7, 4 * W};
      in.pshape = {1, 1, 1, W};
    } else { /* channel-in and channel-out: x broadcast over co, y sum-reduced over ci */
      in.shape  = {2, 4, 6, 5};
      in.pshape = {1, W > 1 ? 2 : 1, 1, 1};
      in.ranks  = W > 1 ? std::vector<PetscMPIInt>{0, 1} : std::vector<PetscMPIInt>{0};
      c.pco     = W >= 4 ? 2 : 1;
    }
    ExpectOtherHalosGiveSameResults(Configure(c), in, "variant " + std::to_string(variant));
  }
}

/* Overlapping the halo exchange with the interior convolution (paper 003 sec. IV-A) changes no number */
TEST(Conv, OverlapOfHaloAndInteriorComputeGivesTheSameResults)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  for (int D = 1; D <= 3; D++) {
    f.clear();
    Factorizations(W, D, f);
    auto      ps = f.back();
    InputSpec in;
    in.shape  = {2, 3};
    in.pshape = {1, 1};
    for (int j = 0; j < D; j++) {
      in.shape.push_back(6 * ps[j] + 2 + j);
      in.pshape.push_back(ps[j]);
    }
    for (PetscInt s : {1, 2}) {
      ConvCfg c;
      c.k       = {3};
      c.p       = {1};
      c.s       = {s};
      c.mode    = s == 1 ? DD_PADDING_REFLECT : DD_PADDING_ZEROS;
      c.overlap = PETSC_TRUE;
      CheckAgainstSerial(c, in, "overlap, float64 (reference loops)");
      RunResult on = RunLayer(Configure(c), {in}, DD_FLOAT32, 4);
      c.overlap    = PETSC_FALSE;
      RunResult off = RunLayer(Configure(c), {in}, DD_FLOAT32, 4);
      ExpectSameRun(on, off, 1e-6, "overlap, float32 (oneDNN regions)");
    }
  }
}

/*
  Against PyTorch 1.13 (float64; torch.nn.functional.conv1d/conv2d with groups, padding='same',
  F.pad then an unpadded conv for asymmetric padding): x_i = sin(0.71 i + 0.3),
  w_i = 0.3 cos(0.53 i), b_i = 0.1 i - 0.2, dy_i = sin(0.23 i + 0.1) in C order; the values are
  sum_i v_i cos(0.37 i) of y, dx, dw and db (see the report of the change for the script).
*/
static void TorchSums(const std::function<void(DDLayer)> &configure, const InputSpec &in, const std::vector<PetscInt> &yshape, const double want[4], const std::string &what)
{
  auto     fill = [](PetscInt n, double (*f)(PetscInt)) { std::vector<double> v((size_t)n); for (PetscInt i = 0; i < n; i++) v[(size_t)i] = f(i); return v; };
  auto     wsum = [](const std::vector<double> &v) { double s = 0; for (size_t i = 0; i < v.size(); i++) s += v[i] * std::cos(0.37 * (double)i); return s; };
  DDTensor x    = MakeInput(in, DD_FLOAT64, 1), y, dy, dx;
  DDLayer  l;
  PetscInt nx = 1, ny = 1, np;
  for (PetscInt e : in.shape) nx *= e;
  for (PetscInt e : yshape) ny *= e;
  DDT(DDTensorSetValuesGlobal(x, fill(nx, [](PetscInt i) { return std::sin(0.71 * (double)i + 0.3); }).data()));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetUp(l, x));
  DDTensor *ps, *gs;
  DDT(DDLayerGetParameters(l, &np, &ps));
  ASSERT_EQ(np, 2);
  PetscInt        nw;
  const PetscInt *bshape;
  DDT(DDTensorGetSize(ps[0], &nw));
  DDT(DDTensorGetShape(ps[1], &bshape));
  DDT(DDTensorSetValuesGlobal(ps[0], fill((PetscInt)nw, [](PetscInt i) { return 0.3 * std::cos(0.53 * (double)i); }).data()));
  DDT(DDTensorSetValuesGlobal(ps[1], fill(bshape[0], [](PetscInt i) { return 0.1 * (double)i - 0.2; }).data()));
  DDT(DDLayerGetOutput(l, &y));
  const PetscInt *shape;
  DDT(DDTensorGetShape(y, &shape));
  for (size_t j = 0; j < yshape.size(); j++) ASSERT_EQ(shape[j], yshape[j]) << what << ": output dimension " << j;
  DDT(DDLayerForward(l, x, y));
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetValuesGlobal(dy, fill(ny, [](PetscInt i) { return std::sin(0.23 * (double)i + 0.1); }).data()));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  DDT(DDLayerGetGradients(l, &np, &gs));
  const double got[4] = {wsum(GatherAll(y)), wsum(GatherAll(dx)), wsum(GatherAll(gs[0])), wsum(GatherAll(gs[1]))};
  const char  *names[4] = {"y", "dx", "dw", "db"};
  for (int q = 0; q < 4; q++) EXPECT_NEAR(got[q], want[q], 1e-12 * (1 + std::fabs(want[q]))) << what << ": " << names[q];
  DDT(DDTensorDestroy(&dy));
  DDT(DDTensorDestroy(&dx));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Conv, GroupsDepthwiseSameAndAsymmetricPaddingMatchPyTorch)
{
  struct Case {
    std::vector<PetscInt> xshape, yshape;
    ConvCfg               c;
    double                want[4];
    const char           *what;
  };
  std::vector<Case> cases(6);
  cases[0] = {{2, 4, 7, 6}, {2, 6, 7, 6}, ConvCfg(), {-5.996563114947273, -1.480023942012997, -6.866282280140416, 3.717058838737467}, "groups 2"};
  cases[0].c.co = 6, cases[0].c.groups = 2;
  cases[1] = {{2, 4, 7, 6}, {2, 4, 4, 3}, ConvCfg(), {-2.8022756315001414, -1.8582831991046223, -0.7820252584843712, 5.856555273864052}, "depthwise stride 2"};
  cases[1].c.co = 4, cases[1].c.groups = 4, cases[1].c.s = {2};
  cases[2] = {{2, 4, 9, 8}, {2, 8, 9, 8}, ConvCfg(), {-1.681637550677876, -0.24849294150605972, -5.9708428556955955, 14.111675490497433}, "depthwise multiplier 2, dilation 2"};
  cases[2].c.co = 8, cases[2].c.groups = 4, cases[2].c.p = {2}, cases[2].c.d = {2};
  cases[3] = {{2, 3, 7, 6}, {2, 2, 7, 6}, ConvCfg(), {-0.07569477414137404, 0.2808332529460879, -4.783453435276254, 2.694711844955176}, "'same', kernel 4x2, dilation 1x2"};
  cases[3].c.co = 2, cases[3].c.k = {4, 2}, cases[3].c.d = {1, 2}, cases[3].c.ptype = DD_CONV_PADDING_SAME;
  cases[4] = {{2, 3, 7, 6}, {2, 2, 8, 5}, ConvCfg(), {-6.3394082790023, -0.022972487117145057, -2.5581409712468597, 2.654391629498841}, "asymmetric padding (1, 0) before, (2, 1) after"};
  cases[4].c.co = 2, cases[4].c.p = {1, 0}, cases[4].c.pafter = {2, 1};
  cases[5] = {{2, 6, 9}, {2, 3, 9}, ConvCfg(), {1.5210707687172553, -6.48535434876543, -16.537162187787686, 3.5576140275107466}, "1-D 'same', kernel 2, groups 3"};
  cases[5].c.co = 3, cases[5].c.k = {2}, cases[5].c.groups = 3, cases[5].c.ptype = DD_CONV_PADDING_SAME;
  const int W = Size();
  for (const Case &cs : cases) {
    const size_t order = cs.xshape.size();
    InputSpec    sp, ba, se;
    sp.shape = ba.shape = se.shape = cs.xshape;
    sp.pshape = ba.pshape = std::vector<PetscInt>(order, 1);
    sp.pshape[order - 1] = W; /* spatial: pieces of 1-3 entries, halos from past the neighbours */
    ba.pshape[0]         = std::min(W, 2);
    if (W > 2 && order == 4) ba.pshape[2] = W / 2 * 2 == W ? W / 2 : 1; /* batch x spatial */
    TorchSums(Configure(cs.c), se, cs.yshape, cs.want, std::string(cs.what) + " (1 rank)");
    TorchSums(Configure(cs.c), sp, cs.yshape, cs.want, std::string(cs.what) + " (spatial)");
    TorchSums(Configure(cs.c), ba, cs.yshape, cs.want, std::string(cs.what) + " (batch)");
    CheckAgainstSerial(cs.c, sp, cs.what);
    CheckAgainstSerial(cs.c, ba, cs.what);
    ConvCfg c32 = cs.c;
    RunResult f32 = RunLayer(Configure(c32), {sp}, DD_FLOAT32, 5), f64 = RunLayer(Configure(c32), {Serial(sp)}, DD_FLOAT64, 5);
    ExpectSameRun(f32, f64, 2e-5, std::string(cs.what) + ": float32 on P ranks vs float64 on 1");
  }
}

TEST(Conv, AdjointTestsGroupsAndAsymmetricPadding)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &ps : f)
    for (int q = 0; q < 3; q++) {
      DDTensor x = MakeInput({{2, 6, 8 * ps[0] + 1, 8 * ps[1] + 2}, {1, 1, ps[0], ps[1]}, {}, {}}, DD_FLOAT64, 3);
      DDLayer  l;
      ConvCfg  c;
      c.co     = q == 1 ? 6 : 9;
      c.groups = q == 1 ? 6 : 3;
      c.s      = {q == 2 ? 1 : 2};
      if (q == 0) c.p = {2, 0}, c.pafter = {0, 1};
      if (q == 1) c.mode = DD_PADDING_REFLECT, c.pafter = {2};
      if (q == 2) c.k = {4}, c.ptype = DD_CONV_PADDING_SAME, c.mode = DD_PADDING_CIRCULAR;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      PetscReal err;
      DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
      EXPECT_LT(err, 1e-13) << "wrt input, case " << q;
      DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
      EXPECT_LT(err, 1e-13) << "wrt weights and bias, case " << q;
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
  /* finite differences through a depthwise, asymmetric-padded convolution */
  InputSpec in;
  in.shape  = {2, 3, 5, 4};
  in.pshape = {1, 1, 1, Size() > 1 ? 2 : 1};
  ConvCfg c;
  c.co     = 3;
  c.groups = 3;
  c.p      = {0, 1};
  c.pafter = {1, 2};
  ExpectFiniteDifferences(Configure(c), {in}, 9, 1e-7);
}

TEST(ConvBadInput, GroupsAndPaddingRules)
{
  const int W = Size();
  DDTensor  x = MakeInput({{2, 4, 6, 4 * W}, {1, 1, 1, W}, {}, {}}, DD_FLOAT64, 1);
  DDLayer   l;
  ConvCfg   c;
  c.groups = 3;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  Configure(c)(l);
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "input channels 4 are not divisible by its groups 3 (-layer_conv_groups)");
  DDT(DDLayerConvSetGroups(l, 2));
  DDT(DDLayerConvSetOutputChannels(l, 5));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "output channels 5 are not divisible by its groups 2");
  DD_EXPECT_ERROR(DDLayerConvSetGroups(l, 0), PETSC_ERR_ARG_OUTOFRANGE, "-layer_conv_groups");
  DDT(DDLayerConvSetOutputChannels(l, 4));
  PetscInt s = 2;
  DDT(DDLayerConvSetStride(l, 1, &s));
  DDT(DDLayerConvSetPaddingType(l, DD_CONV_PADDING_SAME));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "Padding 'same' (-layer_conv_padding) needs stride 1");
  DDT(DDLayerDestroy(&l));
  /* reflect padding as large as the input on one side */
  {
    ConvCfg  r;
    r.mode   = DD_PADDING_REFLECT;
    r.p      = {0, 1};
    r.pafter = {6, 1};
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(r)(l);
    DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "Reflect padding (0 before, 6 after) must be smaller than the input (6) along spatial dimension 0 (-layer_conv_padding, -layer_conv_padding_after)");
    DDT(DDLayerDestroy(&l));
  }
  /* circular padding wrapping around more than once (PyTorch: "Padding value causes wrapping around more than once"); as large as the input is fine */
  for (PetscInt after : {7, 6}) {
    ConvCfg r;
    r.mode   = DD_PADDING_CIRCULAR;
    r.p      = {0, 1};
    r.pafter = {after, 1};
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(r)(l);
    if (after == 7) DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "Circular padding (0 before, 7 after) must be at most the input (6) along spatial dimension 0: it would wrap around more than once");
    else DDT(DDLayerSetUp(l, x));
    DDT(DDLayerDestroy(&l));
  }
  /* the setters of the padding rules are conv's only */
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
  DD_EXPECT_ERROR(DDLayerConvSetPaddingType(l, DD_CONV_PADDING_SAME), PETSC_ERR_ARG_WRONG, "DDLayerConvSetPaddingType");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Conv, OptionsDatabaseGroupsAndPaddingRules)
{
  const int W = Size();
  DDTensor  x = MakeInput({{1, 4, 9, 8 * W + 2}, {1, 1, 1, W}, {}, {}}, DD_FLOAT64, 1);
  struct Opt {
    const char *padding, *after;
    PetscInt    H, Wd;
  };
  for (const Opt &o : std::vector<Opt>{{"same", nullptr, 9, 8 * W + 2}, {"valid", nullptr, 7, 8 * W}, {"1,0", "2,3", 10, 8 * W + 3}, {"1", nullptr, 9, 8 * W + 2}}) {
    DDT(PetscOptionsSetValue(NULL, "-c2_layer_type", "conv"));
    DDT(PetscOptionsSetValue(NULL, "-c2_layer_conv_out_channels", "8"));
    DDT(PetscOptionsSetValue(NULL, "-c2_layer_conv_kernel", "3"));
    DDT(PetscOptionsSetValue(NULL, "-c2_layer_conv_groups", "4"));
    DDT(PetscOptionsSetValue(NULL, "-c2_layer_conv_padding", o.padding));
    if (o.after) DDT(PetscOptionsSetValue(NULL, "-c2_layer_conv_padding_after", o.after));
    DDLayer l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    DDT(DDLayerSetOptionsPrefix(l, "c2_"));
    DDT(DDLayerSetFromOptions(l));
    DDT(DDLayerSetUp(l, x));
    DDTensor        y;
    const PetscInt *shape;
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDTensorGetShape(y, &shape));
    EXPECT_EQ(shape[1], 8);
    EXPECT_EQ(shape[2], o.H) << "padding " << o.padding;
    EXPECT_EQ(shape[3], o.Wd) << "padding " << o.padding;
    PetscInt64 np;
    DDT(DDLayerGetNumParameters(l, &np));
    EXPECT_EQ(np, 8 * 1 * 3 * 3 + 8); /* weights (8, 4/4, 3, 3) */
    DDT(DDLayerDestroy(&l));
    for (auto k : {"-c2_layer_type", "-c2_layer_conv_out_channels", "-c2_layer_conv_kernel", "-c2_layer_conv_groups", "-c2_layer_conv_padding", "-c2_layer_conv_padding_after"}) DDT(PetscOptionsClearValue(NULL, k));
  }
  DDT(DDTensorDestroy(&x));
}

/*
  Unbalanced channel pieces of C channels over P workers, from the weights 1, 3, 0, 2 (an empty
  piece from P = 3 on): pieces that cut groups, lie inside one or hold several.
*/
static std::vector<PetscInt> UnevenPieces(PetscInt C, PetscInt P)
{
  const PetscInt        wt[4] = {1, 3, 0, 2};
  PetscInt              sum = 0, got = 0;
  std::vector<PetscInt> r((size_t)P);
  for (PetscInt i = 0; i < P; i++) sum += wt[i % 4];
  for (PetscInt i = 0; i < P; i++) got += (r[i] = C * wt[i % 4] / sum);
  r[P - 1] += C - got;
  return r;
}

/*
  Grouped and depthwise convolutions over channel partitions (Pci input pieces, Pco output workers,
  the rest spatial): P ranks equal 1 rank (output, input and parameter gradients) in float64 and
  float32, balanced (plain) and unbalanced (with empty; channels-last) input pieces, with and without
  overlap; output pieces of 9 or 10 channels over Pco cut groups of 3 or 2.
*/
TEST(Conv, GroupsOverChannelPartitions)
{
  const int W = Size();
  struct G {
    PetscInt ci, co, groups, s, p, d;
    PetscBool bias;
    const char *what;
  };
  const std::vector<G> cases = {{6, 9, 3, 1, 1, 1, PETSC_TRUE, "groups 3"}, {6, 6, 6, 2, 1, 1, PETSC_TRUE, "depthwise, stride 2"}, {5, 10, 5, 1, 2, 2, PETSC_TRUE, "depthwise x2, dilation 2"}, {4, 6, 2, 1, 1, 1, PETSC_FALSE, "groups 2, no bias"}};
  int cnt = 0;
  for (PetscInt pci = 1; pci <= W; pci++)
    for (PetscInt pco = 1; pci * pco <= W; pco++) {
      if (W % (pci * pco)) continue;
      const PetscInt ps = W / (pci * pco);
      for (const G &g : cases)
        for (int uneven = 0; uneven < 2; uneven++) {
          if (uneven && pci == 1) continue;
          if (W > 4 && &g - cases.data() >= 2) continue; /* above 4 ranks (oversubscribed in the suite): the first two cases */
          InputSpec in;
          in.shape  = {2, g.ci, 7, 3 * ps + 2};
          in.pshape = {1, pci, 1, ps};
          if (uneven) in.lx = {{}, UnevenPieces(g.ci, pci)};
          if (uneven) in.fmt = DD_FORMAT_CHANNELS_LAST;
          ConvCfg c;
          c.overlap = cnt % 2 ? PETSC_TRUE : PETSC_FALSE; /* the interior while the halo is in flight */
          c.co     = g.co;
          c.groups = g.groups;
          c.s      = {g.s};
          c.p      = {g.p};
          c.d      = {g.d};
          c.bias   = g.bias;
          c.pco    = pco;
          char what[160];
          snprintf(what, sizeof(what), "%s, Pci %d (%s) x Pco %d x spatial %d", g.what, (int)pci, uneven ? "uneven" : "balanced", (int)pco, (int)ps);
          CheckAgainstSerial(c, in, what);
          CheckAgainstSerial(c, in, (std::string(what) + " float32").c_str(), DD_FLOAT32, 2e-5);
          if (ps % 2 == 0) { /* half the spatial workers on the batch instead: the weights are shared by n, s and ci */
            in.pshape = {2, pci, 1, ps / 2};
            in.shape[3] = 3 * (ps / 2) + 2;
            CheckAgainstSerial(c, in, (std::string(what) + " with a batch split").c_str());
          }
          cnt++;
        }
    }
  EXPECT_GT(cnt, 0);
}

/* the linear part of grouped convolutions over channel partitions is the adjoint of its backward pass (float64) */
TEST(Conv, AdjointTestsGroupsOverChannelPartitions)
{
  const int W = Size();
  for (PetscInt pci = 1; pci <= W; pci++) {
    if (W % pci) continue;
    const PetscInt pco = W / pci;
    for (PetscInt G : {3, 6}) {
      InputSpec in;
      in.shape  = {2, 6, 6, 5};
      in.pshape = {1, pci, 1, 1};
      in.lx     = {{}, UnevenPieces(6, pci)};
      DDTensor x = MakeInput(in, DD_FLOAT64, 3);
      DDLayer  l;
      ConvCfg  c;
      c.co     = G == 3 ? 9 : 6;
      c.groups = G;
      c.pco    = pco;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      Configure(c)(l);
      DDT(DDLayerSetUp(l, x));
      PetscReal err;
      DDT(DDLayerAdjointTest(l, PETSC_FALSE, 1, &err));
      EXPECT_LT(err, 1e-13) << "wrt input, groups " << G << " Pci " << pci << " Pco " << pco;
      DDT(DDLayerAdjointTest(l, PETSC_TRUE, 2, &err));
      EXPECT_LT(err, 1e-13) << "wrt weights and bias, groups " << G << " Pci " << pci << " Pco " << pco;
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
  }
}
