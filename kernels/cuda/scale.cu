/* out = s * x on the device, both act types (a demonstration op). */
#include "cuda_internal.cuh"

template <int BF>
__global__ void scale_kernel(void *out, const void *x, float s, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) hd_st(out, i, s * hd_ld(x, i, BF), BF);
}

void cu_scale_forward(boost_backend *be, boost_act *out, cact *x, float s, size_t n) {
  if (!n) return;
  ACT_LAUNCH(be, scale_kernel, (unsigned)((n + 255) / 256), 256, 0, out, x, s, n);
}
