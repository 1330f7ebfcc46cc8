/* Building a model: the tensor-parallel layout check, the tensor registry
 * (every parameter with its global name, shape and this rank's shard), the
 * projection groups, and the pipeline stage plan. */
#include "model_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"


int model_check_layout(const model_config *c, tp_mode requested, int tp, tp_mode *mode, boost_status *err) {
  const unsigned all = (1u << PROJ_COUNT) - 1;
  const int all_low = c->lowrank_mask == all, none_low = c->lowrank_mask == 0;
  switch (requested) {
  case TP_AUTO:
  case TP_NONE:
    if (tp == 1) *mode = TP_NONE;
    else if (all_low) *mode = TP_BTP;
    else if (none_low) *mode = TP_MEGATRON;
    else
      return boost_err(err, "model.lowrank=%s mixes low-rank and full-rank projections: tensor parallelism needs all or none",
                  c->lowrank);
    break;
  case TP_BTP:
  case TP_VANILLA:
    if (!all_low)
      return boost_err(err, "parallel.tp_mode=%s needs every projection low-rank (model.lowrank=all), not '%s'",
                  tp_mode_names[requested], c->lowrank);
    *mode = requested;
    break;
  case TP_MEGATRON:
    if (!none_low)
      return boost_err(err, "parallel.tp_mode=megatron needs a full-rank model (model.lowrank=none), not '%s'", c->lowrank);
    *mode = TP_MEGATRON;
    break;
  default: return boost_err(err, "bad parallel.tp_mode %d", (int)requested);
  }
  if (tp == 1) return 0;
  if (c->n_heads % tp) return boost_err(err, "model.n_heads %d is not divisible by parallel.tp %d", c->n_heads, tp);
  if (c->d_model % tp) return boost_err(err, "model.d_model %d is not divisible by parallel.tp %d", c->d_model, tp);
  if (c->ffn % tp) return boost_err(err, "model.ffn %d is not divisible by parallel.tp %d", c->ffn, tp);
  if (c->vocab % tp) return boost_err(err, "model.vocab %d is not divisible by parallel.tp %d", c->vocab, tp);
  if (*mode == TP_VANILLA && (c->rank_attn % tp || c->rank_mlp % tp))
    return boost_err(err, "model.rank_attn %d / rank_mlp %d are not divisible by parallel.tp %d (vanilla shards r)",
                c->rank_attn, c->rank_mlp, tp);
  if (c->tie_embeddings) return boost_err(err, "model.tie_embeddings is not supported with parallel.tp > 1");
  return 0;
}

/* ---- parameters ---------------------------------------------------------- */

static int add_param(model *m, const char *name, int ndim, const int64_t *shape, int split_dim, unsigned flags,
                     double init_std) {
  int idx = registry_add(&m->reg, name, ndim, shape, m->tp > 1 ? split_dim : -1, flags);
  m->reg.tensors[idx].init_std = (float)init_std;
  return idx;
}

const char *model_group_name(const proj_group *g) {
  if (g->nproj == 3) return "qkv";
  if (g->nproj == 2) return "gate_up";
  return proj_names[g->kinds[0]];
}

static group_style style_for(tp_mode mode, int slot) {
  switch (mode) {
  case TP_BTP: return STYLE_BTP;
  case TP_VANILLA: return STYLE_FACTOR;
  case TP_MEGATRON: return (slot == SLOT_ATTN_IN || slot == SLOT_MLP_IN) ? STYLE_COLUMN : STYLE_ROW;
  default: return STYLE_LOCAL;
  }
}

/* Declares a group's tensors: [g, r, in] / [g, out, r] / [g, out, in], 2-D
 * when g = 1; the split dim follows the group's style. */
static void add_group(model *m, proj_group *g, const char *prefix, int slot) {
  const model_config *c = &m->cfg;
  const int t = m->tp;
  g->style = style_for(m->mode, slot);
  g->in = (g->kinds[0] == PROJ_DOWN) ? c->ffn : c->d_model;
  g->out = (g->kinds[0] == PROJ_GATE || g->kinds[0] == PROJ_UP) ? c->ffn : c->d_model;
  g->r = g->lowrank ? model_rank(c, g->kinds[0]) : 0;
  g->in_loc = (g->style == STYLE_BTP || g->style == STYLE_ROW) ? g->in / t : g->in;
  g->out_loc = (g->style == STYLE_BTP || g->style == STYLE_COLUMN) ? g->out / t : g->out;
  g->r_loc = g->style == STYLE_FACTOR ? g->r / t : g->r;
  const int nd = g->nproj > 1 ? 3 : 2, o = nd - 2; /* o: offset of the matrix dims */
  char name[TENSOR_NAME_MAX];
  int64_t shape[3] = {g->nproj, 0, 0};
  if (g->lowrank) {
    const double std = pow((double)g->r, -0.25) * pow((double)(g->in + g->out), -0.25);
    shape[o] = g->r, shape[o + 1] = g->in;
    snprintf(name, sizeof name, "%s.%s.A", prefix, model_group_name(g));
    g->A = add_param(m, name, nd, shape, g->style == STYLE_BTP ? o + 1 : o, TENSOR_DECAY, std);
    shape[o] = g->out, shape[o + 1] = g->r;
    snprintf(name, sizeof name, "%s.%s.B", prefix, model_group_name(g));
    g->B = add_param(m, name, nd, shape, g->style == STYLE_BTP ? o : o + 1, TENSOR_DECAY, std);
  } else {
    shape[o] = g->out, shape[o + 1] = g->in;
    snprintf(name, sizeof name, "%s.%s.W", prefix, model_group_name(g));
    g->A = add_param(m, name, nd, shape, g->style == STYLE_ROW ? o + 1 : o, TENSOR_DECAY, c->init_std);
    g->B = -1;
  }
}

