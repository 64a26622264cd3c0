/*
  Fourier neural operators: the distributed truncated real FFT (DDPRIMITIVEFFT) and the
  spectral-convolution layer (DDLAYERSPECTRAL).

  FFT: equals a plain DFT written here (and hard-coded torch.fft.rfftn values) over x
  partitions at any rank count (balanced, unbalanced with empty pieces, rank subsets and
  permutations; y on its default Fourier partition or on one rank); the adjoint test (paper
  000 eq. 26) in float64 to 1e-12; the shell Mat; float32; bad input.
  Spectral layer: P ranks = 1 rank, finite differences, a PyTorch SpectralConv2d (values
  hard-coded), bad input.
  The local FFT kernel of the backend tier (FftKernel): the FFTW kernel, found along the default
  backend's chain, equals a direct DFT with its truncation and its Adjoint is the exact adjoint, in
  float64 and float32 (the cuFFT kernel is checked against it in test_13_gpu).
*/
#include "layertest.hpp"
#include <ddnn/private/ddimpl.h>
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <cmath>
#include <complex>
#include <limits>

using namespace ddtest;

namespace
{
struct XPart {
  std::vector<PetscInt>              pshape;
  std::vector<PetscMPIInt>           ranks;
  std::vector<std::vector<PetscInt>> lx;
  const char                        *what;
};

DDTensor MakeX(const std::vector<PetscInt> &shape, const XPart &p, DDDataType dt, PetscInt64 seed)
{
  DDPartition part;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, (PetscInt)shape.size(), p.pshape.data(), (PetscInt)p.ranks.size(), p.ranks.data(), &part));
  DDTensor t;
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, part));
  DDT(DDTensorSetShape(t, (PetscInt)shape.size(), shape.data()));
  DDT(DDTensorSetDataType(t, dt));
  DDT(DDTensorSetEmptyPiecesAllowed(t, PETSC_TRUE));
  for (size_t k = 0; k < p.lx.size(); k++)
    if (!p.lx[k].empty()) DDT(DDTensorSetOwnershipRanges(t, (PetscInt)k, p.lx[k].data()));
  DDT(DDTensorSetUp(t));
  DDT(DDPartitionDestroy(&part));
  DDT(DDTensorSetRandomGlobal(t, seed, -1, 1));
  return t;
}

/* The partitions of an order-o tensor (N, C, s...) to test at W ranks */
std::vector<XPart> XParts(const std::vector<PetscInt> &shape)
{
  const PetscInt           W = Size(), o = (PetscInt)shape.size();
  std::vector<PetscMPIInt> all(W), rev(W);
  for (PetscInt i = 0; i < W; i++) all[i] = (PetscMPIInt)i, rev[i] = (PetscMPIInt)(W - 1 - i);
  std::vector<XPart> v;
  auto ones = [&]() { return std::vector<PetscInt>(o, 1); };
  v.push_back({ones(), {0}, {}, "serial on rank 0"});
  {
    XPart p{ones(), all, {}, "last spatial dimension split"};
    p.pshape[o - 1] = W;
    v.push_back(p);
  }
  {
    XPart p{ones(), rev, {}, "first spatial dimension split, reversed ranks, unbalanced with an empty piece"};
    p.pshape[2] = W;
    if (W > 1) {
      std::vector<PetscInt> lx(W, 0);
      lx[0] = shape[2] - 1; /* worker 0 most, worker 1 one entry, the others none */
      lx[1] = 1;
      p.lx.assign(o, {});
      p.lx[2] = lx;
    }
    v.push_back(p);
  }
  {
    XPart p{ones(), all, {}, "batch and channels split"};
    p.pshape[0] = W >= 2 ? 2 : 1;
    p.pshape[1] = W / p.pshape[0];
    for (PetscInt i = p.pshape[0] * p.pshape[1]; i < W; i++) p.ranks.pop_back();
    v.push_back(p);
  }
  v.push_back({ones(), {(PetscMPIInt)(W - 1)}, {}, "serial on the last rank"});
  return v;
}

