/*
  DDLAYERRESHAPE: x.view(shape) / x.reshape(shape) of PyTorch: the same entries in the same
  global C order, a new shape (one entry may be -1, inferred). Paper 000 sec. 3: data movement
  between distributions is a linear map; here a permutation of global indices.

  The output is split over a partition of the output's order: given
  (DDLayerReshapeSetPartition) or, by default, (Pn, 1, ..., 1) on the first worker of each of the
  input's batch slices when the leading extent is kept (samples do not move), else one worker
  (the input's first). A box of the output is not a box of the input in general, so the data
  movement is a DDPRIMITIVESCATTER on global indices, as DDLAYERFLATTEN: output entry i copies
  the input entry with the same global C-order index. Backward is its adjoint.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct Reshape : ViewLayer {
  std::vector<PetscInt> shape; /* as given, one entry possibly -1 */
};
} // namespace

static PetscErrorCode ReshapeGet(DDLayer l, Reshape **f, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERRESHAPE, fn));
  *f = (Reshape *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerReshapeSetShape - The output shape of a reshape layer (Tensor.view's shape; required)

  Logically collective

  Input Parameters:
+ l     - a `DDLAYERRESHAPE` layer
. n     - the output's order, 1 to `DD_MAX_DIM`
- shape - the extents, positive, except at most one -1: inferred from the input's size

  Options Database Key:
. -layer_reshape_shape <n0,n1,...> - the shape, e.g. 8,-1,16

  Notes:
  The entries keep their global C-order index (torch's view semantics); the product of the
  extents must be the input's size, which `DDLayerSetUp()` checks. The batch is not special:
  give it explicitly (or as the -1).

  Level: beginner

.seealso: `DDLAYERRESHAPE`, `DDLayerReshapeSetPartition()`, `DDLAYERFLATTEN`
@*/
PetscErrorCode DDLayerReshapeSetShape(DDLayer l, PetscInt n, const PetscInt shape[])
DD_CXX_TRY
{
  Reshape *f;
  PetscInt neg = 0;

  PetscFunctionBegin;
  PetscCall(ReshapeGet(l, &f, "DDLayerReshapeSetShape"));
  PetscCheck(n >= 1 && n <= DD_MAX_DIM, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "A reshape's output order must be 1 to %d, not %" PetscInt_FMT " (-layer_reshape_shape)", DD_MAX_DIM, n);
  if (n) PetscValidIntPointer(shape, 3);
  for (PetscInt k = 0; k < n; k++) {
    PetscCheck(shape[k] >= 1 || shape[k] == -1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Reshape extent %" PetscInt_FMT " (entry %" PetscInt_FMT ") must be positive or -1 (-layer_reshape_shape)", shape[k], k);
    if (shape[k] == -1) neg++;
  }
  PetscCheck(neg <= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "A reshape's shape may have one -1 (inferred extent), it has %" PetscInt_FMT " (-layer_reshape_shape)", neg);
  f->shape.assign(shape, shape + n);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerReshapeSetPartition - The partition of a reshape layer's output

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERRESHAPE` layer
- part - a partition whose order is the output's, on the layer's communicator (possibly a
         subset of its ranks); referenced by the layer

  Notes:
  Default: (Pn, 1, ..., 1) on the first worker of each of the input's batch slices, with the
  input's batch ownership, when the output's first extent equals the input's; else the input's
  first worker alone. The output is balanced over the given partition's other dimensions.

  Level: intermediate

.seealso: `DDLAYERRESHAPE`, `DDLayerReshapeSetShape()`
@*/
PetscErrorCode DDLayerReshapeSetPartition(DDLayer l, DDPartition part)
DD_CXX_TRY
{
  Reshape *f;

  PetscFunctionBegin;
  PetscCall(ReshapeGet(l, &f, "DDLayerReshapeSetPartition"));
  PetscValidHeaderSpecific(part, DD_PARTITION_CLASSID, 2);
  PetscCall(f->SetPartition(part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Reshape_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  PetscInt  v[DD_MAX_DIM + 1], n = DD_MAX_DIM + 1;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer reshape options");
  PetscCall(PetscOptionsIntArray("-layer_reshape_shape", "Output shape (one entry may be -1)", "DDLayerReshapeSetShape", v, &n, &set));
  if (set) PetscCall(DDLayerReshapeSetShape(l, n, v));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Reshape_Reset(DDLayer l)
{
  Reshape *f = (Reshape *)l->data;

  PetscFunctionBegin;
  PetscCall(f->Reset());
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Reshape_Destroy(DDLayer l)
{
  Reshape *f = (Reshape *)l->data;

  PetscFunctionBegin;
  PetscCall(f->Destroy());
  delete f;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Reshape_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Reshape       *f    = (Reshape *)l->data;
  DDTensor       x    = xs[0];
  MPI_Comm       comm = PetscObjectComm((PetscObject)l);
  const PetscInt o    = (PetscInt)f->shape.size();
  const char    *prefix;
  char           sx[128];
  PetscInt       shape[DD_MAX_DIM], size = 1, known = 1, neg = -1;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  PetscCheck(o > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Reshape layer %s needs its output shape (DDLayerReshapeSetShape() or -%slayer_reshape_shape)", prefix, prefix);
  for (PetscInt k = 0; k < x->order; k++) size *= x->shape[k];
  for (PetscInt k = 0; k < o; k++) {
    shape[k] = f->shape[k];
    if (shape[k] < 0) neg = k;
    else known *= shape[k];
  }
  if (neg >= 0) {
    PetscCheck(known > 0 && size % known == 0, comm, PETSC_ERR_ARG_INCOMP, "Reshape: the input (shape %s, %" PetscInt_FMT " entries) cannot be viewed with the known extents (product %" PetscInt_FMT ") of -%slayer_reshape_shape", sx, size, known, prefix);
    shape[neg] = size / known;
  } else PetscCheck(known == size, comm, PETSC_ERR_ARG_INCOMP, "Reshape: the shape of -%slayer_reshape_shape has %" PetscInt_FMT " entries but the input (shape %s) has %" PetscInt_FMT, prefix, known, sx, size);
  PetscCheck(!f->part || f->part->order == o, comm, PETSC_ERR_ARG_INCOMP, "The reshape layer's output partition (DDLayerReshapeSetPartition()) has order %" PetscInt_FMT " but the output shape (-%slayer_reshape_shape) has order %" PetscInt_FMT, f->part ? f->part->order : 0, prefix, o);
  PetscCall(f->SetUp(l, x, o, shape, "reshape"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Reshape_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  return ((Reshape *)l->data)->Forward(l, xs[0], y);
}

static PetscErrorCode Reshape_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  return ((Reshape *)l->data)->Backward(l, dy, dxs ? dxs[0] : NULL);
}

static PetscErrorCode Reshape_View(DDLayer l, PetscViewer viewer)
{
  Reshape *f = (Reshape *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "shape ("));
  PetscCall(PetscViewerASCIIUseTabs(viewer, PETSC_FALSE));
  for (size_t k = 0; k < f->shape.size(); k++) PetscCall(PetscViewerASCIIPrintf(viewer, "%s%" PetscInt_FMT, k ? ", " : "", f->shape[k]));
  PetscCall(PetscViewerASCIIPrintf(viewer, ")%s\n", f->part ? " onto a given partition" : ""));
  PetscCall(PetscViewerASCIIUseTabs(viewer, PETSC_TRUE));
  if (l->setupcalled) {
    PetscCall(PetscViewerASCIIPushTab(viewer));
    PetscCall(DDPrimitiveView(f->S, viewer));
    PetscCall(PetscViewerASCIIPopTab(viewer));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERRESHAPE - "reshape": Tensor.view(shape) / torch.reshape of PyTorch, distributed

  The output holds the input's entries in the same global C order with the shape of
  -layer_reshape_shape (required; one extent may be -1, inferred from the input's size, as
  torch does). Any input partition; the output is split over `DDLayerReshapeSetPartition()`'s
  partition (of the output's order; default (Pn, 1, ..., 1) on the first worker of each of the
  input's batch slices when the first extent is kept, else the input's first worker), balanced
  except for a kept batch split. The data movement is a `DDPRIMITIVESCATTER` on global indices
  (logged as DDPrimScatter); Backward applies its adjoint. No parameters.

  Envelope: a replicated input, a shape whose product differs from the input's size, more than
  one -1, non-positive extents or a partition of another order are errors naming the setting.

  Options Database Key:
. -layer_reshape_shape <n0,n1,...> - the output shape

  Level: beginner

.seealso: `DDLayerReshapeSetShape()`, `DDLayerReshapeSetPartition()`, `DDLAYERFLATTEN`, `DDLAYERREPARTITION`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Reshape(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Reshape;
  l->ops->setfromoptions = Reshape_SetFromOptions;
  l->ops->setup          = Reshape_SetUp;
  l->ops->forward        = Reshape_Forward;
  l->ops->backward       = Reshape_Backward;
  l->device              = PETSC_TRUE; /* on device tensors: its primitives run in the inputs' memory */
  l->ops->view           = Reshape_View;
  l->ops->reset          = Reshape_Reset;
  l->ops->destroy        = Reshape_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}
