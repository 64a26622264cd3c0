/*
  layertest.hpp - helpers for layer tests: run a layer on given input partitions with
  partition-independent data, gather everything, compare runs (P ranks vs 1 rank), finite
  differences.
*/
#pragma once
#include "ddtest.hpp"
#include <functional>
#include <cmath>

namespace ddtest
{
struct InputSpec {
  std::vector<PetscInt>              shape;  /* global shape */
  std::vector<PetscInt>              pshape; /* partition shape (empty: all ones) */
  std::vector<PetscMPIInt>           ranks;  /* workers' ranks (empty: 0..P-1) */
  std::vector<std::vector<PetscInt>> lx;     /* ownership sizes per dimension (empty: balanced) */
  DDTensorFormat                     fmt = DD_FORMAT_PLAIN;
  PetscReal                          lo = -1, hi = 1; /* range of the random values */
  bool                               integer = false; /* class labels in [0, hi) (cross-entropy targets) */
};

struct RunResult {
  std::vector<double>              y;
  std::vector<std::vector<double>> dx, params, grads;
  double                           loss = 0;
};

inline std::vector<double> GatherAll(DDTensor t)
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
  MPI_Bcast(g.data(), (int)N, MPI_DOUBLE, 0, PETSC_COMM_WORLD);
  return g;
}

/* sets a tensor's global values (C order) from doubles, in the tensor's own type (the inverse of GatherAll) */
inline void SetValues(DDTensor t, const std::vector<double> &v)
{
  DDDataType dt;
  DDT(DDTensorGetDataType(t, &dt));
  if (dt == DD_FLOAT64) DDT(DDTensorSetValuesGlobal(t, v.data()));
  else {
    std::vector<float> f(v.begin(), v.end());
    DDT(DDTensorSetValuesGlobal(t, f.data()));
  }
}

inline DDTensor MakeInput(const InputSpec &s, DDDataType dt, PetscInt64 seed)
{
  DDPartition p;
  std::vector<PetscInt> ps = s.pshape.empty() ? std::vector<PetscInt>(s.shape.size(), 1) : s.pshape;
  PetscInt              P  = 1;
  for (auto v : ps) P *= v;
  std::vector<PetscMPIInt> r = s.ranks;
  if (r.empty())
    for (PetscInt i = 0; i < P; i++) r.push_back((PetscMPIInt)i);
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, (PetscInt)ps.size(), ps.data(), (PetscInt)r.size(), r.data(), &p));
  DDTensor t;
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, (PetscInt)s.shape.size(), s.shape.data()));
  DDT(DDTensorSetDataType(t, dt));
  for (size_t k = 0; k < s.lx.size(); k++)
    if (!s.lx[k].empty()) DDT(DDTensorSetOwnershipRanges(t, (PetscInt)k, s.lx[k].data()));
  DDT(DDTensorSetFormat(t, s.fmt));
  DDT(DDTensorSetUp(t));
  DDT(DDPartitionDestroy(&p));
  DDT(DDTensorSetRandomGlobal(t, seed, s.lo, s.hi));
  if (s.integer) { /* integer labels */
    PetscInt N;
    DDT(DDTensorGetSize(t, &N));
    std::vector<double> g = GatherAll(t);
    for (auto &v : g) v = std::floor(v);
    SetValues(t, g);
  }
  return t;
}

