/*
  DDLAYERADD: the sum of n >= 2 tensors distributed alike, the skip connection of residual
  networks x_{i+1} = F[x_i] + x_i (paper 000 sec. 5.2, eq. 27). Purely local: every worker adds
  its pieces. The Jacobian with respect to each input is the identity, so Backward copies dy
  into every input's gradient (the adjoint of the sum is the copy).

  The inputs must have the same shape, partition, ownership ranges and replication; their
  halos and storage formats may differ. The output is halo-free in input 0's format.
*/
#include <ddnn/private/ddlayerimpl.h>
#include <vector>

static PetscErrorCode Add_SetUp(DDLayer l, PetscInt n, DDTensor xs[])
{
  MPI_Comm comm = PetscObjectComm((PetscObject)l);
  DDTensor x0 = xs[0], y;
  char     s0[128], si[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(x0->order, x0->shape, s0, sizeof(s0)));
  for (PetscInt i = 1; i < n; i++) {
    DDTensor  xi = xs[i];
    PetscBool same = xi->order == x0->order ? PETSC_TRUE : PETSC_FALSE, alike;
    for (PetscInt k = 0; same && k < x0->order; k++)
      if (xi->shape[k] != x0->shape[k]) same = PETSC_FALSE;
    PetscCall(DDShapeToString_Private(xi->order, xi->shape, si, sizeof(si)));
    PetscCheck(same, comm, PETSC_ERR_ARG_SIZ, "Add: input %" PetscInt_FMT " has shape %s but input 0 has shape %s", i, si, s0);
    PetscCheck(xi->dtype == x0->dtype, comm, PETSC_ERR_ARG_INCOMP, "Add: input %" PetscInt_FMT " is %s but input 0 is %s", i, DDDataTypes[xi->dtype], DDDataTypes[x0->dtype]);
    PetscCall(DDTensorCompatible(xi, x0, &alike));
    PetscCheck(alike, comm, PETSC_ERR_ARG_INCOMP, "Add: input %" PetscInt_FMT " (shape %s) is not distributed as input 0: partitions, ownership ranges and replication must match (repartition one of them first)", i, si);
  }
  /* the output: x0's distribution and format, no halo */
  PetscCall(DDTensorCreate(comm, &y));
  PetscCall(DDTensorSetPartition(y, x0->part));
  PetscCall(DDTensorSetShape(y, x0->order, x0->shape));
  PetscCall(DDTensorSetDataType(y, x0->dtype));
  for (PetscInt k = 0; k < x0->order; k++) {
    if (x0->replicated[k]) PetscCall(DDTensorSetReplicated(y, k, PETSC_TRUE));
    else {
      std::vector<PetscInt> lx(x0->part->shape[k]);
      for (PetscInt p = 0; p < x0->part->shape[k]; p++) lx[p] = x0->ranges[k][p + 1] - x0->ranges[k][p];
      PetscCall(DDTensorSetOwnershipRanges(y, k, lx.data()));
    }
  }
  PetscCall(DDTensorSetFormat(y, x0->format));
  PetscCall(DDTensorSetBlockSize(y, x0->bs));
  PetscCall(DDTensorSetBlockDimension_Private(y, x0->blockdim));
  PetscCall(DDTensorSetMemType(y, x0->memtype));
  PetscCall(DDTensorSetUp(y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Add_Forward(DDLayer l, PetscInt n, DDTensor xs[], DDTensor y)
{
  PetscFunctionBegin;
  PetscCall(DDTensorCopy(xs[0], y));
  for (PetscInt i = 1; i < n; i++) PetscCall(DDTensorAXPY(y, 1.0, xs[i]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Add_Backward(DDLayer l, DDTensor dy, PetscInt n, DDTensor dxs[])
{
  PetscFunctionBegin;
  for (PetscInt i = 0; i < n && dxs; i++)
    if (dxs[i]) PetscCall(DDTensorCopy(dy, dxs[i]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERADD - "add": y = x_0 + x_1 + ... + x_{n-1}, the skip connection (paper 000 sec. 5.2, eq. 27)

  Takes 2 to DD_LAYER_MAX_INPUTS inputs (`DDLayerSetUpMulti()`, `DDLayerForwardMulti()`) with
  the same shape, partition, ownership ranges and replication; halos and storage formats may
  differ between them. Local: no communication. Backward copies dy into every input's gradient.

  Level: beginner

.seealso: `DDLAYERCONCAT`, `DDLayerSetUpMulti()`, `DDLayerBackwardMulti()`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Add(DDLayer l)
{
  PetscFunctionBegin;
  l->minin          = 2;
  l->maxin          = DD_LAYER_MAX_INPUTS;
  l->ops->setup     = Add_SetUp;
  l->ops->forward   = Add_Forward;
  l->ops->backward  = Add_Backward;
  l->device         = PETSC_TRUE; /* on device tensors: the tensor arithmetic of the inputs' memory */
  PetscFunctionReturn(PETSC_SUCCESS);
}

