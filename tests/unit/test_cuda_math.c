/* The CUDA backend's per-thread arithmetic, checked on the CPU: the hd_*.h
 * functions the kernels call, replayed with the kernels' own loops
 * (cuda_emul.h), against the CPU kernels. bf16 rounding against an
 * independent nearest-even reference; which elements each thread touches;
 * in-place order; norms, RoPE, cross-entropy. The optimizer, the gradient
 * norm and the embedding: test_cuda_optim.c; the attention's phases:
 * test_cuda_flash.c. */
#include "ops_testkit.h"

#include "backend.h"
#include "cuda_emul.h"

TestSuite(cuda_math, .init = two_threads);

/* ---- bf16 ------------------------------------------------------------------- */

/* Nearest bf16 by comparing distances in double; ties to the even mantissa. */
static uint16_t ref_bf16(float f) {
  if (isnan(f)) return 0x7fc0;
  const uint32_t u = hd_f32_bits(f), lo = u & 0xffff0000u;
  if ((u & 0xffffu) == 0) return (uint16_t)(lo >> 16);
  const uint32_t hi = lo + 0x10000u; /* the next bf16 away from zero (may be inf) */
  const double dl = fabs((double)f - (double)hd_bits_f32(lo)), dh = fabs((double)hd_bits_f32(hi) - (double)f);
  if (isinf(hd_bits_f32(hi)) && (lo & 0x7fffffffu) == 0x7f7f0000u) { /* above the largest finite bf16 */
    const double half_ulp = ldexp(1.0, 127 - 8);
    return (uint16_t)((fabs((double)f) - 3.3895313892515355e38 >= half_ulp ? hi : lo) >> 16);
  }
  if (dl < dh) return (uint16_t)(lo >> 16);
  if (dh < dl) return (uint16_t)(hi >> 16);
  return (uint16_t)(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

Test(cuda_math, bf16_round_to_nearest_even) {
  static const uint32_t low[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xffff};
  size_t checked = 0;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    if ((h & 0x7f80u) == 0x7f80u) continue; /* inf/NaN exponents: below */
    for (size_t k = 0; k < sizeof low / sizeof low[0]; k++) {
      const float f = hd_bits_f32((h << 16) | low[k]);
      const uint16_t got = hd_bf16_bits(f), want = ref_bf16(f);
      cr_assert_eq(got, want, "bf16(%a) = %#x, want %#x", (double)f, got, want);
      checked++;
    }
  }
  cr_assert_gt(checked, 500000);
  /* ties go to the even mantissa */
  cr_assert_eq(hd_bf16_bits(hd_bits_f32(0x3f808000u)), 0x3f80);
  cr_assert_eq(hd_bf16_bits(hd_bits_f32(0x3f818000u)), 0x3f82);
  /* the largest finite floats round to inf; inf stays; NaN stays a quiet NaN with its sign */
  cr_assert_eq(hd_bf16_bits(hd_bits_f32(0x7f7fffffu)), 0x7f80);
  cr_assert_eq(hd_bf16_bits(INFINITY), 0x7f80);
  cr_assert_eq(hd_bf16_bits(-INFINITY), 0xff80);
  cr_assert(isnan(hd_bf16_value(hd_bf16_bits(NAN))));
  cr_assert(isnan(hd_bf16_value(hd_bf16_bits(hd_bits_f32(0x7f800001u))))); /* a signalling NaN must not become inf */
  cr_assert_eq(hd_bf16_bits(hd_bits_f32(0xff800001u)) & 0x8000u, 0x8000u);
  /* round trip is exact */
  for (uint32_t h = 0; h < 0x10000u; h++)
    if ((h & 0x7f80u) != 0x7f80u) cr_assert_eq(hd_bf16_bits(hd_bf16_value((uint16_t)h)), h);
}

/* ---- grid-stride loops ----------------------------------------------------------- */

Test(cuda_math, grid_stride_touches_every_element_once) {
  static const size_t ns[] = {0, 1, 7, 8, 9, 31, 33, 1000, 4099, 100003};
  static const size_t threads[] = {1, 32, 256, 768, 8192};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof threads / sizeof threads[0]; b++)
      for (int w = 4; w <= 8; w += 4)
        for (int vec = 0; vec <= 1; vec++) {
          int *cnt = calloc(ns[a] + 1, sizeof *cnt);
          emu_ew_cover(cnt, ns[a], w, threads[b], vec);
          for (size_t i = 0; i < ns[a]; i++)
            cr_assert_eq(cnt[i], 1, "n %zu threads %zu w %d vec %d: element %zu touched %d times", ns[a], threads[b], w,
                         vec, i, cnt[i]);
          free(cnt);
        }
}

