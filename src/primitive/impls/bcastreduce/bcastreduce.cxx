/*
  BROADCAST B_{Px->Py} and SUMREDUCE R_{Px->Py} (paper 000, sec. 3.2.1-3.2.2, Fig. 1).

  Both move data between a "one" side (the broadcast's input, the sum-reduce's output) and a
  "many" side (the broadcast's output, the sum-reduce's input) whose partition has the same
  shape except along the broadcast dimensions K = {k : P_one,k = 1 < P_many,k}; shapes align
  at the trailing dimension, so the one side may have fewer (implicit leading size-1)
  dimensions. Each worker of the one side and the workers of the many side that share its
  coordinates outside K form a group with its own communicator; within a group the forward
  broadcast is MPI_Bcast and its adjoint the sum-reduction MPI_Reduce (eq. 16-18), both
  logarithmic. R is B with the directions swapped, so R* = B and B* = R.

  The one and many sides may live on different ranks (disjoint or overlapping rank sets);
  ranks in neither are idle.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <tensor/layout.hpp>
#include <primitive/bcastgroups.hpp>
#include <primitive/staging.hpp>
#include <tensor/argcheck.hpp>
#include <cstring>
#include <vector>
#include <algorithm>

using namespace ddnn;

namespace
{
struct Group {
  PetscInt    gid;
  MPI_Comm    comm = MPI_COMM_NULL; /* root is rank 0; MPI_COMM_NULL for a group of one rank */
  bool        root = false;         /* this rank holds the one-side piece */
  bool        member = false;       /* this rank holds a many-side piece */
  PetscInt    count = 0;            /* entries of the piece */
};

struct BcastReduce {
  bool               broadcast;  /* forward is a broadcast (else a sum-reduction) */
  std::vector<Group> groups;     /* the groups of this rank, by increasing gid */
  std::vector<char>  bufone, bufmany;
  StageBuffer        sone, smany; /* device tensors: the pieces in C order on the device and their host copies */
  PetscInt           nK = 0, lead = 0, ngroups = 0;
  char               desc[256] = "";
};
} // namespace

