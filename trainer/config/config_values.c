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

/* A step count 0..1000000000 or auto (ckpt.every, ckpt.local_every). */
static int parse_steps_or_auto(const char *key, const char *value, int *steps, int *is_auto, boost_status *err) {
  char *end = NULL;
  errno = 0;
  *is_auto = strcmp(value, "auto") == 0;
  if (*is_auto) {
    *steps = 0;
    return 0;
  }
  const long long v = strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE || v < 0 || v > 1000000000)
    return boost_err(err, "bad value '%s' for %s: expected a step count 0..1000000000 or auto", value, key);
  *steps = (int)v;
  return 0;
}

/* ckpt.every and ckpt.local_every (a step count or auto) and ckpt.mtbf (a
 * duration with an optional s/m/h/d suffix), tagged values parsed here
 * once. */
int config_parse_interval(train_config *cfg, const char *key, const char *value, boost_status *err) {
  if (strcmp(key, "ckpt.every") == 0)
    return parse_steps_or_auto(key, value, &cfg->ckpt.every, &cfg->ckpt.every_auto, err);
  if (strcmp(key, "ckpt.local_every") == 0)
    return parse_steps_or_auto(key, value, &cfg->ckpt.local.every, &cfg->ckpt.local.every_auto, err);
  char *end = NULL;
  errno = 0;
  if (!value[0]) {
    cfg->ckpt.mtbf_s = 0;
    return 0;
  }
  double v = strtod(value, &end), unit = 1;
  if (end != value && *end && !end[1]) unit = *end == 's' ? 1 : *end == 'm' ? 60 : *end == 'h' ? 3600 : *end == 'd' ? 86400 : 0, end++;
  if (end == value || *end != '\0' || errno == ERANGE || unit == 0 || !(v > 0) || !isfinite(v * unit))
    return boost_err(err,
                     "bad value '%s' for ckpt.mtbf: expected a positive duration in seconds, or with s/m/h/d (e.g. 24h)",
                     value);
  cfg->ckpt.mtbf_s = v * unit;
  return 0;
}

/* ckpt.staging_limit: "25%", or bytes with an optional K/M/G/T suffix
 * (powers of 1024; "KiB", "KB" and "K" alike). */
int config_parse_staging_limit(train_config *cfg, const char *value, boost_status *err) {
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
    return boost_err(err,
                     "bad value '%s' for ckpt.staging_limit: expected a positive size (512M, 2G, 1.5GiB, bytes) or "
                     "percentage of the rank's checkpointed state (25%%)",
                     value);
  cfg->ckpt.staging_limit.bytes = bytes;
  cfg->ckpt.staging_limit.percent = percent;
  return 0;
}

/* One "N" or "A-B" of train.skip_batches into r[0..1]; -1 when it is not. */
static int parse_range(const char *tok, int64_t r[2]) {
  char *end = NULL;
  errno = 0;
  const long long a = strtoll(tok, &end, 10);
  if (end == tok || a < 0 || errno == ERANGE || isspace((unsigned char)*tok) || *tok == '+') return -1;
  long long b = a;
  if (*end == '-') {
    const char *s = end + 1;
    if (!isdigit((unsigned char)*s)) return -1;
    b = strtoll(s, &end, 10);
    if (errno == ERANGE) return -1;
  }
  if (*end != '\0') return -1;
  r[0] = a;
  r[1] = b;
  return 0;
}

int config_parse_skip_batches(train_config *cfg, const char *value, boost_status *err) {
  char buf[CONFIG_STR];
  snprintf(buf, sizeof buf, "%s", value);
  int n = 0;
  char *next = buf[0] ? buf : NULL; /* empty: no range; else every comma separates one */
  while (next) {
    char *tok = next, *comma = strchr(next, ',');
    if (comma) *comma = '\0';
    next = comma ? comma + 1 : NULL;
    while (*tok == ' ') tok++;
    for (char *e = tok + strlen(tok); e > tok && e[-1] == ' ';) *--e = '\0';
    int64_t r[2];
    if (parse_range(tok, r) != 0)
      return boost_err(err, "bad train.skip_batches entry '%s': expected a batch index N or a range A-B", tok);
    if (r[1] < r[0])
      return boost_err(err, "train.skip_batches range %s runs backwards (write %lld-%lld)", tok, (long long)r[1],
                       (long long)r[0]);
    if (n > 0 && r[0] <= cfg->train.skip_ranges[n - 1][1])
      return boost_err(err, "train.skip_batches range %s %s the range before it (%lld-%lld): give ascending, "
                       "disjoint ranges", tok, r[1] >= cfg->train.skip_ranges[n - 1][0] ? "overlaps" : "comes before",
                       (long long)cfg->train.skip_ranges[n - 1][0], (long long)cfg->train.skip_ranges[n - 1][1]);
    if (n == CONFIG_MAX_SKIP_RANGES)
      return boost_err(err, "train.skip_batches holds more than %d ranges", CONFIG_MAX_SKIP_RANGES);
    cfg->train.skip_ranges[n][0] = r[0];
    cfg->train.skip_ranges[n][1] = r[1];
    n++;
  }
  cfg->train.n_skip_ranges = n;
  return 0;
}

/* The remote level's settings: the URL's shape and what it needs;
 * the bucket name, region and credentials are checked when the store is
 * opened (ckpt/remote/s3_client.c), which says the same in one line. */
int config_check_remote(const train_config *cfg, boost_status *err) {
  const char *url = cfg->ckpt.remote.url, *ep = cfg->ckpt.remote.endpoint;
  if (!url[0]) {
    if (ep[0] || cfg->ckpt.remote.region[0])
      return boost_err(err, "ckpt.remote_endpoint/ckpt.remote_region are set but ckpt.remote is empty: set "
                            "ckpt.remote = s3://BUCKET/PREFIX");
    return 0;
  }
  if (strncmp(url, "s3://", 5) != 0 || !url[5] || url[5] == '/')
    return boost_err(err, "ckpt.remote = '%s' is not an s3://BUCKET/PREFIX URL", url);
  if (!cfg->ckpt.dir[0])
    return boost_err(err, "ckpt.remote = %s needs ckpt.dir: the remote level uploads the committed checkpoint files "
                          "and downloads into ckpt.dir", url);
  if (ep[0] && strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
    return boost_err(err, "ckpt.remote_endpoint = '%s' is not an http:// or https:// URL", ep);
  return 0;
}
