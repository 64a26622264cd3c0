/*
  GEMM kernels of the dense layer, y = x W^T + b (torch.nn.Linear), on row-major strided matrices,
  over a GEMM policy G (a struct with static Gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc),
  alpha = 1): OpenBLAS's cblas_?gemm in /cpu/blas, oneDNN's dnnl_sgemm in /cpu/dnnl. Checked
  against the reference loops of src/backend/reference/affine_ref.cxx.
*/
#pragma once
#include <backend/kernels.hpp>
#include <cblas.h>

namespace ddnn
{
template <class T, class G>
void AffineForwardGemm(const AffineGeom &g, const T *x, PetscInt ldx, const T *w, PetscInt ldw, const T *b, T *y, PetscInt ldy)
{
  if (g.N == 0 || g.Fo == 0) return;
  for (PetscInt n = 0; n < g.N; n++) /* y = b, then y += x W^T (beta = 1) */
    for (PetscInt o = 0; o < g.Fo; o++) y[n * ldy + o] = b ? b[o] : (T)0;
  if (g.Fi == 0) return;
  G::Gemm(CblasNoTrans, CblasTrans, g.N, g.Fo, g.Fi, x, ldx, w, ldw, (T)1, y, ldy);
}

template <class T, class G>
void AffineBackwardDataGemm(const AffineGeom &g, const T *dy, PetscInt ldy, const T *w, PetscInt ldw, T *dx, PetscInt ldx)
{
  if (g.N == 0 || g.Fi == 0) return;
  if (g.Fo == 0) {
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i = 0; i < g.Fi; i++) dx[n * ldx + i] = 0;
    return;
  }
  G::Gemm(CblasNoTrans, CblasNoTrans, g.N, g.Fi, g.Fo, dy, ldy, w, ldw, (T)0, dx, ldx);
}

template <class T, class G>
void AffineBackwardWeightsGemm(const AffineGeom &g, const T *x, PetscInt ldx, const T *dy, PetscInt ldy, T *dw, PetscInt ldw, T *db)
{
  if (g.Fo == 0 || g.N == 0) return;
  if (g.Fi > 0) G::Gemm(CblasTrans, CblasNoTrans, g.Fo, g.Fi, g.N, dy, ldy, x, ldx, (T)1, dw, ldw);
  if (db)
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt o = 0; o < g.Fo; o++) db[o] += dy[n * ldy + o];
}

} // namespace ddnn
