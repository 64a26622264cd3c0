/*
  bench_conv_kernels: the GEMM convolution kernels (src/backend/blas/conv_gemm.cxx) and the
  Winograd ones (F(4x4, 3x3), F(2x2, 3x3) or F(2x2x2, 3x3x3); src/backend/blas/conv_winograd.cxx) against the reference loops
  (src/backend/reference/conv_ref.cxx) and PyTorch float64, at 1 thread, in one run.

    OPENBLAS_NUM_THREADS=1 ./bench_conv_kernels [-reps 7] [-ref_reps 3] [-ref 0|1] [-winograd 0|1] [-torch 0|1] [-dnnl 0|1] [-shapes a,b]

  Shapes (3x3(x3) kernel, padding 1, bias): conv 1x16x512x512 16->16, 8x64x56x56 64->64,
  1x8x64x64x64 8->8, and the main job's U-Net layers at batch 8: 8x16x32x32 16->16 (c2),
  8x1x32x32 1->16 (c1), 8x16x16x16 16->32 (c3), 8x32x16x16 32->32 (c4), 8x32x8x8 32->64 (c5),
  8x64x8x8 64->64 (c6), 8x96x16x16 96->32 (c7), 8x48x32x32 48->16 (c8); 3-D U-Net levels at batch 2:
  2x16x32^3 16->16, 2x32x16^3 32->32, 2x64x8^3 64->64. Per shape and precision
  (float64, float32): the median time of forward, backward-data and backward-weights (with the
  bias), each repetition running the three GEMM kernels, then the three Winograd ones (where they apply)
  and then the three reference ones (interleaved). The reference loops run on a reduced shape
  (fewer samples or rows) and are scaled by the ratio of output positions; the output says by how
  much. Data are plain NCHW(D); x and dx are the padded windows (out + 2).

  PyTorch: a script run through popen with /usr/bin/python3 (DDNN_BENCH_PYTHON overrides it),
  torch.set_num_threads(1), OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = 1,
  MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=100000000000 and OPENBLAS_CORETYPE as
  bench_layers sets it: torch.nn.functional.conv2d/conv3d float64, contiguous, x, w and b
  requiring grad; one iteration is y = conv(x, w, b, padding=1); y.backward(dy), gradients reset
  to None before it; the median of as many repetitions. ddnn's fwd+bwd is the sum of the three
  kernel medians.

  -dnnl 1 (oneDNN builds; OMP_NUM_THREADS=1): for the 2-D shapes in float32, /cpu/dnnl's kernel
  (src/backend/cpu/conv_dnnl.cxx) with oneDNN's direct algorithm against the same kernel with its
  Winograd one on every pass, interleaved, on nChw16c buffers (the blocked layout the layers hand
  over), the weights reordered (and for Winograd transformed) on every call as in training; per pass
  the median times, Winograd / direct, and the passes /cpu/dnnl takes Winograd for by default
  (DDBackendConvWinograd(): the rule of WinogradPasses() in backend_dnnl.cxx, drawn from these numbers).
*/
#include <ddnn.h>
#include <backend/blas/conv_gemm.hpp>
#include <backend/blas/conv_winograd.hpp>
#include <ddconf.h>
#if DDNN_WITH_DNNL
  #include <backend/cpu/conv_dnnl.hpp>
#endif
#include <cblas.h>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace ddnn;

