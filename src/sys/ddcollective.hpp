/*
  Rank-consistency helpers (C++ only): the ranks of a communicator agree on a set-up decision
  that is no data movement (whether any rank needs a halo, a correction, a code path), so that
  every rank takes the same collective calls. Data movement of tensors goes through the
  primitives (paper 000 sec. 3), never through these.
*/
#pragma once
#include <petscsys.h>

/* *any = flag on some rank of comm (collective; the same on every rank) */
static inline PetscErrorCode DDAnyRank_Private(MPI_Comm comm, PetscBool flag, PetscBool *any)
{
  PetscFunctionBegin;
  PetscCall(MPIU_Allreduce(&flag, any, 1, MPIU_BOOL, MPI_LOR, comm));
  PetscFunctionReturn(PETSC_SUCCESS);
}
