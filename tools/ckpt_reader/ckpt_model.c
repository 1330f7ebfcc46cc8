/* A checkpoint's model built and loaded on one process (ckpt_model.h). */
#include "ckpt_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_h5.h"

static int want_bf16(const ckr_ckpt *c, const char *precision, int *bf16, boost_status *err) {
  if (!precision || !strcmp(precision, "auto")) {
    *bf16 = ckr_is_bf16(c);
    return 0;
  }
  if (!strcmp(precision, "fp32") || !strcmp(precision, "bf16")) {
    *bf16 = !strcmp(precision, "bf16");
    return 0;
  }
  boost_err(err, "precision '%s' is not one of fp32, bf16, auto", precision);
  return -1;
}

int ckpt_model_build(const ckr_ckpt *c, const ckpt_model_options *opt, ckpt_model *cm, boost_status *err) {
  memset(cm, 0, sizeof *cm);
  const ckpt_model_options none = {0};
  if (!opt) opt = &none;
  if (!c->meta.run.config) {
    boost_err(err, "%s: no stored config (root attribute `config`)", c->path);
    return -1;
  }
  ckr_tensor *t = NULL;
  boost_status e = {0};
  if (ckr_expected_tensors(c->meta.run.config, &t, &cm->cfg, &e) < 0) {
    boost_err(err, "%s: the stored config does not describe a model: %.800s", c->path, e.msg);
    return -1;
  }
  free(t);
  if (model_check_layout(&cm->cfg.model, cm->cfg.parallel.tp_mode, 1, &cm->mode, &e) != 0) {
    boost_err(err, "%s: the stored model does not build on one process: %.800s", c->path, e.msg);
    return -1;
  }
  int bf16 = 0;
  if (want_bf16(c, opt->precision, &bf16, err) != 0) return -1;
  const char *device = opt->device ? opt->device : "cpu";
  boost_status be_err = {0};
  boost_backend_create(device, bf16 ? BOOST_BF16 : BOOST_F32, opt->threads, 0, &cm->be, &be_err);
  if (!cm->be) {
    boost_err(err, "backend %s (%s): %.800s", device, bf16 ? "bf16" : "fp32", be_err.msg);
    return -1;
  }
  cm->bf16_weights = !strcmp(ckpt_meta_str(&c->meta, CKPT_META_F_weights_dtype), "bf16");
  cm->bf16_run = ckr_is_bf16(c);
  model_init(&cm->m, &cm->cfg.model, cm->mode, &(model_options){.backend = cm->be});
  return 0;
}

int ckpt_model_read_weights(const ckr_ckpt *c, model *m, boost_status *err) {
  boost_status e = {0};
  char path[160];
  const char *dtype = !strcmp(ckpt_meta_str(&c->meta, CKPT_META_F_weights_dtype), "bf16") ? "bfloat16" : "float32";
  for (int i = 0; i < m->reg.count; i++) {
    const tensor_desc *t = &m->reg.tensors[i];
    snprintf(path, sizeof path, CKPT_GROUP_MODEL "/%s", t->name);
    const ckr_dset *d = ckr_find(c, path);
    size_t n = 0, esz = 0;
    e = (boost_status){0};
    float *v = d && !strcmp(d->dtype, dtype) ? ckr_read(c, d, &n, &esz, &e) : NULL;
    if (!v || esz != sizeof(float) || n != t->numel) {
      boost_err(err, "%s: cannot be read as the model's %s tensor of %zu values%s%.600s", path, dtype,
               t->numel, e.failed ? ": " : "", e.msg);
      free(v);
      return -1;
    }
    weights_upload(&m->w, &m->reg, m->be, i, v);
    free(v);
  }
  model_refresh_work(m);
  return 0;
}

int ckpt_model_load(const ckr_ckpt *c, const ckpt_model_options *opt, ckpt_model *cm, boost_status *err) {
  if (ckpt_model_build(c, opt, cm, err) != 0) return -1;
  if (ckpt_model_read_weights(c, &cm->m, err) != 0) {
    ckpt_model_free(cm);
    return -1;
  }
  return 0;
}

void ckpt_model_free(ckpt_model *cm) {
  if (cm->be) {
    model_acts_free(&cm->m, &cm->acts);
    model_free(&cm->m);
    boost_backend_destroy(cm->be);
  }
  memset(cm, 0, sizeof *cm);
}
