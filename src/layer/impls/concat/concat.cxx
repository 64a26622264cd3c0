/*
  DDLAYERCONCAT: concatenation of n tensors along one dimension (torch.cat(xs, dim)), the skip
  connections of U-Nets (paper 000 sec. 5).

  The inputs live on one partition and agree (shape and ownership) in every other dimension.
  Along the concatenation dimension each input keeps its own ownership; the output lives on the
  same partition with the concatenated extent split evenly (balanced ownership) there. The
  output's global index i along the dimension belongs to input j with offset_j <= i <
  offset_{j+1}, so the layer is y = sum_j S_j x_j with one DDPRIMITIVESCATTER S_j per input (an
  injection into its range of y; each leaves the other ranges as they are). When the dimension
  is not split (one worker along it, e.g. channels of a spatially decomposed U-Net) every
  scatter is local, a copy. Backward is the adjoint: dx_j = S_j* dy (a split).
*/
#include <sys/ddcxx.hpp>
#include <primitive/splitguard.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <tensor/layout.hpp>
#include <vector>
#include <algorithm>

using namespace ddnn;

namespace
{
struct Concat {
  PetscInt                               dim = 1; /* as given (may be negative, counting from the end) */
  PetscInt                               d   = 1; /* resolved at set-up */
  std::vector<DDPrimitive>               S;        /* the scatter of each input into its range of y */
  std::vector<DDTensor>                  xin, dxo; /* inputs (gradients) whose halo differs from set-up */
  DDTensor                               yo = NULL, dyo = NULL;
};
} // namespace

