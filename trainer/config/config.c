#include "config.h"

#include "config_values.h"
#include "util.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const proj_names[PROJ_COUNT] = {"q", "k", "v", "o", "gate", "up", "down"};
const char *const tp_mode_names[TP_MODE_COUNT] = {"none", "btp", "vanilla", "megatron", "auto"};
const char *const recompute_names[RECOMPUTE_COUNT] = {"none", "lowrank", "full"};
const char *const acts_mode_names[ACTS_COUNT] = {"none", "sample", "all"};
const char *const device_names[DEVICE_COUNT] = {"cpu", "guarded", "cuda"};
const char *const precision_names[PRECISION_COUNT] = {"fp32", "bf16"};
const char *const comm_kind_config_names[COMM_CFG_COUNT] = {"auto", "mpi", "nccl"};
const char *const guard_policy_names[GUARD_COUNT] = {"off", "skip", "rollback"};

typedef enum { K_INT, K_I64, K_FLOAT, K_STR, K_BOOL, K_ENUM } key_type;

/* The values a K_ENUM key accepts, NULL-terminated, each with its enum value. */
typedef struct {
  const char *name;
  int value;
} enum_choice;

static const enum_choice TP_MODE_CHOICES[] = {
    {"auto", TP_AUTO}, {"btp", TP_BTP}, {"vanilla", TP_VANILLA}, {"megatron", TP_MEGATRON}, {NULL, 0}};
static const enum_choice RECOMPUTE_CHOICES[] = {
    {"none", RECOMPUTE_NONE}, {"lowrank", RECOMPUTE_LOWRANK}, {"full", RECOMPUTE_FULL}, {NULL, 0}};
static const enum_choice RESUME_BATCH_CHOICES[] = {{"keep", RESUME_BATCH_KEEP}, {"config", RESUME_BATCH_CONFIG}, {NULL, 0}};
static const enum_choice DEVICE_CHOICES[] = {
    {"cpu", DEVICE_CPU}, {"guarded", DEVICE_GUARDED}, {"cuda", DEVICE_CUDA}, {NULL, 0}};
static const enum_choice COMM_CHOICES[] = {{"auto", COMM_CFG_AUTO}, {"mpi", COMM_CFG_MPI}, {"nccl", COMM_CFG_NCCL}, {NULL, 0}};
static const enum_choice PRECISION_CHOICES[] = {{"fp32", PRECISION_FP32}, {"bf16", PRECISION_BF16}, {NULL, 0}};
static const enum_choice GUARD_CHOICES[] = {{"off", GUARD_OFF}, {"skip", GUARD_SKIP}, {"rollback", GUARD_ROLLBACK}, {NULL, 0}};
static const enum_choice DATA_ORDER_CHOICES[] = {{"shuffled", DATA_ORDER_SHUFFLED}, {"sequential", DATA_ORDER_SEQUENTIAL}, {NULL, 0}};
static const enum_choice ACTS_CHOICES[] = {{"none", ACTS_NONE}, {"sample", ACTS_SAMPLE}, {"all", ACTS_ALL}, {NULL, 0}};

typedef struct {
  const char *name; /* "section.key" */
  key_type type;
  size_t offset, size;
  double min, max; /* numeric range, inclusive */
  const char *help;
  const enum_choice *choices; /* K_ENUM */
} key_spec;

#define F(field) offsetof(train_config, field), sizeof(((train_config *)0)->field)
#define BIG 1e18

