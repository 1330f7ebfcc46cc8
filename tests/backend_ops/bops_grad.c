/* test-backend-ops' gradient checks (float backends): each backward of the
 * backend under test against central finite differences of its forward on
 * the same backend, along one direction d per input:
 *   <gy, (f(x + h d) - f(x - h d)) / 2h>  against  <dx, d>
 * where dx is what the backward gives for the output gradient gy. One
 * scalar per input keeps float rounding out of the way (a sum over many
 * elements). d = u + dx / rms(dx), u uniform in [-1, 1]: the dx part makes
 * <dx, d> large (no cancellation to hide a wrong scale in), the random
 * part sees gradients the backward left out. Shapes are small and drawn at
 * random. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bops.h"
#include "check.h"
#include "util.h"

#define FD_STEP 1e-2f
#define FD_TOL 1e-2 /* relative, of max(|analytic|, |numeric|, 1e-3) */
#define FD_MAX_IN 4

/* a forward on the backend under test: inputs x[i] (host), output y (host) */
typedef void (*fd_forward)(gcheck *g, const int *d, float *const *x, float *y);

typedef struct {
  const char *op;
  const char *names[FD_MAX_IN];
  size_t nx[FD_MAX_IN];
  int nin;
  size_t ny;
} fd_case;

static double dot(const float *a, const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* dx[i] NULL: input i has no gradient to check */
static void fd_check(gcheck *g, const fd_case *c, const int *d, fd_forward f, float *const *x, const float *gy,
                     float *const *dx) {
  float *yp = g_new(c->ny), *ym = g_new(c->ny);
  for (int i = 0; i < c->nin; i++) {
    if (!dx[i]) continue;
    float *dir = g_rand(c->nx[i], -1, 1), *keep = g_new(c->nx[i]);
    const double rms = sqrt(dot(dx[i], dx[i], c->nx[i]) / (double)c->nx[i]);
    for (size_t j = 0; rms > 0 && j < c->nx[i]; j++) dir[j] += (float)(dx[i][j] / rms);
    memcpy(keep, x[i], c->nx[i] * sizeof *keep);
    for (size_t j = 0; j < c->nx[i]; j++) x[i][j] = keep[j] + FD_STEP * dir[j];
    f(g, d, x, yp);
    for (size_t j = 0; j < c->nx[i]; j++) x[i][j] = keep[j] - FD_STEP * dir[j];
    f(g, d, x, ym);
    memcpy(x[i], keep, c->nx[i] * sizeof *keep);
    double num = 0;
    for (size_t j = 0; j < c->ny; j++) num += (double)gy[j] * ((double)yp[j] - ym[j]) / (2.0 * FD_STEP);
    const double ana = dot(dx[i], dir, c->nx[i]);
    const double scale = fmax(fmax(fabs(num), fabs(ana)), 1e-3);
    char what[160];
    snprintf(what, sizeof what, "grad %s d%s: finite differences %.6g, backward %.6g", c->op, c->names[i], num, ana);
    g_true(g, what, fabs(num - ana) <= FD_TOL * scale);
    boost_free(dir), boost_free(keep);
  }
  boost_free(yp), boost_free(ym);
}

/* ---- host <-> backend in one line each ---- */
static void *up(gcheck *g, const float *h, size_t n) { return g_f32(g, h, n); } /* float act: the same bytes */
static void down(gcheck *g, float *h, const void *dev, size_t n) { g_read_f32(g, h, dev, n); }

/* ---- forwards (d: the case's dimensions) ---- */
static void silu_f(gcheck *g, const int *d, float *const *x, float *y) {
  void *dx = up(g, x[0], (size_t)d[0]), *dy = g_act_empty(g, (size_t)d[0]);
  RUN(1, silu_forward, dy, dx, (size_t)d[0]);
  down(g, y, dy, (size_t)d[0]);
  g_free(g, dx), g_free(g, dy);
}
static void mul_f(gcheck *g, const int *d, float *const *x, float *y) {
  void *a = up(g, x[0], (size_t)d[0]), *b = up(g, x[1], (size_t)d[0]), *o = g_act_empty(g, (size_t)d[0]);
  RUN(1, mul_forward, o, a, b, (size_t)d[0]);
  down(g, y, o, (size_t)d[0]);
  g_free(g, a), g_free(g, b), g_free(g, o);
}
static void rmsnorm_f(gcheck *g, const int *d, float *const *x, float *y) {
  const size_t n = (size_t)d[0] * d[1];
  void *dx = up(g, x[0], n), *dw = up(g, x[1], (size_t)d[1]), *o = g_act_empty(g, n);
  float *r = g_f32(g, y, (size_t)d[0]);
  RUN(1, rmsnorm_forward, o, r, dx, dw, d[0], d[1], 1e-5f);
  down(g, y, o, n);
  g_free(g, dx), g_free(g, dw), g_free(g, o), g_free(g, r);
}
static void linear_f(gcheck *g, const int *d, float *const *x, float *y) {
  void *in = up(g, x[0], (size_t)d[0] * d[1]), *W = up(g, x[1], (size_t)d[2] * d[1]);
  void *o = g_act_empty(g, (size_t)d[0] * d[2]);
  RUN(1, linear_forward, o, in, W, d[0], d[1], d[2]);
  down(g, y, o, (size_t)d[0] * d[2]);
  g_free(g, in), g_free(g, W), g_free(g, o);
}
/* d: B, T, H, hd; the tables are computed on the backend */
static float *rope_tab(gcheck *g, int T, int hd) {
  float *t = boost_be_alloc(g->be, (size_t)T * hd * sizeof(float), "rope tables");
  RUN(1, rope_tables, t, t + (size_t)T * hd / 2, T, hd, 10000.0f);
  return t;
}
static void rope_f(gcheck *g, const int *d, float *const *x, float *y) {
  const size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
  float *t = rope_tab(g, d[1], d[3]);
  void *dx = up(g, x[0], n), *o = g_act_empty(g, n);
  RUN(1, rope_forward, o, dx, t, t + (size_t)d[1] * d[3] / 2, d[0], d[1], d[2], d[3]);
  down(g, y, o, n);
  g_free(g, t), g_free(g, dx), g_free(g, o);
}
static void attention_f(gcheck *g, const int *d, float *const *x, float *y) {
  const size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
  void *q = up(g, x[0], n), *k = up(g, x[1], n), *v = up(g, x[2], n), *o = g_act_empty(g, n);
  float *st = boost_be_alloc(g->be, (size_t)d[0] * d[1] * d[2] * 2 * sizeof(float), "attention statistics");
  void *sc = boost_be_alloc(g->be, CALL(1, attention_scratch_bytes, d[0], d[1], d[2]) + 4, "scratch");
  RUN(1, attention_forward, o, st, sc, q, k, v, d[0], d[1], d[2], d[3]);
  down(g, y, o, n);
  g_free(g, q), g_free(g, k), g_free(g, v), g_free(g, o), g_free(g, st), g_free(g, sc);
}
/* d: N, V; the targets are d[2..] */
static void ce_f(gcheck *g, const int *d, float *const *x, float *y) {
  int32_t *tg = g_i32(g, d + 2, (size_t)d[0]);
  void *lg = up(g, x[0], (size_t)d[0] * d[1]);
  float *l = g_f32(g, y, (size_t)d[0]);
  RUN(1, crossentropy_forward, l, lg, tg, d[0], d[1]);
  down(g, y, l, (size_t)d[0]);
  g_free(g, tg), g_free(g, lg), g_free(g, l);
}
/* the vocab-parallel pieces on one rank holding the whole vocabulary */
static void vocab_ce_f(gcheck *g, const int *d, float *const *x, float *y) {
  const int N = d[0], V = d[1];
  int32_t *tg = g_i32(g, d + 2, (size_t)N);
  void *lg = up(g, x[0], (size_t)N * V);
  float *zeros = g_new(2 * (size_t)N);
  float *mx = g_f32(g, zeros, (size_t)N), *sums = g_f32(g, zeros, 2 * (size_t)N), *l = g_f32(g, zeros, (size_t)N);
  boost_free(zeros);
  RUN(1, vocab_ce_max, mx, lg, N, V);
  RUN(1, vocab_ce_sums, sums, lg, mx, tg, 0, N, V);
  RUN(1, vocab_ce_losses, l, sums, mx, N);
  down(g, y, l, (size_t)N);
  g_free(g, tg), g_free(g, lg), g_free(g, mx), g_free(g, sums), g_free(g, l);
}
/* output: [xg, ss] */
static void gain_sumsq_f(gcheck *g, const int *d, float *const *x, float *y) {
  const size_t n = (size_t)d[0] * d[1];
  void *dx = up(g, x[0], n), *gn = up(g, x[1], (size_t)d[1]), *xg = g_act_empty(g, n);
  float *ss = g_f32(g, y, (size_t)d[0]);
  RUN(1, gain_sumsq_forward, xg, ss, dx, gn, d[0], d[1]);
  down(g, y, xg, n);
  down(g, y + n, ss, (size_t)d[0]);
  g_free(g, dx), g_free(g, gn), g_free(g, xg), g_free(g, ss);
}
/* d: N, w, d_model */
static void online_rms_f(gcheck *g, const int *d, float *const *x, float *y) {
  const size_t n = (size_t)d[0] * d[1];
  void *h = up(g, x[0], n);
  float *ss = g_f32(g, x[1], (size_t)d[0]), *r = g_f32(g, x[1], (size_t)d[0]);
  RUN(1, online_rms_forward, h, r, ss, d[0], d[1], 1.0f / (float)d[2], 1e-5f);
  down(g, y, h, n);
  g_free(g, h), g_free(g, ss), g_free(g, r);
}
static void embedding_f(gcheck *g, const int *d, float *const *x, float *y) {
  const int N = d[0], V = d[1], C = d[2];
  int32_t *tg = g_i32(g, d + 3, (size_t)N);
  void *w = up(g, x[0], (size_t)V * C), *o = g_act_empty(g, (size_t)N * C);
  RUN(1, embedding_forward, o, tg, w, N, V, C);
  down(g, y, o, (size_t)N * C);
  g_free(g, tg), g_free(g, w), g_free(g, o);
}

/* ---- the cases ---- */

static void grad_elementwise(gcheck *g) {
  const int d[1] = {g_dim(1, 300)};
  const size_t n = (size_t)d[0];
  float *x = g_rand(n, -3, 3), *b = g_rand(n, -2, 2), *gy = g_rand(n, -1, 1), *dx = g_new(n), *db = g_new(n);
  void *dX = up(g, x, n), *dB = up(g, b, n), *dG = up(g, gy, n), *dD = g_act_empty(g, n), *dD2 = g_act_empty(g, n);
  RUN(1, silu_backward, dD, dG, dX, n);
  down(g, dx, dD, n);
  fd_check(g, &(fd_case){"silu", {"x"}, {n}, 1, n}, d, silu_f, (float *[]){x}, gy, (float *[]){dx});
  RUN(1, mul_backward, dD, dD2, dG, dX, dB, n);
  down(g, dx, dD, n), down(g, db, dD2, n);
  fd_check(g, &(fd_case){"mul", {"a", "b"}, {n, n}, 2, n}, d, mul_f, (float *[]){x, b}, gy, (float *[]){dx, db});
  g_free(g, dX), g_free(g, dB), g_free(g, dG), g_free(g, dD), g_free(g, dD2);
  boost_free(x), boost_free(b), boost_free(gy), boost_free(dx), boost_free(db);
}

static void grad_rmsnorm_linear(gcheck *g) {
  const int N = g_dim(1, 12), C = g_dim(4, 64), Cout = g_dim(1, 40);
  const size_t n = (size_t)N * C;
  float *x = g_rand(n, -2, 2), *w = g_rand((size_t)C, 0.5f, 1.5f), *gy = g_rand(n, -1, 1), *dx = g_new(n);
  float *dw = g_new((size_t)C), *rstd = g_new((size_t)N);
  void *dX = up(g, x, n), *dW = up(g, w, (size_t)C), *dG = up(g, gy, n), *dO = g_act_empty(g, n);
  float *dR = g_f32(g, rstd, (size_t)N), *dDw = g_f32(g, dw, (size_t)C);
  RUN(1, rmsnorm_forward, dO, dR, dX, dW, N, C, 1e-5f);
  RUN(1, rmsnorm_backward, dO, dDw, dG, dX, dW, dR, N, C);
  down(g, dx, dO, n), down(g, dw, dDw, (size_t)C);
  fd_check(g, &(fd_case){"rmsnorm", {"x", "w"}, {n, (size_t)C}, 2, n}, (int[]){N, C}, rmsnorm_f, (float *[]){x, w},
           gy, (float *[]){dx, dw});
  /* linear: in [N, C] -> [N, Cout] */
  const size_t nw = (size_t)Cout * C, no = (size_t)N * Cout;
  float *W = g_rand(nw, -1, 1), *go = g_rand(no, -1, 1), *dWl = g_new(nw);
  void *dLW = up(g, W, nw), *dGo = up(g, go, no);
  float *dDW = g_f32(g, dWl, nw);
  RUN(1, linear_backward, dO, dDW, dGo, dX, dLW, N, C, Cout);
  down(g, dx, dO, n), down(g, dWl, dDW, nw);
  fd_check(g, &(fd_case){"linear", {"in", "W"}, {n, nw}, 2, no}, (int[]){N, C, Cout}, linear_f, (float *[]){x, W}, go,
           (float *[]){dx, dWl});
  /* btp norm pieces: [xg, ss] of x and gain */
  float *gy2 = g_rand(n + (size_t)N, -1, 1), *dg = g_new((size_t)C);
  void *dG2 = up(g, gy2, n), *dAcc = g_act_empty(g, n);
  float *dDss = g_f32(g, gy2 + n, (size_t)N), *dDg = g_f32(g, dg, (size_t)C);
  RUN(1, gain_sumsq_backward, dAcc, dDg, dG2, dX, dW, dDss, N, C);
  down(g, dx, dAcc, n), down(g, dg, dDg, (size_t)C);
  fd_check(g, &(fd_case){"gain_sumsq", {"x", "gain"}, {n, (size_t)C}, 2, n + (size_t)N}, (int[]){N, C}, gain_sumsq_f,
           (float *[]){x, w}, gy2, (float *[]){dx, dg});
  /* online RMS: h [N, C] scaled by 1/sqrt(ss/d + eps) */
  const int dm = 4 * C;
  float *ss = g_rand((size_t)N, 20, 80), *hs = g_new(n), *dss = g_new((size_t)N);
  void *dH = up(g, x, n);
  float *dSs = g_f32(g, ss, (size_t)N), *dDs = g_f32(g, dss, (size_t)N);
  RUN(1, online_rms_forward, dH, dR, dSs, N, C, 1.0f / (float)dm, 1e-5f);
  g->be->mem->copy(g->be, dAcc, dG, boost_act_bytes(g->be, n));
  RUN(1, online_rms_backward, dAcc, dDs, dH, dR, N, C, 1.0f / (float)dm);
  down(g, dx, dAcc, n), down(g, dss, dDs, (size_t)N);
  fd_check(g, &(fd_case){"online_rms", {"h", "ss"}, {n, (size_t)N}, 2, n}, (int[]){N, C, dm}, online_rms_f,
           (float *[]){x, ss}, gy, (float *[]){dx, dss});
  void *bufs[] = {dX, dW, dG, dO, dR, dDw, dLW, dGo, dDW, dG2, dAcc, dDss, dDg, dH, dSs, dDs};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  float *hb[] = {x, w, gy, dx, dw, rstd, W, go, dWl, gy2, dg, ss, hs, dss};
  for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) boost_free(hb[i]);
}

