/*
  The loops behind the backends' kernel tables (C++ only): strided views of a tensor's storage,
  the plain reference loops (src/backend/reference, backend /cpu/ref) and the fast loops of the
  CPU backends. The geometry structs are the seam's (include/ddnn/private/ddbackendimpl.h).
*/
#pragma once
#include <ddnn/private/ddbackendimpl.h>
#include <tensor/layout.hpp>

namespace ddnn
{


/* the read-only view */
template <class T>
inline View<const T> CView(const View<T> &v)
{
  View<const T> r;
  r.p  = v.p;
  r.sn = v.sn;
  r.sc = v.sc;
  r.s0 = v.s0;
  r.s1 = v.s1;
  r.s2 = v.s2;
  return r;
}

/*
  The view of tensor t starting at storage coordinates origin[] (all dimensions), whose
  dimensions lead, lead+1 are N and C and the last D are spatial. Needs a strided format.
*/
template <class T>
inline View<T> MakeView(DDTensor t, PetscInt lead, const PetscInt origin[], PetscInt D)
{
  const DDLayout &L = t->layout;
  View<T>         v;
  v.p        = (T *)t->array + LayoutOffset(L, origin);
  v.sn       = L.stride[lead];
  v.sc       = L.stride[lead + 1];
  PetscInt s[3] = {0, 0, 0};
  for (PetscInt j = 0; j < D; j++) s[3 - D + j] = L.stride[lead + 2 + j];
  v.s0 = s[0];
  v.s1 = s[1];
  v.s2 = s[2];
  return v;
}

/* db += the sums of dy over the whole output box, per output channel (conv and transposed conv, any geometry
   with N, Co and out[3]) */
template <class T, class Geom>
inline void BiasGradientRef(const Geom &g, const View<const T> &dy, T *db)
{
  for (PetscInt co = 0; co < g.Co; co++) {
    T acc = 0;
    for (PetscInt n = 0; n < g.N; n++)
      for (PetscInt o0 = 0; o0 < g.out[0]; o0++)
        for (PetscInt o1 = 0; o1 < g.out[1]; o1++)
          for (PetscInt o2 = 0; o2 < g.out[2]; o2++) acc += dy.at(n, co, o0, o1, o2);
    db[co] += acc;
  }
}

/* Reference convolution loops (any element type). w is (Co, Ci, k0, k1, k2) in C order. */
template <class T>
void ConvForwardRef(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y);
template <class T> /* dx += J_x^* dy */
void ConvBackwardDataRef(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx);
template <class T> /* dw += J_w^* dy, db += J_b^* dy (db may be NULL) */
void ConvBackwardWeightsRef(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db);

/* Transposed convolution = the adjoint of a convolution mapping the output back to the input */
template <class T> /* y (the "input" side of the conv, size g.in) += conv^*(x (size g.out)) with w (Ci, Co, k) */
void ConvTransposeForwardRef(const ConvGeom &g, const View<const T> &x, const T *w, const View<T> &y);

/* ------------------------------------------------------------------------------------------
  Normalization kernels (src/backend/reference/norm_ref.cxx): batch and group normalization.

  Every kernel walks the bulk of one rank's piece of an N x C x spatial tensor in storage order,
  as tiles of `lanes` consecutive channels at `npos` positions (plain: one channel per tile and
  the spatial run contiguous; channels-last: all channels innermost; blocked nChw16c/8c: one
  channel block), so that the inner loops are contiguous and no per-element offset is computed.
  Per-channel quantities are indexed [c] (batch norm, persample = false) or [n Cl + c] (group
  norm, persample = true), with n and c the local sample and channel and Cl = L.n[1].
  Sums accumulate in double.
------------------------------------------------------------------------------------------ */

/* Whether the kernels can walk two layouts of the same piece together (same bulk, storage order and blocking) */
bool NormLayoutsMatch(const DDLayout &A, const DDLayout &B);
/* Whether the kernels support this layout at all (a blocked format must block the channel, dimension 1) */
bool NormLayoutSupported(const DDLayout &L);

/* cnt, mean, m2 (= sum (x - mean)^2): exact two passes over cache-sized chunks, merged with Chan's formula */
template <class T>
void NormMoments(const DDLayout &L, const T *x, bool persample, double *cnt, double *mean, double *m2);
/* y = a (x - mu) + b with per-(sample,) channel mu, a, b (centred first: robust in float32) */
template <class T>
void NormScaleShift(const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, bool persample, const double *mu, const double *a, const double *b);
/* sdy = sum dy, sdyx = sum dy (x - mu), overwritten */
template <class T>
void NormBackwardSums(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, bool persample, const double *mu, double *sdy, double *sdyx);
/* dx = a dy + b (x - mu) + c */
template <class T>
void NormBackwardApply(const DDLayout &Lx, const T *x, const DDLayout &Ld, const T *dy, const DDLayout &Lo, T *dx, bool persample, const double *mu, const double *a, const double *b, const double *c);
} // namespace ddnn

