/*
  Pointwise activation kernels (the layer DDLAYERACTIVATION calls them on contiguous runs of its
  storage; paper 000 sec. 4: hyper-local, no data movement). One loop per function so that the
  simple ones (relu, leakyrelu, identity) vectorize, and tanh, sigmoid, silu, elu, softplus, gelu's
  tanh form and (float32) gelu's erf form on branch-free exp, log1p and erf (below); float64 gelu
  (erf form) on glibc's vector erf and exp (libmvec) where the process can load them, else libm's. NaN semantics are PyTorch's 1.13
  (aten/src/ATen/native/Activation.cpp, cpu/Activation.cpp):
    relu(x)       = x < 0 ? 0 : x              (clamp_min: NaN passes, relu(-0) = -0)
    relu'(x) dy   = x <= 0 ? 0 : dy            (threshold_backward: NaN input passes dy)
    leaky(x)      = x > 0 ? x : slope x        (NaN passes; prelu: slope = its weight)
    leaky'(x) dy  = x > 0 ? dy : slope dy      (NaN input: slope dy)
    elu(x)        = x <= 0 ? alpha (exp(x) - 1) : x,   elu'(x) dy = x <= 0 ? alpha exp(x) dy : dy
                                               (NaN input: NaN out, dy passes, as torch)
    softplus(x)   = beta x > threshold ? x : log1p(exp(beta x)) / beta
    softplus'(x)  = beta x > threshold ? 1 : z / (z + 1), z = exp(beta x)
    sigmoid(x)    = x >= 0 ? 1 / (1 + exp(-x)) : e / (1 + e), e = exp(x)
    silu(x)       = x s,                        silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
                                               (silu(-inf) = -inf 0 = NaN, silu'(+-inf) = NaN, as torch)
    gelu tanh(x)  = x/2 (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2/pi)
  tanh, sigmoid, silu, softplus and gelu propagate NaN through their arithmetic.
*/
#include <backend/cpu/fastkernels.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <type_traits>

