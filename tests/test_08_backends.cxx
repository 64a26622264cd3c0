/*
  The backend tier: every layer type with a local kernel runs on every backend of this build, in
  float32 and float64, on P ranks, and equals the reference loops (/cpu/ref) on one rank; the
  registry's choices, fallbacks and errors.
*/
#include "layertest.hpp"
#include <ddnn/private/ddbackendimpl.h>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace ddtest;

namespace
{
std::vector<const char *> Backends()
{
  std::vector<const char *> b = {"/cpu/ref", "/cpu/blas"};
#if DDNN_WITH_DNNL
  b.push_back("/cpu/dnnl");
#endif
  return b;
}

/* a partition of P workers over the spatial dimensions of an order-d tensor (unbalanced shapes below) */
std::vector<PetscInt> SpatialPartition(size_t order)
{
  std::vector<PetscInt> p(order, 1);
  int                   W = Size();
  if (order == 4) {
    std::vector<std::vector<PetscInt>> f;
    Factorizations(W, 2, f);
    p[2] = f[f.size() / 2][0];
    p[3] = f[f.size() / 2][1];
  } else p[order - 1] = W;
  return p;
}

/* layer `configure` on backend b on all ranks against /cpu/ref on one rank */
void CheckBackends(const std::function<void(DDLayer)> &configure, InputSpec in, const std::string &what)
{
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    InputSpec ser = Serial(in);
    RunResult ref = RunLayer(
      [&](DDLayer l) {
        configure(l);
        DDT(DDLayerSetBackend(l, "/cpu/ref"));
      },
      {ser}, dt, 5);
    for (const char *b : Backends()) {
      RunResult r = RunLayer(
        [&](DDLayer l) {
          configure(l);
          DDT(DDLayerSetBackend(l, b));
        },
        {in}, dt, 5);
      ExpectSameRun(r, ref, dt == DD_FLOAT64 ? 1e-12 : 2e-5, what + " on " + b + " in " + DDDataTypes[dt]);
    }
  }
}

InputSpec Input(std::vector<PetscInt> shape, DDTensorFormat fmt = DD_FORMAT_PLAIN)
{
  InputSpec s;
  s.shape  = shape;
  s.pshape = SpatialPartition(shape.size());
  s.fmt    = fmt;
  return s;
}
} // namespace

TEST(Backends, Conv)
{
  struct Case {
    std::vector<PetscInt> shape, k, s, p, d;
    PetscInt              co;
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{{2, 3, 13, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, "2-D 3x3"},
                                         {{1, 4, 15, 12}, {5, 3}, {2, 1}, {2, 0}, {1, 2}, 3, "2-D strided dilated"},
                                         {{2, 2, 7, 6, 9}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, 3, "3-D"},
                                         {{3, 2, 17}, {4}, {3}, {1}, {1}, 5, "1-D"}}) {
    const PetscInt D = (PetscInt)c.k.size();
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST})
      CheckBackends(
        [&](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERCONV));
          DDT(DDLayerConvSetOutputChannels(l, c.co));
          DDT(DDLayerConvSetKernel(l, D, c.k.data()));
          DDT(DDLayerConvSetStride(l, D, c.s.data()));
          DDT(DDLayerConvSetPadding(l, D, c.p.data()));
          DDT(DDLayerConvSetDilation(l, D, c.d.data()));
        },
        Input(c.shape, fmt), std::string("conv ") + c.what);
  }
}

