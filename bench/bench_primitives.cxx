/*
  bench_primitives: ddnn's primitives against the bare MPI call moving the same bytes, measured
  in the same run (issue: primitives' performance goals).

    mpiexec -n 2 ./bench_primitives [-n 512] [-c 16] [-reps 50] [-setup_only]
                                    [-halo_only -batch N] [-cases haloH,haloW,haloWcl,haloWbl,repart,coll,setup] [-breakdown]

  Reports, per primitive, the median time of ddnn and of the MPI baseline and their ratio:
  - halo exchange (k=3, pad 1) of a 1 x C x n x n float32 tensor split along H (faces are
    contiguous rows) and along W (faces are strided columns: packing included), against
    MPI_Sendrecv of the same bytes from contiguous buffers;
  - repartition H-split -> W-split against MPI_Alltoallv of the same data (already packed);
  - broadcast from rank 0 against MPI_Bcast, allsumreduce against MPI_Allreduce;
  - set-up (graph building) time of the halo and repartition primitives.
*/
#include <ddnn.h>
#include <vector>
#include <algorithm>
#include <functional>
#include <string>
#include <cstring>

static double Median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/* median over reps of the max-over-ranks time of f; prep (if given) runs before each call, untimed */
static PetscErrorCode Time(MPI_Comm comm, int reps, const std::function<PetscErrorCode()> &f, double *t, const std::function<void()> &prep = nullptr)
{
  std::vector<double> ts;

  PetscFunctionBeginUser;
  PetscCall(f()); /* warm-up */
  PetscCall(f());
  for (int r = 0; r < reps; r++) {
    if (prep) prep();
    PetscCallMPI(MPI_Barrier(comm));
    double t0 = MPI_Wtime();
    PetscCall(f());
    double dt = MPI_Wtime() - t0, mx;
    PetscCallMPI(MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, comm));
    ts.push_back(mx);
  }
  *t = Median(ts);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* -cases a,b,...: the cases to run (haloH, haloW, haloWcl, haloWbl, repart, coll, setup); all without it */
static bool Want(const char *cases, const char *name)
{
  if (!cases[0]) return true;
  std::string s = std::string(",") + cases + ",", n = std::string(",") + name + ",";
  return s.find(n) != std::string::npos;
}

