/* What the watchdog's files share (watchdog.c: the thread, its checks and
 * the API; watchdog_side.c: the side channel to the other ranks' watchdogs). */
#ifndef BOOST_WATCHDOG_INTERNAL_H
#define BOOST_WATCHDOG_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "watchdog.h"

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

/* The watchdog's state, in parts with one job each. */
typedef struct {
  double timeout, ckpt_timeout, period;
  pthread_t thread;
  int started;  /* the thread runs: for the watched thread's waits, or for deadlines */
  int watching; /* the watched thread's waits and phases are timed (watchdog_start .. watchdog_stop) */
  int cv_ready;
  pthread_mutex_t mu; /* quit, the closing handshake, the exit status */
  pthread_cond_t cv;
  int quit, close_req, closed;
  _Atomic int rank; /* world rank (from the launcher's environment before MPI_Init) */
  /* The side channel: used by the watchdog thread while `up`. */
  struct {
    _Atomic int up;
    MPI_Comm comm;
    int size;
    MPI_Request query;
    int32_t query_buf;
    int query_posted;
  } chan;
  /* the watched thread's phase and step */
  struct {
    _Atomic(const char *) phase;
    _Atomic double phase_since;
    _Atomic int bound;
    _Atomic int64_t step;
  } at;
  /* how the job ends: the exit status, watchdog_fail's request, the
   * deadlines of other threads' jobs (under mu) */
  struct {
    watchdog_status_fn status_fn;
    void *status_ctx;
    int fixed;
    const char *fixed_why;
    int fail_req;
    char fail_why[768];
    struct {
      watchdog_overdue_fn fn;
      void *ctx;
    } deadlines[DEADLINES];
  } end;
  /* the slow-wait warning (watchdog thread only) */
  struct {
    wd_snap last;
    double last_waited;
    int warned;
  } slow;
} wd_state;

extern wd_state wdog;

/* The watched thread's state, copied consistently (0, or -1 when it never settled). */
int wd_snapshot(wd_snap *s);
/* "waiting in dp allreduce ..." or the phase: what the snapshot shows. */
void wd_describe(const wd_snap *s, int in_phase, char *out, size_t len);

/* The side channel (watchdog_side.c). */
void wd_serve(void);
void wd_close_channel(void);
/* The ranks that have not arrived where this one waits, named (with what each answered). */
void wd_not_arrived(const wd_snap *s, int in_phase, char *out, size_t len);

#endif
