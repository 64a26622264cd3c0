/*
  The reference loops of the spectral layer's mode mixing (KernelTable<T>::spectralmix,
  spectralmixadjoint; SpectralMixGeom in include/ddnn/private/ddbackendimpl.h): per (sample, output)
  the sum over input channels, one complex multiply-add per mode at a time, in T; the fast loops of
  src/backend/cpu/spectral_fast.cxx are checked against them (tests/test_08_fastkernels.cxx).
*/
#include <backend/kernels.hpp>

namespace ddnn
{
/* s_k of local mode k as T (the layer multiplied by (T)(D / S) in T before these loops came here) */
template <class T>
T SpectralMixScale(const SpectralMixGeom &g, PetscInt k)
{
  const PetscInt f = g.lstart + k % g.nl;
  return (T)(((f != 0 && 2 * f != g.sd) ? 2.0 : 1.0) * g.invS);
}

template <class T>
void SpectralMixRef(const SpectralMixGeom &g, const T *X, const T *W, T *Y)
{
  const PetscInt N = g.N, Ci = g.Ci, Co = g.Co, K = g.K;
  for (PetscInt n = 0; n < N; n++)
    for (PetscInt o = 0; o < Co; o++) {
      T *y = Y + 2 * (n * Co + o) * K;
      for (PetscInt k = 0; k < 2 * K; k++) y[k] = 0;
      for (PetscInt i = 0; i < Ci; i++) {
        const T *x = X + 2 * (n * Ci + i) * K, *w = W + 2 * (i * Co + o) * K;
        for (PetscInt k = 0; k < K; k++) {
          y[2 * k] += x[2 * k] * w[2 * k] - x[2 * k + 1] * w[2 * k + 1];
          y[2 * k + 1] += x[2 * k] * w[2 * k + 1] + x[2 * k + 1] * w[2 * k];
        }
      }
      for (PetscInt k = 0; k < K; k++) {
        const T s = SpectralMixScale<T>(g, k);
        y[2 * k] *= s;
        y[2 * k + 1] *= s;
      }
    }
}

/* dX = G . conj(W) summed over o; dW += conj(X) . G summed over n; G = s_k dY formed entry by entry */
template <class T>
void SpectralMixAdjointRef(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW)
{
  const PetscInt N = g.N, Ci = g.Ci, Co = g.Co, K = g.K;
  for (PetscInt n = 0; n < N; n++)
    for (PetscInt i = 0; i < Ci; i++) {
      T       *dx = dX + 2 * (n * Ci + i) * K;
      const T *x  = X + 2 * (n * Ci + i) * K;
      for (PetscInt k = 0; k < 2 * K; k++) dx[k] = 0;
      for (PetscInt o = 0; o < Co; o++) {
        const T *w = W + 2 * (i * Co + o) * K, *dy = dY + 2 * (n * Co + o) * K;
        T       *dw = dW + 2 * (i * Co + o) * K;
        for (PetscInt k = 0; k < K; k++) {
          const T s = SpectralMixScale<T>(g, k), gr = s * dy[2 * k], gi = s * dy[2 * k + 1];
          dx[2 * k] += gr * w[2 * k] + gi * w[2 * k + 1];
          dx[2 * k + 1] += gi * w[2 * k] - gr * w[2 * k + 1];
          dw[2 * k] += x[2 * k] * gr + x[2 * k + 1] * gi;
          dw[2 * k + 1] += x[2 * k] * gi - x[2 * k + 1] * gr;
        }
      }
    }
}

#define DD_SPECTRAL_REF(T) \
  template T    SpectralMixScale<T>(const SpectralMixGeom &, PetscInt); \
  template void SpectralMixRef<T>(const SpectralMixGeom &, const T *, const T *, T *); \
  template void SpectralMixAdjointRef<T>(const SpectralMixGeom &, const T *, const T *, const T *, T *, T *);
DD_SPECTRAL_REF(float)
DD_SPECTRAL_REF(double)
#undef DD_SPECTRAL_REF
} // namespace ddnn
