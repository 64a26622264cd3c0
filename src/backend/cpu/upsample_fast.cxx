/*
  Fast nearest and (bi/tri)linear interpolation loops and their adjoints, float32 and float64,
  with the semantics of the reference loops (src/backend/reference/upsample_ref.cxx: PyTorch's
  sources and weights from UpsampleGeom, the sum nested outermost spatial dimension first,
  y = h0 (w0 x00 + w1 x01) + h1 (...)).

  Forward, separable: plain layouts (channel not innermost) interpolate source rows along the
  innermost dimension into row buffers (cached: with an integer scale consecutive output rows
  share their source rows), then combine the 1, 2 or 4 buffers with the outer weights in a
  vectorizable loop; nearest copies source rows, and an output row whose source row is that of
  the previous output row is a copy of it. Channels-last and blocked layouts: bilinear 2-D runs
  the same rows over whole channel runs (UpsampleRowsForward2D: a row is O2 x L contiguous
  entries), the rest every output position over contiguous channel runs. Every output is the
  reference's expression in the reference's order: bitwise equal.

  Backward (dx +=, as the reference): nearest scatters dy in the reference's order (bitwise
  equal); linear first applies the adjoint of the innermost interpolation to a dy row (a scatter
  into a buffer the length of the window's row, times the channel run on channels-innermost
  layouts), then adds the buffer times the outer weights to the 1, 2 or 4 source rows (vectorized
  axpys): equal to the reference up to rounding; bilinear 2-D on channels-innermost layouts goes
  vertical first (UpsampleRowsBackward2D).
*/
#include <backend/cpu/fastkernels.hpp>
#include <algorithm>
#include <cstring>
#include <vector>