/* Projections of a slot form one group when they agree on rank-ness. */
static void add_slot(model *m, layer_param *lp, const char *prefix, int slot, const proj_kind *kinds, int n) {
  lp->first_group[slot] = lp->ngroups;
  int same = 1;
  for (int i = 1; i < n; i++) same &= model_is_lowrank(&m->cfg, kinds[i]) == model_is_lowrank(&m->cfg, kinds[0]);
  for (int i = 0; i < n; i += same ? n : 1) {
    proj_group *g = &lp->groups[lp->ngroups++];
    memset(g, 0, sizeof *g);
    g->nproj = same ? n : 1;
    for (int j = 0; j < g->nproj; j++) g->kinds[j] = kinds[i + j];
    g->lowrank = model_is_lowrank(&m->cfg, kinds[i]);
    add_group(m, g, prefix, slot);
  }
  lp->first_group[slot + 1] = lp->ngroups;
}

/* Every parameter of this stage, in registry order: embedding, per layer
 * the attention norm, q/k/v, o, the MLP norm, gate/up, down; then the final
 * norm and LM head. */
static void register_params(model *m) {
  const model_config *cfg = &m->cfg;
  const int d = cfg->d_model, V = cfg->vocab, L = m->nl, l0 = m->stage.first_layer;
  const int btp = m->mode == TP_BTP;
  registry_init(&m->reg, m->tp_rank, m->tp);
  int64_t shape[2] = {V, d};
  m->ends.wte = m->ends.lm_head = m->ends.final_norm = -1;
  if (m->stage.has_embed) m->ends.wte = add_param(m, "embed.weight", 2, shape, btp ? 1 : -1, 0, cfg->init_std);
  m->layers = boost_calloc((size_t)L + 1, sizeof *m->layers);
  static const proj_kind attn_in[] = {PROJ_Q, PROJ_K, PROJ_V}, attn_out[] = {PROJ_O};
  static const proj_kind mlp_in[] = {PROJ_GATE, PROJ_UP}, mlp_out[] = {PROJ_DOWN};
  char name[64];
  int64_t dshape[1] = {d};
  for (int l = 0; l < L; l++) {
    layer_param *lp = &m->layers[l];
    snprintf(name, sizeof name, "layers.%d.attn_norm", l0 + l);
    lp->attn_norm = add_param(m, name, 1, dshape, btp ? 0 : -1, TENSOR_INIT_ONES, 0);
    snprintf(name, sizeof name, "layers.%d.attn", l0 + l);
    add_slot(m, lp, name, SLOT_ATTN_IN, attn_in, 3);
    add_slot(m, lp, name, SLOT_ATTN_OUT, attn_out, 1);
    snprintf(name, sizeof name, "layers.%d.mlp_norm", l0 + l);
    lp->mlp_norm = add_param(m, name, 1, dshape, btp ? 0 : -1, TENSOR_INIT_ONES, 0);
    snprintf(name, sizeof name, "layers.%d.mlp", l0 + l);
    add_slot(m, lp, name, SLOT_MLP_IN, mlp_in, 2);
    add_slot(m, lp, name, SLOT_MLP_OUT, mlp_out, 1);
  }
  if (m->stage.has_head) {
    m->ends.final_norm = add_param(m, "final_norm", 1, dshape, -1, TENSOR_INIT_ONES, 0);
    m->ends.lm_head = cfg->tie_embeddings ? m->ends.wte : add_param(m, "lm_head.weight", 2, shape, 0, TENSOR_DECAY, cfg->init_std);
  }
}


