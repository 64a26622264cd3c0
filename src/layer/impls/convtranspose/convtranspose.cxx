/*
  DDLAYERCONVTRANSPOSE: distributed transposed convolution (learnable upsampling), paper 000
  sec. 4.1.1 (a transposed convolution "shares algorithmic elements with the classical
  convolution"), sec. 4.1.2 and Fig. 4 for the channel distributions, sec. 3.2.5 and App. B
  for the halo.

  Semantics of torch.nn.ConvTranspose1d/2d/3d: input (N, Ci, n...), weight (Ci, Co, k...),
  bias (Co); along each spatial dimension input i feeds output o = i s - p + t d (0 <= t < k),
  and the output has (n - 1) s - 2 p + d (k - 1) + op + 1 entries (op: output padding; the
  last op rows get no input, only the bias).

  Partitions (D spatial dimensions, Ps = P_0 x ... x P_{D-1}), as for DDLAYERCONV:
    x  on Px = Pn x Pci x Ps                 (the input's own partition)
    y  on Py = Pn x Pco x Ps                 (the output: balanced along the spatial dimensions)
    w  on Pr = Pci x Pco x 1...1             (weights (Ci, Co, k...), on the workers with n = 0, s = 0)
    b  on Pb = Pco                           (bias, on the workers with n = 0, ci = 0, s = 0)
  and the work partition Pw = Pco x Pn x Pci x Ps, numbered three ways as in conv.cxx:
    Pw_x = (Pco, Pn, Pci, Ps)      x^ = B x  (copies over co)
    Pw_y = (Pci, Pn, Pco, Ps)      y  = R y^ (sums over ci)
    Pw_w = (Pn Ps, Pci, Pco, 1...) w^ = B w  (copies over n and s)

  The halo (App. B.1: the output's balanced decomposition drives the load): the worker whose
  output box is [o0, o1) along a dimension needs the inputs i with i s - p + t d in the box,
  i in [ceil((o0 + p - (k - 1) d) / s), floor((o1 - 1 + p) / s)] clipped to [0, n): the window
  given to the halo primitive (DDPrimitiveHaloSetWindow). The local transposed convolution
  maps the window onto the box with the left crop pl = o0 + p - i0 s (the local "padding")
  and the right crop pr = (i1 - 1) s - p + (k - 1) d + 1 - o1.

  Forward:  x^ = B x; x^ = H x^; w^ = B w; b^ = B b; y^ = convT(x^ window, w^) + [ci = 0] b^; y = R y^
  Backward: dy^ = R^* dy = B dy; dx^ window = convT_x^*(dy^) (a convolution of dy^);
            dw^ = convT_w^*(x^, dy^); db^ = sum dy^; dw += R dw^ (= B^* dw^); db += R db^;
            dx = B^* H^* dx^

  Kernels: oneDNN deconvolution (float32) with the crops as its padding_l/padding_r, on the
  window in place where it is dense, else on dense staged copies (DnnlConv::SetDenseStaging():
  oneDNN 2.6 runs only its reference kernels on non-dense windows). These must be >= 0; a negative crop means that the box begins or ends
  with rows no window entry reaches (output padding beyond the padding, op > p, or gaps
  between the strided taps, s > (k - 1) d + 1). oneDNN then computes the core of the box,
  [max(0, -pl), out + min(0, pr)) with crops max(pl, 0), max(pr, 0), and the edge rows get
  the bias directly (their dy goes to db only); a box no input reaches at all gets the bias
  only. float64: the reference loops, which handle any crop.
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <layer/impls/conv/convutil.hpp>
#include <vector>
#include <memory>

using namespace ddnn;

namespace
{
struct ConvT : ConvDistribution {
  /* hyper-parameters (co and bias are the distribution's) */
  SpatialParam kernel, stride, padding, dilation, outpad;
  PetscInt     pco = 1;
  /* set-up */
  PetscInt  k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1}, op[3] = {0, 0, 0};
  bool      edge = false;                         /* this worker's box has rows no input reaches */
  PetscInt  cs[3] = {0, 0, 0}, ce[3] = {1, 1, 1}; /* the core of the box that oneDNN computes (cs = ce = 0: none) */
  PetscInt  nedge = 0, nworkers = 0;              /* workers whose box has such rows */
  ConvTGeom                   g;
  std::unique_ptr<ConvKernel> kern; /* the local kernel (NULL: no local output) */
  ConvT()
  {
    kernel.opt   = "layer_convtranspose_kernel";
    stride.opt   = "layer_convtranspose_stride";
    padding.opt  = "layer_convtranspose_padding";
    dilation.opt = "layer_convtranspose_dilation";
    outpad.opt   = "layer_convtranspose_output_padding";
  }
};

