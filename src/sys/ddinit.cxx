/*
  Package initialization, class ids, data types and collective error checking.
*/
#include <sys/shmarena.hpp>
#include <ddnn/private/ddimpl.h>
#include <sys/ddsysimpl.h>
#include <sys/ddcxx.hpp>
#include <new>
#include <stdexcept>
#include <cstring>
#include <cstdio>
#include <yaml.h>
#include <cerrno>
#include <cstdlib>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>
#include <sstream>
#include <algorithm>

PetscBool DDPackageInitialized = PETSC_FALSE;
static PetscBool DDBeganPetsc  = PETSC_FALSE;
static PetscBool DDPushedErrorHandler = PETSC_FALSE;

/* the last allocation requested through PETSc (its size and caller), for the out-of-memory message;
   recorded without allocating, so that the error handler can name it */
typedef struct {
  size_t      bytes;
  int         line;
  const char *func, *file;
} DDMallocRecord;
static DDMallocRecord DDLastMalloc = {0, 0, NULL, NULL};
static PetscErrorCode (*DDTrMallocInner)(size_t, PetscBool, int, const char[], const char[], void **)  = NULL;
static PetscErrorCode (*DDTrReallocInner)(size_t, int, const char[], const char[], void **)            = NULL;

/* A failed allocation whose error came back as another code than PETSC_ERR_MEM: PETSc 3.18's
   PetscMallocAlign() reports it with errno as the code. DDErrorHandlerAllRanks() converts it when it
   is the handler in effect; a program (or ddnn itself, in its trial set-ups) that pushed another
   handler, e.g. PetscReturnErrorHandler(), would get the raw code back. Here, after the inner
   routine returned, the error is raised again as PETSC_ERR_MEM with the size and the caller, so
   that every handler sees it (PetscReturnErrorHandler() returns PETSC_ERR_MEM, and
   PetscErrorMessage() gives this message). Memory corruption (PETSC_ERR_MEMC, -malloc_debug) is
   left as it is. */
static PetscErrorCode DDOutOfMemory(PetscErrorCode ierr, size_t bytes, int line, const char func[], const char file[])
{
  if (!ierr || ierr == PETSC_ERR_MEM || ierr == PETSC_ERR_MEMC) return ierr;
  return PetscError(PETSC_COMM_SELF, line, func, file, PETSC_ERR_MEM, PETSC_ERROR_INITIAL, "Out of memory: an allocation of %.0f bytes (%.3g GiB) failed in %s() at %s:%d", (double)bytes, (double)bytes / 1073741824.0, func ? func : "?", file ? file : "?", line);
}

static PetscErrorCode DDTrMalloc(size_t bytes, PetscBool clear, int line, const char func[], const char file[], void **result)
{
  DDLastMalloc = {bytes, line, func, file};
  return DDOutOfMemory((*DDTrMallocInner)(bytes, clear, line, func, file, result), bytes, line, func, file);
}

static PetscErrorCode DDTrRealloc(size_t bytes, int line, const char func[], const char file[], void **result)
{
  DDLastMalloc = {bytes, line, func, file};
  return DDOutOfMemory((*DDTrReallocInner)(bytes, line, func, file, result), bytes, line, func, file);
}

PetscErrorCode ddnn::CxxError_Private(int line, const char func[], const char file[], const std::exception &e)
{
#if defined(PETSC_USE_DEBUG)
  /* the frames PetscFunctionBegin pushed from func inward were not popped by the unwinding */
  while (petscstack.currentsize > 0) {
    const char *f = petscstack.function[--petscstack.currentsize];
    if (f && func && !strcmp(f, func)) break;
  }
#endif
  char where[1024];
  ddnn::CxxErrorContext::Describe_Private(where, sizeof(where));
  if (dynamic_cast<const std::bad_alloc *>(&e) || dynamic_cast<const std::length_error *>(&e)) return PetscError(PETSC_COMM_SELF, line, func, file, PETSC_ERR_MEM, PETSC_ERROR_INITIAL, "Out of memory: a C++ allocation failed in %s() (%s)%s", func ? func : "?", e.what(), where);
  return PetscError(PETSC_COMM_SELF, line, func, file, PETSC_ERR_LIB, PETSC_ERROR_INITIAL, "%s() raised the C++ exception: %s%s", func ? func : "?", e.what(), where);
}

