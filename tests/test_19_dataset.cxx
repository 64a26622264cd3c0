/*
  The in-memory dataset (issue 16, item 6): DDDatasetReadBatch() serves the batches from the pieces
  each rank read once, and gives bitwise what reading the file for every batch gives (limit 0):
   - both data types, the float64 file read into float32 tensors too, two shuffled epochs;
   - spatial splits (H, W, uneven, an empty piece at 3 ranks), channel and batch splits, a tensor
     on one rank only (the others idle), halos and the channels-last format (the copy through
     BulkCOrderCopy), a sample range;
   - two pieces (two partitions, as two networks) reading one dataset in turns, and the same piece
     with another halo or batch size served by the entry already held;
   - a limit too small on some rank reads the file on every rank (and -info says so);
   - bad input: a negative limit (function and option), a field that is not floating point (at
     cache fill, on every rank, nothing kept), a truncated file (when opened, and when cut short
     after DDDatasetSetUp(): an error at cache fill, not zeros).
*/
#include "layertest.hpp"
#include <fstream>
#include <unistd.h>
#include <hdf5.h>
#include <sys/stat.h>

using namespace ddtest;

static const PetscInt S = 13, C = 3, H = 7, W = 5;

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test19_") + std::to_string(getppid()) + "_" + name;
}

static void Remove(const std::string &f)
{
  if (Rank() == 0) unlink(f.c_str());
  MPI_Barrier(PETSC_COMM_WORLD);
}

/* the file: "x" (S, C, H, W) in float64 and "y" (S, 1, H, W) in float32; their global values */
struct Data {
  std::string         file;
  std::vector<double> x, y;
};

static Data WriteData(const char *name)
{
  Data d;
  d.file          = Tmp(name);
  PetscInt   p    = Size() <= H ? Size() : 1;
  DDTensor   x    = MakeInput({{S, C, H, W}, {1, 1, p, 1}, {}, {}}, DD_FLOAT64, 11);
  DDTensor   y    = MakeInput({{S, 1, H, W}, {1, 1, 1, p <= W ? p : 1}, {}, {}}, DD_FLOAT32, 12);
  DDT(DDTensorWriteHDF5(x, d.file.c_str(), "x", PETSC_FALSE));
  DDT(DDTensorWriteHDF5(y, d.file.c_str(), "y", PETSC_TRUE));
  d.x = GatherAll(x);
  d.y = GatherAll(y);
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
  return d;
}

static DDDataset Open(const std::string &file, PetscInt64 limit, PetscInt first = 0, PetscInt count = -1)
{
  const char *fields[] = {"x", "y"};
  DDDataset   ds;
  DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
  DDT(DDDatasetSetFile(ds, file.c_str()));
  DDT(DDDatasetSetFields(ds, 2, fields));
  DDT(DDDatasetSetRange(ds, first, count));
  DDT(DDDatasetSetCacheLimit(ds, limit));
  DDT(DDDatasetSetUp(ds));
  return ds;
}

/* a batch tensor of B samples of `c` channels on a partition, with optional halo (H, W) */
static DDTensor Batch(PetscInt B, PetscInt c, const InputSpec &part, DDDataType dt, PetscInt halo = 0)
{
  InputSpec s = part;
  s.shape     = {B, c, H, W};
  DDTensor t  = MakeInput(s, dt, 99);
  if (halo) {
    PetscInt lo[4] = {0, 0, halo, halo}, hi[4] = {0, 0, halo, halo};
    DDT(DDTensorSetHalo(t, lo, hi));
  }
  return t;
}

static PetscInt64 CacheSize(DDDataset ds)
{
  PetscInt64 b;
  DDT(DDDatasetGetCacheSize(ds, &b));
  return b;
}

/* the expected batch: samples order[start..start+B) of the range [first, ...) of a field, in the tensor's type */
static std::vector<double> Expected(const std::vector<double> &g, PetscInt c, DDDataset ds, PetscInt first, PetscInt start, PetscInt B, DDDataType dt)
{
  const PetscInt *order;
  const PetscInt  per = c * H * W;
  DDT(DDDatasetGetOrder(ds, &order));
  std::vector<double> e((size_t)(B * per));
  for (PetscInt r = 0; r < B; r++)
    for (PetscInt i = 0; i < per; i++) {
      double v                   = g[(size_t)((first + order[start + r]) * per + i)];
      e[(size_t)(r * per + i)] = dt == DD_FLOAT32 ? (double)(float)v : v;
    }
  return e;
}

