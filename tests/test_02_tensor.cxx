/* DDTensor: ownership, orders 1-5, halos, formats, reductions, scatter/gather, DMDA/Vec interop, bad input. */
#include "ddtest.hpp"
#include <ddnn/private/ddimpl.h>
#include <tensor/layout.hpp>
#include <petscdmda.h>
#include <cmath>
#include <numeric>
#include <cstring>
#include <algorithm>

using namespace ddtest;

/* A partition of all ranks with the given order: ranks spread over the trailing dims (round robin of factors) */
static std::vector<std::vector<PetscInt>> AllShapes(int order)
{
  std::vector<std::vector<PetscInt>> s;
  Factorizations(Size(), order, s);
  return s;
}

static void GlobalValues(const std::vector<PetscInt> &shape, std::vector<double> &g)
{
  PetscInt64 n = 1;
  for (auto v : shape) n *= v;
  g.resize(n);
  for (PetscInt64 i = 0; i < n; i++) g[i] = 0.5 + (double)i;
}

/* Scatter from root, gather back, compare; plus corners consistency */
static void RoundTrip(DDTensor t, const std::vector<PetscInt> &shape)
{
  std::vector<double> g, back;
  GlobalValues(shape, g);
  back.assign(g.size(), -1);
  DDDataType dt;
  DDT(DDTensorGetDataType(t, &dt));
  if (dt == DD_FLOAT64) {
    DDT(DDTensorScatterFromRoot(t, 0, g.data()));
    DDT(DDTensorGatherToRoot(t, 0, back.data()));
    if (Rank() == 0) EXPECT_EQ(g, back);
  } else {
    std::vector<float> gf(g.begin(), g.end()), bf(g.size(), -1);
    DDT(DDTensorScatterFromRoot(t, Size() - 1, gf.data()));
    DDT(DDTensorGatherToRoot(t, Size() - 1, bf.data()));
    if (Rank() == Size() - 1) EXPECT_EQ(gf, bf);
  }
  /* every bulk entry holds its own global linear index + 0.5 */
  PetscInt start[DD_MAX_DIM], n[DD_MAX_DIM], order;
  DDT(DDTensorGetOrder(t, &order));
  DDT(DDTensorGetCorners(t, start, n));
  PetscInt cnt = 1;
  for (int k = 0; k < order; k++) cnt *= n[k];
  if (cnt > 0 && dt == DD_FLOAT64) {
    const void *a;
    DDT(DDTensorGetArrayRead(t, &a));
    PetscInt g0[DD_MAX_DIM], off;
    for (int k = 0; k < order; k++) g0[k] = start[k] + n[k] - 1; /* last bulk entry */
    DDT(DDTensorGetLocalOffset(t, g0, &off));
    PetscInt64 lin = 0;
    for (int k = 0; k < order; k++) lin = lin * shape[k] + g0[k];
    EXPECT_EQ(((const double *)a)[off], 0.5 + (double)lin);
    DDT(DDTensorRestoreArrayRead(t, &a));
  }
}

TEST(Tensor, BalancedOwnershipMatchesPetscSplitOwnership)
{
  for (PetscInt N : {1, 2, 3, 7, 8, 13, 64, 100}) {
    Vec v;
    DDT(VecCreateMPI(PETSC_COMM_WORLD, PETSC_DECIDE, N, &v));
    const PetscInt *vr;
    DDT(VecGetOwnershipRanges(v, &vr));
    DDPartition p;
    PetscInt    s = Size();
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, &s, PETSC_DECIDE, NULL, &p));
    DDTensor t;
    DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 1, &N, &t));
    const PetscInt *tr;
    DDT(DDTensorGetOwnershipRanges(t, 0, &tr));
    for (int r = 0; r <= Size(); r++) EXPECT_EQ(tr[r], vr[r]) << "N=" << N << " r=" << r;
    DDT(DDTensorDestroy(&t));
    DDT(DDPartitionDestroy(&p));
    DDT(VecDestroy(&v));
  }
}

TEST(Tensor, OwnershipMatchesDMDA1D2D3D)
{
  for (int dim = 1; dim <= 3; dim++) {
    for (auto &s : AllShapes(dim)) {
      DM       da;
      PetscInt M = 5 * s[dim - 1] + 2, N = dim > 1 ? 3 * s[dim - 2] + 1 : 1, P = dim > 2 ? 2 * s[0] + 3 : 1;
      if (dim == 1) DDT(DMDACreate1d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, M, 2, 1, NULL, &da));
      else if (dim == 2) DDT(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_BOX, M, N, s[1], s[0], 2, 1, NULL, NULL, &da));
      else DDT(DMDACreate3d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_BOX, M, N, P, s[2], s[1], s[0], 2, 1, NULL, NULL, NULL, &da));
      DDT(DMSetUp(da));
      /* a balanced tensor on the same grid has the DMDA's ranges */
      DDPartition part;
      DDT(DDPartitionCreateFromDMDA(da, 2, &part));
      std::vector<PetscInt> shape = {1, 2};
      if (dim == 3) shape.push_back(P);
      if (dim >= 2) shape.push_back(N);
      shape.push_back(M);
      DDTensor t;
      DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 2 + dim, shape.data(), &t));
      PetscInt xs, ys, zs, xm, ym, zm, start[5], n[5];
      DDT(DMDAGetCorners(da, &xs, &ys, &zs, &xm, &ym, &zm));
      DDT(DDTensorGetCorners(t, start, n));
      EXPECT_EQ(start[1 + dim], xs);
      EXPECT_EQ(n[1 + dim], xm);
      if (dim >= 2) {
        EXPECT_EQ(start[dim], ys);
        EXPECT_EQ(n[dim], ym);
      }
      if (dim == 3) {
        EXPECT_EQ(start[2], zs);
        EXPECT_EQ(n[2], zm);
      }
      RoundTrip(t, shape);
      DDT(DDTensorDestroy(&t));
      DDT(DDPartitionDestroy(&part));
      DDT(DMDestroy(&da));
    }
  }
}

