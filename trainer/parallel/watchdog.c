/* The collective watchdog: a thread per rank that times the training
 * thread's waits and phases, answers the other ranks' questions on a side
 * communicator, and ends the job with one line. See watchdog.h. */
#include "watchdog.h"

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

enum { TAG_QUERY = 30571, TAG_ANSWER = 30572 };
#define ANSWER_S 2.0 /* how long a firing rank waits for the others' answers */
#define NAMED_MAX 8  /* ranks named in the line; the rest are counted */
#define DEADLINES 8  /* other threads' jobs with a deadline (checkpoint sessions' writers) */
#define PERIOD_S 0.25 /* how often the thread looks, at most */

/* Where a rank's training thread is: what its watchdog answers. */
typedef struct {
  int64_t step;
  uint64_t coll[COMM_NUM_GROUPS];
  int32_t active, group;
  double waited;  /* seconds in the wait in flight, or in the phase */
  char what[112]; /* "waiting in dp allreduce", or the phase */
} wd_answer;

/* A consistent copy of the watched thread's state. */
typedef struct {
  uint64_t seq;
  int active, group, peer, tag;
  const char *kind, *phase;
  MPI_Comm comm;
  double since, phase_since;
  uint64_t coll[COMM_NUM_GROUPS];
  watch_bound bound;
  int64_t step;
} wd_snap;

static struct {
  double timeout, ckpt_timeout, period;
  pthread_t thread;
  int started;  /* the thread runs: for the watched thread's waits, or for deadlines */
  int watching; /* the watched thread's waits and phases are timed (watchdog_start .. watchdog_stop) */
  int cv_ready;
  pthread_mutex_t mu; /* quit, the closing handshake, the exit status */
  pthread_cond_t cv;
  int quit, close_req, closed;
  /* The side channel: used by the watchdog thread while `up`. */
  _Atomic int up;
  MPI_Comm side;
  _Atomic int rank; /* world rank (from the launcher's environment before MPI_Init) */
  int size;
  MPI_Request query;
  int32_t query_buf;
  int query_posted;
  /* the watched thread's phase and step */
  _Atomic(const char *) phase;
  _Atomic double phase_since;
  _Atomic int bound;
  _Atomic int64_t step;
  /* the exit status */
  watchdog_status_fn status_fn;
  void *status_ctx;
  int fixed;
  const char *fixed_why;
  /* the slow-wait warning (watchdog thread only) */
  wd_snap last;
  double last_waited;
  int warned;
  /* what ends the job besides the timeout: watchdog_fail's request, and
   * the deadlines of other threads' jobs (under mu) */
  int fail_req;
  char fail_why[768];
  struct {
    watchdog_overdue_fn fn;
    void *ctx;
  } deadlines[DEADLINES];
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .rank = -1};

/* ---- the watched thread's state ------------------------------------------ */

static int snapshot(wd_snap *s) {
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
    s->bound = (watch_bound)atomic_load(&wd.bound);
    s->phase_since = atomic_load(&wd.phase_since);
    s->phase = atomic_load(&wd.phase);
    s->step = atomic_load(&wd.step);
    if (s->group < 0 || s->group >= COMM_NUM_GROUPS) s->group = COMM_WORLD;
    return 0;
  }
  return -1;
}

static double bound_s(watch_bound b) {
  if (b == WATCH_WAIT) return wd.timeout;
  if (b == WATCH_CKPT) return wd.ckpt_timeout > 0 ? wd.timeout + wd.ckpt_timeout : 0.0;
  return 0.0;
}

/* A device wait ("device sync", ...: watch_device), charged to the group
 * of the collective before it. */
static int is_device(const char *kind) { return strncmp(kind, "device ", 7) == 0; }

/* "dp allreduce (collective 12 on dp) in step 4", "pp recv from pp rank 1
 * (micro-batch tag 0) in step 4", or "start-up: checkpoint directory". */
