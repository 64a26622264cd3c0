/*
  Exchange: executes a PetscSF communication graph (roots -> leaves) and its transpose with
  run-based packing and persistent point-to-point messages (C++ only).

  Everything that does not depend on the data is planned once: the runs of every message are
  found at set-up, and runs of equal length at a constant stride (a W-split face: one entry per
  row; channels-last or blocked faces: one channel vector per row) are recognised there and
  copied by constant-stride loops instead of through the offset lists. The messages are
  persistent requests (MPI_Send_init / MPI_Recv_init), created at the first exchange in each
  direction and re-created only when the storages' addresses, the data type or the adding
  mode change; every later call packs straight into the send buffer, starts them
  (MPI_Start), and unpacks straight from the receive buffer.

  Between ranks of one node the data of a pair does not go through MPI's transport at all: at
  set-up the two ranks check that each can read the other's memory (process_vm_readv of a
  token; same processor name) and exchange their run lists, and every exchange is then one copy
  by the kernel from one process's storage (or packed buffer) into the other's (cross-memory
  attach, the single-copy mechanism MPI's shared-memory transport uses for large contiguous
  messages, here for any layout), with two 8-byte persistent MPI messages per pair as the
  ready and done signals (see CmaLink). -dd_exchange_cma 0, device memory, or ranks on
  different nodes use the MPI messages below.

  With -dd_exchange_direct (the default with more than one rank) the copy needs no system call:
  each process's host tensors live in its shared arena (src/sys/shmarena.hpp), which its on-node
  partners map once at set-up, and the reader of a pair copies the writer's runs (or, for runs
  shorter than a cache line, the writer's packed buffer, itself in the arena) with plain loads
  into its own storage, adding where the adjoint adds; the same ready and done signals order it
  (issue 16, item 1).

  PetscSF describes the graphs of the repartition and halo primitives; this engine moves the
  data. It merges the graph's index lists into runs of consecutive offsets (memcpy-sized
  pieces for faces along slow dimensions, tight gather loops for strided faces), sends
  single-run messages straight from (and receives them straight into) the tensor's storage,
  copies the rank's own part directly without buffers, and adds in the adjoint with its own
  float and double kernels. A caller may hand Begin a fill (the halo's constant padding, entries
  that are no leaves): it is written while the peers pack, or, where a face received through a
  buffer has the same rows (a plain W split: one column received, the opposite one padded), in
  the same strided pass as that face's unpack in End.
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <petscsf.h>
#include <sys/shmarena.hpp>
#include <sys/uio.h>
#include <vector>
#include <algorithm>

struct _DDBackendMemOps;
struct _DDBackendVecOps;

namespace ddnn
{

/* Writes the four message/byte counts t (sent messages, sent bytes, received messages, received bytes)
   to the optional outputs of the public volume and counter getters */
inline void CommVolumeOut(const PetscInt64 t[4], PetscInt64 *sendmsgs, PetscInt64 *sendbytes, PetscInt64 *recvmsgs, PetscInt64 *recvbytes)
{
  if (sendmsgs) *sendmsgs = t[0];
  if (sendbytes) *sendbytes = t[1];
  if (recvmsgs) *recvmsgs = t[2];
  if (recvbytes) *recvbytes = t[3];
}
struct Runs {
  std::vector<PetscInt> off, len;
  PetscInt              total = 0;
  PetscInt              stride = 0; /* > 0: every run has length len[0] and off[i] = off[0] + i stride (found at Build) */
  void                  Build(const PetscInt *idx, PetscInt n);
  bool                  Single() const { return off.size() == 1; }
  bool                  Strided() const { return stride > 0; }
};

/* Constant-stride packing of n runs of length len, the first at `first` (host memory; exchange.cxx's plans use it) */
PetscErrorCode HostPackStrided(DDDataType dt, PetscInt n, PetscInt first, PetscInt stride, PetscInt len, const void *src, void *buf);
PetscErrorCode HostUnpackStrided(DDDataType dt, PetscInt n, PetscInt first, PetscInt stride, PetscInt len, const void *buf, void *dst, PetscBool add);

/* a[run] = v over all runs, with the constant-stride loop where the runs have one */
template <class T>
inline void FillRuns(const Runs &r, T *a, T v)
{
  if (r.Strided() && r.len[0] == 1) {
    T *p = a + r.off[0];
    for (size_t i = 0; i < r.off.size(); i++, p += r.stride) *p = v;
    return;
  }
  for (size_t i = 0; i < r.off.size(); i++) std::fill(a + r.off[i], a + r.off[i] + r.len[i], v);
}