/* rfftn over the spatial dimensions truncated to the kept modes (the primitive's y), by a plain DFT */
std::vector<double> PlainDFT(const std::vector<double> &x, const std::vector<PetscInt> &shape, const std::vector<PetscInt> &modes)
{
  const PetscInt d = (PetscInt)shape.size() - 2;
  PetscInt       S[3] = {1, 1, 1}, M[3] = {0, 0, 0}, K[3] = {1, 1, 1};
  bool           last[3] = {false, false, false}, pad[3] = {true, true, true};
  for (PetscInt j = 0; j < d; j++) {
    const PetscInt q = 3 - d + j;
    S[q]             = shape[2 + j];
    M[q]             = modes[j];
    K[q]             = j == d - 1 ? modes[j] : 2 * modes[j];
    last[q]          = j == d - 1;
    pad[q]           = false;
  }
  auto freq = [&](PetscInt q, PetscInt i) -> PetscInt { return pad[q] ? 0 : (last[q] || i < M[q] ? i : S[q] - 2 * M[q] + i); };
  const PetscInt      NC = shape[0] * shape[1];
  std::vector<double> y(NC * K[0] * K[1] * K[2] * 2);
  for (PetscInt nc = 0; nc < NC; nc++)
    for (PetscInt a = 0; a < K[0]; a++)
      for (PetscInt b = 0; b < K[1]; b++)
        for (PetscInt c = 0; c < K[2]; c++) {
          std::complex<double> acc = 0;
          const PetscInt       fa = freq(0, a), fb = freq(1, b), fc = freq(2, c);
          for (PetscInt i = 0; i < S[0]; i++)
            for (PetscInt j = 0; j < S[1]; j++)
              for (PetscInt k = 0; k < S[2]; k++) {
                double th = -2 * M_PI * ((double)(fa * i % S[0]) / S[0] + (double)(fb * j % S[1]) / S[1] + (double)(fc * k % S[2]) / S[2]);
                acc += x[((nc * S[0] + i) * S[1] + j) * S[2] + k] * std::complex<double>(std::cos(th), std::sin(th));
              }
          const PetscInt o = ((nc * K[0] + a) * K[1] + b) * K[2] + c;
          y[2 * o]         = acc.real();
          y[2 * o + 1]     = acc.imag();
        }
  return y;
}

struct FFTCase {
  std::vector<PetscInt> shape, modes;
};

std::vector<FFTCase> FFTCases()
{
  return {
    {{2, 3, 10}, {4}},         {{2, 2, 9}, {5}},          {{1, 1, 8}, {5}}, /* Nyquist kept */
    {{2, 3, 8, 6}, {2, 3}},    {{1, 2, 7, 9}, {3, 5}},    {{1, 1, 4, 4}, {2, 3}},
    {{1, 2, 6, 4, 8}, {2, 1, 3}}, {{2, 1, 5, 6, 7}, {2, 3, 4}},
  };
}
} // namespace

/* one stage's local transforms: real (A, L) -> (A, m) or complex (A, L, B) -> (A, 2m, B) */
struct FftCase {
  bool     real;
  PetscInt A, L, m, B;
};
/*
  real: L even and odd, Nyquist kept (L = 8, m = 5), and more kept entries than the float32 GEMM kernel
  of /cpu/blas takes (L = 64, m = 20 > 2.5 log2 L); few enough for its float64 one too (L = 32, m = 8: the FNO
  main job's; L = 64, m = 4), and (L = 64, m = 12) for the float32 one only; complex: B = 1, A <= B, A > B
*/
const FftCase kFftCases[] = {{true, 5, 12, 4, 1}, {true, 3, 9, 5, 1}, {true, 2, 8, 5, 1}, {true, 3, 64, 20, 1}, {true, 7, 32, 8, 1}, {true, 2, 64, 4, 1}, {true, 3, 64, 12, 1}, {false, 3, 10, 3, 1}, {false, 2, 8, 2, 5}, {false, 6, 8, 3, 2}};

