/*
  ddnn/private/ddimpl.h - class structs of ddnn's core objects (partition, tensor) and the
  package's log events.  For implementers of new primitive and layer types; applications
  use the public headers only.
*/
#pragma once
#include <petsc/private/petscimpl.h>
#include <ddtensor.h>

PETSC_EXTERN PetscBool DDPackageInitialized;

/* ------------------------------------------------------------------------ */
struct _DDPartitionOps {
  int dummy;
};

struct _p_DDPartition {
  PETSCHEADER(struct _DDPartitionOps);
  PetscInt     order;
  PetscInt     shape[DD_MAX_DIM];
  PetscInt     size;               /* number of workers, the product of shape */
  PetscInt     nranksset;          /* ranks given by DDPartitionSetRanks(), or -1 */
  PetscMPIInt *ranks;              /* comm rank of each worker, in worker (C-order) numbering */
  PetscInt     index;              /* this rank's worker index, -1 when idle */
  PetscInt     coords[DD_MAX_DIM]; /* this rank's coordinates (valid when index >= 0) */
  MPI_Comm     subcomm;            /* the workers, ranked by worker index; MPI_COMM_NULL on idle ranks */
  PetscBool    setupcalled;
};

/* ------------------------------------------------------------------------ */
/*
  DDLayout - the local storage of one rank's piece of a tensor.

  Coordinates j in [0, alloc[k]) of the local storage map to global index start[k] - lo[k] + j.
  For strided formats offset(j) = sum_k stride[k] j[k].  For the blocked format, dimension
  bdim is split into blocks of bs: offset(j) = sum_{k != bdim} stride[k] j[k]
  + stride[bdim] (j[bdim] / bs) + j[bdim] % bs.
*/
typedef struct {
  PetscInt order;
  PetscInt n[DD_MAX_DIM];     /* bulk sizes */
  PetscInt start[DD_MAX_DIM]; /* global index of the first bulk entry */
  PetscInt lo[DD_MAX_DIM];    /* halo widths before the bulk */
  PetscInt hi[DD_MAX_DIM];    /* halo widths after the bulk */
  PetscInt alloc[DD_MAX_DIM]; /* lo + n + hi */
  PetscInt perm[DD_MAX_DIM];  /* storage order of the logical dimensions, outermost first */
  PetscInt stride[DD_MAX_DIM];
  PetscInt bdim, bs;          /* blocked dimension and block size; bdim = -1 when not blocked */
  PetscInt size;              /* entries in the storage */
  PetscInt bulksize;          /* entries in the bulk */
} DDLayout;

struct _DDTensorOps {
  int dummy;
};

struct _p_DDTensor {
  PETSCHEADER(struct _DDTensorOps);
  DDPartition    part;
  PetscInt       order;
  PetscInt       shape[DD_MAX_DIM];
  DDDataType     dtype;
  PetscInt      *ranges[DD_MAX_DIM]; /* ownership offsets, P_k + 1 entries (split dims) */
  PetscInt      *userlx[DD_MAX_DIM]; /* sizes given by DDTensorSetOwnershipRanges() */
  PetscBool      replicated[DD_MAX_DIM];
  PetscBool      emptyok;
  DDTensorFormat format;
  PetscInt       bs;
  PetscInt       blockdim; /* the dimension the blocked format blocks (the channel: 1, or 1 + leading dims) */
  PetscInt       lo[DD_MAX_DIM], hi[DD_MAX_DIM]; /* halo widths of this rank */
  DDLayout       layout;
  PetscBool      active; /* this rank is a worker of the partition */
  DDMemType      memtype; /* where array lives (DD_MEMTYPE_HOST, or DD_MEMTYPE_DEVICE: /gpu/cuda's memory) */
  void          *array;
  void          *hostmirror; /* a device tensor's host copy for the host accessors (layout.size entries), or NULL */
  PetscBool      ownsarray;
  Vec            placedvec;
  void          *savedarray;
  Vec           *sharedvecs;   /* the live Vecs of DDTensorCreateVec() on this storage (each holds a reference to the tensor, not the other way round) */
  PetscInt       nsharedvecs;
  PetscObjectState vecstatebase; /* the last states of the Vecs that wrapped or shared this storage and are gone (DDTensorContentState_Private()) */
  PetscInt64     layouthash; /* identical on every rank; changes with any rank's layout */
  PetscBool      setupcalled;
  PetscBool      retired; /* a layer's parameter or gradient that the layer let go when it was set up again: a holder's updates no longer reach the network */
};

/* log events */
PETSC_EXTERN PetscLogEvent DD_TensorScatter, DD_TensorGather, DD_TensorSetUp;

/* internal helpers shared by the implementation */
PETSC_EXTERN PetscErrorCode DDTensorCheckSetUp_Private(DDTensor, const char[]);
PETSC_EXTERN PetscErrorCode DDTensorCheckSameType_Private(DDTensor, DDTensor, const char[]);
PETSC_EXTERN PetscErrorCode DDTensorCheckCompatible_Private(DDTensor, DDTensor, const char[]);
PETSC_EXTERN PetscErrorCode DDTensorNorm2SquaredSum_Private(MPI_Comm, PetscInt, const DDTensor[], PetscReal *);
PETSC_EXTERN PetscErrorCode DDSplitOwnership_Private(PetscInt, PetscInt, PetscInt[]);
PETSC_EXTERN PetscErrorCode DDShapeToString_Private(PetscInt, const PetscInt[], char[], size_t);
PETSC_EXTERN PetscErrorCode DDTensorSetBlockDimension_Private(DDTensor, PetscInt);
/* host-only code: an error "<fn> does not support device tensors yet" for a tensor not in host memory */
PETSC_EXTERN PetscErrorCode DDTensorCheckHost_Private(DDTensor, const char[]);
/* the storage in host memory: the array itself, or a device tensor's host mirror (copied from the device) */
PETSC_EXTERN PetscErrorCode DDTensorGetHostArray_Private(DDTensor, void **);
/* DDTensorDuplicateLayout() into the given memory (a device tensor's host twin) */
PETSC_EXTERN PetscErrorCode DDTensorDuplicateLayoutIn_Private(DDTensor, DDDataType, DDMemType, DDTensor *);
PETSC_EXTERN PetscErrorCode DDTensorLayoutLike_Private(DDTensor, DDDataType, DDMemType, DDTensor *);
/* a local scan of the bulk of t (device tensors through their host copy): flags bit 1 if it holds a nan, bit 2 if an inf */
PETSC_EXTERN PetscErrorCode DDTensorFiniteFlags_Private(DDTensor, int *);
/* the state of the tensor's values: its own state plus those of the PETSc Vecs on its storage
   (DDTensorPlaceVec(), DDTensorCreateVec()), so that an edit through either side is seen; compare it
   for equality only */
PETSC_EXTERN PetscErrorCode DDTensorContentState_Private(DDTensor, PetscObjectState *);
/* marks the tensor's values changed: its state and those of the Vecs on its storage (whose cached
   norms PETSc would otherwise return stale) */
PETSC_EXTERN PetscErrorCode DDTensorStateIncrease_Private(DDTensor);
/* ends DDTensorGetHostArray_Private(); written: copy a device tensor's mirror back (and bump the state) */
PETSC_EXTERN PetscErrorCode DDTensorRestoreHostArray_Private(DDTensor, PetscBool, void **);
