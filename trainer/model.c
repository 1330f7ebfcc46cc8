#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ops.h"

/* ---- parameters ---------------------------------------------------------- */

static int add_param(model *m, const char *name, int64_t d0, int64_t d1, int split_dim, unsigned flags,
                     double init_std) {
  int64_t shape[2] = {d0, d1};
  int idx = registry_add(&m->reg, name, d1 > 0 ? 2 : 1, shape, split_dim, flags);
  m->reg.tensors[idx].init_std = (float)init_std;
  return idx;
}

/* Sharding follows bottleneck-aware TP: inputs of A and W of q/k/v/gate/up
 * are split over d (row-parallel), outputs of B over heads/ffn/d. */
static void add_proj(model *m, proj_param *p, const char *prefix, proj_kind kind, int in, int out) {
  char name[TENSOR_NAME_MAX];
  p->lowrank = model_is_lowrank(&m->cfg, kind);
  p->in = in;
  p->out = out;
  p->r = p->lowrank ? model_rank(&m->cfg, kind) : 0;
  /* CoLA factors: std r^-1/4 (in+out)^-1/4; full-rank: init_std */
  const double factor_std = p->lowrank ? pow((double)p->r, -0.25) * pow((double)(in + out), -0.25) : 0.0;
  if (p->lowrank) {
    snprintf(name, sizeof name, "%s.%s.A", prefix, proj_names[kind]);
    p->w = add_param(m, name, p->r, in, 1, TENSOR_DECAY, factor_std);
    snprintf(name, sizeof name, "%s.%s.B", prefix, proj_names[kind]);
    p->b = add_param(m, name, out, p->r, 0, TENSOR_DECAY, factor_std);
  } else {
    int row_parallel = kind == PROJ_O || kind == PROJ_DOWN;
    snprintf(name, sizeof name, "%s.%s.W", prefix, proj_names[kind]);
    p->w = add_param(m, name, out, in, row_parallel ? 1 : 0, TENSOR_DECAY, m->cfg.init_std);
    p->b = -1;
  }
}

void model_init(model *m, const model_config *cfg, int with_optimizer) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  const int d = cfg->d_model, V = cfg->vocab, F = cfg->ffn, L = cfg->n_layers;
  registry_init(&m->reg, 0, 1);
  m->wte = add_param(m, "embed.weight", V, d, 1, 0, cfg->init_std);
  m->layers = boost_calloc((size_t)L, sizeof *m->layers);
  char name[64]; /* a prefix: add_proj appends ".gate.A" and the like */
  for (int l = 0; l < L; l++) {
    layer_param *lp = &m->layers[l];
    snprintf(name, sizeof name, "layers.%d.attn_norm", l);
    lp->attn_norm = add_param(m, name, d, 0, 0, TENSOR_INIT_ONES, 0);
    snprintf(name, sizeof name, "layers.%d.attn", l);
    for (int p = PROJ_Q; p <= PROJ_O; p++) add_proj(m, &lp->proj[p], name, p, d, d);
    snprintf(name, sizeof name, "layers.%d.mlp_norm", l);
    lp->mlp_norm = add_param(m, name, d, 0, 0, TENSOR_INIT_ONES, 0);
    snprintf(name, sizeof name, "layers.%d.mlp", l);
    add_proj(m, &lp->proj[PROJ_GATE], name, PROJ_GATE, d, F);
    add_proj(m, &lp->proj[PROJ_UP], name, PROJ_UP, d, F);
    add_proj(m, &lp->proj[PROJ_DOWN], name, PROJ_DOWN, F, d);
  }
  m->final_norm = add_param(m, "final_norm", d, 0, 0, TENSOR_INIT_ONES, 0);
  m->lm_head = cfg->tie_embeddings ? m->wte : add_param(m, "lm_head.weight", V, d, 0, TENSOR_DECAY, cfg->init_std);
  unsigned mask = (1u << TENSOR_PARAMS) | (1u << TENSOR_GRADS);
  if (with_optimizer) mask |= (1u << TENSOR_ADAM_M) | (1u << TENSOR_ADAM_V);
  registry_allocate(&m->reg, mask);
}

void model_init_params(model *m, uint64_t seed) { registry_init_params(&m->reg, seed); }

void model_free(model *m) {
  registry_free(&m->reg);
  boost_free(m->layers);
  boost_free(m->act_arena);
  boost_free(m->resid);
  boost_free(m->acts);
  boost_free(m->targets_copy);
  memset(m, 0, sizeof *m);
}

/* ---- activations --------------------------------------------------------- */

typedef struct {
  float *base;
  size_t used;
  int counting;
} carver;

static float *carve(carver *c, size_t n) {
  size_t rounded = (n + 15) / 16 * 16;
  float *p = c->counting ? NULL : c->base + c->used;
  c->used += rounded;
  return p;
}

