/* DDPartition: Cartesian grids of ranks, subsets, sub-partitions, DMDA process grids, bad input. */
#include "ddtest.hpp"
#include <petscdmda.h>
#include <ddnn/private/ddimpl.h>

using namespace ddtest;

TEST(Partition, CoordinatesAreCOrderOfRank)
{
  int size = Size();
  for (int parts = 1; parts <= 4; parts++) {
    std::vector<std::vector<PetscInt>> shapes;
    Factorizations(size, parts, shapes);
    for (auto &s : shapes) {
      DDPartition p;
      DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, parts, s.data(), PETSC_DECIDE, NULL, &p));
      PetscInt c[DD_MAX_DIM], idx, lin = 0;
      PetscBool active;
      DDT(DDPartitionGetCoordinates(p, c));
      DDT(DDPartitionGetIndex(p, &idx));
      DDT(DDPartitionIsActive(p, &active));
      EXPECT_TRUE(active);
      for (int k = 0; k < parts; k++) {
        EXPECT_GE(c[k], 0);
        EXPECT_LT(c[k], s[k]);
        lin = lin * s[k] + c[k];
      }
      EXPECT_EQ(lin, Rank()); /* last dimension fastest, like DMDA's x */
      EXPECT_EQ(idx, Rank());
      PetscMPIInt r;
      DDT(DDPartitionGetRankOfCoordinates(p, c, &r));
      EXPECT_EQ(r, Rank());
      /* neighbors */
      for (int k = 0; k < parts; k++) {
        PetscMPIInt left, right;
        DDT(DDPartitionGetNeighbor(p, k, -1, &left));
        DDT(DDPartitionGetNeighbor(p, k, +1, &right));
        if (c[k] == 0) EXPECT_EQ(left, -1);
        else {
          PetscInt cc[DD_MAX_DIM];
          for (int m = 0; m < parts; m++) cc[m] = c[m];
          cc[k]--;
          PetscMPIInt expect;
          DDT(DDPartitionGetRankOfCoordinates(p, cc, &expect));
          EXPECT_EQ(left, expect);
        }
        if (c[k] == s[k] - 1) EXPECT_EQ(right, -1);
      }
      MPI_Comm sub;
      DDT(DDPartitionGetSubComm(p, &sub));
      EXPECT_EQ(Rank(sub), Rank());
      DDT(DDPartitionDestroy(&p));
    }
  }
}

TEST(Partition, MatchesDMDAProcessGrid)
{
  int size = Size();
  std::vector<std::vector<PetscInt>> shapes;
  Factorizations(size, 3, shapes);
  for (auto &s : shapes) {
    DM da;
    /* DMDA m, n, p = x, y, z = s[2], s[1], s[0] */
    DDT(DMDACreate3d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_BOX, 3 * s[2] + 1, 2 * s[1] + 1, s[0] + 2, s[2], s[1], s[0], 1, 1, NULL, NULL, NULL, &da));
    DDT(DMSetUp(da));
    DDPartition p;
    DDT(DDPartitionCreateFromDMDA(da, 2, &p));
    const PetscInt *shape;
    PetscInt order, c[DD_MAX_DIM];
    DDT(DDPartitionGetOrder(p, &order));
    DDT(DDPartitionGetShape(p, &shape));
    EXPECT_EQ(order, 5);
    EXPECT_EQ(shape[0], 1);
    EXPECT_EQ(shape[1], 1);
    EXPECT_EQ(shape[2], s[0]);
    EXPECT_EQ(shape[3], s[1]);
    EXPECT_EQ(shape[4], s[2]);
    DDT(DDPartitionGetCoordinates(p, c));
    /* the DMDA's own coordinates of this rank, from its corners and ownership ranges */
    PetscInt        xs, ys, zs;
    const PetscInt *lx, *ly, *lz;
    DDT(DMDAGetCorners(da, &xs, &ys, &zs, NULL, NULL, NULL));
    DDT(DMDAGetOwnershipRanges(da, &lx, &ly, &lz));
    auto coord = [](PetscInt st, const PetscInt *l) {
      PetscInt c = 0, o = 0;
      while (o < st) o += l[c++];
      return c;
    };
    EXPECT_EQ(c[4], coord(xs, lx));
    EXPECT_EQ(c[3], coord(ys, ly));
    EXPECT_EQ(c[2], coord(zs, lz));
    DDT(DDPartitionDestroy(&p));
    DDT(DMDestroy(&da));
  }
}