namespace
{
struct Shape {
  const char *name;
  PetscInt    D, N, Ci, Co, sp[3]; /* spatial sizes (D of them, leading) */
  PetscInt    redN, reddim, redsize; /* the reference's reduced shape: N -> redN, spatial dimension reddim -> redsize */
};

const Shape kShapes[] = {
  {"conv2d_1x16x512x512", 2, 1, 16, 16, {512, 512, 1}, 1, 0, 64},
  {"conv2d_8x64x56x56", 2, 8, 64, 64, {56, 56, 1}, 1, 0, 14},
  {"conv3d_1x8x64x64x64", 3, 1, 8, 8, {64, 64, 64}, 1, 0, 8},
  {"conv2d_8x1x32x32", 2, 8, 1, 16, {32, 32, 1}, 1, 0, 32},
  {"conv2d_8x16x32x32", 2, 8, 16, 16, {32, 32, 1}, 1, 0, 32},
  {"conv2d_8x16x16x16", 2, 8, 16, 32, {16, 16, 1}, 1, 0, 16},
  {"conv2d_8x32x16x16", 2, 8, 32, 32, {16, 16, 1}, 1, 0, 16},
  {"conv2d_8x32x8x8", 2, 8, 32, 64, {8, 8, 1}, 2, 0, 8},
  {"conv2d_8x48x32x32", 2, 8, 48, 16, {32, 32, 1}, 1, 0, 32},
  {"conv2d_8x96x16x16", 2, 8, 96, 32, {16, 16, 1}, 1, 0, 16},
  {"conv2d_8x64x8x8", 2, 8, 64, 64, {8, 8, 1}, 2, 0, 8},
  /* 3-D U-Net levels (paper 000 sec. 5.3: 3 x 3 x 3 kernels), batch 2 */
  {"conv3d_2x16x32x32x32", 3, 2, 16, 16, {32, 32, 32}, 1, 0, 8},
  {"conv3d_2x32x16x16x16", 3, 2, 32, 32, {16, 16, 16}, 1, 0, 8},
  {"conv3d_2x64x8x8x8", 3, 2, 64, 64, {8, 8, 8}, 1, 0, 8},
};

/* wall and process CPU seconds (with one thread the CPU time leaves out the waits for a core on a shared machine) */
struct Tm {
  double wall = 0, cpu = 0;
};
Tm Now()
{
  Tm              t;
  struct timespec ts;
  t.wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  t.cpu = ts.tv_sec + 1e-9 * ts.tv_nsec;
  return t;
}

double Median(std::vector<double> v)
{
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* one problem: geometry, plain buffers, views (x, dx with a one-entry halo) */
template <class T>
struct Problem {
  ConvGeom       g;
  std::vector<T> x, dx, y, dy, w, b, dw, db;
  View<const T>  vx, vdy;
  View<T>        vy, vdx;

  Problem(const Shape &s, bool reduced)
  {
    g.D  = s.D;
    g.N  = reduced ? s.redN : s.N;
    g.Ci = s.Ci;
    g.Co = s.Co;
    for (PetscInt j = 0; j < s.D; j++) {
      const PetscInt jj = 3 - s.D + j;
      g.out[jj]         = (reduced && j == s.reddim) ? s.redsize : s.sp[j];
      g.in[jj]          = g.out[jj] + 2;
      g.k[jj]           = 3;
    }
    std::mt19937                           rng(1);
    std::uniform_real_distribution<double> u(-1, 1);
    auto fill = [&](std::vector<T> &v, size_t n) {
      v.resize(n);
      for (auto &e : v) e = (T)u(rng);
    };
    const PetscInt Pin = g.in[0] * g.in[1] * g.in[2], Pout = g.out[0] * g.out[1] * g.out[2];
    fill(x, (size_t)(g.N * g.Ci * Pin));
    fill(dx, x.size());
    fill(y, (size_t)(g.N * g.Co * Pout));
    fill(dy, y.size());
    fill(w, (size_t)(g.Co * g.Ci * g.KK()));
    fill(b, (size_t)g.Co);
    fill(dw, w.size());
    fill(db, b.size());
    auto view = [&](T *p, PetscInt C, const PetscInt e[3]) { /* plain N, C, e0, e1, e2 */
      View<T> v;
      v.p  = p;
      v.s2 = 1;
      v.s1 = e[2];
      v.s0 = e[1] * e[2];
      v.sc = e[0] * e[1] * e[2];
      v.sn = C * v.sc;
      return v;
    };
    /* x, dx: the padded window (out + 2 along each spatial dimension); y, dy: the output */
    vx  = CView(view(x.data(), g.Ci, g.in));
    vdx = view(dx.data(), g.Ci, g.in);
    vy  = view(y.data(), g.Co, g.out);
    vdy = CView(view(dy.data(), g.Co, g.out));
  }
  /* kind 0: GEMM, 1: Winograd, 2: reference */
  void Fwd(int kind)
  {
    if (kind == 0) ConvForwardGemm<T>(g, vx, w.data(), b.data(), vy);
    else if (kind == 1) ConvForwardWinograd<T>(g, vx, w.data(), b.data(), vy);
    else ConvForwardRef<T>(g, vx, w.data(), b.data(), vy);
  }
  void BwdData(int kind)
  {
    if (kind == 0) ConvBackwardDataGemm<T>(g, vdy, w.data(), vdx);
    else if (kind == 1) ConvBackwardDataWinograd<T>(g, vdy, w.data(), vdx);
    else ConvBackwardDataRef<T>(g, vdy, w.data(), vdx);
  }
  void BwdWeights(int kind)
  {
    if (kind == 0) ConvBackwardWeightsGemm<T>(g, vx, vdy, dw.data(), db.data());
    else if (kind == 1) ConvBackwardWeightsWinograd<T>(g, vx, vdy, dw.data(), db.data());
    else ConvBackwardWeightsRef<T>(g, vx, vdy, dw.data(), db.data());
  }
  double Positions() const { return (double)g.N * g.out[0] * g.out[1] * g.out[2]; }
};

struct Times {
  double fwd = 0, bd = 0, bw = 0, cpu = 0; /* wall medians, and the median CPU time of fwd+bwd */
  double Total() const { return fwd + bd + bw; }
};

/* medians of the GEMM and Winograd kernels (reps) and the reference (refreps, reduced shape, scaled); wino->fwd < 0 where Winograd does not apply */
template <class T>
void Measure(const Shape &s, int reps, int refreps, bool doref, bool dowino, Times *gemm, Times *wino, Times *ref, double *scale)
{
  Problem<T>                  big(s, false);
  std::unique_ptr<Problem<T>> small(doref ? new Problem<T>(s, true) : nullptr);
  std::vector<double>         t[9], cpu[3];
  dowino = dowino && ConvWinogradApplies(big.g);
  *scale = small ? big.Positions() / small->Positions() : 1;
  for (int kind = 0; kind < (dowino ? 2 : 1); kind++) big.Fwd(kind), big.BwdData(kind), big.BwdWeights(kind); /* warm-up: scratch buffers, pages */
  for (int r = 0; r < std::max(reps, refreps); r++) {
    for (int kind = 0; kind < 3; kind++) {
      Problem<T> *p = kind == 2 ? small.get() : &big;
      if (!p || (kind == 1 && !dowino) || r >= (kind == 2 ? refreps : reps)) continue;
      const Tm t0 = Now();
      p->Fwd(kind);
      const Tm t1 = Now();
      p->BwdData(kind);
      const Tm t2 = Now();
      p->BwdWeights(kind);
      const Tm t3 = Now();
      t[3 * kind].push_back(t1.wall - t0.wall), t[3 * kind + 1].push_back(t2.wall - t1.wall), t[3 * kind + 2].push_back(t3.wall - t2.wall);
      cpu[kind].push_back(t3.cpu - t0.cpu);
    }
  }
  gemm->fwd = Median(t[0]), gemm->bd = Median(t[1]), gemm->bw = Median(t[2]), gemm->cpu = Median(cpu[0]);
  wino->fwd = dowino ? Median(t[3]) : -1, wino->bd = Median(t[4]), wino->bw = Median(t[5]), wino->cpu = Median(cpu[1]);
  ref->fwd = Median(t[6]) * *scale, ref->bd = Median(t[7]) * *scale, ref->bw = Median(t[8]) * *scale, ref->cpu = Median(cpu[2]) * *scale;
}

#if DDNN_WITH_DNNL
/* /cpu/dnnl's float32 kernel, direct (kind 0) against Winograd on every pass (kind 1), on nChw16c buffers */
PetscErrorCode MeasureDnnl(const Shape &s, int reps)
{
  using tag = dnnl::memory::format_tag;
  using dt  = dnnl::memory::data_type;
  PetscFunctionBegin;
  if (s.D != 2) PetscFunctionReturn(PETSC_SUCCESS);
  ConvGeom g;
  g.D  = 2;
  g.N  = s.N;
  g.Ci = s.Ci;
  g.Co = s.Co;
  for (PetscInt j = 0; j < 2; j++) {
    g.out[1 + j] = s.sp[j];
    g.in[1 + j]  = s.sp[j] + 2;
    g.k[1 + j]   = 3;
  }
  const dnnl::memory::desc x({g.N, g.Ci, g.in[1], g.in[2]}, dt::f32, tag::nChw16c), y({g.N, g.Co, g.out[1], g.out[2]}, dt::f32, tag::nChw16c);
  DnnlConv k[2];
  k[1].SetWinograd(true, true, true);
  for (int kind = 0; kind < 2; kind++) PetscCall(k[kind].SetUp(g, x, y, x, y, true, false));
  std::mt19937                          rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](DnnlBuf &v, size_t n) {
    v.resize(n);
    for (auto &e : v) e = u(rng);
  };
  DnnlBuf bx, by, bdx, bdy, bw, bb, bdw, bdb;
  fill(bx, x.get_size() / 4), fill(bdx, x.get_size() / 4), fill(by, y.get_size() / 4), fill(bdy, y.get_size() / 4);
  fill(bw, (size_t)(g.Co * g.Ci * 9)), fill(bdw, bw.size()), fill(bb, (size_t)g.Co), fill(bdb, bb.size());
  std::vector<double> t[6];
  for (int r = 0; r <= reps; r++)
    for (int kind = 0; kind < 2; kind++) { /* weights changed at every call, as in training (reordered, or transformed for Winograd) */
      const Tm t0 = Now();
      PetscCall(k[kind].Forward(bx.data(), bw.data(), true, bb.data(), by.data()));
      const Tm t1 = Now();
      PetscCall(k[kind].BackwardData(bdy.data(), bw.data(), true, bdx.data()));
      const Tm t2 = Now();
      PetscCall(k[kind].BackwardWeights(bx.data(), bdy.data(), bdw.data(), bdb.data()));
      const Tm t3 = Now();
      if (r) t[3 * kind].push_back(t1.wall - t0.wall), t[3 * kind + 1].push_back(t2.wall - t1.wall), t[3 * kind + 2].push_back(t3.wall - t2.wall); /* r = 0: warm-up */
    }
  DDBackend dnnl;
  bool      dflt[3];
  PetscCall(DDBackendGet("/cpu/dnnl", &dnnl));
  PetscCall(DDBackendConvWinograd(dnnl, DD_FLOAT32, g, false, dflt));
  double m[6];
  for (int i = 0; i < 6; i++) m[i] = Median(t[i]);
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s f32  oneDNN direct: fwd %8.3f  bwd-data %8.3f  bwd-weights %8.3f  fwd+bwd %8.3f\n", s.name, 1e3 * m[0], 1e3 * m[1], 1e3 * m[2], 1e3 * (m[0] + m[1] + m[2])));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s f32  oneDNN %-7s fwd %8.3f  bwd-data %8.3f  bwd-weights %8.3f  fwd+bwd %8.3f  wino/direct: %.2f %.2f %.2f, fwd+bwd %.2f; default Winograd for: %s%s%s%s  [%s]\n", "", "wino:", 1e3 * m[3], 1e3 * m[4], 1e3 * m[5], 1e3 * (m[3] + m[4] + m[5]), m[3] / m[0], m[4] / m[1], m[5] / m[2], (m[3] + m[4] + m[5]) / (m[0] + m[1] + m[2]), dflt[0] ? "fwd " : "", dflt[1] ? "bwd-data " : "", dflt[2] ? "bwd-weights" : "", !dflt[0] && !dflt[1] && !dflt[2] ? "none" : "", k[1].Impl().c_str()));
  PetscFunctionReturn(PETSC_SUCCESS);
}
#endif

