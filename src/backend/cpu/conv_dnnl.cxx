/*
  oneDNN convolution (and deconvolution) kernels of the conv layers, float32.

  The input descriptor is a window of the halo-padded storage (a sub-memory for the blocked
  format), so the halo exchange's output is read in place; weights are PyTorch-ordered
  ((O, I, k...) for a convolution, (I, O, k...) for a transposed one) and reordered into the
  primitive's format only when they changed. The deconvolution primitives have the same
  argument roles as the convolution's (src = x, the deconvolution's input; dst = y), and
  their padding crops the output: the local "crop" of a worker's output box. Groups (g.groups =
  G > 1): oneDNN's grouped weights (G, O/G, I/G, k...) are PyTorch's (Co, Ci/G, k...) as they are
  (tag goi..., the same bytes), and a transposed convolution's (Ci, Co/G, k...) = (G, I/G, O/G, k...)
  in the order g, i, o, k... (tag acb...).
*/
#include <backend/cpu/conv_dnnl.hpp>
#include <unordered_map>
#if DDNN_WITH_DNNL
namespace ddnn
{
using md  = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;
using dt  = dnnl::memory::data_type;

/* the logical weight dimensions: (O, I, k...), or (G, O/G, I/G, k...) for groups */
static dnnl::memory::dims WeightDims(const ConvGeom &g)
{
  dnnl::memory::dims wd = {g.Co, g.Ci};
  if (g.groups > 1) wd = {g.groups, g.Co / g.groups, g.Ci / g.groups};
  for (PetscInt j = 3 - g.D; j < 3; j++) wd.push_back(g.k[j]);
  return wd;
}

static dnnl::memory::dims Spatial(const PetscInt v[3], PetscInt D, PetscInt add = 0)
{
  dnnl::memory::dims r;
  for (PetscInt j = 3 - D; j < 3; j++) r.push_back(v[j] + add);
  return r;
}

PetscErrorCode DnnlConv::Preferred(const ConvGeom &g, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs)
{
  PetscFunctionBegin;
  *xf = *yf = DD_FORMAT_PLAIN;
  *xbs = *ybs = 1;
  DDDnnlCall({
    dnnl::memory::dims xd = {g.N, g.Ci}, yd = {g.N, g.Co}, wd = WeightDims(g);
    for (PetscInt j = 3 - g.D; j < 3; j++) {
      xd.push_back(g.in[j]);
      yd.push_back(g.out[j]);
    }
    auto strides = Spatial(g.s, g.D), dil = Spatial(g.d, g.D, -1), pad = Spatial(g.s, g.D, 0);
    for (auto &p : pad) p = 0;
    md xa(xd, dt::f32, tag::any), ya(yd, dt::f32, tag::any), wa(wd, dt::f32, tag::any);
    if (!transposed) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, xa, wa, ya, strides, dil, pad, pad);
      dnnl::convolution_forward::primitive_desc pd(d, CpuEngine());
      if (!FormatOfDesc(pd.src_desc(), g.D, xf, xbs)) *xf = DD_FORMAT_PLAIN;
      if (!FormatOfDesc(pd.dst_desc(), g.D, yf, ybs)) *yf = DD_FORMAT_PLAIN;
    } else {
      /* deconvolution: x (g.in, g.Ci channels) is its input, y (g.out, g.Co channels) its output */
      dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::deconvolution_direct, xa, wa, ya, strides, dil, pad, pad);
      dnnl::deconvolution_forward::primitive_desc pd(d, CpuEngine());
      if (!FormatOfDesc(pd.src_desc(), g.D, xf, xbs)) *xf = DD_FORMAT_PLAIN;
      if (!FormatOfDesc(pd.dst_desc(), g.D, yf, ybs)) *yf = DD_FORMAT_PLAIN;
    }
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The primitive descriptor make(alg) of Winograd's algorithm where wino and oneDNN implements it
  (jit_wino_4x3: F(4x4, 3x3), Lavin and Gray 2016, on AVX-512 machines, 2-D, unit stride and dilation,
  one group), else of the direct one; make(convolution_direct) throws as before.
*/
template <class PD, class F>
static PD FirstImplemented(bool wino, F &&make)
{
  if (wino) {
    try {
      return make(dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error &e) {
      if (e.status != dnnl_unimplemented) throw;
    }
  }
  return make(dnnl::algorithm::convolution_direct);
}

PetscErrorCode DnnlConv::SetUp(const ConvGeom &g, const md &x, const md &y, const md &dx, const md &dy, bool bias, bool transposed, const PetscInt padl[3], const PetscInt padr[3])
{
  PetscFunctionBegin;
  geom    = g;
  hasbias = bias;
  deconv  = transposed;
  xmd     = x;
  ymd     = y;
  dxmd    = dx;
  dymd    = dy;
  hasbwd  = dx.data.ndims > 0;
  for (PetscInt j = 3 - g.D; j < 3; j++) PetscCheck((!padl || padl[j] >= 0) && (!padr || padr[j] >= 0), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "oneDNN padding must be non-negative, got %" PetscInt_FMT " and %" PetscInt_FMT, padl ? padl[j] : 0, padr ? padr[j] : 0);
  DDDnnlCall({
    const PetscInt zero[3] = {0, 0, 0};
    auto           strides = Spatial(g.s, g.D), dil = Spatial(g.d, g.D, -1), pl = Spatial(padl ? padl : zero, g.D), pr = Spatial(padr ? padr : zero, g.D);
    /* conv weights are (O, I, k...); a deconvolution's logical (O, I, k...) are stored (I, O, k...) by PyTorch */
    dnnl::memory::dims wd = WeightDims(g);
    if (g.groups > 1) {
      if (!transposed) wplain = md(wd, dt::f32, g.D == 1 ? tag::goiw : g.D == 2 ? tag::goihw : tag::goidhw);
      else wplain = md(wd, dt::f32, g.D == 1 ? tag::acbd : g.D == 2 ? tag::acbde : tag::acbdef);
    } else if (!transposed) wplain = md(wd, dt::f32, g.D == 1 ? tag::oiw : g.D == 2 ? tag::oihw : tag::oidhw);
    else wplain = md(wd, dt::f32, g.D == 1 ? tag::bac : g.D == 2 ? tag::iohw : tag::iodhw);
    md wany(wd, dt::f32, tag::any);
    bmd = md({g.Co}, dt::f32, tag::x);
    md none;
    /* the activations as the primitives see them: the windows, or (staged) whatever dense layout oneDNN prefers */
    const md X = staging ? md(x.dims(), dt::f32, tag::any) : x, Y = staging ? md(y.dims(), dt::f32, tag::any) : y;
    const md DX = staging && hasbwd ? md(dx.dims(), dt::f32, tag::any) : dx, DY = staging && hasbwd ? md(dy.dims(), dt::f32, tag::any) : dy;
    if (!transposed) {
      dnnl::primitive_attr attr;
      /*
        act(conv + b) written by the forward primitive (an eltwise post-op): relu as max(v, 0) with
        alpha 0, as the activation layer's relu (bitwise); tanh and logistic (sigmoid) are oneDNN's
        own approximations, within a few ulp of the activation layer's kernels
      */
      if (postact != DD_ACT_IDENTITY) {
        dnnl::post_ops po;
        po.append_eltwise(1.0f, postact == DD_ACT_RELU ? dnnl::algorithm::eltwise_relu : postact == DD_ACT_TANH ? dnnl::algorithm::eltwise_tanh : dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      /* each pass: Winograd where asked for and oneDNN has it (else, or on an AVX2 machine, direct) */
      auto fpd = FirstImplemented<dnnl::convolution_forward::primitive_desc>(wino[0], [&](dnnl::algorithm a) {
        dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, a, X, wany, bias ? bmd : none, Y, strides, dil, pl, pr);
        return dnnl::convolution_forward::primitive_desc(fd, attr, CpuEngine());
      });
      impl = fpd.impl_info_str();
      if (postact != DD_ACT_IDENTITY) impl += std::string(" + ") + DDActivationTypes[postact] + " post-op";
      fwd  = dnnl::convolution_forward(fpd);
      wfwd = fpd.weights_desc();
      pfx  = fpd.src_desc();
      pfy  = fpd.dst_desc();
      if (hasbwd) {
        auto bpd = FirstImplemented<dnnl::convolution_backward_data::primitive_desc>(wino[1], [&](dnnl::algorithm a) {
          dnnl::convolution_backward_data::desc bd(a, DX, wany, DY, strides, dil, pl, pr);
          return dnnl::convolution_backward_data::primitive_desc(bd, CpuEngine(), fpd);
        });
        bwdd = dnnl::convolution_backward_data(bpd);
        wbwd = bpd.weights_desc();
        pbdx = bpd.diff_src_desc();
        pbdy = bpd.diff_dst_desc();
        auto wpd = FirstImplemented<dnnl::convolution_backward_weights::primitive_desc>(wino[2], [&](dnnl::algorithm a) {
          dnnl::convolution_backward_weights::desc wdsc(a, X, wany, bias ? bmd : none, DY, strides, dil, pl, pr);
          return dnnl::convolution_backward_weights::primitive_desc(wdsc, CpuEngine(), fpd);
        });
        bwdw = dnnl::convolution_backward_weights(wpd);
        /* the backward passes' kernels where they are not the forward's (a Winograd pass among direct ones) */
        const std::string bi = bpd.impl_info_str(), wi = wpd.impl_info_str(), fi = fpd.impl_info_str();
        if (bi != fi || wi != fi) impl += "; backward data " + bi + ", backward weights " + wi;
        dwmd = wpd.diff_weights_desc();
        pwx  = wpd.src_desc();
        pwdy = wpd.diff_dst_desc();
      }
    } else {
      dnnl::deconvolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::deconvolution_direct, X, wany, bias ? bmd : none, Y, strides, dil, pl, pr);
      dnnl::deconvolution_forward::primitive_desc fpd(fd, CpuEngine());
      impl = fpd.impl_info_str();
      fwd  = dnnl::deconvolution_forward(fpd);
      wfwd = fpd.weights_desc();
      pfx  = fpd.src_desc();
      pfy  = fpd.dst_desc();
      if (hasbwd) {
        dnnl::deconvolution_backward_data::desc bd(dnnl::algorithm::deconvolution_direct, DX, wany, DY, strides, dil, pl, pr);
        dnnl::deconvolution_backward_data::primitive_desc bpd(bd, CpuEngine(), fpd);
        bwdd = dnnl::deconvolution_backward_data(bpd);
        wbwd = bpd.weights_desc();
        pbdx = bpd.diff_src_desc();
        pbdy = bpd.diff_dst_desc();
        dnnl::deconvolution_backward_weights::desc wdsc(dnnl::algorithm::deconvolution_direct, X, wany, bias ? bmd : none, DY, strides, dil, pl, pr);
        dnnl::deconvolution_backward_weights::primitive_desc wpd(wdsc, CpuEngine(), fpd);
        bwdw = dnnl::deconvolution_backward_weights(wpd);
        dwmd = wpd.diff_weights_desc();
        pwx  = wpd.src_desc();
        pwdy = wpd.diff_dst_desc();
      }
    }
    if (!staging) { /* exactly the windows given */
      pfx = pwx = xmd;
      pfy = pwdy = ymd;
      pbdx       = dxmd;
      pbdy       = dymd;
    }
    if (!(pfx == xmd && pfy == ymd && (!hasbwd || (pbdx == dxmd && pbdy == dymd && pwx == xmd && pwdy == dymd)))) impl += " (dense staging)";
    wfwd_plain = wfwd == wplain;
    wbwd_plain = !hasbwd || wbwd == wplain;
    dw_plain   = !hasbwd || dwmd == wplain;
    if (!wfwd_plain) wbuf_fwd.resize(wfwd.get_size() / sizeof(float) + 1);
    if (!wbwd_plain) wbuf_bwd.resize(wbwd.get_size() / sizeof(float) + 1);
    if (!dw_plain) dwbuf.resize(dwmd.get_size() / sizeof(float) + 1);
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* memory p of layout u where a primitive reads layout w: p itself, or a copy in buf */
static void *StageIn(const md &u, const md &w, void *p, DnnlBuf &buf)
{
  if (u == w) return p;
  if (buf.size() < w.get_size() / sizeof(float) + 1) buf.resize(w.get_size() / sizeof(float) + 1);
  dnnl::memory src(u, CpuEngine(), p), dst(w, CpuEngine(), buf.data());
  dnnl::reorder(src, dst).execute(CpuStream(), src, dst);
  return buf.data();
}

/* where a primitive writes layout w for memory p of layout u: p itself, or buf (then StageOut) */
static void *StageOutPtr(const md &u, const md &w, void *p, DnnlBuf &buf)
{
  if (u == w) return p;
  if (buf.size() < w.get_size() / sizeof(float) + 1) buf.resize(w.get_size() / sizeof(float) + 1);
  return buf.data();
}

static void StageOut(const md &u, const md &w, void *p, DnnlBuf &buf)
{
  if (u == w) return;
  dnnl::memory src(w, CpuEngine(), buf.data()), dst(u, CpuEngine(), p);
  dnnl::reorder(src, dst).execute(CpuStream(), src, dst);
}

static void *Reordered(const md &plain, const md &want, const float *w, bool plainok, DnnlBuf &buf, bool changed)
{
  if (plainok) return (void *)w;
  if (changed) {
    dnnl::memory src(plain, CpuEngine(), (void *)w), dst(want, CpuEngine(), buf.data());
    dnnl::reorder(src, dst).execute(CpuStream(), src, dst);
  }
  return buf.data();
}

PetscErrorCode DnnlConv::Forward(void *x, const float *w, bool wchanged, const float *b, void *y)
{
  PetscFunctionBegin;
  DDDnnlCall({
    void                                 *wp = Reordered(wplain, wfwd, w, wfwd_plain, wbuf_fwd, wchanged);
    void                                 *xp = StageIn(xmd, pfx, x, xbuf), *yp = StageOutPtr(ymd, pfy, y, ybuf);
    std::unordered_map<int, dnnl::memory> args;
    args.insert({DNNL_ARG_SRC, dnnl::memory(pfx, CpuEngine(), xp)});
    args.insert({DNNL_ARG_WEIGHTS, dnnl::memory(wfwd, CpuEngine(), wp)});
    if (hasbias) args.insert({DNNL_ARG_BIAS, dnnl::memory(bmd, CpuEngine(), (void *)b)});
    args.insert({DNNL_ARG_DST, dnnl::memory(pfy, CpuEngine(), yp)});
    fwd.execute(CpuStream(), args);
    StageOut(ymd, pfy, y, ybuf);
    CpuStream().wait();
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DnnlConv::BackwardData(void *dy, const float *w, bool wchanged, void *dx)
{
  PetscFunctionBegin;
  DDDnnlCall({
    void                                 *wp = Reordered(wplain, wbwd, w, wbwd_plain, wbuf_bwd, wchanged);
    void                                 *dyp = StageIn(dymd, pbdy, dy, ybuf), *dxp = StageOutPtr(dxmd, pbdx, dx, xbuf);
    std::unordered_map<int, dnnl::memory> args;
    args.insert({DNNL_ARG_DIFF_DST, dnnl::memory(pbdy, CpuEngine(), dyp)});
    args.insert({DNNL_ARG_WEIGHTS, dnnl::memory(wbwd, CpuEngine(), wp)});
    args.insert({DNNL_ARG_DIFF_SRC, dnnl::memory(pbdx, CpuEngine(), dxp)});
    bwdd.execute(CpuStream(), args);
    StageOut(dxmd, pbdx, dx, xbuf);
    CpuStream().wait();
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DnnlConv::BackwardWeights(void *x, void *dy, float *dw, float *db)
{
  PetscFunctionBegin;
  DDDnnlCall({
    std::unordered_map<int, dnnl::memory> args;
    args.insert({DNNL_ARG_SRC, dnnl::memory(pwx, CpuEngine(), StageIn(xmd, pwx, x, xbuf))});
    args.insert({DNNL_ARG_DIFF_DST, dnnl::memory(pwdy, CpuEngine(), StageIn(dymd, pwdy, dy, ybuf))});
    /* in place where plain and on a 64-byte boundary (the Winograd kernel's aligned stores; PETSc's allocations are 16-byte aligned) */
    const bool   direct = dw_plain && (uintptr_t)dw % 64 == 0;
    if (!direct && dwbuf.size() < dwmd.get_size() / sizeof(float) + 1) dwbuf.resize(dwmd.get_size() / sizeof(float) + 1);
    dnnl::memory dwm(dwmd, CpuEngine(), direct ? (void *)dw : (void *)dwbuf.data());
    args.insert({DNNL_ARG_DIFF_WEIGHTS, dwm});
    if (hasbias) args.insert({DNNL_ARG_DIFF_BIAS, dnnl::memory(bmd, CpuEngine(), db)});
    bwdw.execute(CpuStream(), args);
    if (!direct) {
      dnnl::memory dst(wplain, CpuEngine(), dw);
      dnnl::reorder(dwm, dst).execute(CpuStream(), dwm, dst);
    }
    CpuStream().wait();
  });
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
#endif
