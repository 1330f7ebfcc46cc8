/* The remote level inside a checkpoint session: open, fetch at a start,
 * background uploads after commits, the wait at the end (ckpt_remote.h). */
#include "ckpt_remote.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "log.h"
#include "remote_fetch_group.h"
#include "remote_group.h"
#include "remote_level.h"
#include "util.h"

#define UPLOAD_THREADS 4 /* connections of a download, and of each rank's share of an upload */

/* What the session hands the upload thread: the newest waiting step wins. */
typedef struct upload_queue {
  int64_t pending;  /* step waiting for the thread (-1: none) */
  int64_t inflight; /* step the thread is sending (-1: none) */
  int64_t handed;   /* newest step handed to the thread (-1: none) */
  char pending_link[1100], pending_run[40];
  int said_behind; /* the "uploads are slower" warning was given */
} upload_queue;

struct ckpt_remote {
  ckpt_remote_settings set;
  s3_client *client; /* each rank's: its share of every upload */
  MPI_Comm comm;     /* the upload threads' own duplicate of the world */
  int rank;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, stop, busy;
  upload_queue q;
  int64_t uploaded; /* newest step this run uploaded */
  int commits;      /* files committed since the start */
  char dir[1024];   /* ckpt.dir of a passed-over step */
  int64_t skipped;  /* newest committed step ckpt.remote_every passed over (-1: none): uploaded at the end */
  char skipped_run[40];
  int abandon;         /* the start failed: the threads leave without a word to each other */
  volatile int cancel; /* set when the grace is over: the upload in flight stops (s3_client_set_cancel) */
};

/* "(3 2)": the parts each of the first 8 ranks moved. */
static void parts_by_rank(const remote_group_result *res, char *out, size_t cap) {
  out[0] = 0;
  for (int i = 0, n = 0; i < res->ranks && i < 8 && n < (int)cap; i++)
    n += snprintf(out + n, cap - (size_t)n, "%s%d", i ? " " : "", res->by_rank[i]);
}

static void upload_one(ckpt_remote *r, const char *link, int64_t step, const char *run_id) {
  boost_status err = {0};
  double t0 = boost_now_s();
  remote_group_result res;
  int rc = remote_group_lead(r->client, r->comm, link, step, run_id, UPLOAD_THREADS, &res, &err);
  double dt = boost_now_s() - t0;
  if (rc == 0 && remote_retain(r->client, r->set.keep, &err) != 0) {
    boost_log_warn("remote: step %lld uploaded, but retention failed: %s", (long long)step, err.msg);
    err.failed = 0;
  }
  unlink(link);
  char by[96] = "";
  if (rc == 0) parts_by_rank(&res, by, sizeof by);
  pthread_mutex_lock(&r->mu);
  if (rc == 0) r->uploaded = step;
  int64_t behind = r->uploaded;
  pthread_mutex_unlock(&r->mu);
  if (rc == 0)
    boost_log_info("checkpoint: remote step %lld uploaded to %s, %.1f MiB in %.2f s (%.1f MiB/s), %d part%s sent by "
                   "%d rank%s (%s)", (long long)step, r->set.url, res.mib, dt, dt > 0 ? res.mib / dt : 0.0, res.nparts,
                   res.nparts == 1 ? "" : "s", res.ranks, res.ranks == 1 ? "" : "s", by);
  else if (!s3_client_cancelled(r->client)) /* a cancel at the end is said by ckpt_remote_close */
    boost_log_warn("remote: upload of step %lld FAILED (training continues; the remote level stays at %s%lld): %s",
                   (long long)step, behind >= 0 ? "step " : "", (long long)behind, err.msg);
}

/* Ranks but 0: after rank 0's upload of step done, a pending step newer
 * than it stays for the next round; older ones are done with. */
static void after_follow(ckpt_remote *r, int64_t mine, int64_t done) {
  if (r->q.pending < 0 && mine > done) r->q.pending = mine;
  if (r->q.pending >= 0 && r->q.pending <= done) r->q.pending = -1;
}