/*
  The kernel of backend `bname`'s chain for one stage: /cpu/ref's is FFTW; /cpu/blas (and the default,
  whose chain reaches it) computes a real stage with K <= 2.5 log2 L as a GEMM (float64: also K <= 8 and
  4 K <= L), and leaves the rest to FFTW
*/
template <class T>
void FftKernelCase(const FftCase &c, const char *bname)
{
  ddnn::FftKernelSpec spec;
  spec.real = c.real, spec.A = c.A, spec.L = c.L, spec.m = c.m, spec.B = c.B, spec.K = c.real ? c.m : 2 * c.m;
  const PetscInt      na = c.A * c.L * c.B * (c.real ? 1 : 2), nb = c.A * spec.K * c.B * 2;
  std::vector<T>      a(na), b(nb), a2(na), b2(nb, (T)7);
  for (PetscInt i = 0; i < na; i++) a[i] = (T)std::sin(0.37 * i + 0.1);
  for (PetscInt i = 0; i < nb; i++) b[i] = (T)std::cos(0.53 * i - 0.2);
  spec.a = a2.data(), spec.b = b2.data();
  DDBackend                       bk, which;
  std::unique_ptr<ddnn::FftKernel> k;
  if (bname) bk = ddnn::DDBackendLookup_Private(bname);
  else DDT(ddnn::DDBackendDefault_Private(&bk));
  ASSERT_TRUE(bk) << bname;
  bool chainHasBlas = false;
  for (DDBackend w = bk; w; w = ddnn::DDBackendNext_Private(w)) chainHasBlas = chainHasBlas || std::string(w->name) == "/cpu/blas";
  const bool gemm = chainHasBlas && c.real && (double)spec.K <= 2.5 * std::log2((double)c.L) && (sizeof(T) == 4 || (spec.K <= 8 && 4 * spec.K <= c.L));
  DDT(ddnn::DDBackendFftCreate(bk, sizeof(T) == 4 ? DD_FLOAT32 : DD_FLOAT64, spec, &k, &which));
  ASSERT_TRUE(k);
  EXPECT_STREQ(which->name, gemm ? "/cpu/blas" : "/cpu/ref") << bk->name << ", L " << c.L << ", K " << spec.K;
  EXPECT_STREQ(k->Name(), gemm ? "truncated DFT as GEMM (OpenBLAS)" : "fftw") << bk->name << ", L " << c.L << ", K " << spec.K;
  /* forward against the direct DFT (double), then the adjoint identity <F a, b> = <a, F^* b> */
  DDT(k->Forward(a.data(), b2.data()));
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-13;
  double       scale = 0, fab = 0, afb = 0;
  for (PetscInt i = 0; i < na; i++) scale += std::abs((double)a[i]);
  for (PetscInt i = 0; i < c.A; i++)
    for (PetscInt q = 0; q < spec.K; q++)
      for (PetscInt e = 0; e < c.B; e++) {
        const PetscInt       f = (c.real || q < c.m) ? q : c.L - 2 * c.m + q;
        std::complex<double> z = 0;
        for (PetscInt j = 0; j < c.L; j++) {
          const PetscInt       o  = (i * c.L + j) * c.B + e;
          std::complex<double> aj = c.real ? std::complex<double>(a[o], 0) : std::complex<double>(a[2 * o], a[2 * o + 1]);
          z += aj * std::polar(1.0, -2 * PETSC_PI * (double)(j * f % c.L) / c.L);
        }
        const PetscInt o = (i * spec.K + q) * c.B + e;
        EXPECT_NEAR(b2[2 * o], z.real(), tol * scale) << (c.real ? "real" : "complex") << " L " << c.L << " mode " << q;
        EXPECT_NEAR(b2[2 * o + 1], z.imag(), tol * scale) << (c.real ? "real" : "complex") << " L " << c.L << " mode " << q;
      }
  std::vector<T> bcopy(b);
  DDT(k->Adjoint(b.data(), a2.data()));
  for (PetscInt i = 0; i < nb; i++) EXPECT_EQ(b[i], bcopy[i]) << "Adjoint changed b";
  for (PetscInt i = 0; i < nb; i++) fab += (double)b2[i] * (double)b[i];
  for (PetscInt i = 0; i < na; i++) afb += (double)a[i] * (double)a2[i];
  EXPECT_NEAR(fab, afb, (sizeof(T) == 4 ? 1e-5 : 1e-12) * (std::abs(fab) + 1)) << "adjoint test, " << (c.real ? "real" : "complex") << " L " << c.L;
  if (c.real) { /* an inf in a row: the imaginary parts of its real entries (q = 0, and q = L/2 where kept) stay 0, as FFTW's r2c writes them */
    a[0] = std::numeric_limits<T>::infinity();
    DDT(k->Forward(a.data(), b2.data()));
    EXPECT_EQ(b2[1], (T)0) << k->Name() << ", L " << c.L << ": Im of entry 0 with an inf in the row";
    if (c.L % 2 == 0 && spec.K > c.L / 2) EXPECT_EQ(b2[2 * (c.L / 2) + 1], (T)0) << k->Name() << ", L " << c.L << ": Im of the Nyquist entry with an inf in the row";
    EXPECT_FALSE(std::isfinite((double)b2[0])) << k->Name() << ", L " << c.L << ": Re of entry 0 with an inf in the row";
  }
}

TEST(FFT, KernelEqualsDirectDFTAndIsAdjoint)
{
  for (const char *b : {"/cpu/ref", "/cpu/blas", (const char *)nullptr})
    for (const FftCase &c : kFftCases) {
      FftKernelCase<double>(c, b);
      FftKernelCase<float>(c, b);
    }
}

