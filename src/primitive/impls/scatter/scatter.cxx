/*
  SCATTER S: y = S x by a global index map, the data movement of layers that re-index a tensor
  (concat places an input in a channel range of the output, flatten maps (N, C, spatial...)
  onto (N, F)). Paper 000 sec. 3: a linear operator whose adjoint is derived, not autodiffed.

  The map m is given on the output side: every entry i of y's bulk (on the rank that owns it)
  names the global C-order index m(i) of the entry of x it copies, or -1. So

    (S x)_i = x_{m(i)}  (0 where m(i) = -1),    (S* y)_j = sum_{i : m(i) = j} y_i,

  S is a selection matrix (at most one 1 per row): a permutation, an injection, a gather with
  repeats or a restriction. x and y may have different shapes, partitions (worker counts, rank
  sets, unbalanced or empty pieces), halos and formats.

  Built on PetscSF as the repartition primitive (sec. 3.2.4): every mapped entry of y's bulk is
  a leaf whose root is x's entry m(i) in its owner's storage (BuildStorageSF fetches the owners'
  storage offsets, so packing follows each side's format). Forward = bcast (a copy, the run-based
  Exchange engine), adjoint = reduce with MPI_SUM. Where a rank's roots each have exactly one
  leaf (a permutation or injection, as in concat and flatten) the adjoint copies back; x
  entries without an image are zeroed, and where some root has several leaves the adjoint
  clears x's bulk and adds.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <tensor/layout.hpp>
#include <primitive/sfutil.hpp>
#include <primitive/exchange.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <primitive/settings.hpp>
#include <tensor/argcheck.hpp>
#include <vector>
#include <cstring>

using namespace ddnn;

namespace
{
struct Scatter {
  std::vector<PetscInt> map;            /* the index map of this rank (y's bulk, C order) */
  PetscBool             mapset = PETSC_FALSE;
  PetscBool             zero   = PETSC_TRUE; /* Apply zeroes y's unmapped entries */
  PetscSF               sf     = NULL;       /* leaves: y's mapped bulk entries; roots: x's storage */
  Exchange             *ex     = nullptr;
  std::vector<PetscInt> yzoff, yzlen;       /* runs of y's bulk that no entry of x maps to */
  std::vector<PetscInt> xzoff, xzlen;       /* runs of x's bulk the adjoint clears */
  bool                  xadd    = false;    /* some root of this rank has several leaves: sum */
  PetscInt              nremote = 0, nmapped = 0;
};
} // namespace

static PetscErrorCode SC_Reset(DDPrimitive prim)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  PetscCall(PetscSFDestroy(&s->sf));
  delete s->ex;
  s->ex = nullptr;
  s->yzoff.clear();
  s->yzlen.clear();
  s->xzoff.clear();
  s->xzlen.clear();
  s->xadd    = false;
  s->nremote = s->nmapped = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_Destroy(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(SC_Reset(prim));
  delete (Scatter *)prim->data;
  prim->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ScatterGet(DDPrimitive prim, Scatter **s, const char fn[])
{
  PetscBool match;

  PetscFunctionBegin;
  PetscCheck(prim, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "%s(): argument 1 (prim) is NULL", fn);
  PetscCheck(((PetscObject)prim)->classid == DD_PRIMITIVE_CLASSID, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "%s(): argument 1 (prim) is not a DDPrimitive", fn);
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, DDPRIMITIVESCATTER, &match));
  PetscCheck(match, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONG, "%s() needs a primitive of type %s, not %s", fn, DDPRIMITIVESCATTER, ((PetscObject)prim)->type_name ? ((PetscObject)prim)->type_name : "(not set)");
  *s = (Scatter *)prim->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* merges the storage offsets where flag[off] == want, over a tensor's bulk runs, into runs */
static void BulkRunsWhere(const DDLayout &L, const std::vector<char> &flag, char want, std::vector<PetscInt> &off, std::vector<PetscInt> &len)
{
  off.clear();
  len.clear();
  ForEachBulkRun(L, [&](PetscInt o, PetscInt n) {
    for (PetscInt i = o; i < o + n; i++) {
      if (flag[i] != want) continue;
      if (!off.empty() && off.back() + len.back() == i) len.back()++;
      else {
        off.push_back(i);
        len.push_back(1);
      }
    }
  });
}

