/*
  DDDataset: mini-batches of samples from HDF5 datasets of shape (S, sample shape...), read
  collectively with every rank selecting only its piece of the batch tensor, in an order
  shuffled identically on every partition. Each rank keeps the pieces it reads in memory (up to a
  limit), so that the batches of a training loop are copied from memory, not read from the file.
*/
#include <ddnn/private/dddatasetimpl.h>
#include <io/h5util.hpp>
#include <tensor/layout.hpp>
#include <sys/ddsysimpl.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <numeric>
#include <sys/stat.h>
#include <sys/ddcxx.hpp>

using namespace ddnn;
using DSImpl = ddnn::DatasetImpl;

PetscClassId DD_DATASET_CLASSID;

namespace ddnn
{
/*
  The in-memory copy of the samples (issue 16, item 6). An entry holds, for one field and data type,
  all S samples of the range restricted to this rank's box of the sample dimensions (the batch
  tensor's layout start/n in dimensions 1..order-1), C order, rows in file order: what PyTorch's
  TensorDataset indexes. Batch tensors are looked up by their layout hash, which is identical on every
  rank, so a lookup that hits needs no communication and every rank hits or misses together. A layout
  seen the first time is decided collectively: an entry that already serves every rank (the same
  piece: the halo grew, or another batch size), else a new entry read with collective reads when it
  fits under the limit on every rank, else the file is read for every batch as before. Entries are
  kept until the cache is cleared (new file, fields, range or limit, or the dataset destroyed).
*/
struct DatasetCacheEntry {
  PetscInt          field;
  DDDataType        dtype;
  bool              empty; /* this rank held no entries of the tensor that filled it */
  PetscInt          order, start[DD_MAX_DIM], n[DD_MAX_DIM];
  size_t            rowbytes; /* one sample's piece */
  std::vector<char> data;     /* S rows of rowbytes, sample i of the range at row i */
};

struct DatasetCache {
  PetscInt64                                          limit = (PetscInt64)1024 << 20; /* bytes per rank */
  PetscInt64                                          bytes = 0;
  std::vector<DatasetCacheEntry>                      entries;
  std::map<std::pair<PetscInt, PetscInt64>, PetscInt> index; /* (field, layout hash) -> entry, or -1: read the file */
  std::vector<char>                                   scratch;
  void                                                Clear()
  {
    entries.clear();
    index.clear();
    bytes = 0;
    std::vector<char>().swap(scratch);
  }
};
} // namespace ddnn

using ddnn::DatasetCache;
using ddnn::DatasetCacheEntry;

/* the rank holds no entry of the batch tensor: it reads nothing (but joins the collective reads) */
static bool NeedsNothing(DDTensor t)
{
  return !t->active || t->layout.bulksize == 0;
}

/* the entry holds what this rank needs of t's samples */
static bool EntryServes(const DatasetCacheEntry &e, PetscInt field, DDTensor t)
{
  if (e.field != field || e.dtype != t->dtype || e.order != t->order) return false;
  if (NeedsNothing(t)) return true;
  if (e.empty) return false;
  for (PetscInt k = 1; k < t->order; k++)
    if (e.start[k] != t->layout.start[k] || e.n[k] != t->layout.n[k]) return false;
  return true;
}

PetscErrorCode DDDatasetInitializePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Dataset", &DD_DATASET_CLASSID));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetCreate - Creates a reader of samples in a (parallel) HDF5 file

  Collective

  Level: beginner

