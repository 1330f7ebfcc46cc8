/* Set-aside branches (ckpt_rollback.h): an abandoned branch's checkpoints
 * renamed under the branch's own number behind a written intent, finished
 * at the next start when a crash cut it, and bounded by
 * ckpt.keep_set_aside. The session's part of the guard's rollback, loading
 * the newest checkpoint left, is ckpt_rollback in ckpt_session.c. */
#include "ckpt_rollback.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_test_hooks.h"
#include "util.h"

#define ASIDE_TAIL ".h5" CKPT_SUPERSEDED_SUFFIX

void ckpt_set_aside_name(char *out, size_t outlen, int64_t step, int branch) {
  if (branch > 0) boost_msgf(out, outlen, "step_%08lld" ASIDE_TAIL ".%d", (long long)step, branch);
  else boost_msgf(out, outlen, "step_%08lld" ASIDE_TAIL, (long long)step);
}

int64_t ckpt_parse_set_aside_name(const char *name, int *branch) {
  const char *tail = strstr(name, ASIDE_TAIL);
  char head[64];
  const size_t len = tail ? (size_t)(tail - name) + 3 : 0; /* through ".h5" */
  if (!tail || len >= sizeof head) return -1;
  memcpy(head, name, len);
  head[len] = 0;
  const int64_t step = ckpt_parse_file_name(head);
  const char *p = tail + strlen(ASIDE_TAIL);
  int b = 0;
  if (step < 0 || (*p && (p[0] != '.' || p[1] < '1' || p[1] > '9'))) return -1; /* ".N", N from 1, no leading 0 */
  for (p += *p ? 1 : 0; *p; p++) {
    if (*p < '0' || *p > '9' || b > (INT_MAX - 9) / 10) return -1;
    b = b * 10 + (*p - '0');
  }
  *branch = b;
  return step;
}

static int by_branch_then_step(const void *pa, const void *pb) {
  const ckpt_branch *a = pa, *b = pb; /* one file each while sorting (nsteps 1) */
  if (a->branch != b->branch) return a->branch < b->branch ? -1 : 1;
  return a->steps[0] < b->steps[0] ? -1 : a->steps[0] > b->steps[0];
}

void ckpt_branches_free(ckpt_branch *b, int n) {
  for (int i = 0; b && i < n; i++) free(b[i].steps);
  free(b);
}

/* Every set-aside file of dir as a branch of one step, sorted. */
static int scan_files(const char *dir, ckpt_branch **out, int *n, boost_status *err) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return boost_err(err, "cannot list %s: %s", dir, strerror(errno));
  int cap = 0, b;
  struct dirent *e;
  while ((e = readdir(d))) {
    const int64_t step = ckpt_parse_set_aside_name(e->d_name, &b);
    if (step < 0) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      ckpt_branch *p = realloc(*out, (size_t)cap * sizeof **out);
      if (!p) break;
      *out = p;
    }
    ckpt_branch *f = &(*out)[*n];
    *f = (ckpt_branch){b, 1, malloc(sizeof(int64_t)), 0};
    if (!f->steps) break;
    f->steps[0] = step;
    char path[PATH_MAX];
    struct stat st;
    boost_msgf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0) f->bytes = (double)st.st_size;
    ++*n;
  }
  const int complete = e == NULL;
  closedir(d);
  if (!complete) {
    ckpt_branches_free(*out, *n);
    *out = NULL;
    *n = 0;
    return boost_err(err, "listing the set-aside files of %s: out of memory", dir);
  }
  if (*n) qsort(*out, (size_t)*n, sizeof **out, by_branch_then_step);
  return 0;
}

int ckpt_branches_list(const char *dir, ckpt_branch **out, int *n, boost_status *err) {
  ckpt_branch *files;
  int nf;
  if (scan_files(dir, &files, &nf, err) != 0) return -1;
  int nb = 0; /* grouped in place: files[nb] gathers the steps of one branch */
  for (int i = 0; i < nf; i++) {
    ckpt_branch *g = nb ? &files[nb - 1] : NULL;
    if (g && g->branch == files[i].branch) {
      int64_t *p = realloc(g->steps, (size_t)(g->nsteps + 1) * sizeof *p);
      if (!p) {
        ckpt_branches_free(files, nf > nb ? nf : nb);
        return boost_err(err, "listing the set-aside files of %s: out of memory", dir);
      }
      g->steps = p;
      g->steps[g->nsteps++] = files[i].steps[0];
      g->bytes += files[i].bytes;
      free(files[i].steps);
      files[i].steps = NULL;
    } else {
      const ckpt_branch f = files[i];
      files[i].steps = NULL;
      files[nb++] = f;
    }
  }
  for (int i = nb; i < nf; i++) free(files[i].steps);
  *out = files;
  *n = nb;
  if (!nb) {
    free(files);
    *out = NULL;
  }
  return 0;
}

