#include <primitive/exchange.hpp>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <algorithm>
#include <cstring>
#include <cerrno>
#include <climits>
#include <map>
#include <unistd.h>
#if defined(__linux__)
  #define DD_HAVE_CMA 1
#endif
#if !defined(IOV_MAX)
  #define IOV_MAX 1024
#endif

namespace ddnn
{
PetscBool DDExchangeUseTypes()
{
  PetscBool flg = PETSC_TRUE;
  PetscOptionsGetBool(NULL, NULL, "-dd_exchange_mpi_types", &flg, NULL);
  return flg;
}

PetscBool DDExchangeFuseFill()
{
  PetscBool flg = PETSC_TRUE;
  PetscOptionsGetBool(NULL, NULL, "-dd_exchange_fuse_fill", &flg, NULL);
  return flg;
}

PetscBool DDExchangeUseCma()
{
  PetscBool flg = PETSC_TRUE;
  PetscOptionsGetBool(NULL, NULL, "-dd_exchange_cma", &flg, NULL);
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

void Exchange::PlannedWork(int dir, PetscInt64 w[4]) const
{
  const std::vector<Peer> &to = dir == 0 ? sendTo : recvFrom, &from = dir == 0 ? recvFrom : sendTo;
  w[0] = w[1] = 0;
  for (auto &p : to) w[0] += priced ? p.pricedruns : (PetscInt64)p.runs.off.size();
  for (auto &p : from) w[1] += priced ? p.pricedruns : (PetscInt64)p.runs.off.size();
  w[2] = priced ? pricedselfruns : (PetscInt64)self.len.size();
  w[3] = self.total;
}

PetscInt64 Exchange::BufferBytes() const
{
  PetscInt64 b = priced ? pricedbuf : 0;
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) b += (PetscInt64)p.buf.size() + (p.dbuf ? 2 * (PetscInt64)sizeof(double) * p.runs.total : 0);
  return b;
}

void Exchange::FreePlan(Plan &pl)
{
  for (auto *v : {&pl.recv, &pl.send})
    for (auto &r : *v)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  for (auto *v : {&pl.rlink, &pl.slink})
    for (auto &lk : *v)
      for (MPI_Request *r : {&lk.ready, &lk.done})
        if (*r != MPI_REQUEST_NULL) MPI_Request_free(r);
  pl.recv.clear();
  pl.send.clear();
  pl.rlink.clear();
  pl.slink.clear();
  pl.ti = -1;
}

Exchange::~Exchange()
{
  registry.erase(std::remove(registry.begin(), registry.end(), this), registry.end());
  for (auto *v : {&sendTo, &recvFrom}) /* a peer may still be reading a packed buffer */
    for (auto &p : *v)
      if (p.pending) {
        MPI_Wait(p.pending, MPI_STATUS_IGNORE);
        p.pending = nullptr;
      }
  FreePlan(fwd);
  FreePlan(adj);
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) {
      for (auto &t : p.type)
        if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
    }
  const struct _DDBackendMemOps *mem = dmem;
  const struct _DDBackendVecOps *vec = dvec;
  if (mem && vec) { /* device memory, staged (SetUpStaging()) */
    for (auto *v : {&sendTo, &recvFrom})
      for (auto &p : *v) {
        (void)mem->free(p.dbuf);
        (void)mem->hostfree(p.hbuf);
        (void)vec->runsfree(p.druns);
      }
    (void)mem->free(selfbuf);
    for (void *r : {dselfroot, dselfleaf, dleaves, dfill}) (void)vec->runsfree(r);
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
  if (Device()) { /* MPI reads and writes host memory only: staging buffers, no datatypes */
    fusefill = false;
    PetscCall(SetUpStaging());
    PetscCall(SetUpCma(PETSC_FALSE)); /* collective with the peers; no pair uses it */
    PetscFunctionReturn(PETSC_SUCCESS);
  }
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
  fusefill = DDExchangeFuseFill() ? true : false;
  PetscCall(SetUpCma(DDExchangeUseCma()));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* device memory: per peer a device buffer the message is packed into and a page-locked host copy MPI moves; a device buffer for the rank's own part */
PetscErrorCode Exchange::SetUpStaging()
{
  PetscFunctionBegin;
  PetscCall(DDMemOps_Private(memtype, &dmem));
  PetscCall(DDVecOps_Private(memtype, &dvec));
  const struct _DDBackendMemOps *mem = dmem;
  const struct _DDBackendVecOps *vec = dvec;
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) {
      const size_t n = sizeof(double) * (size_t)p.runs.total; /* for the larger element size */
      PetscCall(mem->malloc(n, &p.dbuf));
      PetscCall(mem->hostmalloc(n, &p.hbuf));
      PetscCall(vec->runsprepare(p.runs.off.size(), p.runs.off.data(), p.runs.len.data(), p.runs.total, &p.druns));
    }
  PetscCall(mem->malloc(sizeof(double) * (size_t)self.total, &selfbuf));
  PetscCall(vec->runsprepare(self.len.size(), self.root.data(), self.len.data(), self.total, &dselfroot));
  PetscCall(vec->runsprepare(self.len.size(), self.leaf.data(), self.len.data(), self.total, &dselfleaf));
  PetscCall(vec->runsprepare(allLeaves.off.size(), allLeaves.off.data(), allLeaves.len.data(), allLeaves.total, &dleaves));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::SetUpPriced(MPI_Comm c, const std::vector<PricedPeer> &sendto, const std::vector<PricedPeer> &recvfrom, PricedPeer mine, PetscBool usetypes)
{
  PetscFunctionBegin;
  comm           = c;
  priced         = true;
  self.total     = mine.total; /* what PlannedWork() reads (no runs: self.len stays empty) */
  pricedselfruns = mine.nruns;
  if (std::find(registry.begin(), registry.end(), this) == registry.end()) registry.push_back(this);
  owner     = ownerstack.empty() ? nullptr : ownerstack.back();
  pricedbuf = 0;
  for (int k = 0; k < 2; k++)
    for (const PricedPeer &q : k ? recvfrom : sendto) {
      Peer p;
      p.rank       = q.rank;
      p.runs.total = q.total; /* what PlannedVolume() reads */
      p.pricedruns = q.nruns;
      /* SetUp()'s choice: MPI datatypes over long runs, else a buffer for the larger element size */
      p.pricedtyped = usetypes && q.nruns != 1 && q.total >= 64 * q.nruns;
      if (!p.pricedtyped) pricedbuf += (PetscInt64)(sizeof(double) * (size_t)q.total + 1);
      (k ? recvFrom : sendTo).push_back(std::move(p));
    }
  PetscCall(SetUpCma(DDExchangeUseCma())); /* which pairs would copy by cross-memory attach: those have buffers in any case */
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscInt Exchange::CmaPairs() const
{
  PetscInt n = 0;
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) n += p.cma ? 1 : 0;
  return n;
}

PetscInt Exchange::DirectPairs() const
{
  PetscInt n = 0;
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) n += p.direct ? 1 : 0;
  return n;
}

/*
  Which pairs may use cross-memory attach: the two ranks run on one node (same processor name)
  and each could read a token from the other's memory with process_vm_readv (the system may
  forbid it: ptrace restrictions, containers). Both ends of a pair learn both answers, and the
  runs of the other end of each pair, so that both make the same plan (MakeLink). Collective
  over the peers; ranks without peers take no part.
*/
PetscErrorCode Exchange::SetUpCma(PetscBool usecma)
{
  std::vector<PetscMPIInt> peers;

  PetscFunctionBegin;
  for (auto &t : ctag) PetscCall(PetscCommGetNewTag(comm, &t));
  for (auto *v : {&sendTo, &recvFrom})
    for (auto &p : *v) peers.push_back(p.rank);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  if (peers.empty()) PetscFunctionReturn(PETSC_SUCCESS);
  const size_t np = peers.size();
  char         name[MPI_MAX_PROCESSOR_NAME + 1] = "";
  int          nl                               = 0;
  PetscCallMPI(MPI_Get_processor_name(name, &nl));
  unsigned long long h = 1469598103934665603ULL; /* FNV-1a of the processor name */
  for (int i = 0; i < nl; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
  token = (unsigned long long)(size_t)this * 0x9E3779B97F4A7C15ULL ^ (unsigned long long)(MPI_Wtime() * 1e9) ^ ((unsigned long long)getpid() << 20);
#if !defined(DD_HAVE_CMA)
  usecma = PETSC_FALSE;
#endif
  /* stage 1: {use, pid, token address, token, name hash, arena fd + 1 (0: none), arena base, arena size} to and from every peer */
  const ShmArenaInfo              arena = ShmArenaSelf(); /* fd < 0 where -dd_exchange_direct is off */
  constexpr int                   NI    = 8;
  std::vector<unsigned long long> mine  = {(unsigned long long)usecma, (unsigned long long)getpid(), (unsigned long long)(size_t)&token, token, h, (unsigned long long)(arena.fd + 1), arena.base, arena.reserve}, theirs(NI * np);
  std::vector<MPI_Request>        rq(2 * np);
  std::vector<int>                ok(np, 0), theirok(np, 0);
  std::vector<char *>             pmaps(np, nullptr);
  for (size_t i = 0; i < np; i++) PetscCallMPI(MPI_Irecv(&theirs[NI * i], NI, MPI_UNSIGNED_LONG_LONG, peers[i], ctag[0], comm, &rq[i]));
  for (size_t i = 0; i < np; i++) PetscCallMPI(MPI_Isend(mine.data(), NI, MPI_UNSIGNED_LONG_LONG, peers[i], ctag[0], comm, &rq[np + i]));
  PetscCallMPI(MPI_Waitall((int)rq.size(), rq.data(), MPI_STATUSES_IGNORE));
  /* stage 2: read each peer's token; bit 1: map its arena where both have one (a direct pair) */
  for (size_t i = 0; i < np; i++) {
    const unsigned long long *t = &theirs[NI * i];
    if (!usecma || !t[0] || t[4] != h) continue;
#if defined(DD_HAVE_CMA)
    unsigned long long v = 0;
    struct iovec       l  = {&v, sizeof(v)}, r = {(void *)(size_t)t[2], sizeof(v)};
    ok[i]                 = process_vm_readv((pid_t)t[1], &l, 1, &r, 1, 0) == (ssize_t)sizeof(v) && v == t[3];
    if (ok[i] && arena.fd >= 0 && t[5]) {
      pmaps[i] = ShmArenaMapPeer({(long)t[1], (long)t[5] - 1, t[6], t[7]});
      if (pmaps[i]) ok[i] |= 2;
    }
#endif
  }
  for (size_t i = 0; i < np; i++) PetscCallMPI(MPI_Irecv(&theirok[i], 1, MPI_INT, peers[i], ctag[1], comm, &rq[i]));
  for (size_t i = 0; i < np; i++) PetscCallMPI(MPI_Isend(&ok[i], 1, MPI_INT, peers[i], ctag[1], comm, &rq[np + i]));
  PetscCallMPI(MPI_Waitall((int)rq.size(), rq.data(), MPI_STATUSES_IGNORE));
  if (priced) { /* SetUpPriced(): a cma pair packs through a buffer even where MPI datatypes would have sent its runs (stage 3) */
    for (int k = 0; k < 2; k++)
      for (auto &p : k == 0 ? sendTo : recvFrom) {
        size_t i = (size_t)(std::lower_bound(peers.begin(), peers.end(), p.rank) - peers.begin());
        p.cma    = (ok[i] & 1) && (theirok[i] & 1);
        if (p.cma && p.pricedtyped) pricedbuf += (PetscInt64)(sizeof(double) * (size_t)p.runs.total + 1);
      }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* stage 3: the runs of both ends of every pair that may use it */
  std::vector<std::vector<PetscInt>> out;
  std::vector<MPI_Request>           sq;
  out.reserve(sendTo.size() + recvFrom.size());
  for (int k = 0; k < 2; k++)
    for (auto &p : k == 0 ? sendTo : recvFrom) {
      size_t i = (size_t)(std::lower_bound(peers.begin(), peers.end(), p.rank) - peers.begin());
      p.cma    = (ok[i] & 1) && (theirok[i] & 1);
      p.pid    = (long)theirs[NI * i + 1];
      p.direct = p.cma && (ok[i] & 2) && (theirok[i] & 2);
      if (p.direct) {
        p.pmap     = pmaps[i];
        p.pbase    = theirs[NI * i + 6];
        p.preserve = theirs[NI * i + 7];
      }
      if (!p.cma) continue;
      std::vector<PetscInt> v(p.runs.off);
      v.insert(v.end(), p.runs.len.begin(), p.runs.len.end());
      out.push_back(std::move(v));
      sq.emplace_back();
      PetscCallMPI(MPI_Isend(out.back().data(), (PetscMPIInt)out.back().size(), MPIU_INT, p.rank, ctag[2 + k], comm, &sq.back()));
    }
  for (int k = 0; k < 2; k++)
    for (auto &p : k == 0 ? sendTo : recvFrom) {
      if (!p.cma) continue;
      MPI_Status  st;
      PetscMPIInt n;
      PetscCallMPI(MPI_Probe(p.rank, ctag[3 - k], comm, &st)); /* our sendTo's other end is the peer's recvFrom and back */
      PetscCallMPI(MPI_Get_count(&st, MPIU_INT, &n));
      std::vector<PetscInt> v(n);
      PetscCallMPI(MPI_Recv(v.data(), n, MPIU_INT, p.rank, ctag[3 - k], comm, MPI_STATUS_IGNORE));
      PetscCheck(n % 2 == 0, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Bad run list from rank %d", p.rank);
      p.rruns.off.assign(v.begin(), v.begin() + n / 2);
      p.rruns.len.assign(v.begin() + n / 2, v.end());
      p.rruns.total = 0;
      for (auto l : p.rruns.len) p.rruns.total += l;
      PetscCheck(p.rruns.total == p.runs.total, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Rank %d moves %" PetscInt_FMT " entries to this rank's %" PetscInt_FMT, p.rank, p.rruns.total, p.runs.total);
      if (p.buf.empty()) p.buf.resize(sizeof(double) * (size_t)p.runs.total + 1);
    }
  if (!sq.empty()) PetscCallMPI(MPI_Waitall((int)sq.size(), sq.data(), MPI_STATUSES_IGNORE));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* a side's runs are read or written in place by the remote process only if they are few and long (the kernel pins each remote run) */
static bool RemoteInPlace(const Runs &r, size_t es)
{
  size_t n = r.off.size();
  return n == 1 || (n <= IOV_MAX && (size_t)r.total * es >= 1024 * n);
}

/* the local side's runs are handed to the system call as they are if they are not short (else through the buffer) */
static bool LocalInPlace(const Runs &r, size_t es)
{
  size_t n = r.off.size();
  return n == 1 || (size_t)r.total * es >= 256 * n;
}

/* direct pairs: the writer's runs are read in place where they average a cache line or more (a
   shorter run shares its line with entries the writer keeps writing: it packs those first) */
static bool DirectInPlace(const Runs &r, size_t es)
{
  size_t n = r.off.size();
  return n == 1 || (size_t)r.total * es >= 64 * n;
}

/* the pieces of two run lists of the same entries cut where either run ends: f(offset in l, offset in r, length) */
template <class F>
static void CutWhereTheyMeet(const PetscInt *lo, const PetscInt *ll, size_t nL, const PetscInt *ro, const PetscInt *rl, size_t nR, F &&f)
{
  size_t   li = 0, ri = 0;
  PetscInt lp = 0, rp = 0; /* positions in the current runs */
  while (li < nL && ri < nR) {
    if (ll[li] == lp) {
      li++;
      lp = 0;
      continue;
    }
    if (rl[ri] == rp) {
      ri++;
      rp = 0;
      continue;
    }
    PetscInt piece = PetscMin(ll[li] - lp, rl[ri] - rp);
    f(lo[li] + lp, ro[ri] + rp, piece);
    lp += piece;
    rp += piece;
  }
}

/* the system calls of one active side: the runs of both sides (or the whole buffer) cut where they meet, at most IOV_MAX iovecs per side and call */
void Exchange::MakeCalls(CmaCalls &c, const Runs &L, bool lbuf, const Runs &R, bool rbuf, PetscInt total, size_t es, char *lbase)
{
  const PetscInt  whole[2] = {0, total};
  const PetscInt *lo = lbuf ? &whole[0] : L.off.data(), *ll = lbuf ? &whole[1] : L.len.data(), *ro = rbuf ? &whole[0] : R.off.data(), *rl = rbuf ? &whole[1] : R.len.data();
  const size_t    nL = lbuf ? 1 : L.off.size(), nR = rbuf ? 1 : R.off.size();
  PetscInt        cl = 0, cr = 0; /* iovecs in the current call */

  c = CmaCalls();
  CutWhereTheyMeet(lo, ll, nL, ro, rl, nR, [&](PetscInt a, PetscInt b, PetscInt piece) {
    bool lext = cl > 0 && c.loff.back() + c.llen.back() == a, rext = cr > 0 && c.roff.back() + c.rlen.back() == b;
    if ((!lext && cl == IOV_MAX) || (!rext && cr == IOV_MAX)) { /* a new call */
      c.ncall.push_back(cl);
      c.ncall.push_back(cr);
      cl = cr = 0;
      lext = rext = false;
    }
    if (lext) c.llen.back() += piece;
    else {
      c.loff.push_back(a);
      c.llen.push_back(piece);
      cl++;
    }
    if (rext) c.rlen.back() += piece;
    else {
      c.roff.push_back(b);
      c.rlen.push_back(piece);
      cr++;
    }
  });
  if (cl) {
    c.ncall.push_back(cl);
    c.ncall.push_back(cr);
  }
  c.liov.resize(c.loff.size());
  for (size_t i = 0; i < c.loff.size(); i++) c.liov[i] = {lbase + es * (size_t)c.loff[i], es * (size_t)c.llen[i]};
  c.riov.resize(c.roff.size());
}

/*
  The cma plan of one pair. Both ends compute the same from the same runs: the active side (the
  one with more runs: the kernel pins each remote run, local runs are cheap), and whether the
  passive side goes through its buffer. A receiver that adds goes through its buffer by its own
  choice, which it signals when passive; so the active side plans both remote layouts.
*/
PetscErrorCode Exchange::MakeLink(CmaLink &lk, Peer &p, bool reader, bool add, size_t es, const void *mine)
{
  const Runs &w = reader ? p.rruns : p.runs, &r = reader ? p.runs : p.rruns;

  PetscFunctionBegin;
  if (p.direct) { /* the reader copies from the writer's storage (or its packed buffer, for short runs) with plain loads */
    lk.direct   = true;
    lk.reader   = reader;
    lk.active   = reader;
    lk.es       = es;
    lk.rbuf     = !DirectInPlace(w, es);
    lk.localbuf = !reader && lk.rbuf; /* the writer packs for short runs */
    if (!reader) PetscFunctionReturn(PETSC_SUCCESS);
    if (!lk.rbuf) { /* the pieces: both ends' runs cut where they meet, merged where both continue */
      lk.rspan = 0;
      CutWhereTheyMeet(r.off.data(), r.len.data(), r.off.size(), w.off.data(), w.len.data(), w.off.size(), [&](PetscInt a, PetscInt b, PetscInt piece) {
        if (!lk.pn.empty() && lk.pl.back() + lk.pn.back() == a && lk.pr.back() + lk.pn.back() == b) lk.pn.back() += piece;
        else {
          lk.pl.push_back(a);
          lk.pr.push_back(b);
          lk.pn.push_back(piece);
        }
        lk.rspan = PetscMax(lk.rspan, b + piece);
      });
    }
    /* where the writer's storage is not in its arena (memory the tensor did not allocate), the system
       calls as before, into this rank's buffer, then unpacked from it (adding and fills as in the MPI path) */
    MakeCalls(lk.calls[0], r, true, w, false, p.runs.total, es, p.buf.data());
    MakeCalls(lk.calls[1], r, true, w, true, p.runs.total, es, p.buf.data());
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const bool  areader = r.off.size() >= w.off.size();
  const Runs &L = areader ? r : w, &R = areader ? w : r;
  const bool  rbuf = !RemoteInPlace(R, es);
  lk.reader = reader;
  lk.active = reader == areader;
  lk.es     = es;
  if (!lk.active) {
    lk.localbuf = rbuf || (reader && add);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  lk.localbuf = (reader && add) || !LocalInPlace(L, es);
  char *lbase = lk.localbuf ? p.buf.data() : (char *)mine;
  MakeCalls(lk.calls[0], L, lk.localbuf, R, false, p.runs.total, es, lbase);
  MakeCalls(lk.calls[1], L, lk.localbuf, R, true, p.runs.total, es, lbase);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the active side's copy: process_vm_readv (receiver) or process_vm_writev (sender), call by call */
PetscErrorCode Exchange::CmaCopy(CmaLink &lk, Peer &p)
{
  PetscFunctionBegin;
#if defined(DD_HAVE_CMA)
  CmaCalls   &c  = lk.calls[lk.rsig & 1];
  const char *rb = (const char *)(size_t)(lk.rsig & ~1ULL);
  if (rb != c.rbase) {
    for (size_t i = 0; i < c.roff.size(); i++) c.riov[i] = {(char *)rb + lk.es * (size_t)c.roff[i], lk.es * (size_t)c.rlen[i]};
    c.rbase = rb;
  }
  size_t l = 0, r = 0;
  for (size_t k = 0; k < c.ncall.size(); k += 2) {
    size_t nl = (size_t)c.ncall[k], nr = (size_t)c.ncall[k + 1], want = 0;
    for (size_t i = 0; i < nl; i++) want += c.liov[l + i].iov_len;
    ssize_t got = lk.reader ? process_vm_readv((pid_t)p.pid, &c.liov[l], nl, &c.riov[r], nr, 0) : process_vm_writev((pid_t)p.pid, &c.liov[l], nl, &c.riov[r], nr, 0);
    PetscCheck(got == (ssize_t)want, PETSC_COMM_SELF, PETSC_ERR_SYS, "Cross-memory %s of %zu bytes %s rank %d (pid %ld) moved %zd: %s; run with -dd_exchange_cma 0", lk.reader ? "read" : "write", want, lk.reader ? "from" : "to", p.rank, p.pid, (ssize_t)got, got < 0 ? strerror(errno) : "short transfer");
    l += nl;
    r += nr;
  }
#else
  SETERRQ(PETSC_COMM_SELF, PETSC_ERR_SUP, "Cross-memory attach is not available on this system");
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The active end of a direct pair (the reader): the writer's storage (or its packed buffer) through
  the writer's arena mapped here, with plain loads: pieces copied (or added) into this rank's
  storage, or the buffer unpacked (the fill fused where Unpack() can). An address outside the
  writer's arena (storage the tensor did not allocate) goes by system call into this rank's buffer.
*/
PetscErrorCode Exchange::DirectCopy(CmaLink &lk, Peer &p, DDDataType dt, void *dst, bool add, bool &filled)
{
  const bool               rb   = lk.rsig & 1;
  const unsigned long long ra   = lk.rsig & ~1ULL;
  const size_t             span = lk.es * (size_t)(rb ? p.runs.total : lk.rspan);

  PetscFunctionBegin;
  PetscCheck(rb == lk.rbuf, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Direct exchange with rank %d: the writer %s its buffer, the plan says otherwise", p.rank, rb ? "went through" : "did not use");
  if (!p.pmap || ra < p.pbase || ra + span > p.pbase + p.preserve) {
    PetscCall(CmaCopy(lk, p));
    PetscCall(Unpack(dt, p, p.buf.data(), dst, add, filled));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const char *src = p.pmap + (ra - p.pbase);
  if (rb) {
    PetscCall(Unpack(dt, p, src, dst, add, filled));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T       = decltype(z);
    const T *from = (const T *)src;
    T       *to   = (T *)dst;
    for (size_t i = 0; i < lk.pn.size(); i++) {
      const T *f = from + lk.pr[i];
      T       *t = to + lk.pl[i];
      if (add)
        for (PetscInt j = 0; j < lk.pn[i]; j++) t[j] += f[j];
      else std::memcpy(t, f, sizeof(T) * (size_t)lk.pn[i]);
    }
    return PETSC_SUCCESS;
  }));
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
  The unpack of a constant-stride face of single entries fused with a fill of single entries at the
  same count and stride: row i gets the face's entry at d + i stride and the fill value at
  d + i stride + fo. A W-split halo in plain storage receives one column and pads the opposite
  one, one entry per row of every channel (8192 rows 1 KiB apart for 1x16x512x512 on 2 ranks):
  one strided pass writes both (measured 23-24 us per halo exchange against 30-32 us in two).
*/
template <class T>
static void UnpackFillStrided(PetscInt n, const T *buf, T *d, PetscInt stride, PetscInt fo, T v, bool add)
{
  if (add)
    for (PetscInt i = 0; i < n; i++, d += stride) {
      d[0] += buf[i];
      d[fo] = v;
    }
  else
    for (PetscInt i = 0; i < n; i++, d += stride) {
      d[0]  = buf[i];
      d[fo] = v;
    }
}

/* whether a received face of runs r is unpacked with the fill: single entries (the plain W-split faces) at the fill's count and stride.
   Longer runs (channels-last and blocked faces: one 64-byte vector per row) were measured slower fused than in two passes (15-19 us against 12 us per halo exchange) */
static bool Fusable(const Runs &r, const Runs &fill)
{
  return r.Strided() && fill.Strided() && r.len[0] == 1 && fill.len[0] == 1 && fill.stride == r.stride && fill.off.size() == r.off.size();
}

/* one received message from the peer's buffer into dst; with the fill (not yet done) in the same pass where the geometries match */
PetscErrorCode Exchange::Unpack(DDDataType dt, const Peer &p, const void *buf, void *dst, bool add, bool &filled)
{
  const Runs &r = p.runs;

  PetscFunctionBegin;
  if (pendfill && !filled && Fusable(r, *pendfill)) {
    PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      UnpackFillStrided<T>((PetscInt)r.off.size(), (const T *)buf, (T *)dst + r.off[0], r.stride, pendfill->off[0] - r.off[0], (T)pendvalue, add);
      return PETSC_SUCCESS;
    }));
    filled = true;
    fusedfills++;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const struct _DDBackendVecOps *ops = nullptr;
  PetscCall(DDVecOps_Private(memtype, &ops));
  PetscCall(UnpackRuns(memtype, ops, dt, r, buf, dst, add));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* every cma link of a plan with its peer: k = 0 the peers in `from` (this rank receives), 1 those in `to` */
template <class PL, class F>
static PetscErrorCode ForEachLink(PL &pl, std::vector<Peer> &from, std::vector<Peer> &to, F &&f)
{
  PetscFunctionBegin;
  for (int k = 0; k < 2; k++) {
    std::vector<Peer>    &v  = k == 0 ? from : to;
    std::vector<CmaLink> &lv = k == 0 ? pl.rlink : pl.slink;
    for (size_t i = 0; i < v.size(); i++) PetscCall(f(k, v[i], lv[i]));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
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
  pl.rlink.assign(from.size(), CmaLink());
  pl.slink.assign(to.size(), CmaLink());
  if (Device()) { /* every message through its page-locked staging buffer */
    for (size_t i = 0; i < from.size(); i++) PetscCallMPI(MPI_Recv_init(from[i].hbuf, (PetscMPIInt)from[i].runs.total, mt, from[i].rank, tag, comm, &pl.recv[i]));
    for (size_t i = 0; i < to.size(); i++) PetscCallMPI(MPI_Send_init(to[i].hbuf, (PetscMPIInt)to[i].runs.total, mt, to[i].rank, tag, comm, &pl.send[i]));
    pl.src = src;
    pl.dst = dst;
    pl.ti  = ti;
    pl.add = add;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const bool cma = true; /* the processes' memories (host memory) */
  /* cma pairs: the plan, and the persistent signals (tags by which end is passive: a rank may be passive in both pairs with a peer) */
  PetscCall(ForEachLink(pl, from, to, [&](int k, Peer &p, CmaLink &lk) -> PetscErrorCode {
    if (!cma || !p.cma) return PETSC_SUCCESS;
    PetscCall(MakeLink(lk, p, k == 0, add, es, k == 0 ? dst : src));
    const bool  passivewriter = lk.active == lk.reader;          /* the pair's passive end is the sender */
    PetscMPIInt tr = ctag[passivewriter ? 0 : 2], td = ctag[passivewriter ? 1 : 3];
    if (lk.active) {
      PetscCallMPI(MPI_Recv_init(&lk.rsig, 1, MPI_UNSIGNED_LONG_LONG, p.rank, tr, comm, &lk.ready));
      PetscCallMPI(MPI_Send_init(&lk.sig, 1, MPI_UNSIGNED_LONG_LONG, p.rank, td, comm, &lk.done));
    } else {
      lk.sig = (unsigned long long)(size_t)(lk.localbuf ? (const void *)p.buf.data() : (k == 0 ? (const void *)dst : src)) | (lk.localbuf ? 1ULL : 0ULL);
      PetscCallMPI(MPI_Send_init(&lk.sig, 1, MPI_UNSIGNED_LONG_LONG, p.rank, tr, comm, &lk.ready));
      PetscCallMPI(MPI_Recv_init(&lk.rsig, 1, MPI_UNSIGNED_LONG_LONG, p.rank, td, comm, &lk.done));
    }
    return PETSC_SUCCESS;
  }));
  for (size_t i = 0; i < from.size(); i++) {
    Peer &p = from[i];
    if (pl.rlink[i].es) continue;
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
    if (pl.slink[i].es) continue;
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
PetscErrorCode Exchange::Begin(Plan &pl, DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add, const Runs *fill, PetscReal value)
{
  PetscFunctionBegin;
  PetscCheck(!priced, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "This exchange was set up for pricing only (a trial set-up of -net_distribution auto): it cannot move data");
  PetscCheck(!inflight, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "Exchange already in flight");
  const int ti = dt == DD_FLOAT32 ? 0 : 1;
  for (auto *v : {&from, &to}) /* the reads of our packed buffers the last exchange did not wait for */
    for (auto &p : *v)
      if (p.pending) {
        PetscCallMPI(MPI_Wait(p.pending, MPI_STATUS_IGNORE));
        p.pending = nullptr;
      }
  if (pl.ti != ti || pl.src != src || pl.dst != dst || pl.add != add) {
    MPI_Datatype mt;
    PetscCall(DDDataTypeGetMPIType(dt, &mt));
    PetscCall(MakePlan(pl, ti, mt, src, dst, from, to, add));
  }
  if (Device()) {
    PetscCall(BeginDevice(pl, dt, src, dst, from, to, srcself, dstself, add, fill, value));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const struct _DDBackendVecOps *ops = nullptr;
  PetscCall(DDVecOps_Private(memtype, &ops)); /* packing runs on the memory's backend */
  const size_t es = ti == 0 ? sizeof(float) : sizeof(double);
  for (size_t i = 0; i < from.size(); i++) { /* receives: MPI, or the cma signals (an active end waits for ready, a passive one for done) */
    CmaLink &lk = pl.rlink[i];
    if (!lk.es) {
      if (pl.recv[i] != MPI_REQUEST_NULL) PetscCallMPI(MPI_Start(&pl.recv[i]));
      continue;
    }
    PetscCallMPI(MPI_Start(lk.active ? &lk.ready : &lk.done));
    if (!lk.active) PetscCallMPI(MPI_Start(&lk.ready)); /* our destination may be written now */
  }
  for (size_t i = 0; i < to.size(); i++) {
    Peer    &p  = to[i];
    CmaLink &lk = pl.slink[i];
    counted[&pl == &fwd ? 0 : 1][0]++;
    counted[&pl == &fwd ? 0 : 1][1] += (PetscInt64)es * p.runs.total;
    if (lk.es) {
      if (lk.localbuf) PetscCall(PackRuns(memtype, ops, dt, p.runs, src, p.buf.data()));
      if (lk.active) PetscCallMPI(MPI_Start(&lk.ready));
      else {
        PetscCallMPI(MPI_Start(&lk.done));
        PetscCallMPI(MPI_Start(&lk.ready)); /* our source (or its packed copy) may be read now */
      }
      continue;
    }
    if (p.type[ti] == MPI_DATATYPE_NULL && !p.runs.Single()) PetscCall(PackRuns(memtype, ops, dt, p.runs, src, p.buf.data()));
    PetscCallMPI(MPI_Start(&pl.send[i]));
  }
  inflight = true;
  /* the fill: left for End where a face received through a buffer has its rows (one pass for both), else now, while the peers pack */
  pendfill = nullptr;
  if (fill && !fill->off.empty()) {
    for (size_t i = 0; i < from.size() && !pendfill && fusefill && memtype == DD_MEMTYPE_HOST; i++) {
      const Peer    &p  = from[i];
      const CmaLink &lk = pl.rlink[i];
      if ((lk.es ? (lk.direct ? lk.rbuf : lk.localbuf) : (add || (!p.runs.Single() && p.type[ti] == MPI_DATATYPE_NULL))) && Fusable(p.runs, *fill)) {
        pendfill  = fill;
        pendvalue = value;
      }
    }
    if (!pendfill)
      PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
        using T = decltype(z);
        FillRuns(*fill, (T *)dst, (T)value);
        return PETSC_SUCCESS;
      }));
  }
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
  bool filled = !pendfill;

  PetscFunctionBegin;
  PetscCheck(inflight, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "No exchange in flight");
  if (Device()) {
    PetscCall(EndDevice(pl, dt, dst, from, to, add));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  const int    ti  = dt == DD_FLOAT32 ? 0 : 1;
  const size_t es  = ti == 0 ? sizeof(float) : sizeof(double);
  PetscInt64  *cnt = counted[&pl == &fwd ? 0 : 1];
  /* the active ends of cma pairs copy first: their peers signalled ready in their Begin */
  PetscCall(ForEachLink(pl, from, to, [&](int, Peer &p, CmaLink &lk) -> PetscErrorCode {
    if (!lk.es || !lk.active) return PETSC_SUCCESS;
    PetscCallMPI(MPI_Wait(&lk.ready, MPI_STATUS_IGNORE));
    if (lk.direct) PetscCall(DirectCopy(lk, p, dt, dst, add, filled));
    else PetscCall(CmaCopy(lk, p));
    PetscCallMPI(MPI_Start(&lk.done));
    if (lk.reader) {
      if (lk.localbuf) PetscCall(Unpack(dt, p, p.buf.data(), dst, add, filled)); /* never on a direct reader: DirectCopy() unpacks */
      cnt[2]++;
      cnt[3] += (PetscInt64)es * p.runs.total;
    }
    return PETSC_SUCCESS;
  }));
  for (size_t i = 0; i < from.size(); i++) {
    Peer      &p = from[i];
    MPI_Status st;
    int        nb = 0;
    if (pl.rlink[i].es) continue;
    PetscCallMPI(MPI_Wait(&pl.recv[i], &st));
    PetscCallMPI(MPI_Get_count(&st, MPI_BYTE, &nb)); /* what arrived, for the model's counters */
    cnt[2]++;
    cnt[3] += nb;
    if (add || (!p.runs.Single() && p.type[ti] == MPI_DATATYPE_NULL)) PetscCall(Unpack(dt, p, p.buf.data(), dst, add, filled));
  }
  /* the passive ends wait until their peers are done with their memory */
  PetscCall(ForEachLink(pl, from, to, [&](int, Peer &p, CmaLink &lk) -> PetscErrorCode {
    if (!lk.es) return PETSC_SUCCESS;
    if (lk.active) PetscCallMPI(MPI_Wait(&lk.done, MPI_STATUS_IGNORE));
    else {
      /* a sender read from its packed buffer need not wait: its storage is free, the buffer waits until its next use */
      if (!lk.reader && lk.localbuf) p.pending = &lk.done;
      else PetscCallMPI(MPI_Wait(&lk.done, MPI_STATUS_IGNORE));
      PetscCallMPI(MPI_Wait(&lk.ready, MPI_STATUS_IGNORE));
      if (lk.reader) {
        if (lk.localbuf) PetscCall(Unpack(dt, p, p.buf.data(), dst, add, filled));
        cnt[2]++;
        cnt[3] += (PetscInt64)es * p.runs.total;
      }
    }
    return PETSC_SUCCESS;
  }));
  PetscCheck(filled, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Exchange: the fill was left for a received face that did not take it");
  pendfill = nullptr;
  for (auto &r : pl.send)
    if (r != MPI_REQUEST_NULL) PetscCallMPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  inflight = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  One direction on device memory. Begin: each message packed on the device (a single run is copied
  as it is), copied to its page-locked buffer and sent; the fill and the rank's own part run as
  device kernels while the messages travel. End: each received message copied to the device and
  unpacked there (adding with add). The copies to and from the host are synchronous, so a buffer
  handed to MPI holds its data. Issue 11 part 3 (staging through host buffers; MPI that takes
  device pointers and NCCL are not used yet).
*/
PetscErrorCode Exchange::BeginDevice(Plan &pl, DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add, const Runs *fill, PetscReal value)
{
  const struct _DDBackendVecOps *ops = dvec;
  const struct _DDBackendMemOps *mem = dmem;
  const size_t                   es = dt == DD_FLOAT32 ? sizeof(float) : sizeof(double);
  PetscInt64                    *cnt = counted[&pl == &fwd ? 0 : 1];

  PetscFunctionBegin;
  for (auto &r : pl.recv) PetscCallMPI(MPI_Start(&r));
  for (size_t i = 0; i < to.size(); i++) {
    Peer        &p = to[i];
    const size_t n = es * (size_t)p.runs.total;
    if (p.runs.Single()) PetscCall(mem->copy(p.hbuf, (const char *)src + es * (size_t)p.runs.off[0], n));
    else {
      PetscCall(ops->packp(dt, p.druns, src, p.dbuf));
      PetscCall(mem->copy(p.hbuf, p.dbuf, n));
    }
    PetscCallMPI(MPI_Start(&pl.send[i]));
    cnt[0]++;
    cnt[1] += (PetscInt64)n;
  }
  inflight = true;
  pendfill = nullptr;
  if (fill && !fill->off.empty()) {
    if (fill != fillkey) { /* the caller's fill (the halo's padding) is prepared once */
      PetscCall(ops->runsfree(dfill));
      dfill   = nullptr;
      fillkey = nullptr;
      PetscCall(ops->runsprepare(fill->off.size(), fill->off.data(), fill->len.data(), fill->total, &dfill));
      fillkey = fill;
    }
    PetscCall(ops->fillp(dt, dfill, dst, value));
  }
  if (self.total) {
    const bool fwdself = &srcself == &self.root; /* forward: roots -> leaves; adjoint: leaves -> roots */
    PetscCall(ops->packp(dt, fwdself ? dselfroot : dselfleaf, src, selfbuf));
    PetscCall(ops->unpackp(dt, fwdself ? dselfleaf : dselfroot, selfbuf, dst, add ? PETSC_TRUE : PETSC_FALSE));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::EndDevice(Plan &pl, DDDataType dt, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add)
{
  const struct _DDBackendVecOps *ops = dvec;
  const struct _DDBackendMemOps *mem = dmem;
  const size_t                   es = dt == DD_FLOAT32 ? sizeof(float) : sizeof(double);
  PetscInt64                    *cnt = counted[&pl == &fwd ? 0 : 1];

  PetscFunctionBegin;
  for (size_t i = 0; i < from.size(); i++) {
    Peer        &p = from[i];
    const size_t n = es * (size_t)p.runs.total;
    MPI_Status   st;
    int          nb = 0;
    PetscCallMPI(MPI_Wait(&pl.recv[i], &st));
    PetscCallMPI(MPI_Get_count(&st, MPI_BYTE, &nb));
    cnt[2]++;
    cnt[3] += nb;
    if (!add && p.runs.Single()) PetscCall(mem->copy((char *)dst + es * (size_t)p.runs.off[0], p.hbuf, n));
    else {
      PetscCall(mem->copy(p.dbuf, p.hbuf, n));
      PetscCall(ops->unpackp(dt, p.druns, p.dbuf, dst, add ? PETSC_TRUE : PETSC_FALSE));
    }
  }
  for (auto &r : pl.send) PetscCallMPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  (void)to;
  inflight = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Exchange::ForwardBegin(DDDataType dt, const void *root, void *leaf, const Runs *fill, PetscReal value)
{
  return Begin(fwd, dt, root, leaf, recvFrom, sendTo, self.root, self.leaf, false, fill, value);
}

PetscErrorCode Exchange::ForwardEnd(DDDataType dt, const void *root, void *leaf)
{
  (void)root;
  return End(fwd, dt, leaf, recvFrom, sendTo, false);
}

PetscErrorCode Exchange::AdjointBegin(DDDataType dt, const void *leaf, void *root, bool add, const Runs *fill, PetscReal value)
{
  return Begin(adj, dt, leaf, root, sendTo, recvFrom, self.leaf, self.root, add, fill, value);
}

PetscErrorCode Exchange::AdjointEnd(DDDataType dt, const void *leaf, void *root, bool add)
{
  (void)leaf;
  return End(adj, dt, root, sendTo, recvFrom, add);
}

PetscErrorCode Exchange::ZeroLeaves(DDDataType dt, void *leaf)
{
  PetscFunctionBegin;
  PetscCheck(!priced, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "This exchange was set up for pricing only (a trial set-up of -net_distribution auto): it cannot move data");
  if (Device()) {
    PetscCall(dvec->fillp(dt, dleaves, leaf, 0));
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(DispatchType(dt, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    FillRuns(allLeaves, (T *)leaf, (T)0);
    return PETSC_SUCCESS;
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
