/* The one-row product of a decode step (gemm_bf16_internal.h). */
#include "cpu_internal.h" /* first (see there) */
#include "gemm_bf16_internal.h"

#include "bf16.h"
#include "check.h"

/* One row against a weight matrix, C[1,N] = A[1,K] . B[N,K]^T (+ C): a
 * decode step's products, which read every weight once and so run at the
 * speed memory delivers B. The matmul primitive reached less than half of
 * that at M = 1, and a loop widening B to fp32 element by element about
 * 10 GB/s on one Zen 4 core (bf16 decode 1.1x fp32 where its bytes allow
 * 2x): with AVX512_BF16 each 64-byte line of B is one VDPBF16PS, the
 * instruction the primitive itself runs. Products exact, summed in fp32
 * (the dot-product instruction's denormal flush, as in the contract), C
 * rounded to bf16. Split by groups of rows of B over the threads when the
 * product pays for them; each element is one fixed sum: the same bits for
 * any thread count (the sum's grouping follows B's offset from a 64-byte
 * boundary, which a model's arena fixes). */
#if defined(__AVX512BF16__)
/* rows (1..4) rows of B, row stride ldb, against a: acc[r] = a . B[r]. */
static inline void dot_rows(int rows, int K, const uint16_t *a, const uint16_t *b, int ldb, float *acc) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  const uint16_t *b1 = b + (rows > 1 ? ldb : 0), *b2 = b + (rows > 2 ? 2 * ldb : 0), *b3 = b + (rows > 3 ? 3 * ldb : 0);
  /* The rows' first elements up to a 64-byte boundary, when every row has
   * the same offset from one (ldb a multiple of 32), as one masked step:
   * the loop's full loads then each read one cache line (unaligned, every
   * load read two and the loop ran at ~55 % of the fp32 loop's bytes per
   * second). A model's rows never need it: the trainer's arena starts
   * every tensor on a 64-byte line of the working copy too (tensor.c).
   * Kept all the same: without these lines GCC 12 scheduled the loop
   * below so that it streamed 15-17 GB/s instead of 24-28 on one Zen 4
   * core (llama-60m decode, binaries alternated, the step not taken in
   * either; docs/PERFORMANCE.md). */
  int k = ldb % 32 == 0 ? (int)((64 - ((uintptr_t)b & 63)) & 63) / 2 : 0;
  if (k > K) k = K;
  if (k > 0) {
    const __mmask32 m = (__mmask32)((1ull << k) - 1);
    const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(m, a);
    s0 = _mm512_dpbf16_ps(s0, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b));
    if (rows > 1) s1 = _mm512_dpbf16_ps(s1, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b1));
    if (rows > 2) s2 = _mm512_dpbf16_ps(s2, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b2));
    if (rows > 3) s3 = _mm512_dpbf16_ps(s3, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b3));
  }
  /* Where the rows are one block (ldb = K: a model's weights), the block
   * 16 rows ahead is prefetched in address order, four lines per step: the
   * hardware prefetcher follows four interleaved row streams badly. On one
   * Zen 4 core, 80 MB of weights: 9.5 GB/s without, 10.9 prefetching the
   * next group's same columns, 13-17 in address order 16 rows ahead (32
   * rows: 5-10 % less), as fast as row_gemv.h's fp32 loop per byte measured
   * in the same process. */
  const char *ahead = rows == 4 && ldb == K ? (const char *)(b + (size_t)16 * ldb) : NULL;
  for (; k + 32 <= K; k += 32) {
    if (ahead)
      for (int line = 0; line < 4; line++) _mm_prefetch(ahead + (size_t)k * 8 + 64 * line, _MM_HINT_T0);
    const __m512bh av = (__m512bh)_mm512_loadu_si512(a + k);
    s0 = _mm512_dpbf16_ps(s0, av, (__m512bh)_mm512_loadu_si512(b + k));
    if (rows > 1) s1 = _mm512_dpbf16_ps(s1, av, (__m512bh)_mm512_loadu_si512(b1 + k));
    if (rows > 2) s2 = _mm512_dpbf16_ps(s2, av, (__m512bh)_mm512_loadu_si512(b2 + k));
    if (rows > 3) s3 = _mm512_dpbf16_ps(s3, av, (__m512bh)_mm512_loadu_si512(b3 + k));
  }
  if (k < K) { /* the tail, zeros past K on both sides */
    const __mmask32 m = (__mmask32)((1ull << (K - k)) - 1);
    const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(m, a + k);
    s0 = _mm512_dpbf16_ps(s0, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b + k));
    if (rows > 1) s1 = _mm512_dpbf16_ps(s1, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b1 + k));
    if (rows > 2) s2 = _mm512_dpbf16_ps(s2, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b2 + k));
    if (rows > 3) s3 = _mm512_dpbf16_ps(s3, av, (__m512bh)_mm512_maskz_loadu_epi16(m, b3 + k));
  }
  /* The four sums in one tree (the rows past `rows` sum zeros): halves
   * added, then pairwise across the rows. A group of four bf16 rows of 512
   * is 16 steps of the loop, half an fp32 group's: four separate
   * reductions and roundings were ~12 % of the kernel's time (perf). */
  const __m256 h0 = _mm256_add_ps(_mm512_castps512_ps256(s0), _mm512_extractf32x8_ps(s0, 1));
  const __m256 h1 = _mm256_add_ps(_mm512_castps512_ps256(s1), _mm512_extractf32x8_ps(s1, 1));
  const __m256 h2 = _mm256_add_ps(_mm512_castps512_ps256(s2), _mm512_extractf32x8_ps(s2, 1));
  const __m256 h3 = _mm256_add_ps(_mm512_castps512_ps256(s3), _mm512_extractf32x8_ps(s3, 1));
  const __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(h0, h1), _mm256_hadd_ps(h2, h3));
  _mm_storeu_ps(acc, _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1)));
}

