/*
  /cpu/dnnl: oneDNN's float32 kernels — convolution and transposed convolution (forward, backward
  data, backward weights; jit kernels on dense staged windows, oneDNN's Winograd for the passes
  WinogradPasses() picks on AVX-512 machines; grouped and depthwise ones as
  oneDNN's grouped weights (G, O/G, I/G, k...)), max and average pooling, and the
  dense layer's products through dnnl_sgemm. float64 and the geometries oneDNN does not take fall
  back to /cpu/blas (then /cpu/ref).
*/
#include <sys/ddcxx.hpp>
#include <ddconf.h>
#if DDNN_WITH_DNNL
  #include <backend/common/loopkernels.hpp>
  #include <backend/common/affine_gemm.hpp>
  #include <backend/cpu/conv_dnnl.hpp>
  #include <backend/cpu/pool_dnnl.hpp>
  #include <backend/cpu/fastkernels.hpp>
  #include <algorithm>
  #include <vector>
  #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    #include <immintrin.h>
  #endif
  #include <backend/blas/conv_winograd.hpp>
  #include <oneapi/dnnl/dnnl.h>

using namespace ddnn;

namespace
{
DDBackend Self() { return DDBackendLookup_Private("/cpu/dnnl"); }

/* -dd_dnnl_eltwise_postop: a convolution fused with relu, tanh or sigmoid (-net_fuse) computes them in oneDNN's post-op (default: no, the layer applies ours) */
bool EltwisePostOp()
{
  PetscBool flg = PETSC_FALSE;
  (void)PetscOptionsGetBool(NULL, NULL, "-dd_dnnl_eltwise_postop", &flg, NULL);
  return flg ? true : false;
}

/*
  The passes (forward, backward data, backward weights) that ask oneDNN for its Winograd convolution
  (F(4x4, 3x3) on 16-channel blocks; AVX-512 machines only, elsewhere oneDNN has none and every pass
  stays direct). -dd_conv_winograd <bool> (as on /cpu/blas): every pass of every 2-D 3 x 3 unit-stride
  one-group convolution (true), or none (false). Unset, measured as the layers run it
  (bench_conv_kernels -dnnl 1: nChw16c halo windows, the weights reordered or transformed at every
  call; 1 thread, AVX-512 EPYC, 2026-11-28; Winograd / direct): forward 0.47-0.82 and backward
  weights 0.41-0.93 on every shape with whole 16-channel blocks (the U-Net's layers at batch 8 from
  8x8 to 32x32, 8x64x56x56, 1x16x512x512); backward data 0.51-0.92 from 16 x 16 outputs up, but
  1.05-1.28 on 8 x 8 ones (32 -> 64, 64 -> 64). So Winograd where both channel counts are whole
  16-channel blocks, the backward data only where the local output has at least 256 positions per
  image and channel. (At 2 threads 1x16x512x512 16 -> 16 took 1.19 / 1.14 of the direct forward /
  backward data and 0.66 of its backward weights, 1.00 in all; -dd_conv_winograd 0 if a run is such.)
  false: declined (groups over partitioned channels, as DnnlConvFormats() and DnnlConvCreate() do).
*/
bool WinogradPasses(const ConvGeom &g, bool transposed, bool pass[3])
{
  PetscBool force = PETSC_FALSE, set = PETSC_FALSE;
  pass[0] = pass[1] = pass[2] = false;
  if (g.cig > 0) return false; /* declined: the chain's /cpu/blas decides */
  /* oneDNN 2.6 has its Winograd kernel (jit_wino_4x3) for avx512_core and the ISAs above it only (its cpu_isa bits include avx512_core's) */
  static const bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  if (!avx512 || transposed || g.D != 2 || !ConvWinogradApplies(g)) return true;
  (void)PetscOptionsGetBool(NULL, NULL, "-dd_conv_winograd", &force, &set);
  if (set) {
    pass[0] = pass[1] = pass[2] = force ? true : false;
    return true;
  }
  if (g.Ci % 16 || g.Co % 16) return true;
  pass[0] = pass[2] = true;
  pass[1]           = g.out[1] * g.out[2] >= 256;
  return true;
}

/* the first entry of a window of a float32 tensor (blocked tensors: the whole storage, the descriptor holds the offset) */
inline void *WindowPtr(DDTensor t, const PetscInt org[]) { return (char *)t->array + (t->layout.bdim < 0 ? LayoutOffset(t->layout, org) * sizeof(float) : 0); }

/*
  OpenBLAS (Debian's 0.3.21, DYNAMIC_ARCH) picks its kernels from a table of CPU models and falls
  back to its Prescott (SSE3) kernels on models it does not know, e.g. Xeon Emerald Rapids: 3x
  slower for the 64x4096x4096 products of bench/bench_layers. oneDNN's sgemm picks its JIT kernels
  from the CPU's features; OpenBLAS stays the fallback.
*/
struct DnnlGemm {
  static void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const float *A, PetscInt lda, const float *B, PetscInt ldb, float beta, float *C, PetscInt ldc)
  {
    if (dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc) == dnnl_success) return;
    cblas_sgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
  }
};

