/*
  Pieces shared by the normalization layers (batchnorm, groupnorm, layernorm; paper 000 sec. 4.2.2).

  Per-channel parameters (affine weight and bias, running statistics) live on a partition Pc
  that follows the input's channel split, on the input's workers with coordinate 0 in every
  other dimension (so they are counted once). Forward broadcasts them to every worker
  (Pc -> Pw = Pother x Pc, aligned at the trailing dimension); the adjoint of that broadcast,
  a sum-reduction, collects the workers' partial gradients onto Pc (paper 000 sec. 2.2.4).

  Statistics are all-sum-reduced (DDPRIMITIVEALLSUMREDUCE) as float64 tensors of shape
  (1 or N, k C / g, 1, ..., 1) on the input's partition: replicated along the partition
  dimensions the sums run over, split along the channel (and, per sample, batch) dimension
  like the input, so a channel split needs no communication for the statistics.
*/
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <layer/impls/common/layerutil.hpp>
#include <tensor/layout.hpp>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/kernels.hpp> /* NormLayoutsMatch: which layouts the norm kernels walk together */
#include <vector>

namespace ddnn
{
/* a normalization kernel of layer l's backend chain (KernelTable<T>::norm*) */
template <class T, class F, class... A>
inline PetscErrorCode NormKernel(DDLayer l, F KernelTable<T>::*m, A &&...args)
{
  return CallKernel<T>(l, m, DD_KERNEL_NORM, std::forward<A>(args)...);
}
struct ChannelParams {
  DDPartition Pc = NULL, Pw = NULL;
  DDPrimitive B  = NULL; /* Pc -> Pw; NULL when the input is split along the channel only */
  bool        bcast = false;
  DDLayer     owner = NULL; /* the layer whose set-up made the workers' copies (it registers them as replicas) */

