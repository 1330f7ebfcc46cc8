/* Unit tests of the CPU kernels (kernels/cpu/ops.h) beyond gradients and
 * forward references (test_ops_grad.c, test_ops_fwd.c): special values and
 * stability, in-place use, the optimizer against a hand-computed
 * reference, gradient accumulation, bitwise determinism and the use of
 * every thread. Sizes are small and odd. */
#include "ops_testkit.h"

#include "bf16.h"

TestSuite(ops_special, .init = two_threads);
TestSuite(ops_optim, .init = two_threads);
TestSuite(ops_accum, .init = two_threads);
TestSuite(ops_determinism, .init = two_threads);
TestSuite(ops_threads, .init = two_threads);

/* ================================================== special values/stability */

Test(ops_special, silu_extremes) {
  float x[] = {-1e4f, -100.0f, -88.9f, -20.0f, 0.0f, 20.0f, 100.0f, 1e4f};
  enum { n = sizeof x / sizeof x[0] };
  float y[n], dx[n], ones[n];
  for (int i = 0; i < n; i++) ones[i] = 1.0f;
  kern_silu_forward(y, x, n);
  kern_silu_backward(dx, ones, x, n);
  for (int i = 0; i < n; i++) {
    double ref = silu_d(x[i]);
    double s = 1.0 / (1.0 + exp(-(double)x[i]));
    double dref = s * (1.0 + x[i] * (1.0 - s));
    cr_assert(isfinite(y[i]) && isfinite(dx[i]), "silu(%g) = %g, silu'(%g) = %g must be finite", x[i], y[i], x[i],
              dx[i]);
    cr_assert(fabs(y[i] - ref) <= 1e-6 * (1 + fabs(ref)), "silu(%g) = %.8g, expected %.8g", x[i], y[i], ref);
    cr_assert(fabs(dx[i] - dref) <= 1e-6, "silu'(%g) = %.8g, expected %.8g", x[i], dx[i], dref);
  }
  /* dense sweep vs double: the vectorised exp inside stays within ~2 ulp
   * (measured max 1.75e-7 rel); tol 3e-7 rel */
  enum { M = 20001 };
  float *xs = falloc(M), *ys = falloc(M);
  for (int i = 0; i < M; i++) xs[i] = -87.0f + 137.0f * i / (M - 1);
  kern_silu_forward(ys, xs, M);
  for (int i = 0; i < M; i++) {
    double ref = silu_d(xs[i]);
    cr_assert(fabs(ys[i] - ref) <= 3e-7 * fabs(ref) + 1e-37, "silu(%.7g) = %.9g, double gives %.9g (tol 3e-7 rel)",
              xs[i], ys[i], ref);
  }
  free(xs), free(ys);
}

