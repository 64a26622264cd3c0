/*
  test_08_kernels - the GEMM kernels of the convolution and the transposed convolution
  (src/backend/blas/conv_gemm.cxx) equal the reference loops (src/backend/reference), in float64
  and float32, on random geometries (fixed seed): 1-D, 2-D, 3-D, kernel sizes 1-5, strides 1-3,
  dilations 1-2, channels and samples including 0 and 1, empty outputs, transposed-convolution
  crops of either sign, plain and channels-last views inside bigger buffers (halos), and the
  accumulate semantics (dx, dw, db pre-filled); grouped convolutions, also over partitioned channels
  (ConvGeom's cig, cog, ci0, co0: local channels that cut groups). Whole buffers are compared, so a
  write outside a view fails too.
*/
#include "ddtest.hpp"
#include <backend/blas/conv_gemm.hpp>
#include <backend/blas/conv_winograd.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

using namespace ddnn;

namespace
{
/*
  A tensor of sizes (N, C, e0, e1, e2) inside a bigger buffer: every dimension gets lo and hi
  extra entries (a halo) when halo; storage order (N, C, e0, e1, e2) or channels-last (N, e0, e1, e2, C).
*/
template <class T>
struct Buf {
  std::vector<T> a;
  View<T>        v;
};

template <class T>
Buf<T> MakeBuf(PetscInt N, PetscInt C, const PetscInt e[3], bool cl, bool halo, std::mt19937 &rng)
{
  const PetscInt ext[5] = {N, C, e[0], e[1], e[2]};
  PetscInt       lo[5], full[5], stride[5];
  for (int i = 0; i < 5; i++) {
    lo[i]   = halo ? (PetscInt)(rng() % 3) : 0;
    full[i] = ext[i] + lo[i] + (halo ? (PetscInt)(rng() % 3) : 0);
  }
  const int order_plain[5] = {0, 1, 2, 3, 4}, order_cl[5] = {0, 2, 3, 4, 1};
  const int *order          = cl ? order_cl : order_plain;
  PetscInt   s              = 1;
  for (int i = 4; i >= 0; i--) {
    stride[order[i]] = s;
    s *= full[order[i]];
  }
  Buf<T>                                 b;
  std::uniform_real_distribution<double> u(-1, 1);
  b.a.resize((size_t)s);
  for (auto &x : b.a) x = (T)u(rng);
  PetscInt off = 0;
  for (int i = 0; i < 5; i++) off += lo[i] * stride[i];
  b.v.p  = b.a.data() + off;
  b.v.sn = stride[0];
  b.v.sc = stride[1];
  b.v.s0 = stride[2];
  b.v.s1 = stride[3];
  b.v.s2 = stride[4];
  return b;
}

/* the same view into another copy of the buffer */
template <class T>
View<T> Rebase(const Buf<T> &from, std::vector<T> &to)
{
  View<T> v = from.v;
  v.p       = to.data() + (from.v.p - from.a.data());
  return v;
}

template <class T>
std::vector<T> Random(size_t n, std::mt19937 &rng)
{
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T>                         r(n);
  for (auto &x : r) x = (T)u(rng);
  return r;
}

/*
  max over entries of |a - b| / bound, where bound is the same computation on the absolute
  values of every input (sum |terms|): the denominator of the rounding-error bound, so that the
  test does not depend on cancellation or on the length of the sums
*/
template <class T>
double RelErr(const std::vector<T> &a, const std::vector<T> &b, const std::vector<T> &bound)
{
  double e = 0;
  for (size_t i = 0; i < a.size(); i++) e = std::max(e, std::fabs((double)a[i] - (double)b[i]) / std::max((double)bound[i], 1e-300));
  return e;
}

template <class T>
std::vector<T> Abs(std::vector<T> v)
{
  for (auto &x : v) x = std::fabs(x);
  return v;
}

template <class T>
double Tol();
template <>
double Tol<double>()
{
  return 1e-12;
}
template <>
double Tol<float>()
{
  return 1e-5;
}

struct Case {
  ConvTGeom g;
  bool      transposed = false, clx = false, cly = false, halox = false, haloy = false, bias = true, dbias = true;
  std::string Describe() const
  {
    std::ostringstream o;
    o << (transposed ? "convT" : "conv") << " D=" << g.D << " N=" << g.N << " Ci=" << g.Ci << " Co=" << g.Co << " groups=" << g.groups << " cig=" << g.cig << " cog=" << g.cog << " ci0=" << g.ci0 << " co0=" << g.co0;
    for (int j = 0; j < 3; j++)
      o << " [in " << g.in[j] << " out " << g.out[j] << " k " << g.k[j] << " s " << g.s[j] << " d " << g.d[j] << " pl " << g.pl[j] << " pr " << g.pr[j] << "]";
    o << (clx ? " x:cl" : " x:plain") << (halox ? "+halo" : "") << (cly ? " y:cl" : " y:plain") << (haloy ? "+halo" : "") << (bias ? "" : " b=NULL") << (dbias ? "" : " db=NULL");
    return o.str();
  }
};

/*
  Runs the three kernels of the case, reference and GEMM, on identical copies, and checks the
  errors of y, dx, dw, db (whole buffers, halos included) relative to the error bounds.
*/
template <class T>
void Compare(const Case &c, std::mt19937 &rng, bool winograd = false)
{
  const ConvTGeom &g  = c.g;
  const PetscInt   KK = g.KK();
  /* x lives on the window side (conv: in; convT: in) and y on the box side (out) */
  Buf<T>         X  = MakeBuf<T>(g.N, g.Ci, g.in, c.clx, c.halox, rng);
  Buf<T>         Y  = MakeBuf<T>(g.N, g.Co, g.out, c.cly, c.haloy, rng);
  Buf<T>         DY = MakeBuf<T>(g.N, g.Co, g.out, c.cly, c.haloy, rng);
  Buf<T>         DX = MakeBuf<T>(g.N, g.Ci, g.in, c.clx, c.halox, rng);
  std::vector<T> w  = Random<T>((size_t)((c.transposed ? g.Ci * g.Cog() : g.Co * g.Cig()) * KK), rng), b = Random<T>((size_t)g.Co, rng);
  std::vector<T> dw = Random<T>(w.size(), rng), db = Random<T>(b.size(), rng);
  const T       *bp = c.bias ? b.data() : nullptr;

  std::vector<T> y1 = Y.a, y2 = Y.a, dx1 = DX.a, dx2 = DX.a, dw1 = dw, dw2 = dw, db1 = db, db2 = db;
  View<T>        vy1 = Rebase(Y, y1), vy2 = Rebase(Y, y2), vdx1 = Rebase(DX, dx1), vdx2 = Rebase(DX, dx2);
  View<const T>  vx = CView(X.v), vdy = CView(DY.v);
  T             *db1p = c.dbias ? db1.data() : nullptr, *db2p = c.dbias ? db2.data() : nullptr;
  if (!c.transposed) { /* the GEMM kernels, or the Winograd ones */
    if (winograd) EXPECT_TRUE(ConvWinogradApplies(g)) << c.Describe();
    ConvForwardRef<T>(g, vx, w.data(), bp, vy1);
    (winograd ? ConvForwardWinograd<T> : ConvForwardGemm<T>)(g, vx, w.data(), bp, vy2);
    ConvBackwardDataRef<T>(g, vdy, w.data(), vdx1);
    (winograd ? ConvBackwardDataWinograd<T> : ConvBackwardDataGemm<T>)(g, vdy, w.data(), vdx2);
    ConvBackwardWeightsRef<T>(g, vx, vdy, dw1.data(), db1p);
    (winograd ? ConvBackwardWeightsWinograd<T> : ConvBackwardWeightsGemm<T>)(g, vx, vdy, dw2.data(), db2p);
  } else {
    ConvTForwardRef<T>(g, vx, w.data(), bp, vy1);
    ConvTForwardGemm<T>(g, vx, w.data(), bp, vy2);
    ConvTBackwardDataRef<T>(g, vdy, w.data(), vdx1);
    ConvTBackwardDataGemm<T>(g, vdy, w.data(), vdx2);
    ConvTBackwardWeightsRef<T>(g, vx, vdy, dw1.data(), db1p);
    ConvTBackwardWeightsGemm<T>(g, vx, vdy, dw2.data(), db2p);
  }
  /* the bounds: the reference on |inputs|, accumulating into |prefill| */
  std::vector<T> ax = Abs(X.a), ady = Abs(DY.a), aw = Abs(w), ab = Abs(b), ey = Abs(Y.a), edx = Abs(DX.a), edw = Abs(dw), edb = Abs(db);
  View<T>        vey = Rebase(Y, ey), vedx = Rebase(DX, edx);
  View<const T>  vax = CView(Rebase(X, ax)), vady = CView(Rebase(DY, ady));
  T             *edbp = c.dbias ? edb.data() : nullptr;
  const T       *abp  = c.bias ? ab.data() : nullptr;
  if (!c.transposed) {
    ConvForwardRef<T>(g, vax, aw.data(), abp, vey);
    ConvBackwardDataRef<T>(g, vady, aw.data(), vedx);
    ConvBackwardWeightsRef<T>(g, vax, vady, edw.data(), edbp);
  } else {
    ConvTForwardRef<T>(g, vax, aw.data(), abp, vey);
    ConvTBackwardDataRef<T>(g, vady, aw.data(), vedx);
    ConvTBackwardWeightsRef<T>(g, vax, vady, edw.data(), edbp);
  }
  const double tol = Tol<T>();
  EXPECT_LE(RelErr(y1, y2, ey), tol) << "forward: " << c.Describe();
  EXPECT_LE(RelErr(dx1, dx2, edx), tol) << "backward data: " << c.Describe();
  EXPECT_LE(RelErr(dw1, dw2, edw), tol) << "backward weights: " << c.Describe();
  EXPECT_LE(RelErr(db1, db2, edb), tol) << "backward bias: " << c.Describe();
}

PetscInt Pick(std::mt19937 &rng, PetscInt lo, PetscInt hi) /* uniform in [lo, hi] */
{
  return lo + (PetscInt)(rng() % (unsigned)(hi - lo + 1));
}

/* random storage (plain or channels-last, halos) and bias options of a case */
void RandomOptions(Case &c, std::mt19937 &rng)
{
  c.clx   = rng() % 2;
  c.cly   = rng() % 2;
  c.halox = rng() % 2;
  c.haloy = rng() % 3 == 0;
  c.bias  = rng() % 4 != 0;
  c.dbias = rng() % 4 != 0;
}

/* a random case: D spatial dimensions, sizes small enough for the reference loops */
Case RandomCase(std::mt19937 &rng, bool transposed, PetscInt D)
{
  Case c;
  c.transposed = transposed;
  ConvTGeom &g = c.g;
  g.D          = D;
  g.N          = Pick(rng, 0, 7) == 0 ? 0 : Pick(rng, 1, 3);
  g.Ci         = Pick(rng, 0, 11) == 0 ? 0 : Pick(rng, 1, 4);
  g.Co         = Pick(rng, 0, 11) == 0 ? 0 : Pick(rng, 1, 4);
  for (PetscInt j = 3 - D; j < 3; j++) {
    g.k[j] = Pick(rng, 1, D == 3 ? 4 : 5);
    g.s[j] = Pick(rng, 1, 3);
    g.d[j] = Pick(rng, 1, 2);
    const PetscInt span = (g.k[j] - 1) * g.d[j] + 1;
    if (!transposed) {
      g.out[j] = Pick(rng, 0, 9) == 0 ? 0 : Pick(rng, 1, D == 1 ? 9 : 5);
      g.in[j]  = g.out[j] ? (g.out[j] - 1) * g.s[j] + span + Pick(rng, 0, 1) : Pick(rng, 0, 2); /* the window may be larger than needed */
    } else {
      g.in[j]  = Pick(rng, 0, 9) == 0 ? 0 : Pick(rng, 1, D == 1 ? 8 : 4);
      g.pl[j]  = Pick(rng, -2, span - 1);
      g.pr[j]  = Pick(rng, -2, span - 1);
      PetscInt o = (g.in[j] - 1) * g.s[j] - g.pl[j] - g.pr[j] + span;
      if (o < 0) { /* crop less on the right */
        g.pr[j] += o;
        o = 0;
      }
      g.out[j] = o;
    }
  }
  RandomOptions(c, rng);
  return c;
}

template <class T>
void RandomCases(bool transposed, unsigned seed, int count)
{
  std::mt19937 rng(seed);
  for (int i = 0; i < count; i++) Compare<T>(RandomCase(rng, transposed, 1 + i % 3), rng);
}

/*
  Random grouped cases: whole groups (groups = G, channels multiples of G), or a worker's block of
  groups over partitioned channels (cig, cog channels per group of G groups; local input channels
  [ci0, ci0 + Ci) and output channels [co0, co0 + Co) of the layer's, anywhere, empty included)
*/
template <class T>
void RandomGroupedCases(bool transposed, unsigned seed, int count)
{
  std::mt19937 rng(seed);
  for (int i = 0; i < count; i++) {
    Case           c  = RandomCase(rng, transposed, 1 + i % 3);
    ConvTGeom     &g  = c.g;
    const PetscInt G  = Pick(rng, 1, 4), cig = Pick(rng, 1, 3), cog = Pick(rng, 1, 3);
    if (i % 3 == 0) {
      g.groups = G;
      g.Ci     = G * cig;
      g.Co     = G * cog;
    } else {
      g.cig = cig;
      g.cog = cog;
      g.ci0 = Pick(rng, 0, G * cig - 1);
      g.co0 = Pick(rng, 0, G * cog - 1);
      g.Ci  = Pick(rng, 0, G * cig - g.ci0);
      g.Co  = Pick(rng, 0, G * cog - g.co0);
    }
    Compare<T>(c, rng);
  }
}
} // namespace

