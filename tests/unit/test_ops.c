/* Unit tests of the CPU kernels (kernels/cpu/ops.h).
 *
 * Suite ops_grad: for every op a central finite-difference check of the
 * backward against the fp32 forward, on the scalar loss L = sum(out * R) with
 * random R (so dout = R). Parameter gradients start from random values and
 * the check uses (dW_after - dW_before), which also proves they accumulate;
 * activation gradients start as NaN, which proves they are assigned. Each
 * check states eps and tolerance (|analytic - numeric| <= atol + rtol*|numeric|)
 * in a comment and in its failure message, and also asserts the gradient is
 * not ~0 (a check of two zeros could not fail).
 *
 * Other suites: forward vs naive double references, special values and
 * stability, in-place use, the optimizer against a hand-computed reference,
 * gradient accumulation, and bitwise determinism. Sizes are small and odd. */
#include <cblas.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ops.h"

/* ------------------------------------------------------------------ utils */

static uint64_t rng_state = 1;
static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; }
static double rng_u01(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static float rnd(float lo, float hi) { return lo + (hi - lo) * (float)rng_u01(); }

static float *falloc(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  cr_assert_not_null(p, "out of memory allocating %zu floats", n);
  return p;
}
static float *frand(size_t n, float lo, float hi) {
  float *p = falloc(n);
  for (size_t i = 0; i < n; i++) p[i] = rnd(lo, hi);
  return p;
}
static float *fnan(size_t n) {
  float *p = falloc(n);
  for (size_t i = 0; i < n; i++) p[i] = NAN;
  return p;
}
static float *fcopy(const float *src, size_t n) {
  float *p = falloc(n);
  memcpy(p, src, n * sizeof(float));
  return p;
}
static double dotd(const float *a, const float *b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
  return s;
}
/* d[i] = after[i] - before[i] (the accumulated part of a parameter grad) */
static float *fdiff(const float *after, const float *before, size_t n) {
  float *d = falloc(n);
  for (size_t i = 0; i < n; i++) d[i] = after[i] - before[i];
  return d;
}
static int verbose(void) { return getenv("BOOST_TEST_VERBOSE") != NULL; }

/* ctest runs unit tests with OMP_NUM_THREADS=1. Every suite here runs on
 * two OpenMP threads regardless (each test is its own process), so the
 * threaded paths -- GEMM splits, per-head attention, column reductions --
 * are what gets tested; tests that need other counts set them. */
static void two_threads(void) { omp_set_num_threads(2); }
TestSuite(ops_grad, .init = two_threads);
TestSuite(ops_fwd, .init = two_threads);
TestSuite(ops_special, .init = two_threads);
TestSuite(ops_optim, .init = two_threads);
TestSuite(ops_accum, .init = two_threads);
TestSuite(ops_determinism, .init = two_threads);
TestSuite(ops_threads, .init = two_threads);

typedef double (*loss_fn)(void *ctx);

/* Central differences on every element of x against analytic[]. */
static void fd_check(const char *what, float *x, size_t n, const float *analytic, loss_fn f, void *ctx, float eps,
                     double atol, double rtol) {
  double worst = 0.0, wa = 0.0, wn = 0.0, gmax = 0.0, emax = 0.0;
  size_t wi = 0;
  for (size_t i = 0; i < n; i++) {
    float x0 = x[i];
    float xp = x0 + eps, xm = x0 - eps;
    x[i] = xp;
    double lp = f(ctx);
    x[i] = xm;
    double lm = f(ctx);
    x[i] = x0;
    double num = (lp - lm) / ((double)xp - (double)xm);
    double a = analytic[i];
    double err = fabs(num - a);
    double ratio = err / (atol + rtol * fabs(num));
    if (isnan(ratio)) ratio = INFINITY;
    if (ratio > worst || i == 0) {
      worst = ratio;
      wi = i;
      wa = a;
      wn = num;
    }
    if (err > emax) emax = err;
    if (fabs(a) > gmax) gmax = fabs(a);
  }
  f(ctx); /* leave the forward outputs at the unperturbed point */
  if (verbose())
    fprintf(stderr, "fd %-28s n=%3zu max|g|=%.3g max err=%.3g worst ratio=%.3f\n", what, n, gmax, emax, worst);
  cr_assert(worst <= 1.0,
            "%s: finite-difference mismatch at [%zu]: analytic %.7g vs numeric %.7g "
            "(tolerance %.1e + %.1e*|numeric|, eps %.0e)",
            what, wi, wa, wn, atol, rtol, (double)eps);
  cr_assert(gmax > 1e-3, "%s: gradient is ~0 everywhere (max |g| %.3g): the check would be vacuous", what, gmax);
}

static void assert_close(const char *what, const float *got, const double *ref, size_t n, double atol, double rtol) {
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - ref[i]);
    cr_assert(err <= atol + rtol * fabs(ref[i]), "%s[%zu]: got %.8g, reference %.8g (tolerance %.1e + %.1e*|ref|)",
              what, i, (double)got[i], ref[i], atol, rtol);
  }
}

static void assert_bitwise(const char *what, const void *a, const void *b, size_t bytes) {
  cr_assert(memcmp(a, b, bytes) == 0, "%s: two runs differ bitwise", what);
}

static double silu_d(double x) { return x / (1.0 + exp(-x)); }

/* ============================================================ embedding */

typedef struct {
  int N, V, C;
  const int32_t *tok;
  float *wte, *out, *R;
} emb_ctx;
static double emb_loss(void *p) {
  emb_ctx *c = p;
  embedding_forward(c->out, c->tok, c->wte, c->N, c->V, c->C);
  return dotd(c->out, c->R, (size_t)c->N * c->C);
}

Test(ops_grad, embedding) {
  rng_seed(11);
  enum { N = 5, V = 11, C = 7 };
  static const int32_t tok[N] = {3, 1, 3, 10, 0}; /* repeated token 3 */
  emb_ctx c = {N, V, C, tok, frand(V * C, -1, 1), fnan(N * C), frand(N * C, -1, 1)};
  emb_loss(&c);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < C; j++)
      cr_assert(c.out[n * C + j] == c.wte[tok[n] * C + j], "embedding_forward: out[%d][%d] is not wte[%d][%d]", n, j,
                tok[n], j);
  float *g0 = frand(V * C, -1, 1), *dw = fcopy(g0, V * C);
  embedding_backward(dw, c.R, tok, N, V, C);
  float *g = fdiff(dw, g0, V * C);
  /* linear in wte: FD exact up to fp32 rounding; eps 1e-2, tol 1e-4 + 1e-4 rel */
  fd_check("embedding dwte", c.wte, V * C, g, emb_loss, &c, 1e-2f, 1e-4, 1e-4);
  for (int j = 0; j < C; j++)
    cr_assert(dw[5 * C + j] == g0[5 * C + j], "embedding_backward touched row 5, which no token uses");
  free(c.wte), free(c.out), free(c.R), free(g0), free(dw), free(g);
}

/* ============================================================== rmsnorm */

typedef struct {
  int N, C;
  float eps;
  float *x, *w, *out, *rstd, *R;
} rms_ctx;
static double rms_loss(void *p) {
  rms_ctx *c = p;
  rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->N, c->C, c->eps);
  return dotd(c->out, c->R, (size_t)c->N * c->C);
}