namespace ddnn
{
namespace
{
inline bool Affine(const std::vector<PetscInt> &t, PetscInt *st)
{
  *st = t.size() > 1 ? t[1] - t[0] : 1;
  for (size_t i = 1; i < t.size(); i++)
    if (t[i] - t[i - 1] != *st) return false;
  return true;
}

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

/* the weights in the tensor's precision and the storage offsets of the sources, per dimension */
template <class T>
struct Tables {
  std::vector<T>        w0[3], w1[3];
  std::vector<PetscInt> o0[3], o1[3];
  Tables(const UpsampleGeom &g, const BoxOffsets &xo)
  {
    for (int j = 0; j < 3; j++) {
      const PetscInt m = g.out[j];
      w0[j].resize(m);
      w1[j].resize(m);
      o0[j].resize(m);
      o1[j].resize(m);
      for (PetscInt i = 0; i < m; i++) {
        w0[j][i] = (T)g.w0[j][i];
        w1[j][i] = (T)g.w1[j][i];
        o0[j][i] = xo.t[2 + j][g.i0[j][i]];
        o1[j][i] = xo.t[2 + j][g.i1[j][i]];
      }
    }
  }
};

/*
  Marks done[r] for the channel runs r (of lengths cl) whose positions along the innermost dimension
  are consecutive in both x's window (W positions) and y's box (O2), i.e. whose rows are W x L and
  O2 x L contiguous entries; returns the longest such run (0: none).
*/
inline PetscInt ConsecutiveRuns(const BoxOffsets &xo, const BoxOffsets &yo, PetscInt O2, const std::vector<PetscInt> &cl, std::vector<bool> &done)
{
  const PetscInt W    = (PetscInt)xo.t[4].size();
  PetscInt       Lmax = 0;
  for (size_t r = 0; r < cl.size(); r++) {
    const PetscInt L  = cl[r];
    bool           ok = true;
    for (PetscInt k = 1; k < W && ok; k++) ok = xo.t[4][k] - xo.t[4][k - 1] == L;
    for (PetscInt k = 1; k < O2 && ok; k++) ok = yo.t[4][k] - yo.t[4][k - 1] == L;
    done[r] = ok;
    if (ok) Lmax = std::max(Lmax, L);
  }
  return Lmax;
}

/*
  K row buffers of len entries, the least recently used refilled: Get(key, fill) returns the row
  cached for key, or calls fill(h) on the oldest buffer h and caches it for key.
*/
template <class T, int K>
struct RowSlots {
  PetscInt       key[K], stamp[K], now = 0, len;
  std::vector<T> buf;
  RowSlots(PetscInt len_) : len(len_), buf((size_t)(K * std::max<PetscInt>(len_, 1))) { Clear(); }
  void Clear()
  {
    for (int k = 0; k < K; k++) key[k] = -1, stamp[k] = -1;
  }
  template <class Fill>
  const T *Get(PetscInt r, Fill &&fill)
  {
    now++;
    int old = 0;
    for (int k = 0; k < K; k++) {
      if (key[k] == r) {
        stamp[k] = now;
        return buf.data() + k * len;
      }
      if (stamp[k] < stamp[old]) old = k;
    }
    T *h = buf.data() + old * len;
    fill(h);
    key[old]   = r;
    stamp[old] = now;
    return h;
  }
};

/*
  Rows of the innermost interpolation, h[j] = x[r + o0[j]] w0[j] + x[r + o1[j]] w1[j] (nearest:
  x[r + o0[j]]), cached by the storage offset r of the source row.
*/
template <class T>
struct RowCache {
  RowSlots<T, 6> slots;
  RowCache(PetscInt len_) : slots(len_) { }
  const T *Get(const T *x, PetscInt r, const Tables<T> &tb, bool linear)
  {
    return slots.Get(r, [&](T *h) {
      const PetscInt  len = slots.len;
      const T        *xr  = x + r;
      const PetscInt *o0 = tb.o0[2].data(), *o1 = tb.o1[2].data();
      const T        *w0 = tb.w0[2].data(), *w1 = tb.w1[2].data();
      if (linear)
        for (PetscInt j = 0; j < len; j++) h[j] = xr[o0[j]] * w0[j] + xr[o1[j]] * w1[j];
      else
        for (PetscInt j = 0; j < len; j++) h[j] = xr[o0[j]];
    });
  }
};
} // namespace

/*
  Bilinear, channels innermost (blocked or channels-last), where every channel run's positions along
  the innermost dimension are consecutive in both x's window and y's box (a row of W x L and O2 x L
  entries: whole channel blocks, or all channels): separable as the plain layouts' path. Each source
  row's innermost interpolation h = x[e0] a0 + x[e1] a1 (per output position, times the run) is
  computed once and cached (with scale 2 each serves about four output rows), and an output row
  is h0 b0 + h1 b1 in one loop over O2 x L entries, instead of the per-position loop over runs of
  L (16) entries. The reference's expression in its order: bitwise equal. done[r]: run r was
  consecutive and is done here (a partial last channel block is not: the per-position loop does it).
*/
template <class T>
void UpsampleRowsForward2D(const UpsampleGeom &g, const Tables<T> &tb, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, const std::vector<PetscInt> &cs, const std::vector<PetscInt> &cl, std::vector<bool> &done)
{
  const PetscInt O2 = g.out[2], Lmax = ConsecutiveRuns(xo, yo, O2, cl, done);
  if (Lmax == 0) return;
  RowSlots<T, 4> slots(O2 * Lmax);
  const T       *w0 = tb.w0[2].data(), *w1 = tb.w1[2].data();
  const PetscInt *e0 = tb.o0[2].data(), *e1 = tb.o1[2].data();
  for (PetscInt n = 0; n < g.N; n++)
    for (size_t r = 0; r < cs.size(); r++) {
      if (!done[r]) continue;
      const PetscInt L = cl[r], xb = xo.t[0][n] + xo.t[1][cs[r]], yb = yo.t[0][n] + yo.t[1][cs[r]] + yo.t[4][0];
      slots.Clear();
      auto row = [&](PetscInt off) -> const T * { /* h of the source row at storage offset off */
        return slots.Get(off, [&](T *h) {
          const T *p = x + off;
          for (PetscInt i2 = 0; i2 < O2; i2++) {
            const T  a0 = w0[i2], a1 = w1[i2];
            const T *p0 = p + e0[i2], *p1 = p + e1[i2];
            T       *hh = h + i2 * L;
            for (PetscInt j = 0; j < L; j++) hh[j] = p0[j] * a0 + p1[j] * a1;
          }
        });
      };
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
          const T *h0 = row(xb + tb.o0[1][i1]), *h1 = row(xb + tb.o1[1][i1]);
          const T  b0 = tb.w0[1][i1], b1 = tb.w1[1][i1];
          T       *yr = y + yb + yo.t[2][i0] + yo.t[3][i1];
          for (PetscInt k = 0; k < O2 * L; k++) yr[k] = h0[k] * b0 + h1[k] * b1;
        }
    }
}