struct CopyRuns { /* element-wise pairs root -> leaf, merged where both are consecutive */
  std::vector<PetscInt> root, leaf, len;
  PetscInt              total = 0;
};

struct Peer {
  PetscMPIInt       rank = -1;
  Runs              runs;
  ShmBuffer         buf; /* the packed message (in the shared arena with -dd_exchange_direct: a direct partner reads it in place) */
  MPI_Datatype      type[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL}; /* indexed over the runs, float and double; NULL: pack by hand */
  long              pid = 0;     /* cma: the peer's process id */
  bool              cma = false; /* both ranks of the pair can read and write each other's memory (same node, process_vm_readv allowed) */
  Runs              rruns;       /* cma: the peer's runs of the same messages (the other end's offsets, same entry order) */
  bool              direct = false;  /* cma pair whose two ends both have a shared arena (-dd_exchange_direct), each mapped by the other */
  char             *pmap   = nullptr; /* direct: the peer's arena mapped in this process */
  unsigned long long pbase = 0, preserve = 0; /* direct: its base address in the peer's process, and its size */
  MPI_Request      *pending = nullptr; /* cma: the done signal of a read of our packed buffer that End did not wait for (before the buffer's next use) */
  bool              pricedtyped = false; /* Exchange::SetUpPriced(): SetUp() would send the runs with MPI datatypes (no buffer unless cma) */
  PetscInt          pricedruns = 0;      /* Exchange::SetUpPriced(): the number of runs SetUp() would find (runs.off stays empty) */
  void             *dbuf = nullptr;      /* device memory: the message packed on the device */
  void             *hbuf = nullptr;      /* device memory: its host staging copy (page-locked), what MPI sends or receives */
  void             *druns = nullptr;     /* device memory: the runs prepared on the device (runsprepare) */
};

/*
  One pair of a direction moved by a single copy between the two processes' memories (cross-memory
  attach: process_vm_readv / process_vm_writev, what MPI's shared-memory transport does for large
  contiguous messages). The side with more runs is "active" and makes the system calls, whose
  per-run cost is small on the local side and large on the remote side; the other side is
  "passive" and only signals. A remote side with many short runs packs them into its buffer first
  (one remote run); a local side with short runs goes through its buffer and the packing loops.
  A receiver that adds (a rank's own choice: the scatter's adjoint where its roots have several
  leaves) goes through its buffer; as the passive side it says so in its signal.
*/
struct CmaCalls { /* the active side's system calls: iovecs in elements, ncall[2c], ncall[2c + 1]: local and remote counts of call c */
  std::vector<PetscInt>     loff, llen, roff, rlen, ncall;
  std::vector<struct iovec> liov, riov; /* in bytes, for the current addresses */
  const void               *rbase = nullptr; /* the remote base riov was made for */
};
struct CmaLink {
  bool               active = false;    /* this rank makes the system calls */
  bool               direct = false;    /* a direct pair (Peer::direct): the active end is the reader and copies with plain loads from the mapped arena */
  bool               rbuf   = false;    /* direct: the writer packs into its buffer (short runs), the reader unpacks from it in place */
  std::vector<PetscInt> pl, pr, pn;     /* direct, writer in place: pieces (reader's offset, writer's offset, length) in entries */
  PetscInt           rspan = 0;         /* direct, writer in place: entries from the writer's storage base that the pieces reach */
  bool               reader = false;    /* this rank receives the entries (its dst) */
  bool               localbuf = false;  /* this rank's side goes through its packed buffer */
  size_t             es = 0;            /* entry size in bytes; 0: not a cma pair */
  CmaCalls           calls[2];          /* active: the remote side in place or through its buffer (as the passive side signals) */
  unsigned long long sig = 0, rsig = 0; /* the signal's payload sent (passive: base address, | 1 when through its buffer) and received */
  MPI_Request        ready = MPI_REQUEST_NULL, done = MPI_REQUEST_NULL; /* persistent signals: passive -> active, active -> passive */
};

