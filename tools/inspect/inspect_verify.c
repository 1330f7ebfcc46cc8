/* boost-inspect verify: everything a reader can check without the trainer.
 *  - root attributes present, typed and consistent (format, version,
 *    checksum algorithm, step = lr_schedule_step = adam_t, seeds,
 *    activations mode and precision equal to the stored config's, layout
 *    sizes, n_tensors);
 *  - the stored config parses and validates; the tensors it implies are all
 *    present under /model, /optim/adam_m, /optim/adam_v with their shapes and
 *    float32, and those groups hold nothing else;
 *  - the group walk completes (a damaged group index is an error, never a
 *    shorter list);
 *  - every dataset: every chunk decoded and its xxh3-64-elemsum-v1 checksum
 *    recomputed and compared with its attribute;
 *  - the state datasets (inspect_state.c): the loss history has `step`
 *    values, the validation and start histories are consistent; stored
 *    activations well formed.
 * Each problem is one line naming the tensor or attribute. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_run_id.h"
#include "ckpt_slab.h"
#include "config.h"
#include "inspect.h"

void ins_report_add(ins_report *r, const char *obj, const char *fmt, ...) {
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->lines = boost_realloc(r->lines, (size_t)r->cap, sizeof *r->lines);
  }
  size_t len = strlen(obj) + strlen(msg) + 3;
  r->lines[r->n] = boost_realloc(NULL, len, 1);
  snprintf(r->lines[r->n], len, "%s: %s", obj, msg);
  r->n++;
}

void ins_report_free(ins_report *r) {
  for (int i = 0; i < r->n; i++) free(r->lines[i]);
  free(r->lines);
  memset(r, 0, sizeof *r);
}

static void mix(ins_report *r, const void *p, size_t n) { r->digest = XXH3_64bits_withSeed(p, n, r->digest); }

/* Every attribute of an object, raw bytes in its file type, into the digest. */
static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
  (void)info;
  ins_report *r = data;
  mix(r, name, strlen(name));
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  hid_t t = a >= 0 ? H5Aget_type(a) : -1, s = a >= 0 ? H5Aget_space(a) : -1;
  hssize_t np = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
  size_t sz = t >= 0 ? H5Tget_size(t) : 0;
  int rc = -1;
  if (np >= 0 && sz > 0 && (double)np * (double)sz < 1e8 && H5Tis_variable_str(t) == 0 && H5Tget_class(t) != H5T_VLEN) {
    void *buf = calloc((size_t)np * sz + 1, 1);
    if (buf && H5Aread(a, t, buf) >= 0) {
      mix(r, buf, (size_t)np * sz);
      rc = 0;
    }
    free(buf);
  }
  if (t >= 0) H5Tclose(t);
  if (s >= 0) H5Sclose(s);
  if (a >= 0) H5Aclose(a);
  return rc;
}

static void digest_attrs(const ckr_ckpt *c, ins_report *r, const char *obj) {
  hid_t o = H5Oopen(c->f, obj, H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return; /* absence is reported elsewhere */
  }
  hsize_t idx = 0;
  if (H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, r) < 0)
    ins_report_add(r, obj, "attributes unreadable (corrupt metadata?)");
  H5Oclose(o);
  H5Eclear2(H5E_DEFAULT);
}