template <class T>
void UpsampleForwardFast(const UpsampleGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo)
{
  if (g.N == 0 || g.C == 0 || g.out[0] == 0 || g.out[1] == 0 || g.out[2] == 0) return;
  const Tables<T> tb(g, xo);
  const PetscInt  O2 = g.out[2];
  if (xo.cinner && yo.cinner) {
    std::vector<PetscInt> cs, cl;
    ChannelRuns(xo, yo, g.C, &cs, &cl);
    std::vector<bool> done(cs.size(), false);
    if (g.linear && g.D == 2) UpsampleRowsForward2D(g, tb, x, xo, y, yo, cs, cl, done);
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) return;
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2 = 0; i2 < O2; i2++)
            for (size_t r = 0; r < cs.size(); r++) {
              if (done[r]) continue;
              const PetscInt len = cl[r], xb = xo.t[0][n] + xo.t[1][cs[r]];
              T             *yr  = y + yo.t[0][n] + yo.t[1][cs[r]] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2];
              const T        a0 = tb.w0[2][i2], a1 = tb.w1[2][i2];
              if (!g.linear) {
                const T *p = x + xb + tb.o0[0][i0] + tb.o0[1][i1] + tb.o0[2][i2];
                for (PetscInt j = 0; j < len; j++) yr[j] = p[j];
              } else if (g.D == 1) {
                const T *p0 = x + xb + tb.o0[2][i2], *p1 = x + xb + tb.o1[2][i2];
                for (PetscInt j = 0; j < len; j++) yr[j] = p0[j] * a0 + p1[j] * a1;
              } else {
                const T        b0 = tb.w0[1][i1], b1 = tb.w1[1][i1];
                const PetscInt q0 = tb.o0[1][i1], q1 = tb.o1[1][i1], e0 = tb.o0[2][i2], e1 = tb.o1[2][i2];
                if (g.D == 2) {
                  const T *p00 = x + xb + q0 + e0, *p01 = x + xb + q0 + e1, *p10 = x + xb + q1 + e0, *p11 = x + xb + q1 + e1;
                  for (PetscInt j = 0; j < len; j++) yr[j] = (p00[j] * a0 + p01[j] * a1) * b0 + (p10[j] * a0 + p11[j] * a1) * b1;
                } else {
                  const T  c0 = tb.w0[0][i0], c1 = tb.w1[0][i0];
                  const T *u  = x + xb + tb.o0[0][i0], *v = x + xb + tb.o1[0][i0];
                  const T *u00 = u + q0 + e0, *u01 = u + q0 + e1, *u10 = u + q1 + e0, *u11 = u + q1 + e1;
                  const T *v00 = v + q0 + e0, *v01 = v + q0 + e1, *v10 = v + q1 + e0, *v11 = v + q1 + e1;
                  for (PetscInt j = 0; j < len; j++) yr[j] = ((u00[j] * a0 + u01[j] * a1) * b0 + (u10[j] * a0 + u11[j] * a1) * b1) * c0 + ((v00[j] * a0 + v01[j] * a1) * b0 + (v10[j] * a0 + v11[j] * a1) * b1) * c1;
                }
              }
            }
    return;
  }
  /* rows along the innermost dimension */
  PetscInt    sy;
  const bool  unit = Affine(yo.t[4], &sy) && sy == 1;
  RowCache<T> rc(O2);
  auto        store = [&](T *yr, const T *h) {
    if (unit) std::memcpy(yr, h, sizeof(T) * (size_t)O2);
    else
      for (PetscInt j = 0; j < O2; j++) yr[yo.t[4][j] - yo.t[4][0]] = h[j];
  };
  std::vector<T> comb((size_t)O2);
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt c = 0; c < g.C; c++) {
      const PetscInt xb = xo.t[0][n] + xo.t[1][c], yb = yo.t[0][n] + yo.t[1][c] + yo.t[4][0];
      PetscInt       prev[4] = {-1, -1, -1, -1};
      T              prevw[4] = {0, 0, 0, 0};
      T             *prevy   = NULL;
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
          T *yr = y + yb + yo.t[2][i0] + yo.t[3][i1];
          /* the source rows of this output row (linear: 1, 2 or 4; nearest: 1) */
          PetscInt src[4] = {-1, -1, -1, -1};
          if (!g.linear || g.D == 1) src[0] = xb + tb.o0[0][i0] + tb.o0[1][i1];
          else if (g.D == 2) {
            src[0] = xb + tb.o0[1][i1];
            src[1] = xb + tb.o1[1][i1];
          } else {
            src[0] = xb + tb.o0[0][i0] + tb.o0[1][i1];
            src[1] = xb + tb.o0[0][i0] + tb.o1[1][i1];
            src[2] = xb + tb.o1[0][i0] + tb.o0[1][i1];
            src[3] = xb + tb.o1[0][i0] + tb.o1[1][i1];
          }
          /* the outer weights: with the same source rows and weights the row equals the previous one */
          const T wts[4] = {g.linear && g.D >= 2 ? tb.w0[1][i1] : (T)1, g.linear && g.D >= 2 ? tb.w1[1][i1] : (T)0, g.linear && g.D >= 3 ? tb.w0[0][i0] : (T)1, g.linear && g.D >= 3 ? tb.w1[0][i0] : (T)0};
          const bool same = prevy && std::equal(src, src + 4, prev) && std::equal(wts, wts + 4, prevw);
          if (same && unit) {
            std::memcpy(yr, prevy, sizeof(T) * (size_t)O2); /* nearest (or equal weights): the previous output row */
          } else if (!g.linear || g.D == 1) store(yr, rc.Get(x, src[0], tb, g.linear));
          else if (g.D == 2) {
            const T *h0 = rc.Get(x, src[0], tb, true), *h1 = rc.Get(x, src[1], tb, true);
            const T  b0 = tb.w0[1][i1], b1 = tb.w1[1][i1];
            if (unit)
              for (PetscInt j = 0; j < O2; j++) yr[j] = h0[j] * b0 + h1[j] * b1;
            else {
              for (PetscInt j = 0; j < O2; j++) comb[j] = h0[j] * b0 + h1[j] * b1;
              store(yr, comb.data());
            }
          } else {
            const T *h00 = rc.Get(x, src[0], tb, true), *h01 = rc.Get(x, src[1], tb, true), *h10 = rc.Get(x, src[2], tb, true), *h11 = rc.Get(x, src[3], tb, true);
            const T  b0 = tb.w0[1][i1], b1 = tb.w1[1][i1], c0 = tb.w0[0][i0], c1 = tb.w1[0][i0];
            for (PetscInt j = 0; j < O2; j++) comb[j] = (h00[j] * b0 + h01[j] * b1) * c0 + (h10[j] * b0 + h11[j] * b1) * c1;
            store(yr, comb.data());
          }
          std::copy(src, src + 4, prev);
          std::copy(wts, wts + 4, prevw);
          prevy = yr;
        }
    }
}

