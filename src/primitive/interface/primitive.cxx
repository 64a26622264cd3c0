/*
  DDPrimitive: the object, its type registry, forward/adjoint application with log events,
  the shell Mat and the adjoint test (paper 000, eq. 26).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <tensor/layout.hpp>
#include <sys/ddsysimpl.h>
#include <primitive/exchange.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <primitive/splitguard.hpp>
#include <primitive/sfutil.hpp>
#include <primitive/settings.hpp>
#include <tensor/argcheck.hpp>
#include <ddmodel.h>
#include <vector>
#include <map>
#include <string>

using namespace ddnn;

PetscClassId      DD_PRIMITIVE_CLASSID;
PetscFunctionList DDPrimitiveList          = NULL;
static PetscBool  DDPrimitiveRegisterAllCalled = PETSC_FALSE;
const char *const DDPaddingModes[]         = {"zeros", "reflect", "replicate", "circular", "DDPaddingMode", "DD_PADDING_", nullptr};

static std::map<std::string, std::pair<PetscLogEvent, PetscLogEvent>> &PrimitiveEvents()
{
  static std::map<std::string, std::pair<PetscLogEvent, PetscLogEvent>> m;
  return m;
}

PetscErrorCode DDPrimitiveInitializePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Primitive", &DD_PRIMITIVE_CLASSID));
  PrimitiveEvents().clear();
  DDPrimitiveRegisterAllCalled = PETSC_FALSE;
  PetscCall(DDPrimitiveRegisterAll());
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDPrimitiveFinalizePackage(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscFunctionListDestroy(&DDPrimitiveList));
  DDPrimitiveRegisterAllCalled = PETSC_FALSE;
  PrimitiveEvents().clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* One forward and one adjoint log event per primitive type: -log_view shows where time goes */
PetscErrorCode DDPrimitiveGetEvents_Private(const char type[], PetscLogEvent *fwd, PetscLogEvent *adj)
DD_CXX_TRY
{
  PetscFunctionBegin;
  auto it = PrimitiveEvents().find(type);
  if (it == PrimitiveEvents().end()) {
    char          name[64];
    PetscLogEvent f, a;
    PetscCall(PetscSNPrintf(name, sizeof(name), "DDPrim%s", type));
    name[6] = (char)toupper(name[6]);
    PetscCall(PetscLogEventRegister(name, DD_PRIMITIVE_CLASSID, &f));
    PetscCall(PetscStrlcat(name, "Adj", sizeof(name)));
    PetscCall(PetscLogEventRegister(name, DD_PRIMITIVE_CLASSID, &a));
    it = PrimitiveEvents().emplace(type, std::make_pair(f, a)).first;
  }
  *fwd = it->second.first;
  *adj = it->second.second;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPrimitiveRegister - Adds a primitive type

  Not collective

  Input Parameters:
+ name     - the type name, used with `DDPrimitiveSetType()` and -primitive_type
- function - the constructor, which fills the ops table and data of a new primitive

  Level: advanced

.seealso: `DDPrimitiveSetType()`, `DDPrimitiveRegisterAll()`
@*/
PetscErrorCode DDPrimitiveRegister(const char name[], PetscErrorCode (*function)(DDPrimitive))
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDInitializePackage());
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, name, function));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Broadcast(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_SumReduce(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_AllSumReduce(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Repartition(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Halo(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_Scatter(DDPrimitive);
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_FFT(DDPrimitive);

/*@C
  DDPrimitiveRegisterAll - Registers the built-in primitive types (broadcast, sumreduce,
  allsumreduce, repartition, halo)

  Not collective

  Notes:
  Called by `DDInitializePackage()`; calling it again does nothing. Types of the user are added
  with `DDPrimitiveRegister()`.

  Level: developer

.seealso: `DDPrimitiveRegister()`
@*/
PetscErrorCode DDPrimitiveRegisterAll(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (DDPrimitiveRegisterAllCalled) PetscFunctionReturn(PETSC_SUCCESS);
  DDPrimitiveRegisterAllCalled = PETSC_TRUE;
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVEBROADCAST, DDPrimitiveCreate_Broadcast));
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVESUMREDUCE, DDPrimitiveCreate_SumReduce));
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVEALLSUMREDUCE, DDPrimitiveCreate_AllSumReduce));
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVEREPARTITION, DDPrimitiveCreate_Repartition));
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVEHALO, DDPrimitiveCreate_Halo));
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVESCATTER, DDPrimitiveCreate_Scatter));
  PetscCall(PetscFunctionListAdd(&DDPrimitiveList, DDPRIMITIVEFFT, DDPrimitiveCreate_FFT));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveCreate - Creates a data-movement primitive

  Collective

  Input Parameter:
. comm - the communicator of the tensors it will move

  Output Parameter:
. prim - the primitive; choose its type with `DDPrimitiveSetType()` or -primitive_type

  Level: beginner