Test(ops_special, crossentropy_huge_logits) {
  enum { N = 4, V = 6 };
  const float L = 1e4f;
  float logits[N * V] = {
      L,  -L, L,  0,  -L, 5,  /* two maxima, target at one */
      L,  -L, L,  0,  -L, 5,  /* target at -1e4 */
      -L, -L, -L, -L, -L, -L, /* all equal, very negative */
      3,  -L, 2,  L,  1,  0,  /* one dominant maximum */
  };
  const int32_t tgt[N] = {0, 1, 3, 3};
  const double ref[N] = {log(2.0), 2.0 * L + log(2.0), log(6.0), 0.0};
  float losses[N], dl[N * V], l2[N];
  kern_crossentropy_forward(losses, logits, tgt, N, V);
  const float dloss = 0.5f;
  kern_crossentropy_backward(dl, l2, logits, tgt, N, V, dloss);
  for (int n = 0; n < N; n++) {
    cr_assert(isfinite(losses[n]) && isfinite(l2[n]), "crossentropy loss[%d] not finite with logits +-1e4", n);
    /* fp32 at 2e4 has ulp 2e-3: tol 1e-6 + 1e-6 rel */
    cr_assert(fabs(losses[n] - ref[n]) <= 1e-6 + 1e-6 * ref[n], "loss[%d] = %.9g, expected %.9g", n, losses[n], ref[n]);
    cr_assert(fabs(l2[n] - ref[n]) <= 1e-6 + 1e-6 * ref[n], "backward loss[%d] = %.9g, expected %.9g", n, l2[n],
              ref[n]);
  }
  /* exact softmax for these rows: 1/2 at the two maxima, 1/6 everywhere, 1 */
  double p[N * V] = {0};
  p[0 * V + 0] = p[0 * V + 2] = 0.5;
  p[1 * V + 0] = p[1 * V + 2] = 0.5;
  for (int v = 0; v < V; v++) p[2 * V + v] = 1.0 / 6;
  p[3 * V + 3] = 1.0;
  for (int n = 0; n < N; n++)
    for (int v = 0; v < V; v++) {
      double want = (p[n * V + v] - (v == tgt[n])) * dloss;
      cr_assert(isfinite(dl[n * V + v]) && fabs(dl[n * V + v] - want) <= 1e-7,
                "dlogits[%d][%d] = %.9g, expected %.9g (logits +-1e4)", n, v, dl[n * V + v], want);
    }
}

Test(ops_special, crossentropy_in_place) {
  rng_seed(41);
  enum { N = 7, V = 333 };
  int32_t tgt[N];
  for (int n = 0; n < N; n++) tgt[n] = (int32_t)(rng_u01() * V);
  float *logits = frand(N * V, -20, 20), *dl = fnan(N * V), *l1 = fnan(N), *l2 = fnan(N);
  kern_crossentropy_backward(dl, l1, logits, tgt, N, V, 1.0f / N);
  float *buf = fcopy(logits, N * V);
  kern_crossentropy_backward(buf, l2, buf, tgt, N, V, 1.0f / N);
  assert_bitwise("crossentropy_backward in place vs out of place (dlogits)", buf, dl, sizeof(float) * N * V);
  assert_bitwise("crossentropy_backward in place vs out of place (losses)", l1, l2, sizeof(float) * N);
  /* losses may be NULL */
  float *dl3 = fnan(N * V);
  kern_crossentropy_backward(dl3, NULL, logits, tgt, N, V, 1.0f / N);
  assert_bitwise("crossentropy_backward with losses NULL", dl3, dl, sizeof(float) * N * V);
  /* each gradient row sums to 0 (softmax sums to 1) */
  for (int n = 0; n < N; n++) {
    double s = 0;
    for (int v = 0; v < V; v++) s += dl[n * V + v];
    cr_assert(fabs(s) <= 1e-6, "dlogits row %d sums to %g, expected 0", n, s);
  }
  free(logits), free(dl), free(l1), free(l2), free(buf), free(dl3);
}

Test(ops_special, softmax_probability_accuracy) {
  /* rows [0, x]: p1 = e^x / (1 + e^x) exposes the relative error of the
   * vectorised exp over x in [-87, 0] (measured max 1.8e-7); tol 3e-7 rel */
  enum { M = 20001 };
  float *lg = falloc(2 * M), *dl = falloc(2 * M);
  int32_t *tgt = malloc(sizeof(int32_t) * M);
  for (int i = 0; i < M; i++) {
    lg[2 * i] = 0.0f;
    lg[2 * i + 1] = -87.0f * i / (M - 1);
    tgt[i] = 0;
  }
  kern_crossentropy_backward(dl, NULL, lg, tgt, M, 2, 1.0f);
  for (int i = 0; i < M; i++) {
    double e = exp((double)lg[2 * i + 1]), p = e / (1 + e);
    cr_assert(fabs(dl[2 * i + 1] - p) <= 3e-7 * p, "softmax([0, %.7g])[1] = %.9g, double gives %.9g (tol 3e-7 rel)",
              lg[2 * i + 1], dl[2 * i + 1], p);
  }
  free(lg), free(dl), free(tgt);
}

