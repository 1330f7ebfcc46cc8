/* boost-inspect: examine a checkpoint offline (no MPI job needed).
 *
 *   boost-inspect [--json] [--verify] [--no-tensors] PATH
 *   boost-inspect --list DIR
 *   boost-inspect --dump DATASET OUT PATH
 *   boost-inspect --dump-category weights|moments|activations OUT PATH
 *   boost-inspect --dump-all DIR PATH
 *
 * PATH is a checkpoint file or a checkpoint directory (then the file named by
 * its `latest` pointer, else the newest step_*.h5). Prints the training state
 * (step, tokens, data cursor, seeds, LR position, loss history, layout that
 * saved it, software version) and one line per tensor (shape, dtype, stored
 * size, compression ratio, checksum). --verify recomputes every checksum from
 * the data (docs/CHECKPOINT_FORMAT.md: xxh3-64-elemsum-v1) and names every
 * tensor that does not match or cannot be read. --json prints all of it as
 * one JSON document. --dump writes one dataset's values (little-endian) to a
 * file (--dump-all: every dataset into DIR/<path with / as __>.bin);
 * --dump-category concatenates the raw bytes of a whole category (for
 * comparing our compression with `zstd -3` on the same bytes).
 *
 * Exit status: 0 ok, 1 a checkpoint problem (unreadable, checksum mismatch),
 * 2 usage. */
#include <cJSON.h>
#include <hdf5.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "h5z_zstd.h"

typedef struct {
  char path[512];
  char category[16]; /* weights | moments | activations | state | other */
  char dtype[16];
  int ndim;
  hsize_t dims[8];
  double raw_bytes, stored_bytes;
  int has_checksum;
  uint64_t checksum, computed;
  int verified; /* -1 not checked, 0 bad, 1 good */
  char error[512];
} dset_info;

typedef struct {
  dset_info *d;
  int n, cap;
} dset_list;

static void usage(FILE *f) {
  fprintf(f,
          "usage: boost-inspect [--json] [--verify] [--no-tensors] PATH\n"
          "       boost-inspect --list DIR\n"
          "       boost-inspect --dump DATASET OUT PATH\n"
          "       boost-inspect --dump-category weights|moments|activations OUT PATH\n"
          "       boost-inspect --dump-all DIR PATH\n"
          "\n"
          "PATH: a checkpoint file (step_XXXXXXXX.h5) or a checkpoint directory (its\n"
          "`latest` checkpoint). Shows the training state and every tensor with its\n"
          "shape, dtype, stored size, compression ratio and checksum.\n"
          "  --verify         recompute every checksum (xxh3-64-elemsum-v1) and name the\n"
          "                   tensors that do not match or cannot be read (exit 1)\n"
          "  --json           one JSON document instead of text\n"
          "  --no-tensors     state only\n"
          "  --list DIR       the checkpoints of a directory, newest first, with `latest`\n"
          "  --dump DATASET OUT       raw little-endian values of one dataset\n"
          "  --dump-category CAT OUT  raw bytes of every dataset of a category, concatenated\n"
          "  --dump-all DIR           every dataset to DIR/<path, / as __>.bin\n"
          "Exit status: 0 ok, 1 checkpoint problem, 2 usage.\n");
}

static const char *category_of(const char *path) {
  if (strncmp(path, "/model/", 7) == 0) return "weights";
  if (strncmp(path, "/optim/", 7) == 0) return "moments";
  if (strncmp(path, "/activations/", 13) == 0) return "activations";
  if (strncmp(path, "/state/", 7) == 0) return "state";
  return "other";
}

