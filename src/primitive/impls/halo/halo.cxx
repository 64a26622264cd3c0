/*
  HALOEXCHANGE H (paper 000, sec. 3.2.5 and Appendix B): the generalized, unbalanced, in-place
  halo exchange, with the padding shims of sec. 4.1.1.

  The load balance is driven by the output (App. B.1): along each dimension the output of a
  sliding kernel (size k, stride s, dilation d, left padding p) has its own balanced (or
  given) decomposition, and output range [o0, o1) of a worker needs input [o0 s - p,
  (o1 - 1) s - p + (k - 1) d + 1). The difference between this window and the worker's bulk
  gives the halo widths of each side, which may differ between workers and sides, and may be
  negative ("extra input" that the local kernel must skip, App. B.4-B.5).

  Every halo entry of the window (corners included) is a PetscSF leaf whose root is the
  bulk entry that holds the same global index; entries outside the global tensor map to a
  source by the padding mode (reflect, replicate, circular) or get a constant (zeros). So
  H copies bulk -> halo (PetscSFBcast), and H* adds halo -> bulk (PetscSFReduce with MPI_SUM)
  then clears the halo (eq. 22-25): the "add into the owners' bulk" of the adjoint.
  The exchange is one phase with direct corner neighbors instead of the nested
  dimension-by-dimension sequence of eq. 23; both are the same linear operator. Since every
  leaf names its true owner, a window may reach past the adjacent workers (pieces thinner
  than the halo, a global pool over many workers): the entries come from whichever workers
  hold them, in the same single phase.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <tensor/layout.hpp>
#include <primitive/sfutil.hpp>
#include <primitive/exchange.hpp>
#include <primitive/settings.hpp>
#include <tensor/argcheck.hpp>
#include <vector>
#include <algorithm>

using namespace ddnn;

namespace
{
enum { SPEC_NONE = 0, SPEC_KERNEL = 1, SPEC_WINDOW = 2 };

struct DimSpec {
  int                   mode = SPEC_NONE;
  PetscInt              k = 1, s = 1, d = 1, plo = 0, m = PETSC_DECIDE;
  std::vector<PetscInt> outlx;
  PetscInt              wa = 0, wb = 0;
  DDPaddingMode         pad = DD_PADDING_ZEROS;
};

struct Halo {
  DimSpec               spec[DD_MAX_DIM];
  PetscReal             padvalue = 0;
  PetscBool             neighborsonly = PETSC_FALSE;
  PetscInt              order    = 0;
  PetscInt              wa[DD_MAX_DIM] = {0}, wb[DD_MAX_DIM] = {0};
  PetscInt              oa[DD_MAX_DIM] = {0}, on[DD_MAX_DIM] = {0};
  PetscInt              needlo[DD_MAX_DIM] = {0}, needhi[DD_MAX_DIM] = {0};
  PetscSF               sf = NULL; /* the graph: leaves are window entries outside the bulk, roots their sources */
  Exchange             *ex = nullptr;
  std::vector<PetscInt> pads;    /* storage offsets of constant padding */
  Runs                  padruns;
  PetscInt              nremote = 0;
  bool                  active  = false;
};
} // namespace

static PetscErrorCode HaloGet(DDPrimitive prim, Halo **h)
{
  PetscBool match;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, DDPRIMITIVEHALO, &match));
  PetscCheck(match, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONG, "Not a halo primitive (type %s)", ((PetscObject)prim)->type_name ? ((PetscObject)prim)->type_name : "(none)");
  *h = (Halo *)prim->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveHaloSetKernel - Describes the sliding kernel applied along one tensor dimension

  Logically collective

  Input Parameters:
+ prim    - a `DDPRIMITIVEHALO` primitive
. dim     - the tensor dimension
. k       - kernel size
. s       - stride
. d       - dilation
. padding - padding before the first entry (PyTorch's padding; the output size uses it on both sides)
- m       - the output size, or `PETSC_DECIDE` for floor((n + 2 padding - d (k - 1) - 1) / s) + 1;
            give it for ceil_mode or asymmetric padding

  Notes:
  The output of the kernel is decomposed like the input's partition (balanced, or as
  `DDPrimitiveHaloSetOutputRanges()` says); each worker's input window, and so its halo,
  follows from its output range (paper 000, App. B). Dimensions without a kernel keep their
  bulk as window.

  Level: intermediate

