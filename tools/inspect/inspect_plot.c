/* boost-inspect plot: a run in one picture, from its checkpoint and what
 * its directory holds -- the training loss (raw and smoothed), the
 * validation loss, a mark at every start with its layout, at every
 * committed checkpoint and, where checkpoints.jsonl and the metrics file
 * have them, a second panel of tokens/s and checkpoint stall; or several
 * runs overlaid (--compare). The data go to files gnuplot reads by fixed
 * names; inspect_plot_gp.c writes the script. */
#include <cJSON.h>
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
#include "inspect_plot.h"
#include "util.h"

static const char *const PLOT_HELP =
    "usage: boost-inspect plot [--json] PATH -o FILE.png [--metrics FILE] [--x step|tokens] [--data-dir DIR]\n"
    "       boost-inspect plot [--json] --compare A B [C ...] -o FILE.png [--x step|tokens] [--data-dir DIR]\n"
    "The run a checkpoint (or checkpoint directory) holds, in one picture: the\n"
    "training loss of every step, raw and smoothed (/state/loss_history), the\n"
    "validation loss (/state/val_loss_history), a mark at every start of the run\n"
    "labelled with its layout (dp tp pp, tp mode, precision: /state/run_starts),\n"
    "the step guard's flagged steps and rollbacks (/state/guard_events,\n"
    "/state/skipped_batches)\n"
    "and at every committed checkpoint (the directory's checkpoints.jsonl, else\n"
    "its files) and, when the metrics file (--metrics, else the stored config's\n"
    "train.metrics when it exists) and checkpoints.jsonl have them, a second panel\n"
    "of tokens/s and checkpoint stall. --compare overlays up to 8 runs (smoothed\n"
    "training and validation loss). --x tokens: tokens seen instead of steps.\n"
    "Drawn by gnuplot (scripts/install-deps.sh installs gnuplot-nox) in a\n"
    "temporary directory, no shell; FILE.png is written through FILE.png.tmp.\n"
    "--data-dir DIR (new or empty) keeps the script plot.gp and its data files\n"
    "there; with --data-dir and no -o, gnuplot is not run.\n";

/* Printable ASCII without quotes or backslashes, the tail of a long text:
 * safe inside the script's single-quoted strings. */
void plot_sanitize(const char *in, char *out, size_t outlen) {
  size_t n = strlen(in), skip = n + 1 > outlen ? n + 1 - outlen + 3 : 0, k = 0;
  if (skip) k = (size_t)snprintf(out, outlen, "...");
  for (const char *p = in + skip; *p && k + 1 < outlen; p++)
    out[k++] = (*p < 0x20 || *p > 0x7e || *p == '\'' || *p == '"' || *p == '\\') ? '?' : *p;
  out[k] = 0;
}

/* The directory a checkpoint file lies in. */
static void dir_of(const char *file, char *out, size_t outlen) {
  const char *slash = strrchr(file, '/');
  if (!slash) snprintf(out, outlen, ".");
  else snprintf(out, outlen, "%.*s", (int)(slash - file > 0 ? slash - file : 1), file);
}

/* Each line of a JSON-lines file as an object to fn; 0, -1 when it cannot be
 * opened (errno). Lines that do not parse are passed over. */
static int each_json_line(const char *path, void (*fn)(const cJSON *, void *), void *ctx) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    cJSON *o = cJSON_Parse(line);
    if (cJSON_IsObject(o)) fn(o, ctx);
    cJSON_Delete(o);
  }
  free(line);
  fclose(f);
  return 0;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* A step of this run: whole, in (0, r->step]. */
static int64_t step_of(const plot_run *r, double s) {
  return isfinite(s) && s >= 1 && s <= (double)r->step && s == floor(s) ? (int64_t)s : -1;
}

/* metrics.jsonl: tokens_per_s by step (a step logged again -- after a
 * resume -- keeps its newest line). */
static void metrics_line(const cJSON *o, void *ctx) {
  plot_run *r = ctx;
  const int64_t s = step_of(r, num(o, "step"));
  const double t = num(o, "tokens_per_s");
  if (s > 0 && isfinite(t)) r->tput[s] = t;
}

