/* boost-inspect: the tensors a stored config implies. Mirrors the naming of
 * trainer/model/model.c (model_init with tp = 1: global logical shapes), which
 * docs/CHECKPOINT_FORMAT.md documents; parsing goes through the trainer's own
 * config table (config_set, config_validate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "ckpt_reader.h"

typedef struct {
  ckr_tensor *t;
  int n, cap;
} tlist;

static void push(tlist *l, const char *name, int ndim, int64_t a, int64_t b, int64_t c) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->t = boost_realloc(l->t, (size_t)l->cap, sizeof *l->t);
  }
  ckr_tensor *t = &l->t[l->n++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%.95s", name);
  t->ndim = ndim;
  int64_t s[3] = {a, b, c};
  for (int k = 0; k < ndim; k++) t->shape[k] = s[k];
}

static const char *group_name(int nproj, proj_kind k0) {
  return nproj == 3 ? "qkv" : nproj == 2 ? "gate_up" : proj_names[k0];
}

/* One slot (projections sharing an input): one group when they agree on
 * rank-ness, else one group per projection. */
static void add_slot(tlist *l, const model_config *m, const char *prefix, const proj_kind *kinds, int n) {
  int same = 1;
  for (int i = 1; i < n; i++) same &= model_is_lowrank(m, kinds[i]) == model_is_lowrank(m, kinds[0]);
  for (int i = 0; i < n; i += same ? n : 1) {
    const int g = same ? n : 1;
    const proj_kind k = kinds[i];
    const int64_t in = k == PROJ_DOWN ? m->ffn : m->d_model;
    const int64_t out = (k == PROJ_GATE || k == PROJ_UP) ? m->ffn : m->d_model;
    char name[200];
    const int nd = g > 1 ? 3 : 2;
    if (model_is_lowrank(m, k)) {
      const int64_t r = model_rank(m, k);
      snprintf(name, sizeof name, "%s.%s.A", prefix, group_name(g, k));
      if (nd == 3) push(l, name, 3, g, r, in); else push(l, name, 2, r, in, 0);
      snprintf(name, sizeof name, "%s.%s.B", prefix, group_name(g, k));
      if (nd == 3) push(l, name, 3, g, out, r); else push(l, name, 2, out, r, 0);
    } else {
      snprintf(name, sizeof name, "%s.%s.W", prefix, group_name(g, k));
      if (nd == 3) push(l, name, 3, g, out, in); else push(l, name, 2, out, in, 0);
    }
  }
}

/* The stored config, read as the trainer's resume does (config_from_json:
 * keys this version does not know, from older or newer writers, are
 * skipped), then validated. */
static int parse_config(const char *json, train_config *cfg, boost_status *err) {
  if (!json) {
    boost_err(err, "missing or unreadable");
    return -1;
  }
  config_defaults(cfg);
  boost_status e = {0};
  if (config_from_json(cfg, json, NULL, &e) != 0 || config_validate(cfg, &e) != 0) {
    boost_err(err, "%.900s", e.msg);
    return -1;
  }
  return 0;
}

int ckr_expected_tensors(const char *config_json, ckr_tensor **out, void *cfg_out, boost_status *err) {
  train_config cfg;
  *out = NULL;
  if (parse_config(config_json, &cfg, err) != 0) return -1;
  const model_config *m = &cfg.model;
  tlist l = {0};
  push(&l, "embed.weight", 2, m->vocab, m->d_model, 0);
  static const proj_kind attn_in[] = {PROJ_Q, PROJ_K, PROJ_V}, attn_out[] = {PROJ_O};
  static const proj_kind mlp_in[] = {PROJ_GATE, PROJ_UP}, mlp_out[] = {PROJ_DOWN};
  char name[96];
  for (int i = 0; i < m->n_layers; i++) {
    snprintf(name, sizeof name, "layers.%d.attn_norm", i);
    push(&l, name, 1, m->d_model, 0, 0);
    snprintf(name, sizeof name, "layers.%d.attn", i);
    add_slot(&l, m, name, attn_in, 3);
    add_slot(&l, m, name, attn_out, 1);
    snprintf(name, sizeof name, "layers.%d.mlp_norm", i);
    push(&l, name, 1, m->d_model, 0, 0);
    snprintf(name, sizeof name, "layers.%d.mlp", i);
    add_slot(&l, m, name, mlp_in, 2);
    add_slot(&l, m, name, mlp_out, 1);
  }
  push(&l, "final_norm", 1, m->d_model, 0, 0);
  if (!m->tie_embeddings) push(&l, "lm_head.weight", 2, m->vocab, m->d_model, 0);
  if (cfg_out) memcpy(cfg_out, &cfg, sizeof cfg);
  *out = l.t;
  return l.n;
}
