/*
  /cpu/ref: the reference loops in float32 and float64, the truth every other backend is checked
  against and the end of every fallback chain. It provides every kernel kind for strided views
  and box offsets.
*/
#include <sys/ddcxx.hpp>
#include <backend/common/loopkernels.hpp>
#include <backend/cpu/fastkernels.hpp>
#include <backend/cpu/optimizer_kernels.hpp>
#include <vector>

using namespace ddnn;

namespace ddnn
{
/* fft_fftw.cxx: the local FFTs of the fft primitive's stages (FFTW) */
template <class T>
PetscErrorCode FftwCreate(const FftKernelSpec &, std::unique_ptr<FftKernel> *);
/* loss_ref.cxx: the loss layer's local passes and the dropout masks */
template <class T>
PetscErrorCode RefLossCreate(const LossKernelSpec &, std::unique_ptr<LossKernel> *);
template <class T>
void DropoutRef(uint64_t key, double p, const DDLayout &Lx, const T *x, const DDLayout &Ly, T *y, const PetscInt shape[]);
} // namespace ddnn

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

/* layer normalization rows (DDLAYERLAYERNORM, paper 000 sec. 4.2.2): plain loops, double accumulation */
template <class T>
void LayerNormSums(PetscInt R, PetscInt M, const T *x, const double *mean, double *s)
{
  for (PetscInt r = 0; r < R; r++) {
    const T *xr = x + r * M;
    double   a  = 0;
    if (!mean)
      for (PetscInt i = 0; i < M; i++) a += (double)xr[i];
    else
      for (PetscInt i = 0; i < M; i++) {
        const double e = (double)xr[i] - mean[r];
        a += e * e;
      }
    s[r] = a;
  }
}
template <class T>
void LayerNormApply(PetscInt R, PetscInt M, const T *x, const double *mean, const double *rstd, const T *w, const T *b, T *y)
{
  for (PetscInt r = 0; r < R; r++)
    for (PetscInt i = 0; i < M; i++) y[r * M + i] = (T)((double)w[i] * (((double)x[r * M + i] - mean[r]) * rstd[r]) + (double)b[i]);
}
template <class T>
void LayerNormBackwardSums(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, T *dw, T *db, double *g1, double *g2)
{
  std::vector<double> aw(M, 0.0), ab(M, 0.0);
  for (PetscInt r = 0; r < R; r++) {
    double s1 = 0, s2 = 0;
    for (PetscInt i = 0; i < M; i++) {
      const double gy = (double)dy[r * M + i], xh = ((double)x[r * M + i] - mean[r]) * rstd[r], gw = (double)w[i] * gy;
      aw[i] += gy * xh;
      ab[i] += gy;
      s1 += gw;
      s2 += gw * xh;
    }
    g1[r] = s1;
    g2[r] = s2;
  }
  for (PetscInt i = 0; i < M; i++) {
    dw[i] = (T)aw[i];
    db[i] = (T)ab[i];
  }
}
template <class T>
void LayerNormBackwardApply(PetscInt R, PetscInt M, const T *x, const T *dy, const double *mean, const double *rstd, const T *w, const double *G1, const double *G2, T *dx)
{
  for (PetscInt r = 0; r < R; r++)
    for (PetscInt i = 0; i < M; i++) {
      const double xh = ((double)x[r * M + i] - mean[r]) * rstd[r];
      dx[r * M + i]   = (T)(rstd[r] * ((double)w[i] * (double)dy[r * M + i] - G1[r] - xh * G2[r]));
    }
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
  t.lnsums           = LayerNormSums<T>;
  t.lnapply          = LayerNormApply<T>;
  t.lnbwdsums        = LayerNormBackwardSums<T>;
  t.lnbwdapply       = LayerNormBackwardApply<T>;
  t.fftcreate        = FftwCreate<T>;
  t.losscreate       = RefLossCreate<T>;
  t.dropout          = DropoutRef<T>;
  t.spectralmix        = SpectralMixRef<T>;
  t.spectralmixadjoint = SpectralMixAdjointRef<T>;
}
} // namespace

PetscErrorCode DDBackendCreate_Ref(void)
DD_CXX_TRY
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
DD_CXX_CATCH
