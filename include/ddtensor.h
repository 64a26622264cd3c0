/*
  ddtensor.h - DDTensor: a tensor of any order partitioned over a DDPartition.

  The global index space is C order (N, C, spatial...).  Each dimension k is either split
  over the P_k workers of the partition (ownership ranges, balanced like
  PetscSplitOwnership() by default or given like DMDA's lx/ly/lz) or replicated (every
  worker along k holds the whole extent: the output of a broadcast, paper 000 sec. 3.2.1).
  A worker's piece is its bulk; halo widths, per dimension and side and possibly different
  on every rank, surround it in the local storage.  The local storage format (plain C
  order, channels-last, ...) is an attribute of the tensor.
*/
#pragma once
#include <ddpartition.h>
#include <petscvec.h>
#include <petscdmda.h>

typedef struct _p_DDTensor *DDTensor;
PETSC_EXTERN PetscClassId DD_TENSOR_CLASSID;

/*E
  DDTensorFormat - how a tensor's local piece is laid out in memory

$ DD_FORMAT_PLAIN         - C order of the logical dimensions (N, C, D, H, W)
$ DD_FORMAT_CHANNELS_LAST - dimension 1 (channels) fastest: (N, D, H, W, C), the layout of a DMDA Vec with dof components
$ DD_FORMAT_BLOCKED       - channels in blocks of DDTensorSetBlockSize() (default 8), innermost: oneDNN's nChw8c/nCdhw16c

  Level: beginner

.seealso: `DDTensorSetFormat()`
E*/
typedef enum {
  DD_FORMAT_PLAIN         = 0,
  DD_FORMAT_CHANNELS_LAST = 1,
  DD_FORMAT_BLOCKED       = 2
} DDTensorFormat;
PETSC_EXTERN const char *const DDTensorFormats[];