TEST(Tensor, Orders1To5BalancedUnbalancedEmpty)
{
  for (int order = 1; order <= 5; order++) {
    for (auto &s : AllShapes(order)) {
      for (int variant = 0; variant < 3; variant++) {
        for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
          DDPartition p;
          DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order, s.data(), PETSC_DECIDE, NULL, &p));
          std::vector<PetscInt> shape(order);
          for (int k = 0; k < order; k++) shape[k] = (variant == 2) ? s[k] / 2 + 1 : 2 * s[k] + k + 1;
          DDTensor t;
          DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
          DDT(DDTensorSetPartition(t, p));
          DDT(DDTensorSetShape(t, order, shape.data()));
          DDT(DDTensorSetDataType(t, dt));
          if (variant == 1) { /* unbalanced: the first worker along each dim takes the most, one gets none */
            for (int k = 0; k < order; k++) {
              std::vector<PetscInt> lx(s[k], 1);
              lx[0] = shape[k] - (s[k] - 1);
              if (s[k] > 1) {
                lx[0]++;
                lx[s[k] - 1] = 0;
              }
              DDT(DDTensorSetOwnershipRanges(t, k, lx.data()));
            }
          }
          DDT(DDTensorSetUp(t));
          RoundTrip(t, shape);
          /* the local sizes add up to the global size */
          PetscInt n, N, sum;
          DDT(DDTensorGetLocalSize(t, &n));
          DDT(DDTensorGetSize(t, &N));
          MPI_Allreduce(&n, &sum, 1, MPIU_INT, MPI_SUM, PETSC_COMM_WORLD);
          EXPECT_EQ(sum, N);
          DDT(DDTensorDestroy(&t));
          DDT(DDPartitionDestroy(&p));
        }
      }
    }
  }
}

TEST(Tensor, HalosAndFormatsKeepValues)
{
  for (auto &s : AllShapes(4)) {
    DDPartition p;
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, s.data(), PETSC_DECIDE, NULL, &p));
    std::vector<PetscInt> shape = {2 * s[0], 11 * s[1] + 3, 3 * s[2] + 2, 4 * s[3] + 1};
    DDTensor t, ref;
    DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 4, shape.data(), &t));
    DDT(DDTensorSetRandomGlobal(t, 7, -1, 1));
    DDT(DDTensorDuplicate(t, &ref));
    DDT(DDTensorCopy(t, ref));
    /* unequal per-rank halos */
    PetscInt lo[4] = {0, 1, 2, (PetscInt)Rank() % 3}, hi[4] = {1, 0, 3, 1};
    DDT(DDTensorSetHalo(t, lo, hi));
    PetscReal diff;
    DDT(DDTensorMaxAbsDiff(t, ref, &diff));
    EXPECT_EQ(diff, 0);
    /* the new halo is zero */
    PetscInt ssize, bsize;
    DDT(DDTensorGetLocalStorageSize(t, &ssize));
    DDT(DDTensorGetLocalSize(t, &bsize));
    {
      const double *a;
      DDT(DDTensorGetArrayRead(t, (const void **)&a));
      double sumall = 0, sumbulk;
      for (PetscInt i = 0; i < ssize; i++) sumall += std::fabs(a[i]);
      DDT(DDTensorRestoreArrayRead(t, (const void **)&a));
      DDTensor tt;
      DDT(DDTensorDuplicate(ref, &tt));
      DDT(DDTensorCopy(ref, tt));
      const double *b;
      DDT(DDTensorGetArrayRead(tt, (const void **)&b));
      sumbulk = 0;
      for (PetscInt i = 0; i < bsize; i++) sumbulk += std::fabs(b[i]);
      DDT(DDTensorRestoreArrayRead(tt, (const void **)&b));
      DDT(DDTensorDestroy(&tt));
      EXPECT_NEAR(sumall, sumbulk, 1e-12 * (1 + sumbulk));
    }
    for (DDTensorFormat f : {DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED, DD_FORMAT_PLAIN, DD_FORMAT_BLOCKED}) {
      DDT(DDTensorSetFormat(t, f));
      DDT(DDTensorMaxAbsDiff(t, ref, &diff));
      EXPECT_EQ(diff, 0) << DDTensorFormats[f];
      /* arithmetic across formats */
      PetscReal d1, d2;
      DDT(DDTensorDot(t, ref, &d1));
      DDT(DDTensorDot(ref, ref, &d2));
      EXPECT_NEAR(d1, d2, 1e-12 * d2);
    }
    /* blocked with block 16 and a halo */
    DDT(DDTensorSetBlockSize(t, 16));
    DDT(DDTensorMaxAbsDiff(t, ref, &diff));
    EXPECT_EQ(diff, 0);
    std::vector<double> g1(shape[0] * shape[1] * shape[2] * shape[3]), g2(g1.size());
    DDT(DDTensorGatherToRoot(t, 0, g1.data()));
    DDT(DDTensorGatherToRoot(ref, 0, g2.data()));
    if (Rank() == 0) EXPECT_EQ(g1, g2);
    DDT(DDTensorZeroHalo(t));
    DDT(DDTensorMaxAbsDiff(t, ref, &diff));
    EXPECT_EQ(diff, 0);
    DDT(DDTensorDestroy(&t));
    DDT(DDTensorDestroy(&ref));
    DDT(DDPartitionDestroy(&p));
  }
}

/* DDTensorCopy between every pair of storage formats (the tiled transpose of ForEachBulkRunPair), with
   unequal halos on both sides, orders 3 and 5, float32 and float64: the gathered tensors are equal */
TEST(Tensor, CopyBetweenAllFormatsWithHalos)
{
  for (PetscInt order : {3, 5}) {
    for (auto &s : AllShapes(order)) {
      DDPartition p;
      DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order, s.data(), PETSC_DECIDE, NULL, &p));
      std::vector<PetscInt> shape(order);
      for (PetscInt k = 0; k < order; k++) shape[k] = (k == 1 ? 19 : 3 + k) * s[k] + (k % 2);
      PetscInt N = 1;
      for (auto v : shape) N *= v;
      for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
        for (DDTensorFormat fa : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
          for (DDTensorFormat fb : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED}) {
            DDTensor a, b;
            DDT(DDTensorCreateFromPartition(p, dt, order, shape.data(), &a));
            DDT(DDTensorDuplicate(a, &b));
            std::vector<PetscInt> lo(order), hi(order);
            for (PetscInt k = 0; k < order; k++) {
              lo[k] = (Rank() + k) % 2;
              hi[k] = (k + 1) % 3;
            }
            DDT(DDTensorSetHalo(a, lo.data(), hi.data()));
            DDT(DDTensorSetBlockSize(a, 8));
            DDT(DDTensorSetFormat(a, fa));
            DDT(DDTensorSetHalo(b, hi.data(), lo.data()));
            DDT(DDTensorSetFormat(b, fb));
            DDT(DDTensorSetRandomGlobal(a, 5, -1, 1));
            DDT(DDTensorCopy(a, b));
            std::vector<double> ga(N), gb(N);
            DDT(DDTensorGatherToRoot(a, 0, ga.data()));
            DDT(DDTensorGatherToRoot(b, 0, gb.data()));
            if (Rank() == 0) EXPECT_EQ(ga, gb) << "order " << order << " " << DDTensorFormats[fa] << " -> " << DDTensorFormats[fb];
            DDT(DDTensorDestroy(&a));
            DDT(DDTensorDestroy(&b));
          }
      DDT(DDPartitionDestroy(&p));
    }
  }
}