/* ================================================================ adamw */

Test(ops_optim, adamw_two_steps_reference) {
  enum { n = 5 };
  adamw_hparams hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  const float gscale = 0.5f;
  float p[n] = {0.5f, -1.0f, 2.0f, 0.0f, 0.25f};
  float g1[n] = {0.2f, -0.4f, 1.0f, 0.0f, 3.0f};
  float g2[n] = {-0.6f, 0.8f, 0.0f, 0.1f, 1.0f};
  float m[n] = {0}, v[n] = {0};
  double P[n], M[n] = {0}, Vv[n] = {0};
  for (int i = 0; i < n; i++) P[i] = p[i];
  for (int t = 1; t <= 2; t++) {
    const float *g = t == 1 ? g1 : g2;
    kern_adamw_update(p, g, m, v, n, hp, t, gscale);
    /* hand-computed: decoupled decay, bias corrections 1 - beta^t */
    double b1 = hp.beta1, b2 = hp.beta2, bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    for (int i = 0; i < n; i++) {
      double gi = (double)g[i] * gscale;
      M[i] = b1 * M[i] + (1 - b1) * gi;
      Vv[i] = b2 * Vv[i] + (1 - b2) * gi * gi;
      double upd = (M[i] / bc1) / (sqrt(Vv[i] / bc2) + hp.eps) + (double)hp.weight_decay * P[i];
      P[i] -= (double)hp.lr * upd;
      cr_assert(fabs(m[i] - M[i]) <= 1e-7 + 1e-6 * fabs(M[i]), "adamw step %d m[%d] = %.9g, expected %.9g", t, i, m[i],
                M[i]);
      cr_assert(fabs(v[i] - Vv[i]) <= 1e-9 + 1e-6 * fabs(Vv[i]), "adamw step %d v[%d] = %.9g, expected %.9g", t, i,
                v[i], Vv[i]);
      cr_assert(fabs(p[i] - P[i]) <= 1e-6 * (1 + fabs(P[i])), "adamw step %d param[%d] = %.9g, expected %.9g", t, i,
                p[i], P[i]);
    }
    if (t == 1) {
      /* bias-corrected first step moves every param with g != 0 by about
       * lr * sign(g) plus decay; with g = 0 only the decay acts */
      cr_assert(fabs(p[0] - (0.5 - 0.01 * (1.0 + 0.1 * 0.5))) <= 1e-6, "adamw step 1 param[0] = %.9g", p[0]);
      cr_assert(fabs(p[1] - (-1.0 - 0.01 * (-1.0 + 0.1 * -1.0))) <= 1e-6, "adamw step 1 param[1] = %.9g", p[1]);
      cr_assert(p[3] == 0.0f, "adamw: zero param with zero grad stays 0, got %g", p[3]);
    }
  }
  /* decay only: g = 0 from zero moments -> p *= (1 - lr*wd) */
  float q[1] = {3.0f}, z[1] = {0.0f}, mq[1] = {0}, vq[1] = {0};
  kern_adamw_update(q, z, mq, vq, 1, hp, 1, 1.0f);
  cr_assert(fabs(q[0] - 3.0 * (1 - 0.01 * 0.1)) <= 1e-6, "adamw decay-only step gave %.9g, expected %.9g", q[0],
            3.0 * (1 - 0.01 * 0.1));
  /* weight_decay 0: no decay */
  hp.weight_decay = 0.0f;
  q[0] = 3.0f;
  kern_adamw_update(q, z, mq, vq, 1, hp, 2, 1.0f);
  cr_assert(q[0] == 3.0f, "adamw with wd 0 and zero grad must not move the param, got %.9g", q[0]);
}

