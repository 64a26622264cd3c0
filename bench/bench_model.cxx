/*
  bench_model: the performance model (issue 16) against measurement, per layer and per step,
  for the main job's U-Net (share/ddnn/main_job.opts: 8 x 1 x 32 x 32, spatial partition) and
  an example net (share/ddnn/lenet5.opts: 16 x 1 x 32 x 32, batch partition); -nets picks among
  them and the FNO main job's network (share/ddnn/main_job_fno.opts: the U-Net's inputs and partition).
    OPENBLAS_NUM_THREADS=1 ./bench_model [-steps 20] [-grid 32] [-dtype float32|float64] [-dd_model_cache <file>] [-recalibrate] [-nets unet,lenet,fno] [-match_state <seconds>]
    OPENBLAS_NUM_THREADS=1 mpiexec -n 2 ./bench_model
  The model's calibration is read from its cache (DDModelGetCachePath()); without one, this
  program runs DDModelCalibrate() first (15 s on 1 rank, minutes on 2 on a loaded machine) and says so.
  Measured per layer: the layer inside the network's step (DDNetSetLayerTiming(): its
  DDLayerForwardMulti / DDLayerBackwardMulti as DDNetForward / DDNetBackward call it, in the cache
  state the layers before it leave), the median over the steps of the slowest rank's wall time;
  an activation fused with its producer (-net_fuse) runs its forward inside the producer's kernel,
  so the producer's row gives the pair's forward ("c1+a1") and the activation's forward row none.
  Also printed ("alone"): the layer called by itself after the step (on the tensors the network set
  it up with, ranks synchronised before each call), whose tensors the other layers have pushed out
  of the caches since they were written: a small layer takes up to 3x its in-step time there.
  Per step: DDNetForward, then DDNetZeroGradients + DDNetBackward, median of the slowest rank; each
  step and each call alone is timed as the smaller of its wall time and the process's CPU time (on
  a shared machine other processes' time slices are not ours; the wall-time step is printed too).
  Predicted: DDLayerGetModelTime() as the network runs the layer (no input gradient for a first
  layer), max over ranks; step: DDNetGetModelTime(). With -dd_model_measure_convs the convolutions'
  compute is their local kernels timed alone (paper 003 sec. V-A), with -dd_model_measure_pools the
  poolings' likewise, the rest from the fits.
  On 2 or more ranks of one node the machine's state is probed (LinkRoundTrip()): the round trip of
  one cache line between the cores of ranks 0 and 1 (a flag in MPI shared memory, spun on). On this
  project's 2-vCPU machine it alternates between about 100 ns and about 470 ns within seconds (the
  virtual cores sharing a cache or not), and every exchange with it; the probe is printed before the
  calibration this program runs and with each network's results, and -match_state <s> waits up to
  s seconds before measuring a network until the round trip is within 1.5x of the calibration's
  (measured and predicted then describe the same machine; "state differs" is printed otherwise).
*/
#include <ddnn.h>
#include <ddnn/private/ddnetimpl.h>
#include <vector>
#include <string>
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <ctime>
#include <cstring>

/* this process's CPU seconds (all threads): a call's wall time on a shared, overloaded machine
   includes the time slices other processes took, its CPU time does not (MPI waits spin, so they
   count); with several threads the wall time is the smaller. A call is timed as the smaller of the
   two, as DDModelCalibrate() times the kernels */
