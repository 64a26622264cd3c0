/*
  Per-call costs of the loss and of the optimizer step (issue 16, item 6).

  Loss: the fast paths of DDLAYERLOSS's Backward (bulk runs for mse and l1, one offset per position
  for cross-entropy) give the same bits as the generic walk (forced with the private switch), for
  every loss type, reductions mean / sum / none, with and without dy, float64 and float32, plain,
  channels-last and blocked storage, on 1 rank and split over P ranks; P ranks = 1 rank; finite
  differences.
  Optimizer: DDOptimizerStep's global gradient norm, one reduction per step (counted with PETSc's
  collective counters), equals the per-parameter DDTensorNorm()s for parameters split over all
  ranks, on one rank only, with an empty piece, and on a sub-communicator; clipping scales the
  gradients to the bound; gradients on ranks outside the optimizer's communicator are an error.
*/
#include "layertest.hpp"
#include <ddnn/private/ddimpl.h>
#include <cstring>

using namespace ddtest;

PETSC_EXTERN PetscErrorCode DDLayerLossSetGeneric_Private(DDLayer, PetscBool);
PETSC_EXTERN PetscErrorCode DDLayerLossGetFastPathTaken_Private(DDLayer, PetscBool *);

namespace
{
enum LossKind { K_MSE, K_L1, K_CE, K_CEPROB };
const char *const kKindNames[] = {"mse", "l1", "crossentropy (class indices)", "crossentropy (probabilities)"};
const PetscInt    kC           = 8; /* channels / classes: one block of the blocked format */

std::function<void(DDLayer)> Configure(LossKind k, DDReduction red)
{
  return [=](DDLayer l) {
    const PetscReal w[kC] = {0.5, 1, 2, 1.5, 1, 0.25, 3, 1};
    DDT(DDLayerSetType(l, DDLAYERLOSS));
    DDT(DDLayerLossSetType(l, k == K_MSE ? DD_LOSS_MSE : k == K_L1 ? DD_LOSS_L1 : DD_LOSS_CROSSENTROPY));
    DDT(DDLayerLossSetReduction(l, red));
    if (k == K_CE || k == K_CEPROB) {
      DDT(DDLayerLossSetClassWeights(l, kC, w));
      DDT(DDLayerLossSetLabelSmoothing(l, k == K_CE ? 0.1 : 0.2));
      DDT(DDLayerLossSetIgnoreIndex(l, -1));
      DDT(DDLayerLossSetProbabilityTargets(l, k == K_CEPROB ? PETSC_TRUE : PETSC_FALSE));
    }
  };
}

/* prediction (N, C, H, W) on a partition of shape ps; the target alike, or (N, H, W) class indices with -1 (ignored) */
std::vector<InputSpec> Specs(LossKind k, std::vector<PetscInt> ps, DDTensorFormat fp, DDTensorFormat ft)
{
  const PetscInt W = Size();
  InputSpec      x, t;
  x.shape  = {2 * W + 1, kC, 2 * W + 3, 5};
  x.pshape = ps;
  x.fmt    = fp;
  x.lo = -2, x.hi = 2;
  t     = x;
  t.fmt = ft;
  if (k == K_CEPROB) t.lo = 0, t.hi = 1;
  if (k == K_CE) {
    t.shape  = {x.shape[0], x.shape[2], x.shape[3]};
    t.pshape = {ps[0], ps[2], ps[3]};
    t.fmt    = DD_FORMAT_PLAIN;
    t.lo = -1, t.hi = kC;
    t.integer = true;
  }
  return {x, t};
}

struct LossRun {
  std::vector<double>              y, dy;
  std::vector<std::vector<double>> dx;
  double                           value = 0;
  bool                             fast  = false; /* some rank took a fast path */
};

/* Forward and Backward (dy NULL or random) of the configured loss; generic forces the generic walk */
LossRun RunLoss(const std::function<void(DDLayer)> &conf, const std::vector<InputSpec> &specs, DDDataType dt, PetscInt64 seed, bool withdy, bool generic)
{
  LossRun               R;
  std::vector<DDTensor> xs, dxs;
  DDLayer               l;
  DDTensor              y, dy = NULL;
  PetscReal             v;
  PetscBool             fast;
  int                   f, any;

  for (size_t i = 0; i < specs.size(); i++) xs.push_back(MakeInput(specs[i], dt, seed + 100 * (PetscInt64)i + 1));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  conf(l);
  DDT(DDLayerLossSetGeneric_Private(l, generic ? PETSC_TRUE : PETSC_FALSE));
  DDT(DDLayerSetUpMulti(l, (PetscInt)xs.size(), xs.data()));
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForwardMulti(l, (PetscInt)xs.size(), xs.data(), y));
  R.y = GatherAll(y);
  DDT(DDLayerLossGetValue(l, &v));
  R.value = v;
  if (withdy) {
    DDT(DDLayerCreateOutput(l, &dy));
    DDT(DDTensorSetRandomGlobal(dy, seed + 7, -1, 1));
    R.dy = GatherAll(dy);
  }
  for (auto x : xs) {
    DDTensor d;
    DDT(DDTensorDuplicate(x, &d));
    DDT(DDTensorSet(d, 12345.0)); /* must be overwritten */
    dxs.push_back(d);
  }
  DDT(DDLayerBackwardMulti(l, dy, (PetscInt)xs.size(), dxs.data()));
  for (auto d : dxs) R.dx.push_back(GatherAll(d));
  DDT(DDLayerLossGetFastPathTaken_Private(l, &fast));
  f = fast ? 1 : 0;
  MPI_Allreduce(&f, &any, 1, MPI_INT, MPI_MAX, PETSC_COMM_WORLD);
  R.fast = any != 0;
  for (auto &d : dxs) DDT(DDTensorDestroy(&d));
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&dy));
  DDT(DDLayerDestroy(&l));
  return R;
}

