/*
  The structural layers: DDLAYERREPARTITION (P -> Q round trip, formats, adjoint), DDLAYERADD
  (2 and 3 inputs with different halos and formats, adjoint), DDLAYERCONCAT (channels and spatial
  dimensions, split and unsplit, P = 1, adjoint), DDLAYERFLATTEN (P = 1, spatial input split with
  the output features split, adjoint, flatten then affine equals serial); bad input.

  Results are checked against values computed here from the gathered global inputs (and against
  1-rank runs), so a bug shared by the parallel and serial paths would still show.
*/
#include "layertest.hpp"

using namespace ddtest;

static DDPartition MakePartition(const std::vector<PetscInt> &shape, std::vector<PetscMPIInt> ranks = {})
{
  PetscInt P = 1;
  for (auto s : shape) P *= s;
  if (ranks.empty())
    for (PetscInt i = 0; i < P; i++) ranks.push_back((PetscMPIInt)i);
  DDPartition p;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, (PetscInt)shape.size(), shape.data(), (PetscInt)ranks.size(), ranks.data(), &p));
  return p;
}

static std::vector<PetscMPIInt> Reversed(int n)
{
  std::vector<PetscMPIInt> r;
  for (int i = n - 1; i >= 0; i--) r.push_back(i);
  return r;
}

static void ExpectEqualVectors(const std::vector<double> &a, const std::vector<double> &b, double tol, const std::string &what)
{
  ASSERT_EQ(a.size(), b.size()) << what;
  double m = 0;
  for (size_t i = 0; i < a.size(); i++) m = std::max(m, std::fabs(a[i] - b[i]));
  EXPECT_LE(m, tol) << what;
}

static void ExpectAdjoint(DDLayer l, const char *what)
{
  PetscReal err;
  DDT(DDLayerAdjointTest(l, PETSC_FALSE, 5, &err));
  EXPECT_LT(err, 1e-14) << what;
}

/* ---------------------------------------------------------------------- */
/* repartition */

static DDLayer RepartitionLayer(DDPartition p)
{
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERREPARTITION));
  DDT(DDLayerRepartitionSetPartition(l, p));
  return l;
}

