/* boost-inspect diff A B: per-dataset max |a - b| and max relative
 * difference |a - b| / max(|a|, |b|) over the datasets both hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "tool_ckpt.h"

static const char *const DIFF_HELP =
    "usage: boost-inspect diff [--json] A B\n"
    "Every dataset of A and B: max absolute and max relative difference\n"
    "(|a-b| / max(|a|,|b|); NaN against NaN counts as equal), differing shapes,\n"
    "datasets only one side holds. A checkpoint against itself is all zeros.\n"
    "The run's records -- its starts (/state/run_starts: times, layouts) and the\n"
    "step guard's ledger (/state/guard_events, /state/skipped_batches) -- are\n"
    "not compared: two runs of the same training differ there (a run healed by\n"
    "a rollback and a fresh run given its skipped batches).\n"
    "Exit 0 when both could be compared (whatever the differences), 1 otherwise.\n";

static void diff_values(const double *x, const double *y, size_t n, double *maxabs, double *maxrel, size_t *ndiff) {
  *maxabs = *maxrel = 0;
  *ndiff = 0;
  for (size_t i = 0; i < n; i++) {
    double a = x[i], b = y[i], d, r;
    if (isnan(a) && isnan(b)) continue;
    if (a == b) continue;
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) d = r = INFINITY;
    else {
      d = fabs(a - b);
      r = d / fmax(fabs(a), fabs(b));
    }
    (*ndiff)++;
    if (d > *maxabs) *maxabs = d;
    if (r > *maxrel) *maxrel = r;
  }
}

/* A state dataset that records how the run went, not what it computed. */
static int is_record(const char *path) {
  const int k = ckpt_state_find(path);
  return k >= 0 && (ckpt_state_sets[k].flags & CKPT_META_RECORD);
}

static void add_row(cJSON *arr, int json, const char *name, const char *status, double ma, double mr, size_t nd) {
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "status", status);
    if (!strcmp(status, "compared")) {
      if (isfinite(ma)) cJSON_AddNumberToObject(o, "max_abs", ma); else cJSON_AddStringToObject(o, "max_abs", "inf");
      if (isfinite(mr)) cJSON_AddNumberToObject(o, "max_rel", mr); else cJSON_AddStringToObject(o, "max_rel", "inf");
      cJSON_AddNumberToObject(o, "differing_elements", (double)nd);
    }
    cJSON_AddItemToArray(arr, o);
  } else if (!strcmp(status, "compared"))
    printf("  %-52s max abs %-12.6g max rel %-12.6g (%zu differ)\n", name, ma, mr, nd);
  else printf("  %-52s %s\n", name, status);
}

int cmd_diff(int argc, char **argv) {
  ins_args a;
  int p = ins_parse(argc, argv, NULL, 2, 2, DIFF_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  ckr_ckpt x, y;
  boost_status err = {0};
  if (tool_open_or_say(a.pos[0], &x, 1)) return 1;
  if (tool_open_or_say(a.pos[1], &y, 1)) {
    ckr_close(&x);
    return 1;
  }
  cJSON *arr = cJSON_CreateArray();
  int rc = 0, differ = 0;
  for (int i = 0; i < x.n; i++) {
    const ckr_dset *d = &x.d[i], *e = ckr_find(&y, d->path);
    if (is_record(d->path)) { /* times and layouts: not the training's values */
      add_row(arr, a.json, d->path, "run record, not compared", 0, 0, 0);
      continue;
    }
    if (!e) { add_row(arr, a.json, d->path, "only in A", 0, 0, 0); differ++; continue; }
    int same = d->ndim == e->ndim;
    for (int k = 0; same && k < d->ndim; k++) same = d->dims[k] == e->dims[k];
    if (!same) { add_row(arr, a.json, d->path, "shapes differ", 0, 0, 0); differ++; continue; }
    size_t n, m, nd;
    double *u = ckr_read_f64(&x, d, &n, &err), *v = u ? ckr_read_f64(&y, e, &m, &err) : NULL;
    if (!u || !v) {
      fprintf(stderr, "boost-inspect: %s\n", err.msg);
      rc = 1;
    } else {
      double ma, mr;
      diff_values(u, v, n, &ma, &mr, &nd);
      differ += nd > 0;
      add_row(arr, a.json, d->path, "compared", ma, mr, nd);
    }
    free(u), free(v);
  }
  for (int i = 0; i < y.n; i++)
    if (!ckr_find(&x, y.d[i].path) && !is_record(y.d[i].path)) add_row(arr, a.json, y.d[i].path, "only in B", 0, 0, 0), differ++;
  if (a.json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "a", x.path);
    cJSON_AddStringToObject(o, "b", y.path);
    cJSON_AddNumberToObject(o, "differing_datasets", differ);
    cJSON_AddItemToObject(o, "datasets", arr);
    tool_print_json(o);
  } else {
    cJSON_Delete(arr);
    printf("diff: %d dataset%s differ\n", differ, differ == 1 ? "" : "s");
  }
  ckr_close(&x), ckr_close(&y);
  return rc;
}
