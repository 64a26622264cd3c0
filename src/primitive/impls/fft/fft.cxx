/*
  FFT F: the distributed real-to-complex Fourier transform of the spatial dimensions of a
  tensor, truncated to its lowest modes (the forward transform of a Fourier neural operator's
  spectral convolution, Li et al. 2021), as a linear operator with its exact adjoint (paper 000,
  sec. 3: every data movement and every linear local kernel has a forward and an adjoint,
  checked by the adjoint test, eq. 26).

  x: (N, C, s_1, ..., s_d), d = 1, 2, 3, real.
  y: (N, C, 2 m_1, ..., 2 m_{d-1}, m_d, 2): the kept modes of rfftn(x) over the spatial
     dimensions, complex numbers stored as a trailing dimension of size 2 (real, imaginary).
     Along dimensions 1..d-1 the kept frequencies are the two corner blocks 0..m_i-1 and
     s_i-m_i..s_i-1 (index m_i + r holds frequency s_i - m_i + r, the order of the reference
     FNO code's weights1/weights2/...); along the last dimension the first m_d entries of the
     half-spectrum (m_d <= s_d/2 + 1). The modes are read from y's shape.
  So y = T rfftn(x) (T keeps the corner blocks), torch.fft.rfftn(x, dim=spatial) restricted to
  the kept modes.

  Pencil decomposition through the repartition primitive (paper 000 sec. 3.2.4) with mode
  truncation between the stages: on the P workers of x's partition,
    a_d = R_0 x                     (partition with s_d whole: the pencil along the last dim)
    b_d = T_d r2c_d(a_d)            (FFTW real-to-complex, only the first m_d modes kept)
    a_j = R_j b_{j+1}, b_j = T_j fft_j(a_j)   j = d-1, ..., 1 (complex FFT, corner modes kept)
    y   = R_f b_1
  Only the kept modes travel through R_j and R_f: the volume of each later all-to-all is cut
  by about s_i / (2 m_i) per truncated dimension. Batch and channel dimensions are never split
  in the stages; the P workers go to the spatial dimensions that are not transformed (two
  factors, a pencil, in 3-D; for d = 1 the batch dimension).

  The local transforms (F_d = r2c_d, fft_j) with their truncation T_j are kernels of the backend
  tier (FftKernel, ddnn/private/ddbackendimpl.h): FFTW on the CPU backends, cuFFT on /gpu/cuda,
  found along the chain of the backend DDPrimitiveFFTSetBackend_Private() gave (the spectral
  layer's) or the default one; -log_view times them as "FFT:<backend>".

  Adjoint (exact, real inner products on both sides): y -> x is
    b_1 = R_f^* y; a_j = fft_j^*(T_j^* b_j) (zero-padding, then the unnormalized backward FFT);
    b_{j+1} = R_j^* a_j; a_d = r2c^*(T_d^* b_d); x = R_0^* a_d,
  where r2c^* Y = c2r(w Y) with the Hermitian weights w_k = 1/2 for 0 < k < s_d/2 and 1 for
  k = 0 and the Nyquist k = s_d/2 (c2r counts the conjugate partner of every other mode;
  the imaginary parts at 0 and s_d/2 have zero cosine-sine weight, and c2r ignores them too).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddprimitiveimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <tensor/layout.hpp>
#include <backend/interface/backends.hpp>
#include <tensor/argcheck.hpp>
#include <memory>
#include <vector>

using namespace ddnn;

namespace
{
/* One local transform: along tensor dimension `dim` of a (full length L there) into b (K kept entries there) */
struct Stage {
  PetscInt    dim  = 0;     /* tensor dimension transformed (2 + spatial index) */
  bool        real = false; /* the first stage: r2c along the last spatial dimension */
  PetscInt    L = 0, m = 0, K = 0; /* full length, modes per corner (complex) or kept (real), kept entries */
  PetscInt    A = 0, B = 0;        /* local outer and inner (complex) counts */
  DDPartition part = NULL;
  DDTensor    a = NULL, b = NULL;
  DDPrimitive R = NULL; /* previous stage's b (or x) -> a */
  std::unique_ptr<FftKernel> k;        /* the local transforms (none where this rank's pencils are empty) */
  DDBackend                  which = NULL; /* the backend whose kernel k is */
  PetscInt64  movedPruned = 0, movedFull = 0; /* entries R moves between ranks (global), pruned and not */
};