Test(ops_optim, adamw_large_matches_small) {
  /* the OpenMP path (n >= 16Ki) gives the same per-element result */
  rng_seed(42);
  size_t n = 100003;
  adamw_hparams hp = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
  float *p = frand(n, -1, 1), *g = frand(n, -1, 1), *m = frand(n, -0.1f, 0.1f), *v = frand(n, 0, 0.01f);
  float *p2 = fcopy(p, n), *m2 = fcopy(m, n), *v2 = fcopy(v, n);
  kern_adamw_update(p, g, m, v, n, hp, 7, 0.8f);
  for (size_t i = 0; i < n; i += 997) kern_adamw_update(p2 + i, g + i, m2 + i, v2 + i, 1, hp, 7, 0.8f);
  for (size_t i = 0; i < n; i += 997)
    cr_assert(p[i] == p2[i] && m[i] == m2[i] && v[i] == v2[i], "adamw element %zu differs between n=%zu and n=1", i, n);
  free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
}

Test(ops_optim, adamw_round_is_the_update_and_its_rounding) {
  /* the fused bf16 rounding: the masters and moments of adamw_update, and
   * work = bf16.h's rounding of each new master (vector body and tail),
   * including values that round across a power of two and tiny ones */
  rng_seed(43);
  size_t n = 100003;
  adamw_hparams hp = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
  float *p = frand(n, -1, 1), *g = frand(n, -1, 1), *m = frand(n, -0.1f, 0.1f), *v = frand(n, 0, 0.01f);
  for (size_t i = 0; i < n; i += 101) p[i] = (i & 1) ? 1.9999999f : 1e-39f;
  float *p2 = fcopy(p, n), *m2 = fcopy(m, n), *v2 = fcopy(v, n);
  uint16_t *work = malloc(n * sizeof *work);
  cr_assert_not_null(work);
  kern_adamw_update(p, g, m, v, n, hp, 5, 0.9f);
  kern_adamw_update_round(p2, g, m2, v2, work, n, hp, 5, 0.9f);
  cr_assert(memcmp(p, p2, n * 4) == 0 && memcmp(m, m2, n * 4) == 0 && memcmp(v, v2, n * 4) == 0,
            "adamw_update_round changed the fp32 update");
  for (size_t i = 0; i < n; i++)
    cr_assert(work[i] == f32_to_bf16(p[i]), "work[%zu] = 0x%04x, the rounding of %.9g is 0x%04x", i, work[i], p[i],
              f32_to_bf16(p[i]));
  free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2), free(work);
}

