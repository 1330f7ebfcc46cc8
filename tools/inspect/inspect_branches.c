/* boost-inspect summary of a checkpoint folder: its set-aside branches
 * (ckpt/session/ckpt_rollback.h), the checkpoints a rollback or a resume from an
 * older one left behind, and a set-aside a crash left for the next start. */
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "ckpt_rollback.h"
#include "inspect.h"
#include "util.h"

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int pending(const char *dir) {
  char p[PATH_MAX];
  boost_msgf(p, sizeof p, "%s/" CKPT_SET_ASIDE_PENDING, dir);
  return access(p, F_OK) == 0;
}

void ins_branches_text(const char *dir) {
  ckpt_branch *b;
  int n;
  boost_status err = {0};
  if (!is_dir(dir)) return;
  if (ckpt_branches_list(dir, &b, &n, &err) != 0) {
    printf("  set aside: %s\n", err.msg);
    return;
  }
  if (n) printf("  set aside: %d branch%s (abandoned checkpoints, *.h5.superseded.N; ckpt.keep_set_aside bounds them)\n", n, n == 1 ? "" : "es");
  for (int i = 0; i < n; i++) {
    char bytes[32];
    ckpt_format_bytes(b[i].bytes, bytes, sizeof bytes);
    printf("    branch %d%s: step%s", b[i].branch, b[i].branch ? "" : " (*.h5.superseded, an older boost's)",
           b[i].nsteps == 1 ? "" : "s");
    for (int k = 0; k < b[i].nsteps; k++) printf("%s%lld", k ? ", " : " ", (long long)b[i].steps[k]);
    printf(" (%d file%s, %s)\n", b[i].nsteps, b[i].nsteps == 1 ? "" : "s", bytes);
  }
  ckpt_branches_free(b, n);
  if (pending(dir))
    printf("  set aside: a set-aside was interrupted (%s): the next start of a run finishes it\n", CKPT_SET_ASIDE_PENDING);
}

void ins_branches_json(cJSON *o, const char *dir) {
  ckpt_branch *b;
  int n;
  boost_status err = {0};
  if (!is_dir(dir) || ckpt_branches_list(dir, &b, &n, &err) != 0) return;
  cJSON *arr = cJSON_AddArrayToObject(o, "set_aside");
  for (int i = 0; i < n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "branch", b[i].branch);
    cJSON *steps = cJSON_AddArrayToObject(e, "steps");
    for (int k = 0; k < b[i].nsteps; k++) cJSON_AddItemToArray(steps, cJSON_CreateNumber((double)b[i].steps[k]));
    cJSON_AddNumberToObject(e, "files", b[i].nsteps);
    cJSON_AddNumberToObject(e, "bytes", b[i].bytes);
    cJSON_AddItemToArray(arr, e);
  }
  ckpt_branches_free(b, n);
  cJSON_AddBoolToObject(o, "set_aside_pending", pending(dir));
}
