/* Checked calls and fatal errors shared by every module.
 *
 * Errors that come from users or files are reported with boost_fail() and a
 * one-line message; programming errors use BOOST_ASSERT. Both exit non-zero. */
#ifndef BOOST_CHECK_H
#define BOOST_CHECK_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* Print "boost: <message>" on one line to stderr and exit(1). */
void boost_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Internal invariant; names file and line. Not for validating input. */
#define BOOST_ASSERT(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) boost_fail("internal error at %s:%d: %s", __FILE__, __LINE__, #cond); \
  } while (0)

/* Allocation that never returns NULL; aligned to 64 bytes, zero-filled. */
void *boost_calloc(size_t count, size_t size);
void boost_free(void *p);

#endif
