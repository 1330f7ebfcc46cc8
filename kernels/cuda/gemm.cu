/* Dense algebra on cuBLAS: row-major GEMMs with explicit leading dimensions
 * and fp32 accumulation, the weight-gradient GEMM into float, and the
 * full-rank linear layer on top of them.
 *
 * Row-major on a column-major library: a row-major X[R, C] with row stride ld
 * is the column-major X^T with leading dimension ld, so
 *   C[M, N] = op(A)[M, K] . op(B)[K, N]          (row-major)
 * is the column-major C^T[N, M] = op(B)^T . op(A)^T: cuBLAS gets (B, A) in
 * that order with m = N, n = M and the same transpose flags.
 *
 * Types: act A and B (float, or bf16 on tensor cores), C act (gemm) or float
 * (gemm_acc_f32), compute CUBLAS_COMPUTE_32F (no TF32: float activations
 * get true fp32 GEMMs). The handle's workspace is set once at creation and
 * cuBLAS does not allocate per call; results are reproducible for a given
 * device and shapes (cuBLAS uses no atomics unless asked to). */
#include "cuda_internal.cuh"

static void gemm_ex(boost_backend *be, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                    int ldb, float beta, void *C, int c_f32, int ldc) {
  if (M <= 0 || N <= 0) return;
  const cudaDataType_t at = is_bf16(be) ? CUDA_R_16BF : CUDA_R_32F, ct = c_f32 ? CUDA_R_32F : at;
  const float alpha = 1.0f;
  cublasCheck(cublasGemmEx(CB(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                           &alpha, B, at, ldb, A, at, lda, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void cu_gemm(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb, float beta,
             boost_act *C, int ldc) {
  gemm_ex(be, ta, tb, M, N, K, A, lda, B, ldb, beta, C, 0, ldc);
}

void cu_gemm_acc_f32(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                     float *C, int ldc) {
  gemm_ex(be, ta, tb, M, N, K, A, lda, B, ldb, 1.0f, C, 1, ldc);
}

/* out[N, Cout] = in[N, Cin] . W[Cout, Cin]^T */
void cu_linear_forward(boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout) {
  gemm_ex(be, 0, 1, N, Cout, Cin, in, Cin, W, Cin, 0.0f, out, 0, Cout);
}

/* din = dout . W (assign; NULL skips), dW += dout^T . in */
void cu_linear_backward(boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N, int Cin,
                        int Cout) {
  if (din) gemm_ex(be, 0, 0, N, Cin, Cout, dout, Cout, W, Cin, 0.0f, din, 0, Cin);
  if (dW) gemm_ex(be, 1, 0, Cout, Cin, N, dout, Cout, in, Cin, 1.0f, dW, 1, Cin);
}
