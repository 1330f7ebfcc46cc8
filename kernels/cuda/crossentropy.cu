/* Fused softmax cross-entropy over bf16 logits [N, V], one block per row,
 * fp32 math:
 *   (m, s) = online max / sum of exp(x - m) over the row (per thread, then a
 *            fixed warp and block tree: deterministic)
 *   losses[n] = (m - x[target]) + log(s)
 *   dlogits   = exp(x - m) * (dloss / s) - dloss * onehot(target)  (bf16)
 * In place (dlogits == logits) is allowed: x[target] is read before the
 * block barrier that precedes any write, and every other element is read
 * and then written by the same thread. */
#include "cuda_internal.cuh"

#define CE_THREADS 512

template <bool VEC, bool BWD>
__global__ void __launch_bounds__(CE_THREADS) ce_kernel(gpu_bf16 *dlogits, float *losses, const gpu_bf16 *logits,
                                                        const int32_t *targets, int V, float dloss) {
  __shared__ float s_m[CE_THREADS / 32], s_s[CE_THREADS / 32];
  __shared__ float s_xt;
  const int n = blockIdx.x;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const gpu_bf16 *x = logits + (size_t)n * V;
  const int tgt = targets[n];
  if (tid == 0) s_xt = bf2f(x[tgt]);
  float m = -INFINITY, s = 0.0f;
  if (VEC) {
    for (int v = tid * 8; v < V; v += CE_THREADS * 8) {
      float f[8];
      load8_rw(f, x + v);
      float m8 = f[0];
#pragma unroll
      for (int k = 1; k < 8; k++) m8 = fmaxf(m8, f[k]);
      float s8 = 0.0f;
#pragma unroll
      for (int k = 0; k < 8; k++) s8 += expf(f[k] - m8);
      lse_merge(m, s, m8, s8);
    }
  } else {
    for (int v = tid; v < V; v += CE_THREADS) lse_merge(m, s, bf2f(x[v]), 1.0f);
  }
  warp_lse(m, s);
  if (lane == 0) {
    s_m[warp] = m;
    s_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < CE_THREADS / 32 ? s_m[lane] : -INFINITY;
    s = lane < CE_THREADS / 32 ? s_s[lane] : 0.0f;
    warp_lse(m, s);
    if (lane == 0) {
      s_m[0] = m;
      s_s[0] = s;
    }
  }
  __syncthreads();
  m = s_m[0];
  s = s_s[0];
  if (losses && tid == 0) losses[n] = (m - s_xt) + logf(s);
  if (!BWD) return;
  const float k = dloss / s;
  gpu_bf16 *d = dlogits + (size_t)n * V;
  if (VEC) {
    for (int v = tid * 8; v < V; v += CE_THREADS * 8) {
      float f[8];
      load8_rw(f, x + v);
#pragma unroll
      for (int j = 0; j < 8; j++) f[j] = expf(f[j] - m) * k - (v + j == tgt ? dloss : 0.0f);
      store8(d + v, f);
    }
  } else {
    for (int v = tid; v < V; v += CE_THREADS) d[v] = f2bf(expf(bf2f(x[v]) - m) * k - (v == tgt ? dloss : 0.0f));
  }
}

void gpu_crossentropy_forward(gpu_ctx *ctx, float *losses, const gpu_bf16 *logits, const int32_t *targets, int N,
                              int V) {
  if (N <= 0 || V <= 0) return;
  if (V % 8 == 0 && aligned16(logits))
    ce_kernel<true, false><<<N, CE_THREADS, 0, ctx->stream>>>(NULL, losses, logits, targets, V, 0.0f);
  else
    ce_kernel<false, false><<<N, CE_THREADS, 0, ctx->stream>>>(NULL, losses, logits, targets, V, 0.0f);
  LAUNCH_CHECK();
}

void gpu_crossentropy_backward(gpu_ctx *ctx, gpu_bf16 *dlogits, float *losses, const gpu_bf16 *logits,
                               const int32_t *targets, int N, int V, float dloss) {
  if (N <= 0 || V <= 0) return;
  if (V % 8 == 0 && aligned16(logits) && aligned16(dlogits))
    ce_kernel<true, true><<<N, CE_THREADS, 0, ctx->stream>>>(dlogits, losses, logits, targets, V, dloss);
  else
    ce_kernel<false, true><<<N, CE_THREADS, 0, ctx->stream>>>(dlogits, losses, logits, targets, V, dloss);
  LAUNCH_CHECK();
}