static void grad_rope_attention(gcheck *g) {
  const int B = g_dim(1, 2), T = g_dim(1, 9), H = g_dim(1, 3), hd = 2 * g_dim(2, 8), d[4] = {B, T, H, hd};
  const size_t n = (size_t)B * T * H * hd;
  float *q = g_rand(n, -1, 1), *k = g_rand(n, -1, 1), *v = g_rand(n, -1, 1), *gy = g_rand(n, -1, 1);
  float *dq = g_new(n), *dk = g_new(n), *dv = g_new(n);
  void *dQ = up(g, q, n), *dK = up(g, k, n), *dV = up(g, v, n), *dG = up(g, gy, n), *dO = g_act_empty(g, n);
  void *dDq = g_act_empty(g, n), *dDk = g_act_empty(g, n), *dDv = g_act_empty(g, n);
  float *t = rope_tab(g, T, hd);
  RUN(1, rope_backward, dDq, dG, t, t + (size_t)T * hd / 2, B, T, H, hd);
  down(g, dq, dDq, n);
  fd_check(g, &(fd_case){"rope", {"x"}, {n}, 1, n}, d, rope_f, (float *[]){q}, gy, (float *[]){dq});
  float *st = boost_be_alloc(g->be, (size_t)B * T * H * 2 * sizeof(float), "attention statistics");
  void *sc = boost_be_alloc(g->be, CALL(1, attention_scratch_bytes, B, T, H) + 4, "scratch");
  RUN(1, attention_forward, dO, st, sc, dQ, dK, dV, B, T, H, hd);
  RUN(1, attention_backward, dDq, dDk, dDv, sc, dG, dQ, dK, dV, st, B, T, H, hd);
  down(g, dq, dDq, n), down(g, dk, dDk, n), down(g, dv, dDv, n);
  fd_check(g, &(fd_case){"attention", {"q", "k", "v"}, {n, n, n}, 3, n}, d, attention_f, (float *[]){q, k, v}, gy,
           (float *[]){dq, dk, dv});
  void *bufs[] = {dQ, dK, dV, dG, dO, dDq, dDk, dDv, t, st, sc};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  float *hb[] = {q, k, v, gy, dq, dk, dv};
  for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) boost_free(hb[i]);
}

