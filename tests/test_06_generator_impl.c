/*
  A public function that only the scratch headers of test_06_generator declare: the generator must
  bind it (ABI shim and Fortran subroutine) with no other edit.
*/
#include <ddtensor.h>

PETSC_EXTERN PetscErrorCode DDTensorScratchShift(DDTensor t, PetscInt shift, PetscReal *v)
{
  PetscInt n;

  PetscFunctionBegin;
  PetscCheck(v, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "Null output (argument 3)");
  PetscCall(DDTensorGetSize(t, &n));
  *v = (PetscReal)(n + shift);
  PetscFunctionReturn(PETSC_SUCCESS);
}
