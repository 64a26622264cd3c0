/*
  The GPU backend /gpu/cuda (issue 11, first part).

  Host-side logic, run everywhere: the registry knows /gpu/cuda in a CUDA build; without a device,
  asking for it (and for device memory) is an error "no CUDA device"; host-only paths (layers,
  primitives, Vec sharing, HDF5, datasets) refuse device tensors with an error naming the function.

  Device tests (vector operations, pack/unpack, pointwise, GEMM, cuFFT, cuDNN convolution and CUDA
  pooling kernels against the host and reference kernels, device tensors' accessors): they need a CUDA device and are skipped with a
  visible message where cudaGetDeviceCount() finds none. Without DDNN_WITH_CUDA the GPU tests skip
  visibly; the refusal tests still run (they need no device).
*/
#include "gputest.hpp"
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <ddmodel.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

using namespace ddtest;

namespace
{
DDTensor MakeTensor(DDDataType dt, DDMemType mt, DDTensorFormat fmt, PetscInt halo, bool setup = true)
{
  const PetscInt P = Size(), shape[4] = {2, 5, 3 * P + 1, 4};
  const PetscInt pshape[4] = {1, 1, P, 1}, lo[4] = {0, 0, halo, halo}, hi[4] = {0, 0, halo, 0};
  DDPartition    part;
  DDTensor       t;
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &part));
  DDT(DDPartitionSetShape(part, 4, pshape));
  DDT(DDPartitionSetUp(part));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, part));
  DDT(DDPartitionDestroy(&part));
  DDT(DDTensorSetShape(t, 4, shape));
  DDT(DDTensorSetDataType(t, dt));
  DDT(DDTensorSetFormat(t, fmt));
  if (fmt == DD_FORMAT_BLOCKED) DDT(DDTensorSetBlockSize(t, 4)); /* 5 channels: a padded block */
  DDT(DDTensorSetHalo(t, lo, hi));
  DDT(DDTensorSetMemType(t, mt));
  if (setup) DDT(DDTensorSetUp(t));
  return t;
}

/* the bulk (in C order) of a tensor as doubles, on this rank */
std::vector<double> Bulk(DDTensor t)
{
  PetscInt n;
  DDT(DDTensorGetLocalSize(t, &n));
  std::vector<double> v((size_t)n);
  PetscInt            start[DD_MAX_DIM], cnt[DD_MAX_DIM], order;
  DDT(DDTensorGetOrder(t, &order));
  DDT(DDTensorGetCorners(t, start, cnt));
  const void *a;
  DDDataType  dt;
  DDT(DDTensorGetDataType(t, &dt));
  DDT(DDTensorGetArrayRead(t, &a));
  for (PetscInt i = 0; i < n; i++) {
    PetscInt g[DD_MAX_DIM], r = i, off;
    for (PetscInt k = order - 1; k >= 0; k--) {
      g[k] = start[k] + r % cnt[k];
      r /= cnt[k];
    }
    DDT(DDTensorGetLocalOffset(t, g, &off));
    v[(size_t)i] = dt == DD_FLOAT32 ? (double)((const float *)a)[off] : ((const double *)a)[off];
  }
  DDT(DDTensorRestoreArrayRead(t, &a));
  return v;
}
} // namespace

/* ------------------------------------------------------------------------------------------ */
/* host-side logic                                                                             */

TEST(Gpu, RegistryListsCuda)
{
  REQUIRE_CUDA_BUILD();
  DDBackend b = ddnn::DDBackendLookup_Private("/gpu/cuda");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->memtype, DD_MEMTYPE_DEVICE);
  EXPECT_STREQ(b->fallback, ""); /* no silent host fallback on device pointers */
  EXPECT_NE(b->f32.actfwd, nullptr);
  EXPECT_NE(b->f64.actbwd, nullptr);
  EXPECT_NE(b->f32.affinefwd, nullptr);
  EXPECT_NE(b->f64.affinebwdweights, nullptr);
  EXPECT_EQ(b->f32.convcreate != nullptr, (bool)DDNN_WITH_CUDNN); /* cuDNN's, where the build has it */
  /* DDBackendView lists it */
  PetscViewer v;
  char        buf[4096] = {0}, fname[64];
  DDT(PetscSNPrintf(fname, sizeof(fname), "test_13_gpu_view_%d.txt", (int)Rank()));
  DDT(PetscViewerASCIIOpen(PETSC_COMM_SELF, fname, &v));
  DDT(DDBackendView(v));
  DDT(PetscViewerDestroy(&v));
  FILE *f = fopen(fname, "r");
  ASSERT_NE(f, nullptr);
  buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
  fclose(f);
  remove(fname);
  EXPECT_NE(std::strstr(buf, "/gpu/cuda"), nullptr) << buf;
  EXPECT_NE(std::strstr(buf, "device memory"), nullptr) << buf;
  /* a kernel it lacks is an error naming the kind, not a host loop */
  if (DeviceCount() > 0) {
    std::string msg;
    decltype(ddnn::KernelTable<float>::upsamplefwd) up;
    EXPECT_NE(Catch([&]() { return ddnn::DDBackendFind<float>(b, &ddnn::KernelTable<float>::upsamplefwd, ddnn::DD_KERNEL_UPSAMPLE, &up); }, &msg), 0);
    EXPECT_NE(msg.find("Upsample"), std::string::npos) << msg;
  }
}

TEST(Gpu, NoDeviceIsAClearError)
{
  REQUIRE_CUDA_BUILD();
  if (DeviceCount() > 0) GTEST_SKIP() << "this process has a CUDA device: the no-device error cannot be provoked";
  DDBackend   b;
  std::string msg;
  EXPECT_NE(Catch([&]() { return DDBackendGet("/gpu/cuda", &b); }, &msg), 0);
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaGetDeviceCount() found 0"), std::string::npos) << msg;
  if (!Rank()) printf("  (the error here: %s)\n", msg.c_str());
  EXPECT_NE(Catch([&]() { return DDBackendSetDefault("gpu/cuda"); }, &msg), 0);
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
  const char *dflt;
  DDT(DDBackendGetDefault(&dflt));
  EXPECT_EQ(std::string(dflt).rfind("/cpu/", 0), 0u) << dflt; /* unchanged */
  /* a layer asking for it by options */
  DDLayer l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DDT(DDLayerSetOptionsPrefix(l, "g13_"));
  DDT(PetscOptionsSetValue(NULL, "-g13_dd_backend", "/gpu/cuda"));
  EXPECT_NE(Catch([&]() { return DDLayerSetFromOptions(l); }, &msg), 0);
  DDT(PetscOptionsClearValue(NULL, "-g13_dd_backend"));
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
  DDT(DDLayerDestroy(&l));
}

/* a device tensor without a device (or without CUDA) errors at set-up, naming what is missing */
TEST(Gpu, DeviceTensorSetUpWithoutDevice)
{
  if (DDNN_WITH_CUDA && DeviceCount() > 0) GTEST_SKIP() << "this process has a CUDA device: device tensors set up";
  std::string msg;
  for (int byoption = 0; byoption < 2; byoption++) {
    DDTensor t = MakeTensor(DD_FLOAT32, DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 0, false);
    if (byoption) {
      DDT(PetscOptionsSetValue(NULL, "-tensor_memtype", "device"));
      DDT(DDTensorSetFromOptions(t));
      DDT(PetscOptionsClearValue(NULL, "-tensor_memtype"));
    } else DDT(DDTensorSetMemType(t, DD_MEMTYPE_DEVICE));
    EXPECT_NE(Catch([&]() { return DDTensorSetUp(t); }, &msg), 0);
    EXPECT_NE(msg.find(DDNN_WITH_CUDA ? "no CUDA device" : "DDNN_WITH_CUDA"), std::string::npos) << msg;
    DDT(DDTensorDestroy(&t));
  }
  /* the memory type is chosen before set-up */
  DDTensor t = MakeTensor(DD_FLOAT64, DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 1);
  EXPECT_NE(Catch([&]() { return DDTensorSetMemType(t, DD_MEMTYPE_DEVICE); }, &msg), 0);
  EXPECT_NE(msg.find("before DDTensorSetUp"), std::string::npos) << msg;
  DDT(DDTensorSetMemType(t, DD_MEMTYPE_HOST)); /* the same type: fine */
  EXPECT_NE(Catch([&]() { return DDTensorSetMemType(t, (DDMemType)7); }, &msg), 0);
  DDT(DDTensorDestroy(&t));
}

/*
  Host-only paths refuse device tensors with an error naming the function. The device tensor is a
  host tensor marked as device memory (white box: the checks look at the memory type before any
  access), so that this runs without a device.
*/
TEST(Gpu, HostOnlyPathsRefuseDeviceTensors)
{
  std::string msg;
  auto        refused = [&](const char fn[], const std::function<PetscErrorCode()> &f) {
    EXPECT_NE(Catch(f, &msg), 0) << fn;
    EXPECT_NE(msg.find(std::string(fn) + "() does not support device tensors yet"), std::string::npos) << fn << ": " << msg;
  };
  DDTensor x = MakeTensor(DD_FLOAT64, DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 0), y;
  DDT(DDTensorDuplicate(x, &y));
  /* layers: a type without device kernels (spectral: the fft primitive is host-only) refuses device tensors; a set-up layer takes tensors in its set-up memory only */
  DDLayer        l;
  const PetscInt modes[2] = {1, 1};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERSPECTRAL));
  DDT(DDLayerSpectralSetModes(l, 2, modes));
  DDT(DDLayerSpectralSetOutputChannels(l, 5));
  DDT(DDLayerSetUp(l, x)); /* on the host */
  DDT(DDTensorDestroy(&y));
  DDT(DDLayerCreateOutput(l, &y));
  DDT(DDLayerForward(l, x, y));
  x->memtype = DD_MEMTYPE_DEVICE;
  refused("DDLayerSetUp", [&]() { return DDLayerSetUp(l, x); });
  auto wrongmemory = [&](const char fn[], const std::function<PetscErrorCode()> &f) {
    EXPECT_NE(Catch(f, &msg), 0) << fn;
    EXPECT_NE(msg.find(std::string(fn) + ": the spectral layer was set up on tensors in host memory; this"), std::string::npos) << fn << ": " << msg;
  };
  wrongmemory("DDLayerForward", [&]() { return DDLayerForward(l, x, y); });
  x->memtype = DD_MEMTYPE_HOST;
  DDT(DDLayerSetUp(l, x));
  DDT(DDLayerForward(l, x, y));
  y->memtype = DD_MEMTYPE_DEVICE;
  wrongmemory("DDLayerBackward", [&]() { return DDLayerBackward(l, y, x); });
  y->memtype = DD_MEMTYPE_HOST;
  x->memtype = DD_MEMTYPE_DEVICE;
  wrongmemory("DDLayerBackward", [&]() { return DDLayerBackward(l, y, x); });
  /* primitives: the exchange-based ones take device tensors, both in one memory, the memory they were set up for */
  x->memtype = DD_MEMTYPE_HOST;
  DDT(DDTensorDestroy(&y));
  DDT(DDTensorDuplicate(x, &y));
  x->memtype = DD_MEMTYPE_DEVICE;
  DDPrimitive h;
  DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &h));
  DDT(DDPrimitiveSetType(h, DDPRIMITIVEREPARTITION));
  EXPECT_NE(Catch([&]() { return DDPrimitiveSetUp(h, x, y); }, &msg), 0);
  EXPECT_NE(msg.find("input is in device memory and its output in host memory"), std::string::npos) << msg;
  x->memtype = DD_MEMTYPE_HOST;
  DDT(DDPrimitiveSetUp(h, x, y));
  y->memtype = DD_MEMTYPE_DEVICE;
  for (int adj = 0; adj < 2; adj++) {
    EXPECT_NE(Catch([&]() { return adj ? DDPrimitiveApplyAdjoint(h, y, x) : DDPrimitiveApply(h, x, y); }, &msg), 0);
    EXPECT_NE(msg.find("was set up for tensors in host memory; these are in"), std::string::npos) << msg;
  }
  /* an optimizer takes parameters in one memory */
  {
    DDOptimizer o;
    DDTensor    ps[2] = {x, y}, gs[2];
    y->memtype = DD_MEMTYPE_HOST; /* x on the host, y (and its gradient) marked as on the device */
    for (int i = 0; i < 2; i++) DDT(DDTensorDuplicate(ps[i], &gs[i]));
    y->memtype = gs[1]->memtype = DD_MEMTYPE_DEVICE;
    DDT(DDOptimizerCreate(PETSC_COMM_WORLD, &o));
    EXPECT_NE(Catch([&]() { return DDOptimizerSetUp(o, 2, ps, gs); }, &msg), 0);
    EXPECT_NE(msg.find("parameter 1 or its gradient is in device memory, parameter 0 in host memory"), std::string::npos) << msg;
    gs[1]->memtype = DD_MEMTYPE_HOST;
    DDT(DDOptimizerDestroy(&o));
    for (int i = 0; i < 2; i++) DDT(DDTensorDestroy(&gs[i]));
  }
  /* Vec sharing and HDF5 */
  Vec v;
  refused("DDTensorCreateVec", [&]() { return DDTensorCreateVec(y, &v); });
  DDT(DDTensorCreateVec(x, &v));
  refused("DDTensorPlaceVec", [&]() { return DDTensorPlaceVec(y, v); });
  DDT(VecDestroy(&v));
  y->memtype = DD_MEMTYPE_HOST;
  DDT(DDPrimitiveDestroy(&h));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
}

