/*
  Helpers shared by the layer implementations (C++ only): building partitions and primitives,
  the ranks of a layer's work partition, and copies of tensors whose halos differ from the
  layouts a layer was set up for.
*/
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <vector>

namespace ddnn
{
/* a primitive of the given type set up between x and y */
PetscErrorCode MakePrimitive(MPI_Comm comm, DDPrimitiveType type, DDTensor x, DDTensor y, DDPrimitive *p);
/* a layer's halo exchange: the layer's options prefix, so -<prefix>primitive_halo_neighbors_only applies */
PetscErrorCode LayerHaloCreate(DDLayer l, DDPrimitive *H);
/* a partition of the given shape on the given ranks (worker order) */
PetscErrorCode MakePartition(MPI_Comm comm, const std::vector<PetscInt> &shape, const std::vector<PetscMPIInt> &ranks, DDPartition *p);
/*
  t itself when it is laid out as `layout` (the set-up layout), otherwise `*cache` (made once with
  that layout; filled from t when copy is true). Keep one cache per role: their layouts differ.
*/
PetscErrorCode ConformLayout(DDTensor t, DDTensor layout, DDTensor *cache, DDTensor *use, bool copy);
/*
  The same for a tensor distributed like t whose set-up layout (hash `hash`) differs from t's only
  in its halo widths lo, hi: the cache is t's duplicate with those halos.
*/
PetscErrorCode ConformHalo(DDTensor t, PetscInt64 hash, const PetscInt lo[], const PetscInt hi[], DDTensor *cache, DDTensor *use, bool copy);
/*
  The ranks of a work partition holding `copies` replicas of the workers of px (paper 000 Fig. 4-5:
  the input's workers copied over the output channels or features): replica 0 is px's workers, in
  worker order; the others take the lowest ranks px does not use. Errors when the communicator is
  too small, naming the layer's work partition.
*/
PetscErrorCode ReplicaRanks(MPI_Comm comm, DDPartition px, PetscInt copies, const char what[], std::vector<PetscMPIInt> &ranks);
/*
  Set-up shared by the sliding-window layers whose output keeps x's partition (pooling, upsampling):
  when any rank's window [a, b) (per spatial dimension, 3 - D leading unused) reaches beyond its
  piece, the halo exchange H onto those windows (paper 000 App. B; its set-up grows x's halo);
  then the layout x has afterwards (its hash and halo widths, for ConformHalo).
*/
PetscErrorCode WindowHaloSetUp(DDLayer l, DDTensor x, PetscInt D, const PetscInt a[3], const PetscInt b[3], PetscBool needhalo, DDPrimitive *H, PetscInt64 *hash, PetscInt lo[], PetscInt hi[]);
/*
  The output of such a layer: x's partition, batch and channel ownership, replication, block size
  and format; spatial extents out (3 - D leading unused) owned as outlx[j] (spatial dimension j).
*/
PetscErrorCode SpatialOutputSetUp(DDLayer l, DDTensor x, PetscInt D, const PetscInt out[3], const std::vector<std::vector<PetscInt>> &outlx);
} // namespace ddnn
