/* test-backend-ops' attention, losses and optimizer (bops.h explains the
 * method). Attention also runs its backward twice (bitwise repeatable) and
 * with NULL gradients; AdamW must agree with the CPU bit for bit (float
 * masters and moments, the CPU's operation order). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "bops.h"

/* ---- attention ------------------------------------------------------------------------ */
static void attention_case(gcheck *g, int B, int T, int H, int hd) {
  char what[96];
  const size_t n = (size_t)B * T * H * hd, ns = (size_t)B * H * T;
  float *q = g_rand(n, -2, 2), *k = g_rand(n, -2, 2), *v = g_rand(n, -1, 1), *go = g_rand(n, -1, 1);
  float *out = g_new(n), *stats = g_new(2 * ns), *dq = g_new(n), *dk = g_new(n), *dv = g_new(n), *h1 = g_new(3 * n);
  float *h2 = g_new(3 * n);
  void *cs = boost_calloc(CALL(0, attention_scratch_bytes, B, T, H) + 4, 1);
  void *dQ = g_act(g, q, n), *dK = g_act(g, k, n), *dV = g_act(g, v, n), *dGo = g_act(g, go, n);
  void *dOut = g_act_empty(g, n), *dG3 = g_act_empty(g, 3 * n);
  void *dq_ = dG3, *dk_ = boost_act_at(g->be, dG3, n), *dv_ = boost_act_at(g->be, dG3, 2 * n);
  float *dStats = g_f32(g, stats, 2 * ns);
  void *gs = boost_be_alloc(g->be, CALL(1, attention_scratch_bytes, B, T, H) + 4, "attention scratch");
  RUN(0, attention_forward, (boost_act *)out, stats, cs, (cact *)q, (cact *)k, (cact *)v, B, T, H, hd);
  RUN(1, attention_forward, dOut, dStats, gs, dQ, dK, dV, B, T, H, hd);
  snprintf(what, sizeof what, "attention_forward B%d T%d H%d hd%d", B, T, H, hd);
  g_cmp_act(g, what, dOut, out, n, g->tol_chain);
  snprintf(what, sizeof what, "attention_forward stats (max, 1/sum) T%d", T);
  g_cmp_f32(g, what, dStats, stats, 2 * ns, g->bf16 ? 1e-4 : 1e-6);
  RUN(0, attention_backward, (boost_act *)dq, (boost_act *)dk, (boost_act *)dv, cs, (cact *)go, (cact *)q, (cact *)k,
      (cact *)v, stats, B, T, H, hd);
  g->be->mem->upload(g->be, dStats, stats, 2 * ns * 4); /* the same statistics on both sides */
  RUN(1, attention_backward, dq_, dk_, dv_, gs, dGo, dQ, dK, dV, dStats, B, T, H, hd);
  snprintf(what, sizeof what, "attention_backward dq T%d hd%d", T, hd);
  g_cmp_act(g, what, dq_, dq, n, g->tol_chain);
  snprintf(what, sizeof what, "attention_backward dk T%d hd%d", T, hd);
  g_cmp_act(g, what, dk_, dk, n, g->tol_chain);
  snprintf(what, sizeof what, "attention_backward dv T%d hd%d", T, hd);
  g_cmp_act(g, what, dv_, dv, n, g->tol_chain);
  g_read_act(g, h1, dG3, 3 * n);
  g->be->mem->zero(g->be, dG3, boost_act_bytes(g->be, 3 * n));
  RUN(1, attention_backward, dq_, dk_, dv_, gs, dGo, dQ, dK, dV, dStats, B, T, H, hd);
  g_read_act(g, h2, dG3, 3 * n);
  snprintf(what, sizeof what, "attention_backward: bitwise repeatable T%d", T);
  g_same(g, what, h1, h2, 3 * n * 4);
  /* NULL gradients skip their work and leave the others as they were */
  g->be->mem->zero(g->be, dG3, boost_act_bytes(g->be, 3 * n));
  RUN(1, attention_backward, NULL, dk_, NULL, gs, dGo, dQ, dK, dV, dStats, B, T, H, hd);
  RUN(1, attention_backward, NULL, NULL, dv_, gs, dGo, dQ, dK, dV, dStats, B, T, H, hd);
  RUN(1, attention_backward, dq_, NULL, NULL, gs, dGo, dQ, dK, dV, dStats, B, T, H, hd);
  g_read_act(g, h2, dG3, 3 * n);
  snprintf(what, sizeof what, "attention_backward: one gradient at a time T%d", T);
  g_same(g, what, h1, h2, 3 * n * 4);
  void *bufs[] = {dQ, dK, dV, dGo, dOut, dG3, dStats, gs};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  float *hb[] = {q, k, v, go, out, stats, dq, dk, dv, h1, h2};
  for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) boost_free(hb[i]);
  boost_free(cs);
}