Test(ops_optim, sum_squares_and_clip) {
  float small[] = {1, -2, 3, 0.5f, -0.25f, 7, 1e-3f};
  double want = 1 + 4 + 9 + 0.25 + 0.0625 + 49 + (double)1e-3f * (double)1e-3f;
  double got = kern_sum_squares(small, 7);
  cr_assert(fabs(got - want) <= 1e-12 * want, "sum_squares small = %.17g, expected %.17g", got, want);
  cr_assert(kern_sum_squares(small, 0) == 0.0, "sum_squares of nothing must be 0");

  rng_seed(43);
  size_t n = 1000003; /* many 64Ki blocks plus a tail */
  float *x = frand(n, -3, 3);
  long double ref = 0;
  for (size_t i = 0; i < n; i++) ref += (long double)x[i] * x[i];
  double s1 = kern_sum_squares(x, n), s2 = kern_sum_squares(x, n);
  cr_assert(fabs(s1 - (double)ref) <= 1e-12 * (double)ref, "sum_squares = %.17g, reference %.17g (tol 1e-12 rel)", s1,
            (double)ref);
  cr_assert(memcmp(&s1, &s2, sizeof s1) == 0, "sum_squares not deterministic: %.17g vs %.17g", s1, s2);
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  double s3 = kern_sum_squares(x, n);
  omp_set_num_threads(3);
  double s4 = kern_sum_squares(x, n);
  omp_set_num_threads(nt);
  cr_assert(memcmp(&s1, &s3, sizeof s1) == 0 && memcmp(&s1, &s4, sizeof s1) == 0,
            "sum_squares depends on the thread count: %.17g (default) %.17g (1) %.17g (3)", s1, s3, s4);

  float *y = fcopy(x, n);
  kern_scale_inplace(y, n, 0.3f);
  for (size_t i = 0; i < n; i += 101) cr_assert(y[i] == x[i] * 0.3f, "scale_inplace[%zu] = %g", i, y[i]);

  cr_assert(boost_clip_scale(10.0, 1.0f) == 0.1f, "boost_clip_scale(10, 1) = %g, expected 0.1", boost_clip_scale(10.0, 1.0f));
  cr_assert(boost_clip_scale(0.5, 1.0f) == 1.0f, "clip_scale below the max must be 1");
  cr_assert(boost_clip_scale(1.0, 1.0f) == 1.0f, "clip_scale at the max must be 1");
  cr_assert(boost_clip_scale(0.0, 1.0f) == 1.0f, "clip_scale of a zero norm must be 1");
  cr_assert(boost_clip_scale(10.0, 0.0f) == 1.0f && boost_clip_scale(10.0, -1.0f) == 1.0f, "clip_scale with max_norm <= 0 is 1");
  cr_assert(fabsf(boost_clip_scale(3.0, 2.0f) - 2.0f / 3.0f) <= 1e-7f, "boost_clip_scale(3, 2) = %.9g", boost_clip_scale(3.0, 2.0f));
  /* a full clip round trip: the scaled gradient has norm max_norm */
  float g[] = {3, 4};
  float s = boost_clip_scale(sqrt(kern_sum_squares(g, 2)), 1.0f);
  kern_scale_inplace(g, 2, s);
  cr_assert(fabs(sqrt(kern_sum_squares(g, 2)) - 1.0) <= 1e-6, "clipped norm = %.9g, expected 1", sqrt(kern_sum_squares(g, 2)));
  free(x), free(y);
}

/* ============================================ parameter-grad accumulation */

static void assert_doubled(const char *what, const float *once, const float *twice, size_t n) {
  double gmax = 0;
  for (size_t i = 0; i < n; i++) {
    cr_assert(fabsf(twice[i] - 2.0f * once[i]) <= 1e-6f * (1 + fabsf(once[i])),
              "%s[%zu]: after two backward calls %.9g, expected twice %.9g", what, i, twice[i], once[i]);
    if (fabsf(once[i]) > gmax) gmax = fabsf(once[i]);
  }
  cr_assert(gmax > 0, "%s: gradient is all zero", what);
}

Test(ops_accum, backward_twice_doubles_param_grads) {
  rng_seed(51);
  enum { N = 9, C = 7, V = 11, Cin = 7, Cout = 5, r = 3 };
  /* embedding */
  int32_t tok[N] = {1, 4, 4, 0, 10, 1, 1, 3, 9};
  float *dout = frand(N * C, -1, 1);
  float *e1 = calloc(V * C, sizeof(float)), *e2 = calloc(V * C, sizeof(float));
  kern_embedding_backward(e1, dout, tok, N, V, C);
  kern_embedding_backward(e2, dout, tok, N, V, C);
  kern_embedding_backward(e2, dout, tok, N, V, C);
  assert_doubled("embedding dwte", e1, e2, V * C);
  /* rmsnorm */
  float *x = frand(N * C, -1, 1), *w = frand(C, 0.5f, 1.5f), *out = falloc(N * C), *rstd = falloc(N);
  kern_rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  float *w1 = calloc(C, sizeof(float)), *w2 = calloc(C, sizeof(float)), *dx = falloc(N * C);
  kern_rmsnorm_backward(dx, w1, dout, x, w, rstd, N, C);
  kern_rmsnorm_backward(dx, w2, dout, x, w, rstd, N, C);
  kern_rmsnorm_backward(dx, w2, dout, x, w, rstd, N, C);
  assert_doubled("rmsnorm dw", w1, w2, C);
  /* linear */
  float *in = frand(N * Cin, -1, 1), *W = frand(Cout * Cin, -1, 1), *dy = frand(N * Cout, -1, 1);
  float *din = falloc(N * Cin), *W1 = calloc(Cout * Cin, sizeof(float)), *W2 = calloc(Cout * Cin, sizeof(float));
  kern_linear_backward(din, W1, dy, in, W, N, Cin, Cout);
  kern_linear_backward(din, W2, dy, in, W, N, Cin, Cout);
  kern_linear_backward(din, W2, dy, in, W, N, Cin, Cout);
  assert_doubled("linear dW", W1, W2, Cout * Cin);
  free(dout), free(e1), free(e2), free(x), free(w), free(out), free(rstd), free(w1), free(w2), free(dx);
  free(in), free(W), free(dy), free(din), free(W1), free(W2);
}

