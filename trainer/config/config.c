/* A run's settings read: the defaults, one key set from text (--set, an INI
 * line, a stored value), INI files and the preset they name, validation.
 * The key table is config_keys.c; the settings written out, config_out.c. */
#include "config.h"
#include "config_internal.h"

#include "config_values.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void config_defaults(train_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  config_apply_preset(&cfg->model, "tiny");
  cfg->model.tie_embeddings = 0;
  cfg->model.rope_theta = 10000.0f;
  cfg->model.norm_eps = 1e-5f;
  cfg->model.init_std = 0.02f;
  cfg->data.val_fraction = 0.05f;
  cfg->data.seed = 1234;
  cfg->train.batch_size = 4;
  cfg->train.grad_accum = 1;
  cfg->train.steps = 100;
  cfg->train.warmup_steps = 10;
  cfg->train.lr = 1e-3f;
  cfg->train.min_lr_ratio = 0.1f;
  cfg->train.optim.weight_decay = 0.1f;
  cfg->train.optim.beta1 = 0.9f;
  cfg->train.optim.beta2 = 0.95f;
  cfg->train.optim.eps = 1e-8f;
  cfg->train.optim.grad_clip = 1.0f;
  cfg->train.report.val_every = 50;
  cfg->train.report.val_batches = 8;
  cfg->train.report.log_every = 1;
  cfg->train.threads = 0;
  cfg->train.seed = 42;
  cfg->train.guard.policy = GUARD_ROLLBACK; /* docs/GUARD.md, "Defaults" */
  cfg->train.guard.window = 100;
  cfg->train.guard.warmup = 20;
  cfg->train.guard.z_loss = 6.0f;
  cfg->train.guard.z_gnorm = 12.0f;
  cfg->train.guard.loss_ratio = 2.0f;
  cfg->train.guard.cluster = 3;
  cfg->train.guard.cluster_window = 50;
  cfg->train.guard.skip_batches = 200;
  cfg->train.guard.max_rollbacks = 3;
  cfg->train.guard.sdc_limit = 2;
  cfg->parallel.dp = cfg->parallel.tp = cfg->parallel.pp = 1;
  cfg->parallel.tp_mode = TP_AUTO;
  cfg->parallel.recompute = RECOMPUTE_NONE;
  cfg->parallel.timeout = 600; /* docs/PARALLELISM.md, "The collective watchdog" */
  cfg->parallel.dp_bucket_mb = 4; /* docs/PERFORMANCE.md, "Overlapped gradient reduction" */
  config_set(cfg, "ckpt.resume", "auto", NULL);
  config_set(cfg, "ckpt.every", "0", NULL);
  config_set(cfg, "ckpt.local_every", "0", NULL);
  config_set(cfg, "ckpt.staging_limit", "100%", NULL); /* the default: docs/PERFORMANCE.md, "Bounded staging" */
  cfg->ckpt.activations = ACTS_NONE;
  cfg->ckpt.keep_last = 3;
  cfg->ckpt.keep_set_aside = 3;
  cfg->ckpt.level = 1; /* as small as level 3 on shuffled fp32, 1.2-1.8x faster (docs/PERFORMANCE.md) */
  cfg->ckpt.timeout = 900;
  cfg->ckpt.remote.every = 1, cfg->ckpt.remote.keep = 2, cfg->ckpt.remote.grace = 60;
}