/*
  Sets up a layer (configure() sets its type and options) on the given inputs, runs Forward and
  Backward with partition-independent random inputs, parameters and output gradient, and
  gathers everything. For losses (scalar output), Backward gets dy = NULL (dL = 1).
*/
inline RunResult RunLayer(const std::function<void(DDLayer)> &configure, const std::vector<InputSpec> &specs, DDDataType dt, PetscInt64 seed, bool gradInputs = true, bool training = true)
{
  RunResult             R;
  std::vector<DDTensor> xs, dxs;
  for (size_t i = 0; i < specs.size(); i++) xs.push_back(MakeInput(specs[i], dt, seed + 100 * i + 1));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetTraining(l, training ? PETSC_TRUE : PETSC_FALSE));
  DDT(DDLayerSetUpMulti(l, (PetscInt)xs.size(), xs.data()));
  DDT(DDLayerInitializeParameters(l, seed));
  DDTensor y, dy;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForwardMulti(l, (PetscInt)xs.size(), xs.data(), y));
  R.y = GatherAll(y);
  DDLayerType type;
  DDT(DDLayerGetType(l, &type));
  bool isloss = std::string(type) == "loss";
  if (isloss) {
    PetscReal v;
    DDT(DDLayerLossGetValue(l, &v));
    R.loss = v;
  }
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, seed + 7, -1, 1));
  for (size_t i = 0; i < xs.size(); i++) {
    DDTensor d = NULL;
    if (gradInputs) {
      DDT(DDTensorDuplicate(xs[i], &d));
      DDT(DDTensorSet(d, 12345.0)); /* must be overwritten */
    }
    dxs.push_back(d);
  }
  DDT(DDLayerBackwardMulti(l, isloss ? NULL : dy, (PetscInt)xs.size(), dxs.data()));
  for (auto d : dxs) R.dx.push_back(d ? GatherAll(d) : std::vector<double>());
  PetscInt  np;
  DDTensor *ps, *gs;
  DDT(DDLayerGetParameters(l, &np, &ps));
  DDT(DDLayerGetGradients(l, &np, &gs));
  for (PetscInt i = 0; i < np; i++) {
    R.params.push_back(GatherAll(ps[i]));
    R.grads.push_back(GatherAll(gs[i]));
  }
  for (auto &d : dxs) DDT(DDTensorDestroy(&d));
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&dy));
  DDT(DDLayerDestroy(&l));
  return R;
}

/* A layer on an input replicated along dimension rep (each worker along it holds the whole extent, as after a broadcast) */
inline RunResult RunReplicated(const std::function<void(DDLayer)> &configure, const std::vector<PetscInt> &shape, const std::vector<PetscInt> &pshape, PetscInt rep, PetscInt64 seed)
{
  RunResult   R;
  DDPartition p;
  DDTensor    x, y, dy, dx;
  DDLayer     l;
  PetscInt    P = 1;
  for (auto v : pshape) P *= v;
  std::vector<PetscMPIInt> ranks;
  for (PetscInt r = 0; r < P; r++) ranks.push_back((PetscMPIInt)r);
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, (PetscInt)pshape.size(), pshape.data(), P, ranks.data(), &p));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &x));
  DDT(DDTensorSetPartition(x, p));
  DDT(DDTensorSetShape(x, (PetscInt)shape.size(), shape.data()));
  DDT(DDTensorSetDataType(x, DD_FLOAT64));
  DDT(DDTensorSetReplicated(x, rep, PETSC_TRUE));
  DDT(DDTensorSetUp(x));
  DDT(DDTensorSetRandomGlobal(x, seed + 1, -1, 1));
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  PetscBool yrep;
  DDT(DDTensorGetReplicated(y, rep, &yrep));
  EXPECT_TRUE(yrep) << "the output keeps the input's replicated dimension";
  DDT(DDLayerForward(l, x, y));
  R.y = GatherAll(y);
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, seed + 7, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerBackward(l, dy, dx));
  R.dx.push_back(GatherAll(dx));
  for (DDTensor *t : {&x, &dy, &dx}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
  DDT(DDPartitionDestroy(&p));
  return R;
}

inline double RelDiff(const std::vector<double> &a, const std::vector<double> &b)
{
  if (a.size() != b.size()) return 1e300;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); i++) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / (den > 0 ? den : 1);
}

