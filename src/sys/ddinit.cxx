/*
  Package initialization, class ids, data types and collective error checking.
*/
#include <ddnn/private/ddimpl.h>
#include <sys/ddsysimpl.h>
#include <cstring>

PetscBool DDPackageInitialized = PETSC_FALSE;
static PetscBool DDBeganPetsc  = PETSC_FALSE;

PetscClassId  DD_PARTITION_CLASSID, DD_TENSOR_CLASSID;
PetscLogEvent DD_TensorScatter, DD_TensorGather, DD_TensorSetUp;

const char *const DDDataTypes[]     = {"float32", "float64", "DDDataType", "DD_", nullptr};
const char *const DDTensorFormats[] = {"plain", "channels_last", "blocked", "DDTensorFormat", "DD_FORMAT_", nullptr};

/*@C
  DDFinalizePackage - Frees what `DDInitializePackage()` registered; called from `PetscFinalize()`

  Level: developer

.seealso: `DDInitializePackage()`, `DDFinalize()`
@*/
PetscErrorCode DDFinalizePackage(void)
{
  PetscFunctionBegin;
  /* the modules, in the reverse order of DDInitializePackage() */
  PetscCall(DDNetTrainResetStages_Private());
  PetscCall(DDOptimizerFinalizePackage());
  PetscCall(DDLayerFinalizePackage());
  PetscCall(DDPrimitiveFinalizePackage());
  DDPackageInitialized = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDInitializePackage - Registers ddnn's classes, log events and object types with PETSc

  Notes:
  Called by `DDInitialize()` and, lazily, by every `DDxxxCreate()`, so that a PETSc program
  may use ddnn objects after a plain `PetscInitialize()`, the way SLEPc does.

  Registers the built-in types with `DDPrimitiveRegisterAll()`, `DDLayerRegisterAll()` and
  `DDOptimizerRegisterAll()` (explicit lists, as PETSc's `KSPRegisterAll()`: no static
  initializers, so a statically linked program keeps every type).

  Level: developer

.seealso: `DDInitialize()`, `DDFinalizePackage()`
@*/
PetscErrorCode DDInitializePackage(void)
{
  PetscFunctionBegin;
  if (DDPackageInitialized) PetscFunctionReturn(PETSC_SUCCESS);
  DDPackageInitialized = PETSC_TRUE;
  PetscCall(PetscClassIdRegister("DD Partition", &DD_PARTITION_CLASSID));
  PetscCall(PetscClassIdRegister("DD Tensor", &DD_TENSOR_CLASSID));
  PetscCall(PetscLogEventRegister("DDTensorSetUp", DD_TENSOR_CLASSID, &DD_TensorSetUp));
  PetscCall(PetscLogEventRegister("DDTensorScatter", DD_TENSOR_CLASSID, &DD_TensorScatter));
  PetscCall(PetscLogEventRegister("DDTensorGather", DD_TENSOR_CLASSID, &DD_TensorGather));
  PetscCall(DDPrimitiveInitializePackage());
  PetscCall(DDLayerInitializePackage());
  PetscCall(DDNetInitializePackage());
  PetscCall(DDOptimizerInitializePackage());
  PetscCall(DDDatasetInitializePackage());
  PetscCall(DDNetTrainResetStages_Private());
  PetscCall(PetscRegisterFinalize(DDFinalizePackage));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  DDFunctionListKnownTypes_Private - The names in a type list, comma separated, for error messages
  ("conv, pool, ..."); truncated with "..." to fit len.
*/
PetscErrorCode DDFunctionListKnownTypes_Private(PetscFunctionList list, char buf[], size_t len)
{
  const char **names = NULL;
  int          n     = 0;

  PetscFunctionBegin;
  PetscCheck(len > 4, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Buffer too short");
  buf[0] = 0;
  PetscCall(PetscFunctionListGet(list, &names, &n)); /* NULL-terminated (n counts the NULL) */
  for (int i = 0; i < n && names[i]; i++) {
    size_t have, add;
    PetscCall(PetscStrlen(buf, &have));
    PetscCall(PetscStrlen(names[i], &add));
    if (have + add + 2 + 4 >= len) {
      PetscCall(PetscStrlcat(buf, "...", len));
      break;
    }
    if (i) PetscCall(PetscStrlcat(buf, ", ", len));
    PetscCall(PetscStrlcat(buf, names[i], len));
  }
  if (!buf[0]) PetscCall(PetscStrncpy(buf, "none", len));
  PetscCall(PetscFree(names));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDInitialize - Initializes PETSc (if not yet done) and ddnn

  Collective on `PETSC_COMM_WORLD`

  Input Parameters:
+ argc - count of command line arguments
. argv - the command line arguments
. file - an options file, or NULL
- help - help text printed with -help, or NULL

  Level: beginner

.seealso: `DDFinalize()`, `PetscInitialize()`
@*/
PetscErrorCode DDInitialize(int *argc, char ***argv, const char file[], const char help[])
{
  PetscBool petscinit;

  PetscFunctionBegin;
  PetscCall(PetscInitialized(&petscinit));
  if (!petscinit) {
    PetscCall(PetscInitialize(argc, argv, file, help));
    DDBeganPetsc = PETSC_TRUE;
  }
  PetscCall(DDInitializePackage());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDFinalize - Finalizes ddnn, and PETSc if `DDInitialize()` initialized it

  Collective on `PETSC_COMM_WORLD`

  Level: beginner

.seealso: `DDInitialize()`
@*/
PetscErrorCode DDFinalize(void)
{
  PetscFunctionBegin;
  if (DDBeganPetsc) {
    DDBeganPetsc = PETSC_FALSE;
    PetscCall(PetscFinalize());
  } else PetscCall(DDFinalizePackage());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDInitialized - Tells whether ddnn's package is initialized

  Output Parameter:
. flg - `PETSC_TRUE` if initialized

  Level: beginner

.seealso: `DDInitialize()`
@*/
PetscErrorCode DDInitialized(PetscBool *flg)
{
  PetscFunctionBegin;
  *flg = DDPackageInitialized;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDDataTypeGetSize - Size in bytes of one element of a `DDDataType`

  Level: developer

.seealso: `DDDataType`
@*/
PetscErrorCode DDDataTypeGetSize(DDDataType dt, size_t *size)
{
  PetscFunctionBegin;
  switch (dt) {
  case DD_FLOAT32:
    *size = sizeof(float);
    break;
  case DD_FLOAT64:
    *size = sizeof(double);
    break;
  default:
    SETERRQ(PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Unknown DDDataType %d", (int)dt);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDDataTypeGetMPIType - The MPI datatype of one element of a `DDDataType`

  Level: developer

.seealso: `DDDataType`
@*/
PetscErrorCode DDDataTypeGetMPIType(DDDataType dt, MPI_Datatype *mt)
{
  PetscFunctionBegin;
  switch (dt) {
  case DD_FLOAT32:
    *mt = MPI_FLOAT;
    break;
  case DD_FLOAT64:
    *mt = MPI_DOUBLE;
    break;
  default:
    SETERRQ(PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Unknown DDDataType %d", (int)dt);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDCheckCollective - Raises an error on every rank of comm when any rank reports a failure

  Collective

  Input Parameters:
+ comm - the communicator whose ranks all call this routine
. ok   - this rank's verdict
. code - the PETSc error code to raise
- msg  - this rank's message (used when ok is false)

  Notes:
  Argument checks that depend on rank-local data (a local halo width, a local piece size)
  must not error on some ranks only: the others would wait forever in the next collective.
  This routine agrees on the lowest failing rank and raises its message everywhere.
  Usually called through `DDCheckAll()`.

  Level: developer

.seealso: `DDCheckAll()`
@*/
PetscErrorCode DDCheckCollective(MPI_Comm comm, PetscBool ok, PetscErrorCode code, const char msg[])
{
  PetscMPIInt rank, size, first, in;
  char        buf[512];

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  in = ok ? size : rank;
  PetscCall(MPIU_Allreduce(&in, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) PetscFunctionReturn(PETSC_SUCCESS);
  if (rank == first) PetscCall(PetscStrncpy(buf, msg, sizeof(buf)));
  PetscCallMPI(MPI_Bcast(buf, sizeof(buf), MPI_CHAR, first, comm));
  if (size > 1) SETERRQ(PETSC_COMM_SELF, code, "%s [detected on rank %d]", buf, first);
  SETERRQ(PETSC_COMM_SELF, code, "%s", buf);
}

/*@C
  DDOptionsCheckUnused - Raises an error naming every option that was given but never used

  Collective

  Input Parameters:
+ comm   - the communicator of the program
- prefix - only check options starting with this prefix (without the dash), or NULL for all

  Notes:
  PETSc only warns about unused options at `PetscFinalize()` with -options_left. Programs
  that configure networks from options call this after `SetFromOptions()` so that a
  misspelled option is an error, not a silently ignored setting.

  Level: intermediate

.seealso: `PetscOptionsLeft()`
@*/
PetscErrorCode DDOptionsCheckUnused(MPI_Comm comm, const char prefix[])
{
  PetscInt  n, i;
  char    **names, **values;
  char      buf[480] = "";
  PetscBool bad      = PETSC_FALSE;
  size_t    plen     = 0;

  PetscFunctionBegin;
  if (prefix) PetscCall(PetscStrlen(prefix, &plen));
  PetscCall(PetscOptionsLeftGet(NULL, &n, &names, &values));
  for (i = 0; i < n; i++) {
    PetscBool match = PETSC_TRUE;
    if (plen) PetscCall(PetscStrncmp(names[i], prefix, plen, &match));
    /* options PETSc itself reads late (at finalize) are not ours to judge */
    if (!plen) {
      const char *ignore[] = {"malloc_dump", "malloc_debug", "log_view", "options_left", "malloc_test", "checkstack", "objects_dump", "memory_view", "log_summary", "check_pointer_intensity", "no_signal_handler", "history", nullptr};
      for (int j = 0; ignore[j]; j++) {
        PetscBool f;
        PetscCall(PetscStrcmp(names[i], ignore[j], &f));
        if (f) match = PETSC_FALSE;
      }
    }
    if (!match) continue;
    bad = PETSC_TRUE;
    PetscCall(PetscStrlcat(buf, " -", sizeof(buf)));
    PetscCall(PetscStrlcat(buf, names[i], sizeof(buf)));
  }
  PetscCall(PetscOptionsLeftRestore(NULL, &n, &names, &values));
  DDCheckAll(comm, !bad, PETSC_ERR_ARG_WRONG, "Unknown or unused option(s):%s", buf);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Helpers shared by the implementation */
PetscErrorCode DDSplitOwnership_Private(PetscInt n, PetscInt P, PetscInt ranges[])
{
  PetscFunctionBegin;
  ranges[0] = 0;
  for (PetscInt p = 0; p < P; p++) ranges[p + 1] = ranges[p] + n / P + ((n % P) > p ? 1 : 0);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DDShapeToString_Private(PetscInt n, const PetscInt v[], char buf[], size_t len)
{
  PetscFunctionBegin;
  buf[0] = 0;
  for (PetscInt i = 0; i < n; i++) {
    char s[32];
    PetscCall(PetscSNPrintf(s, sizeof(s), i ? "x%" PetscInt_FMT : "%" PetscInt_FMT, v[i]));
    PetscCall(PetscStrlcat(buf, s, len));
  }
  if (!n) PetscCall(PetscStrlcat(buf, "()", len));
  PetscFunctionReturn(PETSC_SUCCESS);
}
