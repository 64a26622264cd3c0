/* ddnn/private/ddlayerimpl.h - the DDLayer class struct, for implementers of layer types. */
#pragma once
#include <ddnn/private/ddprimitiveimpl.h>
#include <ddlayer.h>

struct _DDLayerOps {
  PetscErrorCode (*setfromoptions)(DDLayer, PetscOptionItems *);
  /* knows the inputs' layouts: checks them, builds primitives, creates l->output and the parameters */
  PetscErrorCode (*setup)(DDLayer, PetscInt, DDTensor[]);
  PetscErrorCode (*forward)(DDLayer, PetscInt, DDTensor[], DDTensor);
  /* dxs[i] may be NULL (no gradient wanted for that input); parameter gradients accumulate */
  PetscErrorCode (*backward)(DDLayer, DDTensor, PetscInt, DDTensor[]);
  PetscErrorCode (*initparams)(DDLayer, PetscInt64);
  PetscErrorCode (*view)(DDLayer, PetscViewer);
  PetscErrorCode (*reset)(DDLayer);
  PetscErrorCode (*destroy)(DDLayer);
};

struct _p_DDLayer {
  PETSCHEADER(struct _DDLayerOps);
  void            *data;
  PetscInt         minin, maxin; /* number of inputs the type accepts */
  PetscInt         nin;          /* inputs given at set-up */
  PetscInt         nincap;       /* length of the per-input arrays below (>= nin) */
  PetscInt64      *inhash;
  DDTensor        *setupin;      /* the tensors given to set-up (references): the input layouts */
  DDTensor         output;       /* owned; its layout is the layer's output layout */
  /* parameters and their gradients, each a DDTensor, with names ("weight", "bias", ...) */
  PetscInt         nparams;
  DDTensor        *params, *grads;
  char           **paramnames;
  /* the forward state kept for Backward */
  DDTensor        *saved;
  PetscObjectState *savedstate;
  PetscBool        forwarddone;
  PetscBool        training;
  PetscBool        setupcalled;
  DDInitType       inittype;
  PetscReal        initscale;
  PetscLogEvent    evfwd, evbwd;
  DDBackend        backend;      /* NULL: the default (DDBackendSetDefault()) */
  /* halo widths the output must be created with (set by DDNet so that consumers find final layouts) */
  PetscBool        hasouthalo;
  PetscInt         outlo[DD_MAX_DIM], outhi[DD_MAX_DIM];
  /* non-trainable state saved in checkpoints (running statistics, counters), each a tensor
     (a reference) or an integer counter owned by the implementation, with names */
  PetscInt         nbuffers;
  DDTensor        *buffers;
  PetscInt64     **counters;
  char           **buffernames;
};

/* helpers for implementations */
PETSC_EXTERN PetscErrorCode DDLayerAddParameter_Private(DDLayer, const char[], DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerClearParameters_Private(DDLayer);
/* registers a buffer: a tensor (the layer takes a reference) or a counter (a pointer into the implementation's data), not both */
PETSC_EXTERN PetscErrorCode DDLayerAddBuffer_Private(DDLayer, const char[], DDTensor, PetscInt64 *);
/* Sets the (owned) output tensor. Call it as soon as the output exists and before building
   primitives or kernels on it: it gives the output the halo widths the network asked for. */
PETSC_EXTERN PetscErrorCode DDLayerSetOutput_Private(DDLayer, DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerSetOutputHalo_Private(DDLayer, const PetscInt[], const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerCheckType_Private(DDLayer, DDLayerType, const char[]);
PETSC_EXTERN PetscErrorCode DDLayerGetArrayOption_Private(PetscOptionItems *, const char[], const char[], const char[], PetscInt, PetscInt *, PetscInt[], PetscBool *);
PETSC_EXTERN PetscErrorCode DDTensorInitialize_Private(DDTensor, DDInitType, PetscReal, PetscInt64, PetscInt, PetscInt, PetscReal);