Test(ops_grad, rmsnorm) {
  rng_seed(12);
  enum { N = 5, C = 7 };
  rms_ctx c = {N, C, 1e-5f, frand(N * C, -2, 2), frand(C, 0.5f, 1.5f), fnan(N * C), fnan(N), frand(N * C, -1, 1)};
  rms_loss(&c);
  float *dx = fnan(N * C), *g0 = frand(C, -1, 1), *dw = fcopy(g0, C);
  rmsnorm_backward(dx, dw, c.R, c.x, c.w, c.rstd, N, C);
  float *gw = fdiff(dw, g0, C);
  /* eps 1e-2 (x ~ U(-2,2)): tol 1e-3 + 1e-3 rel */
  fd_check("rmsnorm dx", c.x, N * C, dx, rms_loss, &c, 1e-2f, 1e-3, 1e-3);
  /* linear in w: tol 1e-4 + 1e-4 rel */
  fd_check("rmsnorm dw", c.w, C, gw, rms_loss, &c, 1e-2f, 1e-4, 1e-4);
  /* NULL dx skips it and leaves dw identical */
  float *dw2 = fcopy(g0, C);
  rmsnorm_backward(NULL, dw2, c.R, c.x, c.w, c.rstd, N, C);
  assert_bitwise("rmsnorm dw with dx == NULL", dw, dw2, C * sizeof(float));
  free(c.x), free(c.w), free(c.out), free(c.rstd), free(c.R), free(dx), free(g0), free(dw), free(gw), free(dw2);
}

/* ================================================================= rope */

typedef struct {
  int B, T, H, hd;
  float *in, *out, *cos_t, *sin_t, *R;
} rope_ctx;
static double rope_loss(void *p) {
  rope_ctx *c = p;
  rope_forward(c->out, c->in, c->cos_t, c->sin_t, c->B, c->T, c->H, c->hd);
  return dotd(c->out, c->R, (size_t)c->B * c->T * c->H * c->hd);
}

Test(ops_grad, rope) {
  rng_seed(13);
  enum { B = 2, T = 5, H = 2, hd = 6 };
  size_t n = (size_t)B * T * H * hd;
  rope_ctx c = {B, T, H, hd, frand(n, -1, 1), fnan(n), falloc(T * hd / 2), falloc(T * hd / 2), frand(n, -1, 1)};
  rope_tables(c.cos_t, c.sin_t, T, hd, 10.0f); /* small theta: large angles */
  rope_loss(&c);
  float *din = fnan(n);
  rope_backward(din, c.R, c.cos_t, c.sin_t, B, T, H, hd);
  /* linear: tol 1e-4 + 1e-4 rel, eps 1e-2 */
  fd_check("rope din", c.in, n, din, rope_loss, &c, 1e-2f, 1e-4, 1e-4);
  free(c.in), free(c.out), free(c.cos_t), free(c.sin_t), free(c.R), free(din);
}

/* ============================================================ attention */

typedef struct {
  int B, T, H, hd;
  float *q, *k, *v, *out, *att, *R, *scr;
} att_ctx;
static double att_loss(void *p) {
  att_ctx *c = p;
  attention_forward(c->out, c->att, c->scr, c->q, c->k, c->v, c->B, c->T, c->H, c->hd);
  return dotd(c->out, c->R, (size_t)c->B * c->T * c->H * c->hd);
}

static void attention_fd(int B, int T, int H, int hd, uint64_t seed, const char *tag) {
  rng_seed(seed);
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * 2;
  float *scratch = fnan(attention_scratch_floats(B, T, H));
  att_ctx c = {B, T, H, hd, frand(n, -1.5f, 1.5f), frand(n, -1.5f, 1.5f), frand(n, -1, 1), fnan(n), fnan(na),
               frand(n, -1, 1), scratch};
  att_loss(&c);
  float *dq = fnan(n), *dk = fnan(n), *dv = fnan(n);
  attention_backward(dq, dk, dv, scratch, c.R, c.q, c.k, c.v, c.att, B, T, H, hd);
  char name[64];
  /* softmax is smooth: eps 1e-2, truncation ~eps^2; tol 1e-3 + 1e-3 rel */
  snprintf(name, sizeof name, "attention dq %s", tag);
  fd_check(name, c.q, n, dq, att_loss, &c, 1e-2f, 1e-3, 1e-3);
  snprintf(name, sizeof name, "attention dk %s", tag);
  fd_check(name, c.k, n, dk, att_loss, &c, 1e-2f, 1e-3, 1e-3);
  /* linear in v: tol 1e-4 + 1e-4 rel */
  snprintf(name, sizeof name, "attention dv %s", tag);
  fd_check(name, c.v, n, dv, att_loss, &c, 1e-2f, 1e-4, 1e-4);
  /* NULL grads skip their work and do not change the others */
  float *dq2 = fnan(n), *dv2 = fnan(n);
  attention_backward(dq2, NULL, NULL, scratch, c.R, c.q, c.k, c.v, c.att, B, T, H, hd);
  attention_backward(NULL, NULL, dv2, scratch, c.R, c.q, c.k, c.v, c.att, B, T, H, hd);
  assert_bitwise("attention dq with dk, dv NULL", dq, dq2, n * sizeof(float));
  assert_bitwise("attention dv with dq, dk NULL", dv, dv2, n * sizeof(float));
  free(c.q), free(c.k), free(c.v), free(c.out), free(c.att), free(c.R);
  free(dq), free(dk), free(dv), free(scratch), free(dq2), free(dv2);
}

/* B*H = 4 >= 2 threads: (b,h) slices run in parallel */
Test(ops_grad, attention_parallel_heads) { attention_fd(2, 5, 2, 4, 14, "(B2 T5 H2 hd4)"); }
/* B*H = 1: one slice, OpenBLAS threads the GEMMs; odd head dim */
Test(ops_grad, attention_single_head) { attention_fd(1, 7, 1, 3, 15, "(B1 T7 H1 hd3)"); }

/* ============================================================ elementwise */

typedef struct {
  size_t n;
  float *a, *b, *out, *R;
  int op; /* 0 silu(a), 1 a*b, 2 a+b */
} ew_ctx;
static double ew_loss(void *p) {
  ew_ctx *c = p;
  if (c->op == 0) silu_forward(c->out, c->a, c->n);
  if (c->op == 1) mul_forward(c->out, c->a, c->b, c->n);
  if (c->op == 2) add_forward(c->out, c->a, c->b, c->n);
  return dotd(c->out, c->R, c->n);
}

Test(ops_grad, silu) {
  rng_seed(16);
  enum { n = 13 };
  ew_ctx c = {n, frand(n, -4, 4), NULL, fnan(n), frand(n, -1, 1), 0};
  ew_loss(&c);
  float *dx = fnan(n);
  silu_backward(dx, c.R, c.a, n);
  /* eps 1e-2: tol 1e-4 + 1e-3 rel */
  fd_check("silu dx", c.a, n, dx, ew_loss, &c, 1e-2f, 1e-4, 1e-3);
  free(c.a), free(c.out), free(c.R), free(dx);
}

