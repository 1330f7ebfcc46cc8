/* bf16 conversions (kernels/cpu/bf16.h) and the bf16 GEMM
 * (kernels/cpu/gemm_bf16.h).
 *
 * Conversions: the rule bf16.h documents (round to nearest even, overflow
 * to inf, NaN stays NaN and turns quiet, fp32 denormals to signed zero),
 * the array (vector) paths equal to the scalar rule on every tail and on
 * random bit patterns, and -- where the CPU has AVX512_BF16 -- the scalar
 * rule equal to the instruction VCVTNEPS2BF16 itself.
 *
 * GEMM: against an fp64 reference computed from the same bf16 inputs, for
 * every transpose pair, odd sizes, beta 0 and 1, fp32 and bf16 outputs,
 * dense and strided leading dimensions, on the chosen backend and on the
 * fp32 fallback. Tolerance: the products of bf16 numbers are exact in fp32
 * and any order of K fp32 additions errs by at most (K+1) u sum|a||b|
 * (u = 2^-24; +|c| with beta = 1); a bf16 output adds its rounding, half an
 * ulp = 2^-8 relative at most. */
#include <immintrin.h>

#include "bf16.h"
#include "gemm_bf16.h"
#include "gemm_bf16_internal.h"
#include "ops_testkit.h"

TestSuite(bf16, .init = two_threads);
TestSuite(gemm_bf16, .init = two_threads);

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static bf16_t cvt(uint32_t u) { return f32_to_bf16(u2f(u)); }
static uint32_t rng_u32(void) { return (uint32_t)(rng_u01() * 4294967296.0); }

/* The hardware instruction, whatever the build's -march, where the CPU has it. */
static int cpu_has_bf16(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void hw_convert(bf16_t *dst, const float *src,
                                                                                     size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffffu : (1u << (n - i)) - 1u);
    const __m256bh r = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, (__m256i)r);
  }
}

/* ---- conversions ------------------------------------------------------- */

Test(bf16, rounds_to_nearest_even) {
  /* 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7 */
  cr_assert_eq(cvt(0x3f808000u), 0x3f80, "tie to the even 1.0");
  cr_assert_eq(cvt(0x3f818000u), 0x3f82, "tie to the even 1 + 2^-6");
  cr_assert_eq(cvt(0x3f808001u), 0x3f81, "above the tie rounds up");
  cr_assert_eq(cvt(0x3f807fffu), 0x3f80, "below the tie rounds down");
  cr_assert_eq(cvt(0xbf808000u), 0xbf80, "negative tie");
  cr_assert_eq(cvt(0xbf818000u), 0xbf82, "negative tie up");
  cr_assert_eq(cvt(0x3fffffffu), 0x4000, "carry into the exponent");
  cr_assert_eq(f32_to_bf16(1.0f), 0x3f80);
  cr_assert_eq(f32_to_bf16(-2.0f), 0xc000);
  cr_assert_eq(cvt(0x00000000u), 0x0000);
  cr_assert_eq(cvt(0x80000000u), 0x8000, "-0 stays -0");
}

Test(bf16, overflows_to_inf_and_keeps_inf) {
  cr_assert_eq(cvt(0x7f7fffffu), 0x7f80, "FLT_MAX rounds to +inf");
  cr_assert_eq(cvt(0xff7fffffu), 0xff80, "-FLT_MAX rounds to -inf");
  cr_assert_eq(cvt(0x7f7f8000u), 0x7f80, "the tie above the largest bf16 goes to inf (even)");
  cr_assert_eq(cvt(0x7f7f7fffu), 0x7f7f, "largest bf16 stays finite");
  cr_assert_eq(cvt(0x7f800000u), 0x7f80);
  cr_assert_eq(cvt(0xff800000u), 0xff80);
}

