/* RMSNorm and the btp norm pieces (gain_sumsq, online_rms): contracts in
 * kernels/cpu/ops.h, arithmetic in hd_ops.h, the kernels' bodies and phases
 * in hd_norms.h.
 *
 * Row reductions: one warp per row, each lane summing its strided columns
 * in float, then the xor butterfly (every lane gets the same bits).
 * Column reductions (the gain gradients dw, dgain): fixed chunks of rows
 * give float partials [P, C] (each summed in row order), then the partials
 * are summed in chunk order and added once; chunking depends only on N.
 * No atomics: every result is reproducible bit for bit. In place is allowed
 * where the CPU allows it (out == x; the column sums run before dx). */
#include "cuda_internal.cuh"
#include "hd_norms.h"

static hd_norm_args norm_args(void *y, float *rowf, const void *x, const void *w, const void *g, const float *rowin,
                              int N, int C) {
  hd_norm_args a;
  memset(&a, 0, sizeof a);
  a.y = y, a.rowf = rowf, a.x = x, a.w = w, a.g = g, a.rowin = rowin, a.N = N, a.C = C;
  return a;
}

template <int BF16>
__global__ void rmsnorm_fwd_kernel(hd_norm_args a) {
  hd_regs r;
  RUN_PHASES(HD_ROW_PHASES, hd_row_sync, r, hd_rmsnorm_fwd_phase(&a, BF16, HD_IX_HERE(), ph, &r));
}
template <int BF16>
__global__ void rmsnorm_dx_kernel(hd_norm_args a) {
  hd_regs r;
  RUN_PHASES(HD_ROW_PHASES, hd_row_sync, r, hd_rmsnorm_dx_phase(&a, BF16, HD_IX_HERE(), ph, &r));
}
template <int BF16>
__global__ void gain_sumsq_kernel(hd_norm_args a) {
  hd_regs r;
  RUN_PHASES(HD_ROW_PHASES, hd_row_sync, r, hd_gain_sumsq_phase(&a, BF16, HD_IX_HERE(), ph, &r));
}
template <int BF16>
__global__ void gain_dx_kernel(hd_norm_args a) {
  hd_gain_dx_thread(&a, BF16, HD_IX_HERE());
}
template <int BF16>
__global__ void online_rms_fwd_kernel(hd_norm_args a) {
  hd_online_rms_fwd_thread(&a, BF16, HD_IX_HERE());
}
template <int BF16>
__global__ void online_rms_bwd_kernel(hd_norm_args a) {
  hd_regs r;
  RUN_PHASES(HD_ROW_PHASES, hd_row_sync, r, hd_online_rms_bwd_phase(&a, BF16, HD_IX_HERE(), ph, &r));
}
template <int BF16>
__global__ void colsum_partial_kernel(hd_colsum_args a) {
  hd_colsum_partial_thread(&a, BF16, HD_IX_HERE());
}
__global__ void colsum_final_kernel(hd_colsum_args a) { hd_colsum_final_thread(&a, HD_IX_HERE()); }

#define ROW_LAUNCH(kernel, N, args) ACT_LAUNCH(be, kernel, hd_row_blocks(N), HD_ROW_THREADS, 0, args)

/* out[c] += sum_n a[n, c] * b[n, c] (* rowscale[n]) */
static void colsum(boost_backend *be, float *out, const void *a, const void *b, const float *rowscale, int N, int C) {
  cuda_be *c = CB(be);
  const int P = hd_colsum_chunks(N);
  hd_colsum_args args;
  args.out = out, args.a = a, args.b = b, args.rowscale = rowscale, args.N = N, args.C = C;
  args.partial = (float *)cuda_scratch(c, (size_t)P * C * sizeof(float));
  ACT_LAUNCH(be, colsum_partial_kernel, dim3(cdiv_u((size_t)C, HD_COLSUM_THREADS), (unsigned)P), HD_COLSUM_THREADS,
             0, args);
  colsum_final_kernel<<<cdiv_u((size_t)C, HD_COLSUM_THREADS), HD_COLSUM_THREADS, 0, c->stream>>>(args);
  LAUNCH_CHECK();
}

void cu_rmsnorm_forward(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C, float eps) {
  if (N <= 0 || C <= 0) return;
  hd_norm_args a = norm_args(out, rstd, x, w, NULL, NULL, N, C);
  a.eps = eps;
  ROW_LAUNCH(rmsnorm_fwd_kernel, N, a);
}

void cu_rmsnorm_backward(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w, const float *rstd,
                         int N, int C) {
  if (N <= 0 || C <= 0) return;
  if (dw) colsum(be, dw, dout, x, rstd, N, C); /* before dx: dx may overwrite dout */
  if (dx) ROW_LAUNCH(rmsnorm_dx_kernel, N, norm_args(dx, NULL, x, w, dout, rstd, N, C));
}

/* ---- btp: xg = x * gain with each row's local sum of squares ---------------- */

void cu_gain_sumsq_forward(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C) {
  if (N <= 0) return;
  ROW_LAUNCH(gain_sumsq_kernel, N, norm_args(xg, ss, x, gain, NULL, NULL, N, C));
}

void cu_gain_sumsq_backward(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                            const float *dss, int N, int C) {
  if (N <= 0 || C <= 0) return;
  colsum(be, dgain, dxg, x, NULL, N, C);
  ACT_LAUNCH(be, gain_dx_kernel, ew_grid(CB(be), (size_t)N * C, 256), 256, 0,
             norm_args(dx_acc, NULL, x, gain, dxg, dss, N, C));
}

/* ---- btp: the bottleneck scaled by the global rstd ----------------------------- */

void cu_online_rms_forward(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w, float inv_d,
                           float eps) {
  if (N <= 0) return;
  hd_norm_args a = norm_args(h, rstd, NULL, NULL, NULL, ss, N, w);
  a.inv_d = inv_d, a.eps = eps;
  ROW_LAUNCH(online_rms_fwd_kernel, N, a);
}

void cu_online_rms_backward(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd, int N,
                            int w, float inv_d) {
  if (N <= 0) return;
  hd_norm_args a = norm_args(dh, dss, NULL, NULL, h_scaled, rstd, N, w);
  a.inv_d = inv_d;
  ROW_LAUNCH(online_rms_bwd_kernel, N, a);
}
