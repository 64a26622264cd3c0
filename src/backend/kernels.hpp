/*
  Local kernels of the layers (C++ only): the geometry of a local sliding-window operation,
  strided views of a tensor's storage, the plain reference loops (src/backend/reference) and
  the oneDNN kernels (src/backend/cpu).
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <tensor/layout.hpp>

namespace ddnn
{
/* Spatial dimensions are padded to 3 with leading unit dimensions. */
struct ConvGeom {
  PetscInt D = 0;             /* spatial dimensions of the problem (1-3) */
  PetscInt N = 0, Ci = 0, Co = 0;
  PetscInt in[3]  = {1, 1, 1}; /* input window */
  PetscInt out[3] = {1, 1, 1}; /* output */
  PetscInt k[3]   = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  PetscInt KK() const { return k[0] * k[1] * k[2]; }
};

/* A strided window of a tensor: element (n, c, i0, i1, i2) is p[n sn + c sc + i0 s0 + i1 s1 + i2 s2] */
template <class T>
struct View {
  T       *p = nullptr;
  PetscInt sn = 0, sc = 0, s0 = 0, s1 = 0, s2 = 0;
  T       &at(PetscInt n, PetscInt c, PetscInt i0, PetscInt i1, PetscInt i2) const { return p[n * sn + c * sc + i0 * s0 + i1 * s1 + i2 * s2]; }
};

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