static double CpuNow(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifndef DDNN_SHARE_DIR
  #define DDNN_SHARE_DIR "share/ddnn"
#endif

static double Median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static PetscErrorCode MaxTime(double t0, double t1, double *t)
{
  PetscFunctionBeginUser;
  *t = t1 - t0;
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, t, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a network from an options file (under its own prefix) and its two inputs */
static PetscErrorCode Build(const char *file, const char *prefix, bool unet, PetscInt grid, DDDataType dt, DDNet *net, DDTensor in[2])
{
  PetscMPIInt P;
  DDPartition px, pl;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &P));
  PetscCall(PetscOptionsPrefixPush(NULL, prefix));
  PetscCall(PetscOptionsInsertFile(PETSC_COMM_WORLD, NULL, (std::string(DDNN_SHARE_DIR) + "/" + file).c_str(), PETSC_TRUE));
  PetscCall(PetscOptionsPrefixPop(NULL));
  PetscCall(DDNetCreate(PETSC_COMM_WORLD, net));
  PetscCall(DDNetSetOptionsPrefix(*net, prefix));
  PetscCall(DDNetSetFromOptions(*net));
  std::vector<PetscMPIInt> ranks(P);
  for (PetscMPIInt i = 0; i < P; i++) ranks[i] = i;
  if (unet) { /* x and target (8, 1, grid, grid) split over H x W like the DMDA */
    PetscInt a = 1;
    for (PetscInt f = 1; f * f <= P; f++)
      if (P % f == 0) a = f;
    const PetscInt ps[4] = {1, 1, a, P / a}, sh[4] = {8, 1, grid, grid};
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps, P, ranks.data(), &px));
    PetscCall(DDTensorCreateFromPartition(px, dt, 4, sh, &in[0]));
    PetscCall(DDTensorCreateFromPartition(px, dt, 4, sh, &in[1]));
    PetscCall(DDTensorSetRandomGlobal(in[0], 1, -1, 1));
    PetscCall(DDTensorSetRandomGlobal(in[1], 2, -1, 1));
    PetscCall(DDPartitionDestroy(&px));
  } else { /* lenet: x (16, 1, 32, 32) split over the batch, labels (16) alike */
    const PetscInt ps[4] = {P, 1, 1, 1}, sh[4] = {16, 1, 32, 32}, pl1 = P, n = 16;
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps, P, ranks.data(), &px));
    PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 1, &pl1, P, ranks.data(), &pl));
    PetscCall(DDTensorCreateFromPartition(px, dt, 4, sh, &in[0]));
    PetscCall(DDTensorCreateFromPartition(pl, dt, 1, &n, &in[1]));
    PetscCall(DDTensorSetRandomGlobal(in[0], 1, -1, 1));
    {
      std::vector<double> lab(16);
      for (int i = 0; i < 16; i++) lab[i] = i % 10;
      if (dt == DD_FLOAT64) PetscCall(DDTensorSetValuesGlobal(in[1], lab.data()));
      else {
        std::vector<float> f(lab.begin(), lab.end());
        PetscCall(DDTensorSetValuesGlobal(in[1], f.data()));
      }
    }
    PetscCall(DDPartitionDestroy(&px));
    PetscCall(DDPartitionDestroy(&pl));
  }
  PetscCall(DDNetSetUp(*net, 2, in));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the median round trip (ns) of one cache line between ranks 0 and 1 of the node (an int in MPI shared
   memory: rank 0 writes 2i+1 and waits for 2i+2, rank 1 answers), over 20 ms of round trips, 3 times;
   0 on one rank or where ranks 0 and 1 do not share a node. Every rank gets it */