Test(ops_grad, mul) {
  rng_seed(17);
  enum { n = 13 };
  ew_ctx c = {n, frand(n, -2, 2), frand(n, -2, 2), fnan(n), frand(n, -1, 1), 1};
  ew_loss(&c);
  float *da = fnan(n), *db = fnan(n);
  mul_backward(da, db, c.R, c.a, c.b, n);
  /* bilinear, exact in each argument: tol 1e-5 + 1e-4 rel */
  fd_check("mul da", c.a, n, da, ew_loss, &c, 1e-2f, 1e-5, 1e-4);
  fd_check("mul db", c.b, n, db, ew_loss, &c, 1e-2f, 1e-5, 1e-4);
  float *da2 = fnan(n), *db2 = fnan(n);
  mul_backward(da2, NULL, c.R, c.a, c.b, n);
  mul_backward(NULL, db2, c.R, c.a, c.b, n);
  assert_bitwise("mul da with db NULL", da, da2, n * sizeof(float));
  assert_bitwise("mul db with da NULL", db, db2, n * sizeof(float));
  free(c.a), free(c.b), free(c.out), free(c.R), free(da), free(db), free(da2), free(db2);
}

Test(ops_grad, add) {
  rng_seed(18);
  enum { n = 13 };
  ew_ctx c = {n, frand(n, -2, 2), frand(n, -2, 2), fnan(n), frand(n, -1, 1), 2};
  ew_loss(&c);
  for (int i = 0; i < n; i++) cr_assert(c.out[i] == c.a[i] + c.b[i], "add_forward[%d] is not a + b", i);
  /* backward is the identity (no kernel): the gradient to both is dout = R.
   * tol 1e-5 + 1e-4 rel, eps 1e-2 */
  fd_check("add da (identity)", c.a, n, c.R, ew_loss, &c, 1e-2f, 1e-5, 1e-4);
  fd_check("add db (identity)", c.b, n, c.R, ew_loss, &c, 1e-2f, 1e-5, 1e-4);
  free(c.a), free(c.b), free(c.out), free(c.R);
}

/* =============================================================== linear */

typedef struct {
  int N, Cin, Cout;
  float *in, *W, *out, *R;
} lin_ctx;
static double lin_loss(void *p) {
  lin_ctx *c = p;
  linear_forward(c->out, c->in, c->W, c->N, c->Cin, c->Cout);
  return dotd(c->out, c->R, (size_t)c->N * c->Cout);
}

Test(ops_grad, linear) {
  rng_seed(19);
  enum { N = 5, Cin = 7, Cout = 3 };
  lin_ctx c = {N, Cin, Cout, frand(N * Cin, -1, 1), frand(Cout * Cin, -1, 1), fnan(N * Cout), frand(N * Cout, -1, 1)};
  lin_loss(&c);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < Cout; o++) {
      double ref = 0;
      for (int i = 0; i < Cin; i++) ref += (double)c.in[n * Cin + i] * c.W[o * Cin + i];
      cr_assert(fabs(c.out[n * Cout + o] - ref) <= 1e-5 * (1 + fabs(ref)),
                "linear_forward[%d][%d] = %g, naive %g (tol 1e-5 rel)", n, o, c.out[n * Cout + o], ref);
    }
  float *din = fnan(N * Cin), *g0 = frand(Cout * Cin, -1, 1), *dW = fcopy(g0, Cout * Cin);
  linear_backward(din, dW, c.R, c.in, c.W, N, Cin, Cout);
  float *gW = fdiff(dW, g0, Cout * Cin);
  /* linear in each argument: eps 1e-2, tol 1e-4 + 1e-4 rel */
  fd_check("linear din", c.in, N * Cin, din, lin_loss, &c, 1e-2f, 1e-4, 1e-4);
  fd_check("linear dW", c.W, Cout * Cin, gW, lin_loss, &c, 1e-2f, 1e-4, 1e-4);
  float *dW2 = fcopy(g0, Cout * Cin);
  linear_backward(NULL, dW2, c.R, c.in, c.W, N, Cin, Cout);
  assert_bitwise("linear dW with din NULL", dW, dW2, Cout * Cin * sizeof(float));
  free(c.in), free(c.W), free(c.out), free(c.R), free(din), free(g0), free(dW), free(gW), free(dW2);
}

/* ================================================================= cola */

typedef struct {
  int N, Cin, r, Cout;
  float *in, *A, *B, *out, *hpre, *h, *R;
} cola_ctx;
static double cola_loss(void *p) {
  cola_ctx *c = p;
  cola_forward(c->out, c->hpre, c->h, c->in, c->A, c->B, c->N, c->Cin, c->r, c->Cout);
  return dotd(c->out, c->R, (size_t)c->N * c->Cout);
}

Test(ops_grad, cola) {
  rng_seed(20);
  enum { N = 5, Cin = 7, r = 3, Cout = 6 };
  cola_ctx c = {N,
                Cin,
                r,
                Cout,
                frand(N * Cin, -1, 1),
                frand(r * Cin, -1, 1),
                frand(Cout * r, -1, 1),
                fnan(N * Cout),
                fnan(N * r),
                fnan(N * r),
                frand(N * Cout, -1, 1)};
  cola_loss(&c);
  /* saved activations and output vs a naive double reference (tol 1e-5) */
  for (int n = 0; n < N; n++) {
    double hp[r];
    for (int j = 0; j < r; j++) {
      hp[j] = 0;
      for (int i = 0; i < Cin; i++) hp[j] += (double)c.in[n * Cin + i] * c.A[j * Cin + i];
      cr_assert(fabs(c.hpre[n * r + j] - hp[j]) <= 1e-5 * (1 + fabs(hp[j])), "cola hpre[%d][%d] = %g, naive %g", n, j,
                c.hpre[n * r + j], hp[j]);
      cr_assert(fabs(c.h[n * r + j] - silu_d(hp[j])) <= 1e-5 * (1 + fabs(hp[j])), "cola h[%d][%d] = %g, naive %g", n, j,
                c.h[n * r + j], silu_d(hp[j]));
    }
    for (int o = 0; o < Cout; o++) {
      double ref = 0;
      for (int j = 0; j < r; j++) ref += silu_d(hp[j]) * c.B[o * r + j];
      cr_assert(fabs(c.out[n * Cout + o] - ref) <= 1e-5 * (1 + fabs(ref)), "cola out[%d][%d] = %g, naive %g", n, o,
                c.out[n * Cout + o], ref);
    }
  }
  float *din = fnan(N * Cin), *scratch = fnan(N * r);
  float *gA0 = frand(r * Cin, -1, 1), *dA = fcopy(gA0, r * Cin);
  float *gB0 = frand(Cout * r, -1, 1), *dB = fcopy(gB0, Cout * r);
  cola_backward(din, dA, dB, scratch, c.R, c.in, c.hpre, c.h, c.A, c.B, N, Cin, r, Cout);
  float *gA = fdiff(dA, gA0, r * Cin), *gB = fdiff(dB, gB0, Cout * r);
  /* through SiLU: eps 1e-2, tol 1e-3 + 1e-3 rel; B is linear: 1e-4 + 1e-4 */
  fd_check("cola din", c.in, N * Cin, din, cola_loss, &c, 1e-2f, 1e-3, 1e-3);
  fd_check("cola dA", c.A, r * Cin, gA, cola_loss, &c, 1e-2f, 1e-3, 1e-3);
  fd_check("cola dB", c.B, Cout * r, gB, cola_loss, &c, 1e-2f, 1e-4, 1e-4);
  float *dA2 = fcopy(gA0, r * Cin), *dB2 = fcopy(gB0, Cout * r);
  cola_backward(NULL, dA2, dB2, scratch, c.R, c.in, c.hpre, c.h, c.A, c.B, N, Cin, r, Cout);
  assert_bitwise("cola dA with din NULL", dA, dA2, r * Cin * sizeof(float));
  assert_bitwise("cola dB with din NULL", dB, dB2, Cout * r * sizeof(float));
  free(c.in), free(c.A), free(c.B), free(c.out), free(c.hpre), free(c.h), free(c.R);
  free(din), free(scratch), free(gA0), free(dA), free(gB0), free(dB), free(gA), free(gB), free(dA2), free(dB2);
}

