/*
  DDLAYERSPECTRAL: the spectral convolution of a Fourier neural operator (Li et al. 2021; the
  reference code's SpectralConv1d/2d/3d):

    y = irfftn(W . rfftn(x) on the kept modes, s = x's spatial size)

  for x (N, Cin, s_1, ..., s_d), d = 1, 2, 3, and y (N, Cout, s_1, ..., s_d): per kept mode k,
  Y[n, o, k] = sum_i X[n, i, k] W[i, o, k] (complex). Kept modes: the corner blocks 0..m_i-1
  and s_i-m_i..s_i-1 of dimensions 1..d-1, the first m_d entries of the half-spectrum of the last.

  Weights: one tensor W (Cin, Cout, 2 m_1, ..., 2 m_{d-1}, m_d, 2), complex as (real, imag).
  Its corner blocks are the reference code's 2^(d-1) tensors (in, out, m_1, ..., m_d): in 2-D
  weights1 = W[:, :, :m1], weights2 = W[:, :, m1:]; in 3-D weights1 = W[:, :, :m1, :m2],
  weights2 = W[:, :, m1:, :m2], weights3 = W[:, :, :m1, m2:], weights4 = W[:, :, m1:, m2:].

  Distribution: X = F1 x and Y live on the Fourier partition of DDTensorCreateFFT() (x's workers,
  batch and channels whole, the modes split), and W is partitioned like them over the modes (no
  replication, no gradient reduction: each worker owns its modes' weights and sees every sample).
  With the FFT primitives F1 (x -> X) and F2 (y -> Y) (paper 000 sec. 3: linear operators with
  exact adjoints), irfftn of a truncated spectrum Z is (1/S) F2^* (D Z), S = s_1 ... s_d, D = 2 on
  the last dimension's modes 0 < k < s_d/2 (undoing the Hermitian weights of F2^*), else 1:
    forward   X = F1 x;  Y = X . W;  y = (1/S) F2^*(D Y)
    backward  dY = (1/S) D F2 dy;  dX = dY . conj(W);  dW += sum_n conj(X) dY;  dx = F1^* dX
  Backward uses the X of the last Forward. The mode mixing with its factor D / S (Y = (D/S) X . W and
  its adjoint) is the backend's kernel (KernelTable<T>::spectralmix, spectralmixadjoint: the reference
  loops of /cpu/ref, the vectorized ones of /cpu/blas and /cpu/dnnl).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <array>
#include <functional>
#include <vector>

using namespace ddnn;

namespace
{
struct Spectral {
  /* hyper-parameters */
  PetscInt nm = 0, modes[3] = {0, 0, 0};
  PetscInt cout = 0;
  /* set-up */
  PetscInt    d = 0, s[3] = {0, 0, 0};
  DDTensor    X = NULL, Y = NULL, dX = NULL, dY = NULL; /* spectral tensors on the Fourier partition */
  DDTensor    w = NULL;                                 /* owned by the parameter list */
  DDPrimitive F1 = NULL, F2 = NULL;
  DDTensor    xin = NULL, dyo = NULL, dxo = NULL; /* tensors whose layouts differ from set-up */
  SpectralMixGeom g;                            /* the local mode mixing (KernelTable<T>::spectralmix): sizes and the scale D / S */
};
} // namespace

