/* boost-inspect subcommands: summary, tensors, verify, list, dump. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "guard.h"
#include "inspect.h"
#include "tool_ckpt.h"
#include "inspect_plot.h"

static cJSON *parse_or_string(const char *s) {
  cJSON *j = s ? cJSON_Parse(s) : NULL;
  return j ? j : cJSON_CreateString(s ? s : "");
}

static void categories(const ckr_ckpt *c, double raw[3], double stored[3]) {
  static const char *cats[3] = {"weights", "moments", "activations"};
  for (int k = 0; k < 3; k++) raw[k] = stored[k] = 0;
  for (int i = 0; i < c->n; i++)
    for (int k = 0; k < 3; k++)
      if (!strcmp(c->d[i].category, cats[k])) raw[k] += c->d[i].raw_bytes, stored[k] += c->d[i].stored_bytes;
}

static cJSON *tensor_json(const ckr_dset *d) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "name", d->path);
  cJSON_AddStringToObject(t, "category", d->category);
  cJSON_AddStringToObject(t, "dtype", d->dtype);
  cJSON *sh = cJSON_AddArrayToObject(t, "shape");
  for (int k = 0; k < d->ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d->dims[k]));
  cJSON_AddNumberToObject(t, "raw_bytes", d->raw_bytes);
  cJSON_AddNumberToObject(t, "stored_bytes", d->stored_bytes);
  cJSON_AddNumberToObject(t, "ratio", d->stored_bytes > 0 ? d->raw_bytes / d->stored_bytes : 0.0);
  char hex[24];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)d->checksum);
  cJSON_AddStringToObject(t, "checksum", d->has_checksum ? hex : "");
  return t;
}

/* The state datasets (none stored: empty); -1 with the one-line message
 * printed when one is stored but cannot be read. */
static int state_info(const ckr_ckpt *c, ins_state *s) {
  boost_status err = {0};
  if (ins_state_read(c, s, &err) == 0) return 0;
  fprintf(stderr, "boost-inspect: %s: %s\n", c->path, err.msg);
  return -1;
}

/* {"count", "last"[, "last_step"]} of a history. */
static void history_json(cJSON *o, const char *name, const ins_state *s, int k) {
  cJSON *h = cJSON_AddObjectToObject(o, name);
  const size_t n = s->rows[k];
  const double *v = s->v[k];
  cJSON_AddNumberToObject(h, "count", (double)n);
  if (n && k == CKPT_STATE_loss_history) cJSON_AddNumberToObject(h, "last", (float)v[n - 1]);
  if (n && k == CKPT_STATE_val_loss_history) {
    cJSON_AddNumberToObject(h, "last", v[2 * n - 1]);
    cJSON_AddNumberToObject(h, "last_step", v[2 * n - 2]);
  }
}

/* The run's starts, one object per row (codes as names). */
static void starts_json(cJSON *o, const ckr_ckpt *c, const ins_state *s) {
  if (!s->has[CKPT_STATE_run_starts]) return;
  cJSON *arr = cJSON_AddArrayToObject(o, "run_starts");
  for (size_t i = 0; i < s->rows[CKPT_STATE_run_starts]; i++) {
    const double *row = s->v[CKPT_STATE_run_starts] + i * CKPT_START_NCOLS;
    cJSON *e = cJSON_CreateObject();
    for (int k = 0; k < CKPT_START_NCOLS; k++) {
      if (k == CKPT_START_tp_mode || k == CKPT_START_precision)
        cJSON_AddStringToObject(e, ckpt_start_columns[k], ins_start_code(row, k));
      else cJSON_AddNumberToObject(e, ckpt_start_columns[k], row[k]);
    }
    char level[16];
    ins_start_level(c->path, row, level, sizeof level);
    if (level[0]) cJSON_AddStringToObject(e, "level", level);
    cJSON_AddItemToArray(arr, e);
  }
}

/* A replay row's outcome and place, by name ("unknown" for codes this build lacks). */
static const char *replay_outcome(const double *row) {
  return row[3] >= 0 && row[3] < 3 ? guard_replay_outcomes[(int)row[3]] : "unknown";
}
static const char *replay_where(const double *row) {
  return row[5] >= 0 && row[5] < 4 ? guard_where_names[(int)row[5]] : "unknown";
}