TEST(FFT, EqualsPlainDFTAndPassesAdjointTest)
{
  for (const auto &c : FFTCases())
    for (const auto &p : XParts(c.shape)) {
      DDTensor x = MakeX(c.shape, p, DD_FLOAT64, 11), y;
      DDT(DDTensorCreateFFT(x, (PetscInt)c.modes.size(), c.modes.data(), &y));
      DDPrimitive F;
      DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
      DDT(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
      DDT(DDPrimitiveSetUp(F, x, y));
      DDT(DDPrimitiveApply(F, x, y));
      std::vector<double> ref = PlainDFT(GatherAll(x), c.shape, c.modes), got = GatherAll(y);
      EXPECT_LT(RelDiff(got, ref), 1e-13) << p.what << ", d = " << c.shape.size() - 2;
      PetscReal err;
      DDT(DDPrimitiveAdjointTest(F, NULL, NULL, 5, &err));
      EXPECT_LT(err, 1e-12) << p.what << ", d = " << c.shape.size() - 2;
      DDT(DDPrimitiveAdjointTest(F, NULL, NULL, 6, &err));
      EXPECT_LT(err, 1e-12) << p.what << ", d = " << c.shape.size() - 2;
      DDT(DDPrimitiveDestroy(&F));
      DDT(DDTensorDestroy(&x));
      DDT(DDTensorDestroy(&y));
    }
}

/* y on any partition: the whole spectrum on one rank, and the modes split the other way */
TEST(FFT, OutputOnAnyPartition)
{
  const PetscInt           W = Size();
  std::vector<PetscInt>    shape = {2, 2, 6, 8}, modes = {2, 3}, yshape = {2, 2, 4, 3, 2};
  XPart                    px{{1, 1, 1, W}, {}, {}, "x last split"};
  for (PetscInt i = 0; i < W; i++) px.ranks.push_back((PetscMPIInt)i);
  for (int which = 0; which < 2; which++) {
    std::vector<PetscInt>    ps = {1, 1, 1, 1, 1};
    std::vector<PetscMPIInt> r  = {(PetscMPIInt)(W - 1)};
    if (which == 1) {
      ps = {1, 1, W, 1, 1};
      r  = px.ranks;
    }
    DDTensor    x = MakeX(shape, px, DD_FLOAT64, 3), y;
    DDPartition part;
    DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 5, ps.data(), (PetscInt)r.size(), r.data(), &part));
    DDT(DDTensorCreate(PETSC_COMM_WORLD, &y));
    DDT(DDTensorSetPartition(y, part));
    DDT(DDTensorSetShape(y, 5, yshape.data()));
    DDT(DDTensorSetDataType(y, DD_FLOAT64));
    DDT(DDTensorSetEmptyPiecesAllowed(y, PETSC_TRUE));
    DDT(DDTensorSetUp(y));
    DDPrimitive F;
    DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
    DDT(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
    DDT(DDPrimitiveSetUp(F, x, y));
    DDT(DDPrimitiveApply(F, x, y));
    EXPECT_LT(RelDiff(GatherAll(y), PlainDFT(GatherAll(x), shape, modes)), 1e-13);
    PetscReal err;
    DDT(DDPrimitiveAdjointTest(F, NULL, NULL, 9, &err));
    EXPECT_LT(err, 1e-12);
    DDT(DDPrimitiveDestroy(&F));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
    DDT(DDPartitionDestroy(&part));
  }
}

