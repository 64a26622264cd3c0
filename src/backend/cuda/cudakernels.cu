/*
  CUDA kernels of the /gpu/cuda backend: the vector operations of device memory (set, scale, copy,
  axpby over a layout's bulk in any storage format; packing of runs for the exchange engine), the
  pointwise activations, the affine layer's bias helpers, the FFT kernel's mode truncation and the
  pooling loops. See cudakernels.hpp.
*/
#include "cudakernels.hpp"
#include <math.h>

namespace ddnn
{
namespace cuda
{
namespace
{
constexpr int kThreads = 256;

inline int Blocks(int64_t n)
{
  int64_t b = (n + kThreads - 1) / kThreads;
  return (int)(b < 65536 ? (b > 0 ? b : 1) : 65536); /* grid-stride loops cover the rest */
}

/* storage offset of bulk index i: i in C order over L.n, shifted by the halo, as LayoutOffset() */
__device__ inline int64_t Offset(const Layout &L, int64_t i)
{
  if (L.contig) return i;
  int64_t off = 0;
  for (int k = L.order - 1; k >= 0; k--) {
    const int64_t nk = L.n[k];
    const int64_t c  = i % nk;
    i /= nk;
    const int64_t j = c + L.lo[k];
    if (k == L.bdim) off += L.stride[k] * (j / L.bs) + j % L.bs;
    else off += L.stride[k] * j;
  }
  return off;
}

#define DD_GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

template <class T>
__global__ void SetKernel(Layout L, T *y, T v)
{
  DD_GRID_LOOP(i, L.bulk) y[Offset(L, i)] = v;
}
template <class T>
__global__ void ScaleKernel(Layout L, T *y, T a)
{
  DD_GRID_LOOP(i, L.bulk)
  {
    const int64_t o = Offset(L, i);
    y[o] *= a;
  }
}
template <class T>
__global__ void CopyKernel(Layout Lx, const T *x, Layout Ly, T *y)
{
  DD_GRID_LOOP(i, Lx.bulk) y[Offset(Ly, i)] = x[Offset(Lx, i)];
}
template <class T>
__global__ void AxpbyKernel(T a, Layout Lx, const T *x, T b, Layout Ly, T *y, bool beta1)
{
  DD_GRID_LOOP(i, Lx.bulk)
  {
    const int64_t oy = Offset(Ly, i);
    if (beta1) y[oy] += a * x[Offset(Lx, i)]; /* y += a x: as the host loop, no 1 * y rounding */
    else y[oy] = a * x[Offset(Lx, i)] + b * y[oy];
  }
}

/* the run of buffer entry i: the largest r with pos[r] <= i */
__device__ inline int64_t RunOf(const int64_t *pos, int64_t nruns, int64_t i)
{
  int64_t lo = 0, hi = nruns - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (pos[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
template <class T>
__global__ void PackKernel(int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, const T *src, T *buf)
{
  DD_GRID_LOOP(i, total)
  {
    const int64_t r = RunOf(pos, nruns, i);
    buf[i]          = src[off[r] + (i - pos[r])];
  }
}
template <class T>
__global__ void UnpackKernel(int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, const T *buf, T *dst, bool add)
{
  DD_GRID_LOOP(i, total)
  {
    const int64_t r = RunOf(pos, nruns, i);
    T *d            = dst + off[r] + (i - pos[r]);
    if (add) atomicAdd(d, buf[i]);
    else *d = buf[i];
  }
}
template <class T>
__global__ void FillRunsKernel(int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, T *dst, T v)
{
  DD_GRID_LOOP(i, total)
  {
    const int64_t r                = RunOf(pos, nruns, i);
    dst[off[r] + (i - pos[r])] = v;
  }
}

template <class T>
__device__ inline T Sigmoid(T x)
{
  if (x >= (T)0) return (T)1 / ((T)1 + exp(-x));
  const T e = exp(x); /* NaN lands here and stays NaN */
  return e / ((T)1 + e);
}
constexpr double kInvSqrt2   = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

/* types as DDActivationType: relu, leakyrelu, tanh, sigmoid, gelu, identity */
template <class T>
__global__ void ActForwardKernel(int type, T slope, const T *x, T *y, int64_t n)
{
  DD_GRID_LOOP(i, n)
  {
    const T v = x[i];
    T       r;
    switch (type) {
    case 0: r = v < (T)0 ? (T)0 : v; break; /* NaN passes, relu(-0) = -0 */
    case 1: r = v > (T)0 ? v : slope * v; break;
    case 2: r = tanh(v); break;
    case 3: r = Sigmoid(v); break;
    case 4: r = (T)(0.5 * (double)v * (1.0 + erf((double)v * kInvSqrt2))); break;
    default: r = v; break;
    }
    y[i] = r;
  }
}
template <class T>
__global__ void ActBackwardKernel(int type, T slope, const T *x, const T *dy, T *dx, int64_t n)
{
  DD_GRID_LOOP(i, n)
  {
    const T v = x[i], g = dy[i];
    T       r;
    switch (type) {
    case 0: r = v <= (T)0 ? (T)0 : g; break; /* NaN input passes dy; f'(0) = 0 */
    case 1: r = v > (T)0 ? g : slope * g; break;
    case 2: {
      const T t = tanh(v);
      r         = ((T)1 - t * t) * g;
    } break;
    case 3: {
      const T s = Sigmoid(v);
      r         = s * ((T)1 - s) * g;
    } break;
    case 4: {
      const double w = (double)v;
      r              = (T)((0.5 * (1.0 + erf(w * kInvSqrt2)) + w * kInvSqrt2Pi * exp(-0.5 * w * w)) * (double)g);
    } break;
    default: r = g; break;
    }
    dx[i] = r;
  }
}

template <class T>
__global__ void FillRowsKernel(T *y, int64_t ldy, const T *b, int64_t N, int64_t Fo)
{
  DD_GRID_LOOP(i, N * Fo) y[(i / Fo) * ldy + i % Fo] = b[i % Fo];
}
template <class T>
__global__ void ColumnSumsAddKernel(const T *dy, int64_t ldy, int64_t N, int64_t Fo, T *db)
{
  DD_GRID_LOOP(o, Fo)
  {
    T acc = 0; /* in the order of the rows, as the reference loop */
    for (int64_t r = 0; r < N; r++) acc += dy[r * ldy + o];
    db[o] += acc;
  }
}

template <class F>
cudaError_t Dispatch(int dt, F &&f)
{
  if (dt == 0) return f(float());
  return f(double());
}
} // namespace

cudaError_t Set(int dt, const Layout &L, void *y, double v)
{
  if (L.bulk <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    SetKernel<T><<<Blocks(L.bulk), kThreads>>>(L, (T *)y, (T)v);
    return cudaGetLastError();
  });
}
cudaError_t Scale(int dt, const Layout &L, void *y, double a)
{
  if (L.bulk <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    ScaleKernel<T><<<Blocks(L.bulk), kThreads>>>(L, (T *)y, (T)a);
    return cudaGetLastError();
  });
}
cudaError_t Copy(int dt, const Layout &Lx, const void *x, const Layout &Ly, void *y)
{
  if (Lx.bulk <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    CopyKernel<T><<<Blocks(Lx.bulk), kThreads>>>(Lx, (const T *)x, Ly, (T *)y);
    return cudaGetLastError();
  });
}
cudaError_t Axpby(int dt, double a, const Layout &Lx, const void *x, double b, const Layout &Ly, void *y)
{
  if (Lx.bulk <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    AxpbyKernel<T><<<Blocks(Lx.bulk), kThreads>>>((T)a, Lx, (const T *)x, (T)b, Ly, (T *)y, b == 1.0);
    return cudaGetLastError();
  });
}
cudaError_t Pack(int dt, int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, const void *src, void *buf)
{
  if (total <= 0 || nruns <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    PackKernel<T><<<Blocks(total), kThreads>>>(nruns, off, pos, total, (const T *)src, (T *)buf);
    return cudaGetLastError();
  });
}
cudaError_t Unpack(int dt, int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, const void *buf, void *dst, bool add)
{
  if (total <= 0 || nruns <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    UnpackKernel<T><<<Blocks(total), kThreads>>>(nruns, off, pos, total, (const T *)buf, (T *)dst, add);
    return cudaGetLastError();
  });
}
cudaError_t FillRuns(int dt, int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, void *dst, double v)
{
  if (total <= 0 || nruns <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    FillRunsKernel<T><<<Blocks(total), kThreads>>>(nruns, off, pos, total, (T *)dst, (T)v);
    return cudaGetLastError();
  });
}

