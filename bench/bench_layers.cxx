/*
  bench_layers: ddnn's layers (float32: oneDNN, oneDNN sgemm, the norm kernels) against the
  reference loops, oneDNN alone and PyTorch, measured in the same run (issue 4, "Performance").
  See bench/README.md for how to run it and the results.

    ./bench_layers [-threads T] [-reps 10] [-min_time 1] [-ref_reps 3] [-cases a,b,...]
                   [-variants plain,kept,nhwc] [-dtype float32|float64] [-torch 0|1] [-ref 0|1] [-copies 0|1] [-log_view]
    OMP_NUM_THREADS=1 mpiexec -n 2 ./bench_layers [-reps 10]          (the 2-rank part)

  Times are medians of at least -reps repetitions of fwd+bwd (Forward, then Backward with the
  input gradient; parameter gradients accumulate), more for fast cases (up to -min_time seconds
  of them), after two warm-up calls; both wall time and process CPU time are printed (with one
  thread the CPU time leaves out the time spent waiting for a core on a shared machine).

  1 rank, per case:
    ddnn   the layer, in up to three variants for the spatial cases:
             plain  x and dx plain NCHW, as a PyTorch user hands them over: the layer converts
                    x into its kernel's format and dx back on every call (y and dy are in the
                    layer's output format, the only one DDLayerForward accepts);
             kept   x, y, dy, dx in the format the layers produce (oneDNN's blocked nChw16c):
                    "activations kept in that layout between layers", as in a chain of ddnn
                    layers (x is laid out as the output of a layer of the same kind, dx is
                    duplicated from x after set-up, as DDNet does);
             nhwc   (pooling, batch norm, upsampling, activations) x, dx in channels-last storage,
                    the layout of a PETSc DMDA with the channels as its interlaced degrees of
                    freedom, and of PyTorch's channels_last tensors;
    oneDNN alone (convolutions) the same convolution written directly against oneDNN with every
           format tag::any and no reorders in the loop: the bound of the kept variant;
    reference the loops of src/backend/reference, float32, on plain data (for the slow ones on
           a reduced shape, scaled by the FLOP ratio; the output says so);
    PyTorch bench/torch_baseline.py through popen, with contiguous and with channels_last
           tensors, torch.set_num_threads(T), OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = T and
           MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=100000000000 (otherwise it
           re-faults its buffers on every call); other variables pass on. OPENBLAS_CORETYPE passes
           on if set; if not, and OpenBLAS fell back to its Prescott (SSE3) kernels on a CPU with
           AVX-512 (OpenBLAS 0.3.21 does not know Emerald Rapids), PyTorch gets
           OPENBLAS_CORETYPE=SkylakeX: 3x faster nn.Linear here, PyTorch's best conditions.
  then the ratios; goals are judged on wall time against PyTorch's default contiguous tensors,
  with the verdict against channels_last in brackets. The thread count T (-threads, else
  OMP_NUM_THREADS, else 1) is applied to oneDNN and OpenBLAS at run time.

  2 ranks (one thread each): the 1x16x512x512 k3 F16 convolution on 1 rank (rank 0 alone, on
  PETSC_COMM_SELF), on 2 ranks with the spatial partition 1x1x2x1 (halo exchange), and with no
  communication (each rank convolves its own 1x16x256x512 half on PETSC_COMM_SELF, the pure
  local compute): speed-up and the cost of the exchange.

  Each layer run has its own log stage (<case>:<variant>), so -log_view shows where time goes.
*/
#include <ddnn.h>
#include <backend/kernels.hpp>
#include <backend/cpu/fastkernels.hpp>
#include <vector>
#include <string>
#include <algorithm>
#include <functional>
#include <map>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>
#include <ctime>
#if DDNN_WITH_DNNL
  #include <oneapi/dnnl/dnnl.hpp>
  #include <unordered_map>
#endif

#ifndef DDNN_BENCH_DIR
  #define DDNN_BENCH_DIR "."
#endif

using namespace ddnn;

static double Median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/*
  Medians over the repetitions of the max-over-ranks wall time of f and of its process CPU time
  (all threads: with 1 thread, the wall time less the time the process waited for a core on a
  shared machine), after `warm` warm-up calls. At least reps repetitions, more for fast cases
  (up to g_mintime seconds of them, at most 20 x reps), so that short medians are stable.
*/
struct Tm {
  double wall = 0, cpu = 0;
};

static double     g_mintime = 1.0;
static DDDataType g_dtype   = DD_FLOAT32; /* -dtype float32|float64: ddnn, the reference loops and PyTorch alike */

