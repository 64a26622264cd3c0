#include <primitive/exchange.hpp>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <algorithm>
#include <cstring>
#include <map>

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
  /* a constant stride between runs of one length: the plan's constant-stride loops */
  stride = 0;
  if (off.size() >= 2 && off[1] > off[0]) {
    PetscInt s = off[1] - off[0];
    bool     ok = true;
    for (size_t i = 1; i < off.size() && ok; i++) ok = len[i] == len[0] && off[i] - off[i - 1] == s;
    if (ok) stride = s;
  }
}

static std::vector<Exchange *>            registry;
static std::vector<const void *>          ownerstack;
static std::map<const void *, const void *> parentof;

void ExchangeOwnerPush(const void *obj)
{
  if (!ownerstack.empty() && ownerstack.back() != obj) parentof[obj] = ownerstack.back();
  ownerstack.push_back(obj);
}

void ExchangeOwnerPop()
{
  if (!ownerstack.empty()) ownerstack.pop_back();
}

void ExchangeForget(const void *obj)
{
  parentof.erase(obj);
  for (auto it = parentof.begin(); it != parentof.end();) {
    if (it->second == obj) it = parentof.erase(it);
    else ++it;
  }
}

bool ExchangeIsUnder(const void *obj, const void *ancestor)
{
  for (int depth = 0; obj && depth < 64; depth++) {
    if (obj == ancestor) return true;
    auto it = parentof.find(obj);
    obj     = it == parentof.end() ? nullptr : it->second;
  }
  return false;
}

std::vector<const void *> ExchangeObjectsUnder(const void *ancestor)
{
  std::vector<const void *> v;
  for (auto &kv : parentof)
    if (ExchangeIsUnder(kv.first, ancestor)) v.push_back(kv.first);
  return v;
}

const std::vector<Exchange *> &ExchangeRegistry()
{
  return registry;
}

void Exchange::PlannedVolume(int dir, size_t es, PetscInt64 v[4]) const
{
  const std::vector<Peer> &to = dir == 0 ? sendTo : recvFrom, &from = dir == 0 ? recvFrom : sendTo;
  v[0] = (PetscInt64)to.size();
  v[1] = 0;
  for (auto &p : to) v[1] += (PetscInt64)es * p.runs.total;
  v[2] = (PetscInt64)from.size();
  v[3] = 0;
  for (auto &p : from) v[3] += (PetscInt64)es * p.runs.total;
}

PetscInt64 Exchange::BufferBytes() const
{
  PetscInt64 b = 0;
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) b += (PetscInt64)p.buf.size();
  return b;
}

void Exchange::FreePlan(Plan &pl)
{
  for (auto *v : {&pl.recv, &pl.send})
    for (auto &r : *v)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  pl.recv.clear();
  pl.send.clear();
  pl.ti = -1;
}

