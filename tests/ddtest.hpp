/*
  ddtest.hpp - GoogleTest under MPI for ddnn's suites.

  Every rank runs every test in the same order, so collective calls line up; only rank 0
  prints. A test fails on a rank when any EXPECT fails there, and the program's exit code
  is nonzero on every rank when any rank failed.
*/
#pragma once
#include <gtest/gtest.h>
#include <ddnn.h>
#include <string>
#include <vector>

/* A library call that must succeed: on failure the test fails and the job aborts (no hang). */
#define DDT(call) \
  do { \
    PetscErrorCode _ierr = (call); \
    if (_ierr) { \
      ADD_FAILURE() << #call << " returned PETSc error " << _ierr; \
      MPI_Abort(PETSC_COMM_WORLD, 1); \
    } \
  } while (0)

namespace ddtest
{
inline PetscMPIInt Rank(MPI_Comm comm = PETSC_COMM_WORLD)
{
  PetscMPIInt r;
  MPI_Comm_rank(comm, &r);
  return r;
}
inline PetscMPIInt Size(MPI_Comm comm = PETSC_COMM_WORLD)
{
  PetscMPIInt s;
  MPI_Comm_size(comm, &s);
  return s;
}

/* Runs f() with PETSc's error handler returning instead of aborting; gives the error and its message. */
template <class F>
inline PetscErrorCode Catch(F &&f, std::string *msg = nullptr)
{
  PetscPushErrorHandler(PetscReturnErrorHandler, nullptr);
  PetscErrorCode ierr = f();
  PetscPopErrorHandler();
  if (msg) {
    const char *text;
    char       *spec = nullptr;
    PetscErrorMessage(ierr, &text, &spec);
    *msg = spec ? spec : "";
  }
  return ierr;
}

/* Every rank must agree that a condition holds (so a failure on one rank fails everywhere) */
inline bool AllTrue(bool v, MPI_Comm comm = PETSC_COMM_WORLD)
{
  int in = v ? 1 : 0, out;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

/* All factorizations of n into `parts` ordered factors */
inline void Factorizations(int n, int parts, std::vector<std::vector<PetscInt>> &out, std::vector<PetscInt> cur = {})
{
  if ((int)cur.size() == parts - 1) {
    cur.push_back(n);
    out.push_back(cur);
    return;
  }
  for (int f = 1; f <= n; f++)
    if (n % f == 0) {
      auto c = cur;
      c.push_back(f);
      Factorizations(n / f, parts, out, c);
    }
}
} // namespace ddtest

/*
  Expects `expr` (a PetscErrorCode expression) to fail with `code` on this rank, with a message
  containing `substr`.  Because each rank checks, the failure must happen on every rank.
*/
#define DD_EXPECT_ERROR(expr, code, substr) \
  do { \
    std::string    _m; \
    PetscErrorCode _e = ddtest::Catch([&]() -> PetscErrorCode { return (expr); }, &_m); \
    EXPECT_EQ((int)_e, (int)(code)) << "expected error " << (code) << " from " #expr ", message: " << _m; \
    EXPECT_NE(_m.find(substr), std::string::npos) << "message \"" << _m << "\" does not mention \"" << (substr) << "\""; \
  } while (0)

int main(int argc, char **argv);
