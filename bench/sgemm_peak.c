/* sgemm-peak: the fp32 GEMM throughput this machine's OpenBLAS reaches, the
 * yardstick for the training benchmark (bench/bench_train.sh reports boost's
 * achieved GFLOP/s as a fraction of this peak).
 *
 *   sgemm-peak [--threads N] [--size N] [--tokens M] [--d D] [--r R]
 *              [--ffn F] [--vocab V] [--runs K] [--min-ms MS] [--square-only]
 *   sgemm-peak --print-core
 *
 * Measures a square N x N x N sgemm (default 2048) and the GEMM shapes one
 * training step of a (CoLA or full-rank) LLaMA layer stack issues for M
 * tokens (forward y = x W^T, backward dX = dY W and dW = dY^T X), each as the
 * best of K timed runs (each run repeats the call for at least MS ms). Prints
 * one JSON object; "sgemm_gflops" is the best figure over all shapes.
 *
 * --bf16 runs the same shapes through boost's kern_gemm_bf16 (bf16 inputs; bf16
 * outputs, fp32 accumulated weight gradients, as the bf16 step calls it; the
 * library it picked -- oneDNN where the CPU has bf16 instructions -- is in
 * "bf16_gemm") on --threads OpenMP threads, and reports "bf16_gflops": the
 * limit a bf16 step's GEMMs run against (bench/bench_vs_torch.sh).
 *
 * --print-core prints the OpenBLAS core this process runs with (after any
 * kernel auto-selection the project libraries do at start-up) and exits; the
 * benchmark script exports it as OPENBLAS_CORETYPE for the PyTorch peer so
 * both sides use the same kernel. Defaults: cola-60m dims, M = 4 * 256. */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "bf16.h"
#include "gemm_bf16.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

typedef struct {
  const char *name;
  char op; /* 'F' forward NT: C[M,N] = A[M,K] B[N,K]^T; 'D' dX NN; 'W' dW TN */
  int m, n, k;
  double gflops;
} shape;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long parse_pos(const char *flag, const char *v) {
  if (!v) {
    fprintf(stderr, "sgemm-peak: %s needs a value\n", flag);
    exit(2);
  }
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x <= 0 || x > 1000000) {
    fprintf(stderr, "sgemm-peak: %s wants a positive integer, got '%s'\n", flag, v);
    exit(2);
  }
  return x;
}