/* PyTorch float64 ------------------------------------------------------------------------ */

std::string Python()
{
  const char *e = getenv("DDNN_BENCH_PYTHON");
  return e && *e ? e : "/usr/bin/python3";
}

/* as bench_layers: the user's OPENBLAS_CORETYPE, else SkylakeX where OpenBLAS runs its Prescott kernels on an AVX-512 CPU */
std::string TorchCoretype()
{
  if (const char *e = getenv("OPENBLAS_CORETYPE")) return e;
  std::string core = openblas_get_corename();
  for (auto &ch : core) ch = (char)std::tolower((unsigned char)ch);
  if (core == "prescott" && __builtin_cpu_supports("avx512f")) return "SkylakeX";
  return "";
}

const char *kTorchScript = R"PY(
import statistics, sys, time
import torch
import torch.nn.functional as F
torch.set_num_threads(1)
reps = int(sys.argv[1])
print("torch", torch.__version__)
for name, N, C, S, Co in [("conv2d_1x16x512x512", 1, 16, (512, 512), 16), ("conv2d_8x64x56x56", 8, 64, (56, 56), 64), ("conv3d_1x8x64x64x64", 1, 8, (64, 64, 64), 8),
                          ("conv2d_8x1x32x32", 8, 1, (32, 32), 16), ("conv2d_8x16x32x32", 8, 16, (32, 32), 16), ("conv2d_8x16x16x16", 8, 16, (16, 16), 32),
                          ("conv2d_8x32x16x16", 8, 32, (16, 16), 32), ("conv2d_8x32x8x8", 8, 32, (8, 8), 64), ("conv2d_8x48x32x32", 8, 48, (32, 32), 16), ("conv2d_8x96x16x16", 8, 96, (16, 16), 32), ("conv2d_8x64x8x8", 8, 64, (8, 8), 64),
                          ("conv3d_2x16x32x32x32", 2, 16, (32, 32, 32), 16), ("conv3d_2x32x16x16x16", 2, 32, (16, 16, 16), 32), ("conv3d_2x64x8x8x8", 2, 64, (8, 8, 8), 64)]:
    if len(sys.argv) > 2 and name not in sys.argv[2].split(","):
        continue
    conv = F.conv2d if len(S) == 2 else F.conv3d
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, C, *S, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(Co, C, *([3] * len(S)), dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(Co, dtype=torch.float64, generator=g, requires_grad=True)
    dy = torch.randn(N, Co, *S, dtype=torch.float64, generator=g)
    tf, tt, tc = [], [], []
    for r in range(reps + 1):
        x.grad = w.grad = b.grad = None
        c0 = time.process_time()
        t0 = time.perf_counter()
        y = conv(x, w, b, padding=1)
        t1 = time.perf_counter()
        y.backward(dy)
        t2 = time.perf_counter()
        c2 = time.process_time()
        if r:
            tf.append(t1 - t0)
            tt.append(t2 - t0)
            tc.append(c2 - c0)
        del y
    print(name, statistics.median(tf), statistics.median(tt), statistics.median(tc), flush=True)
)PY";

