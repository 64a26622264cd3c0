/*
  The groups of a broadcast one -> many (or of its adjoint, the sum-reduction), as
  DDPRIMITIVEBROADCAST forms them (paper 000 sec. 3.2.1): the workers of `many` that share their
  coordinates outside the broadcast dimensions K (those where `one`'s partition, extended by its
  leading 1s, has one worker and `many`'s more) form a group with the worker of `one` at those
  coordinates as its root. Shared by the primitive and the network's bucketed replicas (C++ only).
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <tensor/layout.hpp>
#include <algorithm>
#include <vector>

namespace ddnn
{
struct BcastGroup {
  PetscInt                 gid    = 0;     /* C-order index of the coordinates outside K */
  bool                     root   = false; /* this rank holds the one-side piece */
  bool                     member = false; /* this rank holds a many-side piece */
  PetscInt                 count  = 0;     /* entries of the piece */
  std::vector<PetscMPIInt> ranks;          /* the root, then the many side's other ranks in C order */
};

/* The groups this rank belongs to (at most two: as a root and as a member), by increasing gid;
   the partitions' shapes must already be checked compatible (Pm's order >= Po's). */
inline void BroadcastGroupsOf(DDTensor one, DDTensor many, std::vector<BcastGroup> &mine)
{
  DDPartition    Po = one->part, Pm = many->part;
  const PetscInt d = Pm->order, lead = d - Po->order;
  bool           K[DD_MAX_DIM];

  mine.clear();
  for (PetscInt k = 0; k < d; k++) K[k] = (k < lead ? 1 : Po->shape[k - lead]) == 1 && Pm->shape[k] > 1;
  auto gidOf = [&](const PetscInt c[]) {
    PetscInt g = 0;
    for (PetscInt k = 0; k < d; k++)
      if (!K[k]) g = g * Pm->shape[k] + c[k];
    return g;
  };
  if (Po->index >= 0) {
    PetscInt c[DD_MAX_DIM];
    for (PetscInt k = 0; k < d; k++) c[k] = k < lead ? 0 : Po->coords[k - lead];
    BcastGroup g;
    g.gid   = gidOf(c);
    g.root  = true;
    g.count = one->layout.bulksize;
    mine.push_back(g);
  }
  if (Pm->index >= 0) {
    BcastGroup g;
    g.gid    = gidOf(Pm->coords);
    g.member = true;
    g.count  = many->layout.bulksize;
    if (!mine.empty() && mine[0].gid == g.gid) mine[0].member = true;
    else mine.push_back(g);
  }
  std::sort(mine.begin(), mine.end(), [](const BcastGroup &a, const BcastGroup &b) { return a.gid < b.gid; });
  for (auto &g : mine) {
    PetscInt gc[DD_MAX_DIM], r = g.gid, idx = 0;
    for (PetscInt k = d - 1; k >= 0; k--) {
      if (K[k]) {
        gc[k] = 0;
        continue;
      }
      gc[k] = r % Pm->shape[k];
      r /= Pm->shape[k];
    }
    for (PetscInt k = lead; k < d; k++) idx = idx * Po->shape[k - lead] + gc[k];
    g.ranks.assign(1, Po->ranks[idx]);
    PetscInt lo[DD_MAX_DIM], hi[DD_MAX_DIM], ord[DD_MAX_DIM];
    for (PetscInt k = 0; k < d; k++) {
      lo[k]  = K[k] ? 0 : gc[k];
      hi[k]  = K[k] ? Pm->shape[k] : gc[k] + 1;
      ord[k] = k;
    }
    ForEachIndex(d, lo, hi, ord, [&](const PetscInt *c) {
      PetscInt i = 0;
      for (PetscInt k = 0; k < d; k++) i = i * Pm->shape[k] + c[k];
      if (Pm->ranks[i] != g.ranks[0]) g.ranks.push_back(Pm->ranks[i]);
    });
  }
}
} // namespace ddnn
