/*
  Winograd F(2x2, 3x3) convolution (Lavin and Gray, "Fast algorithms for convolutional neural
  networks", CVPR 2016, sec. 4): the float64 path's 3 x 3 convolutions (and /cpu/blas's float32
  ones), checked against the reference loops (tests/test_08_kernels.cxx).

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
#include <cblas.h>
#include <algorithm>
#include <vector>

namespace ddnn
{
namespace
{
inline void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const float *A, PetscInt lda, const float *B, PetscInt ldb, float beta, float *C, PetscInt ldc)
{
  cblas_sgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}
inline void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const double *A, PetscInt lda, const double *B, PetscInt ldb, double beta, double *C, PetscInt ldc)
{
  cblas_dgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/* thread-local scratch buffer number slot, at least n entries (freed at thread exit) */
template <class T>
T *Scratch(int slot, size_t n)
{
  thread_local std::vector<T> buf[4];
  if (buf[slot].size() < n) {
    buf[slot].clear();
    buf[slot].shrink_to_fit();
    buf[slot].resize(n);
  }
  return buf[slot].data();
}

/* bytes of a chunk's transformed tiles (V and M, or dM and dV): kept within the per-core L2 and L3 share */
const size_t kChunkBytes = 1024 * 1024; /* bench_conv_kernels, U-Net layers: 256 KiB and 4 MiB no better */

/* The tiling of one call */
struct Tiling {
  PetscInt NI, H, W, th, tw, rows, R; /* images, output extents, tiles per column and row, tile rows in all, tile rows per chunk */
  Tiling(const ConvGeom &g, PetscInt width, size_t bytes)
  {
    NI   = g.N * g.out[0];
    H    = g.out[1];
    W    = g.out[2];
    th   = (H + 1) / 2;
    tw   = (W + 1) / 2;
    rows = NI * th;
    R    = std::max<PetscInt>(1, std::min<PetscInt>(rows, (PetscInt)(kChunkBytes / (bytes * (size_t)std::max<PetscInt>(16 * width * tw, 1)))));
  }
};

/* image i of a view: (sample, leading index) */
template <class T>
inline T *Image(const View<T> &v, PetscInt i, PetscInt n0)
{
  return v.p + (i / n0) * v.sn + (i % n0) * v.s0;
}

/* U_t = (G w G^T)_t for every output channel co and input channel ci: U[(t Co + co) Ci + ci] */
template <class T>
void WeightTransform(const T *w, PetscInt Co, PetscInt Ci, T *U)
{
  const size_t S = (size_t)Co * (size_t)Ci;
  for (PetscInt co = 0; co < Co; co++)
    for (PetscInt ci = 0; ci < Ci; ci++) {
      const T *g = w + (co * Ci + ci) * 9;
      T        r[4][3]; /* G g: 4 x 3 */
      for (int j = 0; j < 3; j++) {
        r[0][j] = g[j];
        r[1][j] = (T)0.5 * (g[j] + g[3 + j] + g[6 + j]);
        r[2][j] = (T)0.5 * (g[j] - g[3 + j] + g[6 + j]);
        r[3][j] = g[6 + j];
      }
      T *u = U + (size_t)co * Ci + ci;
      for (int i = 0; i < 4; i++) {
        u[(i * 4 + 0) * S] = r[i][0];
        u[(i * 4 + 1) * S] = (T)0.5 * (r[i][0] + r[i][1] + r[i][2]);
        u[(i * 4 + 2) * S] = (T)0.5 * (r[i][0] - r[i][1] + r[i][2]);
        u[(i * 4 + 3) * S] = r[i][2];
      }
    }
}

