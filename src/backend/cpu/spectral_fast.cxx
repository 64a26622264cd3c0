/*
  Fast loops of the spectral layer's mode mixing (KernelTable<T>::spectralmix, spectralmixadjoint
  of /cpu/blas, which /cpu/dnnl falls back to; SpectralMixGeom in include/ddnn/private/ddbackendimpl.h).

  Per mode the mixing is a complex matrix product, (N x Ci)(Ci x Co) forward; the modes are the
  fastest index of every operand, so the loops put them in the lanes of 64-byte vectors (16 floats,
  8 doubles; GCC's vector extensions, compiled for AVX-512, for AVX2 with FMA and for x86-64's SSE2
  baseline, the widest copy the CPU has chosen at run time) and compute a scalar complex product per
  lane. The complex operands are stored as (real, imag) pairs: per tile of KV vectors of modes the
  tile's rows of X (forward and dW) and of G = s_k dY (adjoint) are split once into real and
  imaginary vectors, which the loops then read Co / NB or Ci times; W, read once per tile and sample
  block, is split in registers by two shuffles. Blocks of NB samples accumulate in registers over
  the sum's index (forward: i; dX: o; dW: n, blocks of two outputs) and are scaled and interleaved
  back once; one sample (no block shares a W vector) streams W's rows whole instead. The sums run
  over the reference's index order (src/backend/reference/spectral_ref.cxx), with fused multiply-adds
  where the copy has them and dW's sum over n formed before it is added, so the results agree with
  the reference's up to rounding (tests/test_08_fastkernels.cxx, FastSpectral).

  bench_spectral -kernels 1 (AMD EPYC, AVX-512, one core, Forward + Adjoint): 0.25-0.36x the reference
  loops' time with 4-8 samples, 0.51-0.66x with one (bench/README, bench_spectral).
*/
#include <backend/cpu/fastkernels.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace ddnn
{
#if defined(__GNUC__) && !defined(__clang__)
  /* 64-byte vectors pass between always-inline helpers only; no such value crosses a call, whatever the copy's ISA */
  #pragma GCC diagnostic ignored "-Wpsabi"
namespace
{
template <class T>
struct Vec;
template <>
struct Vec<float> {
  typedef float V __attribute__((vector_size(64)));
  typedef int   I __attribute__((vector_size(64)));
};
template <>
struct Vec<double> {
  typedef double V __attribute__((vector_size(64)));
  typedef long   I __attribute__((vector_size(64)));
};
  #define DD_AI __attribute__((always_inline)) inline

/* the tile's workspace of split rows: 64-byte aligned, grown as needed, one per thread */
void *Workspace(size_t bytes)
{
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  static thread_local std::unique_ptr<void, Free> buf;
  static thread_local size_t                      cap = 0;
  bytes = std::max<size_t>(bytes, 64);
  if (bytes > cap) {
    buf.reset();
    cap = 0;
    void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) return nullptr;
    buf.reset(p);
    cap = bytes;
  }
  return buf.get();
}

/* L complex entries from p (c of them valid, the rest read as 0) split into real and imaginary lanes */
template <class T, bool TAIL>
DD_AI void Deinterleave(const T *p, PetscInt c, typename Vec<T>::V &re, typename Vec<T>::V &im)
{
  typedef typename Vec<T>::V V;
  typedef typename Vec<T>::I I;
  constexpr int L = 64 / sizeof(T);
  V             a, b;
  if (!TAIL || c >= L) {
    std::memcpy(&a, p, sizeof(V));
    std::memcpy(&b, p + L, sizeof(V));
  } else {
    T t[2 * L] = {};
    if (c > 0) std::memcpy(t, p, sizeof(T) * 2 * c);
    std::memcpy(&a, t, sizeof(V));
    std::memcpy(&b, t + L, sizeof(V));
  }
  I er, ei;
  for (int l = 0; l < L; l++) {
    er[l] = 2 * l;
    ei[l] = 2 * l + 1;
  }
  re = __builtin_shuffle(a, b, er);
  im = __builtin_shuffle(a, b, ei);
}

/* the c valid entries (TAIL) or all L of real and imaginary lanes written to p as pairs, or added to p's (ADD) */
template <class T, bool TAIL, bool ADD>
DD_AI void Interleave(typename Vec<T>::V re, typename Vec<T>::V im, PetscInt c, T *p)
{
  typedef typename Vec<T>::V V;
  typedef typename Vec<T>::I I;
  constexpr int L = 64 / sizeof(T);
  I             lo, hi;
  for (int l = 0; l < L / 2; l++) {
    lo[2 * l]     = l;
    lo[2 * l + 1] = l + L;
    hi[2 * l]     = l + L / 2;
    hi[2 * l + 1] = l + L / 2 + L;
  }
  V a = __builtin_shuffle(re, im, lo), b = __builtin_shuffle(re, im, hi);
  if (!TAIL || c >= L) {
    if (ADD) {
      V pa, pb;
      std::memcpy(&pa, p, sizeof(V));
      std::memcpy(&pb, p + L, sizeof(V));
      a += pa;
      b += pb;
    }
    std::memcpy(p, &a, sizeof(V));
    std::memcpy(p + L, &b, sizeof(V));
  } else {
    T t[2 * L];
    std::memcpy(t, &a, sizeof(V));
    std::memcpy(t + L, &b, sizeof(V));
    for (PetscInt j = 0; j < 2 * c; j++) p[j] = ADD ? p[j] + t[j] : t[j];
  }
}

/* s_k on the lanes of vector v of the tile at k0 (0 past K) */
template <class T>
DD_AI typename Vec<T>::V ScaleLanes(const SpectralMixGeom &g, PetscInt k0)
{
  typename Vec<T>::V s;
  constexpr int      L = 64 / sizeof(T);
  for (int l = 0; l < L; l++) s[l] = k0 + l < g.K ? SpectralMixScale<T>(g, k0 + l) : (T)0;
  return s;
}

/*
  rows r < R of A (R, K) complex, modes k0 .. k0 + KV L (zeros past K), split into S[2 (r KV + v)] (real)
  and S[2 (r KV + v) + 1] (imaginary), each multiplied by s (SCALE: G = s_k dY, entry by entry in T)
*/
template <class T, int KV, bool TAIL, bool SCALE>
DD_AI void SplitRows(const T *A, PetscInt R, PetscInt K, PetscInt k0, const typename Vec<T>::V *s, typename Vec<T>::V *S)
{
  constexpr int L = 64 / sizeof(T);
  for (PetscInt r = 0; r < R; r++)
    for (int v = 0; v < KV; v++) {
      typename Vec<T>::V re, im;
      Deinterleave<T, TAIL>(A + 2 * (r * K + k0 + v * L), K - k0 - v * L, re, im);
      if (SCALE) {
        re *= s[v];
        im *= s[v];
      }
      S[2 * (r * KV + v)]     = re;
      S[2 * (r * KV + v) + 1] = im;
    }
}

/*
  One tile of a product with W for NB samples from n0, every output row j, summed over c (us: the tile's
  split rows (N, Cs)):
    forward (ADJ false):  Y[n, o]  = s_k sum_i X[n, i] W[i, o]        (j = o, c = i; us = xs)
    dX      (ADJ true):   dX[n, i] =     sum_o G[n, o] conj(W[i, o])  (j = i, c = o; us = gs)
*/
template <class T, int NB, int KV, bool TAIL, bool ADJ>
DD_AI void ProductBlock(const SpectralMixGeom &g, PetscInt n0, PetscInt k0, const typename Vec<T>::V *us, const typename Vec<T>::V *s, const T *W, T *out)
{
  typedef typename Vec<T>::V V;
  constexpr int              L = 64 / sizeof(T);
  const PetscInt             Co = g.Co, K = g.K, Cj = ADJ ? g.Ci : g.Co, Cs = ADJ ? g.Co : g.Ci;
  for (PetscInt j = 0; j < Cj; j++) {
    V ar[NB][KV], ai[NB][KV];
    for (int a = 0; a < NB; a++)
      for (int v = 0; v < KV; v++) ar[a][v] = ai[a][v] = V{};
    for (PetscInt c = 0; c < Cs; c++) {
      const T *w = W + 2 * ((ADJ ? j * Co + c : c * Co + j) * K + k0);
      for (int v = 0; v < KV; v++) {
        V wr, wi;
        Deinterleave<T, TAIL>(w + 2 * v * L, K - k0 - v * L, wr, wi);
        for (int a = 0; a < NB; a++) {
          const V ur = us[2 * (((n0 + a) * Cs + c) * KV + v)], ui = us[2 * (((n0 + a) * Cs + c) * KV + v) + 1];
          if (ADJ) { /* u conj(w) */
            ar[a][v] += ur * wr + ui * wi;
            ai[a][v] += ui * wr - ur * wi;
          } else { /* u w */
            ar[a][v] += ur * wr - ui * wi;
            ai[a][v] += ur * wi + ui * wr;
          }
        }
      }
    }
    for (int a = 0; a < NB; a++)
      for (int v = 0; v < KV; v++) {
        T *o = out + 2 * (((n0 + a) * Cj + j) * K + k0 + v * L);
        if (ADJ) Interleave<T, TAIL, false>(ar[a][v], ai[a][v], K - k0 - v * L, o);
        else Interleave<T, TAIL, false>(s[v] * ar[a][v], s[v] * ai[a][v], K - k0 - v * L, o);
      }
  }
}

/* dW, one tile: dW[i, o] += sum_n conj(X[n, i]) G[n, o] for OB outputs from o0 */
template <class T, int OB, int KV, bool TAIL>
DD_AI void WeightBlock(const SpectralMixGeom &g, PetscInt i, PetscInt o0, PetscInt k0, const typename Vec<T>::V *xs, const typename Vec<T>::V *gs, T *dW)
{
  typedef typename Vec<T>::V V;
  constexpr int              L = 64 / sizeof(T);
  const PetscInt             N = g.N, Ci = g.Ci, Co = g.Co, K = g.K;
  V                          ar[OB][KV], ai[OB][KV];
  for (int b = 0; b < OB; b++)
    for (int v = 0; v < KV; v++) ar[b][v] = ai[b][v] = V{};
  for (PetscInt n = 0; n < N; n++)
    for (int v = 0; v < KV; v++) {
      const V xr = xs[2 * ((n * Ci + i) * KV + v)], xi = xs[2 * ((n * Ci + i) * KV + v) + 1];
      for (int b = 0; b < OB; b++) {
        const V gr = gs[2 * ((n * Co + o0 + b) * KV + v)], gi = gs[2 * ((n * Co + o0 + b) * KV + v) + 1];
        ar[b][v] += xr * gr + xi * gi;
        ai[b][v] += xr * gi - xi * gr;
      }
    }
  for (int b = 0; b < OB; b++)
    for (int v = 0; v < KV; v++) Interleave<T, TAIL, true>(ar[b][v], ai[b][v], K - k0 - v * L, dW + 2 * ((i * Co + o0 + b) * K + k0 + v * L));
}

constexpr int kTileVectors = 4; /* KV: vectors of modes per tile (64 float modes, 32 double) */

template <class T, bool TAIL>
DD_AI void ForwardTile(const SpectralMixGeom &g, PetscInt k0, typename Vec<T>::V *xs, const T *X, const T *W, T *Y)
{
  typedef typename Vec<T>::V V;
  constexpr int              KV = kTileVectors, L = 64 / sizeof(T);
  V                          s[KV];
  for (int v = 0; v < KV; v++) s[v] = ScaleLanes<T>(g, k0 + v * L);
  SplitRows<T, KV, TAIL, false>(X, g.N * g.Ci, g.K, k0, s, xs);
  PetscInt n0 = 0;
  for (; n0 + 2 <= g.N; n0 += 2) ProductBlock<T, 2, KV, TAIL, false>(g, n0, k0, xs, s, W, Y);
  for (; n0 < g.N; n0++) ProductBlock<T, 1, KV, TAIL, false>(g, n0, k0, xs, s, W, Y);
}

template <class T, bool TAIL>
DD_AI void AdjointTile(const SpectralMixGeom &g, PetscInt k0, typename Vec<T>::V *xs, typename Vec<T>::V *gs, const T *X, const T *W, const T *dY, T *dX, T *dW)
{
  typedef typename Vec<T>::V V;
  constexpr int              KV = kTileVectors, L = 64 / sizeof(T);
  V                          s[KV];
  for (int v = 0; v < KV; v++) s[v] = ScaleLanes<T>(g, k0 + v * L);
  SplitRows<T, KV, TAIL, false>(X, g.N * g.Ci, g.K, k0, s, xs);
  SplitRows<T, KV, TAIL, true>(dY, g.N * g.Co, g.K, k0, s, gs);
  PetscInt n0 = 0;
  for (; n0 + 2 <= g.N; n0 += 2) ProductBlock<T, 2, KV, TAIL, true>(g, n0, k0, gs, s, W, dX);
  for (; n0 < g.N; n0++) ProductBlock<T, 1, KV, TAIL, true>(g, n0, k0, gs, s, W, dX);
  for (PetscInt i = 0; i < g.Ci; i++) {
    PetscInt o0 = 0;
    for (; o0 + 2 <= g.Co; o0 += 2) WeightBlock<T, 2, KV, TAIL>(g, i, o0, k0, xs, gs, dW);
    for (; o0 < g.Co; o0++) WeightBlock<T, 1, KV, TAIL>(g, i, o0, k0, xs, gs, dW);
  }
}

/*
  One sample (N = 1): no block of samples shares a W vector, so W's rows are streamed whole instead, in
  storage order (i outer, o inner), each read once; X and G split over all modes, and the sums
  accumulated in split rows of the workspace (Y: Co rows, dX: Ci rows), interleaved at the end. The
  same sums in the same order as the tiles.
*/
template <class T>
DD_AI void ForwardStream(const SpectralMixGeom &g, const T *X, const T *W, T *Y, void *work)
{
  typedef typename Vec<T>::V V;
  constexpr int              L  = 64 / sizeof(T);
  const PetscInt             Ci = g.Ci, Co = g.Co, K = g.K, nv = (K + L - 1) / L;
  V                         *xs = (V *)work, *ys = xs + 2 * nv * Ci;
  for (PetscInt i = 0; i < Ci; i++)
    for (PetscInt v = 0; v < nv; v++) Deinterleave<T, true>(X + 2 * (i * K + v * L), K - v * L, xs[2 * (i * nv + v)], xs[2 * (i * nv + v) + 1]);
  for (PetscInt j = 0; j < 2 * nv * Co; j++) ys[j] = V{};
  for (PetscInt i = 0; i < Ci; i++)
    for (PetscInt o = 0; o < Co; o++) {
      const T *w = W + 2 * (i * Co + o) * K;
      V       *y = ys + 2 * o * nv;
      const V *x = xs + 2 * i * nv;
      PetscInt v = 0;
      for (; (v + 1) * L <= K; v++) {
        V wr, wi;
        Deinterleave<T, false>(w + 2 * v * L, L, wr, wi);
        y[2 * v] += x[2 * v] * wr - x[2 * v + 1] * wi;
        y[2 * v + 1] += x[2 * v] * wi + x[2 * v + 1] * wr;
      }
      if (v < nv) {
        V wr, wi;
        Deinterleave<T, true>(w + 2 * v * L, K - v * L, wr, wi);
        y[2 * v] += x[2 * v] * wr - x[2 * v + 1] * wi;
        y[2 * v + 1] += x[2 * v] * wi + x[2 * v + 1] * wr;
      }
    }
  for (PetscInt o = 0; o < Co; o++)
    for (PetscInt v = 0; v < nv; v++) {
      const V s = ScaleLanes<T>(g, v * L);
      Interleave<T, true, false>(s * ys[2 * (o * nv + v)], s * ys[2 * (o * nv + v) + 1], K - v * L, Y + 2 * (o * K + v * L));
    }
}

template <class T>
DD_AI void AdjointStream(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW, void *work)
{
  typedef typename Vec<T>::V V;
  constexpr int              L  = 64 / sizeof(T);
  const PetscInt             Ci = g.Ci, Co = g.Co, K = g.K, nv = (K + L - 1) / L;
  V                         *xs = (V *)work, *gs = xs + 2 * nv * Ci, *ds = gs + 2 * nv * Co;
  for (PetscInt i = 0; i < Ci; i++)
    for (PetscInt v = 0; v < nv; v++) Deinterleave<T, true>(X + 2 * (i * K + v * L), K - v * L, xs[2 * (i * nv + v)], xs[2 * (i * nv + v) + 1]);
  for (PetscInt o = 0; o < Co; o++)
    for (PetscInt v = 0; v < nv; v++) {
      const V s = ScaleLanes<T>(g, v * L);
      Deinterleave<T, true>(dY + 2 * (o * K + v * L), K - v * L, gs[2 * (o * nv + v)], gs[2 * (o * nv + v) + 1]);
      gs[2 * (o * nv + v)] *= s;
      gs[2 * (o * nv + v) + 1] *= s;
    }
  for (PetscInt j = 0; j < 2 * nv * Ci; j++) ds[j] = V{};
  for (PetscInt i = 0; i < Ci; i++)
    for (PetscInt o = 0; o < Co; o++) {
      const T *w  = W + 2 * (i * Co + o) * K;
      T       *dw = dW + 2 * (i * Co + o) * K;
      const V *x = xs + 2 * i * nv, *gg = gs + 2 * o * nv;
      V       *d = ds + 2 * i * nv;
      for (PetscInt v = 0; v < nv; v++) {
        const bool full = (v + 1) * L <= K;
        V          wr, wi;
        if (full) Deinterleave<T, false>(w + 2 * v * L, L, wr, wi);
        else Deinterleave<T, true>(w + 2 * v * L, K - v * L, wr, wi);
        const V gr = gg[2 * v], gi = gg[2 * v + 1], xr = x[2 * v], xi = x[2 * v + 1];
        d[2 * v] += gr * wr + gi * wi;
        d[2 * v + 1] += gi * wr - gr * wi;
        const V ar = xr * gr + xi * gi, ai = xr * gi - xi * gr;
        if (full) Interleave<T, false, true>(ar, ai, L, dw + 2 * v * L);
        else Interleave<T, true, true>(ar, ai, K - v * L, dw + 2 * v * L);
      }
    }
  for (PetscInt i = 0; i < Ci; i++)
    for (PetscInt v = 0; v < nv; v++) Interleave<T, true, false>(ds[2 * (i * nv + v)], ds[2 * (i * nv + v) + 1], K - v * L, dX + 2 * (i * K + v * L));
}

template <class T>
DD_AI void ForwardLoops(const SpectralMixGeom &g, const T *X, const T *W, T *Y, void *work)
{
  typedef typename Vec<T>::V V;
  constexpr int              KT = kTileVectors * 64 / (int)sizeof(T);
  PetscInt                   k0 = 0;
  if (g.N == 1) return ForwardStream<T>(g, X, W, Y, work);
  for (; k0 + KT <= g.K; k0 += KT) ForwardTile<T, false>(g, k0, (V *)work, X, W, Y);
  if (k0 < g.K) ForwardTile<T, true>(g, k0, (V *)work, X, W, Y);
}

template <class T>
DD_AI void AdjointLoops(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW, void *work)
{
  typedef typename Vec<T>::V V;
  constexpr int              KT = kTileVectors * 64 / (int)sizeof(T);
  V                         *xs = (V *)work, *gs = xs + 2 * kTileVectors * g.N * g.Ci;
  PetscInt                   k0 = 0;
  if (g.N == 1) return AdjointStream<T>(g, X, W, dY, dX, dW, work);
  for (; k0 + KT <= g.K; k0 += KT) AdjointTile<T, false>(g, k0, xs, gs, X, W, dY, dX, dW);
  if (k0 < g.K) AdjointTile<T, true>(g, k0, xs, gs, X, W, dY, dX, dW);
}

/* the workspace's vectors: the tiles' split rows, or (one sample) the streams' rows over all modes */
template <class T>
size_t WorkVectors(const SpectralMixGeom &g, bool adjoint)
{
  const PetscInt L = 64 / sizeof(T), nv = (g.K + L - 1) / L;
  if (g.N == 1) return (size_t)(2 * nv * (adjoint ? 2 * g.Ci + g.Co : g.Ci + g.Co));
  return (size_t)(2 * kTileVectors * g.N * (adjoint ? g.Ci + g.Co : g.Ci));
}

  /* fused multiply-adds in the AVX2 copy: its CPUs have FMA (checked), and the loops need not match the other copies' bits */
  #define DD_SPECTRAL_COPIES(NAME, LOOPS, PARAMS, ARGS) DDNN_ISA_COPIES(NAME, LOOPS, PARAMS, ARGS, "avx2,fma", HaveAvx2() && __builtin_cpu_supports("fma"))
DD_SPECTRAL_COPIES(ForwardCopy, ForwardLoops<T>, (const SpectralMixGeom &g, const T *X, const T *W, T *Y, void *work), (g, X, W, Y, work))
DD_SPECTRAL_COPIES(AdjointCopy, AdjointLoops<T>, (const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW, void *work), (g, X, W, dY, dX, dW, work))
  #undef DD_SPECTRAL_COPIES
  #undef DD_AI
} // namespace

