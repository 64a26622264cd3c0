/*
  /gpu/cuda: the CUDA backend (issue 11, first part). Device memory through a caching pool, the
  vector operations of device memory as CUDA kernels, pointwise activations and the affine layer's
  GEMMs on cuBLAS, the fft primitive's local transforms on cuFFT (FftKernel: batched 1-D plans,
  the mode truncation and the adjoint's zero-padding as kernels), convolution and transposed
  convolution on cuDNN (conv_cudnn.cxx; not in builds without cuDNN), pooling and interpolation as
  CUDA loops of the reference semantics, batch/group and layer normalization and the optimizers'
  updates as CUDA kernels (issue 11 part 1's missing entries), in float32 and float64. It falls
  back to nothing: a kernel it lacks is an error naming the kernel kind, never a host loop on
  device pointers.

  Memory: cudaMalloc behind size-class free lists (powers of two from 256 B to 64 MiB, then
  multiples of 2 MiB); a freed block returns to its list, a failed cudaMalloc releases the cached
  blocks and tries again, and DDFinalize (PetscFinalize) releases everything cached. Never managed
  memory. copy is cudaMemcpy with cudaMemcpyDefault (unified addressing), so that it also moves
  between host and device memory: the tensor's host mirror (DDTensorGetArray() of a device tensor)
  uses it.

  Vector operations: the layout's strides and blocking are passed to the kernels by value and every
  thread maps its bulk index to a storage offset (cudakernels.hpp); pack/unpack upload the runs'
  offsets and prefix sums once per call (into a pooled device buffer).

  Streams: everything runs on the default stream for now (overlap of halo exchange and compute
  comes with device-side communication, issue 11 part 3).

  The GEMM, pointwise, normalization and optimizer entries of the kernel table return nothing (they
  are host-style function pointers); a CUDA or cuBLAS failure inside them (or a PETSc error of the
  device scratch they take from the pool: Guarded()) is kept as a pending error that the next memory
  or vector operation of this backend raises (DDBackendCudaCheckPending_Private()).

  Reductions (normalization statistics, DDTensorDot/Sum/Norm through vec.dot and vec.norms) are
  deterministic: a partition into blocks fixed by the sizes, a fixed tree per block and a fixed-order
  merge, in double (cudakernels.hpp); the same bits on every run, the host's to rounding.

  Device selection: with several devices, rank r of a node uses device r mod count (the node-local
  rank from Open MPI's, MPICH's or Slurm's environment), or the one -dd_cuda_device names.
*/
#include <sys/ddcxx.hpp>
#include <backend/interface/backends.hpp>
#include <backend/cuda/backend_cuda.hpp>
#include <backend/cuda/cudakernels.hpp>
#include <backend/common/loopkernels.hpp>
#include <tensor/layout.hpp>
#include <cublas_v2.h>
#include <cufft.h>
#include <memory>
#include <algorithm>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

using namespace ddnn;

static_assert(cuda::kMaxDim == DD_MAX_DIM, "cudakernels.hpp's kMaxDim must be DD_MAX_DIM");
static_assert(DD_ACT_RELU == 0 && DD_ACT_LEAKYRELU == 1 && DD_ACT_TANH == 2 && DD_ACT_SIGMOID == 3 && DD_ACT_GELU == 4 && DD_ACT_IDENTITY == 5, "cudakernels.cu numbers the activations as DDActivationType");
static_assert(DD_FLOAT32 == 0 && DD_FLOAT64 == 1, "cudakernels.cu numbers the element types as DDDataType");

