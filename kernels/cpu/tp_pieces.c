/* Pieces the tensor-parallel model composes around its collectives: the
 * accumulate, the btp RMSNorm folded into the A-GEMM, and the
 * vocab-parallel cross-entropy (contracts in ops.h).
 *
 * This file deliberately does not include cpu_internal.h: these loops were
 * written against libm's expf/logf/sqrtf and GCC's default FP options, and
 * the trainer's bit-identical trajectory test holds them to exactly that
 * code generation. */
#include <cblas.h>
#include <math.h>

#include "ops.h"

void kern_add_inplace(float *y, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void kern_gain_sumsq_forward(float *xg, float *ss, const float *x, const float *gain, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float s = 0.0f;
    for (int c = 0; c < C; c++) {
      const float v = x[(size_t)n * C + c];
      s += v * v;
      xg[(size_t)n * C + c] = v * gain[c];
    }
    ss[n] = s;
  }
}

void kern_gain_sumsq_backward(float *dx_acc, float *dgain, const float *dxg, const float *x, const float *gain,
                         const float *dss, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; c++) {
    float s = 0.0f;
    for (int n = 0; n < N; n++) s += dxg[(size_t)n * C + c] * x[(size_t)n * C + c];
    dgain[c] += s;
  }
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      dx_acc[(size_t)n * C + c] += dxg[(size_t)n * C + c] * gain[c] + 2.0f * x[(size_t)n * C + c] * dss[n];
}

void kern_online_rms_forward(float *h, float *rstd, const float *ss, int N, int w, float inv_d, float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float r = 1.0f / sqrtf(ss[n] * inv_d + eps);
    rstd[n] = r;
    for (int c = 0; c < w; c++) h[(size_t)n * w + c] *= r;
  }
}

void kern_online_rms_backward(float *dh, float *dss, const float *h_scaled, const float *rstd, int N, int w, float inv_d) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    /* h_scaled = h_raw * rstd: d rstd = sum dh * h_raw; dh_raw = dh * rstd */
    const float r = rstd[n];
    float drstd = 0.0f;
    for (int c = 0; c < w; c++) {
      drstd += dh[(size_t)n * w + c] * h_scaled[(size_t)n * w + c];
      dh[(size_t)n * w + c] *= r;
    }
    drstd /= r;
    dss[n] = -0.5f * drstd * r * r * r * inv_d;
  }
}

void kern_vocab_ce_max(float *mx, const float *logits, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float m = -INFINITY;
    for (int v = 0; v < V; v++) m = fmaxf(m, logits[(size_t)n * V + v]);
    mx[n] = m;
  }
}

void kern_vocab_ce_sums(float *sums, const float *logits, const float *mx, const int32_t *targets, int v0, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *row = logits + (size_t)n * V;
    double s = 0.0;
    for (int v = 0; v < V; v++) s += expf(row[v] - mx[n]);
    const int t = targets[n] - v0;
    sums[n] = (float)s;
    sums[N + n] = (t >= 0 && t < V) ? row[t] : 0.0f;
  }
}

void kern_vocab_ce_losses(float *losses, const float *sums, const float *mx, int N) {
  for (int n = 0; n < N; n++) losses[n] = logf(sums[n]) + mx[n] - sums[N + n];
}

void kern_vocab_ce_backward(float *logits, const float *sums, const float *mx, const int32_t *targets, int v0, int N, int V,
                       float scale) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float *row = logits + (size_t)n * V;
    const float inv = 1.0f / sums[n], m = mx[n];
    for (int v = 0; v < V; v++) row[v] = expf(row[v] - m) * inv * scale;
    const int t = targets[n] - v0;
    if (t >= 0 && t < V) row[t] -= scale;
  }
}

double kern_loss_mean(const float *losses, int N) {
  double sum = 0.0;
  for (int i = 0; i < N; i++) sum += losses[i];
  return sum / N;
}
