/*
  Fast CPU kernels (C++ only) of pooling, upsampling and the pointwise activations, float32 and
  float64 (explicit instantiations): src/backend/cpu/pool_fast.cxx, upsample_fast.cxx,
  pointwise.cxx.

  The pooling and upsampling kernels have the signatures and the semantics of the reference
  loops of src/backend/kernels.hpp (PoolForwardRef, UpsampleForwardRef, ...) and are checked
  against them (tests/test_08_fastkernels.cxx): they walk the same boxes (BoxOffsets) but hoist
  the index arithmetic out of the inner loops, which run over contiguous runs (the innermost
  spatial dimension of a plain layout, the channels of a channels-last or blocked one) so that
  the compiler vectorizes them.
*/
#pragma once
#include <backend/kernels.hpp>
#include <ddlayer.h>

namespace ddnn
{
/* y = pool(x), argmax (may be NULL) as PoolForwardRef: every value and argmax bitwise equal to it */
template <class T>
void PoolForwardFast(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *argmax);
/* dx += J^* dy, as PoolBackwardRef (max pooling: bitwise equal; average: equal up to rounding) */
template <class T>
void PoolBackwardFast(const PoolGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const PetscInt *argmax);

/* y = interp(x), as UpsampleForwardRef (the same sums in the same order: bitwise equal) */
template <class T>
void UpsampleForwardFast(const UpsampleGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo);
/* dx += interp^*(dy), as UpsampleBackwardRef (nearest: bitwise equal; linear: equal up to rounding) */
template <class T>
void UpsampleBackwardFast(const UpsampleGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo);

/* the spectral layer's mode mixing, as SpectralMixRef and SpectralMixAdjointRef up to rounding (src/backend/cpu/spectral_fast.cxx) */
template <class T>
void SpectralMixFast(const SpectralMixGeom &g, const T *X, const T *W, T *Y);
template <class T>
void SpectralMixAdjointFast(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW);

/*
  NAME PARAMS defined as LOOPS ARGS compiled three times: for AVX-512 (F, DQ, VL, BW), for AVX2 (the target
  string AVX2TARGET: "avx2", or "avx2,fma" where the loops may contract to fused multiply-adds) and for
  x86-64's SSE2 baseline; NAME(...) calls the widest copy the CPU has (HaveAvx512(), else the AVX2 copy
  where AVX2OK holds, else the baseline). One copy on other compilers and CPUs.
*/
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
  #define DDNN_ISA_COPIES(NAME, LOOPS, PARAMS, ARGS, AVX2TARGET, AVX2OK) \
    template <class T> \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) void NAME##Avx512 PARAMS \
    { \
      LOOPS ARGS; \
    } \
    template <class T> \
    __attribute__((target(AVX2TARGET))) void NAME##Avx2 PARAMS \
    { \
      LOOPS ARGS; \
    } \
    template <class T> \
    void NAME##Base PARAMS \
    { \
      LOOPS ARGS; \
    } \
    template <class T> \
    void NAME PARAMS \
    { \
      if (HaveAvx512()) NAME##Avx512 ARGS; \
      else if (AVX2OK) NAME##Avx2 ARGS; \
      else NAME##Base ARGS; \
    }
#else
  #define DDNN_ISA_COPIES(NAME, LOOPS, PARAMS, ARGS, AVX2TARGET, AVX2OK) \
    template <class T> \
    void NAME PARAMS \
    { \
      LOOPS ARGS; \
    }
#endif

/* whether the loops compiled for AVX2 run: the CPU has AVX2, and DDNN_NO_AVX2 is not set in the environment
   to a value other than empty, 0, false or no (the tests run the SSE2 copies so); false where no AVX2 copies
   are compiled (src/backend/cpu/pointwise.cxx) */
bool HaveAvx2();
/* whether the pointwise loops' AVX-512 copies run: the CPU has AVX-512 F, DQ, VL and BW, HaveAvx2(), and
   DDNN_NO_AVX512 is not set in the environment to a value other than empty, 0, false or no (the tests run
   the AVX2 copies so); the same bits as the narrower copies */
bool HaveAvx512();

/*
  Pointwise activations over a contiguous run of n entries, PyTorch's semantics, NaN included
  (relu and leakyrelu let NaN through; relu's derivative is 0 for x <= 0 and 1 otherwise, so a
  NaN input passes dy on, as torch's threshold_backward; leakyrelu's is the slope for x <= 0 and
  for NaN, as torch's leaky_relu_backward; prelu is leakyrelu with its weight as the slope). The
  parameters (slope, alpha, beta, threshold, gelu's approximation) are in p. dy may alias dx.
*/
template <class T>
void ActivationForward(DDActivationType type, const ActParams<T> &p, const T *x, T *y, PetscInt n);
template <class T> /* dx = f'(x) dy */
void ActivationBackward(DDActivationType type, const ActParams<T> &p, const T *x, const T *dy, T *dx, PetscInt n);
/*
  dx = f'(v) dy from the output y = f(v) instead of v (dy may alias dx), for the activations that a
  convolution or a dense layer writes fused (-net_fuse): relu, tanh (1 - y^2), sigmoid (y (1 - y)).
  Returns false, computing nothing, for the other types. Bitwise ActivationBackward's result when y
  is bitwise ActivationForward's.
*/
template <class T>
bool ActivationBackwardFromOutput(DDActivationType type, const T *y, const T *dy, T *dx, PetscInt n);
/* the same with only leakyrelu's slope set (the other parameters at torch's defaults) */
template <class T>
inline void ActivationForward(DDActivationType type, T slope, const T *x, T *y, PetscInt n)
{
  ActParams<T> p;
  p.slope = slope;
  ActivationForward<T>(type, p, x, y, n);
}
template <class T>
inline void ActivationBackward(DDActivationType type, T slope, const T *x, const T *dy, T *dx, PetscInt n)
{
  ActParams<T> p;
  p.slope = slope;
  ActivationBackward<T>(type, p, x, dy, dx, n);
}
} // namespace ddnn
