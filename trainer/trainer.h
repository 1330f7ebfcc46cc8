/* The training run: layout, data, model, optimizer steps, validation, logs,
 * metrics, checkpoints and preemption. boost-train is a thin main over it. */
#ifndef BOOST_TRAINER_H
#define BOOST_TRAINER_H

#include <mpi.h>

#include "config.h"

/* Collective over world. Returns the process exit status: 0 when all steps
 * ran, BOOST_EXIT_PREEMPTED after a preemption checkpoint, 1 on error (the
 * error was printed as one line). */
int trainer_run(const train_config *cfg, MPI_Comm world);

#endif
