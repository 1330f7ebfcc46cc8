/* The CUDA backend's loss kernels (loss.cu) run on the CPU: hd_loss.h's
 * phases over whole grids (grid_run.h: barriers between phases, the warp
 * shuffles emulated), against the CPU kernels: the fused cross-entropy
 * (losses, and the gradient in place), the vocab-parallel pieces, the loss
 * sum. test_cuda_math.c says how the kernels are run. */
#include "cuda_testkit.h"

#include "../../kernels/cuda/hd_loss.h"
#include "backend.h"

TestSuite(cuda_loss, .init = two_threads);

typedef struct {
  hd_ce_args a;
  int bf16;
  const float *losses_in; /* loss sum */
  double *acc;
} loss_ctx;

static void ce_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  hd_ce_phase(&((loss_ctx *)c)->a, ((loss_ctx *)c)->bf16, ix, ph, r, sh);
}
static void vmax_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  hd_vocab_max_phase(&((loss_ctx *)c)->a, ((loss_ctx *)c)->bf16, ix, ph, r, sh);
}
static void vsums_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  hd_vocab_sums_phase(&((loss_ctx *)c)->a, ((loss_ctx *)c)->bf16, ix, ph, r, sh);
}
static void vlosses_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_vocab_losses_thread(&((loss_ctx *)c)->a, ix);
}
static void vbwd_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_vocab_bwd_block(&((loss_ctx *)c)->a, ((loss_ctx *)c)->bf16, ix);
}
static void loss_acc_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)sh;
  const loss_ctx *k = c;
  hd_loss_acc_phase(k->losses_in, k->a.N, k->acc, ix, ph, r);
}

/* A row kernel of loss.cu: one block of HD_CE_THREADS per row. */
static void run_row_blocks(void (*phase)(void *, hd_ix, int, hd_regs *, void *), int nph, int (*sync)(int),
                           loss_ctx *c) {
  const grid_kernel k = {(unsigned)c->a.N, 1, HD_CE_THREADS, nph, sync, sizeof(hd_ce_shared), NULL, phase};
  grid_run(&k, c);
}

/* ---- cross-entropy ---------------------------------------------------------------------- */

static void run_ce(void *d, float *losses, const void *logits, const int32_t *tg, int N, int V, float dloss,
                   int bf16) {
  loss_ctx c = {.bf16 = bf16};
  c.a = (hd_ce_args){.d = d, .losses = losses, .logits = logits, .targets = tg, .N = N, .V = V, .dloss = dloss};
  run_row_blocks(ce_ph, HD_CE_PHASES, hd_ce_sync, &c);
}

static void ce_case(int N, int V, int bf16) {
  rng_seed(400 + V + bf16);
  const size_t NV = (size_t)N * V;
  float *x = frand(NV, -8, 8), *loss = falloc(N), *loss2 = falloc(N), *d = falloc(NV), *l3 = falloc(N);
  int32_t *tg = malloc((size_t)N * sizeof *tg);
  for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 7919 + 13) % V);
  x[0] = 80.0f; /* a large logit: the max subtraction keeps it finite */
  void *xa = act_of(x, NV, bf16);
  kern_crossentropy_forward(loss, x, tg, N, V);
  kern_crossentropy_backward(d, NULL, x, tg, N, V, 0.25f);
  run_ce(NULL, loss2, xa, tg, N, V, 0.0f, bf16);
  close_f("losses", loss2, loss, N, 2e-6, 2e-6);
  run_ce(xa, l3, xa, tg, N, V, 0.25f, bf16); /* in place, fused with the losses */
  close_f("losses (fused)", l3, loss, N, 2e-6, 2e-6);
  /* the softmax sums V exponentials in another order than the CPU kernel:
   * fp32 error of order sqrt(V) ulps (V = 32000: 2.8e-5 relative seen in the
   * sanitizer build, whose CPU loops are not vectorised as in -O3) */
  const double sum_rtol = 2e-6 + 8.0 * sqrt((double)V) * 0x1p-24;
  close_f("dlogits", f32_of(xa, NV, bf16), d, NV, bf16 ? 8e-3 : sum_rtol, bf16 ? 1e-6 : 1e-9);
  float sum = 0.0f;
  for (int v = 0; v < V; v++) sum += hd_ld(xa, (size_t)v, bf16);
  cr_assert(fabsf(sum) < 1e-4f + (bf16 ? 2e-3f : 0.0f), "a row of dlogits sums to 0, not %g", (double)sum);
}
Test(cuda_loss, crossentropy_matches_cpu) {
  ce_case(3, 320, 0);
  ce_case(4, 997, 0);
  ce_case(2, 32000, 0);
  ce_case(3, 1000, 1);
}

Test(cuda_loss, vocab_parallel_pieces_match_cpu) {
  const int N = 5, V = 700, v0 = 1400;
  rng_seed(500);
  float *x = frand((size_t)N * V, -6, 6);
  int32_t tg[5] = {1400, 2099, 5, 1750, 2100}; /* held here at 0 and 699; elsewhere */
  /* each row's max where a different thread and warp holds it (the last
   * warp of the block: 480 .. 511), so a block max that drops one shows */
  static const int at[5] = {0, 699, 481, 511, 300};
  for (int n = 0; n < N; n++) x[(size_t)n * V + at[n]] = 7.0f + (float)n;
  float *xc = fcopy(x, (size_t)N * V), mx[5], sums[10], losses[5], mx2[5], sums2[10], losses2[5];
  kern_vocab_ce_max(mx, xc, N, V);
  kern_vocab_ce_sums(sums, xc, mx, tg, v0, N, V);
  kern_vocab_ce_losses(losses, sums, mx, N);
  kern_vocab_ce_backward(xc, sums, mx, tg, v0, N, V, 0.5f);
  loss_ctx c = {.bf16 = 0};
  c.a = (hd_ce_args){.logits = x, .targets = tg, .mx = mx2, .sums = sums2, .N = N, .V = V, .v0 = v0};
  run_row_blocks(vmax_ph, HD_VOCAB_MAX_PHASES, hd_vocab_max_sync, &c);
  c.a.mx_in = mx2;
  run_row_blocks(vsums_ph, HD_VOCAB_SUMS_PHASES, hd_vocab_sums_sync, &c);
  c.a.sums_in = sums2, c.a.losses = losses2;
  grid_run_body(1, 1, 32, vlosses_body, &c); /* loss.cu: blocks of 256, one thread per row */
  c.a.d = x, c.a.dloss = 0.5f;
  run_row_blocks(vbwd_body, 1, NULL, &c);
  cr_assert_arr_eq(mx2, mx, sizeof mx, "row max: exact");
  close_f("sums", sums2, sums, 2 * N, 1e-6, 0);
  close_f("losses", losses2, losses, N, 1e-6, 1e-6);
  close_f("grad", x, xc, (size_t)N * V, 2e-6, 1e-9);
}

Test(cuda_loss, loss_sum_matches_cpu) {
  rng_seed(600);
  float *l = frand(1001, 0, 10);
  double acc = 1.5, cpu = 1.5;
  loss_ctx c = {.losses_in = l, .acc = &acc};
  c.a.N = 1001;
  const grid_kernel k = {1, 1, 32, HD_LOSS_PHASES, hd_loss_sync, 0, NULL, loss_acc_ph}; /* loss.cu: one warp */
  grid_run(&k, &c);
  cpu += (double)(float)kern_loss_mean(l, 1001);
  cr_assert(fabs(acc - cpu) <= 1e-6 * cpu, "%.17g vs %.17g", acc, cpu);
}
