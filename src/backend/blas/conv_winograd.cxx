/*
  Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution (Lavin and Gray, "Fast algorithms for
  convolutional neural networks", CVPR 2016, sec. 4): the float64 path's 3 x 3 convolutions (and
  /cpu/blas's float32 ones), checked against the reference loops (tests/test_08_kernels.cxx).
  Described below for F(2x2, 3x3); F(4x4, 3x3) is the same with 4 x 4 output tiles read from 6 x 6
  input tiles (36 GEMMs, 4 times fewer multiplications than im2col), its 1-D transforms in F<4>.
  3 x 3 x 3 taps (3-D problems) take F(2x2x2, 3x3x3) (Lavin and Gray's nesting, one more
  dimension): 2 x 2 x 2 output tiles from 4 x 4 x 4 input tiles, the 1-D transforms applied over the
  planes, the rows and the columns, 64 GEMMs (3.4 times fewer multiplications than im2col's), the
  same adjoint construction (ToDomain3(), OutputTransform3(), InputTransform3Adjoint(),
  WeightTransform3() and its adjoint).

  One image is a (sample, leading index) pair of the window; its output H x W is cut in
  th x tw = ceil(H/2) x ceil(W/2) tiles of 2 x 2, tile (a, b) reading the 4 x 4 window entries at
  rows 2a..2a+3 and columns 2b..2b+3. With the 1-D transforms (cross-correlation, as PyTorch's
  convolution)
    B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
    A^T = [1 1 1 0; 0 1 -1 -1],
  a tile is Y = A^T [ (G w G^T) (.) (B^T X B) ] A, i.e. for every one of the 16 entries t of the
  4 x 4 transformed domain one matrix product over the channels,
    M_t (Co x tiles) = U_t (Co x Ci) V_t (Ci x tiles),  U_t = (G w G^T)_t,  V_t = (B^T X B)_t.
  The window is read as if zero beyond rows H + 2 and columns W + 2 and the output tiles are
  cropped to H x W (odd extents), so the three passes are exact adjoints of one linear map:
    backward data     dM_t = (A dY A^T)_t,  dV_t = U_t^T dM_t,  dX += B dV B^T  (overlapping tiles add)
    backward weights  dU_t = sum over tiles of dM_t V_t^T,  dw += G^T dU G,  db += the sums of dY
  Tiles are taken a chunk of tile rows at a time (all images' tile rows in sequence) so that the
  transformed chunk (16 (Ci + Co) entries per tile) stays in cache; each chunk costs 16 GEMMs
  (OpenBLAS). The transforms run on contiguous row buffers, so that they vectorise.
*/
#include <backend/blas/conv_winograd.hpp>
#include <backend/blas/blas_util.hpp>
#include <algorithm>
#include <vector>