namespace ddnn
{
namespace
{
constexpr double kInvSqrt2   = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OnPi  = 0.79788456080286535588; /* torch's kBeta = M_SQRT2 M_2_SQRTPI / 2 */
constexpr double kKappa      = 0.044715;

/*
  The loops below are branch-free so that they vectorize. GCC if-converts their selects only without
  -ftrapping-math, which these functions turn off (no numerical change: it only concerns floating-point
  exception flags); the builtins, not <cmath>'s std::fabs and std::copysign, which GCC does not inline
  across the differing options.
*/
#if defined(__GNUC__) && !defined(__clang__)
  #pragma GCC push_options
  #pragma GCC optimize("no-trapping-math")
  #pragma GCC optimize("fp-contract=off") /* AVX-512F has fused multiply-adds: no contraction, so that every copy rounds alike */
#endif
/*
  Leaky ReLU and PReLU: y = v (v > 0 ? 1 : slope), dx = dy (v > 0 ? 1 : slope). v 1 = v and dy 1 = dy,
  so the values are those of "v > 0 ? v : slope v" (NaN and -0 included: slope v either way); the
  select of two constants vectorizes here (no-trapping-math, as the loops below; the multiply
  is the same one per entry, nothing is evaluated speculatively). As a branch on the data's sign it
  took 4.5 ns an entry on a network's activations (0.6 ms over 8 x 16 x 32 x 32, 16x ReLU's), and a
  calibration on repeated data measures such a branch faster than a network sees it
*/
template <class T>
static inline void LeakyForwardLoop(T slope, const T *x, T *y, PetscInt n)
{
  for (PetscInt i = 0; i < n; i++) {
    const T v = x[i];
    y[i]      = v * (v > (T)0 ? (T)1 : slope);
  }
}
template <class T>
static inline void LeakyBackwardLoop(T slope, const T *x, const T *dy, T *dx, PetscInt n)
{
  for (PetscInt i = 0; i < n; i++) {
    const T v = x[i];
    dx[i]     = dy[i] * (v > (T)0 ? (T)1 : slope);
  }
}
void LeakyForward(float slope, const float *x, float *y, PetscInt n)
{
  LeakyForwardLoop(slope, x, y, n);
}
void LeakyForward(double slope, const double *x, double *y, PetscInt n)
{
  LeakyForwardLoop(slope, x, y, n);
}
void LeakyBackward(float slope, const float *x, const float *dy, float *dx, PetscInt n)
{
  LeakyBackwardLoop(slope, x, dy, dx, n);
}
void LeakyBackward(double slope, const double *x, const double *dy, double *dx, PetscInt n)
{
  LeakyBackwardLoop(slope, x, dy, dx, n);
}

/* inlined into the AVX2 copies of the loops below, which then vectorize 8 floats or 4 doubles wide */
#if defined(__GNUC__)
  #define DDNN_AI __attribute__((always_inline))
#else
  #define DDNN_AI
#endif
/* 2^k for an integral k of T's normal exponent range: k + BIAS + 2^MANT holds k + BIAS in its low bits,
   which the shift moves into the exponent field */
template <class T, class U, int MANT, int BIAS>
DDNN_AI inline T Pow2(T k)
{
  const T t = k + ((T)BIAS + (T)((U)1 << MANT));
  U       b;
  T       r;
  std::memcpy(&b, &t, sizeof(b));
  b <<= MANT;
  std::memcpy(&r, &b, sizeof(r));
  return r;
}
/*
  exp(x) for x <= 0 (NaN: some value; the callers select NaN back), branch-free so that the sigmoid
  and SiLU loops vectorize (libm's exp is a scalar call per entry: sigmoid took 14x PyTorch's time in
  float32, 6x in float64). Cephes' exp and expf: n = x log2(e) rounded to the nearest integer (added
  to and taken from 1.5 2^52, 1.5 2^23: no integer conversion), r = x - n ln 2 with ln 2 in two parts,
  exp(r) by a Padé form (double: 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2))) or a degree-6 polynomial
  (float), within 1-2 ulp of exp; 2^n as two powers of two built in the exponent bits, so that the
  products down to the subnormals round once, and x clamped below where exp(x) rounds to 0.
*/
DDNN_AI inline double ExpNeg(double x)
{
  const double   xc = x < -746.0 ? -746.0 : x;
  const double   M  = 6755399441055744.0; /* 1.5 2^52 */
  const double   n  = (xc * 1.4426950408889634 + M) - M;
  const double   r  = (xc - n * 6.93145751953125e-1) - n * 1.42860682030941723212e-6;
  const double   r2 = r * r;
  const double   px = r * ((1.26177193074810590878e-4 * r2 + 3.02994407707441961300e-2) * r2 + 9.99999999999999999910e-1);
  const double   q  = ((3.00198505138664455042e-6 * r2 + 2.52448340349684104192e-3) * r2 + 2.27265548208155028766e-1) * r2 + 2.00000000000000000009e0;
  const double   e  = 1.0 + 2.0 * px / (q - px);
  const double   n1 = (n * 0.5 + M) - M; /* n1 and n - n1 >= -538: normal powers of two */
  return e * Pow2<double, unsigned long long, 52, 1023>(n1) * Pow2<double, unsigned long long, 52, 1023>(n - n1);
}
DDNN_AI inline float ExpNeg(float x)
{
  const float  xc = x < -104.0f ? -104.0f : x;
  const float  M  = 12582912.0f; /* 1.5 2^23 */
  const float  n  = (xc * 1.44269504088896341f + M) - M;
  const float  r  = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  const float  e  = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * r * r + r + 1.0f;
  const float  n1 = (n * 0.5f + M) - M; /* n1 and n - n1 >= -75 */
  return e * Pow2<float, unsigned int, 23, 127>(n1) * Pow2<float, unsigned int, 23, 127>(n - n1);
}
/* exp(-|x|) */
DDNN_AI inline double ExpNegAbs(double x)
{
  return ExpNeg(-__builtin_fabs(x));
}
DDNN_AI inline float ExpNegAbs(float x)
{
  return ExpNeg(-__builtin_fabsf(x));
}

/* sigmoid as the scalar form writes it (x >= 0: 1 / (1 + exp(-x)), else e / (1 + e), e = exp(x)), on
   exp(-|x|); NaN passes */
template <class T>
DDNN_AI inline T SigmoidV(T x)
{
  const T e = ExpNegAbs(x);
  const T s = (x >= (T)0 ? (T)1 : e) / ((T)1 + e);
  return x != x ? x : s;
}
/*
  tanh, branch-free (libm's tanh per entry was 1.9 of LeNet-5's 3.3 s in float32, 1.2 of 2.8 s in float64,
  bench/README.md): Cephes' tanhf and tanh, |x| < 0.625 the odd polynomial x + x^3 P(x^2) (float) or
  rational x + x^3 P(x^2) / Q(x^2) (double, degrees 2 and 3); otherwise (1 - e) / (1 + e), e = exp(-2|x|)
  on ExpNeg, with the sign of x (tanh(-0) = -0); NaN passes. Within 2 ulp of tanh (test
  FastActivation.TanhFloat32Vectorized, TanhFloat64Vectorized)
*/
DDNN_AI inline float TanhV(float x)
{
  const float a = __builtin_fabsf(x), z = x * x;
  const float p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
  const float e = ExpNegAbs(2.0f * x), q = (1.0f - e) / (1.0f + e);
  const float t = __builtin_copysignf(a < 0.625f ? __builtin_fabsf(p) : q, x);
  return x != x ? x : t;
}
DDNN_AI inline double TanhV(double x)
{
  const double a = __builtin_fabs(x), z = x * x;
  const double p = x + x * z * (((-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z - 1.61468768441708447952e3) / (((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z + 4.84406305325125486048e3));
  const double e = ExpNegAbs(2.0 * x), q = (1.0 - e) / (1.0 + e);
  const double t = __builtin_copysign(a < 0.625 ? __builtin_fabs(p) : q, x);
  return x != x ? x : t;
}
/* tanh forward, and its backward (1 - t^2) dy */
template <class T>
DDNN_AI static inline void TanhLoops(bool backward, const T *x, const T *dy, T *out, PetscInt n)
{
  if (!backward)
    for (PetscInt i = 0; i < n; i++) out[i] = TanhV(x[i]);
  else
    for (PetscInt i = 0; i < n; i++) {
      const T t = TanhV(x[i]);
      out[i]    = ((T)1 - t * t) * dy[i];
    }
}
template <class T>
DDNN_AI static inline void SigmoidLoops(bool backward, bool silu, const T *x, const T *dy, T *out, PetscInt n)
{
  if (!backward && !silu)
    for (PetscInt i = 0; i < n; i++) out[i] = SigmoidV(x[i]);
  else if (!backward)
    for (PetscInt i = 0; i < n; i++) out[i] = x[i] * SigmoidV(x[i]);
  else if (!silu)
    for (PetscInt i = 0; i < n; i++) {
      const T s = SigmoidV(x[i]);
      out[i]    = s * ((T)1 - s) * dy[i];
    }
  else
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i], s = SigmoidV(v);
      out[i]    = dy[i] * s * ((T)1 + v * ((T)1 - s));
    }
}
/*
  expm1(x) for x <= 0, branch-free (ELU): Cephes' expm1, the Pade form of exp on x itself where
  x >= -0.5 (no cancellation: r = x P(x^2), t = r / (Q(x^2) - r), 2t), exp(x) - 1 below (the result is
  then in [-1, -0.39]), both computed and one selected; -0 stays -0.
*/
DDNN_AI inline double Expm1Neg(double x)
{
  const double xs = x < -0.5 ? -0.5 : x, xx = xs * xs;
  const double r  = xs * ((1.2617719307481059087798e-4 * xx + 3.0299440770744196129956e-2) * xx + 9.9999999999999999991025e-1);
  const double t  = r / ((((3.0019850513866445504159e-6 * xx + 2.5244834034968410419224e-3) * xx + 2.2726554820815502876593e-1) * xx + 2.0000000000000000000897e0) - r);
  const double b  = ExpNeg(x) - 1.0;
  return x < -0.5 ? b : t + t;
}
/* the same in float32, 8 lanes to an AVX2 vector: expm1's Taylor series to x^9 / 9! where x >= -0.5 (the
   next term is below 1e-9 of the result there), expf(x) - 1 below */
DDNN_AI inline float Expm1Neg(float x)
{
  const float xs = x < -0.5f ? -0.5f : x;
  const float p  = ((((((((2.7557319224e-6f * xs + 2.4801587302e-5f) * xs + 1.9841269841e-4f) * xs + 1.3888888889e-3f) * xs + 8.3333333333e-3f) * xs + 4.1666666667e-2f) * xs + 1.6666666667e-1f) * xs + 0.5f));
  const float b  = ExpNeg(x) - 1.0f;
  return x < -0.5f ? b : xs + xs * xs * p;
}
/* ELU as the scalar form writes it: x <= 0 ? a expm1(x) : x, and dy a exp(x) : dy; NaN x: NaN out, dy passes */
template <class T>
DDNN_AI static inline void EluLoops(bool backward, T a, const T *x, const T *dy, T *out, PetscInt n)
{
  if (!backward)
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i], m = Expm1Neg(v < (T)0 ? v : (T)0);
      out[i]    = v <= (T)0 ? a * (v == (T)0 ? v : m) : v; /* expm1(+-0) = +-0 */
    }
  else
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i], g = dy[i], e = ExpNeg(v < (T)0 ? v : (T)0);
      out[i]    = v <= (T)0 ? g * a * e : g;
    }
}
/*
  erf(z) in float32, branch-free (GELU), given e = exp(-z^2): Cephes' erff, z T(z^2), where |z| <= 1;
  beyond, 1 - erfc(|z|) with erfc(a) = e F(a), F = exp(a^2) erfc(a) a polynomial of degree 8 in a - 1
  over [1, 4] (a clamped at 4: erfc(4) = 1.5e-8 is below half an ulp of 1, and e F(4) is off erfc by
  at most 2e-10 beyond), fitted for erf's absolute error (a weighted minimax: at most 9.3e-9 off
  erfc, evaluated in float32, against 6e-8 for rounding 1 - erfc; no division, where Cephes' erfc
  forms e P(1/a^2) / a for its relative error). Both branches are computed and one selected, the
  sign put back; NaN passes.
*/
DDNN_AI inline float ErfF(float z, float e)
{
  const float a  = __builtin_fabsf(z);
  const float as = a > 1.0f ? 1.0f : a, zz = as * as;
  const float sm = as * ((((((7.853861353153693e-5f * zz - 8.010193625184903e-4f) * zz + 5.188327685732524e-3f) * zz - 2.685381193529856e-2f) * zz + 1.128358514861418e-1f) * zz - 3.761262582423300e-1f) * zz + 1.128379165726710e+0f);
  const float t  = (a < 1.0f ? 1.0f : (a > 4.0f ? 4.0f : a)) - 1.0f;
  const float f  = (((((((1.0684982695e-4f * t - 1.0571016458e-3f) * t + 4.9114093940e-3f) * t - 1.5110327859e-2f) * t + 3.6875112832e-2f) * t - 7.9053399191e-2f) * t + 1.5435056617e-1f) * t - 2.7321107748e-1f) * t + 4.2758356963e-1f;
  const float bg = 1.0f - e * f;
  return __builtin_copysignf(a > 1.0f ? bg : sm, z);
}
/* GELU, erf form, in float32: x/2 (1 + erf(x / sqrt 2)), and dy (Phi(x) + x phi(x)); one exp(-x^2 / 2)
   serves erf and phi */