/* floor and ceiling of a / b for b > 0 and any sign of a */
inline PetscInt FloorDiv(PetscInt a, PetscInt b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline PetscInt CeilDiv(PetscInt a, PetscInt b) { return -FloorDiv(-a, b); }

/*
  Along one dimension: the input window [*i0, *i1) (clipped to [0, n)) of the output box
  [o0, o1) and its crops; *ok is false when the box has entries but the window is empty or a
  crop is negative (rows of the box that no input reaches).
*/
void Window(PetscInt o0, PetscInt o1, PetscInt n, PetscInt k, PetscInt s, PetscInt p, PetscInt d, PetscInt *i0, PetscInt *i1, PetscInt *pl, PetscInt *pr, bool *ok)
{
  *i0 = *i1 = 0;
  *pl = *pr = 0;
  *ok       = true;
  if (o1 <= o0) return;
  PetscInt a = PetscMax(0, CeilDiv(o0 + p - (k - 1) * d, s)), b = PetscMin(n, FloorDiv(o1 - 1 + p, s) + 1);
  if (b <= a) {
    *ok = false; /* only bias reaches this box */
    return;
  }
  *i0 = a;
  *i1 = b;
  *pl = o0 + p - a * s;
  *pr = (b - 1) * s - p + (k - 1) * d + 1 - o1;
  *ok = *pl >= 0 && *pr >= 0;
}
} // namespace

