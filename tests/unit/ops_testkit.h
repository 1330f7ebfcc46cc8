/* Helpers shared by the CPU kernel tests (test_ops*.c): a seeded
 * xorshift generator, buffers filled with random values or NaN, central
 * finite differences, closeness and bitwise comparisons. Every test is its
 * own process and seeds the generator itself, so each file gets its own
 * copy of the state. */
#ifndef BOOST_TESTS_OPS_TESTKIT_H
#define BOOST_TESTS_OPS_TESTKIT_H

#include <cblas.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "ops.h"

/* ------------------------------------------------------------------ utils */

static uint64_t rng_state = 1;
static inline void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; }
static inline double rng_u01(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static inline float rnd(float lo, float hi) { return lo + (hi - lo) * (float)rng_u01(); }

static inline float *falloc(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  cr_assert_not_null(p, "out of memory allocating %zu floats", n);
  return p;
}
static inline float *frand(size_t n, float lo, float hi) {
  float *p = falloc(n);
  for (size_t i = 0; i < n; i++) p[i] = rnd(lo, hi);
  return p;
}
static inline float *fnan(size_t n) {
  float *p = falloc(n);
  for (size_t i = 0; i < n; i++) p[i] = NAN;
  return p;
}
static inline float *fcopy(const float *src, size_t n) {
  float *p = falloc(n);
  memcpy(p, src, n * sizeof(float));
  return p;
}
static inline double dotd(const float *a, const float *b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
  return s;
}
/* d[i] = after[i] - before[i] (the accumulated part of a parameter grad) */
static inline float *fdiff(const float *after, const float *before, size_t n) {
  float *d = falloc(n);
  for (size_t i = 0; i < n; i++) d[i] = after[i] - before[i];
  return d;
}
static inline int verbose(void) { return getenv("BOOST_TEST_VERBOSE") != NULL; }

/* ctest runs unit tests with OMP_NUM_THREADS=1. Every suite of these
 * tests runs on two OpenMP threads regardless (each file declares its
 * suites with .init = two_threads; each test is its own process), so the
 * threaded paths -- GEMM splits, per-head attention, column reductions --
 * are what gets tested; tests that need other counts set them. */
static inline void two_threads(void) { omp_set_num_threads(2); }

/* CPU ticks (user + system) of this process's threads: the calling thread's
 * and all the others' summed. Linux /proc. */
static inline void thread_ticks(long *self, long *others) {
  long me = (long)syscall(SYS_gettid);
  *self = *others = 0;
  DIR *d = opendir("/proc/self/task");
  cr_assert_not_null(d, "cannot open /proc/self/task");
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *s = strrchr(buf, ')'); /* fields after the command name */
    long ut = 0, st = 0;
    if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2) continue;
    if (atol(e->d_name) == me)
      *self += ut + st;
    else
      *others += ut + st;
  }
  closedir(d);
}

/* Threads of this process (Linux /proc). */
static inline int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  cr_assert_not_null(d, "cannot open /proc/self/task");
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

typedef double (*loss_fn)(void *ctx);

/* Central differences on every element of x against analytic[]. */
static inline void fd_check(const char *what, float *x, size_t n, const float *analytic, loss_fn f, void *ctx,
                            float eps, double atol, double rtol) {
  double worst = 0.0, wa = 0.0, wn = 0.0, gmax = 0.0, emax = 0.0;
  size_t wi = 0;
  for (size_t i = 0; i < n; i++) {
    float x0 = x[i];
    float xp = x0 + eps, xm = x0 - eps;
    x[i] = xp;
    double lp = f(ctx);
    x[i] = xm;
    double lm = f(ctx);
    x[i] = x0;
    double num = (lp - lm) / ((double)xp - (double)xm);
    double a = analytic[i];
    double err = fabs(num - a);
    double ratio = err / (atol + rtol * fabs(num));
    if (isnan(ratio)) ratio = INFINITY;
    if (ratio > worst || i == 0) {
      worst = ratio;
      wi = i;
      wa = a;
      wn = num;
    }
    if (err > emax) emax = err;
    if (fabs(a) > gmax) gmax = fabs(a);
  }
  f(ctx); /* leave the forward outputs at the unperturbed point */
  if (verbose())
    fprintf(stderr, "fd %-28s n=%3zu max|g|=%.3g max err=%.3g worst ratio=%.3f\n", what, n, gmax, emax, worst);
  cr_assert(worst <= 1.0,
            "%s: finite-difference mismatch at [%zu]: analytic %.7g vs numeric %.7g "
            "(tolerance %.1e + %.1e*|numeric|, eps %.0e)",
            what, wi, wa, wn, atol, rtol, (double)eps);
  cr_assert(gmax > 1e-3, "%s: gradient is ~0 everywhere (max |g| %.3g): the check would be vacuous", what, gmax);
}

static inline void assert_close(const char *what, const float *got, const double *ref, size_t n, double atol,
                                double rtol) {
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - ref[i]);
    cr_assert(err <= atol + rtol * fabs(ref[i]), "%s[%zu]: got %.8g, reference %.8g (tolerance %.1e + %.1e*|ref|)",
              what, i, (double)got[i], ref[i], atol, rtol);
  }
}

static inline void assert_bitwise(const char *what, const void *a, const void *b, size_t bytes) {
  cr_assert(memcmp(a, b, bytes) == 0, "%s: two runs differ bitwise", what);
}

static inline double silu_d(double x) { return x / (1.0 + exp(-x)); }

#endif
