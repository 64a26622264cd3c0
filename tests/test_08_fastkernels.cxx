/*
  The fast CPU kernels (src/backend/cpu/fastkernels.hpp) against the reference loops
  (src/backend/kernels.hpp), float32 and float64: pooling (max: values and argmax bitwise;
  average: to rounding) and upsampling (forward and nearest backward bitwise; linear backward to
  rounding) over plain, channels-last and blocked layouts built with LayoutBuild, 1-3-D, with
  halos around the storage, odd sizes, boxes that are a sub-window of the storage, empty
  boxes, partial (ceil-mode) windows, padding and dilation; NaN semantics against numbers
  from PyTorch 1.13 (the activations forward and backward, max pooling); the spectral layer's
  vectorized mode mixing against its reference loops (to rounding, nan and inf alike) and its adjoint; and the optimizers'
  vectorized updates of /cpu/blas bitwise equal to the reference loops.
*/
#include "ddtest.hpp"
#include "kernelcases.hpp"
#include <backend/cpu/fastkernels.hpp>
#include <backend/cpu/optimizer_kernels.hpp>
#include <backend/cpu/pool_rows.hpp>
#include <backend/interface/backends.hpp>
#include <tensor/layout.hpp>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <type_traits>

using namespace ddnn;
using ddtest::UpCase;
using ddtest::UpsampleCaseGeometry;

namespace
{
struct Fmt {
  DDTensorFormat f;
  PetscInt       bs;
  const char    *name;
};
const Fmt kFormats[] = {{DD_FORMAT_PLAIN, 1, "plain"}, {DD_FORMAT_CHANNELS_LAST, 1, "channels-last"}, {DD_FORMAT_BLOCKED, 8, "blocked 8c"}, {DD_FORMAT_BLOCKED, 4, "blocked 4c"}};

/* a local layout of dims (N, C, spatial...) with halo h on every spatial side (h + 1 on the high side) */
DDLayout Layout(const std::vector<PetscInt> &n, const Fmt &f, PetscInt h)
{
  const PetscInt order = (PetscInt)n.size();
  PetscInt       start[DD_MAX_DIM] = {0}, lo[DD_MAX_DIM] = {0}, hi[DD_MAX_DIM] = {0};
  for (PetscInt k = 2; k < order; k++) {
    lo[k] = h;
    hi[k] = h ? h + 1 : 0;
  }
  DDLayout L;
  DDT(LayoutBuild(&L, order, n.data(), start, lo, hi, f.f, f.bs));
  return L;
}

template <class T>
std::vector<T> Random(PetscInt size, unsigned seed)
{
  std::mt19937                      r(seed);
  std::uniform_real_distribution<> u(-1, 1);
  std::vector<T>                    v((size_t)size);
  for (auto &e : v) e = (T)u(r);
  return v;
}

/* the bulk box of L, or the box with spatial origin/size given (storage coordinates) */
void Box(const DDLayout &L, PetscInt D, const PetscInt *org, const PetscInt *sz, BoxOffsets *b)
{
  PetscInt o[5], n[5];
  for (PetscInt q = 0; q < 2 + D; q++) {
    o[q] = q < 2 || !org ? L.lo[q] : org[q - 2];
    n[q] = q < 2 || !sz ? L.n[q] : sz[q - 2];
  }
  BoxOffsetsBuild(L, D, o, n, b);
}

template <class T>
void ExpectBitwise(const std::vector<T> &a, const std::vector<T> &b, const std::string &what)
{
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); i++)
    if (std::memcmp(&a[i], &b[i], sizeof(T))) {
      if (!bad) first = i;
      bad++;
    }
  EXPECT_EQ(bad, 0u) << what << ": first difference at " << first << ": " << (double)a[first] << " vs " << (double)b[first];
}

template <class T>
void ExpectClose(const std::vector<T> &a, const std::vector<T> &b, const std::string &what)
{
  ASSERT_EQ(a.size(), b.size()) << what;
  const double tol = std::is_same<T, float>::value ? 2e-6 : 1e-14;
  double       err = 0, scale = 1;
  for (size_t i = 0; i < a.size(); i++) {
    err   = std::max(err, std::abs((double)a[i] - (double)b[i]));
    scale = std::max(scale, std::abs((double)b[i]));
  }
  EXPECT_LE(err, tol * scale) << what;
}

/* ------------------------------------------------------------------------------------------ */
/* pooling                                                                                    */

struct PoolCase {
  PetscInt              D = 2, N = 2, C = 5;
  std::vector<PetscInt> n, k, s, p, d;
  bool                  max = true, ceil = false, incpad = true;
};

std::string Describe(const PoolCase &c)
{
  std::ostringstream o;
  o << (c.max ? "max" : "avg") << " D" << c.D << " N" << c.N << " C" << c.C << " n";
  for (auto v : c.n) o << " " << v;
  o << " k" << c.k[0] << " s" << c.s[0] << " p" << c.p[0] << " d" << c.d[0] << (c.ceil ? " ceil" : "") << (c.incpad ? "" : " nopad");
  return o.str();
}

/* PyTorch's output size and windows (pooling_output_shape), in coordinates of the box */
void PoolGeometry(const PoolCase &c, PoolGeom *g)
{
  *g     = PoolGeom();
  g->D   = c.D;
  g->N   = c.N;
  g->C   = c.C;
  g->max = c.max;
  for (PetscInt jj = 0; jj < 3; jj++) {
    g->first[jj].assign(1, 0);
    g->ntaps[jj].assign(1, 1);
    g->div[jj].assign(1, 1);
    if (jj < 3 - c.D) continue;
    const PetscInt j = jj - (3 - c.D), n = c.n[j], k = c.k[j], s = c.s[j], p = c.p[j], d = c.max ? c.d[j] : 1;
    PetscInt       num = n + 2 * p - d * (k - 1) - 1, out = (c.ceil ? (num + s - 1) / s : num / s) + 1;
    if (c.ceil && (out - 1) * s >= n + p) out--;
    g->out[jj] = out;
    g->d[jj]   = d;
    g->first[jj].resize(out);
    g->ntaps[jj].resize(out);
    g->div[jj].resize(out);
    for (PetscInt o = 0; o < out; o++) {
      const PetscInt st = o * s - p;
      PetscInt       f = -1, cnt = 0;
      for (PetscInt t = 0; t < k; t++) {
        const PetscInt q = st + t * d;
        if (q < 0 || q >= n) continue;
        if (f < 0) f = q;
        cnt++;
      }
      g->first[jj][o] = f < 0 ? 0 : f;
      g->ntaps[jj][o] = cnt;
      PetscInt hs = st, he = std::min(st + k, n + p);
      const PetscInt ps = he - hs;
      hs                = std::max<PetscInt>(hs, 0);
      he                = std::min(he, n);
      g->div[jj][o]     = c.incpad ? ps : std::max<PetscInt>(he - hs, 1);
    }
  }
}

template <class T>
void CheckPool(const PoolCase &c, const Fmt &f, PetscInt halo)
{
  const std::string what = Describe(c) + " " + f.name + " halo " + std::to_string(halo) + (std::is_same<T, float>::value ? " float32" : " float64");
  PoolGeom          g;
  PoolGeometry(c, &g);
  std::vector<PetscInt> xs = {c.N, c.C}, ys = {c.N, c.C};
  for (PetscInt j = 0; j < c.D; j++) {
    xs.push_back(c.n[j]);
    ys.push_back(std::max<PetscInt>(g.out[j + 3 - c.D], 1));
  }
  const DDLayout Lx = Layout(xs, f, halo), Ly = Layout(ys, f, halo ? 1 : 0);
  BoxOffsets     xo, yo;
  Box(Lx, c.D, NULL, NULL, &xo);
  Box(Ly, c.D, NULL, NULL, &yo);
  std::vector<T> x = Random<T>(Lx.size, 1);
  for (auto &e : x) e = std::round(e * (T)4) / (T)4; /* 9 values: many ties, so the first maximum matters */
  const std::vector<T> y0 = Random<T>(Ly.size, 2), dy = Random<T>(Ly.size, 3), dx0 = Random<T>(Lx.size, 4);
  const size_t         nout = (size_t)(g.N * g.C * g.out[0] * g.out[1] * g.out[2]);
  std::vector<T>       yr(y0), yf(y0), dxr(dx0), dxf(dx0);
  std::vector<PetscInt> ar(nout, -7), af(nout, -7);
  PoolForwardRef<T>(g, x.data(), xo, yr.data(), yo, c.max ? ar.data() : NULL);
  PoolForwardFast<T>(g, x.data(), xo, yf.data(), yo, c.max ? af.data() : NULL);
  if (c.max) {
    ExpectBitwise(yf, yr, "forward " + what);
    EXPECT_TRUE(af == ar) << "argmax " << what;
  } else ExpectClose(yf, yr, "forward " + what);
  PoolBackwardRef<T>(g, dy.data(), yo, dxr.data(), xo, c.max ? ar.data() : NULL);
  PoolBackwardFast<T>(g, dy.data(), yo, dxf.data(), xo, c.max ? ar.data() : NULL);
  if (c.max) ExpectBitwise(dxf, dxr, "backward " + what);
  else ExpectClose(dxf, dxr, "backward " + what);
}