Exchange::~Exchange()
{
  registry.erase(std::remove(registry.begin(), registry.end(), this), registry.end());
  FreePlan(fwd);
  FreePlan(adj);
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) {
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
  if (std::find(registry.begin(), registry.end(), this) == registry.end()) registry.push_back(this);
  owner = ownerstack.empty() ? nullptr : ownerstack.back();
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
static inline void SelfCopy(const CopyRuns &s, const T *from, const std::vector<PetscInt> &fo, T *to, const std::vector<PetscInt> &to_o, bool add, std::vector<MPI_Request> *progress = nullptr)
{
  size_t since = 0;
  for (size_t i = 0; i < s.len.size(); i++) {
    since += (size_t)s.len[i];
    if (progress && since * sizeof(T) > (1 << 18)) {
      since = 0;
      if (!progress->empty()) {
        int done;
        MPI_Testall((int)progress->size(), progress->data(), &done, MPI_STATUSES_IGNORE);
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

/* packing and unpacking of one message: constant-stride loops on host memory, the backend's run lists otherwise */
static inline PetscErrorCode PackRuns(DDMemType memtype, const struct _DDBackendVecOps *ops, DDDataType dt, const Runs &r, const void *src, void *buf)
{
  if (memtype == DD_MEMTYPE_HOST && r.Strided()) return HostPackStrided(dt, (PetscInt)r.off.size(), r.off[0], r.stride, r.len[0], src, buf);
  return ops->pack(dt, r.off.size(), r.off.data(), r.len.data(), r.total, src, buf);
}

static inline PetscErrorCode UnpackRuns(DDMemType memtype, const struct _DDBackendVecOps *ops, DDDataType dt, const Runs &r, const void *buf, void *dst, bool add)
{
  if (memtype == DD_MEMTYPE_HOST && r.Strided()) return HostUnpackStrided(dt, (PetscInt)r.off.size(), r.off[0], r.stride, r.len[0], buf, dst, add ? PETSC_TRUE : PETSC_FALSE);
  return ops->unpack(dt, r.off.size(), r.off.data(), r.len.data(), r.total, buf, dst, add ? PETSC_TRUE : PETSC_FALSE);
}

/*
  The persistent requests of one direction: single-run messages go straight between the
  storages, indexed ones through MPI datatypes (not when adding: that needs the values apart),
  the others through the peers' packed buffers.
*/
PetscErrorCode Exchange::MakePlan(Plan &pl, int ti, MPI_Datatype mt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add)
{
  const size_t es = ti == 0 ? sizeof(float) : sizeof(double);

  PetscFunctionBegin;
  FreePlan(pl);
  pl.recv.assign(from.size(), MPI_REQUEST_NULL);
  pl.send.assign(to.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < from.size(); i++) {
    Peer &p = from[i];
    if (p.type[ti] != MPI_DATATYPE_NULL && !add) {
      PetscCallMPI(MPI_Recv_init(dst, 1, p.type[ti], p.rank, tag, comm, &pl.recv[i]));
      continue;
    }
    if (p.buf.empty()) p.buf.resize(sizeof(double) * (size_t)p.runs.total + 1);
    void *b = (!add && p.runs.Single()) ? (void *)((char *)dst + es * (size_t)p.runs.off[0]) : (void *)p.buf.data();
    PetscCallMPI(MPI_Recv_init(b, (PetscMPIInt)p.runs.total, mt, p.rank, tag, comm, &pl.recv[i]));
  }
  for (size_t i = 0; i < to.size(); i++) {
    Peer &p = to[i];
    if (p.type[ti] != MPI_DATATYPE_NULL) {
      PetscCallMPI(MPI_Send_init(src, 1, p.type[ti], p.rank, tag, comm, &pl.send[i]));
      continue;
    }
    if (p.buf.empty()) p.buf.resize(sizeof(double) * (size_t)p.runs.total + 1);
    const void *b = p.runs.Single() ? (const void *)((const char *)src + es * (size_t)p.runs.off[0]) : (const void *)p.buf.data();
    PetscCallMPI(MPI_Send_init(b, (PetscMPIInt)p.runs.total, mt, p.rank, tag, comm, &pl.send[i]));
  }
  pl.src = src;
  pl.dst = dst;
  pl.ti  = ti;
  pl.add = add;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  One direction of the exchange: src's entries go to the peers in `to` and dst's come from the
  peers in `from` (forward: roots -> leaves, from = recvFrom, to = sendTo; the adjoint the
  reverse, adding into dst with add). The receives start first, each send as soon as its
  buffer is packed, and the rank's own part is copied while the messages are in flight.
*/
PetscErrorCode Exchange::Begin(Plan &pl, DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add)
{
  PetscFunctionBegin;
  PetscCheck(!inflight, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Exchange already in flight");
  const int ti = dt == DD_FLOAT32 ? 0 : 1;
  if (pl.ti != ti || pl.src != src || pl.dst != dst || pl.add != add) {
    MPI_Datatype mt;
    PetscCall(DDDataTypeGetMPIType(dt, &mt));
    PetscCall(MakePlan(pl, ti, mt, src, dst, from, to, add));
  }
  const struct _DDBackendVecOps *ops = nullptr;
  PetscCall(DDVecOps_Private(memtype, &ops)); /* packing runs on the memory's backend */
  if (!pl.recv.empty()) PetscCallMPI(MPI_Startall((int)pl.recv.size(), pl.recv.data()));
  for (size_t i = 0; i < to.size(); i++) {
    Peer &p = to[i];
    if (p.type[ti] == MPI_DATATYPE_NULL && !p.runs.Single()) PetscCall(PackRuns(memtype, ops, dt, p.runs, src, p.buf.data()));
    PetscCallMPI(MPI_Start(&pl.send[i]));
    counted[&pl == &fwd ? 0 : 1][0]++;
    counted[&pl == &fwd ? 0 : 1][1] += (PetscInt64)(ti == 0 ? sizeof(float) : sizeof(double)) * p.runs.total;
  }
  inflight = true;
  if (self.len.empty()) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    SelfCopy<T>(self, (const T *)src, srcself, (T *)dst, dstself, add, &pl.recv);
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::End(Plan &pl, DDDataType dt, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add)
{
  PetscFunctionBegin;
  PetscCheck(inflight, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "No exchange in flight");
  const int                      ti  = dt == DD_FLOAT32 ? 0 : 1;
  const struct _DDBackendVecOps *ops = nullptr;
  PetscCall(DDVecOps_Private(memtype, &ops));
  for (size_t i = 0; i < from.size(); i++) {
    Peer      &p = from[i];
    MPI_Status st;
    int        nb = 0;
    PetscCallMPI(MPI_Wait(&pl.recv[i], &st));
    PetscCallMPI(MPI_Get_count(&st, MPI_BYTE, &nb)); /* what arrived, for the model's counters */
    counted[&pl == &fwd ? 0 : 1][2]++;
    counted[&pl == &fwd ? 0 : 1][3] += nb;
    if (add || (!p.runs.Single() && p.type[ti] == MPI_DATATYPE_NULL)) PetscCall(UnpackRuns(memtype, ops, dt, p.runs, p.buf.data(), dst, add));
  }
  if (!pl.send.empty()) PetscCallMPI(MPI_Waitall((int)pl.send.size(), pl.send.data(), MPI_STATUSES_IGNORE));
  inflight = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::ForwardBegin(DDDataType dt, const void *root, void *leaf)
{
  return Begin(fwd, dt, root, leaf, recvFrom, sendTo, self.root, self.leaf, false);
}

PetscErrorCode Exchange::ForwardEnd(DDDataType dt, const void *root, void *leaf)
{
  (void)root;
  return End(fwd, dt, leaf, recvFrom, sendTo, false);
}

PetscErrorCode Exchange::AdjointBegin(DDDataType dt, const void *leaf, void *root, bool add)
{
  return Begin(adj, dt, leaf, root, sendTo, recvFrom, self.leaf, self.root, add);
}

PetscErrorCode Exchange::AdjointEnd(DDDataType dt, const void *leaf, void *root, bool add)
{
  (void)leaf;
  return End(adj, dt, root, sendTo, recvFrom, add);
}

PetscErrorCode Exchange::ZeroLeaves(DDDataType dt, void *leaf)
{
  PetscFunctionBegin;
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    FillRuns(allLeaves, (T *)leaf, (T)0);
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
