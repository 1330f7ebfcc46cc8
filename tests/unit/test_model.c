/* Whole model: gradient check against finite differences, one-batch
 * overfitting, and sharding-independent initialisation. The models run on
 * the default CPU backend, whose memory is host memory: the tests read and
 * perturb parameters in place. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "model_train.h"
#include "ops.h"
#include "optim.h"
#include "rng.h"

static model_config small_config(const char *lowrank) {
  train_config c;
  config_defaults(&c);
  model_config m = c.model;
  m.vocab = 23;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 2;
  m.ffn = 24;
  m.rank_attn = 4;
  m.rank_mlp = 6;
  m.seq_len = 5;
  /* Well-conditioned for finite differences: with the default 0.02 the
   * embeddings are tiny and RMSNorm makes the loss strongly curved in them. */
  m.init_std = 0.25f;
  snprintf(m.lowrank, sizeof m.lowrank, "%s", lowrank);
  boost_status err = {0};
  c.model = m;
  cr_assert_eq(config_validate(&c, &err), 0, "%s", err.msg);
  return c.model;
}

static void random_tokens(int32_t *t, int n, int V, uint64_t key) {
  for (int i = 0; i < n; i++) t[i] = (int32_t)(rng_uniform(key, (uint64_t)i) * V);
}

/* For every tensor: the directional derivative along v restricted to that
 * tensor, analytic (grad . v) vs central differences with a step of 0.5% of the
 * tensor's RMS. v = sign(grad) * U(0.5, 1.5): the loss then moves by many fp32
 * ulps (a random direction on a small gradient moves it by less than one),
 * and a gradient wrong in sign or size on any element changes the result.
 * Tolerance: 3% relative + 1e-4 absolute (fp32 forward). */
static void gradient_check_mode(const char *lowrank, int tie, tp_mode mode) {
  model_config cfg = small_config(lowrank);
  cfg.tie_embeddings = tie;
  model m;
  model_acts acts = {0};
  model_train ts;
  model_init(&m, &cfg, mode, NULL);
  model_train_init(&ts, &m, NULL);
  model_init_params(&m, 7);
  const int B = 2, T = 5, N = B * T;
  int32_t in[10], tg[10];
  random_tokens(in, N, cfg.vocab, 1);
  random_tokens(tg, N, cfg.vocab, 2);
  model_zero_grads(&ts);
  model_forward(&m, &acts, in, tg, B, T);
  model_backward(&m, &acts, &ts, 1.0f / N);
  for (int i = 0; i < m.reg.count; i++) {
    const tensor_desc *t = &m.reg.tensors[i];
    float *p = tensor_at(&m.reg, m.w.params, i), *g = model_train_grad(&ts, i);
    const float eps = 0.005f * sqrtf((float)(kern_sum_squares(p, t->numel) / (double)t->numel));
    double analytic = 0.0;
    float *v = malloc(t->numel * sizeof *v);
    for (size_t j = 0; j < t->numel; j++) {
      v[j] = (g[j] < 0 ? -1.0f : 1.0f) * (float)(0.5 + rng_uniform(99 + (uint64_t)i, j));
      analytic += (double)g[j] * v[j];
    }
    for (size_t j = 0; j < t->numel; j++) p[j] += eps * v[j];
    double lp = model_forward(&m, &acts, in, tg, B, T);
    for (size_t j = 0; j < t->numel; j++) p[j] -= 2 * eps * v[j];
    double lm = model_forward(&m, &acts, in, tg, B, T);
    for (size_t j = 0; j < t->numel; j++) p[j] += eps * v[j];
    double numeric = (lp - lm) / (2.0 * eps);
    cr_expect(fabs(numeric - analytic) <= 0.03 * fabs(analytic) + 1e-4,
              "[%s tie=%d] %s: analytic %.6g vs finite difference %.6g", lowrank, tie, t->name, analytic, numeric);
    free(v);
  }
  model_acts_free(&m, &acts);
  model_train_free(&ts);
  model_free(&m);
}

static void gradient_check(const char *lowrank, int tie) { gradient_check_mode(lowrank, tie, TP_NONE); }

Test(model, gradient_check_lowrank) { gradient_check("all", 0); }
Test(model, gradient_check_fullrank) { gradient_check("none", 0); }
Test(model, gradient_check_mixed_tied) { gradient_check("q,v,o,up", 1); }
/* The tensor-parallel code paths on one rank: btp's online RMSNorm folded
 * into the bottleneck, vanilla's factor style, megatron's column/row. */
Test(model, gradient_check_btp_path) { gradient_check_mode("all", 0, TP_BTP); }
Test(model, gradient_check_vanilla_path) { gradient_check_mode("all", 0, TP_VANILLA); }
Test(model, gradient_check_megatron_path) { gradient_check_mode("none", 0, TP_MEGATRON); }

