#include <primitive/exchange.hpp>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <algorithm>
#include <cstring>

namespace ddnn
{
PetscBool DDExchangeUseTypes()
{
  PetscBool flg = PETSC_TRUE;
  PetscOptionsGetBool(NULL, NULL, "-dd_exchange_mpi_types", &flg, NULL);
  return flg;
}

void Runs::Build(const PetscInt *idx, PetscInt n)
{
  off.clear();
  len.clear();
  total = n;
  for (PetscInt i = 0; i < n; i++) {
    if (!off.empty() && off.back() + len.back() == idx[i]) len.back()++;
    else {
      off.push_back(idx[i]);
      len.push_back(1);
    }
  }
}

Exchange::~Exchange()
{
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) {
      if (p.req != MPI_REQUEST_NULL) MPI_Request_free(&p.req);
      for (auto &t : p.type)
        if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
    }
}

PetscErrorCode Exchange::SetUp(PetscSF sf, MPI_Comm c, PetscMPIInt t, PetscBool usetypes)
{
  PetscInt           nroot, nleaf;
  const PetscMPIInt *rranks, *lranks;
  const PetscInt    *roffset, *rmine, *rremote, *ioffset, *irootloc;
  PetscMPIInt        me;

  PetscFunctionBegin;
  comm = c;
  tag  = t;
  PetscCallMPI(MPI_Comm_rank(comm, &me));
  PetscCall(PetscSFGetRootRanks(sf, &nroot, &rranks, &roffset, &rmine, &rremote));
  PetscCall(PetscSFGetLeafRanks(sf, &nleaf, &lranks, &ioffset, &irootloc));
  const PetscInt *selfroot = NULL, *selfleaf = NULL;
  PetscInt        nself    = 0;
  std::vector<PetscInt> leaves;
  for (PetscInt i = 0; i < nroot; i++) {
    leaves.insert(leaves.end(), rmine + roffset[i], rmine + roffset[i + 1]);
    if (rranks[i] == me) {
      selfleaf = rmine + roffset[i];
      nself    = roffset[i + 1] - roffset[i];
      continue;
    }
    Peer p;
    p.rank = rranks[i];
    p.runs.Build(rmine + roffset[i], roffset[i + 1] - roffset[i]);
    recvFrom.push_back(std::move(p));
  }
  for (PetscInt i = 0; i < nleaf; i++) {
    if (lranks[i] == me) {
      selfroot = irootloc + ioffset[i];
      PetscCheck(ioffset[i + 1] - ioffset[i] == nself, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Inconsistent self part of the graph");
      continue;
    }
    Peer p;
    p.rank = lranks[i];
    p.runs.Build(irootloc + ioffset[i], ioffset[i + 1] - ioffset[i]);
    sendTo.push_back(std::move(p));
  }
  /* the rank's own part: root/leaf pairs in matching order */
  self.total = nself;
  for (PetscInt i = 0; i < nself; i++) {
    if (!self.len.empty() && self.root.back() + self.len.back() == selfroot[i] && self.leaf.back() + self.len.back() == selfleaf[i]) self.len.back()++;
    else {
      self.root.push_back(selfroot[i]);
      self.leaf.push_back(selfleaf[i]);
      self.len.push_back(1);
    }
  }
  std::sort(leaves.begin(), leaves.end());
  allLeaves.Build(leaves.data(), (PetscInt)leaves.size());
  /* message buffers, for the larger element size; or MPI datatypes over long runs */
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) {
      if (usetypes && !p.runs.Single() && p.runs.total >= 64 * (PetscInt)p.runs.off.size()) {
        std::vector<int> bl(p.runs.len.begin(), p.runs.len.end()), dp(p.runs.off.begin(), p.runs.off.end());
        MPI_Datatype     base[2] = {MPI_FLOAT, MPI_DOUBLE};
        for (int i = 0; i < 2; i++) {
          PetscCallMPI(MPI_Type_indexed((int)bl.size(), bl.data(), dp.data(), base[i], &p.type[i]));
          PetscCallMPI(MPI_Type_commit(&p.type[i]));
        }
      } else p.buf.resize(sizeof(double) * (size_t)p.runs.total + 1);
    }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscInt Exchange::RemoteEntries() const
{
  PetscInt n = 0;
  for (auto &p : recvFrom) n += p.runs.total;
  return n;
}

/*
  The rank's own part, copied while messages are in flight: between chunks of about 256 KiB
  MPI_Testall drives the progress of the exchange (shared-memory transports move data only
  inside MPI calls), so the local copy and the transfer overlap.
*/
template <class T>
static inline void SelfCopy(const CopyRuns &s, const T *from, const std::vector<PetscInt> &fo, T *to, const std::vector<PetscInt> &to_o, bool add, std::vector<Peer> *progress = nullptr)
{
  size_t since = 0;
  for (size_t i = 0; i < s.len.size(); i++) {
    since += (size_t)s.len[i];
    if (progress && since * sizeof(T) > (1 << 18)) {
      since = 0;
      for (auto &p : *progress)
        if (p.req != MPI_REQUEST_NULL) {
          int done;
          MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
        }
    }
    const T *f = from + fo[i];
    T       *t = to + to_o[i];
    if (add)
      for (PetscInt j = 0; j < s.len[i]; j++) t[j] += f[j];
    else if (s.len[i] == 1) t[0] = f[0];
    else std::memcpy(t, f, sizeof(T) * (size_t)s.len[i]);
  }
}

/*
  One direction of the exchange: src's entries go to the peers in `to` and dst's come from the
  peers in `from` (forward: roots -> leaves, from = recvFrom, to = sendTo; the adjoint the
  reverse, adding into dst with add). Single-run messages go straight between the storages,
  indexed ones through MPI datatypes (not when adding: that needs the values apart), the others
  through packed buffers; the rank's own part is copied while the messages are in flight.
*/
PetscErrorCode Exchange::Begin(DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add)
{
  MPI_Datatype mt;

  PetscFunctionBegin;
  PetscCheck(!inflight, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Exchange already in flight");
  PetscCall(DDDataTypeGetMPIType(dt, &mt));
  const struct _DDBackendVecOps *ops;
  PetscCall(DDVecOps_Private(memtype, &ops)); /* packing runs on the memory's backend */
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    const int ti = sizeof(T) == 4 ? 0 : 1;
    for (auto &p : from) {
      if (p.type[ti] != MPI_DATATYPE_NULL && !add) {
        PetscCallMPI(MPI_Irecv(dst, 1, p.type[ti], p.rank, tag, comm, &p.req));
        continue;
      }
      if (p.buf.empty()) p.buf.resize(sizeof(double) * (size_t)p.runs.total + 1);
      void *b = (!add && p.runs.Single()) ? (void *)((T *)dst + p.runs.off[0]) : (void *)p.buf.data();
      PetscCallMPI(MPI_Irecv(b, (PetscMPIInt)p.runs.total, mt, p.rank, tag, comm, &p.req));
    }
    for (auto &p : to) {
      if (p.type[ti] != MPI_DATATYPE_NULL) {
        PetscCallMPI(MPI_Isend(src, 1, p.type[ti], p.rank, tag, comm, &p.req));
        continue;
      }
      const void *b = (const T *)src + p.runs.off[0];
      if (!p.runs.Single()) {
        PetscCall(ops->pack(dt, p.runs.off.size(), p.runs.off.data(), p.runs.len.data(), p.runs.total, src, p.buf.data()));
        b = p.buf.data();
      }
      PetscCallMPI(MPI_Isend(b, (PetscMPIInt)p.runs.total, mt, p.rank, tag, comm, &p.req));
    }
    SelfCopy<T>(self, (const T *)src, srcself, (T *)dst, dstself, add, &from);
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  inflight = true;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::End(DDDataType dt, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add)
{
  PetscFunctionBegin;
  PetscCheck(inflight, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "No exchange in flight");
  const struct _DDBackendVecOps *ops;
  PetscCall(DDVecOps_Private(memtype, &ops));
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    PetscFunctionBegin;
    const int ti = sizeof(T) == 4 ? 0 : 1;
    for (auto &p : from) {
      PetscCallMPI(MPI_Wait(&p.req, MPI_STATUS_IGNORE));
      if (add || (!p.runs.Single() && p.type[ti] == MPI_DATATYPE_NULL)) PetscCall(ops->unpack(dt, p.runs.off.size(), p.runs.off.data(), p.runs.len.data(), p.runs.total, p.buf.data(), dst, add ? PETSC_TRUE : PETSC_FALSE));
    }
    for (auto &p : to) PetscCallMPI(MPI_Wait(&p.req, MPI_STATUS_IGNORE));
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  inflight = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::ForwardBegin(DDDataType dt, const void *root, void *leaf)
{
  return Begin(dt, root, leaf, recvFrom, sendTo, self.root, self.leaf, false);
}

PetscErrorCode Exchange::ForwardEnd(DDDataType dt, const void *root, void *leaf)
{
  (void)root;
  return End(dt, leaf, recvFrom, sendTo, false);
}

PetscErrorCode Exchange::AdjointBegin(DDDataType dt, const void *leaf, void *root, bool add)
{
  return Begin(dt, leaf, root, sendTo, recvFrom, self.leaf, self.root, add);
}

PetscErrorCode Exchange::AdjointEnd(DDDataType dt, const void *leaf, void *root, bool add)
{
  (void)leaf;
  return End(dt, root, sendTo, recvFrom, add);
}

PetscErrorCode Exchange::ZeroLeaves(DDDataType dt, void *leaf)
{
  PetscFunctionBegin;
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T *a    = (T *)leaf;
    for (size_t i = 0; i < allLeaves.off.size(); i++) std::memset(a + allLeaves.off[i], 0, sizeof(T) * (size_t)allLeaves.len[i]);
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