static thread_local ddnn::CxxErrorContext *DDCxxContext = nullptr; /* the innermost alive */

ddnn::CxxErrorContext::CxxErrorContext(Describe describe, const void *ctx) noexcept : describe_(describe), ctx_(ctx), prev_(DDCxxContext)
{
  DDCxxContext = this;
}

ddnn::CxxErrorContext::~CxxErrorContext()
{
  DDCxxContext = prev_;
}

void ddnn::CxxErrorContext::Describe_Private(char buf[], size_t len)
{
  size_t used = 0;
  buf[0]      = 0;
  for (const CxxErrorContext *c = DDCxxContext; c && used + 3 < len; c = c->prev_) {
    char one[512];
    one[0] = 0;
    c->describe_(c->ctx_, one, sizeof(one));
    if (!one[0]) continue;
    int w = snprintf(buf + used, len - used, "%s %s", used ? "," : "", one);
    if (w < 0) break;
    used += (size_t)w < len - used ? (size_t)w : len - used - 1;
  }
}

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
DD_CXX_TRY
{
  PetscFunctionBegin;
  /* the modules, in the reverse order of DDInitializePackage() */
  PetscCall(DDNetTrainResetStages_Private());
  PetscCall(DDOptimizerFinalizePackage());
  PetscCall(DDLayerFinalizePackage());
  PetscCall(DDPrimitiveFinalizePackage());
  { /* tensor storage in the arenas (-dd_exchange_direct, -dd_host_hugepages) is not PetscMalloc's: -malloc_dump reports it here */
    size_t    nb, bytes;
    PetscBool dump = PETSC_FALSE;
    ddnn::ShmArenaLive(&nb, &bytes);
    PetscCall(PetscOptionsGetBool(NULL, NULL, "-malloc_dump", &dump, NULL));
    if (nb && dump) PetscCall(PetscPrintf(PETSC_COMM_SELF, "[ddnn] %zu block(s) of %zu bytes in the tensor arenas (-dd_exchange_direct, -dd_host_hugepages) were not freed\n", nb, bytes));
    PetscCall(ddnn::ShmArenaFinalize());
  }
  DDPackageInitialized = PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

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
DD_CXX_TRY
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
DD_CXX_CATCH

/*
  DDFunctionListKnownTypes_Private - The names in a type list, comma separated, for error messages
  ("conv, pool, ..."); truncated with "..." to fit len.
*/
PetscErrorCode DDFunctionListKnownTypes_Private(PetscFunctionList list, char buf[], size_t len)
DD_CXX_TRY
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
DD_CXX_CATCH

/*@C
  DDInitialize - Initializes PETSc (if not yet done) and ddnn

  Collective on `PETSC_COMM_WORLD`

  Input Parameters:
+ argc - count of command line arguments
. argv - the command line arguments
. file - an options file, or NULL
- help - help text printed with -help, or NULL

  Options Database Key:
. -dd_host_hugepages <bool> - host tensors set up while this is true (and -dd_exchange_direct is off, as at one rank) are carved from one private mapping on transparent huge pages (2 MiB): a layer whose tensors left the caches pays one translation miss per 2 MiB instead of per 4 KiB page; the main job's U-Net trains a step 6-7 % faster on 1 rank (medians of interleaved runs, float32 and float64). Default: true where /sys/kernel/mm/transparent_hugepage/enabled is madvise or always; the memory keeps malloc's semantics (pages at the first touch, inherited copy-on-write by a forked child, large freed blocks given back); no arena under an address-space limit; `-malloc_dump` reports its blocks in a line of its own

  Notes:
  When it initializes PETSc, the files given with -options_file_yaml are parsed first, so that a
  YAML syntax error is reported with the file, line and column (PETSc itself reports only "YAML
  parser loading error"); the function then returns `PETSC_ERR_FILE_UNEXPECTED`. The
  -options_file and -options_file_yaml arguments must be the same on every rank (PETSc reads
  them collectively): when they differ, every rank prints its own and the function returns
  `PETSC_ERR_ARG_INCOMP` before PETSc starts (it initializes MPI itself for this check, and
  `DDFinalize()` ends it).

  Level: beginner

.seealso: `DDFinalize()`, `PetscInitialize()`
@*/
/*
  PETSc reads -options_file_yaml files inside PetscInitialize() and reports a syntax error as
  "YAML parser loading error", without the file or the line. Parse them first with libyaml (the
  library PETSc uses) and report "<file>:<line>:<column>: <problem>" on stderr.
*/
static PetscErrorCode DDCheckYAMLFiles(int argc, char **argv)
{
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], "-options_file_yaml") != 0) continue;
    const char *f  = argv[i + 1];
    FILE       *fp = fopen(f, "rb");
    if (!fp) continue; /* PETSc reports a missing file itself, with its name */
    yaml_parser_t parser;
    yaml_event_t  ev;
    int           ok = 1, done = 0;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, fp);
    while (ok && !done) {
      if (!yaml_parser_parse(&parser, &ev)) {
        ok = 0;
        break;
      }
      done = ev.type == YAML_STREAM_END_EVENT;
      yaml_event_delete(&ev);
    }
    if (!ok) {
      fprintf(stderr, "ddnn: %s:%lu:%lu: YAML syntax error: %s%s%s (-options_file_yaml)\n", f, (unsigned long)parser.problem_mark.line + 1, (unsigned long)parser.problem_mark.column + 1, parser.problem ? parser.problem : "unknown", parser.context ? ", " : "", parser.context ? parser.context : "");
      fflush(stderr);
    }
    yaml_parser_delete(&parser);
    fclose(fp);
    if (!ok) return PETSC_ERR_FILE_UNEXPECTED;
  }
  return PETSC_SUCCESS;
}

