#include "resume_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "save_request.h"
#include "ckpt_local.h"
#include "ckpt_peek.h"
#include "ckpt_run_id.h"
#include "comm.h"
#include "util.h"

int config_dp_degree(const train_config *cfg, int world_size) {
  const int dp = cfg->parallel.dp, tp = cfg->parallel.tp, pp = cfg->parallel.pp;
  return dp * tp * pp == 1 ? world_size : dp;
}

/* Rank 0's verdict and the stored config reach every rank. */
typedef struct {
  int found; /* 1 resume, 0 nothing, -1 error */
  int64_t step;
  ckpt_layout layout;   /* the writer's */
  int has_global_batch; /* the file has the global_batch attribute (an older writer's has not) */
  int64_t global_batch;
  int config_dp;        /* the data-parallel degree its stored config ran with (ckpt_meta_config_dp) */
  char path[PATH_MAX];
  char msg[2048];
} peek_result;

static char *bcast_string(char *s, int root_has, MPI_Comm world) {
  int n = root_has && s ? (int)strlen(s) + 1 : 0;
  comm_control_bcast(world, COMM_WORLD, "resume plan agreement", &n, (int)sizeof n, 0);
  if (!n) return NULL;
  int rank;
  MPI_Comm_rank(world, &rank);
  if (rank != 0) s = calloc((size_t)n, 1);
  comm_control_bcast(world, COMM_WORLD, "resume plan agreement", s, n, 0);
  return s;
}

/* The local level (rank 0's newest step) stands in for the file when it is
 * not older: the same checks (the model, the global batch) run on what the
 * start will most likely resume. */
static void peek_local(const ckpt_settings *set, peek_result *r, ckpt_peek_info *info) {
  ckpt_meta lm;
  char where[PATH_MAX - 32]; /* with "the local level " it fits the path */
  ckpt_layout lay;
  char run_id[CKPT_RUN_ID_HEX + 1]; /* only this run's steps: the newest file's identity, else the marker's */
  ckpt_run_id_expected(set->dir, r->found == 1 ? &info->meta : NULL, run_id);
  if (ckpt_local_peek(set, run_id, &lm, where, sizeof where) != 1) return;
  if ((r->found == 1 && lm.run.step < info->meta.run.step) || !ckpt_meta_has(&lm, CKPT_META_F_layout) ||
      ckpt_layout_parse(lm.run.layout, &lay) != 0) {
    ckpt_meta_free(&lm);
    return;
  }
  ckpt_meta_free(&info->meta);
  info->meta = lm;
  info->layout = lay;
  snprintf(info->path, sizeof info->path, "the local level %s", where);
  info->skipped[0] = 0;
  r->found = 1;
}

static char *peek_everywhere(const train_config *cfg, MPI_Comm world, peek_result *r) {
  int rank;
  MPI_Comm_rank(world, &rank);
  memset(r, 0, sizeof *r);
  ckpt_peek_info info;
  memset(&info, 0, sizeof info);
  if (rank == 0) {
    ckpt_settings set;
    trainer_ckpt_settings(cfg, &set);
    boost_status why = {0};
    r->found = ckpt_peek(cfg->ckpt.dir, &set.resume, &info, &why);
    if (r->found < 0) boost_msgf(r->msg, sizeof r->msg, "ckpt.resume=%s", why.msg);
    if (r->found >= 0 && set.resume.kind == CKPT_FROM_AUTO) peek_local(&set, r, &info);
    if (r->found == 1) {
      r->step = info.meta.run.step;
      r->layout = info.layout;
      r->has_global_batch = ckpt_meta_has(&info.meta, CKPT_META_F_global_batch);
      r->global_batch = info.meta.run.global_batch;
      r->config_dp = ckpt_meta_config_dp(&info.meta);
      snprintf(r->path, sizeof r->path, "%s", info.path);
      if (info.skipped[0]) snprintf(r->msg, sizeof r->msg, "passed over %s", info.skipped);
    } else if (r->found == 0 && info.skipped[0]) {
      r->found = -1;
      snprintf(r->msg, sizeof r->msg,
               "%s holds checkpoints but none can be read: %.1000s. Fix or move them, or set ckpt.resume=none to start "
               "over (the unreadable files are kept)",
               cfg->ckpt.dir[0] ? cfg->ckpt.dir : cfg->ckpt.resume.text, info.skipped);
    }
  }
  comm_control_bcast(world, COMM_WORLD, "resume plan agreement", r, (int)sizeof *r, 0);
  char *json = bcast_string(info.meta.run.config, r->found == 1, world); /* rank 0: info's own string */
  info.meta.run.config = NULL;                                         /* now json's */
  ckpt_peek_free(&info);
  return json;
}

/* batch * accum * dp == global, preferring to keep accum, then batch, then
 * the smallest accum whose batch is no larger than the config's. */
