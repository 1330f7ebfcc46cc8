/* boost-inspect: the training state's datasets (ckpt_meta.h CKPT_STATE_SETS:
 * loss and validation histories, the run's starts), read for summary and
 * plot, and checked for verify. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_h5.h"
#include "inspect.h"

void ins_state_free(ins_state *s) {
  for (int k = 0; k < CKPT_STATE_NSETS; k++) free(s->v[k]);
  memset(s, 0, sizeof *s);
}

/* The shape and dtype the schema gives set k (float32 or float64 as its
 * type; [n] or [n, cols]); 0 when d has them. */
static int shape_ok(int k, const ckr_dset *d) {
  const ckpt_state_desc *t = &ckpt_state_sets[k];
  const char *dtype = t->type == CKPT_META_T_F32 ? "float32" : "float64";
  if (strcmp(d->dtype, dtype) != 0) return -1;
  if (t->cols == 0) return d->ndim == 1 ? 0 : -1;
  return d->ndim == 2 && d->dims[1] == (hsize_t)t->cols ? 0 : -1;
}

static void expected(int k, char *out, size_t outlen) {
  const ckpt_state_desc *t = &ckpt_state_sets[k];
  const char *dtype = t->type == CKPT_META_T_F32 ? "float32" : "float64";
  if (t->cols == 0) snprintf(out, outlen, "%s [n]", dtype);
  else snprintf(out, outlen, "%s [n, %d]", dtype, t->cols);
}

int ins_state_read(const ckr_ckpt *c, ins_state *s, boost_status *err) {
  memset(s, 0, sizeof *s);
  for (int k = 0; k < CKPT_STATE_NSETS; k++) {
    char path[96], want[48];
    snprintf(path, sizeof path, CKPT_GROUP_STATE "/%s", ckpt_state_sets[k].name);
    const ckr_dset *d = ckr_find(c, path);
    if (!d) continue;
    size_t n;
    expected(k, want, sizeof want);
    if (shape_ok(k, d) != 0) {
      boost_err(err, "%s: expected %s", path, want);
    } else if ((s->v[k] = ckr_read_f64(c, d, &n, err))) {
      s->has[k] = 1;
      s->rows[k] = n / (size_t)ckpt_state_width(k);
      continue;
    }
    ins_state_free(s);
    return -1;
  }
  return 0;
}

const char *ins_start_code(const double *row, int col) {
  const int tp = col == CKPT_START_tp_mode, n = tp ? CKPT_TP_MODE_NCODES : CKPT_PRECISION_NCODES;
  const double v = row[col]; /* any double a file holds: compared before it is made an index */
  if (!(v >= 0 && v < n) || v != floor(v)) return "?";
  return tp ? ckpt_tp_mode_codes[(int)v] : ckpt_precision_codes[(int)v];
}

void ins_start_layout(const double *row, char *out, size_t outlen) {
  snprintf(out, outlen, "dp%g tp%g pp%g, %s, %s", row[CKPT_START_dp], row[CKPT_START_tp], row[CKPT_START_pp],
           ins_start_code(row, CKPT_START_tp_mode), ins_start_code(row, CKPT_START_precision));
}

static int whole(double x, double lo) { return isfinite(x) && x >= lo && x <= 9e15 && x == floor(x); }

/* Validations: steps whole, increasing, inside (0, step]; losses finite. */
static void check_val(const ckr_ckpt *c, const ins_state *s, ins_report *r) {
  const char *p = CKPT_GROUP_STATE "/val_loss_history";
  const double *v = s->v[CKPT_STATE_val_loss_history];
  for (size_t i = 0; i < s->rows[CKPT_STATE_val_loss_history]; i++) {
    const double step = v[2 * i], prev = i ? v[2 * i - 2] : 0;
    if (!whole(step, 1) || step <= prev || (c->meta.run.step >= 0 && step > (double)c->meta.run.step)) {
      ins_report_add(r, p, "row %zu: step %g is not a step after %g and at most the checkpoint's %lld", i, step, prev,
                     (long long)c->meta.run.step);
      return;
    }
    if (!isfinite(v[2 * i + 1]) || v[2 * i + 1] < 0) {
      ins_report_add(r, p, "row %zu: loss %g is not a finite value >= 0", i, v[2 * i + 1]);
      return;
    }
  }
}

/* One start's row: whole positive layout with world_size = dp.tp.pp, known
 * codes, start <= last step, finite times and tokens. */
