/*
  The optimizers' update loops (see optimizer_kernels.hpp), for float and double.
*/
#include <backend/cpu/optimizer_kernels.hpp>
#include <cmath>

namespace ddnn
{
template <class T>
void SGDUpdate(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
  const double lr = c.lr, m = c.momentum, wd = c.weight_decay;
  for (PetscInt j = 0; j < n; j++) {
    double gj = g[j], pj = p[j];
    gj += wd * pj;
    double b = gj;
    if (m > 0) {
      b      = c.first ? gj : m * buf[j] + gj;
      buf[j] = (T)b;
      if (c.nesterov) b = gj + m * b;
    }
    p[j] = (T)(pj - lr * b);
  }
}

template <class T>
void AdamUpdate(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c)
{
  const double lr = c.lr, b1 = c.beta1, b2 = c.beta2, eps = c.eps, wd = c.weight_decay, bc1 = c.bc1, bc2 = c.bc2;
  for (PetscInt j = 0; j < n; j++) {
    double gj = g[j], pj = p[j];
    if (c.decoupled) pj *= 1 - lr * wd;
    else gj += wd * pj;
    const double mj = b1 * m[j] + (1 - b1) * gj, vj = b2 * v[j] + (1 - b2) * gj * gj;
    m[j] = (T)mj;
    v[j] = (T)vj;
    p[j] = (T)(pj - lr * (mj / bc1) / (std::sqrt(vj / bc2) + eps));
  }
}

template <class T>
bool StateValid(PetscInt n, const T *a, bool nonnegative)
{
  for (PetscInt j = 0; j < n; j++)
    if (!std::isfinite(a[j]) || (nonnegative && a[j] < 0)) return false;
  return true;
}

template void SGDUpdate<float>(PetscInt, float *, const float *, float *, const SGDCoefficients &);
template void SGDUpdate<double>(PetscInt, double *, const double *, double *, const SGDCoefficients &);
template void AdamUpdate<float>(PetscInt, float *, const float *, float *, float *, const AdamCoefficients &);
template void AdamUpdate<double>(PetscInt, double *, const double *, double *, double *, const AdamCoefficients &);
template bool StateValid<float>(PetscInt, const float *, bool);
template bool StateValid<double>(PetscInt, const double *, bool);
} // namespace ddnn