static PetscErrorCode LinkRoundTrip(MPI_Comm comm, double *ns)
{
  MPI_Comm    node;
  PetscMPIInt size, nsize, nrank;
  MPI_Win     win;
  int        *flag = NULL;

  PetscFunctionBeginUser;
  *ns = 0;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  if (size < 2) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCallMPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  PetscCallMPI(MPI_Comm_size(node, &nsize));
  PetscCallMPI(MPI_Comm_rank(node, &nrank));
  if (nsize >= 2) {
    void    *base;
    MPI_Aint sz;
    int      du;
    PetscCallMPI(MPI_Win_allocate_shared(nrank ? 0 : 128, 1, MPI_INFO_NULL, node, &base, &win));
    PetscCallMPI(MPI_Win_shared_query(win, 0, &sz, &du, &base));
    flag = (int *)base;
    std::vector<double> rt;
    for (int rep = 0; rep < 3; rep++) {
      if (!nrank) __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
      PetscCallMPI(MPI_Win_sync(win));
      PetscCallMPI(MPI_Barrier(node));
      PetscCallMPI(MPI_Win_sync(win));
      if (nrank == 0) {
        double t0 = MPI_Wtime(), t1 = t0;
        int    i  = 0;
        for (; t1 - t0 < 0.02; i++, t1 = MPI_Wtime()) { /* a round trip waits for the other core (or, oversubscribed, for its time slice) */
          __atomic_store_n(flag, 2 * i + 1, __ATOMIC_RELEASE);
          while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != 2 * i + 2) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
          }
        }
        __atomic_store_n(flag, -1, __ATOMIC_RELEASE);
        rt.push_back(1e9 * (t1 - t0) / i);
      } else if (nrank == 1) {
        for (;;) {
          int v = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
          if (v == -1) break;
          if (v & 1) __atomic_store_n(flag, v + 1, __ATOMIC_RELEASE);
#if defined(__x86_64__)
          else __builtin_ia32_pause();
#endif
        }
      }
      PetscCallMPI(MPI_Barrier(node));
    }
    if (!nrank) *ns = Median(rt);
    PetscCallMPI(MPI_Win_free(&win));
  }
  PetscCallMPI(MPI_Comm_free(&node));
  PetscCallMPI(MPI_Bcast(ns, 1, MPI_DOUBLE, 0, comm)); /* world rank 0 is node rank 0 of its node */
  PetscFunctionReturn(PETSC_SUCCESS);
}

static double calState = 0; /* the round trip before the calibration this program ran (0: calibrated earlier, or one rank) */

/* two probes of the round trip more than 1.5x apart: another machine state */
static bool StateDiffers(double a, double b)
{
  return a > 1.5 * b || b > 1.5 * a;
}

