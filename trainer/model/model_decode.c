/* The KV cache and the decode step (model_decode.h). */
#include "model_decode.h"

#include <string.h>

#include "check.h"
#include "model_internal.h"
#include "util.h"

int model_kv_cache_init(model_kv_cache *kv, const model *m, int B, int max_T, boost_status *err) {
  memset(kv, 0, sizeof *kv);
  if (m->tp != 1 || !m->stage.has_embed || !m->stage.has_head || m->nl != m->cfg.n_layers)
    return boost_err(err, "decoding needs the whole model on one process (tp = 1, pp = 1), not tp=%d with "
                                  "layers %d..%d of %d", m->tp, m->stage.first_layer,
                     m->stage.first_layer + m->nl - 1, m->cfg.n_layers);
  if (max_T < 1 || max_T > m->cfg.seq_len)
    return boost_err(err, "%d positions do not fit the model's context of %d (model.seq_len)", max_T,
                     m->cfg.seq_len);
  if (B < 1) return boost_err(err, "decoding needs at least one sequence, not %d", B);
  boost_backend *be = m->be;
  const int hd = m->cfg.d_model / m->cfg.n_heads;
  const size_t cache = boost_act_bytes(be, (size_t)m->nl * B * max_T * m->d_qkv);
  const size_t cache_al = (cache + 63) / 64 * 64, rope = (size_t)max_T * (hd / 2) * sizeof(float);
  const size_t rope_al = (rope + 63) / 64 * 64, logits = (size_t)B * m->cfg.vocab * sizeof(float);
  kv->B = B;
  kv->max_T = max_T;
  char *a = boost_be_alloc(be, 2 * cache_al + 2 * rope_al + logits, "the KV cache");
  kv->arena = a;
  kv->k_cache = (boost_act *)a;
  kv->v_cache = (boost_act *)(a + cache_al);
  kv->rope_cos = (float *)(a + 2 * cache_al);
  kv->rope_sin = (float *)(a + 2 * cache_al + rope_al);
  kv->logits = (float *)(a + 2 * cache_al + 2 * rope_al);
  be->ops->rope_tables(be, kv->rope_cos, kv->rope_sin, max_T, hd, m->cfg.rope_theta);
  kv->m = m;
  model_alloc_acts(m, &kv->acts, B, 1, 1, RECOMPUTE_NONE);
  return 0;
}

void model_kv_cache_free(model_kv_cache *kv) {
  if (!kv->arena) return;
  boost_backend *be = kv->m->be;
  model_acts_free(kv->m, &kv->acts);
  model_acts_free(kv->m, &kv->full);
  be->mem->free(be, kv->arena);
  memset(kv, 0, sizeof *kv);
}

/* The float logits of the set's rows [row0, row0 + n) into host memory. */
static void read_logits(const model *m, const model_acts *r, float *dev, size_t row0, size_t n, float *host) {
  const size_t V = (size_t)m->cfg.vocab;
  m->be->ops->to_f32(m->be, dev, boost_act_at(m->be, r->cur->logits, row0 * V), n * V);
  m->be->mem->download(m->be, host, dev, n * V * sizeof(float));
}

void model_decode_step(model_kv_cache *kv, const int32_t *tokens, float *logits) {
  BOOST_ASSERT(kv->pos < kv->max_T);
  const model *m = kv->m;
  model_set_batch(m, &kv->acts, tokens, NULL);
  const model_decode_at at = {kv->k_cache, kv->v_cache, kv->rope_cos, kv->rope_sin, kv->pos, kv->max_T};
  model_forward_decode(m, &kv->acts, &at);
  read_logits(m, &kv->acts, kv->logits, 0, (size_t)kv->B, logits);
  kv->pos++;
}

void model_prefill(model_kv_cache *kv, const int32_t *tokens, int T) {
  BOOST_ASSERT(kv->pos == 0 && T >= 1 && T <= kv->max_T);
  const model *m = kv->m;
  model_acts *r = &kv->full;
  boost_backend *be = m->be;
  model_alloc_acts(m, r, kv->B, T, 1, RECOMPUTE_NONE);
  model_set_batch(m, r, tokens, NULL);
  model_forward_layers(m, r);
  const size_t row = (size_t)T * m->d_qkv, layer = (size_t)kv->B * kv->max_T * m->d_qkv;
  for (int l = 0; l < m->nl; l++)
    for (int b = 0; b < kv->B; b++) { /* sequence b's rows 0..T-1 of the layer's caches */
      const size_t at = l * layer + (size_t)b * kv->max_T * m->d_qkv;
      const layer_acts *a = &r->cur->acts[l];
      be->mem->copy(be, AT(m, kv->k_cache, at), AT(m, a->k, b * row), boost_act_bytes(be, row));
      be->mem->copy(be, AT(m, kv->v_cache, at), AT(m, a->v, b * row), boost_act_bytes(be, row));
    }
  model_free_acts(m, r);
  kv->pos = T;
}

void model_full_logits(model_kv_cache *kv, const int32_t *tokens, int T, float *logits) {
  BOOST_ASSERT(T >= 1 && T <= kv->max_T);
  const model *m = kv->m;
  model_alloc_acts(m, &kv->full, 1, T, 1, RECOMPUTE_NONE);
  model_forward(m, &kv->full, tokens, NULL, 1, T);
  read_logits(m, &kv->full, kv->logits, (size_t)T - 1, 1, logits);
}
