#include "trainer.h"
#include "train_sample.h"
#include "trainer_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "blas_select.h"
#include "check.h"
#include "util.h"
#include "ckpt.h"
#include "ckpt_test_hooks.h"
#include "resume_state.h"
#include "run_interval.h"
#include "comm.h"
#include "data.h"
#include "grid.h"
#include "model.h"
#include "optim.h"
#include "grad_buckets.h"
#include "guard.h"
#include "pipeline.h"
#include "preempt.h"
#include "resume_plan.h"
#include "run_tensorboard.h"
#include "run_watch.h"
#include "test_hooks.h"
#include "train_state.h"
#include "watchdog.h"
#ifdef BOOST_HAVE_CUDA
#include "cuda_backend.h"
#endif


/* Every rank reaches the same verdict, rank 0 prints it. */
int fail_all(const process_grid *g, const char *msg) {
  if (g->rank == 0) fprintf(stderr, "boost-train: %s\n", msg);
  return 1;
}


static int open_data(run *r, boost_status *err) {
  const train_config *cfg = r->cfg;
  if (!cfg->data.train[0]) {
    boost_err(err, "data.train is not set: give a token shard made by boost-data");
    return -1;
  }
  if (data_open(cfg->data.train, &r->train_src, err) != 0) return -1;
  memset(&r->val, 0, sizeof r->val);
  if (cfg->data.val[0]) {
    if (data_open(cfg->data.val, &r->val_src, err) != 0) return -1;
    if (data_split_make(r->train_src, 0.0, r->T, &r->train, NULL, err) != 0) return -1;
    if (data_split_make(r->val_src, 0.0, r->T, &r->val, NULL, err) != 0) return -1;
  } else if (data_split_make(r->train_src, cfg->data.val_fraction, r->T, &r->train,
                             cfg->data.val_fraction > 0 ? &r->val : NULL, err) != 0) {
    return -1;
  }
  char tok_train[64], tok_val[64];
  data_tokenizer_id(r->train_src, tok_train, sizeof tok_train);
  if (r->val_src) data_tokenizer_id(r->val_src, tok_val, sizeof tok_val);
  if (r->val_src && tok_train[0] && tok_val[0] && strcmp(tok_train, tok_val)) {
    boost_err(err, "data.val's tokenizer %s differs from data.train's %s: tokenize both with one", tok_val, tok_train);
    return -1;
  }
  int vocab = data_vocab_size(r->train_src);
  if (r->val_src && data_vocab_size(r->val_src) > vocab) vocab = data_vocab_size(r->val_src);
  if (vocab > cfg->model.vocab) {
    boost_err(err, "the data's vocabulary (%d) exceeds model.vocab (%d)", vocab, cfg->model.vocab);
    return -1;
  }
  return 0;
}

/* Whether this rank's loss counts in a reduction over world: one tp rank of
 * the last pipeline stage of each replica. */
static int owns_loss(const run *r) { return r->grid.tp_rank == 0 && r->grid.pp_rank == r->grid.pp - 1; }

/* Mean validation loss over val_batches micro-batches, read in order and
 * spread over data-parallel replicas; forward only, through the pipeline,
 * from buffers of its own (the step's last micro-batch stays for the
 * checkpoint's activations). */
static float evaluate(run *r) {
  const int64_t n = data_split_num_samples(&r->val);
  const int batches = r->cfg->train.val_batches;
  if (n <= 0 || batches <= 0) return NAN;
  double tot[2] = {0.0, 0.0};
  if (!r->val_in) {
    r->val_in = boost_calloc((size_t)r->B * r->T, sizeof *r->val_in);
    r->val_tg = boost_calloc((size_t)r->B * r->T, sizeof *r->val_tg);
  }
  int32_t *in = r->val_in, *tg = r->val_tg;
  for (int b = r->grid.dp_rank; b < batches; b += r->grid.dp) {
    for (int i = 0; i < r->B; i++)
      data_get_window(&r->val, ((int64_t)b * r->B + i) % n, in + (size_t)i * r->T, tg + (size_t)i * r->T);
    float loss = pipeline_forward(&r->pipe, in, tg, b);
    tot[0] += owns_loss(r) ? loss : 0.0;
    tot[1] += owns_loss(r) ? 1.0 : 0.0;
  }
  comm_control_sum_f64(&r->comm, COMM_WORLD, tot, 2);
  return (float)(tot[0] / tot[1]);
}

