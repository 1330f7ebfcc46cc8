/* The CUDA backend's kernels run on the CPU: the bodies and phases the .cu
 * files launch (kernels/cuda/hd_*.h), run over whole grids by the grid
 * runner (grid_run.h), against the CPU kernels (kernels/cpu). bf16 rounding
 * against an independent nearest-even reference; which elements the
 * grid-stride loops touch; elementwise ops, RMSNorm, the btp norm pieces,
 * RoPE and the embedding gather, in place where the kernels allow it.
 * Cross-entropy and the loss sum: test_cuda_loss.c; the optimizer, the
 * gradient norm and the embedding's backward: test_cuda_optim.c; the
 * attention: test_cuda_flash.c. */
#include "cuda_testkit.h"

#include "../../kernels/cuda/hd_elementwise.h"
#include "../../kernels/cuda/hd_norms.h"
#include "backend.h"

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

/* ---- elementwise (elementwise.cu's ew_kernel) ------------------------------------- */

typedef struct {
  hd_ew_args a;
  int op, ybf, xbf, vec;
} ew_ctx;

static void ew_body(void *ctx, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  const ew_ctx *c = ctx;
  hd_ew_thread(c->op, c->ybf, c->xbf, c->vec, &c->a, ix);
}
static void ew_run(int op, int ybf, int xbf, int vec, void *y, void *y2, const void *x0, const void *x1,
                   const void *x2, size_t n, unsigned gx, unsigned nt) {
  ew_ctx c = {{y, y2, x0, x1, x2, n}, op, ybf, xbf, vec};
  grid_run_body(gx, 1, nt, ew_body, &c);
}

/* y += 1 in place over the grid: every element must end at exactly 1 */
Test(cuda_math, grid_stride_touches_every_element_once) {
  static const size_t ns[] = {0, 1, 7, 8, 9, 31, 33, 1000, 4099, 100003};
  static const unsigned blocks[] = {1, 3, 32}, threads[] = {32, 256};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < 3; b++)
      for (size_t t = 0; t < 2; t++)
        for (int bf16 = 0; bf16 <= 1; bf16++)
          for (int vec = 0; vec <= 1; vec++) {
            const size_t n = ns[a];
            float *zero = calloc(n + 1, 4), *one = falloc(n + 1);
            for (size_t i = 0; i < n; i++) one[i] = 1.0f;
            void *y = act_of(zero, n + 1, bf16), *x = act_of(one, n + 1, bf16);
            ew_run(HD_EW_ADD, bf16, bf16, vec, y, NULL, y, x, NULL, n, blocks[b], threads[t]);
            for (size_t i = 0; i < n; i++)
              cr_assert_eq(hd_ld(y, i, bf16), 1.0f, "n %zu grid %u x %u bf16 %d vec %d: element %zu touched %g times",
                           n, blocks[b], threads[t], bf16, vec, i, (double)hd_ld(y, i, bf16));
            free(zero), free(one), free(y), free(x);
          }
}

/* got (act) against the CPU's float result: exactly its rounding when tol
 * is 0, else within tol (bf16: 2^-8 relative) */
static void ew_check(const char *what, const void *got, const float *want, size_t n, int bf16, double tol, double atol) {
  for (size_t i = 0; i < n; i++) {
    const double g = hd_ld(got, i, bf16), w = bf16 ? hd_round_bf16(want[i]) : want[i];
    if (tol == 0)
      cr_assert_eq(g, w, "%s[%zu]: %.9g, want %.9g", what, i, g, w);
    else
      cr_assert(fabs(g - w) <= atol + (bf16 ? 0x1p-8 : tol) * fabs(w), "%s[%zu]: %.9g, want %.9g", what, i, g, w);
  }
}

/* Every op through the kernel's body, float and bf16, vectors and not,
 * against the CPU's op: float results bit for bit (sums, products); SiLU
 * within expf's few ulp; bf16 the rounding of the CPU's float result. */