/* ---- the decode step over a KV cache: T steps, new q/k/v at each ---------------------------- */
static void decode_case(gcheck *g, int B, int T, int H, int hd) {
  char what[96];
  const size_t n = (size_t)B * H * hd, nc = (size_t)T * n, half = (size_t)T * hd / 2;
  float *q = g_rand(nc, -2, 2), *k = g_rand(nc, -2, 2), *v = g_rand(nc, -1, 1), *out = g_new(nc);
  float *kc = g_new(nc), *vc = g_new(nc), *tab = g_new(2 * half);
  void *dQ = g_act(g, q, nc), *dK = g_act(g, k, nc), *dV = g_act(g, v, nc), *dOut = g_act_empty(g, nc);
  void *dKc = g_act_empty(g, nc), *dVc = g_act_empty(g, nc);
  RUN(0, rope_tables, tab, tab + half, T, hd, 10000.0f);
  float *dTab = g_f32(g, tab, 2 * half);
  for (int pos = 0; pos < T; pos++) { /* step pos reads rows [pos * n, (pos + 1) * n) of q, k, v */
    const size_t o = (size_t)pos * n;
    RUN(0, attention_decode, (boost_act *)(out + o), (boost_act *)kc, (boost_act *)vc, (cact *)(q + o),
        (cact *)(k + o), (cact *)(v + o), tab, tab + half, B, pos, T, H, hd);
    RUN(1, attention_decode, boost_act_at(g->be, dOut, o), dKc, dVc, boost_act_at(g->be, dQ, o),
        boost_act_at(g->be, dK, o), boost_act_at(g->be, dV, o), dTab, dTab + half, B, pos, T, H, hd);
  }
  snprintf(what, sizeof what, "attention_decode B%d T%d H%d hd%d", B, T, H, hd);
  g_cmp_act(g, what, dOut, out, nc, g->tol_chain);
  snprintf(what, sizeof what, "attention_decode k cache T%d", T);
  g_cmp_act(g, what, dKc, kc, nc, g->tol_act);
  snprintf(what, sizeof what, "attention_decode v cache T%d", T);
  g_cmp_act(g, what, dVc, vc, nc, g->tol_act);
  void *bufs[] = {dQ, dK, dV, dOut, dKc, dVc, dTab};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  float *hb[] = {q, k, v, out, kc, vc, tab};
  for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) boost_free(hb[i]);
}

void check_attention(gcheck *g) {
  decode_case(g, 1, 5, 2, 16);
  decode_case(g, 2, 40, 3, 64);
  decode_case(g, g_dim(1, 3), g_dim(1, 50), g_dim(1, 4), 2 * g_dim(4, 40)); /* a random shape */
  if (!g->small) decode_case(g, 1, 300, 8, 64);
  attention_case(g, 1, 1, 1, 16);
  attention_case(g, 2, 37, 3, 16);
  attention_case(g, 1, 64, 2, 20); /* head dimension padded to 32 */
  attention_case(g, g_dim(1, 2), g_dim(1, 80), g_dim(1, 3), 2 * g_dim(4, 32)); /* a random shape */
  if (g->small) return;
  attention_case(g, 2, 200, 2, 64);
  attention_case(g, 1, 130, 2, 128);
  attention_case(g, 2, 1024, 4, 64);
}

