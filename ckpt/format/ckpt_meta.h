/* The checkpoint schema: every root attribute of a checkpoint file, in one
 * table -- its name, its type, who writes it and who needs it -- and the one
 * struct that holds them (docs/CHECKPOINT_FORMAT.md, "Root attributes").
 * The writer, the reader, ckpt_peek, boost-inspect and boost-reshard all
 * go through this table: a root field is added here (one line) and in the
 * format's documentation, and where its value comes from.
 *
 * CKPT_META_FIELDS(X) lists X(group, name, type, flags, absent): group is
 * the sub-struct of ckpt_meta that holds the field -- `package` (the
 * checkpoint package's own: the format's identity, n_tensors), `run` (the
 * run's metadata block) or `reshard` (boost-reshard's outputs only) --,
 * type I64, F64 or STR; `absent` is what tools show for a string the file
 * does not hold (NULL: nothing). It generates the struct members, the
 * field indices (CKPT_META_F_<name>) and the table; the groups are
 * in-memory only: the file holds every field as a root attribute of its
 * own name, as before. */
#ifndef BOOST_CKPT_META_H
#define BOOST_CKPT_META_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_h5.h" /* CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION */

/* Who writes a field and who needs it. */
enum {
  CKPT_META_PACKAGE = 1u << 0, /* the checkpoint package, at every save (the format's identity, n_tensors) */
  CKPT_META_RUN = 1u << 1,     /* the run's metadata block, at every save */
  CKPT_META_EXPORT = 1u << 2,  /* boost-reshard's outputs only: absent from a training checkpoint */
  CKPT_META_RESUME = 1u << 3,  /* a resume (and boost-reshard) cannot go on without it */
  CKPT_META_JSON = 1u << 4,    /* a JSON document in a string */
  CKPT_META_INSPECT = 1u << 5, /* boost-inspect reads it (a state dataset: summary, verify, plot) */
  CKPT_META_RECORD = 1u << 6,  /* a state dataset recording how the run went (wall-clock times, layouts), not
                                  what it computed: equal training differs there (boost-inspect diff skips it) */
};

#define CKPT_META_FIELDS(X)                                                      \
  X(package, format, STR, CKPT_META_PACKAGE | CKPT_META_RESUME, NULL)            \
  X(package, format_version, I64, CKPT_META_PACKAGE | CKPT_META_RESUME, NULL)    \
  X(package, software_version, STR, CKPT_META_PACKAGE, NULL)                     \
  X(package, checksum_algorithm, STR, CKPT_META_PACKAGE, NULL)                   \
  X(run, step, I64, CKPT_META_RUN | CKPT_META_RESUME, NULL)                      \
  X(run, lr_schedule_step, I64, CKPT_META_RUN, NULL)                             \
  X(run, lr_next, F64, CKPT_META_RUN, NULL)                                      \
  X(run, adam_t, I64, CKPT_META_RUN, NULL)                                       \
  X(run, data_cursor, I64, CKPT_META_RUN | CKPT_META_RESUME, NULL)               \
  X(run, global_batch, I64, CKPT_META_RUN, NULL)                                 \
  X(run, tokens_seen, F64, CKPT_META_RUN | CKPT_META_RESUME, NULL)               \
  X(run, train_seed, I64, CKPT_META_RUN, NULL)                                   \
  X(run, data_seed, I64, CKPT_META_RUN | CKPT_META_RESUME, NULL)                 \
  X(run, config, STR, CKPT_META_RUN | CKPT_META_RESUME | CKPT_META_JSON, NULL)   \
  X(run, layout, STR, CKPT_META_RUN | CKPT_META_RESUME | CKPT_META_JSON, NULL)   \
  X(run, activations, STR, CKPT_META_RUN, "none")                                \
  X(run, precision, STR, CKPT_META_RUN, "fp32")                                  \
  X(run, run_id, STR, CKPT_META_RUN, NULL)                                       \
  X(run, tokenizer, STR, CKPT_META_RUN, NULL)                                    \
  X(package, n_tensors, I64, CKPT_META_PACKAGE, NULL)                            \
  X(reshard, resharded_from, STR, CKPT_META_EXPORT | CKPT_META_JSON, NULL)       \
  X(reshard, optimizer_state, STR, CKPT_META_EXPORT, "present")                  \
  X(reshard, weights_dtype, STR, CKPT_META_EXPORT, "f32")

typedef int64_t ckpt_meta_I64;
typedef double ckpt_meta_F64;
typedef char *ckpt_meta_STR; /* malloc'd, owned by the struct (ckpt_meta_free) */

#define CKPT_META_INDEX_(group, name, type, flags, absent) CKPT_META_F_##name,
enum { CKPT_META_FIELDS(CKPT_META_INDEX_) CKPT_META_NFIELDS };
#undef CKPT_META_INDEX_

