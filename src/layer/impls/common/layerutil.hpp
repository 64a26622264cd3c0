/*
  Helpers shared by the layer implementations (C++ only): building partitions and primitives,
  the ranks of a layer's work partition, copies of tensors whose halos differ from the
  layouts a layer was set up for, per-spatial-dimension hyper-parameters of sliding-window
  layers, and the output of pointwise layers.
*/
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <tensor/layout.hpp>
#include <sys/ddcollective.hpp>
#include <vector>
#include <string>
#include <utility>
#include <initializer_list>

namespace ddnn
{
/* a primitive of the given type set up between x and y */
PetscErrorCode MakePrimitive(MPI_Comm comm, DDPrimitiveType type, DDTensor x, DDTensor y, DDPrimitive *p);
/* a layer's halo exchange: the layer's options prefix, so -<prefix>primitive_halo_neighbors_only applies */
PetscErrorCode LayerHaloCreate(DDLayer l, DDPrimitive *H);
/* a partition of the given shape on the given ranks (worker order) */
PetscErrorCode MakePartition(MPI_Comm comm, const std::vector<PetscInt> &shape, const std::vector<PetscMPIInt> &ranks, DDPartition *p);
/*
  t itself when it is laid out as `layout` (the set-up layout), otherwise `*cache` (made once with
  that layout; filled from t when copy is true). Keep one cache per role: their layouts differ.
*/
PetscErrorCode ConformLayout(DDTensor t, DDTensor layout, DDTensor *cache, DDTensor *use, bool copy);
/*
  The same for a tensor distributed like t whose set-up layout (hash `hash`) differs from t's only
  in its halo widths lo, hi: the cache is t's duplicate with those halos.
*/
PetscErrorCode ConformHalo(DDTensor t, PetscInt64 hash, const PetscInt lo[], const PetscInt hi[], DDTensor *cache, DDTensor *use, bool copy);
/*
  The ranks of a work partition holding `copies` replicas of the workers of px (paper 000 Fig. 4-5:
  the input's workers copied over the output channels or features): replica 0 is px's workers, in
  worker order; the others take the lowest ranks px does not use. Errors when the communicator is
  too small, naming the layer's work partition.
*/
PetscErrorCode ReplicaRanks(MPI_Comm comm, DDPartition px, PetscInt copies, const char what[], std::vector<PetscMPIInt> &ranks);
/*
  Set-up shared by the sliding-window layers whose output keeps x's partition (pooling, upsampling):
  when any rank's window [a, b) (per spatial dimension, 3 - D leading unused) reaches beyond its
  piece, the halo exchange H onto those windows (paper 000 App. B; its set-up grows x's halo);
  then the layout x has afterwards (its hash and halo widths, for ConformHalo).
*/
PetscErrorCode WindowHaloSetUp(DDLayer l, DDTensor x, PetscInt D, const PetscInt a[3], const PetscInt b[3], PetscBool needhalo, DDPrimitive *H, PetscInt64 *hash, PetscInt lo[], PetscInt hi[]);
/*
  The output of such a layer: x's partition, batch and channel ownership, replication, block size
  and format; spatial extents out (3 - D leading unused) owned as outlx[j] (spatial dimension j).
*/
PetscErrorCode SpatialOutputSetUp(DDLayer l, DDTensor x, PetscInt D, const PetscInt out[3], const std::vector<std::vector<PetscInt>> &outlx);
/* An integer per spatial dimension, given with 1 entry (all dimensions) or D entries. */
struct SpatialParam {
  PetscInt    n = 0;         /* entries given, 0: not given */
  PetscInt    v[3] = {0, 0, 0};
  const char *opt = "";      /* its option key, for error messages */
  PetscErrorCode Set(MPI_Comm comm, PetscInt cnt, const PetscInt vals[], const char *what)
  {
    PetscFunctionBegin;
    PetscCheck(cnt >= 1 && cnt <= 3, comm, PETSC_ERR_ARG_SIZ, "%s needs 1 to 3 entries, %" PetscInt_FMT " given", what, cnt);
    n = cnt;
    for (PetscInt j = 0; j < cnt; j++) v[j] = vals[j];
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  /* out[3] (padded with leading defaults) for D spatial dimensions; errors name the option */
  PetscErrorCode Resolve(DDLayer l, PetscInt D, PetscInt dflt, bool required, PetscInt minv, PetscInt out[3]) const
  {
    const char *prefix;
    PetscFunctionBegin;
    PetscCall(PetscObjectGetOptionsPrefix((PetscObject)l, &prefix));
    PetscCheck(n || !required, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_WRONGSTATE, "Layer %s needs -%s%s (or its setter)", prefix ? prefix : "", prefix ? prefix : "", opt);
    PetscCheck(n <= 1 || n == D, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_SIZ, "-%s%s has %" PetscInt_FMT " entries but the input has %" PetscInt_FMT " spatial dimension(s)", prefix ? prefix : "", opt, n, D);
    for (PetscInt j = 0; j < 3; j++) out[j] = (j < 3 - D) ? 1 : (n == 0 ? dflt : (n == 1 ? v[0] : v[j - (3 - D)]));
    for (PetscInt j = 3 - D; j < 3; j++) PetscCheck(out[j] >= minv, PetscObjectComm((PetscObject)l), PETSC_ERR_ARG_OUTOFRANGE, "-%s%s entry %" PetscInt_FMT " must be at least %" PetscInt_FMT, prefix ? prefix : "", opt, out[j], minv);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode FromOptions(PetscOptionItems *PetscOptionsObject, const char *key, const char *text, const char *man)
  {
    PetscInt  vals[8], cnt = 8;
    PetscBool set;
    PetscFunctionBegin;
    opt = key + 1;
    for (PetscInt j = 0; j < 3; j++) vals[j] = v[j];
    PetscCall(PetscOptionsIntArray(key, text, man, vals, &cnt, &set));
    if (set) {
      PetscCheck(cnt >= 1 && cnt <= 3, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "%s has %" PetscInt_FMT " entries; give 1 to 3", key, cnt);
      n = cnt;
      for (PetscInt j = 0; j < cnt; j++) v[j] = vals[j];
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
/* A halo-free tensor distributed like x, in x's format (the output of a pointwise or normalization layer) */
PetscErrorCode CreateLike(DDTensor x, DDTensor *y);
/*
  The state of a layer that views its input under another global shape with the same C-order
  index (flatten, reshape): output entry i copies the input entry of the same global C-order index
  through a DDPRIMITIVESCATTER S (Backward is its adjoint). The output lives on the partition the
  user gave (part), or by default on (Pn, 1, ...): the input's batch workers when the batch extent is
  kept, else the input's first worker; it keeps the input's batch ownership when the batch split
  agrees. Copies conforming to the set-up layouts are cached in xin, yo (Forward) and dyo, dxo.
*/
struct ViewLayer {
  DDPartition part = NULL; /* given by the user */
  DDPartition Py   = NULL; /* used */
  DDPrimitive S    = NULL; /* the scatter x -> y */
  DDTensor    xin = NULL, yo = NULL, dyo = NULL, dxo = NULL;

  PetscErrorCode SetPartition(DDPartition p);
  /* the output (shape[o]), its partition (a given one must have order o), and S; what names the layer type in errors */
  PetscErrorCode SetUp(DDLayer l, DDTensor x, PetscInt o, const PetscInt shape[], const char what[]);
  PetscErrorCode Forward(DDLayer l, DDTensor x, DDTensor y);
  PetscErrorCode Backward(DDLayer l, DDTensor dy, DDTensor dx);
  PetscErrorCode Reset();   /* what set-up built */
  PetscErrorCode Destroy(); /* and the given partition */
};
struct LayerKernelRun; /* ddbackendimpl.h */
/* a layout in a per-configuration key of the performance model (LayerKernelRun): the local shape, the halos, the storage order and blocking */
std::string KernelRunLayoutKey(DDTensor t);
/* a tensor on this rank alone with t's local layout, filled with values in [-1, 1] as a network's (zeros
   would be the cheapest case of some kernels; other ranks may time other passes or none, so nothing here
   is collective); *same: its storage is laid out as t's (LayerKernelRun's copies) */
PetscErrorCode KernelRunLocalCopy(DDTensor t, DDTensor *c, bool *same);
/* a kernel run of a set-up layer of the given type begun: run emptied (no key, no copies, no passes) */
PetscErrorCode KernelRunBegin(DDLayer l, DDLayerType type, LayerKernelRun *run);
/* the copies of a kernel run: *copy = KernelRunLocalCopy(t) for each pair {t, copy} with t not NULL, kept
   in run->tensors; where one cannot reproduce its tensor's local storage, none is kept and run->untimed is set */
PetscErrorCode KernelRunCopies(LayerKernelRun *run, std::initializer_list<std::pair<DDTensor, DDTensor *>> pairs);
} // namespace ddnn