static PetscErrorCode BR_Reset(DDPrimitive prim)
{
  auto *br = (BcastReduce *)prim->data;

  PetscFunctionBegin;
  for (auto &g : br->groups)
    if (g.comm != MPI_COMM_NULL) PetscCallMPI(MPI_Comm_free(&g.comm));
  br->groups.clear();
  br->bufone.clear();
  br->bufmany.clear();
  PetscCall(br->sone.Free());
  PetscCall(br->smany.Free());
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_Destroy(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(BR_Reset(prim));
  delete (BcastReduce *)prim->data;
  prim->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_SetUp(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto       *br   = (BcastReduce *)prim->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)prim);
  DDTensor    one  = br->broadcast ? x : y, many = br->broadcast ? y : x;
  DDPartition Po = one->part, Pm = many->part;
  PetscInt    d = Pm->order, lead, Pext[DD_MAX_DIM];
  bool        K[DD_MAX_DIM];
  char        so[128], sm[128], to[128], tm[128];
  const char *verb = br->broadcast ? "broadcast" : "sum-reduce";

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(Po->order, Po->shape, so, sizeof(so)));
  PetscCall(DDShapeToString_Private(Pm->order, Pm->shape, sm, sizeof(sm)));
  PetscCall(DDShapeToString_Private(one->order, one->shape, to, sizeof(to)));
  PetscCall(DDShapeToString_Private(many->order, many->shape, tm, sizeof(tm)));
  if (br->broadcast) PetscCall(PetscSNPrintf(br->desc, sizeof(br->desc), "from partition %s to partition %s", so, sm));
  else PetscCall(PetscSNPrintf(br->desc, sizeof(br->desc), "from partition %s to partition %s", sm, so));
  PetscCheck(Po->order <= d, comm, PETSC_ERR_ARG_INCOMP, "Cannot %s %s: the %s partition has more dimensions than the %s one", verb, br->desc, br->broadcast ? "input" : "output", br->broadcast ? "output" : "input");
  lead = d - Po->order;
  for (PetscInt k = 0; k < d; k++) {
    Pext[k] = k < lead ? 1 : Po->shape[k - lead];
    PetscCheck(Pext[k] == Pm->shape[k] || Pext[k] == 1, comm, PETSC_ERR_ARG_INCOMP, "Cannot %s %s: dimension %" PetscInt_FMT " has %" PetscInt_FMT " workers in the input and %" PetscInt_FMT " in the output; they must be equal, or 1 in the %s (paper 000 sec. 3.2.%d)", verb, br->desc, k, br->broadcast ? Pext[k] : Pm->shape[k], br->broadcast ? Pm->shape[k] : Pext[k], br->broadcast ? "input" : "output", br->broadcast ? 1 : 2);
    K[k] = Pext[k] == 1 && Pm->shape[k] > 1;
  }
  /* tensor shapes: many = (1,...,1, one's shape) */
  PetscCheck(one->order + lead == many->order, comm, PETSC_ERR_ARG_INCOMP, "Cannot %s tensor %s to %s: orders must differ by the leading partition dimensions (%" PetscInt_FMT ")", verb, br->broadcast ? to : tm, br->broadcast ? tm : to, lead);
  for (PetscInt k = 0; k < d; k++) {
    PetscInt so_k = k < lead ? 1 : one->shape[k - lead];
    PetscCheck(so_k == many->shape[k], comm, PETSC_ERR_ARG_INCOMP, "Cannot %s tensor %s to %s: dimension %" PetscInt_FMT " differs", verb, br->broadcast ? to : tm, br->broadcast ? tm : to, k);
    if (K[k]) {
      PetscCheck(many->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "The %s tensor must be replicated along dimension %" PetscInt_FMT " (DDTensorSetReplicated(), or create it with %s)", br->broadcast ? "broadcast's output" : "sum-reduction's input", k, br->broadcast ? "DDTensorCreateBroadcast()" : "DDTensorCreateSumReduce()");
    } else if (k >= lead) {
      PetscBool ro = one->replicated[k - lead], rm = many->replicated[k];
      PetscCheck(ro == rm, comm, PETSC_ERR_ARG_INCOMP, "Input and output differ in replication along dimension %" PetscInt_FMT, k);
      if (!ro)
        for (PetscInt p = 0; p <= Pm->shape[k]; p++) PetscCheck(one->ranges[k - lead][p] == many->ranges[k][p], comm, PETSC_ERR_ARG_INCOMP, "Input and output ownership ranges differ along dimension %" PetscInt_FMT " (coordinate %" PetscInt_FMT ")", k, p);
    }
  }
  br->lead = lead;
  br->nK   = 0;
  for (PetscInt k = 0; k < d; k++) br->nK += K[k];
  br->ngroups = 1;
  for (PetscInt k = 0; k < d; k++)
    if (!K[k]) br->ngroups *= Pm->shape[k];
  std::vector<BcastGroup> bg;
  std::vector<Group>      mine;
  BroadcastGroupsOf(one, many, bg); /* by increasing gid */
  /* communicators, created group by group in increasing gid order (deadlock-free) */
  MPI_Group world;
  PetscCallMPI(MPI_Comm_group(comm, &world));
  for (const auto &b : bg) {
    Group g;
    g.gid    = b.gid;
    g.root   = b.root;
    g.member = b.member;
    g.count  = b.count;
    mine.push_back(g);
    if (g.count == 0) continue; /* every rank of the group holds the same (empty) box */
    if (b.ranks.size() == 1) continue; /* a local copy */
    MPI_Group grp;
    PetscCallMPI(MPI_Group_incl(world, (PetscMPIInt)b.ranks.size(), b.ranks.data(), &grp));
    PetscCallMPI(MPI_Comm_create_group(comm, grp, (PetscMPIInt)(g.gid % 32767), &mine.back().comm));
    PetscCallMPI(MPI_Group_free(&grp));
  }
  PetscCallMPI(MPI_Group_free(&world));
  br->groups = mine;
  {
    size_t es;
    PetscCall(DDDataTypeGetSize(x->dtype, &es));
    const size_t bo = es * (size_t)(Po->index >= 0 ? one->layout.bulksize : 0), bm = es * (size_t)(Pm->index >= 0 ? many->layout.bulksize : 0);
    if (x->memtype != DD_MEMTYPE_HOST) { /* a root that is no member of its group reduces into its host copy: room for the group's count */
      PetscCall(br->sone.Allocate(x->memtype, PetscMax(bo, bm)));
      PetscCall(br->smany.Allocate(x->memtype, bm));
    } else {
      br->bufone.resize(bo + 1);
      br->bufmany.resize(bm + 1);
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  one -> many: copies of the one-side piece (a broadcast's forward, a sum-reduce's adjoint).
  Tensors whose bulk is their whole storage in C order are sent from and received into
  directly; the root's own copy overlaps the non-blocking broadcast.
*/
static PetscErrorCode BR_Spread(DDPrimitive prim, DDTensor one, DDTensor many)
{
  auto        *br = (BcastReduce *)prim->data;
  MPI_Datatype mt;
  const bool   dOne = LayoutIsPlainContiguous(one->layout), dMany = LayoutIsPlainContiguous(many->layout);

  PetscFunctionBegin;
  PetscCall(DDDataTypeGetMPIType(one->dtype, &mt));
  PetscCall(DispatchType(one->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *bo = (T *)br->bufone.data(), *bm = (T *)br->bufmany.data();
    PetscFunctionBegin;
    for (auto &g : br->groups) {
      if (!g.count) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      T          *src = nullptr;
      if (g.root) {
        src = dOne ? (T *)one->array : bo;
        if (!dOne) BulkCOrderCopy<T>(one->layout, (T *)one->array, bo, 0);
        if (g.comm != MPI_COMM_NULL) PetscCallMPI(MPI_Ibcast(src, (PetscMPIInt)g.count, mt, 0, g.comm, &req));
        if (g.member) BulkCOrderCopy<T>(many->layout, (T *)many->array, src, 1);
      } else {
        T *dst = dMany ? (T *)many->array : bm; /* Ibcast: nonblocking collectives only match nonblocking ones */
        PetscCallMPI(MPI_Ibcast(dst, (PetscMPIInt)g.count, mt, 0, g.comm, &req));
        PetscCallMPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        if (!dMany) BulkCOrderCopy<T>(many->layout, (T *)many->array, bm, 1);
      }
      PetscCallMPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* many -> one: the sum of the many-side pieces (a sum-reduce's forward, a broadcast's adjoint) */
static PetscErrorCode BR_Gather(DDPrimitive prim, DDTensor many, DDTensor one)
{
  auto        *br = (BcastReduce *)prim->data;
  MPI_Datatype mt;
  const bool   dOne = LayoutIsPlainContiguous(one->layout), dMany = LayoutIsPlainContiguous(many->layout);

  PetscFunctionBegin;
  PetscCall(DDDataTypeGetMPIType(one->dtype, &mt));
  PetscCall(DispatchType(one->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *bo = (T *)br->bufone.data(), *bm = (T *)br->bufmany.data();
    PetscFunctionBegin;
    for (auto &g : br->groups) {
      if (!g.count) continue;
      if (g.root) {
        T *dst = dOne ? (T *)one->array : bo;
        if (g.member && dMany && g.comm != MPI_COMM_NULL) { /* the root's own piece goes straight into MPI */
          PetscCallMPI(MPI_Reduce(many->array, dst, (PetscMPIInt)g.count, mt, MPI_SUM, 0, g.comm));
        } else {
          if (g.member) BulkCOrderCopy<T>(many->layout, (T *)many->array, dst, 0);
          else std::fill(dst, dst + g.count, (T)0);
          if (g.comm != MPI_COMM_NULL) PetscCallMPI(MPI_Reduce(MPI_IN_PLACE, dst, (PetscMPIInt)g.count, mt, MPI_SUM, 0, g.comm));
        }
        if (!dOne) BulkCOrderCopy<T>(one->layout, (T *)one->array, bo, 1);
      } else {
        T *src = dMany ? (T *)many->array : bm;
        if (!dMany) BulkCOrderCopy<T>(many->layout, (T *)many->array, bm, 0);
        PetscCallMPI(MPI_Reduce(src, NULL, (PetscMPIInt)g.count, mt, MPI_SUM, 0, g.comm));
      }
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Device tensors: the same groups and collectives on page-locked host copies of the pieces in C
  order (staging.hpp); the copies to and from the device are kernels of the memory's backend.
*/
static PetscErrorCode BR_SpreadDevice(DDPrimitive prim, DDTensor one, DDTensor many)
{
  auto        *br = (BcastReduce *)prim->data;
  MPI_Datatype mt;

  PetscFunctionBegin;
  PetscCall(DDDataTypeGetMPIType(one->dtype, &mt));
  for (auto &g : br->groups) {
    if (!g.count) continue;
    if (g.root) {
      PetscCall(StageBulkToHost(br->sone, one->dtype, one->layout, one->array));
      if (g.comm != MPI_COMM_NULL) {
        MPI_Request req;
        PetscCallMPI(MPI_Ibcast(br->sone.host, (PetscMPIInt)g.count, mt, 0, g.comm, &req));
        PetscCallMPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
      }
      if (g.member) PetscCall(StageBulkFromHost(br->sone, many->dtype, many->layout, many->array));
    } else {
      MPI_Request req;
      PetscCallMPI(MPI_Ibcast(br->smany.host, (PetscMPIInt)g.count, mt, 0, g.comm, &req));
      PetscCallMPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
      PetscCall(StageBulkFromHost(br->smany, many->dtype, many->layout, many->array));
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_GatherDevice(DDPrimitive prim, DDTensor many, DDTensor one)
{
  auto        *br = (BcastReduce *)prim->data;
  MPI_Datatype mt;
  size_t       es;

  PetscFunctionBegin;
  PetscCall(DDDataTypeGetMPIType(one->dtype, &mt));
  PetscCall(DDDataTypeGetSize(one->dtype, &es));
  for (auto &g : br->groups) {
    if (!g.count) continue;
    if (g.root) {
      if (g.member) PetscCall(StageBulkToHost(br->sone, many->dtype, many->layout, many->array));
      else std::memset(br->sone.host, 0, es * (size_t)g.count);
      if (g.comm != MPI_COMM_NULL) PetscCallMPI(MPI_Reduce(MPI_IN_PLACE, br->sone.host, (PetscMPIInt)g.count, mt, MPI_SUM, 0, g.comm));
      PetscCall(StageBulkFromHost(br->sone, one->dtype, one->layout, one->array));
    } else {
      PetscCall(StageBulkToHost(br->smany, many->dtype, many->layout, many->array));
      PetscCallMPI(MPI_Reduce(br->smany.host, NULL, (PetscMPIInt)g.count, mt, MPI_SUM, 0, g.comm));
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_ApplyBegin(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *br = (BcastReduce *)prim->data;

  PetscFunctionBegin;
  const bool dev = x->memtype != DD_MEMTYPE_HOST;
  if (br->broadcast) PetscCall(dev ? BR_SpreadDevice(prim, x, y) : BR_Spread(prim, x, y));
  else PetscCall(dev ? BR_GatherDevice(prim, x, y) : BR_Gather(prim, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_AdjointBegin(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *br = (BcastReduce *)prim->data;

  PetscFunctionBegin;
  const bool dev = x->memtype != DD_MEMTYPE_HOST;
  if (br->broadcast) PetscCall(dev ? BR_GatherDevice(prim, y, x) : BR_Gather(prim, y, x));
  else PetscCall(dev ? BR_SpreadDevice(prim, y, x) : BR_Spread(prim, y, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_View(DDPrimitive prim, PetscViewer viewer)
{
  auto *br = (BcastReduce *)prim->data;

  PetscFunctionBegin;
  if (!prim->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerASCIIPrintf(viewer, "%s; %" PetscInt_FMT " broadcast dimension(s), %" PetscInt_FMT " group(s)\n", br->desc, br->nK, br->ngroups));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BR_Create(DDPrimitive prim, bool broadcast)
{
  PetscFunctionBegin;
  auto *br                 = new BcastReduce;
  br->broadcast            = broadcast;
  prim->data               = br;
  prim->device = PETSC_TRUE; /* device tensors: messages staged through host buffers (issue 11 part 3) */
  prim->ops->setup         = BR_SetUp;
  prim->ops->applybegin    = BR_ApplyBegin;
  prim->ops->adjointbegin  = BR_AdjointBegin;
  prim->ops->view          = BR_View;
  prim->ops->reset         = BR_Reset;
  prim->ops->destroy       = BR_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDPRIMITIVEBROADCAST - "broadcast": the distributed-tensor broadcast B_{Px->Py} (paper 000, sec. 3.2.1)

  DDPrimitiveSetUp(prim, x, y): x on Px, y on Py; for every dimension k (aligned at the
  trailing dimension, the shorter partition extended with leading 1s), Px_k = Py_k or
  Px_k = 1. y has x's shape with the leading size-1 dimensions Py adds, is replicated along
  the dimensions where Px_k = 1 < Py_k, and has x's ownership elsewhere
  (`DDTensorCreateBroadcast()` makes it). Forward: every y worker receives a copy of the x piece
  with its coordinates; the adjoint sums the copies back (a sum-reduction).

  Px and Py may live on different ranks; groups use MPI_Bcast/MPI_Reduce on their own
  communicators.

  Level: beginner

.seealso: `DDPRIMITIVESUMREDUCE`, `DDTensorCreateBroadcast()`, `DDPrimitiveSetUp()`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Broadcast(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(BR_Create(prim, true));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDPRIMITIVESUMREDUCE - "sumreduce": the distributed-tensor sum-reduction R_{Px->Py} (paper 000, sec. 3.2.2)

  DDPrimitiveSetUp(prim, x, y): x on Px, y on Py; for every dimension, Px_k = Py_k or Py_k = 1.
  x is replicated along the dimensions where Py_k = 1 < Px_k (its pieces there are partial
  sums of the same sub-tensor; `DDTensorCreateSumReduce()` makes y from x). Forward: y gets
  the sum of the pieces; the adjoint broadcasts y back.

  Level: beginner

.seealso: `DDPRIMITIVEBROADCAST`, `DDTensorCreateSumReduce()`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_SumReduce(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(BR_Create(prim, false));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ---------------------------------------------------------------------- */
/* Creating the tensors these primitives expect */

/*@
  DDTensorCreateBroadcast - Creates the output tensor of a broadcast of x onto a partition

  Collective

  Input Parameters:
+ x    - the input tensor (set up)
- part - the output partition (Px_k = Py_k or Px_k = 1, aligned at the trailing dimension)

  Output Parameter:
. y - a tensor on part: x's shape with leading size-1 dimensions prepended up to part's order,
      replicated along the broadcast dimensions, x's ownership elsewhere; same type, format and
      memory type

  Level: intermediate

.seealso: `DDPRIMITIVEBROADCAST`, `DDTensorCreateSumReduce()`
@*/
PetscErrorCode DDTensorCreateBroadcast(DDTensor x, DDPartition part, DDTensor *y)
DD_CXX_TRY
{
  PetscInt d, lead, shape[DD_MAX_DIM];
  PetscBool ok;
  PetscInt  bad;
  DDTensor  t;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(x, "DDTensorCreateBroadcast"));
  DDCheckHeader(part, DD_PARTITION_CLASSID, 2);
  DDCheckPointer(y, 3);
  d = part->order;
  PetscCheck(x->order <= d, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "The output partition has fewer dimensions (%" PetscInt_FMT ") than the tensor (%" PetscInt_FMT ")", d, x->order);
  PetscCall(DDPartitionCheckBroadcast(x->part, part, &ok, &bad));
  PetscCheck(ok, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "Cannot broadcast onto this partition: dimension %" PetscInt_FMT " breaks Px_k = Py_k or Px_k = 1", bad);
  lead = d - x->order;
  for (PetscInt k = 0; k < d; k++) shape[k] = k < lead ? 1 : x->shape[k - lead];
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)x), &t));
  PetscCall(DDTensorSetPartition(t, part));
  PetscCall(DDTensorSetShape(t, d, shape));
  PetscCall(DDTensorSetDataType(t, x->dtype));
  for (PetscInt k = 0; k < d; k++) {
    PetscInt Pxk = k < lead ? 1 : x->part->shape[k - lead];
    if (Pxk == 1 && part->shape[k] > 1) PetscCall(DDTensorSetReplicated(t, k, PETSC_TRUE));
    else if (k >= lead) {
      if (x->replicated[k - lead]) PetscCall(DDTensorSetReplicated(t, k, PETSC_TRUE));
      else {
        std::vector<PetscInt> lx(Pxk);
        for (PetscInt p = 0; p < Pxk; p++) lx[p] = x->ranges[k - lead][p + 1] - x->ranges[k - lead][p];
        PetscCall(DDTensorSetOwnershipRanges(t, k, lx.data()));
      }
    }
  }
  PetscCall(DDTensorSetFormat(t, x->format));
  PetscCall(DDTensorSetBlockSize(t, x->bs));
  PetscCall(DDTensorSetBlockDimension_Private(t, x->blockdim + lead));
  PetscCall(DDTensorSetMemType(t, x->memtype));
  PetscCall(DDTensorSetUp(t));
  *y = t;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDTensorCreateSumReduce - Creates the output tensor of a sum-reduction of x onto a partition

  Collective

  Input Parameters:
+ x    - the input tensor, replicated along the dimensions being reduced
- part - the output partition (Px_k = Py_k or Py_k = 1, aligned at the trailing dimension);
         it may have fewer dimensions than x, in which case x's leading dimensions must be 1

  Output Parameter:
. y - a tensor on part with x's shape (less the leading dimensions part lacks) and x's
      ownership along the kept dimensions; x's type, format and memory type

  Level: intermediate

.seealso: `DDPRIMITIVESUMREDUCE`, `DDTensorCreateBroadcast()`
@*/
PetscErrorCode DDTensorCreateSumReduce(DDTensor x, DDPartition part, DDTensor *y)
DD_CXX_TRY
{
  PetscInt  d, lead;
  PetscBool ok;
  PetscInt  bad;
  DDTensor  t;

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(x, "DDTensorCreateSumReduce"));
  DDCheckHeader(part, DD_PARTITION_CLASSID, 2);
  DDCheckPointer(y, 3);
  d = part->order;
  PetscCheck(d <= x->order, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "The output partition has more dimensions than the tensor");
  lead = x->order - d;
  for (PetscInt k = 0; k < lead; k++) PetscCheck(x->shape[k] == 1, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "Cannot drop dimension %" PetscInt_FMT " of size %" PetscInt_FMT " in a sum-reduction", k, x->shape[k]);
  PetscCall(DDPartitionCheckReduce(x->part, part, &ok, &bad));
  PetscCheck(ok, PetscObjectComm((PetscObject)x), PETSC_ERR_ARG_INCOMP, "Cannot sum-reduce onto this partition: dimension %" PetscInt_FMT " breaks Px_k = Py_k or Py_k = 1", bad);
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)x), &t));
  PetscCall(DDTensorSetPartition(t, part));
  PetscCall(DDTensorSetShape(t, d, x->shape + lead));
  PetscCall(DDTensorSetDataType(t, x->dtype));
  for (PetscInt k = 0; k < d; k++) {
    PetscInt Pk = part->shape[k];
    if (x->replicated[k + lead] && x->part->shape[k + lead] == Pk) PetscCall(DDTensorSetReplicated(t, k, PETSC_TRUE)); /* a dimension not reduced keeps its replication (the primitive requires it), with one worker too */
    else if (!x->replicated[k + lead] && Pk > 1) {
      std::vector<PetscInt> lx(Pk);
      for (PetscInt p = 0; p < Pk; p++) lx[p] = x->ranges[k + lead][p + 1] - x->ranges[k + lead][p];
      PetscCall(DDTensorSetOwnershipRanges(t, k, lx.data()));
    }
  }
  PetscCall(DDTensorSetFormat(t, x->format));
  PetscCall(DDTensorSetBlockSize(t, x->bs));
  PetscCall(DDTensorSetBlockDimension_Private(t, x->blockdim - lead));
  PetscCall(DDTensorSetMemType(t, x->memtype));
  PetscCall(DDTensorSetUp(t));
  *y = t;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
