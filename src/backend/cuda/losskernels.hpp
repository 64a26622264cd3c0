/*
  CUDA kernels of the loss layer and the dropout masks (/gpu/cuda), behind a plain C++ interface
  (no PETSc: only this header and losskernels.cu go through nvcc). The semantics are those of the
  host loops in src/backend/reference/loss_ref.cxx; loss_cuda.cxx turns the results into PETSc
  errors. Every launch is on the default stream.
*/
#pragma once
#include "cudakernels.hpp"

namespace ddnn
{
namespace cuda
{
/*
  The tensors of a loss pass as Layouts (their order, strides, blocking and halo offsets lo; n:
  the bulk extents): p the prediction or logits (order d), t the target (order d, or d - 1 for
  class indices), y the per-position or per-element output (reduction none), dy its gradient, dp
  and dt the gradients. An entry is addressed by its bulk coordinates; the class dimension is 1.
*/
struct LossArgs {
  int           type   = 0;     /* DDLossType: 0 mse, 1 l1, 2 cross-entropy */
  bool          prob   = false; /* probability targets */
  int64_t       ignore = -100;
  double        eps    = 0;       /* label smoothing */
  const double *w      = nullptr; /* class weights on the device (nullptr: ones) */
  double        Wt     = 0;       /* their sum (C with ones) */
  Layout        p, t, y, dy, dp, dt;
  bool          hasy = false, hasdy = false, hasdp = false, hasdt = false;
};

/*
  Forward: the terms (elements, or positions of cross-entropy) summed in double, deterministically
  (fixed blocks, then one block adds the block sums in order): out[0] = sum of the terms, out[1] =
  sum of the mean's weights, out[2] = positions whose class index is invalid (they add nothing),
  out[3] = the value of the first of them. work: a device buffer of LossWorkSize(a) doubles; out: 4
  doubles on the host (the call synchronizes).
*/
int64_t LossWorkSize(const LossArgs &a);
template <class T>
cudaError_t LossForward(const LossArgs &a, const T *p, const T *t, T *y, double *work, double out[4]);
/* Backward: dp = g dl/dp, dt = g dl/dt (element losses and probability targets), g = dy there or g0 */
template <class T>
cudaError_t LossBackward(const LossArgs &a, const T *p, const T *t, const T *dy, double g0, T *dp, T *dt);

/*
  Inverted dropout over the bulk of a piece: y = x / (1 - p) where UniformFromCounter(key, g) >= p,
  else x * 0 (nan for a nan or inf, as PyTorch's x * mask); g = sum_k (start[k] + j[k]) gs[k] is the entry's global C-order index (gs: the global
  shape's C-order strides), j its bulk coordinates
*/
template <class T>
cudaError_t Dropout(uint64_t key, double p, const Layout &Lx, const T *x, const Layout &Ly, T *y, const int64_t start[], const int64_t gs[]);
} // namespace cuda
} // namespace ddnn
