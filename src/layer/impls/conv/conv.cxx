/*
  DDLAYERCONV: distributed convolution, paper 000 sec. 4.1.2 and Fig. 4 (paper 003 sec. III-A, III-D).

  Partitions (D spatial dimensions, Ps = P_0 x ... x P_{D-1}):
    x  on Px = Pn x Pci x Ps                 (the input's own partition)
    y  on Py = Pn x Pco x Ps                 (the output)
    w  on Pr = Pco x Pci x 1...1             (weights (Co, Ci, k...), on the workers with n = 0, s = 0;
                                              groups: (Co, Ci/G, k...) on Pco x 1, shared by the ci workers)
    b  on Pb = Pco                           (bias, on the workers with n = 0, ci = cib, s = 0: counted once;
                                              cib the first non-empty input-channel piece)
  and the work partition Pw = Pco x Pn x Pci x Ps of Pco Pn Pci |Ps| workers, numbered three
  ways so that the broadcasts and sum-reductions align at the trailing dimension:
    Pw_x = (Pco, Pn, Pci, Ps)  x^ = B x  (copies over co; x^ has shape (1, N, Ci, S))
    Pw_y = (Pci, Pn, Pco, Ps)  y  = R y^ (sums over ci; y^ has shape (1, N, Co, S'))
    Pw_w = (Pn Ps, Pco, Pci, 1...) w^ = B w (copies over n and s)
  Forward:  x^ = B x; x^ = H x^; w^ = B w; b^ = B b; y^ = conv(x^, w^) + [ci = 0] b^; y = R y^
  Backward: dy^ = R^* dy = B dy; dx^ = conv_x^*(dy^); dw^ = conv_w^*(x^, dy^); db^ = sum dy^;
            dw += R dw^ (= B^* dw^); db += R db^; dx = B^* H^* dx^
  Spatial-only (Pci = Pco = 1): no broadcasts of x or reductions of y; the weights are broadcast
  from their owner. Channel-only (Ps = 1): no halo exchange (padding only).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <layer/impls/conv/convutil.hpp>
#include <primitive/splitguard.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <vector>
#include <memory>

using namespace ddnn;

namespace
{
struct Conv : ConvDistribution {
  /* hyper-parameters (co and bias are the distribution's) */
  SpatialParam      kernel, stride, padding, dilation;
  SpatialParam      padafter; /* the padding after the last entry, when it differs from the one before (padding) */
  DDConvPaddingType padtype = DD_CONV_PADDING_EXPLICIT;
  PetscInt          pa[3]   = {0, 0, 0}; /* resolved padding after (padding before: p of the set-up) */
  DDPaddingMode     padmode = DD_PADDING_ZEROS;
  PetscInt      pco     = 1;
  PetscBool     overlap = PETSC_FALSE;
  /* set-up */
  ConvGeom                    g;
  std::unique_ptr<ConvKernel> kern; /* the local kernel (NULL: no local output) */
  /* overlap (paper 003 sec. IV-A): the interior outputs need no halo and are computed while it is in flight */
  struct Region {
    ConvGeom                    g;
    PetscInt                    xorg[DD_MAX_DIM] = {0}, yorg[DD_MAX_DIM] = {0};
    std::unique_ptr<ConvKernel> kern;
  };
  std::vector<Region> regions; /* interior first, then the boundary slabs */
  bool                overlapOn = false;
  /* conv + activation fusion (marked by DDNetSetUp, -net_fuse): the output holds act(conv) */
  PetscInt fuseact   = -1;    /* the DDActivationType, or -1: none */
  bool     kernfused = false; /* every local kernel writes it (else Forward applies it to the output) */
  Conv()
  {
    kernel.opt   = "layer_conv_kernel";
    stride.opt   = "layer_conv_stride";
    padding.opt  = "layer_conv_padding";
    padafter.opt = "layer_conv_padding_after";
    dilation.opt = "layer_conv_dilation";
  }
};
} // namespace

