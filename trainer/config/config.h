/* Model and training configuration.
 *
 * One table of keys (config.c) drives everything: INI parsing (inih),
 * `--set section.key=value` overrides, validation, the resolved-config print
 * at start and the JSON copy stored in checkpoints and metrics. Presets set
 * the model block first; any key given explicitly overrides the preset,
 * whatever order it appears in. */
#ifndef BOOST_CONFIG_H
#define BOOST_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "data.h" /* data_order */
#include "status.h"

#define CONFIG_STR 512

/* Projections of a layer, in the order of the `model.lowrank` list. */
typedef enum { PROJ_Q = 0, PROJ_K, PROJ_V, PROJ_O, PROJ_GATE, PROJ_UP, PROJ_DOWN, PROJ_COUNT } proj_kind;
extern const char *const proj_names[PROJ_COUNT];

/* Enum-valued settings: the config table parses the names once; code sees
 * only these values. *_names[] give each value's name (the JSON and the
 * printed config use the names). */
/* parallel.tp_mode. TP_NONE is what "auto" resolves to at tp = 1. */
typedef enum { TP_NONE = 0, TP_BTP, TP_VANILLA, TP_MEGATRON, TP_AUTO, TP_MODE_COUNT } tp_mode;
extern const char *const tp_mode_names[TP_MODE_COUNT];
/* parallel.recompute */
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_LOWRANK, RECOMPUTE_FULL, RECOMPUTE_COUNT } recompute_mode;
extern const char *const recompute_names[RECOMPUTE_COUNT];
/* ckpt.resume_batch: on resume, keep the checkpoint's global batch (derive
 * the per-replica split) or take the config's split as it is. */
typedef enum { RESUME_BATCH_KEEP = 0, RESUME_BATCH_CONFIG, RESUME_BATCH_COUNT } resume_batch_mode;
/* train.device: where a rank's model lives and runs (kernels/backend.h);
 * guarded is the CPU kernels behind memory the host cannot touch (tests). */
typedef enum { DEVICE_CPU = 0, DEVICE_GUARDED, DEVICE_CUDA, DEVICE_COUNT } device_kind;
extern const char *const device_names[DEVICE_COUNT];
/* train.precision: the mixed-precision policy (docs/PRECISION.md): fp32
 * everywhere, or bf16 activations and working weights over fp32 masters. */
typedef enum { PRECISION_FP32 = 0, PRECISION_BF16, PRECISION_COUNT } precision_kind;
extern const char *const precision_names[PRECISION_COUNT];
/* parallel.comm: the communication backend (trainer/parallel/comm.h); auto is NCCL
 * with train.device=cuda where built, else MPI. */
typedef enum { COMM_CFG_AUTO = 0, COMM_CFG_MPI, COMM_CFG_NCCL, COMM_CFG_COUNT } comm_config_kind;
extern const char *const comm_kind_config_names[COMM_CFG_COUNT];
/* ckpt.resume: the newest good checkpoint of ckpt.dir (auto), a fresh
 * start (none, or empty), or a named file or directory (any other text). */
typedef enum { RESUME_AUTO = 0, RESUME_NONE, RESUME_PATH, RESUME_KIND_COUNT } resume_kind;
/* train.guard: what the step guard does with a flagged step (trainer/guard.h,
 * docs/GUARD.md): nothing (off), drop it (skip), drop it and roll back to
 * the newest checkpoint before a cluster of them (rollback). */
typedef enum { GUARD_OFF = 0, GUARD_SKIP, GUARD_ROLLBACK, GUARD_COUNT } guard_policy;
extern const char *const guard_policy_names[GUARD_COUNT];
/* train.skip_batches holds at most this many ranges. */
#define CONFIG_MAX_SKIP_RANGES 128
/* ckpt.activations */
typedef enum { ACTS_NONE = 0, ACTS_SAMPLE, ACTS_ALL, ACTS_COUNT } acts_mode;
extern const char *const acts_mode_names[ACTS_COUNT];

typedef struct {
  char preset[64];
  int vocab, d_model, n_layers, n_heads, ffn, seq_len;
  int rank_attn, rank_mlp;
  char lowrank[CONFIG_STR]; /* comma list of low-rank projections, "all" or "none" */
  unsigned lowrank_mask;    /* derived: bit p set when projection p is CoLA */
  int tie_embeddings;
  float rope_theta, norm_eps, init_std;
} model_config;