DDNN_AI static inline void GeluErfLoopsF(bool backward, const float *x, const float *dy, float *out, PetscInt n)
{
  if (!backward)
    for (PetscInt i = 0; i < n; i++) {
      const float v = x[i];
      out[i]        = 0.5f * v * (1.0f + ErfF(v * (float)kInvSqrt2, ExpNeg(-0.5f * v * v)));
    }
  else
    for (PetscInt i = 0; i < n; i++) {
      const float v = x[i], e = ExpNeg(-0.5f * v * v);
      out[i]        = (0.5f * (1.0f + ErfF(v * (float)kInvSqrt2, e)) + v * (float)kInvSqrt2Pi * e) * dy[i];
    }
}
/*
  GELU, tanh form (PyTorch's approximate = 'tanh'), in double for both types as its scalar loop was:
  x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + kappa x^3), written x s(2u) (1 + tanh(u) = 2 s(2u), s the
  sigmoid), and torch's GeluBackwardKernel's 1/2 (1 + t) + x/2 (1 - t^2) u' as s + 2 x s s' u' with
  s' = 1 - s = s(-2u) (1 - t^2 = 4 s s'): both from one exp(-2|u|), so that neither 1 + tanh(u) nor
  1 - t^2 nor 1 - s is formed by cancellation
*/
template <class T>
DDNN_AI static inline void GeluTanhLoops(bool backward, const T *x, const T *dy, T *out, PetscInt n)
{
  if (!backward)
    for (PetscInt i = 0; i < n; i++) {
      const double v = (double)x[i];
      out[i]         = (T)(v * SigmoidV(2.0 * kSqrt2OnPi * (v + kKappa * v * v * v)));
    }
  else
    for (PetscInt i = 0; i < n; i++) {
      const double v = (double)x[i], v2 = v * v, w = 2.0 * kSqrt2OnPi * (v + kKappa * v2 * v);
      const double e = ExpNegAbs(w), d = 1.0 + e, s = (w >= 0.0 ? 1.0 : e) / d, sc = (w >= 0.0 ? e : 1.0) / d;
      out[i]         = (T)((s + 2.0 * v * s * sc * kSqrt2OnPi * (1.0 + 3.0 * kKappa * v2)) * (double)dy[i]);
    }
}
/*
  log(1 + e) for 0 <= e <= 1, branch-free (softplus): Cephes' log on 1 + e without forming it, so that
  no rounding of 1 + e is lost: f = e (k = 0) where e <= sqrt 2 - 1, else f = (1 + e) / 2 - 1 = (e - 1) / 2
  (k = 1); then log(1 + f) = f - f^2 / 2 + f^3 P(f) / Q(f) on [sqrt(1/2) - 1, sqrt 2 - 1] (degrees 5 and 5)
  and k ln 2 added in two parts, as Cephes' log adds its exponent
*/
DDNN_AI inline double Log1pUnitD(double e)
{
  const bool   big = e > 0.41421356237309504880;
  const double f = big ? 0.5 * (e - 1.0) : e, k = big ? 1.0 : 0.0, z = f * f;
  const double p = ((((1.01875663804580931796e-4 * f + 4.97494994976747001425e-1) * f + 4.70579119878881725854e0) * f + 1.44989225341610930846e1) * f + 1.79368678507819816313e1) * f + 7.70838733755885391666e0;
  const double q = ((((f + 1.12873587189167450590e1) * f + 4.52279145837532221105e1) * f + 8.29875266912776603211e1) * f + 7.11544750618563894466e1) * f + 2.31251620126765340583e1;
  const double y = (f * (z * p / q) - k * 2.121944400546905827679e-4) - 0.5 * z;
  return (f + y) + k * 0.693359375;
}
/*
  softplus as PyTorch writes it: b x > threshold ? x : log1p(exp(b x)) / b, and dy (b x > threshold ? 1 :
  s(b x)) backward (torch: z / (z + 1), z = exp(b x)). The threshold's test in T as torch's; the log in
  double for both types, log1p(exp(t)) = max(t, 0) + log1p(exp(-|t|)), rounded once; NaN passes
*/
template <class T>
DDNN_AI static inline void SoftplusLoops(bool backward, T b, T th, const T *x, const T *dy, T *out, PetscInt n)
{
  if (!backward)
    for (PetscInt i = 0; i < n; i++) {
      const T      v = x[i], bv = b * v;
      const double t = (double)bv, sp = (t > 0.0 ? t : 0.0) + Log1pUnitD(ExpNegAbs(t));
      const T      r = (T)(sp / (double)b);
      out[i]         = bv > th ? v : (v != v ? v : r);
    }
  else
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i], g = dy[i], bv = b * v;
      out[i] = bv > th ? g : g * SigmoidV(bv);
    }
}
/*
  Each loop compiled three times: for SSE2 (x86-64's baseline), for AVX2 (8 floats, 4 doubles) and for
  AVX-512 (F, DQ, VL, BW: 16 floats, 8 doubles, and mask registers for the selects), none contracting to
  fused multiply-adds (AVX-512F has them; -ffp-contract=off above), so all three give the same bits;
  NAME(...) calls the widest copy the CPU has (HaveAvx512(), HaveAvx2()). On an AMD EPYC with AVX-512
  the AVX-512 copies ran bench_layers' activations 1.2-1.7x faster than the AVX2 ones (bench/README)
*/
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
  #define DDNN_AVX2_COPIES 1