Test(model, tp_code_paths_match_the_plain_forward_on_one_rank) {
  model_config lc = small_config("all"), fc = small_config("none");
  const int B = 2, T = 5;
  int32_t in[10], tg[10];
  random_tokens(in, B * T, lc.vocab, 1);
  random_tokens(tg, B * T, lc.vocab, 2);
  const struct { model_config *c; tp_mode mode; } cases[] = {{&lc, TP_BTP}, {&lc, TP_VANILLA}, {&fc, TP_MEGATRON}};
  for (int i = 0; i < 3; i++) {
    model a, b;
    model_acts ra = {0}, rb = {0};
    model_init(&a, cases[i].c, TP_NONE, NULL);
    model_init(&b, cases[i].c, cases[i].mode, NULL);
    model_init_params(&a, 5);
    model_init_params(&b, 5);
    float la = model_forward(&a, &ra, in, tg, B, T), lb = model_forward(&b, &rb, in, tg, B, T);
    cr_expect(fabsf(la - lb) <= 1e-5f * fabsf(la), "%s: loss %.7g vs plain %.7g", tp_mode_names[cases[i].mode], lb, la);
    model_acts_free(&a, &ra);
    model_acts_free(&b, &rb);
    model_free(&a);
    model_free(&b);
  }
}

/* The training forward computes the cross-entropy's gradient in place of
 * the logits, while each row is in cache: losses and every gradient must
 * be the plain forward-then-backward's to the last bit, on a vocabulary
 * wide enough for whole vector loops and a ragged tail. */
Test(model, training_forward_fuses_the_loss_gradient_bit_for_bit) {
  model_config cfg = small_config("all");
  cfg.vocab = 1037;
  const int B = 2, T = 5, N = B * T;
  int32_t in[10], tg[10];
  random_tokens(in, N, cfg.vocab, 3);
  random_tokens(tg, N, cfg.vocab, 4);
  /* one model's weights, two activation states and two training states */
  model m;
  model_acts plain = {0}, fused = {0};
  model_train gp, gf;
  model_init(&m, &cfg, TP_NONE, NULL);
  model_train_init(&gp, &m, NULL);
  model_train_init(&gf, &m, NULL);
  model_init_params(&m, 11);
  for (int step = 0; step < 2; step++) { /* the second also checks the fused state does not leak into the next */
    model_zero_grads(&gp);
    model_zero_grads(&gf);
    float lp = model_forward(&m, &plain, in, tg, B, T);
    model_backward(&m, &plain, &gp, 0.5f / N);
    model_alloc_acts(&m, &fused, B, T, 1, RECOMPUTE_NONE);
    model_set_batch(&m, &fused, in, tg);
    model_loss_reset(&m, &fused);
    model_forward_train(&m, &fused, B, T, 0.5f / N);
    model_backward(&m, &fused, &gf, 0.5f / N);
    double stats[2];
    model_download_stats(&m, &fused, stats);
    const float lf = (float)stats[0];
    cr_expect(memcmp(&lp, &lf, sizeof lp) == 0, "step %d: loss %.9g (fused) vs %.9g", step, lf, lp);
    for (int i = 0; i < m.reg.count; i++) {
      const tensor_desc *t = &m.reg.tensors[i];
      cr_expect(memcmp(model_train_grad(&gp, i), model_train_grad(&gf, i), t->numel * sizeof(float)) == 0,
                "step %d: gradient of %s differs", step, t->name);
    }
    /* an evaluation forward in between must see logits, not a gradient */
    float ep = model_forward(&m, &plain, in, tg, B, T), ef = model_forward(&m, &fused, in, tg, B, T);
    cr_expect(memcmp(&ep, &ef, sizeof ep) == 0 && memcmp(&ep, &lp, sizeof ep) == 0, "evaluation loss %.9g vs %.9g", ef,
              ep);
  }
  model_acts_free(&m, &plain);
  model_acts_free(&m, &fused);
  model_train_free(&gp);
  model_train_free(&gf);
  model_free(&m);
}

Test(model, registry_names_and_shapes) {
  model_config cfg = small_config("all");
  model m;
  model_train ts;
  model_init(&m, &cfg, TP_NONE, NULL);
  model_train_init(&ts, &m, &(model_train_options){.with_optimizer = 1});
  int a = registry_find(&m.reg, "layers.1.attn.qkv.A"), b = registry_find(&m.reg, "layers.1.mlp.down.B");
  cr_assert(a >= 0 && b >= 0);
  cr_expect_eq(m.reg.tensors[a].ndim, 3);
  cr_expect_eq(m.reg.tensors[a].shape[0], 3);
  cr_expect_eq(m.reg.tensors[a].shape[1], 4);
  cr_expect_eq(m.reg.tensors[a].shape[2], 16);
  cr_expect_eq(m.reg.tensors[b].shape[0], 16);
  cr_expect_eq(m.reg.tensors[b].shape[1], 6);
  cr_expect_geq(registry_find(&m.reg, "layers.0.mlp.gate_up.B"), 0);
  cr_expect_lt(registry_find(&m.reg, "layers.0.attn.qkv.W"), 0, "low-rank model has no full-rank qkv");
  cr_expect_not_null(ts.store.arena[TENSOR_ADAM_V]);
  cr_expect_eq(ts.store.arena[TENSOR_PARAMS], m.w.params, "the training state's parameters are the weights");
  model_train_free(&ts);
  cr_expect_not_null(m.w.params, "freeing the training state leaves the weights");
  model_free(&m);
  /* a group whose members differ in rank-ness splits into single projections */
  model_config mixed = small_config("q,gate,up,down");
  model_init(&m, &mixed, TP_NONE, NULL);
  cr_expect_geq(registry_find(&m.reg, "layers.0.attn.q.A"), 0);
  cr_expect_geq(registry_find(&m.reg, "layers.0.attn.k.W"), 0);
  cr_expect_geq(registry_find(&m.reg, "layers.0.mlp.gate_up.A"), 0);
  model_free(&m);
}

