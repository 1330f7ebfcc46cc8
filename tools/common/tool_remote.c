/* s3:// checkpoints on the tools' command lines (tool.h, ckpt/remote/remote_path.h). */
#include <stdio.h>
#include <stdlib.h>

#include "remote_path.h"
#include "tool.h"

static char g_s3_tmp[4200];

static void s3_tmp_cleanup(void) { remote_path_cleanup(g_s3_tmp); }

int tool_remote_args(const char *prog, int argc, char **argv) {
  boost_status err = {0};
  const int rc = remote_path_args(argc, argv, g_s3_tmp, sizeof g_s3_tmp, &err);
  if (g_s3_tmp[0]) atexit(s3_tmp_cleanup);
  if (rc) fprintf(stderr, "%s: %s\n", prog, err.msg);
  return rc;
}
