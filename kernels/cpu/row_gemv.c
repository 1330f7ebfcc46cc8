/* row_gemv_f32 (contract in row_gemv.h). */
#include "row_gemv.h"

#include <stddef.h>

#ifdef __AVX512F__
#include <immintrin.h>

/* rows (1..4) rows of B against a: acc[r] = a . B[r]. */
static inline void dot_rows_f32(int rows, int K, const float *a, const float *b, int ldb, float *acc) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  const float *b1 = b + (rows > 1 ? ldb : 0), *b2 = b + (rows > 2 ? 2 * ldb : 0), *b3 = b + (rows > 3 ? 3 * ldb : 0);
  const char *ahead = rows == 4 && ldb == K ? (const char *)(b + (size_t)16 * ldb) : NULL;
  int k = 0;
  for (; k + 16 <= K; k += 16) {
    if (ahead) /* four rows of 16 floats: four lines of the block, in address order */
      for (int line = 0; line < 4; line++) _mm_prefetch(ahead + (size_t)k * 16 + 64 * line, _MM_HINT_T0);
    const __m512 av = _mm512_loadu_ps(a + k);
    s0 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b + k), s0);
    if (rows > 1) s1 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b1 + k), s1);
    if (rows > 2) s2 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b2 + k), s2);
    if (rows > 3) s3 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b3 + k), s3);
  }
  if (k < K) { /* the tail, zeros past K on both sides */
    const __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
    const __m512 av = _mm512_maskz_loadu_ps(m, a + k);
    s0 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, b + k), s0);
    if (rows > 1) s1 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, b1 + k), s1);
    if (rows > 2) s2 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, b2 + k), s2);
    if (rows > 3) s3 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, b3 + k), s3);
  }
  acc[0] = _mm512_reduce_add_ps(s0);
  if (rows > 1) acc[1] = _mm512_reduce_add_ps(s1);
  if (rows > 2) acc[2] = _mm512_reduce_add_ps(s2);
  if (rows > 3) acc[3] = _mm512_reduce_add_ps(s3);
}

int row_gemv_f32(int N, int K, const float *a, const float *B, int ldb, float beta, float *c) {
  for (int n0 = 0; n0 < N; n0 += 4) {
    const int rows = N - n0 < 4 ? N - n0 : 4;
    float acc[4];
    if (rows == 4) dot_rows_f32(4, K, a, B + (size_t)n0 * ldb, ldb, acc); /* the common case, specialised */
    else dot_rows_f32(rows, K, a, B + (size_t)n0 * ldb, ldb, acc);
    for (int r = 0; r < rows; r++) c[n0 + r] = beta != 0.0f ? c[n0 + r] + acc[r] : acc[r];
  }
  return 1;
}
#else
int row_gemv_f32(int N, int K, const float *a, const float *B, int ldb, float beta, float *c) {
  (void)N, (void)K, (void)a, (void)B, (void)ldb, (void)beta, (void)c;
  return 0;
}
#endif
