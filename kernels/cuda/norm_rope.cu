/* RMSNorm and RoPE.
 *
 * RMSNorm (fp32 statistics), one warp per row:
 *   forward : rstd[n] = 1/sqrt(mean_c x^2 + eps); out = x * rstd * w
 *   backward: dot_n = sum_c g*w*x;  dx = rstd * (w*g - x * rstd^2 * dot_n / C)
 *             dw[c] += sum_n g * x * rstd, deterministically in two stages:
 *             fixed row chunks -> fp32 partials [P, C] -> summed in chunk order.
 * Rows use 16-byte vector accesses when C % 8 == 0 and the pointers are
 * 16-byte aligned. In-place (out == x, dx == dout) is allowed.
 *
 * RoPE on [B, T, H, hd], interleaved pairs (2i, 2i+1), one thread per pair:
 *   forward : (x0, x1) -> (x0 c - x1 s, x0 s + x1 c)
 *   backward: rotation by -angle. In-place allowed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.cuh"

#define ROWS_PER_BLOCK 8 /* warps per 256-thread block */

template <bool VEC>
__global__ void rmsnorm_fwd_kernel(gpu_bf16 *out, float *rstd, const gpu_bf16 *x, const gpu_bf16 *w, int N, int C,
                                   float eps) {
  int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const gpu_bf16 *xr = x + (size_t)row * C;
  gpu_bf16 *o = out + (size_t)row * C;
  float ss = 0.0f;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float f[8];
      load8_rw(f, xr + c);
#pragma unroll
      for (int k = 0; k < 8; k++) ss += f[k] * f[k];
    }
  } else {
    for (int c = lane; c < C; c += 32) {
      float f = bf2f(xr[c]);
      ss += f * f;
    }
  }
  ss = warp_sum(ss);
  float r = 1.0f / sqrtf(ss / (float)C + eps);
  if (rstd && lane == 0) rstd[row] = r;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float f[8], g[8];
      load8_rw(f, xr + c);
      load8(g, w + c);
#pragma unroll
      for (int k = 0; k < 8; k++) f[k] = f[k] * r * g[k];
      store8(o + c, f);
    }
  } else {
    for (int c = lane; c < C; c += 32) o[c] = f2bf(bf2f(xr[c]) * r * bf2f(w[c]));
  }
}

template <bool VEC>
__global__ void rmsnorm_bwd_dx_kernel(gpu_bf16 *dx, const gpu_bf16 *dout, const gpu_bf16 *x, const gpu_bf16 *w,
                                      const float *rstd, int N, int C) {
  int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const gpu_bf16 *xr = x + (size_t)row * C;
  const gpu_bf16 *g = dout + (size_t)row * C;
  gpu_bf16 *d = dx + (size_t)row * C;
  float r = rstd[row];
  float dot = 0.0f;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float xf[8], gf[8], wf[8];
      load8_rw(xf, xr + c);
      load8_rw(gf, g + c);
      load8(wf, w + c);
#pragma unroll
      for (int k = 0; k < 8; k++) dot += gf[k] * wf[k] * xf[k];
    }
  } else {
    for (int c = lane; c < C; c += 32) dot += bf2f(g[c]) * bf2f(w[c]) * bf2f(xr[c]);
  }
  dot = warp_sum(dot);
  float k2 = r * r * dot / (float)C;
  if (VEC) {
    for (int c = lane * 8; c < C; c += 32 * 8) {
      float xf[8], gf[8], wf[8];
      load8_rw(xf, xr + c);
      load8_rw(gf, g + c);
      load8(wf, w + c);
#pragma unroll
      for (int k = 0; k < 8; k++) gf[k] = r * (wf[k] * gf[k] - xf[k] * k2);
      store8(d + c, gf);
    }
  } else {
    for (int c = lane; c < C; c += 32) d[c] = f2bf(r * (bf2f(w[c]) * bf2f(g[c]) - bf2f(xr[c]) * k2));
  }
}

/* stage 1: partial[p, c] = sum over rows of chunk p of g*x*rstd */
__global__ void rmsnorm_bwd_dw_partial(float *partial, const gpu_bf16 *dout, const gpu_bf16 *x, const float *rstd,
                                       int N, int C, int rows_per_chunk) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int p = blockIdx.y;
  if (c >= C) return;
  int n0 = p * rows_per_chunk;
  int n1 = min(N, n0 + rows_per_chunk);
  float acc = 0.0f;
  for (int n = n0; n < n1; n++) {
    size_t off = (size_t)n * C + c;
    acc += bf2f(dout[off]) * bf2f(x[off]) * rstd[n];
  }
  partial[(size_t)p * C + c] = acc;
}

/* stage 2: dw[c] += sum_p partial[p, c], in chunk order */
__global__ void rmsnorm_bwd_dw_final(float *dw, const float *partial, int P, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int p = 0; p < P; p++) acc += partial[(size_t)p * C + c];
  dw[c] += acc;
}

static bool rows_vec(int C, const void *a, const void *b, const void *c, const void *d) {
  return C % 8 == 0 && aligned16(a) && aligned16(b) && aligned16(c) && (d == NULL || aligned16(d));
}

