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
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"

void ckpt_format_bytes(double b, char *out, size_t n) {
  if (b >= (double)(1 << 30)) boost_msgf(out, n, "%.2f GiB", b / (1 << 30));
  else if (b >= (double)(1 << 20)) boost_msgf(out, n, "%.1f MiB", b / (1 << 20));
  else boost_msgf(out, n, "%.0f KiB", b / 1024);
}

void ckpt_do_save(ckpt_session *s, save_result *r) {
  save_job *j = &s->job;
  const double t0 = boost_now_s(), c0 = boost_thread_cpu_s();
  memset(r, 0, sizeof *r);
  r->valid = 1;
  r->step = j->step;
  r->stall_s = j->stall_s;
  r->wait_prev_s = j->wait_prev_s;
  if (j->deferred) { /* the copy training waits for before its next update */
    ckpt_copy_to_stage(s, 0);
    pthread_mutex_lock(&s->sync.mu);
    s->sync.staged = 1;
    pthread_cond_broadcast(&s->sync.cv);
    pthread_mutex_unlock(&s->sync.mu);
  }
  /* Checksums: each element is hashed by the one rank that writes it. */
  const tensor_registry *reg = s->reg;
  const size_t nsum = (size_t)s->nent * CKPT_NUM_CATEGORIES + 1 + (size_t)j->acts.nact;
  uint64_t *sums = boost_calloc(nsum, sizeof *sums);
  for (int i = 0; i < s->nent; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const ckpt_entry *e = &s->ents[i];
      if (e->stage_off[c] == CKPT_NO_STAGE) continue;
      const tensor_desc *t = &reg->tensors[e->local];
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
      sums[(size_t)i * CKPT_NUM_CATEGORIES + c] = ckpt_hash_slab32(s->stage + e->stage_off[c], t->ndim, t->shape, start, count);
    }
  if (s->rank == 0) sums[(size_t)s->nent * CKPT_NUM_CATEGORIES] = ckpt_hash_run32(j->losses, (size_t)j->nloss, 0);
  for (int a = 0; a < j->acts.nact; a++) {
    const act_item *it = &j->acts.acts[a];
    if (!it->has) continue;
    const void *p = j->acts.act_buf + it->off;
    sums[(size_t)s->nent * CKPT_NUM_CATEGORIES + 1 + a] =
        it->d.type == CKPT_ACT_I64 ? ckpt_hash_run64(p, (size_t)it->count[0], (uint64_t)it->start[0])
                              : ckpt_hash_slab32(p, it->d.ndim, it->d.shape, it->start, it->count);
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, (int)nsum, MPI_UINT64_T, MPI_SUM, s->comm);

  char name[64], tmp_name[80], path[PATH_MAX + 96], err[REASON_MAX] = "";
  ckpt_file_name(name, sizeof name, j->step);
  boost_msgf(tmp_name, sizeof tmp_name, "%s" CKPT_TMP_SUFFIX, name);
  boost_msgf(path, sizeof path, "%s/%s", s->set.dir, tmp_name);
  int ok = ckpt_write_file(s, j, path, sums, r, err, sizeof err);
  boost_free(sums);
  if (ok && s->rank == 0) ckpt_fs_trim(path);
  if (ok && ckpt_fs_fsync(path, err, sizeof err) != 0) ok = 0;
  if (ok && s->set.fail_step == j->step && (s->set.fail_rank < 0 || s->set.fail_rank == s->rank)) {
    boost_msgf(err, sizeof err, "injected I/O error (BOOST_CKPT_TEST_FAIL): %s", strerror(EIO));
    ok = 0;
  }
  ok = ckpt_agree(s, ok, err, r->reason, sizeof r->reason);
  /* Commit (rank 0 renames; every rank learns the outcome). */
  int committed = 0;
  char cerr[REASON_MAX] = "";
  if (s->rank == 0) {
    if (ok) {
      struct stat stt;
      if (stat(path, &stt) == 0) r->file_bytes = (double)stt.st_size;
      if (ckpt_fs_commit(s->set.dir, tmp_name, name, cerr, sizeof cerr) == 0) {
        committed = 1;
        r->latest_ok = ckpt_fs_write_latest(s->set.dir, name, cerr, sizeof cerr) == 0;
        ckpt_fs_retain(s->set.dir, j->step, s->cfg.ckpt.keep_last, s->cfg.ckpt.keep_every, r->retention,
                       sizeof r->retention);
      }
    }
    if (!committed) unlink(path);
  }
  double meta[2] = {(double)committed, r->file_bytes};
  MPI_Bcast(meta, 2, MPI_DOUBLE, 0, s->comm);
  committed = meta[0] != 0.0;
  r->file_bytes = meta[1];
  if (ok && !committed) {
    MPI_Bcast(cerr, (int)sizeof cerr, MPI_CHAR, 0, s->comm);
    boost_msgf(r->reason, sizeof r->reason, "rank 0: %s", cerr);
  }
  r->ok = committed;
  r->write_s = boost_now_s() - t0;
  r->write_cpu_s = boost_thread_cpu_s() - c0;
}

