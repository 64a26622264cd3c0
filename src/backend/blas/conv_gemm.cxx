/*
  GEMM kernels of the convolution and the transposed convolution: the float64 path (and a
  float32 one), checked against the reference loops of src/backend/reference/conv_ref.cxx and
  convt_ref.cxx (tests/test_08_kernels.cxx).

  Lowering to matrix products (im2col): with P the positions of one sample (the convolution's
  output, the transposed convolution's input window) and K = channels x taps,
    conv      y  (Co x P) = W (Co x Ci KK) col(x) (Ci KK x P)        col(x)[(ci,t), o] = x[ci, o s + t d]
              dx         += col2im(W^T dy)                            (the adjoint of the above)
              dW         += dy col(x)^T,  db += dy 1
    convT     y          = b; y += col2im(W^T x)  with W (Ci x Co KK)  (conv's backward-data structure)
              dx         += W col(dy)                                  (conv's forward structure)
              dW         += x col(dy)^T,  db += dy 1
  where convT's col(dy)[(co,t), i] = dy[co, i s + t d - pl], zero outside the box, and its
  col2im skips the same entries (the crops pl, pr of ConvTGeom may be negative).

  The positions of a sample are cut in tiles of pt consecutive positions (C order of the
  spatial dimensions) so that the column buffer of a tile stays in cache: one tile is gathered
  (im2col), multiplied, and scattered (col2im) before the next. A view whose channel x position
  block is a BLAS matrix (a plain or channels-last view without a halo along the positions, and
  for k = 1, unit-stride geometries even the input) is handed to BLAS directly; otherwise it is
  gathered into (or scattered from) a tile buffer. Scratch buffers are thread_local vectors,
  freed at thread exit.
*/
#include <backend/blas/conv_gemm.hpp>
#include <backend/blas/blas_util.hpp>
#include <algorithm>
#include <vector>

namespace ddnn
{
namespace
{
using blas::Gemm;
using blas::Scratch;

/* An R x C matrix: entry (r, c) is p[r ld + c] (row-major) or, when tr, p[c ld + r] */
template <class T>
struct Mat {
  T       *p  = nullptr;
  PetscInt ld = 1;
  bool     tr = false;
  T       &at(PetscInt r, PetscInt c) const { return tr ? p[c * ld + r] : p[r * ld + c]; }
};
template <class T>
inline Mat<const T> Const(const Mat<T> &m)
{
  Mat<const T> r;
  r.p  = m.p;
  r.ld = m.ld;
  r.tr = m.tr;
  return r;
}
template <class T>
inline Mat<T> Transposed(Mat<T> m)
{
  m.tr = !m.tr;
  return m;
}

/* C (M x N) = A (M x K) B (K x N) + beta C, beta 0 or 1; a transposed C is computed as C^T = B^T A^T */
template <class T>
void MatGemm(PetscInt M, PetscInt N, PetscInt K, const Mat<const T> &A, const Mat<const T> &B, T beta, const Mat<T> &C)
{
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == (T)0)
      for (PetscInt r = 0; r < M; r++)
        for (PetscInt c = 0; c < N; c++) C.at(r, c) = 0;
    return;
  }
  if (!C.tr) Gemm(A.tr ? CblasTrans : CblasNoTrans, B.tr ? CblasTrans : CblasNoTrans, M, N, K, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld);
  else Gemm(B.tr ? CblasNoTrans : CblasTrans, A.tr ? CblasNoTrans : CblasTrans, N, M, K, B.p, B.ld, A.p, A.ld, beta, C.p, C.ld);
}

/*
  The single stride sp of the positions of extents E (C order) in a view with spatial strides
  st, when position p (flattened) sits at p sp; false when the view has a gap (a halo) between
  rows of positions.
*/
inline bool Flat(const PetscInt E[3], PetscInt s0, PetscInt s1, PetscInt s2, PetscInt *sp)
{
  const PetscInt st[3] = {s0, s1, s2};
  bool           any   = false;
  PetscInt       expect = 0;
  *sp                   = 1;
  for (PetscInt j = 2; j >= 0; j--) {
    if (E[j] == 1) continue;
    if (E[j] == 0) return false; /* no positions: never a matrix */
    if (!any) {
      *sp    = st[j];
      expect = st[j] * E[j];
      any    = true;
    } else {
      if (st[j] != expect) return false;
      expect *= E[j];
    }
  }
  return true;
}

