/*
  DDLAYERAFFINE: distributed dense layer y = x W^T + b (torch.nn.Linear), paper 000 sec. 4.2.1
  and Fig. 5; the Pr x Pc grid of paper 001 (weights split over Pfo x Pfi, data over Pn).

  Partitions:
    x  (N, Fi) on Px = Pn x Pfi              (the input's own partition)
    y  (N, Fo) on Py = Pn x Pfo              (the output; x's batch ownership, Fo balanced)
    W  (Fo, Fi) on Pr = Pfo x Pfi            (the workers with n = 0)
    b  (Fo) on Pb = Pfo                      (the workers with n = 0, fi = 0: counted once)
  and the work partition Pw of Pfo Pn Pfi workers (fo, n, fi), numbered three ways so that the
  broadcasts and sum-reductions align at the trailing dimension (as in DDLAYERCONV); for
  order > 2 inputs Pn stands for the Pn prod(Pt) batch workers, see below:
    Pw_x = (Pfo, Pn, Pfi)   x^ = B x  (copies over fo; x^ has shape (1, N, Fi))
    Pw_y = (Pfi, Pn, Pfo)   y  = R y^ (sums over fi; y^ has shape (1, N, Fo))
    Pw_w = (Pn, Pfo, Pfi)   W^ = B W  (copies over n: the batch workers share the weights)
  Forward:  x^ = B x; W^ = B W; b^ = B b; y^ = x^ W^T + [fi = 0] b^; y = R y^
  Backward: dy^ = R^* dy = B dy; dx^ = dy^ W^; dW^ = dy^T x^; db^ = sum_n dy^ (fi = 0);
            dW += B^* dW^; db += B^* db^; dx = B^* dx^
  Each broadcast/sum-reduce is skipped when its dimension has one worker: Pfo = 1 means no
  copies of x, Pfi = 1 no reduction of y, Pn = 1 no copies of the parameters.

  Workers with fo = 0 are x's own ranks; the others are the lowest ranks x does not use.
  Inputs of order d > 2, (N, T..., Fi) as torch.nn.Linear takes them, are (N T..., Fi) matrices
  whose rows are independent: the middle dimensions T... act as extra batch dimensions (paper 000
  sec. 4.1 and 4.2.1 with the batch n generalized to the index (n, t...)). x's partition is
  Pn x Pt... x Pfi; every work and output partition above gets the extents Pt... between its
  batch and feature dimensions (x's ownership there), and "the batch workers" are the
  Pb = Pn prod(Pt) workers (n, t...) (numbered in C order): W^ = B W copies the weights to all
  of them, and B^* sums their weight gradients. A worker's rows are the C-order box of its
  pieces of N, T... (each local piece is contiguous rows once its halo is stripped: RowMajor).
  Local kernels: the GEMM entries of the layer's backend chain (/cpu/dnnl: oneDNN's sgemm in
  float32; /cpu/blas: OpenBLAS sgemm/dgemm; /cpu/ref: the reference loops, -<prefix>dd_backend /cpu/ref).
*/
#include <sys/ddcxx.hpp>
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <tensor/layout.hpp>
#include <vector>

using namespace ddnn;

namespace
{
struct Affine {
  /* hyper-parameters */
  PetscInt  fo   = 0;
  PetscBool bias = PETSC_TRUE;
  PetscInt  pfo  = 1;
  /* set-up */
  PetscInt    Pn = 1, Pfi = 1;
  DDBackend   kb = NULL; /* the layer's backend: its chain gives the GEMM kernels */
  bool        bcastX = false, reduceY = false, bcastW = false;
  DDPartition Pwx = NULL, Pwy = NULL, Py = NULL, Pr = NULL, Pww = NULL, Pb = NULL, Pwb = NULL;
  DDTensor    w = NULL, b = NULL;                         /* owned by the layer's parameter list */
  DDTensor    xh = NULL, dxh = NULL, yh = NULL, dyh = NULL; /* x^, dx^, y^, dy^ on the work partition */
  DDTensor    wh = NULL, bh = NULL, dwh = NULL, dbh = NULL, dwr = NULL, dbr = NULL;
  DDTensor    xp = NULL, dxp = NULL;                      /* row-major copies of x, dx when theirs is not */
  DDTensor    xin = NULL, dxo = NULL, yo = NULL, dyo = NULL; /* inputs/outputs whose halo differs from set-up */
  DDPrimitive Bx = NULL, Ry = NULL, Bw = NULL, Bb = NULL;
  AffineGeom  g;
  bool        worker = false, biasworker = false;
  PetscInt    fuseact = -1; /* -net_fuse: the DDActivationType Forward applies to its output in place, or -1: none */
};
} // namespace

