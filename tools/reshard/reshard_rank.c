/* boost-reshard --rank (reshard_rank.h). */
#include "reshard_rank.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_model.h"
#include "ckpt_slab.h"
#include "eval_loss.h"
#include "h5z_zstd.h"
#include "ckpt_reader.h"
#include "model.h"
#include "util.h"

/* One low-rank group whose rank changes: keep[k * r_new + j] is the old
 * channel that new channel j of projection k takes, -1 for a new one. */
typedef struct {
  char A[TENSOR_NAME_MAX], B[TENSOR_NAME_MAX];
  int g, r_old, r_new, din, dout;
  int *keep;
} rank_group;

struct rank_change {
  train_config from, to;
  model target; /* the new model's registry (tp = 1, no arenas): names, shapes, init std */
  int n;
  rank_group *groups;
};

static float *read_whole(hid_t in, const char *group, const char *name, size_t n, boost_status *err) {
  char path[TENSOR_NAME_MAX + 32];
  snprintf(path, sizeof path, "%s/%s", group, name);
  hid_t d = H5Dopen2(in, path, H5P_DEFAULT), space = d >= 0 ? H5Dget_space(d) : -1;
  float *v = boost_calloc(n ? n : 1, sizeof *v);
  ckpt_slab_reader *sr = ckpt_slab_reader_new(0);
  uint64_t sum = 0;
  int ok = sr && space >= 0 && (size_t)H5Sget_simple_extent_npoints(space) == n;
  if (!ok) ckpt_h5_fail(err, path);
  else ok = ckpt_slab_read(sr, d, NULL, NULL, v, &sum, path, err) == 0;
  ckpt_slab_reader_free(sr);
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  if (ok) return v;
  boost_free(v);
  return NULL;
}