/* PyTorch's float64 medians per shape name: fwd, fwd+bwd (in .bd) and its CPU time */
bool TorchTimes(int reps, std::map<std::string, Times> &times, std::string *version)
{
  const std::string ct = TorchCoretype();
  std::string       cmd = "env " + (ct.empty() ? std::string() : "OPENBLAS_CORETYPE=" + ct) +
                    " OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=100000000000 " + Python() + " - " +
                    std::to_string(reps) + " <<'DDNN_EOF'\n" + kTorchScript + "DDNN_EOF\n";
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return false;
  char buf[1024];
  while (fgets(buf, sizeof(buf), p)) {
    char   name[256];
    double a, b, c;
    if (sscanf(buf, "torch %255s", name) == 1) *version = name;
    else if (sscanf(buf, "%255s %lf %lf %lf", name, &a, &b, &c) == 4) { /* fwd, fwd+bwd (kept in .bd), fwd+bwd CPU */
      times[name].fwd = a;
      times[name].bd  = b;
      times[name].cpu = c;
    }
  }
  return pclose(p) == 0 && !times.empty();
}
} // namespace

int main(int argc, char **argv)
{
  PetscInt  reps = 7, refreps = 3;
  PetscBool doref = PETSC_TRUE, dotorch = PETSC_TRUE, dowino = PETSC_TRUE, dodnnl = PETSC_FALSE;
  char      shapes[1024] = "";

  PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-ref_reps", &refreps, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-ref", &doref, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-torch", &dotorch, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-winograd", &dowino, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-dnnl", &dodnnl, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-shapes", shapes, sizeof(shapes), NULL));
  PetscCheck(reps >= 1 && refreps >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-reps %" PetscInt_FMT " and -ref_reps %" PetscInt_FMT " must be >= 1", reps, refreps);
  openblas_set_num_threads(1);

  std::map<std::string, Times> torch;
  std::string                                      version = "?";
  bool                                             havetorch = dotorch && TorchTimes((int)reps, torch, &version);
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "1 thread; OpenBLAS kernels %s; median of %d (reference: %d, reduced shape scaled by positions); times in ms\n", openblas_get_corename(), (int)reps, (int)refreps));
  if (dotorch && havetorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "PyTorch %s float64, OPENBLAS_CORETYPE %s\n", version.c_str(), TorchCoretype().empty() ? "unset" : TorchCoretype().c_str()));
  else if (dotorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "PyTorch: not available or failed (%s -c \"import torch\"); no PyTorch ratios\n", Python().c_str()));
  for (const Shape &s : kShapes) {
    if (shapes[0] && !strstr(shapes, s.name)) continue;
    for (int prec = 0; prec < 2; prec++) {
      Times  g, wg, r;
      double scale;
      if (prec == 0) Measure<double>(s, (int)reps, (int)refreps, doref, dowino, &g, &wg, &r, &scale);
      else Measure<float>(s, (int)reps, (int)refreps, doref, dowino, &g, &wg, &r, &scale);
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %s  gemm: fwd %8.2f  bwd-data %8.2f  bwd-weights %8.2f  fwd+bwd %8.2f [cpu %8.2f]\n", s.name, prec ? "f32" : "f64", 1e3 * g.fwd, 1e3 * g.bd, 1e3 * g.bw, 1e3 * g.Total(), 1e3 * g.cpu));
      if (wg.fwd >= 0)
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %s  wino: fwd %8.2f  bwd-data %8.2f  bwd-weights %8.2f  fwd+bwd %8.2f [cpu %8.2f]  wino/gemm: %.2f %.2f %.2f, fwd+bwd %.2f [cpu %.2f]\n", "", prec ? "f32" : "f64", 1e3 * wg.fwd, 1e3 * wg.bd, 1e3 * wg.bw, 1e3 * wg.Total(), 1e3 * wg.cpu,
                              wg.fwd / g.fwd, wg.bd / g.bd, wg.bw / g.bw, wg.Total() / g.Total(), wg.cpu / g.cpu));
      if (doref)
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %s  ref:  fwd %8.2f  bwd-data %8.2f  bwd-weights %8.2f  fwd+bwd %8.2f [cpu %8.2f]  (x%g)  ref/gemm: %.1f %.1f %.1f, fwd+bwd %.1f [cpu %.1f]\n", "", prec ? "f32" : "f64", 1e3 * r.fwd, 1e3 * r.bd, 1e3 * r.bw, 1e3 * r.Total(), 1e3 * r.cpu, scale,
                              r.fwd / g.fwd, r.bd / g.bd, r.bw / g.bw, r.Total() / g.Total(), r.cpu / g.cpu));
      if (prec == 0 && havetorch && torch.count(s.name)) {
        const auto &t = torch[s.name];
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s f64  torch: fwd %8.2f  fwd+bwd %8.2f [cpu %8.2f]   gemm/torch: fwd %.2f, fwd+bwd %.2f [cpu %.2f] (goal <= 1.0: %s)\n", "", 1e3 * t.fwd, 1e3 * t.bd, 1e3 * t.cpu, g.fwd / t.fwd, g.Total() / t.bd,
                              g.cpu / t.cpu, g.Total() <= t.bd ? "met" : "NOT met"));
        if (wg.fwd >= 0) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s f64  wino/torch: fwd %.2f, fwd+bwd %.2f [cpu %.2f]\n", "", wg.fwd / t.fwd, wg.Total() / t.bd, wg.cpu / t.cpu));
      }
    }
#if DDNN_WITH_DNNL
    if (dodnnl) PetscCall(MeasureDnnl(s, (int)reps));
#else
    if (dodnnl) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "-dnnl: this build has no oneDNN\n"));
#endif
  }
  PetscCall(PetscFinalize());
  return 0;
}