int config_set(train_config *cfg, const char *key, const char *value, boost_status *err) {
  const key_spec *k = config_find_key(key);
  if (!k) return boost_err(err, "unknown config key '%s' (see boost-train --help)", key);
  char *base = (char *)cfg + k->offset;
  char *end = NULL;
  errno = 0;
  switch (k->type) {
  case K_STR:
    if (strlen(value) >= k->size) return boost_err(err, "value of %s is too long (%zu characters max)", key, k->size - 1);
    snprintf(base, k->size, "%s", value);
    if (strcmp(key, "ckpt.every") == 0 || strcmp(key, "ckpt.mtbf") == 0 || strcmp(key, "ckpt.local_every") == 0)
      return config_parse_interval(cfg, key, value, err);
    if (strcmp(key, "ckpt.resume") == 0) /* the tagged value, parsed here once */
      cfg->ckpt.resume.kind = !strcmp(value, "auto") ? RESUME_AUTO : !strcmp(value, "none") || !value[0] ? RESUME_NONE : RESUME_PATH;
    if (strcmp(key, "ckpt.staging_limit") == 0 && config_parse_staging_limit(cfg, value, err) != 0) return -1;
    if (strcmp(key, "train.skip_batches") == 0 && config_parse_skip_batches(cfg, value, err) != 0) return -1;
    if (strcmp(key, "model.preset") == 0 && config_apply_preset(&cfg->model, value) != 0) {
      char names[512];
      config_preset_names(names, sizeof names);
      return boost_err(err, "unknown model.preset '%s' (known: %s)", value, names);
    }
    return 0;
  case K_BOOL:
    if (!strcasecmp(value, "1") || !strcasecmp(value, "true") || !strcasecmp(value, "yes") || !strcasecmp(value, "on"))
      *(int *)base = 1;
    else if (!strcasecmp(value, "0") || !strcasecmp(value, "false") || !strcasecmp(value, "no") || !strcasecmp(value, "off"))
      *(int *)base = 0;
    else
      return boost_err(err, "bad value '%s' for %s: expected true or false", value, key);
    return 0;
  case K_INT:
  case K_I64: {
    long long v = strtoll(value, &end, 10);
    if (end == value || *end != '\0' || errno == ERANGE)
      return boost_err(err, "bad value '%s' for %s: expected an integer", value, key);
    if ((double)v < k->min || (double)v > k->max)
      return boost_err(err, "value %lld for %s is out of range [%.0f, %.0f]", v, key, k->min, k->max);
    if (k->type == K_INT)
      *(int *)base = (int)v;
    else
      *(int64_t *)base = v;
    return 0;
  }
  case K_ENUM:
    for (const enum_choice *c = k->choices; c->name; c++)
      if (!strcmp(value, c->name)) {
        *(int *)base = c->value;
        return 0;
      }
    {
      char names[256];
      config_choices_list(k, names, sizeof names);
      return boost_err(err, "bad value '%s' for %s: expected %s", value, key, names);
    }
  case K_FLOAT: {
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v))
      return boost_err(err, "bad value '%s' for %s: expected a number", value, key);
    if (v < k->min || v > k->max)
      return boost_err(err, "value %g for %s is out of range [%g, %g]", v, key, k->min, k->max);
    *(float *)base = (float)v;
    return 0;
  }
  }
  return boost_err(err, "internal: key %s has no type", key);
}

/* INI loading: the preset must win over nothing and lose to everything, so
 * the file is read twice: first only model.preset, then every other key. */
typedef struct {
  train_config *cfg;
  int preset_pass;
  boost_status *err;
  int failed;
  const char *path;
} ini_ctx;

static int config_ini_handler(void *user, const char *section, const char *name, const char *value) {
  ini_ctx *c = user;
  if (c->failed) return 0;
  char key[256];
  snprintf(key, sizeof key, "%s.%s", section, name);
  int is_preset = strcmp(key, "model.preset") == 0;
  if (is_preset != c->preset_pass) return 1;
  boost_status msg = {0};
  if (config_set(c->cfg, key, value, &msg) != 0) {
    boost_err(c->err, "%s: %s", c->path, msg.msg);
    c->failed = 1;
    return 0;
  }
  return 1;
}

/* skip_preset: the caller already applied a preset that outranks the file's. */
static int load_ini(train_config *cfg, const char *path, int skip_preset, boost_status *err) {
  FILE *f = fopen(path, "r");
  if (!f) return boost_err(err, "cannot open config file %s: %s", path, strerror(errno));
  for (int pass = skip_preset ? 0 : 1; pass >= 0; pass--) {
    ini_ctx c = {cfg, pass, err, 0, path};
    rewind(f);
    int rc = ini_parse_file(f, config_ini_handler, &c);
    if (c.failed || rc != 0) {
      fclose(f);
      return c.failed ? -1 : boost_err(err, "%s:%d: malformed line in config file", path, rc);
    }
  }
  fclose(f);
  return 0;
}

int config_load_file(train_config *cfg, const char *path, boost_status *err) {
  return load_ini(cfg, path, 0, err);
}

static int split_set(const char *set, char *key, size_t keylen, const char **value, boost_status *err) {
  const char *eq = strchr(set, '=');
  if (!eq || eq == set) return boost_err(err, "bad --set '%s': expected section.key=value", set);
  size_t n = (size_t)(eq - set);
  if (n >= keylen) return boost_err(err, "bad --set '%s': key too long", set);
  memcpy(key, set, n);
  key[n] = '\0';
  *value = eq + 1;
  return 0;
}

/* Precedence, lowest first: defaults, the preset (from --set, else from the
 * file), the file's other keys, the other --set keys. */