/* a tensor's memory type is the same on every rank: primitives and layers plan alike from it (checked at set-up, before any allocation: no device needed) */
TEST(Gpu, MemoryTypeMustAgreeAcrossRanks)
{
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::string msg;
  DDTensor    t = MakeTensor(DD_FLOAT64, Rank() == 1 ? DD_MEMTYPE_DEVICE : DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 0, false);
  EXPECT_NE(Catch([&]() { return DDTensorSetUp(t); }, &msg), 0);
  EXPECT_NE(msg.find("memory type"), std::string::npos) << msg;
  EXPECT_NE(msg.find("differs between ranks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("device memory"), std::string::npos) << msg;
  DDT(DDTensorDestroy(&t));
}

/* ------------------------------------------------------------------------------------------ */
/* device tests (skipped without a device: never run on this project's CI)                     */

/* set, scale, copy (across formats and halos) and axpby of device tensors against host tensors */
TEST(Gpu, VectorOpsMatchHost)
{
  REQUIRE_DEVICE();
  const DDTensorFormat fmts[3] = {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED};
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    const double tol = dt == DD_FLOAT32 ? 1e-6 : 1e-14;
    for (int fx = 0; fx < 3; fx++)
      for (int fy = 0; fy < 3; fy++) {
        const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmts[fx]] + " -> " + DDTensorFormats[fmts[fy]];
        DDTensor          hx = MakeTensor(dt, DD_MEMTYPE_HOST, fmts[fx], 1), hy = MakeTensor(dt, DD_MEMTYPE_HOST, fmts[fy], 2);
        DDTensor          gx = MakeTensor(dt, DD_MEMTYPE_DEVICE, fmts[fx], 1), gy = MakeTensor(dt, DD_MEMTYPE_DEVICE, fmts[fy], 2);
        DDMemType         mt;
        DDT(DDTensorGetMemType(gx, &mt));
        EXPECT_EQ(mt, DD_MEMTYPE_DEVICE);
        DDT(DDTensorSetRandomGlobal(hx, 11, -1, 1));
        DDT(DDTensorSetRandomGlobal(gx, 11, -1, 1)); /* through the host copy */
        DDT(DDTensorSetRandomGlobal(hy, 12, -1, 1));
        DDT(DDTensorSetRandomGlobal(gy, 12, -1, 1));
        EXPECT_EQ(Bulk(hx), Bulk(gx)) << what;
        DDT(DDTensorAXPBY(hy, 0.75, -1.25, hx));
        DDT(DDTensorAXPBY(gy, 0.75, -1.25, gx));
        auto a = Bulk(hy), b = Bulk(gy);
        for (size_t i = 0; i < a.size(); i++) EXPECT_NEAR(a[i], b[i], tol) << what << " axpby entry " << i;
        DDT(DDTensorAXPY(hy, 0.5, hx));
        DDT(DDTensorAXPY(gy, 0.5, gx));
        a = Bulk(hy), b = Bulk(gy);
        for (size_t i = 0; i < a.size(); i++) EXPECT_NEAR(a[i], b[i], tol) << what << " axpy entry " << i;
        DDT(DDTensorScale(gx, -3));
        DDT(DDTensorScale(hx, -3));
        EXPECT_EQ(Bulk(hx), Bulk(gx)) << what << " scale";
        DDT(DDTensorCopy(gx, gy));
        EXPECT_EQ(Bulk(hx), Bulk(gy)) << what << " copy";
        DDT(DDTensorSet(gy, 0.25));
        for (double e : Bulk(gy)) EXPECT_EQ(e, 0.25) << what << " set";
        /* the halo is left alone by the bulk operations: zero from set-up */
        const void *h;
        PetscInt    ns;
        DDT(DDTensorGetLocalStorageSize(gy, &ns));
        DDT(DDTensorGetArrayRead(gy, &h));
        PetscInt nonzero = 0;
        for (PetscInt i = 0; i < ns; i++) nonzero += (dt == DD_FLOAT32 ? ((const float *)h)[i] : ((const double *)h)[i]) != 0;
        DDT(DDTensorRestoreArrayRead(gy, &h));
        PetscInt nb;
        DDT(DDTensorGetLocalSize(gy, &nb));
        EXPECT_EQ(nonzero, nb) << what;
        PetscReal n1, n2;
        DDT(DDTensorNorm(hx, NORM_2, &n1));
        DDT(DDTensorNorm(gx, NORM_2, &n2));
        EXPECT_NEAR(n1, n2, 1e-12 * n1) << what; /* the device reduces in another (deterministic) order than the host loop */
        for (DDTensor *t : {&hx, &hy, &gx, &gy}) DDT(DDTensorDestroy(t));
      }
  }
}

/* GetArray copies to the host and back; GetArrayAndMemType gives the device pointer */
TEST(Gpu, DeviceTensorAccessors)
{
  REQUIRE_DEVICE();
  DDTensor g = MakeTensor(DD_FLOAT64, DD_MEMTYPE_DEVICE, DD_FORMAT_PLAIN, 1), c;
  void    *a, *d;
  PetscInt ns;
  DDT(DDTensorGetLocalStorageSize(g, &ns));
  DDT(DDTensorGetArray(g, &a));
  for (PetscInt i = 0; i < ns; i++) ((double *)a)[i] = (double)i;
  DDT(DDTensorRestoreArray(g, &a));
  DDMemType mt;
  DDT(DDTensorGetArrayAndMemType(g, &d, &mt));
  EXPECT_EQ(mt, DD_MEMTYPE_DEVICE);
  DDT(DDTensorRestoreArrayAndMemType(g, &d));
  DDT(DDTensorDuplicate(g, &c)); /* a duplicate lives on the device too */
  DDT(DDTensorGetMemType(c, &mt));
  EXPECT_EQ(mt, DD_MEMTYPE_DEVICE);
  DDT(DDTensorCopy(g, c));
  const void *r;
  DDT(DDTensorGetArrayRead(g, &r));
  EXPECT_NE(r, d);
  for (PetscInt i = 0; i < ns; i++) EXPECT_EQ(((const double *)r)[i], (double)i);
  DDT(DDTensorRestoreArrayRead(g, &r));
  DDT(DDTensorZeroHalo(g));
  PetscReal diff;
  DDT(DDTensorMaxAbsDiff(g, c, &diff));
  EXPECT_EQ(diff, 0);
  DDT(DDTensorZeroEntries(g));
  DDT(DDTensorNorm(g, NORM_1, &diff));
  EXPECT_EQ(diff, 0);
  DDT(DDTensorDestroy(&c));
  DDT(DDTensorDestroy(&g));
}

/* pack/unpack(+add) of runs on the device against the host's */
TEST(Gpu, PackUnpackMatchHost)
{
  REQUIRE_DEVICE();
  DDBackend b = ddnn::DDBackendLookup_Private("/gpu/cuda");
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    const size_t es = dt == DD_FLOAT32 ? 4 : 8;
    for (int single = 0; single < 2; single++) {
      const PetscInt        n = 1000;
      std::vector<PetscInt> off, len;
      std::mt19937          gen(single + 3);
      PetscInt              total = 0;
      for (PetscInt o = 0; o < n - 20;) { /* disjoint runs (single entries: a gather) */
        PetscInt l = single ? 1 : 1 + (PetscInt)(gen() % 13);
        off.push_back(o);
        len.push_back(l);
        total += l;
        o += l + (PetscInt)(gen() % 4);
      }
      std::vector<char> src(n * es), hbuf(total * es), gbuf(total * es), hdst(n * es, 0), gdst(n * es);
      for (PetscInt i = 0; i < n; i++) {
        if (dt == DD_FLOAT32) ((float *)src.data())[i] = (float)i * 0.5f;
        else ((double *)src.data())[i] = i * 0.25;
      }
      void *dsrc, *dbuf, *ddst;
      DDT(b->mem.malloc(n * es, &dsrc));
      DDT(b->mem.malloc(total * es, &dbuf));
      DDT(b->mem.malloc(n * es, &ddst));
      DDT(b->mem.copy(dsrc, src.data(), n * es));
      DDT(ddnn::HostVecOps.pack(dt, off.size(), off.data(), len.data(), total, src.data(), hbuf.data()));
      DDT(b->vec.pack(dt, off.size(), off.data(), len.data(), total, dsrc, dbuf));
      DDT(b->mem.copy(gbuf.data(), dbuf, total * es));
      EXPECT_EQ(hbuf, gbuf) << DDDataTypes[dt] << (single ? " gather" : " runs");
      for (PetscBool add : {PETSC_FALSE, PETSC_TRUE}) {
        DDT(ddnn::HostVecOps.unpack(dt, off.size(), off.data(), len.data(), total, hbuf.data(), hdst.data(), add));
        DDT(b->vec.unpack(dt, off.size(), off.data(), len.data(), total, dbuf, ddst, add));
        DDT(b->mem.copy(gdst.data(), ddst, n * es));
        EXPECT_EQ(hdst, gdst) << DDDataTypes[dt] << (add ? " unpack+add" : " unpack");
      }
      DDT(b->mem.free(dsrc));
      DDT(b->mem.free(dbuf));
      DDT(b->mem.free(ddst));
    }
  }
}

template <class T>
static void PointwiseCase(DDBackend g, DDBackend ref)
{
  std::vector<T> x = {(T)-2.5, (T)-1, (T)-0.0, (T)0, (T)1e-3, (T)0.7, (T)3, (T)-30, (T)30, std::numeric_limits<T>::quiet_NaN()};
  for (int i = 0; i < 300; i++) x.push_back((T)(std::sin(0.37 * i) * 6));
  const size_t n = x.size(), bytes = n * sizeof(T);
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-14;
  std::vector<T> dy(n), hy(n), gy(n), hdx(n), gdx(n);
  for (size_t i = 0; i < n; i++) dy[i] = (T)std::cos(0.11 * i);
  void *dx_, *dy_, *dout;
  DDT(g->mem.malloc(bytes, &dx_));
  DDT(g->mem.malloc(bytes, &dy_));
  DDT(g->mem.malloc(bytes, &dout));
  DDT(g->mem.copy(dx_, x.data(), bytes));
  DDT(g->mem.copy(dy_, dy.data(), bytes));
  ddnn::ActParams<T> prm;
  prm.slope = (T)0.1;
  for (int a = DD_ACT_RELU; a <= DD_ACT_IDENTITY; a++) {
    const DDActivationType type = (DDActivationType)a;
    ddnn::Table<T>(ref).actfwd(type, prm, x.data(), hy.data(), (PetscInt)n);
    ddnn::Table<T>(g).actfwd(type, prm, (const T *)dx_, (T *)dout, (PetscInt)n);
    DDT(g->mem.copy(gy.data(), dout, bytes));
    ddnn::Table<T>(ref).actbwd(type, prm, x.data(), dy.data(), hdx.data(), (PetscInt)n);
    ddnn::Table<T>(g).actbwd(type, prm, (const T *)dx_, (const T *)dy_, (T *)dout, (PetscInt)n);
    DDT(g->mem.copy(gdx.data(), dout, bytes));
    for (size_t i = 0; i < n; i++) {
      EXPECT_EQ(std::isnan(hy[i]), std::isnan(gy[i])) << DDActivationTypes[a] << " forward NaN at " << i;
      EXPECT_EQ(std::isnan(hdx[i]), std::isnan(gdx[i])) << DDActivationTypes[a] << " backward NaN at " << i;
      if (!std::isnan(hy[i])) EXPECT_NEAR(hy[i], gy[i], tol * (1 + std::abs(hy[i]))) << DDActivationTypes[a] << " forward at " << i;
      if (!std::isnan(hdx[i])) EXPECT_NEAR(hdx[i], gdx[i], tol * (1 + std::abs(hdx[i]))) << DDActivationTypes[a] << " backward at " << i;
      if (type == DD_ACT_RELU && x[i] == 0) EXPECT_EQ(std::signbit(hy[i]), std::signbit(gy[i])) << "relu(-0)";
    }
  }
  CHECK_PENDING();
  DDT(g->mem.free(dx_));
  DDT(g->mem.free(dy_));
  DDT(g->mem.free(dout));
}

TEST(Gpu, PointwiseMatchesHost)
{
  REQUIRE_DEVICE();
  DDBackend g = ddnn::DDBackendLookup_Private("/gpu/cuda"), ref = ddnn::DDBackendLookup_Private("/cpu/ref");
  PointwiseCase<float>(g, ref);
  PointwiseCase<double>(g, ref);
}