/* ---- elementwise --------------------------------------------------------------------- */

static void to_bf16(uint16_t *dst, float *src, size_t n) { /* src becomes the rounded values */
  for (size_t i = 0; i < n; i++) {
    dst[i] = hd_bf16_bits(src[i]);
    src[i] = hd_bf16_value(dst[i]);
  }
}

static void close_f(const char *what, const float *got, const float *want, size_t n, double rtol, double atol) {
  for (size_t i = 0; i < n; i++)
    cr_assert(fabs((double)got[i] - (double)want[i]) <= atol + rtol * fabs((double)want[i]),
              "%s[%zu]: %.9g, want %.9g", what, i, (double)got[i], (double)want[i]);
}

Test(cuda_math, elementwise_matches_cpu) {
  rng_seed(11);
  const size_t n = 4099;
  float *a = frand(n, -6, 6), *b = frand(n, -3, 3), *g = frand(n, -1, 1);
  float *cpu = falloc(n), *cpu2 = falloc(n), *got = falloc(n);
  silu_forward(cpu, a, n);
  silu_backward(cpu2, g, a, n);
  for (size_t i = 0; i < n; i++) got[i] = hd_silu(a[i]);
  close_f("silu", got, cpu, n, 4e-7, 1e-30);
  for (size_t i = 0; i < n; i++) got[i] = hd_silu_grad(g[i], a[i]);
  close_f("silu_grad", got, cpu2, n, 1e-6, 1e-7); /* cancels where 1 + x (1 - s) is near 0 */
  /* products and sums are exact replicas: the same bits, and in bf16 the
   * rounding of the CPU's float result */
  uint16_t *ab = malloc(n * 2), *bb = malloc(n * 2);
  to_bf16(ab, a, n);
  to_bf16(bb, b, n);
  mul_forward(cpu, a, b, n);
  add_forward(cpu2, a, b, n);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(hd_f32_bits(a[i] * b[i]), hd_f32_bits(cpu[i]));
    cr_assert_eq(hd_bf16_bits(hd_ld(ab, i, 1) * hd_ld(bb, i, 1)), hd_bf16_bits(cpu[i]));
    cr_assert_eq(hd_bf16_bits(hd_ld(ab, i, 1) + hd_ld(bb, i, 1)), hd_bf16_bits(cpu2[i]));
  }
  free(a), free(b), free(g), free(cpu), free(cpu2), free(got), free(ab), free(bb);
}

/* ---- norms ---------------------------------------------------------------------------- */

/* act copies of x for the replay: float, or bf16 (x becomes the rounded values) */
static void *act_of(float *x, size_t n, int bf16) {
  if (!bf16) return fcopy(x, n);
  uint16_t *h = malloc(n * 2);
  to_bf16(h, x, n);
  return h;
}
static float *f32_of(const void *p, size_t n, int bf16) {
  float *f = falloc(n);
  for (size_t i = 0; i < n; i++) f[i] = hd_ld(p, i, bf16);
  return f;
}

static void rmsnorm_case(int N, int C, int bf16) {
  rng_seed(100 + N + C + bf16);
  const size_t NC = (size_t)N * C;
  float *x = frand(NC, -2, 2), *w = frand(C, 0.5f, 1.5f), *g = frand(NC, -1, 1), *dw0 = frand(C, -1, 1);
  void *xa = act_of(x, NC, bf16), *wa = act_of(w, C, bf16), *ga = act_of(g, NC, bf16);
  float *out = falloc(NC), *rstd = falloc(N), *dx = falloc(NC), *dw = fcopy(dw0, C);
  rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  rmsnorm_backward(dx, dw, g, x, w, rstd, N, C);
  void *oa = act_of(fnan(NC), NC, bf16), *dxa = act_of(fnan(NC), NC, bf16);
  float *r2 = falloc(N), *dw2 = fcopy(dw0, C);
  emu_rmsnorm_fwd(oa, r2, xa, wa, N, C, 1e-5f, bf16);
  emu_colsum(dw2, ga, xa, r2, N, C, bf16);
  emu_rmsnorm_dx(dxa, ga, xa, wa, r2, N, C, bf16);
  const double tol = bf16 ? 8e-3 : 2e-6;
  close_f("rstd", r2, rstd, N, 2e-6, 0);
  close_f("out", f32_of(oa, NC, bf16), out, NC, tol, 1e-6);
  close_f("dx", f32_of(dxa, NC, bf16), dx, NC, tol, bf16 ? 2e-3 : 2e-6);
  close_f("dw", dw2, dw, C, 2e-5, 2e-5);
}
Test(cuda_math, rmsnorm_matches_cpu) {
  rmsnorm_case(7, 64, 0);
  rmsnorm_case(70, 100, 0); /* C % 32 != 0, two row chunks */
  rmsnorm_case(5, 33, 1);
}