static void describe(const wd_snap *s, int in_phase, char *out, size_t len) {
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

/* ---- the side channel ------------------------------------------------------ */

static void answer(int to) {
  wd_snap s;
  wd_answer a;
  memset(&a, 0, sizeof a);
  if (snapshot(&s) == 0) {
    const double now = boost_now_s();
    a.step = s.step;
    memcpy(a.coll, s.coll, sizeof a.coll);
    a.active = s.active;
    a.group = s.group;
    a.waited = now - (s.active ? s.since : s.phase_since);
    char d[96];
    describe(&s, !s.active, d, sizeof d);
    boost_msgf(a.what, sizeof a.what, "%s %.0f s %s", s.active ? "waiting" : "busy", a.waited, d);
  } else {
    a.step = -1;
    boost_msgf(a.what, sizeof a.what, "busy");
  }
  MPI_Send(&a, (int)sizeof a, MPI_BYTE, to, TAG_ANSWER, wd.side); /* small: sent eagerly */
}

/* Answers the queries that came in (watchdog thread, channel up). */
static void serve(void) {
  for (;;) {
    if (!wd.query_posted) {
      MPI_Irecv(&wd.query_buf, 1, MPI_INT32_T, MPI_ANY_SOURCE, TAG_QUERY, wd.side, &wd.query);
      wd.query_posted = 1;
    }
    int flag = 0;
    MPI_Status st;
    MPI_Test(&wd.query, &flag, &st);
    if (!flag) return;
    wd.query_posted = 0;
    answer(st.MPI_SOURCE);
  }
}

static void close_channel(void) {
  if (wd.query_posted) {
    MPI_Cancel(&wd.query);
    MPI_Wait(&wd.query, MPI_STATUS_IGNORE);
    wd.query_posted = 0;
  }
  atomic_store(&wd.up, 0);
  wd.closed = 1;
  pthread_cond_broadcast(&wd.cv);
}

/* World ranks of the ranks a wait waits for: the other members of its
 * communicator, the peer of a point-to-point wait, everyone for a phase.
 * Returns how many (malloc'd in *out). */
static int targets(const wd_snap *s, int in_phase, int **out) {
  int n = 0;
  int *t = boost_calloc((size_t)wd.size, sizeof *t);
  if (in_phase || !s->kind) {
    for (int r = 0; r < wd.size; r++)
      if (r != wd.rank) t[n++] = r;
    *out = t;
    return n;
  }
  MPI_Group g, w;
  MPI_Comm_group(s->comm, &g);
  MPI_Comm_group(wd.side, &w);
  int gsize, grank;
  MPI_Group_size(g, &gsize);
  MPI_Group_rank(g, &grank);
  int *in = boost_calloc((size_t)gsize, sizeof *in), m = 0;
  for (int r = 0; r < gsize; r++)
    if (s->peer >= 0 ? r == s->peer : r != grank) in[m++] = r;
  MPI_Group_translate_ranks(g, m, in, w, t);
  for (int i = 0; i < m; i++)
    if (t[i] != MPI_UNDEFINED) t[n++] = t[i];
  boost_free(in);
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  *out = t;
  return n;
}

/* Asks every target where it is; got[i] = 1 for those that answered within
 * ANSWER_S (answering the others' questions meanwhile). */
static void ask(const int *t, int n, wd_answer *ans, int *got) {
  MPI_Request *rq = boost_calloc((size_t)n * 2, sizeof *rq);
  static int32_t q; /* the query's content does not matter */
  for (int i = 0; i < n; i++) {
    MPI_Irecv(&ans[i], (int)sizeof ans[i], MPI_BYTE, t[i], TAG_ANSWER, wd.side, &rq[i]);
    MPI_Isend(&q, 1, MPI_INT32_T, t[i], TAG_QUERY, wd.side, &rq[n + i]);
  }
  const double until = boost_now_s() + ANSWER_S;
  int left = n;
  while (left > 0 && boost_now_s() < until) {
    serve();
    left = 0;
    for (int i = 0; i < n; i++) {
      if (!got[i]) MPI_Test(&rq[i], &got[i], MPI_STATUS_IGNORE);
      left += !got[i];
    }
    if (left) nanosleep(&(struct timespec){0, 10000000L}, NULL);
  }
  boost_free(rq); /* the job ends: requests left in flight are abandoned */
}

static void add_rank(char *out, size_t len, int *named, int *more, int rank, const char *what) {
  if (*named >= NAMED_MAX) {
    (*more)++;
    return;
  }
  const size_t used = strlen(out);
  boost_msgf(out + used, len - used, "%srank %d (%s)", *named ? ", " : "", rank, what);
  (*named)++;
}

/* "rank 1 (no answer in 2 s: ...)", "rank 3 (step 4, busy in training)",
 * "none (every rank answers ...)" or "unknown (...)". */
static void not_arrived(const wd_snap *s, int in_phase, char *out, size_t len) {
  if (!atomic_load(&wd.up)) {
    if (wd.size == 1)
      boost_msgf(out, len, "none (a world of one rank)");
    else if (!wd.watching)
      boost_msgf(out, len, "unknown (the watchdog is not running, parallel.timeout=0: the ranks cannot be asked)");
    else
      boost_msgf(out, len, "unknown (the ranks cannot be asked before MPI is up or while it finalizes)");
    return;
  }
  int *t, named = 0, more = 0;
  const int n = targets(s, in_phase, &t);
  wd_answer *ans = boost_calloc((size_t)n, sizeof *ans);
  int *got = boost_calloc((size_t)n, sizeof *got);
  ask(t, n, ans, got);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    char what[160];
    if (!got[i]) {
      boost_msgf(what, sizeof what, "no answer in %.0f s: stopped, dead, or stuck in MPI", ANSWER_S);
      add_rank(out, len, &named, &more, t[i], what);
      continue;
    }
    const int behind = !in_phase && s->kind && (s->peer >= 0 || ans[i].coll[s->group] < s->coll[s->group]);
    if (behind) {
      ans[i].what[sizeof ans[i].what - 1] = '\0';
      boost_msgf(what, sizeof what, "answers: %s", ans[i].what);
      add_rank(out, len, &named, &more, t[i], what);
    }
  }
  const size_t used = strlen(out);
  if (more) boost_msgf(out + used, len - used, " and %d more", more);
  if (!named) boost_msgf(out, len, "none known (all %d ranks asked answer%s)", n, in_phase ? "" : " and have arrived");
  boost_free(t);
  boost_free(ans);
  boost_free(got);
}

