/* The loop's save requests (save_request.h). */
#include "save_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "optim.h"
#include "preempt.h"
#include "run_watch.h"
#include "util.h"

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
 * sink through a host copy (*host, grown as needed), in the run's precision:
 * float32, or the bf16 values as they are (stored as bfloat16). */
static void add_from_backend(model *m, ckpt_acts_sink *sink, const char *name, int ndim, const int64_t *shape,
                             const int64_t *start, const int64_t *count, int has, const boost_act *src, void **host,
                             size_t *host_bytes) {
  const int bf16 = m->be->act_dtype == BOOST_BF16;
  size_t n = 1;
  for (int k = 0; k < ndim; k++) n *= (size_t)count[k];
  const size_t bytes = n * (bf16 ? sizeof(uint16_t) : sizeof(float));
  if (has && bytes > *host_bytes) {
    boost_free(*host);
    *host = boost_calloc(bytes, 1);
    *host_bytes = bytes;
  }
  if (has) m->be->mem->download(m->be, *host, src, bytes);
  ckpt_acts_add(sink, name, bf16 ? CKPT_ACT_BF16 : CKPT_ACT_F32, ndim, shape, start, count, has, *host);
}

static void activations(const save_builder *c, const train_state *st, ckpt_acts_sink *sink) {
  const acts_mode mode = c->cfg->ckpt.activations;
  int have = mode != ACTS_NONE && st->last_tokens && st->last_B > 0 && st->last_T > 0;
  if (!comm_control_min_int(c->comm, COMM_WORLD, have)) return;
  model *m = c->m;
  const model_acts *acts = c->pipe->acts; /* the pipeline's: what pipeline_forward fills */
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
    /* Global sample index of each sequence: the step's last micro-batch,
     * counted from the cursor before the step. */
    int64_t *idx = boost_calloc((size_t)B, sizeof *idx);
    const int accum = c->cfg->train.grad_accum;
    const int64_t cursor = st->data_cursor - (int64_t)B * accum * dp;
    for (int b = 0; b < B; b++) idx[b] = data_sample_index(cursor, accum - 1, dp, g->dp_rank, B, b);
    const int64_t sh1[1] = {nseq}, st1[1] = {seq0}, ct1[1] = {B};
    ckpt_acts_add(sink, "sample_index", CKPT_ACT_I64, 1, sh1, st1, ct1, replica_writes && g->tp_rank == 0, idx);
    boost_free(idx);
  }
  char name[128];
  void *host = NULL;
  size_t host_bytes = 0;
  const int d = m->cfg.d_model;
  /* full recompute keeps no per-layer bottleneck: inputs only */
  const int keep_h = acts->recompute != RECOMPUTE_FULL;
  for (int l = 0; l < m->nl; l++) {
    const int L = m->stage.first_layer + l;
    const layer_param *lp = &m->layers[l];
    const layer_acts *la = &acts->cur->acts[l];
    if (all || !keep_h) { /* the layer's input (residual stream, columns of this tp shard) */
      const int sharded = m->d_res < d;
      const int64_t sh[2] = {nseq * T, d}, st0[2] = {row0, sharded ? (int64_t)g->tp_rank * m->d_res : 0},
                    ct[2] = {N, m->d_res};
      snprintf(name, sizeof name, "layers.%d.input", L);
      add_from_backend(m, sink, name, 2, sh, st0, ct, replica_writes && (sharded || g->tp_rank == 0), acts->cur->resid[l],
                       &host, &host_bytes);
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
      add_from_backend(m, sink, name, 3, sh, st0, ct, w, la->h[gi], &host, &host_bytes);
      if (all) {
        snprintf(name, sizeof name, "layers.%d.%s.%s.hpre", L, blk, model_group_name(pg));
        add_from_backend(m, sink, name, 3, sh, st0, ct, w, la->hpre[gi], &host, &host_bytes);
      }
    }
  }
  boost_free(host);
}

