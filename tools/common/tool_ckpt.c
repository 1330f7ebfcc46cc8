/* The checkpoint programs' output helpers (tool_ckpt.h). The open error
 * keeps boost-inspect's words, which boost-generate shares. */
#include <stdio.h>
#include <stdlib.h>

#include "tool_ckpt.h"

int tool_open_or_say(const char *arg, ckr_ckpt *c, int need_complete) {
  boost_status err = {0};
  if (ckr_open(arg, c, &err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err.msg);
    ckr_close(c);
    return 1;
  }
  if (need_complete && c->walk_failed) {
    fprintf(stderr, "boost-inspect: %s: damaged (the dataset list is incomplete): %s\n", c->path, c->walk_error);
    ckr_close(c);
    return 1;
  }
  return 0;
}

void tool_print_json(cJSON *o) {
  char *t = cJSON_Print(o);
  if (t) printf("%s\n", t);
  free(t);
  cJSON_Delete(o);
}
