#include "check.h"

#include <stdarg.h>
#include <string.h>

void boost_fail(const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fputs("boost: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

void *boost_calloc(size_t count, size_t size) {
  if (count != 0 && size > ((size_t)-1 - 64) / count) boost_fail("allocation of %zu x %zu bytes overflows", count, size);
  size_t bytes = count * size;
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void *p = aligned_alloc(64, rounded);
  if (!p) boost_fail("out of memory allocating %.1f MiB", (double)bytes / (1 << 20));
  memset(p, 0, rounded);
  return p;
}

void *boost_realloc(void *p, size_t count, size_t size) {
  if (count != 0 && size > (size_t)-1 / count) boost_fail("allocation of %zu x %zu bytes overflows", count, size);
  const size_t bytes = count * size;
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q) boost_fail("out of memory allocating %.1f MiB", (double)bytes / (1 << 20));
  return q;
}

void boost_free(void *p) { free(p); }
