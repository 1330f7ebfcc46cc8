/* The wall-clock checkpoint interval in the training loop (run_interval.h). */
#include "run_interval.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

static void say(const char *line) {
  printf("%s\n", line);
  fflush(stdout);
}

void run_interval_start(run_interval *ri, const train_config *cfg, int rank, const train_state *st,
                        const ckpt_session *ck) {
  memset(ri, 0, sizeof *ri);
  ri->rank = rank;
  ri->measured_step = -1;
  ri->active = ckpt_writes(ck) && (cfg->ckpt.every_auto || cfg->ckpt.every_seconds > 0);
  if (!ri->active) return;
  /* M from the run's starts in its checkpoints (/state/run_starts: this
   * start is the last row) */
  const int starts = (int)st->starts.rows;
  const double first = starts > 0 ? st->starts.v[CKPT_START_start_unix_s] : 0.0, now = boost_unix_s();
  char source[96];
  snprintf(source, sizeof source, "%d starts in %.1f h (/state/run_starts)", starts, (now - first) / 3600);
  ckpt_interval_init(&ri->iv, cfg, ckpt_interval_mtbf_estimate(first, now, starts), source, boost_now_s());
  if (rank == 0 && ri->iv.mode == INTERVAL_SECONDS) {
    char line[160];
    snprintf(line, sizeof line, "checkpoint interval: every %.1f s of wall time (ckpt.every_seconds)%s", ri->iv.tau_s,
             cfg->ckpt.every > 0 ? ", and by ckpt.every" : "");
    say(line);
  }
}

int run_interval_due(run_interval *ri, comm_ctx *comm, double dt) {
  if (!ri->active) return 0;
  int due = 0;
  if (ri->rank == 0) {
    char line[512];
    if (ckpt_interval_first_estimate(&ri->iv, dt, line, sizeof line)) say(line);
    due = ckpt_interval_due(&ri->iv, boost_now_s());
  }
  return comm_control_max_int(comm, COMM_WORLD, due);
}

void run_interval_after(run_interval *ri, const ckpt_session *ck, int taken) {
  if (!ri->active || ri->rank != 0) return;
  if (taken) ckpt_interval_taken(&ri->iv, boost_now_s());
  ckpt_stats s;
  if (ckpt_last_stats(ck, &s) != 0 || s.step == ri->measured_step) return;
  ri->measured_step = s.step;
  char line[512];
  if (ckpt_interval_measured(&ri->iv, s.stall_s + s.wait_prev_s, line, sizeof line)) say(line);
}
