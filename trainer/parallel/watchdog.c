/* The collective watchdog: a thread per rank that times the training
 * thread's waits and phases, answers the other ranks' questions on a side
 * communicator (watchdog_side.c), and ends the job with one line. See
 * watchdog.h. */
#include "watchdog.h"
#include "watchdog_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "job_abort.h"
#include "log.h"

watch_wait watch_now;
_Thread_local int watch_mine;

wd_state wdog = {.mu = PTHREAD_MUTEX_INITIALIZER, .rank = -1};

/* ---- the watched thread's state ------------------------------------------ */

int wd_snapshot(wd_snap *s) {
  for (int tries = 0; tries < 1000; tries++) {
    const uint64_t a = atomic_load_explicit(&watch_now.seq, memory_order_acquire);
    if (a & 1) continue; /* the writer is between two stores */
    s->active = atomic_load_explicit(&watch_now.active, memory_order_relaxed);
    s->group = atomic_load_explicit(&watch_now.group, memory_order_relaxed);
    s->peer = atomic_load_explicit(&watch_now.peer, memory_order_relaxed);
    s->tag = atomic_load_explicit(&watch_now.tag, memory_order_relaxed);
    s->kind = atomic_load_explicit(&watch_now.kind, memory_order_relaxed);
    s->comm = atomic_load_explicit(&watch_now.comm, memory_order_relaxed);
    s->since = atomic_load_explicit(&watch_now.since, memory_order_relaxed);
    for (int g = 0; g < COMM_NUM_GROUPS; g++) s->coll[g] = atomic_load_explicit(&watch_now.coll[g], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&watch_now.seq, memory_order_relaxed) != a) continue;
    s->seq = a;
    /* the bound first: watchdog_phase disarms it before it moves the start */
    s->bound = (watch_bound)atomic_load(&wdog.at.bound);
    s->phase_since = atomic_load(&wdog.at.phase_since);
    s->phase = atomic_load(&wdog.at.phase);
    s->step = atomic_load(&wdog.at.step);
    if (s->group < 0 || s->group >= COMM_NUM_GROUPS) s->group = COMM_WORLD;
    return 0;
  }
  return -1;
}

static double bound_s(watch_bound b) {
  if (b == WATCH_WAIT) return wdog.timeout;
  if (b == WATCH_CKPT) return wdog.ckpt_timeout > 0 ? wdog.timeout + wdog.ckpt_timeout : 0.0;
  return 0.0;
}

/* A device wait ("device sync", ...: watch_device), charged to the group
 * of the collective before it. */
static int is_device(const char *kind) { return strncmp(kind, "device ", 7) == 0; }

/* "dp allreduce (collective 12 on dp) in step 4", "pp recv from pp rank 1
 * (micro-batch tag 0) in step 4", or "start-up: checkpoint directory". */
void wd_describe(const wd_snap *s, int in_phase, char *out, size_t len) {
  const char *g = comm_group_names[s->group];
  char step[48] = "";
  if (s->step > 0) boost_msgf(step, sizeof step, " in step %lld", (long long)s->step);
  if (in_phase || !s->kind)
    boost_msgf(out, len, "in %s%s", s->phase ? s->phase : "?", step);
  else if (s->peer >= 0)
    boost_msgf(out, len, "in %s %s %s %s rank %d (tag %d)%s", g, s->kind, strcmp(s->kind, "recv") ? "to" : "from", g,
               s->peer, s->tag, step);
  else
    boost_msgf(out, len, "in %s %s (%scollective %llu on %s)%s", g, s->kind, is_device(s->kind) ? "after " : "",
               (unsigned long long)s->coll[s->group], g, step);
}

/* ---- firing ------------------------------------------------------------------ */

static int exit_status(char *why, size_t len) {
  if (wdog.end.status_fn) {
    boost_status said = {0};
    const int status = wdog.end.status_fn(wdog.end.status_ctx, &said);
    boost_msgf(why, len, "%s", said.msg);
    return status;
  }
  boost_msgf(why, len, "%s", wdog.end.fixed_why);
  return wdog.end.fixed;
}

/* One line, then the job ends: a timeout (cause NULL: the wait or phase
 * lasted `waited` s) or a failure (cause: the error). Called with wdog.mu
 * held; does not return. */
static __attribute__((noreturn)) void fire(const wd_snap *s, int in_phase, double waited, const char *cause) {
  char what[256], who[1200], why[256], head[1024], line[2800];
  wd_describe(s, in_phase, what, sizeof what);
  wd_not_arrived(s, in_phase, who, sizeof who);
  const int status = exit_status(why, sizeof why);
  if (cause && !s->active && !s->phase) /* nothing recorded: the watchdog never ran */
    boost_msgf(head, sizeof head, ": %s", cause);
  else if (cause)
    boost_msgf(head, sizeof head, ": %s, %s %s", cause, s->active ? "waiting" : "busy", what);
  else
    boost_msgf(head, sizeof head, " has waited %.0f s %s, longer than %s=%g s", waited, what,
               in_phase && s->bound == WATCH_CKPT ? "parallel.timeout + ckpt.timeout" : "parallel.timeout",
               bound_s(in_phase ? s->bound : WATCH_WAIT));
  boost_msgf(line, sizeof line, "%s: watchdog: rank %d%s; not arrived: %s; ending the job with exit %d (%s)",
             boost_log_name(), wdog.rank, head, who, status, why);
  job_end(status, line);
}

