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

/*
  Transposed convolution (src/backend/reference/convt_ref.cxx). The geometry of one worker:
  the input window x (N, Ci, in) and the output box y (N, Co, out); window entry li feeds box
  entry lo = li s + t d - pl (0 <= t < k) when 0 <= lo < out, i.e. pl is the left crop (the
  transposed convolution's padding plus the box's offset) and pr the right one, so that
  out = (in - 1) s - pl - pr + (k - 1) d + 1. The weights are (Ci, Co, k0, k1, k2), as
  PyTorch stores a ConvTranspose's. Either crop may be negative (rows of the box that no
  window entry reaches: output padding, or gaps when s > (k - 1) d + 1); the loops skip them.
*/
struct ConvTGeom : ConvGeom {
  PetscInt pl[3] = {0, 0, 0}, pr[3] = {0, 0, 0};
};
template <class T> /* y = convT(x, w) + b (b may be NULL): overwrites the box */
void ConvTForwardRef(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y);
template <class T> /* dx += J_x^* dy: a convolution of dy onto the window */
void ConvTBackwardDataRef(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx);
template <class T> /* dw += J_w^* dy, db += J_b^* dy (db may be NULL) */
void ConvTBackwardWeightsRef(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db);
} // namespace ddnn
