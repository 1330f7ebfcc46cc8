/* The device-wait poll loop (kernels/device_wait.h) that the CUDA and the
 * guarded backends share: a wait that completes at once calls no hook; one
 * that takes a while is begun, polled and ended once; an error of the
 * device or of the communication goes to fail, and never returns to the
 * caller. */
#include <criterion/criterion.h>
#include <setjmp.h>
#include <string.h>

#include "device_wait.h"
#include "util.h"

typedef struct {
  int begins, ends, polls, fails;
  int poll_error_at; /* the poll call that reports an error (0: never) */
  char what[64];
  char err[128];
  jmp_buf out;       /* fail's way out (it must not return to the loop) */
} seen;

typedef struct {
  int queries, ready_at, error_at; /* the query that completes / fails (0: never) */
} device;

static int ready(void *ctx, boost_status *err) {
  device *d = ctx;
  d->queries++;
  if (d->error_at && d->queries >= d->error_at) {
    return boost_err(err, "an illegal address");
  }
  return d->ready_at && d->queries >= d->ready_at;
}

static void h_begin(void *ctx, const char *what) {
  seen *s = ctx;
  s->begins++;
  boost_msgf(s->what, sizeof s->what, "%s", what);
}
static void h_end(void *ctx) { ((seen *)ctx)->ends++; }
static int h_poll(void *ctx, boost_status *err) {
  seen *s = ctx;
  s->polls++;
  if (s->poll_error_at && s->polls >= s->poll_error_at) {
    return boost_err(err, "NCCL reports an error on the dp communicator");
  }
  return 0;
}
static void h_fail(void *ctx, const char *what, const char *err) {
  seen *s = ctx;
  s->fails++;
  boost_msgf(s->what, sizeof s->what, "%s", what);
  boost_msgf(s->err, sizeof s->err, "%s", err);
  longjmp(s->out, 1);
}

static seen g_seen;
static const boost_wait_hooks g_hooks = {
    .ctx = &g_seen, .begin = h_begin, .end = h_end, .poll = h_poll, .fail = h_fail};

static void setup(void) {
  memset(&g_seen, 0, sizeof g_seen);
  boost_wait_set_hooks(&g_hooks);
}
static void teardown(void) { boost_wait_set_hooks(NULL); }
TestSuite(device_wait, .init = setup, .fini = teardown);

Test(device_wait, complete_at_once_calls_no_hook) {
  device d = {.ready_at = 1};
  boost_device_wait("device sync", ready, &d);
  cr_assert_eq(d.queries, 1);
  cr_assert_eq(g_seen.begins + g_seen.ends + g_seen.polls + g_seen.fails, 0);
}

/* A device whose work ends at a time: 20 ms, past the loop's spin and into
 * its sleeps. */
static int ready_at_time(void *ctx, boost_status *err) {
  (void)err;
  return boost_now_s() >= *(const double *)ctx;
}

Test(device_wait, a_long_wait_is_begun_polled_and_ended_once) {
  const double t0 = boost_now_s(), until = t0 + 0.02;
  boost_device_wait("device download", ready_at_time, (void *)&until);
  cr_assert_geq(boost_now_s(), until);
  cr_assert_eq(g_seen.begins, 1);
  cr_assert_eq(g_seen.ends, 1);
  cr_assert_eq(g_seen.fails, 0);
  cr_assert_str_eq(g_seen.what, "device download");
  cr_assert(g_seen.polls >= 2, "the communication's errors were polled %d times in 20 ms (every 1 ms expected)",
            g_seen.polls);
}

Test(device_wait, a_communication_error_while_waiting_fails_the_wait) {
  device d = {0}; /* never completes */
  g_seen.poll_error_at = 2;
  if (!setjmp(g_seen.out)) {
    boost_device_wait("device sync", ready, &d);
    cr_assert_fail("the wait returned without completing");
  }
  cr_assert_eq(g_seen.fails, 1);
  cr_assert_eq(g_seen.begins, 1);
  cr_assert_eq(g_seen.ends, 0);
  cr_assert_str_eq(g_seen.what, "device sync");
  cr_assert_str_eq(g_seen.err, "NCCL reports an error on the dp communicator");
}

Test(device_wait, a_device_error_fails_the_wait) {
  device d = {.error_at = 3};
  if (!setjmp(g_seen.out)) {
    boost_device_wait("device sync", ready, &d);
    cr_assert_fail("the wait returned after a device error");
  }
  cr_assert_eq(g_seen.fails, 1);
  cr_assert_str_eq(g_seen.err, "an illegal address");
}

Test(device_wait, an_error_at_the_first_query_fails_inside_the_wait) {
  device d = {.error_at = 1};
  if (!setjmp(g_seen.out)) {
    boost_device_wait("device sync", ready, &d);
    cr_assert_fail("the wait returned after a device error");
  }
  cr_assert_eq(g_seen.fails, 1);
  cr_assert_eq(g_seen.begins, 1);
  cr_assert_eq(g_seen.ends, 0);
}

Test(device_wait, the_test_hook_sticks) {
  cr_assert_eq(boost_wait_test_stuck(), 0);
  boost_wait_test_stick(BOOST_WAIT_TEST_STUCK);
  cr_assert_eq(boost_wait_test_stuck(), BOOST_WAIT_TEST_STUCK);
  boost_wait_test_stick(BOOST_WAIT_TEST_ERROR);
  cr_assert_eq(boost_wait_test_stuck(), BOOST_WAIT_TEST_ERROR);
}
