/* AdamW with decoupled weight decay and bias correction, plus the gradient
 * norm helpers.
 *   g = grad * grad_scale
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   mhat = m / (1 - b1^t); vhat = v / (1 - b2^t)
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
 * sum_squares: double accumulation over fixed 64Ki-element blocks (each block
 * summed by one thread in index order, blocks then summed in block order), so
 * the result does not depend on the thread count or scheduling. */
#include "cpu_internal.h"

#include <stdlib.h>

#include "check.h"
#include "ops.h"

void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, adamw_hparams hp, int t,
                  float grad_scale) {
  const float b1 = hp.beta1, b2 = hp.beta2;
  const float bc1 = (float)(1.0 - pow((double)hp.beta1, (double)t));
  const float bc2 = (float)(1.0 - pow((double)hp.beta2, (double)t));
  const float lr = hp.lr, eps = hp.eps, wd = hp.weight_decay;
  const float inv_bc1 = 1.0f / bc1, inv_bc2 = 1.0f / bc2;
#pragma omp parallel for simd schedule(static) if (n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] * grad_scale;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi * inv_bc1;
    float vhat = vi * inv_bc2;
    float p = param[i];
    param[i] = p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
  }
}

#define SUMSQ_BLOCK ((size_t)1 << 16)

static double sumsq_block(const float *x, size_t n) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (size_t i = 0; i < n; i++) acc += (double)x[i] * (double)x[i];
  return acc;
}

double sum_squares(const float *x, size_t n) {
  if (n <= SUMSQ_BLOCK) return sumsq_block(x, n);
  size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
  double stackbuf[512];
  double *part = nb <= 512 ? stackbuf : boost_calloc(nb, sizeof(double));
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < nb; b++) {
    size_t i0 = b * SUMSQ_BLOCK;
    size_t len = n - i0 < SUMSQ_BLOCK ? n - i0 : SUMSQ_BLOCK;
    part[b] = sumsq_block(x + i0, len);
  }
  double total = 0.0;
  for (size_t b = 0; b < nb; b++) total += part[b];
  if (part != stackbuf) boost_free(part);
  return total;
}

void scale_inplace(float *x, size_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n >= BOOST_PAR_MIN)
  for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* min(1, max_norm / norm); 1 when max_norm <= 0 or norm <= max_norm (also
 * for a NaN norm: callers detect non-finite norms themselves). An infinite
 * norm gives 0. */
float clip_scale(double norm, float max_norm) {
  if (!(max_norm > 0.0f)) return 1.0f;
  if (norm > (double)max_norm) return (float)((double)max_norm / norm);
  return 1.0f;
}