typedef struct {
  model_config model;
  struct {
    char train[CONFIG_STR], val[CONFIG_STR];
    float val_fraction;
    int64_t seed;
    data_order order;
  } data;
  /* train.*: what a step is and how many (the keys keep their flat names,
   * train.guard_z_loss and so on; the parts below only group the members). */
  struct {
    int batch_size, grad_accum, steps, threads;
    device_kind device;
    precision_kind precision;
    int64_t seed;
    /* The learning-rate schedule: linear warmup, then cosine to lr * min_lr_ratio. */
    int warmup_steps;
    float lr, min_lr_ratio;
    char skip_batches[CONFIG_STR]; /* as given: ranges of global batch indices, "10-19,35" */
    int n_skip_ranges;             /* parsed once by config_set: sorted, disjoint [first, last] */
    int64_t skip_ranges[CONFIG_MAX_SKIP_RANGES][2];
    /* AdamW and the gradient clip (trainer/model/optim.h). */
    struct {
      float weight_decay, beta1, beta2, eps, grad_clip;
    } optim;
    /* What the run reports while it trains: log lines, validation, samples, metrics. */
    struct {
      int log_every, val_every, val_batches;
      int sample_every; /* a greedy sample in the log every N steps (0: never) */
      char metrics[CONFIG_STR];
      char tensorboard[CONFIG_STR]; /* TensorBoard event files' folder, rank 0 (empty: none) */
      float peak_tflops;            /* the peak MFU is against, TFLOP/s per rank (0: measured at start) */
    } report;
    /* The step guard (trainer/guard.h, docs/GUARD.md): keys train.guard (the
     * policy), train.guard_<member>, and train.replay_every. */
    struct {
      guard_policy policy;
      int window, warmup;          /* trailing window of accepted steps; steps before the z-scores judge */
      float z_loss, z_gnorm;       /* robust z-score thresholds */
      float loss_ratio;            /* flag a loss above this many times the window's largest */
      int cluster, cluster_window; /* rollback: this many flagged batches among the last cluster_window */
      int skip_batches, max_rollbacks;
      int replay_every; /* replay one step in every N to catch silent corruption (0: only flagged steps) */
      int sdc_limit;    /* replays a rank may fail before the job ends naming its host */
    } guard;
  } train;
  struct {
    int dp, tp, pp, zero, timeout;
    comm_config_kind comm;
    int nccl_single; /* groups of one rank go through NCCL too (docs/CUDA.md) */
    float dp_bucket_mb; /* gradient buckets reduced during the last backward (0: one call after it) */
    tp_mode tp_mode;
    recompute_mode recompute;
    char stages[CONFIG_STR];
  } parallel;
  struct {
    char dir[CONFIG_STR];
    struct {
      char text[CONFIG_STR]; /* as given: the key's value, and the path of RESUME_PATH */
      resume_kind kind;      /* parsed once, by config_set */
    } resume;
    acts_mode activations;
    resume_batch_mode resume_batch;
    int every, keep_last, keep_every, keep_set_aside, level, timeout;
    char every_text[32]; /* ckpt.every as given: a step count or "auto" */
    int every_auto;      /* ckpt.every = auto: the interval from the checkpoint's cost and ckpt.mtbf (trainer/ckpt_interval.h) */
    float every_seconds; /* ckpt.every_seconds: a wall-clock interval (0: none) */
    char mtbf_text[32];  /* ckpt.mtbf as given ("" : estimated from the run's starts) */
    double mtbf_s;       /* parsed once by config_set; 0: not given */
    struct {
      char text[CONFIG_STR]; /* as given: bytes (K/M/G/T suffixes, powers of 1024) or a percentage */
      double bytes, percent; /* parsed once, by config_set: one of them is > 0 */
    } staging_limit;
    struct {                  /* the local level (ckpt/local/ckpt_local.h) */
      int every;              /* ckpt.local_every: a local checkpoint every N steps (0: none, or auto) */
      char every_text[32];    /* ckpt.local_every as given: a step count or "auto" */
      int every_auto;         /* ckpt.local_every = auto: the local level's own Young/Daly interval (trainer/ckpt_interval.h) */
      char dir[CONFIG_STR];   /* ckpt.local_dir: node-local directory ("": one in /dev/shm named after ckpt.dir) */
    } local;
    struct { /* the remote level (ckpt/remote/ckpt_remote.h) */
      char url[CONFIG_STR], endpoint[256], region[64]; /* ckpt.remote, ckpt.remote_endpoint, ckpt.remote_region */
      int every, keep, grace;                         /* ckpt.remote_every, ckpt.remote_keep, ckpt.remote_grace */
    } remote;
  } ckpt;
} train_config;

/* Defaults: preset "tiny". */
void config_defaults(train_config *cfg);

/* Apply a named preset to cfg->model; returns 0, or -1 (unknown name). */
int config_apply_preset(model_config *m, const char *name);
/* The presets' names, comma-separated (config_presets.c). */
void config_preset_names(char *out, size_t outlen);

/* Set one "section.key" to a string value. Returns 0, or -1 with a one-line
 * message in err naming the key and what is wrong. */
int config_set(train_config *cfg, const char *key, const char *value, boost_status *err);

/* Load an INI file (sections = key prefixes). Same error contract. */
int config_load_file(train_config *cfg, const char *path, boost_status *err);

/* Resolve a command line: --config FILE (at most one) then every --set
 * key=value, with model.preset applied before any other key. Validates. */
int config_resolve(train_config *cfg, const char *config_path, int nsets, char *const *sets, boost_status *err);

/* Check the whole config (positivity, divisibility, known enums). */
int config_validate(train_config *cfg, boost_status *err);

/* Print "section.key = value" lines. */
void config_print(const train_config *cfg, const char *prefix);

/* The resolved config as a JSON object string (caller frees with free()). */
char *config_to_json(const train_config *cfg);

/* Parses a config stored as JSON (config_to_json) over cfg's current
 * values. Keys this version does not know are ignored and counted in
 * *unknown (may be NULL). Does not validate. */
int config_from_json(train_config *cfg, const char *json, int *unknown, boost_status *err);

/* Keys that define the model's parameters: a checkpoint whose values differ
 * holds a different model. (Not seq_len: weights do not depend on it.) */
int config_is_model_key(const train_config *cfg, const char *key);

/* "key old -> new" for every key whose value differs between a and b and
 * that `want` selects (NULL: every key), joined by ", " into out. Returns
 * the number of differing keys. */
int config_diff(const train_config *a, const train_config *b, int (*want)(const train_config *, const char *),
                char *out, size_t outlen);

/* Names of all keys, NULL-terminated. */
const char *const *config_key_names(void);

/* Every key with its default, allowed values and meaning (for --help). */
void config_print_help(FILE *f);

static inline int model_is_lowrank(const model_config *m, proj_kind p) { return (m->lowrank_mask >> p) & 1u; }
static inline int model_rank(const model_config *m, proj_kind p) { return p <= PROJ_O ? m->rank_attn : m->rank_mlp; }

#endif
