/*
  GEMM kernels of the dense layer (float32: oneDNN's dnnl_sgemm when ddnn has oneDNN, else
  OpenBLAS sgemm; float64: OpenBLAS dgemm), y = x W^T + b (torch.nn.Linear),
  on row-major strided matrices; declared in src/backend/kernels.hpp and checked against the
  reference loops of src/backend/reference/affine_ref.cxx.
*/
#include <backend/kernels.hpp>
#include <cblas.h>
#if DDNN_WITH_DNNL
  #include <oneapi/dnnl/dnnl.h>
#endif

namespace ddnn
{
/*
  float32 goes to oneDNN's sgemm when ddnn has oneDNN: its JIT kernels are chosen from the CPU's
  features (AVX-512 here), whereas OpenBLAS (Debian's 0.3.21, DYNAMIC_ARCH) picks its kernels
  from a table of CPU models and falls back to its Prescott (SSE3) kernels on models it does
  not know, e.g. Xeon Emerald Rapids (family 6, model 207): 3x slower for the 64x4096x4096
  products of bench/bench_layers. OpenBLAS stays the fallback, and the float64 path.
*/
static inline void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const float *A, PetscInt lda, const float *B, PetscInt ldb, float beta, float *C, PetscInt ldc)
{
#if DDNN_WITH_DNNL
  if (dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc) == dnnl_success) return;
#endif
  cblas_sgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}
static inline void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const double *A, PetscInt lda, const double *B, PetscInt ldb, double beta, double *C, PetscInt ldc)
{
  cblas_dgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

template <class T>
void AffineForwardBlas(const AffineGeom &g, const T *x, PetscInt ldx, const T *w, PetscInt ldw, const T *b, T *y, PetscInt ldy)
{
  if (g.N == 0 || g.Fo == 0) return;
  for (PetscInt n = 0; n < g.N; n++) /* y = b, then y += x W^T (beta = 1) */
    for (PetscInt o = 0; o < g.Fo; o++) y[n * ldy + o] = b ? b[o] : (T)0;
  if (g.Fi == 0) return;
  Gemm(CblasNoTrans, CblasTrans, g.N, g.Fo, g.Fi, x, ldx, w, ldw, (T)1, y, ldy);
}

template <class T>
void AffineBackwardDataBlas(const AffineGeom &g, const T *dy, PetscInt ldy, const T *w, PetscInt ldw, T *dx, PetscInt ldx)
{
  if (g.N == 0 || g.Fi == 0) return;
  if (g.Fo == 0) {
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i = 0; i < g.Fi; i++) dx[n * ldx + i] = 0;
    return;
  }
  Gemm(CblasNoTrans, CblasNoTrans, g.N, g.Fi, g.Fo, dy, ldy, w, ldw, (T)0, dx, ldx);
}

template <class T>
void AffineBackwardWeightsBlas(const AffineGeom &g, const T *x, PetscInt ldx, const T *dy, PetscInt ldy, T *dw, PetscInt ldw, T *db)
{
  if (g.Fo == 0 || g.N == 0) return;
  if (g.Fi > 0) Gemm(CblasTrans, CblasNoTrans, g.Fo, g.Fi, g.N, dy, ldy, x, ldx, (T)1, dw, ldw);
  if (db)
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt o = 0; o < g.Fo; o++) db[o] += dy[n * ldy + o];
}

#define DD_AFFINE_BLAS(T) \
  template void AffineForwardBlas<T>(const AffineGeom &, const T *, PetscInt, const T *, PetscInt, const T *, T *, PetscInt); \
  template void AffineBackwardDataBlas<T>(const AffineGeom &, const T *, PetscInt, const T *, PetscInt, T *, PetscInt); \
  template void AffineBackwardWeightsBlas<T>(const AffineGeom &, const T *, PetscInt, const T *, PetscInt, T *, PetscInt, T *);
DD_AFFINE_BLAS(float)
DD_AFFINE_BLAS(double)
#undef DD_AFFINE_BLAS
} // namespace ddnn
