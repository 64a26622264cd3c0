/*
  Collectives of device tensors (issue 11 part 3): MPI here reads and writes host memory only, so a
  primitive that hands a tensor's bulk to an MPI collective (broadcast, sum-reduce, all-sum-reduce)
  lays the bulk out in C order in a device buffer (a kernel of the memory's backend), copies it to a
  page-locked host buffer, and back the same way. Host tensors do not use this (C++ only).
*/
#pragma once
#include <ddnn/private/ddimpl.h>

namespace ddnn
{
struct StageBuffer {
  DDMemType mt = DD_MEMTYPE_HOST;
  void     *dev = nullptr;  /* the bulk in C order, device memory */
  void     *host = nullptr; /* its page-locked host copy, what MPI reads and writes */
  size_t    bytes = 0;
  PetscErrorCode Allocate(DDMemType mt, size_t bytes);
  PetscErrorCode Free();
  ~StageBuffer() { (void)Free(); }
};

/* mode 0: host = the bulk of a (layout L, device memory) in C order, through dev; 1: the bulk of a = host; 2: a += host */
PetscErrorCode StageBulk(StageBuffer &s, DDDataType dt, const DDLayout &L, void *a, int mode);
inline PetscErrorCode StageBulkToHost(StageBuffer &s, DDDataType dt, const DDLayout &L, const void *a) { return StageBulk(s, dt, L, const_cast<void *>(a), 0); }
inline PetscErrorCode StageBulkFromHost(StageBuffer &s, DDDataType dt, const DDLayout &L, void *a, bool add = false) { return StageBulk(s, dt, L, a, add ? 2 : 1); }
} // namespace ddnn