static const key_spec KEYS[] = {
    {"model.preset", K_STR, F(model.preset), 0, 0, "sets the model block first: tiny, cola-60m|130m|350m|1b|7b or llama-tiny|60m|…", NULL},
    {"model.vocab", K_INT, F(model.vocab), 1, 1 << 24, "vocabulary size", NULL},
    {"model.d_model", K_INT, F(model.d_model), 1, 1 << 20, "hidden size d", NULL},
    {"model.n_layers", K_INT, F(model.n_layers), 1, 4096, "decoder layers", NULL},
    {"model.n_heads", K_INT, F(model.n_heads), 1, 4096, "attention heads", NULL},
    {"model.ffn", K_INT, F(model.ffn), 1, 1 << 22, "MLP hidden size", NULL},
    {"model.seq_len", K_INT, F(model.seq_len), 1, 1 << 20, "sequence length T", NULL},
    {"model.rank_attn", K_INT, F(model.rank_attn), 1, 1 << 20, "CoLA rank of q,k,v,o", NULL},
    {"model.rank_mlp", K_INT, F(model.rank_mlp), 1, 1 << 20, "CoLA rank of gate,up,down", NULL},
    {"model.lowrank", K_STR, F(model.lowrank), 0, 0, "low-rank projections: all, none or a list of q,k,v,o,gate,up,down", NULL},
    {"model.tie_embeddings", K_BOOL, F(model.tie_embeddings), 0, 1, "LM head shares the embedding", NULL},
    {"model.rope_theta", K_FLOAT, F(model.rope_theta), 1, 1e9, "RoPE base", NULL},
    {"model.norm_eps", K_FLOAT, F(model.norm_eps), 1e-12, 1, "RMSNorm epsilon", NULL},
    {"model.init_std", K_FLOAT, F(model.init_std), 1e-6, 10, "init std of full-rank weights and embeddings", NULL},
    {"data.train", K_STR, F(data.train), 0, 0, "token shard(s): file, comma list or directory", NULL},
    {"data.val", K_STR, F(data.val), 0, 0, "validation shard(s); empty = split off data.train", NULL},
    {"data.val_fraction", K_FLOAT, F(data.val_fraction), 0, 0.5, "fraction of data.train held out when data.val is empty", NULL},
    {"data.seed", K_I64, F(data.seed), 0, BIG, "sample order seed", NULL},
    {"data.order", K_ENUM, F(data.order), 0, 0,
     "order training reads windows in: shuffled (keyed by data.seed) or sequential (the stored order, so a stretch "
     "of a shard meets consecutive steps; docs/DATA_FORMAT.md)",
     DATA_ORDER_CHOICES},
    {"train.batch_size", K_INT, F(train.batch_size), 1, 1 << 20, "micro-batch size per data-parallel rank", NULL},
    {"train.grad_accum", K_INT, F(train.grad_accum), 1, 1 << 20, "micro-batches per step (the pipeline's micro-batches)", NULL},
    {"train.steps", K_INT, F(train.steps), 0, 1e9, "optimizer steps", NULL},
    {"train.warmup_steps", K_INT, F(train.warmup_steps), 0, 1e9, "linear LR warmup", NULL},
    {"train.lr", K_FLOAT, F(train.lr), 0, 10, "peak learning rate", NULL},
    {"train.min_lr_ratio", K_FLOAT, F(train.min_lr_ratio), 0, 1, "cosine floor as a fraction of lr", NULL},
    {"train.weight_decay", K_FLOAT, F(train.weight_decay), 0, 10, "AdamW decoupled decay (matrices only)", NULL},
    {"train.beta1", K_FLOAT, F(train.beta1), 0, 0.999999, "AdamW beta1", NULL},
    {"train.beta2", K_FLOAT, F(train.beta2), 0, 0.999999999, "AdamW beta2", NULL},
    {"train.eps", K_FLOAT, F(train.eps), 1e-20, 1, "AdamW epsilon", NULL},
    {"train.grad_clip", K_FLOAT, F(train.grad_clip), 0, 1e9, "global grad-norm clip (0 = off)", NULL},
    {"train.val_every", K_INT, F(train.val_every), 0, 1e9, "validate every N steps (0 = only at the end)", NULL},
    {"train.val_batches", K_INT, F(train.val_batches), 0, 1e9, "micro-batches per validation (0 = none)", NULL},
    {"train.log_every", K_INT, F(train.log_every), 1, 1e9, "log line every N steps", NULL},
    {"train.sample_every", K_INT, F(train.sample_every), 0, 1e9,
     "print a greedy sample (64 tokens after end-of-text) every N steps on rank 0, untimed; needs tp = pp = 1 (0 = never)",
     NULL},
    {"train.threads", K_INT, F(train.threads), 0, 4096, "OpenMP/BLAS threads per rank (0 = all cores / ranks)", NULL},
    {"train.device", K_ENUM, F(train.device), 0, 0,
     "where the model runs: cpu, cuda (NVIDIA GPU, one per rank), or guarded (the CPU kernels behind memory the host "
     "cannot touch: a test backend)",
     DEVICE_CHOICES},
    {"train.precision", K_ENUM, F(train.precision), 0, 0,
     "fp32, or bf16: bf16 activations and working weights, fp32 master weights, moments and statistics, GEMMs "
     "accumulating in fp32 (docs/PRECISION.md)",
     PRECISION_CHOICES},
    {"train.seed", K_I64, F(train.seed), 0, BIG, "parameter init seed", NULL},
    {"train.metrics", K_STR, F(train.metrics), 0, 0, "JSON-lines metrics file, one line per step, appended to (a resumed run continues it; empty = none)", NULL},
    {"train.tensorboard", K_STR, F(train.tensorboard), 0, 0,
     "TensorBoard event files' folder (created if missing; rank 0 writes a new events.out.tfevents.* file per start, "
     "steps continuing; docs/TENSORBOARD.md; empty = none)",
     NULL},
    {"train.peak_tflops", K_FLOAT, F(train.peak_tflops), 0, 1e9,
     "the peak MFU is measured against, TFLOP/s per rank (0 = the backend's GEMM measured at start; docs/TENSORBOARD.md)",
     NULL},
    {"train.guard", K_ENUM, F(train.guard), 0, 0,
     "the step guard (docs/GUARD.md): every step is judged before the optimizer applies it (non-finite loss or "
     "gradient norm, a loss or gradient-norm spike); off, skip (a flagged step applies nothing and its batch is "
     "passed), rollback (also: a non-finite value or a cluster of flagged steps reloads the newest checkpoint "
     "before them and skips train.guard_skip_batches batches from there)",
     GUARD_CHOICES},
    {"train.guard_window", K_INT, F(train.guard_window), 1, 1e6, "accepted steps the guard's statistics look back over", NULL},
    {"train.guard_warmup", K_INT, F(train.guard_warmup), 1, 1e6,
     "accepted steps before the z-scores judge (at most train.guard_window)", NULL},
    {"train.guard_z_loss", K_FLOAT, F(train.guard_z_loss), 1e-3, 1e9,
     "flag a loss whose robust z-score (median, MAD of the window) exceeds this", NULL},
    {"train.guard_z_gnorm", K_FLOAT, F(train.guard_z_gnorm), 1e-3, 1e9,
     "flag a gradient norm whose robust z-score exceeds this", NULL},
    {"train.guard_loss_ratio", K_FLOAT, F(train.guard_loss_ratio), 1.0001, 1e9,
     "flag a loss above this many times the largest of the window, from the second step on", NULL},
    {"train.guard_cluster", K_INT, F(train.guard_cluster), 1, 1e6,
     "rollback: this many flagged batches among the last train.guard_cluster_window roll back", NULL},
    {"train.guard_cluster_window", K_INT, F(train.guard_cluster_window), 1, 1e6,
     "batches a cluster of flagged steps is counted over (skip: this many flagged in a row end the run)", NULL},
    {"train.guard_skip_batches", K_INT, F(train.guard_skip_batches), 1, 1e9,
     "rollback: batches skipped from the checkpoint rolled back to (at least through the last flagged one)", NULL},
    {"train.guard_max_rollbacks", K_INT, F(train.guard_max_rollbacks), 0, 1e6,
     "rollbacks before the run ends with exit status 65 naming the flagged steps and batches", NULL},
    {"train.replay_every", K_INT, F(train.replay_every), 0, 1e9,
     "also replay one step in every N that the guard accepted, to catch silent data corruption that causes no "
     "spike (0: only flagged steps are replayed); refused where steps are not bit-deterministic (train.device=cuda)",
     NULL},
    {"train.guard_sdc_limit", K_INT, F(train.guard_sdc_limit), 1, 1e6,
     "replays a rank may disagree with before the job ends with exit 69 naming its host (exclude it)", NULL},
    {"train.skip_batches", K_STR, F(train.skip_batches), 0, 0,
     "global batch indices never trained on: ranges like 100-299,512 (ascending, not overlapping)", NULL},
    {"parallel.dp", K_INT, F(parallel.dp), 1, 1 << 20, "data-parallel degree", NULL},
    {"parallel.tp", K_INT, F(parallel.tp), 1, 1 << 20, "tensor-parallel degree", NULL},
    {"parallel.pp", K_INT, F(parallel.pp), 1, 1 << 20, "pipeline stages", NULL},
    {"parallel.zero", K_INT, F(parallel.zero), 0, 1, "1 = shard AdamW moments over dp (ZeRO-1)", NULL},
    {"parallel.tp_mode", K_ENUM, F(parallel.tp_mode), 0, 0,
     "tensor-parallel scheme: btp (bottleneck-aware), vanilla (Megatron per factor), megatron (full-rank); auto picks",
     TP_MODE_CHOICES},
    {"parallel.recompute", K_ENUM, F(parallel.recompute), 0, 0,
     "activation recompute in backward: keep all, only layer inputs + bottlenecks, or only layer inputs",
     RECOMPUTE_CHOICES},
    {"parallel.stages", K_STR, F(parallel.stages), 0, 0, "layers per stage, e.g. 3,5 (empty = balanced)", NULL},
    {"parallel.timeout", K_INT, F(parallel.timeout), 0, 1e7,
     "seconds a rank may wait for the others (a collective, a pipeline message, a start-up agreement) before the "
     "watchdog ends the job, exit 74 or 75 (a stopped or hung rank); 0 = never",
     NULL},
    {"parallel.comm", K_ENUM, F(parallel.comm), 0, 0,
     "the communication backend: auto (NCCL with train.device=cuda where built, else MPI), mpi (host-staged MPI "
     "everywhere: ranks sharing one GPU), nccl (refused without train.device=cuda and NCCL)",
     COMM_CHOICES},
    {"parallel.nccl_single", K_BOOL, F(parallel.nccl_single), 0, 1,
     "train.device=cuda: every group goes through NCCL, groups of one rank too (size-1 communicators run every "
     "collective: a single GPU exercises NCCL; docs/CUDA.md)",
     NULL},
    {"parallel.dp_bucket_mb", K_FLOAT, F(parallel.dp_bucket_mb), 0, 1024,
     "MiB of gradients per data-parallel reduction posted during the step's last backward (overlapped with it; "
     "dp <= 2 only, docs/PARALLELISM.md); 0 = one reduction after the backward",
     NULL},
    {"ckpt.dir", K_STR, F(ckpt.dir), 0, 0, "checkpoint directory (empty = no checkpoints)", NULL},
    {"ckpt.every", K_STR, F(ckpt.every_text), 0, 0,
     "checkpoint every N steps (0 = only at the end/preemption), or auto: the interval that loses the least work, "
     "from the measured cost of a checkpoint and ckpt.mtbf (Young/Daly)",
     NULL},
    {"ckpt.every_seconds", K_FLOAT, F(ckpt.every_seconds), 0, 1e9,
     "also checkpoint when this many seconds of wall time passed since the last one (0 = off)", NULL},
    {"ckpt.mtbf", K_STR, F(ckpt.mtbf_text), 0, 0,
     "mean time between interruptions for ckpt.every = auto, e.g. 86400, 90m, 24h, 2d (empty = estimated from the "
     "run's starts in ckpt.dir, a day until there are two)",
     NULL},
    {"ckpt.keep_last", K_INT, F(ckpt.keep_last), 1, 1e6, "newest checkpoints kept", NULL},
    {"ckpt.keep_every", K_INT, F(ckpt.keep_every), 0, 1e9, "also keep every checkpoint whose step is a multiple", NULL},
    {"ckpt.keep_set_aside", K_INT, F(ckpt.keep_set_aside), 0, 1e6,
     "set-aside branches kept (*.h5.superseded.N: the checkpoints a rollback or a resume from an older one "
     "abandoned); a new one beyond this removes the oldest; 0 = keep all. The default 3 keeps every branch "
     "of one job's rollbacks (train.guard_max_rollbacks=3; docs/GUARD.md)",
     NULL},
    {"ckpt.resume", K_STR, F(ckpt.resume.text), 0, 0, "auto, none or a checkpoint path", NULL},
    {"ckpt.resume_batch", K_ENUM, F(ckpt.resume_batch), 0, 0,
     "on resume: keep the checkpoint's global batch (batch_size/grad_accum re-derived for this dp) or use the config's",
     RESUME_BATCH_CHOICES},
    {"ckpt.activations", K_ENUM, F(ckpt.activations), 0, 0,
     "store low-rank bottleneck activations: none, one micro-batch (sample) or every rank's (all)", ACTS_CHOICES},
    {"ckpt.level", K_INT, F(ckpt.level), 1, 19, "zstd level", NULL},
    {"ckpt.staging_limit", K_STR, F(ckpt.staging_limit.text), 0, 0,
     "host memory a rank may use to stage a checkpoint: bytes (512M, 2G, 1.5GiB) or a percentage of the rank's "
     "checkpointed state (25%); below 100% the writer stages and writes in turns (docs/CHECKPOINT_FORMAT.md)",
     NULL},
    {"ckpt.local_every", K_STR, F(ckpt.local_every_text), 0, 0,
     "also keep a checkpoint in node-local memory every N steps (the local level: restarts on the same layout "
     "resume from it in a fraction of a second; 0 = off; needs ckpt.dir), or auto: the interval that loses the "
     "least work, from the local level's own measured cost and ckpt.mtbf (Young/Daly)",
     NULL},
    {"ckpt.local_dir", K_STR, F(ckpt.local_dir), 0, 0,
     "node-local directory of the local level (empty = /dev/shm/boost-<uid>/<hash of ckpt.dir>, made 0700)", NULL},
    /* --- remote level (issue 42) --- */
    {"ckpt.remote", K_STR, F(ckpt.remote.url), 0, 0,
     "s3://BUCKET/PREFIX: also upload checkpoint files to an object store in the background, and resume from it "
     "when ckpt.dir holds nothing newer (the remote level; needs ckpt.dir; empty = off)",
     NULL},
    {"ckpt.remote_endpoint", K_STR, F(ckpt.remote.endpoint), 0, 0,
     "http(s)://host[:port] of an S3-compatible store (empty = AWS S3, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)", NULL},
    {"ckpt.remote_region", K_STR, F(ckpt.remote.region), 0, 0,
     "the store's region for request signing (empty = AWS_REGION, AWS_DEFAULT_REGION, else us-east-1)", NULL},
    {"ckpt.remote_every", K_INT, F(ckpt.remote.every), 1, 1e6, "upload every Nth committed checkpoint file", NULL},
    {"ckpt.remote_keep", K_INT, F(ckpt.remote.keep), 0, 1e6,
     "newest committed remote checkpoints kept (0 = all)", NULL},
    {"ckpt.remote_grace", K_INT, F(ckpt.remote.grace), 0, 86400,
     "seconds the run's end (and a stop signal's exit) waits for the upload in flight", NULL},
    /* --- end remote level --- */
    {"ckpt.timeout", K_INT, F(ckpt.timeout), 0, 1e7,
     "seconds a checkpoint write or load may take before the job is aborted (a hung collective write); 0 = never",
     NULL},
};
#define NKEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