/* Micro-batch `micro` of the step: samples [cursor, cursor + global_batch)
 * by global index, whatever the layout; noise (the test hook's spike
 * kind) in place of every sample of the batch. */
typedef struct {
  const run *r;
  int64_t cursor;
  int noise;
} fetch_ctx;

static void fetch_micro(void *ctx, int micro, int32_t *in, int32_t *tg) {
  const fetch_ctx *f = ctx;
  const run *r = f->r;
  for (int b = 0; b < r->B; b++) {
    const int64_t idx = data_sample_index(f->cursor, micro, r->grid.dp, r->grid.dp_rank, r->B, b);
    if (f->noise) {
      noise_window(r, idx, in + (size_t)b * r->T, tg + (size_t)b * r->T);
      continue;
    }
    const int64_t w = data_sample_window(&r->train, r->cfg->data.order, (uint64_t)r->cfg->data.seed, idx);
    data_get_window(&r->train, w, in + (size_t)b * r->T, tg + (size_t)b * r->T);
  }
}

/* The first half of an optimizer step: grad_accum micro-batches per replica
 * through the pipeline (pipeline.c) and the gradient reduction over dp.
 * Returns the mean loss over the global batch and sets the pre-clip
 * gradient norm: the same values on every rank, before anything changes
 * the weights or moments (the step guard judges them). */
float step_gradients(run *r, train_state *st, double *grad_norm) {
  const train_config *cfg = r->cfg;
  model *m = &r->m;
  boost_backend *be = r->be;
  const int M = cfg->train.grad_accum;
  const float scale = 1.0f / ((float)r->B * r->T * M * r->grid.dp);
  const int64_t batch = st->data_cursor / r->global_batch;
  model_zero_grads(&r->mt);
  replay_hash_begin(r);
  test_faults_begin(r, batch);
  fetch_ctx fc = {r, st->data_cursor, test_fault_noise(batch)};
  pipeline_train(&r->pipe, M, scale, fetch_micro, &fc, &st->last_tokens);
  st->last_B = r->B;
  st->last_T = r->T;
  /* Gradients over dp: all-reduced, or (ZeRO-1) reduce-scattered so each
   * replica updates its chunk of the parameters and moments, then the
   * parameters are all-gathered; in buckets posted during the last
   * backward (grad_buckets.h), here only the rest and the waits. */
  grad_buckets_finish(&r->buckets);
  test_faults_reduced(r, batch);
  /* Loss: owned by one rank per replica, summed over dp. Gradient norm: tp
   * shards and pipeline stages summed (replicated tensors counted once),
   * dp replicas hold equal gradients (counted once) or disjoint chunks.
   * Both reduced in backend memory and read back once: the step's one
   * synchronisation, which also carries the step guard's verdict (every
   * rank judges the same reduced values). */
  double *stats = model_loss_sum(&r->acts);
  if (!owns_loss(r)) be->mem->zero(be, &stats[0], sizeof(double));
  if (cfg->parallel.zero || r->grid.dp_rank == 0)
    model_grad_sumsq(&r->mt, &r->acts);
  else
    be->mem->zero(be, &stats[1], sizeof(double));
  const double fault = test_fault_loss(r, batch);
  if (fault != 0 || r->local_hash) { /* this rank's share, as the replay compares it */
    double mine;
    be->mem->download(be, &mine, &stats[0], sizeof mine);
    if (fault != 0) {
      mine += fault;
      be->mem->upload(be, &stats[0], &mine, sizeof mine);
    }
    replay_hash_end(r, mine);
  }
  comm_allreduce_sum_f64(&r->comm, COMM_WORLD, stats, 2);
  double red[2];
  model_download_stats(m, &r->acts, red);
  *grad_norm = sqrt(red[1]);
  return (float)(red[0] / ((double)M * r->grid.dp));
}

