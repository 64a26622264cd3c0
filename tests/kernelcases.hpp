/*
  The kernel tests' cases, shared by test_08_fastkernels (the fast loops against the reference) and
  test_21_gpu_kernels (the CUDA kernels against the reference): the interpolation geometries
  (PyTorch's sources of every output, as the upsample layer computes them, for the whole output or
  a worker's sub-range with its window), and the optimizers' update rules.
*/
#pragma once
#include <ddnn/private/ddbackendimpl.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace ddtest
{
/* PyTorch's sources of output o (aten/src/ATen/native/UpSample.h), as the layer computes them */
template <class T>
void Sources(bool linear, bool align, PetscInt o, PetscInt n, PetscInt s, PetscInt *i0, PetscInt *i1, double *w0, double *w1)
{
  const PetscInt m = n * s;
  if (s == 1 || !linear) {
    *i0 = *i1 = s == 1 ? o : std::min<PetscInt>((PetscInt)std::floor((float)o * (float)(1.0 / (double)s)), n - 1);
    *w0       = 1;
    *w1       = 0;
    return;
  }
  T src;
  if (align) src = (m > 1 ? (T)(n - 1) / (T)(m - 1) : (T)0) * (T)o;
  else {
    src = (T)(1.0 / (double)s) * ((T)o + (T)0.5) - (T)0.5;
    if (src < (T)0) src = (T)0;
  }
  const PetscInt idx = std::min<PetscInt>((PetscInt)std::floor(src), n - 1);
  const T        l1  = std::min(std::max(src - (T)idx, (T)0), (T)1);
  *i0                = idx;
  *i1                = idx + (idx < n - 1 ? 1 : 0);
  *w0                = (double)((T)1 - l1);
  *w1                = (double)l1;
}

struct UpCase {
  PetscInt              D = 2, N = 2, C = 5;
  std::vector<PetscInt> n, s;
  bool                  linear = true, align = false;
  bool                  part   = false; /* a sub-range of the outputs (a worker's), with its window */
};

/*
  The geometry of case c: g (N, C, out, the sources relative to the window), and per spatial
  dimension j < c.D the window's first input index wlo[j] and extent wn[j] and the box's extent
  on[j]; xs, ys: the input's and the output's bulk shapes (N, C, spatial)
*/
template <class T>
void UpsampleCaseGeometry(const UpCase &c, ddnn::UpsampleGeom *g, PetscInt wlo[3], PetscInt wn[3], PetscInt on[3], std::vector<PetscInt> *xs, std::vector<PetscInt> *ys)
{
  *g        = ddnn::UpsampleGeom();
  g->D      = c.D;
  g->N      = c.N;
  g->C      = c.C;
  g->linear = c.linear;
  *xs       = {c.N, c.C};
  *ys       = {c.N, c.C};
  for (PetscInt jj = 0; jj < 3; jj++) {
    g->i0[jj].assign(1, 0);
    g->i1[jj].assign(1, 0);
    g->w0[jj].assign(1, 1.0);
    g->w1[jj].assign(1, 0.0);
    if (jj < 3 - c.D) continue;
    const PetscInt        j = jj - (3 - c.D), n = c.n[j], m = n * c.s[j];
    const PetscInt        oa = c.part ? m / 3 : 0, ob = c.part ? m - m / 4 : m;
    std::vector<PetscInt> a0, a1;
    std::vector<double>   b0, b1;
    for (PetscInt q = oa; q < ob; q++) {
      PetscInt i0, i1;
      double   w0, w1;
      Sources<T>(c.linear, c.align, q, n, c.s[j], &i0, &i1, &w0, &w1);
      a0.push_back(i0);
      a1.push_back(i1);
      b0.push_back(w0);
      b1.push_back(w1);
    }
    const PetscInt lo = *std::min_element(a0.begin(), a0.end()), hi = *std::max_element(a1.begin(), a1.end()) + 1;
    g->out[jj] = ob - oa;
    g->w0[jj]  = b0;
    g->w1[jj]  = b1;
    g->i0[jj].resize(a0.size());
    g->i1[jj].resize(a0.size());
    for (size_t i = 0; i < a0.size(); i++) {
      g->i0[jj][i] = a0[i] - lo;
      g->i1[jj][i] = a1[i] - lo;
    }
    wlo[j] = lo;
    wn[j]  = hi - lo;
    on[j]  = ob - oa;
    xs->push_back(n);
    ys->push_back(ob - oa);
  }
}
/*
  The cases of the kernel tests: 1-3 spatial dimensions, the given scales per dimension (sizes 13,
  6, 5 / 7, 9, 4 / 4, 5, 3), nearest, linear and linear with align_corners, the whole output and a
  worker's part; C channels (3 for 3-D)
*/
inline void ForEachUpCase(const std::vector<std::vector<PetscInt>> &scales, PetscInt C, const std::function<void(const UpCase &)> &f)
{
  const std::vector<std::vector<PetscInt>> sizes = {{13, 6, 5}, {7, 9, 4}, {4, 5, 3}};
  for (PetscInt D = 1; D <= 3; D++)
    for (const auto &sc : scales)
      for (int mode = 0; mode < 3; mode++)
        for (bool part : {false, true}) {
          UpCase c;
          c.D      = D;
          c.C      = D == 3 ? 3 : C;
          c.linear = mode > 0;
          c.align  = mode == 2;
          c.part   = part;
          for (PetscInt j = 0; j < D; j++) {
            c.n.push_back(sizes[(size_t)D - 1][(size_t)j]);
            c.s.push_back(sc[(size_t)j]);
          }
          f(c);
        }
}
/*
  Update rule 0-7 of the optimizer kernel tests: SGD plain (0), with momentum (1), Nesterov (2),
  with weight decay (3, 4: Nesterov too); Adam without (5) and with coupled weight decay (6), AdamW (7)
*/
inline void OptimizerRule(int rule, ddnn::SGDCoefficients &sc, ddnn::AdamCoefficients &ac)
{
  sc.lr           = 0.05;
  sc.momentum     = rule == 0 ? 0 : 0.9;
  sc.nesterov     = rule == 2 || rule == 4;
  sc.weight_decay = rule >= 3 ? 1e-2 : 0;
  ac.lr           = 1e-3;
  ac.weight_decay = rule == 5 ? 0 : 0.1;
  ac.decoupled    = rule == 7;
}
} // namespace ddtest
