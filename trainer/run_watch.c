#include "run_watch.h"

#include <stdatomic.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "comm.h"
#include "device_wait.h"
#include "log.h"
#include "preempt.h"
#include "util.h"
#include "watchdog.h"

/* One run per process: the watchdog thread may read this at any time. */
static struct {
  int rank;
  int64_t stop_at; /* test hook: the step whose start stops a rank (-1: none) */
  int stop_me;     /* ... this one */
  char dir[CONFIG_STR];
  _Atomic int64_t start, done, committed, staged;
  _Atomic int64_t latest_ino, latest_mtime_ns; /* `latest` as it was before `staged` was staged */
} rw;

/* The identity of dir/latest (inode and modification time; it is replaced
 * by a rename at every commit), or zeros when there is none. */
static void latest_id(const char *dir, int64_t *ino, int64_t *mtime_ns) {
  char p[CONFIG_STR + 16];
  struct stat st;
  boost_msgf(p, sizeof p, "%s/" CKPT_LATEST, dir);
  *ino = *mtime_ns = 0;
  if (stat(p, &st) != 0) return;
  *ino = (int64_t)st.st_ino;
  *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* Whether the checkpoint of `step`, staged by this run, has committed since
 * (the writer thread may have finished it while training was stuck). */
static int committed_on_disk(int64_t step) {
  if (!rw.dir[0] || atomic_load(&rw.staged) != step) return 0;
  char name[256];
  int64_t ino, mtime;
  if (ckpt_fs_read_latest(rw.dir, name, sizeof name) != 0 || ckpt_parse_file_name(name) != step) return 0;
  latest_id(rw.dir, &ino, &mtime);
  return ino != atomic_load(&rw.latest_ino) || mtime != atomic_load(&rw.latest_mtime_ns);
}

static int status_now(void *ctx, boost_status *why) {
  (void)ctx;
  const int64_t done = atomic_load(&rw.done), start = atomic_load(&rw.start), committed = atomic_load(&rw.committed);
  if (done == start) {
    boost_msgf(why->msg, sizeof why->msg, "nothing trained since %s", start > 0 ? "the resumed checkpoint" : "the fresh start");
    return BOOST_EXIT_PREEMPTED;
  }
  if (done == committed || committed_on_disk(done)) {
    boost_msgf(why->msg, sizeof why->msg, "nothing trained since the checkpoint of step %lld committed", (long long)done);
    return BOOST_EXIT_PREEMPTED;
  }
  const int64_t newest = committed > start ? committed : start;
  boost_msgf(why->msg, sizeof why->msg, "step %lld done, the newest committed state is %s %lld", (long long)done,
             newest == committed ? "the checkpoint of step" : "the start, step", (long long)newest);
  return BOOST_EXIT_UNSAVED;
}

/* BOOST_TRAIN_TEST_STUCK_AT=STEP:RANK:control|device|device-error|op-error:
 * at the start of step STEP, RANK's next agreement stalls inside the
 * watched call, or every device wait of the guarded backend from then on
 * never completes (fails), or its next op fails as a CUDA call does. */
static void arm_stuck(int64_t step) {
  const char *v = getenv("BOOST_TRAIN_TEST_STUCK_AT");
  long long at = -1, r = -1;
  char where[16] = "";
  if (!v || sscanf(v, "%lld:%lld:%15s", &at, &r, where) != 3 || at != step || r != rw.rank) return;
  const int device = strncmp(where, "device", 6) == 0, error = strcmp(where, "device-error") == 0;
  const int op = strcmp(where, "op-error") == 0;
  boost_log_warn("rank %d gets stuck in its next %s at step %lld (BOOST_TRAIN_TEST_STUCK_AT)", rw.rank,
                 op       ? "op, which fails"
                 : error  ? "device wait, which fails"
                 : device ? "device wait"
                          : "agreement",
                 (long long)step);
  if (op)
    boost_wait_test_stick(BOOST_WAIT_TEST_OP_ERROR);
  else if (device)
    boost_wait_test_stick(error ? BOOST_WAIT_TEST_ERROR : BOOST_WAIT_TEST_STUCK);
  else
    comm_test_stall_next_control();
}

/* BOOST_TRAIN_TEST_STOP_AT=STEP[:RANK]: the step (-1 when unset), and
 * whether it stops this rank. */
static int64_t stop_at(int rank, int *me) {
  const char *v = getenv("BOOST_TRAIN_TEST_STOP_AT");
  long long step = -1, r = -1;
  if (!v || sscanf(v, "%lld:%lld", &step, &r) < 1) return -1;
  *me = r < 0 || r == rank;
  return step;
}

void run_watch_begin(const train_config *cfg, int rank, const train_state *st, const ckpt_session *ck) {
  rw.rank = rank;
  rw.stop_at = stop_at(rank, &rw.stop_me);
  boost_msgf(rw.dir, sizeof rw.dir, "%s", ckpt_writes(ck) ? cfg->ckpt.dir : "");
  atomic_store(&rw.start, st->step);
  atomic_store(&rw.done, st->step);
  atomic_store(&rw.committed, ckpt_last_committed(ck));
  atomic_store(&rw.staged, -1);
  watchdog_phase("the training loop", WATCH_WORK);
  watchdog_set_status(status_now, NULL, BOOST_EXIT_UNSAVED, "");
}

void run_watch_step(ckpt_session *ck, const train_state *st) {
  watchdog_step(st->step + 1);
  arm_stuck(st->step + 1);
  if (st->step + 1 != rw.stop_at) return;
  ckpt_wait(ck); /* every rank: the checkpoint in flight commits first (the watchdog learns it on disk) */
  if (!rw.stop_me) return;
  boost_log_warn("rank %d stops itself at the start of step %lld (BOOST_TRAIN_TEST_STOP_AT)", rw.rank,
                 (long long)st->step + 1);
  raise(SIGSTOP);
}

void run_watch_trained(const train_state *st) { atomic_store(&rw.done, st->step); }

void run_watch_save_begin(int file_due) {
  if (file_due) {
    int64_t ino, mtime;
    latest_id(rw.dir, &ino, &mtime);
    atomic_store(&rw.staged, -1);
    atomic_store(&rw.latest_ino, ino);
    atomic_store(&rw.latest_mtime_ns, mtime);
  }
  watchdog_phase("a checkpoint step (staging, or waiting for the writer)", WATCH_CKPT);
}

void run_watch_save_end(const ckpt_session *ck, int64_t step, int file_due) {
  watchdog_phase("the training loop", WATCH_WORK);
  if (file_due && !ckpt_due(ck, step, 1)) atomic_store(&rw.staged, step);
  atomic_store(&rw.committed, ckpt_last_committed(ck));
}

void run_watch_end(const train_config *cfg, int status) {
  const int saved = status == BOOST_EXIT_PREEMPTED || (status == 0 && cfg->ckpt.dir[0]);
  watchdog_set_status(NULL, NULL, saved ? BOOST_EXIT_PREEMPTED : BOOST_EXIT_UNSAVED,
                      saved ? "the run ended with its final state committed"
                            : "the run ended without its final state committed");
}