static void check_root(const ckr_ckpt *c, ins_report *r, const train_config *cfg, int cfg_ok) {
  const ckpt_meta *m = &c->meta;
  for (int f = 0; f < CKPT_META_NFIELDS; f++) /* the schema's attributes, each of its type */
    if ((m->unreadable >> f) & 1u) ins_report_add(r, "attribute", "%s: unreadable or not of its type", ckpt_meta_fields[f].name);
  if (!m->package.software_version || !m->package.software_version[0]) ins_report_add(r, "attribute software_version", "missing or empty");
  if (!m->package.checksum_algorithm || strcmp(m->package.checksum_algorithm, CKPT_CHECKSUM_ALGORITHM) != 0)
    ins_report_add(r, "attribute checksum_algorithm", "'%s', expected '%s'", m->package.checksum_algorithm ? m->package.checksum_algorithm : "(missing)", CKPT_CHECKSUM_ALGORITHM);
  if (m->run.step < 0) ins_report_add(r, "attribute step", "missing, unreadable or negative");
  boost_status why = {0};
  if (m->run.step >= 0 && ckpt_check_file_step(c->path, m->run.step, &why) != 0) ins_report_add(r, "file name", "%s", why.msg);
  if (m->run.lr_schedule_step != m->run.step) ins_report_add(r, "attribute lr_schedule_step", "%lld differs from step %lld", (long long)m->run.lr_schedule_step, (long long)m->run.step);
  if (m->run.adam_t != m->run.step) ins_report_add(r, "attribute adam_t", "%lld differs from step %lld", (long long)m->run.adam_t, (long long)m->run.step);
  if (m->run.data_cursor < 0) ins_report_add(r, "attribute data_cursor", "missing, unreadable or negative");
  if (!(m->run.tokens_seen >= 0) || !isfinite(m->run.tokens_seen)) ins_report_add(r, "attribute tokens_seen", "missing, unreadable or invalid");
  if (!isfinite(m->run.lr_next) || m->run.lr_next < 0) ins_report_add(r, "attribute lr_next", "missing, unreadable or invalid");
  if (!ckpt_meta_has(m, CKPT_META_F_train_seed)) ins_report_add(r, "attribute train_seed", "missing");
  if (!ckpt_meta_has(m, CKPT_META_F_data_seed)) ins_report_add(r, "attribute data_seed", "missing");
  if (ckpt_meta_has(m, CKPT_META_F_run_id) && !ckpt_run_id_valid(m->run.run_id)) /* absent: a file older than identities */
    ins_report_add(r, "attribute run_id", "'%.40s' is not a run identity (32 lowercase hex digits)", m->run.run_id);
  const char *acts = m->run.activations ? m->run.activations : "";
  if (strcmp(acts, "none") && strcmp(acts, "sample") && strcmp(acts, "all"))
    ins_report_add(r, "attribute activations", "'%s', expected none, sample or all", m->run.activations ? m->run.activations : "(missing)");
  const char *prec = ckpt_meta_str(m, CKPT_META_F_precision);
  if (strcmp(prec, "fp32") && strcmp(prec, "bf16")) ins_report_add(r, "attribute precision", "'%s', expected fp32 or bf16", prec);
  else if (cfg_ok && ckpt_meta_has(m, CKPT_META_F_precision) && strcmp(precision_names[cfg->train.precision], prec))
    ins_report_add(r, "attribute precision", "'%s' differs from the config's train.precision '%s'", prec, precision_names[cfg->train.precision]);
  if (cfg_ok) {
    if (cfg->train.seed != m->run.train_seed) ins_report_add(r, "attribute train_seed", "%lld differs from the config's train.seed %lld", (long long)m->run.train_seed, (long long)cfg->train.seed);
    if (cfg->data.seed != m->run.data_seed) ins_report_add(r, "attribute data_seed", "%lld differs from the config's data.seed %lld", (long long)m->run.data_seed, (long long)cfg->data.seed);
    if (strcmp(acts_mode_names[cfg->ckpt.activations], acts) != 0) ins_report_add(r, "attribute activations", "'%s' differs from the config's ckpt.activations '%s'", acts, acts_mode_names[cfg->ckpt.activations]);
  }
  ckpt_layout lay;
  if (ckpt_layout_parse(m->run.layout, &lay) != 0 || lay.world_size < 0)
    ins_report_add(r, "attribute layout", "missing or not a JSON object with positive world_size, dp, tp, pp");
  else if ((double)lay.world_size != (double)lay.dp * lay.tp * lay.pp)
    ins_report_add(r, "attribute layout", "world_size %d != dp*tp*pp = %.0f", lay.world_size, (double)lay.dp * lay.tp * lay.pp);
  else if (ckpt_meta_has(m, CKPT_META_F_global_batch) && cfg_ok && !ckpt_meta_has(m, CKPT_META_F_resharded_from) &&
           m->run.global_batch != (int64_t)cfg->train.batch_size * cfg->train.grad_accum * lay.dp)
    ins_report_add(r, "attribute global_batch", "%lld differs from the config's batch_size x grad_accum x the layout's dp = %lld",
                   (long long)m->run.global_batch, (long long)cfg->train.batch_size * cfg->train.grad_accum * lay.dp);
  if (ckpt_meta_has(m, CKPT_META_F_global_batch) && m->run.global_batch <= 0)
    ins_report_add(r, "attribute global_batch", "%lld: not a positive number of sequences", (long long)m->run.global_batch);
}

