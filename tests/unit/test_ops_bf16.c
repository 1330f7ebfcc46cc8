/* Every op of the CPU backend's bf16 table against its fp32 table, through
 * the seam (kernels/backend.h) as the model calls them. Inputs are drawn in
 * fp32 and rounded to bf16 first, so both tables see the same values; the
 * bf16 side then differs only by its roundings: each bf16 store rounds to
 * nearest even (relative error <= 2^-8), and ops that chain stores compound
 * that. Tolerance per output: |bf16 - fp32| <= tol * max(1, max |fp32|),
 * tol = 2^-7 for one rounding after fp32 arithmetic, 2^-6 where a rounded
 * intermediate feeds a further product (attention, the norm backwards);
 * float outputs computed from identical inputs in the same order (weight
 * gradients of the elementwise-free ops, statistics) within 1e-5. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bf16.h"

static boost_backend *f32, *b16;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float urand(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static void setup(void) {
  boost_status err = {0};
  boost_backend_create("cpu", BOOST_F32, 2, 0, &f32, &err);
  boost_backend_create("cpu", BOOST_BF16, 2, 0, &b16, &err);
  cr_assert(f32 && b16, "%s", err.msg);
}
static void teardown(void) {
  boost_backend_destroy(f32);
  boost_backend_destroy(b16);
}

/* A tensor on both sides (the CPU backends' memory is host memory). */
typedef struct {
  float *f;
  bf16_t *b;
  size_t n;
} pair;

static pair make(size_t n, float lo, float hi) {
  pair p = {calloc(n ? n : 1, sizeof(float)), calloc(n ? n : 1, sizeof(bf16_t)), n};
  for (size_t i = 0; i < n; i++) {
    p.b[i] = f32_to_bf16(urand(lo, hi));
    p.f[i] = bf16_to_f32(p.b[i]);
  }
  return p;
}
static pair zeros(size_t n) { return make(n, 0, 0); }
static void drop(pair *p) { free(p->f), free(p->b); }
#define A32(p) ((boost_act *)(p).f)
#define A16(p) ((boost_act *)(p).b)

static void close_bf16(const char *what, const pair *p, double tol) {
  double mx = 1, worst = 0;
  for (size_t i = 0; i < p->n; i++) mx = fmax(mx, fabs(p->f[i]));
  for (size_t i = 0; i < p->n; i++) worst = fmax(worst, fabs(bf16_to_f32(p->b[i]) - p->f[i]));
  cr_expect(worst <= tol * mx, "%s: max |bf16 - fp32| %.3g > %.3g x %.3g", what, worst, tol, mx);
}
static void close_f32(const char *what, const float *a, const float *b, size_t n, double tol) {
  double mx = 1, worst = 0;
  for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(a[i]));
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
  cr_expect(worst <= tol * mx, "%s: max |bf16 side - fp32| %.3g > %.3g x %.3g", what, worst, tol, mx);
}

#define ONE 0.0078125  /* 2^-7 */
#define TWO 0.015625   /* 2^-6 */

TestSuite(ops_bf16, .init = setup, .fini = teardown);

Test(ops_bf16, gemm_every_transpose_and_beta) {
  const int M = 37, N = 29, K = 41;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int beta = 0; beta < 2; beta++) {
        pair A = make((size_t)M * K, -1, 1), B = make((size_t)K * N, -1, 1), C = make((size_t)M * N, -1, 1);
        float *G32 = calloc((size_t)M * N, 4), *G16 = calloc((size_t)M * N, 4);
        for (size_t i = 0; i < (size_t)M * N; i++) G32[i] = G16[i] = C.f[i];
        const int lda = ta ? M : K, ldb = tb ? K : N;
        f32->ops->gemm(f32, ta, tb, M, N, K, A32(A), lda, A32(B), ldb, (float)beta, A32(C), N);
        b16->ops->gemm(b16, ta, tb, M, N, K, A16(A), lda, A16(B), ldb, (float)beta, A16(C), N);
        close_bf16("gemm", &C, ONE);
        f32->ops->gemm_acc_f32(f32, ta, tb, M, N, K, A32(A), lda, A32(B), ldb, G32, N);
        b16->ops->gemm_acc_f32(b16, ta, tb, M, N, K, A16(A), lda, A16(B), ldb, G16, N);
        close_f32("gemm_acc_f32", G32, G16, (size_t)M * N, 1e-5);
        drop(&A), drop(&B), drop(&C), free(G32), free(G16);
      }
}

