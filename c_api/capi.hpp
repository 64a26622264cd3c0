/*
  capi.hpp - helpers of the binding ABI (c_api/ddnn_capi.h): handle checks and conversions.

  The ABI only converts and forwards. These helpers turn handles into objects (checking that
  they are non-null, not freed, and of the expected class), ABI integers into PetscInt with an
  overflow check, (pointer, length) strings into NUL-terminated ones, and validate enumeration
  values, so that a wrong argument from Fortran or Python is a PETSc error, not a crash.
*/
#pragma once
#include <ddnn.h>
#include <petsc/private/petscimpl.h>
#include <petsc/private/fortranimpl.h>
#include "ddnn_capi.h"
#include <string>
#include <vector>
#include <cstring>

namespace ddcapi
{
/* class ids and names of the objects a handle may denote */
template <class T>
struct Cls;
#define DDCAPI_CLASS(T, ID, NAME) \
  template <> \
  struct Cls<T> { \
    static PetscClassId id() { return ID; } \
    static const char  *name() { return NAME; } \
  }
DDCAPI_CLASS(DDPartition, DD_PARTITION_CLASSID, "DDPartition");
DDCAPI_CLASS(DDTensor, DD_TENSOR_CLASSID, "DDTensor");
DDCAPI_CLASS(DDPrimitive, DD_PRIMITIVE_CLASSID, "DDPrimitive");
DDCAPI_CLASS(DDLayer, DD_LAYER_CLASSID, "DDLayer");
DDCAPI_CLASS(DDNet, DD_NET_CLASSID, "DDNet");
DDCAPI_CLASS(DDOptimizer, DD_OPTIMIZER_CLASSID, "DDOptimizer");
DDCAPI_CLASS(DDDataset, DD_DATASET_CLASSID, "DDDataset");
DDCAPI_CLASS(Vec, VEC_CLASSID, "Vec");
DDCAPI_CLASS(DM, DM_CLASSID, "DM");
DDCAPI_CLASS(PetscViewer, PETSC_VIEWER_CLASSID, "PetscViewer");
#undef DDCAPI_CLASS

/* "argument 3" or "argument 3, entry 2" */
inline void ArgName(int arg, PetscInt entry, char buf[], size_t len)
{
  if (entry < 0) PetscSNPrintf(buf, len, "argument %d", arg);
  else PetscSNPrintf(buf, len, "argument %d, entry %" PetscInt_FMT, arg, entry);
}

/* Checks that h denotes a live object of class id; nullok accepts 0 */
inline PetscErrorCode CheckHandle(intptr_t h, PetscClassId id, const char cls[], int arg, PetscInt entry, bool nullok)
{
  char where[64];

  PetscFunctionBegin;
  ArgName(arg, entry, where, sizeof(where));
  if (h == 0) {
    PetscCheck(nullok, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null %s handle (%s): the object was never created, or it was destroyed", cls, where);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCheck(h != -2, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "%s handle (%s) is PETSc's Fortran marker of an object not yet created or already destroyed", cls, where);
  PetscCheck((uintptr_t)h >= 4096 && (uintptr_t)h % sizeof(void *) == 0, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Invalid %s handle %" PetscInt64_FMT " (%s): not the address of an object", cls, (PetscInt64)h, where);
  PetscObject o = (PetscObject)h;
  PetscCheck(o->classid != PETSCFREEDHEADER, PETSC_COMM_SELF, PETSC_ERR_ARG_CORRUPT, "%s handle (%s) refers to an object that was destroyed", cls, where);
  if (o->classid != id || !id) {
    PetscCheck(!(o->classid >= PETSC_SMALLEST_CLASSID && o->classid <= PETSC_LARGEST_CLASSID && o->class_name), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Wrong handle (%s): a %s where a %s is expected", where, o->class_name, cls);
    SETERRQ(PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Invalid %s handle (%s): not a live PETSc object (destroyed, or not a handle)", cls, where);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The object a handle denotes */
template <class T>
inline PetscErrorCode Get(intptr_t h, int arg, T *obj, bool nullok = false)
{
  PetscFunctionBegin;
  PetscCall(CheckHandle(h, Cls<T>::id(), Cls<T>::name(), arg, -1, nullok));
  *obj = (T)h;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The objects of an array of handles */
template <class T>
inline PetscErrorCode GetArray(ddnn_int n, const intptr_t hs[], int arg, std::vector<T> &objs)
{
  PetscFunctionBegin;
  PetscCheck(n >= 0 && n <= 4096, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Invalid count %" PetscInt64_FMT " of %s handles (argument %d)", (PetscInt64)n, Cls<T>::name(), arg);
  PetscCheck(n == 0 || hs, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null array of %s handles (argument %d)", Cls<T>::name(), arg);
  objs.resize((size_t)n);
  for (ddnn_int i = 0; i < n; i++) {
    PetscCall(CheckHandle(hs[i], Cls<T>::id(), Cls<T>::name(), arg, (PetscInt)i, false));
    objs[i] = (T)hs[i];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A viewer: 0 is the default viewer of obj's communicator; Fortran's PETSC_VIEWER_STDOUT_WORLD & co. */
inline PetscErrorCode GetViewer(intptr_t h, PetscObject obj, int arg, PetscViewer *v)
{
  PetscViewer vin = (PetscViewer)h;

  PetscFunctionBegin;
  if (!h) {
    *v = PETSC_VIEWER_STDOUT_(PetscObjectComm(obj));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscPatchDefaultViewers_Fortran(&vin, *v);
  if (*v == vin) PetscCall(Get(h, arg, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A non-null pointer for an output */
inline PetscErrorCode Out(const void *p, int arg)
{
  PetscFunctionBegin;
  PetscCheck(p, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null pointer for the output (argument %d)", arg);
  PetscFunctionReturn(PETSC_SUCCESS);
}

inline PetscErrorCode Int(ddnn_int v, int arg, PetscInt *out)
{
  PetscFunctionBegin;
  PetscCheck((ddnn_int)(PetscInt)v == v, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Integer %" PetscInt64_FMT " (argument %d) does not fit in a PetscInt", (PetscInt64)v, arg);
  *out = (PetscInt)v;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* n integers (0 <= n <= maxn) */
inline PetscErrorCode IntArray(ddnn_int n, const ddnn_int a[], ddnn_int maxn, int arg, std::vector<PetscInt> &out)
{
  PetscFunctionBegin;
  PetscCheck(n >= 0 && n <= maxn, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Array length %" PetscInt64_FMT " (argument %d) must be between 0 and %" PetscInt64_FMT, (PetscInt64)n, arg, (PetscInt64)maxn);
  PetscCheck(n == 0 || a, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null array (argument %d) of length %" PetscInt64_FMT, arg, (PetscInt64)n);
  out.resize((size_t)n);
  for (ddnn_int i = 0; i < n; i++) PetscCall(Int(a[i], arg, &out[i]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Copies n PetscInt into an output array of capacity cap */
inline PetscErrorCode PutInts(PetscInt n, const PetscInt v[], ddnn_int cap, ddnn_int out[], int arg)
{
  PetscFunctionBegin;
  PetscCall(Out(out, arg));
  PetscCheck(cap >= n, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Output array (argument %d) has room for %" PetscInt64_FMT " entries; %" PetscInt_FMT " are needed", arg, (PetscInt64)cap, n);
  for (PetscInt i = 0; i < n; i++) out[i] = v[i];
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A (pointer, length) string: len >= 0 takes len bytes, len < 0 a NUL-terminated string */
class Str
{
public:
  PetscErrorCode Set(const char *p, ddnn_int len, int arg, bool nullok = false)
  {
    PetscFunctionBegin;
    null_ = !p;
    PetscCheck(p || nullok, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null string (argument %d)", arg);
    if (p) {
      if (len < 0) s_ = p;
      else s_.assign(p, (size_t)len);
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const char *c() const { return null_ ? nullptr : s_.c_str(); }

private:
  std::string s_;
  bool        null_ = true;
};

/* An array of n NUL-terminated strings */
inline PetscErrorCode StrArray(ddnn_int n, const char *const a[], int arg, std::vector<std::string> &keep, std::vector<const char *> &ptrs)
{
  PetscFunctionBegin;
  PetscCheck(n >= 0 && n <= 4096, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Invalid count %" PetscInt64_FMT " of names (argument %d)", (PetscInt64)n, arg);
  PetscCheck(n == 0 || a, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null array of names (argument %d)", arg);
  keep.resize((size_t)n);
  ptrs.resize((size_t)n);
  for (ddnn_int i = 0; i < n; i++) {
    PetscCheck(a[i], PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null name (argument %d, entry %" PetscInt64_FMT ")", arg, (PetscInt64)i);
    keep[i] = a[i];
  }
  for (ddnn_int i = 0; i < n; i++) ptrs[i] = keep[i].c_str();
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Copies a NUL-terminated string into buf of capacity buflen */
inline PetscErrorCode PutStr(const char *s, char *buf, ddnn_int buflen, int arg)
{
  size_t n = s ? std::strlen(s) : 0;

  PetscFunctionBegin;
  PetscCall(Out(buf, arg));
  PetscCheck(buflen > (ddnn_int)n, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "String buffer (argument %d) of %" PetscInt64_FMT " characters is too small for \"%s\"", arg, (PetscInt64)buflen, s ? s : "");
  if (n) std::memcpy(buf, s, n);
  buf[n] = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* An enumeration value in [0, n) */
inline PetscErrorCode Enum(int v, int n, const char name[], int arg)
{
  PetscFunctionBegin;
  PetscCheck(v >= 0 && v < n, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "Invalid %s value %d (argument %d): must be between 0 and %d", name, v, arg, n - 1);
  PetscFunctionReturn(PETSC_SUCCESS);
}

inline PetscErrorCode Comm(ddnn_fint fcomm, MPI_Comm *comm)
{
  PetscFunctionBegin;
  *comm = MPI_Comm_f2c((MPI_Fint)fcomm);
  PetscCheck(*comm != MPI_COMM_NULL, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "Invalid Fortran communicator handle %d (MPI_COMM_NULL)", (int)fcomm);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Destroys the object of *h and zeroes the handle; as in PETSc, destroying a null handle does nothing */
template <class T>
inline PetscErrorCode Destroy(intptr_t *h, PetscErrorCode (*destroy)(T *))
{
  T obj;

  PetscFunctionBegin;
  PetscCheck(h, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null address of a %s handle (argument 1)", Cls<T>::name());
  if (!*h) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(Get(*h, 1, &obj));
  PetscCall(destroy(&obj));
  *h = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The ABI forms shared by every class: create on a Fortran communicator, call with no argument,
   with a (pointer, length) string, and view */
template <class T>
inline PetscErrorCode Create(ddnn_fint fcomm, intptr_t *h, PetscErrorCode (*create)(MPI_Comm, T *))
{
  MPI_Comm comm;
  T        obj;

  PetscFunctionBegin;
  PetscCall(Comm(fcomm, &comm));
  PetscCall(Out(h, 2));
  PetscCall(create(comm, &obj));
  *h = (intptr_t)obj;
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
inline PetscErrorCode Call(intptr_t h, PetscErrorCode (*fn)(T))
{
  T obj;

  PetscFunctionBegin;
  PetscCall(Get(h, 1, &obj));
  PetscCall(fn(obj));
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
inline PetscErrorCode CallStr(intptr_t h, const char *str, ddnn_int len, PetscErrorCode (*fn)(T, const char[]))
{
  T   obj;
  Str s;

  PetscFunctionBegin;
  PetscCall(Get(h, 1, &obj));
  PetscCall(s.Set(str, len, 2));
  PetscCall(fn(obj, s.c()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
inline PetscErrorCode View(intptr_t h, intptr_t vh, PetscErrorCode (*view)(T, PetscViewer))
{
  T           obj;
  PetscViewer v;

  PetscFunctionBegin;
  PetscCall(Get(h, 1, &obj));
  PetscCall(GetViewer(vh, (PetscObject)obj, 2, &v));
  PetscCall(view(obj, v));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddcapi

static_assert(sizeof(ddnn_fint) == sizeof(MPI_Fint), "ddnn_fint must be MPI_Fint");
static_assert(sizeof(ddnn_handle) == sizeof(void *), "handles hold pointers");
