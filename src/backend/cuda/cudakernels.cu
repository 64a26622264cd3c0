/*
  CUDA kernels of the /gpu/cuda backend: the vector operations of device memory (set, scale, copy,
  axpby over a layout's bulk in any storage format; packing of runs for the exchange engine), the
  pointwise activations, the affine layer's bias helpers, the FFT kernel's mode truncation, the
  pooling and interpolation loops, batch/group and layer normalization, the optimizers' updates and
  the deterministic reductions of DDTensor's arithmetic. See cudakernels.hpp.
*/
#include "cudakernels.hpp"
#include <math.h>
#include <algorithm>

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
__device__ inline T ActF(int type, T slope, T v)
{
  switch (type) {
  case 0: return v < (T)0 ? (T)0 : v; /* NaN passes, relu(-0) = -0 */
  case 1: return v > (T)0 ? v : slope * v;
  case 2: return tanh(v);
  case 3: return Sigmoid(v);
  case 4: return (T)(0.5 * (double)v * (1.0 + erf((double)v * kInvSqrt2)));
  default: return v;
  }
}
template <class T>
__device__ inline T ActB(int type, T slope, T v, T g)
{
  switch (type) {
  case 0: return v <= (T)0 ? (T)0 : g; /* NaN input passes dy; f'(0) = 0 */
  case 1: return v > (T)0 ? g : slope * g;
  case 2: {
    const T t = tanh(v);
    return ((T)1 - t * t) * g;
  }
  case 3: {
    const T s = Sigmoid(v);
    return s * ((T)1 - s) * g;
  }
  case 4: {
    const double w = (double)v;
    return (T)((0.5 * (1.0 + erf(w * kInvSqrt2)) + w * kInvSqrt2Pi * exp(-0.5 * w * w)) * (double)g);
  }
  default: return g;
  }
}
template <class T>
__global__ void ActForwardKernel(int type, T slope, const T *x, T *y, int64_t n)
{
  DD_GRID_LOOP(i, n) y[i] = ActF(type, slope, x[i]);
}
template <class T>
__global__ void ActBackwardKernel(int type, T slope, const T *x, const T *dy, T *dx, int64_t n)
{
  DD_GRID_LOOP(i, n) dx[i] = ActB(type, slope, x[i], dy[i]);
}
/* over a whole bulk, each tensor in its own layout: one launch however the bulk breaks into runs */
template <class T>
__global__ void ActForwardLayoutKernel(int type, T slope, Layout Lx, const T *x, Layout Ly, T *y)
{
  DD_GRID_LOOP(i, Lx.bulk) y[Offset(Ly, i)] = ActF(type, slope, x[Offset(Lx, i)]);
}
template <class T>
__global__ void ActBackwardLayoutKernel(int type, T slope, Layout Lx, const T *x, Layout Lg, const T *dy, Layout Ld, T *dx)
{
  DD_GRID_LOOP(i, Lx.bulk)
  {
    const int64_t od = Offset(Ld, i);
    dx[od]           = ActB(type, slope, x[Offset(Lx, i)], dy[Offset(Lg, i)]);
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
cudaError_t ActForwardLayout(int type, T slope, const Layout &Lx, const T *x, const Layout &Ly, T *y)
{
  if (Lx.bulk <= 0) return cudaSuccess;
  ActForwardLayoutKernel<T><<<Blocks(Lx.bulk), kThreads>>>(type, slope, Lx, x, Ly, y);
  return cudaGetLastError();
}
template <class T>
cudaError_t ActBackwardLayout(int type, T slope, const Layout &Lx, const T *x, const Layout &Lg, const T *dy, const Layout &Ld, T *dx)
{
  if (Lx.bulk <= 0) return cudaSuccess;
  ActBackwardLayoutKernel<T><<<Blocks(Lx.bulk), kThreads>>>(type, slope, Lx, x, Lg, dy, Ld, dx);
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

/* ------------------------------------------------------------------------------------------ */
/* deterministic reductions, normalization, layer normalization, optimizers, interpolation     */
namespace
{
/*
  IEEE operations one at a time, never contracted into a fused multiply-add: the elementwise
  kernels below then round as the host loops do (the host build targets x86-64 without FMA), so
  that they give the host's bits.
*/
__device__ inline float  Mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double Mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float  Add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double Add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float  Sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double Sub(double a, double b) { return __dsub_rn(a, b); }

constexpr int64_t kPartLen    = 4096;      /* entries a block reduces, about (16 per thread) */
constexpr int64_t kMaxParts   = 16384;     /* blocks of one group reduction, about */
constexpr int64_t kMaxGrid    = 65535;     /* blocks launched at most (block-stride loops cover the rest) */
constexpr int64_t kVecBlocks  = 1024;      /* blocks of a DDTensor reduction at most */
constexpr int64_t kColRows    = 32;        /* rows a thread of the layer norm's column sums adds, about */
constexpr int64_t kColThreads = 1 << 20;   /* threads of the column sums, about */

inline int Grid(int64_t nblocks) { return (int)(nblocks < kMaxGrid ? (nblocks > 0 ? nblocks : 1) : kMaxGrid); }

/* the parts of every group: a function of the sizes only, so the partition (and the bits) never change */
inline int64_t GroupParts(const Groups &g)
{
  if (g.G <= 0 || g.len <= 0) return 1;
  const int64_t want = (g.len + kPartLen - 1) / kPartLen, cap = (kMaxParts + g.G - 1) / g.G;
  return std::max<int64_t>(1, std::min(want, cap));
}

/* bulk index of entry e of group grp (Groups in cudakernels.hpp) */
__device__ inline int64_t GroupEntry(const Groups &g, int64_t grp, int64_t e)
{
  if (!g.batch) return grp * g.len + e;
  const int64_t n = e / g.S;
  return (n * g.C + grp) * g.S + (e - n * g.S);
}
/* the group of bulk index i */
__device__ inline int64_t GroupOf(const Groups &g, int64_t i) { return g.batch ? (i / g.S) % g.C : i / g.S; }

/* the sum over the block of a0 and a1 (a fixed tree over the threads; blockDim.x = kThreads), valid in thread 0 */
__device__ inline void BlockSum2(double *s0, double *s1, double &a0, double &a1)
{
  const int t = threadIdx.x;
  s0[t]       = a0;
  s1[t]       = a1;
  __syncthreads();
  for (int h = kThreads / 2; h > 0; h >>= 1) {
    if (t < h) {
      s0[t] += s0[t + h];
      s1[t] += s1[t + h];
    }
    __syncthreads();
  }
  a0 = s0[0];
  a1 = s1[0];
  __syncthreads(); /* the arrays are free again */
}

/*
  Part p of group grp (logical block b = grp P + p) is the entry range [p chunk, (p + 1) chunk);
  thread t adds its entries t, t + kThreads, ... in order, and the block's tree adds the threads:
  part[2 b + k] is the part's sum of the op's value k. The op: op(grp, bulk index, a0, a1).
*/
template <class Op>
__global__ void GroupReduceKernel(Groups g, int64_t P, Op op, double *part)
{
  __shared__ double s0[kThreads], s1[kThreads];
  const int64_t     nb = g.G * P, chunk = (g.len + P - 1) / P;
  for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
    const int64_t grp = b / P, e0 = (b % P) * chunk, e1 = e0 + chunk < g.len ? e0 + chunk : g.len;
    double        a0 = 0, a1 = 0;
    for (int64_t e = e0 + threadIdx.x; e < e1; e += kThreads) op(grp, GroupEntry(g, grp, e), a0, a1);
    BlockSum2(s0, s1, a0, a1);
    if (threadIdx.x == 0) {
      part[2 * b]     = a0;
      part[2 * b + 1] = a1;
    }
  }
}
/* out0[grp] = (the parts' sums of value 0, in part order) / div; out1[grp] = those of value 1 (out1 may be NULL) */
__global__ void GroupFinalKernel(int64_t G, int64_t P, const double *part, double div, double *out0, double *out1)
{
  DD_GRID_LOOP(grp, G)
  {
    double s0 = 0, s1 = 0;
    for (int64_t p = 0; p < P; p++) {
      s0 += part[2 * (grp * P + p)];
      s1 += part[2 * (grp * P + p) + 1];
    }
    out0[grp] = s0 / div;
    if (out1) out1[grp] = s1;
  }
}
template <class Op>
cudaError_t GroupReduce(const Groups &g, const Op &op, double *work, double div, double *out0, double *out1)
{
  if (g.G <= 0) return cudaSuccess;
  const int64_t P = GroupParts(g);
  GroupReduceKernel<Op><<<Grid(g.G * P), kThreads>>>(g, P, op, work);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  GroupFinalKernel<<<Blocks(g.G), kThreads>>>(g.G, P, work, div, out0, out1);
  return cudaGetLastError();
}

/* norm_ref.cxx's moments: sum x, or sum (x - mean)^2 (the second pass, the group's mean known) */
template <class T>
struct SumOp {
  Layout        L;
  const T      *x;
  const double *mean;
  __device__ void operator()(int64_t grp, int64_t i, double &a0, double &) const
  {
    const double v = (double)x[Offset(L, i)];
    if (mean) {
      const double d = v - mean[grp];
      a0 += d * d;
    } else a0 += v;
  }
};
/* norm_ref.cxx's backward sums: sum dy, sum dy (x - mu) */
template <class T>
struct BackwardSumsOp {
  Layout        Lx, Ld;
  const T      *x, *dy;
  const double *mu;
  __device__ void operator()(int64_t grp, int64_t i, double &a0, double &a1) const
  {
    const double gv = (double)dy[Offset(Ld, i)];
    a0 += gv;
    a1 += gv * ((double)x[Offset(Lx, i)] - mu[grp]);
  }
};
/* backend_ref.cxx's LayerNormBackwardSums, the row sums: sum w dy, sum w dy xhat (row r = grp, bulk index r M + column) */
template <class T>
struct LayerNormRowOp {
  int64_t       M;
  const T      *x, *dy, *w;
  const double *mean, *rstd;
  __device__ void operator()(int64_t r, int64_t i, double &a0, double &a1) const
  {
    const double gy = (double)dy[i], xh = ((double)x[i] - mean[r]) * rstd[r], gw = (double)w[i - r * M] * gy;
    a0 += gw;
    a1 += gw * xh;
  }
};

template <class T>
__global__ void NormScaleShiftKernel(Layout Lx, const T *x, Layout Ly, T *y, Groups g, const double *mu, const double *a, const double *b)
{
  DD_GRID_LOOP(i, Lx.bulk)
  {
    const int64_t grp = GroupOf(g, i);
    const T       u = (T)mu[grp], s = (T)a[grp], t = (T)b[grp];
    y[Offset(Ly, i)] = Add(Mul(s, Sub(x[Offset(Lx, i)], u)), t);
  }
}
template <class T>
__global__ void NormBackwardApplyKernel(Layout Lx, const T *x, Layout Ld, const T *dy, Layout Lo, T *dx, Groups g, const double *mu, const double *a, const double *b, const double *c)
{
  DD_GRID_LOOP(i, Lx.bulk)
  {
    const int64_t grp = GroupOf(g, i);
    const T       u = (T)mu[grp], p = (T)a[grp], q = (T)b[grp], r = (T)c[grp];
    const T       gv = dy[Offset(Ld, i)], xv = x[Offset(Lx, i)];
    dx[Offset(Lo, i)] = Add(Add(Mul(p, gv), Mul(q, Sub(xv, u))), r);
  }
}

template <class T>
__global__ void LayerNormApplyKernel(int64_t R, int64_t M, const T *x, const double *mean, const double *rstd, const T *w, const T *b, T *y)
{
  DD_GRID_LOOP(i, R * M)
  {
    const int64_t r = i / M, e = i - r * M;
    y[i]            = (T)Add(Mul((double)w[e], Mul(Sub((double)x[i], mean[r]), rstd[r])), (double)b[e]);
  }
}
template <class T>
__global__ void LayerNormBackwardApplyKernel(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, const double *G1, const double *G2, T *dx)
{
  DD_GRID_LOOP(i, R * M)
  {
    const int64_t r = i / M, e = i - r * M;
    const double  xh = Mul(Sub((double)x[i], mean[r]), rstd[r]);
    dx[i]            = (T)Mul(rstd[r], Sub(Sub(Mul((double)w[e], (double)dy[i]), G1[r]), Mul(xh, G2[r])));
  }
}

/* the column sums' row parts: a function of the sizes only */
inline int64_t ColumnParts(int64_t R, int64_t M)
{
  const int64_t want = (R + kColRows - 1) / kColRows, cap = M > 0 ? (kColThreads + M - 1) / M : 1;
  return std::max<int64_t>(1, std::min(want, cap));
}
/* thread k = p M + i adds rows [p chunk, (p + 1) chunk) of column i, in row order */
template <class T>
__global__ void LayerNormColumnPartKernel(int64_t R, int64_t M, int64_t P, const T *x, const T *dy, const double *mean, const double *rstd, double *part)
{
  const int64_t chunk = (R + P - 1) / P;
  DD_GRID_LOOP(k, P * M)
  {
    const int64_t p = k / M, i = k - p * M, r0 = p * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
    double        aw = 0, ab = 0;
    for (int64_t r = r0; r < r1; r++) {
      const double gy = (double)dy[r * M + i], xh = ((double)x[r * M + i] - mean[r]) * rstd[r];
      aw += gy * xh;
      ab += gy;
    }
    part[2 * k]     = aw;
    part[2 * k + 1] = ab;
  }
}
template <class T>
__global__ void LayerNormColumnFinalKernel(int64_t M, int64_t P, const double *part, T *dw, T *db)
{
  DD_GRID_LOOP(i, M)
  {
    double aw = 0, ab = 0;
    for (int64_t p = 0; p < P; p++) {
      aw += part[2 * (p * M + i)];
      ab += part[2 * (p * M + i) + 1];
    }
    dw[i] = (T)aw;
    db[i] = (T)ab;
  }
}

/* optimizer_kernels.cxx's loops, operation for operation */
template <class T>
__global__ void SGDKernel(int64_t n, T *p, const T *g, T *buf, SGDArgs c)
{
  DD_GRID_LOOP(j, n)
  {
    double gj = (double)g[j];
    const double pj = (double)p[j];
    gj              = Add(gj, Mul(c.weight_decay, pj));
    double b        = gj;
    if (c.momentum > 0) {
      b      = c.first ? gj : Add(Mul(c.momentum, (double)buf[j]), gj);
      buf[j] = (T)b;
      if (c.nesterov) b = Add(gj, Mul(c.momentum, b));
    }
    p[j] = (T)Sub(pj, Mul(c.lr, b));
  }
}
template <class T>
__global__ void AdamKernel(int64_t n, T *p, const T *g, T *m, T *v, AdamArgs c)
{
  DD_GRID_LOOP(j, n)
  {
    double gj = (double)g[j], pj = (double)p[j];
    if (c.decoupled) pj = Mul(pj, Sub(1.0, Mul(c.lr, c.weight_decay)));
    else gj = Add(gj, Mul(c.weight_decay, pj));
    const double mj = Add(Mul(c.beta1, (double)m[j]), Mul(Sub(1.0, c.beta1), gj));
    const double vj = Add(Mul(c.beta2, (double)v[j]), Mul(Mul(Sub(1.0, c.beta2), gj), gj));
    m[j]            = (T)mj;
    v[j]            = (T)vj;
    p[j]            = (T)Sub(pj, __ddiv_rn(Mul(c.lr, __ddiv_rn(mj, c.bc1)), Add(__dsqrt_rn(__ddiv_rn(vj, c.bc2)), c.eps)));
  }
}

/* output entry k -> (n, c, i0, i1, i2): C order over (N, C, out), or channels fastest (cinner) */
__device__ inline void UpIndex(const UpsampleArgs &a, int64_t k, int64_t *n, int64_t *c, int64_t *i0, int64_t *i1, int64_t *i2)
{
  if (a.cinner) {
    *c = k % a.C;
    k /= a.C;
  }
  *i2 = k % a.out[2];
  k /= a.out[2];
  *i1 = k % a.out[1];
  k /= a.out[1];
  *i0 = k % a.out[0];
  k /= a.out[0];
  if (!a.cinner) {
    *c = k % a.C;
    k /= a.C;
  }
  *n = k;
}
/* upsample_ref.cxx's Lerp1: the last dimension's two sources */
template <class T>
__device__ inline T UpLerp1(const UpsampleArgs &a, const T *x, int64_t base, int64_t i2)
{
  return Add(Mul(x[base + a.xo[4][a.i0[2][i2]]], (T)a.w0[2][i2]), Mul(x[base + a.xo[4][a.i1[2][i2]]], (T)a.w1[2][i2]));
}
template <class T>
__device__ inline T UpLerp2(const UpsampleArgs &a, const T *x, int64_t b, int64_t i1, int64_t i2)
{
  return Add(Mul(UpLerp1(a, x, b + a.xo[3][a.i0[1][i1]], i2), (T)a.w0[1][i1]), Mul(UpLerp1(a, x, b + a.xo[3][a.i1[1][i1]], i2), (T)a.w1[1][i1]));
}
template <class T>
__global__ void UpsampleForwardKernel(UpsampleArgs a, const T *x, T *y, int64_t total)
{
  DD_GRID_LOOP(k, total)
  {
    int64_t n, c, i0, i1, i2;
    UpIndex(a, k, &n, &c, &i0, &i1, &i2);
    const int64_t base = a.xo[0][n] + a.xo[1][c];
    T             v;
    if (!a.linear) v = x[base + a.xo[2][a.i0[0][i0]] + a.xo[3][a.i0[1][i1]] + a.xo[4][a.i0[2][i2]]];
    else if (a.D == 1) v = UpLerp1(a, x, base, i2);
    else if (a.D == 2) v = UpLerp2(a, x, base, i1, i2);
    else v = Add(Mul(UpLerp2(a, x, base + a.xo[2][a.i0[0][i0]], i1, i2), (T)a.w0[0][i0]), Mul(UpLerp2(a, x, base + a.xo[2][a.i1[0][i0]], i1, i2), (T)a.w1[0][i0]));
    y[a.yo[0][n] + a.yo[1][c] + a.yo[2][i0] + a.yo[3][i1] + a.yo[4][i2]] = v;
  }
}
template <class T>
__global__ void UpsampleBackwardKernel(UpsampleArgs a, const T *dy, T *dx, int64_t total)
{
  DD_GRID_LOOP(k, total)
  {
    int64_t n, c, i0, i1, i2;
    UpIndex(a, k, &n, &c, &i0, &i1, &i2);
    const T       v    = dy[a.yo[0][n] + a.yo[1][c] + a.yo[2][i0] + a.yo[3][i1] + a.yo[4][i2]];
    const int64_t base = a.xo[0][n] + a.xo[1][c];
    if (!a.linear) {
      atomicAdd(dx + base + a.xo[2][a.i0[0][i0]] + a.xo[3][a.i0[1][i1]] + a.xo[4][a.i0[2][i2]], v);
      continue;
    }
    /* the reference's transpose: leading (padded) dimensions have one tap of weight 1 */
    const int ta = a.D >= 3 ? 2 : 1, tb = a.D >= 2 ? 2 : 1;
    for (int s = 0; s < ta; s++) {
      const int64_t oa = base + a.xo[2][s ? a.i1[0][i0] : a.i0[0][i0]];
      const T       wa = ta == 1 ? (T)1 : (T)(s ? a.w1[0][i0] : a.w0[0][i0]);
      for (int t = 0; t < tb; t++) {
        const int64_t ob = oa + a.xo[3][t ? a.i1[1][i1] : a.i0[1][i1]];
        const T       wb = tb == 1 ? wa : Mul(wa, (T)(t ? a.w1[1][i1] : a.w0[1][i1]));
        atomicAdd(dx + ob + a.xo[4][a.i0[2][i2]], Mul(Mul(wb, (T)a.w0[2][i2]), v));
        atomicAdd(dx + ob + a.xo[4][a.i1[2][i2]], Mul(Mul(wb, (T)a.w1[2][i2]), v));
      }
    }
  }
}

/* the DDTensor reductions: a fixed number of blocks (a function of the bulk), each a fixed tree */
inline int64_t VecBlocks(int64_t bulk)
{
  const int64_t b = (bulk + kPartLen - 1) / kPartLen;
  return b < 1 ? 1 : (b > kVecBlocks ? kVecBlocks : b);
}
/* max |x| with NaN winning (once NaN, always NaN) */
__device__ inline double MaxNaN(double m, double v) { return (v > m || v != v) ? v : m; }

template <class T>
__global__ void DotKernel(Layout Lx, const T *x, Layout Ly, const T *y, double *part)
{
  __shared__ double s0[kThreads], s1[kThreads];
  double            a = 0, unused = 0;
  DD_GRID_LOOP(i, Lx.bulk) a += (double)x[Offset(Lx, i)] * (double)y[Offset(Ly, i)];
  BlockSum2(s0, s1, a, unused);
  if (threadIdx.x == 0) part[blockIdx.x] = a;
}
__global__ void DotFinalKernel(int64_t nb, const double *part, double *out)
{
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    double s = 0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    out[0] = s;
  }
}
template <class T>
__global__ void NormsKernel(Layout L, const T *x, int64_t nb, double *part)
{
  __shared__ double s0[kThreads], s1[kThreads];
  double            a = 0, b = 0, q = 0, m = 0;
  DD_GRID_LOOP(i, L.bulk)
  {
    const double v = (double)x[Offset(L, i)], u = fabs(v);
    a += v;
    b += u;
    q += v * v;
    m = MaxNaN(m, u);
  }
  double z = 0;
  BlockSum2(s0, s1, a, b);
  BlockSum2(s0, s1, q, z);
  /* the block's maximum: a tree of MaxNaN */
  const int t = threadIdx.x;
  s0[t]       = m;
  __syncthreads();
  for (int h = kThreads / 2; h > 0; h >>= 1) {
    if (t < h) s0[t] = MaxNaN(s0[t], s0[t + h]);
    __syncthreads();
  }
  if (t == 0) {
    part[blockIdx.x]          = a;
    part[nb + blockIdx.x]     = b;
    part[2 * nb + blockIdx.x] = q;
    part[3 * nb + blockIdx.x] = s0[0];
  }
}
__global__ void NormsFinalKernel(int64_t nb, const double *part, double *out)
{
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    double a = 0, b = 0, q = 0, m = 0;
    for (int64_t k = 0; k < nb; k++) {
      a += part[k];
      b += part[nb + k];
      q += part[2 * nb + k];
      m = MaxNaN(m, part[3 * nb + k]);
    }
    out[0] = a;
    out[1] = b;
    out[2] = q;
    out[3] = m;
  }
}
} // namespace