static PetscErrorCode ConvGet(DDLayer l, Conv **c, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERCONV, fn));
  *c = (Conv *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The setters shared by conv and convtranspose dispatch to the type's implementation, which
  its create function composes as "<setter>_C" (as PETSc does for type-specific setters).
*/
template <class F>
static PetscErrorCode ConvSetter(DDLayer l, const char fn[], F **f)
{
  char name[64];

  PetscFunctionBegin;
  PetscValidHeaderSpecific(l, DD_LAYER_CLASSID, 1);
  PetscCall(PetscSNPrintf(name, sizeof(name), "%s_C", fn));
  PetscCall(PetscObjectQueryFunction((PetscObject)l, name, f));
  PetscCheck(*f, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONG, "%s() needs a %s or %s layer, this one is %s", fn, DDLAYERCONV, DDLAYERCONVTRANSPOSE, ((PetscObject)l)->type_name ? ((PetscObject)l)->type_name : "untyped");
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDLayerConvSetOutputChannels_Conv(DDLayer l, PetscInt co)
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCheck(co >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Output channels %" PetscInt_FMT " must be positive", co);
  c->co = co;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetOutputChannels - Number of output channels of a convolution or transposed convolution

  Logically collective

  Options Database Keys:
+ -layer_conv_out_channels <n> - the number (conv)
- -layer_convtranspose_out_channels <n> - the number (convtranspose)

  Level: beginner

.seealso: `DDLAYERCONV`, `DDLAYERCONVTRANSPOSE`, `DDLayerConvSetKernel()`
@*/
PetscErrorCode DDLayerConvSetOutputChannels(DDLayer l, PetscInt co)
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetOutputChannels", &f));
  PetscCall((*f)(l, co));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetKernel_Conv(DDLayer l, PetscInt n, const PetscInt k[])
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCall(c->kernel.Set(PetscObjectComm((PetscObject)l), n, k, "The kernel"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetKernel - Kernel size per spatial dimension

  Logically collective

  Input Parameters:
+ l - the layer
. n - 1 (the same size in every dimension) or the number of spatial dimensions
- k - the sizes, outermost spatial dimension first (D, H, W)

  Options Database Keys:
+ -layer_conv_kernel <k0,k1,...> - the sizes (conv)
- -layer_convtranspose_kernel <k0,k1,...> - the sizes (convtranspose)

  Level: beginner

.seealso: `DDLAYERCONV`, `DDLAYERCONVTRANSPOSE`, `DDLayerConvSetStride()`
@*/
PetscErrorCode DDLayerConvSetKernel(DDLayer l, PetscInt n, const PetscInt k[])
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt, const PetscInt[]);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetKernel", &f));
  PetscCall((*f)(l, n, k));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetStride_Conv(DDLayer l, PetscInt n, const PetscInt s[])
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCall(c->stride.Set(PetscObjectComm((PetscObject)l), n, s, "The stride"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetStride - Stride per spatial dimension (default 1)

  Logically collective

  Options Database Keys:
+ -layer_conv_stride <s0,...> - the strides (conv)
- -layer_convtranspose_stride <s0,...> - the strides (convtranspose)

  Level: beginner

.seealso: `DDLayerConvSetKernel()`, `DDLAYERCONVTRANSPOSE`
@*/
PetscErrorCode DDLayerConvSetStride(DDLayer l, PetscInt n, const PetscInt s[])
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt, const PetscInt[]);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetStride", &f));
  PetscCall((*f)(l, n, s));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetPadding_Conv(DDLayer l, PetscInt n, const PetscInt p[])
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCall(c->padding.Set(PetscObjectComm((PetscObject)l), n, p, "The padding"));
  c->padafter.n = 0;
  c->padtype    = DD_CONV_PADDING_EXPLICIT;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetPadding - Padding per spatial dimension, added on both sides (default 0)

  Logically collective

  Notes:
  For a transposed convolution, as in PyTorch, the padding removes entries from both sides of
  the full output (it is the padding of the convolution it is the adjoint of). A convolution
  also takes different paddings per side (`DDLayerConvSetPaddingBeforeAfter()`) and PyTorch's
  'same' and 'valid' (`DDLayerConvSetPaddingType()`, or -layer_conv_padding same|valid).

  Options Database Keys:
+ -layer_conv_padding <p0,...> - the paddings (conv)
- -layer_convtranspose_padding <p0,...> - the paddings (convtranspose)

  Level: beginner

.seealso: `DDLayerConvSetPaddingMode()`, `DDLayerConvSetOutputPadding()`, `DDLayerConvSetPaddingBeforeAfter()`, `DDLayerConvSetPaddingType()`
@*/
PetscErrorCode DDLayerConvSetPadding(DDLayer l, PetscInt n, const PetscInt p[])
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt, const PetscInt[]);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetPadding", &f));
  PetscCall((*f)(l, n, p));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetDilation_Conv(DDLayer l, PetscInt n, const PetscInt d[])
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCall(c->dilation.Set(PetscObjectComm((PetscObject)l), n, d, "The dilation"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetDilation - Dilation per spatial dimension (default 1)

  Logically collective

  Options Database Keys:
+ -layer_conv_dilation <d0,...> - the dilations (conv)
- -layer_convtranspose_dilation <d0,...> - the dilations (convtranspose)

  Level: intermediate

.seealso: `DDLayerConvSetKernel()`
@*/
PetscErrorCode DDLayerConvSetDilation(DDLayer l, PetscInt n, const PetscInt d[])
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt, const PetscInt[]);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetDilation", &f));
  PetscCall((*f)(l, n, d));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetBias_Conv(DDLayer l, PetscBool flg)
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  c->bias = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetBias - Whether the convolution (or transposed convolution) has a (learnable) bias (default true)

  Logically collective

  Options Database Keys:
+ -layer_conv_bias <bool> - the flag (conv)
- -layer_convtranspose_bias <bool> - the flag (convtranspose)

  Level: beginner

.seealso: `DDLAYERCONV`, `DDLAYERCONVTRANSPOSE`
@*/
PetscErrorCode DDLayerConvSetBias(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscBool);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetBias", &f));
  PetscCall((*f)(l, flg));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

const char *const DDConvPaddingTypes[] = {"explicit", "same", "valid", "DDConvPaddingType", "DD_CONV_PADDING_", nullptr};

/*@
  DDLayerConvSetPaddingBeforeAfter - Padding per spatial dimension before the first and after the last entry (asymmetric padding)

  Logically collective

  Input Parameters:
+ l      - a `DDLAYERCONV` layer
. n      - 1 (the same in every dimension) or the number of spatial dimensions
. before - the paddings before the first entry, outermost spatial dimension first
- after  - the paddings after the last entry

  Notes:
  The output has floor((n + before + after - d (k - 1) - 1) / s) + 1 entries per dimension, as
  torch.nn.functional.pad followed by an unpadded convolution. Every padding mode applies on
  both sides. Not for `DDLAYERCONVTRANSPOSE` (its padding stays symmetric).

  Options Database Keys:
+ -layer_conv_padding <p0,...> - the paddings before (and after, unless the next key is given)
- -layer_conv_padding_after <a0,...> - the paddings after

  Level: intermediate

.seealso: `DDLayerConvSetPadding()`, `DDLayerConvSetPaddingType()`, `DDLayerConvSetPaddingMode()`
@*/
PetscErrorCode DDLayerConvSetPaddingBeforeAfter(DDLayer l, PetscInt n, const PetscInt before[], const PetscInt after[])
DD_CXX_TRY
{
  Conv *c;

  PetscFunctionBegin;
  PetscCall(ConvGet(l, &c, "DDLayerConvSetPaddingBeforeAfter"));
  PetscCall(c->padding.Set(PetscObjectComm((PetscObject)l), n, before, "The padding before"));
  PetscCall(c->padafter.Set(PetscObjectComm((PetscObject)l), n, after, "The padding after"));
  c->padtype = DD_CONV_PADDING_EXPLICIT;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerConvSetPaddingType - The padding rule of a convolution: explicit entries (default), PyTorch's padding='same' or 'valid'

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERCONV` layer
- type - `DD_CONV_PADDING_EXPLICIT`, `DD_CONV_PADDING_SAME` or `DD_CONV_PADDING_VALID`

  Notes:
  'same' keeps the spatial sizes: it needs stride 1 in every dimension and pads d (k - 1) entries
  per dimension, half before and the rest after (an odd total puts the extra entry at the end,
  as PyTorch does). 'valid' is no padding. Setting explicit paddings (`DDLayerConvSetPadding()`,
  `DDLayerConvSetPaddingBeforeAfter()`) selects `DD_CONV_PADDING_EXPLICIT` again.

  Options Database Key:
. -layer_conv_padding <same,valid> - the rule (integers there are explicit paddings)

  Level: intermediate

.seealso: `DDLayerConvSetPadding()`, `DDLayerConvSetPaddingBeforeAfter()`, `DDConvPaddingType`
@*/
PetscErrorCode DDLayerConvSetPaddingType(DDLayer l, DDConvPaddingType type)
DD_CXX_TRY
{
  Conv *c;

  PetscFunctionBegin;
  PetscCall(ConvGet(l, &c, "DDLayerConvSetPaddingType"));
  PetscCheck(type >= DD_CONV_PADDING_EXPLICIT && type <= DD_CONV_PADDING_VALID, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Unknown padding type %d (-layer_conv_padding)", (int)type);
  c->padtype = type;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetGroups_Conv(DDLayer l, PetscInt g)
{
  PetscFunctionBegin;
  PetscCheck(g >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Groups %" PetscInt_FMT " must be positive (-layer_conv_groups)", g);
  ((Conv *)l->data)->groups = g;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetGroups - Number of channel groups of a convolution or transposed convolution (PyTorch's groups, default 1)

  Logically collective

  Input Parameters:
+ l      - the layer
- groups - the number of groups: the input and output channels must be multiples of it

  Notes:
  Group g connects input channels [g Ci/G, (g + 1) Ci/G) to output channels [g Co/G, (g + 1) Co/G):
  groups = Ci is a depthwise convolution. The weights are (Co, Ci/G, k...) (transposed:
  (Ci, Co/G, k...)), as PyTorch stores them (so `DDNetLoadWeights()` reads them unchanged). Every
  distribution carries groups: batch, spatial, and channel partitions (Pci input pieces, Pco output
  workers) with any piece boundaries, pieces that cut groups, unbalanced and empty ones included;
  each worker connects each of its output channels to the input channels of its group that it holds
  (paper 000 sec. 4.1.2's Pco x Pci blocks; a block that shares no group only adds its bias). With
  groups the weights are partitioned by rows only (Co over Pco; transposed: Ci over Pci) and
  broadcast whole to the ci (co) workers of each row piece. In float32 /cpu/dnnl runs oneDNN's
  grouped convolution when the channels are not partitioned; over partitioned channels oneDNN
  declines and the GEMM kernels of /cpu/blas run.

  Options Database Keys:
+ -layer_conv_groups <g> - the groups (conv)
- -layer_convtranspose_groups <g> - the groups (convtranspose)

  Level: intermediate

.seealso: `DDLAYERCONV`, `DDLAYERCONVTRANSPOSE`, `DDLayerConvSetOutputChannels()`
@*/
PetscErrorCode DDLayerConvSetGroups(DDLayer l, PetscInt groups)
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetGroups", &f));
  PetscCall((*f)(l, groups));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerConvSetPaddingMode - zeros (default), reflect, replicate or circular, all distributed

  Logically collective

  Input Parameters:
+ l    - a `DDLAYERCONV` layer
- mode - a `DDPaddingMode`; a value outside the enum is an error (`PETSC_ERR_ARG_OUTOFRANGE`)

  Options Database Key:
. -layer_conv_padding_mode <zeros,reflect,replicate,circular> - the mode

  Notes:
  PyTorch's limits hold, checked at set-up: reflect padding smaller than the input, circular
  padding at most the input (it wraps around once) along each padded dimension.

  Level: intermediate

.seealso: `DDPaddingMode`, `DDLayerConvSetPadding()`
@*/
PetscErrorCode DDLayerConvSetPaddingMode(DDLayer l, DDPaddingMode mode)
DD_CXX_TRY
{
  Conv *c;

  PetscFunctionBegin;
  PetscCall(ConvGet(l, &c, "DDLayerConvSetPaddingMode"));
  PetscCheck((int)mode >= (int)DD_PADDING_ZEROS && (int)mode <= (int)DD_PADDING_CIRCULAR, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "DDLayerConvSetPaddingMode(): unknown padding mode %d (-layer_conv_padding_mode: zeros, reflect, replicate or circular)", (int)mode);
  c->padmode = mode;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode DDLayerConvSetChannelWorkers_Conv(DDLayer l, PetscInt n)
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCheck(n >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Channel workers %" PetscInt_FMT " must be positive", n);
  c->pco = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerConvSetChannelWorkers - Number of workers the output channels are split over (Pco, default 1)

  Logically collective

  Notes:
  With the input's channel split Pci (from its partition) this chooses the distribution of
  paper 000 sec. 4.1.2: Pci = Pco = 1 is spatial-only, no spatial split is channel-only,
  otherwise general. The layer needs Pn Pco Pci |Ps| ranks.

  The same holds for a transposed convolution (`DDLAYERCONVTRANSPOSE`).

  Options Database Keys:
+ -layer_conv_channel_workers <n> - Pco (conv)
- -layer_convtranspose_channel_workers <n> - Pco (convtranspose)

  Level: intermediate

.seealso: `DDLAYERCONV`, `DDLAYERCONVTRANSPOSE`
@*/
PetscErrorCode DDLayerConvSetChannelWorkers(DDLayer l, PetscInt n)
DD_CXX_TRY
{
  PetscErrorCode(*f)(DDLayer, PetscInt);

  PetscFunctionBegin;
  PetscCall(ConvSetter(l, "DDLayerConvSetChannelWorkers", &f));
  PetscCall((*f)(l, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerConvSetOverlap - Overlap the halo exchange with the interior convolution (paper 003, sec. IV-A)

  Logically collective

  Options Database Key:
. -layer_conv_overlap <bool> - the flag

  Level: advanced

.seealso: `DDLAYERCONV`
@*/
PetscErrorCode DDLayerConvSetOverlap(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  Conv *c;

  PetscFunctionBegin;
  PetscCall(ConvGet(l, &c, "DDLayerConvSetOverlap"));
  c->overlap = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Conv_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Conv     *c = (Conv *)l->data;
  PetscEnum mode;
  PetscBool set;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer conv options");
  PetscCall(PetscOptionsInt("-layer_conv_out_channels", "Output channels", "DDLayerConvSetOutputChannels", c->co, &c->co, NULL));
  PetscCall(c->kernel.FromOptions(PetscOptionsObject, "-layer_conv_kernel", "Kernel size per spatial dimension", "DDLayerConvSetKernel"));
  PetscCall(c->stride.FromOptions(PetscOptionsObject, "-layer_conv_stride", "Stride per spatial dimension", "DDLayerConvSetStride"));
  {
    /* -layer_conv_padding takes integers (explicit paddings) or same / valid */
    char      rule[64] = "";
    PetscBool isrule   = PETSC_FALSE;
    PetscCall(PetscOptionsString("-layer_conv_padding", "Padding per spatial dimension: p0,... or same or valid", "DDLayerConvSetPaddingType", rule, rule, sizeof(rule), &set));
    if (set) {
      PetscBool same, valid;
      PetscCall(PetscStrcasecmp(rule, "same", &same));
      PetscCall(PetscStrcasecmp(rule, "valid", &valid));
      if (same || valid) {
        c->padtype = same ? DD_CONV_PADDING_SAME : DD_CONV_PADDING_VALID;
        isrule     = PETSC_TRUE;
      }
    }
    if (!isrule) {
      PetscCall(c->padding.FromOptions(PetscOptionsObject, "-layer_conv_padding", "Padding per spatial dimension", "DDLayerConvSetPadding"));
      if (set) c->padtype = DD_CONV_PADDING_EXPLICIT;
    }
    PetscCall(c->padafter.FromOptions(PetscOptionsObject, "-layer_conv_padding_after", "Padding after the last entry per spatial dimension", "DDLayerConvSetPaddingBeforeAfter"));
  }
  PetscCall(PetscOptionsInt("-layer_conv_groups", "Channel groups (PyTorch's groups)", "DDLayerConvSetGroups", c->groups, &c->groups, NULL));
  PetscCall(c->dilation.FromOptions(PetscOptionsObject, "-layer_conv_dilation", "Dilation per spatial dimension", "DDLayerConvSetDilation"));
  PetscCall(PetscOptionsBool("-layer_conv_bias", "Learnable bias", "DDLayerConvSetBias", c->bias, &c->bias, NULL));
  mode = (PetscEnum)c->padmode;
  PetscCall(PetscOptionsEnum("-layer_conv_padding_mode", "Padding mode", "DDLayerConvSetPaddingMode", DDPaddingModes, mode, &mode, &set));
  if (set) c->padmode = (DDPaddingMode)mode;
  PetscCall(PetscOptionsInt("-layer_conv_channel_workers", "Workers over the output channels", "DDLayerConvSetChannelWorkers", c->pco, &c->pco, NULL));
  PetscCall(PetscOptionsBool("-layer_conv_overlap", "Overlap halo exchange and interior compute", "DDLayerConvSetOverlap", c->overlap, &c->overlap, NULL));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Conv_Reset(DDLayer l)
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCall(c->ResetDistribution());
  c->kern.reset();
  c->regions.clear();
  c->overlapOn = false;
  c->kernfused = false; /* fuseact stays: the network marks the layer before setting it up */
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Conv + activation fusion, private to the network (src/net/net.cxx, -net_fuse): from the next
  set-up on, the output is act(conv(x)) (act relu, tanh or sigmoid): every kernel writes it as a
  post-op where all of them can, else Forward applies act to the output in place. act < 0 ends the
  fusion. The activation layer that consumes the output then views it (src/layer/impls/activation/activation.cxx).
*/
static PetscErrorCode DDLayerConvSetFusedActivation_Conv(DDLayer l, PetscInt act)
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCheck(act < 0 || act == DD_ACT_RELU || act == DD_ACT_TANH || act == DD_ACT_SIGMOID, PetscObjectComm((PetscObject)l), PETSC_ERR_SUP, "Only relu, tanh and sigmoid fuse with a convolution (asked: %s)", act <= DD_ACT_PRELU ? DDActivationTypes[act] : "unknown");
  c->fuseact = act;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Conv_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Conv_Reset(l));
  delete (Conv *)l->data;
  l->data = NULL;
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetOutputChannels_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetKernel_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetStride_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetPadding_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetDilation_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetBias_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetChannelWorkers_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetGroups_C", NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetFusedActivation_C", NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Hyper-parameters against the input: k, s, p, d per spatial dimension and the output extents So */
static PetscErrorCode Conv_ResolveGeometry(DDLayer l, Conv *c, DDTensor x, PetscInt k[3], PetscInt s[3], PetscInt p[3], PetscInt d[3])
{
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  const char *prefix;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_INCOMP, "A convolution takes N x C x spatial tensors with 1 to 3 spatial dimensions; the input has order %" PetscInt_FMT, x->order);
  const PetscInt D = x->order - 2;
  c->D             = D;
  PetscCheck(c->co > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs its number of output channels (-%slayer_conv_out_channels)", prefix ? prefix : "", prefix ? prefix : "");
  PetscCall(c->kernel.Resolve(l, D, 1, true, 1, k));
  PetscCall(c->stride.Resolve(l, D, 1, false, 1, s));
  PetscCall(c->dilation.Resolve(l, D, 1, false, 1, d));
  /* p: the padding before the first entry, c->pa after the last (PyTorch's padding='same': d (k - 1) in all, the odd entry at the end) */
  if (c->padtype == DD_CONV_PADDING_SAME) {
    for (PetscInt j = 3 - D; j < 3; j++) PetscCheck(s[j] == 1, comm, PETSC_ERR_ARG_INCOMP, "Padding 'same' (-%slayer_conv_padding) needs stride 1, not %" PetscInt_FMT " along spatial dimension %" PetscInt_FMT " (-%slayer_conv_stride)", prefix ? prefix : "", s[j], j - (3 - D), prefix ? prefix : "");
    for (PetscInt j = 0; j < 3; j++) {
      const PetscInt tot = d[j] * (k[j] - 1);
      p[j]               = tot / 2;
      c->pa[j]           = tot - p[j];
    }
  } else if (c->padtype == DD_CONV_PADDING_VALID) {
    for (PetscInt j = 0; j < 3; j++) p[j] = c->pa[j] = 0;
  } else {
    PetscCall(c->padding.Resolve(l, D, 0, false, 0, p));
    if (c->padafter.n) PetscCall(c->padafter.Resolve(l, D, 0, false, 0, c->pa));
    else
      for (PetscInt j = 0; j < 3; j++) c->pa[j] = p[j];
  }
  for (PetscInt j = 0; j < x->order; j++) PetscCheck(!x->replicated[j], comm, PETSC_ERR_ARG_INCOMP, "A convolution's input cannot be replicated (dimension %" PetscInt_FMT ")", j);
  for (PetscInt j = 3 - D; j < 3; j++) {
    PetscInt n = x->shape[2 + j - (3 - D)], ext = d[j] * (k[j] - 1) + 1;
    PetscCheck(n + p[j] + c->pa[j] >= ext, comm, PETSC_ERR_ARG_SIZ, "Kernel of extent %" PetscInt_FMT " is larger than the padded input (%" PetscInt_FMT " + %" PetscInt_FMT " + %" PetscInt_FMT ") along spatial dimension %" PetscInt_FMT " (-%s%s)", ext, n, p[j], c->pa[j], j - (3 - D), prefix ? prefix : "", c->kernel.opt);
    c->So[j] = (n + p[j] + c->pa[j] - ext) / s[j] + 1;
    /* PyTorch's rule for reflect padding, on each side */
    PetscCheck(c->padmode != DD_PADDING_REFLECT || (p[j] < n && c->pa[j] < n), comm, PETSC_ERR_ARG_OUTOFRANGE, "Reflect padding (%" PetscInt_FMT " before, %" PetscInt_FMT " after) must be smaller than the input (%" PetscInt_FMT ") along spatial dimension %" PetscInt_FMT " (-%slayer_conv_padding, -%slayer_conv_padding_after)", p[j], c->pa[j], n, j - (3 - D), prefix ? prefix : "", prefix ? prefix : "");
    /* and for circular padding: it wraps around at most once */
    PetscCheck(c->padmode != DD_PADDING_CIRCULAR || (p[j] <= n && c->pa[j] <= n), comm, PETSC_ERR_ARG_OUTOFRANGE, "Circular padding (%" PetscInt_FMT " before, %" PetscInt_FMT " after) must be at most the input (%" PetscInt_FMT ") along spatial dimension %" PetscInt_FMT ": it would wrap around more than once (PyTorch's rule; -%slayer_conv_padding, -%slayer_conv_padding_after)", p[j], c->pa[j], n, j - (3 - D), prefix ? prefix : "", prefix ? prefix : "");
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The halo exchange of x^ (App. B: windows from the output's balanced decomposition; the padding mode at the edges) */
static PetscErrorCode Conv_SetUpHalo(DDLayer l, Conv *c, const PetscInt k[3], const PetscInt s[3], const PetscInt p[3], const PetscInt d[3])
{
  PetscFunctionBegin;
  PetscCall(LayerHaloCreate(l, &c->Hx));
  for (PetscInt j = 0; j < c->D; j++) {
    PetscInt jj = j + 3 - c->D;
    PetscCall(DDPrimitiveHaloSetKernel(c->Hx, c->lead + 2 + j, k[jj], s[jj], d[jj], p[jj], c->So[jj]));
    PetscCall(DDPrimitiveHaloSetPadding(c->Hx, c->lead + 2 + j, c->padmode));
  }
  PetscCall(DDPrimitiveSetUp(c->Hx, c->xh, NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* This worker's geometry: its window of x^ onto its box of y^, and the kernel from the backend chain */
static PetscErrorCode Conv_SetUpLocalKernel(DDLayer l, Conv *c, DDTensor x, DDTensor yt, const PetscInt k[3], const PetscInt s[3], const PetscInt d[3])
{
  PetscInt        wa[DD_MAX_DIM], wb[DD_MAX_DIM], os[DD_MAX_DIM], on[DD_MAX_DIM];
  const PetscInt  D = c->D, lead = c->lead, ly = c->reduceY ? 1 : 0;
  const DDLayout &Lx = c->xh->layout, &Ly = yt->layout;
  ConvGeom       &g  = c->g;

  PetscFunctionBegin;
  PetscCall(DDPrimitiveHaloGetWindow(c->Hx, wa, wb));
  PetscCall(DDPrimitiveHaloGetOutputCorners(c->Hx, os, on));
  c->SetUpLocalFrame(x, yt, wa);
  g.D  = D;
  g.N  = Lx.n[lead];
  g.Ci = Lx.n[lead + 1];
  g.Co = Ly.n[ly + 1];
  c->SetLocalGroups(g, x->shape[1], Lx, lead + 1, Ly, ly + 1);
  for (PetscInt j = 0; j < 3; j++) {
    g.k[j] = k[j];
    g.s[j] = s[j];
    g.d[j] = d[j];
  }
  for (PetscInt j = 0; j < D; j++) {
    PetscInt jj = j + 3 - D, dim = lead + 2 + j;
    g.in[jj]    = wb[dim] - wa[dim];
    g.out[jj]   = on[dim];
    PetscCheck(!c->active || on[dim] == Ly.n[ly + 2 + j], PETSC_COMM_SELF, PETSC_ERR_PLIB, "Output decomposition mismatch");
  }
  c->hasout = c->active && g.N > 0 && g.Ci > 0 && g.Co > 0 && g.out[0] > 0 && g.out[1] > 0 && g.out[2] > 0;
  ConvTGeom gt;
  static_cast<ConvGeom &>(gt) = c->g;
  PetscCall(ConvKernelCreate(PetscObjectComm((PetscObject)l), c->kb, gt, false, c->bias ? true : false, true, c->xh, lead, c->xorg, yt, ly, c->yorg, c->hasout, &c->kern));
  /* fused activation: a post-op of the kernel, unless the partial outputs are summed over ci afterwards */
  c->kernfused = c->fuseact >= 0 && !c->reduceY && (!c->hasout || c->kern->FuseActivation((DDActivationType)c->fuseact));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The overlap regions (paper 003 sec. IV-A): the interior outputs, whose windows lie inside the bulk
  and need no halo, and the boundary slabs around them, each with its own kernel
*/
static PetscErrorCode Conv_SetUpOverlap(Conv *c, DDTensor yt, const PetscInt k[3], const PetscInt s[3], const PetscInt p[3], const PetscInt d[3])
{
  const PetscInt  D = c->D, lead = c->lead, ly = c->reduceY ? 1 : 0;
  const DDLayout &Lx = c->xh->layout, &Ly = yt->layout;
  PetscInt        oa[3], ob[3], ia[3], ib[3];
  bool            interior = true;

  PetscFunctionBegin;
  if (!c->overlap || !c->hasout) PetscFunctionReturn(PETSC_SUCCESS);
  for (PetscInt j = 0; j < D; j++) {
    const PetscInt jj = j + 3 - D, dx = lead + 2 + j, dy = ly + 2 + j, st = Lx.start[dx], en = st + Lx.n[dx];
    const PetscInt ext = (k[jj] - 1) * d[jj];
    oa[j]              = Ly.start[dy];
    ob[j]              = oa[j] + Ly.n[dy];
    ia[j]              = PetscMax(oa[j], (st + p[jj] + s[jj] - 1) / s[jj]);
    ib[j]              = PetscMin(ob[j], (en - 1 + p[jj] - ext) >= 0 ? (en - 1 + p[jj] - ext) / s[jj] + 1 : 0);
    if (ia[j] >= ib[j]) interior = false;
  }
  if (!interior) PetscFunctionReturn(PETSC_SUCCESS);
  std::vector<std::pair<std::vector<PetscInt>, std::vector<PetscInt>>> boxes; /* output boxes [a, b) per spatial dim */
  boxes.push_back({std::vector<PetscInt>(ia, ia + D), std::vector<PetscInt>(ib, ib + D)});
  for (PetscInt j = 0; j < D; j++)
    for (int side = 0; side < 2; side++) {
      std::vector<PetscInt> a(D), b(D);
      for (PetscInt m = 0; m < D; m++) {
        a[m] = m < j ? ia[m] : oa[m];
        b[m] = m < j ? ib[m] : ob[m];
      }
      if (side == 0) b[j] = ia[j];
      else a[j] = ib[j];
      if (b[j] > a[j]) boxes.push_back({a, b});
    }
  for (auto &bx : boxes) {
    Conv::Region r;
    r.g = c->g;
    for (PetscInt q = 0; q < Lx.order; q++) r.xorg[q] = c->xorg[q];
    for (PetscInt q = 0; q < Ly.order; q++) r.yorg[q] = c->yorg[q];
    for (PetscInt j = 0; j < D; j++) {
      const PetscInt jj = j + 3 - D, dx = lead + 2 + j, dy = ly + 2 + j;
      r.g.out[jj]       = bx.second[j] - bx.first[j];
      r.g.in[jj]        = (r.g.out[jj] - 1) * s[jj] + (k[jj] - 1) * d[jj] + 1;
      r.xorg[dx]        = bx.first[j] * s[jj] - p[jj] - Lx.start[dx] + Lx.lo[dx];
      r.yorg[dy]        = bx.first[j] - Ly.start[dy] + Ly.lo[dy];
    }
    ConvTGeom gt;
    static_cast<ConvGeom &>(gt) = r.g;
    PetscCall(ConvKernelCreate(PETSC_COMM_SELF, c->kb, gt, false, c->bias ? true : false, false, c->xh, lead, r.xorg, yt, ly, r.yorg, true, &r.kern));
    if (c->kernfused) c->kernfused = r.kern->FuseActivation((DDActivationType)c->fuseact); /* else Forward applies it, and Conv_SetUp takes it back from the kernels that took it */
    c->regions.push_back(std::move(r));
  }
  c->overlapOn = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Set-up (Fig. 4): the geometry, the work partition, x^, its halo and B_x, the output, R_y and the parameters, the local kernels */
static PetscErrorCode Conv_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Conv    *c = (Conv *)l->data;
  DDTensor x = xs[0];
  PetscInt k[3], s[3], p[3], d[3];

  PetscFunctionBegin;
  PetscCall(Conv_ResolveGeometry(l, c, x, k, s, p, d));
  PetscCall(c->SetUpWorkPartition(l, x, c->pco, "convolution"));
  PetscCall(c->SetUpKernelInput(l, x, k, s, d, false));
  PetscCall(Conv_SetUpHalo(l, c, k, s, p, d));
  PetscCall(c->SetUpInputBroadcast(l, x));
  PetscCall(c->SetUpOutput(l, x));
  PetscCall(c->SetUpReductionAndParameters(l, x, k, false));
  DDTensor yt = c->reduceY ? c->yh : l->output;
  PetscCall(Conv_SetUpLocalKernel(l, c, x, yt, k, s, d));
  PetscCall(Conv_SetUpOverlap(c, yt, k, s, p, d));
  if (c->fuseact >= 0 && !c->kernfused) { /* all kernels or none: Forward applies the activation after them, and only relu is idempotent (tanh(tanh(v)) != tanh(v)) */
    if (c->hasout) (void)c->kern->FuseActivation(DD_ACT_IDENTITY);
    for (auto &r : c->regions) (void)r.kern->FuseActivation(DD_ACT_IDENTITY);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Conv_InitParams(DDLayer l, PetscInt64 seed)
{
  Conv    *c      = (Conv *)l->data;
  PetscInt fan_in = c->w->shape[1], fan_out = c->w->shape[0];

  PetscFunctionBegin;
  for (PetscInt j = 2; j < c->w->order; j++) {
    fan_in *= c->w->shape[j];
    fan_out *= c->w->shape[j];
  }
  PetscCall(DDTensorInitialize_Private(c->w, l->inittype, l->initscale, 2 * seed + 1, fan_in, fan_out, 1.0 / PetscSqrtReal((PetscReal)fan_in)));
  if (c->b) PetscCall(DDTensorInitialize_Private(c->b, l->inittype == DD_INIT_DEFAULT ? DD_INIT_DEFAULT : DD_INIT_ZEROS, l->initscale, 2 * seed + 2, fan_in, fan_out, 1.0 / PetscSqrtReal((PetscReal)fan_in)));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  A weight state that no tensor has (content states are >= 0, a kernel's initial record is -1): the
  kernel-run passes below call the kernels with one, so that they prepare the weights (oneDNN's reorder
  into its blocked format) as on the first call after an optimizer's update, as in every training step
*/
static PetscObjectState FreshWeightState(void)
{
  static PetscObjectState s = -1;
  return --s;
}

/* the local convolution y^ = conv(x^ window, w^) (+ b^ on the ci = 0 workers), on the whole box or a region;
   wst < 0: the weights taken as changed since the kernel's last call (FreshWeightState()) */
static PetscErrorCode Conv_Local(Conv *c, DDTensor xh, DDTensor yt, Conv::Region *r = nullptr, PetscObjectState wst = 0)
{
  PetscFunctionBegin;
  if (!c->hasout) PetscFunctionReturn(PETSC_SUCCESS);
  ConvKernel      *kern = r ? r->kern.get() : c->kern.get();
  PetscObjectState st   = wst;
  if (st >= 0) PetscCall(DDTensorContentState_Private(c->wh, &st));
  PetscCall(kern->Forward(xh, c->wh, st, (c->bias && c->biasworker) ? c->bh : NULL, yt));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the halo exchange and the local convolution, overlapped when asked: interior while the halo is in flight */
static PetscErrorCode Conv_HaloAndLocal(Conv *c, DDTensor xh, DDTensor yt)
{
  PetscFunctionBegin;
  if (!c->overlap) {
    PetscCall(DDPrimitiveApply(c->Hx, xh, NULL));
    PetscCall(Conv_Local(c, xh, yt));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDPrimitiveApplyBegin(c->Hx, xh, NULL));
  SplitApplyGuard inflight(c->Hx, xh, NULL); /* an error return before the End ends the exchange */
  if (c->overlapOn) PetscCall(Conv_Local(c, xh, yt, &c->regions[0]));
  PetscCall(DDPrimitiveApplyEnd(c->Hx, xh, NULL));
  if (c->overlapOn)
    for (size_t i = 1; i < c->regions.size(); i++) PetscCall(Conv_Local(c, xh, yt, &c->regions[i]));
  else PetscCall(Conv_Local(c, xh, yt));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the fused activation in place on the bulk of the output, where the kernels did not apply it (the layer's backend chain's pointwise kernel) */
static PetscErrorCode Conv_ApplyFusedActivation(DDLayer l, Conv *c, DDTensor y)
{
  PetscFunctionBegin;
  if (c->fuseact < 0 || c->kernfused || !y->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(y->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T        *ya = HostArray<T>(y);
    DDBackend which;
    decltype(KernelTable<T>::actfwd) fn;
    PetscFunctionBegin;
    PetscCall(LayerKernel<T>(l, &KernelTable<T>::actfwd, DD_KERNEL_POINTWISE, &fn, &which));
    KernelEvent  e(which, DD_KERNEL_POINTWISE);
    ActParams<T> p;
    ForEachBulkRun(y->layout, [&](PetscInt off, PetscInt len) { fn((DDActivationType)c->fuseact, p, ya + off, ya + off, len); });
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Conv_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Conv    *c = (Conv *)l->data;
  DDTensor x = xs[0], xh, yo;

  PetscFunctionBegin;
  PetscCall(c->ForwardInputs(l, x, &xh));
  /* the halo, then the local kernel */
  if (c->reduceY) {
    PetscCall(Conv_HaloAndLocal(c, xh, c->yh));
    PetscCall(ConformLayout(y, l->output, &c->ycopy, &yo, false));
    PetscCall(DDPrimitiveApply(c->Ry, c->yh, yo));
  } else {
    yo = y->layouthash == l->output->layouthash ? y : l->output;
    PetscCall(Conv_HaloAndLocal(c, xh, yo));
  }
  PetscCall(Conv_ApplyFusedActivation(l, c, yo));
  if (yo != y) PetscCall(DDTensorCopy(yo, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* dw^, db^ locally, then R = B^* onto the owners, added to the gradients */
static PetscErrorCode Conv_BackwardWeights(DDLayer l, Conv *c, DDTensor xh, DDTensor dyt)
{
  PetscFunctionBegin;
  if (!c->dwh) PetscCall(DDTensorDuplicate(c->wh, &c->dwh));
  if (c->bias && !c->dbh) PetscCall(DDTensorDuplicate(c->bh, &c->dbh));
  PetscCall(DDTensorZeroEntries(c->dwh));
  if (c->dbh) PetscCall(DDTensorZeroEntries(c->dbh));
  if (c->hasout) PetscCall(c->kern->BackwardWeights(xh, dyt, c->dwh, (c->bias && c->biasworker) ? c->dbh : NULL));
  PetscCall(c->AccumulateWeightGradients(l));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* dx^ window = conv_x^*(dy^) (dx^ zeroed first where the kernel does not overwrite all of it); wst as Conv_Local()'s */
static PetscErrorCode Conv_BackwardData(Conv *c, DDTensor dyt, DDTensor dxh, PetscObjectState wst = 0)
{
  PetscFunctionBegin;
  /* loop kernels accumulate into dx^; others overwrite their window, so zeroing is needed only where the window misses part of the bulk */
  bool overwrites = c->hasout && c->kern->OverwritesDx();
  for (PetscInt j = 0; j < dxh->layout.order && overwrites; j++) {
    const DDLayout &L = dxh->layout;
    if (j < c->lead) overwrites = L.n[j] == 1;
    else if (j >= c->lead + 2) overwrites = c->xorg[j] <= L.lo[j] && c->xorg[j] + c->g.in[j - c->lead - 2 + 3 - c->D] >= L.lo[j] + L.n[j];
  }
  if (!overwrites) PetscCall(DDTensorZeroEntries(dxh));
  if (!c->hasout) PetscFunctionReturn(PETSC_SUCCESS);
  PetscObjectState st = wst;
  if (st >= 0) PetscCall(DDTensorContentState_Private(c->wh, &st));
  PetscCall(c->kern->BackwardData(dyt, c->wh, st, dxh));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Backward (Fig. 4, right): dy^ = R^* dy; dx^ = conv_x^*(dy^) on the window; its halo goes back to
  the owners (H^*) while dW is computed (paper 003 sec. IV-A: the dL/dx halo overlaps dL/dw);
  then B^* sums dx^ over co.
*/
static PetscErrorCode Conv_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Conv    *c  = (Conv *)l->data;
  DDTensor dx = dxs ? dxs[0] : NULL, x = l->saved[0], xh, dyt, dxh = NULL;

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
  if (dx) {
    if (!c->bcastX && dx->layouthash == c->xh->layouthash) dxh = dx;
    else {
      if (!c->dxh) PetscCall(DDTensorDuplicate(c->xh, &c->dxh));
      dxh = c->dxh;
    }
    PetscCall(Conv_BackwardData(c, dyt, dxh));
    PetscCall(DDPrimitiveApplyAdjointBegin(c->Hx, dxh, NULL));
  }
  SplitApplyGuard inflight(c->Hx, dxh, NULL); /* an error return before the End ends the exchange (begun only with dx) */
  PetscCall(Conv_BackwardWeights(l, c, xh, dyt));
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDPrimitiveApplyAdjointEnd(c->Hx, dxh, NULL));
  if (c->bcastX) {
    DDTensor dxo;
    PetscCall(ConformLayout(dx, l->setupin[0], &c->dxcopy, &dxo, false));
    PetscCall(DDPrimitiveApplyAdjoint(c->Bx, dxh, dxo));
    if (dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  } else if (dxh != dx) PetscCall(DDTensorCopy(dxh, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Conv_View(DDLayer l, PetscViewer viewer)
{
  Conv *c = (Conv *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "out channels %" PetscInt_FMT ", groups %" PetscInt_FMT ", padding %s, bias %s, padding mode %s, channel workers %" PetscInt_FMT ", overlap %s\n", c->co, c->groups, DDConvPaddingTypes[c->padtype], c->bias ? "yes" : "no", DDPaddingModes[c->padmode], c->pco, c->overlap ? (c->overlapOn ? "on (interior + boundary regions)" : "on (no interior on rank 0)") : "off"));
  if (l->setupcalled) {
    const char *dist = (!c->bcastX && !c->reduceY) ? "spatial" : (c->Pss == 1 ? "channel" : "general");
    PetscCall(PetscViewerASCIIPrintf(viewer, "kernel %" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT " stride %" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT ", %s distribution (Pn %" PetscInt_FMT ", Pci %" PetscInt_FMT ", Pco %" PetscInt_FMT ", spatial %" PetscInt_FMT "), kernels: %s\n", c->g.k[0], c->g.k[1], c->g.k[2], c->g.s[0], c->g.s[1], c->g.s[2], dist, c->Pn, c->Pci, c->pco, c->Pss,
                                     c->kern ? c->kern->Name() : "none (no local output)"));
    if (c->fuseact >= 0) PetscCall(PetscViewerASCIIPrintf(viewer, "fused with the next activation (-net_fuse): the output holds %s(conv), %s\n", DDActivationTypes[c->fuseact], c->kernfused ? "written by the kernel" : "applied after the kernel"));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERCONV - "conv": distributed 1-, 2- and 3-D convolution (paper 000 sec. 4.1.2, Fig. 4)

  Input N x C x spatial; output N x Co x spatial'; weights (Co, Ci/groups, k...) as PyTorch stores them,
  bias (Co). Stride, padding (zeros, reflect, replicate, circular; symmetric, before/after, 'same'
  or 'valid'), dilation, groups and bias mean what they mean in torch.nn.Conv1d/2d/3d.
  Envelope: 'same' needs stride 1; groups need Ci and Co divisible by them (an error naming
  -layer_conv_groups otherwise) and take every distribution, channel partitions whose pieces cut
  groups included (`DDLayerConvSetGroups()`); in float32 they run oneDNN's grouped convolution on
  unpartitioned channels and the GEMM kernels of /cpu/blas over partitioned ones.

  Distributions: the input's partition Pn x Pci x Ps and -layer_conv_channel_workers Pco choose
  spatial-only (Pci = Pco = 1: a halo exchange, and the weights broadcast from their owner),
  channel-only (Ps = 1: Pco x Pci weight partition with broadcast and sum-reduce) or general.
  Unbalanced halos follow the output's balanced decomposition (Appendix B).

  Kernels: on /cpu/dnnl oneDNN (float32; activations in its preferred, usually blocked, format are
  written and read without reorders; on AVX-512 machines its Winograd F(4x4, 3x3) kernel for 2-D
  3x3 unit-stride one-group convolutions over whole 16-channel blocks: forward, backward weights, and
  backward data where the local output has at least 256 positions per image; -dd_conv_winograd
  <bool> for all passes or none; a 1x1 unit-stride convolution on a plain input keeps plain storage
  and runs one GEMM per image on the tensors, OpenBLAS's below 128 x 128 channels and oneDNN's GEMM
  convolution from there, -dd_dnnl_plain_pointwise 0 for the blocked kernel), in float64 the Winograd or
  im2col + GEMM kernels of /cpu/blas; the reference loops on /cpu/ref.

  Fused activation: in a network (`DDNetSetUp()`, -net_fuse, default on) a convolution whose only
  consumer is a relu, tanh or sigmoid layer laid out alike writes act(conv) into its output: the
  activation layer's own kernel in place after the local kernels and any sum over input-channel
  workers, bitwise the unfused values (nan and inf included), or with -dd_dnnl_eltwise_postop
  oneDNN's eltwise post-op in float32 (its relu turns a nan into 0; its tanh and sigmoid are equal
  to ours up to the last bits); the activation layer's output views it. `DDNetGetLayerOutput()` of the convolution then gives act(conv).

  Options Database Keys:
+ -layer_conv_out_channels <n> - output channels
. -layer_conv_kernel <k,...> - kernel size (1 or D entries)
. -layer_conv_stride <s,...> - stride
. -layer_conv_padding <p,...|same|valid> - padding (before and after, unless -layer_conv_padding_after), or PyTorch's rule
. -layer_conv_padding_after <p,...> - padding after the last entry (asymmetric padding)
. -layer_conv_groups <g> - channel groups (default 1; Ci = g is depthwise)
. -layer_conv_dilation <d,...> - dilation
. -layer_conv_bias <bool> - bias
. -layer_conv_padding_mode <zeros,reflect,replicate,circular> - padding mode
. -layer_conv_channel_workers <n> - Pco
. -dd_conv_winograd <bool> - Winograd for every pass of every 3x3 unit-stride one-group convolution where the backend has it (true) or for none (false); default: per backend and pass, as above
. -dd_dnnl_plain_pointwise <bool> - /cpu/dnnl keeps a 1x1 unit-stride convolution on a plain input in plain storage (default true) or hands it to oneDNN's blocked kernel (false)
- -primitive_halo_neighbors_only <bool> - fail set-up when a halo would come from past the adjacent workers (paper 000's assumption; default: from any worker)

  Level: beginner

.seealso: `DDLayerConvSetKernel()`, `DDLayerConvSetOutputChannels()`, `DDPRIMITIVEHALO`
M*/
/* the passes of this worker's local kernel that run Winograd (the performance model's conv terms): its backend chain's choice for its geometry */
PetscErrorCode ddnn::DDLayerConvWinogradPasses_Private(DDLayer l, bool passes[3])
{
  PetscBool isconv = PETSC_FALSE;

  PetscFunctionBegin;
  passes[0] = passes[1] = passes[2] = false;
  PetscCall(PetscObjectTypeCompare((PetscObject)l, DDLAYERCONV, &isconv));
  if (!isconv || !l->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  Conv *c = (Conv *)l->data;
  if (c->kb && c->xh && c->hasout) PetscCall(ddnn::DDBackendConvWinograd(c->kb, c->xh->dtype, c->g, false, passes));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* whether this worker's local kernel is a 1 x 1 unit-stride ungrouped convolution on plain storage (the performance model's "conv-pointwise" kind) */
PetscErrorCode ddnn::DDLayerConvPlainPointwise_Private(DDLayer l, bool *pointwise)
{
  PetscBool      isconv = PETSC_FALSE;
  DDTensorFormat xf, yf;

  PetscFunctionBegin;
  *pointwise = false;
  PetscCall(PetscObjectTypeCompare((PetscObject)l, DDLAYERCONV, &isconv));
  if (!isconv || !l->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  Conv           *c = (Conv *)l->data;
  const ConvGeom &g = c->g;
  if (!c->kern || !c->xh || !c->hasout || !g.UnitPointwise()) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDTensorGetFormat(c->xh, &xf));
  PetscCall(DDTensorGetFormat(c->reduceY ? c->yh : l->output, &yf));
  *pointwise = xf == DD_FORMAT_PLAIN && yf == DD_FORMAT_PLAIN;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the local kernels of this rank alone on copies of the layer's tensors (the performance model's per-configuration estimate) */
PetscErrorCode ddnn::DDLayerConvKernelRun_Private(DDLayer l, bool nodx, bool copies, LayerKernelRun *run)
{
  PetscFunctionBegin;
  PetscCall(KernelRunBegin(l, DDLAYERCONV, run));
  Conv *c = (Conv *)l->data;
  if (!c->hasout || !c->kern) PetscFunctionReturn(PETSC_SUCCESS);
  DDTensor        yref    = c->reduceY ? c->yh : l->output, xt, yt, dyt, dxt, dwt, dbt = NULL, xin = NULL;
  const bool      convert = !c->bcastX && !c->xdirect; /* an input in another format than the kernel's: the forward converts it (ForwardInputs()), the backward converts dx back */
  const ConvGeom &g       = c->g;
  run->key                = std::string(l->output->dtype == DD_FLOAT32 ? "conv float32 " : "conv float64 ") + c->kern->Name() + " N" + std::to_string(g.N) + " Ci" + std::to_string(g.Ci) + " Co" + std::to_string(g.Co) + " g" + std::to_string(g.groups);
  for (int j = 0; j < 3; j++) run->key += " " + std::to_string(g.in[j]) + ">" + std::to_string(g.out[j]) + " k" + std::to_string(g.k[j]) + "s" + std::to_string(g.s[j]) + "d" + std::to_string(g.d[j]);
  run->key += (convert ? " from[" + KernelRunLayoutKey(l->setupin[0]) + "]" : std::string()) + " x[" + KernelRunLayoutKey(c->xh) + "] y[" + KernelRunLayoutKey(yref) + "] bias" + std::to_string(c->bias && c->biasworker ? 1 : 0) + (c->kernfused ? " act" + std::to_string((int)c->fuseact) : std::string()) + " regions" + std::to_string(c->overlapOn ? (int)c->regions.size() : 0) + (nodx ? " nodx" : "");
  if (!copies) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(KernelRunCopies(run, {{c->xh, &xt}, {yref, &yt}, {yref, &dyt}, {c->xh, &dxt}, {c->wh, &dwt}, {c->bias && c->biasworker ? c->bh : (DDTensor)NULL, &dbt}, {convert ? l->setupin[0] : (DDTensor)NULL, &xin}}));
  if (run->untimed) PetscFunctionReturn(PETSC_SUCCESS);
  /* the forward's compute as Conv_HaloAndLocal() and Conv_Forward() run it, without the exchange; a fused
     activation that the kernel does not apply is the activation layer's (the model prices it there). As in a
     training step, the weights changed since the kernels' last call (the optimizer's update): the forward and
     the backward data pass prepare them anew (oneDNN reorders them into its blocked format: about 3 us of the
     main job's first convolution's 35 us forward, float32, 1 rank), which calls with unchanged weights leave out */
  run->pass[0] = [c, xt, yt, xin]() -> PetscErrorCode {
    PetscFunctionBegin;
    if (xin) PetscCall(DDTensorCopy(xin, xt));
    const PetscObjectState wst = FreshWeightState();
    if (c->overlapOn)
      for (auto &r : c->regions) PetscCall(Conv_Local(c, xt, yt, &r, wst));
    else PetscCall(Conv_Local(c, xt, yt, nullptr, wst));
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  if (!nodx)
    run->pass[1] = [c, dyt, dxt, xin]() -> PetscErrorCode {
      PetscFunctionBegin;
      PetscCall(Conv_BackwardData(c, dyt, dxt, FreshWeightState()));
      if (xin) PetscCall(DDTensorCopy(dxt, xin));
      PetscFunctionReturn(PETSC_SUCCESS);
    };
  run->pass[2] = [c, xt, dyt, dwt, dbt]() -> PetscErrorCode {
    PetscFunctionBegin;
    PetscCall(DDTensorZeroEntries(dwt));
    if (dbt) PetscCall(DDTensorZeroEntries(dbt));
    PetscCall(c->kern->BackwardWeights(xt, dyt, dwt, dbt));
    PetscFunctionReturn(PETSC_SUCCESS);
  };
  PetscFunctionReturn(PETSC_SUCCESS);
}

PETSC_EXTERN PetscErrorCode DDLayerCreate_Conv(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Conv;
  l->ops->setfromoptions = Conv_SetFromOptions;
  l->ops->setup          = Conv_SetUp;
  l->ops->forward        = Conv_Forward;
  l->ops->backward       = Conv_Backward;
  l->ops->initparams     = Conv_InitParams;
  l->ops->view           = Conv_View;
  l->ops->reset          = Conv_Reset;
  l->ops->destroy        = Conv_Destroy;
  l->device              = PETSC_TRUE; /* on device tensors: the cuDNN kernels of /gpu/cuda, the halo and collectives on the device */
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetOutputChannels_C", DDLayerConvSetOutputChannels_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetKernel_C", DDLayerConvSetKernel_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetStride_C", DDLayerConvSetStride_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetPadding_C", DDLayerConvSetPadding_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetDilation_C", DDLayerConvSetDilation_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetBias_C", DDLayerConvSetBias_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetChannelWorkers_C", DDLayerConvSetChannelWorkers_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetGroups_C", DDLayerConvSetGroups_Conv));
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerConvSetFusedActivation_C", DDLayerConvSetFusedActivation_Conv));
  PetscFunctionReturn(PETSC_SUCCESS);
}

