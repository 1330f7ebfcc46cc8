/* kern_gemm_bf16 (contract in gemm_bf16.h): which backend runs the bf16
 * GEMMs, the entry point, and the fp32 fallback. oneDNN's primitives are in
 * gemm_bf16_dnnl.c, a decode step's one-row product in gemm_bf16_row.c. */
#include "cpu_internal.h" /* first (see there) */
#include "gemm_bf16.h"
#include "gemm_bf16_internal.h"
#include "gemm_bf16_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "check.h"
#include "ops.h"

enum { BACKEND_UNSET, BACKEND_FALLBACK, BACKEND_DNNL };

static int backend = BACKEND_UNSET;
static char info_line[512];
static int native_bf16;

/* ---- the fp32 fallback ---------------------------------------------------- */

/* Grow-only scratch (the training thread is the only caller). */
typedef struct {
  float *p;
  size_t n;
} scratch;
static scratch sa, sb, sc;

static float *scratch_get(scratch *s, size_t n) {
  if (n > s->n) {
    boost_free(s->p);
    s->p = boost_calloc(n, sizeof(float));
    s->n = n;
  }
  return s->p;
}

/* rows x cols of a strided bf16 matrix into a dense fp32 one. */
static void widen(float *dst, const bf16_t *src, int rows, int cols, int ld) {
  if (ld == cols) {
    bf16_to_f32_array(dst, src, (size_t)rows * cols);
    return;
  }
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= BF16_PAR_MIN)
  for (int r = 0; r < rows; r++) bf16_to_f32_array(dst + (size_t)r * cols, src + (size_t)r * ld, (size_t)cols);
}

static void narrow(bf16_t *dst, int ld, const float *src, int rows, int cols) {
  if (ld == cols) {
    bf16_from_f32(dst, src, (size_t)rows * cols);
    return;
  }
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= BF16_PAR_MIN)
  for (int r = 0; r < rows; r++) bf16_from_f32(dst + (size_t)r * ld, src + (size_t)r * cols, (size_t)cols);
}

/* The inputs widened exactly, the product by the fp32 kern_gemm() (OpenBLAS on
 * our threads), a bf16 output rounded by f32_to_bf16. */
static void fallback_gemm(int ta, int tb, int M, int N, int K, const bf16_t *A, int lda, const bf16_t *B, int ldb,
                          float beta, void *C, int ldc, int c_is_f32) {
  const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  float *Af = scratch_get(&sa, (size_t)ar * ac), *Bf = scratch_get(&sb, (size_t)br * bc);
  widen(Af, A, ar, ac, lda);
  widen(Bf, B, br, bc, ldb);
  if (c_is_f32) {
    kern_gemm(ta, tb, M, N, K, Af, ac, Bf, bc, beta, C, ldc);
    return;
  }
  float *Cf = scratch_get(&sc, (size_t)M * N);
  if (beta != 0.0f) widen(Cf, C, M, N, ldc);
  kern_gemm(ta, tb, M, N, K, Af, ac, Bf, bc, beta, Cf, N);
  narrow(C, ldc, Cf, M, N);
}

/* fallback_gemm for a caller inside a parallel region: its own buffers
 * (the shared scratch belongs to the training thread), the serial sgemm. */
