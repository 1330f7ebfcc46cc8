/* Checkpoint session: the calls of ckpt.h on the training thread. It
 * assembles the parts -- the immutable plan (ckpt_plan.h, made by
 * ckpt_table.h), the stager (ckpt_stage.h), the writer thread and its job
 * queue (ckpt_worker.h), the writer (ckpt_save.h) and the reader
 * (ckpt_read.h) -- hands them jobs and reports what comes back. */
#include "ckpt.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_agree.h"
#include "ckpt_fs.h"
#include "ckpt_journal.h"
#include "ckpt_local.h"
#include "ckpt_read.h"
#include "ckpt_rollback.h"
#include "ckpt_run_id.h"
#include "ckpt_save.h"
#include "ckpt_stage.h"
#include "ckpt_table.h"
#include "ckpt_test_hooks.h"
#include "ckpt_worker.h"
#include "ckpt_write.h"
#include "log.h"
#include "util.h"
#include "watchdog.h"

#include "ckpt_session_internal.h"

/* ---- the writer thread's jobs ---------------------------------------------- */

static void run_job(void *ctx, ckpt_job_kind kind) {
  ckpt_session *s = ctx;
  if (kind == CKPT_JOB_SAVE) ckpt_do_save(&s->writer);
  else ckpt_do_load(&s->reader);
}

/* The checkpoint job's deadline, watched by the collective watchdog's
 * thread (trainer/parallel/watchdog.h): an error inside a collective HDF5/MPI-IO
 * call on one rank (a full disk under MPI-IO, an I/O error) can leave the
 * other ranks waiting in that collective for ever, and HDF5 cannot recover
 * from it. When a job has run longer than ckpt.timeout, the job is ended
 * with one line, so the batch system can restart it from the previous
 * checkpoint instead of holding the allocation until its time limit.
 * Returns the exit status then, else 0; the line carries the program's
 * prefix (kernels/log.h), as its warnings do. */
static int job_overdue(void *arg, boost_status *line) {
  ckpt_session *s = arg;
  pthread_mutex_lock(&s->worker.mu);
  const double started = s->worker.job_started;
  int status = 0;
  if (!s->worker.quit && started > 0 && boost_now_s() - started > s->cfg.timeout) {
    const int load = s->worker.running == CKPT_JOB_LOAD; /* at start: nothing trained, nothing to lose */
    status = load ? s->cfg.load_abort_status : s->cfg.abort_status;
    if (load)
      boost_msgf(line->msg, sizeof line->msg,
                 "%s: checkpoint watchdog on rank %d: the checkpoint load has run %.0f s, longer than "
                 "ckpt.timeout=%d s; the job is aborted (exit %d) before training: nothing was trained, the "
                 "checkpoints are untouched",
                 boost_log_name(), s->team.rank, boost_now_s() - started, s->cfg.timeout, status);
    else
      boost_msgf(line->msg, sizeof line->msg,
                 "%s: checkpoint watchdog on rank %d: the checkpoint job of step %lld has run %.0f s, longer than "
                 "ckpt.timeout=%d s; a failure inside a collective HDF5/MPI-IO call cannot be recovered, so the job "
                 "is aborted (exit %d); the newest committed checkpoint (step %lld) is intact",
                 boost_log_name(), s->team.rank, (long long)s->worker.job_step, boost_now_s() - started, s->cfg.timeout, status,
                 (long long)s->out.last_committed_step);
  }
  pthread_mutex_unlock(&s->worker.mu);
  return status;
}

/* ---- session (training thread) -------------------------------------------- */

/* The production switches of the environment; the test switches are
 * ckpt_test_hooks.h's. */
static void read_env(ckpt_env *set) {
  set->sync_mode = ckpt_env_int("BOOST_CKPT_SYNC", 0) != 0;
  /* Below training by default: on a CPU node whose cores train, the writer
   * then fills the gaps instead of stretching every step (PERFORMANCE.md). */
  set->writer_nice = (int)ckpt_env_int("BOOST_CKPT_WRITER_NICE", 10);
  set->direct_write = ckpt_env_int("BOOST_CKPT_DIRECT", 1) != 0;
  ckpt_test_hooks_from_env();
}

