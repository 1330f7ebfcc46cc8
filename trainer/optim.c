#include "optim.h"

#include <math.h>


float lr_at(const train_config *cfg, int step) {
  const float peak = cfg->train.lr, floor_lr = cfg->train.lr * cfg->train.min_lr_ratio;
  const int warm = cfg->train.warmup_steps, total = cfg->train.steps;
  if (step < warm) return peak * (float)(step + 1) / (float)warm;
  if (total <= warm) return peak;
  double progress = (double)(step - warm) / (double)(total - warm);
  if (progress > 1.0) progress = 1.0;
  return floor_lr + (peak - floor_lr) * 0.5f * (float)(1.0 + cos(M_PI * progress));
}


void optimizer_step(model *m, const train_config *cfg, float lr, int t, float grad_scale) {
  const adamw_hparams hp = {lr, cfg->train.beta1, cfg->train.beta2, cfg->train.eps, cfg->train.weight_decay};
  model_adamw(m, hp, t, grad_scale);
}
