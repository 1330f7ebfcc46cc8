/* The local level's saves (ckpt_local.h): a step's parts written on the
 * local writer thread (or inline), committed when every rank agrees, its
 * outcome collected for the step line, and the optimizer's wait for the
 * arenas. */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_agree.h"
#include "ckpt_fs.h"
#include "ckpt_local.h"
#include "ckpt_local_internal.h"
#include "ckpt_local_partner.h"
#include "ckpt_local_store.h"
#include "ckpt_private.h"
#include "ckpt_test_hooks.h"
#include "log.h"
#include "util.h"

/* The job no longer reads the arenas: the optimizer may go on. */
static void arenas_released(ckpt_local *L) {
  pthread_mutex_lock(&L->saver.mu);
  L->saver.reading = 0;
  pthread_cond_broadcast(&L->saver.cv);
  pthread_mutex_unlock(&L->saver.mu);
}

/* Where a save is about to write (a step directory, committed or not):
 * what a save of this run cut short or an abandoned branch of it left
 * there is removed; another run's step is left alone and the save fails. */
static int clear_path(const ckpt_local *L, const char *path, boost_status *why) {
  if (ckpt_local_owner(path, L->run_id) == LOCAL_OTHER)
    return boost_err(why, "%s holds another run's step (or one this boost cannot read): left in place, this step is "
                     "not kept on the local level", path);
  ckpt_local_remove_tree(path);
  return 0;
}

/* This rank's parts of the job's step into its temporary directory. */
static int write_parts(ckpt_local *L, const char *tmp, boost_status *why) {
  static const unsigned char none[CKPT_RUN_ID_BYTES];
  if (!memcmp(L->run_id, none, sizeof none)) {
    arenas_released(L);
    return boost_err(why, "the run has no identity (ckpt_local_set_run): nothing is kept that no restart could use");
  }
  if (clear_path(L, tmp, why) != 0 || ckpt_private_mkdir(tmp, why) != 0) {
    arenas_released(L);
    return -1;
  }
  ckpt_local_manifest man;
  memset(&man, 0, sizeof man);
  memcpy(man.run_id, L->run_id, sizeof man.run_id);
  man.step = L->saver.job_step;
  man.shape = L->shape;
  char path[PATH_MAX];
  int rc = 0;
  for (int k = 0; k < LOCAL_STATE && rc == 0; k++) {
    boost_msgf(path, sizeof path, "%s/%s.bin", tmp, ckpt_local_part_names[k]);
    man.bytes[k] = part_bytes(L, k);
    rc = ckpt_local_write_part(path, L->store->be, part_arena(L, k), (size_t)man.bytes[k], L->bounce,
                               LOCAL_BOUNCE_BYTES, &man.sum[k], why);
  }
  arenas_released(L);
  if (rc != 0) return -1;
  boost_msgf(path, sizeof path, "%s/%s.bin", tmp, ckpt_local_part_names[LOCAL_STATE]);
  man.bytes[LOCAL_STATE] = L->saver.job_len;
  rc = ckpt_local_write_small(path, L->saver.job_blob, L->saver.job_len, &man.sum[LOCAL_STATE], why);
  if (rc != 0 || ckpt_local_write_manifest(tmp, &man, why) != 0) return -1;
  return ckpt_private_fsync_dir(tmp, why);
}

/* step_S.tmp renamed to step_S in dir (the same step of an abandoned
 * branch removed first), inside the checked folder. */
static int commit_step(const char *dir, const char *tmp, const char *fin, boost_status *why) {
  ckpt_local_remove_tree(fin);
  return ckpt_private_rename(dir, strrchr(tmp, '/') + 1, strrchr(fin, '/') + 1, why);
}

/* The commit protocol of the job's step (collective over the team): its
 * outcome into res_*. */
