/* The CUDA backend's optimizer, gradient norm and embedding gradient: the
 * kernels' bodies and phases (hd_optim.h, hd_elementwise.h) run over whole
 * grids on the CPU (grid_run.h; test_cuda_math.c says how) and compared
 * with the CPU backend: AdamW bit for bit, the tiles that cut an optim
 * plan, the gradient sum of squares, and the embedding backward's sorted
 * runs. */
#include "cuda_testkit.h"

#include "../../kernels/cuda/hd_elementwise.h"
#include "../../kernels/cuda/hd_optim.h"
#include "backend.h"

TestSuite(cuda_optim, .init = two_threads);

#define NSEG 5
static const boost_segment segs[NSEG] = {
    {1000, 3000, BOOST_SEG_DECAY | BOOST_SEG_NORM}, {4000, 17, BOOST_SEG_NORM},    {5000, 20000, BOOST_SEG_DECAY},
    {25000, 16384, BOOST_SEG_NORM},                  {41500, 3500, BOOST_SEG_DECAY | BOOST_SEG_NORM},
};
#define ARENA 50000
#define MOM_BEGIN 1000
#define MOM_END 45000

static size_t tiles_of(hd_tile **tiles, uint32_t *first) {
  uint64_t off[NSEG], n[NSEG];
  for (int i = 0; i < NSEG; i++) off[i] = segs[i].offset, n[i] = segs[i].n;
  const size_t nt = hd_tiles_build(off, n, NSEG, HD_OPT_TILE, NULL, NULL);
  *tiles = calloc(nt, sizeof **tiles);
  hd_tiles_build(off, n, NSEG, HD_OPT_TILE, *tiles, first);
  return nt;
}

Test(cuda_optim, tiles_cover_each_segment_once) {
  hd_tile *t;
  uint32_t first[NSEG + 1];
  const size_t nt = tiles_of(&t, first);
  int *cnt = calloc(ARENA, sizeof *cnt);
  for (size_t k = 0; k < nt; k++) {
    const boost_segment *s = &segs[t[k].seg];
    cr_assert(t[k].len > 0 && t[k].len <= HD_OPT_TILE);
    cr_assert(t[k].start >= s->offset && t[k].start + t[k].len <= s->offset + s->n, "tile %zu straddles", k);
    cr_assert(k >= first[t[k].seg] && k < first[t[k].seg + 1]);
    for (uint32_t i = 0; i < t[k].len; i++) cnt[t[k].start + i]++;
  }
  for (int i = 0; i < NSEG; i++)
    for (size_t a = segs[i].offset; a < segs[i].offset + segs[i].n; a++) cr_assert_eq(cnt[a], 1, "float %zu", a);
  cr_assert_eq(first[NSEG], nt);
  cr_assert_eq(nt, 1 + 1 + 2 + 1 + 1);
  free(cnt), free(t);
}

typedef struct {
  hd_optim_args a;
  int bf16;
} optim_ctx;
static void adamw_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_adamw_block(&((optim_ctx *)c)->a, ((optim_ctx *)c)->bf16, ix);
}
static void sumsq_tiles_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  hd_sumsq_tiles_phase(&((optim_ctx *)c)->a, ix, ph, r, sh);
}
static void sumsq_segs_ph(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  hd_sumsq_segs_phase(&((optim_ctx *)c)->a, ix, ph, r, sh);
}
static void sumsq_total_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_sumsq_total_thread(&((optim_ctx *)c)->a, ix);
}

/* optim.cu's plan as the kernels see it */
static optim_ctx optim_of(const hd_tile *t, const uint32_t *first, const uint32_t *flags) {
  optim_ctx c = {.bf16 = 0};
  c.a.tiles = t, c.a.first = first, c.a.flags = flags, c.a.nseg = NSEG, c.a.mom_begin = MOM_BEGIN;
  return c;
}
static void flags_of(uint32_t *flags) {
  for (int i = 0; i < NSEG; i++) flags[i] = segs[i].flags;
  cr_assert(HD_SEG_DECAY == BOOST_SEG_DECAY && HD_SEG_NORM == BOOST_SEG_NORM);
}

