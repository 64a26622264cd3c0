/*
  The FFT kernel of the CPU backends (/cpu/ref, reached from /cpu/blas and /cpu/dnnl along their
  chains): FFTW's guru interface, double and single precision. One stage of the fft primitive's
  pencil decomposition (src/primitive/impls/fft/fft.cxx; the FNO's spectral convolution, Li et al.
  2021): the batched 1-D transforms along the middle dimension of (A, L, B), then the truncation to
  the kept modes (FftKernelSpec in ddnn/private/ddbackendimpl.h), and the exact adjoint.
*/
#include <ddnn/private/ddbackendimpl.h>
#include <fftw3.h>
#include <cstring>

namespace ddnn
{
namespace
{
template <class T>
struct FFTW;
template <>
struct FFTW<double> {
  typedef fftw_complex C;
  typedef fftw_plan    Plan;
  typedef fftw_iodim   Dim;
  static Plan R2C(int rank, const Dim *d, int hr, const Dim *h, double *in, C *out, unsigned f) { return fftw_plan_guru_dft_r2c(rank, d, hr, h, in, out, f); }
  static Plan C2R(int rank, const Dim *d, int hr, const Dim *h, C *in, double *out, unsigned f) { return fftw_plan_guru_dft_c2r(rank, d, hr, h, in, out, f); }
  static Plan DFT(int rank, const Dim *d, int hr, const Dim *h, C *in, C *out, int sign, unsigned f) { return fftw_plan_guru_dft(rank, d, hr, h, in, out, sign, f); }
  static void ExecR2C(Plan p, double *in, C *out) { fftw_execute_dft_r2c(p, in, out); }
  static void ExecC2R(Plan p, C *in, double *out) { fftw_execute_dft_c2r(p, in, out); }
  static void ExecDFT(Plan p, C *in, C *out) { fftw_execute_dft(p, in, out); }
  static void Destroy(Plan p) { fftw_destroy_plan(p); }
  static int  Alignment(const void *p) { return fftw_alignment_of((double *)p); }
};
template <>
struct FFTW<float> {
  typedef fftwf_complex C;
  typedef fftwf_plan    Plan;
  typedef fftwf_iodim   Dim;
  static Plan R2C(int rank, const Dim *d, int hr, const Dim *h, float *in, C *out, unsigned f) { return fftwf_plan_guru_dft_r2c(rank, d, hr, h, in, out, f); }
  static Plan C2R(int rank, const Dim *d, int hr, const Dim *h, C *in, float *out, unsigned f) { return fftwf_plan_guru_dft_c2r(rank, d, hr, h, in, out, f); }
  static Plan DFT(int rank, const Dim *d, int hr, const Dim *h, C *in, C *out, int sign, unsigned f) { return fftwf_plan_guru_dft(rank, d, hr, h, in, out, sign, f); }
  static void ExecR2C(Plan p, float *in, C *out) { fftwf_execute_dft_r2c(p, in, out); }
  static void ExecC2R(Plan p, C *in, float *out) { fftwf_execute_dft_c2r(p, in, out); }
  static void ExecDFT(Plan p, C *in, C *out) { fftwf_execute_dft(p, in, out); }
  static void Destroy(Plan p) { fftwf_destroy_plan(p); }
  static int  Alignment(const void *p) { return fftwf_alignment_of((float *)p); }
};

template <class T>
class FftwKernel : public FftKernel
{
  typedef typename FFTW<T>::C    C;
  typedef typename FFTW<T>::Plan Plan;
  typedef typename FFTW<T>::Dim  Dim;

public:
  FftKernelSpec s;
  PetscInt      Lc   = 0;       /* entries of the full transform along L: L/2 + 1 (real) or L */
  Plan          fwd[2] = {nullptr, nullptr}, adj[2] = {nullptr, nullptr}; /* [0]: for a aligned as at set-up (SIMD), [1]: any alignment */
  int           align = 0;      /* FFTW's alignment class of the set-up array a */
  C            *work = nullptr; /* the full transform, (A, Lc, B) */

  ~FftwKernel() override
  {
    for (int i = 0; i < 2; i++) {
      if (fwd[i]) FFTW<T>::Destroy(fwd[i]);
      if (adj[i]) FFTW<T>::Destroy(adj[i]);
    }
    if (work) fftw_free(work);
  }
  const char *Name() const override { return "fftw"; }

