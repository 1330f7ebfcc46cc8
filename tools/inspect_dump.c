/* boost-inspect dump and plot, and the output file both write safely
 * (ins_out: checked, written to OUT.tmp, fsynced, renamed over OUT). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_h5.h"
#include "inspect.h"
#include "util.h"

static const char *const DUMP_HELP =
    "usage: boost-inspect dump [--json] DATASET OUT PATH\n"
    "       boost-inspect dump [--json] --category weights|moments|activations OUT PATH\n"
    "       boost-inspect dump [--json] --all DIR PATH\n"
    "Raw little-endian values: of one dataset (name with or without the leading /,\n"
    "e.g. model/embed.weight), of every dataset of a category concatenated, or of\n"
    "every dataset into DIR/<path with / as __>.bin (DIR must exist). bfloat16\n"
    "datasets are written as float32 (widened, exact). Each file is\n"
    "written as OUT.tmp and renamed over OUT when complete: on any error OUT keeps\n"
    "its old content. OUT may not be the checkpoint, a directory, a device or FIFO.\n";

int ins_out_open(ins_out *o, const char *path, const char *const *inputs, int n_inputs, char *err, size_t errlen) {
  o->fd = -1;
  o->path[0] = o->tmp[0] = 0;
  if (boost_check_output(path, inputs, n_inputs, err, errlen) != 0) return -1;
  if (strlen(path) + 5 > sizeof o->path) return boost_err(err, errlen, "cannot write %s: the name is too long", path);
  snprintf(o->path, sizeof o->path, "%s", path);
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path);
  /* A stale OUT.tmp (a run killed midway) is replaced: boost_check_output
   * made sure it is no directory, device, FIFO or input. O_EXCL: never
   * through a link someone put there since. */
  if (unlink(o->tmp) != 0 && errno != ENOENT) {
    int e = errno;
    boost_msgf(err, errlen, "cannot replace the stale %s: %s", o->tmp, strerror(e));
    o->tmp[0] = 0;
    return -1;
  }
  o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (o->fd < 0) {
    int e = errno;
    boost_msgf(err, errlen, "cannot create %s: %s", o->tmp, strerror(e));
    o->tmp[0] = 0;
    return -1;
  }
  return 0;
}

void ins_out_abort(ins_out *o) {
  if (o->fd >= 0) close(o->fd);
  if (o->tmp[0]) unlink(o->tmp);
  o->fd = -1;
  o->tmp[0] = 0;
}

int ins_out_write(ins_out *o, const void *buf, size_t n, char *err, size_t errlen) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(o->fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      boost_msgf(err, errlen, "cannot write %s (through %s): %s", o->path, o->tmp, strerror(e));
      ins_out_abort(o);
      return -1;
    }
    p += w, n -= (size_t)w;
  }
  return 0;
}

int ins_out_commit(ins_out *o, char *err, size_t errlen) {
  int e = 0;
  const char *what = "";
  if (fsync(o->fd) != 0) e = errno, what = "fsync of ";
  if (close(o->fd) != 0 && !e) e = errno, what = "close of ";
  o->fd = -1;
  if (e) {
    boost_msgf(err, errlen, "cannot write %s (%s%s): %s", o->path, what, o->tmp, strerror(e));
    ins_out_abort(o);
    return -1;
  }
  if (rename(o->tmp, o->path) != 0) {
    e = errno;
    boost_msgf(err, errlen, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(e));
    ins_out_abort(o);
    return -1;
  }
  o->tmp[0] = 0;
  if (boost_fsync_parent(o->path) != 0 && errno != EINVAL)
    return boost_err(err, errlen, "wrote %s, but cannot fsync its directory: %s", o->path, strerror(errno));
  return 0;
}