int config_resolve(train_config *cfg, const char *config_path, int nsets, char *const *sets, boost_status *err) {
  config_defaults(cfg);
  char key[256];
  const char *value = NULL;
  int preset_from_cli = 0;
  for (int i = 0; i < nsets; i++) {
    if (split_set(sets[i], key, sizeof key, &value, err) != 0) return -1;
    if (strcmp(key, "model.preset") == 0) {
      if (config_set(cfg, key, value, err) != 0) return -1;
      preset_from_cli = 1;
    }
  }
  if (config_path && load_ini(cfg, config_path, preset_from_cli, err) != 0) return -1;
  for (int i = 0; i < nsets; i++) {
    split_set(sets[i], key, sizeof key, &value, err);
    if (strcmp(key, "model.preset") != 0 && config_set(cfg, key, value, err) != 0) return -1;
  }
  return config_validate(cfg, err);
}

int config_parse_lowrank(model_config *m, boost_status *err) {
  if (!strcmp(m->lowrank, "all")) {
    m->lowrank_mask = (1u << PROJ_COUNT) - 1;
    return 0;
  }
  if (!strcmp(m->lowrank, "none") || m->lowrank[0] == '\0') {
    m->lowrank_mask = 0;
    return 0;
  }
  char buf[CONFIG_STR];
  snprintf(buf, sizeof buf, "%s", m->lowrank);
  unsigned mask = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    int found = -1;
    for (int p = 0; p < PROJ_COUNT; p++)
      if (!strcmp(tok, proj_names[p])) found = p;
    if (found < 0)
      return boost_err(err, "bad model.lowrank entry '%s': expected all, none or q,k,v,o,gate,up,down", tok);
    mask |= 1u << found;
  }
  m->lowrank_mask = mask;
  return 0;
}

int config_validate(train_config *cfg, boost_status *err) {
  model_config *m = &cfg->model;
  if (config_parse_lowrank(m, err) != 0) return -1;
  if (cfg->ckpt.every_auto && cfg->ckpt.every_seconds > 0)
    return boost_err(err, "ckpt.every = auto chooses the interval itself: unset ckpt.every_seconds (%g)",
                     cfg->ckpt.every_seconds);
  if ((cfg->ckpt.local.every > 0 || cfg->ckpt.local.every_auto) && !cfg->ckpt.dir[0])
    return boost_err(err, "ckpt.local_every=%s needs ckpt.dir: the local level sits in front of the "
                     "checkpoint files, which stay the durable level", cfg->ckpt.local.every_text);
  if (config_check_remote(cfg, err)) return -1;
  if (cfg->ckpt.local.dir[0] && cfg->ckpt.local.dir[0] != '/')
    return boost_err(err, "ckpt.local_dir '%s' must be an absolute path (node-local storage, e.g. /dev/shm/...)",
                     cfg->ckpt.local.dir);
  if (cfg->train.guard.warmup > cfg->train.guard.window)
    return boost_err(err, "train.guard_warmup %d exceeds train.guard_window %d: the z-scores need that many steps in the window",
                     cfg->train.guard.warmup, cfg->train.guard.window);
  if (cfg->train.guard.replay_every > 0 && cfg->train.guard.policy == GUARD_OFF)
    return boost_err(err, "train.replay_every=%d needs the step guard, which train.guard=off turns off: set "
                     "train.guard to skip or rollback, or train.replay_every to 0", cfg->train.guard.replay_every);
  if (cfg->train.guard.replay_every > 0 && cfg->train.device == DEVICE_CUDA)
    return boost_err(err, "train.replay_every needs bit-deterministic steps, which train.device=cuda does not "
                     "promise (docs/GUARD.md): set it to 0");
  if (m->d_model % m->n_heads != 0)
    return boost_err(err, "model.d_model %d is not divisible by model.n_heads %d", m->d_model, m->n_heads);
  int hd = m->d_model / m->n_heads;
  if (hd % 2 != 0) return boost_err(err, "head dimension %d (d_model/n_heads) must be even for RoPE", hd);
  for (int p = 0; p < PROJ_COUNT; p++) {
    if (!model_is_lowrank(m, p)) continue;
    int r = model_rank(m, p);
    int in = (p == PROJ_DOWN) ? m->ffn : m->d_model;
    int out = (p == PROJ_GATE || p == PROJ_UP) ? m->ffn : m->d_model;
    if (r > in || r > out)
      return boost_err(err, "model.%s %d exceeds the %s projection's dimensions (%d -> %d)",
                  p <= PROJ_O ? "rank_attn" : "rank_mlp", r, proj_names[p], in, out);
  }
  return 0;
}
