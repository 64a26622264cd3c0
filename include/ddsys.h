/*
  ddsys.h - package initialization, data types and error helpers of ddnn.

  ddnn follows PETSc's conventions: every function returns a PetscErrorCode and is
  called through PetscCall(); objects are PetscObjects with options prefixes,
  -xxx_view and -log_view support.
*/
#pragma once

#include <petscsys.h>
#include <ddconf.h>

/* PETSc 3.18 compatibility shims */
#ifndef PETSC_SUCCESS
  #define PETSC_SUCCESS ((PetscErrorCode)0)
#endif

#define DD_MAX_DIM 8 /* the largest tensor (and partition) order */

/*E
  DDDataType - element type of a DDTensor

$ DD_FLOAT32 - 32-bit IEEE float
$ DD_FLOAT64 - 64-bit IEEE double (PetscScalar in the PETSc build ddnn uses)

  Level: beginner

.seealso: `DDTensorSetDataType()`
E*/
typedef enum {
  DD_FLOAT32 = 0,
  DD_FLOAT64 = 1
} DDDataType;
PETSC_EXTERN const char *const DDDataTypes[];

/*E
  DDMemType - where a tensor's storage lives

$ DD_MEMTYPE_HOST - host memory (every CPU backend)
$ DD_MEMTYPE_DEVICE - device memory of the GPU backend "/gpu/cuda" (builds with -DDDNN_WITH_CUDA=ON)

  Level: intermediate

.seealso: `DDTensorSetMemType()`, `DDTensorGetMemType()`, `DDTensorGetArrayAndMemType()`, `DDBackendSetDefault()`
E*/
typedef enum {
  DD_MEMTYPE_HOST   = 0,
  DD_MEMTYPE_DEVICE = 1
} DDMemType;
PETSC_EXTERN const char *const DDMemTypes[];

/*S
  DDBackend - a set of kernels and a memory type under a resource name ("/cpu/ref", "/cpu/blas",
  "/cpu/dnnl"): how and where a layer's local operations run

  Level: intermediate

.seealso: `DDBackendSetDefault()`, `DDBackendGetDefault()`, `DDBackendView()`, `DDLayerSetBackend()`
S*/
typedef struct _p_DDBackend *DDBackend;
PETSC_EXTERN PetscErrorCode DDBackendSetDefault(const char[]);
PETSC_EXTERN PetscErrorCode DDBackendGetDefault(const char *[]);
PETSC_EXTERN PetscErrorCode DDBackendView(PetscViewer);
PETSC_EXTERN PetscErrorCode DDBackendGet(const char[], DDBackend *);
PETSC_EXTERN PetscErrorCode DDBackendGetName(DDBackend, const char *[]);
PETSC_EXTERN PetscErrorCode DDBackendGetMemType(DDBackend, DDMemType *);

PETSC_EXTERN PetscErrorCode DDInitialize(int *, char ***, const char[], const char[]);
PETSC_EXTERN PetscErrorCode DDFinalize(void);
PETSC_EXTERN PetscErrorCode DDInitialized(PetscBool *);
PETSC_EXTERN PetscErrorCode DDInitializePackage(void);
PETSC_EXTERN PetscErrorCode DDFinalizePackage(void);
PETSC_EXTERN PetscErrorCode DDDataTypeGetSize(DDDataType, size_t *);
PETSC_EXTERN PetscErrorCode DDDataTypeGetMPIType(DDDataType, MPI_Datatype *);
PETSC_EXTERN PetscErrorCode DDCheckCollective(MPI_Comm, PetscBool, PetscErrorCode, const char[]);
PETSC_EXTERN PetscErrorCode DDOptionsCheckUnused(MPI_Comm, const char[]);
PETSC_EXTERN PetscErrorCode DDOptionsCheckIntegers(MPI_Comm, const char[]);
PETSC_EXTERN PetscErrorCode DDCheckSameString(MPI_Comm, const char[], const char[]);
PETSC_EXTERN PetscErrorCode DDErrorHandlerAllRanks(MPI_Comm, int, const char *, const char *, PetscErrorCode, PetscErrorType, const char *, void *);

/*MC
  DDCheckAll - PetscCheck() for conditions that may hold on some ranks and not on others

  Synopsis:
  #include <ddsys.h>
  DDCheckAll(MPI_Comm comm, cond, PetscErrorCode code, const char fmt[], ...)

  Notes:
  Collective on comm. Every rank of comm evaluates its own cond; if any rank finds it false,
  every rank raises the error code with the message of the lowest failing rank, so that no
  rank is left waiting in a later collective call.

  Level: developer

.seealso: `DDCheckCollective()`
M*/
#define DDCheckAll(comm, cond, code, ...) \
  do { \
    char      _dd_msg[512] = ""; \
    PetscBool _dd_ok       = (cond) ? PETSC_TRUE : PETSC_FALSE; \
    if (!_dd_ok) PetscCall(PetscSNPrintf(_dd_msg, sizeof(_dd_msg), __VA_ARGS__)); \
    PetscCall(DDCheckCollective((comm), _dd_ok, (code), _dd_msg)); \
  } while (0)