std::vector<PoolCase> PoolCases()
{
  std::vector<PoolCase> v;
  for (int max = 1; max >= 0; max--)
    for (PetscInt D = 1; D <= 3; D++) {
      const std::vector<std::vector<PetscInt>> sizes = {{16, 12, 10}, {7, 9, 11}, {5, 6, 13}};
      struct K {
        PetscInt k, s, p, d;
        bool     ceil;
      };
      const K ks[] = {{2, 2, 0, 1, false}, {3, 2, 1, 1, false}, {3, 1, 1, 1, false}, {2, 2, 0, 1, true}, {3, 2, 1, 2, true}, {3, 3, 0, 1, true}, {1, 1, 0, 1, false}};
      for (const K &k : ks) {
        if (!max && k.d > 1) continue;
        PoolCase c;
        c.D   = D;
        c.max = max != 0;
        c.ceil = k.ceil;
        c.incpad = !(k.p && !max && k.ceil);
        c.C   = D == 3 ? 3 : 12;
        const auto &sz = sizes[D - 1];
        for (PetscInt j = 0; j < D; j++) {
          c.n.push_back(sz[j]);
          c.k.push_back(k.k);
          c.s.push_back(k.s);
          c.p.push_back(k.p);
          c.d.push_back(k.d);
        }
        v.push_back(c);
      }
    }
  return v;
}

TEST(FastPool, EqualsReference)
{
  for (const PoolCase &c : PoolCases())
    for (const Fmt &f : kFormats)
      for (PetscInt h : {0, 2}) {
        CheckPool<double>(c, f, h);
        CheckPool<float>(c, f, h);
      }
}

/* the 2x2 stride-2 case on large odd rows: the vectorized rows and their edges */
TEST(FastPool, LongRowsAndPartialWindows)
{
  PoolCase c;
  c.D = 2;
  c.N = 1;
  c.C = 3;
  c.n = {9, 301};
  c.k = {2, 2};
  c.s = {2, 2};
  c.p = {0, 0};
  c.d = {1, 1};
  for (bool ceil : {false, true}) {
    c.ceil = ceil;
    for (bool max : {true, false}) {
      c.max = max;
      for (const Fmt &f : kFormats) {
        CheckPool<double>(c, f, 1);
        CheckPool<float>(c, f, 1);
      }
    }
  }
}

/* a box inside the storage (a window of the layer) and empty boxes: nothing outside is touched */
TEST(FastPool, SubBoxAndEmpty)
{
  for (const Fmt &f : kFormats) {
    const DDLayout Lx = Layout({2, 6, 10, 12}, f, 1), Ly = Layout({2, 6, 4, 5}, f, 0);
    const PetscInt org[2] = {2, 3}, sz[2] = {8, 10};
    BoxOffsets     xo, yo;
    Box(Lx, 2, org, sz, &xo);
    Box(Ly, 2, NULL, NULL, &yo);
    PoolCase c;
    c.D = 2;
    c.N = 2;
    c.C = 6;
    c.n = {8, 10};
    c.k = {2, 2};
    c.s = {2, 2};
    c.p = {0, 0};
    c.d = {1, 1};
    PoolGeom g;
    PoolGeometry(c, &g);
    ASSERT_EQ(g.out[1], 4);
    ASSERT_EQ(g.out[2], 5);
    for (int empty = 0; empty < 2; empty++) {
      PoolGeom ge = g;
      if (empty) ge.out[1] = 0; /* a worker with no output rows */
      const std::vector<double> x = Random<double>(Lx.size, 5), y0 = Random<double>(Ly.size, 6);
      std::vector<double>       yr(y0), yf(y0), dxr(x), dxf(x);
      std::vector<PetscInt>     ar(2 * 6 * 20, -1), af(ar);
      PoolForwardRef<double>(ge, x.data(), xo, yr.data(), yo, ar.data());
      PoolForwardFast<double>(ge, x.data(), xo, yf.data(), yo, af.data());
      ExpectBitwise(yf, yr, std::string("sub-box forward ") + f.name);
      EXPECT_TRUE(af == ar) << f.name;
      if (empty) ExpectBitwise(yf, y0, "empty box leaves y alone");
      PoolBackwardRef<double>(ge, y0.data(), yo, dxr.data(), xo, ar.data());
      PoolBackwardFast<double>(ge, y0.data(), yo, dxf.data(), xo, ar.data());
      ExpectBitwise(dxf, dxr, std::string("sub-box backward ") + f.name);
    }
  }
}

/* the max pool's tap rows (pool_rows.hpp) with 32- and 64-bit indices (PETSc's PetscInt either way; the
   suite's PETSc has one of them): the float64 SSE2 pairs, the float32 loop and the AVX-512 rows of strides 1
   and 2 (where the CPU has AVX-512; test_08_fastkernels_avx2 runs the others there) equal a scalar loop
   written here, values bitwise and offsets, over strides 1, 2 and 3, lengths 0-40 (whole vectors and
   tails), ties (the first tap kept) and NaN (taken, the last one's offset) */
template <class T, int SS, class I>
static void MaxTapRowCase(I S, std::mt19937 &gen)
{
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T pick[] = {(T)-1, (T)0, (T)0.5, (T)2, nan, -std::numeric_limits<T>::infinity()};
  for (I len = 0; len <= 40; len++) {
    std::vector<T> x((size_t)(S * (len + 1) + 8));
    for (T &v : x) v = pick[gen() % 6];
    std::vector<T> m(len, -std::numeric_limits<T>::infinity()), mr(m);
    std::vector<I> am(len), ar(len);
    for (I i = 0; i < len; i++) am[i] = ar[i] = (I)3000000000LL * (sizeof(I) == 8) + 7 * i; /* beyond 32 bits where I has 64 */
    for (I tap = 0; tap < 4; tap++) {
      const I off0 = (I)(sizeof(I) == 8 ? 5000000000LL : 100000) + tap;
      MaxTapRow<T, SS, I>(x.data() + tap, S, off0, len, m.data(), am.data());
      for (I i = 0; i < len; i++) { /* the reference's rule: v > m || isnan(v) */
        const T v = x[(size_t)(tap + S * i)];
        if (v > mr[i] || std::isnan(v)) {
          mr[i] = v;
          ar[i] = off0 + S * i;
        }
      }
    }
    EXPECT_EQ(0, std::memcmp(m.data(), mr.data(), sizeof(T) * (size_t)len)) << sizeof(T) << "-byte values, " << sizeof(I) << "-byte offsets, stride " << S << ", length " << len;
    EXPECT_EQ(am, ar) << sizeof(T) << "-byte values, " << sizeof(I) << "-byte offsets, stride " << S << ", length " << len;
  }
}

TEST(FastPool, MaxTapRowBothIndexWidths)
{
  std::mt19937 gen(11);
  MaxTapRowCase<double, 1, int32_t>(1, gen);
  MaxTapRowCase<double, 2, int32_t>(2, gen);
  MaxTapRowCase<double, 0, int32_t>(3, gen);
  MaxTapRowCase<double, 1, int64_t>(1, gen);
  MaxTapRowCase<double, 2, int64_t>(2, gen);
  MaxTapRowCase<double, 0, int64_t>(3, gen);
  MaxTapRowCase<float, 1, int32_t>(1, gen);
  MaxTapRowCase<float, 2, int32_t>(2, gen);
  MaxTapRowCase<float, 1, int64_t>(1, gen);
  MaxTapRowCase<float, 2, int64_t>(2, gen);
  MaxTapRowCase<float, 0, int64_t>(3, gen);
}