int64_t GroupWorkSize(const Groups &g) { return 2 * (g.G > 0 ? g.G : 1) * GroupParts(g); }

template <class T>
cudaError_t NormGroupSums(const Layout &L, const T *x, const Groups &g, const double *mean, double div, double *work, double *out)
{
  return GroupReduce(g, SumOp<T>{L, x, mean}, work, div, out, nullptr);
}
template <class T>
cudaError_t NormBackwardSums(const Layout &Lx, const T *x, const Layout &Ld, const T *dy, const Groups &g, const double *mu, double *work, double *sdy, double *sdyx)
{
  return GroupReduce(g, BackwardSumsOp<T>{Lx, Ld, x, dy, mu}, work, 1.0, sdy, sdyx);
}
template <class T>
cudaError_t NormScaleShift(const Layout &Lx, const T *x, const Layout &Ly, T *y, const Groups &g, const double *mu, const double *a, const double *b)
{
  if (Lx.bulk <= 0) return cudaSuccess;
  NormScaleShiftKernel<T><<<Blocks(Lx.bulk), kThreads>>>(Lx, x, Ly, y, g, mu, a, b);
  return cudaGetLastError();
}
template <class T>
cudaError_t NormBackwardApply(const Layout &Lx, const T *x, const Layout &Ld, const T *dy, const Layout &Lo, T *dx, const Groups &g, const double *mu, const double *a, const double *b, const double *c)
{
  if (Lx.bulk <= 0) return cudaSuccess;
  NormBackwardApplyKernel<T><<<Blocks(Lx.bulk), kThreads>>>(Lx, x, Ld, dy, Lo, dx, g, mu, a, b, c);
  return cudaGetLastError();
}

