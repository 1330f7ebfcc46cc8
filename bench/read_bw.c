/* read-bw: the rate this machine reads a buffer of a given size again and
 * again -- the limit a decode step runs against (bench/bench_generate.sh:
 * a decode step streams its working weights once per token, and whatever
 * of them the last-level cache keeps between tokens it keeps between this
 * probe's passes too).
 *
 *   read-bw --bytes N [--threads T] [--seconds S]
 *
 * Each pass sums the buffer as floats, split into T contiguous parts (one
 * OpenMP thread each), reading 64-byte lines in address order with the
 * lines 32 KB ahead prefetched -- the access of boost's one-row decode
 * loops without their arithmetic. Prints the fastest pass over S seconds
 * (default 1) after 3 unmeasured ones, in GB/s. */
#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float sum_part(const float *x, size_t n) {
#ifdef __AVX512F__
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const char *ahead = (const char *)(x + i) + 32768;
    for (int line = 0; line < 4; line++) _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(x + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(x + i + 48));
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (; i < n; i++) s += x[i];
  return s;
#else
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
#endif
}

static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || v == 0) return -1;
  *out = (size_t)v;
  return 0;
}

int main(int argc, char **argv) {
  size_t bytes = 0;
  int threads = 1;
  double seconds = 1.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: read-bw --bytes N [--threads T] [--seconds S]\n"
             "GB/s of reading N bytes again and again, T threads, fastest pass over S seconds\n");
      return 0;
    } else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) {
      if (parse_size(argv[++i], &bytes)) {
        fprintf(stderr, "read-bw: --bytes wants a positive integer, not '%s'\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      fprintf(stderr, "read-bw: unknown argument '%s' (--help)\n", argv[i]);
      return 2;
    }
  }
  if (bytes < 64 || threads < 1 || threads > 1024 || !(seconds > 0)) {
    fprintf(stderr, "read-bw: needs --bytes >= 64, --threads 1..1024, --seconds > 0\n");
    return 2;
  }
  const size_t n = bytes / sizeof(float);
  float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!x) {
    fprintf(stderr, "read-bw: cannot allocate %zu bytes\n", bytes);
    return 1;
  }
  for (size_t i = 0; i < n; i++) x[i] = (float)(i & 7);
  omp_set_num_threads(threads);
  volatile float sink = 0.0f;
  double best = 0.0, end = 0.0;
  for (int pass = 0;; pass++) {
    const double t0 = now_s();
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const size_t per = (n / (size_t)nt + 15) / 16 * 16, i0 = per * (size_t)t < n ? per * (size_t)t : n;
      const size_t i1 = i0 + per < n ? i0 + per : n;
      total += sum_part(x + i0, i1 - i0);
    }
    const double t1 = now_s();
    sink += total;
    if (pass == 2) end = t1 + seconds;
    if (pass >= 3) {
      const double rate = (double)n * sizeof(float) / (t1 - t0);
      if (rate > best) best = rate;
      if (t1 >= end) break;
    }
  }
  (void)sink;
  printf("%.2f\n", best / 1e9);
  free(x);
  return 0;
}
