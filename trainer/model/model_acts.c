/* Activation memory: one arena of backend memory carved into named buffers
 * for every micro-batch in flight (act_set), plus gradient and scratch
 * buffers shared by all. What a set keeps per layer depends on
 * parallel.recompute (model.h). Every buffer starts 64-byte aligned. */
#include "model_internal.h"

#include <string.h>

#include "check.h"

void model_free_acts(const model *m, model_acts *r) {
  if (r->act_arena) m->be->mem->free(m->be, r->act_arena);
  r->act_arena = NULL;
  for (int k = 0; k < r->nsets; k++) {
    boost_free(r->sets[k].resid);
    boost_free(r->sets[k].acts);
  }
  boost_free(r->sets);
  r->sets = NULL;
  r->cur = NULL;
  r->nsets = 0;
}

/* Two passes: a NULL base measures, a real one hands out addresses. */
typedef struct {
  char *base;
  size_t used; /* bytes */
  const boost_backend *be;
} carver;

static void *carve_bytes(carver *c, size_t bytes) {
  void *p = c->base ? c->base + c->used : NULL;
  c->used += (bytes + 63) / 64 * 64;
  return p;
}
static boost_act *carve(carver *c, size_t n) { return carve_bytes(c, boost_act_bytes(c->be, n)); }
static float *carve_f32(carver *c, size_t n) { return carve_bytes(c, n * sizeof(float)); }

/* What recompute may rebuild: one copy shared by all layers and sets when
 * recomputing, else one per layer. */
static void carve_recomputable(const model *m, model_acts *r, carver *c, layer_acts *a) {
  const model_config *cfg = &m->cfg;
  const size_t N = (size_t)r->B * r->T, T = r->T;
  const size_t dr = m->d_res, da = m->d_qkv, F = m->ffn_loc, att = (size_t)r->B * m->heads_loc * T * 2;
  a->xn1 = carve(c, N * dr);
  a->q = carve(c, N * da);
  a->k = carve(c, N * da);
  a->v = carve(c, N * da);
  a->att = carve_f32(c, att);
  a->attn_out = carve(c, N * da);
  a->resid_mid = carve(c, N * dr);
  a->xn2 = carve(c, N * dr);
  a->gate = carve(c, N * F);
  a->gate_act = model_is_lowrank(cfg, PROJ_GATE) ? a->gate : carve(c, N * F);
  a->up = carve(c, N * F);
  a->prod = carve(c, N * F);
}

/* The bottleneck activations (and the norms' rstd) of a layer. */
static void carve_bottleneck(const model *m, model_acts *r, carver *c, layer_acts *a, int l) {
  const size_t N = (size_t)r->B * r->T;
  const layer_param *lp = &m->layers[l];
  a->rstd1 = carve_f32(c, N);
  a->rstd2 = carve_f32(c, N);
  for (int gi = 0; gi < lp->ngroups; gi++) {
    const proj_group *g = &lp->groups[gi];
    if (!group_width(g)) continue;
    /* + N floats: the fused norm's sums of squares (group_ss) */
    a->hpre[gi] = carve_bytes(c, group_ss_offset(m, N, g) + N * sizeof(float));
    a->h[gi] = carve(c, N * group_width(g));
  }
}

static void carve_head(const model *m, model_acts *r, carver *c, act_set *s) {
  const size_t N = (size_t)r->B * r->T, d = m->cfg.d_model;
  s->rstd_f = carve_f32(c, N);
  s->x_full = carve(c, N * d);
  s->xn_f = carve(c, N * d);
  s->logits = carve(c, N * (size_t)m->vocab_loc);
  s->losses = carve_f32(c, N);
  s->ce_max = carve_f32(c, N);
  s->ce_sum = carve_f32(c, 2 * N);
}

