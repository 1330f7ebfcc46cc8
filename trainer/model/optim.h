/* Learning-rate schedule and the optimizer step over a training state. */
#ifndef BOOST_OPTIM_H
#define BOOST_OPTIM_H

#include "config.h"
#include "model_train.h"

/* Linear warmup from lr/warmup to lr over warmup_steps, then cosine decay to
 * lr*min_lr_ratio at `steps`. step counts from 0. */
float lr_at(const train_config *cfg, int step);

/* AdamW over the training state's optimizer segments (its ZeRO-1 chunk, or every
 * parameter) with the given clip scale; t counts from 1. Each tensor keeps
 * its own weight-decay setting, also when the chunk cuts through it. */
void optimizer_step(model_train *ts, const train_config *cfg, float lr, int t, float grad_scale);

/* The same step in parts of about equal size, each a run of registry
 * tensors, so that a part can wait for what it overwrites to be read first
 * (a checkpoint staging its bands in turns, ckpt.staging_limit): before
 * part k, wait(ctx, t0, t1) for its tensors [t0, t1). The result is
 * optimizer_step's bit for bit (AdamW is elementwise). */
typedef struct {
  int n;
  int *t0; /* n + 1 bounds */
  boost_optim_plan **plans;
} optim_parts;
void optim_parts_init(optim_parts *p, const model *m, const model_train *ts, int parts);
void optim_parts_free(optim_parts *p, boost_backend *be);
typedef void (*optim_wait_fn)(void *ctx, int t0, int t1);
void optimizer_step_parts(model_train *ts, const train_config *cfg, float lr, int t, float grad_scale, const optim_parts *p,
                          optim_wait_fn wait, void *ctx);

#endif
