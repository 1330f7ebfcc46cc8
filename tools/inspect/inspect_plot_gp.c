/* boost-inspect plot: the data files gnuplot reads and the script, plot.gp.
 * Files have fixed names (loss_0.dat, val_0.dat, ...; columns: step, tokens,
 * then values) and only what a run has is written and plotted; the only
 * text of the user's in the script (run names) is sanitized. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"
#include "inspect_plot.h"
#include "util.h"

static const char *const COLORS[INS_MAX_ARGS] = {"#1f4e9a", "#d95f02", "#1b9e77", "#7570b3",
                                                 "#e7298a", "#66a61e", "#a6761d", "#444444"};
#define RESTART_COLOR "#c0392b"

void plot_count(const plot_run *r, plot_counts *k) {
  memset(k, 0, sizeof *k);
  k->val = r->st.rows[CKPT_STATE_val_loss_history];
  k->starts = r->st.rows[CKPT_STATE_run_starts];
  for (int64_t s = 1; s <= r->step; s++) {
    k->ckpts += r->committed[s] != 0;
    k->tput += !isnan(r->tput[s]);
    k->stalls += !isnan(r->stall[s]);
  }
}

typedef struct {
  const char *dir;
  boost_status *err;
  int bad;
} out_ctx;

static FILE *open_data(out_ctx *o, const char *name, int run, const char *header) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/%s_%d.dat", o->dir, name, run);
  FILE *f = fopen(p, "w");
  if (!f) o->bad = boost_err(o->err, "cannot write %s: %s", p, strerror(errno));
  else fprintf(f, "# step tokens %s\n", header);
  return f;
}

static void close_data(out_ctx *o, FILE *f, const char *name, int run) {
  if (f && (ferror(f) | fclose(f)) && !o->bad)
    o->bad = boost_err(o->err, "cannot write %s/%s_%d.dat: %s", o->dir, name, run, strerror(errno));
}

/* Half the window of the smoothed loss: a 20th of the run, 1 to 101 steps. */
static int64_t half_window(int64_t steps) { return steps / 40 < 50 ? steps / 40 : 50; }

/* The training loss and its centred moving average. */
static void write_loss(out_ctx *o, const plot_run *r, int i) {
  FILE *f = open_data(o, "loss", i, "loss smoothed");
  if (!f) return;
  const double *loss = r->st.v[CKPT_STATE_loss_history];
  const int64_t n = r->step, h = half_window(n);
  for (int64_t s = 0; s < n; s++) {
    double sum = 0;
    int64_t m = 0;
    for (int64_t k = s - h < 0 ? 0 : s - h; k <= s + h && k < n; k++) sum += loss[k], m++;
    fprintf(f, "%lld %.17g %.9g %.9g\n", (long long)(s + 1), plot_tokens_at(r, (double)(s + 1)), loss[s], sum / (double)m);
  }
  close_data(o, f, "loss", i);
}

/* Validation points; committed checkpoints on the loss curve; tokens/s;
 * stalls; starts. */
static void write_series(out_ctx *o, const plot_run *r, int i, const plot_counts *k) {
  FILE *f;
  const double *v = r->st.v[CKPT_STATE_val_loss_history], *loss = r->st.v[CKPT_STATE_loss_history];
  if (k->val && (f = open_data(o, "val", i, "val_loss"))) {
    for (size_t j = 0; j < k->val; j++) fprintf(f, "%.0f %.17g %.9g\n", v[2 * j], plot_tokens_at(r, v[2 * j]), v[2 * j + 1]);
    close_data(o, f, "val", i);
  }
  if (k->ckpts && (f = open_data(o, "ckpt", i, "loss stall_ms"))) {
    for (int64_t s = 1; s <= r->step; s++)
      if (r->committed[s]) fprintf(f, "%lld %.17g %.9g %.6g\n", (long long)s, plot_tokens_at(r, (double)s), loss[s - 1], 1e3 * r->stall[s]);
    close_data(o, f, "ckpt", i);
  }
  if (k->tput && (f = open_data(o, "tput", i, "tokens_per_s"))) {
    for (int64_t s = 1; s <= r->step; s++)
      if (!isnan(r->tput[s])) fprintf(f, "%lld %.17g %.9g\n", (long long)s, plot_tokens_at(r, (double)s), r->tput[s]);
    close_data(o, f, "tput", i);
  }
  if (k->stalls && (f = open_data(o, "stall", i, "stall_ms"))) {
    for (int64_t s = 1; s <= r->step; s++)
      if (!isnan(r->stall[s])) fprintf(f, "%lld %.17g %.6g\n", (long long)s, plot_tokens_at(r, (double)s), 1e3 * r->stall[s]);
    close_data(o, f, "stall", i);
  }
  if (k->starts && (f = open_data(o, "starts", i, "world_size dp tp pp tp_mode precision"))) {
    for (size_t j = 0; j < k->starts; j++) {
      const double *row = r->st.v[CKPT_STATE_run_starts] + j * CKPT_START_NCOLS;
      fprintf(f, "%.0f %.17g %.0f %.0f %.0f %.0f %.0f %.0f\n", row[CKPT_START_start_step],
              plot_tokens_at(r, row[CKPT_START_start_step]), row[CKPT_START_world_size], row[CKPT_START_dp],
              row[CKPT_START_tp], row[CKPT_START_pp], row[CKPT_START_tp_mode], row[CKPT_START_precision]);
    }
    close_data(o, f, "starts", i);
  }
}