static void parallel_fallback(int ta, int tb, int M, int N, int K, const bf16_t *A, int lda, const bf16_t *B, int ldb,
                              float beta, void *C, int ldc, int c_is_f32) {
  const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  float *Af = boost_calloc((size_t)ar * ac, sizeof(float)), *Bf = boost_calloc((size_t)br * bc, sizeof(float));
  for (int r = 0; r < ar; r++)
    for (int c = 0; c < ac; c++) Af[(size_t)r * ac + c] = bf16_to_f32(A[(size_t)r * lda + c]);
  for (int r = 0; r < br; r++)
    for (int c = 0; c < bc; c++) Bf[(size_t)r * bc + c] = bf16_to_f32(B[(size_t)r * ldb + c]);
  float *Cf = c_is_f32 ? (float *)C : boost_calloc((size_t)M * N, sizeof(float));
  const int cld = c_is_f32 ? ldc : N;
  if (!c_is_f32 && beta != 0.0f)
    for (int r = 0; r < M; r++)
      for (int c = 0; c < N; c++) Cf[(size_t)r * N + c] = bf16_to_f32(((const bf16_t *)C)[(size_t)r * ldc + c]);
  kern_gemm(ta, tb, M, N, K, Af, ac, Bf, bc, beta, Cf, cld); /* serial inside a parallel region (cpu_internal.h) */
  if (!c_is_f32) {
    for (int r = 0; r < M; r++)
      for (int c = 0; c < N; c++) ((bf16_t *)C)[(size_t)r * ldc + c] = f32_to_bf16(Cf[(size_t)r * N + c]);
    boost_free(Cf);
  }
  boost_free(Af);
  boost_free(Bf);
}

/* ---- choice and entry point ---------------------------------------------- */

static void choose_backend(void) {
  const char *env = getenv("BOOST_GEMM_BF16");
  const int want_fallback = env && !strcmp(env, "fallback"), forced = env && !strcmp(env, "onednn");
  char why[256] = "";
  if (!want_fallback && gemm_bf16_dnnl_start(forced, why, sizeof why, info_line, sizeof info_line, &native_bf16)) {
    backend = BACKEND_DNNL;
    return;
  }
  if (want_fallback) snprintf(why, sizeof why, "BOOST_GEMM_BF16=fallback");
  backend = BACKEND_FALLBACK;
  native_bf16 = 0;
  snprintf(info_line, sizeof info_line,
           "fp32 fallback: bf16 inputs widened to fp32, OpenBLAS sgemm, bf16 outputs rounded to nearest even "
           "(emulated, no bf16 instructions: %s)",
           why);
}

void kern_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
               float beta, void *C, int ldc, int c_is_f32) {
  BOOST_ASSERT((trans_a == 0 || trans_a == 1) && (trans_b == 0 || trans_b == 1));
  BOOST_ASSERT(M >= 0 && N >= 0 && K >= 0 && (beta == 0.0f || beta == 1.0f));
  if (M == 0 || N == 0) return;
  BOOST_ASSERT(ldc >= N && lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && lda >= 1 && ldb >= 1);
  if (backend == BACKEND_UNSET) {
#pragma omp critical(gemm_bf16_table)
    if (backend == BACKEND_UNSET) choose_backend();
  }
  if (K == 0) { /* an empty sum: C = beta C */
    if (beta == 0.0f)
      for (int i = 0; i < M; i++)
        memset((char *)C + (size_t)i * ldc * (c_is_f32 ? 4 : 2), 0, (size_t)N * (c_is_f32 ? 4 : 2));
    return;
  }
  if (M == 1 && !trans_a && trans_b && !c_is_f32 && !gemm_bf16_in_parallel()) {
    gemm_bf16_row_times_bt(N, K, A, B, ldb, beta, C);
    return;
  }
  if (backend == BACKEND_DNNL &&
      gemm_bf16_dnnl_run(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, c_is_f32))
    return;
  if (gemm_bf16_in_parallel()) {
    parallel_fallback(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, c_is_f32);
    return;
  }
  fallback_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, c_is_f32);
}

void gemm_bf16_info(char *buf, size_t n) {
  if (!buf || n == 0) return;
  if (backend == BACKEND_UNSET) choose_backend();
  snprintf(buf, n, "%s; conversions %s", info_line, bf16_convert_path());
}

int gemm_bf16_impl_is_native(int isa_has_bf16, const char *impl) {
  return isa_has_bf16 && impl && (strstr(impl, "bf16") || strstr(impl, "amx"));
}

int gemm_bf16_native(void) {
  if (backend == BACKEND_UNSET) choose_backend();
  return native_bf16;
}

void gemm_bf16_release(void) {
  gemm_bf16_dnnl_release();
  gemm_bf16_pack_release();
  boost_free(sa.p);
  boost_free(sb.p);
  boost_free(sc.p);
  sa = sb = sc = (scratch){NULL, 0};
}
