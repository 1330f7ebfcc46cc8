/* boost-export: the Hugging Face tensors of a model and where each comes
 * from. Names follow transformers' LLaMA (model.layers.i.self_attn.q_proj,
 * ...); a CoLA projection stores its factors as `<proj>.A` [r, in] and
 * `<proj>.B` [out, r] (modeling_cola.py). Grouped checkpoint tensors
 * (docs/MODEL.md, "Grouped tensors") are split into one tensor per
 * projection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "util.h"

static const char *const HF_PROJ[PROJ_COUNT] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                "mlp.down_proj"};

static exp_tensor *push(exp_plan *p, const char *name, const char *src, int slice, int64_t rows, int64_t cols) {
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 64;
    exp_tensor *nt = realloc(p->t, (size_t)p->cap * sizeof *nt);
    if (!nt) return NULL;
    p->t = nt;
  }
  exp_tensor *t = &p->t[p->n++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->src, sizeof t->src, "%s", src);
  t->slice = slice;
  t->ndim = cols ? 2 : 1;
  t->shape[0] = rows;
  t->shape[1] = cols;
  p->parameters += (double)rows * (double)(cols ? cols : 1);
  return t;
}

/* The checkpoint group a projection is stored in, and its index there:
 * q/k/v share `qkv` and gate/up share `gate_up` when the members agree on
 * rank-ness (model_layout.c's rule, mirrored by inspect_expect.c). */
static const char *source_group(const model_config *m, proj_kind k, int *slice) {
  const proj_kind attn[3] = {PROJ_Q, PROJ_K, PROJ_V}, mlp[2] = {PROJ_GATE, PROJ_UP};
  const proj_kind *slot = k <= PROJ_V ? attn : (k == PROJ_GATE || k == PROJ_UP) ? mlp : NULL;
  const int n = k <= PROJ_V ? 3 : 2;
  *slice = -1;
  if (!slot) return proj_names[k];
  int same = 1;
  for (int i = 1; i < n; i++) same &= model_is_lowrank(m, slot[i]) == model_is_lowrank(m, slot[0]);
  if (!same) return proj_names[k];
  *slice = (int)(k - slot[0]);
  return n == 3 ? "qkv" : "gate_up";
}

static int add_projection(exp_plan *p, int layer, proj_kind k) {
  const model_config *m = &p->m;
  const int64_t in = k == PROJ_DOWN ? m->ffn : m->d_model;
  const int64_t out = (k == PROJ_GATE || k == PROJ_UP) ? m->ffn : m->d_model;
  int slice;
  const char *group = source_group(m, k, &slice);
  const char *block = k <= PROJ_O ? "attn" : "mlp";
  char name[128], src[96];
  if (!model_is_lowrank(m, k)) {
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", layer, HF_PROJ[k]);
    snprintf(src, sizeof src, "layers.%d.%s.%s.W", layer, block, group);
    exp_tensor *t = push(p, name, src, slice, out, in);
    if (!t) return -1;
    /* Our RoPE rotates interleaved pairs, transformers' LLaMA rotates
     * halves: q and k rows are reordered so both compute the same scores
     * (CoLA's remote code applies the interleaved form itself). */
    if (p->kind == EXP_LLAMA && (k == PROJ_Q || k == PROJ_K)) t->rope_heads = m->n_heads;
    return 0;
  }
  const int64_t r = model_rank(m, k);
  snprintf(name, sizeof name, "model.layers.%d.%s.A", layer, HF_PROJ[k]);
  snprintf(src, sizeof src, "layers.%d.%s.%s.A", layer, block, group);
  if (!push(p, name, src, slice, r, in)) return -1;
  snprintf(name, sizeof name, "model.layers.%d.%s.B", layer, HF_PROJ[k]);
  snprintf(src, sizeof src, "layers.%d.%s.%s.B", layer, block, group);
  return push(p, name, src, slice, out, r) ? 0 : -1;
}

