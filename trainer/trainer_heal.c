/* The step guard's healing (docs/GUARD.md): skipped batches passed over,
 * flagged steps dropped, rollbacks, and the replay that tells silent data
 * corruption from a real spike. The verdict itself is guard.c's. */
#include "trainer_internal.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "run_watch.h"
#include "watchdog.h"

/* ---- the step guard (guard.h, docs/GUARD.md) ------------------------------ */

/* Global batch index of the next step. */
static int64_t next_batch(const trainer *t) { return t->st.data_cursor / t->data.global_batch; }

/* A batch that train.skip_batches or a rollback's window covers is passed
 * over before its step: the cursor moves past the range, nothing else
 * changes. 1 when it moved. */
int pass_skipped(trainer *t) {
  train_state *st = &t->st;
  const int64_t batch = next_batch(t);
  int64_t last;
  int reason;
  if (!guard_skip_range(t->cfg, st, batch, &last, &reason)) return 0;
  if (reason == GUARD_SKIP_CONFIG) guard_note_skip(st, batch, last, reason);
  st->data_cursor = (last + 1) * t->data.global_batch;
  if (t->grid.rank == 0)
    boost_log_info("skip: batches %lld-%lld (%s) passed over at step %lld", (long long)batch, (long long)last,
                   reason == GUARD_SKIP_CONFIG ? "train.skip_batches" : "the guard's rollback", (long long)st->step);
  return 1;
}

/* Back to the initial weights (train.seed), zero moments and step 0: the
 * rollback when no checkpoint precedes the flagged steps. */
static void start_over(trainer *t) {
  train_state *st = &t->st;
  const tensor_store *ts = &t->mt.store;
  model_init_params(&t->m, (uint64_t)t->cfg->train.seed);
  const size_t bytes = (ts->mom_end - ts->mom_begin) * sizeof(float);
  t->be->mem->zero(t->be, ts->arena[TENSOR_ADAM_M], bytes);
  t->be->mem->zero(t->be, ts->arena[TENSOR_ADAM_V], bytes);
  st->step = st->data_cursor = 0;
  st->tokens_seen = 0;
  st->loss_count = 0;
  st->val_history.rows = st->grad_norms.rows = 0;
}

/* Every rank reloads the newest committed checkpoint at or before
 * first_step (or starts over) and skips train.guard_skip_batches batches
 * from its cursor, at least through last_batch. 0, or the exit status. */
static int rollback(trainer *t, int64_t first_step, int64_t last_batch) {
  const train_config *cfg = t->cfg;
  train_state *st = &t->st;
  char msg[2048];
  watchdog_phase("the guard's rollback", WATCH_CKPT);
  boost_status note = {0};
  const int rc = trainer_ckpt_rollback(t->ck, first_step, st, &note);
  snprintf(msg, sizeof msg, "%s", note.msg);
  if (rc < 0) return fail_all(&t->grid, msg);
  if (rc == 0) {
    start_over(t);
    char aside[1024] = ""; /* what the rollback set aside is said either way */
    const char *a = strstr(msg, "; set aside ");
    if (a) snprintf(aside, sizeof aside, "%s", a);
    snprintf(msg, sizeof msg, "no checkpoint at or before step %lld: back to the initial weights%s", (long long)first_step,
             aside);
  }
  model_refresh_work(&t->m);
  run_watch_begin(cfg, t->grid.rank, st, t->ck); /* the watchdog's account restarts at the step rolled back to */
  /* A window of batches not skipped yet: a second rollback to the same
   * checkpoint skips the next train.guard_skip_batches, not the same ones. */
  int64_t from = next_batch(t), last;
  int reason;
  while (guard_skip_range(cfg, st, from, &last, &reason)) from = last + 1;
  int64_t to = from + cfg->train.guard.skip_batches - 1;
  if (to < last_batch) to = last_batch;
  guard_note_skip(st, from, to, GUARD_SKIP_ROLLBACK);
  if (t->grid.rank == 0)
    boost_log_info("guard: rollback %d of %d to step %lld: %s; batches %lld-%lld will be skipped", guard_rollbacks(st),
                   cfg->train.guard.max_rollbacks, (long long)st->step, msg, (long long)from, (long long)to);
  return 0;
}

