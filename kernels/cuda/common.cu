/* Context, checked calls, memory helpers, conversions and the row-major
 * cuBLAS GEMM wrappers.
 *
 * Row-major on a column-major library: a row-major matrix X[R,C] with row
 * stride ld is the column-major X^T with leading dimension ld. So
 *   C[M,N] = op(A)[M,K] . op(B)[K,N]   (row-major)
 * is the column-major C^T[N,M] = op(B)^T . op(A)^T: cuBLAS gets (B, A) in
 * that order with m = N, n = M, and the same transpose flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

void gpu_check_cuda(cudaError_t err, const char *file, int line) {
  if (err == cudaSuccess) return;
  fprintf(stderr, "boost: CUDA error at %s:%d: %s (%s)\n", file, line, cudaGetErrorString(err), cudaGetErrorName(err));
  fflush(stderr);
  exit(1);
}

void gpu_check_cublas(cublasStatus_t st, const char *file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  fprintf(stderr, "boost: cuBLAS error at %s:%d: %s (%s)\n", file, line, cublasGetStatusString(st),
          cublasGetStatusName(st));
  fflush(stderr);
  exit(1);
}

int gpu_device_count(void) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky-free error state */
    return 0;
  }
  return n;
}

#define CUBLAS_WS_BYTES ((size_t)32 << 20)

void gpu_ctx_init(gpu_ctx *ctx, int device) {
  memset(ctx, 0, sizeof *ctx);
  ctx->device = device;
  cudaCheck(cudaSetDevice(device));
  cudaDeviceProp prop;
  cudaCheck(cudaGetDeviceProperties(&prop, device));
  ctx->sm_count = prop.multiProcessorCount;
  ctx->cc_major = prop.major;
  ctx->cc_minor = prop.minor;
  cudaCheck(cudaStreamCreate(&ctx->stream));
  cublasCheck(cublasCreate(&ctx->cublas));
  cublasCheck(cublasSetStream(ctx->cublas, ctx->stream));
  cublasCheck(cublasSetPointerMode(ctx->cublas, CUBLAS_POINTER_MODE_HOST));
  ctx->cublas_ws_bytes = CUBLAS_WS_BYTES;
  cudaCheck(cudaMalloc(&ctx->cublas_ws, ctx->cublas_ws_bytes));
  cublasCheck(cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, ctx->cublas_ws_bytes));
}

void gpu_ctx_destroy(gpu_ctx *ctx) {
  if (ctx->stream) cudaCheck(cudaStreamSynchronize(ctx->stream));
  if (ctx->cublas) cublasCheck(cublasDestroy(ctx->cublas));
  if (ctx->cublas_ws) cudaCheck(cudaFree(ctx->cublas_ws));
  if (ctx->scratch) cudaCheck(cudaFree(ctx->scratch));
  if (ctx->stream) cudaCheck(cudaStreamDestroy(ctx->stream));
  memset(ctx, 0, sizeof *ctx);
}

void gpu_sync(gpu_ctx *ctx) {
  cudaCheck(cudaStreamSynchronize(ctx->stream));
  cudaCheck(cudaGetLastError());
}