static PetscErrorCode Run(const char *title, const char *file, const char *prefix, bool unet, PetscInt grid, DDDataType dt, PetscInt steps)
{
  DDNet    net;
  DDTensor in[2];
  PetscInt n;

  PetscFunctionBeginUser;
  PetscCall(Build(file, prefix, unet, grid, dt, &net, in));
  PetscCall(DDNetGetNumLayers(net, &n));
  double    state, waited = 0;
  PetscReal matchwait = 0;
  PetscCall(PetscOptionsGetReal(NULL, NULL, "-match_state", &matchwait, NULL));
  PetscCall(LinkRoundTrip(PETSC_COMM_WORLD, &state));
  while (calState > 0 && state > 0 && StateDiffers(state, calState) && waited < (double)matchwait) { /* the same machine as the calibration's, or give up */
    PetscCall(PetscSleep(1));
    waited += 1;
    PetscCall(LinkRoundTrip(PETSC_COMM_WORLD, &state));
  }
  /* measured, interleaved (the machine is shared: a step and the layers alone see the same load):
     per step DDNetForward, then DDNetZeroGradients + DDNetBackward; then every layer alone */
  ddnn::NetImpl                      *I = net->impl;
  std::vector<std::vector<double>>    lf(n), lb(n), nf(n), nb(n); /* alone; in the step */
  std::vector<std::vector<DDTensor>>  xs(n), dxs(n);
  std::vector<DDTensor>               dys(n, NULL);
  std::vector<double>                 tf, tb, wf, wb, tu, tt; /* tt: the whole training step */
  /* an optimizer's update between steps, as in training: Adam at learning rate 1e-30 (the parameters'
     values stay, their states change), so that the replicated weight mode (-<prefix>net_weights
     replicated) refreshes its replicas every step and the data-parallel one updates them in place,
     as the model prices them (DDNetGetModelTime()) */
  DDOptimizer opt;
  {
    PetscInt  np;
    DDTensor *ps, *gs;
    PetscCall(DDNetGetParameters(net, &np, &ps, &gs));
    PetscCall(DDOptimizerCreate(PETSC_COMM_WORLD, &opt));
    PetscCall(DDOptimizerSetType(opt, DDOPTIMIZERADAM));
    PetscCall(DDOptimizerSetLearningRate(opt, 1e-30)); /* no visible change: the values stay (below their rounding) */
    PetscCall(DDOptimizerSetUp(opt, np, ps, gs));
  }
  for (PetscInt i = 0; i < n; i++) {
    DDLayer l = I->nodes[i].layer;
    xs[i].assign(l->setupin, l->setupin + l->nin);
    dxs[i].assign(l->nin, NULL);
    bool nodx = true;
    for (int k : I->nodes[i].inputs)
      if (k >= 0) nodx = false;
    if (!nodx)
      for (PetscInt j = 0; j < l->nin; j++)
        if (I->nodes[i].inputs[j] >= 0) PetscCall(DDTensorDuplicate(xs[i][j], &dxs[i][j]));
    if (i != (PetscInt)I->output) {
      PetscCall(DDTensorDuplicate(l->output, &dys[i]));
      PetscCall(DDTensorSetRandomGlobal(dys[i], 3, -1, 1));
    }
  }
  PetscCall(DDNetSetLayerTiming(net, PETSC_TRUE));
  for (PetscInt s = 0; s < steps + 2; s++) {
    PetscLogDouble t0, t1, t2, t3;
    double         a, b;
    PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
    double c0 = CpuNow();
    PetscCall(PetscTime(&t0));
    PetscCall(DDNetForward(net, 2, in));
    PetscCall(PetscTime(&t1));
    double c1 = CpuNow();
    PetscCall(DDNetZeroGradients(net));
    PetscCall(DDNetBackward(net, NULL));
    PetscCall(PetscTime(&t2));
    double c2 = CpuNow();
    PetscCall(DDOptimizerStep(opt));
    PetscCall(PetscTime(&t3));
    double c3 = CpuNow();
    if (s >= 2) {
      double c[6] = {std::min(t1 - t0, c1 - c0), std::min(t2 - t1, c2 - c1), t1 - t0, t2 - t1, std::min(t3 - t2, c3 - c2), std::min(t3 - t0, c3 - c0)};
      PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, c, 6, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
      tt.push_back(c[5]);
      tf.push_back(c[0]);
      tb.push_back(c[1]);
      wf.push_back(c[2]);
      wb.push_back(c[3]);
      tu.push_back(c[4]);
      for (PetscInt i = 0; i < n; i++) { /* each layer's time in this step, the slowest rank's */
        PetscReal ft, bt;
        double    v[2];
        PetscCall(DDNetGetLayerTimes(net, i, &ft, &bt));
        v[0] = (double)ft, v[1] = (double)bt;
        PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
        nf[i].push_back(v[0]);
        nb[i].push_back(v[1]);
      }
    }
    for (PetscInt i = 0; i < n; i++) {
      DDLayer l = I->nodes[i].layer;
      PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
      c0 = CpuNow();
      PetscCall(PetscTime(&t0));
      PetscCall(DDLayerForwardMulti(l, l->nin, xs[i].data(), l->output));
      PetscCall(PetscTime(&t1));
      c1 = CpuNow();
      a  = std::min(t1 - t0, c1 - c0);
      PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
      c1 = CpuNow();
      PetscCall(PetscTime(&t1));
      PetscCall(DDLayerBackwardMulti(l, dys[i], l->nin, dxs[i].data()));
      PetscCall(PetscTime(&t2));
      c2 = CpuNow();
      b  = std::min(t2 - t1, c2 - c1);
      PetscCall(MaxTime(0, a, &a));
      PetscCall(MaxTime(0, b, &b));
      if (s >= 2) {
        lf[i].push_back(a);
        lb[i].push_back(b);
      }
    }
  }
  for (PetscInt i = 0; i < n; i++) {
    for (auto &d : dxs[i]) PetscCall(DDTensorDestroy(&d));
    PetscCall(DDTensorDestroy(&dys[i]));
  }
  PetscMPIInt P;
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &P));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n%s, %d rank(s), %s, %" PetscInt_FMT " steps (medians, ms; ratio = predicted / measured)\n", title, P, DDDataTypes[dt], steps));
  if (state > 0) {
    double after;
    PetscCall(LinkRoundTrip(PETSC_COMM_WORLD, &after));
    if (calState > 0) PetscCall(PetscPrintf(PETSC_COMM_WORLD, "machine state: cache-line round trip between ranks 0 and 1 %.0f ns before and %.0f ns after the measurement, %.0f ns before the calibration: %s%s\n", state, after, calState, StateDiffers(state, calState) || StateDiffers(after, calState) ? "state differs" : "same state", waited > 0 ? " (waited for it)" : ""));
    else PetscCall(PetscPrintf(PETSC_COMM_WORLD, "machine state: cache-line round trip between ranks 0 and 1 %.0f ns before and %.0f ns after the measurement (the calibration's unknown: it was not run by this program)\n", state, after));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-8s %-13s %9s %9s %6s %9s %9s %6s %9s %9s %9s %9s %8s\n", "layer", "type", "fwd pred", "fwd meas", "ratio", "bwd pred", "bwd meas", "ratio", "alone f", "alone b", "comm KiB", "mem KiB", "runs"));
  double                   sp[2] = {0, 0}, sm[2] = {0, 0};
  PetscBool                allok = PETSC_TRUE;
  std::vector<double>      pr(2 * n), ms(2 * n), cm(n), mem(n);
  std::vector<PetscInt64>  runs(n);
  std::vector<int>         fusedinto(n, -1); /* an activation fused with its producer: the producer's index */
  std::vector<std::string> names(n), types(n);
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    DDLayerType type;
    PetscReal   t[4];
    PetscBool   ok;
    PetscInt64  c[4], m[4];
    PetscCall(DDNetGetLayerByIndex(net, i, &l, &name));
    PetscCall(DDLayerGetType(l, &type));
    names[i] = name, types[i] = type;
    PetscCall(DDNetGetLayerModelTime(net, i, &t[0], &t[1], &t[2], &t[3], &ok));
    PetscCall(DDNetGetLayerModelComm(net, i, PETSC_FALSE, &c[0], &c[1], &c[2], &c[3]));
    PetscCall(DDLayerGetModelMemory(l, &m[0], &m[1], &m[2], &m[3]));
    PetscCall(DDLayerGetModelRuns(l, &runs[i]));
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &runs[i], 1, MPIU_INT64, MPI_MAX, PETSC_COMM_WORLD));
    double p2[2] = {t[0] + t[1], t[2] + t[3]};
    mem[i] = (double)(m[0] + m[1] + m[2] + m[3]), cm[i] = (double)PetscMax(c[1], c[3]);
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, p2, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &mem[i], 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &cm[i], 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &ok, 1, MPIU_BOOL, MPI_LAND, PETSC_COMM_WORLD));
    if (!ok) allok = PETSC_FALSE;
    pr[2 * i] = p2[0], pr[2 * i + 1] = p2[1];
    ms[2 * i] = Median(nf[i]), ms[2 * i + 1] = Median(nb[i]);
    /* fused (the model's and DDNetSetUp's convention): the activation's output is its input's storage */
    const int k = I->nodes[i].inputs.empty() ? -1 : I->nodes[i].inputs[0];
    if (!strcmp(type, DDLAYERACTIVATION) && k >= 0 && l->output->array && l->output->array == l->setupin[0]->array) fusedinto[i] = k;
    sp[0] += p2[0], sp[1] += p2[1];
    sm[0] += ms[2 * i], sm[1] += ms[2 * i + 1];
  }
  int    within = 0, entries = 0; /* the table's forward and backward entries within 20 % (|pred / meas - 1| <= 0.2) */
  double tin = 0, tall = 0;        /* and the measured time they hold, of all entries' */
  auto   tally = [&](double p, double m) {
    entries++;
    tall += m;
    if (std::fabs(p / m - 1) <= 0.2) within++, tin += m;
  };
  for (PetscInt i = 0; i < n; i++) {
    std::string row = names[i];
    double      pf = pr[2 * i], mf = ms[2 * i];
    for (PetscInt j = 0; j < n; j++) /* the producer of a fused activation: the pair's forward */
      if (fusedinto[j] == (int)i) {
        row += "+" + names[j];
        pf += pr[2 * j], mf += ms[2 * j];
      }
    if (fusedinto[i] < 0) tally(pf, mf);
    tally(pr[2 * i + 1], ms[2 * i + 1]);
    char fwd[64];
    if (fusedinto[i] >= 0) PetscCall(PetscSNPrintf(fwd, sizeof(fwd), "%9s %9s %6s", "", "", "fused"));
    else PetscCall(PetscSNPrintf(fwd, sizeof(fwd), "%9.4f %9.4f %6.2f", 1e3 * pf, 1e3 * mf, pf / mf));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-8s %-13s %s %9.4f %9.4f %6.2f %9.4f %9.4f %9.1f %9.1f %8" PetscInt64_FMT "\n", row.c_str(), types[i].c_str(), fwd, 1e3 * pr[2 * i + 1], 1e3 * ms[2 * i + 1], pr[2 * i + 1] / ms[2 * i + 1], 1e3 * Median(lf[i]), 1e3 * Median(lb[i]), cm[i] / 1024, mem[i] / 1024, runs[i]));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "per layer: %d of %d entries (forward, backward) within 20 %%, %.0f %% of the layers' measured time\n", within, entries, 100 * tin / tall));
  PetscReal pf, pb, pz, pu;
  PetscBool ok, okz;
  PetscCall(DDNetGetModelTime(net, &pf, &pb, &ok));
  PetscCall(DDNetGetModelUpdateTime(net, 7, &pz, &pu, &okz)); /* the measured backward includes DDNetZeroGradients */
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "predicted: the net's own work in DDNetBackward %.4f ms (the data-parallel mode's copies' update included), DDNetZeroGradients %.4f ms (in bwd pred below), the parameters' Adam update %.4f ms\n", 1e3 * (double)(pb - sp[1]), 1e3 * (double)pz, 1e3 * (double)pu));
  pb += pz;
  if (!okz) ok = PETSC_FALSE;
  double mf = Median(tf), mb = Median(tb);
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %9.4f %9.4f %6.2f %9.4f %9.4f %6.2f\n", "sum of layers", 1e3 * sp[0], 1e3 * sm[0], sp[0] / sm[0], 1e3 * sp[1], 1e3 * sm[1], sp[1] / sm[1]));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %9.4f %9.4f %6.2f %9.4f %9.4f %6.2f   step: predicted %.3f ms, measured %.3f ms, ratio %.2f%s\n", "network step", 1e3 * (double)pf, 1e3 * mf, (double)pf / mf, 1e3 * (double)pb, 1e3 * mb, (double)pb / mb, 1e3 * (double)(pf + pb), 1e3 * (mf + mb), (double)(pf + pb) / (mf + mb), (ok && allok) ? "" : "  (NOT CALIBRATED: some terms are missing)"));
  {
    double mu = Median(tu);
    /* measured: the whole step from the barrier to the end of DDOptimizerStep() on the slowest rank; the sum
       of the three parts' slowest ranks counts a rank's lag twice where the other waits for it in the
       next part (LeNet-5 on 2 ranks: the root's end of the backward, 0.4 ms, again in the other rank's
       DDOptimizerStep(), whose norm all-reduce waits for it) */
    double mt = Median(tt);
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s predicted %.3f ms (step + Adam update), measured %.3f ms (whole step, slowest rank; its parts' slowest ranks: step %.3f + DDOptimizerStep %.3f ms), ratio %.2f\n", "training step", 1e3 * (double)(pf + pb + pu), 1e3 * mt, 1e3 * (mf + mb), 1e3 * mu, (double)(pf + pb + pu) / mt));
  }
  {
    double mwf = Median(wf), mwb = Median(wb);
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-22s %9.4f %9.4f %6.2f %9.4f %9.4f %6.2f   step wall time (slowest rank, other processes' time slices included): ratio %.2f\n", "network step, wall", 1e3 * (double)pf, 1e3 * mwf, (double)pf / mwf, 1e3 * (double)pb, 1e3 * mwb, (double)pb / mwb, (double)(pf + pb) / (mwf + mwb)));
  }
  PetscCall(DDOptimizerDestroy(&opt));
  PetscCall(DDNetDestroy(&net));
  PetscCall(DDTensorDestroy(&in[0]));
  PetscCall(DDTensorDestroy(&in[1]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  PetscInt   steps = 20, grid = 32;
  char       dts[32] = "float32";
  DDDataType dt;
  PetscBool  have, recal = PETSC_FALSE;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-steps", &steps, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-grid", &grid, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-dtype", dts, sizeof(dts), NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-recalibrate", &recal, NULL)); /* calibrate now, under the load the measurement will see */
  dt = !strcmp(dts, "float64") ? DD_FLOAT64 : DD_FLOAT32;
  PetscCall(DDModelLoad(PETSC_COMM_WORLD, NULL, dt, &have));
  PetscReal a, b;
  PetscBool commok;
  PetscCall(DDModelGetCommParameters(&a, &b, &commok));
  PetscMPIInt P;
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &P));
  PetscBool collok = PETSC_TRUE; /* the collectives measured on P ranks */
  if (P > 1) { /* a calibration on P ranks stores its fits under "<backend>@P" */
    const char *bn;
    PetscCall(DDBackendGetDefault(&bn));
    PetscCall(DDModelGetKernelFit((std::string(bn) + "@" + std::to_string(P)).c_str(), dt, ("bcast-g" + std::to_string(P)).c_str(), PETSC_FALSE, NULL, NULL, &collok));
  }
  if (!have || (P > 1 && (!commok || !collok)) || recal) {
    const char *path;
    PetscCall(DDModelGetCachePath(&path));
    PetscCall(LinkRoundTrip(PETSC_COMM_WORLD, &calState));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "calibrating (%s%s in %s) ...\n", recal ? "-recalibrate" : (have ? "no" : "no kernel fits"), (P > 1 && (!commok || !collok)) ? " alpha-beta or collective fits" : "", path));
    PetscCall(DDModelCalibrate(PETSC_COMM_WORLD, NULL, dt));
    if (calState > 0) {
      double after;
      PetscCall(LinkRoundTrip(PETSC_COMM_WORLD, &after));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "machine state: cache-line round trip between ranks 0 and 1 %.0f ns before and %.0f ns after the calibration\n", calState, after));
      if (StateDiffers(after, calState)) calState = -1; /* it changed during the calibration: no state to match */
    }
    PetscCall(DDModelGetCommParameters(&a, &b, &commok));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "MPI: alpha %.2f us, beta %.3f ns/B (%.2f GB/s)%s\n", 1e6 * (double)a, 1e9 * (double)b, b > 0 ? 1e-9 / (double)b : 0.0, commok ? "" : " (not calibrated)"));
  {
    char nets[64] = "unet,lenet";
    PetscCall(PetscOptionsGetString(NULL, NULL, "-nets", nets, sizeof(nets), NULL));
    const std::string ns = std::string(",") + nets + ",";
    if (ns.find(",unet,") != std::string::npos) PetscCall(Run("main job U-Net (share/ddnn/main_job.opts), spatial partition", "main_job.opts", "unet_", true, grid, dt, steps));
    if (ns.find(",lenet,") != std::string::npos) PetscCall(Run("LeNet-5 (share/ddnn/lenet5.opts), batch partition", "lenet5.opts", "lenet_", false, grid, dt, steps));
    if (ns.find(",fno,") != std::string::npos) PetscCall(Run("FNO main job (share/ddnn/main_job_fno.opts), spatial partition", "main_job_fno.opts", "fno_", true, grid, dt, steps));
  }
  PetscCall(DDFinalize());
  return 0;
}