void config_defaults(train_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  config_apply_preset(&cfg->model, "tiny");
  cfg->model.tie_embeddings = 0;
  cfg->model.rope_theta = 10000.0f;
  cfg->model.norm_eps = 1e-5f;
  cfg->model.init_std = 0.02f;
  cfg->data.val_fraction = 0.05f;
  cfg->data.seed = 1234;
  cfg->train.batch_size = 4;
  cfg->train.grad_accum = 1;
  cfg->train.steps = 100;
  cfg->train.warmup_steps = 10;
  cfg->train.lr = 1e-3f;
  cfg->train.min_lr_ratio = 0.1f;
  cfg->train.weight_decay = 0.1f;
  cfg->train.beta1 = 0.9f;
  cfg->train.beta2 = 0.95f;
  cfg->train.eps = 1e-8f;
  cfg->train.grad_clip = 1.0f;
  cfg->train.val_every = 50;
  cfg->train.val_batches = 8;
  cfg->train.log_every = 1;
  cfg->train.threads = 0;
  cfg->train.seed = 42;
  cfg->train.guard = GUARD_ROLLBACK; /* docs/GUARD.md, "Defaults" */
  cfg->train.guard_window = 100;
  cfg->train.guard_warmup = 20;
  cfg->train.guard_z_loss = 6.0f;
  cfg->train.guard_z_gnorm = 12.0f;
  cfg->train.guard_loss_ratio = 2.0f;
  cfg->train.guard_cluster = 3;
  cfg->train.guard_cluster_window = 50;
  cfg->train.guard_skip_batches = 200;
  cfg->train.guard_max_rollbacks = 3;
  cfg->train.guard_sdc_limit = 2;
  cfg->parallel.dp = cfg->parallel.tp = cfg->parallel.pp = 1;
  cfg->parallel.tp_mode = TP_AUTO;
  cfg->parallel.recompute = RECOMPUTE_NONE;
  cfg->parallel.timeout = 600; /* docs/PARALLELISM.md, "The collective watchdog" */
  cfg->parallel.dp_bucket_mb = 4; /* docs/PERFORMANCE.md, "Overlapped gradient reduction" */
  config_set(cfg, "ckpt.resume", "auto", NULL);
  config_set(cfg, "ckpt.every", "0", NULL);
  config_set(cfg, "ckpt.local_every", "0", NULL);
  config_set(cfg, "ckpt.staging_limit", "100%", NULL); /* the default: docs/PERFORMANCE.md, "Bounded staging" */
  cfg->ckpt.activations = ACTS_NONE;
  cfg->ckpt.keep_last = 3;
  cfg->ckpt.keep_set_aside = 3;
  cfg->ckpt.level = 1; /* as small as level 3 on shuffled fp32, 1.2-1.8x faster (docs/PERFORMANCE.md) */
  cfg->ckpt.timeout = 900;
  cfg->ckpt.remote.every = 1, cfg->ckpt.remote.keep = 2, cfg->ckpt.remote.grace = 60; /* remote level (issue 42) */
}