TEST(Repartition, RoundTripKeepsValuesAndFormat)
{
  int      W  = Size();
  DDTensor x  = MakeInput({{2, 3, 5 * W + 1, 4}, {1, 1, W, 1}, {}, {}, DD_FORMAT_CHANNELS_LAST}, DD_FLOAT64, 3);
  DDPartition Px, Q = MakePartition({1, 1, 1, W}, Reversed(W)); /* another split, ranks reversed */
  DDT(DDTensorGetPartition(x, &Px));
  DDLayer  fwd = RepartitionLayer(Q), back = RepartitionLayer(Px);
  DDTensor y1, y2, dy, d1, dx;
  DDT(DDLayerSetUp(fwd, x));
  DDT(DDLayerGetOutput(fwd, &y1));
  DDT(DDLayerSetUp(back, y1));
  DDT(DDLayerGetOutput(back, &y2));
  DDTensorFormat fmt;
  DDT(DDTensorGetFormat(y1, &fmt));
  EXPECT_EQ(fmt, DD_FORMAT_CHANNELS_LAST) << "the output keeps the input's format";
  PetscBool ok;
  DDT(DDTensorCompatible(y2, x, &ok));
  EXPECT_TRUE(ok) << "P -> Q -> P gives the input's distribution back";
  DDT(DDLayerForward(fwd, x, y1));
  DDT(DDLayerForward(back, y1, y2));
  std::vector<double> gx = GatherAll(x);
  ExpectEqualVectors(GatherAll(y1), gx, 0, "P -> Q");
  ExpectEqualVectors(GatherAll(y2), gx, 0, "P -> Q -> P");
  /* backward: the gradient moves back */
  DDT(DDLayerCreateOutput(back, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 9, -1, 1));
  DDT(DDLayerCreateOutput(fwd, &d1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(back, dy, d1));
  DDT(DDLayerBackward(fwd, d1, dx));
  ExpectEqualVectors(GatherAll(dx), GatherAll(dy), 0, "backward P <- Q <- P");
  ExpectAdjoint(fwd, "adjoint P -> Q");
  ExpectAdjoint(back, "adjoint Q -> P");
  for (DDTensor *t : {&dy, &d1, &dx, &x}) DDT(DDTensorDestroy(t));
  DDT(DDPartitionDestroy(&Q));
  DDT(DDLayerDestroy(&fwd));
  DDT(DDLayerDestroy(&back));
}

TEST(Repartition, ScatterGatherAndShapeOption)
{
  int W = Size();
  /* scatter: from rank 0 onto a shape on the first ranks, given by the options database */
  InputSpec in = {{3, 2 * W + 1, 5}, {}, {}, {}};
  in.ranks     = {0};
  std::string shape = "1," + std::to_string(W) + ",1";
  DDT(PetscOptionsSetValue(NULL, "-rp_layer_type", "repartition"));
  DDT(PetscOptionsSetValue(NULL, "-rp_layer_repartition_shape", shape.c_str()));
  auto cfg = [](DDLayer l) {
    DDT(DDLayerSetOptionsPrefix(l, "rp_"));
    DDT(DDLayerSetFromOptions(l));
  };
  RunResult r = RunLayer(cfg, {in}, DD_FLOAT64, 4);
  DDTensor  x = MakeInput(in, DD_FLOAT64, 4 + 1);
  ExpectEqualVectors(r.y, GatherAll(x), 0, "scatter");
  /* the gradient: dy (seed + 7) gathered back */
  DDLayer  l;
  DDTensor y;
  DDPartition py;
  const PetscInt *ps;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  cfg(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDTensorGetPartition(y, &py));
  DDT(DDPartitionGetShape(py, &ps));
  EXPECT_EQ(ps[1], W);
  ExpectAdjoint(l, "scatter adjoint");
  DDT(DDLayerDestroy(&l));
  DDT(PetscOptionsClearValue(NULL, "-rp_layer_type"));
  DDT(PetscOptionsClearValue(NULL, "-rp_layer_repartition_shape"));
  /* gather with DDLayerRepartitionSetShape: everything onto rank 0 */
  DDTensor    xs   = MakeInput({{3, 2 * W + 1, 5}, {1, W, 1}, {}, {}}, DD_FLOAT64, 6);
  PetscInt    ones[3] = {1, 1, 1};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERREPARTITION));
  DDT(DDLayerRepartitionSetShape(l, 3, ones));
  DDT(DDLayerSetUp(l, xs));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, xs, y));
  ExpectEqualVectors(GatherAll(y), GatherAll(xs), 0, "gather");
  ExpectAdjoint(l, "gather adjoint");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&xs));
  DDT(DDTensorDestroy(&x));
}

TEST(RepartitionBadInput, NoPartition)
{
  DDTensor x = MakeInput({{2, 3}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERREPARTITION));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs its output partition");
  /* a shape of the wrong order, and one needing more ranks than exist */
  PetscInt s3[3] = {1, 1, 1}, big[2] = {1, Size() + 1};
  DDT(DDLayerRepartitionSetShape(l, 3, s3));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "onto a partition 1x1x1 of order 3");
  DDT(DDLayerRepartitionSetShape(l, 2, big));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "but the communicator has");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* ---------------------------------------------------------------------- */
/* add */

static void ConfigureAdd(DDLayer l) { DDT(DDLayerSetType(l, DDLAYERADD)); }