/* Each rank's upload thread. Rank 0 decides which committed step goes up
 * (the newest waiting one) and when to stop; the others join each upload
 * it starts, whatever step they picked themselves. Every step rank 0 is
 * handed gets a round, one it could not link too (a round with nothing to
 * send), so the others never wait for a round that does not come. Their
 * waits on each other are on r->comm, in these threads only. */
static void *upload_thread(void *arg) {
  ckpt_remote *r = arg;
  prctl(PR_SET_NAME, "boost-upload"); /* named in ps and /proc (tests/mpi/remote_link_fault.sh looks for it) */
  /* Below training, like the checkpoint writer (nice 10, per thread on
   * Linux; the transfer threads it starts inherit it): on a node short of
   * cores an upload takes what training leaves (bench/bench_remote_stall.sh). */
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->stop && r->q.pending < 0) pthread_cond_wait(&r->cv, &r->mu);
    if (r->abandon) break;
    if (r->rank == 0 && r->q.pending < 0) { /* stop, nothing left: the others leave too */
      pthread_mutex_unlock(&r->mu);
      remote_group_stop(r->comm);
      pthread_mutex_lock(&r->mu);
      break;
    }
    int64_t step = r->q.pending;
    char link[sizeof r->q.pending_link], run[sizeof r->q.pending_run];
    memcpy(link, r->q.pending_link, sizeof link);
    memcpy(run, r->q.pending_run, sizeof run);
    r->q.pending = -1;
    r->busy = 1;
    r->q.inflight = step;
    pthread_mutex_unlock(&r->mu);
    long long done = -1;
    int leave = 0;
    if (r->rank == 0 && link[0]) upload_one(r, link, step, run);
    else if (r->rank == 0) remote_group_pass(r->comm, step); /* not linked: the others' round ends at once */
    else leave = remote_group_follow(r->client, r->comm, UPLOAD_THREADS, &done);
    pthread_mutex_lock(&r->mu);
    if (r->rank != 0) after_follow(r, step, done);
    r->busy = 0;
    pthread_cond_broadcast(&r->cv);
    if (leave) break;
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* Links left in dir by a run killed while uploading (rank 0). */
static void drop_stale_links(const char *dir) {
  DIR *d = dir && dir[0] ? opendir(dir) : NULL;
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, ".remote-upload-", 15) != 0) continue;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
}

int ckpt_remote_open(ckpt_remote **out, const ckpt_remote_settings *set, const char *dir, MPI_Comm world,
                     boost_status *err) {
  *out = NULL;
  if (!set->url[0]) return 0;
  int rank;
  MPI_Comm_rank(world, &rank);
  ckpt_remote *r = calloc(1, sizeof *r);
  int ok = r != NULL, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
  if (!all) {
    free(r);
    return boost_err(err, "out of memory for the remote level");
  }
  r->set = *set;
  r->rank = rank;
  r->comm = MPI_COMM_NULL;
  r->q.pending = r->uploaded = r->q.inflight = r->q.handed = r->skipped = -1;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  boost_status mine = {0};
  int orphans = 0;
  s3_config cfg = {set->url, set->endpoint, set->region};
  ok = s3_client_open(&r->client, &cfg, &mine) == 0;
  if (ok && rank == 0) {
    remote_ckpt newest;
    int got = -1;
    ok = (got = remote_newest(r->client, &newest, &mine)) >= 0 && remote_clean_orphans(r->client, &orphans, &mine) == 0;
    if (got == 1) {
      r->uploaded = newest.step; /* the remote level's step until this run uploads one */
      remote_ckpt_free(&newest);
    }
  }
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
  if (all) {
    MPI_Comm_dup(world, &r->comm); /* the upload threads' own: training never waits on it */
    s3_client_set_cancel(r->client, &r->cancel);
    ok = pthread_create(&r->thread, NULL, upload_thread, r) == 0 ||
         boost_err(&mine, "cannot start the remote level's upload thread") == 0;
    r->started = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
  }
  if (all && rank == 0 && orphans)
    boost_log_info("checkpoint: remote %s: %d unfinished upload%s of an earlier start aborted", set->url, orphans,
                   orphans == 1 ? "" : "s");
  if (!all) {
    if (!ok) boost_status_take(err, &mine);
    else boost_err(err, "another rank could not reach the remote level %s", set->url);
    r->abandon = 1;
    ckpt_remote_close(r);
    return -1;
  }
  if (rank == 0) drop_stale_links(dir);
  *out = r;
  return 0;
}