static const key_spec *find_key(const char *name) {
  for (int i = 0; i < NKEYS; i++)
    if (strcmp(KEYS[i].name, name) == 0) return &KEYS[i];
  return NULL;
}

/* "a, b or c" */
static void choices_list(const key_spec *k, char *out, size_t outlen) {
  int n = 0;
  while (k->choices[n].name) n++;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    size_t used = strlen(out);
    snprintf(out + used, outlen - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", k->choices[i].name);
  }
}

static const char *choice_name(const key_spec *k, int value) {
  for (const enum_choice *c = k->choices; c->name; c++)
    if (c->value == value) return c->name;
  return "?";
}

int config_set(train_config *cfg, const char *key, const char *value, boost_status *err) {
  const key_spec *k = find_key(key);
  if (!k) return boost_err(err, "unknown config key '%s' (see boost-train --help)", key);
  char *base = (char *)cfg + k->offset;
  char *end = NULL;
  errno = 0;
  switch (k->type) {
  case K_STR:
    if (strlen(value) >= k->size) return boost_err(err, "value of %s is too long (%zu characters max)", key, k->size - 1);
    snprintf(base, k->size, "%s", value);
    if (strcmp(key, "ckpt.every") == 0 || strcmp(key, "ckpt.mtbf") == 0 || strcmp(key, "ckpt.local_every") == 0)
      return config_parse_interval(cfg, key, value, err);
    if (strcmp(key, "ckpt.resume") == 0) /* the tagged value, parsed here once */
      cfg->ckpt.resume.kind = !strcmp(value, "auto") ? RESUME_AUTO : !strcmp(value, "none") || !value[0] ? RESUME_NONE : RESUME_PATH;
    if (strcmp(key, "ckpt.staging_limit") == 0 && config_parse_staging_limit(cfg, value, err) != 0) return -1;
    if (strcmp(key, "train.skip_batches") == 0 && config_parse_skip_batches(cfg, value, err) != 0) return -1;
    if (strcmp(key, "model.preset") == 0 && config_apply_preset(&cfg->model, value) != 0) {
      char names[512];
      config_preset_names(names, sizeof names);
      return boost_err(err, "unknown model.preset '%s' (known: %s)", value, names);
    }
    return 0;
  case K_BOOL:
    if (!strcasecmp(value, "1") || !strcasecmp(value, "true") || !strcasecmp(value, "yes") || !strcasecmp(value, "on"))
      *(int *)base = 1;
    else if (!strcasecmp(value, "0") || !strcasecmp(value, "false") || !strcasecmp(value, "no") || !strcasecmp(value, "off"))
      *(int *)base = 0;
    else
      return boost_err(err, "bad value '%s' for %s: expected true or false", value, key);
    return 0;
  case K_INT:
  case K_I64: {
    long long v = strtoll(value, &end, 10);
    if (end == value || *end != '\0' || errno == ERANGE)
      return boost_err(err, "bad value '%s' for %s: expected an integer", value, key);
    if ((double)v < k->min || (double)v > k->max)
      return boost_err(err, "value %lld for %s is out of range [%.0f, %.0f]", v, key, k->min, k->max);
    if (k->type == K_INT)
      *(int *)base = (int)v;
    else
      *(int64_t *)base = v;
    return 0;
  }
  case K_ENUM:
    for (const enum_choice *c = k->choices; c->name; c++)
      if (!strcmp(value, c->name)) {
        *(int *)base = c->value;
        return 0;
      }
    {
      char names[256];
      choices_list(k, names, sizeof names);
      return boost_err(err, "bad value '%s' for %s: expected %s", value, key, names);
    }
  case K_FLOAT: {
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v))
      return boost_err(err, "bad value '%s' for %s: expected a number", value, key);
    if (v < k->min || v > k->max)
      return boost_err(err, "value %g for %s is out of range [%g, %g]", v, key, k->min, k->max);
    *(float *)base = (float)v;
    return 0;
  }
  }
  return boost_err(err, "internal: key %s has no type", key);
}

