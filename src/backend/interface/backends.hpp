/* The backends compiled into this build, and the registry's internal helpers (C++ only). */
#pragma once
#include <ddnn/private/ddbackendimpl.h>

/* each registers one backend (DDBackendRegister_Private) */
PetscErrorCode DDBackendCreate_Ref(void);
PetscErrorCode DDBackendCreate_Blas(void);
#if DDNN_WITH_DNNL
PetscErrorCode DDBackendCreate_Dnnl(void);
#endif

namespace ddnn
{
extern const struct _DDBackendMemOps HostMemOps;
/* the memory operations of a memory type */
PetscErrorCode DDMemOps_Private(DDMemType, const struct _DDBackendMemOps **);
/* the backend registered under name (registering all first); NULL when it is not in this build */
DDBackend DDBackendLookup_Private(const char name[]);

/* times a kernel call as the backend's event of that kind */
struct KernelEvent {
  PetscLogEvent ev;
  KernelEvent(DDBackend b, DDKernelKind k) : ev(b ? b->events[k] : 0)
  {
    if (ev) (void)PetscLogEventBegin(ev, 0, 0, 0, 0);
  }
  ~KernelEvent()
  {
    if (ev) (void)PetscLogEventEnd(ev, 0, 0, 0, 0);
  }
};
} // namespace ddnn
