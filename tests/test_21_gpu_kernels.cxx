/*
  The kernel-table entries of /gpu/cuda that issue 11 part 1 left out, each against the /cpu/ref
  entry on the host (the truth): batch and group normalization (normmoments, normscaleshift,
  normbwdsums, normbwdapply), layer normalization (lnsums, lnapply, lnbwdsums, lnbwdapply), the
  optimizers' updates (sgdupdate, adamupdate), interpolation (the set-up kernel upsamplecreate)
  and the device reductions of DDTensor's arithmetic (vec.dot, vec.norms behind DDTensorDot,
  DDTensorSum, DDTensorNorm and DDTensorNorm2SquaredSum_Private).

  Random geometries over plain, channels-last and blocked (block size 4) storage, with halos of
  different widths on input and output, empty pieces and sizes that are not multiples of the
  block, float32 and float64: device results within 1e-5 (float32) and 1e-12 (float64) relative
  of the reference's. The reductions (normalization statistics, layer-norm sums, DDTensor's
  reductions) run twice and must give the same bits (they are deterministic on the device).

  Every device test needs a CUDA device and is skipped with a visible message where
  cudaGetDeviceCount() finds none; the registration test needs only a CUDA build.
*/
#include "gputest.hpp"
#include "kernelcases.hpp"
#include <ddnn/private/ddbackendimpl.h>
#include <backend/interface/backends.hpp>
#include <backend/kernels.hpp>
#include <tensor/layout.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

using namespace ddtest;
using ddnn::KernelTable;

namespace
{

DDBackend Gpu() { return ddnn::DDBackendLookup_Private("/gpu/cuda"); }
DDBackend Ref() { return ddnn::DDBackendLookup_Private("/cpu/ref"); }

template <class T>
const char *TypeName() { return sizeof(T) == 4 ? "float32" : "float64"; }
template <class T>
double Tol() { return sizeof(T) == 4 ? 1e-5 : 1e-12; }

/* a device copy of a host array (the backend's pooled memory), read back with Get() */
template <class T>
struct Dev {
  T     *d = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T> &h) : n(h.size())
  {
    DDT(Gpu()->mem.malloc(sizeof(T) * n, (void **)&d));
    if (n) DDT(Gpu()->mem.copy(d, h.data(), sizeof(T) * n));
  }
  ~Dev()
  {
    if (d) (void)Gpu()->mem.free(d);
  }
  Dev(const Dev &)            = delete;
  Dev &operator=(const Dev &) = delete;
  std::vector<T> Get() const
  {
    std::vector<T> h(n);
    if (n) DDT(Gpu()->mem.copy(h.data(), d, sizeof(T) * n));
    return h;
  }
};

template <class T>
std::vector<T> Random(size_t n, unsigned seed, double lo = -1, double hi = 1)
{
  std::mt19937                           r(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T>                         v(n);
  for (auto &e : v) e = (T)u(r);
  return v;
}

/* a and b agree within tol relative (both NaN, or the same infinity, agree) */
inline bool Close(double a, double b, double tol)
{
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1 + std::fabs(a));
}
template <class A, class B>
void ExpectClose(const std::vector<A> &ref, const std::vector<B> &dev, double tol, const std::string &what)
{
  ASSERT_EQ(ref.size(), dev.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); i++)
    if (!Close((double)ref[i], (double)dev[i], tol) && bad++ < 5) ADD_FAILURE() << what << " entry " << i << ": reference " << (double)ref[i] << ", CUDA " << (double)dev[i];
  EXPECT_EQ(bad, 0u) << what;
}
template <class T>
void ExpectSameBits(const std::vector<T> &a, const std::vector<T> &b, const std::string &what)
{
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_TRUE(a.empty() || !std::memcmp(a.data(), b.data(), sizeof(T) * a.size())) << what << ": two runs on the device differ in bits";
}

/* ------------------------------------------------------------------------------------------ */
/* layouts                                                                                    */
struct Fmt {
  DDTensorFormat f;
  PetscInt       bs;
  const char    *name;
};
const Fmt kFormats[] = {{DD_FORMAT_PLAIN, 1, "plain"}, {DD_FORMAT_CHANNELS_LAST, 1, "channels-last"}, {DD_FORMAT_BLOCKED, 4, "blocked 4c"}};