template <class T>
void SpectralMixFast(const SpectralMixGeom &g, const T *X, const T *W, T *Y)
{
  if (g.N <= 0 || g.Co <= 0 || g.K <= 0) return;
  void *work = Workspace(sizeof(typename Vec<T>::V) * WorkVectors<T>(g, false));
  if (!work) return SpectralMixRef<T>(g, X, W, Y); /* no memory for the split rows: the reference loops need none */
  ForwardCopy<T>(g, X, W, Y, work);
}

template <class T>
void SpectralMixAdjointFast(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW)
{
  if (g.N <= 0 || g.Ci <= 0 || g.K <= 0) return;
  void *work = Workspace(sizeof(typename Vec<T>::V) * WorkVectors<T>(g, true));
  if (!work) return SpectralMixAdjointRef<T>(g, X, W, dY, dX, dW);
  AdjointCopy<T>(g, X, W, dY, dX, dW, work);
}
#else
/* other compilers: the reference loops */
template <class T>
void SpectralMixFast(const SpectralMixGeom &g, const T *X, const T *W, T *Y)
{
  SpectralMixRef<T>(g, X, W, Y);
}
template <class T>
void SpectralMixAdjointFast(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW)
{
  SpectralMixAdjointRef<T>(g, X, W, dY, dX, dW);
}
#endif

template void SpectralMixFast<float>(const SpectralMixGeom &, const float *, const float *, float *);
template void SpectralMixFast<double>(const SpectralMixGeom &, const double *, const double *, double *);
template void SpectralMixAdjointFast<float>(const SpectralMixGeom &, const float *, const float *, const float *, float *, float *);
template void SpectralMixAdjointFast<double>(const SpectralMixGeom &, const double *, const double *, const double *, double *, double *);
} // namespace ddnn