template <class T>
static void GemmCase(DDBackend g, DDBackend ref, bool bias)
{
  ddnn::AffineGeom geo;
  geo.N = 7, geo.Fi = 13, geo.Fo = 5;
  const PetscInt ldx = 16, ldw = 15, ldy = 9; /* leading dimensions wider than the rows */
  const double   tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  std::vector<T> x(geo.N * ldx), w(geo.Fo * ldw), b(geo.Fo), y(geo.N * ldy, (T)7), dy(geo.N * ldy), dx(geo.N * ldx, (T)7), dw(geo.Fo * ldw), db(geo.Fo);
  for (size_t i = 0; i < x.size(); i++) x[i] = (T)std::sin(0.3 * i);
  for (size_t i = 0; i < w.size(); i++) w[i] = (T)std::cos(0.7 * i);
  for (size_t i = 0; i < b.size(); i++) b[i] = (T)(0.1 * i - 0.2);
  for (size_t i = 0; i < dy.size(); i++) dy[i] = (T)std::sin(1.1 * i + 0.5);
  for (size_t i = 0; i < dw.size(); i++) dw[i] = (T)(0.01 * i);
  for (size_t i = 0; i < db.size(); i++) db[i] = (T)(1 - 0.5 * i);
  auto up = [&](const std::vector<T> &h) {
    void *d;
    DDT(g->mem.malloc(h.size() * sizeof(T), &d));
    DDT(g->mem.copy(d, h.data(), h.size() * sizeof(T)));
    return (T *)d;
  };
  auto down = [&](const T *d, size_t n) {
    std::vector<T> h(n);
    DDT(g->mem.copy(h.data(), d, n * sizeof(T)));
    return h;
  };
  T *gx = up(x), *gw = up(w), *gb = up(b), *gy = up(y), *gdy = up(dy), *gdx = up(dx), *gdw = up(dw), *gdb = up(db);
  ddnn::Table<T>(ref).affinefwd(geo, x.data(), ldx, w.data(), ldw, bias ? b.data() : nullptr, y.data(), ldy);
  ddnn::Table<T>(g).affinefwd(geo, gx, ldx, gw, ldw, bias ? gb : nullptr, gy, ldy);
  ddnn::Table<T>(ref).affinebwddata(geo, dy.data(), ldy, w.data(), ldw, dx.data(), ldx);
  ddnn::Table<T>(g).affinebwddata(geo, gdy, ldy, gw, ldw, gdx, ldx);
  ddnn::Table<T>(ref).affinebwdweights(geo, x.data(), ldx, dy.data(), ldy, dw.data(), ldw, bias ? db.data() : nullptr);
  ddnn::Table<T>(g).affinebwdweights(geo, gx, ldx, gdy, ldy, gdw, ldw, bias ? gdb : nullptr);
  CHECK_PENDING();
  auto cmp = [&](const std::vector<T> &h, const T *d, PetscInt rows, PetscInt cols, PetscInt ld, const char *what) {
    auto gh = down(d, h.size());
    for (PetscInt r = 0; r < rows; r++)
      for (PetscInt c = 0; c < ld; c++) {
        const size_t i = (size_t)(r * ld + c);
        if (c < cols) EXPECT_NEAR(h[i], gh[i], tol * (1 + std::abs(h[i]))) << what << " (" << r << ", " << c << ")";
        else EXPECT_EQ(h[i], gh[i]) << what << ": padding (" << r << ", " << c << ") was written";
      }
  };
  cmp(y, gy, geo.N, geo.Fo, ldy, "Y");
  cmp(dx, gdx, geo.N, geo.Fi, ldx, "dX");
  cmp(dw, gdw, geo.Fo, geo.Fi, ldw, "dW");
  cmp(db, gdb, 1, geo.Fo, geo.Fo, "db");
  for (T *p : {gx, gw, gb, gy, gdy, gdx, gdw, gdb}) DDT(g->mem.free(p));
}

TEST(Gpu, GemmMatchesReference)
{
  REQUIRE_DEVICE();
  DDBackend g = ddnn::DDBackendLookup_Private("/gpu/cuda"), ref = ddnn::DDBackendLookup_Private("/cpu/ref");
  for (bool bias : {false, true}) {
    GemmCase<float>(g, ref, bias);
    GemmCase<double>(g, ref, bias);
  }
}

/* layers do not run on the GPU backend yet: a clear error at set-up */
TEST(Gpu, LayersRefuseTheDeviceBackend)
{
  REQUIRE_DEVICE();
  DDTensor    x = MakeTensor(DD_FLOAT32, DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 0);
  DDLayer     l;
  std::string msg;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERACTIVATION));
  DDT(DDLayerSetBackend(l, "/gpu/cuda"));
  EXPECT_NE(Catch([&]() { return DDLayerSetUp(l, x); }, &msg), 0);
  EXPECT_NE(msg.find("computes in device memory, but the input is a host tensor"), std::string::npos) << msg;
  /* a device tensor with a host backend, and an activation without a device kernel */
  DDTensor xd = MakeTensor(DD_FLOAT32, DD_MEMTYPE_DEVICE, DD_FORMAT_PLAIN, 0);
  DDT(DDLayerSetBackend(l, "/cpu/ref"));
  EXPECT_NE(Catch([&]() { return DDLayerSetUp(l, xd); }, &msg), 0);
  EXPECT_NE(msg.find("the input is in device memory, but backend /cpu/ref computes in host memory"), std::string::npos) << msg;
  DDT(DDLayerSetBackend(l, "/gpu/cuda"));
  DDT(DDLayerActivationSetType(l, DD_ACT_SILU));
  EXPECT_NE(Catch([&]() { return DDLayerSetUp(l, xd); }, &msg), 0);
  EXPECT_NE(msg.find("silu has no device kernel yet"), std::string::npos) << msg;
  DDT(DDTensorDestroy(&xd));
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}

/* the FFT kernel of /gpu/cuda is in the table (host-side: no device needed) */
TEST(Gpu, FftKernelRegistered)
{
  REQUIRE_CUDA_BUILD();
  DDBackend b = ddnn::DDBackendLookup_Private("/gpu/cuda");
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->f32.fftcreate, nullptr);
  EXPECT_NE(b->f64.fftcreate, nullptr);
}

/*
  cuFFT through the backend tier: the /gpu/cuda FftKernel of one stage of the fft primitive
  (real r2c with truncation, complex with the two corner blocks; the complex plans batched over B
  = 1, over B with A executions, over A with B executions) equals the FFTW kernel of /cpu/ref
  (itself checked against a direct DFT in test_14_spectral), forward and adjoint
*/
template <class T>
static void FftCase(DDBackend g, DDBackend ref, bool real, PetscInt A, PetscInt L, PetscInt m, PetscInt B)
{
  ddnn::FftKernelSpec spec;
  spec.real = real, spec.A = A, spec.L = L, spec.m = m, spec.B = B, spec.K = real ? m : 2 * m;
  const PetscInt na = A * L * B * (real ? 1 : 2), nb = A * spec.K * B * 2;
  const double   tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  const DDDataType dt = sizeof(T) == 4 ? DD_FLOAT32 : DD_FLOAT64;
  std::vector<T> a(na), b(nb), ha(na), hb(nb);
  for (PetscInt i = 0; i < na; i++) a[i] = (T)std::sin(0.37 * i + 0.1);
  for (PetscInt i = 0; i < nb; i++) b[i] = (T)std::cos(0.53 * i - 0.2);
  void *da, *db;
  DDT(g->mem.malloc(na * sizeof(T), &da));
  DDT(g->mem.malloc(nb * sizeof(T), &db));
  std::unique_ptr<ddnn::FftKernel> kg, kh;
  DDBackend                        wg, wh;
  ddnn::FftKernelSpec              hspec = spec;
  spec.a = da, spec.b = db, hspec.a = ha.data(), hspec.b = hb.data();
  DDT(ddnn::DDBackendFftCreate(g, dt, spec, &kg, &wg));
  DDT(ddnn::DDBackendFftCreate(ref, dt, hspec, &kh, &wh));
  EXPECT_STREQ(wg->name, "/gpu/cuda");
  EXPECT_STREQ(kg->Name(), "cufft");
  double scale = 0;
  for (PetscInt i = 0; i < na; i++) scale += std::abs((double)a[i]);
  /* forward */
  DDT(g->mem.copy(da, a.data(), na * sizeof(T)));
  DDT(kg->Forward(da, db));
  DDT(kh->Forward(a.data(), hb.data()));
  std::vector<T> gb(nb), ga(na);
  DDT(g->mem.copy(gb.data(), db, nb * sizeof(T)));
  for (PetscInt i = 0; i < nb; i++) EXPECT_NEAR(gb[i], hb[i], tol * scale) << (real ? "real" : "complex") << " forward, L " << L << " B " << B << " entry " << i;
  /* adjoint */
  DDT(g->mem.copy(db, b.data(), nb * sizeof(T)));
  DDT(kg->Adjoint(db, da));
  DDT(kh->Adjoint(b.data(), ha.data()));
  DDT(g->mem.copy(ga.data(), da, na * sizeof(T)));
  DDT(g->mem.copy(gb.data(), db, nb * sizeof(T)));
  for (PetscInt i = 0; i < nb; i++) EXPECT_EQ(gb[i], b[i]) << "Adjoint changed b";
  scale = 0;
  for (PetscInt i = 0; i < nb; i++) scale += std::abs((double)b[i]);
  for (PetscInt i = 0; i < na; i++) EXPECT_NEAR(ga[i], ha[i], tol * scale) << (real ? "real" : "complex") << " adjoint, L " << L << " B " << B << " entry " << i;
  CHECK_PENDING();
  kg.reset();
  DDT(g->mem.free(da));
  DDT(g->mem.free(db));
}

TEST(Gpu, FftMatchesFftw)
{
  REQUIRE_DEVICE();
  DDBackend g = ddnn::DDBackendLookup_Private("/gpu/cuda"), ref = ddnn::DDBackendLookup_Private("/cpu/ref");
  for (int dbl = 0; dbl < 2; dbl++) {
    auto run = [&](bool real, PetscInt A, PetscInt L, PetscInt m, PetscInt B) {
      if (dbl) FftCase<double>(g, ref, real, A, L, m, B);
      else FftCase<float>(g, ref, real, A, L, m, B);
    };
    run(true, 5, 12, 4, 1);  /* even length */
    run(true, 3, 9, 5, 1);   /* odd length, every mode */
    run(true, 2, 8, 5, 1);   /* the Nyquist mode kept */
    run(false, 3, 10, 3, 1); /* one batched plan */
    run(false, 2, 8, 2, 5);  /* A executions of B interleaved transforms */
    run(false, 6, 8, 3, 2);  /* B executions of A transforms */
  }
}

/* ------------------------------------------------------------------------------------------ */
/* convolutions on cuDNN                                                                       */

