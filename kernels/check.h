/* Checked calls and fatal errors shared by every module.
 *
 * Library code reports errors from users, files and the system by returning
 * a status with a one-line message (util.h's boost_err); only programs
 * exit. The two exceptions live here: running out of memory (boost_calloc,
 * boost_realloc) and broken internal invariants (BOOST_ASSERT) end the
 * process with one line naming what happened. */
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
/* realloc of count * size bytes that never returns NULL (p from malloc or
 * realloc, not boost_calloc). */
void *boost_realloc(void *p, size_t count, size_t size);
void boost_free(void *p);

#endif