/* the partitions tried: name and spec (shape filled in by Batch()) */
static std::vector<std::pair<std::string, InputSpec>> Partitions()
{
  const PetscInt P = Size();
  std::vector<std::pair<std::string, InputSpec>> v;
  v.push_back({"one rank", {{}, {1, 1, 1, 1}, {}, {}}});
  v.push_back({"batch split", {{}, {P, 1, 1, 1}, {}, {}}});
  if (P <= H) v.push_back({"H split", {{}, {1, 1, P, 1}, {}, {}}});
  InputSpec w = {{}, {1, 1, 1, P}, {}, {}};
  if (P == 3) w.lx = {{}, {}, {}, {3, 0, 2}}; /* an empty piece on rank 1 */
  if (P <= W) v.push_back({P == 3 ? "W split with an empty piece" : "W split", w});
  if (P <= H) {
    InputSpec cl = {{}, {1, 1, P, 1}, {}, {}};
    cl.fmt       = DD_FORMAT_CHANNELS_LAST;
    v.push_back({"H split, channels-last", cl});
  }
  if (P <= 1) v.push_back({"C split", {{}, {1, P, 1, 1}, {}, {}}});
  if (P == 3) v.push_back({"C split", {{}, {1, P, 1, 1}, {}, {}}});
  return v;
}

/* this rank's box of the sample dimensions (C, H, W) of a batch tensor (0 when it holds no rows) */
static PetscInt64 PieceEntries(DDTensor t)
{
  PetscInt st[4], n[4];
  DDT(DDTensorGetCorners(t, st, n));
  return n[0] ? (PetscInt64)n[1] * n[2] * n[3] : 0;
}

TEST(Dataset, CachedEqualsFileReadsBitwiseOnEveryPartition)
{
  Data           d = WriteData("bitwise.h5");
  const PetscInt B = 4, first = 1, count = 11; /* a range, and a last partial batch dropped */
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    for (auto &pp : Partitions()) {
      for (PetscInt halo : {0, 1}) {
        if (halo && pp.first.find("empty") != std::string::npos) continue;
        SCOPED_TRACE(pp.first + (dt == DD_FLOAT32 ? ", float32" : ", float64") + (halo ? ", halo 1" : ""));
        DDDataset cached = Open(d.file, (PetscInt64)64 << 20, first, count), file = Open(d.file, 0, first, count);
        DDTensor  xc = Batch(B, C, pp.second, dt, halo), xf = Batch(B, C, pp.second, dt, halo);
        DDTensor  yc = Batch(B, 1, pp.second, dt, halo), yf = Batch(B, 1, pp.second, dt, halo);
        for (PetscInt64 seed : {3, 4}) {
          DDT(DDDatasetShuffle(cached, seed));
          DDT(DDDatasetShuffle(file, seed));
          for (PetscInt b = 0; b + B <= count; b += B) {
            DDT(DDDatasetReadBatch(cached, 0, b, B, xc));
            DDT(DDDatasetReadBatch(file, 0, b, B, xf));
            DDT(DDDatasetReadBatch(cached, 1, b, B, yc));
            DDT(DDDatasetReadBatch(file, 1, b, B, yf));
            auto gxc = GatherAll(xc), gyc = GatherAll(yc);
            EXPECT_TRUE(gxc == GatherAll(xf)) << "x, seed " << seed << ", batch at " << b;
            EXPECT_TRUE(gyc == GatherAll(yf)) << "y, seed " << seed << ", batch at " << b;
            EXPECT_TRUE(gxc == Expected(d.x, C, cached, first, b, B, dt)) << "x, seed " << seed << ", batch at " << b;
            EXPECT_TRUE(gyc == Expected(d.y, 1, cached, first, b, B, dt)) << "y, seed " << seed << ", batch at " << b;
          }
        }
        EXPECT_EQ(CacheSize(cached), (dt == DD_FLOAT32 ? 4 : 8) * count * (PieceEntries(xc) + PieceEntries(yc))) << "the pieces are held in memory";
        EXPECT_EQ(CacheSize(file), 0);
        for (DDTensor *t : {&xc, &xf, &yc, &yf}) DDT(DDTensorDestroy(t));
        DDT(DDDatasetDestroy(&cached));
        DDT(DDDatasetDestroy(&file));
      }
    }
  }
  Remove(d.file);
}

