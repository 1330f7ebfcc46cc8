/* The GEMM and the full-rank linear layer. Weights are [out, in].
 *
 * linear:  out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T
 *          din = dout . W (assign, NULL skips); dW += dout^T . in
 *
 * (A CoLA bottleneck is composed by the model from these GEMMs and SiLU:
 * grouped A-GEMMs for q/k/v and gate/up, and under btp the all-reduce sits
 * between the A-GEMM and the SiLU. A fused per-projection CoLA kernel was
 * measured 2-3% slower than that composition and removed.)
 *
 * Threading (see cpu_internal.h): one OpenMP region per call, OpenBLAS
 * single-threaded inside. A product too small for our threads is called
 * outside any region, never in an `if (0)` one: such a region is inactive,
 * so OpenBLAS's OpenMP build (serial only inside an active region) threads
 * the call with a nested team, whose threads libgomp creates afresh every
 * time (a cola-60m decode step at 2 threads created 88 and ran 4x slower
 * than at one). Outside, OpenBLAS splits it over the same number of threads
 * from the pooled team: the same result, no thread created. Weight
 * gradients are split over their rows/columns, never over tokens, so each
 * element is one sgemm: deterministic for a given thread count. */
#include "cpu_internal.h"

#include "ops.h"

/* The plain GEMM the model's projection groups are made of. Split over our
 * OpenMP threads by rows or columns of C (sgemm_slice), OpenBLAS serial
 * inside: on the bottleneck shapes (K or N = r) OpenBLAS's own threading ran
 * at 60-120 GFLOP/s on two cores where two independent slices run at
 * 150-190 (docs/PERFORMANCE.md). */
void kern_gemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
          float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if (!gemm_worth_threads((double)M * N * K)) { /* outside any region: see the top of this file */
    sgemm_slice(0, 1, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  int saved = blas_serial_begin();
#pragma omp parallel
  sgemm_slice(boost_thread_id(), boost_team_size(), ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  blas_serial_end(saved);
}

void kern_linear_forward(float *out, const float *in, const float *W, int N, int Cin, int Cout) {
  if (N <= 0 || Cout <= 0) return;
  if (!gemm_worth_threads((double)N * Cin * Cout)) {
    sgemm_slice(0, 1, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, in, Cin, W, Cin, 0.0f, out, Cout);
    return;
  }
  int saved = blas_serial_begin();
#pragma omp parallel
  sgemm_slice(boost_thread_id(), boost_team_size(), CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, in, Cin, W, Cin, 0.0f,
              out, Cout);
  blas_serial_end(saved);
}

void kern_linear_backward(float *din, float *dW, const float *dout, const float *in, const float *W, int N, int Cin,
                     int Cout) {
  if (N <= 0 || Cin <= 0 || Cout <= 0) return;
  if (!gemm_worth_threads((double)N * Cin * Cout * ((din != NULL) + (dW != NULL)))) {
    if (din) sgemm_slice(0, 1, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin, 0.0f, din, Cin);
    if (dW) sgemm_slice(0, 1, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, in, Cin, 1.0f, dW, Cin);
    return;
  }
  int saved = blas_serial_begin();
#pragma omp parallel
  {
    int t = boost_thread_id(), nt = boost_team_size();
    if (din) sgemm_slice(t, nt, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin, 0.0f, din, Cin);
    if (dW) sgemm_slice(t, nt, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, in, Cin, 1.0f, dW, Cin);
  }
  blas_serial_end(saved);
}
