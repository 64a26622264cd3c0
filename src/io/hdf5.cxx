/*
  Parallel HDF5 I/O of distributed tensors: every rank selects the hyperslab of its own piece
  of the global dataset and the transfer is collective (H5FD_MPIO_COLLECTIVE), so the file
  holds the global tensor, whatever the partition, readable by h5py with the global shape.
*/
#include <io/h5util.hpp>
#include <tensor/layout.hpp>
#include <dddataset.h>
#include <cstdio>
#include <unistd.h>

using namespace ddnn;

namespace ddnn
{
static void Quiet()
{
  static bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported as PETSc errors */
    done = true;
  }
}

PetscErrorCode H5Open(MPI_Comm comm, const char *file, char mode, hid_t *fid)
{
  hid_t fapl;

  PetscFunctionBegin;
  Quiet();
  fapl = H5Pcreate(H5P_FILE_ACCESS);
  PetscCheck(fapl >= 0, PETSC_COMM_SELF, PETSC_ERR_LIB, "H5Pcreate failed");
  PetscCheck(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0, PETSC_COMM_SELF, PETSC_ERR_LIB, "H5Pset_fapl_mpio failed");
  if (mode == 'w') *fid = H5Fcreate(file, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  else if (mode == 'a') {
    PetscMPIInt rank;
    int         is = 0;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    if (!rank) is = access(file, F_OK) == 0;
    PetscCallMPI(MPI_Bcast(&is, 1, MPI_INT, 0, comm));
    if (is) *fid = H5Fopen(file, H5F_ACC_RDWR, fapl);
    else *fid = H5Fcreate(file, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
  } else *fid = H5Fopen(file, H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  DDCheckAll(comm, *fid >= 0, PETSC_ERR_FILE_OPEN, "Cannot %s HDF5 file \"%s\" (missing, truncated or not HDF5)", mode == 'r' ? "open" : "create", file);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5Close(MPI_Comm comm, hid_t fid)
{
  PetscFunctionBegin;
  DDCheckAll(comm, H5Fclose(fid) >= 0, PETSC_ERR_FILE_WRITE, "Closing an HDF5 file failed");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* this rank's hyperslab: start and count per dimension; empty when it holds no (primary) piece */
static bool Hyperslab(DDTensor t, bool primaryonly, std::vector<hsize_t> &start, std::vector<hsize_t> &count)
{
  start.assign(t->order, 0);
  count.assign(t->order, 0);
  if (!t->active || !t->layout.bulksize) return false;
  if (primaryonly)
    for (PetscInt k = 0; k < t->order; k++)
      if (t->replicated[k] && t->part->coords[k] != 0) return false;
  for (PetscInt k = 0; k < t->order; k++) {
    start[k] = (hsize_t)t->layout.start[k];
    count[k] = (hsize_t)t->layout.n[k];
  }
  return true;
}

PetscErrorCode H5WriteTensor(hid_t fid, const char *path, DDTensor t)
{
  MPI_Comm             comm = PetscObjectComm((PetscObject)t);
  std::vector<hsize_t> dims(t->order), start, count;
  hid_t                type = t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorWriteHDF5"));
  for (PetscInt k = 0; k < t->order; k++) dims[k] = (hsize_t)t->shape[k];
  if (H5Lexists(fid, path, H5P_DEFAULT) > 0) H5Ldelete(fid, path, H5P_DEFAULT);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t fspace = H5Screate_simple((int)t->order, dims.data(), NULL);
  hid_t dset   = H5Dcreate2(fid, path, type, fspace, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_WRITE, "Cannot create HDF5 dataset \"%s\"", path);
  bool                mine = Hyperslab(t, true, start, count);
  std::vector<char>   buf((mine ? t->layout.bulksize : 0) * (t->dtype == DD_FLOAT32 ? 4 : 8) + 1);
  hsize_t             nmem = mine ? (hsize_t)t->layout.bulksize : 0;
  hid_t               mspace = H5Screate_simple(1, &nmem, NULL);
  if (mine) {
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), NULL, count.data(), NULL);
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(t->layout, (T *)t->array, (T *)buf.data(), 0);
      return PETSC_SUCCESS;
    }));
  } else {
    H5Sselect_none(fspace);
    H5Sselect_none(mspace);
  }
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  herr_t st = H5Dwrite(dset, type, mspace, fspace, dxpl, buf.data());
  H5Pclose(dxpl);
  H5Sclose(mspace);
  H5Sclose(fspace);
  H5Dclose(dset);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_WRITE, "Writing HDF5 dataset \"%s\" failed", path);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5DatasetShape(MPI_Comm comm, hid_t fid, const char *file, const char *path, std::vector<PetscInt> &dims)
{
  PetscFunctionBegin;
  htri_t ex = H5Lexists(fid, path, H5P_DEFAULT) > 0 ? H5Oexists_by_name(fid, path, H5P_DEFAULT) : 0;
  DDCheckAll(comm, ex > 0, PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" has no dataset \"%s\"", file, path);
  hid_t dset = H5Dopen2(fid, path, H5P_DEFAULT);
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_UNEXPECTED, "\"%s\" in HDF5 file \"%s\" is not a dataset", path, file);
  hid_t   sp = H5Dget_space(dset);
  int     nd = H5Sget_simple_extent_ndims(sp);
  hsize_t d[32];
  H5Sget_simple_extent_dims(sp, d, NULL);
  dims.assign(d, d + (nd > 0 ? nd : 0));
  H5Sclose(sp);
  H5Dclose(dset);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static std::string DimsString(const std::vector<PetscInt> &v)
{
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? "x" : "") + std::to_string(v[i]);
  return s.empty() ? "()" : s;
}

