/*
  The loss layer's and the dropout layer's local loops on the host (/cpu/ref; /cpu/blas and
  /cpu/dnnl reach them along their chains): the loops that lived in src/layer/impls/loss/loss.cxx
  and src/layer/impls/dropout/dropout.cxx, moved behind the kernel table unchanged (the same
  arithmetic, so the same bits), so that /gpu/cuda can give the same passes in device memory.

  Losses (paper 000 sec. 4.3; torch.nn.MSELoss, L1Loss, CrossEntropyLoss of torch 1.13): element
  losses sum (p - t)^2 or |p - t|; cross-entropy, per position i (batch and spatial index), with
  logp = log_softmax over the classes, eps the label smoothing, w the class weights (ones by
  default), W = sum_c w_c:
    class index y_i (not ignore_index): l_i = (1 - eps) w_y (-logp_y) + (eps / C) sum_c w_c (-logp_c)
                                        (the second term only where eps > 0: a -inf logit makes its sum
                                        +inf; ignored positions: 0, weight 0, gradient 0 - p_c 0)
    probabilities t_i (soft targets):   l_i = -sum_c t'_c w_c logp_c, t' = (1 - eps) t + eps / C
  Gradients: class index: dl/dx_c = (1 - eps) w_y (p_c - [c = y]) + (eps / C) (W p_c - w_c);
  probabilities: dl/dx_c = p_c sum_k t'_k w_k - t'_c w_c, dl/dt_c = -(1 - eps) w_c logp_c.

  Dropout: entry g (global C-order index) is kept, scaled by 1/(1 - p), where
  UniformFromCounter(key, g) >= p (partition-independent masks), else multiplied by 0 (PyTorch's
  x * mask: a dropped nan or inf gives nan, a dropped negative -0).
*/
#include <sys/ddcxx.hpp>
#include <backend/kernels.hpp>
#include <backend/interface/backends.hpp>
#include <vector>
#include <cmath>