static PetscErrorCode ConcatGet(DDLayer l, Concat **c, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERCONCAT, fn));
  *c = (Concat *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConcatSetDimension - The dimension a concat layer concatenates along (default 1, the channels)

  Logically collective

  Input Parameters:
+ l   - the layer
- dim - the dimension; negative values count from the end (-1 is the last), as in torch.cat

  Options Database Key:
. -layer_concat_dim <d> - the dimension

  Level: beginner

.seealso: `DDLAYERCONCAT`
@*/
PetscErrorCode DDLayerConcatSetDimension(DDLayer l, PetscInt dim)
DD_CXX_TRY
{
  Concat *c;

  PetscFunctionBegin;
  PetscCall(ConcatGet(l, &c, "DDLayerConcatSetDimension"));
  PetscCheck(dim > -DD_MAX_DIM && dim < DD_MAX_DIM, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Concat dimension %" PetscInt_FMT " is out of range", dim);
  c->dim = dim;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Concat_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Concat  *c = (Concat *)l->data;
  PetscInt dim = c->dim;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer concat options");
  PetscCall(PetscOptionsInt("-layer_concat_dim", "Dimension to concatenate along", "DDLayerConcatSetDimension", dim, &dim, &set));
  if (set) PetscCall(DDLayerConcatSetDimension(l, dim));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Concat_Reset(DDLayer l)
{
  Concat *c = (Concat *)l->data;

  PetscFunctionBegin;
  for (auto &p : c->S) PetscCall(DDPrimitiveDestroy(&p));
  c->S.clear();
  for (auto &t : c->xin) PetscCall(DDTensorDestroy(&t));
  for (auto &t : c->dxo) PetscCall(DDTensorDestroy(&t));
  c->xin.clear();
  c->dxo.clear();
  PetscCall(DDTensorDestroy(&c->yo));
  PetscCall(DDTensorDestroy(&c->dyo));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Concat_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Concat_Reset(l));
  delete (Concat *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Concat_SetUp(DDLayer l, PetscInt n, DDTensor xs[])
{
  Concat     *c    = (Concat *)l->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  DDTensor    x0   = xs[0], y;
  const PetscInt o = x0->order;
  const char *prefix;
  char        s0[128], si[128];

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  const PetscInt d = c->dim < 0 ? c->dim + o : c->dim;
  PetscCheck(d >= 0 && d < o, comm, PETSC_ERR_ARG_OUTOFRANGE, "Concat dimension %" PetscInt_FMT " does not exist in inputs of order %" PetscInt_FMT " (DDLayerConcatSetDimension() or -%slayer_concat_dim)", c->dim, o, prefix);
  c->d = d;
  PetscCall(DDShapeToString_Private(o, x0->shape, s0, sizeof(s0)));
  std::vector<PetscInt> offset(n + 1, 0);
  for (PetscInt i = 0; i < n; i++) {
    DDTensor xi = xs[i];
    PetscCall(DDShapeToString_Private(xi->order, xi->shape, si, sizeof(si)));
    PetscCheck(xi->order == o, comm, PETSC_ERR_ARG_SIZ, "Concat: input %" PetscInt_FMT " has shape %s but input 0 has shape %s (orders differ)", i, si, s0);
    for (PetscInt k = 0; k < o; k++) PetscCheck(k == d || xi->shape[k] == x0->shape[k], comm, PETSC_ERR_ARG_SIZ, "Concat: input %" PetscInt_FMT " has shape %s but input 0 has shape %s; they must agree outside the concatenation dimension %" PetscInt_FMT " (dimension %" PetscInt_FMT " differs)", i, si, s0, d, k);
    PetscCheck(xi->dtype == x0->dtype, comm, PETSC_ERR_ARG_INCOMP, "Concat: input %" PetscInt_FMT " is %s but input 0 is %s", i, DDDataTypes[xi->dtype], DDDataTypes[x0->dtype]);
    for (PetscInt k = 0; k < o; k++) PetscCheck(!xi->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "Concat moves split tensors; input %" PetscInt_FMT " is replicated along dimension %" PetscInt_FMT, i, k);
    PetscBool eq;
    PetscCall(DDPartitionEqual(xi->part, x0->part, &eq));
    PetscCheck(eq, comm, PETSC_ERR_ARG_INCOMP, "Concat: input %" PetscInt_FMT " (shape %s) lives on another partition than input 0 (repartition it first)", i, si);
    for (PetscInt k = 0; k < o; k++) {
      if (k == d) continue;
      for (PetscInt p = 0; p <= x0->part->shape[k]; p++) PetscCheck(xi->ranges[k][p] == x0->ranges[k][p], comm, PETSC_ERR_ARG_INCOMP, "Concat: input %" PetscInt_FMT " (shape %s) is not distributed as input 0 along dimension %" PetscInt_FMT " (ownership ranges differ at coordinate %" PetscInt_FMT ")", i, si, k, p);
    }
    offset[i + 1] = offset[i] + xi->shape[d];
  }
  /* the output: x0's partition and ownership outside d, balanced along d, x0's format */
  {
    std::vector<PetscInt> shape(x0->shape, x0->shape + o);
    shape[d] = offset[n];
    PetscCall(DDTensorCreate(comm, &y));
    PetscCall(DDTensorSetPartition(y, x0->part));
    PetscCall(DDTensorSetShape(y, o, shape.data()));
    PetscCall(DDTensorSetDataType(y, x0->dtype));
    for (PetscInt k = 0; k < o; k++) {
      if (k == d) continue;
      std::vector<PetscInt> lx(x0->part->shape[k]);
      for (PetscInt p = 0; p < x0->part->shape[k]; p++) lx[p] = x0->ranges[k][p + 1] - x0->ranges[k][p];
      PetscCall(DDTensorSetOwnershipRanges(y, k, lx.data()));
    }
    PetscCall(DDTensorSetFormat(y, x0->format));
    PetscCall(DDTensorSetBlockSize(y, x0->bs));
    PetscCall(DDTensorSetBlockDimension_Private(y, x0->blockdim));
    PetscCall(DDTensorSetMemType(y, x0->memtype));
    PetscCall(DDTensorSetUp(y));
    PetscCall(DDLayerSetOutput_Private(l, y));
  }
  /* the index maps: an entry of y's piece (C order) in input i's range copies x_i's entry with the same global index less offset_i there */
  const DDLayout &Ly = y->layout;
  PetscInt        a[DD_MAX_DIM], b[DD_MAX_DIM], ord[DD_MAX_DIM];
  for (PetscInt k = 0; k < o; k++) {
    a[k]   = 0;
    b[k]   = Ly.n[k];
    ord[k] = k;
  }
  c->S.assign(n, NULL);
  c->xin.assign(n, NULL);
  c->dxo.assign(n, NULL);
  for (PetscInt i = 0; i < n; i++) {
    std::vector<PetscInt> map((size_t)Ly.bulksize, -1);
    PetscInt              pos = 0;
    if (Ly.bulksize)
      ForEachIndex(o, a, b, ord, [&](const PetscInt *j) {
        PetscInt gi = 0;
        for (PetscInt k = 0; k < o; k++) {
          PetscInt g = Ly.start[k] + j[k];
          if (k == d) {
            g -= offset[i];
            if (g < 0 || g >= xs[i]->shape[d]) {
              pos++;
              return;
            }
          }
          gi = gi * xs[i]->shape[k] + g;
        }
        map[pos++] = gi;
      });
    PetscCall(DDPrimitiveCreate(comm, &c->S[i]));
    PetscCall(DDPrimitiveSetType(c->S[i], DDPRIMITIVESCATTER));
    PetscCall(DDPrimitiveScatterSetIndexMap(c->S[i], Ly.bulksize, map.data()));
    PetscCall(DDPrimitiveScatterSetZeroUnmapped(c->S[i], PETSC_FALSE)); /* the other inputs fill the rest */
    PetscCall(DDPrimitiveSetUp(c->S[i], xs[i], y));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Concat_Forward(DDLayer l, PetscInt n, DDTensor xs[], DDTensor y)
{
  Concat               *c = (Concat *)l->data;
  DDTensor              yo;
  std::vector<DDTensor> xin(n);

  PetscFunctionBegin;
  for (PetscInt i = 0; i < n; i++) PetscCall(ConformLayout(xs[i], l->setupin[i], &c->xin[i], &xin[i], true));
  PetscCall(ConformLayout(y, l->output, &c->yo, &yo, false));
  std::vector<SplitApplyGuard> inflight; /* an error return before the Ends ends the begun scatters */
  inflight.reserve((size_t)n);
  for (PetscInt i = 0; i < n; i++) {
    PetscCall(DDPrimitiveApplyBegin(c->S[i], xin[i], yo));
    inflight.emplace_back(c->S[i], xin[i], yo);
  }
  for (PetscInt i = 0; i < n; i++) PetscCall(DDPrimitiveApplyEnd(c->S[i], xin[i], yo));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Concat_Backward(DDLayer l, DDTensor dy, PetscInt n, DDTensor dxs[])
{
  Concat               *c = (Concat *)l->data;
  DDTensor              dyo;
  std::vector<DDTensor> dxo(n, NULL);

  PetscFunctionBegin;
  if (!dxs) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(ConformLayout(dy, l->output, &c->dyo, &dyo, true));
  std::vector<SplitApplyGuard> inflight; /* an error return before the Ends ends the begun scatters */
  inflight.reserve((size_t)n);
  for (PetscInt i = 0; i < n; i++) {
    if (!dxs[i]) continue;
    PetscCall(ConformLayout(dxs[i], l->setupin[i], &c->dxo[i], &dxo[i], false));
    PetscCall(DDPrimitiveApplyAdjointBegin(c->S[i], dyo, dxo[i]));
    inflight.emplace_back(c->S[i], dyo, dxo[i]);
  }
  for (PetscInt i = 0; i < n; i++) {
    if (!dxs[i]) continue;
    PetscCall(DDPrimitiveApplyAdjointEnd(c->S[i], dyo, dxo[i]));
    if (dxo[i] != dxs[i]) PetscCall(DDTensorCopy(dxo[i], dxs[i]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Concat_View(DDLayer l, PetscViewer viewer)
{
  Concat *c = (Concat *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "along dimension %" PetscInt_FMT "\n", l->setupcalled ? c->d : c->dim));
  if (l->setupcalled) {
    PetscCall(PetscViewerASCIIPushTab(viewer));
    for (auto &p : c->S) PetscCall(DDPrimitiveView(p, viewer));
    PetscCall(PetscViewerASCIIPopTab(viewer));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERCONCAT - "concat": concatenation along a dimension, torch.cat(xs, dim) (U-Net skip connections)

  Takes 2 or more inputs, any number (`DDLayerSetUpMulti()`) on one partition that agree in
  shape and ownership outside the concatenation dimension (default 1, the channels;
  `DDLayerConcatSetDimension()`, negative values count from the end). Along that dimension each
  input may be split in its own way; the output is split evenly there. When the dimension has
  one worker (the usual spatially decomposed U-Net) the layer is a local copy; otherwise
  entries move to their new owners. The data movement is one `DDPRIMITIVESCATTER` per input
  (logged as DDPrimScatter); Backward applies their adjoints, splitting dy into the inputs'
  gradients.

  Options Database Key:
. -layer_concat_dim <d> - the dimension

  Level: beginner

.seealso: `DDLayerConcatSetDimension()`, `DDLAYERADD`, `DDLAYERREPARTITION`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Concat(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Concat;
  l->minin               = 2;
  l->maxin               = PETSC_MAX_INT; /* any number of inputs */
  l->ops->setfromoptions = Concat_SetFromOptions;
  l->ops->setup          = Concat_SetUp;
  l->ops->forward        = Concat_Forward;
  l->ops->backward       = Concat_Backward;
  l->device              = PETSC_TRUE; /* on device tensors: its primitives run in the inputs' memory */
  l->ops->view           = Concat_View;
  l->ops->reset          = Concat_Reset;
  l->ops->destroy        = Concat_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

