/* Internal plumbing of the package: the per-module package initializers that DDInitializePackage()
   calls in order (class ids, events, and the modules' ...RegisterAll() type lists), and the
   finalizers that DDFinalizePackage() calls in reverse order. No static initializers: a type list
   is an explicit function call, so nothing is lost when the library is linked statically. */
#pragma once
#include <petscsys.h>

PETSC_INTERN PetscErrorCode DDPrimitiveInitializePackage(void);
PETSC_INTERN PetscErrorCode DDPrimitiveFinalizePackage(void);
PETSC_INTERN PetscErrorCode DDLayerInitializePackage(void);
PETSC_INTERN PetscErrorCode DDLayerFinalizePackage(void);
PETSC_INTERN PetscErrorCode DDNetInitializePackage(void);
PETSC_INTERN PetscErrorCode DDOptimizerInitializePackage(void);
PETSC_INTERN PetscErrorCode DDOptimizerFinalizePackage(void);
PETSC_INTERN PetscErrorCode DDDatasetInitializePackage(void);
PETSC_INTERN PetscErrorCode DDNetTrainResetStages_Private(void);
PETSC_INTERN PetscErrorCode DDFunctionListKnownTypes_Private(PetscFunctionList, char[], size_t);
PETSC_INTERN PetscErrorCode DDOptionsGetPrefixed_Private(const char[], char **);
/* a logically collective flag given differently on some rank of comm: an error on every rank naming the setter (one all-reduce) */
PETSC_INTERN PetscErrorCode DDCheckSameFlag_Private(MPI_Comm, PetscBool, const char[]);