namespace
{
/* a tensor of this rank alone, with a halo of h entries on each side of every dimension from the third on */
DDTensor Local(DDDataType dt, DDMemType mt, DDTensorFormat fmt, const std::vector<PetscInt> &shape, PetscInt h)
{
  std::vector<PetscInt> ones(shape.size(), 1), lo(shape.size(), h);
  DDPartition           part;
  DDTensor              t;
  for (size_t j = 0; j < lo.size() && j < 2; j++) lo[j] = 0;
  DDT(DDPartitionCreate(PETSC_COMM_SELF, &part));
  DDT(DDPartitionSetShape(part, (PetscInt)shape.size(), ones.data()));
  DDT(DDPartitionSetUp(part));
  DDT(DDTensorCreate(PETSC_COMM_SELF, &t));
  DDT(DDTensorSetPartition(t, part));
  DDT(DDPartitionDestroy(&part));
  DDT(DDTensorSetShape(t, (PetscInt)shape.size(), shape.data()));
  DDT(DDTensorSetDataType(t, dt));
  DDT(DDTensorSetFormat(t, fmt));
  DDT(DDTensorSetHalo(t, lo.data(), lo.data()));
  DDT(DDTensorSetMemType(t, mt));
  DDT(DDTensorSetUp(t));
  return t;
}
/* an activation (N, C, sp[0..D)) with a halo of h on its spatial dimensions */
DDTensor LocalTensor(DDDataType dt, DDMemType mt, DDTensorFormat fmt, PetscInt N, PetscInt C, PetscInt D, const PetscInt sp[], PetscInt h)
{
  std::vector<PetscInt> shape = {N, C};
  shape.insert(shape.end(), sp, sp + D);
  return Local(dt, mt, fmt, shape, h);
}
/* a parameter tensor (C order, no halo) */
DDTensor LocalParam(DDDataType dt, DDMemType mt, const std::vector<PetscInt> &shape) { return Local(dt, mt, DD_FORMAT_PLAIN, shape, 0); }
/* the whole local storage (halo included) as doubles */
std::vector<double> Storage(DDTensor t)
{
  PetscInt    n;
  const void *a;
  DDDataType  dt;
  DDT(DDTensorGetLocalStorageSize(t, &n));
  DDT(DDTensorGetDataType(t, &dt));
  DDT(DDTensorGetArrayRead(t, &a));
  std::vector<double> v((size_t)n);
  for (PetscInt i = 0; i < n; i++) v[(size_t)i] = dt == DD_FLOAT32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
  DDT(DDTensorRestoreArrayRead(t, &a));
  return v;
}

struct ConvCase {
  const char *name;
  bool        transposed;
  PetscInt    D, N, Ci, Co, groups;
  PetscInt    in[3]; /* the convolution's output box, or the transposed convolution's input window */
  PetscInt    k[3], s[3], d[3];
  PetscInt    pad[3], opad[3]; /* transposed only: PyTorch's padding and output_padding */
  PetscInt    hx, hy;          /* halos of the window's and the box's tensors (strided views) */
};

/*
  One case on one format and precision: the cuDNN kernel on device tensors against the reference
  loops' kernel (/cpu/ref) on host tensors holding the same values, through the same ConvKernel
  interface: Forward overwrites the box (halo left alone), BackwardData adds onto the whole window,
  BackwardWeights overwrites dw and db (the device's start as garbage).
*/
void ConvCaseRun(const ConvCase &c, DDDataType dt, DDTensorFormat fmt, bool dgradfwd)
{
  const std::string what = std::string(c.name) + " " + DDDataTypes[dt] + " " + DDTensorFormats[fmt] + (dgradfwd ? " (backward-data as a forward)" : "");
  ddnn::ConvTGeom   g;
  g.D = c.D, g.N = c.N, g.Ci = c.Ci, g.Co = c.Co, g.groups = c.groups;
  PetscInt xsp[3], ysp[3];
  for (PetscInt j = 0; j < c.D; j++) {
    const PetscInt q = 3 - c.D + j, ext = (c.k[j] - 1) * c.d[j] + 1;
    g.k[q] = c.k[j], g.s[q] = c.s[j], g.d[q] = c.d[j];
    if (!c.transposed) { /* the window: exactly what the box reads */
      ysp[j] = c.in[j];
      xsp[j] = (c.in[j] - 1) * c.s[j] + ext;
    } else {
      xsp[j]  = c.in[j];
      g.pl[q] = c.pad[j], g.pr[q] = c.pad[j] - c.opad[j];
      ysp[j]  = (c.in[j] - 1) * c.s[j] - g.pl[q] - g.pr[q] + ext;
    }
    g.in[q] = xsp[j], g.out[q] = ysp[j];
  }
  std::vector<PetscInt> wshape = {c.transposed ? c.Ci : c.Co, (c.transposed ? c.Co : c.Ci) / c.groups};
  for (PetscInt j = 0; j < c.D; j++) wshape.push_back(c.k[j]);
  DDTensor t[2][7]; /* [host, device] x, y, w, b, dx, dw, db */
  for (int m = 0; m < 2; m++) {
    const DDMemType mt = m ? DD_MEMTYPE_DEVICE : DD_MEMTYPE_HOST;
    t[m][0]            = LocalTensor(dt, mt, fmt, c.N, c.Ci, c.D, xsp, c.hx);
    t[m][1]            = LocalTensor(dt, mt, fmt, c.N, c.Co, c.D, ysp, c.hy);
    t[m][2]            = LocalParam(dt, mt, wshape);
    t[m][3]            = LocalParam(dt, mt, {c.Co});
    DDT(DDTensorDuplicate(t[m][0], &t[m][4]));
    DDT(DDTensorDuplicate(t[m][2], &t[m][5]));
    DDT(DDTensorDuplicate(t[m][3], &t[m][6]));
    for (int i = 0; i < 5; i++) DDT(DDTensorSetRandomGlobal(t[m][i], 100 + i, -1, 1));
    DDT(DDTensorSetRandomGlobal(t[m][5], m ? 7 : 0, m ? -9 : 0, m ? 9 : 0)); /* the device's gradients start as garbage */
    DDT(DDTensorSetRandomGlobal(t[m][6], m ? 8 : 0, m ? -9 : 0, m ? 9 : 0));
  }
  std::unique_ptr<ddnn::ConvKernel> k[2];
  for (int m = 0; m < 2; m++) {
    ddnn::ConvKernelSpec spec;
    spec.g          = g;
    spec.transposed = c.transposed;
    spec.bias       = true;
    spec.x.t = t[m][0], spec.y.t = t[m][1];
    for (int j = 0; j < 2 + (int)c.D; j++) spec.x.org[j] = j < 2 ? 0 : c.hx, spec.y.org[j] = j < 2 ? 0 : c.hy;
    std::string msg;
    if (Catch([&]() { return ddnn::DDBackendConvCreate(ddnn::DDBackendLookup_Private(m ? "/gpu/cuda" : "/cpu/ref"), spec, &k[m]); }, &msg)) ADD_FAILURE() << what << ": " << msg;
  }
  if (!k[0] || !k[1]) ADD_FAILURE() << what << ": no kernel";
  if (!k[0] || !k[1]) {
    for (int m = 0; m < 2; m++)
      for (DDTensor &x : t[m]) DDT(DDTensorDestroy(&x));
    return;
  }
  EXPECT_NE(std::string(k[1]->Name()).find("cuDNN"), std::string::npos) << k[1]->Name();
  bool unit = true; /* forced, backward-data runs as a forward convolution wherever the strides are 1 (and it is not staged) */
  for (PetscInt j = 0; j < c.D; j++) unit = unit && c.s[j] == 1;
  const std::string name = k[1]->Name();
  const size_t      bd   = name.find("backward-data ");
  const bool        staged = bd != std::string::npos && name.find(" (packed)", bd) == name.find_first_not_of("0123456789", bd + 14);
  if (dgradfwd && unit && bd != std::string::npos && !staged) EXPECT_NE(name.find("as a forward"), std::string::npos) << what << ": " << name;
  for (int m = 0; m < 2; m++) {
    DDT(k[m]->Forward(t[m][0], t[m][2], 0, t[m][3], t[m][1]));
    DDT(k[m]->BackwardData(t[m][1], t[m][2], 0, t[m][4])); /* dy: the forward's y */
    DDT(k[m]->BackwardWeights(t[m][0], t[m][1], t[m][5], t[m][6]));
  }
  CHECK_PENDING();
  const double      tol = dt == DD_FLOAT32 ? 2e-5 : 1e-12;
  const char *const names[7] = {"x", "y", "w", "b", "dx", "dw", "db"};
  for (int i : {1, 4, 5, 6}) {
    const auto h = Storage(t[0][i]), d = Storage(t[1][i]);
    ASSERT_EQ(h.size(), d.size());
    double scale = 1;
    for (double v : h) scale = std::max(scale, std::abs(v));
    size_t bad = 0;
    for (size_t e = 0; e < h.size(); e++)
      if (!(std::abs(h[e] - d[e]) <= tol * scale) && bad++ < 5) ADD_FAILURE() << what << ": " << names[i] << " storage entry " << e << ": reference " << h[e] << ", cuDNN " << d[e];
    EXPECT_EQ(bad, 0u) << what << ": " << names[i] << " (" << k[1]->Name() << ")";
  }
  for (int m = 0; m < 2; m++)
    for (DDTensor &x : t[m]) DDT(DDTensorDestroy(&x));
}
} // namespace

/*
  cuDNN's convolutions against the reference loops: 1-, 2- and 3-D, strides, dilations, groups,
  transposed with padding and output_padding, windows inside halo'd storage, plain and
  channels-last, float32 and float64
*/
TEST(Gpu, ConvMatchesReference)
{
  REQUIRE_DEVICE();
  REQUIRE_CUDNN();
  const ConvCase cases[] = {
    {"conv2d k3", false, 2, 2, 3, 4, 1, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {0}, {0}, 1, 1},
    {"conv2d k3 s2 d2 groups 2", false, 2, 2, 4, 6, 2, {4, 3}, {3, 3}, {2, 2}, {2, 2}, {0}, {0}, 2, 0},
    {"conv2d k1x5 s1x2", false, 2, 1, 3, 2, 1, {3, 4}, {1, 5}, {1, 2}, {1, 1}, {0}, {0}, 0, 1},
    {"conv1d k5 s2", false, 1, 3, 2, 3, 1, {7}, {5}, {2}, {1}, {0}, {0}, 1, 0},
    {"conv3d k3", false, 3, 2, 2, 3, 1, {4, 3, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0}, {0}, 1, 1},
    {"conv3d k3 s2 groups 3", false, 3, 1, 3, 6, 3, {2, 3, 2}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0}, {0}, 0, 0},
    {"convT2d k3 s2 pad 1 opad 1", true, 2, 2, 4, 3, 1, {4, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, 1},
    {"convT2d k2 s2", true, 2, 2, 3, 2, 1, {3, 4}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, 0, 0},
    {"convT3d k2 s2", true, 3, 1, 4, 2, 1, {2, 3, 2}, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 1, 0},
    {"convT1d k4 s2 d2 pad 2 groups 2", true, 1, 3, 4, 6, 2, {5}, {4}, {2}, {2}, {2}, {0}, 0, 1},
    {"conv2d k3 d2 groups 2", false, 2, 2, 4, 6, 2, {4, 5}, {3, 3}, {1, 1}, {2, 2}, {0}, {0}, 1, 1},
    {"convT2d k3 s1 pad 1 groups 2", true, 2, 2, 4, 6, 2, {5, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, 1, 1},
    /* the crops of a distributed transposed convolution's pieces (through the full-size buffer): more on the right, and a box beyond the full output */
    {"convT2d k3 s2 crops 0 and 2", true, 2, 2, 4, 3, 1, {4, 5}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {-2, -2}, 1, 1},
    {"convT2d k2 s2 crops 1 and -1", true, 2, 2, 3, 2, 1, {3, 4}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, {2, 2}, 0, 1},
  };
  /* cuDNN's choice, then backward-data as a forward full convolution wherever it applies (unit strides) */
  for (const char *dgrad : {"", "1"}) {
    if (dgrad[0]) DDT(PetscOptionsSetValue(NULL, "-dd_cudnn_dgrad_forward", dgrad));
    for (const ConvCase &c : cases)
      for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
        for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST}) ConvCaseRun(c, dt, fmt, dgrad[0] != 0);
    if (dgrad[0]) DDT(PetscOptionsClearValue(NULL, "-dd_cudnn_dgrad_forward"));
  }
}

/* what cuDNN cannot express is declined (no kernel), not run wrong: host-side, no device needed */
TEST(Gpu, ConvDeclines)
{
  REQUIRE_CUDA_BUILD();
  REQUIRE_CUDNN();
  DDBackend b = ddnn::DDBackendLookup_Private("/gpu/cuda");
  ASSERT_NE(b, nullptr);
  ASSERT_NE(b->f32.convcreate, nullptr);
  ASSERT_NE(b->f64.convcreate, nullptr);
  const PetscInt sp[2] = {6, 6};
  for (int which = 1; which < 3; which++) { /* (a transposed convolution with crops no padding expresses is no longer declined: it runs through a full-size buffer, ConvMatchesReference) */
    DDTensor             x = LocalTensor(DD_FLOAT32, DD_MEMTYPE_HOST, which == 2 ? DD_FORMAT_BLOCKED : DD_FORMAT_PLAIN, 1, 4, 2, sp, 0), y;
    ddnn::ConvKernelSpec spec;
    DDT(DDTensorDuplicate(x, &y));
    spec.g.D = 2, spec.g.N = 1, spec.g.Ci = spec.g.Co = 4, spec.g.in[1] = spec.g.in[2] = spec.g.out[1] = spec.g.out[2] = 6;
    spec.x.t = x, spec.y.t = y;
    if (which == 0) { /* a transposed convolution cropped more on the right than on the left */
      spec.transposed = true;
      spec.g.k[1] = spec.g.k[2] = 3;
      spec.g.pl[1] = spec.g.pl[2] = 0;
      spec.g.pr[1] = spec.g.pr[2] = 2;
      spec.g.in[1] = spec.g.in[2] = 8;
    }
    if (which == 1) { /* groups over partitioned channels */
      spec.g.groups = 2, spec.g.cig = 3, spec.g.cog = 3, spec.g.ci0 = 1, spec.g.co0 = 1;
    }
    std::unique_ptr<ddnn::ConvKernel> k;
    DDT(b->f32.convcreate(spec, &k));
    EXPECT_FALSE(k) << "case " << which;
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
  }
}

/*
  The CUDA pooling kernel against the reference loops' kernel on the same geometry: random per-index
  first taps, tap counts (stepping by the dilation for max pooling) and divisors inside a halo'd
  window, max and average, 2-D and 3-D, plain, channels-last and blocked storage, float32 and
  float64; Forward overwrites the box, Backward adds onto the window
*/
TEST(Gpu, PoolMatchesReference)
{
  REQUIRE_DEVICE();
  std::mt19937 gen(5);
  auto         rnd = [&](PetscInt lo, PetscInt hi) { return lo + (PetscInt)(gen() % (unsigned)(hi - lo + 1)); };
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
    for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
      for (int max = 0; max < 2; max++)
        for (PetscInt D : {2, 3}) {
          const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmt] + (max ? " max " : " avg ") + std::to_string(D) + "-D";
          const PetscInt    N = 2, C = 5, h = 1;
          PetscInt          in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
          ddnn::PoolKernelSpec spec;
          spec.D = D, spec.type = max ? DD_POOL_MAX : DD_POOL_AVG;
          ddnn::PoolGeom &g = spec.g;
          g.D = D, g.N = N, g.C = C, g.max = max;
          for (int j = 0; j < 3; j++) {
            const bool sp = j >= 3 - D;
            in[j] = sp ? rnd(4, 7) : 1, out[j] = sp ? rnd(2, 5) : 1;
            g.out[j] = out[j], g.d[j] = max && sp ? rnd(1, 2) : 1;
            for (PetscInt i = 0; i < out[j]; i++) {
              const PetscInt nt = sp ? rnd(1, std::min<PetscInt>(3, (in[j] - 1) / g.d[j] + 1)) : 1, span = (nt - 1) * g.d[j];
              g.ntaps[j].push_back(nt);
              g.first[j].push_back(sp ? rnd(0, in[j] - 1 - span) : 0);
              g.div[j].push_back(sp ? rnd(1, 4) : 1);
            }
          }
          DDTensor t[2][2]; /* [host, device] x (also dx), y (also dy) */
          for (int m = 0; m < 2; m++) {
            const DDMemType mt  = m ? DD_MEMTYPE_DEVICE : DD_MEMTYPE_HOST;
            PetscInt        sx[3], sy[3];
            for (PetscInt j = 0; j < D; j++) sx[j] = in[3 - D + j], sy[j] = out[3 - D + j];
            t[m][0] = LocalTensor(dt, mt, fmt, N, C, D, sx, h);
            t[m][1] = LocalTensor(dt, mt, fmt, N, C, D, sy, h);
            for (int i = 0; i < 2; i++) DDT(DDTensorSetRandomGlobal(t[m][i], 40 + i, -1, 1));
          }
          std::unique_ptr<ddnn::PoolKernel> k[2];
          for (int m = 0; m < 2; m++) {
            ddnn::PoolKernelSpec s = spec;
            s.x.t = t[m][0], s.y.t = t[m][1];
            s.xn[0] = s.yn[0] = N, s.xn[1] = s.yn[1] = C;
            for (int j = 0; j < 2 + (int)D; j++) s.x.org[j] = s.y.org[j] = j < 2 ? 0 : h;
            for (PetscInt j = 0; j < D; j++) s.xn[2 + j] = in[3 - D + j], s.yn[2 + j] = out[3 - D + j];
            DDT(ddnn::DDBackendPoolCreate(ddnn::DDBackendLookup_Private(m ? "/gpu/cuda" : "/cpu/ref"), s, &k[m]));
            ASSERT_TRUE(k[m]) << what;
          }
          EXPECT_STREQ(k[1]->Name(), "CUDA pooling loops");
          const double tol = dt == DD_FLOAT32 ? 1e-6 : 1e-14;
          for (int pass = 0; pass < 2; pass++) {
            for (int m = 0; m < 2; m++) {
              if (pass == 0) DDT(k[m]->Forward(t[m][0], t[m][1], true));
              else DDT(k[m]->Backward(t[m][1], t[m][0])); /* dy: the forward's y; dx: x */
            }
            CHECK_PENDING();
            const auto hv = Storage(t[0][pass ? 0 : 1]), dv = Storage(t[1][pass ? 0 : 1]);
            ASSERT_EQ(hv.size(), dv.size());
            size_t bad = 0;
            for (size_t e = 0; e < hv.size(); e++)
              if (!(std::abs(hv[e] - dv[e]) <= tol * (1 + std::abs(hv[e]))) && bad++ < 5) ADD_FAILURE() << what << (pass ? " backward" : " forward") << " storage entry " << e << ": reference " << hv[e] << ", CUDA " << dv[e];
            EXPECT_EQ(bad, 0u) << what << (pass ? " backward" : " forward");
          }
          for (int m = 0; m < 2; m++)
            for (DDTensor &x : t[m]) DDT(DDTensorDestroy(&x));
        }
}

