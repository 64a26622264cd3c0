/*
  The C interface of the C++ code (issue 13: nothing silent). A C++ exception must not cross a C
  entry point: a std::bad_alloc from a std::vector or std::string sized by the user's shapes, file
  contents or option lists would end the program (std::terminate, "a crash") instead of returning
  an error that the caller (C, Fortran, or C++ through PetscCall) can handle. The C entry points of
  the modules written in C++ (network set-up, forward, backward and training, the weights,
  checkpoint, data set and HDF5 I/O, the performance model) are function-try-blocks:

    PetscErrorCode DDNetForward(DDNet net, PetscInt n, DDTensor xs[])
    DD_CXX_TRY
    {
      PetscFunctionBegin;
      ...
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    DD_CXX_CATCH

  std::bad_alloc (and std::length_error, a request beyond std::vector's maximum size) becomes
  PETSC_ERR_MEM, "Out of memory: a C++ allocation failed in DDNetForward() (std::bad_alloc)",
  any other std::exception PETSC_ERR_LIB with its text; both on PETSC_COMM_SELF, raised on the
  rank that threw, through the error handler in effect, by the innermost entry point the exception
  reached (the traceback shows the calls above it). Every C entry point of the library and of the
  binding ABI is written so.

  What the library was doing is added from the CxxErrorContext objects alive at the throw, innermost
  first: a layer's set-up names the layer, its input's shape and its size on this rank; a network's
  forward and backward name the layer they were running:

    Out of memory: a C++ allocation failed in DDPrimitiveSetUp() (std::bad_alloc) while setting up
    layer "c1" (conv) on an input of global shape 8x16x32x32, 8192 entries on this rank, in
    DDNetSetUp() of the network "unet_"
*/
#pragma once
#include <petscsys.h>
#include <exception>

namespace ddnn
{
/* raises the PETSc error for a C++ exception caught at the C entry point func */
PetscErrorCode CxxError_Private(int line, const char func[], const char file[], const std::exception &e);

/* What the library is doing while it lives (on this thread): describe(ctx, buf, len) writes a clause
   ("while setting up layer ...") that CxxError_Private() adds to its message. Allocates nothing. */
class CxxErrorContext
{
public:
  typedef void (*Describe)(const void *ctx, char buf[], size_t len);
  CxxErrorContext(Describe describe, const void *ctx) noexcept;
  ~CxxErrorContext();
  CxxErrorContext(const CxxErrorContext &)            = delete;
  CxxErrorContext &operator=(const CxxErrorContext &) = delete;

  /* the clauses of the contexts alive now, innermost first, each with a leading space and separated by
     commas; "" if none */
  static void Describe_Private(char buf[], size_t len);

private:
  Describe         describe_;
  const void      *ctx_;
  CxxErrorContext *prev_;
};
} // namespace ddnn

#define DD_CXX_TRY try
#define DD_CXX_CATCH \
  catch (const std::exception &dd_cxx_exception) \
  { \
    return ddnn::CxxError_Private(__LINE__, PETSC_FUNCTION_NAME, __FILE__, dd_cxx_exception); \
  }