/* The second half: AdamW applies the reduced gradients (clipped to
 * train.grad_clip by the global norm) at the schedule's step. */
static void step_update(run *r, train_state *st, double grad_norm) {
  const train_config *cfg = r->cfg;
  model *m = &r->m;
  const size_t chunk = r->mt.store.mom_end - r->mt.store.mom_begin;
  float lr = lr_at(cfg, (int)st->step);
  const float clip = boost_clip_scale(grad_norm, cfg->train.grad_clip);
  if (r->parts.n) { /* each part waits only for its tensors' bands of a checkpoint staged in turns */
    for (int k = 0; k < r->parts.n; k++) {
      ckpt_fence_wait(r->fence, r->parts.t0[k], r->parts.t0[k + 1]);
      optimizer_step_part(&r->mt, cfg, lr, (int)st->step + 1, clip, &r->parts, k);
    }
  } else {
    ckpt_fence_wait_all(r->fence); /* a checkpoint's deferred copy of params/moments must be done */
    optimizer_step(&r->mt, cfg, lr, (int)st->step + 1, clip);
  }
  if (cfg->parallel.zero) {
    comm_allgather_chunks(&r->comm, COMM_DP, m->w.params, chunk);
    model_refresh_work(m);
  }
}

/* train.device = cuda: the GPU of a rank is its local rank (its rank among
 * the ranks on its node, MPI_COMM_TYPE_SHARED) modulo the GPUs it sees
 * (CUDA_VISIBLE_DEVICES narrows them): one rank per GPU when a node runs as
 * many ranks as it has GPUs. Collective over world. */
static int gpu_index(MPI_Comm world) {
  MPI_Comm node;
  int local = 0;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
#ifdef BOOST_HAVE_CUDA
  const int visible = cuda_device_count();
  return visible > 0 ? local % visible : local;
#else
  return local;
#endif
}

/* Device memory moves through NCCL where it is built (train.device = cuda,
 * parallel.comm auto or nccl), else through MPI (host staging). Collective
 * over world; every rank succeeds or every rank fails with the same line
 * (comm_init_nccl agrees, and the config is the same everywhere). The
 * context is the run's: the watchdog watches its device waits and aborts
 * it when it ends the job. */
static int init_comm(run *r, boost_status *err) {
  const process_grid *g = &r->grid;
  const train_config *cfg = r->cfg;
  const int cuda = cfg->train.device == DEVICE_CUDA, want = cfg->parallel.comm;
#ifdef BOOST_HAVE_NCCL
  if (cuda && want != COMM_CFG_MPI) {
    if (comm_init_nccl(&r->comm, r->be, g->tp_comm, g->dp_comm, g->pp_comm, g->world, cfg->parallel.nccl_single, err) != 0)
      return -1;
    comm_attach_watchdog(&r->comm);
    return 0;
  }
#endif
  if (want == COMM_CFG_NCCL || cfg->parallel.nccl_single)
    return boost_err(err, "%s needs train.device=cuda%s",
                     want == COMM_CFG_NCCL ? "parallel.comm=nccl" : "parallel.nccl_single",
                     !cuda ? "" : want == COMM_CFG_MPI ? " and parallel.comm auto or nccl"
                                                       : " and a build with NCCL (this one communicates through MPI)");
  comm_init_mpi(&r->comm, r->be, g->tp_comm, g->dp_comm, g->pp_comm, g->world);
  comm_attach_watchdog(&r->comm);
  return 0;
}

/* init_weights 0: the weights are left to a resume (open_and_resume draws
 * them only for a fresh start). */