/* ------------------------------------------------------------------------------------------ */
/* Pooling and upsampling (src/backend/reference/pool_ref.cxx, upsample_ref.cxx)              */
#include <vector>

namespace ddnn
{
/* the box of tensor dims (N, C, spatial...) of layout L starting at storage coordinates origin[] with sizes n[] */
void BoxOffsetsBuild(const DDLayout &L, PetscInt D, const PetscInt origin[], const PetscInt n[], BoxOffsets *b);

template <class T> /* y = pool(x); for max pooling argmax[] (one per output, in the box's C order) gets the storage offset in x of the first maximum */
void PoolForwardRef(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *argmax);
template <class T> /* dx += J^* dy (dx's window entries; max pooling routes dy to argmax) */
void PoolBackwardRef(const PoolGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const PetscInt *argmax);

template <class T> /* y = interp(x) */
void UpsampleForwardRef(const UpsampleGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo);
template <class T> /* dx += interp^*(dy) */
void UpsampleBackwardRef(const UpsampleGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo);
} // namespace ddnn

namespace ddnn
{
/*
  Dense (affine) kernels on row-major strided matrices, torch.nn.Linear's layout:
    X (N x Fi, row stride ldx), W (Fo x Fi, ldw), Y (N x Fo, ldy), bias b (Fo).
  Any of N, Fi, Fo may be zero. The reference loops (src/backend/reference/affine_ref.cxx)
  are the truth; the GEMM versions (src/backend/common/affine_gemm.hpp, in the kernel tables of
  /cpu/blas and /cpu/dnnl) are the fast path and are checked against them.
*/
template <class T> /* Y = X W^T (+ b when b is not NULL) */
void AffineForwardRef(const AffineGeom &g, const T *x, PetscInt ldx, const T *w, PetscInt ldw, const T *b, T *y, PetscInt ldy);
template <class T> /* dX = dY W */
void AffineBackwardDataRef(const AffineGeom &g, const T *dy, PetscInt ldy, const T *w, PetscInt ldw, T *dx, PetscInt ldx);
template <class T> /* dW += dY^T X; db += sum over rows of dY (db may be NULL) */
void AffineBackwardWeightsRef(const AffineGeom &g, const T *x, PetscInt ldx, const T *dy, PetscInt ldy, T *dw, PetscInt ldw, T *db);
/*
  Transposed convolution (src/backend/reference/convt_ref.cxx). The geometry of one worker:
  the input window x (N, Ci, in) and the output box y (N, Co, out); window entry li feeds box
  entry lo = li s + t d - pl (0 <= t < k) when 0 <= lo < out, i.e. pl is the left crop (the
  transposed convolution's padding plus the box's offset) and pr the right one, so that
  out = (in - 1) s - pl - pr + (k - 1) d + 1. The weights are (Ci, Co, k0, k1, k2), as
  PyTorch stores a ConvTranspose's. Either crop may be negative (rows of the box that no
  window entry reaches: output padding, or gaps when s > (k - 1) d + 1); the loops skip them.
*/
template <class T> /* y = convT(x, w) + b (b may be NULL): overwrites the box */
void ConvTForwardRef(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y);
template <class T> /* dx += J_x^* dy: a convolution of dy onto the window */
void ConvTBackwardDataRef(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx);
template <class T> /* dw += J_w^* dy, db += J_b^* dy (db may be NULL) */
void ConvTBackwardWeightsRef(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db);
/* The spectral layer's mode mixing (src/backend/reference/spectral_ref.cxx; KernelTable<T>::spectralmix) */
template <class T> /* s_k of local mode k, as T */
T SpectralMixScale(const SpectralMixGeom &g, PetscInt k);
template <class T> /* Y = s_k sum_i X W */
void SpectralMixRef(const SpectralMixGeom &g, const T *X, const T *W, T *Y);
template <class T> /* dX = sum_o (s_k dY) conj(W); dW += sum_n conj(X) (s_k dY) */
void SpectralMixAdjointRef(const SpectralMixGeom &g, const T *X, const T *W, const T *dY, T *dX, T *dW);
} // namespace ddnn
