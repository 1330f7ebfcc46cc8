/* boost-export's output folder: written as a temporary sibling of DIR
 * (DIR.tmp-XXXXXX) and renamed to DIR only when every file is in, without
 * replacing anything that appeared meanwhile (renameat2 NOREPLACE). A stop
 * signal or a failure removes the temporary: the files created in it are
 * tracked by name so the signal handler can unlink them (async-signal-safe:
 * unlink and rmdir only). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_abort.h"
#include "export.h"
#include "tool.h"
#include "util.h"

#define MAX_FILES 4096

static char g_tmp[4200];
static char g_files[MAX_FILES][4300];
static volatile sig_atomic_t g_nfiles, g_armed;

static void remove_tmp(void) {
  for (int i = 0; i < g_nfiles; i++) unlink(g_files[i]);
  rmdir(g_tmp);
}

static void on_stop_signal(int sig) {
  if (g_armed) remove_tmp();
  job_exit_now(128 + sig);
}

int exp_dir_track(const char *name) {
  if (g_nfiles >= MAX_FILES) return -1;
  snprintf(g_files[g_nfiles], sizeof g_files[0], "%s/%s", g_tmp, name);
  g_nfiles = g_nfiles + 1;
  return 0;
}

static int sync_dir(const char *dir) {
  const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int rc = fsync(fd);
  close(fd);
  return rc;
}

int exp_dir_begin(const char *dir, char *tmp, size_t tmplen, boost_status *err) {
  struct stat st;
  if (!*dir) return boost_err(err, "--hf: empty folder name");
  if (lstat(dir, &st) == 0)
    return boost_err(err, "%s exists (boost-export writes a new folder and never replaces one)", dir);
  if (errno != ENOENT) return boost_err(err, "%s: %s", dir, strerror(errno));
  char copy[4200];
  snprintf(copy, sizeof copy, "%s", dir);
  const char *parent = dirname(copy);
  if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
    return boost_err(err, "%s: parent folder %s does not exist", dir, parent);
  if (snprintf(tmp, tmplen, "%s.tmp-XXXXXX", dir) >= (int)tmplen || strlen(tmp) >= sizeof g_tmp)
    return boost_err(err, "%s: path too long", dir);
  if (!mkdtemp(tmp)) return boost_err(err, "%s: cannot create a temporary folder: %s", tmp, strerror(errno));
  const mode_t mask = umask(0); /* mkdtemp made it 0700: give it the mode mkdir would */
  umask(mask);
  if (chmod(tmp, 0777 & ~mask) != 0) {
    rmdir(tmp);
    return boost_err(err, "%s: chmod failed: %s", tmp, strerror(errno));
  }
  snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
  g_nfiles = 0;
  g_armed = 1;
  tool_on_stop_signals(on_stop_signal);
  return 0;
}

int exp_dir_commit(const char *tmp, const char *dir, boost_status *err) {
  if (sync_dir(tmp) != 0) return boost_err(err, "%s: fsync failed: %s", tmp, strerror(errno));
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_NOREPLACE) != 0)
    return boost_err(err, "%s: cannot rename the finished export into place: %s", dir, strerror(errno));
  g_armed = 0;
  char copy[4200];
  snprintf(copy, sizeof copy, "%s", dir);
  sync_dir(dirname(copy));
  return 0;
}

void exp_dir_abort(const char *tmp) {
  (void)tmp;
  if (g_armed) remove_tmp();
  g_armed = 0;
}

int exp_write_all(int fd, const void *buf, size_t n, const char *file, boost_status *err) {
  const char *b = buf;
  while (n > 0) {
    const ssize_t k = write(fd, b, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return boost_err(err, "%s: write failed: %s", file, k < 0 ? strerror(errno) : "no progress");
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

int exp_write_file(const char *dir, const char *name, const void *buf, size_t n, boost_status *err) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return boost_err(err, "%s: cannot create: %s", path, strerror(errno));
  if (exp_dir_track(name) != 0) {
    close(fd);
    unlink(path);
    return boost_err(err, "%s: too many files", path);
  }
  int rc = exp_write_all(fd, buf, n, path, err);
  if (rc == 0 && fsync(fd) != 0) rc = boost_err(err, "%s: fsync failed: %s", path, strerror(errno));
  if (close(fd) != 0 && rc == 0) rc = boost_err(err, "%s: close failed: %s", path, strerror(errno));
  return rc;
}