/* The step guard's ledger (/state/guard_events, /state/skipped_batches,
 * /state/guard_replays): flagged steps, rollbacks, every batch passed over
 * as the train.skip_batches value a fresh run is given to train the same,
 * and every replay with its outcome. */
static void guard_json(cJSON *o, const ins_state *s) {
  const double *ev = s->v[CKPT_STATE_guard_events], *sk = s->v[CKPT_STATE_skipped_batches];
  const int64_t ne = (int64_t)s->rows[CKPT_STATE_guard_events], ns = (int64_t)s->rows[CKPT_STATE_skipped_batches];
  int64_t flagged, rollbacks;
  guard_count(ev, ne, sk, ns, &flagged, &rollbacks);
  cJSON *g = cJSON_AddObjectToObject(o, "guard");
  cJSON_AddNumberToObject(g, "flagged", (double)flagged);
  cJSON_AddNumberToObject(g, "rollbacks", (double)rollbacks);
  char skips[4096];
  guard_format_skips(sk, ns, skips, sizeof skips);
  cJSON_AddStringToObject(g, "skip_batches", skips);
  cJSON *arr = cJSON_AddArrayToObject(g, "events");
  for (int64_t i = 0; i < ne; i++) {
    const double *row = ev + i * GUARD_EVENT_COLS;
    char why[128];
    guard_reason_names((unsigned)row[2], why, sizeof why);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "step", row[0] + 1);
    cJSON_AddNumberToObject(e, "batch", row[1]);
    cJSON_AddStringToObject(e, "reason", why);
    cJSON_AddNumberToObject(e, "loss", isfinite(row[3]) ? row[3] : -1);
    cJSON_AddNumberToObject(e, "grad_norm", isfinite(row[4]) ? row[4] : -1);
    cJSON_AddStringToObject(e, "action", guard_action_names[(int)row[5] >= 0 && (int)row[5] < 3 ? (int)row[5] : 0]);
    cJSON_AddItemToArray(arr, e);
  }
  const double *rp = s->v[CKPT_STATE_guard_replays];
  cJSON *reps = cJSON_AddArrayToObject(g, "replays");
  for (int64_t i = 0; i < (int64_t)s->rows[CKPT_STATE_guard_replays]; i++) {
    const double *row = rp + i * GUARD_REPLAY_COLS;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "step", row[0] + 1);
    cJSON_AddNumberToObject(e, "batch", row[1]);
    cJSON_AddStringToObject(e, "trigger", row[2] == GUARD_REPLAY_FLAGGED ? "flagged" : "replay_every");
    cJSON_AddStringToObject(e, "outcome", replay_outcome(row));
    cJSON_AddNumberToObject(e, "rank", row[4]);
    cJSON_AddStringToObject(e, "where", replay_where(row));
    cJSON_AddItemToArray(reps, e);
  }
}

/* The replays in text: how many, and each one that found a fault. */
static void replays_text(const ins_state *s) {
  const double *rp = s->v[CKPT_STATE_guard_replays];
  const int64_t n = (int64_t)s->rows[CKPT_STATE_guard_replays];
  if (!s->has[CKPT_STATE_guard_replays]) return;
  int64_t faults = 0;
  for (int64_t i = 0; i < n; i++) faults += rp[i * GUARD_REPLAY_COLS + 3] != GUARD_REPLAY_SAME;
  printf("  replays: %lld, %lld found a fault\n", (long long)n, (long long)faults);
  for (int64_t i = 0; i < n; i++) {
    const double *row = rp + i * GUARD_REPLAY_COLS;
    if (row[3] == GUARD_REPLAY_SAME) continue;
    printf("    step %.0f batch %.0f: %s: rank %.0f, %s\n", row[0] + 1, row[1], replay_outcome(row), row[4],
           replay_where(row));
  }
}