.seealso: `DDPrimitiveSetType()`, `DDPrimitiveSetUp()`, `DDPrimitiveApply()`
@*/
PetscErrorCode DDPrimitiveCreate(MPI_Comm comm, DDPrimitive *prim)
DD_CXX_TRY
{
  DDPrimitive p;

  PetscFunctionBegin;
  DDCheckPointer(prim, 2);
  PetscCall(DDInitializePackage());
  PetscCall(PetscHeaderCreate(p, DD_PRIMITIVE_CLASSID, "DDPrimitive", "Data movement primitive", "DDPrimitive", comm, DDPrimitiveDestroy, DDPrimitiveView));
  *prim = p;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDPrimitiveReset(DDPrimitive p)
{
  PetscFunctionBegin;
  if (p->ops->reset) PetscCall((*p->ops->reset)(p));
  PetscCall(DDTensorDestroy(&p->xtmpl));
  PetscCall(DDTensorDestroy(&p->ytmpl));
  PetscCall(DDTensorDestroy(&p->xref));
  PetscCall(DDTensorDestroy(&p->yref));
  PetscCall(MatDestroy(&p->mat));
  p->setupcalled = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDPrimitiveSetType - Chooses the primitive's type

  Collective

  Input Parameters:
+ prim - the primitive
- type - `DDPRIMITIVEBROADCAST`, `DDPRIMITIVESUMREDUCE`, `DDPRIMITIVEALLSUMREDUCE`,
         `DDPRIMITIVEREPARTITION`, `DDPRIMITIVEHALO` or a registered type

  Options Database Key:
. -primitive_type <type> - the type

  Notes:
  Every rank of the primitive's communicator must call it (one small all-reduce): a type that is
  unknown on any rank is an error (`PETSC_ERR_ARG_UNKNOWN_TYPE`) on every rank. Types that differ
  between ranks are caught by `DDPrimitiveSetUp()`.

  Level: beginner

.seealso: `DDPrimitiveCreate()`, `DDPrimitiveRegister()`
@*/
PetscErrorCode DDPrimitiveSetType(DDPrimitive prim, DDPrimitiveType type)
DD_CXX_TRY
{
  PetscErrorCode (*create)(DDPrimitive);
  PetscBool match;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  DDCheckPointer(type, 2);
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, type, &match));
  create = NULL;
  if (!match) PetscCall(PetscFunctionListFind(DDPrimitiveList, type, &create));
  { /* on every rank, before any returns: a type unknown on one rank must not leave the others in a later collective */
    char known[1024] = "";
    if (!match && !create) PetscCall(DDFunctionListKnownTypes_Private(DDPrimitiveList, known, sizeof(known)));
    DDCheckAll(PetscObjectComm((PetscObject)prim), match || create, PETSC_ERR_ARG_UNKNOWN_TYPE, "Unknown primitive type \"%s\" (known types: %s)", type, known);
  }
  if (match) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDPrimitiveReset(prim));
  if (prim->ops->destroy) PetscCall((*prim->ops->destroy)(prim));
  PetscCall(PetscMemzero(prim->ops, sizeof(struct _DDPrimitiveOps)));
  PetscCall(PetscObjectComposeFunction((PetscObject)prim, DDPRIMITIVE_SETTINGS_C, NULL)); /* the new type composes its own */
  prim->data      = NULL;
  prim->inplace   = PETSC_FALSE;
  prim->allowsame = PETSC_FALSE;
  prim->device    = PETSC_FALSE;
  PetscCall(PetscObjectChangeTypeName((PetscObject)prim, type));
  PetscCall(DDPrimitiveGetEvents_Private(type, &prim->evfwd, &prim->evadj));
  PetscCall((*create)(prim));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPrimitiveGetType - The primitive's type

  Not collective

  Level: beginner

.seealso: `DDPrimitiveSetType()`
@*/
PetscErrorCode DDPrimitiveGetType(DDPrimitive prim, DDPrimitiveType *type)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  DDCheckPointer(type, 2);
  *type = ((PetscObject)prim)->type_name;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPrimitiveSetOptionsPrefix - Sets the prefix of the primitive's options

  Logically collective

  Level: intermediate

.seealso: `DDPrimitiveSetFromOptions()`
@*/
PetscErrorCode DDPrimitiveSetOptionsPrefix(DDPrimitive prim, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectSetOptionsPrefix((PetscObject)prim, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPrimitiveAppendOptionsPrefix - Appends to the prefix of the primitive's options

  Logically collective

  Level: intermediate

.seealso: `DDPrimitiveSetOptionsPrefix()`
@*/
PetscErrorCode DDPrimitiveAppendOptionsPrefix(DDPrimitive prim, const char prefix[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectAppendOptionsPrefix((PetscObject)prim, prefix));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveSetFromOptions - Configures the primitive from the options database

  Collective

  Options Database Keys:
+ -primitive_type <type> - the type
- -primitive_view - view after set-up
  and the type's own options (see the type's man page)

  Level: beginner

.seealso: `DDPrimitiveSetType()`
@*/
PetscErrorCode DDPrimitiveSetFromOptions(DDPrimitive prim)
DD_CXX_TRY
{
  char      type[256];
  PetscBool flg;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscObjectOptionsBegin((PetscObject)prim);
  PetscCall(PetscOptionsFList("-primitive_type", "Primitive type", "DDPrimitiveSetType", DDPrimitiveList, ((PetscObject)prim)->type_name ? ((PetscObject)prim)->type_name : DDPRIMITIVEREPARTITION, type, sizeof(type), &flg));
  /* DDPrimitiveSetType() is collective: every rank calls it, whether the option was given to it or not */
  PetscCall(DDPrimitiveSetType(prim, flg ? type : (((PetscObject)prim)->type_name ? ((PetscObject)prim)->type_name : DDPRIMITIVEREPARTITION)));
  if (prim->ops->setfromoptions) PetscCall((*prim->ops->setfromoptions)(prim, PetscOptionsObject));
  PetscCall(PetscObjectProcessOptionsHandlers((PetscObject)prim, PetscOptionsObject));
  PetscOptionsEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  The primitive's type and settings must be the same on every rank of its communicator: a type
  that differs leaves the ranks in different collectives (they wait forever), settings that differ
  (all-sum-reduce dimensions, a halo's kernel, stride, padding, output ranges, padding mode or
  value) give outputs that overlap or that nobody owns. One DDCheckSameString() per set-up: every
  rank raises the error, which names the type and the first setting that differs. The types say
  what must agree through the function composed as DDPRIMITIVE_SETTINGS_C (rank-local inputs such
  as a halo's window or a scatter's index map are not part of it).
*/
static PetscErrorCode DDPrimitiveCheckSettings(DDPrimitive prim)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)prim);
  PetscMPIInt size;
  const char *tn  = ((PetscObject)prim)->type_name;
  const char *pfx = ((PetscObject)prim)->prefix;
  std::string d;
  char        what[PETSC_MAX_OPTION_NAME + 160];
  PetscErrorCode (*f)(DDPrimitive, std::string *) = NULL;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  if (size == 1 || ddnn::PricingSkipChecks()) PetscFunctionReturn(PETSC_SUCCESS); /* a trial set-up of -net_distribution auto: checked at its first set-up */
  d = std::string("type ") + (tn ? tn : "(none)") + "\n";
  PetscCall(PetscObjectQueryFunction((PetscObject)prim, DDPRIMITIVE_SETTINGS_C, &f));
  if (f) PetscCall((*f)(prim, &d));
  PetscCall(PetscSNPrintf(what, sizeof(what), "The type or settings of a primitive%s%s (DDPrimitiveSetType(), the type's Set functions, -primitive_ options)", pfx ? " with prefix " : "", pfx ? pfx : ""));
  PetscCall(DDCheckSameString(comm, what, d.c_str()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveSetUp - Builds the communication pattern between the layouts of two tensors

  Collective

  Input Parameters:
+ prim - the primitive
. x    - a tensor laid out as the inputs will be (partition, shape, ownership, halo, format, type)
- y    - a tensor laid out as the outputs will be; NULL (or x) for the in-place halo exchange

  Options Database Keys:
+ -dd_exchange_cma <bool>       - between ranks of one node, one copy by the kernel from process to process (`process_vm_readv`/`writev`) instead of MPI messages (default true where the system allows it)
. -dd_exchange_direct <bool>    - host tensors (and message buffers) set up while this is true live in a memory file each process shares with its on-node partners, which read them with plain loads: no system call, no second copy (default true where `PETSC_COMM_WORLD` has more than one rank and the launcher does not say this rank is alone on its node, false at one rank; needs what -dd_exchange_cma needs, `memfd_create()` and no address-space limit)
. -dd_exchange_fuse_fill <bool> - the halo's constant padding filled in the pass of a received face where they share rows (default true)
- -dd_exchange_mpi_types <bool> - MPI derived datatypes instead of hand packing for long runs on the MPI path (default true)

  Notes:
  The primitive may be applied to any tensors with exactly these layouts. The halo
  exchange grows x's halo if it is too narrow for the requested window
  (`DDTensorEnsureHalo()`). Errors name the partition dimension, rank or shape at fault and
  are raised on every rank.

  The primitive's type and its settings must be the same on every rank (`DDCheckSameString()`,
  one small all-reduce per set-up, none per application): a type, all-sum-reduce dimensions, a
  halo's kernel size, stride, dilation, padding, output size or ranges
  (`DDPrimitiveHaloSetOutputRanges()`), padding mode or value, neighbors-only flag, or a scatter's
  zero-unmapped flag that differs between ranks is an error (`PETSC_ERR_ARG_INCOMP`) on every
  rank naming the first setting that differs and the two ranks' values. Rank-local inputs (a
  halo's `DDPrimitiveHaloSetWindow()`, a scatter's index map) may differ.

  With -dd_exchange_direct (the default with more than one rank), a pair of on-node ranks reads
  each other's storage in place where its runs average a cache line or more (H-split faces,
  channels-last and blocked faces, repartitions) and through the writer's packed buffer otherwise
  (plain W-split faces): results are the same bytes as through MPI. Storage the arena did not
  allocate (a tensor set up with the option off, an array placed from outside) goes by system call.
  What differs from private memory, and how it is kept from mattering:
