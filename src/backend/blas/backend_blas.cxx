/*
  /cpu/blas: the fast CPU kernels that need no oneDNN, in float32 and float64: convolution and
  transposed convolution as im2col/col2im + GEMM (src/backend/blas/conv_gemm.cxx), the dense layer's
  products (cblas_sgemm/dgemm), pooling, interpolation and pointwise loops written to vectorise
  (src/backend/cpu: pool_fast, upsample_fast, pointwise), the optimizers' updates (optimizer_fast) and the
  spectral layer's mode mixing (spectral_fast), and the FFT primitive's truncated real DFT as a GEMM
  where it beats FFTW (fft_gemm.cxx). It falls back to /cpu/ref for the rest.
*/
#include <sys/ddcxx.hpp>
#include <backend/common/loopkernels.hpp>
#include <backend/common/affine_gemm.hpp>
#include <backend/cpu/fastkernels.hpp>
#include <backend/blas/conv_gemm.hpp>
#include <backend/blas/conv_winograd.hpp>
#include <backend/cpu/optimizer_kernels.hpp>

using namespace ddnn;

namespace ddnn
{
PetscErrorCode GemmDftCreate(const FftKernelSpec &, std::unique_ptr<FftKernel> *);  /* fft_gemm.cxx, float32 */
PetscErrorCode GemmDftCreateD(const FftKernelSpec &, std::unique_ptr<FftKernel> *); /* float64 */
}

namespace
{
struct CblasGemm {
  static void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const float *A, PetscInt lda, const float *B, PetscInt ldb, float beta, float *C, PetscInt ldc)
  {
    cblas_sgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
  }
  static void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, PetscInt M, PetscInt N, PetscInt K, const double *A, PetscInt lda, const double *B, PetscInt ldb, double beta, double *C, PetscInt ldc)
  {
    cblas_dgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
  }
};

struct GemmConvLoops {
  template <class T>
  static void Forward(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y) { ConvForwardGemm<T>(g, x, w, b, y); }
  template <class T>
  static void BackwardData(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx) { ConvBackwardDataGemm<T>(g, dy, w, dx); }
  template <class T>
  static void BackwardWeights(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db) { ConvBackwardWeightsGemm<T>(g, x, dy, dw, db); }
  template <class T>
  static void TForward(const ConvTGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y) { ConvTForwardGemm<T>(g, x, w, b, y); }
  template <class T>
  static void TBackwardData(const ConvTGeom &g, const View<const T> &dy, const T *w, const View<T> &dx) { ConvTBackwardDataGemm<T>(g, dy, w, dx); }
  template <class T>
  static void TBackwardWeights(const ConvTGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db) { ConvTBackwardWeightsGemm<T>(g, x, dy, dw, db); }
};
/* 3 x 3 (x 3) convolutions at unit stride and dilation, one group: Winograd F(4x4, 3x3), F(2x2, 3x3) or F(2x2x2, 3x3x3) (the transposed convolution keeps GEMM) */
struct WinogradConvLoops : GemmConvLoops {
  template <class T>
  static void Forward(const ConvGeom &g, const View<const T> &x, const T *w, const T *b, const View<T> &y) { ConvForwardWinograd<T>(g, x, w, b, y); }
  template <class T>
  static void BackwardData(const ConvGeom &g, const View<const T> &dy, const T *w, const View<T> &dx) { ConvBackwardDataWinograd<T>(g, dy, w, dx); }
  template <class T>
  static void BackwardWeights(const ConvGeom &g, const View<const T> &x, const View<const T> &dy, T *dw, T *db) { ConvBackwardWeightsWinograd<T>(g, x, dy, dw, db); }
};
/*
  The convolution kernel of /cpu/blas: Winograd (F(4x4, 3x3), F(2x2, 3x3), or F(2x2x2, 3x3x3) for 3 x 3 x 3 taps) where
  ConvWinogradPreferred() (3 x 3 (x 3) taps, unit stride and dilation, one group, at least 16 input and output channels,
  8 for 3 x 3 x 3), im2col + GEMM elsewhere;
  -dd_conv_winograd <bool> forces Winograd wherever ConvWinogradApplies() (true) or never (false).
*/
bool GemmConvWinograd(const ConvGeom &g, bool transposed, bool passes[3])
{
  PetscBool force = PETSC_FALSE, set = PETSC_FALSE;
  (void)PetscOptionsGetBool(NULL, NULL, "-dd_conv_winograd", &force, &set);
  passes[0] = passes[1] = passes[2] = !transposed && (set ? (force && ConvWinogradApplies(g)) : ConvWinogradPreferred(g));
  return true;
}