  PetscErrorCode SetUp(MPI_Comm comm, DDTensor x)
  {
    DDPartition              P = x->part;
    const PetscInt           d = P->order, Pch = P->shape[1];
    PetscInt                 Po = P->size / Pch, shape[2] = {0, Pch};
    std::vector<PetscMPIInt> rc, rw;
    PetscInt                 c[DD_MAX_DIM];

    PetscFunctionBegin;
    /* worker index of coordinates c (C order) */
    auto idx = [&]() {
      PetscInt i = 0;
      for (PetscInt k = 0; k < d; k++) i = i * P->shape[k] + c[k];
      return i;
    };
    for (PetscInt k = 0; k < d; k++) c[k] = 0;
    for (PetscInt ch = 0; ch < Pch; ch++) {
      c[1] = ch;
      rc.push_back(P->ranks[idx()]);
    }
    /* the other coordinates in C order, outer; the channel coordinate inner */
    for (PetscInt o = 0; o < Po; o++) {
      PetscInt r = o;
      for (PetscInt k = d - 1; k >= 0; k--) {
        if (k == 1) continue;
        c[k] = r % P->shape[k];
        r /= P->shape[k];
      }
      for (PetscInt ch = 0; ch < Pch; ch++) {
        c[1] = ch;
        rw.push_back(P->ranks[idx()]);
      }
    }
    PetscCall(DDPartitionCreateCartesian(comm, 1, &Pch, (PetscInt)rc.size(), rc.data(), &Pc));
    bcast = Po > 1;
    if (bcast) {
      shape[0] = Po;
      PetscCall(DDPartitionCreateCartesian(comm, 2, shape, (PetscInt)rw.size(), rw.data(), &Pw));
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* a (C) tensor on Pc owning x's channel ranges */
  PetscErrorCode CreateParam(DDTensor x, DDTensor *p)
  {
    const PetscInt        Pch = Pc->shape[0];
    std::vector<PetscInt> lx(Pch);

    PetscFunctionBegin;
    for (PetscInt q = 0; q < Pch; q++) lx[q] = x->ranges[1][q + 1] - x->ranges[1][q];
    PetscCall(DDTensorCreate(PetscObjectComm((PetscObject)x), p));
    PetscCall(DDTensorSetPartition(*p, Pc));
    PetscCall(DDTensorSetShape(*p, 1, &x->shape[1]));
    PetscCall(DDTensorSetDataType(*p, x->dtype));
    PetscCall(DDTensorSetEmptyPiecesAllowed(*p, PETSC_TRUE));
    PetscCall(DDTensorSetOwnershipRanges(*p, 0, lx.data()));
    PetscCall(DDTensorSetMemType(*p, x->memtype)); /* parameters and running statistics where the input lives */
    PetscCall(DDTensorSetUp(*p));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* the workers' copy of a parameter: the broadcast's output, or the parameter itself (a new reference) */
  PetscErrorCode CreateWorkerCopy(DDTensor p, DDTensor *ph)
  {
    PetscFunctionBegin;
    if (!bcast) {
      PetscCall(PetscObjectReference((PetscObject)p));
      *ph = p;
      PetscFunctionReturn(PETSC_SUCCESS);
    }
    PetscCall(DDTensorCreateBroadcast(p, Pw, ph));
    if (!B) {
      PetscCall(DDPrimitiveCreate(PetscObjectComm((PetscObject)p), &B));
      PetscCall(DDPrimitiveSetType(B, DDPRIMITIVEBROADCAST));
      PetscCall(DDPrimitiveSetUp(B, p, *ph));
    }
    /* a trainable parameter's copy is a replica the network may keep (DDNetSetWeightMode(); paper 000 sec. 4.1) */
    owner = DDLayerSettingUp_Private();
    if (owner) PetscCall(DDLayerAddReplica_Private(owner, p, *ph, B));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* ph = B p, unless ph is a replica the network keeps (then refreshed only when p changed) */
  PetscErrorCode ToWorkers(DDTensor p, DDTensor ph)
  {
    PetscBool done = PETSC_FALSE;

    PetscFunctionBegin;
    if (!bcast) PetscFunctionReturn(PETSC_SUCCESS);
    PetscCall(DDLayerReplicaForward_Private(owner, ph, &done));
    if (!done) PetscCall(DDPrimitiveApply(B, p, ph));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* grad += B^* dph (tmp: a tensor laid out like the parameter); for a kept replica dph goes to the network's bucket, summed at the end of the backward */
  PetscErrorCode FromWorkers(DDTensor dph, DDTensor tmp, DDTensor grad)
  {
    PetscBool done = PETSC_FALSE;

    PetscFunctionBegin;
    if (bcast) {
      PetscCall(DDLayerReplicaBackward_Private(owner, NULL, grad, dph, &done));
      if (done) PetscFunctionReturn(PETSC_SUCCESS);
      PetscCall(DDPrimitiveApplyAdjoint(B, dph, tmp));
      PetscCall(DDTensorAXPY(grad, 1.0, tmp));
    } else PetscCall(DDTensorAXPY(grad, 1.0, dph));
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Reset()
  {
    PetscFunctionBegin;
    PetscCall(DDPrimitiveDestroy(&B));
    PetscCall(DDPartitionDestroy(&Pc));
    PetscCall(DDPartitionDestroy(&Pw));
    bcast = false;
    owner = NULL;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};

/*
  The local values of a small per-channel tensor on the host: its storage, or for a device tensor a
  host copy (the layers' per-channel arithmetic runs on the host; the kernels over x on the device),
  copied back by Restore() when written
*/
template <class T>
struct HostValues {
  DDTensor t = NULL;
  void    *h = nullptr;
  PetscErrorCode Get(DDTensor tensor)
  {
    t = tensor;
    return DDTensorGetHostArray_Private(t, &h);
  }
  PetscErrorCode Restore(bool written) { return DDTensorRestoreHostArray_Private(t, written ? PETSC_TRUE : PETSC_FALSE, &h); }
  T             *operator()() const { return (T *)h; }
};

/* Local values of a (C) parameter's workers' copy, as doubles (ones when p is NULL) */
template <class T>
inline PetscErrorCode ParamValues(DDTensor ph, PetscInt Cl, double dflt, std::vector<double> &v)
{
  HostValues<T> a;

  PetscFunctionBegin;
  v.assign(Cl, dflt);
  if (!ph || !ph->active) PetscFunctionReturn(PETSC_SUCCESS);
  PetscCall(a.Get(ph));
  for (PetscInt c = 0; c < Cl; c++) v[c] = (double)a()[c];
  PetscCall(a.Restore(false));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  A float64 statistics tensor for x: shape (persample ? N : 1, k C / g, 1, ..., 1), replicated
  along every split partition dimension it sums over, with x's batch (persample) and channel
  (k / g times x's ranges) ownership; and the all-sum-reduce over those dimensions (NULL when
  there is nothing to sum over).
*/
inline PetscErrorCode CreateStatistics(DDTensor x, bool persample, PetscInt k, PetscInt g, DDTensor *st, DDPrimitive *A)
{
  MPI_Comm              comm = PetscObjectComm((PetscObject)x);
  DDPartition           P    = x->part;
  const PetscInt        d    = x->order;
  PetscInt              shape[DD_MAX_DIM];
  std::vector<PetscInt> dims;

  PetscFunctionBegin;
  for (PetscInt j = 0; j < d; j++) shape[j] = 1;
  shape[0] = persample ? x->shape[0] : 1;
  shape[1] = k * x->shape[1] / g;
  PetscCall(DDTensorCreate(comm, st));
  PetscCall(DDTensorSetPartition(*st, P));
  PetscCall(DDTensorSetShape(*st, d, shape));
  PetscCall(DDTensorSetDataType(*st, DD_FLOAT64));
  PetscCall(DDTensorSetEmptyPiecesAllowed(*st, PETSC_TRUE));
  for (PetscInt j = 0; j < d; j++) {
    const PetscInt Pk = P->shape[j];
    if (Pk == 1) continue;
    if (j == 1 || (j == 0 && persample)) {
      std::vector<PetscInt> lx(Pk);
      for (PetscInt q = 0; q < Pk; q++) lx[q] = (j == 1 ? k : 1) * (x->ranges[j][q + 1] - x->ranges[j][q]) / (j == 1 ? g : 1);
      PetscCall(DDTensorSetOwnershipRanges(*st, j, lx.data()));
    } else {
      PetscCall(DDTensorSetReplicated(*st, j, PETSC_TRUE));
      dims.push_back(j);
    }
  }
  PetscCall(DDTensorSetUp(*st));
  *A = NULL;
  if (!dims.empty()) {
    PetscCall(DDPrimitiveCreate(comm, A));
    PetscCall(DDPrimitiveSetType(*A, DDPRIMITIVEALLSUMREDUCE));
    PetscCall(DDPrimitiveAllSumReduceSetDimensions(*A, (PetscInt)dims.size(), dims.data()));
    PetscCall(DDPrimitiveSetUp(*A, *st, *st));
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* sum over the workers sharing this rank's statistics (in place) */
inline PetscErrorCode AllSum(DDPrimitive A, DDTensor st)
{
  PetscFunctionBegin;
  if (A) PetscCall(DDPrimitiveApply(A, st, st));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/*
  The tensor the kernels read for t: t itself when its layout can be walked together with
  model's, else the cache (made once, laid out like model) holding a copy of t's values
  (copy = false: only the cache, for outputs).
*/
inline PetscErrorCode NormConform(DDTensor t, DDTensor model, DDTensor *cache, DDTensor *use, bool copy)
{
  PetscFunctionBegin;
  if (NormLayoutsMatch(t->layout, model->layout)) {
    *use = t;
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  if (!*cache) PetscCall(DDTensorDuplicate(model, cache));
  if (copy) PetscCall(DDTensorCopy(t, *cache));
  *use = *cache;
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* Checks shared by the normalization layers' set-up */
inline PetscErrorCode NormCheckInput(DDLayer l, DDTensor x, const char what[])
{
  MPI_Comm comm = PetscObjectComm((PetscObject)l);
  char     s[128];

  PetscFunctionBegin;
  PetscCall(DDShapeToString_Private(x->order, x->shape, s, sizeof(s)));
  PetscCheck(x->order >= 2, comm, PETSC_ERR_ARG_INCOMP, "%s takes N x C or N x C x spatial tensors; the input has order %" PetscInt_FMT " (shape %s)", what, x->order, s);
  for (PetscInt k = 0; k < x->order; k++) PetscCheck(!x->replicated[k], comm, PETSC_ERR_ARG_INCOMP, "%s: the input cannot be replicated (dimension %" PetscInt_FMT "); its statistics would count the copies", what, k);
  PetscCheck(x->format != DD_FORMAT_BLOCKED || x->blockdim == 1, comm, PETSC_ERR_SUP, "%s: a blocked input must block the channel dimension (it blocks dimension %" PetscInt_FMT ")", what, x->blockdim);
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace ddnn
