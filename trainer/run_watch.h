/* The training run's side of the collective watchdog (trainer/parallel/watchdog.h):
 * the exit status it ends the job with -- 75 when nothing was trained since
 * the newest committed state (the start, a resumed checkpoint, or a
 * checkpoint this run committed), 74 otherwise -- and the checkpoint step
 * as a phase bounded by parallel.timeout + ckpt.timeout.
 *
 * The training thread publishes the steps done, committed and staged; the
 * watchdog thread reads them when it fires. An asynchronous checkpoint that
 * committed while the training thread was stuck is seen on disk: `latest`
 * names the staged step and was rewritten since it was staged. */
#ifndef BOOST_RUN_WATCH_H
#define BOOST_RUN_WATCH_H

#include <stddef.h>

#include "ckpt.h"
#include "config.h"
#include "train_state.h"

/* Training starts from st (after the resume) on world rank `rank`: the
 * watchdog's exit status comes from here until run_watch_end. ck may be
 * NULL. */
void run_watch_begin(const train_config *cfg, int rank, const train_state *st, const ckpt_session *ck);
/* A step begins (the one after st->step). Test hook (environment):
 * BOOST_TRAIN_TEST_STOP_AT=STEP[:RANK] -- at the start of step STEP every
 * rank waits for its checkpoint in flight to commit, then RANK (every rank
 * if omitted) says so on stderr and stops itself with SIGSTOP: a stuck
 * rank at a known point, for the watchdog's tests.
 * BOOST_TRAIN_TEST_STUCK_AT=STEP:RANK:WHERE -- at the start of step STEP,
 * RANK gets stuck inside a watched wait: WHERE "control", its next
 * agreement (comm_control) sleeps inside the call; "device", the guarded
 * backend's device waits never complete again (the poll loop the CUDA
 * backend uses, kernels/device_wait.h); "device-error", they fail. */
void run_watch_step(ckpt_session *ck, const train_state *st);
/* st->step steps are done (right after each optimizer step). */
void run_watch_trained(const train_state *st);
/* A save request is submitted (save_request.h): from _begin to _end the
 * watchdog sees a checkpoint phase; file_due: a checkpoint file is due, its
 * staging and the commit state published. */
void run_watch_save_begin(int file_due);
void run_watch_save_end(const ckpt_session *ck, int64_t step, int file_due);
/* The run ended with `status` (its final checkpoint waited for): the exit
 * status from here on is 75 when its state is committed, else 74. */
void run_watch_end(const train_config *cfg, int status);

#endif
