/* boost-inspect dump and plot. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_h5.h"
#include "inspect.h"

static const char *const DUMP_HELP =
    "usage: boost-inspect dump [--json] DATASET OUT PATH\n"
    "       boost-inspect dump [--json] --category weights|moments|activations OUT PATH\n"
    "       boost-inspect dump [--json] --all DIR PATH\n"
    "Raw little-endian values: of one dataset (name with or without the leading /,\n"
    "e.g. model/embed.weight), of every dataset of a category concatenated, or of\n"
    "every dataset into DIR/<path with / as __>.bin.\n";

static int write_one(const ins_ckpt *c, const ins_dset *d, FILE *out) {
  char err[INS_ERR];
  size_t n, esz;
  void *buf = ins_read(c, d, &n, &esz, err, sizeof err);
  int rc = 0;
  if (!buf || fwrite(buf, esz, n, out) != n) {
    fprintf(stderr, "boost-inspect: %s\n", buf ? "write failed" : err);
    rc = 1;
  }
  free(buf);
  return rc;
}

static int dump_all(const ins_ckpt *c, const char *dir) {
  int rc = 0;
  for (int i = 0; i < c->n && !rc; i++) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s/", dir);
    for (const char *p = c->d[i].path + 1; *p && strlen(name) + 8 < sizeof name; p++) {
      if (*p == '/') strcat(name, "__");
      else strncat(name, p, 1);
    }
    strcat(name, ".bin");
    FILE *out = fopen(name, "wb");
    if (!out) {
      fprintf(stderr, "boost-inspect: cannot create %s\n", name);
      return 1;
    }
    rc = write_one(c, &c->d[i], out);
    if (fclose(out) != 0) rc = 1;
  }
  return rc;
}

int cmd_dump(int argc, char **argv) {
  static const char *const extra[] = {"--category=", "--all", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 2, 3, DUMP_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  const char *cat = a.opt_val[0], *target = NULL, *outp = NULL, *path = NULL;
  if (a.opt_set[1] || cat) {
    if (a.npos != 2) return fprintf(stderr, "boost-inspect: dump: expected OUT PATH (see --help)\n"), 2;
    outp = a.pos[0], path = a.pos[1];
  } else {
    if (a.npos != 3) return fprintf(stderr, "boost-inspect: dump: expected DATASET OUT PATH (see --help)\n"), 2;
    target = a.pos[0], outp = a.pos[1], path = a.pos[2];
  }
  ins_ckpt c;
  char err[INS_ERR + 4300];
  if (ins_open(path, &c, err, sizeof err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err);
    ins_close(&c);
    return 1;
  }
  int rc = 0, found = 0;
  if (a.opt_set[1]) {
    rc = dump_all(&c, outp);
    found = c.n;
  } else {
    FILE *out = fopen(outp, "wb");
    if (!out) {
      fprintf(stderr, "boost-inspect: cannot create %s\n", outp);
      ins_close(&c);
      return 1;
    }
    for (int i = 0; i < c.n && !rc; i++) {
      const ins_dset *d = &c.d[i];
      if (target ? d != ins_find(&c, target) : strcmp(d->category, cat) != 0) continue;
      found++;
      rc = write_one(&c, d, out);
    }
    if (fclose(out) != 0) rc = 1;
    if (!found) {
      fprintf(stderr, "boost-inspect: no dataset %s %s in %s\n", target ? "named" : "in category", target ? target : cat, c.path);
      unlink(outp);
      rc = 1;
    }
  }
  if (!rc && a.json) printf("{\"datasets\": %d, \"out\": \"%s\"}\n", found, outp);
  else if (!rc) printf("dumped %d dataset%s to %s\n", found, found == 1 ? "" : "s", outp);
  ins_close(&c);
  return rc;
}

static const char *const PLOT_HELP =
    "usage: boost-inspect plot [--json] PATH -o FILE.png\n"
    "The training loss of every step (/state/loss_history) and, when stored,\n"
    "the validation loss (/state/val_loss_history: [n, 2] step, loss) as a PNG,\n"
    "drawn by gnuplot (scripts/install-deps.sh installs gnuplot-nox).\n";

static int write_series(const char *file, const double *v, size_t n, int pairs) {
  FILE *f = fopen(file, "w");
  if (!f) return -1;
  for (size_t i = 0; i < n; i++)
    if (pairs) fprintf(f, "%.0f %.9g\n", v[2 * i], v[2 * i + 1]);
    else fprintf(f, "%zu %.9g\n", i + 1, v[i]);
  return fclose(f);
}

int cmd_plot(int argc, char **argv) {
  static const char *const extra[] = {"-o=", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 1, 1, PLOT_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  if (!a.opt_val[0]) return fprintf(stderr, "boost-inspect: plot: -o FILE.png is required\n"), 2;
  ins_ckpt c;
  char err[INS_ERR + 4300];
  if (ins_open(a.pos[0], &c, err, sizeof err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err);
    ins_close(&c);
    return 1;
  }
  const ins_dset *lh = ins_find(&c, CKPT_GROUP_STATE "/loss_history"), *vh = ins_find(&c, CKPT_GROUP_STATE "/val_loss_history");
  size_t n = 0, nv = 0;
  double *loss = lh ? ins_read_f64(&c, lh, &n, err, sizeof err) : NULL, *val = NULL;
  if (vh && vh->ndim == 2 && vh->dims[1] == 2) val = ins_read_f64(&c, vh, &nv, err, sizeof err);
  nv /= 2;
  int rc = 1;
  char dir[] = "/tmp/boost_inspect_plot.XXXXXX", lf[64], vf[64], cmd[PATH_MAX + 512];
  if (!loss || n == 0) fprintf(stderr, "boost-inspect: %s: no loss history to plot\n", c.path);
  else if (!mkdtemp(dir)) fprintf(stderr, "boost-inspect: cannot create a temporary directory\n");
  else {
    snprintf(lf, sizeof lf, "%s/loss", dir);
    snprintf(vf, sizeof vf, "%s/val", dir);
    write_series(lf, loss, n, 0);
    if (val && nv) write_series(vf, val, nv, 1);
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"set terminal png size 900,500; set output '%s'; set xlabel 'step'; set ylabel 'loss'; "
             "set grid; plot '%s' with lines title 'train loss'%s%s%s\" 2>%s/err",
             a.opt_val[0], lf, val && nv ? ", '" : "", val && nv ? vf : "", val && nv ? "' with linespoints title 'validation loss'" : "", dir);
    if (system(cmd) == 0) rc = 0;
    else fprintf(stderr, "boost-inspect: gnuplot failed (is gnuplot installed? scripts/install-deps.sh)\n");
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) rc = rc;
  }
  if (!rc && a.json) printf("{\"png\": \"%s\", \"points\": %zu, \"val_points\": %zu}\n", a.opt_val[0], n, nv);
  else if (!rc) printf("wrote %s (%zu steps%s)\n", a.opt_val[0], n, nv ? ", with validation loss" : "");
  free(loss);
  free(val);
  ins_close(&c);
  return rc;
}