Test(ops_bf16, elementwise) {
  const size_t n = 70001; /* above the threading threshold, ragged tail */
  pair a = make(n, -4, 4), b = make(n, -4, 4), g = make(n, -1, 1), o = zeros(n), da = zeros(n), db = zeros(n);
  f32->ops->add_forward(f32, A32(o), A32(a), A32(b), n), b16->ops->add_forward(b16, A16(o), A16(a), A16(b), n);
  close_bf16("add_forward", &o, ONE);
  f32->ops->add_inplace(f32, A32(o), A32(g), n), b16->ops->add_inplace(b16, A16(o), A16(g), n);
  close_bf16("add_inplace", &o, TWO);
  f32->ops->mul_forward(f32, A32(o), A32(a), A32(b), n), b16->ops->mul_forward(b16, A16(o), A16(a), A16(b), n);
  close_bf16("mul_forward", &o, ONE);
  f32->ops->mul_backward(f32, A32(da), A32(db), A32(g), A32(a), A32(b), n);
  b16->ops->mul_backward(b16, A16(da), A16(db), A16(g), A16(a), A16(b), n);
  close_bf16("mul_backward da", &da, ONE), close_bf16("mul_backward db", &db, ONE);
  f32->ops->silu_forward(f32, A32(o), A32(a), n), b16->ops->silu_forward(b16, A16(o), A16(a), n);
  close_bf16("silu_forward", &o, ONE);
  f32->ops->silu_backward(f32, A32(da), A32(g), A32(a), n), b16->ops->silu_backward(b16, A16(da), A16(g), A16(a), n);
  close_bf16("silu_backward", &da, ONE);
  drop(&a), drop(&b), drop(&g), drop(&o), drop(&da), drop(&db);
}

Test(ops_bf16, linear_and_embedding) {
  const int N = 33, Cin = 40, Cout = 24, V = 50;
  pair in = make((size_t)N * Cin, -1, 1), W = make((size_t)Cout * Cin, -1, 1), out = zeros((size_t)N * Cout);
  pair dout = make((size_t)N * Cout, -1, 1), din = zeros((size_t)N * Cin);
  float *dW32 = calloc((size_t)Cout * Cin, 4), *dW16 = calloc((size_t)Cout * Cin, 4);
  f32->ops->linear_forward(f32, A32(out), A32(in), A32(W), N, Cin, Cout);
  b16->ops->linear_forward(b16, A16(out), A16(in), A16(W), N, Cin, Cout);
  close_bf16("linear_forward", &out, ONE);
  f32->ops->linear_backward(f32, A32(din), dW32, A32(dout), A32(in), A32(W), N, Cin, Cout);
  b16->ops->linear_backward(b16, A16(din), dW16, A16(dout), A16(in), A16(W), N, Cin, Cout);
  close_bf16("linear_backward din", &din, ONE);
  close_f32("linear_backward dW", dW32, dW16, (size_t)Cout * Cin, 1e-5);
  int32_t tok[33];
  for (int i = 0; i < N; i++) tok[i] = (int32_t)(urand(0, 1) * V) % V;
  pair wte = make((size_t)V * Cin, -1, 1), e = zeros((size_t)N * Cin);
  f32->ops->embedding_forward(f32, A32(e), tok, A32(wte), N, V, Cin);
  b16->ops->embedding_forward(b16, A16(e), tok, A16(wte), N, V, Cin);
  close_bf16("embedding_forward", &e, 0); /* a copy */
  float *dwte32 = calloc((size_t)V * Cin, 4), *dwte16 = calloc((size_t)V * Cin, 4);
  f32->ops->embedding_backward(f32, dwte32, A32(in), tok, N, V, Cin);
  b16->ops->embedding_backward(b16, dwte16, A16(in), tok, N, V, Cin);
  close_f32("embedding_backward", dwte32, dwte16, (size_t)V * Cin, 0);
  drop(&in), drop(&W), drop(&out), drop(&dout), drop(&din), drop(&wte), drop(&e);
  free(dW32), free(dW16), free(dwte32), free(dwte16);
}

