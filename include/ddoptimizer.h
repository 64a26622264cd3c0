/*
  ddoptimizer.h - DDOptimizer: SGD (momentum, Nesterov, weight decay), Adam and AdamW, learning
  rate schedules (step, cosine), gradient clipping by global norm; options-driven; state that is
  checkpointed. Parameters live once (on their owners' partitions): the gradients of a data-
  parallel or spatially partitioned network are already summed by the adjoint of the weights'
  broadcast (paper 000 sec. 2.2.4, 4.1.2), so a step needs no extra all-reduce.
*/
#pragma once
#include <ddtensor.h>

typedef struct _p_DDOptimizer *DDOptimizer;
PETSC_EXTERN PetscClassId DD_OPTIMIZER_CLASSID;

typedef const char *DDOptimizerType;
#define DDOPTIMIZERSGD   "sgd"
#define DDOPTIMIZERADAM  "adam"
#define DDOPTIMIZERADAMW "adamw"

typedef enum {
  DD_SCHEDULE_CONSTANT = 0,
  DD_SCHEDULE_STEP     = 1,
  DD_SCHEDULE_COSINE   = 2
} DDSchedule;
PETSC_EXTERN const char *const DDSchedules[];

PETSC_EXTERN PetscErrorCode DDOptimizerCreate(MPI_Comm, DDOptimizer *);
PETSC_EXTERN PetscErrorCode DDOptimizerRegister(const char[], PetscErrorCode (*)(DDOptimizer));
PETSC_EXTERN PetscErrorCode DDOptimizerRegisterAll(void);
PETSC_EXTERN PetscErrorCode DDOptimizerSetType(DDOptimizer, DDOptimizerType);
PETSC_EXTERN PetscErrorCode DDOptimizerGetType(DDOptimizer, DDOptimizerType *);
PETSC_EXTERN PetscErrorCode DDOptimizerSetOptionsPrefix(DDOptimizer, const char[]);
PETSC_EXTERN PetscErrorCode DDOptimizerSetFromOptions(DDOptimizer);
PETSC_EXTERN PetscErrorCode DDOptimizerSetLearningRate(DDOptimizer, PetscReal);
PETSC_EXTERN PetscErrorCode DDOptimizerGetLearningRate(DDOptimizer, PetscReal *);
PETSC_EXTERN PetscErrorCode DDOptimizerSetMomentum(DDOptimizer, PetscReal, PetscBool);
PETSC_EXTERN PetscErrorCode DDOptimizerSetWeightDecay(DDOptimizer, PetscReal);
PETSC_EXTERN PetscErrorCode DDOptimizerSetBetas(DDOptimizer, PetscReal, PetscReal, PetscReal);
PETSC_EXTERN PetscErrorCode DDOptimizerSetSchedule(DDOptimizer, DDSchedule, PetscInt, PetscReal);
PETSC_EXTERN PetscErrorCode DDOptimizerSetClipNorm(DDOptimizer, PetscReal);
PETSC_EXTERN PetscErrorCode DDOptimizerSetUp(DDOptimizer, PetscInt, DDTensor[], DDTensor[]);
PETSC_EXTERN PetscErrorCode DDOptimizerStep(DDOptimizer);
PETSC_EXTERN PetscErrorCode DDOptimizerEndEpoch(DDOptimizer);
PETSC_EXTERN PetscErrorCode DDOptimizerGetStepCount(DDOptimizer, PetscInt *, PetscInt *);
PETSC_EXTERN PetscErrorCode DDOptimizerSetStepCount(DDOptimizer, PetscInt, PetscInt);
PETSC_EXTERN PetscErrorCode DDOptimizerGetState(DDOptimizer, PetscInt *, DDTensor *[], const char *const *[]);
PETSC_EXTERN PetscErrorCode DDOptimizerCheckState(DDOptimizer);
PETSC_EXTERN PetscErrorCode DDOptimizerGetLastGradientNorm(DDOptimizer, PetscReal *);
PETSC_EXTERN PetscErrorCode DDOptimizerView(DDOptimizer, PetscViewer);
PETSC_EXTERN PetscErrorCode DDOptimizerDestroy(DDOptimizer *);
