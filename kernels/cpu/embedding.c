/* Token embedding lookup.
 *   forward : out[N,C] = wte[tokens[n], :]          wte [V, C]
 *   backward: dwte[V,C] += scatter-add of dout rows
 * The backward splits the C columns over threads; every thread walks all N
 * tokens in order for its column slice, so each dwte element sums its
 * contributions in token order: deterministic, independent of the thread
 * count, and free of atomics. Tokens are assumed valid (callers validate). */
#include "cpu_internal.h"

#include "ops.h"

void kern_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int V, int C) {
  (void)V;
#pragma omp parallel for schedule(static) if (N * (size_t)C >= BOOST_PAR_MIN)
  for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
}

void kern_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N, int V, int C) {
  (void)V;
  if (N <= 0 || C <= 0) return;
  int nt = boost_omp_threads();
  /* column slices of whole 64-byte lines, at least 16 floats wide */
  int width = (C + nt - 1) / nt;
  width = (width + 15) / 16 * 16;
  int nslices = (C + width - 1) / width;
#pragma omp parallel for schedule(static) if (N * (size_t)C >= BOOST_PAR_MIN)
  for (int s = 0; s < nslices; s++) {
    int c0 = s * width;
    int c1 = c0 + width < C ? c0 + width : C;
    for (int n = 0; n < N; n++) {
      float *restrict drow = dwte + (size_t)tokens[n] * C;
      const float *restrict grow = dout + (size_t)n * C;
#pragma omp simd
      for (int c = c0; c < c1; c++) drow[c] += grow[c];
    }
  }
}