/* the same bits, entry by entry */
void ExpectSameBits(const std::vector<double> &a, const std::vector<double> &b, const std::string &what)
{
  ASSERT_EQ(a.size(), b.size()) << what;
  PetscInt bad = 0;
  for (size_t i = 0; i < a.size() && bad < 3; i++)
    if (std::memcmp(&a[i], &b[i], sizeof(double))) {
      bad++;
      ADD_FAILURE() << what << ": entry " << i << " is " << a[i] << " (fast) and " << b[i] << " (generic)";
    }
}

const DDReduction kReds[] = {DD_REDUCTION_MEAN, DD_REDUCTION_SUM, DD_REDUCTION_NONE};
} // namespace

/* fast == generic bit for bit; the fast path is taken where the layouts allow it (and only there) */
TEST(LossFastPath, EqualsGenericBitwise)
{
  const PetscInt W = Size();
  struct Fmt {
    DDTensorFormat p, t;
    const char    *name;
  } fmts[] = {{DD_FORMAT_PLAIN, DD_FORMAT_PLAIN, "plain"}, {DD_FORMAT_CHANNELS_LAST, DD_FORMAT_PLAIN, "channels-last prediction, plain target"}, {DD_FORMAT_BLOCKED, DD_FORMAT_BLOCKED, "blocked"}};
  const std::vector<std::vector<PetscInt>> parts = {{1, 1, 1, 1}, {W, 1, 1, 1}, {1, 1, W, 1}};
  for (LossKind k : {K_MSE, K_L1, K_CE, K_CEPROB})
    for (DDReduction red : kReds)
      for (const Fmt &fm : fmts)
        for (size_t ip = 0; ip < parts.size(); ip++)
          for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
            for (bool withdy : {false, true}) {
              if (ip > 0 && W == 1) continue;
              const std::string what = std::string(kKindNames[k]) + ", reduction " + DDReductions[red] + ", " + fm.name + ", partition " + std::to_string(ip) + ", " + DDDataTypes[dt] + (withdy ? ", dy" : ", dy NULL");
              SCOPED_TRACE(what);
              const auto specs = Specs(k, parts[ip], fm.p, fm.t);
              LossRun    fa = RunLoss(Configure(k, red), specs, dt, 11, withdy, false), ge = RunLoss(Configure(k, red), specs, dt, 11, withdy, true);
              EXPECT_FALSE(ge.fast) << "the switch forces the generic walk";
              /* the class dimension blocked: cross-entropy's generic walk; everything else fast */
              const bool expectfast = !((k == K_CE || k == K_CEPROB) && fm.p == DD_FORMAT_BLOCKED);
              EXPECT_EQ(fa.fast, expectfast) << "fast path taken";
              ExpectSameBits(fa.y, ge.y, "output");
              for (size_t i = 0; i < fa.dx.size(); i++) ExpectSameBits(fa.dx[i], ge.dx[i], "input gradient " + std::to_string(i));
              if (k == K_CE)
                for (double v : fa.dx[1]) ASSERT_EQ(v, 0.0) << "class indices get no gradient";
            }
}