int ckpt_remote_fetch(ckpt_remote *r, MPI_Comm world, const char *dir, int64_t file_step, int64_t *fetched,
                      boost_status *err) {
  *fetched = -1;
  if (!r) return 0;
  int rank;
  MPI_Comm_rank(world, &rank);
  remote_ckpt rc = {0};
  long long said[2] = {0, -1}; /* rank 0's word: -1 the store could not be read, 0 nothing newer, 1 fetch; the step */
  if (rank == 0) {
    const int got = remote_newest(r->client, &rc, err);
    said[0] = got < 0 ? -1 : got == 1 && rc.step > file_step;
    said[1] = rc.step;
  }
  MPI_Bcast(said, 2, MPI_LONG_LONG, 0, world);
  const int state = (int)said[0];
  const long long step = said[1];
  if (state <= 0) {
    remote_ckpt_free(&rc);
    if (state == 0) return 0;
    return rank == 0 ? -1 : boost_err(err, "rank 0 could not read the newest remote checkpoint of %s", r->set.url);
  }
  /* Every rank fetches its share into ckpt.dir, shared by the ranks (remote_fetch_group.h). */
  char name[64], path[4200];
  ckpt_file_name(name, sizeof name, step);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const double t0 = boost_now_s();
  remote_group_result res;
  const int mine = remote_fetch_group(r->client, world, rank == 0 ? &rc : NULL, rank == 0 ? path : NULL,
                                      UPLOAD_THREADS, &res, err) == 0;
  int ok = mine; /* the ranks agree on the download; rank 0 alone writes the latest pointer */
  if (ok && rank == 0 && ckpt_fs_write_latest(dir, name, err)) {
    remove(path); /* nothing in ckpt.dir is changed by a start that fails */
    ok = 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, world);
  if (ok && rank == 0) {
    const double dt = boost_now_s() - t0;
    char by[96];
    parts_by_rank(&res, by, sizeof by);
    boost_log_info("checkpoint: remote step %lld is newer than %s's (%lld): downloaded %.1f MiB in %.2f s "
                   "(%.0f MiB/s), %d part%s checked, fetched by %d rank%s (%s)",
                   step, dir, (long long)file_step, res.mib, dt, dt > 0 ? res.mib / dt : 0.0, res.nparts,
                   res.nparts == 1 ? "" : "s", res.ranks,
                   res.ranks == 1 ? "" : "s", by);
  }
  remote_ckpt_free(&rc);
  if (!mine) return -1;
  if (!ok) return rank == 0 ? -1 : boost_err(err, "rank 0 could not point %s's latest at the downloaded %s", dir, name);
  *fetched = step;
  return 0;
}

