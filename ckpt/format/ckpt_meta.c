#include "ckpt_meta.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_h5.h"

#define CKPT_META_ROW_(group, name, type, flags, absent) \
  {#name, CKPT_META_T_##type, offsetof(ckpt_meta, group.name), flags, absent},
const ckpt_meta_field ckpt_meta_fields[CKPT_META_NFIELDS] = {CKPT_META_FIELDS(CKPT_META_ROW_)};
#undef CKPT_META_ROW_

#define FIELD(m, f, type) ((type *)((char *)(m) + ckpt_meta_fields[f].offset))

int ckpt_meta_field_index(const char *name) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++)
    if (!strcmp(ckpt_meta_fields[f].name, name)) return f;
  return -1;
}

void ckpt_meta_init(ckpt_meta *m) {
  memset(m, 0, sizeof *m);
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (ckpt_meta_fields[f].type == CKPT_META_T_I64) *FIELD(m, f, int64_t) = -1;
    if (ckpt_meta_fields[f].type == CKPT_META_T_F64) *FIELD(m, f, double) = -1;
  }
}

void ckpt_meta_free(ckpt_meta *m) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++)
    if (ckpt_meta_fields[f].type == CKPT_META_T_STR) free(*FIELD(m, f, char *));
  ckpt_meta_init(m);
}

int ckpt_meta_set_str(ckpt_meta *m, int field, const char *v) {
  char **p = FIELD(m, field, char *);
  free(*p);
  *p = v ? strdup(v) : NULL;
  m->present = *p ? m->present | 1u << field : m->present & ~(1u << field);
  return v && !*p ? -1 : 0;
}

int ckpt_meta_copy(ckpt_meta *dst, const ckpt_meta *src) {
  *dst = *src;
  int rc = 0;
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (ckpt_meta_fields[f].type != CKPT_META_T_STR) continue;
    char **p = FIELD(dst, f, char *);
    if (*p && !(*p = strdup(*p))) rc = -1;
  }
  return rc;
}

const char *ckpt_meta_str(const ckpt_meta *m, int field) {
  const char *v = ckpt_meta_has(m, field) ? *FIELD(m, field, char *const) : NULL;
  return v ? v : ckpt_meta_fields[field].absent;
}

int ckpt_meta_write(hid_t obj, const ckpt_meta *m, boost_status *why) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (!ckpt_meta_has(m, f)) continue;
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    int rc = d->type == CKPT_META_T_I64   ? ckpt_attr_put_i64(obj, d->name, *FIELD(m, f, const int64_t))
             : d->type == CKPT_META_T_F64 ? ckpt_attr_put_f64(obj, d->name, *FIELD(m, f, const double))
                                          : ckpt_attr_put_str(obj, d->name, *FIELD(m, f, char *const));
    if (rc != 0) {
      char what[96];
      snprintf(what, sizeof what, "root attribute %s", d->name);
      ckpt_h5_fail(why, what);
      return -1;
    }
  }
  return 0;
}

int ckpt_meta_read(hid_t obj, ckpt_meta *m, boost_status *why) {
  ckpt_meta_init(m);
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    if (ckpt_attr_exists(obj, d->name) != 1) continue;
    int rc = d->type == CKPT_META_T_I64   ? ckpt_attr_get_i64(obj, d->name, FIELD(m, f, int64_t))
             : d->type == CKPT_META_T_F64 ? ckpt_attr_get_f64(obj, d->name, FIELD(m, f, double))
                                          : ckpt_attr_get_str(obj, d->name, FIELD(m, f, char *));
    if (rc == 0) m->present |= 1u << f;
    else m->unreadable |= 1u << f;
    if (rc != 0 && d->type == CKPT_META_T_I64) *FIELD(m, f, int64_t) = -1;
    if (rc != 0 && d->type == CKPT_META_T_F64) *FIELD(m, f, double) = -1;
  }
  H5Eclear2(H5E_DEFAULT);
  if (!m->package.format || strcmp(m->package.format, CKPT_FORMAT_NAME) != 0) {
    boost_err(why, "not a boost checkpoint (no root attribute format=\"%s\")", CKPT_FORMAT_NAME);
    return -1;
  }
  if (!ckpt_meta_has(m, CKPT_META_F_format_version)) {
    boost_err(why, "format_version attribute missing or unreadable");
    return -1;
  }
  if (m->package.format_version < 1 || m->package.format_version > CKPT_FORMAT_VERSION) {
    boost_err(why, "unknown checkpoint format version %lld (this boost reads versions 1 to %d)",
             (long long)m->package.format_version, CKPT_FORMAT_VERSION);
    return -1;
  }
  return 0;
}

const char *ckpt_meta_missing(const ckpt_meta *m, unsigned flags) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++)
    if ((ckpt_meta_fields[f].flags & flags) == flags && !ckpt_meta_has(m, f)) return ckpt_meta_fields[f].name;
  return NULL;
}

#define CKPT_STATE_ROW_(name, type, cols, flags) {#name, CKPT_META_T_##type, cols, flags},
const ckpt_state_desc ckpt_state_sets[CKPT_STATE_NSETS] = {CKPT_STATE_SETS(CKPT_STATE_ROW_)};
#undef CKPT_STATE_ROW_
#define CKPT_START_NAME_(name) #name,
const char *const ckpt_start_columns[CKPT_START_NCOLS] = {CKPT_START_COLUMNS(CKPT_START_NAME_)};
#undef CKPT_START_NAME_
/* The format's codes: never reordered (files keep them); new ones go last. */
const char *const ckpt_tp_mode_codes[CKPT_TP_MODE_NCODES] = {"none", "btp", "vanilla", "megatron"};
const char *const ckpt_precision_codes[CKPT_PRECISION_NCODES] = {"fp32", "bf16"};

