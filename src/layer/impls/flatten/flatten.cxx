/*
  DDLAYERFLATTEN: (N, C, spatial...) -> (N, C * prod(spatial)) in C order, torch.flatten(x, 1):
  the bridge from convolutions to dense layers (LeNet-5, VGG classifiers; paper 000 sec. 5).

  The output's feature dimension is split over a partition of order 2, (Pn, Pf): given
  (DDLayerFlattenSetPartition) or, by default, (Pn, 1) on the first worker of each of the
  input's batch slices. Features are balanced over Pf; the batch keeps the input's ownership
  when Pn is the input's batch split (so that samples do not move), else it is balanced.

  A contiguous range of flattened features is not a box of the input, so the data movement is
  a DDPRIMITIVESCATTER on global indices: output entry (n, f) copies the input entry (n, c, s...)
  with f = C-order index of (c, s...), i.e. the same global C-order index, a permutation.
  Backward is its adjoint (the copy back, each input entry having exactly one image).
*/
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct Flatten {
  DDPartition               part = NULL; /* given by the user */
  DDPartition               Py   = NULL; /* used */
  DDPrimitive               S    = NULL; /* the scatter x -> y */
  DDTensor                  xin = NULL, yo = NULL, dyo = NULL, dxo = NULL;
};
} // namespace