/* The datasets list[0..n) concatenated into outp; 0, or 1 with one line printed. */
static int dump_into(const ins_ckpt *c, const ins_dset *const *list, int n, const char *outp, const char *const *inputs) {
  char err[INS_ERR + 2 * PATH_MAX];
  ins_out o;
  if (ins_out_open(&o, outp, inputs, 2, err, sizeof err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    size_t ne, esz;
    void *buf = ins_read(c, list[i], &ne, &esz, err, sizeof err);
    if (!buf) {
      ins_out_abort(&o);
      fprintf(stderr, "boost-inspect: %s: %s (%s left as it was)\n", c->path, err, outp);
      return 1;
    }
    int w = ins_out_write(&o, buf, ne * esz, err, sizeof err);
    free(buf);
    if (w != 0) {
      fprintf(stderr, "boost-inspect: %s\n", err);
      return 1;
    }
  }
  if (ins_out_commit(&o, err, sizeof err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err);
    return 1;
  }
  return 0;
}

static int dump_all(const ins_ckpt *c, const char *dir, const char *const *inputs) {
  struct stat st;
  if (stat(dir, &st) != 0) return fprintf(stderr, "boost-inspect: %s: %s\n", dir, strerror(errno)), 1;
  if (!S_ISDIR(st.st_mode)) return fprintf(stderr, "boost-inspect: %s: not a directory\n", dir), 1;
  for (int i = 0; i < c->n; i++) {
    char name[PATH_MAX];
    size_t L = (size_t)snprintf(name, sizeof name, "%s/", dir);
    for (const char *p = c->d[i].path + 1; *p && L + 8 < sizeof name; p++) {
      if (*p == '/') name[L++] = '_', name[L++] = '_';
      else name[L++] = *p;
    }
    if (L + 8 >= sizeof name) return fprintf(stderr, "boost-inspect: %s: output name too long for %s\n", dir, c->d[i].path), 1;
    memcpy(name + L, ".bin", 5);
    const ins_dset *d = &c->d[i];
    if (dump_into(c, &d, 1, name, inputs) != 0) return 1;
  }
  return 0;
}

static void print_json_line(cJSON *o) {
  char *t = cJSON_PrintUnformatted(o);
  if (t) printf("%s\n", t);
  free(t);
  cJSON_Delete(o);
}

int cmd_dump(int argc, char **argv) {
  static const char *const extra[] = {"--category=", "--all", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 2, 3, DUMP_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  const char *cat = a.opt_val[0], *target = NULL, *outp = NULL, *path = NULL;
  if (cat && a.opt_set[1]) return fprintf(stderr, "boost-inspect: dump: --all and --category exclude each other (see --help)\n"), 2;
  if (cat && strcmp(cat, "weights") && strcmp(cat, "moments") && strcmp(cat, "activations"))
    return fprintf(stderr, "boost-inspect: dump: unknown category '%s' (weights, moments or activations)\n", cat), 2;
  if (a.opt_set[1] || cat) {
    if (a.npos != 2) return fprintf(stderr, "boost-inspect: dump: expected OUT PATH (see --help)\n"), 2;
    outp = a.pos[0], path = a.pos[1];
  } else {
    if (a.npos != 3) return fprintf(stderr, "boost-inspect: dump: expected DATASET OUT PATH (see --help)\n"), 2;
    target = a.pos[0], outp = a.pos[1], path = a.pos[2];
  }
  ins_ckpt c;
  if (ins_open_or_say(path, &c, 1)) return 1;
  const char *inputs[2] = {c.path, path};
  int rc = 0, found = 0, widened = 0; /* widened: bfloat16 datasets written as float32 */
  if (a.opt_set[1]) {
    rc = dump_all(&c, outp, inputs);
    found = c.n;
    for (int i = 0; i < c.n; i++) widened += !strcmp(c.d[i].dtype, "bfloat16");
  } else {
    /* What to write is settled before any file is created. */
    const ins_dset **list = malloc(((size_t)c.n + 1) * sizeof *list);
    if (!list) return fprintf(stderr, "boost-inspect: out of memory\n"), ins_close(&c), 1;
    const ins_dset *t = target ? ins_find(&c, target) : NULL;
    for (int i = 0; i < c.n; i++)
      if (target ? &c.d[i] == t : !strcmp(c.d[i].category, cat)) {
        list[found++] = &c.d[i];
        widened += !strcmp(c.d[i].dtype, "bfloat16");
      }
    if (!found) {
      fprintf(stderr, "boost-inspect: %s: no dataset %s %s\n", c.path, target ? "named" : "in category", target ? target : cat);
      rc = 1;
    } else rc = dump_into(&c, list, found, outp, inputs);
    free(list);
  }
  if (!rc && a.json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "datasets", found);
    cJSON_AddStringToObject(o, "out", outp);
    cJSON_AddNumberToObject(o, "bfloat16_as_float32", widened);
    print_json_line(o);
  } else if (!rc) {
    printf("dumped %d dataset%s to %s", found, found == 1 ? "" : "s", outp);
    if (widened) printf(" (%d bfloat16, written as float32)", widened);
    printf("\n");
  }
  ins_close(&c);
  return rc;
}

static const char *const PLOT_HELP =
    "usage: boost-inspect plot [--json] PATH -o FILE.png\n"
    "The training loss of every step (/state/loss_history) and, when stored,\n"
    "the validation loss (/state/val_loss_history: [n, 2] step, loss) as a PNG,\n"
    "drawn by gnuplot (scripts/install-deps.sh installs gnuplot-nox). gnuplot runs\n"
    "in a temporary directory (no shell); FILE.png is written through FILE.png.tmp.\n";

static int write_series(const char *file, const double *v, size_t n, int pairs) {
  FILE *f = fopen(file, "w");
  if (!f) return -1;
  int bad = 0;
  for (size_t i = 0; i < n && !bad; i++)
    bad = (pairs ? fprintf(f, "%.0f %.9g\n", v[2 * i], v[2 * i + 1]) : fprintf(f, "%zu %.9g\n", i + 1, v[i])) < 0;
  return fclose(f) != 0 || bad ? -1 : 0;
}

/* Removes dir and the files in it (gnuplot's working directory). */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        char f[PATH_MAX + 256];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        unlink(f);
      }
    closedir(d);
  }
  rmdir(dir);
}