typedef struct {
  double score;
  int index;
} channel;
static int by_score(const void *a, const void *b) { /* descending, ties: lower index first */
  const channel *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->index - y->index;
}
static int ascending(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The channels a group keeps: all of them and new ones when it grows; the
 * r_new largest ||B[:,i]||*||A[i,:]|| of each projection when it shrinks. */
static int choose_channels(hid_t in, rank_group *p, boost_status *err) {
  p->keep = boost_calloc((size_t)p->g * p->r_new, sizeof *p->keep);
  if (p->r_new > p->r_old) {
    for (int k = 0; k < p->g; k++)
      for (int j = 0; j < p->r_new; j++) p->keep[k * p->r_new + j] = j < p->r_old ? j : -1;
    return 0;
  }
  float *A = read_whole(in, CKPT_GROUP_MODEL, p->A, (size_t)p->g * p->r_old * p->din, err);
  float *B = A ? read_whole(in, CKPT_GROUP_MODEL, p->B, (size_t)p->g * p->dout * p->r_old, err) : NULL;
  channel *ch = boost_calloc((size_t)p->r_old, sizeof *ch);
  for (int k = 0; A && B && k < p->g; k++) {
    for (int i = 0; i < p->r_old; i++) {
      const float *a = A + ((size_t)k * p->r_old + i) * p->din, *b = B + (size_t)k * p->dout * p->r_old + i;
      double sa = 0, sb = 0;
      for (int c = 0; c < p->din; c++) sa += (double)a[c] * a[c];
      for (int o = 0; o < p->dout; o++) sb += (double)b[(size_t)o * p->r_old] * b[(size_t)o * p->r_old];
      ch[i] = (channel){sqrt(sa) * sqrt(sb), i};
    }
    qsort(ch, (size_t)p->r_old, sizeof *ch, by_score);
    int *keep = p->keep + (size_t)k * p->r_new;
    for (int j = 0; j < p->r_new; j++) keep[j] = ch[j].index;
    qsort(keep, (size_t)p->r_new, sizeof *keep, ascending);
  }
  const int ok = A && B;
  boost_free(A), boost_free(B), boost_free(ch);
  return ok ? 0 : -1;
}

/* A layout-only registry of a config at tp = 1. */
static int registry_of(const train_config *cfg, model *m, boost_status *err) {
  tp_mode mode;
  if (model_check_layout(&cfg->model, TP_AUTO, 1, &mode, err) != 0) return -1;
  model_init(m, &cfg->model, mode, &(model_options){.layout_only = 1});
  return 0;
}

static int new_ranks(const train_config *from, const options *o, train_config *to, boost_status *err) {
  *to = *from;
  const unsigned attn = (1u << PROJ_Q) | (1u << PROJ_K) | (1u << PROJ_V) | (1u << PROJ_O);
  if (!from->model.lowrank_mask)
    return boost_err(err, "--rank: the model has no low-rank projection (model.lowrank = %s)", from->model.lowrank);
  if (o->rank_attn && !o->rank_all && !(from->model.lowrank_mask & attn))
    return boost_err(err, "--rank: the model has no low-rank attention projection (model.lowrank = %s)", from->model.lowrank);
  if (o->rank_mlp && !o->rank_all && !(from->model.lowrank_mask & ~attn))
    return boost_err(err, "--rank: the model has no low-rank MLP projection (model.lowrank = %s)", from->model.lowrank);
  if (o->rank_attn && (from->model.lowrank_mask & attn)) to->model.rank_attn = o->rank_attn;
  if (o->rank_mlp && (from->model.lowrank_mask & ~attn)) to->model.rank_mlp = o->rank_mlp;
  boost_status e = {0};
  tp_mode mode;
  if (config_validate(to, &e) != 0) return boost_err(err, "--rank: %s", e.msg);
  if (model_check_layout(&to->model, o->mode, o->tp, &mode, &e) != 0)
    return boost_err(err, "--rank: ranks attn %d / mlp %d on the target layout (tp=%d): %s", to->model.rank_attn,
                     to->model.rank_mlp, o->tp, e.msg);
  return 0;
}

static rank_change *plan_ranks(hid_t in, const train_config *from, const options *o, train_config *to, boost_status *err) {
  if (new_ranks(from, o, to, err) != 0) return NULL;
  rank_change *rc = boost_calloc(1, sizeof *rc);
  rc->from = *from, rc->to = *to;
  model src;
  if (registry_of(from, &src, err) != 0) {
    boost_free(rc);
    return NULL;
  }
  if (registry_of(to, &rc->target, err) != 0) {
    model_free(&src);
    boost_free(rc);
    return NULL;
  }
  rc->groups = boost_calloc((size_t)src.nl * PROJ_COUNT, sizeof *rc->groups);
  int ok = 1;
  for (int l = 0; ok && l < src.nl; l++)
    for (int gi = 0; ok && gi < src.layers[l].ngroups; gi++) {
      const proj_group *pg = &src.layers[l].groups[gi];
      const int r_new = model_rank(&to->model, pg->kinds[0]);
      if (!pg->lowrank || r_new == pg->r) continue;
      rank_group *p = &rc->groups[rc->n++];
      *p = (rank_group){.g = pg->nproj, .r_old = pg->r, .r_new = r_new, .din = pg->in, .dout = pg->out};
      snprintf(p->A, sizeof p->A, "%s", src.reg.tensors[pg->A].name);
      snprintf(p->B, sizeof p->B, "%s", src.reg.tensors[pg->B].name);
      ok = choose_channels(in, p, err) == 0;
    }
  model_free(&src);
  if (!ok) {
    reshard_rank_free(rc);
    return NULL;
  }
  return rc;
}

int reshard_rank_plan(hid_t in, const train_config *from, const options *o, train_config *to, rank_change **out,
                      boost_status *err) {
  *out = plan_ranks(in, from, o, to, err);
  return *out ? 0 : -1;
}

void reshard_rank_free(rank_change *rc) {
  if (!rc) return;
  for (int i = 0; i < rc->n; i++) boost_free(rc->groups[i].keep);
  boost_free(rc->groups);
  model_free(&rc->target);
  boost_free(rc);
}

/* New A rows: what a run of the new rank draws there at initialisation. */
static float *initial_values(const rank_change *rc, const char *name) {
  const int idx = registry_find(&rc->target.reg, name);
  BOOST_ASSERT(idx >= 0);
  const tensor_desc *t = &rc->target.reg.tensors[idx]; /* tp = 1: the hyperslab is the whole tensor */
  float *v = boost_calloc(t->numel, sizeof *v);
  tensor_init_values(t, (uint64_t)rc->to.train.seed, v);
  return v;
}

int reshard_rank_tensor(const rank_change *rc, const char *group, const char *name, float **buf, size_t *n, int ndim,
                        hsize_t *dims, boost_status *err) {
  const rank_group *p = NULL;
  int is_a = 0;
  for (int i = 0; rc && i < rc->n && !p; i++)
    if (!strcmp(name, rc->groups[i].A) || !strcmp(name, rc->groups[i].B)) p = &rc->groups[i], is_a = !strcmp(name, p->A);
  if (!p) return 0;
  const size_t g = (size_t)p->g, rows = is_a ? (size_t)p->r_old : (size_t)p->dout, cols = is_a ? (size_t)p->din : (size_t)p->r_old;
  if (*n != g * rows * cols || ndim < 2 || dims[ndim - 2] != rows || dims[ndim - 1] != cols)
    return boost_err(err, "%s/%s: shape does not match the stored config's rank %d", group, name, p->r_old);
  const size_t n_new = g * p->r_new * (is_a ? p->din : p->dout);
  float *out = boost_calloc(n_new, sizeof *out), *init = NULL;
  if (is_a && !strcmp(group, CKPT_GROUP_MODEL) && p->r_new > p->r_old) init = initial_values(rc, name);
  for (size_t k = 0; k < g; k++)
    for (int j = 0; j < p->r_new; j++) {
      const int old = p->keep[k * p->r_new + j];
      if (is_a) { /* row j of [r, din] */
        float *dst = out + (k * p->r_new + j) * p->din;
        if (old >= 0) memcpy(dst, *buf + (k * p->r_old + old) * p->din, (size_t)p->din * sizeof *dst);
        else if (init) memcpy(dst, init + (k * p->r_new + j) * p->din, (size_t)p->din * sizeof *dst);
      } else if (old >= 0) /* column j of [dout, r]; new columns stay zero */
        for (int o = 0; o < p->dout; o++) out[(k * p->dout + o) * p->r_new + j] = (*buf)[(k * p->dout + o) * p->r_old + old];
    }
  boost_free(init);
  free(*buf); /* the caller's malloc */
  *buf = out;
  *n = n_new;
  dims[is_a ? ndim - 2 : ndim - 1] = (hsize_t)p->r_new;
  return 0;
}

/* ---- the stored activations ------------------------------------------------ */

static herr_t copy_attr(hid_t loc, const char *name, const H5A_info_t *info, void *op) {
  (void)info;
  hid_t dst = *(hid_t *)op, a = H5Aopen(loc, name, H5P_DEFAULT), type = H5Aget_type(a), space = H5Aget_space(a);
  const size_t n = H5Tget_size(type) * (size_t)H5Sget_simple_extent_npoints(space);
  void *buf = calloc(n ? n : 1, 1);
  hid_t b = -1;
  const herr_t rc = buf && H5Aread(a, type, buf) >= 0 && (b = H5Acreate2(dst, name, type, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
                            H5Awrite(b, type, buf) >= 0 ? 0 : -1;
  if (b >= 0) H5Aclose(b);
  if (H5Tis_variable_str(type) > 0) H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
  free(buf);
  H5Sclose(space), H5Tclose(type), H5Aclose(a);
  return rc;
}

int reshard_rank_copy_acts(hid_t in, hid_t out, boost_status *err) {
  if (H5Lexists(in, CKPT_GROUP_ACTS, H5P_DEFAULT) <= 0) return 0;
  hid_t gi = H5Gopen2(in, CKPT_GROUP_ACTS, H5P_DEFAULT), go = gi >= 0 ? H5Gcreate2(out, CKPT_GROUP_ACTS, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
  int ok = go >= 0 && H5Aiterate2(gi, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_attr, &go) >= 0;
  static const char *const keep[] = {CKPT_GROUP_ACTS "/tokens", CKPT_GROUP_ACTS "/sample_index"};
  for (int i = 0; ok && i < 2; i++)
    if (H5Lexists(in, keep[i], H5P_DEFAULT) > 0 && H5Ocopy(in, keep[i], out, keep[i], H5P_DEFAULT, H5P_DEFAULT) < 0) ok = 0;
  if (go >= 0) H5Gclose(go);
  if (gi >= 0) H5Gclose(gi);
  if (!ok) ckpt_h5_fail(err, CKPT_GROUP_ACTS);
  return ok ? 0 : -1;
}

/* n activations of backend memory as floats (bf16 widened exactly). */
static float *host_floats(const model *m, const boost_act *dev, size_t n) {
  float *v = boost_calloc(n ? n : 1, sizeof *v);
  m->be->mem->download(m->be, v, dev, boost_act_bytes(m->be, n));
  if (m->be->act_dtype == BOOST_BF16)
    for (size_t i = n; i-- > 0;) {
      const uint32_t u = (uint32_t)((const uint16_t *)v)[i] << 16;
      memcpy(&v[i], &u, sizeof u);
    }
  return v;
}

/* The model's values (in activation state acts) for one stored layer activation of
 * IN (NULL: a name this model has no buffer for), with its new shape. */
static float *layer_values(const model *m, const model_acts *acts, const ckr_dset *d, size_t N, int *ndim, hsize_t *dims) {
  int l = -1, used = 0;
  if (sscanf(d->path, CKPT_GROUP_ACTS "/layers.%d.%n", &l, &used) != 1 || l < 0 || l >= m->nl) return NULL;
  const char *rest = d->path + used;
  if (!strcmp(rest, "input")) {
    *ndim = 2, dims[0] = N, dims[1] = (hsize_t)m->d_res;
    return host_floats(m, acts->cur->resid[l], N * (size_t)m->d_res);
  }
  char want[160];
  for (int gi = 0; gi < m->layers[l].ngroups; gi++) {
    const proj_group *pg = &m->layers[l].groups[gi];
    const char *blk = pg->kinds[0] <= PROJ_O ? "attn" : "mlp";
    for (int pre = 0; pg->lowrank && pre < 2; pre++) {
      snprintf(want, sizeof want, "%s.%s.%s", blk, model_group_name(pg), pre ? "hpre" : "h");
      if (strcmp(rest, want)) continue;
      *ndim = 3, dims[0] = N, dims[1] = (hsize_t)pg->nproj, dims[2] = (hsize_t)pg->r;
      return host_floats(m, pre ? acts->cur->acts[l].hpre[gi] : acts->cur->acts[l].h[gi], N * pg->nproj * (size_t)pg->r);
    }
  }
  return NULL;
}

static int write_dataset(hid_t f, const char *path, int ndim, const hsize_t *dims, const float *v, int bf16, int level) {
  int64_t shape[4];
  hsize_t chunk[4];
  size_t n = 1;
  for (int k = 0; k < ndim; k++) shape[k] = (int64_t)dims[k], n *= (size_t)dims[k];
  ckpt_chunk_dims(ndim, shape, chunk);
  hid_t ftype = bf16 ? ckpt_bf16_type() : H5Tcopy(H5T_IEEE_F32LE), space = H5Screate_simple(ndim, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), d = -1;
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  const int ok = h5z_zstd_set_dcpl(dcpl, ndim, chunk, level) >= 0 &&
                 (d = H5Dcreate2(f, path, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0 &&
                 H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 &&
                 ckpt_attr_put_u64(d, CKPT_ATTR_CHECKSUM, ckpt_hash_run32(v, n, 0)) == 0;
  if (d >= 0) H5Dclose(d);
  H5Pclose(dcpl), H5Sclose(space), H5Tclose(ftype);
  return ok ? 0 : -1;
}

typedef struct {
  char path[512];
  int ndim;
  hsize_t dims[4];
  float *v;
} act_values;

/* The converted model on the stored batch: its loss, and every layer
 * activation IN stores, recomputed (full sequences, as the run stored them). */
static int converted_model(const ckr_ckpt *in, const char *tmp, double *loss, act_values *acts, int *nacts, boost_status *err) {
  ckr_ckpt c;
  ckpt_model cm;
  if (ckr_open(tmp, &c, err) != 0) return -1;
  int64_t ntok = 0;
  int rc = ckpt_model_load(&c, NULL, &cm, err);
  if (rc == 0) rc = eval_stored_batch(&c, &cm.m, &cm.acts, loss, &ntok, err);
  const ckr_dset *td = ckr_find(&c, CKPT_GROUP_ACTS "/tokens");
  size_t n = 0, esz = 0;
  int32_t *tok = rc == 0 ? ckr_read(&c, td, &n, &esz, err) : NULL;
  if (rc == 0 && !tok) rc = -1;
  if (rc == 0) {
    const int nseq = (int)td->dims[0], T = (int)td->dims[1];
    model_alloc_acts(&cm.m, &cm.acts, nseq, T, 1, RECOMPUTE_NONE);
    model_forward(&cm.m, &cm.acts, tok, NULL, nseq, T);
    for (int i = 0; i < in->n; i++) {
      const ckr_dset *d = &in->d[i];
      if (strncmp(d->path, CKPT_GROUP_ACTS "/layers.", strlen(CKPT_GROUP_ACTS "/layers."))) continue;
      act_values *a = &acts[*nacts];
      if (!(a->v = layer_values(&cm.m, &cm.acts, d, (size_t)nseq * T, &a->ndim, a->dims))) {
        rc = boost_err(err, "%s: not an activation the converted model computes", d->path);
        break;
      }
      snprintf(a->path, sizeof a->path, "%s", d->path);
      (*nacts)++;
    }
  }
  free(tok);
  if (cm.be) ckpt_model_free(&cm);
  ckr_close(&c);
  return rc;
}

static double stored_loss(const ckr_ckpt *c, boost_status *err) {
  ckpt_model cm;
  double loss = NAN;
  int64_t ntok = 0;
  if (ckpt_model_load(c, NULL, &cm, err) != 0) return NAN;
  if (eval_stored_batch(c, &cm.m, &cm.acts, &loss, &ntok, err) != 0) loss = NAN;
  ckpt_model_free(&cm);
  return loss;
}

int reshard_rank_finish(const rank_change *rc, const char *in_path, const char *tmp, const options *o, boost_status *err) {
  ckr_ckpt in;
  if (ckr_open(in_path, &in, err) != 0) return -1;
  const int have = ckr_find(&in, CKPT_GROUP_ACTS "/tokens") != NULL, bf16 = ckr_is_bf16(&in);
  double before = NAN, after = NAN;
  act_values *acts = boost_calloc((size_t)in.n + 1, sizeof *acts);
  int nacts = 0, status = 0;
  if (have) {
    before = stored_loss(&in, err);
    status = isnan(before) ? -1 : converted_model(&in, tmp, &after, acts, &nacts, err);
  }
  ckr_close(&in);
  hid_t f = status == 0 && nacts > 0 ? H5Fopen(tmp, H5F_ACC_RDWR, H5P_DEFAULT) : -1;
  if (status == 0 && nacts > 0 && f < 0) status = boost_err(err, "%s: cannot reopen to write the activations", tmp);
  for (int i = 0; i < nacts; i++) {
    if (status == 0 && write_dataset(f, acts[i].path, acts[i].ndim, acts[i].dims, acts[i].v, bf16, rc->to.ckpt.level) != 0)
      status = boost_err(err, "%s: cannot write the recomputed activation", acts[i].path);
    boost_free(acts[i].v);
  }
  boost_free(acts);
  if (f >= 0 && H5Fclose(f) < 0 && status == 0) status = boost_err(err, "%s: cannot close", tmp);
  if (status != 0 || o->quiet) return status;
  printf("ranks attn %d -> %d, mlp %d -> %d", rc->from.model.rank_attn, rc->to.model.rank_attn, rc->from.model.rank_mlp,
         rc->to.model.rank_mlp);
  if (have)
    printf(": loss on the stored batch %.6f -> %.6f (change %+.6f); %d stored activations recomputed\n", before, after,
           after - before, nacts);
  else
    printf(": the checkpoint stores no batch (ckpt.activations = none): loss change not measured\n");
  return 0;
}
