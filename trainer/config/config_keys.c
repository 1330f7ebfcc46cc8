/* The key table: every key of a run's settings in one row (type, place,
 * range, help, choices), the names of the enum settings, the defaults, and
 * the lookups and formatting over the table (config_internal.h). */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

const char *const proj_names[PROJ_COUNT] = {"q", "k", "v", "o", "gate", "up", "down"};
const char *const tp_mode_names[TP_MODE_COUNT] = {"none", "btp", "vanilla", "megatron", "auto"};
const char *const recompute_names[RECOMPUTE_COUNT] = {"none", "lowrank", "full"};
const char *const acts_mode_names[ACTS_COUNT] = {"none", "sample", "all"};
const char *const device_names[DEVICE_COUNT] = {"cpu", "guarded", "cuda"};
const char *const precision_names[PRECISION_COUNT] = {"fp32", "bf16"};
const char *const comm_kind_config_names[COMM_CFG_COUNT] = {"auto", "mpi", "nccl"};
const char *const guard_policy_names[GUARD_COUNT] = {"off", "skip", "rollback"};

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

#define F(field) offsetof(train_config, field), sizeof(((train_config *)0)->field)
#define BIG 1e18

const key_spec config_keys[] = {
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
    {"train.weight_decay", K_FLOAT, F(train.optim.weight_decay), 0, 10, "AdamW decoupled decay (matrices only)", NULL},
    {"train.beta1", K_FLOAT, F(train.optim.beta1), 0, 0.999999, "AdamW beta1", NULL},
    {"train.beta2", K_FLOAT, F(train.optim.beta2), 0, 0.999999999, "AdamW beta2", NULL},
    {"train.eps", K_FLOAT, F(train.optim.eps), 1e-20, 1, "AdamW epsilon", NULL},
    {"train.grad_clip", K_FLOAT, F(train.optim.grad_clip), 0, 1e9, "global grad-norm clip (0 = off)", NULL},
    {"train.val_every", K_INT, F(train.report.val_every), 0, 1e9, "validate every N steps (0 = only at the end)", NULL},
    {"train.val_batches", K_INT, F(train.report.val_batches), 0, 1e9, "micro-batches per validation (0 = none)", NULL},
    {"train.log_every", K_INT, F(train.report.log_every), 1, 1e9, "log line every N steps", NULL},
    {"train.sample_every", K_INT, F(train.report.sample_every), 0, 1e9,
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
    {"train.metrics", K_STR, F(train.report.metrics), 0, 0, "JSON-lines metrics file, one line per step, appended to (a resumed run continues it; empty = none)", NULL},
    {"train.tensorboard", K_STR, F(train.report.tensorboard), 0, 0,
     "TensorBoard event files' folder (created if missing; rank 0 writes a new events.out.tfevents.* file per start, "
     "steps continuing; docs/TENSORBOARD.md; empty = none)",
     NULL},
    {"train.peak_tflops", K_FLOAT, F(train.report.peak_tflops), 0, 1e9,
     "the peak MFU is measured against, TFLOP/s per rank (0 = the backend's GEMM measured at start; docs/TENSORBOARD.md)",
     NULL},
    {"train.guard", K_ENUM, F(train.guard.policy), 0, 0,
     "the step guard (docs/GUARD.md): every step is judged before the optimizer applies it (non-finite loss or "
     "gradient norm, a loss or gradient-norm spike); off, skip (a flagged step applies nothing and its batch is "
     "passed), rollback (also: a non-finite value or a cluster of flagged steps reloads the newest checkpoint "
     "before them and skips train.guard_skip_batches batches from there)",
     GUARD_CHOICES},
    {"train.guard_window", K_INT, F(train.guard.window), 1, 1e6, "accepted steps the guard's statistics look back over", NULL},
    {"train.guard_warmup", K_INT, F(train.guard.warmup), 1, 1e6,
     "accepted steps before the z-scores judge (at most train.guard_window)", NULL},
    {"train.guard_z_loss", K_FLOAT, F(train.guard.z_loss), 1e-3, 1e9,
     "flag a loss whose robust z-score (median, MAD of the window) exceeds this", NULL},
    {"train.guard_z_gnorm", K_FLOAT, F(train.guard.z_gnorm), 1e-3, 1e9,
     "flag a gradient norm whose robust z-score exceeds this", NULL},
    {"train.guard_loss_ratio", K_FLOAT, F(train.guard.loss_ratio), 1.0001, 1e9,
     "flag a loss above this many times the largest of the window, from the second step on", NULL},
    {"train.guard_cluster", K_INT, F(train.guard.cluster), 1, 1e6,
     "rollback: this many flagged batches among the last train.guard_cluster_window roll back", NULL},
    {"train.guard_cluster_window", K_INT, F(train.guard.cluster_window), 1, 1e6,
     "batches a cluster of flagged steps is counted over (skip: this many flagged in a row end the run)", NULL},
    {"train.guard_skip_batches", K_INT, F(train.guard.skip_batches), 1, 1e9,
     "rollback: batches skipped from the checkpoint rolled back to (at least through the last flagged one)", NULL},
    {"train.guard_max_rollbacks", K_INT, F(train.guard.max_rollbacks), 0, 1e6,
     "rollbacks before the run ends with exit status 65 naming the flagged steps and batches", NULL},
    {"train.replay_every", K_INT, F(train.guard.replay_every), 0, 1e9,
     "also replay one step in every N that the guard accepted, to catch silent data corruption that causes no "
     "spike (0: only flagged steps are replayed); refused where steps are not bit-deterministic (train.device=cuda)",
     NULL},
    {"train.guard_sdc_limit", K_INT, F(train.guard.sdc_limit), 1, 1e6,
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
    {"ckpt.local_every", K_STR, F(ckpt.local.every_text), 0, 0,
     "also keep a checkpoint in node-local memory every N steps (the local level: restarts on the same layout "
     "resume from it in a fraction of a second; 0 = off; needs ckpt.dir), or auto: the interval that loses the "
     "least work, from the local level's own measured cost and ckpt.mtbf (Young/Daly)",
     NULL},
    {"ckpt.local_dir", K_STR, F(ckpt.local.dir), 0, 0,
     "node-local directory of the local level (empty = /dev/shm/boost-<uid>/<hash of ckpt.dir>, made 0700)", NULL},
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
    {"ckpt.timeout", K_INT, F(ckpt.timeout), 0, 1e7,
     "seconds a checkpoint write or load may take before the job is aborted (a hung collective write); 0 = never",
     NULL},
};
const int config_nkeys = (int)(sizeof config_keys / sizeof config_keys[0]);

const key_spec *config_find_key(const char *name) {
  for (int i = 0; i < config_nkeys; i++)
    if (strcmp(config_keys[i].name, name) == 0) return &config_keys[i];
  return NULL;
}

/* "a, b or c" */
void config_choices_list(const key_spec *k, char *out, size_t outlen) {
  int n = 0;
  while (k->choices[n].name) n++;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    size_t used = strlen(out);
    snprintf(out + used, outlen - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", k->choices[i].name);
  }
}

const char *config_choice_name(const key_spec *k, int value) {
  for (const enum_choice *c = k->choices; c->name; c++)
    if (c->value == value) return c->name;
  return "?";
}

void config_format_value(const train_config *cfg, const key_spec *k, char *out, size_t outlen) {
  const char *base = (const char *)cfg + k->offset;
  switch (k->type) {
  case K_STR: snprintf(out, outlen, "%s", base); break;
  case K_BOOL: snprintf(out, outlen, "%s", *(const int *)base ? "true" : "false"); break;
  case K_INT: snprintf(out, outlen, "%d", *(const int *)base); break;
  case K_I64: snprintf(out, outlen, "%lld", (long long)*(const int64_t *)base); break;
  case K_FLOAT: snprintf(out, outlen, "%.9g", *(const float *)base); break;
  case K_ENUM: snprintf(out, outlen, "%s", config_choice_name(k, *(const int *)base)); break;
  }
}

const char *const *config_key_names(void) {
  static const char *names[sizeof config_keys / sizeof config_keys[0] + 1];
  for (int i = 0; i < config_nkeys; i++) names[i] = config_keys[i].name;
  names[config_nkeys] = NULL;
  return names;
}