namespace ddnn
{
namespace
{
/*
  Walks the local positions of the logits (every bulk index with class 0): calls f(j) with j the
  bulk coordinates (j[1] = 0). Off(L, j, c) is the storage offset of (j with class c) in a layout
  of the logits' order, or of j without the class dimension in a layout of order one less.
*/
template <class F>
void ForEachPosition(const DDLayout &Lp, F &&f)
{
  PetscInt a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
  for (PetscInt k = 0; k < Lp.order; k++) {
    a0[k]  = 0;
    b0[k]  = k == 1 ? 1 : Lp.n[k];
    ord[k] = k;
  }
  ForEachIndex(Lp.order, a0, b0, ord, f);
}
/* walks every bulk index of the prediction: f(j) with j the bulk coordinates */
template <class F>
void ForEachElement(const DDLayout &Lp, F &&f)
{
  PetscInt a0[DD_MAX_DIM], b0[DD_MAX_DIM], ord[DD_MAX_DIM];
  for (PetscInt k = 0; k < Lp.order; k++) {
    a0[k]  = 0;
    b0[k]  = Lp.n[k];
    ord[k] = k;
  }
  ForEachIndex(Lp.order, a0, b0, ord, f);
}
inline PetscInt Off(const DDLayout &L, PetscInt d, const PetscInt *j, PetscInt c)
{
  PetscInt q[DD_MAX_DIM];
  if (L.order == d) {
    for (PetscInt k = 0; k < d; k++) q[k] = j[k] + L.lo[k];
    q[1] = c + L.lo[1];
  } else {
    q[0] = j[0] + L.lo[0];
    for (PetscInt k = 2; k < d; k++) q[k - 1] = j[k] + L.lo[k - 1];
  }
  return LayoutOffset(L, q);
}

/* the logits (v, C of them) and the target (tv: a class index, or C probabilities) at position j */
template <class T>
void PositionValues(const LossKernelSpec &s, PetscInt C, const DDLayout &Lp, const T *a, const DDLayout &Lt, const T *b, const PetscInt *j, std::vector<double> &v, std::vector<double> &tv)
{
  const PetscInt d = Lp.order;
  for (PetscInt c = 0; c < C; c++) v[c] = (double)a[Off(Lp, d, j, c)];
  if (s.prob)
    for (PetscInt c = 0; c < C; c++) tv[c] = (double)b[Off(Lt, d, j, c)];
  else tv[0] = (double)b[Off(Lt, d, j, 0)];
}

/*
  Cross-entropy at one position: logits v (C of them), target t (class index in t[0], or C
  probabilities); returns l and its weight in the mean's denominator; with g != 0 writes
  g dl/dv into dv and (probabilities, dtv non-NULL) g dl/dt into dtv.
*/
double CrossEntropyAt(const LossKernelSpec &s, PetscInt C, const double *v, const double *t, double *wden, double g, double *dv, double *dtv)
{
  const double eps = s.smoothing;
  auto         W   = [&](PetscInt c) { return s.weights.empty() ? 1.0 : s.weights[c]; };
  double       mx  = -INFINITY, se = 0;
  for (PetscInt c = 0; c < C; c++) mx = std::max(mx, v[c]);
  for (PetscInt c = 0; c < C; c++) se += std::exp(v[c] - mx);
  const double lse = mx + std::log(se);
  double       l   = 0;
  if (!s.prob) {
    const PetscInt y = (PetscInt)std::llround(t[0]);
    if (y == s.ignore) { /* no loss, and PyTorch's gradient 0 - softmax * 0: 0, or nan where a logit is nan or +inf */
      *wden = 0;
      if (dv)
        for (PetscInt c = 0; c < C; c++) dv[c] = 0.0 - std::exp(v[c] - lse) * 0.0;
      return 0;
    }
    const double wy = W(y);
    double       sm = 0, Wt = 0;
    for (PetscInt c = 0; c < C; c++) {
      sm += W(c) * (lse - v[c]);
      Wt += W(c);
    }
    l     = (1 - eps) * wy * (lse - v[y]) + (eps > 0 ? eps / C * sm : 0.0); /* without smoothing no 0 * sm: a logit of -inf (a masked class) makes sm +inf */
    *wden = wy;
    if (dv)
      for (PetscInt c = 0; c < C; c++) {
        const double pc = std::exp(v[c] - lse);
        dv[c]           = g * ((1 - eps) * wy * (pc - (c == y ? 1.0 : 0.0)) + eps / C * (Wt * pc - W(c)));
      }
    return l;
  }
  double S = 0;
  for (PetscInt c = 0; c < C; c++) {
    const double tc = (1 - eps) * t[c] + eps / C;
    l += tc * W(c) * (lse - v[c]);
    S += tc * W(c);
  }
  *wden = 1;
  if (dv)
    for (PetscInt c = 0; c < C; c++) dv[c] = g * (std::exp(v[c] - lse) * S - ((1 - eps) * t[c] + eps / C) * W(c));
  if (dtv)
    for (PetscInt c = 0; c < C; c++) dtv[c] = g * (-(1 - eps) * W(c) * (v[c] - lse));
  return l;
}

/* the derivative of an element loss (mse, l1) at r = prediction - target */
template <DDLossType K>
inline double ElementDeriv(double r)
{
  return K == DD_LOSS_MSE ? 2 * r : (r > 0 ? 1.0 : (r < 0 ? -1.0 : 0.0));
}

/*
  The element losses' backward over the bulk runs (dl/dp = g l'(p - t), dl/dt = -dl/dp), for
  gradients (and dy, reduction none) stored like the prediction: the same arithmetic per element as
  the generic walk, so the same bits. ga: dy (reduction none) or NULL for the scale g0; the target's
  gradient gt is stored like the target (tlikeb) or like the prediction.
*/
template <class T, DDLossType K>
void ElementBackwardRuns(const DDLayout &Lp, const DDLayout &Lt, const T *a, const T *b, const T *ga, double g0, T *gp, T *gt, bool tlikeb)
{
  ForEachBulkRunPair(Lp, Lt, [&](PetscInt oa, PetscInt ob, PetscInt len) {
    const T *ap = a + oa, *bp = b + ob, *gg = ga ? ga + oa : nullptr;
    T       *dp = gp ? gp + oa : nullptr, *dt = gt ? gt + (tlikeb ? ob : oa) : nullptr;
    if (gg && dp && dt)
      for (PetscInt i = 0; i < len; i++) {
        const double dr = (double)gg[i] * ElementDeriv<K>((double)ap[i] - (double)bp[i]);
        dp[i]           = (T)dr;
        dt[i]           = (T)-dr;
      }
    else if (!gg && dp && dt)
      for (PetscInt i = 0; i < len; i++) {
        const double dr = g0 * ElementDeriv<K>((double)ap[i] - (double)bp[i]);
        dp[i]           = (T)dr;
        dt[i]           = (T)-dr;
      }
    else if (!gg && dp)
      for (PetscInt i = 0; i < len; i++) dp[i] = (T)(g0 * ElementDeriv<K>((double)ap[i] - (double)bp[i]));
    else
      for (PetscInt i = 0; i < len; i++) {
        const double dr = (gg ? (double)gg[i] : g0) * ElementDeriv<K>((double)ap[i] - (double)bp[i]);
        if (dp) dp[i] = (T)dr;
        if (dt) dt[i] = (T)-dr;
      }
  });
}

/*
  Cross-entropy's backward with the class dimension not blocked: per position one storage offset
  and the class stride (instead of an offset per entry); CrossEntropyAt() as the generic walk. The
  probability targets' gradient gt is stored like the targets (tlikeb) or like the logits.
*/
template <class T>
void CrossEntropyBackwardStrided(const LossKernelSpec &s, const DDLayout &Lp, const DDLayout &Lt, const DDLayout *Ly, const T *a, const T *b, const T *ga, double g0, T *gp, T *gt, bool tlikeb)
{
  const PetscInt      d = Lp.order, C = Lp.n[1], sp = Lp.stride[1], stt = s.prob ? Lt.stride[1] : 0;
  std::vector<double> v(C), tv(s.prob ? C : 1), dv(C), dtv(C);
  ForEachPosition(Lp, [&](const PetscInt *j) {
    const PetscInt op = Off(Lp, d, j, 0), ot = Off(Lt, d, j, 0);
    for (PetscInt c = 0; c < C; c++) v[c] = (double)a[op + c * sp];
    if (s.prob)
      for (PetscInt c = 0; c < C; c++) tv[c] = (double)b[ot + c * stt];
    else tv[0] = (double)b[ot];
    double wd;
    (void)CrossEntropyAt(s, C, v.data(), tv.data(), &wd, ga ? (double)ga[Off(*Ly, d, j, 0)] : g0, dv.data(), gt ? dtv.data() : nullptr);
    if (gp)
      for (PetscInt c = 0; c < C; c++) gp[op + c * sp] = (T)dv[c];
    if (gt)
      for (PetscInt c = 0; c < C; c++) gt[tlikeb ? ot + c * stt : op + c * sp] = (T)dtv[c];
  });
}

template <class T>
class RefLossKernel : public LossKernel
{
public:
  explicit RefLossKernel(const LossKernelSpec &spec) : s(spec), backend(DDBackendLookup_Private("/cpu/ref")) { }
  const char *Name() const override { return "loss loops"; }

