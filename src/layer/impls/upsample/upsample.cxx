/*
  DDLAYERUPSAMPLE: distributed nearest(-exact) and (bi/tri)linear upsampling by scale factors or to a size,
  paper 000 sec. 4.1.1 ("interpolating layers ... the algorithm is very similar to that of
  pooling"):

    Forward:  x <- H x;  y <- INTERP(x)          Backward: dx <- INTERP^*(dy);  dx <- H^* dx

  The output (n s along a dimension of size n) is decomposed like the input's partition,
  balanced along the spatial dimensions, with the input's batch and channel ownership and
  format. A worker's input window is the range of the source indices of its outputs, computed
  with PyTorch's formulas on global indices; the indices clamp to [0, n - 1] globally, so
  windows never leave the tensor and need no padding (this is PyTorch's replicate-style border
  behavior). The windows go to the halo primitive with DDPrimitiveHaloSetWindow(). Linear
  interpolation is linear in x, so Backward is exactly its adjoint (the transposed weights)
  followed by the halo's adjoint.

  Semantics are torch.nn.Upsample(scale_factor = s | size = m, mode = 'nearest' |
  'nearest-exact' | 'linear' | 'bilinear' | 'trilinear', align_corners) of torch 1.13, whose
  interpolate passes the given scale factor to the kernels (recompute_scale_factor unset):
  r = 1/s when a scale factor is given (the output has floor(n s) entries), r = n/m when a size
  is; nearest takes floor(o r) (PyTorch's float arithmetic), nearest-exact floor((o + 0.5) r);
  linear with align_corners false samples at (o + 0.5) r - 0.5 clamped at 0, with align_corners
  true at o (n - 1)/(m - 1). A linear output as long as the input is a copy. Nearest takes floor(o r)
  at every size, as torch's forward does on NCHW tensors; torch 1.13's nearest_idx() shortcuts (a
  copy when m = n, o/2 when m = 2n), taken by its channels-last forward (4-D and 5-D tensors with one
  channel) and by its backward, differ from floor(o r) when a non-integer scale factor gives m = n
  or m = 2n (n = 3, s = 1.3: floor(o / 1.3) reads 0, 0, 1, not 0, 1, 2): there torch's backward is
  not the adjoint of its forward, and ddnn's gradient (the exact adjoint) differs from it. The local loops are the fast kernels of
  src/backend/cpu/upsample_fast.cxx (both element types), checked against the reference loops
  of src/backend/reference/upsample_ref.cxx in tests/test_08_fastkernels.cxx.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <backend/kernels.hpp>
#include <memory>
#include <vector>
#include <cmath>
#include <algorithm>
#include <string>

using namespace ddnn;

namespace
{
struct Upsample {
  /* hyper-parameters */
  DDUpsampleMode mode = DD_UPSAMPLE_NEAREST;
  SpatialParam   scale;
  PetscBool      align = PETSC_FALSE;
  PetscInt       nreal = 0, nsize = 0; /* real scale factors / output sizes given (entries), 0: not given */
  PetscReal      rs[3] = {0, 0, 0};
  PetscInt       sz[3] = {0, 0, 0};
  double         rsc[3] = {1, 1, 1};  /* set-up: the scale factor per dimension (0: a size was given) */
  /* set-up */
  PetscInt     D = 0, sc[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  DDPrimitive  H     = NULL;
  PetscInt64   xhash = 0;
  PetscInt     xlo[DD_MAX_DIM] = {0}, xhi[DD_MAX_DIM] = {0};
  DDTensor     xc = NULL, dxc = NULL, dyc = NULL;
  bool         hasout = false;
  PetscInt     xorg[5] = {0}, xn[5] = {0};
  UpsampleGeom g;
  BoxOffsets   xo, yo;
  std::unique_ptr<UpsampleKernel> kern;           /* a backend's set-up kernel (the device's), else the table's loops */
  DDBackend                       kb = nullptr;  /* its backend */
  Upsample() { scale.opt = "layer_upsample_scale"; }
};
} // namespace

