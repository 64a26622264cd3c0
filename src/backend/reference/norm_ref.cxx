/*
  Normalization kernels (batch and group normalization, paper 000 sec. 4.2.2): the local
  passes over one rank's piece. Memory-bound loops: the statistics read the input once, the
  normalization reads it once more and writes the output once.

  The piece is walked as tiles: `lanes` consecutive channels (contiguous in storage) at `npos`
  positions `ps` apart. Which dimensions form the positions depends on the format:
    plain         N x C x [D x H x W]: one channel per tile, the spatial dimensions merged
                  into one contiguous run (ps = 1) when there is no halo;
    channels-last N x [D x H x W] x C: all channels innermost (lanes = C), positions over the
                  spatial dimensions and the batch (ps = C);
    blocked       N x C/bs x [D x H x W] x bs: one channel block (lanes = bs), positions over
                  the spatial dimensions (ps = bs).
  Dimensions merge only when no halo breaks contiguity, and for per-sample statistics the
  batch dimension never merges, so that a tile belongs to one sample.

  Moments are exact: each chunk of a tile (a few thousand entries, so it stays in L1) is summed
  for its mean and then for its squared deviations, and chunks are merged with Chan's formula.
  No sum of squares is ever subtracted from a squared sum.
*/
#include <cmath>
#include <backend/kernels.hpp>
#include <vector>
#include <algorithm>

namespace ddnn
{
/*
  The two reductions (moments, backward sums) are compute-bound in double with SSE2, the
  baseline ISA of the build: they are compiled for AVX/FMA too and chosen at load time by the CPU's features
  (GCC function multiversioning); the loops themselves are plain C++.
*/
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
  #define DD_NORM_CLONES __attribute__((target_clones("fma", "default")))
#else
  #define DD_NORM_CLONES
#endif
#define DD_NORM_INLINE inline __attribute__((always_inline))

namespace
{
constexpr PetscInt kChunk = 2048; /* entries per chunk of the moments' two passes */

struct TilePlan {
  int      mode = 0;   /* 0: one channel per tile; 1: all channels innermost; 2: channel blocks */
  PetscInt npos = 1;   /* positions per tile */
  PetscInt g0   = -1;  /* innermost position dimension (-1: a single position) */
  bool     ingroup[DD_MAX_DIM] = {false};
};

template <int K>
TilePlan PlanTiles(const DDLayout *const Ls[], bool keepN)
{
  const DDLayout &L = *Ls[0];
  const PetscInt  d = L.order;
  TilePlan        P;
  P.mode     = L.bdim == 1 ? 2 : (L.perm[d - 1] == 1 ? 1 : 0);
  PetscInt q = d - 1;
  if (L.perm[q] == 1) q--; /* channel innermost: it makes the lanes (or, blocked N x C, the blocks) */
  if (q < 0) return P;
  PetscInt k = L.perm[q];
  if (k == 1 || (keepN && k == 0)) return P;
  P.g0         = k;
  P.ingroup[k] = true;
  P.npos       = L.n[k];
  for (PetscInt cur = k, nx; --q >= 0; cur = nx) {
    nx = L.perm[q];
    if (nx == 1 || (keepN && nx == 0)) break;
    bool ok = true;
    for (int i = 0; i < K; i++) {
      const DDLayout &M = *Ls[i];
      if (M.alloc[cur] != M.n[cur] || M.stride[nx] != M.stride[cur] * M.alloc[cur]) ok = false;
    }
    if (!ok) break;
    P.ingroup[nx] = true;
    P.npos *= L.n[nx];
  }
  return P;
}

/* f(off[K], ps[K], n, c0, lanes, npos) for every tile of the bulk, in storage order */
template <int K, class F>
void ForEachTile(const DDLayout *const Ls[], bool keepN, F &&f)
{
  const DDLayout &L = *Ls[0];
  if (L.bulksize == 0) return;
  const PetscInt d = L.order;
  const TilePlan P = PlanTiles<K>(Ls, keepN);
  PetscInt       a[DD_MAX_DIM], b[DD_MAX_DIM], ps[K];
  for (PetscInt k = 0; k < d; k++) {
    a[k] = L.lo[k];
    b[k] = (P.ingroup[k] || (k == 1 && P.mode != 0)) ? L.lo[k] + 1 : L.lo[k] + L.n[k];
  }
  for (int i = 0; i < K; i++) ps[i] = P.g0 >= 0 ? Ls[i]->stride[P.g0] : 0;
  ForEachIndex(d, a, b, L.perm, [&](const PetscInt *j) {
    PetscInt       off[K], jj[DD_MAX_DIM];
    const PetscInt n       = j[0] - L.lo[0];
    auto           offsets = [&](PetscInt c) {
      for (int i = 0; i < K; i++) {
        const DDLayout &M = *Ls[i];
        for (PetscInt k = 0; k < d; k++) jj[k] = j[k] - L.lo[k] + M.lo[k];
        jj[1]  = M.lo[1] + c;
        off[i] = LayoutOffset(M, jj);
      }
    };
    if (P.mode == 0) {
      const PetscInt c = j[1] - L.lo[1];
      offsets(c);
      f((const PetscInt *)off, (const PetscInt *)ps, n, c, (PetscInt)1, P.npos);
    } else if (P.mode == 1) {
      offsets(0);
      f((const PetscInt *)off, (const PetscInt *)ps, n, (PetscInt)0, L.n[1], P.npos);
    } else {
      for (PetscInt c = 0; c < L.n[1];) {
        const PetscInt jc = L.lo[1] + c, e = PetscMin(L.n[1], c + L.bs - jc % L.bs);
        offsets(c);
        f((const PetscInt *)off, (const PetscInt *)ps, n, c, e - c, P.npos);
        c = e;
      }
    }
  });
}

/* ---- moments ---- */

template <class T>
DD_NORM_INLINE double Sum8(const T *x, PetscInt m)
{
  double   a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  PetscInt i    = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; j++) a[j] += (double)x[i + j];
  double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < m; i++) s += (double)x[i];
  return s;
}

