/* What the config module's files share: the key table (config_keys.c), one
 * row per key with its type, place in train_config, range, help and
 * choices; the lookups and formatting every reader and writer of keys uses. */
#ifndef BOOST_CONFIG_INTERNAL_H
#define BOOST_CONFIG_INTERNAL_H

#include <stddef.h>

#include "config.h"

typedef enum { K_INT, K_I64, K_FLOAT, K_STR, K_BOOL, K_ENUM } key_type;

/* The values a K_ENUM key accepts, NULL-terminated, each with its enum value. */
typedef struct {
  const char *name;
  int value;
} enum_choice;

typedef struct {
  const char *name; /* "section.key" */
  key_type type;
  size_t offset, size;
  double min, max; /* numeric range, inclusive */
  const char *help;
  const enum_choice *choices; /* K_ENUM */
} key_spec;

extern const key_spec config_keys[];
extern const int config_nkeys;

/* The key named name, or NULL. */
const key_spec *config_find_key(const char *name);
/* "a, b or c": a K_ENUM key's choices. */
void config_choices_list(const key_spec *k, char *out, size_t outlen);
/* The choice's name of value ("?" when none). */
const char *config_choice_name(const key_spec *k, int value);
/* The key's value in cfg, as a config file would say it. */
void config_format_value(const train_config *cfg, const key_spec *k, char *out, size_t outlen);
/* model.lowrank ("all", "none" or a list of projections) into its mask. */
int config_parse_lowrank(model_config *m, boost_status *err);

#endif
