/* Saving a checkpoint (writer thread): layout-independent checksums of
 * what this rank writes, the collective write into a temporary file, and
 * the commit protocol: every rank agrees the file is complete and synced,
 * rank 0 renames it into place (the commit point), points `latest` at it and
 * applies retention; every rank learns the outcome. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_rollback.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"
#include "ckpt_readback.h"
#include "ckpt_save.h"
#include "ckpt_test_hooks.h"
#include "ckpt_write.h"
#include "log.h"
#include "util.h"

/* Checksums of what this rank writes: each element is hashed by the one
 * rank that writes it, so the sums over ranks are the layout-independent
 * checksums. Order: (tensor, category)..., state datasets, activations.
 * The tensors' are taken as they are staged (ckpt_stage.c) and summed over
 * the ranks once all are (ckpt_write_file); these are the others'. */
static uint64_t *checksums(const ckpt_writer *w, const save_job *j, size_t *nsum) {
  const size_t ntensor = (size_t)w->parts.plan->nent * CKPT_NUM_CATEGORIES;
  *nsum = ntensor + CKPT_STATE_NSETS + (size_t)j->acts.nact;
  uint64_t *sums = boost_calloc(*nsum, sizeof *sums);
  for (int k = 0; w->parts.team->rank == 0 && k < CKPT_STATE_NSETS; k++)
    sums[ntensor + k] = ckpt_state_hash(k, &j->state.set[k]);
  for (int a = 0; a < j->acts.nact; a++) {
    const act_item *it = &j->acts.acts[a];
    if (!it->has) continue;
    const void *p = j->acts.act_buf + it->off;
    sums[ntensor + CKPT_STATE_NSETS + a] =
        it->d.type == CKPT_ACT_I64    ? ckpt_hash_run64(p, (size_t)it->count[0], (uint64_t)it->start[0])
        : it->d.type == CKPT_ACT_BF16 ? ckpt_hash_slab_bf16(p, it->d.ndim, it->d.shape, it->start, it->count)
                                      : ckpt_hash_slab32(p, it->d.ndim, it->d.shape, it->start, it->count);
  }
  return sums;
}

/* Test hook: what a bad disk or a bug in the write path would leave. */
static void flip_middle_byte(const char *path) {
  struct stat st;
  FILE *f = fopen(path, "r+b");
  if (!f || stat(path, &st) != 0) {
    if (f) fclose(f);
    return;
  }
  const long at = (long)(st.st_size / 2);
  fseek(f, at, SEEK_SET);
  const int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x40, f);
  fclose(f);
}

/* Rank 0 renames the verified file into place (the commit point), points
 * `latest` at it and applies retention; every rank learns the outcome. */
static int commit(const ckpt_writer *w, const save_job *j, int ok, const char *tmp_name, const char *name,
                  const char *path, save_result *r) {
  int committed = 0;
  boost_status cerr = {0};
  const ckpt_settings *cfg = w->parts.cfg;
  if (w->parts.team->rank == 0) {
    if (ok) {
      struct stat stt;
      if (stat(path, &stt) == 0) r->file_bytes = (double)stt.st_size;
      /* Checkpoints of an abandoned run at or after this step (resumed from
       * an older one, ckpt.resume=none) become a set-aside branch first. */
      char aside[sizeof r->retention];
      int rc = ckpt_set_aside_after(cfg->dir, j->step - 1, cfg->keep_set_aside, aside, sizeof aside, &cerr) < 0
                   ? -1
                   : ckpt_fs_commit(cfg->dir, tmp_name, name, &cerr);
      if (rc == 0 && ckpt_test_hooks_now()->dirsync_fail_step == j->step) { /* test hook: the rename happened, its fsync "failed" */
        boost_err(&cerr, "fsync %s: %s (injected, BOOST_CKPT_TEST_DIRSYNC_FAIL)", cfg->dir, strerror(EIO));
        rc = 1;
      }
      committed = rc >= 0;
      if (rc > 0) /* renamed: the file is there and will be loaded, even if the directory fsync failed */
        boost_log_warn("warning: checkpoint %s committed, but %s", name, cerr.msg);
      if (committed) r->latest_ok = ckpt_fs_write_latest(cfg->dir, name, &cerr) == 0;
      /* Retention only behind a good `latest`: it never deletes what `latest` names. */
      if (committed && r->latest_ok)
        ckpt_fs_retain(cfg->dir, j->step, cfg->keep_last, cfg->keep_every, r->retention,
                       sizeof r->retention);
      if (committed && aside[0]) { /* one line: the set-aside first, then retention's removals */
        char kept[sizeof r->retention];
        boost_msgf(kept, sizeof kept, "%s", r->retention);
        boost_msgf(r->retention, sizeof r->retention, "%s%s%s", aside, kept[0] ? "; " : "", kept);
      }
    }
    if (!committed) unlink(path);
  }
  double meta[2] = {(double)committed, r->file_bytes};
  comm_control_bcast(w->parts.team->comm, COMM_WORLD, "checkpoint agreement", meta, (int)sizeof meta, 0);
  committed = meta[0] != 0.0;
  r->file_bytes = meta[1];
  if (ok && !committed) {
    comm_control_bcast(w->parts.team->comm, COMM_WORLD, "checkpoint agreement", &cerr, (int)sizeof cerr, 0);
    boost_err(&r->reason, "rank 0: %s", cerr.msg);
  }
  return committed;
}