/* INI loading: the preset must win over nothing and lose to everything, so
 * the file is read twice: first only model.preset, then every other key. */
typedef struct {
  train_config *cfg;
  int preset_pass;
  boost_status *err;
  int failed;
  const char *path;
} ini_ctx;

static int config_ini_handler(void *user, const char *section, const char *name, const char *value) {
  ini_ctx *c = user;
  if (c->failed) return 0;
  char key[256];
  snprintf(key, sizeof key, "%s.%s", section, name);
  int is_preset = strcmp(key, "model.preset") == 0;
  if (is_preset != c->preset_pass) return 1;
  boost_status msg = {0};
  if (config_set(c->cfg, key, value, &msg) != 0) {
    boost_err(c->err, "%s: %s", c->path, msg.msg);
    c->failed = 1;
    return 0;
  }
  return 1;
}

/* skip_preset: the caller already applied a preset that outranks the file's. */
static int load_ini(train_config *cfg, const char *path, int skip_preset, boost_status *err) {
  FILE *f = fopen(path, "r");
  if (!f) return boost_err(err, "cannot open config file %s: %s", path, strerror(errno));
  for (int pass = skip_preset ? 0 : 1; pass >= 0; pass--) {
    ini_ctx c = {cfg, pass, err, 0, path};
    rewind(f);
    int rc = ini_parse_file(f, config_ini_handler, &c);
    if (c.failed || rc != 0) {
      fclose(f);
      return c.failed ? -1 : boost_err(err, "%s:%d: malformed line in config file", path, rc);
    }
  }
  fclose(f);
  return 0;
}

