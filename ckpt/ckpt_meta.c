#include "ckpt_meta.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_h5.h"

#define CKPT_META_ROW_(name, type, flags, absent) {#name, CKPT_META_T_##type, offsetof(ckpt_meta, name), flags, absent},
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

int ckpt_meta_write(hid_t obj, const ckpt_meta *m, char *why, size_t whylen) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++) {
    if (!ckpt_meta_has(m, f)) continue;
    const ckpt_meta_field *d = &ckpt_meta_fields[f];
    int rc = d->type == CKPT_META_T_I64   ? ckpt_attr_put_i64(obj, d->name, *FIELD(m, f, const int64_t))
             : d->type == CKPT_META_T_F64 ? ckpt_attr_put_f64(obj, d->name, *FIELD(m, f, const double))
                                          : ckpt_attr_put_str(obj, d->name, *FIELD(m, f, char *const));
    if (rc != 0) {
      char what[96];
      snprintf(what, sizeof what, "root attribute %s", d->name);
      ckpt_h5_error(why, whylen, what);
      return -1;
    }
  }
  return 0;
}

int ckpt_meta_read(hid_t obj, ckpt_meta *m, char *why, size_t whylen) {
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
  if (!m->format || strcmp(m->format, CKPT_FORMAT_NAME) != 0) {
    snprintf(why, whylen, "not a boost checkpoint (no root attribute format=\"%s\")", CKPT_FORMAT_NAME);
    return -1;
  }
  if (!ckpt_meta_has(m, CKPT_META_F_format_version)) {
    snprintf(why, whylen, "format_version attribute missing or unreadable");
    return -1;
  }
  if (m->format_version < 1 || m->format_version > CKPT_FORMAT_VERSION) {
    snprintf(why, whylen, "unknown checkpoint format version %lld (this boost reads versions 1 to %d)",
             (long long)m->format_version, CKPT_FORMAT_VERSION);
    return -1;
  }
  return 0;
}

const char *ckpt_meta_missing(const ckpt_meta *m, unsigned flags) {
  for (int f = 0; f < CKPT_META_NFIELDS; f++)
    if ((ckpt_meta_fields[f].flags & flags) == flags && !ckpt_meta_has(m, f)) return ckpt_meta_fields[f].name;
  return NULL;
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
  const char *rec = ckpt_meta_has(m, CKPT_META_F_resharded_from) ? m->resharded_from : m->layout;
  return ckpt_layout_parse(rec, &l) == 0 ? l.dp : -1;
}
