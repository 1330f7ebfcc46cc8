/* The checkpoint reader every tool shares: opening a checkpoint defensively
 * and reading its datasets.
 * Every HDF5 call's result is checked; HDF5's automatic error printing is off
 * and errors become one line (ckpt_h5_error). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "h5z_zstd.h"
#include "ckpt_reader.h"

static const char *category_of(const char *path) {
  if (strncmp(path, "/model/", 7) == 0) return "weights";
  if (strncmp(path, "/optim/", 7) == 0) return "moments";
  if (strncmp(path, "/activations/", 13) == 0) return "activations";
  if (strncmp(path, "/state/", 7) == 0) return "state";
  return "other";
}

static void describe_type(hid_t type, ckr_dset *d) {
  size_t esz = type >= 0 ? H5Tget_size(type) : 0;
  H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  int le = type >= 0 && H5Tget_order(type) == H5T_ORDER_LE;
  if (ckpt_type_is_bf16(type)) snprintf(d->dtype, sizeof d->dtype, "bfloat16");
  else if (cls == H5T_FLOAT && le && (esz == 4 || esz == 8)) snprintf(d->dtype, sizeof d->dtype, "float%zu", 8 * esz);
  else if (cls == H5T_INTEGER && le && (esz == 4 || esz == 8))
    snprintf(d->dtype, sizeof d->dtype, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * esz);
  else snprintf(d->dtype, sizeof d->dtype, "other");
  d->raw_bytes = ckr_numel(d) * (double)esz;
}

static int add_dataset(ckr_ckpt *c, hid_t o, const char *name) {
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 256;
    ckr_dset *nd = realloc(c->d, (size_t)cap * sizeof *nd);
    if (!nd) return -1;
    c->d = nd, c->cap = cap;
  }
  ckr_dset *d = &c->d[c->n++];
  memset(d, 0, sizeof *d);
  snprintf(d->path, sizeof d->path, "/%s", name);
  snprintf(d->category, sizeof d->category, "%s", category_of(d->path));
  hid_t space = H5Dget_space(o), type = H5Dget_type(o);
  int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  if (nd < 0 || nd > 8 || (nd > 0 && H5Sget_simple_extent_dims(space, d->dims, NULL) < 0)) d->ndim = -1;
  else d->ndim = nd;
  if (d->ndim >= 0) describe_type(type, d);
  else snprintf(d->dtype, sizeof d->dtype, "other");
  hsize_t st = H5Dget_storage_size(o);
  d->stored_bytes = (double)st;
  d->has_checksum = ckpt_attr_exists(o, CKPT_ATTR_CHECKSUM) == 1 && ckpt_attr_get_u64(o, CKPT_ATTR_CHECKSUM, &d->checksum) == 0;
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  H5Eclear2(H5E_DEFAULT);
  return 0;
}

static herr_t visit_cb(hid_t root, const char *name, const H5L_info_t *info, void *data) {
  ckr_ckpt *c = data;
  if (info->type != H5L_TYPE_HARD) {
    snprintf(c->walk_error, sizeof c->walk_error, "/%s: not a hard link (soft or external links are not part of the format)", name);
    return -1;
  }
  hid_t o = H5Oopen(root, name, H5P_DEFAULT);
  if (o < 0) {
    char what[700];
    snprintf(what, sizeof what, "/%.600s: cannot open object (corrupt metadata?)", name);
    ckpt_h5_error(c->walk_error, sizeof c->walk_error, what);
    return -1;
  }
  H5I_type_t t = H5Iget_type(o);
  int rc = 0;
  if (t == H5I_DATASET) rc = add_dataset(c, o, name);
  else if (t != H5I_GROUP) {
    snprintf(c->walk_error, sizeof c->walk_error, "/%.600s: neither a group nor a dataset", name);
    rc = -1;
  }
  H5Oclose(o);
  return rc;
}

static int by_path(const void *a, const void *b) { return strcmp(((const ckr_dset *)a)->path, ((const ckr_dset *)b)->path); }

/* After H5Fopen: format checks, attributes, dataset walk. */
static int finish_open(ckr_ckpt *c, boost_status *err) {
  if (c->f < 0) {
    ckpt_h5_fail(err, "cannot open (not an HDF5 file, or truncated or damaged)");
    return -1;
  }
  if (ckpt_meta_read(c->f, &c->meta, err) != 0) return -1; /* not a boost checkpoint of a known version */
  /* H5_ITER_NATIVE: with another order HDF5 1.10 first copies a group's links
   * into a table and, when the link index is damaged, frees the table's
   * uninitialised entries (H5G__dense_build_table / H5G__link_release_table:
   * a crash found by fuzzing). The native order needs no table; sort after. */
  if (H5Lvisit(c->f, H5_INDEX_NAME, H5_ITER_NATIVE, visit_cb, c) < 0) {
    c->walk_failed = 1;
    if (!c->walk_error[0]) ckpt_h5_error(c->walk_error, sizeof c->walk_error, "cannot walk the file's groups (corrupt metadata?)");
  }
  if (c->n > 1) qsort(c->d, (size_t)c->n, sizeof *c->d, by_path);
  H5Eclear2(H5E_DEFAULT);
  return 0;
}

