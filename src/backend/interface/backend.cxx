/*
  The backend registry: resource names, the default backend (-dd_backend), the fallback chains
  along which kernels are found by capability, and the memory operations tensors allocate with.
  See include/ddnn/private/ddbackendimpl.h.
*/
#include <ddnn/private/ddbackendimpl.h>
#include <ddnn/private/ddlayerimpl.h>
#include <backend/interface/backends.hpp>
#include <sys/shmarena.hpp>
#if DDNN_WITH_CUDA
  #include <backend/cuda/backend_cuda.hpp>
#endif
#include <string>
#include <vector>
#include <memory>
#include <sys/ddcxx.hpp>

using namespace ddnn;

const char *const DDMemTypes[] = {"host", "device", "DDMemType", "DD_MEMTYPE_", nullptr};

static std::vector<std::unique_ptr<_p_DDBackend>> &Registry()
{
  static std::vector<std::unique_ptr<_p_DDBackend>> r;
  return r;
}
static PetscBool    registered = PETSC_FALSE;
static DDBackend    defaultbackend = nullptr; /* a registry entry: looked up once, not per kernel call */
static PetscClassId DD_BACKEND_CLASSID;

static const char *const KernelKindNames[] = {"Conv", "Pool", "Gemm", "Upsample", "Pointwise", "Norm", "Optimizer", "FFT", "Loss", "Dropout", "Spectral"};
static_assert(sizeof(KernelKindNames) / sizeof(KernelKindNames[0]) == DD_KERNEL_NKINDS, "a name for every kernel kind");

/* "cpu/dnnl" and "/cpu/dnnl" name the same backend */
static std::string Normalize(const char name[])
{
  std::string s(name ? name : "");
  if (!s.empty() && s[0] != '/') s = "/" + s;
  return s;
}

/* resource names ddnn knows that this build may lack, with the build option that brings them */
static const char *BuildOptionFor(const std::string &name)
{
  if (name == "/cpu/dnnl") return "-DDDNN_WITH_DNNL=ON (needs oneDNN, Debian's libdnnl-dev)";
  if (name == "/gpu/cuda" || name == "/gpu") return "-DDDNN_WITH_CUDA=ON (needs the CUDA toolkit)";
  return nullptr;
}