#endif
#define DDNN_LOOP_COPIES(NAME, LOOPS, PARAMS, ARGS) DDNN_ISA_COPIES(NAME, LOOPS, PARAMS, ARGS, "avx2", HaveAvx2())
DDNN_LOOP_COPIES(TanhLoop, TanhLoops, (bool backward, const T *x, const T *dy, T *out, PetscInt n), (backward, x, dy, out, n))
DDNN_LOOP_COPIES(SigmoidLoop, SigmoidLoops, (bool backward, bool silu, const T *x, const T *dy, T *out, PetscInt n), (backward, silu, x, dy, out, n))
DDNN_LOOP_COPIES(EluLoop, EluLoops, (bool backward, T a, const T *x, const T *dy, T *out, PetscInt n), (backward, a, x, dy, out, n))
/* GELU (erf form): float32 on the branch-free erf; float64 below (a branch-free Cephes erf in double, tried,
   ran no faster than libm's) */
DDNN_LOOP_COPIES(GeluErfLoop, GeluErfLoopsF, (bool backward, const T *x, const T *dy, T *out, PetscInt n), (backward, x, dy, out, n))
DDNN_LOOP_COPIES(GeluTanhLoop, GeluTanhLoops, (bool backward, const T *x, const T *dy, T *out, PetscInt n), (backward, x, dy, out, n))
DDNN_LOOP_COPIES(SoftplusLoop, SoftplusLoops, (bool backward, T b, T th, const T *x, const T *dy, T *out, PetscInt n), (backward, b, th, x, dy, out, n))
#undef DDNN_LOOP_COPIES
#if defined(__GNUC__) && !defined(__clang__)
  #pragma GCC pop_options
