/*
  DDTensor interoperability with PETSc's DMDA and Vec.

  A DMDA Vec with dof components stores [z][y][x][dof] (channels last); a tensor made from a
  DMDA has shape (1, dof, [Mz,] [My,] Mx), the DMDA's ownership ranges and the channels-last
  format, so that its storage is byte for byte the Vec's local array (DESIGN.md, "Meeting a
  PDE code").
*/
#include <sys/ddcxx.hpp>
#include <tensor/layout.hpp>
#include <tensor/argcheck.hpp>
#include <petsc/private/vecimpl.h> /* a shared Vec's destroy (SharedVecDestroy()) */

using namespace ddnn;

/*@
  DDTensorCreateFromDMDA - Creates a tensor with a DMDA's global shape, process grid and ownership ranges

  Collective

  Input Parameters:
+ da - the DMDA (1, 2 or 3-D)
- dt - element type

  Output Parameter:
. t - a tensor of shape (1, dof, [Mz,] [My,] Mx) on the partition (1, 1, [pz,] [py,] px), with
      the DMDA's ownership ranges and channels-last format, no halo. Its local storage has the
      layout of the DMDA global Vec's local array, so `DDTensorPlaceVec()` wraps such a Vec
      without a copy.

  Level: beginner

.seealso: `DDTensorPlaceVec()`, `DDTensorCopyFromVec()`, `DDPartitionCreateFromDMDA()`
@*/
PetscErrorCode DDTensorCreateFromDMDA(DM da, DDDataType dt, DDTensor *t)
DD_CXX_TRY
{
  PetscInt        dim, M, N, P, dof, shape[5];
  const PetscInt *lx, *ly, *lz;
  DDPartition     part;

  PetscFunctionBegin;
  DDCheckHeader(da, DM_CLASSID, 1);
  DDCheckPointer(t, 3);
  PetscCall(DMDAGetInfo(da, &dim, &M, &N, &P, NULL, NULL, NULL, &dof, NULL, NULL, NULL, NULL, NULL));
  PetscCall(DMDAGetOwnershipRanges(da, &lx, &ly, &lz));
  PetscCall(DDPartitionCreateFromDMDA(da, 2, &part));
  shape[0] = 1;
  shape[1] = dof;
  if (dim == 1) shape[2] = M;
  else if (dim == 2) {
    shape[2] = N;
    shape[3] = M;
  } else {
    shape[2] = P;
    shape[3] = N;
    shape[4] = M;
  }
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)da), t));
  PetscCall(DDTensorSetPartition(*t, part));
  PetscCall(DDPartitionDestroy(&part));
  PetscCall(DDTensorSetShape(*t, 2 + dim, shape));
  PetscCall(DDTensorSetDataType(*t, dt));
  if (dim == 1) PetscCall(DDTensorSetOwnershipRanges(*t, 2, lx));
  else if (dim == 2) {
    PetscCall(DDTensorSetOwnershipRanges(*t, 2, ly));
    PetscCall(DDTensorSetOwnershipRanges(*t, 3, lx));
  } else {
    PetscCall(DDTensorSetOwnershipRanges(*t, 2, lz));
    PetscCall(DDTensorSetOwnershipRanges(*t, 3, ly));
    PetscCall(DDTensorSetOwnershipRanges(*t, 4, lx));
  }
  PetscCall(DDTensorSetFormat(*t, DD_FORMAT_CHANNELS_LAST));
  PetscCall(DDTensorSetUp(*t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Whether the storage (halo included) is laid out as (N, spatial..., C) in C order, like a DMDA Vec */
static PetscBool DDTensorStorageIsDofLast(DDTensor t)
{
  const DDLayout &L = t->layout;
  PetscInt        perm[DD_MAX_DIM], s = 1;
  if (L.bdim >= 0 && L.alloc[L.bdim] > 1) return PETSC_FALSE;
  ChannelsLastOrder(L.order, perm);
  for (PetscInt p = L.order - 1; p >= 0; p--) {
    PetscInt k = perm[p];
    if (L.alloc[k] > 1 && L.bdim != k && L.stride[k] != s) return PETSC_FALSE;
    s *= L.alloc[k];
  }
  return PETSC_TRUE;
}

PetscErrorCode DDTensorContentState_Private(DDTensor t, PetscObjectState *st)
{
  PetscObjectState s;

  PetscFunctionBegin;
  PetscCall(PetscObjectStateGet((PetscObject)t, st));
  *st += t->vecstatebase;
  if (t->placedvec) {
    PetscCall(PetscObjectStateGet((PetscObject)t->placedvec, &s));
    *st += s;
  }
  for (PetscInt i = 0; i < t->nsharedvecs; i++) {
    PetscCall(PetscObjectStateGet((PetscObject)t->sharedvecs[i], &s));
    *st += s;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DDTensorStateIncrease_Private(DDTensor t)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectStateIncrease((PetscObject)t));
  if (t->placedvec) PetscCall(PetscObjectStateIncrease((PetscObject)t->placedvec));
  for (PetscInt i = 0; i < t->nsharedvecs; i++) PetscCall(PetscObjectStateIncrease((PetscObject)t->sharedvecs[i]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorPlaceVec - Makes the tensor use a Vec's local array as its storage, without a copy

  Collective

  Input Parameters:
+ t - a float64 tensor
- v - a Vec whose local array has the tensor's storage layout: for a tensor from
      `DDTensorCreateFromDMDA()`, the DMDA's global Vec (no halo), or its local (ghosted) Vec
      when the tensor's halo widths equal the ghost widths (`DMDAGetGhostCorners()`)

  Notes:
  The tensor reads and writes the Vec's memory until `DDTensorResetVec()`. Both sides see the
  other's changes: a write through the tensor (a layer's output, `DDTensorScale()`, ...) changes the
  Vec's state, so that PETSc recomputes a norm it cached, and a change through the Vec (`VecScale()`,
  `VecSet()`, ...) after `DDLayerForward()` read the tensor makes `DDLayerBackward()` fail, as a
  change of the tensor itself does. An error while a Vec of `DDTensorCreateVec()` shares the
  tensor's storage. Errors, on every
  rank, when the data type is not float64, when the local sizes differ, or when the storage
  order is not (N, spatial..., C) (plain format with several components, blocked format);
  use `DDTensorCopyFromVec()` for those.

  Level: intermediate

.seealso: `DDTensorResetVec()`, `DDTensorCopyFromVec()`, `DDTensorCreateFromDMDA()`
@*/
PetscErrorCode DDTensorPlaceVec(DDTensor t, Vec v)
DD_CXX_TRY
{
  PetscInt     nv;
  PetscScalar *a;
  MPI_Comm     comm;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorPlaceVec"));
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorPlaceVec")); /* PETSc 3.18 here has no CUDA Vecs */
  DDCheckHeader(v, VEC_CLASSID, 2);
  comm = PetscObjectComm((PetscObject)t);
  PetscCheck(!t->placedvec, comm, PETSC_ERR_ARG_WRONGSTATE, "Tensor already wraps a Vec; call DDTensorResetVec() first");
  PetscCheck(!t->nsharedvecs, comm, PETSC_ERR_ARG_WRONGSTATE, "A Vec of DDTensorCreateVec() shares the tensor's storage (placing another Vec would move the storage away from it); destroy that Vec first");
  PetscCheck(t->dtype == DD_FLOAT64, comm, PETSC_ERR_ARG_WRONG, "Only a float64 tensor can wrap a PETSc Vec (this one is %s); use DDTensorCopyFromVec()", DDDataTypes[t->dtype]);
  PetscCall(VecGetLocalSize(v, &nv));
  DDCheckAll(comm, nv == t->layout.size, PETSC_ERR_ARG_SIZ, "Vec local size %" PetscInt_FMT " differs from the tensor's local storage size %" PetscInt_FMT " (bulk %" PetscInt_FMT "): it cannot be wrapped", nv, t->layout.size, t->layout.bulksize);
  DDCheckAll(comm, DDTensorStorageIsDofLast(t), PETSC_ERR_ARG_INCOMP, "The tensor's format (%s with %" PetscInt_FMT " local channels) does not store components last as a DMDA Vec does; set DD_FORMAT_CHANNELS_LAST or use DDTensorCopyFromVec()", DDTensorFormats[t->format], t->order > 1 ? t->layout.n[1] : 1);
  PetscCall(VecGetArray(v, &a));
  t->savedarray = t->array;
  t->array      = (void *)a;
  t->placedvec  = v;
  PetscCall(PetscObjectReference((PetscObject)v));
  PetscCall(PetscObjectStateIncrease((PetscObject)t)); /* other values than the storage's before */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorResetVec - Ends `DDTensorPlaceVec()`: the tensor returns to its own storage

  Collective

  Input Parameters:
+ t - the tensor
- v - the Vec given to `DDTensorPlaceVec()`

  Notes:
  The Vec keeps the values the tensor wrote into it; the tensor's own storage is as it was
  before `DDTensorPlaceVec()`.

  Level: intermediate

.seealso: `DDTensorPlaceVec()`
@*/
PetscErrorCode DDTensorResetVec(DDTensor t, Vec v)
DD_CXX_TRY
{
  PetscScalar     *a = (PetscScalar *)t->array;
  PetscObjectState vs;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorResetVec"));
  PetscCheck(t->placedvec && t->placedvec == v, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONG, "This Vec is not the one placed in the tensor");
  PetscCall(VecRestoreArray(v, &a));
  t->array      = t->savedarray;
  t->savedarray = NULL;
  PetscCall(PetscObjectStateGet((PetscObject)v, &vs));
  t->vecstatebase += vs; /* the content state never goes back (DDTensorContentState_Private()) */
  PetscCall(VecDestroy(&t->placedvec));
  PetscCall(PetscObjectStateIncrease((PetscObject)t)); /* its own storage's values again */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a device tensor goes through its host copy (copied back when written) */
template <class F>
static PetscErrorCode DDTensorVecCopy(DDTensor t, Vec v, const char fn[], PetscBool written, F &&f)
{
  PetscInt nv, perm[DD_MAX_DIM], a[DD_MAX_DIM], b[DD_MAX_DIM];
  void    *h;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, fn));
  DDCheckHeader(v, VEC_CLASSID, 2);
  PetscCall(VecGetLocalSize(v, &nv));
  DDCheckAll(PetscObjectComm((PetscObject)t), nv == t->layout.bulksize, PETSC_ERR_ARG_SIZ, "%s: Vec local size %" PetscInt_FMT " differs from the tensor's local bulk size %" PetscInt_FMT, fn, nv, t->layout.bulksize);
  ChannelsLastOrder(t->order, perm);
  LayoutBulkBox(t->layout, a, b);
  PetscCall(DDTensorGetHostArray_Private(t, &h));
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T    = decltype(z);
    T       *x = (T *)h;
    PetscInt i = 0;
    return f(x, perm, a, b, i);
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, written, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorCopyFromVec - Copies a DMDA-ordered Vec into the tensor's bulk

  Collective

  Input Parameters:
+ t - the tensor (any format, float32 or float64)
- v - a Vec whose local part is this rank's bulk in (N, spatial..., C) C order, as the global
      Vec of a DMDA with the tensor's ownership stores it

  Level: intermediate

.seealso: `DDTensorCopyToVec()`, `DDTensorPlaceVec()`
@*/
PetscErrorCode DDTensorCopyFromVec(DDTensor t, Vec v)
DD_CXX_TRY
{
  const PetscScalar *va;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorCopyFromVec"));
  DDCheckHeader(v, VEC_CLASSID, 2);
  PetscCall(VecGetArrayRead(v, &va));
  PetscCall(DDTensorVecCopy(t, v, "DDTensorCopyFromVec", PETSC_TRUE, [&](auto *x, const PetscInt *perm, const PetscInt *a, const PetscInt *b, PetscInt &i) -> PetscErrorCode {
    using T = std::remove_pointer_t<decltype(x)>;
    ForEachIndex(t->order, a, b, perm, [&](const PetscInt *j) { x[LayoutOffset(t->layout, j)] = (T)PetscRealPart(va[i++]); });
    return PETSC_SUCCESS;
  }));
  PetscCall(VecRestoreArrayRead(v, &va));
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorCopyToVec - Copies the tensor's bulk into a DMDA-ordered Vec

  Collective

  Input Parameters:
+ t - the tensor
- v - a Vec whose local part receives this rank's bulk in (N, spatial..., C) C order

  Level: intermediate

.seealso: `DDTensorCopyFromVec()`
@*/
PetscErrorCode DDTensorCopyToVec(DDTensor t, Vec v)
DD_CXX_TRY
{
  PetscScalar *va;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorCopyToVec"));
  DDCheckHeader(v, VEC_CLASSID, 2);
  PetscCall(VecGetArray(v, &va));
  PetscCall(DDTensorVecCopy(t, v, "DDTensorCopyToVec", PETSC_FALSE, [&](auto *x, const PetscInt *perm, const PetscInt *a, const PetscInt *b, PetscInt &i) -> PetscErrorCode {
    ForEachIndex(t->order, a, b, perm, [&](const PetscInt *j) { va[i++] = (PetscScalar)x[LayoutOffset(t->layout, j)]; });
    return PETSC_SUCCESS;
  }));
  PetscCall(VecRestoreArray(v, &va));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a Vec of DDTensorCreateVec() and its tensor, in a container composed with the Vec as "DDTensor" (which
   holds the tensor); v is NULL once that Vec is gone. PETSc copies composed objects to a VecDuplicate(),
   which has storage of its own and may outlive v: so v leaves the tensor's list in its own destroy
   (SharedVecDestroy(), run by VecDestroy() before the composed objects go), not when the container goes */
struct SharedVec {
  DDTensor t;
  Vec      v;
};

/* the last state of the Vec kept in the tensor's content state, and the Vec off the tensor's list */
static PetscErrorCode Unshare(SharedVec *sv)
{
  DDTensor         t = sv->t;
  PetscObjectState vs;

  PetscFunctionBegin;
  if (!sv->v) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt i = 0; i < t->nsharedvecs; i++)
    if (t->sharedvecs[i] == sv->v) {
      PetscCall(PetscObjectStateGet((PetscObject)sv->v, &vs));
      t->vecstatebase += vs;
      t->sharedvecs[i] = t->sharedvecs[--t->nsharedvecs];
      break;
    }
  if (!t->nsharedvecs) PetscCall(PetscFree(t->sharedvecs));
  sv->v = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* VECMPI's destroy (every shared Vec is one: VecCreateMPIWithArray()), which SharedVecDestroy() replaces */
static PetscErrorCode (*mpiVecDestroy)(Vec) = NULL;

/* the shared Vec's (and, where PETSc copied the operations, a duplicate's) destroy: off the list if it is the shared one */
static PetscErrorCode SharedVecDestroy(Vec v)
{
  PetscContainer c  = NULL;
  SharedVec     *sv = NULL;

  PetscFunctionBegin;
  PetscCall(PetscObjectQuery((PetscObject)v, "DDTensor", (PetscObject *)&c));
  if (c) PetscCall(PetscContainerGetPointer(c, (void **)&sv));
  if (sv && sv->v == v) PetscCall(Unshare(sv));
  PetscCall((*mpiVecDestroy)(v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the container goes with the last Vec holding it: the tensor is released */
static PetscErrorCode ReleaseSharedVec(void *ctx)
{
  SharedVec *sv = (SharedVec *)ctx;

  PetscFunctionBegin;
  PetscCall(Unshare(sv)); /* already done by SharedVecDestroy(); kept for a Vec whose destroy was replaced since */
  PetscCall(DDTensorDestroy(&sv->t));
  PetscCall(PetscFree(sv));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorCreateVec - Creates a PETSc Vec that shares the tensor's bulk storage (no copy)

  Collective

  Input Parameter:
. t - a float64 tensor without halo (its bulk is its whole storage)

  Output Parameter:
. v - an MPI Vec on the tensor's communicator whose local array is the tensor's storage, in
      the tensor's storage order (for the channels-last format of `DDTensorCreateFromDMDA()`
      this is the DMDA's order). The Vec holds a reference to the tensor.

  Notes:
  The tensor's halo and format cannot change while the Vec exists (they would move the storage
  away from it): `DDTensorSetHalo()`, `DDTensorSetFormat()` and `DDTensorPlaceVec()` are errors until
  it is destroyed; a tensor that wraps a Vec (`DDTensorPlaceVec()`) is an error here.
  Both sides see the other's changes: a write through the tensor changes the Vec's state (PETSc
  recomputes a norm it cached), and a change through the Vec after `DDLayerForward()` read the
  tensor makes `DDLayerBackward()` fail, as a change of the tensor itself does.

  Level: intermediate

.seealso: `DDTensorPlaceVec()`, `DDTensorCopyToVec()`
@*/
PetscErrorCode DDTensorCreateVec(DDTensor t, Vec *v)
DD_CXX_TRY
{
  MPI_Comm comm;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorCreateVec"));
  PetscCall(DDTensorCheckHost_Private(t, "DDTensorCreateVec"));
  DDCheckPointer(v, 2);
  comm = PetscObjectComm((PetscObject)t);
  PetscCheck(t->dtype == DD_FLOAT64, comm, PETSC_ERR_ARG_WRONG, "Only a float64 tensor can share its storage with a PETSc Vec (this one is %s)", DDDataTypes[t->dtype]);
  PetscCheck(!t->placedvec, comm, PETSC_ERR_ARG_WRONGSTATE, "The tensor wraps a Vec (DDTensorPlaceVec()); a Vec sharing that storage would outlive DDTensorResetVec(): use the placed Vec itself");
  DDCheckAll(comm, LayoutBulkIsContiguous(t->layout), PETSC_ERR_ARG_INCOMP, "The tensor's storage has a halo or block padding (%" PetscInt_FMT " entries for a bulk of %" PetscInt_FMT "); a Vec cannot share it", t->layout.size, t->layout.bulksize);
  PetscCall(VecCreateMPIWithArray(comm, 1, t->layout.bulksize, PETSC_DECIDE, (PetscScalar *)t->array, v));
  { /* the Vec holds the tensor through a container that, when the Vec goes, takes the Vec off the tensor's list */
    SharedVec     *sv;
    PetscContainer c;
    PetscCall(PetscNew(&sv));
    sv->t       = t;
    sv->v       = *v;
    mpiVecDestroy      = (*v)->ops->destroy;
    (*v)->ops->destroy = SharedVecDestroy;
    PetscCall(PetscObjectReference((PetscObject)t));
    PetscCall(PetscRealloc((size_t)(t->nsharedvecs + 1) * sizeof(Vec), &t->sharedvecs));
    t->sharedvecs[t->nsharedvecs++] = *v;
    PetscCall(PetscContainerCreate(PETSC_COMM_SELF, &c));
    PetscCall(PetscContainerSetPointer(c, sv));
    PetscCall(PetscContainerSetUserDestroy(c, ReleaseSharedVec));
    PetscCall(PetscObjectCompose((PetscObject)*v, "DDTensor", (PetscObject)c));
    PetscCall(PetscContainerDestroy(&c));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