static int init_h5(boost_status *err) {
  static int done = 0;
  if (done) return 0;
  ckpt_h5_quiet();
  if (h5z_zstd_register() < 0) {
    boost_err(err, "cannot register the zstd filter");
    return -1;
  }
  done = 1;
  return 0;
}

static int resolve_path(const char *arg, char *out, size_t outlen, boost_status *err) {
  struct stat st;
  if (stat(arg, &st) != 0) {
    boost_err(err, "%s: %s", arg, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(out, outlen, "%s", arg);
    return 0;
  }
  char name[PATH_MAX];
  if (ckpt_fs_read_latest(arg, name, sizeof name) == 0) {
    snprintf(out, outlen, "%s/%s", arg, name);
    if (stat(out, &st) == 0) return 0;
  }
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(arg, &steps, &n, NULL) != 0 || n == 0) {
    boost_err(err, "%s: no checkpoint in this directory", arg);
    free(steps);
    return -1;
  }
  ckpt_file_name(name, sizeof name, steps[0]);
  snprintf(out, outlen, "%s/%s", arg, name);
  free(steps);
  return 0;
}

int ckr_open(const char *arg, ckr_ckpt *c, boost_status *err) {
  memset(c, 0, sizeof *c);
  ckpt_meta_init(&c->meta);
  c->f = c->fapl = -1;
  boost_status e = {0};
  if (init_h5(err) != 0) return -1;
  if (resolve_path(arg, c->path, sizeof c->path, err) != 0) return -1;
  struct stat st;
  if (stat(c->path, &st) != 0 || !S_ISREG(st.st_mode)) {
    boost_err(err, "%s: not a regular file", c->path);
    return -1;
  }
  c->f = H5Fopen(c->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (finish_open(c, &e) != 0) {
    boost_err(err, "%.2000s: %.1000s", c->path, e.msg);
    return -1;
  }
  return 0;
}

int ckr_open_image(const void *buf, size_t len, ckr_ckpt *c, boost_status *err) {
  memset(c, 0, sizeof *c);
  ckpt_meta_init(&c->meta);
  c->f = c->fapl = -1;
  snprintf(c->path, sizeof c->path, "<image>");
  if (init_h5(err) != 0) return -1;
  c->fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (c->fapl < 0 || H5Pset_fapl_core(c->fapl, 1 << 16, 0) < 0 || H5Pset_file_image(c->fapl, (void *)buf, len) < 0) {
    ckpt_h5_fail(err, "cannot set up an in-memory file");
    return -1;
  }
  c->f = H5Fopen("inspect-image.h5", H5F_ACC_RDONLY, c->fapl);
  return finish_open(c, err);
}

void ckr_close(ckr_ckpt *c) {
  if (c->f >= 0) H5Fclose(c->f);
  if (c->fapl >= 0) H5Pclose(c->fapl);
  free(c->d);
  ckpt_meta_free(&c->meta);
  H5Eclear2(H5E_DEFAULT);
  memset(c, 0, sizeof *c);
  ckpt_meta_init(&c->meta);
  c->f = c->fapl = -1;
}

const ckr_dset *ckr_find(const ckr_ckpt *c, const char *name) {
  const char *n = name[0] == '/' ? name + 1 : name;
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->d[i].path + 1, n) == 0) return &c->d[i];
  return NULL;
}