static int trainer_build(const train_config *cfg, MPI_Comm world, int init_weights, trainer **out, boost_status *err) {
  *out = NULL;
  run *r = boost_calloc(1, sizeof *r);
  r->cfg = cfg;
  r->B = cfg->train.batch_size;
  r->T = cfg->model.seq_len;
  train_state_init(&r->st);
  int world_size;
  MPI_Comm_size(world, &world_size);
  const int dp = config_dp_degree(cfg, world_size), tp = cfg->parallel.tp, pp = cfg->parallel.pp;
  /* Every rank checks the same inputs, so all fail together. */
  if (grid_init(&r->grid, world, dp, tp, pp, err) != 0) {
    boost_free(r);
    return -1;
  }
  r->layers_per_stage = boost_calloc((size_t)pp, sizeof *r->layers_per_stage);
  const char *unsupported =
      (pp > 1 && cfg->model.tie_embeddings) ? "model.tie_embeddings is not supported with parallel.pp > 1"
      : (cfg->train.sample_every > 0 && (tp > 1 || pp > 1))
          ? "train.sample_every needs the whole model on rank 0 (parallel.tp = parallel.pp = 1; set it to 0)"
          : NULL;
  if (unsupported) boost_err(err, "%s", unsupported);
  if (unsupported || model_check_layout(&cfg->model, cfg->parallel.tp_mode, tp, &r->mode, err) != 0 ||
      model_plan_stages(&cfg->model, pp, cfg->parallel.stages, r->T, r->layers_per_stage, err) != 0 ||
      open_data(r, err) != 0) {
    trainer_destroy(r);
    return -1;
  }
  const recompute_mode recompute = cfg->parallel.recompute;
  const int s = r->grid.pp_rank;
  r->stage.first_layer = 0;
  for (int k = 0; k < s; k++) r->stage.first_layer += r->layers_per_stage[k];
  r->stage.num_layers = r->layers_per_stage[s];
  r->stage.has_embed = s == 0;
  r->stage.has_head = s == pp - 1;
  /* 1F1B keeps at most pp - stage micro-batches in flight */
  const int nsets = (pp - s) < cfg->train.grad_accum ? (pp - s) : cfg->train.grad_accum;
  r->threads = cfg->train.threads;
  if (r->threads <= 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r->threads = (int)(cores / world_size) > 0 ? (int)(cores / world_size) : 1;
  }
  /* The backend on every rank, or a refusal on every rank. */
  boost_status be_err = {0};
  const boost_dtype act = cfg->train.precision == PRECISION_BF16 ? BOOST_BF16 : BOOST_F32;
  boost_backend_create(device_names[cfg->train.device], act, r->threads, gpu_index(world), &r->be, &be_err);
  const int have_be = comm_control_all(world, COMM_WORLD, "start-up agreement", r->be != NULL); /* every rank or none */
  watchdog_phase("start-up: model build", WATCH_WORK); /* local work: not a wait */
  if (!have_be) {
    boost_err(err, "%s", be_err.failed ? be_err.msg : "the backend could not be created on every rank");
    trainer_destroy(r);
    return -1;
  }
  if (init_comm(r, err) != 0) {
    trainer_destroy(r);
    return -1;
  }
  r->global_batch = (int64_t)r->B * cfg->train.grad_accum * r->grid.dp;
  /* Arenas split evenly over dp ranks (ZeRO-1 chunks): pad to a multiple. */
  const model_options mo = {.backend = r->be, .comm = &r->comm, .stage = &r->stage,
                            .arena_multiple = (size_t)r->grid.dp * 16};
  model_init(&r->m, &cfg->model, r->mode, &mo);
  const model_train_options to = {.with_optimizer = 1, .zero_shards = cfg->parallel.zero ? r->grid.dp : 1,
                                  .zero_rank = r->grid.dp_rank};
  model_train_init(&r->mt, &r->m, &to);
  if (init_weights) model_init_params(&r->m, (uint64_t)cfg->train.seed);
  model_alloc_acts(&r->m, &r->acts, r->B, r->T, nsets, recompute);
  pipeline_init(&r->pipe, &r->m, &r->acts, &r->mt, &r->comm, pp, r->grid.pp_rank);
  grad_buckets_init(&r->buckets, &r->comm, &r->mt.store, cfg->parallel.dp_bucket_mb, cfg->parallel.zero);
  if (grad_buckets_overlapped(&r->buckets)) pipeline_set_grads_hook(&r->pipe, grad_buckets_ready, &r->buckets);
  r->fault_at = r->nan_at = SIZE_MAX;
  replay_hash_open(r);
  grad_buckets_set_local(&r->buckets, test_faults_local_grads, r);
  *out = r;
  return 0;
}