/* grouped (depthwise) convolutions and asymmetric / 'same' padding: every backend (oneDNN's grouped convolution in float32) against the reference loops */
TEST(Backends, ConvGroupsAndAsymmetricPadding)
{
  struct Case {
    std::vector<PetscInt> shape, k, s, pb, pa, d;
    PetscInt              co, groups;
    DDConvPaddingType     type;
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{{2, 6, 13, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 9, 3, DD_CONV_PADDING_EXPLICIT, "2-D groups 3"},
                                         {{2, 4, 13, 11}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 2}, 8, 4, DD_CONV_PADDING_EXPLICIT, "2-D depthwise x2, strided dilated"},
                                         {{1, 3, 15, 12}, {4, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 2}, 4, 1, DD_CONV_PADDING_SAME, "2-D 'same' even kernel"},
                                         {{2, 3, 13, 11}, {3, 3}, {1, 2}, {1, 0}, {2, 1}, {1, 1}, 4, 1, DD_CONV_PADDING_EXPLICIT, "2-D asymmetric padding"},
                                         {{2, 4, 7, 6, 9}, {3, 3, 3}, {1, 2, 1}, {0, 1, 2}, {2, 1, 0}, {1, 1, 1}, 4, 4, DD_CONV_PADDING_EXPLICIT, "3-D depthwise asymmetric"},
                                         {{3, 6, 17}, {4}, {1}, {0}, {0}, {1}, 3, 3, DD_CONV_PADDING_SAME, "1-D 'same' groups 3"}}) {
    const PetscInt D = (PetscInt)c.k.size();
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST})
      CheckBackends(
        [&](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERCONV));
          DDT(DDLayerConvSetOutputChannels(l, c.co));
          DDT(DDLayerConvSetGroups(l, c.groups));
          DDT(DDLayerConvSetKernel(l, D, c.k.data()));
          DDT(DDLayerConvSetStride(l, D, c.s.data()));
          DDT(DDLayerConvSetPaddingBeforeAfter(l, D, c.pb.data(), c.pa.data()));
          DDT(DDLayerConvSetPaddingType(l, c.type));
          DDT(DDLayerConvSetDilation(l, D, c.d.data()));
        },
        Input(c.shape, fmt), std::string("conv ") + c.what);
  }
}

TEST(Backends, ConvTranspose)
{
  struct Case {
    std::vector<PetscInt> shape, k, s, p, op;
    PetscInt              co;
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{{2, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, 4, "2-D stride 2, output padding"},
                                         {{1, 2, 5, 6}, {2, 2}, {3, 3}, {0, 0}, {0, 0}, 3, "2-D gaps (s > k)"},
                                         {{1, 2, 4, 3, 5}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {0, 1, 0}, 2, "3-D"}}) {
    const PetscInt D = (PetscInt)c.k.size();
    CheckBackends(
      [&](DDLayer l) {
        DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
        DDT(DDLayerConvSetOutputChannels(l, c.co));
        DDT(DDLayerConvSetKernel(l, D, c.k.data()));
        DDT(DDLayerConvSetStride(l, D, c.s.data()));
        DDT(DDLayerConvSetPadding(l, D, c.p.data()));
        DDT(DDLayerConvSetOutputPadding(l, D, c.op.data()));
      },
      Input(c.shape), std::string("convtranspose ") + c.what);
  }
}

TEST(Backends, ConvTransposeGroups)
{
  struct Case {
    std::vector<PetscInt> shape, k, s, p, op;
    PetscInt              co, groups;
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{{2, 4, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, 6, 2, "2-D groups 2, stride 2, output padding"},
                                         {{1, 4, 5, 6}, {2, 2}, {3, 3}, {0, 0}, {0, 0}, 4, 4, "2-D depthwise gaps (s > k)"},
                                         {{1, 3, 4, 3, 5}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {0, 1, 0}, 6, 3, "3-D groups 3"}}) {
    const PetscInt D = (PetscInt)c.k.size();
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST})
      CheckBackends(
        [&](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
          DDT(DDLayerConvSetOutputChannels(l, c.co));
          DDT(DDLayerConvSetGroups(l, c.groups));
          DDT(DDLayerConvSetKernel(l, D, c.k.data()));
          DDT(DDLayerConvSetStride(l, D, c.s.data()));
          DDT(DDLayerConvSetPadding(l, D, c.p.data()));
          DDT(DDLayerConvSetOutputPadding(l, D, c.op.data()));
        },
        Input(c.shape, fmt), std::string("convtranspose ") + c.what);
  }
}