static herr_t visit_cb(hid_t root, const char *name, const H5L_info_t *info, void *data) {
  (void)info;
  dset_list *l = data;
  hid_t o = H5Oopen(root, name, H5P_DEFAULT);
  if (o < 0) return 0;
  if (H5Iget_type(o) == H5I_DATASET) {
    if (l->n == l->cap) {
      l->cap = l->cap ? 2 * l->cap : 256;
      l->d = realloc(l->d, (size_t)l->cap * sizeof *l->d);
      if (!l->d) {
        fprintf(stderr, "boost-inspect: out of memory\n");
        exit(1);
      }
    }
    dset_info *d = &l->d[l->n++];
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "/%s", name);
    snprintf(d->category, sizeof d->category, "%s", category_of(d->path));
    d->verified = -1;
    hid_t space = H5Dget_space(o), type = H5Dget_type(o);
    d->ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : 0;
    if (d->ndim > 8) d->ndim = 8;
    if (d->ndim > 0) H5Sget_simple_extent_dims(space, d->dims, NULL);
    double n = 1;
    for (int k = 0; k < d->ndim; k++) n *= (double)d->dims[k];
    size_t esz = type >= 0 ? H5Tget_size(type) : 0;
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (cls == H5T_FLOAT) snprintf(d->dtype, sizeof d->dtype, "float%zu", 8 * esz);
    else if (cls == H5T_INTEGER) snprintf(d->dtype, sizeof d->dtype, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * esz);
    else snprintf(d->dtype, sizeof d->dtype, "other");
    d->raw_bytes = n * (double)esz;
    d->stored_bytes = (double)H5Dget_storage_size(o);
    d->has_checksum = ckpt_attr_exists(o, CKPT_ATTR_CHECKSUM) == 1 && ckpt_attr_get_u64(o, CKPT_ATTR_CHECKSUM, &d->checksum) == 0;
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
  }
  H5Oclose(o);
  return 0;
}

