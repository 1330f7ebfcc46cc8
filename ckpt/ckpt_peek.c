#include "ckpt_peek.h"

#include <cJSON.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"

static int layout_of(const char *json, ckpt_peek_info *out) {
  cJSON *o = cJSON_Parse(json);
  const cJSON *dp = cJSON_GetObjectItemCaseSensitive(o, "dp"), *tp = cJSON_GetObjectItemCaseSensitive(o, "tp"),
              *pp = cJSON_GetObjectItemCaseSensitive(o, "pp");
  int ok = cJSON_IsNumber(dp) && cJSON_IsNumber(tp) && cJSON_IsNumber(pp) && dp->valueint >= 1 && tp->valueint >= 1 &&
           pp->valueint >= 1;
  if (ok) out->layout_dp = dp->valueint, out->layout_tp = tp->valueint, out->layout_pp = pp->valueint;
  cJSON_Delete(o);
  return ok ? 0 : -1;
}

/* Root attributes of one file into out; -1 with why. */
static int read_root(const char *path, ckpt_peek_info *out, char *why, size_t whylen) {
  ckpt_h5_quiet();
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    ckpt_h5_error(why, whylen, "cannot open as HDF5");
    return -1;
  }
  char *format = NULL, *layout = NULL;
  int rc = -1;
  if (ckpt_attr_get_str(f, "format", &format) != 0 || strcmp(format, CKPT_FORMAT_NAME) != 0)
    snprintf(why, whylen, "not a boost checkpoint (no format attribute \"%s\")", CKPT_FORMAT_NAME);
  else if (ckpt_attr_get_i64(f, "format_version", &out->format_version) != 0)
    snprintf(why, whylen, "format_version attribute unreadable");
  else if (out->format_version != CKPT_FORMAT_VERSION)
    snprintf(why, whylen, "format version %lld, this boost reads version %d", (long long)out->format_version,
             CKPT_FORMAT_VERSION);
  else if (ckpt_attr_get_i64(f, "step", &out->step) != 0)
    snprintf(why, whylen, "step attribute unreadable");
  else if (ckpt_attr_get_str(f, "config", &out->config_json) != 0)
    snprintf(why, whylen, "config attribute unreadable");
  else if (ckpt_attr_get_str(f, "layout", &layout) != 0 || layout_of(layout, out) != 0)
    snprintf(why, whylen, "layout attribute unreadable or malformed");
  else
    rc = 0;
  free(format);
  free(layout);
  H5Fclose(f);
  H5Eclear2(H5E_DEFAULT);
  if (rc != 0) {
    free(out->config_json);
    out->config_json = NULL;
  } else {
    snprintf(out->path, sizeof out->path, "%s", path);
  }
  return rc;
}

int ckpt_peek(const char *dir, const char *resume, ckpt_peek_info *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  char why[512];
  const char *search = dir;
  if (strcmp(resume, "auto") != 0) {
    struct stat st;
    if (stat(resume, &st) != 0) {
      snprintf(err, errlen, "ckpt.resume=%s: no such file or directory", resume);
      return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (read_root(resume, out, why, sizeof why) == 0) return 1;
      snprintf(err, errlen, "ckpt.resume=%s: %s", resume, why);
      return -1;
    }
    search = resume;
  }
  if (!search || !search[0]) return 0;
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(search, &steps, &n, why, sizeof why) != 0) return 0; /* no directory yet: nothing to resume */
  for (int k = 0; k < n; k++) {
    char name[64], path[PATH_MAX + 64];
    ckpt_file_name(name, sizeof name, steps[k]);
    snprintf(path, sizeof path, "%s/%s", search, name);
    if (read_root(path, out, why, sizeof why) == 0) {
      free(steps);
      return 1;
    }
    size_t used = strlen(out->skipped);
    snprintf(out->skipped + used, sizeof out->skipped - used, "%s%s (%s)", used ? ", " : "", name, why);
  }
  free(steps);
  return 0;
}

void ckpt_peek_free(ckpt_peek_info *p) {
  free(p->config_json);
  p->config_json = NULL;
}