TEST(Backends, Pool)
{
  for (DDPoolType t : {DD_POOL_MAX, DD_POOL_AVG})
    for (PetscBool ceil : {PETSC_FALSE, PETSC_TRUE})
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST}) {
        const PetscInt k[2] = {3, 2}, s[2] = {2, 2}, p[2] = {1, 0};
        CheckBackends(
          [&](DDLayer l) {
            DDT(DDLayerSetType(l, DDLAYERPOOL));
            DDT(DDLayerPoolSetType(l, t));
            DDT(DDLayerPoolSetKernel(l, 2, k));
            DDT(DDLayerPoolSetStride(l, 2, s));
            DDT(DDLayerPoolSetPadding(l, 2, p));
            DDT(DDLayerPoolSetCeilMode(l, ceil));
          },
          Input({2, 3, 14, 11}, fmt), std::string("pool ") + DDPoolTypes[t] + (ceil ? " ceil" : ""));
      }
}

TEST(Backends, Affine)
{
  InputSpec in;
  in.shape  = {7, 13};
  in.pshape = {1, Size()};
  CheckBackends(
    [&](DDLayer l) {
      DDT(DDLayerSetType(l, DDLAYERAFFINE));
      DDT(DDLayerAffineSetOutputFeatures(l, 9));
    },
    in, "affine");
}

TEST(Backends, UpsampleAndActivation)
{
  CheckBackends(
    [&](DDLayer l) {
      DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
      DDT(DDLayerUpsampleSetMode(l, DD_UPSAMPLE_LINEAR));
      const PetscInt sc[1] = {2};
      DDT(DDLayerUpsampleSetScale(l, 1, sc));
    },
    Input({2, 3, 9, 7}), "bilinear upsampling");
  for (DDActivationType a : {DD_ACT_RELU, DD_ACT_GELU})
    CheckBackends(
      [&](DDLayer l) {
        DDT(DDLayerSetType(l, DDLAYERACTIVATION));
        DDT(DDLayerActivationSetType(l, a));
      },
      Input({2, 3, 9, 7}), std::string("activation ") + DDActivationTypes[a]);
}

TEST(Backends, Registry)
{
  DDBackend   b;
  const char *name, *dflt;
  /* names with or without the leading slash */
  DDT(DDBackendGet("cpu/ref", &b));
  DDT(DDBackendGetName(b, &name));
  EXPECT_STREQ(name, "/cpu/ref");
  DDT(DDBackendGetDefault(&dflt));
  EXPECT_STREQ(dflt, DDNN_WITH_DNNL ? "/cpu/dnnl" : "/cpu/blas");
  /* fallback: /cpu/ref has every float64 kernel kind; /cpu/blas finds pooling along its chain */
  DDT(DDBackendGet("/cpu/blas", &b));
  DDBackend which;
  decltype(ddnn::KernelTable<double>::upsamplefwd) up;
  DDT(ddnn::DDBackendFind<double>(b, &ddnn::KernelTable<double>::upsamplefwd, ddnn::DD_KERNEL_UPSAMPLE, &up, &which));
  EXPECT_NE(up, nullptr);
  /* errors: an unknown name lists the backends; one this build lacks names the CMake option */
  std::string msg;
  EXPECT_NE(Catch([&]() { return DDBackendGet("/cpu/nope", &b); }, &msg), 0);
  EXPECT_NE(msg.find("/cpu/ref"), std::string::npos) << msg;
  /* without CUDA the error names the build option; a CUDA build without a device says so (test_13_gpu) */
  const char *nogpu = DDNN_WITH_CUDA ? "no CUDA device" : "DDNN_WITH_CUDA";
  PetscErrorCode gerr = Catch([&]() { return DDBackendSetDefault("/gpu/cuda"); }, &msg);
  if (gerr || !DDNN_WITH_CUDA) {
    EXPECT_NE(gerr, 0);
    EXPECT_NE(msg.find(nogpu), std::string::npos) << msg;
  } else DDT(DDBackendSetDefault(dflt)); /* a CUDA device is present */
  /* per layer from its options prefix, shown by DDLayerView, and an error after set-up */
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetOptionsPrefix(l, "bk_"));
  DDT(PetscOptionsSetValue(NULL, "-bk_layer_type", "activation"));
  DDT(PetscOptionsSetValue(NULL, "-bk_dd_backend", "cpu/blas"));
  DDT(DDLayerSetFromOptions(l));
  DDT(PetscOptionsClearValue(NULL, "-bk_layer_type"));
  DDT(PetscOptionsClearValue(NULL, "-bk_dd_backend"));
  DDT(DDLayerGetBackend(l, &name));
  EXPECT_STREQ(name, "/cpu/blas");
  DDT(DDLayerSetBackend(l, NULL));
  DDT(DDLayerGetBackend(l, &name));
  EXPECT_STREQ(name, dflt);
  DDT(PetscOptionsSetValue(NULL, "-bk_dd_backend", "/gpu/cuda"));
  gerr = Catch([&]() { return DDLayerSetFromOptions(l); }, &msg);
  DDT(PetscOptionsClearValue(NULL, "-bk_dd_backend"));
  if (gerr || !DDNN_WITH_CUDA) {
    EXPECT_NE(gerr, 0);
    EXPECT_NE(msg.find(nogpu), std::string::npos) << msg;
  }
  DDT(DDLayerDestroy(&l));
}