/* The line of gnuplot's output that says what went wrong: its
 * `"plot.gp" line N: ...` message, else the first non-blank line. */
static void first_error_line(const char *log, char *out, size_t outlen) {
  char buf[8192] = "";
  FILE *f = fopen(log, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  const char *pick = NULL;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    line += strspn(line, " \t");
    if (!*line || strspn(line, " ^\t\r") == strlen(line)) continue;
    if (!pick) pick = line;
    if (strstr(line, "plot.gp\" line")) {
      pick = line;
      break;
    }
  }
  boost_msgf(out, outlen, "%.300s", pick ? pick : "(no message)");
}

/* gnuplot plot.gp in dir (its working directory), stdout and stderr into
 * dir/gnuplot.log: fork and execvp, no shell. 0, or -1 with err. */
static int run_gnuplot(const char *dir, char *err, size_t errlen) {
  int pfd[2];
  if (pipe(pfd) != 0) return boost_err(err, errlen, "cannot run gnuplot: pipe: %s", strerror(errno));
  fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(pfd[0]), close(pfd[1]);
    return boost_err(err, errlen, "cannot run gnuplot: fork: %s", strerror(e));
  }
  if (pid == 0) {
    /* Child: tell the parent through the close-on-exec pipe why exec did not happen. */
    int why[2] = {0, 0}, fd, in;
    close(pfd[0]);
    if (chdir(dir) != 0) why[0] = 1, why[1] = errno;
    else if ((fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) why[0] = 2, why[1] = errno;
    else {
      if ((in = open("/dev/null", O_RDONLY)) >= 0) dup2(in, 0), close(in);
      dup2(fd, 1), dup2(fd, 2), close(fd);
      char a0[] = "gnuplot", a1[] = "plot.gp", *args[] = {a0, a1, NULL};
      execvp(a0, args);
      why[0] = 3, why[1] = errno;
    }
    if (write(pfd[1], why, sizeof why) < 0) why[0] = 0;
    _exit(127);
  }
  close(pfd[1]);
  int why[2] = {0, 0}, st = 0;
  ssize_t r;
  while ((r = read(pfd[0], why, sizeof why)) < 0 && errno == EINTR) {}
  close(pfd[0]);
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return boost_err(err, errlen, "cannot run gnuplot: waitpid: %s", strerror(errno));
  if (r == (ssize_t)sizeof why && why[0] == 3 && why[1] == ENOENT)
    return boost_err(err, errlen, "gnuplot is not installed (not found in PATH; scripts/install-deps.sh installs gnuplot-nox)");
  if (r == (ssize_t)sizeof why)
    return boost_err(err, errlen, "cannot run gnuplot: %s: %s", why[0] == 1 ? "chdir" : why[0] == 2 ? "gnuplot.log" : "exec",
                     strerror(why[1]));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char log[PATH_MAX + 16], line[400];
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    first_error_line(log, line, sizeof line);
    if (WIFEXITED(st)) return boost_err(err, errlen, "gnuplot failed (exit %d): %s", WEXITSTATUS(st), line);
    return boost_err(err, errlen, "gnuplot failed (signal %d): %s", WTERMSIG(st), line);
  }
  return 0;
}

/* dir/plot.png through ins_out into outp. */
static int copy_png(const char *dir, const char *outp, const char *const *inputs, char *err, size_t errlen) {
  char png[PATH_MAX + 16], log[PATH_MAX + 16], line[400];
  snprintf(png, sizeof png, "%s/plot.png", dir);
  snprintf(log, sizeof log, "%s/gnuplot.log", dir);
  FILE *f = fopen(png, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || st.st_size == 0) {
    if (f) fclose(f);
    first_error_line(log, line, sizeof line);
    return boost_err(err, errlen, "gnuplot wrote no PNG: %s", line);
  }
  ins_out o;
  if (ins_out_open(&o, outp, inputs, 2, err, errlen) != 0) return fclose(f), -1;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    if (ins_out_write(&o, buf, n, err, errlen) != 0) return fclose(f), -1;
  int rerr = ferror(f);
  fclose(f);
  if (rerr) {
    ins_out_abort(&o);
    return boost_err(err, errlen, "cannot read gnuplot's %s", png);
  }
  return ins_out_commit(&o, err, errlen);
}