/* Hands the committed file of step to the upload thread. */
static void hand_over(ckpt_remote *r, const char *dir, int64_t step, const char *run_id) {
  char name[64], path[4200], hard[sizeof r->q.pending_link];
  ckpt_file_name(name, sizeof name, step);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(hard, sizeof hard, "%s/.remote-upload-%s", dir, name);
  if (r->rank != 0) { /* the others send from rank 0's link, whose name rank 0 tells them */
    pthread_mutex_lock(&r->mu);
    r->q.pending = r->q.handed = step;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return;
  }
  unlink(hard);
  if (link(path, hard)) {
    /* Still handed over, with no link: the other ranks marked the step
     * pending and their threads wait in remote_group_follow for rank 0's
     * word on it. The thread tells them at once that it is not uploaded
     * (remote_group_pass); like any newer step, it replaces the one waiting. */
    boost_log_warn("remote: cannot link %s for its upload (%s): step %lld is not uploaded", path, strerror(errno),
                   (long long)step);
    hard[0] = '\0';
  }
  pthread_mutex_lock(&r->mu);
  if (r->q.pending >= 0) { /* the thread is still on an older one: the newest replaces the one waiting */
    if (!r->q.said_behind++)
      boost_log_warn("remote: step %lld replaces step %lld in the upload queue: uploads are slower than "
                     "checkpoints, only the newest waiting one is uploaded (said once)",
                     (long long)step, (long long)r->q.pending);
    if (r->q.pending_link[0]) unlink(r->q.pending_link);
  }
  r->q.pending = r->q.handed = step;
  memcpy(r->q.pending_link, hard, sizeof hard);
  snprintf(r->q.pending_run, sizeof r->q.pending_run, "%s", run_id ? run_id : "");
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

void ckpt_remote_committed(ckpt_remote *r, const char *dir, int64_t step, const char *run_id) {
  if (!r || !r->started) return;
  r->commits++;
  if (r->set.every > 1 && r->commits % r->set.every != 0) {
    /* Passed over; should the run end here, ckpt_remote_close uploads it after all. */
    r->skipped = step;
    snprintf(r->skipped_run, sizeof r->skipped_run, "%s", run_id ? run_id : "");
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    return;
  }
  r->skipped = -1;
  hand_over(r, dir, step, run_id);
}

int64_t ckpt_remote_uploaded(const ckpt_remote *r) { return r ? r->uploaded : -1; }

void ckpt_remote_close(ckpt_remote *r) {
  if (!r) return;
  if (r->started) {
    /* The run's last checkpoint goes up whatever ckpt.remote_every says:
     * it is what a relaunch elsewhere resumes from. */
    if (r->skipped > r->q.handed) hand_over(r, r->dir, r->skipped, r->skipped_run);
    pthread_mutex_lock(&r->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += r->set.grace_s;
    while ((r->busy || r->q.pending >= 0) &&
           pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT) {
    }
    const int done = !r->busy && r->q.pending < 0;
    const int64_t last = r->q.pending >= 0 ? r->q.pending : r->q.inflight, uploaded = r->uploaded, handed = r->q.handed;
    r->stop = 1;
    r->q.pending = -1; /* nothing more is started */
    if (!done) r->cancel = 1; /* the transfer in flight stops within about a second; the next start aborts it */
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    char at[48] = "no checkpoint"; /* where the remote level stays */
    if (uploaded >= 0) snprintf(at, sizeof at, "step %lld", (long long)uploaded);
    if (r->rank == 0 && done && handed >= 0 && uploaded == handed) /* the newest committed file is in the store */
      boost_log_info("checkpoint: remote upload finished before exit (newest remote step %lld)", (long long)uploaded);
    else if (r->rank == 0 && done && handed >= 0) /* its upload failed, or it could not be linked: said above */
      boost_log_warn("remote: step %lld, the newest handed to the remote level, is not in the store at exit (see "
                     "above): the remote level stays at %s", (long long)handed, at);
    if (r->rank == 0 && !done)
      boost_log_warn("remote: the upload in flight did not finish within ckpt.remote_grace = %d s: the remote level "
                     "stays at %s (step %lld is in ckpt.dir)",
                     r->set.grace_s, at, (long long)last);
    pthread_join(r->thread, NULL);
  }
  if (r->comm != MPI_COMM_NULL) MPI_Comm_free(&r->comm);
  s3_client_close(r->client);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}