namespace ddnn
{
namespace
{
using blas::Gemm;
using blas::Scratch;

/*
  The 1-D transforms of F(m, 3), alpha = m + 2 points, and their adjoints (the transposed matrices):
    In:  v = B^T d (alpha -> alpha),  InAdj:  d = B v
    Out: y = A^T m (alpha -> m),      OutAdj: m = A y
    W:   u = G g (3 -> alpha),        WAdj:   g = G^T u
*/
template <int m>
struct F;
template <>
struct F<2> { /* interpolation points 0, 1, -1, infinity */
  static const int a = 4;
  template <class T>
  static inline void In(const T d[4], T v[4])
  {
    v[0] = d[0] - d[2];
    v[1] = d[1] + d[2];
    v[2] = d[2] - d[1];
    v[3] = d[1] - d[3];
  }
  template <class T>
  static inline void InAdj(const T v[4], T d[4])
  {
    d[0] = v[0];
    d[1] = v[1] - v[2] + v[3];
    d[2] = -v[0] + v[1] + v[2];
    d[3] = -v[3];
  }
  template <class T>
  static inline void Out(const T x[4], T y[2])
  {
    y[0] = x[0] + x[1] + x[2];
    y[1] = x[1] - x[2] - x[3];
  }
  template <class T>
  static inline void OutAdj(const T y[2], T x[4])
  {
    x[0] = y[0];
    x[1] = y[0] + y[1];
    x[2] = y[0] - y[1];
    x[3] = -y[1];
  }
  template <class T>
  static inline void W(const T g[3], T u[4])
  {
    u[0] = g[0];
    u[1] = (T)0.5 * (g[0] + g[1] + g[2]);
    u[2] = (T)0.5 * (g[0] - g[1] + g[2]);
    u[3] = g[2];
  }
  template <class T>
  static inline void WAdj(const T u[4], T g[3])
  {
    g[0] = u[0] + (T)0.5 * (u[1] + u[2]);
    g[1] = (T)0.5 * (u[1] - u[2]);
    g[2] = (T)0.5 * (u[1] + u[2]) + u[3];
  }
};
template <>
struct F<4> { /* interpolation points 0, 1, -1, 2, -2, infinity (Lavin and Gray, sec. 4.2) */
  static const int a = 6;
  template <class T>
  static inline void In(const T d[6], T v[6])
  {
    v[0] = 4 * d[0] - 5 * d[2] + d[4];
    v[1] = -4 * (d[1] + d[2]) + d[3] + d[4];
    v[2] = 4 * (d[1] - d[2]) - d[3] + d[4];
    v[3] = 2 * (d[3] - d[1]) - d[2] + d[4];
    v[4] = 2 * (d[1] - d[3]) - d[2] + d[4];
    v[5] = 4 * d[1] - 5 * d[3] + d[5];
  }
  template <class T>
  static inline void InAdj(const T v[6], T d[6])
  {
    d[0] = 4 * v[0];
    d[1] = 4 * (v[2] - v[1] + v[5]) + 2 * (v[4] - v[3]);
    d[2] = -5 * v[0] - 4 * (v[1] + v[2]) - v[3] - v[4];
    d[3] = v[1] - v[2] + 2 * (v[3] - v[4]) - 5 * v[5];
    d[4] = v[0] + v[1] + v[2] + v[3] + v[4];
    d[5] = v[5];
  }
  template <class T>
  static inline void Out(const T x[6], T y[4])
  {
    const T p1 = x[1] + x[2], m1 = x[1] - x[2], p2 = x[3] + x[4], m2 = x[3] - x[4];
    y[0] = x[0] + p1 + p2;
    y[1] = m1 + 2 * m2;
    y[2] = p1 + 4 * p2;
    y[3] = m1 + 8 * m2 + x[5];
  }
  template <class T>
  static inline void OutAdj(const T y[4], T x[6])
  {
    const T e = y[0] + y[2], o = y[1] + y[3], e4 = y[0] + 4 * y[2], o8 = 2 * y[1] + 8 * y[3];
    x[0] = y[0];
    x[1] = e + o;
    x[2] = e - o;
    x[3] = e4 + o8;
    x[4] = e4 - o8;
    x[5] = y[3];
  }
  template <class T>
  static inline void W(const T g[3], T u[6])
  {
    u[0] = g[0] / 4;
    u[1] = -(g[0] + g[1] + g[2]) / 6;
    u[2] = -(g[0] - g[1] + g[2]) / 6;
    u[3] = g[0] / 24 + g[1] / 12 + g[2] / 6;
    u[4] = g[0] / 24 - g[1] / 12 + g[2] / 6;
    u[5] = g[2];
  }
  template <class T>
  static inline void WAdj(const T u[6], T g[3])
  {
    g[0] = u[0] / 4 - (u[1] + u[2]) / 6 + (u[3] + u[4]) / 24;
    g[1] = (u[2] - u[1]) / 6 + (u[3] - u[4]) / 12;
    g[2] = (u[3] + u[4] - u[1] - u[2]) / 6 + u[5];
  }
};

/* bytes of a chunk's transformed tiles (V and M, or dM and dV): kept within the per-core L2 and L3 share */
const size_t kChunkBytes = 1024 * 1024; /* bench_conv_kernels, U-Net layers: 256 KiB and 4 MiB no better */

/*
  The tiling of one call: output tiles of m x m (dims 2: every (sample, leading index) an image of
  H x W) or m x m x m (dims 3: every sample an image of D0 x H x W, td tile planes); a tile row is
  (image, tile plane, tile row), its tw tiles side by side
*/
struct Tiling {
  PetscInt NI, D0, H, W, td, th, tw, rows, R; /* images, output extents, tiles per plane / column / row, tile rows in all, tile rows per chunk */
  PetscInt n0;                                /* the images' leading-index extent (Image()) */
  Tiling(const ConvGeom &g, PetscInt m, int dims, PetscInt width, size_t bytes)
  {
    PetscInt A = 1;
    for (int j = 0; j < dims; j++) A *= m + 2;
    NI = dims == 3 ? g.N : g.N * g.out[0];
    n0 = dims == 3 ? 1 : g.out[0];
    D0 = dims == 3 ? g.out[0] : 1;
    H  = g.out[1];
    W  = g.out[2];
    td = dims == 3 ? (D0 + m - 1) / m : 1;
    th = (H + m - 1) / m;
    tw = (W + m - 1) / m;
    rows = NI * td * th;
    R    = std::max<PetscInt>(1, std::min<PetscInt>(rows, (PetscInt)(kChunkBytes / (bytes * (size_t)std::max<PetscInt>(A * width * tw, 1)))));
  }
  /* tile row -> image, tile plane, tile row */
  void Where(PetscInt row, PetscInt *i, PetscInt *tp, PetscInt *ta) const
  {
    *i  = row / (td * th);
    *tp = (row / th) % td;
    *ta = row % th;
  }
};

/* image i of a view: (sample, leading index) */
template <class T>
inline T *Image(const View<T> &v, PetscInt i, PetscInt n0)
{
  return v.p + (i / n0) * v.sn + (i % n0) * v.s0;
}

/* U_t = (G w G^T)_t for every output channel co and input channel ci: U[(t Co + co) Ci + ci] */
template <int m, class T>
void WeightTransform(const T *w, PetscInt Co, PetscInt Ci, T *U)
{
  const int    a = F<m>::a;
  const size_t S = (size_t)Co * (size_t)Ci;
  for (PetscInt co = 0; co < Co; co++)
    for (PetscInt ci = 0; ci < Ci; ci++) {
      const T *g = w + (co * Ci + ci) * 9;
      T        r[6][3], in[6], out[6]; /* G g: alpha x 3 */
      for (int j = 0; j < 3; j++) {
        const T col[3] = {g[j], g[3 + j], g[6 + j]};
        F<m>::W(col, out);
        for (int k = 0; k < a; k++) r[k][j] = out[k];
      }
      T *u = U + (size_t)co * Ci + ci;
      for (int k = 0; k < a; k++) {
        for (int j = 0; j < 3; j++) in[j] = r[k][j];
        F<m>::W(in, out);
        for (int l = 0; l < a; l++) u[(k * a + l) * S] = out[l];
      }
    }
}

/* the same for 3 x 3 x 3 taps: U_t = (G (G (G w)_2)_1)_0, t = (k0 a + k1) a + k2 */
template <int m, class T>
void WeightTransform3(const T *w, PetscInt Co, PetscInt Ci, T *U)
{
  const int    a = F<m>::a;
  const size_t S = (size_t)Co * (size_t)Ci;
  for (PetscInt co = 0; co < Co; co++)
    for (PetscInt ci = 0; ci < Ci; ci++) {
      const T *g = w + (co * Ci + ci) * 27;
      T        r2[3][3][6], r1[3][6][6], in[6], out[6];
      for (int i0 = 0; i0 < 3; i0++) /* over the last dimension */
        for (int i1 = 0; i1 < 3; i1++) F<m>::W(g + 9 * i0 + 3 * i1, r2[i0][i1]);
      for (int i0 = 0; i0 < 3; i0++) /* the middle one */
        for (int k2 = 0; k2 < a; k2++) {
          for (int i1 = 0; i1 < 3; i1++) in[i1] = r2[i0][i1][k2];
          F<m>::W(in, out);
          for (int k1 = 0; k1 < a; k1++) r1[i0][k1][k2] = out[k1];
        }
      T *u = U + (size_t)co * Ci + ci;
      for (int k1 = 0; k1 < a; k1++) /* the first one */
        for (int k2 = 0; k2 < a; k2++) {
          for (int i0 = 0; i0 < 3; i0++) in[i0] = r1[i0][k1][k2];
          F<m>::W(in, out);
          for (int k0 = 0; k0 < a; k0++) u[((k0 * a + k1) * a + k2) * S] = out[k0];
        }
    }
}

/* dw += the adjoint of WeightTransform3 */
template <int m, class T>
void WeightTransform3Adjoint(const T *dU, PetscInt Co, PetscInt Ci, T *dw)
{
  const int    a = F<m>::a;
  const size_t S = (size_t)Co * (size_t)Ci;
  for (PetscInt co = 0; co < Co; co++)
    for (PetscInt ci = 0; ci < Ci; ci++) {
      const T *u = dU + (size_t)co * Ci + ci;
      T        r1[3][6][6], r2[3][3][6], in[6], out[3];
      for (int k1 = 0; k1 < a; k1++)
        for (int k2 = 0; k2 < a; k2++) {
          for (int k0 = 0; k0 < a; k0++) in[k0] = u[((k0 * a + k1) * a + k2) * S];
          F<m>::WAdj(in, out);
          for (int i0 = 0; i0 < 3; i0++) r1[i0][k1][k2] = out[i0];
        }
      for (int i0 = 0; i0 < 3; i0++)
        for (int k2 = 0; k2 < a; k2++) {
          for (int k1 = 0; k1 < a; k1++) in[k1] = r1[i0][k1][k2];
          F<m>::WAdj(in, out);
          for (int i1 = 0; i1 < 3; i1++) r2[i0][i1][k2] = out[i1];
        }
      T *g = dw + (co * Ci + ci) * 27;
      for (int i0 = 0; i0 < 3; i0++)
        for (int i1 = 0; i1 < 3; i1++) {
          F<m>::WAdj(r2[i0][i1], out);
          for (int i2 = 0; i2 < 3; i2++) g[9 * i0 + 3 * i1 + i2] += out[i2];
        }
    }
}

/* dw += G^T dU G (the adjoint of WeightTransform) */
template <int m, class T>
void WeightTransformAdjoint(const T *dU, PetscInt Co, PetscInt Ci, T *dw)
{
  const int    a = F<m>::a;
  const size_t S = (size_t)Co * (size_t)Ci;
  for (PetscInt co = 0; co < Co; co++)
    for (PetscInt ci = 0; ci < Ci; ci++) {
      const T *u = dU + (size_t)co * Ci + ci;
      T        r[6][3], in[6], out[3]; /* dU G: alpha x 3 */
      for (int k = 0; k < a; k++) {
        for (int l = 0; l < a; l++) in[l] = u[(k * a + l) * S];
        F<m>::WAdj(in, out);
        for (int j = 0; j < 3; j++) r[k][j] = out[j];
      }
      T *g = dw + (co * Ci + ci) * 9;
      for (int j = 0; j < 3; j++) {
        for (int k = 0; k < a; k++) in[k] = r[k][j];
        F<m>::WAdj(in, out);
        for (int i = 0; i < 3; i++) g[3 * i + j] += out[i];
      }
    }
}

/* a row of n entries at p with stride s into the contiguous d, zero from n to len (p NULL: all zero) */
template <class T>
inline void LoadRow(const T *p, PetscInt s, PetscInt n, PetscInt len, T *d)
{
  if (!p) n = 0;
  if (s == 1) std::copy(p, p + n, d);
  else
    for (PetscInt q = 0; q < n; q++) d[q] = p[q * s];
  std::fill(d + n, d + len, (T)0);
}

/* the entry (t, c, tile j) of a chunk's transformed tiles laid out as X[(t C + c) Tc + j] */
template <class T>
inline T *Slot(T *X, PetscInt t, PetscInt C, PetscInt c, PetscInt Tc, PetscInt j)
{
  return X + ((size_t)t * C + c) * Tc + j;
}

/*
  The chunk's tiles into the transformed domain: for tile row r (image i, tile row ta) of the chunk
  and channel c, the L rows m ta .. m ta + L - 1 of v (zero from row `rows` and column `cols` on) go
  through f (L -> alpha entries) over the rows, then over the columns of every tile b, into
  X[(t C + c) Tc + r tw + b], Tc = R tw. Wt: the row buffers' length (L = alpha: m tw + 2).
*/
template <int m, int L, class T, class Fn>
__attribute__((noinline)) void ToDomain(const Tiling &tl, PetscInt n0, const View<const T> &v, PetscInt rows, PetscInt cols, PetscInt Wt, PetscInt C, PetscInt r0, PetscInt R, T *X, Fn f)
{
  const int      a  = F<m>::a;
  const PetscInt tw = tl.tw, Tc = R * tw;
  T             *buf = Scratch<T>(3, (size_t)((L + a) * Wt));
  T             *d[6], *e[6];
  for (int k = 0; k < L; k++) d[k] = buf + k * Wt;
  for (int k = 0; k < a; k++) e[k] = buf + (L + k) * Wt;
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, ta = row % tl.th;
    const T       *img = Image(v, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      const T *base = img + c * v.sc;
      for (int k = 0; k < L; k++) LoadRow(m * ta + k < rows ? base + (m * ta + k) * v.s1 : (const T *)nullptr, v.s2, cols, Wt, d[k]);
      for (PetscInt q = 0; q < Wt; q++) { /* over the rows */
        T in[6], out[6];
        for (int k = 0; k < L; k++) in[k] = d[k][q];
        f(in, out);
        for (int k = 0; k < a; k++) e[k][q] = out[k];
      }
      for (int k = 0; k < a; k++) { /* over the columns */
        T *x[6];
        for (int l = 0; l < a; l++) x[l] = Slot(X, k * a + l, C, c, Tc, r * tw);
        for (PetscInt b = 0; b < tw; b++) {
          T out[6];
          f(e[k] + m * b, out);
          for (int l = 0; l < a; l++) x[l][b] = out[l];
        }
      }
    }
  }
}

/* V = B^T X B of the chunk's tiles: x is the input window (rows < H + 2 and columns < W + 2 read, zero beyond) */
template <int m, class T>
void InputTransform(const Tiling &tl, PetscInt n0, const View<const T> &x, PetscInt C, PetscInt r0, PetscInt R, T *V)
{
  ToDomain<m, F<m>::a>(tl, n0, x, tl.H + 2, tl.W + 2, m * tl.tw + 2, C, r0, R, V, [](const T *in, T *out) { F<m>::In(in, out); });
}

/* dM = A dY A^T of the chunk's tiles, laid out as V (C = Co): the output gradient (zero beyond H x W) */
template <int m, class T>
void OutputTransformAdjoint(const Tiling &tl, PetscInt n0, const View<const T> &dy, PetscInt C, PetscInt r0, PetscInt R, T *dM)
{
  ToDomain<m, m>(tl, n0, dy, tl.H, tl.W, m * tl.tw, C, r0, R, dM, [](const T *in, T *out) { F<m>::OutAdj(in, out); });
}

/* y = A^T M A (+ b) of the chunk's tiles, cropped to H x W (overwrites y) */
template <int m, class T>
__attribute__((noinline)) void OutputTransform(const Tiling &tl, PetscInt n0, T *M, PetscInt C, PetscInt r0, PetscInt R, const T *bias, const View<T> &y)
{
  const int      a = F<m>::a;
  const PetscInt tw = tl.tw, Wt = m * tw, Tc = R * tw;
  T             *buf = Scratch<T>(3, (size_t)(m * Wt + m * a * tw));
  T             *o[4], *sr[4][6]; /* the output rows; A^T M of the tile row, (i, l) for every tile */
  for (int k = 0; k < m; k++) o[k] = buf + k * Wt;
  for (int i2 = 0; i2 < m; i2++)
    for (int l = 0; l < a; l++) sr[i2][l] = buf + m * Wt + (i2 * a + l) * tw;
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, ta = row % tl.th;
    T             *img = Image(y, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      for (int l = 0; l < a; l++) { /* A^T over the rows, every tile at once (contiguous in the tiles: vectorises) */
        const T *mm[6];
        for (int k = 0; k < a; k++) mm[k] = Slot(M, k * a + l, C, c, Tc, r * tw);
        for (PetscInt b = 0; b < tw; b++) {
          T in[6], out[4];
          for (int k = 0; k < a; k++) in[k] = mm[k][b];
          F<m>::Out(in, out);
          for (int i2 = 0; i2 < m; i2++) sr[i2][l][b] = out[i2];
        }
      }
      for (int i2 = 0; i2 < m; i2++) /* A over the columns */
        for (PetscInt b = 0; b < tw; b++) {
          T in[6], out[4];
          for (int l = 0; l < a; l++) in[l] = sr[i2][l][b];
          F<m>::Out(in, out);
          for (int j = 0; j < m; j++) o[i2][m * b + j] = out[j];
        }
      const T bc = bias ? bias[c] : (T)0;
      for (int k = 0; k < m && m * ta + k < tl.H; k++) {
        T *dst = img + c * y.sc + (m * ta + k) * y.s1;
        if (y.s2 == 1)
          for (PetscInt q = 0; q < tl.W; q++) dst[q] = o[k][q] + bc;
        else
          for (PetscInt q = 0; q < tl.W; q++) dst[q * y.s2] = o[k][q] + bc;
      }
    }
  }
}

