#include <layer/impls/common/layerutil.hpp>
#include <ddnn/private/ddbackendimpl.h>

namespace ddnn
{
PetscErrorCode MakePrimitive(MPI_Comm comm, DDPrimitiveType type, DDTensor x, DDTensor y, DDPrimitive *p)
{
  PetscFunctionBegin;
  PetscCall(DDPrimitiveCreate(comm, p));
  PetscCall(DDPrimitiveSetType(*p, type));
  PetscCall(DDPrimitiveSetUp(*p, x, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode LayerHaloCreate(DDLayer l, DDPrimitive *H)
{
  const char *prefix;

  PetscFunctionBegin;
  PetscCall(DDPrimitiveCreate(PetscObjectComm((PetscObject)l), H));
  PetscCall(DDPrimitiveSetType(*H, DDPRIMITIVEHALO));
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
  PetscCall(DDPrimitiveSetOptionsPrefix(*H, prefix));
  PetscCall(DDPrimitiveSetFromOptions(*H));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode MakePartition(MPI_Comm comm, const std::vector<PetscInt> &shape, const std::vector<PetscMPIInt> &ranks, DDPartition *p)
{
  PetscFunctionBegin;
  PetscCall(DDPartitionCreateCartesian(comm, (PetscInt)shape.size(), shape.data(), (PetscInt)ranks.size(), ranks.data(), p));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ConformLayout(DDTensor t, DDTensor layout, DDTensor *cache, DDTensor *use, bool copy)
{
  PetscFunctionBegin;
  if (t->layouthash == layout->layouthash) {
    *use = t;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (*cache && (*cache)->layouthash != layout->layouthash) PetscCall(DDTensorDestroy(cache));
  if (!*cache) PetscCall(DDTensorDuplicate(layout, cache));
  if (copy) PetscCall(DDTensorCopy(t, *cache));
  *use = *cache;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ConformHalo(DDTensor t, PetscInt64 hash, const PetscInt lo[], const PetscInt hi[], DDTensor *cache, DDTensor *use, bool copy)
{
  PetscFunctionBegin;
  if (t->layouthash == hash) {
    *use = t;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (!*cache) {
    PetscCall(DDTensorDuplicate(t, cache));
    PetscCall(DDTensorSetHalo(*cache, lo, hi));
    PetscCheck((*cache)->layouthash == hash, PETSC_COMM_SELF, PETSC_ERR_PLIB, "The conforming copy does not have the set-up layout");
  }
  if (copy) PetscCall(DDTensorCopy(t, *cache));
  *use = *cache;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode WindowHaloSetUp(DDLayer l, DDTensor x, PetscInt D, const PetscInt a[3], const PetscInt b[3], PetscBool needhalo, DDPrimitive *H, PetscInt64 *hash, PetscInt lo[], PetscInt hi[])
{
  MPI_Comm  comm = PetscObjectComm((PetscObject)x);
  PetscBool any;

  PetscFunctionBegin;
  PetscCall(DDAnyRank_Private(comm, needhalo, &any));
  if (any) {
    PetscCall(LayerHaloCreate(l, H));
    if (x->active)
      for (PetscInt j = 0; j < D; j++) PetscCall(DDPrimitiveHaloSetWindow(*H, 2 + j, a[j + 3 - D], b[j + 3 - D]));
    PetscCall(DDPrimitiveSetUp(*H, x, NULL));
  }
  *hash = x->layouthash;
  for (PetscInt q = 0; q < x->order; q++) {
    lo[q] = x->lo[q];
    hi[q] = x->hi[q];
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode SpatialOutputSetUp(DDLayer l, DDTensor x, PetscInt D, const PetscInt out[3], const std::vector<std::vector<PetscInt>> &outlx)
{
  DDTensor              y;
  std::vector<PetscInt> shape = {x->shape[0], x->shape[1]};

  PetscFunctionBegin;
  for (PetscInt j = 3 - D; j < 3; j++) shape.push_back(out[j]);
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)l), &y));
  PetscCall(DDTensorSetPartition(y, x->part));
  PetscCall(DDTensorSetShape(y, 2 + D, shape.data()));
  PetscCall(DDTensorSetDataType(y, x->dtype));
  PetscCall(DDTensorSetEmptyPiecesAllowed(y, PETSC_TRUE));
  for (PetscInt q = 0; q < 2 + D; q++) {
    if (x->replicated[q]) {
      PetscCall(DDTensorSetReplicated(y, q, PETSC_TRUE));
      continue;
    }
    std::vector<PetscInt> lx;
    if (q < 2)
      for (PetscInt r = 0; r < x->part->shape[q]; r++) lx.push_back(x->ranges[q][r + 1] - x->ranges[q][r]);
    else lx = outlx[q - 2];
    PetscCall(DDTensorSetOwnershipRanges(y, q, lx.data()));
  }
  PetscCall(DDTensorSetBlockSize(y, x->bs));
  PetscCall(DDTensorSetBlockDimension_Private(y, x->blockdim));
  PetscCall(DDTensorSetFormat(y, x->format));
  PetscCall(DDTensorSetMemType(y, x->memtype));
  PetscCall(DDTensorSetUp(y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ReplicaRanks(MPI_Comm comm, DDPartition px, PetscInt copies, const char what[], std::vector<PetscMPIInt> &ranks)
{
  PetscMPIInt size;

  PetscFunctionBegin;
  PetscCallMPI(MPI_Comm_size(comm, &size));
  const PetscInt W = copies * px->size;
  PetscCheck(W <= size, comm, PETSC_ERR_ARG_SIZ, "The %s's work partition needs %" PetscInt_FMT " ranks (%" PetscInt_FMT " copies of the input's %" PetscInt_FMT " workers) but the communicator has %d", what, W, copies, px->size, size);
  std::vector<char> used(size, 0);
  ranks.assign((size_t)W, 0);
  for (PetscInt i = 0; i < px->size; i++) used[px->ranks[i]] = 1;
  PetscMPIInt next = 0;
  for (PetscInt r = 0; r < copies; r++)
    for (PetscInt i = 0; i < px->size; i++) {
      if (r == 0) ranks[i] = px->ranks[i];
      else {
        while (used[next]) next++;
        used[next]                   = 1;
        ranks[r * px->size + i] = next;
      }
    }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* A halo-free tensor distributed like x, in x's format (the output of a pointwise or normalization layer) */
PetscErrorCode CreateLike(DDTensor x, DDTensor *y)
{
  DDTensor t;

  PetscFunctionBegin;
  PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)x), &t));
  PetscCall(DDTensorSetPartition(t, x->part));
  PetscCall(DDTensorSetShape(t, x->order, x->shape));
  PetscCall(DDTensorSetDataType(t, x->dtype));
  PetscCall(DDTensorSetEmptyPiecesAllowed(t, PETSC_TRUE));
  for (PetscInt k = 0; k < x->order; k++) {
    if (x->replicated[k]) PetscCall(DDTensorSetReplicated(t, k, PETSC_TRUE));
    else {
      std::vector<PetscInt> lx(x->part->shape[k]);
      for (PetscInt p = 0; p < x->part->shape[k]; p++) lx[p] = x->ranges[k][p + 1] - x->ranges[k][p];
      PetscCall(DDTensorSetOwnershipRanges(t, k, lx.data()));
    }
  }
  PetscCall(DDTensorSetBlockSize(t, x->bs));
  PetscCall(DDTensorSetBlockDimension_Private(t, x->blockdim));
  PetscCall(DDTensorSetFormat(t, x->format));
  PetscCall(DDTensorSetMemType(t, x->memtype));
  PetscCall(DDTensorSetUp(t));
  *y = t;
  PetscFunctionReturn(PETSC_SUCCESS);
}
PetscErrorCode ViewLayer::SetPartition(DDPartition p)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectReference((PetscObject)p));
  PetscCall(DDPartitionDestroy(&part));
  part = p;
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ViewLayer::SetUp(DDLayer l, DDTensor x, PetscInt o, const PetscInt shape[], const char what[])
{
  MPI_Comm   comm      = PetscObjectComm((PetscObject)l);
  const bool keepbatch = shape[0] == x->shape[0];
  DDTensor   y;

  PetscFunctionBegin;
  for (PetscInt k = 0; k < x->order; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "A %s layer moves split tensors; the input is replicated along dimension %" PetscInt_FMT, what, k);
  /* the output partition */
  if (part) {
    PetscMPIInt cmp;
    PetscCallMPI(MPI_Comm_compare(comm, PetscObjectComm((PetscObject)part), &cmp));
    PetscCheck(cmp == MPI_IDENT || cmp == MPI_CONGRUENT, comm, PETSC_ERR_ARG_NOTSAMECOMM, "The %s layer's output partition lives on another communicator than the layer", what);
    PetscCall(PetscObjectReference((PetscObject)part));
    Py = part;
  } else {
    const PetscInt           Pn = keepbatch ? x->part->shape[0] : 1, rest = x->part->size / x->part->shape[0];
    std::vector<PetscInt>    ps((size_t)o, 1);
    std::vector<PetscMPIInt> ranks((size_t)Pn);
    ps[0] = Pn;
    for (PetscInt n = 0; n < Pn; n++) ranks[n] = x->part->ranks[n * rest];
    PetscCall(MakePartition(comm, ps, ranks, &Py));
  }
  /* the output: the input's batch ownership when the batch extent and split agree, else balanced */
  PetscCall(DDTensorCreate(comm, &y));
  PetscCall(DDTensorSetPartition(y, Py));
  PetscCall(DDTensorSetShape(y, o, shape));
  PetscCall(DDTensorSetDataType(y, x->dtype));
  PetscCall(DDTensorSetEmptyPiecesAllowed(y, PETSC_TRUE));
  if (keepbatch && Py->shape[0] == x->part->shape[0]) {
    std::vector<PetscInt> nl((size_t)Py->shape[0]);
    for (PetscInt p = 0; p < Py->shape[0]; p++) nl[p] = x->ranges[0][p + 1] - x->ranges[0][p];
    PetscCall(DDTensorSetOwnershipRanges(y, 0, nl.data()));
  }
  PetscCall(DDTensorSetMemType(y, x->memtype));
  PetscCall(DDTensorSetUp(y));
  PetscCall(DDLayerSetOutput_Private(l, y));
  /* the index map: y's local entries in C order copy x's entries of the same global C-order index */
  {
    const DDLayout       &L    = y->layout;
    const PetscInt        nloc = L.bulksize;
    std::vector<PetscInt> map((size_t)nloc);
    PetscInt              j[DD_MAX_DIM] = {0};
    for (PetscInt i = 0; i < nloc; i++) {
      PetscInt gi = 0;
      for (PetscInt k = 0; k < o; k++) gi = gi * shape[k] + L.start[k] + j[k];
      map[i] = gi;
      for (PetscInt k = o - 1; k >= 0; k--) {
        if (++j[k] < L.n[k]) break;
        j[k] = 0;
      }
    }
    PetscCall(DDPrimitiveCreate(comm, &S));
    PetscCall(DDPrimitiveSetType(S, DDPRIMITIVESCATTER));
    PetscCall(DDPrimitiveScatterSetIndexMap(S, nloc, map.data()));
    PetscCall(DDPrimitiveSetUp(S, x, y));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ViewLayer::Forward(DDLayer l, DDTensor x, DDTensor y)
{
  DDTensor xu, yu;

  PetscFunctionBegin;
  PetscCall(ConformLayout(x, l->setupin[0], &xin, &xu, true));
  PetscCall(ConformLayout(y, l->output, &yo, &yu, false));
  PetscCall(DDPrimitiveApply(S, xu, yu));
  if (yu != y) PetscCall(DDTensorCopy(yu, y));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ViewLayer::Backward(DDLayer l, DDTensor dy, DDTensor dx)
{
  DDTensor dyu, dxu;

  PetscFunctionBegin;
  if (!dx) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(ConformLayout(dy, l->output, &dyo, &dyu, true));
  PetscCall(ConformLayout(dx, l->setupin[0], &dxo, &dxu, false));
  PetscCall(DDPrimitiveApplyAdjoint(S, dyu, dxu));
  if (dxu != dx) PetscCall(DDTensorCopy(dxu, dx));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ViewLayer::Reset()
{
  PetscFunctionBegin;
  PetscCall(DDPartitionDestroy(&Py));
  PetscCall(DDPrimitiveDestroy(&S));
  for (DDTensor *t : {&xin, &yo, &dyo, &dxo}) PetscCall(DDTensorDestroy(t));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode ViewLayer::Destroy()
{
  PetscFunctionBegin;
  PetscCall(Reset());
  PetscCall(DDPartitionDestroy(&part));
  PetscFunctionReturn(PETSC_SUCCESS);
}

std::string KernelRunLayoutKey(DDTensor t)
{
  std::string     k;
  const DDLayout &L = t->layout;
  for (PetscInt j = 0; j < L.order; j++) k += (j ? "x" : "") + std::to_string(L.n[j]) + (L.lo[j] || L.hi[j] ? "(" + std::to_string(L.lo[j]) + "," + std::to_string(L.hi[j]) + ")" : "");
  k += " p";
  for (PetscInt j = 0; j < L.order; j++) k += std::to_string(L.perm[j]);
  if (L.bdim >= 0) k += " b" + std::to_string(L.bdim) + ":" + std::to_string(L.bs);
  return k;
}

PetscErrorCode KernelRunLocalCopy(DDTensor t, DDTensor *c, bool *same)
{
  const DDLayout &L = t->layout;
  DDPartition     part;
  PetscInt        ones[DD_MAX_DIM], n[DD_MAX_DIM];
  void           *a;

  PetscFunctionBegin;
  for (PetscInt k = 0; k < L.order; k++) ones[k] = 1, n[k] = L.n[k];
  PetscCall(DDPartitionCreateCartesian(PETSC_COMM_SELF, L.order, ones, PETSC_DECIDE, NULL, &part));
  PetscCall(DDTensorCreateFromPartition(part, t->dtype, L.order, n, c));
  PetscCall(DDPartitionDestroy(&part));
  if (L.bdim >= 0) PetscCall(DDTensorSetBlockSize(*c, L.bs));
  PetscCall(DDTensorSetFormat(*c, t->format));
  PetscCall(DDTensorSetHalo(*c, L.lo, L.hi));
  const DDLayout &M = (*c)->layout;
  *same             = M.order == L.order && M.size == L.size && M.bdim == L.bdim && (L.bdim < 0 || M.bs == L.bs);
  for (PetscInt k = 0; *same && k < L.order; k++) *same = M.n[k] == L.n[k] && M.lo[k] == L.lo[k] && M.alloc[k] == L.alloc[k] && M.stride[k] == L.stride[k] && M.perm[k] == L.perm[k];
  PetscCall(DDTensorGetArray(*c, &a));
  PetscCall(DispatchType(t->dtype, [&](auto z) -> PetscErrorCode {
    using T     = decltype(z);
    T       *v  = (T *)a;
    uint64_t st = 0x9e3779b97f4a7c15ull;
    PetscFunctionBegin;
    for (PetscInt i = 0; i < M.size; i++) {
      st   = st * 6364136223846793005ull + 1442695040888963407ull;
      v[i] = (T)((double)(st >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }));
  PetscCall(DDTensorRestoreArray(*c, &a));
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode KernelRunBegin(DDLayer l, DDLayerType type, LayerKernelRun *run)
{
  PetscBool is = PETSC_FALSE;

  PetscFunctionBegin;
  run->key.clear();
  run->untimed = false;
  run->tensors.clear();
  for (auto &p : run->pass) p = nullptr;
  PetscCall(PetscObjectTypeCompare((PetscObject)l, type, &is));
  PetscCheck(is && l->setupcalled, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "A kernel run needs a set-up %s layer", type);
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode KernelRunCopies(LayerKernelRun *run, std::initializer_list<std::pair<DDTensor, DDTensor *>> pairs)
{
  bool same = true, s1;

  PetscFunctionBegin;
  for (auto pr : pairs) {
    if (!pr.first) continue;
    PetscCall(KernelRunLocalCopy(pr.first, pr.second, &s1));
    run->tensors.push_back(*pr.second);
    same = same && s1;
  }
  if (!same) { /* a local layout this rank cannot reproduce alone: not timed (the caller keeps the fit) */
    PetscCall(LayerKernelRunDestroy(run));
    run->untimed = true;
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

PetscErrorCode LayerKernelRunDestroy(LayerKernelRun *run)
{
  PetscFunctionBegin;
  for (auto &p : run->pass) p = nullptr;
  for (DDTensor &t : run->tensors) PetscCall(DDTensorDestroy(&t));
  run->tensors.clear();
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