Test(ops_bf16, norms_and_btp_pieces) {
  const int N = 19, C = 64, w = 24;
  pair x = make((size_t)N * C, -2, 2), g = make((size_t)C, 0.5f, 1.5f), o = zeros((size_t)N * C);
  pair dout = make((size_t)N * C, -1, 1), dx = zeros((size_t)N * C);
  float r32[19], r16[19], dg32[64] = {0}, dg16[64] = {0};
  f32->ops->rmsnorm_forward(f32, A32(o), r32, A32(x), A32(g), N, C, 1e-5f);
  b16->ops->rmsnorm_forward(b16, A16(o), r16, A16(x), A16(g), N, C, 1e-5f);
  close_bf16("rmsnorm_forward", &o, ONE);
  close_f32("rmsnorm_forward rstd", r32, r16, N, 1e-6);
  f32->ops->rmsnorm_backward(f32, A32(dx), dg32, A32(dout), A32(x), A32(g), r32, N, C);
  b16->ops->rmsnorm_backward(b16, A16(dx), dg16, A16(dout), A16(x), A16(g), r32, N, C);
  close_bf16("rmsnorm_backward dx", &dx, TWO);
  close_f32("rmsnorm_backward dw", dg32, dg16, C, 1e-5);
  float ss32[19], ss16[19];
  f32->ops->gain_sumsq_forward(f32, A32(o), ss32, A32(x), A32(g), N, C);
  b16->ops->gain_sumsq_forward(b16, A16(o), ss16, A16(x), A16(g), N, C);
  close_bf16("gain_sumsq_forward", &o, ONE);
  close_f32("gain_sumsq_forward ss", ss32, ss16, N, 1e-6);
  pair acc = make((size_t)N * C, -1, 1);
  float dss[19];
  for (int i = 0; i < N; i++) dss[i] = urand(-0.1f, 0.1f);
  f32->ops->gain_sumsq_backward(f32, A32(acc), dg32, A32(dout), A32(x), A32(g), dss, N, C);
  b16->ops->gain_sumsq_backward(b16, A16(acc), dg16, A16(dout), A16(x), A16(g), dss, N, C);
  close_bf16("gain_sumsq_backward", &acc, TWO);
  close_f32("gain_sumsq_backward dgain", dg32, dg16, C, 1e-5);
  pair h = make((size_t)N * w, -2, 2), dh = make((size_t)N * w, -1, 1);
  float rs32[19], rs16[19], d32[19], d16[19];
  f32->ops->online_rms_forward(f32, A32(h), rs32, ss32, N, w, 1.0f / C, 1e-5f);
  b16->ops->online_rms_forward(b16, A16(h), rs16, ss32, N, w, 1.0f / C, 1e-5f);
  close_bf16("online_rms_forward", &h, ONE);
  f32->ops->online_rms_backward(f32, A32(dh), d32, A32(h), rs32, N, w, 1.0f / C);
  b16->ops->online_rms_backward(b16, A16(dh), d16, A16(h), rs32, N, w, 1.0f / C);
  close_bf16("online_rms_backward", &dh, TWO);
  close_f32("online_rms_backward dss", d32, d16, N, TWO);
  drop(&x), drop(&g), drop(&o), drop(&dout), drop(&dx), drop(&acc), drop(&h), drop(&dh);
}

Test(ops_bf16, rope_and_attention) {
  const int B = 2, T = 37, H = 3, hd = 16;
  const size_t n = (size_t)B * T * H * hd;
  float *cs = calloc((size_t)T * hd / 2, 4), *sn = calloc((size_t)T * hd / 2, 4);
  f32->ops->rope_tables(f32, cs, sn, T, hd, 10000.0f);
  pair q = make(n, -2, 2), k = make(n, -2, 2), v = make(n, -1, 1), o = zeros(n), dout = make(n, -1, 1);
  pair dq = zeros(n), dk = zeros(n), dv = zeros(n);
  f32->ops->rope_forward(f32, A32(o), A32(q), cs, sn, B, T, H, hd);
  b16->ops->rope_forward(b16, A16(o), A16(q), cs, sn, B, T, H, hd);
  close_bf16("rope_forward", &o, ONE);
  f32->ops->rope_backward(f32, A32(o), A32(q), cs, sn, B, T, H, hd);
  b16->ops->rope_backward(b16, A16(o), A16(q), cs, sn, B, T, H, hd);
  close_bf16("rope_backward", &o, ONE);
  const size_t sb = f32->ops->attention_scratch_bytes(f32, B, T, H);
  void *s32 = calloc(sb, 1), *s16 = calloc(b16->ops->attention_scratch_bytes(b16, B, T, H), 1);
  float *st32 = calloc((size_t)B * H * T * 2, 4), *st16 = calloc((size_t)B * H * T * 2, 4);
  f32->ops->attention_forward(f32, A32(o), st32, s32, A32(q), A32(k), A32(v), B, T, H, hd);
  b16->ops->attention_forward(b16, A16(o), st16, s16, A16(q), A16(k), A16(v), B, T, H, hd);
  close_bf16("attention_forward", &o, ONE);
  close_f32("attention_forward stats", st32, st16, (size_t)B * H * T * 2, 1e-5);
  f32->ops->attention_backward(f32, A32(dq), A32(dk), A32(dv), s32, A32(dout), A32(q), A32(k), A32(v), st32, B, T, H,
                               hd);
  b16->ops->attention_backward(b16, A16(dq), A16(dk), A16(dv), s16, A16(dout), A16(q), A16(k), A16(v), st16, B, T, H,
                               hd);
  close_bf16("attention_backward dq", &dq, TWO), close_bf16("attention_backward dk", &dk, TWO);
  close_bf16("attention_backward dv", &dv, TWO);
  drop(&q), drop(&k), drop(&v), drop(&o), drop(&dout), drop(&dq), drop(&dk), drop(&dv);
  free(cs), free(sn), free(s32), free(s16), free(st32), free(st16);
}