/* The members of one group (the list filtered by its group column). */
#define CKPT_META_IN_package_package(x) x
#define CKPT_META_IN_package_run(x)
#define CKPT_META_IN_package_reshard(x)
#define CKPT_META_IN_run_package(x)
#define CKPT_META_IN_run_run(x) x
#define CKPT_META_IN_run_reshard(x)
#define CKPT_META_IN_reshard_package(x)
#define CKPT_META_IN_reshard_run(x)
#define CKPT_META_IN_reshard_reshard(x) x
#define CKPT_META_MEMBER_package(group, name, type, flags, absent) CKPT_META_IN_package_##group(ckpt_meta_##type name;)
#define CKPT_META_MEMBER_run(group, name, type, flags, absent) CKPT_META_IN_run_##group(ckpt_meta_##type name;)
#define CKPT_META_MEMBER_reshard(group, name, type, flags, absent) CKPT_META_IN_reshard_##group(ckpt_meta_##type name;)
typedef struct {
  CKPT_META_FIELDS(CKPT_META_MEMBER_package)
} ckpt_meta_package;
typedef struct {
  CKPT_META_FIELDS(CKPT_META_MEMBER_run)
} ckpt_meta_run;
typedef struct {
  CKPT_META_FIELDS(CKPT_META_MEMBER_reshard)
} ckpt_meta_reshard;

/* The root attributes of one checkpoint, by group (m.run.step). A field
 * counts only when its bit is set in `present` (CKPT_META_SET /
 * ckpt_meta_set_str; the reader sets the bits of what the file holds);
 * absent numbers read -1. */
typedef struct {
  ckpt_meta_package package;
  ckpt_meta_run run;
  ckpt_meta_reshard reshard;
  uint32_t present;    /* bit CKPT_META_F_<name> */
  uint32_t unreadable; /* read: the attribute is there but not of its type */
} ckpt_meta;
_Static_assert(CKPT_META_NFIELDS <= 32, "ckpt_meta.present holds a bit per field");

typedef enum { CKPT_META_T_I64 = 0, CKPT_META_T_F64, CKPT_META_T_STR, CKPT_META_T_F32 /* state datasets only */ } ckpt_meta_type;
typedef struct {
  const char *name;
  ckpt_meta_type type;
  size_t offset; /* in ckpt_meta */
  unsigned flags;
  const char *absent;
} ckpt_meta_field;
extern const ckpt_meta_field ckpt_meta_fields[CKPT_META_NFIELDS];

/* A number field set (and marked present): CKPT_META_SET(&m, run, step, 40). */
#define CKPT_META_SET(m, group, field, v) ((m)->group.field = (v), (m)->present |= 1u << CKPT_META_F_##field)
static inline int ckpt_meta_has(const ckpt_meta *m, int field) { return (m->present >> field) & 1u; }

/* The index of the field named `name`, -1 when the schema has none. */
int ckpt_meta_field_index(const char *name);
/* Every field absent. */
void ckpt_meta_init(ckpt_meta *m);
void ckpt_meta_free(ckpt_meta *m);
/* A string field set to a copy of v (NULL: absent). -1 when out of memory. */
int ckpt_meta_set_str(ckpt_meta *m, int field, const char *v);
/* A deep copy (dst is overwritten, not freed). -1 when out of memory. */
int ckpt_meta_copy(ckpt_meta *dst, const ckpt_meta *src);
/* A string field's value, or the table's `absent` default. */
const char *ckpt_meta_str(const ckpt_meta *m, int field);

/* Every present field as an attribute of obj (the file's root), in table
 * order. Returns 0, or -1 naming the attribute in why. */
int ckpt_meta_write(hid_t obj, const ckpt_meta *m, boost_status *why);
/* Every attribute of the table that obj holds, into m (initialised first);
 * attributes of another type are marked unreadable. Then the format's
 * identity: returns 0 for a boost checkpoint of a version this build
 * reads (1 to CKPT_FORMAT_VERSION), -1 with why otherwise (m holds what was read either way). */
int ckpt_meta_read(hid_t obj, ckpt_meta *m, boost_status *why);
/* The first field with all of `flags` that m lacks (NULL: none). */
const char *ckpt_meta_missing(const ckpt_meta *m, unsigned flags);

/* The other half of the schema: the training state's datasets (group
 * /state, docs/CHECKPOINT_FORMAT.md "Training state"), in one table.
 * CKPT_STATE_SETS(X) lists X(name, type, cols, flags): type F32 or F64
 * (little-endian IEEE in the file, float / double in memory), cols 0 for a
 * vector [n], else a table [n, cols] (its attribute `columns` names them).
 * flags: CKPT_META_RUN (the run hands it over at every save),
 * CKPT_META_RESUME (a file without it is refused; the others, absent from
 * files older than them, resume as empty), CKPT_META_INSPECT. Every one is
 * checksummed, written by rank 0, read whole by every rank on resume,
 * carried by boost-reshard, and kept across resumes. */
