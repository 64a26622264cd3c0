/* oneDNN glue: the CPU engine, and memory descriptors of windows of ddnn tensors (C++ only). */
#pragma once
#include <backend/kernels.hpp>
#if DDNN_WITH_DNNL
  #include <oneapi/dnnl/dnnl.hpp>

namespace ddnn
{
dnnl::engine &CpuEngine();
dnnl::stream &CpuStream();

/*
  Descriptor of the box of tensor t starting at storage coordinates origin[] with sizes
  n[] = (N, C, spatial...) over the dimensions lead, lead+1, ..., whose handle is the
  returned pointer. Strided formats give a strided descriptor; the blocked format gives a
  sub-memory of the whole (halo-padded) storage, so halos need no copies.
*/
dnnl::memory::desc WindowDesc(DDTensor t, PetscInt lead, PetscInt D, const PetscInt origin[], const PetscInt n[], void **handle);

/* the ddnn format of a (dense) oneDNN descriptor; false if ddnn has no such format */
bool FormatOfDesc(const dnnl::memory::desc &md, PetscInt D, DDTensorFormat *fmt, PetscInt *bs);

/* plain descriptor of weights (O, I, k...) and of a vector */
dnnl::memory::desc PlainWeightsDesc(PetscInt O, PetscInt I, PetscInt D, const PetscInt k[3]);

/* a oneDNN error as a PETSc error */
  #define DDDnnlCall(...) \
    do { \
      try { \
        __VA_ARGS__; \
      } catch (const dnnl::error &_e) { \
        SETERRQ(PETSC_COMM_SELF, PETSC_ERR_LIB, "oneDNN: %s (status %d)", _e.what(), (int)_e.status); \
      } \
    } while (0)
} // namespace ddnn
#endif