/* Attention over several row blocks with a ragged last one (T = 300:
 * blocks of 128), on bf16 GEMMs when B*H covers the threads and on the
 * widened fp32 kernel when it does not (B*H = 1); each bf16 result is also
 * repeatable bit for bit. */
static void attention_case(int B, int T, int H, int hd) {
  const size_t n = (size_t)B * T * H * hd, ns = (size_t)B * H * T * 2;
  pair q = make(n, -2, 2), k = make(n, -2, 2), v = make(n, -1, 1), o = zeros(n), dout = make(n, -1, 1);
  pair dq = zeros(n), dk = zeros(n), dv = zeros(n);
  void *s32 = calloc(f32->ops->attention_scratch_bytes(f32, B, T, H), 1);
  void *s16 = calloc(b16->ops->attention_scratch_bytes(b16, B, T, H), 1);
  float *st32 = calloc(ns, 4), *st16 = calloc(ns, 4);
  bf16_t *again = calloc(n, sizeof *again);
  f32->ops->attention_forward(f32, A32(o), st32, s32, A32(q), A32(k), A32(v), B, T, H, hd);
  b16->ops->attention_forward(b16, A16(o), st16, s16, A16(q), A16(k), A16(v), B, T, H, hd);
  close_bf16("attention_forward (blocks)", &o, ONE);
  close_f32("attention_forward stats (blocks)", st32, st16, ns, 1e-5);
  b16->ops->attention_forward(b16, (boost_act *)again, st16, s16, A16(q), A16(k), A16(v), B, T, H, hd);
  cr_expect(memcmp(again, o.b, n * sizeof *again) == 0, "attention_forward is not repeatable (B=%d H=%d)", B, H);
  f32->ops->attention_backward(f32, A32(dq), A32(dk), A32(dv), s32, A32(dout), A32(q), A32(k), A32(v), st32, B, T, H,
                               hd);
  b16->ops->attention_backward(b16, A16(dq), A16(dk), A16(dv), s16, A16(dout), A16(q), A16(k), A16(v), st16, B, T, H,
                               hd);
  close_bf16("attention_backward dq (blocks)", &dq, TWO), close_bf16("attention_backward dk (blocks)", &dk, TWO);
  close_bf16("attention_backward dv (blocks)", &dv, TWO);
  b16->ops->attention_backward(b16, NULL, (boost_act *)again, NULL, s16, A16(dout), A16(q), A16(k), A16(v), st16, B, T,
                               H, hd);
  cr_expect(memcmp(again, dk.b, n * sizeof *again) == 0, "attention_backward dk alone differs (B=%d H=%d)", B, H);
  drop(&q), drop(&k), drop(&v), drop(&o), drop(&dout), drop(&dq), drop(&dk), drop(&dv);
  free(s32), free(s16), free(st32), free(st16), free(again);
}

Test(ops_bf16, attention_blocks_and_tails) {
  attention_case(2, 300, 2, 16); /* 4 slices: the bf16 GEMM kernel where the CPU has bf16 instructions */
  attention_case(1, 300, 1, 16); /* 1 slice: the widened fp32 kernel */
}