static PetscErrorCode Report(const char *what, double tdd, double tmpi, double goal)
{
  PetscFunctionBeginUser;
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%-44s ddnn %9.1f us   MPI %9.1f us   ratio %5.2f   (goal <= %.1f)\n", what, 1e6 * tdd, 1e6 * tmpi, tdd / tmpi, goal));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The face of a local N x C x Hs x Ws float32 storage (split dimension dim = 2 or 3 at index `at`)
  as an MPI subarray type, in the storage order of fmt: plain NCHW, channels-last NHWC, blocked
  N(C/16)HW16c. The second baseline moves the same faces with these types straight out of and
  into a storage-shaped array: what MPI alone does with the tensor's storage.
*/
static PetscErrorCode FaceType(DDTensorFormat fmt, PetscInt N, PetscInt C, PetscInt Hs, PetscInt Ws, PetscInt dim, PetscInt at, MPI_Datatype *t)
{
  int sizes[5], sub[5], st[5] = {0, 0, 0, 0, 0}, nd, k;

  PetscFunctionBeginUser;
  if (fmt == DD_FORMAT_CHANNELS_LAST) {
    int s[4] = {(int)N, (int)Hs, (int)Ws, (int)C};
    nd       = 4;
    std::copy(s, s + 4, sizes);
    k = dim == 2 ? 1 : 2;
  } else if (fmt == DD_FORMAT_BLOCKED) {
    int s[5] = {(int)N, (int)(C / 16), (int)Hs, (int)Ws, 16};
    nd       = 5;
    std::copy(s, s + 5, sizes);
    k = dim == 2 ? 2 : 3;
  } else {
    int s[4] = {(int)N, (int)C, (int)Hs, (int)Ws};
    nd       = 4;
    std::copy(s, s + 4, sizes);
    k = dim == 2 ? 2 : 3;
  }
  std::copy(sizes, sizes + nd, sub);
  sub[k] = 1;
  st[k]  = (int)at;
  PetscCallMPI(MPI_Type_create_subarray(nd, sizes, sub, st, MPI_ORDER_C, MPI_FLOAT, t));
  PetscCallMPI(MPI_Type_commit(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the storage offsets of the entries of a N x C x Hs x Ws storage in format fmt whose coordinate along dim (2 or 3) is at, sorted */
static std::vector<PetscInt> FaceOffsets(DDTensorFormat fmt, PetscInt N, PetscInt C, PetscInt Hs, PetscInt Ws, PetscInt dim, PetscInt at)
{
  std::vector<PetscInt> o;
  for (PetscInt n = 0; n < N; n++)
    for (PetscInt c = 0; c < C; c++)
      for (PetscInt h = dim == 2 ? at : 0; h < (dim == 2 ? at + 1 : Hs); h++)
        for (PetscInt w = dim == 3 ? at : 0; w < (dim == 3 ? at + 1 : Ws); w++) {
          if (fmt == DD_FORMAT_CHANNELS_LAST) o.push_back(((n * Hs + h) * Ws + w) * C + c);
          else if (fmt == DD_FORMAT_BLOCKED) o.push_back((((n * (C / 16) + c / 16) * Hs + h) * Ws + w) * 16 + c % 16);
          else o.push_back(((n * C + c) * Hs + h) * Ws + w);
        }
  std::sort(o.begin(), o.end());
  return o;
}

/* runs of consecutive offsets: (offset, length) pairs */
static std::vector<std::pair<PetscInt, PetscInt>> OffsetRuns(const std::vector<PetscInt> &o)
{
  std::vector<std::pair<PetscInt, PetscInt>> r;
  for (PetscInt v : o) {
    if (!r.empty() && r.back().first + r.back().second == v) r.back().second++;
    else r.push_back({v, 1});
  }
  return r;
}

/* halo exchange with a 3-wide kernel along dimension `dim` of a 1 x C x n x n tensor split there */
static PetscBool breakdown = PETSC_FALSE;

/* -breakdown: where the time of one application goes, per rank: the medians of Begin and End */
static PetscErrorCode Breakdown(MPI_Comm comm, int reps, DDPrimitive P, DDTensor x, DDTensor y)
{
  std::vector<double> tb, te;
  PetscMPIInt         rank;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  for (int r = 0; r < reps; r++) {
    PetscCallMPI(MPI_Barrier(comm));
    double t0 = MPI_Wtime();
    PetscCall(DDPrimitiveApplyBegin(P, x, y));
    double t1 = MPI_Wtime();
    PetscCall(DDPrimitiveApplyEnd(P, x, y));
    tb.push_back(t1 - t0);
    te.push_back(MPI_Wtime() - t1);
  }
  PetscCall(PetscSynchronizedPrintf(comm, "  [%d] Begin %.1f us, End %.1f us (medians)\n", rank, 1e6 * Median(tb), 1e6 * Median(te)));
  PetscCall(PetscSynchronizedFlush(comm, PETSC_STDOUT));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the primitive's time with x's whole storage written before each call (untimed), as a layer's output is */
static PetscErrorCode TimeOnFreshData(MPI_Comm comm, int reps, DDPrimitive P, DDTensor x, DDTensor y, double *t)
{
  float    v = 0;
  void    *a;
  PetscInt m;

  PetscFunctionBeginUser;
  PetscCall(DDTensorGetLocalStorageSize(x, &m));
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApply(P, x, y); }, t, [&]() {
    v += 1;
    if (DDTensorGetArray(x, &a)) return;
    std::fill((float *)a, (float *)a + m, v);
    (void)DDTensorRestoreArray(x, &a);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BenchHalo(PetscInt N, PetscInt C, PetscInt n, PetscInt dim, int reps, const char *label, DDTensorFormat fmt = DD_FORMAT_PLAIN)
{
  MPI_Comm    comm = PETSC_COMM_WORLD;
  PetscMPIInt size, rank;
  PetscInt    pshape[4] = {1, 1, 1, 1}, shape[4] = {N, C, n, n};
  DDPartition part;
  DDTensor    x;
  DDPrimitive H;
  double      tdd, tmpi, tsetup;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  pshape[dim] = size;
  PetscCall(DDPartitionCreateCartesian(comm, 4, pshape, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, DD_FLOAT32, 4, shape, &x));
  PetscCall(DDTensorSetFormat(x, fmt));
  PetscCall(DDTensorSetBlockSize(x, 16));
  PetscInt lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
  lo[dim] = hi[dim] = 1;
  PetscCall(DDTensorSetHalo(x, lo, hi));
  PetscCall(DDTensorSetRandomGlobal(x, 1, -1, 1));
  PetscCall(DDPrimitiveCreate(comm, &H));
  PetscCall(DDPrimitiveSetType(H, DDPRIMITIVEHALO));
  PetscCall(DDPrimitiveHaloSetKernel(H, dim, 3, 1, 1, 1, PETSC_DECIDE));
  PetscCallMPI(MPI_Barrier(comm));
  double t0 = MPI_Wtime();
  PetscCall(DDPrimitiveSetUp(H, x, NULL));
  tsetup = MPI_Wtime() - t0;
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApply(H, x, NULL); }, &tdd));
  if (breakdown) PetscCall(Breakdown(comm, reps, H, x, NULL)); /* Begin: packing, signals; End: waits, copies, unpacking */
  /* baseline: the same bytes with MPI_Sendrecv to both neighbors, contiguous buffers */
  PetscInt          face = N * C * n; /* one row or one column of every channel */
  std::vector<float> sl(face, 1), sr(face, 1), rl(face), rr(face);
  int               left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscCallMPI(MPI_Sendrecv(sl.data(), (int)face, MPI_FLOAT, left, 0, rr.data(), (int)face, MPI_FLOAT, right, 0, comm, MPI_STATUS_IGNORE));
    PetscCallMPI(MPI_Sendrecv(sr.data(), (int)face, MPI_FLOAT, right, 1, rl.data(), (int)face, MPI_FLOAT, left, 1, comm, MPI_STATUS_IGNORE));
    return PETSC_SUCCESS;
  }, &tmpi));
  PetscCall(Report(label, tdd, tmpi, (dim == 2 || fmt != DD_FORMAT_PLAIN) ? 1.2 : 2.0));
  /* the same MPI_Sendrecv with data written just before each call (untimed), as every halo exchange
     sends: the contiguous baseline sends buffers no one writes, whose cache lines stay on the receiving
     core from one call to the next; fresh lines must cross from the writer's core first */
  {
    double tfresh;
    float  v = 0;
    PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
      PetscCallMPI(MPI_Sendrecv(sl.data(), (int)face, MPI_FLOAT, left, 0, rr.data(), (int)face, MPI_FLOAT, right, 0, comm, MPI_STATUS_IGNORE));
      PetscCallMPI(MPI_Sendrecv(sr.data(), (int)face, MPI_FLOAT, right, 1, rl.data(), (int)face, MPI_FLOAT, left, 1, comm, MPI_STATUS_IGNORE));
      return PETSC_SUCCESS;
    }, &tfresh, [&]() {
      v += 1;
      std::fill(sl.begin(), sl.end(), v);
      std::fill(sr.begin(), sr.end(), v);
    }));
    PetscCall(PetscPrintf(comm, "%-44s ddnn %9.1f us   MPI %9.1f us   ratio %5.2f   (send buffers written before each call, untimed)\n", "  same, fresh data", 1e6 * tdd, 1e6 * tfresh, tdd / tfresh));
    /* and ddnn on fresh data too: the tensor's storage written before each call (untimed), as the
       layer before an exchange writes it (its faces' lines then sit modified in the writer's cache) */
    double tddfresh;
    PetscCall(TimeOnFreshData(comm, reps, H, x, NULL, &tddfresh));
    PetscCall(PetscPrintf(comm, "%-44s ddnn %9.1f us   MPI %9.1f us   ratio %5.2f   (both on data written before each call, untimed)\n", "  fresh data at both", 1e6 * tddfresh, 1e6 * tfresh, tddfresh / tfresh));
  }
  /* the floor of touching the faces in the storage: this rank's gather of its sent faces into a
     buffer, scatter of the received ones and fill of its padding, in the tightest loops (one
     constant-stride loop per face of single entries, the received face and the padding in one pass
     where they have the same rows, memcpy/fill per merged run otherwise), no communication (both
     ranks at once, max over ranks) */
  {
    PetscInt           nl = n / size, Hs = dim == 2 ? nl + 2 : n, Ws = dim == 3 ? nl + 2 : n;
    std::vector<float> st((size_t)(N * C * Hs * Ws), 1), buf((size_t)(2 * N * C * n) + 1);
    std::vector<std::vector<std::pair<PetscInt, PetscInt>>> snd, rcv, pad;
    (rank > 0 ? snd : pad).push_back(OffsetRuns(FaceOffsets(fmt, N, C, Hs, Ws, dim, rank > 0 ? 1 : 0)));
    if (rank > 0) rcv.push_back(OffsetRuns(FaceOffsets(fmt, N, C, Hs, Ws, dim, 0)));
    (rank < size - 1 ? snd : pad).push_back(OffsetRuns(FaceOffsets(fmt, N, C, Hs, Ws, dim, rank < size - 1 ? nl : nl + 1)));
    if (rank < size - 1) rcv.push_back(OffsetRuns(FaceOffsets(fmt, N, C, Hs, Ws, dim, nl + 1)));
    /* a face of single entries at a constant stride: its stride, else 0 */
    auto single = [](const std::vector<std::pair<PetscInt, PetscInt>> &f) -> PetscInt {
      if (f.size() < 2 || f[0].second != 1) return 0;
      PetscInt s = f[1].first - f[0].first;
      for (size_t i = 1; i < f.size(); i++)
        if (f[i].second != 1 || f[i].first - f[i - 1].first != s) return 0;
      return s;
    };
    const bool            fused = rcv.size() == 1 && pad.size() == 1 && single(rcv[0]) && single(rcv[0]) == single(pad[0]) && rcv[0].size() == pad[0].size();
    const PetscInt        rs    = fused ? single(rcv[0]) : 0, fo = fused ? pad[0][0].first - rcv[0][0].first : 0;
    std::vector<PetscInt> ss;
    for (auto &f : snd) ss.push_back(single(f));
    double tfloor;
    PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
      float *b = buf.data();
      for (size_t k = 0; k < snd.size(); k++) {
        auto &f = snd[k];
        if (PetscInt s = ss[k]) {
          const float *p = &st[f[0].first];
          for (size_t i = 0; i < f.size(); i++, p += s) *b++ = *p;
        } else
          for (auto &r : f) {
            std::memcpy(b, &st[r.first], sizeof(float) * r.second);
            b += r.second;
          }
      }
      b = buf.data();
      if (fused) {
        float *d = &st[rcv[0][0].first];
        for (size_t i = 0; i < rcv[0].size(); i++, d += rs) {
          d[0]  = b[i];
          d[fo] = 0;
        }
        return PETSC_SUCCESS;
      }
      for (auto &f : rcv)
        for (auto &r : f) {
          std::memcpy(&st[r.first], b, sizeof(float) * r.second);
          b += r.second;
        }
      for (auto &f : pad)
        for (auto &r : f) std::fill(&st[r.first], &st[r.first] + r.second, 0.f);
      return PETSC_SUCCESS;
    }, &tfloor));
    PetscCall(PetscPrintf(comm, "%-44s bare loops %9.1f us = %.2f x MPI   (gather + scatter + padding of the faces, no communication)\n", "  floor: touching the faces", 1e6 * tfloor, tfloor / tmpi));
  }
  /* second baseline: MPI moving the same faces out of and into the storage (subarray types) */
  if (fmt != DD_FORMAT_BLOCKED || C % 16 == 0) {
    PetscInt           nl = n / size, Hs = dim == 2 ? nl + 2 : n, Ws = dim == 3 ? nl + 2 : n;
    std::vector<float> st((size_t)(N * C * Hs * Ws), 1);
    MPI_Datatype       f[4]; /* send left (1), send right (nl), recv left (0), recv right (nl + 1) */
    PetscInt           at[4] = {1, nl, 0, nl + 1};
    double             tst;
    for (int i = 0; i < 4; i++) PetscCall(FaceType(fmt, N, C, Hs, Ws, dim, at[i], &f[i]));
    PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
      MPI_Request q[4];
      PetscCallMPI(MPI_Irecv(st.data(), 1, f[2], left, 0, comm, &q[0]));
      PetscCallMPI(MPI_Irecv(st.data(), 1, f[3], right, 1, comm, &q[1]));
      PetscCallMPI(MPI_Isend(st.data(), 1, f[0], left, 1, comm, &q[2]));
      PetscCallMPI(MPI_Isend(st.data(), 1, f[1], right, 0, comm, &q[3]));
      PetscCallMPI(MPI_Waitall(4, q, MPI_STATUSES_IGNORE));
      return PETSC_SUCCESS;
    }, &tst));
    PetscCall(PetscPrintf(comm, "%-44s ddnn %9.1f us   MPI %9.1f us   ratio %5.2f   (MPI datatypes on a storage-shaped array)\n", "  same faces, in and out of the storage", 1e6 * tdd, 1e6 * tst, tdd / tst));
    for (int i = 0; i < 4; i++) PetscCallMPI(MPI_Type_free(&f[i]));
  }
  double adj;
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApplyAdjoint(H, x, NULL); }, &adj));
  PetscCall(PetscPrintf(comm, "%-44s ddnn %9.1f us   (adjoint: add into owners + clear)   set-up %.1f ms\n", "  adjoint of the same", 1e6 * adj, 1e3 * tsetup));
  PetscCall(DDPrimitiveDestroy(&H));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BenchRepartition(PetscInt C, PetscInt n, int reps)
{
  MPI_Comm    comm = PETSC_COMM_WORLD;
  PetscMPIInt size, rank;
  DDPartition Px, Py;
  DDTensor    x, y;
  DDPrimitive T;
  double      tdd, tmpi, tsetup;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscInt px[4] = {1, 1, size, 1}, py[4] = {1, 1, 1, size}, shape[4] = {1, C, n, n};
  PetscCall(DDPartitionCreateCartesian(comm, 4, px, PETSC_DECIDE, NULL, &Px));
  PetscCall(DDPartitionCreateCartesian(comm, 4, py, PETSC_DECIDE, NULL, &Py));
  PetscCall(DDTensorCreateFromPartition(Px, DD_FLOAT32, 4, shape, &x));
  PetscCall(DDTensorCreateFromPartition(Py, DD_FLOAT32, 4, shape, &y));
  PetscCall(DDTensorSetRandomGlobal(x, 1, -1, 1));
  PetscCall(DDPrimitiveCreate(comm, &T));
  PetscCall(DDPrimitiveSetType(T, DDPRIMITIVEREPARTITION));
  PetscCallMPI(MPI_Barrier(comm));
  double t0 = MPI_Wtime();
  PetscCall(DDPrimitiveSetUp(T, x, y));
  tsetup = MPI_Wtime() - t0;
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApply(T, x, y); }, &tdd));
  if (breakdown) PetscCall(Breakdown(comm, reps, T, x, y)); /* Begin: the rank's own part, signals; End: the transfer, waits */
  /* baseline: MPI_Alltoallv of the same counts, data already packed */
  PetscInt                 local;
  PetscCall(DDTensorGetLocalSize(x, &local));
  std::vector<int>   cnt(size), dsp(size);
  for (int r = 0; r < size; r++) {
    cnt[r] = (int)(local / size);
    dsp[r] = r * cnt[r];
  }
  std::vector<float> sb(local + 1, 1), rb(local + 1);
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscCallMPI(MPI_Alltoallv(sb.data(), cnt.data(), dsp.data(), MPI_FLOAT, rb.data(), cnt.data(), dsp.data(), MPI_FLOAT, comm));
    return PETSC_SUCCESS;
  }, &tmpi));
  PetscCall(Report("repartition H-split -> W-split", tdd, tmpi, 1.3));
  { /* both on data written before each call (untimed): x's storage and MPI's send buffer */
    double tddf, tmpif;
    float  v = 0;
    PetscCall(TimeOnFreshData(comm, reps, T, x, y, &tddf));
    PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
      PetscCallMPI(MPI_Alltoallv(sb.data(), cnt.data(), dsp.data(), MPI_FLOAT, rb.data(), cnt.data(), dsp.data(), MPI_FLOAT, comm));
      return PETSC_SUCCESS;
    }, &tmpif, [&]() {
      v += 1;
      std::fill(sb.begin(), sb.end(), v);
    }));
    PetscCall(PetscPrintf(comm, "%-44s ddnn %9.1f us   MPI %9.1f us   ratio %5.2f   (both on data written before each call, untimed)\n", "  fresh data at both", 1e6 * tddf, 1e6 * tmpif, tddf / tmpif));
  }
  /* second baseline: MPI_Alltoallw with subarray types straight between storage-shaped arrays */
  if (n % size == 0) {
    int                       nl = (int)(n / size), xs[4] = {1, (int)C, nl, (int)n}, ys[4] = {1, (int)C, (int)n, nl}, sub[4] = {1, (int)C, nl, nl};
    std::vector<float>        xa((size_t)C * nl * n, 1), ya((size_t)C * nl * n);
    std::vector<MPI_Datatype> st(size), rt(size);
    std::vector<int>          one(size, 1), zero(size, 0);
    double                    tst;
    for (int q = 0; q < size; q++) {
      int s0[4] = {0, 0, 0, q * nl}, r0[4] = {0, 0, q * nl, 0};
      PetscCallMPI(MPI_Type_create_subarray(4, xs, sub, s0, MPI_ORDER_C, MPI_FLOAT, &st[q]));
      PetscCallMPI(MPI_Type_create_subarray(4, ys, sub, r0, MPI_ORDER_C, MPI_FLOAT, &rt[q]));
      PetscCallMPI(MPI_Type_commit(&st[q]));
      PetscCallMPI(MPI_Type_commit(&rt[q]));
    }
    PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
      PetscCallMPI(MPI_Alltoallw(xa.data(), one.data(), zero.data(), st.data(), ya.data(), one.data(), zero.data(), rt.data(), comm));
      return PETSC_SUCCESS;
    }, &tst));
    PetscCall(PetscPrintf(comm, "%-44s ddnn %9.1f us   MPI %9.1f us   ratio %5.2f   (MPI_Alltoallw, subarray types on the storages)\n", "  same, in and out of the storages", 1e6 * tdd, 1e6 * tst, tdd / tst));
    for (int q = 0; q < size; q++) {
      PetscCallMPI(MPI_Type_free(&st[q]));
      PetscCallMPI(MPI_Type_free(&rt[q]));
    }
  }
  PetscCall(PetscPrintf(comm, "%-44s set-up %.1f ms\n", "", 1e3 * tsetup));
  PetscCall(DDPrimitiveDestroy(&T));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDPartitionDestroy(&Px));
  PetscCall(DDPartitionDestroy(&Py));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode BenchCollectives(PetscInt count, int reps)
{
  MPI_Comm    comm = PETSC_COMM_WORLD;
  PetscMPIInt size;
  DDPartition P1, Pall;
  DDTensor    x, y, z;
  DDPrimitive B, A;
  double      tdd, tmpi;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscInt s1[2] = {1, 1}, sa[2] = {size, 1}, shape[2] = {1, count}, dims[1] = {0};
  PetscMPIInt zero = 0;
  PetscCall(DDPartitionCreateCartesian(comm, 2, s1, 1, &zero, &P1));
  PetscCall(DDPartitionCreateCartesian(comm, 2, sa, PETSC_DECIDE, NULL, &Pall));
  PetscCall(DDTensorCreateFromPartition(P1, DD_FLOAT32, 2, shape, &x));
  PetscCall(DDTensorCreateBroadcast(x, Pall, &y));
  PetscCall(DDPrimitiveCreate(comm, &B));
  PetscCall(DDPrimitiveSetType(B, DDPRIMITIVEBROADCAST));
  PetscCall(DDPrimitiveSetUp(B, x, y));
  std::vector<float> buf(count, 1);
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApply(B, x, y); }, &tdd));
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscCallMPI(MPI_Bcast(buf.data(), (int)count, MPI_FLOAT, 0, comm));
    return PETSC_SUCCESS;
  }, &tmpi));
  PetscCall(Report("broadcast 1x1 -> Px1", tdd, tmpi, 1.1));
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApplyAdjoint(B, y, x); }, &tdd));
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscMPIInt rank;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    if (rank == 0) PetscCallMPI(MPI_Reduce(MPI_IN_PLACE, buf.data(), (int)count, MPI_FLOAT, MPI_SUM, 0, comm));
    else PetscCallMPI(MPI_Reduce(buf.data(), NULL, (int)count, MPI_FLOAT, MPI_SUM, 0, comm));
    return PETSC_SUCCESS;
  }, &tmpi));
  PetscCall(Report("  its adjoint (sum-reduce) vs MPI_Reduce", tdd, tmpi, 1.1));
  PetscCall(DDTensorDuplicate(y, &z));
  PetscCall(DDPrimitiveCreate(comm, &A));
  PetscCall(DDPrimitiveSetType(A, DDPRIMITIVEALLSUMREDUCE));
  PetscCall(DDPrimitiveAllSumReduceSetDimensions(A, 1, dims));
  PetscCall(DDPrimitiveSetUp(A, z, z));
  PetscCall(Time(comm, reps, [&]() { return DDPrimitiveApply(A, z, z); }, &tdd));
  PetscCall(Time(comm, reps, [&]() -> PetscErrorCode {
    PetscCallMPI(MPI_Allreduce(MPI_IN_PLACE, buf.data(), (int)count, MPI_FLOAT, MPI_SUM, comm));
    return PETSC_SUCCESS;
  }, &tmpi));
  PetscCall(Report("allsumreduce over P", tdd, tmpi, 1.1));
  PetscCall(DDPrimitiveDestroy(&A));
  PetscCall(DDPrimitiveDestroy(&B));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDTensorDestroy(&z));
  PetscCall(DDPartitionDestroy(&P1));
  PetscCall(DDPartitionDestroy(&Pall));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* set-up time for a fixed per-rank piece (weak scaling of graph building) */
