/* The training run's parts made and freed (trainer_internal.h): the grid,
 * the data, the backend and the communicator, the model with its optimizer
 * state, the pipeline, the dp reduction and the step's seam. */
#include "trainer_internal.h"

#include <string.h>
#include <unistd.h>

#include "check.h"
#include "resume_plan.h"
#include "run_tensorboard.h"
#include "trainer_faults.h"
#include "watchdog.h"
#ifdef BOOST_HAVE_CUDA
#include "cuda_backend.h"
#endif

static int open_data(trainer *r, boost_status *err) {
  const train_config *cfg = r->cfg;
  if (!cfg->data.train[0]) {
    boost_err(err, "data.train is not set: give a token shard made by boost-data");
    return -1;
  }
  if (data_open(cfg->data.train, &r->data.train_src, err) != 0) return -1;
  memset(&r->data.val, 0, sizeof r->data.val);
  if (cfg->data.val[0]) {
    if (data_open(cfg->data.val, &r->data.val_src, err) != 0) return -1;
    if (data_split_make(r->data.train_src, 0.0, r->data.T, &r->data.train, NULL, err) != 0) return -1;
    if (data_split_make(r->data.val_src, 0.0, r->data.T, &r->data.val, NULL, err) != 0) return -1;
  } else if (data_split_make(r->data.train_src, cfg->data.val_fraction, r->data.T, &r->data.train,
                             cfg->data.val_fraction > 0 ? &r->data.val : NULL, err) != 0) {
    return -1;
  }
  char tok_train[64], tok_val[64];
  data_tokenizer_id(r->data.train_src, tok_train, sizeof tok_train);
  if (r->data.val_src) data_tokenizer_id(r->data.val_src, tok_val, sizeof tok_val);
  if (r->data.val_src && tok_train[0] && tok_val[0] && strcmp(tok_train, tok_val)) {
    boost_err(err, "data.val's tokenizer %s differs from data.train's %s: tokenize both with one", tok_val, tok_train);
    return -1;
  }
  int vocab = data_vocab_size(r->data.train_src);
  if (r->data.val_src && data_vocab_size(r->data.val_src) > vocab) vocab = data_vocab_size(r->data.val_src);
  if (vocab > cfg->model.vocab) {
    boost_err(err, "the data's vocabulary (%d) exceeds model.vocab (%d)", vocab, cfg->model.vocab);
    return -1;
  }
  return 0;
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
static int init_comm(trainer *r, boost_status *err) {
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

/* The step's seam: the data's source feeding the guard's replay, wrapped
 * in the faulty one under the test hook BOOST_TRAIN_TEST_FAULT; every
 * range of local gradients the dp reduction takes passes it. */
static void make_step_source(trainer *r) {
  const train_config *cfg = r->cfg;
  trainer_data *d = &r->data;
  const size_t micro = (size_t)cfg->train.grad_accum * d->B * d->T;
  d->micro_in = boost_calloc(micro, sizeof *d->micro_in);
  d->micro_tg = boost_calloc(micro, sizeof *d->micro_tg);
  r->replay = replay_create(cfg->train.guard.policy != GUARD_OFF, cfg->train.device == DEVICE_CUDA, r->be, &r->comm, &r->grid);
  const step_batches batches = {&d->train, cfg->data.order, (uint64_t)cfg->data.seed, cfg->train.grad_accum,
                                r->grid.dp, r->grid.dp_rank, d->B, d->T};
  r->source = step_source_faulty(step_source_data(&batches, r->replay, r->be), &batches, d->global_batch,
                                 data_vocab_size(d->train_src), r->be, r->mt.store.arena[TENSOR_GRADS],
                                 r->m.reg.numel, r->grid.rank);
  grad_buckets_set_local(&r->par.buckets, step_source_local_grads, r->source);
}

/* init_weights 0: the weights are left to a resume (open_and_resume draws
 * them only for a fresh start). */
int trainer_build(const train_config *cfg, MPI_Comm world, int init_weights, trainer **out, boost_status *err) {
  *out = NULL;
  trainer *r = boost_calloc(1, sizeof *r);
  r->cfg = cfg;
  r->data.B = cfg->train.batch_size;
  r->data.T = cfg->model.seq_len;
  train_state_init(&r->st);
  int world_size;
  MPI_Comm_size(world, &world_size);
  const int dp = config_dp_degree(cfg, world_size), tp = cfg->parallel.tp, pp = cfg->parallel.pp;
  /* Every rank checks the same inputs, so all fail together. */
  if (grid_init(&r->grid, world, dp, tp, pp, err) != 0) {
    boost_free(r);
    return -1;
  }
  r->par.layers_per_stage = boost_calloc((size_t)pp, sizeof *r->par.layers_per_stage);
  const char *unsupported =
      (pp > 1 && cfg->model.tie_embeddings) ? "model.tie_embeddings is not supported with parallel.pp > 1"
      : (cfg->train.report.sample_every > 0 && (tp > 1 || pp > 1))
          ? "train.sample_every needs the whole model on rank 0 (parallel.tp = parallel.pp = 1; set it to 0)"
          : NULL;
  if (unsupported) boost_err(err, "%s", unsupported);
  if (unsupported || model_check_layout(&cfg->model, cfg->parallel.tp_mode, tp, &r->par.mode, err) != 0 ||
      model_plan_stages(&cfg->model, pp, cfg->parallel.stages, r->data.T, r->par.layers_per_stage, err) != 0 ||
      open_data(r, err) != 0) {
    trainer_destroy(r);
    return -1;
  }
  const recompute_mode recompute = cfg->parallel.recompute;
  const int s = r->grid.pp_rank;
  r->par.stage.first_layer = 0;
  for (int k = 0; k < s; k++) r->par.stage.first_layer += r->par.layers_per_stage[k];
  r->par.stage.num_layers = r->par.layers_per_stage[s];
  r->par.stage.has_embed = s == 0;
  r->par.stage.has_head = s == pp - 1;
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
  r->data.global_batch = (int64_t)r->data.B * cfg->train.grad_accum * r->grid.dp;
  /* Arenas split evenly over dp ranks (ZeRO-1 chunks): pad to a multiple. */
  const model_options mo = {.backend = r->be, .comm = &r->comm, .stage = &r->par.stage,
                            .arena_multiple = (size_t)r->grid.dp * 16};
  model_init(&r->m, &cfg->model, r->par.mode, &mo);
  const model_train_options to = {.with_optimizer = 1, .zero_shards = cfg->parallel.zero ? r->grid.dp : 1,
                                  .zero_rank = r->grid.dp_rank};
  model_train_init(&r->mt, &r->m, &to);
  if (init_weights) model_init_params(&r->m, (uint64_t)cfg->train.seed);
  model_alloc_acts(&r->m, &r->acts, r->data.B, r->data.T, nsets, recompute);
  pipeline_init(&r->par.pipe, &r->m, &r->acts, &r->mt, &r->comm, pp, r->grid.pp_rank);
  grad_buckets_init(&r->par.buckets, &r->comm, &r->mt.store, cfg->parallel.dp_bucket_mb, cfg->parallel.zero);
  if (grad_buckets_overlapped(&r->par.buckets)) pipeline_set_grads_hook(&r->par.pipe, grad_buckets_ready, &r->par.buckets);
  make_step_source(r);
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
  pipeline_free(&r->par.pipe);
  if (r->par.buckets.comm) grad_buckets_free(&r->par.buckets);
  boost_free(r->data.val_in);
  boost_free(r->data.val_tg);
  boost_free(r->par.layers_per_stage);
  if (r->source) r->source->ops->destroy(r->source);
  replay_destroy(r->replay);
  boost_free(r->data.micro_in);
  boost_free(r->data.micro_tg);
  if (r->parts.n) optim_parts_free(&r->parts, r->be);
  if (r->m.layers) {
    model_acts_free(&r->m, &r->acts);
    model_train_free(&r->mt);
    model_free(&r->m);
  }
  if (r->comm.ops) comm_free(&r->comm);
  boost_backend_destroy(r->be);
  if (r->data.train_src) data_close(r->data.train_src);
  if (r->data.val_src) data_close(r->data.val_src);
  grid_free(&r->grid);
  boost_free(r);
}

