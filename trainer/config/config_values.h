/* The config keys whose values carry units or words, parsed once by
 * config_set (config.c) into their fields: ckpt.every and ckpt.local_every
 * (a step count or "auto"), ckpt.mtbf (a duration, s/m/h/d), ckpt.staging_limit (bytes with
 * K/M/G/T, or a percentage). Each returns 0, or -1 with one line naming the
 * key in err. */
#ifndef BOOST_CONFIG_VALUES_H
#define BOOST_CONFIG_VALUES_H

#include <stddef.h>

#include "config.h"
#include "status.h"

/* key: "ckpt.every", "ckpt.local_every" or "ckpt.mtbf" */
int config_parse_interval(train_config *cfg, const char *key, const char *value, boost_status *err);
/* ckpt.remote and its endpoint, one line for a bad value. */
int config_check_remote(const train_config *cfg, boost_status *err);
/* train.skip_batches: "a-b,c,..." into cfg->train.skip_ranges (ascending,
 * disjoint; empty: none). */
int config_parse_skip_batches(train_config *cfg, const char *value, boost_status *err);
int config_parse_staging_limit(train_config *cfg, const char *value, boost_status *err);

#endif
