/*
  The shared host arena (see shmarena.hpp). One memory file per process, mapped once over a
  reserved range (MAP_NORESERVE: address space, no memory) and grown with ftruncate() as blocks
  are handed out, so that a partner maps it once and every later block is already in its view.
  Blocks: best fit over the free ranges, 64-byte aligned (4 KiB from 64 KiB up), coalesced when
  freed; each block's pages are allocated when it is handed out (fallocate(): a machine out of
  memory is an allocation error, not a SIGBUS later), freed blocks of 2 MiB and more give theirs
  back (fallocate(PUNCH_HOLE)), and every block is handed out zeroed, as PetscCalloc's are. Where
  the arena cannot be made (no memfd_create, -dd_exchange_direct 0) or is full, memory comes from
  PetscCalloc as before.

  The arena is on by default in a run of more than one rank (unless the MPI launcher says this rank
  is alone on its node), and it must not make a program fail where private memory would not, nor
  the other way round:
  - under an address-space limit (RLIMIT_AS, `ulimit -v`) there is no arena: its reserve would count
    against the limit; a limit set after the arena was made refuses every block that, counted as new
    address space with the arena's live blocks, would exceed it;
  - a block larger than the memory the system has available (MemAvailable and free swap) is refused
    before fallocate() could call the out-of-memory killer: PetscCalloc then fails or succeeds as it
    would have without the arena;
  - the mappings are not inherited by a forked child (MADV_DONTFORK): a child that touched them
    would otherwise share its parent's tensors instead of copying them; fork() then exec() is
    unaffected;
  - transparent huge pages are asked for (MADV_HUGEPAGE), which the system grants to shared memory
    where /sys/kernel/mm/transparent_hugepage/shmem_enabled is advise, always or within_size.

  The private arena (-dd_host_hugepages): where the shared arena is not used (one rank, or
  -dd_exchange_direct 0), host tensors are carved the same way from one private anonymous mapping
  (MAP_NORESERVE, 2 MiB aligned) with transparent huge pages asked for (MADV_HUGEPAGE; the system
  grants them to private memory where /sys/kernel/mm/transparent_hugepage/enabled is madvise or
  always, which is also the option's default). A network's tensors, a few hundred KiB each from
  malloc, each lay on their own 4 KiB pages: a layer whose tensors had left the caches paid a
  translation miss, and on a virtual machine a nested page walk, per 4 KiB page. On 2 MiB pages the
  main job's U-Net trains a step 6-7 % faster on 1 rank (medians of interleaved runs: float32
  9.82 against 10.59 ms, float64 28.8 against 30.8), and a ReLU's backward on tensors out of every
  cache 1.3-1.5x faster. Private memory keeps the semantics of malloc's: its pages
  are allocated at the first touch (no fallocate), a forked child inherits them copy-on-write (no
  MADV_DONTFORK), freed blocks of 64 MiB and more give their pages back (MADV_DONTNEED), and there
  is no arena under an address-space limit.
*/
#include <sys/shmarena.hpp>
#include <algorithm>
#include <map>
#include <tuple>
#include <mutex>
#include <new>
#include <cstring>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <unistd.h>
#if defined(__linux__)
  #include <sys/mman.h>
  #include <sys/stat.h>
  #include <sys/resource.h>
  #include <sys/sysinfo.h>
  #include <fcntl.h>
  #if defined(MFD_CLOEXEC)
    #define DD_HAVE_SHMARENA 1
  #endif
#endif

/* valgrind's memcheck told about the arena's blocks as about malloc's (leaks, use after free, double
   free): the client requests cost a few instructions outside valgrind */
#if defined(__has_include)
  #if __has_include(<valgrind/memcheck.h>)
    #include <valgrind/memcheck.h>
    #define DD_VG_ALLOC(p, n)     VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 1)
    #define DD_VG_FREE(p)         VALGRIND_FREELIKE_BLOCK(p, 0)
    #define DD_VG_UNDEFINED(p, n) VALGRIND_MAKE_MEM_UNDEFINED(p, n)
    #define DD_VG_NOACCESS(p, n)  VALGRIND_MAKE_MEM_NOACCESS(p, n)
  #endif