int config_load_file(train_config *cfg, const char *path, boost_status *err) {
  return load_ini(cfg, path, 0, err);
}

static int split_set(const char *set, char *key, size_t keylen, const char **value, boost_status *err) {
  const char *eq = strchr(set, '=');
  if (!eq || eq == set) return boost_err(err, "bad --set '%s': expected section.key=value", set);
  size_t n = (size_t)(eq - set);
  if (n >= keylen) return boost_err(err, "bad --set '%s': key too long", set);
  memcpy(key, set, n);
  key[n] = '\0';
  *value = eq + 1;
  return 0;
}

/* Precedence, lowest first: defaults, the preset (from --set, else from the
 * file), the file's other keys, the other --set keys. */
int config_resolve(train_config *cfg, const char *config_path, int nsets, char *const *sets, boost_status *err) {
  config_defaults(cfg);
  char key[256];
  const char *value = NULL;
  int preset_from_cli = 0;
  for (int i = 0; i < nsets; i++) {
    if (split_set(sets[i], key, sizeof key, &value, err) != 0) return -1;
    if (strcmp(key, "model.preset") == 0) {
      if (config_set(cfg, key, value, err) != 0) return -1;
      preset_from_cli = 1;
    }
  }
  if (config_path && load_ini(cfg, config_path, preset_from_cli, err) != 0) return -1;
  for (int i = 0; i < nsets; i++) {
    split_set(sets[i], key, sizeof key, &value, err);
    if (strcmp(key, "model.preset") != 0 && config_set(cfg, key, value, err) != 0) return -1;
  }
  return config_validate(cfg, err);
}

