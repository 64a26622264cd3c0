/*
  Fast max and average pooling loops, float32 and float64: the semantics of the reference loops
  (src/backend/reference/pool_ref.cxx, PyTorch's: only valid taps are read, max pooling keeps the
  first maximum in C order of the taps and lets NaN through with (v > m) || isnan(v), average
  pooling sums the valid taps in C order and divides by PoolGeom's divisor).

  The same comparisons and sums run in the same order per output, so values and argmax are
  bitwise those of the reference; only the loop nest changes:
    plain layouts (channel not innermost): for every output row (n, c, i0, i1) the regular
      outputs along the innermost dimension (the same tap count, first taps at a fixed stride S,
      a uniform storage stride) run as rows of m[i2], am[i2] updated tap by tap (taps outer,
      outputs inner: vectorizable, with S = 1, 2 compiled in); the irregular outputs at the edges
      (padding, ceil mode) take the per-output loop of the reference;
    channels-last and blocked layouts: every output position runs its taps over the contiguous
      channel runs of the box (the whole C, or one channel block).
*/
#include <backend/cpu/fastkernels.hpp>
#include <backend/cpu/pool_rows.hpp>
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

namespace ddnn
{
namespace
{
/* t[i] = t[0] + st i for all i: the stride st, or false */
inline bool Affine(const std::vector<PetscInt> &t, PetscInt *st)
{
  *st = t.size() > 1 ? t[1] - t[0] : 1;
  for (size_t i = 1; i < t.size(); i++)
    if (t[i] - t[i - 1] != *st) return false;
  return true;
}

/* runs [c, c + len) of channels contiguous in both boxes (t[1][c + j] = t[1][c] + j) */
inline void ChannelRuns(const BoxOffsets &a, const BoxOffsets &b, PetscInt C, std::vector<PetscInt> *start, std::vector<PetscInt> *len)
{
  start->clear();
  len->clear();
  for (PetscInt c = 0; c < C;) {
    PetscInt e = c + 1;
    while (e < C && a.t[1][e] == a.t[1][e - 1] + 1 && b.t[1][e] == b.t[1][e - 1] + 1) e++;
    start->push_back(c);
    len->push_back(e - c);
    c = e;
  }
}

/* the reference's per-output cell (edges and fallbacks) */
template <class T>
inline void PoolCell(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *argmax, PetscInt n, PetscInt c, PetscInt i0, PetscInt i1, PetscInt i2)
{
  const PetscInt base = xo.t[0][n] + xo.t[1][c];
  const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], f2 = g.first[2][i2];
  const PetscInt n0 = g.ntaps[0][i0], n1 = g.ntaps[1][i1], n2 = g.ntaps[2][i2];
  const PetscInt yoff = yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2];
  if (g.max) {
    T        m  = -std::numeric_limits<T>::infinity();
    PetscInt am = base + xo.t[2][f0] + xo.t[3][f1] + xo.t[4][f2];
    for (PetscInt a = 0; a < n0; a++) {
      const PetscInt oa = base + xo.t[2][f0 + a * g.d[0]];
      for (PetscInt b = 0; b < n1; b++) {
        const PetscInt ob = oa + xo.t[3][f1 + b * g.d[1]];
        for (PetscInt e = 0; e < n2; e++) {
          const PetscInt off = ob + xo.t[4][f2 + e * g.d[2]];
          const T        v   = x[off];
          if (v > m || v != v) {
            m  = v;
            am = off;
          }
        }
      }
    }
    y[yoff] = m;
    if (argmax) argmax[g.ArgmaxIndex(n, c, i0, i1, i2)] = am;
  } else {
    T sum = 0;
    for (PetscInt a = 0; a < n0; a++) {
      const PetscInt oa = base + xo.t[2][f0 + a];
      for (PetscInt b = 0; b < n1; b++) {
        const PetscInt ob = oa + xo.t[3][f1 + b];
        for (PetscInt e = 0; e < n2; e++) sum += x[ob + xo.t[4][f2 + e]];
      }
    }
    y[yoff] = sum / (T)(g.div[0][i0] * g.div[1][i1] * g.div[2][i2]);
  }
}

/* output positions per chunk along the innermost dimension in the channels-innermost loops (their argmax
   gathered per channel) */
constexpr PetscInt kChunk = 32;

