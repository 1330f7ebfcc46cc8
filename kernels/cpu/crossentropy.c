/* Fused softmax cross-entropy over logits [N, V], one row per token.
 *   m = max_v x[v];  lse = m + log(sum_v exp(x[v] - m))
 *   losses[n]  = lse - x[target], computed as (m - x[target]) + log(sum)
 *   dlogits    = (softmax(x) - onehot(target)) * dloss     (assign)
 * The backward may run in place (dlogits == logits): each element is read
 * before it is overwritten, and x[target] is taken before any write. It
 * evaluates exp once per element (stored, then scaled by dloss/sum).
 * Rows are independent: OpenMP over tokens, static schedule. */
#include "cpu_internal.h"

#include "ops.h"

static inline float row_max(const float *x, int V) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int v = 0; v < V; v++) m = x[v] > m ? x[v] : m;
  return m;
}

void kern_crossentropy_forward(float *losses, const float *logits, const int32_t *targets, int N, int V) {
#pragma omp parallel for schedule(static) if (N * (size_t)V >= BOOST_PAR_MIN)
  for (int n = 0; n < N; n++) {
    const float *x = logits + (size_t)n * V;
    float m = row_max(x, V);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += boost_expf_nonpos(x[v] - m);
    losses[n] = (m - x[targets[n]]) + logf(sum);
  }
}

void kern_crossentropy_backward(float *dlogits, float *losses, const float *logits, const int32_t *targets, int N, int V,
                           float dloss) {
#pragma omp parallel for schedule(static) if (N * (size_t)V >= BOOST_PAR_MIN)
  for (int n = 0; n < N; n++) {
    const float *x = logits + (size_t)n * V;
    float *d = dlogits + (size_t)n * V;
    int tgt = targets[n];
    float xt = x[tgt];
    float m = row_max(x, V);
    float sum = 0.0f;
    /* d may alias x: same index read then written, no cross-lane overlap */
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) {
      float e = boost_expf_nonpos(x[v] - m);
      d[v] = e;
      sum += e;
    }
    float k = dloss / sum;
#pragma omp simd
    for (int v = 0; v < V; v++) d[v] *= k;
    d[tgt] -= dloss;
    if (losses) losses[n] = (m - xt) + logf(sum);
  }
}