#endif
#if !defined(DD_VG_ALLOC)
  #define DD_VG_ALLOC(p, n)     ((void)0)
  #define DD_VG_FREE(p)         ((void)0)
  #define DD_VG_UNDEFINED(p, n) ((void)0)
  #define DD_VG_NOACCESS(p, n)  ((void)0)
#endif

namespace ddnn
{
namespace
{
struct Arena {
  explicit Arena(bool s) : shared(s) { }
  const bool               shared; /* the shared arena (a memory file), else the private one (anonymous memory) */
  int                      state = 0; /* 0: not made yet, 1: made, -1: this system cannot */
  int                      fd    = -1;
  char                    *base  = nullptr;
  size_t                   reserve = 0, filesize = 0, top = 0; /* top: the end of the highest live or free range */
  size_t                   dirty = 0;                           /* from here up the file was never handed out: it reads as zeros */
  size_t                   live = 0;                            /* bytes of the live blocks */
  std::map<size_t, size_t> freed;                            /* offset -> length of the free ranges below top */
  std::map<size_t, size_t> used;                             /* offset -> length of the live blocks */
  std::map<std::tuple<long, long, unsigned long long>, std::pair<char *, size_t>> peers; /* (pid, fd, base) -> its arena mapped here, and the mapping's length */
  char                    *map = nullptr;                      /* the private arena's mapping (base: its first 2 MiB boundary) */
  size_t                   maplen = 0;
  std::mutex               mu;
};
Arena &A()
{
  static Arena a(true);
  return a;
}
/* the private arena (-dd_host_hugepages) */
Arena &H()
{
  static Arena a(false);
  return a;
}
constexpr size_t kHuge = (size_t)2 << 20; /* a transparent huge page */

constexpr size_t kGrow = (size_t)64 << 20; /* the file's size grows in steps of 64 MiB (sparse: pages only where blocks are) */

int forced = -1; /* ShmArenaForce() */

/* the launcher's count of this job's ranks on this node, where it gives one (Open MPI, MPICH's
   Hydra, PMI-based launchers, Slurm's srun); 0 where none is set */
long LocalRanksFromLauncher()
{
  for (const char *v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    const char *e = getenv(v);
    char       *end;
    long        n = e ? strtol(e, &end, 10) : 0;
    if (e && end != e && n > 0) return n;
  }
  return 0;
}

/* the default of -dd_exchange_direct: on where PETSC_COMM_WORLD has more than one rank, unless the
   launcher says that this rank is alone on its node (decided once: it must not change between the
   allocations of one run) */
bool DefaultOn()
{
  static int on = -1;
  if (on < 0) {
    PetscMPIInt size = 1;
    PetscBool   init = PETSC_FALSE;
    if (PetscInitialized(&init) || !init || MPI_Comm_size(PETSC_COMM_WORLD, &size)) return false; /* not decided yet */
    on = size > 1 && LocalRanksFromLauncher() != 1 ? 1 : 0;
  }
  return on == 1;
}

/* -dd_exchange_direct, read at every allocation (a tensor allocated while it is set lives in the arena) */
bool Wanted()
{
  if (forced >= 0) return forced == 1;
  PetscBool on = PETSC_FALSE, set = PETSC_FALSE;
  if (PetscOptionsGetBool(NULL, NULL, "-dd_exchange_direct", &on, &set)) return false;
  return set ? on == PETSC_TRUE : DefaultOn();
}

/* whether the system grants transparent huge pages to private memory that asks (enabled: [always] or [madvise]) */
bool HugePagesOffered()
{
  static int offered = -1;
  if (offered < 0) {
    offered = 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    char  line[256] = "";
    FILE *f         = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
      if (fgets(line, sizeof(line), f)) offered = strstr(line, "[always]") || strstr(line, "[madvise]") ? 1 : 0;
      fclose(f);
    }
#endif
  }
  return offered == 1;
}

/* -dd_host_hugepages, read at every allocation the shared arena does not take (default: where the system offers them) */
bool HugeWanted()
{
  PetscBool on = PETSC_FALSE, set = PETSC_FALSE;
  if (PetscOptionsGetBool(NULL, NULL, "-dd_host_hugepages", &on, &set)) return false;
  return set ? on == PETSC_TRUE : HugePagesOffered();
}

/* a mapping of an arena (this process's or a partner's): not inherited by a forked child, huge pages
   where the system gives them to shared memory (both advisory: failures are ignored) */
void Advise(void *b, size_t n)
{
#if defined(DD_HAVE_SHMARENA)
  #if defined(MADV_DONTFORK)
  (void)madvise(b, n, MADV_DONTFORK);
  #endif
  #if defined(MADV_HUGEPAGE)
  (void)madvise(b, n, MADV_HUGEPAGE);
  #endif
#else
  (void)b, (void)n;
#endif
}

/* whether n more bytes of the arena are what private memory could have: within the address-space
   limit, counting the arena's live blocks and the request as if they were mapped anew (an arena is
   made only where no limit is set: this is a limit set since, and the count errs on the safe side)
   and, for a large request, within the memory the system has available */
bool Affordable(const Arena &a, size_t n)
{
#if defined(DD_HAVE_SHMARENA)
  struct rlimit rl;
  if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY) {
    unsigned long long vm = 0;
    FILE              *f  = fopen("/proc/self/statm", "r");
    if (!f) return false;
    const bool ok = fscanf(f, "%llu", &vm) == 1;
    fclose(f);
    if (!ok || vm * (unsigned long long)sysconf(_SC_PAGESIZE) + a.live + n > (unsigned long long)rl.rlim_cur) return false;
  }
  struct sysinfo si;
  if (n >= ((size_t)1 << 20) && !sysinfo(&si)) {
    const unsigned long long u = si.mem_unit ? si.mem_unit : 1;
    if (n <= (si.freeram + si.freeswap) * u) return true; /* plainly free: no need to read /proc/meminfo */
    unsigned long long avail = 0, swapfree = 0, kb;
    char               line[256];
    FILE              *f = fopen("/proc/meminfo", "r");
    if (!f) return true; /* nothing to go by: as private memory */
    while (fgets(line, sizeof(line), f)) {
      if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = kb << 10;
      else if (sscanf(line, "SwapFree: %llu kB", &kb) == 1) swapfree = kb << 10;
    }
    fclose(f);
    if (avail && n > avail + swapfree) return false;
  }
#else
  (void)a, (void)n;
#endif
  return true;
}