/* The R (channels) x C (positions) block at p with channel stride sc and position stride sp as a BLAS matrix, if it is one */
template <class T>
inline bool AsMat(T *p, PetscInt R, PetscInt C, PetscInt sc, PetscInt sp, Mat<T> *m)
{
  m->p = p;
  if (R == 1 && C == 1) {
    m->ld = 1;
    m->tr = false;
    return true;
  }
  if (R == 1) {
    if (sp < 1) return false;
    m->tr = sp != 1;
    m->ld = sp == 1 ? C : sp;
    return true;
  }
  if (C == 1) {
    if (sc < 1) return false;
    m->tr = false;
    m->ld = sc;
    return true;
  }
  if (sp == 1 && sc >= C) {
    m->tr = false;
    m->ld = sc;
    return true;
  }
  if (sc == 1 && sp >= R) {
    m->tr = true;
    m->ld = sp;
    return true;
  }
  return false;
}

/* Per dimension: position p and tap t read coordinate p s + t d - pl, inside [0, ext) when bounded */
struct Taps {
  PetscInt k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pl[3] = {0, 0, 0}, ext[3] = {0, 0, 0};
  bool     bounded = false;
  PetscInt KK() const { return k[0] * k[1] * k[2]; }
};
inline Taps Identity()
{
  return Taps();
}
inline Taps ConvTaps(const ConvGeom &g)
{
  Taps t;
  for (int j = 0; j < 3; j++) {
    t.k[j] = g.k[j];
    t.s[j] = g.s[j];
    t.d[j] = g.d[j];
  }
  return t;
}
inline Taps ConvTTaps(const ConvTGeom &g)
{
  Taps t = ConvTaps(g);
  for (int j = 0; j < 3; j++) {
    t.pl[j]  = g.pl[j];
    t.ext[j] = g.out[j];
  }
  t.bounded = true;
  return t;
}

/* A run of len positions along the last dimension: tile column j, position (p0, p1, p2 .. p2 + len) */
struct Seg {
  PetscInt j, p0, p1, p2, len;
};
inline void Segments(const PetscInt E[3], PetscInt pa, PetscInt pt, std::vector<Seg> &segs)
{
  segs.clear();
  for (PetscInt p = pa, end = pa + pt; p < end;) {
    const PetscInt p2 = p % E[2], r = p / E[2], len = std::min(E[2] - p2, end - p);
    segs.push_back({p - pa, r / E[1], r % E[1], p2, len});
    p += len;
  }
}

/* the range [ilo, ihi) of i in [0, len) with 0 <= q + i s < ext */
inline void Valid(PetscInt q, PetscInt s, PetscInt ext, PetscInt len, PetscInt *ilo, PetscInt *ihi)
{
  const PetscInt lo = q >= 0 ? 0 : (-q + s - 1) / s;
  const PetscInt hi = q > ext - 1 ? 0 : (ext - 1 - q) / s + 1;
  *ilo              = std::min(lo, len);
  *ihi              = std::max(*ilo, std::min(hi, len));
}

/*
  Calls f(row, seg, offset of the first valid entry in the view, its stride, ilo, ihi) for
  every row (c, t) of a tile of C channels of sample n and every segment; entries outside
  [ilo, ihi) of the segment (or the whole segment, ilo = ihi = 0) are outside the view's box.
*/
template <class T, class F>
inline void ForTile(const Taps &tp, const View<T> &v, PetscInt n, PetscInt C, const std::vector<Seg> &segs, F &&f)
{
  const PetscInt KK = tp.KK();
  for (PetscInt c = 0; c < C; c++)
    for (PetscInt t0 = 0; t0 < tp.k[0]; t0++)
      for (PetscInt t1 = 0; t1 < tp.k[1]; t1++)
        for (PetscInt t2 = 0; t2 < tp.k[2]; t2++) {
          const PetscInt row = c * KK + (t0 * tp.k[1] + t1) * tp.k[2] + t2, stride = tp.s[2] * v.s2;
          for (const Seg &sg : segs) {
            const PetscInt q0 = sg.p0 * tp.s[0] + t0 * tp.d[0] - tp.pl[0], q1 = sg.p1 * tp.s[1] + t1 * tp.d[1] - tp.pl[1], q2 = sg.p2 * tp.s[2] + t2 * tp.d[2] - tp.pl[2];
            PetscInt       ilo = 0, ihi = sg.len;
            if (tp.bounded) {
              if (q0 < 0 || q0 >= tp.ext[0] || q1 < 0 || q1 >= tp.ext[1]) ihi = 0;
              else Valid(q2, tp.s[2], tp.ext[2], sg.len, &ilo, &ihi);
            }
            f(row, sg, n * v.sn + c * v.sc + q0 * v.s0 + q1 * v.s1 + (q2 + ilo * tp.s[2]) * v.s2, stride, ilo, ihi);
          }
        }
}

