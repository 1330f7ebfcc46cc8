/* Ending a job: hooks, one line, MPI_Abort or _exit. See job_abort.h. */
#include "job_abort.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define JOB_HOOKS 16

static struct {
  pthread_mutex_t mu; /* the hooks */
  struct {
    void (*fn)(void *);
    void *ctx;
  } hooks[JOB_HOOKS];
  _Atomic int ending;
  _Atomic int mpi_closing;
} job = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int ending_here;

void job_abort_on(void (*fn)(void *ctx), void *ctx) {
  pthread_mutex_lock(&job.mu);
  int slot = -1;
  for (int i = 0; i < JOB_HOOKS; i++)
    if (job.hooks[i].ctx == ctx || (slot < 0 && !job.hooks[i].fn && fn)) slot = i;
  if (slot >= 0) job.hooks[slot].fn = fn, job.hooks[slot].ctx = fn ? ctx : NULL;
  pthread_mutex_unlock(&job.mu);
}

void job_abort_mpi_closing(void) { atomic_store(&job.mpi_closing, 1); }

static int mpi_live(void) {
  if (atomic_load(&job.mpi_closing)) return 0;
  int init = 0, fin = 1;
  MPI_Initialized(&init);
  if (init) MPI_Finalized(&fin);
  return init && !fin;
}

int job_rank(void) {
  if (mpi_live()) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v);
  }
  return -1;
}

static int world_size(void) {
  int n = 1;
  if (mpi_live()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void job_exit_now(int status) { _exit(status); }

/* What the process printed so far reaches its reader -- unless another
 * thread holds stdout (blocked on a full pipe, say): a job must end even
 * then. */
static void flush_stdout(void) {
  if (ftrylockfile(stdout) != 0) return;
  fflush_unlocked(stdout);
  funlockfile(stdout);
}

static __attribute__((noreturn)) void end_process(int status) {
  flush_stdout();
  if (mpi_live()) MPI_Abort(MPI_COMM_WORLD, status);
  _exit(status); /* outside MPI_Init..MPI_Finalize: mpirun ends the others */
}

void job_end(int status, const char *line) {
  if (atomic_exchange(&job.ending, 1)) {
    if (ending_here) end_process(status); /* from a hook: end without running them again */
    for (;;) nanosleep(&(struct timespec){1, 0}, NULL); /* another thread ends the job */
  }
  ending_here = 1;
  pthread_mutex_lock(&job.mu);
  void (*fn[JOB_HOOKS])(void *);
  void *ctx[JOB_HOOKS];
  for (int i = 0; i < JOB_HOOKS; i++) fn[i] = job.hooks[i].fn, ctx[i] = job.hooks[i].ctx;
  pthread_mutex_unlock(&job.mu);
  /* before the line: the communicators stop waiting for anyone */
  for (int i = 0; i < JOB_HOOKS; i++)
    if (fn[i]) fn[i](ctx[i]);
  flush_stdout();
  if (line) boost_log_line_now(line);
  end_process(status);
}

void job_vfail(int status, const char *fmt, va_list ap) {
  char msg[1024], line[1100];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (world_size() > 1)
    boost_msgf(line, sizeof line, "%s: rank %d: %s", boost_log_name(), job_rank(), msg);
  else
    boost_msgf(line, sizeof line, "%s: %s", boost_log_name(), msg);
  job_end(status, line);
}

void job_fail(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  job_vfail(status, fmt, ap);
}