/* dw += G^T dU G (the adjoint of WeightTransform) */
template <class T>
void WeightTransformAdjoint(const T *dU, PetscInt Co, PetscInt Ci, T *dw)
{
  const size_t S = (size_t)Co * (size_t)Ci;
  for (PetscInt co = 0; co < Co; co++)
    for (PetscInt ci = 0; ci < Ci; ci++) {
      const T *u = dU + (size_t)co * Ci + ci;
      T        r[4][3]; /* dU G: 4 x 3 */
      for (int i = 0; i < 4; i++) {
        const T u0 = u[(i * 4 + 0) * S], u1 = u[(i * 4 + 1) * S], u2 = u[(i * 4 + 2) * S], u3 = u[(i * 4 + 3) * S];
        r[i][0] = u0 + (T)0.5 * (u1 + u2);
        r[i][1] = (T)0.5 * (u1 - u2);
        r[i][2] = (T)0.5 * (u1 + u2) + u3;
      }
      T *g = dw + (co * Ci + ci) * 9;
      for (int j = 0; j < 3; j++) {
        g[j] += r[0][j] + (T)0.5 * (r[1][j] + r[2][j]);
        g[3 + j] += (T)0.5 * (r[1][j] - r[2][j]);
        g[6 + j] += (T)0.5 * (r[1][j] + r[2][j]) + r[3][j];
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

/*
  V = B^T X B of the chunk's tiles: tile row r (image i, tile row a) of the chunk, channel c and
  tile b go to V[(t C + c) Tc + r tw + b], Tc = R tw. x is the input window (rows < H + 2 and
  columns < W + 2 read, zero beyond).
*/
template <class T>
__attribute__((noinline)) void InputTransform(const Tiling &tl, PetscInt n0, const View<const T> &x, PetscInt C, PetscInt r0, PetscInt R, T *V)
{
  const PetscInt tw = tl.tw, Wt = 2 * tw + 2, Tc = R * tw, rowsin = tl.H + 2, colsin = tl.W + 2;
  T             *buf = Scratch<T>(3, (size_t)(8 * Wt));
  T             *d[4] = {buf, buf + Wt, buf + 2 * Wt, buf + 3 * Wt}, *e[4] = {buf + 4 * Wt, buf + 5 * Wt, buf + 6 * Wt, buf + 7 * Wt};
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, a = row % tl.th;
    const T       *img = Image(x, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      const T *base = img + c * x.sc;
      for (int k = 0; k < 4; k++) LoadRow(2 * a + k < rowsin ? base + (2 * a + k) * x.s1 : (const T *)nullptr, x.s2, colsin, Wt, d[k]);
      for (PetscInt q = 0; q < Wt; q++) { /* B^T over the rows */
        e[0][q] = d[0][q] - d[2][q];
        e[1][q] = d[1][q] + d[2][q];
        e[2][q] = d[2][q] - d[1][q];
        e[3][q] = d[1][q] - d[3][q];
      }
      for (int k = 0; k < 4; k++) { /* B over the columns */
        const T *s  = e[k];
        T       *v0 = V + ((size_t)(k * 4 + 0) * C + c) * Tc + r * tw, *v1 = V + ((size_t)(k * 4 + 1) * C + c) * Tc + r * tw;
        T       *v2 = V + ((size_t)(k * 4 + 2) * C + c) * Tc + r * tw, *v3 = V + ((size_t)(k * 4 + 3) * C + c) * Tc + r * tw;
        for (PetscInt b = 0; b < tw; b++) {
          const T s0 = s[2 * b], s1 = s[2 * b + 1], s2 = s[2 * b + 2], s3 = s[2 * b + 3];
          v0[b] = s0 - s2;
          v1[b] = s1 + s2;
          v2[b] = s2 - s1;
          v3[b] = s1 - s3;
        }
      }
    }
  }
}

/*
  dM = A dY A^T of the chunk's tiles, laid out as V (C = Co): the output gradient's rows 2a, 2a + 1
  (zero beyond H) and columns (zero beyond W)
*/
template <class T>
__attribute__((noinline)) void OutputTransformAdjoint(const Tiling &tl, PetscInt n0, const View<const T> &dy, PetscInt C, PetscInt r0, PetscInt R, T *dM)
{
  const PetscInt tw = tl.tw, Wt = 2 * tw, Tc = R * tw;
  T             *buf = Scratch<T>(3, (size_t)(6 * Wt));
  T             *d[2] = {buf, buf + Wt}, *e[4] = {buf + 2 * Wt, buf + 3 * Wt, buf + 4 * Wt, buf + 5 * Wt};
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, a = row % tl.th;
    const T       *img = Image(dy, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      const T *base = img + c * dy.sc;
      for (int k = 0; k < 2; k++) LoadRow(2 * a + k < tl.H ? base + (2 * a + k) * dy.s1 : (const T *)nullptr, dy.s2, tl.W, Wt, d[k]);
      for (PetscInt q = 0; q < Wt; q++) { /* A over the rows */
        e[0][q] = d[0][q];
        e[1][q] = d[0][q] + d[1][q];
        e[2][q] = d[0][q] - d[1][q];
        e[3][q] = -d[1][q];
      }
      for (int k = 0; k < 4; k++) { /* A^T over the columns */
        const T *s  = e[k];
        T       *m0 = dM + ((size_t)(k * 4 + 0) * C + c) * Tc + r * tw, *m1 = dM + ((size_t)(k * 4 + 1) * C + c) * Tc + r * tw;
        T       *m2 = dM + ((size_t)(k * 4 + 2) * C + c) * Tc + r * tw, *m3 = dM + ((size_t)(k * 4 + 3) * C + c) * Tc + r * tw;
        for (PetscInt b = 0; b < tw; b++) {
          const T s0 = s[2 * b], s1 = s[2 * b + 1];
          m0[b] = s0;
          m1[b] = s0 + s1;
          m2[b] = s0 - s1;
          m3[b] = -s1;
        }
      }
    }
  }
}

/* y = A^T M A (+ b) of the chunk's tiles, cropped to H x W (overwrites y) */
template <class T>
__attribute__((noinline)) void OutputTransform(const Tiling &tl, PetscInt n0, const T *M, PetscInt C, PetscInt r0, PetscInt R, const T *bias, const View<T> &y)
{
  const PetscInt tw = tl.tw, Wt = 2 * tw, Tc = R * tw;
  T             *buf = Scratch<T>(3, (size_t)(2 * Wt));
  T             *o[2] = {buf, buf + Wt};
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, a = row % tl.th;
    T             *img = Image(y, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      const T *m[16];
      for (int t = 0; t < 16; t++) m[t] = M + ((size_t)t * C + c) * Tc + r * tw;
      for (PetscInt b = 0; b < tw; b++) {
        T s[2][4]; /* A^T over the rows */
        for (int j = 0; j < 4; j++) {
          s[0][j] = m[j][b] + m[4 + j][b] + m[8 + j][b];
          s[1][j] = m[4 + j][b] - m[8 + j][b] - m[12 + j][b];
        }
        for (int k = 0; k < 2; k++) { /* A over the columns */
          o[k][2 * b]     = s[k][0] + s[k][1] + s[k][2];
          o[k][2 * b + 1] = s[k][1] - s[k][2] - s[k][3];
        }
      }
      const T bc = bias ? bias[c] : (T)0;
      for (int k = 0; k < 2 && 2 * a + k < tl.H; k++) {
        T *dst = img + c * y.sc + (2 * a + k) * y.s1;
        if (y.s2 == 1)
          for (PetscInt q = 0; q < tl.W; q++) dst[q] = o[k][q] + bc;
        else
          for (PetscInt q = 0; q < tl.W; q++) dst[q * y.s2] = o[k][q] + bc;
      }
    }
  }
}