/* im2col of a tile: col[row pt + j] = v(n, c, p s + t d - pl), 0 outside the box */
template <class T>
void Im2col(const Taps &tp, const View<const T> &v, PetscInt n, PetscInt C, const std::vector<Seg> &segs, PetscInt pt, T *col)
{
  ForTile(tp, v, n, C, segs, [&](PetscInt row, const Seg &sg, PetscInt off, PetscInt st, PetscInt ilo, PetscInt ihi) {
    T       *dst = col + row * pt + sg.j;
    const T *src = v.p + off;
    std::fill(dst, dst + ilo, (T)0);
    if (st == 1) std::copy(src, src + (ihi - ilo), dst + ilo);
    else
      for (PetscInt i = ilo; i < ihi; i++) dst[i] = src[(i - ilo) * st];
    std::fill(dst + ihi, dst + sg.len, (T)0);
  });
}

/* col2im of a tile: v(n, c, p s + t d - pl) += col[row pt + j] inside the box (assign: =, plus b[c] when b) */
template <bool assign, class T>
void Col2im(const Taps &tp, const View<T> &v, PetscInt n, PetscInt C, const std::vector<Seg> &segs, PetscInt pt, const T *col, const T *b)
{
  const PetscInt KK = tp.KK();
  ForTile(tp, v, n, C, segs, [&](PetscInt row, const Seg &sg, PetscInt off, PetscInt st, PetscInt ilo, PetscInt ihi) {
    const T *src = col + row * pt + sg.j;
    T       *dst = v.p + off;
    if (assign) {
      const T bias = b ? b[row / KK] : (T)0;
      if (st == 1)
        for (PetscInt i = ilo; i < ihi; i++) dst[i - ilo] = src[i] + bias;
      else
        for (PetscInt i = ilo; i < ihi; i++) dst[(i - ilo) * st] = src[i] + bias;
    } else {
      if (st == 1)
        for (PetscInt i = ilo; i < ihi; i++) dst[i - ilo] += src[i];
      else
        for (PetscInt i = ilo; i < ihi; i++) dst[(i - ilo) * st] += src[i];
    }
  });
}

/*
  positions per tile: a tile buffer of `rows` rows takes about kTileBytes (measured with
  bench/bench_conv_kernels at 1 thread: 256 KiB and 512 KiB were best, 1 MiB and more slower,
  on an AVX-512 machine with 1 MiB of L2 per core; on an AVX2 EPYC with 512 KiB of L2 per core,
  512 KiB beat 256 KiB in 11 of 12 interleaved pairs there, by 3-20 %, and in the main job's
  float64 U-Net (-log_view, 4 rounds) by 4-11 % of the convolutions' time: wide decoder layers
  (96 x 9 column rows) get 75 positions per tile instead of 37; at least 32 positions so that
  the GEMM is not too thin)
*/
const size_t kTileBytes = 512 * 1024;
template <class T>
inline PetscInt TileSize(PetscInt P, PetscInt rows)
{
  const PetscInt pt = (PetscInt)(kTileBytes / sizeof(T)) / std::max<PetscInt>(rows, 1);
  return std::max<PetscInt>(1, std::min(P, std::max<PetscInt>(pt, 32)));
}

inline PetscInt Prod(const PetscInt e[3])
{
  return e[0] * e[1] * e[2];
}

/* the matrix of channels x positions [pa, pa + pt) of sample n of v, or the gathered tile in scratch slot */
template <class T>
Mat<const T> Operand(bool flat, PetscInt sp, const Taps &tp, const View<const T> &v, PetscInt n, PetscInt C, PetscInt pa, PetscInt pt, const std::vector<Seg> &segs, int slot)
{
  Mat<const T> m;
  if (flat && AsMat(v.p + n * v.sn + pa * sp, C, pt, v.sc, sp, &m)) return m;
  T *buf = Scratch<T>(slot, (size_t)(C * tp.KK() * pt));
  Im2col(tp, v, n, C, segs, pt, buf);
  m.p  = buf;
  m.ld = pt;
  m.tr = false;
  return m;
}

/* db[r] += sum of row r of the R x C matrix m */
template <class T>
void RowSums(const Mat<const T> &m, PetscInt R, PetscInt C, T *db)
{
  for (PetscInt r = 0; r < R; r++) {
    T acc = 0;
    for (PetscInt c = 0; c < C; c++) acc += m.at(r, c);
    db[r] += acc;
  }
}
} // namespace

