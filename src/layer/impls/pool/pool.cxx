/*
  DDLAYERPOOL: distributed max and average pooling, paper 000 sec. 4.1.1 and Fig. 3.

    Forward:  x <- H x;  y <- POOL(x)            Backward: dx <- [dPOOL]^*(dy);  dx <- H^* dx

  Pooling is local along every dimension: batch and channel splits need nothing, spatial splits
  need the halo exchange H of the input. The output is decomposed like the input's partition,
  balanced along the spatial dimensions (App. B.1: the output drives the load balance) and with
  the input's batch and channel ownership; every worker's input window follows from its output
  range and may be unbalanced or smaller than its bulk (App. B.4-B.5: "extra input" the local
  kernel skips). The window is clipped to the tensor: padding is never stored or exchanged, the
  local kernels skip taps outside the tensor (oneDNN's padding, or the reference loops' tap
  ranges), which is exactly PyTorch's -inf padding of max pooling and zero padding of average
  pooling. No linearity is assumed (max pooling is not linear).

  Semantics are torch.nn.MaxPool{1,2,3}d / AvgPool{1,2,3}d: stride defaults to the kernel;
  padding <= kernel / 2; output size floor or ceil((n + 2p - d (k - 1) - 1) / s) + 1, where in
  ceil mode the last window must start inside the input or the left padding; average divisor
  with count_include_pad counts the taps inside [-p, n + p) (never the ceil-mode overhang),
  without it the taps inside the tensor; max pooling's gradient goes to the first maximum.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <vector>
#include <memory>
#include <string>

using namespace ddnn;

namespace
{
struct Pool {
  /* hyper-parameters */
  DDPoolType   type = DD_POOL_MAX;
  SpatialParam kernel, stride, padding, dilation;
  PetscBool    ceil = PETSC_FALSE, countpad = PETSC_TRUE;
  PetscInt     divisor = 0; /* average pooling's divisor_override (0: none) */
  /* set-up */
  PetscInt    D = 0, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  DDPrimitive H = NULL;                           /* halo exchange of the input (NULL when no rank needs one) */
  PetscInt64  xhash = 0;                          /* the input layout H and the kernels were set up for */
  PetscInt    xlo[DD_MAX_DIM] = {0}, xhi[DD_MAX_DIM] = {0};
  DDTensor    xc = NULL, dxc = NULL, dyc = NULL, ysc = NULL; /* conforming copies and scratch, made when first needed */
  DDTensor    xfwd = NULL;                        /* the tensor the last Forward pooled (not a reference) */
  bool        hasout = false, fwdtraining = true;
  PetscInt    xorg[5] = {0}, xn[5] = {0}, wa[3] = {0}, o0[3] = {0}, yorg[5] = {0};
  PoolGeom    g;
  std::unique_ptr<PoolKernel> kern; /* the local kernel (NULL: no local output) */
  PoolKernelSpec              spec;  /* what it was made from (its tensors: the set-up's, not referenced), and by which backend (the model's measurement makes its own: DDLayerPoolKernelRun_Private()) */
  DDBackend                   kbe = NULL;
  PetscInt64                  yhash = 0; /* the output's layout at set-up */
  bool                        anymodify = false; /* some rank's kernel modifies dy in Backward */
  Pool()
  {
    kernel.opt   = "layer_pool_kernel";
    stride.opt   = "layer_pool_stride";
    padding.opt  = "layer_pool_padding";
    dilation.opt = "layer_pool_dilation";
  }
};
} // namespace