/* P ranks = 1 rank through the fast paths (the values; the sums of the mean and the loss value may associate differently), and finite differences */
TEST(LossFastPath, DistributedEqualsSerialAndFiniteDifferences)
{
  const PetscInt W = Size();
  for (LossKind k : {K_MSE, K_L1, K_CE, K_CEPROB})
    for (DDReduction red : kReds)
      for (bool withdy : {false, true})
        for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
          const std::string what = std::string(kKindNames[k]) + ", reduction " + DDReductions[red] + ", " + DDDataTypes[dt] + (withdy ? ", dy" : ", dy NULL");
          SCOPED_TRACE(what);
          auto    specs = Specs(k, {W, 1, 1, 1}, DD_FORMAT_PLAIN, DD_FORMAT_PLAIN);
          LossRun par = RunLoss(Configure(k, red), specs, dt, 5, withdy, false);
          for (auto &s : specs) s = Serial(s);
          LossRun ser = RunLoss(Configure(k, red), specs, dt, 5, withdy, false);
          EXPECT_TRUE(par.fast && ser.fast);
          const double tol = dt == DD_FLOAT64 ? 1e-13 : 1e-5;
          EXPECT_LT(RelDiff(par.y, ser.y), tol) << "output";
          EXPECT_NEAR(par.value, ser.value, tol * (1 + std::fabs(ser.value))) << "value";
          for (size_t i = 0; i < par.dx.size(); i++) EXPECT_LT(RelDiff(par.dx[i], ser.dx[i]), tol) << "input gradient " << i;
        }
  for (LossKind k : {K_MSE, K_L1})
    for (DDReduction red : {DD_REDUCTION_MEAN, DD_REDUCTION_SUM}) {
      SCOPED_TRACE(std::string(kKindNames[k]) + ", reduction " + DDReductions[red]);
      InputSpec s;
      s.shape  = {W + 1, 2, 3, 2};
      s.pshape = {1, 1, W, 1};
      ExpectFiniteDifferences(Configure(k, red), {s, s}, 4, 1e-7, 1e-6);
    }
}

/* the analytic values of the fast path: mse mean's gradient 2 (x - t) / n, l1 sum's sign(x - t), the target's their negatives */
TEST(LossFastPath, AnalyticGradients)
{
  InputSpec s;
  s.shape  = {3, 2, 4 * Size() + 1};
  s.pshape = {1, 1, Size()};
  for (DDLossType type : {DD_LOSS_MSE, DD_LOSS_L1}) {
    const DDReduction red  = type == DD_LOSS_MSE ? DD_REDUCTION_MEAN : DD_REDUCTION_SUM;
    auto              conf = [=](DDLayer l) {
      DDT(DDLayerSetType(l, DDLAYERLOSS));
      DDT(DDLayerLossSetType(l, type));
      DDT(DDLayerLossSetReduction(l, red));
    };
    LossRun             r = RunLoss(conf, {s, s}, DD_FLOAT64, 3, false, false);
    DDTensor            xt = MakeInput(s, DD_FLOAT64, 4), tt = MakeInput(s, DD_FLOAT64, 104); /* RunLoss's inputs */
    std::vector<double> x = GatherAll(xt), t = GatherAll(tt);
    DDT(DDTensorDestroy(&xt));
    DDT(DDTensorDestroy(&tt));
    ASSERT_TRUE(r.fast);
    ASSERT_EQ(r.dx[0].size(), x.size());
    for (size_t i = 0; i < x.size(); i++) {
      const double d = x[i] - t[i], g = type == DD_LOSS_MSE ? 2 * d / (double)x.size() : (d > 0 ? 1 : -1);
      EXPECT_NEAR(r.dx[0][i], g, 1e-15) << DDLossTypes[type] << " entry " << i;
      EXPECT_EQ(r.dx[1][i], -r.dx[0][i]);
    }
  }
}