/* dx += B dV B^T of the chunk's tiles (rows < H + 2 and columns < W + 2 of the window) */
template <int m, class T>
__attribute__((noinline)) void InputTransformAdjoint(const Tiling &tl, PetscInt n0, T *dV, PetscInt C, PetscInt r0, PetscInt R, const View<T> &dx)
{
  const int      a = F<m>::a;
  const PetscInt tw = tl.tw, Wt = m * tw + 2, Tc = R * tw, rowsin = tl.H + 2, colsin = tl.W + 2;
  T             *buf = Scratch<T>(3, (size_t)(a * Wt));
  T             *f[6];
  for (int k = 0; k < a; k++) f[k] = buf + k * Wt;
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, ta = row % tl.th;
    T             *img = Image(dx, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      for (int k = 0; k < a; k++) { /* B over the columns (adjoint of B^T): neighbouring tiles share two columns */
        const T *v[6];
        T       *s = f[k];
        for (int l = 0; l < a; l++) v[l] = Slot(dV, k * a + l, C, c, Tc, r * tw);
        std::fill(s, s + Wt, (T)0);
        for (PetscInt b = 0; b < tw; b++) {
          T in[6], out[6];
          for (int l = 0; l < a; l++) in[l] = v[l][b];
          F<m>::InAdj(in, out);
          for (int j = 0; j < a; j++) s[m * b + j] += out[j];
        }
      }
      T *base = img + c * dx.sc;
      T *dst[6];
      int nrow = 0;
      for (int k = 0; k < a && m * ta + k < rowsin; k++, nrow++) dst[k] = base + (m * ta + k) * dx.s1;
      for (PetscInt q = 0; q < colsin; q++) { /* B over the rows, added into the window */
        T in[6], out[6];
        for (int k = 0; k < a; k++) in[k] = f[k][q];
        F<m>::InAdj(in, out);
        for (int k = 0; k < nrow; k++) dst[k][q * dx.s2] += out[k];
      }
    }
  }
}

