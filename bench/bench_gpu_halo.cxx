/*
  bench_gpu_halo: the halo exchange of device tensors (issue 11, parts 3 and 7) against a raw copy of
  the same bytes, in one run, on ranks that share the device:

    mpiexec -n 2 ./bench_gpu_halo [-n 512] [-c 16] [-reps 50]

  Cases: a 1 x C x n x n tensor with a 3-wide kernel (padding 1) split along H (contiguous faces) or
  W (strided faces, one entry per row), plain storage, float32 and float64.

  - ddnn: DDPrimitiveApply() of the halo primitive on the device tensor (faces packed on the device,
    staged through page-locked host buffers, unpacked on the device, padding filled by a kernel),
    then a one-entry device-to-host copy so that the time includes the last kernel;
  - raw: the same bytes moved the way the staging moves them, with nothing else: per neighbour one
    device-to-host copy of a contiguous device buffer into a page-locked host buffer, MPI_Sendrecv,
    one host-to-device copy (no packing, no padding);
  - host: the same halo exchange of the host tensor (for scale);
  - one kernel + copy back: DDTensorScale() of a device tensor of one entry per rank and the copy of
    that entry to the host: the floor of any work on the device from these ranks (ranks sharing a
    device without CUDA's Multi-Process Service take turns on it: gpu-run.sh's DDNN_GPU_MPS=1 runs
    the 2-rank case again under MPS).

  Medians of -reps, each call between barriers, max over ranks. Without a CUDA build or a device it
  says so and exits 0.
*/
#include <ddnn.h>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#if DDNN_WITH_CUDA
  #include <backend/cuda/backend_cuda.hpp>
#endif
#include <algorithm>
#include <functional>
#include <vector>