#if DDNN_WITH_DNNL
/* the -layer_view text of a layer `configure` set up on /cpu/dnnl on a float32 input of spec in (this rank's) */
std::string DnnlLayerViewText(const InputSpec &in, const std::function<void(DDLayer)> &configure, DDTensorFormat *yformat = nullptr)
{
  DDTensor x = MakeInput(in, DD_FLOAT32, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  configure(l);
  DDT(DDLayerSetBackend(l, "/cpu/dnnl"));
  DDT(DDLayerSetUp(l, x));
  std::string text = LayerViewText(l);
  if (yformat) {
    DDTensor y;
    DDT(DDLayerGetOutput(l, &y));
    *yformat = y->format;
  }
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  return text;
}

/*
  Grouped and depthwise convolutions and transposed convolutions on /cpu/dnnl in float32 run
  oneDNN's kernels (not the fallback's GEMM or loops), and equal /cpu/ref in float32 and float64
  (float64 runs the fallback)
*/
TEST(Backends, ConvGroupsRunOnDnnl)
{
  struct Case {
    bool                  transposed;
    std::vector<PetscInt> shape, k;
    PetscInt              co, groups, s;
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{false, {2, 6, 11, 13}, {3, 3}, 9, 3, 1, "conv groups 3"},
                                         {false, {2, 8, 11, 13}, {3, 3}, 8, 8, 2, "conv depthwise, stride 2"},
                                         {false, {2, 4, 9, 7, 6}, {3, 3, 3}, 8, 4, 1, "conv 3-D depthwise x2"},
                                         {false, {3, 6, 17}, {5}, 6, 2, 1, "conv 1-D groups 2"},
                                         {true, {2, 6, 7, 6}, {3, 3}, 9, 3, 2, "convtranspose groups 3, stride 2"},
                                         {true, {2, 8, 7, 6}, {3, 3}, 8, 8, 1, "convtranspose depthwise"},
                                         {true, {1, 4, 4, 3, 5}, {3, 3, 3}, 8, 4, 2, "convtranspose 3-D depthwise x2"},
                                         {true, {2, 6, 9}, {4}, 4, 2, 2, "convtranspose 1-D groups 2"}}) {
    const PetscInt D = (PetscInt)c.k.size();
    std::vector<PetscInt> st(D, c.s), pd(D, 1);
    auto configure = [&](DDLayer l) {
      DDT(DDLayerSetType(l, c.transposed ? DDLAYERCONVTRANSPOSE : DDLAYERCONV));
      DDT(DDLayerConvSetOutputChannels(l, c.co));
      DDT(DDLayerConvSetGroups(l, c.groups));
      DDT(DDLayerConvSetKernel(l, D, c.k.data()));
      DDT(DDLayerConvSetStride(l, D, st.data()));
      DDT(DDLayerConvSetPadding(l, D, pd.data()));
    };
    /* the kernel that runs (rank 0's; every rank has a spatial piece of the same kind) */
    InputSpec   in   = Input(c.shape);
    std::string text = DnnlLayerViewText(in, configure);
    if (Rank() == 0) printf("[ %s on /cpu/dnnl, float32 ] %s", c.what, text.c_str());
    EXPECT_NE(text.find("kernels: "), std::string::npos) << c.what << ": " << text;
    EXPECT_EQ(text.find("OpenBLAS"), std::string::npos) << c.what << ": " << text;
    EXPECT_EQ(text.find("reference loops"), std::string::npos) << c.what << ": " << text;
    EXPECT_EQ(text.find("none (no local output)"), std::string::npos) << c.what << ": " << text;
    CheckBackends(configure, in, c.what);
  }
}
#endif