/* torch.fft.rfftn(x, dim=(2, 3)) of x_i = sin(0.7 i) + 0.1 i, shape (1, 2, 4, 6), modes (1, 2): [X[:, :, :1, :2], X[:, :, -1:, :2]] */
TEST(FFT, MatchesTorchRfftn)
{
  const double ref[16] = {30.0445568921541, 0, -2.53273666495991, 0.627303193721316, -3.05312583348437, -10.4839202256473, -7.96271345787927, 0.334115586200192,
                          84.5046798267241, 0, -2.19237721013128, 4.86665337257295, -10.3841968020634, -8.27061079352353, 4.35502282796986, 7.70547357686007};
  std::vector<PetscInt> shape = {1, 2, 4, 6}, modes = {1, 2};
  const PetscInt        W     = Size();
  XPart                 px{{1, 1, W > 4 ? 4 : W, 1}, {}, {}, "rows split"};
  for (PetscInt i = 0; i < px.pshape[2]; i++) px.ranks.push_back((PetscMPIInt)i);
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
    DDTensor            x = MakeX(shape, px, dt, 1), y;
    std::vector<double> xv(48);
    for (int i = 0; i < 48; i++) xv[i] = std::sin(0.7 * i) + 0.1 * i;
    if (dt == DD_FLOAT64) DDT(DDTensorSetValuesGlobal(x, xv.data()));
    else {
      std::vector<float> f(xv.begin(), xv.end());
      DDT(DDTensorSetValuesGlobal(x, f.data()));
    }
    DDT(DDTensorCreateFFT(x, 2, modes.data(), &y));
    DDPrimitive F;
    DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
    DDT(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
    DDT(DDPrimitiveSetUp(F, x, y));
    DDT(DDPrimitiveApply(F, x, y));
    std::vector<double> got = GatherAll(y);
    ASSERT_EQ(got.size(), 16u);
    EXPECT_LT(RelDiff(got, std::vector<double>(ref, ref + 16)), dt == DD_FLOAT64 ? 1e-13 : 1e-6) << DDDataTypes[dt];
    DDT(DDPrimitiveDestroy(&F));
    DDT(DDTensorDestroy(&x));
    DDT(DDTensorDestroy(&y));
  }
}