/* ---- cross-entropy, vocab-parallel pieces, the loss sum ------------------------------------- */
static void ce_case(gcheck *g, int N, int V) {
  char what[96];
  const size_t NV = (size_t)N * V;
  float *x = g_rand(NV, -8, 8), *loss = g_new(N), *loss2 = g_new(N);
  int32_t *tg = g_tokens((size_t)N, V), *dTg = g_i32(g, tg, (size_t)N);
  void *dX = g_act(g, x, NV);
  float *dL = g_f32(g, loss, N);
  RUN(0, crossentropy_forward, loss, (cact *)x, tg, N, V);
  RUN(1, crossentropy_forward, dL, dX, dTg, N, V);
  snprintf(what, sizeof what, "crossentropy_forward V%d", V);
  g_cmp_f32(g, what, dL, loss, N, 1e-5);
  g->be->mem->zero(g->be, dL, (size_t)N * 4);
  RUN(0, crossentropy_backward, (boost_act *)x, loss2, (cact *)x, tg, N, V, 0.125f);
  RUN(1, crossentropy_backward, dX, dL, dX, dTg, N, V, 0.125f);
  snprintf(what, sizeof what, "crossentropy_backward (in place) V%d", V);
  g_cmp_act(g, what, dX, x, NV, g->tol_act);
  snprintf(what, sizeof what, "crossentropy_backward losses V%d", V);
  g_cmp_f32(g, what, dL, loss2, N, 1e-5);
  g_free(g, dTg), g_free(g, dX), g_free(g, dL);
  boost_free(x), boost_free(loss), boost_free(loss2), boost_free(tg);
}

void check_loss(gcheck *g) {
  ce_case(g, 8, 320);
  ce_case(g, 8, 997);
  ce_case(g, g_dim(1, 16), g_dim(2, 1500)); /* a random shape */
  if (!g->small) ce_case(g, 512, 32000);
  /* vocab-parallel: this rank holds [v0, v0 + V) */
  const int N = 64, V = 1000, v0 = 3000;
  float *x = g_rand((size_t)N * V, -6, 6), mx[64], sums[128], losses[64];
  int32_t *tg = g_tokens((size_t)N, 5000), *dTg = g_i32(g, tg, (size_t)N);
  void *dX = g_act(g, x, (size_t)N * V);
  float *dMx = g_f32(g, mx, N), *dSums = g_f32(g, sums, 2 * N), *dLoss = g_f32(g, losses, N);
  RUN(0, vocab_ce_max, mx, (cact *)x, N, V);
  RUN(1, vocab_ce_max, dMx, dX, N, V);
  g_cmp_f32(g, "vocab_ce_max (exact)", dMx, mx, N, 0);
  RUN(0, vocab_ce_sums, sums, (cact *)x, mx, tg, v0, N, V);
  RUN(1, vocab_ce_sums, dSums, dX, dMx, dTg, v0, N, V);
  g_cmp_f32(g, "vocab_ce_sums", dSums, sums, 2 * N, 1e-6);
  RUN(0, vocab_ce_losses, losses, sums, mx, N);
  RUN(1, vocab_ce_losses, dLoss, dSums, dMx, N);
  g_cmp_f32(g, "vocab_ce_losses", dLoss, losses, N, 1e-6);
  RUN(0, vocab_ce_backward, (boost_act *)x, sums, mx, tg, v0, N, V, 0.5f);
  RUN(1, vocab_ce_backward, dX, dSums, dMx, dTg, v0, N, V, 0.5f);
  g_cmp_act(g, "vocab_ce_backward (in place)", dX, x, (size_t)N * V, g->tol_act);
  /* the loss sum: acc += (float) mean, in double */
  double acc = 1.5, got = 0;
  double *dAcc = boost_be_alloc(g->be, 8, "a double");
  g->be->mem->upload(g->be, dAcc, &acc, 8);
  RUN(0, loss_accumulate, losses, N, &acc);
  RUN(1, loss_accumulate, dLoss, N, dAcc);
  g->be->mem->download(g->be, &got, dAcc, 8);
  g_true(g, "loss_accumulate", fabs(got - acc) <= 1e-6 * fabs(acc));
  g_free(g, dAcc), g_free(g, dTg), g_free(g, dX), g_free(g, dMx), g_free(g, dSums), g_free(g, dLoss);
  boost_free(x), boost_free(tg);
}