/* Rank 0 prepares the directory; every rank gets the verdict, and must see
 * the directory (MPI-IO needs a shared file system). */
static int open_dir(ckpt_session *s, boost_status *err) {
  const process_grid *grid = s->grid;
  boost_status msg = {0};
  int ok = 1;
  if (s->team.rank == 0) {
    boost_status why = {0};
    if (ckpt_fs_mkdirs(s->cfg.dir, &why) != 0) {
      boost_err(&msg, "ckpt.dir: %s", why.msg);
      ok = 0;
    } else if ((s->lock_fd = ckpt_fs_lock(s->cfg.dir, &msg)) < 0) {
      ok = 0;
    } else { /* ours alone now: temporaries here are a crashed run's, not a live job's */
      char removed[400];
      int nrem = ckpt_fs_clean_temporaries(s->cfg.dir, removed, sizeof removed);
      if (nrem > 0)
        boost_msgf(s->open_note, sizeof s->open_note, "removed %d temporar%s left by an interrupted run (%s)", nrem,
                   nrem == 1 ? "y" : "ies", removed);
      char done[400], *end = s->open_note + strlen(s->open_note); /* a set-aside a crash cut: finished first */
      if (ckpt_set_aside_recover(s->cfg.dir, done, sizeof done, &msg) < 0) ok = 0;
      else if (done[0]) boost_msgf(end, sizeof s->open_note - (size_t)(end - s->open_note), "%s%s", nrem > 0 ? "; " : "", done);
    }
  }
  comm_control_bcast(grid->world, COMM_WORLD, "checkpoint agreement", &ok, (int)sizeof ok, 0);
  comm_control_bcast(grid->world, COMM_WORLD, "checkpoint agreement", &msg, (int)sizeof msg, 0);
  if (!ok) return boost_err(err, "%s", msg.msg);
  struct stat st;
  ok = stat(s->cfg.dir, &st) == 0 && S_ISDIR(st.st_mode);
  ok = comm_control_all(grid->world, COMM_WORLD, "checkpoint agreement", ok);
  if (!ok)
    return boost_err(err, "ckpt.dir %s is not visible on every rank (checkpoints need a shared file system)",
                     s->cfg.dir);
  return 0;
}

/* Rank 0, at start: whether the disk can hold the checkpoints retention
 * keeps plus the one being written (a warning, not an error: files may be
 * moved away while the run goes on). */
static void warn_disk_space(ckpt_session *s) {
  struct statvfs vfs;
  if (s->team.rank != 0 || s->read_only || statvfs(s->cfg.dir, &vfs) != 0) return;
  double held = 0; /* existing checkpoints free their space as retention removes them */
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(s->cfg.dir, &steps, &n, NULL) == 0)
    for (int i = 0; i < n; i++) {
      char name[64], path[PATH_MAX + 64];
      struct stat st;
      ckpt_file_name(name, sizeof name, steps[i]);
      boost_msgf(path, sizeof path, "%s/%s", s->cfg.dir, name);
      if (stat(path, &st) == 0) held += (double)st.st_size;
    }
  free(steps);
  const double each = ckpt_raw_bytes(&s->plan, NULL) / 1.1; /* shuffle + zstd: 1.1-1.3x on weights and moments */
  const double need = each * (s->cfg.keep_last + 1), have = (double)vfs.f_bavail * (double)vfs.f_frsize + held;
  if (have >= need) return;
  char e[32], h[32], w[32];
  ckpt_format_bytes(each, e, sizeof e);
  ckpt_format_bytes(have, h, sizeof h);
  ckpt_format_bytes(need, w, sizeof w);
  boost_log_warn("warning: ckpt.dir %s has room for %s of checkpoints, but ckpt.keep_last=%d checkpoints of ~%s each "
                 "plus the one being written need ~%s: later checkpoints will fail on a full disk (free space, or "
                 "lower ckpt.keep_last)",
                 s->cfg.dir, h, s->cfg.keep_last, e, w);
}

/* What ckpt_open made, undone (the worker stopped first). */
static void free_parts(ckpt_session *s) {
  ckpt_remote_close(s->remote); /* remote level: waits up to ckpt.remote_grace for the upload in flight */
  ckpt_local_close(s->local);
  ckpt_fs_unlock(s->lock_fd);
  ckpt_stager_free(&s->stager);
  ckpt_file_plan_free(&s->plan);
  ckpt_writer_free(&s->writer);
  ckpt_reader_free(&s->reader);
  free(s);
}