int exp_plan_build(exp_plan *p, const model_config *m, boost_status *err) {
  p->m = *m;
  p->kind = m->lowrank_mask ? EXP_COLA : EXP_LLAMA;
  if (m->n_heads <= 0 || m->d_model % m->n_heads || (m->d_model / m->n_heads) % 2)
    return boost_err(err, "model: d_model %d over %d heads has no even head dimension", m->d_model, m->n_heads);
  int ok = push(p, "model.embed_tokens.weight", "embed.weight", -1, m->vocab, m->d_model) != NULL;
  for (int l = 0; ok && l < m->n_layers; l++) {
    char name[128], src[96];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
    snprintf(src, sizeof src, "layers.%d.attn_norm", l);
    ok = push(p, name, src, -1, m->d_model, 0) != NULL;
    for (int k = 0; ok && k < PROJ_COUNT; k++) {
      if (k == PROJ_GATE) {
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        snprintf(src, sizeof src, "layers.%d.mlp_norm", l);
        ok = push(p, name, src, -1, m->d_model, 0) != NULL;
      }
      ok = ok && add_projection(p, l, (proj_kind)k) == 0;
    }
  }
  ok = ok && push(p, "model.norm.weight", "final_norm", -1, m->d_model, 0);
  if (ok && !m->tie_embeddings) ok = push(p, "lm_head.weight", "lm_head.weight", -1, m->vocab, m->d_model) != NULL;
  if (!ok) return boost_err(err, "out of memory");
  return 0;
}

/* Rows of one slice of a source dataset, and their length. */
static int source_shape_ok(const exp_tensor *t, const ckr_dset *d) {
  const int lead = t->slice >= 0;
  if (d->ndim != t->ndim + lead || (lead && (int64_t)d->dims[0] <= t->slice)) return 0;
  for (int k = 0; k < t->ndim; k++)
    if ((int64_t)d->dims[k + lead] != t->shape[k]) return 0;
  return 1;
}

int exp_plan_check(const exp_plan *p, const ckr_ckpt *c, boost_status *err) {
  for (int i = 0; i < p->n; i++) {
    char path[128];
    snprintf(path, sizeof path, "/model/%s", p->t[i].src);
    const ckr_dset *d = ckr_find(c, path);
    if (!d) return boost_err(err, "tensor %s is missing (the stored config implies it)", path);
    if (strcmp(d->dtype, "float32") && strcmp(d->dtype, "bfloat16"))
      return boost_err(err, "tensor %s: dtype %s, expected float32 or bfloat16", path, d->dtype);
    if (!source_shape_ok(&p->t[i], d)) {
      char shape[128];
      ckr_shape_str(d, shape, sizeof shape);
      return boost_err(err, "tensor %s has shape %s, not what the stored config implies", path, shape);
    }
  }
  return 0;
}

void exp_plan_layout(exp_plan *p) {
  const uint64_t esz = p->dtype == EXP_BF16 ? 2 : 4;
  uint64_t used = 0;
  p->shards = 1;
  p->total_bytes = 0;
  for (int i = 0; i < p->n; i++) {
    exp_tensor *t = &p->t[i];
    const uint64_t bytes = (uint64_t)t->shape[0] * (uint64_t)(t->ndim == 2 ? t->shape[1] : 1) * esz;
    if (used > 0 && used + bytes > p->max_shard_bytes) {
      p->shards++;
      used = 0;
    }
    t->shard = p->shards - 1;
    t->begin = used;
    t->end = used + bytes;
    used += bytes;
    p->total_bytes += bytes;
  }
}

void exp_plan_free(exp_plan *p) {
  free(p->t);
  p->t = NULL;
  p->n = p->cap = 0;
}

void exp_shard_name(const exp_plan *p, int shard, char *out, size_t outlen) {
  if (p->shards == 1)
    snprintf(out, outlen, "model.safetensors");
  else
    snprintf(out, outlen, "model-%05d-of-%05d.safetensors", shard + 1, p->shards);
}