static PetscErrorCode ConvTGet(DDLayer l, ConvT **c, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERCONVTRANSPOSE, fn));
  *c = (ConvT *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the implementations of the setters shared with conv (see DDLayerConvSetKernel() etc. in conv.cxx) */
static PetscErrorCode DDLayerConvSetOutputChannels_ConvT(DDLayer l, PetscInt co)
{
  ConvT *c = (ConvT *)l->data;

  PetscFunctionBegin;
  PetscCheck(co >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Output channels %" PetscInt_FMT " must be positive", co);
  c->co = co;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetKernel_ConvT(DDLayer l, PetscInt n, const PetscInt v[])
{
  PetscFunctionBegin;
  PetscCall(((ConvT *)l->data)->kernel.Set(PetscObjectComm((PetscObject)l), n, v, "The kernel"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetStride_ConvT(DDLayer l, PetscInt n, const PetscInt v[])
{
  PetscFunctionBegin;
  PetscCall(((ConvT *)l->data)->stride.Set(PetscObjectComm((PetscObject)l), n, v, "The stride"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetPadding_ConvT(DDLayer l, PetscInt n, const PetscInt v[])
{
  PetscFunctionBegin;
  PetscCall(((ConvT *)l->data)->padding.Set(PetscObjectComm((PetscObject)l), n, v, "The padding"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetDilation_ConvT(DDLayer l, PetscInt n, const PetscInt v[])
{
  PetscFunctionBegin;
  PetscCall(((ConvT *)l->data)->dilation.Set(PetscObjectComm((PetscObject)l), n, v, "The dilation"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetBias_ConvT(DDLayer l, PetscBool flg)
{
  PetscFunctionBegin;
  ((ConvT *)l->data)->bias = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetGroups_ConvT(DDLayer l, PetscInt g)
{
  PetscFunctionBegin;
  PetscCheck(g >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Groups %" PetscInt_FMT " must be positive (-layer_convtranspose_groups)", g);
  ((ConvT *)l->data)->groups = g;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetChannelWorkers_ConvT(DDLayer l, PetscInt n)
{
  PetscFunctionBegin;
  PetscCheck(n >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Channel workers %" PetscInt_FMT " must be positive", n);
  ((ConvT *)l->data)->pco = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetOutputPadding - Entries added at the end of a transposed convolution's output per spatial dimension (default 0)

  Logically collective

  Input Parameters:
+ l  - a `DDLAYERCONVTRANSPOSE` layer
. n  - 1 (the same in every dimension) or the number of spatial dimensions
- op - the output paddings, outermost spatial dimension first

  Notes:
  As PyTorch's output_padding: the output has (n - 1) s - 2 p + d (k - 1) + op + 1 entries, so
  that a strided convolution and its transposed convolution can map between the same sizes.
  Each entry must be smaller than the stride or the dilation of its dimension. The added
  entries get no input, only the bias; with the output's balanced decomposition they may lie
  on any worker (paper 000, App. B.1).

  Options Database Key:
. -layer_convtranspose_output_padding <op0,...> - the output paddings

  Level: intermediate

.seealso: `DDLAYERCONVTRANSPOSE`, `DDLayerConvSetPadding()`, `DDLayerConvSetStride()`
@*/
PetscErrorCode DDLayerConvSetOutputPadding(DDLayer l, PetscInt n, const PetscInt op[])
DD_CXX_TRY
{
  ConvT *c;

  PetscFunctionBegin;
  PetscCall(ConvTGet(l, &c, "DDLayerConvSetOutputPadding"));
  PetscCall(c->outpad.Set(PetscObjectComm((PetscObject)l), n, op, "The output padding"));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode ConvT_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  ConvT *c = (ConvT *)l->data;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer convtranspose options");
  PetscCall(PetscOptionsInt("-layer_convtranspose_out_channels", "Output channels", "DDLayerConvSetOutputChannels", c->co, &c->co, NULL));
  PetscCall(c->kernel.FromOptions(PetscOptionsObject, "-layer_convtranspose_kernel", "Kernel size per spatial dimension", "DDLayerConvSetKernel"));
  PetscCall(c->stride.FromOptions(PetscOptionsObject, "-layer_convtranspose_stride", "Stride per spatial dimension", "DDLayerConvSetStride"));
  PetscCall(c->padding.FromOptions(PetscOptionsObject, "-layer_convtranspose_padding", "Padding per spatial dimension", "DDLayerConvSetPadding"));
  PetscCall(c->outpad.FromOptions(PetscOptionsObject, "-layer_convtranspose_output_padding", "Output padding per spatial dimension", "DDLayerConvSetOutputPadding"));
  PetscCall(c->dilation.FromOptions(PetscOptionsObject, "-layer_convtranspose_dilation", "Dilation per spatial dimension", "DDLayerConvSetDilation"));
  PetscCall(PetscOptionsBool("-layer_convtranspose_bias", "Learnable bias", "DDLayerConvSetBias", c->bias, &c->bias, NULL));
  PetscCall(PetscOptionsInt("-layer_convtranspose_groups", "Channel groups (PyTorch's groups)", "DDLayerConvSetGroups", c->groups, &c->groups, NULL));
  PetscCall(PetscOptionsInt("-layer_convtranspose_channel_workers", "Workers over the output channels", "DDLayerConvSetChannelWorkers", c->pco, &c->pco, NULL));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ConvT_Reset(DDLayer l)
{
  ConvT *c = (ConvT *)l->data;

  PetscFunctionBegin;
  PetscCall(c->ResetDistribution());
  c->kern.reset();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static const char *const ConvTSetters[] = {"DDLayerConvSetOutputChannels_C", "DDLayerConvSetKernel_C", "DDLayerConvSetStride_C", "DDLayerConvSetPadding_C", "DDLayerConvSetDilation_C", "DDLayerConvSetBias_C", "DDLayerConvSetChannelWorkers_C", "DDLayerConvSetGroups_C"};

static PetscErrorCode ConvT_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(ConvT_Reset(l));
  delete (ConvT *)l->data;
  l->data = NULL;
  for (const char *name : ConvTSetters) PetscCall(PetscObjectComposeFunction((PetscObject)l, name, NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Hyper-parameters against the input: k, s, p, d, output padding per spatial dimension and the output extents So */
static PetscErrorCode ConvT_ResolveGeometry(DDLayer l, ConvT *c, DDTensor x)
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;
  PetscInt   *k = c->k, *s = c->s, *p = c->p, *d = c->d, *op = c->op;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_INCOMP, "A transposed convolution takes N x C x spatial tensors with 1 to 3 spatial dimensions; the input has order %" PetscInt_FMT, x->order);
  const PetscInt D = x->order - 2;
  c->D             = D;
  PetscCheck(c->co > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs its number of output channels (-%slayer_convtranspose_out_channels)", prefix, prefix);
  PetscCall(c->kernel.Resolve(l, D, 1, true, 1, k));
  PetscCall(c->stride.Resolve(l, D, 1, false, 1, s));
  PetscCall(c->padding.Resolve(l, D, 0, false, 0, p));
  PetscCall(c->dilation.Resolve(l, D, 1, false, 1, d));
  PetscCall(c->outpad.Resolve(l, D, 0, false, 0, op));
  for (PetscInt j = 0; j < x->order; j++) PetscCheck(!x->replicated[j], comm, PETSC_ERR_ARG_INCOMP, "A transposed convolution's input cannot be replicated (dimension %" PetscInt_FMT ")", j);
  for (PetscInt j = 3 - D; j < 3; j++) {
    PetscInt n = x->shape[2 + j - (3 - D)];
    PetscCheck(op[j] < s[j] || op[j] < d[j], comm, PETSC_ERR_ARG_OUTOFRANGE, "Output padding %" PetscInt_FMT " along spatial dimension %" PetscInt_FMT " must be smaller than either the stride (%" PetscInt_FMT ") or the dilation (%" PetscInt_FMT ") (-%slayer_convtranspose_output_padding)", op[j], j - (3 - D), s[j], d[j], prefix);
    c->So[j] = (n - 1) * s[j] - 2 * p[j] + d[j] * (k[j] - 1) + op[j] + 1;
    PetscCheck(c->So[j] >= 1, comm, PETSC_ERR_ARG_SIZ, "The output size (%" PetscInt_FMT " - 1) x %" PetscInt_FMT " - 2 x %" PetscInt_FMT " + %" PetscInt_FMT " x (%" PetscInt_FMT " - 1) + %" PetscInt_FMT " + 1 = %" PetscInt_FMT " along spatial dimension %" PetscInt_FMT " is not positive (-%slayer_convtranspose_padding)", n, s[j], p[j], d[j], k[j], op[j], c->So[j], j - (3 - D), prefix);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Every worker's output box (balanced, App. B.1) along each spatial dimension, and how many workers
  have rows no input reaches, from global data only (the same on every rank)
*/
static PetscErrorCode ConvT_OutputBoxes(ConvT *c, DDTensor x, std::vector<std::vector<PetscInt>> &orange)
{
  const PetscInt D = c->D, *k = c->k, *s = c->s, *p = c->p, *d = c->d;
  std::vector<std::vector<char>> bad(D), empty(D);

  PetscFunctionBegin;
  orange.assign(D, {});
  for (PetscInt j = 0; j < D; j++) {
    PetscInt jj = j + 3 - D, P = c->Ps[j];
    orange[j].resize(P + 1);
    PetscCall(DDSplitOwnership_Private(c->So[jj], P, orange[j].data()));
    bad[j].resize(P);
    empty[j].resize(P);
    for (PetscInt q = 0; q < P; q++) {
      PetscInt i0, i1, pl, pr;
      bool     ok;
      Window(orange[j][q], orange[j][q + 1], x->shape[2 + j], k[jj], s[jj], p[jj], d[jj], &i0, &i1, &pl, &pr, &ok);
      bad[j][q]   = !ok;
      empty[j][q] = orange[j][q + 1] <= orange[j][q];
    }
  }
  PetscInt cnt = 0;
  for (PetscInt sl = 0; sl < c->Pss; sl++) {
    bool     anybad = false, anyempty = false;
    PetscInt r      = sl;
    for (PetscInt j = D - 1; j >= 0; j--) {
      PetscInt q = r % c->Ps[j];
      r /= c->Ps[j];
      anybad   = anybad || bad[j][q];
      anyempty = anyempty || empty[j][q];
    }
    if (anybad && !anyempty) cnt++;
  }
  c->nworkers = c->Pco * c->Pn * c->Pci * c->Pss;
  c->nedge    = cnt * c->Pco * c->Pn * c->Pci;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The halo exchange of x^ onto each worker's window (App. B: from the output's balanced decomposition) */
static PetscErrorCode ConvT_SetUpHalo(DDLayer l, ConvT *c, DDTensor x, const std::vector<std::vector<PetscInt>> &orange)
{
  const PetscInt D = c->D, *k = c->k, *s = c->s, *p = c->p, *d = c->d;

  PetscFunctionBegin;
  PetscCall(LayerHaloCreate(l, &c->Hx));
  if (c->xh->active)
    for (PetscInt j = 0; j < D; j++) {
      PetscInt jj = j + 3 - D, dim = c->lead + 2 + j, q = c->xh->part->coords[dim], i0, i1, pl, pr, st = c->xh->layout.start[dim];
      bool     ok;
      Window(orange[j][q], orange[j][q + 1], x->shape[2 + j], k[jj], s[jj], p[jj], d[jj], &i0, &i1, &pl, &pr, &ok);
      if (i1 > i0) PetscCall(DDPrimitiveHaloSetWindow(c->Hx, dim, i0, i1));
      else PetscCall(DDPrimitiveHaloSetWindow(c->Hx, dim, st, st)); /* nothing reaches the box: no halo */
    }
  PetscCall(DDPrimitiveSetUp(c->Hx, c->xh, NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* This worker's geometry: its window of x^ onto its box of y^ with the crops, the core of the box, and the kernel */
static PetscErrorCode ConvT_SetUpLocalKernel(DDLayer l, ConvT *c, DDTensor x, DDTensor yt)
{
  const PetscInt  D = c->D, lead = c->lead, ly = c->reduceY ? 1 : 0, *k = c->k, *s = c->s, *p = c->p, *d = c->d;
  PetscInt        wa[DD_MAX_DIM], wb[DD_MAX_DIM];
  const DDLayout &Lx = c->xh->layout, &Ly = yt->layout;
  ConvTGeom      &g  = c->g;

  PetscFunctionBegin;
  PetscCall(DDPrimitiveHaloGetWindow(c->Hx, wa, wb));
  c->SetUpLocalFrame(x, yt, wa);
  c->edge = false;
  g.D     = D;
  g.N     = Lx.n[lead];
  g.Ci    = Lx.n[lead + 1];
  g.Co    = Ly.n[ly + 1];
  c->SetLocalGroups(g, x->shape[1], Lx, lead + 1, Ly, ly + 1);
  for (PetscInt j = 0; j < 3; j++) {
    g.k[j] = k[j];
    g.s[j] = s[j];
    g.d[j] = d[j];
  }
  for (PetscInt j = 0; j < D; j++) {
    PetscInt jj = j + 3 - D, dim = lead + 2 + j, o0 = Ly.start[ly + 2 + j], no = Ly.n[ly + 2 + j];
    g.in[jj]  = wb[dim] - wa[dim];
    g.out[jj] = no;
    g.pl[jj]  = o0 + p[jj] - wa[dim] * s[jj];
    g.pr[jj]  = (wb[dim] - 1) * s[jj] - p[jj] + (k[jj] - 1) * d[jj] + 1 - (o0 + no);
    if (g.in[jj] == 0 || g.pl[jj] < 0 || g.pr[jj] < 0) c->edge = true;
  }
  /* the core of the box: rows from the first one an input reaches to the last */
  bool nocore = false;
  for (PetscInt j = 0; j < 3; j++) {
    c->cs[j] = 0;
    c->ce[j] = g.out[j];
    if (j >= 3 - D) {
      c->cs[j] = PetscMax(0, -g.pl[j]);
      c->ce[j] = g.out[j] + PetscMin(0, g.pr[j]);
      if (g.in[j] == 0) nocore = true;
    }
  }
  if (nocore)
    for (PetscInt j = 0; j < 3; j++) c->cs[j] = c->ce[j] = 0;
  c->hasout = c->active && g.N > 0 && g.Ci > 0 && g.Co > 0 && g.out[0] > 0 && g.out[1] > 0 && g.out[2] > 0;
  PetscCheck(!c->hasout || !c->edge || c->nedge > 0, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Edge rows the set-up did not count");
  for (PetscInt j = 0; j < 3 && !nocore; j++) PetscCheck(c->cs[j] < c->ce[j], PETSC_COMM_SELF, PETSC_ERR_PLIB, "Empty core of a box with inputs");
  PetscCall(ConvKernelCreate(PetscObjectComm((PetscObject)l), c->kb, c->g, true, c->bias ? true : false, true, c->xh, lead, c->xorg, yt, ly, c->yorg, c->hasout, &c->kern));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Set-up (Fig. 4, transposed): the geometry, the work partition and output boxes, x^, the output, x^'s halo and B_x, R_y and the parameters, the local kernel */
static PetscErrorCode ConvT_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  ConvT                             *c = (ConvT *)l->data;
  DDTensor                           x = xs[0];
  std::vector<std::vector<PetscInt>> orange;

  PetscFunctionBegin;
  PetscCall(ConvT_ResolveGeometry(l, c, x));
  PetscCall(c->SetUpWorkPartition(l, x, c->pco, "transposed convolution", true));
  PetscCall(ConvT_OutputBoxes(c, x, orange));
  PetscCall(c->SetUpKernelInput(l, x, c->k, c->s, c->d, true));
  PetscCall(c->SetUpOutput(l, x));
  for (PetscInt j = 0; j < c->D; j++)
    for (PetscInt q = 0; q <= c->Ps[j]; q++) PetscCheck(l->output->ranges[2 + j][q] == orange[j][q], PETSC_COMM_SELF, PETSC_ERR_PLIB, "Output decomposition mismatch");
  PetscCall(ConvT_SetUpHalo(l, c, x, orange));
  PetscCall(c->SetUpInputBroadcast(l, x));
  PetscCall(c->SetUpReductionAndParameters(l, x, c->k, true));
  PetscCall(ConvT_SetUpLocalKernel(l, c, x, c->reduceY ? c->yh : l->output));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ConvT_InitParams(DDLayer l, PetscInt64 seed)
{
  ConvT   *c      = (ConvT *)l->data;
  PetscInt fan_in = c->w->shape[1], fan_out = c->w->shape[0]; /* PyTorch's fans of a (Ci, Co, k...) weight */

  PetscFunctionBegin;
  for (PetscInt j = 2; j < c->w->order; j++) {
    fan_in *= c->w->shape[j];
    fan_out *= c->w->shape[j];
  }
  PetscCall(DDTensorInitialize_Private(c->w, l->inittype, l->initscale, 2 * seed + 1, fan_in, fan_out, 1.0 / PetscSqrtReal((PetscReal)fan_in)));
  if (c->b) PetscCall(DDTensorInitialize_Private(c->b, l->inittype == DD_INIT_DEFAULT ? DD_INIT_DEFAULT : DD_INIT_ZEROS, l->initscale, 2 * seed + 2, fan_in, fan_out, 1.0 / PetscSqrtReal((PetscReal)fan_in)));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the local transposed convolution y^ = convT(x^ window, w^) (+ b^ on the ci = 0 workers) */
static PetscErrorCode ConvT_Local(ConvT *c, DDTensor xh, DDTensor yt)
{
  PetscFunctionBegin;
  if (!c->hasout) PetscFunctionReturn(PETSC_SUCCESS);
  PetscObjectState st;
  PetscCall(DDTensorContentState_Private(c->wh, &st));
  PetscCall(c->kern->Forward(xh, c->wh, st, (c->bias && c->biasworker) ? c->bh : NULL, yt));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ConvT_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  ConvT   *c = (ConvT *)l->data;
  DDTensor x = xs[0], xh, yo;

  PetscFunctionBegin;
  PetscCall(c->ForwardInputs(l, x, &xh));
  /* the halo onto the window, then the local kernel */
  PetscCall(DDPrimitiveApply(c->Hx, xh, NULL));
  if (c->reduceY) {
    PetscCall(ConvT_Local(c, xh, c->yh));
    PetscCall(ConformLayout(y, l->output, &c->ycopy, &yo, false));
    PetscCall(DDPrimitiveApply(c->Ry, c->yh, yo));
  } else {
    yo = y->layouthash == l->output->layouthash ? y : l->output;
    PetscCall(ConvT_Local(c, xh, yo));
  }
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ConvT_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  ConvT   *c  = (ConvT *)l->data;
  DDTensor dx = dxs ? dxs[0] : NULL, x = l->saved[0], xh, dyt, dxh;

  PetscFunctionBegin;
  xh = c->SavedInput(x);
  /* dy^ = R^* dy */
  {
    DDTensor dyo;
    PetscCall(ConformLayout(dy, l->output, &c->dycopy, &dyo, true));
    if (c->reduceY) {
      if (!c->dyh) PetscCall(DDTensorDuplicate(c->yh, &c->dyh));
      PetscCall(DDPrimitiveApplyAdjoint(c->Ry, dyo, c->dyh));
      dyt = c->dyh;
    } else dyt = dyo;
  }
  /* parameter gradients: dw^, db^ locally, then R = B^* onto the owners, added */
  if (!c->dwh) PetscCall(DDTensorDuplicate(c->wh, &c->dwh));
  if (c->bias && !c->dbh) PetscCall(DDTensorDuplicate(c->bh, &c->dbh));
  PetscCall(DDTensorZeroEntries(c->dwh));
  if (c->dbh) PetscCall(DDTensorZeroEntries(c->dbh));
  if (c->hasout) PetscCall(c->kern->BackwardWeights(xh, dyt, c->dwh, (c->bias && c->biasworker) ? c->dbh : NULL));
  PetscCall(c->AccumulateWeightGradients(l));
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  /* dx^ window = convT_x^*(dy^), H^* adds its halo into the owners, B^* sums over co */
  if (!c->bcastX && dx->layouthash == c->xh->layouthash) dxh = dx;
  else {
    if (!c->dxh) PetscCall(DDTensorDuplicate(c->xh, &c->dxh));
    dxh = c->dxh;
  }
  PetscCall(DDTensorZeroEntries(dxh));
  if (c->hasout) {
    PetscObjectState st;
    PetscCall(DDTensorContentState_Private(c->wh, &st));
    PetscCall(c->kern->BackwardData(dyt, c->wh, st, dxh));
  }
  PetscCall(DDPrimitiveApplyAdjoint(c->Hx, dxh, NULL));
  if (c->bcastX) {
    DDTensor dxo;
    PetscCall(ConformLayout(dx, l->setupin[0], &c->dxcopy, &dxo, false));
    PetscCall(DDPrimitiveApplyAdjoint(c->Bx, dxh, dxo));
    if (dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  } else if (dxh != dx) PetscCall(DDTensorCopy(dxh, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ConvT_View(DDLayer l, PetscViewer viewer)
{
  ConvT *c = (ConvT *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "out channels %" PetscInt_FMT ", groups %" PetscInt_FMT ", bias %s, channel workers %" PetscInt_FMT "\n", c->co, c->groups, c->bias ? "yes" : "no", c->pco));
  if (l->setupcalled) {
    const char *dist = (!c->bcastX && !c->reduceY) ? "spatial" : (c->Pss == 1 ? "channel" : "general");
    char buf[5][64];
    for (int q = 0; q < 5; q++) {
      const PetscInt *v = q == 0 ? c->k : q == 1 ? c->s : q == 2 ? c->p : q == 3 ? c->op : c->d;
      size_t          n = 0;
      buf[q][0]         = 0;
      for (PetscInt j = 3 - c->D; j < 3; j++) n += (size_t)snprintf(buf[q] + n, sizeof(buf[q]) - n, j > 3 - c->D ? "x%" PetscInt_FMT : "%" PetscInt_FMT, v[j]);
    }
    PetscCall(PetscViewerASCIIPrintf(viewer, "kernel %s, stride %s, padding %s, output padding %s, dilation %s\n", buf[0], buf[1], buf[2], buf[3], buf[4]));
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s distribution (Pn %" PetscInt_FMT ", Pci %" PetscInt_FMT ", Pco %" PetscInt_FMT ", spatial %" PetscInt_FMT "), kernels: %s\n", dist, c->Pn, c->Pci, c->pco, c->Pss,
                                     c->kern ? c->kern->Name() : "none (no local output)"));
    if (c->nedge) PetscCall(PetscViewerASCIIPrintf(viewer, "%" PetscInt_FMT " of %" PetscInt_FMT " workers have output rows no input reaches (output padding beyond the padding, or stride > (k - 1) d + 1): they hold the bias\n", c->nedge, c->nworkers));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERCONVTRANSPOSE - "convtranspose": distributed 1-, 2- and 3-D transposed convolution, learnable upsampling (paper 000 sec. 4.1.1-4.1.2, Fig. 4, App. B)

  Input N x Ci x spatial; output N x Co x spatial' with spatial' = (n - 1) s - 2 p + d (k - 1) + op + 1;
  weights (Ci, Co/groups, k...) as PyTorch stores them, bias (Co). Stride, padding (it crops the full
  output), output padding, dilation, groups and bias mean what they mean in
  torch.nn.ConvTranspose1d/2d/3d (zero padding only; symmetric padding only). Groups (up to
  groups = Ci = Co) need Ci and Co divisible by them and take every distribution, channel pieces
  that cut groups, unbalanced and empty ones included (`DDLayerConvSetGroups()`; the weights are
  then split over Pci by rows and broadcast to the co workers); in float32 they run oneDNN's
  grouped deconvolution on unpartitioned channels and the GEMM kernels of /cpu/blas over
  partitioned ones. It is the adjoint of the
  `DDLAYERCONV` with the same weights, stride, padding and dilation, whose input has spatial'.

  Distributions, as for `DDLAYERCONV`: the input's partition Pn x Pci x Ps and
  -layer_convtranspose_channel_workers Pco choose spatial-only (Pci = Pco = 1: a halo
  exchange, the weights broadcast from their owner), channel-only (Ps = 1: Pci x Pco weight
  partition, x^ = B x over co and y = R y^ over ci) or general. The output is balanced over
  Ps (it drives the load, App. B.1); each worker's input window follows from its output box
  and may reach past the adjacent workers (the halo exchange takes it from its owners).

  Kernels: oneDNN deconvolution (float32; activations in its preferred format; halo windows
  are copied to dense buffers, where oneDNN 2.6 has its fast kernels) or the reference loops
  (float64). Where a worker's output box starts or ends with rows no
  input reaches (output padding larger than the padding, or stride > (k - 1) d + 1), oneDNN
  computes the rest of the box and the bias fills those rows, as `DDLayerView()` reports.

  Options Database Keys:
+ -layer_convtranspose_out_channels <n> - output channels
. -layer_convtranspose_kernel <k,...> - kernel size (1 or D entries)
. -layer_convtranspose_stride <s,...> - stride
. -layer_convtranspose_padding <p,...> - padding
. -layer_convtranspose_output_padding <op,...> - output padding
. -layer_convtranspose_dilation <d,...> - dilation
. -layer_convtranspose_bias <bool> - bias
. -layer_convtranspose_groups <g> - channel groups (default 1)
. -layer_convtranspose_channel_workers <n> - Pco
- -primitive_halo_neighbors_only <bool> - fail set-up when a halo would come from past the adjacent workers (paper 000's assumption; default: from any worker)

  Level: beginner

.seealso: `DDLAYERCONV`, `DDLayerConvSetKernel()`, `DDLayerConvSetOutputPadding()`, `DDLayerConvSetOutputChannels()`, `DDPrimitiveHaloSetWindow()`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_ConvTranspose(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new ConvT;
  l->ops->setfromoptions = ConvT_SetFromOptions;
  l->ops->setup          = ConvT_SetUp;
  l->ops->forward        = ConvT_Forward;
  l->ops->backward       = ConvT_Backward;
  l->ops->initparams     = ConvT_InitParams;
  l->ops->view           = ConvT_View;
  l->ops->reset          = ConvT_Reset;
  l->ops->destroy        = ConvT_Destroy;
  l->device              = PETSC_TRUE; /* on device tensors: the cuDNN kernels of /gpu/cuda, the halo and collectives on the device */
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetOutputChannels_C", DDLayerConvSetOutputChannels_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetKernel_C", DDLayerConvSetKernel_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetStride_C", DDLayerConvSetStride_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetPadding_C", DDLayerConvSetPadding_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetDilation_C", DDLayerConvSetDilation_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetBias_C", DDLayerConvSetBias_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetChannelWorkers_C", DDLayerConvSetChannelWorkers_ConvT));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetGroups_C", DDLayerConvSetGroups_ConvT));
  PetscFunctionReturn(PETSC_SUCCESS);
}