template <class T, int SS>
inline void SumTapRow(const T *xr, PetscInt S, PetscInt len, T *sum)
{
  const PetscInt s = SS > 0 ? SS : S;
  for (PetscInt i = 0; i < len; i++) sum[i] += xr[s * i];
}
} // namespace

template <class T>
void PoolForwardFast(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *argmax)
{
  if (g.N == 0 || g.C == 0 || g.out[0] == 0 || g.out[1] == 0 || g.out[2] == 0) return;
  const PetscInt d0 = g.d[0], d1 = g.d[1];
  if (xo.cinner && yo.cinner) {
    /*
      channels innermost: every output position, its taps over contiguous channel runs. The argmax (in the
      reference's (n, c, i0, i1, i2) order) of a chunk of up to kChunk positions along i2 is gathered per
      channel and written as one run per channel: written straight, C streams O entries apart (O a
      multiple of the page size here) compete for the same cache sets (float64 channels-last max pool
      2.7x PyTorch's, bench/README)
    */
    std::vector<PetscInt> cs, cl;
    ChannelRuns(xo, yo, g.C, &cs, &cl);
    PetscInt maxlen = 0;
    for (PetscInt l : cl) maxlen = std::max(maxlen, l);
    std::vector<T>        m((size_t)maxlen);
    std::vector<PetscInt> am((size_t)maxlen), abuf(argmax ? (size_t)(g.C * kChunk) : 0);
    const PetscInt        O = g.out[0] * g.out[1] * g.out[2];
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2s = 0; i2s < g.out[2]; i2s += kChunk) {
            const PetscInt cnt = std::min(kChunk, g.out[2] - i2s);
            for (PetscInt p = 0; p < cnt; p++) {
              const PetscInt i2 = i2s + p;
              const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], f2 = g.first[2][i2];
              const PetscInt n0 = g.ntaps[0][i0], n1 = g.ntaps[1][i1], n2 = g.ntaps[2][i2];
              const PetscInt xb = xo.t[0][n], yb = yo.t[0][n] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2];
              for (size_t r = 0; r < cs.size(); r++) {
                const PetscInt c0 = cs[r], len = cl[r], xc = xb + xo.t[1][c0];
                T             *yr = y + yb + yo.t[1][c0];
                if (g.max) {
                  const PetscInt a0 = xc + xo.t[2][f0] + xo.t[3][f1] + xo.t[4][f2];
                  for (PetscInt j = 0; j < len; j++) {
                    m[j]  = -std::numeric_limits<T>::infinity();
                    am[j] = a0 + j;
                  }
                  for (PetscInt a = 0; a < n0; a++)
                    for (PetscInt b = 0; b < n1; b++)
                      for (PetscInt e = 0; e < n2; e++) {
                        const PetscInt off = xc + xo.t[2][f0 + a * d0] + xo.t[3][f1 + b * d1] + xo.t[4][f2 + e * g.d[2]];
                        MaxTapRow<T, 1, PetscInt>(x + off, 1, off, len, m.data(), am.data());
                      }
                  for (PetscInt j = 0; j < len; j++) yr[j] = m[j];
                  if (argmax)
                    for (PetscInt j = 0; j < len; j++) abuf[(size_t)((c0 + j) * kChunk + p)] = am[j];
                } else {
                  for (PetscInt j = 0; j < len; j++) m[j] = 0;
                  for (PetscInt a = 0; a < n0; a++)
                    for (PetscInt b = 0; b < n1; b++)
                      for (PetscInt e = 0; e < n2; e++) SumTapRow<T, 1>(x + xc + xo.t[2][f0 + a] + xo.t[3][f1 + b] + xo.t[4][f2 + e], 1, len, m.data());
                  const T dv = (T)(g.div[0][i0] * g.div[1][i1] * g.div[2][i2]);
                  for (PetscInt j = 0; j < len; j++) yr[j] = m[j] / dv;
                }
              }
            }
            if (g.max && argmax) {
              PetscInt *ar = argmax + g.ArgmaxIndex(n, 0, i0, i1, i2s); /* channel c at ar[c O] */
              for (PetscInt c = 0; c < g.C; c++) std::copy_n(abuf.data() + c * kChunk, cnt, ar + c * O);
            }
          }
    return;
  }
  /* channel not innermost: rows along the innermost spatial dimension */
  PetscInt       sx, sy;
  const bool     affx = Affine(xo.t[4], &sx), affy = Affine(yo.t[4], &sy);
  const PetscInt O2 = g.out[2], d2 = g.max ? g.d[2] : 1;
  /* the regular outputs [ia, ib): the most taps, first taps at stride S */
  PetscInt K = 0, ia = 0, ib = 0, S = 1;
  for (PetscInt i = 0; i < O2; i++) K = std::max(K, g.ntaps[2][i]);
  if (affx && affy && K > 0) {
    PetscInt best = 0;
    for (PetscInt i = 0; i < O2;) {
      if (g.ntaps[2][i] != K) {
        i++;
        continue;
      }
      PetscInt e = i + 1, s = e < O2 ? g.first[2][e] - g.first[2][i] : 1;
      while (e < O2 && g.ntaps[2][e] == K && g.first[2][e] - g.first[2][e - 1] == s) e++;
      if (e - i > best) {
        best = e - i;
        ia   = i;
        ib   = e;
        S    = e - i > 1 ? s : 1;
      }
      i = e;
    }
  }
  std::vector<T>        m((size_t)(ib - ia));
  std::vector<PetscInt> am((size_t)(ib - ia));
  const PetscInt        len = ib - ia, Sx = S * sx;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt c = 0; c < g.C; c++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
          for (PetscInt i2 = 0; i2 < ia; i2++) PoolCell(g, x, xo, y, yo, argmax, n, c, i0, i1, i2);
          if (len > 0) {
            const PetscInt base = xo.t[0][n] + xo.t[1][c];
            const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], f2 = g.first[2][ia];
            const PetscInt n0 = g.ntaps[0][i0], n1 = g.ntaps[1][i1];
            T             *yr = y + yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][ia];
            if (g.max) {
              const PetscInt a0 = base + xo.t[2][f0] + xo.t[3][f1] + xo.t[4][f2];
              for (PetscInt j = 0; j < len; j++) {
                m[j]  = -std::numeric_limits<T>::infinity();
                am[j] = a0 + Sx * j;
              }
              for (PetscInt a = 0; a < n0; a++)
                for (PetscInt b = 0; b < n1; b++) {
                  const PetscInt ob = base + xo.t[2][f0 + a * d0] + xo.t[3][f1 + b * d1];
                  for (PetscInt e = 0; e < K; e++) {
                    const PetscInt off = ob + xo.t[4][f2 + e * d2];
                    if (Sx == 2) MaxTapRow<T, 2, PetscInt>(x + off, Sx, off, len, m.data(), am.data());
                    else if (Sx == 1) MaxTapRow<T, 1, PetscInt>(x + off, Sx, off, len, m.data(), am.data());
                    else MaxTapRow<T, 0, PetscInt>(x + off, Sx, off, len, m.data(), am.data());
                  }
                }
              if (sy == 1)
                for (PetscInt j = 0; j < len; j++) yr[j] = m[j];
              else
                for (PetscInt j = 0; j < len; j++) yr[j * sy] = m[j];
              if (argmax) {
                PetscInt *ar = argmax + g.ArgmaxIndex(n, c, i0, i1, ia);
                for (PetscInt j = 0; j < len; j++) ar[j] = am[j];
              }
            } else {
              for (PetscInt j = 0; j < len; j++) m[j] = 0;
              for (PetscInt a = 0; a < n0; a++)
                for (PetscInt b = 0; b < n1; b++) {
                  const PetscInt ob = base + xo.t[2][f0 + a] + xo.t[3][f1 + b];
                  for (PetscInt e = 0; e < K; e++) {
                    const T *xr = x + ob + xo.t[4][f2 + e];
                    if (Sx == 2) SumTapRow<T, 2>(xr, Sx, len, m.data());
                    else if (Sx == 1) SumTapRow<T, 1>(xr, Sx, len, m.data());
                    else SumTapRow<T, 0>(xr, Sx, len, m.data());
                  }
                }
              const PetscInt p01 = g.div[0][i0] * g.div[1][i1]; /* the divisor: an integer product, as the reference */
              for (PetscInt j = 0; j < len; j++) yr[j * sy] = m[j] / (T)(p01 * g.div[2][ia + j]);
            }
          }
          for (PetscInt i2 = ib; i2 < O2; i2++) PoolCell(g, x, xo, y, yo, argmax, n, c, i0, i1, i2);
        }
}