static void guard_text(const ins_state *s) {
  const double *ev = s->v[CKPT_STATE_guard_events], *sk = s->v[CKPT_STATE_skipped_batches];
  const int64_t ne = (int64_t)s->rows[CKPT_STATE_guard_events], ns = (int64_t)s->rows[CKPT_STATE_skipped_batches];
  if (!s->has[CKPT_STATE_guard_events] && !s->has[CKPT_STATE_skipped_batches]) return;
  int64_t flagged, rollbacks;
  guard_count(ev, ne, sk, ns, &flagged, &rollbacks);
  char skips[4096];
  guard_format_skips(sk, ns, skips, sizeof skips);
  printf("  guard: %lld flagged step%s, %lld rollback%s; batches skipped: %s\n", (long long)flagged,
         flagged == 1 ? "" : "s", (long long)rollbacks, rollbacks == 1 ? "" : "s", skips[0] ? skips : "none");
  for (int64_t i = 0; i < ne; i++) {
    const double *row = ev + i * GUARD_EVENT_COLS;
    char why[128];
    guard_reason_names((unsigned)row[2], why, sizeof why);
    printf("    step %.0f batch %.0f: %s (loss %.4g, gradient norm %.4g): %s\n", row[0] + 1, row[1], why, row[3], row[4],
           guard_action_names[(int)row[5] >= 0 && (int)row[5] < 3 ? (int)row[5] : 0]);
  }
  replays_text(s);
}

/* Every root attribute of the schema (ckpt_meta.h): numbers (-1 absent),
 * strings (the schema's default when absent; an export's own left out),
 * JSON documents as JSON. */
static void root_attrs_json(const ckpt_meta *m, cJSON *o) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    const void *v = (const char *)m + d->offset;
    if (d->type == CKPT_META_T_I64) cJSON_AddNumberToObject(o, d->name, (double)*(const int64_t *)v);
    if (d->type == CKPT_META_T_F64) cJSON_AddNumberToObject(o, d->name, *(const double *)v);
    if (d->type != CKPT_META_T_STR) continue;
    const char *str = ckpt_meta_str(m, f);
    if (!str && (d->flags & CKPT_META_EXPORT)) continue;
    cJSON_AddItemToObject(o, d->name, d->flags & CKPT_META_JSON ? parse_or_string(str) : cJSON_CreateString(str ? str : ""));
  }
}

static const char *const SUMMARY_HELP =
    "usage: boost-inspect summary [--json] PATH\n"
    "The training state of a checkpoint: step, tokens, data cursor, seeds, next LR,\n"
    "loss history length and last value, the last validation loss, the run's\n"
    "starts (steps, layout, precision), the step guard's flagged steps, rollbacks\n"
    "and skipped batches (as a train.skip_batches value), the layout and precision\n"
    "that wrote it,\n"
    "the stored activations, the config, software and format version, bytes per\n"
    "category. PATH a checkpoint folder: its newest checkpoint (`latest`), then\n"
    "the folder's set-aside branches (step_X.h5.superseded.N: each branch's\n"
    "number, steps, files and bytes; --json: \"set_aside\", \"set_aside_pending\").\n"
    "Exit 1 when PATH is not a readable boost checkpoint of a known\n"
    "format version.\n";

static int summary_json(const ckr_ckpt *c, const char *arg, int with_tensors) {
  ins_state s;
  if (state_info(c, &s) != 0) return 1;
  double raw[3], stored[3];
  categories(c, raw, stored);
  struct stat st;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "path", c->path);
  root_attrs_json(&c->meta, o);
  history_json(o, "loss_history", &s, CKPT_STATE_loss_history);
  history_json(o, "val_loss_history", &s, CKPT_STATE_val_loss_history);
  starts_json(o, c, &s);
  guard_json(o, &s);
  ins_state_free(&s);
  ins_branches_json(o, arg);
  cJSON_AddNumberToObject(o, "file_bytes", stat(c->path, &st) == 0 ? (double)st.st_size : 0);
  cJSON *cat = cJSON_AddObjectToObject(o, "categories");
  static const char *cats[3] = {"weights", "moments", "activations"};
  for (int k = 0; k < 3; k++) {
    cJSON *e = cJSON_AddObjectToObject(cat, cats[k]);
    cJSON_AddNumberToObject(e, "raw_bytes", raw[k]);
    cJSON_AddNumberToObject(e, "stored_bytes", stored[k]);
    cJSON_AddNumberToObject(e, "ratio", stored[k] > 0 ? raw[k] / stored[k] : 0.0);
  }
  if (with_tensors) {
    cJSON *arr = cJSON_AddArrayToObject(o, "tensors");
    for (int i = 0; i < c->n; i++) cJSON_AddItemToArray(arr, tensor_json(&c->d[i]));
  }
  tool_print_json(o);
  return 0;
}

