/*
  The optimizers' per-element update loops (C++ only), on one contiguous run of a parameter, its
  gradient and its state (the same storage layout): the implementations in src/optimizer/impls
  walk a tensor's bulk runs and call these. PyTorch's update rules (torch.optim.SGD, Adam, AdamW),
  evaluated in double precision and stored in T.
*/
#pragma once
#include <petscsys.h>

namespace ddnn
{
struct SGDCoefficients {
  double lr = 0, momentum = 0, weight_decay = 0;
  bool   nesterov = false;
  bool   first    = false; /* first step: the momentum buffer starts as the gradient */
};

/* g += wd p; buf = m buf + g (buf = g at the first step); p -= lr (Nesterov: g + m buf, else buf).
   buf is read and written only when momentum > 0. */
template <class T>
void SGDUpdate(PetscInt n, T *p, const T *g, T *buf, const SGDCoefficients &c);

struct AdamCoefficients {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double bc1 = 1, bc2 = 1;      /* bias corrections 1 - beta1^t, 1 - beta2^t at step t */
  bool   decoupled = false;     /* AdamW: p *= 1 - lr wd; Adam: g += wd p */
};

/* m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr (m / bc1) / (sqrt(v / bc2) + eps) */
template <class T>
void AdamUpdate(PetscInt n, T *p, const T *g, T *m, T *v, const AdamCoefficients &c);

/* true when every a[i] is finite (and >= 0 when nonnegative) */
template <class T>
bool StateValid(PetscInt n, const T *a, bool nonnegative);
} // namespace ddnn