static void btp_case(int N, int C, int w, int bf16) {
  rng_seed(200 + N + C + bf16);
  const size_t NC = (size_t)N * C, NW = (size_t)N * w;
  float *x = frand(NC, -2, 2), *gain = frand(C, 0.5f, 1.5f), *dxg = frand(NC, -1, 1), *acc0 = frand(NC, -1, 1);
  float *dss = frand(N, -0.1f, 0.1f), *dg0 = frand(C, -1, 1);
  void *xa = act_of(x, NC, bf16), *ga = act_of(gain, C, bf16), *dxga = act_of(dxg, NC, bf16);
  void *acca = act_of(acc0, NC, bf16);
  float *xg = falloc(NC), *ss = falloc(N), *ss2 = falloc(N), *dgain = fcopy(dg0, C), *dg2 = fcopy(dg0, C);
  gain_sumsq_forward(xg, ss, x, gain, N, C);
  void *xga = act_of(fnan(NC), NC, bf16);
  emu_gain_sumsq(xga, ss2, xa, ga, N, C, bf16);
  close_f("ss", ss2, ss, N, 2e-6, 0);
  close_f("xg", f32_of(xga, NC, bf16), xg, NC, bf16 ? 4e-3 : 0, 0);
  float *acc = fcopy(acc0, NC);
  gain_sumsq_backward(acc, dgain, dxg, x, gain, dss, N, C);
  emu_gain_bwd(acca, dg2, dxga, xa, ga, dss, N, C, bf16);
  close_f("dx_acc", f32_of(acca, NC, bf16), acc, NC, bf16 ? 4e-3 : 0, bf16 ? 1e-3 : 0);
  close_f("dgain", dg2, dgain, C, 2e-5, 2e-5);
  /* online RMS on a bottleneck of width w */
  float *h = frand(NW, -3, 3), *dh = frand(NW, -1, 1), *s = frand(N, 1, 50), *rstd = falloc(N), *r2 = falloc(N);
  void *ha = act_of(h, NW, bf16), *dha = act_of(dh, NW, bf16);
  online_rms_forward(h, rstd, s, N, w, 1.0f / 64, 1e-5f);
  emu_online_fwd(ha, r2, s, N, w, 1.0f / 64, 1e-5f, bf16);
  cr_assert_arr_eq(r2, rstd, N * sizeof(float), "online rstd: the same operations, the same bits");
  close_f("h", f32_of(ha, NW, bf16), h, NW, bf16 ? 4e-3 : 0, 0);
  float *dssc = falloc(N), *dss2 = falloc(N);
  online_rms_backward(dh, dssc, h, rstd, N, w, 1.0f / 64);
  emu_online_bwd(dha, dss2, ha, r2, N, w, 1.0f / 64, bf16);
  close_f("dh", f32_of(dha, NW, bf16), dh, NW, bf16 ? 4e-3 : 0, 0);
  close_f("dss", dss2, dssc, N, bf16 ? 2e-2 : 2e-5, 1e-6);
}
Test(cuda_math, btp_norm_pieces_match_cpu) {
  btp_case(9, 40, 48, 0);
  btp_case(70, 64, 20, 0);
  btp_case(9, 40, 48, 1);
}

/* ---- RoPE ---------------------------------------------------------------------------- */

