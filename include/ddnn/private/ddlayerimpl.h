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
  PetscBool        nulldy;       /* set by a type's create function whose backward takes dy = NULL (dL = 1: a loss);
                                    DDLayerBackwardMulti() refuses NULL for the others */
  PetscBool        device;       /* set by a type's create function that runs on device tensors (with a device backend) */
  DDMemType        memtype;      /* the memory of the tensors given to set-up */
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
  DDTensor         savedout;      /* the last forward's output (a reference) and its content state after that forward: */
  PetscObjectState savedoutstate; /* a backward may read f'(v) from it while that is unchanged (tanh, sigmoid) */
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
  /* parameters replicated onto the workers that use them (DDLayerAddReplica_Private()) */
  PetscInt         nreplicas;
  struct _DDLayerReplica *replicas;
};

/*
  A parameter w the layer broadcasts to its workers' replica w^ = B w, its gradient summed back by
  B^* (paper 000 sec. 4.1). In the network's replicated weight mode (DDNetSetWeightMode()) the
  network keeps w^ between calls, refreshes it only when w changed, and sums the replicas'
  gradients once per backward with one collective per worker group (src/net/replicas.cxx); the
  layer then calls DDLayerReplicaForward_Private() and DDLayerReplicaBackward_Private() where it
  would apply B and B^*. The tensors and B are the implementation's (borrowed, not referenced).
*/
struct _DDLayerReplica {
  DDTensor         w, wh;  /* the parameter on its root partition, its replica on the workers */
  DDPrimitive      B;      /* w -> wh */
  DDTensor         grad;   /* w's gradient (an entry of l->grads) */
  PetscObjectState wstate; /* w's state when wh was last refreshed */
  PetscBool        fresh;  /* wh = B w for w at wstate */
  PetscBool        kept;   /* set by the network in the replicated weight mode: it refreshes wh and sums the gradients */
  void            *slot;   /* replicated mode: this rank's gradient of the replica in the network's bucket, else NULL */
  PetscBool        added;  /* the slot holds gradients not yet summed */
  PetscInt64       nfallback; /* replicated mode: stale replicas refreshed by the layer itself (with B) */
};
typedef struct _DDLayerReplica DDLayerReplica;

/* helpers for implementations */
/* the first input the last forward read whose content changed since, or -1 (this rank; DDLayerBackwardMulti(), DDNetBackward()) */
PETSC_EXTERN PetscErrorCode DDLayerSavedInputChanged_Private(DDLayer, PetscInt *);
PETSC_EXTERN PetscErrorCode DDLayerAddParameter_Private(DDLayer, const char[], DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerClearParameters_Private(DDLayer);
/* registers a buffer: a tensor (the layer takes a reference) or a counter (a pointer into the implementation's data), not both */
PETSC_EXTERN PetscErrorCode DDLayerAddBuffer_Private(DDLayer, const char[], DDTensor, PetscInt64 *);
/* registers a replicated parameter (see DDLayerReplica): w (a parameter of l; others are ignored), its replica wh and B: w -> wh */
PETSC_EXTERN PetscErrorCode DDLayerAddReplica_Private(DDLayer, DDTensor, DDTensor, DDPrimitive);
/* the layer being set up (inside DDLayerSetUpMulti()), for helpers that register replicas; NULL outside */
PETSC_EXTERN DDLayer DDLayerSettingUp_Private(void);
/* Forward: *done = PETSC_TRUE when wh is a replica kept by the network (refreshed here with B if stale); else apply B yourself */
PETSC_EXTERN PetscErrorCode DDLayerReplicaForward_Private(DDLayer, DDTensor, PetscBool *);
/* Backward: *done = PETSC_TRUE when the replica's gradient dwh was added to the network's bucket (wh or grad identifies the replica); else apply B^* yourself */
PETSC_EXTERN PetscErrorCode DDLayerReplicaBackward_Private(DDLayer, DDTensor, DDTensor, DDTensor, PetscBool *);
/* Sets the (owned) output tensor. Call it as soon as the output exists and before building
   primitives or kernels on it: it gives the output the halo widths the network asked for. */
PETSC_EXTERN PetscErrorCode DDLayerSetOutput_Private(DDLayer, DDTensor);
PETSC_EXTERN PetscErrorCode DDLayerSetOutputHalo_Private(DDLayer, const PetscInt[], const PetscInt[]);
PETSC_EXTERN PetscErrorCode DDLayerCheckType_Private(DDLayer, DDLayerType, const char[]);
PETSC_EXTERN PetscErrorCode DDLayerGetArrayOption_Private(PetscOptionItems *, const char[], const char[], const char[], PetscInt, PetscInt *, PetscInt[], PetscBool *);
PETSC_EXTERN PetscErrorCode DDTensorInitialize_Private(DDTensor, DDInitType, PetscReal, PetscInt64, PetscInt, PetscInt, PetscReal);
