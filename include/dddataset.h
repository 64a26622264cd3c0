/*
  dddataset.h - parallel HDF5 I/O of distributed tensors, datasets of samples, checkpoints.

  Tensors are written and read collectively (HDF5's MPI-IO driver), each rank selecting the
  hyperslab of its own piece, so that files hold the global tensor (readable by h5py with the
  global shape) whatever the partition. A DDDataset reads mini-batches of samples from datasets
  of shape (S, ...), shuffled identically on every partition; each rank reads its piece of the
  samples once and serves the batches from memory (up to DDDatasetSetCacheLimit()). Checkpoints hold parameters and
  optimizer state in a partition-independent layout and are written to a temporary file that
  is renamed once complete.
*/
#pragma once
#include <ddnet.h>
#include <ddoptimizer.h>

PETSC_EXTERN PetscErrorCode DDTensorWriteHDF5(DDTensor, const char[], const char[], PetscBool);
PETSC_EXTERN PetscErrorCode DDTensorReadHDF5(DDTensor, const char[], const char[]);
PETSC_EXTERN PetscErrorCode DDTensorWriteHDF5Slice(DDTensor, const char[], const char[], PetscInt, PetscInt);

typedef struct _p_DDDataset *DDDataset;
PETSC_EXTERN PetscClassId DD_DATASET_CLASSID;

PETSC_EXTERN PetscErrorCode DDDatasetCreate(MPI_Comm, DDDataset *);
PETSC_EXTERN PetscErrorCode DDDatasetSetFile(DDDataset, const char[]);
PETSC_EXTERN PetscErrorCode DDDatasetSetFields(DDDataset, PetscInt, const char *const[]);
PETSC_EXTERN PetscErrorCode DDDatasetSetRange(DDDataset, PetscInt, PetscInt);
PETSC_EXTERN PetscErrorCode DDDatasetSetOptionsPrefix(DDDataset, const char[]);
PETSC_EXTERN PetscErrorCode DDDatasetSetFromOptions(DDDataset);
PETSC_EXTERN PetscErrorCode DDDatasetSetUp(DDDataset);
PETSC_EXTERN PetscErrorCode DDDatasetGetNumSamples(DDDataset, PetscInt *);
PETSC_EXTERN PetscErrorCode DDDatasetGetSampleShape(DDDataset, PetscInt, PetscInt *, const PetscInt *[]);
PETSC_EXTERN PetscErrorCode DDDatasetShuffle(DDDataset, PetscInt64);
PETSC_EXTERN PetscErrorCode DDDatasetGetOrder(DDDataset, const PetscInt *[]);
PETSC_EXTERN PetscErrorCode DDDatasetReadBatch(DDDataset, PetscInt, PetscInt, PetscInt, DDTensor);
PETSC_EXTERN PetscErrorCode DDDatasetSetCacheLimit(DDDataset, PetscInt64);
PETSC_EXTERN PetscErrorCode DDDatasetGetCacheSize(DDDataset, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDDatasetDestroy(DDDataset *);

PETSC_EXTERN PetscErrorCode DDCheckpointSave(DDNet, DDOptimizer, const char[]);
PETSC_EXTERN PetscErrorCode DDCheckpointLoad(DDNet, DDOptimizer, const char[]);
PETSC_EXTERN PetscErrorCode DDFileCommit(MPI_Comm, const char[], const char[]);
PETSC_EXTERN PetscErrorCode DDFileCheckWritable(MPI_Comm, const char[]);

/* training loop */
typedef struct {
  PetscReal loss;          /* mean loss of the epoch's mini-batches */
  PetscReal seconds;       /* wall time of the epoch */
  PetscReal samples_per_s; /* throughput */
  PetscInt  batches;
} DDTrainStats;

/* xs: the network's input tensors, one per dataset field, NULL-terminated */
PETSC_EXTERN PetscErrorCode DDNetTrainEpoch(DDNet, DDOptimizer, DDDataset, PetscInt, PetscInt64, DDTensor[], DDTrainStats *);
PETSC_EXTERN PetscErrorCode DDNetEvaluate(DDNet, DDDataset, PetscInt, DDTensor[], PetscReal *);
