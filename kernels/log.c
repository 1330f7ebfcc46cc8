#include "log.h"

#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *program = "boost";

void boost_log_program(const char *name) {
  if (name && *name) program = name;
}

const char *boost_log_name(void) { return program; }

void boost_log_vwarn(const char *fmt, va_list ap) {
  fflush(stdout);
  flockfile(stderr);
  fprintf(stderr, "%s: ", program);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  funlockfile(stderr);
}

void boost_log_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  boost_log_vwarn(fmt, ap);
  va_end(ap);
}

void boost_log_info(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  flockfile(stdout);
  vfprintf(stdout, fmt, ap);
  fputc('\n', stdout);
  fflush(stdout);
  funlockfile(stdout);
  va_end(ap);
}

void boost_log_line_now(const char *line) {
  struct iovec v[2] = {{(void *)line, strlen(line)}, {"\n", 1}};
  ssize_t n = writev(STDERR_FILENO, v, 2);
  (void)n; /* the job ends either way: nowhere else to say it */
}
