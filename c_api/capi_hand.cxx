/*
  capi_hand.cxx - the entry points of the binding ABI written by hand: those whose conversion needs
  judgment (c_api/bindings.txt lists the C functions they cover, each marked "hand" with its reason;
  the reason is repeated above each function). Every other entry point is generated from the public
  headers by c_api/generate.py (capi_generated.cxx in the build tree). c_api/generate.py reads the
  prototypes of this file (lines "int ddnn_xxx(...)") for ddnn_capi.h and module ddnn_capi.
*/
#include "capi.hpp"

using namespace ddcapi;

/* parameters and their gradients into arrays of capacity cap; cap = 0 (or null arrays) only counts them */
static PetscErrorCode PutParams(PetscInt np, DDTensor *ps, DDTensor *gs, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n)
{
  PetscFunctionBegin;
  PetscCall(Out(n, 5));
  *n = np;
  if (cap == 0 || !(params || grads)) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCheck(cap >= np, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Room for %" PetscInt64_FMT " parameter tensors (argument 2); there are %" PetscInt_FMT, (PetscInt64)cap, np);
  for (PetscInt i = 0; i < np; i++) {
    if (params) params[i] = (ddnn_handle)ps[i];
    if (grads) grads[i] = (ddnn_handle)gs[i];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* hand-written: no C function: the ABI version itself */
/*@C
  ddnn_capi_version - The version of the binding ABI (`DDNN_CAPI_VERSION`), to check a binding against the library

  Output Parameter:
. version - the ABI version

  Level: developer
@*/
int ddnn_capi_version(int *version)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(Out(version, 1));
  *version = DDNN_CAPI_VERSION;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: special semantics: DDInitialize() without argc/argv; Fortran initializes PETSc first */
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
DD_CXX_TRY
{
  Str f, h;

  PetscFunctionBegin;
  PetscCall(f.Set(file, flen, 1, true));
  PetscCall(h.Set(help, hlen, 3, true));
  PetscCall(DDInitialize(NULL, NULL, f.c(), h.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: no DD function: PetscInitialized(), for the Fortran DDInitialize() */
/*@C
  ddnn_petsc_initialized - flg is 1 when PETSc is initialized (`PetscInitialized()`)

  Level: developer
@*/
int ddnn_petsc_initialized(int *flg)
DD_CXX_TRY
{
  PetscBool b;

  PetscFunctionBegin;
  PetscCall(Out(flg, 1));
  PetscCall(PetscInitialized(&b));
  *flg = b ? 1 : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: no DD function: PETSc 3.18 Fortran cannot name PetscReturnErrorHandler */
/*@C
  ddnn_push_error_handler_return - Pushes `PetscReturnErrorHandler()`: errors return their code without printing

  Notes:
  For bindings whose language cannot name `PetscReturnErrorHandler` (PETSc 3.18's Fortran
  interface has no such stub). Pop it with `ddnn_pop_error_handler()`.

  Level: developer
@*/
int ddnn_push_error_handler_return(void)
DD_CXX_TRY
{
  return PetscPushErrorHandler(PetscReturnErrorHandler, NULL);
}
DD_CXX_CATCH

/* hand-written: no DD function: the pair of ddnn_push_error_handler_return() */
/*@C
  ddnn_pop_error_handler - ABI of `PetscPopErrorHandler()`

  Level: developer
@*/
int ddnn_pop_error_handler(void)
DD_CXX_TRY
{
  return PetscPopErrorHandler();
}
DD_CXX_CATCH

/* hand-written: no DD function: a string returned from PetscErrorMessage(), truncated to the buffer */
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
DD_CXX_TRY
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
DD_CXX_CATCH

/* hand-written: special semantics: nranks < 0 is PETSC_DECIDE with no ranks array */
/*@C
  ddnn_partition_create_cartesian - ABI of `DDPartitionCreateCartesian()`; nranks < 0 (`PETSC_DECIDE`) uses the first ranks of comm

  Level: developer
@*/
int ddnn_partition_create_cartesian(ddnn_fint fcomm, ddnn_int order, const ddnn_int shape[], ddnn_int nranks, const int ranks[], ddnn_handle *part)
DD_CXX_TRY
{
  MPI_Comm                 comm;
  std::vector<PetscInt>    s;
  std::vector<PetscMPIInt> r;
  DDPartition              p;

  PetscFunctionBegin;
  PetscCall(Comm(fcomm, &comm));
  PetscCall(IntArray(order, shape, DD_MAX_DIM, 3, s));
  PetscCall(Out(part, 6));
  { /* checked on every rank together: a rank that stopped here would leave the others in the partition's collective set-up */
    PetscMPIInt size;
    PetscCallMPI(MPI_Comm_size(comm, &size));
    DDCheckAll(comm, nranks <= size, PETSC_ERR_ARG_OUTOFRANGE, "%" PetscInt64_FMT " ranks (argument 4) in a communicator of %d", (PetscInt64)nranks, size);
    DDCheckAll(comm, nranks <= 0 || ranks, PETSC_ERR_ARG_NULL, "Null array of ranks (argument 5)");
  }
  if (nranks >= 0) r.assign(ranks, ranks + nranks);
  PetscCall(DDPartitionCreateCartesian(comm, (PetscInt)order, s.data(), nranks >= 0 ? (PetscInt)nranks : PETSC_DECIDE, nranks >= 0 ? r.data() : NULL, &p));
  *part = (ddnn_handle)p;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: the array length is the partition extent along the dim argument */
/*@C
  ddnn_tensor_set_ownership_ranges - ABI of `DDTensorSetOwnershipRanges()`: n sizes, n the partition's extent along dim

  Level: developer
@*/
int ddnn_tensor_set_ownership_ranges(ddnn_handle th, ddnn_int dim, ddnn_int n, const ddnn_int lx[])
DD_CXX_TRY
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
DD_CXX_CATCH

/* hand-written: the count depends on the dim argument (and on replication) */
/*@C
  ddnn_tensor_get_ownership_ranges - ABI of `DDTensorGetOwnershipRanges()`: *n = P_dim + 1 offsets into an array of capacity cap (0 and the extent for a replicated dimension)

  Level: developer
@*/
int ddnn_tensor_get_ownership_ranges(ddnn_handle th, ddnn_int dim, ddnn_int cap, ddnn_int ranges[], ddnn_int *n)
DD_CXX_TRY
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
DD_CXX_CATCH

/* hand-written: arrays of objects returned (DDLayerGetParameters() and DDLayerGetGradients() in one) */
/*@C
  ddnn_layer_get_parameters - ABI of `DDLayerGetParameters()` and `DDLayerGetGradients()` (borrowed handles)

  Input Parameters:
+ l   - the layer
- cap - capacity of params and grads; 0 only counts the tensors

  Output Parameters:
+ params - the parameter tensors (or a null pointer)
. grads  - their gradients (or a null pointer)
- n      - the number of parameter tensors

  Level: developer
@*/
int ddnn_layer_get_parameters(ddnn_handle lh, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n)
DD_CXX_TRY
{
  DDLayer   l;
  PetscInt  np, ng;
  DDTensor *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(lh, 1, &l));
  PetscCall(DDLayerGetParameters(l, &np, &ps));
  PetscCall(DDLayerGetGradients(l, &ng, &gs));
  PetscCall(PutParams(np, ps, gs, cap, params, grads, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: arrays of objects returned */
/*@C
  ddnn_net_get_parameters - ABI of `DDNetGetParameters()` (borrowed handles; see `ddnn_layer_get_parameters()`)

  Level: developer
@*/
int ddnn_net_get_parameters(ddnn_handle nh, ddnn_int cap, ddnn_handle params[], ddnn_handle grads[], ddnn_int *n)
DD_CXX_TRY
{
  DDNet     net;
  PetscInt  np;
  DDTensor *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(nh, 1, &net));
  PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
  PetscCall(PutParams(np, ps, gs, cap, params, grads, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: no C function: a convenience of the ABI (two C calls) */
/*@C
  ddnn_optimizer_set_up_from_net - `DDOptimizerSetUp()` on the parameters and gradients of `DDNetGetParameters()`

  Notes:
  A convenience of the ABI (the two C calls in one), for bindings where arrays of handles are awkward.

  Level: developer
@*/
int ddnn_optimizer_set_up_from_net(ddnn_handle oh, ddnn_handle nh)
DD_CXX_TRY
{
  DDOptimizer opt;
  DDNet       net;
  PetscInt    np;
  DDTensor   *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(Get(nh, 2, &net));
  PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
  PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* hand-written: no C function: a convenience of the ABI (three C calls) */
/*@C
  ddnn_optimizer_set_up_from_layer - `DDOptimizerSetUp()` on the parameters of `DDLayerGetParameters()` and `DDLayerGetGradients()`

  Notes:
  A convenience of the ABI (the C calls in one), for a single learnable layer.

  Level: developer
@*/
int ddnn_optimizer_set_up_from_layer(ddnn_handle oh, ddnn_handle lh)
DD_CXX_TRY
{
  DDOptimizer opt;
  DDLayer     l;
  PetscInt    np, ng;
  DDTensor   *ps, *gs;

  PetscFunctionBegin;
  PetscCall(Get(oh, 1, &opt));
  PetscCall(Get(lh, 2, &l));
  PetscCall(DDLayerGetParameters(l, &np, &ps));
  PetscCall(DDLayerGetGradients(l, &ng, &gs));
  PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