/* ------------------------------------------------------------------------------------------ */
/* primitives on device tensors (issue 11 part 3): the exchange engine and the collectives     */
/* staged through page-locked host buffers, against the same primitive on host tensors         */

namespace
{
/* a device tensor laid out as the set-up host tensor t (partition, shape, ownership, halo, format, type) */
bool HostTwins() /* DDNN_GPU_TESTS_ON_HOST=1 without a device: the twins are host tensors (checks the tests' own set-ups) */
{
  return DeviceCount() == 0 && getenv("DDNN_GPU_TESTS_ON_HOST") && !strcmp(getenv("DDNN_GPU_TESTS_ON_HOST"), "1");
}
#define REQUIRE_DEVICE_OR_HOST_TWINS() \
  do { \
    if (!HostTwins()) REQUIRE_DEVICE(); \
  } while (0)

DDTensor DeviceTwin(DDTensor t)
{
  DDTensor  y;
  DDMemType keep = t->memtype;
  t->memtype     = HostTwins() ? DD_MEMTYPE_HOST : DD_MEMTYPE_DEVICE;
  DDT(DDTensorDuplicateLayout(t, t->dtype, &y));
  t->memtype = keep;
  return y;
}

/* the same random whole storage on host tensor h and device tensor d (seeded per rank) */
void SetSameRandomStorage(DDTensor h, DDTensor d, unsigned seed)
{
  std::mt19937                           gen(seed * 7919u + (unsigned)Rank() * 104729u);
  std::uniform_real_distribution<double> u(-1, 1);
  DDDataType                             dt;
  DDT(DDTensorGetDataType(h, &dt));
  ASSERT_EQ(h->layout.size, d->layout.size);
  for (DDTensor t : {h, d}) {
    void *a;
    DDT(DDTensorGetArray(t, &a));
    std::mt19937 g = gen;
    for (PetscInt i = 0; i < t->layout.size; i++) {
      double v = u(g);
      if (dt == DD_FLOAT32) ((float *)a)[i] = (float)v;
      else ((double *)a)[i] = v;
    }
    DDT(DDTensorRestoreArray(t, &a)); /* a device tensor: copied back to the device */
  }
}

double MaxRelDiff(const std::vector<double> &a, const std::vector<double> &b)
{
  double m = 0, s = 0;
  for (size_t i = 0; i < a.size(); i++) {
    m = std::max(m, std::fabs(a[i] - b[i]));
    s = std::max(s, std::fabs(a[i]));
  }
  double g[2] = {m, s}, r[2];
  MPI_Allreduce(g, r, 2, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD);
  return r[0] / (1 + r[1]);
}

/*
  make(x, y) returns a primitive set up on x, y (y NULL for the in-place halo). The same primitive
  on host tensors and on their device twins: forward and adjoint from the same random storages give
  the same storages (exactly for data movement; sums in another order within tol), and in float64
  the device primitive passes the adjoint test (paper 000, eq. 26).
*/
void DeviceEqualsHost(const std::function<DDPrimitive(DDTensor, DDTensor)> &make, DDTensor x, DDTensor y, const std::string &what, unsigned seed, bool linear = true)
{
  const bool  inplace = y == nullptr;
  DDTensor    xd = DeviceTwin(x), yd = inplace ? nullptr : DeviceTwin(y);
  DDPrimitive ph = make(x, y), pd = make(xd, yd);
  DDTensor    yo = inplace ? x : y, ydo = inplace ? xd : yd;
  DDDataType  dt;
  DDT(DDTensorGetDataType(x, &dt));
  const double tol = dt == DD_FLOAT64 ? 1e-13 : 1e-5;
  /* forward */
  SetSameRandomStorage(x, xd, seed);
  if (!inplace) SetSameRandomStorage(y, yd, seed + 1);
  DDT(DDPrimitiveApply(ph, x, y));
  DDT(DDPrimitiveApply(pd, xd, yd));
  EXPECT_LE(MaxRelDiff(Storage(yo), Storage(ydo)), tol) << what << ": forward";
  /* adjoint */
  SetSameRandomStorage(yo, ydo, seed + 2);
  if (!inplace) SetSameRandomStorage(x, xd, seed + 3);
  DDT(DDPrimitiveApplyAdjoint(ph, yo, inplace ? nullptr : x));
  DDT(DDPrimitiveApplyAdjoint(pd, ydo, inplace ? nullptr : xd));
  EXPECT_LE(MaxRelDiff(Storage(x), Storage(xd)), tol) << what << ": adjoint";
  if (dt == DD_FLOAT64 && linear) { /* (a nonzero pad value makes the halo affine) */
    PetscReal err;
    DDT(DDPrimitiveAdjointTest(pd, NULL, NULL, seed, &err));
    EXPECT_LT(err, 1e-13) << what << ": adjoint test on the device";
  }
  DDT(DDPrimitiveDestroy(&ph));
  DDT(DDPrimitiveDestroy(&pd));
  DDT(DDTensorDestroy(&xd));
  if (yd) DDT(DDTensorDestroy(&yd));
}

DDTensor PrimTensor(DDPartition P, DDDataType dt, const std::vector<PetscInt> &shape, const std::vector<PetscInt> &lo, const std::vector<PetscInt> &hi, DDTensorFormat fmt, PetscInt emptydim = -1)
{
  DDTensor t;
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, P));
  DDT(DDTensorSetShape(t, (PetscInt)shape.size(), shape.data()));
  DDT(DDTensorSetDataType(t, dt));
  if (emptydim >= 0) { /* unbalanced: the first worker of that dimension holds nothing, the last the most */
    const PetscInt *ps;
    DDT(DDPartitionGetShape(P, &ps));
    const PetscInt        n = ps[emptydim];
    std::vector<PetscInt> lx((size_t)n, 0);
    PetscInt              rest = shape[(size_t)emptydim];
    for (PetscInt p = 1; p + 1 < n; p++) {
      lx[(size_t)p] = 2 + p % 2;
      rest -= lx[(size_t)p];
    }
    lx[(size_t)n - 1] = rest;
    if (n > 1) DDT(DDTensorSetOwnershipRanges(t, emptydim, lx.data()));
  }
  DDT(DDTensorSetHalo(t, lo.data(), hi.data()));
  DDT(DDTensorSetFormat(t, fmt));
  if (fmt == DD_FORMAT_BLOCKED) DDT(DDTensorSetBlockSize(t, 4));
  DDT(DDTensorSetUp(t));
  return t;
}
} // namespace

TEST(Gpu, HaloOnDeviceMatchesHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  std::vector<std::vector<PetscInt>> f2;
  Factorizations(Size(), 2, f2);
  unsigned seed = 1;
  for (auto &ps : f2)
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED})
        for (int kc = 0; kc < 3; kc++) {
          const PetscInt k[3] = {3, 5, 4}, s[3] = {1, 2, 1}, pad[3] = {1, 2, 3}, dil[3] = {1, 1, 2};
          DDPartition    P    = MakePart({1, 1, ps[0], ps[1]});
          /* kc 2: unbalanced rows, the first row worker empty (windows reach past it) */
          DDTensor x = PrimTensor(P, dt, {2, 5, 6 * ps[0] + 3, 5 * ps[1] + 2}, {0, 0, 0, 0}, {0, 0, 0, 0}, fmt, kc == 2 && ps[0] > 2 ? 2 : -1);
          auto     make = [&](DDTensor a, DDTensor) {
            DDPrimitive H;
            DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &H));
            DDT(DDPrimitiveSetType(H, DDPRIMITIVEHALO));
            for (PetscInt d = 2; d < 4; d++) {
              DDT(DDPrimitiveHaloSetKernel(H, d, k[kc], s[kc], dil[kc], pad[kc], PETSC_DECIDE));
              DDT(DDPrimitiveHaloSetPadding(H, d, (DDPaddingMode)((kc + d) % 4)));
            }
            if (kc == 1) DDT(DDPrimitiveHaloSetPadValue(H, 0.5));
            DDT(DDPrimitiveSetUp(H, a, NULL));
            return H;
          };
          std::ostringstream what;
          what << "halo on " << ps[0] << "x" << ps[1] << " " << DDDataTypes[dt] << " " << DDTensorFormats[fmt] << " case " << kc;
          DeviceEqualsHost(make, x, nullptr, what.str(), seed++, kc != 1);
          DDT(DDTensorDestroy(&x));
          DDT(DDPartitionDestroy(&P));
        }
}

TEST(Gpu, RepartitionAndScatterOnDeviceMatchHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  const int   W    = Size();
  unsigned    seed = 100;
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (int c = 0; c < 3; c++) {
      /* c 0: rows to batch, plain to channels-last with halos; 1: all on the last rank to rows, unbalanced; 2: rows (unbalanced, blocked) to columns */
      DDPartition Px = c == 1 ? MakePart({1, 1, 1, 1}, {(PetscMPIInt)(W - 1)}) : MakePart({1, 1, W, 1});
      DDPartition Py = c == 0 ? MakePart({W, 1, 1, 1}) : c == 1 ? MakePart({1, 1, W, 1}) : MakePart({1, 1, 1, W});
      DDTensor    x  = PrimTensor(Px, dt, {W + 1, 6, 3 * W + 2, 7}, {0, 0, c == 2 ? 0 : 1, 1}, {0, 0, 1, 0}, c == 2 ? DD_FORMAT_BLOCKED : DD_FORMAT_PLAIN, c == 2 && W > 2 ? 2 : -1);
      DDTensor    y  = PrimTensor(Py, dt, {W + 1, 6, 3 * W + 2, 7}, {0, 0, 1, 2}, {0, 0, 0, 1}, c == 0 ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN, c == 1 && W > 2 ? 2 : -1);
      auto        make = [&](DDTensor a, DDTensor b) {
        DDPrimitive T;
        DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &T));
        DDT(DDPrimitiveSetType(T, DDPRIMITIVEREPARTITION));
        DDT(DDPrimitiveSetUp(T, a, b));
        return T;
      };
      DeviceEqualsHost(make, x, y, "repartition case " + std::to_string(c) + " " + DDDataTypes[dt], seed++);
      /* a scatter into y: y's entry (n, c, h, w) takes x's (n, c, h, W - 1 - w) flipped along the last dimension where w is even, nothing where odd (zeroed) */
      auto makes = [&](DDTensor a, DDTensor b) {
        DDPrimitive           S;
        std::vector<PetscInt> map;
        const DDLayout       &L = b->layout;
        PetscInt              j[DD_MAX_DIM] = {0};
        for (PetscInt e = 0; e < L.bulksize; e++) {
          PetscInt g[4], gi = 0;
          for (PetscInt k = 0; k < 4; k++) g[k] = L.start[k] + j[k];
          if (g[3] % 2) map.push_back(-1);
          else {
            g[3] = b->shape[3] - 1 - g[3];
            for (PetscInt k = 0; k < 4; k++) gi = gi * b->shape[k] + g[k];
            map.push_back(gi);
          }
          for (PetscInt k = 3; k >= 0; k--) {
            if (++j[k] < L.n[k]) break;
            j[k] = 0;
          }
        }
        DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &S));
        DDT(DDPrimitiveSetType(S, DDPRIMITIVESCATTER));
        DDT(DDPrimitiveScatterSetIndexMap(S, (PetscInt)map.size(), map.data()));
        DDT(DDPrimitiveSetUp(S, a, b));
        return S;
      };
      DeviceEqualsHost(makes, x, y, "scatter case " + std::to_string(c) + " " + DDDataTypes[dt], seed++);
      DDT(DDTensorDestroy(&x));
      DDT(DDTensorDestroy(&y));
      DDT(DDPartitionDestroy(&Px));
      DDT(DDPartitionDestroy(&Py));
    }
}