/*
  The same three transforms for tiles of m x m x m (3 x 3 x 3 taps): a tile row (image i, tile plane
  tp, tile row ta) covers planes m tp .., rows m ta .. of its image; the transforms run over the
  planes, then the rows (both on contiguous row buffers, every tile of the row at once), then the
  columns of every tile. X[(t C + c) Tc + r tw + b] with t = (k0 a + k1) a + k2.
*/
template <int m, int L, class T, class Fn>
__attribute__((noinline)) void ToDomain3(const Tiling &tl, const View<const T> &v, PetscInt planes, PetscInt rows, PetscInt cols, PetscInt Wt, PetscInt C, PetscInt r0, PetscInt R, T *X, Fn f)
{
  const int      a  = F<m>::a;
  const PetscInt tw = tl.tw, Tc = R * tw;
  T             *buf = Scratch<T>(3, (size_t)((L * L + a * L + a * a) * Wt));
  T             *d[6][6], *e[6][6], *h[6][6]; /* loaded (plane, row); over the planes (k0, row); over the rows (k0, k1) */
  for (int p = 0; p < L; p++)
    for (int q = 0; q < L; q++) d[p][q] = buf + (p * L + q) * Wt;
  for (int k = 0; k < a; k++)
    for (int q = 0; q < L; q++) e[k][q] = buf + (L * L + k * L + q) * Wt;
  for (int k = 0; k < a; k++)
    for (int q = 0; q < a; q++) h[k][q] = buf + (L * L + a * L + k * a + q) * Wt;
  for (PetscInt r = 0; r < R; r++) {
    PetscInt i, tp, ta;
    tl.Where(r0 + r, &i, &tp, &ta);
    const T *img = Image(v, i, tl.n0);
    for (PetscInt c = 0; c < C; c++) {
      const T *base = img + c * v.sc;
      for (int p = 0; p < L; p++)
        for (int q = 0; q < L; q++) {
          const bool in = m * tp + p < planes && m * ta + q < rows;
          LoadRow(in ? base + (m * tp + p) * v.s0 + (m * ta + q) * v.s1 : (const T *)nullptr, v.s2, cols, Wt, d[p][q]);
        }
      for (int q = 0; q < L; q++) /* over the planes */
        for (PetscInt x = 0; x < Wt; x++) {
          T in[6], out[6];
          for (int p = 0; p < L; p++) in[p] = d[p][q][x];
          f(in, out);
          for (int k = 0; k < a; k++) e[k][q][x] = out[k];
        }
      for (int k = 0; k < a; k++) /* over the rows */
        for (PetscInt x = 0; x < Wt; x++) {
          T in[6], out[6];
          for (int q = 0; q < L; q++) in[q] = e[k][q][x];
          f(in, out);
          for (int l = 0; l < a; l++) h[k][l][x] = out[l];
        }
      for (int k = 0; k < a; k++) /* over the columns of every tile */
        for (int l = 0; l < a; l++) {
          T *xs[6];
          for (int n = 0; n < a; n++) xs[n] = Slot(X, (k * a + l) * a + n, C, c, Tc, r * tw);
          for (PetscInt b = 0; b < tw; b++) {
            T out[6];
            f(h[k][l] + m * b, out);
            for (int n = 0; n < a; n++) xs[n][b] = out[n];
          }
        }
    }
  }
}