/* ---- the optimizer over an arena ------------------------------------------------------------ */
void check_optimizer(gcheck *g) {
  const size_t S = g->small ? 1 : 64; /* scale of the arena */
  const boost_segment segs[] = {
      {1000 * S, 3000 * S, BOOST_SEG_DECAY | BOOST_SEG_NORM}, {4000 * S, 17, BOOST_SEG_NORM},
      {5000 * S, 20000 * S, BOOST_SEG_DECAY},                {25000 * S, 16384 * S, BOOST_SEG_NORM},
      {41500 * S, 3500 * S, BOOST_SEG_DECAY | BOOST_SEG_NORM},
  };
  const int nseg = 5;
  const size_t n = 50000 * S, mb = 1000 * S, me = 45000 * S, nm = me - mb;
  boost_optim_plan *pc = CALL(0, optim_plan_create, segs, nseg, mb, me);
  boost_optim_plan *pg = CALL(1, optim_plan_create, segs, nseg, mb, me);
  float *p = g_rand(n, -1, 1), *m = g_new(nm), *v = g_new(nm), *gr = g_new(n), *h = g_new(n);
  float *dP = g_f32(g, p, n), *dM = g_f32(g, m, nm), *dV = g_f32(g, v, nm), *dG = g_f32(g, gr, n);
  void *dW = g->bf16 ? g_act_empty(g, n) : NULL;
  const adamw_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int t = 1; t <= 3; t++) {
    g_fill(gr, n, -0.5f, 0.5f);
    g->be->mem->upload(g->be, dG, gr, n * 4);
    double want = 0, got = 0, again = 0;
    double *dOut = boost_be_alloc(g->be, 8, "a double");
    RUN(0, grad_sumsq, pc, gr, &want);
    RUN(1, grad_sumsq, pg, dG, dOut);
    g->be->mem->download(g->be, &got, dOut, 8);
    RUN(1, grad_sumsq, pg, dG, dOut);
    g->be->mem->download(g->be, &again, dOut, 8);
    g_true(g, "grad_sumsq (double, plan order)", fabs(got - want) <= 1e-12 * want);
    g_true(g, "grad_sumsq: bitwise repeatable", memcmp(&got, &again, 8) == 0);
    g_free(g, dOut);
    RUN(0, adamw, pc, p, gr, m, v, NULL, hp, t, 0.75f);
    RUN(1, adamw, pg, dP, dG, dM, dV, dW, hp, t, 0.75f);
  }
  g_cmp_f32(g, "adamw params (bit for bit)", dP, p, n, 0);
  g_cmp_f32(g, "adamw m (bit for bit)", dM, m, nm, 0);
  g_cmp_f32(g, "adamw v (bit for bit)", dV, v, nm, 0);
  if (dW) {
    g_read_act(g, h, dW, n);
    int ok = 1;
    for (int i = 0; i < nseg; i++)
      for (size_t a = segs[i].offset; a < segs[i].offset + segs[i].n; a++) ok &= h[a] == g_round_act(g, p[a]);
    g_true(g, "adamw: the bf16 working copy is the rounded master", ok);
  }
  CALL(0, optim_plan_free, pc);
  CALL(1, optim_plan_free, pg);
  g_free(g, dP), g_free(g, dM), g_free(g, dV), g_free(g, dG), g_free(g, dW);
  boost_free(p), boost_free(m), boost_free(v), boost_free(gr), boost_free(h);
}