template <class T>
cudaError_t ActForward(int type, T slope, const T *x, T *y, int64_t n)
{
  if (n <= 0 || (type == 5 && x == y)) return cudaSuccess;
  ActForwardKernel<T><<<Blocks(n), kThreads>>>(type, slope, x, y, n);
  return cudaGetLastError();
}
template <class T>
cudaError_t ActBackward(int type, T slope, const T *x, const T *dy, T *dx, int64_t n)
{
  if (n <= 0 || (type == 5 && dx == dy)) return cudaSuccess;
  ActBackwardKernel<T><<<Blocks(n), kThreads>>>(type, slope, x, dy, dx, n);
  return cudaGetLastError();
}
template <class T>
cudaError_t FillRows(T *y, int64_t ldy, const T *b, int64_t N, int64_t Fo)
{
  if (N <= 0 || Fo <= 0) return cudaSuccess;
  FillRowsKernel<T><<<Blocks(N * Fo), kThreads>>>(y, ldy, b, N, Fo);
  return cudaGetLastError();
}
template <class T>
cudaError_t ColumnSumsAdd(const T *dy, int64_t ldy, int64_t N, int64_t Fo, T *db)
{
  if (Fo <= 0) return cudaSuccess;
  ColumnSumsAddKernel<T><<<Blocks(Fo), kThreads>>>(dy, ldy, N, Fo, db);
  return cudaGetLastError();
}