/* y = A^T M A over the three dimensions (+ b), cropped to D0 x H x W (overwrites y) */
template <int m, class T>
__attribute__((noinline)) void OutputTransform3(const Tiling &tl, T *M, PetscInt C, PetscInt r0, PetscInt R, const T *bias, const View<T> &y)
{
  const int      a = F<m>::a;
  const PetscInt tw = tl.tw, Wt = m * tw, Tc = R * tw;
  T             *buf = Scratch<T>(3, (size_t)(m * a * a * tw + m * m * a * tw + m * m * Wt));
  T             *s1[4][6][6], *s2[4][4][6], *o[4][4];
  for (int i0 = 0; i0 < m; i0++)
    for (int l = 0; l < a; l++)
      for (int n = 0; n < a; n++) s1[i0][l][n] = buf + ((i0 * a + l) * a + n) * tw;
  for (int i0 = 0; i0 < m; i0++)
    for (int i1 = 0; i1 < m; i1++)
      for (int n = 0; n < a; n++) s2[i0][i1][n] = buf + m * a * a * tw + ((i0 * m + i1) * a + n) * tw;
  for (int i0 = 0; i0 < m; i0++)
    for (int i1 = 0; i1 < m; i1++) o[i0][i1] = buf + m * a * a * tw + m * m * a * tw + (i0 * m + i1) * Wt;
  for (PetscInt r = 0; r < R; r++) {
    PetscInt i, tp, ta;
    tl.Where(r0 + r, &i, &tp, &ta);
    T *img = Image(y, i, tl.n0);
    for (PetscInt c = 0; c < C; c++) {
      for (int l = 0; l < a; l++) /* A^T over the planes, every tile at once */
        for (int n = 0; n < a; n++) {
          const T *mm[6];
          for (int k = 0; k < a; k++) mm[k] = Slot(M, (k * a + l) * a + n, C, c, Tc, r * tw);
          for (PetscInt b = 0; b < tw; b++) {
            T in[6], out[4];
            for (int k = 0; k < a; k++) in[k] = mm[k][b];
            F<m>::Out(in, out);
            for (int i0 = 0; i0 < m; i0++) s1[i0][l][n][b] = out[i0];
          }
        }
      for (int i0 = 0; i0 < m; i0++) /* over the rows */
        for (int n = 0; n < a; n++)
          for (PetscInt b = 0; b < tw; b++) {
            T in[6], out[4];
            for (int l = 0; l < a; l++) in[l] = s1[i0][l][n][b];
            F<m>::Out(in, out);
            for (int i1 = 0; i1 < m; i1++) s2[i0][i1][n][b] = out[i1];
          }
      for (int i0 = 0; i0 < m; i0++) /* over the columns */
        for (int i1 = 0; i1 < m; i1++)
          for (PetscInt b = 0; b < tw; b++) {
            T in[6], out[4];
            for (int n = 0; n < a; n++) in[n] = s2[i0][i1][n][b];
            F<m>::Out(in, out);
            for (int j = 0; j < m; j++) o[i0][i1][m * b + j] = out[j];
          }
      const T bc = bias ? bias[c] : (T)0;
      for (int i0 = 0; i0 < m && m * tp + i0 < tl.D0; i0++)
        for (int i1 = 0; i1 < m && m * ta + i1 < tl.H; i1++) {
          T *dst = img + c * y.sc + (m * tp + i0) * y.s0 + (m * ta + i1) * y.s1;
          if (y.s2 == 1)
            for (PetscInt q = 0; q < tl.W; q++) dst[q] = o[i0][i1][q] + bc;
          else
            for (PetscInt q = 0; q < tl.W; q++) dst[q * y.s2] = o[i0][i1][q] + bc;
        }
    }
  }
}