#if DDNN_WITH_DNNL
/* which passes of a /cpu/dnnl convolution run oneDNN's Winograd kernel, read from its kernel name ("<forward>[; backward data <b>, backward weights <w>]") */
std::vector<bool> WinogradPassesOf(const std::string &text)
{
  const size_t k = text.find("kernels: ");
  if (k == std::string::npos) return {};
  std::string n = text.substr(k + 9, text.find('\n', k) - k - 9), f = n, b = n, w = n;
  const size_t bd = n.find("; backward data "), bw = n.find(", backward weights ");
  if (bd != std::string::npos && bw != std::string::npos) {
    f = n.substr(0, bd);
    b = n.substr(bd, bw - bd);
    w = n.substr(bw);
  }
  auto wino = [](const std::string &s) { return s.find("wino") != std::string::npos; };
  return {wino(f), wino(b), wino(w)};
}

/*
  oneDNN's Winograd convolution (/cpu/dnnl, float32; its jit_wino_4x3 kernel needs AVX-512): the
  default choice per pass (forward and backward weights on whole 16-channel blocks, backward data
  there too where the local output has at least 256 positions, none off whole blocks), every pass with
  -dd_conv_winograd 1, none with 0; each setting equals /cpu/ref on one rank in float32 (and
  float64, which runs the fallback's kernels) on unbalanced spatial pieces, parameter gradients
  included (the Winograd backward weights writes through an aligned buffer where the gradient
  tensor is not on a 64-byte boundary)
*/
TEST(Backends, ConvWinogradOnDnnl)
{
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (!avx512 && Rank() == 0) printf("[ PART SKIPPED ] no AVX-512 on this CPU: oneDNN has no Winograd kernel here, every pass must stay direct (checked), the Winograd passes are not run\n");
  struct Case {
    std::vector<PetscInt> shape;
    PetscInt              co;
    const char           *opt; /* -dd_conv_winograd (NULL: unset) */
    std::vector<bool>     wino;
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{{2, 16, 13, 11}, 16, nullptr, {true, false, true}, "16 -> 16, default (under 256 output positions: direct backward data)"},
                                         {{1, 16, 40, 36}, 16, nullptr, {true, true, true}, "16 -> 16, default (every piece at least 256 output positions at 1-4 ranks)"},
                                         {{2, 48, 12, 10}, 16, nullptr, {true, false, true}, "48 -> 16, default"},
                                         {{1, 16, 9, 14}, 32, nullptr, {true, false, true}, "16 -> 32, default"},
                                         {{2, 8, 13, 11}, 16, nullptr, {false, false, false}, "8 -> 16 (part of a block), default"},
                                         {{2, 16, 13, 11}, 16, "1", {true, true, true}, "16 -> 16, -dd_conv_winograd 1"},
                                         {{2, 48, 12, 10}, 16, "0", {false, false, false}, "48 -> 16, -dd_conv_winograd 0"}}) {
    if (c.opt) DDT(PetscOptionsSetValue(NULL, "-dd_conv_winograd", c.opt));
    const PetscInt k[2] = {3, 3}, pd[2] = {1, 1};
    auto configure = [&](DDLayer l) {
      DDT(DDLayerSetType(l, DDLAYERCONV));
      DDT(DDLayerConvSetOutputChannels(l, c.co));
      DDT(DDLayerConvSetKernel(l, 2, k));
      DDT(DDLayerConvSetPadding(l, 2, pd));
    };
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST}) {
      InputSpec in = Input(c.shape, fmt);
      in.lx        = {{}, {}, {}, {}};
      if (in.pshape[2] > 1) { /* unbalanced rows: the first piece the largest, the second empty, the others one row each */
        in.lx[2].assign(in.pshape[2], 1);
        in.lx[2][1] = 0;
        in.lx[2][0] = c.shape[2] - (in.pshape[2] - 2);
      }
      const std::string text = DnnlLayerViewText(in, configure);
      const std::string what = std::string("conv ") + c.what + (fmt == DD_FORMAT_PLAIN ? ", plain input" : ", channels-last input");
      const std::vector<bool> want = avx512 ? c.wino : std::vector<bool>{false, false, false};
      EXPECT_EQ(WinogradPassesOf(text), want) << what << " on rank " << Rank() << ": " << text;
      CheckBackends(configure, in, what);
    }
    if (c.opt) DDT(PetscOptionsClearValue(NULL, "-dd_conv_winograd"));
  }
}
#endif

