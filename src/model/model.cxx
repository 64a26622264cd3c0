/*
  The performance model of layers and distributions (issue 16, items 2 and 4; paper 003 sec. V).

  Time of a layer = local compute + communication (paper 003 sec. V-A, FP/BPx/BPw/BPa):
  - compute: kernel times measured by a calibration run (DDModelCalibrate(), -dd_model_calibrate)
    as in paper 003 sec. V-A ("empirical estimates ... a simple benchmark that times the
    appropriate function"), on the chosen backend and data type, at a few sizes per layer kind,
    fitted as t = c0 + c1 * work (least squares): work is the GEMM flops of conv, convtranspose
    and affine, the bytes read and written by the other kernels; c0 is the per-call overhead.
    conv and affine are fitted over a design of shapes with more terms (GemmBytes(): input and
    output bytes, and the flops of idle vector lanes for conv, the weight's bytes for affine; for
    conv the rows of its column matrix and the flops of its passes that do not run Winograd),
    a network's first layer by the fit of a backward without input gradient; each kind twice,
    warm (tensors out of L2) and cold (out of every cache), the cold fits for networks whose
    memory per rank exceeds the core's L2; on P ranks the fits measured on P ranks at once, each
    call the slowest rank's (the wait for it is part of a layer's time);
  - point-to-point communication: the exact messages and bytes of each primitive's set-up graph
    (DDPrimitiveGetCommVolume(), from the exchange engine's plan) priced with the linear model
    alpha + beta n (paper 003 sec. II-B, SR(n)), alpha and beta fitted to a ping-pong at several
    sizes on this machine (least squares), full duplex: max(sent, received) per rank;
  - collectives (weight broadcast / gradient sum-reduce, the norms' all-sum-reduce): measured
    (MPI_Ibcast, MPI_Reduce, MPI_Allreduce in groups of 2 ... P ranks, t = c0 + c1 bytes); at a
    group size not measured, the models of Thakur et al. (paper 003 ref. [22]) on alpha and beta,
    the cheaper of the short-message (binomial tree, recursive doubling) and the long-message
    algorithm (scatter + allgather, Rabenseifner's reduce-scatter + gather or allgather).
  Memory per rank per layer: the output and the tensors kept for backward (activations), the
  halo regions and the exchange engine's message buffers, weights and gradients, and the layer's
  other work tensors (those its primitives were set up on).

  The calibration is cached per machine in a small text file (DDModelGetCachePath()).
*/
#include <sys/shmarena.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <ddnn/private/ddprimitiveimpl.h>
#include <ddnn/private/ddnetimpl.h>
#include <primitive/exchange.hpp>
#include <tensor/layout.hpp>
#include <ddmodel.h>
#include <ddconf.h>
#include "modelimpl.hpp"
#include <petsctime.h>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/ddcxx.hpp>

#ifndef DDNN_MODEL_CACHE_DIR
  #define DDNN_MODEL_CACHE_DIR "."
#endif