/*
  The adjoint of UpsampleRowsForward2D (bilinear, channels innermost, runs consecutive along the
  innermost dimension in both x's window and y's box): vertical first, at the output's width: every
  dy row (O2 x L entries, contiguous) is added times b0 and b1 to the rows G[s] of its two source
  rows s (long vectorized axpys), then each window row gets the horizontal adjoint of its G[s] once
  (per output position two axpys of the run), instead of once per output row. Equal to the reference
  up to rounding. done[r]: run r is done here. A source row's G is complete once the output rows have
  passed it (their source rows do not decrease), so only the rows in between are kept, each in a slot of
  O2 x L entries, and a row's horizontal adjoint runs as soon as it is complete: where G held every source
  row (16 MiB for 1 x 16 x 256 x 256 float64, allocated and zeroed on every call) the float64
  channels-last backward took twice the forward (bench/README). The same sums in the same order.
*/
template <class T>
void UpsampleRowsBackward2D(const UpsampleGeom &g, const Tables<T> &tb, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const std::vector<PetscInt> &cs, const std::vector<PetscInt> &cl, std::vector<bool> &done)
{
  bool monotone = true; /* linear interpolation's source rows: i0 nondecreasing, i1 >= i0 (else the caller's per-row loop) */
  for (PetscInt i1 = 0; i1 < g.out[1] && monotone; i1++) monotone = g.i1[1][i1] >= g.i0[1][i1] && (i1 == 0 || g.i0[1][i1] >= g.i0[1][i1 - 1]);
  if (!monotone) {
    done.assign(cl.size(), false);
    return;
  }
  const PetscInt O2 = g.out[2], H = (PetscInt)xo.t[3].size(), Lmax = ConsecutiveRuns(xo, yo, O2, cl, done);
  if (Lmax == 0) return;
  std::vector<T>        G; /* slot k: entries [k O2 Lmax, (k + 1) O2 Lmax) */
  std::vector<PetscInt> slot((size_t)H, -1), live, freeslots;
  const T              *w0 = tb.w0[2].data(), *w1 = tb.w1[2].data();
  const PetscInt       *e0 = tb.o0[2].data(), *e1 = tb.o1[2].data();
  for (PetscInt n = 0; n < g.N; n++)
    for (size_t r = 0; r < cs.size(); r++) {
      if (!done[r]) continue;
      const PetscInt L = cl[r], R = O2 * L, xb = xo.t[0][n] + xo.t[1][cs[r]], yb = yo.t[0][n] + yo.t[1][cs[r]] + yo.t[4][0];
      auto rowG = [&](PetscInt s) { return G.data() + slot[s] * O2 * Lmax; }; /* source row s's G */
      /* the horizontal adjoint of source row s's G into its window row (window rows are disjoint: the
         rows' order does not matter), and its slot freed */
      auto flush = [&](PetscInt s) {
        const T *Gs = rowG(s);
        T       *xr = dx + xb + xo.t[3][s]; /* D = 2: dimension 0 is a unit one */
        for (PetscInt i2 = 0; i2 < O2; i2++) {
          const T  a0 = w0[i2], a1 = w1[i2], *q = Gs + i2 * L;
          T       *p0 = xr + e0[i2], *p1 = xr + e1[i2];
          for (PetscInt j = 0; j < L; j++) p0[j] += a0 * q[j];
          for (PetscInt j = 0; j < L; j++) p1[j] += a1 * q[j];
        }
        freeslots.push_back(slot[s]);
        slot[s] = -1;
      };
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++) {
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
          { /* the rows no later output row reaches are complete */
            size_t k = 0;
            for (PetscInt s : live)
              if (s < g.i0[1][i1]) flush(s);
              else live[k++] = s;
            live.resize(k);
          }
          const T *v = dy + yb + yo.t[2][i0] + yo.t[3][i1];
          for (int side = 0; side < 2; side++) {
            const PetscInt s = side ? g.i1[1][i1] : g.i0[1][i1];
            const T        b = side ? tb.w1[1][i1] : tb.w0[1][i1];
            if (slot[s] < 0) { /* its first term: set */
              if (!freeslots.empty()) {
                slot[s] = freeslots.back();
                freeslots.pop_back();
              } else {
                slot[s] = (PetscInt)(G.size() / (size_t)(O2 * Lmax));
                G.resize(G.size() + (size_t)(O2 * Lmax));
              }
              live.push_back(s);
              T *Gs = rowG(s);
              for (PetscInt k = 0; k < R; k++) Gs[k] = b * v[k];
            } else {
              T *Gs = rowG(s);
              for (PetscInt k = 0; k < R; k++) Gs[k] += b * v[k];
            }
          }
        }
        for (PetscInt s : live) flush(s); /* the rest */
        live.clear();
      }
    }
}

