#include "ckpt_peek.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"

/* Root attributes of one file into out; -1 with why. */
static int read_root(const char *path, ckpt_peek_info *out, boost_status *why) {
  ckpt_h5_quiet();
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    ckpt_h5_fail(why, "cannot open as HDF5");
    return -1;
  }
  int rc = ckpt_meta_read(f, &out->meta, why);
  const char *missing = rc == 0 ? ckpt_meta_missing(&out->meta, CKPT_META_RESUME) : NULL;
  if (missing) rc = -1, boost_err(why, "%s attribute missing or unreadable", missing);
  if (rc == 0 && ckpt_check_file_step(path, out->meta.run.step, why) != 0) rc = -1;
  if (rc == 0 && ckpt_layout_parse(out->meta.run.layout, &out->layout) != 0)
    rc = -1, boost_err(why, "layout attribute malformed");
  H5Fclose(f);
  H5Eclear2(H5E_DEFAULT);
  if (rc != 0) ckpt_meta_free(&out->meta);
  else snprintf(out->path, sizeof out->path, "%s", path);
  return rc;
}

int ckpt_peek(const char *dir, const ckpt_from *from, ckpt_peek_info *out, boost_status *err) {
  memset(out, 0, sizeof *out);
  ckpt_meta_init(&out->meta);
  boost_status why = {0};
  const char *search = dir;
  if (from->kind == CKPT_FROM_NONE) return 0;
  if (from->kind == CKPT_FROM_PATH) {
    struct stat st;
    if (stat(from->path, &st) != 0) {
      boost_err(err, "%s: no such file or directory", from->path);
      return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (read_root(from->path, out, &why) == 0) return 1;
      boost_err(err, "%s: %s", from->path, why.msg);
      return -1;
    }
    search = from->path;
  }
  if (!search || !search[0]) return 0;
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(search, &steps, &n, &why) != 0) return 0; /* no directory yet: nothing to resume */
  for (int k = 0; k < n; k++) {
    char name[64], path[PATH_MAX + 64];
    ckpt_file_name(name, sizeof name, steps[k]);
    snprintf(path, sizeof path, "%s/%s", search, name);
    if (read_root(path, out, &why) == 0) {
      free(steps);
      return 1;
    }
    size_t used = strlen(out->skipped);
    snprintf(out->skipped + used, sizeof out->skipped - used, "%s%s (%.511s)", used ? ", " : "", name, why.msg);
  }
  free(steps);
  return 0;
}

void ckpt_peek_free(ckpt_peek_info *p) { ckpt_meta_free(&p->meta); }