/* ========================================================= crossentropy */

typedef struct {
  int N, V;
  float dloss;
  const int32_t *tgt;
  float *logits, *losses;
} ce_ctx;
static double ce_loss(void *p) {
  ce_ctx *c = p;
  crossentropy_forward(c->losses, c->logits, c->tgt, c->N, c->V);
  double s = 0;
  for (int n = 0; n < c->N; n++) s += c->losses[n];
  return c->dloss * s; /* the backward's dloss is one scalar for all rows */
}

Test(ops_grad, crossentropy) {
  rng_seed(21);
  enum { N = 5, V = 11 };
  static const int32_t tgt[N] = {0, 10, 4, 4, 7};
  ce_ctx c = {N, V, 0.37f, tgt, frand(N * V, -3, 3), fnan(N)};
  ce_loss(&c);
  for (int n = 0; n < N; n++) {
    double m = -INFINITY, s = 0;
    for (int v = 0; v < V; v++) m = fmax(m, c.logits[n * V + v]);
    for (int v = 0; v < V; v++) s += exp(c.logits[n * V + v] - m);
    double ref = m + log(s) - c.logits[n * V + tgt[n]];
    cr_assert(fabs(c.losses[n] - ref) <= 1e-5 * (1 + ref), "crossentropy loss[%d] = %.8g, naive %.8g (tol 1e-5)", n,
              c.losses[n], ref);
  }
  float *dl = fnan(N * V), *l2 = fnan(N);
  crossentropy_backward(dl, l2, c.logits, tgt, N, V, c.dloss);
  for (int n = 0; n < N; n++)
    cr_assert(fabs(l2[n] - c.losses[n]) <= 1e-6 * (1 + c.losses[n]),
              "crossentropy_backward loss[%d] = %.8g but forward gave %.8g", n, l2[n], c.losses[n]);
  /* eps 1e-2 on logits ~U(-3,3): tol 1e-4 + 1e-3 rel */
  fd_check("crossentropy dlogits", c.logits, N * V, dl, ce_loss, &c, 1e-2f, 1e-4, 1e-3);
  free(c.logits), free(c.losses), free(dl), free(l2);
}

/* ====================================================== forward references */

Test(ops_fwd, rmsnorm_vs_naive) {
  rng_seed(31);
  enum { N = 5, C = 37 };
  const float eps = 1e-5f;
  float *x = frand(N * C, -3, 3), *w = frand(C, -2, 2), *out = fnan(N * C), *rstd = fnan(N);
  x[2 * C + 3] = 100.0f; /* one large entry */
  rmsnorm_forward(out, rstd, x, w, N, C, eps);
  double ref_out[N * C], ref_rstd[N];
  for (int n = 0; n < N; n++) {
    double ss = 0;
    for (int j = 0; j < C; j++) ss += (double)x[n * C + j] * x[n * C + j];
    ref_rstd[n] = 1.0 / sqrt(ss / C + eps);
    for (int j = 0; j < C; j++) ref_out[n * C + j] = x[n * C + j] * ref_rstd[n] * w[j];
  }
  assert_close("rmsnorm rstd", rstd, ref_rstd, N, 0, 2e-6);
  assert_close("rmsnorm out", out, ref_out, N * C, 1e-6, 2e-6);
  /* rstd == NULL is allowed in forward and gives the same output */
  float *out2 = fnan(N * C);
  rmsnorm_forward(out2, NULL, x, w, N, C, eps);
  assert_bitwise("rmsnorm out with rstd NULL", out, out2, sizeof(float) * N * C);
  free(x), free(w), free(out), free(rstd), free(out2);
}

Test(ops_fwd, rope_tables_and_naive) {
  enum { B = 2, T = 9, H = 3, hd = 8 };
  const float theta = 10000.0f;
  float cos_t[T * hd / 2], sin_t[T * hd / 2];
  rope_tables(cos_t, sin_t, T, hd, theta);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hd / 2; i++) {
      double a = t * pow(theta, -2.0 * i / hd);
      cr_assert(fabs(cos_t[t * hd / 2 + i] - cos(a)) <= 1e-7 && fabs(sin_t[t * hd / 2 + i] - sin(a)) <= 1e-7,
                "rope_tables[t=%d][i=%d]: cos %.8g sin %.8g, expected cos %.8g sin %.8g (angle t*theta^(-2i/hd))", t, i,
                cos_t[t * hd / 2 + i], sin_t[t * hd / 2 + i], cos(a), sin(a));
    }
  cr_assert(cos_t[0] == 1.0f && sin_t[0] == 0.0f, "rope at t=0 must be the identity");
  rng_seed(32);
  size_t n = (size_t)B * T * H * hd;
  float *x = frand(n, -1, 1), *y = fnan(n);
  rope_forward(y, x, cos_t, sin_t, B, T, H, hd);
  double *ref = malloc(n * sizeof(double));
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++)
        for (int i = 0; i < hd / 2; i++) {
          size_t o = (((size_t)b * T + t) * H + h) * hd + 2 * i;
          double a = t * pow(theta, -2.0 * i / hd);
          /* (x0 + i x1) * e^{i a} on the interleaved pair */
          ref[o] = x[o] * cos(a) - x[o + 1] * sin(a);
          ref[o + 1] = x[o] * sin(a) + x[o + 1] * cos(a);
        }
  assert_close("rope_forward vs complex rotation", y, ref, n, 1e-6, 1e-6);
  /* backward o forward = identity (rotation by -a undoes +a) */
  float *z = fnan(n);
  rope_backward(z, y, cos_t, sin_t, B, T, H, hd);
  for (size_t i = 0; i < n; i++)
    cr_assert(fabs(z[i] - x[i]) <= 1e-6, "rope_backward(rope_forward(x))[%zu] = %.8g, x = %.8g (tol 1e-6)", i, z[i],
              x[i]);
  /* in place (out == in) equals out-of-place, bitwise */
  float *w = fcopy(x, n);
  rope_forward(w, w, cos_t, sin_t, B, T, H, hd);
  assert_bitwise("rope_forward in place", w, y, n * sizeof(float));
  rope_backward(w, w, cos_t, sin_t, B, T, H, hd);
  assert_bitwise("rope_backward in place", w, z, n * sizeof(float));
  free(x), free(y), free(ref), free(z), free(w);
}