/* makes the arena at its first use (state 1), or remembers that this system cannot (state -1) */
void Make(Arena &a)
{
  if (a.state) return;
  a.state = -1;
#if defined(DD_HAVE_SHMARENA)
  struct rlimit rl;
  /* an address-space limit (ulimit -v) would count the whole reserve: private memory then, as always */
  if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur != RLIM_INFINITY) return;
  long   pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  size_t phys  = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : ((size_t)16 << 30);
  /* as much address space as the machine has memory: one process's tensors cannot exceed it, and
     a partner maps it whole (a node's ranks together reserve ranks x memory of its 128 TiB) */
  a.reserve = ((phys + kGrow - 1) / kGrow) * kGrow;
  if (!a.shared) { /* private: anonymous memory from a 2 MiB boundary, huge pages asked for */
    void *m = mmap(NULL, a.reserve + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return;
    a.map    = (char *)m;
    a.maplen = a.reserve + kHuge;
    a.base   = (char *)(((uintptr_t)m + kHuge - 1) / kHuge * kHuge);
    (void)madvise(a.base, a.reserve, MADV_HUGEPAGE);
    DD_VG_NOACCESS(a.base, a.reserve);
    a.top   = 64; /* as the shared arena's: no block at the base */
    a.state = 1;
    return;
  }
  int fd    = memfd_create("ddnn-tensors", MFD_CLOEXEC);
  if (fd < 0) return;
  void *b = mmap(NULL, a.reserve, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (b == MAP_FAILED) {
    close(fd);
    return;
  }
  Advise(b, a.reserve);
  DD_VG_NOACCESS(b, a.reserve); /* memcheck: only the blocks handed out are addressable (and its leak scan skips the rest) */
  a.fd    = fd;
  a.base  = (char *)b;
  a.top   = 64; /* no block at the base: the arena's own pointer would hide a leak of it from valgrind */
  a.state = 1;
#endif
}

size_t AlignFor(size_t n) { return n >= ((size_t)64 << 10) ? 4096 : 64; }

/* The bookkeeping must stay whole when a C++ allocation fails (std::bad_alloc is an out-of-memory error
   of the entry point that catches it, src/sys/ddcxx.hpp): the map nodes an allocation may need are
   made before anything changes (Spare(), which may throw), and the changes only move nodes (Put():
   no allocation, nothing throws). A freed block's own node serves its free range. */
using Ranges = std::map<size_t, size_t>;
Ranges Spare(int k)
{
  Ranges s;
  for (int i = 0; i < k; i++) s.emplace((size_t)i, 0);
  return s;
}
void Put(Ranges &m, Ranges &spare, size_t key, size_t len)
{
  auto nh     = spare.extract(spare.begin());
  nh.key()    = key;
  nh.mapped() = len;
  m.insert(std::move(nh));
}

/* the pages of [off, off + n) allocated now (a machine out of memory is an allocation error here, not
   a SIGBUS at the first touch of a page the memory file cannot get) */
bool Commit(Arena &a, size_t off, size_t n)
{
#if defined(DD_HAVE_SHMARENA)
  if (!a.shared) return true; /* private memory: its pages come at the first touch, as malloc's */
  return fallocate(a.fd, 0, (off_t)off, (off_t)n) == 0;
#else
  (void)a, (void)off, (void)n;
  return true;
#endif
}

/* a block of n bytes (offset), or false where the arena is full or cannot grow */
bool Take(Arena &a, size_t n, size_t *off, Ranges &spare)
{
  const size_t al = AlignFor(n);
  auto         best = a.freed.end();
  size_t       bestwaste = (size_t)-1;
  for (auto it = a.freed.begin(); it != a.freed.end(); ++it) {
    size_t start = (it->first + al - 1) / al * al, pad = start - it->first;
    if (it->second < pad + n) continue;
    size_t waste = it->second - pad - n;
    if (waste < bestwaste) {
      best      = it;
      bestwaste = waste;
      if (!waste) break;
    }
  }
  if (!Affordable(a, n)) return false; /* private memory (PetscCalloc) then fails or succeeds as it would have */
  if (best != a.freed.end()) {
    size_t fo = best->first, fl = best->second, start = (fo + al - 1) / al * al;
    if (!Commit(a, start, n)) return false; /* no memory for it: the range stays free */
    spare.insert(a.freed.extract(best)); /* its node serves again */
    if (start > fo) Put(a.freed, spare, fo, start - fo);
    if (fo + fl > start + n) Put(a.freed, spare, start + n, fo + fl - start - n);
    DD_VG_UNDEFINED(a.base + start, n); /* a freed block's bytes are inaccessible to memcheck until handed out again */
    memset(a.base + start, 0, n);       /* a reused range: zeroed, as PetscCalloc's memory is */
    *off = start;
    return true;
  }
  size_t start = (a.top + al - 1) / al * al;
  if (start + n > a.reserve || start + n < start) return false;
  if (a.shared && start + n > a.filesize) {
    size_t want = (start + n + kGrow - 1) / kGrow * kGrow;
    if (want > a.reserve) want = a.reserve;
    if (ftruncate(a.fd, (off_t)want)) return false; /* new pages of the file read as zeros */
    a.filesize = want;
  }
  if (!Commit(a, start, n)) return false;
  if (start < a.dirty) { /* below the mark: written before */
    DD_VG_UNDEFINED(a.base + start, std::min(n, a.dirty - start));
    memset(a.base + start, 0, std::min(n, a.dirty - start));
  }
  a.dirty = std::max(a.dirty, start + n);
  if (start > a.top) Put(a.freed, spare, a.top, start - a.top);
  a.top = start + n;
  *off  = start;
  return true;
}

void Give(Arena &a, size_t off, size_t n, Ranges &spare)
{
#if defined(DD_HAVE_SHMARENA) && defined(FALLOC_FL_PUNCH_HOLE)
  /* a large block's pages go back to the system (the next block there is committed and zeroed again) */
  const size_t lo = (off + 4095) / 4096 * 4096, hi = (off + n) / 4096 * 4096;
  /* private: only from 64 MiB up (it reads as zeros again): a block allocated and freed every step
     (a network's temporaries) would otherwise fault its huge pages in again each time, the kernel
     zeroing 2 MiB per fault (the U-Net's step in float32 paid ~5 such faults, about 1 ms) */
  if (a.shared && n >= ((size_t)2 << 20) && hi > lo) (void)fallocate(a.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(hi - lo));
  if (!a.shared && n >= kGrow && hi > lo) (void)madvise(a.base + lo, hi - lo, MADV_DONTNEED);
#endif
  /* coalesce with the neighbours */
  auto next = a.freed.lower_bound(off);
  if (next != a.freed.end() && next->first == off + n) {
    n += next->second;
    next = a.freed.erase(next);
  }
  if (next != a.freed.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      n += prev->second;
      a.freed.erase(prev);
    }
  }
  if (off + n == a.top) a.top = off; /* the top range: lower the mark (what lies above it is handed out zeroed again) */
  else Put(a.freed, spare, off, n);
}
} // namespace

