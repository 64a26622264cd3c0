/*
  ALLSUMREDUCE A_P (paper 000, sec. 3.2.3): sums a tensor over a list of partition dimensions
  and leaves the sum on every worker of those dimensions. A = B R is self-adjoint (eq. 19-20),
  implemented with one MPI_Allreduce per slice of the partition (MPI_Comm_split).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <tensor/layout.hpp>
#include <primitive/staging.hpp>
#include <primitive/settings.hpp>
#include <tensor/argcheck.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct AllSum {
  std::vector<PetscInt> dims;
  MPI_Comm              comm = MPI_COMM_NULL;
  PetscMPIInt           gsize = 0;
  std::vector<char>     buf;
  StageBuffer           stage; /* device tensors: the bulk in C order on the device and its host copy */
};
} // namespace

/*@
  DDPrimitiveAllSumReduceSetDimensions - Chooses the partition dimensions an all-sum-reduce sums over

  Logically collective

  Input Parameters:
+ prim - a `DDPRIMITIVEALLSUMREDUCE` primitive
. n    - number of dimensions, 0 to DD_MAX_DIM
- dims - the partition dimensions (e.g. {2, 3} for the spatial dimensions of N x C x H x W)

  Options Database Key:
. -primitive_allsumreduce_dims <d0,d1,...> - the dimensions

  Notes:
  A negative n or one above DD_MAX_DIM is an error (`PETSC_ERR_ARG_OUTOFRANGE`), a NULL dims with n > 0
  too (`PETSC_ERR_ARG_NULL`); `DDPrimitiveSetUp()` checks the dimensions against the partition, and
  that every rank gave the same ones (an error on every rank otherwise).

  Level: intermediate

.seealso: `DDPRIMITIVEALLSUMREDUCE`
@*/
PetscErrorCode DDPrimitiveAllSumReduceSetDimensions(DDPrimitive prim, PetscInt n, const PetscInt dims[])
DD_CXX_TRY
{
  PetscBool match;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, DDPRIMITIVEALLSUMREDUCE, &match));
  PetscCheck(match, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONG, "DDPrimitiveAllSumReduceSetDimensions(): not an allsumreduce primitive (type %s)", ((PetscObject)prim)->type_name ? ((PetscObject)prim)->type_name : "(none)");
  PetscCheck(n >= 0, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "DDPrimitiveAllSumReduceSetDimensions(): the number of dimensions n = %" PetscInt_FMT " is negative", n);
  PetscCheck(n <= DD_MAX_DIM, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_OUTOFRANGE, "DDPrimitiveAllSumReduceSetDimensions(): the number of dimensions n = %" PetscInt_FMT " exceeds DD_MAX_DIM = %d", n, DD_MAX_DIM);
  if (n > 0) DDCheckPointer(dims, 3);
  auto *a = (AllSum *)prim->data;
  a->dims.assign(dims, dims + n);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode AS_SetFromOptions(DDPrimitive prim, PetscOptionItems *PetscOptionsObject)
{
  auto     *a = (AllSum *)prim->data;
  PetscInt  dims[DD_MAX_DIM], n = DD_MAX_DIM;
  PetscBool flg;

  PetscFunctionBegin;
  for (size_t i = 0; i < a->dims.size(); i++) dims[i] = a->dims[i];
  PetscOptionsHeadBegin(PetscOptionsObject, "DDPrimitive allsumreduce options");
  PetscCall(PetscOptionsIntArray("-primitive_allsumreduce_dims", "Partition dimensions to sum over", "DDPrimitiveAllSumReduceSetDimensions", dims, &n, &flg));
  if (flg) PetscCall(DDPrimitiveAllSumReduceSetDimensions(prim, n, dims));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AS_Reset(DDPrimitive prim)
{
  auto *a = (AllSum *)prim->data;

  PetscFunctionBegin;
  if (a->comm != MPI_COMM_NULL) PetscCallMPI(MPI_Comm_free(&a->comm));
  a->buf.clear();
  PetscCall(a->stage.Free());
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AS_Destroy(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(AS_Reset(prim));
  delete (AllSum *)prim->data;
  prim->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AS_SetUp(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto       *a    = (AllSum *)prim->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)prim);
  DDPartition P    = x->part;
  bool        sum[DD_MAX_DIM] = {false};

  PetscFunctionBegin;
  PetscCall(DDTensorCheckCompatible_Private(x, y, "DDPrimitiveSetUp(allsumreduce)"));
  PetscCheck(!a->dims.empty(), comm, PETSC_ERR_ARG_WRONGSTATE, "Give the dimensions to sum over (DDPrimitiveAllSumReduceSetDimensions() or -primitive_allsumreduce_dims)");
  for (PetscInt k : a->dims) {
    PetscCheck(k >= 0 && k < P->order, comm, PETSC_ERR_ARG_OUTOFRANGE, "All-sum-reduce dimension %" PetscInt_FMT " is outside the partition's [0, %" PetscInt_FMT ")", k, P->order);
    PetscCheck(P->shape[k] == 1 || x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "The tensor is split along partition dimension %" PetscInt_FMT " (%" PetscInt_FMT " workers); an all-sum-reduce over it needs a tensor replicated there (DDTensorSetReplicated())", k, P->shape[k]);
    sum[k] = true;
  }
  PetscMPIInt color = MPI_UNDEFINED;
  if (P->index >= 0) {
    PetscInt c = 0;
    for (PetscInt k = 0; k < P->order; k++)
      if (!sum[k]) c = c * P->shape[k] + P->coords[k];
    color = (PetscMPIInt)c;
  }
  PetscCallMPI(MPI_Comm_split(comm, color, (PetscMPIInt)PetscMax(P->index, 0), &a->comm));
  a->gsize = 0;
  if (a->comm != MPI_COMM_NULL) PetscCallMPI(MPI_Comm_size(a->comm, &a->gsize));
  size_t es;
  PetscCall(DDDataTypeGetSize(x->dtype, &es));
  if (x->memtype != DD_MEMTYPE_HOST) PetscCall(a->stage.Allocate(x->memtype, es * (size_t)x->layout.bulksize));
  else a->buf.resize(es * (size_t)x->layout.bulksize + 1);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AS_Apply(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto        *a = (AllSum *)prim->data;
  MPI_Datatype mt;

  PetscFunctionBegin;
  if (a->comm == MPI_COMM_NULL || !x->layout.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDDataTypeGetMPIType(x->dtype, &mt));
  if (x->memtype != DD_MEMTYPE_HOST) { /* device tensors: through a page-locked host copy (staging.hpp) */
    if (a->gsize == 1) PetscCall(DDTensorCopy(x, y));
    else {
      PetscCall(StageBulkToHost(a->stage, x->dtype, x->layout, x->array));
      PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, a->stage.host, (PetscMPIInt)x->layout.bulksize, mt, MPI_SUM, a->comm));
      PetscCall(StageBulkFromHost(a->stage, y->dtype, y->layout, y->array));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (LayoutIsPlainContiguous(x->layout) && LayoutIsPlainContiguous(y->layout)) { /* no copies */
    if (a->gsize > 1) PetscCallMPI(MPI_Allreduce(x == y ? MPI_IN_PLACE : x->array, y->array, (PetscMPIInt)x->layout.bulksize, mt, MPI_SUM, a->comm));
    else if (x != y) PetscCall(DDTensorCopy(x, y));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *b    = (T *)a->buf.data();
    PetscFunctionBegin;
    BulkCOrderCopy<T>(x->layout, (T *)x->array, b, 0);
    if (a->gsize > 1) PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, b, (PetscMPIInt)x->layout.bulksize, mt, MPI_SUM, a->comm));
    BulkCOrderCopy<T>(y->layout, (T *)y->array, b, 1);
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AS_Settings(DDPrimitive prim, std::string *d)
{
  auto *a = (AllSum *)prim->data;

  PetscFunctionBegin;
  *d += "allsumreduce dimensions";
  for (PetscInt k : a->dims) *d += " " + std::to_string((long long)k);
  *d += "\n";
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode AS_View(DDPrimitive prim, PetscViewer viewer)
{
  auto *a = (AllSum *)prim->data;
  char  s[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private((PetscInt)a->dims.size(), a->dims.data(), s, sizeof(s)));
  PetscCall(PetscViewerASCIIPrintf(viewer, "sums over partition dimension(s) %s\n", s));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDPRIMITIVEALLSUMREDUCE - "allsumreduce": sum over chosen partition dimensions, result on every worker (paper 000, sec. 3.2.3)

  DDPrimitiveSetUp(prim, x, y): x and y distributed alike (y may be x: in place), replicated
  along the summed dimensions (their pieces are partial sums of the same sub-tensor).
  Self-adjoint: ApplyAdjoint is Apply. Used by batch normalization's statistics.

  Options Database Key:
. -primitive_allsumreduce_dims <d0,d1,...> - partition dimensions to sum over

  Level: beginner

.seealso: `DDPrimitiveAllSumReduceSetDimensions()`, `DDPRIMITIVESUMREDUCE`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_AllSumReduce(DDPrimitive prim)
{
  PetscFunctionBegin;
  prim->data                = new AllSum;
  prim->allowsame           = PETSC_TRUE;
  prim->device = PETSC_TRUE; /* device tensors: messages staged through host buffers (issue 11 part 3) */
  prim->ops->setfromoptions = AS_SetFromOptions;
  prim->ops->setup          = AS_SetUp;
  prim->ops->applybegin     = AS_Apply;
  prim->ops->adjointbegin   = AS_Apply;
  prim->ops->view           = AS_View;
  prim->ops->reset          = AS_Reset;
  prim->ops->destroy        = AS_Destroy;
  PetscCall(PetscObjectComposeFunction((PetscObject)prim, DDPRIMITIVE_SETTINGS_C, AS_Settings));
  PetscFunctionReturn(PETSC_SUCCESS);
}