PetscErrorCode H5ReadTensor(hid_t fid, const char *file, const char *path, DDTensor t)
{
  MPI_Comm              comm = PetscObjectComm((PetscObject)t);
  std::vector<PetscInt> fd, td(t->shape, t->shape + t->order);
  std::vector<hsize_t>  start, count;
  hid_t                 type = t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorReadHDF5"));
  PetscCall(H5DatasetShape(comm, fid, file, path, fd));
  DDCheckAll(comm, fd == td, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" has shape %s, the tensor %s", path, file, DimsString(fd).c_str(), DimsString(td).c_str());
  hid_t dset = H5Dopen2(fid, path, H5P_DEFAULT);
  hid_t ft   = H5Dget_type(dset);
  bool  isfl = H5Tget_class(ft) == H5T_FLOAT;
  H5Tclose(ft);
  if (!isfl) H5Dclose(dset);
  DDCheckAll(comm, isfl, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" is not floating point", path, file);
  hid_t             fspace = H5Dget_space(dset);
  bool              mine   = Hyperslab(t, false, start, count);
  hsize_t           nmem   = mine ? (hsize_t)t->layout.bulksize : 0;
  hid_t             mspace = H5Screate_simple(1, &nmem, NULL);
  std::vector<char> buf(nmem * (t->dtype == DD_FLOAT32 ? 4 : 8) + 1);
  if (mine) H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), NULL, count.data(), NULL);
  else {
    H5Sselect_none(fspace);
    H5Sselect_none(mspace);
  }
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  herr_t st = H5Dread(dset, type, mspace, fspace, dxpl, buf.data());
  H5Pclose(dxpl);
  H5Sclose(mspace);
  H5Sclose(fspace);
  H5Dclose(dset);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_READ, "Reading dataset \"%s\" of \"%s\" failed (truncated file?)", path, file);
  if (mine)
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(t->layout, (T *)t->array, (T *)buf.data(), 1);
      return PETSC_SUCCESS;
    }));
  PetscCall(PetscObjectStateIncrease((PetscObject)t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5WriteStringAttribute(hid_t fid, const char *name, const std::string &value)
{
  PetscFunctionBegin;
  if (H5Aexists(fid, name) > 0) H5Adelete(fid, name);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size() + 1);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a  = H5Acreate2(fid, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  PetscCheck(a >= 0, PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "Cannot create attribute %s", name);
  H5Awrite(a, type, value.c_str());
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(type);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5ReadStringAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, std::string &value)
{
  PetscFunctionBegin;
  DDCheckAll(comm, H5Aexists(fid, name) > 0, PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" has no attribute \"%s\" (not a ddnn checkpoint?)", file, name);
  hid_t  a    = H5Aopen(fid, name, H5P_DEFAULT);
  hid_t  type = H5Aget_type(a);
  size_t n    = H5Tget_size(type);
  std::vector<char> buf(n + 1, 0);
  hid_t  mt = H5Tcopy(H5T_C_S1);
  H5Tset_size(mt, n);
  H5Aread(a, mt, buf.data());
  H5Tclose(mt);
  H5Tclose(type);
  H5Aclose(a);
  value = buf.data();
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5WriteIntAttribute(hid_t fid, const char *name, PetscInt64 v)
{
  PetscFunctionBegin;
  if (H5Aexists(fid, name) > 0) H5Adelete(fid, name);
  hid_t     sp = H5Screate(H5S_SCALAR);
  hid_t     a  = H5Acreate2(fid, name, H5T_NATIVE_LLONG, sp, H5P_DEFAULT, H5P_DEFAULT);
  long long x  = v;
  H5Awrite(a, H5T_NATIVE_LLONG, &x);
  H5Aclose(a);
  H5Sclose(sp);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode H5ReadIntAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, PetscInt64 *v)
{
  PetscFunctionBegin;
  DDCheckAll(comm, H5Aexists(fid, name) > 0, PETSC_ERR_FILE_UNEXPECTED, "HDF5 file \"%s\" has no attribute \"%s\"", file, name);
  hid_t     a = H5Aopen(fid, name, H5P_DEFAULT);
  long long x = 0;
  H5Aread(a, H5T_NATIVE_LLONG, &x);
  H5Aclose(a);
  *v = x;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn

/*@C
  DDTensorWriteHDF5 - Writes a tensor as a dataset of its global shape, collectively

  Collective

  Input Parameters:
+ t       - the tensor
. file    - the HDF5 file
. dataset - the dataset's path ("group/name"; groups are created)
- append  - `PETSC_TRUE` adds to (or replaces the dataset in) an existing file, `PETSC_FALSE` truncates it

  Notes:
  Every rank writes the hyperslab of its piece (replicated dimensions: the copy at
  coordinate 0) in one collective MPI-IO transfer. h5py reads it with the global shape.

  Level: beginner

.seealso: `DDTensorReadHDF5()`, `DDDataset`
@*/
PetscErrorCode DDTensorWriteHDF5(DDTensor t, const char file[], const char dataset[], PetscBool append)
{
  hid_t fid;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorWriteHDF5"));
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorWriteHDF5"));
  PetscCall(H5Open(PetscObjectComm((PetscObject)t), file, append ? 'a' : 'w', &fid));
  PetscCall(H5WriteTensor(fid, dataset, t));
  PetscCall(H5Close(PetscObjectComm((PetscObject)t), fid));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDTensorReadHDF5 - Reads a dataset of the tensor's global shape into it, collectively

  Collective

  Notes:
  Each rank reads only its piece. Errors, on every rank, name the file and dataset when the
  file is missing or truncated, the dataset missing, not floating point, or of another shape.
  float32 and float64 datasets convert to the tensor's type.

  Level: beginner

.seealso: `DDTensorWriteHDF5()`
@*/
PetscErrorCode DDTensorReadHDF5(DDTensor t, const char file[], const char dataset[])
{
  hid_t fid;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorReadHDF5"));
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorReadHDF5"));
  PetscCall(H5Open(PetscObjectComm((PetscObject)t), file, 'r', &fid));
  PetscErrorCode ierr = H5ReadTensor(fid, file, dataset, t);
  if (ierr) H5Fclose(fid);
  PetscCall(ierr);
  PetscCall(H5Close(PetscObjectComm((PetscObject)t), fid));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDTensorWriteHDF5Slice - Writes a tensor as slice `index` of a dataset of samples

  Collective

  Input Parameters:
+ t       - the tensor: one sample, or a batch of one sample (leading dimension 1)
. file    - the HDF5 file (created if missing)
. dataset - the dataset, created with `total` slices if missing
. index   - the slice
- total   - the number of slices

  Notes:
  The dataset has shape (total, sample shape...), where the sample shape is t's shape, or t's
  shape without its leading dimension when that is 1 (a DMDA tensor (1, dof, ny, nx) gives
  samples (dof, ny, nx)). Data generators write sample after sample this way.

  Level: intermediate

.seealso: `DDDatasetReadBatch()`
@*/
PetscErrorCode DDTensorWriteHDF5Slice(DDTensor t, const char file[], const char dataset[], PetscInt index, PetscInt total)
{
  MPI_Comm             comm = PetscObjectComm((PetscObject)t);
  hid_t                fid, dset, fspace, mspace, dxpl;
  std::vector<hsize_t> s1, c1;
  hid_t                type = t->dtype == DD_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorWriteHDF5Slice"));
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorWriteHDF5Slice"));
  PetscCheck(index >= 0 && index < total, comm, PETSC_ERR_ARG_OUTOFRANGE, "Slice %" PetscInt_FMT " is outside [0, %" PetscInt_FMT ")", index, total);
  const PetscInt       drop = (t->order > 1 && t->shape[0] == 1) ? 1 : 0;
  std::vector<hsize_t> dims(t->order + 1 - drop), start(dims.size(), 0), count(dims.size(), 0);
  dims[0] = (hsize_t)total;
  for (PetscInt k = drop; k < t->order; k++) dims[k + 1 - drop] = (hsize_t)t->shape[k];
  PetscCall(H5Open(comm, file, 'a', &fid));
  if (H5Lexists(fid, dataset, H5P_DEFAULT) > 0) {
    std::vector<PetscInt> fd, td(dims.begin(), dims.end());
    PetscCall(H5DatasetShape(comm, fid, file, dataset, fd));
    DDCheckAll(comm, fd == td, PETSC_ERR_FILE_UNEXPECTED, "Dataset \"%s\" in \"%s\" exists with another shape", dataset, file);
    dset = H5Dopen2(fid, dataset, H5P_DEFAULT);
  } else {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple((int)dims.size(), dims.data(), NULL);
    dset     = H5Dcreate2(fid, dataset, type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    H5Pclose(lcpl);
  }
  DDCheckAll(comm, dset >= 0, PETSC_ERR_FILE_WRITE, "Cannot create dataset \"%s\" in \"%s\"", dataset, file);
  fspace           = H5Dget_space(dset);
  bool mine        = Hyperslab(t, true, s1, c1);
  hsize_t nmem     = mine ? (hsize_t)t->layout.bulksize : 0;
  mspace           = H5Screate_simple(1, &nmem, NULL);
  std::vector<char> buf(nmem * (t->dtype == DD_FLOAT32 ? 4 : 8) + 1);
  if (mine) {
    start[0] = (hsize_t)index;
    count[0] = 1;
    for (PetscInt k = drop; k < t->order; k++) {
      start[k + 1 - drop] = s1[k];
      count[k + 1 - drop] = c1[k];
    }
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), NULL, count.data(), NULL);
    PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkCOrderCopy<T>(t->layout, (T *)t->array, (T *)buf.data(), 0);
      return PETSC_SUCCESS;
    }));
  } else {
    H5Sselect_none(fspace);
    H5Sselect_none(mspace);
  }
  dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  herr_t st = H5Dwrite(dset, type, mspace, fspace, dxpl, buf.data());
  H5Pclose(dxpl);
  H5Sclose(mspace);
  H5Sclose(fspace);
  H5Dclose(dset);
  DDCheckAll(comm, st >= 0, PETSC_ERR_FILE_WRITE, "Writing slice %" PetscInt_FMT " of \"%s\" failed", index, dataset);
  PetscCall(H5Close(comm, fid));
  PetscFunctionReturn(PETSC_SUCCESS);
}