int ckpt_open(const ckpt_settings *cfg, const process_grid *grid, tensor_store *store, ckpt_session **out,
              boost_status *err) {
  *out = NULL;
  if (!cfg->dir[0] && cfg->resume.kind != CKPT_FROM_PATH) return 0;
  for (int c = 0; c < CKPT_NUM_CATEGORIES; c++)
    BOOST_ASSERT(store->arena[ckpt_category_arena[c]] != NULL); /* the caller allocates the moments */
  ckpt_session *s = boost_calloc(1, sizeof *s);
  s->cfg = *cfg;
  ckpt_meta_init(&s->catch_up.meta);
  if (!s->cfg.abort_status) s->cfg.abort_status = 1; /* never a success status for an aborted job */
  if (!s->cfg.load_abort_status) s->cfg.load_abort_status = s->cfg.abort_status;
  s->grid = grid;
  s->store = store;
  s->team.rank = grid->rank;
  s->team.size = grid->world_size;
  read_env(&s->set);
  s->out.last_staged_step = -1;
  s->out.last_committed_step = -1;
  s->start.remote_step = -1;
  s->read_only = !cfg->dir[0]; /* resume from a PATH, write nothing */
  s->lock_fd = -1;
  int bad = (!s->read_only && open_dir(s, err) != 0) || ckpt_file_plan_build(&s->plan, grid, store->reg, err) != 0;
  if (!bad) { /* every rank has its staging memory, or none goes on */
    boost_status why = {0};
    const int ok = comm_control_all(grid->world, COMM_WORLD, "checkpoint agreement",
                                    ckpt_stager_init(&s->stager, &s->plan, store, grid, &s->cfg, &s->worker, &why) == 0);
    if (!ok)
      bad = boost_err(err, "%s",
                      why.msg[0] ? why.msg
                             : "another rank cannot have its checkpoint staging (host memory, or ckpt.staging_limit "
                               "below its largest tensor band)");
  }
  if (!bad && !s->read_only) {
    char note[512];
    bad = ckpt_local_open(cfg, grid, store, note, sizeof note, &s->local, err) != 0;
    if (s->local && s->team.rank == 0) boost_log_info("checkpoint: %s", note);
  }
  if (!bad && !s->read_only) /* remote level: a store it cannot reach refuses the start */
    bad = ckpt_remote_open(&s->remote, &cfg->remote, cfg->dir, grid->world, err) != 0;
  if (bad) {
    free_parts(s);
    return -1;
  }
  warn_disk_space(s);
  if (ckpt_stager_bounded(&s->stager) && s->team.rank == 0 && !s->read_only) {
    char ring[32], all[32];
    ckpt_format_bytes(4.0 * (double)s->stager.ring.floats, ring, sizeof ring);
    ckpt_format_bytes(4.0 * (double)s->plan.save_floats, all, sizeof all);
    boost_log_info("checkpoint: staging in a ring of %s for the %s rank 0 writes (ckpt.staging_limit; %.0f%%)", ring,
                   all, 100.0 * (double)s->stager.ring.floats / (double)s->plan.save_floats);
  }
  MPI_Comm_dup(grid->world, &s->team.comm);
  MPI_Comm_dup(grid->dp_comm, &s->dp_comm);
  ckpt_stager_connect(&s->stager, s->team.comm, s->dp_comm);
  const ckpt_job_parts parts = {&s->cfg, &s->plan, &s->stager, &s->team, &s->worker};
  s->writer = (ckpt_writer){.parts = parts, .dx = ckpt_direct_new(), .direct_write = s->set.direct_write};
  s->reader = (ckpt_reader){.parts = parts};
  if (s->team.rank == 0 && !s->read_only) {
    char p[PATH_MAX];
    boost_msgf(p, sizeof p, "%s/checkpoints.jsonl", s->cfg.dir);
    s->log = fopen(p, "a");
  }
  /* Every rank must have its writer, or the first collective write hangs. */
  int started = ckpt_worker_start(&s->worker, run_job, s, s->set.writer_nice, s->set.sync_mode, s->cfg.threads) == 0;
  if (started && s->cfg.timeout > 0) watchdog_deadline(job_overdue, s);
  if (!ckpt_all_true(&s->team, started)) {
    ckpt_close(s);
    return boost_err(err, "cannot start the checkpoint writer thread on every rank");
  }
  *out = s;
  return 0;
}