.seealso: `DDPrimitiveHaloSetWindow()`, `DDPrimitiveHaloSetPadding()`, `DDPrimitiveHaloGetWidths()`
@*/
PetscErrorCode DDPrimitiveHaloSetKernel(DDPrimitive prim, PetscInt dim, PetscInt k, PetscInt s, PetscInt d, PetscInt padding, PetscInt m)
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(dim >= 0 && dim < DD_MAX_DIM, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " out of range", dim);
  PetscCheck(k >= 1 && s >= 1 && d >= 1 && padding >= 0, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "Kernel size %" PetscInt_FMT ", stride %" PetscInt_FMT " and dilation %" PetscInt_FMT " must be positive and padding %" PetscInt_FMT " non-negative", k, s, d, padding);
  h->spec[dim].mode = SPEC_KERNEL;
  h->spec[dim].k    = k;
  h->spec[dim].s    = s;
  h->spec[dim].d    = d;
  h->spec[dim].plo  = padding;
  h->spec[dim].m    = m;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloSetOutputRanges - Gives the decomposition of the kernel's output along a dimension

  Logically collective

  Input Parameters:
+ prim - a `DDPRIMITIVEHALO` primitive
. dim  - the tensor dimension
. n    - the number of workers of the partition along dim
- lx   - output sizes per partition coordinate along dim (NULL: balanced)

  Notes:
  The same on every rank: `DDPrimitiveSetUp()` raises an error on every rank when they differ.

  Level: advanced

.seealso: `DDPrimitiveHaloSetKernel()`
@*/
PetscErrorCode DDPrimitiveHaloSetOutputRanges(DDPrimitive prim, PetscInt dim, PetscInt n, const PetscInt lx[])
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(dim >= 0 && dim < DD_MAX_DIM, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " out of range", dim);
  PetscCheck(h->spec[dim].mode == SPEC_KERNEL, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "Set the kernel of dimension %" PetscInt_FMT " first", dim);
  PetscCheck(!lx || n >= 1, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "DDPrimitiveHaloSetOutputRanges(): %" PetscInt_FMT " output ranges given along dimension %" PetscInt_FMT ": give one per worker", n, dim);
  h->spec[dim].outlx.clear();
  if (lx) h->spec[dim].outlx.assign(lx, lx + n);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloSetWindow - Gives this rank's input window along a dimension directly

  Not collective

  Input Parameters:
+ prim - a `DDPRIMITIVEHALO` primitive
. dim  - the tensor dimension
. a    - first global index of the window (may be negative: padding)
- b    - one past the last (may exceed the global size: padding)

  Notes:
  For kernels whose windows do not follow `DDPrimitiveHaloSetKernel()`'s rule (transposed
  convolutions, interpolation). The halo widths are bulk start - a and b - bulk end.

  Level: advanced

