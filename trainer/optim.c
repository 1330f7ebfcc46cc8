#include "optim.h"

#include <math.h>

#include "check.h"
#include "ops.h"

float lr_at(const train_config *cfg, int step) {
  const float peak = cfg->train.lr, floor_lr = cfg->train.lr * cfg->train.min_lr_ratio;
  const int warm = cfg->train.warmup_steps, total = cfg->train.steps;
  if (step < warm) return peak * (float)(step + 1) / (float)warm;
  if (total <= warm) return peak;
  double progress = (double)(step - warm) / (double)(total - warm);
  if (progress > 1.0) progress = 1.0;
  return floor_lr + (peak - floor_lr) * 0.5f * (float)(1.0 + cos(M_PI * progress));
}


void optimizer_step(model *m, const train_config *cfg, float lr, int t, float grad_scale, size_t begin, size_t end) {
  adamw_hparams hp = {lr, cfg->train.beta1, cfg->train.beta2, cfg->train.eps, 0.0f};
  size_t lo, hi;
  for (int i = 0; i < m->reg.count; i++) {
    const tensor_desc *td = &m->reg.tensors[i];
    if (!tensor_clip_range(td, begin, end, &lo, &hi)) continue;
    hp.weight_decay = (td->flags & TENSOR_DECAY) ? cfg->train.weight_decay : 0.0f;
    /* ZeRO-1: the moments of [begin, end) are all this replica holds */
    BOOST_ASSERT(lo >= m->reg.mom_begin && hi <= m->reg.mom_end);
    m->ops->adamw_update(m->reg.arena[TENSOR_PARAMS] + lo, m->reg.arena[TENSOR_GRADS] + lo,
                         registry_moment_at(&m->reg, TENSOR_ADAM_M, lo), registry_moment_at(&m->reg, TENSOR_ADAM_V, lo),
                         hi - lo, hp, t, grad_scale);
  }
}