/*
  PETSc reads the -options_file and -options_file_yaml files inside PetscInitialize() on the first
  rank and broadcasts them: given on some ranks only (an MPMD launch), the ranks take other
  collective calls and PetscInitialize() dies with an MPI buffer error or hangs. Compare these
  arguments across MPI_COMM_WORLD first and report the difference on stderr, from every rank.
*/
static uint64_t DDHashString(const char *);

static PetscErrorCode DDCheckOptionsFilesSame(int argc, char **argv)
{
  std::string mine;
  int         size = 1, rank = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-options_file") && strcmp(argv[i], "-options_file_yaml")) continue;
    mine += std::string(mine.empty() ? "" : " ") + argv[i] + (i + 1 < argc ? std::string(" ") + argv[i + 1] : "");
  }
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size == 1) return PETSC_SUCCESS;
  uint64_t h = DDHashString(mine.c_str()), in[2] = {h, ~h}, out[2];
  if (MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) return PETSC_ERR_MPI;
  if (out[0] == ~out[1]) return PETSC_SUCCESS;
  fprintf(stderr, "ddnn: [rank %d] the options files on the command line differ between ranks (PETSc reads them collectively; options must be the same on every rank): rank %d has \"%s\"\n", rank, rank, mine.c_str());
  fflush(stderr);
  return PETSC_ERR_ARG_INCOMP;
}

