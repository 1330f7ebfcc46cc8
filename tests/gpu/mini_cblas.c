/* Naive reference sgemm for the standalone GPU-check build (see
 * compat/cblas.h): double accumulation, OpenMP over rows of C. Only sized for
 * the small reference problems of gpu_check.c. */
#include "compat/cblas.h"

static int g_threads = 1;

int openblas_get_num_threads(void) { return g_threads; }
void openblas_set_num_threads(int n) { g_threads = n > 0 ? n : 1; }

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (order == CblasColMajor) { /* column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T */
    cblas_sgemm(CblasRowMajor, tb, ta, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
    return;
  }
  const int at = ta != CblasNoTrans, bt = tb != CblasNoTrans;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double acc = 0.0;
      for (int p = 0; p < K; p++) {
        double a = at ? A[(long)p * lda + i] : A[(long)i * lda + p];
        double b = bt ? B[(long)j * ldb + p] : B[(long)p * ldb + j];
        acc += a * b;
      }
      float *c = C + (long)i * ldc + j;
      *c = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *c));
    }
  }
}