TEST(FFT, Float32AndShellMat)
{
  const PetscInt        W = Size();
  std::vector<PetscInt> shape = {2, 3, 6, 5, 8}, modes = {2, 2, 3};
  XPart                 px{{1, 1, 1, W, 1}, {}, {}, "dim 3 split"};
  for (PetscInt i = 0; i < W; i++) px.ranks.push_back((PetscMPIInt)i);
  DDTensor x = MakeX(shape, px, DD_FLOAT32, 4), y;
  DDT(DDTensorCreateFFT(x, 3, modes.data(), &y));
  DDPrimitive F;
  DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
  DDT(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
  DDT(DDPrimitiveSetUp(F, x, y));
  DDT(DDPrimitiveApply(F, x, y));
  EXPECT_LT(RelDiff(GatherAll(y), PlainDFT(GatherAll(x), shape, modes)), 1e-5);
  PetscReal err;
  DDT(DDPrimitiveAdjointTest(F, NULL, NULL, 2, &err));
  EXPECT_LT(err, 1e-5);
  PetscInt64 pr, fu;
  DDT(DDPrimitiveFFTGetVolume(F, &pr, &fu));
  if (W > 1) EXPECT_LT(pr, fu); /* pruning moves fewer bytes */
  DDT(DDPrimitiveDestroy(&F));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
  /* float64: the shell Mat is F (MatMult) and F^* (MatMultTranspose) */
  x = MakeX(shape, px, DD_FLOAT64, 4);
  DDT(DDTensorCreateFFT(x, 3, modes.data(), &y));
  DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
  DDT(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
  DDT(DDPrimitiveSetUp(F, x, y));
  Mat A;
  Vec u, z;
  DDT(DDPrimitiveGetMat(F, &A));
  ExpectMatAdjoint(A, &u, &z);
  /* MatMult equals Apply: Vec entries are the pieces' bulk entries in storage order (plain, halo-free here) */
  {
    const PetscScalar *ua, *za;
    void              *xa;
    const void        *ya;
    PetscInt           nx, ny;
    DDT(DDTensorGetLocalSize(x, &nx));
    DDT(DDTensorGetLocalSize(y, &ny));
    DDT(VecGetArrayRead(u, &ua));
    DDT(DDTensorGetArray(x, &xa));
    for (PetscInt i = 0; i < nx; i++) ((double *)xa)[i] = ua[i];
    DDT(DDTensorRestoreArray(x, &xa));
    DDT(VecRestoreArrayRead(u, &ua));
    DDT(DDPrimitiveApply(F, x, y));
    DDT(VecGetArrayRead(z, &za));
    DDT(DDTensorGetArrayRead(y, &ya));
    double diff = 0;
    for (PetscInt i = 0; i < ny; i++) diff = std::max(diff, std::fabs(((const double *)ya)[i] - za[i]));
    DDT(DDTensorRestoreArrayRead(y, &ya));
    DDT(VecRestoreArrayRead(z, &za));
    EXPECT_LT(diff, 1e-12);
  }
  for (Vec *q : {&u, &z}) DDT(VecDestroy(q));
  DDT(DDPrimitiveDestroy(&F));
  DDT(DDTensorDestroy(&x));
  DDT(DDTensorDestroy(&y));
}

TEST(FFTBadInput, ModesAndShapes)
{
  std::vector<PetscInt> shape = {1, 2, 6, 8};
  XPart                 px{{1, 1, 1, 1}, {0}, {}, "serial"};
  DDTensor              x = MakeX(shape, px, DD_FLOAT64, 1), y = NULL;
  PetscInt              big[2] = {4, 3}, nyq[2] = {2, 6}, three[3] = {1, 1, 1};
  DD_EXPECT_ERROR(DDTensorCreateFFT(x, 2, big, &y), PETSC_ERR_ARG_OUTOFRANGE, "Modes 4 of spatial dimension 0");
  DD_EXPECT_ERROR(DDTensorCreateFFT(x, 2, nyq, &y), PETSC_ERR_ARG_OUTOFRANGE, "last spatial dimension (size 8) must be in [1, 5]");
  DD_EXPECT_ERROR(DDTensorCreateFFT(x, 3, three, &y), PETSC_ERR_ARG_SIZ, "Give 1 or 2 modes");
  /* y of a wrong shape: an odd corner dimension */
  PetscInt    ys[5] = {1, 2, 3, 2, 2}, one[5] = {1, 1, 1, 1, 1};
  PetscMPIInt r0    = 0;
  DDPartition part;
  DDT(DDPartitionCreateCartesian(PETSC_COMM_WORLD, 5, one, 1, &r0, &part));
  DDT(DDTensorCreateFromPartition(part, DD_FLOAT64, 5, ys, &y));
  DDPrimitive F;
  DDT(DDPrimitiveCreate(PETSC_COMM_WORLD, &F));
  DDT(DDPrimitiveSetType(F, DDPRIMITIVEFFT));
  DD_EXPECT_ERROR(DDPrimitiveSetUp(F, x, y), PETSC_ERR_ARG_SIZ, "two corner blocks");
  DDT(DDPrimitiveDestroy(&F));
  DDT(DDTensorDestroy(&y));
  DDT(DDPartitionDestroy(&part));
  DDT(DDTensorDestroy(&x));
}

/* ---------------------------------------------------------------------- */
/* the spectral-convolution layer */

namespace
{
std::function<void(DDLayer)> SpectralConfig(std::vector<PetscInt> modes, PetscInt cout)
{
  return [modes, cout](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERSPECTRAL));
    DDT(DDLayerSpectralSetModes(l, (PetscInt)modes.size(), modes.data()));
    if (cout > 0) DDT(DDLayerSpectralSetOutputChannels(l, cout));
  };
}

struct SpecCase {
  std::vector<PetscInt> shape, pshape, modes;
  PetscInt              cout;
};

std::vector<SpecCase> SpecCases()
{
  const PetscInt W = Size();
  return {
    {{3, 2, 12}, {1, 1, W}, {4}, 3},
    {{2, 3, 9}, {W > 1 ? 2 : 1, 1, W > 1 ? W / 2 : 1}, {5}, 2},
    {{2, 3, 8, 7}, {1, 1, 1, W}, {2, 3}, 2},
    {{2, 2, 6, 8}, {1, W > 1 ? 2 : 1, W > 1 ? W / 2 : 1, 1}, {3, 5}, 3}, /* channels split, all modes kept */
    {{1, 2, 6, 5, 8}, {1, 1, W, 1, 1}, {2, 2, 3}, 2},
    {{2, 3, 4, 16}, {1, 1, 1, W}, {2, 4}, 2}, /* rows of 16 keeping 4: the truncated DFT by GEMM in float64 too */
  };
}
} // namespace

TEST(Spectral, ParallelEqualsSerial)
{
  for (const auto &c : SpecCases()) {
    InputSpec s;
    s.shape  = c.shape;
    s.pshape = c.pshape;
    for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
      RunResult ser = RunLayer(SpectralConfig(c.modes, c.cout), {Serial(s)}, dt, 21);
      /* the default chain's mode mixing (the vectorized loops of /cpu/blas) and the reference loops of /cpu/ref, on P ranks, against one rank */
      for (const char *b : {"default", "/cpu/ref"}) {
        auto      cfg = [&c, b](DDLayer l) {
          SpectralConfig(c.modes, c.cout)(l);
          if (strcmp(b, "default")) DDT(DDLayerSetBackend(l, b));
        };
        RunResult par = RunLayer(cfg, {s}, dt, 21);
        ExpectSameRun(par, ser, dt == DD_FLOAT64 ? 1e-12 : 1e-5, std::string("spectral d = ") + std::to_string(c.shape.size() - 2) + " " + DDDataTypes[dt] + " " + b);
        ASSERT_EQ(par.params.size(), 1u);
        double nrm = 0;
        for (double v : par.y) nrm += v * v;
        EXPECT_GT(nrm, 0) << "the output must not vanish";
      }
    }
  }
}

