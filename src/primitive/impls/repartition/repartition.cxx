/*
  REPARTITION T_{Px->Py} (paper 000, sec. 3.2.4, Fig. 2): the distributed-tensor all-to-all.

  Any two partitions of the same tensor, with different worker counts, rank sets and
  ownership ranges; scatter (from a 1 x ... x 1 partition) and gather (to one) are special
  cases. Built on PetscSF: every entry of y's bulk is a leaf whose root is the same global
  entry in x's bulk. Forward = PetscSFBcast (a copy), adjoint = PetscSFReduce (the transpose
  of a permutation: each root has exactly one leaf, so the sum is a copy back).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <tensor/layout.hpp>
#include <primitive/sfutil.hpp>
#include <primitive/exchange.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct Repart {
  PetscSF   sf = NULL; /* the graph: leaves are y's bulk, roots x's bulk */
  Exchange *ex = nullptr;
  PetscInt  nremote = 0; /* entries this rank receives from other ranks */
};
} // namespace

static PetscErrorCode RP_Reset(DDPrimitive prim)
{
  auto *r = (Repart *)prim->data;

  PetscFunctionBegin;
  PetscCall(PetscSFDestroy(&r->sf));
  delete r->ex;
  r->ex = nullptr;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode RP_Destroy(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(RP_Reset(prim));
  delete (Repart *)prim->data;
  prim->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode RP_SetUp(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto       *r    = (Repart *)prim->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)prim);
  PetscMPIInt rank;
  char        sx[128], sy[128];

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  PetscCall(DDShapeToString_Private(y->order, y->shape, sy, sizeof(sy)));
  PetscCheck(x->order == y->order, comm, PETSC_ERR_ARG_INCOMP, "Cannot repartition a tensor of shape %s into one of shape %s", sx, sy);
  for (PetscInt k = 0; k < x->order; k++) {
    PetscCheck(x->shape[k] == y->shape[k], comm, PETSC_ERR_ARG_INCOMP, "Cannot repartition a tensor of shape %s into one of shape %s (dimension %" PetscInt_FMT ")", sx, sy, k);
    PetscCheck(!x->replicated[k] && !y->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "Repartition moves split tensors; dimension %" PetscInt_FMT " is replicated (use broadcast or sum-reduce)", k);
  }
  const DDLayout          &Ly = y->layout;
  const PetscInt           d  = y->order;
  std::vector<PetscInt>    ilocal;
  std::vector<PetscSFNode> iremote;
  ilocal.reserve(Ly.bulksize);
  iremote.reserve(Ly.bulksize);
  /* per dimension, the owner coordinate in x of every local index of y's bulk */
  std::vector<PetscInt> owner[DD_MAX_DIM];
  for (PetscInt k = 0; k < d; k++) {
    owner[k].resize(Ly.n[k]);
    for (PetscInt i = 0; i < Ly.n[k]; i++) owner[k][i] = OwnerCoordinate(x, k, Ly.start[k] + i);
  }
  PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM];
  LayoutBulkBox(Ly, a, b);
  r->nremote = 0;
  if (Ly.bulksize)
    ForEachIndex(d, a, b, Ly.perm, [&](const PetscInt *j) {
      PetscInt    c[DD_MAX_DIM], g[DD_MAX_DIM], index;
      PetscMPIInt orank;
      for (PetscInt k = 0; k < d; k++) {
        c[k] = owner[k][j[k] - Ly.lo[k]];
        g[k] = j[k] - Ly.lo[k] + Ly.start[k];
      }
      OwnerOf(x, c, g, &orank, &index);
      ilocal.push_back(LayoutOffset(Ly, j));
      iremote.push_back({orank, index});
      if (orank != rank) r->nremote++;
    });
  if (PricingOnly()) { /* a trial set-up of -net_distribution auto: the counts the model reads, no graph */
    if (PricingNoPlans()) PetscFunctionReturn(PETSC_SUCCESS);
    r->ex = new Exchange;
    PetscCall(BuildStoragePlan(comm, x, ilocal, iremote, r->ex, NULL));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(BuildStorageSF(comm, x, ilocal, iremote, &r->sf));
  {
    PetscMPIInt tag;
    PetscCall(PetscObjectGetNewTag((PetscObject)prim, &tag));
    r->ex = new Exchange;
    r->ex->memtype = x->memtype;
    PetscCall(r->ex->SetUp(r->sf, comm, tag, DDExchangeUseTypes()));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode RP_ApplyBegin(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *r = (Repart *)prim->data;

  PetscFunctionBegin;
  PetscCall(r->ex->ForwardBegin(x->dtype, x->array, y->array));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode RP_ApplyEnd(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *r = (Repart *)prim->data;

  PetscFunctionBegin;
  PetscCall(r->ex->ForwardEnd(x->dtype, x->array, y->array));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Adjoint of the copy: each root has exactly one leaf, so the sum into a cleared x is a copy back */
static PetscErrorCode RP_AdjointBegin(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *r = (Repart *)prim->data;

  PetscFunctionBegin;
  PetscCall(r->ex->AdjointBegin(x->dtype, y->array, x->array, false));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode RP_AdjointEnd(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *r = (Repart *)prim->data;

  PetscFunctionBegin;
  PetscCall(r->ex->AdjointEnd(x->dtype, y->array, x->array, false));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode RP_View(DDPrimitive prim, PetscViewer viewer)
{
  auto *r = (Repart *)prim->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPushSynchronized(viewer));
  PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] receives %" PetscInt_FMT " entries from other ranks\n", PetscGlobalRank, r->nremote));
  PetscCall(PetscViewerFlush(viewer));
  PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDPRIMITIVEREPARTITION - "repartition": moves a tensor from one partition (and ownership) to another (paper 000, sec. 3.2.4)

  DDPrimitiveSetUp(prim, x, y): x and y have the same global shape, any partitions, rank
  sets, ownership ranges, halos and formats (no replicated dimensions).
  `DDTensorCreateRepartition()` makes y. Forward copies every entry to its new owner; the
  adjoint moves it back. Scatter (x on one worker) and gather (y on one worker) are special
  cases, and ranks outside both partitions are idle.

  Level: beginner

.seealso: `DDTensorCreateRepartition()`, `DDPRIMITIVEBROADCAST`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Repartition(DDPrimitive prim)
{
  PetscFunctionBegin;
  prim->data               = new Repart;
  prim->device = PETSC_TRUE; /* device tensors: messages staged through host buffers (issue 11 part 3) */
  prim->ops->setup         = RP_SetUp;
  prim->ops->applybegin    = RP_ApplyBegin;
  prim->ops->applyend      = RP_ApplyEnd;
  prim->ops->adjointbegin  = RP_AdjointBegin;
  prim->ops->adjointend    = RP_AdjointEnd;
  prim->ops->view          = RP_View;
  prim->ops->reset         = RP_Reset;
  prim->ops->destroy       = RP_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorCreateRepartition - Creates a balanced tensor with x's shape, type and format on another partition

  Collective

  Input Parameters:
+ x    - the tensor
- part - the new partition (same order)

  Output Parameter:
. y - the new tensor (zeroed), for `DDPRIMITIVEREPARTITION`

  Level: intermediate

.seealso: `DDPRIMITIVEREPARTITION`
@*/
PetscErrorCode DDTensorCreateRepartition(DDTensor x, DDPartition part, DDTensor *y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(x, "DDTensorCreateRepartition"));
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)x), y));
  PetscCall(DDTensorSetPartition(*y, part));
  PetscCall(DDTensorSetShape(*y, x->order, x->shape));
  PetscCall(DDTensorSetDataType(*y, x->dtype));
  PetscCall(DDTensorSetFormat(*y, x->format));
  PetscCall(DDTensorSetBlockSize(*y, x->bs));
  PetscCall(DDTensorSetBlockDimension_Private(*y, x->blockdim));
  PetscCall(DDTensorSetMemType(*y, x->memtype));
  PetscCall(DDTensorSetUp(*y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
