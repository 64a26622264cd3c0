/*
  PetscSF helpers shared by the repartition and halo primitives (C++ only).
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <primitive/exchange.hpp>
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

/*
  Pricing-only set-ups (the trial set-ups of -net_distribution auto, src/net/distribution.cxx):
  while a PricingOnlyGuard(true) lives, the halo, repartition and scatter primitives build no
  PetscSF and no exchange plan; BuildStoragePlan() gives their Exchange what the performance model
  reads of it (Exchange::SetUpPriced()). The flag is process-wide (set-up is not threaded).
  With nochecks, layers also skip their check that every rank holds the same hyper-parameters
  (DDLayerSetUpMulti()): for the trials, whose layers the first set-up has checked already.
*/
bool PricingOnly();
bool PricingSkipChecks();
/* and while a PricingNoPlans guard lives (the first of the network's two set-up passes, which only
   finds the halos every tensor needs: its layers are set up again), no exchange at all */
bool PricingNoPlans();
struct PricingNoPlansGuard {
  bool old;
  explicit PricingNoPlansGuard(bool on);
  ~PricingNoPlansGuard();
};
struct PricingOnlyGuard {
  bool old, oldchecks;
  explicit PricingOnlyGuard(bool on, bool nochecks = false);
  ~PricingOnlyGuard();
};

/*
  The pricing-only counterpart of BuildStorageSF() + Exchange::SetUp() (collective): the same graph
  (leaf i at ilocal[i], root the entry of C-order bulk index iremote[i].index on rank
  iremote[i].rank), of which it finds what the built exchange would hold per peer: the entries each
  rank sends and receives and the runs of consecutive storage offsets they form in the order
  PetscSF lists them (the leaves sorted by offset, grouped by root rank; the roots in the order of
  their leaf rank's leaves). One exchange of counts and one of the bulk indices (each owner maps
  them to storage offsets) instead of two star forests. degree (optional): per storage entry of
  owner, the number of leaves on every rank whose root it is (PetscSFComputeDegree()).
*/
PetscErrorCode BuildStoragePlan(MPI_Comm comm, DDTensor owner, const std::vector<PetscInt> &ilocal, const std::vector<PetscSFNode> &iremote, Exchange *ex, std::vector<PetscInt> *degree);

/* Owner coordinate of global index i along dimension k of tensor t (-1 if outside [0, n)) */
PetscInt OwnerCoordinate(DDTensor t, PetscInt k, PetscInt i);

/* (rank, C-order index within the owner's bulk) of a global index, owner coordinates given */
void OwnerOf(DDTensor t, const PetscInt coords[], const PetscInt g[], PetscMPIInt *rank, PetscInt *index);
} // namespace ddnn