static PetscErrorCode SpectralGet(DDLayer l, Spectral **a, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERSPECTRAL, fn));
  *a = (Spectral *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerSpectralSetModes - Fourier modes kept per spatial dimension by a spectral convolution (modes1, modes2, modes3 of the reference FNO code)

  Logically collective

  Input Parameters:
+ l     - the layer
. n     - number of entries: 1 (all spatial dimensions) or the input's number of spatial dimensions
- modes - modes per dimension: m_i <= s_i / 2 for all but the last (two corner blocks), m_d <= s_d / 2 + 1 (half-spectrum)

  Options Database Key:
. -layer_spectral_modes <m1,m2,...> - the modes

  Level: beginner

.seealso: `DDLAYERSPECTRAL`, `DDLayerSpectralSetOutputChannels()`
@*/
PetscErrorCode DDLayerSpectralSetModes(DDLayer l, PetscInt n, const PetscInt modes[])
DD_CXX_TRY
{
  Spectral *a;

  PetscFunctionBegin;
  PetscCall(SpectralGet(l, &a, "DDLayerSpectralSetModes"));
  PetscCheck(n >= 1 && n <= 3, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_SIZ, "Give 1 to 3 modes, not %" PetscInt_FMT, n);
  for (PetscInt j = 0; j < n; j++) PetscCheck(modes[j] >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Modes %" PetscInt_FMT " (entry %" PetscInt_FMT ") must be positive", modes[j], j);
  a->nm = n;
  for (PetscInt j = 0; j < n; j++) a->modes[j] = modes[j];
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerSpectralSetOutputChannels - Output channels of a spectral convolution (default: the input's channels)

  Logically collective

  Input Parameters:
+ l    - the layer
- cout - the number, positive

  Options Database Key:
. -layer_spectral_out_channels <n> - the number

  Level: beginner

.seealso: `DDLAYERSPECTRAL`, `DDLayerSpectralSetModes()`
@*/
PetscErrorCode DDLayerSpectralSetOutputChannels(DDLayer l, PetscInt cout)
DD_CXX_TRY
{
  Spectral *a;

  PetscFunctionBegin;
  PetscCall(SpectralGet(l, &a, "DDLayerSpectralSetOutputChannels"));
  PetscCheck(cout >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Output channels %" PetscInt_FMT " must be positive", cout);
  a->cout = cout;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Spectral_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Spectral *a = (Spectral *)l->data;
  PetscInt  vals[3], n = 3;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer spectral convolution options");
  for (PetscInt j = 0; j < 3; j++) vals[j] = a->modes[j];
  PetscCall(PetscOptionsIntArray("-layer_spectral_modes", "Fourier modes kept per spatial dimension", "DDLayerSpectralSetModes", vals, &n, &set));
  if (set) PetscCall(DDLayerSpectralSetModes(l, n, vals));
  PetscCall(PetscOptionsInt("-layer_spectral_out_channels", "Output channels", "DDLayerSpectralSetOutputChannels", a->cout, &a->cout, NULL));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_Reset(DDLayer l)
{
  Spectral *a = (Spectral *)l->data;

  PetscFunctionBegin;
  for (DDTensor *t : {&a->X, &a->Y, &a->dX, &a->dY, &a->xin, &a->dyo, &a->dxo}) PetscCall(DDTensorDestroy(t));
  a->w = NULL;
  PetscCall(DDPrimitiveDestroy(&a->F1));
  PetscCall(DDPrimitiveDestroy(&a->F2));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Spectral_Reset(l));
  delete (Spectral *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A plain tensor of `shape` on t's partition with t's ownership in every dimension but those of `free` (balanced) */
static PetscErrorCode CreateOnPartitionOf(DDTensor t, const PetscInt shape[], PetscInt nfree, const PetscInt free[], DDTensor *y)
{
  PetscFunctionBegin;
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)t), y));
  PetscCall(DDTensorSetPartition(*y, t->part));
  PetscCall(DDTensorSetShape(*y, t->order, shape));
  PetscCall(DDTensorSetDataType(*y, t->dtype));
  PetscCall(DDTensorSetEmptyPiecesAllowed(*y, PETSC_TRUE));
  for (PetscInt k = 0; k < t->order; k++) {
    bool isfree = false;
    for (PetscInt f = 0; f < nfree; f++) isfree = isfree || free[f] == k;
    if (isfree) continue;
    std::vector<PetscInt> lx(t->part->shape[k]);
    for (PetscInt p = 0; p < t->part->shape[k]; p++) lx[p] = t->ranges[k][p + 1] - t->ranges[k][p];
    PetscCall(DDTensorSetOwnershipRanges(*y, k, lx.data()));
  }
  PetscCall(DDTensorSetUp(*y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the fft primitive x -> X, its local FFTs from the chain of the layer's backend */
static PetscErrorCode MakeFFT(DDLayer l, MPI_Comm comm, DDTensor x, DDTensor X, DDPrimitive *F)
{
  DDBackend b;

  PetscFunctionBegin;
  PetscCall(DDLayerGetBackend_Private(l, &b));
  PetscCall(DDPrimitiveCreate(comm, F));
  PetscCall(DDPrimitiveSetType(*F, DDPRIMITIVEFFT));
  PetscCall(DDPrimitiveFFTSetBackend_Private(*F, b));
  PetscCall(DDPrimitiveSetUp(*F, x, X));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Spectral   *a    = (Spectral *)l->data;
  DDTensor    x    = xs[0];
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;
  char        sx[128];

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_INCOMP, "A spectral convolution takes (N, C, spatial...) tensors with 1 to 3 spatial dimensions; the input has shape %s", sx);
  const PetscInt d = x->order - 2;
  PetscCheck(a->nm > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Spectral layer %s needs its modes (DDLayerSpectralSetModes() or -%slayer_spectral_modes)", prefix, prefix);
  PetscCheck(a->nm == 1 || a->nm == d, comm, PETSC_ERR_ARG_SIZ, "-%slayer_spectral_modes has %" PetscInt_FMT " entries but the input (shape %s) has %" PetscInt_FMT " spatial dimension(s)", prefix, a->nm, sx, d);
  for (PetscInt k = 0; k < x->order; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "A spectral layer's input cannot be replicated (dimension %" PetscInt_FMT ")", k);
  a->d = d;
  PetscInt modes[3];
  for (PetscInt j = 0; j < d; j++) {
    a->s[j]  = x->shape[2 + j];
    modes[j] = a->modes[a->nm == 1 ? 0 : j];
    if (j < d - 1) PetscCheck(2 * modes[j] <= a->s[j], comm, PETSC_ERR_ARG_OUTOFRANGE, "-%slayer_spectral_modes: %" PetscInt_FMT " modes in spatial dimension %" PetscInt_FMT " of the input (shape %s) need 2 x %" PetscInt_FMT " <= %" PetscInt_FMT, prefix, modes[j], j, sx, modes[j], a->s[j]);
    else PetscCheck(modes[j] <= a->s[j] / 2 + 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "-%slayer_spectral_modes: %" PetscInt_FMT " modes in the last spatial dimension of the input (shape %s) exceed the half-spectrum %" PetscInt_FMT, prefix, modes[j], sx, a->s[j] / 2 + 1);
  }
  const PetscInt Cin = x->shape[1], Cout = a->cout > 0 ? a->cout : Cin;
  /* the output: x's distribution, Cout channels balanced over x's channel workers */
  {
    PetscInt shape[DD_MAX_DIM], one = 1;
    for (PetscInt k = 0; k < x->order; k++) shape[k] = x->shape[k];
    shape[1] = Cout;
    DDTensor y;
    PetscCall(CreateOnPartitionOf(x, shape, 1, &one, &y));
    PetscCall(DDLayerSetOutput_Private(l, y));
  }
  /* spectral tensors on the Fourier partition, and the transforms */
  PetscCall(DDTensorCreateFFT(x, d, modes, &a->X));
  PetscCall(MakeFFT(l, comm, x, a->X, &a->F1));
  PetscCall(DDTensorDuplicate(a->X, &a->dX));
  {
    PetscInt shape[DD_MAX_DIM], one = 1;
    for (PetscInt k = 0; k < a->X->order; k++) shape[k] = a->X->shape[k];
    shape[1] = Cout;
    PetscCall(CreateOnPartitionOf(a->X, shape, 1, &one, &a->Y));
    PetscCall(DDTensorDuplicate(a->Y, &a->dY));
    PetscCall(MakeFFT(l, comm, l->output, a->Y, &a->F2));
    /* the weights: (Cin, Cout, modes..., 2), the modes owned as in X */
    shape[0] = Cin;
    PetscInt fr[2] = {0, 1};
    PetscCall(CreateOnPartitionOf(a->X, shape, 2, fr, &a->w));
    PetscCall(DDLayerAddParameter_Private(l, "weight", a->w));
  }
  /* the local mode mixing: X (N, Cin, K), Y (N, Cout, K) complex, and D / S on this rank's entries of the last mode dimension */
  {
    const DDLayout &LX = a->X->layout, &LY = a->Y->layout;
    const PetscInt  k  = d + 1;
    PetscReal       S  = 1;
    for (PetscInt j = 0; j < d; j++) S *= a->s[j];
    a->g      = SpectralMixGeom();
    a->g.N    = LX.n[0];
    a->g.Ci   = LX.n[1];
    a->g.Co   = LY.n[1];
    a->g.K    = 1;
    for (PetscInt j = 2; j < LX.order - 1; j++) a->g.K *= LX.n[j];
    a->g.nl     = LY.n[k];
    a->g.lstart = LY.start[k];
    a->g.sd     = a->s[d - 1];
    a->g.invS   = 1.0 / S;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_InitParams(DDLayer l, PetscInt64 seed)
{
  Spectral      *a   = (Spectral *)l->data;
  const PetscInt cin = a->w->shape[0], cout = a->w->shape[1];

  PetscFunctionBegin;
  /* the reference code draws scale * U(0, 1), scale = 1 / (in out); the default here is U(-scale, scale) */
  PetscCall(DDTensorInitialize_Private(a->w, l->inittype, l->initscale, 2 * seed + 1, cin, cout, 1.0 / (PetscReal)(cin * cout)));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Spectral *a = (Spectral *)l->data;
  DDTensor  x, yt;

  PetscFunctionBegin;
  PetscCall(ConformLayout(xs[0], l->setupin[0], &a->xin, &x, true));
  PetscCall(DDPrimitiveApply(a->F1, x, a->X));
  if (a->X->layout.bulksize) /* Y = (D / S) X . W on this rank's modes: the backend's mode-mixing kernel */
    PetscCall(DispatchType(a->X->dtype, [&](auto z) {
      using T = decltype(z);
      return CallKernel<T>(l, &KernelTable<T>::spectralmix, DD_KERNEL_SPECTRAL, a->g, HostArray<const T>(a->X), HostArray<const T>(a->w), HostArray<T>(a->Y));
    }));
  PetscCall(ConformLayout(y, l->output, &a->dyo, &yt, false));
  PetscCall(DDPrimitiveApplyAdjoint(a->F2, a->Y, yt));
  if (yt != y) PetscCall(DDTensorCopy(yt, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Spectral *a  = (Spectral *)l->data;
  DDTensor  dx = dxs ? dxs[0] : NULL, dyt, dxt;

  PetscFunctionBegin;
  PetscCall(ConformLayout(dy, l->output, &a->dyo, &dyt, true));
  PetscCall(DDPrimitiveApply(a->F2, dyt, a->dY));
  if (a->X->layout.bulksize) /* dX = ((D / S) dY) . conj(W), dW += conj(X) . ((D / S) dY) */
    PetscCall(DispatchType(a->X->dtype, [&](auto z) {
      using T = decltype(z);
      return CallKernel<T>(l, &KernelTable<T>::spectralmixadjoint, DD_KERNEL_SPECTRAL, a->g, HostArray<const T>(a->X), HostArray<const T>(a->w), HostArray<const T>(a->dY), HostArray<T>(a->dX), HostArray<T>(l->grads[0]));
    }));
  PetscCall(DDTensorStateIncrease_Private(l->grads[0]));
  if (dx) {
    PetscCall(ConformLayout(dx, l->setupin[0], &a->dxo, &dxt, false));
    PetscCall(DDPrimitiveApplyAdjoint(a->F1, a->dX, dxt));
    if (dxt != dx) PetscCall(DDTensorCopy(dxt, dx));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The layer's local work on this rank for the performance model (paper 003 sec. V-A's per-configuration
  estimate; LayerKernelRun in ddnn/private/ddbackendimpl.h): the FFT stages' kernels and the mode mixing,
  as Spectral_Forward() and Spectral_Backward() run them, on copies of every tensor they touch (the
  layer's X, its gradient and the primitives' stage tensors stay as they are), each repartition between
  the stages replaced by one local copy of its destination's bulk, or left out with withmoves false (where the
  model prices every repartition whole by its calibrated fit). Nothing here is collective.
*/
PetscErrorCode ddnn::DDLayerSpectralKernelRun_Private(DDLayer l, bool nodx, bool withmoves, bool copies, LayerKernelRun *run)
{
  PetscFunctionBegin;
  PetscCall(KernelRunBegin(l, DDLAYERSPECTRAL, run));
  Spectral *a = (Spectral *)l->data;
  DDTensor  x = l->nin > 0 ? l->setupin[0] : NULL;
  if (!a->F1 || !x) PetscFunctionReturn(PETSC_SUCCESS);
  std::vector<FftStageView> s1, s2;
  PetscCall(DDPrimitiveFFTGetStages_Private(a->F1, &s1));
  PetscCall(DDPrimitiveFFTGetStages_Private(a->F2, &s2));
  PetscMPIInt P;
  PetscCallMPI(MPI_Comm_size(PetscObjectComm((PetscObject)l), &P));
  run->key = std::string(x->dtype == DD_FLOAT32 ? "spectral float32" : "spectral float64") + " P" + std::to_string(P) + " x[" + KernelRunLayoutKey(x) + "] y[" + KernelRunLayoutKey(l->output) + "] X[" + KernelRunLayoutKey(a->X) + "] Y[" + KernelRunLayoutKey(a->Y) + "]";
  for (auto *st : {&s1, &s2})
    for (auto &v : *st) run->key += " a[" + KernelRunLayoutKey(v.a) + "] b[" + KernelRunLayoutKey(v.b) + "]" + (v.k ? "" : " none");
  if (nodx) run->key += " nodx";
  if (!withmoves) run->key += " nomoves";
  if (!copies) PetscFunctionReturn(PETSC_SUCCESS);
  bool same = true;
  auto copy = [&](DDTensor t, DDTensor *c) -> PetscErrorCode { /* NULL for an empty local piece */
    bool s1;
    PetscFunctionBegin;
    *c = NULL;
    if (!t->layout.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
    PetscCall(KernelRunLocalCopy(t, c, &s1));
    run->tensors.push_back(*c);
    same = same && s1;
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  DDTensor                                  xc, yc, Xc, Wc, Yc, dYc, dXc, dWc, dxc = NULL;
  std::vector<std::array<DDTensor, 2>>      c1(s1.size()), c2(s2.size());
  for (auto pr : {std::make_pair(x, &xc), std::make_pair(l->output, &yc), std::make_pair(a->X, &Xc), std::make_pair(a->w, &Wc), std::make_pair(a->Y, &Yc), std::make_pair(a->dY, &dYc), std::make_pair(a->dX, &dXc), std::make_pair(l->grads[0], &dWc)}) PetscCall(copy(pr.first, pr.second));
  if (!nodx) PetscCall(copy(x, &dxc)); /* the input gradient's own copy: the input's stays as it is from call to call */
  for (size_t t = 0; t < s1.size(); t++) {
    PetscCall(copy(s1[t].a, &c1[t][0]));
    PetscCall(copy(s1[t].b, &c1[t][1]));
  }
  for (size_t t = 0; t < s2.size(); t++) {
    PetscCall(copy(s2[t].a, &c2[t][0]));
    PetscCall(copy(s2[t].b, &c2[t][1]));
  }
  /* a repartition's local pass into dst: from src where both hold the same local box, else from a twin of dst */
  std::vector<std::pair<DDTensor, DDTensor>> moves;
  auto move = [&](DDTensor src, DDTensor dst) -> PetscErrorCode {
    bool sbox = src && dst && src->layout.order == dst->layout.order;
    PetscFunctionBegin;
    for (PetscInt k = 0; sbox && k < dst->layout.order; k++) sbox = src->layout.n[k] == dst->layout.n[k];
    if (!sbox && dst) PetscCall(copy(dst, &src));
    moves.push_back({src, dst});
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  /* the forward: F1 (x -> X), the mixing, F2^* (Y -> y); the backward: F2 (dy -> dY), the mixing's adjoint, F1^* (dX -> dx) */
  struct Step {
    int      what; /* 0: a move (moves[i]), 1: a kernel Forward, 2: a kernel Adjoint, 3: the mixing, 4: its adjoint */
    size_t   i;
    FftKernel *k;
    DDTensor from, to;
  };
  std::vector<Step> fwd, bwd;
  auto addmove = [&](std::vector<Step> &v, DDTensor src, DDTensor dst) -> PetscErrorCode {
    PetscFunctionBegin;
    if (!withmoves) PetscFunctionReturn(PETSC_SUCCESS); /* priced with the repartition */
    PetscCall(move(src, dst));
    v.push_back({0, moves.size() - 1, nullptr, NULL, NULL});
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  auto transform = [&](std::vector<Step> &v, const std::vector<FftStageView> &st, std::vector<std::array<DDTensor, 2>> &c, DDTensor in, DDTensor out) -> PetscErrorCode {
    PetscFunctionBegin;
    for (size_t t = 0; t < st.size(); t++) {
      PetscCall(addmove(v, t ? c[t - 1][1] : in, c[t][0]));
      if (st[t].k) v.push_back({1, 0, st[t].k, c[t][0], c[t][1]});
    }
    PetscCall(addmove(v, c.back()[1], out));
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  auto adjoint = [&](std::vector<Step> &v, const std::vector<FftStageView> &st, std::vector<std::array<DDTensor, 2>> &c, DDTensor in, DDTensor out) -> PetscErrorCode {
    PetscFunctionBegin;
    PetscCall(addmove(v, in, c.back()[1]));
    for (size_t t = st.size(); t-- > 0;) {
      if (st[t].k) v.push_back({2, 0, st[t].k, c[t][1], c[t][0]});
      PetscCall(addmove(v, c[t][0], t ? c[t - 1][1] : out));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  if (!s1.empty() && !s2.empty()) {
    PetscCall(transform(fwd, s1, c1, xc, Xc));
    fwd.push_back({3, 0, nullptr, NULL, NULL});
    PetscCall(adjoint(fwd, s2, c2, Yc, yc));
    PetscCall(transform(bwd, s2, c2, yc, dYc));
    bwd.push_back({4, 0, nullptr, NULL, NULL});
    if (!nodx) PetscCall(adjoint(bwd, s1, c1, dXc, dxc));
  }
  if (!same) { /* a local layout this rank cannot reproduce alone: not timed (the caller keeps the fit) */
    PetscCall(LayerKernelRunDestroy(run));
    run->untimed = true;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* the mode mixing and its adjoint, found along the layer's backend chain once (not per timed pass) */
  const SpectralMixGeom g = a->g;
  std::function<void()> mixfwd, mixadj;
  if (Xc && Wc && Yc && dYc && dXc && dWc) {
    DDBackend be;
    PetscCall(DDLayerGetBackend_Private(l, &be));
    PetscCall(DispatchType(Xc->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      decltype(KernelTable<T>::spectralmix)        fm;
      decltype(KernelTable<T>::spectralmixadjoint) fa;
      PetscFunctionBegin;
      PetscCall(DDBackendFind<T>(be, &KernelTable<T>::spectralmix, DD_KERNEL_SPECTRAL, &fm));
      PetscCall(DDBackendFind<T>(be, &KernelTable<T>::spectralmixadjoint, DD_KERNEL_SPECTRAL, &fa));
      mixfwd = [=]() { fm(g, HostArray<const T>(Xc), HostArray<const T>(Wc), HostArray<T>(Yc)); };
      mixadj = [=]() { fa(g, HostArray<const T>(Xc), HostArray<const T>(Wc), HostArray<const T>(dYc), HostArray<T>(dXc), HostArray<T>(dWc)); };
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
  }
  auto exec = [=](const std::vector<Step> &steps) -> PetscErrorCode {
    const struct _DDBackendVecOps *ops;
    PetscFunctionBegin;
    PetscCall(DDVecOps_Private(DD_MEMTYPE_HOST, &ops)); /* the copies are host tensors (host backends only: DDLayerGetModelTime()) */
    for (const Step &st : steps) switch (st.what) {
      case 0: {
        DDTensor src = moves[st.i].first, dst = moves[st.i].second;
        if (dst) PetscCall(ops->copy(dst->dtype, &src->layout, src->array, &dst->layout, dst->array));
      } break;
      case 1:
        if (st.from && st.to) PetscCall(st.k->Forward(st.from->array, st.to->array));
        break;
      case 2:
        if (st.from && st.to) PetscCall(st.k->Adjoint(st.from->array, st.to->array));
        break;
      case 3:
        if (mixfwd) mixfwd();
        break;
      case 4:
        if (mixadj) mixadj();
        break;
      }
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  run->pass[0] = [exec, fwd]() { return exec(fwd); };
  run->pass[1] = [exec, bwd]() { return exec(bwd); };
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Spectral_View(DDLayer l, PetscViewer viewer)
{
  Spectral *a = (Spectral *)l->data;
  PetscBool iascii;

  PetscFunctionBegin;
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscViewerASCIIPrintf(viewer, "modes"));
  for (PetscInt j = 0; j < a->nm; j++) PetscCall(PetscViewerASCIIPrintf(viewer, " %" PetscInt_FMT, a->modes[j]));
  PetscCall(PetscViewerASCIIPrintf(viewer, ", out channels %" PetscInt_FMT "\n", a->cout));
  if (a->F1) {
    PetscInt64 pr, fu;
    PetscCall(DDPrimitiveFFTGetVolume(a->F1, &pr, &fu));
    PetscCall(PetscViewerASCIIPrintf(viewer, "forward FFT transposes move %" PetscInt64_FMT " bytes (%" PetscInt64_FMT " without mode pruning)\n", pr, fu));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERSPECTRAL - "spectral": the spectral convolution of a Fourier neural operator, y = irfftn(W . rfftn(x) on the kept modes)

  Options Database Keys:
+ -layer_spectral_modes <m1,...> - modes per spatial dimension (one value for all)
- -layer_spectral_out_channels <n> - output channels (default: the input's)

  Notes:
  Input (N, Cin, s_1, ..., s_d), d = 1, 2, 3, float32 or float64, any partition; output
  (N, Cout, s_1, ..., s_d) distributed like the input. The weight (one parameter, "weight") is
  (Cin, Cout, 2 m_1, ..., 2 m_{d-1}, m_d, 2): complex numbers as (real, imag), the corner blocks
  of the reference code's weights1..weights4 concatenated along the mode dimensions (see
  `DDPRIMITIVEFFT` for the mode order), partitioned over the modes like the Fourier-space tensors
  of `DDTensorCreateFFT()` (channel mixing is local per mode). The transforms are
  `DDPRIMITIVEFFT` primitives (distributed FFTs with mode truncation between the stages; the local
  transforms are the FFT kernels of the layer's backend chain: FFTW on the CPU, cuFFT on /gpu/cuda).
  Default initialization U(-1/(Cin Cout), 1/(Cin Cout)).

  Level: intermediate

.seealso: `DDLayerSpectralSetModes()`, `DDLayerSpectralSetOutputChannels()`, `DDPRIMITIVEFFT`, `DDTensorCreateFFT()`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Spectral(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Spectral;
  l->minin               = 1;
  l->maxin               = 1;
  l->ops->setfromoptions = Spectral_SetFromOptions;
  l->ops->setup          = Spectral_SetUp;
  l->ops->forward        = Spectral_Forward;
  l->ops->backward       = Spectral_Backward;
  l->ops->initparams     = Spectral_InitParams;
  l->ops->view           = Spectral_View;
  l->ops->reset          = Spectral_Reset;
  l->ops->destroy        = Spectral_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}
