/*
  PetscSF helpers shared by the repartition and halo primitives (C++ only).
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <petscsf.h>
#include <vector>

namespace ddnn
{
/*
  Builds an SF whose roots are the storage offsets of the bulk entries of `owner` (the root
  tensor's layout on each rank) and whose leaves are entries of a local array.

  Each leaf i is given as ilocal[i] (offset in the leaf array) and (rank, index) where index is
  the C-order index of the entry within the bulk of the owner rank's piece. The owners'
  storage offsets (which depend on their halos and formats) are fetched with one
  broadcast over a first SF, so no rank needs another rank's layout.
*/
PetscErrorCode BuildStorageSF(MPI_Comm comm, DDTensor owner, std::vector<PetscInt> &ilocal, std::vector<PetscSFNode> &iremote, PetscSF *sf);

/* Owner coordinate of global index i along dimension k of tensor t (-1 if outside [0, n)) */
PetscInt OwnerCoordinate(DDTensor t, PetscInt k, PetscInt i);

/* (rank, C-order index within the owner's bulk) of a global index, owner coordinates given */
void OwnerOf(DDTensor t, const PetscInt coords[], const PetscInt g[], PetscMPIInt *rank, PetscInt *index);
} // namespace ddnn
