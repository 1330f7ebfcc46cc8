#include "model.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "optim.h"


/* ---- GEMM shorthands (row-major, explicit leading dimensions) ------------ */

/* C[M,N] = A[M,K] . B[N,K]^T + beta C */
static void gemm_nt(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
/* C[M,N] = A[M,K] . B[K,N] + beta C */
static void gemm_nn(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
/* C[M,N] = A[K,M]^T . B[K,N] + beta C */
static void gemm_tn(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K, float beta) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

static void axpy_inplace(float *y, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---- layout -------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

int model_check_layout(const model_config *c, tp_mode requested, int tp, tp_mode *mode, char *err, size_t errlen) {
  const unsigned all = (1u << PROJ_COUNT) - 1;
  const int all_low = c->lowrank_mask == all, none_low = c->lowrank_mask == 0;
  switch (requested) {
  case TP_AUTO:
  case TP_NONE:
    if (tp == 1) *mode = TP_NONE;
    else if (all_low) *mode = TP_BTP;
    else if (none_low) *mode = TP_MEGATRON;
    else
      return fail(err, errlen, "model.lowrank=%s mixes low-rank and full-rank projections: tensor parallelism needs all or none",
                  c->lowrank);
    break;
  case TP_BTP:
  case TP_VANILLA:
    if (!all_low)
      return fail(err, errlen, "parallel.tp_mode=%s needs every projection low-rank (model.lowrank=all), not '%s'",
                  tp_mode_names[requested], c->lowrank);
    *mode = requested;
    break;
  case TP_MEGATRON:
    if (!none_low)
      return fail(err, errlen, "parallel.tp_mode=megatron needs a full-rank model (model.lowrank=none), not '%s'", c->lowrank);
    *mode = TP_MEGATRON;
    break;
  default: return fail(err, errlen, "bad parallel.tp_mode %d", (int)requested);
  }
  if (tp == 1) return 0;
  if (c->n_heads % tp) return fail(err, errlen, "model.n_heads %d is not divisible by parallel.tp %d", c->n_heads, tp);
  if (c->d_model % tp) return fail(err, errlen, "model.d_model %d is not divisible by parallel.tp %d", c->d_model, tp);
  if (c->ffn % tp) return fail(err, errlen, "model.ffn %d is not divisible by parallel.tp %d", c->ffn, tp);
  if (c->vocab % tp) return fail(err, errlen, "model.vocab %d is not divisible by parallel.tp %d", c->vocab, tp);
  if (*mode == TP_VANILLA && (c->rank_attn % tp || c->rank_mlp % tp))
    return fail(err, errlen, "model.rank_attn %d / rank_mlp %d are not divisible by parallel.tp %d (vanilla shards r)",
                c->rank_attn, c->rank_mlp, tp);
  if (c->tie_embeddings) return fail(err, errlen, "model.tie_embeddings is not supported with parallel.tp > 1");
  return 0;
}

/* ---- parameters ---------------------------------------------------------- */

static int add_param(model *m, const char *name, int ndim, const int64_t *shape, int split_dim, unsigned flags,
                     double init_std) {
  int idx = registry_add(&m->reg, name, ndim, shape, m->tp > 1 ? split_dim : -1, flags);
  m->reg.tensors[idx].init_std = (float)init_std;
  return idx;
}

static const char *group_name(const proj_group *g) {
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
    snprintf(name, sizeof name, "%s.%s.A", prefix, group_name(g));
    g->A = add_param(m, name, nd, shape, g->style == STYLE_BTP ? o + 1 : o, TENSOR_DECAY, std);
    shape[o] = g->out, shape[o + 1] = g->r;
    snprintf(name, sizeof name, "%s.%s.B", prefix, group_name(g));
    g->B = add_param(m, name, nd, shape, g->style == STYLE_BTP ? o : o + 1, TENSOR_DECAY, std);
  } else {
    shape[o] = g->out, shape[o + 1] = g->in;
    snprintf(name, sizeof name, "%s.%s.W", prefix, group_name(g));
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

void model_init(model *m, const model_config *cfg, tp_mode mode, comm_ctx *comm, int with_optimizer,
                const model_stage *stage) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->mode = mode;
  m->stage = stage ? *stage : (model_stage){0, cfg->n_layers, 1, 1};
  m->nl = m->stage.num_layers;
  if (!comm) {
    comm_init_self(&m->self_comm);
    comm = &m->self_comm;
  }
  m->comm = comm;
  m->tp = comm->size[COMM_TP];
  m->tp_rank = comm->rank[COMM_TP];
  const int d = cfg->d_model, V = cfg->vocab, L = m->nl, l0 = m->stage.first_layer, t = m->tp;
  m->d_res = mode == TP_BTP ? d / t : d;
  m->d_qkv = (mode == TP_BTP || mode == TP_MEGATRON) ? d / t : d;
  m->heads_loc = m->d_qkv / (d / cfg->n_heads);
  m->ffn_loc = (mode == TP_BTP || mode == TP_MEGATRON) ? cfg->ffn / t : cfg->ffn;
  m->vocab_loc = V / t;
  m->vocab_start = m->vocab_loc * m->tp_rank;
  const int btp = mode == TP_BTP;

  registry_init(&m->reg, m->tp_rank, t);
  int64_t shape[2] = {V, d};
  m->wte = m->lm_head = m->final_norm = -1;
  if (m->stage.has_embed) m->wte = add_param(m, "embed.weight", 2, shape, btp ? 1 : -1, 0, cfg->init_std);
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
    m->final_norm = add_param(m, "final_norm", 1, dshape, -1, TENSOR_INIT_ONES, 0);
    m->lm_head = cfg->tie_embeddings ? m->wte : add_param(m, "lm_head.weight", 2, shape, 0, TENSOR_DECAY, cfg->init_std);
  }
  /* Arenas split evenly over dp ranks (ZeRO-1 chunks): pad to a multiple. */
  const size_t multiple = (size_t)comm->size[COMM_DP] * 16;
  m->reg.numel = (m->reg.numel + multiple - 1) / multiple * multiple;
  unsigned mask = (1u << TENSOR_PARAMS) | (1u << TENSOR_GRADS);
  if (with_optimizer) mask |= (1u << TENSOR_ADAM_M) | (1u << TENSOR_ADAM_V);
  registry_allocate(&m->reg, mask);
}

void model_init_params(model *m, uint64_t seed) { registry_init_params(&m->reg, seed); }

static void free_sets(model *m) {
  for (int k = 0; k < m->nsets; k++) {
    boost_free(m->sets[k].resid);
    boost_free(m->sets[k].acts);
  }
  boost_free(m->sets);
  m->sets = NULL;
  m->nsets = 0;
}

void model_free(model *m) {
  registry_free(&m->reg);
  boost_free(m->layers);
  boost_free(m->act_arena);
  free_sets(m);
  memset(m, 0, sizeof *m);
}

/* ---- activations --------------------------------------------------------- */

typedef struct {
  float *base;
  size_t used;
} carver;

static float *carve(carver *c, size_t n) {
  float *p = c->base ? c->base + c->used : NULL;
  c->used += (n + 15) / 16 * 16;
  return p;
}

static size_t group_width(const proj_group *g) { return (size_t)g->nproj * g->r_loc; }

/* What recompute may rebuild: one copy shared by all layers and sets when
 * recomputing, else one per layer. */
static void carve_recomputable(model *m, carver *c, layer_acts *a) {
  const model_config *cfg = &m->cfg;
  const size_t N = (size_t)m->B * m->T, T = m->T;
  const size_t dr = m->d_res, da = m->d_qkv, F = m->ffn_loc, att = (size_t)m->B * m->heads_loc * T * T;
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
  const size_t dr = m->d_res, da = m->d_qkv, F = m->ffn_loc, att = (size_t)m->B * m->heads_loc * T * T;
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
  m->d_resid[0] = carve(c, N * dr);
  m->d_resid[1] = carve(c, N * dr);
  m->d_xn = carve(c, N * big);
  m->d_xfull = carve(c, N * d);
  m->d_tmp = carve(c, N * big);
  m->d_attn = carve(c, N * da);
  m->d_q = carve(c, N * da);
  m->d_k = carve(c, N * da);
  m->d_v = carve(c, N * da);
  m->d_att = carve(c, att);
  m->d_prod = carve(c, N * F);
  m->d_gate = carve(c, N * F);
  m->d_up = carve(c, N * F);
  m->d_h = carve(c, N * max_g);
  m->d_ss = carve(c, 2 * N);
  m->proj_out = carve(c, N * d);
}

void model_use_acts(model *m, int set) {
  BOOST_ASSERT(set >= 0 && set < m->nsets);
  act_set *s = &m->sets[set];
  m->cur_set = set;
  m->resid = s->resid;
  m->acts = s->acts;
  m->rstd_f = s->rstd_f;
  m->x_full = s->x_full;
  m->xn_f = s->xn_f;
  m->logits = s->logits;
  m->losses = s->losses;
  m->ce_max = s->ce_max;
  m->ce_sum = s->ce_sum;
}

void model_alloc_acts(model *m, int B, int T, int nsets, recompute_mode recompute) {
  if (m->act_arena && m->B == B && m->T == T && m->nsets == nsets && m->recompute == recompute) return;
  if (T > m->cfg.seq_len) boost_fail("sequence length %d exceeds model.seq_len %d", T, m->cfg.seq_len);
  BOOST_ASSERT(nsets >= 1);
  boost_free(m->act_arena);
  free_sets(m);
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
  rope_tables(m->rope_cos, m->rope_sin, T, m->cfg.d_model / m->cfg.n_heads, m->cfg.rope_theta);
}

/* ---- projection groups --------------------------------------------------- */

static inline float *P(const model *m, int idx) { return registry_data(&m->reg, TENSOR_PARAMS, idx); }
static inline float *G(const model *m, int idx) { return registry_data(&m->reg, TENSOR_GRADS, idx); }

static void allreduce(model *m, float *buf, size_t n) {
  if (m->tp > 1) comm_allreduce_sum(m->comm, COMM_TP, buf, n);
}

/* Forward of a group on input X [N, in_loc] into outs[j] [N, out_loc] (or
 * the full width for styles that reduce). With rstd non-NULL (btp), X is the
 * gain-scaled unnormalised input and hpre's tail holds each token's local sum
 * of squares: it travels in the bottleneck's all-reduce and the group
 * normalises by the global RMS (online RMSNorm). */
static void group_forward(model *m, const proj_group *g, const float *X, float *const *outs, float *hpre, float *h,
                          float *rstd, int N) {
  if (!g->lowrank) {
    const float *W = P(m, g->A);
    for (int j = 0; j < g->nproj; j++) {
      gemm_nt(outs[j], g->out_loc, X, g->in_loc, W + (size_t)j * g->out_loc * g->in_loc, g->in_loc, N, g->out_loc, g->in_loc, 0.0f);
      if (g->style == STYLE_ROW) comm_reduce_forward(m->comm, COMM_TP, outs[j], (size_t)N * g->out);
    }
    return;
  }
  const int w = (int)group_width(g);
  if (m->reuse_bottleneck) goto up_projection;
  gemm_nt(hpre, w, X, g->in_loc, P(m, g->A), g->in_loc, N, w, g->in_loc, 0.0f);
  if (g->style == STYLE_BTP) allreduce(m, hpre, (size_t)N * w + (rstd ? (size_t)N : 0));
  if (rstd) {
    const float *ss = hpre + (size_t)N * w, inv_d = 1.0f / (float)m->cfg.d_model, eps = m->cfg.norm_eps;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
      const float r = 1.0f / sqrtf(ss[n] * inv_d + eps);
      rstd[n] = r;
      for (int c = 0; c < w; c++) hpre[(size_t)n * w + c] *= r;
    }
  }
  silu_forward(h, hpre, (size_t)N * w);
up_projection:;
  const float *B = P(m, g->B);
  for (int j = 0; j < g->nproj; j++) {
    gemm_nt(outs[j], g->out_loc, h + (size_t)j * g->r_loc, w, B + (size_t)j * g->out_loc * g->r_loc, g->r_loc, N,
            g->out_loc, g->r_loc, 0.0f);
    if (g->style == STYLE_FACTOR) comm_reduce_forward(m->comm, COMM_TP, outs[j], (size_t)N * g->out);
  }
}

/* Backward of a group: douts[j] as in forward, dX [N, in_loc] assigned. With
 * rstd non-NULL, dss [N] receives d loss / d (sum of squares) of the fused
 * norm, and dX is with respect to the gain-scaled input. */
static void group_backward(model *m, const proj_group *g, float *const *douts, const float *X, const float *hpre,
                           const float *h, const float *rstd, float *dss, float *dX, int N) {
  if (!g->lowrank) {
    const float *W = P(m, g->A);
    float *dW = G(m, g->A);
    for (int j = 0; j < g->nproj; j++) {
      const size_t off = (size_t)j * g->out_loc * g->in_loc;
      gemm_tn(dW + off, g->in_loc, douts[j], g->out_loc, X, g->in_loc, g->out_loc, g->in_loc, N, 1.0f);
      gemm_nn(dX, g->in_loc, douts[j], g->out_loc, W + off, g->in_loc, N, g->in_loc, g->out_loc, j ? 1.0f : 0.0f);
    }
    if (g->style == STYLE_COLUMN) comm_copy_backward(m->comm, COMM_TP, dX, (size_t)N * g->in);
    return;
  }
  const int w = (int)group_width(g);
  float *dH = m->d_h;
  const float *B = P(m, g->B);
  float *dB = G(m, g->B);
  for (int j = 0; j < g->nproj; j++) {
    const size_t off = (size_t)j * g->out_loc * g->r_loc;
    gemm_tn(dB + off, g->r_loc, douts[j], g->out_loc, h + (size_t)j * g->r_loc, w, g->out_loc, g->r_loc, N, 1.0f);
    gemm_nn(dH + (size_t)j * g->r_loc, w, douts[j], g->out_loc, B + off, g->r_loc, N, g->r_loc, g->out_loc, 0.0f);
  }
  if (g->style == STYLE_BTP) allreduce(m, dH, (size_t)N * w);
  silu_backward(dH, dH, hpre, (size_t)N * w);
  if (rstd) {
    const float inv_d = 1.0f / (float)m->cfg.d_model;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
      /* hpre = Hraw * rstd: d rstd = sum dH * Hraw; dHraw = dH * rstd */
      const float r = rstd[n];
      float drstd = 0.0f;
      for (int c = 0; c < w; c++) {
        drstd += dH[(size_t)n * w + c] * hpre[(size_t)n * w + c];
        dH[(size_t)n * w + c] *= r;
      }
      drstd /= r;
      dss[n] = -0.5f * drstd * r * r * r * inv_d;
    }
  }
  gemm_tn(G(m, g->A), g->in_loc, dH, w, X, g->in_loc, w, g->in_loc, N, 1.0f);
  gemm_nn(dX, g->in_loc, dH, w, P(m, g->A), g->in_loc, N, g->in_loc, w, 0.0f);
  if (g->style == STYLE_FACTOR) comm_copy_backward(m->comm, COMM_TP, dX, (size_t)N * g->in);
}

