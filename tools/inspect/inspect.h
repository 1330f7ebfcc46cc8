/* boost-inspect internals over the shared checkpoint reader (ckpt_reader.h):
 * the verifier (also the fuzzing entry point), the training state's
 * datasets, safe output files, gnuplot, and the subcommands with their
 * option parsing. docs/INSPECT.md describes the tool. */
#ifndef BOOST_INSPECT_H
#define BOOST_INSPECT_H

#include <cJSON.h>
#include <hdf5.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_meta.h"
#include "ckpt_reader.h"
#include "status.h"

/* Verification (docs/INSPECT.md). Problems are collected as lines
 * "<object>: <what>"; digest summarises every dataset's content and every
 * root attribute (equal digests: equal content). */
typedef struct {
  int ran;             /* the forward pass ran on the stored tokens */
  int datasets;        /* stored activation datasets compared */
  int mismatched;      /* of which differ beyond the tolerance */
  int bitwise;         /* every one equal bit for bit */
  double max_rel_diff; /* largest max |diff| / max(1, max |stored|) */
  int bf16;            /* recomputed in bf16 (the checkpoint's precision), else fp32 */
  double tolerance;    /* the bound on max_rel_diff for its precision */
  const char *tolerance_text; /* the same, as written: "1e-5", "2^-4" */
  char skipped[160];   /* why they were not recomputed, when not */
} ins_acts_check;
typedef struct {
  char **lines;
  int n, cap;
  int checked; /* datasets whose content was decoded and hashed */
  uint64_t digest;
  int no_recompute;    /* in: do not recompute stored activations (verify --no-recompute) */
  int threads;         /* in: threads decoding the tensors' chunks (0: every core) */
  ins_acts_check acts; /* out: the recomputation, when activations are stored */
} ins_report;
int ins_verify(ckr_ckpt *c, ins_report *r); /* returns r->n */
void ins_report_add(ins_report *r, const char *obj, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ins_report_free(ins_report *r);
/* Opens and verifies a file image; returns 0 ok, 1 problem (fuzz target). */
int ins_verify_image(const void *buf, size_t len, uint64_t *digest);

/* The training state's datasets (ckpt_meta.h CKPT_STATE_SETS) as doubles:
 * v[k] holds rows[k] rows of set k (has[k]: the file holds it). */
typedef struct {
  double *v[CKPT_STATE_NSETS];
  size_t rows[CKPT_STATE_NSETS];
  int has[CKPT_STATE_NSETS];
} ins_state;
/* Every set the file holds, read whole; -1 with err (and s empty) when one
 * does not have the schema's dtype and shape or cannot be read. */
int ins_state_read(const ckr_ckpt *c, ins_state *s, boost_status *err);
void ins_state_free(ins_state *s);
/* verify: the sets present with their shapes, the loss history of `step`
 * values, validations in order, the starts a consistent history ending on
 * the layout and step of the file. */
void ins_check_state(const ckr_ckpt *c, ins_report *r);
/* "dp2 tp2 pp2, btp, fp32": a /state/run_starts row's layout and precision;
 * the name of its tp_mode or precision code ("?" for a code the format has not). */
void ins_start_layout(const double *row, char *out, size_t outlen);
const char *ins_start_code(const double *row, int col);

/* An output file written safely: OUT is checked first (boost_check_output:
 * not a device, FIFO, directory or one of the inputs), the bytes go to
 * OUT.tmp, which commit fsyncs and renames over OUT (then fsyncs its
 * directory); abort (and any failure) removes OUT.tmp only, so OUT keeps its
 * old content. Errors name the file and the reason. */
typedef struct {
  int fd;
  char path[PATH_MAX], tmp[PATH_MAX + 8];
} ins_out;
int ins_out_open(ins_out *o, const char *path, const char *const *inputs, int n_inputs, boost_status *err);
int ins_out_write(ins_out *o, const void *buf, size_t n, boost_status *err);
int ins_out_commit(ins_out *o, boost_status *err); /* 0, or -1 (aborted) */
void ins_out_abort(ins_out *o);

/* inspect_gnuplot.c. A fresh directory under $TMPDIR (or /tmp); a directory
 * and the files in it removed. */
int ins_tmp_dir(char *dir, size_t dirlen, boost_status *err);
void ins_remove_dir(const char *dir);
/* gnuplot plot.gp run in dir (its working directory; output into
 * dir/gnuplot.log), fork and exec, no shell. 0, or -1 with one line in err:
 * gnuplot not installed, or its first error. */
int ins_run_gnuplot(const char *dir, boost_status *err);
/* dir/plot.png through ins_out into outp (inputs: what it may not be). */
int ins_copy_png(const char *dir, const char *outp, const char *const *inputs, int ninputs, boost_status *err);


/* Subcommands: argc/argv start after the subcommand name. Each returns the
 * exit status (0 ok, 1 checkpoint problem, 2 usage). */
/* summary of a folder: its set-aside branches (inspect_branches.c); nothing
 * when PATH is a file. */
void ins_branches_text(const char *path);
void ins_branches_json(cJSON *o, const char *path);
int cmd_summary(int argc, char **argv);
int cmd_tensors(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_spectrum(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_dump(int argc, char **argv);

/* Common option parsing: --json and --help; returns the positional
 * arguments in pos (at most maxpos), -1 on a usage error (message printed),
 * 1 when --help was printed. Unknown options listed in extra (NULL-ended,
 * "--name" takes a value when followed by '=' in the table: "--tensor=")
 * are returned through vals. */
#define INS_MAX_ARGS 8
typedef struct {
  int json;
  const char *pos[INS_MAX_ARGS];
  int npos;
  const char *opt_val[INS_MAX_ARGS]; /* values of the extra options, in table order */
  int opt_set[INS_MAX_ARGS];
} ins_args;
int ins_parse(int argc, char **argv, const char *const *extra, int minpos, int maxpos, const char *help,
              ins_args *a);

#endif
