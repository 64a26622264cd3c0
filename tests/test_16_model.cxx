/*
  Issue 16, the performance model: the communication volume predicted for each primitive (from
  its set-up graph) and for each layer of the main job's U-Net equals the messages and bytes the
  exchange engine actually moves (counted per message: sends as started, receives from the MPI
  statuses), and agrees with the closed form of a halo exchange; the calibration cache is ours
  (a corrupt or foreign file is an error naming it); an uncalibrated view says so; bad input.
  Run at 1, 2, 4 and 8 ranks.
*/
#include "layertest.hpp"
#include <ddmodel.h>
#include <ddnn/private/ddimpl.h>
#include <ddnn/private/ddlayerimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <sys/shmarena.hpp>
#include <primitive/exchange.hpp>
#include <fstream>
#include <unistd.h>
#include <cstdlib>
#include <array>
#include <cstring>
#include <iterator>
#include <algorithm>
#include <petsctime.h>

using namespace ddtest;

#ifndef DDNN_SHARE_DIR
  #error "DDNN_SHARE_DIR (the source tree's share/ddnn) must be defined"
#endif

static std::string Tmp(const char *name)
{
  return std::string("/tmp/ddnn_test16_") + std::to_string(getppid()) + "_" + name;
}

static std::string Host(void); /* this host's name as the cache writes it */

static void WriteFile(const std::string &file, const std::string &text)
{
  MPI_Barrier(PETSC_COMM_WORLD); /* no rank still reads the file's previous text */
  if (Rank() == 0) {
    std::ofstream f(file);
    f << text;
  }
  MPI_Barrier(PETSC_COMM_WORLD);
}

/* the two factors of P closest to each other, a x b with a <= b */
static void Split2(PetscMPIInt P, PetscInt &a, PetscInt &b)
{
  a = 1;
  for (PetscInt f = 1; f * f <= P; f++)
    if (P % f == 0) a = f;
  b = P / a;
}

static DDPrimitive MakePrim(DDPrimitiveType type)
{
  DDPrimitive p;
  DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &p));
  DDT(DDPrimitiveSetType(p, type));
  return p;
}

/* after k applications each way, the counters are k times the predicted volume on every rank, and the bytes sent overall equal the bytes received */
static void ExpectCountsEqualVolume(DDPrimitive p, DDTensor x, DDTensor y, int k, const char *what)
{
  DDT(DDPrimitiveResetCommCounters(p));
  for (int i = 0; i < k; i++) DDT(DDPrimitiveApply(p, x, y));
  for (int i = 0; i < k; i++) DDT(DDPrimitiveApplyAdjoint(p, y, x));
  for (int adj = 0; adj < 2; adj++) {
    PetscInt64 v[4], c[4];
    DDT(DDPrimitiveGetCommVolume(p, adj ? PETSC_TRUE : PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
    DDT(DDPrimitiveGetCommCounters(p, adj ? PETSC_TRUE : PETSC_FALSE, &c[0], &c[1], &c[2], &c[3]));
    bool ok = true;
    for (int j = 0; j < 4; j++) ok = ok && c[j] == k * v[j];
    EXPECT_TRUE(AllTrue(ok)) << what << (adj ? " adjoint" : " forward") << " on rank " << Rank() << ": predicted " << v[0] << " msgs " << v[1] << " B sent, " << v[2] << " msgs " << v[3] << " B received per application; counted " << c[0] << "/" << c[1] << "/" << c[2] << "/" << c[3] << " after " << k;
    PetscInt64 g[4] = {v[0], v[1], v[2], v[3]};
    MPI_Allreduce(MPI_IN_PLACE, g, 4, MPIU_INT64, MPI_SUM, PETSC_COMM_WORLD);
    EXPECT_EQ(g[0], g[2]) << what;
    EXPECT_EQ(g[1], g[3]) << what;
    if (Size() > 1 && adj == 0) EXPECT_GT(g[1], 0) << what << ": no bytes move on " << Size() << " ranks";
  }
}

/* a halo of width 1 along a split H of (N, C, H, W): closed form, and counts as predicted */
TEST(ModelComm, HaloVolumeClosedFormAndCounts)
{
  PetscMPIInt P = Size();
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    for (int splitw = 0; splitw < 2; splitw++) {
      InputSpec s;
      s.shape  = {2, 3, 4 * P, 5 * P};
      s.pshape = {1, 1, splitw ? 1 : (PetscInt)P, splitw ? (PetscInt)P : 1};
      DDTensor    x = MakeInput(s, dt, 1);
      DDPrimitive H = MakePrim(DDPRIMITIVEHALO);
      for (PetscInt d = 2; d < 4; d++) DDT(DDPrimitiveHaloSetKernel(H, d, 3, 1, 1, 1, PETSC_DECIDE));
      DDT(DDPrimitiveSetUp(H, x, NULL));
      PetscInt64 v[4];
      DDT(DDPrimitiveGetCommVolume(H, PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
      PetscMPIInt r       = Rank();
      PetscInt64  nb      = (r > 0) + (r < P - 1); /* neighbours along the split dimension */
      size_t      es      = dt == DD_FLOAT32 ? 4 : 8;
      PetscInt64  face    = 2 * 3 * (splitw ? 4 * P : 5 * P); /* N C times the other spatial extent */
      EXPECT_EQ(v[0], nb) << "rank " << r;
      EXPECT_EQ(v[2], nb) << "rank " << r;
      EXPECT_EQ(v[1], (PetscInt64)es * face * nb) << "rank " << r << (splitw ? " W split" : " H split");
      EXPECT_EQ(v[3], (PetscInt64)es * face * nb) << "rank " << r;
      ExpectCountsEqualVolume(H, x, x, 3, splitw ? "halo W split" : "halo H split");
      DDT(DDPrimitiveDestroy(&H));
      DDT(DDTensorDestroy(&x));
    }
  }
}

/* repartitions H -> W, batch -> spatial, and a scatter-based broadcast-free gather onto rank 0 */
TEST(ModelComm, RepartitionCountsAsPredicted)
{
  PetscMPIInt P = Size();
  PetscInt    a, b;
  Split2(P, a, b);
  struct Case {
    std::vector<PetscInt> from, to;
    const char           *what;
  } cases[] = {
    {{1, 1, P, 1}, {1, 1, 1, P}, "repartition H -> W"},
    {{P, 1, 1, 1}, {1, 1, a, b}, "repartition batch -> H x W"},
    {{1, 1, a, b}, {1, 1, 1, 1}, "repartition H x W -> rank 0"},
  };
  for (auto &c : cases) {
    InputSpec s, t;
    s.shape = t.shape = {2 * P, 3, 6 * P, 5 * P};
    s.pshape          = c.from;
    t.pshape          = c.to;
    DDTensor    x = MakeInput(s, DD_FLOAT64, 2), y = MakeInput(t, DD_FLOAT64, 3);
    DDPrimitive R = MakePrim(DDPRIMITIVEREPARTITION);
    DDT(DDPrimitiveSetUp(R, x, y));
    ExpectCountsEqualVolume(R, x, y, 2, c.what);
    DDT(DDPrimitiveDestroy(&R));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
  }
}

/* the collective primitives move nothing through the exchange engine: volume 0, counters 0 */
TEST(ModelComm, CollectivesHaveNoPointToPointVolume)
{
  DDPartition    part;
  DDTensor       x;
  const PetscInt ps[2] = {Size(), 1}, sh[2] = {4, 3};
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, ps, PETSC_DECIDE, NULL, &part));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &x));
  DDT(DDTensorSetPartition(x, part));
  DDT(DDTensorSetShape(x, 2, sh));
  DDT(DDTensorSetReplicated(x, 0, PETSC_TRUE));
  DDT(DDTensorSetUp(x));
  DDT(DDPartitionDestroy(&part));
  DDPrimitive A = MakePrim(DDPRIMITIVEALLSUMREDUCE);
  PetscInt    d0 = 0;
  DDT(DDPrimitiveAllSumReduceSetDimensions(A, 1, &d0));
  DDT(DDPrimitiveSetUp(A, x, x));
  DDT(DDPrimitiveApply(A, x, x));
  PetscInt64 v[4], c[4];
  DDT(DDPrimitiveGetCommVolume(A, PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
  DDT(DDPrimitiveGetCommCounters(A, PETSC_FALSE, &c[0], &c[1], &c[2], &c[3]));
  for (int j = 0; j < 4; j++) {
    EXPECT_EQ(v[j], 0);
    EXPECT_EQ(c[j], 0);
  }
  DDT(DDPrimitiveDestroy(&A));
  DDT(DDTensorDestroy(&x));
}

/* the main job's U-Net (share/ddnn/main_job.opts) on a spatial partition of all ranks */
static DDNet MainJobNet(DDTensor in[2], DDDataType dt)
{
  static bool inserted = false;
  if (!inserted) {
    DDT(PetscOptionsPrefixPush(NULL, "mj_"));
    DDT(PetscOptionsInsertFile(PETSC_COMM_WORLD, NULL, (std::string(DDNN_SHARE_DIR) + "/main_job.opts").c_str(), PETSC_TRUE));
    DDT(PetscOptionsPrefixPop(NULL));
    inserted = true;
  }
  DDNet    net;
  PetscInt a, b;
  Split2(Size(), a, b);
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, "mj_"));
  DDT(DDNetSetFromOptions(net));
  InputSpec s;
  s.shape  = {8, 1, 32, 32};
  s.pshape = {1, 1, a, b};
  in[0]    = MakeInput(s, dt, 5);
  in[1]    = MakeInput(s, dt, 6);
  DDT(DDNetSetUp(net, 2, in));
  return net;
}

/* per layer, the predicted messages and bytes of a forward and of a backward equal what the steps moved; so do the network's totals */
TEST(ModelComm, MainJobUNetLayersMoveWhatIsPredicted)
{
  DDTensor in[2];
  DDNet    net = MainJobNet(in, DD_FLOAT32);
  PetscInt n;
  DDT(DDNetGetNumLayers(net, &n));
  const int  steps = 2;
  PetscInt64 g0[2][4], g1[2][4];
  for (int adj = 0; adj < 2; adj++) DDT(DDCommGetCounters(adj ? PETSC_TRUE : PETSC_FALSE, &g0[adj][0], &g0[adj][1], &g0[adj][2], &g0[adj][3]));
  std::vector<std::array<PetscInt64, 8>> before(n);
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    for (int adj = 0; adj < 2; adj++) DDT(DDLayerGetCommCounters(l, adj ? PETSC_TRUE : PETSC_FALSE, &before[i][4 * adj], &before[i][4 * adj + 1], &before[i][4 * adj + 2], &before[i][4 * adj + 3]));
  }
  for (int s = 0; s < steps; s++) {
    DDT(DDNetForward(net, 2, in));
    DDT(DDNetZeroGradients(net));
    DDT(DDNetBackward(net, NULL));
  }
  for (int adj = 0; adj < 2; adj++) DDT(DDCommGetCounters(adj ? PETSC_TRUE : PETSC_FALSE, &g1[adj][0], &g1[adj][1], &g1[adj][2], &g1[adj][3]));
  PetscInt64 sum[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}}, anybytes = 0;
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    for (int adj = 0; adj < 2; adj++) {
      PetscInt64 v[4], c[4];
      DDT(DDNetGetLayerModelComm(net, i, adj ? PETSC_TRUE : PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
      DDT(DDLayerGetCommCounters(l, adj ? PETSC_TRUE : PETSC_FALSE, &c[0], &c[1], &c[2], &c[3]));
      bool ok = true;
      for (int j = 0; j < 4; j++) {
        ok = ok && c[j] - before[i][4 * adj + j] == steps * v[j];
        sum[adj][j] += v[j];
      }
      anybytes += v[1];
      EXPECT_TRUE(AllTrue(ok)) << "layer " << name << (adj ? " backward" : " forward") << " rank " << Rank() << ": predicted " << v[0] << "/" << v[1] << "/" << v[2] << "/" << v[3] << " per step, counted " << c[0] - before[i][4 * adj] << "/" << c[1] - before[i][4 * adj + 1] << "/" << c[2] - before[i][4 * adj + 2] << "/" << c[3] - before[i][4 * adj + 3] << " in " << steps;
    }
  }
  /* everything the engine moved in these steps (whoever moved it) is in some layer's prediction */
  for (int adj = 0; adj < 2; adj++)
    for (int j = 0; j < 4; j++) EXPECT_TRUE(AllTrue(g1[adj][j] - g0[adj][j] == steps * sum[adj][j])) << (adj ? "backward" : "forward") << " total, entry " << j << " on rank " << Rank() << ": " << g1[adj][j] - g0[adj][j] << " moved, " << steps * sum[adj][j] << " predicted";
  MPI_Allreduce(MPI_IN_PLACE, &anybytes, 1, MPIU_INT64, MPI_SUM, PETSC_COMM_WORLD);
  if (Size() > 1) EXPECT_GT(anybytes, 0) << "the U-Net on a spatial partition exchanges halos";
  else EXPECT_EQ(anybytes, 0) << "one rank sends nothing";
  /* memory: the weights of each conv are counted, activations are positive */
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    PetscInt64  m[4], np;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    DDT(DDLayerGetModelMemory(l, &m[0], &m[1], &m[2], &m[3]));
    DDT(DDLayerGetNumParameters(l, &np));
    PetscInt64 act = m[0];
    MPI_Allreduce(MPI_IN_PLACE, &act, 1, MPIU_INT64, MPI_SUM, PETSC_COMM_WORLD);
    EXPECT_GT(act, 0) << name;
    PetscInt64 par = m[2]; /* weights and gradients (float32), on the ranks that own them (paper 000: the root; the others hold broadcast copies, counted as work) */
    MPI_Allreduce(MPI_IN_PLACE, &par, 1, MPIU_INT64, MPI_SUM, PETSC_COMM_WORLD);
    EXPECT_GE(par, 2 * 4 * np) << name;
  }
  /* the GEMM work of a convolution: 2 |y_local| C_in k^2 per forward; summed over ranks, the global count */
  DDLayer   c3, a3;
  PetscReal f, b;
  DDT(DDNetGetLayer(net, "c3", &c3)); /* 16 -> 32 channels, 3x3, at 16 x 16, batch 8 */
  DDT(DDLayerGetModelWork(c3, PETSC_FALSE, &f, &b));
  MPI_Allreduce(MPI_IN_PLACE, &f, 1, MPIU_REAL, MPI_SUM, PETSC_COMM_WORLD);
  EXPECT_EQ(f, 2.0 * 8 * 32 * 16 * 16 * 16 * 9);
  EXPECT_EQ(b, 0);
  DDT(DDNetGetLayer(net, "a3", &a3)); /* ReLU on 8 x 32 x 16 x 16 float32: reads x, writes y */
  DDT(DDLayerGetModelWork(a3, PETSC_FALSE, &f, &b));
  MPI_Allreduce(MPI_IN_PLACE, &b, 1, MPIU_REAL, MPI_SUM, PETSC_COMM_WORLD);
  EXPECT_EQ(b, 2.0 * 4 * 32 * 16 * 16 * 8);
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&in[0]));
  DDT(DDTensorDestroy(&in[1]));
}

