/*
  The truncated real DFT of /cpu/blas: the real-to-complex stage of the fft primitive (the
  FNO's spectral convolution, Li et al. 2021; src/primitive/impls/fft/fft.cxx) keeps only the first
  K = m entries of each row's half-spectrum, so instead of FFTW's whole transform and a truncation it
  computes the kept entries directly, as one matrix product over all rows:

    forward   b (A x 2K) = a (A x L) F,     F[l, 2q] = cos(2 pi q l / L), F[l, 2q + 1] = -sin(2 pi q l / L)
    adjoint   a (A x L)  = b (A x 2K) F^T

  b holds each kept entry as (real, imaginary), as FftKernelSpec lays it out. The adjoint is exactly
  the adjoint of the forward for the real inner products: a_l = sum_q (Re b_q cos - Im b_q sin), which is
  what the FFTW kernel's Hermitian weights and c2r compute (fft_fftw.cxx), the imaginary parts of the
  q = 0 and q = L/2 entries included (their sine column is zero).

  A GEMM costs 4 L K flops a row against the FFT's O(L log2 L), but runs at OpenBLAS's vector rate,
  where FFTW runs these short real transforms with scalar code. Taken where K <= 2.5 log2 L (else
  declined: the chain's FFTW kernel). Measured (1 thread, float32, forward + adjoint, GEMM / FFTW): L 32
  K 8 0.38, L 64 K 12 0.47, L 128 K 16 0.60, L 256 K 16 0.89; declined at L 128 K 32 (0.93), L 64 K 32
  (1.17), L 256 K 32 (1.45). In float64 OpenBLAS's dgemm runs these thin products at half float32's rate
  and FFTW has SIMD code for its rows, so the GEMM wins only for fewer kept entries (a test program, 6144
  rows, FFTW's r2c and c2r on aligned arrays against the two dgemms, medians of 15; runs on 2048 rows in
  brackets): L 16 K 4 0.40, L 32 K 4 0.49, L 32 K 8 (the FNO main job's) 0.72, L 48 K 4 0.50, L 48 K 8 0.71,
  L 64 K 4 0.52-0.60 (0.44), L 64 K 8 0.81-1.05 (0.65), L 128 K 4 0.72-0.75 (0.53), L 128 K 8 0.80-0.94 (0.75),
  L 256 K 4 0.57 (0.53), L 256 K 8 0.77 (0.64); lost at L 16 K 8 (0.99), L 32 K 12 (1.06), L 48 K 12 (1.05),
  L 128 K 12 (1.15), K 16 at L 64-256 (1.18-1.42; 1.09-1.25). So float64 takes it where K <= 8 and 4 K <= L.
  Rounding: each entry is a sum of L products (error O(L eps) against the FFT's O(log L eps)); the
  twiddles at quarter turns are exact, and the imaginary parts of the q = 0 and q = L/2 entries are
  written 0, as FFTW's. Non-finite values: an inf or nan in a row makes every kept entry of the row
  non-finite, as in FFTW's transform (some as nan where FFTW gives +-inf, or the reverse); in the adjoint
  a non-finite imaginary part of those two entries reaches the row through a zero column (nan) where
  c2r ignores it.
*/
#include <ddnn/private/ddbackendimpl.h>
#include <backend/blas/blas_util.hpp>
#include <cmath>
#include <new>
#include <vector>

namespace ddnn
{
namespace
{
/* whether the GEMM kernel takes a stage: real, few kept entries for its length (K <= 2.5 log2 L; float64
   also K <= 8 and 4 K <= L) */
bool GemmDftApplies(const FftKernelSpec &spec, DDDataType dt)
{
  if (!spec.real || spec.B != 1 || spec.L < 2 || (double)spec.K > 2.5 * std::log2((double)spec.L)) return false;
  return dt == DD_FLOAT32 || (spec.K <= 8 && 4 * spec.K <= spec.L);
}

template <class T>
class GemmDftKernel : public FftKernel
{
public:
  explicit GemmDftKernel(const FftKernelSpec &spec) : s(spec), F((size_t)(spec.L * 2 * spec.K))
  {
    for (PetscInt l = 0; l < s.L; l++)
      for (PetscInt q = 0; q < s.K; q++) {
        const PetscInt r = (q * l) % s.L; /* the angle 2 pi r / L, reduced exactly; the quarter turns exact (0, +-1) */
        double         c, sn;
        if (r == 0) c = 1, sn = 0;
        else if (2 * r == s.L) c = -1, sn = 0;
        else if (4 * r == s.L) c = 0, sn = 1;
        else if (4 * r == 3 * s.L) c = 0, sn = -1;
        else {
          const double th = 2 * PETSC_PI * (double)r / (double)s.L;
          c = std::cos(th), sn = std::sin(th);
        }
        F[l * 2 * s.K + 2 * q]     = (T)c;
        F[l * 2 * s.K + 2 * q + 1] = (T)-sn;
      }
  }
  const char    *Name() const override { return "truncated DFT as GEMM (OpenBLAS)"; }
  PetscErrorCode Forward(const void *a, void *b) override
  {
    PetscFunctionBegin;
    T *bp = (T *)b;
    blas::Gemm(CblasNoTrans, CblasNoTrans, s.A, 2 * s.K, s.L, (const T *)a, s.L, F.data(), 2 * s.K, (T)0, bp, 2 * s.K);
    /* the imaginary parts of the real entries (q = 0, and q = L/2 for even L) exactly 0, as FFTW's r2c writes them, an inf or nan in the row included */
    for (PetscInt i = 0; i < s.A; i++) {
      bp[i * 2 * s.K + 1] = 0;
      if (s.L % 2 == 0 && s.K > s.L / 2) bp[i * 2 * s.K + 2 * (s.L / 2) + 1] = 0;
    }
    PetscFunctionReturn(PETSC_SUCCESS);
  }
  PetscErrorCode Adjoint(const void *b, void *a) override
  {
    PetscFunctionBegin;
    blas::Gemm(CblasNoTrans, CblasTrans, s.A, s.L, 2 * s.K, (const T *)b, 2 * s.K, F.data(), 2 * s.K, (T)0, (T *)a, s.L);
    PetscFunctionReturn(PETSC_SUCCESS);
  }

private:
  FftKernelSpec  s;
  std::vector<T> F; /* L x 2K, row-major */
};

/* the FFT kernel of /cpu/blas in type T (NULL: declined, the chain's FFTW kernel takes the stage) */
template <class T>
PetscErrorCode GemmDftCreateT(const FftKernelSpec &spec, std::unique_ptr<FftKernel> *k)
{
  PetscFunctionBegin;
  if (!GemmDftApplies(spec, sizeof(T) == 4 ? DD_FLOAT32 : DD_FLOAT64)) PetscFunctionReturn(PETSC_SUCCESS);
  try {
    k->reset(new GemmDftKernel<T>(spec));
  } catch (const std::bad_alloc &) {
    SETERRQ(PETSC_COMM_SELF, PETSC_ERR_MEM, "Cannot allocate the %" PetscInt_FMT " x %" PetscInt_FMT " DFT matrix of an FFT stage", spec.L, 2 * spec.K);
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
} // namespace

PetscErrorCode GemmDftCreate(const FftKernelSpec &spec, std::unique_ptr<FftKernel> *k)
{
  return GemmDftCreateT<float>(spec, k);
}
PetscErrorCode GemmDftCreateD(const FftKernelSpec &spec, std::unique_ptr<FftKernel> *k)
{
  return GemmDftCreateT<double>(spec, k);
}
} // namespace ddnn