/* NaN in a window propagates, with PyTorch's index: torch.nn.functional.max_pool2d(a, 2, return_indices=True) */
TEST(FastPool, NaNAsPyTorch)
{
  const double nan = std::numeric_limits<double>::quiet_NaN();
  /* a = [[1, nan, 3, 4], [5, 6, nan, 0], [9, 9, -1, -2], [9, 9, -3, -4]] -> y [[nan, nan], [9, -1]], indices [[1, 6], [8, 10]];
     a 1x4 window over [nan, 1, nan, 2] -> nan at index 2 (the last NaN: (v > m) || isnan(v)) */
  struct Case {
    std::vector<double>   a;
    PetscInt              h, w, kh, kw;
    std::vector<double>   y;
    std::vector<PetscInt> idx;
  };
  const Case cases[] = {{{1, nan, 3, 4, 5, 6, nan, 0, 9, 9, -1, -2, 9, 9, -3, -4}, 4, 4, 2, 2, {nan, nan, 9, -1}, {1, 6, 8, 10}}, {{nan, 1, nan, 2}, 1, 4, 1, 4, {nan}, {2}}};
  for (const Case &t : cases)
    for (int fast = 0; fast < 2; fast++) {
      PoolCase c;
      c.D = 2;
      c.N = 1;
      c.C = 1;
      c.n = {t.h, t.w};
      c.k = {t.kh, t.kw};
      c.s = {t.kh, t.kw};
      c.p = {0, 0};
      c.d = {1, 1};
      PoolGeom g;
      PoolGeometry(c, &g);
      const Fmt      f = kFormats[0];
      const DDLayout Lx = Layout({1, 1, t.h, t.w}, f, 0), Ly = Layout({1, 1, g.out[1], g.out[2]}, f, 0);
      BoxOffsets     xo, yo;
      Box(Lx, 2, NULL, NULL, &xo);
      Box(Ly, 2, NULL, NULL, &yo);
      std::vector<double>   y(t.y.size()), dx(t.a.size(), 0.0), dy(t.y.size(), 1.0);
      std::vector<PetscInt> am(t.y.size());
      if (fast) PoolForwardFast<double>(g, t.a.data(), xo, y.data(), yo, am.data());
      else PoolForwardRef<double>(g, t.a.data(), xo, y.data(), yo, am.data());
      for (size_t i = 0; i < y.size(); i++) {
        EXPECT_EQ(std::isnan(y[i]), std::isnan(t.y[i])) << i;
        if (!std::isnan(t.y[i])) EXPECT_EQ(y[i], t.y[i]);
        EXPECT_EQ(am[i], t.idx[i]) << "fast " << fast << " output " << i;
      }
      /* the gradient goes to the NaN's position, as PyTorch's */
      if (fast) PoolBackwardFast<double>(g, dy.data(), yo, dx.data(), xo, am.data());
      else PoolBackwardRef<double>(g, dy.data(), yo, dx.data(), xo, am.data());
      for (size_t i = 0; i < t.idx.size(); i++) EXPECT_EQ(dx[t.idx[i]], 1.0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* upsampling                                                                                 */

template <class T>
void CheckUpsample(const UpCase &c, const Fmt &f, PetscInt halo)
{
  std::ostringstream o;
  o << (c.linear ? (c.align ? "linear align" : "linear") : "nearest") << " D" << c.D << " C" << c.C << " n";
  for (auto v : c.n) o << " " << v;
  o << " s";
  for (auto v : c.s) o << " " << v;
  o << (c.part ? " part " : " ") << f.name << " halo " << halo << (std::is_same<T, float>::value ? " float32" : " float64");
  const std::string what = o.str();
  UpsampleGeom          g;
  PetscInt              wlo[3], wn[3], on[3], org[3], sz[3];
  std::vector<PetscInt> xs, ys;
  UpsampleCaseGeometry<T>(c, &g, wlo, wn, on, &xs, &ys);
  for (PetscInt j = 0; j < c.D; j++) {
    org[j] = halo + wlo[j]; /* the window in storage coordinates */
    sz[j]  = wn[j];
  }
  const DDLayout Lx = Layout(xs, f, halo), Ly = Layout(ys, f, halo ? 1 : 0);
  BoxOffsets     xo, yo;
  Box(Lx, c.D, org, sz, &xo);
  Box(Ly, c.D, NULL, NULL, &yo);
  const std::vector<T> x = Random<T>(Lx.size, 1), y0 = Random<T>(Ly.size, 2), dy = Random<T>(Ly.size, 3), dx0 = Random<T>(Lx.size, 4);
  std::vector<T>       yr(y0), yf(y0), dxr(dx0), dxf(dx0);
  UpsampleForwardRef<T>(g, x.data(), xo, yr.data(), yo);
  UpsampleForwardFast<T>(g, x.data(), xo, yf.data(), yo);
  ExpectBitwise(yf, yr, "forward " + what);
  UpsampleBackwardRef<T>(g, dy.data(), yo, dxr.data(), xo);
  UpsampleBackwardFast<T>(g, dy.data(), yo, dxf.data(), xo);
  if (!c.linear) ExpectBitwise(dxf, dxr, "backward " + what);
  else ExpectClose(dxf, dxr, "backward " + what);
}

TEST(FastUpsample, EqualsReference)
{
  ddtest::ForEachUpCase({{2, 2, 2}, {3, 1, 2}, {1, 3, 3}}, 10, [](const UpCase &c) {
    for (const Fmt &f : kFormats)
      for (PetscInt h : {0, 2}) {
        CheckUpsample<double>(c, f, h);
        CheckUpsample<float>(c, f, h);
      }
  });
}

TEST(FastUpsample, LongRowsAndEmpty)
{
  UpCase c;
  c.D = 2;
  c.N = 1;
  c.C = 2;
  c.n = {5, 257};
  c.s = {2, 2};
  for (int mode = 0; mode < 3; mode++) {
    c.linear = mode > 0;
    c.align  = mode == 2;
    for (const Fmt &f : kFormats) {
      CheckUpsample<double>(c, f, 1);
      CheckUpsample<float>(c, f, 1);
    }
  }
  /* an empty box: nothing written */
  UpsampleGeom g;
  g.D = 2;
  g.N = 1;
  g.C = 1;
  for (PetscInt jj = 0; jj < 3; jj++) {
    g.i0[jj].assign(1, 0);
    g.i1[jj].assign(1, 0);
    g.w0[jj].assign(1, 1.0);
    g.w1[jj].assign(1, 0.0);
  }
  g.out[2] = 0;
  const DDLayout L = Layout({1, 1, 2, 2}, kFormats[0], 0);
  BoxOffsets     b;
  Box(L, 2, NULL, NULL, &b);
  std::vector<double> x = Random<double>(L.size, 1), y(x), dx(x);
  UpsampleForwardFast<double>(g, x.data(), b, y.data(), b);
  UpsampleBackwardFast<double>(g, x.data(), b, dx.data(), b);
  ExpectBitwise(y, x, "empty forward");
  ExpectBitwise(dx, x, "empty backward");
}

/* ------------------------------------------------------------------------------------------ */
/* activations: NaN and infinities as PyTorch 1.13 (torch.nn.functional, y.backward(3 * ones)) */

/*
  The float32 tanh of /cpu/blas is a branch-free polynomial (vectorized loops, AVX2 where the CPU
  has it, bitwise equal to the scalar function), not libm's tanhf:
  over 400,001 floats in [-12, 12] plus 0, -0, the smallest normal, +-inf and NaN, within 4 ulp
  (relative 4 FLT_EPSILON) of tanh in double, and the backward (1 - t^2) dy within 4 FLT_EPSILON
  absolute (the cancellation near |t| = 1 is the formula's, as in float libm).
*/
TEST(FastActivation, TanhFloat32Vectorized)
{
  std::vector<float> x;
  for (int i = -200000; i <= 200000; i++) x.push_back((float)(12.0 * i / 200000.0));
  for (float v : {0.0f, -0.0f, 1.17549435e-38f, -1.17549435e-38f, 1e-30f, 0.625f, -0.625f, 0.62499994f, 9.0f, 8.9999995f, 10.0f, 9.9999990f})
    x.push_back(v);
  x.push_back(INFINITY);
  x.push_back(-INFINITY);
  x.push_back(NAN);
  const size_t       n = x.size();
  std::vector<float> y(n), dy(n, 1.5f), dx(n);
  ActivationForward<float>(DD_ACT_TANH, 0.01f, x.data(), y.data(), (PetscInt)n);
  ActivationBackward<float>(DD_ACT_TANH, 0.01f, x.data(), dy.data(), dx.data(), (PetscInt)n);
  double worst = 0, worstb = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    const double t = std::tanh((double)x[i]), rel = t == 0 ? std::fabs((double)y[i]) : std::fabs((double)y[i] - t) / std::fabs(t);
    const double b = std::fabs((double)dx[i] - (1 - t * t) * 1.5);
    worst          = std::max(worst, rel);
    worstb         = std::max(worstb, b);
    EXPECT_LE(rel, 4 * FLT_EPSILON) << "tanh(" << x[i] << ") = " << y[i] << " vs " << t;
    EXPECT_LE(b, 4 * FLT_EPSILON) << "tanh'(" << x[i] << ") dy = " << dx[i] << " vs " << (1 - t * t) * 1.5;
    EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "sign of tanh(" << x[i] << ")";
  }
  EXPECT_TRUE(std::isnan(y[n - 1]) && std::isnan(dx[n - 1])) << "NaN passes";
  EXPECT_EQ(y[n - 3], 1.0f);
  EXPECT_EQ(y[n - 2], -1.0f);
  /* the vectorized loops (AVX2 or SSE) give bitwise the scalar function (a run of 1 is a tail) */
  PetscInt differ = 0;
  for (size_t i = 0; i < n; i++) {
    float y1, d1;
    ActivationForward<float>(DD_ACT_TANH, 0.01f, &x[i], &y1, 1);
    ActivationBackward<float>(DD_ACT_TANH, 0.01f, &x[i], &dy[i], &d1, 1);
    if (std::memcmp(&y1, &y[i], sizeof(float)) || std::memcmp(&d1, &dx[i], sizeof(float))) differ++;
  }
  EXPECT_EQ(differ, 0) << "entries where the vectorized tanh differs from the scalar one";
  std::printf("float32 tanh: worst relative error %.3g (%.2f ulp of 1), backward worst absolute %.3g\n", worst, worst / FLT_EPSILON, worstb);
}

/*
  The float64 tanh of /cpu/blas is Cephes' rational tanh and exp, branch-free (vectorized loops,
  AVX2 where the CPU has it, bitwise equal to the scalar function), not libm's tanh: over 800,001 doubles in [-25, 25] plus 0, -0, subnormals, the branch points and
  huge values, within 4 ulp (relative 4 DBL_EPSILON) of tanhl in long double, the backward
  (1 - t^2) dy within 4 DBL_EPSILON absolute; inf, -inf give 1, -1 and NaN passes.
*/
TEST(FastActivation, TanhFloat64Vectorized)
{
  std::vector<double> x;
  for (int i = -400000; i <= 400000; i++) x.push_back(25.0 * i / 400000.0);
  for (double v : {0.0, -0.0, 4.9406564584124654e-324, -2.2250738585072014e-308, 1e-200, 0.625, -0.625, 0.62499999999999989, 19.0, 19.1, 20.0, 40.0, 1e300, -1e300})
    x.push_back(v);
  x.push_back(INFINITY);
  x.push_back(-INFINITY);
  x.push_back(NAN);
  const size_t        n = x.size();
  std::vector<double> y(n), dy(n, 1.5), dx(n);
  ActivationForward<double>(DD_ACT_TANH, 0.01, x.data(), y.data(), (PetscInt)n);
  ActivationBackward<double>(DD_ACT_TANH, 0.01, x.data(), dy.data(), dx.data(), (PetscInt)n);
  double worst = 0, worstb = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    const long double t   = std::tanh((long double)x[i]);
    const double      rel = t == 0 ? std::fabs(y[i]) : (double)(std::fabs((long double)y[i] - t) / std::fabs(t));
    const double      b   = (double)std::fabs((long double)dx[i] - (1 - t * t) * 1.5L);
    worst                 = std::max(worst, rel);
    worstb                = std::max(worstb, b);
    EXPECT_LE(rel, 4 * DBL_EPSILON) << "tanh(" << x[i] << ") = " << y[i] << " vs " << (double)t;
    EXPECT_LE(b, 4 * DBL_EPSILON) << "tanh'(" << x[i] << ") dy = " << dx[i] << " vs " << (double)((1 - t * t) * 1.5L);
    EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "sign of tanh(" << x[i] << ")";
  }
  EXPECT_TRUE(std::isnan(y[n - 1]) && std::isnan(dx[n - 1])) << "NaN passes";
  EXPECT_EQ(y[n - 3], 1.0);
  EXPECT_EQ(y[n - 2], -1.0);
  EXPECT_EQ(dx[n - 3], 0.0);
  PetscInt differ = 0;
  for (size_t i = 0; i < n; i++) {
    double y1, d1;
    ActivationForward<double>(DD_ACT_TANH, 0.01, &x[i], &y1, 1);
    ActivationBackward<double>(DD_ACT_TANH, 0.01, &x[i], &dy[i], &d1, 1);
    if (std::memcmp(&y1, &y[i], sizeof(double)) || std::memcmp(&d1, &dx[i], sizeof(double))) differ++;
  }
  EXPECT_EQ(differ, 0) << "entries where the vectorized tanh differs from the scalar one";
  std::printf("float64 tanh: worst relative error %.3g (%.2f ulp of 1), backward worst absolute %.3g\n", worst, worst / DBL_EPSILON, worstb);
}

/* |got - want| relative to |want|, or to floor where |want| is smaller (0 where they are equal: the infinities) */
inline double ErrorAgainst(long double got, long double want, long double floor)
{
  return got == want ? 0.0 : (double)(std::fabs(got - want) / std::max(std::fabs(want), floor));
}

/* the entries where a run of an activation differs from the same entries one by one (a run of 1 is the
   scalar tail of the vectorized loops) */
template <class T>
PetscInt DifferOneByOne(DDActivationType t, const ActParams<T> &p, const std::vector<T> &x, const std::vector<T> &dy, const std::vector<T> &y, const std::vector<T> &dx)
{
  PetscInt differ = 0;
  for (size_t i = 0; i < x.size(); i++) {
    T y1, d1;
    ActivationForward<T>(t, p, &x[i], &y1, 1);
    ActivationBackward<T>(t, p, &x[i], &dy[i], &d1, 1);
    if (std::memcmp(&y1, &y[i], sizeof(T)) || std::memcmp(&d1, &dx[i], sizeof(T))) differ++;
  }
  return differ;
}

/* leaky ReLU's and PReLU's vectorized loops (v (v > 0 ? 1 : slope)) give the bits of "v > 0 ? v : slope v" and
   "v > 0 ? dy : slope dy" for every kind of value (NaN, infinities, signed zeros, subnormals), in every lane and the tail */
template <class T>
void LeakyBitwise()
{
  std::mt19937_64                   g(3);
  std::uniform_real_distribution<T> u(-2, 2);
  const T                           nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity(), den = std::numeric_limits<T>::denorm_min();
  std::vector<T>                    x(101), dy(101);
  for (size_t i = 0; i < x.size(); i++) {
    x[i]  = u(g);
    dy[i] = u(g);
  }
  const T special[] = {nan, -nan, inf, -inf, (T)0, -(T)0, den, -den, std::numeric_limits<T>::max(), -std::numeric_limits<T>::max()};
  for (size_t k = 0; k < sizeof(special) / sizeof(special[0]); k++) {
    x[7 * k + 1]  = special[k];
    dy[7 * k + 3] = special[k];
  }
  for (T slope : {(T)0.01, (T)-0.2, (T)3, (T)0}) {
    std::vector<T> y(x.size()), dx(x.size()), yr(x.size()), dxr(x.size());
    for (size_t i = 0; i < x.size(); i++) {
      yr[i]  = x[i] > (T)0 ? x[i] : slope * x[i];
      dxr[i] = x[i] > (T)0 ? dy[i] : slope * dy[i];
    }
    for (DDActivationType t : {DD_ACT_LEAKYRELU, DD_ACT_PRELU})
      for (size_t n : {x.size(), (size_t)1, (size_t)2, (size_t)5}) {
        std::vector<T> y0(yr.begin(), yr.begin() + n), d0(dxr.begin(), dxr.begin() + n);
        y.assign(n, (T)7);
        dx.assign(n, (T)7);
        ActivationForward<T>(t, slope, x.data(), y.data(), (PetscInt)n);
        ActivationBackward<T>(t, slope, x.data(), dy.data(), dx.data(), (PetscInt)n);
        ExpectBitwise(y, y0, std::string(DDActivationTypes[t]) + " forward, slope " + std::to_string((double)slope) + ", n " + std::to_string(n));
        ExpectBitwise(dx, d0, std::string(DDActivationTypes[t]) + " backward, slope " + std::to_string((double)slope) + ", n " + std::to_string(n));
      }
  }
}

TEST(FastActivation, LeakyBitwiseAsScalar)
{
  LeakyBitwise<float>();
  LeakyBitwise<double>();
}

/* one activation's forward and backward (dy = 1.5) over x, each entry but the last `skip` against the long double
   reference ref(v) = {f, f's floor, b, b's floor} (ErrorAgainst()); the failures named, the worst error printed and
   returned; y and dx returned for the callers' checks of the special values, and a run checked bitwise against its
   entries one by one */
template <class T, class Ref>
double CheckAccuracy(const char *name, DDActivationType t, const ActParams<T> &p, const std::vector<T> &x, size_t skip, double tol, Ref ref, std::vector<T> &y, std::vector<T> &dx)
{
  const size_t   n = x.size();
  std::vector<T> dy(n, (T)1.5);
  y.assign(n, 0);
  dx.assign(n, 0);
  ActivationForward<T>(t, p, x.data(), y.data(), (PetscInt)n);
  ActivationBackward<T>(t, p, x.data(), dy.data(), dx.data(), (PetscInt)n);
  double worst = 0;
  size_t bad   = 0;
  for (size_t i = 0; i + skip < n; i++) {
    const std::array<long double, 4> r = ref((long double)x[i], x[i]);
    const double                     e = std::max(ErrorAgainst(y[i], r[0], r[1]), std::isfinite((double)r[2]) ? ErrorAgainst(dx[i], r[2], r[3]) : 0.0);
    worst                              = std::max(worst, e);
    if (!(e <= tol) && bad++ < 5) ADD_FAILURE() << name << "(" << (double)x[i] << ") = " << (double)y[i] << " vs " << (double)r[0] << ", backward " << (double)dx[i] << " vs " << (double)r[2];
  }
  EXPECT_EQ(bad, 0u) << name << ": entries beyond " << tol;
  EXPECT_EQ(DifferOneByOne(t, p, x, dy, y, dx), 0) << "entries where a run of " << name << " differs from its entries one by one";
  std::printf("%s %s: worst relative error %.3g (%.2f ulp of 1)\n", std::is_same<T, float>::value ? "float32" : "float64", name, worst, worst / std::numeric_limits<T>::epsilon());
  return worst;
}

/* sigmoid and SiLU on the vectorized exp (Cephes' exp and expf, 2^n in two factors): against long double over
   the whole range, the subnormal results included; NaN and the infinities; the vectorized loops (AVX2 or SSE)
   bitwise the scalar tail (a run of 1) */
template <class T>
void SigmoidAccuracy(double tol)
{
  std::vector<T> x;
  const double   lo = std::is_same<T, float>::value ? -110 : -750;
  for (int i = 0; i <= 200000; i++) x.push_back((T)(lo + (40 - lo) * i / 200000.0));
  for (int i = -20000; i <= 20000; i++) x.push_back((T)(1e-3 * i)); /* around 0, where SiLU's backward and the Pade form meet */
  for (T v : {(T)0, -(T)0, std::numeric_limits<T>::min(), -std::numeric_limits<T>::min(), std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity()})
    x.push_back(v);
  x.push_back(std::numeric_limits<T>::quiet_NaN());
  const size_t   n = x.size();
  std::vector<T> dy(n, (T)1.5);
  for (DDActivationType t : {DD_ACT_SIGMOID, DD_ACT_SILU}) {
    std::vector<T> y(n), dx(n);
    ActivationForward<T>(t, (T)0.01, x.data(), y.data(), (PetscInt)n);
    ActivationBackward<T>(t, (T)0.01, x.data(), dy.data(), dx.data(), (PetscInt)n);
    double worst = 0;
    size_t bad   = 0;
    for (size_t i = 0; i + 1 < n; i++) {
      /* the formulas' own roundings kept: SiLU's x s(x) takes s(x) rounded to T (in float32 s(-106) is 0, so SiLU
         is -0 there, as PyTorch computes it), the backwards are measured against the derivatives' largest
         values (s (1 - s) loses the relative accuracy of 1 - s where s is near 1, in any implementation) */
      const long double v = x[i], sg = 1.0L / (1.0L + std::exp(-v)), sgT = (T)sg;
      if (t == DD_ACT_SILU && std::isinf(v)) { /* PyTorch 1.13: silu(-inf) = nan, silu(inf) = inf, silu'(+-inf) = nan (inf 0) */
        EXPECT_TRUE(v > 0 ? y[i] == x[i] : std::isnan(y[i])) << "silu(" << (double)v << ") = " << (double)y[i];
        EXPECT_TRUE(std::isnan(dx[i])) << "silu'(" << (double)v << ") dy = " << (double)dx[i];
        continue;
      }
      const long double f = t == DD_ACT_SIGMOID ? sg : v * sgT;
      const long double b = 1.5L * (t == DD_ACT_SIGMOID ? sg * (1 - sg) : sg * (1 + v * (1 - sg)));
      /* where s(x) is subnormal it is known to its spacing only: SiLU's x s(x) to |x| times it */
      const long double fl = std::numeric_limits<T>::min() * (t == DD_ACT_SILU ? std::max(1.0L, std::fabs(v)) : 1.0L);
      const double      e  = std::max(ErrorAgainst(y[i], f, fl), ErrorAgainst(dx[i], b, 1.5L * (t == DD_ACT_SIGMOID ? 0.25L : std::max(1.0L, std::fabs(v))))); /* SiLU's v (1 - s): |v| times s's error */
      worst          = std::max(worst, e);
      if (!(e <= tol)) {
        if (bad++ < 5) ADD_FAILURE() << DDActivationTypes[t] << "(" << (double)x[i] << ") = " << (double)y[i] << " vs " << (double)f << ", backward " << (double)dx[i] << " vs " << (double)b;
      }
    }
    EXPECT_EQ(bad, 0u) << DDActivationTypes[t] << ": entries beyond " << tol;
    EXPECT_TRUE(std::isnan(y[n - 1]) && std::isnan(dx[n - 1])) << "NaN passes";
    EXPECT_EQ(DifferOneByOne(t, ActParams<T>(), x, dy, y, dx), 0) << "entries where the vectorized " << DDActivationTypes[t] << " differs from the scalar tail";
    std::printf("%s %s: worst relative error %.3g (%.2f ulp of 1)\n", std::is_same<T, float>::value ? "float32" : "float64", DDActivationTypes[t], worst, worst / std::numeric_limits<T>::epsilon());
  }
}

/* ELU on the branch-free expm1 and exp: against long double over the range, -0 kept, NaN out and dy passed for NaN
   input (torch), the vectorized loops bitwise the scalar tail */
template <class T>
void EluAccuracy(T alpha, double tol)
{
  std::vector<T> x, y, dx;
  const double   lo = std::is_same<T, float>::value ? -110 : -750;
  for (int i = 0; i <= 100000; i++) x.push_back((T)(lo + (10 - lo) * i / 100000.0));
  for (int i = -20000; i <= 20000; i++) x.push_back((T)(1e-4 * i)); /* the two forms of expm1 meet at -0.5 */
  for (T v : {(T)-0.5, std::nextafter((T)-0.5, (T)0), std::nextafter((T)-0.5, (T)-1), (T)0, std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::min(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity()}) x.push_back(v);
  x.push_back(-(T)0);
  x.push_back(std::numeric_limits<T>::quiet_NaN());
  const size_t n = x.size();
  ActParams<T> p;
  p.alpha = alpha;
  char name[64];
  std::snprintf(name, sizeof(name), "elu (alpha %g)", (double)alpha);
  CheckAccuracy(name, DD_ACT_ELU, p, x, 2, tol, [&](long double v, T) -> std::array<long double, 4> {
    const long double a = alpha, mn = std::numeric_limits<T>::min();
    return {v <= 0 ? a * std::expm1(v) : v, mn, v <= 0 ? 1.5L * a * std::exp(v) : 1.5L, mn};
  }, y, dx);
  EXPECT_TRUE(std::signbit(y[n - 2]) && y[n - 2] == 0) << "elu(-0) = -0";
  EXPECT_TRUE(std::isnan(y[n - 1]) && dx[n - 1] == (T)1.5) << "NaN: NaN out, dy passes";
}

TEST(FastActivation, EluVectorized)
{
  EluAccuracy<float>(1.0f, 4 * FLT_EPSILON);
  EluAccuracy<float>(0.7f, 4 * FLT_EPSILON);
  EluAccuracy<double>(1.0, 8 * DBL_EPSILON);
  EluAccuracy<double>(0.7, 8 * DBL_EPSILON);
}

/* a GELU form against its long double reference ref (CheckAccuracy()) on [-12, 12] in steps of 1.2e-4, the
   given values, 0, -0, +-40, the smallest subnormal and +-max; then PyTorch 1.13's values at the infinities
   (gelu(inf) = inf, gelu(-inf) = nan (-inf 0), gelu'(+-inf) = nan, both forms) and NaN passing */
template <class T, class Ref>
void GeluCheck(const char *name, const ActParams<T> &p, std::initializer_list<T> more, double tol, Ref ref)
{
  std::vector<T> x, y, dx;
  for (int i = -100000; i <= 100000; i++) x.push_back((T)(12.0 * i / 100000.0));
  for (T v : more) x.push_back(v);
  for (T v : {(T)0, -(T)0, (T)40, (T)-40, std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN()}) x.push_back(v);
  const size_t n = x.size();
  CheckAccuracy(name, DD_ACT_GELU, p, x, 3, tol, ref, y, dx);
  EXPECT_TRUE(y[n - 3] == x[n - 3] && std::isnan(y[n - 2]) && std::isnan(dx[n - 3]) && std::isnan(dx[n - 2])) << name << " at the infinities";
  EXPECT_TRUE(std::isnan(y[n - 1]) && std::isnan(dx[n - 1])) << name << ": NaN passes";
}

/* GELU (erf form): against long double's erf; its formula x/2 (1 + erf(x / sqrt 2)) loses relative accuracy for
   negative x in any implementation (PyTorch's too), so the forward is measured against |x| / 2 (erf's absolute
   error) and the backward against dy; a run bitwise its entries one by one */
template <class T>
void GeluAccuracy(double tol)
{
  GeluCheck<T>("gelu", ActParams<T>(), {(T)1.4142135623730951, (T)-1.4142135623730951, (T)11.3137, (T)-11.3137}, tol, [](long double v, T) -> std::array<long double, 4> {
    const long double ph = 0.5L * (1 + std::erf(v / std::sqrt(2.0L)));
    return {v * ph, std::max((long double)std::numeric_limits<T>::min(), 0.5L * std::fabs(v)), 1.5L * (ph + v * std::exp(-0.5L * v * v) / std::sqrt(2 * 3.14159265358979323846264338327950288L)), 1.5L};
  });
}

TEST(FastActivation, GeluErfAccuracy)
{
  GeluAccuracy<float>(2 * FLT_EPSILON);
  GeluAccuracy<double>(8 * DBL_EPSILON);
}

/* GELU (tanh form, written x s(2u)): against long double's 0.5 x (1 + tanh(u)) and its derivative, as the erf form
   (forward to |x| / 2, backward to dy) */
template <class T>
void GeluTanhAccuracy(double tol)
{
  ActParams<T> p;
  p.gelutanh = true;
  GeluCheck<T>("gelu tanh", p, {(T)1e30, (T)-1e30}, tol, [](long double v, T) -> std::array<long double, 4> {
    const long double c = std::sqrt(2.0L / 3.14159265358979323846264338327950288L), k = 0.044715L;
    const long double u = c * (v + k * v * v * v), t = std::isinf(u) ? (u > 0 ? 1.0L : -1.0L) : std::tanh(u);
    return {0.5L * v * (1 + t), std::max((long double)std::numeric_limits<T>::min(), 0.5L * std::fabs(v)), 1.5L * (0.5L * (1 + t) + 0.5L * v * (1 - t * t) * c * (1 + 3 * k * v * v)), 1.5L};
  });
}

TEST(FastActivation, GeluTanhAccuracy)
{
  GeluTanhAccuracy<float>(2 * FLT_EPSILON);
  GeluTanhAccuracy<double>(8 * DBL_EPSILON);
}

/* softplus (log1p(exp(b x)) / b on the branch-free exp and log1p, x where b x > threshold, the test taken in T as
   torch takes it): against long double over the range, beta and threshold varied, subnormal results included;
   -0, NaN and the infinities; a run bitwise its entries one by one */
template <class T>
void SoftplusAccuracy(T beta, T threshold, double tol)
{
  std::vector<T> x, y, dx;
  const double   lo = std::is_same<T, float>::value ? -110 : -750;
  for (int i = 0; i <= 200000; i++) x.push_back((T)((lo + (60 - lo) * i / 200000.0) / (double)beta));
  for (int i = -20000; i <= 20000; i++) x.push_back((T)(1e-4 * i)); /* log1p's two forms meet at exp(-|bx|) = sqrt 2 - 1 */
  for (T v : {(T)(0.8813735870195430 / (double)beta), (T)(-0.8813735870195430 / (double)beta), threshold / beta, std::nextafter(threshold / beta, (T)1e30), std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity()}) x.push_back(v);
  x.push_back(-(T)0);
  x.push_back(std::numeric_limits<T>::quiet_NaN());
  const size_t n = x.size();
  ActParams<T> p;
  p.beta      = beta;
  p.threshold = threshold;
  char name[64];
  std::snprintf(name, sizeof(name), "softplus (beta %g, threshold %g)", (double)beta, (double)threshold);
  CheckAccuracy(name, DD_ACT_SOFTPLUS, p, x, 1, tol, [&](long double v, T xt) -> std::array<long double, 4> {
    const T           bvT = beta * xt; /* the threshold's test in T, as torch's */
    const long double bv = bvT, mn = std::numeric_limits<T>::min();
    if (bvT > threshold) return {v, mn, 1.5L, mn};
    /* log1p(exp(bv)) without exp's overflow (torch's formula gives inf where b x > 88.7 (float32) or 709.8 (float64) below a threshold above those) */
    return {(std::max(bv, 0.0L) + std::log1p(std::exp(-std::fabs(bv)))) / (long double)beta, mn, 1.5L / (1 + std::exp(-bv)), mn};
  }, y, dx);
  EXPECT_TRUE(std::isnan(y[n - 1]) && std::isnan(dx[n - 1])) << "NaN passes";
}

TEST(FastActivation, SoftplusVectorized)
{
  SoftplusAccuracy<float>(1, 20, 2 * FLT_EPSILON);
  SoftplusAccuracy<float>(0.5f, 5, 2 * FLT_EPSILON);
  SoftplusAccuracy<float>(3, 1e30f, 2 * FLT_EPSILON);
  SoftplusAccuracy<double>(1, 20, 8 * DBL_EPSILON);
  SoftplusAccuracy<double>(0.5, 5, 8 * DBL_EPSILON);
  SoftplusAccuracy<double>(3, 1e300, 8 * DBL_EPSILON);
}

TEST(FastActivation, SigmoidSiluVectorized)
{
  SigmoidAccuracy<float>(8 * FLT_EPSILON);
  SigmoidAccuracy<double>(8 * DBL_EPSILON);
}

TEST(FastActivation, AsPyTorch)
{
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double x[6] = {nan, -1, 0, 2, -inf, inf};
  struct Row {
    DDActivationType t;
    double           y[6], dx[6];
  };
  /* printed by PyTorch 1.13.1, float64, for x above and dy = 3 */
  const Row rows[] = {
    {DD_ACT_RELU, {nan, 0, 0, 2, 0, inf}, {3, 0, 0, 3, 0, 3}},
    {DD_ACT_LEAKYRELU, {nan, -0.01, 0, 2, -inf, inf}, {0.03, 0.03, 0.03, 3, 0.03, 3}},
    {DD_ACT_TANH, {nan, -0.7615941559557649, 0, 0.9640275800758169, -1, 1}, {nan, 1.2599230248420783, 3, 0.2119524745594933, 0, 0}},
    {DD_ACT_SIGMOID, {nan, 0.2689414213699951, 0.5, 0.8807970779778823, 0, 1}, {nan, 0.5898357997244456, 0.75, 0.31498075621051985, 0, 0}},
    {DD_ACT_GELU, {nan, -0.15865525393145702, 0, 1.9544997361036416, nan, inf}, {nan, -0.24994641176305904, 1.5, 3.255695403234591, nan, nan}},
  };
  auto same = [](double a, double b, double tol, double floor = 0) { return (std::isnan(a) && std::isnan(b)) || a == b || std::abs(a - b) <= tol * std::max(std::abs(b), floor); };
  /* tanh's derivative 1 - t^2 (torch's too) has the relative condition 2 t^2 / (1 - t^2) in t (26 at x = 2): it is
     compared to dy's size, as TanhFloat64Vectorized measures it (a tanh 1 ulp off is 12 ulp off there) */
  for (const Row &r : rows) {
    double yd[6], dd[6], dy[6];
    float  xf[6], yf[6], df[6], dyf[6];
    for (int i = 0; i < 6; i++) {
      dy[i]  = 3;
      dyf[i] = 3;
      xf[i]  = (float)x[i];
    }
    ActivationForward<double>(r.t, 0.01, x, yd, 6);
    ActivationBackward<double>(r.t, 0.01, x, dy, dd, 6);
    ActivationForward<float>(r.t, 0.01f, xf, yf, 6);
    ActivationBackward<float>(r.t, 0.01f, xf, dyf, df, 6);
    for (int i = 0; i < 6; i++) {
      EXPECT_TRUE(same(yd[i], r.y[i], 1e-15)) << DDActivationTypes[r.t] << " float64 y at x = " << x[i] << ": " << yd[i] << " vs torch " << r.y[i];
      const double dfl = r.t == DD_ACT_TANH ? 3 : 0;
      EXPECT_TRUE(same(dd[i], r.dx[i], 1e-15, dfl)) << DDActivationTypes[r.t] << " float64 dx at x = " << x[i] << ": " << dd[i] << " vs torch " << r.dx[i];
      EXPECT_TRUE(same(yf[i], r.y[i], 1e-6)) << DDActivationTypes[r.t] << " float32 y at x = " << x[i] << ": " << yf[i] << " vs torch " << r.y[i];
      EXPECT_TRUE(same(df[i], r.dx[i], 1e-6, dfl)) << DDActivationTypes[r.t] << " float32 dx at x = " << x[i] << ": " << df[i] << " vs torch " << r.dx[i];
    }
  }
  /* dy NaN where x = -1, 0, 2, -inf (torch: relu [1, 0, 0, nan, 0, 1], leaky_relu [0.01, nan, nan, nan, nan, 1]) */
  const double dy2[6] = {1, nan, nan, nan, nan, 1}, relu2[6] = {1, 0, 0, nan, 0, 1}, leaky2[6] = {0.01, nan, nan, nan, nan, 1};
  double       d2[6];
  ActivationBackward<double>(DD_ACT_RELU, 0.01, x, dy2, d2, 6);
  for (int i = 0; i < 6; i++) EXPECT_TRUE(same(d2[i], relu2[i], 0)) << "relu backward, NaN dy, entry " << i;
  ActivationBackward<double>(DD_ACT_LEAKYRELU, 0.01, x, dy2, d2, 6);
  for (int i = 0; i < 6; i++) EXPECT_TRUE(same(d2[i], leaky2[i], 1e-15)) << "leakyrelu backward, NaN dy, entry " << i;
  /* relu(-0) = -0 and leaky_relu(-0) = -0 in torch */
  const double mz = -0.0;
  double       z;
  ActivationForward<double>(DD_ACT_RELU, 0.01, &mz, &z, 1);
  EXPECT_TRUE(z == 0 && std::signbit(z));
  ActivationForward<double>(DD_ACT_LEAKYRELU, 0.01, &mz, &z, 1);
  EXPECT_TRUE(z == 0 && std::signbit(z));
  /* in place (dy aliasing dx, y aliasing x) and long runs (the vectorized loops and their tails) */
  for (PetscInt n : {1, 7, 1001}) {
    std::vector<double> a = Random<double>(n, 9), b(a), g = Random<double>(n, 10), h(g);
    a[0] = nan;
    b[0] = nan;
    ActivationForward<double>(DD_ACT_LEAKYRELU, 0.2, a.data(), a.data(), n);
    for (PetscInt i = 0; i < n; i++) EXPECT_TRUE(same(a[i], b[i] > 0 ? b[i] : 0.2 * b[i], 0)) << i;
    ActivationBackward<double>(DD_ACT_RELU, 0, b.data(), g.data(), g.data(), n);
    for (PetscInt i = 0; i < n; i++) EXPECT_EQ(g[i], b[i] <= 0 ? 0.0 : h[i]) << i;
  }
}

/* bitwise equal, or both NaN */
template <class T>
bool SameBits(T a, T b)
{
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(T)) == 0;
}

/*
  The optimizers' updates of /cpu/blas (SGDUpdateFast, AdamUpdateFast: the vectorized loops and
  their scalar tails) give bitwise the reference loops' parameters and states, float32 and float64,
  over 5 steps of every rule: SGD plain, with momentum (the first step and later ones), Nesterov,
  with and without weight decay; Adam with coupled and AdamW's decoupled weight decay. Runs of 0 to
  1001 entries, starting at an odd offset (unaligned), a gradient holding inf and NaN.
*/
template <class T>
void OptimizerFastEqualsReference()
{
  for (PetscInt n : {0, 1, 3, 4, 5, 8, 17, 1001}) {
    for (int rule = 0; rule < 8; rule++) {
      SGDCoefficients  sc;
      AdamCoefficients ac;
      const bool       adam = rule >= 5;
      ddtest::OptimizerRule(rule, sc, ac);
      const std::vector<T> p0 = Random<T>(n + 1, 21), b0 = Random<T>(n + 1, 22);
      std::vector<T>       pr(p0), pf(p0), mr(b0), mf(b0), vr(n + 1), vf(n + 1);
      for (PetscInt i = 0; i <= n; i++) vr[i] = vf[i] = (T)(0.5 * (b0[i] + 1));
      for (int step = 1; step <= 5; step++) {
        std::vector<T> g = Random<T>(n + 1, 30 + step);
        if (n > 9 && step == 3) {
          g[5] = (T)INFINITY;
          g[9] = (T)NAN;
        }
        sc.first = step == 1;
        ac.bc1   = 1 - std::pow(ac.beta1, step);
        ac.bc2   = 1 - std::pow(ac.beta2, step);
        if (adam) {
          AdamUpdate<T>(n, pr.data() + 1, g.data() + 1, mr.data() + 1, vr.data() + 1, ac);
          AdamUpdateFast<T>(n, pf.data() + 1, g.data() + 1, mf.data() + 1, vf.data() + 1, ac);
        } else {
          SGDUpdate<T>(n, pr.data() + 1, g.data() + 1, mr.data() + 1, sc);
          SGDUpdateFast<T>(n, pf.data() + 1, g.data() + 1, mf.data() + 1, sc);
        }
      }
      PetscInt bad = 0;
      for (PetscInt i = 0; i <= n && bad < 5; i++) {
        const bool ok = SameBits(pr[i], pf[i]) && SameBits(mr[i], mf[i]) && SameBits(vr[i], vf[i]);
        if (!ok) bad++;
        EXPECT_TRUE(ok) << (sizeof(T) == 4 ? "float32" : "float64") << " rule " << rule << " n " << n << " entry " << i << ": p " << pr[i] << " vs " << pf[i] << ", m/buf " << mr[i] << " vs " << mf[i] << ", v " << vr[i] << " vs " << vf[i];
      }
      EXPECT_EQ(pf[0], p0[0]) << "the entry before the run is untouched";
    }
  }
}

TEST(FastOptimizer, EqualsReference)
{
  OptimizerFastEqualsReference<float>();
  OptimizerFastEqualsReference<double>();
  /* the optimizers of the CPU chains (/cpu/dnnl falls back to /cpu/blas) take the fast loops */
  DDBackend blas = DDBackendLookup_Private("/cpu/blas");
  ASSERT_TRUE(blas);
  decltype(KernelTable<float>::adamupdate) fa;
  decltype(KernelTable<double>::sgdupdate) fs;
  DDT(DDBackendFind<float>(blas, &KernelTable<float>::adamupdate, DD_KERNEL_OPTIMIZER, &fa));
  DDT(DDBackendFind<double>(blas, &KernelTable<double>::sgdupdate, DD_KERNEL_OPTIMIZER, &fs));
  EXPECT_TRUE(fa == &AdamUpdateFast<float>);
  EXPECT_TRUE(fs == &SGDUpdateFast<double>);
}
/* ---------------------------------------------------------------------- */
/* the spectral layer's mode mixing: the vectorized loops of /cpu/blas against the reference loops */

template <class T>
void SpectralFastEqualsReference()
{
  struct Case {
    PetscInt N, Ci, Co, K, nl, lstart, sd;
  };
  /* tiles of 64 (float) or 32 (double) modes, tails shorter than a vector, odd sample and output counts,
     one sample (the streamed rows), a last mode dimension not starting at 0 and holding the Nyquist
     entry (2 f = sd), empty sizes */
  const Case cases[] = {{8, 32, 32, 288, 12, 0, 64}, {1, 24, 40, 512, 16, 0, 30}, {3, 5, 7, 13, 13, 0, 24}, {2, 3, 2, 45, 5, 3, 10}, {4, 1, 1, 1, 1, 0, 1},
                        {5, 2, 3, 67, 67, 0, 132}, {2, 6, 5, 97, 97, 1, 193}, {1, 3, 5, 37, 37, 2, 80}, {1, 2, 2, 5, 5, 0, 8}, {0, 3, 3, 16, 16, 0, 32}, {2, 3, 0, 16, 16, 0, 32}, {2, 0, 3, 16, 16, 0, 32}};
  const double eps = std::numeric_limits<T>::epsilon();
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const Case &c : cases) {
    SpectralMixGeom g;
    g.N = c.N, g.Ci = c.Ci, g.Co = c.Co, g.K = c.K, g.nl = c.nl, g.lstart = c.lstart, g.sd = c.sd, g.invS = 1.0 / (3.0 * c.sd);
    const PetscInt nx = 2 * c.N * c.Ci * c.K, nw = 2 * c.Ci * c.Co * c.K, ny = 2 * c.N * c.Co * c.K;
    std::vector<T> X(nx), W(nw), dY(ny), Yr(ny, (T)7), Yf(ny, (T)-7), dXr(nx, (T)7), dXf(nx, (T)-7), dW0(nw), dWr, dWf;
    for (auto &v : X) v = (T)u(gen);
    for (auto &v : W) v = (T)u(gen);
    for (auto &v : dY) v = (T)u(gen);
    for (auto &v : dW0) v = (T)u(gen);
    auto both = [&]() { /* the reference and the fast loops, forward and adjoint, dW from dW0 */
      dWr = dW0;
      dWf = dW0;
      SpectralMixRef<T>(g, X.data(), W.data(), Yr.data());
      SpectralMixFast<T>(g, X.data(), W.data(), Yf.data());
      SpectralMixAdjointRef<T>(g, X.data(), W.data(), dY.data(), dXr.data(), dWr.data());
      SpectralMixAdjointFast<T>(g, X.data(), W.data(), dY.data(), dXf.data(), dWf.data());
    };
    both();
    /* per entry the bound of its rounding: eps times the sum of the magnitudes of its terms. Entry (a, b, k)
       of fast against ref, A x B x K, sums over c < C of the products of p's entry pi(a, b, c) and q's
       qi(a, b, c) at mode k, scaled by s_k where scaled, plus add's own entry (the accumulated dW0) */
    auto mag = [](const T *z, PetscInt j) { return std::fabs((double)z[2 * j]) + std::fabs((double)z[2 * j + 1]); };
    std::ostringstream where;
    where << (sizeof(T) == 4 ? "float32" : "float64") << " N " << c.N << " Ci " << c.Ci << " Co " << c.Co << " K " << c.K;
    auto expect = [&](const char *what, const std::vector<T> &fast, const std::vector<T> &ref, PetscInt A, PetscInt B, PetscInt C, const std::vector<T> &p, const std::vector<T> &q, auto pi, auto qi, bool scaled, const T *add) {
      for (PetscInt a = 0; a < A; a++)
        for (PetscInt b = 0; b < B; b++)
          for (PetscInt k = 0; k < c.K; k++) {
            double bound = 0;
            for (PetscInt cc = 0; cc < C; cc++) bound += mag(p.data(), pi(a, b, cc) * c.K + k) * mag(q.data(), qi(a, b, cc) * c.K + k);
            const PetscInt j = 2 * ((a * B + b) * c.K + k);
            bound            = 4 * eps * (bound * (scaled ? (double)SpectralMixScale<T>(g, k) : 1.0) + (add ? mag(add, j / 2) : 0.0));
            ASSERT_LE(std::fabs((double)fast[j] - (double)ref[j]), bound) << where.str() << " " << what << " re at " << j;
            ASSERT_LE(std::fabs((double)fast[j + 1] - (double)ref[j + 1]), bound) << where.str() << " " << what << " im at " << j;
          }
    };
    expect("Y", Yf, Yr, c.N, c.Co, c.Ci, X, W, [&](PetscInt n, PetscInt, PetscInt i) { return n * c.Ci + i; }, [&](PetscInt, PetscInt o, PetscInt i) { return i * c.Co + o; }, true, nullptr);
    expect("dX", dXf, dXr, c.N, c.Ci, c.Co, dY, W, [&](PetscInt n, PetscInt, PetscInt o) { return n * c.Co + o; }, [&](PetscInt, PetscInt i, PetscInt o) { return i * c.Co + o; }, true, nullptr);
    expect("dW", dWf, dWr, c.Ci, c.Co, c.N, X, dY, [&](PetscInt i, PetscInt, PetscInt n) { return n * c.Ci + i; }, [&](PetscInt, PetscInt o, PetscInt n) { return n * c.Co + o; }, true, dW0.data());
    /* the adjoint test (paper 000, eq. 26) in float64: <Y(X, W), dY> = <X, dX> = <W, dW - dW0>, real inner products of the pairs */
    if (sizeof(T) == 8)
      for (int fast = 0; fast < 2; fast++) {
        const std::vector<T> &Y = fast ? Yf : Yr, &dX = fast ? dXf : dXr, &dW = fast ? dWf : dWr;
        double yy = 0, xx = 0, ww = 0, sc = 0;
        for (PetscInt j = 0; j < ny; j++) yy += (double)Y[j] * (double)dY[j], sc += std::fabs((double)Y[j] * (double)dY[j]);
        for (PetscInt j = 0; j < nx; j++) xx += (double)X[j] * (double)dX[j];
        for (PetscInt j = 0; j < nw; j++) ww += (double)W[j] * ((double)dW[j] - (double)dW0[j]);
        EXPECT_LE(std::fabs(yy - xx), 1e-13 * std::max(1.0, sc)) << where.str() << (fast ? " fast" : " reference") << ": <Y, dY> " << yy << " <X, dX> " << xx;
        EXPECT_LE(std::fabs(yy - ww), 1e-13 * std::max(1.0, sc)) << where.str() << (fast ? " fast" : " reference") << ": <Y, dY> " << yy << " <W, dW> " << ww;
      }
    /* nan and inf reach the same entries: an inf in X, a nan in W, an inf in dY */
    if (c.N > 0 && c.Ci > 0 && c.Co > 0) {
      X[2 * (c.K - 1)]            = std::numeric_limits<T>::infinity();
      W[nw - 1]                   = std::numeric_limits<T>::quiet_NaN();
      dY[2 * ((c.N - 1) * c.Co * c.K) + 1] = -std::numeric_limits<T>::infinity();
      both();
      auto same = [&](const std::vector<T> &a, const std::vector<T> &b, const char *what) {
        for (size_t j = 0; j < a.size(); j++) {
          ASSERT_EQ(std::isnan(a[j]), std::isnan(b[j])) << where.str() << " " << what << " nan at " << j << ": reference " << a[j] << ", fast " << b[j];
          ASSERT_EQ(std::isinf(a[j]), std::isinf(b[j])) << where.str() << " " << what << " inf at " << j << ": reference " << a[j] << ", fast " << b[j];
          if (std::isinf(a[j])) ASSERT_EQ(a[j] > 0, b[j] > 0) << where.str() << " " << what << " inf sign at " << j;
        }
      };
      same(Yr, Yf, "Y");
      same(dXr, dXf, "dX");
      same(dWr, dWf, "dW");
    }
  }
}