/* Where a projection's output (forward) and its gradient (backward) live. */
static float *proj_buffer(model *m, layer_acts *a, proj_kind k, int grad) {
  switch (k) {
  case PROJ_Q: return grad ? m->d_q : a->q;
  case PROJ_K: return grad ? m->d_k : a->k;
  case PROJ_V: return grad ? m->d_v : a->v;
  case PROJ_GATE: return grad ? m->d_gate : a->gate;
  case PROJ_UP: return grad ? m->d_up : a->up;
  default: return NULL; /* o and down: the caller's buffer */
  }
}

/* Forward of every group of a slot. norm_x/gain: the btp fused norm. */
static void slot_forward(model *m, int l, int slot, const float *X, float *out_override, float *rstd) {
  layer_param *lp = &m->layers[l];
  layer_acts *a = &m->acts[l];
  const int N = m->B * m->T;
  for (int gi = lp->first_group[slot]; gi < lp->first_group[slot + 1]; gi++) {
    const proj_group *g = &lp->groups[gi];
    float *outs[3];
    for (int j = 0; j < g->nproj; j++) outs[j] = out_override ? out_override : proj_buffer(m, a, g->kinds[j], 0);
    group_forward(m, g, X, outs, a->hpre[gi], a->h[gi], rstd, N);
  }
}