static void layout_acts(model *m, carver *c) {
  const model_config *cfg = &m->cfg;
  const size_t N = (size_t)m->B * m->T, d = cfg->d_model, F = cfg->ffn, H = cfg->n_heads, T = m->T;
  for (int l = 0; l <= cfg->n_layers; l++) m->resid[l] = carve(c, N * d);
  size_t max_r = 1, max_w = d > F ? d : F;
  for (int l = 0; l < cfg->n_layers; l++) {
    layer_acts *a = &m->acts[l];
    const layer_param *lp = &m->layers[l];
    a->rstd1 = carve(c, N);
    a->xn1 = carve(c, N * d);
    for (int p = 0; p < PROJ_COUNT; p++) {
      if (!lp->proj[p].lowrank) continue;
      a->hpre[p] = carve(c, N * lp->proj[p].r);
      a->h[p] = carve(c, N * lp->proj[p].r);
      if ((size_t)lp->proj[p].r > max_r) max_r = lp->proj[p].r;
    }
    a->q = carve(c, N * d);
    a->k = carve(c, N * d);
    a->v = carve(c, N * d);
    a->att = carve(c, (size_t)m->B * H * T * T);
    a->attn_out = carve(c, N * d);
    a->resid_mid = carve(c, N * d);
    a->rstd2 = carve(c, N);
    a->xn2 = carve(c, N * d);
    a->gate = carve(c, N * F);
    a->gate_act = lp->proj[PROJ_GATE].lowrank ? a->gate : carve(c, N * F);
    a->up = carve(c, N * F);
    a->prod = carve(c, N * F);
  }
  m->rstd_f = carve(c, N);
  m->xn_f = carve(c, N * d);
  m->logits = carve(c, N * (size_t)cfg->vocab);
  m->losses = carve(c, N);
  m->rope_cos = carve(c, T * (d / H) / 2);
  m->rope_sin = carve(c, T * (d / H) / 2);
  m->d_resid[0] = carve(c, N * d);
  m->d_resid[1] = carve(c, N * d);
  m->d_xn = carve(c, N * d);
  m->d_tmp = carve(c, N * max_w);
  m->d_attn = carve(c, N * d);
  m->d_q = carve(c, N * d);
  m->d_k = carve(c, N * d);
  m->d_v = carve(c, N * d);
  m->d_att = carve(c, (size_t)m->B * H * T * T);
  m->d_prod = carve(c, N * F);
  m->d_gate = carve(c, N * F);
  m->d_up = carve(c, N * F);
  m->d_h = carve(c, N * max_r);
}

void model_alloc_acts(model *m, int B, int T) {
  if (m->act_arena && m->B == B && m->T == T) return;
  if (T > m->cfg.seq_len) boost_fail("sequence length %d exceeds model.seq_len %d", T, m->cfg.seq_len);
  boost_free(m->act_arena);
  boost_free(m->resid);
  boost_free(m->acts);
  boost_free(m->targets_copy);
  m->B = B;
  m->T = T;
  m->resid = boost_calloc((size_t)m->cfg.n_layers + 1, sizeof *m->resid);
  m->acts = boost_calloc((size_t)m->cfg.n_layers, sizeof *m->acts);
  carver c = {NULL, 0, 1};
  layout_acts(m, &c);
  m->act_numel = c.used;
  m->act_arena = boost_calloc(c.used, sizeof(float));
  c = (carver){m->act_arena, 0, 0};
  layout_acts(m, &c);
  m->targets_copy = boost_calloc((size_t)B * T, sizeof(int32_t));
  int hd = m->cfg.d_model / m->cfg.n_heads;
  rope_tables(m->rope_cos, m->rope_sin, T, hd, m->cfg.rope_theta);
}

/* ---- forward ------------------------------------------------------------- */

static inline float *P(const model *m, int idx) { return registry_data(&m->reg, TENSOR_PARAMS, idx); }
static inline float *G(const model *m, int idx) { return registry_data(&m->reg, TENSOR_GRADS, idx); }

static void proj_forward(const model *m, const proj_param *p, float *out, float *hpre, float *h, const float *in, int N) {
  if (p->lowrank)
    cola_forward(out, hpre, h, in, P(m, p->w), P(m, p->b), N, p->in, p->r, p->out);
  else
    linear_forward(out, in, P(m, p->w), N, p->in, p->out);
}

/* din assigned (NULL: skipped). */
static void proj_backward(const model *m, const proj_param *p, float *din, const float *dout, const float *in,
                          const float *hpre, const float *h, int N) {
  if (p->lowrank)
    cola_backward(din, G(m, p->w), G(m, p->b), m->d_h, dout, in, hpre, h, P(m, p->w), P(m, p->b), N, p->in, p->r, p->out);
  else
    linear_backward(din, G(m, p->w), dout, in, P(m, p->w), N, p->in, p->out);
}