/* dx += B dV B^T over the three dimensions (planes < D0 + 2, rows < H + 2, columns < W + 2 of the window) */
template <int m, class T>
__attribute__((noinline)) void InputTransform3Adjoint(const Tiling &tl, T *dV, PetscInt C, PetscInt r0, PetscInt R, const View<T> &dx)
{
  const int      a = F<m>::a;
  const PetscInt tw = tl.tw, Wt = m * tw + 2, Tc = R * tw, planesin = tl.D0 + 2, rowsin = tl.H + 2, colsin = tl.W + 2;
  T             *buf = Scratch<T>(3, (size_t)(2 * a * a * Wt));
  T             *f[6][6], *g[6][6]; /* over the columns (k0, k1); then over the rows (k0, row) */
  for (int k = 0; k < a; k++)
    for (int l = 0; l < a; l++) {
      f[k][l] = buf + (k * a + l) * Wt;
      g[k][l] = buf + (a * a + k * a + l) * Wt;
    }
  for (PetscInt r = 0; r < R; r++) {
    PetscInt i, tp, ta;
    tl.Where(r0 + r, &i, &tp, &ta);
    T *img = Image(dx, i, tl.n0);
    for (PetscInt c = 0; c < C; c++) {
      for (int k = 0; k < a; k++) /* B over the columns: neighbouring tiles share two columns */
        for (int l = 0; l < a; l++) {
          const T *v[6];
          T       *sr = f[k][l];
          for (int n = 0; n < a; n++) v[n] = Slot(dV, (k * a + l) * a + n, C, c, Tc, r * tw);
          std::fill(sr, sr + Wt, (T)0);
          for (PetscInt b = 0; b < tw; b++) {
            T in[6], out[6];
            for (int n = 0; n < a; n++) in[n] = v[n][b];
            F<m>::InAdj(in, out);
            for (int j = 0; j < a; j++) sr[m * b + j] += out[j];
          }
        }
      for (int k = 0; k < a; k++) /* over the rows */
        for (PetscInt q = 0; q < Wt; q++) {
          T in[6], out[6];
          for (int l = 0; l < a; l++) in[l] = f[k][l][q];
          F<m>::InAdj(in, out);
          for (int j = 0; j < a; j++) g[k][j][q] = out[j];
        }
      T *base = img + c * dx.sc;
      for (int j = 0; j < a && m * ta + j < rowsin; j++) { /* over the planes, added into the window */
        T  *dst[6];
        int np = 0;
        for (int p = 0; p < a && m * tp + p < planesin; p++, np++) dst[p] = base + (m * tp + p) * dx.s0 + (m * ta + j) * dx.s1;
        for (PetscInt q = 0; q < colsin; q++) {
          T in[6], out[6];
          for (int k = 0; k < a; k++) in[k] = g[k][j][q];
          F<m>::InAdj(in, out);
          for (int p = 0; p < np; p++) dst[p][q * dx.s2] += out[p];
        }
      }
    }
  }
}

/* the transforms of one pass for dims 2 (m x m tiles) or 3 (m x m x m) */
template <int m, int dims, class T>
void ToV(const Tiling &tl, const View<const T> &x, PetscInt C, PetscInt r0, PetscInt R, T *V)
{
  if (dims == 2) InputTransform<m>(tl, tl.n0, x, C, r0, R, V);
  else ToDomain3<m, F<m>::a>(tl, x, tl.D0 + 2, tl.H + 2, tl.W + 2, m * tl.tw + 2, C, r0, R, V, [](const T *in, T *out) { F<m>::In(in, out); });
}
template <int m, int dims, class T>
void ToDM(const Tiling &tl, const View<const T> &dy, PetscInt C, PetscInt r0, PetscInt R, T *dM)
{
  if (dims == 2) OutputTransformAdjoint<m>(tl, tl.n0, dy, C, r0, R, dM);
  else ToDomain3<m, m>(tl, dy, tl.D0, tl.H, tl.W, m * tl.tw, C, r0, R, dM, [](const T *in, T *out) { F<m>::OutAdj(in, out); });
}
template <int m, int dims, class T>
void FromM(const Tiling &tl, T *M, PetscInt C, PetscInt r0, PetscInt R, const T *b, const View<T> &y)
{
  if (dims == 2) OutputTransform<m>(tl, tl.n0, M, C, r0, R, b, y);
  else OutputTransform3<m>(tl, M, C, r0, R, b, y);
}
template <int m, int dims, class T>
void FromDV(const Tiling &tl, T *dV, PetscInt C, PetscInt r0, PetscInt R, const View<T> &dx)
{
  if (dims == 2) InputTransformAdjoint<m>(tl, tl.n0, dV, C, r0, R, dx);
  else InputTransform3Adjoint<m>(tl, dV, C, r0, R, dx);
}
template <int m, int dims, class T>
void ToU(const T *w, PetscInt Co, PetscInt Ci, T *U)
{
  if (dims == 2) WeightTransform<m>(w, Co, Ci, U);
  else WeightTransform3<m>(w, Co, Ci, U);
}
template <int m, int dims, class T>
void FromDU(const T *dU, PetscInt Co, PetscInt Ci, T *dw)
{
  if (dims == 2) WeightTransformAdjoint<m>(dU, Co, Ci, dw);
  else WeightTransform3Adjoint<m>(dU, Co, Ci, dw);
}