static int split_global_batch(long global, int dp, int batch, int accum, int *nb, int *na) {
  if (global % ((long)accum * dp) == 0) {
    *nb = (int)(global / ((long)accum * dp)), *na = accum;
    return 0;
  }
  if (global % ((long)batch * dp) == 0) {
    *nb = batch, *na = (int)(global / ((long)batch * dp));
    return 0;
  }
  for (long a = 1; a <= global / dp; a++)
    if (global % (a * dp) == 0 && global / (a * dp) <= batch) {
      *nb = (int)(global / (a * dp)), *na = (int)a;
      return 0;
    }
  return -1;
}

/* The attribute when the file has it; else the stored config's split times
 * the data-parallel degree it ran with. -1 when neither is usable. */
static long global_batch_of(int has, int64_t attr, int config_dp, const train_config *stored) {
  if (has) return attr > 0 ? (long)attr : -1;
  return config_dp > 0 ? (long)stored->train.batch_size * stored->train.grad_accum * config_dp : -1;
}

long resume_global_batch(const ckpt_meta *m, const train_config *stored) {
  return global_batch_of(ckpt_meta_has(m, CKPT_META_F_global_batch), m->run.global_batch, ckpt_meta_config_dp(m), stored);
}

static int keep_global_batch(train_config *cfg, long was, int dp, char *note, size_t notelen, boost_status *err) {
  const long now = (long)cfg->train.batch_size * cfg->train.grad_accum * dp;
  size_t used = strlen(note);
  if (was == now) return 0;
  if (cfg->ckpt.resume_batch == RESUME_BATCH_CONFIG) {
    snprintf(note + used, notelen - used, "; global batch %ld -> %ld (ckpt.resume_batch=config)", was, now);
    return 0;
  }
  int nb, na;
  if (split_global_batch(was, dp, cfg->train.batch_size, cfg->train.grad_accum, &nb, &na) != 0) {
    boost_err(err,
             "cannot keep the checkpoint's global batch of %ld sequences over parallel.dp=%d (not a multiple); "
             "choose another layout or set ckpt.resume_batch=config to train with a global batch of %ld",
             was, dp, now);
    return -1;
  }
  snprintf(note + used, notelen - used, "; global batch %ld kept: batch_size %d x grad_accum %d per replica over dp %d "
           "(config said %d x %d)", was, nb, na, dp, cfg->train.batch_size, cfg->train.grad_accum);
  cfg->train.batch_size = nb;
  cfg->train.grad_accum = na;
  return 0;
}

static int is_training_key(const train_config *cfg, const char *key) {
  return !config_is_model_key(cfg, key) && strcmp(key, "model.preset") != 0 && strcmp(key, "model.init_std") != 0;
}

int resume_plan(train_config *cfg, MPI_Comm world, char *note, size_t notelen, boost_status *err) {
  note[0] = '\0';
  if (cfg->ckpt.resume.kind == RESUME_NONE || (!cfg->ckpt.dir[0] && cfg->ckpt.resume.kind == RESUME_AUTO)) return 0;
  int world_size;
  MPI_Comm_size(world, &world_size);
  peek_result r;
  char *json = peek_everywhere(cfg, world, &r);
  if (r.found < 0) {
    boost_err(err, "%s", r.msg);
    return -1;
  }
  if (r.found == 0) return 0;
  train_config stored = *cfg;
  int rc = config_from_json(&stored, json, NULL, err);
  free(json);
  if (rc != 0) {
    boost_status_append(err, " (in %s)", r.path);
    return -1;
  }
  char diff[2048];
  if (config_diff(&stored, cfg, config_is_model_key, diff, sizeof diff) > 0) {
    boost_err(err, "%s holds a different model: %s (set ckpt.resume=none to start a new run elsewhere)", r.path,
             diff);
    return -1;
  }
  const int dp = config_dp_degree(cfg, world_size);
  snprintf(note, notelen, "will resume %s (step %lld); layout dp=%d tp=%d pp=%d -> dp=%d tp=%d pp=%d", r.path,
           (long long)r.step, r.layout.dp, r.layout.tp, r.layout.pp, dp, cfg->parallel.tp, cfg->parallel.pp);
  if (r.msg[0]) snprintf(note + strlen(note), notelen - strlen(note), "; %s", r.msg);
  const long was = global_batch_of(r.has_global_batch, r.global_batch, r.config_dp, &stored);
  if (was < 0) {
    if (r.has_global_batch)
      boost_err(err, "%s: global_batch attribute %lld is not a positive number of sequences (damaged file?)",
               r.path, (long long)r.global_batch);
    else
      boost_err(err, "%s: its global batch cannot be told: no global_batch attribute and a malformed "
               "resharded_from layout record (damaged file?)", r.path);
    return -1;
  }
  if (keep_global_batch(cfg, was, dp, note, notelen, err) != 0) return -1;
  if (config_diff(&stored, cfg, is_training_key, diff, sizeof diff) > 0)
    snprintf(note + strlen(note), notelen - strlen(note), "; settings changed since the checkpoint: %s", diff);
  return 0;
}