TEST(Dataset, TwoPiecesReadOneDatasetInTurns)
{
  Data           d = WriteData("pieces.h5");
  const PetscInt P = Size(), B = 4;
  if (P > H) GTEST_SKIP() << "H split needs at most 7 ranks";
  DDDataset cached = Open(d.file, (PetscInt64)64 << 20), file = Open(d.file, 0);
  /* two networks: one splits H, the other the batch; both read field x in float32 */
  DDTensor a = Batch(B, C, {{}, {1, 1, P, 1}, {}, {}}, DD_FLOAT32), b = Batch(B, C, {{}, {P, 1, 1, 1}, {}, {}}, DD_FLOAT32);
  DDTensor af = Batch(B, C, {{}, {1, 1, P, 1}, {}, {}}, DD_FLOAT32), bf = Batch(B, C, {{}, {P, 1, 1, 1}, {}, {}}, DD_FLOAT32);
  for (PetscInt64 seed : {5, 6}) {
    DDT(DDDatasetShuffle(cached, seed));
    DDT(DDDatasetShuffle(file, seed));
    for (PetscInt s = 0; s + B <= S; s += B) {
      DDT(DDDatasetReadBatch(cached, 0, s, B, a));
      DDT(DDDatasetReadBatch(cached, 0, s, B, b));
      DDT(DDDatasetReadBatch(file, 0, s, B, af));
      DDT(DDDatasetReadBatch(file, 0, s, B, bf));
      EXPECT_TRUE(GatherAll(a) == GatherAll(af)) << "H split, batch at " << s;
      EXPECT_TRUE(GatherAll(b) == GatherAll(bf)) << "batch split, batch at " << s;
    }
  }
  /* the batch split holds whole samples; on one rank both tensors have the same piece: one entry */
  const PetscInt64 both = 4 * S * (PieceEntries(a) + (P > 1 ? C * H * W : 0));
  EXPECT_EQ(CacheSize(cached), both);
  /* the same piece with a halo (a layer grew it), or in batches of 2: no new entry */
  DDTensor ah = Batch(B, C, {{}, {1, 1, P, 1}, {}, {}}, DD_FLOAT32, 2), a2 = Batch(2, C, {{}, {1, 1, P, 1}, {}, {}}, DD_FLOAT32);
  DDTensor a2f = Batch(2, C, {{}, {1, 1, P, 1}, {}, {}}, DD_FLOAT32);
  DDT(DDDatasetReadBatch(cached, 0, 4, B, ah));
  DDT(DDDatasetReadBatch(cached, 0, 6, 2, a2));
  DDT(DDDatasetReadBatch(file, 0, 4, B, af));
  DDT(DDDatasetReadBatch(file, 0, 6, 2, a2f));
  EXPECT_TRUE(GatherAll(ah) == GatherAll(af));
  EXPECT_TRUE(GatherAll(a2) == GatherAll(a2f));
  EXPECT_EQ(CacheSize(cached), both);
  /* float64 is another piece */
  DDTensor a64 = Batch(B, C, {{}, {1, 1, P, 1}, {}, {}}, DD_FLOAT64);
  DDT(DDDatasetReadBatch(cached, 0, 0, B, a64));
  EXPECT_EQ(CacheSize(cached), both + 8 * S * PieceEntries(a64));
  for (DDTensor *t : {&a, &b, &af, &bf, &ah, &a2, &a2f, &a64}) DDT(DDTensorDestroy(t));
  /* a new limit empties the cache */
  DDT(DDDatasetSetCacheLimit(cached, 1 << 20));
  EXPECT_EQ(CacheSize(cached), 0);
  DDT(DDDatasetDestroy(&cached));
  DDT(DDDatasetDestroy(&file));
  Remove(d.file);
}

