/*
  Argument checks of the public C functions that hold in every build.

  PETSc's PetscValidHeaderSpecific() and PetscValidPointer() compile to nothing when PETSc is built
  without PETSC_USE_DEBUG (the distributions' optimized builds): a NULL object or output pointer
  then crashes (SIGSEGV) instead of returning an error. These checks are always on and cost a
  comparison; the message names the function, the argument's position and name:
    "DDTensorDot(): argument 3 (d) is NULL"
  They raise PETSC_ERR_ARG_NULL (PETSC_ERR_ARG_WRONG for an object of another class) on the rank
  that was given the bad argument, on PETSC_COMM_SELF, like PETSc's macros.
*/
#pragma once
#include <petsc/private/petscimpl.h>

/* a pointer argument (an output, or an input array) that must not be NULL */
#define DDCheckPointer(ptr, arg) PetscCheck((ptr) != NULL, PETSC_COMM_SELF, PETSC_ERR_ARG_NULL, "%s(): argument %d (%s) is NULL", PETSC_FUNCTION_NAME, (int)(arg), #ptr)

/* an object argument: not NULL and of the given class (then PETSc's own check, which does more in debug builds) */
#define DDCheckHeader(h, ck, arg) \
  do { \
    DDCheckPointer(h, arg); \
    PetscCheck(((PetscObject)(h))->classid == (ck), PETSC_COMM_SELF, PETSC_ERR_ARG_WRONG, "%s(): argument %d (%s) is not an object of the expected class (destroyed, or another kind of object)", PETSC_FUNCTION_NAME, (int)(arg), #h); \
    PetscValidHeaderSpecific(h, ck, arg); \
  } while (0)