static void save_job(ckpt_local *L) {
  const double t0 = boost_now_s();
  const int64_t step = L->saver.job_step;
  char tmp[PATH_MAX];
  char fin[PATH_MAX];
  boost_status why = {0};
  boost_status out = {0};
  ckpt_local_step_path(tmp, sizeof tmp, L->mine, step, 1);
  ckpt_local_step_path(fin, sizeof fin, L->mine, step, 0);
  int ok = write_parts(L, tmp, &why) == 0;
  char held_tmp[PATH_MAX] = "", held_fin[PATH_MAX] = "";
  if (L->partner.on) { /* every rank takes part in the exchange, whatever it wrote */
    ckpt_local_step_path(held_tmp, sizeof held_tmp, L->partner.held_dir, step, 1);
    ckpt_local_step_path(held_fin, sizeof held_fin, L->partner.held_dir, step, 0);
    boost_status pwhy = {0};
    int pok = clear_path(L, held_tmp, &pwhy) == 0 && ckpt_private_mkdir(held_tmp, &pwhy) == 0;
    /* no directory: its files fail to open, it is dropped */
    const ckpt_partner_sink sink = {.dir = held_tmp, .want_step = step, .want_shape = &L->held_shape, .run_id = L->run_id};
    boost_status xwhy = {0};
    if (ckpt_partner_exchange(L->team.comm, ok ? tmp : NULL, L->partner.holder, &sink, L->partner.held, &xwhy) != 0 && pok)
      pok = 0, boost_err(&pwhy, "%s", xwhy.msg);
    if (ok && !pok) ok = 0, boost_err(&why, "partner copy: %s", pwhy.msg);
  }
  if (ckpt_agree(&L->team, ok, why.msg, &out)) {
    /* Every rank wrote its parts: rename. A rank that dies before the
     * second agreement leaves the previous step the newest that every rank
     * holds, which is why nothing older is removed before it. */
    ok = clear_path(L, fin, &why) == 0 && commit_step(L->mine, tmp, fin, &why) == 0; /* the same step of an abandoned branch */
    if (ok && L->partner.on)
      ok = clear_path(L, held_fin, &why) == 0 && commit_step(L->partner.held_dir, held_tmp, held_fin, &why) == 0;
    if (ckpt_agree(&L->team, ok, why.msg, &out)) {
      ckpt_local_remove_steps(L->mine, step, 0, L->run_id);
      if (L->partner.on) ckpt_local_remove_steps(L->partner.held_dir, step, 0, L->run_id);
      L->saver.res_ok = 1;
      L->saver.res_s = boost_now_s() - t0;
      return;
    }
  }
  if (ckpt_local_owner(tmp, L->run_id) != LOCAL_OTHER) ckpt_local_remove_tree(tmp);
  if (held_tmp[0] && ckpt_local_owner(held_tmp, L->run_id) != LOCAL_OTHER) ckpt_local_remove_tree(held_tmp);
  L->saver.res_ok = 0;
  L->saver.res_s = boost_now_s() - t0;
  boost_msgf(L->saver.res_why, sizeof L->saver.res_why, "%s", out.msg);
}

void *ckpt_local_writer_main(void *arg) {
  ckpt_local *L = arg;
  pthread_setname_np(pthread_self(), "ckpt-local");
  pthread_mutex_lock(&L->saver.mu);
  for (;;) {
    while (!L->saver.pending && !L->saver.quit) pthread_cond_wait(&L->saver.cv, &L->saver.mu);
    if (L->saver.quit) break;
    L->saver.pending = 0;
    pthread_mutex_unlock(&L->saver.mu);
    save_job(L);
    pthread_mutex_lock(&L->saver.mu);
    L->saver.busy = 0;
    L->saver.reading = 0;
    L->saver.unreported = 1;
    pthread_cond_broadcast(&L->saver.cv);
  }
  pthread_mutex_unlock(&L->saver.mu);
  return NULL;
}

/* Waits for the job in flight; its outcome (if not yet told) into
 * note->msg (NULL: not told) and, when it failed, one warning line on rank 0
 * (kernels/log.h: it is said when it happens). */