/* without calibration data the view says so and the times are flagged; with alpha-beta and fits set, the prediction is their formula */
TEST(ModelCache, NotCalibratedAndCorruptOrForeignCache)
{
  std::string missing = Tmp("none.txt"), bad = Tmp("bad.txt"), foreign = Tmp("foreign.txt");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", missing.c_str()));
  DDT(DDModelReset());
  DDTensor in[2];
  DDNet    net = MainJobNet(in, DD_FLOAT32);
  PetscReal tf, tb;
  PetscBool cal;
  DDT(DDNetGetModelTime(net, &tf, &tb, &cal));
  EXPECT_FALSE(cal);
  std::string text = ViewedText([&](PetscViewer v) { return DDNetView(net, v); });
  EXPECT_NE(text.find("not calibrated"), std::string::npos) << text;
  EXPECT_NE(text.find("performance model"), std::string::npos) << text;
  WriteFile(bad, "ddnn-model-cache 16\nhost x\nkernel a b\n");
  WriteFile(foreign, "ddnn-model-cache 16\nhost some-other-machine-1234\ncomm 1e-6 1e-9\n");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", bad.c_str()));
  DDT(DDModelReset());
  PetscBool have;
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, bad);
  WriteFile(bad, "#!/bin/sh\n");
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "not a ddnn model cache");
  WriteFile(bad, "ddnn-model-cache 17\nhost x\n"); /* a newer ddnn's */
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "newer version");
  WriteFile(bad, "ddnn-model-cache 16\nhost " + Host() + "\nkernel a float32 conv f 1 2 3\n"); /* three coefficients: neither form */
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "line 3 is malformed");
  for (const char *nums : {"1 2 3 4", "1 2 3 4 5 6 7 8", "1 2 3 4 5 x", "1 2 -3 4 5", "1 nan"}) { /* four or eight coefficients, a stray word, a negative or non-finite one */
    WriteFile(bad, "ddnn-model-cache 16\nhost " + Host() + "\nkernel a float32 conv f " + nums + "\n");
    DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "line 3 is malformed");
  }
  /* a NUL byte (what follows it used to be ignored); a comment of 2000 characters (it used to be cut into a malformed line); a directory (it used to be "empty") */
  WriteFile(bad, "ddnn-model-cache 16\nhost " + Host() + "\ncomm 1e-6 1e-9" + std::string(1, '\0') + "GARBAGE\n");
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "line 3 holds a NUL byte");
  WriteFile(bad, "ddnn-model-cache 16\nhost " + Host() + "\n#" + std::string(2000, 'a') + "\ncomm 1e-6 1e-9\n");
  DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have));
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", "/tmp"));
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "it is a directory");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", foreign.c_str()));
  DD_EXPECT_ERROR(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have), PETSC_ERR_FILE_UNEXPECTED, "foreign");
  /* set parameters by hand: the layer's communication time is alpha max(msgs) + beta max(bytes) */
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", missing.c_str()));
  DDT(DDModelReset());
  DDT(DDModelSetCommParameters(1e-5, 1e-9));
  DDLayer c1;
  DDT(DDNetGetLayer(net, "c1", &c1));
  PetscReal t[4];
  PetscInt64 c[4];
  DDT(DDLayerGetModelTime(c1, &t[0], &t[1], &t[2], &t[3], &cal));
  DDT(DDLayerGetModelComm(c1, PETSC_FALSE, &c[0], &c[1], &c[2], &c[3]));
  PetscInt64 calls, cb;
  DDT(DDLayerGetModelCollectives(c1, PETSC_FALSE, &calls, &cb));
  if (calls == 0) EXPECT_NEAR(t[1], 1e-5 * std::max(c[0], c[2]) + 1e-9 * std::max(c[1], c[3]), 1e-15);
  else EXPECT_GT(t[1], 1e-5 * std::max(c[0], c[2]) + 1e-9 * std::max(c[1], c[3]));
  EXPECT_FALSE(cal); /* no kernel fits in the (missing) cache */
  DD_EXPECT_ERROR(DDModelSetCommParameters(-1, 0), PETSC_ERR_ARG_OUTOFRANGE, "alpha");
  DDT(DDModelReset());
  DDT(PetscOptionsClearValue(NULL, "-dd_model_cache"));
  if (Rank() == 0) {
    std::remove(bad.c_str());
    std::remove(foreign.c_str());
  }
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&in[0]));
  DDT(DDTensorDestroy(&in[1]));
}

/* a calibration run writes our cache, which then holds every kind; predictions are positive (1 and 2 ranks: it takes seconds) */
TEST(ModelCache, CalibrateWritesAndLoads)
{
  if (Size() > 2) GTEST_SKIP() << "calibration is timed at 1 and 2 ranks";
  std::string file = Tmp("cal.txt");
  /* an older ddnn's cache: stale, not an error; the calibration rewrites it */
  WriteFile(file, "ddnn-model-cache 1\nhost " + Host() + "\ncomm 1e-6 1e-9\n");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  PetscBool have;
  DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have));
  EXPECT_FALSE(have);
  DDT(DDModelCalibrate(PETSC_COMM_WORLD, NULL, DD_FLOAT32));
  DDT(DDModelReset());
  DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT32, &have));
  EXPECT_TRUE(have);
  if (Rank() == 0) {
    std::ifstream f(file);
    std::string   first;
    std::getline(f, first);
    EXPECT_EQ(first, "ddnn-model-cache 16");
    /* where the default backend hands over a blocked format (/cpu/dnnl in float32), the row walk between blocked tensors has its own run cost, warm and cold */
    const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const char       *bn;
    DDT(DDBackendGetDefault(&bn));
    if (!strcmp(bn, "/cpu/dnnl"))
      for (const char *k : {"float32 activation-rows-blocked f ", "float32 activation-rows-blocked b ", "float32 activation-rows-blocked:cold f "}) EXPECT_NE(all.find(k), std::string::npos) << k;
    /* a plain row's cost: a constant and a term per entry of the row, warm and cold */
    for (const char *k : {"float32 activation-rows f ", "float32 activation-rows-len f ", "float32 activation-rows-len b ", "float32 activation-rows-len:cold f ", "float32 activation-rows-len:cold b "}) EXPECT_NE(all.find(k), std::string::npos) << k;
  }
  { /* the optimizers' updates are timed, warm and cold (Adam's arithmetic costs more per byte than plain SGD's), and a flatten of a blocked input */
    const char *bn;
    DDT(DDBackendGetDefault(&bn));
    std::string bk = Size() > 1 ? std::string(bn) + "@" + std::to_string(Size()) : std::string(bn);
    PetscReal   c[2][2];
    PetscBool   okk;
    for (int k = 0; k < 2; k++) {
      DDT(DDModelGetKernelFit(bk.c_str(), DD_FLOAT32, k ? "update-adam" : "update-sgd", PETSC_FALSE, &c[k][0], &c[k][1], &okk));
      EXPECT_TRUE(okk);
      EXPECT_GT(c[k][1], 0);
    }
    EXPECT_GT(c[1][1], c[0][1]);
    for (const char *kind : {"update-momentum", "update-adam:cold", "flatten-blocked", "flatten-blocked:cold", "concat-blocked", "concat-blocked:cold", "concat-halo", "concat-halo:cold"}) {
      DDT(DDModelGetKernelFit(bk.c_str(), DD_FLOAT32, kind, PETSC_FALSE, &c[0][0], &c[0][1], &okk));
      EXPECT_TRUE(okk) << kind;
    }
  }
  if (Size() > 1) { /* the kernels timed on P ranks at once are stored as such, and the collectives measured */
    const char *bn;
    DDT(DDBackendGetDefault(&bn));
    std::string bp = std::string(bn) + "@" + std::to_string(Size());
    PetscBool   okp;
    PetscReal   k0, k1;
    DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, DDLAYERCONV, PETSC_TRUE, &k0, &k1, &okp));
    EXPECT_TRUE(okp);
    DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, ("bcast-g" + std::to_string(Size())).c_str(), PETSC_FALSE, &k0, &k1, &okp));
    EXPECT_TRUE(okp);
    EXPECT_GT(k0 + k1, 0);
    /* the halo exchange through the engine's copies, and (where the system gives the shared arena) with -dd_exchange_direct */
    DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, "halo", PETSC_FALSE, &k0, &k1, &okp));
    EXPECT_TRUE(okp);
    DDT(PetscOptionsSetValue(NULL, "-dd_exchange_direct", "1"));
    const bool arena = ddnn::ShmArenaEnabled();
    DDT(PetscOptionsClearValue(NULL, "-dd_exchange_direct"));
    PetscReal d0, d1;
    DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, "halo-direct", PETSC_FALSE, &d0, &d1, &okp));
    EXPECT_EQ((bool)okp, arena);
    if (okp) EXPECT_GT(d0 + d1, 0);
    /* repartitions as they are called, warm and cold, forward and adjoint, likewise */
    for (const char *k : {"repartition", "repartition:cold", "repartition-direct", "repartition-direct:cold"})
      for (int d = 0; d < 2; d++) {
        DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, k, d ? PETSC_TRUE : PETSC_FALSE, &d0, &d1, &okp));
        EXPECT_EQ((bool)okp, strstr(k, "direct") ? arena : true) << k;
        if (okp) EXPECT_GT(d0 + 1e5 * d1, 0) << k << ": a repartition moving 100 kB";
      }
  }
  DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT64, &have));
  EXPECT_FALSE(have);
  PetscReal a, b, c0, c1;
  PetscBool ok;
  DDT(DDModelGetCommParameters(&a, &b, &ok));
  if (Size() > 1) {
    EXPECT_TRUE(ok);
    EXPECT_GT(b, 0);
  }
  {
    const char *bn;
    DDT(DDBackendGetDefault(&bn));
    std::string bp = Size() > 1 ? std::string(bn) + "@" + std::to_string(Size()) : std::string(bn);
    DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, DDLAYERCONV, PETSC_FALSE, &c0, &c1, &ok));
    EXPECT_TRUE(ok);
    EXPECT_GT(c1, 0);
    EXPECT_LT(c1, 1e-6); /* slower than 1 Mflop/s would be a broken fit */
    for (const char *k : {"conv-wgrad", "conv-pointwise", "conv-pointwise-wgrad", DDLAYERLOSS, "loss-crossentropy", DDLAYERCONCAT, DDLAYERFLATTEN}) {
      DDT(DDModelGetKernelFit(bp.c_str(), DD_FLOAT32, k, PETSC_TRUE, &c0, &c1, &ok));
      EXPECT_TRUE(ok) << k;
    }
  }
  DDTensor in[2];
  DDNet    net = MainJobNet(in, DD_FLOAT32);
  PetscReal tf, tb;
  DDT(DDNetGetModelTime(net, &tf, &tb, &ok));
  EXPECT_TRUE(ok);
  EXPECT_GT(tf, 0);
  EXPECT_GT(tb, 0);
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&in[0]));
  DDT(DDTensorDestroy(&in[1]));
  DDT(DDModelReset());
  DDT(PetscOptionsClearValue(NULL, "-dd_model_cache"));
  if (Rank() == 0) std::remove(file.c_str());
}

