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
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct Flatten : ViewLayer {
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
DD_CXX_TRY
{
  Flatten *f;

  PetscFunctionBegin;
  PetscCall(FlattenGet(l, &f, "DDLayerFlattenSetPartition"));
  PetscValidHeaderSpecific(part, DD_PARTITION_CLASSID, 2);
  PetscCheck(part->order == 2, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_INCOMP, "A flatten layer's output partition has order 2 (Pn, Pf), not %" PetscInt_FMT, part->order);
  PetscCall(f->SetPartition(part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Flatten_Reset(DDLayer l)
{
  Flatten *f = (Flatten *)l->data;

  PetscFunctionBegin;
  PetscCall(f->Reset());
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_Destroy(DDLayer l)
{
  Flatten *f = (Flatten *)l->data;

  PetscFunctionBegin;
  PetscCall(f->Destroy());
  delete f;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Flatten    *f    = (Flatten *)l->data;
  DDTensor    x    = xs[0];
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const PetscInt o = x->order;
  char        sx[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(o, x->shape, sx, sizeof(sx)));
  PetscCheck(o >= 2, comm, PETSC_ERR_ARG_INCOMP, "Flatten takes (N, C, ...) tensors of order at least 2 and flattens the dimensions after the first (torch.flatten(x, 1)); the input has order %" PetscInt_FMT " (shape %s)", o, sx);
  PetscInt F = 1;
  for (PetscInt k = 1; k < o; k++) F *= x->shape[k];
  const PetscInt shape[2] = {x->shape[0], F};
  PetscCall(f->SetUp(l, x, 2, shape, "flatten"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Flatten_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  return ((Flatten *)l->data)->Forward(l, xs[0], y);
}

static PetscErrorCode Flatten_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  return ((Flatten *)l->data)->Backward(l, dy, dxs ? dxs[0] : NULL);
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
  l->device         = PETSC_TRUE; /* on device tensors: its primitives run in the inputs' memory */
  l->ops->view      = Flatten_View;
  l->ops->reset     = Flatten_Reset;
  l->ops->destroy   = Flatten_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

