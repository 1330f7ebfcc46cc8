/* boost-inspect verify: the stored activations recomputed from the stored
 * weights. The model the stored config describes is built on this one
 * process (any saving layout: tensors are stored whole), its parameters are
 * read from /model, the forward pass runs on the stored tokens, and every
 * stored layer input, bottleneck h and pre-activation hpre is compared with
 * what the model computes.
 *
 * The model runs in the checkpoint's precision (root attribute `precision`:
 * an fp32 or a bf16 CPU backend), so a bf16 checkpoint's activations are
 * recomputed with bf16 working weights and activations, as they were saved.
 *
 * Tolerance: the saving run may have had another layout (tp shards the
 * bottleneck sums, online RMSNorm sums in another order), so values agree to
 * rounding, not bit for bit: max |diff| <= tol x max(1, max |stored|) per
 * dataset. fp32: tol = 1e-5, the bound tests/mpi/ckpt_activations.sh checks
 * across layouts. bf16: tol = 2^-4. A bf16 value carries 8 significant
 * bits, so one rounding that falls the other way moves an element by 2^-8
 * to 2^-7 of the largest value; tensor parallelism rounds the partial sums
 * and the bf16 all-reduce at other points (PRECISION.md), and each such
 * one-unit change moves every later value a little, so most elements differ
 * by a unit or two once the layout differs. Measured max |diff| / scale:
 * 0.029 (tiny, tp=2 btp, 4 layers), 0.025 and 0.022 (12 layers, btp and
 * vanilla), 0.019 (cola-60m, tp=2 btp); it does not grow with depth (every
 * RMSNorm rescales). Layouts that compute in the same order (tp=1, any dp or
 * pp; 1 and 2 threads) match bit for bit. Wrong weights, tokens or
 * layers differ by O(1) (a one-step-stale state of the tiny preset: 0.23).
 * Runs only on a file with no problem found so far (a well-formed
 * checkpoint whose weights decoded), so a malformed file never makes it
 * allocate a model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_h5.h"
#include "ckpt_model.h"
#include "config.h"
#include "inspect.h"
#include "model.h"

#define RECOMPUTE_TOL 1e-5
#define RECOMPUTE_TOL_BF16 0.0625 /* 2^-4 */

/* n activations of backend memory as floats (bf16 widened exactly). */
static void download_as_float(boost_backend *be, float *out, const boost_act *dev, size_t n) {
  be->mem->download(be, out, dev, boost_act_bytes(be, n));
  if (be->act_dtype != BOOST_BF16) return;
  const uint16_t *h = (const uint16_t *)out; /* widened in place from the back */
  for (size_t i = n; i-- > 0;) {
    const uint32_t u = (uint32_t)h[i] << 16;
    memcpy(&out[i], &u, sizeof u);
  }
}

/* Compares one stored dataset with the model's values (backend memory);
 * returns 1 when it was checked (matching or not). */
static int compare(const ckr_ckpt *c, ins_report *r, const char *path, const model *m, const boost_act *dev, size_t n,
                   ins_acts_check *out) {
  const ckr_dset *d = ckr_find(c, path);
  if (!d) return 0;
  float *mine = malloc((n ? n : 1) * sizeof *mine);
  if (!mine) {
    ins_report_add(r, path, "out of memory comparing %zu values", n);
    out->mismatched++;
    return 1;
  }
  download_as_float(m->be, mine, dev, n);
  boost_status err = {0};
  size_t got = 0, esz = 0;
  float *v = !strcmp(d->dtype, ckr_acts_dtype(c)) ? ckr_read(c, d, &got, &esz, &err) : NULL;
  if (!v || esz != sizeof(float) || got != n) {
    ins_report_add(r, path, "%zu values stored, the model computes %zu", v ? got : (size_t)0, n);
    out->mismatched++;
    free(v);
    free(mine);
    return 1;
  }
  double maxabs = 0, maxdiff = 0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(v[i]) > maxabs) maxabs = fabs(v[i]);
    const double dd = fabs((double)v[i] - (double)mine[i]);
    if (!(dd <= maxdiff)) maxdiff = dd; /* a NaN on either side counts */
  }
  const double scale = maxabs > 1 ? maxabs : 1, rel = maxdiff / scale;
  if (!(rel <= out->tolerance)) {
    out->mismatched++;
    ins_report_add(r, path, "not what the stored weights compute from the stored tokens: max |diff| %.3g (tolerance %s x %.3g)",
                   maxdiff, out->tolerance_text, scale);
  }
  if (!(rel <= out->max_rel_diff)) out->max_rel_diff = rel;
  if (memcmp(v, mine, n * sizeof *v) != 0) out->bitwise = 0;
  out->datasets++;
  free(v);
  free(mine);
  return 1;
}