static void ew_case(int bf16, int vec, unsigned gx) {
  rng_seed(11 + bf16 + 2 * vec);
  const size_t n = 4099;
  float *a = frand(n, -6, 6), *b = frand(n, -3, 3), *g = frand(n, -1, 1);
  void *aa = act_of(a, n, bf16), *ba = act_of(b, n, bf16), *ga = act_of(g, n, bf16);
  float *want = falloc(n), *want2 = falloc(n);
  void *y = act_of(fnan(n), n, bf16), *y2 = act_of(fnan(n), n, bf16);
#define EW(op, X0, X1, X2, Y2) ew_run(op, bf16, bf16, vec, y, Y2, X0, X1, X2, n, gx, 256)
  kern_add_forward(want, a, b, n);
  EW(HD_EW_ADD, aa, ba, NULL, NULL);
  ew_check("add", y, want, n, bf16, 0, 0);
  kern_mul_forward(want, a, b, n);
  EW(HD_EW_MUL, aa, ba, NULL, NULL);
  ew_check("mul", y, want, n, bf16, 0, 0);
  kern_silu_forward(want, a, n);
  EW(HD_EW_SILU, aa, NULL, NULL, NULL);
  ew_check("silu", y, want, n, bf16, 4e-7, 1e-30);
  kern_silu_backward(want, g, a, n);
  EW(HD_EW_SILU_GRAD, ga, aa, NULL, NULL);
  ew_check("silu_grad", y, want, n, bf16, 1e-6, 1e-7); /* cancels where 1 + x (1 - s) is near 0 */
  kern_mul_backward(want, want2, g, a, b, n);
  EW(HD_EW_MUL_BWD, ga, aa, ba, y2);
  ew_check("mul_bwd da", y, want, n, bf16, 0, 0);
  ew_check("mul_bwd db", y2, want2, n, bf16, 0, 0);
#undef EW
  if (bf16) { /* the conversions: float -> bf16 rounded, bf16 -> float exact */
    float *f = frand(n, -100, 100);
    uint16_t *h = malloc(n * 2);
    float *back = falloc(n);
    ew_run(HD_EW_COPY, 1, 0, vec, h, NULL, f, NULL, NULL, n, gx, 256);
    for (size_t i = 0; i < n; i++) cr_assert_eq(h[i], hd_bf16_bits(f[i]), "to_act[%zu]", i);
    ew_run(HD_EW_COPY, 0, 1, vec, back, NULL, h, NULL, NULL, n, gx, 256);
    for (size_t i = 0; i < n; i++) cr_assert_eq(back[i], hd_bf16_value(h[i]), "to_f32[%zu]", i);
    free(f), free(h), free(back);
  }
  free(a), free(b), free(g), free(aa), free(ba), free(ga), free(want), free(want2), free(y), free(y2);
}
Test(cuda_math, elementwise_matches_cpu) {
  for (int bf16 = 0; bf16 <= 1; bf16++)
    for (int vec = 0; vec <= 1; vec++) {
      ew_case(bf16, vec, 3);
      ew_case(bf16, vec, grid_blocks(4099, 256));
    }
}

/* ---- norms (norms.cu) ------------------------------------------------------------------ */

typedef struct {
  hd_norm_args a;
  hd_colsum_args cs;
  int bf16;
} norm_ctx;

static void rms_fwd_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)sh;
  hd_rmsnorm_fwd_phase(&((norm_ctx *)c)->a, ((norm_ctx *)c)->bf16, ix, ph, r);
}
static void rms_dx_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)sh;
  hd_rmsnorm_dx_phase(&((norm_ctx *)c)->a, ((norm_ctx *)c)->bf16, ix, ph, r);
}
static void gain_sumsq_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)sh;
  hd_gain_sumsq_phase(&((norm_ctx *)c)->a, ((norm_ctx *)c)->bf16, ix, ph, r);
}
static void online_bwd_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)sh;
  hd_online_rms_bwd_phase(&((norm_ctx *)c)->a, ((norm_ctx *)c)->bf16, ix, ph, r);
}
static void online_fwd_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_online_rms_fwd_thread(&((norm_ctx *)c)->a, ((norm_ctx *)c)->bf16, ix);
}
static void gain_dx_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_gain_dx_thread(&((norm_ctx *)c)->a, ((norm_ctx *)c)->bf16, ix);
}
static void colsum_partial_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_colsum_partial_thread(&((norm_ctx *)c)->cs, ((norm_ctx *)c)->bf16, ix);
}
static void colsum_final_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_colsum_final_thread(&((norm_ctx *)c)->cs, ix);
}

/* A row kernel over norms.cu's grid: a warp per row, 8 rows per block. */
static void run_rows(void (*phase)(void *, hd_ix, int, hd_regs *, void *), int two_phases, norm_ctx *c) {
  const grid_kernel k = {hd_row_blocks(c->a.N), 1, HD_ROW_THREADS, two_phases ? HD_ROW_PHASES : 1,
                         two_phases ? hd_row_sync : NULL, 0, NULL, phase};
  grid_run(&k, c);
}
/* norms.cu's colsum: out[c] += sum_n a[n, c] b[n, c] (* rowscale[n]) */
static void run_colsum(float *out, const void *a, const void *b, const float *rowscale, int N, int C, int bf16) {
  norm_ctx c = {.bf16 = bf16};
  c.cs = (hd_colsum_args){out, falloc((size_t)hd_colsum_chunks(N) * C), a, b, rowscale, N, C};
  const unsigned gx = grid_blocks((size_t)C, HD_COLSUM_THREADS);
  grid_run_body(gx, (unsigned)hd_colsum_chunks(N), HD_COLSUM_THREADS, colsum_partial_body, &c);
  grid_run_body(gx, 1, HD_COLSUM_THREADS, colsum_final_body, &c);
  free(c.cs.partial);
}
static norm_ctx norm_of(void *y, float *rowf, const void *x, const void *w, const void *g, const float *rowin, int N,
                        int C, int bf16) {
  norm_ctx c = {.bf16 = bf16};
  c.a = (hd_norm_args){y, rowf, x, w, g, rowin, N, C, 1e-5f, 1.0f / 64};
  return c;
}

