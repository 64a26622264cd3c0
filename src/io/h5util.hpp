/* Parallel HDF5 helpers shared by tensor I/O, datasets and checkpoints (C++ only). */
#pragma once
#include <ddnn/private/ddimpl.h>
#include <hdf5.h>
#include <string>
#include <vector>
#include <cstdint>

namespace ddnn
{
/* Opens (mode 'r' or 'a') or creates ('w') a file with the MPI-IO driver; errors name the file on every rank */
PetscErrorCode H5Open(MPI_Comm comm, const char *file, char mode, hid_t *fid);
PetscErrorCode H5Close(MPI_Comm comm, hid_t fid);
/* closes a file after an error: the datasets, groups, types and attributes left open in it first, then the file, ignoring failures */
void           H5CloseAfterError(hid_t fid);
/* removes "<file>.tmp" after a failed write into it (rank 0); it is ours: H5Open() created or truncated it */
PetscErrorCode H5RemoveTemporary(MPI_Comm comm, const char *tmp);

/* Writes t as dataset `path` of the tensor's global shape (intermediate groups created, an existing dataset replaced) */
PetscErrorCode H5WriteTensor(hid_t fid, const char *path, DDTensor t);
/* Reads dataset `path` into t; the dataset must exist, be floating point and have t's global shape; its
   checksum, when it has one, must match (requirechecksum: it must have one); requirefinite: a nan or an
   inf, or a float64 value beyond float32's range read into a float32 tensor, is an error */
PetscErrorCode H5ReadTensor(hid_t fid, const char *file, const char *path, DDTensor t, bool requirechecksum, bool requirefinite = false);
/* errors naming `path` when it exists and is not a regular file (nolink: or is a symbolic link) */
PetscErrorCode CheckRegularOrMissing(MPI_Comm comm, const char *path, bool nolink);
/* fsync tmp, rename it to file, fsync the directory (rank 0); refuses non-regular paths */
PetscErrorCode FileCommit(MPI_Comm comm, const char *tmp, const char *file);
/* content checksums: the sum mod 2^64 of per-entry hashes of (global C-order index, value bits) */
uint64_t       HashBox(const void *buf, size_t es, const std::vector<hsize_t> &dims, const std::vector<hsize_t> &start, const std::vector<hsize_t> &count);
PetscErrorCode H5DatasetChecksum(MPI_Comm comm, hid_t dset, uint64_t *sum);
PetscErrorCode H5WriteChecksum(hid_t obj, uint64_t sum);
/* errors when the dataset is marked incomplete or its stored checksum does not match its contents */
PetscErrorCode H5VerifyDataset(MPI_Comm comm, hid_t fid, const char *file, const char *path);
/* Reads the rank and dimensions of a dataset (collective on the file's communicator) */
PetscErrorCode H5DatasetShape(MPI_Comm comm, hid_t fid, const char *file, const char *path, std::vector<PetscInt> &dims);
PetscErrorCode H5WriteStringAttribute(hid_t fid, const char *name, const std::string &value);
PetscErrorCode H5ReadStringAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, std::string &value);
PetscErrorCode H5WriteIntAttribute(hid_t fid, const char *name, PetscInt64 v);
PetscErrorCode H5ReadIntAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, PetscInt64 *v);
/*
  Runs body(fid) on `file` opened in `mode` (H5Open()) and closes it. When body fails the file is
  closed all the same (H5CloseAfterError()) and body's error returned: a handle left open would
  flush its stale metadata into whatever file of that name exists when HDF5 shuts down.
*/
template <class F>
PetscErrorCode H5WithFile(MPI_Comm comm, const char *file, char mode, F body)
{
  hid_t fid;

  PetscFunctionBegin;
  PetscCall(H5Open(comm, file, mode, &fid));
  PetscErrorCode ierr = body(fid);
  if (ierr) {
    H5CloseAfterError(fid);
    PetscCall(ierr);
  }
  PetscCall(H5Close(comm, fid));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Writes `file` through "<file>.tmp" (both must be regular files or missing): body(fid) fills the
  temporary, which is then synced and renamed over `file` (FileCommit()); when body fails the
  temporary is removed and `file` is left as it was
*/
template <class F>
PetscErrorCode H5WriteAtomically(MPI_Comm comm, const char *file, F body)
{
  const std::string tmp = std::string(file) + ".tmp";

  PetscFunctionBegin;
  PetscCall(CheckRegularOrMissing(comm, file, true));
  PetscCall(CheckRegularOrMissing(comm, tmp.c_str(), true));
  PetscErrorCode ierr = H5WithFile(comm, tmp.c_str(), 'w', body);
  if (ierr) {
    PetscCall(H5RemoveTemporary(comm, tmp.c_str()));
    PetscCall(ierr);
  }
  PetscCall(FileCommit(comm, tmp.c_str(), file));
  PetscFunctionReturn(PETSC_SUCCESS);
}
/*
  Tensors read from a file before they replace a network's, so that a load failing part way
  changes nothing, or kept to be put back: duplicates of the tensors given (t[i] of to[i]),
  destroyed with the holder; Commit() copies each into the tensor it was made from
*/
struct Copies {
  std::vector<DDTensor> t, to;
  Copies() = default;
  Copies(const Copies &) = delete;
  Copies &operator=(const Copies &) = delete;
  ~Copies()
  {
    for (auto &x : t) (void)DDTensorDestroy(&x);
  }
  /* dataset `path` (of u's shape) read into a new duplicate of u; a network's parameters, buffers and
     optimizer state: its values must be finite */
  PetscErrorCode ReadFrom(hid_t fid, const char *file, const char *path, DDTensor u, bool requirechecksum = true)
  {
    PetscFunctionBegin;
    PetscCall(Add(u));
    PetscCall(H5ReadTensor(fid, file, path, t.back(), requirechecksum, true));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* a copy of u's values */
  PetscErrorCode Keep(DDTensor u)
  {
    PetscFunctionBegin;
    PetscCall(Add(u));
    PetscCall(DDTensorCopy(u, t.back()));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Commit()
  {
    PetscFunctionBegin;
    for (size_t i = 0; i < t.size(); i++) PetscCall(DDTensorCopy(t[i], to[i]));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  PetscErrorCode Add(DDTensor u)
  {
    DDTensor c;

    PetscFunctionBegin;
    PetscCall(DDTensorDuplicate(u, &c));
    t.push_back(c);
    to.push_back(u);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
} // namespace ddnn
