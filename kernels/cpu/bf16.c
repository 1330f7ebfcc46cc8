/* Array conversions between fp32 and bf16 (rule and paths in bf16.h). */
#include "bf16.h"

#ifdef _OPENMP
#include <omp.h>
#endif

const char *bf16_convert_path(void) {
#if defined(__AVX512BF16__)
  return "avx512_bf16";
#elif defined(__AVX512F__)
  return "avx512f";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "scalar";
#endif
}

/* One thread's part: the widest vector path, the tail by the scalar rule
 * (the same bits, so where the tail starts does not matter). */
static void from_f32_run(bf16_t *dst, const float *src, size_t n) {
  size_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 32 <= n; i += 32) {
    const __m512bh p = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
    _mm512_storeu_si512((void *)(dst + i), (__m512i)p);
  }
#endif
#ifdef __AVX512F__
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(void *)(dst + i), bf16_cvt_f32x16(_mm512_loadu_ps(src + i)));
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(void *)(dst + i), bf16_cvt_f32x8(_mm256_loadu_ps(src + i)));
#endif
  for (; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}

static void to_f32_run(float *dst, const bf16_t *src, size_t n) {
  size_t i = 0;
#ifdef __AVX512F__
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, bf16_load_f32x16(src + i));
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, bf16_cvt_bf16x8(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
#endif
  for (; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

static void from_f32_range(void *dst, const void *src, size_t i0, size_t i1) {
  from_f32_run((bf16_t *)dst + i0, (const float *)src + i0, i1 - i0);
}
static void to_f32_range(void *dst, const void *src, size_t i0, size_t i1) {
  to_f32_run((float *)dst + i0, (const bf16_t *)src + i0, i1 - i0);
}

/* range() over [0, n): on the calling thread below BF16_PAR_MIN, else each
 * OpenMP thread one contiguous block starting on a multiple of 64 elements
 * (whole cache lines of the bf16 side, vector loops aligned). */
static void over_blocks(void (*range)(void *, const void *, size_t, size_t), void *dst, const void *src, size_t n) {
  if (n < BF16_PAR_MIN) {
    range(dst, src, 0, n);
    return;
  }
#pragma omp parallel
  {
    size_t i0 = 0, i1 = n;
#ifdef _OPENMP
    const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    const size_t per = ((n + nt - 1) / nt + 63) & ~(size_t)63;
    i0 = per * t < n ? per * t : n;
    i1 = i0 + per < n ? i0 + per : n;
#endif
    range(dst, src, i0, i1);
  }
}

void bf16_from_f32(bf16_t *dst, const float *src, size_t n) { over_blocks(from_f32_range, dst, src, n); }

void bf16_to_f32_array(float *dst, const bf16_t *src, size_t n) { over_blocks(to_f32_range, dst, src, n); }