#endif
/*
  erf or exp of t[0, n) in place, in double: on glibc's vector math library where the process can load it
  (libmvec.so.1 of glibc >= 2.35, looked up once with dlopen, so that libddnn runs on an older glibc too): 8, 4 or
  2 lanes a call, as HaveAvx512() and HaveAvx2() say, at most 4 ulp (erf 1.7 ns and exp 1.1 ns an entry with
  AVX-512 on an AMD EPYC, against 8-9 ns for libm's erf); else libm's per entry. A lane's result does not depend
  on the other lanes (the tail runs in a zero-padded vector), so a run gives the bits of its entries one by one,
  wherever a partition cuts it
*/
#if defined(DDNN_AVX2_COPIES)
} // namespace
} // namespace ddnn
  #include <dlfcn.h>
  #include <immintrin.h>
namespace ddnn
{
namespace
{
/* libmvec's erf and exp of 8, 4 and 2 lanes ([0]: erf, [1]: exp), all found or none */
struct Mvec {
  __m512d (*f8[2])(__m512d) = {nullptr, nullptr};
  __m256d (*f4[2])(__m256d) = {nullptr, nullptr};
  __m128d (*f2[2])(__m128d) = {nullptr, nullptr};
  bool ok                   = false;
  Mvec()
  {
    void *h = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    const char *n8[2] = {"_ZGVeN8v_erf", "_ZGVeN8v_exp"}, *n4[2] = {"_ZGVdN4v_erf", "_ZGVdN4v_exp"}, *n2[2] = {"_ZGVbN2v_erf", "_ZGVbN2v_exp"};
    ok = true;
    for (int k = 0; k < 2; k++) {
      void *a = dlsym(h, n8[k]), *b = dlsym(h, n4[k]), *c = dlsym(h, n2[k]);
      if (!a || !b || !c) ok = false;
      std::memcpy(&f8[k], &a, sizeof(a));
      std::memcpy(&f4[k], &b, sizeof(b));
      std::memcpy(&f2[k], &c, sizeof(c));
    }
    if (!ok) dlclose(h); /* else kept open for the process's life */
  }
};
const Mvec &TheMvec()
{
  static const Mvec m;
  return m;
}
  #define DDNN_MVEC_APPLY(NAME, TARGET, W, LOAD, STORE, FN) \
    __attribute__((target(TARGET))) void NAME(int k, double *t, PetscInt n) \
    { \
      const auto f = TheMvec().FN[k]; \
      PetscInt   i = 0; \
      for (; i + W <= n; i += W) STORE(t + i, f(LOAD(t + i))); \
      if (i < n) { \
        double pad[W] = {0}; \
        for (PetscInt j = 0; j < n - i; j++) pad[j] = t[i + j]; \
        STORE(pad, f(LOAD(pad))); \
        for (PetscInt j = 0; j < n - i; j++) t[i + j] = pad[j]; \
      } \
    }
DDNN_MVEC_APPLY(MvecApply8, "avx512f", 8, _mm512_loadu_pd, _mm512_storeu_pd, f8)
DDNN_MVEC_APPLY(MvecApply4, "avx2", 4, _mm256_loadu_pd, _mm256_storeu_pd, f4)
DDNN_MVEC_APPLY(MvecApply2, "sse2", 2, _mm_loadu_pd, _mm_storeu_pd, f2)
  #undef DDNN_MVEC_APPLY
#endif
void ErfOrExpInPlace(bool isexp, double *t, PetscInt n)
{
#if defined(DDNN_AVX2_COPIES)
  if (TheMvec().ok) {
    if (HaveAvx512()) MvecApply8(isexp, t, n);
    else if (HaveAvx2()) MvecApply4(isexp, t, n);
    else MvecApply2(isexp, t, n);
    return;
  }
#endif
  for (PetscInt i = 0; i < n; i++) t[i] = isexp ? std::exp(t[i]) : std::erf(t[i]);
}

/* GELU (erf form) in float64: x/2 (1 + erf(x / sqrt 2)), and dy (Phi(x) + x phi(x)), PyTorch's formulas, in
   blocks of 256 entries, erf and exp vectorized (ErfOrExpInPlace()); out may be x (forward) or dy (backward) */
void GeluErfD(bool backward, const double *x, const double *dy, double *out, PetscInt n)
{
  constexpr PetscInt B = 256;
  double             t[B], e[B];
  for (PetscInt s = 0; s < n; s += B) {
    const PetscInt m = n - s < B ? n - s : B;
    for (PetscInt i = 0; i < m; i++) t[i] = x[s + i] * kInvSqrt2;
    ErfOrExpInPlace(false, t, m);
    if (!backward) {
      for (PetscInt i = 0; i < m; i++) out[s + i] = 0.5 * x[s + i] * (1.0 + t[i]);
    } else {
      for (PetscInt i = 0; i < m; i++) e[i] = -0.5 * x[s + i] * x[s + i];
      ErfOrExpInPlace(true, e, m);
      for (PetscInt i = 0; i < m; i++) out[s + i] = (0.5 * (1.0 + t[i]) + x[s + i] * kInvSqrt2Pi * e[i]) * dy[s + i];
    }
  }
}
} // namespace

/* the variable set in the environment to a value other than empty, 0, false or no (any case) */
static bool EnvOff(const char *var)
{
  const char *e = std::getenv(var);
  if (!e || !*e) return false;
  for (const char *off : {"0", "false", "no"})
    if (!strcasecmp(e, off)) return false;
  return true;
}

/* the CPU has AVX2 and DDNN_NO_AVX2 does not ask for the SSE2 loops (the tests run the SSE2 copies of the loops so) */
bool HaveAvx2()
{
#if defined(DDNN_AVX2_COPIES)
  static const bool have = __builtin_cpu_supports("avx2") && !EnvOff("DDNN_NO_AVX2");
  return have;
#else
  return false;
#endif
}

/* the CPU has AVX-512 F, DQ, VL and BW, and neither DDNN_NO_AVX512 (the AVX2 loops) nor DDNN_NO_AVX2 (the
   SSE2 loops) asks for narrower copies */
bool HaveAvx512()
{
#if defined(DDNN_AVX2_COPIES)
  static const bool have = HaveAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") && !EnvOff("DDNN_NO_AVX512");
  return have;
#else
  return false;
#endif
}

template <class T>
void ActivationForward(DDActivationType type, const ActParams<T> &p, const T *x, T *y, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU:
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i];
      y[i]      = v < (T)0 ? (T)0 : v;
    }
    break;
  case DD_ACT_LEAKYRELU:
  case DD_ACT_PRELU: {
    LeakyForward(p.slope, x, y, n);
  } break;
  case DD_ACT_TANH:
    TanhLoop(false, x, (const T *)nullptr, y, n);
    break;
  case DD_ACT_SIGMOID:
    SigmoidLoop(false, false, x, (const T *)nullptr, y, n);
    break;
  case DD_ACT_GELU:
    if (p.gelutanh) GeluTanhLoop(false, x, (const T *)nullptr, y, n);
    else if constexpr (std::is_same<T, float>::value) GeluErfLoop(false, x, (const T *)nullptr, y, n);
    else GeluErfD(false, x, nullptr, y, n);
    break;
  case DD_ACT_IDENTITY:
    if (y != x)
      for (PetscInt i = 0; i < n; i++) y[i] = x[i];
    break;
  case DD_ACT_SILU:
    SigmoidLoop(false, true, x, (const T *)nullptr, y, n);
    break;
  case DD_ACT_ELU:
    EluLoop(false, (T)p.alpha, x, (const T *)nullptr, y, n);
    break;
  case DD_ACT_SOFTPLUS:
    SoftplusLoop(false, p.beta, p.threshold, x, (const T *)nullptr, y, n);
    break;
  }
}