TEST(Add, TwoAndThreeInputsWithDifferentFormats)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &p : f) {
    std::vector<InputSpec> specs;
    for (int i = 0; i < 3; i++) {
      InputSpec s = {{2, 9, 3 * p[0] + 1, 2 * p[1] + 3}, {1, 1, p[0], p[1]}, {}, {}};
      s.fmt       = i == 0 ? DD_FORMAT_PLAIN : (i == 1 ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_BLOCKED);
      specs.push_back(s);
    }
    for (size_t n : {2, 3}) {
      std::vector<InputSpec> sp(specs.begin(), specs.begin() + n), ss;
      for (auto &s : sp) ss.push_back(Serial(s));
      RunResult par = RunLayer(ConfigureAdd, sp, DD_FLOAT64, 7), ser = RunLayer(ConfigureAdd, ss, DD_FLOAT64, 7);
      ExpectSameRun(par, ser, 1e-15, "add of " + std::to_string(n) + " inputs");
      /* against the sum computed here, and dx_i = dy */
      std::vector<double> sum(par.y.size(), 0.0);
      for (size_t i = 0; i < n; i++) {
        DDTensor            x = MakeInput(sp[i], DD_FLOAT64, 7 + 100 * i + 1);
        std::vector<double> g = GatherAll(x);
        for (size_t k = 0; k < sum.size(); k++) sum[k] += g[k];
        DDT(DDTensorDestroy(&x));
      }
      ExpectEqualVectors(par.y, sum, 1e-15, "add: the sum");
      for (size_t i = 1; i < n; i++) ExpectEqualVectors(par.dx[i], par.dx[0], 0, "add: every input gets dy");
    }
  }
}

TEST(Add, InputsWithDifferentHalos)
{
  int      W  = Size();
  InputSpec s = {{1, 3, 4 * W, 5}, {1, 1, W, 1}, {}, {}};
  DDTensor x0 = MakeInput(s, DD_FLOAT64, 1), x1 = MakeInput(s, DD_FLOAT64, 2), x2 = MakeInput(s, DD_FLOAT64, 3);
  PetscInt lo[4] = {0, 0, 1, 2}, hi[4] = {0, 1, 2, 0};
  DDT(DDTensorSetHalo(x1, lo, hi)); /* bulk values kept */
  DDT(DDTensorSetFormat(x2, DD_FORMAT_CHANNELS_LAST));
  DDT(DDTensorSetHalo(x2, hi, lo));
  DDTensor xs[3] = {x0, x1, x2}, y, dy, dxs[3];
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureAdd(l);
  DDT(DDLayerSetUpMulti(l, 3, xs));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForwardMulti(l, 3, xs, y));
  std::vector<double> g0 = GatherAll(x0), g1 = GatherAll(x1), g2 = GatherAll(x2), e(g0.size());
  for (size_t k = 0; k < e.size(); k++) e[k] = g0[k] + g1[k] + g2[k];
  ExpectEqualVectors(GatherAll(y), e, 1e-15, "sum of inputs with halos");
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 4, -1, 1));
  for (int i = 0; i < 3; i++) {
    DDT(DDTensorDuplicate(xs[i], &dxs[i]));
    DDT(DDTensorSet(dxs[i], 99));
  }
  DDT(DDLayerBackwardMulti(l, dy, 3, dxs));
  std::vector<double> gdy = GatherAll(dy);
  for (int i = 0; i < 3; i++) ExpectEqualVectors(GatherAll(dxs[i]), gdy, 0, "dx_i = dy");
  ExpectAdjoint(l, "add adjoint");
  for (int i = 0; i < 3; i++) {
    DDT(DDTensorDestroy(&dxs[i]));
    DDT(DDTensorDestroy(&xs[i]));
  }
  DDT(DDTensorDestroy(&dy));
  DDT(DDLayerDestroy(&l));
}

TEST(AddBadInput, MismatchedShapesNameTheInput)
{
  DDTensor x0 = MakeInput({{2, 3, 4, 4}, {}, {}, {}}, DD_FLOAT64, 1), x1 = MakeInput({{2, 3, 4, 4}, {}, {}, {}}, DD_FLOAT64, 2), x2 = MakeInput({{2, 3, 4, 5}, {}, {}, {}}, DD_FLOAT64, 3);
  DDTensor xs[3] = {x0, x1, x2};
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureAdd(l);
  DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 3, xs), PETSC_ERR_ARG_SIZ, "input 2 has shape 2x3x4x5 but input 0 has shape 2x3x4x4");
  DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 1, xs), PETSC_ERR_ARG_SIZ, "takes 2 to");
  if (Size() > 1) { /* same shape, another distribution */
    DDTensor y = MakeInput({{2, 3, 4, 4}, {1, 1, 2, 1}, {}, {}}, DD_FLOAT64, 4), ys[2] = {x0, y};
    DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 2, ys), PETSC_ERR_ARG_INCOMP, "input 1 (shape 2x3x4x4) is not distributed as input 0");
    DDT(DDTensorDestroy(&y));
  }
  DDT(DDLayerDestroy(&l));
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
}