/* cu_adamw: adamw_kernel, one block per tile */
static void run_adamw(const hd_tile *t, size_t nt, const uint32_t *first, float *p, const float *g, float *m, float *v,
                      uint16_t *work, adamw_hparams hp, int step, float gs) {
  uint32_t flags[NSEG];
  flags_of(flags);
  optim_ctx c = optim_of(t, first, flags);
  c.a.params = p, c.a.grads = g, c.a.m = m, c.a.v = v, c.a.work = work, c.bf16 = work != NULL;
  c.a.c = hd_adamw_make(hp.beta1, hp.beta2, hp.lr, hp.eps, hp.weight_decay, step, gs);
  grid_run_body((unsigned)nt, 1, HD_OPT_THREADS, adamw_body, &c);
}

Test(cuda_optim, adamw_bit_identical_to_cpu) {
  boost_backend *cpu = boost_backend_default();
  boost_optim_plan *plan = cpu->ops->optim_plan_create(cpu, segs, NSEG, MOM_BEGIN, MOM_END);
  hd_tile *t;
  uint32_t first[NSEG + 1];
  const size_t nt = tiles_of(&t, first);
  rng_seed(700);
  float *p = frand(ARENA, -1, 1), *p2 = fcopy(p, ARENA), *m = calloc(MOM_END - MOM_BEGIN, 4), *v = calloc(MOM_END - MOM_BEGIN, 4);
  float *m2 = calloc(MOM_END - MOM_BEGIN, 4), *v2 = calloc(MOM_END - MOM_BEGIN, 4);
  uint16_t *work = calloc(ARENA, 2);
  const adamw_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int step = 1; step <= 3; step++) {
    float *g = frand(ARENA, -0.5f, 0.5f);
    cpu->ops->adamw(cpu, plan, p, g, m, v, NULL, hp, step, 0.75f);
    run_adamw(t, nt, first, p2, g, m2, v2, work, hp, step, 0.75f);
    free(g);
  }
  cr_assert_arr_eq(p2, p, ARENA * sizeof(float), "params: the CPU's operations in its order, the same bits");
  cr_assert_arr_eq(m2, m, (MOM_END - MOM_BEGIN) * sizeof(float));
  cr_assert_arr_eq(v2, v, (MOM_END - MOM_BEGIN) * sizeof(float));
  for (int i = 0; i < NSEG; i++)
    for (size_t a = segs[i].offset; a < segs[i].offset + segs[i].n; a++)
      cr_assert_eq(work[a], hd_bf16_bits(p[a]), "the bf16 working copy is the rounded master");
  cpu->ops->optim_plan_free(cpu, plan);
  free(t), free(p), free(p2), free(m), free(v), free(m2), free(v2), free(work);
}

/* cu_grad_sumsq: sumsq_tiles_kernel, sumsq_segs_kernel, sumsq_total_kernel */
static double run_grad_sumsq(const hd_tile *t, size_t nt, const uint32_t *first, const float *g) {
  uint32_t flags[NSEG];
  flags_of(flags);
  optim_ctx c = optim_of(t, first, flags);
  double total = NAN, *partial = malloc((nt + NSEG) * sizeof *partial);
  for (size_t i = 0; i < nt + NSEG; i++) partial[i] = NAN;
  c.a.grads = g, c.a.partial = partial, c.a.seg_sum = partial + nt, c.a.out = &total;
  const size_t sh = HD_OPT_THREADS / 32 * sizeof(double);
  const grid_kernel tiles = {(unsigned)nt, 1, HD_OPT_THREADS, HD_SUMSQ_PHASES, hd_sumsq_sync, sh, NULL, sumsq_tiles_ph};
  const grid_kernel per_seg = {NSEG, 1, HD_OPT_THREADS, HD_SUMSQ_PHASES, hd_sumsq_sync, sh, NULL, sumsq_segs_ph};
  grid_run(&tiles, &c);
  grid_run(&per_seg, &c);
  grid_run_body(1, 1, 1, sumsq_total_body, &c);
  free(partial);
  return total;
}

