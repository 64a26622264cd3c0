/*
  DDDataset: mini-batches of samples from HDF5 datasets of shape (S, sample shape...), read
  collectively with every rank selecting only its piece of the batch tensor, in an order
  shuffled identically on every partition.
*/
#include <ddnn/private/dddatasetimpl.h>
#include <io/h5util.hpp>
#include <tensor/layout.hpp>
#include <sys/ddsysimpl.h>
#include <algorithm>
#include <numeric>
#include <sys/ddcxx.hpp>

using namespace ddnn;
using DSImpl = ddnn::DatasetImpl;

PetscClassId DD_DATASET_CLASSID;

PetscErrorCode DDDatasetInitializePackage(void)
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Dataset", &DD_DATASET_CLASSID));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDDatasetCreate - Creates a reader of samples in a (parallel) HDF5 file

  Collective

  Level: beginner

.seealso: `DDDatasetSetFile()`, `DDDatasetSetFields()`, `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetCreate(MPI_Comm comm, DDDataset *ds)
{
  DDDataset d;

  PetscFunctionBegin;
  PetscValidPointer(ds, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(d, DD_DATASET_CLASSID, "DDDataset", "HDF5 samples", "DDDataset", comm, DDDatasetDestroy, NULL));
  d->impl = new DSImpl;
  *ds     = d;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDDatasetSetFile - The HDF5 file holding the samples

  Logically collective

  Options Database Key:
. -dataset_file <path> - the file

  Level: beginner

.seealso: `DDDatasetSetFields()`
@*/
PetscErrorCode DDDatasetSetFile(DDDataset ds, const char file[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  ds->impl->file = file;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDDatasetSetFields - The datasets read together, each of shape (S, ...) with the same S

  Logically collective

  Options Database Key:
. -dataset_fields <input,target> - the datasets

  Level: beginner

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetSetFields(DDDataset ds, PetscInt n, const char *const fields[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  ds->impl->fields.clear();
  for (PetscInt i = 0; i < n; i++) ds->impl->fields.push_back(fields[i]);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDatasetSetRange - Uses samples [first, first + count) only (a train or test split)

  Logically collective

  Options Database Key:
. -dataset_range <first,count> - the range

  Level: intermediate

.seealso: `DDDatasetGetNumSamples()`
@*/
PetscErrorCode DDDatasetSetRange(DDDataset ds, PetscInt first, PetscInt count)
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(first >= 0, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_OUTOFRANGE, "First sample %" PetscInt_FMT " must be non-negative", first);
  ds->impl->first = first;
  ds->impl->count = count;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDDatasetSetOptionsPrefix - Prefix of the dataset's options

  Logically collective

  Level: intermediate

.seealso: `DDDatasetSetFromOptions()`
@*/
PetscErrorCode DDDatasetSetOptionsPrefix(DDDataset ds, const char prefix[])
{
  PetscFunctionBegin;
  PetscCall(PetscObjectSetOptionsPrefix((PetscObject)ds, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDDatasetSetFromOptions - Configures the dataset from the options database

  Collective

  Options Database Keys:
+ -dataset_file <path> - the file
. -dataset_fields <a,b> - the datasets
- -dataset_range <first,count> - the samples used

  Level: beginner

.seealso: `DDDatasetSetFile()`
@*/
PetscErrorCode DDDatasetSetFromOptions(DDDataset ds)
DD_CXX_TRY
{
  char      file[PETSC_MAX_PATH_LEN], *fields[16];
  PetscInt  nf = 16, range[2] = {ds->impl->first, ds->impl->count}, nr = 2;
  PetscBool flg;

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
  PetscOptionsEnd();
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
  PetscCall(H5Open(comm, I->file.c_str(), 'r', &I->fid));
  I->shapes.clear();
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
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(ds->setupcalled, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  *n = ds->impl->S;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDDatasetGetSampleShape - Shape of one sample of a field (the dataset's shape without its leading S)

  Not collective

  Level: intermediate

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDDatasetGetSampleShape(DDDataset ds, PetscInt field, PetscInt *order, const PetscInt *shape[])
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  PetscCheck(ds->setupcalled, PetscObjectComm((PetscObject)ds), PETSC_ERR_ARG_WRONGSTATE, "Call DDDatasetSetUp() first");
  PetscCheck(field >= 0 && field < (PetscInt)ds->impl->fields.size(), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Field %" PetscInt_FMT " does not exist", field);
  *order = (PetscInt)ds->impl->shapes[field].size() - 1;
  *shape = ds->impl->shapes[field].data() + 1;
  PetscFunctionReturn(PETSC_SUCCESS);
}

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
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(ds, DD_DATASET_CLASSID, 1);
  *order = ds->impl->order.data();
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
  Each rank reads only its piece (its rows of the batch and its box of the sample) with one
  collective hyperslab read; the rows arrive in file order and are put back in batch order.

  Level: beginner

.seealso: `DDDatasetShuffle()`, `DDNetTrainEpoch()`
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
  PetscCall(DDTensorCheckHost_Private(t, "DDDatasetReadBatch"));
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
  const char *path = I->fields[field].c_str();
  hid_t       dset = H5Dopen2(I->fid, path, H5P_DEFAULT);
  hid_t       fsp  = H5Dget_space(dset);
  hid_t       ft   = H5Dget_type(dset);
  bool        isfl = H5Tget_class(ft) == H5T_FLOAT;
  H5Tclose(ft);
  DDCheckAll(comm, isfl, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" of \"%s\" is not floating point", path, I->file.c_str());
  const DDLayout &L = t->layout;
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
  /* file order -> batch order, then into the tensor's storage */
  for (size_t i = 0; i < rows.size(); i++) std::copy(buf.begin() + i * per * es, buf.begin() + (i + 1) * per * es, perm.begin() + (size_t)rows[i].second * per * es);
  if (nmem)
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(L, (T *)t->array, (T *)perm.data(), 1);
      return PETSC_SUCCESS;
    }));
  PetscCall(PetscObjectStateIncrease((PetscObject)t));
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
{
  PetscFunctionBegin;
  if (!*ds) PetscFunctionReturn(PETSC_SUCCESS);
  PetscValidHeaderSpecific(*ds, DD_DATASET_CLASSID, 1);
  if (--((PetscObject)(*ds))->refct > 0) {
    *ds = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if ((*ds)->impl->fid >= 0) PetscCall(H5Close(PetscObjectComm((PetscObject)*ds), (*ds)->impl->fid));
  delete (*ds)->impl;
  PetscCall(PetscHeaderDestroy(ds));
  PetscFunctionReturn(PETSC_SUCCESS);
}