namespace
{
/* a tensor of the given shape on comm, on the partition's ranks (of comm), with ownership sizes lx along dimension 0 (empty: balanced) */
DDTensor MakeParam(MPI_Comm comm, std::vector<PetscInt> shape, std::vector<PetscInt> ps, std::vector<PetscMPIInt> ranks, std::vector<PetscInt> lx, DDDataType dt, PetscInt64 seed)
{
  DDPartition p;
  DDTensor    t;
  DDT(DDPartitionCreateCartesian(comm, (PetscInt)ps.size(), ps.data(), (PetscInt)ranks.size(), ranks.data(), &p));
  DDT(DDTensorCreate(comm, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, (PetscInt)shape.size(), shape.data()));
  DDT(DDTensorSetDataType(t, dt));
  if (!lx.empty()) {
    DDT(DDTensorSetEmptyPiecesAllowed(t, PETSC_TRUE));
    DDT(DDTensorSetOwnershipRanges(t, 0, lx.data()));
  }
  DDT(DDTensorSetUp(t));
  DDT(DDPartitionDestroy(&p));
  DDT(DDTensorSetRandomGlobal(t, seed, -1, 1));
  return t;
}

PetscLogDouble Collectives() { return petsc_allreduce_ct + petsc_gather_ct; }

std::vector<double> GatherOn(DDTensor t, MPI_Comm comm)
{
  PetscInt   N;
  DDDataType dt;
  DDT(DDTensorGetSize(t, &N));
  DDT(DDTensorGetDataType(t, &dt));
  std::vector<double> g(N);
  if (dt == DD_FLOAT64) DDT(DDTensorGatherToRoot(t, 0, g.data()));
  else {
    std::vector<float> f(N);
    DDT(DDTensorGatherToRoot(t, 0, f.data()));
    for (PetscInt i = 0; i < N; i++) g[i] = f[i];
  }
  MPI_Bcast(g.data(), (int)N, MPI_DOUBLE, 0, comm);
  return g;
}
} // namespace

