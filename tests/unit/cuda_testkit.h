/* What the CPU-side tests of the CUDA kernels share: the grid runner
 * (grid_run.h), activation storage in float or bf16, and tolerant
 * comparisons. */
#ifndef BOOST_TESTS_CUDA_TESTKIT_H
#define BOOST_TESTS_CUDA_TESTKIT_H

#include "grid_run.h"
#include "ops_testkit.h"

/* dst = bf16 of src; src becomes the rounded values */
static inline void to_bf16(uint16_t *dst, float *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    dst[i] = hd_bf16_bits(src[i]);
    src[i] = hd_bf16_value(dst[i]);
  }
}

/* act copy of x: float, or bf16 (x becomes the rounded values) */
static inline void *act_of(float *x, size_t n, int bf16) {
  if (!bf16) return fcopy(x, n);
  uint16_t *h = malloc(n * 2);
  to_bf16(h, x, n);
  return h;
}
static inline float *f32_of(const void *p, size_t n, int bf16) {
  float *f = falloc(n);
  for (size_t i = 0; i < n; i++) f[i] = hd_ld(p, i, bf16);
  return f;
}

static inline void close_f(const char *what, const float *got, const float *want, size_t n, double rtol, double atol) {
  for (size_t i = 0; i < n; i++)
    cr_assert(fabs((double)got[i] - (double)want[i]) <= atol + rtol * fabs((double)want[i]),
              "%s[%zu]: %.9g, want %.9g", what, i, (double)got[i], (double)want[i]);
}

#endif