/*@
  ConvForwardGemm - y = conv(x, w) + b by im2col and GEMM on tiles of output positions: the
  fast equivalent of ConvForwardRef (same geometry, views and semantics; y is overwritten).

  Input Parameters:
+ g - the geometry (spatial dimensions padded to 3 with leading unit dimensions)
. x - the input window (already padded), any strides
. w - the weights (Co, Ci, k0, k1, k2), C order
. ldw - the row stride of w (0: packed; a sub-block of a grouped layer's weights otherwise)
- b - the bias (Co), or NULL

  Output Parameter:
. y - the output (N, Co, out), any strides

  Level: developer

.seealso: ConvForwardRef(), ConvBackwardDataGemm(), ConvBackwardWeightsGemm()
@*/
template <class T>
void ConvForwardGemm1(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y, PetscInt ldw = 0)
{
  const PetscInt KK = g.KK(), K = g.Ci * KK, P = Prod(g.out);
  if (g.N == 0 || g.Co == 0 || P == 0) return;
  const Taps tx = ConvTaps(g), id = Identity();
  bool       ident = KK == 1;
  for (int j = 0; j < 3; j++) ident = ident && (g.out[j] == 1 || g.s[j] == 1);
  PetscInt         spx = 0, spy = 0;
  const bool       fx = ident && Flat(g.out, x.s0, x.s1, x.s2, &spx), fy = Flat(g.out, y.s0, y.s1, y.s2, &spy);
  const PetscInt   pt = fx && fy ? P : TileSize<T>(P, std::max(K, g.Co)); /* no buffer to keep in cache: one GEMM per sample */
  std::vector<Seg> segs;
  Mat<const T>     W;
  W.p  = w;
  W.ld = ldw > 0 ? ldw : std::max<PetscInt>(K, 1);
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt pa = 0; pa < P; pa += pt) {
      const PetscInt m = std::min(pt, P - pa);
      Segments(g.out, pa, m, segs);
      const Mat<const T> B = Operand(fx, spx, tx, x, n, g.Ci, pa, m, segs, 0);
      Mat<T>             C;
      const bool         direct = fy && AsMat(y.p + n * y.sn + pa * spy, g.Co, m, y.sc, spy, &C);
      if (!direct) {
        C.p  = Scratch<T>(1, (size_t)(g.Co * m));
        C.ld = m;
        C.tr = false;
      }
      T beta = 0;
      if (direct && b) { /* the bias in the GEMM's C */
        for (PetscInt r = 0; r < g.Co; r++)
          for (PetscInt c = 0; c < m; c++) C.at(r, c) = b[r];
        beta = 1;
      }
      MatGemm(g.Co, m, K, W, B, beta, C);
      if (!direct) Col2im<true>(id, y, n, g.Co, segs, m, C.p, b);
    }
}

/*@
  ConvBackwardDataGemm - dx += J_x^* dy: the GEMM W^T dy into a column tile, then col2im;
  the fast equivalent of ConvBackwardDataRef.

  Input Parameters:
+ g  - the geometry
. dy - the output gradient (N, Co, out), any strides
. w  - the weights (Co, Ci, k0, k1, k2)
- ldw - the row stride of w (0: packed; a sub-block of a grouped layer's weights otherwise)

  Output Parameter:
. dx - the window's gradient, accumulated into (any strides)

  Level: developer

.seealso: ConvBackwardDataRef(), ConvForwardGemm()
@*/
template <class T>
void ConvBackwardDataGemm1(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx, PetscInt ldw = 0)
{
  const PetscInt KK = g.KK(), K = g.Ci * KK, P = Prod(g.out);
  if (g.N == 0 || g.Ci == 0 || g.Co == 0 || P == 0) return;
  const Taps tx = ConvTaps(g), id = Identity();
  bool       ident = KK == 1;
  for (int j = 0; j < 3; j++) ident = ident && (g.out[j] == 1 || g.s[j] == 1);
  PetscInt         spd = 0, spx = 0;
  const bool       fd = Flat(g.out, dy.s0, dy.s1, dy.s2, &spd), fx = ident && Flat(g.out, dx.s0, dx.s1, dx.s2, &spx);
  const PetscInt   pt = fd && fx ? P : TileSize<T>(P, std::max(K, g.Co)); /* no buffer to keep in cache: one GEMM per sample */
  std::vector<Seg> segs;
  Mat<const T>     Wt; /* W^T, K x Co */
  Wt.p  = w;
  Wt.ld = ldw > 0 ? ldw : K;
  Wt.tr = true;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt pa = 0; pa < P; pa += pt) {
      const PetscInt m = std::min(pt, P - pa);
      Segments(g.out, pa, m, segs);
      const Mat<const T> B = Operand(fd, spd, id, dy, n, g.Co, pa, m, segs, 0);
      Mat<T>             C;
      if (fx && AsMat(dx.p + n * dx.sn + pa * spx, K, m, dx.sc, spx, &C)) MatGemm(K, m, g.Co, Wt, B, (T)1, C);
      else {
        C.p  = Scratch<T>(1, (size_t)(K * m));
        C.ld = m;
        C.tr = false;
        MatGemm(K, m, g.Co, Wt, B, (T)0, C);
        Col2im<false>(tx, dx, n, g.Ci, segs, m, C.p, (const T *)nullptr);
      }
    }
}

