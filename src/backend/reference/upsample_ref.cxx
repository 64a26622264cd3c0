/*
  Loops of nearest and (bi/tri)linear interpolation and of their adjoints, for both element
  types (oneDNN's resampling cannot be used: its nearest rounds instead of PyTorch's floor, it
  has no align_corners, and it derives the scale from the window's own sizes).

  The geometry (source indices and weights per output index and dimension) is computed once
  at set-up with PyTorch's formulas (aten/src/ATen/native/UpSample.h); the sum is nested as
  PyTorch nests it, outermost spatial dimension first: y = h0 (w0 x00 + w1 x01) + h1 (...).
*/
#include <backend/kernels.hpp>

namespace ddnn
{
template <class T>
static inline T Lerp1(const T *x, PetscInt base, const BoxOffsets &xo, const UpsampleGeom &g, PetscInt i2)
{
  return x[base + xo.t[4][g.i0[2][i2]]] * (T)g.w0[2][i2] + x[base + xo.t[4][g.i1[2][i2]]] * (T)g.w1[2][i2];
}

template <class T>
void UpsampleForwardRef(const UpsampleGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo)
{
  auto cell = [&](PetscInt n, PetscInt c, PetscInt i0, PetscInt i1, PetscInt i2) {
    const PetscInt base = xo.t[0][n] + xo.t[1][c];
    T              v;
    if (!g.linear) v = x[base + xo.t[2][g.i0[0][i0]] + xo.t[3][g.i0[1][i1]] + xo.t[4][g.i0[2][i2]]];
    else if (g.D == 1) v = Lerp1(x, base, xo, g, i2);
    else {
      auto lerp2 = [&](PetscInt b) { /* the last two dimensions */
        return Lerp1(x, b + xo.t[3][g.i0[1][i1]], xo, g, i2) * (T)g.w0[1][i1] + Lerp1(x, b + xo.t[3][g.i1[1][i1]], xo, g, i2) * (T)g.w1[1][i1];
      };
      if (g.D == 2) v = lerp2(base);
      else v = lerp2(base + xo.t[2][g.i0[0][i0]]) * (T)g.w0[0][i0] + lerp2(base + xo.t[2][g.i1[0][i0]]) * (T)g.w1[0][i0];
    }
    y[yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2]] = v;
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
void UpsampleBackwardRef(const UpsampleGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo)
{
  /* the transpose of the forward's sum: every source gets its weight times dy */
  const PetscInt taps = g.linear ? 2 : 1;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt c = 0; c < g.C; c++)
      for (PetscInt i0 = 0; i0 < g.out[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.out[1]; i1++)
          for (PetscInt i2 = 0; i2 < g.out[2]; i2++) {
            const T        v    = dy[yo.t[0][n] + yo.t[1][c] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2]];
            const PetscInt base = xo.t[0][n] + xo.t[1][c];
            if (!g.linear) {
              dx[base + xo.t[2][g.i0[0][i0]] + xo.t[3][g.i0[1][i1]] + xo.t[4][g.i0[2][i2]]] += v;
              continue;
            }
            /* leading (padded) dimensions have one tap */
            const PetscInt ta = g.D >= 3 ? taps : 1, tb = g.D >= 2 ? taps : 1;
            for (PetscInt a = 0; a < ta; a++) {
              const PetscInt oa = base + xo.t[2][a ? g.i1[0][i0] : g.i0[0][i0]];
              const T        wa = ta == 1 ? (T)1 : (T)(a ? g.w1[0][i0] : g.w0[0][i0]);
              for (PetscInt b = 0; b < tb; b++) {
                const PetscInt ob = oa + xo.t[3][b ? g.i1[1][i1] : g.i0[1][i1]];
                const T        wb = tb == 1 ? wa : wa * (T)(b ? g.w1[1][i1] : g.w0[1][i1]);
                dx[ob + xo.t[4][g.i0[2][i2]]] += wb * (T)g.w0[2][i2] * v;
                dx[ob + xo.t[4][g.i1[2][i2]]] += wb * (T)g.w1[2][i2] * v;
              }
            }
          }
}

#define DD_INSTANTIATE(T) \
  template void UpsampleForwardRef<T>(const UpsampleGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &); \
  template void UpsampleBackwardRef<T>(const UpsampleGeom &, const T *, const BoxOffsets &, T *, const BoxOffsets &);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
