/* test-backend-ops' checks (bops.h explains the method): dense algebra,
 * elementwise, norms, embedding and RoPE. Attention, the losses and the
 * optimizer: bops_attn.c. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "bops.h"

static void gemm_case(gcheck *g, int ta, int tb, int M, int N, int K) {
  char what[96];
  const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
  const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
  float *A = g_rand(na, -1, 1), *B = g_rand(nb, -1, 1), *C = g_rand(nc, -1, 1), *Cf = g_rand(nc, -1, 1);
  void *dA = g_act(g, A, na), *dB = g_act(g, B, nb), *dC = g_act(g, C, nc);
  float *dCf = g_f32(g, Cf, nc);
  for (int beta = 0; beta <= 1; beta++) {
    RUN(0, gemm, ta, tb, M, N, K, (cact *)A, lda, (cact *)B, ldb, (float)beta, (boost_act *)C, ldc);
    RUN(1, gemm, ta, tb, M, N, K, dA, lda, dB, ldb, (float)beta, dC, ldc);
    snprintf(what, sizeof what, "gemm %c%c %dx%dx%d beta %d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, beta);
    g_cmp_act(g, what, dC, C, nc, g->tol_act);
    g_read_act(g, C, dC, nc); /* beta = 1 then reads the same C on both sides */
  }
  RUN(0, gemm_acc_f32, ta, tb, M, N, K, (cact *)A, lda, (cact *)B, ldb, Cf, ldc);
  RUN(1, gemm_acc_f32, ta, tb, M, N, K, dA, lda, dB, ldb, dCf, ldc);
  snprintf(what, sizeof what, "gemm_acc_f32 %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
  g_cmp_f32(g, what, dCf, Cf, nc, g->bf16 ? 1e-5 : g->tol_f32);
  g_free(g, dA), g_free(g, dB), g_free(g, dC), g_free(g, dCf);
  boost_free(A), boost_free(B), boost_free(C), boost_free(Cf);
}

void check_dense(gcheck *g) {
  for (int ta = 0; ta <= 1; ta++)
    for (int tb = 0; tb <= 1; tb++) {
      gemm_case(g, ta, tb, 33, 17, 29);
      if (!g->small) gemm_case(g, ta, tb, 256, 384, 512);
      gemm_case(g, ta, tb, g_dim(1, 90), g_dim(1, 90), g_dim(1, 90)); /* a random shape */
    }
  const int N = g->small ? g_dim(1, 40) : 512, Cin = g_dim(8, 96), Cout = g_dim(8, 96);
  float *in = g_rand((size_t)N * Cin, -1, 1), *W = g_rand((size_t)Cout * Cin, -1, 1), *dout = g_rand((size_t)N * Cout, -1, 1);
  float *dW = g_rand((size_t)Cout * Cin, -1, 1), *out = g_new((size_t)N * Cout), *din = g_new((size_t)N * Cin);
  void *d_in = g_act(g, in, (size_t)N * Cin), *d_W = g_act(g, W, (size_t)Cout * Cin), *d_dout = g_act(g, dout, (size_t)N * Cout);
  void *d_out = g_act_empty(g, (size_t)N * Cout), *d_din = g_act_empty(g, (size_t)N * Cin);
  float *d_dW = g_f32(g, dW, (size_t)Cout * Cin);
  RUN(0, linear_forward, (boost_act *)out, (cact *)in, (cact *)W, N, Cin, Cout);
  RUN(1, linear_forward, d_out, d_in, d_W, N, Cin, Cout);
  g_cmp_act(g, "linear_forward", d_out, out, (size_t)N * Cout, g->tol_act);
  RUN(0, linear_backward, (boost_act *)din, dW, (cact *)dout, (cact *)in, (cact *)W, N, Cin, Cout);
  RUN(1, linear_backward, d_din, d_dW, d_dout, d_in, d_W, N, Cin, Cout);
  g_cmp_act(g, "linear_backward din", d_din, din, (size_t)N * Cin, g->tol_act);
  g_cmp_f32(g, "linear_backward dW (accumulated)", d_dW, dW, (size_t)Cout * Cin, g->bf16 ? 1e-5 : g->tol_f32);
  RUN(0, linear_backward, NULL, dW, (cact *)dout, (cact *)in, (cact *)W, N, Cin, Cout);
  RUN(1, linear_backward, NULL, d_dW, d_dout, d_in, d_W, N, Cin, Cout);
  g_cmp_f32(g, "linear_backward dW (din NULL)", d_dW, dW, (size_t)Cout * Cin, g->bf16 ? 1e-5 : g->tol_f32);
  g_free(g, d_in), g_free(g, d_W), g_free(g, d_dout), g_free(g, d_out), g_free(g, d_din), g_free(g, d_dW);
  boost_free(in), boost_free(W), boost_free(dout), boost_free(dW), boost_free(out), boost_free(din);
}