/* the three passes for tiles of m x m (dims 2) or m x m x m (dims 3) */
template <int m, int dims, class T>
void Forward(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y)
{
  const int    A = dims == 3 ? F<m>::a * F<m>::a * F<m>::a : F<m>::a * F<m>::a;
  const Tiling tl(g, m, dims, g.Ci + g.Co, sizeof(T));
  if (tl.rows == 0 || tl.W == 0 || g.Co == 0) return;
  T *U = Scratch<T>(0, (size_t)(A * g.Co * g.Ci));
  ToU<m, dims>(w, g.Co, g.Ci, U);
  T *V = Scratch<T>(1, (size_t)(A * g.Ci * tl.R * tl.tw)), *M = Scratch<T>(2, (size_t)(A * g.Co * tl.R * tl.tw));
  for (PetscInt r0 = 0; r0 < tl.rows; r0 += tl.R) {
    const PetscInt R = std::min(tl.R, tl.rows - r0), Tc = R * tl.tw;
    ToV<m, dims>(tl, x, g.Ci, r0, R, V);
    for (int t = 0; t < A; t++) {
      T *Mt = M + (size_t)t * g.Co * Tc;
      if (g.Ci == 0) std::fill(Mt, Mt + g.Co * Tc, (T)0);
      else Gemm(CblasNoTrans, CblasNoTrans, g.Co, Tc, g.Ci, U + (size_t)t * g.Co * g.Ci, g.Ci, V + (size_t)t * g.Ci * Tc, Tc, (T)0, Mt, Tc);
    }
    FromM<m, dims>(tl, M, g.Co, r0, R, b, y);
  }
}
template <int m, int dims, class T>
void BackwardData(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx)
{
  const int    A = dims == 3 ? F<m>::a * F<m>::a * F<m>::a : F<m>::a * F<m>::a;
  const Tiling tl(g, m, dims, g.Ci + g.Co, sizeof(T));
  if (tl.rows == 0 || tl.W == 0 || g.Co == 0 || g.Ci == 0) return;
  T *U = Scratch<T>(0, (size_t)(A * g.Co * g.Ci));
  ToU<m, dims>(w, g.Co, g.Ci, U);
  T *dV = Scratch<T>(1, (size_t)(A * g.Ci * tl.R * tl.tw)), *dM = Scratch<T>(2, (size_t)(A * g.Co * tl.R * tl.tw));
  for (PetscInt r0 = 0; r0 < tl.rows; r0 += tl.R) {
    const PetscInt R = std::min(tl.R, tl.rows - r0), Tc = R * tl.tw;
    ToDM<m, dims>(tl, dy, g.Co, r0, R, dM);
    for (int t = 0; t < A; t++) Gemm(CblasTrans, CblasNoTrans, g.Ci, Tc, g.Co, U + (size_t)t * g.Co * g.Ci, g.Ci, dM + (size_t)t * g.Co * Tc, Tc, (T)0, dV + (size_t)t * g.Ci * Tc, Tc);
    FromDV<m, dims>(tl, dV, g.Ci, r0, R, dx);
  }
}
template <int m, int dims, class T>
void BackwardWeights(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db)
{
  const int    A = dims == 3 ? F<m>::a * F<m>::a * F<m>::a : F<m>::a * F<m>::a;
  const Tiling tl(g, m, dims, g.Ci + g.Co, sizeof(T));
  if (tl.rows == 0 || tl.W == 0 || g.Co == 0) return;
  if (db) BiasGradientRef<T>(g, dy, db);
  if (g.Ci == 0) return;
  T *dU = Scratch<T>(0, (size_t)(A * g.Co * g.Ci));
  T *V = Scratch<T>(1, (size_t)(A * g.Ci * tl.R * tl.tw)), *dM = Scratch<T>(2, (size_t)(A * g.Co * tl.R * tl.tw));
  for (PetscInt r0 = 0; r0 < tl.rows; r0 += tl.R) {
    const PetscInt R = std::min(tl.R, tl.rows - r0), Tc = R * tl.tw;
    ToV<m, dims>(tl, x, g.Ci, r0, R, V);
    ToDM<m, dims>(tl, dy, g.Co, r0, R, dM);
    for (int t = 0; t < A; t++) Gemm(CblasNoTrans, CblasTrans, g.Co, g.Ci, Tc, dM + (size_t)t * g.Co * Tc, Tc, V + (size_t)t * g.Ci * Tc, Tc, r0 ? (T)1 : (T)0, dU + (size_t)t * g.Co * g.Ci, g.Ci);
  }
  FromDU<m, dims>(dU, g.Co, g.Ci, dw);
}

/*
  the tile size: F(4x4, 3x3) in float64 on outputs of at least 12 x 12, F(2x2, 3x3) otherwise (float32
  keeps F(2x2, 3x3), whose transforms lose less precision). bench_conv_kernels, float64, F(4x4) / GEMM
  against F(2x2) / GEMM, forward + backward: 8x64x56x56 64 -> 64 0.44 / 0.62, the U-Net's 32 x 32 and
  16 x 16 layers 0.53-0.89 / 0.57-1.05, its 8 x 8 ones 0.97-1.16 / 0.81-0.88 (4 tiles per image)
*/
template <class T>
inline int TileSize(const ConvGeom &g)
{
  return g.k[0] == 1 && sizeof(T) == sizeof(double) && std::min(g.out[1], g.out[2]) >= 12 ? 4 : 2;
}

/* 3 x 3 x 3 taps: F(2x2x2, 3x3x3), 64 GEMMs (F(4x4x4) would take 216 and lose more precision) */
inline bool Taps3(const ConvGeom &g)
{
  return g.k[0] == 3;
}
} // namespace