template <class T>
cudaError_t LayerNormApply(int64_t R, int64_t M, const T *x, const double *mean, const double *rstd, const T *w, const T *b, T *y)
{
  if (R <= 0 || M <= 0) return cudaSuccess;
  LayerNormApplyKernel<T><<<Blocks(R * M), kThreads>>>(R, M, x, mean, rstd, w, b, y);
  return cudaGetLastError();
}
template <class T>
cudaError_t LayerNormRowSums(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, double *work, double *g1, double *g2)
{
  Groups g;
  g.G = R, g.len = M, g.C = 1, g.S = M > 0 ? M : 1;
  return GroupReduce(g, LayerNormRowOp<T>{M, x, dy, w, mean, rstd}, work, 1.0, g1, g2);
}
int64_t LayerNormColumnWorkSize(int64_t R, int64_t M) { return 2 * ColumnParts(R, M) * (M > 0 ? M : 1); }
template <class T>
cudaError_t LayerNormColumnSums(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, double *work, T *dw, T *db)
{
  if (M <= 0) return cudaSuccess;
  const int64_t P = ColumnParts(R, M);
  LayerNormColumnPartKernel<T><<<Blocks(P * M), kThreads>>>(R, M, P, x, dy, mean, rstd, work);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  LayerNormColumnFinalKernel<T><<<Blocks(M), kThreads>>>(M, P, work, dw, db);
  return cudaGetLastError();
}
template <class T>
cudaError_t LayerNormBackwardApply(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, const double *G1, const double *G2, T *dx)
{
  if (R <= 0 || M <= 0) return cudaSuccess;
  LayerNormBackwardApplyKernel<T><<<Blocks(R * M), kThreads>>>(R, M, x, dy, mean, rstd, w, G1, G2, dx);
  return cudaGetLastError();
}

