/*
  The loss layer's local passes and the dropout masks of /gpu/cuda (issue 11): the kernels of
  losskernels.cu on device tensors, with the semantics of the host loops (src/backend/reference/
  loss_ref.cxx). The class weights are uploaded once; the forward's sums are deterministic block
  sums in double (so not the host's bits: equal to rounding).
*/
#include <sys/ddcxx.hpp>
#include <backend/interface/backends.hpp>
#include <backend/cuda/backend_cuda.hpp>
#include <backend/cuda/losskernels.hpp>
#include <tensor/layout.hpp>
#include <type_traits>

using namespace ddnn;

namespace
{
/* a layout as the kernels address it: bulk extents, halo offsets, strides, blocking */
cuda::Layout Full(const DDLayout &L)
{
  cuda::Layout c;
  c.order  = (int)L.order;
  c.bdim   = (int)L.bdim;
  c.bs     = (int)(L.bs > 0 ? L.bs : 1);
  c.bulk   = L.bulksize;
  c.contig = false;
  for (PetscInt k = 0; k < L.order; k++) {
    c.n[k]      = L.n[k];
    c.lo[k]     = L.lo[k];
    c.stride[k] = L.stride[k];
  }
  return c;
}

template <class T>
class CudaLossKernel : public LossKernel
{
public:
  ~CudaLossKernel() override
  {
    if (w) (void)backend->mem.free(w);
    if (work) (void)backend->mem.free(work);
  }
  const char *Name() const override { return "CUDA loss kernels"; }

  PetscErrorCode SetUp(const LossKernelSpec &spec)
  {
    PetscFunctionBegin;
    s       = spec;
    backend = DDBackendLookup_Private("/gpu/cuda");
    Wt      = 0;
    for (double v : s.weights) Wt += v;
    if (!s.weights.empty()) {
      PetscCall(backend->mem.malloc(sizeof(double) * s.weights.size(), (void **)&w));
      PetscCall(backend->mem.copy(w, s.weights.data(), sizeof(double) * s.weights.size()));
    }
    PetscCall(backend->mem.malloc(sizeof(double) * (size_t)cuda::LossWorkSize(cuda::LossArgs()), (void **)&work));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Forward(DDTensor p, DDTensor t, DDTensor y, double *sum, double *den, PetscInt *nbad, double *bad) override
  {
    KernelEvent e(backend, DD_KERNEL_LOSS);
    double      out[4];

    PetscFunctionBegin;
    *sum = 0, *nbad = 0;
    if (!p->active || !p->layout.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
    PetscCall(DDBackendCudaCheckPending_Private());
    cuda::LossArgs a = Args(p, t);
    if (y) a.y = Full(y->layout), a.hasy = true;
    const cudaError_t r = cuda::LossForward<T>(a, (const T *)p->array, (const T *)t->array, y ? (T *)y->array : nullptr, work, out);
    PetscCheck(r == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: the loss forward kernel failed: %s", cudaGetErrorString(r));
    *sum = out[0];
    if (s.type == DD_LOSS_CROSSENTROPY) *den = out[1];
    *nbad = (PetscInt)out[2];
    if (*nbad) *bad = out[3];
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Backward(DDTensor p, DDTensor t, DDTensor dy, double g0, DDTensor dp, DDTensor dt, bool, bool) override
  {
    KernelEvent e(backend, DD_KERNEL_LOSS);

    PetscFunctionBegin;
    if (!p->active || !p->layout.bulksize || (!dp && !dt)) PetscFunctionReturn(PETSC_SUCCESS);
    PetscCall(DDBackendCudaCheckPending_Private());
    cuda::LossArgs a = Args(p, t);
    if (dy) a.dy = Full(dy->layout), a.hasdy = true;
    if (dp) a.dp = Full(dp->layout), a.hasdp = true;
    if (dt) a.dt = Full(dt->layout), a.hasdt = true;
    const cudaError_t r = cuda::LossBackward<T>(a, (const T *)p->array, (const T *)t->array, dy ? (const T *)dy->array : nullptr, g0, dp ? (T *)dp->array : nullptr, dt ? (T *)dt->array : nullptr);
    PetscCheck(r == cudaSuccess, PETSC_COMM_SELF, PETSC_ERR_LIB, "/gpu/cuda: the loss backward kernel failed: %s", cudaGetErrorString(r));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  LossKernelSpec s;
  DDBackend      backend = nullptr;
  double        *w = nullptr, *work = nullptr, Wt = 0;

  cuda::LossArgs Args(DDTensor p, DDTensor t) const
  {
    cuda::LossArgs a;
    a.type   = (int)s.type;
    a.prob   = s.prob;
    a.ignore = s.ignore;
    a.eps    = s.smoothing;
    a.w      = w;
    a.Wt     = w ? Wt : (double)p->layout.n[1];
    a.p      = Full(p->layout);
    a.t      = Full(t->layout);
    return a;
  }
};
} // namespace

template <class T>
PetscErrorCode DDBackendCudaLossCreate_Private(const LossKernelSpec &spec, std::unique_ptr<LossKernel> *k)
DD_CXX_TRY
{
  PetscFunctionBegin;
  auto c = std::make_unique<CudaLossKernel<T>>();
  PetscCall(c->SetUp(spec));
  *k = std::move(c);
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/* the dropout masks on the device: the entry's global index from the piece's start and the global shape */
template <class T>
void DDBackendCudaDropout_Private(uint64_t key, double p, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, const PetscInt shape[])
{
  int64_t start[DD_MAX_DIM] = {0}, gs[DD_MAX_DIM] = {0};
  const PetscInt d = Lx.order;
  if (d <= 0 || !Lx.bulksize) return;
  gs[d - 1] = 1;
  for (PetscInt k = d - 2; k >= 0; k--) gs[k] = gs[k + 1] * shape[k + 1];
  for (PetscInt k = 0; k < d; k++) start[k] = Lx.start[k];
  const cudaError_t e = cuda::Dropout<T>(key, p, Full(Lx), x, Full(Ly), y, start, gs);
  if (e != cudaSuccess) DDBackendCudaPend_Private("the dropout kernel", cudaGetErrorString(e));
}

template PetscErrorCode DDBackendCudaLossCreate_Private<float>(const LossKernelSpec &, std::unique_ptr<LossKernel> *);
template PetscErrorCode DDBackendCudaLossCreate_Private<double>(const LossKernelSpec &, std::unique_ptr<LossKernel> *);
template void           DDBackendCudaDropout_Private<float>(uint64_t, double, const DDLayout &, const float *, const DDLayout &, float *, const PetscInt[]);
template void           DDBackendCudaDropout_Private<double>(uint64_t, double, const DDLayout &, const double *, const DDLayout &, double *, const PetscInt[]);