/*@
  ConvBackwardWeightsGemm - dw += dy col(x)^T and db += the sums of dy, by tiles of output
  positions; the fast equivalent of ConvBackwardWeightsRef.

  Input Parameters:
+ g  - the geometry
. x  - the input window, any strides
- dy - the output gradient, any strides

  Output Parameters:
+ dw - the weights' gradient (Co, Ci, k0, k1, k2), accumulated into
. ldw - the row stride of dw (0: packed; a sub-block of a grouped layer's weights otherwise)
- db - the bias' gradient (Co), accumulated into, or NULL

  Level: developer

.seealso: ConvBackwardWeightsRef(), ConvForwardGemm()
@*/
template <class T>
void ConvBackwardWeightsGemm1(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db, PetscInt ldw = 0)
{
  const PetscInt KK = g.KK(), K = g.Ci * KK, P = Prod(g.out);
  if (g.N == 0 || g.Co == 0 || P == 0) return;
  const Taps tx = ConvTaps(g), id = Identity();
  bool       ident = KK == 1;
  for (int j = 0; j < 3; j++) ident = ident && (g.out[j] == 1 || g.s[j] == 1);
  PetscInt         spd = 0, spx = 0;
  const bool       fd = Flat(g.out, dy.s0, dy.s1, dy.s2, &spd), fx = ident && Flat(g.out, x.s0, x.s1, x.s2, &spx);
  const PetscInt   pt = fd && fx ? P : TileSize<T>(P, std::max(K, g.Co)); /* no buffer to keep in cache: one GEMM per sample */
  std::vector<Seg> segs;
  Mat<T>           DW;
  DW.p  = dw;
  DW.ld = ldw > 0 ? ldw : std::max<PetscInt>(K, 1);
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt pa = 0; pa < P; pa += pt) {
      const PetscInt m = std::min(pt, P - pa);
      Segments(g.out, pa, m, segs);
      const Mat<const T> D = Operand(fd, spd, id, dy, n, g.Co, pa, m, segs, 0);
      if (db) RowSums(D, g.Co, m, db);
      if (K == 0) continue;
      const Mat<const T> X = Operand(fx, spx, tx, x, n, g.Ci, pa, m, segs, 1);
      MatGemm(g.Co, K, m, D, Transposed(X), (T)1, DW);
    }
}

/*@
  ConvTForwardGemm - y = convT(x, w) + b: y = b, then the GEMM W^T x into a column tile and
  col2im into the box (the structure of ConvBackwardDataGemm), skipping entries outside the
  box; the fast equivalent of ConvTForwardRef.

  Input Parameters:
+ g - the geometry (ConvTGeom: crops pl, pr, either may be negative)
. x - the input window (N, Ci, in), any strides
. w - the weights (Ci, Co, k0, k1, k2)
. ldw - the row stride of w (0: packed; a sub-block of a grouped layer's weights otherwise)
- b - the bias (Co), or NULL

  Output Parameter:
. y - the output box (N, Co, out), overwritten

  Level: developer

.seealso: ConvTForwardRef(), ConvTBackwardDataGemm(), ConvTBackwardWeightsGemm()
@*/
template <class T>
void ConvTForwardGemm1(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y, PetscInt ldw = 0)
{
  const PetscInt KK = g.KK(), K = g.Co * KK, P = Prod(g.in), Pout = Prod(g.out);
  if (g.N == 0 || g.Co == 0 || Pout == 0) return;
  for (PetscInt n = 0; n < g.N; n++) /* y = b */
    for (PetscInt co = 0; co < g.Co; co++) {
      const T v = b ? b[co] : (T)0;
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++) {
          T *r = &y.at(n, co, o0, o1, 0);
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) r[o2 * y.s2] = v;
        }
    }
  if (g.Ci == 0 || P == 0) return;
  const Taps ty = ConvTTaps(g), id = Identity();
  bool       ident = KK == 1;
  for (int j = 0; j < 3; j++) ident = ident && (g.in[j] == 1 || g.s[j] == 1) && g.pl[j] == 0 && g.in[j] <= g.out[j];
  PetscInt         spx = 0, spy = 0;
  const bool       fx = Flat(g.in, x.s0, x.s1, x.s2, &spx), fy = ident && Flat(g.in, y.s0, y.s1, y.s2, &spy);
  const PetscInt   pt = TileSize<T>(P, std::max(K, g.Ci));
  std::vector<Seg> segs;
  Mat<const T>     Wt; /* W^T, Co KK x Ci */
  Wt.p  = w;
  Wt.ld = ldw > 0 ? ldw : K;
  Wt.tr = true;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt pa = 0; pa < P; pa += pt) {
      const PetscInt m = std::min(pt, P - pa);
      Segments(g.in, pa, m, segs);
      const Mat<const T> B = Operand(fx, spx, id, x, n, g.Ci, pa, m, segs, 0);
      Mat<T>             C;
      if (fy && AsMat(y.p + n * y.sn + pa * spy, K, m, y.sc, spy, &C)) MatGemm(K, m, g.Ci, Wt, B, (T)1, C);
      else {
        C.p  = Scratch<T>(1, (size_t)(K * m));
        C.ld = m;
        C.tr = false;
        MatGemm(K, m, g.Ci, Wt, B, (T)0, C);
        Col2im<false>(ty, y, n, g.Co, segs, m, C.p, (const T *)nullptr);
      }
    }
}

