/* boost-gpu-check's throughput lines (informational, not pass/fail), bf16
 * activations, cola-1b shapes at seq 1024 (B = 8: N = 8192 tokens): a
 * square GEMM (the device's practical bf16 peak), one layer's CoLA GEMM set
 * forward and backward, the flash attention forward and backward, the
 * cross-entropy over the 32000-word vocabulary, AdamW and the gradient
 * norm over 100M floats (100 segments of 1M; bytes moved per second).
 * Each: the best of 5 timed runs after a warm-up, wall clock around a
 * sync. Lines: "bench <name> <ms> ms <TFLOP/s or GB/s>". */
#include <stdio.h>

#include "check.h"
#include "gpu_check.h"
#include "util.h"

typedef void (*bench_fn)(gcheck *g, void *ctx);

static double best_ms(gcheck *g, bench_fn f, void *ctx) {
  f(g, ctx);
  g->be->mem->sync(g->be);
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    const double t0 = boost_now_s();
    f(g, ctx);
    g->be->mem->sync(g->be);
    const double ms = (boost_now_s() - t0) * 1e3;
    best = ms < best ? ms : best;
  }
  return best;
}

typedef struct {
  int N, d, r, ffn, V, B, T, H, hd;
  void *x, *y, *w, *h, *dh, *q, *k, *v, *o, *dq, *dk, *dv, *logits, *scratch;
  float *wgrad, *stats, *losses;
  int32_t *tg;
} shapes;

static void gemm_square(gcheck *g, void *ctx) {
  shapes *s = ctx;
  g->be->ops->gemm(g->be, 0, 1, 8192, 8192, 8192, s->x, 8192, s->w, 8192, 0.0f, s->y, 8192);
}

/* one CoLA projection y = silu(x A^T) B^T (d -> r -> out) forward and backward */
static void cola_proj(gcheck *g, shapes *s, int in, int out) {
  boost_backend *be = g->be;
  const boost_ops *o = be->ops;
  o->gemm(be, 0, 1, s->N, s->r, in, s->x, in, s->w, in, 0.0f, s->h, s->r);
  o->silu_forward(be, s->dh, s->h, (size_t)s->N * s->r);
  o->gemm(be, 0, 1, s->N, out, s->r, s->dh, s->r, s->w, s->r, 0.0f, s->y, out);
  o->gemm_acc_f32(be, 1, 0, out, s->r, s->N, s->y, out, s->dh, s->r, s->wgrad, s->r);
  o->gemm(be, 0, 0, s->N, s->r, out, s->y, out, s->w, s->r, 0.0f, s->dh, s->r);
  o->silu_backward(be, s->dh, s->dh, s->h, (size_t)s->N * s->r);
  o->gemm_acc_f32(be, 1, 0, s->r, in, s->N, s->dh, s->r, s->x, in, s->wgrad, in);
  o->gemm(be, 0, 0, s->N, in, s->r, s->dh, s->r, s->w, in, 0.0f, s->y, in);
}
static void cola_layer(gcheck *g, void *ctx) {
  shapes *s = ctx;
  for (int p = 0; p < 4; p++) cola_proj(g, s, s->d, s->d); /* q, k, v, o */
  cola_proj(g, s, s->d, s->ffn);                            /* gate, up */
  cola_proj(g, s, s->d, s->ffn);
  cola_proj(g, s, s->ffn, s->d); /* down */
}
static void attention(gcheck *g, void *ctx) {
  shapes *s = ctx;
  boost_backend *be = g->be;
  be->ops->attention_forward(be, s->o, s->stats, s->scratch, s->q, s->k, s->v, s->B, s->T, s->H, s->hd);
  be->ops->attention_backward(be, s->dq, s->dk, s->dv, s->scratch, s->o, s->q, s->k, s->v, s->stats, s->B, s->T, s->H,
                              s->hd);
}
static void crossentropy(gcheck *g, void *ctx) {
  shapes *s = ctx;
  g->be->ops->crossentropy_backward(g->be, s->logits, s->losses, s->logits, s->tg, s->N, s->V, 1e-4f);
}

/* AdamW and the gradient norm over 100M floats in 100 segments (a cola-1b
 * shard's order of magnitude), bf16 working copy written */
