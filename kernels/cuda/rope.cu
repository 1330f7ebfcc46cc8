/* RoPE on [B, T, H, hd], interleaved pairs (2i, 2i + 1), one thread per
 * pair (rope.c's contract; the body: hd_elementwise.h's hd_rope_thread).
 * In place allowed: a pair is read before it is written, by the same
 * thread. The tables are computed on the host by the CPU's own rope_tables
 * (double precision, the same bits) and uploaded. */
#include "cuda_internal.cuh"
#include "hd_elementwise.h"

extern "C" void kern_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta); /* kernels/cpu/rope.c */

void cu_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta) {
  const size_t n = (size_t)T * (hd / 2);
  if (!n) return;
  float *h = (float *)boost_calloc(2 * n, sizeof(float));
  kern_rope_tables(h, h + n, T, hd, theta);
  be->mem->upload(be, cos_t, h, n * sizeof(float));
  be->mem->upload(be, sin_t, h + n, n * sizeof(float));
  boost_free(h);
}

template <int BF16>
__global__ void rope_kernel(hd_rope_args a) {
  hd_rope_thread(&a, BF16, HD_IX_HERE());
}

static void rope_launch(boost_backend *be, void *out, const void *in, const float *c, const float *s, int B, int T,
                        int H, int hd, float sign) {
  hd_rope_args a;
  a.out = out, a.in = in, a.cos_t = c, a.sin_t = s, a.T = T, a.H = H, a.half = hd / 2, a.sign = sign;
  a.npairs = (size_t)B * T * H * a.half;
  if (!a.npairs) return;
  ACT_LAUNCH(be, rope_kernel, ew_grid(CB(be), a.npairs, 256), 256, 0, a);
}

void cu_rope_forward(boost_backend *be, boost_act *out, cact *in, const float *c, const float *s, int B, int T, int H,
                     int hd) {
  rope_launch(be, out, in, c, s, B, T, H, hd, 1.0f);
}

void cu_rope_backward(boost_backend *be, boost_act *din, cact *dout, const float *c, const float *s, int B, int T,
                      int H, int hd) {
  rope_launch(be, din, dout, c, s, B, T, H, hd, -1.0f);
}