template <class T>
void ActivationBackward(DDActivationType type, const ActParams<T> &p, const T *x, const T *dy, T *dx, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU: /* f'(0) = 0, as PyTorch */
    for (PetscInt i = 0; i < n; i++) { /* both loads unconditional: the select vectorizes */
      const T v = x[i], g = dy[i];
      dx[i]     = v <= (T)0 ? (T)0 : g;
    }
    break;
  case DD_ACT_LEAKYRELU:
  case DD_ACT_PRELU: {
    LeakyBackward(p.slope, x, dy, dx, n);
  } break;
  case DD_ACT_TANH:
    TanhLoop(true, x, dy, dx, n);
    break;
  case DD_ACT_SIGMOID:
    SigmoidLoop(true, false, x, dy, dx, n);
    break;
  case DD_ACT_GELU:
    if (p.gelutanh) GeluTanhLoop(true, x, dy, dx, n);
    else if constexpr (std::is_same<T, float>::value) GeluErfLoop(true, x, dy, dx, n); /* Phi(x) + x phi(x) */
    else GeluErfD(true, x, dy, dx, n);
    break;
  case DD_ACT_IDENTITY:
    if (dx != dy)
      for (PetscInt i = 0; i < n; i++) dx[i] = dy[i];
    break;
  case DD_ACT_SILU:
    SigmoidLoop(true, true, x, dy, dx, n);
    break;
  case DD_ACT_ELU:
    EluLoop(true, (T)p.alpha, x, dy, dx, n);
    break;
  case DD_ACT_SOFTPLUS:
    SoftplusLoop(true, p.beta, p.threshold, x, dy, dx, n);
    break;
  }
}

