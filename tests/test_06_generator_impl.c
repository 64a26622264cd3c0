/*
  A public function that only the scratch headers of test_06_generator declare: the generator must
  bind it (ABI shim and Fortran subroutine) with no other edit.
*/
#include <ddtensor.h>

PETSC_EXTERN PetscErrorCode DDTensorScratchShift(DDTensor t, PetscInt shift, PetscReal *v)
{
  PetscInt n;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(t, DD_TENSOR_CLASSID, 1);
  PetscValidRealPointer(v, 3);
  PetscCall(DDTensorGetSize(t, &n));
  *v = (PetscReal)(n + shift);
  PetscFunctionReturn(PETSC_SUCCESS);
}