/* =========================================================== determinism */

/* Sizes large enough that every OpenMP path engages (>= 16Ki elements). */
Test(ops_determinism, two_calls_bitwise_equal) {
  rng_seed(61);
  /* attention: B*H = 6 slices, T = 200 crosses a row block */
  enum { B = 2, T = 200, H = 3, hd = 16 };
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * 2;
  float *q = frand(n, -2, 2), *k = frand(n, -2, 2), *v = frand(n, -1, 1), *dout = frand(n, -1, 1);
  float *o1 = falloc(n), *o2 = falloc(n), *a1 = falloc(na), *a2 = falloc(na), *scr = falloc(kern_attention_scratch_floats(B, T, H));
  float *dq1 = falloc(n), *dk1 = falloc(n), *dv1 = falloc(n), *dq2 = falloc(n), *dk2 = falloc(n), *dv2 = falloc(n);
  kern_attention_forward(o1, a1, scr, q, k, v, B, T, H, hd);
  kern_attention_backward(dq1, dk1, dv1, scr, dout, q, k, v, a1, B, T, H, hd);
  kern_attention_forward(o2, a2, scr, q, k, v, B, T, H, hd);
  kern_attention_backward(dq2, dk2, dv2, scr, dout, q, k, v, a2, B, T, H, hd);
  assert_bitwise("attention out", o1, o2, n * sizeof(float));
  assert_bitwise("attention att", a1, a2, na * sizeof(float));
  assert_bitwise("attention dq", dq1, dq2, n * sizeof(float));
  assert_bitwise("attention dk", dk1, dk2, n * sizeof(float));
  assert_bitwise("attention dv", dv1, dv2, n * sizeof(float));

  /* crossentropy */
  enum { NC = 40, VC = 1001 };
  int32_t tgt[NC];
  for (int i = 0; i < NC; i++) tgt[i] = (int32_t)(rng_u01() * VC);
  float *logits = frand(NC * VC, -10, 10), *g1 = falloc(NC * VC), *g2 = falloc(NC * VC), *l1 = falloc(NC),
        *l2 = falloc(NC);
  kern_crossentropy_backward(g1, l1, logits, tgt, NC, VC, 0.1f);
  kern_crossentropy_backward(g2, l2, logits, tgt, NC, VC, 0.1f);
  assert_bitwise("crossentropy dlogits", g1, g2, sizeof(float) * NC * VC);
  assert_bitwise("crossentropy losses", l1, l2, sizeof(float) * NC);

  free(q), free(k), free(v), free(dout), free(o1), free(o2), free(a1), free(a2), free(scr);
  free(dq1), free(dk1), free(dv1), free(dq2), free(dk2), free(dv2);
  free(logits), free(g1), free(g2), free(l1), free(l2);
}

/* The scatter/column reductions sum in token order whatever the thread
 * count: embedding and rmsnorm parameter grads do not depend on it. */