static void drop_catch_up(ckpt_session *s) {
  s->catch_up.pending = 0;
  ckpt_meta_free(&s->catch_up.meta);
  ckpt_state_free(&s->catch_up.state);
}

ckpt_fence ckpt_fence_start(ckpt_session *s) { return (ckpt_fence){s, -1}; }

void ckpt_fence_wait_all(ckpt_fence f) {
  ckpt_session *s = f.s;
  if (!s) return;
  ckpt_local_before_update(s->local);
  ckpt_worker_wait_staged(&s->worker, INT_MAX);
}

int ckpt_staging_bounded(const ckpt_session *s) { return s && ckpt_stager_bounded(&s->stager); }

void ckpt_fence_wait(ckpt_fence f, int t0, int t1) {
  ckpt_session *s = f.s;
  if (!s) return;
  ckpt_local_before_update(s->local);
  int need = 0;
  for (int t = t0; t < t1 && t < s->plan.ntensors; t++)
    if (s->plan.tensor_need[t] > need) need = s->plan.tensor_need[t];
  ckpt_worker_wait_staged(&s->worker, ckpt_stager_bounded(&s->stager) ? need : INT_MAX);
}

/* Takes the finished result (if not yet reported): status text, log lines. */
static void collect(ckpt_session *s, char *out, size_t outlen, int print) {
  if (out && outlen) out[0] = 0;
  pthread_mutex_lock(&s->worker.mu);
  int have = !s->worker.busy && s->worker.unreported;
  save_result r;
  if (have) {
    s->writer.res.update_wait_s = s->worker.update_wait;
    s->writer.res.stall_s += s->worker.update_wait;
    r = s->writer.res;
    s->worker.unreported = 0;
  }
  pthread_mutex_unlock(&s->worker.mu);
  if (!have) return;
  s->out.last_ok = r.ok;
  s->out.last_done = r;
  if (r.ok) s->out.last_committed_step = r.step;
  if (r.ok) /* remote level: uploaded in the background, each rank sending its share */
    ckpt_remote_committed(s->remote, s->cfg.dir, r.step, s->start.run_id);
  double tr = 0, ts = 0;
  for (int k = 0; k < SIZE_NUM_CLASSES; k++) tr += r.raw[k], ts += r.stored[k];
  char b[32];
  ckpt_format_bytes(r.file_bytes, b, sizeof b);
  if (r.ok && out)
    boost_msgf(out, outlen, "step %lld committed %.2f s %s %.2fx stall %.0f ms", (long long)r.step, r.write_s, b,
             ts > 0 ? tr / ts : 0.0, r.stall_s * 1e3);
  else if (out)
    boost_msgf(out, outlen, "step %lld FAILED: %s", (long long)r.step, r.reason.msg);
  if (s->team.rank == 0) {
    if (s->log) ckpt_journal_result(s->log, &r, s->grid, s->set.sync_mode);
    if (!r.ok) {
      char latest[64] = "no checkpoint committed yet";
      if (s->out.last_committed_step >= 0)
        boost_msgf(latest, sizeof latest, "step %lld remains the latest", (long long)s->out.last_committed_step);
      /* one write: a line cut by the step log would be unreadable */
      boost_log_warn("checkpoint of step %lld FAILED, nothing committed (training continues; %s): %s", (long long)r.step,
                     latest, r.reason.msg);
    } else if (r.ok && !r.latest_ok) {
      boost_log_warn("checkpoint of step %lld committed but the `latest` pointer was not updated", (long long)r.step);
    }
    if (r.ok && strstr(r.retention, "superseded")) { /* never moved aside without a word */
      boost_log_info("checkpoint: newer checkpoints of an abandoned run set aside after step %lld: %s", (long long)r.step,
                     r.retention);
    }
    if (print && out && out[0]) boost_log_info("checkpoint: %s", out);
  }
}

