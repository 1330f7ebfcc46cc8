/* Cross-entropy over logits [N, V] (crossentropy.c), the vocab-parallel
 * pieces (tp_pieces.c) and the loss sum. One block per row: a max pass, a
 * sum pass of exp(x - max), each a per-thread strided loop in index order
 * and a fixed warp/block tree; then the loss and, fused, the gradient in
 * place (hd_ce_loss, hd_ce_grad). In place (dlogits == logits): the target
 * logit is read before the barrier that precedes any write, and every other
 * element is read and then written by the same thread. No atomics. */
#include "cuda_internal.cuh"

#define CE_THREADS 512
#define CE_WARPS (CE_THREADS / 32)

__device__ __forceinline__ float block_max(float v, float *sh) {
  return block_reduce<CE_THREADS>(v, sh, -INFINITY, MaxOp());
}

template <int BF16>
__device__ float row_max(const void *x, size_t o, int V, float *sh) {
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += CE_THREADS) {
    const float xv = hd_ld(x, o + v, BF16);
    m = xv > m ? xv : m;
  }
  return block_max(m, sh);
}

/* sum over the row of exp(x - m), in double */
template <int BF16>
__device__ double row_sumexp(const void *x, size_t o, int V, float m, double *sh) {
  double s = 0.0;
  for (int v = threadIdx.x; v < V; v += CE_THREADS) s += (double)expf(hd_ld(x, o + v, BF16) - m);
  return block_sum_d<CE_THREADS>(s, sh);
}

/* losses[n] (may be NULL); with d, d[n] = (softmax - onehot) * dloss */
template <int BF16>
__global__ void __launch_bounds__(CE_THREADS)
    ce_kernel(void *d, float *losses, const void *logits, const int32_t *targets, int V, float dloss) {
  __shared__ float shf[CE_WARPS];
  __shared__ double shd[CE_WARPS];
  __shared__ float xt;
  const int n = blockIdx.x, tgt = targets[n];
  const size_t o = (size_t)n * V;
  if (threadIdx.x == 0) xt = hd_ld(logits, o + tgt, BF16);
  const float m = row_max<BF16>(logits, o, V, shf); /* its barriers publish xt */
  const float s = (float)row_sumexp<BF16>(logits, o, V, m, shd);
  if (losses && threadIdx.x == 0) losses[n] = hd_ce_loss(m, xt, s);
  if (!d) return;
  const float k = dloss / s;
  for (int v = threadIdx.x; v < V; v += CE_THREADS)
    hd_st(d, o + v, hd_ce_grad(hd_ld(logits, o + v, BF16), m, k, v == tgt, dloss), BF16);
}

void cu_crossentropy_forward(boost_backend *be, float *losses, cact *logits, const int32_t *targets, int N, int V) {
  if (N <= 0 || V <= 0) return;
  ACT_LAUNCH(be, ce_kernel, (unsigned)N, CE_THREADS, 0, (void *)NULL, losses, logits, targets, V, 0.0f);
}

void cu_crossentropy_backward(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                              const int32_t *targets, int N, int V, float dloss) {
  if (N <= 0 || V <= 0) return;
  ACT_LAUNCH(be, ce_kernel, (unsigned)N, CE_THREADS, 0, (void *)dlogits, losses, logits, targets, V, dloss);
}

/* ---- vocab-parallel pieces ---------------------------------------------------- */

template <int BF16>
__global__ void __launch_bounds__(CE_THREADS) vocab_max_kernel(float *mx, const void *logits, int V) {
  __shared__ float shf[CE_WARPS];
  const float m = row_max<BF16>(logits, (size_t)blockIdx.x * V, V, shf);
  if (threadIdx.x == 0) mx[blockIdx.x] = m;
}

template <int BF16>
__global__ void __launch_bounds__(CE_THREADS)
    vocab_sums_kernel(float *sums, const void *logits, const float *mx, const int32_t *targets, int v0, int N, int V) {
  __shared__ double shd[CE_WARPS];
  const int n = blockIdx.x;
  const size_t o = (size_t)n * V;
  const double s = row_sumexp<BF16>(logits, o, V, mx[n], shd);
  if (threadIdx.x == 0) {
    const int t = targets[n] - v0;
    sums[n] = (float)s;
    sums[N + n] = (t >= 0 && t < V) ? hd_ld(logits, o + t, BF16) : 0.0f;
  }
}

__global__ void vocab_losses_kernel(float *losses, const float *sums, const float *mx, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) losses[n] = hd_vocab_loss(sums[n], mx[n], sums[N + n]);
}

template <int BF16>
__global__ void __launch_bounds__(CE_THREADS) vocab_bwd_kernel(void *logits, const float *sums, const float *mx,
                                                               const int32_t *targets, int v0, int V, float scale) {
  const int n = blockIdx.x, t = targets[n] - v0;
  const size_t o = (size_t)n * V;
  const float inv = 1.0f / sums[n], m = mx[n];
  for (int v = threadIdx.x; v < V; v += CE_THREADS)
    hd_st(logits, o + v, hd_vocab_grad(hd_ld(logits, o + v, BF16), m, inv, scale, v == t), BF16);
}

void cu_vocab_ce_max(boost_backend *be, float *mx, cact *logits, int N, int V) {
  if (N <= 0) return;
  ACT_LAUNCH(be, vocab_max_kernel, (unsigned)N, CE_THREADS, 0, mx, logits, V);
}

void cu_vocab_ce_sums(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *targets, int v0,
                      int N, int V) {
  if (N <= 0) return;
  ACT_LAUNCH(be, vocab_sums_kernel, (unsigned)N, CE_THREADS, 0, sums, logits, mx, targets, v0, N, V);
}

void cu_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N) {
  if (N <= 0) return;
  vocab_losses_kernel<<<cdiv_u((size_t)N, 256), 256, 0, CB(be)->stream>>>(losses, sums, mx, N);
  LAUNCH_CHECK();
}

void cu_vocab_ce_backward(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                          const int32_t *targets, int v0, int N, int V, float scale) {
  if (N <= 0) return;
  ACT_LAUNCH(be, vocab_bwd_kernel, (unsigned)N, CE_THREADS, 0, logits, sums, mx, targets, v0, V, scale);
}

/* ---- the loss sum: one warp, lane l sums l, l + 32, ... in double ------------- */

__global__ void loss_acc_kernel(const float *losses, int N, double *acc) {
  double s = 0.0;
  for (int i = threadIdx.x; i < N; i += 32) s += (double)losses[i];
  s = warp_sum_d(s);
  if (threadIdx.x == 0) *acc = hd_loss_add(*acc, s, N);
}

void cu_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc) {
  if (N <= 0) return;
  loss_acc_kernel<<<1, 32, 0, CB(be)->stream>>>(losses, N, acc);
  LAUNCH_CHECK();
}
