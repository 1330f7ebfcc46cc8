#include "check.h"

#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

#include "job_abort.h"

void boost_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  job_vfail(1, fmt, ap);
}

void *boost_try_calloc(size_t count, size_t size) {
  if (count != 0 && size > ((size_t)-1 - BOOST_HUGE_PAGE) / count) return NULL;
  size_t bytes = count * size;
  const int huge = bytes >= BOOST_HUGE_MIN;
  const size_t align = huge ? BOOST_HUGE_PAGE : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  if (rounded == 0) rounded = 64;
  void *p = aligned_alloc(align, rounded);
  if (!p) return NULL;
#ifdef MADV_HUGEPAGE
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure leaves 4 KiB pages */
#endif
  memset(p, 0, rounded);
  return p;
}

void *boost_calloc(size_t count, size_t size) {
  if (count != 0 && size > ((size_t)-1 - BOOST_HUGE_PAGE) / count)
    boost_fail("allocation of %zu x %zu bytes overflows", count, size);
  void *p = boost_try_calloc(count, size);
  if (!p) boost_fail("out of memory allocating %.1f MiB", (double)count * size / (1 << 20));
  return p;
}

char *boost_strdup(const char *s) {
  const size_t n = strlen(s) + 1;
  char *d = boost_calloc(n, 1);
  memcpy(d, s, n);
  return d;
}

void *boost_realloc(void *p, size_t count, size_t size) {
  if (count != 0 && size > (size_t)-1 / count) boost_fail("allocation of %zu x %zu bytes overflows", count, size);
  const size_t bytes = count * size;
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q) boost_fail("out of memory allocating %.1f MiB", (double)bytes / (1 << 20));
  return q;
}

void boost_free(void *p) { free(p); }
