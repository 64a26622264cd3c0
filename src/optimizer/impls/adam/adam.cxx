/*
  DDOPTIMIZERADAM: Adam with bias corrections and coupled (L2) weight decay, PyTorch's rule
  (torch.optim.Adam). The loop is a backend kernel (src/backend/cpu/optimizer_kernels.cxx,
  AdamUpdate).
*/
#include <sys/ddcxx.hpp>
#include <optimizer/impls/adam/adam.hpp>
#include <backend/interface/backends.hpp>
#include <backend/cpu/optimizer_kernels.hpp> /* StateValid: the checks of a restored state */
#include <tensor/layout.hpp>
#include <cmath>

using namespace ddnn;

/*MC
  DDOPTIMIZERADAM - "adam": Adam with bias corrections and coupled (L2) weight decay (torch.optim.Adam)

  g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  at step t. State per parameter: "exp_avg" (m) and "exp_avg_sq" (v).

  Options Database Keys:
+ -optimizer_beta1, -optimizer_beta2, -optimizer_eps - the moments' decay and the denominator's epsilon
- -optimizer_weight_decay <wd> - L2 penalty added to the gradient

  Level: beginner

.seealso: `DDOPTIMIZERADAMW`, `DDOptimizerSetBetas()`, `DDOptimizerSetType()`
M*/

static PetscErrorCode DDOptimizerSetFromOptions_Adam(DDOptimizer opt, PetscOptionItems *PetscOptionsObject)
{
  PetscReal b1 = opt->beta1, b2 = opt->beta2, eps = opt->eps;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDOptimizer adam options");
  PetscCall(PetscOptionsReal("-optimizer_beta1", "Adam beta1", "DDOptimizerSetBetas", b1, &b1, NULL));
  PetscCall(PetscOptionsReal("-optimizer_beta2", "Adam beta2", "DDOptimizerSetBetas", b2, &b2, NULL));
  PetscCall(PetscOptionsReal("-optimizer_eps", "Adam epsilon", "DDOptimizerSetBetas", eps, &eps, NULL));
  PetscCall(DDOptimizerSetBetas(opt, b1, b2, eps));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDOptimizerSetUp_Adam(DDOptimizer opt)
{
  PetscFunctionBegin;
  opt->nstate = 2;
  for (PetscInt i = 0; i < (PetscInt)opt->params->size(); i++) {
    PetscCall(DDOptimizerAddState_Private(opt, i, "exp_avg"));
    PetscCall(DDOptimizerAddState_Private(opt, i, "exp_avg_sq"));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* n contiguous entries (DDOptimizerStepByArrays_Private() walks the parameters with it) */
static PetscErrorCode DDOptimizerStepArrays_Adam(DDOptimizer opt, PetscReal lr, DDDataType dt, PetscInt n, void *p, const void *g, void *const s[])
{
  DDOptimizer_Adam *adam = (DDOptimizer_Adam *)opt->data;
  AdamCoefficients  c;

  PetscFunctionBegin;
  c.lr           = lr;
  c.beta1        = opt->beta1;
  c.beta2        = opt->beta2;
  c.eps          = opt->eps;
  c.weight_decay = opt->weight_decay;
  c.bc1          = 1 - std::pow((double)opt->beta1, (double)opt->step);
  c.bc2          = 1 - std::pow((double)opt->beta2, (double)opt->step);
  c.decoupled    = adam->decoupled ? true : false;
  DDBackend be; /* the update loops of the default backend's chain, or of the parameters' memory (device: /gpu/cuda) */
  PetscCall(DDBackendForMemType_Private(opt->memtype, &be));
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    DDBackend which;
    decltype(KernelTable<T>::adamupdate) fn;
    PetscCall(DDBackendFind<T>(be, &KernelTable<T>::adamupdate, DD_KERNEL_OPTIMIZER, &fn, &which));
    KernelEvent e(which, DD_KERNEL_OPTIMIZER);
    fn(n, (T *)p, (const T *)g, (T *)s[0], (T *)s[1], c);
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the moments must be finite and the second moment non-negative (its square root is taken) */
static PetscErrorCode DDOptimizerCheckState_Adam(DDOptimizer opt)
{
  PetscInt bad[2] = {-1, -1}; /* parameter, moment */

  PetscFunctionBegin;
  for (PetscInt i = 0; i < (PetscInt)opt->params->size() && bad[0] < 0; i++) {
    for (PetscInt k = 0; k < 2 && bad[0] < 0; k++) {
      DDTensor s;
      bool     ok = true;
      PetscCall(DDOptimizerGetParameterState_Private(opt, i, k, &s));
      void *h; /* a device tensor: its host copy */
      PetscCall(DDTensorGetHostArray_Private(s, &h));
      PetscCall(DispatchType(s->dtype, [&](auto z) -> PetscErrorCode {
        using T = decltype(z);
        ForEachBulkRun(s->layout, [&](PetscInt off, PetscInt len) { ok = ok && StateValid<T>(len, (const T *)h + off, k == 1); });
        return PETSC_SUCCESS;
      }));
      PetscCall(DDTensorRestoreHostArray_Private(s, PETSC_FALSE, &h));
      if (!ok) {
        bad[0] = i;
        bad[1] = k;
      }
    }
  }
  PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, bad, 2, MPIU_INT, MPI_MAX, PetscObjectComm((PetscObject)opt)));
  PetscCheck(bad[0] < 0, PetscObjectComm((PetscObject)opt), PETSC_ERR_FP, "The %s %s of parameter %" PetscInt_FMT " holds %s", ((PetscObject)opt)->type_name, bad[1] ? "exp_avg_sq" : "exp_avg", bad[0], bad[1] ? "a negative or non-finite value" : "a non-finite value");
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDOptimizerView_Adam(DDOptimizer opt, PetscViewer viewer)
{
  DDOptimizer_Adam *adam = (DDOptimizer_Adam *)opt->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "betas (%g, %g), eps %g, %s weight decay\n", (double)opt->beta1, (double)opt->beta2, (double)opt->eps, adam->decoupled ? "decoupled" : "coupled (L2)"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode DDOptimizerDestroy_Adam(DDOptimizer opt)
{
  PetscFunctionBegin;
  PetscCall(PetscFree(opt->data));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode DDOptimizerCreate_Adam_Private(DDOptimizer opt, PetscBool decoupled)
DD_CXX_TRY
{
  DDOptimizer_Adam *adam;

  PetscFunctionBegin;
  PetscCall(PetscNew(&adam));
  adam->decoupled          = decoupled;
  opt->data                = adam;
  opt->ops->setfromoptions = DDOptimizerSetFromOptions_Adam;
  opt->ops->setup          = DDOptimizerSetUp_Adam;
  opt->ops->step           = DDOptimizerStepByArrays_Private;
  opt->ops->steparrays     = DDOptimizerStepArrays_Adam;
  opt->ops->checkstate     = DDOptimizerCheckState_Adam;
  opt->ops->view           = DDOptimizerView_Adam;
  opt->ops->destroy        = DDOptimizerDestroy_Adam;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

PETSC_EXTERN PetscErrorCode DDOptimizerCreate_Adam(DDOptimizer opt)
{
  PetscFunctionBegin;
  PetscCall(DDOptimizerCreate_Adam_Private(opt, PETSC_FALSE));
  PetscFunctionReturn(PETSC_SUCCESS);
}