/* The expected tensors in each of the three tensor groups, and nothing else there. */
static void check_tensor_set(const ckr_ckpt *c, ins_report *r, const ckr_tensor *t, int nt) {
  static const char *groups[3] = {CKPT_GROUP_MODEL, CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V};
  /* An export (boost-reshard --no-optimizer / --bf16) says so in root
   * attributes; without them a file is a training checkpoint. */
  const char *optim = ckpt_meta_str(&c->meta, CKPT_META_F_optimizer_state);
  const char *wdtype = ckpt_meta_str(&c->meta, CKPT_META_F_weights_dtype);
  const int no_moments = !strcmp(optim, "absent"), bf16 = !strcmp(wdtype, "bf16");
  if (!no_moments && strcmp(optim, "present"))
    ins_report_add(r, "attribute optimizer_state", "'%s', expected present or absent", optim);
  if (!bf16 && strcmp(wdtype, "f32")) ins_report_add(r, "attribute weights_dtype", "'%s', expected f32 or bf16", wdtype);
  char p[256];
  for (int g = 0; g < (no_moments ? 1 : 3); g++)
    for (int i = 0; i < nt; i++) {
      snprintf(p, sizeof p, "%s/%s", groups[g], t[i].name);
      const ckr_dset *d = ckr_find(c, p);
      if (!d) {
        ins_report_add(r, p, "missing (the stored config implies it)%s", c->walk_failed ? "; the group walk failed" : "");
        continue;
      }
      int same = d->ndim == t[i].ndim;
      for (int k = 0; same && k < d->ndim; k++) same = (int64_t)d->dims[k] == t[i].shape[k];
      char got[64], want[64] = "";
      if (!same) {
        ckr_shape_str(d, got, sizeof got);
        for (int k = 0; k < t[i].ndim; k++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k ? "x" : "", (long long)t[i].shape[k]);
        ins_report_add(r, p, "shape %s, the stored config implies %s", got, want);
      }
      const char *want_dtype = g == 0 && bf16 ? "bfloat16" : "float32";
      if (strcmp(d->dtype, want_dtype) != 0) ins_report_add(r, p, "dtype %s, expected %s", d->dtype, want_dtype);
    }
  for (int i = 0; i < c->n; i++) {
    const char *dp = c->d[i].path;
    for (int g = 0; g < 3; g++) {
      size_t L = strlen(groups[g]);
      if (strncmp(dp, groups[g], L) != 0 || dp[L] != '/') continue;
      int known = 0;
      for (int k = 0; k < nt && !known; k++) known = !strcmp(dp + L + 1, t[k].name);
      if (!known) ins_report_add(r, dp, "not a tensor of the model the stored config describes");
      else if (g > 0 && no_moments) ins_report_add(r, dp, "present although the attribute optimizer_state says absent");
    }
  }
}

/* A dataset's checksum as recomputed from its content: float32 and
 * bfloat16 tensors through the slab reader (their stored chunks decoded on
 * r->threads threads), the rest read whole. -1 with err. */
static int content_hash(const ckr_ckpt *c, const ckr_dset *d, ckpt_slab_reader *sr, uint64_t *h, boost_status *err) {
  if (sr && d->ndim >= 1 && (!strcmp(d->dtype, "float32") || !strcmp(d->dtype, "bfloat16"))) {
    hid_t ds = H5Dopen2(c->f, d->path, H5P_DEFAULT);
    if (ds < 0) {
      char what[600];
      snprintf(what, sizeof what, "%s: read failed (corrupt data?)", d->path);
      ckpt_h5_fail(err, what);
      return -1;
    }
    const int rc = ckpt_slab_read(sr, ds, NULL, NULL, NULL, h, d->path, err);
    H5Dclose(ds);
    return rc;
  }
  size_t n, esz;
  void *buf = ckr_read(c, d, &n, &esz, err);
  if (!buf) return -1;
  *h = esz == 8 ? ckpt_hash_run64(buf, n, 0) : ckpt_hash_run32(buf, n, 0);
  free(buf);
  return 0;
}

/* Decodes every dataset and recomputes its checksum. */
static void check_contents(const ckr_ckpt *c, ins_report *r) {
  boost_status err = {0};
  ckpt_slab_reader *sr = ckpt_slab_reader_new(r->threads);
  for (int i = 0; i < c->n; i++) {
    const ckr_dset *d = &c->d[i];
    mix(r, d->path, strlen(d->path));
    if (d->ndim < 0) {
      ins_report_add(r, d->path, "unreadable dataspace (corrupt metadata?)");
      continue;
    }
    if (!d->has_checksum) ins_report_add(r, d->path, "no readable %s attribute", CKPT_ATTR_CHECKSUM);
    uint64_t h = 0;
    if (content_hash(c, d, sr, &h, &err) != 0) {
      ins_report_add(r, d->path, "%s", strchr(err.msg, ':') && !strncmp(err.msg, d->path, strlen(d->path)) ? err.msg + strlen(d->path) + 2 : err.msg);
      continue;
    }
    r->checked++;
    mix(r, &h, sizeof h);
    mix(r, d->dims, sizeof d->dims[0] * (size_t)d->ndim);
    if (d->has_checksum && h != d->checksum)
      ins_report_add(r, d->path, "checksum mismatch (stored %016llx, computed %016llx)", (unsigned long long)d->checksum, (unsigned long long)h);
  }
  ckpt_slab_reader_free(sr);
}