/* ---- the replay (docs/GUARD.md, "Silent data corruption"; replay.h) ------- */

/* This execution's print: the gradient arena as the optimizer would read it. */
static step_print fingerprint(const trainer *t, float loss, double gnorm) {
  return replay_fingerprint(t->replay, t->mt.store.arena[TENSOR_GRADS], t->m.reg.numel, loss, gnorm);
}

/* The guard's replay (docs/GUARD.md, "Silent data corruption"): the step is
 * taken again from the same weights and batch (nothing was applied). The
 * same bits on every rank: the result is real (-1). Different bits on some
 * rank: a hardware fault; a third execution decides -- the second and
 * third agree: the step is theirs (*loss, *gnorm and the gradients in the
 * arena), the faulty rank is counted, 0; they differ too, or the rank
 * failed train.guard_sdc_limit replays: the job ends, the exit status
 * BOOST_EXIT_FAULTY_HOST naming the rank and its host. Every replay is a
 * row of the ledger (/state/guard_replays). Collective. */
int replay_step(trainer *t, float *loss, double *gnorm, int flagged) {
  const train_config *cfg = t->cfg;
  train_state *st = &t->st;
  const int64_t batch = next_batch(t);
  const int trigger = flagged ? GUARD_REPLAY_FLAGGED : GUARD_REPLAY_EVERY;
  const step_print first = fingerprint(t, *loss, *gnorm);
  double g2, g3;
  const float l2 = step_gradients(t, &g2);
  const step_print second = fingerprint(t, l2, g2);
  replay_blame b, b2;
  if (!replay_agree_blame(t->replay, replay_differences(&first, &second), &b)) {
    guard_note_replay(st, batch, trigger, GUARD_REPLAY_SAME, -1, GUARD_WHERE_NONE);
    return -1;
  }
  const float l3 = step_gradients(t, &g3);
  const step_print third = fingerprint(t, l3, g3);
  const int again = replay_agree_blame(t->replay, replay_differences(&second, &third), &b2);
  const replay_blame *named = again ? &b2 : &b;
  const int bad = guard_sdc_count(st, b.rank) + 1;
  const int end = again || bad >= cfg->train.guard.sdc_limit;
  guard_note_replay(st, batch, trigger, end ? GUARD_REPLAY_ENDED : GUARD_REPLAY_HEALED, named->rank, named->where);
  const long long step = (long long)st->step + 1;
  char more[96];
  replay_blame_others(named, more, sizeof more);
  if (end) {
    if (t->grid.rank == 0)
      boost_log_warn("silent data corruption: rank %d on host %s gave different results for the same step %lld "
                     "(batch %lld) %s, in %s%s; exclude the host (docs/GUARD.md); exit %d",
                     named->rank, named->host, step, (long long)batch,
                     again ? "in every replay" : "again (train.guard_sdc_limit)", guard_where_names[named->where], more,
                     BOOST_EXIT_FAULTY_HOST);
    return BOOST_EXIT_FAULTY_HOST;
  }
  if (t->grid.rank == 0)
    boost_log_info("guard: silent data corruption at step %lld (batch %lld) on rank %d, host %s: its first result "
                   "discarded, the step taken from two replays that agree (%d of train.guard_sdc_limit=%d); it differed "
                   "in %s%s",
                   step, (long long)batch, b.rank, b.host, bad, cfg->train.guard.sdc_limit, guard_where_names[b.where],
                   more);
  *loss = l3;
  *gnorm = g3;
  return 0;
}