#if DDNN_WITH_DNNL
/*
  1x1 unit-stride convolutions on a plain input (an FNO's pointwise path) keep plain storage on
  /cpu/dnnl: the output is plain, and the kernel runs on the tensors themselves, the chain's /cpu/blas
  GEMM below 128 x 128 channels and oneDNN's GEMM convolution from there, without staging; a
  channels-last input, a stride, or -dd_dnnl_plain_pointwise 0 keep oneDNN's blocked kernel. Each
  equals /cpu/ref on one rank in float32 and float64, on unbalanced spatial pieces with an empty one.
*/
TEST(Backends, ConvPointwisePlainOnDnnl)
{
  struct Case {
    std::vector<PetscInt> shape;
    PetscInt              co, s;
    DDTensorFormat        fmt;
    const char           *opt;    /* -dd_dnnl_plain_pointwise (NULL: unset) */
    bool                  plain;  /* the output stays plain */
    const char           *kernel; /* in the kernel's name */
    const char           *what;
  };
  for (const Case &c : std::vector<Case>{{{2, 24, 13, 11}, 24, 1, DD_FORMAT_PLAIN, nullptr, true, "OpenBLAS", "2-D 24 -> 24"},
                                         {{2, 128, 5, 6}, 130, 1, DD_FORMAT_PLAIN, nullptr, true, "gemm", "2-D 128 -> 130"},
                                         {{3, 5, 17}, 7, 1, DD_FORMAT_PLAIN, nullptr, true, "OpenBLAS", "1-D 5 -> 7"},
                                         {{2, 4, 5, 6, 7}, 6, 1, DD_FORMAT_PLAIN, nullptr, true, "OpenBLAS", "3-D 4 -> 6"},
                                         {{2, 24, 13, 11}, 24, 1, DD_FORMAT_CHANNELS_LAST, nullptr, false, "jit", "2-D 24 -> 24, channels-last input"},
                                         {{2, 24, 13, 11}, 24, 2, DD_FORMAT_PLAIN, nullptr, false, "jit", "2-D 24 -> 24, stride 2"},
                                         {{2, 24, 13, 11}, 24, 1, DD_FORMAT_PLAIN, "0", false, "jit", "2-D 24 -> 24, -dd_dnnl_plain_pointwise 0"}}) {
    if (c.opt) DDT(PetscOptionsSetValue(NULL, "-dd_dnnl_plain_pointwise", c.opt));
    const PetscInt D = (PetscInt)c.shape.size() - 2;
    const std::vector<PetscInt> k(D, 1), st(D, c.s);
    auto configure = [&](DDLayer l) {
      DDT(DDLayerSetType(l, DDLAYERCONV));
      DDT(DDLayerConvSetOutputChannels(l, c.co));
      DDT(DDLayerConvSetKernel(l, D, k.data()));
      DDT(DDLayerConvSetStride(l, D, st.data()));
    };
    DDTensorFormat    yf;
    const std::string text = DnnlLayerViewText(Input(c.shape, c.fmt), configure, &yf);
    if (Rank() == 0) printf("[ conv 1x1 %s on /cpu/dnnl, float32 ] output %s, %s", c.what, DDTensorFormats[yf], text.c_str());
    EXPECT_EQ(yf == DD_FORMAT_PLAIN, c.plain) << c.what << ": output " << DDTensorFormats[yf];
    const size_t kn = text.find("kernels: ");
    ASSERT_NE(kn, std::string::npos) << c.what << ": " << text;
    const std::string name = text.substr(kn, text.find('\n', kn) - kn);
    EXPECT_NE(name.find(c.kernel), std::string::npos) << c.what << ": " << name;
    if (c.plain) EXPECT_EQ(name.find("staging"), std::string::npos) << c.what << ": " << name; /* on the tensors themselves */
    InputSpec in = Input(c.shape, c.fmt);
    const PetscInt last = (PetscInt)c.shape.size() - 1;
    if (in.pshape[last] > 1) { /* unbalanced along the last dimension: the first piece the largest, the second empty, the others one entry each */
      in.lx.assign(c.shape.size(), {});
      in.lx[last].assign(in.pshape[last], 1);
      in.lx[last][1] = 0;
      in.lx[last][0] = c.shape[last] - (in.pshape[last] - 2);
    }
    CheckBackends(configure, in, std::string("conv 1x1 ") + c.what);
    if (c.opt) DDT(PetscOptionsClearValue(NULL, "-dd_dnnl_plain_pointwise"));
  }
}