/* ---- elementwise: an odd length, aligned and one element off alignment ---- */
static void elementwise_at(gcheck *g, size_t n0, size_t off) {
  const size_t n = n0 + off;
  char what[96];
  float *a = g_rand(n, -4, 4), *b = g_rand(n, -2, 2), *o = g_new(n), *o2 = g_new(n);
  void *da = g_act(g, a, n), *db = g_act(g, b, n), *dout = g_act_empty(g, n), *dout2 = g_act_empty(g, n);
  cact *A = boost_act_at(g->be, da, off), *B = boost_act_at(g->be, db, off);
  boost_act *O = boost_act_at(g->be, dout, off), *O2 = boost_act_at(g->be, dout2, off);
  const size_t m = n - off;
#define EW_CHECK(name, tol, ...)                                      \
  do {                                                                \
    snprintf(what, sizeof what, "%s (offset %zu)", name, off);        \
    g_cmp_act(g, what, dout, o, n, tol);                              \
  } while (0)
  RUN(0, add_forward, (boost_act *)(o + off), (cact *)(a + off), (cact *)(b + off), m);
  RUN(1, add_forward, O, A, B, m);
  EW_CHECK("add_forward", g->bf16 ? 4e-3 : 0);
  RUN(0, add_inplace, (boost_act *)(o + off), (cact *)(a + off), m);
  RUN(1, add_inplace, O, A, m);
  EW_CHECK("add_inplace", g->bf16 ? 4e-3 : 0);
  RUN(0, mul_forward, (boost_act *)(o + off), (cact *)(a + off), (cact *)(b + off), m);
  RUN(1, mul_forward, O, A, B, m);
  EW_CHECK("mul_forward", g->bf16 ? 4e-3 : 0);
  RUN(0, mul_backward, (boost_act *)(o + off), (boost_act *)(o2 + off), (cact *)(a + off), (cact *)(b + off),
      (cact *)(a + off), m);
  RUN(1, mul_backward, O, O2, A, B, A, m);
  EW_CHECK("mul_backward da", g->bf16 ? 4e-3 : 0);
  snprintf(what, sizeof what, "mul_backward db (offset %zu)", off);
  g_cmp_act(g, what, dout2, o2, n, g->bf16 ? 4e-3 : 0);
  RUN(0, silu_forward, (boost_act *)(o + off), (cact *)(a + off), m);
  RUN(1, silu_forward, O, A, m);
  EW_CHECK("silu_forward", g->tol_act);
  RUN(0, silu_backward, (boost_act *)(o + off), (cact *)(o + off), (cact *)(a + off), m); /* in place */
  RUN(1, silu_backward, O, O, A, m);
  EW_CHECK("silu_backward (in place)", g->tol_act);
  float *cf = g_rand(n, -3, 3), *df = g_f32(g, cf, n); /* not rounded */
  RUN(1, to_act, O, df + off, m);
  for (size_t i = off; i < n; i++) o[i] = g_round_act(g, cf[i]);
  EW_CHECK("to_act (nearest even)", 0);
  RUN(1, to_f32, df + off, A, m);
  snprintf(what, sizeof what, "to_f32 (exact, offset %zu)", off);
  memcpy(o + off, a + off, m * 4);
  memcpy(o, cf, off * 4);
  g_cmp_f32(g, what, df, o, n, 0);
  boost_free(cf);
  g_free(g, da), g_free(g, db), g_free(g, dout), g_free(g, dout2), g_free(g, df);
  boost_free(a), boost_free(b), boost_free(o), boost_free(o2);
#undef EW_CHECK
}

void check_elementwise(gcheck *g) {
  const size_t n = g->small ? 1001 : 1000003, r = (size_t)g_dim(1, 5000); /* and a random length */
  elementwise_at(g, n, 0);
  elementwise_at(g, n, 1);
  elementwise_at(g, r, (size_t)g_dim(0, 3));
}