static void slot_backward(model *m, int l, int slot, const float *X, float *dout_override, const float *rstd,
                          float *dss, float *dX) {
  layer_param *lp = &m->layers[l];
  layer_acts *a = &m->acts[l];
  const int N = m->B * m->T;
  for (int gi = lp->first_group[slot]; gi < lp->first_group[slot + 1]; gi++) {
    const proj_group *g = &lp->groups[gi];
    float *douts[3];
    for (int j = 0; j < g->nproj; j++) douts[j] = dout_override ? dout_override : proj_buffer(m, a, g->kinds[j], 1);
    const int first = gi == lp->first_group[slot];
    float *target = first ? dX : m->d_tmp;
    group_backward(m, g, douts, X, a->hpre[gi], a->h[gi], rstd, dss, target, N);
    if (!first) axpy_inplace(dX, m->d_tmp, (size_t)N * g->in_loc);
  }
}

/* ---- norms around the groups --------------------------------------------- */

/* btp: xg = x * gain (the group's GEMM input) and the local sum of squares
 * into the tail of the slot's (single) group's hpre. Otherwise a plain
 * RMSNorm of the replicated stream. */
static void norm_forward(model *m, int l, int slot, const float *x, int gain_idx, float *xn, float *rstd) {
  const int N = m->B * m->T, C = m->d_res;
  const float *gain = P(m, gain_idx);
  if (m->mode != TP_BTP) {
    rmsnorm_forward(xn, rstd, x, gain, N, C, m->cfg.norm_eps);
    return;
  }
  const layer_param *lp = &m->layers[l];
  const int gi = lp->first_group[slot];
  float *ss = m->acts[l].hpre[gi] + (size_t)N * group_width(&lp->groups[gi]);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float s = 0.0f;
    for (int c = 0; c < C; c++) {
      const float v = x[(size_t)n * C + c];
      s += v * v;
      xn[(size_t)n * C + c] = v * gain[c];
    }
    ss[n] = s;
  }
}