.vb
  transparent huge pages  asked for (MADV_HUGEPAGE); the system grants them to shared memory only
                          where /sys/kernel/mm/transparent_hugepage/shmem_enabled is not "never"
  fork()                  a forked child does not inherit the arena (MADV_DONTFORK): a child that
                          touches tensor storage faults instead of sharing its parent's; fork then
                          exec is unaffected
  address-space limit     under RLIMIT_AS (ulimit -v) there is no arena; a limit set later refuses
                          the blocks that would exceed it: memory then comes from PetscCalloc,
                          which fails or succeeds as it would have
  memory exhausted        a block larger than the memory available (and free swap) is refused
                          before the system could call its out-of-memory killer: PetscCalloc again
  -malloc_dump            the arena's unfreed blocks are reported in a line of their own at
                          PetscFinalize(); valgrind's memcheck sees them as heap blocks
.ve
  Measured gains are in `bench/README.md` (bench_primitives).

  Device tensors (`DDTensorSetMemType()`): the halo, repartition, scatter, broadcast, sum-reduce
  and all-sum-reduce primitives take them. Their messages are packed and unpacked by device
  kernels and staged through page-locked host buffers (MPI is handed host memory only; MPI that
  takes device pointers and NCCL are not used yet); the rank's own part, the padding and the
  collectives' layout copies are device kernels. x and y must be in one memory, the same on every
  rank, and later applications must use tensors in that memory; the fft primitive takes host
  tensors only. Ranks that share a device take turns on it unless CUDA's Multi-Process Service
  runs (`bench/README.md`, bench_gpu_halo).

  Level: beginner