template <class T>
DD_NORM_INLINE double SumSqDev8(const T *x, PetscInt m, double u)
{
  double   a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  PetscInt i    = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; j++) {
      const double e = (double)x[i + j] - u;
      a[j] += e * e;
    }
  double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < m; i++) {
    const double e = (double)x[i] - u;
    s += e * e;
  }
  return s;
}

/* chunk of m positions, B lanes, positions B apart (a full channel block) */
template <class T, int B>
DD_NORM_INLINE void BlockMoments(const T *x, PetscInt m, double *mu, double *q)
{
  double s[B], r[B];
  for (int l = 0; l < B; l++) s[l] = r[l] = 0;
  for (PetscInt p = 0; p < m; p++)
    for (int l = 0; l < B; l++) s[l] += (double)x[p * B + l];
  for (int l = 0; l < B; l++) s[l] /= (double)m;
  for (PetscInt p = 0; p < m; p++)
    for (int l = 0; l < B; l++) {
      const double e = (double)x[p * B + l] - s[l];
      r[l] += e * e;
    }
  for (int l = 0; l < B; l++) {
    mu[l] = s[l];
    q[l]  = r[l];
  }
}

/* the chunk's mean and squared deviations per lane */
template <class T>
DD_NORM_INLINE void ChunkMoments(const T *x, PetscInt ps, PetscInt m, PetscInt lanes, double *mu, double *q)
{
  if (lanes == 1 && ps == 1) {
    mu[0] = Sum8(x, m) / (double)m;
    q[0]  = SumSqDev8(x, m, mu[0]);
    return;
  }
  if (lanes == 16 && ps == 16) return BlockMoments<T, 16>(x, m, mu, q);
  if (lanes == 8 && ps == 8) return BlockMoments<T, 8>(x, m, mu, q);
  for (PetscInt l = 0; l < lanes; l++) mu[l] = q[l] = 0;
  for (PetscInt p = 0; p < m; p++) {
    const T *r = x + p * ps;
    for (PetscInt l = 0; l < lanes; l++) mu[l] += (double)r[l];
  }
  for (PetscInt l = 0; l < lanes; l++) mu[l] /= (double)m;
  for (PetscInt p = 0; p < m; p++) {
    const T *r = x + p * ps;
    for (PetscInt l = 0; l < lanes; l++) {
      const double e = (double)r[l] - mu[l];
      q[l] += e * e;
    }
  }
}

/* Chan, Golub, LeVeque: merge (nb, mb, qb) into (n, m, q) */
inline void ChanMerge(double &n, double &m, double &q, double nb, double mb, double qb)
{
  if (nb <= 0) return;
  const double nt = n + nb, dlt = mb - m, f = nb / nt;
  if (!std::isfinite(dlt)) { /* an inf (or nan) mean: the plain weighted mean keeps -inf + finite = -inf as PyTorch's sum does (m + inf f was nan); the variance is nan */
    m = (n * m + nb * mb) / nt;
    q = NAN;
    n = nt;
    return;
  }
  m += dlt * f;
  q += qb + dlt * dlt * n * f;
  n = nt;
}

