/* ddnn/private/ddprimitiveimpl.h - the DDPrimitive class struct, for implementers of primitive types. */
#pragma once
#include <ddnn/private/ddimpl.h>
#include <ddprimitive.h>

typedef struct _DDPrimitiveOps *DDPrimitiveOps;
struct _DDPrimitiveOps {
  PetscErrorCode (*setfromoptions)(DDPrimitive, PetscOptionItems *);
  PetscErrorCode (*setup)(DDPrimitive, DDTensor, DDTensor);
  PetscErrorCode (*applybegin)(DDPrimitive, DDTensor, DDTensor);
  PetscErrorCode (*applyend)(DDPrimitive, DDTensor, DDTensor);
  PetscErrorCode (*adjointbegin)(DDPrimitive, DDTensor, DDTensor);
  PetscErrorCode (*adjointend)(DDPrimitive, DDTensor, DDTensor);
  PetscErrorCode (*view)(DDPrimitive, PetscViewer);
  PetscErrorCode (*reset)(DDPrimitive);
  PetscErrorCode (*destroy)(DDPrimitive);
};

struct _p_DDPrimitive {
  PETSCHEADER(struct _DDPrimitiveOps);
  void         *data;
  PetscBool     inplace;     /* F maps a tensor's storage to itself (halo); x and y are the same tensor */
  PetscBool     allowsame;   /* y may be x (allsumreduce) */
  PetscBool     device;      /* the type moves tensors in device memory too (set by its create) */
  DDMemType     memtype;     /* where the tensors given to DDPrimitiveSetUp() live */
  PetscBool     setupcalled;
  PetscInt64    xhash, yhash; /* layouts the primitive was set up for */
  DDTensor      xref, yref;   /* the tensors given to DDPrimitiveSetUp() (references) */
  DDTensor      xtmpl, ytmpl; /* work tensors with their layouts, made on demand (adjoint test, shell Mat) */
  PetscLogEvent evfwd, evadj;
  PetscInt      inflight; /* 1 forward begun, 2 adjoint begun */
  Mat           mat;
};

PETSC_EXTERN PetscErrorCode DDPrimitiveGetEvents_Private(const char[], PetscLogEvent *, PetscLogEvent *);
/* the runs one application (or adjoint) sends from, receives into and copies within the rank, and the bytes it copies within the rank (the performance model's repartition fit) */
PETSC_EXTERN PetscErrorCode DDPrimitiveGetExchangeWork_Private(DDPrimitive, PetscBool, PetscInt64[4]);