static PetscErrorCode AffineGet(DDLayer l, Affine **a, const char fn[])
{
  PetscFunctionBegin;
  PetscCall(DDLayerCheckType_Private(l, DDLAYERAFFINE, fn));
  *a = (Affine *)l->data;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*@
  DDLayerAffineSetOutputFeatures - Number of output features Fo of a dense layer (torch.nn.Linear's out_features)

  Logically collective

  Input Parameters:
+ l  - the layer
- fo - the number, positive

  Options Database Key:
. -layer_affine_out_features <n> - the number

  Level: beginner

.seealso: `DDLAYERAFFINE`, `DDLayerAffineSetBias()`, `DDLayerAffineSetOutputWorkers()`
@*/
PetscErrorCode DDLayerAffineSetOutputFeatures(DDLayer l, PetscInt fo)
DD_CXX_TRY
{
  Affine *a;

  PetscFunctionBegin;
  PetscCall(AffineGet(l, &a, "DDLayerAffineSetOutputFeatures"));
  PetscCheck(fo >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Output features %" PetscInt_FMT " must be positive", fo);
  a->fo = fo;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerAffineSetBias - Whether the dense layer has a learnable bias (default true)

  Logically collective

  Notes:
  The bias lives on one Pfo x 1 sub-partition of the weights' workers, so that it is counted
  once (paper 000 sec. 4.2.1).

  Options Database Key:
. -layer_affine_bias <bool> - the flag

  Level: beginner

.seealso: `DDLAYERAFFINE`
@*/
PetscErrorCode DDLayerAffineSetBias(DDLayer l, PetscBool flg)
DD_CXX_TRY
{
  Affine *a;

  PetscFunctionBegin;
  PetscCall(AffineGet(l, &a, "DDLayerAffineSetBias"));
  a->bias = flg;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

/*@
  DDLayerAffineSetOutputWorkers - Number of workers Pfo the output features are split over (default 1)

  Logically collective

  Notes:
  With the input's partition Pn x Pfi this chooses the weights' partition Pfo x Pfi (paper 000
  sec. 4.2.1; paper 001's Pr x Pc grid with Pn batch workers sharing the weights). The layer
  needs Pfo Pn Pfi ranks: the input's Pn Pfi and (Pfo - 1) Pn Pfi more, the lowest ranks the
  input does not use.

  Options Database Key:
. -layer_affine_out_workers <n> - Pfo

  Level: intermediate

.seealso: `DDLAYERAFFINE`, `DDLayerAffineSetOutputFeatures()`
@*/
PetscErrorCode DDLayerAffineSetOutputWorkers(DDLayer l, PetscInt n)
DD_CXX_TRY
{
  Affine *a;

  PetscFunctionBegin;
  PetscCall(AffineGet(l, &a, "DDLayerAffineSetOutputWorkers"));
  PetscCheck(n >= 1, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "Output workers %" PetscInt_FMT " must be positive", n);
  a->pfo = n;
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH

static PetscErrorCode Affine_SetFromOptions(DDLayer l, PetscOptionItems *PetscOptionsObject)
{
  Affine *a = (Affine *)l->data;

  PetscFunctionBegin;
  PetscOptionsHeadBegin(PetscOptionsObject, "DDLayer affine options");
  PetscCall(PetscOptionsInt("-layer_affine_out_features", "Output features", "DDLayerAffineSetOutputFeatures", a->fo, &a->fo, NULL));
  PetscCall(PetscOptionsBool("-layer_affine_bias", "Learnable bias", "DDLayerAffineSetBias", a->bias, &a->bias, NULL));
  PetscCall(PetscOptionsInt("-layer_affine_out_workers", "Workers over the output features (Pfo)", "DDLayerAffineSetOutputWorkers", a->pfo, &a->pfo, NULL));
  PetscOptionsHeadEnd();
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Affine_Reset(DDLayer l)
{
  Affine *a = (Affine *)l->data;

  PetscFunctionBegin;
  for (DDPartition *p : {&a->Pwx, &a->Pwy, &a->Py, &a->Pr, &a->Pww, &a->Pb, &a->Pwb}) PetscCall(DDPartitionDestroy(p));
  for (DDTensor *t : {&a->xh, &a->dxh, &a->yh, &a->dyh, &a->wh, &a->bh, &a->dwh, &a->dbh, &a->dwr, &a->dbr, &a->xp, &a->dxp, &a->xin, &a->dxo, &a->yo, &a->dyo}) PetscCall(DDTensorDestroy(t));
  a->w = a->b = NULL;
  for (DDPrimitive *p : {&a->Bx, &a->Ry, &a->Bw, &a->Bb}) PetscCall(DDPrimitiveDestroy(p));
  a->worker = a->biasworker = false;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Affine + activation fusion, private to the network (src/net/net.cxx, -net_fuse): from the next
  set-up on, Forward writes act(x W^T + b) (act relu, tanh or sigmoid): the activation layer's own
  pointwise kernel in place on the output after the GEMM (and after the sum over input-feature
  workers), so that the values are bitwise the unfused ones. The activation layer that consumes the
  output then views it (src/layer/impls/activation/activation.cxx). act < 0 ends the fusion.
*/
static PetscErrorCode DDLayerAffineSetFusedActivation_Affine(DDLayer l, PetscInt act)
{
  Affine *a = (Affine *)l->data;

  PetscFunctionBegin;
  PetscCheck(act < 0 || act == DD_ACT_RELU || act == DD_ACT_TANH || act == DD_ACT_SIGMOID, PetscObjectComm((PetscObject)l), PETSC_ERR_SUP, "Only relu, tanh and sigmoid fuse with a dense layer (asked: %s)", act <= DD_ACT_PRELU ? DDActivationTypes[act] : "unknown");
  a->fuseact = act;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* the fused activation in place on the bulk of the output (the layer's backend chain's pointwise kernel, as the activation layer calls it) */
static PetscErrorCode Affine_ApplyFusedActivation(DDLayer l, Affine *a, DDTensor y)
{
  PetscFunctionBegin;
  if (a->fuseact < 0 || !y->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(DispatchType(y->dtype, [&](auto z) -> PetscErrorCode {
    using T = decltype(z);
    T        *ya = HostArray<T>(y);
    DDBackend which;
    decltype(KernelTable<T>::actfwd) fn;
    PetscFunctionBegin;
    PetscCall(LayerKernel<T>(l, &KernelTable<T>::actfwd, DD_KERNEL_POINTWISE, &fn, &which));
    KernelEvent  e(which, DD_KERNEL_POINTWISE);
    ActParams<T> p;
    ForEachBulkRun(y->layout, [&](PetscInt off, PetscInt len) { fn((DDActivationType)a->fuseact, p, ya + off, ya + off, len); });
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Affine_Destroy(DDLayer l)
{
  PetscFunctionBegin;
  PetscCall(Affine_Reset(l));
  delete (Affine *)l->data;
  l->data = NULL;
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerAffineSetFusedActivation_C", NULL));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A plain, halo-free tensor distributed as t */
static PetscErrorCode CreatePlainLike(DDTensor t, DDTensor *y)
{
  PetscFunctionBegin;
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)t), y));
  PetscCall(DDTensorSetPartition(*y, t->part));
  PetscCall(DDTensorSetShape(*y, t->order, t->shape));
  PetscCall(DDTensorSetDataType(*y, t->dtype));
  for (PetscInt k = 0; k < t->order; k++) {
    if (t->replicated[k]) PetscCall(DDTensorSetReplicated(*y, k, PETSC_TRUE));
    else {
      std::vector<PetscInt> lx(t->part->shape[k]);
      for (PetscInt p = 0; p < t->part->shape[k]; p++) lx[p] = t->ranges[k][p + 1] - t->ranges[k][p];
      PetscCall(DDTensorSetOwnershipRanges(*y, k, lx.data()));
    }
  }
  PetscCall(DDTensorSetMemType(*y, t->memtype));
  PetscCall(DDTensorSetUp(*y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  Whether the local storage is a row-major matrix (rows, features): features contiguous, and the
  rows (all dimensions but the last) one strided sequence: C order, no halo in the dimensions
  between the first and the last
*/
static bool RowMajor(const DDLayout &L)
{
  const PetscInt c = L.order - 1;
  if (L.perm[c] != c || (L.bdim >= 0 && L.bdim != c)) return false;
  for (PetscInt k = 1; k < c; k++)
    if (L.perm[k] != k || L.lo[k] || L.hi[k]) return false;
  return true;
}

/* Rows of the local matrix: the product of the local extents of dimensions first .. order - 2 */
static PetscInt Rows(const DDLayout &L, PetscInt first)
{
  PetscInt r = 1;
  for (PetscInt k = first; k < L.order - 1; k++) r *= L.n[k];
  return r;
}

/* The bulk of t as a row-major matrix: pointer to its first entry and row stride */
template <class T>
static T *MatOf(DDTensor t, PetscInt *ld)
{
  const DDLayout &L = t->layout;
  const PetscInt  r = L.order - 2, c = L.order - 1;
  *ld               = r >= 0 ? L.stride[r] : 1;
  if (r < 0 || Rows(L, 0) <= 1 || *ld < 1) *ld = PetscMax(1, L.n[c]);
  return HostArray<T>(t) + LayoutOffset(L, L.lo);
}

static PetscErrorCode Affine_SetUp(DDLayer l, PetscInt nin, DDTensor xs[])
{
  Affine     *a    = (Affine *)l->data;
  DDTensor    x    = xs[0];
  MPI_Comm    comm = PetscObjectComm((PetscObject)l);
  DDPartition Px   = x->part;
  PetscMPIInt size, rank;
  const char *prefix;
  char        sx[128];

  PetscFunctionBegin;
  PetscCall(DDLayerGetBackend_Private(l, &a->kb));
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  if (!prefix) prefix = "";
  PetscCallMPI(MPI_Comm_size(comm, &size));
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCall(DDShapeToString_Private(x->order, x->shape, sx, sizeof(sx)));
  const PetscInt d = x->order;
  PetscCheck(d >= 2, comm, PETSC_ERR_ARG_INCOMP, "An affine layer takes (N, ..., features) tensors of order at least 2; the input has order %" PetscInt_FMT " (shape %s)", d, sx);
  PetscCheck(a->fo > 0, comm, PETSC_ERR_ARG_WRONGSTATE, "Affine layer %s needs a positive number of output features (DDLayerAffineSetOutputFeatures() or -%slayer_affine_out_features); it has %" PetscInt_FMT, prefix, prefix, a->fo);
  PetscCheck(a->pfo > 0, comm, PETSC_ERR_ARG_OUTOFRANGE, "Output workers %" PetscInt_FMT " must be positive (-%slayer_affine_out_workers)", a->pfo, prefix);
  for (PetscInt k = 0; k < d; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "An affine layer's input cannot be replicated (dimension %" PetscInt_FMT ")", k);
  const PetscInt Fi = x->shape[d - 1], Fo = a->fo;
  /* the batch workers: x's workers along dimensions 0 .. d - 2 (the batch and the middle dimensions) */
  a->Pn = 1;
  for (PetscInt k = 0; k < d - 1; k++) a->Pn *= Px->shape[k];
  a->Pfi = Px->shape[d - 1];
  /* a partition shape (lead, Pn, Pt..., last) of order d + 1 (lead < 0: order d, without it) */
  auto pshape = [&](PetscInt lead, PetscInt last) {
    std::vector<PetscInt> v;
    if (lead >= 0) v.push_back(lead);
    for (PetscInt k = 0; k < d - 1; k++) v.push_back(Px->shape[k]);
    v.push_back(last);
    return v;
  };
  const PetscInt Pn = a->Pn, Pfi = a->Pfi, Pfo = a->pfo, W = Pfo * Pn * Pfi;
  PetscCheck(W <= size, comm, PETSC_ERR_ARG_SIZ, "The affine layer's work partition needs %" PetscInt_FMT " ranks (Pfo %" PetscInt_FMT " x Pn %" PetscInt_FMT " x Pfi %" PetscInt_FMT ", -%slayer_affine_out_workers) but the communicator has %d", W, Pfo, Pn, Pfi, prefix, size);
  a->bcastX  = Pfo > 1;
  a->reduceY = Pfi > 1;
  a->bcastW  = Pn > 1;
  /* ranks of the workers (fo, n, fi): fo = 0 are x's workers, the others the lowest free ranks */
  std::vector<PetscMPIInt> wr;
  PetscCall(ReplicaRanks(comm, Px, Pfo, "affine layer", wr));
  auto wrank = [&](PetscInt fo, PetscInt n, PetscInt fi) { return wr[(fo * Pn + n) * Pfi + fi]; };
  /* the output features' ownership, shared by y, W and b */
  std::vector<PetscInt> fol(Pfo), fr(Pfo + 1), nl(Pn), fil(Pfi);
  PetscCall(DDSplitOwnership_Private(Fo, Pfo, fr.data()));
  for (PetscInt p = 0; p < Pfo; p++) fol[p] = fr[p + 1] - fr[p];
  for (PetscInt p = 0; p < Pn; p++) { /* rows of batch worker p: the product of its pieces of N, T... */
    PetscInt rows = 1, q = p;
    for (PetscInt k = d - 2; k >= 0; k--) {
      const PetscInt c = q % Px->shape[k];
      q /= Px->shape[k];
      rows *= x->ranges[k][c + 1] - x->ranges[k][c];
    }
    nl[p] = rows;
  }
  for (PetscInt p = 0; p < Pfi; p++) fil[p] = x->ranges[d - 1][p + 1] - x->ranges[d - 1][p];
  /* x^ */
  if (a->bcastX) {
    PetscCall(MakePartition(comm, pshape(Pfo, Pfi), wr, &a->Pwx));
    PetscCall(DDTensorCreateBroadcast(x, a->Pwx, &a->xh));
    PetscCall(DDTensorSetFormat(a->xh, DD_FORMAT_PLAIN));
    PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, x, a->xh, &a->Bx));
  } else if (!RowMajor(x->layout)) PetscCall(CreatePlainLike(x, &a->xp));
  /* y on Py = Pn x Pfo */
  {
    DDTensor                 y;
    std::vector<PetscMPIInt> r;
    for (PetscInt n = 0; n < Pn; n++)
      for (PetscInt fo = 0; fo < Pfo; fo++) r.push_back(wrank(fo, n, 0));
    PetscCall(MakePartition(comm, pshape(-1, Pfo), r, &a->Py));
    PetscInt shape[DD_MAX_DIM];
    for (PetscInt k = 0; k < d - 1; k++) shape[k] = x->shape[k];
    shape[d - 1] = Fo;
    PetscCall(DDTensorCreate(comm, &y));
    PetscCall(DDTensorSetPartition(y, a->Py));
    PetscCall(DDTensorSetShape(y, d, shape));
    PetscCall(DDTensorSetDataType(y, x->dtype));
    for (PetscInt k = 0; k < d - 1; k++) { /* x's ownership of N, T... */
      std::vector<PetscInt> lx(Px->shape[k]);
      for (PetscInt p = 0; p < Px->shape[k]; p++) lx[p] = x->ranges[k][p + 1] - x->ranges[k][p];
      PetscCall(DDTensorSetOwnershipRanges(y, k, lx.data()));
    }
    PetscCall(DDTensorSetOwnershipRanges(y, d - 1, fol.data()));
    PetscCall(DDTensorSetMemType(y, x->memtype));
    PetscCall(DDTensorSetUp(y));
    PetscCall(DDLayerSetOutput_Private(l, y));
  }
  if (a->reduceY) {
    std::vector<PetscMPIInt> r;
    for (PetscInt fi = 0; fi < Pfi; fi++)
      for (PetscInt n = 0; n < Pn; n++)
        for (PetscInt fo = 0; fo < Pfo; fo++) r.push_back(wrank(fo, n, fi));
    PetscCall(MakePartition(comm, pshape(Pfi, Pfo), r, &a->Pwy));
    PetscCall(DDTensorCreateBroadcast(l->output, a->Pwy, &a->yh));
    PetscCall(MakePrimitive(comm, DDPRIMITIVESUMREDUCE, a->yh, l->output, &a->Ry));
  }
  /* W (Fo, Fi) on Pr = Pfo x Pfi, b (Fo) on Pb = Pfo; broadcast over the batch workers */
  {
    std::vector<PetscMPIInt> r;
    for (PetscInt fo = 0; fo < Pfo; fo++)
      for (PetscInt fi = 0; fi < Pfi; fi++) r.push_back(wrank(fo, 0, fi));
    PetscCall(MakePartition(comm, {Pfo, Pfi}, r, &a->Pr));
    PetscInt shape[2] = {Fo, Fi};
    PetscCall(DDTensorCreate(comm, &a->w));
    PetscCall(DDTensorSetPartition(a->w, a->Pr));
    PetscCall(DDTensorSetShape(a->w, 2, shape));
    PetscCall(DDTensorSetDataType(a->w, x->dtype));
    PetscCall(DDTensorSetOwnershipRanges(a->w, 0, fol.data()));
    PetscCall(DDTensorSetOwnershipRanges(a->w, 1, fil.data()));
    PetscCall(DDTensorSetMemType(a->w, x->memtype));
    PetscCall(DDTensorSetUp(a->w));
    PetscCall(DDLayerAddParameter_Private(l, "weight", a->w));
    if (a->bcastW) {
      std::vector<PetscMPIInt> rw;
      for (PetscInt n = 0; n < Pn; n++)
        for (PetscInt fo = 0; fo < Pfo; fo++)
          for (PetscInt fi = 0; fi < Pfi; fi++) rw.push_back(wrank(fo, n, fi));
      PetscCall(MakePartition(comm, {Pn, Pfo, Pfi}, rw, &a->Pww));
      PetscCall(DDTensorCreateBroadcast(a->w, a->Pww, &a->wh));
      PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, a->w, a->wh, &a->Bw));
      PetscCall(DDLayerAddReplica_Private(l, a->w, a->wh, a->Bw)); /* the network may keep W^ (DDNetSetWeightMode()) */
    } else {
      PetscCall(PetscObjectReference((PetscObject)a->w));
      a->wh = a->w;
    }
    if (a->bias) {
      std::vector<PetscMPIInt> rb;
      for (PetscInt fo = 0; fo < Pfo; fo++) rb.push_back(wrank(fo, 0, 0));
      PetscCall(MakePartition(comm, {Pfo}, rb, &a->Pb));
      PetscCall(DDTensorCreate(comm, &a->b));
      PetscCall(DDTensorSetPartition(a->b, a->Pb));
      PetscCall(DDTensorSetShape(a->b, 1, &Fo));
      PetscCall(DDTensorSetDataType(a->b, x->dtype));
      PetscCall(DDTensorSetOwnershipRanges(a->b, 0, fol.data()));
      PetscCall(DDTensorSetMemType(a->b, x->memtype));
      PetscCall(DDTensorSetUp(a->b));
      PetscCall(DDLayerAddParameter_Private(l, "bias", a->b));
      if (a->bcastW) {
        std::vector<PetscMPIInt> rbw;
        for (PetscInt n = 0; n < Pn; n++)
          for (PetscInt fo = 0; fo < Pfo; fo++) rbw.push_back(wrank(fo, n, 0));
        PetscCall(MakePartition(comm, {Pn, Pfo}, rbw, &a->Pwb));
        PetscCall(DDTensorCreateBroadcast(a->b, a->Pwb, &a->bh));
        PetscCall(MakePrimitive(comm, DDPRIMITIVEBROADCAST, a->b, a->bh, &a->Bb));
        PetscCall(DDLayerAddReplica_Private(l, a->b, a->bh, a->Bb));
      } else {
        PetscCall(PetscObjectReference((PetscObject)a->b));
        a->bh = a->b;
      }
    }
  }
  /* this rank's worker and its local sizes */
  a->worker     = false;
  a->biasworker = false;
  a->g          = AffineGeom();
  for (PetscInt i = 0; i < W; i++)
    if (wr[i] == rank) {
      const PetscInt fo = i / (Pn * Pfi), n = (i / Pfi) % Pn, fi = i % Pfi;
      a->worker     = true;
      a->biasworker = a->bias && fi == 0;
      a->g.N        = nl[n];
      a->g.Fi       = fil[fi];
      a->g.Fo       = fol[fo];
    }
  if (a->worker) { /* the tensors' pieces must be the worker's blocks */
    const DDLayout &Lw = a->wh->layout, &Ly = (a->reduceY ? a->yh : l->output)->layout;
    PetscCheck(Lw.n[Lw.order - 2] == a->g.Fo && Lw.n[Lw.order - 1] == a->g.Fi, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Weight block mismatch");
    PetscCheck(Rows(Ly, 0) == a->g.N && Ly.n[Ly.order - 1] == a->g.Fo, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Output block mismatch");
    if (a->bcastX) PetscCheck(Rows(a->xh->layout, 0) == a->g.N && a->xh->layout.n[d] == a->g.Fi, PETSC_COMM_SELF, PETSC_ERR_PLIB, "Input block mismatch");
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Affine_InitParams(DDLayer l, PetscInt64 seed)
{
  Affine        *a      = (Affine *)l->data;
  const PetscInt fan_in = a->w->shape[1], fan_out = a->w->shape[0];
  /* torch.nn.Linear.reset_parameters: kaiming_uniform(a = sqrt(5)) gives bound 1/sqrt(fan_in), the bias the same */
  const PetscReal bound = 1.0 / PetscSqrtReal((PetscReal)fan_in);

  PetscFunctionBegin;
  PetscCall(DDTensorInitialize_Private(a->w, l->inittype, l->initscale, 2 * seed + 1, fan_in, fan_out, bound));
  if (a->b) PetscCall(DDTensorInitialize_Private(a->b, l->inittype == DD_INIT_DEFAULT ? DD_INIT_DEFAULT : DD_INIT_ZEROS, l->initscale, 2 * seed + 2, fan_in, fan_out, bound));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Affine_Forward(DDLayer l, PetscInt nin, DDTensor xs[], DDTensor y)
{
  Affine  *a = (Affine *)l->data;
  DDTensor x = xs[0], xu, yt;

  PetscFunctionBegin;
  /* x^ */
  if (a->bcastX) {
    DDTensor xin;
    PetscCall(ConformLayout(x, l->setupin[0], &a->xin, &xin, true));
    PetscCall(DDPrimitiveApply(a->Bx, xin, a->xh));
    xu = a->xh;
  } else if (RowMajor(x->layout)) xu = x;
  else {
    if (!a->xp) PetscCall(CreatePlainLike(x, &a->xp));
    PetscCall(DDTensorCopy(x, a->xp));
    xu = a->xp;
  }
  /* W^, b^ */
  if (a->bcastW) { /* unless the network keeps the replicas (DDNetSetWeightMode()), refreshed when W changed */
    PetscBool kept;
    PetscCall(DDLayerReplicaForward_Private(l, a->wh, &kept));
    if (!kept) PetscCall(DDPrimitiveApply(a->Bw, a->w, a->wh));
    if (a->bias) {
      PetscCall(DDLayerReplicaForward_Private(l, a->bh, &kept));
      if (!kept) PetscCall(DDPrimitiveApply(a->Bb, a->b, a->bh));
    }
  }
  /* y^ = x^ W^T (+ b^), then y = R y^ */
  yt = a->reduceY ? a->yh : y;
  PetscCheck(RowMajor(yt->layout), PETSC_COMM_SELF, PETSC_ERR_PLIB, "The affine output must be row-major");
  if (a->worker) {
    PetscCall(DispatchType(x->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscInt ldx, ldw, ldy, ldb;
      const T *xp = MatOf<const T>(xu, &ldx), *wp = MatOf<const T>(a->wh, &ldw);
      T       *yp = MatOf<T>(yt, &ldy);
      const T *bp = a->biasworker ? MatOf<const T>(a->bh, &ldb) : nullptr;
      DDBackend which;
      decltype(KernelTable<T>::affinefwd) fn;
      PetscCall(DDBackendFind<T>(a->kb, &KernelTable<T>::affinefwd, DD_KERNEL_GEMM, &fn, &which));
      KernelEvent e(which, DD_KERNEL_GEMM);
      fn(a->g, xp, ldx, wp, ldw, bp, yp, ldy);
      return PETSC_SUCCESS;
    }));
  }
  if (a->reduceY) {
    DDTensor yo;
    PetscCall(ConformLayout(y, l->output, &a->yo, &yo, false));
    PetscCall(DDPrimitiveApply(a->Ry, a->yh, yo));
    PetscCall(Affine_ApplyFusedActivation(l, a, yo));
    if (yo != y) PetscCall(DDTensorCopy(yo, y));
  } else PetscCall(Affine_ApplyFusedActivation(l, a, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Affine_Backward(DDLayer l, DDTensor dy, PetscInt nin, DDTensor dxs[])
{
  Affine  *a  = (Affine *)l->data;
  DDTensor dx = dxs ? dxs[0] : NULL, x = l->saved[0], xu, dyt;

  PetscFunctionBegin;
  /* x^ as the forward left it */
  if (a->bcastX) xu = a->xh;
  else xu = RowMajor(x->layout) ? x : a->xp;
  /* dy^ = R^* dy (a broadcast over fi) */
  {
    DDTensor dyo;
    PetscCall(ConformLayout(dy, l->output, &a->dyo, &dyo, true));
    if (a->reduceY) {
      if (!a->dyh) PetscCall(DDTensorDuplicate(a->yh, &a->dyh));
      PetscCall(DDPrimitiveApplyAdjoint(a->Ry, dyo, a->dyh));
      dyt = a->dyh;
    } else dyt = dyo;
  }
  /* parameter gradients: dW^ = dy^T x^, db^ = sum_n dy^ locally, then B^* (sum over the batch workers), added */
  DDTensor dwt = l->grads[0], dbt = a->bias ? l->grads[1] : NULL;
  if (a->bcastW) {
    if (!a->dwh) PetscCall(DDTensorDuplicate(a->wh, &a->dwh));
    PetscCall(DDTensorZeroEntries(a->dwh));
    dwt = a->dwh;
    if (a->bias) {
      if (!a->dbh) PetscCall(DDTensorDuplicate(a->bh, &a->dbh));
      PetscCall(DDTensorZeroEntries(a->dbh));
      dbt = a->dbh;
    }
  }
  if (a->worker) {
    PetscCall(DispatchType(dyt->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscInt ldx, ldy, ldw, ldb;
      const T *xp = MatOf<const T>(xu, &ldx), *yp = MatOf<const T>(dyt, &ldy);
      T       *wp = MatOf<T>(dwt, &ldw);
      T       *bp = a->biasworker ? MatOf<T>(dbt, &ldb) : nullptr;
      DDBackend which;
      decltype(KernelTable<T>::affinebwdweights) fn;
      PetscCall(DDBackendFind<T>(a->kb, &KernelTable<T>::affinebwdweights, DD_KERNEL_GEMM, &fn, &which));
      KernelEvent e(which, DD_KERNEL_GEMM);
      fn(a->g, xp, ldx, yp, ldy, wp, ldw, bp);
      return PETSC_SUCCESS;
    }));
  }
  if (a->bcastW) { /* kept replicas: dW^, db^ go to the network's bucket, summed once per backward */
    PetscBool kept;
    PetscCall(DDLayerReplicaBackward_Private(l, a->wh, NULL, a->dwh, &kept));
    if (!kept) {
      if (!a->dwr) PetscCall(DDTensorDuplicate(a->w, &a->dwr));
      PetscCall(DDPrimitiveApplyAdjoint(a->Bw, a->dwh, a->dwr));
      PetscCall(DDTensorAXPY(l->grads[0], 1.0, a->dwr));
    }
    if (a->bias) {
      PetscCall(DDLayerReplicaBackward_Private(l, a->bh, NULL, a->dbh, &kept));
      if (!kept) {
        if (!a->dbr) PetscCall(DDTensorDuplicate(a->b, &a->dbr));
        PetscCall(DDPrimitiveApplyAdjoint(a->Bb, a->dbh, a->dbr));
        PetscCall(DDTensorAXPY(l->grads[1], 1.0, a->dbr));
      }
    }
  } else {
    PetscCall(DDTensorStateIncrease_Private(l->grads[0]));
    if (a->bias) PetscCall(DDTensorStateIncrease_Private(l->grads[1]));
  }
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  /* dx^ = dy^ W^, then dx = B^* dx^ (a sum over fo) */
  DDTensor dxt;
  if (a->bcastX) {
    if (!a->dxh) PetscCall(DDTensorDuplicate(a->xh, &a->dxh));
    dxt = a->dxh;
  } else if (RowMajor(dx->layout)) dxt = dx;
  else {
    if (!a->dxp) PetscCall(CreatePlainLike(dx, &a->dxp));
    dxt = a->dxp;
  }
  if (a->worker) {
    PetscCall(DispatchType(dyt->dtype, [&](auto z) -> PetscErrorCode {
      using T = decltype(z);
      PetscInt ldx, ldy, ldw;
      const T *yp = MatOf<T>(dyt, &ldy), *wp = MatOf<T>(a->wh, &ldw);
      T       *xp = MatOf<T>(dxt, &ldx);
      DDBackend which;
      decltype(KernelTable<T>::affinebwddata) fn;
      PetscCall(DDBackendFind<T>(a->kb, &KernelTable<T>::affinebwddata, DD_KERNEL_GEMM, &fn, &which));
      KernelEvent e(which, DD_KERNEL_GEMM);
      fn(a->g, yp, ldy, wp, ldw, xp, ldx);
      return PETSC_SUCCESS;
    }));
  }
  if (a->bcastX) {
    DDTensor dxo;
    PetscCall(ConformLayout(dx, l->setupin[0], &a->dxo, &dxo, false));
    PetscCall(DDPrimitiveApplyAdjoint(a->Bx, a->dxh, dxo));
    if (dxo != dx) PetscCall(DDTensorCopy(dxo, dx));
  } else if (dxt != dx) PetscCall(DDTensorCopy(dxt, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

static PetscErrorCode Affine_View(DDLayer l, PetscViewer viewer)
{
  Affine *a = (Affine *)l->data;

  PetscFunctionBegin;
  PetscCall(PetscViewerASCIIPrintf(viewer, "out features %" PetscInt_FMT ", bias %s, output workers (Pfo) %" PetscInt_FMT "\n", a->fo, a->bias ? "yes" : "no", a->pfo));
  if (l->setupcalled) PetscCall(PetscViewerASCIIPrintf(viewer, "weights (%" PetscInt_FMT ", %" PetscInt_FMT ") on Pfo %" PetscInt_FMT " x Pfi %" PetscInt_FMT ", shared by %" PetscInt_FMT " batch workers; GEMM from backend %s\n", a->w->shape[0], a->w->shape[1], a->pfo, a->Pfi, a->Pn, a->kb->name));
  if (a->fuseact >= 0) PetscCall(PetscViewerASCIIPrintf(viewer, "fused with the next activation (-net_fuse): the output holds %s(x W^T + b), applied after the GEMM\n", DDActivationTypes[a->fuseact]));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*MC
  DDLAYERAFFINE - "affine": distributed dense layer y = x W^T + b (paper 000 sec. 4.2.1, Fig. 5)

  Input (N, Fi) or (N, T..., Fi), output (N, Fo) or (N, T..., Fo): like torch.nn.Linear, the
  layer acts on the last dimension, every leading index being a row. Weights W (Fo, Fi) and bias
  b (Fo) as torch.nn.Linear stores them, initialized as PyTorch does (Kaiming-uniform with
  a = sqrt(5): U(-1/sqrt(Fi), 1/sqrt(Fi)) for W and b), identically on any partition. To mix
  all features of a (N, C, H, W) tensor instead, flatten it first (`DDLAYERFLATTEN`).

  Envelope: the input may be split along any of its dimensions, with unbalanced or empty
  pieces; the middle dimensions T... of an order > 2 input act as extra batch dimensions (rows
  are independent), so splitting them costs only more copies of the weights. A replicated
  input is an error.

  Distribution: the input's partition Pn x Pfi (Pn x Pt... x Pfi for order > 2) and -layer_affine_out_workers Pfo give the
  weights' partition Pfo x Pfi, the bias on its Pfo x 1 column (counted once), and the output
  on Pn x Pfo (Pn x Pt... x Pfo, the input's ownership of N, T...). Forward broadcasts x over the Pfo output workers, multiplies by the local
  weight block, and sum-reduces the partial products over the Pfi input workers; the batch
  workers share the weights through a broadcast, whose adjoint sums their gradients (paper 001's
  Pr x Pc grid). Backward applies the adjoints of the same primitives.

  Kernels: GEMM for forward, backward-data and backward-weights from the layer's backend chain
  (`DDLayerSetBackend()`): /cpu/dnnl gives oneDNN's sgemm in float32, whose kernels follow the CPU's
  features; /cpu/blas OpenBLAS sgemm/dgemm; /cpu/ref the reference loops.

  Fused activation: in a network (`DDNetSetUp()`, -net_fuse, default on) a dense layer whose only
  consumer is a relu, tanh or sigmoid layer laid out alike writes act(x W^T + b) into its output
  (the activation layer's pointwise kernel in place after the GEMM and any sum over input-feature
  workers: bitwise the unfused values); the activation layer's output views it.
  `DDNetGetLayerOutput()` of the dense layer then gives act(x W^T + b).

  Options Database Keys:
+ -layer_affine_out_features <n> - output features
. -layer_affine_bias <bool> - bias
. -layer_affine_out_workers <n> - Pfo
. -dd_backend <name> - the backend of the kernels (`DDLayerSetBackend()`)

  Level: beginner

.seealso: `DDLayerAffineSetOutputFeatures()`, `DDLayerAffineSetOutputWorkers()`, `DDLayerAffineSetBias()`, `DDLAYERFLATTEN`, `DDLAYERCONV`
M*/
PETSC_EXTERN PetscErrorCode DDLayerCreate_Affine(DDLayer l)
{
  PetscFunctionBegin;
  l->data                = new Affine;
  l->ops->setfromoptions = Affine_SetFromOptions;
  l->ops->setup          = Affine_SetUp;
  l->ops->forward        = Affine_Forward;
  l->ops->backward       = Affine_Backward;
  l->ops->initparams     = Affine_InitParams;
  l->device              = PETSC_TRUE; /* on device tensors: cuBLAS GEMMs of /gpu/cuda, the collectives on the device */
  l->ops->view           = Affine_View;
  l->ops->reset          = Affine_Reset;
  l->ops->destroy        = Affine_Destroy;
  PetscCall(PetscObjectComposeFunction((PetscObject)l, "DDLayerAffineSetFusedActivation_C", DDLayerAffineSetFusedActivation_Affine));
  PetscFunctionReturn(PETSC_SUCCESS);
}

