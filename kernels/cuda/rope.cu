/* RoPE on [B, T, H, hd], interleaved pairs (2i, 2i + 1), one thread per
 * pair (rope.c's contract; hd_rope_index, hd_rope_pair). In place allowed:
 * a pair is read before it is written, by the same thread. The tables are
 * computed on the host by the CPU's own rope_tables (double precision, the
 * same bits) and uploaded. */
#include "cuda_internal.cuh"

extern "C" void rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta); /* kernels/cpu/rope.c */

void cu_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta) {
  const size_t n = (size_t)T * (hd / 2);
  if (!n) return;
  float *h = (float *)boost_calloc(2 * n, sizeof(float));
  rope_tables(h, h + n, T, hd, theta);
  be->mem->upload(be, cos_t, h, n * sizeof(float));
  be->mem->upload(be, sin_t, h + n, n * sizeof(float));
  boost_free(h);
}

template <int BF16>
__global__ void rope_kernel(void *out, const void *in, const float *cos_t, const float *sin_t, size_t npairs, int T,
                            int H, int half, float sign) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < npairs; p += stride) {
    int t, i;
    hd_rope_index(p, T, H, half, &t, &i);
    const float c = cos_t[(size_t)t * half + i], s = sign * sin_t[(size_t)t * half + i];
    float y0, y1;
    hd_rope_pair(hd_ld(in, 2 * p, BF16), hd_ld(in, 2 * p + 1, BF16), c, s, &y0, &y1);
    hd_st(out, 2 * p, y0, BF16);
    hd_st(out, 2 * p + 1, y1, BF16);
  }
}

static void rope_launch(boost_backend *be, void *out, const void *in, const float *c, const float *s, int B, int T,
                        int H, int hd, float sign) {
  const int half = hd / 2;
  const size_t npairs = (size_t)B * T * H * half;
  if (!npairs) return;
  ACT_LAUNCH(be, rope_kernel, ew_grid(CB(be), npairs, 256), 256, 0, out, in, c, s, npairs, T, H, half, sign);
}

void cu_rope_forward(boost_backend *be, boost_act *out, cact *in, const float *c, const float *s, int B, int T, int H,
                     int hd) {
  rope_launch(be, out, in, c, s, B, T, H, hd, 1.0f);
}

void cu_rope_backward(boost_backend *be, boost_act *din, cact *dout, const float *c, const float *s, int B, int T,
                      int H, int hd) {
  rope_launch(be, din, dout, c, s, B, T, H, hd, -1.0f);
}