.seealso: `DDPrimitiveHaloSetKernel()`
@*/
PetscErrorCode DDPrimitiveHaloSetWindow(DDPrimitive prim, PetscInt dim, PetscInt a, PetscInt b)
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(dim >= 0 && dim < DD_MAX_DIM, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " out of range", dim);
  PetscCheck(a <= b, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Window [%" PetscInt_FMT ", %" PetscInt_FMT ") is reversed", a, b);
  h->spec[dim].mode = SPEC_WINDOW;
  h->spec[dim].wa   = a;
  h->spec[dim].wb   = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloSetPadding - How entries outside the global tensor are filled along a dimension

  Logically collective

  Input Parameters:
+ prim - a `DDPRIMITIVEHALO` primitive
. dim  - the tensor dimension
- mode - `DD_PADDING_ZEROS` (default), `DD_PADDING_REFLECT`, `DD_PADDING_REPLICATE` or `DD_PADDING_CIRCULAR`

  Notes:
  All modes are distributed: a reflected or wrapped entry comes from whichever worker owns
  it, and the adjoint adds the padding's gradient back into that owner. A value outside the
  `DDPaddingMode` enum is an error (`PETSC_ERR_ARG_OUTOFRANGE`); so is a mode that differs
  between ranks, at `DDPrimitiveSetUp()`.

  Options Database Key:
. -primitive_halo_padding <zeros,reflect,replicate,circular> - the mode of every dimension

  Level: intermediate

.seealso: `DDPrimitiveHaloSetPadValue()`
@*/
PetscErrorCode DDPrimitiveHaloSetPadding(DDPrimitive prim, PetscInt dim, DDPaddingMode mode)
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(dim >= 0 && dim < DD_MAX_DIM, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " out of range", dim);
  PetscCheck((int)mode >= (int)DD_PADDING_ZEROS && (int)mode <= (int)DD_PADDING_CIRCULAR, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "DDPrimitiveHaloSetPadding(): unknown padding mode %d (zeros, reflect, replicate or circular) along dimension %" PetscInt_FMT, (int)mode, dim);
  h->spec[dim].pad = mode;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloSetPadValue - The constant of `DD_PADDING_ZEROS` padding (e.g. -inf for max pooling)

  Logically collective

  Notes:
  A nonzero constant makes the forward operator affine; its adjoint (of the linear part)
  still clears the padding. NaN is an error (`PETSC_ERR_ARG_OUTOFRANGE`); -inf and +inf are
  allowed (the padding of max and min pooling). The value must be the same on every rank
  (checked by `DDPrimitiveSetUp()`).

  Level: advanced

.seealso: `DDPrimitiveHaloSetPadding()`
@*/
PetscErrorCode DDPrimitiveHaloSetPadValue(DDPrimitive prim, PetscReal v)
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(!PetscIsNanReal(v), PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "DDPrimitiveHaloSetPadValue(): the padding value is NaN");
  h->padvalue = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloSetNeighborsOnly - Requires every halo to come from the adjacent workers

  Logically collective

  Input Parameters:
+ prim - a `DDPRIMITIVEHALO` primitive
- flg  - `PETSC_TRUE` to make `DDPrimitiveSetUp()` fail when a window reaches past a neighbor

  Options Database Key:
. -primitive_halo_neighbors_only <bool> - the same

  Notes:
  By default a window may reach any worker: each halo entry is taken from the worker that
  owns it, so pieces thinner than a kernel's reach work. Paper 000 (sec. 3.2.5) assumes
  halos from adjacent workers only; this flag turns that assumption into a check, for codes
  that want their exchange to stay a nearest-neighbor one. The error names the rank, the
  dimension, its bulk, the window and the coordinate the window reaches.

  Level: advanced

.seealso: `DDPrimitiveHaloSetKernel()`, `DDPrimitiveHaloGetWindow()`
@*/
PetscErrorCode DDPrimitiveHaloSetNeighborsOnly(DDPrimitive prim, PetscBool flg)
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  h->neighborsonly = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloGetWindow - This rank's input window (global indices) after set-up

  Not collective

  Output Parameters:
+ a - first global index per dimension (negative: padding)
- b - one past the last per dimension

  Level: intermediate

.seealso: `DDPrimitiveHaloGetWidths()`, `DDPrimitiveHaloGetOutputCorners()`
@*/
PetscErrorCode DDPrimitiveHaloGetWindow(DDPrimitive prim, PetscInt a[], PetscInt b[])
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(prim->setupcalled, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() first");
  for (PetscInt k = 0; k < h->order; k++) {
    if (a) a[k] = h->wa[k];
    if (b) b[k] = h->wb[k];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloGetOutputCorners - Start and size of this rank's piece of the kernel's output

  Not collective

  Notes:
  Dimensions without a kernel report the input's bulk.

  Level: intermediate

.seealso: `DDPrimitiveHaloGetWindow()`
@*/
PetscErrorCode DDPrimitiveHaloGetOutputCorners(DDPrimitive prim, PetscInt start[], PetscInt n[])
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(prim->setupcalled, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() first");
  for (PetscInt k = 0; k < h->order; k++) {
    if (start) start[k] = h->oa[k];
    if (n) n[k] = h->on[k];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveHaloGetWidths - This rank's halo widths (signed: negative means extra input to skip)

  Not collective

  Output Parameters:
+ lo - bulk start - window start, per dimension
- hi - window end - bulk end, per dimension

  Level: intermediate

.seealso: `DDPrimitiveHaloGetWindow()`
@*/
PetscErrorCode DDPrimitiveHaloGetWidths(DDPrimitive prim, PetscInt lo[], PetscInt hi[])
DD_CXX_TRY
{
  Halo *h;

  PetscFunctionBegin;
  PetscCall(HaloGet(prim, &h));
  PetscCheck(prim->setupcalled, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() first");
  for (PetscInt k = 0; k < h->order; k++) {
    if (lo) lo[k] = h->needlo[k];
    if (hi) hi[k] = h->needhi[k];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode HA_SetFromOptions(DDPrimitive prim, PetscOptionItems *PetscOptionsObject)
{
  auto     *h = (Halo *)prim->data;
  PetscEnum mode;
  PetscBool flg;
  PetscInt  v[DD_MAX_DIM], n;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDPrimitive halo options");
  mode = (PetscEnum)h->spec[DD_MAX_DIM - 1].pad;
  PetscCall(PetscOptionsEnum("-primitive_halo_padding", "Padding mode of every dimension", "DDPrimitiveHaloSetPadding", DDPaddingModes, mode, &mode, &flg));
  if (flg)
    for (PetscInt k = 0; k < DD_MAX_DIM; k++) h->spec[k].pad = (DDPaddingMode)mode;
  n = DD_MAX_DIM;
  PetscCall(PetscOptionsIntArray("-primitive_halo_kernel", "Kernel size per tensor dimension (1: no kernel)", "DDPrimitiveHaloSetKernel", v, &n, &flg));
  if (flg)
    for (PetscInt k = 0; k < n; k++)
      if (v[k] > 1 || h->spec[k].mode == SPEC_KERNEL) {
        h->spec[k].mode = SPEC_KERNEL;
        h->spec[k].k    = v[k];
      }
  n = DD_MAX_DIM;
  PetscCall(PetscOptionsIntArray("-primitive_halo_stride", "Stride per tensor dimension", "DDPrimitiveHaloSetKernel", v, &n, &flg));
  if (flg)
    for (PetscInt k = 0; k < n; k++)
      if (h->spec[k].mode == SPEC_KERNEL) h->spec[k].s = v[k];
  n = DD_MAX_DIM;
  PetscCall(PetscOptionsIntArray("-primitive_halo_dilation", "Dilation per tensor dimension", "DDPrimitiveHaloSetKernel", v, &n, &flg));
  if (flg)
    for (PetscInt k = 0; k < n; k++)
      if (h->spec[k].mode == SPEC_KERNEL) h->spec[k].d = v[k];
  n = DD_MAX_DIM;
  PetscCall(PetscOptionsIntArray("-primitive_halo_padding_width", "Padding per tensor dimension", "DDPrimitiveHaloSetKernel", v, &n, &flg));
  if (flg)
    for (PetscInt k = 0; k < n; k++)
      if (h->spec[k].mode == SPEC_KERNEL) h->spec[k].plo = v[k];
  PetscCall(PetscOptionsBool("-primitive_halo_neighbors_only", "Fail set-up when a window reaches past the adjacent workers", "DDPrimitiveHaloSetNeighborsOnly", h->neighborsonly, &h->neighborsonly, NULL));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_Reset(DDPrimitive prim)
{
  auto *h = (Halo *)prim->data;

  PetscFunctionBegin;
  PetscCall(PetscSFDestroy(&h->sf));
  delete h->ex;
  h->ex = nullptr;
  h->pads.clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_Destroy(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(HA_Reset(prim));
  delete (Halo *)prim->data;
  prim->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Source of global index i along a dimension of size n under a padding mode; -1: constant padding */
static inline PetscInt PadSource(PetscInt i, PetscInt n, DDPaddingMode mode)
{
  if (i >= 0 && i < n) return i;
  switch (mode) {
  case DD_PADDING_CIRCULAR:
    return ((i % n) + n) % n;
  case DD_PADDING_REPLICATE:
    return i < 0 ? 0 : n - 1;
  case DD_PADDING_REFLECT:
    return i < 0 ? -i : 2 * (n - 1) - i;
  default:
    return -1;
  }
}

static PetscErrorCode HA_SetUp(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto       *h    = (Halo *)prim->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)prim);
  const PetscInt d = x->order;
  PetscMPIInt rank;
  char        msg[512] = "";
  PetscBool   ok       = PETSC_TRUE;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  h->order  = d;
  h->active = x->active;
  for (PetscInt k = d; k < DD_MAX_DIM; k++) PetscCheck(h->spec[k].mode != SPEC_KERNEL, comm, PETSC_ERR_ARG_OUTOFRANGE, "A kernel is set on dimension %" PetscInt_FMT " but the tensor has only %" PetscInt_FMT " dimensions", k, d);
  for (PetscInt k = d; k < DD_MAX_DIM && ok; k++) /* a window is this rank's alone: raised with the rank-local errors below, on every rank */
    if (h->spec[k].mode == SPEC_WINDOW) {
      ok = PETSC_FALSE;
      PetscCall(PetscSNPrintf(msg, sizeof(msg), "A window is set on dimension %" PetscInt_FMT " (DDPrimitiveHaloSetWindow() on rank %d) but the tensor has only %" PetscInt_FMT " dimensions", k, rank, d));
    }
  /* collective checks on the kernel before anything rank-local */
  for (PetscInt k = 0; k < d; k++) {
    DimSpec &S = h->spec[k];
    if (S.mode != SPEC_KERNEL) continue;
    PetscInt n = x->shape[k], ext = S.d * (S.k - 1) + 1;
    if (S.m == PETSC_DECIDE) {
      PetscCheck(n + 2 * S.plo >= ext, comm, PETSC_ERR_ARG_SIZ, "Kernel of extent %" PetscInt_FMT " (size %" PetscInt_FMT ", dilation %" PetscInt_FMT ") is larger than the padded input (%" PetscInt_FMT " + 2 x %" PetscInt_FMT ") along dimension %" PetscInt_FMT, ext, S.k, S.d, n, S.plo, k);
      S.m = (n + 2 * S.plo - ext) / S.s + 1;
    }
    PetscCheck(S.m >= 1, comm, PETSC_ERR_ARG_SIZ, "Output size %" PetscInt_FMT " along dimension %" PetscInt_FMT " must be positive", S.m, k);
    PetscCheck(S.pad != DD_PADDING_REFLECT || S.plo < n, comm, PETSC_ERR_ARG_SIZ, "Reflect padding %" PetscInt_FMT " must be smaller than the dimension (%" PetscInt_FMT ") along dimension %" PetscInt_FMT, S.plo, n, k);
  }
  /* this rank's window, output corners and halo widths */
  for (PetscInt k = 0; k < d; k++) {
    DimSpec       &S  = h->spec[k];
    const PetscInt st = x->layout.start[k], n = x->layout.n[k];
    h->wa[k] = st;
    h->wb[k] = st + n;
    h->oa[k] = st;
    h->on[k] = n;
    if (!x->active) continue;
    if (S.mode == SPEC_KERNEL) {
      PetscInt P = x->replicated[k] ? 1 : x->part->shape[k], c = x->replicated[k] ? 0 : x->part->coords[k];
      std::vector<PetscInt> r(P + 1);
      if (!S.outlx.empty() && (PetscInt)S.outlx.size() != P && ok) {
        ok = PETSC_FALSE;
        PetscCall(PetscSNPrintf(msg, sizeof(msg), "%zu output ranges given along dimension %" PetscInt_FMT ", which has %" PetscInt_FMT " workers", S.outlx.size(), k, P));
      } else if (!S.outlx.empty()) {
        r[0] = 0;
        for (PetscInt p = 0; p < P; p++) r[p + 1] = r[p] + S.outlx[p];
      } else PetscCall(DDSplitOwnership_Private(S.m, P, r.data()));
      if (r[P] != S.m && ok) {
        ok = PETSC_FALSE;
        PetscCall(PetscSNPrintf(msg, sizeof(msg), "Output ranges along dimension %" PetscInt_FMT " sum to %" PetscInt_FMT " but the output has %" PetscInt_FMT " entries", k, r[P], S.m));
      }
      PetscInt o0 = r[c], o1 = r[c + 1];
      h->oa[k] = o0;
      h->on[k] = o1 - o0;
      if (o1 > o0) {
        h->wa[k] = o0 * S.s - S.plo;
        h->wb[k] = (o1 - 1) * S.s - S.plo + (S.k - 1) * S.d + 1;
      } else h->wb[k] = h->wa[k]; /* no output: empty window */
    } else if (S.mode == SPEC_WINDOW) {
      h->wa[k] = S.wa;
      h->wb[k] = S.wb;
    }
    h->needlo[k] = st - h->wa[k];
    h->needhi[k] = h->wb[k] - (st + n);
    /* paper 000 sec. 3.2.5's assumption, checked on request (DDPrimitiveHaloSetNeighborsOnly) */
    if (h->neighborsonly && !x->replicated[k] && h->wb[k] > h->wa[k] && ok) {
      PetscInt lo = PetscMax(h->wa[k], 0), hi = PetscMin(h->wb[k], x->shape[k]), c = x->part->coords[k];
      if (lo < hi) {
        PetscInt cl = OwnerCoordinate(x, k, lo), ch = OwnerCoordinate(x, k, hi - 1);
        if (cl < c - 1 || ch > c + 1) {
          ok = PETSC_FALSE;
          PetscCall(PetscSNPrintf(msg, sizeof(msg), "Rank %d (coordinate %" PetscInt_FMT " of %" PetscInt_FMT " along dimension %" PetscInt_FMT ", bulk [%" PetscInt_FMT ", %" PetscInt_FMT ")) needs input [%" PetscInt_FMT ", %" PetscInt_FMT "), which reaches coordinate %" PetscInt_FMT " beyond its neighbors (-primitive_halo_neighbors_only)", rank, c, x->part->shape[k], k, st, st + n, lo, hi, cl < c - 1 ? cl : ch));
        }
      }
    }
    if (S.pad == DD_PADDING_REFLECT) {
      /* reflected sources must exist: -(N-1) <= i <= 2N-2 */
      PetscInt lo = h->wa[k], hi = h->wb[k], N = x->shape[k];
      if (hi > lo && (lo < -(N - 1) || hi - 1 > 2 * N - 2) && ok) {
        ok = PETSC_FALSE;
        PetscCall(PetscSNPrintf(msg, sizeof(msg), "Padding along dimension %" PetscInt_FMT " reaches [%" PetscInt_FMT ", %" PetscInt_FMT "), more than the dimension's size %" PetscInt_FMT, k, lo, hi, N));
      }
    }
  }
  PetscCall(DDCheckCollective(comm, ok, PETSC_ERR_ARG_INCOMP, msg));
  /* storage for the halo */
  {
    PetscInt lo[DD_MAX_DIM], hi[DD_MAX_DIM];
    for (PetscInt k = 0; k < d; k++) {
      lo[k] = x->active ? PetscMax(0, h->needlo[k]) : 0;
      hi[k] = x->active ? PetscMax(0, h->needhi[k]) : 0;
    }
    PetscCall(DDTensorEnsureHalo(x, lo, hi));
  }
  /* the leaves: entries of the window outside the bulk, as disjoint slabs */
  const DDLayout          &L = x->layout;
  std::vector<PetscInt>    ilocal;
  std::vector<PetscSFNode> iremote;
  h->nremote = 0;
  if (x->active) {
    PetscInt A[DD_MAX_DIM], B[DD_MAX_DIM], bl[DD_MAX_DIM], bh[DD_MAX_DIM];
    for (PetscInt k = 0; k < d; k++) {
      A[k]  = h->wa[k] - L.start[k] + L.lo[k];
      B[k]  = h->wb[k] - L.start[k] + L.lo[k];
      bl[k] = PetscMax(A[k], L.lo[k]);
      bh[k] = PetscMin(B[k], L.lo[k] + L.n[k]);
    }
    for (PetscInt k = 0; k < d; k++) {
      for (int side = 0; side < 2; side++) {
        PetscInt lo[DD_MAX_DIM], hi[DD_MAX_DIM];
        for (PetscInt m = 0; m < d; m++) {
          lo[m] = m < k ? bl[m] : A[m];
          hi[m] = m < k ? bh[m] : B[m];
        }
        if (side == 0) hi[k] = PetscMin(B[k], L.lo[k]);
        else lo[k] = PetscMax(A[k], L.lo[k] + L.n[k]);
        ForEachIndex(d, lo, hi, L.perm, [&](const PetscInt *j) {
          PetscInt c[DD_MAX_DIM], g[DD_MAX_DIM];
          bool     pad = false;
          for (PetscInt m = 0; m < d; m++) {
            PetscInt gi = j[m] - L.lo[m] + L.start[m];
            g[m]        = PadSource(gi, x->shape[m], h->spec[m].pad);
            if (g[m] < 0) {
              pad = true;
              break;
            }
            c[m] = OwnerCoordinate(x, m, g[m]);
            if (c[m] == -2) c[m] = x->part->coords[m];
          }
          PetscInt off = LayoutOffset(L, j);
          if (pad) {
            h->pads.push_back(off);
            return;
          }
          PetscMPIInt orank;
          PetscInt    index;
          OwnerOf(x, c, g, &orank, &index);
          ilocal.push_back(off);
          iremote.push_back({orank, index});
          if (orank != rank) h->nremote++;
        });
      }
    }
  }
  std::sort(h->pads.begin(), h->pads.end());
  h->padruns.Build(h->pads.data(), (PetscInt)h->pads.size());
  if (PricingOnly()) { /* a trial set-up of -net_distribution auto: the counts the model reads, no graph */
    if (PricingNoPlans()) PetscFunctionReturn(PETSC_SUCCESS);
    h->ex = new Exchange;
    PetscCall(BuildStoragePlan(comm, x, ilocal, iremote, h->ex, NULL));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(BuildStorageSF(comm, x, ilocal, iremote, &h->sf));
  {
    PetscMPIInt tag;
    PetscCall(PetscObjectGetNewTag((PetscObject)prim, &tag));
    h->ex = new Exchange;
    h->ex->memtype = x->memtype;
    PetscCall(h->ex->SetUp(h->sf, comm, tag, DDExchangeUseTypes()));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_ApplyBegin(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *h = (Halo *)prim->data;

  PetscFunctionBegin;
  /* the constant padding (no leaves of the exchange) is filled by the exchange: in Begin while the
     peers pack, or in End in the same pass over the rows as the face received on the other side
     (a plain W split) */
  PetscCall(h->ex->ForwardBegin(x->dtype, x->array, x->array, &h->padruns, h->padvalue));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_ApplyEnd(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *h = (Halo *)prim->data;

  PetscFunctionBegin;
  PetscCall(h->ex->ForwardEnd(x->dtype, x->array, x->array));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_AdjointBegin(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *h = (Halo *)prim->data;

  PetscFunctionBegin;
  /* the padding is cleared by the exchange (K_T of eq. 22), as the forward fills it */
  PetscCall(h->ex->AdjointBegin(x->dtype, x->array, x->array, true, &h->padruns, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_AdjointEnd(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *h = (Halo *)prim->data;

  PetscFunctionBegin;
  PetscCall(h->ex->AdjointEnd(x->dtype, x->array, x->array, true));
  /* clear the exchange's destinations (K_T of eq. 22): the halo (the padding was cleared by the exchange) */
  PetscCall(h->ex->ZeroLeaves(x->dtype, x->array));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* what must agree on every rank (src/primitive/settings.hpp): the kernels, output sizes and ranges,
   padding modes and value, the neighbors-only flag; not the windows (DDPrimitiveHaloSetWindow() is
   not collective: layers give each rank its own, and none on idle ranks) */
static PetscErrorCode HA_Settings(DDPrimitive prim, std::string *d)
{
  auto *h = (Halo *)prim->data;
  char  buf[256];

  PetscFunctionBegin;
  for (PetscInt k = 0; k < DD_MAX_DIM; k++) {
    const DimSpec &S = h->spec[k];
    if (S.mode != SPEC_KERNEL) continue;
    PetscCall(PetscSNPrintf(buf, sizeof(buf), "halo dimension %" PetscInt_FMT ": kernel size %" PetscInt_FMT ", stride %" PetscInt_FMT ", dilation %" PetscInt_FMT ", padding %" PetscInt_FMT ", output size ", k, S.k, S.s, S.d, S.plo));
    *d += buf;
    *d += S.m == PETSC_DECIDE ? std::string("decided") : std::to_string((long long)S.m);
    *d += "\n";
    if (!S.outlx.empty()) { /* a line of its own: the error shows the line where the ranks differ */
      *d += "halo dimension " + std::to_string((long long)k) + ": output ranges";
      for (PetscInt v : S.outlx) *d += " " + std::to_string((long long)v);
      *d += "\n";
    }
  }
  *d += "halo padding modes";
  for (PetscInt k = 0; k < DD_MAX_DIM; k++) *d += std::string(" ") + (((int)h->spec[k].pad >= 0 && h->spec[k].pad <= DD_PADDING_CIRCULAR) ? DDPaddingModes[h->spec[k].pad] : "?");
  PetscCall(PetscSNPrintf(buf, sizeof(buf), "\nhalo padding value %.17g\nhalo neighbors only %s\n", (double)h->padvalue, h->neighborsonly ? "yes" : "no"));
  *d += buf;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode HA_View(DDPrimitive prim, PetscViewer viewer)
{
  auto *h = (Halo *)prim->data;
  char  a[128], b[128], lo[128], hi[128];

  PetscFunctionBegin;
  if (!prim->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDShapeToString_Private(h->order, h->wa, a, sizeof(a)));
  PetscCall(DDShapeToString_Private(h->order, h->wb, b, sizeof(b)));
  PetscCall(DDShapeToString_Private(h->order, h->needlo, lo, sizeof(lo)));
  PetscCall(DDShapeToString_Private(h->order, h->needhi, hi, sizeof(hi)));
  PetscCall(PetscViewerASCIIPushSynchronized(viewer));
  PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] window [%s, %s), halo lo %s hi %s, %" PetscInt_FMT " halo entries from %" PetscInt_FMT " other ranks, %zu padding\n", PetscGlobalRank, a, b, lo, hi, h->nremote, h->ex ? h->ex->NumPeers() : 0, h->pads.size()));
  PetscCall(PetscViewerFlush(viewer));
  PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDPRIMITIVEHALO - "halo": the in-place, generalized (unbalanced) halo exchange (paper 000, sec. 3.2.5, App. B)

  DDPrimitiveSetUp(prim, x, NULL). Describe the kernel of each tensor dimension with
  `DDPrimitiveHaloSetKernel()` (or give windows with `DDPrimitiveHaloSetWindow()`); the
  halo widths per rank and side follow from the output's decomposition and may be unequal
  or negative. Set-up grows x's halo storage as needed. Forward fills the window's halo
  (corners included) from the owners' bulk and the padding per `DDPrimitiveHaloSetPadding()`;
  the adjoint adds the halo into the owners' bulk and clears it.
  `DDPrimitiveApplyBegin()`/`End()` let interior work overlap the exchange. A window may
  reach past the adjacent workers (each entry comes from its owner), unless
  `DDPrimitiveHaloSetNeighborsOnly()` asks for paper 000's adjacent-workers assumption.

  Options Database Keys:
+ -primitive_halo_kernel <k0,k1,...> - kernel size per tensor dimension
. -primitive_halo_stride <s0,...> - strides
. -primitive_halo_dilation <d0,...> - dilations
. -primitive_halo_padding_width <p0,...> - paddings
. -primitive_halo_padding <zeros,reflect,replicate,circular> - padding mode
- -primitive_halo_neighbors_only <bool> - fail set-up when a window reaches past the adjacent workers

  Level: beginner

.seealso: `DDPrimitiveHaloSetKernel()`, `DDPrimitiveHaloGetWindow()`, `DDPrimitiveHaloGetWidths()`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Halo(DDPrimitive prim)
{
  PetscFunctionBegin;
  prim->data                = new Halo;
  prim->inplace             = PETSC_TRUE;
  prim->device = PETSC_TRUE; /* device tensors: messages staged through host buffers (issue 11 part 3) */
  prim->ops->setfromoptions = HA_SetFromOptions;
  prim->ops->setup          = HA_SetUp;
  prim->ops->applybegin     = HA_ApplyBegin;
  prim->ops->applyend       = HA_ApplyEnd;
  prim->ops->adjointbegin   = HA_AdjointBegin;
  prim->ops->adjointend     = HA_AdjointEnd;
  prim->ops->view           = HA_View;
  prim->ops->reset          = HA_Reset;
  prim->ops->destroy        = HA_Destroy;
  PetscCall(PetscObjectComposeFunction((PetscObject)prim, DDPRIMITIVE_SETTINGS_C, HA_Settings));
  PetscFunctionReturn(PETSC_SUCCESS);
}
