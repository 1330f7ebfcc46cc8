/* One way for a library call to fail: a boost_status.
 *
 * A call that can fail for a reason outside the program (bad input, a file,
 * the system, another rank) takes `boost_status *err` as its last argument.
 * On failure it fills err with one line saying what went wrong and returns
 * -1; on success it returns 0 and leaves err alone. A constructor hands its
 * object back through an out-parameter (data_open, boost_backend_create,
 * trainer_create, ckpt_open: 0 with the object, or NULL where there is
 * nothing to make, -1 with err). Calls that read and return a buffer or a
 * place (ins_read, ckpt_load_dst) return it, NULL with err filled when they
 * fail. Reporting is one statement:
 *
 *     if (fd < 0) return boost_err(err, "cannot open %s: %s", path, strerror(errno));
 *
 * and passing a failure up is one more: `if (f(..., err)) return -1;`.
 * err may be NULL when the caller only needs to know that it failed.
 * Programs print err->msg and exit; library code never exits (what cannot be
 * returned ends the job through job_abort.h).
 *
 * Why a pointer to a caller's status rather than a status returned by value:
 * the message lives in the caller's frame once, a failure travels up the
 * stack without copying it at every level, calls keep returning the value
 * they produce (a count, a pointer), and the int return that mirrors
 * err->failed keeps `if (f(...))` as the test. Threads keep a boost_status
 * of their own and hand it over whole at the join.
 *
 * BOOST_STATUS_MSG is wide enough for a path or two and a reason; longer
 * messages are cut, never overrun. */
#ifndef BOOST_STATUS_H
#define BOOST_STATUS_H

#include <stddef.h>

#define BOOST_STATUS_MSG 2048

typedef struct boost_status {
  int failed;                 /* 0 until a call reports a failure */
  char msg[BOOST_STATUS_MSG]; /* one line, no trailing newline */
} boost_status;

#ifdef __cplusplus
extern "C" {
#endif

/* Marks err failed with the formatted message; returns -1. err may be NULL. */
int boost_status_fail(boost_status *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds to the end of err's message (a place, a hint), keeping it failed. */
void boost_status_append(boost_status *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies a failure (from a thread, a worker, a nested call) into err and
 * returns -1, or returns 0 when from has not failed. */
int boost_status_take(boost_status *err, const boost_status *from);

#ifdef __cplusplus
}
#endif

/* The one-statement report: return boost_err(err, "...", ...); */
#define boost_err boost_status_fail

#endif
