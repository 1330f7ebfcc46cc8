/* The bodies of the flat kernels: elementwise ops (elementwise.cu), RoPE
 * (rope.cu) and the embedding's gather and sorted-run sums (embedding.cu).
 * Each is a function of its grid indices (hd_grid.h) that the .cu's
 * __global__ wrapper calls and tests/unit/test_cuda_math.c runs over a
 * whole grid on the CPU. */
#ifndef BOOST_CUDA_HD_ELEMENTWISE_H
#define BOOST_CUDA_HD_ELEMENTWISE_H

#include "hd_grid.h"
#include "hd_ops.h"

/* ---- elementwise ops -------------------------------------------------------------
 * One shape for all: a grid-stride loop over vectors of w elements (16-byte
 * loads: 8 when any operand is bf16, else 4) when vec (every pointer
 * 16-byte aligned), then the n % w tail one element at a time. In place is
 * allowed: each element is read and then written by the same thread. */
enum {
  HD_EW_ADD,       /* y = x0 + x1 */
  HD_EW_MUL,       /* y = x0 * x1 */
  HD_EW_SILU_GRAD, /* y = silu'(x1) * x0 (x0 = dout, x1 = x) */
  HD_EW_SILU,      /* y = silu(x0) */
  HD_EW_COPY,      /* y = x0, converted between storages */
  HD_EW_MUL_BWD    /* y = x0 * x2, y2 = x0 * x1 (x0 = dout, x1 = a, x2 = b; NULL outputs skipped) */
};
typedef struct {
  void *y, *y2;
  const void *x0, *x1, *x2;
  size_t n;
} hd_ew_args;

/* Elements per vector: 8 when either storage is bf16, else 4. */
BOOST_HD int hd_ew_width(int y_bf16, int x_bf16) { return y_bf16 || x_bf16 ? 8 : 4; }

BOOST_HDI float hd_ew_binary(int op, float a, float b) {
  return op == HD_EW_ADD ? a + b : op == HD_EW_MUL ? a * b : hd_silu_grad(a, b);
}

/* The w elements at i (w = 1 or the vector width). */
BOOST_HDI void hd_ew_at(int op, int ybf, int xbf, const hd_ew_args *a, size_t i, int w) {
  float x[8], y[8], r[8];
  if (op == HD_EW_MUL_BWD) { /* everything read before any write */
    hd_ldw(x, a->x0, i, w, xbf);
    if (a->y2) hd_ldw(y, a->x1, i, w, xbf);
    if (a->y) hd_ldw(r, a->x2, i, w, xbf);
    if (a->y) {
      for (int k = 0; k < w; k++) r[k] = x[k] * r[k];
      hd_stw(a->y, i, r, w, ybf);
    }
    if (a->y2) {
      for (int k = 0; k < w; k++) r[k] = x[k] * y[k];
      hd_stw(a->y2, i, r, w, ybf);
    }
    return;
  }
  hd_ldw(x, a->x0, i, w, xbf);
  if (op == HD_EW_SILU) {
    for (int k = 0; k < w; k++) x[k] = hd_silu(x[k]);
  } else if (op != HD_EW_COPY) {
    hd_ldw(y, a->x1, i, w, xbf);
    for (int k = 0; k < w; k++) x[k] = hd_ew_binary(op, x[k], y[k]);
  }
  hd_stw(a->y, i, x, w, ybf);
}

/* elementwise.cu's ew_kernel */
BOOST_HDI void hd_ew_thread(int op, int ybf, int xbf, int vec, const hd_ew_args *a, hd_ix ix) {
  const size_t w = (size_t)hd_ew_width(ybf, xbf), stride = hd_gthreads(ix), t = hd_gthread(ix), n = a->n;
  size_t nv = 0;
  if (vec) {
    nv = hd_vec_end(n, (int)w);
    for (size_t j = t * w; j < nv; j += stride * w) hd_ew_at(op, ybf, xbf, a, j, (int)w);
  }
  for (size_t i = nv + t; i < n; i += stride) hd_ew_at(op, ybf, xbf, a, i, 1);
}

/* ---- RoPE: one thread per pair (2p, 2p + 1) of [B, T, H, hd], grid-stride ---------- */
typedef struct {
  void *out;
  const void *in;
  const float *cos_t, *sin_t; /* [T, half] */
  size_t npairs;
  int T, H, half;
  float sign; /* 1: forward, -1: backward */
} hd_rope_args;

/* rope.cu's rope_kernel; in place allowed (a pair is read, then written, by one thread) */
BOOST_HDI void hd_rope_thread(const hd_rope_args *a, int bf16, hd_ix ix) {
  const size_t stride = hd_gthreads(ix);
  for (size_t p = hd_gthread(ix); p < a->npairs; p += stride) {
    int t, i;
    hd_rope_index(p, a->T, a->H, a->half, &t, &i);
    const float c = a->cos_t[(size_t)t * a->half + i], s = a->sign * a->sin_t[(size_t)t * a->half + i];
    float y0, y1;
    hd_rope_pair(hd_ld(a->in, 2 * p, bf16), hd_ld(a->in, 2 * p + 1, bf16), c, s, &y0, &y1);
    hd_st(a->out, 2 * p, y0, bf16);
    hd_st(a->out, 2 * p + 1, y1, bf16);
  }
}

/* ---- the token embedding ----------------------------------------------------------- */
typedef struct {
  void *out;                    /* forward: [N, C] */
  float *dwte;                  /* backward: [V, C] */
  const void *wte, *dout;       /* [V, C], [N, C] */
  const int32_t *tokens, *pos;  /* forward's tokens; backward's positions sorted by token */
  const uint32_t *keys;         /* backward: the sorted tokens */
  int32_t *iota;                /* backward: 0 .. N-1 before the sort */
  int N, C;
} hd_emb_args;

/* embedding_fwd_kernel: out[n, c] = wte[tokens[n], c], grid-stride over N C */
BOOST_HDI void hd_embedding_fwd_thread(const hd_emb_args *a, int bf16, hd_ix ix) {
  const size_t total = (size_t)a->N * a->C, stride = hd_gthreads(ix);
  for (size_t idx = hd_gthread(ix); idx < total; idx += stride) {
    const size_t n = idx / (size_t)a->C, c = idx % (size_t)a->C;
    hd_mv(a->out, idx, a->wte, (size_t)a->tokens[n] * a->C + c, bf16);
  }
}

/* iota_kernel: the positions the sort permutes, one thread each */
BOOST_HDI void hd_iota_thread(const hd_emb_args *a, hd_ix ix) {
  const size_t i = hd_gthread(ix);
  if (i < (size_t)a->N) a->iota[i] = (int32_t)i;
}

/* embedding_bwd_runs_kernel: block i sums the run of equal sorted tokens
 * that starts at i, if one does, column by column in position order, and
 * adds it to the token's row once */
BOOST_HDI void hd_embedding_runs_block(const hd_emb_args *a, int bf16, hd_ix ix) {
  int end = 0;
  const int i = (int)ix.bx;
  if (!hd_run_start(a->keys, i, a->N, &end)) return;
  float *drow = a->dwte + (size_t)a->keys[i] * a->C;
  for (int c = (int)ix.tx; c < a->C; c += (int)ix.nt) {
    float acc = 0.0f;
    for (int j = i; j < end; j++) acc += hd_ld(a->dout, (size_t)a->pos[j] * a->C + c, bf16);
    drow[c] += acc;
  }
}

#endif