/* dx += B dV B^T of the chunk's tiles (rows < H + 2 and columns < W + 2 of the window) */
template <class T>
__attribute__((noinline)) void InputTransformAdjoint(const Tiling &tl, PetscInt n0, const T *dV, PetscInt C, PetscInt r0, PetscInt R, const View<T> &dx)
{
  const PetscInt tw = tl.tw, Wt = 2 * tw + 2, Tc = R * tw, rowsin = tl.H + 2, colsin = tl.W + 2;
  T             *buf = Scratch<T>(3, (size_t)(4 * Wt));
  T             *f[4] = {buf, buf + Wt, buf + 2 * Wt, buf + 3 * Wt};
  for (PetscInt r = 0; r < R; r++) {
    const PetscInt row = r0 + r, i = row / tl.th, a = row % tl.th;
    T             *img = Image(dx, i, n0);
    for (PetscInt c = 0; c < C; c++) {
      for (int k = 0; k < 4; k++) { /* B^T over the columns (adjoint of B): tiles overlap by two columns */
        const T *v0 = dV + ((size_t)(k * 4 + 0) * C + c) * Tc + r * tw, *v1 = dV + ((size_t)(k * 4 + 1) * C + c) * Tc + r * tw;
        const T *v2 = dV + ((size_t)(k * 4 + 2) * C + c) * Tc + r * tw, *v3 = dV + ((size_t)(k * 4 + 3) * C + c) * Tc + r * tw;
        T       *s  = f[k];
        s[0] = s[1] = 0;
        for (PetscInt b = 0; b < tw; b++) { /* entries 2b, 2b + 1 are final after tile b; 2b + 2, 2b + 3 are started */
          s[2 * b] += v0[b];
          s[2 * b + 1] += v1[b] - v2[b] + v3[b];
          s[2 * b + 2] = -v0[b] + v1[b] + v2[b];
          s[2 * b + 3] = -v3[b];
        }
      }
      T *base = img + c * dx.sc;
      for (int k = 0; k < 4 && 2 * a + k < rowsin; k++) { /* B over the rows, added into the window */
        T *dst = base + (2 * a + k) * dx.s1;
        auto add = [&](auto &&val) {
          if (dx.s2 == 1)
            for (PetscInt q = 0; q < colsin; q++) dst[q] += val(q);
          else
            for (PetscInt q = 0; q < colsin; q++) dst[q * dx.s2] += val(q);
        };
        if (k == 0) add([&](PetscInt q) { return f[0][q]; });
        else if (k == 1) add([&](PetscInt q) { return f[1][q] - f[2][q] + f[3][q]; });
        else if (k == 2) add([&](PetscInt q) { return -f[0][q] + f[1][q] + f[2][q]; });
        else add([&](PetscInt q) { return -f[3][q]; });
      }
    }
  }
}
} // namespace