TEST(Tensor, ReductionsAgreeWithSerialComputation)
{
  for (auto &s : AllShapes(3)) {
    DDPartition p;
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 3, s.data(), PETSC_DECIDE, NULL, &p));
    std::vector<PetscInt> shape = {3, 5, 7};
    DDTensor x, y;
    DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 3, shape.data(), &x));
    DDT(DDTensorDuplicate(x, &y));
    std::vector<double> gx(105), gy(105);
    for (int i = 0; i < 105; i++) {
      gx[i] = std::sin(i + 1.0);
      gy[i] = std::cos(2.0 * i);
    }
    DDT(DDTensorSetValuesGlobal(x, gx.data()));
    DDT(DDTensorSetValuesGlobal(y, gy.data()));
    double dot = 0, n1 = 0, n2 = 0, ninf = 0, sum = 0;
    for (int i = 0; i < 105; i++) {
      dot += gx[i] * gy[i];
      n1 += std::fabs(gx[i]);
      n2 += gx[i] * gx[i];
      ninf = std::max(ninf, std::fabs(gx[i]));
      sum += gx[i];
    }
    PetscReal v;
    DDT(DDTensorDot(x, y, &v));
    EXPECT_NEAR(v, dot, 1e-13 * 105);
    DDT(DDTensorNorm(x, NORM_1, &v));
    EXPECT_NEAR(v, n1, 1e-13 * 105);
    DDT(DDTensorNorm(x, NORM_2, &v));
    EXPECT_NEAR(v, std::sqrt(n2), 1e-13 * 105);
    DDT(DDTensorNorm(x, NORM_INFINITY, &v));
    EXPECT_EQ(v, ninf);
    DDT(DDTensorSum(x, &v));
    EXPECT_NEAR(v, sum, 1e-13 * 105);
    /* axpy/axpby/scale/set */
    DDT(DDTensorAXPY(y, 2.0, x)); /* y = cos + 2 sin */
    DDT(DDTensorAXPBY(y, -1.0, 0.5, x)); /* y = 0.5 y - x = 0.5 cos */
    DDT(DDTensorScale(y, 2.0));
    std::vector<double> back(105);
    DDT(DDTensorGatherToRoot(y, 0, back.data()));
    if (Rank() == 0)
      for (int i = 0; i < 105; i++) EXPECT_NEAR(back[i], gy[i], 1e-14);
    DDT(DDTensorSet(y, 3.0));
    DDT(DDTensorSum(y, &v));
    EXPECT_EQ(v, 315.0);
    /* deterministic: the same bits twice */
    PetscReal a1, a2;
    DDT(DDTensorDot(x, x, &a1));
    DDT(DDTensorDot(x, x, &a2));
    EXPECT_EQ(a1, a2);
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
    DDT(DDPartitionDestroy(&p));
  }
}

TEST(Tensor, RandomGlobalIsPartitionIndependent)
{
  std::vector<PetscInt> shape = {2, 3, 9, 10};
  std::vector<double>   first;
  for (auto &s : AllShapes(4)) {
    DDPartition p;
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, s.data(), PETSC_DECIDE, NULL, &p));
    DDTensor t;
    DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 4, shape.data(), &t));
    DDT(DDTensorSetFormat(t, DD_FORMAT_CHANNELS_LAST));
    DDT(DDTensorSetRandomGlobal(t, 42, -1, 1));
    std::vector<double> g(540);
    DDT(DDTensorGatherToRoot(t, 0, g.data()));
    if (Rank() == 0) {
      if (first.empty()) first = g;
      else EXPECT_EQ(g, first);
      double mn = *std::min_element(g.begin(), g.end()), mx = *std::max_element(g.begin(), g.end());
      EXPECT_GE(mn, -1);
      EXPECT_LT(mx, 1);
      EXPECT_LT(mn, -0.9);
      EXPECT_GT(mx, 0.9);
    }
    DDT(DDTensorDestroy(&t));
    DDT(DDPartitionDestroy(&p));
  }
}

/* DDTensorSetRandomGlobal's values as it computed them entry by entry before its row-wise version:
   entry g (global C-order linear index) gets (T)(a + (b - a) u), u = splitmix64(splitmix64(seed) ^ g) / 2^64
   to 53 bits. A copy on purpose: the values are documented to depend on the seed and g only. */
