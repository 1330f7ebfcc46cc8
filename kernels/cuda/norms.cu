/* RMSNorm and the btp norm pieces (gain_sumsq, online_rms): contracts in
 * kernels/cpu/ops.h, arithmetic in hd_ops.h.
 *
 * Row reductions: one warp per row, each lane summing its strided columns
 * in float, then the xor butterfly (every lane gets the same bits).
 * Column reductions (the gain gradients dw, dgain): fixed chunks of rows
 * give float partials [P, C] (each summed in row order), then the partials
 * are summed in chunk order and added once; chunking depends only on N.
 * No atomics: every result is reproducible bit for bit. In place is allowed
 * where the CPU allows it (out == x; the column sums run before dx). */
#include "cuda_internal.cuh"

#define ROWS_PER_BLOCK 8 /* warps per 256-thread block, one row each */

static unsigned row_grid(int N) { return cdiv_u((size_t)N, ROWS_PER_BLOCK); }

template <int BF16>
__global__ void rmsnorm_fwd_kernel(void *out, float *rstd, const void *x, const void *w, int N, int C, float eps) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t o = (size_t)row * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float v = hd_ld(x, o + c, BF16);
    ss += v * v;
  }
  const float r = hd_rms_rstd(warp_sum(ss), C, eps);
  if (rstd && lane == 0) rstd[row] = r;
  for (int c = lane; c < C; c += 32) hd_st(out, o + c, hd_rms_out(hd_ld(x, o + c, BF16), r, hd_ld(w, c, BF16)), BF16);
}

template <int BF16>
__global__ void rmsnorm_dx_kernel(void *dx, const void *dout, const void *x, const void *w, const float *rstd, int N,
                                  int C) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t o = (size_t)row * C;
  const float r = rstd[row];
  float dot = 0.0f;
  for (int c = lane; c < C; c += 32)
    dot += hd_rms_dot_term(hd_ld(dout, o + c, BF16), hd_ld(w, c, BF16), hd_ld(x, o + c, BF16));
  const float k = hd_rms_k(r, warp_sum(dot), C);
  for (int c = lane; c < C; c += 32)
    hd_st(dx, o + c, hd_rms_dx(r, hd_ld(w, c, BF16), hd_ld(dout, o + c, BF16), hd_ld(x, o + c, BF16), k), BF16);
}

/* partial[p, c] = sum over the rows of chunk p of a * b (* rowscale[n]) */
template <int BF16>
__global__ void colsum_partial_kernel(float *partial, const void *a, const void *b, const float *rowscale, int N,
                                      int C, int rows_per_chunk) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
  if (c >= C) return;
  const int n1 = min(N, (p + 1) * rows_per_chunk);
  float acc = 0.0f;
  for (int n = p * rows_per_chunk; n < n1; n++) {
    const size_t i = (size_t)n * C + c;
    const float av = hd_ld(a, i, BF16), bv = hd_ld(b, i, BF16);
    acc += rowscale ? hd_rms_dw_term(av, bv, rowscale[n]) : av * bv;
  }
  partial[(size_t)p * C + c] = acc;
}

__global__ void colsum_final_kernel(float *out, const float *partial, int P, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int p = 0; p < P; p++) acc += partial[(size_t)p * C + c];
  out[c] += acc;
}

/* out[c] += sum_n a[n, c] * b[n, c] (* rowscale[n]) */
static void colsum(boost_backend *be, float *out, const void *a, const void *b, const float *rowscale, int N, int C) {
  cuda_be *c = CB(be);
  const int rows_per_chunk = N <= 64 * 1024 ? 64 : (N + 1023) / 1024;
  const int P = (N + rows_per_chunk - 1) / rows_per_chunk;
  float *partial = (float *)cuda_scratch(c, (size_t)P * C * sizeof(float));
  ACT_LAUNCH(be, colsum_partial_kernel, dim3(cdiv_u((size_t)C, 256), (unsigned)P), 256, 0, partial, a, b, rowscale, N,
             C, rows_per_chunk);
  colsum_final_kernel<<<cdiv_u((size_t)C, 256), 256, 0, c->stream>>>(out, partial, P, C);
  LAUNCH_CHECK();
}

