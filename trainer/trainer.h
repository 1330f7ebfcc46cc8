/* The training run: layout, data, model, optimizer steps, validation, logs,
 * metrics, checkpoints and preemption. boost-train is a thin main over it. */
#ifndef BOOST_TRAINER_H
#define BOOST_TRAINER_H

#include <mpi.h>

#include "config.h"
#include "status.h"

#include "comm.h"
#include "grid.h"
#include "model_train.h"
#include "train_state.h"

/* A training run's live parts: grid, comm, data, model with optimizer state,
 * and where it stands, into *out. Collective over world; -1 with a one-line
 * message (the same on every rank) when the config, layout or data are bad. */
typedef struct trainer trainer;
int trainer_create(const train_config *cfg, MPI_Comm world, trainer **out, boost_status *err);
void trainer_destroy(trainer *t);
/* The steps from where t stands to train.steps, through the same loop as
 * trainer_run (without its checkpoint session, start lines and end): each
 * accepted step's loss and pre-clip gradient norm go into trainer_state's
 * loss_history and grad_norms. Collective; the exit status trainer_run's
 * loop came to (0: every step ran). */
int trainer_train(trainer *t);
model *trainer_model(trainer *t);
model_acts *trainer_acts(trainer *t);     /* the step's activation sets */
model_train *trainer_train_state(trainer *t); /* gradients, moments, optimizer plan */
comm_ctx *trainer_comm(trainer *t);
const comm_ctx *trainer_step_comm(const trainer *t); /* the last step's traffic, before validation's */
const process_grid *trainer_grid(const trainer *t);
train_state *trainer_state(trainer *t);

/* Collective over world. Returns the process exit status: 0 when all steps
 * ran (and the final checkpoint committed, when checkpoints are on),
 * BOOST_EXIT_PREEMPTED after a committed preemption checkpoint,
 * BOOST_EXIT_UNSAVED when the run ended without its final state committed,
 * 1 on error (the error was printed as one line; also when train.steps is
 * below the resumed checkpoint's step). A stop signal that came before
 * training (the caller installs the handlers first: preempt.h) returns
 * BOOST_EXIT_PREEMPTED once the checkpoint is loaded, with nothing trained
 * or written. train.metrics is opened (appended to) only once the start is
 * accepted. Test hook (environment): BOOST_TRAIN_TEST_STEP_DELAY_MS=N sleeps
 * N ms after each step. */
int trainer_run(const train_config *cfg, MPI_Comm world);

#endif