static uint64_t RefSplitMix64(uint64_t x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
template <class T>
static T RefRandomGlobal(PetscInt64 seed, PetscInt64 g, PetscReal a, PetscReal b)
{
  return (T)(a + (b - a) * ((double)(RefSplitMix64(RefSplitMix64((uint64_t)seed) ^ (uint64_t)g) >> 11) * 0x1.0p-53));
}

/* every bulk entry of t equals the reference bit for bit, and every other storage entry (halo,
   block padding) still holds `sentinel`; returns the number of bulk entries checked */
template <class T>
static PetscInt CheckRandomGlobal(DDTensor t, PetscInt64 seed, PetscReal a, PetscReal b, T sentinel, const std::string &what)
{
  PetscInt        order, st[DD_MAX_DIM], n[DD_MAX_DIM], ssize, bad = 0, cnt = 0;
  const PetscInt *shape;
  const void     *arr;
  DDT(DDTensorGetOrder(t, &order));
  DDT(DDTensorGetShape(t, &shape));
  DDT(DDTensorGetCorners(t, st, n));
  DDT(DDTensorGetLocalStorageSize(t, &ssize));
  DDT(DDTensorGetArrayRead(t, &arr));
  const T          *x = (const T *)arr;
  std::vector<char> bulk(ssize, 0);
  PetscInt          total = 1;
  for (PetscInt k = 0; k < order; k++) total *= n[k];
  for (PetscInt i = 0; i < total; i++) {
    PetscInt   g[DD_MAX_DIM], r = i, off;
    PetscInt64 lin = 0;
    for (PetscInt k = order - 1; k >= 0; k--) {
      g[k] = st[k] + r % n[k];
      r /= n[k];
    }
    for (PetscInt k = 0; k < order; k++) lin = lin * shape[k] + g[k];
    DDT(DDTensorGetLocalOffset(t, g, &off));
    bulk[off]++;
    T want = RefRandomGlobal<T>(seed, lin, a, b);
    if (std::memcmp(&x[off], &want, sizeof(T)) && bad++ < 3) ADD_FAILURE() << what << ": entry " << lin << " is " << x[off] << ", the per-entry code gives " << want;
    cnt++;
  }
  for (PetscInt o = 0; o < ssize; o++) {
    if (bulk[o] > 1 && bad++ < 3) ADD_FAILURE() << what << ": offset " << o << " holds " << (int)bulk[o] << " bulk entries";
    if (!bulk[o] && std::memcmp(&x[o], &sentinel, sizeof(T)) && bad++ < 3) ADD_FAILURE() << what << ": the halo/padding entry at offset " << o << " was written";
  }
  DDT(DDTensorRestoreArrayRead(t, &arr));
  EXPECT_EQ(bad, 0) << what;
  return cnt;
}

/* The row-wise DDTensorSetRandomGlobal against the per-entry reference, bit for bit: orders 1-5, up
   to 9 Cartesian partitions of the ranks per order (all of them for orders 1-3 up to 4 ranks),
   balanced and unbalanced (an empty piece) ownership, plain, channels-last and blocked storage
   (blocks of 8 and 16 with partial blocks), no halo (rows merged across dimensions) and unequal
   halos per rank, float32 and float64, several seeds and bounds; the halo is never written. */
TEST(Tensor, RandomGlobalRowsEqualPerEntryReference)
{
  PetscInt checked = 0;
  for (int order = 1; order <= 5; order++) {
    std::vector<std::vector<PetscInt>> shapes = AllShapes(order), some;
    const size_t                       step   = (shapes.size() + 7) / 8; /* at most 8 partitions per order (35 for order 5 on 8 ranks) */
    for (size_t i = 0; i < shapes.size(); i += step) some.push_back(shapes[i]);
    if (some.back() != shapes.back()) some.push_back(shapes.back());
    for (auto &s : some) {
      for (int variant = 0; variant < 2; variant++) {
        DDPartition p;
        DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, order, s.data(), PETSC_DECIDE, NULL, &p));
        std::vector<PetscInt> shape(order);
        for (int k = 0; k < order; k++) shape[k] = (k == 1 ? 11 : 2 + k % 3) * s[k] + (k + 1) % 3;
        for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
          for (int fmt = 0; fmt < 4; fmt++) {
            DDTensor t;
            DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
            DDT(DDTensorSetPartition(t, p));
            DDT(DDTensorSetShape(t, order, shape.data()));
            DDT(DDTensorSetDataType(t, dt));
            if (variant == 1) { /* unbalanced: the first worker along each dim takes the most, the last none */
              for (int k = 0; k < order; k++) {
                std::vector<PetscInt> lx(s[k], 1);
                lx[0] = shape[k] - (s[k] - 1);
                if (s[k] > 1) {
                  lx[0]++;
                  lx[s[k] - 1] = 0;
                }
                DDT(DDTensorSetOwnershipRanges(t, k, lx.data()));
              }
            }
            DDT(DDTensorSetUp(t));
            std::vector<PetscInt> lo(order), hi(order);
            for (int k = 0; k < order; k++) { /* no halo in the first two formats of variant 0 (merged rows) */
              lo[k] = (variant == 0 && fmt < 2) ? 0 : (Rank() + k) % 3;
              hi[k] = (variant == 0 && fmt < 2) ? 0 : (k + 1 + variant) % 2;
            }
            DDT(DDTensorSetHalo(t, lo.data(), hi.data()));
            const DDTensorFormat f = fmt == 0 ? DD_FORMAT_PLAIN : fmt == 1 ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_BLOCKED;
            if (fmt >= 2) DDT(DDTensorSetBlockSize(t, fmt == 2 ? 8 : 16));
            DDT(DDTensorSetFormat(t, f));
            for (int c = 0; c < 3; c++) {
              const PetscInt64 seed = c == 0 ? 42 : c == 1 ? -7 : (PetscInt64)1 << 40;
              const PetscReal  a = c == 2 ? 0.25 : -1, b = c == 2 ? 3.5 : 1;
              std::string      what = "order " + std::to_string(order) + " variant " + std::to_string(variant) + " " + (dt == DD_FLOAT32 ? "float32 " : "float64 ") + DDTensorFormats[f] + " bs " + std::to_string(fmt == 3 ? 16 : 8) + " seed " + std::to_string(seed);
              PetscInt         ssize;
              void            *arr;
              DDT(DDTensorGetLocalStorageSize(t, &ssize));
              DDT(DDTensorGetArray(t, &arr));
              if (dt == DD_FLOAT32) std::fill((float *)arr, (float *)arr + ssize, 1234.5f);
              else std::fill((double *)arr, (double *)arr + ssize, 1234.5);
              DDT(DDTensorRestoreArray(t, &arr));
              DDT(DDTensorSetRandomGlobal(t, seed, a, b));
              checked += dt == DD_FLOAT32 ? CheckRandomGlobal<float>(t, seed, a, b, 1234.5f, what) : CheckRandomGlobal<double>(t, seed, a, b, 1234.5, what);
            }
            DDT(DDTensorDestroy(&t));
          }
        }
        DDT(DDPartitionDestroy(&p));
      }
    }
  }
  EXPECT_GT(checked, 0); /* every rank held entries somewhere */
}

TEST(Tensor, SubsetPartitionAndReplicatedDims)
{
  int size = Size(), n = (size + 1) / 2;
  std::vector<PetscMPIInt> ranks(n);
  for (int i = 0; i < n; i++) ranks[i] = 2 * i < size ? 2 * i : i;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  n = (int)ranks.size();
  PetscInt    ps[2] = {n, 1};
  DDPartition p;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, ps, n, ranks.data(), &p));
  std::vector<PetscInt> shape = {3 * n + 1, 6};
  DDTensor t;
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape.data(), &t));
  RoundTrip(t, shape);
  PetscBool active;
  DDT(DDTensorIsActive(t, &active));
  bool expect = std::find(ranks.begin(), ranks.end(), Rank()) != ranks.end();
  EXPECT_EQ((bool)active, expect);
  DDT(DDTensorDestroy(&t));
  /* replicated along dim 0: every worker holds all of dim 0 */
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, shape.data()));
  DDT(DDTensorSetReplicated(t, 0, PETSC_TRUE));
  DDT(DDTensorSetUp(t));
  PetscInt start[2], nn[2];
  DDT(DDTensorGetCorners(t, start, nn));
  if (expect) {
    EXPECT_EQ(start[0], 0);
    EXPECT_EQ(nn[0], shape[0]);
  }
  RoundTrip(t, shape);
  /* the inner product counts every copy */
  DDT(DDTensorSet(t, 1.0));
  PetscReal s;
  DDT(DDTensorSum(t, &s));
  EXPECT_EQ(s, (PetscReal)(n * shape[0] * shape[1]));
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