TEST(Dataset, LimitTooSmallOnSomeRankReadsTheFileEverywhere)
{
  Data           d = WriteData("limit.h5");
  const PetscInt P = Size(), B = 4;
  if (P > H) GTEST_SKIP() << "H split needs at most 7 ranks";
  /* float64 pieces of x: S C (H rows of this rank) W 8 bytes; a limit under the largest piece (rank 0's) */
  InputSpec  hs    = {{}, {1, 1, P, 1}, {}, {}};
  DDTensor   x     = Batch(B, C, hs, DD_FLOAT64), xf = Batch(B, C, hs, DD_FLOAT64);
  PetscInt64 mine  = 8 * S * PieceEntries(x), largest;
  MPI_Allreduce(&mine, &largest, 1, MPIU_INT64, MPI_MAX, PETSC_COMM_WORLD);
  std::string info = Tmp("info");
  DDT(PetscInfoSetFile(info.c_str(), "w"));
  DDT(PetscInfoAllow(PETSC_TRUE));
  DDDataset small = Open(d.file, largest - 1), file = Open(d.file, 0);
  DDT(DDDatasetShuffle(small, 7));
  DDT(DDDatasetShuffle(file, 7));
  for (PetscInt s = 0; s + B <= S; s += B) {
    DDT(DDDatasetReadBatch(small, 0, s, B, x));
    DDT(DDDatasetReadBatch(file, 0, s, B, xf));
    EXPECT_TRUE(GatherAll(x) == GatherAll(xf)) << "batch at " << s;
  }
  DDT(PetscInfoAllow(PETSC_FALSE));
  DDT(PetscInfoSetFile(NULL, "w"));
  EXPECT_EQ(CacheSize(small), 0) << "a piece that fits on this rank but not on another is not cached here either";
  /* -info said so, with the numbers */
  std::string log;
  for (PetscMPIInt r = 0; r < P; r++) { /* PETSc writes one file per rank, <name>.<rank> */
    std::ifstream in(info + "." + std::to_string(r));
    log += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(log.find("is read from the file for every batch"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(largest) + " bytes"), std::string::npos) << log;
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0)
    for (PetscMPIInt r = 0; r < P; r++) unlink((info + "." + std::to_string(r)).c_str());
  /* with room for the largest piece, every rank caches */
  DDT(DDDatasetSetCacheLimit(small, largest));
  DDT(DDDatasetReadBatch(small, 0, 0, B, x));
  EXPECT_EQ(CacheSize(small), mine);
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&xf));
  DDT(DDDatasetDestroy(&small));
  DDT(DDDatasetDestroy(&file));
  Remove(d.file);
}