/* The history lines of the text summary. */
/* A start's level in words ("" when unknown). */
static const char *level_words(const char *level) {
  if (!strcmp(level, "fresh")) return "a fresh start";
  if (!strcmp(level, "local")) return "from the local level";
  if (!strcmp(level, "partner")) return "from the local level (partner copies)";
  if (!strcmp(level, "file")) return "from the checkpoint file";
  if (!strcmp(level, "remote")) return "from the remote level (object store)";
  return level;
}

static void state_text(const ckr_ckpt *c, const ins_state *s) {
  const size_t nl = s->rows[CKPT_STATE_loss_history], nv = s->rows[CKPT_STATE_val_loss_history];
  const double *v = s->v[CKPT_STATE_val_loss_history];
  printf("  loss history: %zu values", nl);
  if (nl) printf(", last %.4f", (float)s->v[CKPT_STATE_loss_history][nl - 1]);
  printf("\n  validation loss: ");
  if (nv) printf("%zu values, last %.4f at step %.0f\n", nv, v[2 * nv - 1], v[2 * nv - 2]);
  else printf("%s\n", s->has[CKPT_STATE_val_loss_history] ? "none (the run did not validate)" : "not stored");
  if (!s->has[CKPT_STATE_run_starts]) return;
  printf("  starts: %zu\n", s->rows[CKPT_STATE_run_starts]);
  for (size_t i = 0; i < s->rows[CKPT_STATE_run_starts]; i++) {
    const double *row = s->v[CKPT_STATE_run_starts] + i * CKPT_START_NCOLS;
    char lay[96], level[16];
    ins_start_layout(row, lay, sizeof lay);
    ins_start_level(c->path, row, level, sizeof level);
    printf("    steps %.0f-%.0f on %.0f rank%s (%s), global batch %.0f%s%s\n", row[CKPT_START_start_step],
           row[CKPT_START_last_step], row[CKPT_START_world_size], row[CKPT_START_world_size] == 1 ? "" : "s", lay,
           row[CKPT_START_global_batch], level[0] ? ", " : "", level_words(level));
  }
}

static int summary_text(const ckr_ckpt *c, const char *arg) {
  ins_state s;
  if (state_info(c, &s) != 0) return 1;
  double raw[3], stored[3];
  categories(c, raw, stored);
  static const char *cats[3] = {"weights", "moments", "activations"};
  printf("checkpoint %s\n", c->path);
  const ckpt_meta *m = &c->meta;
  printf("  format %s v%lld, written by boost %s, checksums %s\n", m->package.format, (long long)m->package.format_version,
         m->package.software_version ? m->package.software_version : "?", m->package.checksum_algorithm ? m->package.checksum_algorithm : "?");
  printf("  step %lld | tokens %.0f | data cursor %lld | seeds train %lld data %lld | next lr %.3e\n", (long long)m->run.step,
         m->run.tokens_seen, (long long)m->run.data_cursor, (long long)m->run.train_seed, (long long)m->run.data_seed, m->run.lr_next);
  state_text(c, &s);
  guard_text(&s);
  ins_state_free(&s);
  printf("  saved by layout %s | precision %s | activations %s\n", m->run.layout ? m->run.layout : "?",
         ckpt_meta_str(m, CKPT_META_F_precision), ckpt_meta_str(m, CKPT_META_F_activations));
  if (!strcmp(ckpt_meta_str(m, CKPT_META_F_optimizer_state), "absent"))
    printf("  export: weights %s, no optimizer state (training cannot resume from it)\n",
           ckpt_meta_str(m, CKPT_META_F_weights_dtype));
  printf("  config %s\n", m->run.config ? m->run.config : "(missing)");
  for (int k = 0; k < 3; k++)
    if (raw[k] > 0) printf("  %-12s %12.0f raw bytes -> %12.0f stored (%.3fx)\n", cats[k], raw[k], stored[k], stored[k] > 0 ? raw[k] / stored[k] : 0.0);
  ins_branches_text(arg);
  return 0;
}

