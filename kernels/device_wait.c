/* The device-wait poll loop (device_wait.h). */
#include "device_wait.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"
#include "util.h"

/* Spin (yielding) this long before sleeping between queries: a wait that
 * ends within it costs no more latency than the driver's own spin. */
#define SPIN_S 2e-3
#define SLEEP_NS 20000L
/* Poll the communication's errors at most this often while sleeping. */
#define POLL_EVERY_S 1e-3

static _Atomic(const boost_wait_hooks *) hooks;
static _Atomic int stuck;

const boost_wait_hooks *boost_wait_set_hooks(const boost_wait_hooks *h) { return atomic_exchange(&hooks, h); }

void boost_wait_test_stick(int mode) { atomic_store(&stuck, mode); }
int boost_wait_test_stuck(void) { return atomic_load(&stuck); }

static void failed(const boost_wait_hooks *h, const char *what, const char *err) {
  if (h && h->fail) h->fail(h->ctx, what, err);
  boost_fail("device wait (%s) failed: %s", what, err);
}

void boost_device_wait(const char *what, boost_ready_fn ready, void *ctx) {
  boost_status err = {0};
  int r = ready(ctx, &err);
  if (r == 1) return;
  const boost_wait_hooks *h = atomic_load(&hooks);
  if (h && h->begin) h->begin(h->ctx, what); /* a failure too is named with its wait */
  if (r < 0) failed(h, what, err.msg);
  const double t0 = boost_now_s();
  double polled = t0;
  for (;;) {
    r = ready(ctx, &err);
    if (r != 0) break;
    const double now = boost_now_s();
    if (h && h->poll && now - polled >= POLL_EVERY_S) {
      polled = now;
      if (h->poll(h->ctx, &err) != 0) {
        r = -1;
        break;
      }
    }
    if (now - t0 < SPIN_S)
      sched_yield();
    else
      nanosleep(&(struct timespec){0, SLEEP_NS}, NULL);
  }
  if (r < 0) failed(h, what, err.msg);
  if (h && h->end) h->end(h->ctx);
}
