/* The checkpoint session's starts (ckpt.h: ckpt_resume, ckpt_rollback):
 * which level the run resumes from -- the local level when it holds this
 * run's newest state, else the newest checkpoint file, else a fresh start --
 * the run's identity carried on, and the guard's rollback to an older
 * committed checkpoint with the abandoned branch set aside. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_journal.h"
#include "ckpt_rollback.h"
#include "ckpt_session_internal.h"
#include "log.h"
#include "util.h"

/* With the local level on, rank 0 records in checkpoints.jsonl which level
 * a start came from (docs/LOCAL.md); a rollback is not a start. */
static void log_start(ckpt_session *s, const char *level, int64_t step, double load_s) {
  if (!s->start.in_rollback) s->out.start_level = level;
  if (s->log && (s->local || s->remote) && !s->start.in_rollback) ckpt_journal_start(s->log, level, step, load_s);
}

/* The newest file's step (-1: none), the identity expected (a rollback's: its own). */
static int64_t newest_file_step(ckpt_session *s, char *expect) {
  const int64_t step = ckpt_run_id_newest(s->grid->world, s->cfg.dir, &s->cfg.resume, expect);
  if (s->start.in_rollback && s->start.run_id[0]) memcpy(expect, s->start.run_id, sizeof s->start.run_id);
  return step;
}

/* The run goes on with identity `candidate` (NULL or "": a new one); the marker follows it. */
static void adopt_run_id(ckpt_session *s, const char *candidate) {
  char note[600];
  if (s->start.in_rollback && s->start.run_id[0]) candidate = s->start.run_id;
  ckpt_run_id_adopt(s->grid->world, s->read_only ? NULL : s->cfg.dir, candidate, s->start.run_id, note, sizeof note);
  ckpt_local_set_run(s->local, s->start.run_id);
  if (note[0] && s->team.rank == 0) boost_log_info("checkpoint: %s", note);
}

/* The remote level: the newest committed remote checkpoint, when newer
 * than ckpt.dir's newest file, downloaded into ckpt.dir; the start then
 * takes it as a file and names its level `remote`. */
static int fetch_remote(ckpt_session *s, boost_status *err) {
  if (!s->remote || s->cfg.resume.kind != CKPT_FROM_AUTO || s->start.in_rollback) return 0;
  char expect[CKPT_RUN_ID_HEX + 1];
  return ckpt_remote_fetch(s->remote, s->grid->world, s->cfg.dir, newest_file_step(s, expect), &s->start.remote_step,
                           err);
}

const char *ckpt_run_identity(const ckpt_session *s) { return s && s->start.run_id[0] ? s->start.run_id : NULL; }