/*@
  ConvTBackwardDataGemm - dx += W col(dy), col(dy) zero outside the box (the structure of
  ConvForwardGemm); the fast equivalent of ConvTBackwardDataRef.

  Input Parameters:
+ g  - the geometry
. dy - the output gradient (N, Co, out), any strides
. w  - the weights (Ci, Co, k0, k1, k2)
- ldw - the row stride of w (0: packed; a sub-block of a grouped layer's weights otherwise)

  Output Parameter:
. dx - the window's gradient (N, Ci, in), accumulated into

  Level: developer

.seealso: ConvTBackwardDataRef(), ConvTForwardGemm()
@*/
template <class T>
void ConvTBackwardDataGemm1(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx, PetscInt ldw = 0)
{
  const PetscInt KK = g.KK(), K = g.Co * KK, P = Prod(g.in);
  if (g.N == 0 || g.Ci == 0 || g.Co == 0 || P == 0) return;
  const Taps ty = ConvTTaps(g), id = Identity();
  bool       ident = KK == 1;
  for (int j = 0; j < 3; j++) ident = ident && (g.in[j] == 1 || g.s[j] == 1) && g.pl[j] == 0 && g.in[j] <= g.out[j];
  PetscInt         spd = 0, spx = 0;
  const bool       fd = ident && Flat(g.in, dy.s0, dy.s1, dy.s2, &spd), fx = Flat(g.in, dx.s0, dx.s1, dx.s2, &spx);
  const PetscInt   pt = TileSize<T>(P, std::max(K, g.Ci));
  std::vector<Seg> segs;
  Mat<const T>     W; /* Ci x Co KK */
  W.p  = w;
  W.ld = ldw > 0 ? ldw : K;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt pa = 0; pa < P; pa += pt) {
      const PetscInt m = std::min(pt, P - pa);
      Segments(g.in, pa, m, segs);
      const Mat<const T> B = Operand(fd, spd, ty, dy, n, g.Co, pa, m, segs, 0);
      Mat<T>             C;
      if (fx && AsMat(dx.p + n * dx.sn + pa * spx, g.Ci, m, dx.sc, spx, &C)) MatGemm(g.Ci, m, K, W, B, (T)1, C);
      else {
        C.p  = Scratch<T>(1, (size_t)(g.Ci * m));
        C.ld = m;
        C.tr = false;
        MatGemm(g.Ci, m, K, W, B, (T)0, C);
        Col2im<false>(id, dx, n, g.Ci, segs, m, C.p, (const T *)nullptr);
      }
    }
}