template <class T>
cudaError_t SGDUpdate(int64_t n, T *p, const T *g, T *buf, const SGDArgs &c)
{
  if (n <= 0) return cudaSuccess;
  SGDKernel<T><<<Blocks(n), kThreads>>>(n, p, g, buf, c);
  return cudaGetLastError();
}
template <class T>
cudaError_t AdamUpdate(int64_t n, T *p, const T *g, T *m, T *v, const AdamArgs &c)
{
  if (n <= 0) return cudaSuccess;
  AdamKernel<T><<<Blocks(n), kThreads>>>(n, p, g, m, v, c);
  return cudaGetLastError();
}

template <class T>
cudaError_t UpsampleForward(const UpsampleArgs &a, const T *x, T *y)
{
  const int64_t total = a.N * a.C * a.out[0] * a.out[1] * a.out[2];
  if (total <= 0) return cudaSuccess;
  UpsampleForwardKernel<T><<<Blocks(total), kThreads>>>(a, x, y, total);
  return cudaGetLastError();
}
template <class T>
cudaError_t UpsampleBackward(const UpsampleArgs &a, const T *dy, T *dx)
{
  const int64_t total = a.N * a.C * a.out[0] * a.out[1] * a.out[2];
  if (total <= 0) return cudaSuccess;
  UpsampleBackwardKernel<T><<<Blocks(total), kThreads>>>(a, dy, dx, total);
  return cudaGetLastError();
}