/* ---------------------------------------------------------------------- */
/* concat */

static std::function<void(DDLayer)> ConfigureConcat(PetscInt dim)
{
  return [dim](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERCONCAT));
    DDT(DDLayerConcatSetDimension(l, dim));
  };
}

/* torch.cat of gathered C-order arrays along dim */
static std::vector<double> CatGlobal(const std::vector<std::vector<double>> &g, const std::vector<std::vector<PetscInt>> &shapes, PetscInt dim)
{
  PetscInt outer = 1, inner = 1;
  for (PetscInt k = 0; k < dim; k++) outer *= shapes[0][k];
  for (size_t k = dim + 1; k < shapes[0].size(); k++) inner *= shapes[0][k];
  std::vector<double> y;
  for (PetscInt o = 0; o < outer; o++)
    for (size_t i = 0; i < g.size(); i++) {
      PetscInt len = shapes[i][dim] * inner;
      y.insert(y.end(), g[i].begin() + o * len, g[i].begin() + (o + 1) * len);
    }
  return y;
}

static void CheckConcat(const std::vector<InputSpec> &specs, PetscInt dim, const std::string &what)
{
  std::vector<InputSpec> ss;
  for (auto &s : specs) ss.push_back(Serial(s));
  RunResult par = RunLayer(ConfigureConcat(dim), specs, DD_FLOAT64, 13), ser = RunLayer(ConfigureConcat(dim), ss, DD_FLOAT64, 13);
  ExpectSameRun(par, ser, 1e-15, what + " (P ranks vs 1 rank)");
  PetscInt                           d = dim < 0 ? dim + (PetscInt)specs[0].shape.size() : dim;
  std::vector<std::vector<double>>   g;
  std::vector<std::vector<PetscInt>> shapes;
  for (size_t i = 0; i < specs.size(); i++) {
    DDTensor x = MakeInput(specs[i], DD_FLOAT64, 13 + 100 * i + 1);
    g.push_back(GatherAll(x));
    shapes.push_back(specs[i].shape);
    DDT(DDTensorDestroy(&x));
  }
  ExpectEqualVectors(par.y, CatGlobal(g, shapes, d), 0, what + ": torch.cat");
  /* the gradients are the pieces of dy: cat(dx_i) = dy */
  DDLayer  l;
  std::vector<DDTensor> xs;
  for (size_t i = 0; i < specs.size(); i++) xs.push_back(MakeInput(specs[i], DD_FLOAT64, 1));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureConcat(dim)(l);
  DDT(DDLayerSetUpMulti(l, (PetscInt)xs.size(), xs.data()));
  DDTensor dy;
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 13 + 7, -1, 1));
  ExpectEqualVectors(CatGlobal(par.dx, shapes, d), GatherAll(dy), 0, what + ": cat(dx_i) = dy");
  ExpectAdjoint(l, (what + ": adjoint").c_str());
  DDT(DDTensorDestroy(&dy));
  DDT(DDLayerDestroy(&l));
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
}

TEST(Concat, ChannelsUnsplitSpatialSplit)
{
  int W = Size();
  /* the U-Net case: channels on one worker, the data do not move */
  InputSpec a = {{2, 3, 3 * W + 1, 5}, {1, 1, W, 1}, {}, {}}, b = a;
  b.shape[1]  = 4;
  b.fmt       = DD_FORMAT_CHANNELS_LAST;
  CheckConcat({a, b}, 1, "channels, unsplit");
  InputSpec c = a;
  c.shape[1]  = 1;
  c.fmt       = DD_FORMAT_BLOCKED;
  CheckConcat({a, b, c}, 1, "channels, unsplit, 3 inputs, 3 formats");
  /* the main job's case: blocked inputs whose ranges start at whole blocks (the local copy's
     runs of whole blocks), then one of 7 channels and one after it at offset 31, not a block start (default blocks of 8) */
  InputSpec e = a, f = a, g = a, h = a;
  e.fmt = f.fmt = g.fmt = h.fmt = DD_FORMAT_BLOCKED;
  e.shape[1]                    = 8;
  f.shape[1]                    = 16;
  g.shape[1]                    = 7;
  h.shape[1]                    = 9;
  CheckConcat({e, f}, 1, "channels, unsplit, blocked, whole blocks");
  CheckConcat({e, f, g, h}, 1, "channels, unsplit, blocked, partial blocks");
}

