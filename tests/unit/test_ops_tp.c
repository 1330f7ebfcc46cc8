/* Unit tests of the ops the tensor-parallel model composes around its
 * collectives (kernels/cpu/tp_pieces.c, contracts in ops.h): gemm against a
 * naive product for every transpose case, the btp norm pieces
 * (gain_sumsq, online_rms) by central finite differences, the vocab-parallel
 * cross-entropy pieces against the fused single-rank kernel with the logits
 * split over two simulated ranks, and the backend table.
 *
 * Finite-difference checks use L = sum(out * R) for random R in fp32 with
 * eps 1e-2 and |analytic - numeric| <= 2e-2 * (|numeric| + 1e-2), and assert
 * the gradient is not ~0. Accumulating outputs start from random values and
 * are checked as (after - before); assigned outputs start as NaN. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ops.h"

static uint64_t rng = 88172645463325252ull;
static float rnd(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}
static float *frand(size_t n, float lo, float hi) {
  float *p = malloc(n * sizeof *p);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) p[i] = rnd(lo, hi);
  return p;
}
static float *fdup(const float *x, size_t n) {
  float *p = malloc(n * sizeof *p);
  cr_assert_not_null(p);
  memcpy(p, x, n * sizeof *p);
  return p;
}
static double dot(const float *a, const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}
static void expect_fd(double analytic, double numeric, const char *what, size_t i) {
  cr_expect(fabs(analytic - numeric) <= 2e-2 * (fabs(numeric) + 1e-2), "%s[%zu]: analytic %.6g vs numeric %.6g", what,
            i, analytic, numeric);
}

Test(ops_tp, gemm_matches_naive_product_for_every_transpose) {
  const int M = 5, N = 7, K = 3;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      float *A = frand((size_t)M * K, -1, 1), *B = frand((size_t)K * N, -1, 1), *C = frand((size_t)M * N, -1, 1);
      float *C0 = fdup(C, (size_t)M * N);
      const int lda = ta ? M : K, ldb = tb ? K : N;
      kern_gemm(ta, tb, M, N, K, A, lda, B, ldb, 0.5f, C, N);
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          double want = 0.5 * C0[i * N + j];
          for (int k = 0; k < K; k++) want += (double)(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
          cr_expect(fabs(C[i * N + j] - want) <= 1e-5, "ta=%d tb=%d C[%d,%d] %g vs %g", ta, tb, i, j, C[i * N + j], want);
        }
      free(A), free(B), free(C), free(C0);
    }
}

/* Central differences of loss(ctx) over every element of p, checked against
 * analytic[i] (minus before[i] when the gradient accumulates). Returns the
 * sum of |analytic| so a caller can assert it is not ~0. */
typedef double (*loss_fn)(const void *ctx);
static double check_fd(float *p, size_t n, const float *analytic, const float *before, loss_fn loss, const void *ctx,
                       const char *what) {
  const float eps = 1e-2f;
  double norm = 0;
  for (size_t i = 0; i < n; i++) {
    const float v = p[i];
    p[i] = v + eps;
    const double lp = loss(ctx);
    p[i] = v - eps;
    const double lm = loss(ctx);
    p[i] = v;
    const double a = analytic[i] - (before ? before[i] : 0.0f);
    expect_fd(a, (lp - lm) / (2 * eps), what, i);
    norm += fabs(a);
  }
  return norm;
}

typedef struct {
  float *x, *g, *R1, *R2;
  int N, C;
} gain_case;

/* L = sum(xg * R1) + sum(ss * R2) */
static double gain_loss(const void *ctx) {
  const gain_case *k = ctx;
  const float *x = k->x, *g = k->g, *R1 = k->R1, *R2 = k->R2;
  const int N = k->N, C = k->C;
  float *xg = malloc((size_t)N * C * sizeof *xg), *ss = malloc((size_t)N * sizeof *ss);
  kern_gain_sumsq_forward(xg, ss, x, g, N, C);
  double L = dot(xg, R1, (size_t)N * C) + dot(ss, R2, (size_t)N);
  free(xg), free(ss);
  return L;
}

Test(ops_tp, gain_sumsq_backward_matches_finite_differences) {
  const int N = 6, C = 5;
  float *x = frand((size_t)N * C, -1, 1), *g = frand((size_t)C, 0.5f, 1.5f);
  float *R1 = frand((size_t)N * C, -1, 1), *R2 = frand((size_t)N, -1, 1);
  float *dx = frand((size_t)N * C, -1, 1), *dg = frand((size_t)C, -1, 1);
  float *dx0 = fdup(dx, (size_t)N * C), *dg0 = fdup(dg, (size_t)C);
  kern_gain_sumsq_backward(dx, dg, R1, x, g, R2, N, C);
  const gain_case k = {x, g, R1, R2, N, C};
  cr_expect(check_fd(x, (size_t)N * C, dx, dx0, gain_loss, &k, "dx") > 1e-3, "dx is ~0");
  check_fd(g, (size_t)C, dg, dg0, gain_loss, &k, "dgain");
  free(x), free(g), free(R1), free(R2), free(dx), free(dg), free(dx0), free(dg0);
}

typedef struct {
  float *h, *ss, *R;
  int N, w;
  float inv_d, eps_n;
} rms_case;

