/* Private helpers shared by the CPU kernels (not part of the ops.h contract).
 *
 * boost_expf: a branch-free expf that gcc vectorises inside `#pragma omp simd`
 * loops. glibc's expf only vectorises under -ffast-math (libmvec), and the
 * scalar call costs ~10x more than a 16-lane polynomial on the cross-entropy
 * and softmax paths. Cephes-style: x = n*ln2 + r, |r| <= ln2/2, degree-6
 * polynomial, 2^n built in the exponent bits. Max relative error 1e-7
 * (about 1 ulp) over [-87.33, 88.72]; exp(x) = 0 below -87.33 (no denormal
 * results), +inf above 88.72, NaN propagates.
 *
 * The selects in it only if-convert (vectorise) without -ftrapping-math, so
 * this header turns trapping math off for the rest of the translation unit
 * that includes it (our kernels never read FP exception flags). Include it
 * first. */
#ifndef BOOST_KERNELS_CPU_INTERNAL_H
#define BOOST_KERNELS_CPU_INTERNAL_H

#pragma GCC optimize("no-trapping-math")

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

typedef union {
  float f;
  uint32_t u;
} boost_fu32;

static inline float boost_expf(float x) {
  const float lo = -87.33f, hi = 88.72283f;
  float xc = x < lo ? lo : x; /* NaN passes through both compares */
  xc = xc > hi ? hi : xc;
  const float shift = 0x1.8p23f;
  /* n = round(x/ln2) by the 1.5*2^23 shift: no float->int cast (NaN-safe) */
  boost_fu32 k;
  k.f = xc * 1.44269504088896341f + shift;
  float kf = k.f - shift;
  float r = xc - kf * 0.693359375f; /* ln2 split, hi part exact */
  r = r - kf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t n = (int32_t)(k.u - 0x4B400000u); /* in [-126, 128] unless x is NaN */
  int32_t n1 = n / 2;
  boost_fu32 s1, s2; /* 2^n as 2^n1 * 2^(n-n1): n may be 128 */
  s1.u = (uint32_t)(n1 + 127) << 23;
  s2.u = (uint32_t)(n - n1 + 127) << 23;
  float y = p * s1.f * s2.f;
  y = x < lo ? 0.0f : y;
  y = x > hi ? INFINITY : y;
  return y;
}

/* sigmoid via boost_expf; exact limits 0 and 1 for large |x|. */
static inline float boost_sigmoidf(float x) { return 1.0f / (1.0f + boost_expf(-x)); }

static inline int boost_omp_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* Elementwise loops below this size stay on one thread (fork/join costs
 * more than the work). Does not affect results: elementwise ops are exact. */
#define BOOST_PAR_MIN 16384

#endif
