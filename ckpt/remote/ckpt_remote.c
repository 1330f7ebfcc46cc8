/* The remote level inside a checkpoint session: open, fetch at a start,
 * background uploads after commits, the wait at the end (ckpt_remote.h). */
#include "ckpt_remote.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "log.h"
#include "remote_level.h"
#include "util.h"

#define UPLOAD_THREADS 4 /* connections of an upload or a download */

struct ckpt_remote {
  ckpt_remote_settings set;
  s3_client *client; /* rank 0 only */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, stop, busy;
  int64_t pending;  /* step waiting for the thread (-1: none) */
  int64_t inflight; /* step the thread is sending (-1: none) */
  char pending_link[1100], pending_run[40];
  int64_t uploaded; /* newest step this run uploaded */
  int commits;      /* files committed since the start */
  char dir[1024];   /* ckpt.dir of a passed-over step */
  int said_behind;  /* the "uploads are slower" warning was given */
  int64_t handed;   /* newest step handed to the thread (-1: none) */
  int64_t skipped;  /* newest committed step ckpt.remote_every passed over (-1: none): uploaded at the end */
  char skipped_run[40];
  volatile int cancel; /* set when the grace is over: the upload in flight stops (s3_client_set_cancel) */
};

static void upload_one(ckpt_remote *r, const char *link, int64_t step, const char *run_id) {
  boost_status err = {0};
  double t0 = boost_now_s();
  int rc = remote_push(r->client, link, step, run_id, UPLOAD_THREADS, &err);
  double dt = boost_now_s() - t0;
  if (rc == 0 && remote_retain(r->client, r->set.keep, &err) != 0) {
    boost_log_warn("remote: step %lld uploaded, but retention failed: %s", (long long)step, err.msg);
    err.failed = 0;
  }
  FILE *f = rc == 0 ? fopen(link, "rb") : NULL;
  double mib = 0;
  if (f) fseeko(f, 0, SEEK_END), mib = (double)ftello(f) / 1048576.0, fclose(f);
  unlink(link);
  pthread_mutex_lock(&r->mu);
  if (rc == 0) r->uploaded = step;
  int64_t behind = r->uploaded;
  pthread_mutex_unlock(&r->mu);
  if (rc == 0)
    boost_log_info("checkpoint: remote step %lld uploaded to %s, %.1f MiB in %.2f s (%.1f MiB/s)", (long long)step,
                   r->set.url, mib, dt, dt > 0 ? mib / dt : 0.0);
  else if (!s3_client_cancelled(r->client)) /* a cancel at the end is said by ckpt_remote_close */
    boost_log_warn("remote: upload of step %lld FAILED (training continues; the remote level stays at %s%lld): %s",
                   (long long)step, behind >= 0 ? "step " : "", (long long)behind, err.msg);
}

