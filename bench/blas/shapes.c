/* blas-shapes: single-thread cblas_sgemm throughput on the GEMM shapes one
 * cola-60m training step (B=4, T=256, two threads) hands each thread, plus
 * 2048^3. Plain CBLAS only, so
 * bench/bench_blas.sh builds this one source against every BLAS Debian
 * offers and compares them on the same shapes.
 *
 *   blas-shapes [--min-ms MS] [--shape I] [--list]   (default 300 ms per run)
 *
 * Prints one line per shape: "OP M N K beta GFLOP/s" (best of three runs);
 * --shape I measures shape I alone (so a script can alternate libraries
 * shape by shape: this VM's speed drifts over minutes), --list only names
 * the shapes. The library must run single-threaded (OPENBLAS_NUM_THREADS=1,
 * BLIS_NUM_THREADS=1, OMP_NUM_THREADS=1): boost splits each GEMM over its own
 * threads and calls the BLAS serially inside. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  char ta, tb;
  int m, n, k;
  float beta;
} gemm_shape;

/* The largest shares of thread 0's GEMM time in cola-60m T256 steps, from
 * bench/trace/sgemm_trace.c (op, M, N, K, beta as cblas_sgemm got them). */
static const gemm_shape SHAPES[] = {
    {'N', 'N', 512, 512, 32000, 0},  /* LM head input gradient (17.9%) */
    {'T', 'N', 16000, 512, 1024, 1}, /* LM head weight gradient (17.0%) */
    {'N', 'T', 1024, 16000, 512, 0}, /* LM head forward (16.4%) */
    {'N', 'T', 1024, 688, 128, 0},   /* CoLA B-projections, MLP (4.3%) */
    {'T', 'N', 256, 128, 1024, 1},   /* CoLA weight gradients (3.7%) */
    {'N', 'T', 512, 512, 128, 0},    /* CoLA B-projections, attention (3.6%) */
    {'N', 'N', 512, 128, 1376, 0},   /* CoLA input gradients (3.4%) */
    {'N', 'T', 128, 256, 64, 0},     /* attention scores, a row block (2.7%) */
    {'N', 'N', 2048, 2048, 2048, 0}, /* the square yardstick */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *filled(size_t n, int period) {
  float *p = malloc(n * sizeof *p);
  if (!p) {
    fprintf(stderr, "blas-shapes: out of memory (%zu floats)\n", n);
    exit(1);
  }
  for (size_t i = 0; i < n; i++) p[i] = (float)(i % (size_t)period) * 0.01f;
  return p;
}

static double measure(const gemm_shape *s, double min_s) {
  const int m = s->m, n = s->n, k = s->k;
  float *a = filled((size_t)m * k, 7), *b = filled((size_t)k * n, 5), *c = filled((size_t)m * n, 3);
  const int lda = s->ta == 'N' ? k : m, ldb = s->tb == 'N' ? n : k;
  const enum CBLAS_TRANSPOSE ta = s->ta == 'N' ? CblasNoTrans : CblasTrans, tb = s->tb == 'N' ? CblasNoTrans : CblasTrans;
  double best = 0;
  for (int run = 0; run < 3; run++) {
    long calls = 0;
    const double t0 = now_s();
    double dt;
    do {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, s->beta, c, n);
      calls++;
      dt = now_s() - t0;
    } while (dt < min_s);
    const double gflops = 2.0 * m * n * k * calls / dt / 1e9;
    if (gflops > best) best = gflops;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

int main(int argc, char **argv) {
  const int n_shapes = (int)(sizeof SHAPES / sizeof SHAPES[0]);
  double min_ms = 300;
  int only = -1, list = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: blas-shapes [--min-ms MS] [--shape I] [--list]\n"
             "single-thread sgemm GFLOP/s on cola-60m's per-thread GEMM shapes (best of 3 runs of >= MS ms);\n"
             "--shape I measures only shape I (0-based), --list prints the shapes without measuring\n");
      return 0;
    }
    char *end = NULL;
    if (!strcmp(argv[i], "--list")) {
      list = 1;
    } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
      const long v = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || v < 0 || v >= n_shapes) {
        fprintf(stderr, "blas-shapes: --shape wants an index in [0, %d), got '%s'\n", n_shapes, argv[i]);
        return 2;
      }
      only = (int)v;
    } else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc) {
      min_ms = strtod(argv[++i], &end);
      if (*end || !(min_ms > 0 && min_ms <= 60000)) {
        fprintf(stderr, "blas-shapes: --min-ms wants a number of milliseconds in (0, 60000], got '%s'\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "blas-shapes: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  for (int i = 0; i < n_shapes; i++) {
    if (only >= 0 && i != only) continue;
    const gemm_shape *s = &SHAPES[i];
    printf("%c%c %d %d %d %g", s->ta, s->tb, s->m, s->n, s->k, (double)s->beta);
    if (!list) printf(" %.1f", measure(s, min_ms / 1e3));
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