/*@
  ConvTBackwardWeightsGemm - dw += x col(dy)^T by tiles of window positions, db += the sums of
  dy over the whole box; the fast equivalent of ConvTBackwardWeightsRef.

  Input Parameters:
+ g  - the geometry
. x  - the input window (N, Ci, in), any strides
- dy - the output gradient (N, Co, out), any strides

  Output Parameters:
+ dw - the weights' gradient (Ci, Co, k0, k1, k2), accumulated into
. ldw - the row stride of dw (0: packed; a sub-block of a grouped layer's weights otherwise)
- db - the bias' gradient (Co), accumulated into, or NULL

  Level: developer

.seealso: ConvTBackwardWeightsRef(), ConvTForwardGemm()
@*/
template <class T>
void ConvTBackwardWeightsGemm1(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db, PetscInt ldw = 0)
{
  const PetscInt KK = g.KK(), K = g.Co * KK, P = Prod(g.in);
  if (db)
    for (PetscInt co = 0; co < g.Co; co++) {
      T acc = 0;
      for (PetscInt n = 0; n < g.N; n++)
        for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
          for (PetscInt o1 = 0; o1 < g.out[1]; o1++) {
            const T *r = &dy.at(n, co, o0, o1, 0);
            for (PetscInt o2 = 0; o2 < g.out[2]; o2++) acc += r[o2 * dy.s2];
          }
      db[co] += acc;
    }
  if (g.N == 0 || g.Ci == 0 || g.Co == 0 || P == 0) return;
  const Taps ty = ConvTTaps(g), id = Identity();
  bool       ident = KK == 1;
  for (int j = 0; j < 3; j++) ident = ident && (g.in[j] == 1 || g.s[j] == 1) && g.pl[j] == 0 && g.in[j] <= g.out[j];
  PetscInt         spd = 0, spx = 0;
  const bool       fd = ident && Flat(g.in, dy.s0, dy.s1, dy.s2, &spd), fx = Flat(g.in, x.s0, x.s1, x.s2, &spx);
  const PetscInt   pt = TileSize<T>(P, std::max(K, g.Ci));
  std::vector<Seg> segs;
  Mat<T>           DW; /* Ci x Co KK */
  DW.p  = dw;
  DW.ld = ldw > 0 ? ldw : K;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt pa = 0; pa < P; pa += pt) {
      const PetscInt m = std::min(pt, P - pa);
      Segments(g.in, pa, m, segs);
      const Mat<const T> X = Operand(fx, spx, id, x, n, g.Ci, pa, m, segs, 0);
      const Mat<const T> D = Operand(fd, spd, ty, dy, n, g.Co, pa, m, segs, 1);
      MatGemm(g.Ci, K, m, X, Transposed(D), (T)1, DW);
    }
}

/*
  Grouped convolutions (g.groups = G > 1), also over partitioned channels (ConvGeom's cig, cog, ci0,
  co0: paper 000 sec. 4.1.2's Pco x Pci blocks, whose channels need not be whole groups): one GEMM
  convolution per group that has local input and output channels, on the group's local channel
  slices [ia, ib) of x and [ca, cb) of y and the sub-block of the weights that connects them (rows
  of the local output channels (transposed: input channels), columns from the first local in-group
  index; leading dimension cig KK (transposed: cog KK)). Output channels no local input reaches get
  the bias (or 0); the bias' gradient is summed over all local output channels.
*/
struct GroupSlice {
  PetscInt ci, nci, co, nco, wo, ldw; /* local channel slices, the weights' offset and leading dimension */
};
template <class Geom, class F>
static inline void ForGroups(const Geom &g, bool transposed, F &&f)
{
  const PetscInt Cig = g.Cig(), Cog = g.Cog(), KK = g.KK();
  if (g.Ci <= 0 || g.Co <= 0 || Cig <= 0 || Cog <= 0) return;
  const PetscInt glo = std::max(g.ci0 / Cig, g.co0 / Cog), ghi = std::min((g.ci0 + g.Ci - 1) / Cig, (g.co0 + g.Co - 1) / Cog);
  for (PetscInt gi = glo; gi <= ghi; gi++) {
    const PetscInt ia = std::max(g.ci0, gi * Cig), ib = std::min(g.ci0 + g.Ci, (gi + 1) * Cig);
    const PetscInt ca = std::max(g.co0, gi * Cog), cb = std::min(g.co0 + g.Co, (gi + 1) * Cog);
    if (ib <= ia || cb <= ca) continue;
    GroupSlice sl;
    sl.ci  = ia - g.ci0;
    sl.nci = ib - ia;
    sl.co  = ca - g.co0;
    sl.nco = cb - ca;
    if (!transposed) {
      sl.ldw = Cig * KK;
      sl.wo  = sl.co * sl.ldw + (ia - gi * Cig) * KK;
    } else {
      sl.ldw = Cog * KK;
      sl.wo  = sl.ci * sl.ldw + (ca - gi * Cog) * KK;
    }
    Geom q   = g;
    q.groups = 1;
    q.cig = q.cog = q.ci0 = q.co0 = 0;
    q.Ci                          = sl.nci;
    q.Co                          = sl.nco;
    f(q, sl);
  }
}
template <class T>
static inline View<T> ChannelShift(View<T> v, PetscInt c)
{
  v.p += c * v.sc;
  return v;
}
/* y = b (or 0) on the local output channels no group slice writes */
template <class T, class Geom>
static void FillUncovered(const Geom &g, bool transposed, const T *b, const View<T> &y)
{
  std::vector<char> covered((size_t)std::max<PetscInt>(g.Co, 0), 0);
  ForGroups(g, transposed, [&](const Geom &, const GroupSlice &sl) { std::fill(covered.begin() + sl.co, covered.begin() + sl.co + sl.nco, 1); });
  for (PetscInt co = 0; co < g.Co; co++) {
    if (covered[co]) continue;
    const T v = b ? b[co] : (T)0;
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) y.at(n, co, o0, o1, o2) = v;
  }
}
/* whether g is a plain convolution: one group, not over partitioned channels */
static inline bool Dense(const ConvGeom &g)
{
  return g.groups <= 1 && g.cig <= 0;
}