/* this host's name as the cache writes it */
static std::string Host(void)
{
  char h[256] = {0};
  if (gethostname(h, sizeof(h) - 1)) std::strcpy(h, "unknown");
  for (char *c = h; *c; c++)
    if (*c == ' ' || *c == '/') *c = '_';
  return h;
}

/* a cache with known fits: the predictions are then exact formulas */
/* forgets the model cache a test wrote (and the option naming it), and removes the file */
static void DropCache(const std::string &file)
{
  DDT(DDModelReset());
  DDT(PetscOptionsClearValue(NULL, "-dd_model_cache"));
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) std::remove(file.c_str());
}

/* a network of MainJobNet() and its two inputs */
static void DestroyNet(DDNet *net, DDTensor in[2])
{
  DDT(DDNetDestroy(net));
  DDT(DDTensorDestroy(&in[0]));
  DDT(DDTensorDestroy(&in[1]));
}

static std::string SyntheticCache(const char *name, const std::string &more = "")
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string b = std::string(bname) + " float64 ", file = Tmp(name);
  WriteFile(file, "ddnn-model-cache 16\nhost " + Host() + "\n" + more + "kernel " + b + "activation f 1e-06 2e-10\n" + "kernel " + b + "activation b 3e-06 4e-10\n" + "runcost " + b + "activation f 5e-09\n" + "runcost " + b + "activation b 7e-09\n" + "runcost " + b + "activation-rows f 1.1e-08\n" + "runcost " + b + "activation-rows b 1.3e-08\n" + "kernel " + b + "activation-tanh f 2e-06 8e-10\n" + "kernel " + b + "tensorzero f 1.5e-07 1e-11\n" + "kernel " + b + "tensoraxpy f 2.5e-07 3e-11\n");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  return file;
}

/* a float64 tensor's local storage */
static std::vector<double> LocalValues(DDTensor t)
{
  PetscInt    m;
  const void *a;
  DDT(DDTensorGetLocalStorageSize(t, &m));
  std::vector<double> v(m);
  DDT(DDTensorGetArrayRead(t, &a));
  if (m) std::memcpy(v.data(), a, sizeof(double) * m);
  DDT(DDTensorRestoreArrayRead(t, &a));
  return v;
}

/* a measured layer's checks (-dd_model_measure_convs, -dd_model_measure_pools): the fit's price (1 s and 2 s
   per call in the synthetic caches) without the option; with it, a time where this rank has local output and
   none where it has not, the model's communication, and the same times for l1, a layer of the same
   configuration (timed once); then, at 1 rank, the forward's compute within 0.1-10x of the whole layer's
   forward on x (no exchange there). Returns the measured times */
static std::array<PetscReal, 4> ExpectMeasuredReplacesFit(const char *option, DDLayer l0, DDLayer l1, DDTensor x, DDTensor y, bool againstforward)
{
  PetscInt                 nloc;
  PetscReal                fit[4], t2[4];
  std::array<PetscReal, 4> t;
  PetscBool                ok;
  DDT(DDTensorGetLocalSize(y, &nloc));
  DDT(DDLayerGetModelTime(l0, &fit[0], &fit[1], &fit[2], &fit[3], &ok));
  if (nloc > 0) {
    EXPECT_GE(fit[0], 1.0); /* the fit's price */
    EXPECT_GE(fit[2], 2.0);
  }
  DDT(PetscOptionsSetValue(NULL, option, "1"));
  DDT(DDLayerGetModelTime(l0, &t[0], &t[1], &t[2], &t[3], &ok));
  DDT(DDLayerGetModelTime(l1, &t2[0], &t2[1], &t2[2], &t2[3], &ok));
  DDT(PetscOptionsClearValue(NULL, option));
  EXPECT_TRUE(ok);
  if (nloc > 0) { /* timed */
    EXPECT_GT(t[0], 0);
    EXPECT_GT(t[2], 0);
    EXPECT_LT(t[0], 0.5);
    EXPECT_LT(t[2], 0.5);
  } else { /* no local output: no compute */
    EXPECT_EQ(t[0], 0);
    EXPECT_EQ(t[2], 0);
  }
  EXPECT_EQ(t[1], fit[1]); /* the communication is the model's */
  EXPECT_EQ(t[3], fit[3]);
  for (int k = 0; k < 4; k++) EXPECT_EQ(t2[k], t[k]) << "entry " << k << ": the same configuration is timed once";
  if (againstforward) { /* the local kernels alone against the whole layer's forward: the same order */
    std::vector<double> ts;
    for (int r = 0; r < 15; r++) {
      PetscLogDouble t0, t1;
      DDT(PetscTime(&t0));
      DDT(DDLayerForward(l0, x, y));
      DDT(PetscTime(&t1));
      ts.push_back(t1 - t0);
    }
    std::sort(ts.begin(), ts.end());
    EXPECT_GT(t[0], 0.1 * ts[7]);
    EXPECT_LT(t[0], 10 * ts[7]);
  }
  return t;
}

/* -dd_model_measure_convs: a convolution's compute is its own local kernels timed on this rank (paper 003
   sec. V-A) in place of the conv fit (here 1 s and 2 s per call: unmistakable), on copies of its tensors
   (the layer's output stays as it is), once per configuration (an identical layer gets the same times);
   a rank without local output has none. Spatial splits (with empty pieces on 8 ranks) and channel
   workers (the input broadcast): the ranks time different things, and nothing in it is collective */
TEST(ModelWork, MeasuredConvolutionReplacesTheFit)
{
  std::string file = SyntheticCache("measure.txt", [] {
    const char *bname;
    DDT(DDBackendGetDefault(&bname));
    const std::string b = std::string(bname) + " float64 ";
    return "comm 2.5e-06 3e-10\nkernel " + b + "conv f 1 0\nkernel " + b + "conv b 2 0\n";
  }());
  const PetscMPIInt P = Size();
  struct {
    PetscInt H;
    bool     channels; /* channel workers P, the input on one rank */
  } const cases[] = {{16, false}, {4, false}, {8, true}};
  for (const auto &cs : cases) {
    if (cs.channels && P == 1) continue;
    SCOPED_TRACE("H " + std::to_string(cs.H) + (cs.channels ? ", channel workers" : ", spatial split"));
    DDPartition    part;
    DDTensor       x, y;
    DDLayer        l[2];
    const PetscInt ps[4] = {1, 1, cs.channels ? 1 : P, 1}, shape[4] = {2, 4, cs.H, 12}, k3[2] = {3, 3}, p1[2] = {1, 1};
    const PetscMPIInt r0[1] = {0};
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps, cs.channels ? 1 : PETSC_DECIDE, cs.channels ? r0 : NULL, &part));
    DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
    DDT(DDTensorSetRandomGlobal(x, 5, -1, 1));
    for (DDLayer &c : l) {
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &c));
      DDT(DDLayerSetType(c, DDLAYERCONV));
      DDT(DDLayerConvSetOutputChannels(c, 8));
      DDT(DDLayerConvSetKernel(c, 2, k3));
      DDT(DDLayerConvSetPadding(c, 2, p1));
      if (cs.channels) DDT(DDLayerConvSetChannelWorkers(c, P));
      DDT(DDLayerSetUp(c, x));
      DDT(DDLayerInitializeParameters(c, 3));
    }
    DDT(DDLayerGetOutput(l[0], &y));
    DDT(DDLayerForward(l[0], x, y));
    PetscInt n;
    DDT(DDTensorGetLocalStorageSize(y, &n));
    std::vector<double> before(n), after(n);
    {
      const void *a;
      DDT(DDTensorGetArrayRead(y, &a));
      if (n) std::memcpy(before.data(), a, sizeof(double) * n);
      DDT(DDTensorRestoreArrayRead(y, &a));
    }
    ExpectMeasuredReplacesFit("-dd_model_measure_convs", l[0], l[1], x, y, false);
    {
      const void *a;
      DDT(DDTensorGetArrayRead(y, &a));
      if (n) std::memcpy(after.data(), a, sizeof(double) * n);
      DDT(DDTensorRestoreArrayRead(y, &a));
    }
    EXPECT_EQ(0, n ? std::memcmp(before.data(), after.data(), sizeof(double) * n) : 0) << "the measurement wrote the layer's output";
    if (P == 1 && cs.H == 16) ExpectMeasuredReplacesFit("-dd_model_measure_convs", l[0], l[1], x, y, true); /* no exchange here */
    for (DDLayer &c : l) DDT(DDLayerDestroy(&c));
    DDT(DDTensorDestroy(&x));
    DDT(DDPartitionDestroy(&part));
  }
  DropCache(file);
}

/* -dd_model_measure_pools: a pooling's compute is its own local kernel timed on this rank in place of the
   pool fits (here 1 s and 2 s per call), by a kernel of its own on copies of its tensors: asked between the
   layer's forward and backward, it leaves the output and the max pool's workspace as they were (the
   backward's dx is bitwise the one without the question); once per configuration; none on a rank without
   local output (spatial splits with empty pieces on 8 ranks); the communication is the model's */
TEST(ModelWork, MeasuredPoolingReplacesTheFit)
{
  std::string file = SyntheticCache("measurepool.txt", [] {
    const char *bname;
    DDT(DDBackendGetDefault(&bname));
    const std::string b = std::string(bname) + " float64 ";
    std::string       k;
    for (const char *kind : {"pool", "pool-avg", "pool-avg-blocked"}) k += "kernel " + b + kind + " f 1 0\nkernel " + b + kind + " b 2 0\n";
    return "comm 2.5e-06 3e-10\n" + k;
  }());
  const PetscMPIInt P = Size();
  struct {
    PetscInt H;
    bool     avg; /* average, padding 1, count_include_pad false; else max 2 x 2 */
  } const cases[] = {{16, false}, {4, false}, {16, true}};
  for (const auto &cs : cases) {
    SCOPED_TRACE("H " + std::to_string(cs.H) + (cs.avg ? ", average pool" : ", max pool"));
    DDPartition    part;
    DDTensor       x, y, dy, dx;
    DDLayer        l[2];
    const PetscInt ps[4] = {1, 1, P, 1}, shape[4] = {2, 3, cs.H, 12}, k2[2] = {2, 2}, k3[2] = {3, 3}, p1[2] = {1, 1};
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps, PETSC_DECIDE, NULL, &part));
    DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
    DDT(DDTensorSetRandomGlobal(x, 5, -1, 1));
    for (DDLayer &c : l) {
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &c));
      DDT(DDLayerSetType(c, DDLAYERPOOL));
      if (cs.avg) {
        DDT(DDLayerPoolSetType(c, DD_POOL_AVG));
        DDT(DDLayerPoolSetKernel(c, 2, k3));
        DDT(DDLayerPoolSetStride(c, 2, k2));
        DDT(DDLayerPoolSetPadding(c, 2, p1));
        DDT(DDLayerPoolSetCountIncludePad(c, PETSC_FALSE));
      } else DDT(DDLayerPoolSetKernel(c, 2, k2));
      DDT(DDLayerSetUp(c, x));
      DDT(DDLayerSetTraining(c, PETSC_TRUE));
    }
    DDT(DDLayerGetOutput(l[0], &y));
    DDT(DDTensorDuplicate(y, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 7, -1, 1));
    DDT(DDTensorDuplicate(x, &dx));
    auto local = LocalValues;
    DDT(DDLayerForward(l[0], x, y));
    DDT(DDLayerBackward(l[0], dy, dx));
    const std::vector<double> dxref = local(dx);
    DDT(DDLayerForward(l[0], x, y));
    const std::vector<double> yref = local(y);
    ExpectMeasuredReplacesFit("-dd_model_measure_pools", l[0], l[1], x, y, false);
    EXPECT_TRUE(local(y) == yref) << "the measurement wrote the layer's output";
    DDT(DDTensorZeroEntries(dx));
    DDT(DDLayerBackward(l[0], dy, dx));
    EXPECT_TRUE(local(dx) == dxref) << "the measurement between forward and backward changed the layer's backward";
    if (P == 1 && cs.H == 16) ExpectMeasuredReplacesFit("-dd_model_measure_pools", l[0], l[1], x, y, true);
    for (DDLayer &c : l) DDT(DDLayerDestroy(&c));
    for (DDTensor *tp : {&x, &dy, &dx}) DDT(DDTensorDestroy(tp));
    DDT(DDPartitionDestroy(&part));
  }
  DropCache(file);
}