TEST(Gpu, CollectivesOnDeviceMatchHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  const int W    = Size();
  unsigned  seed = 200;
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    /* broadcast from the last rank to a 1 x W partition and the sum-reduce back; x channels-last with a halo */
    DDPartition Px = MakePart({1, 1, 1}, {(PetscMPIInt)(W - 1)}), Py = MakePart({1, 1, W});
    DDTensor    x = PrimTensor(Px, dt, {3, 4, 2 * W + 1}, {0, 1, 1}, {0, 0, 1}, DD_FORMAT_CHANNELS_LAST), y;
    DDT(DDTensorCreateBroadcast(x, Py, &y));
    for (DDPrimitiveType type : {DDPRIMITIVEBROADCAST, DDPRIMITIVESUMREDUCE}) {
      const bool bc   = !strcmp(type, DDPRIMITIVEBROADCAST);
      auto       make = [&](DDTensor a, DDTensor b) {
        DDPrimitive B;
        DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &B));
        DDT(DDPrimitiveSetType(B, type));
        DDT(DDPrimitiveSetUp(B, a, b));
        return B;
      };
      if (bc) DeviceEqualsHost(make, x, y, std::string(type) + " " + DDDataTypes[dt], seed++);
      else DeviceEqualsHost(make, y, x, std::string(type) + " " + DDDataTypes[dt], seed++);
    }
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
    DDT(DDPartitionDestroy(&Px));
    DDT(DDPartitionDestroy(&Py));
    /* all-sum-reduce over the replicated dimension of a W x 1 partition, in place and out of place, blocked storage */
    DDPartition P = MakePart({W, 1, 1});
    DDTensor    a;
    DDT(DDTensorCreate(PETSC_COMM_WORLD, &a));
    DDT(DDTensorSetPartition(a, P));
    const PetscInt sh[3] = {5, 6, 7}, lo[3] = {0, 1, 0}, hi[3] = {0, 0, 1};
    DDT(DDTensorSetShape(a, 3, sh));
    DDT(DDTensorSetDataType(a, dt));
    DDT(DDTensorSetReplicated(a, 0, PETSC_TRUE));
    DDT(DDTensorSetHalo(a, lo, hi));
    DDT(DDTensorSetFormat(a, DD_FORMAT_BLOCKED));
    DDT(DDTensorSetBlockSize(a, 4));
    DDT(DDTensorSetUp(a));
    auto makea = [&](DDTensor u, DDTensor v) {
      DDPrimitive A;
      PetscInt    d = 0;
      DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &A));
      DDT(DDPrimitiveSetType(A, DDPRIMITIVEALLSUMREDUCE));
      DDT(DDPrimitiveAllSumReduceSetDimensions(A, 1, &d));
      DDT(DDPrimitiveSetUp(A, u, v));
      return A;
    };
    DDTensor b;
    DDT(DDTensorDuplicate(a, &b));
    DeviceEqualsHost(makea, a, b, std::string("allsumreduce ") + DDDataTypes[dt], seed++);
    DDT(DDTensorDestroy(&a));
    DDT(DDTensorDestroy(&b));
    DDT(DDPartitionDestroy(&P));
  }
}

/* host <-> device copies of tensors of different formats and halos (DDTensorCopy across memories) */
TEST(Gpu, CopyBetweenHostAndDevice)
{
  REQUIRE_DEVICE();
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    DDTensor h = MakeTensor(dt, DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 1), d = MakeTensor(dt, DD_MEMTYPE_DEVICE, DD_FORMAT_CHANNELS_LAST, 2), h2 = MakeTensor(dt, DD_MEMTYPE_HOST, DD_FORMAT_BLOCKED, 0);
    DDT(DDTensorSetRandomGlobal(h, 3, -1, 1));
    DDT(DDTensorCopy(h, d));
    EXPECT_EQ(Bulk(d), Bulk(h));
    DDT(DDTensorCopy(d, h2));
    EXPECT_EQ(Bulk(h2), Bulk(h));
    DDT(DDTensorDestroy(&h));
    DDT(DDTensorDestroy(&d));
    DDT(DDTensorDestroy(&h2));
  }
}

/* ------------------------------------------------------------------------------------------ */
/* layers on device tensors: pooling and activations on /gpu/cuda against /cpu/ref on the host */

namespace
{
/*
  The same layer on host tensors (/cpu/ref) and on their device twins (/gpu/cuda, the backend the
  device tensors choose): outputs, input and parameter gradients agree. The inputs' values are
  drawn here (uniform in [-1, 1]) unless fill(i, host tensor) sets input i's; the device twins get
  copies.
*/
void LayerDeviceEqualsHostMulti(const std::function<void(DDLayer)> &configure, std::vector<DDTensor> xs, const std::string &what, unsigned seed, double tol32 = 2e-6, const std::function<void(size_t, DDTensor)> &fill = nullptr)
{
  const size_t          n = xs.size();
  std::vector<DDTensor> xds(n), dxs(n), dxds(n);
  DDTensor              y, yd, dy, dyd;
  DDLayer               lh, ld;
  DDDataType            dt;
  DDT(DDTensorGetDataType(xs[0], &dt));
  const double tol = dt == DD_FLOAT64 ? 1e-12 : tol32;
  for (DDLayer *l : {&lh, &ld}) {
    DDT(DDLayerCreate(PETSC_COMM_WORLD, l));
    configure(*l);
    if (l == &lh || HostTwins()) DDT(DDLayerSetBackend(*l, "/cpu/ref"));
  }
  for (size_t i = 0; i < n; i++) {
    xds[i] = DeviceTwin(xs[i]);
    if (fill) fill(i, xs[i]);
    else DDT(DDTensorSetRandomGlobal(xs[i], seed + 7 * (unsigned)i, -1, 1));
    DDT(DDTensorCopy(xs[i], xds[i]));
  }
  DDT(DDLayerSetUpMulti(lh, (PetscInt)n, xs.data())); /* the same parameters: drawn from seed 0 identically on any partition and memory */
  DDT(DDLayerSetUpMulti(ld, (PetscInt)n, xds.data()));
  DDT(DDLayerCreateOutput(lh, &y));
  DDT(DDLayerCreateOutput(ld, &yd));
  DDT(DDLayerForwardMulti(lh, (PetscInt)n, xs.data(), y));
  DDT(DDLayerForwardMulti(ld, (PetscInt)n, xds.data(), yd));
  CHECK_PENDING();
  EXPECT_LE(MaxRelDiff(Bulk(y), Bulk(yd)), tol) << what << ": forward";
  DDT(DDTensorDuplicate(y, &dy));
  DDT(DDTensorDuplicate(yd, &dyd));
  DDT(DDTensorSetRandomGlobal(dy, seed + 1, -1, 1));
  DDT(DDTensorCopy(dy, dyd));
  for (size_t i = 0; i < n; i++) {
    DDT(DDTensorDuplicate(xs[i], &dxs[i]));
    DDT(DDTensorDuplicate(xds[i], &dxds[i]));
  }
  DDT(DDLayerBackwardMulti(lh, dy, (PetscInt)n, dxs.data()));
  DDT(DDLayerBackwardMulti(ld, dyd, (PetscInt)n, dxds.data()));
  CHECK_PENDING();
  for (size_t i = 0; i < n; i++) EXPECT_LE(MaxRelDiff(Bulk(dxs[i]), Bulk(dxds[i])), tol) << what << ": backward (gradient of input " << i << ")";
  PetscInt  nh, nd;
  DDTensor *gh, *gd;
  DDT(DDLayerGetGradients(lh, &nh, &gh));
  DDT(DDLayerGetGradients(ld, &nd, &gd));
  EXPECT_EQ(nh, nd) << what;
  for (PetscInt i = 0; i < nh && i < nd; i++) {
    DDMemType mt;
    DDT(DDTensorGetMemType(gd[i], &mt));
    EXPECT_EQ(mt, HostTwins() ? DD_MEMTYPE_HOST : DD_MEMTYPE_DEVICE) << what;
    EXPECT_LE(MaxRelDiff(Bulk(gh[i]), Bulk(gd[i])), 10 * tol) << what << ": parameter gradient " << i;
  }
  for (size_t i = 0; i < n; i++)
    for (DDTensor *t : {&xds[i], &dxs[i], &dxds[i]}) DDT(DDTensorDestroy(t));
  for (DDTensor *t : {&y, &yd, &dy, &dyd}) DDT(DDTensorDestroy(t));
  DDT(DDLayerDestroy(&lh));
  DDT(DDLayerDestroy(&ld));
}
void LayerDeviceEqualsHost(const std::function<void(DDLayer)> &configure, DDTensor x, const std::string &what, unsigned seed, double tol32 = 2e-6)
{
  LayerDeviceEqualsHostMulti(configure, {x}, what, seed, tol32);
}
} // namespace

TEST(Gpu, PoolAndActivationLayersOnDeviceMatchHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  std::vector<std::vector<PetscInt>> f2;
  Factorizations(Size(), 2, f2);
  unsigned seed = 300;
  for (auto &ps : f2)
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
      for (DDTensorFormat fmt : {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST})
        for (int uneven = 0; uneven < 2; uneven++) {
          DDPartition P = MakePart({1, 1, ps[0], ps[1]});
          DDTensor    x = PrimTensor(P, dt, {2, 3, 7 * ps[0] + 3, 6 * ps[1] + 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, fmt, uneven && ps[0] > 2 ? 2 : -1);
          struct PoolCase {
            DDPoolType type;
            PetscInt   k, s, p, d;
            PetscBool  ceil, countpad;
          } pcs[] = {{DD_POOL_MAX, 3, 2, 1, 1, PETSC_FALSE, PETSC_TRUE}, {DD_POOL_MAX, 3, 1, 1, 2, PETSC_TRUE, PETSC_TRUE}, {DD_POOL_AVG, 3, 2, 1, 1, PETSC_TRUE, PETSC_FALSE}, {DD_POOL_AVG, 2, 2, 0, 1, PETSC_FALSE, PETSC_TRUE}};
          int pc = 0;
          for (auto &c : pcs) {
            auto conf = [&](DDLayer l) {
              const PetscInt k[2] = {c.k, c.k}, s[2] = {c.s, c.s}, p[2] = {c.p, c.p}, d[2] = {c.d, c.d};
              DDT(DDLayerSetType(l, DDLAYERPOOL));
              DDT(DDLayerPoolSetType(l, c.type));
              DDT(DDLayerPoolSetKernel(l, 2, k));
              DDT(DDLayerPoolSetStride(l, 2, s));
              DDT(DDLayerPoolSetPadding(l, 2, p));
              if (c.d > 1) DDT(DDLayerPoolSetDilation(l, 2, d));
              DDT(DDLayerPoolSetCeilMode(l, c.ceil));
              if (c.type == DD_POOL_AVG) DDT(DDLayerPoolSetCountIncludePad(l, c.countpad));
            };
            std::ostringstream what;
            what << "pool case " << pc++ << " on " << ps[0] << "x" << ps[1] << " " << DDDataTypes[dt] << " " << DDTensorFormats[fmt] << (uneven ? " unbalanced" : "");
            LayerDeviceEqualsHost(conf, x, what.str(), seed++);
          }
          for (DDActivationType a : {DD_ACT_RELU, DD_ACT_LEAKYRELU, DD_ACT_TANH, DD_ACT_SIGMOID, DD_ACT_GELU}) {
            auto conf = [&](DDLayer l) {
              DDT(DDLayerSetType(l, DDLAYERACTIVATION));
              DDT(DDLayerActivationSetType(l, a));
              if (a == DD_ACT_LEAKYRELU) DDT(DDLayerActivationSetNegativeSlope(l, 0.1));
            };
            std::ostringstream what;
            what << DDActivationTypes[a] << " on " << ps[0] << "x" << ps[1] << " " << DDDataTypes[dt] << " " << DDTensorFormats[fmt];
            LayerDeviceEqualsHost(conf, x, what.str(), seed++);
          }
          DDT(DDTensorDestroy(&x));
          DDT(DDPartitionDestroy(&P));
        }
}


/* convolutions and transposed convolutions on device tensors (cuDNN, halo and collectives on the device) against /cpu/ref */
TEST(Gpu, ConvLayersOnDeviceMatchHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  REQUIRE_CUDNN();
  const int                          W = Size();
  std::vector<std::vector<PetscInt>> f2;
  Factorizations(W, 2, f2);
  unsigned seed = 400;
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    /* spatial splits: padding modes, stride, dilation, groups, overlap, unbalanced pieces */
    for (auto &ps : f2)
      for (int c = 0; c < 5; c++) {
        DDPartition P = MakePart({1, 1, ps[0], ps[1]});
        DDTensor    x = PrimTensor(P, dt, {2, 4, 6 * ps[0] + 2, 5 * ps[1] + 3}, {0, 0, 0, 0}, {0, 0, 0, 0}, c == 4 ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN, c == 3 && ps[0] > 2 ? 2 : -1);
        auto        conf = [&](DDLayer l) {
          const PetscInt k[2] = {3, 3}, s[2] = {c == 1 ? 2 : 1, c == 1 ? 2 : 1}, p[2] = {c == 2 ? 2 : 1, c == 2 ? 2 : 1}, d[2] = {c == 2 ? 2 : 1, c == 2 ? 2 : 1};
          DDT(DDLayerSetType(l, DDLAYERCONV));
          DDT(DDLayerConvSetOutputChannels(l, 6));
          DDT(DDLayerConvSetKernel(l, 2, k));
          DDT(DDLayerConvSetStride(l, 2, s));
          DDT(DDLayerConvSetPadding(l, 2, p));
          DDT(DDLayerConvSetDilation(l, 2, d));
          DDT(DDLayerConvSetBias(l, PETSC_TRUE));
          if (c == 0) DDT(DDLayerConvSetPaddingMode(l, DD_PADDING_REFLECT));
          if (c == 3) DDT(DDLayerConvSetGroups(l, 2));
          if (c == 4) DDT(DDLayerConvSetOverlap(l, PETSC_TRUE));
        };
        std::ostringstream what;
        what << "conv case " << c << " on " << ps[0] << "x" << ps[1] << " " << DDDataTypes[dt];
        LayerDeviceEqualsHost(conf, x, what.str(), seed++, 1e-5);
        DDT(DDTensorDestroy(&x));
        DDT(DDPartitionDestroy(&P));
      }
    /* channel splits: x over W input-channel workers (y = R y^), and x on one rank with W output-channel workers (x^ = B x) */
    for (int c = 0; c < 2; c++) {
      DDPartition P = c == 0 ? MakePart({1, W, 1, 1}) : MakePart({1, 1, 1, 1}, {0});
      DDTensor    x = PrimTensor(P, dt, {2, 2 * W, 9, 7}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN);
      auto        conf = [&](DDLayer l) {
        const PetscInt k[2] = {3, 3}, p[2] = {1, 1};
        DDT(DDLayerSetType(l, DDLAYERCONV));
        DDT(DDLayerConvSetOutputChannels(l, 3 * W));
        DDT(DDLayerConvSetKernel(l, 2, k));
        DDT(DDLayerConvSetPadding(l, 2, p));
        DDT(DDLayerConvSetBias(l, PETSC_TRUE));
        if (c == 1) DDT(DDLayerConvSetChannelWorkers(l, W));
      };
      LayerDeviceEqualsHost(conf, x, std::string(c == 0 ? "conv over input-channel workers " : "conv over output-channel workers ") + DDDataTypes[dt], seed++, 1e-5);
      DDT(DDTensorDestroy(&x));
      DDT(DDPartitionDestroy(&P));
    }
    /* transposed convolutions on a spatial split: the U-Net's k2 s2 up-sampling, and k3 s1 p1 */
    for (auto &ps : f2)
      for (int c = 0; c < 2; c++) {
        DDPartition P = MakePart({1, 1, ps[0], ps[1]});
        DDTensor    x = PrimTensor(P, dt, {2, 4, 4 * ps[0] + 1, 3 * ps[1] + 2}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN);
        auto        conf = [&](DDLayer l) {
          const PetscInt k[2] = {c ? 3 : 2, c ? 3 : 2}, s[2] = {c ? 1 : 2, c ? 1 : 2}, p[2] = {c ? 1 : 0, c ? 1 : 0};
          DDT(DDLayerSetType(l, DDLAYERCONVTRANSPOSE));
          DDT(DDLayerConvSetOutputChannels(l, 3));
          DDT(DDLayerConvSetKernel(l, 2, k));
          DDT(DDLayerConvSetStride(l, 2, s));
          DDT(DDLayerConvSetPadding(l, 2, p));
          DDT(DDLayerConvSetBias(l, PETSC_TRUE));
        };
        std::ostringstream what;
        what << "convtranspose case " << c << " on " << ps[0] << "x" << ps[1] << " " << DDDataTypes[dt];
        LayerDeviceEqualsHost(conf, x, what.str(), seed++, 1e-5);
        DDT(DDTensorDestroy(&x));
        DDT(DDPartitionDestroy(&P));
      }
  }
}

