/* Small helpers every part of boost shares (one copy each): one-line error
 * messages (status.h), clocks, durable renames. */
#ifndef BOOST_UTIL_H
#define BOOST_UTIL_H

#include <stddef.h>
#include <string.h>

#include "status.h"

/* snprintf into a bounded buffer whose truncation is intended. */
void boost_msgf(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether s ends with suffix. */
static inline int boost_ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Monotonic wall clock, and the calling thread's CPU time, in seconds. */
double boost_now_s(void);
/* The calendar time, Unix seconds (records that outlive the process). */
double boost_unix_s(void);
double boost_thread_cpu_s(void);

/* fsync of a directory (or file) by path; -1 with errno on failure. */
int boost_fsync_path(const char *path);
/* fsync of the directory that holds path; -1 with errno on failure. */
int boost_fsync_parent(const char *path);

/* Checks an output path before a program writes it (through PATH.tmp,
 * renamed over PATH once complete): PATH is not empty, its directory exists,
 * and neither PATH nor PATH.tmp is an existing non-regular file (a device, a
 * FIFO, a directory) or the same file as one of the n_inputs inputs (NULL
 * entries are skipped). Returns 0, or -1 with a one-line message naming the
 * path and the reason. */
int boost_check_output(const char *path, const char *const *inputs, int n_inputs, boost_status *err);

#endif