Test(bf16, nan_stays_nan_and_turns_quiet) {
  const uint32_t nans[] = {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00001u, 0x7f80ffffu};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    const bf16_t h = cvt(nans[i]);
    cr_assert((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0, "%08x -> %04x is not a NaN", nans[i], h);
    cr_assert(h & 0x0040, "%08x -> %04x is not quiet", nans[i], h);
    cr_assert_eq(h >> 15, nans[i] >> 31, "%08x -> %04x lost its sign", nans[i], h);
    cr_assert(isnan(bf16_to_f32(h)));
  }
  cr_assert_eq(cvt(0x7f800001u), 0x7fc0, "signalling NaN with a low payload");
  cr_assert_eq(cvt(0x7fbfffffu), 0x7fff, "upper payload kept");
}

Test(bf16, denormals_flush_to_signed_zero) {
  const uint32_t den[] = {0x00000001u, 0x00008000u, 0x007f8000u, 0x007fc000u, 0x007fffffu};
  for (size_t i = 0; i < sizeof den / sizeof den[0]; i++) {
    cr_assert_eq(cvt(den[i]), 0x0000, "%08x", den[i]);
    cr_assert_eq(cvt(den[i] | 0x80000000u), 0x8000, "-%08x", den[i]);
  }
  cr_assert_eq(cvt(0x00800000u), 0x0080, "the smallest normal is kept");
  cr_assert_eq(cvt(0x00807fffu), 0x0080);
  /* bf16 -> fp32 is exact, bf16 denormals included (they are never produced) */
  cr_assert_eq(f2u(bf16_to_f32(0x0001)), 0x00010000u);
  cr_assert_eq(f2u(bf16_to_f32(0x8001)), 0x80010000u);
}

Test(bf16, every_bf16_widens_exactly_and_round_trips) {
  static bf16_t all[65536], back[65536];
  static float wide[65536];
  for (int i = 0; i < 65536; i++) all[i] = (bf16_t)i;
  bf16_to_f32_array(wide, all, 65536);
  bf16_from_f32(back, wide, 65536);
  for (uint32_t i = 0; i < 65536; i++) {
    cr_assert_eq(f2u(wide[i]), i << 16, "bf16 %04x widened to %08x", i, f2u(wide[i]));
    const int nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f), tiny = (i & 0x7f80) == 0;
    const bf16_t want = nan ? (bf16_t)(i | 0x40) : tiny ? (bf16_t)(i & 0x8000) : (bf16_t)i;
    cr_assert_eq(back[i], want, "bf16 %04x came back as %04x", i, back[i]);
  }
}

/* Inputs that hit every case: all 65536 upper halves with low halves at and
 * around the rounding boundaries, then random bit patterns. */
static float *tricky_inputs(size_t *n_out) {
  static const uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xffff};
  const size_t nl = sizeof lows / sizeof lows[0], n = 65536 * nl + (1u << 20);
  float *x = falloc(n);
  size_t k = 0;
  for (uint32_t hi = 0; hi < 65536; hi++)
    for (size_t l = 0; l < nl; l++) x[k++] = u2f(hi << 16 | lows[l]);
  rng_seed(21);
  while (k < n) x[k++] = u2f(rng_u32());
  *n_out = n;
  return x;
}

Test(bf16, vector_paths_equal_the_scalar_rule) {
  size_t n;
  float *x = tricky_inputs(&n);
  bf16_t *v = malloc(n * sizeof *v);
  cr_assert_not_null(v);
  bf16_from_f32(v, x, n); /* above BF16_PAR_MIN: both threads' vector loops */
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(v[i], f32_to_bf16(x[i]), "%08x: array %04x, scalar %04x (path %s)", f2u(x[i]), v[i],
                 f32_to_bf16(x[i]), bf16_convert_path());
  free(v);
  free(x);
}

