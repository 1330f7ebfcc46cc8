/* boost-inspect verify: stored activations (docs/CHECKPOINT_FORMAT.md,
 * "Activations") present and well formed: group attributes, tokens in the
 * vocabulary, sample indices, and one bottleneck `h` per low-rank group of
 * every layer with [nseq*T, g, r] (unless recompute=full), in the dtype of
 * the run's precision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_h5.h"
#include "config.h"
#include "inspect.h"

static int64_t group_i64(const ckr_ckpt *c, const char *name) {
  int64_t v = -1;
  hid_t g = H5Gopen2(c->f, CKPT_GROUP_ACTS, H5P_DEFAULT);
  if (g >= 0) {
    if (ckpt_attr_get_i64(g, name, &v) != 0) v = -1;
    H5Gclose(g);
  }
  H5Eclear2(H5E_DEFAULT);
  return v;
}

static void check_tokens(const ckr_ckpt *c, ins_report *r, const train_config *cfg, int64_t B, int64_t T, int64_t *nseq) {
  const ckr_dset *tok = ckr_find(c, CKPT_GROUP_ACTS "/tokens"), *si = ckr_find(c, CKPT_GROUP_ACTS "/sample_index");
  *nseq = -1;
  if (!tok || tok->ndim != 2 || strcmp(tok->dtype, "int32") || (int64_t)tok->dims[1] != T || B <= 0 || tok->dims[0] % (hsize_t)B) {
    ins_report_add(r, CKPT_GROUP_ACTS "/tokens", "missing or not int32 [k*micro_batch, seq_len]");
    return;
  }
  *nseq = (int64_t)tok->dims[0];
  if (cfg->ckpt.activations == ACTS_SAMPLE && *nseq != B) ins_report_add(r, tok->path, "%lld sequences, mode sample stores micro_batch = %lld", (long long)*nseq, (long long)B);
  if (!si || si->ndim != 1 || strcmp(si->dtype, "int64") || (int64_t)si->dims[0] != *nseq)
    ins_report_add(r, CKPT_GROUP_ACTS "/sample_index", "missing or not int64 [%lld]", (long long)*nseq);
  boost_status err = {0};
  size_t n;
  double *v = ckr_read_f64(c, tok, &n, &err);
  for (size_t i = 0; v && i < n; i++)
    if (v[i] < 0 || v[i] >= cfg->model.vocab) {
      ins_report_add(r, tok->path, "token %.0f at %zu outside the vocabulary [0, %d)", v[i], i, cfg->model.vocab);
      break;
    }
  free(v);
}

void ins_check_activations(const ckr_ckpt *c, ins_report *r, const train_config *cfg, const ckr_tensor *t, int nt);
void ins_check_activations(const ckr_ckpt *c, ins_report *r, const train_config *cfg, const ckr_tensor *t, int nt) {
  char mode[64] = "";
  hid_t g = H5Gopen2(c->f, CKPT_GROUP_ACTS, H5P_DEFAULT);
  if (g < 0) {
    H5Eclear2(H5E_DEFAULT);
    ins_report_add(r, CKPT_GROUP_ACTS, "missing (attribute activations = %s)", c->meta.run.activations);
    return;
  }
  char *m = NULL;
  if (ckpt_attr_get_str(g, "mode", &m) == 0) snprintf(mode, sizeof mode, "%s", m);
  free(m);
  H5Gclose(g);
  H5Eclear2(H5E_DEFAULT);
  if (strcmp(mode, c->meta.run.activations) != 0) ins_report_add(r, CKPT_GROUP_ACTS, "attribute mode '%s' differs from the root's activations '%s'", mode, c->meta.run.activations);
  const int64_t B = group_i64(c, "micro_batch"), T = group_i64(c, "seq_len");
  if (B <= 0 || T <= 0 || T > cfg->model.seq_len) ins_report_add(r, CKPT_GROUP_ACTS, "attributes micro_batch %lld / seq_len %lld invalid", (long long)B, (long long)T);
  int64_t nseq;
  check_tokens(c, r, cfg, B, T, &nseq);
  if (nseq < 0) return;
  const int64_t N = nseq * T;
  for (int i = 0; i < c->n; i++) {
    const ckr_dset *d = &c->d[i];
    if (strcmp(d->category, "activations") || !strcmp(d->path, CKPT_GROUP_ACTS "/tokens") || !strcmp(d->path, CKPT_GROUP_ACTS "/sample_index")) continue;
    int layer = -1;
    if (sscanf(d->path, CKPT_GROUP_ACTS "/layers.%d.", &layer) != 1 || layer < 0 || layer >= cfg->model.n_layers)
      ins_report_add(r, d->path, "not an activation of a layer of this model");
    else if (d->ndim < 2 || (int64_t)d->dims[0] != N || strcmp(d->dtype, ckr_acts_dtype(c)))
      ins_report_add(r, d->path, "expected %s (precision %s) with %lld rows (sequences x seq_len), found %s", ckr_acts_dtype(c),
                     ckpt_meta_str(&c->meta, CKPT_META_F_precision), (long long)N, d->dtype);
  }
  if (cfg->parallel.recompute == RECOMPUTE_FULL) return;
  for (int i = 0; i < nt; i++) {
    size_t L = strlen(t[i].name);
    if (L < 2 || strcmp(t[i].name + L - 2, ".A") != 0) continue;
    char p[160];
    snprintf(p, sizeof p, CKPT_GROUP_ACTS "/%.*s.h", (int)(L - 2), t[i].name);
    const int64_t gsz = t[i].ndim == 3 ? t[i].shape[0] : 1, rr = t[i].shape[t[i].ndim - 2];
    const ckr_dset *d = ckr_find(c, p);
    if (!d) ins_report_add(r, p, "missing (bottleneck of a low-rank group)");
    else if ((int64_t)d->dims[d->ndim - 1] != rr || ckr_numel(d) != (double)(N * gsz * rr))
      ins_report_add(r, p, "shape does not match [%lld, %lld, %lld]", (long long)N, (long long)gsz, (long long)rr);
  }
}