TEST(Dataset, OptionsAndBadInput)
{
  Data           d = WriteData("bad.h5");
  const PetscInt B = 4;
  DDDataset      ds;
  DDTensor       x = Batch(B, C, {{}, {Size(), 1, 1, 1}, {}, {}}, DD_FLOAT32);
  /* a negative limit */
  DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
  DD_EXPECT_ERROR(DDDatasetSetCacheLimit(ds, -1), PETSC_ERR_ARG_OUTOFRANGE, "must be non-negative");
  DDT(DDDatasetSetOptionsPrefix(ds, "t19_"));
  DDT(PetscOptionsSetValue(NULL, "-t19_dataset_cache_limit", "-5"));
  DD_EXPECT_ERROR(DDDatasetSetFromOptions(ds), PETSC_ERR_ARG_OUTOFRANGE, "-dataset_cache_limit -5 must be non-negative");
  /* the option in MiB: 0 turns the cache off, 1 holds the pieces */
  DDT(PetscOptionsSetValue(NULL, "-t19_dataset_cache_limit", "0"));
  DDT(PetscOptionsSetValue(NULL, "-t19_dataset_file", d.file.c_str()));
  DDT(PetscOptionsSetValue(NULL, "-t19_dataset_fields", "x,y"));
  DDT(DDDatasetSetFromOptions(ds));
  DDT(DDDatasetSetUp(ds));
  DDT(DDDatasetReadBatch(ds, 0, 0, B, x));
  EXPECT_EQ(CacheSize(ds), 0);
  DDT(PetscOptionsSetValue(NULL, "-t19_dataset_cache_limit", "1"));
  DDT(DDDatasetSetFromOptions(ds));
  DDT(DDDatasetReadBatch(ds, 0, 0, B, x));
  EXPECT_EQ(CacheSize(ds), 4 * S * C * H * W);
  DDT(PetscOptionsClearValue(NULL, "-t19_dataset_cache_limit"));
  DDT(PetscOptionsClearValue(NULL, "-t19_dataset_file"));
  DDT(PetscOptionsClearValue(NULL, "-t19_dataset_fields"));
  DDT(DDDatasetDestroy(&ds));
  /* a field that is not floating point: the error at cache fill names it and the file, on every rank, and nothing is kept */
  if (Rank() == 0) {
    hid_t            f    = H5Fopen(d.file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t          dims[4] = {(hsize_t)S, (hsize_t)C, (hsize_t)H, (hsize_t)W};
    hid_t            sp   = H5Screate_simple(4, dims, NULL);
    hid_t            di   = H5Dcreate2(f, "ints", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int> v((size_t)(S * C * H * W), 1);
    H5Dwrite(di, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(di);
    H5Sclose(sp);
    H5Fclose(f);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  const char *ints[] = {"ints"};
  DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
  DDT(DDDatasetSetFile(ds, d.file.c_str()));
  DDT(DDDatasetSetFields(ds, 1, ints));
  DDT(DDDatasetSetUp(ds));
  for (int again = 0; again < 2; again++) {
    std::string    m;
    PetscErrorCode e = Catch([&]() { return DDDatasetReadBatch(ds, 0, 0, B, x); }, &m);
    EXPECT_EQ(e, PETSC_ERR_FILE_UNEXPECTED) << m;
    EXPECT_NE(m.find("\"ints\""), std::string::npos) << m;
    EXPECT_NE(m.find("not floating point"), std::string::npos) << m;
    EXPECT_NE(m.find(d.file), std::string::npos) << m;
    EXPECT_EQ(CacheSize(ds), 0);
  }
  DDT(DDDatasetDestroy(&ds));
  /* a truncated file: refused when opened, naming it */
  std::string trunc = Tmp("trunc.h5");
  if (Rank() == 0) {
    std::ifstream in(d.file, std::ios::binary);
    std::string   bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(trunc, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), (std::streamsize)(bytes.size() * 2 / 3));
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  const char *fields[] = {"x"};
  DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
  DDT(DDDatasetSetFile(ds, trunc.c_str()));
  DDT(DDDatasetSetFields(ds, 1, fields));
  std::string    m;
  PetscErrorCode e = Catch([&]() { return DDDatasetSetUp(ds); }, &m);
  EXPECT_NE(e, 0) << "a truncated file must be refused";
  EXPECT_NE(m.find(trunc), std::string::npos) << m;
  DDT(DDDatasetDestroy(&ds));
  DDT(DDTensorDestroy(&x));
  Remove(trunc);
  Remove(d.file);
}

/* a nan or an inf in the data: an error on every rank naming the file, the dataset and the first such sample
   (when the samples are read into memory, and per batch when they are read from the file); nothing is kept */
TEST(Dataset, NonFiniteDataIsAnErrorNamingTheSample)
{
  Data        d    = WriteData("nonfinite.h5");
  const char *nm[] = {"nanx", "infx"};
  if (Rank() == 0) { /* "nanx" holds a nan in sample 9 (float64), "infx" a -inf in samples 4 and 11 (float32), written without checksum */
    hid_t               f       = H5Fopen(d.file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t             dims[4] = {(hsize_t)S, (hsize_t)C, (hsize_t)H, (hsize_t)W};
    hid_t               sp      = H5Screate_simple(4, dims, NULL);
    const size_t        per     = (size_t)(C * H * W);
    std::vector<double> v((size_t)S * per, 0.5);
    v[9 * per + per / 2] = NAN;
    hid_t di             = H5Dcreate2(f, nm[0], H5T_NATIVE_DOUBLE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(di, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(di);
    std::vector<float> w((size_t)S * per, 0.25f);
    w[4 * per + per - 1] = w[11 * per] = -INFINITY;
    di                   = H5Dcreate2(f, nm[1], H5T_NATIVE_FLOAT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(di, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
    H5Dclose(di);
    H5Sclose(sp);
    H5Fclose(f);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  for (auto &pp : Partitions())
    for (PetscInt64 limit : {(PetscInt64)64 << 20, (PetscInt64)0}) {
      for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
        DDDataset ds;
        DDTensor  x = Batch(4, C, pp.second, dt);
        DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
        DDT(DDDatasetSetFile(ds, d.file.c_str()));
        DDT(DDDatasetSetFields(ds, 2, nm));
        DDT(DDDatasetSetCacheLimit(ds, limit));
        DDT(DDDatasetSetUp(ds));
        const std::string where = pp.first + (limit ? ", cached" : ", from the file") + (dt == DD_FLOAT32 ? ", float32" : ", float64");
        for (int again = 0; again < 2; again++) {
          std::string    m;
          PetscErrorCode e = Catch([&]() { return DDDatasetReadBatch(ds, 0, limit ? 0 : 8, 4, x); }, &m);
          EXPECT_EQ(e, PETSC_ERR_FP) << where << ": " << m;
          EXPECT_NE(m.find("Dataset \"nanx\" of \"" + d.file + "\" holds a nan in sample 9"), std::string::npos) << where << ": " << m;
          EXPECT_EQ(CacheSize(ds), 0) << where;
          e = Catch([&]() { return DDDatasetReadBatch(ds, 1, 0, 4, x); }, &m);
          EXPECT_EQ(e, limit ? PETSC_ERR_FP : 0) << where << ": " << m; /* from the file: samples 0-3 are finite */
          if (limit) EXPECT_NE(m.find("Dataset \"infx\" of \"" + d.file + "\" holds an inf in sample 4"), std::string::npos) << where << ": " << m;
        }
        if (!limit) { /* the batches without the non-finite samples read; the one with sample 11 does not */
          DDT(DDDatasetReadBatch(ds, 0, 0, 4, x));
          std::string    m;
          PetscErrorCode e = Catch([&]() { return DDDatasetReadBatch(ds, 1, 9, 4, x); }, &m);
          EXPECT_EQ(e, PETSC_ERR_FP) << where << ": " << m;
          EXPECT_NE(m.find("holds an inf in sample 11"), std::string::npos) << where << ": " << m;
        }
        DDT(DDDatasetDestroy(&ds));
        /* a range without them is read */
        DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
        DDT(DDDatasetSetFile(ds, d.file.c_str()));
        DDT(DDDatasetSetFields(ds, 2, nm));
        DDT(DDDatasetSetRange(ds, 5, 4));
        DDT(DDDatasetSetCacheLimit(ds, limit));
        DDT(DDDatasetSetUp(ds));
        DDT(DDDatasetReadBatch(ds, 0, 0, 4, x));
        DDT(DDDatasetReadBatch(ds, 1, 0, 4, x));
        DDT(DDDatasetDestroy(&ds));
        DDT(DDTensorDestroy(&x));
      }
    }
  Remove(d.file);
}

TEST(Dataset, FileTruncatedAfterSetUpIsAnErrorAtCacheFill)
{
  /* MPI-IO reads the missing bytes as zeros: the fill checks that the data ends inside the file */
  Data      d  = WriteData("late.h5");
  DDDataset ds = Open(d.file, (PetscInt64)64 << 20);
  DDTensor  x  = Batch(4, C, {{}, {Size(), 1, 1, 1}, {}, {}}, DD_FLOAT64);
  if (Rank() == 0) {
    struct stat sb;
    ASSERT_EQ(stat(d.file.c_str(), &sb), 0);
    ASSERT_EQ(truncate(d.file.c_str(), sb.st_size * 2 / 3), 0);
  }
  MPI_Barrier(PETSC_COMM_WORLD);
  for (int again = 0; again < 2; again++) {
    std::string    m;
    PetscErrorCode e = Catch([&]() { return DDDatasetReadBatch(ds, 0, 0, 4, x); }, &m);
    EXPECT_EQ(e, PETSC_ERR_FILE_READ) << m;
    EXPECT_NE(m.find("\"x\" of \"" + d.file + "\" is truncated"), std::string::npos) << m;
    EXPECT_EQ(CacheSize(ds), 0) << "nothing of a piece not read completely is kept";
  }
  DDT(DDTensorDestroy(&x));
  DDT(DDDatasetDestroy(&ds));
  Remove(d.file);
}

/* the file, the fields or the range changed on a set-up dataset: set up again, they take effect (they used to be ignored, or to read past the fields) */
TEST(Dataset, ChangesAfterSetUpTakeEffectAtTheNextSetUp)
{
  Data            a = WriteData("chg_a.h5"), b = WriteData("chg_b.h5");
  const PetscInt  P = Size() <= H ? Size() : 1;
  const InputSpec part{{}, {1, 1, P, 1}, {}, {}};
  DDDataset       ds = Open(a.file, 1 << 20);
  DDTensor        t  = Batch(2, C, part, DD_FLOAT64), u = Batch(2, 1, part, DD_FLOAT64);
  PetscInt        n;
  DDT(DDDatasetReadBatch(ds, 0, 0, 2, t));
  /* a range: the dataset is not set up until DDDatasetSetUp() */
  DDT(DDDatasetSetRange(ds, 3, 2));
  DD_EXPECT_ERROR(DDDatasetGetNumSamples(ds, &n), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  DD_EXPECT_ERROR(DDDatasetReadBatch(ds, 0, 0, 2, t), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  DDT(DDDatasetSetUp(ds));
  DDT(DDDatasetGetNumSamples(ds, &n));
  EXPECT_EQ(n, 2);
  DDT(DDDatasetReadBatch(ds, 0, 0, 2, t));
  EXPECT_EQ(GatherAll(t), Expected(a.x, C, ds, 3, 0, 2, DD_FLOAT64));
  DD_EXPECT_ERROR(DDDatasetReadBatch(ds, 0, 1, 2, t), PETSC_ERR_ARG_OUTOFRANGE, "is outside the 2 samples");
  /* another file */
  DDT(DDDatasetSetFile(ds, b.file.c_str()));
  DDT(DDDatasetSetUp(ds));
  DDT(DDDatasetReadBatch(ds, 0, 0, 2, t));
  EXPECT_EQ(GatherAll(t), Expected(b.x, C, ds, 3, 0, 2, DD_FLOAT64)) << "the batch came from the previous file";
  /* fewer fields, then more again */
  const char *only[] = {"y"}, *both[] = {"x", "y"};
  DDT(DDDatasetSetFields(ds, 1, only));
  DDT(DDDatasetSetUp(ds));
  DDT(DDDatasetReadBatch(ds, 0, 0, 2, u));
  EXPECT_EQ(GatherAll(u), Expected(b.y, 1, ds, 3, 0, 2, DD_FLOAT64));
  DD_EXPECT_ERROR(DDDatasetReadBatch(ds, 1, 0, 2, t), PETSC_ERR_ARG_OUTOFRANGE, "Field 1 does not exist");
  DDT(DDDatasetSetFields(ds, 2, both));
  DDT(DDDatasetSetRange(ds, 0, -1));
  DDT(DDDatasetSetUp(ds));
  DDT(DDDatasetGetNumSamples(ds, &n));
  EXPECT_EQ(n, S);
  DDT(DDDatasetReadBatch(ds, 1, S - 2, 2, u));
  EXPECT_EQ(GatherAll(u), Expected(b.y, 1, ds, 0, S - 2, 2, DD_FLOAT64));
  /* a set-up that failed (a missing file) leaves nothing open; the next one succeeds */
  DDT(DDDatasetSetFile(ds, Tmp("chg_missing.h5").c_str()));
  EXPECT_NE(Catch([&]() { return DDDatasetSetUp(ds); }), 0);
  DDT(DDDatasetSetFile(ds, a.file.c_str()));
  DDT(DDDatasetSetUp(ds));
  DDT(DDDatasetReadBatch(ds, 0, 0, 2, t));
  EXPECT_EQ(GatherAll(t), Expected(a.x, C, ds, 0, 0, 2, DD_FLOAT64));
  DDT(DDTensorDestroy(&t));
  DDT(DDTensorDestroy(&u));
  DDT(DDDatasetDestroy(&ds));
  EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE), 0);
  Remove(a.file);
  Remove(b.file);
}
