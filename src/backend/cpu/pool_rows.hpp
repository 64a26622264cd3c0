/*
  The max pool's rows of regular outputs (pool_fast.cxx), in a header of their own so that
  test_08_fastkernels runs the SSE2 branch for both index widths (PETSc's PetscInt is 32-bit here,
  64-bit with --with-64-bit-indices).
*/
#pragma once
#include <petscsys.h>
#include <type_traits>
#if defined(__SSE2__)
  #include <emmintrin.h>
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  #define DDNN_POOL_AVX512 1
  #include <immintrin.h>
#endif

namespace ddnn
{
bool HaveAvx512(); /* src/backend/cpu/pointwise.cxx */

#if defined(DDNN_POOL_AVX512)
/*
  MaxTapRow's rows of stride SS = 1 or 2 with AVX-512 (F, VL, DQ, BW; chosen where HaveAvx512()): 8 doubles
  or 16 floats at a time, the same compare (v > m || v != v) selecting v and its offset; stride 2 loads
  two vectors' span and keeps the even entries, the second load masked to the entries the row reaches.
  Returns how many entries it did (a multiple of the width); MaxTapRow does the rest
*/
template <class T, int SS, class I>
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"))) I MaxTapRowAvx512(const T *xr, I off0, I len, T *m, I *am)
{
  I i = 0;
  if constexpr (std::is_same<T, double>::value) {
    const __m512i perm = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i step = _mm512_set_epi64(7 * SS, 6 * SS, 5 * SS, 4 * SS, 3 * SS, 2 * SS, SS, 0);
    for (; i + 8 <= len; i += 8) {
      const __m512d  v    = SS == 1 ? _mm512_loadu_pd(xr + i) : _mm512_permutex2var_pd(_mm512_loadu_pd(xr + 2 * i), perm, _mm512_maskz_loadu_pd(0x7F, xr + 2 * i + 8));
      const __m512d  mi   = _mm512_loadu_pd(m + i);
      const __mmask8 take = _mm512_cmp_pd_mask(v, mi, _CMP_GT_OQ) | _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q);
      _mm512_storeu_pd(m + i, _mm512_mask_blend_pd(take, mi, v));
      if constexpr (sizeof(I) == 8) {
        const __m512i idx = _mm512_add_epi64(_mm512_set1_epi64((long long)(off0 + SS * i)), step);
        _mm512_storeu_si512((void *)(am + i), _mm512_mask_blend_epi64(take, _mm512_loadu_si512((const void *)(am + i)), idx));
      } else {
        const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)(off0 + SS * i)), _mm512_cvtepi64_epi32(step));
        _mm256_storeu_si256((__m256i *)(am + i), _mm256_mask_blend_epi32(take, _mm256_loadu_si256((const __m256i *)(am + i)), idx));
      }
    }
  } else {
    const __m512i perm = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i step = _mm512_set_epi32(15 * SS, 14 * SS, 13 * SS, 12 * SS, 11 * SS, 10 * SS, 9 * SS, 8 * SS, 7 * SS, 6 * SS, 5 * SS, 4 * SS, 3 * SS, 2 * SS, SS, 0);
    for (; i + 16 <= len; i += 16) {
      const __m512    v    = SS == 1 ? _mm512_loadu_ps(xr + i) : _mm512_permutex2var_ps(_mm512_loadu_ps(xr + 2 * i), perm, _mm512_maskz_loadu_ps(0x7FFF, xr + 2 * i + 16));
      const __m512    mi   = _mm512_loadu_ps(m + i);
      const __mmask16 take = _mm512_cmp_ps_mask(v, mi, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      _mm512_storeu_ps(m + i, _mm512_mask_blend_ps(take, mi, v));
      if constexpr (sizeof(I) == 8) {
        const __m512i lo = _mm512_add_epi64(_mm512_set1_epi64((long long)(off0 + SS * i)), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(step)));
        const __m512i hi = _mm512_add_epi64(_mm512_set1_epi64((long long)(off0 + SS * i)), _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(step, 1)));
        _mm512_storeu_si512((void *)(am + i), _mm512_mask_blend_epi64((__mmask8)take, _mm512_loadu_si512((const void *)(am + i)), lo));
        _mm512_storeu_si512((void *)(am + i + 8), _mm512_mask_blend_epi64((__mmask8)(take >> 8), _mm512_loadu_si512((const void *)(am + i + 8)), hi));
      } else {
        const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)(off0 + SS * i)), step);
        _mm512_storeu_si512((void *)(am + i), _mm512_mask_blend_epi32(take, _mm512_loadu_si512((const void *)(am + i)), idx));
      }
    }
  }
  return i;
}
#endif
/*
  One tap of a row of regular outputs: v = xr[S i] (S = SS when SS > 0), m[i], am[i] as the
  reference updates them; off0 is the storage offset of xr[0]; I is the index type (PetscInt).
  The selects are written so that the float32 loop vectorizes; GCC leaves the float64 one scalar with a branch per entry (a
  compare of doubles selecting PetscInt offsets), whose time then depends on the data: p1 of the
  main job's U-Net took 0.22 ms on a network's activations and 0.13 ms on zeros or on the same
  values repeated call after call (the predictor learns them), so the float64 rows go through
  SSE2 (x86-64's baseline) two at a time, the same compares and selects without a branch; rows of stride
  1 and 2 first through MaxTapRowAvx512() where the CPU has AVX-512 (float64 channels-last max pooling
  1.x faster, bench/README).
*/
template <class T, int SS, class I>
inline void MaxTapRow(const T *xr, I S, I off0, I len, T *m, I *am)
{
  const I s = SS > 0 ? SS : S;
  I       i = 0;
#if defined(DDNN_POOL_AVX512)
  if constexpr ((std::is_same<T, double>::value || std::is_same<T, float>::value) && (SS == 1 || SS == 2) && (sizeof(I) == 8 || sizeof(I) == 4))
    if (HaveAvx512()) i = MaxTapRowAvx512<T, SS, I>(xr, off0, len, m, am);
#endif
#if defined(__SSE2__)
  if constexpr (std::is_same<T, double>::value && (sizeof(I) == 8 || sizeof(I) == 4)) {
    for (; i + 2 <= len; i += 2) {
      const __m128d v    = SS == 1 ? _mm_loadu_pd(xr + i) : _mm_set_pd(xr[s * (i + 1)], xr[s * i]);
      const __m128d mi   = _mm_loadu_pd(m + i);
      const __m128d take = _mm_or_pd(_mm_cmpgt_pd(v, mi), _mm_cmpunord_pd(v, v)); /* v > m || v != v */
      _mm_storeu_pd(m + i, _mm_or_pd(_mm_and_pd(take, v), _mm_andnot_pd(take, mi)));
      if constexpr (sizeof(I) == 8) {
        const __m128i tk  = _mm_castpd_si128(take);
        const __m128i idx = _mm_set_epi64x((long long)(off0 + s * (i + 1)), (long long)(off0 + s * i));
        const __m128i ai  = _mm_loadu_si128((const __m128i *)(am + i));
        _mm_storeu_si128((__m128i *)(am + i), _mm_or_si128(_mm_and_si128(tk, idx), _mm_andnot_si128(tk, ai)));
      } else { /* 32-bit offsets: the two 64-bit masks' low halves */
        const __m128i tk  = _mm_shuffle_epi32(_mm_castpd_si128(take), _MM_SHUFFLE(2, 0, 2, 0));
        const __m128i idx = _mm_set_epi32(0, 0, (int)(off0 + s * (i + 1)), (int)(off0 + s * i));
        const __m128i ai  = _mm_loadl_epi64((const __m128i *)(am + i));
        _mm_storel_epi64((__m128i *)(am + i), _mm_or_si128(_mm_and_si128(tk, idx), _mm_andnot_si128(tk, ai)));
      }
    }
  }
#endif
  for (; i < len; i++) {
    const T    v    = xr[s * i];
    const bool take = v > m[i] || v != v;
    m[i]            = take ? v : m[i];
    am[i]           = take ? off0 + s * i : am[i];
  }
}
} // namespace ddnn
