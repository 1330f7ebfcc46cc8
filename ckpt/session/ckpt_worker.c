/* The writer thread and its one-job queue (ckpt_worker.h). */
#include "ckpt_worker.h"

#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ckpt_h5.h"
#include "h5z_zstd.h"
#include "util.h"

static void *worker_main(void *arg) {
  ckpt_worker *w = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* signals go to the training thread */
  pthread_setname_np(pthread_self(), "ckpt-writer");  /* top -H, perf --comm */
  if (w->nice) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), w->nice); /* Linux: per thread */
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (w->pending == CKPT_JOB_NONE && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
    const ckpt_job_kind kind = w->pending;
    w->pending = CKPT_JOB_NONE;
    w->job_started = boost_now_s();
    w->running = kind;
    pthread_mutex_unlock(&w->mu);
    if (kind == CKPT_JOB_NONE) break; /* quit */
    ckpt_h5_quiet();
    h5z_zstd_register();
    w->do_job(w->ctx, kind);
    pthread_mutex_lock(&w->mu);
    if (kind == CKPT_JOB_SAVE) w->unreported = 1;
    w->staged = 1;
    w->busy = 0;
    w->job_started = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
  H5close();
  return NULL;
}

int ckpt_worker_start(ckpt_worker *w, ckpt_job_fn do_job, void *ctx, int nice, int sync_mode, int threads) {
  memset(w, 0, sizeof *w);
  w->do_job = do_job;
  w->ctx = ctx;
  w->nice = nice;
  w->sync_mode = sync_mode;
  w->threads = threads;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->started = pthread_create(&w->thread, NULL, worker_main, w) == 0;
  return w->started ? 0 : -1;
}

void ckpt_worker_submit(ckpt_worker *w, ckpt_job_kind kind, int64_t step, int staged) {
  pthread_mutex_lock(&w->mu);
  w->pending = kind;
  w->job_step = step;
  w->busy = 1;
  w->staged = staged;
  w->staged_items = 0;
  w->update_wait = 0.0;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

double ckpt_worker_wait_idle(ckpt_worker *w) {
  const double t0 = boost_now_s();
  pthread_mutex_lock(&w->mu);
  w->trainer_waiting++;
  while (w->busy) pthread_cond_wait(&w->cv, &w->mu);
  w->trainer_waiting--;
  pthread_mutex_unlock(&w->mu);
  return boost_now_s() - t0;
}

void ckpt_worker_wait_staged(ckpt_worker *w, int need) {
  pthread_mutex_lock(&w->mu);
#define STILL_READS (w->busy && !w->staged && w->staged_items < need)
  if (STILL_READS) {
    const double t0 = boost_now_s();
    w->trainer_waiting++; /* the job encodes on every core meanwhile */
    while (STILL_READS) pthread_cond_wait(&w->cv, &w->mu);
#undef STILL_READS
    w->trainer_waiting--;
    w->update_wait += boost_now_s() - t0;
  }
  pthread_mutex_unlock(&w->mu);
}

int ckpt_worker_busy(ckpt_worker *w) {
  pthread_mutex_lock(&w->mu);
  const int busy = w->busy;
  pthread_mutex_unlock(&w->mu);
  return busy;
}

void ckpt_worker_signal_staged(ckpt_worker *w) {
  pthread_mutex_lock(&w->mu);
  w->staged = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void ckpt_worker_staged_items(ckpt_worker *w, int n) {
  pthread_mutex_lock(&w->mu); /* the optimizer may be waiting for this band */
  w->staged_items = n;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int ckpt_worker_threads(ckpt_worker *w) {
  pthread_mutex_lock(&w->mu);
  const int waiting = w->sync_mode || w->trainer_waiting > 0;
  pthread_mutex_unlock(&w->mu);
  return waiting && w->threads > 1 ? w->threads : 1;
}

void ckpt_worker_stop(ckpt_worker *w) {
  pthread_mutex_lock(&w->mu);
  w->quit = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (w->started) pthread_join(w->thread, NULL);
  w->started = 0;
}

void ckpt_worker_free(ckpt_worker *w) {
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}