PetscErrorCode DDInitialize(int *argc, char ***argv, const char file[], const char help[])
DD_CXX_TRY
{
  PetscBool petscinit;

  PetscFunctionBegin;
  PetscCall(PetscInitialized(&petscinit));
  if (!petscinit) {
    int mpiinit = 0, beganmpi = 0;
    if (argc && argv) {
      PetscErrorCode yerr = DDCheckYAMLFiles(*argc, *argv);
      if (yerr) return yerr; /* PETSc is not initialized yet: no error handler to call */
    }
    if (MPI_Initialized(&mpiinit) == MPI_SUCCESS && !mpiinit && argc && argv) {
      int provided; /* the thread level PETSc 3.18 asks for (PETSC_MPI_THREAD_REQUIRED) */
      if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return PETSC_ERR_MPI;
      beganmpi = 1;
    }
    if (argc && argv) {
      PetscErrorCode oerr = DDCheckOptionsFilesSame(*argc, *argv);
      if (oerr) {
        if (beganmpi) MPI_Finalize();
        return oerr;
      }
    }
    PetscCall(PetscInitialize(argc, argv, file, help));
    if (beganmpi) PetscBeganMPI = PETSC_TRUE; /* PetscFinalize() ends MPI, as if PETSc had started it */
    DDBeganPetsc = PETSC_TRUE;
  }
  PetscCall(DDInitializePackage());
  if (!DDPushedErrorHandler) {
    /* never silent: an error raised on a rank other than the first of its communicator prints its
       message there too; a program that chose another handler keeps it */
    const char *other[] = {"-on_error_abort", "-on_error_attach_debugger", "-on_error_emacs", "-on_error_mpiabort", "-start_in_debugger", nullptr};
    PetscBool   all = PETSC_TRUE, has = PETSC_FALSE;
    for (int i = 0; other[i] && !has; i++) PetscCall(PetscOptionsHasName(NULL, NULL, other[i], &has));
    PetscCall(PetscOptionsGetBool(NULL, NULL, "-dd_error_all_ranks", &all, NULL));
    if (all && !has) {
      PetscCall(PetscPushErrorHandler(DDErrorHandlerAllRanks, NULL));
      DDPushedErrorHandler = PETSC_TRUE;
      if (PetscTrMalloc != DDTrMalloc) { /* record every allocation's size and caller (the memory routines stay PETSc's) */
        DDTrMallocInner  = PetscTrMalloc;
        DDTrReallocInner = PetscTrRealloc;
        PetscTrMalloc    = DDTrMalloc;
        PetscTrRealloc   = DDTrRealloc;
      }
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDErrorHandlerAllRanks - PETSc's traceback error handler, except that an error raised on a rank
  other than the first of a parallel communicator also prints its message on that rank

  Not collective

  Notes:
  PETSc prints an error raised on a parallel communicator from that communicator's first rank
  only, assuming that every rank raises it; the other ranks sleep 10 seconds and exit(0). An
  error raised on one rank alone (an option given to that rank only, a local check) then prints
  nothing at all, and that rank ends with a success code. Here such a rank prints the message
  and returns the error like any other, so the caller's traceback follows. `DDInitialize()` pushes this
  handler (unless -dd_error_all_ranks false or an -on_error_* option chose another), so that
  the rank that raised an error always names it on stderr, as "[r]PETSC ERROR: on rank r of
  the communicator: message". An error that every rank raises then prints this line once more
  per rank beyond the first.

  A failed allocation is reported by PETSc 3.18's `PetscMallocAlign()` with errno as its error
  code and ends as "out-of-range error code"; this handler turns it into `PETSC_ERR_MEM` with a
  message that gives the size requested and the function, file and line that asked for it
  (`DDInitialize()` has PETSc's allocation routines record them).

  Level: developer

.seealso: `DDInitialize()`, `DDCheckAll()`, `PetscTraceBackErrorHandler()`
@*/
PetscErrorCode DDErrorHandlerAllRanks(MPI_Comm comm, int line, const char *fun, const char *file, PetscErrorCode n, PetscErrorType p, const char *mess, void *ctx)
{
  PetscMPIInt rank = 0;
  static char oom[PETSC_MAX_PATH_LEN + 256];

  if (p == PETSC_ERROR_INITIAL && fun && !strcmp(fun, "PetscMallocAlign") && n != PETSC_ERR_MEM) {
    /* PETSc 3.18's PetscMallocAlign() reports a failed allocation with errno (ENOMEM) as the error
       code and the caller's name as the message, which ends as "out-of-range error code <line>":
       make it PETSC_ERR_MEM, with the size and the caller that DDTrMalloc() recorded */
    const DDMallocRecord *r = &DDLastMalloc;
    (void)PetscSNPrintf(oom, sizeof(oom), "Out of memory: an allocation of %.0f bytes (%.3g GiB) failed in %s() at %s:%d", (double)r->bytes, (double)r->bytes / 1073741824.0, r->func ? r->func : (mess ? mess : "?"), r->file ? r->file : "?", r->line);
    n    = PETSC_ERR_MEM;
    mess = oom;
  }

  if (comm != PETSC_COMM_SELF && comm != MPI_COMM_NULL) (void)MPI_Comm_rank(comm, &rank);
  if (rank != 0 && p == PETSC_ERROR_INITIAL) {
    /* PETSc's handler would print nothing here, sleep 10 s and exit(0): a silent success code */
    const char *text = NULL;
    (void)PetscErrorMessage(n, &text, NULL);
    (void)(*PetscErrorPrintf)("on rank %d of the communicator (%s): %s\n", (int)rank, text ? text : "error", mess ? mess : "");
    (void)(*PetscErrorPrintf)("#1 %s() at %s:%d\n", fun ? fun : "", file ? file : "", line);
    return n;
  }
  return PetscTraceBackErrorHandler(comm, line, fun, file, n, p, mess, ctx);
}

/* FNV-1a, 64 bit */
static uint64_t DDHashString(const char *s)
{
  uint64_t h = 1469598103934665603ULL;
  for (; s && *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

/* the text of the line around position pos of s, at most ~160 characters */
static std::string DDLineAround(const std::string &s, size_t pos)
{
  size_t a = s.rfind('\n', pos ? pos - 1 : 0), b = s.find('\n', pos);
  a = (a == std::string::npos || pos == 0) ? 0 : a + 1;
  if (b == std::string::npos) b = s.size();
  if (pos > a + 80) a = pos - 80;
  if (b > pos + 80) b = pos + 80;
  std::string r = s.substr(a, b - a);
  return r.empty() ? std::string("(empty)") : r;
}

/*@C
  DDCheckSameString - Raises an error on every rank when a value that must agree differs between ranks

  Collective

  Input Parameters:
+ comm  - the communicator whose ranks must agree
. what  - what the value is, for the message ("the layer list of the network", "the data file name")
- value - this rank's value, as text (a file name, a shape, a description of hyper-parameters)

  Notes:
  Compares a 64-bit hash of the value across comm (the minimum and maximum of one
  `MPI_Allreduce()`); when they differ, the two ranks holding the extreme hashes exchange their
  text and every rank raises `PETSC_ERR_ARG_INCOMP` naming what differs, the two ranks and the
  first line on which their values differ; ranks that reached different checks (`what` differs:
  they took different paths through the program) raise an error naming both checks. Options
  given differently on different ranks (per-rank
  environments, MPMD launches) then fail at set-up with a message instead of hanging in a later
  collective call or running with other numbers.

  Level: developer

.seealso: `DDCheckAll()`, `DDCheckCollective()`
@*/
PetscErrorCode DDCheckSameString(MPI_Comm comm, const char what[], const char value[])
DD_CXX_TRY
{
  uint64_t    h, in[2], out[2];
  PetscMPIInt rank, size, r[2], rr[2];
  std::string mine = std::string(what) + '\x1f' + value; /* ranks at different checks disagree too */

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  if (size == 1) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  h     = DDHashString(mine.c_str());
  in[0] = h;
  in[1] = ~h;
  PetscCallMPI(MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MIN, comm));
  if (out[0] == ~out[1]) PetscFunctionReturn(PETSC_SUCCESS);
  r[0] = h == out[0] ? rank : size;
  r[1] = h == ~out[1] ? rank : size;
  PetscCallMPI(MPI_Allreduce(r, rr, 2, MPI_INT, MPI_MIN, comm));
  std::string v[2], w[2];
  for (int k = 0; k < 2; k++) {
    int len = rank == rr[k] ? (int)mine.size() : 0;
    PetscCallMPI(MPI_Bcast(&len, 1, MPI_INT, rr[k], comm));
    std::vector<char> buf(len + 1, 0);
    if (rank == rr[k]) memcpy(buf.data(), mine.data(), len);
    PetscCallMPI(MPI_Bcast(buf.data(), len, MPI_CHAR, rr[k], comm));
    std::string both(buf.data(), len);
    size_t      sep = both.find('\x1f');
    w[k]            = both.substr(0, sep);
    v[k]            = sep == std::string::npos ? "" : both.substr(sep + 1);
  }
  const int          lo = PetscMin(rr[0], rr[1]), hi = PetscMax(rr[0], rr[1]);
  const int          il = rr[0] == lo ? 0 : 1, ih = 1 - il;
  const std::string &a = v[il], &b = v[ih];
  /* the ranks reached different checks: they took different paths through the program */
  PetscCheck(w[0] == w[1], PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "The ranks took different paths through the program (options or arguments that differ between ranks, such as -restart or a step count given to some ranks only?): at the same collective check, rank %d checks %s (\"%s\") while rank %d checks %s (\"%s\")", lo, w[il].c_str(), DDLineAround(a, 0).c_str(), hi, w[ih].c_str(), DDLineAround(b, 0).c_str());
  size_t pos = 0;
  while (pos < a.size() && pos < b.size() && a[pos] == b[pos]) pos++;
  SETERRQ(PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "%s differs between ranks (ranks %d and %d disagree; options or arguments must be the same on every rank): rank %d has \"%s\", rank %d has \"%s\"", what, lo, hi, lo, DDLineAround(a, pos).c_str(), hi, DDLineAround(b, pos).c_str());
}
DD_CXX_CATCH

/* Every option of the database as (name without the dash, value), in the order PETSc lists them */
static PetscErrorCode DDOptionsList(std::vector<std::pair<std::string, std::string>> &out)
{
  char                    *all = NULL;
  std::vector<std::string> tok;

  PetscFunctionBegin;
  out.clear();
  PetscCall(PetscOptionsGetAll(NULL, &all));
  for (char *c = all; c && *c;) {
    while (*c && isspace((unsigned char)*c)) c++;
    char *e = c;
    while (*e && !isspace((unsigned char)*e)) e++;
    if (e > c) tok.emplace_back(c, e - c);
    c = e;
  }
  PetscCall(PetscFree(all));
  auto isname = [](const std::string &t) { return t.size() >= 2 && t[0] == '-' && (isalpha((unsigned char)t[1]) || t[1] == '_'); };
  for (size_t i = 0; i < tok.size(); i++) {
    if (!isname(tok[i])) continue;
    std::string v;
    for (size_t j = i + 1; j < tok.size() && !isname(tok[j]); j++) v += (v.empty() ? "" : " ") + tok[j];
    out.emplace_back(tok[i].substr(1), v);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The options starting with prefix (no dash), as "-name value" lines sorted by name (PetscFree() the text) */
PetscErrorCode DDOptionsGetPrefixed_Private(const char prefix[], char **text)
DD_CXX_TRY
{
  std::vector<std::pair<std::string, std::string>> opts;
  std::vector<std::string>                         lines;
  std::string                                      r;
  size_t                                           plen = prefix ? strlen(prefix) : 0;

  PetscFunctionBegin;
  PetscCall(DDOptionsList(opts));
  for (auto &nv : opts)
    if (!plen || nv.first.compare(0, plen, prefix) == 0) lines.push_back("-" + nv.first + " " + nv.second + "\n");
  std::sort(lines.begin(), lines.end());
  for (auto &l : lines) r += l;
  PetscCall(PetscStrallocpy(r.c_str(), text));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDOptionsCheckIntegers - Raises an error naming every integer option whose value does not fit in a `PetscInt`

  Collective

  Input Parameters:
+ comm   - the communicator of the program (or of the object being configured)
- prefix - only check options starting with this prefix (without the dash), or NULL for all

  Notes:
  PETSc parses an integer option with strtol() and casts it to `PetscInt`: with 32-bit indices a
  kernel of 4294967299 runs as 3. Every value (or comma-separated entry) of the options that is
  an integer literal is checked against the range of `PetscInt`; one outside it is an error
  naming the option, on every rank. Options whose name ends in "seed" are left out: seeds are read
  as 64-bit integers. A string option whose value is a huge integer literal is rejected too.
  Called by the SetFromOptions() of layers, networks and optimizers, and by `DDOptionsCheckUnused()`.

  Level: developer

.seealso: `DDOptionsCheckUnused()`
@*/
PetscErrorCode DDOptionsCheckIntegers(MPI_Comm comm, const char prefix[])
DD_CXX_TRY
{
  std::vector<std::pair<std::string, std::string>> all_opts;
  std::string                                      bad;
  size_t                                           plen = prefix ? strlen(prefix) : 0;

  PetscFunctionBegin;
  PetscCall(DDOptionsList(all_opts));
  for (auto &nv : all_opts) {
    const std::string &name = nv.first;
    if (plen && name.compare(0, plen, prefix) != 0) continue;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "seed") == 0) continue; /* seeds are 64-bit integers (-layer_dropout_seed, -net_seed) */
    std::istringstream vs(nv.second);
    std::string        v;
    while (vs >> v) {
      size_t a = 0;
      while (a <= v.size()) {
        size_t      b = v.find(',', a);
        std::string e = v.substr(a, b == std::string::npos ? std::string::npos : b - a);
        size_t      k = (!e.empty() && (e[0] == '+' || e[0] == '-')) ? 1 : 0;
        bool        integer = e.size() > k;
        for (size_t q = k; q < e.size() && integer; q++) integer = isdigit((unsigned char)e[q]) != 0;
        if (integer) {
          errno            = 0;
          long long x      = strtoll(e.c_str(), NULL, 10);
          bool      inside = errno != ERANGE && x >= (long long)PETSC_MIN_INT && x <= (long long)PETSC_MAX_INT;
          if (!inside && bad.size() < 300) bad += " -" + name + " " + e;
        }
        if (b == std::string::npos) break;
        a = b + 1;
      }
    }
  }
  DDCheckAll(comm, bad.empty(), PETSC_ERR_ARG_OUTOFRANGE, "Integer option value(s) out of the range of PetscInt (%d-bit, [%" PetscInt_FMT ", %" PetscInt_FMT "]):%s", (int)(8 * sizeof(PetscInt)), (PetscInt)PETSC_MIN_INT, (PetscInt)PETSC_MAX_INT, bad.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDFinalize - Finalizes ddnn, and PETSc if `DDInitialize()` initialized it

  Collective on `PETSC_COMM_WORLD`

  Level: beginner

.seealso: `DDInitialize()`
@*/
PetscErrorCode DDFinalize(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (DDPushedErrorHandler) {
    PetscCall(PetscPopErrorHandler());
    DDPushedErrorHandler = PETSC_FALSE;
  }
  if (PetscTrMalloc == DDTrMalloc) {
    PetscTrMalloc  = DDTrMallocInner;
    PetscTrRealloc = DDTrReallocInner;
  }
  if (DDBeganPetsc) {
    DDBeganPetsc = PETSC_FALSE;
    PetscCall(PetscFinalize());
  } else PetscCall(DDFinalizePackage());
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDInitialized - Tells whether ddnn's package is initialized

  Output Parameter:
. flg - `PETSC_TRUE` if initialized

  Level: beginner

.seealso: `DDInitialize()`
@*/
PetscErrorCode DDInitialized(PetscBool *flg)
DD_CXX_TRY
{
  PetscFunctionBegin;
  *flg = DDPackageInitialized;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDDataTypeGetSize - Size in bytes of one element of a `DDDataType`

  Level: developer

.seealso: `DDDataType`
@*/
PetscErrorCode DDDataTypeGetSize(DDDataType dt, size_t *size)
DD_CXX_TRY
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
DD_CXX_CATCH

/*@
  DDDataTypeGetMPIType - The MPI datatype of one element of a `DDDataType`

  Level: developer

.seealso: `DDDataType`
@*/
PetscErrorCode DDDataTypeGetMPIType(DDDataType dt, MPI_Datatype *mt)
DD_CXX_TRY
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
DD_CXX_CATCH

/* a logically collective flag given differently on some rank: an error on every rank naming the setter and this
   rank's value (one all-reduce of (flg, -flg), MAX: equal everywhere when the two agree) */
PetscErrorCode DDCheckSameFlag_Private(MPI_Comm comm, PetscBool flg, const char setter[])
{
  int v[2] = {flg ? 1 : 0, flg ? -1 : 0}, w[2];

  PetscFunctionBegin;
  PetscCallMPI(MPI_Allreduce(v, w, 2, MPI_INT, MPI_MAX, comm));
  PetscCheck(w[0] == -w[1], comm, PETSC_ERR_ARG_WRONG, "%s() was given PETSC_TRUE on some ranks and PETSC_FALSE on others (this rank: %s); it is logically collective: give every rank the same value (a difference would leave the ranks in different collectives)", setter, flg ? "PETSC_TRUE" : "PETSC_FALSE");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDCheckCollective - Raises an error on every rank of comm when any rank reports a failure

  Collective

  Input Parameters:
+ comm - the communicator whose ranks all call this routine
. ok   - this rank's verdict
. code - the PETSc error code to raise (used when ok is false)
- msg  - this rank's message (used when ok is false)

  Notes:
  Argument checks that depend on rank-local data (a local halo width, a local piece size)
  must not error on some ranks only: the others would wait forever in the next collective.
  This routine agrees on the lowest failing rank and raises its code and message everywhere.
  Usually called through `DDCheckAll()`.

  Level: developer

.seealso: `DDCheckAll()`
@*/
PetscErrorCode DDCheckCollective(MPI_Comm comm, PetscBool ok, PetscErrorCode code, const char msg[])
DD_CXX_TRY
{
  PetscMPIInt rank, size, first, in;
  char        buf[512];
  int         c = (int)code;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  in = ok ? size : rank;
  PetscCall(MPIU_Allreduce(&in, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) PetscFunctionReturn(PETSC_SUCCESS);
  if (rank == first) PetscCall(PetscStrncpy(buf, msg, sizeof(buf)));
  PetscCallMPI(MPI_Bcast(buf, sizeof(buf), MPI_CHAR, first, comm));
  PetscCallMPI(MPI_Bcast(&c, 1, MPI_INT, first, comm)); /* the failing rank's code, where the ranks check for different reasons */
  if (size > 1) SETERRQ(PETSC_COMM_SELF, (PetscErrorCode)c, "%s [detected on rank %d]", buf, first);
  SETERRQ(PETSC_COMM_SELF, (PetscErrorCode)c, "%s", buf);
}
DD_CXX_CATCH

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
DD_CXX_TRY
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
  PetscCall(DDOptionsCheckIntegers(comm, prefix));
  DDCheckAll(comm, !bad, PETSC_ERR_ARG_WRONG, "Unknown or unused option(s):%s", buf);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* Helpers shared by the implementation */
PetscErrorCode DDSplitOwnership_Private(PetscInt n, PetscInt P, PetscInt ranges[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  ranges[0] = 0;
  for (PetscInt p = 0; p < P; p++) ranges[p + 1] = ranges[p] + n / P + ((n % P) > p ? 1 : 0);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDShapeToString_Private(PetscInt n, const PetscInt v[], char buf[], size_t len)
DD_CXX_TRY
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
DD_CXX_CATCH