/* ---- backward sums ---- */

template <class T, int B>
DD_NORM_INLINE void BlockBackwardSums(const T *x, const T *dy, PetscInt m, const double *mu, double *s1, double *s2)
{
  double a[B], c[B], u[B];
  for (int l = 0; l < B; l++) {
    a[l] = c[l] = 0;
    u[l]        = mu[l];
  }
  for (PetscInt p = 0; p < m; p++)
    for (int l = 0; l < B; l++) {
      const double g = (double)dy[p * B + l];
      a[l] += g;
      c[l] += g * ((double)x[p * B + l] - u[l]);
    }
  for (int l = 0; l < B; l++) {
    s1[l] += a[l];
    s2[l] += c[l];
  }
}

/* one tile of the backward sums: s1 += sum dy, s2 += sum dy (x - u) per lane */
template <class T>
DD_NORM_INLINE void TileBackwardSumsT(const T *xp, PetscInt px, const T *gp, PetscInt pg, PetscInt lanes, PetscInt npos, const double *u, double *s1, double *s2)
{
  if (lanes == 1 && px == 1 && pg == 1) {
    double   a[4] = {0, 0, 0, 0}, c[4] = {0, 0, 0, 0};
    PetscInt i    = 0;
    for (; i + 4 <= npos; i += 4)
      for (int j = 0; j < 4; j++) {
        const double g = (double)gp[i + j];
        a[j] += g;
        c[j] += g * ((double)xp[i + j] - u[0]);
      }
    for (; i < npos; i++) {
      const double g = (double)gp[i];
      a[0] += g;
      c[0] += g * ((double)xp[i] - u[0]);
    }
    s1[0] += (a[0] + a[1]) + (a[2] + a[3]);
    s2[0] += (c[0] + c[1]) + (c[2] + c[3]);
    return;
  }
  if (lanes == 16 && px == 16 && pg == 16) return BlockBackwardSums<T, 16>(xp, gp, npos, u, s1, s2);
  if (lanes == 8 && px == 8 && pg == 8) return BlockBackwardSums<T, 8>(xp, gp, npos, u, s1, s2);
  for (PetscInt p = 0; p < npos; p++) {
    const T *xr = xp + p * px, *gr = gp + p * pg;
    for (PetscInt l = 0; l < lanes; l++) {
      const double g = (double)gr[l];
      s1[l] += g;
      s2[l] += g * ((double)xr[l] - u[l]);
    }
  }
}

/* the multiversioned entry points */
DD_NORM_CLONES void ChunkMomentsF(const float *x, PetscInt ps, PetscInt m, PetscInt lanes, double *mu, double *q)
{
  ChunkMoments(x, ps, m, lanes, mu, q);
}
DD_NORM_CLONES void ChunkMomentsD(const double *x, PetscInt ps, PetscInt m, PetscInt lanes, double *mu, double *q)
{
  ChunkMoments(x, ps, m, lanes, mu, q);
}
inline void ChunkMomentsDispatch(const float *x, PetscInt ps, PetscInt m, PetscInt lanes, double *mu, double *q) { ChunkMomentsF(x, ps, m, lanes, mu, q); }
inline void ChunkMomentsDispatch(const double *x, PetscInt ps, PetscInt m, PetscInt lanes, double *mu, double *q) { ChunkMomentsD(x, ps, m, lanes, mu, q); }
DD_NORM_CLONES void TileBackwardSumsF(const float *xp, PetscInt px, const float *gp, PetscInt pg, PetscInt lanes, PetscInt npos, const double *u, double *s1, double *s2)
{
  TileBackwardSumsT(xp, px, gp, pg, lanes, npos, u, s1, s2);
}
DD_NORM_CLONES void TileBackwardSumsD(const double *xp, PetscInt px, const double *gp, PetscInt pg, PetscInt lanes, PetscInt npos, const double *u, double *s1, double *s2)
{
  TileBackwardSumsT(xp, px, gp, pg, lanes, npos, u, s1, s2);
}
inline void TileBackwardSums(const float *xp, PetscInt px, const float *gp, PetscInt pg, PetscInt lanes, PetscInt npos, const double *u, double *s1, double *s2) { TileBackwardSumsF(xp, px, gp, pg, lanes, npos, u, s1, s2); }
inline void TileBackwardSums(const double *xp, PetscInt px, const double *gp, PetscInt pg, PetscInt lanes, PetscInt npos, const double *u, double *s1, double *s2) { TileBackwardSumsD(xp, px, gp, pg, lanes, npos, u, s1, s2); }
} // namespace