int64_t VecReduceWorkSize(int64_t bulk) { return 4 * VecBlocks(bulk); }
cudaError_t Dot(int dt, const Layout &Lx, const void *x, const Layout &Ly, const void *y, double *work, double *out)
{
  const int64_t nb = VecBlocks(Lx.bulk);
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    DotKernel<T><<<(int)nb, kThreads>>>(Lx, (const T *)x, Ly, (const T *)y, work); /* exactly nb blocks: the partition is fixed */
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    DotFinalKernel<<<1, 1>>>(nb, work, out);
    return cudaGetLastError();
  });
}
cudaError_t Norms(int dt, const Layout &L, const void *x, double *work, double *out)
{
  const int64_t nb = VecBlocks(L.bulk);
  return Dispatch(dt, [&](auto z) {
    using T = decltype(z);
    NormsKernel<T><<<(int)nb, kThreads>>>(L, (const T *)x, nb, work);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    NormsFinalKernel<<<1, 1>>>(nb, work, out);
    return cudaGetLastError();
  });
}

#define DD_CUDA_INSTANTIATE(T) \
  template cudaError_t PoolForward<T>(const PoolArgs &, const T *, T *, int64_t *); \
  template cudaError_t PoolBackward<T>(const PoolArgs &, const T *, T *, const int64_t *); \
  template cudaError_t FftGather<T>(const T *, T *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool); \
  template cudaError_t FftScatter<T>(const T *, T *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool); \
  template cudaError_t ActForward<T>(int, T, const T *, T *, int64_t); \
  template cudaError_t ActBackward<T>(int, T, const T *, const T *, T *, int64_t); \
  template cudaError_t ActForwardLayout<T>(int, T, const Layout &, const T *, const Layout &, T *); \
  template cudaError_t ActBackwardLayout<T>(int, T, const Layout &, const T *, const Layout &, const T *, const Layout &, T *); \
  template cudaError_t FillRows<T>(T *, int64_t, const T *, int64_t, int64_t); \
  template cudaError_t ColumnSumsAdd<T>(const T *, int64_t, int64_t, int64_t, T *); \
  template cudaError_t NormGroupSums<T>(const Layout &, const T *, const Groups &, const double *, double, double *, double *); \
  template cudaError_t NormBackwardSums<T>(const Layout &, const T *, const Layout &, const T *, const Groups &, const double *, double *, double *, double *); \
  template cudaError_t NormScaleShift<T>(const Layout &, const T *, const Layout &, T *, const Groups &, const double *, const double *, const double *); \
  template cudaError_t NormBackwardApply<T>(const Layout &, const T *, const Layout &, const T *, const Layout &, T *, const Groups &, const double *, const double *, const double *, const double *); \
  template cudaError_t LayerNormApply<T>(int64_t, int64_t, const T *, const double *, const double *, const T *, const T *, T *); \
  template cudaError_t LayerNormRowSums<T>(int64_t, int64_t, const T *, const T *, const double *, const double *, const T *, double *, double *, double *); \
  template cudaError_t LayerNormColumnSums<T>(int64_t, int64_t, const T *, const T *, const double *, const double *, double *, T *, T *); \
  template cudaError_t LayerNormBackwardApply<T>(int64_t, int64_t, const T *, const T *, const double *, const double *, const T *, const double *, const double *, T *); \
  template cudaError_t SGDUpdate<T>(int64_t, T *, const T *, T *, const SGDArgs &); \
  template cudaError_t AdamUpdate<T>(int64_t, T *, const T *, T *, T *, const AdamArgs &); \
  template cudaError_t UpsampleForward<T>(const UpsampleArgs &, const T *, T *); \
  template cudaError_t UpsampleBackward<T>(const UpsampleArgs &, const T *, T *);
DD_CUDA_INSTANTIATE(float)
DD_CUDA_INSTANTIATE(double)
} // namespace cuda
} // namespace ddnn
