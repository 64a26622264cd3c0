/*
  bench_gpu_conv: the convolution kernels of /gpu/cuda (cuDNN, src/backend/cuda/conv_cudnn.cxx)
  against PyTorch's on the same device, same shapes and precision, in one run (issue 11, part 7).

    ./bench_gpu_conv [-reps 20] [-torch 0|1] [-shapes a,b] [-dd_cudnn_workspace_mb 1024]

  Shapes: 3 x 3 (x 3) convolutions with padding 1 and a bias, and one 2 x 2 stride-2 transposed
  convolution (the U-Net's up-sampling): see kShapes. Modes: float64, float32 (FMA math: float32
  arithmetic) and tf32 (float32 storage, TF32 tensor cores: -dd_cuda_tf32 for ddnn,
  torch.backends.cudnn.allow_tf32 for PyTorch). ddnn: the kernel's Forward, BackwardData and
  BackwardWeights (with the bias) on device tensors, each timed between device synchronisations,
  the median of -reps after two warm-ups; fwd+bwd is timed separately as PyTorch's is (synchronised
  after the forward and at the end). x is the padded window (out + 2): the convolution ddnn's
  kernel sees after the halo exchange, padding 0.

  PyTorch: a script through popen with python3 (DDNN_BENCH_PYTHON overrides it) on the same device,
  torch.backends.cudnn.benchmark = True (its own algorithm search), x, w, b requiring grad; one
  iteration is y = conv(x, w, b, padding); y.backward(dy), gradients reset to None, synchronised;
  the median of -reps after two warm-ups, and of the forward alone; then the same on ddnn's problem,
  the padded window with padding 0 (cuDNN's algorithms differ between the two problems).

  Without a CUDA build with cuDNN, or without a device, it says so and exits 0.
*/
#include <ddnn.h>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#if DDNN_WITH_CUDA
  #include <backend/cuda/backend_cuda.hpp>
#endif
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace
{
struct Shape {
  const char *name;
  bool        transposed;
  PetscInt    D, N, Ci, Co, sp[3], k; /* sp: the conv's output (transposed: its input), stride 1 (transposed: 2 = k) */
};
const Shape kShapes[] = {
  {"conv2d_8x64x56x56", false, 2, 8, 64, 64, {56, 56, 1}, 3},
  {"conv2d_32x64x128x128", false, 2, 32, 64, 64, {128, 128, 1}, 3},
  {"conv2d_1x16x512x512", false, 2, 1, 16, 16, {512, 512, 1}, 3},
  {"conv2d_8x16x32x32", false, 2, 8, 16, 16, {32, 32, 1}, 3},
  {"conv3d_2x32x64x64x64", false, 3, 2, 32, 32, {64, 64, 64}, 3},
  {"conv3d_1x8x64x64x64", false, 3, 1, 8, 8, {64, 64, 64}, 3},
  {"convT2d_8x64x56x56_k2s2", true, 2, 8, 64, 32, {56, 56, 1}, 2},
};

double Median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Times {
  double fwd = 0, bd = 0, bw = 0, all = 0; /* all: fwd+bwd timed as PyTorch's is, synchronised after the forward and at the end */
};

DDTensor Local(DDDataType dt, const std::vector<PetscInt> &shape)
{
  std::vector<PetscInt> ones(shape.size(), 1);
  DDPartition           part;
  DDTensor              t;
  PetscCallAbort(PETSC_COMM_SELF, DDPartitionCreate(PETSC_COMM_SELF, &part));
  PetscCallAbort(PETSC_COMM_SELF, DDPartitionSetShape(part, (PetscInt)shape.size(), ones.data()));
  PetscCallAbort(PETSC_COMM_SELF, DDPartitionSetUp(part));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorCreate(PETSC_COMM_SELF, &t));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorSetPartition(t, part));
  PetscCallAbort(PETSC_COMM_SELF, DDPartitionDestroy(&part));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorSetShape(t, (PetscInt)shape.size(), shape.data()));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorSetDataType(t, dt));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorSetMemType(t, DD_MEMTYPE_DEVICE));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorSetUp(t));
  PetscCallAbort(PETSC_COMM_SELF, DDTensorSetRandomGlobal(t, 1, -1, 1));
  return t;
}

