/*
  The optimizers' per-element update loops (C++ only), on one contiguous run of a parameter, its
  gradient and its state (the same storage layout): the implementations in src/optimizer/impls
  walk a tensor's bulk runs and call these. PyTorch's update rules (torch.optim.SGD, Adam, AdamW),
  evaluated in double precision and stored in T.
*/
#pragma once
#include <ddnn/private/ddbackendimpl.h> /* SGDCoefficients, AdamCoefficients */

namespace ddnn
{

/* g += wd p; buf = m buf + g (buf = g at the first step); p -= lr (Nesterov: g + m buf, else buf).
   buf is read and written only when momentum > 0. */
template <class T>
void SGDUpdate(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c);


/* m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr (m / bc1) / (sqrt(v / bc2) + eps) */
template <class T>
void AdamUpdate(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c);

/* The fast versions of /cpu/blas (src/backend/cpu/optimizer_fast.cxx): the same rules, vectorized,
   bitwise equal to SGDUpdate and AdamUpdate. p, g and the state must not overlap. */
template <class T>
void SGDUpdateFast(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c);
template <class T>
void AdamUpdateFast(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c);

/* true when every a[i] is finite (and >= 0 when nonnegative) */
template <class T>
bool StateValid(PetscInt n, const T *a, bool nonnegative);
} // namespace ddnn
