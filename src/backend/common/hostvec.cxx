/*
  Vector operations on host memory: DDTensor's bulk arithmetic walking a layout's contiguous runs in
  any storage format, and the exchange engine's packing of runs into message buffers.
*/
#include <backend/interface/backends.hpp>
#include <tensor/layout.hpp>
#include <primitive/exchange.hpp>
#include <algorithm>
#include <cstring>

using namespace ddnn;

namespace
{
PetscErrorCode HostSet(DDDataType dt, const DDLayout *L, void *y, PetscReal v)
{
  return DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *a    = (T *)y;
    ForEachBulkRun(*L, [&](PetscInt off, PetscInt len) { std::fill(a + off, a + off + len, (T)v); });
    return PETSC_SUCCESS;
  });
}

PetscErrorCode HostScale(DDDataType dt, const DDLayout *L, void *y, PetscReal s)
{
  return DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *a    = (T *)y;
    ForEachBulkRun(*L, [&](PetscInt off, PetscInt len) {
      for (PetscInt i = 0; i < len; i++) a[off + i] *= (T)s;
    });
    return PETSC_SUCCESS;
  });
}

PetscErrorCode HostCopy(DDDataType dt, const DDLayout *Lx, const void *x, const DDLayout *Ly, void *y)
{
  return DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T      = decltype(z);
    const T *a   = (const T *)x;
    T       *b   = (T *)y;
    ForEachBulkRunPair(*Lx, *Ly, [&](PetscInt ox, PetscInt oy, PetscInt len) { std::copy(a + ox, a + ox + len, b + oy); });
    return PETSC_SUCCESS;
  });
}

PetscErrorCode HostAXPBY(DDDataType dt, PetscReal alpha, const DDLayout *Lx, const void *x, PetscReal beta, const DDLayout *Ly, void *y)
{
  return DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T      = decltype(z);
    const T *a   = (const T *)x;
    T       *b   = (T *)y;
    const T  al = (T)alpha, be = (T)beta;
    if (beta == 1)
      ForEachBulkRunPair(*Lx, *Ly, [&](PetscInt ox, PetscInt oy, PetscInt len) {
        for (PetscInt i = 0; i < len; i++) b[oy + i] += al * a[ox + i];
      });
    else
      ForEachBulkRunPair(*Lx, *Ly, [&](PetscInt ox, PetscInt oy, PetscInt len) {
        for (PetscInt i = 0; i < len; i++) b[oy + i] = al * a[ox + i] + be * b[oy + i];
      });
    return PETSC_SUCCESS;
  });
}

template <class T>
void PackT(size_t n, const PetscInt *o, const PetscInt *l, PetscInt total, const T *src, T *buf)
{
  if (n == (size_t)total) { /* single entries: a gather */
    for (size_t i = 0; i < n; i++) buf[i] = src[o[i]];
    return;
  }
  for (size_t i = 0; i < n; i++) {
    std::memcpy(buf, src + o[i], sizeof(T) * (size_t)l[i]);
    buf += l[i];
  }
}

template <class T>
void UnpackT(size_t n, const PetscInt *o, const PetscInt *l, PetscInt total, const T *buf, T *dst, bool add)
{
  if (!add && n == (size_t)total) {
    for (size_t i = 0; i < n; i++) dst[o[i]] = buf[i];
    return;
  }
  for (size_t i = 0; i < n; i++) {
    T *d = dst + o[i];
    if (add)
      for (PetscInt j = 0; j < l[i]; j++) d[j] += buf[j];
    else std::memcpy(d, buf, sizeof(T) * (size_t)l[i]);
    buf += l[i];
  }
}

PetscErrorCode HostPack(DDDataType dt, size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, const void *src, void *buf)
{
  if (dt == DD_FLOAT32) PackT<float>(n, off, len, total, (const float *)src, (float *)buf);
  else PackT<double>(n, off, len, total, (const double *)src, (double *)buf);
  return PETSC_SUCCESS;
}

PetscErrorCode HostUnpack(DDDataType dt, size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, const void *buf, void *dst, PetscBool add)
{
  if (dt == DD_FLOAT32) UnpackT<float>(n, off, len, total, (const float *)buf, (float *)dst, add ? true : false);
  else UnpackT<double>(n, off, len, total, (const double *)buf, (double *)dst, add ? true : false);
  return PETSC_SUCCESS;
}