namespace
{
/* what registration found */
struct DeviceState {
  int         count = 0;
  cudaError_t err   = cudaSuccess;
  int         device = -1;
  bool        selected = false;
  cublasHandle_t blas = nullptr;
  std::string pending; /* first failure inside a void kernel entry */
};
DeviceState &Dev()
{
  static DeviceState s;
  return s;
}

/* the caching pool */
struct Pool {
  std::map<size_t, std::vector<void *>> freelists;
  std::unordered_map<void *, size_t>    live; /* block -> its size class */
  size_t                                cached = 0;
};
Pool &ThePool()
{
  static Pool p;
  return p;
}

size_t SizeClass(size_t n)
{
  const size_t big = (size_t)64 << 20, step = (size_t)2 << 20;
  if (n <= 256) return 256;
  if (n > big) return (n + step - 1) / step * step;
  size_t c = 256;
  while (c < n) c <<= 1;
  return c;
}

#define DDCallCUDA(call) \
  do { \
    cudaError_t _e = (call); \
    PetscCheck(_e == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: %s failed: %s (%s)", #call, cudaGetErrorString(_e), cudaGetErrorName(_e)); \
  } while (0)

void Pend(const char what[], const char msg[])
{
  if (Dev().pending.empty()) Dev().pending = std::string(what) + ": " + msg;
}

PetscErrorCode Select(void)
{
  DeviceState &d = Dev();

  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckDevice_Private());
  if (!d.selected) {
    PetscInt  dev = 0;
    PetscBool flg;
    for (const char *v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (getenv(v)) {
        dev = (PetscInt)atoi(getenv(v)) % d.count;
        break;
      }
    PetscCall(PetscOptionsGetInt(NULL, NULL, "-dd_cuda_device", &dev, &flg));
    PetscCheck(dev >= 0 && dev < d.count, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "-dd_cuda_device %" PetscInt_FMT " is not a device of this node (it has %d)", dev, d.count);
    DDCallCUDA(cudaSetDevice((int)dev));
    d.device   = (int)dev;
    d.selected = true;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ReleaseCached(void)
{
  Pool &p = ThePool();

  PetscFunctionBegin;
  for (auto &fl : p.freelists)
    for (void *b : fl.second) DDCallCUDA(cudaFree(b));
  p.freelists.clear();
  p.cached = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode CudaMalloc(size_t n, void **ptr)
{
  Pool        &p = ThePool();
  const size_t c = SizeClass(n);
  void        *b = nullptr;

  PetscFunctionBegin;
  PetscCall(Select());
  PetscCall(DDBackendCudaCheckPending_Private());
  auto fl = p.freelists.find(c);
  if (fl != p.freelists.end() && !fl->second.empty()) {
    b = fl->second.back();
    fl->second.pop_back();
    p.cached -= c;
  } else {
    cudaError_t e = cudaMalloc(&b, c);
    if (e == cudaErrorMemoryAllocation && p.cached) {
      (void)cudaGetLastError();
      PetscCall(ReleaseCached());
      e = cudaMalloc(&b, c);
    }
    PetscCheck(e == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_MEM, "/gpu/cuda: cudaMalloc of %zu bytes failed: %s", c, cudaGetErrorString(e));
  }
  p.live[b] = c;
  DDCallCUDA(cudaMemset(b, 0, n));
  *ptr = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode CudaFree(void *b)
{
  Pool &p = ThePool();

  PetscFunctionBegin;
  if (!b) PetscFunctionReturn(PETSC_SUCCESS);
  auto it = p.live.find(b);
  PetscCheck(it != p.live.end(), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "/gpu/cuda: freeing %p, which is not a block of the device pool", b);
  p.freelists[it->second].push_back(b);
  p.cached += it->second;
  p.live.erase(it);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode CudaCopy(void *d, const void *s, size_t n)
{
  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  if (n) DDCallCUDA(cudaMemcpy(d, s, n, cudaMemcpyDefault));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode CudaSet(void *d, int v, size_t n)
{
  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  if (n) DDCallCUDA(cudaMemset(d, v, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* page-locked host memory: the exchange engine's staging buffers (device -> host -> MPI -> host -> device) */
PetscErrorCode CudaHostMalloc(size_t n, void **ptr)
{
  PetscFunctionBegin;
  PetscCall(Select());
  DDCallCUDA(cudaMallocHost(ptr, n ? n : 1));
  memset(*ptr, 0, n);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode CudaHostFree(void *p)
{
  PetscFunctionBegin;
  if (p) DDCallCUDA(cudaFreeHost(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode CudaFinalize(void)
{
  DeviceState &d = Dev();

  PetscFunctionBegin;
  if (d.blas) {
    (void)cublasDestroy(d.blas);
    d.blas = nullptr;
  }
  if (d.count > 0) PetscCall(ReleaseCached());
  d.pending.clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* vector operations                                                                           */
/* flat: the bulk is the whole storage and an operation may walk it in storage order (one layout, or two of the same storage) */
cuda::Layout Lay(const DDLayout *L, bool flat)
{
  cuda::Layout c;
  c.order  = (int)L->order;
  c.bdim   = (int)L->bdim;
  c.bs     = (int)(L->bs > 0 ? L->bs : 1);
  c.bulk   = L->bulksize;
  c.contig = LayoutBulkIsContiguous(*L) && L->bdim < 0; /* bulk = storage; strided formats: C order only */
  for (PetscInt k = 0; k < L->order; k++) {
    c.n[k]      = L->n[k];
    c.lo[k]     = L->lo[k];
    c.stride[k] = L->stride[k];
    if (L->perm[k] != k) c.contig = false;
  }
  if (flat && LayoutBulkIsContiguous(*L)) c.contig = true;
  return c;
}

#define DDCallKernel(call, what) \
  do { \
    cudaError_t _e = (call); \
    PetscCheck(_e == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: the %s kernel failed: %s", what, cudaGetErrorString(_e)); \
  } while (0)

PetscErrorCode VSet(DDDataType dt, const DDLayout *L, void *y, PetscReal v)
{
  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  DDCallKernel(cuda::Set((int)dt, Lay(L, true), y, (double)v), "set");
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode VScale(DDDataType dt, const DDLayout *L, void *y, PetscReal a)
{
  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  DDCallKernel(cuda::Scale((int)dt, Lay(L, true), y, (double)a), "scale");
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode VCopy(DDDataType dt, const DDLayout *Lx, const void *x, const DDLayout *Ly, void *y)
{
  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  PetscCheck(Lx->bulksize == Ly->bulksize, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda copy: bulks of %" PetscInt_FMT " and %" PetscInt_FMT " entries", Lx->bulksize, Ly->bulksize);
  const bool same = LayoutSameStorage(*Lx, *Ly);
  DDCallKernel(cuda::Copy((int)dt, Lay(Lx, same), x, Lay(Ly, same), y), "copy");
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode VAxpby(DDDataType dt, PetscReal a, const DDLayout *Lx, const void *x, PetscReal b, const DDLayout *Ly, void *y)
{
  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  PetscCheck(Lx->bulksize == Ly->bulksize, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda axpby: bulks of %" PetscInt_FMT " and %" PetscInt_FMT " entries", Lx->bulksize, Ly->bulksize);
  const bool same = LayoutSameStorage(*Lx, *Ly);
  DDCallKernel(cuda::Axpby((int)dt, (double)a, Lay(Lx, same), x, (double)b, Lay(Ly, same), y), "axpby");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the runs as device arrays off[nruns], pos[nruns + 1], in one pooled block (freed by the caller) */
PetscErrorCode UploadRuns(size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, void **blk, const int64_t **doff, const int64_t **dpos)
{
  std::vector<int64_t> h(2 * n + 1);
  int64_t              s = 0;

  PetscFunctionBegin;
  for (size_t r = 0; r < n; r++) {
    h[r]     = off[r];
    h[n + r] = s;
    s += len[r];
  }
  h[2 * n] = s;
  PetscCheck(s == total, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda pack: the runs hold %" PetscInt64_FMT " entries, not %" PetscInt_FMT, (PetscInt64)s, total);
  PetscCall(CudaMalloc(h.size() * sizeof(int64_t), blk));
  DDCallCUDA(cudaMemcpy(*blk, h.data(), h.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  *doff = (const int64_t *)*blk;
  *dpos = *doff + n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode VPack(DDDataType dt, size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, const void *src, void *buf)
{
  void          *blk;
  const int64_t *doff, *dpos;

  PetscFunctionBegin;
  if (!n || !total) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(UploadRuns(n, off, len, total, &blk, &doff, &dpos));
  DDCallKernel(cuda::Pack((int)dt, (int64_t)n, doff, dpos, total, src, buf), "pack");
  PetscCall(CudaFree(blk)); /* stream order: a later use of the block runs after the kernel */
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode VUnpack(DDDataType dt, size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, const void *buf, void *dst, PetscBool add)
{
  void          *blk;
  const int64_t *doff, *dpos;

  PetscFunctionBegin;
  if (!n || !total) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(UploadRuns(n, off, len, total, &blk, &doff, &dpos));
  DDCallKernel(cuda::Unpack((int)dt, (int64_t)n, doff, dpos, total, buf, dst, add ? true : false), "unpack");
  PetscCall(CudaFree(blk));
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode VFill(DDDataType dt, size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, void *dst, PetscReal v)
{
  void          *blk;
  const int64_t *doff, *dpos;

  PetscFunctionBegin;
  if (!n || !total) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(UploadRuns(n, off, len, total, &blk, &doff, &dpos));
  DDCallKernel(cuda::FillRuns((int)dt, (int64_t)n, doff, dpos, total, dst, (double)v), "fill");
  PetscCall(CudaFree(blk));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* prepared run lists: off and the prefix sums in one pooled device block, uploaded once */
struct DevRuns {
  void          *blk = nullptr;
  const int64_t *off = nullptr, *pos = nullptr;
  int64_t        n = 0, total = 0;
};

PetscErrorCode VRunsPrepare(size_t n, const PetscInt off[], const PetscInt len[], PetscInt total, void **runs)
{
  auto *r = new DevRuns;

  PetscFunctionBegin;
  r->n     = (int64_t)n;
  r->total = total;
  if (n && total) {
    PetscErrorCode ierr = UploadRuns(n, off, len, total, &r->blk, &r->off, &r->pos);
    if (ierr) delete r;
    PetscCall(ierr);
  }
  *runs = r;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode VRunsFree(void *runs)
{
  auto *r = (DevRuns *)runs;

  PetscFunctionBegin;
  if (!r) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(CudaFree(r->blk));
  delete r;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode VPackP(DDDataType dt, const void *runs, const void *src, void *buf)
{
  auto *r = (const DevRuns *)runs;

  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  if (r->n && r->total) DDCallKernel(cuda::Pack((int)dt, r->n, r->off, r->pos, r->total, src, buf), "pack");
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode VUnpackP(DDDataType dt, const void *runs, const void *buf, void *dst, PetscBool add)
{
  auto *r = (const DevRuns *)runs;

  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  if (r->n && r->total) DDCallKernel(cuda::Unpack((int)dt, r->n, r->off, r->pos, r->total, buf, dst, add ? true : false), "unpack");
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode VFillP(DDDataType dt, const void *runs, void *dst, PetscReal v)
{
  auto *r = (const DevRuns *)runs;

  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  if (r->n && r->total) DDCallKernel(cuda::FillRuns((int)dt, r->n, r->off, r->pos, r->total, dst, (double)v), "fill");
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* kernel table entries (host-style signatures, device pointers)                               */
template <class T>
void ActFwd(DDActivationType type, const ActParams<T> &p, const T *x, T *y, PetscInt n)
{
  /* the device kernels have relu, leaky relu, tanh, sigmoid, exact gelu and the identity; the others are an error, not a silent wrong result */
  if (type > DD_ACT_IDENTITY || p.gelutanh) {
    Pend("the pointwise forward kernel", "this activation (silu, elu, softplus, prelu, tanh-approximated gelu) has no CUDA kernel yet");
    return;
  }
  cudaError_t e = cuda::ActForward<T>((int)type, p.slope, x, y, n);
  if (e != cudaSuccess) Pend("the pointwise forward kernel", cudaGetErrorString(e));
}
template <class T>
void ActFwdBulk(DDActivationType type, const ActParams<T> &p, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y)
{
  if (type > DD_ACT_IDENTITY || p.gelutanh) {
    Pend("the pointwise forward kernel", "this activation (silu, elu, softplus, prelu, tanh-approximated gelu) has no CUDA kernel yet");
    return;
  }
  if (type == DD_ACT_IDENTITY && x == y && LayoutSameStorage(Lx, Ly)) return;
  const bool  same = LayoutSameStorage(Lx, Ly);
  cudaError_t e    = cuda::ActForwardLayout<T>((int)type, p.slope, Lay(&Lx, same), x, Lay(&Ly, same), y);
  if (e != cudaSuccess) Pend("the pointwise forward kernel", cudaGetErrorString(e));
}
template <class T>
void ActBwdBulk(DDActivationType type, const ActParams<T> &p, const DDLayout &Lx, const T *x, const DDLayout &Lg, const T *dy, const DDLayout &Ld, T *dx)
{
  if (type > DD_ACT_IDENTITY || p.gelutanh) {
    Pend("the pointwise backward kernel", "this activation (silu, elu, softplus, prelu, tanh-approximated gelu) has no CUDA kernel yet");
    return;
  }
  const bool  same = LayoutSameStorage(Lx, Lg) && LayoutSameStorage(Lx, Ld);
  cudaError_t e    = cuda::ActBackwardLayout<T>((int)type, p.slope, Lay(&Lx, same), x, Lay(&Lg, same), dy, Lay(&Ld, same), dx);
  if (e != cudaSuccess) Pend("the pointwise backward kernel", cudaGetErrorString(e));
}
template <class T>
void ActBwd(DDActivationType type, const ActParams<T> &p, const T *x, const T *dy, T *dx, PetscInt n)
{
  if (type > DD_ACT_IDENTITY || p.gelutanh) {
    Pend("the pointwise backward kernel", "this activation (silu, elu, softplus, prelu, tanh-approximated gelu) has no CUDA kernel yet");
    return;
  }
  cudaError_t e = cuda::ActBackward<T>((int)type, p.slope, x, dy, dx, n);
  if (e != cudaSuccess) Pend("the pointwise backward kernel", cudaGetErrorString(e));
}

bool Blas(cublasHandle_t *h)
{
  DeviceState &d = Dev();
  if (!d.blas) {
    cublasStatus_t s = cublasCreate(&d.blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
      d.blas = nullptr;
      Pend("cublasCreate", cublasGetStatusString(s));
      return false;
    }
  }
  *h = d.blas;
  return true;
}

inline cublasStatus_t Gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *al, const float *A, int lda, const float *B, int ldb, const float *be, float *C, int ldc)
{
  return cublasSgemm(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
}
inline cublasStatus_t Gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double *al, const double *A, int lda, const double *B, int ldb, const double *be, double *C, int ldc)
{
  return cublasDgemm(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
}

/*
  Row-major products through column-major cuBLAS: a row-major M (r x c, ld) is the column-major
  M^T (c x r, ld). Y = X W^T + b:  Y^T (Fo x N) = W (Fi x Fo)^T X^T (Fi x N).
*/
template <class T>
void AffFwd(const AffineGeom &g, const T *x, PetscInt ldx, const T *w, PetscInt ldw, const T *b, T *y, PetscInt ldy)
{
  cublasHandle_t h;
  const T        one = 1, zero = 0;
  if (g.N <= 0 || g.Fo <= 0 || !Blas(&h)) return;
  if (b) {
    cudaError_t e = cuda::FillRows<T>(y, ldy, b, g.N, g.Fo);
    if (e != cudaSuccess) return Pend("the affine bias kernel", cudaGetErrorString(e));
  }
  if (g.Fi <= 0) {
    if (!b) {
      cudaError_t e = cudaMemset2D(y, sizeof(T) * ldy, 0, sizeof(T) * g.Fo, g.N);
      if (e != cudaSuccess) Pend("the affine forward (Fi = 0)", cudaGetErrorString(e));
    }
    return;
  }
  cublasStatus_t s = Gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)g.Fo, (int)g.N, (int)g.Fi, &one, w, (int)ldw, x, (int)ldx, b ? &one : &zero, y, (int)ldy);
  if (s != CUBLAS_STATUS_SUCCESS) Pend("cuBLAS gemm (affine forward)", cublasGetStatusString(s));
}
/* dX = dY W:  dX^T (Fi x N) = W^T (Fi x Fo) dY^T (Fo x N) */
template <class T>
void AffBwdData(const AffineGeom &g, const T *dy, PetscInt ldy, const T *w, PetscInt ldw, T *dx, PetscInt ldx)
{
  cublasHandle_t h;
  const T        one = 1, zero = 0;
  if (g.N <= 0 || g.Fi <= 0 || !Blas(&h)) return;
  if (g.Fo <= 0) {
    cudaError_t e = cudaMemset2D(dx, sizeof(T) * ldx, 0, sizeof(T) * g.Fi, g.N);
    if (e != cudaSuccess) Pend("the affine backward data (Fo = 0)", cudaGetErrorString(e));
    return;
  }
  cublasStatus_t s = Gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)g.Fi, (int)g.N, (int)g.Fo, &one, w, (int)ldw, dy, (int)ldy, &zero, dx, (int)ldx);
  if (s != CUBLAS_STATUS_SUCCESS) Pend("cuBLAS gemm (affine backward data)", cublasGetStatusString(s));
}
/* dW += dY^T X:  dW^T (Fi x Fo) += X^T (Fi x N) dY (N x Fo); db += column sums of dY */
template <class T>
void AffBwdWeights(const AffineGeom &g, const T *x, PetscInt ldx, const T *dy, PetscInt ldy, T *dw, PetscInt ldw, T *db)
{
  cublasHandle_t h;
  const T        one = 1;
  if (g.N <= 0 || g.Fo <= 0 || !Blas(&h)) return;
  if (g.Fi > 0) {
    cublasStatus_t s = Gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)g.Fi, (int)g.Fo, (int)g.N, &one, x, (int)ldx, dy, (int)ldy, &one, dw, (int)ldw);
    if (s != CUBLAS_STATUS_SUCCESS) return Pend("cuBLAS gemm (affine backward weights)", cublasGetStatusString(s));
  }
  if (db) {
    cudaError_t e = cuda::ColumnSumsAdd<T>(dy, ldy, g.N, g.Fo, db);
    if (e != cudaSuccess) Pend("the affine bias gradient kernel", cudaGetErrorString(e));
  }
}

/* ------------------------------------------------------------------------------------------
   FFT: the local transforms of a stage of the fft primitive on cuFFT (FftKernelSpec in
   ddnn/private/ddbackendimpl.h; the FNO's truncated FFT, Li et al. 2021), the same map as the
   FFTW kernel of /cpu/ref: b = T F a, and its exact adjoint a = F^* T^* b
------------------------------------------------------------------------------------------ */
#define DDCallCUFFT(call) \
  do { \
    cufftResult r_ = (call); \
    PetscCheck(r_ == CUFFT_SUCCESS, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: %s failed (cufftResult %d)", #call, (int)r_); \
  } while (0)

template <class T>
struct Cufft;
template <>
struct Cufft<float> {
  static constexpr cufftType R2C = CUFFT_R2C, C2R = CUFFT_C2R, C2C = CUFFT_C2C;
  static cufftResult ExecR2C(cufftHandle p, const float *in, float *out) { return cufftExecR2C(p, (cufftReal *)in, (cufftComplex *)out); }
  static cufftResult ExecC2R(cufftHandle p, float *in, float *out) { return cufftExecC2R(p, (cufftComplex *)in, (cufftReal *)out); }
  static cufftResult ExecC2C(cufftHandle p, const float *in, float *out, int dir) { return cufftExecC2C(p, (cufftComplex *)in, (cufftComplex *)out, dir); }
};
template <>
struct Cufft<double> {
  static constexpr cufftType R2C = CUFFT_D2Z, C2R = CUFFT_Z2D, C2C = CUFFT_Z2Z;
  static cufftResult ExecR2C(cufftHandle p, const double *in, double *out) { return cufftExecD2Z(p, (cufftDoubleReal *)in, (cufftDoubleComplex *)out); }
  static cufftResult ExecC2R(cufftHandle p, double *in, double *out) { return cufftExecZ2D(p, (cufftDoubleComplex *)in, (cufftDoubleReal *)out); }
  static cufftResult ExecC2C(cufftHandle p, const double *in, double *out, int dir) { return cufftExecZ2Z(p, (cufftDoubleComplex *)in, (cufftDoubleComplex *)out, dir); }
};

template <class T>
class CufftKernel : public FftKernel
{
public:
  FftKernelSpec s;
  PetscInt      Lc    = 0;
  cufftHandle   fwd   = 0, adj = 0; /* complex stages: fwd runs both directions */
  bool          hfwd  = false, hadj = false;
  PetscInt      loops = 1, step = 0; /* complex stages: executions of the plan, complex entries between them */
  T            *work  = nullptr;     /* the full transform (A, Lc, B) complex */

  ~CufftKernel() override
  {
    if (hfwd) (void)cufftDestroy(fwd);
    if (hadj) (void)cufftDestroy(adj);
    if (work) (void)CudaFree(work);
  }
  const char *Name() const override { return "cufft"; }

  /*
    Plans (cufftPlanMany, advanced layout): real stages one r2c and one c2r plan over A rows; complex
    stages one plan along L (stride B), batched over the larger of A and B and executed once per
    entry of the smaller (once when B = 1).
  */
  PetscErrorCode SetUp(const FftKernelSpec &spec)
  {
    PetscFunctionBegin;
    s  = spec;
    Lc = s.real ? s.L / 2 + 1 : s.L;
    PetscCheck(s.A * s.L * s.B <= (PetscInt)INT_MAX && s.A * Lc * s.B <= (PetscInt)INT_MAX, PETSC_COMM_SELF, PETSC_ERR_SUP, "/gpu/cuda: a stage of %" PetscInt_FMT " x %" PetscInt_FMT " x %" PetscInt_FMT " entries is beyond cuFFT's 32-bit plans", s.A, s.L, s.B);
    PetscCall(CudaMalloc(sizeof(T) * 2 * (size_t)(s.A * Lc * s.B), (void **)&work));
    int n[1] = {(int)s.L}, nr[1] = {(int)s.L}, nc[1] = {(int)Lc};
    if (s.real) {
      DDCallCUFFT(cufftPlanMany(&fwd, 1, n, nr, 1, (int)s.L, nc, 1, (int)Lc, Cufft<T>::R2C, (int)s.A));
      hfwd = true;
      DDCallCUFFT(cufftPlanMany(&adj, 1, n, nc, 1, (int)Lc, nr, 1, (int)s.L, Cufft<T>::C2R, (int)s.A));
      hadj = true;
    } else {
      int stride, dist, batch;
      if (s.B == 1) {
        stride = 1, dist = (int)s.L, batch = (int)s.A;
      } else if (s.A <= s.B) { /* A executions of B interleaved transforms */
        stride = (int)s.B, dist = 1, batch = (int)s.B;
        loops = s.A, step = s.L * s.B;
      } else { /* B executions of A transforms L B apart */
        stride = (int)s.B, dist = (int)(s.L * s.B), batch = (int)s.A;
        loops = s.B, step = 1;
      }
      DDCallCUFFT(cufftPlanMany(&fwd, 1, n, nr, stride, dist, nr, stride, dist, Cufft<T>::C2C, batch));
      hfwd = true;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Forward(const void *a, void *b) override
  {
    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    if (s.real) DDCallCUFFT(Cufft<T>::ExecR2C(fwd, (const T *)a, work));
    else
      for (PetscInt l = 0; l < loops; l++) DDCallCUFFT(Cufft<T>::ExecC2C(fwd, (const T *)a + 2 * l * step, work + 2 * l * step, CUFFT_FORWARD));
    DDCallCUDA(cuda::FftGather<T>(work, (T *)b, s.A, Lc, s.K, s.B, s.L, s.m, s.real));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Adjoint(const void *b, void *a) override
  {
    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    DDCallCUDA(cudaMemset(work, 0, sizeof(T) * 2 * (size_t)(s.A * Lc * s.B)));
    DDCallCUDA(cuda::FftScatter<T>((const T *)b, work, s.A, Lc, s.K, s.B, s.L, s.m, s.real));
    if (s.real) DDCallCUFFT(Cufft<T>::ExecC2R(adj, work, (T *)a));
    else
      for (PetscInt l = 0; l < loops; l++) DDCallCUFFT(Cufft<T>::ExecC2C(fwd, work + 2 * l * step, (T *)a + 2 * l * step, CUFFT_INVERSE));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};

/* a kernel factory of the table: a K set up for spec */
template <class K, class Spec, class Base>
PetscErrorCode CudaKernelCreate(const Spec &spec, std::unique_ptr<Base> *k)
{
  PetscFunctionBegin;
  auto f = std::make_unique<K>();
  PetscCall(f->SetUp(spec));
  *k = std::move(f);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------
   Pooling: the reference loops' semantics (PoolGeom: per output index its first tap, number of
   taps and divisor, built by the layer) on the device, any storage format (BoxOffsets); the
   geometry and the offsets are uploaded once at set-up
------------------------------------------------------------------------------------------ */
template <class T>
class CudaPoolKernel : public PoolKernel
{
public:
  ~CudaPoolKernel() override
  {
    if (args) (void)CudaFree(args);
    if (argmax) (void)CudaFree(argmax);
  }
  const char *Name() const override { return "CUDA pooling loops"; }

  PetscErrorCode SetUp(const PoolKernelSpec &s)
  {
    BoxOffsets xo, yo;
    const PoolGeom &g = s.g;

    PetscFunctionBegin;
    backend = DDBackendLookup_Private("/gpu/cuda");
    BoxOffsetsBuild(s.x.t->layout, s.D, s.x.org, s.xn, &xo);
    BoxOffsetsBuild(s.y.t->layout, s.D, s.y.org, s.yn, &yo);
    a.N = g.N, a.C = g.C, a.max = g.max;
    for (int j = 0; j < 3; j++) a.out[j] = g.out[j], a.d[j] = g.d[j];
    /* one device array: first[3], ntaps[3], div[3], xo.t[5], yo.t[5] */
    std::vector<const std::vector<PetscInt> *> parts;
    for (int j = 0; j < 3; j++) parts.push_back(&g.first[j]);
    for (int j = 0; j < 3; j++) parts.push_back(&g.ntaps[j]);
    for (int j = 0; j < 3; j++) parts.push_back(&g.div[j]);
    for (int j = 0; j < 5; j++) parts.push_back(&xo.t[j]);
    for (int j = 0; j < 5; j++) parts.push_back(&yo.t[j]);
    std::vector<int64_t> host;
    std::vector<size_t>  at;
    for (const std::vector<PetscInt> *v : parts) {
      at.push_back(host.size());
      host.insert(host.end(), v->begin(), v->end());
    }
    if (!host.empty()) {
      PetscCall(CudaMalloc(sizeof(int64_t) * host.size(), &args));
      PetscCall(CudaCopy(args, host.data(), sizeof(int64_t) * host.size()));
    }
    const int64_t *d = (const int64_t *)args;
    for (int j = 0; j < 3; j++) a.first[j] = d + at[j], a.ntaps[j] = d + at[3 + j], a.div[j] = d + at[6 + j];
    for (int j = 0; j < 5; j++) a.xo[j] = d + at[9 + j], a.yo[j] = d + at[14 + j];
    const int64_t total = a.N * a.C * a.out[0] * a.out[1] * a.out[2];
    if (g.max && total > 0) PetscCall(CudaMalloc(sizeof(int64_t) * (size_t)total, &argmax));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Forward(DDTensor x, DDTensor y, bool) override
  {
    KernelEvent e(backend, DD_KERNEL_POOL);
    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    DDCallKernel(cuda::PoolForward<T>(a, (const T *)x->array, (T *)y->array, (int64_t *)argmax), "pooling forward");
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Backward(DDTensor dy, DDTensor dx) override
  {
    KernelEvent e(backend, DD_KERNEL_POOL);
    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    DDCallKernel(cuda::PoolBackward<T>(a, (const T *)dy->array, (T *)dx->array, (const int64_t *)argmax), "pooling backward");
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  cuda::PoolArgs a;
  void          *args = nullptr, *argmax = nullptr;
  DDBackend      backend = nullptr;
};

/* ------------------------------------------------------------------------------------------
   Entries that need device scratch or move per-channel values between host and device
------------------------------------------------------------------------------------------ */
/* a pooled device block of doubles, returned to the pool when it goes out of scope (stream order
   keeps a later user of the block behind the kernels that read it) */
struct Scratch {
  double *d = nullptr;
  ~Scratch()
  {
    if (d) (void)CudaFree(d);
  }
  PetscErrorCode Alloc(int64_t n) { return CudaMalloc(sizeof(double) * (size_t)(n > 0 ? n : 1), (void **)&d); }
};

/* n doubles from the host to the device and back (cudaMemcpy with pageable host memory: synchronous) */
PetscErrorCode ToDevice(double *d, const double *h, int64_t n)
{
  PetscFunctionBegin;
  if (n > 0) DDCallCUDA(cudaMemcpy(d, h, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice));
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode ToHost(double *h, const double *d, int64_t n)
{
  PetscFunctionBegin;
  if (n > 0) DDCallCUDA(cudaMemcpy(h, d, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Runs f, a PetscErrorCode function, for a kernel entry that returns nothing: a PETSc error (with
  its message, printed nowhere) or a C++ exception becomes the pending failure that the next checked
  operation raises. After an earlier failure the entry does nothing (its inputs may be garbage).
*/
template <class F>
void Guarded(const char what[], F &&f)
{
  if (!Dev().pending.empty()) return;
  PetscErrorCode ierr = PETSC_SUCCESS;
  std::string    exc;
  (void)PetscPushErrorHandler(PetscReturnErrorHandler, nullptr);
  try {
    ierr = f();
  } catch (const std::exception &e) {
    exc = e.what();
  }
  (void)PetscPopErrorHandler();
  if (!exc.empty()) return Pend(what, exc.c_str());
  if (ierr) {
    const char *text = nullptr;
    char       *spec = nullptr;
    (void)PetscErrorMessage(ierr, &text, &spec);
    Pend(what, spec && spec[0] ? spec : (text ? text : "a PETSc error"));
  }
}

/* ------------------------------------------------------------------------------------------
   Normalization: batch norm (per channel) and group norm (persample: per sample and channel)
   with src/backend/reference/norm_ref.cxx's semantics over any storage format (the layout's
   offsets per bulk index, cudakernels.hpp). The per-channel arrays are host arrays (the layers
   keep them in std::vector and all-reduce them): inputs are uploaded into a pooled block, results
   copied back before the entry returns. Moments in two passes (the sum, then the squared
   deviations from the mean), deterministic block reductions in double (cudakernels.hpp): the same
   bits on every run, the host's to rounding (the host merges chunks with Chan's formula).
------------------------------------------------------------------------------------------ */
cuda::Groups NormGroups(const DDLayout &L, bool persample)
{
  cuda::Groups g;
  const int64_t N = L.order > 0 ? L.n[0] : 0, C = L.order > 1 ? L.n[1] : 1;
  int64_t       S = 1;
  for (PetscInt k = 2; k < L.order; k++) S *= L.n[k];
  g.C     = C;
  g.S     = S > 0 ? S : 1;
  g.batch = !persample;
  g.G     = persample ? N * C : C;
  g.len   = persample ? S : N * S;
  return g;
}

/* the bulks of two layouts of one piece (same sizes; storage formats and halos may differ) */
PetscErrorCode SamePiece(const DDLayout &A, const DDLayout &B, const char what[])
{
  PetscFunctionBegin;
  PetscCheck(A.order == B.order, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda %s: layouts of orders %" PetscInt_FMT " and %" PetscInt_FMT, what, A.order, B.order);
  for (PetscInt k = 0; k < A.order; k++) PetscCheck(A.n[k] == B.n[k], PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda %s: bulks of %" PetscInt_FMT " and %" PetscInt_FMT " entries in dimension %" PetscInt_FMT, what, A.n[k], B.n[k], k);
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
PetscErrorCode NormMomentsImpl(const DDLayout &L, const T *x, bool persample, double *cnt, double *mean, double *m2)
{
  const cuda::Groups g = NormGroups(L, persample);
  const int64_t      ws = cuda::GroupWorkSize(g);
  Scratch            w;

  PetscFunctionBegin;
  std::fill(cnt, cnt + g.G, 0.0);
  std::fill(mean, mean + g.G, 0.0);
  std::fill(m2, m2 + g.G, 0.0);
  if (L.bulksize == 0 || g.G == 0) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(w.Alloc(ws + 2 * g.G));
  double *dmean = w.d + ws, *dm2 = dmean + g.G;
  DDCallKernel(cuda::NormGroupSums<T>(Lay(&L, false), x, g, nullptr, (double)g.len, w.d, dmean), "normalization moments (mean)");
  DDCallKernel(cuda::NormGroupSums<T>(Lay(&L, false), x, g, dmean, 1.0, w.d, dm2), "normalization moments (squared deviations)");
  PetscCall(ToHost(mean, dmean, g.G));
  PetscCall(ToHost(m2, dm2, g.G));
  std::fill(cnt, cnt + g.G, (double)g.len); /* every group of a non-empty piece has len entries */
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void NormMomentsCuda(const DDLayout &L, const T *x, bool persample, double *cnt, double *mean, double *m2)
{
  Guarded("the normalization moments kernel", [&]() { return NormMomentsImpl<T>(L, x, persample, cnt, mean, m2); });
}

template <class T>
PetscErrorCode NormScaleShiftImpl(const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, bool persample, const double *mu, const double *a, const double *b)
{
  const cuda::Groups g = NormGroups(Lx, persample);
  Scratch            w;

  PetscFunctionBegin;
  PetscCall(SamePiece(Lx, Ly, "normalization"));
  if (Lx.bulksize == 0 || g.G == 0) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(w.Alloc(3 * g.G));
  PetscCall(ToDevice(w.d, mu, g.G));
  PetscCall(ToDevice(w.d + g.G, a, g.G));
  PetscCall(ToDevice(w.d + 2 * g.G, b, g.G));
  DDCallKernel(cuda::NormScaleShift<T>(Lay(&Lx, false), x, Lay(&Ly, false), y, g, w.d, w.d + g.G, w.d + 2 * g.G), "normalization scale and shift");
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void NormScaleShiftCuda(const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, bool persample, const double *mu, const double *a, const double *b)
{
  Guarded("the normalization scale and shift kernel", [&]() { return NormScaleShiftImpl<T>(Lx, x, Ly, y, persample, mu, a, b); });
}

template <class T>
PetscErrorCode NormBackwardSumsImpl(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, bool persample, const double *mu, double *sdy, double *sdyx)
{
  const cuda::Groups g  = NormGroups(Lx, persample);
  const int64_t      ws = cuda::GroupWorkSize(g);
  Scratch            w;

  PetscFunctionBegin;
  PetscCall(SamePiece(Lx, Ld, "normalization backward sums"));
  std::fill(sdy, sdy + g.G, 0.0);
  std::fill(sdyx, sdyx + g.G, 0.0);
  if (Lx.bulksize == 0 || g.G == 0) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(w.Alloc(ws + 3 * g.G));
  double *dmu = w.d + ws, *d1 = dmu + g.G, *d2 = d1 + g.G;
  PetscCall(ToDevice(dmu, mu, g.G));
  DDCallKernel(cuda::NormBackwardSums<T>(Lay(&Lx, false), x, Lay(&Ld, false), dy, g, dmu, w.d, d1, d2), "normalization backward sums");
  PetscCall(ToHost(sdy, d1, g.G));
  PetscCall(ToHost(sdyx, d2, g.G));
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void NormBackwardSumsCuda(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, bool persample, const double *mu, double *sdy, double *sdyx)
{
  Guarded("the normalization backward sums kernel", [&]() { return NormBackwardSumsImpl<T>(Lx, x, Ld, dy, persample, mu, sdy, sdyx); });
}

template <class T>
PetscErrorCode NormBackwardApplyImpl(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, const DDLayout &Lo, T *dx, bool persample, const double *mu, const double *a, const double *b, const double *c)
{
  const cuda::Groups g = NormGroups(Lx, persample);
  Scratch            w;

  PetscFunctionBegin;
  PetscCall(SamePiece(Lx, Ld, "normalization backward"));
  PetscCall(SamePiece(Lx, Lo, "normalization backward"));
  if (Lx.bulksize == 0 || g.G == 0) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(w.Alloc(4 * g.G));
  PetscCall(ToDevice(w.d, mu, g.G));
  PetscCall(ToDevice(w.d + g.G, a, g.G));
  PetscCall(ToDevice(w.d + 2 * g.G, b, g.G));
  PetscCall(ToDevice(w.d + 3 * g.G, c, g.G));
  DDCallKernel(cuda::NormBackwardApply<T>(Lay(&Lx, false), x, Lay(&Ld, false), dy, Lay(&Lo, false), dx, g, w.d, w.d + g.G, w.d + 2 * g.G, w.d + 3 * g.G), "normalization backward");
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void NormBackwardApplyCuda(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, const DDLayout &Lo, T *dx, bool persample, const double *mu, const double *a, const double *b, const double *c)
{
  Guarded("the normalization backward kernel", [&]() { return NormBackwardApplyImpl<T>(Lx, x, Ld, dy, Lo, dx, persample, mu, a, b, c); });
}

/* ------------------------------------------------------------------------------------------
   Layer normalization over R rows of M contiguous entries: backend_ref.cxx's LayerNorm* loops
   (row statistics mean, rstd, G1, G2 and the row sums s, g1, g2 are host arrays; x, y, w, b, dy,
   dx, dw, db device arrays)
------------------------------------------------------------------------------------------ */
/* R rows of M entries as a contiguous bulk and its groups (one per row) */
cuda::Layout RowsLayout(int64_t R, int64_t M)
{
  cuda::Layout L;
  L.order  = 1;
  L.contig = true;
  L.bulk   = R * M;
  L.n[0]   = R * M;
  return L;
}
cuda::Groups RowGroups(int64_t R, int64_t M)
{
  cuda::Groups g;
  g.G = R, g.len = M, g.C = 1, g.S = M > 0 ? M : 1;
  return g;
}

template <class T>
PetscErrorCode LayerNormSumsImpl(PetscInt R, PetscInt M, const T *x, const double *mean, double *s)
{
  const cuda::Groups g  = RowGroups(R, M);
  const int64_t      ws = cuda::GroupWorkSize(g);
  Scratch            w;

  PetscFunctionBegin;
  if (R <= 0) PetscFunctionReturn(PETSC_SUCCESS);
  if (M <= 0) {
    std::fill(s, s + R, 0.0);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(w.Alloc(ws + 2 * (int64_t)R));
  double *dmean = w.d + ws, *ds = dmean + R;
  if (mean) PetscCall(ToDevice(dmean, mean, R));
  DDCallKernel(cuda::NormGroupSums<T>(RowsLayout(R, M), x, g, mean ? dmean : nullptr, 1.0, w.d, ds), "layer normalization sums");
  PetscCall(ToHost(s, ds, R));
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void LayerNormSumsCuda(PetscInt R, PetscInt M, const T *x, const double *mean, double *s)
{
  Guarded("the layer normalization sums kernel", [&]() { return LayerNormSumsImpl<T>(R, M, x, mean, s); });
}

template <class T>
PetscErrorCode LayerNormApplyImpl(PetscInt R, PetscInt M, const T *x, const double *mean, const double *rstd, const T *wt, const T *b, T *y)
{
  Scratch w;

  PetscFunctionBegin;
  if (R <= 0 || M <= 0) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(w.Alloc(2 * (int64_t)R));
  PetscCall(ToDevice(w.d, mean, R));
  PetscCall(ToDevice(w.d + R, rstd, R));
  DDCallKernel(cuda::LayerNormApply<T>(R, M, x, w.d, w.d + R, wt, b, y), "layer normalization");
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void LayerNormApplyCuda(PetscInt R, PetscInt M, const T *x, const double *mean, const double *rstd, const T *wt, const T *b, T *y)
{
  Guarded("the layer normalization kernel", [&]() { return LayerNormApplyImpl<T>(R, M, x, mean, rstd, wt, b, y); });
}

template <class T>
PetscErrorCode LayerNormBackwardSumsImpl(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *wt, T *dw, T *db, double *g1, double *g2)
{
  const cuda::Groups g  = RowGroups(R, M);
  const int64_t      wr = cuda::GroupWorkSize(g), wc = cuda::LayerNormColumnWorkSize(R, M), ws = std::max(wr, wc);
  Scratch            w;

  PetscFunctionBegin;
  if (M <= 0) { /* no columns: the row sums are empty sums */
    if (R > 0) {
      std::fill(g1, g1 + R, 0.0);
      std::fill(g2, g2 + R, 0.0);
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const int64_t Rn = R > 0 ? R : 0;
  PetscCall(w.Alloc(ws + 4 * Rn));
  double *dmean = w.d + ws, *drstd = dmean + Rn, *d1 = drstd + Rn, *d2 = d1 + Rn;
  PetscCall(ToDevice(dmean, mean, Rn));
  PetscCall(ToDevice(drstd, rstd, Rn));
  /* dw, db: column sums over the rows (zero with no rows, as the host's); then g1, g2: row sums (the scratch reused in stream order) */
  DDCallKernel(cuda::LayerNormColumnSums<T>(Rn, M, x, dy, dmean, drstd, w.d, dw, db), "layer normalization backward sums (columns)");
  if (Rn > 0) {
    DDCallKernel(cuda::LayerNormRowSums<T>(Rn, M, x, dy, dmean, drstd, wt, w.d, d1, d2), "layer normalization backward sums (rows)");
    PetscCall(ToHost(g1, d1, Rn));
    PetscCall(ToHost(g2, d2, Rn));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void LayerNormBackwardSumsCuda(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *wt, T *dw, T *db, double *g1, double *g2)
{
  Guarded("the layer normalization backward sums kernel", [&]() { return LayerNormBackwardSumsImpl<T>(R, M, x, dy, mean, rstd, wt, dw, db, g1, g2); });
}

template <class T>
PetscErrorCode LayerNormBackwardApplyImpl(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *wt, const double *G1, const double *G2, T *dx)
{
  Scratch w;

  PetscFunctionBegin;
  if (R <= 0 || M <= 0) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(w.Alloc(4 * (int64_t)R));
  PetscCall(ToDevice(w.d, mean, R));
  PetscCall(ToDevice(w.d + R, rstd, R));
  PetscCall(ToDevice(w.d + 2 * R, G1, R));
  PetscCall(ToDevice(w.d + 3 * R, G2, R));
  DDCallKernel(cuda::LayerNormBackwardApply<T>(R, M, x, dy, w.d, w.d + R, wt, w.d + 2 * R, w.d + 3 * R, dx), "layer normalization backward");
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
void LayerNormBackwardApplyCuda(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *wt, const double *G1, const double *G2, T *dx)
{
  Guarded("the layer normalization backward kernel", [&]() { return LayerNormBackwardApplyImpl<T>(R, M, x, dy, mean, rstd, wt, G1, G2, dx); });
}

/* ------------------------------------------------------------------------------------------
   Optimizers: src/backend/cpu/optimizer_kernels.cxx's updates on device runs (in double, stored as T)
------------------------------------------------------------------------------------------ */
template <class T>
void SGDCuda(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
  cuda::SGDArgs a;
  a.lr = c.lr, a.momentum = c.momentum, a.weight_decay = c.weight_decay, a.nesterov = c.nesterov, a.first = c.first;
  cudaError_t e = cuda::SGDUpdate<T>(n, p, g, buf, a);
  if (e != cudaSuccess) Pend("the SGD update kernel", cudaGetErrorString(e));
}
template <class T>
void AdamCuda(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c)
{
  cuda::AdamArgs a;
  a.lr = c.lr, a.beta1 = c.beta1, a.beta2 = c.beta2, a.eps = c.eps, a.weight_decay = c.weight_decay, a.bc1 = c.bc1, a.bc2 = c.bc2, a.decoupled = c.decoupled;
  cudaError_t e = cuda::AdamUpdate<T>(n, p, g, m, v, a);
  if (e != cudaSuccess) Pend("the Adam update kernel", cudaGetErrorString(e));
}

/* ------------------------------------------------------------------------------------------
   Interpolation: src/backend/reference/upsample_ref.cxx's loops (UpsampleGeom: per output index
   the two sources and weights of each dimension; BoxOffsets: separable storage offsets) on the
   device, any storage format; the geometry and the offsets are uploaded once at set-up
------------------------------------------------------------------------------------------ */
template <class T>
class CudaUpsampleKernel : public UpsampleKernel
{
public:
  ~CudaUpsampleKernel() override
  {
    if (args) (void)CudaFree(args);
  }
  const char *Name() const override { return "CUDA interpolation loops"; }

  PetscErrorCode SetUp(const UpsampleKernelSpec &s)
  {
    const UpsampleGeom &g = s.g;

    PetscFunctionBegin;
    backend = DDBackendLookup_Private("/gpu/cuda");
    a.D = g.D, a.N = g.N, a.C = g.C, a.linear = g.linear, a.cinner = s.yo.cinner;
    for (int j = 0; j < 3; j++) a.out[j] = g.out[j];
    total = a.N * a.C * a.out[0] * a.out[1] * a.out[2];
    /* the reference's reads and writes stay inside the offsets' vectors: checked once here, not per entry on the device */
    PetscCheck(g.D >= 1 && g.D <= 3, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "/gpu/cuda interpolation: %" PetscInt_FMT " spatial dimensions", g.D);
    if (total > 0) {
      PetscCheck((PetscInt)s.xo.t[0].size() >= g.N && (PetscInt)s.yo.t[0].size() >= g.N && (PetscInt)s.xo.t[1].size() >= g.C && (PetscInt)s.yo.t[1].size() >= g.C, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda interpolation: offsets of fewer samples or channels than the geometry's");
      for (int j = 0; j < 3; j++) {
        const size_t o = (size_t)g.out[j], nx = s.xo.t[2 + j].size();
        PetscCheck(g.i0[j].size() >= o && g.w0[j].size() >= o && s.yo.t[2 + j].size() >= o && (!g.linear || (g.i1[j].size() >= o && g.w1[j].size() >= o)), PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda interpolation: dimension %d has fewer sources, weights or output offsets than its %zu outputs", j, o);
        for (size_t i = 0; i < o; i++) PetscCheck(g.i0[j][i] >= 0 && (size_t)g.i0[j][i] < nx && (!g.linear || (g.i1[j][i] >= 0 && (size_t)g.i1[j][i] < nx)), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "/gpu/cuda interpolation: a source of output %zu of dimension %d is outside the window's %zu entries", i, j, nx);
      }
    }
    /* one device block: i0[3], i1[3], xo.t[5], yo.t[5] (int64), then w0[3], w1[3] (double); i1, w1 sized as i0 where nearest leaves them short */
    std::vector<int64_t> ih;
    std::vector<double>  wh;
    size_t               at[16], wat[6];
    int                  q = 0;
    auto                 ints = [&](const std::vector<PetscInt> &v, size_t want) {
      at[q++] = ih.size();
      for (size_t i = 0; i < want; i++) ih.push_back(i < v.size() ? (int64_t)v[i] : 0);
    };
    for (int j = 0; j < 3; j++) ints(g.i0[j], (size_t)std::max<PetscInt>(g.out[j], 0));
    for (int j = 0; j < 3; j++) ints(g.i1[j], (size_t)std::max<PetscInt>(g.out[j], 0));
    for (int j = 0; j < 5; j++) ints(s.xo.t[j], s.xo.t[j].size());
    for (int j = 0; j < 5; j++) ints(s.yo.t[j], s.yo.t[j].size());
    for (int j = 0; j < 6; j++) {
      const std::vector<double> &v    = j < 3 ? g.w0[j] : g.w1[j - 3];
      const size_t               want = (size_t)std::max<PetscInt>(g.out[j % 3], 0);
      wat[j]                          = wh.size();
      for (size_t i = 0; i < want; i++) wh.push_back(i < v.size() ? v[i] : 0.0);
    }
    const size_t bytes = sizeof(int64_t) * ih.size() + sizeof(double) * wh.size();
    if (bytes) {
      PetscCall(CudaMalloc(bytes, &args));
      if (!ih.empty()) PetscCall(CudaCopy(args, ih.data(), sizeof(int64_t) * ih.size()));
      if (!wh.empty()) PetscCall(CudaCopy((int64_t *)args + ih.size(), wh.data(), sizeof(double) * wh.size()));
    }
    const int64_t *di = (const int64_t *)args;
    const double  *dw = (const double *)((const int64_t *)args + ih.size());
    for (int j = 0; j < 3; j++) a.i0[j] = di + at[j], a.i1[j] = di + at[3 + j], a.w0[j] = dw + wat[j], a.w1[j] = dw + wat[3 + j];
    for (int j = 0; j < 5; j++) a.xo[j] = di + at[6 + j], a.yo[j] = di + at[11 + j];
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Forward(const void *x, void *y) override
  {
    KernelEvent e(backend, DD_KERNEL_UPSAMPLE);
    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    if (total > 0) DDCallKernel(cuda::UpsampleForward<T>(a, (const T *)x, (T *)y), "interpolation forward");
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Backward(const void *dy, void *dx) override
  {
    KernelEvent e(backend, DD_KERNEL_UPSAMPLE);
    PetscFunctionBegin;
    PetscCall(DDBackendCudaCheckPending_Private());
    if (total > 0) DDCallKernel(cuda::UpsampleBackward<T>(a, (const T *)dy, (T *)dx), "interpolation backward");
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  cuda::UpsampleArgs a;
  int64_t            total   = 0;
  void              *args    = nullptr;
  DDBackend          backend = nullptr;
};

/* DDTensor's reductions over the bulk (cudakernels.hpp: deterministic block reductions in double) */
PetscErrorCode VDot(DDDataType dt, const DDLayout *Lx, const void *x, const DDLayout *Ly, const void *y, double *d)
{
  Scratch w;

  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  PetscCheck(Lx->bulksize == Ly->bulksize, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "/gpu/cuda dot: bulks of %" PetscInt_FMT " and %" PetscInt_FMT " entries", Lx->bulksize, Ly->bulksize);
  *d = 0;
  if (Lx->bulksize == 0) PetscFunctionReturn(PETSC_SUCCESS);
  const int64_t ws   = cuda::VecReduceWorkSize(Lx->bulksize);
  const bool    same = LayoutSameStorage(*Lx, *Ly);
  PetscCall(w.Alloc(ws + 1));
  DDCallKernel(cuda::Dot((int)dt, Lay(Lx, same), x, Lay(Ly, same), y, w.d, w.d + ws), "dot");
  PetscCall(ToHost(d, w.d + ws, 1));
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode VNorms(DDDataType dt, const DDLayout *L, const void *x, double r[4])
{
  Scratch w;

  PetscFunctionBegin;
  PetscCall(DDBackendCudaCheckPending_Private());
  r[0] = r[1] = r[2] = r[3] = 0;
  if (L->bulksize == 0) PetscFunctionReturn(PETSC_SUCCESS);
  const int64_t ws = cuda::VecReduceWorkSize(L->bulksize);
  PetscCall(w.Alloc(ws + 4));
  DDCallKernel(cuda::Norms((int)dt, Lay(L, true), x, w.d, w.d + ws), "norms");
  PetscCall(ToHost(r, w.d + ws, 4));
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
void FillCuda(KernelTable<T> &t)
{
  t.poolcreate       = CudaKernelCreate<CudaPoolKernel<T>, PoolKernelSpec, PoolKernel>;
#if DDNN_WITH_CUDNN
  t.convformats      = StridedConvFormats;
  t.convcreate       = DDBackendCudaConvCreate_Private<T>;
#endif
  t.fftcreate        = CudaKernelCreate<CufftKernel<T>, FftKernelSpec, FftKernel>;
  t.affinefwd        = AffFwd<T>;
  t.affinebwddata    = AffBwdData<T>;
  t.affinebwdweights = AffBwdWeights<T>;
  t.actfwd           = ActFwd<T>;
  t.actbwd           = ActBwd<T>;
  t.actfwdbulk       = ActFwdBulk<T>;
  t.actbwdbulk       = ActBwdBulk<T>;
  t.losscreate       = DDBackendCudaLossCreate_Private<T>;
  t.dropout          = DDBackendCudaDropout_Private<T>;
  /* interpolation through the set-up kernel only (upsamplefwd/bwd stay NULL: host-style entries would re-upload the geometry per call) */
  t.upsamplecreate   = CudaKernelCreate<CudaUpsampleKernel<T>, UpsampleKernelSpec, UpsampleKernel>;
  t.normmoments      = NormMomentsCuda<T>;
  t.normscaleshift   = NormScaleShiftCuda<T>;
  t.normbwdsums      = NormBackwardSumsCuda<T>;
  t.normbwdapply     = NormBackwardApplyCuda<T>;
  t.lnsums           = LayerNormSumsCuda<T>;
  t.lnapply          = LayerNormApplyCuda<T>;
  t.lnbwdsums        = LayerNormBackwardSumsCuda<T>;
  t.lnbwdapply       = LayerNormBackwardApplyCuda<T>;
  t.sgdupdate        = SGDCuda<T>;
  t.adamupdate       = AdamCuda<T>;
}
} // namespace

/* whether this process can use the CUDA backend: an error naming what cudaGetDeviceCount() said when not */
PetscErrorCode DDBackendCudaCheckDevice_Private(void)
DD_CXX_TRY
{
  const DeviceState &d = Dev();

  PetscFunctionBegin;
  PetscCheck(d.count > 0, PETSC_COMM_SELF, PETSC_ERR_SUP_SYS, "Backend /gpu/cuda: no CUDA device (cudaGetDeviceCount() found %d: %s)", d.count, d.err == cudaSuccess ? "no error" : cudaGetErrorString(d.err));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the number of CUDA devices registration found (0 with no device or no driver) */
PetscErrorCode DDBackendCudaGetDeviceCount_Private(int *count)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDBackendRegisterAll());
  *count = Dev().count;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* keeps the first failure of a kernel entry that returns nothing (loss_cuda.cxx's dropout) */
void DDBackendCudaPend_Private(const char what[], const char msg[]) { Pend(what, msg); }

/* raises (and clears) a failure kept by a kernel entry that could not return an error */
PetscErrorCode DDBackendCudaCheckPending_Private(void)
DD_CXX_TRY
{
  DeviceState &d = Dev();

  PetscFunctionBegin;
  if (!d.pending.empty()) {
    std::string m = d.pending;
    d.pending.clear();
    SETERRQ(PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: %s failed", m.c_str());
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDBackendCreate_Cuda(void)
DD_CXX_TRY
{
  _p_DDBackend b{};
  DeviceState &d = Dev();

  PetscFunctionBegin;
  d.count = 0;
  d.err   = cudaGetDeviceCount(&d.count);
  if (d.err != cudaSuccess) {
    d.count = 0;
    (void)cudaGetLastError();
  }
  d.selected = false;
  PetscCall(PetscRegisterFinalize(CudaFinalize));
  PetscCall(PetscStrncpy(b.name, "/gpu/cuda", sizeof(b.name)));
  PetscCall(PetscStrncpy(b.description, "CUDA kernels, cuBLAS, cuFFT and cuDNN", sizeof(b.description)));
  b.fallback[0] = 0;
  b.memtype     = DD_MEMTYPE_DEVICE;
  b.mem         = {CudaMalloc, CudaFree, CudaCopy, CudaSet, CudaHostMalloc, CudaHostFree, DDBackendCudaCheckPending_Private};
  b.vec         = {VSet, VScale, VCopy, VAxpby, VPack, VUnpack, VFill, VRunsPrepare, VRunsFree, VPackP, VUnpackP, VFillP, VDot, VNorms};
  FillCuda(b.f32);
  FillCuda(b.f64);
  PetscCall(DDBackendRegister_Private(&b));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
