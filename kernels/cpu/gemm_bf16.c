/* The bf16 GEMM, emulated: operands widened to fp32 (exact) and multiplied
 * by the fp32 gemm, the result rounded when C is bf16. */
#include "gemm_bf16.h"

#include <stdio.h>

#include "bf16.h"
#include "check.h"
#include "ops.h"

static float *widen(const uint16_t *X, int rows, int cols, int ld) {
  float *w = boost_calloc((size_t)rows * cols, sizeof *w);
  for (int i = 0; i < rows; i++) bf16_to_f32_array(w + (size_t)i * cols, X + (size_t)i * ld, (size_t)cols);
  return w;
}

void gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
               void *C, int ldc, int c_is_f32) {
  if (M <= 0 || N <= 0) return;
  float *a = widen(A, ta ? K : M, ta ? M : K, lda), *b = widen(B, tb ? N : K, tb ? K : N, ldb);
  if (c_is_f32) {
    gemm(ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, beta, C, ldc);
  } else {
    float *c = beta != 0.0f ? widen(C, M, N, ldc) : boost_calloc((size_t)M * N, sizeof *c);
    gemm(ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, beta, c, N);
    for (int i = 0; i < M; i++) bf16_from_f32((uint16_t *)C + (size_t)i * ldc, c + (size_t)i * N, (size_t)N);
    boost_free(c);
  }
  boost_free(a);
  boost_free(b);
}

void gemm_bf16_info(char *buf, size_t n) { snprintf(buf, n, "emulated (fp32 OpenBLAS on widened operands)"); }