void gpu_rmsnorm_forward(gpu_ctx *ctx, gpu_bf16 *out, float *rstd, const gpu_bf16 *x, const gpu_bf16 *w, int N, int C,
                         float eps) {
  if (N <= 0 || C <= 0) return;
  unsigned grid = cdiv_u((size_t)N, ROWS_PER_BLOCK);
  if (rows_vec(C, out, x, w, NULL))
    rmsnorm_fwd_kernel<true><<<grid, 32 * ROWS_PER_BLOCK, 0, ctx->stream>>>(out, rstd, x, w, N, C, eps);
  else
    rmsnorm_fwd_kernel<false><<<grid, 32 * ROWS_PER_BLOCK, 0, ctx->stream>>>(out, rstd, x, w, N, C, eps);
  LAUNCH_CHECK();
}

void gpu_rmsnorm_backward(gpu_ctx *ctx, gpu_bf16 *dx, float *dw, const gpu_bf16 *dout, const gpu_bf16 *x,
                          const gpu_bf16 *w, const float *rstd, int N, int C) {
  if (N <= 0 || C <= 0) return;
  /* dw first: it reads dout, which dx may overwrite (in place) */
  if (dw) {
    /* chunking depends only on N: the summation order is fixed */
    int rows_per_chunk = N <= 64 * 1024 ? 64 : (N + 1023) / 1024;
    int P = (N + rows_per_chunk - 1) / rows_per_chunk;
    float *partial = (float *)gpu_scratch(ctx, (size_t)P * C * sizeof(float));
    dim3 g1(cdiv_u((size_t)C, 256), (unsigned)P);
    rmsnorm_bwd_dw_partial<<<g1, 256, 0, ctx->stream>>>(partial, dout, x, rstd, N, C, rows_per_chunk);
    LAUNCH_CHECK();
    rmsnorm_bwd_dw_final<<<cdiv_u((size_t)C, 256), 256, 0, ctx->stream>>>(dw, partial, P, C);
    LAUNCH_CHECK();
  }
  if (dx) {
    unsigned grid = cdiv_u((size_t)N, ROWS_PER_BLOCK);
    if (rows_vec(C, dx, dout, x, w))
      rmsnorm_bwd_dx_kernel<true><<<grid, 32 * ROWS_PER_BLOCK, 0, ctx->stream>>>(dx, dout, x, w, rstd, N, C);
    else
      rmsnorm_bwd_dx_kernel<false><<<grid, 32 * ROWS_PER_BLOCK, 0, ctx->stream>>>(dx, dout, x, w, rstd, N, C);
    LAUNCH_CHECK();
  }
}

/* ---- RoPE ------------------------------------------------------------------ */

void gpu_rope_tables(gpu_ctx *ctx, float *cos_t, float *sin_t, int T, int hd, float theta) {
  int half = hd / 2;
  size_t n = (size_t)T * half;
  if (!n) return;
  float *hc = (float *)malloc(n * sizeof(float));
  float *hs = (float *)malloc(n * sizeof(float));
  if (!hc || !hs) {
    fprintf(stderr, "boost: out of host memory in gpu_rope_tables\n");
    exit(1);
  }
  /* exactly the CPU rope_tables formula */
  for (int i = 0; i < half; i++) {
    double freq = pow((double)theta, -2.0 * i / (double)hd);
    for (int t = 0; t < T; t++) {
      double a = (double)t * freq;
      hc[(size_t)t * half + i] = (float)cos(a);
      hs[(size_t)t * half + i] = (float)sin(a);
    }
  }
  gpu_upload(ctx, cos_t, hc, n * sizeof(float));
  gpu_upload(ctx, sin_t, hs, n * sizeof(float));
  free(hc);
  free(hs);
}

__global__ void rope_kernel(gpu_bf16 *out, const gpu_bf16 *in, const float *cos_t, const float *sin_t, size_t npairs,
                            int T, int H, int half, float sign) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < npairs; idx += stride) {
    int i = (int)(idx % half);
    size_t rest = idx / half; /* (b*T + t)*H + h */
    int t = (int)((rest / H) % T);
    float c = __ldg(cos_t + (size_t)t * half + i);
    float s = sign * __ldg(sin_t + (size_t)t * half + i);
    float x0 = bf2f(in[2 * idx]), x1 = bf2f(in[2 * idx + 1]);
    out[2 * idx] = f2bf(x0 * c - x1 * s);
    out[2 * idx + 1] = f2bf(x0 * s + x1 * c);
  }
}

static void rope_launch(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *in, const float *cos_t, const float *sin_t,
                        int B, int T, int H, int hd, float sign) {
  int half = hd / 2;
  size_t npairs = (size_t)B * T * H * half;
  if (!npairs) return;
  rope_kernel<<<ew_grid(ctx, npairs, 256), 256, 0, ctx->stream>>>(out, in, cos_t, sin_t, npairs, T, H, half, sign);
  LAUNCH_CHECK();
}

void gpu_rope_forward(gpu_ctx *ctx, gpu_bf16 *out, const gpu_bf16 *in, const float *cos_t, const float *sin_t, int B,
                      int T, int H, int hd) {
  rope_launch(ctx, out, in, cos_t, sin_t, B, T, H, hd, 1.0f);
}

void gpu_rope_backward(gpu_ctx *ctx, gpu_bf16 *din, const gpu_bf16 *dout, const float *cos_t, const float *sin_t,
                       int B, int T, int H, int hd) {
  rope_launch(ctx, din, dout, cos_t, sin_t, B, T, H, hd, -1.0f);
}