class Exchange
{
public:
  ~Exchange();
  /* where the storages live: the backend of that memory packs and unpacks. Set before SetUp(). Device
     memory: every message is packed on the device, copied to a page-locked host buffer and sent
     from there (received likewise), the rank's own part and the fills are device kernels; no MPI
     datatypes, no cross-memory attach, no fused fills (issue 11 part 3) */
  DDMemType memtype = DD_MEMTYPE_HOST;
  PetscErrorCode SetUp(PetscSF sf, MPI_Comm comm, PetscMPIInt tag, PetscBool usetypes);
  /* the pricing-only set-up (PricingOnly(), sfutil.hpp: the trial set-ups of -net_distribution auto):
     the peers, their entry counts and the message buffers SetUp() would find, from the counts and
     the numbers of runs BuildStoragePlan() computed, with no graph, no runs and no buffers; such an
     exchange answers PlannedVolume() and BufferBytes() exactly as the built one, and refuses to run */
  struct PricedPeer {
    PetscMPIInt rank;
    PetscInt    total, nruns;
  };
  /* self: the rank's own part (total entries, nruns runs consecutive on both sides), for PlannedWork() */
  PetscErrorCode SetUpPriced(MPI_Comm comm, const std::vector<PricedPeer> &sendto, const std::vector<PricedPeer> &recvfrom, PricedPeer self, PetscBool usetypes);
  /* how many pairs (of sendTo and recvFrom) move their data by cross-memory attach instead of MPI messages */
  PetscInt       CmaPairs() const;
  /* how many of those read each other's storage directly through the shared arenas (-dd_exchange_direct) */
  PetscInt       DirectPairs() const;
  /* leaf = root (forward); also leaf[fill] = value where fill is given (entries that are no leaves:
     the halo's constant padding): in Begin while the peers pack, or in End in the same pass over
     the rows as a received face of the same geometry (Fusable()); fill must live until End (on
     device memory its runs are prepared once per Runs object: a caller passes a fixed one) */
  PetscErrorCode ForwardBegin(DDDataType dt, const void *root, void *leaf, const Runs *fill = nullptr, PetscReal value = 0);
  PetscErrorCode ForwardEnd(DDDataType dt, const void *root, void *leaf);
  /* root = leaf (add = false) or root += leaf (add = true) (adjoint); root[fill] = value as in the forward */
  PetscErrorCode AdjointBegin(DDDataType dt, const void *leaf, void *root, bool add, const Runs *fill = nullptr, PetscReal value = 0);
  PetscErrorCode AdjointEnd(DDDataType dt, const void *leaf, void *root, bool add);
  /* sets every leaf entry to zero */
  PetscErrorCode ZeroLeaves(DDDataType dt, void *leaf);
  PetscInt       RemoteEntries() const;
  PetscInt       NumPeers() const { return (PetscInt)(sendTo.size() + recvFrom.size()); }
  /* performance model (issue 16): what one exchange in direction dir (0 forward, 1 adjoint) sends
     and receives on this rank, from the plan: v = {messages sent, bytes sent, messages received,
     bytes received} for entries of es bytes; the rank's own part is a copy, not a message */
  void           PlannedVolume(int dir, size_t es, PetscInt64 v[4]) const;
  /* performance model (issue 16): the runs of consecutive offsets one exchange in direction dir (0 forward,
     1 adjoint) walks on this rank: w[0] those it sends from (packs, or its peers read), w[1] those it
     receives into, w[2] those of its own part (copied from one storage to the other); w[3] the entries of
     its own part */
  void           PlannedWork(int dir, PetscInt64 w[4]) const;
  /* bytes of the message buffers the plan allocated */
  PetscInt64     BufferBytes() const;
  /* what was actually moved since the last reset, same order as PlannedVolume(); sends counted as
     started, receives from the completed requests' statuses (MPI_Get_count in bytes) */
  PetscInt64     counted[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  const void    *owner = nullptr; /* the object (primitive) whose set-up built this exchange */
  PetscInt64     fusedfills = 0;  /* fills done in the pass of a received face (tests) */

private:
  /* the persistent requests of one direction, valid for the addresses, type and mode they were made for */
  struct Plan {
    const void              *src = nullptr;
    void                    *dst = nullptr;
    int                      ti  = -1;
    bool                     add = false;
    std::vector<MPI_Request> recv, send; /* one per peer of `from` and of `to` (cma pairs: the ready/done signals) */
    std::vector<CmaLink>     rlink, slink; /* per peer of `from` and of `to`: the cma plan (unused for MPI pairs) */
  };
  PetscErrorCode    MakePlan(Plan &pl, int ti, MPI_Datatype mt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add);
  static void       FreePlan(Plan &pl);
  /* one direction: src -> the peers in `to`, the peers in `from` -> dst (adding with add) */
  PetscErrorCode    Begin(Plan &pl, DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add, const Runs *fill = nullptr, PetscReal value = 0);
  PetscErrorCode    End(Plan &pl, DDDataType dt, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add);
  PetscErrorCode    Unpack(DDDataType dt, const Peer &p, const void *buf, void *dst, bool add, bool &filled);
  PetscErrorCode    SetUpCma(PetscBool usecma);
  bool              Device() const { return memtype != DD_MEMTYPE_HOST; }
  PetscErrorCode    SetUpStaging();
  PetscErrorCode    BeginDevice(Plan &pl, DDDataType dt, const void *src, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, const std::vector<PetscInt> &srcself, const std::vector<PetscInt> &dstself, bool add, const Runs *fill, PetscReal value);
  PetscErrorCode    EndDevice(Plan &pl, DDDataType dt, void *dst, std::vector<Peer> &from, std::vector<Peer> &to, bool add);
  void             *selfbuf = nullptr; /* device memory: the rank's own part, packed from the source and unpacked into the destination */
  void             *dselfroot = nullptr, *dselfleaf = nullptr, *dleaves = nullptr; /* device memory: the runs of the own part's roots and leaves, of all leaves */
  void             *dfill = nullptr;     /* device memory: the runs of the last fill, prepared for the caller's Runs fillkey */
  const Runs       *fillkey = nullptr;
  const ::_DDBackendMemOps *dmem = nullptr; /* device memory: its backend's memory and vector operations (SetUpStaging()) */
  const ::_DDBackendVecOps *dvec = nullptr;
  PetscErrorCode    MakeLink(CmaLink &lk, Peer &p, bool reader, bool add, size_t es, const void *mine);
  PetscErrorCode    CmaCopy(CmaLink &lk, Peer &p);
  PetscErrorCode    DirectCopy(CmaLink &lk, Peer &p, DDDataType dt, void *dst, bool add, bool &filled);
  static void       MakeCalls(CmaCalls &c, const Runs &L, bool lbuf, const Runs &R, bool rbuf, PetscInt total, size_t es, char *lbase);
  Plan              fwd, adj;
  bool              priced = false;      /* set up by SetUpPriced(): counts only */
  PetscInt64        pricedbuf = 0;       /* then the bytes of the buffers SetUp() would allocate */
  PetscInt64        pricedselfruns = 0;  /* and the runs of the rank's own part (self stays empty) */
  std::vector<Peer> sendTo;   /* forward: roots of mine that leaf ranks need */
  std::vector<Peer> recvFrom; /* forward: leaves of mine whose roots live on root ranks */
  CopyRuns          self;
  Runs              allLeaves;
  MPI_Comm          comm = MPI_COMM_NULL;
  PetscMPIInt       tag  = 0;
  PetscMPIInt       ctag[4] = {0, 0, 0, 0}; /* cma signals: ready, done where the passive side writes; ready, done where it reads */
  unsigned long long token = 0; /* cma set-up: a value the peers read from this process to prove they can */
  bool              inflight = false;
  bool              fusefill = true;  /* -dd_exchange_fuse_fill: a fill fused with a received face's unpack where their geometries match */
  const Runs       *pendfill = nullptr; /* the fill Begin left for End's fused unpack, and its value */
  PetscReal         pendvalue = 0;
};
/*
  The model's bookkeeping (issue 16): every live Exchange is registered, with the object whose
  set-up built it (ExchangeOwnerPush() before a primitive's or a layer's set-up, Pop after), and
  every such object with the object being set up around it (a layer's primitives, an fft's
  repartitions). ExchangeIsUnder() walks that chain.
*/
void ExchangeOwnerPush(const void *obj);
void ExchangeOwnerPop();
void ExchangeForget(const void *obj); /* an object being destroyed: drop it from the chain */
bool ExchangeIsUnder(const void *obj, const void *ancestor);
const std::vector<Exchange *> &ExchangeRegistry();
std::vector<const void *>      ExchangeObjectsUnder(const void *ancestor); /* the objects set up inside ancestor's set-up, at any depth */
struct ExchangeOwnerGuard { /* Push in the constructor, Pop in the destructor (also on an error return) */
  explicit ExchangeOwnerGuard(const void *obj) { ExchangeOwnerPush(obj); }
  ~ExchangeOwnerGuard() { ExchangeOwnerPop(); }
};
/* -dd_exchange_mpi_types <bool>: MPI derived datatypes instead of hand packing for long runs */
PetscBool DDExchangeUseTypes();
/* -dd_exchange_fuse_fill <bool>: a fill (the halo's padding, forward and adjoint) in one pass with a received face of the same rows (default true) */
PetscBool DDExchangeFuseFill();
/* -dd_exchange_cma <bool>: single-copy cross-memory attach between ranks of one node (default true where the system allows it) */
PetscBool DDExchangeUseCma();
} // namespace ddnn
