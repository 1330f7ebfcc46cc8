/* boost-gpu-check: every CUDA op (kernels/cuda/cuda_ops.h) against the CPU
 * kernels (kernels/cpu/ops.h) on random inputs, then a throughput line for a
 * cola-60m-shaped CoLA forward+backward GEMM set.
 *
 * Method: inputs are drawn in fp32 on the host, rounded to bf16 ON THE
 * DEVICE, and the rounded values are read back and handed to the CPU
 * reference, so both sides see identical inputs and the comparison measures
 * only the device op's own error (bf16 intermediates and outputs, fp32
 * accumulation order). Each output is reported as a normalised error
 *   rel_l2 = ||gpu - cpu||_2 / ||cpu||_2     (max: max|gpu-cpu| / max|cpu|)
 * against a tolerance for its precision class:
 *   exact   copies (embedding forward, conversions)
 *   f32     fp32 results from identical inputs (param grads, rstd, losses, AdamW)
 *   bf16    one bf16 rounding of an fp32 result (~2^-9 relative per element)
 *   chain   several bf16 roundings in a row (attention, CoLA backward)
 * Parameter gradients start from random values on both sides, which checks
 * that they accumulate. Some ops also run twice to check that the result is
 * bitwise deterministic.
 *
 * Exit: 0 all checks passed; 1 a mismatch; 77 "SKIP: no CUDA device" when
 * cudaGetDeviceCount fails or finds none. Environment: BOOST_GPU_DEVICE
 * (default 0); BOOST_GPU_BENCH=0 skips the throughput part (gpu_bench.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "cuda_ops.h"
#include "gpu_check.h"
#include "ops.h"
#ifdef BOOST_HAVE_NCCL
#include "nccl_comm.h"
#endif

#define TOL_EXACT 0.0
#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define TOL_CHAIN 3e-2

gpu_ctx ctx;
static int n_checks, n_failed;

/* ---- random numbers (xorshift64*, fixed seed) ----------------------------- */
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform [-1, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  uint64_t r = rng * 0x2545F4914F6CDD1Dull;
  return (float)((double)(r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
void fill(float *x, size_t n, float scale, float offset) {
  for (size_t i = 0; i < n; i++) x[i] = offset + scale * frand();
}
static int32_t irand(int32_t n) { return (int32_t)((frand() * 0.5f + 0.5f) * (float)n) % n; }

float *hnew(size_t n) { return (float *)boost_calloc(n ? n : 1, sizeof(float)); }

/* ---- host <-> device ------------------------------------------------------ */
/* bf16 device copy of h; the rounded values are written back into h. */
static gpu_bf16 *dev_bf16(float *h, size_t n) {
  float *tmp = (float *)gpu_malloc(n * sizeof(float));
  gpu_bf16 *d = (gpu_bf16 *)gpu_malloc(n * sizeof(gpu_bf16));
  gpu_upload(&ctx, tmp, h, n * sizeof(float));
  gpu_f32_to_bf16(&ctx, d, tmp, n);
  gpu_bf16_to_f32(&ctx, tmp, d, n);
  gpu_download(&ctx, h, tmp, n * sizeof(float));
  gpu_free(tmp);
  return d;
}
float *dev_f32(const float *h, size_t n) {
  float *d = (float *)gpu_malloc(n * sizeof(float));
  gpu_upload(&ctx, d, h, n * sizeof(float));
  return d;
}
gpu_bf16 *dev_bf16_empty(size_t n) {
  gpu_bf16 *d = (gpu_bf16 *)gpu_malloc(n * sizeof(gpu_bf16));
  gpu_zero(&ctx, d, n * sizeof(gpu_bf16));
  return d;
}
float *dev_f32_empty(size_t n) {
  float *d = (float *)gpu_malloc(n * sizeof(float));
  gpu_zero(&ctx, d, n * sizeof(float));
  return d;
}
static float *get_bf16(const gpu_bf16 *d, size_t n) {
  float *h = hnew(n);
  float *tmp = (float *)gpu_malloc(n * sizeof(float));
  gpu_bf16_to_f32(&ctx, tmp, d, n);
  gpu_download(&ctx, h, tmp, n * sizeof(float));
  gpu_free(tmp);
  return h;
}
static float *get_f32(const float *d, size_t n) {
  float *h = hnew(n);
  gpu_download(&ctx, h, d, n * sizeof(float));
  return h;
}
static int32_t *dev_i32(const int32_t *h, size_t n) {
  int32_t *d = (int32_t *)gpu_malloc(n * sizeof(int32_t));
  gpu_upload(&ctx, d, h, n * sizeof(int32_t));
  return d;
}

/* ---- comparison ------------------------------------------------------------ */
static void check(const char *op, const char *what, const float *got, const float *ref, size_t n, double tol) {
  double num = 0.0, den = 0.0, maxd = 0.0, maxr = 0.0;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - (double)ref[i];
    if (!isfinite(got[i]) && isfinite(ref[i])) bad = 1;
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
    if (fabs(d) > maxd) maxd = fabs(d);
    if (fabs((double)ref[i]) > maxr) maxr = fabs((double)ref[i]);
  }
  double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
  double mx = maxr > 0.0 ? maxd / maxr : maxd;
  int ok = !bad && !isnan(rel) && (tol == 0.0 ? num == 0.0 : rel <= tol);
  n_checks++;
  if (!ok) n_failed++;
  printf("%-28s %-10s rel_l2 %9.2e  max %9.2e  tol %7.0e  %s\n", op, what, rel, mx, tol, ok ? "ok" : "FAIL");
}
static void check_bits(const char *op, const char *what, const void *a, const void *b, size_t bytes) {
  int ok = memcmp(a, b, bytes) == 0;
  n_checks++;
  if (!ok) n_failed++;
  printf("%-28s %-10s %-52s %s\n", op, what, "bitwise repeat", ok ? "ok" : "FAIL");
}
static void check_scalar(const char *op, const char *what, double got, double ref, double tol) {
  double rel = fabs(got - ref) / (fabs(ref) > 0 ? fabs(ref) : 1.0);
  int ok = !isnan(rel) && rel <= tol;
  n_checks++;
  if (!ok) n_failed++;
  printf("%-28s %-10s rel     %9.2e  (%.17g vs %.17g)  %s\n", op, what, rel, got, ref, ok ? "ok" : "FAIL");
}

static float bf16_round_host(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return f; /* NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_convert(size_t n) {
  char name[64];
  snprintf(name, sizeof name, "convert n=%zu", n);
  float *h = hnew(n), *ref = hnew(n);
  fill(h, n, 100.0f, 0.0f);
  for (size_t i = 0; i < n; i++) ref[i] = bf16_round_host(h[i]);
  gpu_bf16 *d = dev_bf16(h, n); /* h now holds the device-rounded values */
  check(name, "f32->bf16", h, ref, n, TOL_EXACT);
  gpu_free(d);
  boost_free(h);
  boost_free(ref);
}

static void test_embedding(int N, int V, int C) {
  char name[64];
  snprintf(name, sizeof name, "embedding N%d V%d C%d", N, V, C);
  int32_t *tok = (int32_t *)boost_calloc((size_t)N, sizeof(int32_t));
  for (int i = 0; i < N; i++) tok[i] = irand(V);
  float *wte = hnew((size_t)V * C), *out = hnew((size_t)N * C);
  fill(wte, (size_t)V * C, 1.0f, 0.0f);
  gpu_bf16 *d_wte = dev_bf16(wte, (size_t)V * C);
  int32_t *d_tok = dev_i32(tok, (size_t)N);
  gpu_bf16 *d_out = dev_bf16_empty((size_t)N * C);
  embedding_forward(out, tok, wte, N, V, C);
  gpu_embedding_forward(&ctx, d_out, d_tok, d_wte, N, V, C);
  float *g_out = get_bf16(d_out, (size_t)N * C);
  check(name, "out", g_out, out, (size_t)N * C, TOL_EXACT);

  float *dout = hnew((size_t)N * C), *dwte = hnew((size_t)V * C);
  fill(dout, (size_t)N * C, 1.0f, 0.0f);
  fill(dwte, (size_t)V * C, 1.0f, 0.0f);
  gpu_bf16 *d_dout = dev_bf16(dout, (size_t)N * C);
  float *d_dwte = dev_f32(dwte, (size_t)V * C);
  embedding_backward(dwte, dout, tok, N, V, C);
  gpu_embedding_backward(&ctx, d_dwte, d_dout, d_tok, N, V, C);
  float *g_dwte = get_f32(d_dwte, (size_t)V * C);
  check(name, "dwte+=", g_dwte, dwte, (size_t)V * C, TOL_F32);
  /* determinism: from zero twice */
  gpu_zero(&ctx, d_dwte, (size_t)V * C * sizeof(float));
  gpu_embedding_backward(&ctx, d_dwte, d_dout, d_tok, N, V, C);
  float *r1 = get_f32(d_dwte, (size_t)V * C);
  gpu_zero(&ctx, d_dwte, (size_t)V * C * sizeof(float));
  gpu_embedding_backward(&ctx, d_dwte, d_dout, d_tok, N, V, C);
  float *r2 = get_f32(d_dwte, (size_t)V * C);
  check_bits(name, "dwte", r1, r2, (size_t)V * C * sizeof(float));

  gpu_free(d_wte), gpu_free(d_tok), gpu_free(d_out), gpu_free(d_dout), gpu_free(d_dwte);
  boost_free(tok), boost_free(wte), boost_free(out), boost_free(g_out), boost_free(dout), boost_free(dwte);
  boost_free(g_dwte), boost_free(r1), boost_free(r2);
}

static void test_rmsnorm(int N, int C) {
  char name[64];
  snprintf(name, sizeof name, "rmsnorm N%d C%d", N, C);
  size_t nc = (size_t)N * C;
  float *x = hnew(nc), *w = hnew(C), *out = hnew(nc), *rstd = hnew(N);
  fill(x, nc, 2.0f, 0.3f);
  fill(w, C, 0.2f, 1.0f);
  gpu_bf16 *d_x = dev_bf16(x, nc), *d_w = dev_bf16(w, C), *d_out = dev_bf16_empty(nc);
  float *d_rstd = dev_f32_empty(N);
  rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  gpu_rmsnorm_forward(&ctx, d_out, d_rstd, d_x, d_w, N, C, 1e-5f);
  float *g = get_bf16(d_out, nc), *gr = get_f32(d_rstd, N);
  check(name, "out", g, out, nc, TOL_BF16);
  check(name, "rstd", gr, rstd, N, TOL_F32);

  float *dout = hnew(nc), *dx = hnew(nc), *dw = hnew(C);
  fill(dout, nc, 1.0f, 0.0f);
  fill(dw, C, 1.0f, 0.0f);
  gpu_bf16 *d_dout = dev_bf16(dout, nc), *d_dx = dev_bf16_empty(nc);
  float *d_dw = dev_f32(dw, C);
  rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C);
  gpu_rmsnorm_backward(&ctx, d_dx, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
  float *gdx = get_bf16(d_dx, nc), *gdw = get_f32(d_dw, C);
  check(name, "dx", gdx, dx, nc, TOL_BF16);
  check(name, "dw+=", gdw, dw, C, 1e-4);

  gpu_free(d_x), gpu_free(d_w), gpu_free(d_out), gpu_free(d_rstd), gpu_free(d_dout), gpu_free(d_dx), gpu_free(d_dw);
  boost_free(x), boost_free(w), boost_free(out), boost_free(rstd), boost_free(g), boost_free(gr);
  boost_free(dout), boost_free(dx), boost_free(dw), boost_free(gdx), boost_free(gdw);
}

static void test_rope(int B, int T, int H, int hd) {
  char name[64];
  snprintf(name, sizeof name, "rope B%d T%d H%d hd%d", B, T, H, hd);
  size_t n = (size_t)B * T * H * hd, nt = (size_t)T * (hd / 2);
  float *ct = hnew(nt), *st = hnew(nt);
  rope_tables(ct, st, T, hd, 10000.0f);
  float *d_ct = dev_f32_empty(nt), *d_st = dev_f32_empty(nt);
  gpu_rope_tables(&ctx, d_ct, d_st, T, hd, 10000.0f);
  float *gct = get_f32(d_ct, nt), *gst = get_f32(d_st, nt);
  check(name, "cos", gct, ct, nt, TOL_EXACT);
  check(name, "sin", gst, st, nt, TOL_EXACT);
  float *x = hnew(n), *out = hnew(n), *dout = hnew(n), *din = hnew(n);
  fill(x, n, 1.0f, 0.0f);
  fill(dout, n, 1.0f, 0.0f);
  gpu_bf16 *d_x = dev_bf16(x, n), *d_dout = dev_bf16(dout, n), *d_out = dev_bf16_empty(n), *d_din = dev_bf16_empty(n);
  rope_forward(out, x, ct, st, B, T, H, hd);
  rope_backward(din, dout, ct, st, B, T, H, hd);
  gpu_rope_forward(&ctx, d_out, d_x, d_ct, d_st, B, T, H, hd);
  gpu_rope_backward(&ctx, d_din, d_dout, d_ct, d_st, B, T, H, hd);
  float *g = get_bf16(d_out, n), *gd = get_bf16(d_din, n);
  check(name, "out", g, out, n, TOL_BF16);
  check(name, "din", gd, din, n, TOL_BF16);
  /* in place */
  gpu_rope_forward(&ctx, d_x, d_x, d_ct, d_st, B, T, H, hd);
  float *gi = get_bf16(d_x, n);
  check(name, "inplace", gi, g, n, TOL_EXACT);
  gpu_free(d_ct), gpu_free(d_st), gpu_free(d_x), gpu_free(d_dout), gpu_free(d_out), gpu_free(d_din);
  boost_free(ct), boost_free(st), boost_free(gct), boost_free(gst), boost_free(x), boost_free(out);
  boost_free(dout), boost_free(din), boost_free(g), boost_free(gd), boost_free(gi);
}

static void test_attention(int B, int T, int H, int hd) {
  char name[64];
  snprintf(name, sizeof name, "attention B%d T%d H%d hd%d", B, T, H, hd);
  size_t n = (size_t)B * T * H * hd, na = (size_t)B * H * T * T;
  /* the CPU reference keeps row stats, not probabilities: the GPU's att is
   * checked through out and the gradients that are computed from it */
  float *q = hnew(n), *k = hnew(n), *v = hnew(n), *out = hnew(n), *att = hnew((size_t)B * H * T * 2),
        *scr = hnew(attention_scratch_floats(B, T, H));
  fill(q, n, 2.0f, 0.0f);
  fill(k, n, 2.0f, 0.0f);
  fill(v, n, 1.0f, 0.0f);
  gpu_bf16 *d_q = dev_bf16(q, n), *d_k = dev_bf16(k, n), *d_v = dev_bf16(v, n);
  gpu_bf16 *d_out = dev_bf16_empty(n), *d_att = dev_bf16_empty(na);
  float *d_scr = dev_f32_empty(na);
  attention_forward(out, att, scr, q, k, v, B, T, H, hd);
  gpu_attention_forward(&ctx, d_out, d_att, d_scr, d_q, d_k, d_v, B, T, H, hd);
  float *g = get_bf16(d_out, n), *ga = get_bf16(d_att, na);
  check(name, "out", g, out, n, TOL_CHAIN);
  float *sums = hnew((size_t)B * H * T), *ones = hnew((size_t)B * H * T); /* each row of P sums to 1 */
  for (size_t r = 0; r < (size_t)B * H * T; r++) {
    double sum = 0;
    for (int j = 0; j < T; j++) sum += ga[r * T + j];
    sums[r] = (float)sum, ones[r] = 1.0f;
  }
  check(name, "att row sums", sums, ones, (size_t)B * H * T, TOL_BF16);
  boost_free(sums), boost_free(ones);

  float *dout = hnew(n), *dq = hnew(n), *dk = hnew(n), *dv = hnew(n);
  fill(dout, n, 1.0f, 0.0f);
  gpu_bf16 *d_dout = dev_bf16(dout, n), *d_dq = dev_bf16_empty(n), *d_dk = dev_bf16_empty(n),
           *d_dv = dev_bf16_empty(n);
  attention_backward(dq, dk, dv, scr, dout, q, k, v, att, B, T, H, hd);
  gpu_attention_backward(&ctx, d_dq, d_dk, d_dv, d_scr, d_dout, d_q, d_k, d_v, d_att, B, T, H, hd);
  float *gq = get_bf16(d_dq, n), *gk = get_bf16(d_dk, n), *gv = get_bf16(d_dv, n);
  check(name, "dq", gq, dq, n, TOL_CHAIN);
  check(name, "dk", gk, dk, n, TOL_CHAIN);
  check(name, "dv", gv, dv, n, TOL_CHAIN);

  gpu_free(d_q), gpu_free(d_k), gpu_free(d_v), gpu_free(d_out), gpu_free(d_att), gpu_free(d_scr);
  gpu_free(d_dout), gpu_free(d_dq), gpu_free(d_dk), gpu_free(d_dv);
  boost_free(q), boost_free(k), boost_free(v), boost_free(out), boost_free(att), boost_free(scr), boost_free(g);
  boost_free(ga), boost_free(dout), boost_free(dq), boost_free(dk), boost_free(dv), boost_free(gq);
  boost_free(gk), boost_free(gv);
}

static void test_elementwise(size_t n) {
  char name[64];
  float *x = hnew(n), *y = hnew(n), *dout = hnew(n), *r1 = hnew(n), *r2 = hnew(n);
  fill(x, n, 6.0f, 0.0f);
  fill(y, n, 2.0f, 0.0f);
  fill(dout, n, 1.0f, 0.0f);
  gpu_bf16 *d_x = dev_bf16(x, n), *d_y = dev_bf16(y, n), *d_g = dev_bf16(dout, n);
  gpu_bf16 *d_1 = dev_bf16_empty(n), *d_2 = dev_bf16_empty(n);
  float *g1, *g2;

  snprintf(name, sizeof name, "silu n=%zu", n);
  silu_forward(r1, x, n);
  gpu_silu_forward(&ctx, d_1, d_x, n);
  g1 = get_bf16(d_1, n);
  check(name, "out", g1, r1, n, TOL_BF16);
  boost_free(g1);
  silu_backward(r1, dout, x, n);
  gpu_silu_backward(&ctx, d_1, d_g, d_x, n);
  g1 = get_bf16(d_1, n);
  check(name, "dx", g1, r1, n, TOL_BF16);
  boost_free(g1);

  snprintf(name, sizeof name, "mul n=%zu", n);
  mul_forward(r1, x, y, n);
  gpu_mul_forward(&ctx, d_1, d_x, d_y, n);
  g1 = get_bf16(d_1, n);
  check(name, "out", g1, r1, n, TOL_BF16);
  boost_free(g1);
  mul_backward(r1, r2, dout, x, y, n);
  gpu_mul_backward(&ctx, d_1, d_2, d_g, d_x, d_y, n);
  g1 = get_bf16(d_1, n);
  g2 = get_bf16(d_2, n);
  check(name, "da", g1, r1, n, TOL_BF16);
  check(name, "db", g2, r2, n, TOL_BF16);
  boost_free(g1), boost_free(g2);
  gpu_zero(&ctx, d_2, n * sizeof(gpu_bf16));
  gpu_mul_backward(&ctx, NULL, d_2, d_g, d_x, d_y, n);
  g2 = get_bf16(d_2, n);
  check(name, "db only", g2, r2, n, TOL_BF16);
  boost_free(g2);

  snprintf(name, sizeof name, "add n=%zu", n);
  add_forward(r1, x, y, n);
  gpu_add_forward(&ctx, d_1, d_x, d_y, n);
  g1 = get_bf16(d_1, n);
  check(name, "out", g1, r1, n, TOL_BF16);
  boost_free(g1);
  /* in place: x = silu(x) */
  snprintf(name, sizeof name, "silu n=%zu", n);
  silu_forward(r1, x, n);
  gpu_silu_forward(&ctx, d_x, d_x, n);
  g1 = get_bf16(d_x, n);
  check(name, "inplace", g1, r1, n, TOL_BF16);
  boost_free(g1);

  gpu_free(d_x), gpu_free(d_y), gpu_free(d_g), gpu_free(d_1), gpu_free(d_2);
  boost_free(x), boost_free(y), boost_free(dout), boost_free(r1), boost_free(r2);
}

static void test_linear(int N, int Cin, int Cout) {
  char name[64];
  snprintf(name, sizeof name, "linear N%d %d->%d", N, Cin, Cout);
  float *in = hnew((size_t)N * Cin), *W = hnew((size_t)Cout * Cin), *out = hnew((size_t)N * Cout);
  float *dout = hnew((size_t)N * Cout), *din = hnew((size_t)N * Cin), *dW = hnew((size_t)Cout * Cin);
  fill(in, (size_t)N * Cin, 1.0f, 0.0f);
  fill(W, (size_t)Cout * Cin, 0.1f, 0.0f);
  fill(dout, (size_t)N * Cout, 1.0f, 0.0f);
  fill(dW, (size_t)Cout * Cin, 1.0f, 0.0f);
  gpu_bf16 *d_in = dev_bf16(in, (size_t)N * Cin), *d_W = dev_bf16(W, (size_t)Cout * Cin);
  gpu_bf16 *d_dout = dev_bf16(dout, (size_t)N * Cout);
  gpu_bf16 *d_out = dev_bf16_empty((size_t)N * Cout), *d_din = dev_bf16_empty((size_t)N * Cin);
  float *d_dW = dev_f32(dW, (size_t)Cout * Cin);
  linear_forward(out, in, W, N, Cin, Cout);
  linear_backward(din, dW, dout, in, W, N, Cin, Cout);
  gpu_linear_forward(&ctx, d_out, d_in, d_W, N, Cin, Cout);
  gpu_linear_backward(&ctx, d_din, d_dW, d_dout, d_in, d_W, N, Cin, Cout);
  float *g = get_bf16(d_out, (size_t)N * Cout), *gd = get_bf16(d_din, (size_t)N * Cin);
  float *gw = get_f32(d_dW, (size_t)Cout * Cin);
  check(name, "out", g, out, (size_t)N * Cout, TOL_BF16);
  check(name, "din", gd, din, (size_t)N * Cin, TOL_BF16);
  check(name, "dW+=", gw, dW, (size_t)Cout * Cin, 1e-4);
  gpu_free(d_in), gpu_free(d_W), gpu_free(d_dout), gpu_free(d_out), gpu_free(d_din), gpu_free(d_dW);
  boost_free(in), boost_free(W), boost_free(out), boost_free(dout), boost_free(din), boost_free(dW);
  boost_free(g), boost_free(gd), boost_free(gw);
}

static void test_crossentropy(int N, int V) {
  char name[64];
  snprintf(name, sizeof name, "crossentropy N%d V%d", N, V);
  size_t n = (size_t)N * V;
  float *logits = hnew(n), *dl = hnew(n), *loss = hnew(N), *loss2 = hnew(N);
  int32_t *tgt = (int32_t *)boost_calloc((size_t)N, sizeof(int32_t));
  fill(logits, n, 8.0f, 3.0f);
  for (int i = 0; i < N; i++) tgt[i] = irand(V);
  gpu_bf16 *d_logits = dev_bf16(logits, n);
  int32_t *d_tgt = dev_i32(tgt, (size_t)N);
  float *d_loss = dev_f32_empty(N), *d_loss2 = dev_f32_empty(N);
  float dloss = 1.0f / (float)N;
  crossentropy_forward(loss, logits, tgt, N, V);
  crossentropy_backward(dl, loss2, logits, tgt, N, V, dloss);
  gpu_crossentropy_forward(&ctx, d_loss, d_logits, d_tgt, N, V);
  gpu_crossentropy_backward(&ctx, d_logits, d_loss2, d_logits, d_tgt, N, V, dloss); /* in place */
  float *g_loss = get_f32(d_loss, N), *g_loss2 = get_f32(d_loss2, N), *g_dl = get_bf16(d_logits, n);
  check(name, "losses", g_loss, loss, N, TOL_F32);
  check(name, "bwd losses", g_loss2, loss2, N, TOL_F32);
  check(name, "dlogits", g_dl, dl, n, TOL_BF16);
  gpu_free(d_logits), gpu_free(d_tgt), gpu_free(d_loss), gpu_free(d_loss2);
  boost_free(logits), boost_free(dl), boost_free(loss), boost_free(loss2), boost_free(tgt);
  boost_free(g_loss), boost_free(g_loss2), boost_free(g_dl);
}

static void test_adamw(size_t n) {
  char name[64];
  snprintf(name, sizeof name, "adamw n=%zu", n);
  float *p = hnew(n), *g = hnew(n), *m = hnew(n), *v = hnew(n);
  fill(p, n, 1.0f, 0.0f);
  fill(g, n, 0.1f, 0.0f);
  fill(m, n, 0.01f, 0.0f);
  fill(v, n, 1e-4f, 1e-4f); /* v >= 0 */
  float *d_p = dev_f32(p, n), *d_g = dev_f32(g, n), *d_m = dev_f32(m, n), *d_v = dev_f32(v, n);
  gpu_bf16 *d_pb = dev_bf16_empty(n);
  adamw_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  gpu_adamw_hparams ghp = {hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay};
  for (int t = 1; t <= 3; t++) {
    adamw_update(p, g, m, v, n, hp, t, 0.5f);
    gpu_adamw_update(&ctx, d_p, d_pb, d_g, d_m, d_v, n, ghp, t, 0.5f);
  }
  float *gp = get_f32(d_p, n), *gm = get_f32(d_m, n), *gv = get_f32(d_v, n), *gpb = get_bf16(d_pb, n);
  check(name, "param", gp, p, n, 1e-6);
  check(name, "m", gm, m, n, 1e-6);
  check(name, "v", gv, v, n, 1e-6);
  check(name, "param bf16", gpb, p, n, TOL_BF16);
  gpu_free(d_p), gpu_free(d_g), gpu_free(d_m), gpu_free(d_v), gpu_free(d_pb);
  boost_free(p), boost_free(g), boost_free(m), boost_free(v), boost_free(gp), boost_free(gm), boost_free(gv);
  boost_free(gpb);
}

static void test_sum_squares(size_t n) {
  char name[64];
  snprintf(name, sizeof name, "sum_squares n=%zu", n);
  float *x = hnew(n);
  fill(x, n, 1.0f, 0.1f);
  float *d_x = dev_f32(x, n);
  double ref = sum_squares(x, n);
  double got = gpu_sum_squares_host(&ctx, d_x, n);
  check_scalar(name, "host", got, ref, 1e-10);
  double got2 = gpu_sum_squares_host(&ctx, d_x, n);
  check_bits(name, "host", &got, &got2, sizeof got);
  /* device accumulator: two tensors (x twice) into one double */
  double *d_acc = (double *)gpu_malloc(sizeof(double));
  gpu_zero(&ctx, d_acc, sizeof(double));
  gpu_sum_squares(&ctx, d_acc, d_x, n);
  gpu_sum_squares(&ctx, d_acc, d_x, n / 3);
  double acc = 0.0;
  gpu_download(&ctx, &acc, d_acc, sizeof acc);
  check_scalar(name, "acc", acc, ref + sum_squares(x, n / 3), 1e-10);

  snprintf(name, sizeof name, "scale_inplace n=%zu", n);
  scale_inplace(x, n, 0.37f);
  gpu_scale_inplace(&ctx, d_x, n, 0.37f);
  float *gx = get_f32(d_x, n);
  check(name, "x", gx, x, n, 1e-7);
  gpu_free(d_x), gpu_free(d_acc);
  boost_free(x), boost_free(gx);
}

#ifdef BOOST_HAVE_NCCL
/* One-rank NCCL smoke test: communicator init, a real ncclAllReduce (sum
 * over one rank = identity) on the context's stream, and the wrappers'
 * one-rank short cut (nothing enqueued, nothing counted). */
static void test_nccl(void) {
  const size_t n = 4099;
  float *h = hnew(n);
  fill(h, n, 1.0f, 0.0f);
  float *d = dev_f32(h, n);
  ncclUniqueId id;
  gpu_nccl c;
  gpu_nccl_unique_id(&id);
  gpu_nccl_init(&c, &id, 1, 0, ctx.stream);
  ncclCheck(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c.comm, c.stream));
  gpu_nccl_allreduce_sum(&c, d, n, GPU_DT_F32);
  float *g = get_f32(d, n);
  check("nccl 1 rank", "allreduce", g, h, n, TOL_EXACT);
  n_checks++;
  int ok = c.count[GPU_NCCL_ALLREDUCE].bytes == 0 && c.count[GPU_NCCL_ALLREDUCE].calls == 0;
  if (!ok) n_failed++;
  printf("%-28s %-10s %-52s %s\n", "nccl 1 rank", "counters", "no traffic counted for one rank", ok ? "ok" : "FAIL");
  gpu_nccl_destroy(&c);
  gpu_free(d);
  boost_free(h), boost_free(g);
}
#endif

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int ndev = gpu_device_count();
  if (ndev <= 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  const char *dev_env = getenv("BOOST_GPU_DEVICE");
  int dev = dev_env ? atoi(dev_env) : 0;
  if (dev < 0 || dev >= ndev) {
    fprintf(stderr, "boost-gpu-check: BOOST_GPU_DEVICE=%d but %d device(s)\n", dev, ndev);
    return 2;
  }
  gpu_ctx_init(&ctx, dev);
  struct cudaDeviceProp prop;
  cudaCheck(cudaGetDeviceProperties(&prop, dev));
  int rt = 0, drv = 0;
  cudaCheck(cudaRuntimeGetVersion(&rt));
  cudaCheck(cudaDriverGetVersion(&drv));
  printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB; runtime %d, driver %d\n", dev, prop.name, prop.major,
         prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30), rt, drv);

  test_convert(1000003);
  test_convert(4096);
  test_embedding(256, 50, 128); /* many repeated tokens: long runs */
  test_embedding(300, 1000, 100); /* C % 8 != 0: scalar path */
  test_rmsnorm(256, 512);
  test_rmsnorm(77, 100);
  test_rmsnorm(70000, 64); /* more than 64Ki rows: other dw chunking */
  test_rope(2, 64, 4, 32);
  test_rope(1, 37, 3, 10);
  test_attention(2, 64, 4, 32);
  test_attention(2, 37, 3, 16);
  test_attention(1, 256, 2, 64);
  test_elementwise(4096);
  test_elementwise(1001);
  test_linear(128, 128, 96);
  test_linear(77, 100, 33);
  test_crossentropy(64, 1000);
  test_crossentropy(33, 997);
  test_crossentropy(16, 32000);
  test_adamw(100003);
  test_sum_squares(3000017);
  test_sum_squares(1000);
#ifdef BOOST_HAVE_NCCL
  test_nccl();
#endif

  printf("gpu_check: %d checks, %d failed\n", n_checks, n_failed);
  const char *b = getenv("BOOST_GPU_BENCH");
  if (!(b && strcmp(b, "0") == 0)) gpu_bench();
  gpu_ctx_destroy(&ctx);
  printf("%s\n", n_failed ? "FAIL" : "PASS");
  return n_failed ? 1 : 0;
}