int trainer_create(const train_config *cfg, MPI_Comm world, trainer **out, boost_status *err) {
  return trainer_build(cfg, world, 1, out, err);
}

void trainer_destroy(trainer *r) {
  if (!r) return;
  run_tb_close(r);
  train_state_free(&r->st);
  save_builder_free(&r->saves);
  pipeline_free(&r->pipe);
  if (r->buckets.comm) grad_buckets_free(&r->buckets);
  boost_free(r->val_in);
  boost_free(r->val_tg);
  boost_free(r->layers_per_stage);
  replay_hash_close(r);
  if (r->parts.n) optim_parts_free(&r->parts, r->be);
  if (r->m.layers) {
    model_acts_free(&r->m, &r->acts);
    model_train_free(&r->mt);
    model_free(&r->m);
  }
  if (r->comm.ops) comm_free(&r->comm);
  boost_backend_destroy(r->be);
  if (r->train_src) data_close(r->train_src);
  if (r->val_src) data_close(r->val_src);
  grid_free(&r->grid);
  boost_free(r);
}

model *trainer_model(trainer *t) { return &t->m; }
model_acts *trainer_acts(trainer *t) { return &t->acts; }
model_train *trainer_train_state(trainer *t) { return &t->mt; }
comm_ctx *trainer_comm(trainer *t) { return &t->comm; }
const process_grid *trainer_grid(const trainer *t) { return &t->grid; }
train_state *trainer_state(trainer *t) { return &t->st; }

/* An accepted step's bookkeeping: the schedule, the cursor, the histories. */
static void step_accepted(run *r, float loss, double grad_norm) {
  train_state *st = &r->st;
  st->step++;
  run_watch_trained(st);
  st->data_cursor += r->global_batch;
  st->tokens_seen += (double)r->global_batch * r->T;
  train_state_push_loss(st, loss);
  train_rows_push(&st->grad_norms, &grad_norm, 1);
}

float trainer_step(trainer *r, double *grad_norm) {
  float loss = step_gradients(r, &r->st, grad_norm);
  step_update(r, &r->st, *grad_norm);
  step_accepted(r, loss, *grad_norm);
  return loss;
}

/* The end of a run: waits for the last checkpoint and turns the outcome into
 * the exit status (docs: 0 done and saved, 75 preempted after a commit, 74
 * ended without its final state committed, 1 error). */
static int finish(run *t, ckpt_session *ck, int status, int stop_signal, float loss, double t_start) {
  const train_state *st = &t->st;
  const int saved = ck && ckpt_wait(ck) == 0 && ckpt_last_committed(ck) == st->step;
  run_tb_ckpt(t, ck); /* the final checkpoint's outcome */
  if (saved) preempt_set_committed(1);
  const int writes = ckpt_writes(ck);
  /* The saves are done (ckpt_wait): what is left of the session waits for
   * the other ranks (the local level's retire is a barrier), so
   * parallel.timeout bounds it even where ckpt.timeout is 0. */
  watchdog_phase("the end: the checkpoint session's close (the local level's retire)", WATCH_WAIT);
  if (ck) ckpt_close(ck);
  if (status != 0 && status != BOOST_EXIT_PREEMPTED) return status;
  const int want_save = writes || stop_signal;
  if (want_save && !saved) {
    if (t->grid.rank == 0)
      fprintf(stderr, "boost-train: %s at step %lld, but its final state was NOT committed%s; exiting with status %d\n",
              stop_signal ? "preempted" : "finished", (long long)st->step,
              writes ? " (see the checkpoint error above)" : " (no ckpt.dir)", BOOST_EXIT_UNSAVED);
    return BOOST_EXIT_UNSAVED;
  }
  if (t->grid.rank == 0 && stop_signal) {
    printf("preempted by signal %d at step %lld: checkpoint committed; exiting with status %d for requeue\n",
           stop_signal, (long long)st->step, BOOST_EXIT_PREEMPTED);
  } else if (t->grid.rank == 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* A resumed run with no step left trains none: its final loss is the
     * checkpoint's last one, not a NaN. */
    if (isnan(loss) && st->loss_count > 0) loss = st->loss_history[st->loss_count - 1];
    printf("done: step %lld, %.0f tokens, %.1f s, final loss %.4f, peak RSS %.0f MiB\n", (long long)st->step,
           st->tokens_seen, boost_now_s() - t_start, loss, ru.ru_maxrss / 1024.0);
  }
  fflush(stdout);
  return status;
}

