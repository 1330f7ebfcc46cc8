/* CUDA kernels: the device mirror of kernels/cpu/ops.h (read that first).
 *
 * Same conventions as the CPU contract:
 *  - Row-major. N = B*T tokens; activations are [N, C].
 *  - Weight matrices are [out, in]; a projection is out[N,Cout] = in . W^T,
 *    and stacking the [out, in] matrices of a group gives one GEMM.
 *  - Parameter gradients ACCUMULATE (+=); activation gradients ASSIGN (=).
 *    A NULL activation-gradient pointer skips that work.
 *  - Every op has gpu_*_forward and gpu_*_backward.
 *
 * Differences from the CPU contract:
 *  - Every op takes a gpu_ctx first (stream, cuBLAS handle, workspaces) and
 *    is ASYNCHRONOUS on ctx->stream. Every tensor pointer is a DEVICE pointer
 *    unless its name starts with h_.
 *  - Precision (docs/CUDA.md): activations, activation gradients and the
 *    weights the ops read are bf16 (gpu_bf16). Parameter gradients, AdamW
 *    master weights and moments, RMSNorm rstd, RoPE tables, losses and all
 *    reductions are fp32 (sum of squares: fp64). Every GEMM is bf16 x bf16
 *    with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F); a GEMM that
 *    accumulates a parameter gradient writes fp32 directly (beta = 1).
 *    Elementwise and reduction kernels compute in fp32 and round once.
 *  - Attention takes an fp32 scratch [B, H, T, T] in forward too (the
 *    pre-softmax scores are kept in fp32); att (the saved probabilities) is bf16.
 *  - Results are deterministic for a given device and shapes: no floating
 *    point atomics (embedding backward sorts tokens; reductions use a fixed
 *    tree whose shape depends only on the sizes).
 *
 * Errors: a failing CUDA or cuBLAS call prints file:line and the error
 * string and exits(1) (cudaCheck / cublasCheck). Only gpu_device_count()
 * never fails: it returns 0 when there is no usable device.
 *
 * Usable from C11 (this header includes only the C runtime API and cuBLAS). */