/* a spectral layer has no fit: its compute is its own local work timed on this rank by default (its FFT
   stages' kernels, the mode mixing, a copy per repartition between the stages), on copies of its tensors:
   asked between the layer's forward and backward, it leaves the output, the saved spectrum and the
   gradients as they were (the backward's dx and dW bitwise the ones without the question); once per
   configuration; -dd_model_measure_spectral 0 prices it as an uncalibrated kind (a pass over its bytes);
   the communication is the model's either way. Batch or spatial splits over P ranks: the ranks time
   their own pieces, nothing in it is collective; at 1 rank the forward's compute is within 0.2-5x of the
   whole layer's forward */
TEST(ModelWork, MeasuredSpectralLayer)
{
  std::string       file = SyntheticCache("measurespectral.txt", "comm 2.5e-06 3e-10\n");
  const PetscMPIInt P    = Size();
  for (int split = 0; split < 2; split++) {
    SCOPED_TRACE(split ? "spatial split" : "batch split");
    DDPartition    part;
    DDTensor       x, y, dy, dx;
    DDLayer        l[2];
    const PetscInt ps[4] = {split ? 1 : P, 1, split ? P : 1, 1}, shape[4] = {4, 6, 16, 12}, modes[2] = {4, 5};
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps, PETSC_DECIDE, NULL, &part));
    DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
    DDT(DDTensorSetRandomGlobal(x, 5, -1, 1));
    for (DDLayer &c : l) {
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &c));
      DDT(DDLayerSetType(c, DDLAYERSPECTRAL));
      DDT(DDLayerSpectralSetModes(c, 2, modes));
      DDT(DDLayerSetUp(c, x));
      DDT(DDLayerInitializeParameters(c, 3));
    }
    DDT(DDLayerGetOutput(l[0], &y));
    DDT(DDTensorDuplicate(y, &dy));
    DDT(DDTensorSetRandomGlobal(dy, 7, -1, 1));
    DDT(DDTensorDuplicate(x, &dx));
    PetscInt  np;
    DDTensor *ps0, *gs0;
    DDT(DDLayerGetParameters(l[0], &np, &ps0));
    DDT(DDLayerGetGradients(l[0], &np, &gs0));
    auto local = LocalValues;
    DDT(DDLayerZeroGradients(l[0]));
    DDT(DDLayerForward(l[0], x, y));
    DDT(DDLayerBackward(l[0], dy, dx));
    const std::vector<double> dxref = local(dx), dwref = local(gs0[0]);
    DDT(DDLayerZeroGradients(l[0]));
    DDT(DDLayerForward(l[0], x, y));
    const std::vector<double> yref = local(y);
    PetscReal fit[4], t[4], t2[4];
    PetscBool ok;
    DDT(PetscOptionsSetValue(NULL, "-dd_model_measure_spectral", "0"));
    DDT(DDLayerGetModelTime(l[0], &fit[0], &fit[1], &fit[2], &fit[3], &ok));
    DDT(PetscOptionsClearValue(NULL, "-dd_model_measure_spectral"));
    DDT(DDLayerGetModelTime(l[0], &t[0], &t[1], &t[2], &t[3], &ok));
    DDT(DDLayerGetModelTime(l[1], &t2[0], &t2[1], &t2[2], &t2[3], &ok));
    EXPECT_TRUE(ok);
    PetscInt nloc;
    DDT(DDTensorGetLocalSize(y, &nloc));
    if (nloc > 0) { /* timed: not the pass over the bytes the fit prices */
      EXPECT_GT(t[0], 0);
      EXPECT_GT(t[2], 0);
      EXPECT_LT(t[0], 0.5);
      EXPECT_LT(t[2], 0.5);
      EXPECT_NE(t[0], fit[0]);
      EXPECT_NE(t[2], fit[2]);
    }
    EXPECT_EQ(t[1], fit[1]); /* the communication is the model's */
    EXPECT_EQ(t[3], fit[3]);
    for (int k = 0; k < 4; k++) EXPECT_EQ(t2[k], t[k]) << "entry " << k << ": the same configuration is timed once";
    EXPECT_TRUE(local(y) == yref) << "the measurement wrote the layer's output";
    DDT(DDLayerBackward(l[0], dy, dx));
    EXPECT_TRUE(local(dx) == dxref) << "the measurement between forward and backward changed the layer's dx";
    EXPECT_TRUE(local(gs0[0]) == dwref) << "the measurement between forward and backward changed the weight gradient";
    if (P == 1) { /* the local work alone against the whole layer's forward: the same order */
      std::vector<double> ts;
      for (int r = 0; r < 15; r++) {
        PetscLogDouble t0, t1;
        DDT(PetscTime(&t0));
        DDT(DDLayerForward(l[0], x, y));
        DDT(PetscTime(&t1));
        ts.push_back(t1 - t0);
      }
      std::sort(ts.begin(), ts.end());
      EXPECT_GT(t[0], 0.2 * ts[7]);
      EXPECT_LT(t[0], 5 * ts[7]);
    }
    for (DDLayer &c : l) DDT(DDLayerDestroy(&c));
    for (DDTensor *tp : {&x, &dy, &dx}) DDT(DDTensorDestroy(tp));
    DDT(DDPartitionDestroy(&part));
  }
  DropCache(file);
}

/* each repartition a layer runs (here the six of a spectral layer's two FFTs, none on one rank but copies) is priced by
   the "repartition" fit where the cache has one, in place of alpha-beta on its volume: c0 + c1 bytes sent or received
   (the most) + c2 runs sent from + c3 runs received into + c4 runs copied within the rank + c5 bytes copied within the
   rank, from the exchanges' plans (Exchange::PlannedWork()); forward with the repartitions' forward volumes and runs,
   backward with their adjoints' */
TEST(ModelWork, RepartitionsPricedByTheirFit)
{
  const PetscMPIInt P = Size();
  const char       *bname;
  DDT(DDBackendGetDefault(&bname));
  const double alpha = 2.5e-06, beta = 3e-10, c[2][6] = {{4e-06, 5e-10, 6e-09, 3e-09, 2e-09, 7e-11}, {5e-06, 4e-10, 8e-09, 1e-09, 4e-09, 9e-11}};
  const char  *cs[2]  = {"4e-06 5e-10 6e-09 3e-09 2e-09 7e-11", "5e-06 4e-10 8e-09 1e-09 4e-09 9e-11"};
  std::string  fits;
  for (const char *k : {"repartition", "repartition:cold"})
    for (int d = 0; d < 2; d++) fits += "kernel " + std::string(bname) + " float64 " + k + (d ? " b " : " f ") + cs[d] + "\n";
  for (int split = 0; split < 2; split++) {
    SCOPED_TRACE(split ? "W split" : "batch split");
    DDPartition    part;
    DDTensor       x;
    DDLayer        l;
    const PetscInt ps[4] = {split ? 1 : P, 1, 1, split ? P : 1}, shape[4] = {4, 6, 16, 12}, modes[2] = {4, 5};
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 4, ps, PETSC_DECIDE, NULL, &part));
    DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
    DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
    DDT(DDLayerSetType(l, DDLAYERSPECTRAL));
    DDT(DDLayerSpectralSetModes(l, 2, modes));
    DDT(DDLayerSetUp(l, x));
    /* the expected difference from the repartitions' exchange plans */
    double   delta[2] = {0, 0};
    PetscInt nrep = 0, asym = 0;
    for (auto *ex : ddnn::ExchangeRegistry()) {
      if (!ddnn::ExchangeIsUnder(ex->owner, l)) continue;
      PetscBool isrp;
      DDT(PetscObjectTypeCompare((PetscObject)ex->owner, DDPRIMITIVEREPARTITION, &isrp));
      ASSERT_TRUE(isrp) << "a spectral layer exchanges through its FFTs' repartitions only";
      nrep++;
      for (int d = 0; d < 2; d++) {
        PetscInt64 v[4], w[4];
        ex->PlannedVolume(d, sizeof(double), v);
        ex->PlannedWork(d, w);
        const double mb = (double)PetscMax(v[1], v[3]);
        delta[d] += c[d][0] + c[d][1] * mb + c[d][2] * (double)w[0] + c[d][3] * (double)w[1] + c[d][4] * (double)w[2] + c[d][5] * 8.0 * (double)w[3] - (alpha * (double)PetscMax(v[0], v[2]) + beta * mb);
        if (w[0] != w[1]) asym++;
      }
    }
    EXPECT_EQ(nrep, 6) << "three repartitions in each of the layer's two FFTs";
    if (P > 1 && split) EXPECT_GT(asym, 0) << "the W split's transposes send from runs of one length and receive into runs of another";
    PetscReal t[2][4];
    PetscBool ok;
    DDT(PetscOptionsSetValue(NULL, "-dd_model_measure_spectral", "0"));
    for (int withfit = 0; withfit < 2; withfit++) {
      std::string file = SyntheticCache("repartfit.txt", "comm 2.5e-06 3e-10\n" + (withfit ? fits : ""));
      DDT(DDLayerGetModelTime(l, &t[withfit][0], &t[withfit][1], &t[withfit][2], &t[withfit][3], &ok));
      DropCache(file);
    }
    DDT(PetscOptionsClearValue(NULL, "-dd_model_measure_spectral"));
    EXPECT_EQ(t[1][0], t[0][0]) << "the compute is not the repartitions'";
    EXPECT_EQ(t[1][2], t[0][2]);
    for (int d = 0; d < 2; d++) {
      const double want = std::max(0.0, t[0][2 * d + 1] + delta[d]);
      EXPECT_NEAR(t[1][2 * d + 1], want, 1e-12 * want) << (d ? "backward" : "forward") << ": alpha-beta " << t[0][2 * d + 1];
      EXPECT_GT(t[1][2 * d + 1], 0) << "even the copies of a repartition within a rank cost";
    }
    DDT(DDLayerDestroy(&l));
    DDT(DDTensorDestroy(&x));
    DDT(DDPartitionDestroy(&part));
  }
}

/* a ReLU between a plain input and an output stored otherwise walks one run per row (other halo)
   or per entry (channels-last: a format conversion); the runs and their price (a row: a constant and,
   where the cache has it, a term per entry) are exact */