/* dx = gradient w.r.t. x of the norm given dxn (w.r.t. its output), added to
 * dx_acc; gain gradient accumulated. */
static void norm_backward(model *m, const float *x, int gain_idx, const float *rstd, const float *dxn, const float *dss,
                          float *dx_acc) {
  const int N = m->B * m->T, C = m->d_res;
  const float *gain = P(m, gain_idx);
  float *dgain = G(m, gain_idx);
  if (m->mode != TP_BTP) {
    rmsnorm_backward(m->d_tmp, dgain, dxn, x, gain, rstd, N, C);
    axpy_inplace(dx_acc, m->d_tmp, (size_t)N * C);
    return;
  }
  /* xg = x * gain, ss = sum x^2: dx = dxg * gain + 2 x dss; dgain += sum_n dxg * x */
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; c++) {
    float s = 0.0f;
    for (int n = 0; n < N; n++) s += dxn[(size_t)n * C + c] * x[(size_t)n * C + c];
    dgain[c] += s;
  }
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      dx_acc[(size_t)n * C + c] += dxn[(size_t)n * C + c] * gain[c] + 2.0f * x[(size_t)n * C + c] * dss[n];
}

/* ---- layers -------------------------------------------------------------- */

static void layer_forward(model *m, int l, const float *x, float *x_out) {
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &m->acts[l];
  const int B = m->B, T = m->T, N = B * T, hd = cfg->d_model / cfg->n_heads, H = m->heads_loc;
  const size_t NF = (size_t)N * m->ffn_loc, Nd = (size_t)N * m->d_res;
  const int btp = m->mode == TP_BTP;

  norm_forward(m, l, SLOT_ATTN_IN, x, lp->attn_norm, a->xn1, a->rstd1);
  slot_forward(m, l, SLOT_ATTN_IN, a->xn1, NULL, btp ? a->rstd1 : NULL);
  rope_forward(a->q, a->q, m->rope_cos, m->rope_sin, B, T, H, hd);
  rope_forward(a->k, a->k, m->rope_cos, m->rope_sin, B, T, H, hd);
  attention_forward(a->attn_out, a->att, a->q, a->k, a->v, B, T, H, hd);
  slot_forward(m, l, SLOT_ATTN_OUT, a->attn_out, m->proj_out, NULL);
  add_forward(a->resid_mid, x, m->proj_out, Nd);

  norm_forward(m, l, SLOT_MLP_IN, a->resid_mid, lp->mlp_norm, a->xn2, a->rstd2);
  slot_forward(m, l, SLOT_MLP_IN, a->xn2, NULL, btp ? a->rstd2 : NULL);
  if (!model_is_lowrank(cfg, PROJ_GATE)) silu_forward(a->gate_act, a->gate, NF);
  mul_forward(a->prod, a->gate_act, a->up, NF);
  slot_forward(m, l, SLOT_MLP_OUT, a->prod, m->proj_out, NULL);
  add_forward(x_out, a->resid_mid, m->proj_out, Nd);
}