Test(cuda_math, rope_matches_cpu_bit_for_bit) {
  const int B = 2, T = 9, H = 3, hd = 10;
  const size_t n = (size_t)B * T * H * hd;
  float *c = falloc((size_t)T * hd / 2), *s = falloc((size_t)T * hd / 2);
  rope_tables(c, s, T, hd, 10000.0f);
  for (int bf16 = 0; bf16 <= 1; bf16++)
    for (int dir = 0; dir <= 1; dir++) {
      rng_seed(300 + bf16 * 2 + dir);
      float *x = frand(n, -2, 2), *y = falloc(n);
      void *xa = act_of(x, n, bf16);
      if (dir == 0) rope_forward(y, x, c, s, B, T, H, hd);
      else rope_backward(y, x, c, s, B, T, H, hd);
      emu_rope(xa, xa, c, s, B, T, H, hd, dir == 0 ? 1.0f : -1.0f, bf16); /* in place */
      for (size_t i = 0; i < n; i++)
        cr_assert_eq(bf16 ? hd_ld(xa, i, 1) : ((float *)xa)[i], bf16 ? hd_round_bf16(y[i]) : y[i], "rope[%zu]", i);
      free(x), free(y), free(xa);
    }
}

/* ---- cross-entropy ---------------------------------------------------------------------- */

static void ce_case(int N, int V, int bf16) {
  rng_seed(400 + V + bf16);
  const size_t NV = (size_t)N * V;
  float *x = frand(NV, -8, 8), *loss = falloc(N), *loss2 = falloc(N), *d = falloc(NV), *l3 = falloc(N);
  int32_t *tg = malloc((size_t)N * sizeof *tg);
  for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 7919 + 13) % V);
  x[0] = 80.0f; /* a large logit: the max subtraction keeps it finite */
  void *xa = act_of(x, NV, bf16);
  crossentropy_forward(loss, x, tg, N, V);
  crossentropy_backward(d, NULL, x, tg, N, V, 0.25f);
  emu_ce(NULL, loss2, xa, tg, N, V, 0.0f, bf16);
  close_f("losses", loss2, loss, N, 2e-6, 2e-6);
  emu_ce(xa, l3, xa, tg, N, V, 0.25f, bf16); /* in place, fused with the losses */
  close_f("losses (fused)", l3, loss, N, 2e-6, 2e-6);
  /* the softmax sums V exponentials in another order than the CPU kernel:
   * fp32 error of order sqrt(V) ulps (V = 32000: 2.8e-5 relative seen in the
   * sanitizer build, whose CPU loops are not vectorised as in -O3) */
  const double sum_rtol = 2e-6 + 8.0 * sqrt((double)V) * 0x1p-24;
  close_f("dlogits", f32_of(xa, NV, bf16), d, NV, bf16 ? 8e-3 : sum_rtol, bf16 ? 1e-6 : 1e-9);
  float sum = 0.0f;
  for (int v = 0; v < V; v++) sum += hd_ld(xa, (size_t)v, bf16);
  cr_assert(fabsf(sum) < 1e-4f + (bf16 ? 2e-3f : 0.0f), "a row of dlogits sums to 0, not %g", (double)sum);
}
Test(cuda_math, crossentropy_matches_cpu) {
  ce_case(3, 320, 0);
  ce_case(4, 997, 0);
  ce_case(2, 32000, 0);
  ce_case(3, 1000, 1);
}

Test(cuda_math, vocab_parallel_pieces_match_cpu) {
  const int N = 5, V = 700, v0 = 1400;
  rng_seed(500);
  float *x = frand((size_t)N * V, -6, 6);
  int32_t tg[5] = {1400, 2099, 5, 1750, 2100}; /* held here at 0 and 699; elsewhere */
  float *xc = fcopy(x, (size_t)N * V), mx[5], sums[10], losses[5], mx2[5], sums2[10], losses2[5];
  vocab_ce_max(mx, xc, N, V);
  vocab_ce_sums(sums, xc, mx, tg, v0, N, V);
  vocab_ce_losses(losses, sums, mx, N);
  vocab_ce_backward(xc, sums, mx, tg, v0, N, V, 0.5f);
  emu_vocab(mx2, sums2, losses2, x, tg, v0, N, V, 0.5f, 0);
  cr_assert_arr_eq(mx2, mx, sizeof mx, "row max: exact");
  close_f("sums", sums2, sums, 2 * N, 1e-6, 0);
  close_f("losses", losses2, losses, N, 1e-6, 1e-6);
  close_f("grad", x, xc, (size_t)N * V, 2e-6, 1e-9);
}

Test(cuda_math, loss_sum_matches_cpu) {
  rng_seed(600);
  float *l = frand(1001, 0, 10);
  double acc = 1.5, cpu = 1.5;
  emu_loss_acc(l, 1001, &acc);
  cpu += (double)(float)loss_mean(l, 1001);
  cr_assert(fabs(acc - cpu) <= 1e-6 * cpu, "%.17g vs %.17g", acc, cpu);
}