static PetscErrorCode ZeroRuns(DDMemType mt, DDDataType dt, void *a, const std::vector<PetscInt> &off, const std::vector<PetscInt> &len)
{
  const struct _DDBackendVecOps *ops;
  PetscInt                       total = 0;

  PetscFunctionBegin;
  if (off.empty()) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt l : len) total += l;
  PetscCall(DDVecOps_Private(mt, &ops)); /* the memory's fill: a loop on the host, a kernel on the device */
  PetscCall(ops->fill(dt, off.size(), off.data(), len.data(), total, a, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_SetUp(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto          *s    = (Scatter *)prim->data;
  MPI_Comm       comm = PetscObjectComm((PetscObject)prim);
  const DDLayout &Ly  = y->layout, &Lx = x->layout;
  const PetscInt dx = x->order, dy = y->order;
  PetscInt       xsize = 1;
  PetscMPIInt    rank;
  char           sx[128], sy[128];

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(DDShapeToString_Private(dx, x->shape, sx, sizeof(sx)));
  PetscCall(DDShapeToString_Private(dy, y->shape, sy, sizeof(sy)));
  for (PetscInt k = 0; k < dx; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "The scatter moves split tensors; its input (shape %s) is replicated along dimension %" PetscInt_FMT " (use broadcast or sum-reduce)", sx, k);
  for (PetscInt k = 0; k < dy; k++) PetscCheck(!y->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "The scatter moves split tensors; its output (shape %s) is replicated along dimension %" PetscInt_FMT " (use broadcast or sum-reduce)", sy, k);
  for (PetscInt k = 0; k < dx; k++) xsize *= x->shape[k];
  if (!PricingSkipChecks()) { /* a trial set-up of -net_distribution auto: the concatenation's maps, checked at its first set-up */
    DDCheckAll(comm, s->mapset, PETSC_ERR_ARG_WRONGSTATE, "Set the scatter's index map first (DDPrimitiveScatterSetIndexMap())");
    DDCheckAll(comm, (PetscInt)s->map.size() == Ly.bulksize, PETSC_ERR_ARG_SIZ, "The scatter's index map has %" PetscInt_FMT " entries on rank %d but the output (shape %s) has %" PetscInt_FMT " entries there: give one per entry of the rank's piece of the output", (PetscInt)s->map.size(), rank, sy, Ly.bulksize);
    {
      PetscInt bad = -1;
      for (size_t i = 0; i < s->map.size() && bad < 0; i++)
        if (s->map[i] < -1 || s->map[i] >= xsize) bad = (PetscInt)i;
      DDCheckAll(comm, bad < 0, PETSC_ERR_ARG_OUTOFRANGE, "The scatter's index map entry %" PetscInt_FMT " on rank %d is %" PetscInt_FMT ", outside [-1, %" PetscInt_FMT ") (the input has shape %s)", bad, rank, bad >= 0 ? s->map[bad] : 0, xsize, sx);
    }
  }
  /* C-order strides of y's local bulk: position of a bulk entry in the map */
  PetscInt cs[DD_MAX_DIM];
  for (PetscInt k = dy - 1, st = 1; k >= 0; k--) {
    cs[k] = st;
    st *= Ly.n[k];
  }
  std::vector<PetscInt>    ilocal;
  std::vector<PetscSFNode> iremote;
  std::vector<char>        ymapped((size_t)Ly.size, 0);
  s->nremote = s->nmapped = 0;
  if (Ly.bulksize) {
    PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM];
    LayoutBulkBox(Ly, a, b);
    /* leaves in y's storage order, so that the Exchange merges them into long runs */
    ForEachIndex(dy, a, b, Ly.perm, [&](const PetscInt *j) {
      PetscInt pos = 0;
      for (PetscInt k = 0; k < dy; k++) pos += (j[k] - Ly.lo[k]) * cs[k];
      PetscInt gi = s->map[pos];
      if (gi < 0) return;
      PetscInt    g[DD_MAX_DIM], c[DD_MAX_DIM], index;
      PetscMPIInt orank;
      for (PetscInt k = dx - 1; k >= 0; k--) {
        g[k] = gi % x->shape[k];
        gi /= x->shape[k];
        c[k] = OwnerCoordinate(x, k, g[k]);
      }
      OwnerOf(x, c, g, &orank, &index);
      const PetscInt off = LayoutOffset(Ly, j);
      ilocal.push_back(off);
      iremote.push_back({orank, index});
      ymapped[off] = 1;
      if (orank != rank) s->nremote++;
    });
  }
  s->nmapped = (PetscInt)ilocal.size();
  BulkRunsWhere(Ly, ymapped, 0, s->yzoff, s->yzlen);
  std::vector<PetscInt> pdeg; /* a trial set-up of -net_distribution auto: the counts the model reads, no graph */
  if (PricingNoPlans()) PetscFunctionReturn(PETSC_SUCCESS);
  if (PricingOnly()) {
    s->ex = new Exchange;
    PetscCall(BuildStoragePlan(comm, x, ilocal, iremote, s->ex, &pdeg));
  } else PetscCall(BuildStorageSF(comm, x, ilocal, iremote, &s->sf));
  /* the adjoint per rank: copy back where every root has one leaf, else clear and add */
  {
    const PetscInt *deg = pdeg.data();
    PetscInt        maxdeg = 0;
    std::vector<char> flag((size_t)Lx.size, 0);
    if (!PricingOnly()) {
      PetscCall(PetscSFComputeDegreeBegin(s->sf, &deg));
      PetscCall(PetscSFComputeDegreeEnd(s->sf, &deg));
    }
    ForEachBulkRun(Lx, [&](PetscInt o, PetscInt n) {
      for (PetscInt i = o; i < o + n; i++) {
        flag[i] = deg[i] > 0 ? 1 : 0;
        maxdeg  = PetscMax(maxdeg, deg[i]);
      }
    });
    s->xadd = maxdeg > 1;
    if (s->xadd) std::fill(flag.begin(), flag.end(), 0);
    BulkRunsWhere(Lx, flag, 0, s->xzoff, s->xzlen);
  }
  if (PricingOnly()) PetscFunctionReturn(PETSC_SUCCESS);
  {
    PetscMPIInt tag;
    PetscCall(PetscObjectGetNewTag((PetscObject)prim, &tag));
    s->ex = new Exchange;
    s->ex->memtype = x->memtype;
    PetscCall(s->ex->SetUp(s->sf, comm, tag, DDExchangeUseTypes()));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_ApplyBegin(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  if (s->zero) PetscCall(ZeroRuns(y->memtype, y->dtype, y->array, s->yzoff, s->yzlen));
  PetscCall(s->ex->ForwardBegin(x->dtype, x->array, y->array));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_ApplyEnd(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  PetscCall(s->ex->ForwardEnd(x->dtype, x->array, y->array));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* S* y: the entries of x without an image are cleared (all of x's bulk where roots have several leaves, then summed) */
static PetscErrorCode SC_AdjointBegin(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  PetscCall(ZeroRuns(x->memtype, x->dtype, x->array, s->xzoff, s->xzlen));
  PetscCall(s->ex->AdjointBegin(x->dtype, y->array, x->array, s->xadd));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_AdjointEnd(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  PetscCall(s->ex->AdjointEnd(x->dtype, y->array, x->array, s->xadd));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_SetFromOptions(DDPrimitive prim, PetscOptionItems *PetscOptionsObject)
{
  auto     *s = (Scatter *)prim->data;
  PetscBool flg, set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDPrimitive scatter options");
  PetscCall(PetscOptionsBool("-primitive_scatter_zero_unmapped", "Apply zeroes the output entries the map leaves out", "DDPrimitiveScatterSetZeroUnmapped", s->zero, &flg, &set));
  if (set) s->zero = flg;
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_Settings(DDPrimitive prim, std::string *d)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  *d += std::string("scatter unmapped output entries ") + (s->zero ? "zeroed" : "kept") + "\n";
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SC_View(DDPrimitive prim, PetscViewer viewer)
{
  auto *s = (Scatter *)prim->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "unmapped output entries: %s\n", s->zero ? "zeroed" : "left as they are"));
  if (!prim->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerASCIIPushSynchronized(viewer));
  PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] maps %" PetscInt_FMT " entries, %" PetscInt_FMT " from other ranks; adjoint %s\n", PetscGlobalRank, s->nmapped, s->nremote, s->xadd ? "sums repeated images" : "copies back"));
  PetscCall(PetscViewerFlush(viewer));
  PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveScatterSetIndexMap - The global index map of a `DDPRIMITIVESCATTER`: which input entry each output entry copies

  Not collective

  Input Parameters:
+ prim - the primitive
. n    - the number of entries of this rank's piece of the output (its local bulk size; 0 on
         ranks without a piece)
- idx  - for each entry of this rank's piece of the output, in C order of the piece (the last
         dimension fastest, whatever the storage format), the global C-order index into the input
         of the entry it copies, or -1 for none; copied

  Notes:
  The primitive is y = S x with (S x)_i = x_{idx(i)} and its adjoint (S* y)_j = sum of the y_i
  with idx(i) = j (paper 000 sec. 3). The map is checked at `DDPrimitiveSetUp()`: n must be the
  local bulk size of the output there, and the indices must lie in [-1, size of the input);
  violations on any rank raise the error on every rank.

  Level: intermediate

.seealso: `DDPRIMITIVESCATTER`, `DDPrimitiveScatterSetZeroUnmapped()`, `DDPrimitiveSetUp()`
@*/
PetscErrorCode DDPrimitiveScatterSetIndexMap(DDPrimitive prim, PetscInt n, const PetscInt idx[])
DD_CXX_TRY
{
  Scatter *s;

  PetscFunctionBegin;
  PetscCall(ScatterGet(prim, &s, "DDPrimitiveScatterSetIndexMap"));
  PetscCheck(n >= 0, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "The scatter's index map cannot have %" PetscInt_FMT " entries", n);
  if (n) DDCheckPointer(idx, 3);
  s->map.assign(idx, idx + n);
  s->mapset          = PETSC_TRUE;
  prim->setupcalled  = PETSC_FALSE; /* the pattern changed: set up again */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveScatterSetZeroUnmapped - Whether `DDPrimitiveApply()` of a `DDPRIMITIVESCATTER` zeroes the output entries the map leaves out

  Logically collective

  Input Parameters:
+ prim - the primitive
- flg  - `PETSC_TRUE` (default): y = S x, entries with index -1 become 0; `PETSC_FALSE`: they
         keep their values, so that several scatters fill the parts of one output (a
         concatenation: each input's scatter writes its range)

  Options Database Key:
. -primitive_scatter_zero_unmapped <bool> - the flag

  Notes:
  With `PETSC_FALSE` Apply is y = S x + (I - S S*) y, the linear S only on outputs whose unmapped
  entries are zero; the adjoint is S* in both cases.

  Level: intermediate

.seealso: `DDPRIMITIVESCATTER`, `DDPrimitiveScatterSetIndexMap()`
@*/
PetscErrorCode DDPrimitiveScatterSetZeroUnmapped(DDPrimitive prim, PetscBool flg)
DD_CXX_TRY
{
  Scatter *s;

  PetscFunctionBegin;
  PetscCall(ScatterGet(prim, &s, "DDPrimitiveScatterSetZeroUnmapped"));
  PetscValidLogicalCollectiveBool(prim, flg, 2);
  s->zero = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*MC
  DDPRIMITIVESCATTER - "scatter": copies entries of one tensor to entries of another by a global index map (paper 000, sec. 3)

  DDPrimitiveSetUp(prim, x, y) after `DDPrimitiveScatterSetIndexMap()`: x and y have any shapes,
  partitions (worker counts, rank sets, unbalanced or empty pieces), halos and formats, the same
  data type and no replicated dimensions. Each output entry copies the input entry its map
  names (or is zero); the adjoint sums every output entry back into the input entry it came
  from. Permutations (flatten, repartition), injections (each input of a concatenation) and
  gathers with repeats are cases. The layers `DDLAYERCONCAT` and `DDLAYERFLATTEN` move their
  data with it.

  Options Database Key:
. -primitive_scatter_zero_unmapped <bool> - see `DDPrimitiveScatterSetZeroUnmapped()`

  Level: intermediate

.seealso: `DDPrimitiveScatterSetIndexMap()`, `DDPrimitiveScatterSetZeroUnmapped()`, `DDPRIMITIVEREPARTITION`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Scatter(DDPrimitive prim)
{
  PetscFunctionBegin;
  prim->data                 = new Scatter;
  prim->device = PETSC_TRUE; /* device tensors: messages staged through host buffers (issue 11 part 3) */
  prim->ops->setfromoptions  = SC_SetFromOptions;
  prim->ops->setup           = SC_SetUp;
  prim->ops->applybegin      = SC_ApplyBegin;
  prim->ops->applyend        = SC_ApplyEnd;
  prim->ops->adjointbegin    = SC_AdjointBegin;
  prim->ops->adjointend      = SC_AdjointEnd;
  prim->ops->view            = SC_View;
  prim->ops->reset           = SC_Reset;
  prim->ops->destroy         = SC_Destroy;
  PetscCall(PetscObjectComposeFunction((PetscObject)prim, DDPRIMITIVE_SETTINGS_C, SC_Settings));
  PetscFunctionReturn(PETSC_SUCCESS);
}
