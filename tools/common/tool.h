/* What the boost programs share beyond kernels/util.h: the temporary
 * output that a stop signal removes (boost-data's shard, boost-reshard's
 * OUT.tmp), so an interrupted program never leaves a half-written file;
 * whether a launcher started the process. */
#ifndef BOOST_TOOL_H
#define BOOST_TOOL_H

#include <stddef.h>

#include "status.h"

/* Whether a launcher (Open MPI's mpirun, a PMI/PMIx one) started this
 * process: the tools that run serially or under mpirun start MPI only then
 * (a plain run stays a plain process, without an MPI singleton). */
int tool_under_mpirun(void);
/* MPI_Init when a launcher started the process (tool_under_mpirun), and
 * this process's rank and the world's size (0 and 1 otherwise). Returns
 * whether MPI was started (the caller finalizes it). */
int tool_mpi_start(int *argc, char ***argv, int *rank, int *nranks);
/* handler for SIGINT, SIGTERM and SIGHUP (what a tool's temporary output
 * needs done before the process ends). */
void tool_on_stop_signals(void (*handler)(int));
/* Under mpirun (nranks > 1): whether every rank's ok is set; when not, the
 * first failing rank's err reaches every rank's err. Collective over
 * MPI_COMM_WORLD; with one rank, ok. */
int tool_agree(int nranks, int ok, boost_status *err);
/* Threads for this rank's decoding: OpenMP's count (OMP_NUM_THREADS, else
 * every core) shared among the ranks on this node (collective over
 * MPI_COMM_WORLD when nranks > 1), at least 1. */
int tool_threads_per_rank(int nranks);

/* From now on SIGINT, SIGTERM and SIGHUP unlink `tmp` (copied) and end the
 * process with status 128 + the signal. */
void tool_tmp_arm(const char *tmp);
/* The temporary is the program's own business again (renamed into place,
 * or removed): a signal ends the process without touching it. */
void tool_tmp_disarm(void);
/* Unlinks the armed temporary, if any, and disarms (a program's error exit). */
void tool_tmp_remove(void);

/* s3:// checkpoint arguments (tools/common/tool_remote.c): each is
 * downloaded into a private temporary directory, removed at exit, and
 * replaced by the local file's path; -1 after printing one line. */
int tool_remote_args(const char *prog, int argc, char **argv);

#endif
