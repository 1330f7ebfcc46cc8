/* The bodies and phases of the norm kernels (norms.cu): RMSNorm, the btp
 * pieces gain_sumsq and online_rms, and the column sums of their gain
 * gradients (hd_grid.h explains bodies, phases and hd_ix).
 *
 * Row kernels: one warp per row (HD_ROWS_PER_BLOCK rows per 256-thread
 * block), each lane summing its strided columns in float in phase 0, the
 * warp's butterfly after it (HD_WARP_SUM_F), the row's outputs in phase 1.
 * Column sums: fixed chunks of rows give float partials [P, C] (each summed
 * in row order), then the partials are summed in chunk order and added
 * once; the chunking depends only on N. */
#ifndef BOOST_CUDA_HD_NORMS_H
#define BOOST_CUDA_HD_NORMS_H

#include "hd_grid.h"
#include "hd_ops.h"

#define HD_ROWS_PER_BLOCK 8 /* warps per 256-thread block, one row each */
#define HD_ROW_THREADS (32 * HD_ROWS_PER_BLOCK)
#define HD_ROW_PHASES 2

BOOST_HD unsigned hd_row_blocks(int N) { return (unsigned)((N + HD_ROWS_PER_BLOCK - 1) / HD_ROWS_PER_BLOCK); }
BOOST_HD int hd_row_of(hd_ix ix) { return (int)ix.bx * HD_ROWS_PER_BLOCK + hd_warp(ix); }
/* Every row kernel: the warp's sum after phase 0 (single-phase kernels run phase 0 only). */
BOOST_HD int hd_row_sync(int ph) { return ph == 0 ? HD_WARP_SUM_F : HD_SYNC_NONE; }

/* Arguments of every norm kernel; each kernel names the fields it uses. */
typedef struct {
  void *y;             /* act output [N, C]: out, dx, xg, dx_acc, h, dh */
  float *rowf;         /* float output per row: rstd (may be NULL), ss, dss */
  const void *x, *w;   /* act input [N, C]; weight or gain [C] */
  const void *g;       /* act gradient [N, C]: dout, dxg; online_rms_bwd: h_scaled */
  const float *rowin;  /* float input per row: rstd, ss, dss */
  int N, C;
  float eps, inv_d;
} hd_norm_args;

/* rmsnorm_fwd_kernel: out = x * rstd * w, rstd from the row's sum of squares */
BOOST_HDI void hd_rmsnorm_fwd_phase(const hd_norm_args *a, int bf16, hd_ix ix, int ph, hd_regs *r) {
  const int row = hd_row_of(ix), lane = hd_lane(ix), C = a->C;
  if (row >= a->N) return;
  const size_t o = (size_t)row * C;
  if (ph == 0) {
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
      const float v = hd_ld(a->x, o + c, bf16);
      ss += v * v;
    }
    r->red.f = ss;
    return;
  }
  const float rs = hd_rms_rstd(r->red.f, C, a->eps);
  if (a->rowf && lane == 0) a->rowf[row] = rs;
  for (int c = lane; c < C; c += 32)
    hd_st(a->y, o + c, hd_rms_out(hd_ld(a->x, o + c, bf16), rs, hd_ld(a->w, c, bf16)), bf16);
}

/* rmsnorm_dx_kernel: dx from dout (g), x, w and rstd (rowin) */
BOOST_HDI void hd_rmsnorm_dx_phase(const hd_norm_args *a, int bf16, hd_ix ix, int ph, hd_regs *r) {
  const int row = hd_row_of(ix), lane = hd_lane(ix), C = a->C;
  if (row >= a->N) return;
  const size_t o = (size_t)row * C;
  const float rs = a->rowin[row];
  if (ph == 0) {
    float dot = 0.0f;
    for (int c = lane; c < C; c += 32)
      dot += hd_rms_dot_term(hd_ld(a->g, o + c, bf16), hd_ld(a->w, c, bf16), hd_ld(a->x, o + c, bf16));
    r->red.f = dot;
    return;
  }
  const float k = hd_rms_k(rs, r->red.f, C);
  for (int c = lane; c < C; c += 32)
    hd_st(a->y, o + c, hd_rms_dx(rs, hd_ld(a->w, c, bf16), hd_ld(a->g, o + c, bf16), hd_ld(a->x, o + c, bf16), k),
          bf16);
}

/* gain_sumsq_kernel: xg = x * gain and each row's local sum of squares (rowf) */
BOOST_HDI void hd_gain_sumsq_phase(const hd_norm_args *a, int bf16, hd_ix ix, int ph, hd_regs *r) {
  const int row = hd_row_of(ix), lane = hd_lane(ix), C = a->C;
  if (row >= a->N) return;
  const size_t o = (size_t)row * C;
  if (ph == 0) {
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) {
      const float v = hd_ld(a->x, o + c, bf16);
      s += v * v;
      hd_st(a->y, o + c, v * hd_ld(a->w, c, bf16), bf16);
    }
    r->red.f = s;
    return;
  }
  if (lane == 0) a->rowf[row] = r->red.f;
}

