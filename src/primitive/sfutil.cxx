#include <primitive/sfutil.hpp>
#include <tensor/layout.hpp>
#include <algorithm>

namespace ddnn
{
PetscErrorCode BuildStorageSF(MPI_Comm comm, DDTensor owner, std::vector<PetscInt> &ilocal, std::vector<PetscSFNode> &iremote, PetscSF *sf)
{
  PetscSF               sf1;
  const DDLayout       &L = owner->layout;
  std::vector<PetscInt> offs(L.bulksize + 1), remoteoff(iremote.size() + 1);
  PetscInt              nleaves = (PetscInt)ilocal.size();

  PetscFunctionBegin;
  /* storage offset of every bulk entry, in C order of the bulk */
  {
    PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM], ord[DD_MAX_DIM], c = 0;
    LayoutBulkBox(L, a, b);
    for (PetscInt k = 0; k < L.order; k++) ord[k] = k;
    if (L.bulksize) ForEachIndex(L.order, a, b, ord, [&](const PetscInt *j) { offs[c++] = LayoutOffset(L, j); });
  }
  PetscCall(PetscSFCreate(comm, &sf1));
  PetscCall(PetscSFSetGraph(sf1, L.bulksize, nleaves, NULL, PETSC_COPY_VALUES, iremote.data(), PETSC_COPY_VALUES));
  PetscCall(PetscSFSetUp(sf1));
  PetscCall(PetscSFBcastBegin(sf1, MPIU_INT, offs.data(), remoteoff.data(), MPI_REPLACE));
  PetscCall(PetscSFBcastEnd(sf1, MPIU_INT, offs.data(), remoteoff.data(), MPI_REPLACE));
  PetscCall(PetscSFDestroy(&sf1));
  for (PetscInt i = 0; i < nleaves; i++) iremote[i].index = remoteoff[i];
  PetscCall(PetscSFCreate(comm, sf));
  PetscCall(PetscSFSetType(*sf, PETSCSFBASIC)); /* Exchange reads its rank lists */
  PetscCall(PetscSFSetGraph(*sf, L.size, nleaves, ilocal.data(), PETSC_COPY_VALUES, iremote.data(), PETSC_COPY_VALUES));
  PetscCall(PetscSFSetUp(*sf));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscInt OwnerCoordinate(DDTensor t, PetscInt k, PetscInt i)
{
  if (i < 0 || i >= t->shape[k]) return -1;
  if (t->replicated[k]) return -2; /* any coordinate holds it */
  const PetscInt *r = t->ranges[k];
  PetscInt        P = t->part->shape[k];
  /* the last coordinate p with r[p] <= i (empty pieces share their offset with the next one) */
  PetscInt p = (PetscInt)(std::upper_bound(r, r + P + 1, i) - r) - 1;
  return p;
}

void OwnerOf(DDTensor t, const PetscInt coords[], const PetscInt g[], PetscMPIInt *rank, PetscInt *index)
{
  PetscInt idx = 0, lin = 0;
  for (PetscInt k = 0; k < t->order; k++) {
    PetscInt c = coords[k], start, n;
    if (t->replicated[k]) {
      start = 0;
      n     = t->shape[k];
    } else {
      start = t->ranges[k][c];
      n     = t->ranges[k][c + 1] - start;
    }
    idx = idx * t->part->shape[k] + c;
    lin = lin * n + (g[k] - start);
  }
  *rank  = t->part->ranks[idx];
  *index = lin;
}
} // namespace ddnn