/* waits for the device: a one-entry copy to the host (cudaMemcpy synchronises) */
PetscErrorCode Sync(DDBackend g, DDTensor t)
{
  double h;
  PetscFunctionBegin;
  PetscCall(g->mem.copy(&h, t->array, 4));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Measure(const Shape &s, DDDataType dt, bool tf32, int reps, Times *t, std::string *name)
{
  DDBackend            g = ddnn::DDBackendLookup_Private("/gpu/cuda");
  ddnn::ConvKernelSpec spec;
  std::vector<PetscInt> xs = {s.N, s.Ci}, ys = {s.N, s.Co}, ws;

  PetscFunctionBegin;
  spec.g.D = s.D, spec.g.N = s.N, spec.g.Ci = s.Ci, spec.g.Co = s.Co;
  spec.transposed = s.transposed, spec.bias = true;
  ws = s.transposed ? std::vector<PetscInt>{s.Ci, s.Co} : std::vector<PetscInt>{s.Co, s.Ci};
  for (PetscInt j = 0; j < s.D; j++) {
    const PetscInt q = 3 - s.D + j;
    spec.g.k[q]      = s.k;
    if (!s.transposed) {
      spec.g.out[q] = s.sp[j], spec.g.in[q] = s.sp[j] + s.k - 1;
    } else {
      spec.g.s[q] = s.k, spec.g.in[q] = s.sp[j], spec.g.out[q] = s.sp[j] * s.k;
    }
    xs.push_back(spec.g.in[q]);
    ys.push_back(spec.g.out[q]);
    ws.push_back(s.k);
  }
  DDTensor x = Local(dt, xs), y = Local(dt, ys), w = Local(dt, ws), b = Local(dt, {s.Co}), dx = Local(dt, xs), dw = Local(dt, ws), db = Local(dt, {s.Co});
  spec.x.t = x, spec.y.t = y;
  std::unique_ptr<ddnn::ConvKernel> k;
  PetscCall(PetscOptionsSetValue(NULL, "-dd_cuda_tf32", tf32 ? "1" : "0"));
  PetscCall(ddnn::DDBackendConvCreate(g, spec, &k));
  PetscCall(PetscOptionsClearValue(NULL, "-dd_cuda_tf32"));
  *name = k->Name();
  std::vector<double> f, bd, bw, all;
  for (int r = 0; r < reps + 2; r++) {
    PetscCall(Sync(g, y));
    const double a0 = Now();
    PetscCall(k->Forward(x, w, 0, b, y));
    PetscCall(Sync(g, y));
    PetscCall(k->BackwardData(y, w, 0, dx));
    PetscCall(k->BackwardWeights(x, y, dw, db));
    PetscCall(Sync(g, dw));
    if (r >= 2) all.push_back(Now() - a0);
    PetscCall(Sync(g, y));
    const double t0 = Now();
    PetscCall(k->Forward(x, w, 0, b, y));
    PetscCall(Sync(g, y));
    const double t1 = Now();
    PetscCall(k->BackwardData(y, w, 0, dx));
    PetscCall(Sync(g, dx));
    const double t2 = Now();
    PetscCall(k->BackwardWeights(x, y, dw, db));
    PetscCall(Sync(g, dw));
    const double t3 = Now();
    if (r >= 2) f.push_back(t1 - t0), bd.push_back(t2 - t1), bw.push_back(t3 - t2);
  }
  t->fwd = Median(f), t->bd = Median(bd), t->bw = Median(bw), t->all = Median(all);
  k.reset();
  for (DDTensor *p : {&x, &y, &w, &b, &dx, &dw, &db}) PetscCall(DDTensorDestroy(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

const char *kTorchScript = R"PY(
import statistics, sys, time
import torch
import torch.nn.functional as F
reps = int(sys.argv[1])
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
print("torch", torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name(0).replace(" ", "_"), flush=True)
for spec in sys.argv[2].split(";"):
    name, tr, D, N, Ci, Co, sp, k = spec.split(":")
    tr, D, N, Ci, Co, k = tr == "1", int(D), int(N), int(Ci), int(Co), int(k)
    S = [int(v) for v in sp.split("x")][:D]
    for mode in ("f64", "f32", "tf32"):
        dt = torch.float64 if mode == "f64" else torch.float32
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        g = torch.Generator(device=dev).manual_seed(0)
        x = torch.randn(N, Ci, *S, dtype=dt, device=dev, generator=g, requires_grad=True)
        if tr:
            w = torch.randn(Ci, Co, *([k] * D), dtype=dt, device=dev, generator=g, requires_grad=True)
            conv = (F.conv_transpose2d if D == 2 else F.conv_transpose3d)
            args = dict(stride=k)
            out = [s * k for s in S]
        else:
            w = torch.randn(Co, Ci, *([k] * D), dtype=dt, device=dev, generator=g, requires_grad=True)
            conv = (F.conv1d, F.conv2d, F.conv3d)[D - 1]
            args = dict(padding=k // 2)
            out = S
        b = torch.randn(Co, dtype=dt, device=dev, generator=g, requires_grad=True)
        dy = torch.randn(N, Co, *out, dtype=dt, device=dev, generator=g)
        # as ddnn's kernel sees it: the padded window, no padding (transposed: the same problem)
        xw = torch.nn.functional.pad(x.detach(), [k // 2] * (2 * D)).requires_grad_(True) if not tr else x
        wargs = dict(args, padding=0) if not tr else args
        res = []
        for xx, aa in ((x, args), (xw, wargs)):
            tf, tt = [], []
            for r in range(reps + 2):
                xx.grad = w.grad = b.grad = None
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                y = conv(xx, w, b, **aa)
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                y.backward(dy)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                if r >= 2:
                    tf.append(t1 - t0)
                    tt.append(t2 - t0)
                del y
            res += [statistics.median(tf), statistics.median(tt)]
        print(name, mode, *res, flush=True)
)PY";

std::string Python()
{
  const char *e = getenv("DDNN_BENCH_PYTHON");
  return e && *e ? e : "python3";
}

/* PyTorch's medians per "shape mode": forward, forward + backward; the same on the padded window with no padding */
struct TorchT {
  double fwd, all, wfwd, wall;
};
bool TorchTimes(int reps, const std::vector<const Shape *> &shapes, std::map<std::string, TorchT> &times, std::string *version)
{
  std::string arg;
  for (const Shape *s : shapes) {
    char b[256];
    snprintf(b, sizeof(b), "%s%s:%d:%d:%d:%d:%d:%dx%dx%d:%d", arg.empty() ? "" : ";", s->name, (int)s->transposed, (int)s->D, (int)s->N, (int)s->Ci, (int)s->Co, (int)s->sp[0], (int)s->sp[1], (int)s->sp[2], (int)s->k);
    arg += b;
  }
  const std::string cmd = Python() + " - " + std::to_string(reps) + " '" + arg + "' <<'DDNN_EOF'\n" + kTorchScript + "DDNN_EOF\n";
  FILE             *p   = popen(cmd.c_str(), "r");
  if (!p) return false;
  char buf[1024];
  while (fgets(buf, sizeof(buf), p)) {
    char   a[256], m[64], c[64], d[128];
    TorchT t;
    if (sscanf(buf, "torch %255s %63s %127s", a, c, d) == 3) *version = std::string(a) + ", cuDNN " + c + ", " + d;
    else if (sscanf(buf, "%255s %63s %lf %lf %lf %lf", a, m, &t.fwd, &t.all, &t.wfwd, &t.wall) == 6) times[std::string(a) + " " + m] = t;
  }
  return pclose(p) == 0 && !times.empty();
}
} // namespace

int main(int argc, char **argv)
{
  PetscInt  reps = 20;
  PetscBool dotorch = PETSC_TRUE;
  char      shapes[1024] = "";

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-torch", &dotorch, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-shapes", shapes, sizeof(shapes), NULL));
  PetscCheck(reps >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-reps %" PetscInt_FMT " must be >= 1", reps);
  int ndev = 0;
#if DDNN_WITH_CUDA
  PetscCall(DDBackendCudaGetDeviceCount_Private(&ndev));
#endif
  if (!DDNN_WITH_CUDNN || ndev == 0) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "bench_gpu_conv: %s; nothing measured\n", !DDNN_WITH_CUDA ? "ddnn built without DDNN_WITH_CUDA" : !DDNN_WITH_CUDNN ? "ddnn built without cuDNN" : "no CUDA device"));
    PetscCall(DDFinalize());
    return 0;
  }
  std::vector<const Shape *> todo;
  for (const Shape &s : kShapes)
    if (!shapes[0] || strstr(shapes, s.name)) todo.push_back(&s);
  std::map<std::string, TorchT> torch;
  std::string                                      version = "?";
  const bool                                       havetorch = dotorch && TorchTimes((int)reps, todo, torch, &version);
#if DDNN_WITH_CUDNN
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "ddnn /gpu/cuda, cuDNN %zu; medians of %d; times in ms\n", DDBackendCudaCudnnVersion_Private(), (int)reps));
#endif
  if (havetorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "PyTorch %s (cudnn.benchmark)\n", version.c_str()));
  else if (dotorch) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "PyTorch: not available or failed (%s with torch.cuda); no ratios\n", Python().c_str()));
  for (const Shape *s : todo)
    for (const char *mode : {"f64", "f32", "tf32"}) {
      Times       t;
      std::string name;
      PetscCall(Measure(*s, strcmp(mode, "f64") ? DD_FLOAT32 : DD_FLOAT64, !strcmp(mode, "tf32"), (int)reps, &t, &name));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-24s %-4s ddnn:  fwd %8.3f  bwd-data %8.3f  bwd-weights %8.3f  fwd+bwd %8.3f   [%s]\n", s->name, mode, 1e3 * t.fwd, 1e3 * t.bd, 1e3 * t.bw, 1e3 * t.all, name.c_str()));
      const auto it = torch.find(std::string(s->name) + " " + mode);
      if (it != torch.end()) {
        const TorchT &q = it->second;
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-24s %-4s torch: fwd %8.3f  fwd+bwd %8.3f   ddnn/torch: fwd %.2f, fwd+bwd %.2f (goal <= 1.0: %s)\n", "", mode, 1e3 * q.fwd, 1e3 * q.all, t.fwd / q.fwd, t.all / q.all, t.all <= q.all ? "met" : "NOT met"));
        if (!s->transposed) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-24s %-4s torch on ddnn's padded window (padding 0): fwd %8.3f  fwd+bwd %8.3f   ddnn/that: fwd %.2f, fwd+bwd %.2f\n", "", mode, 1e3 * q.wfwd, 1e3 * q.wall, t.fwd / q.wfwd, t.all / q.wall));
      }
    }
  PetscCall(DDFinalize());
  return 0;
}
