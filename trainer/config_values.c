/* The config's tagged values with units, parsed once by config_set
 * (config_values.h). */
#include "config_values.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* ckpt.every (a step count or auto) and ckpt.mtbf (a duration with an
 * optional s/m/h/d suffix), tagged values parsed here once. */
int config_parse_interval(train_config *cfg, const char *key, const char *value, char *err, size_t errlen) {
  char *end = NULL;
  errno = 0;
  if (strcmp(key, "ckpt.every") == 0) {
    cfg->ckpt.every_auto = strcmp(value, "auto") == 0;
    if (cfg->ckpt.every_auto) {
      cfg->ckpt.every = 0;
      return 0;
    }
    const long long v = strtoll(value, &end, 10);
    if (end == value || *end != '\0' || errno == ERANGE || v < 0 || v > 1000000000)
      return boost_err(err, errlen, "bad value '%s' for ckpt.every: expected a step count 0..1000000000 or auto", value);
    cfg->ckpt.every = (int)v;
    return 0;
  }
  if (!value[0]) {
    cfg->ckpt.mtbf_s = 0;
    return 0;
  }
  double v = strtod(value, &end), unit = 1;
  if (end != value && *end && !end[1]) unit = *end == 's' ? 1 : *end == 'm' ? 60 : *end == 'h' ? 3600 : *end == 'd' ? 86400 : 0, end++;
  if (end == value || *end != '\0' || errno == ERANGE || unit == 0 || !(v > 0) || !isfinite(v * unit))
    return boost_err(err, errlen,
                     "bad value '%s' for ckpt.mtbf: expected a positive duration in seconds, or with s/m/h/d (e.g. 24h)",
                     value);
  cfg->ckpt.mtbf_s = v * unit;
  return 0;
}

/* ckpt.staging_limit: "25%", or bytes with an optional K/M/G/T suffix
 * (powers of 1024; "KiB", "KB" and "K" alike). */
int config_parse_staging_limit(train_config *cfg, const char *value, char *err, size_t errlen) {
  static const char *const units = "KMGT";
  char *end = NULL;
  errno = 0;
  const double v = strtod(value, &end);
  double bytes = 0, percent = 0;
  if (end != value && errno == 0 && isfinite(v) && v > 0) {
    if (!strcmp(end, "%")) {
      percent = v;
    } else {
      double scale = 1;
      const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
      if (u) {
        for (const char *q = units; q <= u; q++) scale *= 1024;
        end++;
        if (!strcasecmp(end, "iB") || !strcasecmp(end, "B")) end += strlen(end);
      } else if (!strcasecmp(end, "B")) {
        end++;
      }
      if (!*end) bytes = v * scale;
    }
  }
  if (bytes <= 0 && percent <= 0)
    return boost_err(err, errlen,
                     "bad value '%s' for ckpt.staging_limit: expected a positive size (512M, 2G, 1.5GiB, bytes) or "
                     "percentage of the rank's checkpointed state (25%%)",
                     value);
  cfg->ckpt.staging_limit.bytes = bytes;
  cfg->ckpt.staging_limit.percent = percent;
  return 0;
}