namespace
{
/* complex entry idx of b (A, K, B) -> its complex entry in work (A, Lc, B), and its Hermitian weight */
__device__ inline int64_t FftFull(int64_t idx, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real, double *w)
{
  const int64_t e = idx % B, q = (idx / B) % K, i = idx / (B * K);
  const int64_t k = (real || q < m) ? q : L - 2 * m + q;
  *w              = (real && k != 0 && 2 * k != L) ? 0.5 : 1.0;
  return (i * Lc + k) * B + e;
}
template <class T>
__global__ void FftGatherKernel(const T *work, T *b, int64_t n, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real)
{
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * blockDim.x) {
    double        w;
    const int64_t f = FftFull(idx, Lc, K, B, L, m, real, &w);
    b[2 * idx]      = work[2 * f];
    b[2 * idx + 1]  = work[2 * f + 1];
  }
}
template <class T>
__global__ void FftScatterKernel(const T *b, T *work, int64_t n, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real)
{
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * blockDim.x) {
    double        w;
    const int64_t f  = FftFull(idx, Lc, K, B, L, m, real, &w);
    work[2 * f]     = (T)w * b[2 * idx];
    work[2 * f + 1] = (T)w * b[2 * idx + 1];
  }
}
} // namespace

template <class T>
cudaError_t FftGather(const T *work, T *b, int64_t A, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real)
{
  const int64_t n = A * K * B;
  if (n <= 0) return cudaSuccess;
  FftGatherKernel<T><<<Blocks(n), kThreads>>>(work, b, n, Lc, K, B, L, m, real);
  return cudaGetLastError();
}
template <class T>
cudaError_t FftScatter(const T *b, T *work, int64_t A, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real)
{
  const int64_t n = A * K * B;
  if (n <= 0) return cudaSuccess;
  FftScatterKernel<T><<<Blocks(n), kThreads>>>(b, work, n, Lc, K, B, L, m, real);
  return cudaGetLastError();
}

