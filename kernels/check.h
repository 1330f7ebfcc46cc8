/* Checked calls and fatal errors shared by every module.
 *
 * Library code reports errors from users, files and the system by returning
 * a status with a one-line message (util.h's boost_err); only programs
 * exit. What cannot be returned ends the job through job_abort.h, the one
 * module that does: running out of memory (boost_calloc, boost_realloc),
 * broken internal invariants (BOOST_ASSERT) and failing CUDA/cuBLAS calls
 * (kernels/cuda) call boost_fail, which names what happened in one line and
 * ends every rank of the job at once. */
#ifndef BOOST_CHECK_H
#define BOOST_CHECK_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* job_fail(1, ...): "<program>: [rank R: ]<message>" on one line to stderr,
 * then the job ends (every rank, exit 1). */
void boost_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Internal invariant; names file and line. Not for validating input. */
#define BOOST_ASSERT(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) boost_fail("internal error at %s:%d: %s", __FILE__, __LINE__, #cond); \
  } while (0)

/* Allocation that never returns NULL, zero-filled; aligned to 64 bytes, or
 * for blocks of BOOST_HUGE_MIN bytes and more (the arenas of parameters,
 * gradients, moments and activations, the logits among them) aligned to and
 * rounded up to BOOST_HUGE_PAGE and asked for as transparent huge pages
 * before anything touches them. Kernels stream through those blocks with
 * strides of whole rows (GEMM packing, softmax over the vocabulary): with
 * 4 KiB pages most rows cost a TLB miss, and first-touch faults come 512
 * times as often. Where the kernel does not do THP (or says no), the block
 * is an ordinary one. */
#define BOOST_HUGE_MIN ((size_t)8 << 20)
#define BOOST_HUGE_PAGE ((size_t)2 << 20)
void *boost_calloc(size_t count, size_t size);
/* The same, returning NULL when the memory cannot be had (or the size
 * overflows): for callers that report the failure themselves. */
void *boost_try_calloc(size_t count, size_t size);
/* realloc of count * size bytes that never returns NULL (p from malloc or
 * realloc, not boost_calloc). */
void *boost_realloc(void *p, size_t count, size_t size);
void boost_free(void *p);
/* A copy of s in boost_calloc memory (free with boost_free). */
char *boost_strdup(const char *s);

#endif