Test(ops_determinism, reductions_independent_of_thread_count) {
  rng_seed(62);
  enum { N = 3001, V = 37, C = 72 };
  int32_t *tok = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) tok[i] = (int32_t)(rng_u01() * V);
  float *dout = frand((size_t)N * C, -1, 1), *x = frand((size_t)N * C, -1, 1), *w = frand(C, 0.5f, 1.5f);
  float *out = falloc((size_t)N * C), *rstd = falloc(N), *dx = falloc((size_t)N * C);
  kern_rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  int nts[3] = {omp_get_max_threads(), 1, 3};
  float *emb[3], *dw[3];
  for (int t = 0; t < 3; t++) {
    omp_set_num_threads(nts[t]);
    emb[t] = calloc((size_t)V * C, sizeof(float));
    dw[t] = calloc(C, sizeof(float));
    kern_embedding_backward(emb[t], dout, tok, N, V, C);
    kern_rmsnorm_backward(dx, dw[t], dout, x, w, rstd, N, C);
  }
  omp_set_num_threads(nts[0]);
  for (int t = 1; t < 3; t++) {
    cr_assert(memcmp(emb[0], emb[t], sizeof(float) * V * C) == 0,
              "embedding_backward differs between %d and %d threads", nts[0], nts[t]);
    cr_assert(memcmp(dw[0], dw[t], sizeof(float) * C) == 0, "rmsnorm dw differs between %d and %d threads", nts[0],
              nts[t]);
  }
  /* and it is the sequential token-order sum */
  for (int j = 0; j < C; j += 7) {
    float s = 0;
    for (int i = 0; i < N; i++)
      if (tok[i] == 5) s += dout[(size_t)i * C + j];
    cr_assert(emb[0][5 * C + j] == s, "embedding dwte[5][%d] = %.9g, sequential sum %.9g", j, emb[0][5 * C + j], s);
  }
  for (int t = 0; t < 3; t++) free(emb[t]), free(dw[t]);
  free(tok), free(dout), free(x), free(w), free(out), free(rstd), free(dx);
}

/* ============================================================ threading */

/* The GEMM kernels must spread their work over the OpenMP threads, with
 * either OpenBLAS build, and leave the OpenMP and OpenBLAS thread counts as
 * they found them. (With OpenBLAS's OpenMP build, openblas_set_num_threads(1)
 * also sets the OpenMP thread count: toggling it around a kernel silently
 * ran every GEMM kernel on one thread.) The other threads must do at least a
 * quarter of the calling thread's CPU time. */
/* A decode step's one-row products (M = 1, B transposed): the row kernel
 * with its prefetch (B one block), K tails, a last group of fewer than four
 * rows, beta 1 and strided B against double sums; the same bits on one and
 * two threads (each element is one fixed sum). */
Test(ops_determinism, one_row_products) {
  static const int shapes[][3] = {{1003, 512, 0}, {70, 557, 0}, {70, 557, 9}, {5, 15, 0}, {4099, 1376, 0}};
  rng_seed(17);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int N = shapes[s][0], K = shapes[s][1], ldb = K + shapes[s][2];
    float *a = frand(K, -1, 1), *B = frand((size_t)N * ldb, -1, 1), *c0 = frand(N, -1, 1), *c[2];
    for (int beta = 0; beta <= 1; beta++) {
      for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        c[nt - 1] = fcopy(c0, N);
        kern_gemm(0, 1, 1, N, K, a, K, B, ldb, (float)beta, c[nt - 1], N);
      }
      for (int n = 0; n < N; n++) {
        double ref = beta ? c0[n] : 0.0, mag = fabs(ref);
        for (int k = 0; k < K; k++) {
          const double p = (double)a[k] * B[(size_t)n * ldb + k];
          ref += p;
          mag += fabs(p);
        }
        cr_assert(fabs(c[0][n] - ref) <= (K + 2) * 0x1p-24 * mag + 1e-30,
                  "N=%d K=%d ldb=%d beta=%d: c[%d] = %.9g, double %.9g", N, K, ldb, beta, n, c[0][n], ref);
      }
      cr_assert(memcmp(c[0], c[1], (size_t)N * sizeof(float)) == 0, "N=%d K=%d: one and two threads differ", N, K);
      free(c[0]);
      free(c[1]);
    }
    free(a);
    free(B);
    free(c0);
  }
  omp_set_num_threads(2);
}

