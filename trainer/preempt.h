/* Preemption: SIGTERM or SIGUSR1 (what SLURM and mpirun deliver) asks the
 * job to stop; all ranks agree at a step boundary, save, and exit with
 * BOOST_EXIT_PREEMPTED so a requeue script can tell "preempted, resumable"
 * from success (0) and failure (1). */
#ifndef BOOST_PREEMPT_H
#define BOOST_PREEMPT_H

#include <mpi.h>

#define BOOST_EXIT_PREEMPTED 75 /* EX_TEMPFAIL: try again later (a checkpoint of the last step committed) */
#define BOOST_EXIT_UNSAVED 74   /* EX_IOERR: the run ended (done or preempted) without its final state committed */

void preempt_install_handlers(void);
/* The signal received on this rank (0 if none). */
int preempt_signal(void);
/* Collective: the largest signal number any rank received (0 if none). */
int preempt_agreed(MPI_Comm comm);

#endif
