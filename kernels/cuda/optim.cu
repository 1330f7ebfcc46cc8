/* AdamW on fp32 master weights (writing the bf16 working copy), the
 * gradient-norm sum of squares and in-place scaling.
 *   g = grad * grad_scale
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   mhat = m / (1 - b1^t); vhat = v / (1 - b2^t)
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p);  p_bf16 = round(p)
 * Bias corrections are computed on the host exactly as the CPU does.
 * sum_squares: double accumulation; a grid whose size depends only on n,
 * each block reduces a fixed strided set through a fixed tree, then one
 * block sums the block partials in order: deterministic for a given n. */
#include <math.h>

#include "cuda_internal.cuh"

__global__ void adamw_kernel(float *param, gpu_bf16 *param_bf16, const float *grad, float *m, float *v, size_t n,
                             float lr, float b1, float b2, float eps, float wd, float inv_bc1, float inv_bc2,
                             float grad_scale) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float g = grad[i] * grad_scale;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi * inv_bc1;
    float vhat = vi * inv_bc2;
    float p = param[i];
    p = p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
    param[i] = p;
    if (param_bf16) param_bf16[i] = f2bf(p);
  }
}

void gpu_adamw_update(gpu_ctx *ctx, float *param, gpu_bf16 *param_bf16, const float *grad, float *m, float *v,
                      size_t n, gpu_adamw_hparams hp, int t, float grad_scale) {
  if (!n) return;
  const float bc1 = (float)(1.0 - pow((double)hp.beta1, (double)t));
  const float bc2 = (float)(1.0 - pow((double)hp.beta2, (double)t));
  adamw_kernel<<<ew_grid(ctx, n, 256), 256, 0, ctx->stream>>>(param, param_bf16, grad, m, v, n, hp.lr, hp.beta1,
                                                              hp.beta2, hp.eps, hp.weight_decay, 1.0f / bc1,
                                                              1.0f / bc2, grad_scale);
  LAUNCH_CHECK();
}

#define SS_THREADS 256
#define SS_MAX_BLOCKS 1024

/* fixed-order block reduction of one double per thread; result in thread 0 */
__device__ double block_sum_d(double v) {
  __shared__ double part[SS_THREADS / 32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum_d(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < SS_THREADS / 32; w++) total += part[w];
  return total;
}

__global__ void __launch_bounds__(SS_THREADS) sumsq_partial_kernel(double *partial, const float *x, size_t n) {
  size_t stride = (size_t)gridDim.x * SS_THREADS;
  double acc = 0.0;
  for (size_t i = (size_t)blockIdx.x * SS_THREADS + threadIdx.x; i < n; i += stride) {
    double xi = (double)x[i];
    acc += xi * xi;
  }
  double total = block_sum_d(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void __launch_bounds__(SS_THREADS) sumsq_final_kernel(double *acc, const double *partial, int nb) {
  double v = 0.0;
  for (int b = threadIdx.x; b < nb; b += SS_THREADS) v += partial[b];
  double total = block_sum_d(v);
  if (threadIdx.x == 0) *acc += total;
}

static int sumsq_blocks(size_t n) {
  size_t nb = (n + (size_t)SS_THREADS * 16 - 1) / ((size_t)SS_THREADS * 16);
  if (nb > SS_MAX_BLOCKS) nb = SS_MAX_BLOCKS;
  if (nb < 1) nb = 1;
  return (int)nb;
}

static void sumsq_impl(gpu_ctx *ctx, double *acc, const float *x, size_t n, double *partial) {
  int nb = sumsq_blocks(n);
  sumsq_partial_kernel<<<nb, SS_THREADS, 0, ctx->stream>>>(partial, x, n);
  LAUNCH_CHECK();
  sumsq_final_kernel<<<1, SS_THREADS, 0, ctx->stream>>>(acc, partial, nb);
  LAUNCH_CHECK();
}

void gpu_sum_squares(gpu_ctx *ctx, double *acc, const float *x, size_t n) {
  if (!n) return;
  double *partial = (double *)gpu_scratch(ctx, SS_MAX_BLOCKS * sizeof(double));
  sumsq_impl(ctx, acc, x, n, partial);
}

double gpu_sum_squares_host(gpu_ctx *ctx, const float *x, size_t n) {
  if (!n) return 0.0;
  double *buf = (double *)gpu_scratch(ctx, (SS_MAX_BLOCKS + 1) * sizeof(double));
  gpu_zero(ctx, buf, sizeof(double));
  sumsq_impl(ctx, buf, x, n, buf + 1);
  double r = 0.0;
  gpu_download(ctx, &r, buf, sizeof r);
  return r;
}

__global__ void scale_kernel(float *x, size_t n, float s) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] *= s;
}

void gpu_scale_inplace(gpu_ctx *ctx, float *x, size_t n, float s) {
  if (!n) return;
  scale_kernel<<<ew_grid(ctx, n, 256), 256, 0, ctx->stream>>>(x, n, s);
  LAUNCH_CHECK();
}