static void axpy_inplace(float *y, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void layer_forward(model *m, int l, const float *x, float *x_out) {
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &m->acts[l];
  const int B = m->B, T = m->T, N = B * T, d = cfg->d_model, H = cfg->n_heads, hd = d / H, F = cfg->ffn;

  rmsnorm_forward(a->xn1, a->rstd1, x, P(m, lp->attn_norm), N, d, cfg->norm_eps);
  proj_forward(m, &lp->proj[PROJ_Q], a->q, a->hpre[PROJ_Q], a->h[PROJ_Q], a->xn1, N);
  proj_forward(m, &lp->proj[PROJ_K], a->k, a->hpre[PROJ_K], a->h[PROJ_K], a->xn1, N);
  proj_forward(m, &lp->proj[PROJ_V], a->v, a->hpre[PROJ_V], a->h[PROJ_V], a->xn1, N);
  rope_forward(a->q, a->q, m->rope_cos, m->rope_sin, B, T, H, hd);
  rope_forward(a->k, a->k, m->rope_cos, m->rope_sin, B, T, H, hd);
  attention_forward(a->attn_out, a->att, a->q, a->k, a->v, B, T, H, hd);
  /* o's output goes to a scratch buffer, then the residual add. */
  float *o_out = m->d_tmp;
  proj_forward(m, &lp->proj[PROJ_O], o_out, a->hpre[PROJ_O], a->h[PROJ_O], a->attn_out, N);
  add_forward(a->resid_mid, x, o_out, (size_t)N * d);

  rmsnorm_forward(a->xn2, a->rstd2, a->resid_mid, P(m, lp->mlp_norm), N, d, cfg->norm_eps);
  proj_forward(m, &lp->proj[PROJ_GATE], a->gate, a->hpre[PROJ_GATE], a->h[PROJ_GATE], a->xn2, N);
  proj_forward(m, &lp->proj[PROJ_UP], a->up, a->hpre[PROJ_UP], a->h[PROJ_UP], a->xn2, N);
  if (!lp->proj[PROJ_GATE].lowrank) silu_forward(a->gate_act, a->gate, (size_t)N * F);
  mul_forward(a->prod, a->gate_act, a->up, (size_t)N * F);
  float *down_out = m->d_tmp;
  proj_forward(m, &lp->proj[PROJ_DOWN], down_out, a->hpre[PROJ_DOWN], a->h[PROJ_DOWN], a->prod, N);
  add_forward(x_out, a->resid_mid, down_out, (size_t)N * d);
}

static void validate_tokens(const model *m, const int32_t *tok, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (tok[i] < 0 || tok[i] >= m->cfg.vocab)
      boost_fail("%s token %d at position %zu is outside the vocabulary [0, %d)", what, tok[i], i, m->cfg.vocab);
}

float model_forward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T) {
  model_alloc_acts(m, B, T);
  const model_config *cfg = &m->cfg;
  const int N = B * T, d = cfg->d_model, V = cfg->vocab;
  validate_tokens(m, tokens, (size_t)N, "input");
  embedding_forward(m->resid[0], tokens, P(m, m->wte), N, V, d);
  for (int l = 0; l < cfg->n_layers; l++) layer_forward(m, l, m->resid[l], m->resid[l + 1]);
  rmsnorm_forward(m->xn_f, m->rstd_f, m->resid[cfg->n_layers], P(m, m->final_norm), N, d, cfg->norm_eps);
  linear_forward(m->logits, m->xn_f, P(m, m->lm_head), N, d, V);
  if (!targets) return 0.0f;
  validate_tokens(m, targets, (size_t)N, "target");
  crossentropy_forward(m->losses, m->logits, targets, N, V);
  double sum = 0.0;
  for (int i = 0; i < N; i++) sum += m->losses[i];
  return (float)(sum / N);
}

/* ---- backward ------------------------------------------------------------ */

/* dx: gradient w.r.t. the layer output on entry; on exit the gradient w.r.t.
 * the layer input is in dx_in (may not alias dx). */