double ckr_numel(const ckr_dset *d) {
  double n = 1;
  for (int k = 0; k < d->ndim; k++) n *= (double)d->dims[k];
  return n;
}

static hid_t mem_type_of(const char *dtype) {
  if (!strcmp(dtype, "float32") || !strcmp(dtype, "bfloat16")) return H5T_NATIVE_FLOAT; /* bf16 widens exactly */
  if (!strcmp(dtype, "float64")) return H5T_NATIVE_DOUBLE;
  if (!strcmp(dtype, "int32")) return H5T_NATIVE_INT32;
  if (!strcmp(dtype, "int64")) return H5T_NATIVE_INT64;
  if (!strcmp(dtype, "uint32")) return H5T_NATIVE_UINT32;
  if (!strcmp(dtype, "uint64")) return H5T_NATIVE_UINT64;
  return -1;
}

void *ckr_read(const ckr_ckpt *c, const ckr_dset *d, size_t *nelem, size_t *esz, boost_status *err) {
  hid_t mt = mem_type_of(d->dtype);
  if (mt < 0 || d->ndim < 0) {
    boost_err(err, "%s: unsupported dtype or shape", d->path);
    return NULL;
  }
  double n = ckr_numel(d);
  *esz = strstr(d->dtype, "64") ? 8 : 4;
  if (n * (double)*esz > 64e9) {
    boost_err(err, "%s: implausible size (%.0f elements)", d->path, n);
    return NULL;
  }
  *nelem = (size_t)n;
  void *buf = malloc(*nelem * *esz + 8);
  if (!buf) {
    boost_err(err, "%s: out of memory", d->path);
    return NULL;
  }
  hid_t ds = H5Dopen2(c->f, d->path, H5P_DEFAULT);
  if (ds < 0 || (*nelem > 0 && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
    char what[600];
    snprintf(what, sizeof what, "%s: read failed (corrupt data?)", d->path);
    ckpt_h5_fail(err, what);
    free(buf);
    buf = NULL;
  }
  if (ds >= 0) H5Dclose(ds);
  return buf;
}

double *ckr_read_f64(const ckr_ckpt *c, const ckr_dset *d, size_t *nelem, boost_status *err) {
  size_t esz;
  void *raw = ckr_read(c, d, nelem, &esz, err);
  if (!raw) return NULL;
  double *v = malloc((*nelem + 1) * sizeof *v);
  if (!v) {
    free(raw);
    boost_err(err, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < *nelem; i++) {
    if (!strcmp(d->dtype, "float32") || !strcmp(d->dtype, "bfloat16")) v[i] = ((float *)raw)[i];
    else if (!strcmp(d->dtype, "float64")) v[i] = ((double *)raw)[i];
    else if (!strcmp(d->dtype, "int32")) v[i] = ((int32_t *)raw)[i];
    else if (!strcmp(d->dtype, "uint32")) v[i] = ((uint32_t *)raw)[i];
    else if (!strcmp(d->dtype, "int64")) v[i] = (double)((int64_t *)raw)[i];
    else v[i] = (double)((uint64_t *)raw)[i];
  }
  free(raw);
  return v;
}

int ckr_is_bf16(const ckr_ckpt *c) { return !strcmp(ckpt_meta_str(&c->meta, CKPT_META_F_precision), "bf16"); }

const char *ckr_acts_dtype(const ckr_ckpt *c) { return ckr_is_bf16(c) ? "bfloat16" : "float32"; }

void ckr_shape_str(const ckr_dset *d, char *out, size_t outlen) {
  out[0] = 0;
  for (int k = 0; k < d->ndim; k++)
    snprintf(out + strlen(out), outlen - strlen(out), "%s%llu", k ? "x" : "", (unsigned long long)d->dims[k]);
  if (d->ndim == 0) snprintf(out, outlen, "scalar");
}