int ckpt_writes(const ckpt_session *s) { return s && !s->read_only; }

int ckpt_due_local(const ckpt_session *s, int64_t step, int force) {
  return s && ckpt_local_due(s->local, step, (force & CKPT_DUE_LOCAL) != 0);
}

int64_t ckpt_local_cost(const ckpt_session *s, double *stall_s) {
  return s ? ckpt_local_last_stall(s->local, stall_s) : -1;
}

int ckpt_due(const ckpt_session *s, int64_t step, int force) {
  if (!ckpt_writes(s) || step == s->out.last_staged_step) return 0;
  return (force & CKPT_DUE_FILE) || s->catch_up.pending || (s->cfg.every > 0 && step % s->cfg.every == 0);
}

/* The job's metadata, state datasets and activations, copied (taken) at
 * the step boundary, and (unless deferred) the tensors. Without memory for
 * the copies the checkpoint fails (j->oom), training goes on. */
static void stage_job(ckpt_session *s, const ckpt_save_request *req) {
  save_job *j = &s->writer.job;
  j->step = req->meta->run.step;
  ckpt_meta_free(&j->meta);
  int ok = ckpt_meta_copy(&j->meta, req->meta) == 0;
  ok = ckpt_state_copy(&j->state, req->state) == 0 && ok;
  j->oom = !ok;
  ckpt_acts_reset(&j->acts);
  if (s->cfg.activations && req->acts) {
    ckpt_acts_take(&j->acts, req->acts);
    ckpt_acts_union(&j->acts, s->grid->pp_comm);
  } else if (req->acts) {
    ckpt_acts_reset(req->acts);
  }
  /* A bounded ring is always filled by the writer, from the state of this
   * mark(): a caller that does not wait on the fence waits for it in
   * ckpt_submit. */
  j->deferred = (req->fenced && !s->set.sync_mode) || ckpt_stager_bounded(&s->stager);
  if (j->deferred) {
    s->store->be->mem->mark(s->store->be); /* the writer copies this state on the copy stream */
  } else {
    ckpt_copy_to_stage(&s->stager, 0);
    ckpt_stage_moments(&s->stager); /* ZeRO-1: from the chunk owners (collective over dp) */
  }
}

ckpt_fence ckpt_submit(ckpt_session *s, const ckpt_save_request *req, boost_status *note) {
  char *status = note->msg;
  const size_t statuslen = sizeof note->msg;
  boost_msgf(status, statuslen, "-");
  ckpt_fence fence = {s, -1};
  if (!s) return fence;
  s->out.fenced = req->fenced;
  const ckpt_meta *meta = req->meta;
  int force = req->force;
  char done[REASON_MAX + 128] = "", waited[96] = "";
  boost_status local = {0};
  collect(s, done, sizeof done, 0);
  const int local_asked = (force & CKPT_DUE_LOCAL) != 0;
  if (s->catch_up.pending) { /* the first step after a start from the local level: the file level catches up */
    force = CKPT_DUE_FILE;
    drop_catch_up(s);
  }
  if (ckpt_local_due(s->local, meta->run.step, local_asked)) {
    ckpt_local_save(s->local, meta, req->state, &local); /* a failure is in its text and its warning line */
    fence.step = meta->run.step;
  }
  if (!ckpt_due(s, meta->run.step, force)) {
    if (req->acts) ckpt_acts_reset(req->acts); /* left empty, as a taken set is */
    if (done[0] || local.msg[0])
      boost_msgf(status, statuslen, "%s%s%s", local.msg, local.msg[0] && done[0] ? " | " : "", done);
    return fence;
  }
  double wait_prev = 0.0;
  if (ckpt_worker_busy(&s->worker)) {
    wait_prev = ckpt_worker_wait_idle(&s->worker);
    char d2[sizeof done];
    collect(s, d2, sizeof d2, 0);
    if (d2[0]) boost_msgf(done, sizeof done, "%s", d2);
    boost_msgf(waited, sizeof waited, "waited %.2f s; ", wait_prev);
  }
  const double t1 = boost_now_s() - req->build_s; /* the stall counts the request's making too */
  stage_job(s, req);
  s->writer.job.wait_prev_s = wait_prev;
  s->out.attempted = 1;
  s->out.last_staged_step = meta->run.step;
  fence.step = meta->run.step;
  const int must_wait = ckpt_stager_bounded(&s->stager) && !(req->fenced && !s->set.sync_mode);
  s->writer.job.stall_s = boost_now_s() - t1;
  ckpt_worker_submit(&s->worker, CKPT_JOB_SAVE, meta->run.step, !s->writer.job.deferred);
  if (must_wait) ckpt_worker_wait_staged(&s->worker, INT_MAX); /* no caller's wait before its update: the arenas are read until then */
  const double stall = boost_now_s() - t1;
  char now_txt[96] = "";
  if (s->set.sync_mode) { /* the baseline: training blocks for the whole save */
    ckpt_worker_wait_idle(&s->worker);
    pthread_mutex_lock(&s->worker.mu);
    s->writer.res.stall_s = boost_now_s() - t1;
    pthread_mutex_unlock(&s->worker.mu);
    collect(s, done, sizeof done, 0);
  } else {
    boost_msgf(now_txt, sizeof now_txt, "step %lld staged, stall %.0f ms", (long long)meta->run.step, stall * 1e3);
  }
  boost_msgf(status, statuslen, "%s%s%s%s%s%s", local.msg, local.msg[0] ? " | " : "", waited, done,
             done[0] && now_txt[0] ? " | " : "", now_txt);
  return fence;
}