/* naive double attention forward and backward (same formulas, no blocking) */
static void attn_ref(double *out, double *att, double *dq, double *dk, double *dv, const float *q, const float *k,
                     const float *v, const float *dout, int B, int T, int H, int hd) {
  int ld = H * hd;
  double scale = 1.0 / sqrt((double)hd);
  double *P = malloc(sizeof(double) * T * T), *dS = malloc(sizeof(double) * T * T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
#define IX(t, d) (((size_t)b * T + (t)) * ld + (size_t)h * hd + (d))
      for (int i = 0; i < T; i++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < T; j++) {
          double acc = 0;
          for (int d = 0; d < hd; d++) acc += (double)q[IX(i, d)] * k[IX(j, d)];
          P[i * T + j] = j <= i ? acc * scale : -INFINITY;
          if (j <= i) m = fmax(m, P[i * T + j]);
        }
        for (int j = 0; j < T; j++) s += (P[i * T + j] = j <= i ? exp(P[i * T + j] - m) : 0.0);
        for (int j = 0; j < T; j++) P[i * T + j] /= s;
        for (int d = 0; d < hd; d++) {
          double acc = 0;
          for (int j = 0; j <= i; j++) acc += P[i * T + j] * v[IX(j, d)];
          out[IX(i, d)] = acc;
        }
      }
      if (att) memcpy(att + ((size_t)b * H + h) * T * T, P, sizeof(double) * T * T);
      if (!dout) continue;
      for (int i = 0; i < T; i++) {
        double rs = 0;
        for (int j = 0; j < T; j++) {
          double dp = 0;
          for (int d = 0; d < hd; d++) dp += (double)dout[IX(i, d)] * v[IX(j, d)];
          dS[i * T + j] = dp;
          rs += dp * P[i * T + j];
        }
        for (int j = 0; j < T; j++) dS[i * T + j] = P[i * T + j] * (dS[i * T + j] - rs);
      }
      for (int t = 0; t < T; t++)
        for (int d = 0; d < hd; d++) {
          double aq = 0, ak = 0, av = 0;
          for (int j = 0; j < T; j++) {
            aq += dS[t * T + j] * k[IX(j, d)];
            ak += dS[j * T + t] * q[IX(j, d)];
            av += P[j * T + t] * dout[IX(j, d)];
          }
          dq[IX(t, d)] = aq * scale;
          dk[IX(t, d)] = ak * scale;
          dv[IX(t, d)] = av;
        }
#undef IX
    }
  free(P), free(dS);
}

/* T > 128 (ATT_BLOCK) exercises the row/column blocking of the kernel. */
static void attention_vs_naive(int B, int T, int H, int hd, uint64_t seed) {
  rng_seed(seed);
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * T;
  float *q = frand(n, -2, 2), *k = frand(n, -2, 2), *v = frand(n, -1, 1), *dout = frand(n, -1, 1);
  float *out = fnan(n), *att = fnan((size_t)B * H * T * 2), *dq = fnan(n), *dk = fnan(n), *dv = fnan(n);
  float *scratch = fnan(attention_scratch_floats(B, T, H));
  attention_forward(out, att, scratch, q, k, v, B, T, H, hd);
  attention_backward(dq, dk, dv, scratch, dout, q, k, v, att, B, T, H, hd);
  double *rout = malloc(n * sizeof(double)), *ratt = malloc(na * sizeof(double));
  double *rdq = malloc(n * sizeof(double)), *rdk = malloc(n * sizeof(double)), *rdv = malloc(n * sizeof(double));
  attn_ref(rout, ratt, rdq, rdk, rdv, q, k, v, dout, B, T, H, hd);
  /* The row stats rebuild the naive probabilities: P_ij = exp(s_ij - m) / sum
   * with s_ij = scale q_i . k_j in double (rows sum to 1, the masked part
   * is not stored at all). */
  float *prob = fnan(na);
  const int ld = H * hd;
  for (int bh = 0; bh < B * H; bh++) {
    const int b = bh / H, h = bh % H;
    for (int i = 0; i < T; i++) {
      const double m = att[((size_t)bh * T + i) * 2], inv = att[((size_t)bh * T + i) * 2 + 1];
      cr_assert(inv > 0 && inv <= 1, "att stats (bh %d, i %d): 1/sum %g outside (0, 1]", bh, i, inv);
      for (int j = 0; j < T; j++) {
        double sdot = 0;
        for (int e = 0; e < hd; e++)
          sdot += (double)q[((size_t)b * T + i) * ld + h * hd + e] * k[((size_t)b * T + j) * ld + h * hd + e];
        prob[((size_t)bh * T + i) * T + j] = j > i ? 0.0f : (float)(exp(sdot / sqrt((double)hd) - m) * inv);
      }
    }
  }
  /* fp32 softmax/GEMM vs double: tol 1e-5 abs + 1e-4 rel (att, out);
   * backward 1e-5 abs + 1e-3 rel */
  assert_close("attention probabilities from the stats vs naive", prob, ratt, na, 1e-6, 1e-4);
  free(prob);
  assert_close("attention out vs naive", out, rout, n, 1e-5, 1e-4);
  assert_close("attention dq vs naive", dq, rdq, n, 1e-5, 1e-3);
  assert_close("attention dk vs naive", dk, rdk, n, 1e-5, 1e-3);
  assert_close("attention dv vs naive", dv, rdv, n, 1e-5, 1e-3);
  /* NULL gradients skip work without changing the others (every path) */
  float *dq2 = fnan(n), *dk2 = fnan(n), *dv2 = fnan(n);
  attention_backward(dq2, NULL, NULL, scratch, dout, q, k, v, att, B, T, H, hd);
  attention_backward(NULL, dk2, NULL, scratch, dout, q, k, v, att, B, T, H, hd);
  attention_backward(NULL, NULL, dv2, scratch, dout, q, k, v, att, B, T, H, hd);
  assert_bitwise("attention dq alone", dq, dq2, n * sizeof(float));
  assert_bitwise("attention dk alone", dk, dk2, n * sizeof(float));
  assert_bitwise("attention dv alone", dv, dv2, n * sizeof(float));
  free(dq2), free(dk2), free(dv2);
  free(q), free(k), free(v), free(dout), free(out), free(att), free(dq), free(dk), free(dv), free(scratch);
  free(rout), free(ratt), free(rdq), free(rdk), free(rdv);
}

Test(ops_fwd, attention_vs_naive_small) { attention_vs_naive(2, 5, 2, 4, 33); }
Test(ops_fwd, attention_vs_naive_blocked_parallel) { attention_vs_naive(1, 131, 3, 8, 34); }
Test(ops_fwd, attention_vs_naive_blocked_serial) { attention_vs_naive(1, 140, 1, 5, 35); }
/* B*H = 1 but enough work to thread: row/column blocks dealt round-robin */
Test(ops_fwd, attention_vs_naive_one_head_threaded) { attention_vs_naive(1, 300, 1, 9, 37); }

/* Sizes above the threading threshold: GEMMs split over OpenMP threads by
 * rows (M >= N) or columns, CoLA fused per token block. Forward and all
 * gradients vs naive double loops; fp32 sums of <= 300 terms: tol 1e-5 abs +
 * 1e-4 rel. */
