/* The test switches (ckpt_test_hooks.h): one process-wide set, written
 * before the writer thread starts and only read after that. */
#include "ckpt_test_hooks.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const ckpt_test_hooks all_off = {0, 0, -1, -1, -1, -1, 0, 0, 0};
static ckpt_test_hooks hooks = {0, 0, -1, -1, -1, -1, 0, 0, 0};

const ckpt_test_hooks *ckpt_test_hooks_now(void) { return &hooks; }

void ckpt_test_hooks_set(const ckpt_test_hooks *h) { hooks = h ? *h : all_off; }

int64_t ckpt_env_int(const char *name, int64_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  long long x = strtoll(v, &end, 10);
  return end == v ? dflt : (int64_t)x;
}

void ckpt_test_hooks_from_env(void) {
  ckpt_test_hooks h = all_off;
  h.delay_ms = (int)ckpt_env_int("BOOST_CKPT_TEST_DELAY_MS", 0);
  h.no_reserve = ckpt_env_int("BOOST_CKPT_TEST_NO_RESERVE", 0) != 0;
  h.flip_step = ckpt_env_int("BOOST_CKPT_TEST_FLIP_AFTER_WRITE", -1);
  h.dirsync_fail_step = ckpt_env_int("BOOST_CKPT_TEST_DIRSYNC_FAIL", -1);
  h.readback_hdf5 = ckpt_env_int("BOOST_CKPT_TEST_READBACK_HDF5", 0) != 0;
  h.load_ring = ckpt_env_int("BOOST_CKPT_TEST_LOAD_RING", 0) != 0;
  h.set_aside_kill = (int)ckpt_env_int("BOOST_CKPT_TEST_SET_ASIDE_KILL", 0);
  const char *fs = getenv("BOOST_CKPT_TEST_FAIL");
  if (fs && *fs) {
    long long a = -1, b = -1;
    int k = sscanf(fs, "%lld:%lld", &a, &b);
    if (k >= 1) h.fail_step = a;
    if (k == 2) h.fail_rank = (int)b;
  }
  hooks = h;
}

int ckpt_test_fails(int64_t step, int rank) {
  return hooks.fail_step == step && (hooks.fail_rank < 0 || hooks.fail_rank == rank);
}

void ckpt_test_delay(void) {
  const int ms = hooks.delay_ms;
  if (ms <= 0) return;
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

void ckpt_test_set_aside_point(int point) {
  if (hooks.set_aside_kill == point) kill(getpid(), SIGKILL); /* a real kill -9: nothing runs after it */
}

void ckpt_test_stop_in(const char *phase, int rank) {
  const char *v = getenv("BOOST_TRAIN_TEST_STOP_IN");
  const size_t n = strlen(phase);
  if (!v || strncmp(v, phase, n) != 0 || (v[n] != '\0' && v[n] != ':')) return;
  if (v[n] == ':' && atoi(v + n + 1) != rank) return;
  raise(SIGSTOP);
}
