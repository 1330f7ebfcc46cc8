/* boost-data's inputs: files and folders walked, sorted by path, each file
 * once (by device and inode), and whether a file is a fortune file. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "data_tool.h"
#include "util.h"

void data_add_file(input_list *l, const char *path, const struct stat *st) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    input_file *v = boost_calloc(cap, sizeof *v);
    if (l->n) memcpy(v, l->v, l->n * sizeof *v);
    boost_free(l->v);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n].path = boost_strdup(path);
  l->v[l->n].dev = st->st_dev;
  l->v[l->n].ino = st->st_ino;
  l->n++;
}

void data_walk(input_list *l, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) data_die(1, "%s: cannot read directory: %s", dir, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') {
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) l->skip_hidden++;
      continue;
    }
    size_t n = strlen(dir) + strlen(e->d_name) + 2;
    char *p = boost_calloc(n, 1);
    snprintf(p, n, "%s%s%s", dir, boost_ends_with(dir, "/") ? "" : "/", e->d_name);
    struct stat st;
    if (lstat(p, &st) != 0) data_die(1, "%s: %s", p, strerror(errno));
    if (S_ISLNK(st.st_mode))
      l->skip_link++;
    else if (S_ISDIR(st.st_mode))
      data_walk(l, p);
    else if (!S_ISREG(st.st_mode))
      l->skip_other++;
    else if (boost_ends_with(p, ".dat") || boost_ends_with(p, ".u8"))
      l->skip_ext++;
    else
      data_add_file(l, p, &st);
    boost_free(p);
  }
  closedir(d);
}

static int cmp_input(const void *a, const void *b) {
  return strcmp(((const input_file *)a)->path, ((const input_file *)b)->path);
}

static const input_file *g_sort_base;
static int cmp_inode(const void *a, const void *b) {
  const input_file *x = &g_sort_base[*(const size_t *)a], *y = &g_sort_base[*(const size_t *)b];
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  return i < j ? -1 : i > j;
}

/* Sort by path; keep the first path of each (dev, inode). */
void data_sort_dedupe(input_list *l) {
  if (l->n == 0) return;
  qsort(l->v, l->n, sizeof *l->v, cmp_input);
  size_t *idx = boost_calloc(l->n, sizeof *idx);
  bool *dup = boost_calloc(l->n, sizeof *dup);
  for (size_t i = 0; i < l->n; i++) idx[i] = i;
  g_sort_base = l->v;
  qsort(idx, l->n, sizeof *idx, cmp_inode);
  for (size_t i = 1; i < l->n; i++) {
    const input_file *a = &l->v[idx[i - 1]], *b = &l->v[idx[i]];
    if (a->dev == b->dev && a->ino == b->ino) dup[idx[i]] = true;
  }
  size_t k = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (dup[i]) {
      l->skip_dup++;
      boost_free(l->v[i].path);
    } else {
      l->v[k++] = l->v[i];
    }
  }
  l->n = k;
  boost_free(idx);
  boost_free(dup);
}

bool data_under_fortunes_dir(const char *path) {
  char *real = realpath(path, NULL);
  const char *p = real ? real : path;
  bool found = false;
  const char *last = strrchr(p, '/');
  for (const char *s = p; last && s < last;) {
    const char *e = strchr(s, '/');
    if (!e) break;
    if (e - s == 8 && strncmp(s, "fortunes", 8) == 0) found = true;
    s = e + 1;
  }
  free(real);
  return found;
}