/* checkpoints.jsonl: the stall of every attempt, committed or not. */
static void ckpt_line(const cJSON *o, void *ctx) {
  plot_run *r = ctx;
  const int64_t s = step_of(r, num(o, "step"));
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "committed");
  if (s < 0) return;
  const double stall = num(o, "stall_s");
  if (isfinite(stall)) r->stall[s] = stall;
  if (cJSON_IsBool(ok)) r->committed[s] = cJSON_IsTrue(ok);
}

/* The start record nearest the row's start time with its start step. */
typedef struct {
  double step, unix_s, best;
  char level[16];
} level_match;

static void start_line(const cJSON *o, void *ctx) {
  level_match *m = ctx;
  const cJSON *lv = cJSON_GetObjectItemCaseSensitive(o, "level");
  const double step = num(o, "start_step"), t = num(o, "unix_s");
  if (!cJSON_IsString(lv) || step != m->step || !isfinite(t)) return;
  const double gap = fabs(t - m->unix_s);
  if (gap < m->best) { /* the record is written at the load, the row right after it */
    m->best = gap;
    snprintf(m->level, sizeof m->level, "%s", lv->valuestring);
  }
}

void ins_start_level(const char *ckpt_path, const double *row, char *out, size_t outlen) {
  char dir[PATH_MAX], p[PATH_MAX + 32];
  dir_of(ckpt_path, dir, sizeof dir);
  snprintf(p, sizeof p, "%s/checkpoints.jsonl", dir);
  level_match m = {row[CKPT_START_start_step], row[CKPT_START_start_unix_s], 600.0, ""};
  each_json_line(p, start_line, &m);
  snprintf(out, outlen, "%s", m.level);
}

/* The stored config's train.metrics ("" when none). */
static void config_metrics(const ckr_ckpt *c, char *out, size_t outlen) {
  cJSON *cfg = c->meta.run.config ? cJSON_Parse(c->meta.run.config) : NULL;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(cfg, "train.metrics");
  snprintf(out, outlen, "%s", cJSON_IsString(m) ? m->valuestring : "");
  cJSON_Delete(cfg);
}

/* Throughput, stalls and committed checkpoints from the run's files. The
 * metrics file named by --metrics must be readable; the config's is used
 * when it is there. */
static int read_run_files(plot_run *r, const ckr_ckpt *c, const char *metrics, boost_status *err) {
  const size_t n = (size_t)r->step + 1;
  r->tput = malloc(n * sizeof *r->tput);
  r->stall = malloc(n * sizeof *r->stall);
  r->committed = calloc(n, 1);
  if (!r->tput || !r->stall || !r->committed) return boost_err(err, "out of memory");
  for (size_t i = 0; i < n; i++) r->tput[i] = r->stall[i] = NAN;
  char dir[PATH_MAX], p[PATH_MAX + 32];
  dir_of(c->path, dir, sizeof dir);
  snprintf(p, sizeof p, "%s/checkpoints.jsonl", dir);
  r->has_log = each_json_line(p, ckpt_line, r) == 0;
  if (!r->has_log) { /* the committed files the directory still holds */
    int64_t *steps = NULL;
    int ns = 0;
    if (ckpt_fs_list(dir, &steps, &ns, NULL) == 0)
      for (int i = 0; i < ns; i++)
        if (steps[i] >= 1 && steps[i] <= r->step) r->committed[steps[i]] = 1;
    free(steps);
  }
  r->committed[r->step] = 1; /* the file itself */
  if (metrics) snprintf(r->metrics, sizeof r->metrics, "%s", metrics);
  else config_metrics(c, r->metrics, sizeof r->metrics);
  if (r->metrics[0] && each_json_line(r->metrics, metrics_line, r) != 0) {
    if (metrics) return boost_err(err, "--metrics %s: %s", metrics, strerror(errno));
    r->metrics[0] = 0; /* the config's file is not here: no throughput */
  }
  return 0;
}

