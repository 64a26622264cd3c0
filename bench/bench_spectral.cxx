/*
  bench_spectral: the spectral-convolution layer (DDLAYERSPECTRAL, Fourier neural operators) at 1
  and 2 ranks, the bytes its distributed FFT moves with and without mode pruning between the
  stages (DDPrimitiveFFTGetVolume), and its time against a PyTorch torch.fft SpectralConv2d at
  1 rank (the reference FNO code's layer, run by /usr/bin/python3 through popen in the same run,
  one thread).

    OPENBLAS_NUM_THREADS=1 ./bench_spectral [-reps 20] [-dtype float32|float64] [-torch 0|1]
    OPENBLAS_NUM_THREADS=1 mpiexec -n 2 ./bench_spectral

  Times are medians of -reps repetitions of fwd+bwd (Forward, then Backward with the input
  gradient), after two warm-up calls. Cases: (N, C, H, W) -> C channels, modes (m, m); the first, 8 x 24 x
  32 x 32 with modes 8, is the FNO main job's.

  -kernels 1 (1 rank) also times the local FFT kernels of the backend tier (FftKernel) for the two
  stages of each case at 1 rank, Forward + Adjoint: FFTW (/cpu/ref), the CPU chain's kernel (/cpu/blas,
  which /cpu/dnnl reaches: in float32 the truncated real DFT as a GEMM where it applies, else FFTW; its
  name is printed) and, in a CUDA build on a process with a device, cuFFT (/gpu/cuda; arrays in device
  memory, the time taken after a synchronizing copy), and the mode mixing of each case (Forward +
  Adjoint): the reference loops of /cpu/ref against the vectorized ones of /cpu/blas, in turn.
  -dd_backend /cpu/ref runs the whole layer on the reference mode mixing and FFTW.
*/
#include <ddnn.h>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <memory>
#include <vector>
#include <string>
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <unistd.h>

struct Case {
  PetscInt N, C, H, W, m;
};

static const char *torch_script = R"PY(
import sys, time, torch
torch.set_num_threads(1)
N, C, H, W, m, reps, dt = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
rdt = torch.float32 if dt == "float32" else torch.float64
cdt = torch.complex64 if dt == "float32" else torch.complex128
class SpectralConv2d(torch.nn.Module):  # Li et al., the reference FNO code
    def __init__(s, cin, cout, m1, m2):
        super().__init__()
        sc = 1 / (cin * cout)
        s.m1, s.m2, s.cout = m1, m2, cout
        s.weights1 = torch.nn.Parameter(sc * torch.rand(cin, cout, m1, m2, dtype=cdt))
        s.weights2 = torch.nn.Parameter(sc * torch.rand(cin, cout, m1, m2, dtype=cdt))
    def forward(s, x):
        B = x.shape[0]
        x_ft = torch.fft.rfft2(x)
        out = torch.zeros(B, s.cout, x.size(-2), x.size(-1) // 2 + 1, dtype=cdt)
        out[:, :, :s.m1, :s.m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :s.m1, :s.m2], s.weights1)
        out[:, :, -s.m1:, :s.m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -s.m1:, :s.m2], s.weights2)
        return torch.fft.irfft2(out, s=(x.size(-2), x.size(-1)))
l = SpectralConv2d(C, C, m, m)
x = torch.rand(N, C, H, W, dtype=rdt, requires_grad=True)
dy = torch.rand(N, C, H, W, dtype=rdt)
ts = []
for r in range(reps + 2):
    t0 = time.perf_counter()
    y = l(x)
    y.backward(dy)
    ts.append(time.perf_counter() - t0)