/* -dd_dnnl_plain_pointwise 0 on one rank only: set-up fails on every rank, naming the option and both ranks' formats */
TEST(Backends, ConvPointwiseOptionDiffersBetweenRanks)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  if (Rank() == 1) DDT(PetscOptionsSetValue(NULL, "-dd_dnnl_plain_pointwise", "0"));
  const PetscInt k[2] = {1, 1};
  DDTensor       x = MakeInput(Input({2, 24, 13, 11}), DD_FLOAT32, 1);
  DDLayer        l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONV));
  DDT(DDLayerConvSetOutputChannels(l, 24));
  DDT(DDLayerConvSetKernel(l, 2, k));
  DDT(DDLayerSetBackend(l, "/cpu/dnnl"));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_INCOMP, "-dd_dnnl_plain_pointwise) differs between ranks");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  if (Rank() == 1) DDT(PetscOptionsClearValue(NULL, "-dd_dnnl_plain_pointwise"));
}
#endif

/*
  Grouped and depthwise convolutions and transposed convolutions over channel partitions (input
  pieces that cut groups, unbalanced with an empty one; or output-channel workers): every backend
  (oneDNN declines local channels that are not whole groups: its chain's GEMM) against the
  reference loops on one rank
*/
TEST(Backends, ConvGroupsOverChannelPartitions)
{
  const int W = Size();
  for (int transposed = 0; transposed < 2; transposed++)
    for (PetscInt G : {3, 6})
      for (int split = 0; split < 2; split++) {
        InputSpec in;
        PetscInt  pco = 1;
        in.shape      = {2, 6, 7, 8};
        if (!split) { /* Pci = W, pieces 1, 3, 0, 2, ... */
          in.pshape = {1, W, 1, 1};
          std::vector<PetscInt> lc(W, 0);
          const PetscInt        wt[4] = {1, 3, 0, 2};
          PetscInt              got   = 0;
          for (int i = 0; i < W - 1; i++) got += (lc[i] = std::min<PetscInt>(wt[i % 4], 6 - got));
          lc[W - 1] = 6 - got;
          in.lx     = {{}, lc};
        } else { /* Pco = W, x on rank 0 */
          in.pshape = {1, 1, 1, 1};
          in.ranks  = {0};
          pco       = W;
        }
        const PetscInt co = G == 3 ? 9 : 6;
        CheckBackends(
          [&](DDLayer l) {
            const PetscInt k = 3, s = transposed ? 2 : 1, p = 1;
            DDT(DDLayerSetType(l, transposed ? DDLAYERCONVTRANSPOSE : DDLAYERCONV));
            DDT(DDLayerConvSetOutputChannels(l, co));
            DDT(DDLayerConvSetGroups(l, G));
            DDT(DDLayerConvSetKernel(l, 1, &k));
            DDT(DDLayerConvSetStride(l, 1, &s));
            DDT(DDLayerConvSetPadding(l, 1, &p));
            DDT(DDLayerConvSetChannelWorkers(l, pco));
          },
          in, std::string(transposed ? "convtranspose" : "conv") + " groups " + std::to_string(G) + (split ? " over Pco" : " over Pci"));
      }
}
