/*
  The optimizers' update loops of /cpu/blas (see optimizer_kernels.hpp): the same rules as the
  reference loops of optimizer_kernels.cxx (SGDUpdate, AdamUpdate), written so that the compiler
  vectorizes them. Every entry goes through the same double-precision expressions in the same order
  as the reference, so the results are bitwise equal to it (tests FastOptimizer.* in
  tests/test_08_fastkernels.cxx):
  - the rule's branches (Nesterov, momentum, first step, coupled or decoupled weight decay) are
    template parameters, not tests inside the loop;
  - where the CPU has AVX2, a copy of each loop compiled for it (4 doubles per instruction) is chosen
    once; without FMA, so that no product is contracted into an addition (which would change the
    rounding against the reference). GCC does not vectorize a loop with std::sqrt unless
    -fno-math-errno is given for the whole file (a function's optimize attribute does not take it),
    so Adam's AVX2 loop is written with intrinsics, operation for operation the reference's
    expression (vsqrtpd is the correctly rounded square root, as sqrtsd); the tail of fewer than 4
    entries runs the reference's scalar expression.
  SGD's loops are memory-bound; Adam's AVX2 loop is bound by its two divisions and square root in
  double (best of 50 on 36,864 entries: 2.2 ns per entry against 4.6 for the reference loop).
  Without AVX2, SGD takes the compiler's 128-bit loops and Adam the scalar loop (the reference's).
*/
#include <backend/cpu/optimizer_kernels.hpp>
#include <backend/cpu/fastkernels.hpp> /* HaveAvx2() */
#include <cmath>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  #include <immintrin.h>
  #define DDNN_OPT_AVX2 1
#endif