TEST(Tensor, DMDAGlobalVecIsWrappedWithoutCopy)
{
  for (auto &s : AllShapes(2)) {
    DM da;
    DDT(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_BOX, 4 * s[1] + 1, 3 * s[0] + 2, s[1], s[0], 3, 1, NULL, NULL, &da));
    DDT(DMSetUp(da));
    Vec g;
    DDT(DMCreateGlobalVector(da, &g));
    DDTensor t;
    DDT(DDTensorCreateFromDMDA(da, DD_FLOAT64, &t));
    DDT(DDTensorPlaceVec(t, g));
    void        *ta;
    PetscScalar *va;
    DDT(DDTensorGetArray(t, &ta));
    DDT(VecGetArray(g, &va));
    EXPECT_EQ((void *)va, ta); /* the same memory: no copy */
    double *tarr = (double *)ta;
    DDT(VecRestoreArray(g, &va));
    DDT(DDTensorRestoreArray(t, &ta));
    /* tensor entry (0, c, y, x) is the DMDA's u[y][x][c] */
    DDT(DDTensorSetRandomGlobal(t, 3, 0, 1));
    PetscScalar ***u;
    PetscInt       xs, ys, xm, ym;
    DDT(DMDAGetCorners(da, &xs, &ys, NULL, &xm, &ym, NULL));
    DDT(DMDAVecGetArrayDOF(da, g, &u));
    for (PetscInt y = ys; y < ys + ym; y++)
      for (PetscInt x = xs; x < xs + xm; x++)
        for (PetscInt c = 0; c < 3; c++) {
          PetscInt gi[4] = {0, c, y, x}, off;
          DDT(DDTensorGetLocalOffset(t, gi, &off));
          EXPECT_EQ(tarr[off], u[y][x][c]);
        }
    DDT(DMDAVecRestoreArrayDOF(da, g, &u));
    DDT(DDTensorResetVec(t, g));
    /* copy path for a plain-format tensor with 3 components */
    DDTensor tp;
    DDT(DDTensorDuplicate(t, &tp));
    DDT(DDTensorSetFormat(tp, DD_FORMAT_PLAIN));
    DDT(DDTensorCopyFromVec(tp, g));
    Vec g2;
    DDT(VecDuplicate(g, &g2));
    DDT(DDTensorCopyToVec(tp, g2));
    PetscBool eq;
    DDT(VecEqual(g, g2, &eq));
    EXPECT_TRUE(eq);
    /* a plain tensor with 3 components cannot wrap it */
    DD_EXPECT_ERROR(DDTensorPlaceVec(tp, g), PETSC_ERR_ARG_INCOMP, "components last");
    /* the ghosted local Vec is wrapped when the tensor's halo equals the ghost region */
    Vec l;
    DDT(DMGetLocalVector(da, &l));
    DDT(DMGlobalToLocal(da, g, INSERT_VALUES, l));
    PetscInt gxs, gys, gxm, gym;
    DDT(DMDAGetGhostCorners(da, &gxs, &gys, NULL, &gxm, &gym, NULL));
    PetscInt lo[4] = {0, 0, ys - gys, xs - gxs}, hi[4] = {0, 0, gys + gym - ys - ym, gxs + gxm - xs - xm};
    DDTensor tl;
    DDT(DDTensorCreateFromDMDA(da, DD_FLOAT64, &tl));
    DDT(DDTensorSetHalo(tl, lo, hi));
    DDT(DDTensorPlaceVec(tl, l));
    PetscReal diff;
    DDT(DDTensorMaxAbsDiff(tl, tp, &diff));
    EXPECT_EQ(diff, 0);
    DDT(DDTensorResetVec(tl, l));
    DDT(DMRestoreLocalVector(da, &l));
    /* a Vec sharing the tensor's storage */
    Vec tv;
    DDT(DDTensorCreateVec(t, &tv));
    DDT(VecSet(tv, 2.0));
    PetscReal sum;
    DDT(DDTensorSum(t, &sum));
    PetscInt N;
    DDT(DDTensorGetSize(t, &N));
    EXPECT_EQ(sum, 2.0 * N);
    DDT(VecDestroy(&tv));
    DDT(VecDestroy(&g2));
    DDT(DDTensorDestroy(&tl));
    DDT(DDTensorDestroy(&tp));
    DDT(DDTensorDestroy(&t));
    DDT(VecDestroy(&g));
    DDT(DMDestroy(&da));
  }
}

/* a Vec on a tensor's storage (placed or shared) and the tensor see each other's changes: PETSc does not
   return a norm it cached before the tensor wrote, and the storage cannot move away from a shared Vec */
TEST(Tensor, VecOnItsStorageSeesTheTensorsWrites)
{
  DM da;
  DDT(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_BOX, 9, 7, PETSC_DECIDE, PETSC_DECIDE, 2, 1, NULL, NULL, &da));
  DDT(DMSetUp(da));
  Vec g;
  DDT(DMCreateGlobalVector(da, &g));
  PetscInt N;
  DDT(VecGetSize(g, &N));
  PetscReal nrm;
  DDT(VecSet(g, 1.0));
  DDT(VecNorm(g, NORM_2, &nrm)); /* cached with the Vec's state */
  EXPECT_NEAR(nrm, std::sqrt((double)N), 1e-12);
  DDTensor t;
  DDT(DDTensorCreateFromDMDA(da, DD_FLOAT64, &t));
  DDT(DDTensorPlaceVec(t, g));
  DDT(DDTensorScale(t, 2.0));
  Vec tvp;
  DD_EXPECT_ERROR(DDTensorCreateVec(t, &tvp), PETSC_ERR_ARG_WRONGSTATE, "wraps a Vec");
  DDT(VecNorm(g, NORM_2, &nrm));
  EXPECT_NEAR(nrm, 2 * std::sqrt((double)N), 1e-12) << "a norm PETSc cached before the tensor wrote into the placed Vec";
  DDT(DDTensorResetVec(t, g));
  DDT(DDTensorSet(t, 1.0));
  Vec tv;
  DDT(DDTensorCreateVec(t, &tv));
  DDT(VecNorm(tv, NORM_1, &nrm));
  EXPECT_NEAR(nrm, (double)N, 1e-12);
  DDT(DDTensorScale(t, 3.0));
  DDT(VecNorm(tv, NORM_1, &nrm));
  EXPECT_NEAR(nrm, 3.0 * N, 1e-12) << "a norm PETSc cached before the tensor wrote into the shared storage";
  PetscInt lo[4] = {0, 0, 1, 1}, hi[4] = {0, 0, 1, 1};
  DD_EXPECT_ERROR(DDTensorSetHalo(t, lo, hi), PETSC_ERR_ARG_WRONGSTATE, "DDTensorCreateVec() shares");
  DD_EXPECT_ERROR(DDTensorSetFormat(t, DD_FORMAT_PLAIN), PETSC_ERR_ARG_WRONGSTATE, "destroy the Vec first");
  DD_EXPECT_ERROR(DDTensorPlaceVec(t, g), PETSC_ERR_ARG_WRONGSTATE, "shares the tensor's storage");
  Vec tv2; /* two Vecs on the storage: both see the writes; the storage moves once both are gone */
  DDT(DDTensorCreateVec(t, &tv2));
  DDT(VecNorm(tv2, NORM_1, &nrm));
  DDT(DDTensorScale(t, 0.5));
  DDT(VecNorm(tv, NORM_1, &nrm));
  EXPECT_NEAR(nrm, 1.5 * N, 1e-12);
  DDT(VecNorm(tv2, NORM_1, &nrm));
  EXPECT_NEAR(nrm, 1.5 * N, 1e-12);
  Vec dup; /* a duplicate has storage of its own (PETSc copies the composed objects to it): it outlives the Vecs on the tensor's storage without holding it */
  DDT(VecDuplicate(tv, &dup));
  DDT(VecDestroy(&tv));
  DD_EXPECT_ERROR(DDTensorSetHalo(t, lo, hi), PETSC_ERR_ARG_WRONGSTATE, "DDTensorCreateVec() shares");
  DDT(VecDestroy(&tv2));
  DDT(DDTensorScale(t, 1.0)); /* no Vec of the storage is left to mark */
  DDT(DDTensorSetHalo(t, lo, hi));
  DDT(VecSet(dup, 1.0));
  Vec dup2;
  DDT(VecDuplicate(dup, &dup2));
  DDT(VecDestroy(&dup));
  DDT(VecDestroy(&dup2));
  PetscReal sum;
  DDT(DDTensorSum(t, &sum));
  EXPECT_NEAR(sum, 1.5 * N, 1e-9); /* the values kept through the move */
  DDT(DDTensorDestroy(&t));
  DDT(VecDestroy(&g));
  DDT(DMDestroy(&da));
}

