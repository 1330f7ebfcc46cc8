/* Test hooks of the training run (docs/CHECKPOINT_FORMAT.md, "Hooks for
 * tests and benchmarks"): delays that let a test's signal land at a chosen
 * moment however fast the machine runs the tiny model. */
#ifndef BOOST_RUN_TEST_HOOKS_H
#define BOOST_RUN_TEST_HOOKS_H

#include <stdlib.h>
#include <time.h>

/* The value of environment variable `var` in milliseconds (1..60000), or 0
 * when it is unset or anything else. */
static inline long test_delay_ms(const char *var) {
  const char *v = getenv(var);
  if (!v || !*v) return 0;
  char *end;
  long ms = strtol(v, &end, 10);
  return *end == '\0' && ms > 0 && ms <= 60000 ? ms : 0;
}

static inline void test_sleep_ms(long ms) {
  if (ms > 0) nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
}

#endif
