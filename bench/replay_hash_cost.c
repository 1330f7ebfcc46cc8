/* What the step guard's replay adds to every step with data parallelism
 * (bench/bench_guard.sh, docs/GUARD.md "Silent data corruption"): each
 * rank hashes its own gradients (XXH3-64) bucket by bucket just before the
 * reduction takes them. Timed two ways over an arena of FLOATS floats:
 * buckets of BUCKET_MB MiB each hashed right after it was written (as the
 * backward leaves it: in cache), and the whole arena hashed cold in one
 * pass (dp > 2, where the reduction is one call after the backward).
 *   replay-hash-cost [FLOATS] [BUCKET_MB] [REPEATS]
 * (defaults: cola-60m's 42,770,000 parameters, 4 MiB, 10) */
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h> /* as trainer/trainer_heal.c hashes */
#endif

#include "util.h"

int main(int argc, char **argv) {
  const size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 42770000u;
  const double bucket_mb = argc > 2 ? atof(argv[2]) : 4.0;
  const int reps = argc > 3 ? atoi(argv[3]) : 10;
  const size_t bucket = (size_t)(bucket_mb * (1 << 20) / sizeof(float));
  if (n == 0 || bucket == 0 || reps < 1) {
    fprintf(stderr, "usage: replay-hash-cost [FLOATS>0] [BUCKET_MB>0] [REPEATS>=1]\n");
    return 2;
  }
  float *g = malloc(n * sizeof *g);
  XXH3_state_t *h = XXH3_createState();
  if (!g || !h) {
    fprintf(stderr, "replay-hash-cost: out of memory for %zu floats\n", n);
    return 1;
  }
  for (size_t i = 0; i < n; i++) g[i] = (float)(i % 1009) * 1e-3f;
  double warm = 0, cold = 0;
  uint64_t sink = 0;
  for (int r = 0; r < reps; r++) {
    XXH3_64bits_reset(h);
    for (size_t to = n; to > 0;) { /* from the tail, as the backward finishes them */
      const size_t from = to > bucket ? to - bucket : 0;
      for (size_t i = from; i < to; i++) g[i] += 1e-7f; /* the backward's last write */
      const double t0 = boost_now_s();
      const uint64_t range[2] = {from, to};
      XXH3_64bits_update(h, range, sizeof range);
      XXH3_64bits_update(h, g + from, (to - from) * sizeof *g);
      warm += boost_now_s() - t0;
      to = from;
    }
    sink ^= XXH3_64bits_digest(h);
    for (size_t i = 0; i < n; i += 4096) g[i] += 1e-7f;
    const double t1 = boost_now_s();
    sink ^= XXH3_64bits(g, n * sizeof *g);
    cold += boost_now_s() - t1;
  }
  const double gb = (double)n * sizeof *g / 1e9;
  printf("replay hash of %zu floats (%.0f MB): buckets of %.1f MiB in cache %.2f ms per step (%.1f GB/s); whole arena "
         "cold %.2f ms (%.1f GB/s)  [%016llx]\n",
         n, gb * 1e3, bucket_mb, warm / reps * 1e3, gb * reps / warm, cold / reps * 1e3, gb * reps / cold,
         (unsigned long long)sink);
  XXH3_freeState(h);
  free(g);
  return 0;
}