/* dx: gradient w.r.t. the layer output; the gradient w.r.t. its input goes
 * to dx_in (dx is updated in place on the way). */
static void layer_backward(model *m, int l, const float *x, float *dx, float *dx_in) {
  const model_config *cfg = &m->cfg;
  const layer_param *lp = &m->layers[l];
  layer_acts *a = &m->acts[l];
  const int B = m->B, T = m->T, N = B * T, hd = cfg->d_model / cfg->n_heads, H = m->heads_loc;
  const size_t NF = (size_t)N * m->ffn_loc, Nd = (size_t)N * m->d_res;
  const int btp = m->mode == TP_BTP;
  float *dss_mlp = m->d_ss, *dss_attn = m->d_ss + N;
  if (m->recompute != RECOMPUTE_NONE) {
    /* Rebuild what was dropped from the layer input (and, for lowrank, the
     * saved bottleneck: no A GEMM, no all-reduce). The output goes to a
     * scratch buffer: the saved next-layer input stays as it is. */
    m->reuse_bottleneck = m->recompute == RECOMPUTE_LOWRANK;
    layer_forward(m, l, x, m->d_xn);
    m->reuse_bottleneck = 0;
  }

  slot_backward(m, l, SLOT_MLP_OUT, a->prod, dx, NULL, NULL, m->d_prod);
  mul_backward(m->d_gate, m->d_up, m->d_prod, a->gate_act, a->up, NF);
  if (!model_is_lowrank(cfg, PROJ_GATE)) silu_backward(m->d_gate, m->d_gate, a->gate, NF);
  slot_backward(m, l, SLOT_MLP_IN, a->xn2, NULL, btp ? a->rstd2 : NULL, dss_mlp, m->d_xn);
  norm_backward(m, a->resid_mid, lp->mlp_norm, a->rstd2, m->d_xn, dss_mlp, dx);

  slot_backward(m, l, SLOT_ATTN_OUT, a->attn_out, dx, NULL, NULL, m->d_attn);
  attention_backward(m->d_q, m->d_k, m->d_v, m->d_att, m->d_attn, a->q, a->k, a->v, a->att, B, T, H, hd);
  rope_backward(m->d_q, m->d_q, m->rope_cos, m->rope_sin, B, T, H, hd);
  rope_backward(m->d_k, m->d_k, m->rope_cos, m->rope_sin, B, T, H, hd);
  slot_backward(m, l, SLOT_ATTN_IN, a->xn1, NULL, btp ? a->rstd1 : NULL, dss_attn, m->d_xn);
  memcpy(dx_in, dx, Nd * sizeof(float));
  norm_backward(m, x, lp->attn_norm, a->rstd1, m->d_xn, dss_attn, dx_in);
}