void ckpt_local_collect(ckpt_local *L, boost_status *note) {
  char *status = note ? note->msg : NULL;
  const size_t statuslen = note ? sizeof note->msg : 0;
  if (status) status[0] = 0;
  pthread_mutex_lock(&L->saver.mu);
  while (L->saver.busy) pthread_cond_wait(&L->saver.cv, &L->saver.mu);
  const int have = L->saver.unreported;
  L->saver.unreported = 0;
  pthread_mutex_unlock(&L->saver.mu);
  if (!have) return;
  free(L->saver.job_blob);
  L->saver.job_blob = NULL;
  L->last_s = L->saver.res_s;
  L->cost.step = L->saver.job_step;
  L->cost.last_stall_s = L->cost.stall_s;
  L->cost.stall_s = 0;
  if (L->saver.res_ok) {
    L->last_step = L->saver.job_step;
    boost_msgf(status, statuslen, "local step %lld %.1f ms", (long long)L->saver.job_step, L->saver.res_s * 1e3);
    return;
  }
  boost_msgf(status, statuslen, "local step %lld FAILED", (long long)L->saver.job_step);
  if (L->team.rank == 0) {
    boost_log_warn("local checkpoint of step %lld FAILED (training continues; %s): %s",
                   (long long)L->saver.job_step, L->last_step >= 0 ? "the previous local step stays the newest" : "no local step yet",
                   L->saver.res_why);
  }
}

/* ckpt_local_save without its clock. */
static int save_now(ckpt_local *L, const ckpt_meta *meta, const ckpt_state *state, boost_status *note) {
  boost_status before = {0};
  ckpt_local_collect(L, &before); /* the previous job (the optimizer step already waited for its reading) */
  L->saver.job_step = meta->run.step;
  L->handed = meta->run.step;
  ckpt_local_pack(meta, state, &L->saver.job_blob, &L->saver.job_len);
  pthread_mutex_lock(&L->saver.mu);
  L->saver.busy = L->saver.reading = 1;
  if (L->saver.async) {
    L->saver.pending = 1;
    pthread_cond_broadcast(&L->saver.cv);
  }
  pthread_mutex_unlock(&L->saver.mu);
  if (!L->saver.async) { /* the arenas in device memory: the copy and its commit here */
    save_job(L);
    pthread_mutex_lock(&L->saver.mu);
    L->saver.busy = L->saver.reading = 0;
    L->saver.unreported = 1;
    pthread_mutex_unlock(&L->saver.mu);
    ckpt_local_collect(L, note);
    if (L->last_step == meta->run.step) return 0;
    note->failed = 1; /* its message says so: "local step S FAILED" */
    return -1;
  }
  if (before.msg[0]) boost_msgf(note->msg, sizeof note->msg, "%s", before.msg);
  else boost_msgf(note->msg, sizeof note->msg, "local step %lld started", (long long)meta->run.step);
  return 0;
}

int ckpt_local_save(ckpt_local *L, const ckpt_meta *meta, const ckpt_state *state, boost_status *note) {
  const double t0 = boost_now_s();
  int rc = save_now(L, meta, state, note);
  const double dt = boost_now_s() - t0;
  /* an inline save was collected in the call (its cost is the call);
   * otherwise the job in flight's, told when it is collected */
  if (L->saver.async) L->cost.stall_s += dt;
  else L->cost.last_stall_s += dt;
  return rc;
}

void ckpt_local_before_update(ckpt_local *L) {
  if (!L) return;
  const double t0 = boost_now_s();
  pthread_mutex_lock(&L->saver.mu);
  const int waited = L->saver.reading;
  while (L->saver.reading) pthread_cond_wait(&L->saver.cv, &L->saver.mu);
  pthread_mutex_unlock(&L->saver.mu);
  if (waited) L->cost.stall_s += boost_now_s() - t0; /* the optimizer held back by the save in flight */
}

void ckpt_local_wait(ckpt_local *L, boost_status *note) {
  if (L) ckpt_local_collect(L, note);
  else note->msg[0] = 0;
}