static void append(char *out, size_t outlen, const char *text) {
  if (!out || !outlen) return;
  const size_t used = strlen(out);
  if (used + 1 < outlen) boost_msgf(out + used, outlen - used, "%s", text);
}

/* "step_00000008.h5, step_00000012.h5" (the first and last of a long list). */
static void name_steps(const int64_t *steps, int n, char *out, size_t outlen) {
  char name[64];
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (n > 4 && i == 2) {
      char more[48];
      boost_msgf(more, sizeof more, ", ... (%d more)", n - 3);
      append(out, outlen, more);
      i = n - 1;
    }
    ckpt_file_name(name, sizeof name, steps[i]); /* the checkpoint's own name */
    if (i) append(out, outlen, ", ");
    append(out, outlen, name);
  }
}

int ckpt_branches_bound(const char *dir, int keep, char *note, size_t notelen, boost_status *err) {
  if (keep <= 0) return 0;
  ckpt_branch *b;
  int n;
  if (ckpt_branches_list(dir, &b, &n, err) != 0) return -1;
  int removed = 0, rc = 0;
  for (int i = 0; i < n - keep && rc == 0; i++, removed++) { /* oldest first: only those beyond keep */
    for (int k = 0; k < b[i].nsteps; k++) {
      char name[64], path[PATH_MAX];
      ckpt_set_aside_name(name, sizeof name, b[i].steps[k], b[i].branch);
      boost_msgf(path, sizeof path, "%s/%s", dir, name);
      if (unlink(path) != 0 && errno != ENOENT) {
        rc = boost_err(err, "cannot remove %s: %s", path, strerror(errno));
        break;
      }
      ckpt_test_set_aside_point(CKPT_ASIDE_AT_BOUND);
    }
    char steps[256], bytes[32], line[400];
    name_steps(b[i].steps, b[i].nsteps, steps, sizeof steps);
    ckpt_format_bytes(b[i].bytes, bytes, sizeof bytes);
    boost_msgf(line, sizeof line, "%sremoved the oldest set-aside branch %d (%s; %s)", removed ? ", " : "; ",
               b[i].branch, steps, bytes);
    if (rc == 0) append(note, notelen, line);
  }
  ckpt_branches_free(b, n);
  if (removed && rc == 0) {
    char line[96];
    boost_msgf(line, sizeof line, ": ckpt.keep_set_aside=%d keeps the newest %d", keep, keep);
    append(note, notelen, line);
  }
  if (removed && ckpt_fs_fsync(dir, rc ? NULL : err) != 0) rc = -1;
  return rc == 0 ? removed : -1;
}

/* A rename that never replaces a file (a set-aside name is never reused). */
static int rename_aside(const char *from, const char *to, boost_status *err) {
  if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno == EINVAL || errno == ENOSYS) { /* a file system without it: check, then rename */
    if (access(to, F_OK) != 0 && rename(from, to) == 0) return 0;
    if (errno == 0 || access(to, F_OK) == 0) errno = EEXIST;
  }
  return boost_err(err, "cannot rename %s aside to %s: %s", from, to, strerror(errno));
}

/* The renames, `latest` and the intent's removal: what a set-aside does
 * once its intent is written, and what the next start redoes after a crash
 * (every step is idempotent). */