static void grad_loss_embedding(gcheck *g) {
  enum { NMAX = 8 };
  const int N = g_dim(1, NMAX), V = g_dim(2, 60), C = g_dim(1, 16);
  int d[2 + NMAX] = {N, V}, e[3 + NMAX] = {N, V, C}; /* targets at d + 2, tokens at e + 3 */
  for (int i = 0; i < N; i++) d[2 + i] = g_dim(0, V - 1), e[3 + i] = g_dim(0, V - 1);
  const size_t nl = (size_t)N * V;
  float *lg = g_rand(nl, -3, 3), *dl = g_new(nl), gy[NMAX];
  const float dloss = 0.37f;
  for (int i = 0; i < N; i++) gy[i] = dloss; /* the backward takes one dloss for every row */
  int32_t *tg = g_i32(g, d + 2, (size_t)N);
  void *dL = up(g, lg, nl);
  float *dLoss = g_f32(g, gy, (size_t)N);
  RUN(1, crossentropy_backward, dL, dLoss, dL, tg, N, V, dloss);
  down(g, dl, dL, nl);
  fd_check(g, &(fd_case){"crossentropy", {"logits"}, {nl}, 1, (size_t)N}, d, ce_f, (float *[]){lg}, gy,
           (float *[]){dl});
  /* the vocab-parallel pieces: backward in place from the forward's statistics */
  float zeros[2 * NMAX] = {0};
  float *mx = g_f32(g, zeros, (size_t)N), *sums = g_f32(g, zeros, 2 * (size_t)N);
  g->be->mem->upload(g->be, dL, lg, nl * sizeof(float));
  RUN(1, vocab_ce_max, mx, dL, N, V);
  RUN(1, vocab_ce_sums, sums, dL, mx, tg, 0, N, V);
  RUN(1, vocab_ce_backward, dL, sums, mx, tg, 0, N, V, dloss);
  down(g, dl, dL, nl);
  fd_check(g, &(fd_case){"vocab_ce", {"logits"}, {nl}, 1, (size_t)N}, d, vocab_ce_f, (float *[]){lg}, gy,
           (float *[]){dl});
  /* embedding: linear in wte */
  const size_t nw = (size_t)V * C, no = (size_t)N * C;
  float *w = g_rand(nw, -1, 1), *go = g_rand(no, -1, 1), *dw = g_new(nw);
  int32_t *et = g_i32(g, e + 3, (size_t)N);
  void *dGo = up(g, go, no);
  float *dDw = g_f32(g, dw, nw);
  RUN(1, embedding_backward, dDw, dGo, et, N, V, C);
  down(g, dw, dDw, nw);
  fd_check(g, &(fd_case){"embedding", {"wte"}, {nw}, 1, no}, e, embedding_f, (float *[]){w}, go,
           (float *[]){dw});
  g_free(g, tg), g_free(g, dL), g_free(g, dLoss), g_free(g, mx), g_free(g, sums), g_free(g, et), g_free(g, dGo);
  g_free(g, dDw);
  boost_free(lg), boost_free(dl), boost_free(w), boost_free(go), boost_free(dw);
}

void check_gradients(gcheck *g) {
  grad_elementwise(g);
  grad_rmsnorm_linear(g);
  grad_rope_attention(g);
  grad_loss_embedding(g);
}