static void layer_backward(model *m, int l, const float *x, float *dx, float *dx_in) {
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &m->acts[l];
  const int B = m->B, T = m->T, N = B * T, d = cfg->d_model, H = cfg->n_heads, hd = d / H, F = cfg->ffn;
  const size_t Nd = (size_t)N * d, NF = (size_t)N * F;

  /* MLP: x_out = resid_mid + down(gate_act * up) */
  proj_backward(m, &lp->proj[PROJ_DOWN], m->d_prod, dx, a->prod, a->hpre[PROJ_DOWN], a->h[PROJ_DOWN], N);
  mul_backward(m->d_gate, m->d_up, m->d_prod, a->gate_act, a->up, NF);
  if (!lp->proj[PROJ_GATE].lowrank) silu_backward(m->d_gate, m->d_gate, a->gate, NF);
  proj_backward(m, &lp->proj[PROJ_GATE], m->d_xn, m->d_gate, a->xn2, a->hpre[PROJ_GATE], a->h[PROJ_GATE], N);
  proj_backward(m, &lp->proj[PROJ_UP], m->d_tmp, m->d_up, a->xn2, a->hpre[PROJ_UP], a->h[PROJ_UP], N);
  axpy_inplace(m->d_xn, m->d_tmp, Nd);
  /* d resid_mid = dx + rmsnorm_backward(...) -> kept in dx */
  rmsnorm_backward(m->d_tmp, G(m, lp->mlp_norm), m->d_xn, a->resid_mid, P(m, lp->mlp_norm), a->rstd2, N, d);
  axpy_inplace(dx, m->d_tmp, Nd);

  /* attention: resid_mid = x + o(attn(...)) */
  proj_backward(m, &lp->proj[PROJ_O], m->d_attn, dx, a->attn_out, a->hpre[PROJ_O], a->h[PROJ_O], N);
  attention_backward(m->d_q, m->d_k, m->d_v, m->d_att, m->d_attn, a->q, a->k, a->v, a->att, B, T, H, hd);
  rope_backward(m->d_q, m->d_q, m->rope_cos, m->rope_sin, B, T, H, hd);
  rope_backward(m->d_k, m->d_k, m->rope_cos, m->rope_sin, B, T, H, hd);
  proj_backward(m, &lp->proj[PROJ_Q], m->d_xn, m->d_q, a->xn1, a->hpre[PROJ_Q], a->h[PROJ_Q], N);
  proj_backward(m, &lp->proj[PROJ_K], m->d_tmp, m->d_k, a->xn1, a->hpre[PROJ_K], a->h[PROJ_K], N);
  axpy_inplace(m->d_xn, m->d_tmp, Nd);
  proj_backward(m, &lp->proj[PROJ_V], m->d_tmp, m->d_v, a->xn1, a->hpre[PROJ_V], a->h[PROJ_V], N);
  axpy_inplace(m->d_xn, m->d_tmp, Nd);
  rmsnorm_backward(dx_in, G(m, lp->attn_norm), m->d_xn, x, P(m, lp->attn_norm), a->rstd1, N, d);
  axpy_inplace(dx_in, dx, Nd);
}

void model_backward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float scale) {
  BOOST_ASSERT(m->B == B && m->T == T);
  const model_config *cfg = &m->cfg;
  const int N = B * T, d = cfg->d_model, V = cfg->vocab, L = cfg->n_layers;
  /* dlogits overwrite logits in place */
  crossentropy_backward(m->logits, NULL, m->logits, targets, N, V, scale);
  linear_backward(m->d_xn, G(m, m->lm_head), m->logits, m->xn_f, P(m, m->lm_head), N, d, V);
  float *dx = m->d_resid[0], *dx_in = m->d_resid[1];
  rmsnorm_backward(dx, G(m, m->final_norm), m->d_xn, m->resid[L], P(m, m->final_norm), m->rstd_f, N, d);
  for (int l = L - 1; l >= 0; l--) {
    layer_backward(m, l, m->resid[l], dx, dx_in);
    float *t = dx;
    dx = dx_in;
    dx_in = t;
  }
  embedding_backward(G(m, m->wte), dx, tokens, N, V, d);
}

void model_zero_grads(model *m) { memset(m->reg.arena[TENSOR_GRADS], 0, m->reg.numel * sizeof(float)); }

/* ---- accounting ---------------------------------------------------------- */

int64_t model_num_params(const model *m) {
  int64_t n = 0;
  for (int i = 0; i < m->reg.count; i++) n += tensor_global_numel(&m->reg.tensors[i]);
  return n;
}

double model_flops_per_token(const model_config *c, int T) {
  double per_layer = 0;
  for (int p = 0; p < PROJ_COUNT; p++) {
    double in = p == PROJ_DOWN ? c->ffn : c->d_model;
    double out = (p == PROJ_GATE || p == PROJ_UP) ? c->ffn : c->d_model;
    double r = model_rank(c, p);
    per_layer += model_is_lowrank(c, p) ? r * (in + out) : in * out;
  }
  double matmul = per_layer * c->n_layers + (double)c->d_model * c->vocab;
  /* QK^T and PV over (T+1)/2 keys on average under the causal mask. */
  double attention = 2.0 * c->n_layers * c->d_model * (T + 1) / 2.0;
  return 6.0 * matmul + 6.0 * attention;
}