bool ConvWinogradApplies(const ConvGeom &g)
{
  if (g.D < 2 || g.groups > 1 || g.cig > 0) return false;
  if (g.k[0] != 1 || g.k[1] != 3 || g.k[2] != 3) return false;
  for (int j = 0; j < 3; j++)
    if (g.s[j] != 1 || g.d[j] != 1) return false;
  return g.in[0] >= g.out[0] && g.in[1] >= g.out[1] + 2 && g.in[2] >= g.out[2] + 2;
}

/*
  The transforms cost about (Ci + Co) per tile and save about 20 Ci Co multiply-adds per tile
  against im2col + GEMM. Measured (bench_conv_kernels, float64, 1 thread, AVX2 EPYC, the main job's
  layers at batch 8), Winograd / GEMM forward + backward: 1 -> 16 channels at 32 x 32 3.4 (taken by
  GEMM), 16 -> 16 0.84-0.93, 16 -> 32 at 16 x 16 0.95-1.05, 32 -> 32 0.77, 32 -> 64 at 8 x 8 0.88,
  64 -> 64 0.81, 96 -> 32 0.57-0.64, 48 -> 16 0.65-0.68.
*/
bool ConvWinogradPreferred(const ConvGeom &g)
{
  return ConvWinogradApplies(g) && std::min(g.Ci, g.Co) >= 16;
}