template <class T>
PetscErrorCode GemmConvCreate(const ConvKernelSpec &spec, std::unique_ptr<ConvKernel> *k)
{
  bool wino[3];

  PetscFunctionBegin;
  GemmConvWinograd(spec.g, spec.transposed, wino);
  if (wino[0]) PetscCall(LoopConvCreate<T, WinogradConvLoops>(spec, DDBackendLookup_Private("/cpu/blas"), ConvWinogradName<T>(spec.g), k));
  else PetscCall(LoopConvCreate<T, GemmConvLoops>(spec, DDBackendLookup_Private("/cpu/blas"), "im2col + GEMM (OpenBLAS)", k));
  PetscFunctionReturn(PETSC_SUCCESS);
}

struct FastPoolLoops {
  template <class T>
  static void Forward(const PoolGeom &g, const T *x, const BoxOffsets &xo, T *y, const BoxOffsets &yo, PetscInt *am) { PoolForwardFast<T>(g, x, xo, y, yo, am); }
  template <class T>
  static void Backward(const PoolGeom &g, const T *dy, const BoxOffsets &yo, T *dx, const BoxOffsets &xo, const PetscInt *am) { PoolBackwardFast<T>(g, dy, yo, dx, xo, am); }
};
template <class T>
PetscErrorCode FastPoolCreate(const PoolKernelSpec &spec, std::unique_ptr<PoolKernel> *k)
{
  PetscFunctionBegin;
  k->reset(new LoopPoolKernel<T, FastPoolLoops>(spec, DDBackendLookup_Private("/cpu/blas"), "fast loops"));
  PetscFunctionReturn(PETSC_SUCCESS);
}

template <class T>
void FillBlas(KernelTable<T> &t)
{
  t.convformats      = StridedConvFormats;
  t.convcreate       = GemmConvCreate<T>;
  t.convwinograd     = GemmConvWinograd;
  t.poolcreate       = FastPoolCreate<T>;
  t.upsamplefwd      = UpsampleForwardFast<T>;
  t.upsamplebwd      = UpsampleBackwardFast<T>;
  t.actfwd           = ActivationForward<T>;
  t.actbwd           = ActivationBackward<T>;
  t.affinefwd        = AffineForwardGemm<T, CblasGemm>;
  t.affinebwddata    = AffineBackwardDataGemm<T, CblasGemm>;
  t.affinebwdweights = AffineBackwardWeightsGemm<T, CblasGemm>;
  t.sgdupdate        = SGDUpdateFast<T>;
  t.adamupdate       = AdamUpdateFast<T>;
  t.spectralmix        = SpectralMixFast<T>;
  t.spectralmixadjoint = SpectralMixAdjointFast<T>;
}
} // namespace

PetscErrorCode DDBackendCreate_Blas(void)
DD_CXX_TRY
{
  _p_DDBackend b{};

  PetscFunctionBegin;
  PetscCall(PetscStrncpy(b.name, "/cpu/blas", sizeof(b.name)));
  PetscCall(PetscStrncpy(b.description, "GEMM on OpenBLAS and vectorised loops", sizeof(b.description)));
  PetscCall(PetscStrncpy(b.fallback, "/cpu/ref", sizeof(b.fallback)));
  b.memtype = DD_MEMTYPE_HOST;
  b.mem     = HostMemOps;
  b.vec = HostVecOps;
  FillBlas(b.f32);
  FillBlas(b.f64);
  b.f32.fftcreate = GemmDftCreate; /* the truncated real DFT as a GEMM where it is faster (fft_gemm.cxx); the rest along the chain to FFTW */
  b.f64.fftcreate = GemmDftCreateD;
  PetscCall(DDBackendRegister_Private(&b));
  PetscFunctionReturn(PETSC_SUCCESS);
}
DD_CXX_CATCH