/* ---- norms ---------------------------------------------------------------------------- */
void check_norms(gcheck *g) {
  const int N = g->small ? g_dim(1, 64) : 4099, C = g_dim(16, 300);
  const size_t NC = (size_t)N * C;
  float *x = g_rand(NC, -2, 2), *w = g_rand(C, 0.5f, 1.5f), *go = g_rand(NC, -1, 1), *dw = g_rand(C, -1, 1);
  float *out = g_new(NC), *rstd = g_new(N), *dx = g_new(NC);
  void *dX = g_act(g, x, NC), *dWt = g_act(g, w, C), *dG = g_act(g, go, NC), *dOut = g_act_empty(g, NC);
  float *dR = g_f32(g, rstd, N), *dDw = g_f32(g, dw, C);
  RUN(0, rmsnorm_forward, (boost_act *)out, rstd, (cact *)x, (cact *)w, N, C, 1e-5f);
  RUN(1, rmsnorm_forward, dOut, dR, dX, dWt, N, C, 1e-5f);
  g_cmp_act(g, "rmsnorm_forward", dOut, out, NC, g->tol_act);
  g_cmp_f32(g, "rmsnorm_forward rstd", dR, rstd, N, 1e-6);
  RUN(0, rmsnorm_backward, (boost_act *)dx, dw, (cact *)go, (cact *)x, (cact *)w, rstd, N, C);
  RUN(1, rmsnorm_backward, dOut, dDw, dG, dX, dWt, dR, N, C);
  g_cmp_act(g, "rmsnorm_backward dx", dOut, dx, NC, g->tol_act);
  g_cmp_f32(g, "rmsnorm_backward dw (accumulated)", dDw, dw, C, g->bf16 ? 1e-5 : g->tol_f32);
  /* btp: gain and local sums of squares, and their backward into the residual gradient */
  float *ss = g_new(N), *dss = g_rand(N, -0.1f, 0.1f), *acc = g_rand(NC, -1, 1);
  float *dSs = g_f32(g, ss, N), *dDss = g_f32(g, dss, N);
  void *dAcc = g_act(g, acc, NC);
  RUN(0, gain_sumsq_forward, (boost_act *)out, ss, (cact *)x, (cact *)w, N, C);
  RUN(1, gain_sumsq_forward, dOut, dSs, dX, dWt, N, C);
  g_cmp_act(g, "gain_sumsq_forward xg", dOut, out, NC, g->bf16 ? 4e-3 : 0);
  g_cmp_f32(g, "gain_sumsq_forward ss", dSs, ss, N, 1e-6);
  RUN(0, gain_sumsq_backward, (boost_act *)acc, dw, (cact *)go, (cact *)x, (cact *)w, dss, N, C);
  RUN(1, gain_sumsq_backward, dAcc, dDw, dG, dX, dWt, dDss, N, C);
  g_cmp_act(g, "gain_sumsq_backward dx_acc", dAcc, acc, NC, g->tol_act);
  g_cmp_f32(g, "gain_sumsq_backward dgain", dDw, dw, C, g->bf16 ? 1e-5 : g->tol_f32);
  /* online RMS over a bottleneck of width 96 */
  const int wd = g_dim(8, 130);
  const size_t NW = (size_t)N * wd;
  float *h = g_rand(NW, -3, 3), *s = g_rand(N, 1, 80), *dh = g_rand(NW, -1, 1);
  void *dH = g_act(g, h, NW), *dDh = g_act(g, dh, NW);
  float *dS = g_f32(g, s, N);
  RUN(0, online_rms_forward, (boost_act *)h, rstd, s, N, wd, 1.0f / 512, 1e-5f);
  RUN(1, online_rms_forward, dH, dR, dS, N, wd, 1.0f / 512, 1e-5f);
  g_cmp_act(g, "online_rms_forward", dH, h, NW, g->bf16 ? 4e-3 : 0);
  g_cmp_f32(g, "online_rms_forward rstd (same operations)", dR, rstd, N, 0);
  RUN(0, online_rms_backward, (boost_act *)dh, dss, (cact *)h, rstd, N, wd, 1.0f / 512);
  RUN(1, online_rms_backward, dDh, dDss, dH, dR, N, wd, 1.0f / 512);
  g_cmp_act(g, "online_rms_backward dh", dDh, dh, NW, g->bf16 ? 4e-3 : 0);
  g_cmp_f32(g, "online_rms_backward dss", dDss, dss, N, g->bf16 ? 2e-2 : 1e-5);
  void *bufs[] = {dX, dWt, dG, dOut, dR, dDw, dSs, dDss, dAcc, dH, dDh, dS};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  float *hb[] = {x, w, go, dw, out, rstd, dx, ss, dss, acc, h, s, dh};
  for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) boost_free(hb[i]);
}