static PetscErrorCode PoolGet(DDLayer l, Pool **c, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERPOOL, fn));
  *c = (Pool *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerPoolSetType - Max (default) or average pooling

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERPOOL` layer
- type - `DD_POOL_MAX` or `DD_POOL_AVG`

  Options Database Key:
. -layer_pool_type <max,avg> - the type

  Level: beginner

.seealso: `DDLAYERPOOL`, `DDLayerPoolSetKernel()`
@*/
PetscErrorCode DDLayerPoolSetType(DDLayer l, DDPoolType type)
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetType"));
  PetscCheck(type == DD_POOL_MAX || type == DD_POOL_AVG, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown pooling type %d", (int)type);
  c->type = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolGetType - Max or average pooling

  Not collective

  Input Parameter:
. l - a `DDLAYERPOOL` layer

  Output Parameter:
. type - `DD_POOL_MAX` or `DD_POOL_AVG`

  Level: beginner

.seealso: `DDLAYERPOOL`, `DDLayerPoolSetType()`
@*/
PetscErrorCode DDLayerPoolGetType(DDLayer l, DDPoolType *type)
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscValidPointer(type, 2);
  PetscCall(PoolGet(l, &c, "DDLayerPoolGetType"));
  *type = c->type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetKernel - Window size per spatial dimension (required)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERPOOL` layer
. n - 1 (the same size in every dimension) or the number of spatial dimensions
- k - the sizes, outermost spatial dimension first (D, H, W)

  Options Database Key:
. -layer_pool_kernel <k0,k1,...> - the sizes

  Level: beginner

.seealso: `DDLAYERPOOL`, `DDLayerPoolSetStride()`
@*/
PetscErrorCode DDLayerPoolSetKernel(DDLayer l, PetscInt n, const PetscInt k[])
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetKernel"));
  PetscCall(c->kernel.Set(PetscObjectComm((PetscObject)l), n, k, "The kernel"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetStride - Stride per spatial dimension (default: the kernel size, as in PyTorch)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERPOOL` layer
. n - 1 or the number of spatial dimensions
- s - the strides

  Options Database Key:
. -layer_pool_stride <s0,...> - the strides

  Level: beginner

.seealso: `DDLayerPoolSetKernel()`
@*/
PetscErrorCode DDLayerPoolSetStride(DDLayer l, PetscInt n, const PetscInt s[])
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetStride"));
  PetscCall(c->stride.Set(PetscObjectComm((PetscObject)l), n, s, "The stride"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetPadding - Implicit padding on both sides per spatial dimension (default 0)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERPOOL` layer
. n - 1 or the number of spatial dimensions
- p - the paddings, at most half the kernel size (PyTorch's rule)

  Notes:
  Max pooling pads with -inf, average pooling with zeros (see `DDLayerPoolSetCountIncludePad()`).

  Options Database Key:
. -layer_pool_padding <p0,...> - the paddings

  Level: beginner

.seealso: `DDLayerPoolSetCeilMode()`
@*/
PetscErrorCode DDLayerPoolSetPadding(DDLayer l, PetscInt n, const PetscInt p[])
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetPadding"));
  PetscCall(c->padding.Set(PetscObjectComm((PetscObject)l), n, p, "The padding"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetDilation - Spacing between the taps of a max-pooling window (default 1)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERPOOL` layer
. n - 1 or the number of spatial dimensions
- d - the dilations

  Notes:
  As in PyTorch, only max pooling has a dilation; average pooling with a dilation above 1 is
  an error at set-up.

  Options Database Key:
. -layer_pool_dilation <d0,...> - the dilations

  Level: intermediate

.seealso: `DDLayerPoolSetKernel()`
@*/
PetscErrorCode DDLayerPoolSetDilation(DDLayer l, PetscInt n, const PetscInt d[])
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetDilation"));
  PetscCall(c->dilation.Set(PetscObjectComm((PetscObject)l), n, d, "The dilation"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetCeilMode - Rounds the output size up instead of down (default false)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERPOOL` layer
- flg - `PETSC_TRUE` for ceil mode

  Notes:
  As in PyTorch, the output size is ceil((n + 2 padding - dilation (kernel - 1) - 1) / stride) + 1,
  less one if the last window would start beyond the input and its left padding. The windows
  that overhang the padded input read only the entries that exist.

  Options Database Key:
. -layer_pool_ceil_mode <bool> - the flag

  Level: intermediate

.seealso: `DDLayerPoolSetCountIncludePad()`
@*/
PetscErrorCode DDLayerPoolSetCeilMode(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetCeilMode"));
  c->ceil = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetCountIncludePad - Whether average pooling divides by the padded window (default true, as in PyTorch)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERPOOL` layer
- flg - `PETSC_TRUE`: divide by the number of taps inside the padded input [-padding, n + padding);
        `PETSC_FALSE`: by the number of taps inside the input

  Notes:
  In either case the part of a ceil-mode window beyond the padded input is not counted
  (PyTorch's rule). Max pooling ignores the flag.

  Options Database Key:
. -layer_pool_count_include_pad <bool> - the flag

  Level: intermediate

.seealso: `DDLayerPoolSetPadding()`, `DDLayerPoolSetCeilMode()`
@*/
PetscErrorCode DDLayerPoolSetCountIncludePad(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetCountIncludePad"));
  c->countpad = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerPoolSetDivisorOverride - Average pooling divides every window's sum by this number instead of its size (torch's divisor_override)

  Logically collective

  Input Parameters:
+ l       - a `DDLAYERPOOL` layer
- divisor - positive, or 0 for none (the default: the divisor of `DDLayerPoolSetCountIncludePad()`)

  Options Database Key:
. -layer_pool_divisor_override <n> - the divisor (0: none)

  Notes:
  With an override, count_include_pad and the ceil-mode rule for the divisor play no role, as in
  PyTorch. Max pooling rejects an override at `DDLayerSetUp()`. It is available for 1-, 2- and
  3-D pooling (PyTorch has it for 2- and 3-D). The oneDNN kernels cannot take it: the layer runs
  on the loops of the next backend.

  Level: intermediate

.seealso: `DDLayerPoolSetCountIncludePad()`, `DDLayerPoolSetType()`
@*/
PetscErrorCode DDLayerPoolSetDivisorOverride(DDLayer l, PetscInt divisor)
DD_CXX_TRY
{
  Pool *c;

  PetscFunctionBegin;
  PetscCall(PoolGet(l, &c, "DDLayerPoolSetDivisorOverride"));
  PetscCheck(divisor >= 0, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Pooling divisor_override %" PetscInt_FMT " must be positive, or 0 for none (-layer_pool_divisor_override)", divisor);
  c->divisor = divisor;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Pool_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Pool     *c = (Pool *)l->data;
  PetscEnum type;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer pool options");
  type = (PetscEnum)c->type;
  PetscCall(PetscOptionsEnum("-layer_pool_type", "Pooling type", "DDLayerPoolSetType", DDPoolTypes, type, &type, &set));
  if (set) c->type = (DDPoolType)type;
  PetscCall(c->kernel.FromOptions(PetscOptionsObject, "-layer_pool_kernel", "Window size per spatial dimension", "DDLayerPoolSetKernel"));
  PetscCall(c->stride.FromOptions(PetscOptionsObject, "-layer_pool_stride", "Stride per spatial dimension (default: the kernel)", "DDLayerPoolSetStride"));
  PetscCall(c->padding.FromOptions(PetscOptionsObject, "-layer_pool_padding", "Padding per spatial dimension", "DDLayerPoolSetPadding"));
  PetscCall(c->dilation.FromOptions(PetscOptionsObject, "-layer_pool_dilation", "Dilation per spatial dimension (max pooling)", "DDLayerPoolSetDilation"));
  PetscCall(PetscOptionsBool("-layer_pool_ceil_mode", "Round the output size up", "DDLayerPoolSetCeilMode", c->ceil, &c->ceil, NULL));
  PetscCall(PetscOptionsBool("-layer_pool_count_include_pad", "Average pooling divides by the padded window", "DDLayerPoolSetCountIncludePad", c->countpad, &c->countpad, NULL));
  {
    PetscInt dv;
    PetscCall(PetscOptionsInt("-layer_pool_divisor_override", "Average pooling's divisor (0: none)", "DDLayerPoolSetDivisorOverride", c->divisor, &dv, &set));
    if (set) PetscCall(DDLayerPoolSetDivisorOverride(l, dv));
  }
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Pool_Reset(DDLayer l)
{
  Pool *c = (Pool *)l->data;

  PetscFunctionBegin;
  PetscCall(DDPrimitiveDestroy(&c->H));
  for (DDTensor *t : {&c->xc, &c->dxc, &c->dyc, &c->ysc}) PetscCall(DDTensorDestroy(t));
  c->xfwd = NULL;
  c->kern.reset();
  c->spec = PoolKernelSpec();
  c->kbe  = NULL;
  c->hasout = c->anymodify = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Pool_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Pool_Reset(l));
  delete (Pool *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* PyTorch's pooling_output_shape (aten/src/ATen/native/Pool.h) */
static PetscInt PoolOutputSize(PetscInt n, PetscInt k, PetscInt s, PetscInt p, PetscInt d, PetscBool ceil)
{
  PetscInt num = n + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  PetscInt q   = num >= 0 ? num / s : -((-num + s - 1) / s); /* floor division */
  PetscInt o   = q + 1;
  if (ceil && (o - 1) * s >= n + p) o--;
  return o;
}

static PetscErrorCode Pool_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Pool       *c    = (Pool *)l->data;
  DDTensor    x    = xs[0];
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_INCOMP, "A pooling layer takes N x C x spatial tensors with 1 to 3 spatial dimensions; the input has order %" PetscInt_FMT, x->order);
  PetscCheck(c->type == DD_POOL_AVG || c->divisor == 0, comm, PETSC_ERR_ARG_INCOMP, "Max pooling has no divisor: -%slayer_pool_divisor_override %" PetscInt_FMT " applies to average pooling", prefix, c->divisor);
  const PetscInt D = x->order - 2;
  c->D             = D;
  /* hyper-parameters, padded to 3 with leading unit dimensions */
  PetscCall(c->kernel.Resolve(l, D, 1, true, 1, c->k));
  if (c->stride.n) PetscCall(c->stride.Resolve(l, D, 1, false, 1, c->s));
  else
    for (PetscInt j = 0; j < 3; j++) c->s[j] = c->k[j];
  PetscCall(c->padding.Resolve(l, D, 0, false, 0, c->p));
  for (PetscInt j = 0; j < 3 - D; j++) c->p[j] = 0; /* Resolve pads with ones */
  PetscCall(c->dilation.Resolve(l, D, 1, false, 1, c->d));
  for (PetscInt j = 3 - D; j < 3; j++) {
    PetscCheck(c->type == DD_POOL_MAX || c->d[j] == 1, comm, PETSC_ERR_ARG_INCOMP, "Average pooling has no dilation (as in PyTorch's AvgPool); -%slayer_pool_dilation is %" PetscInt_FMT " along spatial dimension %" PetscInt_FMT, prefix, c->d[j], j - (3 - D));
    PetscCheck(2 * c->p[j] <= c->k[j], comm, PETSC_ERR_ARG_OUTOFRANGE, "Padding %" PetscInt_FMT " along spatial dimension %" PetscInt_FMT " must be at most half the kernel size %" PetscInt_FMT " (PyTorch's rule; -%slayer_pool_padding)", c->p[j], j - (3 - D), c->k[j], prefix);
    const PetscInt n = x->shape[2 + j - (3 - D)], ext = c->d[j] * (c->k[j] - 1) + 1;
    c->out[j]        = PoolOutputSize(n, c->k[j], c->s[j], c->p[j], c->d[j], c->ceil);
    PetscCheck(c->out[j] >= 1, comm, PETSC_ERR_ARG_SIZ, "Kernel of extent %" PetscInt_FMT " is larger than the padded input (%" PetscInt_FMT " + 2 x %" PetscInt_FMT ") along spatial dimension %" PetscInt_FMT ": the output would be empty (-%slayer_pool_kernel)", ext, n, c->p[j], j - (3 - D), prefix);
  }
  /* this worker's output range and input window along every spatial dimension */
  const DDLayout &Lx     = x->layout;
  PetscInt        a[3]   = {0, 0, 0}, b[3] = {0, 0, 0}, oa[3] = {0, 0, 0}, ob[3] = {0, 0, 0};
  std::vector<std::vector<PetscInt>> outlx(D);
  PetscBool       needhalo = PETSC_FALSE;
  for (PetscInt j = 0; j < D; j++) {
    const PetscInt jj = j + 3 - D, dim = 2 + j, n = x->shape[dim], ext = c->d[jj] * (c->k[jj] - 1) + 1;
    const PetscInt P  = x->replicated[dim] ? 1 : x->part->shape[dim];
    std::vector<PetscInt> r(P + 1);
    PetscCall(DDSplitOwnership_Private(c->out[jj], P, r.data()));
    for (PetscInt q = 0; q < P; q++) outlx[j].push_back(r[q + 1] - r[q]);
    if (!x->active) continue;
    const PetscInt cc = x->replicated[dim] ? 0 : x->part->coords[dim];
    oa[jj]            = r[cc];
    ob[jj]            = r[cc + 1];
    if (ob[jj] > oa[jj]) {
      a[jj] = PetscMax(oa[jj] * c->s[jj] - c->p[jj], 0);
      b[jj] = PetscMin((ob[jj] - 1) * c->s[jj] - c->p[jj] + ext, n);
    } else a[jj] = b[jj] = Lx.start[dim];
    if (a[jj] < Lx.start[dim] || b[jj] > Lx.start[dim] + Lx.n[dim]) needhalo = PETSC_TRUE;
  }
  /* H: the windows' halos from the neighbors (App. B); the output keeps x's partition */
  PetscCall(WindowHaloSetUp(l, x, D, a, b, needhalo, &c->H, &c->xhash, c->xlo, c->xhi));
  PetscCall(SpatialOutputSetUp(l, x, D, c->out, outlx));
  c->yhash = l->output->layouthash;
  /* the local geometry */
  const DDLayout &L  = x->layout; /* after the halo grew */
  const DDLayout &Ly = l->output->layout;
  PetscInt       *yorg = c->yorg, yn[5] = {0};
  c->hasout               = x->active ? true : false;
  for (PetscInt q = 0; q < 2 + D; q++) {
    yorg[q] = Ly.lo[q];
    yn[q]   = Ly.n[q];
    if (q < 2) {
      c->xorg[q] = L.lo[q];
      c->xn[q]   = L.n[q];
    } else {
      const PetscInt jj = q - 2 + 3 - D;
      c->xorg[q]        = a[jj] - L.start[q] + L.lo[q];
      c->xn[q]          = b[jj] - a[jj];
      c->wa[jj]         = a[jj];
      c->o0[jj]         = oa[jj];
      PetscCheck(!x->active || (Ly.start[q] == oa[jj] && Ly.n[q] == ob[jj] - oa[jj]), PETSC_COMM_SELF, PETSC_ERR_PLIB, "Output decomposition mismatch");
    }
    if (yn[q] == 0) c->hasout = false;
  }
  PoolGeom &g = c->g;
  g         = PoolGeom();
  g.D       = D;
  g.N       = yn[0];
  g.C       = yn[1];
  g.max     = c->type == DD_POOL_MAX;
  for (PetscInt jj = 0; jj < 3; jj++) {
    g.first[jj].assign(1, 0);
    g.ntaps[jj].assign(1, 1);
    g.div[jj].assign(1, 1);
    if (jj < 3 - D) continue;
    const PetscInt q = 2 + jj - (3 - D), n = x->shape[q], K = c->k[jj], S = c->s[jj], P = c->p[jj], Dl = c->d[jj];
    g.out[jj] = yn[q];
    g.d[jj]   = Dl;
    g.first[jj].resize(yn[q]);
    g.ntaps[jj].resize(yn[q]);
    g.div[jj].resize(yn[q]);
    for (PetscInt i = 0; i < yn[q]; i++) {
      const PetscInt st = (oa[jj] + i) * S - P;
      PetscInt       t0 = st >= 0 ? 0 : (-st + Dl - 1) / Dl, t1 = PetscMin(K - 1, (n - 1 - st) / Dl);
      g.first[jj][i]    = st + t0 * Dl - a[jj];
      g.ntaps[jj][i]    = t1 - t0 + 1;
      g.div[jj][i]      = c->countpad ? PetscMin(st + K, n + P) - st : t1 - t0 + 1;
    }
  }
  if (c->divisor > 0) /* divisor_override: the kernels divide by the product of the factors; put it all in the last one */
    for (PetscInt jj = 0; jj < 3; jj++) g.div[jj].assign(g.div[jj].size(), jj == 2 ? c->divisor : 1);
  /* the kernel, from the layer's backend chain */
  PetscErrorCode kerr = PETSC_SUCCESS;
  if (c->hasout) {
    DDBackend      be;
    PoolKernelSpec spec;
    PetscCall(DDLayerGetBackend_Private(l, &be));
    spec.D        = D;
    spec.type     = c->type;
    spec.countpad = c->countpad ? true : false;
    spec.divisor  = c->divisor;
    spec.g        = g;
    spec.x.t      = x;
    spec.y.t      = l->output;
    for (PetscInt q = 0; q < 5; q++) {
      spec.x.org[q] = c->xorg[q];
      spec.xn[q]    = c->xn[q];
      spec.y.org[q] = yorg[q];
      spec.yn[q]    = yn[q];
    }
    for (PetscInt jj = 0; jj < 3; jj++) {
      spec.k[jj] = c->k[jj];
      spec.s[jj] = c->s[jj];
      spec.d[jj] = c->d[jj];
      spec.p[jj] = c->p[jj];
      if (jj < 3 - D) continue;
      const PetscInt q = 2 + jj - (3 - D), ext = c->d[jj] * (c->k[jj] - 1) + 1;
      spec.n[jj]       = x->shape[q];
      spec.oend[jj]    = ob[jj];
      spec.padl[jj]    = a[jj] - (oa[jj] * c->s[jj] - c->p[jj]);
      spec.padr[jj]    = (ob[jj] - 1) * c->s[jj] - c->p[jj] + ext - b[jj];
    }
    kerr    = DDBackendPoolCreate(be, spec, &c->kern); /* rank-local: checked on every rank below */
    c->spec = spec;
    c->kbe  = be;
  }
  {
    PetscMPIInt r;
    PetscCallMPI(MPI_Comm_rank(comm, &r));
    DDCheckAll(comm, kerr == PETSC_SUCCESS, PETSC_ERR_LIB, "The pooling kernel of rank %d could not be set up (error %d)", r, (int)kerr);
  }
  {
    PetscBool loc = c->kern && c->kern->ModifiesDy() ? PETSC_TRUE : PETSC_FALSE, glob;
    PetscCall(DDAnyRank_Private(comm, loc, &glob));
    c->anymodify = glob ? true : false;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}


/* y = POOL(x window) on this worker */
static PetscErrorCode Pool_Local(Pool *c, DDTensor xh, DDTensor y, bool training)
{
  PetscFunctionBegin;
  if (!c->hasout) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(c->kern->Forward(xh, y, training));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Pool_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Pool    *c = (Pool *)l->data;
  DDTensor xh, yo;

  PetscFunctionBegin;
  PetscCall(ConformHalo(xs[0], c->xhash, c->xlo, c->xhi, &c->xc, &xh, true));
  if (c->H) PetscCall(DDPrimitiveApply(c->H, xh, NULL));
  yo = y->layouthash == l->output->layouthash ? y : l->output;
  PetscCall(Pool_Local(c, xh, yo, l->training ? true : false));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  c->xfwd        = xh;
  c->fwdtraining = l->training ? true : false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Pool_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Pool    *c  = (Pool *)l->data;
  DDTensor dx = dxs ? dxs[0] : NULL, dyo, dxh;

  PetscFunctionBegin;
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS); /* no parameters: nothing else to compute */
  /* dy in the output's layout (a copy when the kernel rescales it) */
  if (dy->layouthash == l->output->layouthash && !c->anymodify) dyo = dy;
  else {
    if (!c->dyc) PetscCall(DDTensorDuplicate(l->output, &c->dyc));
    PetscCall(DDTensorCopy(dy, c->dyc));
    dyo = c->dyc;
  }
  PetscCall(ConformHalo(dx, c->xhash, c->xlo, c->xhi, &c->dxc, &dxh, false));
  /* max pooling after an inference Forward (oneDNN kept no workspace): redo it in training mode */
  if (!c->fwdtraining && c->type == DD_POOL_MAX) {
    if (!c->ysc) PetscCall(DDTensorDuplicate(l->output, &c->ysc));
    if (c->H) PetscCall(DDPrimitiveApply(c->H, c->xfwd, NULL));
    PetscCall(Pool_Local(c, c->xfwd, c->ysc, true));
    c->fwdtraining = true;
  }
  if (!(c->hasout && c->kern->OverwritesDx())) PetscCall(DDTensorZeroEntries(dxh)); /* else the kernel writes the whole window, which is the whole storage */
  if (c->hasout) PetscCall(c->kern->Backward(dyo, dxh));
  if (c->H) PetscCall(DDPrimitiveApplyAdjoint(c->H, dxh, NULL));
  if (dxh != dx) PetscCall(DDTensorCopy(dxh, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Pool_View(DDLayer l, PetscViewer viewer)
{
  Pool *c = (Pool *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "%s pooling, ceil mode %s%s\n", DDPoolTypes[c->type], c->ceil ? "yes" : "no", c->type == DD_POOL_AVG ? (c->countpad ? ", count_include_pad yes" : ", count_include_pad no") : ""));
  if (c->divisor > 0) PetscCall(PetscViewerASCIIPrintf(viewer, "divisor_override %" PetscInt_FMT "\n", c->divisor));
  if (l->setupcalled) {
    auto dims = [&](const PetscInt v[3]) {
      std::string r;
      for (PetscInt jj = 3 - c->D; jj < 3; jj++) r += (r.empty() ? "" : "x") + std::to_string(v[jj]);
      return r;
    };
    PetscCall(PetscViewerASCIIPrintf(viewer, "kernel %s stride %s padding %s dilation %s (%" PetscInt_FMT "-D), output %s, halo exchange %s\n", dims(c->k).c_str(), dims(c->s).c_str(), dims(c->p).c_str(), dims(c->d).c_str(), c->D, dims(c->out).c_str(), c->H ? "yes" : "no"));
    PetscCall(PetscViewerASCIIPushSynchronized(viewer));
    PetscCall(PetscViewerASCIISynchronizedPrintf(viewer, "[%d] kernel: %s\n", PetscGlobalRank,
                                                 c->kern ? c->kern->Name() : "none (no local output)"));
    PetscCall(PetscViewerFlush(viewer));
    PetscCall(PetscViewerASCIIPopSynchronized(viewer));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERPOOL - "pool": distributed 1-, 2- and 3-D max and average pooling (paper 000 sec. 4.1.1, Fig. 3)

  Input N x C x spatial on any partition (batch, channel and spatial splits); output N x C x
  spatial' on the same partition, with the input's batch and channel ownership and format
  (blocked activations stay blocked), balanced along the spatial dimensions. Spatial splits use
  the halo exchange with the unbalanced (and negative, "extra input") halos of Appendix B;
  Backward is the adjoint of the pooling's Jacobian followed by the halo's adjoint.

  Hyper-parameters mean what they mean in torch.nn.MaxPool{1,2,3}d and AvgPool{1,2,3}d: kernel,
  stride (default: the kernel), padding (at most half the kernel), dilation (max only),
  ceil_mode, count_include_pad (average only, default true), divisor_override (average only;
  also for 1-D, where PyTorch has none); max pooling's gradient goes to the first maximum of
  each window, and a window holding a nan gives nan, its gradient going to the (last) nan, as
  PyTorch's max pool does.

  Envelope: 1-3 spatial dimensions, any partition, float32 and float64. Rejected at set-up (an
  error naming the option): padding above half the kernel, an empty output, dilation or a
  divisor_override with average / max pooling respectively; a negative divisor_override is
  rejected by `DDLayerPoolSetDivisorOverride()`.

  Kernels: oneDNN (float32; its jit kernels on the tensor's own format, the window read in
  place) or the loops (float64, float32 layouts oneDNN cannot take, divisor_override, which
  oneDNN cannot express, an output with a halo, which oneDNN would stage through a copy, and
  layouts oneDNN has no jit kernel for: plain storage, and 16c blocks without AVX-512). oneDNN's
  max pool drops a nan from its window: its kernel scans the local input after each forward (a
  read of it) and, where it holds a nan, runs the loops for that call.

  Options Database Keys:
+ -layer_pool_type <max,avg> - the type
. -layer_pool_kernel <k,...> - window size (1 or D entries)
. -layer_pool_stride <s,...> - stride
. -layer_pool_padding <p,...> - padding
. -layer_pool_dilation <d,...> - dilation (max)
. -layer_pool_ceil_mode <bool> - ceil mode
. -layer_pool_count_include_pad <bool> - average divisor
. -layer_pool_divisor_override <n> - average pooling's divisor (0: none)
- -primitive_halo_neighbors_only <bool> - fail set-up when a halo would come from past the adjacent workers (paper 000's assumption; default: from any worker)

  Level: beginner

.seealso: `DDLayerPoolSetType()`, `DDLayerPoolSetKernel()`, `DDLayerPoolSetCeilMode()`, `DDPRIMITIVEHALO`, `DDLAYERUPSAMPLE`
M*/
/* the local kernel of this rank alone on copies of the layer's tensors (the performance model's per-configuration
   estimate, paper 003 sec. V-A): a kernel of its own from the set-up's spec (a max pool's workspace is its
   kernel's state, which the layer's backward needs from the layer's own forward) */
PetscErrorCode ddnn::DDLayerPoolKernelRun_Private(DDLayer l, bool nodx, bool copies, LayerKernelRun *run)
{
  PetscFunctionBegin;
  PetscCall(KernelRunBegin(l, DDLAYERPOOL, run));
  Pool *c = (Pool *)l->data;
  if (!c->hasout || !c->kern) PetscFunctionReturn(PETSC_SUCCESS);
  /* the input as the kernel gets it: the set-up input, or the copy with the set-up halos the layer made of another */
  DDTensor xref = l->nin > 0 && l->setupin[0] && l->setupin[0]->layouthash == c->xhash ? l->setupin[0] : c->xc, xt, yt, dyt, dxt, dy0 = NULL;
  if (!xref || l->output->layouthash != c->yhash) { /* laid out anew since set-up: nothing to reproduce */
    run->untimed = true;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const PoolKernelSpec &sp = c->spec;
  run->key                 = std::string(l->output->dtype == DD_FLOAT32 ? "pool float32 " : "pool float64 ") + c->kern->Name() + (sp.type == DD_POOL_MAX ? " max" : " avg") + (sp.countpad ? " countpad" : "") + " div" + std::to_string(sp.divisor);
  for (int j = 0; j < 3; j++) run->key += " k" + std::to_string(sp.k[j]) + "s" + std::to_string(sp.s[j]) + "d" + std::to_string(sp.d[j]) + "p" + std::to_string(sp.p[j]) + "n" + std::to_string(sp.n[j]) + "e" + std::to_string(sp.oend[j]) + "(" + std::to_string(sp.padl[j]) + "," + std::to_string(sp.padr[j]) + ")";
  for (int q = 0; q < 5; q++) run->key += " " + std::to_string(sp.x.org[q]) + ":" + std::to_string(sp.xn[q]) + ">" + std::to_string(sp.y.org[q]) + ":" + std::to_string(sp.yn[q]);
  run->key += " x[" + KernelRunLayoutKey(xref) + "] y[" + KernelRunLayoutKey(l->output) + "]" + (nodx ? " nodx" : "");
  if (!copies) PetscFunctionReturn(PETSC_SUCCESS);
  const bool rescale = c->kern->ModifiesDy(), overwrites = c->kern->OverwritesDx();
  PetscCall(KernelRunCopies(run, {{xref, &xt}, {l->output, &yt}, {l->output, &dyt}, {xref, &dxt}, {rescale ? l->output : (DDTensor)NULL, &dy0}}));
  if (run->untimed) PetscFunctionReturn(PETSC_SUCCESS);
  /* the set-up's kernel, made again on the copies (their layouts are the set-up's) */
  PoolKernelSpec              spec = sp;
  std::unique_ptr<PoolKernel> made;
  spec.x.t            = xt;
  spec.y.t            = yt;
  PetscErrorCode ierr = DDBackendPoolCreate(c->kbe, spec, &made);
  if (ierr) PetscCall(LayerKernelRunDestroy(run)); /* the copies, before the error goes up */
  PetscCall(ierr);
  std::shared_ptr<PoolKernel> k = std::move(made);
  if (!k) { /* no kernel for the copies: not timed (the caller keeps the fit) */
    PetscCall(LayerKernelRunDestroy(run));
    run->untimed = true;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* as Pool_Forward() and Pool_Backward() run it, without the exchanges and their conforming copies */
  run->pass[0] = [k, xt, yt]() -> PetscErrorCode { return k->Forward(xt, yt, true); };
  if (!nodx)
    run->pass[1] = [k, dyt, dxt, dy0, overwrites]() -> PetscErrorCode {
      PetscFunctionBegin;
      if (dy0) PetscCall(DDTensorCopy(dy0, dyt)); /* the layer hands a rescaling kernel a copy of dy */
      if (!overwrites) PetscCall(DDTensorZeroEntries(dxt));
      PetscCall(k->Backward(dyt, dxt));
      PetscFunctionReturn(PETSC_SUCCESS);
    };
  PetscFunctionReturn(PETSC_SUCCESS);
}

PETSC_EXTERN PetscErrorCode DDLayerCreate_Pool(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Pool;
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda pooling kernels, the halo primitive on the device */
  l->ops->setfromoptions = Pool_SetFromOptions;
  l->ops->setup          = Pool_SetUp;
  l->ops->forward        = Pool_Forward;
  l->ops->backward       = Pool_Backward;
  l->ops->view           = Pool_View;
  l->ops->reset          = Pool_Reset;
  l->ops->destroy        = Pool_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

