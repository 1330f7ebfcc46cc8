/* The step guard's rollback, its file part: the abandoned branch set aside
 * (ckpt_rollback.h). The session's part, loading the newest checkpoint
 * left, is ckpt_rollback in ckpt_session.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_rollback.h"
#include "util.h"

#include <unistd.h>

int ckpt_set_aside_newer(const char *dir, int64_t max_step, boost_status *err) {
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(dir, &steps, &n, err) != 0) return -1;
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
    if (rename(from, to) != 0) rc = boost_err(err, "cannot rename %s aside: %s", from, strerror(errno));
  }
  free(steps);
  if (rc == 0 && keep) rc = ckpt_fs_write_latest(dir, keep, err);
  if (rc == 0 && !keep) {
    boost_msgf(from, sizeof from, "%s/" CKPT_LATEST, dir);
    if (unlink(from) != 0 && errno != ENOENT) rc = boost_err(err, "cannot remove %s: %s", from, strerror(errno));
  }
  return rc == 0 ? ckpt_fs_fsync(dir, err) : rc;
}
