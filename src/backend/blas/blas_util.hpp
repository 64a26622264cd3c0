/*
  What the GEMM convolution (conv_gemm.cxx) and the Winograd convolution (conv_winograd.cxx) of
  /cpu/blas share (C++ only): row-major OpenBLAS products in both precisions and thread-local
  scratch buffers.
*/
#pragma once
#include <petscsys.h>
#include <cblas.h>
#include <vector>

namespace ddnn
{
namespace blas
{
/* C (M x N) = op(A) op(B) + beta C, row-major (OpenBLAS: on the thin products of the convolutions oneDNN's dnnl_sgemm measured 3-10x slower) */
inline void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const float *A, PetscInt lda, const float *B, PetscInt ldb, float beta, float *C, PetscInt ldc)
{
  cblas_sgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}
inline void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const double *A, PetscInt lda, const double *B, PetscInt ldb, double beta, double *C, PetscInt ldc)
{
  cblas_dgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/*
  Thread-local scratch buffer number slot (0-3), at least n entries, freed at thread exit; one set per
  element type, shared by the kernels of this backend (none calls another while it holds a buffer)
*/
template <class T>
inline T *Scratch(int slot, size_t n)
{
  thread_local std::vector<T> buf[4];
  if (buf[slot].size() < n) {
    buf[slot].clear();
    buf[slot].shrink_to_fit();
    buf[slot].resize(n);
  }
  return buf[slot].data();
}
} // namespace blas
} // namespace ddnn
