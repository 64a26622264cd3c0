/*
  Plain reference loops of max and average pooling: the float64 path, the fallback of float32
  when oneDNN cannot take the layout, and the truth the oneDNN kernels are checked against.

  PyTorch's semantics (aten/src/ATen/native/cpu/{MaxPoolKernel,AvgPoolKernel}.cpp): the window
  of output o along a dimension starts at o s - p; only taps inside the tensor are read (the
  layer's geometry lists them), so no padding value is ever read. Max pooling keeps the first
  maximum in C order of the taps and lets NaN through ((v > m) || isnan(v)); average pooling
  sums the valid taps and divides by the divisor of PoolGeom.
*/
#include <backend/kernels.hpp>
#include <limits>

namespace ddnn
{
void BoxOffsetsBuild(const DDLayout &L, PetscInt D, const PetscInt origin[], const PetscInt n[], BoxOffsets *b)
{
  auto contrib = [&](PetscInt k, PetscInt j) { return k == L.bdim ? L.stride[k] * (j / L.bs) + j % L.bs : L.stride[k] * j; };
  for (PetscInt q = 0; q < 5; q++) b->t[q].assign(1, 0);
  for (PetscInt q = 0; q < 2 + D; q++) {
    PetscInt slot = q < 2 ? q : q + 3 - D; /* spatial dims fill slots 2..4 from the right */
    b->t[slot].resize(n[q]);
    for (PetscInt i = 0; i < n[q]; i++) b->t[slot][i] = contrib(q, origin[q] + i);
  }
  /* channels fastest: channels-last (C last in the storage order) or blocked on C */
  b->cinner = L.bdim == 1 || (L.order > 2 && L.perm[L.order - 1] == 1);
}

template <class T>
void PoolForwardRef(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *argmax)
{
  const PetscInt d0 = g.d[0], d1 = g.d[1], d2 = g.d[2];
  auto           cell = [&](PetscInt n, PetscInt c, PetscInt i0, PetscInt i1, PetscInt i2) {
    const PetscInt base = xo.t[0][n] + xo.t[1][c];
    const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], f2 = g.first[2][i2];
    const PetscInt n0 = g.ntaps[0][i0], n1 = g.ntaps[1][i1], n2 = g.ntaps[2][i2];
    const PetscInt yoff = yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2];
    if (g.max) {
      T        m  = -std::numeric_limits<T>::infinity();
      PetscInt am = base + xo.t[2][f0] + xo.t[3][f1] + xo.t[4][f2];
      for (PetscInt a = 0; a < n0; a++) {
        const PetscInt oa = base + xo.t[2][f0 + a * d0];
        for (PetscInt b = 0; b < n1; b++) {
          const PetscInt ob = oa + xo.t[3][f1 + b * d1];
          for (PetscInt e = 0; e < n2; e++) {
            const PetscInt off = ob + xo.t[4][f2 + e * d2];
            const T        v   = x[off];
            if (v > m || v != v) {
              m  = v;
              am = off;
            }
          }
        }
      }
      y[yoff] = m;
      if (argmax) argmax[g.ArgmaxIndex(n, c, i0, i1, i2)] = am;
    } else {
      T sum = 0;
      for (PetscInt a = 0; a < n0; a++) {
        const PetscInt oa = base + xo.t[2][f0 + a];
        for (PetscInt b = 0; b < n1; b++) {
          const PetscInt ob = oa + xo.t[3][f1 + b];
          for (PetscInt e = 0; e < n2; e++) sum += x[ob + xo.t[4][f2 + e]];
        }
      }
      y[yoff] = sum / (T)(g.div[0][i0] * g.div[1][i1] * g.div[2][i2]);
    }
  };
  if (xo.cinner) {
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2 = 0; i2 < g.out[2]; i2++)
            for (PetscInt c = 0; c < g.C; c++) cell(n, c, i0, i1, i2);
  } else {
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt c = 0; c < g.C; c++)
        for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
          for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
            for (PetscInt i2 = 0; i2 < g.out[2]; i2++) cell(n, c, i0, i1, i2);
  }
}

template <class T>
void PoolBackwardRef(const PoolGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const PetscInt *argmax)
{
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt c = 0; c < g.C; c++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2 = 0; i2 < g.out[2]; i2++) {
            const T v = dy[yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2]];
            if (g.max) {
              dx[argmax[g.ArgmaxIndex(n, c, i0, i1, i2)]] += v;
              continue;
            }
            const T        w    = v / (T)(g.div[0][i0] * g.div[1][i1] * g.div[2][i2]);
            const PetscInt base = xo.t[0][n] + xo.t[1][c];
            const PetscInt f0 = g.first[0][i0], f1 = g.first[1][i1], f2 = g.first[2][i2];
            for (PetscInt a = 0; a < g.ntaps[0][i0]; a++)
              for (PetscInt b = 0; b < g.ntaps[1][i1]; b++)
                for (PetscInt e = 0; e < g.ntaps[2][i2]; e++) dx[base + xo.t[2][f0 + a] + xo.t[3][f1 + b] + xo.t[4][f2 + e]] += w;
          }
}

#define DD_INSTANTIATE(T) \
  template void PoolForwardRef<T>(const PoolGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &, PetscInt *); \
  template void PoolBackwardRef<T>(const PoolGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &, const PetscInt *);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
