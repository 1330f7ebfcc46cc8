/* train.tensorboard: the run's scalars as TensorBoard event files, written
 * by rank 0 (tb_writer.h; the tags and their steps: docs/TENSORBOARD.md).
 *
 * A file per start and per guard rollback, each opening with a SessionLog
 * START at the first step it trains: TensorBoard's reader then shows, for
 * a step trained more than once (a restart from an older checkpoint, a
 * rollback), the values of the last training of it, once. A write that
 * fails during the run (a full disk) is said in one line and ends the
 * events, not the training. */
#ifndef BOOST_RUN_TENSORBOARD_H
#define BOOST_RUN_TENSORBOARD_H

#include "trainer_internal.h"

/* At start, after the resume (rank 0 with train.tensorboard set; else
 * nothing): the folder and a new file, the start's restart scalars.
 * 0, or -1 with one line (the run refuses to start). */
int run_tb_open(trainer *t, boost_status *err);
/* At the top of each pass of the training loop: the guard's new flagged
 * steps (a rollback first moves on to a new file). */
void run_tb_poll(trainer *t);
/* After an accepted step (its checkpoint step done): the step's scalars,
 * a checkpoint whose outcome became known, then a flush. */
void run_tb_step(trainer *t, float loss, float val_loss, float lr, double gnorm, double tok_s, double gflops, double dt);
/* After the final checkpoint's wait (ck still open): its outcome. */
void run_tb_ckpt(trainer *t, ckpt_session *ck);
/* The guard's last events, then the file closed. */
void run_tb_close(trainer *t);

#endif
