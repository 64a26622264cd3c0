/*
  GEMM kernels of the convolution and the transposed convolution (C++ only): im2col/col2im
  on tiles of positions and BLAS sgemm/dgemm (src/backend/blas/conv_gemm.cxx). Same
  signatures and semantics as the reference loops of src/backend/kernels.hpp, which they are
  checked against (tests/test_08_kernels.cxx), for T = float and double.
*/
#pragma once
#include <backend/kernels.hpp>

namespace ddnn
{
template <class T> /* y = conv(x, w) + b (b may be NULL): overwrites y, as ConvForwardRef */
void ConvForwardGemm(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y);
template <class T> /* dx += J_x^* dy, as ConvBackwardDataRef */
void ConvBackwardDataGemm(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx);
template <class T> /* dw += J_w^* dy, db += J_b^* dy (db may be NULL), as ConvBackwardWeightsRef */
void ConvBackwardWeightsGemm(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db);

template <class T> /* y = convT(x, w) + b (b may be NULL): overwrites the box, as ConvTForwardRef */
void ConvTForwardGemm(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y);
template <class T> /* dx += J_x^* dy, as ConvTBackwardDataRef */
void ConvTBackwardDataGemm(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx);
template <class T> /* dw += J_w^* dy, db += J_b^* dy (db may be NULL), as ConvTBackwardWeightsRef */
void ConvTBackwardWeightsGemm(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db);
} // namespace ddnn