/* A dashed line and a label at every start of run 0 ("restart 2 at step
 * 45: 2 ranks, dp1 tp2 pp1, vanilla, fp32"), in both panels. */
static void start_marks(FILE *gp, const plot_run *r, int tokens) {
  for (size_t j = 0; j < r->st.rows[CKPT_STATE_run_starts]; j++) {
    const double *row = r->st.v[CKPT_STATE_run_starts] + j * CKPT_START_NCOLS;
    const double s = row[CKPT_START_start_step], x = tokens ? plot_tokens_at(r, s) : s;
    char lay[96], what[64], level[16];
    ins_start_layout(row, lay, sizeof lay);
    ins_start_level(r->path, row, level, sizeof level);
    const int from_zero = r->st.v[CKPT_STATE_run_starts][CKPT_START_start_step] == 0; /* else: an older history */
    if (j == 0 && from_zero) snprintf(what, sizeof what, "start");
    else snprintf(what, sizeof what, "restart %zu", from_zero ? j : j + 1);
    if (level[0] && strcmp(level, "fresh") != 0) /* which level it resumed from */
      snprintf(what + strlen(what), sizeof what - strlen(what), " (%s)", level);
    fprintf(gp, "set arrow from first %.17g, graph 0 to first %.17g, graph 1 nohead dt 2 lw 1.5 lc rgb '%s'\n", x, x,
            RESTART_COLOR);
    fprintf(gp, "set label '%s at step %.0f: %.0f rank%s, %s' at first %.17g, graph 0.02 rotate by 90 left offset "
                "character 1,0 font ',7' tc rgb '%s'\n",
            what, s, row[CKPT_START_world_size], row[CKPT_START_world_size] == 1 ? "" : "s", lay, x, RESTART_COLOR);
  }
}

/* The step guard's ledger (docs/GUARD.md) on run 0's loss panel: a dotted
 * line at every flagged step (the step it would have been) and, at every
 * rollback, a label with the step it went back to and the batches it
 * skipped. At most 40 flagged steps are drawn (a run that gave up may have
 * many); the summary lists them all. */
#define GUARD_COLOR "#e67e22"
static void guard_marks(FILE *gp, const plot_run *r, int tokens) {
  const size_t ne = r->st.rows[CKPT_STATE_guard_events], ns = r->st.rows[CKPT_STATE_skipped_batches];
  for (size_t j = 0; j < ne && j < 40; j++) {
    const double s = r->st.v[CKPT_STATE_guard_events][j * GUARD_EVENT_COLS] + 1, x = tokens ? plot_tokens_at(r, s) : s;
    fprintf(gp, "set arrow from first %.17g, graph 0 to first %.17g, graph 1 nohead dt 3 lw 1 lc rgb '%s'\n", x, x,
            GUARD_COLOR);
  }
  for (size_t j = 0; j < ns; j++) {
    const double *row = r->st.v[CKPT_STATE_skipped_batches] + j * GUARD_SKIP_COLS;
    if ((int)row[2] != GUARD_SKIP_ROLLBACK && (int)row[2] != GUARD_SKIP_CONFIG) continue;
    const double x = tokens ? plot_tokens_at(r, row[3]) : row[3];
    fprintf(gp, "set label '%s at step %.0f: batches %.0f-%.0f skipped' at first %.17g, graph 0.98 rotate by 90 right "
                "offset character 1,0 font ',7' tc rgb '%s'\n",
            (int)row[2] == GUARD_SKIP_ROLLBACK ? "rollback" : "train.skip_batches", row[3], row[0], row[1], x,
            GUARD_COLOR);
  }
  if (ne)
    fprintf(gp, "set label '%zu step%s flagged by the guard (dotted)' at graph 0.99, graph 0.9 right font ',8' tc rgb "
                "'%s'\n",
            ne, ne == 1 ? "" : "s", GUARD_COLOR);
}

