/*
  Pointwise activation kernels (the layer DDLAYERACTIVATION calls them on contiguous runs of its
  storage; paper 000 sec. 4: hyper-local, no data movement). One loop per function so that the
  simple ones (relu, leakyrelu, identity) vectorize. NaN semantics are PyTorch's 1.13
  (aten/src/ATen/native/Activation.cpp, cpu/Activation.cpp):
    relu(x)       = x < 0 ? 0 : x              (clamp_min: NaN passes, relu(-0) = -0)
    relu'(x) dy   = x <= 0 ? 0 : dy            (threshold_backward: NaN input passes dy)
    leaky(x)      = x > 0 ? x : slope x        (NaN passes)
    leaky'(x) dy  = x > 0 ? dy : slope dy      (NaN input: slope dy)
  tanh, sigmoid and gelu propagate NaN through their arithmetic.
*/
#include <backend/cpu/fastkernels.hpp>
#include <cmath>

namespace ddnn
{
namespace
{
constexpr double kInvSqrt2   = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <class T>
inline T Sigmoid(T x)
{
  if (x >= 0) return (T)1 / ((T)1 + std::exp(-x));
  const T e = std::exp(x); /* NaN lands here and stays NaN */
  return e / ((T)1 + e);
}
} // namespace

template <class T>
void ActivationForward(DDActivationType type, T slope, const T *x, T *y, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU:
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i];
      y[i]      = v < (T)0 ? (T)0 : v;
    }
    break;
  case DD_ACT_LEAKYRELU:
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i];
      y[i]      = v > (T)0 ? v : slope * v;
    }
    break;
  case DD_ACT_TANH:
    for (PetscInt i = 0; i < n; i++) y[i] = std::tanh(x[i]);
    break;
  case DD_ACT_SIGMOID:
    for (PetscInt i = 0; i < n; i++) y[i] = Sigmoid(x[i]);
    break;
  case DD_ACT_GELU:
    for (PetscInt i = 0; i < n; i++) y[i] = (T)(0.5 * (double)x[i] * (1.0 + std::erf((double)x[i] * kInvSqrt2)));
    break;
  case DD_ACT_IDENTITY:
    if (y != x)
      for (PetscInt i = 0; i < n; i++) y[i] = x[i];
    break;
  }
}

template <class T>
void ActivationBackward(DDActivationType type, T slope, const T *x, const T *dy, T *dx, PetscInt n)
{
  switch (type) {
  case DD_ACT_RELU: /* f'(0) = 0, as PyTorch */
    for (PetscInt i = 0; i < n; i++) { /* both loads unconditional: the select vectorizes */
      const T v = x[i], g = dy[i];
      dx[i]     = v <= (T)0 ? (T)0 : g;
    }
    break;
  case DD_ACT_LEAKYRELU:
    for (PetscInt i = 0; i < n; i++) {
      const T v = x[i], g = dy[i];
      dx[i]     = v > (T)0 ? g : slope * g;
    }
    break;
  case DD_ACT_TANH:
    for (PetscInt i = 0; i < n; i++) {
      const T t = std::tanh(x[i]);
      dx[i]     = ((T)1 - t * t) * dy[i];
    }
    break;
  case DD_ACT_SIGMOID:
    for (PetscInt i = 0; i < n; i++) {
      const T s = Sigmoid(x[i]);
      dx[i]     = s * ((T)1 - s) * dy[i];
    }
    break;
  case DD_ACT_GELU: /* Phi(x) + x phi(x) */
    for (PetscInt i = 0; i < n; i++) {
      const double v = (double)x[i];
      dx[i]          = (T)((0.5 * (1.0 + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v)) * (double)dy[i]);
    }
    break;
  case DD_ACT_IDENTITY:
    if (dx != dy)
      for (PetscInt i = 0; i < n; i++) dx[i] = dy[i];
    break;
  }
}

#define DD_INSTANTIATE(T) \
  template void ActivationForward<T>(DDActivationType, T, const T *, T *, PetscInt); \
  template void ActivationBackward<T>(DDActivationType, T, const T *, const T *, T *, PetscInt);
DD_INSTANTIATE(float)
DD_INSTANTIATE(double)
} // namespace ddnn