template <class T>
void ConvForwardGemm(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y)
{
  if (Dense(g)) return ConvForwardGemm1<T>(g, x, w, b, y);
  FillUncovered<T>(g, false, b, y);
  ForGroups(g, false, [&](const ConvGeom &q, const GroupSlice &sl) { ConvForwardGemm1<T>(q, ChannelShift(x, sl.ci), w + sl.wo, b ? b + sl.co : nullptr, ChannelShift(y, sl.co), sl.ldw); });
}
template <class T>
void ConvBackwardDataGemm(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx)
{
  if (Dense(g)) return ConvBackwardDataGemm1<T>(g, dy, w, dx);
  ForGroups(g, false, [&](const ConvGeom &q, const GroupSlice &sl) { ConvBackwardDataGemm1<T>(q, ChannelShift(dy, sl.co), w + sl.wo, ChannelShift(dx, sl.ci), sl.ldw); });
}
template <class T>
void ConvBackwardWeightsGemm(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db)
{
  if (Dense(g)) return ConvBackwardWeightsGemm1<T>(g, x, dy, dw, db);
  if (db) BiasGradientRef<T>(g, dy, db);
  ForGroups(g, false, [&](const ConvGeom &q, const GroupSlice &sl) { ConvBackwardWeightsGemm1<T>(q, ChannelShift(x, sl.ci), ChannelShift(dy, sl.co), dw + sl.wo, (T *)nullptr, sl.ldw); });
}
template <class T>
void ConvTForwardGemm(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y)
{
  if (Dense(g)) return ConvTForwardGemm1<T>(g, x, w, b, y);
  FillUncovered<T>(g, true, b, y);
  ForGroups(g, true, [&](const ConvTGeom &q, const GroupSlice &sl) { ConvTForwardGemm1<T>(q, ChannelShift(x, sl.ci), w + sl.wo, b ? b + sl.co : nullptr, ChannelShift(y, sl.co), sl.ldw); });
}
template <class T>
void ConvTBackwardDataGemm(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx)
{
  if (Dense(g)) return ConvTBackwardDataGemm1<T>(g, dy, w, dx);
  ForGroups(g, true, [&](const ConvTGeom &q, const GroupSlice &sl) { ConvTBackwardDataGemm1<T>(q, ChannelShift(dy, sl.co), w + sl.wo, ChannelShift(dx, sl.ci), sl.ldw); });
}
template <class T>
void ConvTBackwardWeightsGemm(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db)
{
  if (Dense(g)) return ConvTBackwardWeightsGemm1<T>(g, x, dy, dw, db);
  if (db) BiasGradientRef<T>(g, dy, db);
  ForGroups(g, true, [&](const ConvTGeom &q, const GroupSlice &sl) { ConvTBackwardWeightsGemm1<T>(q, ChannelShift(x, sl.ci), ChannelShift(dy, sl.co), dw + sl.wo, (T *)nullptr, sl.ldw); });
}

#define DD_CONV_GEMM(T) \
  template void ConvForwardGemm<T>(const ConvGeom &, const View<const T> &, const T *, const T *, const View<T> &); \
  template void ConvBackwardDataGemm<T>(const ConvGeom &, const View<const T> &, const T *, const View<T> &); \
  template void ConvBackwardWeightsGemm<T>(const ConvGeom &, const View<const T> &, const View<const T> &, T *, T *); \
  template void ConvTForwardGemm<T>(const ConvTGeom &, const View<const T> &, const T *, const T *, const View<T> &); \
  template void ConvTBackwardDataGemm<T>(const ConvTGeom &, const View<const T> &, const T *, const View<T> &); \
  template void ConvTBackwardWeightsGemm<T>(const ConvTGeom &, const View<const T> &, const View<const T> &, T *, T *);
DD_CONV_GEMM(float)
DD_CONV_GEMM(double)
#undef DD_CONV_GEMM
} // namespace ddnn
