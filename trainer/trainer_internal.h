/* The training run's private parts, in parts of their own: the data, the
 * parallel pieces, what a run shows, and the step's seam and replay. The
 * loop's files depend one way: trainer.c (the loop and the step, top-down)
 * over trainer_build.c (the parts made and freed) and trainer_heal.c (the
 * guard's healing), over step.c (the step's gradients), over the step
 * source (step_source.h, trainer_faults.h) and the replay (replay.h);
 * trainer_log.c (what a run shows) under all of them. */
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
#include "replay.h"
#include "run_interval.h"
#include "resume_state.h"
#include "save_request.h"
#include "step_source.h"
#include "train_state.h"
#include "trainer.h"

/* The data: the splits, the step's micro-batches and validation's. */
typedef struct {
  data_source *train_src, *val_src;
  data_split train, val;
  int B, T;             /* a micro-batch's sequences and tokens per sequence */
  int64_t global_batch; /* sequences per step over the job */
  int32_t *micro_in, *micro_tg; /* the step's micro-batches on this rank [grad_accum][B*T] */
  int32_t *val_in, *val_tg;     /* validation's micro-batch: the checkpoint's activations keep the step's last one */
} trainer_data;

/* The parallel pieces beyond the grid and the communicator. */
typedef struct {
  tp_mode mode;
  model_stage stage;
  int *layers_per_stage; /* [pp] */
  pipeline pipe;
  grad_buckets buckets; /* the dp reduction, overlapped with the step's last backward */
} trainer_parallel;

/* What a run shows beyond the terminal. */
typedef struct {
  FILE *metrics;       /* rank 0's train.metrics (NULL: none) */
  struct run_tb *tb;   /* rank 0's train.tensorboard (run_tensorboard.h; NULL: none) */
  double peak_flops;   /* the job's peak FLOP/s, all ranks, MFU's denominator (0: unknown) */
  comm_ctx step_comm;  /* the last step's traffic, before validation's */
} trainer_output;

struct trainer {
  const train_config *cfg;
  train_state st;
  process_grid grid;
  comm_ctx comm;
  boost_backend *be;
  int threads;
  model m;          /* the layout and weights */
  model_acts acts;  /* the step's activation sets */
  model_train mt;   /* gradients, AdamW moments, the optimizer plan */
  trainer_data data;
  trainer_parallel par;
  trainer_output out;
  step_source *source; /* the step's one seam: the data, or the test hook's faulty source around it */
  replay *replay;      /* the guard's replay (NULL: none) */
  ckpt_session *ck; /* trainer_run's checkpoint session (NULL: none) */
  optim_parts parts; /* the optimizer step in parts when ck's staging is bounded (n 0: whole) */
  save_builder saves;  /* the save requests trainer_run submits to ck */
  ckpt_fence fence;    /* the last submit's staging fence: waited on before the optimizer changes the arenas */
  run_interval interval; /* ckpt.every_seconds / ckpt.every = auto / ckpt.local_every = auto */
};

/* ---- the parts made and freed (trainer_build.c) ---- */

/* init_weights 0: the weights are left to a resume. Collective. */
int trainer_build(const train_config *cfg, MPI_Comm world, int init_weights, trainer **out, boost_status *err);

/* ---- the step's gradients (step.c) ---- */

/* The step's forward and backward over the global batch, the gradients
 * reduced: its mean loss on every rank and the pre-clip global norm. */
float step_gradients(trainer *t, double *grad_norm);
/* Whether this rank's loss counts in a reduction over world. */
int owns_loss(const trainer *t);

/* ---- what a run shows (trainer_log.c) ---- */

/* Every rank reaches the same verdict, rank 0 says it; returns 1. */
int fail_all(const process_grid *g, const char *msg);
/* Rank 0, at start: the model, its memory, the pipeline, the backend, the layout. */
void print_start(const trainer *t, const train_state *st, int threads);
/* Rank 0's line for a step. */
void log_step(const trainer *t, const comm_ctx *step_comm, float loss, float val_loss, float lr, double gnorm,
              double tok_s, double gflops, double dt, const char *ckpt_status);
/* The step's model FLOP utilisation in percent of the job's peak (NAN: no peak). */
double run_mfu(const trainer *t, double gflops);
/* This process's peak resident memory (its RSS high-water mark), MiB. */
double peak_rss_mib(void);
/* The job's peak into t->out.peak_flops: train.peak_tflops, else every
 * rank's backend GEMM measured at once, summed. Collective. */
void measure_peak(trainer *t);
/* The step's JSON line in train.metrics. */
void write_metrics(trainer *t, const comm_ctx *comm_counts, const train_state *st, float loss, float val_loss, float lr,
                   double gnorm, double tok_s, double gflops, double dt, const char *ckpt_status);

/* ---- the step guard's healing (trainer_heal.c, docs/GUARD.md) ---- */

/* Passes the batches train.skip_batches and the guard's ledger skip; 1 when
 * the run's next batch was one (the loop starts the step again). */
int pass_skipped(trainer *t);
/* Whether a replay can tell a fault from a real result here (one line when not). */
int replay_allowed(trainer *t);
/* The step taken again from the same weights and batch (flagged: the guard
 * flagged it, else train.replay_every): 0 a fault healed (loss and gnorm
 * those of the agreeing replays), -1 the same bits, > 0 an exit status. */
int replay_step(trainer *t, float *loss, double *gnorm, int flagged);
/* A flagged step under the policy: 0 go on (nothing applied), else an exit status. */
int on_flagged(trainer *t, float loss, double gnorm, const guard_verdict *v);

#endif