/*
  The backward from the output y = f(v) (the fused activations: the conv or affine layer wrote y, the
  activation layer's input is y, not v). The same expressions as ActivationBackward's on t = f(v),
  in the same order, so that where y holds exactly the forward's f(v) (our kernels; not a oneDNN
  post-op) dx is bitwise the unfused one: tanh' = 1 - y^2, sigmoid' = y (1 - y), relu's mask
  y <= 0 (the same as v <= 0; NaN passes dy).
*/
template <class T>
bool ActivationBackwardFromOutput(DDActivationType type, const T *y, const T *dy, T *dx, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU:
    for (PetscInt i = 0; i < n; i++) {
      const T v = y[i], g = dy[i];
      dx[i]     = v <= (T)0 ? (T)0 : g;
    }
    return true;
  case DD_ACT_TANH:
    for (PetscInt i = 0; i < n; i++) {
      const T t = y[i];
      dx[i]     = ((T)1 - t * t) * dy[i];
    }
    return true;
  case DD_ACT_SIGMOID:
    for (PetscInt i = 0; i < n; i++) {
      const T s = y[i];
      dx[i]     = s * ((T)1 - s) * dy[i];
    }
    return true;
  default:
    return false;
  }
}

#define DD_INSTANTIATE(T) \
  template void ActivationForward<T>(DDActivationType, const ActParams<T> &, const T *, T *, PetscInt); \
  template void ActivationBackward<T>(DDActivationType, const ActParams<T> &, const T *, const T *, T *, PetscInt); \
  template bool ActivationBackwardFromOutput<T>(DDActivationType, const T *, const T *, T *, PetscInt);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
