/* train.tensorboard (run_tensorboard.h). */
#include "run_tensorboard.h"

#include <math.h>
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
  int64_t rollback_to;   /* the step the last of them rolled back to (-1: none) */
  int64_t branch_first;  /* the ledger's first row since the file opened */
};

/* restart/level's codes */
static double level_code(const char *level) {
  static const char *const names[] = {"fresh", "local", "partner", "file"};
  for (int i = 0; i < 4; i++)
    if (strcmp(level, names[i]) == 0) return i;
  return -1;
}

/* A failed write: one line, no more events; the training goes on. */
static void stop_events(run *t, const boost_status *err) {
  char line[sizeof err->msg + 128];
  snprintf(line, sizeof line, "train.tensorboard: %s; no more TensorBoard events from this run (training goes on)",
           err->msg);
  fail_all(&t->grid, line); /* rank 0 says it; the status is not the run's */
  tb_writer_close(t->tb->w);
  t->tb->w = NULL;
}

static void scalar(run *t, int64_t step, const char *tag, double value) {
  boost_status err = {0};
  if (t->tb->w && tb_writer_scalar(t->tb->w, step, tag, value, &err) != 0) stop_events(t, &err);
}

static void flush(run *t) {
  boost_status err = {0};
  if (t->tb->w && tb_writer_flush(t->tb->w, &err) != 0) stop_events(t, &err);
}

int run_tb_open(run *t, boost_status *err) {
  if (t->grid.rank != 0 || !t->cfg->train.tensorboard[0]) return 0;
  const train_state *st = &t->st;
  tb_writer *w;
  if (tb_writer_open(t->cfg->train.tensorboard, st->step + 1, &w, err) != 0) return -1;
  t->tb = boost_calloc(1, sizeof *t->tb);
  t->tb->w = w;
  t->tb->guard_seen = st->guard_events.rows; /* the resumed ledger's: an earlier file holds them */
  t->tb->rollback_to = -1;
  t->tb->branch_first = st->guard_events.rows;
  ckpt_stats cs;
  t->tb->ckpt_seen = ckpt_last_stats(t->ck, &cs) == 0 ? cs.step : -1;
  double stall;
  t->tb->local_seen = t->ck ? ckpt_local_cost(t->ck, &stall) : -1;
  /* At the first step this start trains: a second start from the same
   * checkpoint replaces it (the file's START purges from that step). */
  scalar(t, st->step + 1, "restart/level", level_code(ckpt_start_level(t->ck)));
  scalar(t, st->step + 1, "restart/from_step", (double)st->step);
  flush(t);
  return 0;
}

/* The flagged batches pending for one step, written once per step: the
 * batches a step drops before it is accepted share its number. */
static void emit_flags(run *t) {
  struct run_tb *tb = t->tb;
  if (!tb->flags) return;
  scalar(t, tb->flag_step, "guard/flagged", tb->flags);
  scalar(t, tb->flag_step, "guard/flag_reasons", tb->flag_reasons); /* the reasons' bits (trainer/guard.h) */
  if (tb->rollback_to >= 0) scalar(t, tb->flag_step, "guard/rollback_to", (double)tb->rollback_to);
  tb->flags = tb->flag_reasons = 0;
  tb->rollback_to = -1;
}

/* A flagged batch of the ledger (its row): joins the pending step's, or
 * writes that one first. */
static void add_flag(run *t, const double *row) {
  struct run_tb *tb = t->tb;
  const int64_t step = (int64_t)row[0] + 1; /* the step it would have been */
  if (tb->flags && step != tb->flag_step) emit_flags(t);
  tb->flag_step = step;
  tb->flags++;
  tb->flag_reasons |= (unsigned)row[2];
}

void run_tb_poll(run *t) {
  if (!t->tb || !t->tb->w) return;
  struct run_tb *tb = t->tb;
  const train_rows *ev = &t->st.guard_events;
  for (; tb->guard_seen < ev->rows; tb->guard_seen++) {
    add_flag(t, ev->v + tb->guard_seen * GUARD_EVENT_COLS);
    if ((int)ev->v[tb->guard_seen * GUARD_EVENT_COLS + 5] != GUARD_ACT_ROLLBACK) continue;
    /* The steps after st->step are trained again: a new file, whose START
     * drops this one's values from there, the flags of this branch's
     * abandoned steps with them: they are written again into it. */
    tb_writer_close(tb->w);
    tb->w = NULL;
    boost_status err = {0};
    if (tb_writer_open(t->cfg->train.tensorboard, t->st.step + 1, &tb->w, &err) != 0) {
      stop_events(t, &err);
      return;
    }
    tb->flags = 0;
    for (int64_t i = tb->branch_first; i <= tb->guard_seen; i++)
      if (ev->v[i * GUARD_EVENT_COLS] + 1 > (double)t->st.step) add_flag(t, ev->v + i * GUARD_EVENT_COLS);
    tb->rollback_to = t->st.step;
    emit_flags(t);
    tb->branch_first = tb->guard_seen + 1;
  }
  flush(t);
}

void run_tb_ckpt(run *t, ckpt_session *ck) {
  if (!t->tb || !t->tb->w || !ck) return;
  ckpt_stats cs;
  if (ckpt_last_stats(ck, &cs) == 0 && cs.step != t->tb->ckpt_seen) {
    t->tb->ckpt_seen = cs.step;
    scalar(t, cs.step, "ckpt/committed", cs.committed);
    scalar(t, cs.step, "ckpt/stall_s", cs.stall_s);
    scalar(t, cs.step, "ckpt/wait_prev_s", cs.wait_prev_s);
    scalar(t, cs.step, "ckpt/write_s", cs.write_s);
  }
  double stall = 0.0;
  const int64_t local = ckpt_local_cost(ck, &stall);
  if (local >= 0 && local != t->tb->local_seen) {
    t->tb->local_seen = local;
    scalar(t, local, "ckpt/local_stall_s", stall);
  }
}

void run_tb_step(run *t, float loss, float val_loss, float lr, double gnorm, double tok_s, double gflops, double dt) {
  if (!t->tb || !t->tb->w) return;
  const int64_t step = t->st.step;
  if (t->tb->flags && t->tb->flag_step <= step) emit_flags(t);
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

void run_tb_close(run *t) {
  if (!t->tb) return;
  run_tb_poll(t);
  if (t->tb->w) emit_flags(t);
  if (t->tb->w) flush(t);
  tb_writer_close(t->tb->w);
  boost_free(t->tb);
  t->tb = NULL;
}
