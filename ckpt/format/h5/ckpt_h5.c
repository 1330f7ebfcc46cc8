#include "ckpt_h5.h"

#include "check.h"
#include "ckpt_hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ckpt_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

typedef struct {
  char *out;
  size_t len;
  int n;
} walk_ctx;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  (void)n;
  walk_ctx *w = data;
  if (w->n >= 2) return 0;
  size_t used = strlen(w->out);
  if (used + 8 >= w->len) return 0;
  const char *desc = e->desc && e->desc[0] ? e->desc : "(no description)";
  snprintf(w->out + used, w->len - used, "%s%s (%s)", w->n ? " <- " : ": ", desc, e->func_name ? e->func_name : "?");
  w->n++;
  return 0;
}

void ckpt_h5_error(char *out, size_t outlen, const char *what) {
  if (!outlen) return;
  snprintf(out, outlen, "%s", what);
  walk_ctx w = {out, outlen, 0};
  /* UPWARD: the innermost error (where it was detected) first. */
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
  if (w.n == 0) {
    size_t used = strlen(out);
    snprintf(out + used, outlen - used, ": failed");
  }
  /* Strip newlines some MPI error strings carry. */
  for (char *p = out; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  H5Eclear2(H5E_DEFAULT);
}

int ckpt_h5_fail(boost_status *err, const char *what) {
  if (err) {
    ckpt_h5_error(err->msg, sizeof err->msg, what);
    err->failed = 1;
  } else {
    H5Eclear2(H5E_DEFAULT);
  }
  return -1;
}

static int put_scalar(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, const void *v) {
  hid_t space = H5Screate(H5S_SCALAR);
  if (space < 0) return -1;
  hid_t a = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  int rc = -1;
  if (a >= 0) {
    rc = H5Awrite(a, mem_type, v) < 0 ? -1 : 0;
    if (H5Aclose(a) < 0) rc = -1;
  }
  H5Sclose(space);
  return rc;
}

int ckpt_attr_put_i64(hid_t obj, const char *name, int64_t v) {
  return put_scalar(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
int ckpt_attr_put_u64(hid_t obj, const char *name, uint64_t v) {
  return put_scalar(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}
int ckpt_attr_put_f64(hid_t obj, const char *name, double v) {
  return put_scalar(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

int ckpt_attr_put_str(hid_t obj, const char *name, const char *v) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0) return -1;
  size_t n = strlen(v);
  int rc = -1;
  if (H5Tset_size(t, n ? n : 1) >= 0 && H5Tset_strpad(t, H5T_STR_NULLPAD) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
    rc = put_scalar(obj, name, t, t, n ? v : "");
  H5Tclose(t);
  return rc;
}

static int get_scalar(hid_t obj, const char *name, hid_t mem_type, void *v) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return -1;
  hid_t space = H5Aget_space(a);
  int rc = -1;
  if (space >= 0 && H5Sget_simple_extent_npoints(space) == 1) rc = H5Aread(a, mem_type, v) < 0 ? -1 : 0;
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return rc;
}

int ckpt_attr_get_i64(hid_t obj, const char *name, int64_t *v) { return get_scalar(obj, name, H5T_NATIVE_INT64, v); }
int ckpt_attr_get_u64(hid_t obj, const char *name, uint64_t *v) { return get_scalar(obj, name, H5T_NATIVE_UINT64, v); }
int ckpt_attr_get_f64(hid_t obj, const char *name, double *v) { return get_scalar(obj, name, H5T_NATIVE_DOUBLE, v); }

int ckpt_attr_get_str(hid_t obj, const char *name, char **v) {
  *v = NULL;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return -1;
  hid_t ft = H5Aget_type(a);
  int rc = -1;
  if (ft >= 0 && H5Tget_class(ft) == H5T_STRING) {
    if (H5Tis_variable_str(ft) > 0) {
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, H5T_VARIABLE);
      char *s = NULL;
      if (H5Aread(a, mt, &s) >= 0 && s) {
        *v = strdup(s);
        H5free_memory(s);
        rc = *v ? 0 : -1;
      }
      H5Tclose(mt);
    } else {
      size_t n = H5Tget_size(ft);
      char *s = calloc(n + 1, 1);
      hid_t mt = H5Tcopy(ft);
      if (s && mt >= 0 && H5Aread(a, mt, s) >= 0) {
        *v = s;
        rc = 0;
      } else {
        free(s);
      }
      if (mt >= 0) H5Tclose(mt);
    }
  }
  if (ft >= 0) H5Tclose(ft);
  H5Aclose(a);
  return rc;
}

int ckpt_attr_exists(hid_t obj, const char *name) {
  htri_t e = H5Aexists(obj, name);
  return e < 0 ? -1 : (int)(e > 0);
}

void ckpt_chunk_dims(int ndim, const int64_t *shape, hsize_t *chunk) {
  /* From the last dimension: whole trailing dims while they fit the budget,
   * then a partial extent, then 1. */
  int64_t budget = CKPT_CHUNK_ELEMS;
  for (int d = ndim - 1; d >= 0; d--) {
    const int64_t n = shape[d] < 1 ? 1 : shape[d];
    if (budget <= 1) {
      chunk[d] = 1;
    } else if (n <= budget) {
      chunk[d] = (hsize_t)n;
      budget /= n;
    } else {
      chunk[d] = (hsize_t)budget;
      budget = 1;
    }
  }
}

void ckpt_chunk_dims_cut(int ndim, const int64_t *shape, const int64_t *cut, hsize_t *chunk) {
  int64_t cell[8];
  BOOST_ASSERT(ndim <= 8); /* tensors have at most TENSOR_MAX_DIMS, activations 3 */
  for (int d = 0; d < ndim; d++) cell[d] = cut[d] > 0 ? cut[d] : shape[d];
  ckpt_chunk_dims(ndim, cell, chunk);
  for (int d = 0; d < ndim; d++)
    while (cut[d] > 0 && cut[d] % (int64_t)chunk[d]) chunk[d]--;
}

int64_t ckpt_gcd64(int64_t a, int64_t b) {
  while (b) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

void ckpt_chunk_cut_add(int ndim, const int64_t *shape, const int64_t *start, const int64_t *count, int64_t *cut) {
  for (int d = 0; d < ndim; d++) {
    const int64_t b[2] = {start[d], start[d] + count[d]};
    for (int k = 0; k < 2; k++)
      if (b[k] > 0 && b[k] < shape[d]) cut[d] = ckpt_gcd64(cut[d], b[k]);
  }
}

hid_t ckpt_bf16_type(void) {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  if (t < 0) return -1;
  /* Shrink the float32 type to its top 16 bits: fields first, then the
   * offset, precision and size that the fields must fit in. */
  if (H5Tset_fields(t, 15, 7, 8, 0, 7) < 0 || H5Tset_offset(t, 0) < 0 || H5Tset_precision(t, 16) < 0 ||
      H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 127) < 0) {
    H5Tclose(t);
    return -1;
  }
  return t;
}

int ckpt_type_is_bf16(hid_t type) {
  if (type < 0 || H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2) return 0;
  size_t spos, epos, esize, mpos, msize;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return 0;
  return spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 && H5Tget_ebias(type) == 127 &&
         H5Tget_order(type) == H5T_ORDER_LE;
}

void ckpt_round_bf16(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) u |= 0x00400000u; /* NaN: keep it quiet and NaN */
    else u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&v[i], &u, sizeof u);
  }
}

