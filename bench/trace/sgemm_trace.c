/* libsgemm-trace.so: how fast every GEMM shape runs inside a real program.
 *
 *   LD_PRELOAD=build/bench/trace/libsgemm-trace.so build/trainer/boost-train ...
 *
 * Interposes cblas_sgemm, times each call made by OpenMP thread 0 (boost
 * splits every GEMM evenly over its threads, so thread 0's slice is one
 * core's share) and prints at exit, per shape (transposes, M, N, K, beta),
 * the calls, the time and GFLOP/s per core, largest share first. A
 * microbenchmark runs a shape with its operands hot in cache; here they
 * come from where the training step left them, which is what the step pays.
 *
 * Environment: BOOST_SGEMM_TRACE_SKIP=S ignores calls in the first S seconds
 * (start-up, the first steps); BOOST_SGEMM_TRACE_MIN=P leaves out shapes
 * under P percent of the traced time (default 1); BOOST_SGEMM_TRACE_OUT=FILE
 * writes the table there instead of stderr. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                         const blasint, const blasint, const blasint, const float, const float *, const blasint,
                         const float *, const blasint, const float, float *, const blasint);

typedef struct {
  int order, ta, tb, m, n, k;
  float beta;
  long calls;
  double seconds;
} shape_stats;

#define MAX_SHAPES 1024
static shape_stats shapes[MAX_SHAPES];
static int nshapes, dropped;
static long calls_seen; /* traced or skipped, by thread 0 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double t_start = -1.0, skip_s;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

__attribute__((constructor)) static void trace_start(void) {
  t_start = now_s();
  const char *s = getenv("BOOST_SGEMM_TRACE_SKIP");
  skip_s = s ? atof(s) : 0.0;
}

static void record(int order, int ta, int tb, int m, int n, int k, float beta, double seconds) {
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < nshapes && !(shapes[i].order == order && shapes[i].ta == ta && shapes[i].tb == tb && shapes[i].m == m &&
                          shapes[i].n == n && shapes[i].k == k && shapes[i].beta == beta))
    i++;
  if (i == nshapes) {
    if (nshapes == MAX_SHAPES) {
      dropped++;
      pthread_mutex_unlock(&lock);
      return;
    }
    shapes[nshapes++] = (shape_stats){order, ta, tb, m, n, k, beta, 0, 0.0};
  }
  shapes[i].calls++;
  shapes[i].seconds += seconds;
  pthread_mutex_unlock(&lock);
}

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                 const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                 const blasint ldc) {
  static sgemm_fn real;
  if (!real) real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  if (!real) {
    fputs("sgemm-trace: cblas_sgemm not found behind the preload\n", stderr);
    abort();
  }
  if (omp_get_thread_num() != 0) {
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const double t0 = now_s();
  real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const double t1 = now_s();
  __atomic_add_fetch(&calls_seen, 1, __ATOMIC_RELAXED);
  if (t0 - t_start >= skip_s) record(order, ta, tb, m, n, k, beta, t1 - t0);
}

static int by_time_desc(const void *x, const void *y) {
  const double a = ((const shape_stats *)x)->seconds, b = ((const shape_stats *)y)->seconds;
  return (a < b) - (a > b);
}

/* cblas names the row-major operation; 'T' is a transposed operand */
static char op_letter(int t) { return t == CblasNoTrans ? 'N' : 'T'; }

/* Processes that never called sgemm (a helper the program forks or execs
 * inherits the preload) print nothing. */
__attribute__((destructor)) static void trace_report(void) {
  if (__atomic_load_n(&calls_seen, __ATOMIC_RELAXED) == 0) return;
  const char *path = getenv("BOOST_SGEMM_TRACE_OUT"), *min_s = getenv("BOOST_SGEMM_TRACE_MIN");
  const double min_pct = min_s ? atof(min_s) : 1.0;
  FILE *out = path ? fopen(path, "w") : stderr;
  if (!out) out = stderr;
  qsort(shapes, (size_t)nshapes, sizeof *shapes, by_time_desc);
  double total = 0.0, flop_total = 0.0;
  for (int i = 0; i < nshapes; i++) {
    total += shapes[i].seconds;
    flop_total += 2.0 * shapes[i].m * shapes[i].n * shapes[i].k * (double)shapes[i].calls;
  }
  fprintf(out, "sgemm-trace: thread 0 spent %.3f s in %d shapes (%.1f GFLOP/s per core overall)%s\n", total, nshapes,
          total > 0 ? flop_total / total / 1e9 : 0.0, dropped ? "; some shapes over the table's size dropped" : "");
  fprintf(out, "%-4s %7s %7s %7s %5s %8s %9s %6s %8s\n", "op", "M", "N", "K", "beta", "calls", "seconds", "share",
          "GFLOP/s");
  for (int i = 0; i < nshapes; i++) {
    const shape_stats *s = &shapes[i];
    const double pct = total > 0 ? 100.0 * s->seconds / total : 0.0;
    if (pct < min_pct) continue;
    fprintf(out, "%c%c%-2s %7d %7d %7d %5g %8ld %9.3f %5.1f%% %8.1f\n", op_letter(s->ta), op_letter(s->tb),
            s->order == CblasRowMajor ? "" : "c", s->m, s->n, s->k, (double)s->beta, s->calls, s->seconds, pct,
            s->seconds > 0 ? 2.0 * s->m * s->n * s->k * (double)s->calls / s->seconds / 1e9 : 0.0);
  }
  if (out != stderr) fclose(out);
}
