/* The training state of a model (model.h): what training adds to the
 * weights and an activation state. Gradients and both AdamW moments live at the
 * parameters' arena offsets in arenas of their own (the moments possibly
 * one ZeRO-1 chunk of them), with the optimizer plan over this rank's
 * segments and the hook the backward calls as gradients become final.
 *
 * Only training code includes this header: generation, evaluation and
 * export (model_decode.h, tools/generate*, tools/eval*, tools/ckpt_model*,
 * the training log's samples) run forwards over weights and an activation state
 * and cannot reach gradients or moments (tests/cli/layers.sh checks it). */
#ifndef BOOST_MODEL_TRAIN_H
#define BOOST_MODEL_TRAIN_H

#include "model.h"

/* The gradients [from, numel) of the arena are final (model_set_grads_hook). */
typedef void (*model_grads_ready_fn)(void *ctx, size_t from);

typedef struct model_train {
  /* The weights' parameters and working copy (not owned) with the gradient
   * and moment arenas (owned) and the moments' ZeRO-1 range: what
   * checkpoints save and load. */
  tensor_store store;
  boost_optim_plan *plan; /* with the optimizer: this rank's AdamW segments ([mom_begin, mom_end)) */
  model_grads_ready_fn grads_ready; /* model_set_grads_hook's (NULL: none) */
  void *grads_ready_ctx;
} model_train;

typedef struct {
  int with_optimizer;         /* the AdamW moments and the optimizer plan, besides the gradients */
  int zero_shards, zero_rank; /* ZeRO-1: the moment arenas hold chunk zero_rank of zero_shards (the trainer passes
                                 dp, dp_rank); 0 or 1: whole */
} model_train_options;

/* Gradients (zeroed), and with_optimizer the AdamW moments (zeroed,
 * sharded as o says) and the optimizer plan, over m's weights; m (weights
 * allocated) must outlive ts. NULL o: gradients only. */
void model_train_init(model_train *ts, const model *m, const model_train_options *o);
void model_train_free(model_train *ts);

/* Tensor idx's float gradient (backend memory). */
static inline float *model_train_grad(const model_train *ts, int idx) {
  return store_data(&ts->store, TENSOR_GRADS, idx);
}

/* The forward of a training micro-batch already set in r (model_set_batch)
 * whose backward will use dloss per token = scale. Its mean loss is added
 * to r's loss sum (model_loss_sum), not read back. On the stage with the
 * head (tp = 1) the cross-entropy computes the losses and d loss / d logits
 * together, in place, while each row of logits is in cache (max, exp and
 * sum, scale: three passes over a row where the forward's loss and the
 * backward's gradient made five). The same operations as model_forward
 * followed by model_backward, so the same bits. */
void model_forward_train(const model *m, model_acts *r, int B, int T, float scale);
/* Backward of r's current set's last forward; ts's gradients accumulate
 * with dloss per token = scale. */
void model_backward(const model *m, model_acts *r, model_train *ts, float scale);
/* During the following backwards, fn(ctx, from) is called each time the
 * gradients [from, numel) of the arena are complete for the step (the
 * backward runs the registry's order in reverse: after the head, each
 * layer, the embedding). Set it for the step's last backward only (earlier
 * ones still accumulate); NULL removes it. */
void model_set_grads_hook(model_train *ts, model_grads_ready_fn fn, void *ctx);

void model_zero_grads(model_train *ts);

/* Sum of squared gradients over this rank's optimizer segments (the ZeRO-1
 * chunk, or everything), counting tp-replicated tensors on tp rank 0 only:
 * summed over the tp group (and ZeRO-1 replicas) it is the squared norm of
 * the global gradient. Written to r's statistics ([1], backend memory),
 * whose address is returned. */
double *model_grad_sumsq(const model_train *ts, model_acts *r);

/* The optimizer step over this rank's segments: AdamW with lr, step t (from
 * 1) and the gradient clip scale; the working copy follows. */
void model_adamw(model_train *ts, adamw_hparams hp, int t, float grad_scale);
/* The same over the segments of plan p: model_optimizer_plan's of
 * registry tensors [t0, t1) (ts->plan is all of them), freed with the
 * backend's optim_plan_free. */
boost_optim_plan *model_optimizer_plan(const model *m, const model_train *ts, int t0, int t1);
void model_adamw_plan(model_train *ts, const boost_optim_plan *p, adamw_hparams hp, int t, float grad_scale);

#endif