int ckpt_resume(ckpt_session *s, ckpt_meta *meta, ckpt_state *state, boost_status *note_out) {
  char *msg = note_out->msg; /* the account; a failure marks note_out failed */
  const size_t msglen = sizeof note_out->msg;
  ckpt_meta_init(meta);
  memset(state, 0, sizeof *state);
  if (!s) {
    boost_msgf(msg, msglen, "fresh start");
    return 0;
  }
  const char *note = s->open_note[0] ? s->open_note : NULL;
  char local_note[1200] = "";
  const double t0 = boost_now_s();
  if (fetch_remote(s, note_out)) return -1;
  if (s->local && s->cfg.resume.kind == CKPT_FROM_AUTO) {
    char expect[CKPT_RUN_ID_HEX + 1]; /* only this run's local steps are looked at */
    const int64_t file_step = newest_file_step(s, expect);
    ckpt_local_set_run(s->local, expect);
    const int rc = ckpt_local_restore(s->local, file_step, meta, state, local_note, sizeof local_note);
    if (rc == 1) {
      adopt_run_id(s, expect);
      s->out.last_committed_step = s->out.last_staged_step = file_step; /* the durable level: the file's */
      ckpt_local_keep_only(s->local, meta->run.step);
      /* The file level catches up: a checkpoint file after the first step
       * trained (not before it: its write would share the cores with that
       * step), or of this state when the run ends without training one. */
      log_start(s, ckpt_local_restored_from_partner(s->local) ? "partner" : "local", meta->run.step, boost_now_s() - t0);
      s->catch_up.pending = meta->run.step > file_step;
      if (s->catch_up.pending && (ckpt_meta_copy(&s->catch_up.meta, meta) != 0 ||
                                  ckpt_state_copy(&s->catch_up.state, state) != 0))
        boost_fail("out of memory for the restored state's metadata");
      boost_msgf(msg, msglen, "%s%s%s%s", local_note,
                 s->catch_up.pending ? "; the checkpoint file catches up after the first step" : "", note ? "; " : "",
                 note ? note : "");
      return 1;
    }
  }
  if (local_note[0]) { /* one line: why not the local level */
    if (note) {
      const size_t used = strlen(local_note);
      boost_msgf(local_note + used, sizeof local_note - used, "; %s", note);
    }
    note = local_note;
  }
  if (s->cfg.resume.kind == CKPT_FROM_NONE) {
    adopt_run_id(s, NULL);
    ckpt_local_keep_only(s->local, -1); /* this new run has none yet; other runs' steps are left alone */
    int64_t *steps = NULL;
    int n = 0;
    char held[256] = "";
    if (!s->read_only && ckpt_fs_list(s->cfg.dir, &steps, &n, NULL) == 0 && n > 0)
      boost_msgf(held, sizeof held,
                 "; %s holds %d checkpoint%s (newest step %lld): kept; those at or after the steps this run commits are "
                 "set aside then (*.h5.superseded.N), nothing is deleted",
                 s->cfg.dir, n, n == 1 ? "" : "s", (long long)steps[0]);
    free(steps);
    boost_msgf(msg, msglen, "fresh start (ckpt.resume=none)%s%s%s", held, note ? "; " : "", note ? note : "");
    log_start(s, "fresh", 0, 0);
    return 0;
  }
  ckpt_worker_submit(&s->worker, CKPT_JOB_LOAD, -1, 1);
  ckpt_worker_wait_idle(&s->worker);
  load_result *lr = &s->reader.res;
  if (lr->status < 0) return boost_status_take(note_out, &lr->reason);
  /* The file's identity goes on (an older file's gets one at its next save); a fresh start makes one. */
  adopt_run_id(s, lr->status == 1 && ckpt_meta_has(&lr->meta, CKPT_META_F_run_id) ? lr->meta.run.run_id : NULL);
  ckpt_local_keep_only(s->local, -1); /* the run goes on from the file, or afresh: its older local steps go */
  if (lr->status == 0) {
    log_start(s, "fresh", 0, 0);
    boost_msgf(msg, msglen, "%s%s%s", lr->reason.msg, note ? "; " : "", note ? note : "");
    ckpt_state_free(&lr->state);
    return 0;
  }
  ckpt_upload_loaded(&s->stager); /* verified: the replicas' bands gathered (streamed), or only now into the arenas */
  ckpt_load_report(&s->reader);
  *meta = lr->meta; /* the caller owns them now */
  *state = lr->state;
  ckpt_meta_init(&lr->meta);
  memset(&lr->state, 0, sizeof lr->state);
  s->out.last_committed_step = meta->run.step;
  s->out.last_staged_step = meta->run.step;
  const int remote = s->start.remote_step == meta->run.step;
  log_start(s, remote ? "remote" : "file", meta->run.step, boost_now_s() - t0);
  boost_msgf(msg, msglen, "%s%s%s%s", lr->reason.msg, remote ? " (downloaded from the remote level)" : "",
             note ? "; " : "", note ? note : "");
  return 1;
}

const char *ckpt_start_level(const ckpt_session *s) { return s && s->out.start_level ? s->out.start_level : "fresh"; }

int ckpt_rollback(ckpt_session *s, int64_t max_step, ckpt_meta *meta, ckpt_state *state, boost_status *note) {
  char *msg = note->msg;
  const size_t msglen = sizeof note->msg;
  ckpt_meta_init(meta);
  memset(state, 0, sizeof *state);
  if (!s || s->read_only) {
    boost_msgf(msg, msglen, "no checkpoint directory to roll back in");
    return 0;
  }
  ckpt_wait(s);
  ckpt_local_drop_newer(s->local, max_step); /* the abandoned branch is never resumed from node memory either */
  boost_status err = {0};
  char aside[600] = "";
  int ok = s->grid->rank != 0 || ckpt_set_aside_after(s->cfg.dir, max_step, s->cfg.keep_set_aside, aside, sizeof aside, &err) >= 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, s->grid->world);
  if (!ok)
    return boost_err(note, "rollback in %s: %s", s->cfg.dir,
                     s->grid->rank == 0 ? err.msg : "the directory could not be updated");
  const ckpt_from resume = s->cfg.resume;
  s->cfg.resume.kind = CKPT_FROM_AUTO;
  s->start.in_rollback = 1;
  const int rc = ckpt_resume(s, meta, state, note);
  s->start.in_rollback = 0;
  s->cfg.resume = resume;
  if (aside[0]) boost_msgf(msg + strlen(msg), msglen - strlen(msg), "; %s", aside); /* rank 0 says it */
  if (rc != 1) s->out.last_committed_step = s->out.last_staged_step = -1;
  return rc;
}