#ifndef BOOST_KERNELS_CUDA_OPS_H
#define BOOST_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
#include <cuda_bf16.h>
typedef __nv_bfloat16 gpu_bf16;
extern "C" {
#else
/* In C, cuda_bf16.h offers only the raw 16-bit storage type; C code never
 * does arithmetic on bf16, it converts with gpu_f32_to_bf16/gpu_bf16_to_f32. */
#include <cuda_bf16.h>
typedef __nv_bfloat16_raw gpu_bf16;
#endif

/* ---- checked calls ------------------------------------------------------ */
void gpu_check_cuda(cudaError_t err, const char *file, int line);
void gpu_check_cublas(cublasStatus_t st, const char *file, int line);
#define cudaCheck(call) gpu_check_cuda((call), __FILE__, __LINE__)
#define cublasCheck(call) gpu_check_cublas((call), __FILE__, __LINE__)

/* ---- context ------------------------------------------------------------
 * One per host thread and device. Fields are read-only for callers. The
 * stream is a blocking stream (ordered with the legacy default stream, so a
 * plain cudaMemcpy by the caller is safe). */
typedef struct gpu_ctx {
  int device;
  int sm_count;
  int cc_major, cc_minor;
  cudaStream_t stream;
  cublasHandle_t cublas;
  void *cublas_ws; /* cuBLAS workspace (32 MiB) */
  size_t cublas_ws_bytes;
  void *scratch; /* op-internal temporaries; grows on demand */
  size_t scratch_bytes;
} gpu_ctx;

/* Number of CUDA devices; 0 when cudaGetDeviceCount fails (no driver, no
 * device). Never exits. */
int gpu_device_count(void);
/* Selects `device`, creates the stream, cuBLAS handle and workspace. */
void gpu_ctx_init(gpu_ctx *ctx, int device);
void gpu_ctx_destroy(gpu_ctx *ctx);
void gpu_sync(gpu_ctx *ctx); /* waits for ctx->stream; checks for errors */

/* ---- memory helpers (checked) ------------------------------------------- */
void *gpu_malloc(size_t bytes);
void gpu_free(void *p); /* NULL is fine */
/* Synchronous copies on ctx->stream (return once the copy is done). */
void gpu_upload(gpu_ctx *ctx, void *dst, const void *h_src, size_t bytes);
void gpu_download(gpu_ctx *ctx, void *h_dst, const void *src, size_t bytes);
void gpu_zero(gpu_ctx *ctx, void *dst, size_t bytes); /* async memset 0 */
/* Conversions (round to nearest even). In-place is not allowed. */
void gpu_f32_to_bf16(gpu_ctx *ctx, gpu_bf16 *out, const float *in, size_t n);
void gpu_bf16_to_f32(gpu_ctx *ctx, float *out, const gpu_bf16 *in, size_t n);

/* ---- GEMM ----------------------------------------------------------------
 * Row-major C[M,N] = alpha * op(A) . op(B) + beta * C with op(A) [M,K],
 * op(B) [K,N]; trans_a/trans_b nonzero mean A is stored [K,M] / B [N,K].
 * lda/ldb/ldc are row strides in elements. A, B bf16; C is fp32 when
 * c_fp32 is nonzero, else bf16. fp32 accumulation. */
void gpu_gemm(gpu_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha, const gpu_bf16 *A, int lda,
              const gpu_bf16 *B, int ldb, float beta, void *C, int c_fp32, int ldc);

/* ---- embedding: out[N,C] = wte[tokens[n], :], wte bf16 [V, C] ----------- */
void gpu_embedding_forward(gpu_ctx *ctx, gpu_bf16 *out, const int32_t *tokens, const gpu_bf16 *wte, int N, int V,
                           int C);
/* dwte fp32 [V,C] += scatter of dout rows. Deterministic: tokens are stably
 * sorted, each row sums its tokens in position order. Tokens must be valid. */
void gpu_embedding_backward(gpu_ctx *ctx, float *dwte, const gpu_bf16 *dout, const int32_t *tokens, int N, int V,
                            int C);

/* ---- RMSNorm: out = x * rstd * w, rstd[n] = 1/sqrt(mean_c x^2 + eps) ----
 * Statistics in fp32; rstd fp32 [N] (may be NULL in forward). In place
 * allowed (out == x; dx == dout). dw is summed over fixed row chunks, then
 * over chunks in order (deterministic). */
void gpu_rmsnorm_forward(gpu_ctx *ctx, gpu_bf16 *out, float *rstd, const gpu_bf16 *x, const gpu_bf16 *w, int N, int C,
                         float eps);
/* dx bf16 (assign, NULL skips), dw fp32 [C] += (NULL skips). */
void gpu_rmsnorm_backward(gpu_ctx *ctx, gpu_bf16 *dx, float *dw, const gpu_bf16 *dout, const gpu_bf16 *x,
                          const gpu_bf16 *w, const float *rstd, int N, int C);

/* ---- RoPE on bf16 [B, T, H, hd], interleaved pairs (2i, 2i+1) ------------
 * cos_t/sin_t: fp32 device tables [T, hd/2]. gpu_rope_tables computes them
 * on the host in double exactly like the CPU rope_tables and uploads them.
 * In-place (out == in) allowed. hd must be even. */
void gpu_rope_tables(gpu_ctx *ctx, float *cos_t, float *sin_t, int T, int hd, float theta);
void gpu_rope_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *in, const float *cos_t, const float *sin_t, int B,
                      int T, int H, int hd);
void gpu_rope_backward(gpu_ctx *ctx, gpu_bf16 *din, const gpu_bf16 *dout, const float *cos_t, const float *sin_t,
                       int B, int T, int H, int hd);

/* ---- causal multi-head attention -----------------------------------------
 * q, k, v, out: bf16 [B, T, H, hd] (token stride H*hd). att: bf16
 * [B, H, T, T] softmax probabilities saved for backward (upper triangle 0).
 * scratch: fp32 [B, H, T, T] (scores in forward; dP / dS in backward; its
 * contents are not needed between the calls). scale = 1/sqrt(hd).
 * Implementation: cuBLAS strided-batched GEMMs per batch element (QK^T, PV,
 * dO V^T, P^T dO, dS K, dS^T Q) and fused causal softmax / softmax-backward
 * kernels. Memory O(B H T^2): not a flash kernel. */
void gpu_attention_forward(gpu_ctx *ctx, gpu_bf16 *out, gpu_bf16 *att, float *scratch, const gpu_bf16 *q,
                           const gpu_bf16 *k, const gpu_bf16 *v, int B, int T, int H, int hd);
/* dq, dk, dv assigned (each may be NULL). */
void gpu_attention_backward(gpu_ctx *ctx, gpu_bf16 *dq, gpu_bf16 *dk, gpu_bf16 *dv, float *scratch,
                            const gpu_bf16 *dout, const gpu_bf16 *q, const gpu_bf16 *k, const gpu_bf16 *v,
                            const gpu_bf16 *att, int B, int T, int H, int hd);