.seealso: `DDPrimitiveApply()`, `DDPrimitiveApplyAdjoint()`, `DDTensorSetMemType()`
@*/
PetscErrorCode DDPrimitiveSetUp(DDPrimitive prim, DDTensor x, DDTensor y)
DD_CXX_TRY
{
  MPI_Comm comm;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  comm = PetscObjectComm((PetscObject)prim);
  PetscCall(DDPrimitiveCheckSettings(prim)); /* first: a rank with another type (or none) fails with the others */
  PetscCheck(((PetscObject)prim)->type_name, comm, PETSC_ERR_ARG_WRONGSTATE, "Set the primitive's type first (DDPrimitiveSetType() or -primitive_type)");
  PetscCall(DDTensorCheckSetUp_Private(x, "DDPrimitiveSetUp"));
  if (prim->inplace) {
    PetscCheck(!y || y == x, comm, PETSC_ERR_ARG_WRONG, "The %s primitive works in place: pass the same tensor (or NULL) as output", ((PetscObject)prim)->type_name);
    y = x;
  } else {
    PetscCheck(y, comm, PETSC_ERR_ARG_NULL, "The %s primitive needs an output tensor", ((PetscObject)prim)->type_name);
    PetscCall(DDTensorCheckSetUp_Private(y, "DDPrimitiveSetUp"));
    PetscCheck(y != x || prim->allowsame, comm, PETSC_ERR_ARG_WRONG, "The %s primitive cannot work in place", ((PetscObject)prim)->type_name);
    PetscCheck(x->dtype == y->dtype, comm, PETSC_ERR_ARG_INCOMP, "Input and output data types differ (%s and %s)", DDDataTypes[x->dtype], DDDataTypes[y->dtype]);
  }
  {
    PetscMPIInt cmp;
    PetscCallMPI(MPI_Comm_compare(comm, PetscObjectComm((PetscObject)x), &cmp));
    PetscCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, comm, PETSC_ERR_ARG_NOTSAMECOMM, "The tensors must live on the primitive's communicator");
  }
  {
    /* device tensors (issue 11 part 3): the types that move them say so; both tensors in one memory
       (a tensor's memory is the same on every rank, DDTensorSetUp() checks it: so are these errors) */
    const char *tn = ((PetscObject)prim)->type_name;
    PetscCheck(x->memtype == y->memtype, comm, PETSC_ERR_ARG_INCOMP, "The %s primitive's input is in %s memory and its output in %s memory: give it tensors in one memory (DDTensorSetMemType())", tn, DDMemTypes[x->memtype], DDMemTypes[y->memtype]);
    PetscCheck(x->memtype == DD_MEMTYPE_HOST || prim->device, comm, PETSC_ERR_SUP, "DDPrimitiveSetUp() does not support device tensors yet for the %s primitive (tensor %s is in %s memory); copy it to a host tensor", tn, ((PetscObject)x)->name ? ((PetscObject)x)->name : "(unnamed)", DDMemTypes[x->memtype]);
  }
  PetscCall(DDPrimitiveReset(prim));
  prim->memtype = x->memtype;
  {
    ddnn::ExchangeOwnerGuard owner(prim); /* the exchanges built here (and by nested primitives) are prim's, for the model */
    PetscCall((*prim->ops->setup)(prim, x, y));
  }
  prim->xhash = x->layouthash;
  prim->yhash = y->layouthash;
  PetscCall(PetscObjectReference((PetscObject)x));
  PetscCall(PetscObjectReference((PetscObject)y));
  prim->xref        = x;
  prim->yref        = y;
  prim->setupcalled = PETSC_TRUE;
  PetscCall(DDPrimitiveViewFromOptions(prim, NULL, "-primitive_view"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDPrimitiveCheckTensors(DDPrimitive prim, DDTensor in, DDTensor *out, PetscInt64 inhash, PetscInt64 outhash, const char fn[])
{
  MPI_Comm comm;

  PetscFunctionBegin;
  PetscCheck(prim, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "%s(): argument 1 (prim) is NULL", fn);
  PetscCheck(((PetscObject)prim)->classid == DD_PRIMITIVE_CLASSID, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "%s(): argument 1 (prim) is not a DDPrimitive (destroyed, or another kind of object)", fn);
  comm = PetscObjectComm((PetscObject)prim);
  PetscCheck(prim->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "%s: call DDPrimitiveSetUp() first", fn);
  PetscCall(DDTensorCheckSetUp_Private(in, fn));
  if (prim->inplace) {
    PetscCheck(!*out || *out == in, comm, PETSC_ERR_ARG_WRONG, "%s: the %s primitive works in place: pass the same tensor (or NULL) as output", fn, ((PetscObject)prim)->type_name);
    *out = in;
  }
  PetscCall(DDTensorCheckSetUp_Private(*out, fn));
  PetscCheck(in->memtype == prim->memtype && (*out)->memtype == prim->memtype, comm, PETSC_ERR_ARG_INCOMP, "%s: the %s primitive was set up for tensors in %s memory; these are in %s and %s memory", fn, ((PetscObject)prim)->type_name, DDMemTypes[prim->memtype], DDMemTypes[in->memtype], DDMemTypes[(*out)->memtype]);
  /* layout hashes are global: a mismatch on any rank is seen on every rank */
  PetscCheck(in->layouthash == inhash, comm, PETSC_ERR_ARG_INCOMP, "%s: the input tensor is not laid out as the one given to DDPrimitiveSetUp() (partition, shape, ownership, halo, format or data type differ on some rank)", fn);
  PetscCheck((*out)->layouthash == outhash, comm, PETSC_ERR_ARG_INCOMP, "%s: the output tensor is not laid out as the one given to DDPrimitiveSetUp() (partition, shape, ownership, halo, format or data type differ on some rank)", fn);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveApplyBegin - Starts y = F x

  Collective

  Notes:
  With `DDPrimitiveApplyEnd()` this lets work that does not depend on the communicated
  values run meanwhile: a convolution computes its interior while the halo is in flight
  (paper 003, sec. IV-A). For primitives without a split implementation, Begin does all.

  Level: intermediate

.seealso: `DDPrimitiveApplyEnd()`, `DDPrimitiveApply()`
@*/
PetscErrorCode DDPrimitiveApplyBegin(DDPrimitive prim, DDTensor x, DDTensor y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveCheckTensors(prim, x, &y, prim->xhash, prim->yhash, "DDPrimitiveApplyBegin"));
  PetscCheck(!prim->inflight, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "A previous Begin of this primitive has not been ended");
  PetscCall(PetscLogEventBegin(prim->evfwd, prim, x, y, 0));
  PetscCall((*prim->ops->applybegin)(prim, x, y));
  PetscCall(PetscLogEventEnd(prim->evfwd, prim, x, y, 0));
  prim->inflight = 1;
  if (!prim->inplace) PetscCall(DDTensorStateIncrease_Private(y)); /* a halo exchange leaves the bulk as it is */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveApplyEnd - Completes y = F x started by `DDPrimitiveApplyBegin()`

  Collective

  Level: intermediate

.seealso: `DDPrimitiveApplyBegin()`
@*/
PetscErrorCode DDPrimitiveApplyEnd(DDPrimitive prim, DDTensor x, DDTensor y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveCheckTensors(prim, x, &y, prim->xhash, prim->yhash, "DDPrimitiveApplyEnd"));
  PetscCheck(prim->inflight == 1, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "DDPrimitiveApplyEnd() without DDPrimitiveApplyBegin()");
  prim->inflight = 0; /* ended even if the End fails half-way: it has waited for messages that a second End would wait for again */
  PetscCall(PetscLogEventBegin(prim->evfwd, prim, x, y, 0));
  if (prim->ops->applyend) PetscCall((*prim->ops->applyend)(prim, x, y));
  PetscCall(PetscLogEventEnd(prim->evfwd, prim, x, y, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ends an application its layer's scope left begun (src/primitive/splitguard.hpp) */
ddnn::SplitApplyGuard::~SplitApplyGuard()
{
  if (!p_ || !p_->inflight) return;
  PetscPushErrorHandler(PetscReturnErrorHandler, NULL); /* quietly: the error being returned is reported already */
  if (p_->inflight == 1) (void)DDPrimitiveApplyEnd(p_, a_, b_);
  else (void)DDPrimitiveApplyAdjointEnd(p_, a_, b_);
  PetscPopErrorHandler();
}

/*@
  DDPrimitiveApply - y = F x, the forward data movement

  Collective

  Input Parameters:
+ prim - the primitive
. x    - input, laid out as at `DDPrimitiveSetUp()`
- y    - output, laid out as at `DDPrimitiveSetUp()` (NULL or x for the in-place halo exchange)

  Level: beginner

.seealso: `DDPrimitiveApplyAdjoint()`, `DDPrimitiveGetMat()`
@*/
PetscErrorCode DDPrimitiveApply(DDPrimitive prim, DDTensor x, DDTensor y)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveApplyBegin(prim, x, y));
  PetscCall(DDPrimitiveApplyEnd(prim, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveApplyAdjointBegin - Starts x = F* y

  Collective

  Level: intermediate

.seealso: `DDPrimitiveApplyAdjointEnd()`, `DDPrimitiveApplyAdjoint()`
@*/
PetscErrorCode DDPrimitiveApplyAdjointBegin(DDPrimitive prim, DDTensor y, DDTensor x)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveCheckTensors(prim, y, &x, prim->yhash, prim->xhash, "DDPrimitiveApplyAdjointBegin"));
  PetscCheck(!prim->inflight, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "A previous Begin of this primitive has not been ended");
  PetscCall(PetscLogEventBegin(prim->evadj, prim, y, x, 0));
  PetscCall((*prim->ops->adjointbegin)(prim, y, x));
  PetscCall(PetscLogEventEnd(prim->evadj, prim, y, x, 0));
  prim->inflight = 2;
  PetscCall(DDTensorStateIncrease_Private(x));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveApplyAdjointEnd - Completes x = F* y

  Collective

  Level: intermediate

.seealso: `DDPrimitiveApplyAdjointBegin()`
@*/
PetscErrorCode DDPrimitiveApplyAdjointEnd(DDPrimitive prim, DDTensor y, DDTensor x)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveCheckTensors(prim, y, &x, prim->yhash, prim->xhash, "DDPrimitiveApplyAdjointEnd"));
  PetscCheck(prim->inflight == 2, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "DDPrimitiveApplyAdjointEnd() without DDPrimitiveApplyAdjointBegin()");
  prim->inflight = 0; /* ended even if the End fails half-way (see DDPrimitiveApplyEnd()) */
  PetscCall(PetscLogEventBegin(prim->evadj, prim, y, x, 0));
  if (prim->ops->adjointend) PetscCall((*prim->ops->adjointend)(prim, y, x));
  PetscCall(PetscLogEventEnd(prim->evadj, prim, y, x, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveApplyAdjoint - x = F* y, the adjoint data movement

  Collective

  Input Parameters:
+ prim - the primitive
. y    - a tensor laid out as the forward output
- x    - receives the result, laid out as the forward input (for the in-place halo exchange,
         NULL or y: the halo is added into its owners' bulk and cleared)

  Notes:
  The result overwrites x (out-of-place adjoint, paper 000 sec. 2.2); the halo exchange is
  in place.

  Level: beginner

.seealso: `DDPrimitiveApply()`, `DDPrimitiveAdjointTest()`
@*/
PetscErrorCode DDPrimitiveApplyAdjoint(DDPrimitive prim, DDTensor y, DDTensor x)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveApplyAdjointBegin(prim, y, x));
  PetscCall(DDPrimitiveApplyAdjointEnd(prim, y, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Work tensors with the set-up layouts, made when first needed */
static PetscErrorCode DDPrimitiveGetWorkTensors(DDPrimitive prim)
{
  MPI_Comm comm = PetscObjectComm((PetscObject)prim);

  PetscFunctionBegin;
  if (prim->xtmpl) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCheck(prim->xref->layouthash == prim->xhash && prim->yref->layouthash == prim->yhash, comm, PETSC_ERR_ARG_WRONGSTATE, "The tensors given to DDPrimitiveSetUp() changed their layout since; set the primitive up again");
  PetscCall(DDTensorDuplicate(prim->xref, &prim->xtmpl));
  if (prim->inplace) {
    PetscCall(PetscObjectReference((PetscObject)prim->xtmpl));
    prim->ytmpl = prim->xtmpl;
  } else PetscCall(DDTensorDuplicate(prim->yref, &prim->ytmpl));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ---------------------------------------------------------------------- */
/* The spaces the operator acts on: the bulk, or the whole storage for in-place primitives */

template <class F>
static void SpaceRuns(DDPrimitive prim, DDTensor t, F &&f)
{
  if (prim->inplace) {
    if (t->layout.size) f((PetscInt)0, t->layout.size);
  } else ForEachBulkRun(t->layout, f);
}

static PetscInt SpaceSize(DDPrimitive prim, DDTensor t) { return prim->inplace ? t->layout.size : t->layout.bulksize; }

static PetscErrorCode SpaceFromVec(DDPrimitive prim, Vec v, DDTensor t)
{
  const PetscScalar *a;
  void              *h;
  PetscInt           c = 0;

  PetscFunctionBegin;
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* device tensors: a host copy, written back */
  PetscCall(VecGetArrayRead(v, &a));
  SpaceRuns(prim, t, [&](PetscInt off, PetscInt len) {
    for (PetscInt i = 0; i < len; i++) ((double *)h)[off + i] = a[c++];
  });
  PetscCall(VecRestoreArrayRead(v, &a));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SpaceToVec(DDPrimitive prim, DDTensor t, Vec v)
{
  PetscScalar *a;
  void        *h;
  PetscInt     c = 0;

  PetscFunctionBegin;
  PetscCall(DDTensorGetHostArray_Private(t, &h));
  PetscCall(VecGetArray(v, &a));
  SpaceRuns(prim, t, [&](PetscInt off, PetscInt len) {
    for (PetscInt i = 0; i < len; i++) a[c++] = ((const double *)h)[off + i];
  });
  PetscCall(VecRestoreArray(v, &a));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_FALSE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode MatMult_DDPrimitive(Mat A, Vec X, Vec Y)
{
  DDPrimitive prim;

  PetscFunctionBegin;
  PetscCall(MatShellGetContext(A, &prim));
  PetscCall(SpaceFromVec(prim, X, prim->xtmpl));
  PetscCall(DDPrimitiveApply(prim, prim->xtmpl, prim->ytmpl));
  PetscCall(SpaceToVec(prim, prim->ytmpl, Y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode MatMultTranspose_DDPrimitive(Mat A, Vec Y, Vec X)
{
  DDPrimitive prim;

  PetscFunctionBegin;
  PetscCall(MatShellGetContext(A, &prim));
  PetscCall(SpaceFromVec(prim, Y, prim->ytmpl));
  PetscCall(DDPrimitiveApplyAdjoint(prim, prim->ytmpl, prim->xtmpl));
  PetscCall(SpaceToVec(prim, prim->xtmpl, X));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveGetMat - The primitive as a PETSc shell Mat: MatMult = F, MatMultTranspose = F*

  Collective

  Input Parameter:
. prim - a set-up primitive on float64 tensors

  Output Parameter:
. A - the shell matrix, owned by the primitive (do not destroy it)

  Notes:
  Vec entries are the bulk entries of this rank's piece in storage order (for the in-place
  halo exchange, the whole local storage, halo included). Ranks that hold no piece have
  zero local rows or columns.

  Level: intermediate

.seealso: `DDPrimitiveApply()`, `MATSHELL`
@*/
PetscErrorCode DDPrimitiveGetMat(DDPrimitive prim, Mat *A)
DD_CXX_TRY
{
  MPI_Comm comm;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  DDCheckPointer(A, 2);
  comm = PetscObjectComm((PetscObject)prim);
  PetscCheck(prim->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() first");
  PetscCall(DDPrimitiveGetWorkTensors(prim));
  PetscCheck(prim->xtmpl->dtype == DD_FLOAT64, comm, PETSC_ERR_SUP, "The shell Mat needs float64 tensors (this primitive moves %s)", DDDataTypes[prim->xtmpl->dtype]);
  if (!prim->mat) {
    PetscCall(MatCreateShell(comm, SpaceSize(prim, prim->ytmpl), SpaceSize(prim, prim->xtmpl), PETSC_DETERMINE, PETSC_DETERMINE, prim, &prim->mat));
    PetscCall(MatShellSetOperation(prim->mat, MATOP_MULT, (void (*)(void))MatMult_DDPrimitive));
    PetscCall(MatShellSetOperation(prim->mat, MATOP_MULT_TRANSPOSE, (void (*)(void))MatMultTranspose_DDPrimitive));
  }
  *A = prim->mat;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* deterministic inner product over the operator's space */
static PetscErrorCode SpaceDot(DDPrimitive prim, DDTensor a, DDTensor b, PetscReal *d)
{
  PetscReal                local = 0;
  PetscMPIInt              size;
  MPI_Comm                 comm = PetscObjectComm((PetscObject)a);
  std::vector<PetscReal>   all;

  void *ha, *hb;

  PetscFunctionBegin;
  PetscCall(DDTensorGetHostArray_Private(a, &ha)); /* device tensors: a host copy */
  PetscCall(DDTensorGetHostArray_Private(b, &hb));
  PetscCall(DispatchType(a->dtype, [&](auto z) -> PetscErrorCode {
    using T    = decltype(z);
    const T *u = (const T *)ha, *v = (const T *)hb;
    SpaceRuns(prim, a, [&](PetscInt off, PetscInt len) {
      for (PetscInt i = 0; i < len; i++) local += (PetscReal)u[off + i] * (PetscReal)v[off + i];
    });
    return PETSC_SUCCESS;
  }));
  PetscCall(DDTensorRestoreHostArray_Private(a, PETSC_FALSE, &ha));
  PetscCall(DDTensorRestoreHostArray_Private(b, PETSC_FALSE, &hb));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  all.resize(size);
  PetscCallMPI(MPI_Allgather(&local, 1, MPIU_REAL, all.data(), 1, MPIU_REAL, comm));
  *d = 0;
  for (auto v : all) *d += v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode SpaceRandom(DDPrimitive prim, DDTensor t, PetscRandom r)
{
  void *h;

  PetscFunctionBegin;
  PetscCall(DDTensorZeroEntries(t));
  PetscCall(DDTensorGetHostArray_Private(t, &h)); /* device tensors: a host copy, written back */
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T             = decltype(z);
    T             *a    = (T *)h;
    PetscErrorCode ierr = PETSC_SUCCESS;
    SpaceRuns(prim, t, [&](PetscInt off, PetscInt len) {
      for (PetscInt i = 0; i < len && !ierr; i++) {
        PetscScalar v;
        ierr       = PetscRandomGetValue(r, &v);
        a[off + i] = (T)PetscRealPart(v);
      }
    });
    return ierr;
  }));
  PetscCall(DDTensorRestoreHostArray_Private(t, PETSC_TRUE, &h));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveAdjointTest - Checks that ApplyAdjoint is the adjoint of Apply (paper 000, eq. 26)

  Collective

  Input Parameters:
+ prim - a set-up primitive
. x    - work tensor with the input layout, or NULL to let the primitive make one
. y    - work tensor with the output layout, or NULL (ignored for the in-place halo exchange)
- seed - seed of the random x and y (each rank draws its own stream)

  Output Parameter:
. err - |<F x, y> - <x, F* y>| / max(||F x|| ||y||, ||x|| ||F* y||), which must be near
        machine epsilon (about 1e-15 in float64)

  Notes:
  The inner products are those of the whole distributed memory (eq. 2): every rank's bulk,
  and for the in-place halo exchange every rank's whole storage, halo included.

  Level: intermediate

.seealso: `DDPrimitiveApply()`, `DDPrimitiveApplyAdjoint()`
@*/
PetscErrorCode DDPrimitiveAdjointTest(DDPrimitive prim, DDTensor x, DDTensor y, PetscInt64 seed, PetscReal *err)
DD_CXX_TRY
{
  DDTensor    xr, yr, Fx, Fty;
  PetscRandom rnd;
  PetscMPIInt rank;
  PetscReal   a, b, nFx, ny, nx, nFty;
  MPI_Comm    comm;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  DDCheckPointer(err, 5);
  comm = PetscObjectComm((PetscObject)prim);
  PetscCheck(prim->setupcalled, comm, PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() first");
  PetscCall(DDPrimitiveGetWorkTensors(prim));
  if (!x) x = prim->xtmpl;
  if (!y || prim->inplace) y = prim->inplace ? x : prim->ytmpl;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(PetscRandomCreate(PETSC_COMM_SELF, &rnd));
  PetscCall(PetscRandomSetInterval(rnd, -1.0, 1.0));
  PetscCall(PetscRandomSetSeed(rnd, (unsigned long)(seed * 7919 + rank * 104729 + 1)));
  PetscCall(PetscRandomSeed(rnd));
  PetscCall(DDTensorDuplicate(x, &xr));
  PetscCall(DDTensorDuplicate(x, &Fty));
  PetscCall(DDTensorDuplicate(y, &yr));
  PetscCall(DDTensorDuplicate(y, &Fx));
  PetscCall(SpaceRandom(prim, xr, rnd));
  PetscCall(SpaceRandom(prim, yr, rnd));
  if (prim->inplace) {
    const struct _DDBackendMemOps *mem;
    size_t                         es;
    PetscCall(DDMemOps_Private(x->memtype, &mem));
    PetscCall(DDDataTypeGetSize(x->dtype, &es));
    PetscCall(mem->copy(Fx->array, xr->array, es * (size_t)xr->layout.size)); /* the whole storages, halos included */
    PetscCall(mem->copy(Fty->array, yr->array, es * (size_t)yr->layout.size));
    PetscCall(DDPrimitiveApply(prim, Fx, NULL));
    PetscCall(DDPrimitiveApplyAdjoint(prim, Fty, NULL));
  } else {
    PetscCall(DDPrimitiveApply(prim, xr, Fx));
    PetscCall(DDPrimitiveApplyAdjoint(prim, yr, Fty));
  }
  PetscCall(SpaceDot(prim, Fx, yr, &a));
  PetscCall(SpaceDot(prim, xr, Fty, &b));
  PetscCall(SpaceDot(prim, Fx, Fx, &nFx));
  PetscCall(SpaceDot(prim, yr, yr, &ny));
  PetscCall(SpaceDot(prim, xr, xr, &nx));
  PetscCall(SpaceDot(prim, Fty, Fty, &nFty));
  {
    PetscReal den = PetscMax(PetscSqrtReal(nFx * ny), PetscSqrtReal(nx * nFty));
    *err          = den > 0 ? PetscAbsReal(a - b) / den : PetscAbsReal(a - b);
  }
  PetscCall(DDTensorDestroy(&xr));
  PetscCall(DDTensorDestroy(&yr));
  PetscCall(DDTensorDestroy(&Fx));
  PetscCall(DDTensorDestroy(&Fty));
  PetscCall(PetscRandomDestroy(&rnd));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPrimitiveView - Prints the primitive's type and communication pattern

  Collective

  Level: beginner

.seealso: `DDPrimitiveCreate()`
@*/
PetscErrorCode DDPrimitiveView(DDPrimitive prim, PetscViewer viewer)
DD_CXX_TRY
{
  PetscBool iascii;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(PetscObjectComm((PetscObject)prim), &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscObjectPrintClassNamePrefixType((PetscObject)prim, viewer));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  if (prim->ops->view) PetscCall((*prim->ops->view)(prim, viewer));
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDPrimitiveViewFromOptions - Views the primitive if an option asks for it

  Collective

  Level: intermediate

.seealso: `DDPrimitiveView()`
@*/
PetscErrorCode DDPrimitiveViewFromOptions(DDPrimitive prim, PetscObject obj, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscObjectViewFromOptions((PetscObject)prim, obj, name));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveDestroy - Destroys a primitive

  Collective

  Level: beginner

.seealso: `DDPrimitiveCreate()`
@*/
PetscErrorCode DDPrimitiveDestroy(DDPrimitive *prim)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckPointer(prim, 1);
  if (!*prim) PetscFunctionReturn(PETSC_SUCCESS);
  DDCheckHeader(*prim, DD_PRIMITIVE_CLASSID, 1);
  if (--((PetscObject)(*prim))->refct > 0) {
    *prim = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDPrimitiveReset(*prim));
  if ((*prim)->ops->destroy) PetscCall((*(*prim)->ops->destroy)(*prim));
  ddnn::ExchangeForget(*prim);
  PetscCall(PetscHeaderDestroy(prim));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the exchanges built by prim's set-up (its own and those of primitives it set up inside) */
template <class F>
static void ForEachExchangeOf(DDPrimitive prim, F f)
{
  for (auto *ex : ddnn::ExchangeRegistry())
    if (ddnn::ExchangeIsUnder(ex->owner, prim)) f(*ex);
}

/*@
  DDPrimitiveGetCommVolume - The point-to-point messages and bytes one application of a primitive sends and receives on this rank, from its set-up graph

  Not collective

  Input Parameters:
+ prim    - the set-up primitive
- adjoint - `PETSC_FALSE` for `DDPrimitiveApply()`, `PETSC_TRUE` for `DDPrimitiveApplyAdjoint()`

  Output Parameters:
+ sendmsgs  - messages this rank sends (or NULL)
. sendbytes - bytes in them (or NULL)
. recvmsgs  - messages this rank receives (or NULL)
- recvbytes - bytes in them (or NULL)

  Notes:
  The counts are those of the exchange engine's plan (the peers and runs found at set-up), for
  the data type of the tensors the primitive was set up with; the rank's own part is a copy, not
  a message, and is not counted. Primitives that build others (fft's repartitions) include
  theirs. The collective primitives (`DDPRIMITIVEBROADCAST`/sum-reduce and `DDPRIMITIVEALLSUMREDUCE`)
  move their data with MPI collectives, not through the exchange engine: for them the counts
  are zero and the model prices them as collectives (`DDLayerGetModelCollectives()`).
  This is the SR(n) term of the performance model of paper 003 sec. V-A.

  Level: intermediate

.seealso: `DDPrimitiveGetCommCounters()`, `DDLayerGetModelComm()`
@*/
PetscErrorCode DDPrimitiveGetCommVolume(DDPrimitive prim, PetscBool adjoint, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
DD_CXX_TRY
{
  PetscInt64 t[4] = {0, 0, 0, 0};

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscCheck(prim->setupcalled, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() before DDPrimitiveGetCommVolume()");
  size_t es;
  PetscCall(DDDataTypeGetSize(prim->xref->dtype, &es));
  ForEachExchangeOf(prim, [&](const ddnn::Exchange &ex) {
    PetscInt64 v[4];
    ex.PlannedVolume(adjoint ? 1 : 0, es, v);
    for (int k = 0; k < 4; k++) t[k] += v[k];
  });
  ddnn::CommVolumeOut(t, sendmsgs, sendbytes, recvmsgs, recvbytes);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the performance model (issue 16): what one application (adjoint: of the adjoint) walks on this rank, from the
   set-up plans of prim's exchanges (Exchange::PlannedWork()): w[0] runs of consecutive entries it sends from,
   w[1] runs it receives into, w[2] runs of its own part, w[3] the bytes of its own part (copied locally) */
PetscErrorCode DDPrimitiveGetExchangeWork_Private(DDPrimitive prim, PetscBool adjoint, PetscInt64 w[4])
DD_CXX_TRY
{
  size_t es;

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscCheck(prim->setupcalled, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() before asking for its exchanges' work");
  PetscCall(DDDataTypeGetSize(prim->xref->dtype, &es));
  for (int k = 0; k < 4; k++) w[k] = 0;
  ForEachExchangeOf(prim, [&](const ddnn::Exchange &ex) {
    PetscInt64 v[4];
    ex.PlannedWork(adjoint ? 1 : 0, v);
    for (int k = 0; k < 4; k++) w[k] += v[k];
  });
  w[3] *= (PetscInt64)es;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveGetCommCounters - The point-to-point messages and bytes a primitive actually sent and received on this rank since its set-up or the last `DDPrimitiveResetCommCounters()`

  Not collective

  Input Parameters:
+ prim    - the primitive
- adjoint - `PETSC_FALSE`: the applications, `PETSC_TRUE`: the adjoint applications

  Output Parameters:
+ sendmsgs  - messages started (or NULL)
. sendbytes - bytes in them (or NULL)
. recvmsgs  - messages received (or NULL)
- recvbytes - bytes received, as MPI reports them for the completed receives (`MPI_Get_count()` in bytes) (or NULL)

  Notes:
  The measured side of `DDPrimitiveGetCommVolume()`: after k applications the counters equal k
  times the volume. The engine counts every exchange it runs, whoever calls it.

  Level: intermediate

.seealso: `DDPrimitiveGetCommVolume()`, `DDPrimitiveResetCommCounters()`, `DDCommGetCounters()`
@*/
PetscErrorCode DDPrimitiveGetCommCounters(DDPrimitive prim, PetscBool adjoint, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
DD_CXX_TRY
{
  PetscInt64 t[4] = {0, 0, 0, 0};

  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  ForEachExchangeOf(prim, [&](const ddnn::Exchange &ex) {
    for (int k = 0; k < 4; k++) t[k] += ex.counted[adjoint ? 1 : 0][k];
  });
  ddnn::CommVolumeOut(t, sendmsgs, sendbytes, recvmsgs, recvbytes);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDPrimitiveResetCommCounters - Sets a primitive's communication counters to zero

  Not collective

  Input Parameter:
. prim - the primitive

  Level: intermediate

.seealso: `DDPrimitiveGetCommCounters()`
@*/
PetscErrorCode DDPrimitiveResetCommCounters(DDPrimitive prim)
DD_CXX_TRY
{
  PetscFunctionBegin;
  DDCheckHeader(prim, DD_PRIMITIVE_CLASSID, 1);
  ForEachExchangeOf(prim, [&](ddnn::Exchange &ex) {
    for (auto &d : ex.counted)
      for (auto &c : d) c = 0;
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDCommGetCounters - The point-to-point messages and bytes all live exchanges of this process sent and received since they were built

  Not collective

  Input Parameter:
. adjoint - `PETSC_FALSE`: forward applications, `PETSC_TRUE`: adjoint applications

  Output Parameters:
+ sendmsgs  - messages started (or NULL)
. sendbytes - bytes in them (or NULL)
. recvmsgs  - messages received (or NULL)
- recvbytes - bytes received (or NULL)

  Notes:
  Take the difference of two calls around a piece of work to count what it moved, whichever
  primitives (and layers) did it.

  Level: intermediate

.seealso: `DDPrimitiveGetCommCounters()`
@*/
PetscErrorCode DDCommGetCounters(PetscBool adjoint, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
DD_CXX_TRY
{
  PetscInt64 t[4] = {0, 0, 0, 0};

  PetscFunctionBegin;
  for (auto *ex : ddnn::ExchangeRegistry())
    for (int k = 0; k < 4; k++) t[k] += ex->counted[adjoint ? 1 : 0][k];
  ddnn::CommVolumeOut(t, sendmsgs, sendbytes, recvmsgs, recvbytes);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