  PetscErrorCode Forward(DDTensor p, DDTensor t, DDTensor y, double *sum, double *den, PetscInt *nbad, double *bad) override
  {
    KernelEvent e(backend, DD_KERNEL_LOSS);
    PetscFunctionBegin;
    *sum = 0, *nbad = 0;
    if (!p->active || !p->layout.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
    const DDLayout &Lp = p->layout, &Lt = t->layout;
    const T        *a = HostArray<const T>(p), *b = HostArray<const T>(t);
    T              *yo = y ? HostArray<T>(y) : nullptr;
    const PetscInt  d  = p->order;
    double          sm = 0;
    if (s.type != DD_LOSS_CROSSENTROPY && !yo) {
      ForEachBulkRunPair(Lp, Lt, [&](PetscInt oa, PetscInt ob, PetscInt len) {
        for (PetscInt i = 0; i < len; i++) {
          double r = (double)a[oa + i] - (double)b[ob + i];
          sm += s.type == DD_LOSS_MSE ? r * r : std::fabs(r);
        }
      });
      *sum = sm;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    if (s.type != DD_LOSS_CROSSENTROPY) {
      ForEachElement(Lp, [&](const PetscInt *j) {
        const double r = (double)a[Off(Lp, d, j, j[1])] - (double)b[Off(Lt, d, j, j[1])], v = s.type == DD_LOSS_MSE ? r * r : std::fabs(r);
        sm += v;
        if (yo) yo[Off(y->layout, d, j, j[1])] = (T)v;
      });
      *sum = sm;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    const PetscInt C = Lp.n[1];
    if (!s.prob) { /* class indices must be valid: else nothing is computed (the layer raises the error on every rank) */
      ForEachBulkRun(Lt, [&](PetscInt off, PetscInt len) {
        for (PetscInt i = 0; i < len; i++) {
          double v = (double)b[off + i];
          if (!((v >= 0 && v < C && v == std::floor(v)) || v == (double)s.ignore)) {
            if (!*nbad) *bad = v;
            ++*nbad;
          }
        }
      });
      if (*nbad) PetscFunctionReturn(PETSC_SUCCESS);
    }
    std::vector<double> v(C), tv(s.prob ? C : 1);
    double              dn = 0;
    ForEachPosition(Lp, [&](const PetscInt *j) {
      PositionValues<T>(s, C, Lp, a, Lt, b, j, v, tv);
      double       wd;
      const double l = CrossEntropyAt(s, C, v.data(), tv.data(), &wd, 0, nullptr, nullptr);
      sm += l;
      dn += wd;
      if (yo) yo[Off(y->layout, d, j, 0)] = (T)l;
    });
    *sum = sm;
    *den = dn;
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Backward(DDTensor p, DDTensor t, DDTensor dy, double g0, DDTensor dp, DDTensor dt, bool fast, bool tlikeb) override
  {
    KernelEvent e(backend, DD_KERNEL_LOSS);
    PetscFunctionBegin;
    if (!p->active) PetscFunctionReturn(PETSC_SUCCESS);
    const T        *a = HostArray<const T>(p), *b = HostArray<const T>(t);
    const T        *ga = dy ? HostArray<const T>(dy) : nullptr;
    const PetscInt  d  = p->order;
    const DDLayout &Lp = p->layout, &Lt = t->layout;
    const bool      ce = s.type == DD_LOSS_CROSSENTROPY;
    T              *gp = dp ? HostArray<T>(dp) : nullptr, *gt = dt ? HostArray<T>(dt) : nullptr;
    if (fast) {
      if (s.type == DD_LOSS_MSE) ElementBackwardRuns<T, DD_LOSS_MSE>(Lp, Lt, a, b, ga, g0, gp, gt, tlikeb);
      else if (s.type == DD_LOSS_L1) ElementBackwardRuns<T, DD_LOSS_L1>(Lp, Lt, a, b, ga, g0, gp, gt, tlikeb);
      else CrossEntropyBackwardStrided<T>(s, Lp, Lt, ga ? &dy->layout : nullptr, a, b, ga, g0, gp, gt, tlikeb);
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    /* the generic walk (any layouts): the scale of position / element j is dy there (reduction none) or g0 */
    auto g = [&](const PetscInt *j, PetscInt c) { return ga ? (double)ga[Off(dy->layout, d, j, c)] : g0; };
    if (!ce) {
      auto deriv = [&](double r) { return s.type == DD_LOSS_MSE ? ElementDeriv<DD_LOSS_MSE>(r) : ElementDeriv<DD_LOSS_L1>(r); };
      ForEachElement(Lp, [&](const PetscInt *j) {
        const double dr = g(j, j[1]) * deriv((double)a[Off(Lp, d, j, j[1])] - (double)b[Off(Lt, d, j, j[1])]);
        if (gp) gp[Off(dp->layout, d, j, j[1])] = (T)dr;
        if (gt) gt[Off(dt->layout, d, j, j[1])] = (T)-dr;
      });
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    /* cross-entropy: the logits' gradient; probability targets get one too */
    const PetscInt      C = Lp.n[1];
    std::vector<double> v(C), tv(s.prob ? C : 1), dv(C), dtv(C);
    ForEachPosition(Lp, [&](const PetscInt *j) {
      PositionValues<T>(s, C, Lp, a, Lt, b, j, v, tv);
      double wd;
      (void)CrossEntropyAt(s, C, v.data(), tv.data(), &wd, g(j, 0), dv.data(), gt ? dtv.data() : nullptr);
      if (gp)
        for (PetscInt c = 0; c < C; c++) gp[Off(dp->layout, d, j, c)] = (T)dv[c];
      if (gt)
        for (PetscInt c = 0; c < C; c++) gt[Off(dt->layout, d, j, c)] = (T)dtv[c];
    });
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  LossKernelSpec s;
  DDBackend      backend;
};

/*
  Calls f(offsets into the K layouts, their strides, global index of the first entry, global index
  stride, count) for runs of the bulk along the innermost storage dimension (the layouts describe
  the same piece).
*/
template <int K, class F>
void ForEachGlobalRun(const DDLayout *const Ls[], const PetscInt shape[], F &&f)
{
  const DDLayout &L = *Ls[0];
  const PetscInt  d = L.order;
  if (L.bulksize == 0) return;
  PetscInt64 gs[DD_MAX_DIM];
  gs[d - 1] = 1;
  for (PetscInt k = d - 2; k >= 0; k--) gs[k] = gs[k + 1] * shape[k + 1];
  const PetscInt in = L.perm[d - 1];
  PetscInt       a[DD_MAX_DIM], b[DD_MAX_DIM], st[K];
  LayoutBulkBox(L, a, b);
  bool inner = true; /* runs along the innermost dimension: strided in every layout */
  for (int i = 0; i < K; i++) {
    if (Ls[i]->bdim == in || Ls[i]->perm[d - 1] != in) inner = false;
    st[i] = Ls[i]->stride[in];
  }
  if (inner) b[in] = a[in] + 1;
  ForEachIndex(d, a, b, L.perm, [&](const PetscInt *j) {
    PetscInt   off[K], jj[DD_MAX_DIM];
    PetscInt64 g = 0;
    for (PetscInt k = 0; k < d; k++) g += gs[k] * (j[k] - L.lo[k] + L.start[k]);
    for (int i = 0; i < K; i++) {
      for (PetscInt k = 0; k < d; k++) jj[k] = j[k] - L.lo[k] + Ls[i]->lo[k];
      off[i] = LayoutOffset(*Ls[i], jj);
    }
    f((const PetscInt *)off, (const PetscInt *)st, g, gs[in], inner ? L.n[in] : (PetscInt)1);
  });
}
} // namespace

template <class T>
PetscErrorCode RefLossCreate(const LossKernelSpec &spec, std::unique_ptr<LossKernel> *k)
{
  PetscFunctionBegin;
  *k = std::make_unique<RefLossKernel<T>>(spec);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* out[i so] = in[i si] * mask(g + i gstride) / (1 - p), over the runs of the bulk */
template <class T>
void DropoutRef(uint64_t key, double p, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, const PetscInt shape[])
{
  const DDLayout *Ls[2]  = {&Lx, &Ly};
  const T         scale = (T)(1.0 / (1.0 - p));
  ForEachGlobalRun<2>(Ls, shape, [&](const PetscInt *off, const PetscInt *st, PetscInt64 g, PetscInt64 gst, PetscInt n) {
    const T *in  = x + off[0];
    T       *out = y + off[1];
    for (PetscInt i = 0; i < n; i++) out[i * st[1]] = in[i * st[0]] * (UniformFromCounter(key, (uint64_t)(g + i * gst)) >= p ? scale : (T)0); /* x * mask, as PyTorch: a dropped nan or inf gives nan */
  });
}

template PetscErrorCode RefLossCreate<float>(const LossKernelSpec &, std::unique_ptr<LossKernel> *);
template PetscErrorCode RefLossCreate<double>(const LossKernelSpec &, std::unique_ptr<LossKernel> *);
template void           DropoutRef<float>(uint64_t, double, const DDLayout &, const float *, const DDLayout &, float *, const PetscInt[]);
template void           DropoutRef<double>(uint64_t, double, const DDLayout &, const double *, const DDLayout &, double *, const PetscInt[]);
} // namespace ddnn