/* input x output channels from which a plain 1x1 convolution runs oneDNN's GEMM convolution rather than /cpu/blas's GEMM (DnnlConvKernel::SetUp()) */
const PetscInt kPlainGemmOneDnn = 128 * 128;

/*
  A convolution DnnlConvFormats() keeps in plain storage: 1x1, unit stride, one group, not transposed,
  on a plain input; -dd_dnnl_plain_pointwise 0 hands it to oneDNN's blocked kernel as any other
*/
static bool PlainPointwise(const ConvGeom &q, bool transposed, DDTensorFormat xf)
{
  PetscBool on = PETSC_TRUE;
  if (transposed || xf != DD_FORMAT_PLAIN || !q.UnitPointwise()) return false;
  (void)PetscOptionsGetBool(NULL, NULL, "-dd_dnnl_plain_pointwise", &on, NULL);
  return on ? true : false;
}

PetscErrorCode DnnlConvFormats(const ConvGeom &q, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, bool *ok)
{
  PetscFunctionBegin;
  if (q.cig > 0) { /* groups over partitioned channels (local channels that are not whole groups): declined, the chain's /cpu/blas GEMM slices the groups */
    *ok = false;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const DDTensorFormat given = *xf; /* the input's own format (ConvKernelFormats() passes it in) */
  PetscCall(DnnlConv::Preferred(q, transposed, xf, xbs, yf, ybs));
  /*
    A 1x1 unit-stride ungrouped convolution whose input arrives in plain storage (an FNO's pointwise
    path, whose spectral neighbour writes plain) keeps plain storage in and out and runs one GEMM per
    image on the tensors themselves (DnnlConvKernel::SetUp(): /cpu/blas's or oneDNN's GEMM), where the
    blocked kernel would take a conversion of x, and the add that joins y with the plain branch another
    of y, forward and backward.
    Measured on the FNO main job (float32, 1 rank, 3 epochs, -log_view, against -dd_dnnl_plain_pointwise
    0 in turn): its convolutions' forward 0.26-0.30 s against 0.55-0.94 s, backward 0.69-0.74 s against
    0.97-1.46 s, its adds' forward + backward 0.13-0.17 s against 0.56-0.90 s; epochs 0.82x at 1 and 2
    ranks (bench/README.md, "1x1 convolutions on plain inputs").
  */
  if (PlainPointwise(q, transposed, given)) {
    *xf = *yf = DD_FORMAT_PLAIN;
    *xbs = *ybs = 1;
  }
  /*
    Fewer output channels than one channel block (LeNet-5's conv c1: 6 channels in nChw16c blocks):
    the layers after the convolution (activation, pooling) would walk runs of Co entries with
    16 - Co entries of padding between them, so the output is handed on in plain storage (the
    primitive then writes nchw; rank-independent, as q is).
  */
  if (*yf == DD_FORMAT_BLOCKED && q.Co < *ybs) {
    *yf  = DD_FORMAT_PLAIN; /* measured on LeNet-5 (bench/README.md): plain 1.05-1.17 s per 200 steps, channels-last 1.30-1.37 s, 16c blocks 1.36-1.72 s */
    *ybs = 1;
  }
  *ok = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  A convolution, or a transposed convolution whose crops may be negative: oneDNN's deconvolution
  takes crops >= 0 only (its padding_l/padding_r), so it computes the core of the box,
  [max(0, -pl), out + min(0, pr)), and the edge rows no window entry reaches get the bias directly
  (their dy goes to db only); a box no input reaches at all gets the bias only.
*/
class DnnlConvKernel : public ConvKernel
{
public:
  PetscErrorCode SetUp(const ConvKernelSpec &s)
  {
    const ConvTGeom &g = s.g;
    const PetscInt   D = g.D;
    PetscFunctionBegin;
    spec = s;
    bool nocore = false;
    for (PetscInt j = 0; j < 3; j++) {
      cs[j] = 0;
      ce[j] = g.out[j];
      if (s.transposed && j >= 3 - D) {
        if (g.in[j] == 0 || g.pl[j] < 0 || g.pr[j] < 0) edge = true;
        cs[j] = PetscMax(0, -g.pl[j]);
        ce[j] = g.out[j] + PetscMin(0, g.pr[j]);
        if (g.in[j] == 0) nocore = true;
      }
    }
    if (nocore)
      for (PetscInt j = 0; j < 3; j++) cs[j] = ce[j] = 0;
    if (ce[2] <= cs[2] || ce[1] <= cs[1] || ce[0] <= cs[0]) PetscFunctionReturn(PETSC_SUCCESS); /* no core: the bias only */
    ConvTGeom gc = g;
    PetscInt  nx[5] = {gc.N, gc.Ci, 0, 0, 0}, ny[5] = {gc.N, gc.Co, 0, 0, 0};
    void     *h;
    for (PetscInt j = 0; j < 3; j++) {
      gc.out[j] = ce[j] - cs[j];
      gc.pl[j]  = PetscMax(0, gc.pl[j]);
      gc.pr[j]  = PetscMax(0, gc.pr[j]);
    }
    for (PetscInt j = 0; j < spec.y.t->layout.order; j++) corg[j] = spec.y.org[j];
    for (PetscInt j = 0; j < D; j++) {
      nx[2 + j] = gc.in[j + 3 - D];
      ny[2 + j] = gc.out[j + 3 - D];
      corg[spec.y.lead + 2 + j] += cs[j + 3 - D];
    }
    dnnl::memory::desc xm = WindowDesc(s.x.t, s.x.lead, D, s.x.org, nx, &h), ym = WindowDesc(s.y.t, s.y.lead, D, corg, ny, &h), none;
    /*
      oneDNN 2.6 runs its jit kernels on dense buffers only: halo windows are staged. A 1x1 convolution
      kept in plain storage (PlainPointwise()) whose windows are the dense tensors runs on them, without
      the reorders into and out of oneDNN's blocked format: one GEMM per image, y = W x. Below
      kPlainGemmOneDnn input x output channels the chain's /cpu/blas GEMM kernels take it (declined
      here; with -dd_dnnl_eltwise_postop not, so that the fused activation is oneDNN's post-op as asked),
      from there oneDNN's GEMM convolution. Fwd + bwd, float32, 1 thread (bench_layers, conv1x1_*),
      OpenBLAS / oneDNN's GEMM convolution: 24 -> 24 channels 0.52-0.55 / 1.06-1.11 ms, 96 -> 96 7.1-7.8 /
      7.2-8.4 ms, 256 -> 256 28.4-31.1 / 24.7-26.3 ms; the blocked kernel with the reorders 1.08, 12.9
      and 34.4 ms.
    */
    {
      using tag             = dnnl::memory::format_tag;
      const tag  plain      = D == 1 ? tag::ncw : D == 2 ? tag::nchw : tag::ncdhw;
      auto       densePlain = [&](const dnnl::memory::desc &m) { return m == dnnl::memory::desc(m.dims(), dnnl::memory::data_type::f32, plain); };
      const bool onTensors  = PlainPointwise(gc, s.transposed, DD_FORMAT_PLAIN) && densePlain(xm) && densePlain(ym); /* the windows' storage is checked, not assumed */
      if (onTensors && gc.Ci * gc.Co < kPlainGemmOneDnn && !EltwisePostOp()) { /* with -dd_dnnl_eltwise_postop oneDNN's, which can write a fused activation */
        declined = true;
        PetscFunctionReturn(PETSC_SUCCESS);
      }
      k.reset(new DnnlConv);
      k->SetDenseStaging(!onTensors);
    }
    k->SetPostOp(fuseact);
    {
      bool wino[3];
      WinogradPasses(gc, s.transposed, wino);
      k->SetWinograd(wino[0], wino[1], wino[2]);
    }
    if (s.transposed) PetscCall(k->SetUp(gc, xm, ym, xm, ym, s.bias, true, gc.pl, gc.pr));
    else PetscCall(k->SetUp(gc, xm, ym, s.backward ? xm : none, s.backward ? ym : none, s.bias, false));
    name = k->Impl();
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  bool           Declined() const { return declined; }
  const char    *Name() const override { return name.c_str(); }
  bool           OverwritesDx() const override { return !edge && k; }
  /*
    conv + activation fusion, with -dd_dnnl_eltwise_postop only: the forward primitive again, with
    oneDNN's eltwise post-op of relu, tanh or sigmoid. By default the layer applies its own kernel
    in place after the convolution instead: oneDNN's relu post-op is max(v, 0) with the constant as
    the instruction's second operand, which turns a nan into 0 where PyTorch's relu (and ours) keep
    it, and its tanh and sigmoid are approximations within a few ulp of ours, not bitwise (Adam's
    normalized steps amplify such differences in near-zero gradients). Not the transposed
    convolution's edge rows, which get the bias directly.
    identity removes the post-op (the layer takes back a fusion that another of its kernels declined)
  */
  bool FuseActivation(DDActivationType act) override
  {
    if (act != DD_ACT_RELU && act != DD_ACT_TANH && act != DD_ACT_SIGMOID && act != DD_ACT_IDENTITY) return false;
    if (act == fuseact) return true; /* fused already (identity: nothing fused) */
    if (act != DD_ACT_IDENTITY && !EltwisePostOp()) return false; /* the layer applies our relu, tanh, sigmoid after the kernel: bitwise the unfused values, nan kept */
    if (spec.transposed || edge) return false;
    if (!k) { /* no box to write */
      fuseact = act;
      return true;
    }
    const DDActivationType was = fuseact;
    fuseact                    = act;
    if (SetUp(spec) == PETSC_SUCCESS) return true;
    fuseact = was; /* oneDNN declined the post-op: the primitive as it was, the layer applies the activation */
    (void)SetUp(spec);
    return false;
  }
  PetscErrorCode Forward(DDTensor x, DDTensor w, PetscObjectState wstate, DDTensor b, DDTensor y) override
  {
    KernelEvent        e(self, DD_KERNEL_CONV);
    std::vector<float> zero;
    const float       *bp = nullptr;
    PetscFunctionBegin;
    if (spec.bias) {
      if (b) bp = (const float *)b->array;
      else {
        zero.assign(spec.g.Co, 0.f);
        bp = zero.data();
      }
    }
    if (edge) {
      float *yp = (float *)y->array;
      ForEachEdgeEntry(y, [&](PetscInt off, PetscInt ch) { yp[off] = bp ? bp[ch] : 0.f; });
    }
    if (k) {
      PetscCall(k->Forward(WindowPtr(x, spec.x.org), (const float *)w->array, wstate != wfwd, bp, WindowPtr(y, corg)));
      wfwd = wstate;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode BackwardData(DDTensor dy, DDTensor w, PetscObjectState wstate, DDTensor dx) override
  {
    KernelEvent e(self, DD_KERNEL_CONV);
    PetscFunctionBegin;
    if (k) { /* the edge rows do not reach the window */
      PetscCall(k->BackwardData(WindowPtr(dy, corg), (const float *)w->array, wstate != wbwd, WindowPtr(dx, spec.x.org)));
      wbwd = wstate;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode BackwardWeights(DDTensor x, DDTensor dy, DDTensor dw, DDTensor db) override
  {
    KernelEvent        e(self, DD_KERNEL_CONV);
    std::vector<float> scratch;
    float             *dbp = nullptr;
    PetscFunctionBegin;
    if (spec.bias) {
      if (db) dbp = (float *)db->array;
      else {
        scratch.resize(spec.g.Co);
        dbp = scratch.data();
      }
    }
    if (k) PetscCall(k->BackwardWeights(WindowPtr(x, spec.x.org), WindowPtr(dy, corg), (float *)dw->array, dbp)); /* overwrites dw, db */
    else {
      std::memset(dw->array, 0, sizeof(float) * dw->layout.size);
      if (dbp) std::memset(dbp, 0, sizeof(float) * spec.g.Co);
    }
    if (edge && db) {
      const float *g = (const float *)dy->array;
      ForEachEdgeEntry(dy, [&](PetscInt off, PetscInt ch) { dbp[ch] += g[off]; });
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  DDBackend                self = Self(); /* for the log events: looked up once, at creation */
  ConvKernelSpec           spec;
  std::unique_ptr<DnnlConv> k;
  std::string              name = "oneDNN (edge rows only)";
  bool                     edge = false;
  bool                     declined = false; /* SetUp() left the convolution to the chain's next backend */
  DDActivationType         fuseact = DD_ACT_IDENTITY; /* the post-op of the forward primitive (identity: none) */
  PetscInt                 cs[3] = {0, 0, 0}, ce[3] = {1, 1, 1}, corg[DD_MAX_DIM] = {0};
  PetscObjectState         wfwd = -1, wbwd = -1;

  /*
    Calls f(offset, channel) once for every entry of the box of t outside its core [cs, ce): the rows
    no input reaches, as disjoint slabs (along dimension j: outside the core there, inside it along
    the dimensions before j), in any storage format.
  */
  template <class F>
  void ForEachEdgeEntry(DDTensor t, F &&f) const
  {
    const DDLayout &L = t->layout;
    const PetscInt  D = spec.g.D, lead = spec.y.lead, *org = spec.y.org;
    for (PetscInt j = 3 - D; j < 3; j++)
      for (int side = 0; side < 2; side++) {
        PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM];
        for (PetscInt m = 0; m < L.order; m++) {
          a[m] = org[m];
          b[m] = org[m] + 1;
        }
        b[lead]     = org[lead] + spec.g.N;
        b[lead + 1] = org[lead + 1] + spec.g.Co;
        for (PetscInt m = 3 - D; m < 3; m++) {
          PetscInt dim = lead + 2 + m - (3 - D), lo, hi;
          if (m < j) {
            lo = cs[m];
            hi = ce[m];
          } else if (m > j) {
            lo = 0;
            hi = spec.g.out[m];
          } else if (side == 0) {
            lo = 0;
            hi = cs[m];
          } else {
            lo = ce[m];
            hi = spec.g.out[m];
          }
          a[dim] = org[dim] + lo;
          b[dim] = org[dim] + hi;
        }
        ForEachIndex(L.order, a, b, L.perm, [&](const PetscInt *jj) { f(LayoutOffset(L, jj), jj[lead + 1] - org[lead + 1]); });
      }
  }
};

PetscErrorCode DnnlConvCreate(const ConvKernelSpec &spec, std::unique_ptr<ConvKernel> *k)
{
  PetscFunctionBegin;
  if (spec.g.cig > 0) PetscFunctionReturn(PETSC_SUCCESS); /* groups over partitioned channels: declined (*k stays NULL), the chain falls back to /cpu/blas */
  std::unique_ptr<DnnlConvKernel> c(new DnnlConvKernel);
  PetscCall(c->SetUp(spec));
  if (c->Declined()) PetscFunctionReturn(PETSC_SUCCESS); /* a plain 1x1 convolution of few channels: the chain's /cpu/blas GEMM */
  k->reset(c.release());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Pooling: strided formats, or channel blocks of 4, 8, 16 starting a block. oneDNN's
  include-padding average divides by the kernel size; the ceil-mode overhang of the last output
  along a dimension is rescaled by k / (taps inside [-p, n + p)), in y and (on a copy) in dy.
  oneDNN's jit max pool drops a nan in its window (a max with the running maximum as the second
  operand), where PyTorch's max pool (and ours: (v > m) || isnan(v)) returns it and sends its
  gradient there: after oneDNN's forward the input's storage is scanned for a nan, and where it holds
  one the call runs /cpu/blas's loops instead (PoolForwardFast(), exact), whose argmax the next
  backward then takes.
*/
/* whether n floats hold a nan */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target("avx512f"))) static bool AnyNanAvx512(const float *a, PetscInt n)
{
  PetscInt i = 0;
  for (; i + 64 <= n; i += 64) {
    const __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(a + i), _mm512_loadu_ps(a + i), _CMP_UNORD_Q) | _mm512_cmp_ps_mask(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(a + i + 16), _CMP_UNORD_Q) | _mm512_cmp_ps_mask(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(a + i + 32), _CMP_UNORD_Q) | _mm512_cmp_ps_mask(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(a + i + 48), _CMP_UNORD_Q);
    if (m) return true;
  }
  for (; i < n; i++)
    if (a[i] != a[i]) return true;
  return false;
}
#endif
static bool AnyNan(const float *a, PetscInt n)
{
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  if (HaveAvx512()) return AnyNanAvx512(a, n);
#endif
  for (PetscInt i = 0; i < n; i += 256) { /* blocks without an exit per entry, so that the compiler can vectorize them */
    const PetscInt e   = std::min(n, i + 256);
    int            bad = 0;
    for (PetscInt j = i; j < e; j++) bad |= a[j] != a[j];
    if (bad) return true;
  }
  return false;
}
class DnnlPoolKernel : public PoolKernel
{
public:
  PetscErrorCode SetUp(const PoolKernelSpec &s)
  {
    const DDLayout &L = s.x.t->layout;
    void           *h;
    PetscFunctionBegin;
    g = s.g;
    for (PetscInt q = 0; q < 5; q++) {
      xorg[q] = s.x.org[q];
      yorg[q] = s.y.org[q];
    }
    dense = true;
    for (PetscInt q = 0; q < 2 + s.D; q++)
      if (s.x.org[q] != 0 || s.xn[q] != L.alloc[q]) dense = false;
    for (PetscInt jj = 3 - s.D; jj < 3; jj++) {
      corr[jj] = 1;
      if (s.type == DD_POOL_AVG && s.countpad) { /* the ceil-mode overhang of the last output */
        const PetscInt st = (s.oend[jj] - 1) * s.s[jj] - s.p[jj];
        if (s.oend[jj] > 0 && st + s.k[jj] > s.n[jj] + s.p[jj]) {
          corr[jj] = (double)s.k[jj] / (double)(s.n[jj] + s.p[jj] - st);
          hascorr  = true;
        }
      }
    }
    if (hascorr || s.type == DD_POOL_MAX) BoxOffsetsBuild(s.y.t->layout, s.D, s.y.org, s.yn, &yo);
    if (s.type == DD_POOL_MAX) BoxOffsetsBuild(L, s.D, s.x.org, s.xn, &xo); /* the nan fallback's loops */
    dnnl::algorithm alg = s.type == DD_POOL_MAX ? dnnl::algorithm::pooling_max : (s.countpad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding);
    dnnl::memory::desc xm = WindowDesc(s.x.t, 0, s.D, s.x.org, s.xn, &h), ym = WindowDesc(s.y.t, 0, s.D, s.y.org, s.yn, &h);
    PetscCall(k.SetUp(s.D, s.k, s.s, s.d, s.padl, s.padr, alg, xm, dense, ym));
    name = k.Impl();
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* whether oneDNN has a jit kernel here (not its "ref" for 16c blocks without AVX-512, nor its "simple_nchw" for plain storage) */
  bool Jit() const { return name.compare(0, 3, "jit") == 0; }
  const char    *Name() const override { return name.c_str(); }
  bool           OverwritesDx() const override { return dense; }
  bool           ModifiesDy() const override { return hascorr; }
  PetscErrorCode Forward(DDTensor x, DDTensor y, bool training) override
  {
    KernelEvent e(self, DD_KERNEL_POOL);
    PetscFunctionBegin;
    PetscCall(k.Forward(WindowPtr(x, xorg), WindowPtr(y, yorg), training));
    if (hascorr) ApplyCorrection((float *)y->array);
    fellback = false;
    if (g.max && AnyNan((const float *)x->array, x->layout.size)) { /* the whole local storage: the window and more (a nan outside it costs the fallback, not a wrong value) */
      if (training && argmax.empty()) PetscCallCXX(argmax.resize((size_t)(g.N * g.C * g.out[0] * g.out[1] * g.out[2])));
      PoolForwardFast<float>(g, (const float *)x->array, xo, (float *)y->array, yo, training ? argmax.data() : nullptr);
      fellback = training;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Backward(DDTensor dy, DDTensor dx) override
  {
    KernelEvent e(self, DD_KERNEL_POOL);
    PetscFunctionBegin;
    if (fellback) { /* the loops' argmax of the last forward; they add into dx, which the layer zeroed only where this kernel does not overwrite it */
      if (dense) PetscCall(PetscArrayzero((float *)dx->array, dx->layout.size));
      PoolBackwardFast<float>(g, (const float *)dy->array, yo, (float *)dx->array, xo, argmax.data());
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    if (hascorr) ApplyCorrection((float *)dy->array);
    PetscCall(k.Backward(WindowPtr(dy, yorg), WindowPtr(dx, xorg)));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  DDBackend   self = Self(); /* for the log events: looked up once, at creation */
  DnnlPool    k;
  std::string name;
  PoolGeom    g;
  BoxOffsets yo, xo;
  PetscInt   xorg[5] = {0}, yorg[5] = {0};
  double     corr[3] = {1, 1, 1};
  bool       dense = false, hascorr = false;
  bool       fellback = false;         /* the last forward (training) ran the loops: a nan in the input */
  std::vector<PetscInt> argmax;        /* their argmax, made at the first such forward */

  /* multiplies the last local output along each dimension with an overhang by corr */
  void ApplyCorrection(float *y) const
  {
    for (PetscInt jj = 0; jj < 3; jj++) {
      if (corr[jj] == 1) continue;
      const float f     = (float)corr[jj];
      PetscInt    lo[3] = {0, 0, 0}, hi[3] = {g.out[0], g.out[1], g.out[2]};
      lo[jj]            = g.out[jj] - 1;
      for (PetscInt n = 0; n < g.N; n++)
        for (PetscInt ch = 0; ch < g.C; ch++)
          for (PetscInt i0 = lo[0]; i0 < hi[0]; i0++)
            for (PetscInt i1 = lo[1]; i1 < hi[1]; i1++)
              for (PetscInt i2 = lo[2]; i2 < hi[2]; i2++) y[yo.t[0][n] + yo.t[1][ch] + yo.t[2][i0] + yo.t[3][i1] + yo.t[4][i2]] *= f;
    }
  }
};

PetscErrorCode DnnlPoolCreate(const PoolKernelSpec &spec, std::unique_ptr<PoolKernel> *k)
{
  const DDLayout &L = spec.x.t->layout, &Ly = spec.y.t->layout;
  PetscFunctionBegin;
  if (spec.divisor > 0) PetscFunctionReturn(PETSC_SUCCESS); /* oneDNN has no divisor_override: decline, the loops take it */
  if (!(L.bdim < 0 || (L.bdim == 1 && (L.bs == 4 || L.bs == 8 || L.bs == 16) && spec.x.org[1] % L.bs == 0 && Ly.bdim == 1))) PetscFunctionReturn(PETSC_SUCCESS);
  /*
    Declined (the chain's /cpu/blas loops take the layer) where oneDNN is not the better kernel: an
    output with a halo its consumer grew (the main job's pools, which feed 3x3 convolutions), which
    oneDNN would write through a staging buffer, and layouts it has no jit kernel for. Measured with
    -log_view (float32, 1 rank): the main job's two max pools 0.53 ms against 1.1 ms forward +
    backward per training step; LeNet-5's s2 (plain, after c1's 6 channels) forward 0.10 ms against
    0.57 ms per step, its whole training loop 13-20 % shorter.
  */
  if (Ly.size != Ly.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
  std::unique_ptr<DnnlPoolKernel> p(new DnnlPoolKernel);
  PetscCall(p->SetUp(spec));
  if (!p->Jit()) PetscFunctionReturn(PETSC_SUCCESS);
  k->reset(p.release());
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace

PetscErrorCode DDBackendCreate_Dnnl(void)
DD_CXX_TRY
{
  _p_DDBackend b{};

  PetscFunctionBegin;
  PetscCall(PetscStrncpy(b.name, "/cpu/dnnl", sizeof(b.name)));
  PetscCall(PetscStrncpy(b.description, "oneDNN (float32)", sizeof(b.description)));
  PetscCall(PetscStrncpy(b.fallback, "/cpu/blas", sizeof(b.fallback)));
  b.memtype            = DD_MEMTYPE_HOST;
  b.mem                = HostMemOps;
  b.vec = HostVecOps;
  b.f32.convformats    = DnnlConvFormats;
  b.f32.convcreate     = DnnlConvCreate;
  b.f32.convwinograd   = WinogradPasses;
  b.f32.poolcreate     = DnnlPoolCreate;
  b.f32.affinefwd      = AffineForwardGemm<float, DnnlGemm>;
  b.f32.affinebwddata  = AffineBackwardDataGemm<float, DnnlGemm>;
  b.f32.affinebwdweights = AffineBackwardWeightsGemm<float, DnnlGemm>;
  PetscCall(DDBackendRegister_Private(&b));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
#endif