int ckpt_wait(ckpt_session *s) {
  if (!s) return 0;
  if (s->catch_up.pending) { /* the run ends at the state it resumed from the local level: into a file */
    ckpt_meta m = s->catch_up.meta;
    ckpt_state st = s->catch_up.state;
    s->catch_up.pending = 0;
    ckpt_meta_init(&s->catch_up.meta);
    memset(&s->catch_up.state, 0, sizeof s->catch_up.state);
    boost_status status = {0};
    const ckpt_save_request req = {.meta = &m, .state = &st, .force = CKPT_DUE_FILE, .fenced = s->out.fenced};
    ckpt_submit(s, &req, &status); /* waited for below */
    ckpt_meta_free(&m);
    ckpt_state_free(&st);
  }
  boost_status local = {0};
  ckpt_local_wait(s->local, &local);
  if (local.msg[0] && s->team.rank == 0) boost_log_info("checkpoint: %s", local.msg);
  ckpt_worker_wait_idle(&s->worker);
  char done[REASON_MAX + 128];
  collect(s, done, sizeof done, 1); /* the outcome of the last checkpoint is logged, not swallowed */
  if (!s->out.attempted) return 0;
  return s->out.last_ok ? 0 : -1;
}

void ckpt_close(ckpt_session *s) {
  if (!s) return;
  ckpt_worker_wait_idle(&s->worker);
  char done[REASON_MAX + 128];
  collect(s, done, sizeof done, 1);
  drop_catch_up(s);
  if (s->local) ckpt_test_stop_in("local-commit", s->grid->rank);
  ckpt_local_retire(s->local, s->out.last_committed_step);
  watchdog_deadline(NULL, s); /* under the watchdog's lock: never asked again once this returns */
  ckpt_worker_stop(&s->worker);
  ckpt_worker_free(&s->worker);
  ckpt_stager_free(&s->stager); /* its data plane first: it uses the communicators */
  MPI_Comm_free(&s->team.comm);
  MPI_Comm_free(&s->dp_comm);
  if (s->log) fclose(s->log);
  free_parts(s);
}

int64_t ckpt_last_committed(const ckpt_session *s) { return s ? s->out.last_committed_step : -1; }

int ckpt_last_stats(const ckpt_session *s, ckpt_stats *out) {
  memset(out, 0, sizeof *out);
  if (!s || !s->out.last_done.valid) return -1;
  const save_result *r = &s->out.last_done;
  out->step = r->step;
  out->committed = r->ok;
  out->stall_s = r->stall_s;
  out->wait_prev_s = r->wait_prev_s;
  out->write_s = r->write_s;
  for (int k = 0; k < SIZE_NUM_CLASSES; k++) {
    out->raw_bytes[k] = r->raw[k];
    out->stored_bytes[k] = r->stored[k];
  }
  out->file_bytes = r->file_bytes;
  return 0;
}
