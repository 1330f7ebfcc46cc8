/* Elementwise ops over flat arrays of n floats.
 *   silu: out = x * sigmoid(x);  dx = dout * s * (1 + x (1 - s)), s = sigmoid(x)
 *   mul : out = a * b;           da = dout * b, db = dout * a (NULL skips)
 *   add : out = a + b            (backward is the identity: no kernel)
 * In-place use (out == x, dx == dout, ...) is allowed. */
#include "cpu_internal.h"

#include "ops.h"

void kern_silu_forward(float *out, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float xi = x[i];
    out[i] = xi * boost_sigmoidf(xi);
  }
}

void kern_silu_backward(float *dx, const float *dout, const float *x, size_t n) {
  if (!dx) return;
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float xi = x[i];
    float s = boost_sigmoidf(xi);
    dx[i] = dout[i] * s * (1.0f + xi * (1.0f - s));
  }
}

void kern_mul_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void kern_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, size_t n) {
  if (da && db) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
      float g = dout[i], ai = a[i], bi = b[i]; /* read all first: da/db may alias a, b or dout */
      da[i] = g * bi;
      db[i] = g * ai;
    }
  } else if (da) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
    for (size_t i = 0; i < n; i++) da[i] = dout[i] * b[i];
  } else if (db) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
    for (size_t i = 0; i < n; i++) db[i] = dout[i] * a[i];
  }
}

void kern_add_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