static float *alloc_rand(size_t n, unsigned *seed) {
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes);
  if (!p) {
    fprintf(stderr, "sgemm-peak: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    p[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  return p;
}

/* One call of the shape through gemm_bf16, as the bf16 step makes it. */
static void run_once_bf16(const shape *s, const uint16_t *a, const uint16_t *b, void *c) {
  switch (s->op) {
  case 'F': kern_gemm_bf16(0, 1, s->m, s->n, s->k, a, s->k, b, s->k, 0.0f, c, s->n, 0); break;
  case 'D': kern_gemm_bf16(0, 0, s->m, s->n, s->k, a, s->k, b, s->n, 0.0f, c, s->n, 0); break;
  default: kern_gemm_bf16(1, 0, s->m, s->n, s->k, a, s->m, b, s->n, 1.0f, c, s->n, 1); break;
  }
}

static int use_bf16;

/* One call of the shape; buffers are big enough for every op's layout. */
static void run_once(const shape *s, const float *a, const float *b, float *c) {
  if (use_bf16) { /* the buffers hold bf16 inputs (and a bf16 or float C) */
    run_once_bf16(s, (const uint16_t *)(const void *)a, (const uint16_t *)(const void *)b, c);
    return;
  }
  switch (s->op) {
  case 'F': /* y[M,N] = x[M,K] W[N,K]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->m, s->n, s->k, 1.0f, a, s->k, b, s->k, 0.0f, c, s->n);
    break;
  case 'D': /* dx[M,N] = dy[M,K] W[K,N] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, s->k, b, s->n, 0.0f, c, s->n);
    break;
  default: /* 'W': dW[M,N] += dy[K,M]^T x[K,N] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, s->m, b, s->n, 1.0f, c, s->n);
    break;
  }
}

static double measure(const shape *s, int runs, double min_s, unsigned *seed) {
  float *a = alloc_rand((size_t)s->m * s->k, seed);
  float *b = alloc_rand((size_t)s->n * s->k, seed);
  float *c = alloc_rand((size_t)s->m * s->n, seed);
  double flop = 2.0 * s->m * s->n * s->k;
  if (use_bf16) { /* a and b become their bf16 roundings, in the front of buffers of their own size */
    const size_t na = (size_t)s->m * s->k, nb = (size_t)s->n * s->k;
    float *ab = alloc_rand(na, seed), *bb = alloc_rand(nb, seed);
    bf16_from_f32((uint16_t *)(void *)ab, a, na);
    bf16_from_f32((uint16_t *)(void *)bb, b, nb);
    free(a);
    free(b);
    a = ab, b = bb;
  }
  run_once(s, a, b, c); /* warm up threads and caches */
  double best = 0.0;
  for (int r = 0; r < runs; r++) {
    long calls = 0;
    double t0 = now_s(), t;
    do {
      run_once(s, a, b, c);
      calls++;
      t = now_s() - t0;
    } while (t < min_s);
    double g = flop * (double)calls / t * 1e-9;
    if (g > best) best = g;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgemm-peak [--threads N] [--size N] [--tokens M] [--d D] [--r R] [--ffn F]\n"
          "                  [--vocab V] [--runs K] [--min-ms MS] [--square-only] [--bf16]\n"
          "       sgemm-peak --print-core\n");
}

int main(int argc, char **argv) {
  int threads = 0, size = 2048, tokens = 1024, d = 512, r = 128, ffn = 1376, vocab = 32000;
  int runs = 3, min_ms = 200, square_only = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--print-core")) {
      printf("%s\n", openblas_get_corename());
      return 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--square-only")) {
      square_only = 1;
    } else if (!strcmp(a, "--bf16")) {
      use_bf16 = 1;
    } else if (!strcmp(a, "--threads")) {
      threads = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--size")) {
      size = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--tokens")) {
      tokens = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--d")) {
      d = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--r")) {
      r = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--ffn")) {
      ffn = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--vocab")) {
      vocab = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--runs")) {
      runs = (int)parse_pos(a, v), i++;
    } else if (!strcmp(a, "--min-ms")) {
      min_ms = (int)parse_pos(a, v), i++;
    } else {
      fprintf(stderr, "sgemm-peak: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (threads > 0) openblas_set_num_threads(threads);
  if (threads > 0 && use_bf16) omp_set_num_threads(threads); /* gemm_bf16 splits over our OpenMP threads */

  /* The GEMMs of one training step: forward (F), input gradient (D) and
   * weight gradient (W) of the projections a CoLA layer (A: in->r, B: r->out),
   * a full-rank layer, and the LM head issue for `tokens` rows. */
  shape shapes[] = {
      {"square", 'F', size, size, size, 0},
      {"lm_head.fwd", 'F', tokens, vocab, d, 0},
      {"lm_head.dx", 'D', tokens, d, vocab, 0},
      {"lm_head.dw", 'W', vocab, d, tokens, 0},
      {"cola.A_d_r.fwd", 'F', tokens, r, d, 0},
      {"cola.A_d_r.dx", 'D', tokens, d, r, 0},
      {"cola.A_d_r.dw", 'W', r, d, tokens, 0},
      {"cola.B_r_d.fwd", 'F', tokens, d, r, 0},
      {"cola.B_r_ffn.fwd", 'F', tokens, ffn, r, 0},
      {"cola.A_ffn_r.fwd", 'F', tokens, r, ffn, 0},
      {"full.d_d.fwd", 'F', tokens, d, d, 0},
      {"full.d_d.dx", 'D', tokens, d, d, 0},
      {"full.d_d.dw", 'W', d, d, tokens, 0},
      {"full.d_ffn.fwd", 'F', tokens, ffn, d, 0},
      {"full.ffn_d.fwd", 'F', tokens, d, ffn, 0},
  };
  int nshapes = square_only ? 1 : (int)(sizeof shapes / sizeof shapes[0]);
  unsigned seed = 12345u;
  double best = 0.0;
  for (int i = 0; i < nshapes; i++) {
    shapes[i].gflops = measure(&shapes[i], runs, min_ms * 1e-3, &seed);
    if (shapes[i].gflops > best) best = shapes[i].gflops;
  }

  if (use_bf16) {
    char lib[512];
    gemm_bf16_info(lib, sizeof lib);
    for (char *q = lib; *q; q++)
      if (*q == '"' || *q == '\\') *q = '\'';
    printf("{\"bf16_gflops\": %.1f, \"square_gflops\": %.1f, \"square_n\": %d, \"threads\": %d, \"bf16_gemm\": \"%s\", "
           "\"runs\": %d, \"min_ms\": %d, \"shapes\": [",
           best, shapes[0].gflops, size, omp_get_max_threads(), lib, runs, min_ms);
    for (int i = 1; i < nshapes; i++)
      printf("%s{\"name\": \"%s\", \"gflops\": %.1f}", i > 1 ? ", " : "", shapes[i].name, shapes[i].gflops);
    printf("]}\n");
    return 0;
  }
  const char *env_core = getenv("OPENBLAS_CORETYPE");
  printf("{\"sgemm_gflops\": %.1f, \"square_gflops\": %.1f, \"square_n\": %d, \"threads\": %d, "
         "\"openblas_core\": \"%s\", \"openblas_coretype_env\": \"%s\", \"openblas_config\": \"%s\", "
         "\"runs\": %d, \"min_ms\": %d, \"shapes\": [",
         best, shapes[0].gflops, size, openblas_get_num_threads(), openblas_get_corename(), env_core ? env_core : "",
         openblas_get_config(), runs, min_ms);
  for (int i = 1; i < nshapes; i++)
    printf("%s{\"name\": \"%s\", \"op\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"gflops\": %.1f}", i > 1 ? ", " : "",
           shapes[i].name, shapes[i].op == 'F' ? "NT" : shapes[i].op == 'D' ? "NN" : "TN", shapes[i].m, shapes[i].n,
           shapes[i].k, shapes[i].gflops);
  printf("]}\n");
  return 0;
}
