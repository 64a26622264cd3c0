/*
  Local storage layout arithmetic shared by tensors, primitives and layers (C++ only).

  Everything that walks a tensor's local storage goes through these helpers, so that the
  storage format (plain, channels-last, blocked) is a property of the DDLayout and not of
  hard-wired C-order strides.
*/
#pragma once
#include <ddnn/private/ddimpl.h>
#include <cstdint>
#include <algorithm>

namespace ddnn
{

/* Builds the local layout of a piece with bulk sizes n starting at global index start, halos lo/hi. */
PetscErrorCode LayoutBuild(DDLayout *L, PetscInt order, const PetscInt n[], const PetscInt start[], const PetscInt lo[], const PetscInt hi[], DDTensorFormat fmt, PetscInt bs, PetscInt bdim = 1);

/* Offset in the storage of local storage coordinates j (0 <= j[k] < alloc[k]). */
inline PetscInt LayoutOffset(const DDLayout &L, const PetscInt j[])
{
  PetscInt off = 0;
  for (PetscInt k = 0; k < L.order; k++) {
    if (k == L.bdim) off += L.stride[k] * (j[k] / L.bs) + j[k] % L.bs;
    else off += L.stride[k] * j[k];
  }
  return off;
}

/* Offset of a global index g (must be inside the storage box). */
inline PetscInt LayoutOffsetGlobal(const DDLayout &L, const PetscInt g[])
{
  PetscInt j[DD_MAX_DIM];
  for (PetscInt k = 0; k < L.order; k++) j[k] = g[k] - L.start[k] + L.lo[k];
  return LayoutOffset(L, j);
}

/* True when the bulk occupies the whole storage contiguously (no halo, no block padding). */
inline bool LayoutBulkIsContiguous(const DDLayout &L) { return L.size == L.bulksize; }

/* Calls f(j) for every storage coordinate j in the box [a, b), the last dimension of `order` fastest. */
template <class F>
inline void ForEachIndex(PetscInt d, const PetscInt a[], const PetscInt b[], const PetscInt order[], F &&f)
{
  PetscInt j[DD_MAX_DIM];
  for (PetscInt k = 0; k < d; k++) {
    if (b[k] <= a[k]) return;
    j[k] = a[k];
  }
  while (true) {
    f((const PetscInt *)j);
    PetscInt p = d - 1;
    for (; p >= 0; p--) {
      PetscInt k = order[p];
      if (++j[k] < b[k]) break;
      j[k] = a[k];
    }
    if (p < 0) break;
  }
}

/*
  Calls f(oa, ob, len) for the runs of an odometer over nd outer dimensions (outermost first): cnt[i]
  steps each, a step of dimension i moving the offsets by da[i] and db[i] (offsets kept by additions:
  no per-run offset arithmetic over every dimension)
*/
template <class F>
inline void ForEachRunOdometer(PetscInt nd, const PetscInt cnt[], const PetscInt da[], const PetscInt db[], PetscInt oa, PetscInt ob, PetscInt len, F &&f)
{
  PetscInt j[DD_MAX_DIM];
  for (PetscInt i = 0; i < nd; i++) {
    if (cnt[i] <= 0) return;
    j[i] = 0;
  }
  while (true) {
    f(oa, ob, len);
    PetscInt p = nd - 1;
    for (; p >= 0; p--) {
      if (++j[p] < cnt[p]) {
        oa += da[p];
        ob += db[p];
        break;
      }
      oa -= da[p] * (cnt[p] - 1);
      ob -= db[p] * (cnt[p] - 1);
      j[p] = 0;
    }
    if (p < 0) break;
  }
}

/*
  Calls f(offset, len) for the contiguous runs of the storage box [a, b) (storage coordinates),
  in storage order.  Runs merge across dimensions that the box covers fully.
*/
template <class F>
inline void ForEachRun(const DDLayout &L, const PetscInt a[], const PetscInt b[], F &&f)
{
  const PetscInt d = L.order;
  for (PetscInt k = 0; k < d; k++)
    if (b[k] <= a[k]) return;
  if (L.bdim < 0 || (a[L.bdim] % L.bs == 0 && b[L.bdim] % L.bs == 0)) {
    /*
      plain, or blocked with the box covering whole channel blocks: a blocked storage is then the
      plain layout of the dimensions perm[0..d-1] (the block dimension counting blocks) followed by
      the bs entries of a block. A run is the innermost dimension's range (times a full block),
      merged across every dimension the box covers fully (e.g. a whole 8x16x32x32 nChw16c bulk
      inside a halo'd storage: one run of 16 W 16c entries per row, not one per position; the
      main job's activations walked 16-entry runs before).
    */
    const PetscInt bd = L.bdim, bs = bd < 0 ? 1 : L.bs, d1 = d - 1; /* plain: bd = -1 matches no dimension */
    auto           ext = [&](PetscInt k) { return k == bd ? (b[k] - a[k]) / bs : b[k] - a[k]; };
    PetscInt       q   = d1, len = bs * ext(L.perm[d1]);
    while (q > 0 && a[L.perm[q]] == 0 && b[L.perm[q]] == L.alloc[L.perm[q]]) {
      q--;
      len *= ext(L.perm[q]);
    }
    PetscInt cnt[DD_MAX_DIM], da[DD_MAX_DIM]; /* the outer dimensions perm[0 .. q-1]: a step is one block along bd */
    for (PetscInt p = 0; p < q; p++) cnt[p] = ext(L.perm[p]), da[p] = L.stride[L.perm[p]];
    ForEachRunOdometer(q, cnt, da, da, LayoutOffset(L, a), 0, len, [&](PetscInt o, PetscInt, PetscInt n) { f(o, n); });
  } else {
    /* blocked, partial blocks: contiguous runs are pieces of one channel block at one position */
    const PetscInt bd = L.bdim, bs = L.bs;
    PetscInt       ob[DD_MAX_DIM];
    for (PetscInt k = 0; k < d; k++) ob[k] = (k == bd) ? a[k] + 1 : b[k];
    ForEachIndex(d, a, ob, L.perm, [&](const PetscInt *jj) {
      PetscInt j[DD_MAX_DIM];
      for (PetscInt k = 0; k < d; k++) j[k] = jj[k];
      for (PetscInt c = a[bd]; c < b[bd];) {
        PetscInt e = PetscMin(b[bd], (c / bs + 1) * bs);
        j[bd]      = c;
        f(LayoutOffset(L, j), e - c);
        c = e;
      }
    });
  }
}

/* The bulk box in storage coordinates */
inline void LayoutBulkBox(const DDLayout &L, PetscInt a[], PetscInt b[])
{
  for (PetscInt k = 0; k < L.order; k++) {
    a[k] = L.lo[k];
    b[k] = L.lo[k] + L.n[k];
  }
}

/* Calls f(offset, len) for the runs of the bulk. */
template <class F>
inline void ForEachBulkRun(const DDLayout &L, F &&f)
{
  if (L.bulksize == 0) return;
  if (LayoutBulkIsContiguous(L)) {
    f((PetscInt)0, L.size);
    return;
  }
  PetscInt a[DD_MAX_DIM], b[DD_MAX_DIM];
  LayoutBulkBox(L, a, b);
  ForEachRun(L, a, b, f);
}

/* Whether two layouts store their entries in the same order (the same dimension order and blocking; halos may differ):
   a walk between them goes row by row, else entry by entry (a format conversion) */
inline bool LayoutSameOrder(const DDLayout &A, const DDLayout &B)
{
  if (A.order != B.order || A.bdim != B.bdim || A.bs != B.bs) return false;
  for (PetscInt k = 0; k < A.order; k++)
    if (A.perm[k] != B.perm[k]) return false;
  return true;
}

/* Whether two layouts store their bulk at the same offsets */
inline bool LayoutSameStorage(const DDLayout &A, const DDLayout &B)
{
  if (A.order != B.order || A.bdim != B.bdim || A.bs != B.bs || A.size != B.size) return false;
  for (PetscInt k = 0; k < A.order; k++)
    if (A.n[k] != B.n[k] || A.lo[k] != B.lo[k] || A.alloc[k] != B.alloc[k] || A.perm[k] != B.perm[k]) return false;
  return true;
}

/*
  Calls f(offA, offB, len) for matching runs of the bulks of two layouts of the same piece.
  Identical layouts use merged runs; otherwise the runs are as long as the common innermost
  dimension allows, merged outward across the dimensions both hold whole (one element when the
  storage orders differ, walked in cache-sized tiles).
*/
template <class F>
inline void ForEachBulkRunPair(const DDLayout &A, const DDLayout &B, F &&f)
{
  if (A.bulksize == 0) return;
  if (LayoutSameStorage(A, B)) {
    ForEachBulkRun(A, [&](PetscInt off, PetscInt len) { f(off, off, len); });
    return;
  }
  const PetscInt d = A.order;
  PetscInt       a[DD_MAX_DIM], b[DD_MAX_DIM], ja[DD_MAX_DIM], jb[DD_MAX_DIM];
  for (PetscInt k = 0; k < d; k++) {
    a[k] = 0;
    b[k] = A.n[k];
  }
  const PetscInt inA = A.perm[d - 1], inB = B.perm[d - 1];
  const bool     sameorder = LayoutSameOrder(A, B);
  const bool wholeblocks = sameorder && A.bdim >= 0 && A.lo[A.bdim] % A.bs == 0 && B.lo[A.bdim] % A.bs == 0 && A.n[A.bdim] % A.bs == 0;
  if (wholeblocks || (A.bdim < 0 && B.bdim < 0 && inA == inB)) {
    /*
      The same innermost dimension, plain or both blocked the same way in whole blocks, different halos
      (e.g. an activation's input without halo and its output with the halo its consumer convolution
      grew): runs of the innermost dimension (times a block), merged outward across the dimensions
      that both storages hold without halo at the same place in their orders (a plain output with a
      halo along H alone: whole planes). (Element-wise tiles before: the main job's activations.)
    */
    const PetscInt bd = A.bdim, bs = bd < 0 ? 1 : A.bs, d1 = d - 1; /* plain: bd = -1 matches no dimension */
    auto           ext  = [&](PetscInt k) { return k == bd ? A.n[k] / bs : A.n[k]; };
    auto           full = [&](const DDLayout &L, PetscInt k) { return L.lo[k] == 0 && L.alloc[k] == L.n[k]; };
    PetscInt       q    = d1, len = bs * ext(A.perm[d1]);
    while (q > 0 && full(A, A.perm[q]) && full(B, A.perm[q]) && A.perm[q - 1] == B.perm[q - 1]) {
      q--;
      len *= ext(A.perm[q]);
    }
    PetscInt cnt[DD_MAX_DIM], da[DD_MAX_DIM], db[DD_MAX_DIM]; /* the outer dimensions perm[0 .. q-1], in A's order: a step is one block along bd */
    for (PetscInt p = 0; p < q; p++) {
      const PetscInt k = A.perm[p];
      cnt[p] = ext(k), da[p] = A.stride[k], db[p] = B.stride[k];
    }
    ForEachRunOdometer(q, cnt, da, db, LayoutOffset(A, A.lo), LayoutOffset(B, B.lo), len, f);
  } else {
    /*
      Different storage orders (a transpose, e.g. plain <-> channels-last or blocked): element by
      element along a dimension `in` that is blocked in neither layout (constant strides), the
      one with the smallest strides (e.g. W: 1 in one layout, C or the block size in the other);
      the other dimensions are walked in B's storage order with A's innermost
      dimension and B's block dimension moved fastest, so that a tile of rows (e.g. 16 channels
      x W) is read and written while it is in cache.
    */
    PetscInt in = -1;
    for (PetscInt k = 0; k < d; k++)
      if (k != A.bdim && k != B.bdim && A.n[k] > 1 && (in < 0 || PetscMax(A.stride[k], B.stride[k]) < PetscMax(A.stride[in], B.stride[in]))) in = k;
    if (in < 0) { /* every dimension blocked somewhere (order 1-2): offsets per element */
      ForEachIndex(d, a, b, A.perm, [&](const PetscInt *j) {
        for (PetscInt k = 0; k < d; k++) {
          ja[k] = j[k] + A.lo[k];
          jb[k] = j[k] + B.lo[k];
        }
        f(LayoutOffset(A, ja), LayoutOffset(B, jb), (PetscInt)1);
      });
      return;
    }
    const PetscInt ainner = A.bdim >= 0 ? A.bdim : A.perm[d - 1];
    PetscInt       ord[DD_MAX_DIM], m = 0, ob[DD_MAX_DIM];
    auto           listed = [&](PetscInt k) { return std::find(ord, ord + m, k) != ord + m; };
    for (PetscInt p = 0; p < d; p++)
      if (B.perm[p] != in && B.perm[p] != ainner && B.perm[p] != B.bdim) ord[m++] = B.perm[p];
    if (ainner != in && !listed(ainner)) ord[m++] = ainner;
    if (B.bdim >= 0 && !listed(B.bdim)) ord[m++] = B.bdim;
    ord[m++] = in;
    for (PetscInt k = 0; k < d; k++) ob[k] = (k == in) ? 1 : b[k];
    const PetscInt n = A.n[in], sa = A.stride[in], sb = B.stride[in];
    ForEachIndex(d, a, ob, ord, [&](const PetscInt *j) {
      for (PetscInt k = 0; k < d; k++) {
        ja[k] = j[k] + A.lo[k];
        jb[k] = j[k] + B.lo[k];
      }
      const PetscInt oa = LayoutOffset(A, ja), obb = LayoutOffset(B, jb);
      for (PetscInt i = 0; i < n; i++) f(oa + i * sa, obb + i * sb, (PetscInt)1);
    });
  }
}

/* Whether the layout stores the bulk contiguously in C order (then packing is a memcpy) */
inline bool LayoutIsPlainContiguous(const DDLayout &L)
{
  if (L.bdim >= 0 || L.size != L.bulksize) return false;
  for (PetscInt k = 0; k < L.order; k++)
    if (L.perm[k] != k && L.n[k] > 1) return false;
  return true;
}

/* The layout of L's bulk held in C order of the logical dimensions, without halos or blocks (a message buffer's) */
inline DDLayout BulkCOrderLayout(const DDLayout &L)
{
  DDLayout C = L;
  C.bdim     = -1;
  C.bs       = 1;
  for (PetscInt k = PetscMin(L.order, DD_MAX_DIM) - 1, s = 1; k >= 0; k--) {
    C.lo[k] = C.hi[k] = 0;
    C.alloc[k]        = L.n[k];
    C.perm[k]         = k;
    C.stride[k]       = s;
    s *= L.n[k];
  }
  C.size = C.bulksize;
  return C;
}

/*
  Copies between the bulk and a buffer holding the bulk in C order of the logical dimensions
  (the canonical message format of the primitives, independent of storage formats).
  mode 0: pack (a -> buf), 1: unpack (buf -> a), 2: unpack adding (a += buf), 3: pack adding (buf += a).
*/
template <class T>
inline void BulkCOrderCopy(const DDLayout &L, T *a, T *buf, int mode)
{
  if (L.bulksize == 0) return;
  if (LayoutIsPlainContiguous(L)) {
    if (mode == 0) std::copy(a, a + L.size, buf);
    else if (mode == 1) std::copy(buf, buf + L.size, a);
    else if (mode == 2)
      for (PetscInt i = 0; i < L.size; i++) a[i] += buf[i];
    else
      for (PetscInt i = 0; i < L.size; i++) buf[i] += a[i];
    return;
  }
  bool plain = L.bdim < 0;
  for (PetscInt k = 0; k < L.order; k++) plain = plain && L.perm[k] == k;
  if (plain) {
    PetscInt lo[DD_MAX_DIM], hi[DD_MAX_DIM], cnt = 0;
    LayoutBulkBox(L, lo, hi);
    ForEachRun(L, lo, hi, [&](PetscInt off, PetscInt len) {
      if (mode == 0) std::copy(a + off, a + off + len, buf + cnt);
      else if (mode == 1) std::copy(buf + cnt, buf + cnt + len, a + off);
      else if (mode == 2)
        for (PetscInt i = 0; i < len; i++) a[off + i] += buf[cnt + i];
      else
        for (PetscInt i = 0; i < len; i++) buf[cnt + i] += a[off + i];
      cnt += len;
    });
  } else { /* a transpose between the storage and the buffer, seen as a plain layout without halos */
    const DDLayout C = BulkCOrderLayout(L);
    ForEachBulkRunPair(L, C, [&](PetscInt oa, PetscInt ob, PetscInt len) {
      for (PetscInt i = 0; i < len; i++) {
        if (mode == 0) buf[ob + i] = a[oa + i];
        else if (mode == 1) a[oa + i] = buf[ob + i];
        else if (mode == 2) a[oa + i] += buf[ob + i];
        else buf[ob + i] += a[oa + i];
      }
    });
  }
}

/* Storage order used by a DMDA Vec: (N, spatial..., C) */
inline void ChannelsLastOrder(PetscInt d, PetscInt perm[])
{
  if (d < 3) {
    for (PetscInt k = 0; k < d; k++) perm[k] = k;
    return;
  }
  perm[0] = 0;
  for (PetscInt k = 2; k < d; k++) perm[k - 1] = k;
  perm[d - 1] = 1;
}

/* splitmix64: counter-based random numbers, identical on any partition */
inline uint64_t SplitMix64(uint64_t x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline double UniformFromCounter(uint64_t seed, uint64_t counter) { return (double)(SplitMix64(SplitMix64(seed) ^ counter) >> 11) * 0x1.0p-53; }

/* dtype dispatch: calls f(T{}) with T = float or double */
template <class F>
inline PetscErrorCode DispatchType(DDDataType dt, F &&f)
{
  if (dt == DD_FLOAT32) return f(float{});
  return f(double{});
}

} // namespace ddnn
