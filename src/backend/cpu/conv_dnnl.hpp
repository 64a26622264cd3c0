/* oneDNN convolution on windows of ddnn tensors (float32), forward and both backward passes. */
#pragma once
#include <backend/cpu/dnnl_util.hpp>
#if DDNN_WITH_DNNL
  #include <vector>
  #include <string>
  #include <new>

namespace ddnn
{
/* std::vector's storage on 64-byte boundaries: oneDNN's Winograd backward weights writes its diff weights with aligned stores */
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64()      = default;
  template <class U>
  Aligned64(const Aligned64<U> &)
  {
  }
  T   *allocate(size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const Aligned64<U> &) const
  {
    return true;
  }
  template <class U>
  bool operator!=(const Aligned64<U> &) const
  {
    return false;
  }
};
using DnnlBuf = std::vector<float, Aligned64<float>>;

class DnnlConv
{
public:
  /*
    g: local geometry (no padding: the window is already padded by the halo exchange).
    x/y: descriptors of the input window and the output box; dx/dy: of the gradients (NULL
    descriptors skip the backward primitives). transposed: a transposed convolution, i.e. the
    deconvolution primitives: x (g.Ci channels, g.in) is then its input, the small side, and
    y (g.Co channels, g.out) its output; its weights are plain (I, O, k...) = (g.Ci, g.Co, k...)
    as PyTorch stores a ConvTranspose's. padl/padr (NULL: zero): oneDNN's padding_l/padding_r
    per spatial dimension (3 entries, leading unit dimensions first), >= 0; for the transposed
    convolution they crop its output (out = (in - 1) s - padl - padr + (k - 1) d + 1).
  */
  PetscErrorCode SetUp(const ConvGeom &g, const dnnl::memory::desc &x, const dnnl::memory::desc &y, const dnnl::memory::desc &dx, const dnnl::memory::desc &dy, bool bias, bool transposed, const PetscInt padl[3] = nullptr, const PetscInt padr[3] = nullptr);
  /* y = conv(x, w) + b; w plain (O, I, k...) (transposed: (I, O, k...)), reordered when wchanged */
  PetscErrorCode Forward(void *x, const float *w, bool wchanged, const float *b, void *y);
  /* dx = conv_bwd_data(dy, w) (overwrites the window) */
  PetscErrorCode BackwardData(void *dy, const float *w, bool wchanged, void *dx);
  /* dw = conv_bwd_weights(x, dy) as plain (O, I, k...) (overwritten), db (overwritten) if bias */
  PetscErrorCode BackwardWeights(void *x, void *dy, float *dw, float *db);
  /*
    Dense staging (call before SetUp): the primitives get oneDNN's preferred dense layouts, and
    windows that differ (a halo window, a sub-box of the output) are copied in and out by
    reorders. oneDNN 2.6 falls back to its reference implementation ("ref:any") for any
    non-dense source or destination (a submemory or strided window), and its reference
    deconvolution adds the bias outside a non-dense destination (out-of-bounds writes, seen
    with valgrind); staged, both run the jit kernels on dense buffers.
  */
  void        SetDenseStaging(bool flg) { staging = flg; }
  /*
    (call before SetUp) Forward writes act(conv + b): oneDNN's eltwise post-op of the forward primitive,
    act one of relu, tanh, sigmoid (eltwise_relu, eltwise_tanh, eltwise_logistic), or identity (none)
  */
  void        SetPostOp(DDActivationType act) { postact = act; }
  /*
    (call before SetUp) the passes (forward, backward data, backward weights) that ask oneDNN for its
    Winograd convolution (convolution_winograd: jit_wino_4x3, F(4x4, 3x3) on 16-channel blocks, AVX-512
    only); a pass oneDNN has no Winograd kernel for keeps convolution_direct. Not the deconvolution.
  */
  void        SetWinograd(bool fwd, bool bwdd, bool bwdw)
  {
    wino[0] = fwd;
    wino[1] = bwdd;
    wino[2] = bwdw;
  }
  std::string Impl() const { return impl; }
  /* the formats oneDNN prefers for the input and output of this geometry (transposed: x is the deconvolution's input) */
  static PetscErrorCode Preferred(const ConvGeom &g, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs);

private:
  ConvGeom                                        geom;
  bool                                            hasbias = false, hasbwd = false, deconv = false, staging = false;
  DDActivationType                                postact = DD_ACT_IDENTITY;
  bool                                            wino[3] = {false, false, false};
  dnnl::memory::desc                              wplain, bmd;
  dnnl::primitive                                 fwd, bwdd, bwdw;
  dnnl::memory::desc                              xmd, ymd, dxmd, dymd, wfwd, wbwd, dwmd;
  DnnlBuf                                         wbuf_fwd, wbuf_bwd, dwbuf;
  dnnl::memory::desc                              pfx, pfy, pbdx, pbdy, pwx, pwdy; /* what the primitives read and write */
  DnnlBuf                                         xbuf, ybuf;                      /* the staged copies, where they differ */
  bool                                            wfwd_plain = true, wbwd_plain = true, dw_plain = true;
  std::string                                     impl;
};
} // namespace ddnn
#endif
