/*
  Plain reference loops of the convolution: the truth the fast kernels are checked against,
  and the float64 path. Geometry: out o along a dimension reads input o s + t d (t < k)
  of the (already padded) window. Groups (g.groups = G): output channel co reads the Ci/G input
  channels of its group, co / (Co/G), with weights (Co, Ci/G, k...) as torch.nn.Conv stores them.
  Groups over partitioned channels (ConvGeom's cig, ci0, co0; paper 000 sec. 4.1.2's Pco x Pci
  blocks): the group of local output channel co is (co0 + co) / cog, and of its cig input channels
  only the local ones (InChannel() >= 0) contribute; the weights hold all cig of them.
*/
#include <backend/kernels.hpp>

namespace ddnn
{
/* the local input channel of in-group index cl of local output channel co, or -1 when it is not local */
static inline PetscInt InChannel(const ConvGeom &g, PetscInt Cig, PetscInt Cog, PetscInt co, PetscInt cl)
{
  const PetscInt ci = ((g.co0 + co) / Cog) * Cig + cl - g.ci0;
  return ci >= 0 && ci < g.Ci ? ci : -1;
}

template <class T>
void ConvForwardRef(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y)
{
  const PetscInt KK = g.KK(), Cig = g.Cig(), Cog = g.Cog();
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt co = 0; co < g.Co; co++)
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) {
            T acc = b ? b[co] : (T)0;
            for (PetscInt cl = 0; cl < Cig; cl++) {
              const PetscInt ci = InChannel(g, Cig, Cog, co, cl);
              if (ci < 0) continue;
              const T *wk = w + (co * Cig + cl) * KK;
              for (PetscInt t0 = 0; t0 < g.k[0]; t0++)
                for (PetscInt t1 = 0; t1 < g.k[1]; t1++)
                  for (PetscInt t2 = 0; t2 < g.k[2]; t2++)
                    acc += wk[(t0 * g.k[1] + t1) * g.k[2] + t2] * x.at(n, ci, o0 * g.s[0] + t0 * g.d[0], o1 * g.s[1] + t1 * g.d[1], o2 * g.s[2] + t2 * g.d[2]);
            }
            y.at(n, co, o0, o1, o2) = acc;
          }
}

template <class T>
void ConvBackwardDataRef(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx)
{
  const PetscInt KK = g.KK(), Cig = g.Cig(), Cog = g.Cog();
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt co = 0; co < g.Co; co++)
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) {
            const T v = dy.at(n, co, o0, o1, o2);
            for (PetscInt cl = 0; cl < Cig; cl++) {
              const PetscInt ci = InChannel(g, Cig, Cog, co, cl);
              if (ci < 0) continue;
              const T *wk = w + (co * Cig + cl) * KK;
              for (PetscInt t0 = 0; t0 < g.k[0]; t0++)
                for (PetscInt t1 = 0; t1 < g.k[1]; t1++)
                  for (PetscInt t2 = 0; t2 < g.k[2]; t2++) dx.at(n, ci, o0 * g.s[0] + t0 * g.d[0], o1 * g.s[1] + t1 * g.d[1], o2 * g.s[2] + t2 * g.d[2]) += wk[(t0 * g.k[1] + t1) * g.k[2] + t2] * v;
            }
          }
}

template <class T>
void ConvBackwardWeightsRef(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db)
{
  const PetscInt KK = g.KK(), Cig = g.Cig(), Cog = g.Cog();
  for (PetscInt co = 0; co < g.Co; co++)
    for (PetscInt cl = 0; cl < Cig; cl++) {
      const PetscInt ci = InChannel(g, Cig, Cog, co, cl);
      if (ci < 0) continue;
      for (PetscInt t0 = 0; t0 < g.k[0]; t0++)
        for (PetscInt t1 = 0; t1 < g.k[1]; t1++)
          for (PetscInt t2 = 0; t2 < g.k[2]; t2++) {
            T acc = 0;
            for (PetscInt n = 0; n < g.N; n++)
              for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
                for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
                  for (PetscInt o2 = 0; o2 < g.out[2]; o2++) acc += dy.at(n, co, o0, o1, o2) * x.at(n, ci, o0 * g.s[0] + t0 * g.d[0], o1 * g.s[1] + t1 * g.d[1], o2 * g.s[2] + t2 * g.d[2]);
            dw[(co * Cig + cl) * KK + (t0 * g.k[1] + t1) * g.k[2] + t2] += acc;
          }
    }
  if (db) BiasGradientRef<T>(g, dy, db);
}

template <class T>
void ConvTransposeForwardRef(const ConvGeom &g, const View<const T> &x, const T *w, const View<T> &y)
{
  /* y[n, co, i s + t d] += w[ci, co, t] x[n, ci, i]: here Ci is the transposed conv's input channels (no groups) */
  const PetscInt KK = g.KK();
  for (PetscInt n = 0; n < g.N; n++)
    for (PetscInt ci = 0; ci < g.Ci; ci++)
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) {
            const T v = x.at(n, ci, o0, o1, o2);
            for (PetscInt co = 0; co < g.Co; co++) {
              const T *wk = w + (ci * g.Co + co) * KK;
              for (PetscInt t0 = 0; t0 < g.k[0]; t0++)
                for (PetscInt t1 = 0; t1 < g.k[1]; t1++)
                  for (PetscInt t2 = 0; t2 < g.k[2]; t2++) y.at(n, co, o0 * g.s[0] + t0 * g.d[0], o1 * g.s[1] + t1 * g.d[1], o2 * g.s[2] + t2 * g.d[2]) += wk[(t0 * g.k[1] + t1) * g.k[2] + t2] * v;
            }
          }
}

#define DD_INSTANTIATE(T) \
  template void ConvForwardRef<T>(const ConvGeom &, const View<const T> &, const T *, const T *, const View<T> &); \
  template void ConvBackwardDataRef<T>(const ConvGeom &, const View<const T> &, const T *, const View<T> &); \
  template void ConvBackwardWeightsRef<T>(const ConvGeom &, const View<const T> &, const View<const T> &, T *, T *); \
  template void ConvTransposeForwardRef<T>(const ConvGeom &, const View<const T> &, const T *, const View<T> &);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