template <class T>
static void FillT(size_t n, const PetscInt off[], const PetscInt len[], T *dst, T v)
{
  for (size_t i = 0; i < n; i++) std::fill(dst + off[i], dst + off[i] + len[i], v);
}

PetscErrorCode HostFill(DDDataType dt, size_t n, const PetscInt off[], const PetscInt len[], PetscInt, void *dst, PetscReal v)
{
  if (dt == DD_FLOAT32) FillT<float>(n, off, len, (float *)dst, (float)v);
  else FillT<double>(n, off, len, (double *)dst, (double)v);
  return PETSC_SUCCESS;
}
} // namespace

/*
  The exchange's constant-stride plans (Runs::Strided(), found once at set-up): n runs of len
  entries, the i-th at first + i stride. Single entries (a W-split face of plain storage) are a
  strided gather/scatter without the offset list; channel vectors of 8 or 16 entries
  (channels-last or blocked faces) are fixed-size copies the compiler turns into vector moves.
*/
template <class T, PetscInt L>
static inline void PackFixed(PetscInt n, const T *s, PetscInt stride, T *buf)
{
  for (PetscInt i = 0; i < n; i++, s += stride, buf += L) std::memcpy(buf, s, sizeof(T) * L);
}

template <class T, PetscInt L>
static inline void UnpackFixed(PetscInt n, const T *buf, T *d, PetscInt stride, bool add)
{
  if (add)
    for (PetscInt i = 0; i < n; i++, d += stride, buf += L)
      for (PetscInt j = 0; j < L; j++) d[j] += buf[j];
  else
    for (PetscInt i = 0; i < n; i++, d += stride, buf += L) std::memcpy(d, buf, sizeof(T) * L);
}

template <class T>
static void PackStridedT(PetscInt n, PetscInt stride, PetscInt len, const T *s, T *buf)
{
  switch (len) {
  case 1:
    PackFixed<T, 1>(n, s, stride, buf);
    return;
  case 8:
    PackFixed<T, 8>(n, s, stride, buf);
    return;
  case 16:
    PackFixed<T, 16>(n, s, stride, buf);
    return;
  default:
    for (PetscInt i = 0; i < n; i++, s += stride, buf += len) std::memcpy(buf, s, sizeof(T) * (size_t)len);
  }
}

template <class T>
static void UnpackStridedT(PetscInt n, PetscInt stride, PetscInt len, const T *buf, T *d, bool add)
{
  switch (len) {
  case 1:
    UnpackFixed<T, 1>(n, buf, d, stride, add);
    return;
  case 8:
    UnpackFixed<T, 8>(n, buf, d, stride, add);
    return;
  case 16:
    UnpackFixed<T, 16>(n, buf, d, stride, add);
    return;
  default:
    for (PetscInt i = 0; i < n; i++, d += stride, buf += len) {
      if (add)
        for (PetscInt j = 0; j < len; j++) d[j] += buf[j];
      else std::memcpy(d, buf, sizeof(T) * (size_t)len);
    }
  }
}

PetscErrorCode ddnn::HostPackStrided(DDDataType dt, PetscInt n, PetscInt first, PetscInt stride, PetscInt len, const void *src, void *buf)
{
  if (dt == DD_FLOAT32) PackStridedT<float>(n, stride, len, (const float *)src + first, (float *)buf);
  else PackStridedT<double>(n, stride, len, (const double *)src + first, (double *)buf);
  return PETSC_SUCCESS;
}

PetscErrorCode ddnn::HostUnpackStrided(DDDataType dt, PetscInt n, PetscInt first, PetscInt stride, PetscInt len, const void *buf, void *dst, PetscBool add)
{
  if (dt == DD_FLOAT32) UnpackStridedT<float>(n, stride, len, (const float *)buf, (float *)dst + first, add ? true : false);
  else UnpackStridedT<double>(n, stride, len, (const double *)buf, (double *)dst + first, add ? true : false);
  return PETSC_SUCCESS;
}

/* dot, norms NULL: DDTensorDot/Sum/Norm loop over host storage themselves (tensorops.cxx, their bits unchanged) */
const struct _DDBackendVecOps ddnn::HostVecOps = {HostSet, HostScale, HostCopy, HostAXPBY, HostPack, HostUnpack, HostFill, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