/* ---------------------------------------------------------------------- */
static DDPartition LinePartition()
{
  DDPartition p;
  PetscInt    s[2] = {1, Size()};
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, s, PETSC_DECIDE, NULL, &p));
  return p;
}

TEST(TensorBadInput, OwnershipNotSummingToSize)
{
  DDPartition p = LinePartition();
  DDTensor    t;
  PetscInt    shape[2] = {2, 10};
  std::vector<PetscInt> lx(Size(), 1);
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, shape));
  DDT(DDTensorSetOwnershipRanges(t, 1, lx.data()));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_SIZ, "sum to");
  DDT(DDTensorDestroy(&t));
  lx[0] = -1;
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, shape));
  DDT(DDTensorSetOwnershipRanges(t, 1, lx.data()));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_OUTOFRANGE, "negative");
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

TEST(TensorBadInput, MorePiecesThanEntriesWhenEmptyForbidden)
{
  if (Size() < 2) GTEST_SKIP() << "needs two ranks";
  DDPartition p = LinePartition();
  DDTensor    t;
  PetscInt    shape[2] = {2, Size() - 1};
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, shape));
  DDT(DDTensorSetEmptyPiecesAllowed(t, PETSC_FALSE));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_SIZ, "empty pieces are not allowed");
  DDT(DDTensorDestroy(&t));
  /* allowed by default */
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape, &t));
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

TEST(TensorBadInput, NegativeHaloOnOneRankFailsEverywhere)
{
  DDPartition p = LinePartition();
  DDTensor    t;
  PetscInt    shape[2] = {2, 4 * Size()};
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape, &t));
  PetscInt lo[2] = {0, Rank() == Size() - 1 ? -2 : 1}, hi[2] = {0, 1};
  DD_EXPECT_ERROR(DDTensorSetHalo(t, lo, hi), PETSC_ERR_ARG_OUTOFRANGE, "Negative halo width in dimension 1");
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

TEST(TensorBadInput, DataTypeMismatch)
{
  DDPartition p = LinePartition();
  DDTensor    a, b;
  PetscInt    shape[2] = {2, 4 * Size()};
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape, &a));
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT32, 2, shape, &b));
  DD_EXPECT_ERROR(DDTensorAXPY(a, 1.0, b), PETSC_ERR_ARG_INCOMP, "data types differ (float32 and float64)");
  PetscReal d;
  DD_EXPECT_ERROR(DDTensorDot(a, b, &d), PETSC_ERR_ARG_INCOMP, "data types differ");
  DDT(DDTensorDestroy(&a));
  DDT(DDTensorDestroy(&b));
  /* shapes differ */
  PetscInt shape2[2] = {3, 4 * Size()};
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape, &a));
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape2, &b));
  DD_EXPECT_ERROR(DDTensorCopy(a, b), PETSC_ERR_ARG_INCOMP, "not distributed alike");
  DDT(DDTensorDestroy(&a));
  DDT(DDTensorDestroy(&b));
  DDT(DDPartitionDestroy(&p));
}

TEST(TensorBadInput, OrderDiffersFromPartition)
{
  DDPartition p = LinePartition();
  DDTensor    t;
  PetscInt    shape[3] = {1, 2, 4};
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 3, shape));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_INCOMP, "order 3 cannot live on a partition of order 2");
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

/* The tester's hang (issue: root that differs between ranks): every rank raises the error, naming the roots */
TEST(TensorBadInput, ScatterGatherRootDiffersOrIsMissing)
{
  DDPartition         p = LinePartition();
  DDTensor            t;
  PetscInt            shape[2] = {2, 3 * Size()};
  std::vector<double> g((size_t)shape[0] * shape[1], 1.0);
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape, &t));
  if (Size() > 1) {
    DD_EXPECT_ERROR(DDTensorScatterFromRoot(t, Rank(), g.data()), PETSC_ERR_ARG_INCOMP, "DDTensorScatterFromRoot(): the root differs between ranks (roots from 0 to ");
    DD_EXPECT_ERROR(DDTensorGatherToRoot(t, Rank(), g.data()), PETSC_ERR_ARG_INCOMP, "DDTensorGatherToRoot(): the root differs between ranks");
    /* one rank out of range, the others fine: still every rank */
    DD_EXPECT_ERROR(DDTensorGatherToRoot(t, Rank() == 1 ? -5 : 0, g.data()), PETSC_ERR_ARG_INCOMP, "roots from -5 to 0");
  }
  DD_EXPECT_ERROR(DDTensorScatterFromRoot(t, Size(), g.data()), PETSC_ERR_ARG_OUTOFRANGE, "root rank");
  /* the root's array NULL: every rank raises it (the others would wait in the gather) */
  const PetscMPIInt root = Size() - 1;
  DD_EXPECT_ERROR(DDTensorGatherToRoot(t, root, Rank() == root ? NULL : g.data()), PETSC_ERR_ARG_NULL, "argument 3 (global) is NULL on the root rank");
  DD_EXPECT_ERROR(DDTensorScatterFromRoot(t, root, Rank() == root ? NULL : g.data()), PETSC_ERR_ARG_NULL, "argument 3 (global) is NULL on the root rank");
  /* NULL elsewhere than on root is fine (ignored there) */
  DDT(DDTensorScatterFromRoot(t, root, Rank() == root ? g.data() : NULL));
  DDT(DDTensorGatherToRoot(t, root, Rank() == root ? g.data() : NULL));
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