/* C[0..4) = bf16(acc (+ C)): the conversion instruction, whose rounding
 * f32_to_bf16 follows bit for bit (bf16.h). */
static inline void store_four(const float *acc, float beta, uint16_t *C) {
  __m128 v = _mm_loadu_ps(acc);
  if (beta != 0.0f)
    v = _mm_add_ps(v, _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)C)), 16)));
  _mm_storel_epi64((__m128i *)C, (__m128i)_mm_cvtneps_pbh(v));
}
#else
/* The same without the instruction: B widened in the loop, a widened
 * once by the caller (af). */
static inline void dot_rows(int rows, int K, const float *af, const uint16_t *b, int ldb, float *acc) {
  if (rows == 4) { /* four independent sums, each a[k] loaded once */
    const uint16_t *b0 = b, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int k = 0; k < K; k++) {
      s0 += af[k] * bf16_to_f32(b0[k]);
      s1 += af[k] * bf16_to_f32(b1[k]);
      s2 += af[k] * bf16_to_f32(b2[k]);
      s3 += af[k] * bf16_to_f32(b3[k]);
    }
    acc[0] = s0, acc[1] = s1, acc[2] = s2, acc[3] = s3;
    return;
  }
  for (int r = 0; r < rows; r++) {
    const uint16_t *br = b + (size_t)r * ldb;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int k = 0; k < K; k++) s += af[k] * bf16_to_f32(br[k]);
    acc[r] = s;
  }
}
#endif

void gemm_bf16_row_times_bt(int N, int K, const uint16_t *A, const uint16_t *B, int ldb, float beta, uint16_t *C) {
#if defined(__AVX512BF16__)
  const uint16_t *a = A;
#else
  float *a = boost_calloc((size_t)K, sizeof *a); /* A widened once: the loop converts only B */
  for (int k = 0; k < K; k++) a[k] = bf16_to_f32(A[k]);
#endif
  const int groups = (N + 3) / 4;
#pragma omp parallel for schedule(static) if (gemm_worth_threads((double)N * K))
  for (int gi = 0; gi < groups; gi++) {
    const int n0 = 4 * gi, rows = N - n0 < 4 ? N - n0 : 4;
    float acc[4];
    if (rows == 4) { /* the common case, specialised */
      dot_rows(4, K, a, B + (size_t)n0 * ldb, ldb, acc);
#if defined(__AVX512BF16__)
      store_four(acc, beta, C + n0);
      continue;
#endif
    } else
      dot_rows(rows, K, a, B + (size_t)n0 * ldb, ldb, acc);
    for (int r = 0; r < rows; r++)
      C[n0 + r] = f32_to_bf16(beta != 0.0f ? bf16_to_f32(C[n0 + r]) + acc[r] : acc[r]);
  }
#if !defined(__AVX512BF16__)
  boost_free(a);
#endif
}