/* L = sum(online_rms(h, ss) * R) */
static double rms_loss(const void *ctx) {
  const rms_case *k = ctx;
  const float *h = k->h, *ss = k->ss, *R = k->R, inv_d = k->inv_d, eps_n = k->eps_n;
  const int N = k->N, w = k->w;
  float *y = fdup(h, (size_t)N * w), *rstd = malloc((size_t)N * sizeof *rstd);
  kern_online_rms_forward(y, rstd, ss, N, w, inv_d, eps_n);
  double L = dot(y, R, (size_t)N * w);
  free(y), free(rstd);
  return L;
}

Test(ops_tp, online_rms_backward_matches_finite_differences) {
  const int N = 4, w = 6;
  const float inv_d = 1.0f / 8, eps_n = 1e-5f;
  float *h = frand((size_t)N * w, -1, 1), *ss = frand((size_t)N, 4, 12), *R = frand((size_t)N * w, -1, 1);
  float *y = fdup(h, (size_t)N * w), *rstd = malloc((size_t)N * sizeof *rstd);
  kern_online_rms_forward(y, rstd, ss, N, w, inv_d, eps_n);
  for (int n = 0; n < N; n++)
    cr_expect(fabsf(rstd[n] - 1.0f / sqrtf(ss[n] * inv_d + eps_n)) <= 1e-6f * rstd[n], "rstd[%d]", n);
  float *dh = fdup(R, (size_t)N * w), *dss = malloc((size_t)N * sizeof *dss);
  for (int n = 0; n < N; n++) dss[n] = NAN;
  kern_online_rms_backward(dh, dss, y, rstd, N, w, inv_d);
  const rms_case k = {h, ss, R, N, w, inv_d, eps_n};
  check_fd(h, (size_t)N * w, dh, NULL, rms_loss, &k, "dh");
  cr_expect(check_fd(ss, (size_t)N, dss, NULL, rms_loss, &k, "dss") > 1e-4, "dss is ~0");
  free(h), free(ss), free(R), free(y), free(rstd), free(dh), free(dss);
}

/* Logits [N, V] split into two vocab shards of V/2 columns, as two tp ranks
 * hold them; the reductions the model does over tp are done here by hand. */
Test(ops_tp, vocab_parallel_crossentropy_equals_the_fused_kernel) {
  const int N = 5, V = 12, H = V / 2;
  float *logits = frand((size_t)N * V, -4, 4);
  int32_t tg[5] = {0, 5, 6, 11, 7};
  float ref[5], ref_grad[5 * 12];
  kern_crossentropy_forward(ref, logits, tg, N, V);
  kern_crossentropy_backward(ref_grad, NULL, logits, tg, N, V, 0.25f);
  float shard[2][5 * 6], mx[2][5], sums[2][10], gmx[5], gsums[10], losses[5];
  for (int r = 0; r < 2; r++) {
    for (int n = 0; n < N; n++) memcpy(shard[r] + n * H, logits + n * V + r * H, H * sizeof(float));
    kern_vocab_ce_max(mx[r], shard[r], N, H);
  }
  for (int n = 0; n < N; n++) gmx[n] = fmaxf(mx[0][n], mx[1][n]);
  for (int r = 0; r < 2; r++) kern_vocab_ce_sums(sums[r], shard[r], gmx, tg, r * H, N, H);
  for (int i = 0; i < 2 * N; i++) gsums[i] = sums[0][i] + sums[1][i];
  kern_vocab_ce_losses(losses, gsums, gmx, N);
  for (int n = 0; n < N; n++) cr_expect(fabsf(losses[n] - ref[n]) <= 1e-5f, "loss[%d] %g vs %g", n, losses[n], ref[n]);
  for (int r = 0; r < 2; r++) {
    kern_vocab_ce_backward(shard[r], gsums, gmx, tg, r * H, N, H, 0.25f);
    for (int n = 0; n < N; n++)
      for (int v = 0; v < H; v++)
        cr_expect(fabsf(shard[r][n * H + v] - ref_grad[n * V + r * H + v]) <= 1e-6f, "dlogits[%d,%d]", n, r * H + v);
  }
  double mean = 0;
  for (int n = 0; n < N; n++) mean += losses[n];
  cr_expect_eq(kern_loss_mean(losses, N), mean / N);
  free(logits);
}

Test(ops_tp, backend_tables_are_complete) {
  const char *names[] = {"cpu", "guarded"};
  for (int b = 0; b < 2; b++) {
    boost_status err = {0};
    boost_backend *be = NULL;
    boost_backend_create(names[b], BOOST_F32, 0, 0, &be, &err);
    cr_assert_not_null(be, "%s: %s", names[b], err.msg);
    const void *const *fn = (const void *const *)be->ops;
    for (size_t i = 0; i < sizeof(boost_ops) / sizeof(void *); i++)
      cr_expect_not_null(fn[i], "%s ops entry %zu is NULL", names[b], i);
    fn = (const void *const *)be->mem;
    for (size_t i = 0; i < sizeof(boost_mem_ops) / sizeof(void *); i++)
      cr_expect_not_null(fn[i], "%s memory entry %zu is NULL", names[b], i);
    cr_expect_str_eq(be->name, names[b]);
    boost_backend_destroy(be);
  }
}
