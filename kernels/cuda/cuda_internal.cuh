/* Private helpers of the CUDA backend (not part of the cuda_ops.h contract). */
#ifndef BOOST_KERNELS_CUDA_INTERNAL_CUH
#define BOOST_KERNELS_CUDA_INTERNAL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_ops.h"

/* Check the launch that just happened (configuration errors). */
#define LAUNCH_CHECK() cudaCheck(cudaGetLastError())

/* Op-internal device temporaries (ctx->scratch), at least `bytes`, 256-byte
 * aligned. Growing frees the old buffer (cudaFree synchronises the device,
 * so work still reading it has finished). One call per op: a second call may
 * invalidate the first pointer. */
void *gpu_scratch(gpu_ctx *ctx, size_t bytes);

/* Row-major strided-batched GEMM, bf16 inputs; C fp32 (c_fp32) or bf16.
 * Strides are in elements of each matrix's own type. */
void gpu_gemm_strided(gpu_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha, const gpu_bf16 *A,
                      int lda, long long stride_a, const gpu_bf16 *B, int ldb, long long stride_b, float beta, void *C,
                      int c_fp32, int ldc, long long stride_c, int batch);

static inline unsigned int cdiv_u(size_t a, size_t b) { return (unsigned int)((a + b - 1) / b); }

/* Grid for grid-stride loops: enough blocks to cover `work` items, capped
 * at a few waves (the cap never changes results: elementwise work only). */
static inline unsigned int ew_grid(const gpu_ctx *ctx, size_t work, int block) {
  size_t g = (work + (size_t)block - 1) / (size_t)block;
  size_t cap = (size_t)(ctx->sm_count > 0 ? ctx->sm_count : 1) * 32;
  if (g > cap) g = cap;
  if (g < 1) g = 1;
  return (unsigned int)g;
}

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

__device__ __forceinline__ float bf2f(gpu_bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ gpu_bf16 f2bf(float x) { return __float2bfloat16_rn(x); }

/* 8 bf16 = 16 bytes: one vector load/store. p must be 16-byte aligned. */
__device__ __forceinline__ void load8(float f[8], const gpu_bf16 *p) {
  uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
/* Plain (non-__ldg) load for data that the same kernel may write (in place). */
__device__ __forceinline__ void load8_rw(float f[8], const gpu_bf16 *p) {
  uint4 u = *reinterpret_cast<const uint4 *>(p);
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ void store8(gpu_bf16 *p, const float f[8]) {
  uint4 u;
  __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4 *>(p) = u;
}

__device__ __forceinline__ float sigmoidf_dev(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Online-softmax pair (running max m, sum s of exp(x - m)) merge; safe when
 * either side is empty (m = -inf, s = 0). */
__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
  float M = fmaxf(m, m2);
  if (M == -INFINITY) return; /* both empty */
  s = (m == -INFINITY ? 0.0f : s * expf(m - M)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - M));
  m = M;
}
__device__ __forceinline__ void warp_lse(float &m, float &s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    lse_merge(m, s, m2, s2);
  }
}

#endif