/* ---- elementwise (bf16, fp32 math, in-place allowed) --------------------- */
void gpu_silu_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *x, size_t n);
void gpu_silu_backward(gpu_ctx *ctx, gpu_bf16 *dx, const gpu_bf16 *dout, const gpu_bf16 *x, size_t n);
void gpu_mul_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *a, const gpu_bf16 *b, size_t n);
void gpu_mul_backward(gpu_ctx *ctx, gpu_bf16 *da, gpu_bf16 *db, const gpu_bf16 *dout, const gpu_bf16 *a,
                      const gpu_bf16 *b, size_t n);
/* out = a + b (backward is the identity: no kernel) */
void gpu_add_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *a, const gpu_bf16 *b, size_t n);

/* ---- full-rank linear: out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T ----------- */
void gpu_linear_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *in, const gpu_bf16 *W, int N, int Cin, int Cout);
/* din bf16 = dout . W (assign, NULL skips); dW fp32 += dout^T . in (NULL skips) */
void gpu_linear_backward(gpu_ctx *ctx, gpu_bf16 *din, float *dW, const gpu_bf16 *dout, const gpu_bf16 *in,
                         const gpu_bf16 *W, int N, int Cin, int Cout);

/* ---- CoLA bottleneck: out = silu(in . A^T) . B^T
 * A bf16 [r, Cin], B bf16 [Cout, r]; saves hpre = in.A^T and h = silu(hpre),
 * both bf16 [N, r]. */
void gpu_cola_forward(gpu_ctx *ctx, gpu_bf16 *out, gpu_bf16 *hpre, gpu_bf16 *h, const gpu_bf16 *in,
                      const gpu_bf16 *A, const gpu_bf16 *B, int N, int Cin, int r, int Cout);
/* din bf16 assigned (NULL skips); dA fp32 [r,Cin], dB fp32 [Cout,r] accumulate
 * (NULL skips). scratch: bf16 [N, r]. */
void gpu_cola_backward(gpu_ctx *ctx, gpu_bf16 *din, float *dA, float *dB, gpu_bf16 *scratch, const gpu_bf16 *dout,
                       const gpu_bf16 *in, const gpu_bf16 *hpre, const gpu_bf16 *h, const gpu_bf16 *A,
                       const gpu_bf16 *B, int N, int Cin, int r, int Cout);

/* ---- fused softmax cross-entropy over bf16 logits [N, V] ------------------
 * losses fp32 [N] = logsumexp(logits[n]) - logits[n][target[n]] (stable,
 * fp32). Targets must be in [0, V). */
void gpu_crossentropy_forward(gpu_ctx *ctx, float *losses, const gpu_bf16 *logits, const int32_t *targets, int N,
                              int V);
/* dlogits bf16 = (softmax(logits) - onehot(target)) * dloss (assign); may
 * alias logits (in place). Also writes losses (may be NULL). */
void gpu_crossentropy_backward(gpu_ctx *ctx, gpu_bf16 *dlogits, float *losses, const gpu_bf16 *logits,
                               const int32_t *targets, int N, int V, float dloss);

/* ---- AdamW on fp32 master weights ----------------------------------------
 * Same update and hyperparameters as the CPU adamw_update (fields match
 * adamw_hparams): param, grad, m, v fp32; param_bf16 (may be NULL) receives
 * the rounded updated weights that the forward pass reads. t starts at 1. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
} gpu_adamw_hparams;
void gpu_adamw_update(gpu_ctx *ctx, float *param, gpu_bf16 *param_bf16, const float *grad, float *m, float *v,
                      size_t n, gpu_adamw_hparams hp, int t, float grad_scale);

/* ---- gradient norm ---------------------------------------------------------
 * *acc (a device double) += sum of x^2, accumulated in double with a fixed
 * reduction tree (deterministic for a given n). Summing many tensors into
 * one acc then one download gives the global squared norm. */
void gpu_sum_squares(gpu_ctx *ctx, double *acc, const float *x, size_t n);
/* Convenience: synchronous, returns the sum (uses ctx scratch). */
double gpu_sum_squares_host(gpu_ctx *ctx, const float *x, size_t n);
void gpu_scale_inplace(gpu_ctx *ctx, float *x, size_t n, float s);

#ifdef __cplusplus
}
#endif

#endif
