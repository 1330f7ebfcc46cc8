/* The writer thread: the one thread of the process that makes HDF5 calls
 * (HDF5 is not thread-safe), fed by a queue of jobs -- saves for the
 * writer (ckpt_save.h), loads for the reader (ckpt_read.h) -- and the
 * hand-over between it and the training thread. The queue holds one job:
 * a save waits for the one before it (the session's wait_prev), so a
 * longer queue would only hold more staging memory.
 *
 * They meet under mu: `busy` from hand-over until the job's outcome is
 * posted, `staged` once the job no longer reads the live arenas,
 * `staged_items` the bands of a bounded ring staged so far (file order). */
#ifndef BOOST_CKPT_WORKER_H
#define BOOST_CKPT_WORKER_H

#include <pthread.h>
#include <stdint.h>

typedef enum { CKPT_JOB_NONE = 0, CKPT_JOB_SAVE, CKPT_JOB_LOAD } ckpt_job_kind;
/* Runs one job on the writer thread. */
typedef void (*ckpt_job_fn)(void *ctx, ckpt_job_kind kind);

typedef struct {
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ckpt_job_fn do_job; /* does one job on the thread (the session's: a save or a load) */
  void *ctx;
  ckpt_job_kind pending; /* the queue: taken by the thread */
  ckpt_job_kind running; /* of the job in flight (the watchdog's exit status) */
  int64_t job_step;
  double job_started; /* boost_now_s() when the thread took the job in flight, 0 when idle */
  int busy, staged, quit;
  int staged_items;
  int trainer_waiting; /* the training thread waits for the job in flight */
  int unreported;      /* a save's result the session has not taken yet */
  double update_wait;  /* the fence waits (ckpt_fence_wait) for the job in flight */
  int sync_mode;       /* training always waits (BOOST_CKPT_SYNC) */
  int threads;         /* the rank's cores */
  int nice;
} ckpt_worker;

/* Starts the thread (nice: its nice value, 0 none). -1 when it cannot. */
int ckpt_worker_start(ckpt_worker *w, ckpt_job_fn do_job, void *ctx, int nice, int sync_mode, int threads);
/* Hands a job over (staged: it does not read the arenas). */
void ckpt_worker_submit(ckpt_worker *w, ckpt_job_kind kind, int64_t step, int staged);
/* Blocks until the job in flight is done; returns the seconds waited. */
double ckpt_worker_wait_idle(ckpt_worker *w);
/* Until the job in flight no longer reads the first `need` bands of the
 * ring (INT_MAX: any of the arenas); the wait counts as update_wait. */
void ckpt_worker_wait_staged(ckpt_worker *w, int need);
int ckpt_worker_busy(ckpt_worker *w);
/* The job no longer reads the arenas / has staged n bands of the ring. */
void ckpt_worker_signal_staged(ckpt_worker *w);
void ckpt_worker_staged_items(ckpt_worker *w, int n);
/* Threads the job may use now: all of the rank's while training waits for
 * it, one beside training otherwise. */
int ckpt_worker_threads(ckpt_worker *w);
/* Stops and joins the thread (the mutex stays for ckpt_worker_free). */
void ckpt_worker_stop(ckpt_worker *w);
void ckpt_worker_free(ckpt_worker *w);

#endif