/* A stop signal that came before training (start-up, data, model build,
 * checkpoint load) ends the run here: nothing was trained since the newest
 * committed state or the fresh start, so there is nothing to save and the
 * requeued run starts where this one would have. Collective. */
static int stopped_before_training(const run *t, const char *when) {
  const int sig = preempt_agreed(t->grid.world);
  if (sig && t->grid.rank == 0) {
    printf("preempted by signal %d %s: nothing trained, nothing to save; exiting with status %d for requeue\n", sig,
           when, BOOST_EXIT_PREEMPTED);
    fflush(stdout);
  }
  return sig;
}

/* After the resume, the last reasons not to train: a stop signal that came
 * during start-up (75), train.steps below the resumed step (refused: the run
 * is past the end it asks for, not "done"), a train.tensorboard folder or
 * train.metrics that cannot be written. Only then are they opened
 * (train.metrics appended to: a resumed run continues it; a new event file),
 * so a refused start leaves no file. Collective; 0 to train. */
static int accept_start(run *t, boost_status *err) {
  const train_state *st = &t->st;
  char when[96];
  snprintf(when, sizeof when, "during start-up, before training from step %lld", (long long)st->step);
  if (stopped_before_training(t, when)) return BOOST_EXIT_PREEMPTED;
  if (st->step > t->cfg->train.steps) {
    boost_err(err,
             "train.steps=%d is below the resumed checkpoint's step %lld: nothing to train (set train.steps above "
             "%lld to continue this run; ckpt.resume=none starts a new one)",
             t->cfg->train.steps, (long long)st->step, (long long)st->step);
    return fail_all(&t->grid, err->msg);
  }
  int ok = run_tb_open(t, err) == 0;
  if (ok && t->grid.rank == 0 && t->cfg->train.metrics[0]) {
    t->metrics = fopen(t->cfg->train.metrics, "a");
    ok = t->metrics != NULL;
    if (!ok) boost_err(err, "cannot open train.metrics %s: %s", t->cfg->train.metrics, strerror(errno));
  }
  /* every rank stops, not rank 0 alone */
  comm_control_bcast(t->grid.world, COMM_WORLD, "start agreement", &ok, (int)sizeof ok, 0);
  return ok ? 0 : fail_all(&t->grid, err->msg);
}

/* The checkpoint session (t->ck, NULL without ckpt.dir), the resume into
 * t->st (msg: what was resumed), and the last reasons not to train. 0 to
 * train; else the exit status, said on every rank. */