TEST(ConvGemm, RandomFloat64)
{
  RandomCases<double>(false, 2024, 600);
}
TEST(ConvGemm, RandomFloat32)
{
  RandomCases<float>(false, 2025, 600);
}
TEST(ConvTGemm, RandomFloat64)
{
  RandomCases<double>(true, 2026, 600);
}
TEST(ConvTGemm, RandomFloat32)
{
  RandomCases<float>(true, 2027, 600);
}
TEST(ConvGemm, GroupedAndPartitionedGroupsFloat64)
{
  RandomGroupedCases<double>(false, 3024, 400);
}
TEST(ConvGemm, GroupedAndPartitionedGroupsFloat32)
{
  RandomGroupedCases<float>(false, 3025, 400);
}
TEST(ConvTGemm, GroupedAndPartitionedGroupsFloat64)
{
  RandomGroupedCases<double>(true, 3026, 400);
}
TEST(ConvTGemm, GroupedAndPartitionedGroupsFloat32)
{
  RandomGroupedCases<float>(true, 3027, 400);
}

/* k = 1, unit strides: the kernels hand the views to BLAS without im2col where they are matrices */
template <class T>
void OneByOne(bool transposed)
{
  std::mt19937 rng(7);
  for (int i = 0; i < 48; i++) {
    Case c;
    c.transposed = transposed;
    ConvTGeom &g = c.g;
    g.D          = 1 + i % 3;
    g.N          = 1 + i % 3;
    g.Ci         = 1 + (i / 3) % 4;
    g.Co         = 1 + (i / 12) % 3;
    for (PetscInt j = 3 - g.D; j < 3; j++) {
      g.in[j]  = Pick(rng, 1, 6);
      g.s[j]   = g.in[j] == 1 ? Pick(rng, 1, 3) : 1;
      g.out[j] = g.in[j];
      if (transposed && i % 4 == 3) { /* output padding on the right: box rows no window entry reaches */
        g.pr[j] = -1;
        g.out[j]++;
      }
    }
    c.clx = (i / 2) % 2;
    c.cly = i % 2;
    c.halox = c.haloy = i % 8 == 7;
    Compare<T>(c, rng);
  }
}
TEST(ConvGemm, OneByOne)
{
  OneByOne<double>(false);
  OneByOne<float>(false);
}
TEST(ConvTGemm, OneByOne)
{
  OneByOne<double>(true);
  OneByOne<float>(true);
}

