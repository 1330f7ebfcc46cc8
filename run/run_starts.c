/* The run's history of starts (run_starts.h). */
#include "run_starts.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define STARTS_FILE "starts.jsonl"

/* Counts the well-formed records of f and the time of the first; lines that
 * are not records (a torn last line after a crash) are skipped. */
static void read_history(FILE *f, run_starts *out) {
  char line[512];
  while (fgets(line, sizeof line, f)) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "time");
    if (cJSON_IsNumber(t)) {
      if (out->starts == 0) out->first_start_s = t->valuedouble;
      out->starts++;
    }
    cJSON_Delete(o);
  }
}

int run_starts_record(const char *dir, double now_s, int64_t step, int world, run_starts *out, char *err,
                      size_t errlen) {
  memset(out, 0, sizeof *out);
  char path[4200];
  snprintf(path, sizeof path, "%s/" STARTS_FILE, dir);
  FILE *f = fopen(path, step == 0 ? "w" : "a+");
  if (!f) return boost_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
  int bad = fprintf(f, "{\"time\": %.3f, \"step\": %lld, \"world\": %d}\n", now_s, (long long)step, world) < 0;
  bad |= fflush(f) != 0;
  rewind(f);
  if (step == 0) {
    out->starts = 1;
    out->first_start_s = now_s;
  } else {
    read_history(f, out);
  }
  bad |= fclose(f) != 0;
  if (bad) return boost_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
  return 0;
}