/* the local layout of a piece n (N, C, spatial...): halo h below and h + 1 above each spatial dimension, cl below the channels and n0 below the samples */
DDLayout MakeLayout(const std::vector<PetscInt> &n, const Fmt &f, PetscInt h, PetscInt cl = 0, PetscInt n0 = 0)
{
  const PetscInt order = (PetscInt)n.size();
  PetscInt       start[DD_MAX_DIM] = {0}, lo[DD_MAX_DIM] = {0}, hi[DD_MAX_DIM] = {0};
  lo[0] = n0;
  lo[1] = cl;
  for (PetscInt k = 2; k < order; k++) {
    lo[k] = h;
    hi[k] = h ? h + 1 : 0;
  }
  DDLayout L;
  DDT(ddnn::LayoutBuild(&L, order, n.data(), start, lo, hi, f.f, f.bs));
  return L;
}

std::string Describe(const std::vector<PetscInt> &n, const Fmt &f, PetscInt hx, PetscInt hy, PetscInt cl, const char *ty)
{
  std::ostringstream o;
  o << ty << " " << f.name << " piece";
  for (PetscInt v : n) o << " " << v;
  o << " halos " << hx << "/" << hy << " channel halo " << cl;
  return o.str();
}

/* random pieces (N, C, spatial 0-3): some empty (N = 0), channels not multiples of the block, and a few large ones (several parts per group) */
std::vector<std::vector<PetscInt>> NormPieces()
{
  std::vector<std::vector<PetscInt>> p = {{2, 5}, {3, 7, 6}, {2, 5, 3, 4}, {0, 5, 3, 3}, {1, 3, 2, 3, 4}, {2, 6, 40, 40}, {2, 3, 20, 20, 21}, {3, 9, 5, 0}};
  std::mt19937                       gen(17);
  for (int k = 0; k < 6; k++) {
    std::vector<PetscInt> n = {(PetscInt)(gen() % 4), 1 + (PetscInt)(gen() % 9)};
    const int             D = (int)(gen() % 4);
    for (int j = 0; j < D; j++) n.push_back(1 + (PetscInt)(gen() % 7));
    p.push_back(n);
  }
  return p;
}
} // namespace

/* ------------------------------------------------------------------------------------------ */
/* registration (no device needed)                                                             */

TEST(GpuKernels, Registered)
{
  REQUIRE_CUDA_BUILD();
  DDBackend b = Gpu();
  ASSERT_NE(b, nullptr);
  for (int dt = 0; dt < 2; dt++) {
    auto check = [&](const auto &t) {
      EXPECT_NE(t.normmoments, nullptr);
      EXPECT_NE(t.normscaleshift, nullptr);
      EXPECT_NE(t.normbwdsums, nullptr);
      EXPECT_NE(t.normbwdapply, nullptr);
      EXPECT_NE(t.lnsums, nullptr);
      EXPECT_NE(t.lnapply, nullptr);
      EXPECT_NE(t.lnbwdsums, nullptr);
      EXPECT_NE(t.lnbwdapply, nullptr);
      EXPECT_NE(t.sgdupdate, nullptr);
      EXPECT_NE(t.adamupdate, nullptr);
      EXPECT_NE(t.upsamplecreate, nullptr);
      EXPECT_EQ(t.upsamplefwd, nullptr); /* interpolation only through the set-up kernel */
      EXPECT_EQ(t.upsamplebwd, nullptr);
    };
    if (dt) check(b->f64);
    else check(b->f32);
  }
  EXPECT_NE(b->vec.dot, nullptr);
  EXPECT_NE(b->vec.norms, nullptr);
  EXPECT_EQ(ddnn::HostVecOps.dot, nullptr); /* host tensors keep tensorops.cxx's loops */
  EXPECT_EQ(ddnn::HostVecOps.norms, nullptr);
}

/* ------------------------------------------------------------------------------------------ */
/* batch and group normalization                                                              */

