/*
  ddtest.hpp - GoogleTest under MPI for ddnn's suites.

  Every rank runs every test in the same order, so collective calls line up; only rank 0
  prints. A test fails on a rank when any EXPECT fails there, and the program's exit code
  is nonzero on every rank when any rank failed.
*/
#pragma once
#include <gtest/gtest.h>
#include <ddnn.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
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

/* The adjoint test (paper 000 eq. 26) of a primitive's shell Mat: <A u, v> = <u, A^T v> for random u, v
   (float64). The caller gets u and z = A u when it asks (and destroys them), e.g. to compare with Apply. */
inline void ExpectMatAdjoint(Mat A, Vec *uo = nullptr, Vec *zo = nullptr)
{
  Vec         u, v, w, z;
  PetscScalar a, b;
  DDT(MatCreateVecs(A, &u, &v));
  DDT(VecDuplicate(u, &w));
  DDT(VecDuplicate(v, &z));
  DDT(VecSetRandom(u, NULL));
  DDT(VecSetRandom(v, NULL));
  DDT(MatMult(A, u, z));
  DDT(MatMultTranspose(A, v, w));
  DDT(VecDot(z, v, &a));
  DDT(VecDot(u, w, &b));
  EXPECT_NEAR(a, b, 1e-12 * (1 + std::fabs(a)));
  DDT(VecDestroy(&v));
  DDT(VecDestroy(&w));
  if (uo) *uo = u;
  else DDT(VecDestroy(&u));
  if (zo) *zo = z;
  else DDT(VecDestroy(&z));
}

/* Removes a test's file (rank 0 removes it, every rank waits): a test leaves nothing in /tmp */
inline void RemoveTestFile(const std::string &f)
{
  MPI_Barrier(PETSC_COMM_WORLD);
  if (Rank() == 0) unlink(f.c_str());
  MPI_Barrier(PETSC_COMM_WORLD);
}

/* Every rank must agree that a condition holds (so a failure on one rank fails everywhere) */
inline bool AllTrue(bool v, MPI_Comm comm = PETSC_COMM_WORLD)
{
  int in = v ? 1 : 0, out;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

/* What a collective view prints (rank 0's output), on every rank: view(v) writes to an ASCII
   viewer on PETSC_COMM_WORLD opened on a fresh temporary file, which is removed afterwards. */
template <class F>
inline std::string ViewedText(F &&view)
{
  char        name[PETSC_MAX_PATH_LEN] = "/tmp/ddnn_test_viewXXXXXX";
  PetscViewer v;
  if (Rank() == 0) {
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
  }
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, PETSC_COMM_WORLD);
  DDT(PetscViewerASCIIOpen(PETSC_COMM_WORLD, name, &v));
  DDT(view(v));
  DDT(PetscViewerDestroy(&v));
  std::string text;
  int         len = 0;
  if (Rank() == 0) {
    std::ifstream f(name);
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    std::remove(name);
    len = (int)text.size();
  }
  MPI_Bcast(&len, 1, MPI_INT, 0, PETSC_COMM_WORLD);
  text.resize(len);
  MPI_Bcast(&text[0], len, MPI_CHAR, 0, PETSC_COMM_WORLD);
  return text;
}

/* The text of DDLayerView() (what rank 0 prints), on every rank */
inline std::string LayerViewText(DDLayer l)
{
  return ViewedText([&](PetscViewer v) { return DDLayerView(l, v); });
}

/* A Cartesian partition of PETSC_COMM_WORLD with the given shape, on the given ranks (by default the first ranks in order) */
inline DDPartition MakePart(std::vector<PetscInt> shape, std::vector<PetscMPIInt> ranks = {})
{
  DDPartition p;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, (PetscInt)shape.size(), shape.data(), ranks.empty() ? PETSC_DECIDE : (PetscInt)ranks.size(), ranks.empty() ? NULL : ranks.data(), &p));
  return p;
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