/*
  Parameters split over every rank, on the last rank only, with an empty piece on the last rank,
  and (2 ranks and more) on a sub-communicator of ranks 0 and 1: the step's norm is the
  per-parameter DDTensorNorm()s' (1e-14 relative in float64), in one collective; clipping scales
  the gradients by bound / (norm + 1e-6) and the SGD step uses them.
*/
TEST(OptimizerNorm, OneReductionEqualsPerParameterNorms)
{
  const PetscMPIInt W = Size(), r = Rank();
  MPI_Comm          sub;
  MPI_Comm_split(PETSC_COMM_WORLD, r < 2 ? 0 : MPI_UNDEFINED, r, &sub);
  std::vector<PetscMPIInt> all;
  for (PetscMPIInt i = 0; i < W; i++) all.push_back(i);
  std::vector<PetscInt> lx(W, 3);
  lx[W - 1] = 0;
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (PetscReal clip : {0.0, 0.5}) {
      SCOPED_TRACE(std::string(DDDataTypes[dt]) + (clip > 0 ? ", clipped" : ", no clipping"));
      std::vector<DDTensor> ps, gs;
      std::vector<MPI_Comm> comms;
      auto                  add = [&](MPI_Comm c, std::vector<PetscInt> shape, std::vector<PetscInt> pshape, std::vector<PetscMPIInt> ranks, std::vector<PetscInt> l, PetscInt64 seed) {
        ps.push_back(MakeParam(c, shape, pshape, ranks, l, dt, seed));
        gs.push_back(MakeParam(c, shape, pshape, ranks, l, dt, seed + 50));
        comms.push_back(c);
      };
      add(PETSC_COMM_WORLD, {4 * W + 1, 3}, {W, 1}, all, {}, 1);                       /* split over every rank */
      add(PETSC_COMM_WORLD, {5, 2}, {1, 1}, {W - 1}, {}, 2);                           /* the last rank only */
      add(PETSC_COMM_WORLD, {3 * (W - 1) + (W == 1 ? 2 : 0), 2}, {W, 1}, all, W > 1 ? lx : std::vector<PetscInt>{2}, 3); /* an empty piece */
      if (sub != MPI_COMM_NULL) {
        PetscMPIInt sn;
        MPI_Comm_size(sub, &sn);
        std::vector<PetscMPIInt> sr;
        for (PetscMPIInt i = 0; i < sn; i++) sr.push_back(i);
        add(sub, {7, 4}, {sn, 1}, sr, {}, 4); /* a sub-communicator */
      }
      /* the reference: the per-parameter norms (each collective on its parameter's communicator) */
      std::vector<double> nrm(4, 0.0);
      for (size_t i = 0; i < gs.size(); i++) {
        PetscReal v;
        DDT(DDTensorNorm(gs[i], NORM_2, &v));
        nrm[i] = v;
      }
      MPI_Allreduce(MPI_IN_PLACE, nrm.data(), 4, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD); /* the sub-communicator's to every rank */
      double ref = 0;
      for (double v : nrm) ref += v * v;
      ref = std::sqrt(ref);
      std::vector<std::vector<double>> p0, g0;
      for (size_t i = 0; i < ps.size(); i++) {
        p0.push_back(GatherOn(ps[i], comms[i]));
        g0.push_back(GatherOn(gs[i], comms[i]));
      }
      DDOptimizer opt;
      DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
      DDT(DDOptimizerSetType(opt, DDOPTIMIZERSGD));
      DDT(DDOptimizerSetLearningRate(opt, 0.5));
      DDT(DDOptimizerSetClipNorm(opt, clip));
      DDT(DDOptimizerSetUp(opt, (PetscInt)ps.size(), ps.data(), gs.data()));
      const PetscLogDouble c0 = Collectives();
      DDT(DDOptimizerStep(opt));
      const PetscLogDouble c1 = Collectives();
      EXPECT_EQ(c1 - c0, W > 1 ? 1.0 : 0.0) << "collectives in one step";
      PetscReal got;
      DDT(DDOptimizerGetLastGradientNorm(opt, &got));
      EXPECT_NEAR(got, ref, (dt == DD_FLOAT64 ? 1e-14 : 1e-6) * ref) << "the global gradient norm";
      const double scale = clip > 0 && got > clip ? clip / (got + 1e-6) : 1.0;
      if (clip > 0) ASSERT_GT(got, clip) << "the case must clip";
      for (size_t i = 0; i < ps.size(); i++) {
        const std::vector<double> p1 = GatherOn(ps[i], comms[i]), g1 = GatherOn(gs[i], comms[i]);
        const double              tol = dt == DD_FLOAT64 ? 1e-15 : 1e-6;
        for (size_t j = 0; j < p1.size(); j++) {
          EXPECT_NEAR(g1[j], g0[i][j] * scale, tol) << "parameter " << i << " gradient entry " << j;
          EXPECT_NEAR(p1[j], p0[i][j] - 0.5 * g0[i][j] * scale, 2 * tol) << "parameter " << i << " entry " << j;
        }
      }
      if (clip > 0) { /* the clipped gradients' norm is the bound (times norm / (norm + 1e-6), PyTorch's rule) */
        PetscReal after;
        DDT(DDOptimizerStep(opt));
        DDT(DDOptimizerGetLastGradientNorm(opt, &after));
        EXPECT_NEAR(after, got * scale, (dt == DD_FLOAT64 ? 1e-14 : 1e-6) * clip);
      }
      DDT(DDOptimizerDestroy(&opt));
      for (auto &t : ps) DDT(DDTensorDestroy(&t));
      for (auto &t : gs) DDT(DDTensorDestroy(&t));
    }
  if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
}

/* gradients on ranks outside the optimizer's communicator: an error naming the parameter, on every rank of the optimizer */
TEST(OptimizerNormBadInput, GradientOutsideTheCommunicator)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<PetscMPIInt> all;
  for (PetscMPIInt i = 0; i < Size(); i++) all.push_back(i);
  DDTensor    p = MakeParam(PETSC_COMM_WORLD, {2 * Size(), 2}, {Size(), 1}, all, {}, DD_FLOAT64, 1);
  DDTensor    g = MakeParam(PETSC_COMM_WORLD, {2 * Size(), 2}, {Size(), 1}, all, {}, DD_FLOAT64, 2);
  DDOptimizer opt;
  DDT(DDOptimizerCreate(PETSC_COMM_SELF, &opt));
  DD_EXPECT_ERROR(DDOptimizerSetUp(opt, 1, &p, &g), PETSC_ERR_ARG_INCOMP, "parameter 0 lives on ranks outside the optimizer's communicator");
  DDT(DDOptimizerDestroy(&opt));
  DDT(DDTensorDestroy(&p));
  DDT(DDTensorDestroy(&g));
}

/* a gradient holding a nan or an inf on one rank: an error on every rank naming the first such parameter, before
   anything changes; a norm that overflows while every entry is finite is not one */