TEST(Concat, ChannelsSplit)
{
  int W = Size();
  /* channel-split inputs, each with its own (balanced or unbalanced) ownership */
  InputSpec a = {{2, 2 * W + 1, 3, 2}, {1, W, 1, 1}, {}, {}}, b = a;
  b.shape[1]  = 3 * W;
  b.lx        = {{}, std::vector<PetscInt>(W, 3), {}, {}};
  b.lx[1][0] += 2; /* unbalanced, last piece smaller */
  b.lx[1][W - 1] -= 2;
  CheckConcat({a, b}, 1, "channels, split");
  /* and with a batch split too */
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  auto     &p = f[f.size() / 2];
  InputSpec c = {{2 * p[0], 3 * p[1] + 1, 3}, {p[0], p[1], 1}, {}, {}}, d = c;
  d.shape[1]  = p[1] + 2;
  CheckConcat({c, d}, 1, "batch x channels, split");
}

TEST(Concat, SpatialDimension)
{
  int       W = Size();
  InputSpec a = {{2, 3, 4, 2 * W + 1}, {1, 1, 1, W}, {}, {}}, b = a;
  b.shape[3]  = W + 3;
  CheckConcat({a, b}, 3, "last spatial dimension, split");
  CheckConcat({a, b}, -1, "dimension -1, split");
  InputSpec c = {{2, 3, 2, 3 * W}, {1, 1, 1, W}, {}, {}}, d = c;
  c.shape[2]  = 5;
  CheckConcat({c, d}, 2, "spatial dimension, unsplit");
}

TEST(Concat, OneWorker)
{
  InputSpec a = {{2, 3, 4}, {}, {}, {}}, b = a;
  b.shape[1]  = 2;
  b.fmt       = DD_FORMAT_CHANNELS_LAST;
  CheckConcat({a, b}, 1, "P = 1");
  a.ranks = b.ranks = {Size() - 1};
  b.shape           = {3, 3, 4};
  CheckConcat({a, b}, 0, "P = 1 on the last rank, batch dimension");
}

TEST(Concat, OptionsDatabase)
{
  DDT(PetscOptionsSetValue(NULL, "-cat_layer_type", "concat"));
  DDT(PetscOptionsSetValue(NULL, "-cat_layer_concat_dim", "-2"));
  DDTensor x0 = MakeInput({{2, 3, 4, 5}, {}, {}, {}}, DD_FLOAT64, 1), x1 = MakeInput({{2, 3, 6, 5}, {}, {}, {}}, DD_FLOAT64, 2), xs[2] = {x0, x1}, y;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "cat_"));
  DDT(DDLayerSetFromOptions(l));
  DDT(DDLayerSetUpMulti(l, 2, xs));
  DDT(DDLayerGetOutput(l, &y));
  const PetscInt *shape;
  DDT(DDTensorGetShape(y, &shape));
  EXPECT_EQ(shape[2], 10) << "-layer_concat_dim -2 is dimension 2";
  EXPECT_EQ(shape[3], 5);
  DDT(DDLayerDestroy(&l));
  DDT(PetscOptionsClearValue(NULL, "-cat_layer_type"));
  DDT(PetscOptionsClearValue(NULL, "-cat_layer_concat_dim"));
  DDT(DDTensorDestroy(&x0));
  DDT(DDTensorDestroy(&x1));
}