namespace
{
template <class T>
void NormCase(const std::vector<PetscInt> &n, const Fmt &f, PetscInt hx, PetscInt hy, PetscInt cl, bool persample, unsigned seed)
{
  const std::string what = Describe(n, f, hx, hy, cl, TypeName<T>()) + (persample ? " per sample" : " per channel");
  const DDLayout    Lx = MakeLayout(n, f, hx, cl), Ly = MakeLayout(n, f, hy, cl, 1), Lo = MakeLayout(n, f, hy + 1, cl);
  ASSERT_TRUE(ddnn::NormLayoutsMatch(Lx, Ly) && ddnn::NormLayoutsMatch(Lx, Lo)) << what;
  const KernelTable<T> &r = ddnn::Table<T>(Ref()), &g = ddnn::Table<T>(Gpu());
  const size_t          G = (size_t)((persample ? n[0] : 1) * n[1]);
  const double          tol = Tol<T>();
  /* x away from zero: the moments must not subtract squares */
  const std::vector<T> x = Random<T>((size_t)Lx.size, seed, 9, 11), dy = Random<T>((size_t)Ly.size, seed + 1), y0 = Random<T>((size_t)Ly.size, seed + 2), dx0 = Random<T>((size_t)Lo.size, seed + 3);
  Dev<T>               dX(x), dDy(dy), dY(y0), dDx(dx0);

  /* moments */
  std::vector<double> cr(G), mr(G), qr(G), cd(G, -1), md(G, -1), qd(G, -1), cd2(G), md2(G), qd2(G);
  r.normmoments(Lx, x.data(), persample, cr.data(), mr.data(), qr.data());
  g.normmoments(Lx, dX.d, persample, cd.data(), md.data(), qd.data());
  CHECK_PENDING();
  EXPECT_EQ(cr, cd) << what << ": counts";
  ExpectClose(mr, md, 1e-12, what + ": mean");
  ExpectClose(qr, qd, 1e-12, what + ": m2");
  g.normmoments(Lx, dX.d, persample, cd2.data(), md2.data(), qd2.data());
  CHECK_PENDING();
  ExpectSameBits(md, md2, what + ": mean");
  ExpectSameBits(qd, qd2, what + ": m2");

  /* y = a (x - mu) + b into another layout (its halo kept) */
  const std::vector<double> a = Random<double>(G, seed + 4, 0.5, 2), b = Random<double>(G, seed + 5), c = Random<double>(G, seed + 6);
  std::vector<T>            yr(y0);
  r.normscaleshift(Lx, x.data(), Ly, yr.data(), persample, mr.data(), a.data(), b.data());
  g.normscaleshift(Lx, dX.d, Ly, dY.d, persample, mr.data(), a.data(), b.data());
  CHECK_PENDING();
  ExpectClose(yr, dY.Get(), tol, what + ": scale and shift");

  /* backward sums */
  std::vector<double> s1r(G), s2r(G), s1d(G, -1), s2d(G, -1), s1e(G), s2e(G);
  r.normbwdsums(Lx, x.data(), Ly, dy.data(), persample, mr.data(), s1r.data(), s2r.data());
  g.normbwdsums(Lx, dX.d, Ly, dDy.d, persample, mr.data(), s1d.data(), s2d.data());
  g.normbwdsums(Lx, dX.d, Ly, dDy.d, persample, mr.data(), s1e.data(), s2e.data());
  CHECK_PENDING();
  ExpectClose(s1r, s1d, 1e-12, what + ": sum dy");
  ExpectClose(s2r, s2d, 1e-12, what + ": sum dy (x - mu)");
  ExpectSameBits(s1d, s1e, what + ": sum dy");
  ExpectSameBits(s2d, s2e, what + ": sum dy (x - mu)");

  /* dx = a dy + b (x - mu) + c into a third layout */
  std::vector<T> dxr(dx0);
  r.normbwdapply(Lx, x.data(), Ly, dy.data(), Lo, dxr.data(), persample, mr.data(), a.data(), b.data(), c.data());
  g.normbwdapply(Lx, dX.d, Ly, dDy.d, Lo, dDx.d, persample, mr.data(), a.data(), b.data(), c.data());
  CHECK_PENDING();
  ExpectClose(dxr, dDx.Get(), tol, what + ": backward");
}
} // namespace

TEST(GpuKernels, NormMatchesReference)
{
  REQUIRE_DEVICE();
  unsigned seed = 100;
  for (const auto &n : NormPieces())
    for (const Fmt &f : kFormats)
      for (PetscInt cl : {0, 1})
        for (bool persample : {false, true}) {
          const PetscInt hx = (PetscInt)(seed % 3), hy = (PetscInt)((seed / 3) % 2);
          NormCase<float>(n, f, hx, hy, cl, persample, seed++);
          NormCase<double>(n, f, hx, hy, cl, persample, seed++);
        }
}