static void linear_cola_threaded(int N, int Cin, int r, int Cout, uint64_t seed) {
  rng_seed(seed);
  float *in = frand((size_t)N * Cin, -1, 1), *A = frand((size_t)r * Cin, -0.5f, 0.5f);
  float *B = frand((size_t)Cout * r, -0.5f, 0.5f), *dy = frand((size_t)N * Cout, -1, 1);
  float *W = frand((size_t)Cout * Cin, -0.5f, 0.5f);
  float *out = fnan((size_t)N * Cout), *hp = fnan((size_t)N * r), *h = fnan((size_t)N * r);
  float *din = fnan((size_t)N * Cin), *sc = fnan((size_t)N * r);
  float *dA = calloc((size_t)r * Cin, sizeof(float)), *dB = calloc((size_t)Cout * r, sizeof(float)),
        *dW = calloc((size_t)Cout * Cin, sizeof(float));
  double *rh = malloc(sizeof(double) * N * r), *rdh = malloc(sizeof(double) * N * r);
  double *ro = malloc(sizeof(double) * N * Cout), *rdin = malloc(sizeof(double) * N * Cin);
  double *rdA = calloc((size_t)r * Cin, sizeof(double)), *rdB = calloc((size_t)Cout * r, sizeof(double)),
         *rdW = calloc((size_t)Cout * Cin, sizeof(double));
  /* linear: out = in W^T, din = dy W, dW = dy^T in */
  linear_forward(out, in, W, N, Cin, Cout);
  linear_backward(din, dW, dy, in, W, N, Cin, Cout);
  for (int n = 0; n < N; n++) {
    for (int o = 0; o < Cout; o++) {
      double acc = 0;
      for (int i = 0; i < Cin; i++) acc += (double)in[(size_t)n * Cin + i] * W[(size_t)o * Cin + i];
      ro[(size_t)n * Cout + o] = acc;
    }
    for (int i = 0; i < Cin; i++) {
      double acc = 0;
      for (int o = 0; o < Cout; o++) acc += (double)dy[(size_t)n * Cout + o] * W[(size_t)o * Cin + i];
      rdin[(size_t)n * Cin + i] = acc;
    }
    for (int o = 0; o < Cout; o++)
      for (int i = 0; i < Cin; i++)
        rdW[(size_t)o * Cin + i] += (double)dy[(size_t)n * Cout + o] * in[(size_t)n * Cin + i];
  }
  assert_close("linear out (threaded)", out, ro, (size_t)N * Cout, 1e-5, 1e-4);
  assert_close("linear din (threaded)", din, rdin, (size_t)N * Cin, 1e-5, 1e-4);
  assert_close("linear dW (threaded)", dW, rdW, (size_t)Cout * Cin, 1e-5, 1e-4);
  /* cola */
  cola_forward(out, hp, h, in, A, B, N, Cin, r, Cout);
  cola_backward(din, dA, dB, sc, dy, in, hp, h, A, B, N, Cin, r, Cout);
  for (int n = 0; n < N; n++) {
    for (int j = 0; j < r; j++) {
      double acc = 0;
      for (int i = 0; i < Cin; i++) acc += (double)in[(size_t)n * Cin + i] * A[(size_t)j * Cin + i];
      rh[(size_t)n * r + j] = acc;
    }
    for (int o = 0; o < Cout; o++) {
      double acc = 0;
      for (int j = 0; j < r; j++) acc += silu_d(rh[(size_t)n * r + j]) * B[(size_t)o * r + j];
      ro[(size_t)n * Cout + o] = acc;
    }
    for (int j = 0; j < r; j++) {
      double acc = 0, x = rh[(size_t)n * r + j], sg = 1 / (1 + exp(-x));
      for (int o = 0; o < Cout; o++) acc += (double)dy[(size_t)n * Cout + o] * B[(size_t)o * r + j];
      rdh[(size_t)n * r + j] = acc * sg * (1 + x * (1 - sg));
      for (int o = 0; o < Cout; o++) rdB[(size_t)o * r + j] += (double)dy[(size_t)n * Cout + o] * silu_d(x);
    }
    for (int i = 0; i < Cin; i++) {
      double acc = 0;
      for (int j = 0; j < r; j++) acc += rdh[(size_t)n * r + j] * A[(size_t)j * Cin + i];
      rdin[(size_t)n * Cin + i] = acc;
    }
    for (int j = 0; j < r; j++)
      for (int i = 0; i < Cin; i++) rdA[(size_t)j * Cin + i] += rdh[(size_t)n * r + j] * in[(size_t)n * Cin + i];
  }
  assert_close("cola hpre (threaded)", hp, rh, (size_t)N * r, 1e-5, 1e-4);
  assert_close("cola out (threaded)", out, ro, (size_t)N * Cout, 1e-5, 1e-4);
  assert_close("cola din (threaded)", din, rdin, (size_t)N * Cin, 1e-5, 1e-4);
  assert_close("cola dA (threaded)", dA, rdA, (size_t)r * Cin, 1e-5, 1e-4);
  assert_close("cola dB (threaded)", dB, rdB, (size_t)Cout * r, 1e-5, 1e-4);
  free(in), free(A), free(B), free(dy), free(W), free(out), free(hp), free(h), free(din), free(sc);
  free(dA), free(dB), free(dW), free(rh), free(rdh), free(ro), free(rdin), free(rdA), free(rdB), free(rdW);
}
/* many tokens: row splits */
Test(ops_fwd, linear_cola_threaded_tall) { linear_cola_threaded(301, 67, 13, 45, 38); }
/* few tokens, wide output: column splits */
Test(ops_fwd, linear_cola_threaded_wide) { linear_cola_threaded(37, 131, 21, 299, 39); }

Test(ops_fwd, attention_first_token_copies_v) {
  /* token 0 attends only to itself: out[b,0,h,:] = v[b,0,h,:] exactly-ish */
  rng_seed(36);
  enum { B = 2, T = 3, H = 2, hd = 4 };
  size_t n = (size_t)B * T * H * hd;
  float *q = frand(n, -3, 3), *k = frand(n, -3, 3), *v = frand(n, -1, 1), *out = fnan(n), *att = fnan(B * H * T * 2);
  float *scr = fnan(attention_scratch_floats(B, T, H));
  attention_forward(out, att, scr, q, k, v, B, T, H, hd);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      cr_assert(att[(size_t)(b * H + h) * T * 2 + 1] == 1.0f, "att[b%d,h%d] row 0: 1/sum must be exactly 1", b, h);
      for (int d = 0; d < hd; d++) {
        size_t o = ((size_t)b * T * H + h) * hd + d;
        cr_assert(fabs(out[o] - v[o]) <= 1e-6, "attention out at t=0 (b%d h%d d%d) = %g, expected v = %g", b, h, d,
                  out[o], v[o]);
      }
    }
  free(q), free(k), free(v), free(out), free(att), free(scr);
}

/* ================================================== special values/stability */

Test(ops_special, silu_extremes) {
  float x[] = {-1e4f, -100.0f, -88.9f, -20.0f, 0.0f, 20.0f, 100.0f, 1e4f};
  enum { n = sizeof x / sizeof x[0] };
  float y[n], dx[n], ones[n];
  for (int i = 0; i < n; i++) ones[i] = 1.0f;
  silu_forward(y, x, n);
  silu_backward(dx, ones, x, n);
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
  silu_forward(ys, xs, M);
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
  crossentropy_forward(losses, logits, tgt, N, V);
  const float dloss = 0.5f;
  crossentropy_backward(dl, l2, logits, tgt, N, V, dloss);
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
  crossentropy_backward(dl, l1, logits, tgt, N, V, 1.0f / N);
  float *buf = fcopy(logits, N * V);
  crossentropy_backward(buf, l2, buf, tgt, N, V, 1.0f / N);
  assert_bitwise("crossentropy_backward in place vs out of place (dlogits)", buf, dl, sizeof(float) * N * V);
  assert_bitwise("crossentropy_backward in place vs out of place (losses)", l1, l2, sizeof(float) * N);
  /* losses may be NULL */
  float *dl3 = fnan(N * V);
  crossentropy_backward(dl3, NULL, logits, tgt, N, V, 1.0f / N);
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
  crossentropy_backward(dl, NULL, lg, tgt, M, 2, 1.0f);
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
    adamw_update(p, g, m, v, n, hp, t, gscale);
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
  adamw_update(q, z, mq, vq, 1, hp, 1, 1.0f);
  cr_assert(fabs(q[0] - 3.0 * (1 - 0.01 * 0.1)) <= 1e-6, "adamw decay-only step gave %.9g, expected %.9g", q[0],
            3.0 * (1 - 0.01 * 0.1));
  /* weight_decay 0: no decay */
  hp.weight_decay = 0.0f;
  q[0] = 3.0f;
  adamw_update(q, z, mq, vq, 1, hp, 2, 1.0f);
  cr_assert(q[0] == 3.0f, "adamw with wd 0 and zero grad must not move the param, got %.9g", q[0]);
}