/* Reads a whole dataset as its own element size (4 or 8 bytes). */
static void *read_all(hid_t f, const dset_info *d, size_t *nelem, size_t *esz, char *err, size_t errlen) {
  double n = 1;
  for (int k = 0; k < d->ndim; k++) n *= (double)d->dims[k];
  *nelem = (size_t)n;
  *esz = strstr(d->dtype, "64") ? 8 : 4;
  hid_t mt = strcmp(d->dtype, "float32") == 0 ? H5T_NATIVE_FLOAT
             : strcmp(d->dtype, "int32") == 0 ? H5T_NATIVE_INT32
             : strcmp(d->dtype, "int64") == 0 ? H5T_NATIVE_INT64
             : strcmp(d->dtype, "float64") == 0 ? H5T_NATIVE_DOUBLE
             : -1;
  if (mt < 0) {
    snprintf(err, errlen, "%s: unsupported dtype %s", d->path, d->dtype);
    return NULL;
  }
  void *buf = malloc(*nelem * *esz + 8);
  if (!buf) {
    snprintf(err, errlen, "%s: out of memory", d->path);
    return NULL;
  }
  hid_t ds = H5Dopen2(f, d->path, H5P_DEFAULT);
  if (ds < 0 || (*nelem > 0 && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
    char what[600];
    snprintf(what, sizeof what, "%s: read failed (corrupt data?)", d->path);
    ckpt_h5_error(err, errlen, what);
    free(buf);
    if (ds >= 0) H5Dclose(ds);
    return NULL;
  }
  H5Dclose(ds);
  return buf;
}

static int resolve_path(const char *arg, char *out, size_t outlen) {
  struct stat st;
  if (stat(arg, &st) != 0) {
    fprintf(stderr, "boost-inspect: %s: no such file or directory\n", arg);
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
  int64_t *steps;
  int n;
  char err[512];
  if (ckpt_fs_list(arg, &steps, &n, err, sizeof err) != 0 || n == 0) {
    fprintf(stderr, "boost-inspect: no checkpoint in %s\n", arg);
    return -1;
  }
  ckpt_file_name(name, sizeof name, steps[0]);
  snprintf(out, outlen, "%s/%s", arg, name);
  free(steps);
  return 0;
}

static int cmd_list(const char *dir, int json) {
  int64_t *steps;
  int n;
  char err[512], latest[PATH_MAX] = "";
  if (ckpt_fs_list(dir, &steps, &n, err, sizeof err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err);
    return 1;
  }
  ckpt_fs_read_latest(dir, latest, sizeof latest);
  cJSON *arr = json ? cJSON_CreateArray() : NULL;
  for (int i = 0; i < n; i++) {
    char name[64], p[PATH_MAX + 64];
    ckpt_file_name(name, sizeof name, steps[i]);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    double sz = stat(p, &st) == 0 ? (double)st.st_size : -1;
    if (json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "file", name);
      cJSON_AddNumberToObject(o, "step", (double)steps[i]);
      cJSON_AddNumberToObject(o, "bytes", sz);
      cJSON_AddBoolToObject(o, "latest", strcmp(name, latest) == 0);
      cJSON_AddItemToArray(arr, o);
    } else {
      printf("%s  step %8lld  %10.0f bytes%s\n", name, (long long)steps[i], sz, strcmp(name, latest) == 0 ? "  <- latest" : "");
    }
  }
  if (json) {
    char *t = cJSON_Print(arr);
    printf("%s\n", t);
    free(t);
    cJSON_Delete(arr);
  }
  free(steps);
  return 0;
}

static cJSON *parse_or_string(const char *s) {
  cJSON *j = s ? cJSON_Parse(s) : NULL;
  return j ? j : cJSON_CreateString(s ? s : "");
}

int main(int argc, char **argv) {
  int json = 0, verify = 0, tensors = 1, list = 0;
  const char *dump = NULL, *dump_out = NULL, *dump_cat = NULL, *dump_all = NULL, *arg = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--verify")) verify = 1;
    else if (!strcmp(argv[i], "--no-tensors")) tensors = 0;
    else if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--dump") && i + 2 < argc) {
      dump = argv[++i];
      dump_out = argv[++i];
    } else if (!strcmp(argv[i], "--dump-all") && i + 1 < argc) {
      dump_all = argv[++i];
    } else if (!strcmp(argv[i], "--dump-category") && i + 2 < argc) {
      dump_cat = argv[++i];
      dump_out = argv[++i];
    } else if (argv[i][0] == '-' || arg) {
      fprintf(stderr, "boost-inspect: unexpected argument '%s' (see --help)\n", argv[i]);
      return 2;
    } else {
      arg = argv[i];
    }
  }
  if (!arg) {
    usage(stderr);
    return 2;
  }
  if (list) return cmd_list(arg, json);

  char path[PATH_MAX + 80];
  if (resolve_path(arg, path, sizeof path) != 0) return 1;
  ckpt_h5_quiet();
  if (h5z_zstd_register() < 0) {
    fprintf(stderr, "boost-inspect: cannot register the zstd filter\n");
    return 1;
  }
  char err[1024];
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    ckpt_h5_error(err, sizeof err, "cannot open (truncated or not an HDF5 file)");
    fprintf(stderr, "boost-inspect: %s: %s\n", path, err);
    return 1;
  }
  dset_list l = {0};
  H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &l);

  if (dump_all) {
    int rc = 0;
    for (int i = 0; i < l.n && !rc; i++) {
      const dset_info *d = &l.d[i];
      char name[PATH_MAX];
      snprintf(name, sizeof name, "%s/", dump_all);
      for (const char *p = d->path + 1; *p && strlen(name) + 3 < sizeof name; p++) {
        if (*p == '/') strcat(name, "__");
        else strncat(name, p, 1);
      }
      strncat(name, ".bin", sizeof name - strlen(name) - 1);
      size_t n, esz;
      void *buf = read_all(f, d, &n, &esz, err, sizeof err);
      FILE *out = buf ? fopen(name, "wb") : NULL;
      if (!buf || !out || fwrite(buf, esz, n, out) != n) {
        fprintf(stderr, "boost-inspect: %s\n", buf ? "cannot write the dump" : err);
        rc = 1;
      }
      if (out && fclose(out) != 0) rc = 1;
      free(buf);
    }
    if (!rc) printf("dumped %d datasets to %s\n", l.n, dump_all);
    H5Fclose(f);
    free(l.d);
    return rc;
  }

  if (dump || dump_cat) {
    FILE *out = fopen(dump_out, "wb");
    if (!out) {
      fprintf(stderr, "boost-inspect: cannot create %s\n", dump_out);
      return 1;
    }
    int found = 0, rc = 0;
    for (int i = 0; i < l.n && !rc; i++) {
      dset_info *d = &l.d[i];
      if (dump ? strcmp(d->path, dump) != 0 : strcmp(d->category, dump_cat) != 0) continue;
      found++;
      size_t n, esz;
      void *buf = read_all(f, d, &n, &esz, err, sizeof err);
      if (!buf || fwrite(buf, esz, n, out) != n) {
        fprintf(stderr, "boost-inspect: %s\n", buf ? "write failed" : err);
        rc = 1;
      }
      free(buf);
    }
    if (fclose(out) != 0) rc = 1;
    if (!found) {
      fprintf(stderr, "boost-inspect: no dataset %s %s in %s\n", dump ? "named" : "in category", dump ? dump : dump_cat, path);
      rc = 1;
    }
    H5Fclose(f);
    free(l.d);
    return rc;
  }

  /* State. */
  char *format = NULL, *version = NULL, *cfg = NULL, *layout = NULL, *algo = NULL, *acts = NULL;
  int64_t fv = 0, step = -1, cursor = -1, tseed = 0, dseed = 0;
  double tokens = 0, lr_next = 0;
  ckpt_attr_get_str(f, "format", &format);
  ckpt_attr_get_i64(f, "format_version", &fv);
  ckpt_attr_get_str(f, "software_version", &version);
  ckpt_attr_get_str(f, "checksum_algorithm", &algo);
  ckpt_attr_get_i64(f, "step", &step);
  ckpt_attr_get_i64(f, "data_cursor", &cursor);
  ckpt_attr_get_f64(f, "tokens_seen", &tokens);
  ckpt_attr_get_i64(f, "train_seed", &tseed);
  ckpt_attr_get_i64(f, "data_seed", &dseed);
  ckpt_attr_get_f64(f, "lr_next", &lr_next);
  ckpt_attr_get_str(f, "config", &cfg);
  ckpt_attr_get_str(f, "layout", &layout);
  ckpt_attr_get_str(f, "activations", &acts);
  H5Eclear2(H5E_DEFAULT);
  int problems = 0;
  if (!format || strcmp(format, CKPT_FORMAT_NAME) != 0) {
    fprintf(stderr, "boost-inspect: %s is not a boost checkpoint (no format=\"%s\" attribute)\n", path, CKPT_FORMAT_NAME);
    problems++;
  }

  /* Loss history. */
  int64_t nloss = 0;
  float last_loss = 0.0f;
  for (int i = 0; i < l.n; i++) {
    if (strcmp(l.d[i].path, CKPT_GROUP_STATE "/loss_history") != 0) continue;
    size_t n, esz;
    float *v = read_all(f, &l.d[i], &n, &esz, err, sizeof err);
    if (v) {
      nloss = (int64_t)n;
      if (n) last_loss = v[n - 1];
      free(v);
    }
  }

  /* Verify. */
  double raw[3] = {0}, stored[3] = {0};
  const char *cats[3] = {"weights", "moments", "activations"};
  for (int i = 0; i < l.n; i++) {
    dset_info *d = &l.d[i];
    for (int k = 0; k < 3; k++)
      if (!strcmp(d->category, cats[k])) raw[k] += d->raw_bytes, stored[k] += d->stored_bytes;
    if (!verify) continue;
    if (!d->has_checksum) {
      snprintf(d->error, sizeof d->error, "no %s attribute", CKPT_ATTR_CHECKSUM);
      d->verified = 0;
      problems++;
      continue;
    }
    size_t n, esz;
    void *buf = read_all(f, d, &n, &esz, err, sizeof err);
    if (!buf) {
      snprintf(d->error, sizeof d->error, "%.500s", err);
      d->verified = 0;
      problems++;
      continue;
    }
    d->computed = esz == 8 ? ckpt_hash_run64(buf, n, 0) : ckpt_hash_run32(buf, n, 0);
    free(buf);
    d->verified = d->computed == d->checksum;
    if (!d->verified) {
      snprintf(d->error, sizeof d->error, "checksum mismatch (stored %016llx, computed %016llx)",
               (unsigned long long)d->checksum, (unsigned long long)d->computed);
      problems++;
    }
  }
  struct stat st;
  double file_bytes = stat(path, &st) == 0 ? (double)st.st_size : 0;

  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "format", format ? format : "");
    cJSON_AddNumberToObject(o, "format_version", (double)fv);
    cJSON_AddStringToObject(o, "software_version", version ? version : "");
    cJSON_AddStringToObject(o, "checksum_algorithm", algo ? algo : "");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "data_cursor", (double)cursor);
    cJSON_AddNumberToObject(o, "tokens_seen", tokens);
    cJSON_AddNumberToObject(o, "train_seed", (double)tseed);
    cJSON_AddNumberToObject(o, "data_seed", (double)dseed);
    cJSON_AddNumberToObject(o, "lr_next", lr_next);
    cJSON_AddStringToObject(o, "activations", acts ? acts : "none");
    cJSON_AddItemToObject(o, "layout", parse_or_string(layout));
    cJSON_AddItemToObject(o, "config", parse_or_string(cfg));
    cJSON *lh = cJSON_AddObjectToObject(o, "loss_history");
    cJSON_AddNumberToObject(lh, "count", (double)nloss);
    if (nloss) cJSON_AddNumberToObject(lh, "last", last_loss);
    cJSON_AddNumberToObject(o, "file_bytes", file_bytes);
    cJSON *c = cJSON_AddObjectToObject(o, "categories");
    for (int k = 0; k < 3; k++) {
      cJSON *e = cJSON_AddObjectToObject(c, cats[k]);
      cJSON_AddNumberToObject(e, "raw_bytes", raw[k]);
      cJSON_AddNumberToObject(e, "stored_bytes", stored[k]);
      cJSON_AddNumberToObject(e, "ratio", stored[k] > 0 ? raw[k] / stored[k] : 0.0);
    }
    if (tensors || verify) {
      cJSON *arr = cJSON_AddArrayToObject(o, "tensors");
      for (int i = 0; i < l.n; i++) {
        const dset_info *d = &l.d[i];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", d->path);
        cJSON_AddStringToObject(t, "category", d->category);
        cJSON_AddStringToObject(t, "dtype", d->dtype);
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (int k = 0; k < d->ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d->dims[k]));
        cJSON_AddNumberToObject(t, "raw_bytes", d->raw_bytes);
        cJSON_AddNumberToObject(t, "stored_bytes", d->stored_bytes);
        cJSON_AddNumberToObject(t, "ratio", d->stored_bytes > 0 ? d->raw_bytes / d->stored_bytes : 0.0);
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)d->checksum);
        cJSON_AddStringToObject(t, "checksum", d->has_checksum ? hex : "");
        if (d->verified >= 0) cJSON_AddBoolToObject(t, "verified", d->verified);
        if (d->error[0]) cJSON_AddStringToObject(t, "error", d->error);
        cJSON_AddItemToArray(arr, t);
      }
    }
    if (verify) cJSON_AddBoolToObject(o, "verified", problems == 0);
    char *txt = cJSON_Print(o);
    printf("%s\n", txt);
    free(txt);
    cJSON_Delete(o);
  } else {
    printf("checkpoint %s\n", path);
    printf("  format %s v%lld, written by boost %s, checksums %s\n", format ? format : "?", (long long)fv,
           version ? version : "?", algo ? algo : "?");
    printf("  step %lld | tokens %.0f | data cursor %lld | seeds train %lld data %lld | next lr %.3e\n", (long long)step,
           tokens, (long long)cursor, (long long)tseed, (long long)dseed, lr_next);
    printf("  loss history: %lld values%s", (long long)nloss, nloss ? ", last " : "\n");
    if (nloss) printf("%.4f\n", last_loss);
    printf("  saved by layout %s | activations %s\n", layout ? layout : "?", acts ? acts : "none");
    printf("  file %.0f bytes\n", file_bytes);
    for (int k = 0; k < 3; k++)
      if (raw[k] > 0)
        printf("  %-12s %12.0f raw bytes -> %12.0f stored (%.3fx)\n", cats[k], raw[k], stored[k],
               stored[k] > 0 ? raw[k] / stored[k] : 0.0);
    if (tensors) {
      printf("  %-48s %-11s %-9s %-18s %7s  %-16s%s\n", "dataset", "category", "dtype", "shape", "ratio", "checksum",
             verify ? "  verify" : "");
      for (int i = 0; i < l.n; i++) {
        const dset_info *d = &l.d[i];
        char shape[64] = "";
        for (int k = 0; k < d->ndim; k++)
          snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", k ? "x" : "", (unsigned long long)d->dims[k]);
        printf("  %-48s %-11s %-9s %-18s %6.3fx  %016llx%s%s\n", d->path, d->category, d->dtype, shape,
               d->stored_bytes > 0 ? d->raw_bytes / d->stored_bytes : 0.0, (unsigned long long)d->checksum,
               d->verified < 0 ? "" : d->verified ? "  ok" : "  BAD: ", d->verified == 0 ? d->error : "");
      }
    }
    if (verify) printf("verify: %s (%d problem%s)\n", problems ? "FAILED" : "ok", problems, problems == 1 ? "" : "s");
  }
  if (problems && !json)
    for (int i = 0; i < l.n; i++)
      if (l.d[i].verified == 0) fprintf(stderr, "boost-inspect: %s: %s\n", l.d[i].path, l.d[i].error);
  H5Fclose(f);
  free(l.d);
  free(format);
  free(version);
  free(cfg);
  free(layout);
  free(algo);
  free(acts);
  return problems ? 1 : 0;
}
