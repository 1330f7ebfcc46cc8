/* Rotary position embedding on [B, T, H, hd], interleaved pairs (2i, 2i+1).
 *   freq_i = theta^(-2i/hd), angle(t, i) = t * freq_i; tables [T, hd/2]
 *   forward : (x0, x1) -> (x0 c - x1 s, x0 s + x1 c)
 *   backward: rotation by -angle: (g0, g1) -> (g0 c + g1 s, -g0 s + g1 c)
 * In-place (out == in) is allowed: each pair is read before it is written. */
#include "cpu_internal.h"

#include "ops.h"

void kern_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta) {
  int half = hd / 2;
  for (int i = 0; i < half; i++) {
    double freq = pow((double)theta, -2.0 * i / (double)hd);
    for (int t = 0; t < T; t++) {
      double a = (double)t * freq;
      cos_t[(size_t)t * half + i] = (float)cos(a);
      sin_t[(size_t)t * half + i] = (float)sin(a);
    }
  }
}

/* sign = +1 rotates by +angle, -1 by -angle. No restrict: out may be in. */
static void rope_rotate(float *out, const float *in, const float *cos_t, const float *sin_t, int B, int T, int H,
                        int hd, float sign) {
  int half = hd / 2;
  int BT = B * T;
#pragma omp parallel for schedule(static) if (BT * (size_t)H * hd >= BOOST_PAR_MIN)
  for (int bt = 0; bt < BT; bt++) {
    int t = bt % T;
    const float *c = cos_t + (size_t)t * half;
    const float *s = sin_t + (size_t)t * half;
    for (int h = 0; h < H; h++) {
      size_t base = ((size_t)bt * H + h) * hd;
      const float *x = in + base;
      float *y = out + base;
#pragma omp simd
      for (int i = 0; i < half; i++) {
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        float ci = c[i], si = sign * s[i];
        y[2 * i] = x0 * ci - x1 * si;
        y[2 * i + 1] = x0 * si + x1 * ci;
      }
    }
  }
}

void kern_rope_forward(float *out, const float *in, const float *cos_t, const float *sin_t, int B, int T, int H, int hd) {
  rope_rotate(out, in, cos_t, sin_t, B, T, H, hd, 1.0f);
}

void kern_rope_backward(float *din, const float *dout, const float *cos_t, const float *sin_t, int B, int T, int H, int hd) {
  rope_rotate(din, dout, cos_t, sin_t, B, T, H, hd, -1.0f);
}