/*@
  ConvForwardWinograd - y = conv(x, w) + b for 3 x 3 taps at unit stride and dilation, by
  Winograd's F(2x2, 3x3): the fast equivalent of ConvForwardRef where ConvWinogradApplies().

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
  const Tiling tl(g, g.Ci + g.Co, sizeof(T));
  if (tl.rows == 0 || tl.W == 0 || g.Co == 0) return;
  T *U = Scratch<T>(0, (size_t)(16 * g.Co * g.Ci));
  WeightTransform(w, g.Co, g.Ci, U);
  T *V = Scratch<T>(1, (size_t)(16 * g.Ci * tl.R * tl.tw)), *M = Scratch<T>(2, (size_t)(16 * g.Co * tl.R * tl.tw));
  for (PetscInt r0 = 0; r0 < tl.rows; r0 += tl.R) {
    const PetscInt R = std::min(tl.R, tl.rows - r0), Tc = R * tl.tw;
    InputTransform(tl, g.out[0], x, g.Ci, r0, R, V);
    for (int t = 0; t < 16; t++) {
      T *Mt = M + (size_t)t * g.Co * Tc;
      if (g.Ci == 0) std::fill(Mt, Mt + g.Co * Tc, (T)0);
      else Gemm(CblasNoTrans, CblasNoTrans, g.Co, Tc, g.Ci, U + (size_t)t * g.Co * g.Ci, g.Ci, V + (size_t)t * g.Ci * Tc, Tc, (T)0, Mt, Tc);
    }
    OutputTransform(tl, g.out[0], M, g.Co, r0, R, b, y);
  }
}

/*@
  ConvBackwardDataWinograd - dx += J_x^* dy by Winograd's F(2x2, 3x3) (the exact adjoint of
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
  const Tiling tl(g, g.Ci + g.Co, sizeof(T));
  if (tl.rows == 0 || tl.W == 0 || g.Co == 0 || g.Ci == 0) return;
  T *U = Scratch<T>(0, (size_t)(16 * g.Co * g.Ci));
  WeightTransform(w, g.Co, g.Ci, U);
  T *dV = Scratch<T>(1, (size_t)(16 * g.Ci * tl.R * tl.tw)), *dM = Scratch<T>(2, (size_t)(16 * g.Co * tl.R * tl.tw));
  for (PetscInt r0 = 0; r0 < tl.rows; r0 += tl.R) {
    const PetscInt R = std::min(tl.R, tl.rows - r0), Tc = R * tl.tw;
    OutputTransformAdjoint(tl, g.out[0], dy, g.Co, r0, R, dM);
    for (int t = 0; t < 16; t++) Gemm(CblasTrans, CblasNoTrans, g.Ci, Tc, g.Co, U + (size_t)t * g.Co * g.Ci, g.Ci, dM + (size_t)t * g.Co * Tc, Tc, (T)0, dV + (size_t)t * g.Ci * Tc, Tc);
    InputTransformAdjoint(tl, g.out[0], dV, g.Ci, r0, R, dx);
  }
}

/*@
  ConvBackwardWeightsWinograd - dw += J_w^* dy and db += the sums of dy by Winograd's F(2x2, 3x3):
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
  const Tiling tl(g, g.Ci + g.Co, sizeof(T));
  if (tl.rows == 0 || tl.W == 0 || g.Co == 0) return;
  if (db) BiasGradientRef<T>(g, dy, db);
  if (g.Ci == 0) return;
  T *dU = Scratch<T>(0, (size_t)(16 * g.Co * g.Ci));
  T *V = Scratch<T>(1, (size_t)(16 * g.Ci * tl.R * tl.tw)), *dM = Scratch<T>(2, (size_t)(16 * g.Co * tl.R * tl.tw));
  for (PetscInt r0 = 0; r0 < tl.rows; r0 += tl.R) {
    const PetscInt R = std::min(tl.R, tl.rows - r0), Tc = R * tl.tw;
    InputTransform(tl, g.out[0], x, g.Ci, r0, R, V);
    OutputTransformAdjoint(tl, g.out[0], dy, g.Co, r0, R, dM);
    for (int t = 0; t < 16; t++) Gemm(CblasNoTrans, CblasTrans, g.Co, g.Ci, Tc, dM + (size_t)t * g.Co * Tc, Tc, V + (size_t)t * g.Ci * Tc, Tc, r0 ? (T)1 : (T)0, dU + (size_t)t * g.Co * g.Ci, g.Ci);
  }
  WeightTransformAdjoint(dU, g.Co, g.Ci, dw);
}

#define DD_CONV_WINOGRAD(T) \
  template void ConvForwardWinograd<T>(const ConvGeom &, const View<const T> &, const T *, const T *, const View<T> &); \
  template void ConvBackwardDataWinograd<T>(const ConvGeom &, const View<const T> &, const T *, const View<T> &); \
  template void ConvBackwardWeightsWinograd<T>(const ConvGeom &, const View<const T> &, const View<const T> &, T *, T *);
DD_CONV_WINOGRAD(float)
DD_CONV_WINOGRAD(double)
#undef DD_CONV_WINOGRAD
} // namespace ddnn
