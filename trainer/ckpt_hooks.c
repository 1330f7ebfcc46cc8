#include "ckpt_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "optim.h"
#include "preempt.h"
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

static void activations(void *ctx, ckpt_acts_sink *sink) {
  trainer_ckpt_ctx *c = ctx;
  const train_state *st = c->st;
  const acts_mode mode = c->cfg->ckpt.activations;
  int have = mode != ACTS_NONE && st->last_tokens && st->last_B > 0 && st->last_T > 0;
  if (!comm_control_min_int(c->comm, COMM_WORLD, have)) return;
  model *m = c->m;
  const model_run *run = c->pipe->run; /* the pipeline's: what pipeline_forward fills */
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
  const int keep_h = run->recompute != RECOMPUTE_FULL;
  for (int l = 0; l < m->nl; l++) {
    const int L = m->stage.first_layer + l;
    const layer_param *lp = &m->layers[l];
    const layer_acts *la = &run->cur->acts[l];
    if (all || !keep_h) { /* the layer's input (residual stream, columns of this tp shard) */
      const int sharded = m->d_res < d;
      const int64_t sh[2] = {nseq * T, d}, st0[2] = {row0, sharded ? (int64_t)g->tp_rank * m->d_res : 0},
                    ct[2] = {N, m->d_res};
      snprintf(name, sizeof name, "layers.%d.input", L);
      add_from_backend(m, sink, name, 2, sh, st0, ct, replica_writes && (sharded || g->tp_rank == 0), run->cur->resid[l],
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

ckpt_hooks trainer_ckpt_hooks(trainer_ckpt_ctx *ctx) { return (ckpt_hooks){ctx, ctx->m ? activations : NULL}; }

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
  set->local_every = cfg->ckpt.local_every;
  set->local_auto = cfg->ckpt.local_every_auto;
  snprintf(set->local_dir, sizeof set->local_dir, "%s", cfg->ckpt.local_dir);
  /* remote level (issue 42) */
  snprintf(set->remote.url, sizeof set->remote.url, "%s", cfg->ckpt.remote.url);
  snprintf(set->remote.endpoint, sizeof set->remote.endpoint, "%s", cfg->ckpt.remote.endpoint);
  snprintf(set->remote.region, sizeof set->remote.region, "%s", cfg->ckpt.remote.region);
  set->remote.every = cfg->ckpt.remote.every;
  set->remote.keep = cfg->ckpt.remote.keep;
  set->remote.grace_s = cfg->ckpt.remote.grace;
}

void trainer_ckpt_ctx_init(trainer_ckpt_ctx *ctx, const train_config *cfg, const process_grid *grid, comm_ctx *comm,
                           model *m, pipeline *pipe, const train_state *st, tp_mode mode) {
  *ctx = (trainer_ckpt_ctx){cfg, grid, comm, m, pipe, st, config_to_json(cfg), NULL, mode, ""};
  ckpt_layout lay = {grid->world_size, grid->dp, grid->tp, grid->pp, cfg->parallel.zero, ""};
  snprintf(lay.tp_mode, sizeof lay.tp_mode, "%s", tp_mode_names[mode]);
  ctx->layout = ckpt_layout_json(&lay);
  if (!ctx->config || !ctx->layout) boost_fail("out of memory for the checkpoints' config and layout records");
}

void trainer_ckpt_ctx_free(trainer_ckpt_ctx *ctx) {
  free(ctx->config);
  free(ctx->layout);
  ctx->config = ctx->layout = NULL;
}

void trainer_ckpt_after_step(const trainer_ckpt_ctx *ctx, ckpt_session *s, const train_state *st, int force,
                             char *status, size_t statuslen) {
  ckpt_meta m; /* the run's root attributes (ckpt_meta.h, CKPT_META_RUN) */
  ckpt_meta_init(&m);
  const train_config *cfg = ctx->cfg;
  CKPT_META_SET(&m, run, step, st->step);
  CKPT_META_SET(&m, run, lr_schedule_step, st->step);
  CKPT_META_SET(&m, run, lr_next, (double)lr_at(cfg, (int)st->step));
  CKPT_META_SET(&m, run, adam_t, st->step);
  CKPT_META_SET(&m, run, data_cursor, st->data_cursor);
  CKPT_META_SET(&m, run, global_batch, (int64_t)cfg->train.batch_size * cfg->train.grad_accum * ctx->grid->dp);
  CKPT_META_SET(&m, run, tokens_seen, st->tokens_seen);
  CKPT_META_SET(&m, run, train_seed, cfg->train.seed);
  CKPT_META_SET(&m, run, data_seed, cfg->data.seed);
  int rc = ckpt_meta_set_str(&m, CKPT_META_F_config, ctx->config);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_layout, ctx->layout);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_activations, acts_mode_names[cfg->ckpt.activations]);
  rc |= ckpt_meta_set_str(&m, CKPT_META_F_precision, precision_names[cfg->train.precision]);
  if (ckpt_run_identity(s)) rc |= ckpt_meta_set_str(&m, CKPT_META_F_run_id, ckpt_run_identity(s));
  if (ctx->tokenizer[0]) rc |= ckpt_meta_set_str(&m, CKPT_META_F_tokenizer, ctx->tokenizer);
  if (rc != 0) boost_fail("out of memory for a checkpoint's metadata");
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
  if (ns > 0 && (ckpt_due(s, st->step, force) || ckpt_due_local(s, st->step, force))) {
    starts = boost_calloc((size_t)(ns * CKPT_START_NCOLS), sizeof *starts);
    memcpy(starts, st->starts.v, (size_t)(ns * CKPT_START_NCOLS) * sizeof *starts);
    starts[(ns - 1) * CKPT_START_NCOLS + CKPT_START_last_step] = (double)st->step;
    starts[(ns - 1) * CKPT_START_NCOLS + CKPT_START_last_unix_s] = boost_unix_s();
    state.set[CKPT_STATE_run_starts].data = starts;
  }
  ckpt_after_step(s, &m, &state, force, status, statuslen);
  boost_free(starts);
  ckpt_meta_free(&m);
}

void trainer_ckpt_note_start(const trainer_ckpt_ctx *ctx, train_state *st) {
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

/* Rows of a loaded table appended to r (after the rows r held: none). */
static void load_rows(train_rows *r, const ckpt_series *set, int cols) {
  r->rows = 0;
  for (int64_t i = 0; i < set->rows; i++) train_rows_push(r, (const double *)set->data + i * cols, cols);
}

/* A loaded checkpoint's step, cursor, tokens and histories into *st; its
 * starts and the guard's ledger too unless keep_ledger: a rollback keeps
 * the run's own, which hold the checkpoint's and what came after it. */
static void load_state(train_state *st, const ckpt_meta *m, const ckpt_state *state, int keep_ledger) {
  st->step = m->run.step;
  st->data_cursor = m->run.data_cursor;
  st->tokens_seen = m->run.tokens_seen;
  st->loss_count = 0;
  const ckpt_series *loss = &state->set[CKPT_STATE_loss_history];
  for (int64_t i = 0; i < loss->rows; i++) train_state_push_loss(st, ((const float *)loss->data)[i]);
  load_rows(&st->val_history, &state->set[CKPT_STATE_val_loss_history], TRAIN_VAL_COLS);
  load_rows(&st->grad_norms, &state->set[CKPT_STATE_grad_norm_history], 1);
  if (keep_ledger) return;
  _Static_assert(GUARD_EVENT_COLS == 6 && GUARD_SKIP_COLS == 4 && GUARD_REPLAY_COLS == 6,
                 "the guard's tables are the schema's");
  load_rows(&st->starts, &state->set[CKPT_STATE_run_starts], CKPT_START_NCOLS);
  load_rows(&st->guard_events, &state->set[CKPT_STATE_guard_events], GUARD_EVENT_COLS);
  load_rows(&st->skipped, &state->set[CKPT_STATE_skipped_batches], GUARD_SKIP_COLS);
  load_rows(&st->replays, &state->set[CKPT_STATE_guard_replays], GUARD_REPLAY_COLS);
}

int trainer_ckpt_resume(ckpt_session *s, train_state *st, const char *tokenizer, char *msg, size_t msglen) {
  ckpt_meta m;
  ckpt_state state;
  int rc = ckpt_resume(s, &m, &state, msg, msglen);
  /* Token ids of another tokenizer mean other text: the weights would
   * train on garbage. Checkpoints and shards that record none pass. */
  const char *saved = rc == 1 && ckpt_meta_has(&m, CKPT_META_F_tokenizer) ? m.run.tokenizer : "";
  if (saved[0] && tokenizer[0] && strcmp(saved, tokenizer)) {
    boost_msgf(msg, msglen,
               "the checkpoint at step %lld was trained on tokenizer %s, data.train's shards are %s: tokenize the "
               "text again with the checkpoint's tokenizer (or ckpt.resume=none starts a new run)",
               (long long)m.run.step, saved, tokenizer);
    rc = -1;
  }
  if (rc == 1) load_state(st, &m, &state, 0);
  ckpt_state_free(&state);
  ckpt_meta_free(&m);
  return rc;
}

int trainer_ckpt_rollback(ckpt_session *s, int64_t max_step, train_state *st, char *msg, size_t msglen) {
  ckpt_meta m;
  ckpt_state state;
  const int rc = ckpt_rollback(s, max_step, &m, &state, msg, msglen);
  if (rc == 1) load_state(st, &m, &state, 1);
  ckpt_state_free(&state);
  ckpt_meta_free(&m);
  return rc;
}