/* Expects two runs to agree: outputs, input gradients, parameters and their gradients */
inline void ExpectSameRun(const RunResult &a, const RunResult &b, double tol, const std::string &what)
{
  EXPECT_LT(RelDiff(a.y, b.y), tol) << what << ": outputs differ";
  EXPECT_EQ(a.dx.size(), b.dx.size());
  for (size_t i = 0; i < a.dx.size() && i < b.dx.size(); i++) EXPECT_LT(RelDiff(a.dx[i], b.dx[i]), tol) << what << ": input gradient " << i << " differs";
  EXPECT_EQ(a.params.size(), b.params.size()) << what;
  for (size_t i = 0; i < a.params.size() && i < b.params.size(); i++) {
    EXPECT_LT(RelDiff(a.params[i], b.params[i]), tol) << what << ": parameter " << i << " differs (partition dependence)";
    EXPECT_LT(RelDiff(a.grads[i], b.grads[i]), tol) << what << ": parameter gradient " << i << " differs";
  }
  EXPECT_NEAR(a.loss, b.loss, tol * (1 + std::fabs(b.loss))) << what << ": loss differs";
}

/* the one-worker version of an input spec: the same global tensor on rank 0 only */
inline InputSpec Serial(InputSpec s)
{
  s.pshape.assign(s.shape.size(), 1);
  s.ranks = {0};
  s.lx.clear();
  return s;
}

/* a network input of this shape on a partition of this shape (serial: on rank 0 alone), filled with
   the global random values of the seed in [-1, 1] (the same on every partition) */
inline DDTensor RandomInput(std::vector<PetscInt> shape, std::vector<PetscInt> pshape, DDDataType dt, PetscInt64 seed, bool serial = false)
{
  InputSpec s;
  s.shape  = shape;
  s.pshape = pshape;
  if (serial) s = Serial(s);
  DDTensor t = MakeInput(s, dt, seed);
  DDT(DDTensorSetRandomGlobal(t, seed, -1.0, 1.0));
  return t;
}