static int open_and_resume(run *t, char *msg, size_t msglen) {
  const train_config *cfg = t->cfg;
  boost_status err = {0};
  save_builder_init(&t->saves, cfg, &t->grid, &t->comm, &t->m, &t->pipe, t->mode);
  data_tokenizer_id(t->train_src, t->saves.tokenizer, sizeof t->saves.tokenizer);
  ckpt_settings ck_set;
  trainer_ckpt_settings(cfg, &ck_set);
  ck_set.threads = t->threads; /* train.threads=0 resolved: a save or load training waits for uses them all */
  watchdog_phase("start-up: checkpoint directory", WATCH_WAIT);
  const int opened = ckpt_open(&ck_set, &t->grid, &t->mt.store, &t->ck, &err);
  t->fence = ckpt_fence_start(t->ck);
  watchdog_phase("start-up: checkpoint load", WATCH_CKPT);
  int resumed = -1;
  boost_status note = {0};
  if (opened != 0 || (resumed = trainer_ckpt_resume(t->ck, &t->st, t->saves.tokenizer, &note)) < 0)
    return fail_all(&t->grid, opened != 0 ? err.msg : note.msg);
  boost_msgf(msg, msglen, "%s", note.msg);
  /* Drawn only for a fresh start: a resume overwrites every weight, and
   * drawing them first (Box-Muller over the whole model) was a large part
   * of a resume's start-up. A fresh start happens only where no checkpoint
   * exists (or ckpt.resume=none): a candidate that failed never leads here. */
  if (resumed == 0) model_init_params(&t->m, (uint64_t)cfg->train.seed);
  if (ckpt_staging_bounded(t->ck)) optim_parts_init(&t->parts, &t->m, &t->mt, 16);
  watchdog_phase("start-up: start agreement", WATCH_WAIT);
  measure_peak(t); /* before the last stop check: a signal during it ends the start-up, not a step */
  return accept_start(t, &err);
}