static int finish(const char *dir, int branch, int64_t after_step, char *note, size_t notelen, boost_status *err) {
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(dir, &steps, &n, err) != 0) return -1;
  int moved = 0, rc = 0, newer = 0;
  while (newer < n && steps[newer] > after_step) newer++; /* newest first */
  char name[64], aside[64], from[PATH_MAX], to[PATH_MAX];
  for (int k = newer - 1; k >= 0 && rc == 0; k--, moved++) { /* oldest first */
    ckpt_file_name(name, sizeof name, steps[k]);
    ckpt_set_aside_name(aside, sizeof aside, steps[k], branch);
    boost_msgf(from, sizeof from, "%s/%s", dir, name);
    boost_msgf(to, sizeof to, "%s/%s", dir, aside);
    rc = rename_aside(from, to, err);
    if (rc == 0 && moved == 0) ckpt_test_set_aside_point(CKPT_ASIDE_AT_FIRST_RENAME);
  }
  if (rc == 0 && ckpt_fs_fsync(dir, err) != 0) rc = -1;
  ckpt_test_set_aside_point(CKPT_ASIDE_AT_RENAMED);
  if (rc == 0 && newer < n) {
    ckpt_file_name(name, sizeof name, steps[newer]);
    rc = ckpt_fs_write_latest(dir, name, err);
  } else if (rc == 0) {
    boost_msgf(from, sizeof from, "%s/" CKPT_LATEST, dir);
    if (unlink(from) != 0 && errno != ENOENT) rc = boost_err(err, "cannot remove %s: %s", from, strerror(errno));
  }
  ckpt_test_set_aside_point(CKPT_ASIDE_AT_LATEST);
  if (rc == 0) {
    boost_msgf(from, sizeof from, "%s/" CKPT_SET_ASIDE_PENDING, dir);
    if (unlink(from) != 0 && errno != ENOENT) rc = boost_err(err, "cannot remove %s: %s", from, strerror(errno));
    else if (ckpt_fs_fsync(dir, err) != 0) rc = -1;
  }
  if (rc == 0 && note && newer) {
    char list[256];
    int64_t *asc = steps; /* the set-aside steps, oldest first, for the note */
    for (int i = 0, j = newer - 1; i < j; i++, j--) {
      const int64_t t = asc[i];
      asc[i] = asc[j], asc[j] = t;
    }
    name_steps(asc, newer, list, sizeof list);
    boost_msgf(note, notelen, "set aside %s as branch %d (*" ASIDE_TAIL ".%d)", list, branch, branch);
  }
  free(steps);
  ckpt_test_set_aside_point(CKPT_ASIDE_AT_DONE);
  return rc == 0 ? moved : -1;
}

int ckpt_set_aside_after(const char *dir, int64_t after_step, int keep, char *note, size_t notelen,
                         boost_status *err) {
  if (note && notelen) note[0] = 0;
  int64_t *steps = NULL;
  int n = 0;
  if (ckpt_fs_list(dir, &steps, &n, err) != 0) return -1;
  const int newer = n > 0 && steps[0] > after_step;
  free(steps);
  if (!newer) return 0;
  ckpt_branch *files;
  int nf, branch = 1;
  if (scan_files(dir, &files, &nf, err) != 0) return -1;
  for (int i = 0; i < nf; i++)
    if (files[i].branch >= branch) branch = files[i].branch + 1;
  ckpt_branches_free(files, nf);
  char intent[96];
  boost_msgf(intent, sizeof intent, "branch %d after step %lld\n", branch, (long long)after_step);
  if (ckpt_fs_write_atomic(dir, CKPT_SET_ASIDE_PENDING, intent, err) != 0) return -1;
  ckpt_test_set_aside_point(CKPT_ASIDE_AT_INTENT);
  const int moved = finish(dir, branch, after_step, note, notelen, err);
  if (moved < 0) return -1;
  const size_t used = note ? strlen(note) : 0;
  boost_status why = {0}; /* the set-aside is done: a removal that fails is said, never fails the commit or rollback */
  if (ckpt_branches_bound(dir, keep, note ? note + used : NULL, note ? notelen - used : 0, &why) < 0 && note) {
    const size_t at = strlen(note);
    boost_msgf(note + at, notelen - at, "; ckpt.keep_set_aside: %s (the branch is kept; remove it by hand)", why.msg);
  }
  return moved;
}

int ckpt_set_aside_recover(const char *dir, char *note, size_t notelen, boost_status *err) {
  if (note && notelen) note[0] = 0;
  char path[PATH_MAX];
  boost_msgf(path, sizeof path, "%s/" CKPT_SET_ASIDE_PENDING CKPT_TMP_SUFFIX, dir);
  unlink(path); /* an intent never written: nothing was renamed after it */
  boost_msgf(path, sizeof path, "%s/" CKPT_SET_ASIDE_PENDING, dir);
  FILE *f = fopen(path, "r");
  if (!f && errno == ENOENT) return 0;
  if (!f) return boost_err(err, "cannot read %s: %s", path, strerror(errno));
  int branch = 0;
  long long after = 0;
  char line[128] = "";
  const int ok = fgets(line, sizeof line, f) && sscanf(line, "branch %d after step %lld", &branch, &after) == 2 &&
                 branch > 0 && after >= -1;
  fclose(f);
  if (!ok)
    return boost_err(err,
                     "%s is not a set-aside intent (\"branch N after step S\"): a crash cut a set-aside and this file "
                     "cannot finish it; move the checkpoints newer than the step you trust aside by hand, then "
                     "remove the file",
                     path);
  char done[400] = "";
  if (finish(dir, branch, (int64_t)after, done, sizeof done, err) < 0) return -1;
  boost_msgf(note, notelen, "finished the set-aside of branch %d that an interrupted run began (%s)", branch,
             done[0] ? done : "its files were renamed already; `latest` updated");
  return 1;
}