/* Once per run: a wait that ended after more than half the timeout (a
 * healthy job this uneven is close to being ended). */
static void warn_slow(double now, const wd_snap *s) {
  if (s->seq != wdog.slow.last.seq) {
    if (!wdog.slow.warned && wdog.slow.last_waited > wdog.timeout / 2) {
      char what[256];
      wd_describe(&wdog.slow.last, 0, what, sizeof what);
      boost_log_warn("warning: rank %d waited %.0f s %s, more than half of parallel.timeout=%g s: a wait longer "
                     "than the timeout ends the job (raise parallel.timeout if steps are this uneven)",
                     wdog.rank, wdog.slow.last_waited, what, wdog.timeout);
      wdog.slow.warned = 1;
    }
    wdog.slow.last_waited = 0;
  }
  wdog.slow.last = *s;
  if (s->active) wdog.slow.last_waited = now - s->since;
}

/* Another thread's job past its deadline ends the job with its line. */
static void check_deadlines(void) {
  for (int i = 0; i < DEADLINES; i++) {
    boost_status line = {0};
    const int status = wdog.end.deadlines[i].fn ? wdog.end.deadlines[i].fn(wdog.end.deadlines[i].ctx, &line) : 0;
    if (status > 0) job_end(status, line.msg);
  }
}

static void check(void) {
  check_deadlines();
  wd_snap s;
  if (wd_snapshot(&s) != 0) return;
  if (wdog.end.fail_req) fire(&s, !s.active, 0, wdog.end.fail_why);
  if (!wdog.watching) return;
  const double now = boost_now_s();
  warn_slow(now, &s);
  /* a wait inside a checkpoint phase (the load's agreements) has the phase's bound */
  const double wait_bound = s.bound == WATCH_CKPT ? bound_s(WATCH_CKPT) : wdog.timeout;
  if (s.active && wait_bound > 0 && now - s.since > wait_bound) fire(&s, 0, now - s.since, NULL);
  const double b = bound_s(s.bound);
  if (b > 0 && now - s.phase_since > b) fire(&s, 1, now - s.phase_since, NULL);
}

static void *wd_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "watchdog");
  pthread_mutex_lock(&wdog.mu);
  while (!wdog.quit) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    const long ns = until.tv_nsec + (long)(wdog.period * 1e9);
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&wdog.cv, &wdog.mu, &until);
    if (wdog.quit) break;
    if (wdog.close_req && !wdog.closed) wd_close_channel();
    if (atomic_load(&wdog.chan.up)) wd_serve();
    check();
  }
  pthread_mutex_unlock(&wdog.mu);
  return NULL;
}

/* With wdog.mu held: the thread runs (if it can be started). */
static void start_thread_locked(void) {
  if (wdog.started) return;
  if (!wdog.cv_ready) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wdog.cv, &ca);
    pthread_condattr_destroy(&ca);
    wdog.cv_ready = 1;
  }
  if (wdog.period <= 0) wdog.period = PERIOD_S;
  wdog.quit = 0;
  wdog.started = pthread_create(&wdog.thread, NULL, wd_main, NULL) == 0;
}

/* With wdog.mu held: when the thread has nothing left to watch (no waits, no
 * deadline) it is told to quit; 1 then, and the caller joins it
 * (stop_thread) once mu is released. */
static int thread_done_locked(void) {
  if (!wdog.started || wdog.watching) return 0;
  for (int i = 0; i < DEADLINES; i++)
    if (wdog.end.deadlines[i].fn) return 0;
  wdog.quit = 1;
  pthread_cond_broadcast(&wdog.cv);
  return 1;
}

static void stop_thread(void) {
  pthread_join(wdog.thread, NULL);
  pthread_mutex_lock(&wdog.mu);
  wdog.started = 0;
  wdog.quit = 0;
  pthread_mutex_unlock(&wdog.mu);
}

/* ---- the API ------------------------------------------------------------------ */