/* more positions than one tile: tiles start and end inside rows */
template <class T>
void ManyTiles(bool transposed)
{
  std::mt19937 rng(11);
  for (int i = 0; i < 4; i++) {
    Case c;
    c.transposed = transposed;
    ConvTGeom &g = c.g;
    g.D          = 2;
    g.N          = 2;
    g.Ci         = 3;
    g.Co         = 2;
    for (PetscInt j = 1; j < 3; j++) {
      g.k[j] = 3;
      g.s[j] = transposed ? 2 : 1;
      g.d[j] = 1 + (i % 2);
      if (!transposed) {
        g.out[j] = 190 + j;
        g.in[j]  = (g.out[j] - 1) * g.s[j] + (g.k[j] - 1) * g.d[j] + 1;
      } else {
        g.in[j]  = 120 + j;
        g.pl[j]  = 1;
        g.pr[j]  = 0;
        g.out[j] = (g.in[j] - 1) * g.s[j] - g.pl[j] - g.pr[j] + (g.k[j] - 1) * g.d[j] + 1;
      }
    }
    c.clx = c.cly = i / 2;
    c.halox       = i % 2;
    Compare<T>(c, rng);
  }
  /* a 3-D one and a 1x1 one */
  Case c;
  c.transposed = transposed;
  ConvTGeom &g = c.g;
  g.D = 3, g.N = 1, g.Ci = 2, g.Co = 3;
  for (PetscInt j = 0; j < 3; j++) {
    g.k[j]   = 2;
    g.in[j]  = 40;
    g.out[j] = transposed ? 41 : 39;
  }
  Compare<T>(c, rng);
  c.cly = true;
  for (PetscInt j = 0; j < 3; j++) g.k[j] = 1, g.in[j] = g.out[j] = 60;
  Compare<T>(c, rng);
}
TEST(ConvGemm, ManyTiles)
{
  ManyTiles<double>(false);
  ManyTiles<float>(false);
}
TEST(ConvTGemm, ManyTiles)
{
  ManyTiles<double>(true);
  ManyTiles<float>(true);
}