TEST(ModelWork, FormatConversionRunsAndTimeExact)
{
  std::string    file = SyntheticCache("runs.txt");
  DDPartition    part;
  DDTensor       x, y;
  DDLayer        l;
  const PetscInt shape[4] = {2, 3, 4, 5}, ps[4] = {1, 1, 1, 1};
  DDT(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, ps, PETSC_DECIDE, NULL, &part));
  DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
  DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerGetOutput(l, &y));
  PetscInt64 runs;
  PetscReal  t[4];
  PetscBool  ok;
  DDT(DDLayerGetModelRuns(l, &runs));
  EXPECT_EQ(runs, 1); /* the same contiguous storage */
  DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
  const double by = 8.0 * 120 * 2, byb = 8.0 * 120 * 3;
  EXPECT_NEAR(t[0], 1e-6 + 2e-10 * by, 1e-15);
  EXPECT_NEAR(t[2], 3e-6 + 4e-10 * byb, 1e-15);
  const PetscInt lo[4] = {0, 0, 1, 1}, hi[4] = {0, 0, 1, 1};
  DDT(DDTensorSetHalo(y, lo, hi)); /* as a consumer convolution grows it */
  DDT(DDLayerGetModelRuns(l, &runs));
  EXPECT_EQ(runs, 2 * 3 * 4); /* one per row of W */
  DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
  EXPECT_NEAR(t[0], 1e-6 + 2e-10 * by + 1.1e-8 * 23, 1e-15);
  EXPECT_NEAR(t[2], 3e-6 + 4e-10 * byb + 1.3e-8 * 23, 1e-15);
  const char *bn;
  DDT(DDBackendGetDefault(&bn));
  auto withRunCost = [&](const char *kind, const char *f, const char *b) { /* the synthetic cache again, with one more kind's run costs */
    const std::string k = std::string("runcost ") + bn + " float64 " + kind + " ";
    DropCache(file);
    file = SyntheticCache("runs.txt", k + "f " + f + "\n" + k + "b " + b + "\n");
  };
  { /* with the rows' length term ("activation-rows-len", seconds per entry of a row): rows of 5 entries */
    withRunCost("activation-rows-len", "2e-10", "3e-10");
    DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_NEAR(t[0], 1e-6 + 2e-10 * by + (1.1e-8 + 2e-10 * 5) * 23, 1e-15);
    EXPECT_NEAR(t[2], 3e-6 + 4e-10 * byb + (1.3e-8 + 3e-10 * 5) * 23, 1e-15);
    DropCache(file);
    file = SyntheticCache("runs.txt");
  }
  DDT(DDTensorSetFormat(y, DD_FORMAT_CHANNELS_LAST));
  DDT(DDLayerGetModelRuns(l, &runs));
  EXPECT_EQ(runs, 120); /* one per entry */
  DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
  EXPECT_NEAR(t[0], 1e-6 + 2e-10 * by + 5e-9 * 119, 1e-15);
  EXPECT_NEAR(t[2], 3e-6 + 4e-10 * byb + 7e-9 * 119, 1e-15);
  EXPECT_EQ(t[1], 0);
  /* another function has its own fit (tanh costs tens of relus) */
  DDT(DDLayerActivationSetType(l, DD_ACT_TANH));
  DDActivationType at;
  DDT(DDLayerActivationGetType(l, &at));
  EXPECT_EQ(at, DD_ACT_TANH);
  DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
  EXPECT_NEAR(t[0], 2e-6 + 8e-10 * by + 5e-9 * 119, 1e-15);
  EXPECT_FALSE(ok); /* no backward fit of tanh in this cache */
  { /* both blocked (16 channels: whole blocks), the output with the halo: rows of W x block entries,
       priced with the blocked walk's run cost where the cache has one (cold, each such row restarts
       the prefetcher's stream), else with the plain rows' */
    const PetscInt bshape[4] = {2, 16, 4, 5};
    DDTensor       xb, yb;
    DDLayer        lb;
    DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, bshape, &xb));
    DDT(DDTensorSetFormat(xb, DD_FORMAT_BLOCKED));
    DDT(DDLayerCreate(PETSC_COMM_SELF, &lb));
    DDT(DDLayerSetType(lb, DDLAYERACTIVATION));
    DDT(DDLayerSetUp(lb, xb));
    DDT(DDLayerGetOutput(lb, &yb));
    DDT(DDTensorSetFormat(yb, DD_FORMAT_BLOCKED));
    DDT(DDTensorSetHalo(yb, lo, hi));
    ASSERT_EQ(xb->layout.bs, yb->layout.bs);
    DDT(DDLayerGetModelRuns(lb, &runs));
    const PetscInt64 rows = 2 * (16 / xb->layout.bs) * 4; /* N x blocks x H */
    EXPECT_EQ(runs, rows);
    const double bz = 8.0 * 640 * 2, bzb = 8.0 * 640 * 3;
    DDT(DDLayerGetModelTime(lb, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_NEAR(t[0], 1e-6 + 2e-10 * bz + 1.1e-8 * (double)(rows - 1), 1e-15) << "no blocked run cost in the cache: the plain rows'";
    withRunCost("activation-rows-blocked", "4.1e-08", "4.3e-08");
    DDT(DDLayerGetModelTime(lb, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_NEAR(t[0], 1e-6 + 2e-10 * bz + 4.1e-8 * (double)(rows - 1), 1e-15);
    EXPECT_NEAR(t[2], 3e-6 + 4e-10 * bzb + 4.3e-8 * (double)(rows - 1), 1e-15);
    DDT(DDLayerDestroy(&lb));
    DDT(DDTensorDestroy(&xb));
  }
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  DDT(DDPartitionDestroy(&part));
  DropCache(file);
}

/* an add whose second input is stored in another order than its output (a convolution's blocked output added
   to a plain tensor; here channels-last) converts it entry by entry: the cache's "add-convert" cost per entry
   on top of the add of tensors stored alike, forward and backward, exactly; an add of inputs stored alike
   gets nothing more, and a cache without the kind prices the conversion at nothing (older caches) */
TEST(ModelWork, AddOfInputsStoredOtherwiseExact)
{
  std::string    file = SyntheticCache("addconvert.txt");
  DDPartition    part;
  DDTensor       x0, x1;
  DDLayer        l[2];
  const PetscInt shape[4] = {2, 3, 4, 5}, ps[4] = {1, 1, 1, 1};
  DDT(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, ps, PETSC_DECIDE, NULL, &part));
  DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x0));
  DDT(DDTensorCreate(PETSC_COMM_SELF, &x1));
  DDT(DDTensorSetPartition(x1, part));
  DDT(DDTensorSetShape(x1, 4, shape));
  DDT(DDTensorSetDataType(x1, DD_FLOAT64));
  DDT(DDTensorSetFormat(x1, DD_FORMAT_CHANNELS_LAST));
  DDT(DDTensorSetUp(x1));
  DDTensor mixed[2] = {x0, x1}, alike[2] = {x0, x0};
  for (int k = 0; k < 2; k++) {
    DDT(DDLayerCreate(PETSC_COMM_SELF, &l[k]));
    DDT(DDLayerSetType(l[k], DDLAYERADD));
    DDT(DDLayerSetUpMulti(l[k], 2, k ? alike : mixed));
  }
  PetscReal t0[2][4], t1[2][4];
  PetscBool ok;
  for (int k = 0; k < 2; k++) DDT(DDLayerGetModelTime(l[k], &t0[k][0], &t0[k][1], &t0[k][2], &t0[k][3], &ok));
  EXPECT_EQ(t0[0][0], t0[1][0]) << "a cache without add-convert prices the conversion at nothing";
  EXPECT_EQ(t0[0][2], t0[1][2]);
  const char *bn;
  DDT(DDBackendGetDefault(&bn));
  const std::string k = std::string("runcost ") + bn + " float64 add-convert ";
  DropCache(file);
  file = SyntheticCache("addconvert.txt", k + "f 1e-3\n" + k + "b 2e-3\n");
  for (int k2 = 0; k2 < 2; k2++) DDT(DDLayerGetModelTime(l[k2], &t1[k2][0], &t1[k2][1], &t1[k2][2], &t1[k2][3], &ok));
  EXPECT_NEAR(t1[0][0], t0[0][0] + 120 * 1e-3, 1e-12) << "forward: 120 entries converted";
  EXPECT_NEAR(t1[0][2], t0[0][2] + 120 * 2e-3, 1e-12) << "backward: 120 entries converted";
  EXPECT_EQ(t1[1][0], t0[1][0]) << "inputs stored alike: nothing converted";
  EXPECT_EQ(t1[1][2], t0[1][2]);
  for (DDLayer &c : l) DDT(DDLayerDestroy(&c));
  DDT(DDTensorDestroy(&x0));
  DDT(DDTensorDestroy(&x1));
  DDT(DDPartitionDestroy(&part));
  DropCache(file);
}

/* average and max pooling have their own fits ("pool-avg", "pool"; DDLayerPoolGetType() tells them
   apart; an average pool on a blocked input "pool-avg-blocked", oneDNN's jit kernel there), and a layer whose memory M exceeds the core's L2 cache is priced with the share 1 - L2 / M
   of the cold fit and the rest of the warm one: exact under known fits */
TEST(ModelWork, PoolTypeAndColdShareExact)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string b = std::string(bname) + " float64 ", file = Tmp("pool.txt");
  WriteFile(file, "ddnn-model-cache 16\nhost " + Host() + "\n" + "kernel " + b + "pool f 1e-06 2e-10\n" + "kernel " + b + "pool b 2e-06 3e-10\n" + "kernel " + b + "pool-avg f 4e-06 5e-10\n" + "kernel " + b + "pool-avg b 6e-06 7e-10\n" + "kernel " + b + "pool-avg-blocked f 1.5e-06 2.5e-10\n" + "kernel " + b + "pool-avg-blocked b 3.5e-06 4.5e-10\n" + "kernel " + b + "pool:cold f 1e-03 9e-10\n" + "kernel " + b + "flatten f 2e-06 1e-11\n" + "kernel " + b + "flatten b 3e-06 2e-11\n" + "kernel " + b + "flatten-blocked f 5e-06 6e-10\n" + "kernel " + b + "flatten-blocked b 7e-06 8e-10\n" + "kernel " + b + "concat f 2.5e-06 3e-11\n" + "kernel " + b + "concat b 3.5e-06 4e-11\n" + "kernel " + b + "concat-blocked f 9e-06 4e-10\n" + "kernel " + b + "concat-blocked b 8e-06 5e-10\n" + "kernel " + b + "concat-halo f 6e-06 7e-11 3e-09 0 0 0\n" + "kernel " + b + "concat-halo b 5e-06 8e-11 4e-09 0 0 0\n");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  long         l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const double L2 = l2 > 0 ? (double)l2 : 1048576.0;
  for (PetscInt big = 0; big < 2; big++) {
    DDPartition    part;
    DDTensor       x;
    DDLayer        l;
    const PetscInt shape[4] = {2, 3, big ? 1024 : 4, big ? 1024 : 4}, ps[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
    DDT(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, ps, PETSC_DECIDE, NULL, &part));
    DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
    DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
    DDT(DDLayerSetType(l, DDLAYERPOOL));
    DDT(DDLayerPoolSetKernel(l, 2, k2));
    DDPoolType pt;
    DDT(DDLayerPoolGetType(l, &pt));
    EXPECT_EQ(pt, DD_POOL_MAX); /* the default */
    DDT(DDLayerSetUp(l, x));
    PetscInt64 m[4];
    DDT(DDLayerGetModelMemory(l, &m[0], &m[1], &m[2], &m[3]));
    const double M = (double)(m[0] + m[1] + m[2] + m[3]), share = M > L2 ? 1 - L2 / M : 0;
    EXPECT_EQ(share > 0, big == 1) << "memory " << M << " bytes, L2 " << L2;
    PetscReal f, by[2], t[4];
    PetscBool ok;
    for (int d = 0; d < 2; d++) DDT(DDLayerGetModelWork(l, d ? PETSC_TRUE : PETSC_FALSE, &f, &by[d]));
    DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_TRUE(ok);
    EXPECT_NEAR(t[0], (1 - share) * (1e-6 + 2e-10 * by[0]) + share * (1e-3 + 9e-10 * by[0]), 1e-12 * t[0]);
    EXPECT_NEAR(t[2], 2e-6 + 3e-10 * by[1], 1e-12 * t[2]); /* no cold backward fit: the warm one */
    DDT(DDLayerDestroy(&l));
    /* average pooling */
    DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
    DDT(DDLayerSetType(l, DDLAYERPOOL));
    DDT(DDLayerPoolSetType(l, DD_POOL_AVG));
    DDT(DDLayerPoolSetKernel(l, 2, k2));
    DDT(DDLayerPoolGetType(l, &pt));
    EXPECT_EQ(pt, DD_POOL_AVG);
    DDT(DDLayerSetUp(l, x));
    DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_NEAR(t[0], 4e-6 + 5e-10 * by[0], 1e-12 * t[0]); /* no cold fit of average pooling: the warm one */
    EXPECT_NEAR(t[2], 6e-6 + 7e-10 * by[1], 1e-12 * t[2]);
    DDT(DDLayerDestroy(&l));
    /* average pooling on a blocked input */
    DDT(DDTensorSetFormat(x, DD_FORMAT_BLOCKED));
    DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
    DDT(DDLayerSetType(l, DDLAYERPOOL));
    DDT(DDLayerPoolSetType(l, DD_POOL_AVG));
    DDT(DDLayerPoolSetKernel(l, 2, k2));
    DDT(DDLayerSetUp(l, x));
    for (int d = 0; d < 2; d++) DDT(DDLayerGetModelWork(l, d ? PETSC_TRUE : PETSC_FALSE, &f, &by[d]));
    DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_NEAR(t[0], 1.5e-6 + 2.5e-10 * by[0], 1e-12 * t[0]);
    EXPECT_NEAR(t[2], 3.5e-6 + 4.5e-10 * by[1], 1e-12 * t[2]);
    DDT(DDLayerDestroy(&l));
    /* a blocked input: a flatten converts the format ("flatten-blocked"), a concatenation copies
       blocked rows ("concat-blocked"), each by its own fit; the plain ones for plain inputs. The
       fits' coefficients {c0, c1} per kind: plain forward, plain backward, blocked forward, blocked backward */
    struct {
      DDLayerType type;
      PetscInt    nin;
      double      c[4][2];
    } const cases[] = {{DDLAYERFLATTEN, 1, {{2e-6, 1e-11}, {3e-6, 2e-11}, {5e-6, 6e-10}, {7e-6, 8e-10}}}, {DDLAYERCONCAT, 2, {{2.5e-6, 3e-11}, {3.5e-6, 4e-11}, {9e-6, 4e-10}, {8e-6, 5e-10}}}};
    for (const auto &cs : cases)
      for (int blocked = 0; blocked < 2; blocked++) {
        DDTensor x2 = NULL;
        DDT(DDTensorSetFormat(x, blocked ? DD_FORMAT_BLOCKED : DD_FORMAT_PLAIN));
        if (cs.nin > 1) DDT(DDTensorDuplicate(x, &x2));
        DDTensor xs[2] = {x, x2};
        DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
        DDT(DDLayerSetType(l, cs.type));
        DDT(DDLayerSetUpMulti(l, cs.nin, xs));
        for (int d = 0; d < 2; d++) DDT(DDLayerGetModelWork(l, d ? PETSC_TRUE : PETSC_FALSE, &f, &by[d]));
        DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
        EXPECT_TRUE(ok) << cs.type;
        for (int d = 0; d < 2; d++) {
          const double *c = cs.c[2 * blocked + d];
          EXPECT_NEAR(t[2 * d], c[0] + c[1] * by[d], 1e-12 * t[2 * d]) << cs.type << (blocked ? " blocked" : " plain") << (d ? " backward" : " forward");
        }
        DDT(DDLayerDestroy(&l));
        DDT(DDTensorDestroy(&x2));
      }
    { /* plain inputs into an output with a consumer convolution's halo ("concat-halo"): c0 + c1 bytes + c2 rows,
         the rows the output's local entries over its innermost extent (W); a blocked input keeps "concat-blocked" */
      for (int blocked = 0; blocked < 2; blocked++) {
        DDTensor       x2, y;
        const PetscInt lo[4] = {0, 0, 1, 1};
        DDT(DDTensorSetFormat(x, blocked ? DD_FORMAT_BLOCKED : DD_FORMAT_PLAIN));
        DDT(DDTensorDuplicate(x, &x2));
        DDTensor xs[2] = {x, x2};
        DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
        DDT(DDLayerSetType(l, DDLAYERCONCAT));
        DDT(DDLayerSetOutputHalo_Private(l, lo, lo));
        DDT(DDLayerSetUpMulti(l, 2, xs));
        DDT(DDLayerGetOutput(l, &y));
        const double rows = (double)(y->layout.bulksize / y->layout.n[3]);
        for (int d = 0; d < 2; d++) DDT(DDLayerGetModelWork(l, d ? PETSC_TRUE : PETSC_FALSE, &f, &by[d]));
        DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
        EXPECT_TRUE(ok);
        if (blocked) {
          EXPECT_NEAR(t[0], 9e-6 + 4e-10 * by[0], 1e-12 * t[0]);
          EXPECT_NEAR(t[2], 8e-6 + 5e-10 * by[1], 1e-12 * t[2]);
        } else {
          EXPECT_NEAR(t[0], 6e-6 + 7e-11 * by[0] + 3e-9 * rows, 1e-12 * t[0]);
          EXPECT_NEAR(t[2], 5e-6 + 8e-11 * by[1] + 4e-9 * rows, 1e-12 * t[2]);
        }
        DDT(DDLayerDestroy(&l));
        DDT(DDTensorDestroy(&x2));
      }
    }
    DDT(DDTensorDestroy(&x));
    DDT(DDPartitionDestroy(&part));
  }
  { /* the getter names a layer of another type */
    DDLayer    l;
    DDPoolType pt;
    DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
    DDT(DDLayerSetType(l, DDLAYERACTIVATION));
    DD_EXPECT_ERROR(DDLayerPoolGetType(l, &pt), PETSC_ERR_ARG_WRONG, "DDLayerPoolGetType() needs a pool layer");
    DDT(DDLayerDestroy(&l));
  }
  DropCache(file);
}

