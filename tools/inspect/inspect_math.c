/* boost-inspect stats, spectrum, diff: numbers from the tensors. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "tool_ckpt.h"

static const char *const STATS_HELP =
    "usage: boost-inspect stats [--json] PATH [--tensor NAME]\n"
    "Per dataset (or only NAME, with or without the leading /): stored dtype,\n"
    "element count, min, max, mean, std, L2 norm (over the finite values), NaN and\n"
    "Inf counts.\n";

typedef struct { double min, max, mean, std, norm; size_t n, nan, inf; } tstats;

static tstats compute_stats(const double *v, size_t n) {
  tstats s = {INFINITY, -INFINITY, 0, 0, 0, n, 0, 0};
  double sum = 0, sq = 0;
  size_t fin = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(v[i])) { s.nan++; continue; }
    if (isinf(v[i])) { s.inf++; continue; }
    fin++, sum += v[i], sq += v[i] * v[i];
    if (v[i] < s.min) s.min = v[i];
    if (v[i] > s.max) s.max = v[i];
  }
  if (fin) {
    s.mean = sum / (double)fin;
    s.std = sqrt(fmax(0.0, sq / (double)fin - s.mean * s.mean));
    s.norm = sqrt(sq);
  } else s.min = s.max = NAN;
  return s;
}

int cmd_stats(int argc, char **argv) {
  static const char *const extra[] = {"--tensor=", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 1, 1, STATS_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  ckr_ckpt c;
  if (tool_open_or_say(a.pos[0], &c, 1)) return 1;
  const char *only = a.opt_val[0];
  if (only && !ckr_find(&c, only)) {
    fprintf(stderr, "boost-inspect: %s: no dataset named %s\n", c.path, only);
    ckr_close(&c);
    return 1;
  }
  cJSON *arr = cJSON_CreateArray();
  int rc = 0;
  if (!a.json) printf("  %-48s %-9s %10s %12s %12s %12s %12s %12s %6s %6s\n", "dataset", "dtype", "elements", "min", "max", "mean", "std", "norm", "nan", "inf");
  for (int i = 0; i < c.n; i++) {
    const ckr_dset *d = &c.d[i];
    if (only && d != ckr_find(&c, only)) continue;
    boost_status err = {0};
    size_t n;
    double *v = ckr_read_f64(&c, d, &n, &err);
    if (!v) {
      fprintf(stderr, "boost-inspect: %s\n", err.msg);
      rc = 1;
      continue;
    }
    tstats s = compute_stats(v, n);
    free(v);
    if (a.json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", d->path);
      cJSON_AddStringToObject(o, "dtype", d->dtype);
      cJSON_AddNumberToObject(o, "elements", (double)s.n);
      double vals[5] = {s.min, s.max, s.mean, s.std, s.norm};
      const char *names[5] = {"min", "max", "mean", "std", "norm"};
      for (int k = 0; k < 5; k++)
        if (isfinite(vals[k])) cJSON_AddNumberToObject(o, names[k], vals[k]);
        else cJSON_AddNullToObject(o, names[k]);
      cJSON_AddNumberToObject(o, "nan", (double)s.nan);
      cJSON_AddNumberToObject(o, "inf", (double)s.inf);
      cJSON_AddItemToArray(arr, o);
    } else
      printf("  %-48s %-9s %10zu %12.5g %12.5g %12.5g %12.5g %12.5g %6zu %6zu\n", d->path, d->dtype, s.n, s.min, s.max, s.mean, s.std,
             s.norm, s.nan, s.inf);
  }
  if (a.json) tool_print_json(arr);
  else cJSON_Delete(arr);
  ckr_close(&c);
  return rc;
}

/* LAPACK (Fortran interface; the project links LAPACK). */
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork, int *info);
extern void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a, const int *lda, double *s,
                    double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *info);

/* R (r x r, upper) of the QR of the column-major m x r matrix x (m >= r), into R (column-major). */
static int qr_r(double *x, int m, int r, double *R) {
  int info, lwork = -1;
  double wq, *tau = malloc((size_t)r * sizeof *tau);
  dgeqrf_(&m, &r, x, &m, tau, &wq, &lwork, &info);
  lwork = (int)wq + 1;
  double *work = malloc((size_t)lwork * sizeof *work);
  dgeqrf_(&m, &r, x, &m, tau, work, &lwork, &info);
  for (int j = 0; j < r; j++)
    for (int i = 0; i < r; i++) R[i + (size_t)j * r] = i <= j ? x[i + (size_t)j * m] : 0.0;
  free(tau);
  free(work);
  return info;
}

/* Singular values of B·A for B [out, r] and A [r, in] (row-major) through
 * QR: B = Q1 R1, A^T = Q2 R2, so B·A = Q1 (R1 R2^T) Q2^T. */
static int lowrank_svals(const double *B, const double *A, int out, int r, int in, double *s) {
  if (out < r || in < r) return -1;
  double *b = malloc((size_t)out * r * sizeof *b), *a = malloc((size_t)in * r * sizeof *a);
  double *R1 = calloc((size_t)r * r, sizeof *R1), *R2 = calloc((size_t)r * r, sizeof *R2), *C = calloc((size_t)r * r, sizeof *C);
  for (int i = 0; i < out; i++)
    for (int j = 0; j < r; j++) b[i + (size_t)j * out] = B[(size_t)i * r + j];
  memcpy(a, A, (size_t)in * r * sizeof *a); /* row-major A is column-major A^T */
  int info = qr_r(b, out, r, R1) | qr_r(a, in, r, R2);
  for (int j = 0; j < r; j++)
    for (int i = 0; i < r; i++) {
      double acc = 0;
      for (int k = 0; k < r; k++) acc += R1[i + (size_t)k * r] * R2[j + (size_t)k * r];
      C[i + (size_t)j * r] = acc;
    }
  int lwork = -1, one = 1;
  double wq, dummy;
  if (!info) dgesvd_("N", "N", &r, &r, C, &r, s, &dummy, &one, &dummy, &one, &wq, &lwork, &info);
  lwork = (int)wq + 1;
  double *work = malloc((size_t)lwork * sizeof *work);
  if (!info) dgesvd_("N", "N", &r, &r, C, &r, s, &dummy, &one, &dummy, &one, work, &lwork, &info);
  free(work), free(a), free(b), free(R1), free(R2), free(C);
  return info ? -1 : 0;
}