/* The tester's crashes (SEGV) on NULL arguments and dimensions out of range: errors naming the function and argument */
TEST(TensorBadInput, NullArgumentsAndDimensionsOutOfRange)
{
  DDPartition p = LinePartition(), q;
  DDTensor    t, u;
  PetscInt    shape[2] = {2, 4 * Size()};
  PetscBool   flg;
  PetscReal   r;
  DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, shape, &t));
  DD_EXPECT_ERROR(DDTensorGetReplicated(t, -1, &flg), PETSC_ERR_ARG_OUTOFRANGE, "DDTensorGetReplicated(): dimension -1 is outside [0, 2)");
  DD_EXPECT_ERROR(DDTensorGetReplicated(t, 2, &flg), PETSC_ERR_ARG_OUTOFRANGE, "dimension 2 is outside [0, 2)");
  DD_EXPECT_ERROR(DDTensorGetReplicated(t, 100000000, &flg), PETSC_ERR_ARG_OUTOFRANGE, "dimension 100000000");
  DD_EXPECT_ERROR(DDTensorGetReplicated(t, 1, NULL), PETSC_ERR_ARG_NULL, "DDTensorGetReplicated(): argument 3 (flg) is NULL");
  DDT(DDTensorGetReplicated(t, 1, &flg));
  EXPECT_FALSE(flg);
  DD_EXPECT_ERROR(DDTensorSetHalo(NULL, NULL, NULL), PETSC_ERR_ARG_NULL, "DDTensorSetHalo(): argument 1 (t) is NULL");
  DD_EXPECT_ERROR(DDTensorDot(t, t, NULL), PETSC_ERR_ARG_NULL, "DDTensorDot(): argument 3 (d) is NULL");
  DD_EXPECT_ERROR(DDTensorSum(t, NULL), PETSC_ERR_ARG_NULL, "DDTensorSum(): argument 2 (s) is NULL");
  DD_EXPECT_ERROR(DDTensorNorm(t, NORM_2, NULL), PETSC_ERR_ARG_NULL, "DDTensorNorm(): argument 3 (nrm) is NULL");
  DD_EXPECT_ERROR(DDTensorNorm(t, (NormType)100, &r), PETSC_ERR_SUP, "norm type (out of range) is not supported");
  DD_EXPECT_ERROR(DDTensorMaxAbsDiff(t, t, NULL), PETSC_ERR_ARG_NULL, "DDTensorMaxAbsDiff(): argument 3 (diff) is NULL");
  /* NULL on one rank only: that rank errors after the reduction, the others finish it (no hang) */
  PetscErrorCode e = Catch([&]() { return DDTensorDot(t, t, Rank() == 0 ? NULL : &r); });
  EXPECT_EQ((int)e, Rank() == 0 ? (int)PETSC_ERR_ARG_NULL : 0);
  DD_EXPECT_ERROR(DDTensorSetValuesGlobal(t, NULL), PETSC_ERR_ARG_NULL, "DDTensorSetValuesGlobal(): argument 2 (global) is NULL");
  DD_EXPECT_ERROR(DDTensorSetRandom(t, NULL), PETSC_ERR_ARG_NULL, "DDTensorSetRandom(): argument 2 (rnd) is NULL");
  {
    const void *a;
    DDT(DDTensorGetArrayRead(t, &a));
    DDT(DDTensorRestoreArrayRead(t, &a)); /* sets it to NULL */
    EXPECT_EQ(a, nullptr);
    DDT(DDTensorRestoreArrayRead(t, NULL)); /* allowed, as PETSc's VecRestoreArrayRead() */
    DD_EXPECT_ERROR(DDTensorRestoreArrayRead(NULL, &a), PETSC_ERR_ARG_NULL, "DDTensorRestoreArrayRead(): argument 1 (t) is NULL");
    DD_EXPECT_ERROR(DDTensorGetArrayRead(t, NULL), PETSC_ERR_ARG_NULL, "argument 2 (a) is NULL");
  }
  DD_EXPECT_ERROR(DDTensorGetOrder(t, NULL), PETSC_ERR_ARG_NULL, "DDTensorGetOrder(): argument 2 (order) is NULL");
  DD_EXPECT_ERROR(DDTensorGetShape(t, NULL), PETSC_ERR_ARG_NULL, "argument 2 (shape) is NULL");
  DD_EXPECT_ERROR(DDTensorGetSize(t, NULL), PETSC_ERR_ARG_NULL, "argument 2 (size) is NULL");
  DD_EXPECT_ERROR(DDTensorGetLocalSize(t, NULL), PETSC_ERR_ARG_NULL, "argument 2 (n) is NULL");
  DD_EXPECT_ERROR(DDTensorGetOwnershipRanges(t, 1, NULL), PETSC_ERR_ARG_NULL, "argument 3 (ranges) is NULL");
  DD_EXPECT_ERROR(DDTensorGetLocalOffset(t, NULL, NULL), PETSC_ERR_ARG_NULL, "argument 2 (g) is NULL");
  DD_EXPECT_ERROR(DDTensorIsActive(t, NULL), PETSC_ERR_ARG_NULL, "argument 2 (flg) is NULL");
  DD_EXPECT_ERROR(DDTensorDuplicate(t, NULL), PETSC_ERR_ARG_NULL, "DDTensorDuplicate(): argument 2 (y) is NULL");
  DD_EXPECT_ERROR(DDTensorCreateFromPartition(p, DD_FLOAT64, 2, NULL, &u), PETSC_ERR_ARG_NULL, "argument 4 (shape) is NULL");
  DD_EXPECT_ERROR(DDTensorCreate(PETSC_COMM_WORLD, NULL), PETSC_ERR_ARG_NULL, "DDTensorCreate(): argument 2 (t) is NULL");
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &u));
  DD_EXPECT_ERROR(DDTensorSetShape(u, 2, NULL), PETSC_ERR_ARG_NULL, "DDTensorSetShape(): argument 3 (shape) is NULL");
  DD_EXPECT_ERROR(DDTensorSetPartition(u, NULL), PETSC_ERR_ARG_NULL, "DDTensorSetPartition(): argument 2 (part) is NULL");
  DD_EXPECT_ERROR(DDTensorGetReplicated(u, DD_MAX_DIM, &flg), PETSC_ERR_ARG_OUTOFRANGE, "(the tensor has no shape yet)");
  DDT(DDTensorDestroy(&u));
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &q));
  DD_EXPECT_ERROR(DDTensorSetPartition(t, q), PETSC_ERR_ARG_WRONGSTATE, "DDTensorSetUp"); /* not a crash on the set-up tensor either */
  DDT(DDPartitionDestroy(&q));
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

/* DDTensorSetReplicated() on a dimension beyond the order: an error, at the call or at set-up */
TEST(TensorBadInput, ReplicatedDimensionBeyondTheOrder)
{
  DDPartition p = LinePartition();
  DDTensor    t;
  PetscInt    shape[2] = {2, 4 * Size()};
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, shape));
  DD_EXPECT_ERROR(DDTensorSetReplicated(t, 5, PETSC_TRUE), PETSC_ERR_ARG_OUTOFRANGE, "DDTensorSetReplicated(): dimension 5 is outside the tensor's [0, 2)");
  DD_EXPECT_ERROR(DDTensorSetReplicated(t, -1, PETSC_TRUE), PETSC_ERR_ARG_OUTOFRANGE, "dimension -1");
  DDT(DDTensorDestroy(&t));
  /* before the shape: raised by the set-up */
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetReplicated(t, 5, PETSC_TRUE));
  DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, shape));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_OUTOFRANGE, "dimension 5 was made replicated (DDTensorSetReplicated()) but the tensor (shape 2x");
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

