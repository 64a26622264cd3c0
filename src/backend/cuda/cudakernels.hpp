/*
  The CUDA kernels of the /gpu/cuda backend behind a plain C++ interface: no PETSc here, so that
  only this header and cudakernels.cu go through nvcc. backend_cuda.cxx turns the cudaError_t
  results into PETSc errors. Every launch is on the default stream (asynchronous to the host;
  cudaMemcpy to or from pageable host memory synchronizes with it).
*/
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace ddnn
{
namespace cuda
{
constexpr int kMaxDim = 8; /* DD_MAX_DIM (static_assert'ed in backend_cuda.cxx) */

/*
  A DDLayout as the vector kernels see it. Choice (documented in backend_cuda.cxx): the layout's
  strides and blocking go to the kernel by value and every thread maps its bulk index (C order over
  the bulk sizes n) to a storage offset itself, as LayoutOffset() does; nothing is precomputed or
  uploaded per layout. Two layouts of the same piece map the same bulk index to matching entries,
  so copy and axpby work between any two storage formats.
*/
struct Layout {
  int     order   = 0;
  int     bdim    = -1, bs = 1;
  bool    contig  = false; /* the bulk is the whole storage, in C order: offset = bulk index */
  int64_t bulk    = 0;
  int64_t n[kMaxDim]      = {0};
  int64_t lo[kMaxDim]     = {0};
  int64_t stride[kMaxDim] = {0};
};

/* element types: 0 float32, 1 float64 (DDDataType) */
cudaError_t Set(int dt, const Layout &L, void *y, double v);
cudaError_t Scale(int dt, const Layout &L, void *y, double a);
cudaError_t Copy(int dt, const Layout &Lx, const void *x, const Layout &Ly, void *y);
cudaError_t Axpby(int dt, double a, const Layout &Lx, const void *x, double b, const Layout &Ly, void *y);

/*
  Packing of runs: run r is src[off[r] .. off[r] + len[r]) and sits at buf[pos[r] ..) (pos: the
  nruns + 1 prefix sums of the lengths, pos[nruns] = total). off and pos are device arrays. Each
  thread moves one buffer entry and finds its run by bisection of pos. Unpack with add uses atomic
  adds, so runs that overlap within one call sum as the host loop does.
*/
cudaError_t Pack(int dt, int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, const void *src, void *buf);
cudaError_t Unpack(int dt, int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, const void *buf, void *dst, bool add);
/* dst[runs] = v (the same run lists as Pack) */
cudaError_t FillRuns(int dt, int64_t nruns, const int64_t *off, const int64_t *pos, int64_t total, void *dst, double v);

/* pointwise activations (type: DDActivationType's values), src/backend/cpu/pointwise.cxx's semantics */
template <class T>
cudaError_t ActForward(int type, T slope, const T *x, T *y, int64_t n);
template <class T>
cudaError_t ActBackward(int type, T slope, const T *x, const T *dy, T *dx, int64_t n);
/* the same over a whole bulk, each tensor in its own layout (one launch; Lx.bulk entries) */
template <class T>
cudaError_t ActForwardLayout(int type, T slope, const Layout &Lx, const T *x, const Layout &Ly, T *y);
template <class T>
cudaError_t ActBackwardLayout(int type, T slope, const Layout &Lx, const T *x, const Layout &Lg, const T *dy, const Layout &Ld, T *dx);

/* the affine layer's helpers: y[r, :] = b (N rows of Fo, leading dimension ldy); db[o] += sum_r dy[r, o] */
template <class T>
cudaError_t FillRows(T *y, int64_t ldy, const T *b, int64_t N, int64_t Fo);
template <class T>
cudaError_t ColumnSumsAdd(const T *dy, int64_t ldy, int64_t N, int64_t Fo, T *db);

/*
  The FFT kernel's truncation (FftKernelSpec in ddnn/private/ddbackendimpl.h): work is the full
  transform (A, Lc, B) and b the kept modes (A, K, B), complex entries as (re, im) pairs of T;
  kept entry q is frequency q (real: the half-spectrum, or q < m) or L - 2 m + q.
  FftGather: b = T work. FftScatter: work = T^* (w b), the Hermitian weights w (1/2 but at k = 0
  and k = L/2) in the real case, 1 otherwise; the entries of work no mode reaches are left as they
  are (the caller zeroes work first).
*/
template <class T>
cudaError_t FftGather(const T *work, T *b, int64_t A, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real);
template <class T>
cudaError_t FftScatter(const T *b, T *work, int64_t A, int64_t Lc, int64_t K, int64_t B, int64_t L, int64_t m, bool real);

/*
  Pooling: the loops of src/backend/reference/pool_ref.cxx (PoolGeom and BoxOffsets in
  ddnn/private/ddbackendimpl.h), one thread per output entry, on device copies of the geometry's
  per-index vectors and of the boxes' separable storage offsets. Max pooling keeps the storage
  offset of each output's maximum (the first of equal ones; NaN wins) in argmax (N C out entries, in
  C order); its backward adds dy there, the average's backward adds dy / div to every tap, both with
  atomic adds (windows overlap where the stride is below the window).
*/
struct PoolArgs {
  int64_t        N = 0, C = 0, out[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  bool           max = true;
  const int64_t *first[3] = {nullptr, nullptr, nullptr}, *ntaps[3] = {nullptr, nullptr, nullptr}, *div[3] = {nullptr, nullptr, nullptr};
  const int64_t *xo[5] = {nullptr, nullptr, nullptr, nullptr, nullptr}, *yo[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
};
template <class T>
cudaError_t PoolForward(const PoolArgs &a, const T *x, T *y, int64_t *argmax);
template <class T>
cudaError_t PoolBackward(const PoolArgs &a, const T *dy, T *dx, const int64_t *argmax);

/*
  Deterministic reductions: every sum below is split into a fixed number of parts that depends only
  on the sizes (never on the device or the launch), each part is reduced by one thread block in a
  fixed order (strided per-thread sums, then a shared-memory tree), and the parts are merged by one
  thread per result in their order. The same inputs give the same bits on every run. Sums
  accumulate in double. `work` is device scratch of at least the doubles the *WorkSize() functions
  say.
*/

/*
  Normalization groups of a piece N x C x S (dimension 0 the sample, 1 the channel, the rest
  spatial, S their product), its bulk in C order (bulk index ((n C + c) S + s)):
    batch norm (batch = true):  group c, G = C groups of N S entries, entry e = n S + s;
    per sample (group norm):    group n C + c, G = N C groups of S entries, entry e = s.
  Layer-norm rows (R rows of M contiguous entries) are the per-sample case with C = 1, S = M.
*/
struct Groups {
  int64_t G = 0, len = 0; /* groups, entries per group */
  int64_t C = 1, S = 1;
  bool    batch = false;
};
/* the device doubles a group reduction needs as scratch */
int64_t GroupWorkSize(const Groups &g);

/*
  src/backend/reference/norm_ref.cxx's normalization on the device; mu, a, b, c, out, sdy, sdyx
  are device arrays of G doubles (per group, as the host kernels index them).
  NormGroupSums: out[g] = (sum over group g of x) / div (mean NULL), or of (x - mean[g])^2 (mean: G doubles).
  NormBackwardSums: sdy[g] = sum dy, sdyx[g] = sum dy (x - mu[g]).
  NormScaleShift: y = a (x - mu) + b, NormBackwardApply: dx = a dy + b (x - mu) + c, in T with
  the per-group values rounded to T first and no fused multiply-add, as the host loops round.
*/
template <class T>
cudaError_t NormGroupSums(const Layout &L, const T *x, const Groups &g, const double *mean, double div, double *work, double *out);
template <class T>
cudaError_t NormBackwardSums(const Layout &Lx, const T *x, const Layout &Ld, const T *dy, const Groups &g, const double *mu, double *work, double *sdy, double *sdyx);
template <class T>
cudaError_t NormScaleShift(const Layout &Lx, const T *x, const Layout &Ly, T *y, const Groups &g, const double *mu, const double *a, const double *b);
template <class T>
cudaError_t NormBackwardApply(const Layout &Lx, const T *x, const Layout &Ld, const T *dy, const Layout &Lo, T *dx, const Groups &g, const double *mu, const double *a, const double *b, const double *c);

/*
  Layer normalization over R rows of M contiguous entries (backend_ref.cxx's LayerNorm* loops),
  in double; mean, rstd, G1, G2, g1, g2 are device arrays of R doubles, w, b, dw, db device arrays of M T.
  LayerNormApply:        y = w (x - mean) rstd + b
  LayerNormRowSums:      g1[r] = sum_i w dy, g2[r] = sum_i w dy xhat  (xhat = (x - mean) rstd)
  LayerNormColumnSums:   dw[i] = sum_r dy xhat, db[i] = sum_r dy (overwritten, rounded to T once)
  LayerNormBackwardApply: dx = rstd (w dy - G1 - xhat G2)
*/
template <class T>
cudaError_t LayerNormApply(int64_t R, int64_t M, const T *x, const double *mean, const double *rstd, const T *w, const T *b, T *y);
template <class T>
cudaError_t LayerNormRowSums(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, double *work, double *g1, double *g2);
int64_t     LayerNormColumnWorkSize(int64_t R, int64_t M);
template <class T>
cudaError_t LayerNormColumnSums(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, double *work, T *dw, T *db);
template <class T>
cudaError_t LayerNormBackwardApply(int64_t R, int64_t M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, const double *G1, const double *G2, T *dx);

/*
  The optimizers' updates (src/backend/cpu/optimizer_kernels.cxx): in double, stored as T, with
  the host loop's operations in its order and no fused multiply-add (the same bits as the host).
*/
struct SGDArgs {
  double lr = 0, momentum = 0, weight_decay = 0;
  bool   nesterov = false, first = false;
};
struct AdamArgs {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, bc1 = 1, bc2 = 1;
  bool   decoupled = false;
};
template <class T>
cudaError_t SGDUpdate(int64_t n, T *p, const T *g, T *buf, const SGDArgs &c);
template <class T>
cudaError_t AdamUpdate(int64_t n, T *p, const T *g, T *m, T *v, const AdamArgs &c);

/*
  Interpolation (src/backend/reference/upsample_ref.cxx; UpsampleGeom and BoxOffsets in
  ddnn/private/ddbackendimpl.h) on device copies of the geometry's per-index sources and weights
  and of the boxes' separable offsets. Forward: one thread per output entry, the reference's
  products in its order (in T, no fused multiply-add: its bits). Backward: one thread per dy entry
  adding its weighted value to its (up to 8) sources with atomic adds (outputs share sources), so
  the sums are the reference's up to the order of the additions.
*/
struct UpsampleArgs {
  int64_t        D = 0, N = 0, C = 0, out[3] = {1, 1, 1};
  bool           linear = false, cinner = false; /* cinner: threads run over channels fastest (channels-last, blocked) */
  const int64_t *i0[3] = {nullptr, nullptr, nullptr}, *i1[3] = {nullptr, nullptr, nullptr};
  const double  *w0[3] = {nullptr, nullptr, nullptr}, *w1[3] = {nullptr, nullptr, nullptr};
  const int64_t *xo[5] = {nullptr, nullptr, nullptr, nullptr, nullptr}, *yo[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
};
template <class T>
cudaError_t UpsampleForward(const UpsampleArgs &a, const T *x, T *y);
template <class T>
cudaError_t UpsampleBackward(const UpsampleArgs &a, const T *dy, T *dx);

/*
  DDTensor's reductions over a layout's bulk, in double (see the determinism note above):
  Dot: out[0] = sum x y. Norms: out = {sum x, sum |x|, sum x^2, max |x|}; a NaN entry makes every
  one of them NaN. out is a device array (1 or 4 doubles).
*/
int64_t     VecReduceWorkSize(int64_t bulk);
cudaError_t Dot(int dt, const Layout &Lx, const void *x, const Layout &Ly, const void *y, double *work, double *out);
cudaError_t Norms(int dt, const Layout &L, const void *x, double *work, double *out);
} // namespace cuda
} // namespace ddnn
