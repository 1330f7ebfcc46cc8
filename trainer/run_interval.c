/* The wall-clock checkpoint intervals in the training loop (run_interval.h). */
#include "run_interval.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

static void say(const char *line) { boost_log_info("%s", line); }

void run_interval_start(run_interval *ri, const train_config *cfg, int rank, const train_state *st,
                        const ckpt_session *ck) {
  memset(ri, 0, sizeof *ri);
  ri->rank = rank;
  ri->file.measured_step = ri->local.measured_step = -1;
  ri->active = ckpt_writes(ck) && (cfg->ckpt.every_auto || cfg->ckpt.every_seconds > 0 || cfg->ckpt.local.every_auto);
  if (!ri->active) return;
  /* M from the run's starts in its checkpoints (/state/run_starts: this
   * start is the last row); the same M for both levels */
  const int starts = (int)st->starts.rows;
  const double first = starts > 0 ? st->starts.v[CKPT_START_start_unix_s] : 0.0, now = boost_unix_s();
  char source[96];
  snprintf(source, sizeof source, "%d starts in %.1f h (/state/run_starts)", starts, (now - first) / 3600);
  const double history = ckpt_interval_mtbf_estimate(first, now, starts);
  ckpt_interval_init(&ri->file.iv, cfg, history, source, boost_now_s());
  ckpt_interval_init_local(&ri->local.iv, cfg, history, source, boost_now_s());
  if (rank == 0 && ri->file.iv.mode == INTERVAL_SECONDS) {
    char line[160];
    snprintf(line, sizeof line, "checkpoint interval: every %.1f s of wall time (ckpt.every_seconds)%s",
             ri->file.iv.tau_s, cfg->ckpt.every > 0 ? ", and by ckpt.every" : "");
    say(line);
  }
}

/* Rank 0: whether this level's clock says a save is due (its first
 * estimate printed when made). */
static int level_due(run_interval_level *lv, double dt) {
  char line[512];
  if (ckpt_interval_first_estimate(&lv->iv, dt, line, sizeof line)) say(line);
  return ckpt_interval_due(&lv->iv, boost_now_s());
}

int run_interval_due(run_interval *ri, comm_ctx *comm, double dt) {
  if (!ri->active) return 0;
  int due = 0;
  if (ri->rank == 0)
    due = (level_due(&ri->file, dt) ? CKPT_DUE_FILE : 0) | (level_due(&ri->local, dt) ? CKPT_DUE_LOCAL : 0);
  /* the other ranks give 0: the maximum is rank 0's verdict, both levels in one agreement */
  return comm_control_max_int(comm, COMM_WORLD, due);
}

/* The weight of a new local save's cost in the average the local clock is
 * fed: local saves are frequent and cost a millisecond or less, so one
 * measurement is mostly scheduling noise, and tau (which goes with its
 * square root) would jump at every save. */
#define LOCAL_COST_WEIGHT 0.2

/* Rank 0: a save of this level taken now, and the cost of the newest one
 * measured (step -1: none yet) fed to its clock, as measured or (smooth)
 * averaged with the earlier ones. */
static void level_after(run_interval_level *lv, int taken, long long step, double cost_s, int smooth) {
  if (taken) ckpt_interval_taken(&lv->iv, boost_now_s());
  if (step < 0 || step == lv->measured_step) return;
  if (smooth)
    cost_s = lv->measured_step < 0 ? cost_s : (1 - LOCAL_COST_WEIGHT) * lv->cost_avg_s + LOCAL_COST_WEIGHT * cost_s;
  lv->cost_avg_s = cost_s;
  lv->measured_step = step;
  char line[512];
  if (ckpt_interval_measured(&lv->iv, cost_s, line, sizeof line)) say(line);
}

void run_interval_after(run_interval *ri, const ckpt_session *ck, int taken) {
  if (!ri->active || ri->rank != 0) return;
  ckpt_stats s;
  const int have = ckpt_last_stats(ck, &s) == 0;
  level_after(&ri->file, taken & CKPT_DUE_FILE, have ? s.step : -1, have ? s.stall_s + s.wait_prev_s : 0, 0);
  double local_s = 0;
  const long long local_step = (long long)ckpt_local_cost(ck, &local_s);
  level_after(&ri->local, taken & CKPT_DUE_LOCAL, local_step, local_s, 1);
}
