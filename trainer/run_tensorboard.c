/* train.tensorboard (run_tensorboard.h). */
#include "run_tensorboard.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tb_writer.h"

struct run_tb {
  tb_writer *w;          /* NULL once a write failed */
  int64_t guard_seen;    /* rows of st->guard_events already written */
  long long ckpt_seen;   /* step of the last checkpoint outcome written (-1: none) */
  int64_t local_seen;    /* step of the last local save's stall written (-1: none) */
  int64_t flag_step;     /* the step the pending flagged batches would have been */
  int flags;             /* flagged batches pending for it (0: none) */
  unsigned flag_reasons; /* their reasons, or'ed */
};

/* restart/level's codes */
static double level_code(const char *level) {
  static const char *const names[] = {"fresh", "local", "partner", "file", "remote"};
  for (int i = 0; i < 5; i++)
    if (strcmp(level, names[i]) == 0) return i;
  return -1;
}

/* A failed write: one line, no more events; the training goes on. */
static void stop_events(trainer *t, const boost_status *err) {
  char line[sizeof err->msg + 128];
  snprintf(line, sizeof line, "train.tensorboard: %s; no more TensorBoard events from this run (training goes on)",
           err->msg);
  fail_all(&t->grid, line); /* rank 0 says it; the status is not the run's */
  tb_writer_close(t->out.tb->w);
  t->out.tb->w = NULL;
}

static void rewrite_flags(trainer *t, int64_t upto);

static void scalar(trainer *t, int64_t step, const char *tag, double value) {
  boost_status err = {0};
  if (t->out.tb->w && tb_writer_scalar(t->out.tb->w, step, tag, value, &err) != 0) stop_events(t, &err);
}

static void flush(trainer *t) {
  boost_status err = {0};
  if (t->out.tb->w && tb_writer_flush(t->out.tb->w, &err) != 0) stop_events(t, &err);
}

int run_tb_open(trainer *t, boost_status *err) {
  if (t->grid.rank != 0 || !t->cfg->train.report.tensorboard[0]) return 0;
  const train_state *st = &t->st;
  tb_writer *w;
  if (tb_writer_open(t->cfg->train.report.tensorboard, st->step + 1, &w, err) != 0) return -1;
  t->out.tb = boost_calloc(1, sizeof *t->out.tb);
  t->out.tb->w = w;
  t->out.tb->guard_seen = st->guard_events.rows; /* the resumed ledger's: an earlier file holds them */
  ckpt_stats cs;
  t->out.tb->ckpt_seen = ckpt_last_stats(t->ck, &cs) == 0 ? cs.step : -1;
  double stall;
  t->out.tb->local_seen = t->ck ? ckpt_local_cost(t->ck, &stall) : -1;
  /* At the first step this start trains: a second start from the same
   * checkpoint replaces it (the file's START purges from that step). */
  scalar(t, st->step + 1, "restart/level", level_code(ckpt_start_level(t->ck)));
  scalar(t, st->step + 1, "restart/from_step", (double)st->step);
  /* a resumed ledger may hold flagged steps past the checkpoint (a
   * rollback's abandoned branch): the file's START drops them elsewhere */
  rewrite_flags(t, st->guard_events.rows - 1);
  flush(t);
  return 0;
}

/* The flagged batches pending for one step, written once per step: the
 * batches a step drops before it is accepted share its number. rollback_to:
 * the step one of them rolled back to (-1: none). */
static void emit_flags(trainer *t, int64_t rollback_to) {
  struct run_tb *tb = t->out.tb;
  if (!tb->flags) return;
  scalar(t, tb->flag_step, "guard/flagged", tb->flags);
  scalar(t, tb->flag_step, "guard/flag_reasons", tb->flag_reasons); /* the reasons' bits (trainer/guard.h) */
  if (rollback_to >= 0) scalar(t, tb->flag_step, "guard/rollback_to", (double)rollback_to);
  tb->flags = tb->flag_reasons = 0;
}

/* The step rollback event `row` of the ledger rolled back to: the k-th
 * rollback's window of skipped batches notes it (-1: not found). */
static int64_t rollback_target(const train_state *st, int64_t row) {
  int64_t k = 0;
  for (int64_t i = 0; i < row; i++) k += (int)st->guard_events.v[i * GUARD_EVENT_COLS + 5] == GUARD_ACT_ROLLBACK;
  for (int64_t i = 0; i < st->skipped.rows; i++) {
    const double *r = st->skipped.v + i * GUARD_SKIP_COLS;
    if ((int)r[2] == GUARD_SKIP_ROLLBACK && k-- == 0) return (int64_t)r[3];
  }
  return -1;
}