template <class T>
void PoolBackwardFast(const PoolGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const PetscInt *argmax)
{
  if (g.N == 0 || g.C == 0 || g.out[0] == 0 || g.out[1] == 0 || g.out[2] == 0) return;
  const PetscInt O2 = g.out[2];
  if (xo.cinner && yo.cinner) {
    /*
      channels innermost (channels-last, blocked): output positions outer, channels inner, so that dy and
      dx are walked along their storage (per (n, c) in turn they would be walked C times with stride C:
      2.7x PyTorch's channels_last max pool in float64). Each dx entry takes its terms from the outputs of
      its own (n, c) in the same (lexicographic) order as below: the same sums in the same order
    */
    const PetscInt        O = g.out[0] * g.out[1] * O2;
    std::vector<PetscInt> abuf(g.max ? (size_t)(g.C * kChunk) : 0);
    if (g.max) { /* the argmax of a chunk of positions read as one run per channel (as the forward writes it) */
      for (PetscInt n = 0; n < g.N; n++)
        for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
          for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
            for (PetscInt i2s = 0; i2s < O2; i2s += kChunk) {
              const PetscInt  cnt = std::min(kChunk, O2 - i2s);
              const PetscInt *ar  = argmax + g.ArgmaxIndex(n, 0, i0, i1, i2s); /* channel c at ar[c O] */
              for (PetscInt c = 0; c < g.C; c++) std::copy_n(ar + c * O, cnt, abuf.data() + c * kChunk);
              for (PetscInt p = 0; p < cnt; p++) {
                const PetscInt yb = yo.t[0][n] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2s + p];
                for (PetscInt c = 0; c < g.C; c++) dx[abuf[(size_t)(c * kChunk + p)]] += dy[yb + yo.t[1][c]];
              }
            }
      return;
    }
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2 = 0; i2 < O2; i2++) {
            const PetscInt yb = yo.t[0][n] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2];
            const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], f2 = g.first[2][i2];
            const PetscInt n0 = g.ntaps[0][i0], n1 = g.ntaps[1][i1], n2 = g.ntaps[2][i2];
            const T        dv = (T)(g.div[0][i0] * g.div[1][i1] * g.div[2][i2]);
            const PetscInt xb = xo.t[0][n];
            for (PetscInt c = 0; c < g.C; c++) {
              const T w = dy[yb + yo.t[1][c]] / dv;
              T      *dc = dx + xb + xo.t[1][c];
              for (PetscInt a = 0; a < n0; a++)
                for (PetscInt b = 0; b < n1; b++) {
                  T *dr = dc + xo.t[2][f0 + a] + xo.t[3][f1 + b];
                  for (PetscInt e = 0; e < n2; e++) dr[xo.t[4][f2 + e]] += w;
                }
            }
          }
    return;
  }
  PetscInt       sy;
  const bool     affy = Affine(yo.t[4], &sy);
  /* per (n, c) the outputs in the reference's (lexicographic) order: the same sums in the same order */
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt c = 0; c < g.C; c++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
          const PetscInt yb = yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1];
          if (g.max) {
            const PetscInt *ar = argmax + g.ArgmaxIndex(n, c, i0, i1, 0);
            if (affy) {
              const T *dr = dy + yb + yo.t[4][0];
              for (PetscInt i2 = 0; i2 < O2; i2++) dx[ar[i2]] += dr[i2 * sy];
            } else
              for (PetscInt i2 = 0; i2 < O2; i2++) dx[ar[i2]] += dy[yb + yo.t[4][i2]];
            continue;
          }
          const PetscInt base = xo.t[0][n] + xo.t[1][c];
          const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], n0 = g.ntaps[0][i0], n1 = g.ntaps[1][i1];
          const PetscInt p01 = g.div[0][i0] * g.div[1][i1];
          for (PetscInt i2 = 0; i2 < O2; i2++) {
            const T        w  = dy[yb + yo.t[4][i2]] / (T)(p01 * g.div[2][i2]);
            const PetscInt f2 = g.first[2][i2], n2 = g.ntaps[2][i2];
            for (PetscInt a = 0; a < n0; a++)
              for (PetscInt b = 0; b < n1; b++) {
                T *dr = dx + base + xo.t[2][f0 + a] + xo.t[3][f1 + b];
                for (PetscInt e = 0; e < n2; e++) dr[xo.t[4][f2 + e]] += w;
              }
          }
        }
}

#define DD_INSTANTIATE(T) \
  template void PoolForwardFast<T>(const PoolGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &, PetscInt *); \
  template void PoolBackwardFast<T>(const PoolGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &, const PetscInt *);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