/* ---- head: final norm, vocab-parallel LM head, cross-entropy ------------- */

static void validate_tokens(const model *m, const int32_t *tok, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (tok[i] < 0 || tok[i] >= m->cfg.vocab)
      boost_fail("%s token %d at position %zu is outside the vocabulary [0, %d)", what, tok[i], i, m->cfg.vocab);
}

/* Cross-entropy over vocab shards: max, sum of exponentials and the target
 * logit each reduced over tp (3 scalars per token); logits never gathered. */
static void parallel_crossentropy_forward(model *m, const int32_t *targets, int N) {
  const int Vl = m->vocab_loc, v0 = m->vocab_start;
  const float *logits = m->logits;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float mx = -INFINITY;
    for (int v = 0; v < Vl; v++) mx = fmaxf(mx, logits[(size_t)n * Vl + v]);
    m->ce_max[n] = mx;
  }
  comm_allreduce_max(m->comm, COMM_TP, m->ce_max, (size_t)N);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *row = logits + (size_t)n * Vl;
    double s = 0.0;
    for (int v = 0; v < Vl; v++) s += expf(row[v] - m->ce_max[n]);
    const int t = targets[n] - v0;
    m->ce_sum[n] = (float)s;
    m->ce_sum[N + n] = (t >= 0 && t < Vl) ? row[t] : 0.0f;
  }
  comm_allreduce_sum(m->comm, COMM_TP, m->ce_sum, 2 * (size_t)N);
  for (int n = 0; n < N; n++) m->losses[n] = logf(m->ce_sum[n]) + m->ce_max[n] - m->ce_sum[N + n];
}