Test(ops_threads, gemm_kernels_use_every_thread) {
  int nt = omp_get_max_threads();
  cr_assert(nt >= 2, "the suite init asks for 2 OpenMP threads, have %d", nt);
  int blas_nt = openblas_get_num_threads();
  rng_seed(71);
  enum { N = 512, C = 1024, R = 256, B = 2, T = 256, H = 8, hd = 64 };
  float *x = frand((size_t)N * C, -1, 1), *W = frand((size_t)C * C, -1, 1), *y = falloc((size_t)N * C);
  float *A = frand((size_t)R * C, -1, 1), *hp = falloc((size_t)N * R);
  float *att = falloc((size_t)B * H * T * 2), *scr = falloc(kern_attention_scratch_floats(B, T, H));
#pragma omp parallel
  { /* start the OpenMP workers before measuring */
  }
  const char *names[3] = {"linear_forward", "attention_forward", "gemm"};
  for (int kind = 0; kind < 3; kind++) {
    long s0, o0, s1, o1;
    thread_ticks(&s0, &o0);
    do {
      if (kind == 0) kern_linear_forward(y, x, W, N, C, C);
      if (kind == 1) kern_attention_forward(y, att, scr, x, x + 1, x + 2, B, T, H, hd);
      if (kind == 2) kern_gemm(0, 1, N, R, C, x, C, A, C, 0.0f, hp, R); /* a bottleneck shape */
      thread_ticks(&s1, &o1);
    } while (s1 - s0 < 30);
    long self = s1 - s0, others = o1 - o0;
    if (verbose()) fprintf(stderr, "%s: calling thread %ld ticks, others %ld\n", names[kind], self, others);
    cr_expect(4 * others >= self, "%s ran on one thread: calling thread %ld CPU ticks, the other %d threads %ld",
              names[kind], self, nt - 1, others);
    cr_expect(omp_get_max_threads() == nt, "%s changed the OpenMP thread count from %d to %d", names[kind], nt,
              omp_get_max_threads());
    cr_expect(openblas_get_num_threads() == blas_nt, "%s changed the OpenBLAS thread count from %d to %d", names[kind],
              blas_nt, openblas_get_num_threads());
  }
  free(x), free(W), free(y), free(A), free(hp), free(att), free(scr);
}

/* ============================================================ allocation */

/* boost_calloc: large blocks (the arenas) come 2 MiB-aligned so the kernel
 * can back them with transparent huge pages; every block is zero-filled
 * and small ones stay 64-byte aligned. */
Test(ops_special, allocations_are_aligned_and_zeroed) {
  const size_t sizes[] = {1, 100, BOOST_HUGE_MIN - 4, BOOST_HUGE_MIN, BOOST_HUGE_MIN + 4, (size_t)19 << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    unsigned char *p = boost_calloc(sizes[s], 1);
    const uintptr_t align = sizes[s] >= BOOST_HUGE_MIN ? BOOST_HUGE_PAGE : 64;
    cr_expect((uintptr_t)p % align == 0, "%zu bytes at %p: not aligned to %zu", sizes[s], (void *)p, (size_t)align);
    size_t nonzero = 0;
    for (size_t i = 0; i < sizes[s]; i++) nonzero += p[i] != 0;
    cr_expect_eq(nonzero, 0, "%zu bytes: %zu not zero", sizes[s], nonzero);
    memset(p, 0xab, sizes[s]); /* all of it is writable */
    boost_free(p);
  }
}
