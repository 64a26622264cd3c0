/*
  Exchange: executes a PetscSF communication graph (roots -> leaves) and its transpose with
  run-based packing and persistent point-to-point messages (C++ only).

  PetscSF describes the graphs of the repartition and halo primitives; this engine moves the
  data. It merges the graph's index lists into runs of consecutive offsets (memcpy-sized
  pieces for faces along slow dimensions, tight gather loops for strided faces), sends
  single-run messages straight from (and receives them straight into) the tensor's storage,
  copies the rank's own part directly without buffers, and adds in the adjoint with its own
  float and double kernels.
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <petscsf.h>
#include <vector>

namespace ddnn
{
struct Runs {
  std::vector<PetscInt> off, len;
  PetscInt              total = 0;
  void                  Build(const PetscInt *idx, PetscInt n);
  bool                  Single() const { return off.size() == 1; }
};

struct CopyRuns { /* element-wise pairs root -> leaf, merged where both are consecutive */
  std::vector<PetscInt> root, leaf, len;
  PetscInt              total = 0;
};

struct Peer {
  PetscMPIInt       rank = -1;
  Runs              runs;
  std::vector<char> buf;
  MPI_Request       req = MPI_REQUEST_NULL;
  MPI_Datatype      type[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL}; /* indexed over the runs, float and double; NULL: pack by hand */
};

class Exchange
{
public:
  ~Exchange();
  DDMemType memtype = DD_MEMTYPE_HOST; /* where the storages live: the backend of that memory packs and unpacks */
  PetscErrorCode SetUp(PetscSF sf, MPI_Comm comm, PetscMPIInt tag, PetscBool usetypes);
  /* leaf = root (forward) */
  PetscErrorCode ForwardBegin(DDDataType dt, const void *root, void *leaf);
  PetscErrorCode ForwardEnd(DDDataType dt, const void *root, void *leaf);
  /* root = leaf (add = false) or root += leaf (add = true) (adjoint) */
  PetscErrorCode AdjointBegin(DDDataType dt, const void *leaf, void *root, bool add);
  PetscErrorCode AdjointEnd(DDDataType dt, const void *leaf, void *root, bool add);
  /* sets every leaf entry to zero */
  PetscErrorCode ZeroLeaves(DDDataType dt, void *leaf);
  PetscInt       RemoteEntries() const;
  PetscInt       NumPeers() const { return (PetscInt)(sendTo.size() + recvFrom.size()); }

private:
  /* one direction: src -> the peers in `to`, the peers in `from` -> dst (adding with add) */
  PetscErrorCode    Begin(DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add);
  PetscErrorCode    End(DDDataType dt, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add);
  std::vector<Peer> sendTo;   /* forward: roots of mine that leaf ranks need */
  std::vector<Peer> recvFrom; /* forward: leaves of mine whose roots live on root ranks */
  CopyRuns          self;
  Runs              allLeaves;
  MPI_Comm          comm = MPI_COMM_NULL;
  PetscMPIInt       tag  = 0;
  bool              inflight = false;
};
/* -dd_exchange_mpi_types <bool>: MPI derived datatypes instead of hand packing for long runs */
PetscBool DDExchangeUseTypes();
} // namespace ddnn