Test(ops_optim, adamw_large_matches_small) {
  /* the OpenMP path (n >= 16Ki) gives the same per-element result */
  rng_seed(42);
  size_t n = 100003;
  adamw_hparams hp = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
  float *p = frand(n, -1, 1), *g = frand(n, -1, 1), *m = frand(n, -0.1f, 0.1f), *v = frand(n, 0, 0.01f);
  float *p2 = fcopy(p, n), *m2 = fcopy(m, n), *v2 = fcopy(v, n);
  adamw_update(p, g, m, v, n, hp, 7, 0.8f);
  for (size_t i = 0; i < n; i += 997) adamw_update(p2 + i, g + i, m2 + i, v2 + i, 1, hp, 7, 0.8f);
  for (size_t i = 0; i < n; i += 997)
    cr_assert(p[i] == p2[i] && m[i] == m2[i] && v[i] == v2[i], "adamw element %zu differs between n=%zu and n=1", i, n);
  free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
}

Test(ops_optim, sum_squares_and_clip) {
  float small[] = {1, -2, 3, 0.5f, -0.25f, 7, 1e-3f};
  double want = 1 + 4 + 9 + 0.25 + 0.0625 + 49 + (double)1e-3f * (double)1e-3f;
  double got = sum_squares(small, 7);
  cr_assert(fabs(got - want) <= 1e-12 * want, "sum_squares small = %.17g, expected %.17g", got, want);
  cr_assert(sum_squares(small, 0) == 0.0, "sum_squares of nothing must be 0");

  rng_seed(43);
  size_t n = 1000003; /* many 64Ki blocks plus a tail */
  float *x = frand(n, -3, 3);
  long double ref = 0;
  for (size_t i = 0; i < n; i++) ref += (long double)x[i] * x[i];
  double s1 = sum_squares(x, n), s2 = sum_squares(x, n);
  cr_assert(fabs(s1 - (double)ref) <= 1e-12 * (double)ref, "sum_squares = %.17g, reference %.17g (tol 1e-12 rel)", s1,
            (double)ref);
  cr_assert(memcmp(&s1, &s2, sizeof s1) == 0, "sum_squares not deterministic: %.17g vs %.17g", s1, s2);
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  double s3 = sum_squares(x, n);
  omp_set_num_threads(3);
  double s4 = sum_squares(x, n);
  omp_set_num_threads(nt);
  cr_assert(memcmp(&s1, &s3, sizeof s1) == 0 && memcmp(&s1, &s4, sizeof s1) == 0,
            "sum_squares depends on the thread count: %.17g (default) %.17g (1) %.17g (3)", s1, s3, s4);

  float *y = fcopy(x, n);
  scale_inplace(y, n, 0.3f);
  for (size_t i = 0; i < n; i += 101) cr_assert(y[i] == x[i] * 0.3f, "scale_inplace[%zu] = %g", i, y[i]);

  cr_assert(clip_scale(10.0, 1.0f) == 0.1f, "clip_scale(10, 1) = %g, expected 0.1", clip_scale(10.0, 1.0f));
  cr_assert(clip_scale(0.5, 1.0f) == 1.0f, "clip_scale below the max must be 1");
  cr_assert(clip_scale(1.0, 1.0f) == 1.0f, "clip_scale at the max must be 1");
  cr_assert(clip_scale(0.0, 1.0f) == 1.0f, "clip_scale of a zero norm must be 1");
  cr_assert(clip_scale(10.0, 0.0f) == 1.0f && clip_scale(10.0, -1.0f) == 1.0f, "clip_scale with max_norm <= 0 is 1");
  cr_assert(fabsf(clip_scale(3.0, 2.0f) - 2.0f / 3.0f) <= 1e-7f, "clip_scale(3, 2) = %.9g", clip_scale(3.0, 2.0f));
  /* a full clip round trip: the scaled gradient has norm max_norm */
  float g[] = {3, 4};
  float s = clip_scale(sqrt(sum_squares(g, 2)), 1.0f);
  scale_inplace(g, 2, s);
  cr_assert(fabs(sqrt(sum_squares(g, 2)) - 1.0) <= 1e-6, "clipped norm = %.9g, expected 1", sqrt(sum_squares(g, 2)));
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
  embedding_backward(e1, dout, tok, N, V, C);
  embedding_backward(e2, dout, tok, N, V, C);
  embedding_backward(e2, dout, tok, N, V, C);
  assert_doubled("embedding dwte", e1, e2, V * C);
  /* rmsnorm */
  float *x = frand(N * C, -1, 1), *w = frand(C, 0.5f, 1.5f), *out = falloc(N * C), *rstd = falloc(N);
  rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  float *w1 = calloc(C, sizeof(float)), *w2 = calloc(C, sizeof(float)), *dx = falloc(N * C);
  rmsnorm_backward(dx, w1, dout, x, w, rstd, N, C);
  rmsnorm_backward(dx, w2, dout, x, w, rstd, N, C);
  rmsnorm_backward(dx, w2, dout, x, w, rstd, N, C);
  assert_doubled("rmsnorm dw", w1, w2, C);
  /* linear */
  float *in = frand(N * Cin, -1, 1), *W = frand(Cout * Cin, -1, 1), *dy = frand(N * Cout, -1, 1);
  float *din = falloc(N * Cin), *W1 = calloc(Cout * Cin, sizeof(float)), *W2 = calloc(Cout * Cin, sizeof(float));
  linear_backward(din, W1, dy, in, W, N, Cin, Cout);
  linear_backward(din, W2, dy, in, W, N, Cin, Cout);
  linear_backward(din, W2, dy, in, W, N, Cin, Cout);
  assert_doubled("linear dW", W1, W2, Cout * Cin);
  /* cola */
  float *A = frand(r * Cin, -1, 1), *B = frand(Cout * r, -1, 1), *hpre = falloc(N * r), *h = falloc(N * r);
  float *y = falloc(N * Cout), *scratch = falloc(N * r);
  cola_forward(y, hpre, h, in, A, B, N, Cin, r, Cout);
  float *A1 = calloc(r * Cin, sizeof(float)), *A2 = calloc(r * Cin, sizeof(float));
  float *B1 = calloc(Cout * r, sizeof(float)), *B2 = calloc(Cout * r, sizeof(float));
  cola_backward(din, A1, B1, scratch, dy, in, hpre, h, A, B, N, Cin, r, Cout);
  cola_backward(din, A2, B2, scratch, dy, in, hpre, h, A, B, N, Cin, r, Cout);
  cola_backward(din, A2, B2, scratch, dy, in, hpre, h, A, B, N, Cin, r, Cout);
  assert_doubled("cola dA", A1, A2, r * Cin);
  assert_doubled("cola dB", B1, B2, Cout * r);
  free(dout), free(e1), free(e2), free(x), free(w), free(out), free(rstd), free(w1), free(w2), free(dx);
  free(in), free(W), free(dy), free(din), free(W1), free(W2), free(A), free(B), free(hpre), free(h), free(y);
  free(scratch), free(A1), free(A2), free(B1), free(B2);
}