/* The loss panel of one run. */
static void loss_panel(FILE *gp, const plot_run *r, const plot_counts *k, int tokens, int window) {
  const int x = tokens ? 2 : 1;
  start_marks(gp, r, tokens);
  guard_marks(gp, r, tokens);
  fprintf(gp, "set ylabel 'loss'\n");
  if (window > 1)
    fprintf(gp, "plot 'loss_0.dat' using %d:3 with lines lc rgb '#a9c1e0' title 'training loss', \\\n"
                "     'loss_0.dat' using %d:4 with lines lw 2 lc rgb '%s' title 'training loss (mean of %d steps)'",
            x, x, COLORS[0], window);
  else fprintf(gp, "plot 'loss_0.dat' using %d:3 with lines lw 2 lc rgb '%s' title 'training loss'", x, COLORS[0]);
  if (k->val) fprintf(gp, ", \\\n     'val_0.dat' using %d:3 with linespoints pt 7 ps 1.2 lc rgb '%s' title 'validation loss'", x, COLORS[1]);
  if (k->ckpts)
    fprintf(gp, ", \\\n     'ckpt_0.dat' using %d:3 with points pt 9 ps 1.6 lc rgb '%s' title 'committed checkpoint'", x, COLORS[2]);
  fprintf(gp, "\n");
}

/* The second panel: tokens/s, and the checkpoints' stall on the right axis. */
static void speed_panel(FILE *gp, const plot_counts *k, int tokens) {
  const int x = tokens ? 2 : 1;
  const int both = k->tput && k->stalls;
  fprintf(gp, "unset label\nunset title\nset ylabel '%s'\nset yrange [0:*]\n", k->tput ? "tokens/s" : "checkpoint stall (ms)");
  if (both) fprintf(gp, "set ytics nomirror\nset y2label 'checkpoint stall (ms)'\nset y2tics\nset y2range [0:*]\n");
  fprintf(gp, "plot ");
  if (k->tput) fprintf(gp, "'tput_0.dat' using %d:3 with lines lc rgb '%s' title 'tokens/s'%s", x, COLORS[0], both ? ", " : "");
  if (k->stalls)
    fprintf(gp, "'stall_0.dat' using %d:3 axes x1%s with impulses lw 3 lc rgb '%s' title 'checkpoint stall (ms)'", x,
            both ? "y2" : "y1", COLORS[1]);
  fprintf(gp, "\n");
}

/* Every run's smoothed training loss and validation loss. */
static void compare_panel(FILE *gp, const plot_run *runs, int n, int tokens) {
  const int x = tokens ? 2 : 1;
  fprintf(gp, "set ylabel 'loss'\nplot ");
  for (int i = 0; i < n; i++) {
    plot_counts k;
    plot_count(&runs[i], &k);
    fprintf(gp, "%s'loss_%d.dat' using %d:4 with lines lw 2 lc rgb '%s' title '%s: training loss (smoothed)'", i ? ", \\\n     " : "",
            i, x, COLORS[i], runs[i].label);
    if (k.val)
      fprintf(gp, ", \\\n     'val_%d.dat' using %d:3 with linespoints dt 2 pt 7 lc rgb '%s' title '%s: validation loss'", i, x,
              COLORS[i], runs[i].label);
  }
  fprintf(gp, "\n");
}

static void write_script(out_ctx *o, const plot_run *runs, int n, int tokens, int compare) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/plot.gp", o->dir);
  FILE *gp = fopen(p, "w");
  if (!gp) {
    o->bad = boost_err(o->err, "cannot write %s: %s", p, strerror(errno));
    return;
  }
  plot_counts k;
  plot_count(&runs[0], &k);
  const int two = !compare && (k.tput || k.stalls), window = (int)(2 * half_window(runs[0].step) + 1);
  fprintf(gp, "# boost-inspect plot: %s\nset terminal png size 1000,%d\nset output 'plot.png'\nset termoption noenhanced\n",
          compare ? "runs compared" : runs[0].label, two ? 950 : 600);
  /* The key below each panel: the start labels stand in the plot. */
  fprintf(gp, "set grid\nset key below horizontal\nset xrange [0:*]\nset lmargin 10\nset rmargin 10\nset xlabel '%s'\n",
          tokens ? "tokens" : "step");
  if (two) fprintf(gp, "set multiplot layout 2,1\n");
  if (compare) fprintf(gp, "set title 'boost runs compared'\n");
  else fprintf(gp, "set title '%s: step %lld'\n", runs[0].label, (long long)runs[0].step);
  if (compare) compare_panel(gp, runs, n, tokens);
  else loss_panel(gp, &runs[0], &k, tokens, window);
  if (two) {
    speed_panel(gp, &k, tokens);
    fprintf(gp, "unset multiplot\n");
  }
  if ((ferror(gp) | fclose(gp)) && !o->bad) o->bad = boost_err(o->err, "cannot write %s: %s", p, strerror(errno));
}

int plot_write(const char *dir, const plot_run *runs, int n, int tokens, int compare, boost_status *err) {
  out_ctx o = {dir, err, 0};
  for (int i = 0; i < n && !o.bad; i++) {
    plot_counts k;
    plot_count(&runs[i], &k);
    write_loss(&o, &runs[i], i);
    if (!o.bad) write_series(&o, &runs[i], i, &k);
  }
  if (!o.bad) write_script(&o, runs, n, tokens, compare);
  return o.bad ? -1 : 0;
}