namespace ddnn
{
namespace
{
/* the body of SGDUpdate for one combination of its branches */
template <class T, bool Momentum, bool First, bool Nesterov>
inline __attribute__((always_inline)) void SGDLoop(PetscInt n, T *__restrict p, const T *__restrict g, T *__restrict buf, double lr, double m, double wd)
{
  for (PetscInt j = 0; j < n; j++) {
    double gj = g[j], pj = p[j];
    gj += wd * pj;
    double b = gj;
    if (Momentum) {
      b      = First ? gj : m * buf[j] + gj;
      buf[j] = (T)b;
      if (Nesterov) b = gj + m * b;
    }
    p[j] = (T)(pj - lr * b);
  }
}

/* the body of AdamUpdate for coupled or decoupled weight decay */
template <class T, bool Decoupled>
inline __attribute__((always_inline)) void AdamLoop(PetscInt n, T *__restrict p, const T *__restrict g, T *__restrict m, T *__restrict v, const AdamCoefficients &c)
{
  const double lr = c.lr, b1 = c.beta1, b2 = c.beta2, eps = c.eps, wd = c.weight_decay, bc1 = c.bc1, bc2 = c.bc2;
  for (PetscInt j = 0; j < n; j++) {
    double gj = g[j], pj = p[j];
    if (Decoupled) pj *= 1 - lr * wd;
    else gj += wd * pj;
    const double mj = b1 * m[j] + (1 - b1) * gj, vj = b2 * v[j] + (1 - b2) * gj * gj;
    m[j] = (T)mj;
    v[j] = (T)vj;
    p[j] = (T)(pj - lr * (mj / bc1) / (std::sqrt(vj / bc2) + eps));
  }
}

template <class T>
inline __attribute__((always_inline)) void SGDBody(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
  const double lr = c.lr, m = c.momentum, wd = c.weight_decay;
  if (!(m > 0)) SGDLoop<T, false, false, false>(n, p, g, buf, lr, m, wd);
  else if (c.first) SGDLoop<T, true, true, false>(n, p, g, buf, lr, m, wd);
  else SGDLoop<T, true, false, false>(n, p, g, buf, lr, m, wd);
  /* Nesterov: b = g + m b after the buffer update, the buffer as above */
}

template <class T>
inline __attribute__((always_inline)) void SGDNesterovBody(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
  const double lr = c.lr, m = c.momentum, wd = c.weight_decay;
  if (c.first) SGDLoop<T, true, true, true>(n, p, g, buf, lr, m, wd);
  else SGDLoop<T, true, false, true>(n, p, g, buf, lr, m, wd);
}

template <class T>
inline __attribute__((always_inline)) void AdamBody(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c)
{
  if (c.decoupled) AdamLoop<T, true>(n, p, g, m, v, c);
  else AdamLoop<T, false>(n, p, g, m, v, c);
}

template <class T>
void SGDBase(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
  if (c.momentum > 0 && c.nesterov) SGDNesterovBody<T>(n, p, g, buf, c);
  else SGDBody<T>(n, p, g, buf, c);
}
template <class T>
void AdamBase(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c)
{
  AdamBody<T>(n, p, g, m, v, c);
}

#if defined(DDNN_OPT_AVX2)
template <class T>
__attribute__((target("avx2"))) void SGDAvx2(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
  if (c.momentum > 0 && c.nesterov) SGDNesterovBody<T>(n, p, g, buf, c);
  else SGDBody<T>(n, p, g, buf, c);
}

/* 4 entries of T as doubles, and back (the conversion to float rounds to nearest, as the scalar cast) */
__attribute__((target("avx2"))) inline __m256d Load4(const double *a) { return _mm256_loadu_pd(a); }
__attribute__((target("avx2"))) inline __m256d Load4(const float *a) { return _mm256_cvtps_pd(_mm_loadu_ps(a)); }
__attribute__((target("avx2"))) inline void    Store4(double *a, __m256d x) { _mm256_storeu_pd(a, x); }
__attribute__((target("avx2"))) inline void    Store4(float *a, __m256d x) { _mm_storeu_ps(a, _mm256_cvtpd_ps(x)); }

/* AdamLoop, 4 entries at a time: the same operations on the same operands in the same order */
template <class T, bool Decoupled>
__attribute__((target("avx2"))) void AdamLoopAvx2(PetscInt n, T *__restrict p, const T *__restrict g, T *__restrict m, T *__restrict v, const AdamCoefficients &c)
{
  const double  lr = c.lr, b1 = c.beta1, b2 = c.beta2, eps = c.eps, wd = c.weight_decay, bc1 = c.bc1, bc2 = c.bc2;
  const __m256d vlr = _mm256_set1_pd(lr), vb1 = _mm256_set1_pd(b1), vb2 = _mm256_set1_pd(b2), v1b1 = _mm256_set1_pd(1 - b1), v1b2 = _mm256_set1_pd(1 - b2);
  const __m256d veps = _mm256_set1_pd(eps), vwd = _mm256_set1_pd(wd), vbc1 = _mm256_set1_pd(bc1), vbc2 = _mm256_set1_pd(bc2), vdec = _mm256_set1_pd(1 - lr * wd);
  PetscInt      j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256d gj = Load4(g + j), pj = Load4(p + j);
    if (Decoupled) pj = _mm256_mul_pd(pj, vdec);
    else gj = _mm256_add_pd(gj, _mm256_mul_pd(vwd, pj));
    const __m256d mj = _mm256_add_pd(_mm256_mul_pd(vb1, Load4(m + j)), _mm256_mul_pd(v1b1, gj));
    const __m256d vj = _mm256_add_pd(_mm256_mul_pd(vb2, Load4(v + j)), _mm256_mul_pd(_mm256_mul_pd(v1b2, gj), gj));
    Store4(m + j, mj);
    Store4(v + j, vj);
    const __m256d den = _mm256_add_pd(_mm256_sqrt_pd(_mm256_div_pd(vj, vbc2)), veps);
    Store4(p + j, _mm256_sub_pd(pj, _mm256_div_pd(_mm256_mul_pd(vlr, _mm256_div_pd(mj, vbc1)), den)));
  }
  AdamLoop<T, Decoupled>(n - j, p + j, g + j, m + j, v + j, c);
}

template <class T>
__attribute__((target("avx2"))) void AdamAvx2(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c)
{
  if (c.decoupled) AdamLoopAvx2<T, true>(n, p, g, m, v, c);
  else AdamLoopAvx2<T, false>(n, p, g, m, v, c);
}
#endif

} // namespace

template <class T>
void SGDUpdateFast(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c)
{
#if defined(DDNN_OPT_AVX2)
  if (HaveAvx2()) {
    SGDAvx2<T>(n, p, g, buf, c);
    return;
  }
#endif
  SGDBase<T>(n, p, g, buf, c);
}

template <class T>
void AdamUpdateFast(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c)
{
#if defined(DDNN_OPT_AVX2)
  if (HaveAvx2()) {
    AdamAvx2<T>(n, p, g, m, v, c);
    return;
  }
#endif
  AdamBase<T>(n, p, g, m, v, c);
}

template void SGDUpdateFast<float>(PetscInt, float *, const float *, float *, const SGDCoefficients &);
template void SGDUpdateFast<double>(PetscInt, double *, const double *, double *, const SGDCoefficients &);
template void AdamUpdateFast<float>(PetscInt, float *, const float *, float *, float *, const AdamCoefficients &);
template void AdamUpdateFast<double>(PetscInt, double *, const double *, double *, double *, const AdamCoefficients &);
} // namespace ddnn
