/* The decode step's attention over a KV cache (hd_decode.h has the
 * arithmetic): one block of DEC_NT threads per (sequence, head); the
 * scores and exponentials of the slice live in op scratch ([B*H, pos+1]
 * floats), the rotated q in shared memory. */
#include "cuda_internal.cuh"
#include "hd_decode.h"

#define DEC_NT 128

/* The block's combination of every thread's v (warp butterflies, then warp
 * 0 over the warps' results), returned to every thread. */
template <class Op>
__device__ float dec_block_reduce(float v, float *red, float identity, Op op) {
  v = warp_reduce(v, op);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < DEC_NT / 32 ? red[threadIdx.x] : identity;
  if (threadIdx.x < 32) v = warp_reduce(v, op);
  if (threadIdx.x == 0) red[0] = v;
  __syncthreads();
  v = red[0];
  __syncthreads(); /* red is reused by the next reduction */
  return v;
}

template <int BF16>
__global__ void __launch_bounds__(DEC_NT)
    decode_kernel(void *out, void *kc, void *vc, const void *q, const void *k, const void *v, const float *cos_t,
                  const float *sin_t, float *scores, int H, int pos, int max_T, int hd, float scale) {
  extern __shared__ float qs[]; /* hd floats */
  __shared__ float red[DEC_NT / 32];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, len = pos + 1, tid = threadIdx.x;
  const size_t ld = (size_t)H * hd, row = (size_t)b * ld + (size_t)h * hd;
  const size_t base = (size_t)b * max_T * ld + (size_t)h * hd;
  const float *c = cos_t + (size_t)pos * (hd / 2), *s = sin_t + (size_t)pos * (hd / 2);
  float *e = scores + (size_t)bh * len;
  for (int i = tid; i < hd / 2; i += DEC_NT)
    hd_decode_append(qs, kc, vc, q, k, v, c, s, row, base + (size_t)pos * ld, i, BF16);
  __syncthreads(); /* qs and the cache row pos, block-wide */
  float mx = -INFINITY;
  for (int j = tid; j < len; j += DEC_NT) {
    e[j] = hd_decode_score(qs, kc, base + (size_t)j * ld, hd, scale, BF16);
    mx = fmaxf(mx, e[j]);
  }
  const float m = (BF16 ? scale : 1.0f) * dec_block_reduce(mx, red, -INFINITY, MaxOp());
  float sum = 0.0f;
  for (int j = tid; j < len; j += DEC_NT) {
    e[j] = hd_decode_exp(e[j], m, scale, BF16);
    sum += e[j];
  }
  const float inv = 1.0f / dec_block_reduce(sum, red, 0.0f, SumOp());
  for (int i = tid; i < hd; i += DEC_NT) hd_st(out, row + i, hd_decode_out(e, inv, vc, base, ld, len, i, BF16), BF16);
}

void cu_attention_decode(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q, cact *k,
                         cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H, int hd) {
  BOOST_ASSERT(pos >= 0 && pos < max_T && hd % 2 == 0);
  if (B * H == 0) return;
  float *scores = (float *)cuda_scratch(CB(be), (size_t)B * H * (pos + 1) * sizeof(float));
  const float scale = 1.0f / sqrtf((float)hd);
  ACT_LAUNCH(be, decode_kernel, (unsigned)(B * H), DEC_NT, (size_t)hd * sizeof(float), out, k_cache, v_cache, q, k,
             v, cos_t, sin_t, scores, H, pos, max_T, hd, scale);
}
