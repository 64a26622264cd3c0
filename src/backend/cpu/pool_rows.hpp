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

namespace ddnn
{
/*
  One tap of a row of regular outputs: v = xr[S i] (S = SS when SS > 0), m[i], am[i] as the
  reference updates them; off0 is the storage offset of xr[0]; I is the index type (PetscInt).
  The selects are written so that the float32 loop vectorizes; GCC leaves the float64 one scalar with a branch per entry (a
  compare of doubles selecting PetscInt offsets), whose time then depends on the data: p1 of the
  main job's U-Net took 0.22 ms on a network's activations and 0.13 ms on zeros or on the same
  values repeated call after call (the predictor learns them), so the float64 rows go through
  SSE2 (x86-64's baseline) two at a time, the same compares and selects without a branch.
*/
template <class T, int SS, class I>
inline void MaxTapRow(const T *xr, I S, I off0, I len, T *m, I *am)
{
  const I s = SS > 0 ? SS : S;
  I       i = 0;
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
