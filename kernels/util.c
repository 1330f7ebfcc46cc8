#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int boost_status_fail(boost_status *err, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->failed = 1;
  }
  return -1;
}

void boost_status_append(boost_status *err, const char *fmt, ...) {
  if (!err) return;
  const size_t used = strnlen(err->msg, sizeof err->msg - 1);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg + used, sizeof err->msg - used, fmt, ap);
  va_end(ap);
  err->failed = 1;
}

int boost_status_take(boost_status *err, const boost_status *from) {
  if (!from || !from->failed) return 0;
  if (err && err != from) *err = *from;
  return -1;
}

void boost_msgf(char *out, size_t outlen, const char *fmt, ...) {
  if (!out || !outlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, outlen, fmt, ap);
  va_end(ap);
}

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double boost_now_s(void) { return seconds(CLOCK_MONOTONIC); }
double boost_unix_s(void) { return seconds(CLOCK_REALTIME); }
double boost_thread_cpu_s(void) { return seconds(CLOCK_THREAD_CPUTIME_ID); }

int boost_fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

int boost_fsync_parent(const char *path) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = '\0';
  else
    *slash = '\0';
  return boost_fsync_path(dir);
}

/* -1 when path names an existing non-regular file or one of the inputs. */
static int check_replaceable(const char *what, const char *path, const char *const *inputs, int n_inputs, boost_status *err) {
  struct stat st;
  if (stat(path, &st) != 0) return 0; /* nothing there yet */
  if (S_ISDIR(st.st_mode)) return boost_err(err, "%s %s is a directory", what, path);
  if (!S_ISREG(st.st_mode))
    return boost_err(err, "%s %s exists and is not a regular file (a device or FIFO): it would be replaced", what,
                     path);
  for (int i = 0; i < n_inputs; i++) {
    struct stat in;
    if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
      return boost_err(err, "%s %s is the input %s: writing it would destroy what is being read", what, path,
                       inputs[i]);
  }
  return 0;
}

int boost_check_output(const char *path, const char *const *inputs, int n_inputs, boost_status *err) {
  if (!path || !*path) return boost_err(err, "the output path is empty");
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return boost_err(err, "output path too long");
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  struct stat st;
  if (stat(dir, &st) != 0) return boost_err(err, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return boost_err(err, "cannot write %s: %s is not a directory", path, dir);
  if (check_replaceable("output", path, inputs, n_inputs, err) != 0) return -1;
  char tmp[PATH_MAX + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  return check_replaceable("the output's temporary", tmp, inputs, n_inputs, err);
}
