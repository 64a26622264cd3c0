/*
  DDLAYERRESHAPE: torch's view semantics (the same global C order, one -1 inferred) on every input
  partition and on given output partitions (unbalanced, subsets); Backward is the adjoint of
  Forward (float64 adjoint test) and the exact inverse data movement; options; bad settings.
*/
#include "layertest.hpp"

using namespace ddtest;

static std::function<void(DDLayer)> Configure(std::vector<PetscInt> shape, DDPartition part = NULL)
{
  return [shape, part](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERRESHAPE));
    DDT(DDLayerReshapeSetShape(l, (PetscInt)shape.size(), shape.data()));
    if (part) DDT(DDLayerReshapeSetPartition(l, part));
  };
}

/* y = view(x): gathered in C order, y's values are x's; dx = dy gathered; y's shape as torch gives it */
static void CheckView(const InputSpec &in, const std::vector<PetscInt> &shape, const std::vector<PetscInt> &expect, DDPartition part, const std::string &what)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    DDTensor x = MakeInput(in, dt, 5), y, dy, dx;
    DDLayer  l;
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    Configure(shape, part)(l);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerGetOutput(l, &y));
    PetscInt        o;
    const PetscInt *ys;
    DDT(DDTensorGetOrder(y, &o));
    DDT(DDTensorGetShape(y, &ys));
    EXPECT_EQ(std::vector<PetscInt>(ys, ys + o), expect) << what;
    DDT(DDLayerForward(l, x, y));
    EXPECT_EQ(GatherAll(y), GatherAll(x)) << what;
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 17, -1, 1));
    DDT(DDTensorDuplicate(x, &dx));
    DDT(DDTensorSet(dx, 12345.0));
    DDT(DDLayerBackward(l, dy, dx));
    EXPECT_EQ(GatherAll(dx), GatherAll(dy)) << what;
    if (dt == DD_FLOAT64) {
      PetscReal err;
      DDT(DDLayerAdjointTest(l, PETSC_FALSE, 3, &err));
      EXPECT_LT(err, 1e-14) << what;
    }
    for (DDTensor *t : {&dx, &dy, &x}) DDT(DDTensorDestroy(t));
    DDT(DDLayerDestroy(&l));
  }
}

TEST(Reshape, TorchViewShapesOnEveryInputPartition)
{
  /* torch.arange(24.).reshape(2, 3, 4).view(4, -1, 2).shape == (4, 3, 2); view(2, 12), view(-1) */
  std::vector<std::vector<PetscInt>> f;
  Factorizations(Size(), 3, f);
  for (auto &ps : f) {
    if (ps[0] > 2 || ps[1] > 3 || ps[2] > 4) continue;
    InputSpec   in = {{2, 3, 4}, ps, {}, {}};
    std::string p  = " on " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]);
    CheckView(in, {4, -1, 2}, {4, 3, 2}, NULL, "view(4, -1, 2)" + p);
    CheckView(in, {2, 12}, {2, 12}, NULL, "view(2, 12)" + p);
    CheckView(in, {-1}, {24}, NULL, "view(-1)" + p);
    CheckView(in, {2, 3, 2, 1, 2}, {2, 3, 2, 1, 2}, NULL, "view(2, 3, 2, 1, 2)" + p);
  }
}

TEST(Reshape, GivenOutputPartitions)
{
  int       W = Size();
  InputSpec in;
  in.shape  = {3, 5, 2 * W + 1};
  in.pshape = {1, 1, W};
  in.lx     = {{}, {}, std::vector<PetscInt>(W, 2)};
  in.lx[2][0] += 1;
  /* (15, 2W + 1) over (W, 1) balanced, and over (1, W) on the ranks in reverse order */
  DDPartition p1, p2;
  PetscInt    s1[2] = {W, 1}, s2[2] = {1, W};
  std::vector<PetscMPIInt> rev;
  for (int r = W - 1; r >= 0; r--) rev.push_back(r);
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, s1, PETSC_DECIDE, NULL, &p1));
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, s2, W, rev.data(), &p2));
  CheckView(in, {15, -1}, {15, 2 * W + 1}, p1, "onto (W, 1)");
  CheckView(in, {-1, 2 * W + 1}, {15, 2 * W + 1}, p2, "onto (1, W) reversed");
  DDT(DDPartitionDestroy(&p1));
  DDT(DDPartitionDestroy(&p2));
  /* an input on a subset of the ranks */
  if (W > 1) {
    InputSpec sub;
    sub.shape  = {2, 3, 2 * W};
    sub.pshape = {1, 1, W - 1};
    for (int r = 1; r < W; r++) sub.ranks.push_back(r);
    CheckView(sub, {2, 3, W, 2}, {2, 3, W, 2}, NULL, "subset input");
  }
}

TEST(Reshape, FiniteDifferences)
{
  InputSpec in;
  in.shape  = {2, 3, 4};
  in.pshape = {1, 1, Size() > 1 ? 2 : 1};
  ExpectFiniteDifferences(Configure({6, -1}), {in}, 4, 1e-8);
}

TEST(Reshape, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-rs_layer_type", "reshape"));
  DDT(PetscOptionsSetValue(NULL, "-rs_layer_reshape_shape", "3,-1,2"));
  DDTensor x = MakeInput({{2, 3, 4}, {}, {}, {}}, DD_FLOAT64, 1), y;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "rs_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  PetscInt        o;
  const PetscInt *ys;
  DDT(DDTensorGetOrder(y, &o));
    DDT(DDTensorGetShape(y, &ys));
  EXPECT_EQ(std::vector<PetscInt>(ys, ys + o), std::vector<PetscInt>({3, 4, 2}));
  DDT(DDLayerView(l, PETSC_VIEWER_STDOUT_WORLD));
  DDT(DDLayerDestroy(&l));
  for (auto o : {"-rs_layer_type", "-rs_layer_reshape_shape"}) DDT(PetscOptionsClearValue(NULL, o));
  DDT(DDTensorDestroy(&x));
}

TEST(ReshapeBadInput, Settings)
{
  DDTensor x = MakeInput({{2, 3, 4}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERRESHAPE));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs its output shape");
  const PetscInt two[2] = {-1, -1}, zero[2] = {0, 24}, five[2] = {5, -1}, big[2] = {5, 5};
  DD_EXPECT_ERROR(DDLayerReshapeSetShape(l, 2, two), PETSC_ERR_ARG_OUTOFRANGE, "one -1 (inferred extent), it has 2 (-layer_reshape_shape)");
  DD_EXPECT_ERROR(DDLayerReshapeSetShape(l, 2, zero), PETSC_ERR_ARG_OUTOFRANGE, "must be positive or -1 (-layer_reshape_shape)");
  DDT(DDLayerReshapeSetShape(l, 2, five));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "cannot be viewed with the known extents (product 5) of -layer_reshape_shape");
  DDT(DDLayerReshapeSetShape(l, 2, big));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "-layer_reshape_shape has 25 entries but the input (shape");
  DDPartition p;
  PetscInt    ps[3] = {1, 1, 1};
  PetscMPIInt r0    = 0;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 3, ps, 1, &r0, &p));
  const PetscInt ok[2] = {4, 6};
  DDT(DDLayerReshapeSetShape(l, 2, ok));
  DDT(DDLayerReshapeSetPartition(l, p));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "has order 3 but the output shape (-layer_reshape_shape) has order 2");
  DDT(DDPartitionDestroy(&p));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}
