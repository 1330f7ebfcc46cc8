/* The backend's measured GEMM peak (gemm_peak.h). A measurement, not a
 * datasheet figure: a CPU's nominal peak needs its clock under load and its
 * FMA units per core, which no portable interface gives, and what the
 * run's GEMM library reaches on this machine is the ceiling its steps
 * actually meet (bench/sgemm_peak.c measures the same way, over more
 * shapes). A GPU's bf16 peak wants a large problem to fill the device:
 * 4096^3 there. */
#include "gemm_peak.h"

#include <string.h>

#include "util.h"

double gemm_peak_flops(boost_backend *be, int n, double budget_s) {
  if (n <= 0) n = strcmp(be->name, "cuda") == 0 ? 4096 : 1024;
  const size_t bytes = (size_t)n * n * boost_dtype_size(be->act_dtype);
  boost_act *a = be->mem->alloc(be, bytes), *b = be->mem->alloc(be, bytes), *c = be->mem->alloc(be, bytes);
  double best = 0.0;
  if (a && b && c) {
    be->ops->gemm(be, 0, 1, n, n, n, a, n, b, n, 0.0f, c, n); /* warm-up: threads, packing buffers, clocks */
    be->mem->sync(be);
    const double start = boost_now_s();
    for (int i = 0; i < 3 || boost_now_s() - start < budget_s; i++) {
      const double t0 = boost_now_s();
      be->ops->gemm(be, 0, 1, n, n, n, a, n, b, n, 0.0f, c, n);
      be->mem->sync(be);
      const double dt = boost_now_s() - t0;
      if (dt > 0 && (best == 0.0 || dt < best)) best = dt;
      if (i >= 100) break;
    }
  }
  if (c) be->mem->free(be, c);
  if (b) be->mem->free(be, b);
  if (a) be->mem->free(be, a);
  return best > 0.0 ? 2.0 * n * n * (double)n / best : 0.0;
}