bool ShmArenaEnabled()
{
  Arena &a = A();
  if (!Wanted()) return false;
  std::lock_guard<std::mutex> g(a.mu);
  Make(a);
  return a.state > 0;
}

void ShmArenaForce(int mode)
{
  forced = mode < 0 ? -1 : (mode ? 1 : 0);
}

namespace
{
/* a zeroed block of n bytes from arena a (made at its first use), or false where it cannot */
bool TakeBlock(Arena &a, size_t n, void **p)
{
  std::lock_guard<std::mutex> g(a.mu);
  Make(a);
  size_t off;
  Ranges spare = Spare(3); /* at most two free ranges and the block (may throw std::bad_alloc: nothing changed yet) */
  if (a.state <= 0 || !Take(a, n ? n : 1, &off, spare)) return false;
  Put(a.used, spare, off, n ? n : 1);
  a.live += n ? n : 1;
  *p = a.base + off;
  DD_VG_ALLOC(*p, n ? n : 1);
  return true;
}

bool Owns(const Arena &a, const void *p, size_t n)
{
  if (a.state <= 0 || !p) return false;
  const char *c = (const char *)p;
  return c >= a.base && c + n <= a.base + a.reserve;
}
} // namespace

PetscErrorCode ShmArenaMalloc(size_t n, void **p)
{
  PetscFunctionBegin;
  *p = nullptr;
  const bool shared = Wanted();
  if (shared && TakeBlock(A(), n, p)) PetscFunctionReturn(PETSC_SUCCESS);
  if (!shared && HugeWanted() && TakeBlock(H(), n, p)) PetscFunctionReturn(PETSC_SUCCESS); /* the private arena: where the shared one is not used */
  PetscCall(PetscCalloc1(n + 1, (char **)p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

bool ShmArenaOwns(const void *p, size_t n)
{
  return Owns(A(), p, n);
}

bool HostArenaOwns(const void *p, size_t n)
{
  return Owns(H(), p, n);
}

bool HostHugePagesOffered()
{
  return HugePagesOffered();
}

PetscErrorCode ShmArenaFree(void *p)
{
  PetscFunctionBegin;
  if (!p) PetscFunctionReturn(PETSC_SUCCESS);
  Arena &a = Owns(H(), p, 1) ? H() : A();
  if (Owns(a, p, 1)) {
    std::lock_guard<std::mutex> g(a.mu);
    size_t                      off = (size_t)((char *)p - a.base);
    auto                        it  = a.used.find(off);
    PetscCheck(it != a.used.end(), PETSC_COMM_SELF, PETSC_ERR_PLIB, "ShmArenaFree(): %p is not a block of the %s arena (freed twice?)", p, a.shared ? "shared" : "private");
    size_t n = it->second;
    Ranges spare;
    spare.insert(a.used.extract(it)); /* the block's node serves its free range: no allocation here */
    a.live -= n;
    DD_VG_FREE(p);
    Give(a, off, n, spare);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(PetscFree(p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

ShmArenaInfo ShmArenaSelf()
{
  Arena &a = A();
  if (!ShmArenaEnabled()) return {(long)getpid(), -1L, 0ULL, 0ULL};
  return {(long)getpid(), a.state > 0 ? (long)a.fd : -1L, (unsigned long long)(size_t)a.base, (unsigned long long)a.reserve};
}

char *ShmArenaMapPeer(const ShmArenaInfo &peer)
{
  Arena                      &a = A();
  std::lock_guard<std::mutex> g(a.mu);
  if (peer.fd < 0 || !peer.reserve) return nullptr;
  const auto key = std::make_tuple(peer.pid, peer.fd, peer.base);
  auto       it  = a.peers.find(key);
  if (it != a.peers.end()) return it->second.first;
  char *m = nullptr;
#if defined(DD_HAVE_SHMARENA)
  char path[64];
  snprintf(path, sizeof(path), "/proc/%ld/fd/%ld", peer.pid, peer.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st;
    /* the file must be the peer's arena: a memory file (no directory entry), not whatever that
       descriptor number names now */
    if (!fstat(fd, &st) && st.st_nlink == 0) {
      void *b = mmap(NULL, (size_t)peer.reserve, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
      if (b != MAP_FAILED) {
        m = (char *)b;
        Advise(b, (size_t)peer.reserve);
      }
    }
    close(fd);
  }
#endif
  a.peers[key] = {m, m ? (size_t)peer.reserve : 0}; /* a failure is remembered too: the pair then copies by system call */
  return m;
}

void ShmArenaLive(size_t *blocks, size_t *bytes)
{
  *blocks = *bytes = 0;
  for (Arena *a : {&A(), &H()}) {
    std::lock_guard<std::mutex> g(a->mu);
    *blocks += a->used.size();
    for (auto &u : a->used) *bytes += u.second;
  }
}

#if defined(DD_HAVE_SHMARENA)
namespace
{
/* an arena in which nothing lives is unmapped (the shared one's file closed), and decided again at its next use; the caller holds its lock */
void Unmake(Arena &a)
{
  if (a.state <= 0 || !a.used.empty()) return;
  if (a.shared) {
    (void)munmap(a.base, a.reserve);
    (void)close(a.fd);
  } else (void)munmap(a.map, a.maplen);
  a.fd   = -1;
  a.base = a.map = nullptr;
  a.reserve = a.maplen = a.filesize = a.top = a.dirty = a.live = 0;
  a.freed.clear();
  a.state = 0;
}
} // namespace
#endif

PetscErrorCode ShmArenaFinalize()
{
  Arena &a = A();

  PetscFunctionBegin;
  std::lock_guard<std::mutex> g(a.mu);
#if defined(DD_HAVE_SHMARENA)
  for (auto &pm : a.peers)
    if (pm.second.first) (void)munmap(pm.second.first, pm.second.second);
  a.peers.clear();
  Unmake(a);
  Arena                      &h = H();
  std::lock_guard<std::mutex> gh(h.mu);
  Unmake(h); /* the private arena likewise */
#endif
  PetscFunctionReturn(PETSC_SUCCESS);
}

void ShmBuffer::resize(size_t n)
{
  release();
  if (!n) return;
  void *p = nullptr;
  if (ShmArenaMalloc(n, &p) || !p) throw std::bad_alloc();
  p_ = (char *)p;
  n_ = n;
}

void ShmBuffer::release()
{
  if (p_) (void)ShmArenaFree(p_);
  p_ = nullptr;
  n_ = 0;
}
} // namespace ddnn
