/*
  Winograd F(2x2, 3x3), F(4x4, 3x3) and F(2x2x2, 3x3x3) kernels of the 3 x 3 (x 3), stride-1 convolution (C++ only;
  src/backend/blas/conv_winograd.cxx): the three passes of ConvForwardRef, ConvBackwardDataRef and
  ConvBackwardWeightsRef (same signatures and semantics) with 16 (36) GEMMs of Co x Ci in the
  transformed domain in place of im2col's Co x 9 Ci one, 2.25 (4) times fewer multiplications;
  F(4x4, 3x3) in float64 on outputs of at least 12 x 12; 3 x 3 x 3 taps take F(2x2x2, 3x3x3), 64 GEMMs
  in place of im2col's Co x 27 Ci one, 3.4 times fewer multiplications.
  Checked against the reference loops (tests/test_08_kernels.cxx), for T = float and double.
*/
#pragma once
#include <backend/kernels.hpp>

namespace ddnn
{
/* whether the Winograd kernels take g: 3 x 3 taps over the last two dimensions (1 over the first, or 3 in a 3-D problem), unit strides and dilations, one group */
bool ConvWinogradApplies(const ConvGeom &g);
/* whether they are also the faster choice than im2col + GEMM: where they apply, with at least 16 input and 16 output channels (3 x 3 x 3 taps: 8) */
bool ConvWinogradPreferred(const ConvGeom &g);
/* the kernel's name (which of F(4x4, 3x3) and F(2x2, 3x3) the kernels below take for g) */
template <class T>
const char *ConvWinogradName(const ConvGeom &g);

template <class T> /* y = conv(x, w) + b (b may be NULL): overwrites y, as ConvForwardRef */
void ConvForwardWinograd(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y);
template <class T> /* dx += J_x^* dy, as ConvBackwardDataRef */
void ConvBackwardDataWinograd(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx);
template <class T> /* dw += J_w^* dy, db += J_b^* dy (db may be NULL), as ConvBackwardWeightsRef */
void ConvBackwardWeightsWinograd(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db);
} // namespace ddnn
