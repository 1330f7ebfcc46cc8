/* boost-inspect internals: opening a checkpoint defensively, the dataset
 * list, whole-dataset reads, the verifier (also the fuzzing entry point),
 * and the subcommands. docs/INSPECT.md describes the tool. */
#ifndef BOOST_INSPECT_H
#define BOOST_INSPECT_H

#include <cJSON.h>
#include <hdf5.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_meta.h"
#include "status.h"

#define INS_ERR 1024

typedef struct {
  char path[512];
  char category[16]; /* weights | moments | activations | state | other */
  char dtype[16];    /* float32 | float64 | int32 | int64 | uint64 | other */
  int ndim;
  hsize_t dims[8];
  double raw_bytes, stored_bytes;
  int has_checksum;
  uint64_t checksum;
} ins_dset;

typedef struct {
  hid_t f, fapl;
  char path[4200];
  ins_dset *d;
  int n, cap;
  int walk_failed; /* H5Lvisit stopped on an error: the list is incomplete */
  char walk_error[INS_ERR];
  ckpt_meta meta; /* root attributes, through the schema (NULL / -1 when absent or unreadable) */
} ins_ckpt;

/* Opens PATH (a file, or a directory: its `latest`, else newest step_*.h5),
 * checks that it is a boost checkpoint of a known format version and lists
 * its datasets. Returns 0, or -1 with one line in err. */
int ins_open(const char *arg, ins_ckpt *c, boost_status *err);
/* The same on an in-memory file image (fuzzing); buf must outlive c. */
int ins_open_image(const void *buf, size_t len, ins_ckpt *c, boost_status *err);
void ins_close(ins_ckpt *c);
/* ins_open, printing its error (one line on stderr). With need_complete, a
 * file whose group walk failed is refused as well: every subcommand but
 * tensors and verify (which report the walk themselves) would otherwise
 * print a silently shortened result. Returns 0, or 1 (c closed). */
int ins_open_or_say(const char *arg, ins_ckpt *c, int need_complete);

/* A dataset by name, with or without the leading '/'; NULL when absent. */
const ins_dset *ins_find(const ins_ckpt *c, const char *name);
/* Whole dataset in its own element type (4 or 8 bytes per element); every
 * chunk is decoded. NULL with err on failure. Caller frees. */
void *ins_read(const ins_ckpt *c, const ins_dset *d, size_t *nelem, size_t *esz, boost_status *err);
/* Reads a float dataset (float32 or float64) as doubles. */
double *ins_read_f64(const ins_ckpt *c, const ins_dset *d, size_t *nelem, boost_status *err);
double ins_numel(const ins_dset *d);

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
int ins_verify(ins_ckpt *c, ins_report *r); /* returns r->n */
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
int ins_state_read(const ins_ckpt *c, ins_state *s, boost_status *err);
void ins_state_free(ins_state *s);
/* verify: the sets present with their shapes, the loss history of `step`
 * values, validations in order, the starts a consistent history ending on
 * the layout and step of the file. */
void ins_check_state(const ins_ckpt *c, ins_report *r);
/* "dp2 tp2 pp2, btp, fp32": a /state/run_starts row's layout and precision;
 * the name of its tp_mode or precision code ("?" for a code the format has not). */
void ins_start_layout(const double *row, char *out, size_t outlen);
const char *ins_start_code(const double *row, int col);

/* The precision of the run that wrote a checkpoint (root attribute
 * `precision`; files older than it read as fp32): 1 for bf16. Its stored
 * activations have that precision's dtype (bfloat16 or float32). */
int ins_is_bf16(const ins_ckpt *c);
const char *ins_acts_dtype(const ins_ckpt *c);

/* Expected tensors of the model a stored config describes. */
typedef struct {
  char name[96];
  int ndim;
  int64_t shape[4];
} ins_tensor;
/* Parses the stored config JSON into the trainer's config and lists the
 * tensors it implies (names under /model without the group). Returns the
 * count, or -1 with err. *out is malloc'd. cfg_out (may be NULL) receives
 * the train_config (opaque here: a struct train_config *). */
int ins_expected_tensors(const char *config_json, ins_tensor **out, void *cfg_out, boost_status *err);

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

/* Output helpers. */
void ins_print_json(cJSON *o);
void ins_shape_str(const ins_dset *d, char *out, size_t outlen);

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
