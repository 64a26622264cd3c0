/* ddnn/private/dddatasetimpl.h - the DDDataset class struct (C++), for implementers of readers. */
#pragma once
#include <ddnn/private/ddimpl.h>
#include <dddataset.h>
#include <hdf5.h>
#include <string>
#include <vector>

namespace ddnn
{
struct DatasetCache; /* the in-memory copy of the pieces read (src/io/dataset.cxx) */

/* the file, the fields read, and the (shuffled) order of the samples */
struct DatasetImpl {
  std::string                        file;
  std::vector<std::string>           fields;
  std::vector<std::vector<PetscInt>> shapes; /* per field: (S, sample...) */
  PetscInt                           first = 0, count = -1, S = 0;
  std::vector<PetscInt>              order;  /* sample indices (relative to first), shuffled */
  hid_t                              fid = -1;
  DatasetCache                      *cache = nullptr;
  DDTensor                           twin  = NULL; /* batches for device tensors land here (host) and are copied over once */
  PetscInt64                         twinof = 0;   /* the layout hash of the device tensor it serves */
};
} // namespace ddnn

struct _DDDatasetOps {
  int dummy; /* one reader (HDF5) for now */
};

struct _p_DDDataset {
  PETSCHEADER(struct _DDDatasetOps);
  ddnn::DatasetImpl *impl;
  PetscBool          setupcalled;
};
