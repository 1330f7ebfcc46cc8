#include "ckpt_hooks.h"

#include <stdio.h>

#include "check.h"

/* p2p tag of the recompute forward (no other message is in flight at a step
 * boundary) */
#define ACTS_PP_TAG 0x6b63

/* The last micro-batch (tokens and sample indices) and, recomputed with the
 * weights being saved, the bottleneck activations h = silu(A x) of every
 * low-rank group of every layer ("sample": replica 0's micro-batch; "all":
 * every replica's, plus the pre-activations A x and each layer's input).
 * Global datasets: tokens [nseq, T], sample_index [nseq], per layer
 * layers.L.{attn,mlp}.<group>.h / .hpre [nseq*T, nproj, r] and
 * layers.L.input [nseq*T, d]; each rank adds the hyperslab it holds (rows
 * of its replica, r or d columns of its tensor-parallel shard, layers of its
 * pipeline stage). */
/* An activation of backend memory (count's elements, row-major) added to the
 * sink through a host copy (*host, grown as needed). */
static void add_from_backend(model *m, ckpt_acts_sink *sink, const char *name, int ndim, const int64_t *shape,
                             const int64_t *start, const int64_t *count, int has, const boost_act *src, float **host,
                             size_t *host_n) {
  size_t n = 1;
  for (int k = 0; k < ndim; k++) n *= (size_t)count[k];
  BOOST_ASSERT(m->be->act_dtype == BOOST_F32);
  if (has && n > *host_n) {
    boost_free(*host);
    *host = boost_calloc(n, sizeof **host);
    *host_n = n;
  }
  if (has) m->be->mem->download(m->be, *host, src, n * sizeof(float));
  ckpt_acts_add(sink, name, CKPT_ACT_F32, ndim, shape, start, count, has, *host);
}

static void activations(void *ctx, const train_state *st, acts_mode mode, ckpt_acts_sink *sink) {
  trainer_ckpt_ctx *c = ctx;
  int have = mode != ACTS_NONE && st->last_tokens && st->last_B > 0 && st->last_T > 0;
  if (!comm_control_min_int(c->comm, COMM_WORLD, have)) return;
  model *m = c->m;
  const process_grid *g = c->grid;
  const int B = st->last_B, T = st->last_T, dp = g->dp;
  const int all = mode == ACTS_ALL;
  /* Recompute the forward pass with the weights of this checkpoint (through
   * the pipeline): the stored activations are what the stored weights give. */
  pipeline_forward(c->pipe, st->last_tokens, NULL, ACTS_PP_TAG);

  const int64_t nseq = all ? (int64_t)dp * B : B, seq0 = all ? (int64_t)g->dp_rank * B : 0;
  const int replica_writes = all || g->dp_rank == 0;
  const int64_t N = (int64_t)B * T, row0 = seq0 * T;
  ckpt_acts_set_batch(sink, B, T);
  if (g->pp_rank == 0) {
    const int64_t sh[2] = {nseq, T}, st0[2] = {seq0, 0}, ct[2] = {B, T};
    ckpt_acts_add(sink, "tokens", CKPT_ACT_I32, 2, sh, st0, ct, replica_writes && g->tp_rank == 0, st->last_tokens);
    /* Global sample index of each sequence (the trainer's order: cursor
     * before the step + ((accum - 1) * dp + dp_rank) * B + b). */
    int64_t *idx = boost_calloc((size_t)B, sizeof *idx);
    const int64_t global_batch = (int64_t)B * c->cfg->train.grad_accum * dp;
    for (int b = 0; b < B; b++)
      idx[b] = st->data_cursor - global_batch + ((int64_t)(c->cfg->train.grad_accum - 1) * dp + g->dp_rank) * B + b;
    const int64_t sh1[1] = {nseq}, st1[1] = {seq0}, ct1[1] = {B};
    ckpt_acts_add(sink, "sample_index", CKPT_ACT_I64, 1, sh1, st1, ct1, replica_writes && g->tp_rank == 0, idx);
    boost_free(idx);
  }
  char name[128];
  float *host = NULL;
  size_t host_n = 0;
  const int d = m->cfg.d_model;
  /* full recompute keeps no per-layer bottleneck: inputs only */
  const int keep_h = m->recompute != RECOMPUTE_FULL;
  for (int l = 0; l < m->nl; l++) {
    const int L = m->stage.first_layer + l;
    const layer_param *lp = &m->layers[l];
    const layer_acts *la = &m->cur->acts[l];
    if (all || !keep_h) { /* the layer's input (residual stream, columns of this tp shard) */
      const int sharded = m->d_res < d;
      const int64_t sh[2] = {nseq * T, d}, st0[2] = {row0, sharded ? (int64_t)g->tp_rank * m->d_res : 0},
                    ct[2] = {N, m->d_res};
      snprintf(name, sizeof name, "layers.%d.input", L);
      add_from_backend(m, sink, name, 2, sh, st0, ct, replica_writes && (sharded || g->tp_rank == 0), m->cur->resid[l],
                       &host, &host_n);
    }
    if (!keep_h) continue;
    for (int gi = 0; gi < lp->ngroups; gi++) {
      const proj_group *pg = &lp->groups[gi];
      if (!pg->lowrank || !la->h[gi]) continue;
      const int sharded = pg->r_loc < pg->r;
      const int64_t sh[3] = {nseq * T, pg->nproj, pg->r}, st0[3] = {row0, 0, sharded ? (int64_t)g->tp_rank * pg->r_loc : 0},
                    ct[3] = {N, pg->nproj, pg->r_loc};
      const int w = replica_writes && (sharded || g->tp_rank == 0);
      const char *blk = pg->kinds[0] <= PROJ_O ? "attn" : "mlp";
      snprintf(name, sizeof name, "layers.%d.%s.%s.h", L, blk, model_group_name(pg));
      add_from_backend(m, sink, name, 3, sh, st0, ct, w, la->h[gi], &host, &host_n);
      if (all) {
        snprintf(name, sizeof name, "layers.%d.%s.%s.hpre", L, blk, model_group_name(pg));
        add_from_backend(m, sink, name, 3, sh, st0, ct, w, la->hpre[gi], &host, &host_n);
      }
    }
  }
  boost_free(host);
}

ckpt_hooks trainer_ckpt_hooks(trainer_ckpt_ctx *ctx) { return (ckpt_hooks){ctx, activations}; }
