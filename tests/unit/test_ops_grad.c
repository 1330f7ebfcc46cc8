/* Unit tests of the CPU kernels (kernels/cpu/ops.h), suite ops_grad: for
 * every op a central finite-difference check of the backward against the
 * fp32 forward, on the scalar loss L = sum(out * R) with random R (so
 * dout = R). Parameter gradients start from random values and the check
 * uses (dW_after - dW_before), which also proves they accumulate;
 * activation gradients start as NaN, which proves they are assigned. Each
 * check states eps and tolerance (|analytic - numeric| <= atol +
 * rtol*|numeric|) in a comment and in its failure message, and also asserts
 * the gradient is not ~0 (a check of two zeros could not fail). Sizes are
 * small and odd. */
#include "ops_testkit.h"

TestSuite(ops_grad, .init = two_threads);

/* ============================================================ embedding */

typedef struct {
  int N, V, C;
  const int32_t *tok;
  float *wte, *out, *R;
} emb_ctx;
static double emb_loss(void *p) {
  emb_ctx *c = p;
  kern_embedding_forward(c->out, c->tok, c->wte, c->N, c->V, c->C);
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
  kern_embedding_backward(dw, c.R, tok, N, V, C);
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
  kern_rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->N, c->C, c->eps);
  return dotd(c->out, c->R, (size_t)c->N * c->C);
}

Test(ops_grad, rmsnorm) {
  rng_seed(12);
  enum { N = 5, C = 7 };
  rms_ctx c = {N, C, 1e-5f, frand(N * C, -2, 2), frand(C, 0.5f, 1.5f), fnan(N * C), fnan(N), frand(N * C, -1, 1)};
  rms_loss(&c);
  float *dx = fnan(N * C), *g0 = frand(C, -1, 1), *dw = fcopy(g0, C);
  kern_rmsnorm_backward(dx, dw, c.R, c.x, c.w, c.rstd, N, C);
  float *gw = fdiff(dw, g0, C);
  /* eps 1e-2 (x ~ U(-2,2)): tol 1e-3 + 1e-3 rel */
  fd_check("rmsnorm dx", c.x, N * C, dx, rms_loss, &c, 1e-2f, 1e-3, 1e-3);
  /* linear in w: tol 1e-4 + 1e-4 rel */
  fd_check("rmsnorm dw", c.w, C, gw, rms_loss, &c, 1e-2f, 1e-4, 1e-4);
  /* NULL dx skips it and leaves dw identical */
  float *dw2 = fcopy(g0, C);
  kern_rmsnorm_backward(NULL, dw2, c.R, c.x, c.w, c.rstd, N, C);
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
  kern_rope_forward(c->out, c->in, c->cos_t, c->sin_t, c->B, c->T, c->H, c->hd);
  return dotd(c->out, c->R, (size_t)c->B * c->T * c->H * c->hd);
}

Test(ops_grad, rope) {
  rng_seed(13);
  enum { B = 2, T = 5, H = 2, hd = 6 };
  size_t n = (size_t)B * T * H * hd;
  rope_ctx c = {B, T, H, hd, frand(n, -1, 1), fnan(n), falloc(T * hd / 2), falloc(T * hd / 2), frand(n, -1, 1)};
  kern_rope_tables(c.cos_t, c.sin_t, T, hd, 10.0f); /* small theta: large angles */
  rope_loss(&c);
  float *din = fnan(n);
  kern_rope_backward(din, c.R, c.cos_t, c.sin_t, B, T, H, hd);
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
  kern_attention_forward(c->out, c->att, c->scr, c->q, c->k, c->v, c->B, c->T, c->H, c->hd);
  return dotd(c->out, c->R, (size_t)c->B * c->T * c->H * c->hd);
}

