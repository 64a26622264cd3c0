/*
  CUDA kernels of the loss layer and of the dropout masks (see losskernels.hpp): the arithmetic
  of the host loops of src/backend/reference/loss_ref.cxx, in double, one thread per element
  (element losses) or per position (cross-entropy, looping over the classes).
*/
#include "losskernels.hpp"
#include <math.h>

namespace ddnn
{
namespace cuda
{
namespace
{
constexpr int kThreads   = 256;
constexpr int kMaxBlocks = 1024; /* the forward's block sums: at most this many (fixed for a size: deterministic) */

inline int Blocks(int64_t n, int cap)
{
  int64_t b = (n + kThreads - 1) / kThreads;
  return (int)(b < cap ? (b > 0 ? b : 1) : cap);
}

#define DD_GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* the storage offset of bulk coordinates q in L (blocking as LayoutOffset()) */
__device__ inline int64_t At(const Layout &L, const int64_t *q)
{
  int64_t off = 0;
  for (int k = 0; k < L.order; k++) {
    const int64_t j = q[k] + L.lo[k];
    off += k == L.bdim ? L.stride[k] * (j / L.bs) + j % L.bs : L.stride[k] * j;
  }
  return off;
}
/* the entry of position q (of the logits' order d) with class c in L: L of order d, or d - 1 without the class dimension */
__device__ inline int64_t AtClass(const Layout &L, int d, const int64_t *q, int64_t c)
{
  int64_t r[kMaxDim];
  if (L.order == d) {
    for (int k = 0; k < d; k++) r[k] = q[k];
    r[1] = c;
  } else {
    r[0] = q[0];
    for (int k = 2; k < d; k++) r[k - 1] = q[k];
  }
  return At(L, r);
}
/* item i's coordinates, C order over n (the class dimension taken as 1 for positions) */
__device__ inline void Coords(const Layout &L, bool positions, int64_t i, int64_t *q)
{
  for (int k = L.order - 1; k >= 0; k--) {
    const int64_t nk = positions && k == 1 ? 1 : L.n[k];
    q[k]             = i % nk;
    i /= nk;
  }
}
__device__ inline double Weight(const LossArgs &a, int64_t c) { return a.w ? a.w[c] : 1.0; }

/* log-sum-exp of the logits at position q */
template <class T>
__device__ inline double LogSumExp(const LossArgs &a, const T *p, const int64_t *q, int64_t C)
{
  double mx = -INFINITY, se = 0;
  for (int64_t c = 0; c < C; c++) {
    const double v = (double)p[AtClass(a.p, a.p.order, q, c)];
    mx             = v > mx ? v : mx; /* as std::max(mx, v): a NaN logit leaves mx, and propagates through exp */
  }
  for (int64_t c = 0; c < C; c++) se += exp((double)p[AtClass(a.p, a.p.order, q, c)] - mx);
  return mx + log(se);
}

struct Partial {
  double l, wd, nbad, badat, badv;
};

/* the forward's terms: per thread over the grid, then a tree in shared memory, one partial per block */
template <class T>
__global__ void LossForwardKernel(LossArgs a, const T *p, const T *t, T *y, int64_t items, double *work)
{
  __shared__ Partial sh[kThreads];
  const bool         ce = a.type == 2;
  const int          d  = a.p.order;
  const int64_t      C  = a.p.n[1];
  Partial            m  = {0, 0, 0, (double)items, 0};
  DD_GRID_LOOP(i, items)
  {
    int64_t q[kMaxDim];
    Coords(a.p, ce, i, q);
    double l = 0, wd = 0;
    if (!ce) {
      const double r = (double)p[At(a.p, q)] - (double)t[At(a.t, q)];
      l              = a.type == 0 ? r * r : fabs(r);
    } else if (!a.prob) {
      const double v = (double)t[AtClass(a.t, d, q, 0)];
      if (!((v >= 0 && v < (double)C && v == floor(v)) || v == (double)a.ignore)) {
        if (m.nbad == 0 || (double)i < m.badat) m.badat = (double)i, m.badv = v;
        m.nbad += 1;
        continue;
      }
      const int64_t yc = (int64_t)llround(v);
      if (yc != a.ignore) {
        const double lse = LogSumExp(a, p, q, C), wy = Weight(a, yc);
        double       sm  = 0;
        for (int64_t c = 0; c < C; c++) sm += Weight(a, c) * (lse - (double)p[AtClass(a.p, d, q, c)]);
        l  = (1 - a.eps) * wy * (lse - (double)p[AtClass(a.p, d, q, yc)]) + (a.eps > 0 ? a.eps / C * sm : 0.0); /* without smoothing no 0 * sm: a -inf logit makes sm +inf */
        wd = wy;
      }
    } else {
      const double lse = LogSumExp(a, p, q, C);
      for (int64_t c = 0; c < C; c++) {
        const double tc = (1 - a.eps) * (double)t[AtClass(a.t, d, q, c)] + a.eps / C;
        l += tc * Weight(a, c) * (lse - (double)p[AtClass(a.p, d, q, c)]);
      }
      wd = 1;
    }
    m.l += l;
    m.wd += wd;
    if (a.hasy) y[ce ? AtClass(a.y, d, q, 0) : At(a.y, q)] = (T)l;
  }
  sh[threadIdx.x] = m;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      Partial &u = sh[threadIdx.x], &v = sh[threadIdx.x + s];
      u.l += v.l;
      u.wd += v.wd;
      if (v.nbad > 0 && (u.nbad == 0 || v.badat < u.badat)) u.badat = v.badat, u.badv = v.badv;
      u.nbad += v.nbad;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double *o = work + 5 * (int64_t)blockIdx.x;
    o[0] = sh[0].l, o[1] = sh[0].wd, o[2] = sh[0].nbad, o[3] = sh[0].badat, o[4] = sh[0].badv;
  }
}

/* the block sums in block order (one thread: deterministic) into work[5 kMaxBlocks ..] */
__global__ void LossFinishKernel(int nb, double *work)
{
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double l = 0, wd = 0, nbad = 0, badat = 0, badv = 0;
  for (int b = 0; b < nb; b++) {
    const double *o = work + 5 * (int64_t)b;
    l += o[0];
    wd += o[1];
    if (o[2] > 0 && (nbad == 0 || o[3] < badat)) badat = o[3], badv = o[4];
    nbad += o[2];
  }
  double *r = work + 5 * (int64_t)kMaxBlocks;
  r[0] = l, r[1] = wd, r[2] = nbad, r[3] = badv;
}

template <class T>
__global__ void LossBackwardKernel(LossArgs a, const T *p, const T *t, const T *dy, double g0, T *dp, T *dt, int64_t items)
{
  const bool    ce = a.type == 2;
  const int     d  = a.p.order;
  const int64_t C  = a.p.n[1];
  DD_GRID_LOOP(i, items)
  {
    int64_t q[kMaxDim];
    Coords(a.p, ce, i, q);
    if (!ce) {
      const double g  = a.hasdy ? (double)dy[At(a.dy, q)] : g0;
      const double r  = (double)p[At(a.p, q)] - (double)t[At(a.t, q)];
      const double dr = g * (a.type == 0 ? 2 * r : (r > 0 ? 1.0 : (r < 0 ? -1.0 : 0.0)));
      if (a.hasdp) dp[At(a.dp, q)] = (T)dr;
      if (a.hasdt) dt[At(a.dt, q)] = (T)-dr;
      continue;
    }
    const double g   = a.hasdy ? (double)dy[AtClass(a.dy, d, q, 0)] : g0;
    const double lse = LogSumExp(a, p, q, C);
    if (!a.prob) {
      const int64_t yc = (int64_t)llround((double)t[AtClass(a.t, d, q, 0)]);
      if (!a.hasdp) continue;
      if (yc == a.ignore) { /* PyTorch's 0 - softmax * 0: 0, or nan where a logit is nan or +inf */
        for (int64_t c = 0; c < C; c++) dp[AtClass(a.dp, d, q, c)] = (T)(0.0 - exp((double)p[AtClass(a.p, d, q, c)] - lse) * 0.0);
        continue;
      }
      const double wy = Weight(a, yc);
      for (int64_t c = 0; c < C; c++) {
        const double pc = exp((double)p[AtClass(a.p, d, q, c)] - lse);
        dp[AtClass(a.dp, d, q, c)] = (T)(g * ((1 - a.eps) * wy * (pc - (c == yc ? 1.0 : 0.0)) + a.eps / C * (a.Wt * pc - Weight(a, c))));
      }
      continue;
    }
    double S = 0;
    for (int64_t c = 0; c < C; c++) S += ((1 - a.eps) * (double)t[AtClass(a.t, d, q, c)] + a.eps / C) * Weight(a, c);
    for (int64_t c = 0; c < C; c++) {
      const double v = (double)p[AtClass(a.p, d, q, c)];
      if (a.hasdp) dp[AtClass(a.dp, d, q, c)] = (T)(g * (exp(v - lse) * S - ((1 - a.eps) * (double)t[AtClass(a.t, d, q, c)] + a.eps / C) * Weight(a, c)));
      if (a.hasdt) dt[AtClass(a.dt, d, q, c)] = (T)(g * (-(1 - a.eps) * Weight(a, c) * (v - lse)));
    }
  }
}

int64_t Items(const LossArgs &a)
{
  int64_t n = 1;
  for (int k = 0; k < a.p.order; k++)
    if (!(a.type == 2 && k == 1)) n *= a.p.n[k];
  return n;
}

/* SplitMix64 and UniformFromCounter() of src/tensor/layout.hpp, bit for bit */
__device__ inline uint64_t SplitMix64(uint64_t x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ inline double UniformFromCounter(uint64_t seed, uint64_t counter) { return (double)(SplitMix64(SplitMix64(seed) ^ counter) >> 11) * 0x1.0p-53; }

struct Global {
  int64_t start[kMaxDim], gs[kMaxDim];
};

template <class T>
__global__ void DropoutKernel(uint64_t key, double p, Layout Lx, const T *x, Layout Ly, T *y, Global G)
{
  const T scale = (T)(1.0 / (1.0 - p));
  DD_GRID_LOOP(i, Lx.bulk)
  {
    int64_t q[kMaxDim], g = 0;
    Coords(Lx, false, i, q);
    for (int k = 0; k < Lx.order; k++) g += (G.start[k] + q[k]) * G.gs[k];
    y[At(Ly, q)] = x[At(Lx, q)] * (UniformFromCounter(key, (uint64_t)g) >= p ? scale : (T)0); /* x * mask, as PyTorch: a dropped nan or inf gives nan */
  }
}
} // namespace

int64_t LossWorkSize(const LossArgs &) { return 5 * (int64_t)kMaxBlocks + 4; }

template <class T>
cudaError_t LossForward(const LossArgs &a, const T *p, const T *t, T *y, double *work, double out[4])
{
  const int64_t items = Items(a);
  const int     nb    = Blocks(items, kMaxBlocks);
  LossForwardKernel<T><<<nb, kThreads>>>(a, p, t, y, items, work);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  LossFinishKernel<<<1, 1>>>(nb, work);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return cudaMemcpy(out, work + 5 * (int64_t)kMaxBlocks, 4 * sizeof(double), cudaMemcpyDeviceToHost);
}

template <class T>
cudaError_t LossBackward(const LossArgs &a, const T *p, const T *t, const T *dy, double g0, T *dp, T *dt)
{
  const int64_t items = Items(a);
  if (items == 0) return cudaSuccess;
  LossBackwardKernel<T><<<Blocks(items, 65536), kThreads>>>(a, p, t, dy, g0, dp, dt, items);
  return cudaGetLastError();
}

template <class T>
cudaError_t Dropout(uint64_t key, double p, const Layout &Lx, const T *x, const Layout &Ly, T *y, const int64_t start[], const int64_t gs[])
{
  Global G;
  for (int k = 0; k < kMaxDim; k++) G.start[k] = k < Lx.order ? start[k] : 0, G.gs[k] = k < Lx.order ? gs[k] : 0;
  if (Lx.bulk == 0) return cudaSuccess;
  DropoutKernel<T><<<Blocks(Lx.bulk, 65536), kThreads>>>(key, p, Lx, x, Ly, y, G);
  return cudaGetLastError();
}

template cudaError_t LossForward<float>(const LossArgs &, const float *, const float *, float *, double *, double[4]);
template cudaError_t LossForward<double>(const LossArgs &, const double *, const double *, double *, double *, double[4]);
template cudaError_t LossBackward<float>(const LossArgs &, const float *, const float *, const float *, double, float *, float *);
template cudaError_t LossBackward<double>(const LossArgs &, const double *, const double *, const double *, double, double *, double *);
template cudaError_t Dropout<float>(uint64_t, double, const Layout &, const float *, const Layout &, float *, const int64_t[], const int64_t[]);
template cudaError_t Dropout<double>(uint64_t, double, const Layout &, const double *, const Layout &, double *, const int64_t[], const int64_t[]);
} // namespace cuda
} // namespace ddnn