Test(cuda_optim, grad_sumsq_matches_cpu) {
  boost_backend *cpu = boost_backend_default();
  boost_optim_plan *plan = cpu->ops->optim_plan_create(cpu, segs, NSEG, MOM_BEGIN, MOM_END);
  hd_tile *t;
  uint32_t first[NSEG + 1];
  const size_t nt = tiles_of(&t, first);
  rng_seed(800);
  float *g = frand(ARENA, -2, 2);
  double want = 0.0;
  cpu->ops->grad_sumsq(cpu, plan, g, &want);
  const double got = run_grad_sumsq(t, nt, first, g), again = run_grad_sumsq(t, nt, first, g);
  cr_assert(fabs(got - want) <= 1e-12 * want, "%.17g vs %.17g", got, want);
  cr_assert_eq(hd_f32_bits((float)got), hd_f32_bits((float)again));
  cpu->ops->optim_plan_free(cpu, plan);
  free(t), free(g);
}

static void iota_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_iota_thread(c, ix);
}
static void runs_body(void *c, hd_ix ix, int ph, hd_regs *r, void *sh) {
  (void)ph, (void)r, (void)sh;
  hd_embedding_runs_block(c, 0, ix);
}

/* CUB's stable radix sort of (token, position) pairs by token, on the host:
 * a sort by (token, position) gives the same order */
typedef struct {
  uint32_t key;
  int32_t pos;
} key_pos;
static int key_pos_cmp(const void *a, const void *b) {
  const key_pos *x = a, *y = b;
  return x->key != y->key ? (x->key < y->key ? -1 : 1) : (x->pos > y->pos) - (x->pos < y->pos);
}

/* cu_embedding_backward: iota_kernel, the sort, embedding_bwd_runs_kernel */
static void run_embedding_bwd(float *dwte, const void *dout, const int32_t *tok, int N, int C) {
  int32_t *pos_in = malloc((size_t)N * 4), *pos = malloc((size_t)N * 4);
  uint32_t *keys = malloc((size_t)N * 4);
  key_pos *kp = malloc((size_t)N * sizeof *kp);
  hd_emb_args a = {.dwte = dwte, .dout = dout, .iota = pos_in, .N = N, .C = C};
  grid_run_body(grid_blocks((size_t)N, 256), 1, 256, iota_body, &a);
  for (int i = 0; i < N; i++) kp[i] = (key_pos){(uint32_t)tok[i], pos_in[i]};
  qsort(kp, (size_t)N, sizeof *kp, key_pos_cmp);
  for (int i = 0; i < N; i++) keys[i] = kp[i].key, pos[i] = kp[i].pos;
  a.keys = keys, a.pos = pos;
  grid_run_body((unsigned)N, 1, 64, runs_body, &a); /* embedding.cu: 64 threads when C < 128 */
  free(pos_in), free(pos), free(keys), free(kp);
}

Test(cuda_optim, embedding_backward_matches_cpu) {
  const int N = 300, V = 50, C = 24;
  rng_seed(900);
  int32_t tok[300];
  for (int n = 0; n < N; n++) tok[n] = n < 100 ? 7 : (int32_t)(rng_u01() * V); /* one long run and scattered ones */
  float *dout = frand((size_t)N * C, -1, 1), *d0 = frand((size_t)V * C, -1, 1);
  float *cpu = fcopy(d0, (size_t)V * C), *got = fcopy(d0, (size_t)V * C);
  kern_embedding_backward(cpu, dout, tok, N, V, C);
  run_embedding_bwd(got, dout, tok, N, C);
  for (size_t i = 0; i < (size_t)V * C; i++)
    cr_assert(fabsf(got[i] - cpu[i]) <= 1e-5f * (1.0f + fabsf(cpu[i])), "dwte[%zu] %g vs %g", i, (double)got[i],
              (double)cpu[i]);
  free(dout), free(d0), free(cpu), free(got);
}
