/*
  ddmodel.h - the performance model of layers and distributions (issue 16; paper 003 sec. V):
  communication from the exact messages and bytes of each primitive's set-up graph priced with
  an alpha-beta fit of MPI on this machine, compute from kernel rates measured by a calibration
  run and cached per machine, and memory per rank per layer.
*/
#pragma once
#include <ddprimitive.h>
#include <ddlayer.h>
#include <ddnet.h>

/* primitives: what one application moves (from the plan) and what was moved (counted) */
PETSC_EXTERN PetscErrorCode DDPrimitiveGetCommVolume(DDPrimitive, PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDPrimitiveGetCommCounters(DDPrimitive, PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDPrimitiveResetCommCounters(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDCommGetCounters(PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);

/* calibration: the alpha-beta fit of MPI and the kernel rates, cached per machine */
PETSC_EXTERN PetscErrorCode DDModelCalibrate(MPI_Comm, const char[], DDDataType);
PETSC_EXTERN PetscErrorCode DDModelLoad(MPI_Comm, const char[], DDDataType, PetscBool *);
PETSC_EXTERN PetscErrorCode DDModelGetCachePath(const char *[]);
PETSC_EXTERN PetscErrorCode DDModelSetCommParameters(PetscReal, PetscReal);
PETSC_EXTERN PetscErrorCode DDModelGetCommParameters(PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDModelGetKernelFit(const char[], DDDataType, const char[], PetscBool, PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDModelReset(void);

/* per layer and per network: predicted times, communication and memory */
PETSC_EXTERN PetscErrorCode DDLayerGetModelWork(DDLayer, PetscBool, PetscReal *, PetscReal *);
PETSC_EXTERN PetscErrorCode DDLayerGetModelRuns(DDLayer, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerGetModelComm(DDLayer, PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerGetCommCounters(DDLayer, PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerGetModelCollectives(DDLayer, PetscBool, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerGetModelMemory(DDLayer, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDLayerGetModelTime(DDLayer, PetscReal *, PetscReal *, PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDNetGetLayerModelComm(DDNet, PetscInt, PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);
PETSC_EXTERN PetscErrorCode DDNetGetLayerModelTime(DDNet, PetscInt, PetscReal *, PetscReal *, PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDNetGetModelTime(DDNet, PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDNetGetModelUpdateTime(DDNet, PetscInt, PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDNetViewModel(DDNet, PetscViewer);