static int start_row_ok(const double *row, char *why, size_t whylen) {
  for (int k = CKPT_START_global_batch; k <= CKPT_START_pp; k++)
    if (!whole(row[k], 1)) return snprintf(why, whylen, "%s %g is not a positive integer", ckpt_start_columns[k], row[k]), 0;
  if (row[CKPT_START_world_size] != row[CKPT_START_dp] * row[CKPT_START_tp] * row[CKPT_START_pp])
    return snprintf(why, whylen, "world_size %g is not dp*tp*pp", row[CKPT_START_world_size]), 0;
  if (!whole(row[CKPT_START_tp_mode], 0) || row[CKPT_START_tp_mode] >= CKPT_TP_MODE_NCODES ||
      !whole(row[CKPT_START_precision], 0) || row[CKPT_START_precision] >= CKPT_PRECISION_NCODES)
    return snprintf(why, whylen, "unknown tp_mode or precision code (%g, %g)", row[CKPT_START_tp_mode],
                    row[CKPT_START_precision]), 0;
  if (!whole(row[CKPT_START_start_step], 0) || !whole(row[CKPT_START_last_step], 0) ||
      row[CKPT_START_last_step] < row[CKPT_START_start_step])
    return snprintf(why, whylen, "steps %g to %g", row[CKPT_START_start_step], row[CKPT_START_last_step]), 0;
  if (!isfinite(row[CKPT_START_start_unix_s]) || !isfinite(row[CKPT_START_last_unix_s]) ||
      !isfinite(row[CKPT_START_tokens_at_start]) || row[CKPT_START_tokens_at_start] < 0)
    return snprintf(why, whylen, "times or tokens not finite"), 0;
  return 1;
}

/* The starts: each row sound, each job going on from the step the previous
 * one's last save reached, the newest reaching this checkpoint's step on
 * the layout that wrote it (unless boost-reshard rewrote it since). */
static void check_starts(const ckr_ckpt *c, const ins_state *s, ins_report *r) {
  const char *p = CKPT_GROUP_STATE "/run_starts";
  const size_t n = s->rows[CKPT_STATE_run_starts];
  const double *v = s->v[CKPT_STATE_run_starts];
  char why[160];
  if (n == 0) {
    ins_report_add(r, p, "empty (a run that saves has started at least once)");
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const double *row = v + i * CKPT_START_NCOLS;
    if (!start_row_ok(row, why, sizeof why)) {
      ins_report_add(r, p, "row %zu: %s", i, why);
      return;
    }
    if (i + 1 < n && row[CKPT_START_last_step] != row[CKPT_START_NCOLS + CKPT_START_start_step]) {
      ins_report_add(r, p, "row %zu reaches step %g, the next start is at step %g", i, row[CKPT_START_last_step],
                     row[CKPT_START_NCOLS + CKPT_START_start_step]);
      return;
    }
  }
  const double *last = v + (n - 1) * CKPT_START_NCOLS;
  if (c->meta.run.step >= 0 && last[CKPT_START_last_step] != (double)c->meta.run.step)
    ins_report_add(r, p, "the newest start reaches step %g, the checkpoint is of step %lld", last[CKPT_START_last_step],
                   (long long)c->meta.run.step);
  ckpt_layout l; /* boost-reshard's outputs carry the run's history to a layout of their own */
  if (!ckpt_meta_has(&c->meta, CKPT_META_F_resharded_from) && ckpt_layout_parse(c->meta.run.layout, &l) == 0 &&
      (l.dp != last[CKPT_START_dp] || l.tp != last[CKPT_START_tp] || l.pp != last[CKPT_START_pp])) {
    ins_start_layout(last, why, sizeof why);
    ins_report_add(r, p, "the newest start's layout (%s) is not the one that wrote the file (dp%d tp%d pp%d)", why, l.dp,
                   l.tp, l.pp);
  }
}

void ins_check_state(const ckr_ckpt *c, ins_report *r) {
  ins_state s;
  boost_status err = {0};
  for (int k = 0; k < CKPT_STATE_NSETS; k++) { /* presence and shape, each reported */
    char path[96], want[48];
    snprintf(path, sizeof path, CKPT_GROUP_STATE "/%s", ckpt_state_sets[k].name);
    const ckr_dset *d = ckr_find(c, path);
    expected(k, want, sizeof want);
    if (!d && (ckpt_state_sets[k].flags & CKPT_META_RESUME)) ins_report_add(r, path, "missing");
    else if (d && shape_ok(k, d) != 0) ins_report_add(r, path, "expected %s", want);
    else if (d && k == CKPT_STATE_loss_history && c->meta.run.step >= 0 && (int64_t)d->dims[0] != c->meta.run.step)
      ins_report_add(r, path, "expected float32 [step = %lld]", (long long)c->meta.run.step);
  }
  if (ins_state_read(c, &s, &err) != 0) return; /* reported above, or by the content check */
  if (s.has[CKPT_STATE_val_loss_history]) check_val(c, &s, r);
  if (s.has[CKPT_STATE_run_starts]) check_starts(c, &s, r);
  ins_state_free(&s);
}