/* ---- firing ------------------------------------------------------------------ */

static int exit_status(char *why, size_t len) {
  if (wd.status_fn) return wd.status_fn(wd.status_ctx, why, len);
  boost_msgf(why, len, "%s", wd.fixed_why);
  return wd.fixed;
}

/* One line, then the job ends: a timeout (cause NULL: the wait or phase
 * lasted `waited` s) or a failure (cause: the error). Called with wd.mu
 * held; does not return. */
static __attribute__((noreturn)) void fire(const wd_snap *s, int in_phase, double waited, const char *cause) {
  char what[256], who[1200], why[256], head[1024], line[2800];
  describe(s, in_phase, what, sizeof what);
  not_arrived(s, in_phase, who, sizeof who);
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
             boost_log_name(), wd.rank, head, who, status, why);
  job_end(status, line);
}

/* Once per run: a wait that ended after more than half the timeout (a
 * healthy job this uneven is close to being ended). */
static void warn_slow(double now, const wd_snap *s) {
  if (s->seq != wd.last.seq) {
    if (!wd.warned && wd.last_waited > wd.timeout / 2) {
      char what[256];
      describe(&wd.last, 0, what, sizeof what);
      boost_log_warn("warning: rank %d waited %.0f s %s, more than half of parallel.timeout=%g s: a wait longer "
                     "than the timeout ends the job (raise parallel.timeout if steps are this uneven)",
                     wd.rank, wd.last_waited, what, wd.timeout);
      wd.warned = 1;
    }
    wd.last_waited = 0;
  }
  wd.last = *s;
  if (s->active) wd.last_waited = now - s->since;
}