Test(bf16, every_tail_and_offset) {
  size_t n;
  float *x = tricky_inputs(&n);
  bf16_t out[160 + 2];
  float back[160];
  rng_seed(7);
  for (size_t len = 0; len <= 160; len++)
    for (size_t off = 0; off < 17; off++) {
      const size_t start = (size_t)(rng_u01() * (double)(n - 200)) + off;
      out[len] = out[len + 1] = 0xabcd; /* a guard behind the tail */
      bf16_from_f32(out, x + start, len);
      for (size_t i = 0; i < len; i++)
        cr_assert_eq(out[i], f32_to_bf16(x[start + i]), "len %zu offset %zu element %zu", len, off, i);
      cr_assert(out[len] == 0xabcd && out[len + 1] == 0xabcd, "wrote past %zu elements", len);
      bf16_to_f32_array(back, out + (len > 0 ? 1 : 0), len > 0 ? len - 1 : 0);
      for (size_t i = 0; i + 1 < len; i++) cr_assert_eq(f2u(back[i]), (uint32_t)out[i + 1] << 16);
    }
  free(x);
}

Test(bf16, the_rule_is_the_instruction) {
  if (!cpu_has_bf16()) cr_skip_test("this CPU has no AVX512_BF16: nothing to compare with");
  size_t n;
  float *x = tricky_inputs(&n);
  bf16_t *hw = malloc(n * sizeof *hw), *sw = malloc(n * sizeof *sw);
  cr_assert(hw && sw);
  hw_convert(hw, x, n);
  bf16_from_f32(sw, x, n);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(f32_to_bf16(x[i]), hw[i], "%08x: scalar %04x, VCVTNEPS2BF16 %04x", f2u(x[i]), f32_to_bf16(x[i]),
                 hw[i]);
    cr_assert_eq(sw[i], hw[i], "%08x: array %04x, VCVTNEPS2BF16 %04x", f2u(x[i]), sw[i], hw[i]);
  }
  free(hw);
  free(sw);
  free(x);
}

Test(bf16, thread_count_does_not_change_bits) {
  const size_t n = 3 * BF16_PAR_MIN + 37;
  float *x = falloc(n);
  rng_seed(3);
  for (size_t i = 0; i < n; i++) x[i] = u2f(rng_u32());
  bf16_t *a = malloc(n * 2), *b = malloc(n * 2);
  cr_assert(a && b);
  omp_set_num_threads(1);
  bf16_from_f32(a, x, n);
  omp_set_num_threads(3);
  bf16_from_f32(b, x, n);
  assert_bitwise("bf16_from_f32 on 1 and 3 threads", a, b, n * 2);
  free(a);
  free(b);
  free(x);
}

/* ---- gemm_bf16 --------------------------------------------------------- */

static bf16_t *brand(size_t n) {
  bf16_t *p = malloc((n ? n : 1) * sizeof *p);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) p[i] = f32_to_bf16(rnd(-1.0f, 1.0f));
  return p;
}

/* op(X)[i][j] of a stored row-major matrix */
static double at(const bf16_t *X, int ld, int trans, int i, int j) {
  return bf16_to_f32(trans ? X[(size_t)j * ld + i] : X[(size_t)i * ld + j]);
}

typedef struct {
  int ta, tb, M, N, K, pad; /* pad: extra leading-dimension elements */
  int beta, c_f32;
} gcase;

/* Runs one case against the fp64 reference; returns the largest error in
 * units of the tolerance. */