int plot_load_run(const char *arg, const char *metrics, plot_run *r, boost_status *err) {
  memset(r, 0, sizeof *r);
  ckr_ckpt c;
  if (ckr_open(arg, &c, err) != 0) return ckr_close(&c), -1;
  int rc = -1;
  snprintf(r->path, sizeof r->path, "%s", c.path);
  plot_sanitize(arg, r->label, sizeof r->label);
  r->step = c.meta.run.step;
  r->tokens_seen = c.meta.run.tokens_seen;
  boost_status why = {0};
  if (c.walk_failed) boost_err(err, "%s: damaged (the dataset list is incomplete): %s", c.path, c.walk_error);
  else if (ins_state_read(&c, &r->st, &why) != 0) boost_err(err, "%s: %s", c.path, why.msg);
  else if (!r->st.has[CKPT_STATE_loss_history] || r->st.rows[CKPT_STATE_loss_history] == 0)
    boost_err(err, "%s: no loss history to plot%s", c.path, r->st.has[CKPT_STATE_loss_history] ? " (it is empty)" : "");
  else if (r->step < 1 || (int64_t)r->st.rows[CKPT_STATE_loss_history] != r->step)
    boost_err(err, "%s: the loss history holds %zu values, the checkpoint is of step %lld", c.path,
              r->st.rows[CKPT_STATE_loss_history], (long long)r->step);
  else rc = read_run_files(r, &c, metrics, err);
  ckr_close(&c);
  return rc;
}

void plot_run_free(plot_run *r) {
  ins_state_free(&r->st);
  free(r->tput);
  free(r->stall);
  free(r->committed);
  memset(r, 0, sizeof *r);
}

double plot_tokens_at(const plot_run *r, double step) {
  const double *v = r->st.v[CKPT_STATE_run_starts];
  for (size_t i = r->st.rows[CKPT_STATE_run_starts]; i-- > 0;) {
    const double *row = v + i * CKPT_START_NCOLS;
    if (step >= row[CKPT_START_start_step])
      return row[CKPT_START_tokens_at_start] +
             (step - row[CKPT_START_start_step]) * row[CKPT_START_global_batch] * row[CKPT_START_seq_len];
  }
  return r->step > 0 ? step * r->tokens_seen / (double)r->step : step;
}

/* The output options, checked before anything is read or written. */
typedef struct {
  const char *png, *data_dir, *metrics;
  int tokens, compare, json;
  const char *runs[INS_MAX_ARGS];
  int nruns;
} plot_opts;

