/*
  DDLAYERREPARTITION: moves a tensor onto another partition between layers (paper 000 sec. 3.2.4
  and sec. 5: "repartitioning layers as glue"). Forward is the DDPRIMITIVEREPARTITION T_{Px->Py}
  (an all-to-all over a PetscSF graph), Backward its adjoint T^* (the data moved back).

  The output partition is given (DDLayerRepartitionSetPartition) or built from a shape on the
  first ranks of the communicator (DDLayerRepartitionSetShape, -layer_repartition_shape). The
  output is balanced and keeps the input's storage format.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct Repart {
  DDPartition part = NULL; /* given by the user */
  PetscInt    nshape = 0, shape[DD_MAX_DIM];
  DDPartition Py = NULL; /* the output partition used */
  DDPrimitive T  = NULL;
  DDTensor    xin = NULL, yo = NULL, dyo = NULL, dxo = NULL; /* tensors whose halo differs from set-up */
};
} // namespace

static PetscErrorCode RepartGet(DDLayer l, Repart **r, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERREPARTITION, fn));
  *r = (Repart *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerRepartitionSetPartition - The partition a repartition layer moves its input onto

  Logically collective

  Input Parameters:
+ l    - the layer
- part - the output partition, of the input's order, on the layer's communicator (possibly on a
         subset of its ranks); referenced by the layer

  Notes:
  Replaces a shape given with `DDLayerRepartitionSetShape()`. Scatter (input on one worker),
  gather (output on one worker) and all-to-all are special cases (paper 000 sec. 3.2.4).

  Level: beginner

.seealso: `DDLAYERREPARTITION`, `DDLayerRepartitionSetShape()`, `DDPRIMITIVEREPARTITION`
@*/
PetscErrorCode DDLayerRepartitionSetPartition(DDLayer l, DDPartition part)
DD_CXX_TRY
{
  Repart *r;

  PetscFunctionBegin;
  PetscCall(RepartGet(l, &r, "DDLayerRepartitionSetPartition"));
  PetscValidHeaderSpecific(part, DD_PARTITION_CLASSID, 2);
  PetscCall(PetscObjectReference((PetscObject)part));
  PetscCall(DDPartitionDestroy(&r->part));
  r->part   = part;
  r->nshape = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerRepartitionSetShape - The shape of the output partition, built on the first ranks of the communicator

  Logically collective

  Input Parameters:
+ l     - the layer
. n     - the number of dimensions (the input's order)
- shape - workers per dimension; their product must not exceed the communicator's size

  Notes:
  Replaces a partition given with `DDLayerRepartitionSetPartition()`. The workers are ranks
  0, 1, ..., in C order of their coordinates.

  Options Database Key:
. -layer_repartition_shape <p0,p1,...> - the shape

  Level: beginner

.seealso: `DDLAYERREPARTITION`, `DDLayerRepartitionSetPartition()`
@*/
PetscErrorCode DDLayerRepartitionSetShape(DDLayer l, PetscInt n, const PetscInt shape[])
DD_CXX_TRY
{
  Repart *r;

  PetscFunctionBegin;
  PetscCall(RepartGet(l, &r, "DDLayerRepartitionSetShape"));
  PetscCheck(n >= 1 && n <= DD_MAX_DIM, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "A partition shape has 1 to %d dimensions, not %" PetscInt_FMT, DD_MAX_DIM, n);
  for (PetscInt k = 0; k < n; k++) PetscCheck(shape[k] >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Workers along dimension %" PetscInt_FMT " (%" PetscInt_FMT ") must be positive", k, shape[k]);
  PetscCall(DDPartitionDestroy(&r->part));
  r->nshape = n;
  for (PetscInt k = 0; k < n; k++) r->shape[k] = shape[k];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Repart_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  PetscInt  n = DD_MAX_DIM, shape[DD_MAX_DIM];
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer repartition options");
  PetscCall(PetscOptionsIntArray("-layer_repartition_shape", "Shape of the output partition (on the first ranks)", "DDLayerRepartitionSetShape", shape, &n, &set));
  if (set) PetscCall(DDLayerRepartitionSetShape(l, n, shape));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Repart_Reset(DDLayer l)
{
  Repart *r = (Repart *)l->data;

  PetscFunctionBegin;
  PetscCall(DDPartitionDestroy(&r->Py));
  PetscCall(DDPrimitiveDestroy(&r->T));
  for (DDTensor *t : {&r->xin, &r->yo, &r->dyo, &r->dxo}) PetscCall(DDTensorDestroy(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Repart_Destroy(DDLayer l)
{
  Repart *r = (Repart *)l->data;

  PetscFunctionBegin;
  PetscCall(Repart_Reset(l));
  PetscCall(DDPartitionDestroy(&r->part));
  delete r;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Repart_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Repart     *r    = (Repart *)l->data;
  DDTensor    x    = xs[0], y;
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;
  char        sx[128], sp[128];

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCheck(r->part || r->nshape, comm, PETSC_ERR_ARG_WRONGSTATE, "Repartition layer %s needs its output partition: DDLayerRepartitionSetPartition(), DDLayerRepartitionSetShape() or -%slayer_repartition_shape", prefix, prefix);
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  if (r->part) {
    PetscMPIInt cmp;
    PetscCallMPI(MPI_Comm_compare(comm, PetscObjectComm((PetscObject)r->part), &cmp));
    PetscCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, comm, PETSC_ERR_ARG_NOTSAMECOMM, "The repartition layer's output partition lives on another communicator than the layer");
    PetscCall(DDShapeToString_Private(r->part->order, r->part->shape, sp, sizeof(sp)));
    PetscCheck(r->part->order == x->order, comm, PETSC_ERR_ARG_INCOMP, "Cannot repartition a tensor of shape %s (order %" PetscInt_FMT ") onto a partition %s of order %" PetscInt_FMT, sx, x->order, sp, r->part->order);
    PetscCall(PetscObjectReference((PetscObject)r->part));
    r->Py = r->part;
  } else {
    PetscMPIInt size;
    PetscInt    P = 1;
    PetscCallMPI(MPI_Comm_size(comm, &size));
    PetscCall(DDShapeToString_Private(r->nshape, r->shape, sp, sizeof(sp)));
    PetscCheck(r->nshape == x->order, comm, PETSC_ERR_ARG_INCOMP, "Cannot repartition a tensor of shape %s (order %" PetscInt_FMT ") onto a partition %s of order %" PetscInt_FMT " (-%slayer_repartition_shape)", sx, x->order, sp, r->nshape, prefix);
    for (PetscInt k = 0; k < r->nshape; k++) P *= r->shape[k];
    PetscCheck(P <= size, comm, PETSC_ERR_ARG_SIZ, "The output partition %s needs %" PetscInt_FMT " ranks but the communicator has %d (-%slayer_repartition_shape)", sp, P, size, prefix);
    std::vector<PetscMPIInt> ranks(P);
    for (PetscInt i = 0; i < P; i++) ranks[i] = (PetscMPIInt)i;
    PetscCall(DDPartitionCreateCartesian(comm, r->nshape, r->shape, P, ranks.data(), &r->Py));
  }
  for (PetscInt k = 0; k < x->order; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "A repartition layer moves split tensors; the input is replicated along dimension %" PetscInt_FMT, k);
  PetscCall(DDTensorCreateRepartition(x, r->Py, &y)); /* balanced, x's format */
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscCall(DDPrimitiveCreate(comm, &r->T));
  PetscCall(DDPrimitiveSetType(r->T, DDPRIMITIVEREPARTITION));
  PetscCall(DDPrimitiveSetUp(r->T, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Repart_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Repart  *r = (Repart *)l->data;
  DDTensor xin, yo;

  PetscFunctionBegin;
  PetscCall(ConformLayout(xs[0], l->setupin[0], &r->xin, &xin, true));
  PetscCall(ConformLayout(y, l->output, &r->yo, &yo, false));
  PetscCall(DDPrimitiveApply(r->T, xin, yo));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Repart_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Repart  *r  = (Repart *)l->data;
  DDTensor dx = dxs ? dxs[0] : NULL, dyo, dxo;

  PetscFunctionBegin;
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(ConformLayout(dy, l->output, &r->dyo, &dyo, true));
  PetscCall(ConformLayout(dx, l->setupin[0], &r->dxo, &dxo, false));
  PetscCall(DDPrimitiveApplyAdjoint(r->T, dyo, dxo));
  if (dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Repart_View(DDLayer l, PetscViewer viewer)
{
  Repart *r = (Repart *)l->data;
  char    s[128];

  PetscFunctionBegin;
  if (r->part) {
    PetscCall(DDShapeToString_Private(r->part->order, r->part->shape, s, sizeof(s)));
    PetscCall(PetscViewerASCIIPrintf(viewer, "onto a given partition %s\n", s));
  } else if (r->nshape) {
    PetscCall(DDShapeToString_Private(r->nshape, r->shape, s, sizeof(s)));
    PetscCall(PetscViewerASCIIPrintf(viewer, "onto a partition %s on the first ranks\n", s));
  } else PetscCall(PetscViewerASCIIPrintf(viewer, "no output partition set\n"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERREPARTITION - "repartition": moves a tensor onto another partition (paper 000 sec. 3.2.4)

  The glue between layers that want different distributions: e.g. from a spatially split
  convolution's output onto the batch or feature split of a dense layer. Forward is the
  repartition primitive T (an all-to-all of the pieces, by a PetscSF graph); Backward applies
  T^*, which moves the gradient back. The output is balanced over the new partition and keeps
  the input's storage format (plain, channels-last or blocked).

  Options Database Key:
. -layer_repartition_shape <p0,p1,...> - output partition shape, on ranks 0, 1, ...

  Level: beginner

.seealso: `DDLayerRepartitionSetPartition()`, `DDLayerRepartitionSetShape()`, `DDPRIMITIVEREPARTITION`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Repartition(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Repart;
  l->ops->setfromoptions = Repart_SetFromOptions;
  l->ops->setup          = Repart_SetUp;
  l->ops->forward        = Repart_Forward;
  l->ops->backward       = Repart_Backward;
  l->device              = PETSC_TRUE; /* on device tensors: its primitives run in the inputs' memory */
  l->ops->view           = Repart_View;
  l->ops->reset          = Repart_Reset;
  l->ops->destroy        = Repart_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

