/* Ending a job: the one module of library code that ends the process.
 *
 * Library code reports what goes wrong by returning a status with a
 * one-line message (util.h's boost_err) and lets the program decide. What
 * cannot be returned -- a failing CUDA or cuBLAS call, a communication
 * error, a collective that never completes, a broken invariant, memory
 * that cannot be had -- ends the job here, so one rank's error ends every
 * rank at once instead of leaving the others waiting in their next
 * collective until a watchdog's timeout:
 *
 *   1. the registered hooks run (the communication layer's abandon its
 *      communicators: ncclCommAbort), so nothing waits for this rank;
 *   2. one line on stderr says which rank ended the job and why;
 *   3. between MPI_Init and MPI_Finalize, MPI_Abort on the world (mpirun
 *      ends every rank); otherwise _exit (stdio flushed first).
 *
 * Callers: boost_fail (check.h; the CUDA check macros go through it), the
 * collective watchdog (trainer/parallel/watchdog.c) and the checkpoint job's
 * deadline (ckpt/session/ckpt_session.c). Signal handlers and forked children end
 * through job_exit_now. */
#ifndef BOOST_KERNELS_JOB_ABORT_H
#define BOOST_KERNELS_JOB_ABORT_H

#include <stdarg.h>

/* fn(ctx) runs before the job ends, on whichever thread ends it (it
 * abandons ctx's communicators). fn NULL: ctx's hook is removed. Up to 16
 * at a time (a test holds several trainers); one more is not kept:
 * MPI_Abort ends the job even so, only that context's communicators are
 * not abandoned first. */
void job_abort_on(void (*fn)(void *ctx), void *ctx);

/* Ends the job with exit status `status` after the hooks, printing `line`
 * (one line, without its newline; NULL: none) to stderr. A second call
 * while the job ends -- from a hook, or another thread -- never returns and
 * ends nothing twice. */
void job_end(int status, const char *line) __attribute__((noreturn));

/* job_end with the line "<program>: <message>", or "<program>: rank R: <message>"
 * in a world of more than one rank (the program: boost_log_name()). */
void job_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void job_vfail(int status, const char *fmt, va_list ap) __attribute__((noreturn));

/* MPI_Finalize is under way (the collective watchdog says so): the job
 * ends with _exit from here on, as MPI_Abort inside a finalize may never
 * return. */
void job_abort_mpi_closing(void);

/* The process's world rank: MPI's while MPI is up, the launcher's
 * (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID) before it, -1
 * when neither says. */
int job_rank(void);

/* Ends this process at once (_exit, async-signal-safe): for signal
 * handlers and forked children, which must not run the parent's hooks or
 * touch MPI. */
void job_exit_now(int status) __attribute__((noreturn));

#endif
