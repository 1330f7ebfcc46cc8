#include "optim.h"

#include <math.h>

#include "check.h"


float lr_at(const train_config *cfg, int step) {
  const float peak = cfg->train.lr, floor_lr = cfg->train.lr * cfg->train.min_lr_ratio;
  const int warm = cfg->train.warmup_steps, total = cfg->train.steps;
  if (step < warm) return peak * (float)(step + 1) / (float)warm;
  if (total <= warm) return peak;
  double progress = (double)(step - warm) / (double)(total - warm);
  if (progress > 1.0) progress = 1.0;
  return floor_lr + (peak - floor_lr) * 0.5f * (float)(1.0 + cos(M_PI * progress));
}


static adamw_hparams hparams(const train_config *cfg, float lr) {
  return (adamw_hparams){lr, cfg->train.optim.beta1, cfg->train.optim.beta2, cfg->train.optim.eps,
                         cfg->train.optim.weight_decay};
}

void optimizer_step(model_train *ts, const train_config *cfg, float lr, int t, float grad_scale) {
  model_adamw(ts, hparams(cfg, lr), t, grad_scale);
}

void optim_parts_init(optim_parts *p, const model *m, const model_train *ts, int parts) {
  const tensor_registry *r = &m->reg;
  p->t0 = boost_calloc((size_t)parts + 1, sizeof *p->t0);
  p->plans = boost_calloc((size_t)parts, sizeof *p->plans);
  p->n = 0;
  size_t done = 0, total = 0;
  for (int i = 0; i < r->count; i++) total += r->tensors[i].numel;
  for (int i = 0; i < r->count && p->n < parts; i++) { /* a part ends where it reaches its share */
    done += r->tensors[i].numel;
    if (i + 1 < r->count && done * (size_t)parts < total * (size_t)(p->n + 1)) continue;
    p->t0[p->n + 1] = i + 1;
    p->plans[p->n] = model_optimizer_plan(m, ts, p->t0[p->n], i + 1);
    p->n++;
  }
}

void optim_parts_free(optim_parts *p, boost_backend *be) {
  for (int k = 0; k < p->n; k++) be->ops->optim_plan_free(be, p->plans[k]);
  boost_free(p->t0);
  boost_free(p->plans);
  *p = (optim_parts){0};
}

void optimizer_step_part(model_train *ts, const train_config *cfg, float lr, int t, float grad_scale, const optim_parts *p,
                         int k) {
  model_adamw_plan(ts, p->plans[k], hparams(cfg, lr), t, grad_scale);
}