static void *upload_thread(void *arg) {
  ckpt_remote *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->stop && r->pending < 0) pthread_cond_wait(&r->cv, &r->mu);
    if (r->pending < 0) break; /* stop, nothing left */
    int64_t step = r->pending;
    char link[sizeof r->pending_link], run[sizeof r->pending_run];
    memcpy(link, r->pending_link, sizeof link);
    memcpy(run, r->pending_run, sizeof run);
    r->pending = -1;
    r->busy = 1;
    r->inflight = step;
    pthread_mutex_unlock(&r->mu);
    upload_one(r, link, step, run);
    pthread_mutex_lock(&r->mu);
    r->busy = 0;
    pthread_cond_broadcast(&r->cv);
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
  if (!r) return boost_err(err, "out of memory for the remote level");
  r->set = *set;
  r->pending = r->uploaded = r->inflight = r->handed = r->skipped = -1;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  boost_status mine = {0};
  int ok = 1, orphans = 0;
  if (rank == 0) {
    s3_config cfg = {set->url, set->endpoint, set->region};
    remote_ckpt newest;
    int got = -1;
    ok = s3_client_open(&r->client, &cfg, &mine) == 0 && (got = remote_newest(r->client, &newest, &mine)) >= 0 &&
         remote_clean_orphans(r->client, &orphans, &mine) == 0;
    if (got == 1) {
      r->uploaded = newest.step; /* the remote level's step until this run uploads one */
      remote_ckpt_free(&newest);
    }
    if (ok) s3_client_set_cancel(r->client, &r->cancel);
    if (ok) ok = pthread_create(&r->thread, NULL, upload_thread, r) == 0 || boost_err(&mine, "cannot start the remote level's upload thread") == 0;
    r->started = ok;
    if (ok && orphans) boost_log_info("checkpoint: remote %s: %d unfinished upload%s of an earlier start aborted",
                                      set->url, orphans, orphans == 1 ? "" : "s");
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, world);
  if (!ok) {
    if (rank == 0) boost_status_take(err, &mine);
    else boost_err(err, "rank 0 could not reach the remote level %s", set->url);
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
  boost_status mine = {0};
  long long got_step = -1;
  int ok = 1;
  if (rank == 0) {
    remote_ckpt rc;
    int got = remote_newest(r->client, &rc, &mine);
    ok = got >= 0;
    if (got == 1 && rc.step > file_step) {
      char name[64], path[4200];
      ckpt_file_name(name, sizeof name, rc.step);
      snprintf(path, sizeof path, "%s/%s", dir, name);
      double t0 = boost_now_s();
      ok = remote_fetch(r->client, &rc, path, UPLOAD_THREADS, &mine) == 0 &&
           ckpt_fs_write_latest(dir, name, &mine) == 0;
      if (ok) {
        got_step = rc.step;
        double dt = boost_now_s() - t0, mib = (double)rc.size / 1048576.0;
        boost_log_info("checkpoint: remote step %lld is newer than %s's (%lld): downloaded %.1f MiB in %.2f s "
                       "(%.0f MiB/s), %d parts checked",
                       rc.step, dir, (long long)file_step, mib, dt, dt > 0 ? mib / dt : 0.0, rc.nparts);
      }
    }
    if (got == 1) remote_ckpt_free(&rc);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, world);
  MPI_Bcast(&got_step, 1, MPI_LONG_LONG, 0, world);
  if (!ok) {
    if (rank == 0) return boost_status_take(err, &mine);
    return boost_err(err, "rank 0 could not fetch the newest remote checkpoint of %s", r->set.url);
  }
  *fetched = got_step;
  return 0;
}

/* Hands the committed file of step to the upload thread. */
static void hand_over(ckpt_remote *r, const char *dir, int64_t step, const char *run_id) {
  char name[64], path[4200], hard[sizeof r->pending_link];
  ckpt_file_name(name, sizeof name, step);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(hard, sizeof hard, "%s/.remote-upload-%s", dir, name);
  unlink(hard);
  if (link(path, hard)) {
    boost_log_warn("remote: cannot link %s for its upload (%s): step %lld is not uploaded", path, strerror(errno),
                   (long long)step);
    return;
  }
  pthread_mutex_lock(&r->mu);
  if (r->pending >= 0) { /* the thread is still on an older one: the newest replaces the one waiting */
    if (!r->said_behind++)
      boost_log_warn("remote: step %lld replaces step %lld in the upload queue: uploads are slower than "
                     "checkpoints, only the newest waiting one is uploaded (said once)",
                     (long long)step, (long long)r->pending);
    unlink(r->pending_link);
  }
  r->pending = r->handed = step;
  memcpy(r->pending_link, hard, sizeof hard);
  snprintf(r->pending_run, sizeof r->pending_run, "%s", run_id ? run_id : "");
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

void ckpt_remote_committed(ckpt_remote *r, const char *dir, int64_t step, const char *run_id) {
  if (!r || !r->client) return;
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
    if (r->skipped > r->handed) hand_over(r, r->dir, r->skipped, r->skipped_run);
    pthread_mutex_lock(&r->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += r->set.grace_s;
    while ((r->busy || r->pending >= 0) &&
           pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT) {
    }
    const int done = !r->busy && r->pending < 0;
    const int64_t last = r->pending >= 0 ? r->pending : r->inflight, uploaded = r->uploaded, handed = r->handed;
    r->stop = 1;
    r->pending = -1; /* nothing more is started */
    if (!done) r->cancel = 1; /* the transfer in flight stops within about a second; the next start aborts it */
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (done && handed >= 0 && uploaded == handed) /* the newest committed file is in the store */
      boost_log_info("checkpoint: remote upload finished before exit (newest remote step %lld)", (long long)uploaded);
    if (!done) {
      char at[48] = "no checkpoint";
      if (uploaded >= 0) snprintf(at, sizeof at, "step %lld", (long long)uploaded);
      boost_log_warn("remote: the upload in flight did not finish within ckpt.remote_grace = %d s: the remote level "
                     "stays at %s (step %lld is in ckpt.dir)",
                     r->set.grace_s, at, (long long)last);
    }
    pthread_join(r->thread, NULL);
  }
  s3_client_close(r->client);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}