static double check_case(const gcase *g) {
  const int M = g->M, N = g->N, K = g->K;
  const int lda = (g->ta ? M : K) + g->pad, ldb = (g->tb ? K : N) + g->pad, ldc = N + g->pad;
  bf16_t *A = brand((size_t)(g->ta ? K : M) * lda), *B = brand((size_t)(g->tb ? N : K) * ldb);
  const size_t csz = (size_t)M * ldc;
  float *Cf = frand(csz, -1.0f, 1.0f);
  bf16_t *Cb = brand(csz);
  float *Cf0 = fcopy(Cf, csz);
  bf16_t *Cb0 = malloc(csz * sizeof *Cb0);
  cr_assert_not_null(Cb0);
  memcpy(Cb0, Cb, csz * sizeof *Cb0);
  kern_gemm_bf16(g->ta, g->tb, M, N, K, A, lda, B, ldb, (float)g->beta, g->c_f32 ? (void *)Cf : (void *)Cb, ldc, g->c_f32);
  double worst = 0.0;
  const double u = 0x1p-24;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < ldc; j++) {
      const size_t ij = (size_t)i * ldc + j;
      if (j >= N) { /* the padding is not touched */
        cr_assert(g->c_f32 ? f2u(Cf[ij]) == f2u(Cf0[ij]) : Cb[ij] == Cb0[ij], "wrote C[%d][%d] beyond N=%d", i, j, N);
        continue;
      }
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; k++) {
        const double p = at(A, lda, g->ta, i, k) * at(B, ldb, g->tb, k, j);
        ref += p;
        mag += fabs(p);
      }
      if (g->beta) {
        const double c0 = g->c_f32 ? (double)Cf0[ij] : (double)bf16_to_f32(Cb0[ij]);
        ref += c0;
        mag += fabs(c0);
      }
      const double got = g->c_f32 ? (double)Cf[ij] : (double)bf16_to_f32(Cb[ij]);
      const double acc = (K + 2) * u * mag;
      const double tol = acc + (g->c_f32 ? 0.0 : 0x1p-8 * (fabs(ref) + acc)) + 1e-30;
      const double r = fabs(got - ref) / tol;
      cr_assert(r <= 1.0,
                "%c%c M=%d N=%d K=%d pad=%d beta=%d %s: C[%d][%d] = %.9g, fp64 reference %.9g (tolerance %.3g)",
                g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', M, N, K, g->pad, g->beta, g->c_f32 ? "f32" : "bf16", i, j, got,
                ref, tol);
      if (r > worst) worst = r;
    }
  free(A);
  free(B);
  free(Cf);
  free(Cb);
  free(Cf0);
  free(Cb0);
  return worst;
}

/* Every size of {1, 7, 17, 130} in every position, every transpose pair,
 * beta 0/1, both output types, dense and strided. */
static void all_cases(void) {
  static const int sizes[][3] = {{1, 1, 1},   {7, 17, 130}, {130, 7, 17}, {17, 130, 7},  {130, 130, 130},
                                 {1, 130, 17}, {130, 1, 7},  {17, 7, 1},   {7, 7, 7},     {1, 17, 130}};
  rng_seed(2026);
  double worst[2] = {0.0, 0.0}; /* bf16, f32 outputs */
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int t = 0; t < 4; t++)
      for (int beta = 0; beta <= 1; beta++)
        for (int f32 = 0; f32 <= 1; f32++)
          for (int pad = 0; pad <= 5; pad += 5) {
            const gcase g = {t >> 1, t & 1, sizes[s][0], sizes[s][1], sizes[s][2], pad, beta, f32};
            const double r = check_case(&g);
            if (r > worst[f32]) worst[f32] = r;
          }
  if (verbose()) {
    char info[512];
    gemm_bf16_info(info, sizeof info);
    fprintf(stderr, "gemm_bf16 [%s]: worst error %.3f (bf16 C), %.3f (f32 C) of the tolerance\n", info, worst[0],
            worst[1]);
  }
}

Test(gemm_bf16, matches_fp64_reference_on_every_layout) { all_cases(); }

Test(gemm_bf16, fallback_matches_fp64_reference_on_every_layout) {
  setenv("BOOST_GEMM_BF16", "fallback", 1); /* read at the first call of this test's process */
  all_cases();
  char info[512];
  gemm_bf16_info(info, sizeof info);
  cr_assert(strstr(info, "fallback") && strstr(info, "BOOST_GEMM_BF16=fallback"), "%s", info);
  cr_assert_eq(gemm_bf16_native(), 0);
}

