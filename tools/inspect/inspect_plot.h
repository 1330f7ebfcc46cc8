/* boost-inspect plot's pieces (inspect_plot.c: the runs and the command;
 * inspect_plot_gp.c: the data files and the gnuplot script). */
#ifndef BOOST_INSPECT_PLOT_H
#define BOOST_INSPECT_PLOT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "inspect.h"
#include "status.h"

/* One run, as its checkpoint and directory tell it. Arrays by step
 * (index 1..step; NAN / 0 where nothing is known). */
typedef struct {
  char path[4200];        /* the checkpoint file (ckr_ckpt.path) */
  char label[96];         /* the name it was given, safe for the script */
  char metrics[PATH_MAX]; /* the metrics file read ("" none) */
  int64_t step;
  double tokens_seen;
  ins_state st;           /* loss and validation histories, starts */
  double *tput, *stall;   /* tokens/s (metrics file), checkpoint stall in s (checkpoints.jsonl) */
  unsigned char *committed; /* a committed checkpoint of that step */
  int has_log;            /* the directory has checkpoints.jsonl */
} plot_run;

/* arg (a checkpoint file or directory) and its files into r; metrics: the
 * metrics file to read (NULL: the stored config's, when it exists). 0, or
 * -1 with one line in err. */
int plot_load_run(const char *arg, const char *metrics, plot_run *r, boost_status *err);
void plot_run_free(plot_run *r);
/* Tokens seen after `step` steps (each start's global batch and sequence
 * length from its step on; else the checkpoint's mean per step). */
double plot_tokens_at(const plot_run *r, double step);
/* The level a start of the run came from (a /state/run_starts row of the
 * checkpoint file ckpt_path): "local", "partner", "file" or "fresh", from
 * the start records the checkpoint directory's checkpoints.jsonl holds when
 * the run had the local level on (docs/LOCAL.md); "" when it holds none for
 * that start. */
void ins_start_level(const char *ckpt_path, const double *row, char *out, size_t outlen);
/* Printable ASCII without quotes or backslashes (the tail of a long text). */
void plot_sanitize(const char *in, char *out, size_t outlen);

/* What a run's picture holds. */
typedef struct {
  size_t val, starts, ckpts, tput, stalls;
} plot_counts;
void plot_count(const plot_run *r, plot_counts *k);

/* The data files and plot.gp (which writes plot.png) into dir: one run in
 * two panels (the second when it has tokens/s or stalls), or the runs
 * overlaid (compare). x: tokens instead of steps. 0, or -1 with err. */
int plot_write(const char *dir, const plot_run *runs, int n, int tokens, int compare, boost_status *err);

#endif