/* Another thread's job past its deadline ends the job with its line. */
static void check_deadlines(void) {
  for (int i = 0; i < DEADLINES; i++) {
    char line[1024];
    const int status = wd.deadlines[i].fn ? wd.deadlines[i].fn(wd.deadlines[i].ctx, line, sizeof line) : 0;
    if (status > 0) job_end(status, line);
  }
}

static void check(void) {
  check_deadlines();
  wd_snap s;
  if (snapshot(&s) != 0) return;
  if (wd.fail_req) fire(&s, !s.active, 0, wd.fail_why);
  if (!wd.watching) return;
  const double now = boost_now_s();
  warn_slow(now, &s);
  /* a wait inside a checkpoint phase (the load's agreements) has the phase's bound */
  const double wait_bound = s.bound == WATCH_CKPT ? bound_s(WATCH_CKPT) : wd.timeout;
  if (s.active && wait_bound > 0 && now - s.since > wait_bound) fire(&s, 0, now - s.since, NULL);
  const double b = bound_s(s.bound);
  if (b > 0 && now - s.phase_since > b) fire(&s, 1, now - s.phase_since, NULL);
}

static void *wd_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "watchdog");
  pthread_mutex_lock(&wd.mu);
  while (!wd.quit) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    const long ns = until.tv_nsec + (long)(wd.period * 1e9);
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&wd.cv, &wd.mu, &until);
    if (wd.quit) break;
    if (wd.close_req && !wd.closed) close_channel();
    if (atomic_load(&wd.up)) serve();
    check();
  }
  pthread_mutex_unlock(&wd.mu);
  return NULL;
}

/* With wd.mu held: the thread runs (if it can be started). */
static void start_thread_locked(void) {
  if (wd.started) return;
  if (!wd.cv_ready) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd.cv, &ca);
    pthread_condattr_destroy(&ca);
    wd.cv_ready = 1;
  }
  if (wd.period <= 0) wd.period = PERIOD_S;
  wd.quit = 0;
  wd.started = pthread_create(&wd.thread, NULL, wd_main, NULL) == 0;
}

/* With wd.mu held: when the thread has nothing left to watch (no waits, no
 * deadline) it is told to quit; 1 then, and the caller joins it
 * (stop_thread) once mu is released. */
static int thread_done_locked(void) {
  if (!wd.started || wd.watching) return 0;
  for (int i = 0; i < DEADLINES; i++)
    if (wd.deadlines[i].fn) return 0;
  wd.quit = 1;
  pthread_cond_broadcast(&wd.cv);
  return 1;
}

static void stop_thread(void) {
  pthread_join(wd.thread, NULL);
  pthread_mutex_lock(&wd.mu);
  wd.started = 0;
  wd.quit = 0;
  pthread_mutex_unlock(&wd.mu);
}

/* ---- the API ------------------------------------------------------------------ */

void watchdog_start(double timeout_s, double ckpt_timeout_s) {
  if (timeout_s <= 0 || wd.watching) return;
  wd.rank = job_rank();
  wd.timeout = timeout_s;
  wd.ckpt_timeout = ckpt_timeout_s;
  wd.period = timeout_s / 8 < PERIOD_S ? timeout_s / 8 : PERIOD_S;
  wd.fixed = 75;
  wd.fixed_why = "nothing was trained: the newest state is committed, or a fresh start";
  atomic_store(&wd.step, -1);
  watch_mine = 1;
  watchdog_phase("MPI start-up", WATCH_WAIT);
  pthread_mutex_lock(&wd.mu);
  start_thread_locked();
  wd.watching = wd.started;
  watch_mine = wd.started;
  pthread_mutex_unlock(&wd.mu);
}

