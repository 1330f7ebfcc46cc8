/* What the training loop asks of the wall-clock checkpoint interval
 * (ckpt.every_seconds, ckpt.every = auto; ckpt_interval.h): M estimated
 * from the run's history of starts, whether a checkpoint is due (agreed by
 * every rank), and each finished checkpoint's cost fed back. Rank 0 keeps
 * the clock and prints the interval when it is set or changes; the other
 * ranks follow its verdict. Inactive (no collective, nothing printed) when
 * checkpoints are counted in steps only. */
#ifndef BOOST_RUN_INTERVAL_H
#define BOOST_RUN_INTERVAL_H

#include <stdint.h>

#include "ckpt.h"
#include "ckpt_interval.h"
#include "comm.h"
#include "config.h"
#include "train_state.h"

typedef struct {
  ckpt_interval iv;
  int active, rank;
  long long measured_step; /* the last checkpoint whose cost was fed back */
} run_interval;

/* At the start of training, after the resume and this start's row in
 * st->starts (the run's history of starts, kept in its checkpoints);
 * collective-free. */
void run_interval_start(run_interval *ri, const train_config *cfg, int rank, const train_state *st,
                        const ckpt_session *ck);
/* After a step of dt seconds: 1 when a checkpoint is due by the clock on
 * every rank (a control-plane agreement when active), else 0. */
int run_interval_due(run_interval *ri, comm_ctx *comm, double dt);
/* After the checkpoint step: taken = a checkpoint was staged this step. */
void run_interval_after(run_interval *ri, const ckpt_session *ck, int taken);

#endif