void ins_check_activations(const ckr_ckpt *c, ins_report *r, const train_config *cfg, const ckr_tensor *t, int nt);
void ins_recompute_activations(const ckr_ckpt *c, ins_report *r, const train_config *cfg, ins_acts_check *out);

/* The trainer's loader finds every tensor by name (H5Lexists, H5Dopen by
 * path), which goes through each group's name index; the walk above does
 * not. A damaged name index must be reported here too, or verify would say
 * ok on a file the loader refuses. */
static void check_name_lookups(ckr_ckpt *c, ins_report *r) {
  for (int i = 0; i < c->n; i++) {
    const char *p = c->d[i].path;
    char part[sizeof c->d[i].path];
    int ok = 1;
    snprintf(part, sizeof part, "%s", p);
    for (char *q = part + 1; ok && *q; q++) /* every component, as the loader's check does */
      if (*q == '/') {
        *q = 0;
        ok = H5Lexists(c->f, part, H5P_DEFAULT) > 0;
        *q = '/';
      }
    hid_t o = ok && H5Lexists(c->f, p, H5P_DEFAULT) > 0 ? H5Oopen(c->f, p, H5P_DEFAULT) : -1;
    if (o < 0) ins_report_add(r, p, "cannot be found by name (damaged group index: the trainer's loader would refuse this file)");
    else H5Oclose(o);
  }
  /* Every group's and dataset's whole object header (what other readers,
   * h5py's visit for one, read): a damaged header block is damage, even
   * where the tensors themselves still read. */
  static const char *groups[] = {"/", "/model", "/optim", CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V, CKPT_GROUP_STATE,
                                 CKPT_GROUP_ACTS};
  for (int i = 0; i < (int)(sizeof groups / sizeof *groups) + c->n; i++) {
    const char *p = i < (int)(sizeof groups / sizeof *groups) ? groups[i] : c->d[i - (int)(sizeof groups / sizeof *groups)].path;
    if (p[1] && H5Lexists(c->f, p, H5P_DEFAULT) <= 0) continue; /* a missing group is reported elsewhere */
    H5O_info_t info;
    if (H5Oget_info_by_name2(c->f, p, &info, H5O_INFO_ALL, H5P_DEFAULT) < 0)
      ins_report_add(r, p, "object header unreadable (corrupt metadata)");
  }
  H5Eclear2(H5E_DEFAULT);
}

int ins_verify(ckr_ckpt *c, ins_report *r) {
  boost_status err = {0};
  train_config cfg;
  ckr_tensor *t = NULL;
  int nt = ckr_expected_tensors(c->meta.run.config, &t, &cfg, &err);
  if (nt < 0) ins_report_add(r, "attribute config", "%s", err.msg);
  if (c->walk_failed) ins_report_add(r, "file structure", "%s", c->walk_error);
  check_root(c, r, &cfg, nt >= 0);
  if (nt >= 0) {
    check_tensor_set(c, r, t, nt);
    if (c->meta.package.n_tensors != nt)
      ins_report_add(r, "attribute n_tensors", "%lld, the stored config implies %d", (long long)c->meta.package.n_tensors, nt);
  }
  check_name_lookups(c, r);
  ins_check_state(c, r);
  check_contents(c, r);
  if (c->meta.run.activations && strcmp(c->meta.run.activations, "none") != 0 && nt >= 0) {
    ins_check_activations(c, r, &cfg, t, nt);
    /* Only a file without any problem so far builds the model: its weights
     * all decoded with the shapes the config implies. */
    if (r->n == 0 && !r->no_recompute) ins_recompute_activations(c, r, &cfg, &r->acts);
  }
  static const char *objs[] = {"/", "/model", "/optim", CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V, CKPT_GROUP_STATE, CKPT_GROUP_ACTS};
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) digest_attrs(c, r, objs[i]);
  for (int i = 0; i < c->n; i++) digest_attrs(c, r, c->d[i].path);
  free(t);
  H5Eclear2(H5E_DEFAULT);
  return r->n;
}

int ins_verify_image(const void *buf, size_t len, uint64_t *digest) {
  ckr_ckpt c;
  boost_status err = {0};
  int rc = 1;
  if (ckr_open_image(buf, len, &c, &err) == 0) {
    ins_report r = {.threads = 1}; /* the flip sweep forks: no OpenMP thread pool in the parent */
    rc = ins_verify(&c, &r) ? 1 : 0;
    if (digest) *digest = r.digest;
    ins_report_free(&r);
  }
  ckr_close(&c);
  return rc;
}
