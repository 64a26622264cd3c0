#include <primitive/staging.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <tensor/layout.hpp>

namespace ddnn
{
PetscErrorCode StageBuffer::Allocate(DDMemType m, size_t n)
{
  const struct _DDBackendMemOps *mem;

  PetscFunctionBegin;
  PetscCall(Free());
  mt = m;
  PetscCall(DDMemOps_Private(mt, &mem));
  PetscCall(mem->malloc(n, &dev));
  PetscCall(mem->hostmalloc(n, &host));
  bytes = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode StageBuffer::Free()
{
  const struct _DDBackendMemOps *mem;

  PetscFunctionBegin;
  if (!dev && !host) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDMemOps_Private(mt, &mem));
  PetscCall(mem->free(dev));
  PetscCall(mem->hostfree(host));
  dev = host = nullptr;
  bytes      = 0;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* mode 0: host = the bulk of a in C order (through dev); 1: the bulk of a = host; 2: the bulk of a += host */
PetscErrorCode StageBulk(StageBuffer &s, DDDataType dt, const DDLayout &L, void *a, int mode)
{
  const struct _DDBackendMemOps *mem;
  const struct _DDBackendVecOps *vec;
  const DDLayout                 C = BulkCOrderLayout(L);
  size_t                         n;

  PetscFunctionBegin;
  if (!L.bulksize) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DDDataTypeGetSize(dt, &n));
  n *= (size_t)L.bulksize;
  PetscCheck(n <= s.bytes, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Staging buffer of %zu bytes for a bulk of %" PetscInt_FMT " entries", s.bytes, L.bulksize);
  PetscCall(DDMemOps_Private(s.mt, &mem));
  PetscCall(DDVecOps_Private(s.mt, &vec));
  if (mode == 0) {
    PetscCall(vec->copy(dt, &L, a, &C, s.dev));
    PetscCall(mem->copy(s.host, s.dev, n)); /* synchronous: MPI may read it on return */
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscCall(mem->copy(s.dev, s.host, n));
  if (mode == 2) PetscCall(vec->axpby(dt, 1.0, &C, s.dev, 1.0, &L, a));
  else PetscCall(vec->copy(dt, &C, s.dev, &L, a));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
