/* Causal multi-head attention: cuBLAS strided-batched GEMMs + fused causal
 * softmax kernels. Not a flash kernel: memory and traffic are O(B H T^2).
 *
 * q, k, v, out, dq, dk, dv: bf16 [B, T, H, hd]; the (b, h) slice starts at
 * b*T*H*hd + h*hd with row stride ld = H*hd, so for one b the H heads are a
 * strided batch (stride hd). att: bf16 [B, H, T, T]; scratch: fp32 [B, H, T, T].
 *   forward : S = scale Q K^T (fp32, scratch);  P = causal softmax(S) (bf16,
 *             att, exact zeros above the diagonal);  O = P V
 *   backward: dV = P^T dO;  dP = dO V^T (fp32, scratch);
 *             dS = P * (dP - rowsum(dP * P)) written as bf16 IN PLACE over dP
 *             (row r of dS occupies the first half of the bytes of row r of
 *             dP: leading dimension 2T bf16 elements);
 *             dQ = scale dS K;  dK = scale dS^T Q
 * The GEMMs run over the full T x T (the zero upper triangle costs flops,
 * not correctness). */
#include "cuda_internal.cuh"

#define WARPS 8

/* one warp per row (b, h, i) of the [B*H*T, T] score matrix */
__global__ void causal_softmax_fwd_kernel(gpu_bf16 *att, const float *scores, int T, size_t rows) {
  size_t row = (size_t)blockIdx.x * WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int i = (int)(row % T);
  const float *s = scores + row * T;
  gpu_bf16 *p = att + row * T;
  float m = -INFINITY, sum = 0.0f;
  for (int j = lane; j <= i; j += 32) {
    float x = s[j];
    if (x > m) {
      sum = sum * expf(m - x) + 1.0f;
      m = x;
    } else {
      sum += expf(x - m);
    }
  }
  warp_lse(m, sum);
  float inv = 1.0f / sum;
  for (int j = lane; j < T; j += 32) p[j] = f2bf(j <= i ? expf(s[j] - m) * inv : 0.0f);
}

/* dS = P * (dP - rowsum(dP * P)), bf16, in place over the fp32 dP row. */
__global__ void causal_softmax_bwd_kernel(float *scratch, const gpu_bf16 *att, int T, size_t rows) {
  size_t row = (size_t)blockIdx.x * WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int i = (int)(row % T);
  const float *dp = scratch + row * T;
  const gpu_bf16 *p = att + row * T;
  float rs = 0.0f;
  for (int j = lane; j <= i; j += 32) rs += dp[j] * bf2f(p[j]);
  rs = warp_sum(rs);
  gpu_bf16 *ds = reinterpret_cast<gpu_bf16 *>(scratch + row * T);
  /* Warp-synchronous sweep: iteration `base` reads fp32 elements
   * [base, base+32) and then writes bf16 elements [base, base+32), i.e. the
   * bytes of fp32 elements [base/2, base/2+16), all read already. */
  for (int base = 0; base < T; base += 32) {
    int j = base + lane;
    float v = 0.0f;
    if (j <= i) v = bf2f(p[j]) * (dp[j] - rs);
    __syncwarp();
    if (j < T) ds[j] = f2bf(v);
    __syncwarp();
  }
}

void gpu_attention_forward(gpu_ctx *ctx, gpu_bf16 *out, gpu_bf16 *att, float *scratch, const gpu_bf16 *q,
                           const gpu_bf16 *k, const gpu_bf16 *v, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  const int ld = H * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const size_t tok = (size_t)T * ld;      /* one batch element of q/k/v/out */
  const long long tt = (long long)T * T;  /* one (b, h) score matrix */
  for (int b = 0; b < B; b++) {
    /* S[h] = scale Q[h] K[h]^T : [T, T] fp32 */
    gpu_gemm_strided(ctx, 0, 1, T, T, hd, scale, q + b * tok, ld, hd, k + b * tok, ld, hd, 0.0f,
                     scratch + (size_t)b * H * tt, 1, T, tt, H);
  }
  size_t rows = (size_t)B * H * T;
  causal_softmax_fwd_kernel<<<cdiv_u(rows, WARPS), WARPS * 32, 0, ctx->stream>>>(att, scratch, T, rows);
  LAUNCH_CHECK();
  for (int b = 0; b < B; b++) {
    /* O[h] = P[h] V[h] : [T, hd] */
    gpu_gemm_strided(ctx, 0, 0, T, hd, T, 1.0f, att + (size_t)b * H * tt, T, tt, v + b * tok, ld, hd, 0.0f,
                     out + b * tok, 0, ld, hd, H);
  }
}

void gpu_attention_backward(gpu_ctx *ctx, gpu_bf16 *dq, gpu_bf16 *dk, gpu_bf16 *dv, float *scratch,
                            const gpu_bf16 *dout, const gpu_bf16 *q, const gpu_bf16 *k, const gpu_bf16 *v,
                            const gpu_bf16 *att, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  const int ld = H * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const size_t tok = (size_t)T * ld;
  const long long tt = (long long)T * T;
  if (dv) {
    for (int b = 0; b < B; b++) {
      /* dV[h] = P[h]^T dO[h] : [T, hd] (P stored [i, j], contracted over i) */
      gpu_gemm_strided(ctx, 1, 0, T, hd, T, 1.0f, att + (size_t)b * H * tt, T, tt, dout + b * tok, ld, hd, 0.0f,
                       dv + b * tok, 0, ld, hd, H);
    }
  }
  if (!dq && !dk) return;
  for (int b = 0; b < B; b++) {
    /* dP[h] = dO[h] V[h]^T : [T, T] fp32 */
    gpu_gemm_strided(ctx, 0, 1, T, T, hd, 1.0f, dout + b * tok, ld, hd, v + b * tok, ld, hd, 0.0f,
                     scratch + (size_t)b * H * tt, 1, T, tt, H);
  }
  size_t rows = (size_t)B * H * T;
  causal_softmax_bwd_kernel<<<cdiv_u(rows, WARPS), WARPS * 32, 0, ctx->stream>>>(scratch, att, T, rows);
  LAUNCH_CHECK();
  /* dS as bf16: row stride 2T elements, (b, h) stride 2 T^2 elements */
  const gpu_bf16 *ds = reinterpret_cast<const gpu_bf16 *>(scratch);
  for (int b = 0; b < B; b++) {
    const gpu_bf16 *dsb = ds + (size_t)b * H * 2 * tt;
    if (dq) /* dQ[h] = scale dS[h] K[h] */
      gpu_gemm_strided(ctx, 0, 0, T, hd, T, scale, dsb, 2 * T, 2 * tt, k + b * tok, ld, hd, 0.0f, dq + b * tok, 0, ld,
                       hd, H);
    if (dk) /* dK[h] = scale dS[h]^T Q[h] */
      gpu_gemm_strided(ctx, 1, 0, T, hd, T, scale, dsb, 2 * T, 2 * tt, q + b * tok, ld, hd, 0.0f, dk + b * tok, 0, ld,
                       hd, H);
  }
}
