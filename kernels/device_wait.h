/* Waiting for a device without blocking in the driver: a poll loop that
 * the CUDA backend and the guarded test backend share, so the CPU tests run
 * the loop the GPU runs.
 *
 * A device wait (a stream synchronize, a download) may be waiting for
 * other ranks: collectives queued on the device (NCCL) complete there, not
 * on the host. A blocking synchronize would hide that wait from the
 * collective watchdog and from the communication library's errors, so each
 * wait polls instead: is the work done? (the backend's `ready`), and in
 * between, the hooks the layer above installs (trainer/parallel/comm.c): the wait is
 * recorded for the watchdog while it lasts, the communication backend's
 * asynchronous errors are checked (ncclCommGetAsyncError), and an error
 * goes to `fail`, which ends the job (aborting every communicator) and
 * does not return. Without hooks (tools, unit tests) a wait only polls, and
 * an error fails the process with one line. */
#ifndef BOOST_KERNELS_DEVICE_WAIT_H
#define BOOST_KERNELS_DEVICE_WAIT_H

#include <stddef.h>

#include "status.h"

/* 1: the work waited for is complete; 0: not yet; -1: it failed (a
 * one-line reason in err). */
typedef int (*boost_ready_fn)(void *ctx, boost_status *err);

typedef struct {
  void *ctx;
  /* A wait that did not complete at once begins / is over (what: a
   * string that outlives it, "device sync", "device download", ...). */
  void (*begin)(void *ctx, const char *what);
  void (*end)(void *ctx);
  /* Between two queries: 0, or -1 with a one-line reason (an error the
   * communication reported while the device waits for it). */
  int (*poll)(void *ctx, boost_status *err);
  /* The wait failed (the device's error, or poll's): ends the job (does
   * not return). */
  void (*fail)(void *ctx, const char *what, const char *err);
} boost_wait_hooks;

/* Installs the process's hooks (NULL: none); returns the previous ones. */
const boost_wait_hooks *boost_wait_set_hooks(const boost_wait_hooks *h);

/* Waits until ready(ctx) says complete: at once if it is, else polling
 * (spinning briefly, then sleeping a few microseconds between queries).
 * Returns only on completion; a failure goes to the hooks' fail (without
 * hooks: boost_fail). */
void boost_device_wait(const char *what, boost_ready_fn ready, void *ctx);

/* Test hook: after boost_wait_test_stick(BOOST_WAIT_TEST_STUCK), a backend
 * that honours it (the guarded backend; never the CUDA one) reports no wait
 * as complete again, emulating a device that waits forever for a
 * collective; after boost_wait_test_stick(BOOST_WAIT_TEST_ERROR) its waits
 * fail, emulating a device error; after BOOST_WAIT_TEST_OP_ERROR its next op
 * fails as a CUDA call does (boost_fail: the job ends at once).
 * boost_wait_test_stuck: the mode (0: none). */
enum { BOOST_WAIT_TEST_STUCK = 1, BOOST_WAIT_TEST_ERROR = 2, BOOST_WAIT_TEST_OP_ERROR = 3 };
void boost_wait_test_stick(int mode);
int boost_wait_test_stuck(void);

#endif