namespace
{
double Median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/* the median over reps of f(), each between barriers, max over ranks */
PetscErrorCode Time(MPI_Comm comm, int reps, const std::function<PetscErrorCode()> &f, double *t)
{
  std::vector<double> v;

  PetscFunctionBegin;
  for (int r = 0; r < reps + 3; r++) {
    PetscCallMPI(MPI_Barrier(comm));
    double t0 = MPI_Wtime();
    PetscCall(f());
    if (r >= 3) v.push_back(MPI_Wtime() - t0);
  }
  double m = Median(v);
  PetscCallMPI(MPI_Allreduce(&m, t, 1, MPI_DOUBLE, MPI_MAX, comm));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode Case(DDBackend g, DDDataType dt, PetscInt C, PetscInt n, PetscInt dim, int reps)
{
  MPI_Comm    comm = PETSC_COMM_WORLD;
  PetscMPIInt size, rank;
  PetscInt    pshape[4] = {1, 1, 1, 1}, shape[4] = {1, C, n, n}, lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
  DDPartition part;
  DDTensor    x[2];
  DDPrimitive H[2];
  double      t[2], traw;
  size_t      es;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(DDDataTypeGetSize(dt, &es));
  pshape[dim] = size;
  lo[dim] = hi[dim] = 1;
  PetscCall(DDPartitionCreateCartesian(comm, 4, pshape, PETSC_DECIDE, NULL, &part));
  for (int m = 0; m < 2; m++) { /* 0: device, 1: host */
    PetscCall(DDTensorCreate(comm, &x[m]));
    PetscCall(DDTensorSetPartition(x[m], part));
    PetscCall(DDTensorSetShape(x[m], 4, shape));
    PetscCall(DDTensorSetDataType(x[m], dt));
    PetscCall(DDTensorSetHalo(x[m], lo, hi));
    PetscCall(DDTensorSetMemType(x[m], m == 0 ? DD_MEMTYPE_DEVICE : DD_MEMTYPE_HOST));
    PetscCall(DDTensorSetUp(x[m]));
    PetscCall(DDTensorSetRandomGlobal(x[m], 1, -1, 1));
    PetscCall(DDPrimitiveCreate(comm, &H[m]));
    PetscCall(DDPrimitiveSetType(H[m], DDPRIMITIVEHALO));
    PetscCall(DDPrimitiveHaloSetKernel(H[m], dim, 3, 1, 1, 1, PETSC_DECIDE));
    PetscCall(DDPrimitiveSetUp(H[m], x[m], NULL));
  }
  double probe;
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscCall(DDPrimitiveApply(H[0], x[0], NULL));
    return g->mem.copy(&probe, x[0]->array, es); /* waits for the last kernel */
  }, &t[0]));
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApply(H[1], x[1], NULL); }, &t[1]));
  /* the floor of any device work from these ranks: one kernel on one entry per rank and the copy back */
  double      tk;
  DDTensor    one;
  DDPartition p1;
  PetscInt    n1 = size;
  PetscCall(DDPartitionCreateCartesian(comm, 1, &n1, PETSC_DECIDE, NULL, &p1));
  PetscCall(DDTensorCreate(comm, &one));
  PetscCall(DDTensorSetPartition(one, p1));
  PetscCall(DDPartitionDestroy(&p1));
  PetscCall(DDTensorSetShape(one, 1, &n1));
  PetscCall(DDTensorSetDataType(one, dt));
  PetscCall(DDTensorSetMemType(one, DD_MEMTYPE_DEVICE));
  PetscCall(DDTensorSetUp(one));
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscCall(DDTensorScale(one, 1.0));
    return g->mem.copy(&probe, one->array, es);
  }, &tk));
  PetscCall(DDTensorDestroy(&one));
  /* raw: the faces' bytes, device -> page-locked host -> MPI -> page-locked host -> device */
  const size_t face = es * (size_t)(C * n);
  void        *dsend[2], *drecv[2], *hsend[2], *hrecv[2];
  for (int k = 0; k < 2; k++) {
    PetscCall(g->mem.malloc(face, &dsend[k]));
    PetscCall(g->mem.malloc(face, &drecv[k]));
    PetscCall(g->mem.hostmalloc(face, &hsend[k]));
    PetscCall(g->mem.hostmalloc(face, &hrecv[k]));
  }
  const int nb[2] = {rank > 0 ? rank - 1 : MPI_PROC_NULL, rank < size - 1 ? rank + 1 : MPI_PROC_NULL};
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscFunctionBegin;
    for (int k = 0; k < 2; k++)
      if (nb[k] != MPI_PROC_NULL) PetscCall(g->mem.copy(hsend[k], dsend[k], face));
    PetscCallMPI(MPI_Sendrecv(hsend[0], (int)face, MPI_BYTE, nb[0], 0, hrecv[1], (int)face, MPI_BYTE, nb[1], 0, comm, MPI_STATUS_IGNORE));
    PetscCallMPI(MPI_Sendrecv(hsend[1], (int)face, MPI_BYTE, nb[1], 1, hrecv[0], (int)face, MPI_BYTE, nb[0], 1, comm, MPI_STATUS_IGNORE));
    for (int k = 0; k < 2; k++)
      if (nb[k] != MPI_PROC_NULL) PetscCall(g->mem.copy(drecv[k], hrecv[k], face));
    PetscFunctionReturn(PETSC_SUCCESS);
  }, &traw));
  PetscCall(PetscPrintf(comm, "halo %s split, %s, 1x%" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT " on %d rank(s): device %8.1f us   raw staged copy %8.1f us   ratio %5.2f   (host tensor %8.1f us; one kernel + copy back %6.1f us)\n", dim == 2 ? "H" : "W", DDDataTypes[dt], C, n, n, size, 1e6 * t[0], 1e6 * traw, traw > 0 ? t[0] / traw : 0.0, 1e6 * t[1], 1e6 * tk));
  for (int k = 0; k < 2; k++) {
    PetscCall(g->mem.free(dsend[k]));
    PetscCall(g->mem.free(drecv[k]));
    PetscCall(g->mem.hostfree(hsend[k]));
    PetscCall(g->mem.hostfree(hrecv[k]));
  }
  for (int m = 0; m < 2; m++) {
    PetscCall(DDPrimitiveDestroy(&H[m]));
    PetscCall(DDTensorDestroy(&x[m]));
  }
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace

int main(int argc, char **argv)
{
  PetscInt C = 16, n = 512, reps = 50;

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-c", &C, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &n, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  int ndev = 0;
#if DDNN_WITH_CUDA
  PetscCall(DDBackendCudaGetDeviceCount_Private(&ndev));
#endif
  if (!ndev) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "bench_gpu_halo: %s; nothing measured\n", DDNN_WITH_CUDA ? "no CUDA device" : "ddnn built without DDNN_WITH_CUDA"));
    PetscCall(DDFinalize());
    return 0;
  }
  DDBackend g = ddnn::DDBackendLookup_Private("/gpu/cuda");
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
    for (PetscInt dim : {2, 3}) PetscCall(Case(g, dt, C, n, dim, (int)reps));
  PetscCall(DDFinalize());
  return 0;
}