/* a device backend is usable only where this process has a device */
static PetscErrorCode DeviceCheck(DDBackend b)
{
  PetscFunctionBegin;
#if DDNN_WITH_CUDA
  if (b->memtype == DD_MEMTYPE_DEVICE) PetscCall(DDBackendCudaCheckDevice_Private());
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DDBackendRegister_Private(const struct _p_DDBackend *b)
DD_CXX_TRY
{
  PetscFunctionBegin;
  for (auto &e : Registry()) PetscCheck(std::string(e->name) != b->name, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Backend %s is already registered", b->name);
  Registry().emplace_back(new _p_DDBackend(*b));
  _p_DDBackend *n = Registry().back().get();
  for (int k = 0; k < DD_KERNEL_NKINDS; k++) {
    char ev[64];
    PetscCall(PetscSNPrintf(ev, sizeof(ev), "%s:%s", KernelKindNames[k], n->name + 1));
    PetscCall(PetscLogEventRegister(ev, DD_BACKEND_CLASSID, &n->events[k]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDBackendRegisterAll - Registers the backends compiled into this build: "/cpu/ref" (the reference
  loops, float32 and float64: the truth the others are checked against), "/cpu/blas" (GEMM-based
  kernels on BLAS), "/cpu/dnnl" (oneDNN, when built with it) and "/gpu/cuda" (when built with
  CUDA: device memory, vector operations, pointwise and GEMM kernels)

  Notes:
  Called by `DDInitializePackage()`; calling it again does nothing. "/gpu/cuda" is registered
  also where this process sees no CUDA device, so that its name is known; asking for it there
  (`DDBackendGet()`, -dd_backend) is an error saying so. The default backend is the
  fastest one built ("/cpu/dnnl", else "/cpu/blas"), or the one `-dd_backend` names.

  Level: developer

.seealso: `DDBackendSetDefault()`, `DDBackendView()`
@*/
/* the registrations of DDBackendRegisterAll(); a failure half-way is undone there */
static PetscErrorCode RegisterAll(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(PetscClassIdRegister("DD Backend", &DD_BACKEND_CLASSID));
  PetscCall(PetscRegisterFinalize(DDBackendFinalizePackage_Private));
  PetscCall(DDBackendCreate_Ref());
  PetscCall(DDBackendCreate_Blas());
#if DDNN_WITH_DNNL
  PetscCall(DDBackendCreate_Dnnl());
#endif
#if DDNN_WITH_CUDA
  PetscCall(DDBackendCreate_Cuda());
#endif
  defaultbackend = DDBackendLookup_Private(DDNN_WITH_DNNL ? "/cpu/dnnl" : "/cpu/blas");
  {
    char      name[64];
    PetscBool flg;
    PetscCall(PetscOptionsGetString(NULL, NULL, "-dd_backend", name, sizeof(name), &flg));
    if (flg) PetscCall(DDBackendSetDefault(name));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDBackendRegisterAll(void)
DD_CXX_TRY
{
  PetscErrorCode ierr;

  PetscFunctionBegin;
  if (registered) PetscFunctionReturn(PETSC_SUCCESS);
  registered = PETSC_TRUE; /* DDBackendSetDefault() looks the registered backends up */
  ierr       = RegisterAll();
  if (ierr) { /* a failure half-way (an allocation, an unknown -dd_backend): nothing stays registered and
                 no default backend is left NULL; the next call tries again */
    Registry().clear();
    registered     = PETSC_FALSE;
    defaultbackend = nullptr;
  }
  PetscCall(ierr);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDBackendFinalizePackage_Private(void)
DD_CXX_TRY
{
  PetscFunctionBegin;
  Registry().clear();
  registered = PETSC_FALSE;
  defaultbackend = nullptr;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDBackendGet - The backend registered under a resource name

  Not collective

  Input Parameter:
. name - "/cpu/ref", "/cpu/blas", "/cpu/dnnl" (the leading slash may be left out)

  Output Parameter:
. b - the backend

  Notes:
  A name this build does not have is an error: one ddnn knows (such as "/gpu/cuda" or "/cpu/dnnl")
  names the CMake option that builds it; any other lists the registered backends. A device
  backend ("/gpu/cuda") where this process sees no device is an error "no CUDA device".

  Level: intermediate

.seealso: `DDBackendSetDefault()`, `DDBackendView()`, `DDLayerSetBackend()`
@*/
PetscErrorCode DDBackendGet(const char name[], DDBackend *b)
DD_CXX_TRY
{
  std::string n = Normalize(name), known;

  PetscFunctionBegin;
  PetscValidPointer(b, 2);
  PetscCall(DDInitializePackage());
  PetscCall(DDBackendRegisterAll());
  for (auto &e : Registry())
    if (n == e->name) {
      PetscCall(DeviceCheck(e.get()));
      *b = e.get();
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  const char *opt = BuildOptionFor(n);
  PetscCheck(!opt, PETSC_COMM_SELF, PETSC_ERR_SUP, "Backend %s is not in this build of ddnn: configure it with %s", n.c_str(), opt);
  for (auto &e : Registry()) known += std::string(known.empty() ? "" : ", ") + e->name;
  SETERRQ(PETSC_COMM_SELF, PETSC_ERR_ARG_UNKNOWN_TYPE, "Unknown backend \"%s\"; this build has %s", name ? name : "(null)", known.c_str());
}
DD_CXX_CATCH

/*@C
  DDBackendGetName - The resource name of a backend

  Not collective

  Level: intermediate

.seealso: `DDBackendGet()`
@*/
PetscErrorCode DDBackendGetName(DDBackend b, const char *name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidPointer(b, 1);
  *name = b->name;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDBackendGetMemType - The memory a backend computes in

  Not collective

  Input Parameter:
. b - the backend (`DDBackendGet()`)

  Output Parameter:
. mtype - `DD_MEMTYPE_HOST` for the /cpu backends, `DD_MEMTYPE_DEVICE` for /gpu/cuda

  Notes:
  A program that runs on the CPU or the GPU by options alone creates its input tensors in the
  memory of the default backend (`DDBackendGetDefault()`, -dd_backend) with `DDTensorSetMemType()`;
  the layers set up on device tensors then compute on /gpu/cuda.

  Level: intermediate

.seealso: `DDBackendGet()`, `DDBackendGetDefault()`, `DDTensorSetMemType()`
@*/
PetscErrorCode DDBackendGetMemType(DDBackend b, DDMemType *mtype)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidPointer(b, 1);
  PetscValidPointer(mtype, 2);
  *mtype = b->memtype;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDBackendSetDefault - Chooses the backend that layers use unless they are given their own

  Logically collective (give every rank the same name)

  Input Parameter:
. name - a resource name: "/cpu/ref", "/cpu/blas" or "/cpu/dnnl"

  Options Database Key:
. -dd_backend <name> - read when ddnn initializes

  Notes:
  A backend provides what it can and falls back for the rest, by element type and geometry:
  "/cpu/dnnl" (oneDNN: float32 convolution, pooling, GEMM) falls back to "/cpu/blas" (GEMM-based
  convolution and dense layers in float32 and float64, fast pooling, interpolation and pointwise
  loops), which falls back to "/cpu/ref" (the reference loops). Layers set up before the call
  keep their kernels. A backend this build lacks is an error naming the CMake option that builds it.

  Level: intermediate

.seealso: `DDBackendGetDefault()`, `DDLayerSetBackend()`, `DDBackendView()`
@*/
PetscErrorCode DDBackendSetDefault(const char name[])
DD_CXX_TRY
{
  DDBackend b;

  PetscFunctionBegin;
  PetscCall(DDBackendGet(name, &b));
  defaultbackend = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDBackendGetDefault - The resource name of the default backend

  Not collective

  Level: intermediate

.seealso: `DDBackendSetDefault()`
@*/
PetscErrorCode DDBackendGetDefault(const char *name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDInitializePackage());
  PetscCall(DDBackendRegisterAll());
  *name = defaultbackend->name;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDBackendView - Lists the backends of this build, their fallbacks and the kernels each provides

  Collective on the viewer

  Level: intermediate

.seealso: `DDBackendSetDefault()`
@*/
PetscErrorCode DDBackendView(PetscViewer viewer)
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscCall(DDBackendRegisterAll());
  if (!viewer) viewer = PETSC_VIEWER_STDOUT_WORLD;
  PetscCall(PetscViewerASCIIPrintf(viewer, "ddnn backends (default %s):\n", defaultbackend->name));
  PetscCall(PetscViewerASCIIPushTab(viewer));
  for (auto &e : Registry()) {
    auto has = [](const auto &t) {
      std::string r;
      if (t.convcreate) r += " conv";
      if (t.poolcreate) r += " pool";
      if (t.affinefwd) r += " gemm";
      if (t.upsamplefwd) r += " upsample";
      if (t.actfwd) r += " pointwise";
      if (t.normmoments) r += " norm";
      if (t.sgdupdate) r += " optimizer";
      return r.empty() ? std::string(" -") : r;
    };
    PetscCall(PetscViewerASCIIPrintf(viewer, "%s: %s; %s memory; falls back to %s\n", e->name, e->description, DDMemTypes[e->memtype], e->fallback[0] ? e->fallback : "nothing"));
    PetscCall(PetscViewerASCIIPrintf(viewer, "  float32:%s; float64:%s\n", has(e->f32).c_str(), has(e->f64).c_str()));
  }
  PetscCall(PetscViewerASCIIPopTab(viewer));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

DDBackend ddnn::DDBackendNext_Private(DDBackend b)
{
  if (!b || !b->fallback[0]) return nullptr;
  for (auto &e : Registry())
    if (std::string(e->name) == b->fallback) return e.get();
  return nullptr;
}

PetscErrorCode ddnn::DDBackendMissing_Private(DDBackend b, DDDataType dt, DDKernelKind kind)
{
  PetscFunctionBegin;
  SETERRQ(PETSC_COMM_SELF, PETSC_ERR_SUP, "No backend along the chain from %s has a %s kernel for %s", b->name, KernelKindNames[kind], DDDataTypes[dt]);
}

PetscErrorCode ddnn::DDBackendConvFormats(DDBackend b, DDDataType dt, const ConvGeom &q, bool transposed, DDTensorFormat *xf, PetscInt *xbs, DDTensorFormat *yf, PetscInt *ybs, DDBackend *which)
{
  PetscFunctionBegin;
  for (DDBackend w = b; w; w = DDBackendNext_Private(w)) {
    auto fn = dt == DD_FLOAT32 ? w->f32.convformats : w->f64.convformats;
    bool ok = false;
    if (!fn) continue;
    PetscCall(fn(q, transposed, xf, xbs, yf, ybs, &ok));
    if (ok) {
      *which = w;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  PetscCall(DDBackendMissing_Private(b, dt, DD_KERNEL_CONV));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the first backend along b's chain whose factory (member m of its table for spec's dtype) accepts spec */
template <class Spec, class K, class F32, class F64>
static PetscErrorCode CreateAlongChain(DDBackend b, const Spec &spec, std::unique_ptr<K> *k, F32 KernelTable<float>::*m32, F64 KernelTable<double>::*m64, DDKernelKind kind)
{
  const DDDataType dt = spec.x.t->dtype;

  PetscFunctionBegin;
  k->reset();
  for (DDBackend w = b; w; w = DDBackendNext_Private(w)) {
    if (dt == DD_FLOAT32 ? !(w->f32.*m32) : !(w->f64.*m64)) continue;
    PetscCall(dt == DD_FLOAT32 ? (w->f32.*m32)(spec, k) : (w->f64.*m64)(spec, k));
    if (*k) PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DDBackendMissing_Private(b, dt, kind));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ddnn::DDBackendConvCreate(DDBackend b, const ConvKernelSpec &spec, std::unique_ptr<ConvKernel> *k)
{
  return CreateAlongChain(b, spec, k, &KernelTable<float>::convcreate, &KernelTable<double>::convcreate, DD_KERNEL_CONV);
}

PetscErrorCode ddnn::DDBackendConvWinograd(DDBackend b, DDDataType dt, const ConvGeom &q, bool transposed, bool passes[3])
{
  PetscFunctionBegin;
  passes[0] = passes[1] = passes[2] = false;
  for (DDBackend w = b; w; w = DDBackendNext_Private(w)) {
    const KernelTable<float>  &t32 = w->f32;
    const KernelTable<double> &t64 = w->f64;
    auto                       fn  = dt == DD_FLOAT32 ? t32.convwinograd : t64.convwinograd;
    if (fn) {
      if (fn(q, transposed, passes)) break; /* this backend takes q */
    } else if (dt == DD_FLOAT32 ? t32.convcreate != nullptr : t64.convcreate != nullptr) break; /* it takes q, without Winograd */
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ddnn::DDBackendPoolCreate(DDBackend b, const PoolKernelSpec &spec, std::unique_ptr<PoolKernel> *k)
{
  return CreateAlongChain(b, spec, k, &KernelTable<float>::poolcreate, &KernelTable<double>::poolcreate, DD_KERNEL_POOL);
}

PetscErrorCode ddnn::DDBackendFftCreate(DDBackend b, DDDataType dt, const FftKernelSpec &spec, std::unique_ptr<FftKernel> *k, DDBackend *which)
{
  PetscFunctionBegin;
  k->reset();
  for (DDBackend w = b; w; w = DDBackendNext_Private(w)) {
    auto fn = dt == DD_FLOAT32 ? w->f32.fftcreate : w->f64.fftcreate;
    if (!fn) continue;
    PetscCall(fn(spec, k));
    if (*k) {
      *which = w;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  }
  PetscCall(DDBackendMissing_Private(b, dt, DD_KERNEL_FFT));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ---------------------------------------------------------------------------------------- */
/* host memory: every CPU backend's                                                         */
/* zeroed; from the shared arena with -dd_exchange_direct (src/sys/shmarena.hpp: on-node partners read it in place) */
static PetscErrorCode HostMalloc(size_t n, void **p)
{
  PetscFunctionBegin;
  PetscCall(ddnn::ShmArenaMalloc(n, p));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode HostFree(void *p)
{
  PetscFunctionBegin;
  PetscCall(ddnn::ShmArenaFree(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode HostCopy(void *d, const void *s, size_t n)
{
  PetscFunctionBegin;
  if (n) PetscCall(PetscMemcpy(d, s, n));
  PetscFunctionReturn(PETSC_SUCCESS);
}
static PetscErrorCode HostSet(void *d, int v, size_t n)
{
  PetscFunctionBegin;
  if (n) memset(d, v, n);
  PetscFunctionReturn(PETSC_SUCCESS);
}
const struct _DDBackendMemOps ddnn::HostMemOps = {HostMalloc, HostFree, HostCopy, HostSet, HostMalloc, HostFree, nullptr};

/* the backend that owns the memory of type mt (not the host's: every CPU backend shares it) */
static PetscErrorCode MemoryBackend(DDMemType mt, DDBackend *b)
{
  PetscFunctionBegin;
  PetscCall(DDBackendRegisterAll());
  for (auto &e : Registry())
    if (e->memtype == mt) {
      PetscCall(DeviceCheck(e.get()));
      *b = e.get();
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  SETERRQ(PETSC_COMM_SELF, PETSC_ERR_SUP, "No backend of this build has %s memory: configure ddnn with -DDDNN_WITH_CUDA=ON", DDMemTypes[mt]);
}

/* the memory operations of a memory type (the host's, or the device backend's) */
PetscErrorCode ddnn::DDMemOps_Private(DDMemType mt, const struct _DDBackendMemOps **ops)
{
  DDBackend b;

  PetscFunctionBegin;
  if (mt == DD_MEMTYPE_HOST) *ops = &HostMemOps;
  else {
    PetscCall(MemoryBackend(mt, &b));
    *ops = &b->mem;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the vector operations of a memory type */
PetscErrorCode ddnn::DDVecOps_Private(DDMemType mt, const struct _DDBackendVecOps **ops)
{
  DDBackend b;

  PetscFunctionBegin;
  if (mt == DD_MEMTYPE_HOST) *ops = &HostVecOps;
  else {
    PetscCall(MemoryBackend(mt, &b));
    *ops = &b->vec;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* ---------------------------------------------------------------------------------------- */
/* the backend of a layer                                                                   */

/*@C
  DDLayerSetBackend - Chooses the backend whose kernels a layer runs

  Logically collective

  Input Parameters:
+ layer - the layer (before `DDLayerSetUp()`)
- name  - a resource name ("/cpu/ref", "/cpu/blas", "/cpu/dnnl"), or NULL for the default

  Options Database Key:
. -<prefix>dd_backend <name> - this layer's backend

  Notes:
  What the backend does not provide for the layer's element type and geometry comes from its
  fallback chain (see `DDBackendSetDefault()`); `DDLayerView()` names the kernels that run and
  -log_view times them as events "<Kind>:<backend>". A backend this build lacks is an error
  naming the CMake option that builds it.

  Level: intermediate

.seealso: `DDBackendSetDefault()`, `DDLayerGetBackend()`
@*/
PetscErrorCode DDLayerSetBackend(DDLayer layer, const char name[])
DD_CXX_TRY
{
  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCheck(!layer->setupcalled, PetscObjectComm((PetscObject)layer), PETSC_ERR_ARG_WRONGSTATE, "Set the backend of a layer before DDLayerSetUp()");
  if (!name) layer->backend = NULL;
  else PetscCall(DDBackendGet(name, &layer->backend));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@C
  DDLayerGetBackend - The resource name of the backend a layer uses (its own, or the default)

  Not collective

  Level: intermediate

.seealso: `DDLayerSetBackend()`
@*/
PetscErrorCode DDLayerGetBackend(DDLayer layer, const char *name[])
DD_CXX_TRY
{
  DDBackend b;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(layer, DD_LAYER_CLASSID, 1);
  PetscCall(DDLayerGetBackend_Private(layer, &b));
  *name = b->name;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PetscErrorCode DDLayerGetBackend_Private(DDLayer layer, DDBackend *b)
DD_CXX_TRY
{
  PetscFunctionBegin;
  if (layer->backend) *b = layer->backend;
  else PetscCall(DDBackendForMemType_Private(layer->memtype, b)); /* the default, or where the layer's tensors live */
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

DDBackend ddnn::DDBackendLookup_Private(const char name[])
{
  if (DDBackendRegisterAll()) return nullptr;
  for (auto &e : Registry())
    if (std::string(e->name) == name) return e.get();
  return nullptr;
}

PetscErrorCode ddnn::DDBackendDefault_Private(DDBackend *b)
{
  PetscFunctionBegin;
  PetscCall(DDInitializePackage());
  PetscCall(DDBackendRegisterAll());
  *b = defaultbackend;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The backend that computes on tensors in memory mt: the default (-dd_backend) where it computes in
  mt, else the first registered backend of that memory (device memory: /gpu/cuda), so that device
  tensors run on the device without -dd_backend, as a host default backend would otherwise refuse
  them. A default that computes in device memory is kept for host tensors: the callers' checks then
  say that the backend and the tensors disagree (a device backend asked for is never replaced by a
  host one in silence).
*/
PetscErrorCode ddnn::DDBackendForMemType_Private(DDMemType mt, DDBackend *b)
{
  PetscFunctionBegin;
  PetscCall(DDBackendDefault_Private(b));
  if ((*b)->memtype == mt || mt == DD_MEMTYPE_HOST) PetscFunctionReturn(PETSC_SUCCESS);
  for (auto &e : Registry())
    if (e->memtype == mt) {
      *b = e.get();
      PetscFunctionReturn(PETSC_SUCCESS);
    }
  SETERRQ(PETSC_COMM_SELF, PETSC_ERR_SUP, "No backend of this build computes in %s memory (configure with -DDDNN_WITH_CUDA=ON)", DDMemTypes[mt]);
}