/* Whether the replay can tell a fault from a real result here: only where
 * steps are bit-deterministic (the CPU and guarded backends; not CUDA,
 * whose kernels this build does not promise deterministic). Said once. */
int replay_allowed(trainer *t) {
  static int said;
  if (t->cfg->train.device != DEVICE_CUDA) return 1;
  if (!said++ && t->grid.rank == 0)
    boost_log_info("guard: no replay of flagged steps: train.device=cuda is not bit-deterministic here (docs/GUARD.md)");
  return 0;
}

/* The run's flagged steps and skipped batches in one line (the guard gave up). */
static void report_give_up(const trainer *t) {
  const train_state *st = &t->st;
  char flags[1024] = "", skips[1024];
  size_t used = 0;
  for (int64_t i = 0; i < st->guard_events.rows && used < sizeof flags; i++) {
    const double *row = st->guard_events.v + i * GUARD_EVENT_COLS;
    if (i == 12) {
      used += (size_t)snprintf(flags + used, sizeof flags - used, ", ... (%lld in all)", (long long)st->guard_events.rows);
      break;
    }
    used += (size_t)snprintf(flags + used, sizeof flags - used, "%sstep %lld batch %lld (loss %.4g)", i ? ", " : "",
                             (long long)row[0] + 1, (long long)row[1], row[3]);
  }
  guard_format_skips(st->skipped.v, st->skipped.rows, skips, sizeof skips);
  boost_log_warn("the guard gave up after %d rollbacks (train.guard_max_rollbacks=%d): flagged %s; batches "
                 "skipped %s; skipping data does not heal this run (a learning rate far too high?); exit %d",
                 guard_rollbacks(st), t->cfg->train.guard.max_rollbacks, flags, skips[0] ? skips : "none",
                 BOOST_EXIT_DIVERGED);
}

/* A flagged step: nothing was applied; its batch is passed over and noted.
 * rollback: a non-finite value or train.guard_cluster flagged batches
 * among the last train.guard_cluster_window roll back, at most
 * train.guard_max_rollbacks times; skip: that many flagged in a row end the
 * run. 0 to go on, else the exit status (the same on every rank). */
int on_flagged(trainer *t, float loss, double gnorm, const guard_verdict *v) {
  const train_config *cfg = t->cfg;
  train_state *st = &t->st;
  const int64_t batch = next_batch(t);
  guard_note_event(st, batch, v, loss, gnorm, GUARD_ACT_DROPPED);
  guard_note_skip(st, batch, batch, GUARD_SKIP_FLAGGED);
  int64_t first_step;
  const int window = cfg->train.guard.cluster_window;
  const int recent = guard_recent_flags(st, batch, window, &first_step);
  int back = 0, end = 0;
  if (cfg->train.guard.policy == GUARD_ROLLBACK) back = (v->reasons & GUARD_NONFINITE) || recent >= cfg->train.guard.cluster;
  else end = recent >= window;
  if (back && guard_rollbacks(st) >= cfg->train.guard.max_rollbacks) back = 0, end = 1;
  st->guard_events.v[(st->guard_events.rows - 1) * GUARD_EVENT_COLS + 5] =
      back ? GUARD_ACT_ROLLBACK : end ? GUARD_ACT_ENDED : GUARD_ACT_DROPPED;
  st->data_cursor += t->data.global_batch;
  if (t->grid.rank == 0) {
    char why[256];
    guard_describe(v, loss, gnorm, why, sizeof why);
    boost_log_info("step %5lld/%d | FLAGGED batch %lld: %s | gnorm %.4g | %s", (long long)st->step + 1,
                   cfg->train.steps, (long long)batch, why, gnorm,
                   back ? "rolling back" : end ? "giving up" : "dropped: nothing applied, the batch passed over");
  }
  if (end) {
    if (t->grid.rank == 0) report_give_up(t);
    return BOOST_EXIT_DIVERGED;
  }
  return back ? rollback(t, first_step, batch) : 0;
}
