/*
  Plain reference loops of the transposed convolution (DDLAYERCONVTRANSPOSE): the float64
  path, the fallback of the oneDNN path where a worker's crop is negative, and the truth the
  oneDNN deconvolution is checked against. Geometry (kernels.hpp, ConvTGeom): window entry li
  feeds box entry lo = li s + t d - pl along each dimension, when 0 <= lo < out. Groups
  (g.groups = G): input channel ci feeds the Co/G output channels of its group, ci / (Ci/G), with
  weights (Ci, Co/G, k...) as torch.nn.ConvTranspose stores them. Groups over partitioned channels
  (ConvGeom's cog, ci0, co0): local input channel ci is of group (ci0 + ci) / cig and feeds those of
  its cog output channels that are local (OutChannel() >= 0).
*/
#include <backend/kernels.hpp>

namespace ddnn
{
/* the box index fed by window index li through tap t along dimension j, or -1 outside the box */
static inline PetscInt Tap(const ConvTGeom &g, PetscInt j, PetscInt li, PetscInt t)
{
  PetscInt lo = li * g.s[j] + t * g.d[j] - g.pl[j];
  return (lo >= 0 && lo < g.out[j]) ? lo : -1;
}

/* the local output channel of in-group index cl of local input channel ci, or -1 when it is not local */
static inline PetscInt OutChannel(const ConvTGeom &g, PetscInt Cig, PetscInt Cog, PetscInt ci, PetscInt cl)
{
  const PetscInt co = ((g.ci0 + ci) / Cig) * Cog + cl - g.co0;
  return co >= 0 && co < g.Co ? co : -1;
}

template <class T>
void ConvTForwardRef(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y)
{
  const PetscInt KK = g.KK(), Cig = g.Cig(), Cog = g.Cog();
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt co = 0; co < g.Co; co++)
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) y.at(n, co, o0, o1, o2) = b ? b[co] : (T)0;
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt ci = 0; ci < g.Ci; ci++)
      for (PetscInt i0 = 0; i0 < g.in[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.in[1]; i1++)
          for (PetscInt i2 = 0; i2 < g.in[2]; i2++) {
            const T v = x.at(n, ci, i0, i1, i2);
            for (PetscInt cl = 0; cl < Cog; cl++) {
              const PetscInt co = OutChannel(g, Cig, Cog, ci, cl);
              if (co < 0) continue;
              const T *wk = w + (ci * Cog + cl) * KK;
              for (PetscInt t0 = 0; t0 < g.k[0]; t0++) {
                PetscInt o0 = Tap(g, 0, i0, t0);
                if (o0 < 0) continue;
                for (PetscInt t1 = 0; t1 < g.k[1]; t1++) {
                  PetscInt o1 = Tap(g, 1, i1, t1);
                  if (o1 < 0) continue;
                  for (PetscInt t2 = 0; t2 < g.k[2]; t2++) {
                    PetscInt o2 = Tap(g, 2, i2, t2);
                    if (o2 < 0) continue;
                    y.at(n, co, o0, o1, o2) += wk[(t0 * g.k[1] + t1) * g.k[2] + t2] * v;
                  }
                }
              }
            }
          }
}

template <class T>
void ConvTBackwardDataRef(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx)
{
  const PetscInt KK = g.KK(), Cig = g.Cig(), Cog = g.Cog();
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt ci = 0; ci < g.Ci; ci++)
      for (PetscInt i0 = 0; i0 < g.in[0]; i0++)
        for (PetscInt i1 = 0; i1 < g.in[1]; i1++)
          for (PetscInt i2 = 0; i2 < g.in[2]; i2++) {
            T acc = 0;
            for (PetscInt cl = 0; cl < Cog; cl++) {
              const PetscInt co = OutChannel(g, Cig, Cog, ci, cl);
              if (co < 0) continue;
              const T *wk = w + (ci * Cog + cl) * KK;
              for (PetscInt t0 = 0; t0 < g.k[0]; t0++) {
                PetscInt o0 = Tap(g, 0, i0, t0);
                if (o0 < 0) continue;
                for (PetscInt t1 = 0; t1 < g.k[1]; t1++) {
                  PetscInt o1 = Tap(g, 1, i1, t1);
                  if (o1 < 0) continue;
                  for (PetscInt t2 = 0; t2 < g.k[2]; t2++) {
                    PetscInt o2 = Tap(g, 2, i2, t2);
                    if (o2 < 0) continue;
                    acc += wk[(t0 * g.k[1] + t1) * g.k[2] + t2] * dy.at(n, co, o0, o1, o2);
                  }
                }
              }
            }
            dx.at(n, ci, i0, i1, i2) += acc;
          }
}

template <class T>
void ConvTBackwardWeightsRef(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db)
{
  const PetscInt KK = g.KK(), Cig = g.Cig(), Cog = g.Cog();
  for (PetscInt ci = 0; ci < g.Ci; ci++)
    for (PetscInt cl = 0; cl < Cog; cl++) {
      const PetscInt co = OutChannel(g, Cig, Cog, ci, cl);
      if (co < 0) continue;
      for (PetscInt t0 = 0; t0 < g.k[0]; t0++)
        for (PetscInt t1 = 0; t1 < g.k[1]; t1++)
          for (PetscInt t2 = 0; t2 < g.k[2]; t2++) {
            T acc = 0;
            for (PetscInt n = 0; n < g.N; n++)
              for (PetscInt i0 = 0; i0 < g.in[0]; i0++) {
                PetscInt o0 = Tap(g, 0, i0, t0);
                if (o0 < 0) continue;
                for (PetscInt i1 = 0; i1 < g.in[1]; i1++) {
                  PetscInt o1 = Tap(g, 1, i1, t1);
                  if (o1 < 0) continue;
                  for (PetscInt i2 = 0; i2 < g.in[2]; i2++) {
                    PetscInt o2 = Tap(g, 2, i2, t2);
                    if (o2 < 0) continue;
                    acc += x.at(n, ci, i0, i1, i2) * dy.at(n, co, o0, o1, o2);
                  }
                }
              }
            dw[(ci * Cog + cl) * KK + (t0 * g.k[1] + t1) * g.k[2] + t2] += acc;
          }
    }
  if (db) BiasGradientRef<T>(g, dy, db);
}

#define DD_INSTANTIATE_CONVT(T) \
  template void ConvTForwardRef<T>(const ConvTGeom &, const View<const T> &, const T *, const T *, const View<T> &); \
  template void ConvTBackwardDataRef<T>(const ConvTGeom &, const View<const T> &, const T *, const View<T> &); \
  template void ConvTBackwardWeightsRef<T>(const ConvTGeom &, const View<const T> &, const View<const T> &, T *, T *);
DD_INSTANTIATE_CONVT(float)
DD_INSTANTIATE_CONVT(double)
} // namespace ddnn