struct FFT {
  PetscInt           d = 0;
  PetscInt           s[3] = {0, 0, 0}, m[3] = {0, 0, 0};
  std::vector<Stage> st;            /* st[0] real stage (last dim), then dims d-2, ..., 0 */
  DDPrimitive        Rf   = NULL;   /* last b -> y */
  DDBackend          backend = NULL; /* where the kernels are looked for (NULL: the default backend) */
  PetscInt64         movedFinal[2] = {0, 0};
};

inline PetscInt BoxSize(PetscInt order, const PetscInt lo[], const PetscInt hi[])
{
  PetscInt n = 1;
  for (PetscInt k = 0; k < order; k++) n *= PetscMax(0, hi[k] - lo[k]);
  return n;
}

/* The box of worker w of a balanced distribution of `shape` over partition shape ps */
inline void BalancedBox(PetscInt order, const PetscInt shape[], const PetscInt ps[], PetscInt w, PetscInt lo[], PetscInt hi[])
{
  PetscInt c[DD_MAX_DIM];
  for (PetscInt k = order - 1; k >= 0; k--) {
    c[k] = w % ps[k];
    w /= ps[k];
  }
  for (PetscInt k = 0; k < order; k++) {
    std::vector<PetscInt> r(ps[k] + 1);
    DDSplitOwnership_Private(shape[k], ps[k], r.data());
    lo[k] = r[c[k]];
    hi[k] = r[c[k] + 1];
  }
}

/* Entries a repartition from balanced (shape, psA, ranksA) to balanced (shape, psB, ranksB) moves between different ranks */
PetscInt64 MovedEntries(PetscInt order, const PetscInt shape[], const PetscInt psA[], const PetscMPIInt *rA, PetscInt nA, const PetscInt psB[], const PetscMPIInt *rB, PetscInt nB)
{
  PetscInt64 moved = 0;
  for (PetscInt wb = 0; wb < nB; wb++) {
    PetscInt lb[DD_MAX_DIM], hb[DD_MAX_DIM];
    BalancedBox(order, shape, psB, wb, lb, hb);
    PetscInt64 mine = BoxSize(order, lb, hb), same = 0;
    for (PetscInt wa = 0; wa < nA; wa++)
      if (rA[wa] == rB[wb]) {
        PetscInt la[DD_MAX_DIM], ha[DD_MAX_DIM];
        BalancedBox(order, shape, psA, wa, la, ha);
        for (PetscInt k = 0; k < order; k++) {
          la[k] = PetscMax(la[k], lb[k]);
          ha[k] = PetscMin(ha[k], hb[k]);
        }
        same += BoxSize(order, la, ha);
      }
    moved += mine - same;
  }
  return moved;
}

/* Partition shape (order d + 2 over (N, C, spatial)) of the stage transforming spatial dimension j on P workers */
void StagePartitionShape(PetscInt d, PetscInt P, PetscInt j, PetscInt ps[])
{
  for (PetscInt k = 0; k < d + 2; k++) ps[k] = 1;
  if (d == 1) ps[0] = P; /* the batch: nothing else to split */
  else if (d == 2) ps[2 + (1 - j)] = P;
  else { /* a pencil: P = p1 p2 over the two other spatial dimensions, p1 <= p2 the closest factors */
    PetscInt p1 = 1;
    for (PetscInt f = 1; f * f <= P; f++)
      if (P % f == 0) p1 = f;
    PetscInt o[2], n = 0;
    for (PetscInt i = 0; i < 3; i++)
      if (i != j) o[n++] = i;
    ps[2 + o[0]] = p1;
    ps[2 + o[1]] = P / p1;
  }
}