#define CKPT_STATE_SETS(X)                                                                   \
  X(loss_history, F32, 0, CKPT_META_RUN | CKPT_META_RESUME | CKPT_META_INSPECT)             \
  X(val_loss_history, F64, 2, CKPT_META_RUN | CKPT_META_INSPECT)                            \
  X(run_starts, F64, CKPT_START_NCOLS, CKPT_META_RUN | CKPT_META_INSPECT | CKPT_META_RECORD) \
  X(grad_norm_history, F64, 0, CKPT_META_RUN | CKPT_META_INSPECT)                          \
  X(guard_events, F64, 6, CKPT_META_RUN | CKPT_META_INSPECT | CKPT_META_RECORD)             \
  X(skipped_batches, F64, 4, CKPT_META_RUN | CKPT_META_INSPECT | CKPT_META_RECORD)          \
  X(guard_replays, F64, 6, CKPT_META_RUN | CKPT_META_INSPECT | CKPT_META_RECORD)

/* The columns of /state/run_starts: one row per start of the run (the first
 * job, then every resume), in order; the newest row's last_* follow every
 * save. Times are Unix seconds; tp_mode and precision are codes into
 * ckpt_tp_mode_codes / ckpt_precision_codes. */
#define CKPT_START_COLUMNS(X)                                                                \
  X(start_step) X(start_unix_s) X(last_step) X(last_unix_s) X(tokens_at_start) X(global_batch) \
  X(seq_len) X(world_size) X(dp) X(tp) X(pp) X(tp_mode) X(precision)
#define CKPT_START_COL_(name) CKPT_START_##name,
enum { CKPT_START_COLUMNS(CKPT_START_COL_) CKPT_START_NCOLS };
#undef CKPT_START_COL_
extern const char *const ckpt_start_columns[CKPT_START_NCOLS];
#define CKPT_TP_MODE_NCODES 4
#define CKPT_PRECISION_NCODES 2
extern const char *const ckpt_tp_mode_codes[CKPT_TP_MODE_NCODES];     /* none btp vanilla megatron */
extern const char *const ckpt_precision_codes[CKPT_PRECISION_NCODES]; /* fp32 bf16 */
/* The code of name in codes[n]; -1 when it has none. */
int ckpt_code_of(const char *const *codes, int n, const char *name);

#define CKPT_STATE_INDEX_(name, type, cols, flags) CKPT_STATE_##name,
enum { CKPT_STATE_SETS(CKPT_STATE_INDEX_) CKPT_STATE_NSETS };
#undef CKPT_STATE_INDEX_
typedef struct {
  const char *name; /* under /state */
  ckpt_meta_type type;
  int cols;
  unsigned flags;
} ckpt_state_desc;
extern const ckpt_state_desc ckpt_state_sets[CKPT_STATE_NSETS];

/* One state dataset's rows (rows x max(cols, 1) elements of its type). */
typedef struct {
  void *data;
  int64_t rows;
} ckpt_series;
typedef struct {
  ckpt_series set[CKPT_STATE_NSETS];
} ckpt_state;
/* The set a dataset path names ("/state/run_starts", with or without the
 * leading '/'); -1 when it is none of the table's. */
int ckpt_state_find(const char *path);
/* Elements per row, bytes per element. */
int ckpt_state_width(int k);
size_t ckpt_state_esize(int k);
/* The `columns` attribute of a table ("step loss"; codes spelled out). */
void ckpt_state_columns(int k, char *out, size_t outlen);
/* dst = a copy of src (dst's buffers reused or freed). -1 out of memory
 * (dst then holds nothing). */
int ckpt_state_copy(ckpt_state *dst, const ckpt_state *src);
/* Frees what a read or a copy allocated; every set empty after. */
void ckpt_state_free(ckpt_state *st);

/* The layout record (root attribute `layout`): the process grid that wrote
 * the file. */
typedef struct {
  int world_size, dp, tp, pp, zero; /* world_size -1 when the record lacks it */
  char tp_mode[16];
} ckpt_layout;
/* As JSON (malloc'd; NULL when out of memory). */
char *ckpt_layout_json(const ckpt_layout *l);
/* 0 when json is an object with positive integers dp, tp, pp (and, when
 * present, world_size); -1 otherwise. */
int ckpt_layout_parse(const char *json, ckpt_layout *l);
/* The data-parallel degree the stored config ran with: that of the layout
 * boost-reshard read (`resharded_from`) when the file is its output, else
 * that of `layout`; -1 when the record does not parse. (Only files without
 * `global_batch` need it: their global batch is the stored config's
 * batch_size x grad_accum times this.) */
int ckpt_meta_config_dp(const ckpt_meta *m);

#endif