TEST(Partition, SubsetOfRanksAndIdleWorkers)
{
  int size = Size();
  /* workers on the odd-numbered... here: on the last ceil(size/2) ranks, in reverse order */
  int n = (size + 1) / 2;
  std::vector<PetscMPIInt> ranks(n);
  for (int i = 0; i < n; i++) ranks[i] = size - 1 - i;
  PetscInt    shape[2] = {1, n};
  DDPartition p;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, shape, n, ranks.data(), &p));
  PetscBool active;
  PetscInt  idx, c[2];
  DDT(DDPartitionIsActive(p, &active));
  DDT(DDPartitionGetIndex(p, &idx));
  DDT(DDPartitionGetCoordinates(p, c));
  bool expect = Rank() >= size - n;
  EXPECT_EQ((bool)active, expect);
  MPI_Comm sub;
  DDT(DDPartitionGetSubComm(p, &sub));
  if (expect) {
    EXPECT_EQ(idx, size - 1 - Rank());
    EXPECT_EQ(c[1], idx);
    EXPECT_EQ(Rank(sub), idx);
    EXPECT_EQ(Size(sub), n);
  } else {
    EXPECT_EQ(idx, -1);
    EXPECT_EQ(sub, MPI_COMM_NULL);
  }
  DDT(DDPartitionDestroy(&p));
}

TEST(Partition, SubPartitionsGroupSlices)
{
  int size = Size();
  std::vector<std::vector<PetscInt>> shapes;
  Factorizations(size, 3, shapes);
  for (auto &s : shapes) {
    DDPartition p, sub;
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 3, s.data(), PETSC_DECIDE, NULL, &p));
    PetscBool keep[3] = {PETSC_FALSE, PETSC_TRUE, PETSC_TRUE};
    DDT(DDPartitionCreateSubPartition(p, keep, &sub));
    PetscInt c[3], sc[3], size_sub;
    DDT(DDPartitionGetCoordinates(p, c));
    DDT(DDPartitionGetCoordinates(sub, sc));
    DDT(DDPartitionGetSize(sub, &size_sub));
    EXPECT_EQ(size_sub, s[1] * s[2]);
    EXPECT_EQ(sc[0], 0);
    EXPECT_EQ(sc[1], c[1]);
    EXPECT_EQ(sc[2], c[2]);
    MPI_Comm comm;
    DDT(DDPartitionGetSubComm(sub, &comm));
    EXPECT_EQ(Size(comm), s[1] * s[2]);
    /* everybody in my slice has my coordinate 0 */
    PetscInt mn, mx;
    MPI_Allreduce(&c[0], &mn, 1, MPIU_INT, MPI_MIN, comm);
    MPI_Allreduce(&c[0], &mx, 1, MPIU_INT, MPI_MAX, comm);
    EXPECT_EQ(mn, c[0]);
    EXPECT_EQ(mx, c[0]);
    DDT(DDPartitionDestroy(&sub));
    DDT(DDPartitionDestroy(&p));
  }
}