static size_t count_nonfinite(const double *v, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += !isfinite(v[i]);
  return k;
}

static const char *const SPECTRUM_HELP =
    "usage: boost-inspect spectrum [--json] PATH\n"
    "For every low-rank group (model/<prefix>.A [g, r, in] or [r, in] with .B\n"
    "[g, out, r] or [out, r]) and each of its g projections: the singular values\n"
    "of the product B·A (LAPACK), the effective rank exp(entropy of s/sum s) and\n"
    "the numerical rank (s > s_max * max(out, in) * 2^-23).\n";

static void spectrum_one(const char *name, int gi, const double *s, int r, int out, int in, int json, cJSON *arr) {
  double sum = 0, H = 0;
  int nrank = 0;
  for (int k = 0; k < r; k++) sum += s[k];
  for (int k = 0; k < r; k++) {
    double p = sum > 0 ? s[k] / sum : 0;
    if (p > 0) H -= p * log(p);
    if (s[k] > s[0] * fmax(out, in) * FLT_EPSILON) nrank++;
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "group", name);
    cJSON_AddNumberToObject(o, "projection", gi);
    cJSON_AddNumberToObject(o, "rank", r);
    cJSON_AddNumberToObject(o, "effective_rank", exp(H));
    cJSON_AddNumberToObject(o, "numerical_rank", nrank);
    cJSON *sv = cJSON_AddArrayToObject(o, "singular_values");
    for (int k = 0; k < r; k++) cJSON_AddItemToArray(sv, cJSON_CreateNumber(s[k]));
    cJSON_AddItemToArray(arr, o);
  } else {
    printf("  %-36s [%d] r %4d  effective rank %7.2f  numerical rank %4d  s: %.4g .. %.4g\n", name, gi, r, exp(H), nrank, s[0], s[r - 1]);
  }
}

int cmd_spectrum(int argc, char **argv) {
  ins_args a;
  int p = ins_parse(argc, argv, NULL, 1, 1, SPECTRUM_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  ckr_ckpt c;
  if (tool_open_or_say(a.pos[0], &c, 1)) return 1;
  cJSON *arr = cJSON_CreateArray();
  int rc = 0, groups = 0;
  for (int i = 0; i < c.n; i++) {
    const ckr_dset *A = &c.d[i];
    size_t L = strlen(A->path);
    if (strncmp(A->path, "/model/", 7) || L < 3 || strcmp(A->path + L - 2, ".A")) continue;
    char bname[600];
    boost_status err = {0};
    snprintf(bname, sizeof bname, "%.*s.B", (int)(L - 2), A->path);
    const ckr_dset *B = ckr_find(&c, bname);
    const int o = A->ndim - 2;
    if (!B || B->ndim != A->ndim || o < 0 || o > 1 || (o && B->dims[0] != A->dims[0]) || B->dims[o + 1] != A->dims[o]) {
      fprintf(stderr, "boost-inspect: %s: %s: no matching %s\n", c.path, A->path, bname);
      rc = 1;
      continue;
    }
    const int g = o ? (int)A->dims[0] : 1, r = (int)A->dims[o], in = (int)A->dims[o + 1], out = (int)B->dims[o];
    size_t na, nb;
    double *av = ckr_read_f64(&c, A, &na, &err), *bv = av ? ckr_read_f64(&c, B, &nb, &err) : NULL;
    double *s = malloc((size_t)r * sizeof *s + 8);
    /* LAPACK on NaN or Inf prints "** On entry to DLASCL ..." on stdout and
     * returns garbage: refuse the factor instead, naming it. */
    const ckr_dset *bad = av && bv ? (count_nonfinite(av, na) ? A : count_nonfinite(bv, nb) ? B : NULL) : NULL;
    if (bad) {
      size_t nf = count_nonfinite(bad == A ? av : bv, bad == A ? na : nb);
      fprintf(stderr, "boost-inspect: %s: %s holds %zu NaN or Inf value%s: no spectrum for %s\n", c.path, bad->path, nf,
              nf == 1 ? "" : "s", A->path + 7);
      rc = 1;
    }
    for (int k = 0; av && bv && !bad && k < g; k++) {
      if (lowrank_svals(bv + (size_t)k * out * r, av + (size_t)k * r * in, out, r, in, s) != 0) {
        fprintf(stderr, "boost-inspect: %s: SVD failed\n", A->path);
        rc = 1;
        break;
      }
      spectrum_one(A->path + 7, k, s, r, out, in, a.json, arr);
    }
    if (!av || !bv) fprintf(stderr, "boost-inspect: %s\n", err.msg), rc = 1;
    groups++;
    free(av), free(bv), free(s);
  }
  if (a.json) tool_print_json(arr);
  else {
    cJSON_Delete(arr);
    if (!groups) printf("no low-rank tensors (model/*.A with *.B) in %s\n", c.path);
  }
  ckr_close(&c);
  return rc;
}