int cmd_summary(int argc, char **argv) {
  static const char *const extra[] = {"--tensors", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 1, 1, SUMMARY_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  ckr_ckpt c;
  if (tool_open_or_say(a.pos[0], &c, 1)) {
    if (!a.json) ins_branches_text(a.pos[0]); /* a folder of set-aside branches only */
    return 1;
  }
  int rc = a.json ? summary_json(&c, a.pos[0], a.opt_set[0]) : summary_text(&c, a.pos[0]);
  ckr_close(&c);
  return rc;
}

static const char *const TENSORS_HELP =
    "usage: boost-inspect tensors [--json] PATH\n"
    "Every dataset: name, category, dtype, shape, stored bytes, compression ratio,\n"
    "stored checksum (xxh3-64-elemsum-v1). Nothing is decoded (see verify).\n";

int cmd_tensors(int argc, char **argv) {
  ins_args a;
  int p = ins_parse(argc, argv, NULL, 1, 1, TENSORS_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  ckr_ckpt c;
  if (tool_open_or_say(a.pos[0], &c, 0)) return 1; /* a failed walk: the list so far, then exit 1 */
  if (a.json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", c.path);
    cJSON *arr = cJSON_AddArrayToObject(o, "tensors");
    for (int i = 0; i < c.n; i++) cJSON_AddItemToArray(arr, tensor_json(&c.d[i]));
    tool_print_json(o);
  } else {
    printf("  %-48s %-11s %-9s %-18s %12s %7s  %s\n", "dataset", "category", "dtype", "shape", "stored", "ratio", "checksum");
    for (int i = 0; i < c.n; i++) {
      const ckr_dset *d = &c.d[i];
      char shape[64];
      ckr_shape_str(d, shape, sizeof shape);
      printf("  %-48s %-11s %-9s %-18s %12.0f %6.3fx  %016llx\n", d->path, d->category, d->dtype, shape, d->stored_bytes,
             d->stored_bytes > 0 ? d->raw_bytes / d->stored_bytes : 0.0, (unsigned long long)d->checksum);
    }
  }
  if (c.walk_failed) fprintf(stderr, "boost-inspect: %s: the list is incomplete: %s\n", c.path, c.walk_error);
  int rc = c.walk_failed ? 1 : 0;
  ckr_close(&c);
  return rc;
}

static const char *const VERIFY_HELP =
    "usage: boost-inspect verify [--json] [--no-recompute] PATH\n"
    "Checks everything a reader can: every chunk of every dataset decoded and its\n"
    "checksum recomputed; the tensors the stored config implies all present with\n"
    "their shapes (and nothing else in /model, /optim); root attributes present and\n"
    "consistent; the config parses; the loss history has `step` values, the\n"
    "validation history and the run's starts are consistent with it; stored\n"
    "activations well formed and, when nothing else is wrong, recomputed: the model\n"
    "the stored config describes runs forward on the stored tokens with the stored\n"
    "weights and must reproduce every stored activation, per dataset max |diff| <=\n"
    "max(1, max |stored|) x 1e-5 (an fp32 checkpoint) or x 2^-4 (bf16)\n"
    "(--no-recompute skips this; it costs one forward pass of the model).\n"
    "Prints `verify: ok` (exit 0) or one line per problem naming the tensor or\n"
    "attribute and `verify: FAILED` (exit 1).\n";

int cmd_verify(int argc, char **argv) {
  ins_args a;
  static const char *const extra[] = {"--no-recompute", NULL};
  int p = ins_parse(argc, argv, extra, 1, 1, VERIFY_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  ckr_ckpt c;
  boost_status err = {0};
  if (ckr_open(a.pos[0], &c, &err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err.msg);
    if (a.json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "path", a.pos[0]);
      cJSON_AddBoolToObject(o, "verified", 0);
      cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "problems"), cJSON_CreateString(err.msg));
      tool_print_json(o);
    }
    ckr_close(&c);
    return 1;
  }
  ins_report r = {.no_recompute = a.opt_set[0]};
  ins_verify(&c, &r);
  if (a.json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", c.path);
    cJSON_AddBoolToObject(o, "verified", r.n == 0);
    cJSON_AddNumberToObject(o, "datasets", c.n);
    cJSON_AddNumberToObject(o, "decoded", r.checked);
    if (r.acts.ran || r.acts.skipped[0]) {
      cJSON *ac = cJSON_AddObjectToObject(o, "activations_recomputed");
      cJSON_AddBoolToObject(ac, "ran", r.acts.ran);
      cJSON_AddNumberToObject(ac, "datasets", r.acts.datasets);
      cJSON_AddNumberToObject(ac, "mismatched", r.acts.mismatched);
      cJSON_AddBoolToObject(ac, "bitwise", r.acts.ran && r.acts.bitwise);
      cJSON_AddNumberToObject(ac, "max_rel_diff", r.acts.max_rel_diff);
      cJSON_AddStringToObject(ac, "precision", r.acts.bf16 ? "bf16" : "fp32");
      cJSON_AddNumberToObject(ac, "tolerance", r.acts.tolerance);
      if (r.acts.skipped[0]) cJSON_AddStringToObject(ac, "skipped", r.acts.skipped);
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "problems");
    for (int i = 0; i < r.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(r.lines[i]));
    tool_print_json(o);
  } else {
    for (int i = 0; i < r.n; i++) printf("BAD %s\n", r.lines[i]);
    if (r.acts.ran)
      printf("activations: %d datasets recomputed from the stored weights, %s%s (%s, max relative diff %.2g)\n",
             r.acts.datasets, r.acts.mismatched ? "MISMATCH" : r.acts.bitwise ? "bit for bit" : "within ",
             r.acts.mismatched || r.acts.bitwise ? "" : r.acts.tolerance_text, r.acts.bf16 ? "bf16" : "fp32", r.acts.max_rel_diff);
    else if (r.acts.skipped[0]) printf("activations: not recomputed (%s)\n", r.acts.skipped);
    printf("verify: %s (%d datasets decoded and checksummed, %d problem%s)\n", r.n ? "FAILED" : "ok", r.checked, r.n, r.n == 1 ? "" : "s");
  }
  for (int i = 0; i < r.n && i < 20; i++) fprintf(stderr, "boost-inspect: %s: %s\n", c.path, r.lines[i]);
  int rc = r.n ? 1 : 0;
  ins_report_free(&r);
  ckr_close(&c);
  return rc;
}

