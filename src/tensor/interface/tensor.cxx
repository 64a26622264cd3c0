/*
  DDTensor: creation, layout, halos and formats (paper 000, sec. 3.1).
*/
#include <sys/ddcxx.hpp>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <primitive/sfutil.hpp>
#include <tensor/argcheck.hpp>
#include <cstring>

using namespace ddnn;

/* the memory operations of a tensor's memory type (device memory: an error where this build or process has none) */
static PetscErrorCode TensorMem(DDTensor t, const struct _DDBackendMemOps **ops)
{
  PetscFunctionBegin;
  *ops = &HostMemOps;
  if (t->memtype != DD_MEMTYPE_HOST) PetscCall(DDMemOps_Private(t->memtype, ops));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The storage of a layout, allocated on every rank of comm or on none. A piece that cannot be laid
  out (lerr, from LayoutBuild()) or whose storage cannot be allocated (host memory exhausted, a
  device out of memory) fails on its rank alone, while the others would go on into the collectives
  that follow (the layout hash's all-reduce) and wait there: every rank raises the error instead,
  with the message of the lowest failing rank, which names that rank and its request. A rank that
  did allocate frees what it got. A rank with nothing to allocate (L NULL: its layout stays, where
  another rank's changes) takes part all the same. Collective.
*/
static PetscErrorCode TensorAllocAll(MPI_Comm comm, const struct _DDBackendMemOps *mem, DDMemType mt, PetscErrorCode lerr, const DDLayout *L, size_t es, const char *sh, void **arr)
{
  PetscErrorCode aerr = PETSC_SUCCESS;
  char          *why  = NULL;
  PetscMPIInt    rank;

  PetscFunctionBegin;
  *arr = NULL;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  if (!lerr && L) aerr = mem->malloc(L->size * es, arr); /* returns its error: the check below raises it everywhere */
  if (aerr) {
    (void)PetscErrorMessage(aerr, NULL, &why);
    *arr = NULL; /* nothing was handed out */
  }
  PetscErrorCode err = lerr ? lerr : aerr;
  char           msg[512];
  if (lerr) PetscCall(PetscSNPrintf(msg, sizeof(msg), "A tensor of shape %s cannot lay out rank %d's piece (see that rank's error)", sh, rank));
  else if (aerr) PetscCall(PetscSNPrintf(msg, sizeof(msg), "A tensor of shape %s cannot be allocated: rank %d could not allocate its %.0f bytes (%.3g GiB) of %s memory: %s", sh, rank, (double)(L->size * es), (double)(L->size * es) / 1073741824.0, DDMemTypes[mt], why ? why : "(no message)"));
  PetscErrorCode cerr = DDCheckCollective(comm, err ? PETSC_FALSE : PETSC_TRUE, err ? err : PETSC_ERR_MEM, err ? msg : "");
  if (cerr && *arr) {
    (void)mem->free(*arr); /* this rank's storage: another rank failed */
    *arr = NULL;
  }
  PetscCall(cerr);
  PetscFunctionReturn(PETSC_SUCCESS);
}

namespace ddnn
{
PetscErrorCode LayoutBuild(DDLayout *L, PetscInt order, const PetscInt n[], const PetscInt start[], const PetscInt lo[], const PetscInt hi[], DDTensorFormat fmt, PetscInt bs, PetscInt bdim)
{
  PetscFunctionBegin;
  PetscCall(PetscMemzero(L, sizeof(*L)));
  L->order    = order;
  L->bdim     = -1;
  L->bs       = 1;
  L->bulksize = 1;
  for (PetscInt k = 0; k < order; k++) {
    L->n[k]     = n[k];
    L->start[k] = start[k];
    L->lo[k]    = lo[k];
    L->hi[k]    = hi[k];
    L->alloc[k] = lo[k] + n[k] + hi[k];
    L->perm[k]  = k;
    L->bulksize *= n[k];
  }
  if (fmt == DD_FORMAT_CHANNELS_LAST) ChannelsLastOrder(order, L->perm);
  if (fmt == DD_FORMAT_BLOCKED && order > bdim) {
    L->bdim = bdim;
    L->bs   = bs;
  }
  PetscInt s = (L->bdim >= 0) ? L->bs : 1;
  for (PetscInt p = order - 1; p >= 0; p--) {
    PetscInt k   = L->perm[p];
    L->stride[k] = s;
    /* a local piece of more than PETSC_MAX_INT entries is an error, not a wrapped (negative) size */
    PetscCall(PetscIntMultError(s, (k == L->bdim) ? (L->alloc[k] + L->bs - 1) / L->bs : L->alloc[k], &s));
  }
  L->size = s;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn

/*@
  DDTensorCreate - Creates an empty distributed tensor

  Collective

  Input Parameter:
. comm - the communicator; it must be the communicator of the partition given later

  Output Parameter:
. t - the tensor; set its partition, shape and data type, then call `DDTensorSetUp()`

  Level: beginner

.seealso: `DDTensorCreateFromPartition()`, `DDTensorSetPartition()`, `DDTensorSetShape()`, `DDTensorSetUp()`
@*/
PetscErrorCode DDTensorCreate(MPI_Comm comm, DDTensor *t)
DD_CXX_TRY
{
  DDTensor x;

  PetscFunctionBegin;
  DDCheckPointer(t, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(x, DD_TENSOR_CLASSID, "DDTensor", "Distributed tensor", "DDTensor", comm, DDTensorDestroy, DDTensorView));
  x->dtype   = DD_FLOAT64;
  x->format  = DD_FORMAT_PLAIN;
  x->bs      = 8;
  x->blockdim = 1;
  x->emptyok = PETSC_TRUE;
  *t         = x;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDTensorCheckNotSetUp(DDTensor t, const char what[])
{
  PetscFunctionBegin;
  PetscCheck(!t->setupcalled, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Cannot set the %s of a tensor after DDTensorSetUp()", what);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorSetPartition - Sets the partition of the tensor's workers

  Logically collective

  Input Parameters:
+ t    - the tensor
- part - a set-up partition on the tensor's communicator; its order must equal the tensor's

  Level: beginner

.seealso: `DDPartitionCreate()`, `DDTensorSetShape()`
@*/
PetscErrorCode DDTensorSetPartition(DDTensor t, DDPartition part)
DD_CXX_TRY
{
  PetscMPIInt cmp;

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  DDCheckHeader(part, DD_PARTITION_CLASSID, 2);
  PetscCall(DDTensorCheckNotSetUp(t, "partition"));
  PetscCheck(part->setupcalled, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Call DDPartitionSetUp() before giving the partition to a tensor");
  PetscCallMPI(MPI_Comm_compare(PetscObjectComm((PetscObject)t), PetscObjectComm((PetscObject)part), &cmp));
  PetscCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_NOTSAMECOMM, "The partition must live on the tensor's communicator");
  PetscCall(PetscObjectReference((PetscObject)part));
  PetscCall(DDPartitionDestroy(&t->part));
  t->part = part;
  for (PetscInt k = 0; k < DD_MAX_DIM; k++) PetscCall(PetscFree(t->userlx[k]));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetShape - Sets the global shape of the tensor

  Logically collective

  Input Parameters:
+ t     - the tensor
. order - number of dimensions (1 to DD_MAX_DIM)
- shape - global size of each dimension in C order, e.g. (N, C, H, W); not NULL

  Notes:
  Errors (`PETSC_ERR_ARG_NULL`) when shape is NULL, (`PETSC_ERR_ARG_OUTOFRANGE`) when order or a size is out of range.

  Level: beginner

.seealso: `DDTensorSetPartition()`
@*/
PetscErrorCode DDTensorSetShape(DDTensor t, PetscInt order, const PetscInt shape[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCall(DDTensorCheckNotSetUp(t, "shape"));
  PetscCheck(order >= 1 && order <= DD_MAX_DIM, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Tensor order %" PetscInt_FMT " must be between 1 and %d", order, DD_MAX_DIM);
  DDCheckPointer(shape, 3);
  for (PetscInt k = 0; k < order; k++) PetscCheck(shape[k] >= 1, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Tensor shape entry %" PetscInt_FMT " is %" PetscInt_FMT "; sizes must be positive", k, shape[k]);
  t->order = order;
  for (PetscInt k = 0; k < order; k++) t->shape[k] = shape[k];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetDataType - Sets the element type (float32 or float64, the default)

  Logically collective

  Options Database Key:
. -tensor_dtype <float32,float64> - the type

  Level: beginner

.seealso: `DDDataType`
@*/
PetscErrorCode DDTensorSetDataType(DDTensor t, DDDataType dt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCall(DDTensorCheckNotSetUp(t, "data type"));
  PetscCheck(dt == DD_FLOAT32 || dt == DD_FLOAT64, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Unknown data type %d", (int)dt);
  t->dtype = dt;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetOwnershipRanges - Gives the size of every worker's piece along one dimension

  Logically collective

  Input Parameters:
+ t   - the tensor (its partition must be set)
. dim - the dimension
- lx  - P_dim sizes, one per coordinate along dim (like DMDA's lx/ly/lz); they must sum to the
        global size. NULL restores the balanced default (`PetscSplitOwnership()`'s rule:
        the first n mod P pieces get one more entry). Zero sizes are allowed unless
        `DDTensorSetEmptyPiecesAllowed()` forbids them.

  Level: intermediate

.seealso: `DDTensorGetOwnershipRanges()`, `DMDACreate2d()`
@*/
PetscErrorCode DDTensorSetOwnershipRanges(DDTensor t, PetscInt dim, const PetscInt lx[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCall(DDTensorCheckNotSetUp(t, "ownership ranges"));
  PetscCheck(t->part, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Set the partition before the ownership ranges");
  PetscCheck(dim >= 0 && dim < t->part->order, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " is outside [0, %" PetscInt_FMT ")", dim, t->part->order);
  PetscCall(PetscFree(t->userlx[dim]));
  if (lx) {
    PetscCall(PetscMalloc1(t->part->shape[dim], &t->userlx[dim]));
    for (PetscInt p = 0; p < t->part->shape[dim]; p++) t->userlx[dim][p] = lx[p];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetReplicated - Makes a dimension replicated instead of split over the partition

  Logically collective

  Input Parameters:
+ t   - the tensor
. dim - the dimension
- flg - `PETSC_TRUE`: every worker along dim holds the whole extent of dim (a copy)

  Notes:
  This is the layout of a broadcast's output (paper 000, sec. 3.2.1) and of a sum-reduce's
  input: the workers along dim hold copies (or partial sums) of the same sub-tensor.
  `DDTensorDot()` and `DDTensorNorm()` count every copy, as the inner product of the whole
  distributed memory must for the adjoint test.

  dim must lie in [0, order): where the shape is set already (`DDTensorSetShape()`) a dimension
  outside it is an error here; where it is not, `DDTensorSetUp()` raises it (on every rank) when
  a replicated dimension lies beyond the tensor's order.

  Level: intermediate

.seealso: `DDPrimitive`, `DDTensorSetOwnershipRanges()`
@*/
PetscErrorCode DDTensorSetReplicated(DDTensor t, PetscInt dim, PetscBool flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCall(DDTensorCheckNotSetUp(t, "replication"));
  PetscCheck(dim >= 0 && dim < DD_MAX_DIM, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "DDTensorSetReplicated(): dimension %" PetscInt_FMT " is outside [0, %d)", dim, DD_MAX_DIM);
  PetscCheck(t->order == 0 || dim < t->order, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "DDTensorSetReplicated(): dimension %" PetscInt_FMT " is outside the tensor's [0, %" PetscInt_FMT ") (its order is %" PetscInt_FMT ")", dim, t->order, t->order);
  t->replicated[dim] = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetEmptyPiecesAllowed - Whether workers may own zero entries along a dimension

  Logically collective

  Input Parameters:
+ t   - the tensor
- flg - `PETSC_FALSE` makes `DDTensorSetUp()` fail when a dimension has fewer entries than
        workers (or given ownership ranges contain a zero); default `PETSC_TRUE`

  Level: intermediate

.seealso: `DDTensorSetOwnershipRanges()`
@*/
PetscErrorCode DDTensorSetEmptyPiecesAllowed(DDTensor t, PetscBool flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  t->emptyok = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDTensorRelayout(DDTensor t, const PetscInt lo[], const PetscInt hi[], DDTensorFormat fmt, PetscInt bs);
static PetscErrorCode DDTensorComputeLayoutHash(DDTensor t);
static PetscErrorCode DDTensorKeepLayout(DDTensor t);

/*@
  DDTensorSetFormat - Sets the local storage format

  Collective

  Input Parameters:
+ t   - the tensor
- fmt - `DD_FORMAT_PLAIN` (default), `DD_FORMAT_CHANNELS_LAST` or `DD_FORMAT_BLOCKED`

  Notes:
  May be called after `DDTensorSetUp()`; the values are kept (reordered). The global index
  space does not change.

  Options Database Key:
. -tensor_format <plain,channels_last,blocked> - the format

  Level: intermediate

.seealso: `DDTensorFormat`, `DDTensorSetBlockSize()`
@*/
PetscErrorCode DDTensorSetFormat(DDTensor t, DDTensorFormat fmt)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCheck(fmt >= DD_FORMAT_PLAIN && fmt <= DD_FORMAT_BLOCKED, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Unknown tensor format %d", (int)fmt);
  if (t->setupcalled) { /* the layout hash is collective: every rank takes part, whether its own format changes or not (they may differ between ranks) */
    if (fmt != t->format) PetscCall(DDTensorRelayout(t, t->lo, t->hi, fmt, t->bs));
    else PetscCall(DDTensorKeepLayout(t));
  }
  t->format = fmt;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetBlockSize - Sets the channel block of `DD_FORMAT_BLOCKED` (8 or 16 for oneDNN)

  Collective

  Level: advanced

.seealso: `DDTensorSetFormat()`
@*/
PetscErrorCode DDTensorSetBlockSize(DDTensor t, PetscInt bs)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscCheck(bs >= 1, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Block size %" PetscInt_FMT " must be positive", bs);
  if (t->setupcalled) { /* every rank takes part in the collective layout hash, as in DDTensorSetFormat() */
    if (t->format == DD_FORMAT_BLOCKED && bs != t->bs) PetscCall(DDTensorRelayout(t, t->lo, t->hi, t->format, bs));
    else PetscCall(DDTensorKeepLayout(t));
  }
  t->bs = bs;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* The dimension the blocked format blocks (default 1, the channel of N x C x ...) */
PetscErrorCode DDTensorSetBlockDimension_Private(DDTensor t, PetscInt dim)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck(!t->setupcalled || t->format != DD_FORMAT_BLOCKED, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Set the block dimension before set-up");
  t->blockdim = PetscMax(0, dim);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetHalo - Sets the halo widths of this rank's piece

  Collective

  Input Parameters:
+ t  - the tensor
. lo - widths before the bulk, one per dimension (NULL for zeros)
- hi - widths after the bulk, one per dimension (NULL for zeros)

  Notes:
  Widths may differ between ranks and between sides (paper 000, Appendix B); they must not
  be negative. After `DDTensorSetUp()` the bulk values are kept and the new halo is zeroed.
  The halo exchange (`DDPRIMITIVEHALO`) fills halos from the neighbors' bulk.

  Level: intermediate

.seealso: `DDTensorEnsureHalo()`, `DDTensorGetHalo()`
@*/
PetscErrorCode DDTensorSetHalo(DDTensor t, const PetscInt lo[], const PetscInt hi[])
DD_CXX_TRY
{
  PetscInt  nlo[DD_MAX_DIM] = {0}, nhi[DD_MAX_DIM] = {0};
  PetscInt  d, bad = -1;

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  d = t->order;
  PetscCheck(d > 0, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Set the tensor's shape before its halo");
  for (PetscInt k = 0; k < d; k++) {
    nlo[k] = lo ? lo[k] : 0;
    nhi[k] = hi ? hi[k] : 0;
    if ((nlo[k] < 0 || nhi[k] < 0) && bad < 0) bad = k;
  }
  if (!ddnn::PricingSkipChecks()) DDCheckAll(PetscObjectComm((PetscObject)t), bad < 0, PETSC_ERR_ARG_OUTOFRANGE, "Negative halo width in dimension %" PetscInt_FMT " (lo %" PetscInt_FMT ", hi %" PetscInt_FMT ")", bad, bad >= 0 ? nlo[bad] : 0, bad >= 0 ? nhi[bad] : 0);
  if (t->setupcalled && !t->active)
    for (PetscInt k = 0; k < d; k++) nlo[k] = nhi[k] = 0; /* idle ranks hold nothing */
  if (t->setupcalled) PetscCall(DDTensorRelayout(t, nlo, nhi, t->format, t->bs));
  for (PetscInt k = 0; k < d; k++) {
    t->lo[k] = nlo[k];
    t->hi[k] = nhi[k];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorEnsureHalo - Grows the halo widths to at least the given ones

  Collective

  Input Parameters:
+ t  - the tensor
. lo - minimum widths before the bulk (NULL: no requirement)
- hi - minimum widths after the bulk (NULL: no requirement)

  Notes:
  Layers call this in their set-up so that a tensor consumed by several layers gets the
  largest halo any of them needs. Nothing is reallocated when the halo is wide enough.

  Level: developer

.seealso: `DDTensorSetHalo()`
@*/
PetscErrorCode DDTensorEnsureHalo(DDTensor t, const PetscInt lo[], const PetscInt hi[])
DD_CXX_TRY
{
  PetscInt  nlo[DD_MAX_DIM], nhi[DD_MAX_DIM];
  PetscBool grow = PETSC_FALSE, any;

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  for (PetscInt k = 0; k < t->order; k++) {
    nlo[k] = PetscMax(t->lo[k], lo ? lo[k] : 0);
    nhi[k] = PetscMax(t->hi[k], hi ? hi[k] : 0);
    if (nlo[k] != t->lo[k] || nhi[k] != t->hi[k]) grow = PETSC_TRUE;
  }
  PetscCall(MPIU_Allreduce(&grow, &any, 1, MPIU_BOOL, MPI_LOR, PetscObjectComm((PetscObject)t)));
  if (any) PetscCall(DDTensorSetHalo(t, nlo, nhi));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetFromOptions - Sets the data type and format from the options database

  Collective

  Options Database Keys:
+ -tensor_dtype <float32,float64> - element type
. -tensor_format <plain,channels_last,blocked> - local storage format
. -tensor_memtype <host,device> - where the storage lives (device: the /gpu/cuda backend's memory)
- -tensor_view - view the tensor after set-up

  Level: beginner

.seealso: `DDTensorSetDataType()`, `DDTensorSetFormat()`
@*/
PetscErrorCode DDTensorSetFromOptions(DDTensor t)
DD_CXX_TRY
{
  PetscEnum dt, fmt, mt;
  PetscBool flg;

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscObjectOptionsBegin((PetscObject)t);
  dt = (PetscEnum)t->dtype;
  PetscCall(PetscOptionsEnum("-tensor_dtype", "Element type", "DDTensorSetDataType", DDDataTypes, dt, &dt, &flg));
  if (flg) PetscCall(DDTensorSetDataType(t, (DDDataType)dt));
  fmt = (PetscEnum)t->format;
  PetscCall(PetscOptionsEnum("-tensor_format", "Local storage format", "DDTensorSetFormat", DDTensorFormats, fmt, &fmt, &flg));
  if (flg) PetscCall(DDTensorSetFormat(t, (DDTensorFormat)fmt));
  mt = (PetscEnum)t->memtype;
  PetscCall(PetscOptionsEnum("-tensor_memtype", "Where the storage lives", "DDTensorSetMemType", DDMemTypes, mt, &mt, &flg));
  if (flg) PetscCall(DDTensorSetMemType(t, (DDMemType)mt));
  PetscOptionsEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDTensorComputeLayoutHash(DDTensor t)
{
  uint64_t    h = 1469598103934665603ull, g;
  PetscMPIInt rank;
  auto        mix = [&](uint64_t v) { h = SplitMix64(h ^ v); };

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)t), &rank));
  mix((uint64_t)t->dtype);
  mix((uint64_t)t->layout.order);
  mix((uint64_t)t->layout.bdim);
  mix((uint64_t)t->layout.bs);
  for (PetscInt k = 0; k < t->layout.order; k++) {
    mix((uint64_t)t->layout.n[k]);
    mix((uint64_t)t->layout.start[k]);
    mix((uint64_t)t->layout.lo[k]);
    mix((uint64_t)t->layout.hi[k]);
    mix((uint64_t)t->layout.perm[k]);
  }
  h = SplitMix64(h + (uint64_t)rank);
  PetscCallMPI(MPI_Allreduce(&h, &g, 1, MPI_UINT64_T, MPI_BXOR, PetscObjectComm((PetscObject)t)));
  t->layouthash = (PetscInt64)g;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A rank whose layout stays while others re-lay theirs out: the same collectives as DDTensorRelayout() */
static PetscErrorCode DDTensorKeepLayout(DDTensor t)
{
  void *none;

  PetscFunctionBegin;
  PetscCall(TensorAllocAll(PetscObjectComm((PetscObject)t), NULL, t->memtype, PETSC_SUCCESS, NULL, 0, "", &none));
  PetscCall(DDTensorComputeLayoutHash(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Reallocate with new halos/format, keeping the bulk values (collective: DDTensorKeepLayout() on the ranks whose layout stays) */
static PetscErrorCode DDTensorRelayout(DDTensor t, const PetscInt lo[], const PetscInt hi[], DDTensorFormat fmt, PetscInt bs)
{
  DDLayout                       L;
  void                          *arr;
  size_t                         es;
  const struct _DDBackendMemOps *mem;
  const struct _DDBackendVecOps *vec;

  PetscFunctionBegin;
  PetscCheck(!t->placedvec, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Cannot change the halo or format of a tensor that wraps a Vec; call DDTensorResetVec() first");
  PetscCheck(!t->nsharedvecs, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Cannot change the halo or format of a tensor whose storage a Vec of DDTensorCreateVec() shares (the storage would move away from the Vec); destroy the Vec first");
  PetscCall(DDDataTypeGetSize(t->dtype, &es));
  PetscCall(TensorMem(t, &mem));
  PetscCall(DDVecOps_Private(t->memtype, &vec));
  {
    char           sh[256];
    PetscErrorCode lerr = LayoutBuild(&L, t->order, t->layout.n, t->layout.start, lo, hi, fmt, bs, t->blockdim);
    PetscCall(DDShapeToString_Private(t->order, t->shape, sh, sizeof(sh)));
    PetscCall(TensorAllocAll(PetscObjectComm((PetscObject)t), mem, t->memtype, lerr, &L, es, sh, &arr)); /* the layout hash below is collective */
  }
  PetscCall(vec->copy(t->dtype, &t->layout, t->array, &L, arr)); /* the bulk, format to format, where it lives */
  if (t->ownsarray) PetscCall(mem->free(t->array));
  PetscCall(PetscFree(t->hostmirror));
  t->array     = arr;
  t->ownsarray = PETSC_TRUE;
  t->layout    = L;
  PetscCall(DDTensorComputeLayoutHash(t));
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorSetUp - Computes the ownership of every worker and allocates the local storage

  Collective

  Notes:
  Errors, on every rank, when the global shape (and so the order), data type, partition shape,
  replicated dimensions, the empty-pieces setting or the given ownership sizes differ between ranks
  (`DDCheckSameString()`; a rank without a partition or shape differs too), when a rank's piece
  does not fit PetscInt, when the tensor's order differs from its partition's, when a dimension made
  replicated (`DDTensorSetReplicated()`) lies beyond the tensor's order, when given
  ownership sizes do not sum to the global size or are negative, or when a dimension has
  fewer entries than workers while empty pieces are not allowed. The storage (bulk and
  halo) is zeroed. Storage that one rank cannot get (host memory exhausted, a device out of
  memory) is `PETSC_ERR_MEM` on every rank, with a message naming that rank and the bytes it
  asked for; the ranks that did allocate free theirs. `DDTensorSetHalo()` and `DDTensorSetFormat()`
  on a set-up tensor fail the same way and then leave the tensor as it was.

  Level: beginner

.seealso: `DDTensorCreate()`, `DDTensorSetShape()`, `DDTensorSetPartition()`
@*/
PetscErrorCode DDTensorSetUp(DDTensor t)
DD_CXX_TRY
{
  MPI_Comm                       comm;
  PetscInt                       n[DD_MAX_DIM], start[DD_MAX_DIM];
  size_t                         es;
  char                           sh[128];
  const struct _DDBackendMemOps *mem;

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  if (t->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  comm = PetscObjectComm((PetscObject)t);
  PetscCall(DDShapeToString_Private(t->order, t->shape, sh, sizeof(sh)));
  if (!ddnn::PricingSkipChecks()) { /* the global shape, data type and partition must be the same on every rank (a trial set-up of -net_distribution auto makes its tensors alike on every rank) */
    char v[320], ps[128];
    if (t->part) PetscCall(DDShapeToString_Private(t->part->order, t->part->shape, ps, sizeof(ps)));
    else PetscCall(PetscStrncpy(ps, "(none)", sizeof(ps)));
    PetscCall(PetscSNPrintf(v, sizeof(v), "shape %s, %s, partition %s", t->order > 0 ? sh : "(none)", DDDataTypes[t->dtype], ps));
    /* and what decides the ownership: replicated dimensions, empty pieces, the sizes given (lx) -- each rank computes every rank's piece from them */
    std::string d = v;
    for (PetscInt k = 0; k < DD_MAX_DIM; k++) /* those beyond the order too: every rank raises the error below, or none */
      if (t->replicated[k]) d += ", replicated along " + std::to_string((long long)k);
    d += t->emptyok ? ", empty pieces allowed" : ", empty pieces not allowed";
    d += std::string(", ") + DDMemTypes[t->memtype] + " memory"; /* primitives and layers plan alike on every rank from it */
    for (PetscInt k = 0; k < t->order && t->part && k < t->part->order; k++)
      if (t->userlx[k]) {
        d += ", sizes along " + std::to_string((long long)k) + ":";
        for (PetscInt p = 0; p < t->part->shape[k]; p++) d += " " + std::to_string((long long)t->userlx[k][p]);
      }
    /* before the checks below, so that a rank whose partition, order or shape differs fails with the others */
    PetscCall(DDCheckSameString(comm, "The global shape, data type, partition, memory type, replicated dimensions or ownership sizes of a tensor", d.c_str()));
  }
  PetscCheck(t->part, comm, PETSC_ERR_ARG_WRONGSTATE, "Tensor has no partition: call DDTensorSetPartition()");
  PetscCheck(t->order > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Tensor has no shape: call DDTensorSetShape()");
  PetscCheck(t->order == t->part->order, comm, PETSC_ERR_ARG_INCOMP, "Tensor of order %" PetscInt_FMT " cannot live on a partition of order %" PetscInt_FMT " (add size-1 dimensions to one of them)", t->order, t->part->order);
  for (PetscInt k = t->order; k < DD_MAX_DIM; k++) PetscCheck(!t->replicated[k], comm, PETSC_ERR_ARG_OUTOFRANGE, "DDTensorSetUp(): dimension %" PetscInt_FMT " was made replicated (DDTensorSetReplicated()) but the tensor (shape %s) has order %" PetscInt_FMT, k, sh, t->order);
  PetscCall(PetscLogEventBegin(DD_TensorSetUp, t, 0, 0, 0));
  { /* device memory where a rank has none: an error on every rank before anything is done */
    PetscErrorCode merr = TensorMem(t, &mem);
    char          *why  = NULL;
    if (merr) (void)PetscErrorMessage(merr, NULL, &why); /* that rank's message, for every rank */
    DDCheckAll(comm, merr == PETSC_SUCCESS, merr ? merr : PETSC_ERR_SUP, "A tensor in %s memory cannot be set up: %s", DDMemTypes[t->memtype], why ? why : "(no message)");
  }
  for (PetscInt k = 0; k < t->order; k++) {
    PetscInt P = t->part->shape[k];
    PetscCall(PetscFree(t->ranges[k]));
    PetscCall(PetscMalloc1(P + 1, &t->ranges[k]));
    if (t->replicated[k]) {
      for (PetscInt p = 0; p <= P; p++) t->ranges[k][p] = p ? t->shape[k] : 0; /* unused: every coordinate owns [0, n) */
      continue;
    }
    if (t->userlx[k]) {
      t->ranges[k][0] = 0;
      for (PetscInt p = 0; p < P; p++) {
        PetscCheck(t->userlx[k][p] >= 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "Ownership size %" PetscInt_FMT " of coordinate %" PetscInt_FMT " in dimension %" PetscInt_FMT " is negative", t->userlx[k][p], p, k);
        PetscCheck(t->emptyok || t->userlx[k][p] > 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "Ownership size of coordinate %" PetscInt_FMT " in dimension %" PetscInt_FMT " is zero, and empty pieces are not allowed", p, k);
        t->ranges[k][p + 1] = t->ranges[k][p] + t->userlx[k][p];
      }
      PetscCheck(t->ranges[k][P] == t->shape[k], comm, PETSC_ERR_ARG_SIZ, "Ownership sizes in dimension %" PetscInt_FMT " sum to %" PetscInt_FMT " but the tensor (shape %s) has %" PetscInt_FMT " entries there", k, t->ranges[k][P], sh, t->shape[k]);
    } else {
      PetscCheck(t->emptyok || t->shape[k] >= P, comm, PETSC_ERR_ARG_SIZ, "Dimension %" PetscInt_FMT " of the tensor (shape %s) has %" PetscInt_FMT " entries but %" PetscInt_FMT " workers, and empty pieces are not allowed", k, sh, t->shape[k], P);
      PetscCall(DDSplitOwnership_Private(t->shape[k], P, t->ranges[k]));
    }
  }
  t->active = t->part->index >= 0 ? PETSC_TRUE : PETSC_FALSE;
  for (PetscInt k = 0; k < t->order; k++) {
    if (!t->active) {
      n[k]     = 0;
      start[k] = 0;
    } else if (t->replicated[k]) {
      n[k]     = t->shape[k];
      start[k] = 0;
    } else {
      PetscInt c = t->part->coords[k];
      start[k]   = t->ranges[k][c];
      n[k]       = t->ranges[k][c + 1] - start[k];
    }
  }
  if (!t->active)
    for (PetscInt k = 0; k < t->order; k++) t->lo[k] = t->hi[k] = 0;
  PetscCall(DDDataTypeGetSize(t->dtype, &es));
  { /* a piece beyond PetscInt's range, or storage a rank cannot get, fails on every rank: the others must not wait in the collectives that follow */
    PetscErrorCode lerr = LayoutBuild(&t->layout, t->order, n, start, t->lo, t->hi, t->format, t->bs, t->blockdim);
    PetscCall(TensorAllocAll(comm, mem, t->memtype, lerr, &t->layout, es, sh, &t->array));
  }
  t->ownsarray   = PETSC_TRUE;
  t->setupcalled = PETSC_TRUE;
  PetscCall(DDTensorComputeLayoutHash(t));
  PetscCall(PetscLogEventEnd(DD_TensorSetUp, t, 0, 0, 0));
  PetscCall(DDTensorViewFromOptions(t, NULL, "-tensor_view"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorCreateFromPartition - Creates and sets up a balanced, halo-free tensor in one call

  Collective

  Input Parameters:
+ part  - the partition (its order is the tensor's order)
. dt    - element type
. order - number of dimensions (must equal the partition's)
- shape - global shape

  Output Parameter:
. t - the tensor, zeroed

  Level: beginner

.seealso: `DDTensorCreate()`
@*/
PetscErrorCode DDTensorCreateFromPartition(DDPartition part, DDDataType dt, PetscInt order, const PetscInt shape[], DDTensor *t)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  DDCheckPointer(shape, 4);
  DDCheckPointer(t, 5);
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)part), t));
  PetscCall(DDTensorSetPartition(*t, part));
  PetscCall(DDTensorSetShape(*t, order, shape));
  PetscCall(DDTensorSetDataType(*t, dt));
  PetscCall(DDTensorSetUp(*t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorDuplicateLayout - Creates a tensor with the same partition, shape, ownership, halos and format, possibly another type

  Collective

  Input Parameters:
+ t  - the model tensor (set up)
- dt - the element type of the new tensor

  Output Parameter:
. y - the new tensor, zeroed

  Level: intermediate

.seealso: `DDTensorDuplicate()`
@*/
PetscErrorCode DDTensorDuplicateLayout(DDTensor t, DDDataType dt, DDTensor *y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorDuplicateLayout"));
  DDCheckPointer(y, 3);
  PetscCall(DDTensorDuplicateLayoutIn_Private(t, dt, t->memtype, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* DDTensorDuplicateLayout() in memory mt (a device tensor's host twin: the HDF5 files and datasets stage through it) */
PetscErrorCode DDTensorDuplicateLayoutIn_Private(DDTensor t, DDDataType dt, DDMemType mt, DDTensor *y)
DD_CXX_TRY
{
  DDTensor x;

  PetscFunctionBegin;
  PetscCall(DDTensorLayoutLike_Private(t, dt, mt, &x));
  PetscErrorCode ierr = DDTensorSetUp(x);
  if (ierr) { /* *y stays as it was (an allocation that failed): no tensor half made */
    PetscCall(DDTensorDestroy(&x));
    PetscCall(ierr);
  }
  *y = x;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a tensor given t's layout in memory mt, not set up: no communication (on a communicator in use by PETSc
   objects); DDTensorSetUp() (collective) makes it t's duplicate */
PetscErrorCode DDTensorLayoutLike_Private(DDTensor t, DDDataType dt, DDMemType mt, DDTensor *y)
DD_CXX_TRY
{
  DDTensor x;

  PetscFunctionBegin;
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)t), &x));
  PetscCall(DDTensorSetPartition(x, t->part));
  PetscCall(DDTensorSetShape(x, t->order, t->shape));
  PetscCall(DDTensorSetDataType(x, dt));
  for (PetscInt k = 0; k < t->order; k++) {
    x->replicated[k] = t->replicated[k];
    if (!t->replicated[k]) {
      PetscInt P = t->part->shape[k];
      PetscCall(PetscMalloc1(P, &x->userlx[k]));
      for (PetscInt p = 0; p < P; p++) x->userlx[k][p] = t->ranges[k][p + 1] - t->ranges[k][p];
    }
    x->lo[k] = t->lo[k];
    x->hi[k] = t->hi[k];
  }
  x->emptyok = PETSC_TRUE;
  x->memtype  = mt;
  x->format   = t->format;
  x->bs       = t->bs;
  x->blockdim = t->blockdim;
  *y          = x;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorDuplicate - Creates a tensor with the same layout and type (values not copied)

  Collective

  Level: beginner

.seealso: `DDTensorDuplicateLayout()`, `DDTensorCopy()`
@*/
PetscErrorCode DDTensorDuplicate(DDTensor t, DDTensor *y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(t, "DDTensorDuplicate"));
  DDCheckPointer(y, 2);
  PetscCall(DDTensorDuplicateLayout(t, t->dtype, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorDestroy - Destroys a tensor

  Collective

  Level: beginner

.seealso: `DDTensorCreate()`
@*/
PetscErrorCode DDTensorDestroy(DDTensor *t)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckPointer(t, 1);
  if (!*t) PetscFunctionReturn(PETSC_SUCCESS);
  DDCheckHeader(*t, DD_TENSOR_CLASSID, 1);
  if (--((PetscObject)(*t))->refct > 0) {
    *t = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCheck(!(*t)->placedvec, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Tensor still wraps a Vec; call DDTensorResetVec() before destroying it");
  if ((*t)->ownsarray) {
    const struct _DDBackendMemOps *mem;
    PetscCall(TensorMem(*t, &mem));
    PetscCall(mem->free((*t)->array));
  }
  PetscCall(PetscFree((*t)->hostmirror));
  PetscCall(PetscFree((*t)->sharedvecs)); /* empty: each of its Vecs held the tensor */
  for (PetscInt k = 0; k < DD_MAX_DIM; k++) {
    PetscCall(PetscFree((*t)->ranges[k]));
    PetscCall(PetscFree((*t)->userlx[k]));
  }
  PetscCall(DDPartitionDestroy(&(*t)->part));
  PetscCall(PetscHeaderDestroy(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorView - Prints the tensor's global shape, partition, type, format and every rank's piece

  Collective

  Input Parameters:
+ t      - the tensor
- viewer - an ASCII viewer (with format `PETSC_VIEWER_ASCII_INFO_DETAIL` the local values are printed too)

  Level: beginner

.seealso: `DDTensorCreate()`
@*/
PetscErrorCode DDTensorView(DDTensor t, PetscViewer viewer)
DD_CXX_TRY
{
  PetscBool         iascii;
  PetscViewerFormat vf;
  char              sh[128], ps[128];

  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)t), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerGetFormat(viewer, &vf));
  PetscCall(DDShapeToString_Private(t->order, t->shape, sh, sizeof(sh)));
  if (t->part) PetscCall(DDShapeToString_Private(t->part->order, t->part->shape, ps, sizeof(ps)));
  else PetscCall(PetscStrcpy(ps, "(none)"));
  PetscCall(PetscObjectPrintClassNamePrefixType((PetscObject)t, viewer));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  PetscCall(PetscViewerASCIIPrintf(viewer, "shape %s %s, partition %s, format %s, %s memory\n", sh, DDDataTypes[t->dtype], ps, DDTensorFormats[t->format], DDMemTypes[t->memtype]));
  if (t->setupcalled) {
    PetscMPIInt rank;
    PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)t), &rank));
    PetscCall(PetscViewerASCIIPushSynchronized(viewer));
    if (t->active) {
      char st[128], n[128], lo[128], hi[128];
      PetscCall(DDShapeToString_Private(t->order, t->layout.start, st, sizeof(st)));
      PetscCall(DDShapeToString_Private(t->order, t->layout.n, n, sizeof(n)));
      PetscCall(DDShapeToString_Private(t->order, t->layout.lo, lo, sizeof(lo)));
      PetscCall(DDShapeToString_Private(t->order, t->layout.hi, hi, sizeof(hi)));
      PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] piece %s at %s, halo lo %s hi %s\n", rank, n, st, lo, hi));
      if (vf == PETSC_VIEWER_ASCII_INFO_DETAIL) {
        void *h;
        PetscCall(DDTensorGetHostArray_Private(t, &h));
        PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
          using T    = decltype(z);
          const T *a = (const T *)h;
          PetscFunctionBegin;
          ForEachBulkRun(t->layout, [&](PetscInt off, PetscInt len) {
            for (PetscInt i = 0; i < len; i++) (void)PetscViewerASCIISynchronizedPrintf(viewer, " %g", (double)a[off + i]);
          });
          PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "\n"));
          PetscFunctionReturn(PETSC_SUCCESS);
        }));
        PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_FALSE, &h));
      }
    } else PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] idle\n", rank));
    PetscCall(PetscViewerFlush(viewer));
    PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  }
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDTensorViewFromOptions - Views the tensor if an option asks for it

  Collective

  Level: intermediate

.seealso: `DDTensorView()`
@*/
PetscErrorCode DDTensorViewFromOptions(DDTensor t, PetscObject obj, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectViewFromOptions((PetscObject)t, obj, name));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDTensorCheckSetUp_Private(DDTensor t, const char fn[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck(t, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "%s: null tensor", fn);
  PetscCheck(((PetscObject)t)->classid == DD_TENSOR_CLASSID, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "%s: the tensor argument is not a DDTensor (destroyed, or another kind of object)", fn);
  PetscValidHeaderSpecific(t, DD_TENSOR_CLASSID, 1);
  PetscCheck(t->setupcalled, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "%s: call DDTensorSetUp() first", fn);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDTensorCheckSameType_Private(DDTensor x, DDTensor y, const char fn[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck(x->dtype == y->dtype, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "%s: data types differ (%s and %s)", fn, DDDataTypes[x->dtype], DDDataTypes[y->dtype]);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorCompatible - Whether two tensors are distributed alike

  Not collective

  Output Parameter:
. flg - `PETSC_TRUE` when shape, partition, ownership ranges and replication agree (halos,
        formats and data types may differ)

  Level: intermediate

.seealso: `DDTensorCopy()`
@*/
PetscErrorCode DDTensorCompatible(DDTensor x, DDTensor y, PetscBool *flg)
DD_CXX_TRY
{
  PetscBool eq;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(x, "DDTensorCompatible"));
  PetscCall(DDTensorCheckSetUp_Private(y, "DDTensorCompatible"));
  DDCheckPointer(flg, 3);
  *flg = PETSC_FALSE;
  if (x->order != y->order) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt k = 0; k < x->order; k++)
    if (x->shape[k] != y->shape[k] || x->replicated[k] != y->replicated[k]) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDPartitionEqual(x->part, y->part, &eq));
  if (!eq) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt k = 0; k < x->order; k++)
    for (PetscInt p = 0; p <= x->part->shape[k]; p++)
      if (x->ranges[k][p] != y->ranges[k][p]) PetscFunctionReturn(PETSC_SUCCESS);
  *flg = PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDTensorCheckCompatible_Private(DDTensor x, DDTensor y, const char fn[])
DD_CXX_TRY
{
  PetscBool flg;
  char      sx[128], sy[128];

  PetscFunctionBegin;
  PetscCall(DDTensorCompatible(x, y, &flg));
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  PetscCall(DDShapeToString_Private(y->order, y->shape, sy, sizeof(sy)));
  PetscCheck(flg, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "%s: tensors are not distributed alike (shapes %s and %s; partitions, ownership ranges and replication must match too)", fn, sx, sy);
  PetscCall(DDTensorCheckSameType_Private(x, y, fn));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorSetMemType - Chooses where a tensor's storage lives: host memory or the device memory of
  the GPU backend

  Logically collective

  Input Parameters:
+ t     - the tensor (before `DDTensorSetUp()`)
- mtype - `DD_MEMTYPE_HOST` (the default) or `DD_MEMTYPE_DEVICE`

  Options Database Key:
. -tensor_memtype <host,device> - the memory type

  Notes:
  A device tensor is allocated by the "/gpu/cuda" backend (a build with -DDDNN_WITH_CUDA=ON, on a
  process that sees a CUDA device; otherwise `DDTensorSetUp()` errors saying which is missing).
  Its arithmetic (`DDTensorSet()`, `DDTensorScale()`, `DDTensorCopy()`, `DDTensorAXPBY()`, ...)
  runs as device kernels. `DDTensorGetArray()` and `DDTensorGetArrayRead()` return a host copy
  (`DDTensorRestoreArray()` copies it back, as PETSc's `VecGetArray()` of a GPU vector does), the
  reductions, views, random fills and Vec copies stage through that copy, and
  `DDTensorGetArrayAndMemType()` returns the device pointer. `DDTensorCopy()` copies between host
  and device tensors. The primitives that move data (halo, repartition, scatter, broadcast,
  sum-reduce, all-sum-reduce: `DDPrimitiveSetUp()`) take device tensors; layers, the fft
  primitive, datasets and checkpoints do not yet: they error saying so.

  Level: intermediate

.seealso: `DDTensorGetMemType()`, `DDTensorGetArrayAndMemType()`, `DDMemType`, `DDBackendSetDefault()`
@*/
PetscErrorCode DDTensorSetMemType(DDTensor t, DDMemType mtype)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(t, DD_TENSOR_CLASSID, 1);
  PetscValidLogicalCollectiveEnum(t, mtype, 2);
  PetscCheck(mtype == DD_MEMTYPE_HOST || mtype == DD_MEMTYPE_DEVICE, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_OUTOFRANGE, "Unknown memory type %d", (int)mtype);
  PetscCheck(!t->setupcalled || mtype == t->memtype, PetscObjectComm((PetscObject)t), PETSC_ERR_ARG_WRONGSTATE, "Set the memory type of a tensor before DDTensorSetUp() (it is set up in %s memory)", DDMemTypes[t->memtype]);
  t->memtype = mtype;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDTensorCheckHost_Private(DDTensor t, const char fn[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck(t->memtype == DD_MEMTYPE_HOST, PETSC_COMM_SELF, PETSC_ERR_SUP, "%s() does not support device tensors yet (tensor %s is in %s memory); copy it to a host tensor", fn, ((PetscObject)t)->name ? ((PetscObject)t)->name : "(unnamed)", DDMemTypes[t->memtype]);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDTensorGetHostArray_Private(DDTensor t, void **a)
DD_CXX_TRY
{
  const struct _DDBackendMemOps *mem;
  size_t                         es;

  PetscFunctionBegin;
  if (t->memtype == DD_MEMTYPE_HOST) {
    *a = t->array;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDDataTypeGetSize(t->dtype, &es));
  if (!t->hostmirror) PetscCall(PetscMalloc(t->layout.size * es + 1, &t->hostmirror));
  PetscCall(TensorMem(t, &mem));
  PetscCall(mem->copy(t->hostmirror, t->array, t->layout.size * es)); /* device to host (cudaMemcpyDefault) */
  *a = t->hostmirror;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDTensorRestoreHostArray_Private(DDTensor t, PetscBool written, void **a)
DD_CXX_TRY
{
  const struct _DDBackendMemOps *mem;
  size_t                         es;

  PetscFunctionBegin;
  if (a) *a = NULL;
  if (!written) PetscFunctionReturn(PETSC_SUCCESS);
  if (t->memtype != DD_MEMTYPE_HOST) {
    PetscCheck(t->hostmirror, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Restoring a host array of a device tensor that was not taken");
    PetscCall(DDDataTypeGetSize(t->dtype, &es));
    PetscCall(TensorMem(t, &mem));
    PetscCall(mem->copy(t->array, t->hostmirror, t->layout.size * es)); /* host to device */
  }
  PetscCall(DDTensorStateIncrease_Private(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
