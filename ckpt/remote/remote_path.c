/* s3:// checkpoints for the tools: downloaded into a private temporary
 * directory (remote_path.h). */
#include "remote_path.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_h5.h"
#include "remote_level.h"

/* Splits "s3://B/P/step_N[/ckpt.h5]" into the level's URL and N (-1: the newest). */
static void split_step(const char *arg, char *url, size_t cap, long long *step) {
  snprintf(url, cap, "%s", arg);
  *step = -1;
  size_t n = strlen(url);
  if (n > 8 && !strcmp(url + n - 8, "/ckpt.h5")) url[n -= 8] = 0;
  while (n > 5 && url[n - 1] == '/') url[--n] = 0;
  char *last = strrchr(url + 5, '/');
  long long s;
  char tail;
  if (last && sscanf(last + 1, "step_%lld%c", &s, &tail) == 1 && s >= 0) {
    *step = s;
    *last = 0;
  }
}

static int fetch_one(const char *arg, const char *dir, char **path_out, boost_status *err) {
  char url[1024];
  long long step;
  split_step(arg, url, sizeof url, &step);
  s3_config cfg = {url, NULL, NULL};
  s3_client *c = NULL;
  remote_ckpt r = {0};
  int rc = s3_client_open(&c, &cfg, err);
  if (rc == 0 && step >= 0) rc = remote_manifest(c, step, &r, err);
  if (rc == 0 && step < 0) {
    int got = remote_newest(c, &r, err);
    rc = got < 0 ? -1 : got == 0 ? boost_err(err, "%s holds no committed checkpoint (no step_*/manifest.json)", url) : 0;
  }
  char name[64], path[4400];
  if (rc == 0) {
    ckpt_file_name(name, sizeof name, r.step);
    snprintf(path, sizeof path, "%.4200s/%s", dir, name);
    rc = remote_fetch(c, &r, path, 4, err);
  }
  if (rc == 0 && !(*path_out = strdup(path))) rc = boost_err(err, "out of memory");
  remote_ckpt_free(&r);
  s3_client_close(c);
  return rc;
}

int remote_path_args(int argc, char **argv, char *tmpdir, size_t cap, boost_status *err) {
  tmpdir[0] = 0;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "s3://", 5) != 0) continue;
    if (!tmpdir[0]) {
      const char *t = getenv("TMPDIR");
      snprintf(tmpdir, cap, "%s/boost-s3-XXXXXX", t && *t ? t : "/tmp");
      if (!mkdtemp(tmpdir)) {
        int e = errno;
        tmpdir[0] = 0;
        return boost_err(err, "cannot make a private temporary directory for %s: %s", argv[i], strerror(e));
      }
    }
    char sub[4200], *path = NULL;
    snprintf(sub, sizeof sub, "%s/%d", tmpdir, i); /* one folder per argument: two steps never collide */
    if (mkdir(sub, 0700) != 0) return boost_err(err, "cannot make %s: %s", sub, strerror(errno));
    if (fetch_one(argv[i], sub, &path, err)) return -1;
    argv[i] = path;
  }
  return 0;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (unlink(p) != 0 && errno == EISDIR) remove_tree(p);
  }
  closedir(d);
  rmdir(dir);
}

void remote_path_cleanup(const char *tmpdir) {
  if (tmpdir && tmpdir[0]) remove_tree(tmpdir);
}
