/* test-backend-ops' harness: seeded host data, backend buffers, verdicts,
 * the bounds of each precision and the run over every op (bops.h). */
#include "bops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bf16.h"
#include "check.h"
#include "util.h"

static int n_checks, n_failed;

/* ---- host data (xorshift64*) ------------------------------------------------------ */
static uint64_t rng = 0x2545F4914F6CDD1Dull;
void g_seed(uint64_t seed) { rng = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull; }
static double u01(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
void g_fill(float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)u01();
}
float *g_new(size_t n) { return boost_calloc(n ? n : 1, sizeof(float)); }
float *g_rand(size_t n, float lo, float hi) {
  float *x = g_new(n);
  g_fill(x, n, lo, hi);
  return x;
}
int32_t *g_tokens(size_t n, int V) {
  int32_t *t = boost_calloc(n ? n : 1, sizeof *t);
  for (size_t i = 0; i < n; i++) t[i] = (int32_t)(u01() * V) % V;
  return t;
}
int g_dim(int lo, int hi) { return lo + (int)(u01() * (hi - lo + 1)) % (hi - lo + 1); }
float g_round_act(const gcheck *g, float x) { return g->bf16 ? bf16_to_f32(f32_to_bf16(x)) : x; }

/* ---- backend data ------------------------------------------------------------------ */
static void to_host_act(const gcheck *g, void *host, const float *h, size_t n) {
  if (g->bf16)
    for (size_t i = 0; i < n; i++) ((bf16_t *)host)[i] = f32_to_bf16(h[i]);
  else
    memcpy(host, h, n * sizeof(float));
}
static void from_host_act(const gcheck *g, float *out, const void *host, size_t n) {
  if (g->bf16)
    for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(((const bf16_t *)host)[i]);
  else
    memcpy(out, host, n * sizeof(float));
}
void *g_act_empty(gcheck *g, size_t n) { return boost_be_alloc(g->be, boost_act_bytes(g->be, n), "a check buffer"); }
void *g_act(gcheck *g, float *h, size_t n) {
  void *host = boost_calloc(n ? n : 1, 4), *d = g_act_empty(g, n);
  to_host_act(g, host, h, n);
  from_host_act(g, h, host, n);
  g->be->mem->upload(g->be, d, host, boost_act_bytes(g->be, n));
  boost_free(host);
  return d;
}
float *g_f32(gcheck *g, const float *h, size_t n) {
  float *d = boost_be_alloc(g->be, n * 4 + 4, "a check buffer");
  g->be->mem->upload(g->be, d, h, n * 4);
  return d;
}
int32_t *g_i32(gcheck *g, const int32_t *h, size_t n) {
  int32_t *d = boost_be_alloc(g->be, n * 4 + 4, "a check buffer");
  g->be->mem->upload(g->be, d, h, n * 4);
  return d;
}
void g_read_act(gcheck *g, float *out, const void *dev, size_t n) {
  void *host = boost_calloc(n ? n : 1, 4);
  g->be->mem->download(g->be, host, dev, boost_act_bytes(g->be, n));
  from_host_act(g, out, host, n);
  boost_free(host);
}
void g_read_f32(gcheck *g, float *out, const float *dev, size_t n) { g->be->mem->download(g->be, out, dev, n * 4); }
void g_free(gcheck *g, const void *dev) { g->be->mem->free(g->be, (void *)dev); }

/* ---- verdicts -------------------------------------------------------------------------- */
static const char *act_name(const gcheck *g) { return g->bf16 ? "bf16" : "f32 "; }

void g_cmp(gcheck *g, const char *what, const float *got, const float *want, size_t n, double tol) {
  double num = 0, den = 0, maxe = 0, maxw = 0;
  int finite = 1;
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)got[i] - (double)want[i]);
    finite &= isfinite(got[i]) == isfinite(want[i]);
    num += e * e, den += (double)want[i] * want[i];
    maxe = e > maxe ? e : maxe;
    maxw = fabs(want[i]) > maxw ? fabs(want[i]) : maxw;
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num), mx = maxw > 0 ? maxe / maxw : maxe;
  const int ok = finite && rel <= tol && !isnan(rel);
  n_checks++;
  n_failed += !ok;
  printf("%s %s %-42s rel_l2 %.2e (max %.2e) tol %.0e%s\n", ok ? "ok  " : "FAIL", act_name(g), what, rel, mx, tol,
         finite ? "" : " (non-finite)");
}
void g_cmp_act(gcheck *g, const char *what, const void *dev, const float *want, size_t n, double tol) {
  float *got = g_new(n);
  g_read_act(g, got, dev, n);
  g_cmp(g, what, got, want, n, tol);
  boost_free(got);
}
void g_cmp_f32(gcheck *g, const char *what, const float *dev, const float *want, size_t n, double tol) {
  float *got = g_new(n);
  g_read_f32(g, got, dev, n);
  g_cmp(g, what, got, want, n, tol);
  boost_free(got);
}
void g_same(gcheck *g, const char *what, const void *a, const void *b, size_t bytes) {
  g_true(g, what, memcmp(a, b, bytes) == 0);
}
void g_true(gcheck *g, const char *what, int ok) {
  n_checks++;
  n_failed += !ok;
  printf("%s %s %s\n", ok ? "ok  " : "FAIL", act_name(g), what);
}
void g_totals(int *checks, int *failed) {
  *checks = n_checks;
  *failed = n_failed;
}

/* ---- the run ------------------------------------------------------------------------------ */

int bops_run(boost_backend *be, boost_backend *ref, int small) {
  gcheck g = {.be = be, .ref = ref, .bf16 = be->act_dtype == BOOST_BF16, .small = small};
  /* bf16: 2^-8 relative per rounding of a result (nearest even), a few
   * roundings where a chain of them meets (docs/PRECISION.md); fp32: the
   * order of float sums */
  g.tol_f32 = g.bf16 ? 2e-3 : 2e-5;
  g.tol_act = g.bf16 ? 1e-2 : 2e-5;
  g.tol_chain = g.bf16 ? 3e-2 : 5e-5;
  const int failed_before = n_failed;
  check_dense(&g);
  check_elementwise(&g);
  check_norms(&g);
  check_embedding_rope(&g);
  check_loss(&g);
  check_optimizer(&g);
  check_attention(&g);
  if (!g.bf16) check_gradients(&g);
  be->mem->sync(be);
  for (int op = 0; op < BOOST_OP_COUNT; op++)
    if (!g.covered[op]) {
      char what[96];
      snprintf(what, sizeof what, "%s: no check of test-backend-ops runs this op", boost_op_names[op]);
      g_true(&g, what, 0);
    }
  return n_failed - failed_before;
}