/* the window kinds' fits (pool, upsample) have a term in the output's rows: its local entries over the
   extent of its innermost storage dimension (W plain, C channels-last, the channel block blocked);
   a fit without the term (two numbers) prices bytes alone, as the pool fits of the test above */
TEST(ModelWork, WindowKindsRowsTermExact)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string b = std::string(bname) + " float64 ", file = Tmp("window.txt");
  WriteFile(file, "ddnn-model-cache 16\nhost " + Host() + "\n" + "kernel " + b + "pool f 1e-06 2e-10 3e-08 0 0 0\n" + "kernel " + b + "pool b 2e-06 3e-10 4e-08 0 0 0\n" + "kernel " + b + "upsample f 5e-06 1e-10 2e-08 0 0 0\n" + "kernel " + b + "upsample b 6e-06 4e-10 7e-09 0 0 0\n");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  const PetscInt N = 2, C = 5, H = 8, W = 6, ps[4] = {1, 1, 1, 1}, shape[4] = {N, C, H, W}, k2[2] = {2, 2};
  for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
    for (int up = 0; up < 2; up++) {
      DDPartition part;
      DDTensor    x, y;
      DDLayer     l;
      DDT(DDPartitionCreateCartesian(PETSC_COMM_SELF, 4, ps, PETSC_DECIDE, NULL, &part));
      DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 4, shape, &x));
      DDT(DDTensorSetFormat(x, fmt));
      DDT(DDLayerCreate(PETSC_COMM_SELF, &l));
      DDT(DDLayerSetType(l, up ? DDLAYERUPSAMPLE : DDLAYERPOOL));
      if (up) DDT(DDLayerUpsampleSetScale(l, 2, k2));
      else DDT(DDLayerPoolSetKernel(l, 2, k2));
      DDT(DDLayerSetUp(l, x));
      DDT(DDLayerGetOutput(l, &y));
      DDTensorFormat yf;
      DDT(DDTensorGetFormat(y, &yf));
      EXPECT_EQ(yf, fmt); /* the window kinds keep their input's format */
      const PetscInt Ho = up ? 2 * H : H / 2, Wo = up ? 2 * W : W / 2;
      /* the block (8 channels by default) is longer than C = 5: a run of C channels, as channels-last */
      const double rows = fmt == DD_FORMAT_PLAIN ? (double)(N * C * Ho) : (double)(N * Ho * Wo);
      const double c[2][3] = {{up ? 5e-6 : 1e-6, up ? 1e-10 : 2e-10, up ? 2e-8 : 3e-8}, {up ? 6e-6 : 2e-6, up ? 4e-10 : 3e-10, up ? 7e-9 : 4e-8}};
      PetscReal f, by[2], t[4];
      PetscBool ok;
      for (int d = 0; d < 2; d++) DDT(DDLayerGetModelWork(l, d ? PETSC_TRUE : PETSC_FALSE, &f, &by[d]));
      DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], &ok));
      EXPECT_TRUE(ok);
      for (int d = 0; d < 2; d++) EXPECT_NEAR(t[2 * d], c[d][0] + c[d][1] * by[d] + c[d][2] * rows, 1e-12 * t[2 * d]) << (up ? "upsample" : "pool") << " format " << DDTensorFormats[fmt] << (d ? " backward" : " forward");
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
      DDT(DDPartitionDestroy(&part));
    }
  DropCache(file);
}

/* the network's own work: DDNetBackward zeroes every output gradient but the loss's and adds the
   gradients of tensors with two consumers (the U-Net's skip connections); DDNetZeroGradients and
   an update are bandwidth-bound kernels over every parameter: exact under known fits */