void trainer_ckpt_settings(const train_config *cfg, ckpt_settings *set) {
  memset(set, 0, sizeof *set);
  snprintf(set->dir, sizeof set->dir, "%s", cfg->ckpt.dir);
  _Static_assert((int)RESUME_AUTO == (int)CKPT_FROM_AUTO && (int)RESUME_NONE == (int)CKPT_FROM_NONE &&
                     (int)RESUME_PATH == (int)CKPT_FROM_PATH,
                 "ckpt.resume's kinds are the package's");
  set->resume.kind = (ckpt_from_kind)cfg->ckpt.resume.kind;
  if (cfg->ckpt.resume.kind == RESUME_PATH) snprintf(set->resume.path, sizeof set->resume.path, "%s", cfg->ckpt.resume.text);
  set->every = cfg->ckpt.every;
  set->keep_last = cfg->ckpt.keep_last;
  set->keep_every = cfg->ckpt.keep_every;
  set->keep_set_aside = cfg->ckpt.keep_set_aside;
  set->level = cfg->ckpt.level;
  set->timeout = cfg->ckpt.timeout;
  set->staging_limit_bytes = cfg->ckpt.staging_limit.bytes;
  set->staging_limit_percent = cfg->ckpt.staging_limit.percent;
  set->threads = cfg->train.threads;
  set->activations = cfg->ckpt.activations != ACTS_NONE;
  set->data_seed = cfg->data.seed;
  set->abort_status = BOOST_EXIT_UNSAVED;
  set->load_abort_status = BOOST_EXIT_PREEMPTED; /* the load runs before any step: nothing trained since it */
  set->local_every = cfg->ckpt.local.every;
  set->local_auto = cfg->ckpt.local.every_auto;
  snprintf(set->local_dir, sizeof set->local_dir, "%s", cfg->ckpt.local.dir);
 
  snprintf(set->remote.url, sizeof set->remote.url, "%s", cfg->ckpt.remote.url);
  snprintf(set->remote.endpoint, sizeof set->remote.endpoint, "%s", cfg->ckpt.remote.endpoint);
  snprintf(set->remote.region, sizeof set->remote.region, "%s", cfg->ckpt.remote.region);
  set->remote.every = cfg->ckpt.remote.every;
  set->remote.keep = cfg->ckpt.remote.keep;
  set->remote.grace_s = cfg->ckpt.remote.grace;
}

void save_builder_init(save_builder *b, const train_config *cfg, const process_grid *grid, comm_ctx *comm, model *m,
                       pipeline *pipe, tp_mode mode) {
  *b = (save_builder){cfg, grid, comm, m, pipe, config_to_json(cfg), NULL, mode, "", NULL, 1};
  ckpt_layout lay = {grid->world_size, grid->dp, grid->tp, grid->pp, cfg->parallel.zero, ""};
  snprintf(lay.tp_mode, sizeof lay.tp_mode, "%s", tp_mode_names[mode]);
  b->layout = ckpt_layout_json(&lay);
  if (!b->config || !b->layout) boost_fail("out of memory for the checkpoints' config and layout records");
  if (m && cfg->ckpt.activations != ACTS_NONE) b->acts = ckpt_acts_new();
}

void save_builder_free(save_builder *b) {
  free(b->config);
  free(b->layout);
  ckpt_acts_delete(b->acts);
  b->config = b->layout = NULL;
  b->acts = NULL;
}

/* The run's root attributes for st (ckpt_meta.h, CKPT_META_RUN) into *m (ckpt_meta_free). */
static void meta_block(const save_builder *ctx, const ckpt_session *s, const train_state *st, ckpt_meta *m) {
  ckpt_meta_init(m);
  const train_config *cfg = ctx->cfg;
  CKPT_META_SET(m, run, step, st->step);
  CKPT_META_SET(m, run, lr_schedule_step, st->step);
  CKPT_META_SET(m, run, lr_next, (double)lr_at(cfg, (int)st->step));
  CKPT_META_SET(m, run, adam_t, st->step);
  CKPT_META_SET(m, run, data_cursor, st->data_cursor);
  CKPT_META_SET(m, run, global_batch, (int64_t)cfg->train.batch_size * cfg->train.grad_accum * ctx->grid->dp);
  CKPT_META_SET(m, run, tokens_seen, st->tokens_seen);
  CKPT_META_SET(m, run, train_seed, cfg->train.seed);
  CKPT_META_SET(m, run, data_seed, cfg->data.seed);
  int rc = ckpt_meta_set_str(m, CKPT_META_F_config, ctx->config);
  rc |= ckpt_meta_set_str(m, CKPT_META_F_layout, ctx->layout);
  rc |= ckpt_meta_set_str(m, CKPT_META_F_activations, acts_mode_names[cfg->ckpt.activations]);
  rc |= ckpt_meta_set_str(m, CKPT_META_F_precision, precision_names[cfg->train.precision]);
  if (ckpt_run_identity(s)) rc |= ckpt_meta_set_str(m, CKPT_META_F_run_id, ckpt_run_identity(s));
  if (ctx->tokenizer[0]) rc |= ckpt_meta_set_str(m, CKPT_META_F_tokenizer, ctx->tokenizer);
  if (rc != 0) boost_fail("out of memory for a checkpoint's metadata");
}