/* the other layer types on device tensors: structure (add, concat, flatten, reshape), upsample, affine, normalizations, dropout, losses */
TEST(Gpu, MoreLayersOnDeviceMatchHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  const int                          W = Size();
  std::vector<std::vector<PetscInt>> f2;
  Factorizations(W, 2, f2);
  unsigned seed = 500;
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (auto &ps : f2) {
      const std::string on = std::string(" on ") + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + " " + DDDataTypes[dt];
      DDPartition       P  = MakePart({1, 1, ps[0], ps[1]});
      /* unbalanced, with an empty piece where there are more than two workers along H */
      DDTensor x  = PrimTensor(P, dt, {2, 4, 5 * ps[0] + 2, 4 * ps[1] + 3}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN, ps[0] > 2 ? 2 : -1);
      DDTensor xc = PrimTensor(P, dt, {2, 4, 5 * ps[0] + 2, 4 * ps[1] + 3}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_CHANNELS_LAST);
      DDTensor x3 = PrimTensor(P, dt, {2, 3, 5 * ps[0] + 2, 4 * ps[1] + 3}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN);
      DDTensor xb = PrimTensor(P, dt, {2, 4, 5 * ps[0] + 2, 4 * ps[1] + 3}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN); /* balanced, as xc: two inputs of one distribution */
      /* upsampling: nearest and bilinear, scale 2, both formats */
      for (DDUpsampleMode m : {DD_UPSAMPLE_NEAREST, DD_UPSAMPLE_LINEAR})
        for (DDTensor in : {x, xc}) {
          auto conf = [&](DDLayer l) {
            const PetscInt sc[2] = {2, 2};
            DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
            DDT(DDLayerUpsampleSetMode(l, m));
            DDT(DDLayerUpsampleSetScale(l, 2, sc));
          };
          LayerDeviceEqualsHost(conf, in, std::string("upsample ") + DDUpsampleModes[m] + (in == xc ? " channels-last" : "") + on, seed++, 1e-5);
        }
      { /* align_corners and a size */
        auto conf = [&](DDLayer l) {
          const PetscInt sz[2] = {7 * ps[0] + 1, 6 * ps[1] + 5};
          DDT(DDLayerSetType(l, DDLAYERUPSAMPLE));
          DDT(DDLayerUpsampleSetMode(l, DD_UPSAMPLE_LINEAR));
          DDT(DDLayerUpsampleSetAlignCorners(l, PETSC_TRUE));
          DDT(DDLayerUpsampleSetSize(l, 2, sz));
        };
        LayerDeviceEqualsHost(conf, x, "upsample linear align_corners to a size" + on, seed++, 1e-5);
      }
      /* structure: add, concat (channels), flatten, reshape */
      LayerDeviceEqualsHostMulti([](DDLayer l) { DDT(DDLayerSetType(l, DDLAYERADD)); }, {xb, xc}, "add" + on, seed++);
      LayerDeviceEqualsHostMulti(
        [](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERCONCAT));
          DDT(DDLayerConcatSetDimension(l, 1));
        },
        {x3, xb}, "concat" + on, seed++);
      LayerDeviceEqualsHost([](DDLayer l) { DDT(DDLayerSetType(l, DDLAYERFLATTEN)); }, xc, "flatten" + on, seed++);
      /* normalizations (training: batch statistics all-sum-reduced; running statistics updated through host copies) */
      LayerDeviceEqualsHost([](DDLayer l) { DDT(DDLayerSetType(l, DDLAYERBATCHNORM)); }, x, "batchnorm" + on, seed++, 2e-5);
      LayerDeviceEqualsHost([](DDLayer l) { DDT(DDLayerSetType(l, DDLAYERBATCHNORM)); }, xc, "batchnorm channels-last" + on, seed++, 2e-5);
      LayerDeviceEqualsHost(
        [](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERGROUPNORM));
          DDT(DDLayerGroupNormSetGroups(l, 2));
        },
        x, "groupnorm" + on, seed++, 2e-5);
      LayerDeviceEqualsHost(
        [](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERLAYERNORM));
          DDT(DDLayerLayerNormSetDimensions(l, 1));
        },
        x, "layernorm" + on, seed++, 2e-5);
      /* dropout in training: the same counter-based masks */
      LayerDeviceEqualsHost(
        [](DDLayer l) {
          DDT(DDLayerSetType(l, DDLAYERDROPOUT));
          DDT(DDLayerDropoutSetProbability(l, 0.3));
          DDT(DDLayerDropoutSetSeed(l, 77));
        },
        xc, "dropout" + on, seed++);
      /* element losses, all reductions (prediction and target gradients) */
      for (DDLossType lt : {DD_LOSS_MSE, DD_LOSS_L1})
        for (DDReduction red : {DD_REDUCTION_MEAN, DD_REDUCTION_SUM, DD_REDUCTION_NONE})
          LayerDeviceEqualsHostMulti(
            [&](DDLayer l) {
              DDT(DDLayerSetType(l, DDLAYERLOSS));
              DDT(DDLayerLossSetType(l, lt));
              DDT(DDLayerLossSetReduction(l, red));
            },
            {xb, xc}, std::string("loss ") + DDLossTypes[lt] + " " + DDReductions[red] + on, seed++, 1e-5);
      /* cross-entropy with class indices: weights, ignore_index, smoothing; and probability targets */
      {
        DDPartition Pt = MakePart({1, ps[0], ps[1]});
        DDTensor    t  = PrimTensor(Pt, dt, {2, 5 * ps[0] + 2, 4 * ps[1] + 3}, {0, 0, 0}, {0, 0, 0}, DD_FORMAT_PLAIN);
        auto        classes = [&](size_t i, DDTensor h) {
          if (i == 0) {
            DDT(DDTensorSetRandomGlobal(h, seed + 11, -2, 2));
            return;
          }
          void    *a;
          PetscInt n;
          DDT(DDTensorGetLocalStorageSize(h, &n));
          DDT(DDTensorGetArray(h, &a));
          for (PetscInt k = 0; k < n; k++) { /* classes 0..3, some the ignore_index 2 */
            const double v = (double)((k * 7 + Rank() * 3) % 4);
            if (dt == DD_FLOAT32) ((float *)a)[k] = (float)v;
            else ((double *)a)[k] = v;
          }
          DDT(DDTensorRestoreArray(h, &a));
        };
        for (DDReduction red : {DD_REDUCTION_MEAN, DD_REDUCTION_NONE})
          LayerDeviceEqualsHostMulti(
            [&](DDLayer l) {
              const PetscReal w[4] = {0.5, 1.5, 1, 2};
              DDT(DDLayerSetType(l, DDLAYERLOSS));
              DDT(DDLayerLossSetType(l, DD_LOSS_CROSSENTROPY));
              DDT(DDLayerLossSetReduction(l, red));
              DDT(DDLayerLossSetClassWeights(l, 4, w));
              DDT(DDLayerLossSetIgnoreIndex(l, 2));
              DDT(DDLayerLossSetLabelSmoothing(l, 0.1));
            },
            {xb, t}, std::string("cross-entropy (class indices) ") + DDReductions[red] + on, seed++, 1e-5, classes);
        LayerDeviceEqualsHostMulti(
          [&](DDLayer l) {
            DDT(DDLayerSetType(l, DDLAYERLOSS));
            DDT(DDLayerLossSetType(l, DD_LOSS_CROSSENTROPY));
            DDT(DDLayerLossSetReduction(l, DD_REDUCTION_SUM));
            DDT(DDLayerLossSetProbabilityTargets(l, PETSC_TRUE));
            DDT(DDLayerLossSetLabelSmoothing(l, 0.05));
          },
          {xb, xc}, "cross-entropy (probability targets) sum" + on, seed++, 1e-5);
        DDT(DDTensorDestroy(&t));
        DDT(DDPartitionDestroy(&Pt));
      }
      for (DDTensor *t : {&x, &xc, &x3, &xb}) DDT(DDTensorDestroy(t));
      DDT(DDPartitionDestroy(&P));
      /* a dense layer on (N, F) split over batch and features, with output-feature workers */
      DDPartition Pa = MakePart({ps[0], ps[1]});
      DDTensor    xa = PrimTensor(Pa, dt, {3 * ps[0] + 1, 4 * ps[1] + 2}, {0, 0}, {0, 0}, DD_FORMAT_PLAIN);
      for (PetscInt fo : {1, 2})
        LayerDeviceEqualsHost(
          [&](DDLayer l) {
            DDT(DDLayerSetType(l, DDLAYERAFFINE));
            DDT(DDLayerAffineSetOutputFeatures(l, 5));
            if (fo > 1 && W >= 2 * ps[0] * ps[1]) DDT(DDLayerAffineSetOutputWorkers(l, fo));
          },
          xa, "affine (" + std::to_string(fo) + " output workers)" + on, seed++, 1e-5);
      DDT(DDTensorDestroy(&xa));
      DDT(DDPartitionDestroy(&Pa));
    }
}

/* the optimizers' updates on device parameters (/gpu/cuda's update kernels) equal the host's */
TEST(Gpu, OptimizersOnDeviceMatchHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (const char *type : {"sgd", "adam", "adamw"}) {
      DDTensor    ph[2], gh[2], pd[2], gd[2];
      DDOptimizer oh, od;
      for (int i = 0; i < 2; i++) {
        ph[i] = MakeTensor(dt, DD_MEMTYPE_HOST, i ? DD_FORMAT_CHANNELS_LAST : DD_FORMAT_PLAIN, i);
        DDT(DDTensorDuplicate(ph[i], &gh[i]));
        pd[i] = DeviceTwin(ph[i]);
        gd[i] = DeviceTwin(gh[i]);
        DDT(DDTensorSetRandomGlobal(ph[i], 20 + i, -1, 1));
        DDT(DDTensorCopy(ph[i], pd[i]));
      }
      for (DDOptimizer *o : {&oh, &od}) {
        DDT(DDOptimizerCreate(PETSC_COMM_WORLD, o));
        DDT(DDOptimizerSetType(*o, type));
        DDT(DDOptimizerSetLearningRate(*o, 0.05));
        DDT(DDOptimizerSetWeightDecay(*o, 0.01));
        if (!strcmp(type, "sgd")) DDT(DDOptimizerSetMomentum(*o, 0.9, PETSC_TRUE));
        DDT(DDOptimizerSetClipNorm(*o, 3.0));
      }
      DDT(DDOptimizerSetUp(oh, 2, ph, gh));
      DDT(DDOptimizerSetUp(od, 2, pd, gd));
      for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 2; i++) {
          DDT(DDTensorSetRandomGlobal(gh[i], 40 + 2 * step + i, -1, 1));
          DDT(DDTensorCopy(gh[i], gd[i]));
        }
        DDT(DDOptimizerStep(oh));
        DDT(DDOptimizerStep(od));
        CHECK_PENDING();
        PetscReal nh, nd;
        DDT(DDOptimizerGetLastGradientNorm(oh, &nh));
        DDT(DDOptimizerGetLastGradientNorm(od, &nd));
        EXPECT_NEAR(nh, nd, 1e-12 * nh) << type << " step " << step;
      }
      const double tol = dt == DD_FLOAT64 ? 1e-13 : 1e-6;
      for (int i = 0; i < 2; i++) EXPECT_LE(MaxRelDiff(Storage(ph[i]), Storage(pd[i])), tol) << type << " " << DDDataTypes[dt] << " parameter " << i;
      DDT(DDOptimizerCheckState(od));
      DDT(DDOptimizerDestroy(&oh));
      DDT(DDOptimizerDestroy(&od));
      for (int i = 0; i < 2; i++)
        for (DDTensor *t : {&ph[i], &gh[i], &pd[i], &gd[i]}) DDT(DDTensorDestroy(t));
    }
}

