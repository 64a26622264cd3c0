/* Adam's implementation, shared by adamw (src/optimizer/impls/adamw), which differs only in
   where the weight decay enters. */
#pragma once
#include <ddnn/private/ddoptimizerimpl.h>

struct DDOptimizer_Adam {
  PetscBool decoupled; /* AdamW: decoupled weight decay */
};

PETSC_INTERN PetscErrorCode DDOptimizerCreate_Adam_Private(DDOptimizer, PetscBool);