ts = sorted(ts[2:])
print("%.6e %s" % (ts[len(ts) // 2], torch.__version__))
)PY";

static bool TorchTime(const Case &c, PetscInt reps, const char *dt, double *t, std::string *ver)
{
  char path[] = "/tmp/bench_spectral_XXXXXX";
  int  fd     = mkstemp(path);
  if (fd < 0) return false;
  FILE *f = fdopen(fd, "w");
  fputs(torch_script, f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 /usr/bin/python3 %s %d %d %d %d %d %d %s 2>/dev/null", path, (int)c.N, (int)c.C, (int)c.H, (int)c.W, (int)c.m, (int)reps, dt);
  FILE *p  = popen(cmd, "r");
  bool  ok = false;
  if (p) {
    char v[64];
    ok = fscanf(p, "%lf %63s", t, v) == 2;
    if (ok) *ver = v;
    pclose(p);
  }
  unlink(path);
  return ok;
}

/* median fwd+bwd time of the layer on x of partition shape ps (ranks 0..P-1); the FFT's bytes moved */
static PetscErrorCode RunDDNN(const Case &c, const std::vector<PetscInt> &ps, DDDataType dt, PetscInt reps, double *t, PetscInt64 *pruned, PetscInt64 *full)
{
  DDPartition part;
  DDTensor    x, y, dy, dx;
  DDLayer     l;
  PetscInt    shape[4] = {c.N, c.C, c.H, c.W}, modes[2] = {c.m, c.m};

  PetscFunctionBegin;
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps.data(), PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, dt, 4, shape, &x));
  PetscCall(DDTensorSetRandomGlobal(x, 1, -1, 1));
  PetscCall(DDLayerCreate(PETSC_COMM_WORLD, &l));
  PetscCall(DDLayerSetType(l, DDLAYERSPECTRAL));
  PetscCall(DDLayerSpectralSetModes(l, 2, modes));
  PetscCall(DDLayerSetUp(l, x));
  PetscCall(DDLayerInitializeParameters(l, 3));
  PetscCall(DDLayerGetOutput(l, &y));
  PetscCall(DDLayerCreateOutput(l, &dy));
  PetscCall(DDTensorSetRandomGlobal(dy, 2, -1, 1));
  PetscCall(DDTensorDuplicate(x, &dx));
  std::vector<double> ts;
  for (PetscInt r = 0; r < reps + 2; r++) {
    PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
    double t0 = MPI_Wtime();
    PetscCall(DDLayerForward(l, x, y));
    PetscCall(DDLayerBackward(l, dy, dx));
    double t1 = MPI_Wtime() - t0, tm;
    PetscCallMPI(MPI_Allreduce(&t1, &tm, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
    if (r >= 2) ts.push_back(tm);
  }
  std::sort(ts.begin(), ts.end());
  *t = ts[ts.size() / 2];
  { /* the forward FFT of the layer, alone, for its volume */
    DDTensor    X;
    DDPrimitive F;
    PetscCall(DDTensorCreateFFT(x, 2, modes, &X));
    PetscCall(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
    PetscCall(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
    PetscCall(DDPrimitiveSetUp(F, x, X));
    PetscCall(DDPrimitiveFFTGetVolume(F, pruned, full));
    PetscCall(DDPrimitiveDestroy(&F));
    PetscCall(DDTensorDestroy(&X));
  }
  PetscCall(DDTensorDestroy(&dx));
  PetscCall(DDTensorDestroy(&dy));
  PetscCall(DDLayerDestroy(&l));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* median Forward + Adjoint time of the FFT kernel of backend b for one stage (arrays in b's memory) */
static PetscErrorCode TimeFftKernel(DDBackend b, DDDataType dt, bool real, PetscInt A, PetscInt L, PetscInt m, PetscInt B, PetscInt reps, double *t, std::string *kname = nullptr)
{
  ddnn::FftKernelSpec              spec;
  std::unique_ptr<ddnn::FftKernel> k;
  DDBackend                        which;
  const size_t                     es = dt == DD_FLOAT64 ? sizeof(double) : sizeof(float);
  void                            *a, *y;
  double                           sync;

  PetscFunctionBegin;
  spec.real = real, spec.A = A, spec.L = L, spec.m = m, spec.B = B, spec.K = real ? m : 2 * m;
  const size_t na = (size_t)(A * L * B * (real ? 1 : 2)) * es, nb = (size_t)(A * spec.K * B * 2) * es;
  PetscCall(b->mem.malloc(na, &a));
  PetscCall(b->mem.malloc(nb, &y));
  spec.a = a, spec.b = y;
  PetscCall(ddnn::DDBackendFftCreate(b, dt, spec, &k, &which));
  if (kname) *kname = std::string(k->Name()) + " on " + which->name;
  std::vector<double> ts;
  for (PetscInt r = 0; r < reps + 2; r++) {
    double t0 = MPI_Wtime();
    PetscCall(k->Forward(a, y));
    PetscCall(k->Adjoint(y, a));
    PetscCall(b->mem.copy(&sync, a, b->memtype == DD_MEMTYPE_HOST ? 0 : sizeof(float))); /* waits for the device */
    if (r >= 2) ts.push_back(MPI_Wtime() - t0);
  }
  std::sort(ts.begin(), ts.end());
  *t = ts[ts.size() / 2];
  k.reset();
  PetscCall(b->mem.free(a));
  PetscCall(b->mem.free(y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  median Forward + Adjoint times of the mode-mixing kernels (KernelTable<T>::spectralmix, spectralmixadjoint)
  of /cpu/ref (the reference loops) and /cpu/blas (the vectorized loops, also /cpu/dnnl's) on one rank's
  tensors of a case, the two called in turn in every repetition
*/
template <class T>
static PetscErrorCode TimeModeMix(const ddnn::SpectralMixGeom &g, PetscInt reps, double *tref, double *tfast)
{
  DDBackend ref = ddnn::DDBackendLookup_Private("/cpu/ref"), fast = ddnn::DDBackendLookup_Private("/cpu/blas");
  decltype(ddnn::KernelTable<T>::spectralmix)        mix[2];
  decltype(ddnn::KernelTable<T>::spectralmixadjoint) adj[2];
  std::vector<double>                                ts[2];

  PetscFunctionBegin;
  for (int b = 0; b < 2; b++) {
    PetscCall(ddnn::DDBackendFind<T>(b ? fast : ref, &ddnn::KernelTable<T>::spectralmix, ddnn::DD_KERNEL_SPECTRAL, &mix[b]));
    PetscCall(ddnn::DDBackendFind<T>(b ? fast : ref, &ddnn::KernelTable<T>::spectralmixadjoint, ddnn::DD_KERNEL_SPECTRAL, &adj[b]));
  }
  std::vector<T> X(2 * g.N * g.Ci * g.K), W(2 * g.Ci * g.Co * g.K), Y(2 * g.N * g.Co * g.K), dX(X.size()), dW(W.size());
  for (size_t j = 0; j < X.size(); j++) X[j] = (T)std::sin(0.1 * (double)j);
  for (size_t j = 0; j < W.size(); j++) W[j] = (T)std::cos(0.07 * (double)j);
  for (PetscInt r = 0; r < reps + 2; r++)
    for (int b = 0; b < 2; b++) {
      double t0 = MPI_Wtime();
      mix[b](g, X.data(), W.data(), Y.data());
      adj[b](g, X.data(), W.data(), Y.data(), dX.data(), dW.data());
      if (r >= 2) ts[b].push_back(MPI_Wtime() - t0);
    }
  for (int b = 0; b < 2; b++) std::sort(ts[b].begin(), ts[b].end());
  *tref  = ts[0][ts[0].size() / 2];
  *tfast = ts[1][ts[1].size() / 2];
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  PetscInt    reps = 20;
  PetscBool   torch = PETSC_TRUE, kernels = PETSC_FALSE;
  char        dts[16] = "float32";
  PetscMPIInt size;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-torch", &torch, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-dtype", dts, sizeof(dts), NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-kernels", &kernels, NULL));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  const DDDataType  dt    = std::string(dts) == "float64" ? DD_FLOAT64 : DD_FLOAT32;
  std::vector<Case> cases = {{8, 24, 32, 32, 8}, {8, 32, 64, 64, 12}, {4, 32, 128, 128, 16}, {1, 64, 256, 256, 16}}; /* the first: the FNO main job's layers (share/ddnn/main_job_fno.opts) */
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "spectral convolution, %s, fwd+bwd medians of %" PetscInt_FMT ", %d rank(s)\n", dts, reps, size));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %6s %12s %12s %14s %14s %7s %10s %7s\n", "case (N,C,H,W) modes", "P", "ddnn [ms]", "torch [ms]", "bytes pruned", "bytes full", "ratio", "", "vs torch"));
  for (const auto &c : cases) {
    double     t, tt = 0;
    PetscInt64 pr, fu;
    PetscCall(RunDDNN(c, {1, 1, (PetscInt)size, 1}, dt, reps, &t, &pr, &fu));
    std::string ver;
    bool        have = false;
    if (size == 1 && torch) have = TorchTime(c, reps, dts, &tt, &ver);
    char name[64];
    snprintf(name, sizeof(name), "%d,%d,%d,%d m%d", (int)c.N, (int)c.C, (int)c.H, (int)c.W, (int)c.m);
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %6d %12.3f %12s %14" PetscInt64_FMT " %14" PetscInt64_FMT " %7.2f %10s %7s\n", name, size, 1e3 * t, have ? std::to_string(1e3 * tt).substr(0, 8).c_str() : "-", pr, fu,
                          pr ? (double)fu / (double)pr : 0.0, "", have ? std::to_string(t / tt).substr(0, 5).c_str() : "-"));
    if (have && c.N == cases.back().N && c.C == cases.back().C) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "(PyTorch %s, one thread)\n", ver.c_str()));
  }
  if (kernels && size == 1) { /* the local FFT kernels of the two stages: r2c along W (N C H rows, m kept), c2c along H (stride m) */
    DDBackend ref = ddnn::DDBackendLookup_Private("/cpu/ref"), blas = ddnn::DDBackendLookup_Private("/cpu/blas"), gpu = ddnn::DDBackendLookup_Private("/gpu/cuda");
    PetscBool havegpu = PETSC_FALSE;
    if (gpu) { /* a CUDA build: a device is there when its memory can be had */
      void *p;
      PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
      havegpu = gpu->mem.malloc(16, &p) == PETSC_SUCCESS ? PETSC_TRUE : PETSC_FALSE;
      PetscCall(PetscPopErrorHandler());
      if (havegpu) PetscCall(gpu->mem.free(p));
    }
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "local FFT kernels (Forward + Adjoint), medians of %" PetscInt_FMT ": %-22s %10s %10s %10s %10s %10s  %s\n", reps, "stage", "fftw [ms]", "cufft [ms]", "ratio", "cpu [ms]", "cpu/fftw", "the CPU chain's kernel (/cpu/blas, also /cpu/dnnl's)"));
    for (const auto &c : cases)
      for (int st = 0; st < 2; st++) {
        const bool     real = st == 0;
        const PetscInt A = real ? c.N * c.C * c.H : c.N * c.C, L = real ? c.W : c.H, B = real ? 1 : c.m;
        double         th, tg = 0, tc;
        char           name[64];
        std::string    kname;
        PetscCall(TimeFftKernel(ref, dt, real, A, L, c.m, B, reps, &th));
        PetscCall(TimeFftKernel(blas, dt, real, A, L, c.m, B, reps, &tc, &kname)); /* the chain's choice, interleaved with FFTW's per stage */
        if (havegpu) PetscCall(TimeFftKernel(gpu, dt, real, A, L, c.m, B, reps, &tg));
        snprintf(name, sizeof(name), "%s %d,%d,%d,%d m%d", real ? "r2c" : "c2c", (int)c.N, (int)c.C, (int)c.H, (int)c.W, (int)c.m);
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%*s%-22s %10.3f %10s %10s %10.3f %10.2f  %s\n", 48, "", name, 1e3 * th, havegpu ? std::to_string(1e3 * tg).substr(0, 8).c_str() : "-", havegpu ? std::to_string(th / tg).substr(0, 6).c_str() : "-", 1e3 * tc, tc / th, kname.c_str()));
      }
    if (!havegpu) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "(no CUDA device%s: cuFFT not timed)\n", gpu ? "" : " backend in this build"));
    /* the mode mixing of a 1-rank layer: X (N, C, 2m, m) complex, C -> C channels */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "mode mixing (Forward + Adjoint), medians of %" PetscInt_FMT ":          %-22s %10s %10s %10s\n", reps, "case", "ref [ms]", "fast [ms]", "ratio"));
    for (const auto &c : cases) {
      ddnn::SpectralMixGeom g;
      double                tr, tf;
      char                  name[64];
      g.N = c.N, g.Ci = c.C, g.Co = c.C, g.K = 2 * c.m * c.m, g.nl = c.m, g.lstart = 0, g.sd = c.W, g.invS = 1.0 / (double)(c.H * c.W);
      if (dt == DD_FLOAT64) PetscCall(TimeModeMix<double>(g, reps, &tr, &tf));
      else PetscCall(TimeModeMix<float>(g, reps, &tr, &tf));
      snprintf(name, sizeof(name), "%d,%d,%d,%d m%d", (int)c.N, (int)c.C, (int)c.H, (int)c.W, (int)c.m);
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%*s%-22s %10.3f %10.3f %10.2f\n", 48, "", name, 1e3 * tr, 1e3 * tf, tf / tr));
    }
  }
  PetscCall(DDFinalize());
  return 0;
}