TEST(OptimizerNormBadInput, NonFiniteGradientIsAnErrorNamingTheParameter)
{
  const PetscMPIInt W = Size();
  std::vector<PetscMPIInt> all;
  for (PetscMPIInt i = 0; i < W; i++) all.push_back(i);
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    SCOPED_TRACE(DDDataTypes[dt]);
    std::vector<DDTensor> ps, gs;
    ps.push_back(MakeParam(PETSC_COMM_WORLD, {4 * W + 1, 3}, {W, 1}, all, {}, dt, 1)); /* split over every rank */
    gs.push_back(MakeParam(PETSC_COMM_WORLD, {4 * W + 1, 3}, {W, 1}, all, {}, dt, 2));
    ps.push_back(MakeParam(PETSC_COMM_WORLD, {5, 2}, {1, 1}, {W - 1}, {}, dt, 3)); /* the last rank only */
    gs.push_back(MakeParam(PETSC_COMM_WORLD, {5, 2}, {1, 1}, {W - 1}, {}, dt, 4));
    ps.push_back(MakeParam(PETSC_COMM_WORLD, {3, 2}, {1, 1}, {0}, {}, dt, 5)); /* rank 0 only */
    gs.push_back(MakeParam(PETSC_COMM_WORLD, {3, 2}, {1, 1}, {0}, {}, dt, 6));
    DDOptimizer opt;
    DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
    DDT(DDOptimizerSetType(opt, DDOPTIMIZERADAM));
    DDT(DDOptimizerSetClipNorm(opt, 1.0));
    DDT(DDOptimizerSetUp(opt, 3, ps.data(), gs.data()));
    /* entry 0 of a gradient on the ranks that hold one: set to v (returns the old value) */
    auto poke = [&](DDTensor g, double v) {
      void    *a;
      PetscInt m;
      double   old = 0;
      DDT(DDTensorGetLocalSize(g, &m));
      DDT(DDTensorGetArray(g, &a));
      if (m > 0) {
        old = dt == DD_FLOAT64 ? ((double *)a)[0] : ((float *)a)[0];
        if (dt == DD_FLOAT64) ((double *)a)[0] = v;
        else ((float *)a)[0] = (float)v;
      }
      DDT(DDTensorRestoreArray(g, &a));
      return old;
    };
    std::vector<std::vector<double>> p0;
    for (auto p : ps) p0.push_back(GatherOn(p, PETSC_COMM_WORLD));
    auto unchanged = [&]() {
      PetscInt step, epoch;
      DDT(DDOptimizerGetStepCount(opt, &step, &epoch));
      EXPECT_EQ(step, 0) << "the step count";
      for (size_t i = 0; i < ps.size(); i++) EXPECT_EQ(GatherOn(ps[i], PETSC_COMM_WORLD), p0[i]) << "parameter " << i << " changed";
    };
    double g1 = poke(gs[1], NAN);
    DD_EXPECT_ERROR(DDOptimizerStep(opt), PETSC_ERR_FP, "the gradient of parameter 1 (of 3) holds a nan at optimizer step 1; the parameters are left as they were");
    unchanged();
    double g2 = poke(gs[2], -INFINITY);
    DD_EXPECT_ERROR(DDOptimizerStep(opt), PETSC_ERR_FP, "the gradient of parameter 1 (of 3) holds a nan"); /* the first one */
    poke(gs[1], g1);
    DD_EXPECT_ERROR(DDOptimizerStep(opt), PETSC_ERR_FP, "the gradient of parameter 2 (of 3) holds an inf");
    unchanged();
    poke(gs[2], g2);
    if (dt == DD_FLOAT64) { /* |g| = 1e200: its square overflows the norm, every entry is finite: the step runs (clipped to the bound) */
      poke(gs[0], 1e200);
      DDT(DDOptimizerStep(opt));
      PetscReal nrm;
      DDT(DDOptimizerGetLastGradientNorm(opt, &nrm));
      EXPECT_TRUE(PetscIsInfReal(nrm));
    } else DDT(DDOptimizerStep(opt));
    for (auto p : ps) {
      PetscReal n;
      DDT(DDTensorNorm(p, NORM_2, &n));
      EXPECT_FALSE(PetscIsInfOrNanReal(n));
    }
    DDT(DDOptimizerDestroy(&opt));
    for (auto &t : ps) DDT(DDTensorDestroy(&t));
    for (auto &t : gs) DDT(DDTensorDestroy(&t));
  }
}