void cu_rmsnorm_forward(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C, float eps) {
  if (N <= 0 || C <= 0) return;
  ACT_LAUNCH(be, rmsnorm_fwd_kernel, row_grid(N), 32 * ROWS_PER_BLOCK, 0, out, rstd, x, w, N, C, eps);
}

void cu_rmsnorm_backward(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w, const float *rstd,
                         int N, int C) {
  if (N <= 0 || C <= 0) return;
  if (dw) colsum(be, dw, dout, x, rstd, N, C); /* before dx: dx may overwrite dout */
  if (dx) ACT_LAUNCH(be, rmsnorm_dx_kernel, row_grid(N), 32 * ROWS_PER_BLOCK, 0, dx, dout, x, w, rstd, N, C);
}

/* ---- btp: xg = x * gain with each row's local sum of squares ---------------- */

template <int BF16>
__global__ void gain_sumsq_kernel(void *xg, float *ss, const void *x, const void *gain, int N, int C) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t o = (size_t)row * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float v = hd_ld(x, o + c, BF16);
    s += v * v;
    hd_st(xg, o + c, v * hd_ld(gain, c, BF16), BF16);
  }
  s = warp_sum(s);
  if (lane == 0) ss[row] = s;
}

template <int BF16>
__global__ void gain_dx_kernel(void *dx_acc, const void *dxg, const void *x, const void *gain, const float *dss, int N,
                               int C) {
  const size_t total = (size_t)N * C, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t n = i / (size_t)C, c = i % (size_t)C;
    hd_st(dx_acc, i,
          hd_gain_dx(hd_ld(dx_acc, i, BF16), hd_ld(dxg, i, BF16), hd_ld(gain, c, BF16), hd_ld(x, i, BF16), dss[n]),
          BF16);
  }
}

void cu_gain_sumsq_forward(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C) {
  if (N <= 0) return;
  ACT_LAUNCH(be, gain_sumsq_kernel, row_grid(N), 32 * ROWS_PER_BLOCK, 0, xg, ss, x, gain, N, C);
}

void cu_gain_sumsq_backward(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                            const float *dss, int N, int C) {
  if (N <= 0 || C <= 0) return;
  colsum(be, dgain, dxg, x, NULL, N, C);
  ACT_LAUNCH(be, gain_dx_kernel, ew_grid(CB(be), (size_t)N * C, 256), 256, 0, dx_acc, dxg, x, gain, dss, N, C);
}

/* ---- btp: the bottleneck scaled by the global rstd ----------------------------- */

template <int BF16>
__global__ void online_rms_fwd_kernel(void *h, float *rstd, const float *ss, int N, int w, float inv_d, float eps) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float r = hd_online_rstd(ss[row], inv_d, eps);
  if (lane == 0) rstd[row] = r;
  const size_t o = (size_t)row * w;
  for (int c = lane; c < w; c += 32) hd_st(h, o + c, hd_ld(h, o + c, BF16) * r, BF16);
}

template <int BF16>
__global__ void online_rms_bwd_kernel(void *dh, float *dss, const void *hs, const float *rstd, int N, int w,
                                      float inv_d) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float r = rstd[row];
  const size_t o = (size_t)row * w;
  float acc = 0.0f;
  for (int c = lane; c < w; c += 32) {
    const float g = hd_ld(dh, o + c, BF16); /* read, then overwritten by the same lane */
    acc += g * hd_ld(hs, o + c, BF16);
    hd_st(dh, o + c, g * r, BF16);
  }
  acc = warp_sum(acc);
  if (lane == 0) dss[row] = hd_online_dss(acc, r, inv_d);
}

void cu_online_rms_forward(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w, float inv_d,
                           float eps) {
  if (N <= 0) return;
  ACT_LAUNCH(be, online_rms_fwd_kernel, row_grid(N), 32 * ROWS_PER_BLOCK, 0, h, rstd, ss, N, w, inv_d, eps);
}

void cu_online_rms_backward(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd, int N,
                            int w, float inv_d) {
  if (N <= 0) return;
  ACT_LAUNCH(be, online_rms_bwd_kernel, row_grid(N), 32 * ROWS_PER_BLOCK, 0, dh, dss, h_scaled, rstd, N, w, inv_d);
}
