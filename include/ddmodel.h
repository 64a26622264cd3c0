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

/* the analytic model: the same predictions for layers that are not set up (paper-scale configurations) */
typedef struct {
  DDLayerType type;              /* conv, batchnorm, activation (relu), pool (max/avg), upsample (nearest or linear, x2), concat, loss */
  DDDataType  dtype;             /* the data type */
  PetscInt    order;             /* 2 + the spatial dimensions (3 to 5) */
  PetscInt    shape[DD_MAX_DIM]; /* the global shape of the (first) input: N, C, spatial... */
  PetscInt    parts[DD_MAX_DIM]; /* the workers along each dimension of the input's partition (parts[1] = 1: channels not split) */
  PetscInt    channels;          /* conv: output channels; concat: channels of the second input */
  PetscInt    kernel[3];         /* conv, pool: kernel size per spatial dimension */
  PetscInt    stride[3];         /* conv, pool: stride; upsample: the scale factor (1 or 2) */
  PetscInt    padding[3];        /* conv, pool: padding (zeros) */
  PetscBool   bias;              /* conv: with a bias */
  PetscBool   linear;            /* upsample: linear interpolation (align_corners false) instead of nearest */
  PetscBool   noinputgradient;   /* the backward computes no input gradient (a network's first layer) */
  PetscBool   average;           /* pool: average pooling instead of max pooling */
  PetscBool   replicated;        /* conv, batchnorm: the network keeps the weight replicas (-net_weights replicated): no weight broadcast or gradient sum-reduction (DDModelPredictReplicatedWeights() prices the network's) */
} DDModelLayerSpec;

typedef struct {
  PetscInt   outshape[DD_MAX_DIM]; /* the global shape of the output */
  PetscReal  flops[2], bytes[2];   /* DDLayerGetModelWork(): forward, backward */
  PetscInt64 runs;                 /* DDLayerGetModelRuns() */
  PetscInt64 comm[2][4];           /* DDLayerGetModelComm(): forward, backward x {messages sent, bytes sent, messages received, bytes received} */
  PetscInt64 collcalls, collbytes; /* DDLayerGetModelCollectives() */
  PetscInt64 memory[4];            /* DDLayerGetModelMemory(): activations, halo, params, work */
  PetscReal  time[4];              /* DDLayerGetModelTime(): compute forward, comm forward, compute backward, comm backward */
  PetscReal  tcoll[2];             /* the collectives' part of the comm times: forward, backward */
  PetscBool  calibrated;           /* whether the calibration held every fit the times need */
} DDModelLayerPrediction;

PETSC_EXTERN PetscErrorCode DDModelLayerSpecInitialize(DDModelLayerSpec *, DDLayerType, DDDataType, PetscInt, const PetscInt[], const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDModelPredictLayer(const DDModelLayerSpec *, const DDModelLayerSpec *, const char[], PetscInt, DDModelLayerPrediction *);
PETSC_EXTERN PetscErrorCode DDModelPredictLayerMax(const DDModelLayerSpec *, const DDModelLayerSpec *, const char[], DDModelLayerPrediction *);
PETSC_EXTERN PetscErrorCode DDModelPredictReplicatedWeights(const char[], DDDataType, PetscInt, PetscInt64, PetscReal *, PetscReal *, PetscBool *);
PETSC_EXTERN PetscErrorCode DDModelPredictDataParallelWeights(const char[], DDDataType, PetscInt, PetscInt64, PetscReal *, PetscReal *, PetscBool *);
