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

static bool pricingonly = false, pricingnochecks = false;
bool PricingOnly()
{
  return pricingonly;
}
bool PricingSkipChecks()
{
  return pricingonly && pricingnochecks;
}
static bool pricingnoplans = false;
bool PricingNoPlans()
{
  return pricingonly && pricingnoplans;
}
PricingNoPlansGuard::PricingNoPlansGuard(bool on) : old(pricingnoplans)
{
  pricingnoplans = on;
}
PricingNoPlansGuard::~PricingNoPlansGuard()
{
  pricingnoplans = old;
}
PricingOnlyGuard::PricingOnlyGuard(bool on, bool nochecks) : old(pricingonly), oldchecks(pricingnochecks)
{
  pricingonly     = on;
  pricingnochecks = nochecks;
}
PricingOnlyGuard::~PricingOnlyGuard()
{
  pricingonly     = old;
  pricingnochecks = oldchecks;
}

/* the runs Runs::Build() finds in a sequence of offsets */
template <class F>
static PetscInt CountRuns(PetscInt n, F off)
{
  PetscInt r = 0, prev = 0;
  for (PetscInt i = 0; i < n; i++) {
    PetscInt o = off(i);
    if (!i || o != prev + 1) r++;
    prev = o;
  }
  return r;
}

PetscErrorCode BuildStoragePlan(MPI_Comm comm, DDTensor owner, const std::vector<PetscInt> &ilocal, const std::vector<PetscSFNode> &iremote, Exchange *ex, std::vector<PetscInt> *degree)
{
  const DDLayout &L = owner->layout;
  PetscMPIInt     size, me;
  const size_t    n = ilocal.size();

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &me));
  /* the leaves in offset order (PetscSFSetGraph() sorts them), grouped by root rank, stably (PetscSFSetUpRanks()) */
  std::vector<PetscInt> order(n);
  if (std::is_sorted(ilocal.begin(), ilocal.end()))
    for (size_t i = 0; i < n; i++) order[i] = (PetscInt)i;
  else { /* the offsets are distinct entries of a local array: placed by offset, no comparison sort */
    PetscInt maxo = -1;
    for (PetscInt o : ilocal) maxo = PetscMax(maxo, o);
    std::vector<PetscInt> at((size_t)(maxo + 1), -1);
    for (size_t i = 0; i < n; i++) at[ilocal[i]] = (PetscInt)i;
    size_t c = 0;
    for (PetscInt i : at)
      if (i >= 0) order[c++] = i;
    PetscCheck(c == n, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Two leaves at one offset");
  }
  std::vector<PetscMPIInt> cnt(size, 0), rcnt(size), sdis(size + 1, 0), rdis(size + 1, 0);
  for (size_t i = 0; i < n; i++) cnt[iremote[i].rank]++;
  for (PetscMPIInt r = 0; r < size; r++) sdis[r + 1] = sdis[r] + cnt[r];
  std::vector<PetscInt> sidx(n), sleaf(n), fill(sdis.begin(), sdis.end() - 1);
  for (PetscInt i : order) {
    PetscMPIInt r = (PetscMPIInt)iremote[i].rank;
    sleaf[fill[r]]  = ilocal[i];
    sidx[fill[r]++] = iremote[i].index;
  }
  /* every owner learns, per leaf rank, the bulk indices of its roots in that rank's leaf order */
  PetscCallMPI(MPI_Alltoall(cnt.data(), 1, MPI_INT, rcnt.data(), 1, MPI_INT, comm));
  for (PetscMPIInt r = 0; r < size; r++) rdis[r + 1] = rdis[r] + rcnt[r];
  std::vector<PetscInt> ridx(rdis[size] ? rdis[size] : 1);
  PetscCallMPI(MPI_Alltoallv(sidx.data(), cnt.data(), sdis.data(), MPIU_INT, ridx.data(), rcnt.data(), rdis.data(), MPIU_INT, comm));
  /* the storage offset of each requested root: its C-order bulk index taken apart over the bulk's
     shape (the offsets BuildStorageSF() broadcasts) */
  for (PetscInt i = 0; i < rdis[size]; i++) {
    PetscCheck(ridx[i] >= 0 && ridx[i] < L.bulksize, PETSC_COMM_SELF, PETSC_ERR_PLIB, "A rank asks for bulk entry %" PetscInt_FMT " of %" PetscInt_FMT, ridx[i], L.bulksize);
    PetscInt j[DD_MAX_DIM], q = ridx[i];
    for (PetscInt k = L.order - 1; k >= 0; k--) {
      j[k] = L.lo[k] + q % L.n[k];
      q /= L.n[k];
    }
    ridx[i] = LayoutOffset(L, j);
  }
  std::vector<Exchange::PricedPeer> to, from;
  for (PetscMPIInt r = 0; r < size; r++) {
    if (r == me) continue;
    if (cnt[r]) from.push_back({r, cnt[r], CountRuns(cnt[r], [&](PetscInt i) { return sleaf[sdis[r] + i]; })});
    if (rcnt[r]) to.push_back({r, rcnt[r], CountRuns(rcnt[r], [&](PetscInt i) { return ridx[rdis[r] + i]; })});
  }
  if (degree) {
    degree->assign((size_t)L.size, 0);
    for (PetscInt i = 0; i < rdis[size]; i++) (*degree)[ridx[i]]++;
  }
  /* the rank's own part: leaf and root offsets in the same order, a run where both go on consecutively (Exchange::SetUp()'s self runs) */
  Exchange::PricedPeer mine = {me, cnt[me], 0};
  for (PetscInt i = 0; i < cnt[me]; i++)
    if (!i || sleaf[sdis[me] + i] != sleaf[sdis[me] + i - 1] + 1 || ridx[rdis[me] + i] != ridx[rdis[me] + i - 1] + 1) mine.nruns++;
  PetscCall(ex->SetUpPriced(comm, to, from, mine, DDExchangeUseTypes()));
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
