/* Preemption: a stop signal (SIGTERM, SIGUSR1, SIGINT, SIGHUP: what SLURM,
 * mpirun, tools/mpirun/boost-mpirun, a terminal and kill deliver) asks the job to
 * stop; all ranks agree at a step boundary, save, and exit with
 * BOOST_EXIT_PREEMPTED so a requeue script can tell "preempted, resumable"
 * from success (0) and failure (1). The handlers are installed on the first
 * line of main, so a signal during start-up, data opening, model build or
 * checkpoint load is remembered until the run can act on it.
 *
 * SIGINT (a second Ctrl-C) at least PREEMPT_REPEAT_S seconds after the
 * first stop signal, or SIGUSR2 at any time, ends the process at once:
 * status 75 while the state is marked committed (preempt_set_committed), 74
 * otherwise. (The window keeps one stop delivered twice -- to the ranks and
 * through the launcher -- from counting as two. A repeated SIGTERM, SIGUSR1
 * or SIGHUP does not force: batch systems send SIGTERM again right before
 * their SIGKILL, and the seconds left may still finish the save.) */
#ifndef BOOST_PREEMPT_H
#define BOOST_PREEMPT_H

#include <mpi.h>

#define BOOST_EXIT_PREEMPTED 75 /* EX_TEMPFAIL: try again later (a checkpoint of the last step committed) */
#define BOOST_EXIT_UNSAVED 74   /* EX_IOERR: the run ended (done or preempted) without its final state committed */
#define PREEMPT_REPEAT_S 2.0    /* a second Ctrl-C sooner than this is the first stop delivered twice */

/* Installs the handlers. SIGINT and SIGHUP stay ignored when they were
 * ignored at start (nohup, a background job of a script), as shells do. */
void preempt_install_handlers(void);
/* Blocks (1) or unblocks (0) the stop signals in the calling thread: around
 * MPI_Init, so the library's helper threads inherit them blocked and the
 * signals reach the main thread. */
void preempt_block(int block);
/* Whether the newest state is committed (or nothing was trained since the
 * start): a forced exit then reports 75, otherwise 74. Starts at 1. */
void preempt_set_committed(int committed);
/* The signal received on this rank (0 if none). */
int preempt_signal(void);
/* Collective: the largest signal number any rank received (0 if none). */
int preempt_agreed(MPI_Comm comm);

/* One line about the launcher when this process runs under Open MPI's
 * mpirun without tools/mpirun/boost-mpirun (whose children see
 * BOOST_MPIRUN_WRAPPER=1): what a stop signal to mpirun does and what to use
 * instead; NULL otherwise. */
const char *preempt_launcher_note(void);

#endif