void model_init(model *m, const model_config *cfg, tp_mode mode, const model_options *opt) {
  static const model_options defaults = {0};
  if (!opt) opt = &defaults;
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->be = opt->backend ? opt->backend : boost_backend_default();
  m->mode = mode;
  m->stage = opt->stage ? *opt->stage : (model_stage){0, cfg->n_layers, 1, 1};
  m->nl = m->stage.num_layers;
  if (!opt->comm) comm_init_self(&m->own_comm, m->be);
  m->comm = opt->comm ? opt->comm : &m->own_comm;
  m->tp = m->comm->size[COMM_TP];
  m->tp_rank = m->comm->rank[COMM_TP];
  const int d = cfg->d_model, V = cfg->vocab, t = m->tp;
  m->d_res = mode == TP_BTP ? d / t : d;
  m->d_qkv = (mode == TP_BTP || mode == TP_MEGATRON) ? d / t : d;
  m->heads_loc = m->d_qkv / (d / cfg->n_heads);
  m->ffn_loc = (mode == TP_BTP || mode == TP_MEGATRON) ? cfg->ffn / t : cfg->ffn;
  m->vocab_loc = V / t;
  m->vocab_start = m->vocab_loc * m->tp_rank;
  register_params(m);
  const size_t multiple = opt->arena_multiple ? opt->arena_multiple : 16;
  m->reg.numel = (m->reg.numel + multiple - 1) / multiple * multiple;
  if (!opt->layout_only) weights_allocate(&m->w, &m->reg, m->be);
}

void model_free(model *m) {
  weights_free(&m->w, m->be);
  registry_free(&m->reg);
  boost_free(m->layers);
  if (m->comm == &m->own_comm) comm_free(&m->own_comm);
  memset(m, 0, sizeof *m);
}

void model_init_params(model *m, uint64_t seed) {
  size_t most = 1;
  for (int i = 0; i < m->reg.count; i++)
    if (m->reg.tensors[i].numel > most) most = m->reg.tensors[i].numel;
  float *host = boost_calloc(most, sizeof *host);
  for (int i = 0; i < m->reg.count; i++) {
    tensor_init_values(&m->reg.tensors[i], seed, host);
    weights_upload(&m->w, &m->reg, m->be, i, host);
  }
  boost_free(host);
  model_refresh_work(m);
}

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

/* ---- pipeline stages ----------------------------------------------------- */

int model_plan_stages(const model_config *c, int pp, const char *spec, int T, int *per_stage, boost_status *err) {
  const int L = c->n_layers;
  if (pp > L) return boost_err(err, "parallel.pp %d exceeds model.n_layers %d: every stage needs a layer", pp, L);
  if (spec && spec[0]) {
    int n = 0, sum = 0;
    const char *p = spec;
    while (*p) {
      char *end;
      long v = strtol(p, &end, 10);
      if (end == p || v < 1 || n >= pp)
        return boost_err(err, "bad parallel.stages '%s': expected %d positive layer counts like 3,5", spec, pp);
      per_stage[n++] = (int)v;
      sum += (int)v;
      p = *end == ',' ? end + 1 : end;
      if (*end && *end != ',') return boost_err(err, "bad parallel.stages '%s': expected numbers separated by commas", spec);
    }
    if (n != pp || sum != L)
      return boost_err(err, "parallel.stages '%s' must give %d stages summing to model.n_layers %d", spec, pp, L);
    return 0;
  }
  /* Minimise the largest stage cost (FLOPs per token): exact over contiguous
   * splits by dynamic programming, O(pp * L^2) with pp <= L. */
  model_config one = *c;
  one.n_layers = 1;
  const double head = 6.0 * c->d_model * (double)c->vocab;
  const double layer = model_flops_per_token(&one, T) - head;
  const size_t cols = (size_t)L + 1;
  double *best = boost_calloc(((size_t)pp + 1) * cols, sizeof *best);
  int *cut = boost_calloc(((size_t)pp + 1) * cols, sizeof *cut);
#define BEST(s, l) best[(size_t)(s) * cols + (size_t)(l)]
#define CUT(s, l) cut[(size_t)(s) * cols + (size_t)(l)]
  /* BEST(s, l): the smallest max cost placing the first l layers on s stages */
  for (int s = 0; s <= pp; s++)
    for (int l = 0; l <= L; l++) BEST(s, l) = INFINITY;
  BEST(0, 0) = 0.0;
  for (int s = 1; s <= pp; s++)
    for (int l = s; l <= L - (pp - s); l++)
      for (int k = s - 1; k < l; k++) {
        double cost = (l - k) * layer + (s == pp ? head : 0.0);
        double v = fmax(BEST(s - 1, k), cost);
        if (v < BEST(s, l)) BEST(s, l) = v, CUT(s, l) = k;
      }
  for (int s = pp, l = L; s >= 1; s--) {
    per_stage[s - 1] = l - CUT(s, l);
    l = CUT(s, l);
  }
#undef BEST
#undef CUT
  boost_free(best);
  boost_free(cut);
  return 0;
}