void watchdog_start(double timeout_s, double ckpt_timeout_s) {
  if (timeout_s <= 0 || wdog.watching) return;
  wdog.rank = job_rank();
  wdog.timeout = timeout_s;
  wdog.ckpt_timeout = ckpt_timeout_s;
  wdog.period = timeout_s / 8 < PERIOD_S ? timeout_s / 8 : PERIOD_S;
  wdog.end.fixed = 75;
  wdog.end.fixed_why = "nothing was trained: the newest state is committed, or a fresh start";
  atomic_store(&wdog.at.step, -1);
  watch_mine = 1;
  watchdog_phase("MPI start-up", WATCH_WAIT);
  pthread_mutex_lock(&wdog.mu);
  start_thread_locked();
  wdog.watching = wdog.started;
  watch_mine = wdog.started;
  pthread_mutex_unlock(&wdog.mu);
}

void watchdog_mpi_ready(int thread_multiple) {
  if (!wdog.watching) return;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  atomic_store(&wdog.rank, rank);
  MPI_Comm_size(MPI_COMM_WORLD, &wdog.chan.size);
  if (wdog.chan.size == 1) { /* nothing to wait for */
    watchdog_stop();
    return;
  }
  if (!thread_multiple) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &wdog.chan.comm);
  atomic_store(&wdog.chan.up, 1);
}

void watchdog_mpi_close(void) {
  if (!wdog.watching) return;
  watchdog_phase("MPI finalize", WATCH_WAIT);
  pthread_mutex_lock(&wdog.mu);
  const int had = atomic_load(&wdog.chan.up);
  wdog.close_req = 1;
  pthread_cond_broadcast(&wdog.cv);
  while (had && !wdog.closed) pthread_cond_wait(&wdog.cv, &wdog.mu);
  job_abort_mpi_closing(); /* MPI_Abort inside MPI_Finalize may never return */
  pthread_mutex_unlock(&wdog.mu);
  if (had) MPI_Comm_free(&wdog.chan.comm);
}

void watchdog_stop(void) {
  if (!wdog.watching) return;
  pthread_mutex_lock(&wdog.mu);
  wdog.watching = 0;
  watch_mine = 0;
  atomic_store(&wdog.at.phase, NULL); /* nothing is recorded from here on: watchdog_fail names no stale phase */
  const int stop = thread_done_locked();
  pthread_mutex_unlock(&wdog.mu);
  if (stop) stop_thread();
}

void watchdog_deadline(watchdog_overdue_fn fn, void *ctx) {
  pthread_mutex_lock(&wdog.mu);
  int slot = -1, stop = 0;
  for (int i = 0; i < DEADLINES; i++)
    if (wdog.end.deadlines[i].ctx == ctx || (slot < 0 && !wdog.end.deadlines[i].fn && fn)) slot = i;
  if (slot >= 0) wdog.end.deadlines[slot].fn = fn, wdog.end.deadlines[slot].ctx = fn ? ctx : NULL;
  if (fn)
    start_thread_locked();
  else
    stop = thread_done_locked();
  pthread_mutex_unlock(&wdog.mu);
  if (stop) stop_thread();
  BOOST_ASSERT(slot >= 0 || !fn);
}

void watchdog_phase(const char *name, watch_bound bound) {
  if (!watch_mine) return;
  atomic_store(&wdog.at.bound, (int)WATCH_WORK); /* never the new start with the old bound, or the reverse */
  atomic_store(&wdog.at.phase_since, boost_now_s());
  atomic_store(&wdog.at.phase, name);
  atomic_store(&wdog.at.bound, (int)bound);
}

void watchdog_step(int64_t step) {
  if (watch_mine) atomic_store(&wdog.at.step, step);
}

void watchdog_fail(const char *why) {
  pthread_mutex_lock(&wdog.mu);
  /* what the line and the status need, also where no waits were watched
   * (the thread may run for a deadline alone) */
  if (!wdog.end.status_fn && !wdog.end.fixed) wdog.end.fixed = 1, wdog.end.fixed_why = "outside a training run"; /* a tool */
  int live = 0, finalized = 1;
  MPI_Initialized(&live);
  if (live) MPI_Finalized(&finalized);
  if (live && !finalized) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &wdog.chan.size);
    atomic_store(&wdog.rank, rank);
  }
  if (wdog.started && !wdog.quit) { /* the watchdog's thread ends the job: it owns the side channel */
    boost_msgf(wdog.end.fail_why, sizeof wdog.end.fail_why, "%s", why);
    wdog.end.fail_req = 1;
    pthread_cond_broadcast(&wdog.cv);
    pthread_mutex_unlock(&wdog.mu);
    for (;;) nanosleep(&(struct timespec){1, 0}, NULL);
  }
  wd_snap s;
  if (wd_snapshot(&s) != 0) memset(&s, 0, sizeof s);
  fire(&s, !s.active, 0, why);
}

void watchdog_set_status(watchdog_status_fn fn, void *ctx, int fixed, const char *why) {
  pthread_mutex_lock(&wdog.mu);
  wdog.end.status_fn = fn;
  wdog.end.status_ctx = ctx;
  wdog.end.fixed = fixed;
  wdog.end.fixed_why = why;
  pthread_mutex_unlock(&wdog.mu);
}
