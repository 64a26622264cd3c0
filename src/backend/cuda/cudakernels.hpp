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
} // namespace cuda
} // namespace ddnn