Test(gemm_bf16, model_sized_shapes_single_and_two_threads) {
  /* a CoLA bottleneck layout of the trainer: q/k/v's B GEMM reads a slice
   * of the grouped [N, 3r] activation (lda 3r) */
  rng_seed(5);
  for (int nt = 1; nt <= 2; nt++) {
    omp_set_num_threads(nt);
    const gcase cases[] = {{0, 1, 256, 96, 64, 0, 0, 0}, {1, 0, 64, 96, 256, 0, 1, 1}, {0, 0, 256, 64, 96, 0, 0, 0},
                           {0, 1, 256, 64, 32, 64, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
  }
  gemm_bf16_release(); /* and everything is created again */
  const gcase again = {0, 1, 33, 65, 129, 3, 1, 0};
  check_case(&again);
}

/* A decode step's products (M = 1, B transposed, bf16 C): the row kernel
 * with its prefetch (B one block), with a K tail and a last group of fewer
 * than four rows, and strided B; the same bits on one and two threads. */
Test(gemm_bf16, one_row_decode_products) {
  rng_seed(11);
  const gcase cases[] = {{0, 1, 1, 1003, 512, 0, 0, 0}, {0, 1, 1, 1003, 512, 0, 1, 0}, {0, 1, 1, 70, 557, 0, 0, 0},
                         {0, 1, 1, 70, 557, 9, 1, 0}, {0, 1, 1, 5, 31, 0, 0, 0}};
  for (int nt = 1; nt <= 2; nt++) {
    omp_set_num_threads(nt);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
  }
  const int N = 4099, K = 544;
  bf16_t *A = brand(K), *B = brand((size_t)N * K), *c[2];
  for (int nt = 1; nt <= 2; nt++) {
    omp_set_num_threads(nt);
    c[nt - 1] = brand(N);
    kern_gemm_bf16(0, 1, 1, N, K, A, K, B, K, 0.0f, c[nt - 1], N, 0);
  }
  assert_bitwise("one row on 1 and 2 threads", c[0], c[1], (size_t)N * sizeof(bf16_t));
  /* B at every offset from a 64-byte line (the kernel aligns its loads) */
  enum { n = 37, k = 512 };
  bf16_t *Bx = brand((size_t)n * k + 32), *cx = brand(n);
  for (int off = 0; off < 32; off++) {
    kern_gemm_bf16(0, 1, 1, n, k, A, k, Bx + off, k, 0.0f, cx, n, 0);
    for (int j = 0; j < n; j++) {
      double ref = 0.0, mag = 0.0;
      for (int i = 0; i < k; i++) {
        const double p = (double)bf16_to_f32(A[i]) * bf16_to_f32(Bx[off + (size_t)j * k + i]);
        ref += p;
        mag += fabs(p);
      }
      const double tol = (k + 2) * 0x1p-24 * mag + 0x1p-8 * fabs(ref) + 1e-30;
      cr_assert(fabs(bf16_to_f32(cx[j]) - ref) <= tol, "B offset %d: C[%d] = %g, fp64 %g", off, j, bf16_to_f32(cx[j]),
                ref);
    }
  }
  free(Bx);
  free(cx);
  free(A);
  free(B);
  free(c[0]);
  free(c[1]);
}

Test(gemm_bf16, same_inputs_same_bits) {
  const int M = 300, N = 200, K = 520;
  rng_seed(9);
  bf16_t *A = brand((size_t)K * M), *B = brand((size_t)K * N);
  for (int nt = 1; nt <= 2; nt++) {
    omp_set_num_threads(nt);
    for (int f32 = 0; f32 <= 1; f32++) {
      const size_t bytes = (size_t)M * N * (f32 ? 4 : 2);
      void *c1 = calloc(1, bytes), *c2 = calloc(1, bytes);
      cr_assert(c1 && c2);
      /* a weight-gradient layout (TN, K long) and beta = 1 accumulation */
      kern_gemm_bf16(1, 0, M, N, K, A, M, B, N, 0.0f, c1, N, f32);
      kern_gemm_bf16(1, 0, M, N, K, A, M, B, N, 1.0f, c1, N, f32);
      kern_gemm_bf16(1, 0, M, N, K, A, M, B, N, 0.0f, c2, N, f32);
      kern_gemm_bf16(1, 0, M, N, K, A, M, B, N, 1.0f, c2, N, f32);
      assert_bitwise("gemm_bf16 twice", c1, c2, bytes);
      free(c1);
      free(c2);
    }
  }
  free(A);
  free(B);
}

/* Called from inside a parallel region (attention's per-slice products),
 * each thread runs its own single-threaded product: every thread's result
 * equals the same product called from outside, bit for bit, on the chosen
 * backend and on the fallback. */
static void inside_parallel_equals_outside(void) {
  const int M = 128, N = 200, K = 64;
  rng_seed(11);
  bf16_t *A = brand((size_t)M * K), *B = brand((size_t)N * K);
  omp_set_num_threads(1);
  float *ref = calloc((size_t)M * N, 4);
  bf16_t *refb = calloc((size_t)M * N, 2);
  cr_assert(ref && refb);
  kern_gemm_bf16(0, 1, M, N, K, A, K, B, K, 0.0f, ref, N, 1);
  kern_gemm_bf16(0, 1, M, N, K, A, K, B, K, 0.0f, refb, N, 0);
  omp_set_num_threads(2);
  float *got[2];
  bf16_t *gotb[2];
  int team = 0;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    got[t] = calloc((size_t)M * N, 4);
    gotb[t] = calloc((size_t)M * N, 2);
    for (int rep = 0; rep < 3; rep++) { /* the owned primitives are reused */
      kern_gemm_bf16(0, 1, M, N, K, A, K, B, K, 0.0f, got[t], N, 1);
      kern_gemm_bf16(0, 1, M, N, K, A, K, B, K, 0.0f, gotb[t], N, 0);
    }
  }
  cr_assert_eq(team, 2, "the test needs a team of 2");
  for (int t = 0; t < 2; t++) {
    assert_bitwise("gemm_bf16 inside a parallel region, fp32 out", got[t], ref, (size_t)M * N * 4);
    assert_bitwise("gemm_bf16 inside a parallel region, bf16 out", gotb[t], refb, (size_t)M * N * 2);
    free(got[t]);
    free(gotb[t]);
  }
  free(ref), free(refb), free(A), free(B);
}

Test(gemm_bf16, inside_a_parallel_region) { inside_parallel_equals_outside(); }

Test(gemm_bf16, inside_a_parallel_region_fallback) {
  setenv("BOOST_GEMM_BF16", "fallback", 1);
  inside_parallel_equals_outside();
}

/* Strided operands (a slice of a fused projection, a head's columns) give
 * the bits of the same product on dense copies: oneDNN gets them packed
 * dense (gemm_bf16.c), so both run the same primitive -- also from inside a
 * parallel region (attention's per-head calls). Every transpose pair, beta
 * 0/1, both output types. With BOOST_GEMM_BF16_PACK=0 this fails on an
 * AVX512-BF16 CPU with oneDNN 2.6 (gemm:jit sums a K of 544 in another
 * order than brgemm). */
static void strided_equals_dense(int inside) {
  const int M = 160, N = 96, K = 544, pad = 32;
  rng_seed(45);
  for (int t = 0; t < 4; t++)
    for (int beta = 0; beta <= 1; beta++)
      for (int f32 = 0; f32 <= 1; f32++) {
        const int ta = t >> 1, tb = t & 1, ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
        const size_t es = f32 ? 4 : 2;
        bf16_t *A = brand((size_t)ar * (ac + pad)), *B = brand((size_t)br * (bc + pad));
        bf16_t *Ad = brand((size_t)ar * ac), *Bd = brand((size_t)br * bc);
        for (int r = 0; r < ar; r++) memcpy(Ad + (size_t)r * ac, A + (size_t)r * (ac + pad), (size_t)ac * 2);
        for (int r = 0; r < br; r++) memcpy(Bd + (size_t)r * bc, B + (size_t)r * (bc + pad), (size_t)bc * 2);
        bf16_t *C = brand((size_t)M * (N + pad) * 2), *Cd = brand((size_t)M * N * 2); /* room for f32 */
        for (int r = 0; r < M; r++) memcpy((char *)Cd + r * N * es, (char *)C + r * (N + pad) * es, N * es);
#pragma omp parallel num_threads(2) if (inside)
        {
#pragma omp single
          {
            kern_gemm_bf16(ta, tb, M, N, K, A, ac + pad, B, bc + pad, (float)beta, C, N + pad, f32);
            kern_gemm_bf16(ta, tb, M, N, K, Ad, ac, Bd, bc, (float)beta, Cd, N, f32);
          }
        }
        for (int r = 0; r < M; r++) {
          char what[96];
          snprintf(what, sizeof what, "%c%c beta %d %s row %d: strided vs dense", ta ? 'T' : 'N', tb ? 'T' : 'N', beta,
                   f32 ? "f32" : "bf16", r);
          assert_bitwise(what, (char *)C + r * (N + pad) * es, (char *)Cd + r * N * es, N * es);
        }
        free(A), free(B), free(Ad), free(Bd), free(C), free(Cd);
      }
}

Test(gemm_bf16, strided_operands_give_the_dense_bits) { strided_equals_dense(0); }
Test(gemm_bf16, strided_operands_give_the_dense_bits_inside_a_parallel_region) { strided_equals_dense(1); }

/* oneDNN (or the fallback's OpenBLAS) must run on the process's OpenMP
 * pool: both threads work, no thread is added (a second pool spinning
 * against ours is what made the pthread OpenBLAS 1.7x slower), and the
 * OpenMP thread count is left as it was. */
Test(gemm_bf16, runs_on_the_openmp_pool) {
  const int nt = omp_get_max_threads();
  cr_assert(nt >= 2, "the suite init asks for 2 OpenMP threads, have %d", nt);
  const int M = 512, N = 512, K = 1024;
  rng_seed(17);
  bf16_t *A = brand((size_t)M * K), *B = brand((size_t)N * K), *C = brand((size_t)M * N);
  kern_gemm_bf16(0, 1, M, N, K, A, K, B, K, 0.0f, C, N, 0); /* creation, library start-up */
#pragma omp parallel
  { /* start the OpenMP workers before counting */
  }
  const int threads0 = thread_count();
  long s0, o0, s1, o1;
  thread_ticks(&s0, &o0);
  do {
    kern_gemm_bf16(0, 1, M, N, K, A, K, B, K, 0.0f, C, N, 0);
    thread_ticks(&s1, &o1);
  } while (s1 - s0 < 30);
  const long self = s1 - s0, others = o1 - o0;
  char info[512];
  gemm_bf16_info(info, sizeof info);
  if (verbose()) fprintf(stderr, "gemm_bf16: calling thread %ld ticks, others %ld [%s]\n", self, others, info);
  cr_expect(thread_count() == threads0, "gemm_bf16 started threads: %d before, %d after [%s]", threads0,
            thread_count(), info);
  cr_expect(4 * others >= self, "gemm_bf16 ran on one thread: calling thread %ld CPU ticks, the others %ld [%s]", self,
            others, info);
  cr_expect(omp_get_max_threads() == nt, "gemm_bf16 changed the OpenMP thread count from %d to %d", nt,
            omp_get_max_threads());
  free(A);
  free(B);
  free(C);
}

Test(gemm_bf16, empty_sum_and_empty_output) {
  float C[6] = {1, 2, 3, 4, 5, 6};
  bf16_t Cb[6] = {0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80};
  const bf16_t A[1] = {0x3f80}, B[1] = {0x3f80};
  kern_gemm_bf16(0, 0, 2, 3, 0, A, 1, B, 3, 1.0f, C, 3, 1); /* K = 0, beta 1: C unchanged */
  cr_assert(C[0] == 1.0f && C[5] == 6.0f);
  kern_gemm_bf16(0, 0, 2, 3, 0, A, 1, B, 3, 0.0f, Cb, 3, 0); /* K = 0, beta 0: zeros */
  for (int i = 0; i < 6; i++) cr_assert_eq(Cb[i], 0);
  kern_gemm_bf16(0, 0, 0, 3, 5, A, 5, B, 3, 0.0f, C, 3, 1); /* M = 0: nothing */
  cr_assert(C[0] == 1.0f);
}

Test(gemm_bf16, info_names_the_library_and_the_instructions) {
  char info[512];
  gemm_bf16_info(info, sizeof info);
  cr_assert(strlen(info) > 20, "%s", info);
  if (gemm_bf16_native())
    cr_assert(strstr(info, "oneDNN") && strstr(info, "bf16 dot-product instructions"), "%s", info);
  else
    cr_assert(strstr(info, "fallback") || strstr(info, "emulated"), "%s", info);
#ifdef BOOST_TEST_EXPECT_DNNL
  /* built with oneDNN on a CPU with AVX512_BF16: the real thing must run */
  if (cpu_has_bf16() && !getenv("BOOST_GEMM_BF16") && !getenv("ONEDNN_MAX_CPU_ISA") && !getenv("DNNL_MAX_CPU_ISA"))
    cr_assert_eq(gemm_bf16_native(), 1, "%s", info);
#endif
  char small[8];
  gemm_bf16_info(small, sizeof small);
  cr_assert_eq(strlen(small), 7, "truncated and terminated");
}

/* The start's verdict on the implementation oneDNN picked, given both CPU
 * kinds' names: a Zen 4 runs brgemm on AVX512-BF16, a Xeon with AMX on AMX
 * tiles (oneDNN 2.x "brg:", 3.x "brg_matmul:"); neither machine can show the
 * other's name by running, so the names are given here. */
Test(gemm_bf16, both_cpu_kinds_implementations_count_as_native) {
  cr_assert(gemm_bf16_impl_is_native(1, "brg:avx512_core_bf16"), "Zen 4, oneDNN 2.x");
  cr_assert(gemm_bf16_impl_is_native(1, "brg_matmul:avx512_core_bf16"), "Zen 4, oneDNN 3.x");
  cr_assert(gemm_bf16_impl_is_native(1, "brg:avx512_core_amx"), "AMX, oneDNN 2.x");
  cr_assert(gemm_bf16_impl_is_native(1, "brg_matmul:avx512_core_amx"), "AMX, oneDNN 3.x");
  cr_assert(!gemm_bf16_impl_is_native(1, "gemm:jit"), "bf16 emulated");
  cr_assert(!gemm_bf16_impl_is_native(1, "brg:avx512_core"), "no bf16 instructions");
  cr_assert(!gemm_bf16_impl_is_native(1, "ref:any"), "reference");
  cr_assert(!gemm_bf16_impl_is_native(0, "brg_matmul:avx512_core_amx"), "ISA capped below AVX512-BF16");
  cr_assert(!gemm_bf16_impl_is_native(1, NULL), "no implementation");
}

/* A product split over two threads runs each thread's share of C as its own
 * primitive; a column share of a stored matrix (a transposed A in a row
 * split, B and C in a column split) is strided and gets copied dense first
 * (gemm_bf16.c), so that oneDNN runs it on brgemm as it runs the whole
 * product on one thread: the same bits on one and on two threads, for
 * every transpose pair, beta 0/1, both output types, row and column
 * splits. */
Test(gemm_bf16, split_shares_give_the_one_thread_bits) {
  const int K = 512;
  rng_seed(46);
  for (int wide = 0; wide <= 1; wide++) {
    const int M = wide ? 160 : 352, N = wide ? 352 : 160;
    for (int t = 0; t < 4; t++)
      for (int beta = 0; beta <= 1; beta++)
        for (int f32 = 0; f32 <= 1; f32++) {
          const int ta = t >> 1, tb = t & 1, lda = ta ? M : K, ldb = tb ? K : N;
          const size_t bytes = (size_t)M * N * (f32 ? 4 : 2);
          bf16_t *A = brand((size_t)M * K), *B = brand((size_t)N * K), *C1 = brand(bytes / 2), *C2 = brand(bytes / 2);
          memcpy(C2, C1, bytes);
          omp_set_num_threads(1);
          kern_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, (float)beta, C1, N, f32);
          omp_set_num_threads(2);
          kern_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, (float)beta, C2, N, f32);
          char what[96];
          snprintf(what, sizeof what, "%c%c %dx%dx%d beta %d %s: two threads vs one", ta ? 'T' : 'N', tb ? 'T' : 'N', M,
                   N, K, beta, f32 ? "f32" : "bf16");
          assert_bitwise(what, C1, C2, bytes);
          free(A), free(B), free(C1), free(C2);
        }
  }
}