.seealso: `DDDatasetSetFile()`, `DDDatasetSetFields()`, `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetCreate(MPI_Comm comm, DDDataset *ds)
DD_CXX_TRY
{
  DDDataset d;

  PetscFunctionBegin;
  PetscValidPointer(ds, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(d, DD_DATASET_CLASSID, "DDDataset", "HDF5 samples", "DDDataset", comm, DDDatasetDestroy, NULL));
  d->impl        = new DSImpl;
  d->impl->cache = new DatasetCache;
  *ds            = d;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a set-up dataset whose file, fields or range change: closed, to be set up again (collective) */
static PetscErrorCode DatasetReset(DDDataset ds)
{
  DSImpl *I = ds->impl;

  PetscFunctionBegin;
  I->cache->Clear();
  if (I->fid >= 0) {
    hid_t fid = I->fid;
    I->fid    = -1;
    PetscCall(H5Close(PetscObjectComm((PetscObject)ds), fid));
  }
  I->shapes.clear();
  I->order.clear();
  I->S            = 0;
  ds->setupcalled = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDDatasetSetFile - The HDF5 file holding the samples

  Logically collective

  Options Database Key:
. -dataset_file <path> - the file

  Notes:
  On a set-up dataset a change takes effect at the next `DDDatasetSetUp()`, which opens and
  checks the file again; until then the dataset is not set up (reading a batch is an error). The
  value it already has changes nothing.

  Level: beginner

.seealso: `DDDatasetSetFields()`
@*/
PetscErrorCode DDDatasetSetFile(DDDataset ds, const char file[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  if (ds->impl->file == file) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DatasetReset(ds));
  ds->impl->file = file;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDDatasetSetFields - The datasets read together, each of shape (S, ...) with the same S

  Logically collective

  Options Database Key:
. -dataset_fields <input,target> - the datasets

  Notes:
  On a set-up dataset a change takes effect at the next `DDDatasetSetUp()`, which opens and
  checks the file again; until then the dataset is not set up (reading a batch is an error). The
  value it already has changes nothing.

  Level: beginner

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetSetFields(DDDataset ds, PetscInt n, const char *const fields[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  std::vector<std::string> f;
  for (PetscInt i = 0; i < n; i++) f.push_back(fields[i]);
  if (f == ds->impl->fields) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DatasetReset(ds));
  ds->impl->fields = f;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetSetRange - Uses samples [first, first + count) only (a train or test split)

  Logically collective

  Options Database Key:
. -dataset_range <first,count> - the range

  Notes:
  On a set-up dataset a change takes effect at the next `DDDatasetSetUp()`, which opens and
  checks the file again; until then the dataset is not set up (reading a batch is an error). The
  value it already has changes nothing.

  Level: intermediate

.seealso: `DDDatasetGetNumSamples()`
@*/
PetscErrorCode DDDatasetSetRange(DDDataset ds, PetscInt first, PetscInt count)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(first >= 0, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_OUTOFRANGE, "First sample %" PetscInt_FMT " must be non-negative", first);
  if (ds->impl->first == first && ds->impl->count == count) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DatasetReset(ds));
  ds->impl->first = first;
  ds->impl->count = count;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDDatasetSetOptionsPrefix - Prefix of the dataset's options

  Logically collective

  Level: intermediate

.seealso: `DDDatasetSetFromOptions()`
@*/
PetscErrorCode DDDatasetSetOptionsPrefix(DDDataset ds, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectSetOptionsPrefix((PetscObject)ds, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetSetFromOptions - Configures the dataset from the options database

  Collective

  Options Database Keys:
+ -dataset_file <path> - the file
. -dataset_fields <a,b> - the datasets
. -dataset_range <first,count> - the samples used
- -dataset_cache_limit <MiB> - memory per rank for the samples kept in memory (0: read every batch from the file)

  Level: beginner

.seealso: `DDDatasetSetFile()`, `DDDatasetSetCacheLimit()`
@*/
PetscErrorCode DDDatasetSetFromOptions(DDDataset ds)
DD_CXX_TRY
{
  char      file[PETSC_MAX_PATH_LEN], *fields[16];
  PetscInt  nf = 16, range[2] = {ds->impl->first, ds->impl->count}, nr = 2, mib = (PetscInt)(ds->impl->cache->limit >> 20);
  PetscBool flg, limflg;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscObjectOptionsBegin((PetscObject)ds);
  PetscCall(PetscOptionsString("-dataset_file", "HDF5 file", "DDDatasetSetFile", ds->impl->file.c_str(), file, sizeof(file), &flg));
  if (flg) ds->impl->file = file;
  PetscCall(PetscOptionsStringArray("-dataset_fields", "Datasets read together", "DDDatasetSetFields", fields, &nf, &flg));
  if (flg) {
    PetscCall(DDDatasetSetFields(ds, nf, (const char *const *)fields));
    for (PetscInt i = 0; i < nf; i++) PetscCall(PetscFree(fields[i]));
  }
  PetscCall(PetscOptionsIntArray("-dataset_range", "First sample and count", "DDDatasetSetRange", range, &nr, &flg));
  if (flg) PetscCall(DDDatasetSetRange(ds, range[0], nr > 1 ? range[1] : -1));
  PetscCall(PetscOptionsInt("-dataset_cache_limit", "Memory per rank (MiB) for the samples kept in memory; 0: read every batch from the file", "DDDatasetSetCacheLimit", mib, &mib, &limflg));
  PetscOptionsEnd();
  if (limflg) { /* checked after PetscOptionsEnd(), which frees the options object */
    PetscCheck(mib >= 0, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_OUTOFRANGE, "-dataset_cache_limit %" PetscInt_FMT " must be non-negative (MiB; 0 turns the cache off)", mib);
    PetscCall(DDDatasetSetCacheLimit(ds, (PetscInt64)mib << 20));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetSetUp - Opens the file and checks the datasets

  Collective

  Notes:
  Errors on every rank when the file is missing or not HDF5, a dataset is missing, or the
  datasets disagree on the number of samples, or the range exceeds it. A dataset written by
  `DDTensorWriteHDF5Slice()` whose last slice was never written (an interrupted generation) is
  refused as incomplete, and one with a content checksum is read once in full to verify it:
  a corrupted file is an error naming the file and dataset, not silently wrong data.

  Level: beginner

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetSetUp(DDDataset ds)
DD_CXX_TRY
{
  DSImpl  *I    = ds->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)ds);

  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  if (ds->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCheck(!I->file.empty(), comm, PETSC_ERR_ARG_WRONGSTATE, "Give the dataset a file (DDDatasetSetFile() or -dataset_file)");
  PetscCheck(!I->fields.empty(), comm, PETSC_ERR_ARG_WRONGSTATE, "Give the dataset its fields (DDDatasetSetFields() or -dataset_fields)");
  PetscCall(DatasetReset(ds)); /* a set-up that failed part way left the file open */
  PetscCall(H5Open(comm, I->file.c_str(), 'r', &I->fid));
  for (auto &f : I->fields) {
    std::vector<PetscInt> d;
    PetscCall(H5DatasetShape(comm, I->fid, I->file.c_str(), f.c_str(), d));
    PetscCheck(d.size() >= 1, comm, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of \"%s\" is a scalar; samples need a leading sample dimension", f.c_str(), I->file.c_str());
    PetscCheck(I->shapes.empty() || d[0] == I->shapes[0][0], comm, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" has %" PetscInt_FMT " samples but \"%s\" has %" PetscInt_FMT, f.c_str(), d[0], I->fields[0].c_str(), I->shapes[0][0]);
    I->shapes.push_back(d);
    PetscCall(H5VerifyDataset(comm, I->fid, I->file.c_str(), f.c_str())); /* complete, and its checksum matches */
  }
  PetscInt total = I->shapes[0][0];
  I->S           = I->count < 0 ? total - I->first : I->count;
  PetscCheck(I->first + I->S <= total && I->S > 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "Sample range [%" PetscInt_FMT ", %" PetscInt_FMT ") exceeds the %" PetscInt_FMT " samples of \"%s\"", I->first, I->first + I->S, total, I->file.c_str());
  I->order.resize(I->S);
  std::iota(I->order.begin(), I->order.end(), 0);
  ds->setupcalled = PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetGetNumSamples - Number of samples in the range

  Not collective

  Level: beginner

.seealso: `DDDatasetSetRange()`
@*/
PetscErrorCode DDDatasetGetNumSamples(DDDataset ds, PetscInt *n)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(ds->setupcalled, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  *n = ds->impl->S;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDDatasetGetSampleShape - Shape of one sample of a field (the dataset's shape without its leading S)

  Not collective

  Level: intermediate

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetGetSampleShape(DDDataset ds, PetscInt field, PetscInt *order, const PetscInt *shape[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(ds->setupcalled, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  PetscCheck(field >= 0 && field < (PetscInt)ds->impl->fields.size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Field %" PetscInt_FMT " does not exist", field);
  *order = (PetscInt)ds->impl->shapes[field].size() - 1;
  *shape = ds->impl->shapes[field].data() + 1;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetShuffle - Shuffles the sample order; the same seed gives the same order on any partition

  Not collective

  Notes:
  A Fisher-Yates shuffle driven by a counter-based generator: every rank computes the same
  permutation without communication.

  Level: beginner

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetShuffle(DDDataset ds, PetscInt64 seed)
DD_CXX_TRY
{
  DSImpl *I = ds->impl;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(ds->setupcalled, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  std::iota(I->order.begin(), I->order.end(), 0);
  for (PetscInt i = I->S - 1; i > 0; i--) {
    PetscInt j = (PetscInt)(UniformFromCounter((uint64_t)seed, (uint64_t)i) * (i + 1));
    if (j > i) j = i;
    std::swap(I->order[i], I->order[j]);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDDatasetGetOrder - The current sample order (indices relative to the range's first sample)

  Not collective

  Level: intermediate

.seealso: `DDDatasetShuffle()`
@*/
PetscErrorCode DDDatasetGetOrder(DDDataset ds, const PetscInt *order[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  *order = ds->impl->order.data();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetSetCacheLimit - Memory per rank for the samples kept in memory

  Logically collective

  Input Parameters:
+ ds    - the dataset
- bytes - the limit in bytes, per rank; 0 turns the cache off (every batch is read from the file)

  Options Database Key:
. -dataset_cache_limit <MiB> - the limit in MiB (default 1024)

  Notes:
  The first time `DDDatasetReadBatch()` reads a field into a batch tensor laid out in a way it has
  not seen, every rank reads its piece of ALL the samples of the range (its box of the sample
  dimensions, in the tensor's data type) with collective reads, and later batches of that field
  and piece are copied from memory in the shuffled order: no file access and no communication, as
  PyTorch's `TensorDataset` indexes a tensor in memory. Another piece (another partition or
  network reading the same dataset) adds an entry. A piece that would take the cache beyond
  `bytes` on some rank, or that cannot be allocated there, is not cached on any rank (the
  decision is collective): its batches are read from the file as with a limit of 0, and `-info`
  says so. The entries are freed when the limit, the file, the fields or the range change, and
  when the dataset is destroyed.

  The file is read once per piece: changes made to it afterwards are not seen. Errors in the
  file (a dataset that is not floating point, a failed read, a file cut short after
  `DDDatasetSetUp()` whose contiguous data no longer fits in it) are raised when the piece is
  read, naming the file and the dataset, on every rank; nothing of a piece that was not read
  completely is kept, and the next read tries again.

  A negative limit is an error.

  Level: intermediate

.seealso: `DDDatasetReadBatch()`, `DDDatasetGetCacheSize()`, `DDDatasetSetFromOptions()`
@*/
PetscErrorCode DDDatasetSetCacheLimit(DDDataset ds, PetscInt64 bytes)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(bytes >= 0, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_OUTOFRANGE, "The dataset cache limit %" PetscInt64_FMT " bytes must be non-negative (0 turns the cache off)", bytes);
  ds->impl->cache->Clear();
  ds->impl->cache->limit = bytes;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetGetCacheSize - Bytes of samples this rank keeps in memory

  Not collective

  Input Parameter:
. ds - the dataset

  Output Parameter:
. bytes - the size of the pieces held by this rank (0 when nothing is cached)

  Level: intermediate

.seealso: `DDDatasetSetCacheLimit()`
@*/
PetscErrorCode DDDatasetGetCacheSize(DDDataset ds, PetscInt64 *bytes)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscValidPointer(bytes, 2);
  *bytes = ds->impl->cache->bytes;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  Non-finite data is the data file's fault: rows[i] (of `per` entries of type dt, at buf + i * per * size)
  is sample file[i] of the file. The first such sample on any rank (its index in the file, and whether it
  holds a nan or an inf) is an error on every rank naming the file, the dataset and the sample; collective
*/
static PetscErrorCode CheckFiniteRows(DDDataset ds, PetscInt field, DDDataType dt, const char *buf, size_t nrows, size_t per, const std::function<PetscInt64(size_t)> &file)
{
  DSImpl  *I    = ds->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)ds);
  /* {first bad sample, what: 1 nan, 2 inf}: MIN of the sample, then the kind of that sample */
  PetscInt64 bad = INT64_MAX;
  int        kind = 0;

  PetscFunctionBegin;
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T    = decltype(z);
    const T *a = (const T *)buf;
    for (size_t r = 0; r < nrows; r++) {
      int k = 0;
      for (size_t i = 0; i < per && !k; i++) {
        const T v = a[r * per + i];
        if (v - v != 0) k = std::isnan(v) ? 1 : 2; /* v - v is nan for nan and inf */
      }
      if (k && file(r) < bad) bad = file(r), kind = k;
    }
    return PETSC_SUCCESS;
  }));
  PetscInt64 first;
  PetscCallMPI(MPI_Allreduce(&bad, &first, 1, MPIU_INT64, MPI_MIN, comm));
  if (first == INT64_MAX) PetscFunctionReturn(PETSC_SUCCESS);
  int k = bad == first ? kind : 0;
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &k, 1, MPI_INT, MPI_MAX, comm));
  SETERRQ(comm, PETSC_ERR_FP, "Dataset \"%s\" of \"%s\" holds %s in sample %" PetscInt64_FMT " (its index in the file; the first such sample read): the data must be finite", I->fields[field].c_str(), I->file.c_str(), k == 1 ? "a nan" : "an inf", first);
}

/* opens a field, failing on every rank when it is not floating point */
static PetscErrorCode OpenFloatField(DDDataset ds, PetscInt field, hid_t *dset)
{
  DSImpl     *I    = ds->impl;
  MPI_Comm    comm = PetscObjectComm((PetscObject)ds);
  const char *path = I->fields[field].c_str();

  PetscFunctionBegin;
  *dset     = H5Dopen2(I->fid, path, H5P_DEFAULT);
  hid_t ft  = *dset >= 0 ? H5Dget_type(*dset) : -1;
  bool isfl = ft >= 0 && H5Tget_class(ft) == H5T_FLOAT;
  if (ft >= 0) H5Tclose(ft);
  if (!isfl && *dset >= 0) {
    H5Dclose(*dset);
    *dset = -1;
  }
  DDCheckAll(comm, isfl, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of \"%s\" is not floating point", path, I->file.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Reads this rank's piece of all S samples of a field (rows in range order) into buf, with
  collective reads of at most ~64 MiB per rank each (the same number on every rank).
*/
static PetscErrorCode ReadPiece(DDDataset ds, PetscInt field, DDTensor t, size_t rowbytes, char *buf)
{
  DSImpl         *I    = ds->impl;
  MPI_Comm        comm = PetscObjectComm((PetscObject)ds);
  const DDLayout &L    = t->layout;
  const bool      none = NeedsNothing(t);
  hid_t           dset;

  PetscFunctionBegin;
  PetscCall(OpenFloatField(ds, field, &dset));
  { /* a file cut short after DDDatasetSetUp() reads as zeros through MPI-IO: the data must end inside the file */
    const haddr_t      off = H5Dget_offset(dset); /* HADDR_UNDEF unless contiguous */
    const hsize_t      sz  = H5Dget_storage_size(dset);
    unsigned long long fsize = ~0ull;
    PetscMPIInt        rank;
    struct stat        sb;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    if (!rank && !stat(I->file.c_str(), &sb)) fsize = (unsigned long long)sb.st_size;
    PetscCallMPI(MPI_Bcast(&fsize, 1, MPI_UNSIGNED_LONG_LONG, 0, comm));
    const bool whole = off == HADDR_UNDEF || (unsigned long long)off + sz <= fsize;
    if (!whole) H5Dclose(dset);
    DDCheckAll(comm, whole, PETSC_ERR_FILE_READ, "Dataset \"%s\" of \"%s\" is truncated: its data ends at byte %llu but the file has %llu bytes", I->fields[field].c_str(), I->file.c_str(), (unsigned long long)off + sz, fsize);
  }
  hid_t                fsp = H5Dget_space(dset);
  std::vector<hsize_t> st(t->order), ct(t->order);
  for (PetscInt k = 1; k < t->order; k++) {
    st[k] = (hsize_t)L.start[k];
    ct[k] = (hsize_t)L.n[k];
  }
  const PetscInt64 per = none ? 0 : (PetscInt64)(rowbytes / (t->dtype == DD_FLOAT32 ? 4 : 8));
  const PetscInt64 blk = none ? I->S : PetscMax((PetscInt64)1, ((PetscInt64)64 << 20) / (PetscInt64)rowbytes);
  PetscInt64       nblk = none ? 0 : (I->S + blk - 1) / blk, maxblk;
  PetscCallMPI(MPI_Allreduce(&nblk, &maxblk, 1, MPIU_INT64, MPI_MAX, comm));
  int   bad  = 0;
  char  none1;  /* the buffer of an empty read */
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  for (PetscInt64 b = 0; b < maxblk; b++) {
    const PetscInt64 a = none ? 0 : PetscMin(b * blk, (PetscInt64)I->S), e = none ? 0 : PetscMin(a + blk, (PetscInt64)I->S);
    hsize_t          nmem = (hsize_t)((e - a) * per);
    hid_t            msp  = H5Screate_simple(1, &nmem, NULL);
    if (nmem) {
      st[0] = (hsize_t)(I->first + a);
      ct[0] = (hsize_t)(e - a);
      H5Sselect_hyperslab(fsp, H5S_SELECT_SET, st.data(), NULL, ct.data(), NULL);
    } else {
      H5Sselect_none(fsp);
      H5Sselect_none(msp);
    }
    if (H5Dread(dset, t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, msp, fsp, dxpl, nmem ? buf + (size_t)a * rowbytes : &none1) < 0) bad = 1;
    H5Sclose(msp);
  }
  H5Pclose(dxpl);
  H5Sclose(fsp);
  H5Dclose(dset);
  DDCheckAll(comm, !bad, PETSC_ERR_FILE_READ, "Reading dataset \"%s\" of \"%s\" into memory failed (truncated file?)", I->fields[field].c_str(), I->file.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The cache entry serving field `field` into tensor t, or -1 (read the file). Local when the
  tensor's layout was seen before; collective (over the dataset's communicator) otherwise.
*/
static PetscErrorCode CacheLookup(DDDataset ds, PetscInt field, DDTensor t, PetscInt *entry)
{
  DSImpl       *I    = ds->impl;
  DatasetCache *C    = I->cache;
  MPI_Comm      comm = PetscObjectComm((PetscObject)ds);
  const char   *path = I->fields[field].c_str();

  PetscFunctionBegin;
  const auto key = std::make_pair(field, t->layouthash);
  const auto it  = C->index.find(key);
  if (it != C->index.end()) {
    *entry = it->second;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* a layout seen the first time: an entry that serves every rank, or a new one that fits on every rank */
  const DDLayout  &L    = t->layout;
  const bool       none = NeedsNothing(t);
  const size_t     es   = t->dtype == DD_FLOAT32 ? 4 : 8;
  size_t           rowb = none ? 0 : es * (size_t)(L.bulksize / L.n[0]);
  const PetscInt64 need = (PetscInt64)rowb * I->S;
  const PetscInt   nE   = (PetscInt)C->entries.size();
  std::vector<int> v(nE + 1);
  for (PetscInt e = 0; e < nE; e++) v[e] = EntryServes(C->entries[e], field, t);
  v[nE] = C->limit > 0 && need <= C->limit - C->bytes;
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), (PetscMPIInt)(nE + 1), MPI_INT, MPI_MIN, comm));
  for (PetscInt e = 0; e < nE; e++)
    if (v[e]) {
      C->index[key] = *entry = e;
      PetscCall(PetscInfo(ds, "Dataset \"%s\" of \"%s\": another batch tensor layout served by the samples already in memory\n", path, I->file.c_str()));
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  DatasetCacheEntry n;
  int               ok = v[nE];
  if (ok) { /* allocation can fail on one rank: then no rank caches */
    try {
      n.data.resize((size_t)need);
    } catch (const std::bad_alloc &) {
      ok = 0;
    } catch (const std::length_error &) {
      ok = 0;
    }
  }
  if (v[nE]) PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm));
  if (!ok) {
    C->index[key] = *entry = -1;
    PetscCall(PetscInfo(ds, "Dataset \"%s\" of \"%s\" is read from the file for every batch: this rank's piece of its %" PetscInt_FMT " samples takes %" PetscInt64_FMT " bytes, with %" PetscInt64_FMT " cached the limit of %" PetscInt64_FMT " bytes (-dataset_cache_limit) is exceeded or the memory could not be allocated on some rank\n", path, I->file.c_str(), I->S, need, C->bytes, C->limit));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  n.field    = field;
  n.dtype    = t->dtype;
  n.empty    = none;
  n.order    = t->order;
  n.rowbytes = rowb;
  for (PetscInt k = 0; k < t->order; k++) {
    n.start[k] = L.start[k];
    n.n[k]     = L.n[k];
  }
  PetscCall(ReadPiece(ds, field, t, rowb, n.data.data())); /* errors on every rank; nothing is kept */
  PetscCall(CheckFiniteRows(ds, field, t->dtype, n.data.data(), none ? 0 : (size_t)I->S, none ? 0 : rowb / es, [&](size_t r) { return (PetscInt64)(I->first + (PetscInt)r); }));
  C->entries.push_back(std::move(n));
  C->bytes += need;
  C->index[key] = *entry = nE;
  PetscCall(PetscInfo(ds, "Dataset \"%s\" of \"%s\": read this rank's piece of its %" PetscInt_FMT " samples into memory (%" PetscInt64_FMT " bytes, %" PetscInt64_FMT " cached in all)\n", path, I->file.c_str(), I->S, need, C->bytes));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* rows order[start + my rows] of a cache entry into the batch tensor's storage */
static PetscErrorCode ServeFromCache(DDDataset ds, const DatasetCacheEntry &e, PetscInt field, PetscInt start, DDTensor t)
{
  DSImpl         *I = ds->impl;
  const DDLayout &L = t->layout;

  PetscFunctionBegin;
  if (NeedsNothing(t)) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCheck(EntryServes(e, field, t), PETSC_COMM_SELF, PETSC_ERR_PLIB, "The cached piece of dataset \"%s\" does not match the batch tensor's layout", I->fields[field].c_str());
  const size_t rb     = e.rowbytes;
  const bool   direct = LayoutIsPlainContiguous(L); /* the storage is the bulk in C order: rows go in place */
  char        *dst;
  if (direct) dst = (char *)t->array;
  else {
    if (I->cache->scratch.size() < (size_t)L.n[0] * rb) I->cache->scratch.resize((size_t)L.n[0] * rb);
    dst = I->cache->scratch.data();
  }
  for (PetscInt r = 0; r < L.n[0]; r++) std::memcpy(dst + (size_t)r * rb, e.data.data() + (size_t)I->order[start + L.start[0] + r] * rb, rb);
  if (!direct)
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(L, (T *)t->array, (T *)dst, 1);
      return PETSC_SUCCESS;
    }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the batch read from the file: one collective hyperslab read of my rows (the cache is off or full) */
static PetscErrorCode ReadBatchFromFile(DDDataset ds, PetscInt field, PetscInt start, DDTensor t)
{
  DSImpl  *I    = ds->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)ds);
  hid_t    dset;

  PetscFunctionBegin;
  const char *path = I->fields[field].c_str();
  PetscCall(OpenFloatField(ds, field, &dset));
  hid_t           fsp = H5Dget_space(dset);
  const DDLayout &L   = t->layout;
  /* my rows, sorted by file position */
  std::vector<std::pair<PetscInt, PetscInt>> rows; /* (file index, row in my piece) */
  if (t->active && L.bulksize)
    for (PetscInt r = 0; r < L.n[0]; r++) rows.push_back({I->first + I->order[start + L.start[0] + r], r});
  std::sort(rows.begin(), rows.end());
  H5Sselect_none(fsp);
  std::vector<hsize_t> st(t->order), ct(t->order);
  for (PetscInt k = 1; k < t->order; k++) {
    st[k] = (hsize_t)L.start[k];
    ct[k] = (hsize_t)L.n[k];
  }
  for (auto &rw : rows) {
    st[0] = (hsize_t)rw.first;
    ct[0] = 1;
    H5Sselect_hyperslab(fsp, H5S_SELECT_OR, st.data(), NULL, ct.data(), NULL);
  }
  PetscInt          per  = rows.empty() ? 0 : L.bulksize / L.n[0];
  hsize_t           nmem = (hsize_t)(rows.size() * per);
  hid_t             msp  = H5Screate_simple(1, &nmem, NULL);
  size_t            es   = t->dtype == DD_FLOAT32 ? 4 : 8;
  std::vector<char> buf(nmem * es + 1), perm(nmem * es + 1);
  if (!nmem) H5Sselect_none(msp);
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  herr_t rst = H5Dread(dset, t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, msp, fsp, dxpl, buf.data());
  H5Pclose(dxpl);
  H5Sclose(msp);
  H5Sclose(fsp);
  H5Dclose(dset);
  DDCheckAll(comm, rst >= 0, PETSC_ERR_FILE_READ, "Reading a batch of \"%s\" from \"%s\" failed (truncated file?)", path, I->file.c_str());
  PetscCall(CheckFiniteRows(ds, field, t->dtype, buf.data(), rows.size(), (size_t)per, [&](size_t r) { return (PetscInt64)rows[r].first; }));
  /* file order -> batch order, then into the tensor's storage */
  for (size_t i = 0; i < rows.size(); i++) std::copy(buf.begin() + i * per * es, buf.begin() + (i + 1) * per * es, perm.begin() + (size_t)rows[i].second * per * es);
  if (nmem)
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(L, (T *)t->array, (T *)perm.data(), 1);
      return PETSC_SUCCESS;
    }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDDatasetReadBatch - Reads samples order[start .. start + n) of a field into a batch tensor

  Collective

  Input Parameters:
+ ds    - the dataset
. field - which dataset
. start - position in the (shuffled) order
. n     - batch size: the tensor's leading dimension
- t     - a tensor of shape (n, sample shape...), any partition

  Notes:
  Each rank fills only its piece (its rows of the batch and its box of the sample). The first
  batch read into a tensor of a new layout reads the rank's box of every sample of the field into
  memory (collectively, once; see `DDDatasetSetCacheLimit()`); the batches are then copied from
  memory in the shuffled order, without file access or communication, and the file is not read
  again (changes to it are not seen). A field holding a nan or an inf is an error on every rank
  naming the file, the dataset and the first such sample (checked when the samples are read into
  memory, or per batch when they are read from the file). When the cache is off (limit 0) or the piece does not fit,
  every batch is one collective hyperslab read of the rank's rows; the rows arrive in file order
  and are put back in batch order. A tensor on another communicator than the dataset's is always
  read from the file. A device tensor (`DDTensorSetMemType()`) gets the batch through a host tensor
  laid out alike (made once and kept while the layout stays), copied to the device in one transfer.

  Level: beginner

.seealso: `DDDatasetShuffle()`, `DDNetTrainEpoch()`, `DDDatasetSetCacheLimit()`
@*/
PetscErrorCode DDDatasetReadBatch(DDDataset ds, PetscInt field, PetscInt start, PetscInt n, DDTensor t)
DD_CXX_TRY
{
  DSImpl  *I    = ds->impl;
  MPI_Comm comm = PetscObjectComm((PetscObject)ds);

  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(ds->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  PetscCall(DDTensorCheckSetUp_Private(t, "DDDatasetReadBatch"));
  if (t->memtype != DD_MEMTYPE_HOST) { /* a device tensor: the batch is read on the host (a twin laid out alike, kept) and copied over once */
    if (!I->twin || I->twinof != t->layouthash || I->twin->dtype != t->dtype) {
      PetscCall(DDTensorDestroy(&I->twin));
      PetscCall(DDTensorDuplicateLayoutIn_Private(t, t->dtype, DD_MEMTYPE_HOST, &I->twin));
      I->twinof = t->layouthash;
    }
    PetscCall(DDDatasetReadBatch(ds, field, start, n, I->twin));
    PetscCall(DDTensorCopy(I->twin, t));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCheck(field >= 0 && field < (PetscInt)I->fields.size(), comm, PETSC_ERR_ARG_OUTOFRANGE, "Field %" PetscInt_FMT " does not exist", field);
  PetscCheck(start >= 0 && n > 0 && start + n <= I->S, comm, PETSC_ERR_ARG_OUTOFRANGE, "Batch [%" PetscInt_FMT ", %" PetscInt_FMT ") is outside the %" PetscInt_FMT " samples", start, start + n, I->S);
  const std::vector<PetscInt> &fs = I->shapes[field];
  bool                         ok = (PetscInt)fs.size() == t->order && t->shape[0] == n;
  for (PetscInt k = 1; ok && k < t->order; k++) ok = fs[k] == t->shape[k];
  if (!ok) { /* name both shapes: the batch tensor's sample shape and the file's */
    char ts[256], fsh[256];
    PetscCall(DDShapeToString_Private(t->order - 1, t->shape + 1, ts, sizeof(ts)));
    PetscCall(DDShapeToString_Private((PetscInt)fs.size() - 1, fs.data() + 1, fsh, sizeof(fsh)));
    SETERRQ(comm, PETSC_ERR_ARG_SIZ, "The samples of dataset \"%s\" in \"%s\" have shape %s, but the batch tensor holds samples of shape %s (%" PetscInt_FMT " of them, for a batch of %" PetscInt_FMT ")", I->fields[field].c_str(), I->file.c_str(), fsh, ts, t->shape[0], n);
  }
  for (PetscInt k = 1; k < t->order; k++) PetscCheck(!t->replicated[k] || t->part->shape[k] == 1, comm, PETSC_ERR_SUP, "Batch tensors with replicated dimensions are not supported");
  { /* from memory when the tensor lives on the dataset's communicator (its layout hash is then the same on every rank) */
    PetscMPIInt cmp;
    PetscInt    e = -1;
    PetscCallMPI(MPI_Comm_compare(comm, PetscObjectComm((PetscObject)t), &cmp));
    if (cmp == MPI_IDENT || cmp == MPI_CONGRUENT) PetscCall(CacheLookup(ds, field, t, &e));
    if (e >= 0) PetscCall(ServeFromCache(ds, I->cache->entries[e], field, start, t));
    else PetscCall(ReadBatchFromFile(ds, field, start, t));
  }
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetDestroy - Closes the file and destroys the dataset

  Collective

  Level: beginner

.seealso: `DDDatasetCreate()`
@*/
PetscErrorCode DDDatasetDestroy(DDDataset *ds)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (!*ds) PetscFunctionReturn(PETSC_SUCCESS);
  PetscValidHeaderSpecific(*ds, DD_DATASET_CLASSID, 1);
  if (--((PetscObject)(*ds))->refct > 0) {
    *ds = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if ((*ds)->impl->fid >= 0) PetscCall(H5Close(PetscObjectComm((PetscObject)*ds), (*ds)->impl->fid));
  delete (*ds)->impl->cache;
  PetscCall(DDTensorDestroy(&(*ds)->impl->twin));
  delete (*ds)->impl;
  PetscCall(PetscHeaderDestroy(ds));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