static int parse_lowrank(model_config *m, boost_status *err) {
  if (!strcmp(m->lowrank, "all")) {
    m->lowrank_mask = (1u << PROJ_COUNT) - 1;
    return 0;
  }
  if (!strcmp(m->lowrank, "none") || m->lowrank[0] == '\0') {
    m->lowrank_mask = 0;
    return 0;
  }
  char buf[CONFIG_STR];
  snprintf(buf, sizeof buf, "%s", m->lowrank);
  unsigned mask = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    int found = -1;
    for (int p = 0; p < PROJ_COUNT; p++)
      if (!strcmp(tok, proj_names[p])) found = p;
    if (found < 0)
      return boost_err(err, "bad model.lowrank entry '%s': expected all, none or q,k,v,o,gate,up,down", tok);
    mask |= 1u << found;
  }
  m->lowrank_mask = mask;
  return 0;
}

int config_validate(train_config *cfg, boost_status *err) {
  model_config *m = &cfg->model;
  if (parse_lowrank(m, err) != 0) return -1;
  if (cfg->ckpt.every_auto && cfg->ckpt.every_seconds > 0)
    return boost_err(err, "ckpt.every = auto chooses the interval itself: unset ckpt.every_seconds (%g)",
                     cfg->ckpt.every_seconds);
  if ((cfg->ckpt.local_every > 0 || cfg->ckpt.local_every_auto) && !cfg->ckpt.dir[0])
    return boost_err(err, "ckpt.local_every=%s needs ckpt.dir: the local level sits in front of the "
                     "checkpoint files, which stay the durable level", cfg->ckpt.local_every_text);
  if (config_check_remote(cfg, err)) return -1; /* remote level (issue 42) */
  if (cfg->ckpt.local_dir[0] && cfg->ckpt.local_dir[0] != '/')
    return boost_err(err, "ckpt.local_dir '%s' must be an absolute path (node-local storage, e.g. /dev/shm/...)",
                     cfg->ckpt.local_dir);
  if (cfg->train.guard_warmup > cfg->train.guard_window)
    return boost_err(err, "train.guard_warmup %d exceeds train.guard_window %d: the z-scores need that many steps in the window",
                     cfg->train.guard_warmup, cfg->train.guard_window);
  if (cfg->train.replay_every > 0 && cfg->train.guard == GUARD_OFF)
    return boost_err(err, "train.replay_every=%d needs the step guard, which train.guard=off turns off: set "
                     "train.guard to skip or rollback, or train.replay_every to 0", cfg->train.replay_every);
  if (cfg->train.replay_every > 0 && cfg->train.device == DEVICE_CUDA)
    return boost_err(err, "train.replay_every needs bit-deterministic steps, which train.device=cuda does not "
                     "promise (docs/GUARD.md): set it to 0");
  if (m->d_model % m->n_heads != 0)
    return boost_err(err, "model.d_model %d is not divisible by model.n_heads %d", m->d_model, m->n_heads);
  int hd = m->d_model / m->n_heads;
  if (hd % 2 != 0) return boost_err(err, "head dimension %d (d_model/n_heads) must be even for RoPE", hd);
  for (int p = 0; p < PROJ_COUNT; p++) {
    if (!model_is_lowrank(m, p)) continue;
    int r = model_rank(m, p);
    int in = (p == PROJ_DOWN) ? m->ffn : m->d_model;
    int out = (p == PROJ_GATE || p == PROJ_UP) ? m->ffn : m->d_model;
    if (r > in || r > out)
      return boost_err(err, "model.%s %d exceeds the %s projection's dimensions (%d -> %d)",
                  p <= PROJ_O ? "rank_attn" : "rank_mlp", r, proj_names[p], in, out);
  }
  return 0;
}

static void format_value(const train_config *cfg, const key_spec *k, char *out, size_t outlen) {
  const char *base = (const char *)cfg + k->offset;
  switch (k->type) {
  case K_STR: snprintf(out, outlen, "%s", base); break;
  case K_BOOL: snprintf(out, outlen, "%s", *(const int *)base ? "true" : "false"); break;
  case K_INT: snprintf(out, outlen, "%d", *(const int *)base); break;
  case K_I64: snprintf(out, outlen, "%lld", (long long)*(const int64_t *)base); break;
  case K_FLOAT: snprintf(out, outlen, "%.9g", *(const float *)base); break;
  case K_ENUM: snprintf(out, outlen, "%s", choice_name(k, *(const int *)base)); break;
  }
}

void config_print(const train_config *cfg, const char *prefix) {
  char v[CONFIG_STR];
  for (int i = 0; i < NKEYS; i++) {
    format_value(cfg, &KEYS[i], v, sizeof v);
    printf("%s%-24s = %s\n", prefix, KEYS[i].name, v);
  }
}

char *config_to_json(const train_config *cfg) {
  cJSON *root = cJSON_CreateObject();
  for (int i = 0; i < NKEYS; i++) {
    const key_spec *k = &KEYS[i];
    const char *base = (const char *)cfg + k->offset;
    switch (k->type) {
    case K_STR: cJSON_AddStringToObject(root, k->name, base); break;
    case K_BOOL: cJSON_AddBoolToObject(root, k->name, *(const int *)base); break;
    case K_INT: cJSON_AddNumberToObject(root, k->name, *(const int *)base); break;
    case K_I64: cJSON_AddNumberToObject(root, k->name, (double)*(const int64_t *)base); break;
    case K_FLOAT: cJSON_AddNumberToObject(root, k->name, *(const float *)base); break;
    case K_ENUM: cJSON_AddStringToObject(root, k->name, choice_name(k, *(const int *)base)); break;
    }
  }
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}