/* zero-sized N, Ci, Co, spatial: no crash, the reference's result (including y = b for an empty convT input) */
TEST(ConvGemm, Empty)
{
  std::mt19937 rng(3);
  for (int transposed = 0; transposed < 2; transposed++)
    for (int z = 0; z < 5; z++) {
      Case c;
      c.transposed = transposed;
      ConvTGeom &g = c.g;
      g.D = 2, g.N = 2, g.Ci = 3, g.Co = 2;
      for (PetscInt j = 1; j < 3; j++) g.k[j] = 3, g.in[j] = 6, g.out[j] = transposed ? 8 : 4;
      if (z == 0) g.N = 0;
      if (z == 1) g.Ci = 0;
      if (z == 2) g.Co = 0;
      if (z == 3) g.out[1] = 0, g.in[1] = transposed ? 0 : 2, g.pr[1] = transposed ? 2 : 0; /* convT: out = (0 - 1) - 0 - 2 + 3 = 0 */
      if (z == 4) g.in[2] = 0, g.out[2] = transposed ? 1 : 0, g.pl[2] = transposed ? 1 : 0;  /* convT: out = (0 - 1) - 1 - 0 + 3 = 1, the box only gets the bias */
      Compare<double>(c, rng);
      Compare<float>(c, rng);
    }
}

