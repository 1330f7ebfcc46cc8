/* RMSNorm (no bias, no mean subtraction).
 *   forward : rstd[n] = 1/sqrt(mean_c x[n,c]^2 + eps); out = x * rstd * w
 *   backward: with g = dout, dot_n = sum_c g*w*x,
 *             dx[n,c] = rstd * (w*g - x * rstd^2 * dot_n / C)   (assign)
 *             dw[c]  += sum_n g * x * rstd                         (accumulate)
 * Shapes: x, out, dout, dx [N, C]; w, dw [C]; rstd [N] (may be NULL in forward).
 * dx parallelises over tokens; dw over column slices, each summing tokens in
 * order (deterministic for any thread count). */
#include "cpu_internal.h"

#include "ops.h"

void kern_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if (N * (size_t)C >= BOOST_PAR_MIN)
  for (int n = 0; n < N; n++) {
    const float *restrict xr = x + (size_t)n * C;
    float *restrict o = out + (size_t)n * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; c++) ss += xr[c] * xr[c];
    float r = 1.0f / sqrtf(ss / (float)C + eps);
    if (rstd) rstd[n] = r;
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = xr[c] * r * w[c];
  }
}

void kern_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd, int N,
                      int C) {
  if (N <= 0 || C <= 0) return;
  int par = N * (size_t)C >= BOOST_PAR_MIN;
  if (dx) {
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
      const float *restrict xr = x + (size_t)n * C;
      const float *restrict g = dout + (size_t)n * C;
      float *restrict d = dx + (size_t)n * C;
      float r = rstd[n];
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int c = 0; c < C; c++) dot += g[c] * w[c] * xr[c];
      float k = r * r * dot / (float)C;
#pragma omp simd
      for (int c = 0; c < C; c++) d[c] = r * (w[c] * g[c] - xr[c] * k);
    }
  }
  if (dw) {
    int nt = boost_omp_threads();
    int width = (C + nt - 1) / nt;
    width = (width + 15) / 16 * 16;
    int nslices = (C + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int s = 0; s < nslices; s++) {
      int c0 = s * width;
      int c1 = c0 + width < C ? c0 + width : C;
      for (int n = 0; n < N; n++) {
        const float *restrict xr = x + (size_t)n * C;
        const float *restrict g = dout + (size_t)n * C;
        float r = rstd[n];
#pragma omp simd
        for (int c = c0; c < c1; c++) dw[c] += g[c] * xr[c] * r;
      }
    }
  }
}
