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
 * tensors [t0[k], t0[k + 1]), so that the caller can wait for what part k
 * overwrites to be read first (a checkpoint staging its bands in turns,
 * ckpt.staging_limit: the loop waits on the save's fence, then runs the
 * part). Parts 0..n-1 in order give optimizer_step's result bit for bit
 * (AdamW is elementwise). */
typedef struct {
  int n;
  int *t0; /* n + 1 bounds */
  boost_optim_plan **plans;
} optim_parts;
void optim_parts_init(optim_parts *p, const model *m, const model_train *ts, int parts);
void optim_parts_free(optim_parts *p, boost_backend *be);
void optimizer_step_part(model_train *ts, const train_config *cfg, float lr, int t, float grad_scale, const optim_parts *p,
                         int k);

#endif