/* ---- embedding and RoPE ------------------------------------------------------------------ */
void check_embedding_rope(gcheck *g) {
  const int N = g->small ? g_dim(4, 96) : 8192, V = g_dim(2, 1000), C = g_dim(8, 96);
  int32_t *tok = g_tokens((size_t)N, V);
  for (int i = 0; i < N / 4; i++) tok[i] = 5; /* one long run */
  float *wte = g_rand((size_t)V * C, -1, 1), *out = g_new((size_t)N * C), *go = g_rand((size_t)N * C, -1, 1);
  float *dwte = g_rand((size_t)V * C, -1, 1);
  int32_t *dTok = g_i32(g, tok, (size_t)N);
  void *dWte = g_act(g, wte, (size_t)V * C), *dOut = g_act_empty(g, (size_t)N * C), *dGo = g_act(g, go, (size_t)N * C);
  float *dDwte = g_f32(g, dwte, (size_t)V * C), *h1 = g_new((size_t)V * C), *h2 = g_new((size_t)V * C);
  RUN(0, embedding_forward, (boost_act *)out, tok, (cact *)wte, N, V, C);
  RUN(1, embedding_forward, dOut, dTok, dWte, N, V, C);
  g_cmp_act(g, "embedding_forward (a copy)", dOut, out, (size_t)N * C, 0);
  RUN(0, embedding_backward, dwte, (cact *)go, tok, N, V, C);
  RUN(1, embedding_backward, dDwte, dGo, dTok, N, V, C);
  g_cmp_f32(g, "embedding_backward (accumulated)", dDwte, dwte, (size_t)V * C, 1e-6);
  g->be->mem->upload(g->be, dDwte, h1, (size_t)V * C * 4); /* zeros */
  RUN(1, embedding_backward, dDwte, dGo, dTok, N, V, C);
  g_read_f32(g, h1, dDwte, (size_t)V * C);
  g->be->mem->zero(g->be, dDwte, (size_t)V * C * 4);
  RUN(1, embedding_backward, dDwte, dGo, dTok, N, V, C);
  g_read_f32(g, h2, dDwte, (size_t)V * C);
  g_same(g, "embedding_backward: bitwise repeatable", h1, h2, (size_t)V * C * 4);
  /* RoPE: tables bit for bit (the CPU's own code), rotations in place */
  const int B = g_dim(1, 3), T = g->small ? g_dim(1, 40) : 300, H = g_dim(1, 4), hd = 2 * g_dim(1, 40);
  const size_t nr = (size_t)B * T * H * hd, nt = (size_t)T * hd / 2;
  float *ct = g_new(nt), *st = g_new(nt), *dCt = g_f32(g, ct, nt), *dSt = g_f32(g, st, nt), *x = g_rand(nr, -2, 2);
  RUN(0, rope_tables, ct, st, T, hd, 10000.0f);
  RUN(1, rope_tables, dCt, dSt, T, hd, 10000.0f);
  g_cmp_f32(g, "rope_tables cos (exact)", dCt, ct, nt, 0);
  g_cmp_f32(g, "rope_tables sin (exact)", dSt, st, nt, 0);
  void *dX = g_act(g, x, nr);
  RUN(0, rope_forward, (boost_act *)x, (cact *)x, ct, st, B, T, H, hd);
  RUN(1, rope_forward, dX, dX, dCt, dSt, B, T, H, hd);
  g_cmp_act(g, "rope_forward (in place)", dX, x, nr, g->bf16 ? 4e-3 : 0);
  RUN(0, rope_backward, (boost_act *)x, (cact *)x, ct, st, B, T, H, hd);
  RUN(1, rope_backward, dX, dX, dCt, dSt, B, T, H, hd);
  g_cmp_act(g, "rope_backward (in place)", dX, x, nr, g->bf16 ? 6e-3 : 0);
  void *bufs[] = {dTok, dWte, dOut, dGo, dDwte, dCt, dSt, dX};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  float *hb[] = {wte, out, go, dwte, h1, h2, ct, st, x};
  for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) boost_free(hb[i]);
  boost_free(tok);
}