void watchdog_mpi_ready(int thread_multiple) {
  if (!wd.watching) return;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  atomic_store(&wd.rank, rank);
  MPI_Comm_size(MPI_COMM_WORLD, &wd.size);
  if (wd.size == 1) { /* nothing to wait for */
    watchdog_stop();
    return;
  }
  if (!thread_multiple) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &wd.side);
  atomic_store(&wd.up, 1);
}

void watchdog_mpi_close(void) {
  if (!wd.watching) return;
  watchdog_phase("MPI finalize", WATCH_WAIT);
  pthread_mutex_lock(&wd.mu);
  const int had = atomic_load(&wd.up);
  wd.close_req = 1;
  pthread_cond_broadcast(&wd.cv);
  while (had && !wd.closed) pthread_cond_wait(&wd.cv, &wd.mu);
  job_abort_mpi_closing(); /* MPI_Abort inside MPI_Finalize may never return */
  pthread_mutex_unlock(&wd.mu);
  if (had) MPI_Comm_free(&wd.side);
}

void watchdog_stop(void) {
  if (!wd.watching) return;
  pthread_mutex_lock(&wd.mu);
  wd.watching = 0;
  watch_mine = 0;
  atomic_store(&wd.phase, NULL); /* nothing is recorded from here on: watchdog_fail names no stale phase */
  const int stop = thread_done_locked();
  pthread_mutex_unlock(&wd.mu);
  if (stop) stop_thread();
}

void watchdog_deadline(watchdog_overdue_fn fn, void *ctx) {
  pthread_mutex_lock(&wd.mu);
  int slot = -1, stop = 0;
  for (int i = 0; i < DEADLINES; i++)
    if (wd.deadlines[i].ctx == ctx || (slot < 0 && !wd.deadlines[i].fn && fn)) slot = i;
  if (slot >= 0) wd.deadlines[slot].fn = fn, wd.deadlines[slot].ctx = fn ? ctx : NULL;
  if (fn)
    start_thread_locked();
  else
    stop = thread_done_locked();
  pthread_mutex_unlock(&wd.mu);
  if (stop) stop_thread();
  BOOST_ASSERT(slot >= 0 || !fn);
}

void watchdog_phase(const char *name, watch_bound bound) {
  if (!watch_mine) return;
  atomic_store(&wd.bound, (int)WATCH_WORK); /* never the new start with the old bound, or the reverse */
  atomic_store(&wd.phase_since, boost_now_s());
  atomic_store(&wd.phase, name);
  atomic_store(&wd.bound, (int)bound);
}

void watchdog_step(int64_t step) {
  if (watch_mine) atomic_store(&wd.step, step);
}

void watchdog_fail(const char *why) {
  pthread_mutex_lock(&wd.mu);
  /* what the line and the status need, also where no waits were watched
   * (the thread may run for a deadline alone) */
  if (!wd.status_fn && !wd.fixed) wd.fixed = 1, wd.fixed_why = "outside a training run"; /* a tool */
  int live = 0, finalized = 1;
  MPI_Initialized(&live);
  if (live) MPI_Finalized(&finalized);
  if (live && !finalized) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &wd.size);
    atomic_store(&wd.rank, rank);
  }
  if (wd.started && !wd.quit) { /* the watchdog's thread ends the job: it owns the side channel */
    boost_msgf(wd.fail_why, sizeof wd.fail_why, "%s", why);
    wd.fail_req = 1;
    pthread_cond_broadcast(&wd.cv);
    pthread_mutex_unlock(&wd.mu);
    for (;;) nanosleep(&(struct timespec){1, 0}, NULL);
  }
  wd_snap s;
  if (snapshot(&s) != 0) memset(&s, 0, sizeof s);
  fire(&s, !s.active, 0, why);
}

void watchdog_set_status(watchdog_status_fn fn, void *ctx, int fixed, const char *why) {
  pthread_mutex_lock(&wd.mu);
  wd.status_fn = fn;
  wd.status_ctx = ctx;
  wd.fixed = fixed;
  wd.fixed_why = why;
  pthread_mutex_unlock(&wd.mu);
}