static void parallel_crossentropy_backward(model *m, const int32_t *targets, int N, float scale) {
  const int Vl = m->vocab_loc, v0 = m->vocab_start;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float *row = m->logits + (size_t)n * Vl;
    const float inv = 1.0f / m->ce_sum[n], mx = m->ce_max[n];
    for (int v = 0; v < Vl; v++) row[v] = expf(row[v] - mx) * inv * scale;
    const int t = targets[n] - v0;
    if (t >= 0 && t < Vl) row[t] -= scale;
  }
}

static int gathers_head_input(const model *m) { return m->mode == TP_BTP && m->tp > 1; }

float model_forward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T) {
  if (!m->act_arena) model_alloc_acts(m, B, T, 1, RECOMPUTE_NONE);
  BOOST_ASSERT(m->B == B && m->T == T);
  const model_config *cfg = &m->cfg;
  const int N = B * T, d = cfg->d_model, L = m->nl;
  if (m->stage.has_embed) {
    validate_tokens(m, tokens, (size_t)N, "input");
    embedding_forward(m->resid[0], tokens, P(m, m->wte), N, cfg->vocab, m->d_res);
  }
  for (int l = 0; l < L; l++) layer_forward(m, l, m->resid[l], m->resid[l + 1]);
  if (!m->stage.has_head) return 0.0f;
  const float *x = m->resid[L];
  if (gathers_head_input(m)) {
    comm_allgather_cols(m->comm, COMM_TP, m->resid[L], m->x_full, (size_t)N, (size_t)m->d_res);
    x = m->x_full;
  }
  rmsnorm_forward(m->xn_f, m->rstd_f, x, P(m, m->final_norm), N, d, cfg->norm_eps);
  linear_forward(m->logits, m->xn_f, P(m, m->lm_head), N, d, m->vocab_loc);
  if (!targets) return 0.0f;
  validate_tokens(m, targets, (size_t)N, "target");
  if (m->tp == 1)
    crossentropy_forward(m->losses, m->logits, targets, N, cfg->vocab);
  else
    parallel_crossentropy_forward(m, targets, N);
  double sum = 0.0;
  for (int i = 0; i < N; i++) sum += m->losses[i];
  return (float)(sum / N);
}