/*
  Winograd F(2x2, 3x3), F(4x4, 3x3) and F(2x2x2, 3x3x3) (src/backend/blas/conv_winograd.cxx) against the reference loops: 2-D,
  3-D (1 x 3 x 3 taps) and 3 x 3 x 3 geometries with odd and even output extents (cropped tiles), 1 x 1 and
  empty outputs, windows larger than needed, channels 0-20, plain and channels-last views with
  halos, accumulate semantics; and shapes of many chunks (chunks that end inside an image).
*/
template <class T>
void RandomWinograd(unsigned seed, int count, bool taps3 = false)
{
  std::mt19937 rng(seed);
  for (int i = 0; i < count; i++) {
    Case       c;
    ConvTGeom &g = c.g;
    const int  cmax = taps3 ? 12 : 20; /* 3 x 3 x 3 taps (F(2x2x2, 3x3x3)): fewer channels and extents, the reference loops are dear */
    g.D          = taps3 ? 3 : 2 + i % 2;
    g.N          = Pick(rng, 0, 9) == 0 ? 0 : Pick(rng, 1, taps3 ? 2 : 3);
    g.Ci         = Pick(rng, 0, 11) == 0 ? 0 : Pick(rng, 1, cmax);
    g.Co         = Pick(rng, 0, 11) == 0 ? 1 : Pick(rng, 1, cmax);
    for (PetscInt j = 3 - g.D; j < 3; j++) {
      g.k[j]   = j == 0 && !taps3 ? 1 : 3;
      if (taps3) g.out[j] = Pick(rng, 0, 15) == 0 ? 0 : Pick(rng, 1, 7);
      else g.out[j] = Pick(rng, 0, 12) == 0 ? 0 : Pick(rng, j == 0 || i % 4 < 2 ? 1 : 10, j == 0 ? 3 : (i % 4 < 2 ? 11 : 19)); /* F(4x4) in float64 from 12 x 12 */
      g.in[j]  = g.out[j] + g.k[j] - 1 + Pick(rng, 0, 1);
    }
    RandomOptions(c, rng);
    Compare<T>(c, rng, true);
  }
}
TEST(ConvWinograd, RandomFloat64)
{
  RandomWinograd<double>(4024, 400);
}
TEST(ConvWinograd, Random3x3x3)
{
  RandomWinograd<double>(4026, 150, true);
  RandomWinograd<float>(4027, 150, true);
}
TEST(ConvWinograd, RandomFloat32)
{
  RandomWinograd<float>(4025, 400);
}
TEST(ConvWinograd, ManyChunks)
{
  std::mt19937 rng(13);
  for (int i = 0; i < 4; i++) {
    Case       c;
    ConvTGeom &g = c.g;
    g.D = 2, g.N = 2, g.Ci = 24 + i, g.Co = 20;
    g.k[1] = g.k[2] = 3;
    g.out[1]        = 37 + i;
    g.out[2]        = 40 + i;
    g.in[1]         = g.out[1] + 2;
    g.in[2]         = g.out[2] + 2;
    c.clx = c.cly = i % 2;
    c.halox       = i / 2;
    Compare<double>(c, rng, true);
    Compare<float>(c, rng, true);
  }
}
TEST(ConvWinograd, Applies)
{
  ConvGeom g;
  g.D = 2, g.N = 1, g.Ci = 2, g.Co = 2;
  g.k[1] = g.k[2] = 3;
  g.out[1] = g.out[2] = 4;
  g.in[1] = g.in[2] = 6;
  EXPECT_TRUE(ConvWinogradApplies(g));
  ConvGeom h = g;
  h.s[2]     = 2;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* strided */
  h      = g;
  h.d[1] = 2;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* dilated */
  h        = g;
  h.groups = 2;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* grouped */
  h      = g;
  h.k[2] = 5;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* 3 x 5 */
  h      = g;
  h.D    = 1;
  h.k[1] = 1;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* 1-D */
  h      = g;
  h.D    = 3;
  h.k[0] = 3;
  h.in[0] = 3;
  EXPECT_TRUE(ConvWinogradApplies(h)); /* 3 x 3 x 3: F(2x2x2, 3x3x3) */
  EXPECT_STREQ(ConvWinogradName<double>(h), "Winograd F(2x2x2,3x3x3) + GEMM (OpenBLAS)");
  h.in[0] = 2;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* a window too small in the first dimension */
  h.in[0] = 3;
  h.k[0]  = 5;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* 5 x 3 x 3 */
  h.k[0] = 3;
  h.D    = 2;
  EXPECT_FALSE(ConvWinogradApplies(h)); /* 3 taps in a dimension a 2-D problem does not have */
  /* the kernel's name says the tile size: F(4x4) in float64 from 12 x 12 outputs, F(2x2) otherwise */
  EXPECT_STREQ(ConvWinogradName<double>(g), "Winograd F(2x2,3x3) + GEMM (OpenBLAS)");
  h      = g;
  h.out[1] = h.out[2] = 12;
  h.in[1] = h.in[2] = 14;
  EXPECT_STREQ(ConvWinogradName<double>(h), "Winograd F(4x4,3x3) + GEMM (OpenBLAS)");
  EXPECT_STREQ(ConvWinogradName<float>(h), "Winograd F(2x2,3x3) + GEMM (OpenBLAS)");
}