TEST(Partition, BroadcastAndReduceRules)
{
  /* rules of paper 000 sec. 3.2.1-3.2.2 with implicit leading size-1 dimensions */
  DDPartition a, b, c, d;
  PetscInt    s1[2] = {1, 1}, s2[3] = {4, 4, 3}, s3[3] = {1, 1, 3}, s4[2] = {2, 1};
  PetscMPIInt zero  = 0;
  std::vector<PetscMPIInt> r48(48, 0);
  /* the rule needs only shapes; set up on rank lists of one rank repeated is not allowed, so build by hand */
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &a));
  DDT(DDPartitionSetShape(a, 2, s1));
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &b));
  DDT(DDPartitionSetShape(b, 3, s2));
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &c));
  DDT(DDPartitionSetShape(c, 3, s3));
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &d));
  DDT(DDPartitionSetShape(d, 2, s4));
  (void)zero;
  PetscBool ok;
  PetscInt  bad;
  DDT(DDPartitionCheckBroadcast(a, b, &ok, &bad)); /* 1x1 -> 4x4x3 */
  EXPECT_TRUE(ok);
  DDT(DDPartitionCheckBroadcast(c, b, &ok, &bad)); /* 1x1x3 -> 4x4x3 (Fig. 1b) */
  EXPECT_TRUE(ok);
  DDT(DDPartitionCheckReduce(b, c, &ok, &bad)); /* 4x4x3 -> 1x1x3 */
  EXPECT_TRUE(ok);
  DDT(DDPartitionCheckBroadcast(b, c, &ok, &bad)); /* 4 -> 1 is not a broadcast */
  EXPECT_FALSE(ok);
  EXPECT_EQ(bad, 0);
  DDT(DDPartitionCheckBroadcast(d, b, &ok, &bad)); /* (1)x2x1 vs 4x4x3: dim 1 has 2 vs 4 */
  EXPECT_FALSE(ok);
  EXPECT_EQ(bad, 1);
  DDT(DDPartitionCheckReduce(c, b, &ok, &bad));
  EXPECT_FALSE(ok);
  DDT(DDPartitionDestroy(&a));
  DDT(DDPartitionDestroy(&b));
  DDT(DDPartitionDestroy(&c));
  DDT(DDPartitionDestroy(&d));
}

TEST(PartitionBadInput, ShapeProductDoesNotMatchRanks)
{
  int         size  = Size();
  PetscInt    shape[2] = {size + 1, 1};
  DDPartition p;
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DDT(DDPartitionSetShape(p, 2, shape));
  DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_SIZ, "workers but");
  DDT(DDPartitionDestroy(&p));
  /* explicit rank list of the wrong length */
  PetscInt    s2[1] = {2};
  PetscMPIInt r[1]  = {0};
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DDT(DDPartitionSetShape(p, 1, s2));
  DDT(DDPartitionSetRanks(p, 1, r));
  DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_SIZ, "1 ranks were given");
  DDT(DDPartitionDestroy(&p));
}

TEST(PartitionBadInput, RanksRepeatedOrOutOfRange)
{
  int         size = Size();
  PetscInt    s[1] = {2};
  PetscMPIInt dup[2] = {0, 0}, out[2] = {0, (PetscMPIInt)size};
  DDPartition p;
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DDT(DDPartitionSetShape(p, 1, s));
  DDT(DDPartitionSetRanks(p, 2, dup));
  DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_WRONG, "given twice");
  DDT(DDPartitionDestroy(&p));
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DDT(DDPartitionSetShape(p, 1, s));
  DDT(DDPartitionSetRanks(p, 2, out));
  DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_OUTOFRANGE, "communicator has");
  DDT(DDPartitionDestroy(&p));
}

TEST(PartitionBadInput, ZeroOrTooManyDimensions)
{
  DDPartition p;
  PetscInt    s[2] = {1, 0}, big[DD_MAX_DIM + 1];
  for (auto &v : big) v = 1;
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DD_EXPECT_ERROR(DDPartitionSetShape(p, 2, s), PETSC_ERR_ARG_OUTOFRANGE, "at least one worker");
  DD_EXPECT_ERROR(DDPartitionSetShape(p, DD_MAX_DIM + 1, big), PETSC_ERR_ARG_OUTOFRANGE, "order");
  DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_WRONGSTATE, "no shape");
  DDT(DDPartitionDestroy(&p));
}

TEST(PartitionBadInput, ShapeDiffersBetweenRanks)
{
  if (Size() < 2) GTEST_SKIP() << "needs two ranks";
  DDPartition p;
  PetscInt    s[2] = {1, Size()};
  if (Rank() == 1) {
    s[0] = Size();
    s[1] = 1;
  }
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DDT(DDPartitionSetShape(p, 2, s));
  DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_INCOMP, "differs between ranks");
  DDT(DDPartitionDestroy(&p));
}

