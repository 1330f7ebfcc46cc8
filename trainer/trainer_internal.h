/* The training run's private parts (trainer.c), shared with the step
 * guard's healing (trainer_heal.c), what a run shows (trainer_log.c) and the
 * test hook's faults (trainer_faults.c): the run's state and the calls they
 * use. */
#ifndef BOOST_TRAINER_INTERNAL_H
#define BOOST_TRAINER_INTERNAL_H

#include <stdio.h>

#include "ckpt.h"
#include "comm.h"
#include "data.h"
#include "grad_buckets.h"
#include "grid.h"
#include "guard.h"
#include "model_train.h"
#include "optim.h"
#include "pipeline.h"
#include "run_interval.h"
#include "resume_state.h"
#include "save_request.h"
#include "train_state.h"
#include "trainer.h"

struct trainer {
  const train_config *cfg;
  process_grid grid;
  comm_ctx comm;
  boost_backend *be;
  tp_mode mode;
  int threads;
  train_state st;
  data_source *train_src, *val_src;
  data_split train, val;
  model m;         /* the layout and weights */
  model_acts acts;  /* the step's activation sets */
  model_train mt;  /* gradients, AdamW moments, the optimizer plan */
  int B, T;
  int64_t global_batch;
  pipeline pipe;
  grad_buckets buckets; /* the dp reduction, overlapped with the step's last backward */
  model_stage stage;
  int *layers_per_stage; /* [pp] */
  FILE *metrics;
  struct run_tb *tb;  /* rank 0's train.tensorboard (run_tensorboard.h; NULL: none) */
  double peak_flops;  /* the job's peak FLOP/s, all ranks, MFU's denominator (0: unknown) */
  int32_t *val_in, *val_tg; /* validation's micro-batch: the pipeline's buffers hold the step's last one */
  ckpt_session *ck; /* trainer_run's checkpoint session (NULL: none) */
  optim_parts parts; /* the optimizer step in parts when ck's staging is bounded (n 0: whole) */
  save_builder saves;    /* the save requests trainer_run submits to ck */
  ckpt_fence fence;      /* the last submit's staging fence: waited on before the optimizer changes the arenas */
  run_interval interval; /* ckpt.every_seconds / ckpt.every = auto / ckpt.local_every = auto */
  /* The guard's replay: this rank's own gradients and loss share hashed
   * as the dp reduction takes them (NULL: no replay here, not hashed). */
  void *local_hash;      /* XXH3_state_t */
  uint64_t local_digest; /* of the step's latest execution */
  float *hash_host;      /* a host copy's buffer where the backend's memory is not the host's */
  size_t fault_at;       /* the test hook's gradient to flip before the reduction (SIZE_MAX: none) */
  size_t nan_at;         /* the test hook's gradient to make a NaN before the reduction (SIZE_MAX: none) */
};
typedef struct trainer run;

/* Every rank reaches the same verdict, rank 0 prints it; returns 1. */
int fail_all(const process_grid *g, const char *msg);
/* The step's forward and backward over the global batch, the gradients
 * reduced: its mean loss on every rank and the pre-clip global norm. */
float step_gradients(run *r, train_state *st, double *grad_norm);

/* ---- what a run shows (trainer_log.c) ---- */

/* Rank 0, at start: the model, its memory, the pipeline, the backend, the layout. */
void print_start(run *r, const train_state *st, int threads);
/* Rank 0's line for a step. */
void log_step(const run *t, const comm_ctx *step_comm, float loss, float val_loss, float lr, double gnorm,
              double tok_s, double gflops, double dt, const char *ckpt_status);
/* The step's model FLOP utilisation in percent of t->peak_flops (NAN: no peak). */
double run_mfu(const run *t, double gflops);
/* This process's peak resident memory (its RSS high-water mark), MiB. */
double peak_rss_mib(void);
/* The job's peak into t->peak_flops: train.peak_tflops, else every rank's
 * backend GEMM measured at once, summed. Collective. */
void measure_peak(run *t);
/* The step's JSON line in train.metrics. */
void write_metrics(run *r, const comm_ctx *comm_counts, const train_state *st, float loss, float val_loss, float lr,
                   double gnorm, double tok_s, double gflops, double dt, const char *ckpt_status);

/* ---- the test hook BOOST_TRAIN_TEST_FAULT (trainer_faults.c, docs/CHAOS.md) ---- */

/* Whether global batch `batch` is to be noise (kind spike: every rank's share). */
int test_fault_noise(int64_t batch);
/* Sample `idx` as noise: tokens drawn uniformly from the data's vocabulary,
 * a pure function of the sample index. */
void noise_window(const run *r, int64_t idx, int32_t *in, int32_t *tg);
/* Before a step's execution: which of this rank's gradients gets a flipped
 * bit (sdc, sdc-persistent) or a NaN (nan) before the reduction. */
void test_faults_begin(run *r, int64_t batch);
/* grad_buckets_set_local's function: the faults above land, the replay hashes. */
void test_faults_local_grads(void *ctx, float *grads, size_t from, size_t to);
/* After the reduction: the sdc-reduced flip. */
void test_faults_reduced(run *r, int64_t batch);
/* What the loss-spike kind adds to this rank's share of the loss (0: none). */
double test_fault_loss(const run *r, int64_t batch);

/* ---- the step guard's healing (trainer_heal.c, docs/GUARD.md) ---- */

/* The replay's hash of this rank's local gradients (replay_allowed
 * decides whether there is one): begun at each execution of a step,
 * given every range the dp reduction takes before it does, ended with the
 * rank's share of the loss. */
void replay_hash_open(run *t);
void replay_hash_close(run *t);
void replay_hash_begin(run *t);
void replay_hash_grads(run *t, const float *grads, size_t from, size_t to);
void replay_hash_end(run *t, double local_loss);

/* Passes the batches train.skip_batches and the guard's ledger skip; 1 when
 * the run's next batch was one (the loop starts the step again). */
int pass_skipped(run *t);
/* Whether a replay can tell a fault from a real result here (one line when not). */
int replay_allowed(run *t);
/* The step taken again from the same weights and batch (flagged: the guard
 * flagged it, else train.replay_every): 0 a fault healed (loss and gnorm
 * those of the agreeing replays), -1 the same bits, > 0 an exit status. */
int replay_step(run *t, float *loss, double *gnorm, int flagged);
/* A flagged step under the policy: 0 go on (nothing applied), else an exit status. */
int on_flagged(run *t, float loss, double gnorm, const guard_verdict *v);

#endif