/* After the first checkpoint of this run the previous file's size, scaled
 * by how much more raw data this one holds, plus 10%; before it the raw
 * size (compression only ever shrinks it, shuffle + zstd by 1.1-1.3x). */
static double expected_file_bytes(const ckpt_writer *w, const save_job *j) {
  const double raw = ckpt_raw_bytes(w->parts.plan, j);
  if (w->prev_file_bytes <= 0 || w->prev_raw_bytes <= 0) return 1.01 * raw;
  return 1.10 * w->prev_file_bytes * (raw / w->prev_raw_bytes) + (256 << 10);
}

void ckpt_do_save(ckpt_writer *w) {
  save_job *j = &w->job;
  save_result *r = &w->res;
  const ckpt_team *team = w->parts.team;
  const double t0 = boost_now_s(), c0 = boost_thread_cpu_s();
  memset(r, 0, sizeof *r);
  r->valid = 1;
  r->step = j->step;
  r->stall_s = j->stall_s;
  r->wait_prev_s = j->wait_prev_s;
  ckpt_ring_begin(w->parts.st, j->deferred); /* the deferred copy training waits for, or the first bands of a ring */
  size_t nsum;
  uint64_t *sums = checksums(w, j, &nsum);
  char name[64];
  char tmp_name[80];
  char path[PATH_MAX + 96];
  boost_status err = {0};
  ckpt_file_name(name, sizeof name, j->step);
  boost_msgf(tmp_name, sizeof tmp_name, "%s" CKPT_TMP_SUFFIX, name);
  boost_msgf(path, sizeof path, "%s/%s", w->parts.cfg->dir, tmp_name);
  int ok = !j->acts.failed && !j->oom;
  if (!ok)
    boost_err(&err, "out of memory staging the %s", j->oom ? "metadata and training state" : "activations");
  const ckpt_write_setup ws = {team, w->parts.plan, w->parts.st, w->parts.pace, w->dx, w->parts.cfg->level, w->direct_write,
                               ckpt_test_hooks_now()->no_reserve ? 0 : expected_file_bytes(w, j)};
  ok = ckpt_agree(team, ok, err.msg, &r->reason) && ckpt_write_file(&ws, j, path, sums, r, &err);
  if (ok && team->rank == 0) ckpt_fs_trim(path);
  const double t_enc = boost_now_s();
  r->encode_s = t_enc - t0;
  if (ok && ckpt_fs_fsync(path, &err) != 0) ok = 0;
  const double t_sync = boost_now_s();
  r->fsync_s = t_sync - t_enc;
  if (ok && ckpt_test_fails(j->step, team->rank)) {
    boost_err(&err, "injected I/O error (BOOST_CKPT_TEST_FAIL): %s", strerror(EIO));
    ok = 0;
  }
  ok = ckpt_agree(team, ok, err.msg, &r->reason);
  if (ok && ckpt_test_hooks_now()->flip_step == j->step && team->rank == 0) flip_middle_byte(path);
  if (ok)
    ok = ckpt_agree(team, ckpt_readback(team, w->parts.plan, w->parts.st, ckpt_worker_threads(w->parts.pace), path, sums, &err),
                    err.msg, &r->reason);
  boost_free(sums);
  const double t_ver = boost_now_s();
  r->verify_s = t_ver - t_sync;
  r->ok = commit(w, j, ok, tmp_name, name, path, r);
  if (r->ok) {
    w->prev_file_bytes = r->file_bytes;
    w->prev_raw_bytes = ckpt_raw_bytes(w->parts.plan, j);
  }
  r->write_s = boost_now_s() - t0;
  r->commit_s = r->write_s - (t_ver - t0);
  r->write_cpu_s = boost_thread_cpu_s() - c0;
}

void ckpt_writer_free(ckpt_writer *w) {
  ckpt_direct_free(w->dx);
  w->dx = NULL;
  ckpt_state_free(&w->job.state);
  ckpt_meta_free(&w->job.meta);
  ckpt_acts_free(&w->job.acts);
}
