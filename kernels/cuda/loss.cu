/* Cross-entropy over logits [N, V] (crossentropy.c), the vocab-parallel
 * pieces (tp_pieces.c) and the loss sum. One block per row: a max pass, a
 * sum pass of exp(x - max), each a per-thread strided loop in index order
 * and a fixed warp/block tree; then the loss and, fused, the gradient in
 * place (hd_ce_loss, hd_ce_grad). The kernels are hd_loss.h's phases; in
 * place (dlogits == logits) is safe as it explains. No atomics. */
#include "cuda_internal.cuh"
#include "hd_loss.h"

static hd_ce_args ce_args(const void *logits, const int32_t *targets, int N, int V) {
  hd_ce_args a;
  memset(&a, 0, sizeof a);
  a.logits = logits, a.targets = targets, a.N = N, a.V = V;
  return a;
}

/* losses[n] (may be NULL); with d, d[n] = (softmax - onehot) * dloss */
template <int BF16>
__global__ void __launch_bounds__(HD_CE_THREADS) ce_kernel(hd_ce_args a) {
  __shared__ hd_ce_shared sh;
  hd_regs r;
  RUN_PHASES(HD_CE_PHASES, hd_ce_sync, r, hd_ce_phase(&a, BF16, HD_IX_HERE(), ph, &r, &sh));
}

void cu_crossentropy_forward(boost_backend *be, float *losses, cact *logits, const int32_t *targets, int N, int V) {
  if (N <= 0 || V <= 0) return;
  hd_ce_args a = ce_args(logits, targets, N, V);
  a.losses = losses;
  ACT_LAUNCH(be, ce_kernel, (unsigned)N, HD_CE_THREADS, 0, a);
}

void cu_crossentropy_backward(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                              const int32_t *targets, int N, int V, float dloss) {
  if (N <= 0 || V <= 0) return;
  hd_ce_args a = ce_args(logits, targets, N, V);
  a.d = dlogits, a.losses = losses, a.dloss = dloss;
  ACT_LAUNCH(be, ce_kernel, (unsigned)N, HD_CE_THREADS, 0, a);
}

/* ---- vocab-parallel pieces ---------------------------------------------------- */

template <int BF16>
__global__ void __launch_bounds__(HD_CE_THREADS) vocab_max_kernel(hd_ce_args a) {
  __shared__ hd_ce_shared sh;
  hd_regs r;
  RUN_PHASES(HD_VOCAB_MAX_PHASES, hd_vocab_max_sync, r, hd_vocab_max_phase(&a, BF16, HD_IX_HERE(), ph, &r, &sh));
}

template <int BF16>
__global__ void __launch_bounds__(HD_CE_THREADS) vocab_sums_kernel(hd_ce_args a) {
  __shared__ hd_ce_shared sh;
  hd_regs r;
  RUN_PHASES(HD_VOCAB_SUMS_PHASES, hd_vocab_sums_sync, r, hd_vocab_sums_phase(&a, BF16, HD_IX_HERE(), ph, &r, &sh));
}

__global__ void vocab_losses_kernel(hd_ce_args a) { hd_vocab_losses_thread(&a, HD_IX_HERE()); }

template <int BF16>
__global__ void __launch_bounds__(HD_CE_THREADS) vocab_bwd_kernel(hd_ce_args a) {
  hd_vocab_bwd_block(&a, BF16, HD_IX_HERE());
}

void cu_vocab_ce_max(boost_backend *be, float *mx, cact *logits, int N, int V) {
  if (N <= 0) return;
  hd_ce_args a = ce_args(logits, NULL, N, V);
  a.mx = mx;
  ACT_LAUNCH(be, vocab_max_kernel, (unsigned)N, HD_CE_THREADS, 0, a);
}

void cu_vocab_ce_sums(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *targets, int v0,
                      int N, int V) {
  if (N <= 0) return;
  hd_ce_args a = ce_args(logits, targets, N, V);
  a.sums = sums, a.mx_in = mx, a.v0 = v0;
  ACT_LAUNCH(be, vocab_sums_kernel, (unsigned)N, HD_CE_THREADS, 0, a);
}

void cu_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N) {
  if (N <= 0) return;
  hd_ce_args a = ce_args(NULL, NULL, N, 0);
  a.losses = losses, a.sums_in = sums, a.mx_in = mx;
  vocab_losses_kernel<<<cdiv_u((size_t)N, 256), 256, 0, CB(be)->stream>>>(a);
  LAUNCH_CHECK();
}

void cu_vocab_ce_backward(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                          const int32_t *targets, int v0, int N, int V, float scale) {
  if (N <= 0) return;
  hd_ce_args a = ce_args(NULL, targets, N, V);
  a.d = logits, a.sums_in = sums, a.mx_in = mx, a.v0 = v0, a.dloss = scale;
  ACT_LAUNCH(be, vocab_bwd_kernel, (unsigned)N, HD_CE_THREADS, 0, a);
}

/* ---- the loss sum: one warp, lane l sums l, l + 32, ... in double ------------- */

__global__ void loss_acc_kernel(const float *losses, int N, double *acc) {
  hd_regs r;
  RUN_PHASES(HD_LOSS_PHASES, hd_loss_sync, r, hd_loss_acc_phase(losses, N, acc, HD_IX_HERE(), ph, &r));
}

void cu_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc) {
  if (N <= 0) return;
  loss_acc_kernel<<<1, 32, 0, CB(be)->stream>>>(losses, N, acc);
  LAUNCH_CHECK();
}