/* =========================================================== determinism */

/* Sizes large enough that every OpenMP path engages (>= 16Ki elements). */
Test(ops_determinism, two_calls_bitwise_equal) {
  rng_seed(61);
  /* attention: B*H = 6 slices, T = 200 crosses a row block */
  enum { B = 2, T = 200, H = 3, hd = 16 };
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * 2;
  float *q = frand(n, -2, 2), *k = frand(n, -2, 2), *v = frand(n, -1, 1), *dout = frand(n, -1, 1);
  float *o1 = falloc(n), *o2 = falloc(n), *a1 = falloc(na), *a2 = falloc(na), *scr = falloc(attention_scratch_floats(B, T, H));
  float *dq1 = falloc(n), *dk1 = falloc(n), *dv1 = falloc(n), *dq2 = falloc(n), *dk2 = falloc(n), *dv2 = falloc(n);
  attention_forward(o1, a1, scr, q, k, v, B, T, H, hd);
  attention_backward(dq1, dk1, dv1, scr, dout, q, k, v, a1, B, T, H, hd);
  attention_forward(o2, a2, scr, q, k, v, B, T, H, hd);
  attention_backward(dq2, dk2, dv2, scr, dout, q, k, v, a2, B, T, H, hd);
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
  crossentropy_backward(g1, l1, logits, tgt, NC, VC, 0.1f);
  crossentropy_backward(g2, l2, logits, tgt, NC, VC, 0.1f);
  assert_bitwise("crossentropy dlogits", g1, g2, sizeof(float) * NC * VC);
  assert_bitwise("crossentropy losses", l1, l2, sizeof(float) * NC);

  /* cola (OpenBLAS splits GEMMs over M/N, never over K) */
  enum { N = 300, Cin = 64, r = 16, Cout = 80 };
  float *in = frand(N * Cin, -1, 1), *A = frand(r * Cin, -1, 1), *Bm = frand(Cout * r, -1, 1);
  float *hp = falloc(N * r), *h = falloc(N * r), *y = falloc(N * Cout), *dy = frand(N * Cout, -1, 1);
  float *din1 = falloc(N * Cin), *din2 = falloc(N * Cin), *sc = falloc(N * r);
  float *dA1 = calloc(r * Cin, sizeof(float)), *dA2 = calloc(r * Cin, sizeof(float)),
        *dB1 = calloc(Cout * r, sizeof(float)), *dB2 = calloc(Cout * r, sizeof(float));
  cola_forward(y, hp, h, in, A, Bm, N, Cin, r, Cout);
  cola_backward(din1, dA1, dB1, sc, dy, in, hp, h, A, Bm, N, Cin, r, Cout);
  cola_backward(din2, dA2, dB2, sc, dy, in, hp, h, A, Bm, N, Cin, r, Cout);
  assert_bitwise("cola din", din1, din2, sizeof(float) * N * Cin);
  assert_bitwise("cola dA", dA1, dA2, sizeof(float) * r * Cin);
  assert_bitwise("cola dB", dB1, dB2, sizeof(float) * Cout * r);

  free(q), free(k), free(v), free(dout), free(o1), free(o2), free(a1), free(a2), free(scr);
  free(dq1), free(dk1), free(dv1), free(dq2), free(dk2), free(dv2);
  free(logits), free(g1), free(g2), free(l1), free(l2);
  free(in), free(A), free(Bm), free(hp), free(h), free(y), free(dy), free(din1), free(din2), free(sc);
  free(dA1), free(dA2), free(dB1), free(dB2);
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
  rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  int nts[3] = {omp_get_max_threads(), 1, 3};
  float *emb[3], *dw[3];
  for (int t = 0; t < 3; t++) {
    omp_set_num_threads(nts[t]);
    emb[t] = calloc((size_t)V * C, sizeof(float));
    dw[t] = calloc(C, sizeof(float));
    embedding_backward(emb[t], dout, tok, N, V, C);
    rmsnorm_backward(dx, dw[t], dout, x, w, rstd, N, C);
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

/* CPU ticks (user + system) of this process's threads: the calling thread's
 * and all the others' summed. Linux /proc. */
static void thread_ticks(long *self, long *others) {
  long me = (long)syscall(SYS_gettid);
  *self = *others = 0;
  DIR *d = opendir("/proc/self/task");
  cr_assert_not_null(d, "cannot open /proc/self/task");
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *s = strrchr(buf, ')'); /* fields after the command name */
    long ut = 0, st = 0;
    if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2) continue;
    if (atol(e->d_name) == me)
      *self += ut + st;
    else
      *others += ut + st;
  }
  closedir(d);
}

/* The GEMM kernels must spread their work over the OpenMP threads, with
 * either OpenBLAS build, and leave the OpenMP and OpenBLAS thread counts as
 * they found them. (With OpenBLAS's OpenMP build, openblas_set_num_threads(1)
 * also sets the OpenMP thread count: toggling it around a kernel silently
 * ran every GEMM kernel on one thread.) The other threads must do at least a
 * quarter of the calling thread's CPU time. */
Test(ops_threads, gemm_kernels_use_every_thread) {
  int nt = omp_get_max_threads();
  cr_assert(nt >= 2, "the suite init asks for 2 OpenMP threads, have %d", nt);
  int blas_nt = openblas_get_num_threads();
  rng_seed(71);
  enum { N = 512, C = 1024, R = 256, B = 2, T = 256, H = 8, hd = 64 };
  float *x = frand((size_t)N * C, -1, 1), *W = frand((size_t)C * C, -1, 1), *y = falloc((size_t)N * C);
  float *A = frand((size_t)R * C, -1, 1), *Bm = frand((size_t)C * R, -1, 1), *hp = falloc((size_t)N * R),
        *h = falloc((size_t)N * R);
  float *att = falloc((size_t)B * H * T * 2), *scr = falloc(attention_scratch_floats(B, T, H));
#pragma omp parallel
  { /* start the OpenMP workers before measuring */
  }
  const char *names[4] = {"linear_forward", "cola_forward", "attention_forward", "gemm"};
  for (int kind = 0; kind < 4; kind++) {
    long s0, o0, s1, o1;
    thread_ticks(&s0, &o0);
    do {
      if (kind == 0) linear_forward(y, x, W, N, C, C);
      if (kind == 1) cola_forward(y, hp, h, x, A, Bm, N, C, R, C);
      if (kind == 2) attention_forward(y, att, scr, x, x + 1, x + 2, B, T, H, hd);
      if (kind == 3) gemm(0, 1, N, R, C, x, C, A, C, 0.0f, hp, R); /* a bottleneck shape */
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
  free(x), free(W), free(y), free(A), free(Bm), free(hp), free(h), free(att), free(scr);
}