TEST(ConcatBadInput, MismatchInNonConcatDimension)
{
  DDTensor x0 = MakeInput({{2, 3, 4, 4}, {}, {}, {}}, DD_FLOAT64, 1), x1 = MakeInput({{2, 5, 4, 5}, {}, {}, {}}, DD_FLOAT64, 2);
  DDTensor xs[2] = {x0, x1};
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureConcat(1)(l);
  DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 2, xs), PETSC_ERR_ARG_SIZ, "input 1 has shape 2x5x4x5 but input 0 has shape 2x3x4x4; they must agree outside the concatenation dimension 1 (dimension 3 differs)");
  DDT(DDLayerConcatSetDimension(l, 4));
  DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 2, xs), PETSC_ERR_ARG_OUTOFRANGE, "Concat dimension 4 does not exist");
  DDT(DDLayerDestroy(&l));
  if (Size() > 1) { /* distributed differently outside the concat dimension */
    DDTensor y0 = MakeInput({{2, 3, 4 * Size()}, {1, 1, Size()}, {}, {}}, DD_FLOAT64, 1), y1;
    InputSpec s = {{2, 3, 4 * Size()}, {1, 1, Size()}, {}, {{}, {}, std::vector<PetscInt>(Size(), 4)}};
    s.lx[2][0] += 1;
    s.lx[2][1] -= 1;
    y1             = MakeInput(s, DD_FLOAT64, 2);
    DDTensor ys[2] = {y0, y1};
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    ConfigureConcat(1)(l);
    DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 2, ys), PETSC_ERR_ARG_INCOMP, "is not distributed as input 0 along dimension 2");
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&y0));
    DDT(DDTensorDestroy(&y1));
  }
  DDT(DDTensorDestroy(&x0));
  DDT(DDTensorDestroy(&x1));
}

/* ---------------------------------------------------------------------- */
/* flatten */

/* flatten onto partition q (NULL: the default); in C order the gathered arrays are the same */
static void CheckFlatten(const InputSpec &in, DDPartition q, const std::vector<PetscInt> &expectp, const std::string &what)
{
  DDTensor x = MakeInput(in, DD_FLOAT64, 3), y, dy, dx;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERFLATTEN));
  if (q) DDT(DDLayerFlattenSetPartition(l, q));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  const PetscInt *shape, *ps;
  DDPartition     py;
  DDT(DDTensorGetShape(y, &shape));
  PetscInt F = 1;
  for (size_t k = 1; k < in.shape.size(); k++) F *= in.shape[k];
  EXPECT_EQ(shape[0], in.shape[0]) << what;
  EXPECT_EQ(shape[1], F) << what;
  DDT(DDTensorGetPartition(y, &py));
  DDT(DDPartitionGetShape(py, &ps));
  EXPECT_EQ(ps[0], expectp[0]) << what;
  EXPECT_EQ(ps[1], expectp[1]) << what;
  DDT(DDLayerForward(l, x, y));
  ExpectEqualVectors(GatherAll(y), GatherAll(x), 0, what + ": torch.flatten(x, 1)");
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 5, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDTensorSet(dx, 99));
  DDT(DDLayerBackward(l, dy, dx));
  ExpectEqualVectors(GatherAll(dx), GatherAll(dy), 0, what + ": backward reshapes dy");
  ExpectAdjoint(l, (what + ": adjoint").c_str());
  DDT(DDTensorDestroy(&dx));
  DDT(DDTensorDestroy(&dy));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

TEST(Flatten, OneWorker)
{
  CheckFlatten({{2, 3, 4, 5}, {}, {}, {}}, NULL, {1, 1}, "P = 1, order 4");
  CheckFlatten({{3, 7}, {}, {}, {}}, NULL, {1, 1}, "P = 1, order 2 (no-op)");
  CheckFlatten({{2, 3, 2, 2, 3}, {}, {}, {}, DD_FORMAT_CHANNELS_LAST}, NULL, {1, 1}, "P = 1, order 5, channels-last");
}