  /*
    Plans on the set-up arrays (FFTW_ESTIMATE: they are not touched), twice: for arrays a aligned as
    the set-up one (FFTW's SIMD codelets; the stage's tensors keep their arrays, so every call) and with
    FFTW_UNALIGNED for any other (no SIMD). work is FFTW's own, aligned. The first pair was missing until
    2026-11-29: every transform ran FFTW's scalar code (bench/README.md, "The spectral layer's transforms").
  */
  PetscErrorCode SetUp(const FftKernelSpec &spec)
  {
    PetscFunctionBegin;
    s     = spec;
    Lc    = s.real ? s.L / 2 + 1 : s.L;
    align = FFTW<T>::Alignment(s.a);
    work  = (C *)fftw_malloc(sizeof(C) * (size_t)(s.A * Lc * s.B));
    PetscCheck(work, PETSC_COMM_SELF, PETSC_ERR_MEM, "fftw_malloc of %" PetscInt_FMT " complex entries failed", s.A * Lc * s.B);
    for (int i = 0; i < 2; i++) {
      const unsigned flags = FFTW_ESTIMATE | (i ? FFTW_UNALIGNED : 0u);
      if (s.real) { /* (A, L) real <-> (A, Lc) complex */
        Dim d = {(int)s.L, 1, 1}, hr[1] = {{(int)s.A, (int)s.L, (int)Lc}}, hc[1] = {{(int)s.A, (int)Lc, (int)s.L}};
        fwd[i] = FFTW<T>::R2C(1, &d, 1, hr, (T *)s.a, work, flags);
        adj[i] = FFTW<T>::C2R(1, &d, 1, hc, work, (T *)s.a, flags | FFTW_DESTROY_INPUT);
      } else { /* length L, stride B; loops over A (stride L B) and B (stride 1) */
        Dim d = {(int)s.L, (int)s.B, (int)s.B}, h[2] = {{(int)s.A, (int)(s.L * s.B), (int)(s.L * s.B)}, {(int)s.B, 1, 1}};
        fwd[i] = FFTW<T>::DFT(1, &d, 2, h, (C *)s.a, work, FFTW_FORWARD, flags);
        adj[i] = FFTW<T>::DFT(1, &d, 2, h, work, (C *)s.a, FFTW_BACKWARD, flags);
      }
      PetscCheck(fwd[i] && adj[i], PETSC_COMM_SELF, PETSC_ERR_LIB, "FFTW could not plan a transform of length %" PetscInt_FMT, s.L);
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  /* the plan pair for array a: the SIMD one where a is aligned as the set-up array */
  int Which(const void *a) const { return FFTW<T>::Alignment(a) == align ? 0 : 1; }

  /* kept entry q -> its frequency in the full transform */
  PetscInt Freq(PetscInt q) const { return s.real || q < s.m ? q : s.L - 2 * s.m + q; }

  PetscErrorCode Forward(const void *a, void *b) override
  {
    PetscFunctionBegin;
    /* out of place, without FFTW_DESTROY_INPUT: a is read only */
    const int w = Which(a);
    if (s.real) FFTW<T>::ExecR2C(fwd[w], (T *)a, work);
    else FFTW<T>::ExecDFT(fwd[w], (C *)a, work);
    for (PetscInt i = 0; i < s.A; i++)
      for (PetscInt q = 0; q < s.K; q++) std::memcpy((T *)b + 2 * (i * s.K + q) * s.B, work + (i * Lc + Freq(q)) * s.B, sizeof(C) * (size_t)s.B);
    PetscFunctionReturn(PETSC_SUCCESS);
  }

  PetscErrorCode Adjoint(const void *b, void *a) override
  {
    PetscFunctionBegin;
    std::memset((void *)work, 0, sizeof(C) * (size_t)(s.A * Lc * s.B));
    for (PetscInt i = 0; i < s.A; i++)
      for (PetscInt q = 0; q < s.K; q++) {
        const PetscInt k   = Freq(q);
        const T        wk  = (s.real && k != 0 && 2 * k != s.L) ? (T)0.5 : (T)1; /* Hermitian weights of r2c^* = c2r w */
        const T       *src = (const T *)b + 2 * (i * s.K + q) * s.B;
        T             *dst = (T *)(work + (i * Lc + k) * s.B);
        for (PetscInt e = 0; e < 2 * s.B; e++) dst[e] = wk * src[e];
      }
    const int w = Which(a);
    if (s.real) FFTW<T>::ExecC2R(adj[w], work, (T *)a);
    else FFTW<T>::ExecDFT(adj[w], work, (C *)a);
    PetscFunctionReturn(PETSC_SUCCESS);
  }
};
} // namespace

/* the FFTW kernel of a stage (every host spec is accepted) */
template <class T>
PetscErrorCode FftwCreate(const FftKernelSpec &spec, std::unique_ptr<FftKernel> *k)
{
  PetscFunctionBegin;
  auto f = std::make_unique<FftwKernel<T>>();
  PetscCall(f->SetUp(spec));
  *k = std::move(f);
  PetscFunctionReturn(PETSC_SUCCESS);
}
template PetscErrorCode FftwCreate<float>(const FftKernelSpec &, std::unique_ptr<FftKernel> *);
template PetscErrorCode FftwCreate<double>(const FftKernelSpec &, std::unique_ptr<FftKernel> *);
} // namespace ddnn