static void rmsnorm_case(int N, int C, int bf16) {
  rng_seed(100 + N + C + bf16);
  const size_t NC = (size_t)N * C;
  float *x = frand(NC, -2, 2), *w = frand(C, 0.5f, 1.5f), *g = frand(NC, -1, 1), *dw0 = frand(C, -1, 1);
  void *xa = act_of(x, NC, bf16), *wa = act_of(w, C, bf16), *ga = act_of(g, NC, bf16);
  float *out = falloc(NC), *rstd = falloc(N), *dx = falloc(NC), *dw = fcopy(dw0, C);
  kern_rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
  kern_rmsnorm_backward(dx, dw, g, x, w, rstd, N, C);
  void *oa = act_of(fnan(NC), NC, bf16), *dxa = act_of(fnan(NC), NC, bf16);
  float *r2 = fnan(N), *dw2 = fcopy(dw0, C);
  norm_ctx c = norm_of(oa, r2, xa, wa, NULL, NULL, N, C, bf16);
  run_rows(rms_fwd_ph, 1, &c);
  run_colsum(dw2, ga, xa, r2, N, C, bf16);
  c = norm_of(dxa, NULL, xa, wa, ga, r2, N, C, bf16);
  run_rows(rms_dx_ph, 1, &c);
  const double tol = bf16 ? 8e-3 : 2e-6;
  close_f("rstd", r2, rstd, N, 2e-6, 0);
  close_f("out", f32_of(oa, NC, bf16), out, NC, tol, 1e-6);
  close_f("dx", f32_of(dxa, NC, bf16), dx, NC, tol, bf16 ? 2e-3 : 2e-6);
  close_f("dw", dw2, dw, C, 2e-5, 2e-5);
}
Test(cuda_math, rmsnorm_matches_cpu) {
  rmsnorm_case(7, 64, 0);
  rmsnorm_case(70, 100, 0); /* C % 32 != 0, two row chunks, a partial row block */
  rmsnorm_case(5, 33, 1);
}

static void btp_case(int N, int C, int w, int bf16) {
  rng_seed(200 + N + C + bf16);
  const size_t NC = (size_t)N * C, NW = (size_t)N * w;
  float *x = frand(NC, -2, 2), *gain = frand(C, 0.5f, 1.5f), *dxg = frand(NC, -1, 1), *acc0 = frand(NC, -1, 1);
  float *dss = frand(N, -0.1f, 0.1f), *dg0 = frand(C, -1, 1);
  void *xa = act_of(x, NC, bf16), *ga = act_of(gain, C, bf16), *dxga = act_of(dxg, NC, bf16);
  void *acca = act_of(acc0, NC, bf16);
  float *xg = falloc(NC), *ss = falloc(N), *ss2 = fnan(N), *dgain = fcopy(dg0, C), *dg2 = fcopy(dg0, C);
  kern_gain_sumsq_forward(xg, ss, x, gain, N, C);
  void *xga = act_of(fnan(NC), NC, bf16);
  norm_ctx c = norm_of(xga, ss2, xa, ga, NULL, NULL, N, C, bf16);
  run_rows(gain_sumsq_ph, 1, &c);
  close_f("ss", ss2, ss, N, 2e-6, 0);
  close_f("xg", f32_of(xga, NC, bf16), xg, NC, bf16 ? 4e-3 : 0, 0);
  float *acc = fcopy(acc0, NC);
  kern_gain_sumsq_backward(acc, dgain, dxg, x, gain, dss, N, C);
  run_colsum(dg2, dxga, xa, NULL, N, C, bf16);
  c = norm_of(acca, NULL, xa, ga, dxga, dss, N, C, bf16);
  grid_run_body(5, 1, 256, gain_dx_body, &c); /* fewer threads than elements: the grid strides */
  close_f("dx_acc", f32_of(acca, NC, bf16), acc, NC, bf16 ? 4e-3 : 0, bf16 ? 1e-3 : 0);
  close_f("dgain", dg2, dgain, C, 2e-5, 2e-5);
  /* online RMS on a bottleneck of width w */
  float *h = frand(NW, -3, 3), *dh = frand(NW, -1, 1), *s = frand(N, 1, 50), *rstd = falloc(N), *r2 = fnan(N);
  void *ha = act_of(h, NW, bf16), *dha = act_of(dh, NW, bf16);
  kern_online_rms_forward(h, rstd, s, N, w, 1.0f / 64, 1e-5f);
  c = norm_of(ha, r2, NULL, NULL, NULL, s, N, w, bf16);
  run_rows(online_fwd_body, 0, &c);
  cr_assert_arr_eq(r2, rstd, N * sizeof(float), "online rstd: the same operations, the same bits");
  close_f("h", f32_of(ha, NW, bf16), h, NW, bf16 ? 4e-3 : 0, 0);
  float *dssc = falloc(N), *dss2 = fnan(N);
  kern_online_rms_backward(dh, dssc, h, rstd, N, w, 1.0f / 64);
  c = norm_of(dha, dss2, NULL, NULL, ha, r2, N, w, bf16);
  run_rows(online_bwd_ph, 1, &c);
  close_f("dh", f32_of(dha, NW, bf16), dh, NW, bf16 ? 4e-3 : 0, 0);
  close_f("dss", dss2, dssc, N, bf16 ? 2e-2 : 2e-5, 1e-6);
}
Test(cuda_math, btp_norm_pieces_match_cpu) {
  btp_case(9, 40, 48, 0);
  btp_case(70, 64, 20, 0);
  btp_case(9, 40, 48, 1);
}

