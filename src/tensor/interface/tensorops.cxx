/*
  DDTensor: accessors, arithmetic over the bulk, deterministic reductions, and scatter/gather.
*/
#include <sys/ddcxx.hpp>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <tensor/argcheck.hpp>
#include <vector>
#include <cmath>
#include <type_traits>

using namespace ddnn;

#define DDTensorCheck(t, fn) PetscCall(DDTensorCheckSetUp_Private(t, fn))

/*@
  DDTensorGetOrder - Number of dimensions

  Not collective

  Level: beginner

.seealso: `DDTensorGetShape()`
@*/
PetscErrorCode DDTensorGetOrder(DDTensor t, PetscInt *order)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckPointer(order, 2);
  *order = t->order;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorGetShape - Global shape (C order)

  Not collective

  Level: beginner

.seealso: `DDTensorGetOrder()`, `DDTensorGetCorners()`
@*/
PetscErrorCode DDTensorGetShape(DDTensor t, const PetscInt *shape[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckPointer(shape, 2);
  *shape = t->shape;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetSize - Number of entries of the global tensor

  Not collective

  Level: beginner

.seealso: `DDTensorGetLocalSize()`
@*/
PetscErrorCode DDTensorGetSize(DDTensor t, PetscInt *size)
DD_CXX_TRY
{
  PetscInt64 s = 1;

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckPointer(size, 2);
  for (PetscInt k = 0; k < t->order; k++) s *= t->shape[k];
  PetscCheck(s <= PETSC_MAX_INT, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Global size %" PetscInt64_FMT " does not fit a PetscInt", s);
  *size = (PetscInt)s;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetDataType - Element type

  Not collective

  Level: beginner

.seealso: `DDTensorSetDataType()`
@*/
PetscErrorCode DDTensorGetDataType(DDTensor t, DDDataType *dt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckPointer(dt, 2);
  *dt = t->dtype;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetPartition - The tensor's partition (not a new reference)

  Not collective

  Level: beginner

.seealso: `DDTensorSetPartition()`
@*/
PetscErrorCode DDTensorGetPartition(DDTensor t, DDPartition *part)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckPointer(part, 2);
  *part = t->part;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetFormat - Local storage format

  Not collective

  Level: intermediate

.seealso: `DDTensorSetFormat()`
@*/
PetscErrorCode DDTensorGetFormat(DDTensor t, DDTensorFormat *fmt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckPointer(fmt, 2);
  *fmt = t->format;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorGetOwnershipRanges - Ownership offsets along one dimension

  Not collective

  Output Parameter:
. ranges - P_dim + 1 offsets: coordinate p owns [ranges[p], ranges[p+1]) (for a replicated
           dimension every coordinate owns the whole extent)

  Level: intermediate

.seealso: `DDTensorSetOwnershipRanges()`, `DMDAGetOwnershipRanges()`
@*/
PetscErrorCode DDTensorGetOwnershipRanges(DDTensor t, PetscInt dim, const PetscInt *ranges[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetOwnershipRanges");
  PetscCheck(dim >= 0 && dim < t->order, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "DDTensorGetOwnershipRanges(): dimension %" PetscInt_FMT " is outside the tensor's [0, %" PetscInt_FMT ")", dim, t->order);
  DDCheckPointer(ranges, 3);
  *ranges = t->ranges[dim];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetReplicated - Whether a dimension is replicated

  Not collective

  Input Parameters:
+ t   - the tensor
- dim - the dimension, in [0, order) (in [0, DD_MAX_DIM) while the tensor has no shape yet)

  Output Parameter:
. flg - `PETSC_TRUE` when dim is replicated

  Notes:
  A dim outside the range is an error (`PETSC_ERR_ARG_OUTOFRANGE`), a NULL flg too (`PETSC_ERR_ARG_NULL`).

  Level: intermediate

.seealso: `DDTensorSetReplicated()`
@*/
PetscErrorCode DDTensorGetReplicated(DDTensor t, PetscInt dim, PetscBool *flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  {
    const PetscInt n = t->order > 0 ? t->order : DD_MAX_DIM;
    PetscCheck(dim >= 0 && dim < n, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "DDTensorGetReplicated(): dimension %" PetscInt_FMT " is outside [0, %" PetscInt_FMT ")%s", dim, n, t->order > 0 ? " (the tensor's order)" : " (the tensor has no shape yet)");
  }
  DDCheckPointer(flg, 3);
  *flg = t->replicated[dim];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetCorners - Global start and size of this rank's piece (its bulk), per dimension

  Not collective

  Notes:
  Like `DMDAGetCorners()`. Idle ranks get zero sizes.

  Level: beginner

.seealso: `DDTensorGetHalo()`
@*/
PetscErrorCode DDTensorGetCorners(DDTensor t, PetscInt start[], PetscInt n[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetCorners");
  for (PetscInt k = 0; k < t->order; k++) {
    if (start) start[k] = t->layout.start[k];
    if (n) n[k] = t->layout.n[k];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetLocalSize - Number of entries in this rank's bulk

  Not collective

  Level: beginner

.seealso: `DDTensorGetLocalStorageSize()`
@*/
PetscErrorCode DDTensorGetLocalSize(DDTensor t, PetscInt *n)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetLocalSize");
  DDCheckPointer(n, 2);
  *n = t->layout.bulksize;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetHalo - This rank's halo widths

  Not collective

  Level: intermediate

.seealso: `DDTensorSetHalo()`
@*/
PetscErrorCode DDTensorGetHalo(DDTensor t, PetscInt lo[], PetscInt hi[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  for (PetscInt k = 0; k < t->order; k++) {
    if (lo) lo[k] = t->setupcalled ? t->layout.lo[k] : t->lo[k];
    if (hi) hi[k] = t->setupcalled ? t->layout.hi[k] : t->hi[k];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetLocalStorageSize - Number of entries of the local storage (bulk, halo and block padding)

  Not collective

  Level: intermediate

.seealso: `DDTensorGetArray()`
@*/
PetscErrorCode DDTensorGetLocalStorageSize(DDTensor t, PetscInt *n)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetLocalStorageSize");
  DDCheckPointer(n, 2);
  *n = t->layout.size;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetLocalStrides - Element strides of each dimension in the local storage

  Not collective

  Notes:
  For plain and channels-last formats, entry j (local storage coordinates, halo included,
  0 <= j[k] < lo[k] + n[k] + hi[k]) is at sum_k strides[k] j[k]. Errors for the blocked
  format, whose offsets are not strided; use `DDTensorGetLocalOffset()`.

  Level: intermediate

.seealso: `DDTensorGetLocalOffset()`, `DDTensorGetArray()`
@*/
PetscErrorCode DDTensorGetLocalStrides(DDTensor t, PetscInt strides[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetLocalStrides");
  PetscCheck(t->layout.bdim < 0, PETSC_COMM_SELF, PETSC_ERR_SUP, "The blocked format has no strides; use DDTensorGetLocalOffset()");
  DDCheckPointer(strides, 2);
  for (PetscInt k = 0; k < t->order; k++) strides[k] = t->layout.stride[k];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorGetLocalOffset - Offset in the local storage of a global index

  Not collective

  Input Parameters:
+ t - the tensor
- g - global index (inside this rank's bulk or halo)

  Output Parameter:
. off - offset into the array of `DDTensorGetArray()`

  Level: intermediate

.seealso: `DDTensorGetLocalStrides()`
@*/
PetscErrorCode DDTensorGetLocalOffset(DDTensor t, const PetscInt g[], PetscInt *off)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetLocalOffset");
  DDCheckPointer(g, 2);
  DDCheckPointer(off, 3);
  for (PetscInt k = 0; k < t->order; k++) {
    PetscInt j = g[k] - t->layout.start[k] + t->layout.lo[k];
    PetscCheck(j >= 0 && j < t->layout.alloc[k], PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Global index %" PetscInt_FMT " in dimension %" PetscInt_FMT " is outside this rank's storage [%" PetscInt_FMT ", %" PetscInt_FMT ")", g[k], k, t->layout.start[k] - t->layout.lo[k], t->layout.start[k] + t->layout.n[k] + t->layout.hi[k]);
  }
  *off = LayoutOffsetGlobal(t->layout, g);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorIsActive - Whether this rank holds a piece of the tensor

  Not collective

  Level: beginner

.seealso: `DDPartitionIsActive()`
@*/
PetscErrorCode DDTensorIsActive(DDTensor t, PetscBool *flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorIsActive");
  DDCheckPointer(flg, 2);
  *flg = t->active;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorGetArray - Access to the local storage (bulk and halo), of the tensor's element type

  Not collective

  Notes:
  The array is float* or double* as the data type says; index it with
  `DDTensorGetLocalStrides()` / `DDTensorGetLocalOffset()`. Return it with `DDTensorRestoreArray()`.
  It is always host memory: for a device tensor (`DDTensorSetMemType()`) it is a host copy of the
  storage, made here and copied back to the device by `DDTensorRestoreArray()` (PETSc's
  `VecGetArray()` on a GPU vector); `DDTensorGetArrayAndMemType()` gives the device pointer.

  Level: beginner

.seealso: `DDTensorRestoreArray()`, `DDTensorGetArrayRead()`
@*/
PetscErrorCode DDTensorGetArray(DDTensor t, void **a)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetArray");
  DDCheckPointer(a, 2);
  PetscCall(DDTensorGetHostArray_Private(t, a));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorGetMemType - Where a tensor's storage lives

  Not collective

  Input Parameter:
. t - the tensor (set up)

  Output Parameter:
. mtype - `DD_MEMTYPE_HOST` or `DD_MEMTYPE_DEVICE` (see `DDTensorSetMemType()`)

  Level: intermediate

.seealso: `DDTensorGetArrayAndMemType()`, `DDMemType`
@*/
PetscErrorCode DDTensorGetMemType(DDTensor t, DDMemType *mtype)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetMemType");
  DDCheckPointer(mtype, 2);
  *mtype = t->memtype;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorGetArrayAndMemType - The local storage of a tensor where it lives, and its memory type

  Not collective

  Input Parameter:
. t - the tensor (set up)

  Output Parameters:
+ a     - the storage (the bulk and the halo, in the tensor's format; see `DDTensorGetLocalStrides()`)
- mtype - `DD_MEMTYPE_HOST` or `DD_MEMTYPE_DEVICE` (optional: pass NULL)

  Notes:
  `DDTensorGetArray()` always returns host memory; this returns the array where it lives, for code
  (a kernel, a CUDA-aware MPI call) that works on either. Return it with
  `DDTensorRestoreArrayAndMemType()`.

  Level: intermediate

.seealso: `DDTensorGetArray()`, `DDTensorGetMemType()`
@*/
PetscErrorCode DDTensorGetArrayAndMemType(DDTensor t, void **a, DDMemType *mtype)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetArrayAndMemType");
  DDCheckPointer(a, 2);
  *a = t->array;
  if (mtype) *mtype = t->memtype;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorRestoreArrayAndMemType - Returns the array of `DDTensorGetArrayAndMemType()`

  Not collective

  Level: intermediate

.seealso: `DDTensorGetArrayAndMemType()`
@*/
PetscErrorCode DDTensorRestoreArrayAndMemType(DDTensor t, void **a)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorRestoreArrayAndMemType");
  PetscCall(DDTensorStateIncrease_Private(t));
  if (a) *a = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorRestoreArray - Returns the array of `DDTensorGetArray()`

  Not collective

  Notes:
  For a device tensor the host copy is copied back to the device.

  Level: beginner

.seealso: `DDTensorGetArray()`
@*/
PetscErrorCode DDTensorRestoreArray(DDTensor t, void **a)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, a)); /* a device tensor: its host copy goes back */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorGetArrayRead - Read-only access to the local storage

  Not collective

  Notes:
  Host memory: for a device tensor a host copy of its storage, made here (not copied back).

  Level: beginner

.seealso: `DDTensorRestoreArrayRead()`
@*/
PetscErrorCode DDTensorGetArrayRead(DDTensor t, const void **a)
DD_CXX_TRY
{
  void *h;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGetArrayRead");
  DDCheckPointer(a, 2);
  PetscCall(DDTensorGetHostArray_Private(t, &h));
  *a = h;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a local scan of the bulk of t: bit 1 of *flags if a nan, bit 2 if an inf (DDNetSetCheckFinite()'s checks, DDOptimizerStep()'s gradients) */
PetscErrorCode DDTensorFiniteFlags_Private(DDTensor t, int *flags)
{
  const void *arr;

  PetscFunctionBegin;
  *flags = 0;
  if (!t || !t->active || !t->layout.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDTensorGetArrayRead(t, &arr));
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T    = decltype(z);
    const T *a = (const T *)arr;
    ForEachBulkRun(t->layout, [&](PetscInt off, PetscInt len) {
      for (PetscInt i = 0; i < len; i++) {
        const T v = a[off + i];
        if (std::isnan(v)) *flags |= 1;
        else if (std::isinf(v)) *flags |= 2;
      }
    });
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorRestoreArrayRead(t, &arr));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDTensorRestoreArrayRead - Returns the array of `DDTensorGetArrayRead()`

  Not collective

  Input Parameters:
+ t - the tensor
- a - the address of the array pointer, set to NULL here; may be NULL (as for PETSc's
      `VecRestoreArrayRead()`)

  Level: beginner

.seealso: `DDTensorGetArrayRead()`
@*/
PetscErrorCode DDTensorRestoreArrayRead(DDTensor t, const void **a)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  if (a) *a = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------- */

/*@
  DDTensorZeroEntries - Zeros the whole local storage, bulk and halo

  Not collective

  Level: beginner

.seealso: `DDTensorSet()`, `DDTensorZeroHalo()`
@*/
PetscErrorCode DDTensorZeroEntries(DDTensor t)
DD_CXX_TRY
{
  size_t                         es;
  const struct _DDBackendMemOps *mem;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorZeroEntries");
  PetscCall(DDDataTypeGetSize(t->dtype, &es));
  PetscCall(DDMemOps_Private(t->memtype, &mem));
  PetscCall(mem->set(t->array, 0, es * t->layout.size));
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorZeroHalo - Zeros the halo region, leaving the bulk as it is

  Not collective

  Level: intermediate

.seealso: `DDTensorZeroEntries()`
@*/
PetscErrorCode DDTensorZeroHalo(DDTensor t)
DD_CXX_TRY
{
  const DDLayout &L = t->layout;
  void           *h;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorZeroHalo");
  if (L.size == L.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: through its host copy */
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *a    = (T *)h;
    /* disjoint slabs: for dimension k, the halo sides, bulk in dims < k, everything in dims > k */
    for (PetscInt k = 0; k < L.order; k++) {
      for (int side = 0; side < 2; side++) {
        PetscInt lo[DD_MAX_DIM], hi[DD_MAX_DIM];
        for (PetscInt m = 0; m < L.order; m++) {
          if (m < k) {
            lo[m] = L.lo[m];
            hi[m] = L.lo[m] + L.n[m];
          } else {
            lo[m] = 0;
            hi[m] = L.alloc[m];
          }
        }
        if (side == 0) hi[k] = L.lo[k];
        else lo[k] = L.lo[k] + L.n[k];
        ForEachRun(L, lo, hi, [&](PetscInt off, PetscInt len) {
          for (PetscInt i = 0; i < len; i++) a[off + i] = 0;
        });
      }
    }
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* host loops over the bulk take the host storage (a device tensor's host copy: DDTensorGetHostArray_Private()) */
template <class T, class F>
static void BulkApply(DDTensor t, const void *h, F &&f)
{
  const T *a = (const T *)h;
  ForEachBulkRun(t->layout, [&](PetscInt off, PetscInt len) { f(a + off, len); });
}

/* the vector operations of two tensors' memory type (they must share it) */
static PetscErrorCode TensorPairOps(DDTensor x, DDTensor y, const char fn[], const struct _DDBackendVecOps **ops)
{
  PetscFunctionBegin;
  PetscCheck(x->memtype == y->memtype, PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "%s() needs both tensors in the same memory (%s and %s)", fn, DDMemTypes[x->memtype], DDMemTypes[y->memtype]);
  PetscCall(DDVecOps_Private(x->memtype, ops));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorSet - Sets every bulk entry to a value

  Not collective

  Level: beginner

.seealso: `DDTensorZeroEntries()`
@*/
PetscErrorCode DDTensorSet(DDTensor t, PetscReal v)
DD_CXX_TRY
{
  const struct _DDBackendVecOps *ops;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorSet");
  PetscCall(DDVecOps_Private(t->memtype, &ops));
  PetscCall(ops->set(t->dtype, &t->layout, t->array, v));
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorScale - Multiplies the bulk by a scalar

  Not collective

  Level: beginner

.seealso: `DDTensorAXPY()`
@*/
PetscErrorCode DDTensorScale(DDTensor t, PetscReal a)
DD_CXX_TRY
{
  const struct _DDBackendVecOps *ops;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorScale");
  PetscCall(DDVecOps_Private(t->memtype, &ops));
  PetscCall(ops->scale(t->dtype, &t->layout, t->array, a));
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

template <class T, class F>
static void PairApply(DDTensor x, const void *hx, DDTensor y, const void *hy, F &&f)
{
  const T *a = (const T *)hx, *b = (const T *)hy;
  ForEachBulkRunPair(x->layout, y->layout, [&](PetscInt ox, PetscInt oy, PetscInt len) { f(a + ox, b + oy, len); });
}

/*@
  DDTensorCopy - Copies the bulk of x into y

  Not collective

  Input Parameters:
+ x - source
- y - destination, distributed alike (`DDTensorCompatible()`); halos, formats and memory types may differ

  Notes:
  Between host and device memory (`DDTensorSetMemType()`) the copy goes through a device buffer
  holding the host tensor's whole storage: one host-device transfer and one copy kernel (a host
  destination's halo entries are kept).

  Level: beginner

.seealso: `DDTensorAXPY()`, `DDTensorCompatible()`, `DDTensorSetMemType()`
@*/
PetscErrorCode DDTensorCopy(DDTensor x, DDTensor y)
DD_CXX_TRY
{
  const struct _DDBackendVecOps *ops;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorCopy");
  DDTensorCheck(y, "DDTensorCopy");
  if (x == y) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDTensorCheckCompatible_Private(x, y, "DDTensorCopy"));
  if (x->memtype != y->memtype) { /* host <-> device: the host storage staged in device memory */
    const DDTensor                 h = x->memtype == DD_MEMTYPE_HOST ? x : y, d = h == x ? y : x;
    const struct _DDBackendMemOps *mem;
    size_t                         es;
    void                          *tmp = NULL;
    PetscCall(DDMemOps_Private(d->memtype, &mem));
    PetscCall(DDVecOps_Private(d->memtype, &ops));
    PetscCall(DDDataTypeGetSize(h->dtype, &es));
    PetscCall(mem->malloc(es * (size_t)h->layout.size, &tmp));
    PetscCall(mem->copy(tmp, h->array, es * (size_t)h->layout.size));
    if (h == x) PetscCall(ops->copy(x->dtype, &x->layout, tmp, &y->layout, y->array));
    else {
      PetscCall(ops->copy(x->dtype, &x->layout, x->array, &y->layout, tmp));
      PetscCall(mem->copy(y->array, tmp, es * (size_t)y->layout.size));
    }
    PetscCall(mem->free(tmp));
    PetscCall(DDTensorStateIncrease_Private(y));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(TensorPairOps(x, y, "DDTensorCopy", &ops));
  PetscCall(ops->copy(x->dtype, &x->layout, x->array, &y->layout, y->array));
  PetscCall(DDTensorStateIncrease_Private(y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorAXPY - y = y + a x on the bulk

  Not collective

  Level: beginner

.seealso: `DDTensorAXPBY()`
@*/
PetscErrorCode DDTensorAXPY(DDTensor y, PetscReal alpha, DDTensor x)
DD_CXX_TRY
{
  const struct _DDBackendVecOps *ops;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorAXPY");
  DDTensorCheck(y, "DDTensorAXPY");
  PetscCall(DDTensorCheckCompatible_Private(x, y, "DDTensorAXPY"));
  PetscCall(TensorPairOps(x, y, "DDTensorAXPY", &ops));
  PetscCall(ops->axpby(x->dtype, alpha, &x->layout, x->array, 1.0, &y->layout, y->array));
  PetscCall(DDTensorStateIncrease_Private(y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorAXPBY - y = a x + b y on the bulk

  Not collective

  Level: beginner

.seealso: `DDTensorAXPY()`
@*/
PetscErrorCode DDTensorAXPBY(DDTensor y, PetscReal alpha, PetscReal beta, DDTensor x)
DD_CXX_TRY
{
  const struct _DDBackendVecOps *ops;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorAXPBY");
  DDTensorCheck(y, "DDTensorAXPBY");
  PetscCall(DDTensorCheckCompatible_Private(x, y, "DDTensorAXPBY"));
  PetscCall(TensorPairOps(x, y, "DDTensorAXPBY", &ops));
  PetscCall(ops->axpby(x->dtype, alpha, &x->layout, x->array, beta, &y->layout, y->array));
  PetscCall(DDTensorStateIncrease_Private(y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Sum of per-rank partial values, added in rank order: the same result on every run */
static PetscErrorCode DeterministicSum(MPI_Comm comm, PetscReal local, PetscReal *global)
{
  PetscMPIInt            size;
  std::vector<PetscReal> all;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  all.resize(size);
  PetscCallMPI(MPI_Allgather(&local, 1, MPIU_REAL, all.data(), 1, MPIU_REAL, comm));
  PetscReal s = 0;
  for (PetscMPIInt r = 0; r < size; r++) s += all[r];
  *global = s;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The result r of a collective reduction, stored through the caller's pointer: a NULL pointer is an
   error on the rank that passed it, raised after the collective so that no other rank waits in it */
#define DDStoreResult(ptr, arg, r) \
  do { \
    DDCheckPointer(ptr, arg); \
    *(ptr) = (r); \
  } while (0)

/*
  The device reductions of a tensor's memory (vec.dot, vec.norms of its backend): a device tensor's
  Dot/Sum/Norm reduce on the device instead of copying the whole storage to the host. NULL for host
  memory, whose loops below keep their order (and bits).
*/
static PetscErrorCode DeviceReductions(DDTensor t, const struct _DDBackendVecOps **ops)
{
  PetscFunctionBegin;
  *ops = NULL;
  if (t->memtype == DD_MEMTYPE_DEVICE) {
    PetscCall(DDVecOps_Private(t->memtype, ops));
    if (!(*ops)->dot || !(*ops)->norms) *ops = NULL;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorDot - Inner product of two tensors over the whole distributed memory

  Collective

  Output Parameter:
. d - sum over all ranks of the bulk entries' products (paper 000, eq. 2); copies on
      replicated dimensions each count. Not NULL: a NULL d is an error (`PETSC_ERR_ARG_NULL`) on
      the rank that passes it, raised after the reduction (no rank waits)

  Notes:
  Accumulates in double precision; the per-rank sums are added in rank order so repeated
  runs give the same bits. Device tensors (`DDTensorSetMemType()`) are reduced on the device,
  deterministically but in another order than the host's loop (equal to rounding).

  Level: beginner

.seealso: `DDTensorNorm()`
@*/
PetscErrorCode DDTensorDot(DDTensor x, DDTensor y, PetscReal *d)
DD_CXX_TRY
{
  PetscReal                      local = 0, r;
  void                          *hx, *hy;
  const struct _DDBackendVecOps *dev;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorDot");
  DDTensorCheck(y, "DDTensorDot");
  PetscCall(DDTensorCheckCompatible_Private(x, y, "DDTensorDot"));
  PetscCall(DeviceReductions(x, &dev));
  if (dev && y->memtype == x->memtype) { /* both on the device: the sum in double there (another order than the host loop's) */
    PetscCall(dev->dot(x->dtype, &x->layout, x->array, &y->layout, y->array, &local));
    PetscCall(DeterministicSum(PetscObjectComm((PetscObject)x), local, &r));
    DDStoreResult(d, 3, r);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDTensorGetHostArray_Private(x, &hx));
  if (x != y) PetscCall(DDTensorGetHostArray_Private(y, &hy));
  else hy = hx;
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PairApply<T>(x, hx, y, hy, [&](const T *a, const T *b, PetscInt n) {
      for (PetscInt i = 0; i < n; i++) local += (PetscReal)a[i] * (PetscReal)b[i];
    });
    return PETSC_SUCCESS;
  }));
  PetscCall(DeterministicSum(PetscObjectComm((PetscObject)x), local, &r));
  DDStoreResult(d, 3, r);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSum - Sum of all bulk entries over the distributed memory

  Collective

  Notes:
  Accumulates in double precision, as `DDTensorDot()` (device tensors: on the device). A NULL s
  is an error on the rank that passes it, after the reduction.

  Level: beginner

.seealso: `DDTensorDot()`
@*/
PetscErrorCode DDTensorSum(DDTensor x, PetscReal *s)
DD_CXX_TRY
{
  PetscReal                      local = 0, sum;
  void                          *hx;
  const struct _DDBackendVecOps *dev;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorSum");
  PetscCall(DeviceReductions(x, &dev));
  if (dev) {
    double r[4];
    PetscCall(dev->norms(x->dtype, &x->layout, x->array, r));
    PetscCall(DeterministicSum(PetscObjectComm((PetscObject)x), (PetscReal)r[0], &sum));
    DDStoreResult(s, 2, sum);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDTensorGetHostArray_Private(x, &hx));
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    BulkApply<T>(x, hx, [&](const T *a, PetscInt n) {
      for (PetscInt i = 0; i < n; i++) local += (PetscReal)a[i];
    });
    return PETSC_SUCCESS;
  }));
  PetscCall(DeterministicSum(PetscObjectComm((PetscObject)x), local, &sum));
  DDStoreResult(s, 2, sum);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorNorm - Norm of the tensor over the distributed memory

  Collective

  Input Parameters:
+ x    - the tensor
- type - `NORM_1`, `NORM_2` or `NORM_INFINITY`

  Notes:
  Sums accumulate in double precision, as `DDTensorDot()`. Device tensors are reduced on the
  device; there a NaN entry makes every norm NaN, `NORM_INFINITY` included (the host's maximum
  skips NaN entries). A NULL nrm is an error on the rank that passes it, after the reduction.

  Level: beginner

.seealso: `DDTensorDot()`
@*/
PetscErrorCode DDTensorNorm(DDTensor x, NormType type, PetscReal *nrm)
DD_CXX_TRY
{
  PetscReal                      local = 0, r;
  void                          *hx;
  const struct _DDBackendVecOps *dev;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorNorm");
  PetscCheck(type == NORM_1 || type == NORM_2 || type == NORM_INFINITY, PetscObjectComm((PetscObject)x), PETSC_ERR_SUP, "DDTensorNorm(): norm type %s is not supported (NORM_1, NORM_2 or NORM_INFINITY)", ((int)type >= (int)NORM_1 && (int)type <= (int)NORM_1_AND_2) ? NormTypes[type] : "(out of range)");
  PetscCall(DeviceReductions(x, &dev));
  if (dev) { /* the device's sums (another order than the host loop's) and its maximum (NaN wins there) */
    double r[4];
    PetscCall(dev->norms(x->dtype, &x->layout, x->array, r));
    local = (PetscReal)(type == NORM_1 ? r[1] : type == NORM_2 ? r[2] : r[3]);
  } else {
    PetscCall(DDTensorGetHostArray_Private(x, &hx));
    PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkApply<T>(x, hx, [&](const T *a, PetscInt n) {
        for (PetscInt i = 0; i < n; i++) {
          PetscReal v = PetscAbsReal((PetscReal)a[i]);
          if (type == NORM_INFINITY) local = PetscMax(local, v);
          else if (type == NORM_1) local += v;
          else local += v * v;
        }
      });
      return PETSC_SUCCESS;
    }));
  }
  if (type == NORM_INFINITY) PetscCall(MPIU_Allreduce(&local, &r, 1, MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)x)));
  else PetscCall(DeterministicSum(PetscObjectComm((PetscObject)x), local, &r));
  if (type == NORM_2) r = PetscSqrtReal(r);
  DDStoreResult(nrm, 3, r);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  DDTensorNorm2SquaredSum_Private - sum_i ||x_i||_2^2 over n tensors, in one collective on comm

  Collective on comm (every tensor's communicator must be comm or a subset of it; a rank may hold
  any of the tensors: the others contribute nothing)

  Notes:
  Each rank adds the squares of the bulks of its pieces (every copy of a replicated dimension
  counts, as in DDTensorNorm()), tensor after tensor, in double precision with eight partial sums
  per run (so not the bits of DDTensorNorm()'s one running sum: equal to rounding); the per-rank
  sums are added in rank order (the same bits on every run). A device tensor's squares are summed
  on the device (deterministic, another order). The optimizer's global gradient norm: one reduction per step
  instead of one per parameter.
*/
PETSC_EXTERN PetscErrorCode DDTensorNorm2SquaredSum_Private(MPI_Comm comm, PetscInt n, const DDTensor x[], PetscReal *sq)
{
  PetscReal local = 0;

  PetscFunctionBegin;
  for (PetscInt i = 0; i < n; i++) {
    void                          *hx;
    const struct _DDBackendVecOps *dev;
    DDTensorCheck(x[i], "DDTensorNorm2SquaredSum_Private");
    PetscCall(DeviceReductions(x[i], &dev));
    if (dev) { /* a device tensor: its sum of squares on the device */
      double r[4];
      PetscCall(dev->norms(x[i]->dtype, &x[i]->layout, x[i]->array, r));
      local += (PetscReal)r[2];
      continue;
    }
    PetscCall(DDTensorGetHostArray_Private(x[i], &hx));
    PetscCall(DispatchType(x[i]->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      BulkApply<T>(x[i], hx, [&](const T *a, PetscInt m) {
        /* eight partial sums (a fixed order: the same bits on every run), which the compiler vectorizes */
        double   acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        PetscInt k      = 0;
        for (; k + 8 <= m; k += 8)
          for (int u = 0; u < 8; u++) {
            const double v = (double)a[k + u];
            acc[u] += v * v;
          }
        for (; k < m; k++) {
          const double v = (double)a[k];
          acc[0] += v * v;
        }
        local += (PetscReal)(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
      });
      return PETSC_SUCCESS;
    }));
  }
  PetscCall(DeterministicSum(comm, local, sq));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorMaxAbsDiff - max |x - y| over the bulk of all ranks

  Collective

  Notes:
  A NULL diff is an error on the rank that passes it, after the reduction.

  Level: intermediate

.seealso: `DDTensorNorm()`
@*/
PetscErrorCode DDTensorMaxAbsDiff(DDTensor x, DDTensor y, PetscReal *diff)
DD_CXX_TRY
{
  PetscReal local = 0, r;
  void     *hx, *hy;

  PetscFunctionBegin;
  DDTensorCheck(x, "DDTensorMaxAbsDiff");
  DDTensorCheck(y, "DDTensorMaxAbsDiff");
  PetscCall(DDTensorCheckCompatible_Private(x, y, "DDTensorMaxAbsDiff"));
  PetscCall(DDTensorGetHostArray_Private(x, &hx));
  if (x != y) PetscCall(DDTensorGetHostArray_Private(y, &hy));
  else hy = hx;
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PairApply<T>(x, hx, y, hy, [&](const T *a, const T *b, PetscInt n) {
      for (PetscInt i = 0; i < n; i++) {
        PetscReal v = PetscAbsReal((PetscReal)a[i] - (PetscReal)b[i]);
        if (!(v <= local)) local = v; /* NaN propagates */
      }
    });
    return PETSC_SUCCESS;
  }));
  PetscCall(MPIU_Allreduce(&local, &r, 1, MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)x)));
  DDStoreResult(diff, 3, r);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetRandom - Fills the bulk with values from a PetscRandom

  Collective

  Notes:
  The values depend on the partition. For values that depend on the global index only
  (the same tensor on any partition), use `DDTensorSetRandomGlobal()`.

  Level: beginner

.seealso: `DDTensorSetRandomGlobal()`
@*/
PetscErrorCode DDTensorSetRandom(DDTensor t, PetscRandom rnd)
DD_CXX_TRY
{
  void *h;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorSetRandom");
  DDCheckHeader(rnd, PETSC_RANDOM_CLASSID, 2);
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: through its host copy */
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *a    = (T *)h;
    PetscFunctionBegin;
    PetscErrorCode ierr = PETSC_SUCCESS;
    ForEachBulkRun(t->layout, [&](PetscInt off, PetscInt len) {
      for (PetscInt i = 0; i < len && !ierr; i++) {
        PetscScalar v;
        ierr        = PetscRandomGetValue(rnd, &v);
        a[off + i] = (T)PetscRealPart(v);
      }
    });
    PetscCall(ierr);
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Calls f(offset, globalLinearIndex) for every bulk entry */
template <class F>
static void ForEachBulkGlobal(DDTensor t, F &&f)
{
  const DDLayout &L = t->layout;
  PetscInt        a[DD_MAX_DIM], b[DD_MAX_DIM];
  PetscInt64      gs[DD_MAX_DIM];
  LayoutBulkBox(L, a, b);
  gs[t->order - 1] = 1;
  for (PetscInt k = t->order - 2; k >= 0; k--) gs[k] = gs[k + 1] * t->shape[k + 1];
  ForEachIndex(L.order, a, b, L.perm, [&](const PetscInt *j) {
    PetscInt64 g = 0;
    for (PetscInt k = 0; k < L.order; k++) g += gs[k] * (j[k] - L.lo[k] + L.start[k]);
    f(LayoutOffset(L, j), g);
  });
}

/*
  Rows of the bulk along one dimension `in` (storage stride and global-index stride both constant):
  calls f(offset, storage stride, global linear index, global stride, length) once per row, so that
  a row is walked with its offset and global index incremented instead of recomputed per entry.
  A row runs along an unblocked dimension `in`, merged with the dimensions whose steps continue
  both strides (a plain bulk without halo holding whole rows of the global tensor: one row; a
  channels-last bulk without halo in W: the H x W plane of a channel, storage stride C); `in`
  gives the longest rows, of equal ones those with the smallest storage stride. Returns false
  (and calls nothing) when every dimension is blocked (order 1 blocked along it), where the
  caller walks entry by entry.
*/
template <class F>
static bool ForEachBulkGlobalRow(DDTensor t, F &&f)
{
  const DDLayout &L = t->layout;
  PetscInt        a[DD_MAX_DIM], b[DD_MAX_DIM], in = -1, len = 0;
  PetscInt64      gs[DD_MAX_DIM];
  bool            merged[DD_MAX_DIM] = {false};

  if (L.bulksize == 0) return true;
  gs[t->order - 1] = 1;
  for (PetscInt k = t->order - 2; k >= 0; k--) gs[k] = gs[k + 1] * t->shape[k + 1];
  /* the dimensions merged into a row along i: those whose steps continue it in storage and in the global index */
  auto merge = [&](PetscInt i, bool m[]) {
    PetscInt l    = L.n[i];
    bool     more = true;
    for (PetscInt k = 0; k < L.order; k++) m[k] = k == i;
    while (more) {
      more = false;
      for (PetscInt k = 0; k < L.order; k++)
        if (!m[k] && k != L.bdim && L.n[k] > 1 && L.stride[k] == L.stride[i] * l && gs[k] == gs[i] * l) {
          m[k] = more = true;
          l *= L.n[k];
        }
    }
    return l;
  };
  for (PetscInt k = 0; k < L.order; k++) { /* the longest rows; of equal ones, the smallest storage stride */
    bool     m[DD_MAX_DIM];
    PetscInt l;
    if (k == L.bdim) continue;
    l = merge(k, m);
    if (in < 0 || l > len || (l == len && L.stride[k] < L.stride[in])) {
      in  = k;
      len = l;
      for (PetscInt q = 0; q < L.order; q++) merged[q] = m[q];
    }
  }
  if (in < 0) return false;
  LayoutBulkBox(L, a, b);
  for (PetscInt k = 0; k < L.order; k++)
    if (merged[k]) b[k] = a[k] + 1; /* the rows' first entries */
  ForEachIndex(L.order, a, b, L.perm, [&](const PetscInt *j) {
    PetscInt64 g = 0;
    for (PetscInt k = 0; k < L.order; k++) g += gs[k] * (j[k] - L.lo[k] + L.start[k]);
    f(LayoutOffset(L, j), L.stride[in], g, gs[in], len);
  });
  return true;
}

#if defined(__GNUC__) && defined(__x86_64__)
  #include <immintrin.h>
  #define DDNN_RANDOM_AVX2 1
/* the low 64 bits of x * m, 4 lanes (AVX2 has no 64-bit multiply): three 32 x 32 -> 64 products */
__attribute__((target("avx2"))) static inline __m256i Mul64Avx2(__m256i x, __m256i m)
{
  const __m256i ll = _mm256_mul_epu32(x, m), hl = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m), lh = _mm256_mul_epu32(x, _mm256_srli_epi64(m, 32));
  return _mm256_add_epi64(ll, _mm256_slli_epi64(_mm256_add_epi64(hl, lh), 32));
}
/*
  u[i] = a + w u(key, g + i gstride) for the first 4 floor(n / 4) entries, 4 counters at a time:
  SplitMix64 lane by lane, the 53-bit integer converted exactly as hi 2^32 + lo (both exact
  through the 2^84 and 2^52 exponent tricks, the sum < 2^53 exact), then the scalar expression's
  two roundings (a product, a sum; no FMA), so the bits are the scalar loop's. Returns the count done.
*/
__attribute__((target("avx2"))) static PetscInt UniformRowAvx2(uint64_t key, uint64_t g, uint64_t gstride, PetscInt n, double a, double w, double *u)
{
  const __m256i kv = _mm256_set1_epi64x((long long)key), inc = _mm256_set1_epi64x((long long)(4 * gstride));
  const __m256i c0 = _mm256_set1_epi64x((long long)0x9E3779B97F4A7C15ull), m1 = _mm256_set1_epi64x((long long)0xBF58476D1CE4E5B9ull), m2 = _mm256_set1_epi64x((long long)0x94D049BB133111EBull);
  const __m256i lomask = _mm256_set1_epi64x(0xFFFFFFFFll), elo = _mm256_set1_epi64x(0x4330000000000000ll), ehi = _mm256_set1_epi64x(0x4530000000000000ll);
  const __m256d plo = _mm256_set1_pd(0x1.0p52), phi = _mm256_set1_pd(0x1.0p84), scale = _mm256_set1_pd(0x1.0p-53), av = _mm256_set1_pd(a), wv = _mm256_set1_pd(w);
  __m256i       gv = _mm256_set_epi64x((long long)(g + 3 * gstride), (long long)(g + 2 * gstride), (long long)(g + gstride), (long long)g);
  PetscInt      i  = 0;
  for (; i + 4 <= n; i += 4) {
    __m256i x = _mm256_add_epi64(_mm256_xor_si256(kv, gv), c0);
    x         = Mul64Avx2(_mm256_xor_si256(x, _mm256_srli_epi64(x, 30)), m1);
    x         = Mul64Avx2(_mm256_xor_si256(x, _mm256_srli_epi64(x, 27)), m2);
    x         = _mm256_srli_epi64(_mm256_xor_si256(x, _mm256_srli_epi64(x, 31)), 11);
    __m256d lo = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(_mm256_and_si256(x, lomask), elo)), plo);
    __m256d hi = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(x, 32), ehi)), phi);
    _mm256_storeu_pd(u + i, _mm256_add_pd(av, _mm256_mul_pd(wv, _mm256_mul_pd(_mm256_add_pd(hi, lo), scale))));
    gv = _mm256_add_epi64(gv, inc);
  }
  return i;
}
#endif

/*
  u[i] = a + w u(key, g + i gstride), i < n, with u as UniformFromCounter() and key = SplitMix64(seed)
  hoisted out of the loop: the same bits as a + (b - a) UniformFromCounter(seed, g + i gstride) (the
  53-bit integer converts exactly, through int64_t here; w = b - a). AVX2 where the CPU has it, the
  scalar loop for the rest.
*/
static void UniformRow(uint64_t key, uint64_t g, uint64_t gstride, PetscInt n, double a, double w, double *u)
{
  PetscInt i = 0;
#if defined(DDNN_RANDOM_AVX2)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) i = UniformRowAvx2(key, g, gstride, n, a, w, u);
#endif
  for (; i < n; i++) u[i] = a + w * ((double)(int64_t)(SplitMix64(key ^ (g + (uint64_t)i * gstride)) >> 11) * 0x1.0p-53);
}

/* n entries of a row, arr[off + i so] = (T)(a + w u(key, g + i gstride)): directly for a contiguous
   row of doubles, else in chunks through a buffer of doubles */
template <class T>
static void RandomRow(T *arr, PetscInt off, PetscInt so, uint64_t key, uint64_t g, uint64_t gstride, PetscInt n, double a, double w)
{
  double u[256];
  T     *p = arr + off;
  if (std::is_same<T, double>::value && so == 1) {
    UniformRow(key, g, gstride, n, a, w, (double *)p);
    return;
  }
  for (PetscInt i0 = 0; i0 < n; i0 += 256) {
    const PetscInt m = PetscMin(256, n - i0);
    UniformRow(key, g + (uint64_t)i0 * gstride, gstride, m, a, w, u);
    if (so == 1)
      for (PetscInt i = 0; i < m; i++) p[i0 + i] = (T)u[i];
    else
      for (PetscInt i = 0; i < m; i++) p[(i0 + i) * so] = (T)u[i];
  }
}

/*@
  DDTensorSetRandomGlobal - Fills the bulk with uniform values that depend only on the seed and the global index

  Not collective

  Input Parameters:
+ t    - the tensor
. seed - the seed
. a    - lower bound
- b    - upper bound

  Notes:
  Entry g gets a + (b - a) u(seed, g) from a counter-based generator, so the same seed gives
  the same global tensor on any partition (partition independence, DESIGN.md). The bulk is
  filled row by row, 4 counters at a time with AVX2 (about 1-3 ns per entry); the halo is not touched.

  Level: intermediate

.seealso: `DDTensorSetRandom()`
@*/
PetscErrorCode DDTensorSetRandomGlobal(DDTensor t, PetscInt64 seed, PetscReal a, PetscReal b)
DD_CXX_TRY
{
  void *h;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorSetRandomGlobal");
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: through its host copy */
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T            = decltype(z);
    T             *arr = (T *)h;
    const uint64_t key = SplitMix64((uint64_t)seed);
    const double   w   = b - a;
    bool           rows = ForEachBulkGlobalRow(t, [&](PetscInt off, PetscInt so, PetscInt64 g, PetscInt64 gstride, PetscInt n) { RandomRow(arr, off, so, key, (uint64_t)g, (uint64_t)gstride, n, a, w); });
    if (!rows) ForEachBulkGlobal(t, [&](PetscInt off, PetscInt64 g) { arr[off] = (T)(a + (b - a) * UniformFromCounter((uint64_t)seed, (uint64_t)g)); });
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorSetValuesGlobal - Sets the bulk from a global array that every rank holds

  Not collective

  Input Parameters:
+ t      - the tensor
- global - the whole tensor in C order, of the tensor's element type, on every rank (not NULL:
           `PETSC_ERR_ARG_NULL` on a rank that passes NULL)

  Level: intermediate

.seealso: `DDTensorScatterFromRoot()`
@*/
PetscErrorCode DDTensorSetValuesGlobal(DDTensor t, const void *global)
DD_CXX_TRY
{
  void *h;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorSetValuesGlobal");
  DDCheckPointer(global, 2);
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: through its host copy */
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T    = decltype(z);
    T       *a = (T *)h;
    const T *g = (const T *)global;
    ForEachBulkGlobal(t, [&](PetscInt off, PetscInt64 gi) { a[off] = g[gi]; });
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------- */
/* Scatter from and gather to one rank.  Simple: root packs/unpacks every piece. */

static PetscBool DDTensorIsPrimaryCopy(DDTensor t)
{
  if (!t->active) return PETSC_FALSE;
  for (PetscInt k = 0; k < t->order; k++)
    if (t->replicated[k] && t->part->coords[k] != 0) return PETSC_FALSE;
  return PETSC_TRUE;
}

/* root must be the same on every rank, in range, and root's global array not NULL: one all-reduce, and
   every rank raises the error (a root that differs between ranks would leave them in different
   collectives, waiting forever) */
static PetscErrorCode DDTensorCheckRoot(DDTensor t, PetscMPIInt root, const void *global, const char fn[])
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)t);
  PetscMPIInt size, rank;
  PetscInt64  in[3], out[3];

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  in[0] = (PetscInt64)root;
  in[1] = -(PetscInt64)root;
  in[2] = (rank == root && !global) ? 1 : 0;
  PetscCall(MPIU_Allreduce(in, out, 3, MPIU_INT64, MPI_MAX, comm));
  PetscCheck(out[0] == -out[1], comm, PETSC_ERR_ARG_INCOMP, "%s(): the root differs between ranks (roots from %" PetscInt64_FMT " to %" PetscInt64_FMT " were given): pass the same root on every rank", fn, -out[1], out[0]);
  PetscCheck(root >= 0 && root < size, comm, PETSC_ERR_ARG_OUTOFRANGE, "%s(): root rank %d is not in [0, %d)", fn, root, size);
  PetscCheck(!out[2], comm, PETSC_ERR_ARG_NULL, "%s(): argument 3 (global) is NULL on the root rank %d", fn, root);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* piece of every rank (start, n per dim) on root */
static PetscErrorCode DDTensorGatherPieces(DDTensor t, PetscMPIInt root, std::vector<PetscInt> &pieces, PetscBool all)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)t);
  PetscMPIInt size, rank;
  PetscInt    mine[2 * DD_MAX_DIM], d = t->order;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscBool take = all ? t->active : DDTensorIsPrimaryCopy(t);
  for (PetscInt k = 0; k < d; k++) {
    mine[k]     = t->layout.start[k];
    mine[d + k] = take ? t->layout.n[k] : 0;
  }
  if (rank == root) pieces.resize((size_t)size * 2 * d);
  PetscCallMPI(MPI_Gather(mine, (PetscMPIInt)(2 * d), MPIU_INT, pieces.data(), (PetscMPIInt)(2 * d), MPIU_INT, root, comm));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Copies between the C-order global array and a packed piece (C order within the piece) */
template <class T>
static void GlobalPieceCopy(PetscInt d, const PetscInt shape[], const PetscInt start[], const PetscInt n[], T *global, T *piece, bool toPiece)
{
  PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM], ord[DD_MAX_DIM];
  PetscInt64 gs[DD_MAX_DIM];
  PetscInt cnt = 0;
  for (PetscInt k = 0; k < d; k++) {
    a[k]   = 0;
    b[k]   = n[k];
    ord[k] = k;
  }
  if (d == 0) return;
  gs[d - 1] = 1;
  for (PetscInt k = d - 2; k >= 0; k--) gs[k] = gs[k + 1] * shape[k + 1];
  b[d - 1] = n[d - 1] > 0 ? 1 : 0;
  ForEachIndex(d, a, b, ord, [&](const PetscInt *j) {
    PetscInt64 g = 0;
    for (PetscInt k = 0; k < d; k++) g += gs[k] * (j[k] + start[k]);
    for (PetscInt i = 0; i < n[d - 1]; i++) {
      if (toPiece) piece[cnt + i] = global[g + i];
      else global[g + i] = piece[cnt + i];
    }
    cnt += n[d - 1];
  });
}

/*@C
  DDTensorGatherToRoot - Gathers the whole tensor, in C order, on one rank

  Collective

  Input Parameters:
+ t    - the tensor
- root - the rank of the tensor's communicator that receives it

  Output Parameter:
. global - on root, an array of the global size and the tensor's element type (ignored elsewhere)

  Notes:
  For tests and serial I/O; the memory of the whole tensor is needed on root. Replicated
  dimensions contribute the copy at coordinate 0.

  root must be the same on every rank and global not NULL on root: otherwise every rank raises
  the error (`PETSC_ERR_ARG_INCOMP` naming the roots given, `PETSC_ERR_ARG_OUTOFRANGE`,
  `PETSC_ERR_ARG_NULL`), checked with one small all-reduce.

  Level: intermediate

.seealso: `DDTensorScatterFromRoot()`
@*/
PetscErrorCode DDTensorGatherToRoot(DDTensor t, PetscMPIInt root, void *global)
DD_CXX_TRY
{
  void                 *h;
  MPI_Comm              comm;
  PetscMPIInt           size, rank;
  std::vector<PetscInt> pieces;
  MPI_Datatype          mt;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorGatherToRoot");
  PetscCall(DDTensorCheckRoot(t, root, global, "DDTensorGatherToRoot"));
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: its host copy */
  comm = PetscObjectComm((PetscObject)t);
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(PetscLogEventBegin(DD_TensorGather, t, 0, 0, 0));
  PetscCall(DDDataTypeGetMPIType(t->dtype, &mt));
  PetscCall(DDTensorGatherPieces(t, root, pieces, PETSC_FALSE));
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    const PetscInt          d    = t->order;
    PetscInt                mine = DDTensorIsPrimaryCopy(t) ? t->layout.bulksize : 0;
    std::vector<T>          send(mine), recv;
    std::vector<PetscMPIInt> counts, displs;
    if (mine) BulkCOrderCopy<T>(t->layout, (T *)h, send.data(), 0);
    if (rank == root) {
      counts.resize(size);
      displs.resize(size);
      PetscInt64 tot = 0;
      for (PetscMPIInt r = 0; r < size; r++) {
        PetscInt64 c = 1;
        for (PetscInt k = 0; k < d; k++) c *= pieces[(size_t)r * 2 * d + d + k];
        counts[r] = (PetscMPIInt)c;
        displs[r] = (PetscMPIInt)tot;
        tot += c;
      }
      recv.resize(tot);
    }
    PetscCallMPI(MPI_Gatherv(send.data(), (PetscMPIInt)mine, mt, recv.data(), counts.data(), displs.data(), mt, root, comm));
    if (rank == root) {
      for (PetscMPIInt r = 0; r < size; r++) {
        const PetscInt *p = &pieces[(size_t)r * 2 * d];
        if (counts[r]) GlobalPieceCopy<T>(d, t->shape, p, p + d, (T *)global, recv.data() + displs[r], false);
      }
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscCall(PetscLogEventEnd(DD_TensorGather, t, 0, 0, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorScatterFromRoot - Distributes a whole tensor held by one rank

  Collective

  Input Parameters:
+ t      - the tensor
. root   - the rank holding the data
- global - on root, the whole tensor in C order, of the tensor's element type (ignored elsewhere)

  Notes:
  Every worker receives its piece; replicated dimensions get a copy on every worker.
  For tests and serial I/O; parallel HDF5 avoids the root bottleneck.

  root must be the same on every rank and global not NULL on root: otherwise every rank raises
  the error (`PETSC_ERR_ARG_INCOMP` naming the roots given, `PETSC_ERR_ARG_OUTOFRANGE`,
  `PETSC_ERR_ARG_NULL`), checked with one small all-reduce.

  Level: intermediate

.seealso: `DDTensorGatherToRoot()`
@*/
PetscErrorCode DDTensorScatterFromRoot(DDTensor t, PetscMPIInt root, const void *global)
DD_CXX_TRY
{
  void                 *h;
  MPI_Comm              comm;
  PetscMPIInt           size, rank;
  std::vector<PetscInt> pieces;
  MPI_Datatype          mt;

  PetscFunctionBegin;
  DDTensorCheck(t, "DDTensorScatterFromRoot");
  PetscCall(DDTensorCheckRoot(t, root, global, "DDTensorScatterFromRoot"));
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* a device tensor: through its host copy */
  comm = PetscObjectComm((PetscObject)t);
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(PetscLogEventBegin(DD_TensorScatter, t, 0, 0, 0));
  PetscCall(DDDataTypeGetMPIType(t->dtype, &mt));
  PetscCall(DDTensorGatherPieces(t, root, pieces, PETSC_TRUE));
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    const PetscInt           d    = t->order;
    PetscInt                 mine = t->active ? t->layout.bulksize : 0;
    std::vector<T>           recv(mine), send;
    std::vector<PetscMPIInt> counts, displs;
    if (rank == root) {
      counts.resize(size);
      displs.resize(size);
      PetscInt64 tot = 0;
      for (PetscMPIInt r = 0; r < size; r++) {
        PetscInt64 c = 1;
        for (PetscInt k = 0; k < d; k++) c *= pieces[(size_t)r * 2 * d + d + k];
        counts[r] = (PetscMPIInt)c;
        displs[r] = (PetscMPIInt)tot;
        tot += c;
      }
      send.resize(tot);
      for (PetscMPIInt r = 0; r < size; r++) {
        const PetscInt *p = &pieces[(size_t)r * 2 * d];
        if (counts[r]) GlobalPieceCopy<T>(d, t->shape, p, p + d, (T *)global, send.data() + displs[r], true);
      }
    }
    PetscCallMPI(MPI_Scatterv(send.data(), counts.data(), displs.data(), mt, recv.data(), (PetscMPIInt)mine, mt, root, comm));
    BulkCOrderCopy<T>(t->layout, (T *)h, recv.data(), 1);
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscCall(PetscLogEventEnd(DD_TensorScatter, t, 0, 0, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