/* Data files, script, gnuplot, PNG into outp; the temporary directory is removed. */
static int draw(const double *loss, size_t n, const double *val, size_t nv, const char *outp, const char *const *inputs,
                char *err, size_t errlen) {
  const char *td = getenv("TMPDIR");
  char dir[PATH_MAX], f[PATH_MAX + 16];
  if (!td || !*td || strlen(td) > sizeof dir - 64) td = "/tmp";
  snprintf(dir, sizeof dir, "%s/boost_inspect_plot.XXXXXX", td);
  if (!mkdtemp(dir)) return boost_err(err, errlen, "cannot create a temporary directory in %s: %s", td, strerror(errno));
  int rc = 0;
  snprintf(f, sizeof f, "%s/loss", dir);
  if (write_series(f, loss, n, 0) != 0) rc = boost_err(err, errlen, "cannot write %s: %s", f, strerror(errno));
  snprintf(f, sizeof f, "%s/val", dir);
  if (!rc && nv && write_series(f, val, nv, 1) != 0) rc = boost_err(err, errlen, "cannot write %s: %s", f, strerror(errno));
  snprintf(f, sizeof f, "%s/plot.gp", dir);
  FILE *gp = rc ? NULL : fopen(f, "w");
  if (!rc && !gp) rc = boost_err(err, errlen, "cannot write %s: %s", f, strerror(errno));
  if (gp) {
    /* Fixed names inside the temporary directory: nothing of the user's is quoted. */
    int bad = fprintf(gp, "set terminal png size 900,500\nset output 'plot.png'\nset xlabel 'step'\nset ylabel 'loss'\n"
                          "set grid\nplot 'loss' with lines title 'train loss'%s\n",
                      nv ? ", 'val' with linespoints title 'validation loss'" : "") < 0;
    if ((fclose(gp) != 0 || bad)) rc = boost_err(err, errlen, "cannot write %s: %s", f, strerror(errno));
  }
  if (!rc) rc = run_gnuplot(dir, err, errlen);
  if (!rc) rc = copy_png(dir, outp, inputs, err, errlen);
  remove_dir(dir);
  return rc;
}

int cmd_plot(int argc, char **argv) {
  static const char *const extra[] = {"-o=", NULL};
  ins_args a;
  int p = ins_parse(argc, argv, extra, 1, 1, PLOT_HELP, &a);
  if (p) return p > 0 ? 0 : 2;
  const char *outp = a.opt_val[0];
  if (!outp) return fprintf(stderr, "boost-inspect: plot: -o FILE.png is required\n"), 2;
  ins_ckpt c;
  if (ins_open_or_say(a.pos[0], &c, 1)) return 1;
  const ins_dset *lh = ins_find(&c, CKPT_GROUP_STATE "/loss_history"), *vh = ins_find(&c, CKPT_GROUP_STATE "/val_loss_history");
  const char *inputs[2] = {c.path, a.pos[0]};
  char err[INS_ERR + 3 * PATH_MAX];
  size_t n = 0, nv = 0;
  double *loss = NULL, *val = NULL;
  int rc = 1;
  if (!lh) fprintf(stderr, "boost-inspect: %s: no loss history to plot\n", c.path);
  else if (!(loss = ins_read_f64(&c, lh, &n, err, sizeof err))) fprintf(stderr, "boost-inspect: %s: %s\n", c.path, err);
  else if (n == 0) fprintf(stderr, "boost-inspect: %s: no loss history to plot (it is empty)\n", c.path);
  else if (vh && vh->ndim == 2 && vh->dims[1] == 2 && !(val = ins_read_f64(&c, vh, &nv, err, sizeof err)))
    fprintf(stderr, "boost-inspect: %s: %s\n", c.path, err);
  else if (boost_check_output(outp, inputs, 2, err, sizeof err) != 0) fprintf(stderr, "boost-inspect: %s\n", err);
  else if (draw(loss, n, val, nv /= 2, outp, inputs, err, sizeof err) != 0) fprintf(stderr, "boost-inspect: %s\n", err);
  else rc = 0;
  if (!rc && a.json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "png", outp);
    cJSON_AddNumberToObject(o, "points", (double)n);
    cJSON_AddNumberToObject(o, "val_points", (double)nv);
    print_json_line(o);
  } else if (!rc) printf("wrote %s (%zu steps%s)\n", outp, n, nv ? ", with validation loss" : "");
  free(loss);
  free(val);
  ins_close(&c);
  return rc;
}