int ckpt_code_of(const char *const *codes, int n, const char *name) {
  for (int i = 0; name && i < n; i++)
    if (!strcmp(codes[i], name)) return i;
  return -1;
}

int ckpt_state_find(const char *path) {
  const char *grp = CKPT_GROUP_STATE "/";
  if (*path != '/') grp++;
  if (strncmp(path, grp, strlen(grp)) != 0) return -1;
  for (int k = 0; k < CKPT_STATE_NSETS; k++)
    if (!strcmp(path + strlen(grp), ckpt_state_sets[k].name)) return k;
  return -1;
}

int ckpt_state_width(int k) { return ckpt_state_sets[k].cols > 0 ? ckpt_state_sets[k].cols : 1; }
size_t ckpt_state_esize(int k) { return ckpt_state_sets[k].type == CKPT_META_T_F32 ? sizeof(float) : sizeof(double); }

/* "name(0=a,1=b)" into out at *used. */
static void put_coded(char *out, size_t outlen, size_t *used, const char *name, const char *const *codes, int n) {
  *used += (size_t)snprintf(out + *used, outlen - *used, "%s(", name);
  for (int i = 0; i < n && *used < outlen; i++)
    *used += (size_t)snprintf(out + *used, outlen - *used, "%s%d=%s", i ? "," : "", i, codes[i]);
  if (*used < outlen) *used += (size_t)snprintf(out + *used, outlen - *used, ")");
}

void ckpt_state_columns(int k, char *out, size_t outlen) {
  size_t used = 0;
  out[0] = 0;
  if (k == CKPT_STATE_val_loss_history) snprintf(out, outlen, "step loss");
  if (k == CKPT_STATE_guard_events) snprintf(out, outlen, "step batch reason(1=nonfinite,2=loss_z,4=gnorm_z,8=loss_ratio) loss grad_norm action(0=dropped,1=rollback,2=ended)");
  if (k == CKPT_STATE_skipped_batches) snprintf(out, outlen, "first_batch last_batch reason(0=config,1=rollback,2=flagged) step");
  if (k == CKPT_STATE_guard_replays)
    snprintf(out, outlen, "step batch trigger(0=replay_every,1=flagged) outcome(0=same,1=healed,2=ended) rank "
                          "where(0=none,1=local,2=reduced,3=global)");
  for (int c = 0; k == CKPT_STATE_run_starts && c < CKPT_START_NCOLS && used < outlen; c++) {
    if (c) used += (size_t)snprintf(out + used, outlen - used, " ");
    if (used >= outlen) break;
    if (c == CKPT_START_tp_mode) put_coded(out, outlen, &used, "tp_mode", ckpt_tp_mode_codes, CKPT_TP_MODE_NCODES);
    else if (c == CKPT_START_precision)
      put_coded(out, outlen, &used, "precision", ckpt_precision_codes, CKPT_PRECISION_NCODES);
    else used += (size_t)snprintf(out + used, outlen - used, "%s", ckpt_start_columns[c]);
  }
}

int ckpt_state_copy(ckpt_state *dst, const ckpt_state *src) {
  for (int k = 0; k < CKPT_STATE_NSETS; k++) {
    const size_t bytes = (size_t)src->set[k].rows * (size_t)ckpt_state_width(k) * ckpt_state_esize(k);
    void *p = realloc(dst->set[k].data, bytes ? bytes : 1);
    if (!p) {
      ckpt_state_free(dst);
      return -1;
    }
    if (bytes) memcpy(p, src->set[k].data, bytes);
    dst->set[k].data = p;
    dst->set[k].rows = src->set[k].rows;
  }
  return 0;
}

void ckpt_state_free(ckpt_state *st) {
  for (int k = 0; k < CKPT_STATE_NSETS; k++) free(st->set[k].data);
  memset(st, 0, sizeof *st);
}

char *ckpt_layout_json(const ckpt_layout *l) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "world_size", l->world_size);
  cJSON_AddNumberToObject(o, "dp", l->dp);
  cJSON_AddNumberToObject(o, "tp", l->tp);
  cJSON_AddNumberToObject(o, "pp", l->pp);
  cJSON_AddStringToObject(o, "tp_mode", l->tp_mode);
  cJSON_AddNumberToObject(o, "zero", l->zero);
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return txt;
}

/* A positive integer member of o (0 when absent or anything else). */
static int positive(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(x) && x->valuedouble >= 1 && x->valuedouble <= 1e9 && x->valuedouble == (double)(int)x->valuedouble
             ? (int)x->valuedouble
             : 0;
}

int ckpt_layout_parse(const char *json, ckpt_layout *l) {
  memset(l, 0, sizeof *l);
  cJSON *o = json ? cJSON_Parse(json) : NULL;
  l->dp = positive(o, "dp"), l->tp = positive(o, "tp"), l->pp = positive(o, "pp");
  l->world_size = cJSON_GetObjectItemCaseSensitive(o, "world_size") ? positive(o, "world_size") : -1;
  l->zero = positive(o, "zero");
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "tp_mode");
  if (cJSON_IsString(mode)) snprintf(l->tp_mode, sizeof l->tp_mode, "%s", mode->valuestring);
  const int ok = cJSON_IsObject(o) && l->dp && l->tp && l->pp && l->world_size != 0;
  cJSON_Delete(o);
  return ok ? 0 : -1;
}

int ckpt_meta_config_dp(const ckpt_meta *m) {
  ckpt_layout l;
  const char *rec = ckpt_meta_has(m, CKPT_META_F_resharded_from) ? m->reshard.resharded_from : m->run.layout;
  return ckpt_layout_parse(rec, &l) == 0 ? l.dp : -1;
}
