/* The settings out: printed (the start's listing), as JSON (the copy a
 * checkpoint stores) and back, which keys describe the model, the key names,
 * the --help text. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "log.h"

void config_print(const train_config *cfg, const char *prefix) {
  char v[CONFIG_STR];
  for (int i = 0; i < config_nkeys; i++) {
    config_format_value(cfg, &config_keys[i], v, sizeof v);
    boost_log_info("%s%-24s = %s", prefix, config_keys[i].name, v);
  }
}

char *config_to_json(const train_config *cfg) {
  cJSON *root = cJSON_CreateObject();
  for (int i = 0; i < config_nkeys; i++) {
    const key_spec *k = &config_keys[i];
    const char *base = (const char *)cfg + k->offset;
    switch (k->type) {
    case K_STR: cJSON_AddStringToObject(root, k->name, base); break;
    case K_BOOL: cJSON_AddBoolToObject(root, k->name, *(const int *)base); break;
    case K_INT: cJSON_AddNumberToObject(root, k->name, *(const int *)base); break;
    case K_I64: cJSON_AddNumberToObject(root, k->name, (double)*(const int64_t *)base); break;
    case K_FLOAT: cJSON_AddNumberToObject(root, k->name, *(const float *)base); break;
    case K_ENUM: cJSON_AddStringToObject(root, k->name, config_choice_name(k, *(const int *)base)); break;
    }
  }
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}

int config_from_json(train_config *cfg, const char *json, int *unknown, boost_status *err) {
  cJSON *root = cJSON_Parse(json);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return boost_err(err, "stored config is not a JSON object");
  }
  if (unknown) *unknown = 0;
  char value[CONFIG_STR];
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    const key_spec *k = config_find_key(item->string);
    if (!k || !strcmp(k->name, "model.preset")) { /* a preset would reset the model block */
      if (!k && unknown) (*unknown)++;
      continue;
    }
    if (cJSON_IsString(item)) snprintf(value, sizeof value, "%s", item->valuestring);
    else if (cJSON_IsBool(item)) snprintf(value, sizeof value, "%s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsNumber(item) && (k->type == K_INT || k->type == K_I64)) snprintf(value, sizeof value, "%.0f", item->valuedouble);
    else if (cJSON_IsNumber(item)) snprintf(value, sizeof value, "%.17g", item->valuedouble);
    else {
      cJSON_Delete(root);
      return boost_err(err, "stored config: %s has a value of the wrong type", k->name);
    }
    boost_status msg = {0};
    if (config_set(cfg, k->name, value, &msg) != 0) {
      cJSON_Delete(root);
      return boost_err(err, "stored config: %s", msg.msg);
    }
  }
  const cJSON *preset = cJSON_GetObjectItemCaseSensitive(root, "model.preset");
  if (cJSON_IsString(preset)) snprintf(cfg->model.preset, sizeof cfg->model.preset, "%s", preset->valuestring);
  cJSON_Delete(root);
  return config_parse_lowrank(&cfg->model, err);
}

int config_is_model_key(const train_config *cfg, const char *key) {
  static const char *const keys[] = {"model.vocab",    "model.d_model",        "model.n_layers",   "model.n_heads",
                                     "model.ffn",      "model.lowrank",        "model.tie_embeddings",
                                     "model.rope_theta", "model.norm_eps",     NULL};
  for (int i = 0; keys[i]; i++)
    if (!strcmp(key, keys[i])) return 1;
  /* A rank matters only where a projection of its kind is low-rank. */
  const unsigned attn = (1u << PROJ_Q) | (1u << PROJ_K) | (1u << PROJ_V) | (1u << PROJ_O);
  if (!strcmp(key, "model.rank_attn")) return (cfg->model.lowrank_mask & attn) != 0;
  if (!strcmp(key, "model.rank_mlp")) return (cfg->model.lowrank_mask & ~attn) != 0;
  return 0;
}

int config_diff(const train_config *a, const train_config *b, int (*want)(const train_config *, const char *),
                char *out, size_t outlen) {
  char va[CONFIG_STR], vb[CONFIG_STR];
  int n = 0;
  if (outlen) out[0] = '\0';
  for (int i = 0; i < config_nkeys; i++) {
    const key_spec *k = &config_keys[i];
    if (want && !want(a, k->name)) continue;
    if (!strcmp(k->name, "model.lowrank") ? a->model.lowrank_mask == b->model.lowrank_mask : 0) continue;
    config_format_value(a, k, va, sizeof va);
    config_format_value(b, k, vb, sizeof vb);
    if (!strcmp(va, vb)) continue;
    size_t used = strlen(out);
    if (used < outlen) snprintf(out + used, outlen - used, "%s%s %s -> %s", n ? ", " : "", k->name, va, vb);
    n++;
  }
  return n;
}

static void allowed_values(const key_spec *k, char *out, size_t outlen) {
  switch (k->type) {
  case K_ENUM: config_choices_list(k, out, outlen); break;
  case K_BOOL: snprintf(out, outlen, "true or false"); break;
  case K_STR: snprintf(out, outlen, "text"); break;
  case K_INT:
  case K_I64: snprintf(out, outlen, "integer %.0f..%.0f", k->min, k->max); break;
  case K_FLOAT: snprintf(out, outlen, "number %g..%g", k->min, k->max); break;
  }
}

void config_print_help(FILE *f) {
  train_config defaults;
  config_defaults(&defaults);
  char def[CONFIG_STR], allowed[256];
  for (int i = 0; i < config_nkeys; i++) {
    const key_spec *k = &config_keys[i];
    config_format_value(&defaults, k, def, sizeof def);
    allowed_values(k, allowed, sizeof allowed);
    fprintf(f, "  %-22s %s\n  %-22s   default: %s; allowed: %s\n", k->name, k->help, "", def[0] ? def : "(empty)",
            allowed);
  }
}
