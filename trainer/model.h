/* LLaMA-style decoder whose projections are full-rank or CoLA bottlenecks.
 *
 *   x0 = wte[tokens]
 *   per layer:  h  = x + o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))))
 *               x' = h + down(g(n2(h)) * up(n2(h)))
 *        where g = gate (CoLA MLP form) or silu(gate) (full-rank SwiGLU)
 *   logits = lm_head(norm_f(x_L));  loss = mean cross-entropy
 *
 * Each projection p is y = x W^T (W [out,in], "layers.i.attn.q.W") or
 * y = silu(x A^T) B^T (A [r,in], B [out,r], "layers.i.attn.q.A"/".B").
 * Parameters live in a tensor_registry; activations in one arena sized for a
 * micro-batch of B x T. */
#ifndef BOOST_MODEL_H
#define BOOST_MODEL_H

#include <stdint.h>

#include "config.h"
#include "tensor.h"

typedef struct {
  int lowrank;
  int in, out, r;
  int w;    /* full-rank: W; low-rank: A */
  int b;    /* low-rank: B; full-rank: -1 */
} proj_param;

typedef struct {
  int attn_norm, mlp_norm;
  proj_param proj[PROJ_COUNT];
} layer_param;

/* Saved activations of one layer (pointers into the activation arena). */
typedef struct {
  float *rstd1, *xn1;
  float *hpre[PROJ_COUNT], *h[PROJ_COUNT]; /* low-rank projections only */
  float *q, *k, *v, *att, *attn_out;
  float *resid_mid, *rstd2, *xn2;
  float *gate, *gate_act, *up, *prod;
} layer_acts;

typedef struct {
  model_config cfg;
  tensor_registry reg;
  int wte, lm_head, final_norm;
  layer_param *layers;

  int B, T;           /* micro-batch the activations are sized for */
  float *act_arena;
  size_t act_numel;
  float **resid;      /* n_layers + 1 residual stream points, [N, d] */
  layer_acts *acts;
  float *rstd_f, *xn_f, *logits, *losses;
  float *rope_cos, *rope_sin;
  /* backward scratch */
  float *d_resid[2], *d_xn, *d_tmp, *d_attn, *d_q, *d_k, *d_v, *d_att;
  float *d_prod, *d_gate, *d_up, *d_h;
  int32_t *targets_copy;
} model;

/* Build the registry (names, shapes) for cfg; allocate params + grads (+ the
 * AdamW moments when with_optimizer). tp shards follow the registry. */
void model_init(model *m, const model_config *cfg, int with_optimizer);
void model_free(model *m);

/* Deterministic init from seed: each element is a function of (seed, tensor
 * name, global element index), so any sharding yields the same values. */
void model_init_params(model *m, uint64_t seed);

/* Size the activation arena for micro-batches of B x T (idempotent). */
void model_alloc_acts(model *m, int B, int T);

/* Forward; returns the mean loss over B*T targets (targets may be NULL:
 * logits only, returns 0). */
float model_forward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T);

/* Backward of the last forward; grads accumulate with dloss per token = scale
 * (1/(B*T*accum) for a mean over the step). */
void model_backward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float scale);

void model_zero_grads(model *m);

/* Parameter count (global) and training FLOPs per token (forward+backward,
 * causal attention counted at half). */
int64_t model_num_params(const model *m);
double model_flops_per_token(const model_config *cfg, int T);

#endif