/* Into a new file (after a rollback or a resume): every flagged step after
 * st->step, the step it trains from (ledger rows [0, upto]), in step order,
 * each once, with the rollbacks among them -- the file's START drops them
 * from the older files with the rest of the steps trained again. */
static void rewrite_flags(trainer *t, int64_t upto) {
  struct run_tb *tb = t->out.tb;
  const train_rows *ev = &t->st.guard_events;
  for (int64_t prev = t->st.step;;) {
    int64_t step = INT64_MAX, rollback_to = -1;
    for (int64_t i = 0; i <= upto; i++) {
      const int64_t s = (int64_t)ev->v[i * GUARD_EVENT_COLS] + 1;
      if (s > prev && s < step) step = s;
    }
    if (step == INT64_MAX) return;
    tb->flag_step = step;
    tb->flags = 0;
    tb->flag_reasons = 0;
    for (int64_t i = 0; i <= upto; i++) {
      const double *row = ev->v + i * GUARD_EVENT_COLS;
      if ((int64_t)row[0] + 1 != step) continue;
      tb->flags++;
      tb->flag_reasons |= (unsigned)row[2];
      if ((int)row[5] == GUARD_ACT_ROLLBACK) rollback_to = rollback_target(&t->st, i);
    }
    emit_flags(t, rollback_to);
    prev = step;
  }
}

void run_tb_poll(trainer *t) {
  if (!t->out.tb || !t->out.tb->w) return;
  struct run_tb *tb = t->out.tb;
  const train_rows *ev = &t->st.guard_events;
  for (; tb->guard_seen < ev->rows; tb->guard_seen++) {
    const double *row = ev->v + tb->guard_seen * GUARD_EVENT_COLS;
    const int64_t step = (int64_t)row[0] + 1; /* the step it would have been */
    if (tb->flags && step != tb->flag_step) emit_flags(t, -1);
    tb->flag_step = step;
    tb->flags++;
    tb->flag_reasons |= (unsigned)row[2];
    if ((int)row[5] != GUARD_ACT_ROLLBACK) continue;
    /* the steps after st->step are trained again: a new file */
    tb_writer_close(tb->w);
    tb->w = NULL;
    boost_status err = {0};
    if (tb_writer_open(t->cfg->train.report.tensorboard, t->st.step + 1, &tb->w, &err) != 0) {
      stop_events(t, &err);
      return;
    }
    rewrite_flags(t, tb->guard_seen);
  }
  flush(t);
}

void run_tb_ckpt(trainer *t, ckpt_session *ck) {
  if (!t->out.tb || !t->out.tb->w || !ck) return;
  ckpt_stats cs;
  if (ckpt_last_stats(ck, &cs) == 0 && cs.step != t->out.tb->ckpt_seen) {
    t->out.tb->ckpt_seen = cs.step;
    scalar(t, cs.step, "ckpt/committed", cs.committed);
    scalar(t, cs.step, "ckpt/stall_s", cs.stall_s);
    scalar(t, cs.step, "ckpt/wait_prev_s", cs.wait_prev_s);
    scalar(t, cs.step, "ckpt/write_s", cs.write_s);
  }
  double stall = 0.0;
  const int64_t local = ckpt_local_cost(ck, &stall);
  if (local >= 0 && local != t->out.tb->local_seen) {
    t->out.tb->local_seen = local;
    scalar(t, local, "ckpt/local_stall_s", stall);
  }
}

void run_tb_step(trainer *t, float loss, float val_loss, float lr, double gnorm, double tok_s, double gflops, double dt) {
  if (!t->out.tb || !t->out.tb->w) return;
  const int64_t step = t->st.step;
  if (t->out.tb->flags && t->out.tb->flag_step <= step) emit_flags(t, -1);
  scalar(t, step, "train/loss", loss);
  if (!isnan(val_loss)) scalar(t, step, "val/loss", val_loss);
  scalar(t, step, "train/lr", lr);
  scalar(t, step, "train/grad_norm", gnorm);
  scalar(t, step, "perf/tokens_per_s", tok_s);
  scalar(t, step, "perf/tflops", gflops / 1e3);
  const double mfu = run_mfu(t, gflops);
  if (!isnan(mfu)) scalar(t, step, "perf/mfu", mfu);
  scalar(t, step, "perf/step_ms", dt * 1e3);
  scalar(t, step, "mem/peak_rss_mib", peak_rss_mib());
  run_tb_ckpt(t, t->ck);
  flush(t);
}

void run_tb_close(trainer *t) {
  if (!t->out.tb) return;
  run_tb_poll(t);
  if (t->out.tb->w) emit_flags(t, -1);
  if (t->out.tb->w) flush(t);
  tb_writer_close(t->out.tb->w);
  boost_free(t->out.tb);
  t->out.tb = NULL;
}
