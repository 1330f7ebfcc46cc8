/* boost-inspect dump, and the output file it and plot write safely
 * (ins_out: checked, written to OUT.tmp, fsynced, renamed over OUT). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_h5.h"
#include "inspect.h"
#include "tool_ckpt.h"
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

int ins_out_open(ins_out *o, const char *path, const char *const *inputs, int n_inputs, boost_status *err) {
  o->fd = -1;
  o->path[0] = o->tmp[0] = 0;
  boost_status out_err = {0};
  if (boost_check_output(path, inputs, n_inputs, &out_err) != 0) return boost_err(err, "%s", out_err.msg);
  if (strlen(path) + 5 > sizeof o->path) return boost_err(err, "cannot write %s: the name is too long", path);
  snprintf(o->path, sizeof o->path, "%s", path);
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path);
  /* A stale OUT.tmp (a run killed midway) is replaced: boost_check_output
   * made sure it is no directory, device, FIFO or input. O_EXCL: never
   * through a link someone put there since. */
  if (unlink(o->tmp) != 0 && errno != ENOENT) {
    int e = errno;
    boost_err(err, "cannot replace the stale %s: %s", o->tmp, strerror(e));
    o->tmp[0] = 0;
    return -1;
  }
  o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (o->fd < 0) {
    int e = errno;
    boost_err(err, "cannot create %s: %s", o->tmp, strerror(e));
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

int ins_out_write(ins_out *o, const void *buf, size_t n, boost_status *err) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(o->fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      boost_err(err, "cannot write %s (through %s): %s", o->path, o->tmp, strerror(e));
      ins_out_abort(o);
      return -1;
    }
    p += w, n -= (size_t)w;
  }
  return 0;
}

int ins_out_commit(ins_out *o, boost_status *err) {
  int e = 0;
  const char *what = "";
  if (fsync(o->fd) != 0) e = errno, what = "fsync of ";
  if (close(o->fd) != 0 && !e) e = errno, what = "close of ";
  o->fd = -1;
  if (e) {
    boost_err(err, "cannot write %s (%s%s): %s", o->path, what, o->tmp, strerror(e));
    ins_out_abort(o);
    return -1;
  }
  if (rename(o->tmp, o->path) != 0) {
    e = errno;
    boost_err(err, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(e));
    ins_out_abort(o);
    return -1;
  }
  o->tmp[0] = 0;
  if (boost_fsync_parent(o->path) != 0 && errno != EINVAL)
    return boost_err(err, "wrote %s, but cannot fsync its directory: %s", o->path, strerror(errno));
  return 0;
}

/* The datasets list[0..n) concatenated into outp; 0, or 1 with one line printed. */
static int dump_into(const ckr_ckpt *c, const ckr_dset *const *list, int n, const char *outp, const char *const *inputs) {
  boost_status err = {0};
  ins_out o;
  if (ins_out_open(&o, outp, inputs, 2, &err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err.msg);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    size_t ne, esz;
    void *buf = ckr_read(c, list[i], &ne, &esz, &err);
    if (!buf) {
      ins_out_abort(&o);
      fprintf(stderr, "boost-inspect: %s: %s (%s left as it was)\n", c->path, err.msg, outp);
      return 1;
    }
    int w = ins_out_write(&o, buf, ne * esz, &err);
    free(buf);
    if (w != 0) {
      fprintf(stderr, "boost-inspect: %s\n", err.msg);
      return 1;
    }
  }
  if (ins_out_commit(&o, &err) != 0) {
    fprintf(stderr, "boost-inspect: %s\n", err.msg);
    return 1;
  }
  return 0;
}

static int dump_all(const ckr_ckpt *c, const char *dir, const char *const *inputs) {
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
    const ckr_dset *d = &c->d[i];
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
  ckr_ckpt c;
  if (tool_open_or_say(path, &c, 1)) return 1;
  const char *inputs[2] = {c.path, path};
  int rc = 0, found = 0, widened = 0; /* widened: bfloat16 datasets written as float32 */
  if (a.opt_set[1]) {
    rc = dump_all(&c, outp, inputs);
    found = c.n;
    for (int i = 0; i < c.n; i++) widened += !strcmp(c.d[i].dtype, "bfloat16");
  } else {
    /* What to write is settled before any file is created. */
    const ckr_dset **list = malloc(((size_t)c.n + 1) * sizeof *list);
    if (!list) return fprintf(stderr, "boost-inspect: out of memory\n"), ckr_close(&c), 1;
    const ckr_dset *t = target ? ckr_find(&c, target) : NULL;
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
  ckr_close(&c);
  return rc;
}