typedef struct {
  const char *group;
  boost_status *why;
  int bad;
} group_check;

static herr_t check_one_dataset(hid_t g, const char *name, const H5L_info_t *info, void *data) {
  (void)info;
  group_check *a = data;
  hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
  hid_t space = d >= 0 ? H5Dget_space(d) : -1, type = d >= 0 ? H5Dget_type(d) : -1;
  const hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  const size_t esz = type >= 0 ? H5Tget_size(type) : 0;
  const int is_float = type >= 0 && H5Tget_class(type) == H5T_FLOAT;
  const hid_t mtype = esz == 8 ? (is_float ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64) : (is_float ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32);
  uint64_t stored = 0;
  void *buf = n >= 0 && (esz == 4 || esz == 8 || (is_float && esz == 2)) ? malloc((size_t)n * 8 + 8) : NULL;
  int ok = buf && ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &stored) == 0 &&
           (n == 0 || H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
  if (ok) ok = (esz == 8 ? ckpt_hash_run64(buf, (size_t)n, 0) : ckpt_hash_run32(buf, (size_t)n, 0)) == stored;
  if (!ok && !a->bad) {
    char what[512];
    snprintf(what, sizeof what, "%s/%s: unreadable or checksum mismatch", a->group, name);
    ckpt_h5_fail(a->why, what);
  }
  a->bad |= !ok;
  free(buf);
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  return 0;
}

int ckpt_check_group(hid_t file, const char *group, boost_status *why) {
  group_check a = {.group = group, .why = why};
  hid_t g = H5Gopen2(file, group, H5P_DEFAULT);
  H5O_info_t info;
  if (g < 0 || H5Oget_info2(g, &info, H5O_INFO_ALL) < 0 ||
      H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, check_one_dataset, &a) < 0) {
    if (!a.bad) {
      char what[512];
      snprintf(what, sizeof what, "%s: group unreadable", group);
      ckpt_h5_fail(why, what);
    }
    a.bad = 1;
  }
  if (g >= 0) H5Gclose(g);
  H5Eclear2(H5E_DEFAULT);
  return a.bad ? -1 : 0;
}

void ckpt_file_name(char *out, size_t outlen, int64_t step) { snprintf(out, outlen, "step_%08lld.h5", (long long)step); }

int64_t ckpt_parse_file_name(const char *name) {
  if (strncmp(name, "step_", 5) != 0) return -1;
  const char *p = name + 5;
  int64_t v = 0;
  int digits = 0;
  while (*p >= '0' && *p <= '9') {
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (*p++ - '0');
    digits++;
  }
  if (digits < 8 || strcmp(p, ".h5") != 0) return -1;
  return v;
}

int ckpt_check_file_step(const char *path, int64_t step, boost_status *why) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const int64_t named = ckpt_parse_file_name(base);
  if (named < 0 || named == step) return 0;
  boost_err(why, "its name says step %lld but it holds step %lld (a renamed copy?)", (long long)named,
           (long long)step);
  return -1;
}
