/*
  DDOPTIMIZERSGD: stochastic gradient descent with momentum, Nesterov momentum and coupled
  weight decay, PyTorch's rule (torch.optim.SGD). The loop is a backend kernel
  (src/backend/cpu/optimizer_kernels.cxx, SGDUpdate).
*/
#include <ddnn/private/ddoptimizerimpl.h>
#include <backend/interface/backends.hpp>
#include <backend/cpu/optimizer_kernels.hpp> /* StateValid: the checks of a restored state */
#include <tensor/layout.hpp>

using namespace ddnn;

/*MC
  DDOPTIMIZERSGD - "sgd": stochastic gradient descent with momentum, Nesterov momentum and coupled weight decay (torch.optim.SGD)

  g += wd p; buf = m buf + g (buf = g at the first step); p -= lr (Nesterov: g + m buf, else buf).
  State per parameter: "momentum_buffer".

  Options Database Keys:
+ -optimizer_lr <lr> - learning rate
. -optimizer_momentum <m> - momentum
. -optimizer_nesterov - Nesterov momentum
- -optimizer_weight_decay <wd> - weight decay

  Level: beginner

.seealso: `DDOPTIMIZERADAM`, `DDOptimizerSetMomentum()`, `DDOptimizerSetType()`
M*/

static PetscErrorCode DDOptimizerSetFromOptions_SGD(DDOptimizer opt, PetscOptionItems *PetscOptionsObject)
{
  PetscReal m    = opt->momentum;
  PetscBool nest = opt->nesterov;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDOptimizer sgd options");
  PetscCall(PetscOptionsReal("-optimizer_momentum", "SGD momentum", "DDOptimizerSetMomentum", m, &m, NULL));
  PetscCall(PetscOptionsBool("-optimizer_nesterov", "Nesterov momentum", "DDOptimizerSetMomentum", nest, &nest, NULL));
  PetscCall(DDOptimizerSetMomentum(opt, m, nest));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDOptimizerSetUp_SGD(DDOptimizer opt)
{
  PetscFunctionBegin;
  opt->nstate = 1;
  for (PetscInt i = 0; i < (PetscInt)opt->params->size(); i++) PetscCall(DDOptimizerAddState_Private(opt, i, "momentum_buffer"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* n contiguous entries (DDOptimizerStepByArrays_Private() walks the parameters with it) */
static PetscErrorCode DDOptimizerStepArrays_SGD(DDOptimizer opt, PetscReal lr, DDDataType dt, PetscInt n, void *p, const void *g, void *const s[])
{
  SGDCoefficients c;

  PetscFunctionBegin;
  c.lr           = lr;
  c.momentum     = opt->momentum;
  c.weight_decay = opt->weight_decay;
  c.nesterov     = opt->nesterov ? true : false;
  c.first        = opt->step == 1;
  DDBackend be; /* the update loops of the default backend's chain, or of the parameters' memory (device: /gpu/cuda) */
  PetscCall(DDBackendForMemType_Private(opt->memtype, &be));
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    DDBackend which;
    decltype(KernelTable<T>::sgdupdate) fn;
    PetscCall(DDBackendFind<T>(be, &KernelTable<T>::sgdupdate, DD_KERNEL_OPTIMIZER, &fn, &which));
    KernelEvent e(which, DD_KERNEL_OPTIMIZER);
    fn(n, (T *)p, (const T *)g, (T *)s[0], c);
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the momentum buffer must be finite */
static PetscErrorCode DDOptimizerCheckState_SGD(DDOptimizer opt)
{
  PetscInt bad = -1;

  PetscFunctionBegin;
  for (PetscInt i = 0; i < (PetscInt)opt->params->size() && bad < 0; i++) {
    DDTensor buf;
    bool     ok = true;
    PetscCall(DDOptimizerGetParameterState_Private(opt, i, 0, &buf));
    void *h; /* a device tensor: its host copy */
    PetscCall(DDTensorGetHostArray_Private(buf, &h));
    PetscCall(DispatchType(buf->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      ForEachBulkRun(buf->layout, [&](PetscInt off, PetscInt len) { ok = ok && StateValid<T>(len, (const T *)h + off, false); });
      return PETSC_SUCCESS;
    }));
    PetscCall(DDTensorRestoreHostArray_Private(buf, PETSC_FALSE, &h));
    if (!ok) bad = i;
  }
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPIU_INT, MPI_MAX, PetscObjectComm((PetscObject)opt)));
  PetscCheck(bad < 0, PetscObjectComm((PetscObject)opt), PETSC_ERR_FP, "The sgd momentum_buffer of parameter %" PetscInt_FMT " holds a non-finite value", bad);
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDOptimizerView_SGD(DDOptimizer opt, PetscViewer viewer)
{
  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "momentum %g%s\n", (double)opt->momentum, opt->nesterov ? " (Nesterov)" : ""));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PETSC_EXTERN PetscErrorCode DDOptimizerCreate_SGD(DDOptimizer opt)
{
  PetscFunctionBegin;
  opt->ops->setfromoptions = DDOptimizerSetFromOptions_SGD;
  opt->ops->setup          = DDOptimizerSetUp_SGD;
  opt->ops->step           = DDOptimizerStepByArrays_Private;
  opt->ops->steparrays     = DDOptimizerStepArrays_SGD;
  opt->ops->checkstate     = DDOptimizerCheckState_SGD;
  opt->ops->view           = DDOptimizerView_SGD;
  PetscFunctionReturn(PETSC_SUCCESS);
}
