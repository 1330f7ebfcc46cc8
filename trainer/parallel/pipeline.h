/* Pipeline parallelism on one stage: the 1F1B schedule of a step's
 * micro-batches, and a forward-only pass (validation, activation recompute
 * for checkpoints). Stages exchange the d_res-sharded residual stream of
 * each micro-batch with point-to-point messages over the pp group, tagged
 * by micro-batch index. */
#ifndef BOOST_PIPELINE_H
#define BOOST_PIPELINE_H

#include <stdint.h>

#include "comm.h"
#include "model_train.h"

typedef struct {
  const model *m;
  model_acts *acts;   /* m's activation state: nsets activation sets */
  model_train *ts;  /* the gradients the backward accumulates */
  comm_ctx *comm;
  int pp, pp_rank;
  int B, T, nsets; /* nsets: micro-batches in flight, the model's activation sets */
  boost_act *grad_out; /* backend memory [nsets][B*T*d_res]: stage-input gradients being sent */
  comm_request *send_fwd, *send_bwd;
  int peak_inflight; /* the most micro-batches in flight seen on this stage */
  model_grads_ready_fn grads_ready; /* pipeline_set_grads_hook's */
  void *grads_ready_ctx;
} pipeline;

/* Buffers for run's activation sets (acts->nsets micro-batches in flight). */
void pipeline_init(pipeline *p, const model *m, model_acts *acts, model_train *ts, comm_ctx *comm, int pp, int pp_rank);
void pipeline_free(pipeline *p);

/* fn (NULL: none) hears, during each step's last backward on this stage,
 * which gradients are final (model_set_grads_hook): the data-parallel
 * reduction's buckets go out while the backward runs. */
void pipeline_set_grads_hook(pipeline *p, model_grads_ready_fn fn, void *ctx);
/* micro_batches forwards and backwards in a 1F1B schedule (warm-up
 * forwards, then one forward and one backward alternately, then the
 * remaining backwards), gradients accumulated with d loss / d token = scale.
 * in and tg (host, [micro_batches][B*T] each) hold the step's micro-batches,
 * filled before (the pipeline calls nothing back). The micro-batches' mean
 * losses add up in the model's loss sum on the last stage
 * (model_loss_sum). */
void pipeline_train(pipeline *p, int micro_batches, float scale, const int32_t *in, const int32_t *tg);

/* One forward of a micro-batch already in p->in/p->tg set 0 through the
 * stages (targets NULL: logits only); returns its mean loss on the last
 * stage, 0 elsewhere. tag: a message tag no other message in flight uses. */
float pipeline_forward(pipeline *p, const int32_t *in, const int32_t *tg, int tag);

#endif