/*
  Non-finite values through the layer: the default chain (its real-to-complex stages a truncated DFT by GEMM
  where fft_gemm.cxx takes them) makes the same output and input-gradient entries non-finite as /cpu/ref
  (FFTW), for an inf or a nan in x at the first or a middle entry of a row, and for an inf in dy, on P ranks,
  in float32 and float64
*/
TEST(Spectral, NonFiniteAsFftw)
{
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
  for (const auto &c : SpecCases())
    for (int where = 0; where < 4; where++) {
      InputSpec s;
      s.shape  = c.shape;
      s.pshape = c.pshape;
      std::vector<std::vector<double>> masks[2];
      for (int bi = 0; bi < 2; bi++) {
        DDTensor x = MakeInput(s, dt, 31), y, dy, dx;
        DDLayer  l;
        std::vector<double> xv = GatherAll(x);
        const size_t        row = (size_t)c.shape.back(), mid = xv.size() / 2 / row * row + row / 2;
        if (where == 0) xv[0] = inf;
        if (where == 1) xv[mid] = -inf;
        if (where == 2) xv[row] = nan;
        SetValues(x, xv);
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        SpectralConfig(c.modes, c.cout)(l);
        if (bi == 1) DDT(DDLayerSetBackend(l, "/cpu/ref"));
        DDT(DDLayerSetUp(l, x));
        DDT(DDLayerInitializeParameters(l, 5));
        DDT(DDLayerGetOutput(l, &y));
        DDT(DDLayerCreateOutput(l, &dy));
        DDT(DDTensorSetRandomGlobal(dy, 6, -1, 1));
        if (where == 3) { /* an inf in dy, x finite */
          std::vector<double> g = GatherAll(dy);
          g[g.size() / 3] = inf;
          SetValues(dy, g);
        }
        DDT(DDTensorDuplicate(x, &dx));
        DDT(DDLayerForward(l, x, y));
        DDT(DDLayerBackward(l, dy, dx));
        for (DDTensor t : {y, dx}) {
          std::vector<double> v = GatherAll(t), m(v.size());
          for (size_t i = 0; i < v.size(); i++) m[i] = std::isfinite(v[i]) ? 0 : 1;
          masks[bi].push_back(m);
        }
        DDT(DDTensorDestroy(&dx));
        DDT(DDTensorDestroy(&dy));
        DDT(DDLayerDestroy(&l));
        DDT(DDTensorDestroy(&x));
      }
      for (size_t t = 0; t < 2; t++) {
        EXPECT_EQ(masks[0][t], masks[1][t]) << (t ? "dx" : "y") << "'s non-finite entries, default chain against /cpu/ref, " << DDDataTypes[dt] << ", case d = " << c.shape.size() - 2 << ", L " << c.shape.back() << ", where " << where;
        double cnt = 0;
        for (double v : masks[1][t]) cnt += v;
        if ((t == 0) == (where < 3)) EXPECT_GT(cnt, 0) << (t ? "dx" : "y") << " non-finite somewhere, where " << where; /* the layer is linear: x reaches y only, dy dx only */
      }
    }
}

TEST(Spectral, FiniteDifferences)
{
  for (const auto &c : SpecCases()) {
    InputSpec s;
    s.shape  = c.shape;
    s.pshape = c.pshape;
    ExpectFiniteDifferences(SpectralConfig(c.modes, c.cout), {s}, 5, 1e-7);
  }
}