static PetscErrorCode BenchSetup(PetscInt C, PetscInt nloc)
{
  MPI_Comm    comm = PETSC_COMM_WORLD;
  PetscMPIInt size;
  DDPartition P, Q;
  DDTensor    x, y;
  DDPrimitive H, T;

  PetscFunctionBeginUser;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscInt px = 1;
  while (px * px < size) px++;
  while (size % px) px--;
  PetscInt pshape[4] = {1, 1, size / px, px}, qshape[4] = {1, 1, px, size / px}, shape[4] = {1, C, nloc * (size / px), nloc * px};
  PetscCall(DDPartitionCreateCartesian(comm, 4, pshape, PETSC_DECIDE, NULL, &P));
  PetscCall(DDPartitionCreateCartesian(comm, 4, qshape, PETSC_DECIDE, NULL, &Q));
  PetscCall(DDTensorCreateFromPartition(P, DD_FLOAT32, 4, shape, &x));
  PetscCall(DDTensorCreateFromPartition(Q, DD_FLOAT32, 4, shape, &y));
  PetscCall(DDPrimitiveCreate(comm, &H));
  PetscCall(DDPrimitiveSetType(H, DDPRIMITIVEHALO));
  PetscCall(DDPrimitiveHaloSetKernel(H, 2, 3, 1, 1, 1, PETSC_DECIDE));
  PetscCall(DDPrimitiveHaloSetKernel(H, 3, 3, 1, 1, 1, PETSC_DECIDE));
  PetscCall(DDPrimitiveCreate(comm, &T));
  PetscCall(DDPrimitiveSetType(T, DDPRIMITIVEREPARTITION));
  PetscCallMPI(MPI_Barrier(comm));
  double t0 = MPI_Wtime();
  PetscCall(DDPrimitiveSetUp(H, x, NULL));
  double t1 = MPI_Wtime();
  PetscCall(DDPrimitiveSetUp(T, x, y));
  double t2 = MPI_Wtime(), th = t1 - t0, tr = t2 - t1, mh, mr;
  PetscCallMPI(MPI_Allreduce(&th, &mh, 1, MPI_DOUBLE, MPI_MAX, comm));
  PetscCallMPI(MPI_Allreduce(&tr, &mr, 1, MPI_DOUBLE, MPI_MAX, comm));
  PetscCall(PetscPrintf(comm, "set-up, %d ranks, %" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT " per rank: halo (2-D, k=3) %.2f ms, repartition %.2f ms\n", size, C, nloc, nloc, 1e3 * mh, 1e3 * mr));
  PetscCall(DDPrimitiveDestroy(&H));
  PetscCall(DDPrimitiveDestroy(&T));
  PetscCall(DDTensorDestroy(&x));
  PetscCall(DDTensorDestroy(&y));
  PetscCall(DDPartitionDestroy(&P));
  PetscCall(DDPartitionDestroy(&Q));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  PetscInt  n = 512, C = 16, N = 1, reps = 50;
  PetscBool setuponly = PETSC_FALSE, haloonly = PETSC_FALSE;
  char      cases[256] = "";

  PetscCall(DDInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &n, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-c", &C, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-reps", &reps, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-setup_only", &setuponly, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-batch", &N, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-halo_only", &haloonly, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-breakdown", &breakdown, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-cases", cases, sizeof(cases), NULL));
  if (haloonly) { /* the halo exchanges of a batch N x C x n x n tensor alone (per-call costs of small tensors: -batch 8 -c 16 -n 32) */
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "tensor %" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT " float32, median of %" PetscInt_FMT " runs\n", N, C, n, n, reps));
    PetscCall(BenchHalo(N, C, n, 2, (int)reps, "halo, H split (contiguous faces)"));
    PetscCall(BenchHalo(N, C, n, 3, (int)reps, "halo, W split (strided faces)"));
    PetscCall(DDFinalize());
    return 0;
  }
  if (cases[0]) setuponly = PETSC_FALSE;
  if (!setuponly) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "tensor 1x%" PetscInt_FMT "x%" PetscInt_FMT "x%" PetscInt_FMT " float32, median of %" PetscInt_FMT " runs\n", C, n, n, reps));
    if (Want(cases, "haloH")) PetscCall(BenchHalo(1, C, n, 2, (int)reps, "halo, H split (contiguous faces)"));
    if (Want(cases, "haloW")) PetscCall(BenchHalo(1, C, n, 3, (int)reps, "halo, W split (strided faces)"));
    if (Want(cases, "haloWcl")) PetscCall(BenchHalo(1, C, n, 3, (int)reps, "halo, W split, channels-last", DD_FORMAT_CHANNELS_LAST));
    if (Want(cases, "haloWbl")) PetscCall(BenchHalo(1, C, n, 3, (int)reps, "halo, W split, blocked nChw16c", DD_FORMAT_BLOCKED));
    if (Want(cases, "repart")) PetscCall(BenchRepartition(C, n, (int)reps));
    if (Want(cases, "coll")) PetscCall(BenchCollectives(C * n * n / 4, (int)reps));
  }
  if (Want(cases, "setup")) PetscCall(BenchSetup(C, 128));
  PetscCall(DDFinalize());
  return 0;
}
