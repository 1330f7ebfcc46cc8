/* Learning-rate schedule and the optimizer step over a model's registry. */
#ifndef BOOST_OPTIM_H
#define BOOST_OPTIM_H

#include "config.h"
#include "model.h"

/* Linear warmup from lr/warmup to lr over warmup_steps, then cosine decay to
 * lr*min_lr_ratio at `steps`. step counts from 0. */
float lr_at(const train_config *cfg, int step);

/* AdamW over the model's optimizer segments (its ZeRO-1 chunk, or every
 * parameter) with the given clip scale; t counts from 1. Each tensor keeps
 * its own weight-decay setting, also when the chunk cuts through it. */
void optimizer_step(model *m, const train_config *cfg, float lr, int t, float grad_scale);

#endif
