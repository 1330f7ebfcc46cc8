/* The CUDA attention (kernels/cuda/hd_flash.h) run on the CPU by the grid
 * runner (grid_run.h): every block of the three kernels, its phases in
 * order, each phase for every warp and lane -- what the GPU runs between
 * two __syncthreads() -- with shared memory poisoned with NaN before each
 * block, so a phase that reads what no
 * earlier phase wrote shows up. Compared with the CPU attention
 * (kernels/cpu/attention.c) over sequence lengths that leave partial tiles,
 * head dimensions that need padding to 16, every tile shape the backend may
 * pick, bf16 storage, and NULL gradients. (On the GPU, bf16 strip products
 * run on tensor cores instead of the lane loops used here.) */
#include "cuda_testkit.h"

#include "../../kernels/cuda/hd_flash.h"

TestSuite(cuda_flash, .init = two_threads);

typedef enum { K_FWD, K_DQ, K_DKV } fa_kind;

/* One kernel's block state (attention.cu's fa_kernel: begin, then the phases). */
typedef struct {
  fa_kind k;
  const fa_args *a;
  fa_fwd_blk f;
  fa_dq_blk q;
  fa_dkv_blk v;
} fa_ctx;

static int fa_block_begin(void *ctx, hd_ix ix, void *smem) {
  fa_ctx *c = ctx;
  return c->k == K_FWD  ? fa_fwd_begin(&c->f, c->a, smem, (int)ix.bx, (int)ix.by)
         : c->k == K_DQ ? fa_dq_begin(&c->q, c->a, smem, (int)ix.bx, (int)ix.by)
                        : fa_dkv_begin(&c->v, c->a, smem, (int)ix.bx, (int)ix.by);
}
static void fa_block_phase(void *ctx, hd_ix ix, int ph, hd_regs *r, void *smem) {
  (void)r, (void)smem;
  const fa_ctx *c = ctx;
  if (c->k == K_FWD) fa_fwd_phase(&c->f, ph, hd_warp(ix), hd_lane(ix));
  else if (c->k == K_DQ) fa_dq_phase(&c->q, ph, hd_warp(ix), hd_lane(ix));
  else fa_dkv_phase(&c->v, ph, hd_warp(ix), hd_lane(ix));
}
static int fa_barrier(int ph) {
  (void)ph;
  return HD_SYNC_BARRIER;
}

/* attention.cu's launch: grid (T / rows up, B H), fa_threads threads, a
 * barrier after every phase. (The GPU takes the x tiles heaviest first;
 * the order of blocks does not change a result.) */
static void run_kernel(fa_kind k, const fa_args *a) {
  fa_ctx c = {.k = k, .a = a};
  const size_t bytes = k == K_FWD ? fa_fwd_carve(&c.f, &a->d, NULL)
                                  : k == K_DQ ? fa_dq_carve(&c.q, &a->d, NULL) : fa_dkv_carve(&c.v, &a->d, NULL);
  const grid_kernel g = {(unsigned)((a->T + a->d.rows - 1) / a->d.rows), (unsigned)(a->B * a->H),
                         (unsigned)fa_threads(&a->d), 0, fa_barrier, bytes, fa_block_begin, fa_block_phase};
  grid_run(&g, &c);
}

/* act storage of x (x becomes the stored values) */
static void *store(float *x, size_t n, int bf16) {
  void *p = malloc(n * (bf16 ? 2 : 4));
  for (size_t i = 0; i < n; i++) {
    hd_st(p, i, x[i], bf16);
    x[i] = hd_ld(p, i, bf16);
  }
  return p;
}
static void *poisoned(size_t n, int bf16) {
  void *p = malloc(n * (bf16 ? 2 : 4));
  for (size_t i = 0; i < n; i++) hd_st(p, i, NAN, bf16);
  return p;
}

/* ||got - want|| / ||want|| <= tol, and every element finite */
static void check(const char *what, const void *got, int bf16, const float *want, size_t n, double tol) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double g = hd_ld(got, i, bf16), w = want[i];
    cr_assert(isfinite(g), "%s[%zu] is %g", what, i, g);
    num += (g - w) * (g - w);
    den += w * w;
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  if (verbose()) printf("%s rel_l2 %.3g\n", what, rel);
  cr_assert(rel <= tol, "%s: rel_l2 %.3g > %.1g", what, rel, tol);
}

typedef struct {
  int B, T, H, hd, rows, cols, bf16;
  int dq, dk, dv; /* which gradients are asked for */
} flash_case;

