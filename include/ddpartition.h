/*
  ddpartition.h - DDPartition: a Cartesian grid of MPI ranks of any order.

  A partition P = P_0 x P_1 x ... x P_{d-1} (paper 000, sec. 3.1) lives on a communicator,
  possibly on a subset of its ranks (the others are idle).  Workers are numbered in C
  order of their coordinates (the last dimension fastest), which is DMDA's x-fastest
  numbering when the last dimensions are (z, y, x).
*/
#pragma once
#include <ddsys.h>
#include <petscdm.h>

typedef struct _p_DDPartition *DDPartition;
PETSC_EXTERN PetscClassId DD_PARTITION_CLASSID;

PETSC_EXTERN PetscErrorCode DDPartitionCreate(MPI_Comm, DDPartition *);
PETSC_EXTERN PetscErrorCode DDPartitionSetShape(DDPartition, PetscInt, const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDPartitionSetRanks(DDPartition, PetscInt, const PetscMPIInt[]);
PETSC_EXTERN PetscErrorCode DDPartitionSetFromOptions(DDPartition);
PETSC_EXTERN PetscErrorCode DDPartitionSetUp(DDPartition);
PETSC_EXTERN PetscErrorCode DDPartitionView(DDPartition, PetscViewer);
PETSC_EXTERN PetscErrorCode DDPartitionViewFromOptions(DDPartition, PetscObject, const char[]);
PETSC_EXTERN PetscErrorCode DDPartitionDestroy(DDPartition *);
PETSC_EXTERN PetscErrorCode DDPartitionCreateCartesian(MPI_Comm, PetscInt, const PetscInt[], PetscInt, const PetscMPIInt[], DDPartition *);
PETSC_EXTERN PetscErrorCode DDPartitionCreateFromDMDA(DM, PetscInt, DDPartition *);

PETSC_EXTERN PetscErrorCode DDPartitionGetOrder(DDPartition, PetscInt *);
PETSC_EXTERN PetscErrorCode DDPartitionGetShape(DDPartition, const PetscInt *[]);
PETSC_EXTERN PetscErrorCode DDPartitionGetSize(DDPartition, PetscInt *);
PETSC_EXTERN PetscErrorCode DDPartitionGetRanks(DDPartition, const PetscMPIInt *[]);
PETSC_EXTERN PetscErrorCode DDPartitionIsActive(DDPartition, PetscBool *);
PETSC_EXTERN PetscErrorCode DDPartitionGetIndex(DDPartition, PetscInt *);
PETSC_EXTERN PetscErrorCode DDPartitionGetCoordinates(DDPartition, PetscInt[]);
PETSC_EXTERN PetscErrorCode DDPartitionGetRankOfCoordinates(DDPartition, const PetscInt[], PetscMPIInt *);
PETSC_EXTERN PetscErrorCode DDPartitionGetNeighbor(DDPartition, PetscInt, PetscInt, PetscMPIInt *);
PETSC_EXTERN PetscErrorCode DDPartitionGetSubComm(DDPartition, MPI_Comm *);
PETSC_EXTERN PetscErrorCode DDPartitionCreateSubPartition(DDPartition, const PetscBool[], DDPartition *);
PETSC_EXTERN PetscErrorCode DDPartitionEqual(DDPartition, DDPartition, PetscBool *);
PETSC_EXTERN PetscErrorCode DDPartitionCheckBroadcast(DDPartition, DDPartition, PetscBool *, PetscInt *);
PETSC_EXTERN PetscErrorCode DDPartitionCheckReduce(DDPartition, DDPartition, PetscBool *, PetscInt *);