namespace
{
/* output entry i (C order over N, C, out) -> (n, c, i0, i1, i2) */
__device__ inline void PoolIndex(const PoolArgs &a, int64_t i, int64_t *n, int64_t *c, int64_t *i0, int64_t *i1, int64_t *i2)
{
  *i2 = i % a.out[2];
  i /= a.out[2];
  *i1 = i % a.out[1];
  i /= a.out[1];
  *i0 = i % a.out[0];
  i /= a.out[0];
  *c = i % a.C;
  *n = i / a.C;
}
template <class T>
__global__ void PoolForwardKernel(PoolArgs a, const T *x, T *y, int64_t *argmax, int64_t total)
{
  DD_GRID_LOOP(i, total)
  {
    int64_t n, c, i0, i1, i2;
    PoolIndex(a, i, &n, &c, &i0, &i1, &i2);
    const int64_t base = a.xo[0][n] + a.xo[1][c];
    const int64_t f0 = a.first[0][i0], f1 = a.first[1][i1], f2 = a.first[2][i2];
    const int64_t n0 = a.ntaps[0][i0], n1 = a.ntaps[1][i1], n2 = a.ntaps[2][i2];
    const int64_t yoff = a.yo[0][n] + a.yo[1][c] + a.yo[2][i0] + a.yo[3][i1] + a.yo[4][i2];
    if (a.max) {
      T       m  = -(T)INFINITY;
      int64_t am = base + a.xo[2][f0] + a.xo[3][f1] + a.xo[4][f2];
      for (int64_t p = 0; p < n0; p++) {
        const int64_t op = base + a.xo[2][f0 + p * a.d[0]];
        for (int64_t q = 0; q < n1; q++) {
          const int64_t oq = op + a.xo[3][f1 + q * a.d[1]];
          for (int64_t r = 0; r < n2; r++) {
            const int64_t off = oq + a.xo[4][f2 + r * a.d[2]];
            const T       v   = x[off];
            if (v > m || v != v) {
              m  = v;
              am = off;
            }
          }
        }
      }
      y[yoff] = m;
      if (argmax) argmax[i] = am;
    } else {
      T sum = 0;
      for (int64_t p = 0; p < n0; p++) {
        const int64_t op = base + a.xo[2][f0 + p];
        for (int64_t q = 0; q < n1; q++) {
          const int64_t oq = op + a.xo[3][f1 + q];
          for (int64_t r = 0; r < n2; r++) sum += x[oq + a.xo[4][f2 + r]];
        }
      }
      y[yoff] = sum / (T)(a.div[0][i0] * a.div[1][i1] * a.div[2][i2]);
    }
  }
}
template <class T>
__global__ void PoolBackwardKernel(PoolArgs a, const T *dy, T *dx, const int64_t *argmax, int64_t total)
{
  DD_GRID_LOOP(i, total)
  {
    int64_t n, c, i0, i1, i2;
    PoolIndex(a, i, &n, &c, &i0, &i1, &i2);
    const T v = dy[a.yo[0][n] + a.yo[1][c] + a.yo[2][i0] + a.yo[3][i1] + a.yo[4][i2]];
    if (a.max) {
      atomicAdd(dx + argmax[i], v);
      continue;
    }
    const T       w    = v / (T)(a.div[0][i0] * a.div[1][i1] * a.div[2][i2]);
    const int64_t base = a.xo[0][n] + a.xo[1][c];
    const int64_t f0 = a.first[0][i0], f1 = a.first[1][i1], f2 = a.first[2][i2];
    for (int64_t p = 0; p < a.ntaps[0][i0]; p++)
      for (int64_t q = 0; q < a.ntaps[1][i1]; q++)
        for (int64_t r = 0; r < a.ntaps[2][i2]; r++) atomicAdd(dx + base + a.xo[2][f0 + p] + a.xo[3][f1 + q] + a.xo[4][f2 + r], w);
  }
}
} // namespace

template <class T>
cudaError_t PoolForward(const PoolArgs &a, const T *x, T *y, int64_t *argmax)
{
  const int64_t total = a.N * a.C * a.out[0] * a.out[1] * a.out[2];
  if (total <= 0) return cudaSuccess;
  PoolForwardKernel<T><<<Blocks(total), kThreads>>>(a, x, y, argmax, total);
  return cudaGetLastError();
}
template <class T>
cudaError_t PoolBackward(const PoolArgs &a, const T *dy, T *dx, const int64_t *argmax)
{
  const int64_t total = a.N * a.C * a.out[0] * a.out[1] * a.out[2];
  if (total <= 0) return cudaSuccess;
  PoolBackwardKernel<T><<<Blocks(total), kThreads>>>(a, dy, dx, argmax, total);
  return cudaGetLastError();
}

#define DD_CUDA_INSTANTIATE(T) \
  template cudaError_t PoolForward<T>(const PoolArgs &, const T *, T *, int64_t *); \
  template cudaError_t PoolBackward<T>(const PoolArgs &, const T *, T *, const int64_t *); \
  template cudaError_t FftGather<T>(const T *, T *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool); \
  template cudaError_t FftScatter<T>(const T *, T *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool); \
  template cudaError_t ActForward<T>(int, T, const T *, T *, int64_t); \
  template cudaError_t ActBackward<T>(int, T, const T *, const T *, T *, int64_t); \
  template cudaError_t FillRows<T>(T *, int64_t, const T *, int64_t, int64_t); \
  template cudaError_t ColumnSumsAdd<T>(const T *, int64_t, int64_t, int64_t, T *);
DD_CUDA_INSTANTIATE(float)
DD_CUDA_INSTANTIATE(double)
} // namespace cuda
} // namespace ddnn
