/* Parallel HDF5 helpers shared by tensor I/O, datasets and checkpoints (C++ only). */
#pragma once
#include <ddnn/private/ddimpl.h>
#include <hdf5.h>
#include <string>
#include <vector>

namespace ddnn
{
/* Opens (mode 'r' or 'a') or creates ('w') a file with the MPI-IO driver; errors name the file on every rank */
PetscErrorCode H5Open(MPI_Comm comm, const char *file, char mode, hid_t *fid);
PetscErrorCode H5Close(MPI_Comm comm, hid_t fid);
/* Writes t as dataset `path` of the tensor's global shape (intermediate groups created, an existing dataset replaced) */
PetscErrorCode H5WriteTensor(hid_t fid, const char *path, DDTensor t);
/* Reads dataset `path` into t; the dataset must exist, be floating point and have t's global shape */
PetscErrorCode H5ReadTensor(hid_t fid, const char *file, const char *path, DDTensor t);
/* Reads the rank and dimensions of a dataset (collective on the file's communicator) */
PetscErrorCode H5DatasetShape(MPI_Comm comm, hid_t fid, const char *file, const char *path, std::vector<PetscInt> &dims);
PetscErrorCode H5WriteStringAttribute(hid_t fid, const char *name, const std::string &value);
PetscErrorCode H5ReadStringAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, std::string &value);
PetscErrorCode H5WriteIntAttribute(hid_t fid, const char *name, PetscInt64 v);
PetscErrorCode H5ReadIntAttribute(MPI_Comm comm, hid_t fid, const char *file, const char *name, PetscInt64 *v);
} // namespace ddnn