ckpt_fence save_request_submit(save_builder *b, ckpt_session *ck, const train_state *st, int force,
                               boost_status *note) {
  if (!ck) {
    boost_msgf(note->msg, sizeof note->msg, "-");
    return ckpt_fence_start(NULL);
  }
  const int file = ckpt_due(ck, st->step, force), local = ckpt_due_local(ck, st->step, force);
  run_watch_save_begin(file);
  ckpt_meta m;
  meta_block(b, ck, st, &m);
  /* The state datasets over st's arrays; when a save is due, the newest
   * start's row says how far this job got (a copy: st is the run's). */
  ckpt_state state = {{{st->loss_history, st->loss_count},
                       {st->val_history.v, st->val_history.rows},
                       {st->starts.v, st->starts.rows},
                       {st->grad_norms.v, st->grad_norms.rows},
                       {st->guard_events.v, st->guard_events.rows},
                       {st->skipped.v, st->skipped.rows},
                       {st->replays.v, st->replays.rows}}};
  _Static_assert(CKPT_STATE_NSETS == 7 && CKPT_STATE_loss_history == 0 && CKPT_STATE_val_loss_history == 1 &&
                     CKPT_STATE_run_starts == 2 && CKPT_STATE_grad_norm_history == 3 && CKPT_STATE_guard_events == 4 &&
                     CKPT_STATE_skipped_batches == 5 && CKPT_STATE_guard_replays == 6 && TRAIN_VAL_COLS == 2,
                 "the run hands over every state dataset of the schema, in its order");
  double *starts = NULL;
  const int64_t ns = st->starts.rows;
  if (ns > 0 && (file || local)) {
    starts = boost_calloc((size_t)(ns * CKPT_START_NCOLS), sizeof *starts);
    memcpy(starts, st->starts.v, (size_t)(ns * CKPT_START_NCOLS) * sizeof *starts);
    starts[(ns - 1) * CKPT_START_NCOLS + CKPT_START_last_step] = (double)st->step;
    starts[(ns - 1) * CKPT_START_NCOLS + CKPT_START_last_unix_s] = boost_unix_s();
    state.set[CKPT_STATE_run_starts].data = starts;
  }
  /* A file save stores the activations (every rank recomputes its stage's
   * part: collective over world), recomputed now with the weights it saves. */
  const double t0 = boost_now_s();
  if (file && b->acts) activations(b, st, b->acts);
  const ckpt_save_request req = {&m, &state, file ? b->acts : NULL, force, b->fenced, boost_now_s() - t0};
  const ckpt_fence fence = ckpt_submit(ck, &req, note);
  boost_free(starts);
  ckpt_meta_free(&m);
  run_watch_save_end(ck, st->step, file);
  return fence;
}

void trainer_ckpt_note_start(const save_builder *ctx, train_state *st) {
  const train_config *cfg = ctx->cfg;
  const process_grid *g = ctx->grid;
  double row[CKPT_START_NCOLS];
  const double now = boost_unix_s();
  row[CKPT_START_start_step] = row[CKPT_START_last_step] = (double)st->step;
  row[CKPT_START_start_unix_s] = row[CKPT_START_last_unix_s] = now;
  row[CKPT_START_tokens_at_start] = st->tokens_seen;
  row[CKPT_START_global_batch] = (double)cfg->train.batch_size * cfg->train.grad_accum * g->dp;
  row[CKPT_START_seq_len] = cfg->model.seq_len;
  row[CKPT_START_world_size] = g->world_size;
  row[CKPT_START_dp] = g->dp;
  row[CKPT_START_tp] = g->tp;
  row[CKPT_START_pp] = g->pp;
  row[CKPT_START_tp_mode] = ckpt_code_of(ckpt_tp_mode_codes, CKPT_TP_MODE_NCODES, tp_mode_names[ctx->mode]);
  row[CKPT_START_precision] =
      ckpt_code_of(ckpt_precision_codes, CKPT_PRECISION_NCODES, precision_names[cfg->train.precision]);
  train_rows_push(&st->starts, row, CKPT_START_NCOLS);
}