Test(ops_bf16, cross_entropy_fused_and_vocab_parallel) {
  const int N = 13, V = 1037;
  pair lg = make((size_t)N * V, -6, 6), d = zeros((size_t)N * V);
  int32_t tg[13];
  for (int i = 0; i < N; i++) tg[i] = (int32_t)(urand(0, 1) * V) % V;
  float l32[13], l16[13], m32[13], m16[13], s32[26], s16[26];
  f32->ops->crossentropy_forward(f32, l32, A32(lg), tg, N, V);
  b16->ops->crossentropy_forward(b16, l16, A16(lg), tg, N, V);
  close_f32("crossentropy_forward losses", l32, l16, N, 1e-5);
  f32->ops->vocab_ce_max(f32, m32, A32(lg), N, V), b16->ops->vocab_ce_max(b16, m16, A16(lg), N, V);
  close_f32("vocab_ce_max", m32, m16, N, 0);
  f32->ops->vocab_ce_sums(f32, s32, A32(lg), m32, tg, 100, N, V);
  b16->ops->vocab_ce_sums(b16, s16, A16(lg), m32, tg, 100, N, V);
  close_f32("vocab_ce_sums", s32, s16, 2 * (size_t)N, 1e-5);
  memcpy(d.f, lg.f, (size_t)N * V * 4), memcpy(d.b, lg.b, (size_t)N * V * 2);
  f32->ops->vocab_ce_backward(f32, A32(d), s32, m32, tg, 100, N, V, 0.25f);
  b16->ops->vocab_ce_backward(b16, A16(d), s32, m32, tg, 100, N, V, 0.25f);
  close_bf16("vocab_ce_backward", &d, ONE);
  /* in place, losses from the same pass */
  f32->ops->crossentropy_backward(f32, A32(lg), l32, A32(lg), tg, N, V, 0.5f);
  b16->ops->crossentropy_backward(b16, A16(lg), l16, A16(lg), tg, N, V, 0.5f);
  close_bf16("crossentropy_backward (in place)", &lg, ONE);
  close_f32("crossentropy_backward losses", l32, l16, N, 1e-5);
  drop(&lg), drop(&d);
}

Test(ops_bf16, adamw_updates_masters_as_fp32_and_rounds_the_working_copy) {
  const size_t n = 5000;
  boost_segment segs[2] = {{0, 3000, BOOST_SEG_DECAY | BOOST_SEG_NORM}, {3008, 1992, BOOST_SEG_NORM}};
  boost_optim_plan *p32 = f32->ops->optim_plan_create(f32, segs, 2, 0, n), *p16 = b16->ops->optim_plan_create(b16, segs, 2, 0, n);
  pair w = make(n, -1, 1), gr = make(n, -1, 1);
  float *w2 = calloc(n, 4), *m1 = calloc(n, 4), *v1 = calloc(n, 4), *m2 = calloc(n, 4), *v2 = calloc(n, 4);
  memcpy(w2, w.f, n * 4);
  const adamw_hparams hp = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  f32->ops->adamw(f32, p32, w.f, gr.f, m1, v1, NULL, hp, 3, 0.7f);
  b16->ops->adamw(b16, p16, w2, gr.f, m2, v2, A16(w), hp, 3, 0.7f);
  cr_expect(memcmp(w.f, w2, n * 4) == 0 && memcmp(m1, m2, n * 4) == 0 && memcmp(v1, v2, n * 4) == 0,
            "the masters and moments must be the fp32 update bit for bit");
  for (size_t i = 0; i < n; i++)
    if (i < 3000 || i >= 3008) cr_expect_eq(w.b[i], f32_to_bf16(w2[i]), "working copy [%zu] not the rounded master", i);
  double s32 = 0, s16 = 0;
  f32->ops->grad_sumsq(f32, p32, gr.f, &s32), b16->ops->grad_sumsq(b16, p16, gr.f, &s16);
  cr_expect(s32 == s16 && s32 > 0, "grad_sumsq %.17g vs %.17g", s32, s16);
  f32->ops->optim_plan_free(f32, p32), b16->ops->optim_plan_free(b16, p16);
  drop(&w), drop(&gr), free(w2), free(m1), free(v1), free(m2), free(v2);
}

Test(ops_bf16, conversions_round_to_nearest_even) {
  const float src[6] = {1.0f, 1.00390625f /* tie: down to even */, 1.01171875f /* tie: up to even */, -3.5f,
                        INFINITY, 65504.0f};
  bf16_t b[6];
  float back[6];
  b16->ops->to_act(b16, (boost_act *)b, src, 6);
  b16->ops->to_f32(b16, back, (const boost_act *)b, 6);
  cr_expect(back[0] == 1.0f && back[1] == 1.0f && back[2] == 1.015625f && back[3] == -3.5f && isinf(back[4]),
            "rounding: %g %g %g %g %g", back[0], back[1], back[2], back[3], back[4]);
  cr_expect(back[5] == 65536.0f, "65504 rounds to 65536 in bf16, got %g", back[5]);
}