/* The tester's t1 case 11: the order differs from the partition's on one rank only; every rank raises it */
TEST(TensorBadInput, OrderDiffersFromPartitionOnOneRankOnly)
{
  if (Size() < 2) GTEST_SKIP() << "needs two ranks";
  DDPartition p = LinePartition();
  DDTensor    t;
  PetscInt    s2[2] = {2, 6}, s3[3] = {1, 2, 6};
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, p));
  if (Rank() == 1) DDT(DDTensorSetShape(t, 3, s3));
  else DDT(DDTensorSetShape(t, 2, s2));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_INCOMP, "differs between ranks");
  DDT(DDTensorDestroy(&t));
  /* a rank without a partition, the same */
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  if (Rank() != 1) DDT(DDTensorSetPartition(t, p));
  DDT(DDTensorSetShape(t, 2, s2));
  DD_EXPECT_ERROR(DDTensorSetUp(t), PETSC_ERR_ARG_INCOMP, "partition (none)");
  DDT(DDTensorDestroy(&t));
  DDT(DDPartitionDestroy(&p));
}

TEST(TensorBadInput, DMDAVecThatCannotBeWrapped)
{
  DM da;
  DDT(DMDACreate1d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, 8 * Size(), 2, 1, NULL, &da));
  DDT(DMSetUp(da));
  Vec g;
  DDT(DMCreateGlobalVector(da, &g));
  DDTensor t32, t;
  DDT(DDTensorCreateFromDMDA(da, DD_FLOAT32, &t32));
  DD_EXPECT_ERROR(DDTensorPlaceVec(t32, g), PETSC_ERR_ARG_WRONG, "Only a float64 tensor");
  DDT(DDTensorCreateFromDMDA(da, DD_FLOAT64, &t));
  DDT(DDTensorSetFormat(t, DD_FORMAT_PLAIN));
  DD_EXPECT_ERROR(DDTensorPlaceVec(t, g), PETSC_ERR_ARG_INCOMP, "components last");
  DDT(DDTensorSetFormat(t, DD_FORMAT_CHANNELS_LAST));
  /* a Vec of another size: fails on every rank although only rank 0 differs */
  Vec w;
  DDT(VecCreateMPI(PETSC_COMM_WORLD, Rank() == 0 ? 2 : 16, PETSC_DETERMINE, &w));
  DD_EXPECT_ERROR(DDTensorPlaceVec(t, w), PETSC_ERR_ARG_SIZ, "Vec local size");
  DD_EXPECT_ERROR(DDTensorCopyFromVec(t, w), PETSC_ERR_ARG_SIZ, "Vec local size");
  DDT(DDTensorPlaceVec(t, g));
  DDT(DDTensorResetVec(t, g));
  DDT(VecDestroy(&w));
  DDT(DDTensorDestroy(&t));
  DDT(DDTensorDestroy(&t32));
  DDT(VecDestroy(&g));
  DDT(DMDestroy(&da));
}

/* ForEachBulkRunPair's walks between two layouts of the same piece (plain, channels-last, blocked; every
   halo of 0 or 1 on each side of H and W, and on C): the runs visit every bulk entry once, pairing the
   offsets LayoutOffset() gives entry by entry; where both layouts hold the inner dimensions whole the rows
   merge (a plain output with a halo along H alone: one run per plane) */
TEST(Tensor, RunPairWalksEveryEntryOnce)
{
  const PetscInt shape[4] = {2, 16, 3, 5}, ps[4] = {1, 1, 1, 1};
  DDPartition    p;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, ps, PETSC_DECIDE, NULL, &p));
  int checked = 0;
  for (DDTensorFormat f : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
    for (int ha = 0; ha < 64; ha += 5)
      for (int hb = 0; hb < 64; hb += 3) {
        DDTensor a, b;
        DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 4, shape, &a));
        DDT(DDTensorCreateFromPartition(p, DD_FLOAT64, 4, shape, &b));
        const PetscInt la[4] = {0, (ha >> 4) & 1, ha & 1, (ha >> 1) & 1}, ua[4] = {0, (ha >> 5) & 1, (ha >> 2) & 1, (ha >> 3) & 1};
        const PetscInt lb[4] = {0, (hb >> 4) & 1, hb & 1, (hb >> 1) & 1}, ub[4] = {0, (hb >> 5) & 1, (hb >> 2) & 1, (hb >> 3) & 1};
        for (DDTensor t : {a, b}) {
          DDT(DDTensorSetBlockSize(t, 8));
          DDT(DDTensorSetFormat(t, f));
        }
        DDT(DDTensorSetHalo(a, la, ua));
        DDT(DDTensorSetHalo(b, lb, ub));
        const DDLayout &A = a->layout, &B = b->layout;
        std::vector<std::pair<PetscInt, PetscInt>> walk, ref;
        PetscInt                                    runs = 0;
        ddnn::ForEachBulkRunPair(A, B, [&](PetscInt oa, PetscInt ob, PetscInt len) {
          runs++;
          for (PetscInt i = 0; i < len; i++) walk.push_back({oa + i, ob + i});
        });
        PetscInt j[4], ja[4], jb[4];
        for (j[0] = 0; j[0] < shape[0]; j[0]++)
          for (j[1] = 0; j[1] < shape[1]; j[1]++)
            for (j[2] = 0; j[2] < shape[2]; j[2]++)
              for (j[3] = 0; j[3] < shape[3]; j[3]++) {
                for (int k = 0; k < 4; k++) ja[k] = j[k] + A.lo[k], jb[k] = j[k] + B.lo[k];
                ref.push_back({ddnn::LayoutOffset(A, ja), ddnn::LayoutOffset(B, jb)});
              }
        std::sort(walk.begin(), walk.end());
        std::sort(ref.begin(), ref.end());
        EXPECT_EQ(walk, ref) << DDTensorFormats[f] << " halos " << ha << " / " << hb;
        if (f == DD_FORMAT_PLAIN && !la[1] && !ua[1] && !lb[1] && !ub[1] && !la[3] && !ua[3] && !lb[3] && !ub[3] && (la[2] || ua[2] || lb[2] || ub[2])) {
          EXPECT_EQ(runs, shape[0] * shape[1]) << "halos along H alone: one run per plane"; /* W whole in both: H x W merged */
          checked++;
        }
        DDT(DDTensorDestroy(&a));
        DDT(DDTensorDestroy(&b));
      }
  EXPECT_GT(checked, 0);
  DDT(DDPartitionDestroy(&p));
}