namespace
{
/* a network of the options under prefix pfx on inputs xs: set up, parameters from seed 5 */
DDNet NetOn(const char pfx[], std::vector<DDTensor> &xs)
{
  DDNet net;
  DDT(DDNetCreate(PETSC_COMM_WORLD, &net));
  DDT(DDNetSetOptionsPrefix(net, pfx));
  DDT(DDNetSetFromOptions(net));
  DDT(DDNetSetUp(net, (PetscInt)xs.size(), xs.data()));
  DDT(DDNetInitializeParameters(net, 5));
  return net;
}
} // namespace

/*
  Whole networks on device tensors: a U-Net step (conv, relu, max pool, bilinear upsampling,
  concat, mse) and a classifier (conv without bias, batch norm, relu, flatten, dense, dropout,
  cross-entropy) train 3 Adam steps on host tensors and on device tensors from the same weights and
  data: the same losses and parameters; the device network's weights and checkpoint round-trip
  through HDF5. (A convolution's bias before a batch norm has a zero gradient up to rounding, which
  Adam's normalized step turns into +-lr in float32 on either side: PyTorch's practice, bias=False,
  keeps the comparison meaningful.)
*/
TEST(Gpu, NetworkTrainsOnDeviceAsOnHost)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  DDT(PetscOptionsInsertString(NULL, "-gu_net_inputs x,target -gu_net_layers c1,a1,p1,c2,a2,u1,k1,c3,loss "
                                     "-gu_c1_layer_type conv -gu_c1_layer_conv_out_channels 4 -gu_c1_layer_conv_kernel 3 -gu_c1_layer_conv_padding 1 -gu_a1_layer_type activation "
                                     "-gu_p1_layer_type pool -gu_p1_layer_pool_kernel 2 "
                                     "-gu_c2_layer_type conv -gu_c2_layer_conv_out_channels 6 -gu_c2_layer_conv_kernel 3 -gu_c2_layer_conv_padding 1 -gu_a2_layer_type activation "
                                     "-gu_u1_layer_type upsample -gu_u1_layer_upsample_scale 2 -gu_u1_layer_upsample_mode linear "
                                     "-gu_k1_layer_type concat -gu_k1_layer_inputs u1,a1 "
                                     "-gu_c3_layer_type conv -gu_c3_layer_conv_out_channels 1 -gu_c3_layer_conv_kernel 1 "
                                     "-gu_loss_layer_type loss -gu_loss_layer_inputs c3,target "
                                     "-gc_net_inputs x,label -gc_net_layers c1,b1,a1,flat,f1,d1,loss "
                                     "-gc_c1_layer_type conv -gc_c1_layer_conv_out_channels 3 -gc_c1_layer_conv_kernel 3 -gc_c1_layer_conv_padding 1 -gc_c1_layer_conv_bias 0 "
                                     "-gc_b1_layer_type batchnorm -gc_a1_layer_type activation -gc_flat_layer_type flatten "
                                     "-gc_f1_layer_type affine -gc_f1_layer_affine_out_features 4 -gc_d1_layer_type dropout -gc_d1_layer_dropout_p 0.2 "
                                     "-gc_loss_layer_type loss -gc_loss_layer_loss_type crossentropy -gc_loss_layer_inputs d1,label"));
  const int W = Size();
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (int net = 0; net < 2; net++) {
      const char *pfx = net ? "gc_" : "gu_";
      DDPartition P   = MakePart({1, 1, W, 1});
      DDTensor    x   = PrimTensor(P, dt, {2, 1, 4 * W, 8}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN), t;
      DDPartition Pl  = NULL;
      if (!net) t = PrimTensor(P, dt, {2, 1, 4 * W, 8}, {0, 0, 0, 0}, {0, 0, 0, 0}, DD_FORMAT_PLAIN);
      else { /* class labels (N) on the first rank: the dense layer's batch workers */
        Pl = MakePart({1}, {0});
        t  = PrimTensor(Pl, dt, {2}, {0}, {0}, DD_FORMAT_PLAIN);
      }
      DDT(DDTensorSetRandomGlobal(x, 3, -1, 1));
      if (!net) DDT(DDTensorSetRandomGlobal(t, 4, -1, 1));
      else {
        const double lab[2] = {1, 3};
        std::vector<float> labf = {1, 3};
        DDT(DDTensorSetValuesGlobal(t, dt == DD_FLOAT64 ? (const void *)lab : (const void *)labf.data()));
      }
      std::vector<DDTensor> xh = {x, t}, xd = {DeviceTwin(x), DeviceTwin(t)};
      DDT(DDTensorCopy(x, xd[0]));
      DDT(DDTensorCopy(t, xd[1]));
      DDNet nh = NetOn(pfx, xh); /* the default (CPU) backend */
      DDNet nd = NetOn(pfx, xd); /* its device tensors choose /gpu/cuda */
      if (!HostTwins()) { /* the replicated weight mode keeps host buckets: it refuses device tensors, naming a layer */
        DDNet       nr;
        std::string msg;
        DDT(DDNetCreate(PETSC_COMM_WORLD, &nr));
        DDT(DDNetSetOptionsPrefix(nr, pfx));
        DDT(DDNetSetFromOptions(nr));
        DDT(DDNetSetWeightMode(nr, DD_NET_WEIGHTS_REPLICATED));
        EXPECT_NE(Catch([&]() { return DDNetSetUp(nr, 2, xd.data()); }, &msg), 0);
        EXPECT_NE(msg.find("does not support device tensors yet (layer"), std::string::npos) << msg;
        DDT(DDNetDestroy(&nr));
        /* the performance model calibrates host backends only: -net_distribution auto keeps the given
           distribution (no repartition inserted, said aloud), -net_view says why the times are
           missing, and DDModelCalibrate() refuses the device backend before measuring anything */
        DDNet    na;
        PetscInt nl, nla;
        DDT(DDNetCreate(PETSC_COMM_WORLD, &na));
        DDT(DDNetSetOptionsPrefix(na, pfx));
        DDT(DDNetSetFromOptions(na));
        DDT(DDNetSetDistribution(na, DD_NET_DISTRIBUTION_AUTO));
        DDT(DDNetSetUp(na, 2, xd.data()));
        DDT(DDNetGetNumLayers(nd, &nl));
        DDT(DDNetGetNumLayers(na, &nla));
        EXPECT_EQ(nla, nl) << "no layer inserted";
        std::string text = ViewedText([&](PetscViewer v) { return DDNetViewModel(na, v); });
        EXPECT_NE(text.find("calibrates host backends only"), std::string::npos) << text;
        DDT(DDNetDestroy(&na));
        EXPECT_NE(Catch([&]() { return DDModelCalibrate(PETSC_COMM_WORLD, "/gpu/cuda", dt); }, &msg), 0);
        EXPECT_NE(msg.find("calibrates host backends only; /gpu/cuda computes in device memory"), std::string::npos) << msg;
      }
      DDOptimizer oh, od;
      for (int m = 0; m < 2; m++) {
        DDOptimizer *o   = m ? &od : &oh;
        DDNet        nn  = m ? nd : nh;
        PetscInt     np;
        DDTensor    *ps, *gs;
        DDT(DDOptimizerCreate(PETSC_COMM_WORLD, o));
        DDT(DDOptimizerSetType(*o, "adam"));
        DDT(DDOptimizerSetLearningRate(*o, 0.01));
        DDT(DDNetGetParameters(nn, &np, &ps, &gs));
        DDT(DDOptimizerSetUp(*o, np, ps, gs));
      }
      const double tol = dt == DD_FLOAT64 ? 1e-10 : 2e-4;
      for (int step = 0; step < 3; step++) {
        PetscReal lh, ld;
        for (int m = 0; m < 2; m++) {
          DDNet nn = m ? nd : nh;
          DDT(DDNetZeroGradients(nn));
          DDT(DDNetForward(nn, 2, m ? xd.data() : xh.data()));
          DDT(DDNetBackward(nn, NULL));
          DDT(DDOptimizerStep(m ? od : oh));
          DDT(DDNetGetLoss(nn, m ? &ld : &lh));
        }
        CHECK_PENDING();
        EXPECT_NEAR(lh, ld, tol * (1 + std::fabs(lh))) << pfx << " " << DDDataTypes[dt] << " step " << step;
      }
      PetscInt  np;
      DDTensor *psh, *psd;
      DDT(DDNetGetParameters(nh, &np, &psh, NULL));
      DDT(DDNetGetParameters(nd, &np, &psd, NULL));
      for (PetscInt i = 0; i < np; i++) {
        DDMemType mt;
        DDT(DDTensorGetMemType(psd[i], &mt));
        EXPECT_EQ(mt, HostTwins() ? DD_MEMTYPE_HOST : DD_MEMTYPE_DEVICE);
        EXPECT_LE(MaxRelDiff(Bulk(psh[i]), Bulk(psd[i])), 10 * tol) << pfx << " " << DDDataTypes[dt] << " parameter " << i;
      }
      /* weights and a checkpoint of the device network round-trip through HDF5 (host twins) into the host network */
      const std::string wf = "test_13_gpu_weights_" + std::to_string(W) + ".h5", cf = "test_13_gpu_ckpt_" + std::to_string(W) + ".h5";
      DDT(DDNetSaveWeights(nd, wf.c_str()));
      DDT(DDCheckpointSave(nd, od, cf.c_str()));
      DDNet nh2 = NetOn(pfx, xh);
      DDT(DDNetLoadWeights(nh2, wf.c_str()));
      DDTensor *ps2;
      DDT(DDNetGetParameters(nh2, &np, &ps2, NULL));
      for (PetscInt i = 0; i < np; i++) EXPECT_EQ(Bulk(ps2[i]), Bulk(psd[i])) << "weights file, parameter " << i;
      DDT(DDNetInitializeParameters(nd, 9));
      DDT(DDCheckpointLoad(nd, od, cf.c_str()));
      for (PetscInt i = 0; i < np; i++) EXPECT_EQ(Bulk(ps2[i]), Bulk(psd[i])) << "checkpoint, parameter " << i;
      if (!Rank()) {
        std::remove(wf.c_str());
        std::remove(cf.c_str());
      }
      DDT(DDNetDestroy(&nh2));
      DDT(DDOptimizerDestroy(&oh));
      DDT(DDOptimizerDestroy(&od));
      DDT(DDNetDestroy(&nh));
      DDT(DDNetDestroy(&nd));
      for (DDTensor *tt : {&x, &t, &xd[0], &xd[1]}) DDT(DDTensorDestroy(tt));
      DDT(DDPartitionDestroy(&P));
      if (Pl) DDT(DDPartitionDestroy(&Pl));
    }
}

/* HDF5 tensors and dataset batches read into device tensors (staged through host twins) */
TEST(Gpu, FilesAndBatchesOnDevice)
{
  REQUIRE_DEVICE_OR_HOST_TWINS();
  const int         W = Size();
  const std::string f = "test_13_gpu_data_" + std::to_string(W) + ".h5";
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    DDTensor h = MakeTensor(dt, DD_MEMTYPE_HOST, DD_FORMAT_PLAIN, 1), d = DeviceTwin(h), back;
    DDT(DDTensorSetRandomGlobal(h, 8, -1, 1));
    DDT(DDTensorCopy(h, d));
    for (PetscInt s = 0; s < 3; s++) DDT(DDTensorWriteHDF5Slice(d, f.c_str(), "x", s, 3));
    DDT(DDTensorWriteHDF5(d, f.c_str(), "whole", PETSC_TRUE));
    back = DeviceTwin(h);
    DDT(DDTensorReadHDF5(back, f.c_str(), "whole"));
    EXPECT_EQ(Bulk(back), Bulk(h));
    /* a batch of 2 samples (each of h's shape) into a device batch tensor */
    DDDataset   ds;
    const char *fields[] = {"x"};
    DDT(DDDatasetCreate(PETSC_COMM_WORLD, &ds));
    DDT(DDDatasetSetFile(ds, f.c_str()));
    DDT(DDDatasetSetFields(ds, 1, fields));
    DDT(DDDatasetSetUp(ds));
    DDPartition Pb = MakePart({1, 1, 1, W, 1});
    DDTensor    bh = PrimTensor(Pb, dt, {2, 2, 5, 3 * W + 1, 4}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, DD_FORMAT_PLAIN), bd;
    DDT(DDPartitionDestroy(&Pb));
    bd = DeviceTwin(bh);
    DDT(DDDatasetReadBatch(ds, 0, 1, 2, bh));
    DDT(DDDatasetReadBatch(ds, 0, 1, 2, bd));
    EXPECT_EQ(Bulk(bh), Bulk(bd));
    DDT(DDDatasetDestroy(&ds));
    for (DDTensor *t : {&h, &d, &back, &bh, &bd}) DDT(DDTensorDestroy(t));
  }
  if (!Rank()) std::remove(f.c_str());
}