/* The tester's crash on DDPartitionSetShape(p, 2, NULL); the getters' NULL outputs; a rank without a shape */
TEST(PartitionBadInput, NullArgumentsAndShapeMissingOnOneRank)
{
  DDPartition p;
  PetscInt    s[2] = {1, Size()}, n;
  PetscMPIInt r;
  DD_EXPECT_ERROR(DDPartitionCreate(PETSC_COMM_WORLD, NULL), PETSC_ERR_ARG_NULL, "DDPartitionCreate(): argument 2 (part) is NULL");
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DD_EXPECT_ERROR(DDPartitionSetShape(p, 2, NULL), PETSC_ERR_ARG_NULL, "DDPartitionSetShape(): argument 3 (shape) is NULL");
  DD_EXPECT_ERROR(DDPartitionSetShape(NULL, 2, s), PETSC_ERR_ARG_NULL, "argument 1 (part) is NULL");
  DDT(DDPartitionSetShape(p, 2, s));
  DDT(DDPartitionSetUp(p));
  DD_EXPECT_ERROR(DDPartitionGetOrder(p, NULL), PETSC_ERR_ARG_NULL, "DDPartitionGetOrder(): argument 2 (order) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetShape(p, NULL), PETSC_ERR_ARG_NULL, "argument 2 (shape) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetSize(p, NULL), PETSC_ERR_ARG_NULL, "argument 2 (size) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetIndex(p, NULL), PETSC_ERR_ARG_NULL, "argument 2 (index) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetCoordinates(p, NULL), PETSC_ERR_ARG_NULL, "argument 2 (coords) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetRankOfCoordinates(p, NULL, &r), PETSC_ERR_ARG_NULL, "argument 2 (coords) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetNeighbor(p, 1, 1, NULL), PETSC_ERR_ARG_NULL, "argument 4 (rank) is NULL");
  DD_EXPECT_ERROR(DDPartitionGetNeighbor(p, 2, 1, &r), PETSC_ERR_ARG_OUTOFRANGE, "Dimension 2 is outside [0, 2)");
  DD_EXPECT_ERROR(DDPartitionEqual(p, p, NULL), PETSC_ERR_ARG_NULL, "argument 3 (eq) is NULL");
  DD_EXPECT_ERROR(DDPartitionCheckBroadcast(p, NULL, NULL, NULL), PETSC_ERR_ARG_NULL, "argument 2 (py) is NULL");
  DDT(DDPartitionGetSize(p, &n));
  EXPECT_EQ(n, Size());
  DDT(DDPartitionDestroy(&p));
  /* one rank gives no shape: every rank fails (it used to fail alone, the others waiting) */
  if (Size() > 1) {
    DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
    if (Rank() != 1) DDT(DDPartitionSetShape(p, 2, s));
    DD_EXPECT_ERROR(DDPartitionSetUp(p), PETSC_ERR_ARG_INCOMP, "differs between ranks");
    DDT(DDPartitionDestroy(&p));
  }
}

TEST(Partition, FromOptions)
{
  DDPartition p;
  char        val[32];
  PetscSNPrintf(val, sizeof(val), "1,%d", Size());
  DDT(PetscOptionsSetValue(NULL, "-part1_partition_shape", val));
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &p));
  DDT(PetscObjectSetOptionsPrefix((PetscObject)p, "part1_"));
  DDT(DDPartitionSetFromOptions(p));
  DDT(DDPartitionSetUp(p));
  const PetscInt *shape;
  PetscInt        order;
  DDT(DDPartitionGetOrder(p, &order));
  DDT(DDPartitionGetShape(p, &shape));
  EXPECT_EQ(order, 2);
  EXPECT_EQ(shape[1], Size());
  DDT(DDPartitionDestroy(&p));
  DDT(PetscOptionsClearValue(NULL, "-part1_partition_shape"));
}
