/*
  bench_paper_model: the performance model's predictions for the papers' large configurations,
  which cannot be set up here (issue 16, item 4), from its analytic form (DDModelPredictLayer()):

  - paper 000 sec. 5.3: the depth-5 3-D U-Net (batch normalization after each convolution, linear
    upsampling followed by a 1x1x1 convolution in the up-cycle), weak scaling over P = p^3 tasks,
    p = 1..18, at 3 x 32^3, 3 x 48^3 and 1 x 64^3 inputs per task (1 x 1152^3 on 5832 tasks);
  - paper 003 sec. VI-B: the 1K and 2K mesh models (18 channels, six blocks of three (1K) or five
    (2K) conv-BN-ReLU, 3x3 filters, stride-2 first convolution per block, a final convolution),
    hybrid sample/spatial parallelism at 1, 2, 4, 8 and 16 GPUs per sample and the mini-batch
    sizes of Tables I and II (up to 2048 ranks).

  Per configuration: the predicted time per step (forward + backward, the sum over layers of the
  slowest rank's time, as DDNetGetModelTime()), the fractions of it in halo exchanges and in the
  weights' collectives, memory per rank (the sum over layers of the largest rank's
  DDLayerGetModelMemory(); "+dy": with the network's gradient of every layer output, another copy
  of the activations), and speed-ups, beside the papers' published numbers. "(ar)": the same step
  with the weights kept and updated on every rank (data-parallel) and their gradients all-reduced
  once per step in one bucket (Rabenseifner) instead of ddnn's broadcast per forward and
  sum-reduction per backward per layer. "(repl)": ddnn's replicated weight mode (-net_weights
  replicated): the layers without weight collectives (DDModelLayerSpec's replicated flag) plus the
  network's bucket, one broadcast after each update and one all-reduce per backward
  (DDModelPredictReplicatedWeights()), as DDNetGetModelTime() prices a set-up network in that mode.
  "(dp)": ddnn's data-parallel weight mode (-net_weights dataparallel): the same layers plus the
  network's bucket without the broadcast after an update, and with the workers' update of their
  copies (Adam, 7 streams; DDModelPredictDataParallelWeights()), ddnn's form of "(ar)" (which
  counts no update).

  Usage:
    bench_paper_model [-paper 000|003|all] [-machine here|v100|rates] [-alpha s] [-beta s/byte] [-dd_model_calibrate]
  -machine here: this machine's calibration (the model cache, DDModelGetCachePath(); with
                 -dd_model_calibrate it is measured first if absent); alpha/beta are then an
                 on-node ping-pong's, so the times are those of this machine's cores and memory.
  -machine v100: a stated set of rates for the papers' hardware (a V100: 7 TFLOP/s in the
                 convolutions, 700 GB/s in the memory-bound kernels, 20 us per kernel call;
                 EDR InfiniBand: alpha 5 us, beta 1/12.5 GB/s), written to a temporary cache;
  -machine rates: the same with -conv_gflops, -mem_gbs, -call_us, -net_alpha (s), -net_gbs.
  -alpha, -beta: replace the point-to-point parameters (DDModelSetCommParameters()).
*/
#include <ddnn.h>
#include <ddmodel.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <unistd.h>

namespace
{
struct Net {
  std::vector<DDModelLayerSpec> L;
  PetscInt                      order = 5, shape[DD_MAX_DIM], parts[DD_MAX_DIM];
  DDDataType                    dt = DD_FLOAT32;