static void attention_fd(int B, int T, int H, int hd, uint64_t seed, const char *tag) {
  rng_seed(seed);
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * 2;
  float *scratch = fnan(kern_attention_scratch_floats(B, T, H));
  att_ctx c = {B, T, H, hd, frand(n, -1.5f, 1.5f), frand(n, -1.5f, 1.5f), frand(n, -1, 1), fnan(n), fnan(na),
               frand(n, -1, 1), scratch};
  att_loss(&c);
  float *dq = fnan(n), *dk = fnan(n), *dv = fnan(n);
  kern_attention_backward(dq, dk, dv, scratch, c.R, c.q, c.k, c.v, c.att, B, T, H, hd);
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
  kern_attention_backward(dq2, NULL, NULL, scratch, c.R, c.q, c.k, c.v, c.att, B, T, H, hd);
  kern_attention_backward(NULL, NULL, dv2, scratch, c.R, c.q, c.k, c.v, c.att, B, T, H, hd);
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
  if (c->op == 0) kern_silu_forward(c->out, c->a, c->n);
  if (c->op == 1) kern_mul_forward(c->out, c->a, c->b, c->n);
  if (c->op == 2) kern_add_forward(c->out, c->a, c->b, c->n);
  return dotd(c->out, c->R, c->n);
}

Test(ops_grad, silu) {
  rng_seed(16);
  enum { n = 13 };
  ew_ctx c = {n, frand(n, -4, 4), NULL, fnan(n), frand(n, -1, 1), 0};
  ew_loss(&c);
  float *dx = fnan(n);
  kern_silu_backward(dx, c.R, c.a, n);
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
  kern_mul_backward(da, db, c.R, c.a, c.b, n);
  /* bilinear, exact in each argument: tol 1e-5 + 1e-4 rel */
  fd_check("mul da", c.a, n, da, ew_loss, &c, 1e-2f, 1e-5, 1e-4);
  fd_check("mul db", c.b, n, db, ew_loss, &c, 1e-2f, 1e-5, 1e-4);
  float *da2 = fnan(n), *db2 = fnan(n);
  kern_mul_backward(da2, NULL, c.R, c.a, c.b, n);
  kern_mul_backward(NULL, db2, c.R, c.a, c.b, n);
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
  kern_linear_forward(c->out, c->in, c->W, c->N, c->Cin, c->Cout);
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
  kern_linear_backward(din, dW, c.R, c.in, c.W, N, Cin, Cout);
  float *gW = fdiff(dW, g0, Cout * Cin);
  /* linear in each argument: eps 1e-2, tol 1e-4 + 1e-4 rel */
  fd_check("linear din", c.in, N * Cin, din, lin_loss, &c, 1e-2f, 1e-4, 1e-4);
  fd_check("linear dW", c.W, Cout * Cin, gW, lin_loss, &c, 1e-2f, 1e-4, 1e-4);
  float *dW2 = fcopy(g0, Cout * Cin);
  kern_linear_backward(NULL, dW2, c.R, c.in, c.W, N, Cin, Cout);
  assert_bitwise("linear dW with din NULL", dW, dW2, Cout * Cin * sizeof(float));
  free(c.in), free(c.W), free(c.out), free(c.R), free(din), free(g0), free(dW), free(gW), free(dW2);
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
  kern_crossentropy_forward(c->losses, c->logits, c->tgt, c->N, c->V);
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
  kern_crossentropy_backward(dl, l2, c.logits, tgt, N, V, c.dloss);
  for (int n = 0; n < N; n++)
    cr_assert(fabs(l2[n] - c.losses[n]) <= 1e-6 * (1 + c.losses[n]),
              "crossentropy_backward loss[%d] = %.8g but forward gave %.8g", n, l2[n], c.losses[n]);
  /* eps 1e-2 on logits ~U(-3,3): tol 1e-4 + 1e-3 rel */
  fd_check("crossentropy dlogits", c.logits, N * V, dl, ce_loss, &c, 1e-2f, 1e-4, 1e-3);
  free(c.logits), free(c.losses), free(dl), free(l2);
}