/*
  Central finite differences of L = <F(x, p), r> along random directions of input i and of
  each parameter, against the gradients of Backward (float64, small cases).
*/
inline void ExpectFiniteDifferences(const std::function<void(DDLayer)> &configure, const std::vector<InputSpec> &specs, PetscInt64 seed, double tol, double h = 1e-6)
{
  std::vector<DDTensor> xs;
  for (size_t i = 0; i < specs.size(); i++) xs.push_back(MakeInput(specs[i], DD_FLOAT64, seed + 100 * i + 1));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetUpMulti(l, (PetscInt)xs.size(), xs.data()));
  DDT(DDLayerInitializeParameters(l, seed));
  DDLayerType type;
  DDT(DDLayerGetType(l, &type));
  bool     isloss = std::string(type) == "loss";
  DDTensor y, r;
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerCreateOutput(l, &r));
  DDT(DDTensorSetRandomGlobal(r, seed + 5, -1, 1));
  auto L = [&]() {
    DDT(DDLayerForwardMulti(l, (PetscInt)xs.size(), xs.data(), y));
    PetscReal v;
    if (isloss) DDT(DDLayerLossGetValue(l, &v));
    else DDT(DDTensorDot(y, r, &v));
    return (double)v;
  };
  L();
  std::vector<DDTensor> dxs;
  for (auto x : xs) {
    DDTensor d;
    DDT(DDTensorDuplicate(x, &d));
    dxs.push_back(d);
  }
  DDT(DDLayerZeroGradients(l));
  DDT(DDLayerBackwardMulti(l, isloss ? NULL : r, (PetscInt)xs.size(), dxs.data()));
  /* directional derivatives: inputs (skip integer targets) */
  for (size_t i = 0; i < xs.size(); i++) {
    if (specs[i].integer) continue;
    DDTensor v, x0;
    DDT(DDTensorDuplicate(xs[i], &v));
    DDT(DDTensorDuplicate(xs[i], &x0));
    DDT(DDTensorCopy(xs[i], x0));
    DDT(DDTensorSetRandomGlobal(v, seed + 33 + i, -1, 1));
    DDT(DDTensorAXPY(xs[i], h, v));
    double lp = L();
    DDT(DDTensorAXPY(xs[i], -2 * h, v));
    double lm = L();
    DDT(DDTensorCopy(x0, xs[i]));
    double    fd = (lp - lm) / (2 * h);
    PetscReal an;
    DDT(DDTensorDot(dxs[i], v, &an));
    EXPECT_NEAR(fd, an, tol * (1 + std::fabs(an))) << "input " << i << " directional derivative";
    DDT(DDTensorDestroy(&v));
    DDT(DDTensorDestroy(&x0));
  }
  PetscInt  np;
  DDTensor *ps, *gs;
  DDT(DDLayerGetParameters(l, &np, &ps));
  DDT(DDLayerGetGradients(l, &np, &gs));
  for (PetscInt i = 0; i < np; i++) {
    DDTensor v, p0;
    DDT(DDTensorDuplicate(ps[i], &v));
    DDT(DDTensorDuplicate(ps[i], &p0));
    DDT(DDTensorCopy(ps[i], p0));
    DDT(DDTensorSetRandomGlobal(v, seed + 77 + i, -1, 1));
    DDT(DDTensorAXPY(ps[i], h, v));
    double lp = L();
    DDT(DDTensorAXPY(ps[i], -2 * h, v));
    double lm = L();
    DDT(DDTensorCopy(p0, ps[i]));
    double    fd = (lp - lm) / (2 * h);
    PetscReal an;
    DDT(DDTensorDot(gs[i], v, &an));
    EXPECT_NEAR(fd, an, tol * (1 + std::fabs(an))) << "parameter " << i << " directional derivative";
    DDT(DDTensorDestroy(&v));
    DDT(DDTensorDestroy(&p0));
  }
  for (auto &d : dxs) DDT(DDTensorDestroy(&d));
  for (auto &x : xs) DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&r));
  DDT(DDLayerDestroy(&l));
}
/*
  Inputs, outputs and gradients whose halos differ from the set-up layouts (another consumer grew
  them) must give the same numbers as tensors with the set-up layouts (single-input layers).
*/
inline void ExpectOtherHalosGiveSameResults(const std::function<void(DDLayer)> &configure, const InputSpec &in, const std::string &what)
{
  DDTensor x = MakeInput(in, DD_FLOAT64, 3), x1, y, y1, dy, dy1, dx, dx1;
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetUp(l, x));
  /* the reference: set-up layouts */
  DDT(DDLayerGetOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  auto yref = GatherAll(y);
  DDT(DDLayerCreateOutput(l, &dy));
  DDT(DDTensorSetRandomGlobal(dy, 8, -1, 1));
  DDT(DDTensorDuplicate(x, &dx));
  DDT(DDLayerZeroGradients(l));
  DDT(DDLayerBackward(l, dy, dx));
  auto      dxref = GatherAll(dx);
  PetscInt  np;
  DDTensor *gs;
  DDT(DDLayerGetGradients(l, &np, &gs));
  auto dwref = np > 0 ? GatherAll(gs[0]) : std::vector<double>();
  /* the same values in tensors with wider halos */
  PetscInt lo[DD_MAX_DIM] = {0, 0, 2, 3, 1}, hi[DD_MAX_DIM] = {1, 0, 1, 2, 2};
  DDT(DDTensorDuplicate(x, &x1));
  DDT(DDTensorSetHalo(x1, lo, hi));
  DDT(DDTensorCopy(x, x1));
  DDT(DDLayerCreateOutput(l, &y1));
  DDT(DDTensorSetHalo(y1, hi, lo));
  DDT(DDTensorDuplicate(dy, &dy1));
  DDT(DDTensorSetHalo(dy1, lo, lo));
  DDT(DDTensorCopy(dy, dy1));
  DDT(DDTensorDuplicate(x1, &dx1));
  DDT(DDLayerForward(l, x1, y1));
  EXPECT_EQ(GatherAll(y1), yref) << what;
  DDT(DDLayerZeroGradients(l));
  DDT(DDLayerBackward(l, dy1, dx1));
  EXPECT_EQ(GatherAll(dx1), dxref) << what;
  if (np > 0) EXPECT_EQ(GatherAll(gs[0]), dwref) << what;
  for (DDTensor *t : {&x, &x1, &y1, &dy, &dy1, &dx, &dx1}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&l));
}
} // namespace ddtest