int trainer_run(const train_config *cfg, MPI_Comm world) {
  boost_status err = {0};
  watchdog_phase("start-up: process grid, data and backend", WATCH_WAIT);
  run *t = NULL;
  if (trainer_build(cfg, world, 0, &t, &err) != 0) {
    int rank;
    MPI_Comm_rank(world, &rank);
    if (rank == 0) fprintf(stderr, "boost-train: %s\n", err.msg);
    return 1;
  }
  if (stopped_before_training(t, "during start-up")) {
    trainer_destroy(t);
    return BOOST_EXIT_PREEMPTED;
  }

  train_state *st = &t->st;
  char msg[2048] = "";
  int status = open_and_resume(t, msg, sizeof msg);
  ckpt_session *ck = t->ck;
  if (status != 0) {
    if (ck) ckpt_close(ck);
    trainer_destroy(t);
    return status;
  }
  model_refresh_work(&t->m); /* a resume loaded the float masters: the working copy follows */
  trainer_ckpt_note_start(&t->saves, st);
  if (t->grid.rank == 0) {
    print_start(t, st, t->threads);
    if (ck) printf("checkpoints: %s\n", msg);
  }

  const double flops_per_token = model_flops_per_token(&cfg->model, t->T);
  const long step_delay_ms = test_delay_ms("BOOST_TRAIN_TEST_STEP_DELAY_MS");
  const double t_start = boost_now_s();
  run_watch_begin(cfg, t->grid.rank, st, ck);
  run_interval_start(&t->interval, cfg, t->grid.rank, st, ck);
  int stop_signal = 0;
  float loss = NAN;
  while (st->step < cfg->train.steps) {
    preempt_set_committed(0); /* from here a forced exit loses work */
    run_tb_poll(t); /* the guard's flagged steps since the last pass */
    run_watch_step(ck, st);
    double t0 = boost_now_s(), gnorm = 0.0;
    comm_reset_counts(&t->comm);
    if (pass_skipped(t)) continue;
    float lr = lr_at(cfg, (int)st->step);
    loss = step_gradients(t, st, &gnorm);
    if (cfg->train.guard != GUARD_OFF) { /* the verdict, before the optimizer touches anything */
      guard_verdict v = guard_judge(cfg, st, loss, gnorm);
      const int every = cfg->train.replay_every > 0 && (st->step + 1) % cfg->train.replay_every == 0;
      if ((v.reasons || every) && replay_allowed(t)) { /* a flagged step is replayed before the policy applies */
        const int rc = replay_step(t, &loss, &gnorm, v.reasons != 0);
        if (rc > 0) {
          status = rc;
          break;
        }
        if (rc == 0) v = guard_judge(cfg, st, loss, gnorm); /* the step as the agreeing replays took it */
      }
      if (v.reasons) {
        status = on_flagged(t, loss, gnorm, &v);
        loss = NAN; /* not a step of the run: the final line reports the last accepted one */
        if (status != 0) break;
        if ((stop_signal = preempt_agreed(t->grid.world)) != 0) {
          boost_status ckpt_note = {0};
          t->fence = save_request_submit(&t->saves, ck, st, CKPT_DUE_FILE, &ckpt_note);
          status = BOOST_EXIT_PREEMPTED;
          break;
        }
        continue;
      }
    }
    step_update(t, st, gnorm);
    step_accepted(t, loss, gnorm);
    const comm_ctx step_comm = t->comm; /* this step's traffic, before validation's */
    if (!isfinite(loss)) {
      status = fail_all(&t->grid, "loss is not finite: lower train.lr or check the data (or set train.guard=rollback)");
      break;
    }
    double dt = boost_now_s() - t0;
    test_sleep_ms(step_delay_ms);

    const int last = st->step == cfg->train.steps;
    const int preempted = preempt_agreed(t->grid.world);
    float val_loss = NAN; /* before the checkpoint, which keeps it (/state/val_loss_history) */
    if (cfg->train.val_batches > 0 && ((cfg->train.val_every > 0 && st->step % cfg->train.val_every == 0) || last))
      val_loss = evaluate(t);
    if (!isnan(val_loss)) train_state_push_val(st, val_loss);
    char ckpt_status[128] = "-";
    const int clock = run_interval_due(&t->interval, &t->comm, dt);
    const int force = (last || preempted ? CKPT_DUE_FILE : 0) | clock;
    const int taken = (ckpt_due(ck, st->step, force) ? CKPT_DUE_FILE : 0) |
                      (ckpt_due_local(ck, st->step, force) ? CKPT_DUE_LOCAL : 0);
    if (last) ckpt_test_stop_in("last-step", t->grid.rank);
    boost_status ckpt_note = {0};
    t->fence = save_request_submit(&t->saves, ck, st, force, &ckpt_note);
    boost_msgf(ckpt_status, sizeof ckpt_status, "%s", ckpt_note.msg); /* the step line's column, as wide as ever */
    run_interval_after(&t->interval, ck, taken);

    const double tok_s = (double)t->global_batch * t->T / dt, gflops = flops_per_token * t->global_batch * t->T / dt / 1e9;
    if (t->grid.rank == 0) {
      if (st->step % cfg->train.log_every == 0 || last || !isnan(val_loss) || preempted)
        log_step(t, &step_comm, loss, val_loss, lr, gnorm, tok_s, gflops, dt, ckpt_status);
      if (t->metrics) write_metrics(t, &step_comm, st, loss, val_loss, lr, gnorm, tok_s, gflops, dt, ckpt_status);
      run_tb_step(t, loss, val_loss, lr, gnorm, tok_s, gflops, dt);
    }
    if (cfg->train.sample_every > 0 && st->step % cfg->train.sample_every == 0 && t->grid.rank == 0)
      train_sample_print(&t->m, stdout); /* after the step's timing: not counted in tok/s */
    if (t->grid.pp > 1 && t->grid.rank == 0 && st->step == 1)
      printf("pipeline: peak in-flight micro-batches on stage 0: %d\n", t->pipe.peak_inflight);
    if (preempted) {
      status = BOOST_EXIT_PREEMPTED;
      stop_signal = preempted;
      break;
    }
  }
  watchdog_phase("the final save", WATCH_CKPT);
  ckpt_test_stop_in("final-save", t->grid.rank);
  status = finish(t, ck, status, stop_signal, loss, t_start);
  run_watch_end(cfg, status);
  watchdog_phase("the end: tear-down", WATCH_WAIT);
  if (t->metrics) fclose(t->metrics);
  trainer_destroy(t);
  return status;
}