static PetscErrorCode FlattenGet(DDLayer l, Flatten **f, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERFLATTEN, fn));
  *f = (Flatten *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerFlattenSetPartition - The partition (Pn, Pf) of a flatten layer's (N, features) output

  Logically collective

  Input Parameters:
+ l    - the layer
- part - a partition of order 2 on the layer's communicator (possibly a subset of its ranks);
         referenced by the layer

  Notes:
  Default: (Pn, 1) on the first worker of each of the input's batch slices. Splitting the
  features (Pf > 1) feeds a dense layer whose input features are split (`DDLAYERAFFINE` with
  Pfi = Pf).

  Level: intermediate

.seealso: `DDLAYERFLATTEN`, `DDLAYERAFFINE`
@*/
PetscErrorCode DDLayerFlattenSetPartition(DDLayer l, DDPartition part)
{
  Flatten *f;

  PetscFunctionBegin;
  PetscCall(FlattenGet(l, &f, "DDLayerFlattenSetPartition"));
  PetscValidHeaderSpecific(part, DD_PARTITION_CLASSID, 2);
  PetscCheck(part->order == 2, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_INCOMP, "A flatten layer's output partition has order 2 (Pn, Pf), not %" PetscInt_FMT, part->order);
  PetscCall(PetscObjectReference((PetscObject)part));
  PetscCall(DDPartitionDestroy(&f->part));
  f->part = part;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_Reset(DDLayer l)
{
  Flatten *f = (Flatten *)l->data;

  PetscFunctionBegin;
  PetscCall(DDPartitionDestroy(&f->Py));
  PetscCall(DDPrimitiveDestroy(&f->S));
  for (DDTensor *t : {&f->xin, &f->yo, &f->dyo, &f->dxo}) PetscCall(DDTensorDestroy(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_Destroy(DDLayer l)
{
  Flatten *f = (Flatten *)l->data;

  PetscFunctionBegin;
  PetscCall(Flatten_Reset(l));
  PetscCall(DDPartitionDestroy(&f->part));
  delete f;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Flatten    *f    = (Flatten *)l->data;
  DDTensor    x    = xs[0], y;
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const PetscInt o = x->order;
  char        sx[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(o, x->shape, sx, sizeof(sx)));
  PetscCheck(o >= 2, comm, PETSC_ERR_ARG_INCOMP, "Flatten takes (N, C, ...) tensors of order at least 2 and flattens the dimensions after the first (torch.flatten(x, 1)); the input has order %" PetscInt_FMT " (shape %s)", o, sx);
  for (PetscInt k = 0; k < o; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "Flatten moves split tensors; the input is replicated along dimension %" PetscInt_FMT, k);
  PetscInt F = 1;
  for (PetscInt k = 1; k < o; k++) F *= x->shape[k];
  /* the output partition */
  if (f->part) {
    PetscMPIInt cmp;
    PetscCallMPI(MPI_Comm_compare(comm, PetscObjectComm((PetscObject)f->part), &cmp));
    PetscCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, comm, PETSC_ERR_ARG_NOTSAMECOMM, "The flatten layer's output partition lives on another communicator than the layer");
    PetscCall(PetscObjectReference((PetscObject)f->part));
    f->Py = f->part;
  } else {
    const PetscInt           Pn = x->part->shape[0], rest = x->part->size / Pn, shape[2] = {Pn, 1};
    std::vector<PetscMPIInt> ranks(Pn);
    for (PetscInt n = 0; n < Pn; n++) ranks[n] = x->part->ranks[n * rest];
    PetscCall(DDPartitionCreateCartesian(comm, 2, shape, Pn, ranks.data(), &f->Py));
  }
  /* the output: the input's batch ownership when the batch split agrees, balanced features */
  {
    const PetscInt shape[2] = {x->shape[0], F};
    PetscCall(DDTensorCreate(comm, &y));
    PetscCall(DDTensorSetPartition(y, f->Py));
    PetscCall(DDTensorSetShape(y, 2, shape));
    PetscCall(DDTensorSetDataType(y, x->dtype));
    if (f->Py->shape[0] == x->part->shape[0]) {
      std::vector<PetscInt> nl(f->Py->shape[0]);
      for (PetscInt p = 0; p < f->Py->shape[0]; p++) nl[p] = x->ranges[0][p + 1] - x->ranges[0][p];
      PetscCall(DDTensorSetOwnershipRanges(y, 0, nl.data()));
    }
    PetscCall(DDTensorSetUp(y));
    PetscCall(DDLayerSetOutput_Private(l, y));
  }
  /* the index map: y's entry (n, f) copies x's entry of global C-order index n F + f */
  {
    const PetscInt        n0 = y->layout.bulksize ? y->layout.n[0] : 0, n1 = y->layout.n[1], s0 = y->layout.start[0], s1 = y->layout.start[1];
    std::vector<PetscInt> map((size_t)(n0 * n1));
    for (PetscInt i = 0; i < n0; i++)
      for (PetscInt j = 0; j < n1; j++) map[i * n1 + j] = (s0 + i) * F + s1 + j;
    PetscCall(DDPrimitiveCreate(comm, &f->S));
    PetscCall(DDPrimitiveSetType(f->S, DDPRIMITIVESCATTER));
    PetscCall(DDPrimitiveScatterSetIndexMap(f->S, n0 * n1, map.data()));
    PetscCall(DDPrimitiveSetUp(f->S, x, y));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Flatten *f = (Flatten *)l->data;
  return PrimitiveLayerForward(l, f->S, xs[0], y, &f->xin, &f->yo);
}

static PetscErrorCode Flatten_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Flatten *f = (Flatten *)l->data;
  return PrimitiveLayerBackward(l, f->S, dy, dxs ? dxs[0] : NULL, &f->dyo, &f->dxo);
}

static PetscErrorCode Flatten_View(DDLayer l, PetscViewer viewer)
{
  Flatten *f = (Flatten *)l->data;

  PetscFunctionBegin;
  if (f->part) PetscCall(PetscViewerASCIIPrintf(viewer, "onto a given partition %" PetscInt_FMT "x%" PetscInt_FMT "\n", f->part->shape[0], f->part->shape[1]));
  else PetscCall(PetscViewerASCIIPrintf(viewer, "onto (Pn, 1) on the first worker of each batch slice\n"));
  if (l->setupcalled) {
    PetscCall(PetscViewerASCIIPushTab(viewer));
    PetscCall(DDPrimitiveView(f->S, viewer));
    PetscCall(PetscViewerASCIIPopTab(viewer));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERFLATTEN - "flatten": (N, C, spatial...) -> (N, C prod(spatial)) in C order, torch.flatten(x, 1)

  Connects convolutional feature extractors to dense classifiers (paper 000 sec. 5: LeNet-5,
  VGG). The input may be split in any dimension; the output's features are split over the
  second dimension of the partition set with `DDLayerFlattenSetPartition()` (default (Pn, 1) on
  the first worker of each of the input's batch slices), balanced. The data movement is a
  `DDPRIMITIVESCATTER` on global indices (a flattened feature range is not a box of the input;
  logged as DDPrimScatter); Backward applies its adjoint. No parameters.

  Level: beginner

.seealso: `DDLayerFlattenSetPartition()`, `DDLAYERAFFINE`, `DDLAYERREPARTITION`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Flatten(DDLayer l)
{
  PetscFunctionBegin;
  l->data           = new Flatten;
  l->ops->setup     = Flatten_SetUp;
  l->ops->forward   = Flatten_Forward;
  l->ops->backward  = Flatten_Backward;
  l->ops->view      = Flatten_View;
  l->ops->reset     = Flatten_Reset;
  l->ops->destroy   = Flatten_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