/*
  A PyTorch SpectralConv2d (the reference code: rfft2, weights1 on [:m1, :m2], weights2 on [-m1:, :m2], irfft2(s = (H, W)))
  with x_j = sin(0.11 j) + 0.2 cos(0.53 j) of shape (2, 3, 8, 7), modes (2, 3), 2 output channels and the
  weights w_j = 0.05 cos(0.37 j + 0.1) of our (3, 2, 4, 3, 2) tensor (weights1 = w[:, :, :2], weights2 = w[:, :, 2:]):
  outputs 0, 13, 26, ... and the sum of squares.
*/
TEST(Spectral, MatchesTorchSpectralConv2d)
{
  const double ref[18] = {-0.0355204634373125, 0.0417098503652303,  0.085502519404099,   -0.0226856564950336, -0.070638325643578, -0.0438655510887869,
                          -0.0427117509262592, 0.034887052778962,   0.0866267045696106,  -0.0685267044581139, 0.0459028042576583, 0.0502719211846614,
                          -0.0277569672624263, 0.0299958128933645,  -0.051687059226999,  -0.0815137094081216, 0.0466323732115396, 0.0455395950732505};
  const double ss      = 0.605790840141712;
  const PetscInt W     = Size();
  for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32})
    for (int split = 0; split < 2; split++) {
      InputSpec s;
      s.shape  = {2, 3, 8, 7};
      s.pshape = split ? std::vector<PetscInt>{1, 1, W, 1} : std::vector<PetscInt>{1, 1, 1, 1};
      if (!split) s.ranks = {(PetscMPIInt)(W - 1)};
      DDTensor x = MakeInput(s, dt, 1), y;
      std::vector<double> xv(2 * 3 * 8 * 7), wv(3 * 2 * 4 * 3 * 2);
      for (size_t j = 0; j < xv.size(); j++) xv[j] = std::sin(0.11 * j) + 0.2 * std::cos(0.53 * j);
      for (size_t j = 0; j < wv.size(); j++) wv[j] = 0.05 * std::cos(0.37 * j + 0.1);
      DDLayer l;
      DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
      DDT(DDLayerSetOptionsPrefix(l, "fno_"));
      DDT(PetscOptionsSetValue(NULL, "-fno_layer_type", "spectral"));
      DDT(PetscOptionsSetValue(NULL, "-fno_layer_spectral_modes", "2,3"));
      DDT(PetscOptionsSetValue(NULL, "-fno_layer_spectral_out_channels", "2"));
      DDT(DDLayerSetFromOptions(l));
      DDT(PetscOptionsClearValue(NULL, "-fno_layer_type"));
      DDT(PetscOptionsClearValue(NULL, "-fno_layer_spectral_modes"));
      DDT(PetscOptionsClearValue(NULL, "-fno_layer_spectral_out_channels"));
      DDT(DDLayerSetUp(l, x));
      PetscInt  np;
      DDTensor *ps;
      DDT(DDLayerGetParameters(l, &np, &ps));
      ASSERT_EQ(np, 1);
      if (dt == DD_FLOAT64) {
        DDT(DDTensorSetValuesGlobal(x, xv.data()));
        DDT(DDTensorSetValuesGlobal(ps[0], wv.data()));
      } else {
        std::vector<float> xf(xv.begin(), xv.end()), wf(wv.begin(), wv.end());
        DDT(DDTensorSetValuesGlobal(x, xf.data()));
        DDT(DDTensorSetValuesGlobal(ps[0], wf.data()));
      }
      DDT(DDLayerGetOutput(l, &y));
      DDT(DDLayerForward(l, x, y));
      std::vector<double> g = GatherAll(y), sel;
      ASSERT_EQ(g.size(), 224u);
      double s2 = 0;
      for (size_t j = 0; j < g.size(); j++) {
        s2 += g[j] * g[j];
        if (j % 13 == 0) sel.push_back(g[j]);
      }
      const double tol = dt == DD_FLOAT64 ? 1e-12 : 1e-5;
      EXPECT_LT(RelDiff(sel, std::vector<double>(ref, ref + 18)), tol) << DDDataTypes[dt] << (split ? " split" : " serial");
      EXPECT_NEAR(s2, ss, tol * ss);
      DDT(DDLayerDestroy(&l));
      DDT(DDTensorDestroy(&x));
    }
}

TEST(SpectralBadInput, ModesAndShapes)
{
  InputSpec s;
  s.shape    = {1, 2, 8, 6};
  DDTensor x = MakeInput(Serial(s), DD_FLOAT64, 1);
  DDLayer  l;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERSPECTRAL));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_WRONGSTATE, "needs its modes");
  PetscInt big[2] = {5, 3}, three[3] = {1, 2, 3}, half[2] = {2, 5};
  DDT(DDLayerSpectralSetModes(l, 2, big));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "5 modes in spatial dimension 0");
  DDT(DDLayerSpectralSetModes(l, 2, half));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_OUTOFRANGE, "exceed the half-spectrum 4");
  DDT(DDLayerSpectralSetModes(l, 3, three));
  DD_EXPECT_ERROR(DDLayerSetUp(l, x), PETSC_ERR_ARG_SIZ, "has 3 entries");
  DD_EXPECT_ERROR(DDLayerSpectralSetOutputChannels(l, 0), PETSC_ERR_ARG_OUTOFRANGE, "must be positive");
  DDT(DDLayerDestroy(&l));
  DDT(DDTensorDestroy(&x));
}
