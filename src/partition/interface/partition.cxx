/*
  DDPartition: a Cartesian grid of MPI ranks of any order (paper 000, sec. 3.1).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddimpl.h>
#include <tensor/argcheck.hpp>
#include <cstring>

/*@
  DDPartitionCreate - Creates an empty partition on a communicator

  Collective

  Input Parameter:
. comm - the communicator; the partition's workers are some or all of its ranks

  Output Parameter:
. part - the partition; give it a shape with `DDPartitionSetShape()` (or -partition_shape)
         and call `DDPartitionSetUp()`

  Level: beginner

.seealso: `DDPartitionCreateCartesian()`, `DDPartitionSetShape()`, `DDPartitionSetRanks()`
@*/
PetscErrorCode DDPartitionCreate(MPI_Comm comm, DDPartition *part)
DD_CXX_TRY
{
  DDPartition p;

  PetscFunctionBegin;
  DDCheckPointer(part, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(p, DD_PARTITION_CLASSID, "DDPartition", "Cartesian grid of ranks", "DDPartition", comm, DDPartitionDestroy, DDPartitionView));
  p->order     = 0;
  p->size      = 0;
  p->nranksset = -1;
  p->index     = -1;
  p->subcomm   = MPI_COMM_NULL;
  *part        = p;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionSetShape - Sets the number of workers along each dimension

  Logically collective

  Input Parameters:
+ part  - the partition
. order - the number of dimensions (1 to DD_MAX_DIM)
- shape - workers along each dimension, C order (for a tensor N x C x H x W, the last entry partitions W);
          not NULL (`PETSC_ERR_ARG_NULL`)

  Options Database Key:
. -partition_shape <p0,p1,...> - the shape

  Level: beginner

.seealso: `DDPartitionSetRanks()`, `DDPartitionSetUp()`
@*/
PetscErrorCode DDPartitionSetShape(DDPartition part, PetscInt order, const PetscInt shape[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  PetscCheck(!part->setupcalled, PetscObjectComm((PetscObject)part), PETSC_ERR_ARG_WRONGSTATE, "Cannot change the shape of a partition after DDPartitionSetUp()");
  PetscCheck(order >= 1 && order <= DD_MAX_DIM, PetscObjectComm((PetscObject)part), PETSC_ERR_ARG_OUTOFRANGE, "Partition order %" PetscInt_FMT " must be between 1 and %d", order, DD_MAX_DIM);
  DDCheckPointer(shape, 3);
  for (PetscInt k = 0; k < order; k++) PetscCheck(shape[k] >= 1, PetscObjectComm((PetscObject)part), PETSC_ERR_ARG_OUTOFRANGE, "Partition shape entry %" PetscInt_FMT " is %" PetscInt_FMT "; every dimension needs at least one worker", k, shape[k]);
  part->order = order;
  for (PetscInt k = 0; k < order; k++) part->shape[k] = shape[k];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionSetRanks - Places the workers on chosen ranks of the communicator

  Logically collective

  Input Parameters:
+ part   - the partition
. n      - the number of ranks given; must equal the product of the shape
- ranks  - ranks of the partition's communicator, one per worker in worker order (C order of
           the coordinates, last dimension fastest); NULL means ranks 0..n-1

  Notes:
  Ranks of the communicator that are not listed are idle: they hold no piece of tensors on
  this partition but take part in collective calls on the communicator (paper 000, sec. 3.2.4).
  Without this call every rank of the communicator is a worker, in rank order.

  Level: intermediate

.seealso: `DDPartitionSetShape()`, `DDPartitionIsActive()`
@*/
PetscErrorCode DDPartitionSetRanks(DDPartition part, PetscInt n, const PetscMPIInt ranks[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  PetscCheck(!part->setupcalled, PetscObjectComm((PetscObject)part), PETSC_ERR_ARG_WRONGSTATE, "Cannot change the ranks of a partition after DDPartitionSetUp()");
  PetscCheck(n >= 1, PetscObjectComm((PetscObject)part), PETSC_ERR_ARG_OUTOFRANGE, "Number of ranks %" PetscInt_FMT " must be positive", n);
  PetscCall(PetscFree(part->ranks));
  PetscCall(PetscMalloc1(n, &part->ranks));
  for (PetscInt i = 0; i < n; i++) part->ranks[i] = ranks ? ranks[i] : (PetscMPIInt)i;
  part->nranksset = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionSetFromOptions - Sets the partition's shape from the options database

  Collective

  Options Database Keys:
+ -partition_shape <p0,p1,...> - workers along each dimension
- -partition_view - view the partition after set up

  Level: beginner

.seealso: `DDPartitionSetShape()`
@*/
PetscErrorCode DDPartitionSetFromOptions(DDPartition part)
DD_CXX_TRY
{
  PetscInt  shape[DD_MAX_DIM], n = DD_MAX_DIM;
  PetscBool flg;

  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  PetscObjectOptionsBegin((PetscObject)part);
  for (PetscInt k = 0; k < part->order; k++) shape[k] = part->shape[k];
  PetscCall(PetscOptionsIntArray("-partition_shape", "Workers along each dimension", "DDPartitionSetShape", shape, &n, &flg));
  if (flg) PetscCall(DDPartitionSetShape(part, n, shape));
  PetscOptionsEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionSetUp - Checks the partition against its communicator and builds the workers' communicator

  Collective

  Notes:
  Errors (on every rank) when the product of the shape does not match the number of ranks
  given (or the size of the communicator when no ranks were given), when a rank is listed
  twice or does not exist, or when the ranks disagree on the shape.

  Level: beginner

.seealso: `DDPartitionCreate()`, `DDPartitionSetShape()`
@*/
PetscErrorCode DDPartitionSetUp(DDPartition part)
DD_CXX_TRY
{
  MPI_Comm    comm;
  PetscMPIInt size, rank;
  PetscInt    P = 1, nr;
  char        sh[128];

  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  if (part->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  comm = PetscObjectComm((PetscObject)part);
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  for (PetscInt k = 0; k < part->order; k++) P *= part->shape[k];
  PetscCall(DDShapeToString_Private(part->order, part->shape, sh, sizeof(sh)));
  { /* the ranks must agree on the shape: a mismatch would hang later collectives */
    PetscInt mine[DD_MAX_DIM + 1], mx[DD_MAX_DIM + 1], mn[DD_MAX_DIM + 1];
    mine[0] = part->order;
    for (PetscInt k = 0; k < part->order; k++) mine[k + 1] = part->shape[k];
    for (PetscInt k = part->order; k < DD_MAX_DIM; k++) mine[k + 1] = 0;
    PetscCall(MPIU_Allreduce(mine, mx, DD_MAX_DIM + 1, MPIU_INT, MPI_MAX, comm));
    PetscCall(MPIU_Allreduce(mine, mn, DD_MAX_DIM + 1, MPIU_INT, MPI_MIN, comm));
    PetscBool same = PETSC_TRUE;
    for (PetscInt k = 0; k < DD_MAX_DIM + 1; k++) same = (PetscBool)(same && mx[k] == mn[k]);
    PetscCheck(same, PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "Partition shape differs between ranks (rank %d has %s)", rank, part->order > 0 ? sh : "no shape");
  }
  /* after the comparison: a rank without a shape fails with the others */
  PetscCheck(part->order > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Partition has no shape: call DDPartitionSetShape() or give -partition_shape");
  { /* the ranks must agree on the workers' ranks too: a count that differed would leave some ranks in the collectives below, an order that differed would give two ranks one piece */
    std::string r = part->nranksset >= 0 ? std::to_string((long long)part->nranksset) + " ranks:" : std::string("the communicator's ranks");
    for (PetscInt i = 0; part->nranksset >= 0 && i < part->nranksset; i++) r += " " + std::to_string(part->ranks[i]);
    PetscCall(DDCheckSameString(comm, "The ranks of a partition (DDPartitionSetRanks())", r.c_str()));
  }
  nr = part->nranksset >= 0 ? part->nranksset : size;
  PetscCheck(P == nr, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Partition shape %s has %" PetscInt_FMT " workers but %" PetscInt_FMT " ranks were given%s", sh, P, nr, part->nranksset >= 0 ? " to DDPartitionSetRanks()" : " (the size of the communicator)");
  if (part->nranksset < 0) {
    PetscCall(PetscMalloc1(P, &part->ranks));
    for (PetscInt i = 0; i < P; i++) part->ranks[i] = (PetscMPIInt)i;
  } else {
    PetscBool *seen;
    PetscCall(PetscCalloc1(size, &seen));
    for (PetscInt i = 0; i < P; i++) {
      PetscCheck(part->ranks[i] >= 0 && part->ranks[i] < size, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Worker %" PetscInt_FMT " of partition %s is placed on rank %d, but the communicator has %d ranks", i, sh, part->ranks[i], size);
      PetscCheck(!seen[part->ranks[i]], PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Rank %d is given twice to partition %s", part->ranks[i], sh);
      seen[part->ranks[i]] = PETSC_TRUE;
    }
    PetscCall(PetscFree(seen));
  }
  part->size  = P;
  part->index = -1;
  for (PetscInt i = 0; i < P; i++)
    if (part->ranks[i] == rank) part->index = i;
  if (part->index >= 0) {
    PetscInt r = part->index;
    for (PetscInt k = part->order - 1; k >= 0; k--) {
      part->coords[k] = r % part->shape[k];
      r /= part->shape[k];
    }
  } else
    for (PetscInt k = 0; k < part->order; k++) part->coords[k] = -1;
  PetscCallMPI(MPI_Comm_split(comm, part->index >= 0 ? 0 : MPI_UNDEFINED, (PetscMPIInt)part->index, &part->subcomm));
  part->setupcalled = PETSC_TRUE;
  PetscCall(DDPartitionViewFromOptions(part, NULL, "-partition_view"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionCreateCartesian - Creates and sets up a partition in one call

  Collective

  Input Parameters:
+ comm   - the communicator
. order  - number of dimensions
. shape  - workers per dimension
. nranks - number of ranks given in ranks, or `PETSC_DECIDE` for all ranks of comm
- ranks  - the ranks holding the workers in worker order, or NULL for 0..nranks-1

  Output Parameter:
. part - the partition

  Level: beginner

.seealso: `DDPartitionCreate()`, `DDPartitionSetRanks()`
@*/
PetscErrorCode DDPartitionCreateCartesian(MPI_Comm comm, PetscInt order, const PetscInt shape[], PetscInt nranks, const PetscMPIInt ranks[], DDPartition *part)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCreate(comm, part));
  PetscCall(DDPartitionSetShape(*part, order, shape));
  if (nranks != PETSC_DECIDE) PetscCall(DDPartitionSetRanks(*part, nranks, ranks));
  PetscCall(DDPartitionSetUp(*part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionCreateFromDMDA - Creates the partition of a DMDA's process grid

  Collective

  Input Parameters:
+ da   - the DMDA
- lead - number of leading size-1 dimensions to prepend (2 for tensors N x C x spatial)

  Output Parameter:
. part - partition of order lead + dim with shape (1,...,1, pz, py, px); worker numbering
         equals DMDA's rank numbering (x fastest)

  Level: intermediate

.seealso: `DDTensorCreateFromDMDA()`
@*/
PetscErrorCode DDPartitionCreateFromDMDA(DM da, PetscInt lead, DDPartition *part)
DD_CXX_TRY
{
  PetscInt dim, m, n, p, shape[DD_MAX_DIM];

  PetscFunctionBegin;
  DDCheckHeader(da, DM_CLASSID, 1);
  DDCheckPointer(part, 3);
  PetscCall(DMDAGetInfo(da, &dim, NULL, NULL, NULL, &m, &n, &p, NULL, NULL, NULL, NULL, NULL, NULL));
  PetscCheck(lead >= 0 && lead + dim <= DD_MAX_DIM, PetscObjectComm((PetscObject)da), PETSC_ERR_ARG_OUTOFRANGE, "Number of leading dimensions %" PetscInt_FMT " is out of range", lead);
  for (PetscInt k = 0; k < lead; k++) shape[k] = 1;
  if (dim == 1) shape[lead] = m;
  else if (dim == 2) {
    shape[lead]     = n;
    shape[lead + 1] = m;
  } else {
    shape[lead]     = p;
    shape[lead + 1] = n;
    shape[lead + 2] = m;
  }
  PetscCall(DDPartitionCreateCartesian(PetscObjectComm((PetscObject)da), lead + dim, shape, PETSC_DECIDE, NULL, part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionDestroy - Destroys a partition

  Collective

  Level: beginner

.seealso: `DDPartitionCreate()`
@*/
PetscErrorCode DDPartitionDestroy(DDPartition *part)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckPointer(part, 1);
  if (!*part) PetscFunctionReturn(PETSC_SUCCESS);
  DDCheckHeader(*part, DD_PARTITION_CLASSID, 1);
  if (--((PetscObject)(*part))->refct > 0) {
    *part = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if ((*part)->subcomm != MPI_COMM_NULL) PetscCallMPI(MPI_Comm_free(&(*part)->subcomm));
  PetscCall(PetscFree((*part)->ranks));
  PetscCall(PetscHeaderDestroy(part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPartitionView - Prints the partition: shape, and each worker's rank and coordinates

  Collective

  Level: beginner

.seealso: `DDPartitionCreate()`
@*/
PetscErrorCode DDPartitionView(DDPartition part, PetscViewer viewer)
DD_CXX_TRY
{
  PetscBool iascii;
  char      sh[128];

  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)part), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDShapeToString_Private(part->order, part->shape, sh, sizeof(sh)));
  PetscCall(PetscObjectPrintClassNamePrefixType((PetscObject)part, viewer));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  PetscCall(PetscViewerASCIIPrintf(viewer, "shape %s, %" PetscInt_FMT " workers\n", sh, part->size));
  if (part->setupcalled) {
    PetscMPIInt rank;
    PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)part), &rank));
    PetscCall(PetscViewerASCIIPushSynchronized(viewer));
    if (part->index >= 0) {
      PetscCall(DDShapeToString_Private(part->order, part->coords, sh, sizeof(sh)));
      PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] worker %" PetscInt_FMT " at coordinates (%s)\n", rank, part->index, sh));
    } else PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] idle\n", rank));
    PetscCall(PetscViewerFlush(viewer));
    PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  }
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPartitionViewFromOptions - Views the partition if an option asks for it

  Collective

  Level: intermediate

.seealso: `DDPartitionView()`, `PetscObjectViewFromOptions()`
@*/
PetscErrorCode DDPartitionViewFromOptions(DDPartition part, PetscObject obj, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectViewFromOptions((PetscObject)part, obj, name));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDPartitionCheckSetUp(DDPartition part)
{
  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  PetscCheck(part->setupcalled, PetscObjectComm((PetscObject)part), PETSC_ERR_ARG_WRONGSTATE, "Call DDPartitionSetUp() first");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPartitionGetOrder - Number of dimensions of the partition

  Not collective

  Level: beginner

.seealso: `DDPartitionGetShape()`
@*/
PetscErrorCode DDPartitionGetOrder(DDPartition part, PetscInt *order)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  DDCheckPointer(order, 2);
  *order = part->order;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPartitionGetShape - Workers along each dimension

  Not collective

  Level: beginner

.seealso: `DDPartitionGetOrder()`
@*/
PetscErrorCode DDPartitionGetShape(DDPartition part, const PetscInt *shape[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(part, DD_PARTITION_CLASSID, 1);
  DDCheckPointer(shape, 2);
  *shape = part->shape;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionGetSize - Number of workers (product of the shape)

  Not collective

  Level: beginner

.seealso: `DDPartitionGetShape()`
@*/
PetscErrorCode DDPartitionGetSize(DDPartition part, PetscInt *size)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(size, 2);
  *size = part->size;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPartitionGetRanks - The communicator rank of every worker, in worker order

  Not collective

  Level: intermediate

.seealso: `DDPartitionSetRanks()`
@*/
PetscErrorCode DDPartitionGetRanks(DDPartition part, const PetscMPIInt *ranks[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(ranks, 2);
  *ranks = part->ranks;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionIsActive - Whether this rank is a worker of the partition

  Not collective

  Level: beginner

.seealso: `DDPartitionGetIndex()`
@*/
PetscErrorCode DDPartitionIsActive(DDPartition part, PetscBool *active)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(active, 2);
  *active = part->index >= 0 ? PETSC_TRUE : PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionGetIndex - This rank's worker number (C order of its coordinates), -1 if idle

  Not collective

  Level: intermediate

.seealso: `DDPartitionGetCoordinates()`
@*/
PetscErrorCode DDPartitionGetIndex(DDPartition part, PetscInt *index)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(index, 2);
  *index = part->index;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionGetCoordinates - This rank's coordinates in the grid (all -1 if idle)

  Not collective

  Level: beginner

.seealso: `DDPartitionGetRankOfCoordinates()`
@*/
PetscErrorCode DDPartitionGetCoordinates(DDPartition part, PetscInt coords[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(coords, 2);
  for (PetscInt k = 0; k < part->order; k++) coords[k] = part->coords[k];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionGetRankOfCoordinates - The communicator rank of the worker at given coordinates

  Not collective

  Level: intermediate

.seealso: `DDPartitionGetCoordinates()`
@*/
PetscErrorCode DDPartitionGetRankOfCoordinates(DDPartition part, const PetscInt coords[], PetscMPIInt *rank)
DD_CXX_TRY
{
  PetscInt idx = 0;

  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(coords, 2);
  DDCheckPointer(rank, 3);
  for (PetscInt k = 0; k < part->order; k++) {
    PetscCheck(coords[k] >= 0 && coords[k] < part->shape[k], PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Coordinate %" PetscInt_FMT " in dimension %" PetscInt_FMT " is outside [0, %" PetscInt_FMT ")", coords[k], k, part->shape[k]);
    idx = idx * part->shape[k] + coords[k];
  }
  *rank = part->ranks[idx];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionGetNeighbor - The rank of the worker displaced from this one along a dimension

  Not collective

  Input Parameters:
+ part - the partition
. dim  - the dimension
- disp - the displacement (-1 for the left neighbor, +1 for the right one)

  Output Parameter:
. rank - the communicator rank of the neighbor, or -1 if there is none (or this rank is idle)

  Level: intermediate

.seealso: `DDPartitionGetCoordinates()`
@*/
PetscErrorCode DDPartitionGetNeighbor(DDPartition part, PetscInt dim, PetscInt disp, PetscMPIInt *rank)
DD_CXX_TRY
{
  PetscInt c[DD_MAX_DIM];

  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  PetscCheck(dim >= 0 && dim < part->order, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " is outside [0, %" PetscInt_FMT ")", dim, part->order);
  DDCheckPointer(rank, 4);
  *rank = -1;
  if (part->index < 0) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt k = 0; k < part->order; k++) c[k] = part->coords[k];
  c[dim] += disp;
  if (c[dim] < 0 || c[dim] >= part->shape[dim]) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDPartitionGetRankOfCoordinates(part, c, rank));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionGetSubComm - The communicator of the workers (ranked by worker index)

  Not collective

  Output Parameter:
. comm - the workers' communicator; `MPI_COMM_NULL` on idle ranks. Do not free it.

  Level: intermediate

.seealso: `DDPartitionIsActive()`
@*/
PetscErrorCode DDPartitionGetSubComm(DDPartition part, MPI_Comm *comm)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(comm, 2);
  *comm = part->subcomm;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionCreateSubPartition - The sub-partition along chosen dimensions that contains this rank

  Collective

  Input Parameters:
+ part - the partition
- keep - for each dimension, whether the sub-partition extends along it

  Output Parameter:
. sub - a partition of the same order and communicator, whose shape is part's along the kept
        dimensions and 1 elsewhere; its workers are the workers of part that share this
        rank's coordinates in the dimensions not kept. Idle ranks get an empty (all idle)
        sub-partition of the same shape.

  Notes:
  Different ranks get different sub-partitions (one per slice), as MPI_Comm_split() gives
  different communicators: this is the group over which, e.g., ALLSUMREDUCE along the kept
  dimensions reduces (paper 000, sec. 3.2.3).

  Level: intermediate

.seealso: `DDPartitionCreate()`
@*/
PetscErrorCode DDPartitionCreateSubPartition(DDPartition part, const PetscBool keep[], DDPartition *sub)
DD_CXX_TRY
{
  PetscInt    shape[DD_MAX_DIM], n = 1, cnt = 0;
  PetscMPIInt *ranks;
  DDPartition s;
  MPI_Comm    comm = PetscObjectComm((PetscObject)part);

  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(part));
  DDCheckPointer(keep, 2);
  DDCheckPointer(sub, 3);
  for (PetscInt k = 0; k < part->order; k++) {
    shape[k] = keep[k] ? part->shape[k] : 1;
    n *= shape[k];
  }
  PetscCall(DDPartitionCreate(comm, &s));
  PetscCall(DDPartitionSetShape(s, part->order, shape));
  PetscCall(PetscMalloc1(n, &ranks));
  if (part->index >= 0) {
    /* enumerate the slice through this rank in C order of the kept coordinates */
    for (PetscInt i = 0; i < n; i++) {
      PetscInt c[DD_MAX_DIM], r = i;
      for (PetscInt k = part->order - 1; k >= 0; k--) {
        c[k] = keep[k] ? r % shape[k] : part->coords[k];
        if (keep[k]) r /= shape[k];
      }
      PetscCall(DDPartitionGetRankOfCoordinates(part, c, &ranks[cnt++]));
    }
  } else {
    /* idle: place the (inactive) sub-partition on its own; no rank of it is this one */
    cnt = 0;
  }
  s->size = n;
  if (part->index >= 0) {
    s->ranks = ranks;
    s->nranksset = n;
  } else {
    PetscCall(PetscFree(ranks));
    PetscCall(PetscMalloc1(n, &s->ranks));
    for (PetscInt i = 0; i < n; i++) s->ranks[i] = -1;
    s->nranksset = n;
  }
  /* set up by hand: sub-partitions differ between ranks, so the generic checks do not apply */
  s->index = -1;
  for (PetscInt k = 0; k < s->order; k++) s->coords[k] = -1;
  if (part->index >= 0) {
    PetscMPIInt rank;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    for (PetscInt i = 0; i < n; i++)
      if (s->ranks[i] == rank) s->index = i;
    PetscInt r = s->index;
    for (PetscInt k = s->order - 1; k >= 0; k--) {
      s->coords[k] = r % s->shape[k];
      r /= s->shape[k];
    }
  }
  { /* color = the C-order index of the coordinates not kept */
    PetscMPIInt color = MPI_UNDEFINED;
    if (part->index >= 0) {
      PetscInt c = 0;
      for (PetscInt k = 0; k < part->order; k++)
        if (!keep[k]) c = c * part->shape[k] + part->coords[k];
      color = (PetscMPIInt)c;
    }
    PetscCallMPI(MPI_Comm_split(comm, color, (PetscMPIInt)s->index, &s->subcomm));
  }
  s->setupcalled = PETSC_TRUE;
  (void)cnt;
  *sub = s;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionEqual - Whether two partitions have the same shape and the same workers on the same ranks

  Not collective

  Level: intermediate

.seealso: `DDPartitionCreate()`
@*/
PetscErrorCode DDPartitionEqual(DDPartition a, DDPartition b, PetscBool *eq)
DD_CXX_TRY
{
  PetscMPIInt cmp;

  PetscFunctionBegin;
  PetscCall(DDPartitionCheckSetUp(a));
  PetscCall(DDPartitionCheckSetUp(b));
  DDCheckPointer(eq, 3);
  *eq = PETSC_FALSE;
  if (a == b) {
    *eq = PETSC_TRUE;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCallMPI(MPI_Comm_compare(PetscObjectComm((PetscObject)a), PetscObjectComm((PetscObject)b), &cmp));
  if (cmp != MPI_IDENT && cmp != MPI_CONGRUENT) PetscFunctionReturn(PETSC_SUCCESS);
  if (a->order != b->order) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt k = 0; k < a->order; k++)
    if (a->shape[k] != b->shape[k]) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt i = 0; i < a->size; i++)
    if (a->ranks[i] != b->ranks[i]) PetscFunctionReturn(PETSC_SUCCESS);
  *eq = PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Compare partition shapes aligned at the trailing dimension (NumPy style, paper 000 sec. 3.2.1) */
static PetscErrorCode DDPartitionCheckRule(DDPartition px, DDPartition py, PetscBool bcast, PetscBool *ok, PetscInt *baddim)
{
  PetscInt d = PetscMax(px->order, py->order);

  PetscFunctionBegin;
  *ok = PETSC_TRUE;
  if (baddim) *baddim = -1;
  for (PetscInt k = 0; k < d; k++) {
    PetscInt kx = k - (d - px->order), ky = k - (d - py->order);
    PetscInt sx = kx >= 0 ? px->shape[kx] : 1, sy = ky >= 0 ? py->shape[ky] : 1;
    PetscBool good = (PetscBool)(sx == sy || (bcast ? sx == 1 : sy == 1));
    if (!good) {
      *ok = PETSC_FALSE;
      if (baddim) *baddim = ky >= 0 ? ky : kx;
      break;
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPartitionCheckBroadcast - Whether a tensor on px can be broadcast onto py

  Not collective

  Output Parameters:
+ ok     - `PETSC_TRUE` if for every dimension k, Px_k = Py_k or Px_k = 1 (after prepending
           size-1 dimensions to the shorter shape; paper 000, sec. 3.2.1)
- baddim - the first dimension (of the longer partition) breaking the rule, or -1

  Level: intermediate

.seealso: `DDPartitionCheckReduce()`
@*/
PetscErrorCode DDPartitionCheckBroadcast(DDPartition px, DDPartition py, PetscBool *ok, PetscInt *baddim)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(px, DD_PARTITION_CLASSID, 1);
  DDCheckHeader(py, DD_PARTITION_CLASSID, 2);
  DDCheckPointer(ok, 3);
  PetscCall(DDPartitionCheckRule(px, py, PETSC_TRUE, ok, baddim));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPartitionCheckReduce - Whether a tensor on px can be sum-reduced onto py

  Not collective

  Output Parameters:
+ ok     - `PETSC_TRUE` if for every dimension k, Px_k = Py_k or Py_k = 1 (paper 000, sec. 3.2.2)
- baddim - the first dimension breaking the rule, or -1

  Level: intermediate

.seealso: `DDPartitionCheckBroadcast()`
@*/
PetscErrorCode DDPartitionCheckReduce(DDPartition px, DDPartition py, PetscBool *ok, PetscInt *baddim)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(px, DD_PARTITION_CLASSID, 1);
  DDCheckHeader(py, DD_PARTITION_CLASSID, 2);
  DDCheckPointer(ok, 3);
  PetscCall(DDPartitionCheckRule(px, py, PETSC_FALSE, ok, baddim));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
