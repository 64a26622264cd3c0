/* A downstream program: a 2x2 partition and a tensor on it, from an installed ddnn. */
#include <ddnn.h>

int main(int argc, char **argv)
{
  DDPartition part;
  DDTensor    t;
  PetscInt    pshape[2] = {2, 2}, shape[2] = {10, 7};
  PetscReal   sum;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 2, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, DD_FLOAT64, 2, shape, &t));
  PetscCall(DDTensorSet(t, 1.0));
  PetscCall(DDTensorSum(t, &sum));
  PetscCheck(sum == 70.0, PETSC_COMM_WORLD, PETSC_ERR_PLIB, "sum %g should be 70", (double)sum);
  PetscCall(DDTensorView(t, PETSC_VIEWER_STDOUT_WORLD));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "downstream OK\n"));
  PetscCall(DDTensorDestroy(&t));
  PetscCall(DDPartitionDestroy(&part));
  PetscCall(DDFinalize());
  return 0;
}
