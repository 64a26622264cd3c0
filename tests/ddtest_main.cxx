#include "ddtest.hpp"

int main(int argc, char **argv)
{
  ::testing::InitGoogleTest(&argc, argv);
  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  if (ddtest::Rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() ? 1 : 0, anyfailed = 0;
  MPI_Allreduce(&failed, &anyfailed, 1, MPI_INT, MPI_MAX, PETSC_COMM_WORLD);
  if (ddtest::Rank() == 0 && anyfailed && !failed) printf("[  FAILED  ] a test failed on another rank\n");
  PetscCall(DDFinalize());
  return anyfailed;
}
