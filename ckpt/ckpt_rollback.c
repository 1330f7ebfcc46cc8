/* The step guard's rollback: the abandoned branch set aside, the newest
 * checkpoint before it loaded (ckpt.h, ckpt_rollback). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_internal.h"
#include "util.h"

#include <unistd.h>

/* Rank 0: checkpoints newer than max_step renamed *.superseded, `latest`
 * pointed at the newest left (removed when none is). 0, or -1 with err. */
static int set_aside_newer(const char *dir, int64_t max_step, char *err, size_t errlen) {
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(dir, &steps, &n, err, errlen) != 0) return -1;
  int rc = 0;
  const char *keep = NULL;
  char name[64], keep_name[64] = "", from[PATH_MAX], to[PATH_MAX + 16];
  for (int k = 0; k < n && rc == 0; k++) { /* newest first */
    ckpt_file_name(name, sizeof name, steps[k]);
    if (steps[k] <= max_step) {
      if (!keep) keep = memcpy(keep_name, name, sizeof name);
      continue;
    }
    boost_msgf(from, sizeof from, "%s/%s", dir, name);
    boost_msgf(to, sizeof to, "%s" CKPT_SUPERSEDED_SUFFIX, from);
    if (rename(from, to) != 0) rc = boost_err(err, errlen, "cannot rename %s aside: %s", from, strerror(errno));
  }
  free(steps);
  if (rc == 0 && keep) rc = ckpt_fs_write_latest(dir, keep, err, errlen);
  if (rc == 0 && !keep) {
    boost_msgf(from, sizeof from, "%s/" CKPT_LATEST, dir);
    if (unlink(from) != 0 && errno != ENOENT) rc = boost_err(err, errlen, "cannot remove %s: %s", from, strerror(errno));
  }
  return rc == 0 ? ckpt_fs_fsync(dir, err, errlen) : rc;
}

int ckpt_rollback(ckpt_session *s, int64_t max_step, ckpt_meta *meta, ckpt_state *state, char *msg, size_t msglen) {
  ckpt_meta_init(meta);
  memset(state, 0, sizeof *state);
  if (!s || s->read_only) {
    boost_msgf(msg, msglen, "no checkpoint directory to roll back in");
    return 0;
  }
  ckpt_wait(s);
  char err[1024] = "";
  int ok = s->rank != 0 || set_aside_newer(s->cfg.dir, max_step, err, sizeof err) == 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, s->grid->world);
  if (!ok) {
    boost_msgf(msg, msglen, "rollback in %s: %s", s->cfg.dir, s->rank == 0 ? err : "the directory could not be updated");
    return -1;
  }
  const ckpt_from resume = s->cfg.resume;
  s->cfg.resume.kind = CKPT_FROM_AUTO;
  const int rc = ckpt_resume(s, meta, state, msg, msglen);
  s->cfg.resume = resume;
  if (rc != 1) s->last_committed_step = s->last_staged_step = -1;
  return rc;
}