Test(model, init_is_independent_of_sharding) {
  /* A tp=2 shard holds exactly the matching slice of the tp=1 tensor. */
  model_config cfg = small_config("all");
  model full;
  model_init(&full, &cfg, TP_NONE, NULL);
  model_init_params(&full, 11);
  const int qa = registry_find(&full.reg, "layers.0.attn.qkv.A"); /* [3, 4, 16] */
  const float *src = tensor_at(&full.reg, full.w.params, qa);
  for (int split = 1; split <= 2; split++)
    for (int rank = 0; rank < 2; rank++) {
      tensor_registry part;
      registry_init(&part, rank, 2);
      int64_t shape[3] = {3, 4, 16};
      int idx = registry_add(&part, "layers.0.attn.qkv.A", 3, shape, split, TENSOR_DECAY);
      part.tensors[idx].init_std = full.reg.tensors[qa].init_std;
      float dst[3 * 4 * 16];
      cr_assert_leq(part.tensors[idx].numel, sizeof dst / sizeof *dst);
      tensor_init_values(&part.tensors[idx], 11, dst);
      const int R = split == 1 ? 2 : 4, C = split == 2 ? 8 : 16;
      for (int g = 0; g < 3; g++)
        for (int r = 0; r < R; r++)
          for (int c = 0; c < C; c++) {
            const int gr = split == 1 ? rank * 2 + r : r, gc = split == 2 ? rank * 8 + c : c;
            cr_expect_eq(dst[(g * R + r) * C + c], src[(g * 4 + gr) * 16 + gc], "split %d rank %d element (%d,%d,%d)",
                         split, rank, g, r, c);
          }
      registry_free(&part);
    }
  model_free(&full);
}

Test(model, tiny_model_overfits_one_batch) {
  train_config c;
  config_defaults(&c);
  c.train.steps = 150;
  c.train.warmup_steps = 10;
  c.train.lr = 3e-3f;
  c.train.optim.weight_decay = 0.0f;
  model m;
  model_acts acts = {0};
  model_train ts;
  model_init(&m, &c.model, TP_NONE, NULL);
  model_train_init(&ts, &m, &(model_train_options){.with_optimizer = 1});
  model_init_params(&m, 3);
  const int B = 4, T = 32, N = B * T;
  int32_t in[128], tg[128];
  random_tokens(in, N, c.model.vocab, 5);
  random_tokens(tg, N, c.model.vocab, 6);
  float first = 0, loss = 0;
  for (int step = 0; step < c.train.steps; step++) {
    model_zero_grads(&ts);
    loss = model_forward(&m, &acts, in, tg, B, T);
    if (step == 0) first = loss;
    model_backward(&m, &acts, &ts, 1.0f / N);
    double stats[2];
    model_grad_sumsq(&ts, &acts);
    model_download_stats(&m, &acts, stats);
    optimizer_step(&ts, &c, lr_at(&c, step), step + 1, boost_clip_scale(sqrt(stats[1]), c.train.optim.grad_clip));
  }
  cr_expect(fabsf(first - logf((float)c.model.vocab)) < 0.3f, "initial loss %.3f is not near ln(V) = %.3f", first,
            logf((float)c.model.vocab));
  cr_expect_lt(loss, 0.5f, "after %d steps on one batch the loss is still %.3f (from %.3f)", c.train.steps, loss, first);
  model_acts_free(&m, &acts);
  model_train_free(&ts);
  model_free(&m);
}

Test(model, lr_schedule_warms_up_and_decays_to_the_floor) {
  train_config c;
  config_defaults(&c);
  c.train.steps = 100;
  c.train.warmup_steps = 10;
  c.train.lr = 1.0f;
  c.train.min_lr_ratio = 0.1f;
  cr_expect_float_eq(lr_at(&c, 0), 0.1f, 1e-6);
  cr_expect_float_eq(lr_at(&c, 9), 1.0f, 1e-6);
  cr_expect_float_eq(lr_at(&c, 10), 1.0f, 1e-6);
  cr_expect_float_eq(lr_at(&c, 55), 0.55f, 1e-5);
  cr_expect_float_eq(lr_at(&c, 100), 0.1f, 1e-6);
  for (int s = 11; s < 100; s++) cr_expect_leq(lr_at(&c, s), lr_at(&c, s - 1) + 1e-7f, "not monotone at %d", s);
}