static void run_case(flash_case c) {
  rng_seed((uint64_t)(c.B * 7 + c.T * 131 + c.H * 17 + c.hd * 3 + c.rows + c.cols * 5 + c.bf16));
  const size_t n = (size_t)c.B * c.T * c.H * c.hd, ns = (size_t)c.B * c.H * c.T;
  float *q = frand(n, -2, 2), *k = frand(n, -2, 2), *v = frand(n, -1, 1), *dout = frand(n, -1, 1);
  fa_args a;
  memset(&a, 0, sizeof a);
  a.d = fa_dims_make(c.rows, c.cols, c.hd, c.bf16);
  a.B = c.B, a.T = c.T, a.H = c.H, a.scale = 1.0f / sqrtf((float)c.hd);
  a.q = store(q, n, c.bf16), a.k = store(k, n, c.bf16), a.v = store(v, n, c.bf16), a.dout = store(dout, n, c.bf16);
  a.out = poisoned(n, c.bf16), a.stats = fnan(2 * ns), a.D = fnan(ns);
  a.dq = c.dq ? poisoned(n, c.bf16) : NULL, a.dk = c.dk ? poisoned(n, c.bf16) : NULL;
  a.dv = c.dv ? poisoned(n, c.bf16) : NULL;
  a.need_dq = c.dq, a.need_dk = c.dk, a.need_dv = c.dv;
  /* the CPU kernels on the same (stored) inputs */
  float *out = falloc(n), *stats = falloc(2 * ns), *dq = falloc(n), *dk = falloc(n), *dv = falloc(n);
  float *scratch = falloc(kern_attention_scratch_floats(c.B, c.T, c.H));
  kern_attention_forward(out, stats, scratch, q, k, v, c.B, c.T, c.H, c.hd);
  kern_attention_backward(dq, dk, dv, scratch, dout, q, k, v, stats, c.B, c.T, c.H, c.hd);
  run_kernel(K_FWD, &a);
  if (a.need_dq || a.need_dk) run_kernel(K_DQ, &a);
  if (a.need_dk || a.need_dv) run_kernel(K_DKV, &a);
  const double tol = c.bf16 ? 1.5e-2 : 2e-6;
  check("stats", a.stats, 0, stats, 2 * ns, c.bf16 ? 1e-5 : 1e-6);
  check("out", a.out, c.bf16, out, n, tol);
  if (c.dq) check("dq", a.dq, c.bf16, dq, n, c.bf16 ? 3e-2 : 5e-6);
  if (c.dk) check("dk", a.dk, c.bf16, dk, n, c.bf16 ? 3e-2 : 5e-6);
  if (c.dv) check("dv", a.dv, c.bf16, dv, n, tol);
  free(q), free(k), free(v), free(dout), free(out), free(stats), free(dq), free(dk), free(dv), free(scratch);
  free((void *)a.q), free((void *)a.k), free((void *)a.v), free((void *)a.dout), free(a.out), free(a.stats), free(a.D);
  free(a.dq), free(a.dk), free(a.dv);
}

#define ALL 1, 1, 1
Test(cuda_flash, one_token) { run_case((flash_case){1, 1, 1, 16, 64, 64, 0, ALL}); }
Test(cuda_flash, partial_tiles) { run_case((flash_case){2, 37, 3, 16, 64, 64, 0, ALL}); }
Test(cuda_flash, three_tiles_hd64) { run_case((flash_case){1, 130, 2, 64, 64, 64, 0, ALL}); }
Test(cuda_flash, padded_head_dim) { run_case((flash_case){1, 100, 2, 20, 16, 32, 0, ALL}); }
Test(cuda_flash, rows_smaller_than_cols) { run_case((flash_case){2, 64, 2, 64, 32, 64, 0, ALL}); }
Test(cuda_flash, small_tiles_hd128) { run_case((flash_case){1, 77, 1, 128, 16, 16, 0, ALL}); }
Test(cuda_flash, bf16_storage) { run_case((flash_case){2, 50, 2, 32, 64, 64, 1, ALL}); }
Test(cuda_flash, bf16_small_tiles) { run_case((flash_case){1, 130, 1, 64, 16, 32, 1, ALL}); }
Test(cuda_flash, null_dq) { run_case((flash_case){1, 70, 2, 16, 16, 32, 0, 0, 1, 1}); }
Test(cuda_flash, null_dk) { run_case((flash_case){1, 70, 2, 16, 64, 64, 0, 1, 0, 1}); }
Test(cuda_flash, only_dv) { run_case((flash_case){1, 70, 2, 16, 32, 64, 0, 0, 0, 1}); }
Test(cuda_flash, only_dq) { run_case((flash_case){1, 70, 2, 16, 32, 64, 0, 1, 0, 0}); }

/* The phases' results do not depend on anything but the inputs: a second
 * run gives the same bits (the GPU's determinism rests on this order). */
Test(cuda_flash, reproducible) {
  const int B = 1, T = 45, H = 2, hd = 16;
  const size_t n = (size_t)B * T * H * hd, ns = (size_t)B * H * T;
  rng_seed(5);
  float *q = frand(n, -2, 2), *k = frand(n, -2, 2), *v = frand(n, -1, 1), *g = frand(n, -1, 1);
  float *o[2], *s[2], *d[2];
  for (int r = 0; r < 2; r++) {
    fa_args a;
    memset(&a, 0, sizeof a);
    a.d = fa_dims_make(16, 32, hd, 0);
    a.B = B, a.T = T, a.H = H, a.scale = 0.25f;
    a.q = q, a.k = k, a.v = v, a.dout = g;
    a.out = o[r] = falloc(n), a.stats = s[r] = falloc(2 * ns), a.D = falloc(ns);
    a.dq = a.dk = a.dv = d[r] = falloc(3 * n);
    a.dq = d[r], a.dk = d[r] + n, a.dv = d[r] + 2 * n;
    a.need_dq = a.need_dk = a.need_dv = 1;
    run_kernel(K_FWD, &a);
    run_kernel(K_DQ, &a);
    run_kernel(K_DKV, &a);
    free(a.D);
  }
  cr_assert_arr_eq(o[0], o[1], n * sizeof(float));
  cr_assert_arr_eq(s[0], s[1], 2 * ns * sizeof(float));
  cr_assert_arr_eq(d[0], d[1], 3 * n * sizeof(float));
}