bool ConvWinogradApplies(const ConvGeom &g)
{
  if (g.D < 2 || g.groups > 1 || g.cig > 0) return false;
  if (!(g.k[0] == 1 || (g.D == 3 && g.k[0] == 3)) || g.k[1] != 3 || g.k[2] != 3) return false;
  for (int j = 0; j < 3; j++)
    if (g.s[j] != 1 || g.d[j] != 1) return false;
  return g.in[0] >= g.out[0] + g.k[0] - 1 && g.in[1] >= g.out[1] + 2 && g.in[2] >= g.out[2] + 2;
}

/*
  The transforms cost about (Ci + Co) per tile and save about (9 m^2 - alpha^2) Ci Co multiply-adds
  per tile against im2col + GEMM. Measured (bench_conv_kernels, float64, 1 thread, AVX2 EPYC, the
  main job's layers at batch 8), Winograd / GEMM forward + backward: 1 -> 16 channels at 32 x 32 3.4
  (F(2x2); taken by GEMM), with F(4x4): 16 -> 16 0.73, 48 -> 16 0.55, and at 16 x 16 16 -> 32 0.89,
  32 -> 32 0.65, 96 -> 32 0.53; with F(2x2) at 8 x 8 32 -> 64 0.88, 64 -> 64 0.81. 3 x 3 x 3 taps,
  F(2x2x2, 3x3x3) (27 x 8 / 64 = 3.4 times fewer multiplications): 1 x 8 x 64^3 8 -> 8 0.77, batch 2
  16 -> 16 at 32^3 0.68, 32 -> 32 at 16^3 0.54, 64 -> 64 at 8^3 0.57 (float32 0.85, 0.74, 0.69,
  0.81), so from 8 channels.
*/
bool ConvWinogradPreferred(const ConvGeom &g)
{
  return ConvWinogradApplies(g) && std::min(g.Ci, g.Co) >= (Taps3(g) ? 8 : 16);
}

/* the kernel's name for -layer_view: the tile size TileSize() takes for g */
template <class T>
const char *ConvWinogradName(const ConvGeom &g)
{
  if (Taps3(g)) return "Winograd F(2x2x2,3x3x3) + GEMM (OpenBLAS)";
  return TileSize<T>(g) == 4 ? "Winograd F(4x4,3x3) + GEMM (OpenBLAS)" : "Winograd F(2x2,3x3) + GEMM (OpenBLAS)";
}

/*@
  ConvForwardWinograd - y = conv(x, w) + b for 3 x 3 taps at unit stride and dilation, by
  Winograd's F(4x4, 3x3) (float64, outputs of at least 12 x 12) or F(2x2, 3x3): the fast equivalent of ConvForwardRef where ConvWinogradApplies().

  Input Parameters:
+ g - the geometry (ConvWinogradApplies(g))
. x - the input window (already padded), any strides
. w - the weights (Co, Ci, 1, 3, 3), C order
- b - the bias (Co), or NULL

  Output Parameter:
. y - the output (N, Co, out), any strides; overwritten

  Level: developer

.seealso: ConvForwardGemm(), ConvBackwardDataWinograd(), ConvBackwardWeightsWinograd()
@*/
template <class T>
void ConvForwardWinograd(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y)
{
  if (Taps3(g)) Forward<2, 3>(g, x, w, b, y);
  else if (TileSize<T>(g) == 4) Forward<4, 2>(g, x, w, b, y);
  else Forward<2, 2>(g, x, w, b, y);
}

/*@
  ConvBackwardDataWinograd - dx += J_x^* dy by Winograd's F(4x4, 3x3) or F(2x2, 3x3) (the exact adjoint of
  ConvForwardWinograd's linear map); the fast equivalent of ConvBackwardDataRef where
  ConvWinogradApplies().

  Input Parameters:
+ g  - the geometry
. dy - the output gradient (N, Co, out), any strides
- w  - the weights (Co, Ci, 1, 3, 3)

  Output Parameter:
. dx - the window's gradient, accumulated into (any strides); entries at rows >= out + 2 or
       columns >= out + 2 of a larger window are not touched

  Level: developer

.seealso: ConvBackwardDataRef(), ConvForwardWinograd()
@*/
template <class T>
void ConvBackwardDataWinograd(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx)
{
  if (Taps3(g)) BackwardData<2, 3>(g, dy, w, dx);
  else if (TileSize<T>(g) == 4) BackwardData<4, 2>(g, dy, w, dx);
  else BackwardData<2, 2>(g, dy, w, dx);
}

/*@
  ConvBackwardWeightsWinograd - dw += J_w^* dy and db += the sums of dy by Winograd's F(4x4, 3x3) or F(2x2, 3x3):
  the transformed gradient dU_t = sum of dM_t V_t^T over all tiles, then dw += G^T dU G; the fast
  equivalent of ConvBackwardWeightsRef where ConvWinogradApplies().

  Input Parameters:
+ g  - the geometry
. x  - the input window, any strides
- dy - the output gradient, any strides

  Output Parameters:
+ dw - the weights' gradient (Co, Ci, 1, 3, 3), accumulated into
- db - the bias' gradient (Co), accumulated into, or NULL

  Level: developer

.seealso: ConvBackwardWeightsRef(), ConvForwardWinograd()
@*/
template <class T>
void ConvBackwardWeightsWinograd(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db)
{
  if (Taps3(g)) BackwardWeights<2, 3>(g, x, dy, dw, db);
  else if (TileSize<T>(g) == 4) BackwardWeights<4, 2>(g, x, dy, dw, db);
  else BackwardWeights<2, 2>(g, x, dy, dw, db);
}

#define DD_CONV_WINOGRAD(T) \
  template const char *ConvWinogradName<T>(const ConvGeom &); \
  template void ConvForwardWinograd<T>(const ConvGeom &, const View<const T> &, const T *, const T *, const View<T> &); \
  template void ConvBackwardDataWinograd<T>(const ConvGeom &, const View<const T> &, const T *, const View<T> &); \
  template void ConvBackwardWeightsWinograd<T>(const ConvGeom &, const View<const T> &, const View<const T> &, T *, T *);
DD_CONV_WINOGRAD(float)
DD_CONV_WINOGRAD(double)
#undef DD_CONV_WINOGRAD
} // namespace ddnn
