/* The CUDA backend's optimizer, gradient norm and embedding gradient,
 * replayed on the CPU with the kernels' loops over the hd_*.h arithmetic
 * (see test_cuda_math.c) and compared with the CPU backend: AdamW bit for
 * bit, the tiles that cut an optim plan, the gradient sum of squares, and
 * the embedding backward's sorted runs. */
#include "ops_testkit.h"

#include "backend.h"
#include "cuda_emul.h"

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

/* adamw_kernel over every tile */
static void emu_adamw(const hd_tile *t, size_t nt, float *p, const float *g, float *m, float *v, uint16_t *work,
                      adamw_hparams hp, int step, float gs) {
  const hd_adamw_consts c = hd_adamw_make(hp.beta1, hp.beta2, hp.lr, hp.eps, hp.weight_decay, step, gs);
  for (size_t k = 0; k < nt; k++) {
    const float wd = (segs[t[k].seg].flags & BOOST_SEG_DECAY) ? c.wd : 0.0f;
    for (uint32_t i = 0; i < t[k].len; i++) {
      const size_t a = t[k].start + i, mo = a - MOM_BEGIN;
      p[a] = hd_adamw(&c, wd, p[a], g[a], &m[mo], &v[mo]);
      if (work) work[a] = hd_bf16_bits(p[a]);
    }
  }
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
    emu_adamw(t, nt, p2, g, m2, v2, work, hp, step, 0.75f);
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

/* sumsq_tiles_kernel, sumsq_segs_kernel, sumsq_total_kernel */
static double emu_grad_sumsq(const hd_tile *t, size_t nt, const uint32_t *first, const float *g) {
  double *partial = calloc(nt, sizeof *partial), seg[NSEG], per[HD_OPT_THREADS];
  for (size_t k = 0; k < nt; k++) {
    for (int th = 0; th < HD_OPT_THREADS; th++) {
      per[th] = 0.0;
      if (segs[t[k].seg].flags & BOOST_SEG_NORM)
        for (uint32_t i = (uint32_t)th; i < t[k].len; i += HD_OPT_THREADS) {
          const double x = (double)g[t[k].start + i];
          per[th] += x * x;
        }
    }
    partial[k] = emu_block_sum_d(per, HD_OPT_THREADS);
  }
  for (int s = 0; s < NSEG; s++) {
    for (int th = 0; th < HD_OPT_THREADS; th++) {
      per[th] = 0.0;
      for (uint32_t k = first[s] + (uint32_t)th; k < first[s + 1]; k += HD_OPT_THREADS) per[th] += partial[k];
    }
    seg[s] = emu_block_sum_d(per, HD_OPT_THREADS);
  }
  double total = 0.0;
  for (int s = 0; s < NSEG; s++)
    if (segs[s].flags & BOOST_SEG_NORM) total += seg[s];
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
  const double got = emu_grad_sumsq(t, nt, first, g), again = emu_grad_sumsq(t, nt, first, g);
  cr_assert(fabs(got - want) <= 1e-12 * want, "%.17g vs %.17g", got, want);
  cr_assert_eq(hd_f32_bits((float)got), hd_f32_bits((float)again));
  cpu->ops->optim_plan_free(cpu, plan);
  free(t), free(g);
}

/* cu_embedding_backward: a stable sort by token, then embedding_bwd_runs_kernel */
static void emu_embedding_bwd(float *dwte, const void *dout, const int32_t *tok, int N, int V, int C, int bf16) {
  uint32_t *keys = malloc((size_t)N * 4);
  int32_t *pos = malloc((size_t)N * 4), k = 0;
  for (int v = 0; v < V; v++) /* counting sort: stable */
    for (int n = 0; n < N; n++)
      if (tok[n] == v) keys[k] = (uint32_t)v, pos[k++] = n;
  for (int i = 0; i < N; i++) {
    int end;
    if (!hd_run_start(keys, i, N, &end)) continue;
    for (int c = 0; c < C; c++) {
      float acc = 0.0f;
      for (int j = i; j < end; j++) acc += hd_ld(dout, (size_t)pos[j] * C + c, bf16);
      dwte[(size_t)keys[i] * C + c] += acc;
    }
  }
  free(keys), free(pos);
}

Test(cuda_optim, embedding_backward_matches_cpu) {
  const int N = 300, V = 50, C = 24;
  rng_seed(900);
  int32_t tok[300];
  for (int n = 0; n < N; n++) tok[n] = n < 100 ? 7 : (int32_t)(rng_u01() * V); /* one long run and scattered ones */
  float *dout = frand((size_t)N * C, -1, 1), *d0 = frand((size_t)V * C, -1, 1);
  float *cpu = fcopy(d0, (size_t)V * C), *got = fcopy(d0, (size_t)V * C);
  embedding_backward(cpu, dout, tok, N, V, C);
  emu_embedding_bwd(got, dout, tok, N, V, C, 0);
  for (size_t i = 0; i < (size_t)V * C; i++)
    cr_assert(fabsf(got[i] - cpu[i]) <= 1e-5f * (1.0f + fabsf(cpu[i])), "dwte[%zu] %g vs %g", i, (double)got[i],
              (double)cpu[i]);
  free(dout), free(d0), free(cpu), free(got);
}