bool NormLayoutSupported(const DDLayout &L)
{
  return L.order >= 2 && (L.bdim < 0 || L.bdim == 1);
}

bool NormLayoutsMatch(const DDLayout &A, const DDLayout &B)
{
  if (A.order != B.order || A.bdim != B.bdim) return false;
  for (PetscInt k = 0; k < A.order; k++)
    if (A.n[k] != B.n[k] || A.perm[k] != B.perm[k]) return false;
  if (A.bdim >= 0 && (A.bs != B.bs || A.lo[A.bdim] % A.bs != B.lo[B.bdim] % B.bs)) return false;
  return true;
}

template <class T>
void NormMoments(const DDLayout &L, const T *x, bool persample, double *cnt, double *mean, double *m2)
{
  const PetscInt      Cl = L.n[1], nm = (persample ? L.n[0] : 1) * Cl;
  std::vector<double> mu, q;
  const DDLayout     *Ls[1] = {&L};
  std::fill(cnt, cnt + nm, 0.0);
  std::fill(mean, mean + nm, 0.0);
  std::fill(m2, m2 + nm, 0.0);
  ForEachTile<1>(Ls, persample, [&](const PetscInt *off, const PetscInt *ps, PetscInt n, PetscInt c0, PetscInt lanes, PetscInt npos) {
    const PetscInt base = (persample ? n * Cl : 0) + c0, cp = PetscMax(1, kChunk / lanes);
    if ((PetscInt)mu.size() < lanes) {
      mu.resize(lanes);
      q.resize(lanes);
    }
    for (PetscInt p0 = 0; p0 < npos; p0 += cp) {
      const PetscInt m = PetscMin(cp, npos - p0);
      ChunkMomentsDispatch(x + off[0] + p0 * ps[0], ps[0], m, lanes, mu.data(), q.data());
      for (PetscInt l = 0; l < lanes; l++) ChanMerge(cnt[base + l], mean[base + l], m2[base + l], (double)m, mu[l], q[l]);
    }
  });
}

template <class T>
void NormScaleShift(const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, bool persample, const double *mu, const double *a, const double *b)
{
  const PetscInt  Cl    = Lx.n[1];
  const DDLayout *Ls[2] = {&Lx, &Ly};
  std::vector<T>  U, A, B;
  ForEachTile<2>(Ls, persample, [&](const PetscInt *off, const PetscInt *ps, PetscInt n, PetscInt c0, PetscInt lanes, PetscInt npos) {
    const PetscInt base = (persample ? n * Cl : 0) + c0;
    const T       *xp   = x + off[0];
    T             *yp   = y + off[1];
    if (lanes == 1) {
      const T u = (T)mu[base], s = (T)a[base], t = (T)b[base];
      if (ps[0] == 1 && ps[1] == 1)
        for (PetscInt i = 0; i < npos; i++) yp[i] = s * (xp[i] - u) + t;
      else
        for (PetscInt i = 0; i < npos; i++) yp[i * ps[1]] = s * (xp[i * ps[0]] - u) + t;
      return;
    }
    if ((PetscInt)A.size() < lanes) {
      U.resize(lanes);
      A.resize(lanes);
      B.resize(lanes);
    }
    for (PetscInt l = 0; l < lanes; l++) {
      U[l] = (T)mu[base + l];
      A[l] = (T)a[base + l];
      B[l] = (T)b[base + l];
    }
    if (lanes == 16 && ps[0] == 16 && ps[1] == 16) {
      T u[16], s[16], t[16];
      for (int l = 0; l < 16; l++) {
        u[l] = U[l];
        s[l] = A[l];
        t[l] = B[l];
      }
      for (PetscInt p = 0; p < npos; p++)
        for (int l = 0; l < 16; l++) yp[p * 16 + l] = s[l] * (xp[p * 16 + l] - u[l]) + t[l];
      return;
    }
    const T *u = U.data(), *s = A.data(), *t = B.data();
    for (PetscInt p = 0; p < npos; p++) {
      const T *xr = xp + p * ps[0];
      T       *yr = yp + p * ps[1];
      for (PetscInt l = 0; l < lanes; l++) yr[l] = s[l] * (xr[l] - u[l]) + t[l];
    }
  });
}