static void compare_layers(const ckr_ckpt *c, ins_report *r, const model *m, const model_acts *acts, size_t N, ins_acts_check *out) {
  char path[256];
  for (int l = 0; l < m->nl; l++) {
    snprintf(path, sizeof path, CKPT_GROUP_ACTS "/layers.%d.input", l);
    compare(c, r, path, m, acts->cur->resid[l], N * (size_t)m->d_res, out);
    for (int gi = 0; gi < m->layers[l].ngroups; gi++) {
      const proj_group *pg = &m->layers[l].groups[gi];
      if (!pg->lowrank) continue;
      const char *blk = pg->kinds[0] <= PROJ_O ? "attn" : "mlp";
      const size_t n = N * (size_t)pg->nproj * (size_t)pg->r;
      snprintf(path, sizeof path, CKPT_GROUP_ACTS "/layers.%d.%s.%s.h", l, blk, model_group_name(pg));
      compare(c, r, path, m, acts->cur->acts[l].h[gi], n, out);
      snprintf(path, sizeof path, CKPT_GROUP_ACTS "/layers.%d.%s.%s.hpre", l, blk, model_group_name(pg));
      compare(c, r, path, m, acts->cur->acts[l].hpre[gi], n, out);
    }
  }
}

/* The forward pass of the model cfg describes, in the checkpoint's
 * precision, on the stored tokens; every stored activation compared. */
static void recompute(const ckr_ckpt *c, ins_report *r, const train_config *cfg, tp_mode mode, const int32_t *tokens,
                      int B, int T, ins_acts_check *out) {
  boost_status be_err = {0};
  boost_backend *be = NULL;
  boost_backend_create("cpu", out->bf16 ? BOOST_BF16 : BOOST_F32, 0, -1, &be, &be_err);
  if (!be) {
    snprintf(out->skipped, sizeof out->skipped, "no %s CPU backend: %.120s", out->bf16 ? "bf16" : "fp32", be_err.msg);
    return;
  }
  model m;
  model_acts acts = {0};
  model_init(&m, &cfg->model, mode, &(model_options){.backend = be});
  boost_status werr = {0};
  if (ckpt_model_read_weights(c, &m, &werr) != 0) {
    ins_report_add(r, CKPT_GROUP_MODEL, "%s: activations not recomputed", werr.msg);
  } else {
    model_alloc_acts(&m, &acts, B, T, 1, RECOMPUTE_NONE);
    model_use_acts(&acts, 0);
    model_forward(&m, &acts, tokens, NULL, B, T);
    compare_layers(c, r, &m, &acts, (size_t)B * (size_t)T, out);
    out->ran = 1;
  }
  model_acts_free(&m, &acts);
  model_free(&m);
  boost_backend_destroy(be);
}

void ins_recompute_activations(const ckr_ckpt *c, ins_report *r, const train_config *cfg, ins_acts_check *out);
void ins_recompute_activations(const ckr_ckpt *c, ins_report *r, const train_config *cfg, ins_acts_check *out) {
  memset(out, 0, sizeof *out);
  out->bitwise = 1;
  out->bf16 = ckr_is_bf16(c);
  out->tolerance = out->bf16 ? RECOMPUTE_TOL_BF16 : RECOMPUTE_TOL;
  out->tolerance_text = out->bf16 ? "2^-4" : "1e-5";
  /* A --bf16 export holds the masters rounded to bf16: a bf16 run's working
   * weights (the same rounding), not an fp32 run's weights. */
  if (!strcmp(ckpt_meta_str(&c->meta, CKPT_META_F_weights_dtype), "bf16") && !out->bf16) {
    snprintf(out->skipped, sizeof out->skipped, "bf16 weights: the stored activations came from the fp32 ones");
    return;
  }
  const ckr_dset *tok = ckr_find(c, CKPT_GROUP_ACTS "/tokens");
  boost_status err = {0};
  tp_mode mode;
  if (!tok || tok->ndim != 2 || model_check_layout(&cfg->model, cfg->parallel.tp_mode, 1, &mode, &err) != 0) {
    snprintf(out->skipped, sizeof out->skipped, "the stored config does not build a model on one process");
    return;
  }
  const int B = (int)tok->dims[0], T = (int)tok->dims[1];
  size_t ntok = 0, esz = 0;
  int32_t *tokens = ckr_read(c, tok, &ntok, &esz, &err);
  if (!tokens || esz != sizeof(int32_t) || ntok != (size_t)B * (size_t)T) {
    ins_report_add(r, tok->path, "unreadable: activations not recomputed");
    free(tokens);
    return;
  }
  recompute(c, r, cfg, mode, tokens, B, T, out);
  free(tokens);
}
