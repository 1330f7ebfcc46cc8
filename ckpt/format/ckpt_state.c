/* The training state's datasets inside the package (the schema's table,
 * ckpt_meta.h CKPT_STATE_SETS): their checksums, and their read on resume.
 * They are small (a value per step, a row per validation or start): rank 0
 * writes them whole, every rank reads them whole. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"

uint64_t ckpt_state_hash(int k, const ckpt_series *set) {
  const size_t n = (size_t)set->rows * (size_t)ckpt_state_width(k);
  if (n == 0) return 0;
  return ckpt_state_sets[k].type == CKPT_META_T_F32 ? ckpt_hash_run32(set->data, n, 0) : ckpt_hash_run64(set->data, n, 0);
}

/* 1 when /state/<name> exists, 0 when it does not, -1 when HDF5 cannot tell. */
static int set_exists(hid_t f, const char *path) {
  htri_t g = H5Lexists(f, CKPT_GROUP_STATE, H5P_DEFAULT);
  htri_t e = g > 0 ? H5Lexists(f, path, H5P_DEFAULT) : g;
  H5Eclear2(H5E_DEFAULT);
  return e > 0 ? 1 : e == 0 ? 0 : -1;
}

int ckpt_state_read(hid_t f, hid_t dxpl, int k, ckpt_series *out, uint64_t *stored, uint64_t *sum, boost_status *err) {
  const ckpt_state_desc *desc = &ckpt_state_sets[k];
  char path[96];
  boost_msgf(path, sizeof path, CKPT_GROUP_STATE "/%s", desc->name);
  memset(out, 0, sizeof *out);
  *stored = *sum = 0;
  const int exists = set_exists(f, path);
  if (exists == 0 && !(desc->flags & CKPT_META_RESUME)) return 0; /* a file older than the set */
  if (exists == 0) return boost_err(err, "%s: missing", path);
  if (exists < 0) return boost_err(err, "%s: cannot be looked up (damaged group index)", path);
  hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
  hid_t space = d >= 0 ? H5Dget_space(d) : -1;
  hsize_t dims[2] = {0, 0};
  const int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  int rc = 0;
  if (ndim < 0 || ndim > 2 || H5Sget_simple_extent_dims(space, dims, NULL) < 0 ||
      ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, stored) < 0) {
    ckpt_h5_fail(err, path);
    rc = -1;
  } else if (ndim != (desc->cols > 0 ? 2 : 1) || (desc->cols > 0 && dims[1] != (hsize_t)desc->cols)) {
    rc = desc->cols > 0 ? boost_err(err, "%s: shape is not [n, %d]", path, desc->cols)
                        : boost_err(err, "%s: shape is not [n]", path);
  } else {
    out->rows = (int64_t)dims[0];
    const size_t n = (size_t)dims[0] * (size_t)ckpt_state_width(k);
    out->data = malloc(n * ckpt_state_esize(k) + 8);
    const hid_t mem = desc->type == CKPT_META_T_F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    if (!out->data || (n > 0 && H5Dread(d, mem, H5S_ALL, H5S_ALL, dxpl, out->data) < 0)) {
      ckpt_h5_fail(err, path);
      boost_status_append(err, " (read failed: corrupt data?)");
      rc = -1;
    } else {
      *sum = ckpt_state_hash(k, out);
    }
  }
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  if (rc != 0) {
    free(out->data);
    memset(out, 0, sizeof *out);
  }
  return rc;
}