static const char *const LIST_HELP =
    "usage: boost-inspect list [--json] DIR\n"
    "The committed checkpoints of a checkpoint directory, newest first; `latest`\n"
    "marks the one the directory's pointer names. Says so when there are none.\n";

int cmd_list(int argc, char **argv) {
  ins_args a;
  int p = ins_parse(argc, argv, NULL, 1, 1, LIST_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  int64_t *steps = NULL;
  int n = 0;
  boost_status err = {0};
  char latest[PATH_MAX] = "";
  struct stat st;
  if (stat(a.pos[0], &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "boost-inspect: %s: %s\n", a.pos[0], access(a.pos[0], F_OK) != 0 ? strerror(errno) : "not a directory");
    return 1;
  }
  if (ckpt_fs_list(a.pos[0], &steps, &n, &err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err.msg);
    return 1;
  }
  ckpt_fs_read_latest(a.pos[0], latest, sizeof latest);
  cJSON *arr = cJSON_CreateArray();
  if (!a.json && n == 0) printf("no checkpoints in %s\n", a.pos[0]);
  for (int i = 0; i < n; i++) {
    char name[64], path[PATH_MAX + 64];
    ckpt_file_name(name, sizeof name, steps[i]);
    snprintf(path, sizeof path, "%s/%s", a.pos[0], name);
    double sz = stat(path, &st) == 0 ? (double)st.st_size : -1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", name);
    cJSON_AddNumberToObject(o, "step", (double)steps[i]);
    cJSON_AddNumberToObject(o, "bytes", sz);
    cJSON_AddBoolToObject(o, "latest", strcmp(name, latest) == 0);
    cJSON_AddItemToArray(arr, o);
    if (!a.json) printf("%s  step %8lld  %10.0f bytes%s\n", name, (long long)steps[i], sz, strcmp(name, latest) == 0 ? "  <- latest" : "");
  }
  if (a.json) tool_print_json(arr);
  else cJSON_Delete(arr);
  free(steps);
  return 0;
}