static PetscErrorCode UpsampleGet(DDLayer l, Upsample **c, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERUPSAMPLE, fn));
  *c = (Upsample *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerUpsampleSetMode - Nearest (default) or linear interpolation

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERUPSAMPLE` layer
- mode - `DD_UPSAMPLE_NEAREST`, `DD_UPSAMPLE_NEAREST_EXACT` (torch's 'nearest-exact') or `DD_UPSAMPLE_LINEAR`
         (linear, bilinear or trilinear by the number of spatial dimensions)

  Options Database Key:
. -layer_upsample_mode <nearest,linear,nearest-exact> - the mode

  Level: beginner

.seealso: `DDLAYERUPSAMPLE`, `DDLayerUpsampleSetScale()`, `DDLayerUpsampleSetAlignCorners()`
@*/
PetscErrorCode DDLayerUpsampleSetMode(DDLayer l, DDUpsampleMode mode)
DD_CXX_TRY
{
  Upsample *c;

  PetscFunctionBegin;
  PetscCall(UpsampleGet(l, &c, "DDLayerUpsampleSetMode"));
  PetscCheck(mode == DD_UPSAMPLE_NEAREST || mode == DD_UPSAMPLE_LINEAR || mode == DD_UPSAMPLE_NEAREST_EXACT, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown upsampling mode %d", (int)mode);
  c->mode = mode;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerUpsampleSetScale - Integer scale factor per spatial dimension (required)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERUPSAMPLE` layer
. n - 1 (the same factor in every dimension) or the number of spatial dimensions
- s - the factors (at least 1), outermost spatial dimension first; the output has n s entries

  Options Database Key:
. -layer_upsample_scale <s0,s1,...> - the factors

  Level: beginner

.seealso: `DDLAYERUPSAMPLE`, `DDLayerUpsampleSetMode()`
@*/
PetscErrorCode DDLayerUpsampleSetScale(DDLayer l, PetscInt n, const PetscInt s[])
DD_CXX_TRY
{
  Upsample *c;

  PetscFunctionBegin;
  PetscCall(UpsampleGet(l, &c, "DDLayerUpsampleSetScale"));
  for (PetscInt j = 0; j < n; j++) PetscCheck(s[j] >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Scale factor %" PetscInt_FMT " (entry %" PetscInt_FMT ") must be at least 1: upsampling only", s[j], j);
  PetscCall(c->scale.Set(PetscObjectComm((PetscObject)l), n, s, "The scale"));
  c->nreal = c->nsize = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerUpsampleSetScaleFactors - Real (non-integer) scale factors per spatial dimension (torch.nn.Upsample's scale_factor)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERUPSAMPLE` layer
. n - 1 (the same factor in every dimension) or the number of spatial dimensions
- s - the factors, positive; the output has floor(n s) entries (at least 1), and the kernels use 1/s
      in the source index, as torch 1.13 does when recompute_scale_factor is not set

  Options Database Key:
. -layer_upsample_scale_factor <s0,s1,...> - the factors

  Notes:
  Replaces an integer scale or a size given before.

  Level: intermediate

.seealso: `DDLayerUpsampleSetScale()`, `DDLayerUpsampleSetSize()`
@*/
PetscErrorCode DDLayerUpsampleSetScaleFactors(DDLayer l, PetscInt n, const PetscReal s[])
DD_CXX_TRY
{
  Upsample *c;
  MPI_Comm  comm;

  PetscFunctionBegin;
  PetscCall(UpsampleGet(l, &c, "DDLayerUpsampleSetScaleFactors"));
  comm = PetscObjectComm((PetscObject)l);
  PetscCheck(n >= 1 && n <= 3, comm, PETSC_ERR_ARG_SIZ, "Scale factors need 1 to 3 entries, %" PetscInt_FMT " given (-layer_upsample_scale_factor)", n);
  for (PetscInt j = 0; j < n; j++) PetscCheck(s[j] > 0 && !PetscIsInfOrNanReal(s[j]), comm, PETSC_ERR_ARG_OUTOFRANGE, "Scale factor %g (entry %" PetscInt_FMT ") must be positive and finite (-layer_upsample_scale_factor)", (double)s[j], j);
  for (PetscInt j = 0; j < n; j++) c->rs[j] = s[j];
  c->nreal = n;
  c->nsize = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerUpsampleSetSize - The output's spatial size instead of a scale (torch.nn.Upsample's size)

  Logically collective

  Input Parameters:
+ l - a `DDLAYERUPSAMPLE` layer
. n - 1 (the same size in every dimension) or the number of spatial dimensions
- m - the sizes, at least 1; the kernels use n/m in the source index

  Options Database Key:
. -layer_upsample_size <m0,m1,...> - the sizes

  Notes:
  Replaces a scale given before.

  Level: intermediate

.seealso: `DDLayerUpsampleSetScale()`, `DDLayerUpsampleSetScaleFactors()`
@*/
PetscErrorCode DDLayerUpsampleSetSize(DDLayer l, PetscInt n, const PetscInt m[])
DD_CXX_TRY
{
  Upsample *c;
  MPI_Comm  comm;

  PetscFunctionBegin;
  PetscCall(UpsampleGet(l, &c, "DDLayerUpsampleSetSize"));
  comm = PetscObjectComm((PetscObject)l);
  PetscCheck(n >= 1 && n <= 3, comm, PETSC_ERR_ARG_SIZ, "The size needs 1 to 3 entries, %" PetscInt_FMT " given (-layer_upsample_size)", n);
  for (PetscInt j = 0; j < n; j++) PetscCheck(m[j] >= 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "Output size %" PetscInt_FMT " (entry %" PetscInt_FMT ") must be at least 1 (-layer_upsample_size)", m[j], j);
  for (PetscInt j = 0; j < n; j++) c->sz[j] = m[j];
  c->nsize = n;
  c->nreal = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerUpsampleSetAlignCorners - Linear interpolation aligns the corner entries of input and output (default false)

  Logically collective

  Input Parameters:
+ l   - a `DDLAYERUPSAMPLE` layer
- flg - `PETSC_TRUE`: output o samples the input at o (n - 1) / (n s - 1); `PETSC_FALSE`: at (o + 1/2) / s - 1/2 (clamped at 0)

  Notes:
  As in torch.nn.Upsample, only the linear modes accept align_corners.

  Options Database Key:
. -layer_upsample_align_corners <bool> - the flag

  Level: intermediate

.seealso: `DDLayerUpsampleSetMode()`
@*/
PetscErrorCode DDLayerUpsampleSetAlignCorners(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  Upsample *c;

  PetscFunctionBegin;
  PetscCall(UpsampleGet(l, &c, "DDLayerUpsampleSetAlignCorners"));
  c->align = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Upsample_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Upsample *c = (Upsample *)l->data;
  PetscEnum mode;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer upsample options");
  mode = (PetscEnum)c->mode;
  PetscCall(PetscOptionsEnum("-layer_upsample_mode", "Interpolation", "DDLayerUpsampleSetMode", DDUpsampleModes, mode, &mode, &set));
  if (set) PetscCall(DDLayerUpsampleSetMode(l, (DDUpsampleMode)mode));
  {
    PetscInt  cnt = 3, iv[3];
    PetscReal rv[3];
    PetscBool given;
    PetscCall(c->scale.FromOptions(PetscOptionsObject, "-layer_upsample_scale", "Integer scale factor per spatial dimension", "DDLayerUpsampleSetScale"));
    PetscCall(PetscOptionsHasName(((PetscObject)l)->options, ((PetscObject)l)->prefix, "-layer_upsample_scale", &given));
    if (given) c->nreal = c->nsize = 0; /* an integer scale replaces a real one or a size */
    PetscCall(PetscOptionsRealArray("-layer_upsample_scale_factor", "Real scale factor per spatial dimension", "DDLayerUpsampleSetScaleFactors", rv, &cnt, &set));
    if (set) PetscCall(DDLayerUpsampleSetScaleFactors(l, cnt, rv));
    cnt = 3;
    PetscCall(PetscOptionsIntArray("-layer_upsample_size", "Output size per spatial dimension", "DDLayerUpsampleSetSize", iv, &cnt, &set));
    if (set) PetscCall(DDLayerUpsampleSetSize(l, cnt, iv));
  }
  PetscCall(PetscOptionsBool("-layer_upsample_align_corners", "Align the corners (linear modes)", "DDLayerUpsampleSetAlignCorners", c->align, &c->align, NULL));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Upsample_Reset(DDLayer l)
{
  Upsample *c = (Upsample *)l->data;

  PetscFunctionBegin;
  PetscCall(DDPrimitiveDestroy(&c->H));
  for (DDTensor *t : {&c->xc, &c->dxc, &c->dyc}) PetscCall(DDTensorDestroy(t));
  c->hasout = false;
  c->kern.reset();
  c->kb = nullptr;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Upsample_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Upsample_Reset(l));
  delete (Upsample *)l->data;
  l->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Sources of global output index o along a dimension of size n (output m = n s), in the
  tensor's precision T, as PyTorch computes them (aten/src/ATen/native/UpSample.h:
  nearest_idx, area_pixel_compute_scale, area_pixel_compute_source_index,
  compute_source_index_and_lambda).
*/
template <class T>
static T ScaleValue(double s, PetscInt n, PetscInt m) /* compute_scales_value: 1/s when a factor is given, else n/m */
{
  return s > 0 ? (T)(1.0 / s) : (T)n / (T)m;
}
template <class T>
static void Sources(DDUpsampleMode mode, bool align, PetscInt o, PetscInt n, PetscInt m, double s, PetscInt *i0, PetscInt *i1, double *w0, double *w1)
{
  if (mode == DD_UPSAMPLE_NEAREST_EXACT) { /* nearest_exact_idx: no shortcut */
    const float scale = ScaleValue<float>(s, n, m);
    *i0 = *i1 = PetscMin((PetscInt)std::floor((float)(((double)o + 0.5) * (double)scale)), n - 1);
    *w0       = 1;
    *w1       = 0;
    return;
  }
  if (mode == DD_UPSAMPLE_NEAREST) { /* nearest_neighbor_compute_source_index, as torch's NCHW forward kernel: no shortcut (see the note at the top) */
    const float scale = ScaleValue<float>(s, n, m);
    *i0 = *i1 = PetscMin((PetscInt)std::floor((float)o * scale), n - 1);
    *w0       = 1;
    *w1       = 0;
    return;
  }
  if (m == n) { /* linear, as long as the input: a copy */
    *i0 = *i1 = o;
    *w0       = 1;
    *w1       = 0;
    return;
  }
  T src;
  if (align) {
    const T scale = m > 1 ? (T)(n - 1) / (T)(m - 1) : (T)0;
    src           = scale * (T)o;
  } else {
    const T scale = ScaleValue<T>(s, n, m);
    src           = scale * ((T)o + (T)0.5) - (T)0.5;
    if (src < (T)0) src = (T)0;
  }
  PetscInt idx = PetscMin((PetscInt)std::floor(src), n - 1);
  T        l1  = std::min(std::max(src - (T)idx, (T)0), (T)1);
  T        l0  = (T)1 - l1;
  *i0          = idx;
  *i1          = idx + (idx < n - 1 ? 1 : 0);
  *w0          = (double)l0;
  *w1          = (double)l1;
}

static PetscErrorCode Upsample_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Upsample   *c    = (Upsample *)l->data;
  DDTensor    x    = xs[0];
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_INCOMP, "An upsampling layer takes N x C x spatial tensors with 1 to 3 spatial dimensions; the input has order %" PetscInt_FMT, x->order);
  PetscCheck(c->mode == DD_UPSAMPLE_LINEAR || !c->align, comm, PETSC_ERR_ARG_INCOMP, "align_corners applies to linear interpolation only (as in torch.nn.Upsample); the mode is %s (-%slayer_upsample_align_corners)", DDUpsampleModes[c->mode], prefix);
  const PetscInt D = x->order - 2;
  const bool     linear = c->mode == DD_UPSAMPLE_LINEAR, align = c->align ? true : false;
  c->D                  = D;
  if (c->nreal || c->nsize) {
    const PetscInt cnt = c->nreal ? c->nreal : c->nsize;
    PetscCheck(cnt == 1 || cnt == D, comm, PETSC_ERR_ARG_SIZ, "-%slayer_upsample_%s has %" PetscInt_FMT " entries but the input has %" PetscInt_FMT " spatial dimension(s)", prefix, c->nreal ? "scale_factor" : "size", cnt, D);
    for (PetscInt j = 3 - D; j < 3; j++) {
      const PetscInt e = cnt == 1 ? 0 : j - (3 - D), n = x->shape[2 + j - (3 - D)];
      c->sc[j]         = 1;
      if (c->nreal) {
        c->rsc[j] = (double)c->rs[e];
        c->out[j] = (PetscInt)std::floor((double)n * c->rsc[j]); /* torch: floor(float(n * s)) in double */
        PetscCheck(c->out[j] >= 1, comm, PETSC_ERR_ARG_SIZ, "Scale factor %g on %" PetscInt_FMT " entries gives an empty output (-%slayer_upsample_scale_factor)", c->rsc[j], n, prefix);
      } else {
        c->rsc[j] = 0;
        c->out[j] = c->sz[e];
      }
    }
  } else {
    PetscCall(c->scale.Resolve(l, D, 1, true, 1, c->sc));
    for (PetscInt j = 3 - D; j < 3; j++) {
      c->out[j] = x->shape[2 + j - (3 - D)] * c->sc[j];
      c->rsc[j] = (double)c->sc[j];
    }
  }
  /* per spatial dimension: this worker's output range, the sources of its outputs, its window */
  const DDLayout                    &Lx = x->layout;
  PetscInt                           a[3] = {0, 0, 0}, b[3] = {0, 0, 0}, oa[3] = {0, 0, 0}, ob[3] = {0, 0, 0};
  std::vector<std::vector<PetscInt>> outlx(D), gi0(3), gi1(3);
  std::vector<std::vector<double>>   gw0(3), gw1(3);
  PetscBool                          needhalo = PETSC_FALSE;
  for (PetscInt j = 0; j < D; j++) {
    const PetscInt jj = j + 3 - D, dim = 2 + j, n = x->shape[dim], m = c->out[jj], P = x->replicated[dim] ? 1 : x->part->shape[dim];
    std::vector<PetscInt> r(P + 1);
    PetscCall(DDSplitOwnership_Private(m, P, r.data()));
    for (PetscInt q = 0; q < P; q++) outlx[j].push_back(r[q + 1] - r[q]);
    if (!x->active) continue;
    const PetscInt cc = x->replicated[dim] ? 0 : x->part->coords[dim];
    oa[jj]            = r[cc];
    ob[jj]            = r[cc + 1];
    for (PetscInt o = oa[jj]; o < ob[jj]; o++) {
      PetscInt i0, i1;
      double   w0, w1;
      if (x->dtype == DD_FLOAT32) Sources<float>(c->mode, align, o, n, m, c->rsc[jj], &i0, &i1, &w0, &w1);
      else Sources<double>(c->mode, align, o, n, m, c->rsc[jj], &i0, &i1, &w0, &w1);
      gi0[jj].push_back(i0);
      gi1[jj].push_back(i1);
      gw0[jj].push_back(w0);
      gw1[jj].push_back(w1);
    }
    if (ob[jj] > oa[jj]) {
      a[jj] = *std::min_element(gi0[jj].begin(), gi0[jj].end());
      b[jj] = *std::max_element(gi1[jj].begin(), gi1[jj].end()) + 1;
    } else a[jj] = b[jj] = Lx.start[dim];
    if (a[jj] < Lx.start[dim] || b[jj] > Lx.start[dim] + Lx.n[dim]) needhalo = PETSC_TRUE;
  }
  /* H: the windows' halos from the neighbors (App. B); the output keeps x's partition */
  PetscCall(WindowHaloSetUp(l, x, D, a, b, needhalo, &c->H, &c->xhash, c->xlo, c->xhi));
  PetscCall(SpatialOutputSetUp(l, x, D, c->out, outlx));
  /* the local geometry: window coordinates of the sources */
  const DDLayout &L  = x->layout;
  const DDLayout &Ly = l->output->layout;
  PetscInt        yorg[5] = {0}, yn[5] = {0};
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
      PetscCheck(!x->active || (Ly.start[q] == oa[jj] && Ly.n[q] == ob[jj] - oa[jj]), PETSC_COMM_SELF, PETSC_ERR_PLIB, "Output decomposition mismatch");
    }
    if (yn[q] == 0) c->hasout = false;
  }
  UpsampleGeom &g = c->g;
  g               = UpsampleGeom();
  g.D             = D;
  g.N             = yn[0];
  g.C             = yn[1];
  g.linear        = linear;
  for (PetscInt jj = 0; jj < 3; jj++) {
    g.i0[jj].assign(1, 0);
    g.i1[jj].assign(1, 0);
    g.w0[jj].assign(1, 1.0);
    g.w1[jj].assign(1, 0.0);
    if (jj < 3 - D) continue;
    g.out[jj] = ob[jj] - oa[jj];
    g.i0[jj].resize(g.out[jj]);
    g.i1[jj].resize(g.out[jj]);
    g.w0[jj] = gw0[jj];
    g.w1[jj] = gw1[jj];
    for (PetscInt i = 0; i < g.out[jj]; i++) {
      g.i0[jj][i] = gi0[jj][i] - a[jj];
      g.i1[jj][i] = gi1[jj][i] - a[jj];
    }
  }
  if (c->hasout) {
    BoxOffsetsBuild(L, D, c->xorg, c->xn, &c->xo);
    BoxOffsetsBuild(Ly, D, yorg, yn, &c->yo);
    /* the first backend along the layer's chain with interpolation: a set-up kernel (the device's form) or the table's loops */
    DDBackend b;
    PetscCall(DDLayerGetBackend_Private(l, &b));
    PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscFunctionBegin;
      for (DDBackend w = b; w; w = DDBackendNext_Private(w)) {
        if (Table<T>(w).upsamplefwd) break;
        if (Table<T>(w).upsamplecreate) {
          UpsampleKernelSpec spec;
          spec.g  = c->g;
          spec.xo = c->xo;
          spec.yo = c->yo;
          PetscCall(Table<T>(w).upsamplecreate(spec, &c->kern));
          c->kb = w;
          break;
        }
      }
      PetscFunctionReturn(PETSC_SUCCESS);
    }));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Upsample_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Upsample *c = (Upsample *)l->data;
  DDTensor  xh, yo;

  PetscFunctionBegin;
  PetscCall(ConformHalo(xs[0], c->xhash, c->xlo, c->xhi, &c->xc, &xh, true));
  if (c->H) PetscCall(DDPrimitiveApply(c->H, xh, NULL));
  yo = y->layouthash == l->output->layouthash ? y : l->output;
  if (c->hasout && c->kern) {
    KernelEvent e(c->kb, DD_KERNEL_UPSAMPLE);
    PetscCall(c->kern->Forward(xh->array, yo->array));
  } else if (c->hasout)
    PetscCall(DispatchType(xh->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      DDBackend which;
      decltype(KernelTable<T>::upsamplefwd) fn;
      PetscCall(LayerKernel<T>(l, &KernelTable<T>::upsamplefwd, DD_KERNEL_UPSAMPLE, &fn, &which));
      KernelEvent e(which, DD_KERNEL_UPSAMPLE);
      fn(c->g, HostArray<const T>(xh), c->xo, HostArray<T>(yo), c->yo);
      return PETSC_SUCCESS;
    }));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Upsample_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Upsample *c  = (Upsample *)l->data;
  DDTensor  dx = dxs ? dxs[0] : NULL, dyo, dxh;

  PetscFunctionBegin;
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  if (dy->layouthash == l->output->layouthash) dyo = dy;
  else {
    if (!c->dyc) PetscCall(DDTensorDuplicate(l->output, &c->dyc));
    PetscCall(DDTensorCopy(dy, c->dyc));
    dyo = c->dyc;
  }
  PetscCall(ConformHalo(dx, c->xhash, c->xlo, c->xhi, &c->dxc, &dxh, false));
  PetscCall(DDTensorZeroEntries(dxh));
  if (c->hasout && c->kern) {
    KernelEvent e(c->kb, DD_KERNEL_UPSAMPLE);
    PetscCall(c->kern->Backward(dyo->array, dxh->array));
  } else if (c->hasout)
    PetscCall(DispatchType(dxh->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      DDBackend which;
      decltype(KernelTable<T>::upsamplebwd) fn;
      PetscCall(LayerKernel<T>(l, &KernelTable<T>::upsamplebwd, DD_KERNEL_UPSAMPLE, &fn, &which));
      KernelEvent e(which, DD_KERNEL_UPSAMPLE);
      fn(c->g, HostArray<const T>(dyo), c->yo, HostArray<T>(dxh), c->xo);
      return PETSC_SUCCESS;
    }));
  if (c->H) PetscCall(DDPrimitiveApplyAdjoint(c->H, dxh, NULL));
  if (dxh != dx) PetscCall(DDTensorCopy(dxh, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Upsample_View(DDLayer l, PetscViewer viewer)
{
  Upsample *c = (Upsample *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "%s interpolation%s\n", DDUpsampleModes[c->mode], c->mode == DD_UPSAMPLE_LINEAR ? (c->align ? ", align_corners yes" : ", align_corners no") : ""));
  if (l->setupcalled) {
    std::string sc, os;
    for (PetscInt jj = 3 - c->D; jj < 3; jj++) {
      char b[64];
      PetscCall(PetscSNPrintf(b, sizeof(b), "%g", c->rsc[jj]));
      sc += (sc.empty() ? "" : "x") + std::string(c->rsc[jj] > 0 ? b : "n/m");
      os += (os.empty() ? "" : "x") + std::to_string(c->out[jj]);
    }
    PetscCall(PetscViewerASCIIPrintf(viewer, "scale %s, output %s (%" PetscInt_FMT "-D), halo exchange %s, kernels: loops\n", sc.c_str(), os.c_str(), c->D, c->H ? "yes" : "no"));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERUPSAMPLE - "upsample": distributed 1-, 2- and 3-D upsampling by scale factors or to a size (paper 000 sec. 4.1.1)

  Input N x C x spatial on any partition; output N x C x floor(n s)... (or the given size) on the same partition, with
  the input's batch and channel ownership and format, balanced along the spatial dimensions.
  Each worker computes its output box from an input window given to the halo primitive
  (`DDPrimitiveHaloSetWindow()`): the range of the source indices of its outputs, clamped to
  the tensor as PyTorch clamps them. Backward is the adjoint of the interpolation followed by
  the halo's adjoint (the layer is linear: `DDLayerAdjointTest()` applies).

  Semantics are torch.nn.Upsample(scale_factor | size, mode = 'nearest', 'nearest-exact' or
  'linear'/'bilinear'/'trilinear' by dimension, align_corners) of torch 1.13: integer or real
  scale factors per dimension (the output has floor(n s) entries and the source index uses 1/s),
  or a target size (the source index uses n/m). Factors below 1 (downsampling) are accepted as
  torch.nn.functional.interpolate accepts them.

  Envelope: 1-3 spatial dimensions, any partition, float32 and float64. Rejected (errors naming
  the option): align_corners with a nearest mode; scale factors that are not positive and finite
  or give an empty output; sizes below 1; a number of entries other than 1 or D.

  Kernels: loops for both data types (oneDNN's resampling has other semantics).

  Options Database Keys:
+ -layer_upsample_mode <nearest,linear,nearest-exact> - interpolation
. -layer_upsample_scale <s,...> - integer factors (1 or D entries)
. -layer_upsample_scale_factor <s,...> - real factors (1 or D entries)
. -layer_upsample_size <m,...> - output size (1 or D entries)
. -layer_upsample_align_corners <bool> - align corners (linear)
- -primitive_halo_neighbors_only <bool> - fail set-up when a halo would come from past the adjacent workers (paper 000's assumption; default: from any worker)

  Level: beginner

.seealso: `DDLayerUpsampleSetMode()`, `DDLayerUpsampleSetScale()`, `DDLayerUpsampleSetScaleFactors()`, `DDLayerUpsampleSetSize()`,
          `DDLayerUpsampleSetAlignCorners()`, `DDLAYERPOOL`, `DDPRIMITIVEHALO`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Upsample(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Upsample;
  l->ops->setfromoptions = Upsample_SetFromOptions;
  l->ops->setup          = Upsample_SetUp;
  l->ops->forward        = Upsample_Forward;
  l->ops->backward       = Upsample_Backward;
  l->ops->view           = Upsample_View;
  l->ops->reset          = Upsample_Reset;
  l->ops->destroy        = Upsample_Destroy;
  l->device              = PETSC_TRUE; /* on device tensors: the /gpu/cuda interpolation kernel, the halo primitive on the device */
  PetscFunctionReturn(PETSC_SUCCESS);
}

