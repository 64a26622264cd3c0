/*
  capi_core.cxx - the binding ABI (ddnn_capi.h) of the package, DDPartition, DDTensor and
  DDPrimitive. Each entry point converts its arguments and forwards to the C function named
  in its man page.
*/
#include "capi.hpp"

using namespace ddcapi;

/* ------------------------------------------------------------------------------------------ */
/* package */

/*@C
  ddnn_capi_version - The version of the binding ABI (`DDNN_CAPI_VERSION`), to check a binding against the library

  Output Parameter:
. version - the ABI version

  Level: developer
@*/
int ddnn_capi_version(int *version)
{
  PetscFunctionBegin;
  PetscCall(Out(version, 1));
  *version = DDNN_CAPI_VERSION;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_initialize - ABI of `DDInitialize()` without command line arguments

  Input Parameters:
+ file, flen - an options file, or a null pointer
- help, hlen - help text, or a null pointer

  Notes:
  When PETSc is not yet initialized, it is initialized without arguments (options come from the
  file and PETSC_OPTIONS). The Fortran module initializes PETSc with Fortran's
  `PetscInitialize()` first, so that the command line is read, and then calls this.

  Level: developer
@*/
int ddnn_initialize(const char *file, ddnn_int flen, const char *help, ddnn_int hlen)
{
  Str f, h;

  PetscFunctionBegin;
  PetscCall(f.Set(file, flen, 1, true));
  PetscCall(h.Set(help, hlen, 3, true));
  PetscCall(DDInitialize(NULL, NULL, f.c(), h.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_finalize - ABI of `DDFinalize()`

  Level: developer
@*/
int ddnn_finalize(void)
{
  return DDFinalize();
}

/*@C
  ddnn_initialized - ABI of `DDInitialized()`: flg is 1 when ddnn's package is initialized

  Level: developer
@*/
int ddnn_initialized(int *flg)
{
  PetscBool b;

  PetscFunctionBegin;
  PetscCall(Out(flg, 1));
  PetscCall(DDInitialized(&b));
  *flg = b ? 1 : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_petsc_initialized - flg is 1 when PETSc is initialized (`PetscInitialized()`)

  Level: developer
@*/
int ddnn_petsc_initialized(int *flg)
{
  PetscBool b;

  PetscFunctionBegin;
  PetscCall(Out(flg, 1));
  PetscCall(PetscInitialized(&b));
  *flg = b ? 1 : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_push_error_handler_return - Pushes `PetscReturnErrorHandler()`: errors return their code without printing

  Notes:
  For bindings whose language cannot name `PetscReturnErrorHandler` (PETSc 3.18's Fortran
  interface has no such stub). Pop it with `ddnn_pop_error_handler()`.

  Level: developer
@*/
int ddnn_push_error_handler_return(void)
{
  return PetscPushErrorHandler(PetscReturnErrorHandler, NULL);
}

/*@C
  ddnn_pop_error_handler - ABI of `PetscPopErrorHandler()`

  Level: developer
@*/
int ddnn_pop_error_handler(void)
{
  return PetscPopErrorHandler();
}

/*@C
  ddnn_error_message - The message of the last error raised with the given code (`PetscErrorMessage()`)

  Input Parameters:
+ code   - an error code returned by an entry point
- buflen - capacity of buf

  Output Parameter:
. buf - the specific message of the most recent error (or the generic text of the code)

  Level: developer
@*/
int ddnn_error_message(int code, char *buf, ddnn_int buflen)
{
  const char *text = NULL;
  char       *spec = NULL;
  char        tmp[1024];

  PetscFunctionBegin;
  PetscCall(PetscErrorMessage((PetscErrorCode)code, &text, &spec));
  PetscCall(PetscStrncpy(tmp, spec && spec[0] ? spec : (text ? text : ""), sizeof(tmp)));
  if (buflen > 0 && (ddnn_int)std::strlen(tmp) >= buflen) tmp[buflen - 1] = 0; /* a message may be truncated */
  PetscCall(PutStr(tmp, buf, buflen, 2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_options_check_unused - ABI of `DDOptionsCheckUnused()`

  Level: developer
@*/
int ddnn_options_check_unused(ddnn_fint fcomm, const char *prefix, ddnn_int len)
{
  MPI_Comm comm;
  Str      p;

  PetscFunctionBegin;
  PetscCall(Comm(fcomm, &comm));
  PetscCall(p.Set(prefix, len, 2, true));
  PetscCall(DDOptionsCheckUnused(comm, p.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* partition */

/*@C
  ddnn_partition_create - ABI of `DDPartitionCreate()`

  Level: developer
@*/
int ddnn_partition_create(ddnn_fint fcomm, ddnn_handle *part)
{
  return Create<DDPartition>(fcomm, part, DDPartitionCreate);
}

/*@C
  ddnn_partition_set_shape - ABI of `DDPartitionSetShape()`

  Level: developer
@*/
int ddnn_partition_set_shape(ddnn_handle ph, ddnn_int order, const ddnn_int shape[])
{
  DDPartition           p;
  std::vector<PetscInt> s;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(IntArray(order, shape, DD_MAX_DIM, 3, s));
  PetscCall(DDPartitionSetShape(p, (PetscInt)order, s.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_set_from_options - ABI of `DDPartitionSetFromOptions()`

  Level: developer
@*/
int ddnn_partition_set_from_options(ddnn_handle ph)
{
  return Call<DDPartition>(ph, DDPartitionSetFromOptions);
}

/*@C
  ddnn_partition_set_up - ABI of `DDPartitionSetUp()`

  Level: developer
@*/
int ddnn_partition_set_up(ddnn_handle ph)
{
  return Call<DDPartition>(ph, DDPartitionSetUp);
}

/*@C
  ddnn_partition_create_cartesian - ABI of `DDPartitionCreateCartesian()`; nranks < 0 (`PETSC_DECIDE`) uses the first ranks of comm

  Level: developer
@*/
int ddnn_partition_create_cartesian(ddnn_fint fcomm, ddnn_int order, const ddnn_int shape[], ddnn_int nranks, const int ranks[], ddnn_handle *part)
{
  MPI_Comm                 comm;
  std::vector<PetscInt>    s;
  std::vector<PetscMPIInt> r;
  DDPartition              p;

  PetscFunctionBegin;
  PetscCall(Comm(fcomm, &comm));
  PetscCall(IntArray(order, shape, DD_MAX_DIM, 3, s));
  PetscCall(Out(part, 6));
  if (nranks >= 0) {
    PetscCheck(nranks == 0 || ranks, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null array of ranks (argument 5)");
    r.assign(ranks, ranks + nranks);
  }
  PetscCall(DDPartitionCreateCartesian(comm, (PetscInt)order, s.data(), nranks >= 0 ? (PetscInt)nranks : PETSC_DECIDE, nranks >= 0 ? r.data() : NULL, &p));
  *part = (ddnn_handle)p;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_create_from_dmda - ABI of `DDPartitionCreateFromDMDA()`

  Level: developer
@*/
int ddnn_partition_create_from_dmda(ddnn_petsc_handle dah, ddnn_int nlead, ddnn_handle *part)
{
  DM          da;
  PetscInt    lead;
  DDPartition p;

  PetscFunctionBegin;
  PetscCall(Get(dah, 1, &da));
  PetscCall(Int(nlead, 2, &lead));
  PetscCall(Out(part, 3));
  PetscCall(DDPartitionCreateFromDMDA(da, lead, &p));
  *part = (ddnn_handle)p;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_get_order - ABI of `DDPartitionGetOrder()`

  Level: developer
@*/
int ddnn_partition_get_order(ddnn_handle ph, ddnn_int *order)
{
  DDPartition p;
  PetscInt    o;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Out(order, 2));
  PetscCall(DDPartitionGetOrder(p, &o));
  *order = o;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_get_shape - ABI of `DDPartitionGetShape()`: the shape copied into an array of capacity cap

  Level: developer
@*/
int ddnn_partition_get_shape(ddnn_handle ph, ddnn_int cap, ddnn_int shape[])
{
  DDPartition     p;
  PetscInt        o;
  const PetscInt *s;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(DDPartitionGetOrder(p, &o));
  PetscCall(DDPartitionGetShape(p, &s));
  PetscCall(PutInts(o, s, cap, shape, 3));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_get_size - ABI of `DDPartitionGetSize()`

  Level: developer
@*/
int ddnn_partition_get_size(ddnn_handle ph, ddnn_int *size)
{
  DDPartition p;
  PetscInt    n;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Out(size, 2));
  PetscCall(DDPartitionGetSize(p, &n));
  *size = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_get_index - ABI of `DDPartitionGetIndex()` (-1 on idle ranks)

  Level: developer
@*/
int ddnn_partition_get_index(ddnn_handle ph, ddnn_int *index)
{
  DDPartition p;
  PetscInt    i;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Out(index, 2));
  PetscCall(DDPartitionGetIndex(p, &i));
  *index = i;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_get_coordinates - ABI of `DDPartitionGetCoordinates()`

  Level: developer
@*/
int ddnn_partition_get_coordinates(ddnn_handle ph, ddnn_int cap, ddnn_int coords[])
{
  DDPartition p;
  PetscInt    o, c[DD_MAX_DIM];

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(DDPartitionGetOrder(p, &o));
  PetscCall(DDPartitionGetCoordinates(p, c));
  PetscCall(PutInts(o, c, cap, coords, 3));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_is_active - ABI of `DDPartitionIsActive()`

  Level: developer
@*/
int ddnn_partition_is_active(ddnn_handle ph, int *active)
{
  DDPartition p;
  PetscBool   b;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Out(active, 2));
  PetscCall(DDPartitionIsActive(p, &b));
  *active = b ? 1 : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_partition_view - ABI of `DDPartitionView()`

  Level: developer
@*/
int ddnn_partition_view(ddnn_handle ph, ddnn_petsc_handle vh)
{
  return View<DDPartition>(ph, vh, DDPartitionView);
}

/*@C
  ddnn_partition_destroy - ABI of `DDPartitionDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_partition_destroy(ddnn_handle *ph)
{
  return Destroy<DDPartition>(ph, DDPartitionDestroy);
}

/* ------------------------------------------------------------------------------------------ */
/* tensor */

/*@C
  ddnn_tensor_create - ABI of `DDTensorCreate()`

  Level: developer
@*/
int ddnn_tensor_create(ddnn_fint fcomm, ddnn_handle *th)
{
  return Create<DDTensor>(fcomm, th, DDTensorCreate);
}

/*@C
  ddnn_tensor_set_partition - ABI of `DDTensorSetPartition()`

  Level: developer
@*/
int ddnn_tensor_set_partition(ddnn_handle th, ddnn_handle ph)
{
  DDTensor    t;
  DDPartition p;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Get(ph, 2, &p));
  PetscCall(DDTensorSetPartition(t, p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_shape - ABI of `DDTensorSetShape()`

  Level: developer
@*/
int ddnn_tensor_set_shape(ddnn_handle th, ddnn_int order, const ddnn_int shape[])
{
  DDTensor              t;
  std::vector<PetscInt> s;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(IntArray(order, shape, DD_MAX_DIM, 3, s));
  PetscCall(DDTensorSetShape(t, (PetscInt)order, s.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_data_type - ABI of `DDTensorSetDataType()`: dtype is a `DDDataType` value

  Level: developer
@*/
int ddnn_tensor_set_data_type(ddnn_handle th, int dtype)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Enum(dtype, 2, "DDDataType", 2));
  PetscCall(DDTensorSetDataType(t, (DDDataType)dtype));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_ownership_ranges - ABI of `DDTensorSetOwnershipRanges()`: n sizes, n the partition's extent along dim

  Level: developer
@*/
int ddnn_tensor_set_ownership_ranges(ddnn_handle th, ddnn_int dim, ddnn_int n, const ddnn_int lx[])
{
  DDTensor              t;
  DDPartition           p;
  PetscInt              d, order;
  const PetscInt       *pshape;
  std::vector<PetscInt> l;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Int(dim, 2, &d));
  PetscCall(DDTensorGetPartition(t, &p));
  PetscCheck(p, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Set the tensor's partition before its ownership ranges");
  PetscCall(DDPartitionGetOrder(p, &order));
  PetscCall(DDPartitionGetShape(p, &pshape));
  PetscCheck(d >= 0 && d < order, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " (argument 2) is not one of the partition's %" PetscInt_FMT, d, order);
  PetscCheck(n == pshape[d], PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "%" PetscInt64_FMT " sizes given (argument 3) along dimension %" PetscInt_FMT ", which the partition splits in %" PetscInt_FMT, (PetscInt64)n, d, pshape[d]);
  PetscCall(IntArray(n, lx, n, 4, l));
  PetscCall(DDTensorSetOwnershipRanges(t, d, l.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_format - ABI of `DDTensorSetFormat()`: format is a `DDTensorFormat` value

  Level: developer
@*/
int ddnn_tensor_set_format(ddnn_handle th, int format)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Enum(format, 3, "DDTensorFormat", 2));
  PetscCall(DDTensorSetFormat(t, (DDTensorFormat)format));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_halo - ABI of `DDTensorSetHalo()`: order widths before (lo) and after (hi) the bulk

  Level: developer
@*/
int ddnn_tensor_set_halo(ddnn_handle th, ddnn_int order, const ddnn_int lo[], const ddnn_int hi[])
{
  DDTensor              t;
  PetscInt              o;
  std::vector<PetscInt> l, h;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorGetOrder(t, &o));
  PetscCheck(order == o, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "%" PetscInt64_FMT " halo widths given for a tensor of order %" PetscInt_FMT, (PetscInt64)order, o);
  PetscCall(IntArray(order, lo, DD_MAX_DIM, 3, l));
  PetscCall(IntArray(order, hi, DD_MAX_DIM, 4, h));
  PetscCall(DDTensorSetHalo(t, l.data(), h.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_from_options - ABI of `DDTensorSetFromOptions()`

  Level: developer
@*/
int ddnn_tensor_set_from_options(ddnn_handle th)
{
  return Call<DDTensor>(th, DDTensorSetFromOptions);
}

/*@C
  ddnn_tensor_set_up - ABI of `DDTensorSetUp()`

  Level: developer
@*/
int ddnn_tensor_set_up(ddnn_handle th)
{
  return Call<DDTensor>(th, DDTensorSetUp);
}

/*@C
  ddnn_tensor_create_from_partition - ABI of `DDTensorCreateFromPartition()`

  Level: developer
@*/
int ddnn_tensor_create_from_partition(ddnn_handle ph, int dtype, ddnn_int order, const ddnn_int shape[], ddnn_handle *th)
{
  DDPartition           p;
  DDTensor              t;
  std::vector<PetscInt> s;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Enum(dtype, 2, "DDDataType", 2));
  PetscCall(IntArray(order, shape, DD_MAX_DIM, 4, s));
  PetscCall(Out(th, 5));
  PetscCall(DDTensorCreateFromPartition(p, (DDDataType)dtype, (PetscInt)order, s.data(), &t));
  *th = (ddnn_handle)t;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_create_from_dmda - ABI of `DDTensorCreateFromDMDA()`

  Level: developer
@*/
int ddnn_tensor_create_from_dmda(ddnn_petsc_handle dah, int dtype, ddnn_handle *th)
{
  DM       da;
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(dah, 1, &da));
  PetscCall(Enum(dtype, 2, "DDDataType", 2));
  PetscCall(Out(th, 3));
  PetscCall(DDTensorCreateFromDMDA(da, (DDDataType)dtype, &t));
  *th = (ddnn_handle)t;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_duplicate - ABI of `DDTensorDuplicate()`

  Level: developer
@*/
int ddnn_tensor_duplicate(ddnn_handle th, ddnn_handle *dup)
{
  DDTensor t, d;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(dup, 2));
  PetscCall(DDTensorDuplicate(t, &d));
  *dup = (ddnn_handle)d;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_order - ABI of `DDTensorGetOrder()`

  Level: developer
@*/
int ddnn_tensor_get_order(ddnn_handle th, ddnn_int *order)
{
  DDTensor t;
  PetscInt o;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(order, 2));
  PetscCall(DDTensorGetOrder(t, &o));
  *order = o;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_shape - ABI of `DDTensorGetShape()`: the global shape (C order) into an array of capacity cap

  Level: developer
@*/
int ddnn_tensor_get_shape(ddnn_handle th, ddnn_int cap, ddnn_int shape[])
{
  DDTensor        t;
  PetscInt        o;
  const PetscInt *s;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorGetOrder(t, &o));
  PetscCall(DDTensorGetShape(t, &s));
  PetscCall(PutInts(o, s, cap, shape, 3));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_size - ABI of `DDTensorGetSize()` (global number of entries)

  Level: developer
@*/
int ddnn_tensor_get_size(ddnn_handle th, ddnn_int *size)
{
  DDTensor t;
  PetscInt n;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(size, 2));
  PetscCall(DDTensorGetSize(t, &n));
  *size = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_local_size - ABI of `DDTensorGetLocalSize()` (entries of this rank's bulk)

  Level: developer
@*/
int ddnn_tensor_get_local_size(ddnn_handle th, ddnn_int *size)
{
  DDTensor t;
  PetscInt n;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(size, 2));
  PetscCall(DDTensorGetLocalSize(t, &n));
  *size = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_data_type - ABI of `DDTensorGetDataType()`

  Level: developer
@*/
int ddnn_tensor_get_data_type(ddnn_handle th, int *dtype)
{
  DDTensor   t;
  DDDataType dt;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(dtype, 2));
  PetscCall(DDTensorGetDataType(t, &dt));
  *dtype = (int)dt;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_format - ABI of `DDTensorGetFormat()`

  Level: developer
@*/
int ddnn_tensor_get_format(ddnn_handle th, int *format)
{
  DDTensor       t;
  DDTensorFormat f;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(format, 2));
  PetscCall(DDTensorGetFormat(t, &f));
  *format = (int)f;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_partition - ABI of `DDTensorGetPartition()` (a borrowed handle)

  Level: developer
@*/
int ddnn_tensor_get_partition(ddnn_handle th, ddnn_handle *ph)
{
  DDTensor    t;
  DDPartition p;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(ph, 2));
  PetscCall(DDTensorGetPartition(t, &p));
  *ph = (ddnn_handle)p;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_corners - ABI of `DDTensorGetCorners()`: global start and size of this rank's bulk, in C order

  Level: developer
@*/
int ddnn_tensor_get_corners(ddnn_handle th, ddnn_int cap, ddnn_int start[], ddnn_int n[])
{
  DDTensor t;
  PetscInt o, s[DD_MAX_DIM], m[DD_MAX_DIM];

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorGetOrder(t, &o));
  PetscCall(DDTensorGetCorners(t, s, m));
  PetscCall(PutInts(o, s, cap, start, 3));
  PetscCall(PutInts(o, m, cap, n, 4));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_halo - ABI of `DDTensorGetHalo()`

  Level: developer
@*/
int ddnn_tensor_get_halo(ddnn_handle th, ddnn_int cap, ddnn_int lo[], ddnn_int hi[])
{
  DDTensor t;
  PetscInt o, l[DD_MAX_DIM], h[DD_MAX_DIM];

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorGetOrder(t, &o));
  PetscCall(DDTensorGetHalo(t, l, h));
  PetscCall(PutInts(o, l, cap, lo, 3));
  PetscCall(PutInts(o, h, cap, hi, 4));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_get_ownership_ranges - ABI of `DDTensorGetOwnershipRanges()`: *n = P_dim + 1 offsets into an array of capacity cap (0 and the extent for a replicated dimension)

  Level: developer
@*/
int ddnn_tensor_get_ownership_ranges(ddnn_handle th, ddnn_int dim, ddnn_int cap, ddnn_int ranges[], ddnn_int *n)
{
  DDTensor        t;
  DDPartition     p;
  PetscInt        d, order, np;
  const PetscInt *r, *pshape;
  PetscBool       rep;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Int(dim, 2, &d));
  PetscCall(Out(n, 5));
  PetscCall(DDTensorGetOrder(t, &order));
  PetscCheck(d >= 0 && d < order, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Dimension %" PetscInt_FMT " (argument 2) is not one of the tensor's %" PetscInt_FMT, d, order);
  PetscCall(DDTensorGetPartition(t, &p));
  PetscCall(DDPartitionGetShape(p, &pshape));
  PetscCall(DDTensorGetReplicated(t, d, &rep));
  if (rep) { /* every coordinate owns the whole extent */
    const PetscInt *shape;
    PetscInt        whole[2] = {0, 0};
    PetscCall(DDTensorGetShape(t, &shape));
    whole[1] = shape[d];
    np       = 2;
    PetscCall(PutInts(np, whole, cap, ranges, 4));
  } else {
    PetscCall(DDTensorGetOwnershipRanges(t, d, &r));
    np = pshape[d] + 1;
    PetscCall(PutInts(np, r, cap, ranges, 4));
  }
  *n = np;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_is_active - ABI of `DDTensorIsActive()`

  Level: developer
@*/
int ddnn_tensor_is_active(ddnn_handle th, int *active)
{
  DDTensor  t;
  PetscBool b;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(active, 2));
  PetscCall(DDTensorIsActive(t, &b));
  *active = b ? 1 : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_zero_entries - ABI of `DDTensorZeroEntries()`

  Level: developer
@*/
int ddnn_tensor_zero_entries(ddnn_handle th)
{
  return Call<DDTensor>(th, DDTensorZeroEntries);
}

/*@C
  ddnn_tensor_set - ABI of `DDTensorSet()`

  Level: developer
@*/
int ddnn_tensor_set(ddnn_handle th, double alpha)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorSet(t, alpha));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_scale - ABI of `DDTensorScale()`

  Level: developer
@*/
int ddnn_tensor_scale(ddnn_handle th, double alpha)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorScale(t, alpha));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_copy - ABI of `DDTensorCopy()`: y = x

  Level: developer
@*/
int ddnn_tensor_copy(ddnn_handle xh, ddnn_handle yh)
{
  DDTensor x, y;

  PetscFunctionBegin;
  PetscCall(Get(xh, 1, &x));
  PetscCall(Get(yh, 2, &y));
  PetscCall(DDTensorCopy(x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_axpy - ABI of `DDTensorAXPY()`: y += alpha x

  Level: developer
@*/
int ddnn_tensor_axpy(ddnn_handle yh, double alpha, ddnn_handle xh)
{
  DDTensor x, y;

  PetscFunctionBegin;
  PetscCall(Get(yh, 1, &y));
  PetscCall(Get(xh, 3, &x));
  PetscCall(DDTensorAXPY(y, alpha, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_axpby - ABI of `DDTensorAXPBY()`: y = alpha x + beta y

  Level: developer
@*/
int ddnn_tensor_axpby(ddnn_handle yh, double alpha, double beta, ddnn_handle xh)
{
  DDTensor x, y;

  PetscFunctionBegin;
  PetscCall(Get(yh, 1, &y));
  PetscCall(Get(xh, 4, &x));
  PetscCall(DDTensorAXPBY(y, alpha, beta, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_dot - ABI of `DDTensorDot()`

  Level: developer
@*/
int ddnn_tensor_dot(ddnn_handle xh, ddnn_handle yh, double *dot)
{
  DDTensor  x, y;
  PetscReal d;

  PetscFunctionBegin;
  PetscCall(Get(xh, 1, &x));
  PetscCall(Get(yh, 2, &y));
  PetscCall(Out(dot, 3));
  PetscCall(DDTensorDot(x, y, &d));
  *dot = d;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_norm - ABI of `DDTensorNorm()`: type is a `NormType` value (`NORM_1`, `NORM_2`, `NORM_FROBENIUS`, `NORM_INFINITY`)

  Level: developer
@*/
int ddnn_tensor_norm(ddnn_handle th, int type, double *nrm)
{
  DDTensor  t;
  PetscReal v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Enum(type, 4, "NormType", 2));
  PetscCall(Out(nrm, 3));
  PetscCall(DDTensorNorm(t, (NormType)type, &v));
  *nrm = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_sum - ABI of `DDTensorSum()`

  Level: developer
@*/
int ddnn_tensor_sum(ddnn_handle th, double *sum)
{
  DDTensor  t;
  PetscReal v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(sum, 2));
  PetscCall(DDTensorSum(t, &v));
  *sum = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_max_abs_diff - ABI of `DDTensorMaxAbsDiff()`

  Level: developer
@*/
int ddnn_tensor_max_abs_diff(ddnn_handle xh, ddnn_handle yh, double *diff)
{
  DDTensor  x, y;
  PetscReal v;

  PetscFunctionBegin;
  PetscCall(Get(xh, 1, &x));
  PetscCall(Get(yh, 2, &y));
  PetscCall(Out(diff, 3));
  PetscCall(DDTensorMaxAbsDiff(x, y, &v));
  *diff = v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_random_global - ABI of `DDTensorSetRandomGlobal()`

  Level: developer
@*/
int ddnn_tensor_set_random_global(ddnn_handle th, int64_t seed, double lo, double hi)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(DDTensorSetRandomGlobal(t, (PetscInt64)seed, lo, hi));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* an array of count entries of type dtype (argument arg) for the whole tensor */
static PetscErrorCode CheckGlobalArray(DDTensor t, int dtype, const void *values, ddnn_int count, int arg)
{
  PetscInt   n;
  DDDataType dt;

  PetscFunctionBegin;
  PetscCheck(values, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null array of values (argument %d)", arg);
  PetscCall(DDTensorGetSize(t, &n));
  PetscCall(DDTensorGetDataType(t, &dt));
  PetscCheck(dtype == (int)dt, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Array of %s values (argument %d) for a %s tensor", dtype >= 0 && dtype <= 1 ? DDDataTypes[dtype] : "unknown", arg, DDDataTypes[dt]);
  PetscCheck(count == n, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Array of %" PetscInt64_FMT " entries (argument %d) for a tensor of %" PetscInt_FMT " entries", (PetscInt64)count, arg, n);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_set_values_global - ABI of `DDTensorSetValuesGlobal()`: values holds count (the global size) entries of type dtype (the tensor's `DDDataType`)

  Level: developer
@*/
int ddnn_tensor_set_values_global(ddnn_handle th, int dtype, const void *values, ddnn_int count)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(CheckGlobalArray(t, dtype, values, count, 3));
  PetscCall(DDTensorSetValuesGlobal(t, values));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_scatter_from_root - ABI of `DDTensorScatterFromRoot()`: on root, values holds count (the global size) entries of type dtype

  Level: developer
@*/
int ddnn_tensor_scatter_from_root(ddnn_handle th, int root, int dtype, const void *values, ddnn_int count)
{
  DDTensor    t;
  PetscMPIInt rank;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)t), &rank));
  if (rank == root) PetscCall(CheckGlobalArray(t, dtype, values, count, 4));
  PetscCall(DDTensorScatterFromRoot(t, root, values));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_gather_to_root - ABI of `DDTensorGatherToRoot()`: on root, values receives count (the global size) entries of type dtype

  Level: developer
@*/
int ddnn_tensor_gather_to_root(ddnn_handle th, int root, int dtype, void *values, ddnn_int count)
{
  DDTensor    t;
  PetscMPIInt rank;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)t), &rank));
  if (rank == root) PetscCall(CheckGlobalArray(t, dtype, values, count, 4));
  PetscCall(DDTensorGatherToRoot(t, root, values));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_place_vec - ABI of `DDTensorPlaceVec()`

  Level: developer
@*/
int ddnn_tensor_place_vec(ddnn_handle th, ddnn_petsc_handle vh)
{
  DDTensor t;
  Vec      v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Get(vh, 2, &v));
  PetscCall(DDTensorPlaceVec(t, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_reset_vec - ABI of `DDTensorResetVec()`

  Level: developer
@*/
int ddnn_tensor_reset_vec(ddnn_handle th, ddnn_petsc_handle vh)
{
  DDTensor t;
  Vec      v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Get(vh, 2, &v));
  PetscCall(DDTensorResetVec(t, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_copy_from_vec - ABI of `DDTensorCopyFromVec()`

  Level: developer
@*/
int ddnn_tensor_copy_from_vec(ddnn_handle th, ddnn_petsc_handle vh)
{
  DDTensor t;
  Vec      v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Get(vh, 2, &v));
  PetscCall(DDTensorCopyFromVec(t, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_copy_to_vec - ABI of `DDTensorCopyToVec()`

  Level: developer
@*/
int ddnn_tensor_copy_to_vec(ddnn_handle th, ddnn_petsc_handle vh)
{
  DDTensor t;
  Vec      v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Get(vh, 2, &v));
  PetscCall(DDTensorCopyToVec(t, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_create_vec - ABI of `DDTensorCreateVec()`: *vh receives the new Vec's handle (destroy it with VecDestroy())

  Level: developer
@*/
int ddnn_tensor_create_vec(ddnn_handle th, ddnn_petsc_handle *vh)
{
  DDTensor t;
  Vec      v;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(Out(vh, 2));
  PetscCall(DDTensorCreateVec(t, &v));
  *vh = (ddnn_petsc_handle)v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_write_hdf5 - ABI of `DDTensorWriteHDF5()`

  Level: developer
@*/
int ddnn_tensor_write_hdf5(ddnn_handle th, const char *file, ddnn_int flen, const char *name, ddnn_int nlen, int append)
{
  DDTensor t;
  Str      f, n;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(f.Set(file, flen, 2));
  PetscCall(n.Set(name, nlen, 4));
  PetscCall(DDTensorWriteHDF5(t, f.c(), n.c(), append ? PETSC_TRUE : PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_read_hdf5 - ABI of `DDTensorReadHDF5()`

  Level: developer
@*/
int ddnn_tensor_read_hdf5(ddnn_handle th, const char *file, ddnn_int flen, const char *name, ddnn_int nlen)
{
  DDTensor t;
  Str      f, n;

  PetscFunctionBegin;
  PetscCall(Get(th, 1, &t));
  PetscCall(f.Set(file, flen, 2));
  PetscCall(n.Set(name, nlen, 4));
  PetscCall(DDTensorReadHDF5(t, f.c(), n.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_view - ABI of `DDTensorView()`

  Level: developer
@*/
int ddnn_tensor_view(ddnn_handle th, ddnn_petsc_handle vh)
{
  return View<DDTensor>(th, vh, DDTensorView);
}

/*@C
  ddnn_tensor_destroy - ABI of `DDTensorDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_tensor_destroy(ddnn_handle *th)
{
  return Destroy<DDTensor>(th, DDTensorDestroy);
}

/*@C
  ddnn_tensor_create_broadcast - ABI of `DDTensorCreateBroadcast()`

  Level: developer
@*/
int ddnn_tensor_create_broadcast(ddnn_handle xh, ddnn_handle ph, ddnn_handle *yh)
{
  DDTensor    x, y;
  DDPartition p;

  PetscFunctionBegin;
  PetscCall(Get(xh, 1, &x));
  PetscCall(Get(ph, 2, &p));
  PetscCall(Out(yh, 3));
  PetscCall(DDTensorCreateBroadcast(x, p, &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_create_sum_reduce - ABI of `DDTensorCreateSumReduce()`

  Level: developer
@*/
int ddnn_tensor_create_sum_reduce(ddnn_handle xh, ddnn_handle ph, ddnn_handle *yh)
{
  DDTensor    x, y;
  DDPartition p;

  PetscFunctionBegin;
  PetscCall(Get(xh, 1, &x));
  PetscCall(Get(ph, 2, &p));
  PetscCall(Out(yh, 3));
  PetscCall(DDTensorCreateSumReduce(x, p, &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_tensor_create_repartition - ABI of `DDTensorCreateRepartition()`

  Level: developer
@*/
int ddnn_tensor_create_repartition(ddnn_handle xh, ddnn_handle ph, ddnn_handle *yh)
{
  DDTensor    x, y;
  DDPartition p;

  PetscFunctionBegin;
  PetscCall(Get(xh, 1, &x));
  PetscCall(Get(ph, 2, &p));
  PetscCall(Out(yh, 3));
  PetscCall(DDTensorCreateRepartition(x, p, &y));
  *yh = (ddnn_handle)y;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* primitive */

/*@C
  ddnn_primitive_create - ABI of `DDPrimitiveCreate()`

  Level: developer
@*/
int ddnn_primitive_create(ddnn_fint fcomm, ddnn_handle *ph)
{
  return Create<DDPrimitive>(fcomm, ph, DDPrimitiveCreate);
}

/*@C
  ddnn_primitive_set_type - ABI of `DDPrimitiveSetType()`

  Level: developer
@*/
int ddnn_primitive_set_type(ddnn_handle ph, const char *type, ddnn_int len)
{
  return CallStr<DDPrimitive>(ph, type, len, DDPrimitiveSetType);
}

/*@C
  ddnn_primitive_get_type - ABI of `DDPrimitiveGetType()`: the type name into buf (empty when unset)

  Level: developer
@*/
int ddnn_primitive_get_type(ddnn_handle ph, char *buf, ddnn_int buflen)
{
  DDPrimitive     p;
  DDPrimitiveType type;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(DDPrimitiveGetType(p, &type));
  PetscCall(PutStr(type, buf, buflen, 2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_set_options_prefix - ABI of `DDPrimitiveSetOptionsPrefix()`

  Level: developer
@*/
int ddnn_primitive_set_options_prefix(ddnn_handle ph, const char *prefix, ddnn_int len)
{
  DDPrimitive p;
  Str         s;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(s.Set(prefix, len, 2, true));
  PetscCall(DDPrimitiveSetOptionsPrefix(p, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_set_from_options - ABI of `DDPrimitiveSetFromOptions()`

  Level: developer
@*/
int ddnn_primitive_set_from_options(ddnn_handle ph)
{
  return Call<DDPrimitive>(ph, DDPrimitiveSetFromOptions);
}

/*@C
  ddnn_primitive_set_up - ABI of `DDPrimitiveSetUp()`; y may be 0 for the in-place halo exchange

  Level: developer
@*/
int ddnn_primitive_set_up(ddnn_handle ph, ddnn_handle xh, ddnn_handle yh)
{
  DDPrimitive p;
  DDTensor    x, y;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Get(xh, 2, &x));
  PetscCall(Get(yh, 3, &y, true));
  PetscCall(DDPrimitiveSetUp(p, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_apply - ABI of `DDPrimitiveApply()`: y = F x; y may be 0 for the in-place halo exchange

  Level: developer
@*/
int ddnn_primitive_apply(ddnn_handle ph, ddnn_handle xh, ddnn_handle yh)
{
  DDPrimitive p;
  DDTensor    x, y;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Get(xh, 2, &x));
  PetscCall(Get(yh, 3, &y, true));
  PetscCall(DDPrimitiveApply(p, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_apply_adjoint - ABI of `DDPrimitiveApplyAdjoint()`: x = F* y; x may be 0 for the in-place halo exchange

  Level: developer
@*/
int ddnn_primitive_apply_adjoint(ddnn_handle ph, ddnn_handle yh, ddnn_handle xh)
{
  DDPrimitive p;
  DDTensor    x, y;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Get(yh, 2, &y));
  PetscCall(Get(xh, 3, &x, true));
  PetscCall(DDPrimitiveApplyAdjoint(p, y, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_adjoint_test - ABI of `DDPrimitiveAdjointTest()`; x and y may be 0

  Level: developer
@*/
int ddnn_primitive_adjoint_test(ddnn_handle ph, ddnn_handle xh, ddnn_handle yh, int64_t seed, double *err)
{
  DDPrimitive p;
  DDTensor    x, y;
  PetscReal   e;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Get(xh, 2, &x, true));
  PetscCall(Get(yh, 3, &y, true));
  PetscCall(Out(err, 5));
  PetscCall(DDPrimitiveAdjointTest(p, x, y, (PetscInt64)seed, &e));
  *err = e;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_halo_set_kernel - ABI of `DDPrimitiveHaloSetKernel()`

  Level: developer
@*/
int ddnn_primitive_halo_set_kernel(ddnn_handle ph, ddnn_int dim, ddnn_int k, ddnn_int s, ddnn_int d, ddnn_int pad, ddnn_int nout)
{
  DDPrimitive p;
  PetscInt    a[6];

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Int(dim, 2, &a[0]));
  PetscCall(Int(k, 3, &a[1]));
  PetscCall(Int(s, 4, &a[2]));
  PetscCall(Int(d, 5, &a[3]));
  PetscCall(Int(pad, 6, &a[4]));
  PetscCall(Int(nout, 7, &a[5]));
  PetscCall(DDPrimitiveHaloSetKernel(p, a[0], a[1], a[2], a[3], a[4], a[5]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_halo_set_padding - ABI of `DDPrimitiveHaloSetPadding()`: mode is a `DDPaddingMode` value

  Level: developer
@*/
int ddnn_primitive_halo_set_padding(ddnn_handle ph, ddnn_int dim, int mode)
{
  DDPrimitive p;
  PetscInt    d;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Int(dim, 2, &d));
  PetscCall(Enum(mode, 4, "DDPaddingMode", 3));
  PetscCall(DDPrimitiveHaloSetPadding(p, d, (DDPaddingMode)mode));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_halo_set_pad_value - ABI of `DDPrimitiveHaloSetPadValue()`

  Level: developer
@*/
int ddnn_primitive_halo_set_pad_value(ddnn_handle ph, double value)
{
  DDPrimitive p;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(DDPrimitiveHaloSetPadValue(p, value));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_halo_set_window - ABI of `DDPrimitiveHaloSetWindow()`

  Level: developer
@*/
int ddnn_primitive_halo_set_window(ddnn_handle ph, ddnn_int dim, ddnn_int lo, ddnn_int hi)
{
  DDPrimitive p;
  PetscInt    d, a, b;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(Int(dim, 2, &d));
  PetscCall(Int(lo, 3, &a));
  PetscCall(Int(hi, 4, &b));
  PetscCall(DDPrimitiveHaloSetWindow(p, d, a, b));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_allsumreduce_set_dimensions - ABI of `DDPrimitiveAllSumReduceSetDimensions()`

  Level: developer
@*/
int ddnn_primitive_allsumreduce_set_dimensions(ddnn_handle ph, ddnn_int n, const ddnn_int dims[])
{
  DDPrimitive           p;
  std::vector<PetscInt> d;

  PetscFunctionBegin;
  PetscCall(Get(ph, 1, &p));
  PetscCall(IntArray(n, dims, DD_MAX_DIM, 3, d));
  PetscCall(DDPrimitiveAllSumReduceSetDimensions(p, (PetscInt)n, d.data()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  ddnn_primitive_view - ABI of `DDPrimitiveView()`

  Level: developer
@*/
int ddnn_primitive_view(ddnn_handle ph, ddnn_petsc_handle vh)
{
  return View<DDPrimitive>(ph, vh, DDPrimitiveView);
}

/*@C
  ddnn_primitive_destroy - ABI of `DDPrimitiveDestroy()`; zeroes the handle

  Level: developer
@*/
int ddnn_primitive_destroy(ddnn_handle *ph)
{
  return Destroy<DDPrimitive>(ph, DDPrimitiveDestroy);
}