  PetscErrorCode Start(PetscInt o, const PetscInt s[], const PetscInt p[])
  {
    PetscFunctionBegin;
    order = o;
    for (PetscInt k = 0; k < o; k++) {
      shape[k] = s[k];
      parts[k] = p[k];
    }
    L.clear();
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* appends a layer on the current shape; the current shape becomes its output's */
  PetscErrorCode Add(DDLayerType t, PetscInt channels, PetscInt k, PetscInt s, PetscInt p, PetscBool linear = PETSC_FALSE)
  {
    DDModelLayerSpec       spec;
    DDModelLayerPrediction pr;
    PetscFunctionBegin;
    PetscCall(DDModelLayerSpecInitialize(&spec, t, dt, order, shape, parts));
    spec.channels = channels;
    spec.bias     = PETSC_FALSE; /* followed by batch normalization */
    spec.linear   = linear;
    for (PetscInt j = 0; j < order - 2; j++) {
      spec.kernel[j]  = k;
      spec.stride[j]  = s;
      spec.padding[j] = p;
    }
    if (L.empty()) spec.noinputgradient = PETSC_TRUE;
    PetscCall(DDModelPredictLayer(&spec, NULL, NULL, 0, &pr));
    for (PetscInt q = 0; q < order; q++) shape[q] = pr.outshape[q];
    L.push_back(spec);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode ConvBNReLU(PetscInt co, PetscInt stride)
  {
    PetscFunctionBegin;
    PetscCall(Add(DDLAYERCONV, co, 3, stride, 1));
    PetscCall(Add(DDLAYERBATCHNORM, 0, 1, 1, 0));
    PetscCall(Add(DDLAYERACTIVATION, 0, 1, 1, 0));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};

struct Step {
  PetscReal  tf = 0, tb = 0, comm = 0, coll = 0, allreduce = 0, repl = 0, dp = 0;
  PetscInt64 mem = 0, act = 0, msgs = 0, bytes = 0;
  PetscBool  cal = PETSC_TRUE;
};

PetscReal CeilLog2(PetscInt64 p)
{
  PetscReal l = 0;
  for (PetscInt64 q = 1; q < p; q *= 2) l++;
  return l;
}

/* the step: per layer the slowest rank (DDModelPredictLayerMax), consumer = the next layer */
PetscErrorCode Evaluate(const Net &n, Step *st)
{
  PetscReal alpha, beta;
  PetscInt64 ranks = 1, wbytes = 0;

  PetscFunctionBegin;
  *st = Step();
  PetscCall(DDModelGetCommParameters(&alpha, &beta, NULL));
  for (PetscInt k = 0; k < n.order; k++) ranks *= n.L[0].parts[k];
  for (size_t i = 0; i < n.L.size(); i++) {
    DDModelLayerPrediction p, pr;
    DDModelLayerSpec       spec = n.L[i];
    const DDModelLayerSpec *next = i + 1 < n.L.size() ? &n.L[i + 1] : NULL;
    if (next && n.L[i].type == std::string(DDLAYERLOSS)) next = NULL;
    PetscCall(DDModelPredictLayerMax(&spec, next, NULL, &p));
    /* ddnn's replicated weight mode (-net_weights replicated): the layer without its weight collectives */
    spec.replicated = PETSC_TRUE;
    PetscCall(DDModelPredictLayerMax(&spec, next, NULL, &pr));
    st->repl += pr.time[0] + pr.time[1] + pr.time[2] + pr.time[3];
    st->tf += p.time[0] + p.time[1];
    st->tb += p.time[2] + p.time[3];
    st->comm += p.time[1] + p.time[3];
    st->coll += p.tcoll[0] + p.tcoll[1];
    for (int k = 0; k < 4; k++) st->mem += p.memory[k];
    st->act += p.memory[0];
    wbytes += p.memory[2] / 2; /* weights (and their gradients) on their owner */
    st->msgs += PetscMax(p.comm[0][0], p.comm[0][2]) + PetscMax(p.comm[1][0], p.comm[1][2]);
    st->bytes += PetscMax(p.comm[0][1], p.comm[0][3]) + PetscMax(p.comm[1][1], p.comm[1][3]);
    if (!p.calibrated) st->cal = PETSC_FALSE;
  }
  /* a data-parallel alternative: weights kept and updated on every rank, the gradients all-reduced once
     per step in one bucket (Rabenseifner, paper 003 ref. [22]) instead of a broadcast per forward and a reduce per backward, per layer */
  if (ranks > 1) st->allreduce = 2 * CeilLog2(ranks) * alpha + 2.0 * (PetscReal)(ranks - 1) / (PetscReal)ranks * beta * (PetscReal)wbytes;
  /* the replicated mode's step: its layers (above) plus the network's bucket (a broadcast after each
     update, an all-reduce per backward, the copies), on the root that holds every weight */
  size_t es;
  PetscCall(DDDataTypeGetSize(n.dt, &es));
  PetscReal rf, rb;
  PetscBool rok;
  PetscCall(DDModelPredictReplicatedWeights(NULL, n.dt, ranks, wbytes / (PetscInt64)es, &rf, &rb, &rok));
  if (!rok) st->cal = PETSC_FALSE;
  st->dp = st->repl; /* the same layers */
  st->repl += rf + rb;
  /* the data-parallel mode's: the same layers, the bucket without the broadcast, the workers' update */
  PetscCall(DDModelPredictDataParallelWeights(NULL, n.dt, ranks, wbytes / (PetscInt64)es, &rf, &rb, &rok));
  if (!rok) st->cal = PETSC_FALSE;
  st->dp += rf + rb;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Paper 000's 3-D U-Net: depth 5 (64 ... 1024 channels), two conv-BN-ReLU per level, max pooling
  by 2, up-cycle: linear upsampling by 2, a 1x1x1 convolution halving the channels, concatenation
  with the skip, two conv-BN-ReLU; a final 1x1x1 convolution to one channel and the MSE loss.
*/
PetscErrorCode UNet3D(Net &n, PetscInt batch, PetscInt side, PetscInt p)
{
  const PetscInt shape[5] = {batch, 1, side, side, side}, parts[5] = {1, 1, p, p, p};
  std::vector<PetscInt> skipc;

  PetscFunctionBegin;
  PetscCall(n.Start(5, shape, parts));
  PetscInt c = 64;
  for (int lv = 0; lv < 5; lv++, c *= 2) {
    PetscCall(n.ConvBNReLU(c, 1));
    PetscCall(n.ConvBNReLU(c, 1));
    skipc.push_back(c);
    if (lv < 4) PetscCall(n.Add(DDLAYERPOOL, 0, 2, 2, 0));
  }
  c /= 2;
  for (int lv = 3; lv >= 0; lv--) {
    c /= 2;
    PetscCall(n.Add(DDLAYERUPSAMPLE, 0, 1, 2, 0, PETSC_TRUE));
    PetscCall(n.Add(DDLAYERCONV, c, 1, 1, 0));
    PetscCall(n.Add(DDLAYERCONCAT, skipc[lv], 1, 1, 0));
    PetscCall(n.ConvBNReLU(c, 1));
    PetscCall(n.ConvBNReLU(c, 1));
  }
  PetscCall(n.Add(DDLAYERCONV, 1, 1, 1, 0));
  PetscCall(n.Add(DDLAYERLOSS, 0, 1, 1, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Paper 003's mesh model: 18 channels, six blocks of convs (3: 1K, 5: 2K) with VGG's widths
   64, 128, 256, 512, 512, 512 (the paper does not give them: an assumption), stride 2 first; a final 3x3 convolution to 2 classes */
PetscErrorCode MeshModel(Net &n, PetscInt side, PetscInt convs, PetscInt N, PetscInt ph, PetscInt pw)
{
  const PetscInt shape[4] = {N, 18, side, side}, parts[4] = {N, 1, ph, pw}, width[6] = {64, 128, 256, 512, 512, 512};

  PetscFunctionBegin;
  PetscCall(n.Start(4, shape, parts));
  for (int b = 0; b < 6; b++)
    for (PetscInt c = 0; c < convs; c++) PetscCall(n.ConvBNReLU(width[b], c == 0 ? 2 : 1));
  PetscCall(n.Add(DDLAYERCONV, 2, 3, 1, 1));
  PetscCall(n.Add(DDLAYERLOSS, 0, 1, 1, 0));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a cache with stated rates (default: the papers' hardware, a V100 on EDR InfiniBand) */
PetscErrorCode RatesCache(std::string &file)
{
  char        host[256] = {0};
  const char *bname;
  PetscReal   gflops = 7000, gbs = 700, callus = 20, alpha = 5e-6, netgbs = 12.5;

  PetscFunctionBegin;
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-conv_gflops", &gflops, NULL));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-mem_gbs", &gbs, NULL));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-call_us", &callus, NULL));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-net_alpha", &alpha, NULL));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-net_gbs", &netgbs, NULL));
  PetscCheck(gflops > 0 && gbs > 0 && callus >= 0 && alpha >= 0 && netgbs > 0, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "-conv_gflops %g, -mem_gbs %g and -net_gbs %g must be positive, -call_us %g and -net_alpha %g non-negative", (double)gflops, (double)gbs, (double)netgbs, (double)callus, (double)alpha);
  PetscCall(DDBackendGetDefault(&bname));
  if (gethostname(host, sizeof(host) - 1)) std::strcpy(host, "unknown");
  for (char *c = host; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  file    = "/tmp/ddnn_bench_paper_model_" + std::to_string((long)getpid()) + ".txt";
  FILE *f = fopen(file.c_str(), "w");
  PetscCheck(f, PETSC_COMM_SELF, PETSC_ERR_FILE_OPEN, "Cannot write %s", file.c_str());
  /* the model cache's current version (model.cxx's cacheVersion: an older one is stale, its fits
     ignored, and every time printed n/c): no cold fits (the warm ones serve), no measured collectives
     (Thakur et al.'s formulas on alpha and beta); a first layer's backward, the weight gradient alone, half the flops */
  fprintf(f, "ddnn-model-cache 16\nhost %s\ncomm %.6g %.6g\n", host, (double)alpha, 1e-9 / (double)netgbs);
  for (const char *d : {"f", "b"}) {
    fprintf(f, "kernel %s float32 conv %s %.6g %.6g\n", bname, d, 1e-6 * (double)callus, 1e-9 / (double)gflops);
    for (const char *k : {"batchnorm", "activation", "pool", "pool-avg", "upsample", "concat", "loss"}) fprintf(f, "kernel %s float32 %s %s %.6g %.6g\n", bname, k, d, 1e-6 * (double)callus, 1e-9 / (double)gbs);
    fprintf(f, "runcost %s float32 activation-rows %s 0\n", bname, d);
  }
  fprintf(f, "kernel %s float32 conv-wgrad b %.6g %.6g\n", bname, 1e-6 * (double)callus, 0.5e-9 / (double)gflops);
  /* the tensor kernels of the replicated mode's copies (and the network's own work): memory-bound */
  for (const char *k : {"tensorzero", "tensoraxpy"}) fprintf(f, "kernel %s float32 %s f %.6g %.6g\n", bname, k, 1e-6 * (double)callus, 1e-9 / (double)gbs);
  fclose(f);
  PetscCall(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  PetscCall(DDModelReset());
  PetscFunctionReturn(PETSC_SUCCESS);
}

const char *Time(char *buf, size_t n, PetscBool cal, PetscReal t)
{
  if (cal) snprintf(buf, n, "%10.4g", (double)t);
  else snprintf(buf, n, "%10s", "n/c");
  return buf;
}

/* paper 003, Tables I and II: mini-batch seconds at N (rows) and GPUs/sample (columns); 0: n/a */
const PetscInt  tabN1[9]     = {4, 8, 16, 32, 64, 128, 256, 512, 1024};
const double    tab1[9][5]   = {{0.403, 0.2, 0.121, 0.0906, 0.066}, {0.399, 0.201, 0.124, 0.0829, 0.0681}, {0.4, 0.201, 0.121, 0.085, 0.0739}, {0.401, 0.207, 0.123, 0.0874, 0.0794}, {0.407, 0.208, 0.124, 0.0911, 0.0839}, {0.407, 0.209, 0.125, 0.0931, 0.0902}, {0.401, 0.209, 0.127, 0.0977, 0}, {0.393, 0.209, 0.126, 0, 0}, {0.4, 0.211, 0, 0, 0}};
const PetscInt  tabN2[9]     = {2, 4, 8, 16, 32, 64, 128, 256, 512};
const double    tab2[9][5]   = {{0, 0.247, 0.12, 0.0859, 0.0683}, {0, 0.249, 0.123, 0.0895, 0.0662}, {0, 0.25, 0.125, 0.0849, 0.0665}, {0, 0.249, 0.121, 0.0848, 0.0681}, {0, 0.251, 0.122, 0.0851, 0.0703}, {0, 0.252, 0.122, 0.0856, 0.0729}, {0, 0.252, 0.122, 0.0867, 0.0748}, {0, 0.25, 0.123, 0.089, 0}, {0, 0.249, 0.123, 0, 0}};
const PetscInt  gps[5]       = {1, 2, 4, 8, 16};
const PetscInt  gsplit[5][2] = {{1, 1}, {2, 1}, {2, 2}, {4, 2}, {4, 4}};
} // namespace

int main(int argc, char **argv)
{
  char        paper[16] = "all", machine[16] = "here";
  PetscReal   alpha = -1, beta = -1;
  PetscBool   cal = PETSC_FALSE, have;
  std::string tmpcache;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-paper", paper, sizeof(paper), NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-machine", machine, sizeof(machine), NULL));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-alpha", &alpha, NULL));
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-beta", &beta, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-dd_model_calibrate", &cal, NULL));
  PetscCheck(!strcmp(machine, "here") || !strcmp(machine, "v100") || !strcmp(machine, "rates"), PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "-machine %s: here, v100 or rates", machine);
  PetscCheck(!strcmp(paper, "000") || !strcmp(paper, "003") || !strcmp(paper, "all"), PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "-paper %s: 000, 003 or all", paper);
  if (strcmp(machine, "here")) PetscCall(RatesCache(tmpcache));
  PetscCall(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have));
  if (!have && cal && tmpcache.empty()) PetscCall(DDModelCalibrate(PETSC_COMM_WORLD, NULL, DD_FLOAT32));
  if (alpha >= 0 || beta >= 0) {
    PetscReal a, b;
    PetscCall(DDModelGetCommParameters(&a, &b, NULL));
    PetscCall(DDModelSetCommParameters(alpha >= 0 ? alpha : a, beta >= 0 ? beta : b));
  }
  {
    PetscReal   a, b, c0, c1;
    PetscBool   ok;
    const char *path;
    PetscCall(DDModelGetCommParameters(&a, &b, &ok));
    PetscCall(DDModelGetKernelFit(NULL, DD_FLOAT32, DDLAYERCONV, PETSC_FALSE, &c0, &c1, NULL));
    PetscCall(DDModelGetCachePath(&path));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "machine %s (cache %s): alpha %.3g s, beta %.3g s/B (%.3g GB/s)%s; conv forward %.3g s + %.3g s/flop (%.3g GFLOP/s); float32\n", machine, path, (double)a, (double)b, b > 0 ? 1e-9 / (double)b : 0.0, ok ? "" : " (not calibrated)", (double)c0, (double)c1, c1 > 0 ? 1e-9 / (double)c1 : 0.0));
  }
  char b1[32], b2[32], b3[32], b4[32];
  if (strcmp(paper, "003")) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\npaper 000 sec. 5.3: 3-D U-Net (depth 5), weak scaling over P = p^3 tasks (spatial p x p x p); per task: batch x side^3\n"));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "published (Fig. 9, TinkerCliffs, 4 threads/task, 8 GB/task): adjoint 'excellent scalability', forward 'less ideal'; 1 x 64^3 per task is about the memory limit\n"));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-9s %3s %5s %-12s %10s %10s %6s %6s %7s %8s %7s %7s %7s %9s %9s %10s %8s\n", "per task", "p", "P", "global", "fwd s", "bwd s", "halo%", "coll%", "msgs", "MiB p2p", "mem GiB", "+dy GiB", "eff", "allred s", "eff (ar)", "eff (repl)", "eff (dp)"));
    const PetscInt cfg[3][2] = {{3, 32}, {3, 48}, {1, 64}};
    for (auto &c : cfg) {
      PetscReal t1 = 0, t1r = 0, t1d = 0;
      for (PetscInt p = 1; p <= 18; p++) {
        Net  n;
        Step st;
        PetscCall(UNet3D(n, c[0], c[1] * p, p));
        PetscCall(Evaluate(n, &st));
        const PetscReal t = st.tf + st.tb, tar = t - st.coll + st.allreduce;
        if (p == 1) {
          t1  = t;
          t1r = st.repl;
          t1d = st.dp;
        }
        char cfgs[16], glob[32];
        snprintf(cfgs, sizeof(cfgs), "%dx%d^3", (int)c[0], (int)c[1]);
        snprintf(glob, sizeof(glob), "%dx%d^3", (int)c[0], (int)(c[1] * p));
        PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-9s %3d %5d %-12s %s %s %6.1f %6.1f %7lld %8.1f %7.2f %7.2f %7.2f %9.4f %9.2f %10.2f %8.2f\n", cfgs, (int)p, (int)(p * p * p), glob, Time(b1, sizeof(b1), st.cal, st.tf), Time(b2, sizeof(b2), st.cal, st.tb), st.cal ? 100.0 * (st.comm - st.coll) / t : 0.0, st.cal ? 100.0 * st.coll / t : 0.0, (long long)st.msgs, st.bytes / 1048576.0, st.mem / 1073741824.0, (st.mem + st.act) / 1073741824.0, st.cal ? t1 / t : 0.0, (double)st.allreduce, st.cal ? t1 / tar : 0.0, st.cal ? t1r / st.repl : 0.0, st.cal ? t1d / st.dp : 0.0));
      }
    }
  }
  if (strcmp(paper, "000")) {
    for (int m = 0; m < 2; m++) {
      const PetscInt side = m ? 2048 : 1024, convs = m ? 5 : 3, base = m ? 1 : 0;
      const PetscInt *tn  = m ? tabN2 : tabN1;
      const double(*tab)[5] = m ? tab2 : tab1;
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\npaper 003 sec. VI-B: %s mesh model (%dx%d, 18 channels, 6 blocks of %d conv-BN-ReLU), hybrid sample/spatial, mini-batch N over N x g ranks\n", m ? "2K" : "1K", (int)side, (int)side, (int)convs));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "published: Table %s (Lassen, V100), mini-batch time and speed-up over %d GPU%s/sample\n", m ? "II" : "I", (int)gps[base], base ? "s" : ""));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%5s %3s %5s %-5s %10s %6s %6s %7s %7s %8s %10s %8s %10s %9s %10s %8s %8s %8s\n", "N", "g", "ranks", "split", "step s", "halo%", "coll%", "mem GiB", "+dy GiB", "speedup", "step(ar) s", "sp.(ar)", "step(rp) s", "sp.(repl)", "step(dp) s", "sp.(dp)", "paper s", "paper x"));
      for (int r = 0; r < 9; r++) {
        PetscReal tbase = 0, tbasear = 0, tbaserp = 0, tbasedp = 0;
        for (int g = base; g < 5; g++) {
          const PetscInt N = tn[r];
          if (N * gps[g] > 2048 || tab[r][g] == 0) continue;
          Net  n;
          Step st;
          PetscCall(MeshModel(n, side, convs, N, gsplit[g][0], gsplit[g][1]));
          PetscCall(Evaluate(n, &st));
          const PetscReal t = st.tf + st.tb, tar = t - st.coll + st.allreduce;
          if (g == base) {
            tbase   = t;
            tbasear = tar;
            tbaserp = st.repl;
            tbasedp = st.dp;
          }
          char split[16], ps[32], px[16];
          snprintf(split, sizeof(split), "%dx%d", (int)gsplit[g][0], (int)gsplit[g][1]);
          snprintf(ps, sizeof(ps), "%.3g", tab[r][g]);
          snprintf(px, sizeof(px), "%.1fx", tab[r][base] / tab[r][g]);
          PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%5d %3d %5d %-5s %s %6.1f %6.1f %7.2f %7.2f %7.2fx %s %7.2fx %s %8.2fx %s %7.2fx %8s %8s\n", (int)N, (int)gps[g], (int)(N * gps[g]), split, Time(b3, sizeof(b3), st.cal, t), st.cal ? 100.0 * (st.comm - st.coll) / t : 0.0, st.cal ? 100.0 * st.coll / t : 0.0, st.mem / 1073741824.0, (st.mem + st.act) / 1073741824.0, st.cal ? tbase / t : 0.0, Time(b2, sizeof(b2), st.cal, tar), st.cal ? tbasear / tar : 0.0, Time(b1, sizeof(b1), st.cal, st.repl), st.cal ? tbaserp / st.repl : 0.0, Time(b4, sizeof(b4), st.cal, st.dp), st.cal ? tbasedp / st.dp : 0.0, ps, px));
        }
      }
    }
  }
  if (!tmpcache.empty()) {
    PetscCall(PetscOptionsClearValue(NULL, "-dd_model_cache"));
    std::remove(tmpcache.c_str());
  }
  PetscCall(DDFinalize());
  return 0;
}
