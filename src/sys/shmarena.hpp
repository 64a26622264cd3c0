/*
  The shared host arena (issue 16, item 1): with -dd_exchange_direct (on by default where
  PETSC_COMM_WORLD has more than one rank, see shmarena.cxx), host tensor storage and the
  exchange engine's message buffers are carved from one memory file per process (memfd_create),
  mapped shared. A rank of the same node whose exchange partner allows it (the permissions of
  process_vm_readv: /proc/<pid>/fd/<fd> can be opened) maps the partner's arena once and then reads
  the partner's storage with plain loads: no system call, no page pinning, no second copy.
*/
#pragma once
#include <ddsys.h>
#include <cstddef>

namespace ddnn
{
/* -dd_exchange_direct <bool> is on (set, or by default) and this process has (or could now make) its arena */
bool ShmArenaEnabled();
/* overrides -dd_exchange_direct: 1 on, 0 off, -1 the option again (DDModelCalibrate() times the halo both ways) */
void ShmArenaForce(int mode);
/* zeroed host memory: from the shared arena while -dd_exchange_direct is on and it has room, else from the private
   arena while -dd_host_hugepages is on (by default where the system offers huge pages), else from PetscCalloc; freed by ShmArenaFree()
   (throws std::bad_alloc, with the arena unchanged, where its own bookkeeping cannot allocate: the
   entry point that catches it reports out of memory, as for any C++ allocation) */
PetscErrorCode ShmArenaMalloc(size_t n, void **p);
PetscErrorCode ShmArenaFree(void *p);
/* whether p (and the n bytes from it) lie in this process's arena */
bool ShmArenaOwns(const void *p, size_t n = 1);
/* whether p (and the n bytes from it) lie in this process's private arena (-dd_host_hugepages: host
   tensors on transparent huge pages where the shared arena is not used) */
bool HostArenaOwns(const void *p, size_t n = 1);
/* whether the system grants transparent huge pages to private memory that asks (the default of -dd_host_hugepages) */
bool HostHugePagesOffered();
/* this process's arena: file descriptor, base address and reserved size (fd < 0: none) */
struct ShmArenaInfo {
  long               pid;
  long               fd;
  unsigned long long base, reserve;
};
ShmArenaInfo ShmArenaSelf();
/* a peer's arena mapped into this process (cached per process id; nullptr where it cannot be:
   the peer has none, or the system forbids opening its memory file) */
char *ShmArenaMapPeer(const ShmArenaInfo &peer);
/* live blocks (leak report at finalize) */
void ShmArenaLive(size_t *blocks, size_t *bytes);
/* unmaps the peers' arenas and, if no block is live, this process's (DDFinalizePackage()) */
PetscErrorCode ShmArenaFinalize();

/* a byte buffer in the arena where it is enabled (else ordinary memory): the exchange engine's
   packed messages, which a direct partner reads in place */
class ShmBuffer
{
public:
  ShmBuffer() = default;
  ShmBuffer(const ShmBuffer &) = delete;
  ShmBuffer &operator=(const ShmBuffer &) = delete;
  ShmBuffer(ShmBuffer &&o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  ShmBuffer &operator=(ShmBuffer &&o) noexcept
  {
    if (this != &o) {
      release();
      p_ = o.p_, n_ = o.n_;
      o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
  }
  ~ShmBuffer() { release(); }
  char       *data() { return p_; }
  const char *data() const { return p_; }
  size_t      size() const { return n_; }
  bool        empty() const { return n_ == 0; }
  void        resize(size_t n); /* contents are not kept; throws std::bad_alloc where memory cannot be had */

private:
  void  release();
  char *p_ = nullptr;
  size_t n_ = 0;
};
} // namespace ddnn
