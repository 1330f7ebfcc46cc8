/* What the training loop asks of the wall-clock checkpoint intervals
 * (ckpt.every_seconds, ckpt.every = auto, ckpt.local_every = auto;
 * ckpt_interval.h): M estimated from the run's history of starts, whether a
 * checkpoint file or a local checkpoint is due (one verdict agreed by every
 * rank), and each finished checkpoint's cost fed back to its level's clock.
 * Rank 0 keeps the clocks and prints an interval when it is set or
 * changes; the other ranks follow its verdict. Inactive (no collective,
 * nothing printed) when both levels count in steps only. */
#ifndef BOOST_RUN_INTERVAL_H
#define BOOST_RUN_INTERVAL_H

#include <stdint.h>

#include "ckpt.h"
#include "ckpt_interval.h"
#include "comm.h"
#include "config.h"
#include "train_state.h"

/* One level's clock, the last of its checkpoints whose cost it was fed,
 * and (the local level) the running average of those costs. */
typedef struct {
  ckpt_interval iv;
  long long measured_step;
  double cost_avg_s;
} run_interval_level;

typedef struct {
  run_interval_level file, local;
  int active, rank;
} run_interval;

/* At the start of training, after the resume and this start's row in
 * st->starts (the run's history of starts, kept in its checkpoints);
 * collective-free. */
void run_interval_start(run_interval *ri, const train_config *cfg, int rank, const train_state *st,
                        const ckpt_session *ck);
/* After a step of dt seconds: what is due by the clocks on every rank (a
 * control-plane agreement when active): CKPT_DUE_FILE and/or
 * CKPT_DUE_LOCAL (ckpt.h), else 0. */
int run_interval_due(run_interval *ri, comm_ctx *comm, double dt);
/* After the checkpoint step: taken = what was saved this step
 * (CKPT_DUE_FILE: a checkpoint staged, CKPT_DUE_LOCAL: a local one). */
void run_interval_after(run_interval *ri, const ckpt_session *ck, int taken);

#endif