template <class T>
void UpsampleBackwardFast(const UpsampleGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo)
{
  if (g.N == 0 || g.C == 0 || g.out[0] == 0 || g.out[1] == 0 || g.out[2] == 0) return;
  const Tables<T> tb(g, xo);
  const PetscInt  O2 = g.out[2];
  std::vector<bool> done;
  if (xo.cinner && yo.cinner && g.linear && g.D == 2) {
    std::vector<PetscInt> cs, cl;
    ChannelRuns(xo, yo, g.C, &cs, &cl);
    done.assign(cs.size(), false);
    UpsampleRowsBackward2D(g, tb, dy, yo, dx, xo, cs, cl, done);
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) return;
  }
  if (xo.cinner && yo.cinner && g.linear) {
    /*
      Linear, channels innermost (channels-last or blocked): separable, as the plain path below. Per
      output row (n, channel run, i0, i1) the adjoint of the innermost interpolation gathers the
      row's dy into h (the window's positions along the innermost dimension times the run's
      channels: 2 axpys of the run's length per output position), then h times the outer weights
      goes to the 1, 2 or 4 source rows (one axpy per window position, or one over the whole row
      where the window's positions are consecutive runs). 3 multiply-adds per dy entry in 2-D
      instead of 8: equal to the reference up to rounding.
    */
    std::vector<PetscInt> cs, cl;
    ChannelRuns(xo, yo, g.C, &cs, &cl);
    const PetscInt W = (PetscInt)xo.t[4].size(), ta = g.D >= 3 ? 2 : 1, tb1 = g.D >= 2 ? 2 : 1;
    PetscInt       Lmax = 0;
    for (PetscInt len : cl) Lmax = std::max(Lmax, len);
    std::vector<T>        h((size_t)(W * Lmax));
    std::vector<PetscInt> k0(g.i0[2].begin(), g.i0[2].end()), k1(g.i1[2].begin(), g.i1[2].end());
    const T              *w0 = tb.w0[2].data(), *w1 = tb.w1[2].data();
    for (PetscInt n = 0; n < g.N; n++)
      for (size_t r = 0; r < cs.size(); r++) {
        if (!done.empty() && done[r]) continue; /* UpsampleRowsBackward2D did it */
        const PetscInt L = cl[r], xb = xo.t[0][n] + xo.t[1][cs[r]], yb = yo.t[0][n] + yo.t[1][cs[r]];
        bool           rowrun = true; /* the window's positions are consecutive runs of L */
        for (PetscInt k = 1; k < W && rowrun; k++) rowrun = xo.t[4][k] - xo.t[4][k - 1] == L;
        for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
          for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
            T *hh = h.data();
            std::fill(hh, hh + W * L, (T)0);
            const T *dr = dy + yb + yo.t[2][i0] + yo.t[3][i1];
            for (PetscInt i2 = 0; i2 < O2; i2++) {
              const T *v = dr + yo.t[4][i2];
              const T  a0 = w0[i2], a1 = w1[i2];
              T       *h0 = hh + k0[i2] * L, *h1 = hh + k1[i2] * L;
              for (PetscInt j = 0; j < L; j++) h0[j] += a0 * v[j];
              for (PetscInt j = 0; j < L; j++) h1[j] += a1 * v[j];
            }
            for (PetscInt a = 0; a < ta; a++) {
              const PetscInt oa = xb + (ta == 1 ? tb.o0[0][i0] : (a ? tb.o1[0][i0] : tb.o0[0][i0]));
              const T        wa = ta == 1 ? (T)1 : (a ? tb.w1[0][i0] : tb.w0[0][i0]);
              for (PetscInt b = 0; b < tb1; b++) {
                const T  wb = tb1 == 1 ? wa : wa * (b ? tb.w1[1][i1] : tb.w0[1][i1]);
                T       *xr = dx + oa + (tb1 == 1 ? tb.o0[1][i1] : (b ? tb.o1[1][i1] : tb.o0[1][i1]));
                if (rowrun) {
                  T *p = xr + xo.t[4][0];
                  for (PetscInt j = 0; j < W * L; j++) p[j] += wb * hh[j];
                } else
                  for (PetscInt k = 0; k < W; k++) {
                    T       *p = xr + xo.t[4][k];
                    const T *q = hh + k * L;
                    for (PetscInt j = 0; j < L; j++) p[j] += wb * q[j];
                  }
              }
            }
          }
      }
    return;
  }
  if (xo.cinner && yo.cinner) {
    /* per output position the reference's taps and coefficients, over channel runs: bitwise equal */
    std::vector<PetscInt> cs, cl;
    ChannelRuns(xo, yo, g.C, &cs, &cl);
    const PetscInt ta = g.linear && g.D >= 3 ? 2 : 1, tb1 = g.linear && g.D >= 2 ? 2 : 1;
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2 = 0; i2 < O2; i2++)
            for (size_t r = 0; r < cs.size(); r++) {
              const PetscInt len = cl[r], xb = xo.t[0][n] + xo.t[1][cs[r]];
              const T       *v   = dy + yo.t[0][n] + yo.t[1][cs[r]] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2];
              if (!g.linear) {
                T *p = dx + xb + tb.o0[0][i0] + tb.o0[1][i1] + tb.o0[2][i2];
                for (PetscInt j = 0; j < len; j++) p[j] += v[j];
                continue;
              }
              for (PetscInt a = 0; a < ta; a++) {
                const PetscInt oa = xb + (a ? tb.o1[0][i0] : tb.o0[0][i0]);
                const T        wa = ta == 1 ? (T)1 : (a ? tb.w1[0][i0] : tb.w0[0][i0]);
                for (PetscInt b = 0; b < tb1; b++) {
                  const PetscInt ob = oa + (b ? tb.o1[1][i1] : tb.o0[1][i1]);
                  const T        wb = tb1 == 1 ? wa : wa * (b ? tb.w1[1][i1] : tb.w0[1][i1]);
                  const T        k0 = wb * tb.w0[2][i2], k1 = wb * tb.w1[2][i2];
                  T             *p0 = dx + ob + tb.o0[2][i2], *p1 = dx + ob + tb.o1[2][i2];
                  for (PetscInt j = 0; j < len; j++) p0[j] += k0 * v[j];
                  for (PetscInt j = 0; j < len; j++) p1[j] += k1 * v[j];
                }
              }
            }
    return;
  }
  PetscInt sx, sy;
  const bool affx = Affine(xo.t[4], &sx), affy = Affine(yo.t[4], &sy);
  if (!g.linear || !affx) {
    /* nearest (and any layout without a uniform innermost stride): the reference's scatter, in its order */
    const PetscInt ta = g.linear && g.D >= 3 ? 2 : 1, tb1 = g.linear && g.D >= 2 ? 2 : 1;
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt c = 0; c < g.C; c++)
        for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
          for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
            const T       *dr = dy + yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1];
            const PetscInt xb = xo.t[0][n] + xo.t[1][c];
            if (!g.linear) {
              T *xr = dx + xb + tb.o0[0][i0] + tb.o0[1][i1];
              if (affy)
                for (PetscInt j = 0; j < O2; j++) xr[tb.o0[2][j]] += dr[yo.t[4][0] + j * sy];
              else
                for (PetscInt j = 0; j < O2; j++) xr[tb.o0[2][j]] += dr[yo.t[4][j]];
              continue;
            }
            for (PetscInt j = 0; j < O2; j++) {
              const T v = dr[yo.t[4][j]];
              for (PetscInt a = 0; a < ta; a++) {
                const PetscInt oa = xb + (a ? tb.o1[0][i0] : tb.o0[0][i0]);
                const T        wa = ta == 1 ? (T)1 : (a ? tb.w1[0][i0] : tb.w0[0][i0]);
                for (PetscInt b = 0; b < tb1; b++) {
                  const PetscInt ob = oa + (b ? tb.o1[1][i1] : tb.o0[1][i1]);
                  const T        wb = tb1 == 1 ? wa : wa * (b ? tb.w1[1][i1] : tb.w0[1][i1]);
                  dx[ob + tb.o0[2][j]] += wb * tb.w0[2][j] * v;
                  dx[ob + tb.o1[2][j]] += wb * tb.w1[2][j] * v;
                }
              }
            }
          }
    return;
  }
  /* linear, plain: the adjoint of the innermost interpolation into h (window row indices), then axpys */
  const PetscInt        W = (PetscInt)xo.t[4].size();
  std::vector<T>        h((size_t)W);
  std::vector<PetscInt> k0(g.i0[2].begin(), g.i0[2].end()), k1(g.i1[2].begin(), g.i1[2].end());
  const T              *w0 = tb.w0[2].data(), *w1 = tb.w1[2].data();
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt c = 0; c < g.C; c++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++) {
          const T *dr = dy + yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1];
          std::fill(h.begin(), h.end(), (T)0);
          if (affy) {
            const T *d = dr + yo.t[4][0];
            for (PetscInt j = 0; j < O2; j++) {
              const T v = d[j * sy];
              h[k0[j]] += w0[j] * v;
              h[k1[j]] += w1[j] * v;
            }
          } else
            for (PetscInt j = 0; j < O2; j++) {
              const T v = dr[yo.t[4][j]];
              h[k0[j]] += w0[j] * v;
              h[k1[j]] += w1[j] * v;
            }
          const PetscInt xb = xo.t[0][n] + xo.t[1][c] + xo.t[4][0];
          const PetscInt na = g.D >= 3 ? 2 : 1, nb = g.D >= 2 ? 2 : 1;
          for (PetscInt a = 0; a < na; a++)
            for (PetscInt b = 0; b < nb; b++) {
              const T wa = na == 1 ? (T)1 : (a ? tb.w1[0][i0] : tb.w0[0][i0]);
              const T wb = nb == 1 ? wa : wa * (b ? tb.w1[1][i1] : tb.w0[1][i1]);
              T      *xr = dx + xb + (a ? tb.o1[0][i0] : tb.o0[0][i0]) + (b ? tb.o1[1][i1] : tb.o0[1][i1]);
              if (sx == 1)
                for (PetscInt k = 0; k < W; k++) xr[k] += wb * h[k];
              else
                for (PetscInt k = 0; k < W; k++) xr[k * sx] += wb * h[k];
            }
        }
}

#define DD_INSTANTIATE(T) \
  template void UpsampleForwardFast<T>(const UpsampleGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &); \
  template void UpsampleBackwardFast<T>(const UpsampleGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