namespace
{
/* t = c0 + c1 work (+ cx . (input bytes, output bytes, conv: wasted lane flops / affine: weight bytes, conv: column rows, conv: flops of the passes not run by Winograd) for conv and affine, GemmBytes()) */
struct Fit {
  double c0 = 0, c1 = 0, cx[5] = {0, 0, 0, 0, 0};
};

struct ModelState {
  bool                       loaded = false; /* the cache file was read (or found absent) */
  bool                       commok = false;
  int                        stale  = 0; /* the cache file's version when it is an older one (its contents ignored) */
  double                     alpha = 0, beta = 0;
  std::map<std::string, Fit> kern; /* "backend dtype kind f|b" */
  std::map<std::string, double> runcost; /* seconds per run of a pointwise loop over two layouts (same keys) */
  std::string                path;
};
ModelState M;

/* version 2: the GEMM kinds' fits have three more terms, and concat, flatten and the losses their own fits;
   version 3: average pooling its own fit ("pool-avg"), the losses' backward timed as a network calls it (dy = NULL);
   version 4: max pooling timed after a convolution (its format) with the output halo of a 3 x 3 convolution consumer;
   version 5: /cpu/blas's 3 x 3 convolutions of >= 16 channels run Winograd F(4x4, 3x3) or F(2x2, 3x3) (0.5-0.9 of the GEMM
   kernels' time), and average pooling on a blocked input its own fit ("pool-avg-blocked");
   version 6: the optimizers' updates their own fits ("update-sgd", "update-momentum", "update-adam": DDOptimizerStep() timed),
   and a flatten of a blocked input its own ("flatten-blocked");
   version 7: host tensors on transparent huge pages by default (-dd_host_hugepages, src/sys/shmarena.cxx): the memory-bound
   kernels run 1.3-1.5x faster on tensors out of the caches, so a version 6 calibration (4 KiB pages) is stale; a
   concatenation of blocked inputs ("concat-blocked") and a row walk between blocked tensors ("activation-rows-blocked")
   have their own fits (a version 7 cache without them prices as before);
   version 8: the pointwise walks between layouts of different halos (ForEachBulkRunPair()) keep their offsets by
   additions and merge the dimensions both hold whole: a ReLU into a 3 x 3 convolution's halo runs 2-5x faster per row,
   so a version 7 calibration's per-run costs are stale;
   version 9: every time is the median of its repetitions, not their lower quartile (calibrate.cxx, MedianOf()), so a
   version 8 calibration prices the machine's quiet moments; a plain row's cost has a term per entry of the row
   ("activation-rows-len", ddnn::ModelKindRowsLen; a cache without it prices one cost per row);
   version 10: the float64 max pool's fast loops, leaky ReLU and PReLU, sigmoid, SiLU, ELU and float32 GELU run without
   a branch on their data (1.3x, 16x, 8x, 8x, 3.4x, 2.4x faster in float32 where they ran on those loops), so a version
   9 calibration prices them at their old speeds;
   version 11: softplus runs on a branch-free exp and log1p (4.6x faster in float32), tanh on sigmoid's exp (1.2-1.3x
   faster with AVX2), float32 ELU in float (2x faster), and tanh's and sigmoid's backward read the output, so a version
   10 calibration's "activation-softplus", "activation-tanh", "activation-sigmoid" and float32 "activation-elu" are stale;
   version 12: float32 GELU's erf takes one exp and no division (1.6x faster), so a version 11 calibration's float32
   "activation-gelu" is stale; version 13: the pointwise loops' AVX-512 copies (1.2-1.7x faster than AVX2 where the
   CPU has AVX-512; float64 GELU, on libm's erf, unchanged), so a version 12 calibration's "activation-tanh", "-sigmoid", "-silu", "-elu", "-gelu" and
   "-softplus" are stale; version 14: the max pool's rows of stride 1 and 2 run on AVX-512 where the CPU has it
   (float64 1.4x faster on plain storage) and its channels-last and blocked loops write and read the argmax in
   runs (2.2x faster in float64), so a version 13 calibration's "pool" is stale; version 15: the bilinear upsampling's
   backward on channels-innermost storage keeps two or three source rows instead of all of them (15-17 % faster on
   1 x 16 x 256 x 256 float64), so a version 14 calibration's "upsample" is stale; version 16: float64 GELU's erf and exp
   run on glibc's vector math library (2.5-3.8x faster fwd+bwd on 1 x 16 x 512 x 512), so a version 15 calibration's
   float64 "activation-gelu" is stale, and so are its 1 x 1 convolutions on plain inputs on /cpu/dnnl, which keep plain
   storage since late in version 15's life (a cache written before timed them blocked) */
const int         cacheVersion = 16; /* bench/bench_paper_model.cxx writes caches of this version too (-machine v100, rates) */
const char *const cacheMagic   = "ddnn-model-cache 16";

std::string HostName()
{
  char h[256] = {0};
  if (gethostname(h, sizeof(h) - 1)) std::strcpy(h, "unknown");
  for (char *c = h; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  return h;
}

std::string KernelKey(const std::string &backend, DDDataType dt, const std::string &kind, bool bwd)
{
  return backend + " " + DDDataTypes[dt] + " " + kind + " " + (bwd ? "b" : "f");
}

/* a calibration on P > 1 ranks stores its fits under "<backend>@P" (the kernels timed on every rank
   at once, each call the slowest rank's time); a prediction on P ranks uses those, else the ones of
   a calibration on one rank */
std::map<std::string, Fit>::const_iterator FindKern(const std::string &bname, PetscMPIInt P, DDDataType dt, const std::string &kind, bool bwd)
{
  if (P > 1) {
    auto it = M.kern.find(KernelKey(bname + "@" + std::to_string(P), dt, kind, bwd));
    if (it != M.kern.end()) return it;
  }
  return M.kern.find(KernelKey(bname, dt, kind, bwd));
}

std::map<std::string, double>::const_iterator FindRunCost(const std::string &bname, PetscMPIInt P, DDDataType dt, const std::string &kind, bool bwd)
{
  if (P > 1) {
    auto it = M.runcost.find(KernelKey(bname + "@" + std::to_string(P), dt, kind, bwd));
    if (it != M.runcost.end()) return it;
  }
  return M.runcost.find(KernelKey(bname, dt, kind, bwd));
}

/* least squares of t = c0 + c1 w in relative error (weights 1/t^2): the small sizes, where the
   per-call cost c0 dominates, count as much as the large ones (LeNet's layers are small) */
Fit LeastSquares(const std::vector<double> &w, const std::vector<double> &t)
{
  double n = 0, sw = 0, st = 0, sww = 0, swt = 0;
  for (size_t i = 0; i < w.size(); i++) {
    double q = t[i] > 0 ? 1.0 / (t[i] * t[i]) : 1.0;
    n += q;
    sw += q * w[i];
    st += q * t[i];
    sww += q * w[i] * w[i];
    swt += q * w[i] * t[i];
  }
  Fit    f;
  double d = n * sww - sw * sw;
  f.c1     = d > 0 ? (n * swt - sw * st) / d : 0;
  f.c0     = (st - f.c1 * sw) / n;
  if (f.c1 < 0 || f.c0 < 0) { /* noise, or no overhead to see: a pure rate, fitted through the origin in relative error */
    double num = 0, den = 0;
    for (size_t i = 0; i < w.size(); i++) {
      double q = t[i] > 0 ? 1.0 / (t[i] * t[i]) : 1.0;
      num += q * w[i] * t[i];
      den += q * w[i] * w[i];
    }
    f.c0 = 0;
    f.c1 = den > 0 ? num / den : t.back() / w.back();
  }
  return f;
}

/* least squares of t = c . (1, features) in relative error (weights 1/t^2) with non-negative
   coefficients: the terms that come out negative are dropped one at a time (the most negative first)
   and the rest refitted (an active-set NNLS of a few terms); at least the first feature (the flops) is kept */
Fit LeastSquaresMulti(const std::vector<std::vector<double>> &X, const std::vector<double> &t)
{
  const size_t      m = X.empty() ? 0 : X[0].size() + 1;
  std::vector<bool> on(m, true);
  std::vector<double> c(m, 0);
  for (size_t pass = 0; pass < m; pass++) {
    std::vector<size_t> idx;
    for (size_t j = 0; j < m; j++)
      if (on[j]) idx.push_back(j);
    const size_t        k = idx.size();
    std::vector<double> A(k * k, 0), r(k, 0);
    for (size_t i = 0; i < t.size(); i++) {
      double q = t[i] > 0 ? 1.0 / (t[i] * t[i]) : 1.0;
      for (size_t a = 0; a < k; a++) {
        double fa = idx[a] ? X[i][idx[a] - 1] : 1.0;
        r[a] += q * fa * t[i];
        for (size_t b = 0; b < k; b++) A[a * k + b] += q * fa * (idx[b] ? X[i][idx[b] - 1] : 1.0);
      }
    }
    /* Gaussian elimination with partial pivoting, scaled by the diagonal (the features span 10 decades) */
    std::vector<double> sc(k);
    for (size_t a = 0; a < k; a++) sc[a] = A[a * k + a] > 0 ? 1.0 / std::sqrt(A[a * k + a]) : 1.0;
    for (size_t a = 0; a < k; a++) {
      r[a] *= sc[a];
      for (size_t b = 0; b < k; b++) A[a * k + b] *= sc[a] * sc[b];
    }
    bool singular = false;
    for (size_t a = 0; a < k && !singular; a++) {
      size_t p = a;
      for (size_t b = a + 1; b < k; b++)
        if (std::fabs(A[b * k + a]) > std::fabs(A[p * k + a])) p = b;
      if (std::fabs(A[p * k + a]) < 1e-12) {
        singular = true;
        break;
      }
      if (p != a) {
        for (size_t b = 0; b < k; b++) std::swap(A[a * k + b], A[p * k + b]);
        std::swap(r[a], r[p]);
      }
      for (size_t b = a + 1; b < k; b++) {
        double f = A[b * k + a] / A[a * k + a];
        for (size_t e = a; e < k; e++) A[b * k + e] -= f * A[a * k + e];
        r[b] -= f * r[a];
      }
    }
    std::vector<double> x(k, 0);
    if (!singular)
      for (size_t a = k; a-- > 0;) {
        double v = r[a];
        for (size_t b = a + 1; b < k; b++) v -= A[a * k + b] * x[b];
        x[a] = v / A[a * k + a];
      }
    size_t worst = m;
    double wv    = 0;
    for (size_t a = 0; a < k; a++) {
      x[a] *= sc[a];
      if (singular) {
        if (idx[a] > 1) worst = idx[a]; /* dependent features: drop the last extra term */
      } else if (idx[a] != 1 && x[a] < wv) { /* the flops term is kept */
        wv    = x[a];
        worst = idx[a];
      }
    }
    if (singular && worst == m) break; /* c[1] = 0: the plain rate below */
    if (worst == m) {
      std::fill(c.begin(), c.end(), 0.0);
      for (size_t a = 0; a < k; a++) c[idx[a]] = x[a];
      break;
    }
    on[worst] = false;
  }
  Fit f;
  if (c.size() < 2 || c[1] <= 0) { /* nothing sensible: the rate alone */
    std::vector<double> w;
    for (auto &row : X) w.push_back(row[0]);
    return LeastSquares(w, t);
  }
  f.c0 = c[0];
  f.c1 = c[1];
  for (size_t j = 2; j < m && j < 7; j++) f.cx[j - 2] = c[j];
  return f;
}

/* the layer kinds the calibration times; the others are priced as the generic memory-bound kernel */
const char *const calibratedKinds[] = {DDLAYERCONV, DDLAYERCONVTRANSPOSE, DDLAYERAFFINE, DDLAYERACTIVATION, DDLAYERBATCHNORM, DDLAYERPOOL, DDLAYERUPSAMPLE, DDLAYERCONCAT, DDLAYERFLATTEN, DDLAYERLOSS};
/* a loss against class indices (cross-entropy: a softmax per sample) has its own fit; the others (mse, l1, soft targets) the loss's */
const char *const kindLossCE = "loss-crossentropy";

/* the net's own kernels (DDNetBackward's zeroing of the output gradients and accumulation of
   the gradients of tensors with several consumers, DDNetZeroGradients, the optimizer's update),
   calibrated as these kinds of the kernel table: t = c0 + c1 bytes */
const char *const kindZero = "tensorzero", *const kindAxpy = "tensoraxpy";
/* a halo exchange (DDPRIMITIVEHALO) applied as a layer applies it, on more than one rank: t = c0 + c1 max(bytes sent, received) */
const char *const kindHalo = "halo";
const char *const kindHaloDirect = "halo-direct";

/* the activation functions other than relu, calibrated separately as "activation-<type>" (a
   tanh costs some 40x a relu per entry: LeNet-5's); prelu is priced as leakyrelu */
const DDActivationType calibratedActs[] = {DD_ACT_LEAKYRELU, DD_ACT_TANH, DD_ACT_SIGMOID, DD_ACT_GELU, DD_ACT_IDENTITY, DD_ACT_SILU, DD_ACT_ELU, DD_ACT_SOFTPLUS};

std::string ActKind(DDActivationType t)
{
  if (t == DD_ACT_RELU) return DDLAYERACTIVATION;
  if (t == DD_ACT_PRELU) t = DD_ACT_LEAKYRELU;
  return std::string(DDLAYERACTIVATION) + "-" + DDActivationTypes[t];
}

bool IsGemmKind(const std::string &k)
{
  return k == DDLAYERCONV || k == DDLAYERCONVTRANSPOSE || k == DDLAYERAFFINE || k == ddnn::ModelKindConvPointwise;
}

/* the window kinds (pooling, upsampling): their fits have a term in the output's rows (ModelWindowRows_Private()) */
bool IsWindowKind(const std::string &k)
{
  return k == DDLAYERPOOL || k == ddnn::ModelKindPoolAvg || k == ddnn::ModelKindPoolAvgBlocked || k == DDLAYERUPSAMPLE;
}
} // namespace

static PetscErrorCode ModelCachePath(std::string &path)
{
  char      buf[PETSC_MAX_PATH_LEN];
  PetscBool set;

  PetscFunctionBegin;
  PetscCall(PetscOptionsGetString(NULL, NULL, "-dd_model_cache", buf, sizeof(buf), &set));
  if (set) path = buf;
  else {
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && x[0]) path = std::string(x) + "/ddnn/model-" + HostName() + ".txt";
    else path = std::string(DDNN_MODEL_CACHE_DIR) + "/ddnn-model-cache/model-" + HostName() + ".txt";
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDModelGetCachePath - The file the performance model's calibration is cached in

  Not collective

  Output Parameter:
. path - the path (owned by ddnn; valid until the next call)

  Options Database Key:
. -dd_model_cache <path> - the file; default $XDG_CACHE_HOME/ddnn/model-<host>.txt, or, without
  XDG_CACHE_HOME, ddnn-model-cache/model-<host>.txt in ddnn's build directory. ddnn writes nowhere else.

  Level: intermediate

.seealso: `DDModelCalibrate()`, `DDModelLoad()`
@*/
PetscErrorCode DDModelGetCachePath(const char *path[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidPointer(path, 1);
  PetscCall(ModelCachePath(M.path));
  *path = M.path.c_str();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a cache line "kernel <backend> <dtype> <kind> <f|b>" and its numbers c0 c1 [c2 c3 c4 [c5 [c6]]] (the
   forms of cache versions 5 and before: 2, 5, 6 or 7 numbers, the line consumed whole): how many
   numbers, 0 if it is no such line; e gets the further terms (the missing ones 0) */
static int KernelLine(const std::string &s, char a[256], char b[64], char c[64], char d[8], double *x, double *y, double e[5])
{
  int    n = 0, k = 0, m;
  double v[7];
  if (sscanf(s.c_str(), "kernel %255s %63s %63s %7s%n", a, b, c, d, &n) != 4) return 0;
  while (k < 7 && sscanf(s.c_str() + n, " %lg%n", &v[k], &m) == 1) n += m, k++;
  if (n != (int)s.size() || (k != 2 && k != 5 && k != 6 && k != 7)) return 0;
  *x = v[0];
  *y = v[1];
  for (int j = 0; j < 5; j++) e[j] = j + 2 < k ? v[j + 2] : 0;
  return k;
}

/* reads the cache into M (entries of the file replace those in memory); a missing file is not an
   error; a file we cannot use leaves M alone and says why (the callers raise the error, on every
   rank where they are collective) */
static PetscErrorCode ModelReadCacheWhy(const std::string &path, PetscBool *found, std::string &why)
{
  FILE   *f;
  char   *line = NULL; /* getline(): lines of any length, NUL bytes counted */
  size_t  cap  = 0;
  ssize_t len;
  int     ln = 0;

  PetscFunctionBegin;
  *found = PETSC_FALSE;
  why.clear();
  M.stale = 0;
  f = fopen(path.c_str(), "r");
  if (!f) {
    if (errno != ENOENT) why = std::string("it cannot be read (") + strerror(errno) + ")";
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  {
    struct stat sb;
    if (!fstat(fileno(f), &sb) && !S_ISREG(sb.st_mode)) {
      fclose(f);
      why = S_ISDIR(sb.st_mode) ? "it is a directory" : "it is not a regular file";
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  std::map<std::string, Fit> kern;
  std::map<std::string, double> runcost;
  bool                       commok = false, host = false;
  double                     alpha = 0, beta = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    ln++;
    std::string s(line, (size_t)len);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (s.find('\0') != std::string::npos) {
      why = "line " + std::to_string(ln) + " holds a NUL byte (not a text file)";
      break;
    }
    if (ln == 1) {
      int v = 0, nv = 0;
      if (sscanf(s.c_str(), "ddnn-model-cache %d%n", &v, &nv) == 1 && nv == (int)s.size() && v >= 1 && v < cacheVersion) { /* an older ddnn's: stale, recalibrated */
        fclose(f);
        free(line);
        M.stale = v;
        PetscFunctionReturn(PETSC_SUCCESS);
      }
      if (s != cacheMagic) {
        why = "its first line is not \"" + std::string(cacheMagic) + "\" (not a ddnn model cache, or a newer version)";
        break;
      }
      continue;
    }
    if (s.empty() || s[0] == '#') continue;
    char   a[256], b[64], c[64], d[8];
    double x, y, e[5] = {0, 0, 0, 0, 0};
    int    n = 0;
    if (!strncmp(s.c_str(), "host ", 5)) {
      if (s.substr(5) != HostName()) {
        why = "it was calibrated on host " + s.substr(5) + ", not on this one (" + HostName() + "): a foreign cache";
        break;
      }
      host = true;
    } else if (sscanf(s.c_str(), "comm %lg %lg%n", &x, &y, &n) == 2 && n == (int)s.size() && x >= 0 && y >= 0 && std::isfinite(x) && std::isfinite(y)) {
      commok = true;
      alpha  = x;
      beta   = y;
    } else if (KernelLine(s, a, b, c, d, &x, &y, e) && (!strcmp(d, "f") || !strcmp(d, "b")) && x >= 0 && y >= 0 && std::isfinite(x) && std::isfinite(y) && e[0] >= 0 && e[1] >= 0 && e[2] >= 0 && e[3] >= 0 && e[4] >= 0 && std::isfinite(e[0] + e[1] + e[2] + e[3] + e[4])) {
      PetscInt  dt;
      PetscBool ok;
      PetscCall(PetscEListFind(2, DDDataTypes, b, &dt, &ok)); /* float32, float64 */
      if (!ok) {
        fclose(f);
        free(line);
        why = "line " + std::to_string(ln) + " names an unknown data type " + b;
        PetscFunctionReturn(PETSC_SUCCESS);
      }
      Fit fit;
      fit.c0 = x;
      fit.c1 = y;
      for (int j = 0; j < 5; j++) fit.cx[j] = e[j]; /* 5 numbers: the three terms of a cache without the column rows' (e[3] = 0); 6: without the direct passes' flops (e[4] = 0); 2: none */
      kern[KernelKey(a, (DDDataType)dt, c, d[0] == 'b')] = fit;
    } else if (sscanf(s.c_str(), "runcost %255s %63s %63s %7s %lg%n", a, b, c, d, &x, &n) == 5 && n == (int)s.size() && (!strcmp(d, "f") || !strcmp(d, "b")) && x >= 0 && std::isfinite(x)) {
      PetscInt  dt;
      PetscBool ok;
      PetscCall(PetscEListFind(2, DDDataTypes, b, &dt, &ok));
      if (!ok) {
        fclose(f);
        free(line);
        why = "line " + std::to_string(ln) + " names an unknown data type " + b;
        PetscFunctionReturn(PETSC_SUCCESS);
      }
      runcost[KernelKey(a, (DDDataType)dt, c, d[0] == 'b')] = x;
    } else {
      why = "line " + std::to_string(ln) + " is malformed: \"" + s + "\"";
      break;
    }
  }
  fclose(f);
  free(line);
  if (why.empty() && ln == 0) why = "it is empty";
  if (why.empty() && !host) why = "it names no host";
  if (!why.empty()) PetscFunctionReturn(PETSC_SUCCESS);
  if (commok) {
    M.commok = true;
    M.alpha  = alpha;
    M.beta   = beta;
  }
  for (auto &kv : kern) M.kern[kv.first] = kv.second;
  for (auto &kv : runcost) M.runcost[kv.first] = kv.second;
  *found = PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}

#define MODEL_CACHE_ERR "The model cache %s cannot be used: %s. Remove it, or recalibrate (-dd_model_calibrate) with -dd_model_cache naming another file"

static PetscErrorCode ModelReadCache(const std::string &path, PetscBool *found)
{
  std::string why;

  PetscFunctionBegin;
  PetscCall(ModelReadCacheWhy(path, found, why));
  PetscCheck(why.empty(), PETSC_COMM_SELF, PETSC_ERR_FILE_UNEXPECTED, MODEL_CACHE_ERR, path.c_str(), why.c_str());
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ModelMkdirs(const std::string &path)
{
  PetscFunctionBegin;
  for (size_t i = 1; i < path.size(); i++) {
    if (path[i] != '/') continue;
    std::string d = path.substr(0, i);
    if (mkdir(d.c_str(), 0755) && errno != EEXIST) SETERRQ(PETSC_COMM_SELF, PETSC_ERR_FILE_OPEN, "Cannot create the directory %s of the model cache %s: %s", d.c_str(), path.c_str(), strerror(errno));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode ModelWriteCache(const std::string &path)
{
  PetscFunctionBegin;
  PetscCall(ModelMkdirs(path));
  std::string tmp = path + ".tmp" + std::to_string((long)getpid());
  FILE       *f   = fopen(tmp.c_str(), "w");
  PetscCheck(f, PETSC_COMM_SELF, PETSC_ERR_FILE_OPEN, "Cannot write the model cache %s: %s", tmp.c_str(), strerror(errno));
  fprintf(f, "%s\n# ddnn performance model calibration (DDModelCalibrate): t = c0 + c1 work [conv, affine: + c2 input bytes + c3 output bytes + c4 (conv: flops of idle vector lanes; affine: weight bytes) + c5 (conv: rows of the column matrix) + c6 (conv: flops of the passes not run by Winograd)] [pool, upsample: + c2 output rows] (+ runcost per run of a pointwise loop); comm: alpha [s] beta [s/byte]\nhost %s\n", cacheMagic, HostName().c_str());
  if (M.commok) fprintf(f, "comm %.9g %.9g\n", M.alpha, M.beta);
  for (auto &kv : M.kern) {
    const Fit &k = kv.second;
    if (k.cx[4]) fprintf(f, "kernel %s %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", kv.first.c_str(), k.c0, k.c1, k.cx[0], k.cx[1], k.cx[2], k.cx[3], k.cx[4]);
    else if (k.cx[0] || k.cx[1] || k.cx[2] || k.cx[3]) fprintf(f, "kernel %s %.9g %.9g %.9g %.9g %.9g %.9g\n", kv.first.c_str(), k.c0, k.c1, k.cx[0], k.cx[1], k.cx[2], k.cx[3]);
    else fprintf(f, "kernel %s %.9g %.9g\n", kv.first.c_str(), k.c0, k.c1);
  }
  for (auto &kv : M.runcost) fprintf(f, "runcost %s %.9g\n", kv.first.c_str(), kv.second);
  PetscCheck(fclose(f) == 0, PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "Cannot write the model cache %s", tmp.c_str());
  PetscCheck(rename(tmp.c_str(), path.c_str()) == 0, PETSC_COMM_SELF, PETSC_ERR_FILE_WRITE, "Cannot move %s to the model cache %s: %s", tmp.c_str(), path.c_str(), strerror(errno));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* reads the cache once per process (on every rank: the file is small) */
static PetscErrorCode ModelEnsureLoaded(void)
{
  PetscBool found;

  PetscFunctionBegin;
  if (M.loaded) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(ModelCachePath(M.path));
  PetscCall(ModelReadCache(M.path, &found));
  M.loaded = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDModelLoad - Reads the performance model's calibration from its cache file and says whether it holds the kernel rates of a backend and data type

  Collective

  Input Parameters:
+ comm    - the ranks that will use the model
. backend - the backend's name (NULL: the default backend)
- dt      - the data type

  Output Parameter:
. calibrated - whether the cache holds the fits of every calibrated layer kind for backend and dt
  (and the per-run cost of the pointwise loops, and the zeroing and axpy of the network's own work)

  Notes:
  A cache file that is not ours, is malformed, is of a newer version, or was written on another
  host is an error naming the file. A missing file is not, nor one written by an older ddnn (an
  older cache version: its fits are those of an older model): calibrated is then `PETSC_FALSE`,
  `DDNetViewModel()` says the cache is stale, and `DDModelCalibrate()` (-dd_model_calibrate) rewrites it.

  Level: intermediate

.seealso: `DDModelCalibrate()`, `DDModelGetCachePath()`
@*/
PetscErrorCode DDModelLoad(MPI_Comm comm, const char backend[], DDDataType dt, PetscBool *calibrated)
DD_CXX_TRY
{
  const char *bname = backend;
  PetscBool   found, all = PETSC_TRUE;

  PetscFunctionBegin;
  PetscValidPointer(calibrated, 4);
  PetscCall(ModelCachePath(M.path));
  {
    std::string why;
    PetscCall(ModelReadCacheWhy(M.path, &found, why));
    DDCheckAll(comm, why.empty(), PETSC_ERR_FILE_UNEXPECTED, MODEL_CACHE_ERR, M.path.c_str(), why.c_str()); /* on every rank, so that none waits in a collective */
  }
  M.loaded = true;
  if (!bname) PetscCall(DDBackendGetDefault(&bname));
  PetscMPIInt P;
  PetscCallMPI(MPI_Comm_size(comm, &P));
  auto has = [&](const std::string &k, bool b) { return FindKern(bname, P, dt, k, b) != M.kern.end(); };
  for (auto k : calibratedKinds)
    for (int b = 0; b < 2; b++)
      if (!has(k, b)) all = PETSC_FALSE;
  for (int b = 0; b < 2; b++)
    if (!has(kindLossCE, b) || !has(ddnn::ModelKindPoolAvg, b) || !has(ddnn::ModelKindPoolAvgBlocked, b)) all = PETSC_FALSE;
  for (auto k : {DDLAYERCONV, DDLAYERAFFINE})
    if (!has(std::string(k) + "-wgrad", true)) all = PETSC_FALSE;
  for (int b = 0; b < 2; b++) {
    if (FindRunCost(bname, P, dt, DDLAYERACTIVATION, b) == M.runcost.end() || FindRunCost(bname, P, dt, "activation-rows", b) == M.runcost.end()) all = PETSC_FALSE;
    for (auto a : calibratedActs)
      if (!has(ActKind(a), b)) all = PETSC_FALSE;
  }
  for (auto k : {kindZero, kindAxpy})
    if (!has(k, false)) all = PETSC_FALSE;
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &all, 1, MPIU_BOOL, MPI_LAND, comm));
  *calibrated = all;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDModelSetCommParameters - Sets the latency and inverse bandwidth of the model's point-to-point messages (instead of measuring them)

  Not collective

  Input Parameters:
+ alpha - seconds per message
- beta  - seconds per byte

  Notes:
  For hypothetical machines (the predictions for paper 000's and 003's configurations). Not written to the cache.

  Level: advanced

.seealso: `DDModelGetCommParameters()`, `DDModelCalibrate()`
@*/
PetscErrorCode DDModelSetCommParameters(PetscReal alpha, PetscReal beta)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCheck(alpha >= 0 && beta >= 0 && !PetscIsInfOrNanReal(alpha) && !PetscIsInfOrNanReal(beta), PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "alpha %g and beta %g must be finite and >= 0", (double)alpha, (double)beta);
  PetscCall(ModelEnsureLoaded());
  M.commok = true;
  M.alpha  = alpha;
  M.beta   = beta;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDModelGetCommParameters - The latency and inverse bandwidth of the model's messages (alpha + beta n)

  Not collective

  Output Parameters:
+ alpha      - seconds per message
. beta       - seconds per byte
- calibrated - whether they were measured (or set); if not, alpha and beta are 0

  Level: intermediate

.seealso: `DDModelCalibrate()`, `DDModelSetCommParameters()`
@*/
PetscErrorCode DDModelGetCommParameters(PetscReal *alpha, PetscReal *beta, PetscBool *calibrated)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(ModelEnsureLoaded());
  if (alpha) *alpha = M.alpha;
  if (beta) *beta = M.beta;
  if (calibrated) *calibrated = M.commok ? PETSC_TRUE : PETSC_FALSE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDModelGetKernelFit - The calibrated time of a layer kind's kernels, t = c0 + c1 work

  Not collective

  Input Parameters:
+ backend  - the backend's name (NULL: the default)
. dt       - the data type
. kind     - the layer type (`DDLAYERCONV`, ...)
- backward - `PETSC_FALSE`: forward, `PETSC_TRUE`: backward

  Output Parameters:
+ c0         - seconds per call
. c1         - seconds per unit of work: per flop for conv, convtranspose and affine, per byte read and written otherwise
- calibrated - whether the cache holds this fit

  Notes:
  The fits of conv and affine have more terms (input and output bytes, idle-lane flops or
  weight bytes; for conv the column matrix's rows and the flops of the passes not run by Winograd;
  `DDModelCalibrate()`), and those of pool and upsample a term in their output's rows, not returned here. The kind may carry a suffix: "-wgrad"
  (the backward of a first layer), ":cold" (tensors in memory); backend "<name>@P" names the fits
  measured on P ranks at once, and "bcast-g<g>", "allsum-g<g>" the collectives in groups of g ranks.

  Level: intermediate

.seealso: `DDModelCalibrate()`, `DDLayerGetModelWork()`
@*/
PetscErrorCode DDModelGetKernelFit(const char backend[], DDDataType dt, const char kind[], PetscBool backward, PetscReal *c0, PetscReal *c1, PetscBool *calibrated)
DD_CXX_TRY
{
  const char *bname = backend;

  PetscFunctionBegin;
  PetscValidCharPointer(kind, 3);
  PetscCall(ModelEnsureLoaded());
  if (!bname) PetscCall(DDBackendGetDefault(&bname));
  auto it = M.kern.find(KernelKey(bname, dt, kind, backward));
  if (c0) *c0 = it == M.kern.end() ? 0 : it->second.c0;
  if (c1) *c1 = it == M.kern.end() ? 0 : it->second.c1;
  if (calibrated) *calibrated = it == M.kern.end() ? PETSC_FALSE : PETSC_TRUE;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDModelReset - Forgets the calibration held in memory (the cache file is read again on next use)

  Not collective

  Level: advanced

.seealso: `DDModelLoad()`
@*/
PetscErrorCode DDModelReset(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  M = ModelState();
  ddnn::ModelForgetMeasured_Private();
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* ---------------------------------------------------------------------------------------------
   The work of a layer: GEMM flops (conv kinds, affine) or bytes read and written (the others)
   --------------------------------------------------------------------------------------------- */
static PetscInt64 Bulk(DDTensor t)
{
  return (t && t->active) ? (PetscInt64)t->layout.bulksize : 0;
}

static PetscInt64 Storage(DDTensor t)
{
  return (t && t->active) ? (PetscInt64)t->layout.size : 0;
}

/*@C
  DDLayerGetModelWork - The local work of a set-up layer's forward or backward kernels on this rank, in the unit its kind is calibrated in

  Not collective

  Input Parameters:
+ layer    - the set-up layer
- backward - `PETSC_FALSE`: forward, `PETSC_TRUE`: backward

  Output Parameters:
+ flops - GEMM flops (conv, convtranspose, affine: 2 per multiply-add; backward: the data and the weight gradient, twice the forward); 0 for the other kinds
- bytes - bytes read and written (the other kinds: inputs and output forward; inputs, output and its gradient backward); 0 for the GEMM kinds

  Notes:
  The convolution's flops are 2 |y_local| |w| / C_out (the local output times the filter's
  reduction length), the transposed one's 2 |x_local| |w| / C_in, the affine's 2 |y_local| F_in:
  exact for sample, spatial and filter partitions (paper 003 sec. V-A, C(n, c, h, w, f)); for a
  channel partition of a convolution they count the whole reduction on every rank.

  Level: intermediate

.seealso: `DDLayerGetModelTime()`, `DDModelCalibrate()`
@*/
PetscErrorCode DDLayerGetModelWork(DDLayer layer, PetscBool backward, PetscReal *flops, PetscReal *bytes)
DD_CXX_TRY
{
  DDLayerType type;
  PetscReal   f = 0, b = 0;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up before asking for its model");
  PetscCall(DDLayerGetType(layer, &type));
  std::string kind = type;
  DDTensor    y    = layer->output;
  if (IsGemmKind(kind) && layer->nparams > 0) {
    DDTensor   w  = layer->params[0];
    PetscInt64 nw = 1;
    for (PetscInt d = 0; d < w->order; d++) nw *= w->shape[d];
    if (kind == DDLAYERCONV) f = 2.0 * (PetscReal)Bulk(y) * (PetscReal)(nw / PetscMax(w->shape[0], 1));
    else if (kind == DDLAYERCONVTRANSPOSE) f = 2.0 * (PetscReal)Bulk(layer->setupin[0]) * (PetscReal)(nw / PetscMax(w->shape[0], 1));
    else f = 2.0 * (PetscReal)Bulk(y) * (PetscReal)w->shape[w->order - 1]; /* affine: weight (F_out, F_in) */
    if (backward) f *= 2;
  } else {
    size_t     es;
    PetscInt64 in = 0;
    PetscCall(DDDataTypeGetSize(y->dtype, &es));
    for (PetscInt i = 0; i < layer->nin; i++) in += Bulk(layer->setupin[i]);
    b = (PetscReal)es * (PetscReal)(in + (backward ? 2 : 1) * Bulk(y));
  }
  if (flops) *flops = f;
  if (bytes) *bytes = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the lanes of this core's widest vector registers for entries of es bytes */
static double VectorLanes(size_t es)
{
#if defined(__x86_64__) || defined(__i386__)
  size_t bytes = __builtin_cpu_supports("avx512f") ? 64 : (__builtin_cpu_supports("avx2") ? 32 : 16);
#else
  size_t bytes = 16;
#endif
  return (double)PetscMax((size_t)1, bytes / es);
}

/* the GEMM kinds' other terms on this rank: the bytes of the (first) input and of the output, and
   for conv the flops its vector lanes waste, for affine the bytes of its weight. Convolution
   kernels vectorise over channels (oneDNN: blocks of 16 fp32 channels): with few output channels
   (forward, weight gradient) or input channels (data gradient) most lanes idle, and the U-Net's
   16 -> 1 1x1 and LeNet's 1 -> 6 5x5 and 6 -> 16 5x5 run at a tenth to a third of the rate of
   16 -> 16 3x3; the flops of the channels padded to whole vectors, less the true ones, price that.
   An affine layer on a small batch streams its weight. Fitted over such shapes (DDModelCalibrate()) */
namespace ddnn
{
double ModelConvIdleFlops_Private(size_t es, double co, double ci, double f, PetscBool backward)
{
  const double V = VectorLanes(es);
  const double po = std::ceil(co / V) * V / co, pi = std::ceil(ci / V) * V / ci; /* padded / true channels */
  return backward ? f * (pi + po - 2) : f * (po - 1);
}

/* The GEMM convolution kernels (float64 on /cpu/blas, src/backend/blas/conv_gemm.cxx) gather the
   column matrix (im2col) row by row: one contiguous copy of Wout entries per (sample, input
   channel, tap, output row), and the data gradient scatters it back (col2im); each costs a fixed
   amount on top of its entries. Their number does not shrink when the W dimension is split: on 2
   ranks the U-Net's decoder convolutions (W split in two) took 0.63 of their one-rank backward
   where flops and bytes gave 0.53. Paper 003 sec. V-A prices the local kernel as measured; this is
   a term of that measurement (DDModelCalibrate() fits its coefficient over shapes of several widths) */
double ModelConvColumnRows_Private(double ybulk, double wout, double co, double cikk)
{
  return (co > 0 && wout > 0) ? ybulk / (co * wout) * cikk : 0;
}

/* Winograd's algorithm (F(4x4, 3x3): oneDNN's on AVX-512 in float32, /cpu/blas's in both precisions)
   does a pass's work at a lower cost per GEMM flop than the direct or im2col kernels, and the kernels
   choose it per pass (DDBackendConvWinograd()): the U-Net's 96 -> 32 decoder took 0.45-0.56 of its
   direct time, a 16 -> 16 layer's forward 0.65-1.05. The work (the GEMM flops: f forward, 2 f
   backward) is priced at the Winograd rate, and this term, the flops of the passes that run the
   direct kernels (f the forward's, f each of backward data and weights; f: the forward's GEMM flops),
   at the difference (DDModelCalibrate() fits it; on a machine without Winograd kernels it equals the
   work, and the fit drops it as dependent) */
double ModelConvDirectFlops_Private(const bool wino[3], double f, PetscBool backward)
{
  if (!backward) return wino[0] ? 0 : f;
  return (wino[1] ? 0 : f) + (wino[2] ? 0 : f);
}
} // namespace ddnn

static void GemmBytes(DDLayer layer, PetscBool backward, double e[5])
{
  size_t      es = 4;
  DDLayerType type;
  DDDataTypeGetSize(layer->output->dtype, &es);
  DDLayerGetType(layer, &type);
  e[0] = (double)es * (double)(layer->nin > 0 ? Bulk(layer->setupin[0]) : 0);
  e[1] = (double)es * (double)Bulk(layer->output);
  e[2] = e[3] = e[4] = 0;
  if (layer->nparams < 1) return;
  DDTensor w = layer->params[0];
  if (!strcmp(type, DDLAYERCONV) && w->order >= 2) { /* weight (Cout, Cin/groups, k...) */
    const double co = (double)w->shape[0], ci = (double)w->shape[1];
    PetscReal    f, b;
    double       kk = 1;
    for (PetscInt k = 2; k < w->order; k++) kk *= (double)w->shape[k];
    if (co < 1 || ci < 1 || DDLayerGetModelWork(layer, PETSC_FALSE, &f, &b)) return;
    e[2] = ddnn::ModelConvIdleFlops_Private(es, co, ci, (double)f, backward);
    if (layer->output->active) e[3] = ddnn::ModelConvColumnRows_Private((double)Bulk(layer->output), (double)layer->output->layout.n[layer->output->order - 1], co, ci * kk);
    bool wino[3];
    if (ddnn::DDLayerConvWinogradPasses_Private(layer, wino)) return;
    e[4] = ddnn::ModelConvDirectFlops_Private(wino, (double)f, backward);
  } else if (strcmp(type, DDLAYERCONV)) e[2] = (double)es * (double)Bulk(w);
}

namespace ddnn
{
/* The rows of a window kind's output (pooling, upsampling): its local entries over the extent of
   its innermost storage dimension (W on plain storage, the block on blocked storage, C on
   channels-last). The fast loops (src/backend/cpu/pool_fast.cxx, upsample_fast.cxx) run one inner
   loop per such row, with a fixed cost on top of its entries: in float64 a 2 x 2 max pool of
   16 x 16 planes took 0.37 us per plane (46 ns per output row of 8), of 32 x 32 planes 1.02 us
   (64 ns per row of 16), where a rate in bytes alone had priced the U-Net's pools at 0.39-0.67 of
   their time. DDModelCalibrate() fits its coefficient over planes of several aspect ratios */
double ModelWindowRows_Private(DDTensor y)
{
  if (!y || !y->active || y->layout.order < 1) return 0;
  const DDLayout &L   = y->layout;
  const PetscInt  run = L.bdim >= 0 ? PetscMin(L.bs, L.n[L.bdim]) : L.n[L.perm[L.order - 1]];
  return run > 0 ? (double)Bulk(y) / (double)run : 0;
}
} // namespace ddnn

/* the runs of ForEachBulkRunPair(x, y) (src/tensor/layout.hpp): 1 for identical contiguous
   storage, rows when the halos differ (merged across the dimensions both hold whole), one per element when the storage orders differ (a format
   conversion: plain <-> channels-last or blocked) */
static PetscInt64 PairRuns(DDTensor x, DDTensor y)
{
  if (!x || !y || !x->active || !y->active || x->layout.order != y->layout.order) return 0;
  for (PetscInt k = 0; k < x->layout.order; k++)
    if (x->layout.n[k] != y->layout.n[k]) return 0;
  PetscInt64 r = 0;
  ddnn::ForEachBulkRunPair(x->layout, y->layout, [&](PetscInt, PetscInt, PetscInt) { r++; });
  return r;
}

/*@C
  DDLayerGetModelRuns - The contiguous runs a set-up pointwise layer's loops walk on this rank: the cost of converting between its input's and its output's storage

  Not collective

  Input Parameter:
. layer - the set-up layer

  Output Parameter:
. runs - the runs of the walk over the first input's and the output's bulk (the same per forward
         and backward); 0 when they have different local shapes (not a pointwise layer)

  Notes:
  A pointwise layer (activation, dropout, add) walks its input and output in matching runs
  (src/tensor/layout.hpp, ForEachBulkRunPair): one run when both are stored alike and
  contiguously, one per row when their halos differ (rows merge across the inner dimensions that
  both hold without halo: an output with a halo along H alone walks one run per plane), one per
  element when their storage orders
  differ (a ReLU between a plain tensor and a channels-last or blocked one converts the format
  element by element). The model prices each run beyond the first with the calibrated per-run
  cost of a row-by-row walk (same storage order, other halos; on plain storage a constant plus a
  term per entry of the row, the row being the output's local entries / runs) or of an
  element-by-element one (another storage order) (`DDModelCalibrate()`), on top of t = c0 + c1 bytes.

  Level: intermediate

.seealso: `DDLayerGetModelWork()`, `DDLayerGetModelTime()`
@*/
PetscErrorCode DDLayerGetModelRuns(DDLayer layer, PetscInt64 *runs)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscValidPointer(runs, 2);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up before asking for its model");
  *runs = layer->nin > 0 ? PairRuns(layer->setupin[0], layer->output) : 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the primitives set up inside the layer's set-up */
static std::vector<DDPrimitive> LayerPrimitives(DDLayer layer)
{
  std::vector<DDPrimitive> v;
  for (const void *o : ddnn::ExchangeObjectsUnder(layer)) {
    PetscObject obj = (PetscObject)o;
    if (obj != (PetscObject)layer && obj->classid == DD_PRIMITIVE_CLASSID) v.push_back((DDPrimitive)obj);
  }
  /* in the order they were created, not the addresses' order the registry keeps: the model sums
     their terms in floating point, and the sums must not depend on where the allocator put them */
  std::sort(v.begin(), v.end(), [](DDPrimitive a, DDPrimitive b) { return ((PetscObject)a)->id < ((PetscObject)b)->id; });
  return v;
}

static PetscErrorCode LayerModelComm(DDLayer, PetscBool, PetscBool, PetscInt64 *, PetscInt64 *, PetscInt64 *, PetscInt64 *);

/*@C
  DDLayerGetModelComm - The point-to-point messages and bytes one forward or backward of a set-up layer sends and receives on this rank

  Not collective

  Input Parameters:
+ layer    - the set-up layer
- backward - `PETSC_FALSE`: `DDLayerForward()`, `PETSC_TRUE`: `DDLayerBackward()`

  Output Parameters:
+ sendmsgs  - messages sent (or NULL)
. sendbytes - bytes sent (or NULL)
. recvmsgs  - messages received (or NULL)
- recvbytes - bytes received (or NULL)

  Notes:
  The sum of `DDPrimitiveGetCommVolume()` over the primitives the layer built at set-up: the
  forward applies each once, the backward each adjoint once (a halo exchange forward, its
  adjoint on the input gradient backward; a repartition and its transpose). The collectives are
  counted by `DDLayerGetModelCollectives()`.

  Level: intermediate

.seealso: `DDPrimitiveGetCommVolume()`, `DDLayerGetModelTime()`
@*/
PetscErrorCode DDLayerGetModelComm(DDLayer layer, PetscBool backward, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up before asking for its model");
  PetscCall(LayerModelComm(layer, backward, PETSC_FALSE, sendmsgs, sendbytes, recvmsgs, recvbytes));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* nodx: the backward computes no input gradient (a network's first layer): the data-path exchanges' adjoints do not run */
static PetscErrorCode LayerModelComm(DDLayer layer, PetscBool backward, PetscBool nodx, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
{
  PetscInt64 t[4] = {0, 0, 0, 0};

  PetscFunctionBegin;
  for (DDPrimitive p : LayerPrimitives(layer)) {
    if (backward && nodx) break;
    PetscInt64 v[4];
    if (!p->setupcalled) continue;
    PetscCall(DDPrimitiveGetCommVolume(p, backward, &v[0], &v[1], &v[2], &v[3]));
    /* a primitive set up inside another one is already counted by it */
    bool nested = false;
    for (DDPrimitive q : LayerPrimitives(layer))
      if (q != p && ddnn::ExchangeIsUnder(p, q)) nested = true;
    if (nested) continue;
    for (int k = 0; k < 4; k++) t[k] += v[k];
  }
  ddnn::CommVolumeOut(t, sendmsgs, sendbytes, recvmsgs, recvbytes);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDLayerGetCommCounters - The point-to-point messages and bytes a layer's primitives actually sent and received on this rank since they were set up (or their counters reset)

  Not collective

  Input Parameters:
+ layer    - the set-up layer
- backward - `PETSC_FALSE`: the forward applications, `PETSC_TRUE`: the adjoint ones

  Output Parameters:
+ sendmsgs  - messages started (or NULL)
. sendbytes - bytes in them (or NULL)
. recvmsgs  - messages received (or NULL)
- recvbytes - bytes received, as MPI reports them (or NULL)

  Notes:
  The measured side of `DDLayerGetModelComm()`: after k forward and backward calls the counters
  equal k times the prediction.

  Level: intermediate

.seealso: `DDLayerGetModelComm()`, `DDPrimitiveGetCommCounters()`
@*/
PetscErrorCode DDLayerGetCommCounters(DDLayer layer, PetscBool backward, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
DD_CXX_TRY
{
  PetscInt64 t[4] = {0, 0, 0, 0};

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  for (auto *ex : ddnn::ExchangeRegistry())
    if (ddnn::ExchangeIsUnder(ex->owner, layer))
      for (int k = 0; k < 4; k++) t[k] += ex->counted[backward ? 1 : 0][k];
  ddnn::CommVolumeOut(t, sendmsgs, sendbytes, recvmsgs, recvbytes);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* a collective primitive p of the layer: its kind (1 broadcast/reduce, 2 all-reduce), bytes and group
   size; kind 0 for the other primitives, and for the broadcast of a replica that the network keeps in
   its replicated weight mode (the layer does not apply it: the network's bucketed collectives do its
   work, priced by NetReplicaTime()) */
static PetscErrorCode CollectiveOf(DDLayer layer, DDPrimitive p, int *kind, PetscInt64 *bytes, PetscMPIInt *group)
{
  PetscBool bc, ar;
  size_t    es;

  PetscFunctionBegin;
  *kind  = 0;
  *bytes = 0;
  *group = 1;
  for (PetscInt k = 0; k < layer->nreplicas; k++)
    if (layer->replicas[k].kept && layer->replicas[k].B == p) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscObjectTypeCompareAny((PetscObject)p, &bc, DDPRIMITIVEBROADCAST, DDPRIMITIVESUMREDUCE, ""));
  PetscCall(PetscObjectTypeCompare((PetscObject)p, DDPRIMITIVEALLSUMREDUCE, &ar));
  if ((!bc && !ar) || !p->setupcalled) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDDataTypeGetSize(p->xref->dtype, &es));
  *kind = bc ? 1 : 2;
  /* the data a rank holds: the broadcast's copy (y), the all-reduce's x */
  *bytes = (PetscInt64)es * PetscMax(Bulk(p->xref), Bulk(p->yref));
  /* the ranks the collective spans: the larger of the two partitions (a broadcast over the
     replicas; an all-sum over the slice the statistics are summed over is at most that) */
  PetscMPIInt sx = p->xref->part ? (PetscMPIInt)p->xref->part->size : 1, sy = p->yref->part ? (PetscMPIInt)p->yref->part->size : 1;
  *group = PetscMax(sx, sy);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDLayerGetModelCollectives - The collective calls and the bytes in them that one forward or backward of a set-up layer makes on this rank

  Not collective

  Input Parameters:
+ layer    - the set-up layer
- backward - `PETSC_FALSE`: forward, `PETSC_TRUE`: backward

  Output Parameters:
+ calls - collective calls spanning more than one rank (weight broadcasts forward and gradient sum-reductions backward, the norms' all-sum-reductions)
- bytes - the bytes this rank contributes to them

  Notes:
  These move their data with MPI collectives, whose messages are MPI's choice; the model prices
  them with the fits `DDModelCalibrate()` measured for the group size (broadcast, reduce,
  all-reduce: t = c0 + c1 n), and where there is none with Thakur et al.'s formulas (paper 003
  ref. [22]), the cheaper of the short- and the long-message algorithm: with lg = ceil(log2 p), a
  broadcast, reduce or all-reduce of n bytes over p ranks min(lg (alpha + beta n), 2 lg alpha +
  2 (p-1)/p beta n) (binomial tree or recursive doubling; scatter + allgather, Rabenseifner's
  reduce-scatter + gather or allgather).

  In a network's replicated weight mode (`DDNetSetWeightMode()`) the layer does not broadcast the
  weights whose replicas the network keeps, nor sum-reduce their gradients: those are not counted
  here (`DDNetGetModelTime()` prices the network's bucketed collectives instead).

  Level: intermediate

.seealso: `DDLayerGetModelComm()`, `DDLayerGetModelTime()`
@*/
PetscErrorCode DDLayerGetModelCollectives(DDLayer layer, PetscBool backward, PetscInt64 *calls, PetscInt64 *bytes)
DD_CXX_TRY
{
  PetscInt64 c = 0, b = 0;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  (void)backward; /* the broadcast forward and its adjoint backward move the same bytes, as do the all-sums */
  for (DDPrimitive p : LayerPrimitives(layer)) {
    int         kind;
    PetscInt64  n;
    PetscMPIInt g;
    PetscCall(CollectiveOf(layer, p, &kind, &n, &g));
    if (!kind || g < 2) continue;
    c++;
    b += n;
  }
  if (calls) *calls = c;
  if (bytes) *bytes = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetModelMemory - The memory a set-up layer holds on this rank, by kind

  Not collective

  Input Parameter:
. layer - the set-up layer

  Output Parameters:
+ activations - bytes of the output and of the tensors kept for backward (bulk entries)
. halo        - bytes of the halo regions of those and of the layer's work tensors, and of the exchange engine's message buffers
. params      - bytes of the weights and their gradients
- work        - bytes of the other tensors the layer's primitives work on (halo'd copies of the input, broadcast weights, statistics)

  Level: intermediate

.seealso: `DDLayerGetModelTime()`
@*/
PetscErrorCode DDLayerGetModelMemory(DDLayer layer, PetscInt64 *activations, PetscInt64 *halo, PetscInt64 *params, PetscInt64 *work)
DD_CXX_TRY
{
  size_t             es;
  PetscInt64         a = 0, h = 0, p = 0, w = 0;
  std::set<DDTensor> seen;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up before asking for its model");
  PetscCall(DDDataTypeGetSize(layer->output->dtype, &es));
  for (PetscInt i = 0; i < layer->nin; i++) seen.insert(layer->setupin[i]); /* the inputs belong to their producers */
  auto add = [&](DDTensor t, PetscInt64 &bulkto) {
    if (!t || seen.count(t)) return;
    seen.insert(t);
    size_t s = es;
    DDDataTypeGetSize(t->dtype, &s);
    bulkto += (PetscInt64)s * Bulk(t);
    h += (PetscInt64)s * (Storage(t) - Bulk(t));
  };
  add(layer->output, a);
  for (PetscInt i = 0; i < layer->nin; i++)
    if (layer->saved && layer->saved[i]) add(layer->saved[i], a);
  for (PetscInt i = 0; i < layer->nparams; i++) {
    add(layer->params[i], p);
    if (layer->grads) add(layer->grads[i], p);
  }
  for (DDPrimitive q : LayerPrimitives(layer)) {
    if (!q->setupcalled) continue;
    add(q->xref, w);
    add(q->yref, w);
  }
  for (auto *ex : ddnn::ExchangeRegistry())
    if (ddnn::ExchangeIsUnder(ex->owner, layer)) h += ex->BufferBytes();
  if (activations) *activations = a;
  if (halo) *halo = h;
  if (params) *params = p;
  if (work) *work = w;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscReal CeilLog2(PetscMPIInt p)
{
  PetscReal l = 0;
  for (PetscMPIInt q = 1; q < p; q *= 2) l++;
  return l;
}

/*@C
  DDLayerGetModelTime - The predicted times of one forward and one backward of a set-up layer on this rank

  Not collective

  Input Parameter:
. layer - the set-up layer

  Output Parameters:
+ compf      - forward compute seconds (calibrated kernel fit of the layer's kind)
. commf      - forward communication seconds (point-to-point and collectives, alpha-beta)
. compb      - backward compute seconds
. commb      - backward communication seconds
- calibrated - whether the kernel fits for the layer's backend and data type (and, on more than one rank, alpha and beta) are known; if not, the missing terms are 0

  Options Database Key:
. -dd_model_measure_convs <bool> - price a convolution's compute by timing its own local kernels on this rank (default false)
. -dd_model_measure_pools <bool> - price a pooling's compute by timing its own local kernel on this rank (default false)
. -dd_model_measure_spectral <bool> - price a spectral layer's compute by timing its own local kernels on this rank (default true)

  Notes:
  Paper 003 sec. V-A: FP = C(local) + SR(halo), BP = Cx + Cw + SR(halo) + AR(weights); a
  point-to-point exchange costs max(messages sent, received) alpha + max(bytes sent, received)
  beta on a rank (full duplex), overlap is not subtracted. The memory-bound kinds add the
  calibrated per-run cost times the runs of their walk beyond the first (`DDLayerGetModelRuns()`:
  a format conversion between input and output; a row-by-row walk between blocked tensors has its
  own run cost where the cache has one). conv and affine add the terms of their input and
  output bytes, of idle vector lanes (conv) or weight bytes (affine), and of the rows of the column
  matrix and the flops of the passes that do not run Winograd (conv, as its backend chain chooses
  them per pass); a layer alone whose memory M on this rank exceeds the core's L2 cache is priced
  with the share 1 - L2 / M of the cold fits (tensors in memory) and the rest of the warm ones.
  With -dd_model_measure_convs a convolution on a host backend is not priced by the conv fit: its
  compute is paper 003 sec. V-A's per-configuration estimate, its local kernels (forward with the
  activation its kernel fuses, backward data and weights, and the input's format conversion where
  the layer converts it) timed alone on this rank on copies of its tensors (its output and
  gradients are not written), with its weights taken as changed since the previous call (as after
  an optimizer's update: oneDNN reorders them again), warm and cold as the fits, once per configuration in the process
  (`DDModelReset()` forgets them); its communication is still the model's. This times what the
  fits approximate (the conv fit misses single shapes by up to 1.5x); it costs a few kernel calls
  per configuration, on every model query of a new one (also the trial set-ups of
  -net_distribution auto). A rank without local output has no compute.
  With -dd_model_measure_pools a pooling on a host backend is priced the same way: a kernel of its
  own, made from the layer's set-up (a max pool's workspace is its kernel's state: the layer's own
  stays for its backward), timed forward (training mode) and backward on copies. A pooling kernel's
  speed turns on more than its bytes (oneDNN's plain average pool over LeNet-5's 6 channels takes
  1.8x the time per byte of 16 channels, which the fit, calibrated on 16, prices at 0.57 of it).
  A layer laid out anew since its set-up is priced by the fits.
  A spectral layer (`DDLAYERSPECTRAL`) has no fit: its compute is measured as -dd_model_measure_convs
  measures a convolution's, by default (-dd_model_measure_spectral 0: priced as an uncalibrated kind,
  below), on host backends: its FFT stages' local kernels and its mode mixing, forward and backward,
  each repartition between the stages as one local copy of its destination (its messages are the
  communication the model prices); where the cache has the "repartition" fit (a calibration on P > 1
  ranks), without those copies, since the fit prices each repartition whole.
  A repartition (a layer's own, one inside a spectral layer's FFTs) is priced by the "repartition"
  fit where the cache has one for the ranks (and the -dd_exchange_direct mode) of the run, in place
  of alpha-beta on its volume: c0 + c1 bytes sent or received + the runs of consecutive entries its
  plan sends from, receives into and copies within the rank (a term each) + the bytes it copies
  within the rank, warm and cold as the kernels (alpha-beta priced an FNO's stage transposes at 0.1-0.2
  of their time on 2 ranks: their runs are 8 to 16 entries long).
  Average pooling has its own fit (`DDLayerPoolGetType()`). Pooling and upsampling add a term in
  their output's rows (its local entries over the extent of its innermost storage dimension: W on
  plain storage, C channels-last, the channel block blocked), the fixed cost of their loops per row.
  A loss against class indices has the cross-entropy fit, the other losses the mse fit.
  A concatenation has three fits: of plain inputs into a plain output, of blocked inputs (a
  convolution's output format) into its consumer's halo, and of plain inputs into an output with a
  halo its inputs lack (its consumer convolution's: every output row starts inside a cache line);
  a cache without the last prices that case by the first.
  Layer kinds that the calibration does not time (add, dropout, reshape, ...) are priced with the
  activation's fit (a memory-bound kernel) on their bytes; an add whose inputs are stored in another
  order than its output (a convolution's blocked output added to a plain tensor) adds the calibrated
  cost per converted entry ("add-convert", where the cache has it).

  Level: intermediate

.seealso: `DDModelCalibrate()`, `DDLayerGetModelComm()`, `DDNetViewModel()`
@*/
static PetscErrorCode LayerModelTime(DDLayer, PetscBool, double, PetscReal *, PetscReal *, PetscReal *, PetscReal *, PetscBool *);

/* the core's private cache: tensors that together exceed it are found in memory */
static double L2Bytes(void)
{
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? (double)l2 : 1048576.0;
}

/* the share of a layer's tensors its kernels find in memory (cold), the rest out of L2 but in the
   caches below it (warm), when the memory the layer holds on this rank (a layer alone) or its network
   holds (DDNetGetModelTime()) is bytes: what exceeds the core's L2 cache, 1 - L2 / bytes. A network
   cycles through its tensors once per step; the part of them that fits in L2 is still there
   (LeNet-5 in float64, 2.8 MiB per rank against a 2 MiB L2, ran its layers at the warm rates; the
   U-Net, 24 MiB, at nearly the cold ones). The earlier all-or-nothing rule priced LeNet-5's layers
   cold, 1.3-2.5x over in float64 */
namespace ddnn
{
double ModelColdFraction_Private(double bytes)
{
  return bytes > L2Bytes() ? 1.0 - L2Bytes() / bytes : 0.0;
}

bool ModelIsGemmKind_Private(const std::string &kind)
{
  return IsGemmKind(kind);
}

bool ModelIsWindowKind_Private(const std::string &kind)
{
  return IsWindowKind(kind);
}
} // namespace ddnn

static PetscErrorCode LayerCold(DDLayer layer, double *cold)
{
  PetscInt64 m[4];

  PetscFunctionBegin;
  PetscCall(DDLayerGetModelMemory(layer, &m[0], &m[1], &m[2], &m[3]));
  *cold = ddnn::ModelColdFraction_Private((double)(m[0] + m[1] + m[2] + m[3]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DDLayerGetModelTime(DDLayer layer, PetscReal *compf, PetscReal *commf, PetscReal *compb, PetscReal *commb, PetscBool *calibrated)
DD_CXX_TRY
{
  double cold;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up before asking for its model");
  PetscCall(LayerCold(layer, &cold));
  PetscCall(LayerModelTime(layer, PETSC_FALSE, cold, compf, commf, compb, commb, calibrated));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* one collective of n bytes a rank holds, over a group of g ranks, on P ranks: kind 1 a broadcast
   (reduce: its adjoint, a reduce), kind 2 an all-reduce; by the fits DDModelCalibrate() measured on a
   group of g ranks, else (not measured at this group size) by Thakur, Rabenseifner and Gropp's
   formulas (paper 003 ref. [22], sec. 4) with alpha and beta, the cheaper of the short-message and
   the long-message algorithm, as MPI libraries switch between them by size:
     broadcast   binomial tree lg (alpha + beta n), or scatter + allgather (van de Geijn; the
                 allgather by recursive doubling or Bruck's algorithm) 2 lg alpha + 2 (g - 1)/g beta n;
     reduce      binomial tree lg (alpha + beta n), or reduce-scatter + gather (Rabenseifner)
                 2 lg alpha + 2 (g - 1)/g beta n;
     all-reduce  recursive doubling lg (alpha + beta n), or reduce-scatter + allgather
                 (Rabenseifner) 2 lg alpha + 2 (g - 1)/g beta n;
   lg = ceil(log2 g), the reductions' arithmetic not counted */
static PetscReal CollectiveTime(const char *bname, PetscMPIInt P, DDDataType dt, int kind, bool reduce, PetscMPIInt g, PetscInt64 n)
{
  auto cf = FindKern(bname, P, dt, (kind == 1 ? "bcast-g" : "allsum-g") + std::to_string(g), kind == 1 && reduce);
  if (cf != M.kern.end()) return cf->second.c0 + cf->second.c1 * (PetscReal)n;
  const PetscReal lg = CeilLog2(g);
  return PetscMin(lg * (M.alpha + M.beta * (PetscReal)n), 2 * lg * M.alpha + 2.0 * (g - 1) / g * M.beta * (PetscReal)n);
}

/* the fit of an exchange as it is called (kind: "halo" or ModelKindRepartition; with -dd_exchange_direct the mode's own,
   direct, where the cache has one), or M.kern.end() */
static std::map<std::string, Fit>::const_iterator ExchangeFit(const char *bname, PetscMPIInt size, DDDataType dt, const std::string &kind, const std::string &direct, bool bwd)
{
  auto f = ddnn::ShmArenaEnabled() ? FindKern(bname, size, dt, direct, bwd) : M.kern.cend();
  return f != M.kern.cend() ? f : FindKern(bname, size, dt, kind, bwd);
}

/* a repartition's fit, warm or cold (its tensors out of every cache) */
static std::map<std::string, Fit>::const_iterator RepartitionFit(const char *bname, PetscMPIInt size, DDDataType dt, bool bwd, bool cold)
{
  const std::string sfx = cold ? ":cold" : "";
  return ExchangeFit(bname, size, dt, ddnn::ModelKindRepartition + sfx, ddnn::ModelKindRepartitionDirect + sfx, bwd);
}

namespace ddnn
{
/* The time formula of a layer on one rank (paper 003 sec. V-A: FP = C(local) + SR(halo), BP = Cx +
   Cw + SR(halo) + AR(weights)), from plain data: LayerModelTime() fills the input from a set-up
   layer, DDModelPredictLayer() (analytic.cxx) from a description. */
PetscErrorCode ModelLayerTimes_Private(const ModelCostInput &in, PetscReal comp[2], PetscReal comm[2], PetscReal tcoll[2], PetscBool *ok)
{
  const char       *bname = in.backend.c_str();
  const PetscMPIInt size  = in.size;
  std::string       kind  = in.kind;

  PetscFunctionBegin;
  PetscCall(ModelEnsureLoaded());
  /* a plain concatenation into its consumer's halo: its own fit where the cache has one (ModelKindConcatHalo) */
  if (in.outhalo && kind == DDLAYERCONCAT && FindKern(bname, size, in.dtype, ddnn::ModelKindConcatHalo, false) != M.kern.end()) kind = ddnn::ModelKindConcatHalo;
  /* a 1 x 1 convolution whose kernel runs on plain storage: its own fit where the cache has one (ModelKindConvPointwise) */
  if (in.pointwise && kind == DDLAYERCONV && FindKern(bname, size, in.dtype, ddnn::ModelKindConvPointwise, false) != M.kern.end()) kind = ddnn::ModelKindConvPointwise;
  const bool gemm = IsGemmKind(kind);
  *ok = PETSC_TRUE;
  for (int b = 0; b < 2; b++) {
    comp[b] = comm[b] = 0;
    if (tcoll) tcoll[b] = 0;
    /* a first layer of a network computes no input gradient: the GEMM kinds' weight gradient alone has its own fit */
    const std::string fk = b && in.nodx && gemm ? kind + "-wgrad" : kind;
    auto              it = FindKern(bname, size, in.dtype, fk, b);
    auto              ic = in.cold > 0 ? FindKern(bname, size, in.dtype, fk + ":cold", b) : M.kern.end();
    if (it == M.kern.end()) it = ic; /* no warm fit: the cold one */
    if (ic == M.kern.end()) ic = it; /* no cold fit: the warm one */
    if (it == M.kern.end()) *ok = PETSC_FALSE;
    else {
      auto time = [&](const Fit &F) {
        double t = F.c0 + F.c1 * (gemm ? in.flops[b] : in.bytes[b]);
        if (gemm)
          for (int j = 0; j < 5; j++) t += F.cx[j] * in.gemm[b][j];
        else t += F.cx[0] * in.windowrows; /* the window kinds' and "concat-halo"'s rows (0 for the other kinds, and in fits without the term) */
        return t;
      };
      /* the share in.cold of the tensors in memory, the rest in the caches below L2 (ModelColdFraction_Private()) */
      comp[b] = (1 - in.cold) * time(it->second) + in.cold * time(ic->second);
    }
    if (!gemm) { /* the walk's runs: a format conversion between input and output costs per element */
      /* the same storage order with other halos: a row-by-row walk; otherwise element by element; warm and cold as the fits */
      /* between blocked tensors: that walk's own run cost where the cache has one (older caches: the plain rows') */
      const bool        rb = in.rows && in.blocked && FindRunCost(bname, size, in.dtype, ddnn::ModelKindRowsBlocked, b) != M.runcost.end();
      const std::string rk = rb ? ddnn::ModelKindRowsBlocked : in.rows ? "activation-rows" : DDLAYERACTIVATION;
      /* a run-cost entry, warm and cold (no cold entry: the warm one); found false where the cache has no warm one */
      auto warmcold = [&](const std::string &k, double v[2]) {
        auto w = FindRunCost(bname, size, in.dtype, k, b), c = in.cold > 0 ? FindRunCost(bname, size, in.dtype, k + ":cold", b) : M.runcost.end();
        if (c == M.runcost.end()) c = w;
        if (w == M.runcost.end()) return false;
        v[0] = w->second;
        v[1] = c->second;
        return true;
      };
      double per[2], len[2];
      if (in.runs > 1) {
        if (!warmcold(rk, per)) *ok = PETSC_FALSE;
        else {
          if (!rb && in.rows && warmcold(ddnn::ModelKindRowsLen, len)) /* a plain row: its length term where the cache has one (a cache without it: one cost per row) */
            for (int c = 0; c < 2; c++) per[c] += len[c] * in.runlen;
          comp[b] += ((1 - in.cold) * per[0] + in.cold * per[1]) * (PetscReal)(in.runs - 1);
        }
      }
      if (in.addconvert > 0 && warmcold(ddnn::ModelKindAddConvert, per)) comp[b] += ((1 - in.cold) * per[0] + in.cold * per[1]) * in.addconvert; /* an add's inputs in another storage order */
    }
    const PetscInt64 *v = in.p2p[b];
    if ((v[0] || v[2] || !in.colls.empty()) && !M.commok) *ok = PETSC_FALSE;
    comm[b] = M.alpha * (PetscReal)PetscMax(v[0], v[2]) + M.beta * (PetscReal)PetscMax(v[1], v[3]);
    /* a halo exchange as it is called (DDModelCalibrate() times DDPrimitiveApply() of a halo,
       packing, waiting and unpacking included): its fit replaces alpha-beta on its volume */
    auto hf = ExchangeFit(bname, size, in.dtype, kindHalo, kindHaloDirect, b); /* -dd_exchange_direct: its own fit, where the cache has one */
    if (hf != M.kern.end() && !(b && in.nodx)) {
      for (const auto &w : in.halo[b]) {
        if (!w[0] && !w[2]) continue;
        comm[b] += hf->second.c0 + hf->second.c1 * (PetscReal)PetscMax(w[1], w[3]) - (M.alpha * (PetscReal)PetscMax(w[0], w[2]) + M.beta * (PetscReal)PetscMax(w[1], w[3]));
      }
      comm[b] = PetscMax(comm[b], 0);
    }
    /* a repartition as it is called, likewise (the copy of the rank's own part, packing, waiting and
       unpacking: alpha-beta priced the FNO's stage transposes at 0.1-0.2 of their time, their runs of 8
       to 16 entries and the copies around the messages uncounted): c0 + c1 bytes moved + c2 runs sent
       from + c3 runs received into + c4 runs copied within the rank + c5 bytes copied within the rank,
       in place of alpha-beta on its volume */
    auto rf = RepartitionFit(bname, size, in.dtype, b ? true : false, false), rc = RepartitionFit(bname, size, in.dtype, b ? true : false, true);
    if (rc == M.kern.end()) rc = rf;
    if (rf != M.kern.end() && !(b && in.nodx)) {
      for (const auto &w : in.repart[b]) {
        auto time = [&](const Fit &F) {
          double t = F.c0 + F.c1 * (double)PetscMax(w[1], w[3]);
          for (int k = 0; k < 4; k++) t += F.cx[k] * (double)w[4 + k];
          return t;
        };
        comm[b] += (1 - in.cold) * time(rf->second) + in.cold * time(rc->second) - (M.alpha * (PetscReal)PetscMax(w[0], w[2]) + M.beta * (PetscReal)PetscMax(w[1], w[3]));
      }
      comm[b] = PetscMax(comm[b], 0);
    }
    for (const auto &c : in.colls) {
      /* a broadcast forward and a reduce backward, a sum-reduce the other way round, an all-reduce both ways */
      const PetscReal t = CollectiveTime(bname, size, in.dtype, c.kind, c.kind == 1 && (b ? !c.isreduce : c.isreduce), c.group, c.bytes);
      comm[b] += t;
      if (tcoll) tcoll[b] += t;
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn

/* fills the formula's input from a set-up layer on this rank */
static PetscErrorCode LayerModelTime(DDLayer layer, PetscBool nodx, double cold, PetscReal *compf, PetscReal *commf, PetscReal *compb, PetscReal *commb, PetscBool *calibrated)
{
  DDLayerType          type;
  const char          *bname;
  PetscBool            ok;
  PetscReal            comp[2], comm[2];
  ddnn::ModelCostInput in;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up before asking for its model");
  PetscCall(DDLayerGetType(layer, &type));
  PetscCall(DDLayerGetBackend(layer, &bname));
  PetscCallMPI(MPI_Comm_size(PetscObjectComm((PetscObject)layer), &in.size));
  in.backend = bname;
  in.dtype   = layer->output->dtype;
  in.nodx    = nodx ? true : false;
  in.cold    = cold;
  std::string kind = type;
  if (std::find_if(std::begin(calibratedKinds), std::end(calibratedKinds), [&](const char *k) { return kind == k; }) == std::end(calibratedKinds)) kind = DDLAYERACTIVATION;
  else if (kind == DDLAYERLOSS) {
    if (layer->nin > 1 && layer->setupin[1] && layer->setupin[0] && layer->setupin[1]->order < layer->setupin[0]->order) kind = kindLossCE; /* class-index targets */
  } else if (kind == DDLAYERACTIVATION) {
    DDActivationType at;
    PetscCall(DDLayerActivationGetType(layer, &at));
    kind = ActKind(at);
  } else if (kind == DDLAYERPOOL) {
    DDPoolType pt;
    PetscCall(DDLayerPoolGetType(layer, &pt));
    if (pt == DD_POOL_AVG) kind = layer->nin > 0 && layer->setupin[0] && layer->setupin[0]->layout.bdim >= 0 ? ddnn::ModelKindPoolAvgBlocked : ddnn::ModelKindPoolAvg;
  } else if (kind == DDLAYERCONV) {
    PetscCall(ddnn::DDLayerConvPlainPointwise_Private(layer, &in.pointwise));
  } else if ((kind == DDLAYERFLATTEN || kind == DDLAYERCONCAT) && layer->nin > 0 && layer->setupin[0] && layer->setupin[0]->layout.bdim >= 0) {
    /* a blocked input: a flatten converts the format, a concatenation copies blocked rows (their own fits where the cache has them) */
    const char *bk = kind == DDLAYERFLATTEN ? ddnn::ModelKindFlattenBlocked : ddnn::ModelKindConcatBlocked;
    PetscCall(ModelEnsureLoaded());
    if (FindKern(bname, in.size, in.dtype, bk, false) != M.kern.end()) kind = bk;
  }
  in.kind = kind;
  if (!IsGemmKind(kind)) {
    /* the same storage order with other halos: a row-by-row walk; otherwise element by element */
    if (layer->nin > 0 && layer->setupin[0] && layer->setupin[0]->active && layer->output->active) {
      const DDLayout &A = layer->setupin[0]->layout, &B = layer->output->layout;
      in.rows    = ddnn::LayoutSameOrder(A, B);
      in.blocked = in.rows && A.bdim >= 0;
      for (PetscInt k = 0; kind == DDLAYERCONCAT && k < B.order; k++) in.outhalo = in.outhalo || B.lo[k] != A.lo[k] || B.hi[k] != A.hi[k]; /* plain inputs into the consumer's halo */
    }
    PetscCall(DDLayerGetModelRuns(layer, &in.runs));
    if (in.runs > 0) in.runlen = (double)Bulk(layer->output) / (double)in.runs;
    if (type && !strcmp(type, DDLAYERADD) && layer->output->active) /* the inputs stored in another order than the output: converted entry by entry (ModelKindAddConvert) */
      for (PetscInt i = 0; i < layer->nin; i++)
        if (!ddnn::LayoutSameOrder(layer->setupin[i]->layout, layer->output->layout)) in.addconvert += (double)Bulk(layer->output);
  }
  if (IsWindowKind(kind) || in.outhalo) in.windowrows = ddnn::ModelWindowRows_Private(layer->output);
  std::vector<DDPrimitive> prims = LayerPrimitives(layer);
  for (int b = 0; b < 2; b++) {
    PetscCall(DDLayerGetModelWork(layer, b ? PETSC_TRUE : PETSC_FALSE, &in.flops[b], &in.bytes[b]));
    if (IsGemmKind(kind)) GemmBytes(layer, b ? PETSC_TRUE : PETSC_FALSE, in.gemm[b]);
    PetscCall(LayerModelComm(layer, b ? PETSC_TRUE : PETSC_FALSE, nodx, &in.p2p[b][0], &in.p2p[b][1], &in.p2p[b][2], &in.p2p[b][3]));
    if (b && nodx) continue; /* the data path's exchanges do not run */
    for (DDPrimitive p : prims) {
      PetscBool                   ishalo;
      std::array<PetscInt64, 4> w;
      if (!p->setupcalled) continue;
      PetscCall(PetscObjectTypeCompare((PetscObject)p, DDPRIMITIVEHALO, &ishalo));
      if (!ishalo) continue;
      bool nested = false;
      for (DDPrimitive q : prims)
        if (q != p && ddnn::ExchangeIsUnder(p, q)) nested = true;
      if (nested) continue;
      PetscCall(DDPrimitiveGetCommVolume(p, b ? PETSC_TRUE : PETSC_FALSE, &w[0], &w[1], &w[2], &w[3]));
      in.halo[b].push_back(w);
    }
    for (DDPrimitive p : prims) { /* every repartition, also those an fft primitive set up (the fit is per repartition) */
      PetscBool                 isrp;
      std::array<PetscInt64, 8> w;
      if (!p->setupcalled) continue;
      PetscCall(PetscObjectTypeCompare((PetscObject)p, DDPRIMITIVEREPARTITION, &isrp));
      if (!isrp) continue;
      PetscCall(DDPrimitiveGetCommVolume(p, b ? PETSC_TRUE : PETSC_FALSE, &w[0], &w[1], &w[2], &w[3]));
      PetscCall(DDPrimitiveGetExchangeWork_Private(p, b ? PETSC_TRUE : PETSC_FALSE, &w[4]));
      in.repart[b].push_back(w);
    }
  }
  for (DDPrimitive p : prims) {
    ddnn::ModelCollective c;
    PetscBool             isreduce;
    PetscCall(CollectiveOf(layer, p, &c.kind, &c.bytes, &c.group));
    if (!c.kind || c.group < 2) continue;
    PetscCall(PetscObjectTypeCompare((PetscObject)p, DDPRIMITIVESUMREDUCE, &isreduce));
    c.isreduce = isreduce ? true : false;
    in.colls.push_back(c);
  }
  PetscCall(ddnn::ModelLayerTimes_Private(in, comp, comm, NULL, &ok));
  /* -dd_model_measure_convs, -dd_model_measure_pools, -dd_model_measure_spectral (on by default): a convolution's,
     pooling's or spectral layer's compute as its own local kernels take on this rank (paper 003 sec. V-A), warm
     and cold as the fits are blended, in place of the fits' price; host backends only */
  if (kind == DDLAYERCONV || !strcmp(type, DDLAYERPOOL) || !strcmp(type, DDLAYERSPECTRAL)) {
    const bool spectral = !strcmp(type, DDLAYERSPECTRAL);
    PetscBool  measure  = spectral ? PETSC_TRUE : PETSC_FALSE; /* no fit prices a spectral layer: measured unless told not to */
    DDBackend  be;
    DDMemType  mt;
    PetscCall(PetscOptionsGetBool(NULL, NULL, kind == DDLAYERCONV ? "-dd_model_measure_convs" : spectral ? "-dd_model_measure_spectral" : "-dd_model_measure_pools", &measure, NULL));
    PetscCall(DDBackendGet(bname, &be));
    PetscCall(DDBackendGetMemType(be, &mt));
    if (measure && mt == DD_MEMTYPE_HOST) {
      double    t[2][2];
      PetscBool measured;
      /* a spectral layer's repartitions priced whole by their fit (ModelLayerTimes_Private()): its timed kernels without their local copies */
      bool nomoves = false;
      for (int b = 0; b < 2; b++) nomoves = nomoves || (!in.repart[b].empty() && RepartitionFit(bname, in.size, in.dtype, b ? true : false, false) != M.kern.end());
      PetscCall(ddnn::ModelMeasureKernels_Private(layer, nodx, nomoves ? PETSC_TRUE : PETSC_FALSE, t, &measured));
      if (measured)
        for (int b = 0; b < 2; b++) comp[b] = (1 - cold) * t[0][b] + cold * t[1][b];
    }
  }
  /*
    an activation fused into its convolution or dense layer (-net_fuse, DDNetSetUp): its output is its
    input's storage and its forward does nothing; the producer runs this layer's own kernel in place
    after its own (relu too: oneDNN's relu post-op turns nan into 0, so it is only taken with
    -dd_dnnl_eltwise_postop, where this prices a pass that the post-op saves), priced here, where it
    was. A tanh's or sigmoid's backward reads f'(v) from the output (1 - y^2, y (1 - y)): a
    streaming pass priced as relu's
  */
  if (type && !strcmp(type, DDLAYERACTIVATION) && layer->output->array && layer->output->array == layer->setupin[0]->array) {
    if (kind != DDLAYERACTIVATION) {
      PetscReal cr[2], mr[2];
      PetscBool okr;
      in.kind = DDLAYERACTIVATION;
      PetscCall(ddnn::ModelLayerTimes_Private(in, cr, mr, NULL, &okr));
      comp[1] = cr[1];
      ok      = ok && okr ? PETSC_TRUE : PETSC_FALSE;
    }
  }
  if (compf) *compf = comp[0];
  if (commf) *commf = comm[0];
  if (compb) *compb = comp[1];
  if (commb) *commb = comm[1];
  if (calibrated) *calibrated = ok;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the share of their tensors a network's layers find in memory: what of the memory the network holds on this rank exceeds the core's L2 cache */
static PetscErrorCode NetCold(DDNet net, double *cold)
{
  PetscInt n;
  double   m = 0;

  PetscFunctionBegin;
  PetscCall(DDNetGetNumLayers(net, &n));
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    PetscInt64  q[4];
    PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
    PetscCall(DDLayerGetModelMemory(l, &q[0], &q[1], &q[2], &q[3]));
    m += (double)(q[0] + q[1] + q[2] + q[3]);
  }
  *cold = ddnn::ModelColdFraction_Private(m);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* whether the network's backward asks layer i for no input gradient (every input a network input whose gradient is not wanted) */
static PetscBool NetLayerNoDx(DDNet net, PetscInt i)
{
  ddnn::NetImpl *I = net->impl;
  if (i < 0 || i >= (PetscInt)I->nodes.size()) return PETSC_FALSE;
  for (int k : I->nodes[i].inputs)
    if (k >= 0 || (size_t)(-1 - k) >= I->wantgrad.size() || I->wantgrad[-1 - k]) return PETSC_FALSE;
  return PETSC_TRUE;
}

/*@C
  DDNetGetLayerModelComm - The point-to-point messages and bytes one forward or backward of a network's layer sends and receives on this rank, as the network runs it

  Not collective

  Input Parameters:
+ net      - the set-up network
. i        - the layer's index (as in `DDNetGetLayerByIndex()`)
- backward - `PETSC_FALSE`: forward, `PETSC_TRUE`: backward

  Output Parameters:
+ sendmsgs  - messages sent (or NULL)
. sendbytes - bytes sent (or NULL)
. recvmsgs  - messages received (or NULL)
- recvbytes - bytes received (or NULL)

  Notes:
  As `DDLayerGetModelComm()`, except that a layer whose inputs are all network inputs whose
  gradient is not wanted computes no input gradient in `DDNetBackward()`, so the adjoints of its
  exchanges (the input's halo) do not run.

  Level: intermediate

.seealso: `DDLayerGetModelComm()`, `DDNetGetModelTime()`
@*/
PetscErrorCode DDNetGetLayerModelComm(DDNet net, PetscInt i, PetscBool backward, PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
DD_CXX_TRY
{
  DDLayer     l;
  const char *name;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
  PetscCheck(l->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Set the network up before asking for its model");
  PetscCall(LayerModelComm(l, backward, NetLayerNoDx(net, i), sendmsgs, sendbytes, recvmsgs, recvbytes));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetLayerModelTime - The predicted times of one forward and one backward of a network's layer on this rank, as the network runs it

  Not collective

  Input Parameters:
+ net - the set-up network
- i   - the layer's index (as in `DDNetGetLayerByIndex()`)

  Output Parameters:
+ compf      - forward compute seconds
. commf      - forward communication seconds
. compb      - backward compute seconds
. commb      - backward communication seconds
- calibrated - whether the calibration data were there

  Notes:
  As `DDLayerGetModelTime()`, with the backward exchanges of `DDNetGetLayerModelComm()`.

  Level: intermediate

.seealso: `DDLayerGetModelTime()`, `DDNetGetModelTime()`
@*/
PetscErrorCode DDNetGetLayerModelTime(DDNet net, PetscInt i, PetscReal *compf, PetscReal *commf, PetscReal *compb, PetscReal *commb, PetscBool *calibrated)
DD_CXX_TRY
{
  DDLayer     l;
  const char *name;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
  PetscCheck(l->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Set the network up before asking for its model");
  double cold;
  PetscCall(NetCold(net, &cold));
  PetscCall(LayerModelTime(l, NetLayerNoDx(net, i), cold, compf, commf, compb, commb, calibrated));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* t = c0 + c1 bytes of one of the net's own kernels (kindZero, kindAxpy) */
static PetscReal AuxTime(const char bname[], PetscMPIInt P, DDDataType dt, const char *kind, PetscReal bytes, PetscBool *ok)
{
  auto it = FindKern(bname, P, dt, kind, false);
  if (it == M.kern.end()) {
    *ok = PETSC_FALSE;
    return 0;
  }
  return it->second.c0 + it->second.c1 * bytes;
}

/* the work DDNetBackward() does around the layers on this rank: zeroing the output gradient of
   every layer upstream of the output (and of the wanted input gradients), and adding the input
   gradient of a tensor with several consumers into its gradient (DDTensorAXPY: 3 streams) */
static PetscErrorCode NetBackwardOverhead(DDNet net, PetscReal *t, PetscBool *ok)
{
  ddnn::NetImpl *I  = net->impl;
  const int      nn = (int)I->nodes.size();
  DDLayer        l0 = I->nodes[0].layer;
  const char    *bname;
  DDDataType     dt = l0->output->dtype;
  size_t         es;
  PetscMPIInt    P;

  PetscFunctionBegin;
  *t = 0;
  PetscCallMPI(MPI_Comm_size(PetscObjectComm((PetscObject)net), &P));
  PetscCall(DDLayerGetBackend(l0, &bname));
  PetscCall(DDDataTypeGetSize(dt, &es));
  std::vector<bool> live(nn, false);
  live[I->output] = true;
  for (int i = (int)I->output; i >= 0; i--)
    if (live[i])
      for (int k : I->nodes[i].inputs)
        if (k >= 0) live[k] = true;
  for (int i = 0; i < nn; i++) {
    if (!live[i]) continue;
    if (i != (int)I->output) *t += AuxTime(bname, P, dt, kindZero, (PetscReal)es * (PetscReal)Storage(I->nodes[i].layer->output), ok);
    for (int k : I->nodes[i].inputs) {
      bool want = k >= 0 || ((size_t)(-1 - k) < I->wantgrad.size() && I->wantgrad[-1 - k]);
      if (!want || (k >= 0 && I->nodes[k].consumers == 1)) continue;
      DDTensor x = k >= 0 ? I->nodes[k].layer->output : (I->inputs.size() > (size_t)(-1 - k) ? I->inputs[-1 - k] : NULL);
      *t += AuxTime(bname, P, dt, kindAxpy, 3.0 * (PetscReal)es * (PetscReal)Bulk(x), ok);
    }
  }
  for (size_t k = 0; k < I->wantgrad.size(); k++)
    if (I->wantgrad[k] && k < I->inputs.size()) *t += AuxTime(bname, P, dt, kindZero, (PetscReal)es * (PetscReal)Storage(I->inputs[k]), ok);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The replicated weight mode's own work on this rank (DDNetSetWeightMode(), src/net/replicas.cxx), per
  forward after an update and per backward, each bucket of g ranks and n bytes:
    forward   a flag all-reduce (an int) when g > 1; the root packs its parameters into the bucket, a
              broadcast of n bytes when g > 1, the members unpack it into their replicas (copies: the
              axpy fit on 2 streams);
    backward  the layers copy their replicas' gradients into the bucket (members), an all-reduce of n
              bytes when g > 1, the root adds the sums to its gradients (axpy), the bucket is zeroed.
  The data-parallel mode (the same buckets) has no broadcast after an update:
    forward   the flag all-reduce only;
    backward  the root adds its gradient into the bucket, the all-reduce, the root sets its gradients
              (copies), the members that are not the root copy the sums aside; then, at the optimizer
              step, a flag all-reduce, and those members update their copies: packing, the update
              (priced as Adam's: its calibrated fit, else 7 streams of copies), unpacking, and the root
              copies w into its own replica (counted with the backward).
  The collectives are priced as the layers' are (CollectiveTime()); the layers no longer count the
  broadcasts of the replicas the network keeps (CollectiveOf()). In the broadcast mode: 0.
*/
/* an optimizer update of `streams` arrays on `bytes` parameter bytes priced by its calibrated
   DDOptimizerStep() fit (ModelKindUpdate()), the share of its arrays ((streams + 1) / 2 of them:
   parameters, gradients and state) beyond L2 at the cold fit; false when the cache has no such fit */
static bool UpdateFitTime(const char *bname, PetscMPIInt P, DDDataType dt, PetscInt streams, PetscReal bytes, PetscReal *t)
{
  const char *uk = ddnn::ModelKindUpdate(streams);
  if (!uk) return false;
  auto it = FindKern(bname, P, dt, uk, false), ic = FindKern(bname, P, dt, std::string(uk) + ":cold", false);
  if (it == M.kern.end()) return false;
  if (ic == M.kern.end()) ic = it;
  const double cold = ddnn::ModelColdFraction_Private((double)(streams + 1) / 2 * (double)bytes);
  *t                = (1 - cold) * (it->second.c0 + it->second.c1 * bytes) + cold * (ic->second.c0 + ic->second.c1 * bytes);
  return true;
}

namespace ddnn
{
PetscErrorCode ModelReplicaBucketTimes_Private(const std::string &bname, PetscMPIInt P, DDDataType dt, PetscMPIInt group, PetscInt64 count, PetscInt64 rootcount, PetscInt64 membercount, PetscInt64 mirrorcount, PetscBool dataparallel, PetscReal t[2], PetscBool *ok)
{
  size_t es;

  PetscFunctionBegin;
  PetscCall(ModelEnsureLoaded());
  PetscCall(DDDataTypeGetSize(dt, &es));
  const char      *b = bname.c_str();
  const PetscInt64 n = (PetscInt64)es * count;
  t[0] = t[1] = 0;
  if (dataparallel) {
    const PetscReal e = (PetscReal)es;
    if (group > 1) {
      const PetscReal flag = CollectiveTime(b, P, dt, 2, false, group, (PetscInt64)sizeof(int));
      t[0] += flag;
      t[1] += CollectiveTime(b, P, dt, 2, false, group, n) + flag;
      if (!M.commok) *ok = PETSC_FALSE;
    }
    if (rootcount) t[1] += AuxTime(b, P, dt, kindAxpy, 5.0 * e * (PetscReal)rootcount, ok);
    if (membercount) t[1] += AuxTime(b, P, dt, kindAxpy, 2.0 * e * (PetscReal)membercount, ok);
    if (mirrorcount) { /* aside 2, pack 2, unpack 2 streams; the update as DDOptimizerStep() of Adam (its fit where the cache has it, else 7 streams of copies) */
      const PetscReal by = e * (PetscReal)mirrorcount;
      PetscReal       tu;
      if (UpdateFitTime(b, P, dt, 7, by, &tu)) t[1] += AuxTime(b, P, dt, kindAxpy, 6.0 * by, ok) + tu;
      else t[1] += AuxTime(b, P, dt, kindAxpy, 13.0 * by, ok);
    }
    if (membercount > mirrorcount) t[1] += AuxTime(b, P, dt, kindAxpy, 4.0 * e * (PetscReal)(membercount - mirrorcount), ok);
    t[1] += AuxTime(b, P, dt, kindZero, (PetscReal)n, ok);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (group > 1) {
    t[0] += CollectiveTime(b, P, dt, 2, false, group, (PetscInt64)sizeof(int)) + CollectiveTime(b, P, dt, 1, false, group, n);
    t[1] += CollectiveTime(b, P, dt, 2, false, group, n);
    if (!M.commok) *ok = PETSC_FALSE;
  }
  if (rootcount) {
    t[0] += AuxTime(b, P, dt, kindAxpy, 2.0 * (PetscReal)es * (PetscReal)rootcount, ok);
    t[1] += AuxTime(b, P, dt, kindAxpy, 3.0 * (PetscReal)es * (PetscReal)rootcount, ok);
  }
  if (membercount) {
    t[0] += AuxTime(b, P, dt, kindAxpy, 2.0 * (PetscReal)es * (PetscReal)membercount, ok);
    t[1] += AuxTime(b, P, dt, kindAxpy, 2.0 * (PetscReal)es * (PetscReal)membercount, ok);
  }
  t[1] += AuxTime(b, P, dt, kindZero, (PetscReal)n, ok);
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn

/* the buckets' own work on this rank (buckets: NetReplicasGetBuckets_Private()'s) */
static PetscErrorCode NetReplicaTime(DDNet net, const std::vector<ddnn::NetReplicaBucketInfo> &buckets, PetscReal t[2], PetscBool *ok)
{
  const char *bname;
  PetscMPIInt P;

  PetscFunctionBegin;
  t[0] = t[1] = 0;
  if (buckets.empty()) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallMPI(MPI_Comm_size(PetscObjectComm((PetscObject)net), &P));
  PetscCall(DDLayerGetBackend(net->impl->nodes[0].layer, &bname));
  for (const auto &b : buckets) {
    PetscReal bt[2];
    PetscCall(ddnn::ModelReplicaBucketTimes_Private(bname, P, b.dtype, b.group, b.count, b.rootcount, b.membercount, b.mirrorcount, b.dataparallel ? PETSC_TRUE : PETSC_FALSE, bt, ok));
    t[0] += bt[0];
    t[1] += bt[1];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@C
  DDNetGetModelUpdateTime - The predicted time of the per-step work on a network's parameters: zeroing their gradients and an optimizer's update

  Collective

  Input Parameters:
+ net     - the set-up network
- streams - the arrays of the size of the parameters the optimizer's update reads and writes per
            parameter tensor (plain SGD 3: p and g read, p written; momentum 5; Adam 7)

  Output Parameters:
+ tzero      - seconds of `DDNetZeroGradients()` (max over ranks)
. tupdate    - seconds of the update (max over ranks)
- calibrated - whether the zeroing and axpy fits were in the calibration

  Notes:
  Zeroing is priced with the calibrated `DDTensorZeroEntries()` fit on each gradient's bytes. The
  update of 3, 5 or 7 streams is priced as the calibration timed `DDOptimizerStep()` of plain SGD,
  SGD with momentum or Adam (`DDModelCalibrate()`: one call, c0 + c1 parameter bytes, the gradient
  norm's pass and the update's arithmetic included; the share of the parameters, gradients and
  state beyond the core's L2 cache priced with the cold fit), plus on P > 1 ranks the all-reduce of
  the gradient norm; another count of streams, or a cache without those fits, with the
  `DDTensorAXPY()` fit (3 streams) scaled to the given streams per parameter tensor.

  Level: intermediate

.seealso: `DDNetGetModelTime()`, `DDModelCalibrate()`
@*/
PetscErrorCode DDNetGetModelUpdateTime(DDNet net, PetscInt streams, PetscReal *tzero, PetscReal *tupdate, PetscBool *calibrated)
DD_CXX_TRY
{
  PetscInt  n;
  PetscReal t[2] = {0, 0};
  PetscBool ok   = PETSC_TRUE;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCheck(net->setupcalled, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_WRONGSTATE, "Set the network up before asking for its model");
  PetscCheck(streams >= 1, PetscObjectComm((PetscObject)net), PETSC_ERR_ARG_OUTOFRANGE, "streams %" PetscInt_FMT " must be at least 1 (the update writes the parameters)", streams);
  PetscCall(ModelEnsureLoaded());
  PetscMPIInt P;
  PetscCallMPI(MPI_Comm_size(PetscObjectComm((PetscObject)net), &P));
  PetscCall(DDNetGetNumLayers(net, &n));
  std::map<std::pair<std::string, int>, PetscReal> upd; /* parameter bytes per backend and data type, priced by the update's fits */
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name, *bname;
    size_t      es;
    PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
    PetscCall(DDLayerGetBackend(l, &bname));
    for (PetscInt p = 0; p < l->nparams; p++) {
      DDTensor g = l->grads[p];
      if (!g || !g->active) continue;
      PetscCall(DDDataTypeGetSize(g->dtype, &es));
      PetscReal by = (PetscReal)es * (PetscReal)Storage(g), tu;
      t[0] += AuxTime(bname, P, g->dtype, kindZero, by, &ok);
      if (UpdateFitTime(bname, P, g->dtype, streams, 0, &tu)) { /* priced below, one call over all of them */
        upd[{bname, (int)g->dtype}] += by;
        continue;
      }
      auto it = FindKern(bname, P, g->dtype, kindAxpy, false);
      if (it == M.kern.end()) ok = PETSC_FALSE;
      else t[1] += it->second.c0 + it->second.c1 * (PetscReal)streams * by;
    }
  }
  for (const auto &u : upd) { /* one call over the parameters of a backend and data type */
    PetscReal tu;
    (void)UpdateFitTime(u.first.first.c_str(), P, (DDDataType)u.first.second, streams, u.second, &tu);
    t[1] += tu;
  }
  if (P > 1 && !upd.empty()) { /* DDOptimizerStep()'s gradient norm: an all-reduce */
    const char *bname;
    PetscCall(DDLayerGetBackend(net->impl->nodes[0].layer, &bname));
    t[1] += CollectiveTime(bname, P, (DDDataType)upd.begin()->first.second, 2, false, P, (PetscInt64)sizeof(PetscReal));
  }
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, t, 2, MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)net)));
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &ok, 1, MPIU_BOOL, MPI_LAND, PetscObjectComm((PetscObject)net)));
  if (tzero) *tzero = t[0];
  if (tupdate) *tupdate = t[1];
  if (calibrated) *calibrated = ok;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetGetModelTime - The predicted time of one forward and one backward of a set-up network

  Collective

  Input Parameter:
. net - the set-up network

  Output Parameters:
+ tforward   - seconds: the sum over the layers of the slowest rank's forward time
. tbackward  - seconds, the same for the backward, plus the network's own work in `DDNetBackward()`
               (zeroing the layers' output gradients, accumulating those of tensors with several consumers)
- calibrated - whether every layer's prediction had its calibration data

  Notes:
  Layers run one after the other and each waits for its slowest rank (its exchanges
  synchronise), so the step is the sum over layers of the maximum over ranks (paper 003 sec. V-B,
  without overlap between layers). When the network's memory M on this rank exceeds the core's L2
  cache, the kernels are priced with the share 1 - L2 / M of the cold fits (their tensors in
  memory) and the rest of the warm ones (`DDModelCalibrate()`).
  In the replicated weight mode (`DDNetSetWeightMode()`) the layers count no broadcast or
  sum-reduction of the weights the network keeps; the forward adds the network's refresh of the
  replicas as after an optimizer update (per bucket of a worker group: a flag all-reduce, packing,
  one broadcast, unpacking) and the backward its sum (the layers' copies into the bucket, one
  all-reduce, the root's additions, zeroing the bucket), the collectives priced as the layers' are.
  An automatic chooser can call this for a candidate
  distribution after `DDNetSetUp()` on it; set-up builds only plans and tensors, no kernel runs.

  Level: intermediate

.seealso: `DDLayerGetModelTime()`, `DDNetViewModel()`
@*/
PetscErrorCode DDNetGetModelTime(DDNet net, PetscReal *tforward, PetscReal *tbackward, PetscBool *calibrated)
DD_CXX_TRY
{
  PetscInt  n;
  PetscReal tf = 0, tb = 0;
  PetscBool ok = PETSC_TRUE;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  PetscCall(DDNetGetNumLayers(net, &n));
  double cold = 0;
  if (n > 0) PetscCall(NetCold(net, &cold));
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    PetscReal   t[4];
    PetscBool   c;
    PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
    PetscCall(LayerModelTime(l, NetLayerNoDx(net, i), cold, &t[0], &t[1], &t[2], &t[3], &c));
    PetscReal f[2] = {t[0] + t[1], t[2] + t[3]};
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, f, 2, MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)net)));
    tf += f[0];
    tb += f[1];
    if (!c) ok = PETSC_FALSE;
  }
  if (n > 0) {
    PetscReal o, r[2];
    PetscCall(NetBackwardOverhead(net, &o, &ok));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &o, 1, MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)net)));
    tb += o;
    if (net->impl->replicas) { /* the replicated mode's buckets (built on every rank or none) */
      std::vector<ddnn::NetReplicaBucketInfo> buckets;
      PetscCall(ddnn::NetReplicasGetBuckets_Private(net, buckets));
      PetscCall(NetReplicaTime(net, buckets, r, &ok));
      PetscCall(MPIU_Allreduce(MPI_IN_PLACE, r, 2, MPIU_REAL, MPIU_MAX, PetscObjectComm((PetscObject)net)));
      tf += r[0];
      tb += r[1];
    }
  }
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &ok, 1, MPIU_BOOL, MPI_LAND, PetscObjectComm((PetscObject)net)));
  if (tforward) *tforward = tf;
  if (tbackward) *tbackward = tb;
  if (calibrated) *calibrated = ok;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDNetViewModel - Prints the performance model of a set-up network: per layer the predicted forward and backward times, messages and bytes, and memory per rank; per step the totals

  Collective

  Input Parameters:
+ net    - the set-up network
- viewer - an ASCII viewer (NULL: stdout of the network's communicator)

  Options Database Keys:
+ -net_view             - `DDNetView()` prints this after the layers
. -dd_model_calibrate   - calibrate (`DDModelCalibrate()`) first if the cache lacks the network's backend and data type
. -dd_model_measure_convs <bool> - convolutions priced by timing their own local kernels (`DDLayerGetModelTime()`)
. -dd_model_measure_pools <bool> - poolings likewise
. -dd_model_measure_spectral <bool> - spectral layers likewise (default true: no fit prices them)
- -dd_model_cache <path> - the cache file

  Notes:
  Times and memory are the maximum over ranks, messages and bytes the maximum over ranks of
  max(sent, received). With `DDNetSetLayerTiming()` (-net_layer_timing) two more columns give each
  layer's measured forward and backward in the last sweeps (`DDNetGetLayerTimes()`, the slowest
  rank's; "-" before the layer has run). Without calibration data the times print as "not calibrated"; so do those
  of a network on a backend that computes in device memory (/gpu/cuda), which the model does not
  calibrate (-dd_model_calibrate does not calibrate it either).

  Level: intermediate

.seealso: `DDNetView()`, `DDLayerGetModelTime()`, `DDModelCalibrate()`
@*/
PetscErrorCode DDNetViewModel(DDNet net, PetscViewer viewer)
DD_CXX_TRY
{
  MPI_Comm  comm;
  PetscInt  n;
  PetscBool iascii, cal = PETSC_FALSE, allok = PETSC_TRUE;
  DDBackend   b;
  DDMemType   mt    = DD_MEMTYPE_HOST;
  const char *bname = nullptr;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(net, DD_NET_CLASSID, 1);
  comm = PetscObjectComm((PetscObject)net);
  if (!viewer) PetscCall(PetscViewerASCIIGetStdout(comm, &viewer));
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDNetGetNumLayers(net, &n));
  if (!n) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-dd_model_calibrate", &cal, NULL));
  {
    DDLayer     l0;
    const char *nm;
    PetscBool   have;
    PetscCall(DDNetGetLayerByIndex(net, 0, &l0, &nm));
    PetscCall(DDLayerGetBackend(l0, &bname));
    PetscCall(DDModelLoad(comm, bname, l0->output->dtype, &have));
    PetscCall(DDBackendGet(bname, &b));
    PetscCall(DDBackendGetMemType(b, &mt));
    if (cal && !have && mt == DD_MEMTYPE_HOST) PetscCall(DDModelCalibrate(comm, bname, l0->output->dtype));
  }
  PetscCall(PetscViewerASCIIPrintf(viewer, "performance model (per rank, max over ranks; paper 003 sec. V):\n"));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  const bool timed = net->impl->layertiming; /* -net_layer_timing: the last sweeps' measured times beside the predictions */
  PetscCall(DDCheckSameString(comm, "DDNetViewModel(): the layer timing (-net_layer_timing, DDNetSetLayerTiming())", timed ? "on" : "off")); /* its columns take an all-reduce per layer */
  PetscCall(PetscViewerASCIIPrintf(viewer, "%-12s %-13s %10s %10s %9s %10s %9s %10s %10s %10s %10s %10s%s\n", "layer", "type", "fwd ms", "bwd ms", "fwd msgs", "fwd KiB", "bwd msgs", "bwd KiB", "act KiB", "halo KiB", "param KiB", "work KiB", timed ? "  meas fwd  meas bwd" : ""));
  PetscReal  tot[2] = {0, 0};
  PetscInt64 totc[4] = {0, 0, 0, 0}, totm[4] = {0, 0, 0, 0};
  double     cold;
  PetscCall(NetCold(net, &cold));
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    DDLayerType type;
    PetscReal   t[4];
    PetscBool   ok;
    PetscInt64  cf[4], cb[4], mem[4], q[8];
    PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
    PetscCall(DDLayerGetType(l, &type));
    PetscCall(LayerModelTime(l, NetLayerNoDx(net, i), cold, &t[0], &t[1], &t[2], &t[3], &ok));
    PetscCall(DDNetGetLayerModelComm(net, i, PETSC_FALSE, &cf[0], &cf[1], &cf[2], &cf[3]));
    PetscCall(DDNetGetLayerModelComm(net, i, PETSC_TRUE, &cb[0], &cb[1], &cb[2], &cb[3]));
    PetscCall(DDLayerGetModelMemory(l, &mem[0], &mem[1], &mem[2], &mem[3]));
    PetscReal tt[2] = {t[0] + t[1], t[2] + t[3]};
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, tt, 2, MPIU_REAL, MPIU_MAX, comm));
    q[0] = PetscMax(cf[0], cf[2]);
    q[1] = PetscMax(cf[1], cf[3]);
    q[2] = PetscMax(cb[0], cb[2]);
    q[3] = PetscMax(cb[1], cb[3]);
    for (int k = 0; k < 4; k++) q[4 + k] = mem[k];
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, q, 8, MPIU_INT64, MPI_MAX, comm));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &ok, 1, MPIU_BOOL, MPI_LAND, comm));
    if (!ok) allok = PETSC_FALSE;
    char tf[32], tb[32];
    if (ok) {
      PetscCall(PetscSNPrintf(tf, sizeof(tf), "%10.4f", (double)(1e3 * tt[0])));
      PetscCall(PetscSNPrintf(tb, sizeof(tb), "%10.4f", (double)(1e3 * tt[1])));
    } else {
      PetscCall(PetscStrncpy(tf, "     n/c", sizeof(tf)));
      PetscCall(PetscStrncpy(tb, "     n/c", sizeof(tb)));
    }
    char meas[64] = "";
    if (timed) { /* the slowest rank's, "-" where the layer has not run since timing began */
      PetscReal m[2];
      char      a[2][16];
      PetscCall(DDNetGetLayerTimes(net, i, &m[0], &m[1]));
      PetscCall(MPIU_Allreduce(MPI_IN_PLACE, m, 2, MPIU_REAL, MPIU_MAX, comm));
      for (int k = 0; k < 2; k++) {
        if (m[k] >= 0) PetscCall(PetscSNPrintf(a[k], sizeof(a[k]), "%10.4f", (double)(1e3 * m[k])));
        else PetscCall(PetscStrncpy(a[k], "         -", sizeof(a[k])));
      }
      PetscCall(PetscSNPrintf(meas, sizeof(meas), "%s%s", a[0], a[1]));
    }
    PetscCall(PetscViewerASCIIPrintf(viewer, "%-12s %-13s %10s %10s %9" PetscInt64_FMT " %10.1f %9" PetscInt64_FMT " %10.1f %10.1f %10.1f %10.1f %10.1f%s\n", name, type, tf, tb, q[0], q[1] / 1024.0, q[2], q[3] / 1024.0, q[4] / 1024.0, q[5] / 1024.0, q[6] / 1024.0, q[7] / 1024.0, meas));
    tot[0] += tt[0];
    tot[1] += tt[1];
    for (int k = 0; k < 4; k++) {
      totc[k] += q[k];
      totm[k] += q[4 + k];
    }
  }
  if (allok) PetscCall(PetscViewerASCIIPrintf(viewer, "%-26s %10.4f %10.4f %9" PetscInt64_FMT " %10.1f %9" PetscInt64_FMT " %10.1f %10.1f %10.1f %10.1f %10.1f\n", "total", (double)(1e3 * tot[0]), (double)(1e3 * tot[1]), totc[0], totc[1] / 1024.0, totc[2], totc[3] / 1024.0, totm[0] / 1024.0, totm[1] / 1024.0, totm[2] / 1024.0, totm[3] / 1024.0));
  else PetscCall(PetscViewerASCIIPrintf(viewer, "%-26s %10s %10s %9" PetscInt64_FMT " %10.1f %9" PetscInt64_FMT " %10.1f %10.1f %10.1f %10.1f %10.1f\n", "total", "n/c", "n/c", totc[0], totc[1] / 1024.0, totc[2], totc[3] / 1024.0, totm[0] / 1024.0, totm[1] / 1024.0, totm[2] / 1024.0, totm[3] / 1024.0));
  {
    PetscReal o;
    PetscCall(NetBackwardOverhead(net, &o, &allok));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &o, 1, MPIU_REAL, MPIU_MAX, comm));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &allok, 1, MPIU_BOOL, MPI_LAND, comm));
    tot[1] += o;
    if (allok) PetscCall(PetscViewerASCIIPrintf(viewer, "the network's own work in the backward (zeroing output gradients, accumulating shared ones): %.4f ms\n", (double)(1e3 * o)));
  }
  if (net->impl->replicas) {
    PetscReal                               r[2];
    std::vector<ddnn::NetReplicaBucketInfo> buckets;
    PetscInt64                              nb[3] = {0, 0, 0}; /* buckets with a collective, the largest, the data-parallel mode (a rank may hold no bucket) */
    PetscCall(ddnn::NetReplicasGetBuckets_Private(net, buckets));
    PetscCall(NetReplicaTime(net, buckets, r, &allok));
    for (const auto &b : buckets) {
      nb[0] += b.group > 1;
      nb[1] = PetscMax(nb[1], b.count);
      nb[2] = PetscMax(nb[2], b.dataparallel ? 1 : 0);
    }
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, r, 2, MPIU_REAL, MPIU_MAX, comm));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, nb, 3, MPIU_INT64, MPI_MAX, comm));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &allok, 1, MPIU_BOOL, MPI_LAND, comm));
    tot[0] += r[0];
    tot[1] += r[1];
    const bool dp = nb[2] > 0;
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s weights (-net_weights %s; the layers above count no weight broadcast): %" PetscInt64_FMT " bucket(s) with a collective per rank, the largest %" PetscInt64_FMT " entries (max over ranks)", dp ? "data-parallel" : "replicated", dp ? "dataparallel" : "replicated", nb[0], nb[1]));
    if (allok && dp) PetscCall(PetscViewerASCIIPrintf(viewer, "; a flag all-reduce per forward %.4f ms, an all-reduce per backward and the copies' update %.4f ms\n", (double)(1e3 * r[0]), (double)(1e3 * r[1])));
    else if (allok) PetscCall(PetscViewerASCIIPrintf(viewer, "; a broadcast after each update %.4f ms, an all-reduce per backward %.4f ms\n", (double)(1e3 * r[0]), (double)(1e3 * r[1])));
    else PetscCall(PetscViewerASCIIPrintf(viewer, "; times n/c\n"));
  }
  if (allok) PetscCall(PetscViewerASCIIPrintf(viewer, "predicted step (forward + backward): %.4f ms; memory per rank %.1f KiB\n", (double)(1e3 * (tot[0] + tot[1])), (totm[0] + totm[1] + totm[2] + totm[3]) / 1024.0));
  else {
    const char *path;
    PetscCall(DDModelGetCachePath(&path));
    if (mt != DD_MEMTYPE_HOST) PetscCall(PetscViewerASCIIPrintf(viewer, "predicted step: not calibrated (n/c: the network computes on %s, in %s memory, and the performance model calibrates host backends only); memory per rank %.1f KiB\n", bname, DDMemTypes[mt], (totm[0] + totm[1] + totm[2] + totm[3]) / 1024.0));
    else if (M.stale) PetscCall(PetscViewerASCIIPrintf(viewer, "predicted step: not calibrated (n/c: the model cache %s is stale, written by an older ddnn (cache version %d, this one reads %d); run with -dd_model_calibrate to rewrite it); memory per rank %.1f KiB\n", path, M.stale, cacheVersion, (totm[0] + totm[1] + totm[2] + totm[3]) / 1024.0));
    else PetscCall(PetscViewerASCIIPrintf(viewer, "predicted step: not calibrated (n/c: no kernel rates or alpha-beta fit for this backend and data type in %s; run with -dd_model_calibrate); memory per rank %.1f KiB\n", path, (totm[0] + totm[1] + totm[2] + totm[3]) / 1024.0));
  }
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

namespace ddnn
{
/* calibrate.cxx's results into the store */
PetscErrorCode ModelStoreComm_Private(PetscReal alpha, PetscReal beta)
{
  PetscFunctionBegin;
  M.commok = true;
  M.alpha  = alpha;
  M.beta   = beta;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ModelStoreRunCost_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, double c)
{
  PetscFunctionBegin;
  M.runcost[KernelKey(backend, dt, kind, bwd ? true : false)] = c;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* t = c0 + c1 w of a kernel (the caller's measurements) evaluated at w: for the per-run cost's residual */
PetscErrorCode ModelKernelTime_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, double w, double *t)
{
  PetscFunctionBegin;
  auto it = M.kern.find(KernelKey(backend, dt, kind, bwd ? true : false));
  PetscCheck(it != M.kern.end(), PETSC_COMM_SELF, PETSC_ERR_PLIB, "No fit of %s yet", kind);
  *t = it->second.c0 + it->second.c1 * w;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a fit over several shapes with more terms: rows (work, further terms); the GEMM kinds' further terms are input bytes, output
   bytes, idle-lane flops or weight bytes, column rows, direct passes' flops, the window kinds' their output rows */
PetscErrorCode ModelStoreGemmKernel_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, const std::vector<std::vector<double>> &X, const std::vector<double> &t)
{
  PetscFunctionBegin;
  PetscCheck(!X.empty() && X.size() == t.size() && X[0].size() >= 1 && X[0].size() <= 6, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Calibration of %s gave no work", kind);
  M.kern[KernelKey(backend, dt, kind, bwd ? true : false)] = LeastSquaresMulti(X, t);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* GemmBytes() for the calibration */
PetscErrorCode ModelGemmBytes_Private(DDLayer layer, PetscBool backward, double e[5])
{
  PetscFunctionBegin;
  GemmBytes(layer, backward, e);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ModelStoreKernel_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, const std::vector<double> &work, const std::vector<double> &t)
{
  PetscFunctionBegin;
  PetscCheck(!work.empty() && work.size() == t.size() && work.back() > 0, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Calibration of %s gave no work", kind);
  M.kern[KernelKey(backend, dt, kind, bwd ? true : false)] = LeastSquares(work, t);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* rank 0 writes the cache; every rank learns whether it could */
PetscErrorCode ModelSave_Private(MPI_Comm comm)
{
  PetscMPIInt    rank;
  PetscErrorCode ierr = PETSC_SUCCESS;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(ModelCachePath(M.path));
  if (!rank) ierr = ModelWriteCache(M.path);
  PetscCallMPI(MPI_Bcast(&ierr, 1, MPI_INT, 0, comm));
  PetscCheck(!ierr, comm, PETSC_ERR_FILE_WRITE, "Rank 0 could not write the model cache %s", M.path.c_str());
  M.loaded = true;
  M.stale  = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn

namespace ddnn
{
/* the calibrated per-run cost of a pointwise walk (the runcost entries), for the analytic model (analytic.cxx) */
PetscErrorCode ModelRunCost_Private(const char backend[], DDDataType dt, const char kind[], PetscBool bwd, double *c, PetscBool *found)
{
  PetscFunctionBegin;
  PetscCall(ModelEnsureLoaded());
  auto it = M.runcost.find(KernelKey(backend, dt, kind, bwd ? true : false));
  *found  = it == M.runcost.end() ? PETSC_FALSE : PETSC_TRUE;
  *c      = it == M.runcost.end() ? 0 : it->second;
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