static int parse(int argc, char **argv, plot_opts *o) {
  static const char *const extra[] = {"-o=", "--data-dir=", "--metrics=", "--x=", "--compare", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 1, INS_MAX_ARGS, PLOT_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  *o = (plot_opts){a.opt_val[0], a.opt_val[1], a.opt_val[2], 0, a.opt_set[4], a.json, {0}, a.npos};
  for (int i = 0; i < a.npos; i++) o->runs[i] = a.pos[i];
  const char *x = a.opt_val[3];
  if (x && strcmp(x, "step") && strcmp(x, "tokens"))
    return fprintf(stderr, "boost-inspect: plot: --x is step or tokens, not '%s'\n", x), 2;
  o->tokens = x && !strcmp(x, "tokens");
  if (!o->png && !o->data_dir) return fprintf(stderr, "boost-inspect: plot: -o FILE.png is required\n"), 2;
  if (o->compare && o->nruns < 2) return fprintf(stderr, "boost-inspect: plot: --compare needs two runs or more\n"), 2;
  if (!o->compare && o->nruns > 1)
    return fprintf(stderr, "boost-inspect: plot: one PATH (several runs: --compare A B ...)\n"), 2;
  if (o->compare && o->metrics)
    return fprintf(stderr, "boost-inspect: plot: --metrics names one run's file: not with --compare\n"), 2;
  return -1;
}

/* dir for the data: DIR, made when it does not exist, or an empty one. */
static int make_data_dir(const char *dir, boost_status *err) {
  if (mkdir(dir, 0777) == 0) return 0;
  if (errno != EEXIST) return boost_err(err, "--data-dir %s: %s", dir, strerror(errno));
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return boost_err(err, "--data-dir %s: not a directory", dir);
  char probe[PATH_MAX + 16];
  snprintf(probe, sizeof probe, "%s/plot.gp", dir);
  if (access(probe, F_OK) == 0) return boost_err(err, "--data-dir %s already holds a plot (plot.gp): give a new directory", dir);
  return 0;
}

static void report(const plot_opts *o, const plot_run *runs, int n) {
  if (o->json) {
    cJSON *j = cJSON_CreateObject();
    if (o->png) cJSON_AddStringToObject(j, "png", o->png);
    if (o->data_dir) cJSON_AddStringToObject(j, "data_dir", o->data_dir);
    cJSON_AddStringToObject(j, "x", o->tokens ? "tokens" : "step");
    cJSON *arr = cJSON_AddArrayToObject(j, "runs");
    for (int i = 0; i < n; i++) {
      plot_counts k;
      plot_count(&runs[i], &k);
      cJSON *r = cJSON_CreateObject();
      cJSON_AddStringToObject(r, "path", runs[i].path);
      cJSON_AddNumberToObject(r, "steps", (double)runs[i].step);
      cJSON_AddNumberToObject(r, "val_points", (double)k.val);
      cJSON_AddNumberToObject(r, "starts", (double)k.starts);
      cJSON_AddNumberToObject(r, "checkpoints", (double)k.ckpts);
      cJSON_AddNumberToObject(r, "throughput_points", (double)k.tput);
      cJSON_AddItemToArray(arr, r);
    }
    char *t = cJSON_PrintUnformatted(j);
    if (t) printf("%s\n", t);
    free(t);
    cJSON_Delete(j);
    return;
  }
  for (int i = 0; i < n; i++) {
    plot_counts k;
    plot_count(&runs[i], &k);
    printf("%s: %lld steps, %zu validation points, %zu start%s, %zu committed checkpoint%s, %s\n", runs[i].path,
           (long long)runs[i].step, k.val, k.starts, k.starts == 1 ? "" : "s", k.ckpts, k.ckpts == 1 ? "" : "s",
           k.tput ? "tokens/s from the metrics file" : "no tokens/s (no metrics file)");
  }
  if (o->png) printf("wrote %s\n", o->png);
  if (o->data_dir) printf("gnuplot script and data in %s\n", o->data_dir);
}

int cmd_plot(int argc, char **argv) {
  plot_opts o;
  int rc = parse(argc, argv, &o);
  if (rc >= 0) return rc;
  boost_status err = {0};
  char dir[PATH_MAX];
  const char *inputs[2 * INS_MAX_ARGS];
  plot_run runs[INS_MAX_ARGS];
  boost_status out_err = {0};
  int n = 0;
  rc = 1;
  for (; n < o.nruns; n++)
    if (plot_load_run(o.runs[n], o.metrics, &runs[n], &err) != 0) break;
  for (int i = 0; i < n; i++) inputs[2 * i] = runs[i].path, inputs[2 * i + 1] = o.runs[i];
  if (n < o.nruns) { /* err says which */
  } else if (o.png && boost_check_output(o.png, inputs, 2 * n, &out_err) != 0) {
    boost_err(&err, "%s", out_err.msg);
  } else if (o.data_dir ? make_data_dir(o.data_dir, &err) : ins_tmp_dir(dir, sizeof dir, &err)) {
  } else {
    if (o.data_dir) snprintf(dir, sizeof dir, "%s", o.data_dir);
    rc = plot_write(dir, runs, n, o.tokens, o.compare, &err) != 0 ||
         (o.png && (ins_run_gnuplot(dir, &err) != 0 || ins_copy_png(dir, o.png, inputs, 2 * n, &err) != 0));
    if (!o.data_dir) ins_remove_dir(dir);
  }
  if (rc) fprintf(stderr, "boost-inspect: %s\n", err.msg);
  else report(&o, runs, n);
  for (int i = 0; i < n; i++) plot_run_free(&runs[i]);
  return rc;
}
