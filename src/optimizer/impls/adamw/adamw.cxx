/*
  DDOPTIMIZERADAMW: Adam with decoupled weight decay (torch.optim.AdamW), Adam's implementation
  (src/optimizer/impls/adam) with the decay applied to the parameter instead of the gradient.
*/
#include <optimizer/impls/adam/adam.hpp>

/*MC
  DDOPTIMIZERADAMW - "adamw": Adam with decoupled weight decay (torch.optim.AdamW): p *= 1 - lr wd before the Adam step

  State per parameter: "exp_avg" and "exp_avg_sq", as `DDOPTIMIZERADAM`.

  Options Database Keys:
+ -optimizer_beta1, -optimizer_beta2, -optimizer_eps - as adam
- -optimizer_weight_decay <wd> - the decoupled decay

  Level: beginner

.seealso: `DDOPTIMIZERADAM`, `DDOptimizerSetType()`
M*/

PETSC_EXTERN PetscErrorCode DDOptimizerCreate_AdamW(DDOptimizer opt)
{
  PetscFunctionBegin;
  PetscCall(DDOptimizerCreate_Adam_Private(opt, PETSC_TRUE));
  PetscFunctionReturn(PETSC_SUCCESS);
}