static double CpuNow()
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static PetscErrorCode Time(MPI_Comm comm, int reps, const std::function<PetscErrorCode()> &f, Tm *t, int warm = 2)
{
  std::vector<double> tw, tc;
  double              w = 0, wm;

  PetscFunctionBeginUser;
  for (int i = 0; i < warm; i++) {
    double t0 = MPI_Wtime();
    PetscCall(f());
    w = MPI_Wtime() - t0;
  }
  PetscCallMPI(MPI_Allreduce(&w, &wm, 1, MPI_DOUBLE, MPI_MAX, comm));
  if (warm > 0 && wm > 0) reps = (int)std::max<double>(reps, std::min<double>(20.0 * reps, std::ceil(g_mintime / wm)));
  for (int r = 0; r < reps; r++) {
    PetscCallMPI(MPI_Barrier(comm));
    double t0 = MPI_Wtime(), c0 = CpuNow();
    PetscCall(f());
    double d[2] = {MPI_Wtime() - t0, CpuNow() - c0}, mx[2];
    PetscCallMPI(MPI_Allreduce(d, mx, 2, MPI_DOUBLE, MPI_MAX, comm));
    tw.push_back(mx[0]);
    tc.push_back(mx[1]);
  }
  t->wall = Median(tw);
  t->cpu  = Median(tc);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the thread count of oneDNN (OpenMP) and OpenBLAS (pthreads), set at run time through the loaded libraries */
static void SetThreads(int T)
{
  typedef void (*setfn)(int);
  if (auto f = (setfn)dlsym(RTLD_DEFAULT, "omp_set_num_threads")) f(T);
  if (auto f = (setfn)dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) f(T);
}

template <class T>
static void Fill(std::vector<T> &v, unsigned seed)
{
  unsigned s = seed * 2654435761u + 1;
  for (auto &e : v) {
    s = s * 1664525u + 1013904223u;
    e = (T)((s >> 8) * (1.0 / 16777216.0) * 2 - 1);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* the cases                                                                                  */

enum Kind { CONV, AFFINE, MAXPOOL, BATCHNORM, UPSAMPLE, ACT };

struct Case {
  std::string           name, label;
  Kind                  kind;
  std::vector<PetscInt> shape;   /* input (N, C, spatial...) or (N, Fi) */
  PetscInt              out = 0; /* output channels / features */
  std::vector<PetscInt> refshape;/* reduced shape for the reference loops (empty: the same) */
  const char           *goal;
  double                goalratio; /* ddnn / torch must be <= this */
  DDActivationType      act = DD_ACT_RELU; /* ACT: the function */
  bool                  gelutanh = false; /* ACT, GELU: PyTorch's approximate = 'tanh' */
  PetscInt              k = 3;            /* CONV: the kernel's width (padding k / 2) */
};

static std::vector<Case> AllCases()
{
  return {
    {"conv2d_16x512", "conv 1x16x512x512 k3 F16", CONV, {1, 16, 512, 512}, 16, {1, 16, 128, 128}, "<= 0.75x torch", 0.75},
    {"conv2d_64x56", "conv 8x64x56x56 k3 F64", CONV, {8, 64, 56, 56}, 64, {1, 64, 56, 56}, "<= 0.75x torch", 0.75},
    {"conv3d_8x64", "conv 1x8x64^3 k3 F8 (3-D)", CONV, {1, 8, 64, 64, 64}, 8, {1, 8, 32, 32, 32}, "<= 0.75x torch", 0.75},
    {"conv1x1_24x32", "conv 8x24x32x32 k1 F24 (the FNO's pointwise path)", CONV, {8, 24, 32, 32}, 24, {}, "<= 1.0x torch", 1.0, DD_ACT_RELU, false, 1},
    {"conv1x1_96x32", "conv 8x96x32x32 k1 F96", CONV, {8, 96, 32, 32}, 96, {2, 96, 32, 32}, "<= 1.0x torch", 1.0, DD_ACT_RELU, false, 1},
    {"conv1x1_256x28", "conv 8x256x28x28 k1 F256", CONV, {8, 256, 28, 28}, 256, {2, 256, 28, 28}, "<= 1.0x torch", 1.0, DD_ACT_RELU, false, 1},
    {"affine_64x4096", "affine 64x4096 -> 4096", AFFINE, {64, 4096}, 4096, {8, 4096}, "<= 1.0x torch", 1.0},
    {"maxpool_16x512", "max-pool 2x2 on 1x16x512x512", MAXPOOL, {1, 16, 512, 512}, 0, {}, ">= 3x faster", 1.0 / 3},
    {"maxpool_64x56", "max-pool 2x2 on 8x64x56x56", MAXPOOL, {8, 64, 56, 56}, 0, {}, ">= 3x faster", 1.0 / 3},
    {"batchnorm_16x512", "batchnorm on 1x16x512x512", BATCHNORM, {1, 16, 512, 512}, 0, {}, ">= 3x faster", 1.0 / 3},
    {"upsample_16x256", "bilinear upsample x2 on 1x16x256x256", UPSAMPLE, {1, 16, 256, 256}, 0, {}, "<= 1.0x torch", 1.0},
    {"upsample_64x56", "bilinear upsample x2 on 8x64x56x56", UPSAMPLE, {8, 64, 56, 56}, 0, {}, "<= 1.0x torch", 1.0},
    {"relu_16x512", "relu on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_RELU},
    {"leakyrelu_16x512", "leaky relu (0.01) on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_LEAKYRELU},
    {"tanh_16x512", "tanh on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_TANH},
    {"sigmoid_16x512", "sigmoid on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_SIGMOID},
    {"silu_16x512", "silu on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_SILU},
    {"elu_16x512", "elu on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_ELU},
    {"gelu_16x512", "gelu (erf) on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_GELU},
    {"gelutanh_16x512", "gelu (tanh) on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_GELU, true},
    {"softplus_16x512", "softplus on 1x16x512x512", ACT, {1, 16, 512, 512}, 0, {}, "<= 1.0x torch", 1.0, DD_ACT_SOFTPLUS},
  };
}

static PetscInt Prod(const std::vector<PetscInt> &v)
{
  PetscInt p = 1;
  for (auto x : v) p *= x;
  return p;
}

static std::string ShapeStr(const std::vector<PetscInt> &v)
{
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

/* ------------------------------------------------------------------------------------------ */
/* ddnn layers                                                                                */

static PetscErrorCode MakeTensor(MPI_Comm comm, const std::vector<PetscInt> &pshape, const std::vector<PetscInt> &shape, DDTensorFormat fmt, PetscInt bs, PetscInt64 seed, DDTensor *t)
{
  DDPartition p;

  PetscFunctionBeginUser;
  PetscCall(DDPartitionCreateCartesian(comm, (PetscInt)pshape.size(), pshape.data(), PETSC_DECIDE, NULL, &p));
  PetscCall(DDTensorCreate(comm, t));
  PetscCall(DDTensorSetPartition(*t, p));
  PetscCall(DDTensorSetShape(*t, (PetscInt)shape.size(), shape.data()));
  PetscCall(DDTensorSetDataType(*t, g_dtype));
  PetscCall(DDTensorSetFormat(*t, fmt));
  if (fmt == DD_FORMAT_BLOCKED) PetscCall(DDTensorSetBlockSize(*t, bs));
  PetscCall(DDTensorSetUp(*t));
  PetscCall(DDPartitionDestroy(&p));
  PetscCall(DDTensorSetRandomGlobal(*t, seed, -1, 1));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode MakeLayer(MPI_Comm comm, const Case &c, DDLayer *l)
{
  PetscFunctionBeginUser;
  PetscCall(DDLayerCreate(comm, l));
  switch (c.kind) {
  case CONV: {
    PetscInt k = c.k, p = c.k / 2;
    PetscCall(DDLayerSetType(*l, DDLAYERCONV));
    PetscCall(DDLayerConvSetOutputChannels(*l, c.out));
    PetscCall(DDLayerConvSetKernel(*l, 1, &k));
    PetscCall(DDLayerConvSetPadding(*l, 1, &p));
  } break;
  case AFFINE:
    PetscCall(DDLayerSetType(*l, DDLAYERAFFINE));
    PetscCall(DDLayerAffineSetOutputFeatures(*l, c.out));
    break;
  case MAXPOOL: {
    PetscInt k = 2;
    PetscCall(DDLayerSetType(*l, DDLAYERPOOL));
    PetscCall(DDLayerPoolSetType(*l, DD_POOL_MAX));
    PetscCall(DDLayerPoolSetKernel(*l, 1, &k));
  } break;
  case BATCHNORM:
    PetscCall(DDLayerSetType(*l, DDLAYERBATCHNORM));
    break;
  case UPSAMPLE: {
    PetscInt s = 2;
    PetscCall(DDLayerSetType(*l, DDLAYERUPSAMPLE));
    PetscCall(DDLayerUpsampleSetMode(*l, DD_UPSAMPLE_LINEAR));
    PetscCall(DDLayerUpsampleSetScale(*l, 1, &s));
  } break;
  case ACT:
    PetscCall(DDLayerSetType(*l, DDLAYERACTIVATION));
    PetscCall(DDLayerActivationSetType(*l, c.act)); /* leaky relu: slope 0.01, PyTorch's default */
    if (c.gelutanh) PetscCall(DDLayerActivationSetGeluApproximate(*l, DD_GELU_APPROXIMATE_TANH));
    break;
  }
  PetscCall(DDLayerSetTraining(*l, PETSC_TRUE));
  PetscCall(DDLayerSetFromOptions(*l));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static std::string FormatStr(DDTensor t)
{
  if (t->format == DD_FORMAT_BLOCKED) return "blocked " + std::to_string(t->bs) + "c";
  return DDTensorFormats[t->format];
}

/* the storage format of the output of the layer of case c on a plain input (what the next layer receives) */
static PetscErrorCode OutputFormat(const Case &c, DDTensorFormat *fmt, PetscInt *bs)
{
  DDLayer  l;
  DDTensor x, y;

  PetscFunctionBeginUser;
  PetscCall(MakeTensor(PETSC_COMM_SELF, std::vector<PetscInt>(c.shape.size(), 1), c.shape, DD_FORMAT_PLAIN, 1, 1, &x));
  PetscCall(MakeLayer(PETSC_COMM_SELF, c, &l));
  PetscCall(DDLayerSetUp(l, x));
  PetscCall(DDLayerGetOutput(l, &y));
  *fmt = y->format;
  *bs  = y->bs;
  PetscCall(DDLayerDestroy(&l));
  PetscCall(DDTensorDestroy(&x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  fwd+bwd time of the layer of case c on the partition pshape of comm, with x and dx in format
  fmt (block size bs), y and dy in the layer's output format (the only one Forward accepts).
*/
struct LayerRun {
  Tm          t;
  std::string xfmt, yfmt, impl;
};

static PetscErrorCode TimeLayer(MPI_Comm comm, const Case &c, const std::vector<PetscInt> &pshape, const std::vector<PetscInt> &shape, DDTensorFormat fmt, PetscInt bs, int reps, const char stagename[], LayerRun *r)
{
  DDLayer       l;
  DDTensor      x, y, dy, dx;
  PetscLogStage stage;

  PetscFunctionBeginUser;
  PetscCall(PetscLogStageRegister(stagename, &stage));
  PetscCall(PetscLogStagePush(stage));
  PetscCall(MakeTensor(comm, pshape, shape, fmt, bs, 1, &x));
  PetscCall(MakeLayer(comm, c, &l));
  PetscCall(DDLayerSetUp(l, x));
  PetscCall(DDLayerInitializeParameters(l, 7));
  /* y and dy as the layer writes them (DDLayerForward takes no other format) */
  PetscCall(DDLayerGetOutput(l, &y));
  PetscCall(PetscObjectReference((PetscObject)y));
  PetscCall(DDLayerCreateOutput(l, &dy));
  PetscCall(DDTensorSetRandomGlobal(dy, 3, -1, 1));
  PetscCall(DDTensorDuplicate(x, &dx)); /* after SetUp: with the halo the layer grew, as DDNet's gradients */
  r->xfmt = FormatStr(x);
  {
    DDTensor yl;
    PetscCall(DDLayerGetOutput(l, &yl));
    r->yfmt = FormatStr(yl);
  }
  /* the kernel oneDNN chose, from the layer's view */
  {
    char  *buf = NULL;
    size_t len = 0;
    FILE  *f   = open_memstream(&buf, &len);
    PetscViewer v;
    PetscCall(PetscViewerASCIIOpenWithFILE(PETSC_COMM_SELF, f, &v));
    if (c.kind == CONV || c.kind == MAXPOOL) {
      PetscMPIInt rank;
      PetscCallMPI(MPI_Comm_rank(comm, &rank));
      if (rank == 0 && comm == PETSC_COMM_SELF) PetscCall(DDLayerView(l, v));
    }
    PetscCall(PetscViewerDestroy(&v));
    fclose(f);
    std::string s(buf ? buf : "");
    free(buf);
    for (const char *key : {"kernels: ", "kernel: "}) {
      size_t p = s.find(key);
      if (p == std::string::npos) continue;
      size_t e = s.find('\n', p), k = strlen(key);
      r->impl  = s.substr(p + k, e - p - k);
      break;
    }
  }
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscFunctionBeginUser;
    PetscCall(DDLayerForward(l, x, y));
    PetscCall(DDLayerBackward(l, dy, dx));
    PetscFunctionReturn(PETSC_SUCCESS);
  }, &r->t));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDTensorDestroy(&dx));
  PetscCall(DDLayerDestroy(&l));
  PetscCall(PetscLogStagePop());
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* oneDNN alone: the bound for the convolution                                                */

#if DDNN_WITH_DNNL
/*
  The convolution of case c as a oneDNN user writes it: padding in the primitive, every format
  tag::any (the blocked layouts the primitives prefer), forward_training, backward_weights (with
  the bias) and backward_data, no reorders in the timed loop: "oneDNN's direct kernel on its
  blocked layout", the bound a layer keeping activations in that layout can reach.
*/
static PetscErrorCode DnnlAlone(const Case &c, int reps, Tm *t, std::string *impl)
{
  using md  = dnnl::memory::desc;
  using tag = dnnl::memory::format_tag;
  using dt  = dnnl::memory::data_type;
  const PetscInt D = (PetscInt)c.shape.size() - 2;

  PetscFunctionBeginUser;
  dnnl::engine       eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream       str(eng);
  dnnl::memory::dims xd(c.shape.begin(), c.shape.end()), yd = xd, wd = {c.out, c.shape[1]}, one(D, 1), zero(D, 0), pad(D, c.k / 2);
  yd[1] = c.out;
  for (PetscInt j = 0; j < D; j++) wd.push_back(c.k);
  md xa(xd, dt::f32, tag::any), ya(yd, dt::f32, tag::any), wa(wd, dt::f32, tag::any), ba({c.out}, dt::f32, tag::x);
  dnnl::convolution_forward::primitive_desc fpd(dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, xa, wa, ba, ya, one, zero, pad, pad), eng);
  dnnl::convolution_backward_data::primitive_desc bdp(dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, xa, wa, ya, one, zero, pad, pad), eng, fpd);
  dnnl::convolution_backward_weights::primitive_desc bwp(dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, xa, wa, ba, ya, one, zero, pad, pad), eng, fpd);
  *impl = fpd.impl_info_str();
  auto fill = [&](const md &m) {
    dnnl::memory mem(m, eng);
    std::vector<float> v(m.get_size() / sizeof(float));
    Fill(v, 5);
    std::memcpy(mem.get_data_handle(), v.data(), v.size() * sizeof(float));
    return mem;
  };
  dnnl::memory x = fill(fpd.src_desc()), w = fill(fpd.weights_desc()), b = fill(ba), y(fpd.dst_desc(), eng);
  dnnl::memory dy = fill(bdp.diff_dst_desc()), wb = bdp.weights_desc() == fpd.weights_desc() ? w : fill(bdp.weights_desc()), dx(bdp.diff_src_desc(), eng);
  dnnl::memory xw = bwp.src_desc() == fpd.src_desc() ? x : fill(bwp.src_desc()), dyw = bwp.diff_dst_desc() == bdp.diff_dst_desc() ? dy : fill(bwp.diff_dst_desc());
  dnnl::memory dw(bwp.diff_weights_desc(), eng), db(ba, eng);
  if (!(bwp.src_desc() == fpd.src_desc() && bwp.diff_dst_desc() == bdp.diff_dst_desc())) *impl += " (bwd-weights layouts differ, reorders not counted)";
  dnnl::convolution_forward          fwd(fpd);
  dnnl::convolution_backward_data    bwdd(bdp);
  dnnl::convolution_backward_weights bwdw(bwp);
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
    fwd.execute(str, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}});
    bwdw.execute(str, {{DNNL_ARG_SRC, xw}, {DNNL_ARG_DIFF_DST, dyw}, {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, db}});
    bwdd.execute(str, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DIFF_SRC, dx}});
    str.wait();
    return PETSC_SUCCESS;
  }, t));
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* the reference loops (src/backend/reference), in the benchmark's dtype, on plain data                 */

/* fwd + bwd-weights + bwd-data of a k-wide, pad-k/2 convolution on a zero-padded plain input */
template <class T>
static PetscErrorCode RefConv(const Case &c, const std::vector<PetscInt> &shape, int reps, Tm *t)
{
  const PetscInt D = (PetscInt)shape.size() - 2;
  ConvGeom       g;

  PetscFunctionBeginUser;
  g.D  = D;
  g.N  = shape[0];
  g.Ci = shape[1];
  g.Co = c.out;
  for (PetscInt j = 0; j < D; j++) {
    PetscInt jj = j + 3 - D;
    g.k[jj]     = c.k;
    g.out[jj]   = shape[2 + j];
    g.in[jj]    = shape[2 + j] + c.k - 1;
  }
  const PetscInt     S_in = g.in[0] * g.in[1] * g.in[2], S_out = g.out[0] * g.out[1] * g.out[2];
  std::vector<T> x((size_t)(g.N * g.Ci * S_in), (T)0), dx(x.size()), y((size_t)(g.N * g.Co * S_out)), dy(y.size()), w((size_t)(g.Co * g.Ci * g.KK())), dw(w.size(), (T)0), b(g.Co), db(g.Co, (T)0);
  Fill(x, 1); /* the halo is not zero here, but the loops do the same work either way */
  Fill(dy, 2);
  Fill(w, 3);
  Fill(b, 4);
  auto view = [&](T *p, PetscInt C, const PetscInt n[3]) {
    View<T> v;
    v.p  = p;
    v.s2 = 1;
    v.s1 = n[2];
    v.s0 = n[1] * n[2];
    v.sc = n[0] * n[1] * n[2];
    v.sn = C * v.sc;
    return v;
  };
  View<T> xv = view(x.data(), g.Ci, g.in), dxv = view(dx.data(), g.Ci, g.in), yv = view(y.data(), g.Co, g.out), dyv = view(dy.data(), g.Co, g.out);
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
    ConvForwardRef<T>(g, CView(xv), w.data(), b.data(), yv);
    ConvBackwardWeightsRef<T>(g, CView(xv), CView(dyv), dw.data(), db.data());
    std::fill(dx.begin(), dx.end(), (T)0);
    ConvBackwardDataRef<T>(g, CView(dyv), w.data(), dxv);
    return PETSC_SUCCESS;
  }, t, 1));
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
static PetscErrorCode RefAffine(const Case &c, const std::vector<PetscInt> &shape, int reps, Tm *t)
{
  AffineGeom g;

  PetscFunctionBeginUser;
  g.N  = shape[0];
  g.Fi = shape[1];
  g.Fo = c.out;
  std::vector<T> x((size_t)(g.N * g.Fi)), dx(x.size()), w((size_t)(g.Fo * g.Fi)), dw(w.size(), (T)0), b(g.Fo), db(g.Fo, (T)0), y((size_t)(g.N * g.Fo)), dy(y.size());
  Fill(x, 1);
  Fill(w, 2);
  Fill(b, 3);
  Fill(dy, 4);
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
    AffineForwardRef<T>(g, x.data(), g.Fi, w.data(), g.Fi, b.data(), y.data(), g.Fo);
    AffineBackwardWeightsRef<T>(g, x.data(), g.Fi, dy.data(), g.Fo, dw.data(), g.Fi, db.data());
    AffineBackwardDataRef<T>(g, dy.data(), g.Fo, w.data(), g.Fi, dx.data(), g.Fi);
    return PETSC_SUCCESS;
  }, t, 1));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* 2x2 (2x2x2) max pooling, stride 2, as the layer's fallback runs it */
template <class T>
static PetscErrorCode RefPool(const Case &c, const std::vector<PetscInt> &shape, int reps, Tm *t, bool fast)
{
  const PetscInt        D = (PetscInt)shape.size() - 2;
  std::vector<PetscInt> ys(shape), ones(shape.size(), 1), zero(shape.size(), 0);
  DDTensor              x, dx, y, dy;
  PoolGeom              g;
  BoxOffsets            xo, yo;

  PetscFunctionBeginUser;
  for (PetscInt j = 0; j < D; j++) ys[2 + j] = shape[2 + j] / 2;
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 1, &x));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 2, &dx));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, ys, DD_FORMAT_PLAIN, 1, 3, &y));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, ys, DD_FORMAT_PLAIN, 1, 4, &dy));
  g.D   = D;
  g.N   = shape[0];
  g.C   = shape[1];
  g.max = true;
  for (PetscInt jj = 0; jj < 3; jj++) {
    g.first[jj].assign(1, 0);
    g.ntaps[jj].assign(1, 1);
    g.div[jj].assign(1, 1);
    if (jj < 3 - D) continue;
    const PetscInt n = ys[2 + jj - (3 - D)];
    g.out[jj]        = n;
    g.first[jj].resize(n);
    g.ntaps[jj].assign(n, 2);
    g.div[jj].assign(n, 4);
    for (PetscInt i = 0; i < n; i++) g.first[jj][i] = 2 * i;
  }
  BoxOffsetsBuild(x->layout, D, zero.data(), shape.data(), &xo);
  BoxOffsetsBuild(y->layout, D, zero.data(), ys.data(), &yo);
  std::vector<PetscInt> argmax((size_t)Prod(ys));
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
    if (fast) PoolForwardFast<T>(g, (const T *)x->array, xo, (T *)y->array, yo, argmax.data());
    else PoolForwardRef<T>(g, (const T *)x->array, xo, (T *)y->array, yo, argmax.data());
    std::memset(dx->array, 0, sizeof(T) * (size_t)Prod(shape));
    if (fast) PoolBackwardFast<T>(g, (const T *)dy->array, yo, (T *)dx->array, xo, argmax.data());
    else PoolBackwardRef<T>(g, (const T *)dy->array, yo, (T *)dx->array, xo, argmax.data());
    return PETSC_SUCCESS;
  }, t, 1));
  for (DDTensor *p : {&x, &dx, &y, &dy}) PetscCall(DDTensorDestroy(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the normalization kernels of norm_ref.cxx, called as the batch-norm layer calls them (training) */
template <class T>
static PetscErrorCode RefBatchNorm(const Case &c, const std::vector<PetscInt> &shape, int reps, Tm *t)
{
  std::vector<PetscInt> ones(shape.size(), 1);
  DDTensor              x, dx, y, dy;
  const PetscInt        C = shape[1];
  std::vector<double>   cnt(C), mean(C), m2(C), a(C), sh(C, 0.0), s1(C), s2(C), ka(C), kb(C), kc(C), rstd(C);

  PetscFunctionBeginUser;
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 1, &x));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 2, &dx));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 3, &y));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 4, &dy));
  const double n = (double)(Prod(shape) / C);
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
    NormMoments<T>(x->layout, (const T *)x->array, false, cnt.data(), mean.data(), m2.data());
    for (PetscInt k = 0; k < C; k++) {
      rstd[k] = 1.0 / std::sqrt(m2[k] / n + 1e-5);
      a[k]    = rstd[k];
    }
    NormScaleShift<T>(x->layout, (const T *)x->array, y->layout, (T *)y->array, false, mean.data(), a.data(), sh.data());
    NormBackwardSums<T>(x->layout, (const T *)x->array, dy->layout, (const T *)dy->array, false, mean.data(), s1.data(), s2.data());
    for (PetscInt k = 0; k < C; k++) {
      ka[k] = rstd[k];
      kb[k] = -rstd[k] * rstd[k] * rstd[k] * s2[k] / n;
      kc[k] = -rstd[k] * s1[k] / n;
    }
    NormBackwardApply<T>(x->layout, (const T *)x->array, dy->layout, (const T *)dy->array, dx->layout, (T *)dx->array, false, mean.data(), ka.data(), kb.data(), kc.data());
    return PETSC_SUCCESS;
  }, t, 1));
  for (DDTensor *p : {&x, &dx, &y, &dy}) PetscCall(DDTensorDestroy(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* bilinear x2 upsampling (align_corners false) on plain data: the reference loops or the fast kernels */
template <class T>
static PetscErrorCode RefUpsample(const Case &c, const std::vector<PetscInt> &shape, int reps, Tm *t, bool fast)
{
  const PetscInt        D = (PetscInt)shape.size() - 2;
  std::vector<PetscInt> ys(shape), ones(shape.size(), 1), zero(shape.size(), 0);
  DDTensor              x, dx, y, dy;
  UpsampleGeom          g;
  BoxOffsets            xo, yo;

  PetscFunctionBeginUser;
  for (PetscInt j = 0; j < D; j++) ys[2 + j] = 2 * shape[2 + j];
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 1, &x));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 2, &dx));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, ys, DD_FORMAT_PLAIN, 1, 3, &y));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, ys, DD_FORMAT_PLAIN, 1, 4, &dy));
  g.D      = D;
  g.N      = shape[0];
  g.C      = shape[1];
  g.linear = true;
  for (PetscInt jj = 0; jj < 3; jj++) {
    g.i0[jj].assign(1, 0);
    g.i1[jj].assign(1, 0);
    g.w0[jj].assign(1, 1.0);
    g.w1[jj].assign(1, 0.0);
    if (jj < 3 - D) continue;
    const PetscInt n = shape[2 + jj - (3 - D)], m = 2 * n;
    g.out[jj]        = m;
    g.i0[jj].resize(m);
    g.i1[jj].resize(m);
    g.w0[jj].resize(m);
    g.w1[jj].resize(m);
    for (PetscInt o = 0; o < m; o++) { /* PyTorch's source index and weights, align_corners false */
      T              src = std::max((T)0.5 * ((T)o + (T)0.5) - (T)0.5, (T)0);
      const PetscInt i   = std::min((PetscInt)std::floor(src), n - 1);
      const T        l1  = std::min(std::max(src - (T)i, (T)0), (T)1);
      g.i0[jj][o]        = i;
      g.i1[jj][o]        = i + (i < n - 1 ? 1 : 0);
      g.w0[jj][o]        = (double)((T)1 - l1);
      g.w1[jj][o]        = (double)l1;
    }
  }
  BoxOffsetsBuild(x->layout, D, zero.data(), shape.data(), &xo);
  BoxOffsetsBuild(y->layout, D, zero.data(), ys.data(), &yo);
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
    if (fast) UpsampleForwardFast<T>(g, (const T *)x->array, xo, (T *)y->array, yo);
    else UpsampleForwardRef<T>(g, (const T *)x->array, xo, (T *)y->array, yo);
    std::memset(dx->array, 0, sizeof(T) * (size_t)Prod(shape));
    if (fast) UpsampleBackwardFast<T>(g, (const T *)dy->array, yo, (T *)dx->array, xo);
    else UpsampleBackwardRef<T>(g, (const T *)dy->array, yo, (T *)dx->array, xo);
    return PETSC_SUCCESS;
  }, t, 1));
  for (DDTensor *p : {&x, &dx, &y, &dy}) PetscCall(DDTensorDestroy(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* reference time of case c at its shape: measured on refshape and scaled by the FLOP (= size) ratio */
static PetscErrorCode RefTime(const Case &c, int reps, Tm *t, double *scale, std::string *note, bool fast = false)
{
  std::vector<PetscInt> s = c.refshape.empty() ? c.shape : c.refshape;
  Tm                    tr;

  PetscFunctionBeginUser;
  *scale = (double)Prod(c.shape) / (double)Prod(s); /* the work of every case is proportional to the input size */
  PetscCall(DispatchType(g_dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBeginUser;
    switch (c.kind) {
    case CONV:
      PetscCall(RefConv<T>(c, s, reps, &tr));
      break;
    case AFFINE:
      PetscCall(RefAffine<T>(c, s, reps, &tr));
      break;
    case MAXPOOL:
      PetscCall(RefPool<T>(c, s, reps, &tr, fast));
      break;
    case BATCHNORM:
      PetscCall(RefBatchNorm<T>(c, s, reps, &tr));
      break;
    case UPSAMPLE:
      PetscCall(RefUpsample<T>(c, s, reps, &tr, fast));
      break;
    case ACT:
      break;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  t->wall = tr.wall * *scale;
  t->cpu  = tr.cpu * *scale;
  *note   = *scale != 1 ? "on " + ShapeStr(s) + ", x" + std::to_string((int)*scale) + " (FLOP ratio)" : "same shape";
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* PyTorch, through bench/torch_baseline.py                                                   */

/* the interpreter with torch: /usr/bin/python3 (Debian's python3-torch), not the python3 on PATH; DDNN_BENCH_PYTHON overrides it */
static std::string Python()
{
  const char *e = getenv("DDNN_BENCH_PYTHON");
  return e && *e ? e : "/usr/bin/python3";
}

static bool TorchAvailable()
{
  return std::system((Python() + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

/*
  OPENBLAS_CORETYPE for PyTorch: the user's, else SkylakeX where OpenBLAS runs its Prescott
  kernels on an AVX-512 CPU (its detection predates the CPU), else none ("")
*/
static std::string TorchCoretype()
{
  typedef char *(*namefn)(void);
  if (const char *e = getenv("OPENBLAS_CORETYPE")) return e;
  auto        f    = (namefn)dlsym(RTLD_DEFAULT, "openblas_get_corename");
  std::string core = f ? f() : "";
  for (auto &ch : core) ch = (char)std::tolower((unsigned char)ch);
  if (core == "prescott" && __builtin_cpu_supports("avx512f")) return "SkylakeX";
  return "";
}

/* runs the script for one case; times[layout] (wall and CPU seconds) */
static bool TorchTimes(const std::string &cs, int T, int reps, std::map<std::string, Tm> &times, std::string *version)
{
  char              cmd[2048];
  const std::string ct = TorchCoretype();
  snprintf(cmd, sizeof(cmd),
           "env %s%s OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=100000000000 "
           "%s %s/torch_baseline.py --threads %d --reps %d --min-time %g --cases %s --dtype %s",
           ct.empty() ? "" : "OPENBLAS_CORETYPE=", ct.c_str(), T, T, T, Python().c_str(), DDNN_BENCH_DIR, T, reps, g_mintime, cs.c_str(), DDDataTypes[g_dtype]);
  FILE *p = popen(cmd, "r");
  if (!p) return false;
  std::string out;
  char        buf[4096];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  if (pclose(p) != 0) return false;
  /* {"torch": "1.13", ..., "times": {"<case>/<layout>": {"wall": s, "cpu": s}, ...}} */
  size_t v = out.find("\"torch\": \"");
  if (v != std::string::npos) *version = out.substr(v + 10, out.find('"', v + 10) - v - 10);
  for (const char *lay : {"contiguous", "channels_last"}) {
    size_t k = out.find("\"" + cs + "/" + lay + "\"");
    if (k == std::string::npos) continue;
    size_t w = out.find("\"wall\":", k), c = out.find("\"cpu\":", k);
    if (w == std::string::npos || c == std::string::npos) return false;
    times[lay].wall = std::strtod(out.c_str() + w + 7, NULL);
    times[lay].cpu  = std::strtod(out.c_str() + c + 6, NULL);
  }
  return !times.empty();
}

/* ------------------------------------------------------------------------------------------ */

static PetscErrorCode Copies(int);

static PetscErrorCode OneRank(int T, int reps, int refreps, const std::vector<std::string> &sel, PetscBool dotorch, PetscBool doref, PetscBool copies, bool doplain, bool dokept, bool donhwc)
{
  bool        havetorch = dotorch && TorchAvailable();
  std::string version   = "?";

  PetscFunctionBeginUser;
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "1 rank, %d thread(s), %s, fwd+bwd (Backward with the input gradient), median of >= %d (reference: %d)\n", T, DDDataTypes[g_dtype], reps, refreps));
  {
    typedef char *(*namefn)(void);
    auto f = (namefn)dlsym(RTLD_DEFAULT, "openblas_get_corename");
    const std::string ct = TorchCoretype();
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "OpenBLAS kernels: %s%s%s%s\n", f ? f() : "?", ct.empty() ? "" : "; PyTorch runs with OPENBLAS_CORETYPE=", ct.c_str(), ct.empty() ? "" : (getenv("OPENBLAS_CORETYPE") ? " (yours)" : " (Prescott on an AVX-512 CPU: OpenBLAS does not know it)")));
  }
  if (!dotorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "PyTorch: skipped (-torch 0)\n"));
  else if (!havetorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "PyTorch: not available (%s -c \"import torch\" fails; apt-get install python3-torch); no PyTorch ratios\n", Python().c_str()));
  for (const Case &c : AllCases()) {
    if (!sel.empty() && std::find(sel.begin(), sel.end(), c.name) == sel.end()) continue;
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n%s\n", c.label.c_str()));
    /* ddnn variants */
    std::vector<std::pair<std::string, LayerRun>> runs;
    const std::vector<PetscInt> ones(c.shape.size(), 1);
    if (doplain) {
      LayerRun r;
      PetscCall(TimeLayer(PETSC_COMM_SELF, c, ones, c.shape, DD_FORMAT_PLAIN, 1, reps, (c.name + ":plain").c_str(), &r));
      runs.push_back({"plain", r});
    }
    if (c.kind != AFFINE && dokept) {
      DDTensorFormat f  = DD_FORMAT_BLOCKED;
      PetscInt       bs = 16;
      if (c.kind == CONV) PetscCall(OutputFormat(c, &f, &bs)); /* the format a conv of the same kind hands on */
      else if (c.shape[1] % 16) bs = 8;                                  /* pool and batch norm after a conv: blocked */
      LayerRun r;
      PetscCall(TimeLayer(PETSC_COMM_SELF, c, ones, c.shape, f, bs, reps, (c.name + ":kept").c_str(), &r));
      runs.push_back({"kept", r});
    }
    if (c.kind != AFFINE && c.kind != CONV && donhwc) {
      LayerRun r;
      PetscCall(TimeLayer(PETSC_COMM_SELF, c, ones, c.shape, DD_FORMAT_CHANNELS_LAST, 1, reps, (c.name + ":nhwc").c_str(), &r));
      runs.push_back({"nhwc", r});
    }
    /* oneDNN alone */
    Tm          tdnnl;
    std::string dimpl;
#if DDNN_WITH_DNNL
    if (c.kind == CONV) PetscCall(DnnlAlone(c, reps, &tdnnl, &dimpl));
#endif
    /* the reference loops */
    Tm          tref, tfast;
    double      scale = 1, fscale = 1;
    std::string note, fnote;
    const bool  hasref = doref && c.kind != ACT, hasfast = c.kind == MAXPOOL || c.kind == UPSAMPLE;
    if (hasref) PetscCall(RefTime(c, refreps, &tref, &scale, &note));
    /* the fast kernels of src/backend/cpu alone, on the same plain data (max pooling: the layer does not call them yet) */
    if (hasfast) PetscCall(RefTime(c, reps, &tfast, &fscale, &fnote, true));
    /* PyTorch */
    std::map<std::string, Tm> tt;
    if (havetorch && !TorchTimes(c.name, T, reps, tt, &version)) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  (torch_baseline.py failed for this case)\n"));
    /* the table: times, then ratios of ddnn's variants to the baselines */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-66s %10s %10s\n", "", "wall ms", "cpu ms"));
    for (auto &rr : runs) {
      const LayerRun &r = rr.second;
      std::string     what = "ddnn " + rr.first + " (x " + r.xfmt + ", y " + r.yfmt + (r.impl.empty() ? "" : ", " + r.impl) + ")";
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-66s %10.2f %10.2f\n", what.c_str(), 1e3 * r.t.wall, 1e3 * r.t.cpu));
    }
    if (tdnnl.wall > 0) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-66s %10.2f %10.2f\n", ("oneDNN alone (tag::any, no reorders; " + dimpl + ")").c_str(), 1e3 * tdnnl.wall, 1e3 * tdnnl.cpu));
    if (hasref) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-66s %10.2f %10.2f\n", ("reference loops (" + note + ")").c_str(), 1e3 * tref.wall, 1e3 * tref.cpu));
    if (hasfast) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-66s %10.2f %10.2f\n", "fast kernels alone (src/backend/cpu, plain)", 1e3 * tfast.wall, 1e3 * tfast.cpu));
    for (auto &kv : tt) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-66s %10.2f %10.2f\n", ("PyTorch " + kv.first).c_str(), 1e3 * kv.second.wall, 1e3 * kv.second.cpu));
    for (auto &rr : runs) {
      const Tm &r = rr.second.t;
      if (!hasref && !(tdnnl.wall > 0) && tt.empty()) break; /* no baseline: no ratios */
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  ddnn %-5s", rr.first.c_str()));
      if (hasref) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  reference/ddnn %6.1f", tref.wall / r.wall));
      if (tdnnl.wall > 0) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  ddnn/oneDNN %5.2f", r.wall / tdnnl.wall));
      for (auto &kv : tt) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  ddnn/torch %s %5.2f (cpu %5.2f)", kv.first == "contiguous" ? "NCHW" : "NHWC", r.wall / kv.second.wall, r.cpu / kv.second.cpu));
      if (tt.count("contiguous")) {
        const double q = r.wall / tt["contiguous"].wall;
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  goal %s: %s", c.goal, q <= c.goalratio ? "met" : "NOT met"));
        if (tt.count("channels_last")) PetscCall(PetscPrintf(PETSC_COMM_WORLD, " (vs NHWC: %s)", r.wall / tt["channels_last"].wall <= c.goalratio ? "met" : "not met"));
      }
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
    }
    if (hasfast && !tt.empty()) {
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  fast  "));
      if (hasref) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  reference/fast %6.1f", tref.wall / tfast.wall));
      for (auto &kv : tt) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  fast/torch %s %5.2f (cpu %5.2f)", kv.first == "contiguous" ? "NCHW" : "NHWC", tfast.wall / kv.second.wall, tfast.cpu / kv.second.cpu));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
    }
  }
  if (copies) PetscCall(Copies(reps));
  if (havetorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\nPyTorch %s, torch.set_num_threads(%d), OPENBLAS_NUM_THREADS=%d, %s%s%sMALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=100000000000; goals are judged on wall time against PyTorch's default contiguous (NCHW) tensors\n", version.c_str(), T, T, TorchCoretype().empty() ? "" : "OPENBLAS_CORETYPE=", TorchCoretype().c_str(), TorchCoretype().empty() ? "" : ", "));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Context for the analysis: the single-core copy bandwidth (std::copy of 64 MiB), and the cost
  of DDTensorCopy between storage formats (what a layer pays when its input is not in the format
  of its kernel) next to a copy between tensors of the same format.
*/
static PetscErrorCode Copies(int reps)
{
  const std::vector<PetscInt> shape = {1, 16, 512, 512}, ones = {1, 1, 1, 1};
  DDTensor                    p0, p1, b0, b1;
  Tm                          mem, pp, bb, pb, bp;

  PetscFunctionBeginUser;
  {
    std::vector<float> a((size_t)16 << 20, 1.f), b(a.size());
    PetscCall(Time(PETSC_COMM_SELF, reps, [&]() -> PetscErrorCode {
      std::copy(a.begin(), a.end(), b.begin());
      a[0] = b[1];
      return PETSC_SUCCESS;
    }, &mem));
  }
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 1, &p0));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_PLAIN, 1, 2, &p1));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_BLOCKED, 16, 3, &b0));
  PetscCall(MakeTensor(PETSC_COMM_SELF, ones, shape, DD_FORMAT_BLOCKED, 16, 4, &b1));
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() { return DDTensorCopy(p0, p1); }, &pp));
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() { return DDTensorCopy(b0, b1); }, &bb));
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() { return DDTensorCopy(p0, b0); }, &pb));
  PetscCall(Time(PETSC_COMM_SELF, reps, [&]() { return DDTensorCopy(b1, p1); }, &bp));
  const double tmem = mem.wall, tpp = pp.wall, tbb = bb.wall, tpb = pb.wall, tbp = bp.wall;
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\nmemory: std::copy of 64 MiB %.2f ms = %.1f GB/s (read + write)\n", 1e3 * tmem, 2 * 64.0 * 1048576 / tmem / 1e9));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "DDTensorCopy of 1x16x512x512 float32 (16 MiB): plain -> plain %.2f ms, blocked 16c -> blocked 16c %.2f ms, plain -> blocked 16c %.2f ms, blocked 16c -> plain %.2f ms (%.0fx a same-format copy)\n", 1e3 * tpp, 1e3 * tbb, 1e3 * tpb, 1e3 * tbp, (tpb + tbp) / (tpp + tbb)));
  for (DDTensor *t : {&p0, &p1, &b0, &b1}) PetscCall(DDTensorDestroy(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a barrier that sleeps instead of spinning: the idle rank leaves the core to the one timing alone */
static PetscErrorCode QuietBarrier(MPI_Comm comm)
{
  MPI_Request req;
  int         done = 0;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Ibarrier(comm, &req));
  while (!done) {
    PetscCallMPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (!done) usleep(1000);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the large convolution on 1 rank, on 2 ranks (1x1x2x1) and with no communication */
static PetscErrorCode TwoRanks(int reps)
{
  MPI_Comm    comm = PETSC_COMM_WORLD;
  PetscMPIInt rank;
  Case        c = AllCases()[0];

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(PetscPrintf(comm, "2 ranks, 1 thread per rank: %s, float32, fwd+bwd, median of >= %d (max over ranks)\n", c.label.c_str(), reps));
  DDTensorFormat f;
  PetscInt       bs;
  PetscCall(OutputFormat(c, &f, &bs));
  std::vector<PetscInt> half = c.shape;
  half[2] /= 2;
  for (int kept = 1; kept >= 0; kept--) {
    const char    *var = kept ? "kept" : "plain";
    DDTensorFormat ff  = kept ? f : DD_FORMAT_PLAIN;
    PetscLogStage  stage;
    LayerRun       r1, r2, r0;
    char           name[64];
    PetscCall(PetscSNPrintf(name, sizeof(name), "2ranks_%s", var));
    PetscCall(PetscLogStageRegister(name, &stage));
    PetscCall(PetscLogStagePush(stage));
    /* 1 rank: rank 0 alone; rank 1 sleeps in a barrier (a spinning MPI wait would take the second core) and
       registers the same log stage, so that -log_view sees the same stages on both ranks */
    if (rank == 0) PetscCall(TimeLayer(PETSC_COMM_SELF, c, {1, 1, 1, 1}, c.shape, ff, bs, reps, (std::string("1rank:") + var).c_str(), &r1));
    else {
      PetscLogStage s1;
      PetscCall(PetscLogStageRegister((std::string("1rank:") + var).c_str(), &s1));
    }
    PetscCall(QuietBarrier(comm));
    PetscCallMPI(MPI_Bcast(&r1.t, 2, MPI_DOUBLE, 0, comm));
    /* 2 ranks, H split: halo exchange of one row */
    PetscCall(TimeLayer(comm, c, {1, 1, 2, 1}, c.shape, ff, bs, reps, (std::string("2ranks:") + var).c_str(), &r2));
    /* no communication: each rank its half on its own, at the same time */
    {
      std::vector<double> ts;
      DDLayer             l;
      DDTensor            x, y, dy, dx;
      PetscCall(MakeTensor(PETSC_COMM_SELF, {1, 1, 1, 1}, half, ff, bs, 1 + rank, &x));
      PetscCall(MakeLayer(PETSC_COMM_SELF, c, &l));
      PetscCall(DDLayerSetUp(l, x));
      PetscCall(DDLayerInitializeParameters(l, 7));
      PetscCall(DDLayerGetOutput(l, &y));
      PetscCall(PetscObjectReference((PetscObject)y));
      PetscCall(DDLayerCreateOutput(l, &dy));
      PetscCall(DDTensorSetRandomGlobal(dy, 3, -1, 1));
      PetscCall(DDTensorDuplicate(x, &dx));
      PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
        PetscFunctionBeginUser;
        PetscCall(DDLayerForward(l, x, y));
        PetscCall(DDLayerBackward(l, dy, dx));
        PetscFunctionReturn(PETSC_SUCCESS);
      }, &r0.t));
      for (DDTensor *p : {&x, &y, &dy, &dx}) PetscCall(DDTensorDestroy(p));
      PetscCall(DDLayerDestroy(&l));
    }
    PetscCall(PetscLogStagePop());
    const Tm &t1 = r1.t, &t2 = r2.t, &t0 = r0.t;
    PetscCall(PetscPrintf(comm, "  %s (x %s)%*s wall ms    cpu ms\n", var, r2.xfmt.c_str(), (int)(40 - strlen(var) - r2.xfmt.size()), ""));
    PetscCall(PetscPrintf(comm, "    1 rank (rank 0 alone, 1x16x512x512)          %9.2f %9.2f\n", 1e3 * t1.wall, 1e3 * t1.cpu));
    PetscCall(PetscPrintf(comm, "    2 ranks, partition 1x1x2x1 (halo exchange)  %9.2f %9.2f   speed-up %.2fx (cpu %.2fx), goal >= 1.8: %s\n", 1e3 * t2.wall, 1e3 * t2.cpu, t1.wall / t2.wall, t1.cpu / t2.cpu, t1.wall / t2.wall >= 1.8 ? "met" : "NOT met"));
    PetscCall(PetscPrintf(comm, "    2 ranks, no communication (1x16x256x512 each) %8.2f %9.2f   speed-up %.2fx; the exchange costs %+.2f ms wall (%+.1f%%), %+.2f ms cpu\n", 1e3 * t0.wall, 1e3 * t0.cpu, t1.wall / t0.wall, 1e3 * (t2.wall - t0.wall), 100 * (t2.wall - t0.wall) / t0.wall, 1e3 * (t2.cpu - t0.cpu)));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  PetscInt    T = 0, reps = 10, refreps = 3;
  PetscBool   dotorch = PETSC_TRUE, doref = PETSC_TRUE, copies = PETSC_TRUE, set;
  char        cases[1024] = "";
  PetscMPIInt size;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  if (const char *e = getenv("OMP_NUM_THREADS")) T = atoi(e);
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-threads", &T, NULL));
  if (T <= 0) T = 1;
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-ref_reps", &refreps, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-torch", &dotorch, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-ref", &doref, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-copies", &copies, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-cases", cases, sizeof(cases), &set));
  {
    PetscEnum e = (PetscEnum)g_dtype;
    PetscCall(PetscOptionsGetEnum(NULL, NULL, "-dtype", DDDataTypes, &e, NULL));
    g_dtype = (DDDataType)e;
  }
  std::vector<std::string> sel;
  for (char *tok = strtok(cases, ","); tok; tok = strtok(NULL, ",")) sel.push_back(tok);
  char variants[256] = "plain,kept,nhwc";
  PetscCall(PetscOptionsGetString(NULL, NULL, "-variants", variants, sizeof(variants), NULL));
  const bool doplain = strstr(variants, "plain") != NULL, dokept = strstr(variants, "kept") != NULL, donhwc = strstr(variants, "nhwc") != NULL;
  {
    PetscReal mt = g_mintime;
    PetscCall(PetscOptionsGetReal(NULL, NULL, "-min_time", &mt, NULL));
    g_mintime = mt;
  }
  SetThreads((int)T);
  if (size == 1) PetscCall(OneRank((int)T, (int)reps, (int)refreps, sel, dotorch, doref, copies, doplain, dokept, donhwc));
  else if (size == 2) {
    PetscCheck(T == 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "The 2-rank part runs one thread per rank (OMP_NUM_THREADS=1 or -threads 1)");
    PetscCall(TwoRanks((int)reps));
  } else SETERRQ(PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "bench_layers runs on 1 rank (the layer cases) or 2 ranks (the spatial partition)");
  PetscCall(DDFinalize());
  return 0;
}
