/* Activation memory: one arena carved into named buffers for every
 * micro-batch in flight (act_set), plus gradient and scratch buffers shared
 * by all. What a set keeps per layer depends on parallel.recompute (model.h). */
#include "model_internal.h"

#include <string.h>

#include "check.h"

void model_free_acts(model *m) {
  boost_free(m->act_arena);
  m->act_arena = NULL;
  for (int k = 0; k < m->nsets; k++) {
    boost_free(m->sets[k].resid);
    boost_free(m->sets[k].acts);
  }
  boost_free(m->sets);
  m->sets = NULL;
  m->cur = NULL;
  m->nsets = 0;
}

typedef struct {
  float *base;
  size_t used;
} carver;

static float *carve(carver *c, size_t n) {
  float *p = c->base ? c->base + c->used : NULL;
  c->used += (n + 15) / 16 * 16;
  return p;
}

/* What recompute may rebuild: one copy shared by all layers and sets when
 * recomputing, else one per layer. */
static void carve_recomputable(model *m, carver *c, layer_acts *a) {
  const model_config *cfg = &m->cfg;
  const size_t N = (size_t)m->B * m->T, T = m->T;
  const size_t dr = m->d_res, da = m->d_qkv, F = m->ffn_loc, att = (size_t)m->B * m->heads_loc * T * 2;
  a->xn1 = carve(c, N * dr);
  a->q = carve(c, N * da);
  a->k = carve(c, N * da);
  a->v = carve(c, N * da);
  a->att = carve(c, att);
  a->attn_out = carve(c, N * da);
  a->resid_mid = carve(c, N * dr);
  a->xn2 = carve(c, N * dr);
  a->gate = carve(c, N * F);
  a->gate_act = model_is_lowrank(cfg, PROJ_GATE) ? a->gate : carve(c, N * F);
  a->up = carve(c, N * F);
  a->prod = carve(c, N * F);
}

/* The bottleneck activations (and the norms' rstd) of a layer. */
static void carve_bottleneck(model *m, carver *c, layer_acts *a, int l) {
  const size_t N = (size_t)m->B * m->T;
  const layer_param *lp = &m->layers[l];
  a->rstd1 = carve(c, N);
  a->rstd2 = carve(c, N);
  for (int gi = 0; gi < lp->ngroups; gi++) {
    const size_t w = group_width(&lp->groups[gi]);
    if (!w) continue;
    a->hpre[gi] = carve(c, N * w + N); /* + N: the fused norm's sum of squares */
    a->h[gi] = carve(c, N * w);
  }
}

static void layout_acts(model *m, carver *c) {
  const model_config *cfg = &m->cfg;
  const size_t N = (size_t)m->B * m->T, T = m->T, d = cfg->d_model, hd = d / cfg->n_heads;
  const size_t dr = m->d_res, da = m->d_qkv, F = m->ffn_loc;
  size_t max_g = 1;
  for (int l = 0; l < m->nl; l++)
    for (int gi = 0; gi < m->layers[l].ngroups; gi++)
      if (group_width(&m->layers[l].groups[gi]) > max_g) max_g = group_width(&m->layers[l].groups[gi]);
  layer_acts shared;
  memset(&shared, 0, sizeof shared);
  if (m->recompute != RECOMPUTE_NONE) {
    carve_recomputable(m, c, &shared);
    /* full recompute rebuilds the bottleneck too: size for the widest layer */
    if (m->recompute == RECOMPUTE_FULL && m->nl > 0) carve_bottleneck(m, c, &shared, 0);
  }
  for (int k = 0; k < m->nsets; k++) {
    act_set *s = &m->sets[k];
    const size_t before = c->used;
    for (int l = 0; l <= m->nl; l++) s->resid[l] = carve(c, N * dr);
    for (int l = 0; l < m->nl; l++) {
      layer_acts *a = &s->acts[l];
      if (m->recompute == RECOMPUTE_NONE)
        carve_recomputable(m, c, a);
      else
        *a = shared;
      if (m->recompute != RECOMPUTE_FULL) carve_bottleneck(m, c, a, l);
    }
    if (k == 0 && m->nl > 0) m->act_bytes_per_layer = (c->used - before) * sizeof(float) / (size_t)m->nl;
    if (m->stage.has_head) {
      s->rstd_f = carve(c, N);
      s->x_full = carve(c, N * d);
      s->xn_f = carve(c, N * d);
      s->logits = carve(c, N * (size_t)m->vocab_loc);
      s->losses = carve(c, N);
      s->ce_max = carve(c, N);
      s->ce_sum = carve(c, 2 * N);
    }
  }
  const size_t big = d > (size_t)cfg->ffn ? d : (size_t)cfg->ffn;
  m->rope_cos = carve(c, T * hd / 2);
  m->rope_sin = carve(c, T * hd / 2);
  m->s.d_resid[0] = carve(c, N * dr);
  m->s.d_resid[1] = carve(c, N * dr);
  m->s.d_xn = carve(c, N * big);
  m->s.d_xfull = carve(c, N * d);
  m->s.d_tmp = carve(c, N * big);
  m->s.d_attn = carve(c, N * da);
  m->s.d_q = carve(c, N * da);
  m->s.d_k = carve(c, N * da);
  m->s.d_v = carve(c, N * da);
  m->s.d_att = carve(c, m->ops->attention_scratch_floats(m->B, m->T, m->heads_loc));
  m->s.d_prod = carve(c, N * F);
  m->s.d_gate = carve(c, N * F);
  m->s.d_up = carve(c, N * F);
  m->s.d_h = carve(c, N * max_g);
  m->s.d_ss = carve(c, 2 * N);
  m->s.proj_out = carve(c, N * d);
}

void model_use_acts(model *m, int set) {
  BOOST_ASSERT(set >= 0 && set < m->nsets);
  m->cur = &m->sets[set];
}

void model_alloc_acts(model *m, int B, int T, int nsets, recompute_mode recompute) {
  if (m->act_arena && m->B == B && m->T == T && m->nsets == nsets && m->recompute == recompute) return;
  BOOST_ASSERT(T <= m->cfg.seq_len); /* the RoPE tables and the config say so */
  BOOST_ASSERT(nsets >= 1);
  model_free_acts(m);
  m->B = B;
  m->T = T;
  m->recompute = recompute;
  m->nsets = nsets;
  m->sets = boost_calloc((size_t)nsets, sizeof *m->sets);
  for (int k = 0; k < nsets; k++) {
    m->sets[k].resid = boost_calloc((size_t)m->nl + 1, sizeof *m->sets[k].resid);
    m->sets[k].acts = boost_calloc((size_t)m->nl + 1, sizeof *m->sets[k].acts);
  }
  carver c = {NULL, 0};
  layout_acts(m, &c);
  m->act_numel = c.used;
  m->act_arena = boost_calloc(c.used, sizeof(float));
  c = (carver){m->act_arena, 0};
  layout_acts(m, &c);
  model_use_acts(m, 0);
  m->ops->rope_tables(m->rope_cos, m->rope_sin, T, m->cfg.d_model / m->cfg.n_heads, m->cfg.rope_theta);
}