/* gain_dx_kernel: dx_acc (y) += dxg (g) gain (w) + 2 x dss (rowin), grid-stride over N C */
BOOST_HDI void hd_gain_dx_thread(const hd_norm_args *a, int bf16, hd_ix ix) {
  const size_t total = (size_t)a->N * a->C, stride = hd_gthreads(ix);
  for (size_t i = hd_gthread(ix); i < total; i += stride) {
    const size_t n = i / (size_t)a->C, c = i % (size_t)a->C;
    hd_st(a->y, i,
          hd_gain_dx(hd_ld(a->y, i, bf16), hd_ld(a->g, i, bf16), hd_ld(a->w, c, bf16), hd_ld(a->x, i, bf16),
                     a->rowin[n]),
          bf16);
  }
}

/* online_rms_fwd_kernel (phase 0 only): h (y, [N, C = w]) *= rstd from ss (rowin); rstd to rowf */
BOOST_HDI void hd_online_rms_fwd_thread(const hd_norm_args *a, int bf16, hd_ix ix) {
  const int row = hd_row_of(ix), lane = hd_lane(ix);
  if (row >= a->N) return;
  const float rs = hd_online_rstd(a->rowin[row], a->inv_d, a->eps);
  if (lane == 0) a->rowf[row] = rs;
  const size_t o = (size_t)row * a->C;
  for (int c = lane; c < a->C; c += 32) hd_st(a->y, o + c, hd_ld(a->y, o + c, bf16) * rs, bf16);
}

/* online_rms_bwd_kernel: dh (y) *= rstd (rowin); dss (rowf) from sum dh * h_scaled (g) */
BOOST_HDI void hd_online_rms_bwd_phase(const hd_norm_args *a, int bf16, hd_ix ix, int ph, hd_regs *r) {
  const int row = hd_row_of(ix), lane = hd_lane(ix);
  if (row >= a->N) return;
  const float rs = a->rowin[row];
  if (ph == 0) {
    const size_t o = (size_t)row * a->C;
    float acc = 0.0f;
    for (int c = lane; c < a->C; c += 32) {
      const float g = hd_ld(a->y, o + c, bf16); /* read, then overwritten by the same lane */
      acc += g * hd_ld(a->g, o + c, bf16);
      hd_st(a->y, o + c, g * rs, bf16);
    }
    r->red.f = acc;
    return;
  }
  if (lane == 0) a->rowf[row] = hd_online_dss(r->red.f, rs, a->inv_d);
}

/* ---- column sums: out[c] += sum_n a[n, c] * b[n, c] (* rowscale[n]) ----------------- */
#define HD_COLSUM_THREADS 256

/* Rows per chunk: 64, or N / 1024 rounded up past 64 Ki rows. */
BOOST_HD int hd_colsum_chunk(int N) { return N <= 64 * 1024 ? 64 : (N + 1023) / 1024; }
BOOST_HD int hd_colsum_chunks(int N) { return (N + hd_colsum_chunk(N) - 1) / hd_colsum_chunk(N); }

typedef struct {
  float *out;           /* [C], added to */
  float *partial;       /* [P, C] */
  const void *a, *b;    /* [N, C] */
  const float *rowscale; /* [N] or NULL */
  int N, C;
} hd_colsum_args;

/* colsum_partial_kernel: grid (C / 256 up, P); partial[p, c] over chunk p's rows in order */
BOOST_HDI void hd_colsum_partial_thread(const hd_colsum_args *a, int bf16, hd_ix ix) {
  const int c = (int)hd_gthread(ix), p = (int)ix.by, rpc = hd_colsum_chunk(a->N), C = a->C;
  if (c >= C) return;
  const int n1 = a->N < (p + 1) * rpc ? a->N : (p + 1) * rpc;
  float acc = 0.0f;
  for (int n = p * rpc; n < n1; n++) {
    const size_t i = (size_t)n * C + c;
    const float av = hd_ld(a->a, i, bf16), bv = hd_ld(a->b, i, bf16);
    acc += a->rowscale ? hd_rms_dw_term(av, bv, a->rowscale[n]) : av * bv;
  }
  a->partial[(size_t)p * C + c] = acc;
}

/* colsum_final_kernel: out[c] += the partials in chunk order */
BOOST_HDI void hd_colsum_final_thread(const hd_colsum_args *a, hd_ix ix) {
  const int c = (int)hd_gthread(ix), P = hd_colsum_chunks(a->N);
  if (c >= a->C) return;
  float acc = 0.0f;
  for (int p = 0; p < P; p++) acc += a->partial[(size_t)p * a->C + c];
  a->out[c] += acc;
}

#endif