template <class T>
void NormBackwardSums(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, bool persample, const double *mu, double *sdy, double *sdyx)
{
  const PetscInt  Cl = Lx.n[1], nm = (persample ? Lx.n[0] : 1) * Cl;
  const DDLayout *Ls[2] = {&Lx, &Ld};
  std::fill(sdy, sdy + nm, 0.0);
  std::fill(sdyx, sdyx + nm, 0.0);
  ForEachTile<2>(Ls, persample, [&](const PetscInt *off, const PetscInt *ps, PetscInt n, PetscInt c0, PetscInt lanes, PetscInt npos) {
    const PetscInt base = (persample ? n * Cl : 0) + c0;
    TileBackwardSums(x + off[0], ps[0], dy + off[1], ps[1], lanes, npos, mu + base, sdy + base, sdyx + base);
  });
}

template <class T>
void NormBackwardApply(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, const DDLayout &Lo, T *dx, bool persample, const double *mu, const double *a, const double *b, const double *c)
{
  const PetscInt  Cl    = Lx.n[1];
  const DDLayout *Ls[3] = {&Lx, &Ld, &Lo};
  std::vector<T>  U, A, B, C;
  ForEachTile<3>(Ls, persample, [&](const PetscInt *off, const PetscInt *ps, PetscInt n, PetscInt c0, PetscInt lanes, PetscInt npos) {
    const PetscInt base = (persample ? n * Cl : 0) + c0;
    const T       *xp = x + off[0], *gp = dy + off[1];
    T             *op = dx + off[2];
    if (lanes == 1) {
      const T u = (T)mu[base], p = (T)a[base], q = (T)b[base], r = (T)c[base];
      if (ps[0] == 1 && ps[1] == 1 && ps[2] == 1)
        for (PetscInt i = 0; i < npos; i++) op[i] = p * gp[i] + q * (xp[i] - u) + r;
      else
        for (PetscInt i = 0; i < npos; i++) op[i * ps[2]] = p * gp[i * ps[1]] + q * (xp[i * ps[0]] - u) + r;
      return;
    }
    if ((PetscInt)A.size() < lanes) {
      U.resize(lanes);
      A.resize(lanes);
      B.resize(lanes);
      C.resize(lanes);
    }
    for (PetscInt l = 0; l < lanes; l++) {
      U[l] = (T)mu[base + l];
      A[l] = (T)a[base + l];
      B[l] = (T)b[base + l];
      C[l] = (T)c[base + l];
    }
    if (lanes == 16 && ps[0] == 16 && ps[1] == 16 && ps[2] == 16) {
      T u[16], p[16], q[16], r[16];
      for (int l = 0; l < 16; l++) {
        u[l] = U[l];
        p[l] = A[l];
        q[l] = B[l];
        r[l] = C[l];
      }
      for (PetscInt i = 0; i < npos; i++)
        for (int l = 0; l < 16; l++) op[i * 16 + l] = p[l] * gp[i * 16 + l] + q[l] * (xp[i * 16 + l] - u[l]) + r[l];
      return;
    }
    const T *u = U.data(), *p = A.data(), *q = B.data(), *r = C.data();
    for (PetscInt i = 0; i < npos; i++) {
      const T *xr = xp + i * ps[0], *gr = gp + i * ps[1];
      T       *orow = op + i * ps[2];
      for (PetscInt l = 0; l < lanes; l++) orow[l] = p[l] * gr[l] + q[l] * (xr[l] - u[l]) + r[l];
    }
  });
}

#define DD_NORM_INSTANTIATE(T) \
  template void NormMoments<T>(const DDLayout &, const T *, bool, double *, double *, double *); \
  template void NormScaleShift<T>(const DDLayout &, const T *, const DDLayout &, T *, bool, const double *, const double *, const double *); \
  template void NormBackwardSums<T>(const DDLayout &, const T *, const DDLayout &, const T *, bool, const double *, double *, double *); \
  template void NormBackwardApply<T>(const DDLayout &, const T *, const DDLayout &, const T *, const DDLayout &, T *, bool, const double *, const double *, const double *, const double *);
DD_NORM_INSTANTIATE(float)
DD_NORM_INSTANTIATE(double)
} // namespace ddnn
