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
extern const struct _DDBackendVecOps HostVecOps;
/* the vector operations of a memory type */
PetscErrorCode DDVecOps_Private(DDMemType, const struct _DDBackendVecOps **);
/* the memory operations of a memory type */
PetscErrorCode DDMemOps_Private(DDMemType, const struct _DDBackendMemOps **);
/* the default backend (-dd_backend) */
PetscErrorCode DDBackendDefault_Private(DDBackend *);
/* the default backend where it computes in memory mt, else the first of that memory (/gpu/cuda for device memory) */
PetscErrorCode DDBackendForMemType_Private(DDMemType mt, DDBackend *);
/* the backend registered under name (registering all first); NULL when it is not in this build */
DDBackend DDBackendLookup_Private(const char name[]);

} // namespace ddnn
