/*
  Plain reference loops of the dense (affine) layer, y = x W^T + b (torch.nn.Linear): the
  truth the BLAS kernels are checked against. Sums run in the natural order of the index.
*/
#include <backend/kernels.hpp>

namespace ddnn
{
template <class T>
void AffineForwardRef(const AffineGeom &g, const T *x, PetscInt ldx, const T *w, PetscInt ldw, const T *b, T *y, PetscInt ldy)
{
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt o = 0; o < g.Fo; o++) {
      T acc = 0;
      for (PetscInt i = 0; i < g.Fi; i++) acc += x[n * ldx + i] * w[o * ldw + i];
      y[n * ldy + o] = acc + (b ? b[o] : (T)0);
    }
}

template <class T>
void AffineBackwardDataRef(const AffineGeom &g, const T *dy, PetscInt ldy, const T *w, PetscInt ldw, T *dx, PetscInt ldx)
{
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt i = 0; i < g.Fi; i++) {
      T acc = 0;
      for (PetscInt o = 0; o < g.Fo; o++) acc += dy[n * ldy + o] * w[o * ldw + i];
      dx[n * ldx + i] = acc;
    }
}

template <class T>
void AffineBackwardWeightsRef(const AffineGeom &g, const T *x, PetscInt ldx, const T *dy, PetscInt ldy, T *dw, PetscInt ldw, T *db)
{
  for (PetscInt o = 0; o < g.Fo; o++) {
    for (PetscInt i = 0; i < g.Fi; i++) {
      T acc = 0;
      for (PetscInt n = 0; n < g.N; n++) acc += dy[n * ldy + o] * x[n * ldx + i];
      dw[o * ldw + i] += acc;
    }
    if (db) {
      T acc = 0;
      for (PetscInt n = 0; n < g.N; n++) acc += dy[n * ldy + o];
      db[o] += acc;
    }
  }
}

#define DD_AFFINE_REF(T) \
  template void AffineForwardRef<T>(const AffineGeom &, const T *, PetscInt, const T *, PetscInt, const T *, T *, PetscInt); \
  template void AffineBackwardDataRef<T>(const AffineGeom &, const T *, PetscInt, const T *, PetscInt, T *, PetscInt); \
  template void AffineBackwardWeightsRef<T>(const AffineGeom &, const T *, PetscInt, const T *, PetscInt, T *, PetscInt, T *);
DD_AFFINE_REF(float)
DD_AFFINE_REF(double)
#undef DD_AFFINE_REF
} // namespace ddnn