TEST(FastSpectral, EqualsReferenceAndIsAdjoint)
{
  SpectralFastEqualsReference<float>();
  SpectralFastEqualsReference<double>();
  /* the CPU chains (/cpu/dnnl falls back to /cpu/blas) take the fast loops, /cpu/ref the reference */
  for (const char *name : {"/cpu/blas", "/cpu/dnnl", "/cpu/ref"}) {
    DDBackend b = DDBackendLookup_Private(name);
    ASSERT_TRUE(b) << name;
    decltype(KernelTable<float>::spectralmix)         f;
    decltype(KernelTable<double>::spectralmixadjoint) d;
    DDT(DDBackendFind<float>(b, &KernelTable<float>::spectralmix, DD_KERNEL_SPECTRAL, &f));
    DDT(DDBackendFind<double>(b, &KernelTable<double>::spectralmixadjoint, DD_KERNEL_SPECTRAL, &d));
    const bool ref = !std::strcmp(name, "/cpu/ref");
    EXPECT_TRUE(f == (ref ? &SpectralMixRef<float> : &SpectralMixFast<float>)) << name;
    EXPECT_TRUE(d == (ref ? &SpectralMixAdjointRef<double> : &SpectralMixAdjointFast<double>)) << name;
  }
}
} // namespace
