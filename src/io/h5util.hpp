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
/* Writes t as dataset `path` of the tensor's global shape (intermediate groups created, an existing dataset replaced) */
PetscErrorCode H5WriteTensor(hid_t fid, const char *path, DDTensor t);
/* Reads dataset `path` into t; the dataset must exist, be floating point and have t's global shape */
/* Reads dataset `path` into t; the dataset must exist, be floating point and have t's global shape; its
   checksum, when it has one, must match (requirechecksum: it must have one) */
PetscErrorCode H5ReadTensor(hid_t fid, const char *file, const char *path, DDTensor t, bool requirechecksum);
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
} // namespace ddnn
