/*
  /cpu/ref: the reference loops in float32 and float64, the truth every other backend is checked
  against and the end of every fallback chain. It provides every kernel kind for strided views
  and box offsets.
*/
#include <backend/common/loopkernels.hpp>
#include <backend/cpu/fastkernels.hpp>
#include <backend/cpu/optimizer_kernels.hpp>

using namespace ddnn;

namespace
{
struct RefConvLoops {
  template <class T>
  static void Forward(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y) { ConvForwardRef<T>(g, x, w, b, y); }
  template <class T>
  static void BackwardData(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx) { ConvBackwardDataRef<T>(g, dy, w, dx); }
  template <class T>
  static void BackwardWeights(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db) { ConvBackwardWeightsRef<T>(g, x, dy, dw, db); }
  template <class T>
  static void TForward(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y) { ConvTForwardRef<T>(g, x, w, b, y); }
  template <class T>
  static void TBackwardData(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx) { ConvTBackwardDataRef<T>(g, dy, w, dx); }
  template <class T>
  static void TBackwardWeights(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db) { ConvTBackwardWeightsRef<T>(g, x, dy, dw, db); }
};
struct RefPoolLoops {
  template <class T>
  static void Forward(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *am) { PoolForwardRef<T>(g, x, xo, y, yo, am); }
  template <class T>
  static void Backward(const PoolGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const PetscInt *am) { PoolBackwardRef<T>(g, dy, yo, dx, xo, am); }
};

template <class T>
PetscErrorCode RefConvCreate(const ConvKernelSpec &spec, std::unique_ptr<ConvKernel> *k)
{
  PetscFunctionBegin;
  PetscCall(LoopConvCreate<T, RefConvLoops>(spec, DDBackendLookup_Private("/cpu/ref"), "reference loops", k));
  PetscFunctionReturn(PETSC_SUCCESS);
}
template <class T>
PetscErrorCode RefPoolCreate(const PoolKernelSpec &spec, std::unique_ptr<PoolKernel> *k)
{
  PetscFunctionBegin;
  k->reset(new LoopPoolKernel<T, RefPoolLoops>(spec, DDBackendLookup_Private("/cpu/ref"), "reference loops"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
void FillRef(KernelTable<T> &t)
{
  t.convformats      = StridedConvFormats;
  t.convcreate       = RefConvCreate<T>;
  t.poolcreate       = RefPoolCreate<T>;
  t.affinefwd        = AffineForwardRef<T>;
  t.affinebwddata    = AffineBackwardDataRef<T>;
  t.affinebwdweights = AffineBackwardWeightsRef<T>;
  t.upsamplefwd      = UpsampleForwardRef<T>;
  t.upsamplebwd      = UpsampleBackwardRef<T>;
  t.actfwd           = ActivationForward<T>; /* one plain loop per function: the reference too */
  t.actbwd           = ActivationBackward<T>;
  t.sgdupdate        = SGDUpdate<T>; /* one loop per rule, in double: the reference and the CPU path alike */
  t.adamupdate       = AdamUpdate<T>;
  t.normmoments      = NormMoments<T>; /* tiled loops over the storage order: the reference and the fast path alike */
  t.normscaleshift   = NormScaleShift<T>;
  t.normbwdsums      = NormBackwardSums<T>;
  t.normbwdapply     = NormBackwardApply<T>;
}
} // namespace

PetscErrorCode DDBackendCreate_Ref(void)
{
  _p_DDBackend b{};

  PetscFunctionBegin;
  PetscCall(PetscStrncpy(b.name, "/cpu/ref", sizeof(b.name)));
  PetscCall(PetscStrncpy(b.description, "reference loops", sizeof(b.description)));
  b.fallback[0] = 0;
  b.memtype     = DD_MEMTYPE_HOST;
  b.mem         = HostMemOps;
  b.vec = HostVecOps;
  FillRef(b.f32);
  FillRef(b.f64);
  PetscCall(DDBackendRegister_Private(&b));
  PetscFunctionReturn(PETSC_SUCCESS);
}
