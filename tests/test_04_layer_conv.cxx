/*
  DDLAYERCONV: P ranks equal 1 rank (outputs, input and parameter gradients) for spatial, batch,
  channel-in, channel-out and general distributions, unbalanced and subset partitions, 1-3-D;
  adjoint tests wrt input and weights; oneDNN against the reference loops; finite differences;
  bad input.
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
};

static std::function<void(DDLayer)> Configure(const ConvCfg &c)
{
  return [c](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERCONV));
    DDT(DDLayerConvSetOutputChannels(l, c.co));
    DDT(DDLayerConvSetKernel(l, (PetscInt)c.k.size(), c.k.data()));
    DDT(DDLayerConvSetStride(l, (PetscInt)c.s.size(), c.s.data()));
    DDT(DDLayerConvSetPadding(l, (PetscInt)c.p.size(), c.p.data()));
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