/* a failure inside a void entry (layouts of different pieces) is kept and raised by the next check, with its message */
TEST(GpuKernels, NormMismatchIsAPendingError)
{
  REQUIRE_DEVICE();
#if DDNN_WITH_CUDA
  const DDLayout      Lx = MakeLayout({2, 3, 4}, kFormats[0], 0), Ly = MakeLayout({2, 3, 5}, kFormats[0], 0);
  Dev<double>         x(std::vector<double>((size_t)Lx.size, 1.0)), y(std::vector<double>((size_t)Ly.size, 0.0));
  std::vector<double> mu(3, 0), a(3, 1), b(3, 0);
  Gpu()->f64.normscaleshift(Lx, x.d, Ly, y.d, false, mu.data(), a.data(), b.data());
  std::string msg;
  EXPECT_NE(Catch([&]() { return DDBackendCudaCheckPending_Private(); }, &msg), 0);
  EXPECT_NE(msg.find("normalization"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dimension 2"), std::string::npos) << msg;
  CHECK_PENDING(); /* raised once, then cleared */
#endif
}

/* ------------------------------------------------------------------------------------------ */
/* layer normalization                                                                        */

namespace
{
template <class T>
void LayerNormCase(PetscInt R, PetscInt M, unsigned seed)
{
  std::ostringstream o;
  o << TypeName<T>() << " R " << R << " M " << M;
  const std::string     what = o.str();
  const KernelTable<T> &r = ddnn::Table<T>(Ref()), &g = ddnn::Table<T>(Gpu());
  const double          tol = Tol<T>();
  const size_t          RM = (size_t)(R * M), Rs = (size_t)R, Ms = (size_t)M;
  const std::vector<T>  x = Random<T>(RM, seed, 4, 6), dy = Random<T>(RM, seed + 1), w = Random<T>(Ms, seed + 2, 0.5, 1.5), b = Random<T>(Ms, seed + 3), y0 = Random<T>(RM, seed + 4);
  Dev<T>                dX(x), dDy(dy), dW(w), dB(b), dY(y0), dDx(y0), dDw(std::vector<T>(Ms, (T)7)), dDb(std::vector<T>(Ms, (T)7));

  /* sums: plain, then of squared deviations from the mean */
  std::vector<double> sr(Rs), sd(Rs, -1), se(Rs);
  r.lnsums(R, M, x.data(), nullptr, sr.data());
  g.lnsums(R, M, dX.d, nullptr, sd.data());
  g.lnsums(R, M, dX.d, nullptr, se.data());
  CHECK_PENDING();
  ExpectClose(sr, sd, 1e-12, what + ": sums");
  ExpectSameBits(sd, se, what + ": sums");
  std::vector<double> mean(Rs), rstd(Rs);
  for (size_t i = 0; i < Rs; i++) mean[i] = M ? sr[i] / (double)M : 0;
  r.lnsums(R, M, x.data(), mean.data(), sr.data());
  g.lnsums(R, M, dX.d, mean.data(), sd.data());
  g.lnsums(R, M, dX.d, mean.data(), se.data());
  CHECK_PENDING();
  ExpectClose(sr, sd, 1e-12, what + ": squared deviations");
  ExpectSameBits(sd, se, what + ": squared deviations");
  for (size_t i = 0; i < Rs; i++) rstd[i] = 1 / std::sqrt((M ? sr[i] / (double)M : 0) + 1e-5);

  /* y = w (x - mean) rstd + b */
  std::vector<T> yr(y0);
  r.lnapply(R, M, x.data(), mean.data(), rstd.data(), w.data(), b.data(), yr.data());
  g.lnapply(R, M, dX.d, mean.data(), rstd.data(), dW.d, dB.d, dY.d);
  CHECK_PENDING();
  ExpectClose(yr, dY.Get(), tol, what + ": apply");

  /* backward sums: dw, db (set) and the row sums g1, g2 */
  std::vector<T>      dwr(Ms, (T)7), dbr(Ms, (T)7);
  std::vector<double> g1r(Rs), g2r(Rs), g1d(Rs, -1), g2d(Rs, -1), g1e(Rs), g2e(Rs);
  r.lnbwdsums(R, M, x.data(), dy.data(), mean.data(), rstd.data(), w.data(), dwr.data(), dbr.data(), g1r.data(), g2r.data());
  g.lnbwdsums(R, M, dX.d, dDy.d, mean.data(), rstd.data(), dW.d, dDw.d, dDb.d, g1d.data(), g2d.data());
  CHECK_PENDING();
  const std::vector<T> dw1 = dDw.Get(), db1 = dDb.Get();
  ExpectClose(dwr, dw1, tol, what + ": dw");
  ExpectClose(dbr, db1, tol, what + ": db");
  ExpectClose(g1r, g1d, 1e-12, what + ": g1");
  ExpectClose(g2r, g2d, 1e-12, what + ": g2");
  g.lnbwdsums(R, M, dX.d, dDy.d, mean.data(), rstd.data(), dW.d, dDw.d, dDb.d, g1e.data(), g2e.data());
  CHECK_PENDING();
  ExpectSameBits(g1d, g1e, what + ": g1");
  ExpectSameBits(g2d, g2e, what + ": g2");
  ExpectSameBits(dw1, dDw.Get(), what + ": dw");
  ExpectSameBits(db1, dDb.Get(), what + ": db");

  /* dx = rstd (w dy - G1 - xhat G2) */
  std::vector<double> G1(Rs), G2(Rs);
  for (size_t i = 0; i < Rs; i++) {
    G1[i] = M ? g1r[i] / (double)M : 0;
    G2[i] = M ? g2r[i] / (double)M : 0;
  }
  std::vector<T> dxr(y0);
  r.lnbwdapply(R, M, x.data(), dy.data(), mean.data(), rstd.data(), w.data(), G1.data(), G2.data(), dxr.data());
  g.lnbwdapply(R, M, dX.d, dDy.d, mean.data(), rstd.data(), dW.d, G1.data(), G2.data(), dDx.d);
  CHECK_PENDING();
  ExpectClose(dxr, dDx.Get(), tol, what + ": backward");
}
} // namespace

TEST(GpuKernels, LayerNormMatchesReference)
{
  REQUIRE_DEVICE();
  unsigned seed = 300;
  /* empty (no rows, no columns), single entries, odd sizes, rows longer than one part (4096), many rows (several row parts of the column sums) */
  const std::vector<std::pair<PetscInt, PetscInt>> sizes = {{0, 5}, {3, 0}, {0, 0}, {1, 1}, {3, 5}, {17, 33}, {2, 5000}, {200, 12}, {1000, 3}};
  for (const auto &s : sizes) {
    LayerNormCase<float>(s.first, s.second, seed++);
    LayerNormCase<double>(s.first, s.second, seed++);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* optimizers                                                                                 */

namespace
{
/* five steps of every rule (SGD plain, momentum, Nesterov, weight decay; Adam, AdamW) on the device and the reference, a gradient with inf and NaN */
template <class T>
void OptimizerCase(PetscInt n)
{
  const KernelTable<T> &r = ddnn::Table<T>(Ref()), &g = ddnn::Table<T>(Gpu());
  size_t                differ = 0;
  for (int rule = 0; rule < 8; rule++) {
    std::ostringstream o;
    o << TypeName<T>() << " rule " << rule << " n " << n;
    const std::string      what = o.str();
    ddnn::SGDCoefficients  sc;
    ddnn::AdamCoefficients ac;
    const bool             adam = rule >= 5;
    OptimizerRule(rule, sc, ac);
    std::vector<T> p = Random<T>((size_t)n, 21), m = Random<T>((size_t)n, 22), v((size_t)n);
    for (size_t i = 0; i < v.size(); i++) v[i] = (T)(0.5 * (m[i] + 1));
    Dev<T> dp(p), dm(m), dv(v);
    for (int step = 1; step <= 5; step++) {
      std::vector<T> gr = Random<T>((size_t)n, 30 + step);
      if (n > 9 && step == 3) {
        gr[5] = (T)INFINITY;
        gr[9] = (T)NAN;
      }
      Dev<T> dg(gr);
      sc.first = step == 1;
      ac.bc1   = 1 - std::pow(ac.beta1, step);
      ac.bc2   = 1 - std::pow(ac.beta2, step);
      if (adam) {
        r.adamupdate(n, p.data(), gr.data(), m.data(), v.data(), ac);
        g.adamupdate(n, dp.d, dg.d, dm.d, dv.d, ac);
      } else {
        r.sgdupdate(n, p.data(), gr.data(), m.data(), sc);
        g.sgdupdate(n, dp.d, dg.d, dm.d, sc);
      }
      CHECK_PENDING();
    }
    const std::vector<T> pd = dp.Get(), md = dm.Get(), vd = dv.Get();
    ExpectClose(p, pd, Tol<T>(), what + ": parameters");
    ExpectClose(m, md, Tol<T>(), what + (adam ? ": first moments" : ": momentum buffers"));
    if (adam) ExpectClose(v, vd, Tol<T>(), what + ": second moments");
    for (size_t i = 0; i < (size_t)n; i++) differ += std::memcmp(&p[i], &pd[i], sizeof(T)) != 0 && !(std::isnan(p[i]) && std::isnan(pd[i]));
  }
  /* (the kernels do the host loop's operations one by one, without fused multiply-adds: the same bits are expected, but only the tolerance is required) */
  if (differ) std::printf("[   info   ] %s n %" PetscInt_FMT ": %zu parameters differ from the reference in their bits (within tolerance)\n", TypeName<T>(), n, differ);
}
} // namespace

TEST(GpuKernels, OptimizersMatchReference)
{
  REQUIRE_DEVICE();
  for (PetscInt n : {0, 1, 5, 17, 1001, 100003}) {
    OptimizerCase<float>(n);
    OptimizerCase<double>(n);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* interpolation                                                                              */

namespace
{
template <class T>
void UpsampleCase(const UpCase &c, const Fmt &f, PetscInt halo)
{
  std::ostringstream o;
  o << (c.linear ? (c.align ? "linear align" : "linear") : "nearest") << " D" << c.D << " N" << c.N << " C" << c.C << " n";
  for (auto v : c.n) o << " " << v;
  o << " s";
  for (auto v : c.s) o << " " << v;
  o << (c.part ? " part " : " ") << f.name << " halo " << halo << " " << TypeName<T>();
  const std::string        what = o.str();
  ddnn::UpsampleKernelSpec spec;
  ddnn::UpsampleGeom      &g = spec.g;
  PetscInt                 wlo[3], wn[3], on[3], org[5] = {0}, xn[5] = {c.N, c.C, 1, 1, 1}, yorg[5] = {0}, yn[5] = {c.N, c.C, 1, 1, 1};
  std::vector<PetscInt>    xs, ys;
  UpsampleCaseGeometry<T>(c, &g, wlo, wn, on, &xs, &ys);
  for (PetscInt j = 0; j < c.D; j++) {
    org[2 + j]  = halo + wlo[j]; /* the window, in storage coordinates */
    xn[2 + j]   = wn[j];
    yorg[2 + j] = halo ? 1 : 0;
    yn[2 + j]   = on[j];
  }
  const DDLayout Lx = MakeLayout(xs, f, halo), Ly = MakeLayout(ys, f, halo ? 1 : 0);
  ddnn::BoxOffsetsBuild(Lx, c.D, org, xn, &spec.xo);
  ddnn::BoxOffsetsBuild(Ly, c.D, yorg, yn, &spec.yo);
  const std::vector<T> x = Random<T>((size_t)Lx.size, 1), y0 = Random<T>((size_t)Ly.size, 2), dy = Random<T>((size_t)Ly.size, 3), dx0 = Random<T>((size_t)Lx.size, 4);
  Dev<T>               dX(x), dY(y0), dDy(dy), dDx(dx0);
  std::unique_ptr<ddnn::UpsampleKernel> k;
  DDT(ddnn::Table<T>(Gpu()).upsamplecreate(spec, &k));
  ASSERT_TRUE(k) << what;
  EXPECT_STREQ(k->Name(), "CUDA interpolation loops");
  /* forward overwrites the box (the storage around it kept), backward adds onto the window */
  std::vector<T> yr(y0), dxr(dx0);
  ddnn::Table<T>(Ref()).upsamplefwd(g, x.data(), spec.xo, yr.data(), spec.yo);
  DDT(k->Forward(dX.d, dY.d));
  CHECK_PENDING();
  ExpectClose(yr, dY.Get(), Tol<T>(), "forward " + what);
  ddnn::Table<T>(Ref()).upsamplebwd(g, dy.data(), spec.yo, dxr.data(), spec.xo);
  DDT(k->Backward(dDy.d, dDx.d));
  CHECK_PENDING();
  ExpectClose(dxr, dDx.Get(), Tol<T>(), "backward " + what);
}
} // namespace

TEST(GpuKernels, UpsampleMatchesReference)
{
  REQUIRE_DEVICE();
  ForEachUpCase({{2, 2, 2}, {3, 1, 2}}, 7, [](const UpCase &c) {
    for (const Fmt &f : kFormats)
      for (PetscInt h : {0, 2}) {
        UpsampleCase<double>(c, f, h);
        UpsampleCase<float>(c, f, h);
      }
  });
  /* an empty piece (no samples): nothing to do, nothing touched */
  UpCase c;
  c.N = 0;
  c.n = {5, 4};
  c.s = {2, 2};
  UpsampleCase<double>(c, kFormats[2], 1);
  UpsampleCase<float>(c, kFormats[1], 0);
}

/* ------------------------------------------------------------------------------------------ */
/* DDTensor's reductions on device tensors                                                     */

namespace
{
DDTensor MakeTensor(DDDataType dt, DDMemType mt, DDTensorFormat fmt, PetscInt halo, const std::vector<PetscInt> &shape)
{
  const PetscInt        P     = Size();
  const PetscInt        order = (PetscInt)shape.size();
  std::vector<PetscInt> pshape((size_t)order, 1), lo((size_t)order, 0), hi((size_t)order, 0);
  pshape[2] = P;
  for (PetscInt k = 2; k < order; k++) lo[(size_t)k] = halo, hi[(size_t)k] = k == 2 ? halo + 1 : 0;
  DDPartition part;
  DDTensor    t;
  DDT(DDPartitionCreate(PETSC_COMM_WORLD, &part));
  DDT(DDPartitionSetShape(part, order, pshape.data()));
  DDT(DDPartitionSetUp(part));
  DDT(DDTensorCreate(PETSC_COMM_WORLD, &t));
  DDT(DDTensorSetPartition(t, part));
  DDT(DDPartitionDestroy(&part));
  DDT(DDTensorSetShape(t, order, shape.data()));
  DDT(DDTensorSetDataType(t, dt));
  DDT(DDTensorSetFormat(t, fmt));
  if (fmt == DD_FORMAT_BLOCKED) DDT(DDTensorSetBlockSize(t, 4));
  DDT(DDTensorSetHalo(t, lo.data(), hi.data()));
  DDT(DDTensorSetMemType(t, mt));
  DDT(DDTensorSetUp(t));
  return t;
}
bool SameBits(double a, double b) { return !std::memcmp(&a, &b, sizeof a); }
} // namespace

TEST(GpuKernels, TensorReductionsMatchHost)
{
  REQUIRE_DEVICE();
  const DDTensorFormat                     fmts[3] = {DD_FORMAT_PLAIN, DD_FORMAT_CHANNELS_LAST, DD_FORMAT_BLOCKED};
  const std::vector<std::vector<PetscInt>> shapes  = {{2, 5, 3 * Size() + 1, 4}, {3, 7, 40 * Size(), 33}, {1, 3, Size(), 2, 5}};
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64})
    for (const auto &shape : shapes)
      for (int fx = 0; fx < 3; fx++) {
        const int         fy   = (fx + 1) % 3;
        const std::string what = std::string(DDDataTypes[dt]) + " " + DDTensorFormats[fmts[fx]] + " . " + DDTensorFormats[fmts[fy]] + " of " + std::to_string(shape.size()) + " dimensions, " + std::to_string(shape[1]) + " channels";
        DDTensor          hx = MakeTensor(dt, DD_MEMTYPE_HOST, fmts[fx], 1, shape), hy = MakeTensor(dt, DD_MEMTYPE_HOST, fmts[fy], 2, shape);
        DDTensor          gx = MakeTensor(dt, DD_MEMTYPE_DEVICE, fmts[fx], 1, shape), gy = MakeTensor(dt, DD_MEMTYPE_DEVICE, fmts[fy], 2, shape);
        DDT(DDTensorSetRandomGlobal(hx, 21, -1, 3));
        DDT(DDTensorSetRandomGlobal(gx, 21, -1, 3)); /* through the host copy: the same entries */
        DDT(DDTensorSetRandomGlobal(hy, 22, -2, 1));
        DDT(DDTensorSetRandomGlobal(gy, 22, -2, 1));
        PetscReal h, d, e;
        DDT(DDTensorDot(hx, hy, &h));
        DDT(DDTensorDot(gx, gy, &d));
        DDT(DDTensorDot(gx, gy, &e));
        EXPECT_TRUE(Close(h, d, 1e-12)) << what << " dot: host " << h << ", device " << d;
        EXPECT_TRUE(SameBits(d, e)) << what << " dot: two runs differ";
        DDT(DDTensorDot(hx, hx, &h));
        DDT(DDTensorDot(gx, gx, &d));
        EXPECT_TRUE(Close(h, d, 1e-12)) << what << " dot with itself: host " << h << ", device " << d;
        DDT(DDTensorSum(hx, &h));
        DDT(DDTensorSum(gx, &d));
        DDT(DDTensorSum(gx, &e));
        EXPECT_TRUE(Close(h, d, 1e-12)) << what << " sum: host " << h << ", device " << d;
        EXPECT_TRUE(SameBits(d, e)) << what << " sum: two runs differ";
        for (NormType nt : {NORM_1, NORM_2, NORM_INFINITY}) {
          DDT(DDTensorNorm(hy, nt, &h));
          DDT(DDTensorNorm(gy, nt, &d));
          DDT(DDTensorNorm(gy, nt, &e));
          if (nt == NORM_INFINITY) EXPECT_EQ(h, d) << what << " infinity norm"; /* a maximum: exact */
          else EXPECT_TRUE(Close(h, d, 1e-12)) << what << " " << NormTypes[nt] << " norm: host " << h << ", device " << d;
          EXPECT_TRUE(SameBits(d, e)) << what << " " << NormTypes[nt] << " norm: two runs differ";
        }
        /* the global gradient norm: host tensors, device tensors, and both mixed */
        const DDTensor hs[2] = {hx, hy}, gs[2] = {gx, gy}, ms[2] = {hx, gy};
        PetscReal      sh, sg, sm, sg2;
        DDT(DDTensorNorm2SquaredSum_Private(PETSC_COMM_WORLD, 2, hs, &sh));
        DDT(DDTensorNorm2SquaredSum_Private(PETSC_COMM_WORLD, 2, gs, &sg));
        DDT(DDTensorNorm2SquaredSum_Private(PETSC_COMM_WORLD, 2, gs, &sg2));
        DDT(DDTensorNorm2SquaredSum_Private(PETSC_COMM_WORLD, 2, ms, &sm));
        EXPECT_TRUE(Close(sh, sg, 1e-12)) << what << " squared sum: host " << sh << ", device " << sg;
        EXPECT_TRUE(Close(sh, sm, 1e-12)) << what << " squared sum: host " << sh << ", mixed " << sm;
        EXPECT_TRUE(SameBits(sg, sg2)) << what << " squared sum: two runs differ";
        /* a NaN entry: every device reduction NaN, the infinity norm too */
        void *a;
        DDT(DDTensorGetArray(gx, &a));
        PetscInt g0[DD_MAX_DIM] = {0}, off;
        DDT(DDTensorGetCorners(gx, g0, NULL));
        DDT(DDTensorGetLocalOffset(gx, g0, &off));
        if (dt == DD_FLOAT32) ((float *)a)[off] = NAN;
        else ((double *)a)[off] = NAN;
        DDT(DDTensorRestoreArray(gx, &a));
        DDT(DDTensorSum(gx, &d));
        EXPECT_TRUE(std::isnan(d)) << what << " sum with a NaN: " << d;
        DDT(DDTensorDot(gx, gy, &d));
        EXPECT_TRUE(std::isnan(d)) << what << " dot with a NaN: " << d;
        for (NormType nt : {NORM_1, NORM_2, NORM_INFINITY}) {
          DDT(DDTensorNorm(gx, nt, &d));
          EXPECT_TRUE(std::isnan(d)) << what << " " << NormTypes[nt] << " norm with a NaN: " << d;
        }
        for (DDTensor *t : {&hx, &hy, &gx, &gy}) DDT(DDTensorDestroy(t));
      }
}

/* the entries directly: empty bulks give zeros, and the results agree across storage formats of the same entries */
TEST(GpuKernels, VecReductionEntries)
{
  REQUIRE_DEVICE();
  const struct _DDBackendVecOps &v = Gpu()->vec;
  for (DDDataType dt : {DD_FLOAT32, DD_FLOAT64}) {
    const DDLayout E = MakeLayout({0, 5, 3}, kFormats[2], 1);
    double         r[4] = {1, 1, 1, 1}, d = 1;
    Dev<double>    buf(std::vector<double>(16, 1.0));
    DDT(v.norms(dt, &E, buf.d, r));
    DDT(v.dot(dt, &E, buf.d, &E, buf.d, &d));
    for (double e : r) EXPECT_EQ(e, 0.0) << DDDataTypes[dt] << " empty bulk";
    EXPECT_EQ(d, 0.0) << DDDataTypes[dt] << " empty bulk";
  }
  /*
    One piece in three storage formats, all with halos: the device walks each bulk in C order of
    the bulk index (the layout's offsets), so the same entries give the same bits in every format.
  */
  const std::vector<PetscInt> n = {3, 6, 9, 11};
  std::vector<double>         ref;
  for (const Fmt &f : kFormats) {
    const DDLayout      L = MakeLayout(n, f, 1);
    std::vector<double> h((size_t)L.size, 0.0);
    PetscInt            i = 0, j[DD_MAX_DIM];
    for (j[0] = 0; j[0] < n[0]; j[0]++)
      for (j[1] = 0; j[1] < n[1]; j[1]++)
        for (j[2] = 0; j[2] < n[2]; j[2]++)
          for (j[3] = 0; j[3] < n[3]; j[3]++, i++) {
            PetscInt s[DD_MAX_DIM];
            for (int k = 0; k < 4; k++) s[k] = j[k] + L.lo[k];
            h[(size_t)ddnn::LayoutOffset(L, s)] = std::sin(0.37 * (double)i) * 3;
          }
    Dev<double> x(h);
    double      r[4], dd;
    DDT(v.norms(DD_FLOAT64, &L, x.d, r));
    DDT(v.dot(DD_FLOAT64, &L, x.d, &L, x.d, &dd));
    EXPECT_TRUE(Close(r[2], dd, 1e-12)) << f.name << ": sum of squares " << r[2] << ", dot " << dd;
    if (ref.empty()) ref.assign(r, r + 4);
    else
      for (int k = 0; k < 4; k++) EXPECT_TRUE(SameBits(ref[(size_t)k], r[k])) << f.name << " result " << k << ": " << ref[(size_t)k] << " vs " << r[k];
  }
}