int config_from_json(train_config *cfg, const char *json, int *unknown, boost_status *err) {
  cJSON *root = cJSON_Parse(json);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return boost_err(err, "stored config is not a JSON object");
  }
  if (unknown) *unknown = 0;
  char value[CONFIG_STR];
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    const key_spec *k = find_key(item->string);
    if (!k || !strcmp(k->name, "model.preset")) { /* a preset would reset the model block */
      if (!k && unknown) (*unknown)++;
      continue;
    }
    if (cJSON_IsString(item)) snprintf(value, sizeof value, "%s", item->valuestring);
    else if (cJSON_IsBool(item)) snprintf(value, sizeof value, "%s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsNumber(item) && (k->type == K_INT || k->type == K_I64)) snprintf(value, sizeof value, "%.0f", item->valuedouble);
    else if (cJSON_IsNumber(item)) snprintf(value, sizeof value, "%.17g", item->valuedouble);
    else {
      cJSON_Delete(root);
      return boost_err(err, "stored config: %s has a value of the wrong type", k->name);
    }
    boost_status msg = {0};
    if (config_set(cfg, k->name, value, &msg) != 0) {
      cJSON_Delete(root);
      return boost_err(err, "stored config: %s", msg.msg);
    }
  }
  const cJSON *preset = cJSON_GetObjectItemCaseSensitive(root, "model.preset");
  if (cJSON_IsString(preset)) snprintf(cfg->model.preset, sizeof cfg->model.preset, "%s", preset->valuestring);
  cJSON_Delete(root);
  return parse_lowrank(&cfg->model, err);
}

int config_is_model_key(const train_config *cfg, const char *key) {
  static const char *const keys[] = {"model.vocab",    "model.d_model",        "model.n_layers",   "model.n_heads",
                                     "model.ffn",      "model.lowrank",        "model.tie_embeddings",
                                     "model.rope_theta", "model.norm_eps",     NULL};
  for (int i = 0; keys[i]; i++)
    if (!strcmp(key, keys[i])) return 1;
  /* A rank matters only where a projection of its kind is low-rank. */
  const unsigned attn = (1u << PROJ_Q) | (1u << PROJ_K) | (1u << PROJ_V) | (1u << PROJ_O);
  if (!strcmp(key, "model.rank_attn")) return (cfg->model.lowrank_mask & attn) != 0;
  if (!strcmp(key, "model.rank_mlp")) return (cfg->model.lowrank_mask & ~attn) != 0;
  return 0;
}

int config_diff(const train_config *a, const train_config *b, int (*want)(const train_config *, const char *),
                char *out, size_t outlen) {
  char va[CONFIG_STR], vb[CONFIG_STR];
  int n = 0;
  if (outlen) out[0] = '\0';
  for (int i = 0; i < NKEYS; i++) {
    const key_spec *k = &KEYS[i];
    if (want && !want(a, k->name)) continue;
    if (!strcmp(k->name, "model.lowrank") ? a->model.lowrank_mask == b->model.lowrank_mask : 0) continue;
    format_value(a, k, va, sizeof va);
    format_value(b, k, vb, sizeof vb);
    if (!strcmp(va, vb)) continue;
    size_t used = strlen(out);
    if (used < outlen) snprintf(out + used, outlen - used, "%s%s %s -> %s", n ? ", " : "", k->name, va, vb);
    n++;
  }
  return n;
}

const char *const *config_key_names(void) {
  static const char *names[NKEYS + 1];
  for (int i = 0; i < NKEYS; i++) names[i] = KEYS[i].name;
  names[NKEYS] = NULL;
  return names;
}

static void allowed_values(const key_spec *k, char *out, size_t outlen) {
  switch (k->type) {
  case K_ENUM: choices_list(k, out, outlen); break;
  case K_BOOL: snprintf(out, outlen, "true or false"); break;
  case K_STR: snprintf(out, outlen, "text"); break;
  case K_INT:
  case K_I64: snprintf(out, outlen, "integer %.0f..%.0f", k->min, k->max); break;
  case K_FLOAT: snprintf(out, outlen, "number %g..%g", k->min, k->max); break;
  }
}

void config_print_help(FILE *f) {
  train_config defaults;
  config_defaults(&defaults);
  char def[CONFIG_STR], allowed[256];
  for (int i = 0; i < NKEYS; i++) {
    const key_spec *k = &KEYS[i];
    format_value(&defaults, k, def, sizeof def);
    allowed_values(k, allowed, sizeof allowed);
    fprintf(f, "  %-22s %s\n  %-22s   default: %s; allowed: %s\n", k->name, k->help, "", def[0] ? def : "(empty)",
            allowed);
  }
}