static void carve_scratch(const model *m, model_acts *r, carver *c, size_t max_g) {
  const model_config *cfg = &m->cfg;
  const size_t N = (size_t)r->B * r->T, T = r->T, d = cfg->d_model, hd = d / cfg->n_heads;
  const size_t dr = m->d_res, da = m->d_qkv, F = m->ffn_loc;
  const size_t big = d > (size_t)cfg->ffn ? d : (size_t)cfg->ffn;
  r->rope_cos = carve_f32(c, T * hd / 2);
  r->rope_sin = carve_f32(c, T * hd / 2);
  r->s.d_resid[0] = carve(c, N * dr);
  r->s.d_resid[1] = carve(c, N * dr);
  r->s.d_xn = carve(c, N * big);
  r->s.d_xfull = carve(c, N * d);
  r->s.d_tmp = carve(c, N * big);
  r->s.d_attn = carve(c, N * da);
  r->s.d_q = carve(c, N * da);
  r->s.d_k = carve(c, N * da);
  r->s.d_v = carve(c, N * da);
  r->s.d_att = carve_bytes(c, m->be->ops->attention_scratch_bytes(m->be, r->B, r->T, m->heads_loc));
  r->s.d_prod = carve(c, N * F);
  r->s.d_gate = carve(c, N * F);
  r->s.d_up = carve(c, N * F);
  r->s.d_h = carve(c, N * max_g);
  r->s.d_ss = carve_f32(c, 2 * N);
  r->s.proj_out = carve(c, N * d);
  for (int k = 0; k < r->nsets; k++) {
    r->sets[k].tokens = carve_bytes(c, N * sizeof(int32_t));
    r->sets[k].targets = carve_bytes(c, N * sizeof(int32_t));
  }
}

static void layout_acts(const model *m, model_acts *r, carver *c) {
  const size_t N = (size_t)r->B * r->T;
  size_t max_g = 1;
  for (int l = 0; l < m->nl; l++)
    for (int gi = 0; gi < m->layers[l].ngroups; gi++)
      if (group_width(&m->layers[l].groups[gi]) > max_g) max_g = group_width(&m->layers[l].groups[gi]);
  layer_acts shared;
  memset(&shared, 0, sizeof shared);
  if (r->recompute != RECOMPUTE_NONE) {
    carve_recomputable(m, r, c, &shared);
    /* full recompute rebuilds the bottleneck too: size for the widest layer */
    if (r->recompute == RECOMPUTE_FULL && m->nl > 0) carve_bottleneck(m, r, c, &shared, 0);
  }
  for (int k = 0; k < r->nsets; k++) {
    act_set *s = &r->sets[k];
    const size_t before = c->used;
    for (int l = 0; l <= m->nl; l++) s->resid[l] = carve(c, N * m->d_res);
    for (int l = 0; l < m->nl; l++) {
      layer_acts *a = &s->acts[l];
      if (r->recompute == RECOMPUTE_NONE)
        carve_recomputable(m, r, c, a);
      else
        *a = shared;
      if (r->recompute != RECOMPUTE_FULL) carve_bottleneck(m, r, c, a, l);
    }
    if (k == 0 && m->nl > 0) r->act_bytes_per_layer = (c->used - before) / (size_t)m->nl;
    if (m->stage.has_head) carve_head(m, r, c, s);
  }
  carve_scratch(m, r, c, max_g);
}

void model_use_acts(model_acts *r, int set) {
  BOOST_ASSERT(set >= 0 && set < r->nsets);
  r->cur = &r->sets[set];
}

void model_alloc_acts(const model *m, model_acts *r, int B, int T, int nsets, recompute_mode recompute) {
  if (r->act_arena && r->B == B && r->T == T && r->nsets == nsets && r->recompute == recompute) return;
  BOOST_ASSERT(T <= m->cfg.seq_len); /* the RoPE tables and the config say so */
  BOOST_ASSERT(nsets >= 1);
  model_free_acts(m, r);
  if (!r->stats) r->stats = boost_be_alloc(m->be, 3 * sizeof(double), "the loss and norm statistics");
  r->B = B;
  r->T = T;
  r->recompute = recompute;
  r->nsets = nsets;
  r->sets = boost_calloc((size_t)nsets, sizeof *r->sets);
  for (int k = 0; k < nsets; k++) {
    r->sets[k].resid = boost_calloc((size_t)m->nl + 1, sizeof *r->sets[k].resid);
    r->sets[k].acts = boost_calloc((size_t)m->nl + 1, sizeof *r->sets[k].acts);
  }
  carver c = {NULL, 0, m->be};
  layout_acts(m, r, &c);
  r->act_bytes = c.used;
  r->act_arena = boost_be_alloc(m->be, c.used, "the activation arena");
  c = (carver){r->act_arena, 0, m->be};
  layout_acts(m, r, &c);
  model_use_acts(r, 0);
  m->be->ops->rope_tables(m->be, r->rope_cos, r->rope_sin, T, m->cfg.d_model / m->cfg.n_heads, m->cfg.rope_theta);
}

void model_acts_free(const model *m, model_acts *r) {
  model_free_acts(m, r);
  if (r->stats) m->be->mem->free(m->be, r->stats);
  memset(r, 0, sizeof *r);
}