/* ---- RoPE (rope.cu) and the embedding gather (embedding.cu) ----------------------------- */

typedef struct {
  hd_rope_args rope;
  hd_emb_args emb;
  int bf16;
} gather_ctx;
static void rope_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_rope_thread(&((gather_ctx *)c)->rope, ((gather_ctx *)c)->bf16, ix);
}
static void emb_fwd_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_embedding_fwd_thread(&((gather_ctx *)c)->emb, ((gather_ctx *)c)->bf16, ix);
}

Test(cuda_math, rope_matches_cpu_bit_for_bit) {
  const int B = 2, T = 9, H = 3, hd = 10;
  const size_t n = (size_t)B * T * H * hd;
  float *c = falloc((size_t)T * hd / 2), *s = falloc((size_t)T * hd / 2);
  kern_rope_tables(c, s, T, hd, 10000.0f);
  for (int bf16 = 0; bf16 <= 1; bf16++)
    for (int dir = 0; dir <= 1; dir++) {
      rng_seed(300 + bf16 * 2 + dir);
      float *x = frand(n, -2, 2), *y = falloc(n);
      void *xa = act_of(x, n, bf16);
      if (dir == 0) kern_rope_forward(y, x, c, s, B, T, H, hd);
      else kern_rope_backward(y, x, c, s, B, T, H, hd);
      gather_ctx k = {.bf16 = bf16};
      k.rope = (hd_rope_args){xa, xa, c, s, n / 2, T, H, hd / 2, dir == 0 ? 1.0f : -1.0f}; /* in place */
      grid_run_body(2, 1, 64, rope_body, &k); /* 128 threads for 270 pairs: the grid strides */
      for (size_t i = 0; i < n; i++)
        cr_assert_eq(hd_ld(xa, i, bf16), bf16 ? hd_round_bf16(y[i]) : y[i], "rope[%zu]", i);
      free(x), free(y), free(xa);
    }
}

Test(cuda_math, embedding_forward_matches_cpu) {
  const int N = 37, V = 11, C = 24;
  rng_seed(310);
  int32_t tok[37];
  for (int i = 0; i < N; i++) tok[i] = (int32_t)(rng_u01() * V);
  for (int bf16 = 0; bf16 <= 1; bf16++) {
    float *wte = frand((size_t)V * C, -1, 1), *want = falloc((size_t)N * C);
    void *wa = act_of(wte, (size_t)V * C, bf16), *out = act_of(fnan((size_t)N * C), (size_t)N * C, bf16);
    kern_embedding_forward(want, tok, wte, N, V, C);
    gather_ctx k = {.bf16 = bf16};
    k.emb = (hd_emb_args){.out = out, .wte = wa, .tokens = tok, .N = N, .C = C};
    grid_run_body(3, 1, 128, emb_fwd_body, &k);
    for (size_t i = 0; i < (size_t)N * C; i++) cr_assert_eq(hd_ld(out, i, bf16), want[i], "out[%zu]", i);
    free(wte), free(want), free(wa), free(out);
  }
}