PETSC_EXTERN PetscErrorCode DDTensorCreate(MPI_Comm, DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorSetPartition(DDTensor, DDPartition);
PETSC_EXTERN PetscErrorCode DDTensorSetShape(DDTensor, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorSetDataType(DDTensor, DDDataType);
PETSC_EXTERN PetscErrorCode DDTensorSetOwnershipRanges(DDTensor, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorSetReplicated(DDTensor, PetscInt, PetscBool);
PETSC_EXTERN PetscErrorCode DDTensorSetEmptyPiecesAllowed(DDTensor, PetscBool);
PETSC_EXTERN PetscErrorCode DDTensorSetFormat(DDTensor, DDTensorFormat);
PETSC_EXTERN PetscErrorCode DDTensorSetMemType(DDTensor, DDMemType);
PETSC_EXTERN PetscErrorCode DDTensorSetBlockSize(DDTensor, PetscInt);
PETSC_EXTERN PetscErrorCode DDTensorSetHalo(DDTensor, const PetscInt[], const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorEnsureHalo(DDTensor, const PetscInt[], const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorSetFromOptions(DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorSetUp(DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorView(DDTensor, PetscViewer);
PETSC_EXTERN PetscErrorCode DDTensorViewFromOptions(DDTensor, PetscObject, const char[]);
PETSC_EXTERN PetscErrorCode DDTensorDestroy(DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorCreateFromPartition(DDPartition, DDDataType, PetscInt, const PetscInt[], DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorDuplicate(DDTensor, DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorDuplicateLayout(DDTensor, DDDataType, DDTensor *);

PETSC_EXTERN PetscErrorCode DDTensorGetOrder(DDTensor, PetscInt *);
PETSC_EXTERN PetscErrorCode DDTensorGetShape(DDTensor, const PetscInt *[]);
PETSC_EXTERN PetscErrorCode DDTensorGetSize(DDTensor, PetscInt *);
PETSC_EXTERN PetscErrorCode DDTensorGetDataType(DDTensor, DDDataType *);
PETSC_EXTERN PetscErrorCode DDTensorGetPartition(DDTensor, DDPartition *);
PETSC_EXTERN PetscErrorCode DDTensorGetFormat(DDTensor, DDTensorFormat *);
PETSC_EXTERN PetscErrorCode DDTensorGetOwnershipRanges(DDTensor, PetscInt, const PetscInt *[]);
PETSC_EXTERN PetscErrorCode DDTensorGetReplicated(DDTensor, PetscInt, PetscBool *);
PETSC_EXTERN PetscErrorCode DDTensorGetCorners(DDTensor, PetscInt[], PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorGetLocalSize(DDTensor, PetscInt *);
PETSC_EXTERN PetscErrorCode DDTensorGetHalo(DDTensor, PetscInt[], PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorGetLocalStorageSize(DDTensor, PetscInt *);
PETSC_EXTERN PetscErrorCode DDTensorGetLocalStrides(DDTensor, PetscInt[]);
PETSC_EXTERN PetscErrorCode DDTensorGetLocalOffset(DDTensor, const PetscInt[], PetscInt *);
PETSC_EXTERN PetscErrorCode DDTensorIsActive(DDTensor, PetscBool *);
PETSC_EXTERN PetscErrorCode DDTensorGetArray(DDTensor, void **);
PETSC_EXTERN PetscErrorCode DDTensorRestoreArray(DDTensor, void **);
PETSC_EXTERN PetscErrorCode DDTensorGetArrayRead(DDTensor, const void **);
PETSC_EXTERN PetscErrorCode DDTensorRestoreArrayRead(DDTensor, const void **);
PETSC_EXTERN PetscErrorCode DDTensorGetMemType(DDTensor, DDMemType *);
PETSC_EXTERN PetscErrorCode DDTensorGetArrayAndMemType(DDTensor, void **, DDMemType *);
PETSC_EXTERN PetscErrorCode DDTensorRestoreArrayAndMemType(DDTensor, void **);
PETSC_EXTERN PetscErrorCode DDTensorCompatible(DDTensor, DDTensor, PetscBool *);

PETSC_EXTERN PetscErrorCode DDTensorZeroEntries(DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorZeroHalo(DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorSet(DDTensor, PetscReal);
PETSC_EXTERN PetscErrorCode DDTensorScale(DDTensor, PetscReal);
PETSC_EXTERN PetscErrorCode DDTensorCopy(DDTensor, DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorAXPY(DDTensor, PetscReal, DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorAXPBY(DDTensor, PetscReal, PetscReal, DDTensor);
PETSC_EXTERN PetscErrorCode DDTensorDot(DDTensor, DDTensor, PetscReal *);
PETSC_EXTERN PetscErrorCode DDTensorNorm(DDTensor, NormType, PetscReal *);
PETSC_EXTERN PetscErrorCode DDTensorSum(DDTensor, PetscReal *);
PETSC_EXTERN PetscErrorCode DDTensorMaxAbsDiff(DDTensor, DDTensor, PetscReal *);
PETSC_EXTERN PetscErrorCode DDTensorSetRandom(DDTensor, PetscRandom);
PETSC_EXTERN PetscErrorCode DDTensorSetRandomGlobal(DDTensor, PetscInt64, PetscReal, PetscReal);
PETSC_EXTERN PetscErrorCode DDTensorSetValuesGlobal(DDTensor, const void *);

PETSC_EXTERN PetscErrorCode DDTensorScatterFromRoot(DDTensor, PetscMPIInt, const void *);
PETSC_EXTERN PetscErrorCode DDTensorGatherToRoot(DDTensor, PetscMPIInt, void *);

PETSC_EXTERN PetscErrorCode DDTensorCreateFromDMDA(DM, DDDataType, DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorPlaceVec(DDTensor, Vec);
PETSC_EXTERN PetscErrorCode DDTensorResetVec(DDTensor, Vec);
PETSC_EXTERN PetscErrorCode DDTensorCopyFromVec(DDTensor, Vec);
PETSC_EXTERN PetscErrorCode DDTensorCopyToVec(DDTensor, Vec);
PETSC_EXTERN PetscErrorCode DDTensorCreateVec(DDTensor, Vec *);