/* Partition shape (order d + 3) of the default spectral tensor: the modes split, batch and channels whole */
void FourierPartitionShape(PetscInt d, PetscInt P, PetscInt ps[])
{
  if (d == 1) {
    ps[0] = ps[1] = ps[3] = 1;
    ps[2]                 = P;
  } else {
    StagePartitionShape(d, P, 0, ps);
    ps[d + 2] = 1;
  }
}

PetscErrorCode DestroyStage(Stage &S)
{
  PetscFunctionBegin;
  S.k.reset();
  S.which = NULL;
  PetscCall(DDPrimitiveDestroy(&S.R));
  PetscCall(DDTensorDestroy(&S.a));
  PetscCall(DDTensorDestroy(&S.b));
  PetscCall(DDPartitionDestroy(&S.part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A plain, halo-free tensor of the given shape, balanced on part, empty pieces allowed */
PetscErrorCode StageTensor(MPI_Comm comm, DDPartition part, PetscInt order, const PetscInt shape[], DDDataType dt, DDTensor *t)
{
  PetscFunctionBegin;
  PetscCall(DDTensorCreate(comm, t));
  PetscCall(DDTensorSetPartition(*t, part));
  PetscCall(DDTensorSetShape(*t, order, shape));
  PetscCall(DDTensorSetDataType(*t, dt));
  PetscCall(DDTensorSetEmptyPiecesAllowed(*t, PETSC_TRUE));
  PetscCall(DDTensorSetUp(*t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

} // namespace

static PetscErrorCode FFT_Reset(DDPrimitive prim)
{
  auto *f = (FFT *)prim->data;

  PetscFunctionBegin;
  for (auto &S : f->st) PetscCall(DestroyStage(S));
  f->st.clear();
  PetscCall(DDPrimitiveDestroy(&f->Rf));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FFT_Destroy(DDPrimitive prim)
{
  PetscFunctionBegin;
  PetscCall(FFT_Reset(prim));
  delete (FFT *)prim->data;
  prim->data = NULL;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Checks x and y and reads the modes from y's shape */
static PetscErrorCode FFTCheckShapes(MPI_Comm comm, DDTensor x, DDTensor y, PetscInt *d, PetscInt s[], PetscInt m[])
{
  char sx[128], sy[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  PetscCall(DDShapeToString_Private(y->order, y->shape, sy, sizeof(sy)));
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_WRONG, "The fft primitive transforms (N, C, spatial...) tensors with 1 to 3 spatial dimensions; x has shape %s", sx);
  *d = x->order - 2;
  PetscCheck(x->dtype == DD_FLOAT32 || x->dtype == DD_FLOAT64, comm, PETSC_ERR_SUP, "The fft primitive supports float32 and float64 tensors, not %s", DDDataTypes[x->dtype]);
  PetscCheck(y->order == x->order + 1 && y->shape[y->order - 1] == 2 && y->shape[0] == x->shape[0] && y->shape[1] == x->shape[1], comm, PETSC_ERR_ARG_SIZ,
             "The fft primitive maps x of shape %s to y of shape (N, C, 2 m_1, ..., m_d, 2); y has shape %s", sx, sy);
  PetscCheck(x->memtype == DD_MEMTYPE_HOST && y->memtype == DD_MEMTYPE_HOST, comm, PETSC_ERR_SUP, "The fft primitive takes host tensors (x is in %s memory, y in %s memory); device tensors are not supported yet (the /gpu/cuda FFT kernels are reached through the backend tier)", DDMemTypes[x->memtype], DDMemTypes[y->memtype]);
  for (PetscInt k = 0; k < x->order; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "The fft primitive's input cannot be replicated (dimension %" PetscInt_FMT ")", k);
  for (PetscInt k = 0; k < y->order; k++) PetscCheck(!y->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "The fft primitive's output cannot be replicated (dimension %" PetscInt_FMT ")", k);
  for (PetscInt j = 0; j < *d; j++) {
    const PetscInt n = x->shape[2 + j], e = y->shape[2 + j];
    s[j]             = n;
    if (j < *d - 1) {
      PetscCheck(e % 2 == 0 && e >= 2 && e <= n, comm, PETSC_ERR_ARG_SIZ, "Spatial dimension %" PetscInt_FMT " of y (shape %s) holds the two corner blocks of m modes: an even number 2 m with 2 <= 2 m <= %" PetscInt_FMT " (x has shape %s)", j, sy, n, sx);
      m[j] = e / 2;
    } else {
      PetscCheck(e >= 1 && e <= n / 2 + 1, comm, PETSC_ERR_ARG_SIZ, "The last spatial dimension of y (shape %s) holds m modes of the half-spectrum: 1 <= m <= %" PetscInt_FMT " (x has shape %s)", sy, n / 2 + 1, sx);
      m[j] = e;
    }
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the local FFT kernels of the stages, from the chain of the primitive's backend (in x's memory) */
static PetscErrorCode FFTCreateKernels(FFT *f, DDTensor x)
{
  DDBackend b = f->backend;

  PetscFunctionBegin;
  if (!b) PetscCall(DDBackendDefault_Private(&b));
  PetscCheck(b->memtype == x->memtype, PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP, "The fft primitive's tensors are in %s memory, but the kernels of backend %s run on %s memory", DDMemTypes[x->memtype], b->name, DDMemTypes[b->memtype]);
  for (auto &S : f->st) {
    FftKernelSpec spec;
    if (!S.a->layout.bulksize || !S.b->layout.bulksize) continue; /* no pencils here */
    spec.real = S.real;
    spec.L    = S.L;
    spec.m    = S.m;
    spec.K    = S.K;
    spec.A    = S.A;
    spec.B    = S.B;
    spec.a    = S.a->array;
    spec.b    = S.b->array;
    PetscCall(DDBackendFftCreate(b, x->dtype, spec, &S.k, &S.which));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FFT_SetUp(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto       *f    = (FFT *)prim->data;
  MPI_Comm    comm = PetscObjectComm((PetscObject)prim);
  DDPartition Px   = x->part;

  PetscFunctionBegin;
  PetscCall(FFTCheckShapes(comm, x, y, &f->d, f->s, f->m));
  const PetscInt      d = f->d, P = Px->size, oc = d + 3;
  const PetscMPIInt  *ranks = Px->ranks;
  /* stages: 0 the real transform of spatial dimension d-1, then the complex transforms of d-2, ..., 0 */
  f->st.resize(d);
  PetscInt cur[DD_MAX_DIM], full[DD_MAX_DIM]; /* the shape so far (pruned), and unpruned (for the volume) */
  for (PetscInt k = 0; k < d + 2; k++) cur[k] = full[k] = x->shape[k];
  cur[d + 2] = full[d + 2] = 2;
  PetscInt prevps[DD_MAX_DIM];
  for (PetscInt t = 0; t < d; t++) {
    Stage         &S = f->st[t];
    const PetscInt j = d - 1 - t;
    PetscInt       ps[DD_MAX_DIM];
    StagePartitionShape(d, P, j, ps);
    ps[d + 2] = 1;
    S.dim     = 2 + j;
    S.real    = t == 0;
    S.L       = f->s[j];
    S.m       = f->m[j];
    S.K       = S.real ? f->m[j] : 2 * f->m[j];
    PetscCall(DDPartitionCreateCartesian(comm, oc, ps, P, ranks, &S.part));
    if (S.real) { /* a: the real (N, C, s...) on the same workers, as an order d + 2 partition */
      DDPartition pa;
      PetscCall(DDPartitionCreateCartesian(comm, d + 2, ps, P, ranks, &pa));
      PetscCall(StageTensor(comm, pa, d + 2, cur, x->dtype, &S.a));
      PetscCall(DDPartitionDestroy(&pa));
      PetscCall(DDPrimitiveCreate(comm, &S.R));
      PetscCall(DDPrimitiveSetType(S.R, DDPRIMITIVEREPARTITION));
      PetscCall(DDPrimitiveSetUp(S.R, x, S.a));
    } else {
      PetscCall(StageTensor(comm, S.part, oc, cur, x->dtype, &S.a));
      PetscCall(DDPrimitiveCreate(comm, &S.R));
      PetscCall(DDPrimitiveSetType(S.R, DDPRIMITIVEREPARTITION));
      PetscCall(DDPrimitiveSetUp(S.R, f->st[t - 1].b, S.a));
      S.movedPruned = MovedEntries(oc, cur, prevps, ranks, P, ps, ranks, P);
      S.movedFull   = MovedEntries(oc, full, prevps, ranks, P, ps, ranks, P);
    }
    cur[S.dim]  = S.K;
    full[S.dim] = S.real ? S.L / 2 + 1 : S.L;
    PetscCall(StageTensor(comm, S.part, oc, cur, x->dtype, &S.b));
    /* local pencils: A outer entries, L along the transform, B inner complex entries */
    const DDLayout &La = S.a->layout;
    S.A                = 1;
    S.B                = 1;
    for (PetscInt k = 0; k < S.dim; k++) S.A *= La.n[k];
    for (PetscInt k = S.dim + 1; k < (S.real ? d + 2 : oc - 1); k++) S.B *= La.n[k];
    PetscCheck(!La.bulksize || La.n[S.dim] == S.L, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Stage %" PetscInt_FMT " pencil is not whole", t);
    for (PetscInt k = 0; k < oc; k++) prevps[k] = ps[k];
  }
  PetscCall(DDPrimitiveCreate(comm, &f->Rf));
  PetscCall(DDPrimitiveSetType(f->Rf, DDPRIMITIVEREPARTITION));
  PetscCall(DDPrimitiveSetUp(f->Rf, f->st[d - 1].b, y));
  f->movedFinal[0] = MovedEntries(oc, cur, prevps, ranks, P, y->part->shape, y->part->ranks, y->part->size);
  f->movedFinal[1] = MovedEntries(oc, full, prevps, ranks, P, y->part->shape, y->part->ranks, y->part->size);
  PetscCall(FFTCreateKernels(f, x));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FFT_Apply(DDPrimitive prim, DDTensor x, DDTensor y)
{
  auto *f = (FFT *)prim->data;

  PetscFunctionBegin;
  for (size_t t = 0; t < f->st.size(); t++) {
    Stage &S = f->st[t];
    PetscCall(DDPrimitiveApply(S.R, t == 0 ? x : f->st[t - 1].b, S.a));
    if (S.k) { /* b = T fft(a) on this rank's pencils */
      KernelEvent e(S.which, DD_KERNEL_FFT);
      PetscCall(S.k->Forward(S.a->array, S.b->array));
    }
  }
  PetscCall(DDPrimitiveApply(f->Rf, f->st.back().b, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FFT_ApplyEnd(DDPrimitive prim, DDTensor x, DDTensor y)
{
  PetscFunctionBegin;
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FFT_Adjoint(DDPrimitive prim, DDTensor y, DDTensor x)
{
  auto *f = (FFT *)prim->data;

  PetscFunctionBegin;
  PetscCall(DDPrimitiveApplyAdjoint(f->Rf, y, f->st.back().b));
  for (PetscInt t = (PetscInt)f->st.size() - 1; t >= 0; t--) {
    Stage &S = f->st[t];
    if (S.k) { /* a = fft^*(T^* b) */
      KernelEvent e(S.which, DD_KERNEL_FFT);
      PetscCall(S.k->Adjoint(S.b->array, S.a->array));
    } else if (S.a->layout.size) { /* no pencils here: nothing of a is reached */
      const struct _DDBackendMemOps *ops;
      PetscCall(DDMemOps_Private(S.a->memtype, &ops));
      PetscCall(ops->set(S.a->array, 0, (size_t)S.a->layout.size * (S.a->dtype == DD_FLOAT64 ? sizeof(double) : sizeof(float))));
    }
    PetscCall(DDPrimitiveApplyAdjoint(S.R, S.a, t == 0 ? x : f->st[t - 1].b));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ddnn::DDPrimitiveFFTGetStages_Private(DDPrimitive prim, std::vector<FftStageView> *stages)
{
  PetscBool isfft;

  PetscFunctionBegin;
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, DDPRIMITIVEFFT, &isfft));
  PetscCheck(isfft && prim->setupcalled, PETSC_COMM_SELF, PETSC_ERR_ARG_WRONGSTATE, "DDPrimitiveFFTGetStages_Private() needs a set-up %s primitive", DDPRIMITIVEFFT);
  stages->clear();
  for (auto &S : ((FFT *)prim->data)->st) {
    FftStageView v;
    v.a = S.a;
    v.b = S.b;
    v.k = S.k.get();
    stages->push_back(v);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode FFT_View(DDPrimitive prim, PetscViewer viewer)
{
  auto     *f = (FFT *)prim->data;
  PetscBool iascii;

  PetscFunctionBegin;
  PetscCall(PetscObjectTypeCompare((PetscObject)viewer, PETSCVIEWERASCII, &iascii));
  if (!iascii || f->st.empty()) PetscFunctionReturn(PETSC_SUCCESS);
  PetscInt64 pr, fu;
  PetscCall(DDPrimitiveFFTGetVolume(prim, &pr, &fu));
  PetscCall(PetscViewerASCIIPrintf(viewer, "%" PetscInt_FMT "-D real FFT, modes", f->d));
  for (PetscInt j = 0; j < f->d; j++) PetscCall(PetscViewerASCIIPrintf(viewer, " %" PetscInt_FMT "/%" PetscInt_FMT, f->m[j], f->s[j]));
  for (auto &S : f->st)
    if (S.k) {
      PetscCall(PetscViewerASCIIPrintf(viewer, ", local transforms: %s (%s)", S.k->Name(), S.which->name));
      break;
    }
  PetscCall(PetscViewerASCIIPrintf(viewer, "\n  bytes moved by the transposes after the first transform: %" PetscInt64_FMT " (without pruning %" PetscInt64_FMT ")\n", pr, fu));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDPrimitiveFFTGetVolume - Bytes the transposes of a `DDPRIMITIVEFFT` move between ranks in one application, with and without mode truncation

  Not collective

  Input Parameter:
. prim - the set-up fft primitive

  Output Parameters:
+ pruned - bytes moved by the repartitions after the first (real-to-complex) transform, which carry only the kept modes
- full   - bytes the same repartitions would move carrying the whole spectra (truncation only at the end)

  Notes:
  Global counts (all ranks), computed from the balanced ownership of the stage tensors and of y.
  The first repartition (x to the first pencils) moves the same real data in both cases and is
  not counted. The ratio full / pruned is the saving of truncating between the stages.

  Level: intermediate

.seealso: `DDPRIMITIVEFFT`, `DDTensorCreateFFT()`
@*/
PetscErrorCode DDPrimitiveFFTGetVolume(DDPrimitive prim, PetscInt64 *pruned, PetscInt64 *full)
DD_CXX_TRY
{
  PetscBool isfft;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, DDPRIMITIVEFFT, &isfft));
  PetscCheck(isfft, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONG, "DDPrimitiveFFTGetVolume() needs a primitive of type %s", DDPRIMITIVEFFT);
  PetscCheck(prim->setupcalled, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "Call DDPrimitiveSetUp() first");
  auto        *f  = (FFT *)prim->data;
  const size_t es = 2 * (prim->xref->dtype == DD_FLOAT64 ? sizeof(double) : sizeof(float));
  PetscInt64   p = f->movedFinal[0], u = f->movedFinal[1];
  for (auto &S : f->st) {
    p += S.movedPruned;
    u += S.movedFull;
  }
  if (pruned) *pruned = p * (PetscInt64)es / 2;
  if (full) *full = u * (PetscInt64)es / 2;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*
  DDPrimitiveFFTSetBackend_Private - the backend along whose chain the fft primitive finds its
  local FFT kernels (before DDPrimitiveSetUp(); NULL: the default backend). The spectral layer
  passes its own (-<prefix>dd_backend).
*/
PetscErrorCode DDPrimitiveFFTSetBackend_Private(DDPrimitive prim, DDBackend b)
DD_CXX_TRY
{
  PetscBool isfft;

  PetscFunctionBegin;
  PetscValidHeaderSpecific(prim, DD_PRIMITIVE_CLASSID, 1);
  PetscCall(PetscObjectTypeCompare((PetscObject)prim, DDPRIMITIVEFFT, &isfft));
  PetscCheck(isfft, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONG, "DDPrimitiveFFTSetBackend_Private() needs a primitive of type %s", DDPRIMITIVEFFT);
  PetscCheck(!prim->setupcalled, PetscObjectComm((PetscObject)prim), PETSC_ERR_ARG_WRONGSTATE, "Set the fft primitive's backend before DDPrimitiveSetUp()");
  ((FFT *)prim->data)->backend = b;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*MC
  DDPRIMITIVEFFT - "fft": the distributed real-to-complex FFT of a tensor's spatial dimensions, truncated to its lowest modes

  DDPrimitiveSetUp(prim, x, y): x is (N, C, s_1, ..., s_d), d = 1, 2 or 3, float32 or float64,
  any partition, ownership, halo and format; y is (N, C, 2 m_1, ..., 2 m_{d-1}, m_d, 2) on any
  partition, made by `DDTensorCreateFFT()`. y = the modes of torch.fft.rfftn(x, dim=(2, ..., d+1))
  kept by a Fourier neural operator (Li et al. 2021): along dimensions 1..d-1 the corner blocks
  0..m_i-1 and s_i-m_i..s_i-1 (stored in that order), along the last the first m_d <= s_d/2+1
  entries of the half-spectrum; complex numbers as a trailing dimension (real, imaginary).

  A pencil decomposition through `DDPRIMITIVEREPARTITION` on x's workers, with the local
  transforms of the backend tier (FFTW on the CPU backends, double and single precision; cuFFT
  kernels on /gpu/cuda; -log_view events "FFT:<backend>") and mode truncation between the stages: after the
  first (real-to-complex) transform only the kept modes travel (`DDPrimitiveFFTGetVolume()`).
  The adjoint is the exact adjoint of this real linear map (Hermitian weights 1/2 on the modes of
  the last dimension that have a conjugate partner, then c2r), so DDPrimitiveAdjointTest() holds
  to rounding (paper 000, eq. 26). The unnormalized inverse irfftn of a truncated spectrum Z is
  the adjoint applied to Z with those weights undone (doubled), divided by s_1 ... s_d
  (what `DDLAYERSPECTRAL` uses).

  Level: intermediate

.seealso: `DDTensorCreateFFT()`, `DDPrimitiveFFTGetVolume()`, `DDLAYERSPECTRAL`, `DDPRIMITIVEREPARTITION`
M*/
PETSC_EXTERN PetscErrorCode DDPrimitiveCreate_FFT(DDPrimitive prim)
{
  PetscFunctionBegin;
  prim->data              = new FFT;
  prim->ops->setup        = FFT_SetUp;
  prim->ops->applybegin   = FFT_Apply;
  prim->ops->applyend     = FFT_ApplyEnd;
  prim->ops->adjointbegin = FFT_Adjoint;
  prim->ops->adjointend   = FFT_ApplyEnd;
  prim->ops->view         = FFT_View;
  prim->ops->reset        = FFT_Reset;
  prim->ops->destroy      = FFT_Destroy;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDTensorCreateFFT - Creates the spectral tensor of a `DDPRIMITIVEFFT`: the kept modes of x's real FFT

  Collective

  Input Parameters:
+ x     - the real tensor (N, C, s_1, ..., s_d), d = 1, 2, 3
. nm    - number of entries in modes: 1 (the same for every spatial dimension) or d
- modes - modes kept per spatial dimension: m_i <= s_i / 2 for i < d (two corner blocks), m_d <= s_d / 2 + 1 (half-spectrum)

  Output Parameter:
. y - the zeroed tensor (N, C, 2 m_1, ..., 2 m_{d-1}, m_d, 2) of x's data type

  Notes:
  y lives on x's workers, batch and channels whole, the modes split: over the last two mode
  dimensions as the final pencil of the transform (d >= 2), over m_1 for d = 1. That is the
  partition of the spectral convolution's weights (channels are mixed locally per mode).

  Level: intermediate

.seealso: `DDPRIMITIVEFFT`, `DDLAYERSPECTRAL`
@*/
PetscErrorCode DDTensorCreateFFT(DDTensor x, PetscInt nm, const PetscInt modes[], DDTensor *y)
DD_CXX_TRY
{
  MPI_Comm comm;
  char     sx[128];

  PetscFunctionBegin;
  PetscCall(DDTensorCheckSetUp_Private(x, "DDTensorCreateFFT"));
  comm = PetscObjectComm((PetscObject)x);
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  PetscCheck(x->order >= 3 && x->order <= 5, comm, PETSC_ERR_ARG_WRONG, "DDTensorCreateFFT() needs an (N, C, spatial...) tensor with 1 to 3 spatial dimensions; x has shape %s", sx);
  const PetscInt d = x->order - 2;
  PetscCheck(nm == 1 || nm == d, comm, PETSC_ERR_ARG_SIZ, "Give 1 or %" PetscInt_FMT " modes for x of shape %s, not %" PetscInt_FMT, d, sx, nm);
  DDCheckPointer(modes, 3);
  DDCheckPointer(y, 4);
  PetscInt shape[DD_MAX_DIM], ps[DD_MAX_DIM];
  shape[0] = x->shape[0];
  shape[1] = x->shape[1];
  for (PetscInt j = 0; j < d; j++) {
    const PetscInt mj = modes[nm == 1 ? 0 : j], n = x->shape[2 + j];
    if (j < d - 1) PetscCheck(mj >= 1 && 2 * mj <= n, comm, PETSC_ERR_ARG_OUTOFRANGE, "Modes %" PetscInt_FMT " of spatial dimension %" PetscInt_FMT " (size %" PetscInt_FMT ") must be in [1, %" PetscInt_FMT "]", mj, j, n, n / 2);
    else PetscCheck(mj >= 1 && mj <= n / 2 + 1, comm, PETSC_ERR_ARG_OUTOFRANGE, "Modes %" PetscInt_FMT " of the last spatial dimension (size %" PetscInt_FMT ") must be in [1, %" PetscInt_FMT "]", mj, n, n / 2 + 1);
    shape[2 + j] = j < d - 1 ? 2 * mj : mj;
  }
  shape[d + 2] = 2;
  FourierPartitionShape(d, x->part->size, ps);
  DDPartition part;
  PetscCall(DDPartitionCreateCartesian(comm, d + 3, ps, x->part->size, x->part->ranks, &part));
  PetscCall(StageTensor(comm, part, d + 3, shape, x->dtype, y));
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
