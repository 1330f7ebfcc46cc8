/* A loaded checkpoint into the run's train_state (resume_state.h). */
#include "resume_state.h"

#include <string.h>

#include "util.h"

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

int trainer_ckpt_resume(ckpt_session *s, train_state *st, const char *tokenizer, boost_status *note) {
  ckpt_meta m;
  ckpt_state state;
  int rc = ckpt_resume(s, &m, &state, note);
  /* Token ids of another tokenizer mean other text: the weights would
   * train on garbage. Checkpoints and shards that record none pass. */
  const char *saved = rc == 1 && ckpt_meta_has(&m, CKPT_META_F_tokenizer) ? m.run.tokenizer : "";
  if (saved[0] && tokenizer[0] && strcmp(saved, tokenizer)) {
    rc = boost_err(note,
                   "the checkpoint at step %lld was trained on tokenizer %s, data.train's shards are %s: tokenize "
                   "the text again with the checkpoint's tokenizer (or ckpt.resume=none starts a new run)",
                   (long long)m.run.step, saved, tokenizer);
  }
  if (rc == 1) load_state(st, &m, &state, 0);
  ckpt_state_free(&state);
  ckpt_meta_free(&m);
  return rc;
}

int trainer_ckpt_rollback(ckpt_session *s, int64_t max_step, train_state *st, boost_status *note) {
  ckpt_meta m;
  ckpt_state state;
  const int rc = ckpt_rollback(s, max_step, &m, &state, note);
  if (rc == 1) load_state(st, &m, &state, 1);
  ckpt_state_free(&state);
  ckpt_meta_free(&m);
  return rc;
}
