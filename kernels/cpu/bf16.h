/* bfloat16 <-> fp32 conversion for every CPU kernel, one rule everywhere.
 *
 * bf16 is the upper half of an fp32: same sign and 8-bit exponent, 7 stored
 * mantissa bits. bf16 -> fp32 is exact (a 16-bit shift). fp32 -> bf16 is the
 * rule of the x86 instruction VCVTNEPS2BF16 (AVX512_BF16), which the CPUs
 * with bf16 dot products execute, so that the software paths and the
 * instruction give the same bits on every input:
 *
 *  - finite, normal: round to nearest, ties to even (integer add of
 *    0x7fff + the lowest kept bit, then truncate). Overflow rounds to +-inf.
 *    MXCSR's rounding mode is not consulted.
 *  - zero or fp32 denormal: signed zero. The instruction treats denormal
 *    inputs as zero whatever MXCSR says (measured on AMD Zen 4: 0x00000001
 *    and 0x007fffff both give 0x0000 and 0x807fffff gives 0x8000, where
 *    rounding to nearest would give 0x0080 and 0x8080 for the last two).
 *    A normal fp32 never rounds to a bf16 denormal (the exponent ranges
 *    are equal), so no bf16 denormal is ever produced either.
 *  - inf: inf. NaN: stays NaN and becomes quiet -- the upper half with the
 *    quiet bit (0x0040) set; sign and the upper payload bits kept
 *    (0x7f800001 -> 0x7fc0, 0xff800001 -> 0xffc0, 0x7fbfffff -> 0x7fff).
 *
 * Denormals flushing to zero is the instruction's choice, not IEEE's; we
 * follow it so that a tensor converted by the vector loop, its scalar tail,
 * or a CPU without the instruction are the same bits (determinism across
 * tails and CPUs). Values below 2^-126 ~ 1.2e-38 do not matter to training.
 * (ckpt_round_bf16, the checkpoint export's rounding, keeps its own
 * historical rule: it rounds denormals instead of flushing them.)
 *
 * Paths, chosen at compile time from the build's -march (BOOST_NATIVE):
 * AVX512_BF16 (the instruction), AVX-512F and AVX2 (the rule in integer
 * lanes), scalar. All give identical bits; tests/unit/test_bf16.c checks
 * each against the scalar rule and, where the CPU has it, the instruction. */
#ifndef BOOST_KERNELS_CPU_BF16_H
#define BOOST_KERNELS_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

typedef uint16_t bf16_t;

static inline float bf16_to_f32(bf16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline bf16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x0040u); /* NaN: quiet */
  if ((u & 0x7f800000u) == 0) return (bf16_t)((u >> 16) & 0x8000u);        /* zero, denormal */
  return (bf16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 /* RNE; inf stays inf */
}

#ifdef __AVX512F__
/* 16 floats -> 16 bf16 (in a __m256i) */
static inline __m256i bf16_cvt_f32x16(__m512 v) {
#ifdef __AVX512BF16__
  return (__m256i)_mm512_cvtneps_pbh(v);
#else
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x0040)));
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(hi, _mm512_set1_epi32(0x8000)));
  return _mm512_cvtepi32_epi16(r);
#endif
}
/* 16 bf16 -> 16 floats (exact) */
static inline __m512 bf16_cvt_bf16x16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
static inline __m512 bf16_load_f32x16(const bf16_t *p) {
  return bf16_cvt_bf16x16(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline void bf16_store_f32x16(bf16_t *p, __m512 v) {
  _mm256_storeu_si256((__m256i *)(void *)p, bf16_cvt_f32x16(v));
}
#endif

#ifdef __AVX2__
/* 8 floats -> 8 bf16 (in a __m128i), the same rule in AVX2 lanes */
static inline __m128i bf16_cvt_f32x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i hi = _mm256_srli_epi32(u, 16);
  /* |u| <= 0x7fffffff, so the signed compare is the unsigned one */
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x0040)), nan);
  r = _mm256_blendv_epi8(r, _mm256_and_si256(hi, _mm256_set1_epi32(0x8000)), tiny);
  /* every lane is in [0, 0xffff]: the unsigned-saturating pack is exact */
  const __m256i p = _mm256_packus_epi32(r, r);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}
static inline __m256 bf16_cvt_bf16x8(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

/* dst[i] = f32_to_bf16(src[i]); OpenMP-parallel above BF16_PAR_MIN
 * elements. Elementwise and exact, so the bits never depend on the thread
 * count or on which path converted an element. dst and src must not
 * overlap. */
void bf16_from_f32(bf16_t *dst, const float *src, size_t n);
/* dst[i] = bf16_to_f32(src[i]); same threading. */
void bf16_to_f32_array(float *dst, const bf16_t *src, size_t n);

/* Which path the array conversions were compiled with: "avx512_bf16",
 * "avx512f", "avx2" or "scalar". */
const char *bf16_convert_path(void);

#define BF16_PAR_MIN ((size_t)1 << 16)

#endif