typedef struct {
  boost_optim_plan *plan;
  float *p, *gr, *m, *v;
  void *work;
  double *sumsq;
  size_t n;
} optim_bufs;
static void adamw(gcheck *g, void *ctx) {
  optim_bufs *o = ctx;
  const adamw_hparams hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  g->be->ops->adamw(g->be, o->plan, o->p, o->gr, o->m, o->v, o->work, hp, 3, 0.5f);
}
static void grad_norm(gcheck *g, void *ctx) {
  optim_bufs *o = ctx;
  g->be->ops->grad_sumsq(g->be, o->plan, o->gr, o->sumsq);
}
static void bench_optim(gcheck *g) {
  boost_backend *be = g->be;
  enum { NSEG = 100 };
  const size_t seg = (size_t)1 << 20, n = NSEG * seg;
  boost_segment segs[NSEG];
  for (int i = 0; i < NSEG; i++)
    segs[i] = (boost_segment){.offset = i * seg, .n = seg, .flags = BOOST_SEG_NORM | (i % 4 ? BOOST_SEG_DECAY : 0u)};
  optim_bufs o = {.n = n};
  o.plan = be->ops->optim_plan_create(be, segs, NSEG, 0, n);
  o.p = boost_be_alloc(be, n * 4, "bench"), o.gr = boost_be_alloc(be, n * 4, "bench");
  o.m = boost_be_alloc(be, n * 4, "bench"), o.v = boost_be_alloc(be, n * 4, "bench");
  o.work = g->bf16 ? g_act_empty(g, n) : NULL; /* float: the update is the working copy */
  o.sumsq = boost_be_alloc(be, 8, "bench");
  float *h = g_rand(seg, -0.05f, 0.05f);
  for (int i = 0; i < NSEG; i++) {
    be->mem->upload(be, o.p + i * seg, h, seg * 4);
    be->mem->upload(be, o.gr + (NSEG - 1 - i) * seg, h, seg * 4);
  }
  boost_free(h);
  /* read params, grads, m, v; write params, m, v and the working copy */
  const double bytes = (double)n * (28 + (o.work ? boost_act_bytes(be, 1) : 0));
  double ms = best_ms(g, adamw, &o);
  printf("bench adamw %zuM floats %.2f ms %.0f GB/s\n", n >> 20, ms, bytes / ms / 1e6);
  ms = best_ms(g, grad_norm, &o);
  printf("bench grad_sumsq %zuM floats %.2f ms %.0f GB/s\n", n >> 20, ms, 4.0 * n / ms / 1e6);
  be->ops->optim_plan_free(be, o.plan);
  void *bufs[] = {o.p, o.gr, o.m, o.v, o.work, o.sumsq};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) g_free(g, bufs[i]);
}

void gpu_bench(gcheck *g) {
  boost_backend *be = g->be;
  shapes s = {.N = 8192, .d = 2048, .r = 512, .ffn = 5472, .V = 32000, .B = 8, .T = 1024, .H = 32, .hd = 64};
  const size_t big = (size_t)8192 * 8192, nd = (size_t)s.N * s.d;
  float *h = g_rand(big, -0.05f, 0.05f); /* small random values: no GEMM runs on zeros */
  s.x = g_act(g, h, big), s.y = g_act_empty(g, big), s.w = g_act(g, h, big);
  s.h = g_act_empty(g, (size_t)s.N * s.r), s.dh = g_act_empty(g, (size_t)s.N * s.r);
  s.wgrad = boost_be_alloc(be, (size_t)s.ffn * s.r * 4 + (size_t)s.d * s.r * 4, "bench");
  s.q = g_act_empty(g, nd), s.k = g_act_empty(g, nd), s.v = g_act_empty(g, nd), s.o = g_act_empty(g, nd);
  s.dq = g_act_empty(g, nd), s.dk = g_act_empty(g, nd), s.dv = g_act_empty(g, nd);
  s.stats = boost_be_alloc(be, (size_t)2 * s.B * s.H * s.T * 4, "bench");
  s.scratch = boost_be_alloc(be, be->ops->attention_scratch_bytes(be, s.B, s.T, s.H), "bench");
  s.logits = g_act_empty(g, (size_t)s.N * s.V);
  s.losses = boost_be_alloc(be, (size_t)s.N * 4, "bench");
  int32_t *tg = g_tokens((size_t)s.N, s.V);
  s.tg = g_i32(g, tg, (size_t)s.N);
  be->mem->copy(be, s.q, s.x, boost_act_bytes(be, nd));
  be->mem->copy(be, s.k, s.w, boost_act_bytes(be, nd));
  be->mem->copy(be, s.v, s.x, boost_act_bytes(be, nd));
  boost_free(h), boost_free(tg);

  double ms = best_ms(g, gemm_square, &s);
  printf("bench gemm 8192^3 bf16 %.2f ms %.1f TFLOP/s\n", ms, 2.0 * 8192 * 8192 * 8192 / ms / 1e9);
  ms = best_ms(g, cola_layer, &s);
  const double layer_flops = 6.0 * s.N * s.r * (11.0 * s.d + 3.0 * s.ffn); /* 6 N r (in + out) per projection */
  printf("bench cola-1b layer GEMMs fwd+bwd (N %d) %.2f ms %.1f TFLOP/s\n", s.N, ms, layer_flops / ms / 1e9);
  ms = best_ms(g, attention, &s);
  const double att_fwd = 4.0 * s.B * s.H * (double)s.T * (s.T + 1) / 2.0 * s.hd;
  printf("bench attention fwd+bwd B%d T%d H%d hd%d %.2f ms %.1f TFLOP/s (causal, bwd 2.5x fwd)\n", s.B, s.T, s.H, s.hd,
         ms, 3.5 * att_fwd / ms / 1e9);
  ms = best_ms(g, crossentropy, &s);
  printf("bench crossentropy fused N%d V%d %.2f ms %.0f GB/s\n", s.N, s.V, ms, 2.0 * 2 * s.N * (double)s.V / ms / 1e6);
  void *bufs[] = {s.x, s.y, s.w, s.h, s.dh, s.wgrad, s.q, s.k, s.v, s.o, s.dq, s.dk, s.dv, s.stats, s.scratch,
                  s.logits, s.losses, s.tg};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) g_free(g, bufs[i]);
  bench_optim(g);
}
