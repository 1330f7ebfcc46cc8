/* checkpoints.jsonl's lines (ckpt_journal.h). */
#include "ckpt_journal.h"

#include <cJSON.h>
#include <stdlib.h>

#include "util.h"

static const char *const size_class_names[SIZE_NUM_CLASSES] = {"weights", "moments", "activations"};

/* One object as a line of checkpoints.jsonl (rank 0), then freed. */
static void journal_line(FILE *log, cJSON *o) {
  char *txt = cJSON_PrintUnformatted(o);
  if (txt) {
    fprintf(log, "%s\n", txt);
    fflush(log);
  }
  free(txt);
  cJSON_Delete(o);
}

void ckpt_journal_start(FILE *log, const char *level, int64_t step, double load_s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "start_step", (double)step);
  cJSON_AddStringToObject(o, "level", level);
  cJSON_AddNumberToObject(o, "unix_s", boost_unix_s());
  cJSON_AddNumberToObject(o, "load_s", load_s);
  journal_line(log, o);
}

void ckpt_journal_result(FILE *log, const save_result *r, const process_grid *grid, int sync_mode) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)r->step);
  cJSON_AddBoolToObject(o, "committed", r->ok);
  if (!r->ok) cJSON_AddStringToObject(o, "reason", r->reason.msg);
  cJSON_AddNumberToObject(o, "stall_s", r->stall_s);
  cJSON_AddNumberToObject(o, "update_wait_s", r->update_wait_s);
  cJSON_AddNumberToObject(o, "wait_prev_s", r->wait_prev_s);
  cJSON *ph = cJSON_AddObjectToObject(o, "phases_s");
  cJSON_AddNumberToObject(ph, "encode_write", r->encode_s);
  cJSON_AddNumberToObject(ph, "fsync", r->fsync_s);
  cJSON_AddNumberToObject(ph, "verify", r->verify_s);
  cJSON_AddNumberToObject(ph, "commit", r->commit_s);
  cJSON_AddNumberToObject(o, "write_s", r->write_s);
  cJSON_AddNumberToObject(o, "write_cpu_s", r->write_cpu_s);
  cJSON_AddNumberToObject(o, "file_bytes", r->file_bytes);
  cJSON *raw = cJSON_AddObjectToObject(o, "raw_bytes"), *sto = cJSON_AddObjectToObject(o, "stored_bytes");
  double tr = 0, ts = 0;
  for (int k = 0; k < SIZE_NUM_CLASSES; k++) {
    cJSON_AddNumberToObject(raw, size_class_names[k], r->raw[k]);
    cJSON_AddNumberToObject(sto, size_class_names[k], r->stored[k]);
    tr += r->raw[k];
    ts += r->stored[k];
  }
  cJSON_AddNumberToObject(o, "ratio", ts > 0 ? tr / ts : 0.0);
  cJSON_AddNumberToObject(o, "dp", grid->dp);
  cJSON_AddNumberToObject(o, "tp", grid->tp);
  cJSON_AddNumberToObject(o, "pp", grid->pp);
  cJSON_AddBoolToObject(o, "sync", sync_mode);
  cJSON_AddStringToObject(o, "writer", r->direct ? "direct" : "collective");
  if (r->retention[0]) cJSON_AddStringToObject(o, "retention", r->retention);
  journal_line(log, o);
}