TEST(ModelWork, NetOwnWorkExact)
{
  std::string file = SyntheticCache("net.txt");
  DDTensor    in[2];
  DDNet       net = MainJobNet(in, DD_FLOAT64);
  PetscInt    n;
  DDT(DDNetGetNumLayers(net, &n));
  double   over = 0, zero = 0, upd = 0, layers = 0;
  PetscInt axpys = 0;
  DDLayer  last;
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    DDTensor    y;
    PetscInt    m;
    PetscReal   t[4];
    PetscBool   ok;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    DDT(DDNetGetLayerModelTime(net, i, &t[0], &t[1], &t[2], &t[3], &ok));
    double tb = t[2] + t[3];
    MPI_Allreduce(MPI_IN_PLACE, &tb, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    layers += tb;
    DDT(DDLayerGetOutput(l, &y));
    DDT(DDTensorGetLocalStorageSize(y, &m));
    if (i < n - 1) over += 1.5e-7 + 1e-11 * 8.0 * (double)m;
    if (!std::strcmp(name, "a2") || !std::strcmp(name, "a4")) { /* to a pool and a concat */
      DDT(DDTensorGetLocalSize(y, &m));
      over += 2 * (2.5e-7 + 3e-11 * 3 * 8.0 * (double)m);
      axpys += 2;
    }
    PetscInt  np;
    DDTensor *gs;
    DDT(DDLayerGetGradients(l, &np, &gs));
    for (PetscInt p = 0; p < np; p++) {
      DDT(DDTensorGetLocalStorageSize(gs[p], &m));
      if (!m) continue; /* not held on this rank */
      zero += 1.5e-7 + 1e-11 * 8.0 * (double)m;
      upd += 2.5e-7 + 3e-11 * 5 * 8.0 * (double)m;
    }
    last = l;
  }
  EXPECT_EQ(axpys, 4);
  DDLayerType lt;
  DDT(DDLayerGetType(last, &lt));
  EXPECT_STREQ(lt, DDLAYERLOSS);
  double m3[3] = {over, zero, upd};
  MPI_Allreduce(MPI_IN_PLACE, m3, 3, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
  PetscReal tf, tb, tz, tu;
  PetscBool ok;
  DDT(DDNetGetModelTime(net, &tf, &tb, &ok));
  EXPECT_NEAR(tb - layers, m3[0], 1e-12 * (1 + layers));
  EXPECT_GT(m3[0], 0);
  DDT(DDNetGetModelUpdateTime(net, 5, &tz, &tu, &ok));
  EXPECT_NEAR(tz, m3[1], 1e-15 + 1e-12 * m3[1]);
  EXPECT_NEAR(tu, m3[2], 1e-15 + 1e-12 * m3[2]);
  EXPECT_TRUE(ok);
  DD_EXPECT_ERROR(DDNetGetModelUpdateTime(net, 0, &tz, &tu, &ok), PETSC_ERR_ARG_OUTOFRANGE, "streams");
  DestroyNet(&net, in);
  DropCache(file);
}

/* an optimizer's update of 3, 5 or 7 streams is priced by the calibrated DDOptimizerStep() of its
   rule (one call: c0 + c1 parameter bytes), with the gradient norm's all-reduce on P > 1 ranks;
   the share beyond L2 at the cold fit; another count of streams by the copies' fit as before */
TEST(ModelWork, OptimizerUpdateFromItsOwnFit)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  const std::string b = "kernel " + std::string(bname) + " float64 ", P = std::to_string(Size());
  for (int withcold = 0; withcold < 2; withcold++) {
    std::string file = SyntheticCache("upd.txt", "comm 1e-05 1e-09\n" + b + "update-momentum f 2e-06 3e-10\n" + (withcold ? b + "update-momentum:cold f 4e-06 5e-10\n" : std::string()) + b + "allsum-g" + P + " f 6e-06 1e-09\n");
    DDTensor in[2];
    DDNet    net = MainJobNet(in, DD_FLOAT64);
    PetscInt n;
    double   bytes = 0, axpy = 0; /* this rank's parameter bytes; the copies' price of 4 streams */
    DDT(DDNetGetNumLayers(net, &n));
    for (PetscInt i = 0; i < n; i++) {
      DDLayer     l;
      const char *name;
      PetscInt    np, m;
      DDTensor   *gs;
      DDT(DDNetGetLayerByIndex(net, i, &l, &name));
      DDT(DDLayerGetGradients(l, &np, &gs));
      for (PetscInt q = 0; q < np; q++) {
        DDT(DDTensorGetLocalStorageSize(gs[q], &m));
        if (!m) continue;
        bytes += 8.0 * (double)m;
        axpy += 2.5e-7 + 3e-11 * 4 * 8.0 * (double)m;
      }
    }
    double warm = bytes > 0 ? 2e-06 + 3e-10 * bytes : 0, cold = bytes > 0 ? 4e-06 + 5e-10 * bytes : 0, red = Size() > 1 ? 6e-06 + 1e-09 * 8 : 0;
    double mx[3] = {warm, cold, axpy};
    MPI_Allreduce(MPI_IN_PLACE, mx, 3, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    PetscReal tz, tu;
    PetscBool ok;
    DDT(DDNetGetModelUpdateTime(net, 5, &tz, &tu, &ok));
    EXPECT_TRUE(ok);
    if (!withcold) EXPECT_NEAR(tu, mx[0] + red, 1e-12 * tu) << "the warm fit alone";
    else { /* the main job's parameters, gradients and momenta (2.5 MB at 1 rank) exceed L2 in part */
      EXPECT_GT(tu, mx[0] + red + 1e-9);
      EXPECT_LT(tu, mx[1] + red);
    }
    DDT(DDNetGetModelUpdateTime(net, 4, &tz, &tu, &ok)); /* no rule of 4 streams: the copies' fit per tensor */
    EXPECT_NEAR(tu, mx[2], 1e-12 * tu);
    DestroyNet(&net, in);
    DropCache(file);
  }
}

/* the replicated weight mode is priced as the network runs it: its layers count no weight
   broadcast or sum-reduction, and the network adds per bucket (the main job's: every parameter,
   one worker group of all ranks) a flag all-reduce, the root's packing, one broadcast and the
   members' unpacking forward; the members' copies, one all-reduce, the root's additions and the
   zeroing backward. Exact under known fits; nothing changes on 1 rank (no replicas) */
TEST(ModelWork, ReplicatedWeightsPricedAsTheNetworkRunsThem)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  const std::string bp = "kernel " + std::string(bname) + "@" + std::to_string(Size()) + " float64 ", P = std::to_string(Size());
  std::string file = SyntheticCache("repl.txt", "comm 1e-05 1e-09\n" + bp + "bcast-g" + P + " f 2e-06 1e-09\n" + bp + "bcast-g" + P + " b 3e-06 2e-09\n" + bp + "allsum-g" + P + " f 4e-06 3e-09\n" + bp + "allsum-g" + P + " b 4e-06 3e-09\n");
  DDTensor in[2];
  DDNet    net = MainJobNet(in, DD_FLOAT64);
  PetscInt n;
  DDT(DDNetGetNumLayers(net, &n));
  /* the sums over the layers of their slowest rank's forward and backward, and every layer's collective calls */
  auto layers = [&](double L[2], std::vector<PetscInt64> &calls) {
    L[0] = L[1] = 0;
    calls.assign((size_t)n, 0);
    for (PetscInt i = 0; i < n; i++) {
      DDLayer     l;
      const char *name;
      PetscReal   t[4];
      PetscBool   ok;
      DDT(DDNetGetLayerByIndex(net, i, &l, &name));
      DDT(DDNetGetLayerModelTime(net, i, &t[0], &t[1], &t[2], &t[3], &ok));
      double f[2] = {t[0] + t[1], t[2] + t[3]};
      MPI_Allreduce(MPI_IN_PLACE, f, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
      L[0] += f[0];
      L[1] += f[1];
      DDT(DDLayerGetModelCollectives(l, PETSC_FALSE, &calls[(size_t)i], NULL));
    }
  };
  double                  Lb[2], Lr[2];
  std::vector<PetscInt64> cb, cr;
  PetscReal               tfb, tbb, tfr, tbr;
  PetscBool               ok;
  layers(Lb, cb);
  DDT(DDNetGetModelTime(net, &tfb, &tbb, &ok));
  EXPECT_NEAR(tfb, Lb[0], 1e-12 * tfb); /* the broadcast mode: the layers alone forward */
  DDT(DDNetSetWeightMode(net, DD_NET_WEIGHTS_REPLICATED));
  layers(Lr, cr);
  DDT(DDNetGetModelTime(net, &tfr, &tbr, &ok)); /* not calibrated (no convolution fits): the terms priced are exact all the same */
  /* the parameters: the entries of the bucket, and those held here (the root's) */
  double count = 0, root = 0;
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    PetscInt    np, m, d;
    DDTensor   *ws;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    DDT(DDLayerGetParameters(l, &np, &ws));
    for (PetscInt p = 0; p < np; p++) {
      DDT(DDTensorGetSize(ws[p], &d));
      DDT(DDTensorGetLocalSize(ws[p], &m));
      count += (double)d;
      root += (double)m;
    }
    if (Size() > 1 && np) EXPECT_EQ(cr[(size_t)i], cb[(size_t)i] - np) << name << ": the layer still counts its weights' broadcasts";
    else EXPECT_EQ(cr[(size_t)i], cb[(size_t)i]) << name;
  }
  if (Size() == 1) { /* one rank: the layers broadcast nothing, so nothing is replicated */
    EXPECT_EQ(tfr, tfb);
    EXPECT_EQ(tbr, tbb);
  } else {
    const double nb = 8 * count, axpy0 = 2.5e-7, axpy1 = 3e-11;
    double       f = (4e-6 + 3e-9 * sizeof(int)) + (2e-6 + 1e-9 * nb) + axpy0 + axpy1 * 2 * nb; /* flag, broadcast, members' unpacking (every rank uses every weight) */
    double       b = (4e-6 + 3e-9 * nb) + axpy0 + axpy1 * 2 * nb + 1.5e-7 + 1e-11 * nb;      /* members' copies, all-reduce, zeroing */
    if (root > 0) {
      f += axpy0 + axpy1 * 2 * 8 * root; /* packing */
      b += axpy0 + axpy1 * 3 * 8 * root; /* adding the sums */
    }
    double e[2] = {f, b};
    MPI_Allreduce(MPI_IN_PLACE, e, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    /* the analytic form (paper-scale configurations): the same terms on a root that holds every weight */
    PetscReal af, ab;
    DDT(DDModelPredictReplicatedWeights(NULL, DD_FLOAT64, Size(), (PetscInt64)count, &af, &ab, NULL));
    EXPECT_NEAR(af, (4e-6 + 3e-9 * sizeof(int)) + (2e-6 + 1e-9 * nb) + 2 * (axpy0 + axpy1 * 2 * nb), 1e-12 * af);
    EXPECT_NEAR(ab, (4e-6 + 3e-9 * nb) + axpy0 + axpy1 * 2 * nb + 1.5e-7 + 1e-11 * nb + axpy0 + axpy1 * 3 * nb, 1e-12 * ab);
    EXPECT_NEAR(tfr - Lr[0], e[0], 1e-12 * tfr);
    EXPECT_NEAR(tbr - Lr[1], (tbb - Lb[1]) + e[1], 1e-12 * tbr); /* the network's own backward work stays */
    EXPECT_LT(Lr[0], Lb[0]);
    std::string text = ViewedText([&](PetscViewer v) { return DDNetViewModel(net, v); });
    EXPECT_NE(text.find("replicated weights (-net_weights replicated; the layers above count no weight broadcast): 1 bucket(s)"), std::string::npos) << text;
    /* the data-parallel mode: the same layers; forward the flag only; backward the root's gradient
       added in and set (5 streams), the members' copies, the all-reduce, the step's flag, the
       copies' update where they live (13 streams: aside, pack, Adam's 7, unpack) or, on the root,
       w copied into its replica (4 streams), zeroing */
    PetscReal tfd, tbd;
    double    Ld[2];
    std::vector<PetscInt64> cd;
    DDT(DDNetSetWeightMode(net, DD_NET_WEIGHTS_DATAPARALLEL));
    layers(Ld, cd);
    EXPECT_EQ(cd, cr);
    DDT(DDNetGetModelTime(net, &tfd, &tbd, &ok));
    const double flag = 4e-6 + 3e-9 * sizeof(int), mirror = count - root;
    double       d[2] = {flag, (4e-6 + 3e-9 * nb) + flag + axpy0 + axpy1 * 2 * nb + 1.5e-7 + 1e-11 * nb};
    if (root > 0) d[1] += axpy0 + axpy1 * 5 * 8 * root + axpy0 + axpy1 * 4 * 8 * root;
    if (mirror > 0) d[1] += axpy0 + axpy1 * 13 * 8 * mirror;
    MPI_Allreduce(MPI_IN_PLACE, d, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    EXPECT_NEAR(tfd - Ld[0], d[0], 1e-12 * tfd);
    EXPECT_NEAR(tbd - Ld[1], (tbb - Lb[1]) + d[1], 1e-12 * tbd);
    EXPECT_LT(tfd, tfr) << "no broadcast after an update";
    /* the analytic form: the slower of the root (holding every weight) and a worker */
    PetscReal adf, adb;
    DDT(DDModelPredictDataParallelWeights(NULL, DD_FLOAT64, Size(), (PetscInt64)count, &adf, &adb, NULL));
    const double common = (4e-6 + 3e-9 * nb) + flag + axpy0 + axpy1 * 2 * nb + 1.5e-7 + 1e-11 * nb;
    EXPECT_NEAR(adf, flag, 1e-12 * adf);
    EXPECT_NEAR(adb, std::max(common + 2 * axpy0 + axpy1 * 9 * nb, common + axpy0 + axpy1 * 13 * nb), 1e-12 * adb);
    text = ViewedText([&](PetscViewer v) { return DDNetViewModel(net, v); });
    EXPECT_NE(text.find("data-parallel weights (-net_weights dataparallel; the layers above count no weight broadcast): 1 bucket(s)"), std::string::npos) << text;
    /* with Adam's own fit in the cache, the copies' update is priced by it (the aside, packing and unpacking stay copies) */
    std::string file2 = SyntheticCache("repl2.txt", "comm 1e-05 1e-09\n" + bp + "bcast-g" + P + " f 2e-06 1e-09\n" + bp + "bcast-g" + P + " b 3e-06 2e-09\n" + bp + "allsum-g" + P + " f 4e-06 3e-09\n" + bp + "allsum-g" + P + " b 4e-06 3e-09\n" + bp + "update-adam f 5e-06 7e-10\n");
    double d2[2] = {flag, (4e-6 + 3e-9 * nb) + flag + axpy0 + axpy1 * 2 * nb + 1.5e-7 + 1e-11 * nb};
    if (root > 0) d2[1] += axpy0 + axpy1 * 5 * 8 * root + axpy0 + axpy1 * 4 * 8 * root;
    if (mirror > 0) d2[1] += axpy0 + axpy1 * 6 * 8 * mirror + 5e-6 + 7e-10 * 8 * mirror;
    MPI_Allreduce(MPI_IN_PLACE, d2, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
    PetscReal tfd2, tbd2;
    layers(Ld, cd);
    DDT(DDNetGetModelTime(net, &tfd2, &tbd2, &ok));
    EXPECT_NEAR(tbd2 - Ld[1], (tbb - Lb[1]) + d2[1], 1e-12 * tbd2);
    DDT(DDModelPredictDataParallelWeights(NULL, DD_FLOAT64, Size(), (PetscInt64)count, &adf, &adb, NULL));
    EXPECT_NEAR(adb, std::max(common + 2 * axpy0 + axpy1 * 9 * nb, common + axpy0 + axpy1 * 6 * nb + 5e-6 + 7e-10 * nb), 1e-12 * adb);
    DropCache(file2);
    file = SyntheticCache("repl.txt", "comm 1e-05 1e-09\n" + bp + "bcast-g" + P + " f 2e-06 1e-09\n" + bp + "bcast-g" + P + " b 3e-06 2e-09\n" + bp + "allsum-g" + P + " f 4e-06 3e-09\n" + bp + "allsum-g" + P + " b 4e-06 3e-09\n");
  }
  DDT(DDNetSetWeightMode(net, DD_NET_WEIGHTS_BROADCAST)); /* and back */
  PetscReal tf2, tb2;
  DDT(DDNetGetModelTime(net, &tf2, &tb2, &ok));
  EXPECT_EQ(tf2, tfb);
  EXPECT_EQ(tb2, tbb);
  DestroyNet(&net, in);
  DropCache(file);
}

/* collectives at a group size the calibration did not measure: Thakur et al.'s formulas, the cheaper of
   the short-message algorithm (binomial tree: lg (alpha + beta n)) and the long-message one (scatter +
   allgather, reduce-scatter + gather: 2 lg alpha + 2 (P-1)/P beta n). A conv on a sample split
   broadcasts its 73,728-byte weights (long-message on 4 or more ranks with these alpha and beta) and
   its 512-byte bias (binomial), forward, and reduces their gradients backward; no halo */
TEST(ModelComm, UncalibratedCollectivesTakeTheCheaperAlgorithm)
{
  std::string file = SyntheticCache("coll.txt", "comm 1e-05 1e-09\n");
  const PetscInt P = Size();
  InputSpec      s;
  s.shape  = {2 * P, 16, 4, 4};
  s.pshape = {P, 1, 1, 1};
  DDTensor       x = MakeInput(s, DD_FLOAT64, 1);
  DDLayer        l;
  const PetscInt k[2] = {3, 3}, pad[2] = {1, 1};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERCONV));
  DDT(DDLayerConvSetOutputChannels(l, 64));
  DDT(DDLayerConvSetKernel(l, 2, k));
  DDT(DDLayerConvSetPadding(l, 2, pad));
  DDT(DDLayerSetUp(l, x));
  PetscReal t[4];
  DDT(DDLayerGetModelTime(l, &t[0], &t[1], &t[2], &t[3], NULL));
  double lg = 0;
  for (PetscInt q = 1; q < P; q *= 2) lg++;
  auto coll = [&](double n) { return std::min(lg * (1e-5 + 1e-9 * n), 2 * lg * 1e-5 + 2.0 * (P - 1) / P * 1e-9 * n); };
  const double w = 8.0 * 64 * 16 * 9, b = 8.0 * 64, e = P > 1 ? coll(w) + coll(b) : 0;
  EXPECT_NEAR(t[1], e, 1e-15 + 1e-12 * e) << "forward: the broadcasts";
  EXPECT_NEAR(t[3], e, 1e-15 + 1e-12 * e) << "backward: the reductions";
  if (P >= 4) EXPECT_LT(coll(w), lg * (1e-5 + 1e-9 * w)) << "the weights take the long-message algorithm";
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  DropCache(file);
}

/* this core's vector lanes for entries of es bytes, as the model counts them (model.cxx, VectorLanes()) */
static double Lanes(size_t es)
{
#if defined(__x86_64__) || defined(__i386__)
  size_t bytes = __builtin_cpu_supports("avx512f") ? 64 : (__builtin_cpu_supports("avx2") ? 32 : 16);
#else
  size_t bytes = 16;
#endif
  return (double)std::max((size_t)1, bytes / es);
}

static PetscInt LocalSize(DDTensor t)
{
  PetscInt m;
  DDT(DDTensorGetLocalSize(t, &m));
  return m;
}

/* conv's fit has terms in its input and output bytes, in the flops of idle vector lanes (few
   channels), in the rows of its column matrix and in the flops of its passes that do not run
   Winograd (cache lines of three and four such terms still read); a network's first layer (no input gradient) is priced by the weight-gradient fit; the
   collectives by their measured fits on P ranks (stored as "<backend>@P"), the halo by alpha-beta:
   all exact under known fits. A cache of an older version is stale: not calibrated, and the view says so */
TEST(ModelWork, GemmTermsFirstLayerAndCollectivesExact)
{
  const char *bname;
  DDT(DDBackendGetDefault(&bname));
  std::string b = std::string(bname) + " float64 ", bp = std::string(bname) + "@" + std::to_string(Size()) + " float64 ", file = Tmp("gemm.txt"), g = "bcast-g" + std::to_string(Size());
  const double c[7] = {3e-6, 2e-11, 5e-11, 7e-11, 1.3e-11, 4e-9, 2.2e-11}, cb[7] = {5e-6, 3e-11, 4e-11, 6e-11, 1.7e-11, 9e-9, 1.9e-11}, cw[7] = {4e-6, 2.5e-11, 1e-11, 2e-11, 0.9e-11, 0, 0};
  auto line = [](const std::string &key, const double *k) {
    char buf[256];
    if (k[6] > 0) snprintf(buf, sizeof(buf), "kernel %s %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", key.c_str(), k[0], k[1], k[2], k[3], k[4], k[5], k[6]);
    else if (k[5] > 0) snprintf(buf, sizeof(buf), "kernel %s %.9g %.9g %.9g %.9g %.9g %.9g\n", key.c_str(), k[0], k[1], k[2], k[3], k[4], k[5]);
    else snprintf(buf, sizeof(buf), "kernel %s %.9g %.9g %.9g %.9g %.9g\n", key.c_str(), k[0], k[1], k[2], k[3], k[4]); /* the three-term form: no column rows' term */
    return std::string(buf);
  };
  WriteFile(file, "ddnn-model-cache 16\nhost " + Host() + "\ncomm 1e-05 1e-09\n" + line(b + "conv f", c) + line(b + "conv b", cb) + line(b + "conv-wgrad b", cw) + "kernel " + bp + g + " f 2e-06 1e-09\n" + "kernel " + bp + g + " b 3e-06 2e-09\n");
  DDT(PetscOptionsSetValue(NULL, "-dd_model_cache", file.c_str()));
  DDT(DDModelReset());
  DDTensor in[2];
  DDNet    net = MainJobNet(in, DD_FLOAT64);
  PetscInt n;
  DDT(DDNetGetNumLayers(net, &n));
  const double V = Lanes(8);
  int          seen = 0;
  DDLayer      prev = NULL;
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    bool first = !std::strcmp(name, "c1"), mid = !std::strcmp(name, "c2"), last = !std::strcmp(name, "out");
    if (first || mid || last) {
      DDTensor  y, *ws;
      PetscInt  np;
      PetscReal t[4], f, fb, by;
      PetscBool ok;
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerGetParameters(l, &np, &ws));
      const PetscInt *wsh;
      DDT(DDTensorGetShape(ws[0], &wsh));
      DDT(DDLayerGetModelWork(l, PETSC_FALSE, &f, &by));
      DDT(DDLayerGetModelWork(l, PETSC_TRUE, &fb, &by));
      EXPECT_EQ(fb, 2 * f);
      DDTensor x = first ? in[0] : NULL;
      if (!first) DDT(DDLayerGetOutput(prev, &x));
      const double I = 8.0 * (double)LocalSize(x), O = 8.0 * (double)LocalSize(y), co = (double)wsh[0], ci = (double)wsh[1];
      const double po = std::ceil(co / V) * V / co, pi = std::ceil(ci / V) * V / ci;
      PetscInt     ys[4], ye[4];
      DDT(DDTensorGetCorners(y, ys, ye));
      const double rows = ye[3] > 0 ? (double)LocalSize(y) / (co * (double)ye[3]) * ci * (double)(wsh[2] * wsh[3]) : 0; /* the column matrix's rows: N Hout Ci K K */
      if (ye[3] > 0) EXPECT_EQ(rows, (double)ye[0] * (double)ye[2] * ci * (double)(wsh[2] * wsh[3]));
      DDT(DDNetGetLayerModelTime(net, i, &t[0], &t[1], &t[2], &t[3], &ok));
      /* the flops of the passes that do not run Winograd: float64 runs /cpu/blas's kernels, Winograd for all three passes of c2 (3x3, 16 -> 16), none for c1 (one input channel) and out (1x1) */
      const double direct = mid ? 0 : f;
      EXPECT_NEAR(t[0], c[0] + c[1] * f + c[2] * I + c[3] * O + c[4] * f * (po - 1) + c[5] * rows + c[6] * direct, 1e-12 * t[0]) << name;
      const double *k = first ? cw : cb; /* the first layer computes no input gradient */
      EXPECT_NEAR(t[2], k[0] + k[1] * fb + k[2] * I + k[3] * O + k[4] * f * (pi + po - 2) + k[5] * rows + k[6] * 2 * direct, 1e-12 * t[2]) << name;
      if (last) EXPECT_GT(c[4] * f * (po - 1), c[1] * f); /* one output channel: most lanes idle */
      if (mid) { /* communication: the halo by alpha-beta, the weight's broadcast and reduction by the fits on P ranks */
        PetscInt64 v[4], w[4], calls, cbytes;
        DDT(DDNetGetLayerModelComm(net, i, PETSC_FALSE, &v[0], &v[1], &v[2], &v[3]));
        DDT(DDNetGetLayerModelComm(net, i, PETSC_TRUE, &w[0], &w[1], &w[2], &w[3]));
        DDT(DDLayerGetModelCollectives(l, PETSC_FALSE, &calls, &cbytes));
        if (Size() == 1) EXPECT_EQ(calls, 0);
        EXPECT_NEAR(t[1], 1e-5 * std::max(v[0], v[2]) + 1e-9 * std::max(v[1], v[3]) + calls * 2e-6 + 1e-9 * cbytes, 1e-15 + 1e-12 * t[1]);
        EXPECT_NEAR(t[3], 1e-5 * std::max(w[0], w[2]) + 1e-9 * std::max(w[1], w[3]) + calls * 3e-6 + 2e-9 * cbytes, 1e-15 + 1e-12 * t[3]);
        if (Size() > 1) EXPECT_GT(calls, 0);
      }
      seen++;
    }
    prev = l;
  }
  EXPECT_EQ(seen, 3);
  /* the same cache with fits of the "conv-pointwise" kind: the 1 x 1 output layer, whose float64 kernel runs on plain
     storage, takes them with the same terms; the 3 x 3 and first layers keep the conv fits */
  PetscReal before[3][4];
  const char *names[3] = {"c1", "c2", "out"};
  PetscInt    idx[3]   = {-1, -1, -1};
  for (PetscInt i = 0; i < n; i++) {
    DDLayer     l;
    const char *name;
    PetscBool   ok;
    DDT(DDNetGetLayerByIndex(net, i, &l, &name));
    for (int k = 0; k < 3; k++)
      if (!std::strcmp(name, names[k])) {
        idx[k] = i;
        DDT(DDNetGetLayerModelTime(net, i, &before[k][0], &before[k][1], &before[k][2], &before[k][3], &ok));
      }
  }
  const double p[7] = {7e-6, 3e-11, 0, 0, 0, 0, 0}, pb[7] = {9e-6, 4e-11, 0, 0, 0, 0, 0}, pw[7] = {8e-6, 3.5e-11, 0, 0, 0, 0, 0};
  WriteFile(file, "ddnn-model-cache 16\nhost " + Host() + "\ncomm 1e-05 1e-09\n" + line(b + "conv f", c) + line(b + "conv b", cb) + line(b + "conv-wgrad b", cw) + line(b + "conv-pointwise f", p) + line(b + "conv-pointwise b", pb) + line(b + "conv-pointwise-wgrad b", pw) + "kernel " + bp + g + " f 2e-06 1e-09\n" + "kernel " + bp + g + " b 3e-06 2e-09\n");
  DDT(DDModelReset());
  for (int k = 0; k < 3; k++) {
    DDLayer   l;
    PetscReal t[4], f, fb, by;
    PetscBool ok;
    bool      pointwise;
    DDT(DDNetGetLayerByIndex(net, idx[k], &l, NULL));
    DDT(ddnn::DDLayerConvPlainPointwise_Private(l, &pointwise));
    EXPECT_EQ(pointwise, k == 2) << names[k];
    DDT(DDNetGetLayerModelTime(net, idx[k], &t[0], &t[1], &t[2], &t[3], &ok));
    EXPECT_TRUE(ok);
    if (k < 2) {
      for (int j = 0; j < 4; j++) EXPECT_EQ(t[j], before[k][j]) << names[k];
      continue;
    }
    DDT(DDLayerGetModelWork(l, PETSC_FALSE, &f, &by));
    DDT(DDLayerGetModelWork(l, PETSC_TRUE, &fb, &by));
    EXPECT_NEAR(t[0], p[0] + p[1] * f, 1e-12 * t[0]);
    EXPECT_NEAR(t[2], pb[0] + pb[1] * fb, 1e-12 * t[2]);
    EXPECT_EQ(t[1], before[k][1]);
    EXPECT_EQ(t[3], before[k][3]);
  }
  DDT(DDNetDestroy(&net));
  DDT(DDTensorDestroy(&in[0]));
  DDT(DDTensorDestroy(&in[1]));
  /* an older cache: stale, not calibrated, and the view names it */
  WriteFile(file, "ddnn-model-cache 1\nhost " + Host() + "\nkernel " + b + "conv f 1 2\n");
  DDT(DDModelReset());
  PetscBool have;
  DDT(DDModelLoad(PETSC_COMM_WORLD, NULL, DD_FLOAT64, &have));
  EXPECT_FALSE(have);
  net = MainJobNet(in, DD_FLOAT64);
  std::string text = ViewedText([&](PetscViewer v) { return DDNetViewModel(net, v); });
  EXPECT_NE(text.find("is stale"), std::string::npos) << text;
  EXPECT_NE(text.find(file), std::string::npos) << text;
  DestroyNet(&net, in);
  DropCache(file);
}

TEST(ModelBadInput, NotSetUp)
{
  DDPrimitive H = MakePrim(DDPRIMITIVEHALO);
  PetscInt64  v;
  DD_EXPECT_ERROR(DDPrimitiveGetCommVolume(H, PETSC_FALSE, &v, NULL, NULL, NULL), PETSC_ERR_ARG_WRONGSTATE, "DDPrimitiveSetUp");
  DDT(DDPrimitiveDestroy(&H));
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  PetscReal t;
  PetscBool ok;
  DD_EXPECT_ERROR(DDLayerGetModelTime(l, &t, NULL, NULL, NULL, &ok), PETSC_ERR_ARG_WRONGSTATE, "Set the layer up");
  DDT(DDLayerDestroy(&l));
}