TEST(Flatten, SpatialInputSplitFeatureOutputSplit)
{
  int         W = Size();
  DDPartition q = MakePartition({1, W}, Reversed(W));
  CheckFlatten({{2, 3, 3 * W + 1, 5}, {1, 1, W, 1}, {}, {}}, q, {1, W}, "spatial split -> features split");
  CheckFlatten({{2, 3, 3 * W + 1, 5}, {1, 1, W, 1}, {}, {}, DD_FORMAT_BLOCKED}, q, {1, W}, "spatial split (blocked) -> features split");
  CheckFlatten({{2, 3, 3 * W + 1, 5}, {1, 1, W, 1}, {}, {}}, NULL, {1, 1}, "spatial split -> default (one worker)");
  DDT(DDPartitionDestroy(&q));
  /* batch x channel split, default output (Pn, 1): samples stay on their batch slice */
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &p : f) {
    CheckFlatten({{2 * p[0] + 1, 2 * p[1], 3, 2}, {p[0], p[1], 1, 1}, {}, {}}, NULL, {p[0], 1}, "batch x channels -> default (Pn, 1)");
    DDPartition q2 = MakePartition({p[1], p[0]});
    CheckFlatten({{2 * p[0] + 1, 2 * p[1], 3, 2}, {p[0], p[1], 1, 1}, {}, {}}, q2, {p[1], p[0]}, "batch x channels -> (Pf, Pn) transposed");
    DDT(DDPartitionDestroy(&q2));
  }
}

/* flatten (features split Pf) then affine (Pfi = Pf, Pfo) against the same on one rank */
static RunResult FlattenAffine(const InputSpec &in, PetscInt Pf, PetscInt pfo, PetscInt64 seed)
{
  RunResult R;
  DDTensor  x = MakeInput(in, DD_FLOAT64, seed), h, y, dy, dh, dx;
  DDLayer   fl, af;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &fl));
  DDT(DDLayerSetType(fl, DDLAYERFLATTEN));
  if (Pf > 0) {
    DDPartition q = MakePartition({1, Pf});
    DDT(DDLayerFlattenSetPartition(fl, q));
    DDT(DDPartitionDestroy(&q));
  }
  DDT(DDLayerSetUp(fl, x));
  DDT(DDLayerGetOutput(fl, &h));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &af));
  DDT(DDLayerSetType(af, DDLAYERAFFINE));
  DDT(DDLayerAffineSetOutputFeatures(af, 5));
  DDT(DDLayerAffineSetOutputWorkers(af, pfo));
  DDT(DDLayerSetUp(af, h));
  DDT(DDLayerInitializeParameters(af, seed));
  DDT(DDLayerGetOutput(af, &y));
  DDT(DDLayerForward(fl, x, h));
  DDT(DDLayerForward(af, h, y));
  R.y = GatherAll(y);
  DDT(DDLayerCreateOutput(af, &dy));
  DDT(DDTensorSetRandomGlobal(dy, seed + 1, -1, 1));
  DDT(DDLayerCreateOutput(fl, &dh));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(af, dy, dh));
  DDT(DDLayerBackward(fl, dh, dx));
  R.dx.push_back(GatherAll(dx));
  PetscInt  np;
  DDTensor *ps, *gs;
  DDT(DDLayerGetParameters(af, &np, &ps));
  DDT(DDLayerGetGradients(af, &np, &gs));
  for (PetscInt i = 0; i < np; i++) {
    R.params.push_back(GatherAll(ps[i]));
    R.grads.push_back(GatherAll(gs[i]));
  }
  for (DDTensor *t : {&dy, &dh, &dx, &x}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&fl));
  DDT(DDLayerDestroy(&af));
  return R;
}

TEST(Flatten, ThenAffineEqualsSerial)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> f;
  Factorizations(W, 2, f);
  for (auto &p : f) { /* Pf x Pfo = W */
    InputSpec in = {{2, 3, 2 * W + 1, 3}, {1, 1, W, 1}, {}, {}};
    RunResult par = FlattenAffine(in, p[0], p[1], 17), ser = FlattenAffine(Serial(in), 0, 1, 17);
    ExpectSameRun(par, ser, 1e-12, "flatten (Pf " + std::to_string(p[0]) + ") then affine (Pfo " + std::to_string(p[1]) + ")");
  }
}

TEST(FlattenBadInput, Order1)
{
  DDTensor x = MakeInput({{5}, {}, {}, {}}, DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERFLATTEN));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "the input has order 1");
  DDPartition q = MakePartition({1, 1, 1});
  DD_EXPECT_ERROR(DDLayerFlattenSetPartition(l, q), PETSC_ERR_ARG_INCOMP, "has order 2 (Pn, Pf), not 3");
  DDT(DDPartitionDestroy(&q));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}