void model_backward(model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float scale) {
  BOOST_ASSERT(m->B == B && m->T == T);
  const model_config *cfg = &m->cfg;
  const int N = B * T, d = cfg->d_model, L = m->nl;
  float *dx = m->d_resid[0], *dx_in = m->d_resid[1];
  if (m->stage.has_head) {
    if (m->tp == 1)
      crossentropy_backward(m->logits, NULL, m->logits, targets, N, cfg->vocab, scale);
    else
      parallel_crossentropy_backward(m, targets, N, scale);
    linear_backward(m->d_xn, G(m, m->lm_head), m->logits, m->xn_f, P(m, m->lm_head), N, d, m->vocab_loc);
    if (m->tp > 1) comm_allreduce_sum(m->comm, COMM_TP, m->d_xn, (size_t)N * d);
    if (gathers_head_input(m)) {
      rmsnorm_backward(m->d_xfull, G(m, m->final_norm), m->d_xn, m->x_full, P(m, m->final_norm), m->rstd_f, N, d);
      comm_scatter_cols(m->comm, COMM_TP, m->d_xfull, dx, (size_t)N, (size_t)m->d_res);
    } else {
      rmsnorm_backward(dx, G(m, m->final_norm), m->d_xn, m->resid[L], P(m, m->final_norm), m->rstd_f, N, d);
    }
  }
  for (int l = L - 1; l >= 0; l--) {
    layer_backward(m, l, m->resid[l], dx, dx_in);
    float *t = dx;
    dx = dx_in;
    dx_in = t;
  }
  m->d_in = dx;
  if (m->stage.has_embed) embedding_backward(G(m, m->wte), dx, tokens, N, cfg->vocab, m->d_res);
}

void model_zero_grads(model *m) { memset(m->reg.arena[TENSOR_GRADS], 0, m->reg.numel * sizeof(float)); }

double model_grad_sumsq(const model *m) { return grad_sumsq_range(m, 0, m->reg.numel); }

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

int model_plan_stages(const model_config *c, int pp, const char *spec, int T, int *per_stage, char *err, size_t errlen) {
  const int L = c->n_layers;
  if (pp > L) return fail(err, errlen, "parallel.pp %d exceeds model.n_layers %d: every stage needs a layer", pp, L);
  if (spec && spec[0]) {
    int n = 0, sum = 0;
    const char *p = spec;
    while (*p) {
      char *end;
      long v = strtol(p, &end, 10);
      if (end == p || v < 1 || n >= pp)
        return fail(err, errlen, "bad parallel.stages '%s': expected %d positive layer counts like 3,5", spec, pp);
      per_stage[n++] = (int)v;
      sum += (int)v;
      p = *end == ',' ? end + 1 : end;
      if (*end && *end != ',') return fail(err, errlen, "bad parallel.stages '%s': expected numbers separated by commas", spec);
    }
    if (n != pp || sum != L)
      return fail(err, errlen, "parallel.stages '%s' must give %d stages summing to model.n_layers %d", spec, pp, L);
    return 0;
  }
  /* Minimise the largest stage cost (FLOPs per token): exact over contiguous
   * splits, small enough to enumerate with dynamic programming. */
  model_config one = *c;
  one.n_layers = 1;
  const double head = 6.0 * c->d_model * (double)c->vocab;
  const double layer = model_flops_per_token(&one, T) - head;
  double best[65][257];
  int cut[65][257];
  if (pp > 64 || L > 256) {
    for (int s = 0; s < pp; s++) per_stage[s] = L / pp + (s < L % pp);
    return 0;
  }
  /* best[s][l]: the smallest max cost placing the first l layers on s stages */
  for (int s = 0; s <= pp; s++)
    for (int l = 0; l <= L; l++) best[s][l] = INFINITY;
  best[0][0] = 0.0;
  for (int s = 1; s <= pp; s++)
    for (int l = s; l <= L - (pp - s); l++)
      for (int k = s - 1; k < l; k++) {
        double cost = (l - k) * layer + (s == pp ? head : 0.0);
        double v = fmax(best[s - 1][k], cost);
        if (v < best[s][l]) best[s][l] = v, cut[s][l] = k;
      }
  for (int s = pp, l = L; s >= 1; s--) {
    per_stage[s - 1] = l - cut[s][l];
    l = cut[s][l];
  }
  return 0;
}