void *gpu_malloc(size_t bytes) {
  void *p = NULL;
  cudaCheck(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

void gpu_free(void *p) {
  if (p) cudaCheck(cudaFree(p));
}

void gpu_upload(gpu_ctx *ctx, void *dst, const void *h_src, size_t bytes) {
  if (!bytes) return;
  cudaCheck(cudaMemcpyAsync(dst, h_src, bytes, cudaMemcpyHostToDevice, ctx->stream));
  cudaCheck(cudaStreamSynchronize(ctx->stream));
}

void gpu_download(gpu_ctx *ctx, void *h_dst, const void *src, size_t bytes) {
  if (!bytes) return;
  cudaCheck(cudaMemcpyAsync(h_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
  cudaCheck(cudaStreamSynchronize(ctx->stream));
}

void gpu_zero(gpu_ctx *ctx, void *dst, size_t bytes) {
  if (bytes) cudaCheck(cudaMemsetAsync(dst, 0, bytes, ctx->stream));
}

void *gpu_scratch(gpu_ctx *ctx, size_t bytes) {
  if (bytes > ctx->scratch_bytes) {
    if (ctx->scratch) cudaCheck(cudaFree(ctx->scratch));
    size_t want = bytes + bytes / 4; /* some headroom against creeping growth */
    want = (want + 255) & ~(size_t)255;
    cudaCheck(cudaMalloc(&ctx->scratch, want));
    ctx->scratch_bytes = want;
  }
  return ctx->scratch;
}

/* ---- conversions --------------------------------------------------------- */

__global__ void f32_to_bf16_kernel(gpu_bf16 *out, const float *in, size_t n, int vec) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t n8 = vec ? n / 8 * 8 : 0;
  for (size_t j = t * 8; j < n8; j += stride * 8) {
    float4 a = __ldg(reinterpret_cast<const float4 *>(in + j));
    float4 b = __ldg(reinterpret_cast<const float4 *>(in + j + 4));
    float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    store8(out + j, f);
  }
  for (size_t i = n8 + t; i < n; i += stride) out[i] = f2bf(in[i]);
}

__global__ void bf16_to_f32_kernel(float *out, const gpu_bf16 *in, size_t n, int vec) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t n8 = vec ? n / 8 * 8 : 0;
  for (size_t j = t * 8; j < n8; j += stride * 8) {
    float f[8];
    load8(f, in + j);
    *reinterpret_cast<float4 *>(out + j) = make_float4(f[0], f[1], f[2], f[3]);
    *reinterpret_cast<float4 *>(out + j + 4) = make_float4(f[4], f[5], f[6], f[7]);
  }
  for (size_t i = n8 + t; i < n; i += stride) out[i] = bf2f(in[i]);
}

void gpu_f32_to_bf16(gpu_ctx *ctx, gpu_bf16 *out, const float *in, size_t n) {
  if (!n) return;
  int vec = aligned16(out) && aligned16(in);
  f32_to_bf16_kernel<<<ew_grid(ctx, vec ? n / 8 + 8 : n, 256), 256, 0, ctx->stream>>>(out, in, n, vec);
  LAUNCH_CHECK();
}

void gpu_bf16_to_f32(gpu_ctx *ctx, float *out, const gpu_bf16 *in, size_t n) {
  if (!n) return;
  int vec = aligned16(out) && aligned16(in);
  bf16_to_f32_kernel<<<ew_grid(ctx, vec ? n / 8 + 8 : n, 256), 256, 0, ctx->stream>>>(out, in, n, vec);
  LAUNCH_CHECK();
}

/* ---- GEMM ------------------------------------------------------------------ */

void gpu_gemm_strided(gpu_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha, const gpu_bf16 *A,
                      int lda, long long stride_a, const gpu_bf16 *B, int ldb, long long stride_b, float beta, void *C,
                      int c_fp32, int ldc, long long stride_c, int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  cublasOperation_t opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cudaDataType_t ct = c_fp32 ? CUDA_R_32F : CUDA_R_16BF;
  if (batch == 1) {
    cublasCheck(cublasGemmEx(ctx->cublas, opb, opa, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta,
                             C, ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    cublasCheck(cublasGemmStridedBatchedEx(ctx->cublas, opb, opa, N, M, K, &alpha, B, CUDA_R_16BF, ldb, stride_b, A,
                                           CUDA_R_16BF, lda, stride_a, &beta, C, ct, ldc, stride_c, batch,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void gpu_gemm(gpu_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha, const gpu_bf16 *A, int lda,
              const gpu_bf16 *B, int ldb, float beta, void *C, int c_fp32, int ldc) {
  gpu_gemm_strided(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, c_fp32, ldc, 0, 1);
}
