/* Causal attention in the flash style, written as phases that the CUDA
 * kernels (attention.cu) run with a __syncthreads() between each, and that
 * tests/unit/test_cuda_math.c runs on the CPU, thread by thread, in the same
 * order. Nothing of size T x T exists anywhere: a block holds tiles in
 * shared memory and the forward keeps per-row statistics [B, H, T, 2]
 * (row max m of the scaled scores, 1/sum of exp(s - m)), the seam's contract
 * (kernels/backend.h, kernels/cpu/attention.c).
 *
 * Layout: q, k, v, out and their gradients are [B, T, H, hd]; a block works
 * on one (b, h). It owns `rows` rows (16 per warp: warp w its strip of rows
 * 16w .. 16w + 15) and walks tiles of `cols` rows of the other operand.
 *
 *   forward (block = a tile of queries): for each key tile up to the
 *     diagonal: S = scale Q K^T; per row online softmax (m, l, alpha =
 *     exp(m_old - m_new)); O = alpha O + P V. Then out = O / l and the stats.
 *   backward dQ (block = a tile of queries): pass 1 over key tiles computes
 *     D_i = sum_j P_ij dP_ij (P recomputed from the stats, dP = dO V^T) and
 *     stores it (the backward's scratch, [B, H, T] floats); pass 2 forms
 *     dS = P (dP - D) and dQ = scale dS K.
 *   backward dK, dV (block = a tile of keys): for each query tile from the
 *     diagonal on: S^T = scale K Q^T, P^T, dP^T = V dO^T, dV += P^T dO,
 *     dS^T = P^T (dP^T - D), dK += scale dS^T Q.
 * Every output element is written by one thread after a fixed sequence of
 * operations, so results are reproducible bit for bit; no atomics.
 *
 * The matrix products of a warp's strip (fa_mm_nt, fa_mm_nn) run on tensor
 * cores (WMMA, bf16 in, float accumulate) when attention.cu provides
 * BOOST_FA_MMA and the activations are bf16; otherwise each lane computes
 * its share of the strip with fmaf in index order (float activations on the
 * GPU, and everything on the CPU). */
#ifndef BOOST_CUDA_HD_FLASH_H
#define BOOST_CUDA_HD_FLASH_H

#include "hd_common.h"

typedef struct {
  int rows, cols; /* rows a block owns (a multiple of 16), the inner tile (a multiple of 16) */
  int hd, hdp;    /* head dimension, padded to a multiple of 16 (zeros) */
  int ldt;        /* act tiles [*, hdp]: hdp + 8 */
  int ldf;        /* float strips [rows, cols]: cols + 4 */
  int ldp;        /* act strips [rows, cols]: cols + 8 */
  int ldo;        /* float accumulators [rows, hdp]: hdp + 4 */
  int bf16;
} fa_dims;

BOOST_HD fa_dims fa_dims_make(int rows, int cols, int hd, int bf16) {
  fa_dims d;
  d.rows = rows;
  d.cols = cols;
  d.hd = hd;
  d.hdp = (hd + 15) / 16 * 16;
  d.ldt = d.hdp + 8;
  d.ldf = cols + 4;
  d.ldp = cols + 8;
  d.ldo = d.hdp + 4;
  d.bf16 = bf16;
  return d;
}
BOOST_HD int fa_threads(const fa_dims *d) { return d->rows / 16 * 32; }

/* Everything a kernel needs (one struct: the kernel's parameter). */
typedef struct {
  fa_dims d;
  const void *q, *k, *v, *dout;
  void *out, *dq, *dk, *dv;
  float *stats; /* [B, H, T, 2] */
  float *D;     /* [B, H, T] (backward scratch) */
  int B, T, H;
  float scale;
  int need_dq, need_dk, need_dv;
} fa_args;

/* Carves shared memory: each region 128-byte aligned; with base NULL only
 * the size is counted (returned by fa_end). */
typedef struct {
  unsigned char *base;
  size_t off;
} fa_carver;
BOOST_HD void *fa_take(fa_carver *c, size_t bytes) {
  const size_t o = (c->off + 127) & ~(size_t)127;
  c->off = o + bytes;
  return c->base ? (void *)(c->base + o) : NULL;
}
BOOST_HD size_t fa_act_tile(const fa_dims *d, int n) { return (size_t)n * d->ldt * hd_act_size(d->bf16); }

/* ---- block-wide pieces ------------------------------------------------------- */

/* Rows [r0, r0 + n) of a [B, T, H, hd] tensor at (b, h) (element `base` =
 * (b T H + h) hd) into tile [n, hdp]; zeros past T and past hd. */
BOOST_HD void fa_load_rows(void *tile, const fa_dims *d, const void *g, size_t base, int H, int r0, int n, int T,
                           int tid, int nth) {
  const int hdp = d->hdp, hd = d->hd;
  for (int idx = tid; idx < n * hdp; idx += nth) {
    const int r = idx / hdp, c = idx - r * hdp, t = r0 + r;
    const size_t ti = (size_t)r * d->ldt + c;
    if (t < T && c < hd)
      hd_mv(tile, ti, g, base + (size_t)t * H * hd + c, d->bf16);
    else
      hd_st(tile, ti, 0.0f, d->bf16);
  }
}

/* Rows [r0, r0 + n) of a float accumulator [n, hdp] times mul (per row, or
 * the scalar when mul is NULL), rounded into the [B, T, H, hd] tensor g. */
BOOST_HD void fa_store_rows(void *g, const fa_dims *d, const float *acc, const float *mul, float scalar, size_t base,
                            int H, int r0, int n, int T, int tid, int nth) {
  const int hd = d->hd;
  for (int idx = tid; idx < n * hd; idx += nth) {
    const int r = idx / hd, c = idx - r * hd, t = r0 + r;
    if (t < T) hd_st(g, base + (size_t)t * H * hd + c, acc[(size_t)r * d->ldo + c] * (mul ? mul[r] : scalar), d->bf16);
  }
}

BOOST_HD void fa_zero_f32(float *p, size_t n, int tid, int nth) {
  for (size_t i = (size_t)tid; i < n; i += (size_t)nth) p[i] = 0.0f;
}

/* ---- a warp's strip -------------------------------------------------------------
 * C [16, ncols] (float, ldc) = scale * A [16, kdim] . B [ncols, kdim]^T */
BOOST_HD void fa_mm_nt_lane(float *C, int ldc, const void *A, int lda, const void *B, int ldb, int ncols, int kdim,
                            float scale, int bf16, int lane) {
  for (int idx = lane; idx < 16 * ncols; idx += 32) {
    const int r = idx / ncols, c = idx - r * ncols;
    float acc = 0.0f;
    for (int k = 0; k < kdim; k++)
      acc = fmaf(hd_ld(A, (size_t)r * lda + k, bf16), hd_ld(B, (size_t)c * ldb + k, bf16), acc);
    C[(size_t)r * ldc + c] = acc * scale;
  }
}
/* C [16, ncols] (float, ldc) += A [16, kdim] . B [kdim, ncols] */
BOOST_HD void fa_mm_nn_lane(float *C, int ldc, const void *A, int lda, const void *B, int ldb, int ncols, int kdim,
                            int bf16, int lane) {
  for (int idx = lane; idx < 16 * ncols; idx += 32) {
    const int r = idx / ncols, c = idx - r * ncols;
    float acc = C[(size_t)r * ldc + c];
    for (int k = 0; k < kdim; k++)
      acc = fmaf(hd_ld(A, (size_t)r * lda + k, bf16), hd_ld(B, (size_t)k * ldb + c, bf16), acc);
    C[(size_t)r * ldc + c] = acc;
  }
}

BOOST_HD void fa_mm_nt(float *C, int ldc, const void *A, int lda, const void *B, int ldb, int ncols, int kdim,
                       float scale, int bf16, int lane) {
#if defined(__CUDA_ARCH__) && defined(BOOST_FA_MMA)
  if (bf16) {
    fa_mma_nt_bf16(C, ldc, A, lda, B, ldb, ncols, kdim, scale);
    return;
  }
#endif
  fa_mm_nt_lane(C, ldc, A, lda, B, ldb, ncols, kdim, scale, bf16, lane);
}
BOOST_HD void fa_mm_nn(float *C, int ldc, const void *A, int lda, const void *B, int ldb, int ncols, int kdim, int bf16,
                       int lane) {
#if defined(__CUDA_ARCH__) && defined(BOOST_FA_MMA)
  if (bf16) {
    fa_mma_nn_bf16(C, ldc, A, lda, B, ldb, ncols, kdim);
    return;
  }
#endif
  fa_mm_nn_lane(C, ldc, A, lda, B, ldb, ncols, kdim, bf16, lane);
}

/* ---- one row (one lane) ------------------------------------------------------------ */

/* Valid columns of query row qi in the key tile at c0 under the causal mask:
 * the first `lim` (keys c0 .. qi); 0 for padding rows (qi >= T). */
BOOST_HD int fa_causal_lim(int qi, int c0, int ncols, int T) {
  if (qi >= T) return 0;
  const int lim = qi - c0 + 1;
  return lim < 0 ? 0 : (lim > ncols ? ncols : lim);
}

/* The online-softmax step of one row over a key tile: s [ncols] scores,
 * lim valid; p (act) receives exp(s - m_new) (0 where masked); the row's
 * running max m and sum l are updated, alpha = exp(m_old - m_new) rescales
 * its output accumulator. */
BOOST_HD void fa_online_row(const float *s, void *p, int bf16, int ncols, int lim, float *m, float *l, float *alpha) {
  float mx = *m;
  for (int j = 0; j < lim; j++) mx = s[j] > mx ? s[j] : mx;
  const float a = (*m == -INFINITY || mx == -INFINITY) ? 0.0f : expf(*m - mx);
  float sum = 0.0f;
  for (int j = 0; j < ncols; j++) {
    const float e = j < lim ? expf(s[j] - mx) : 0.0f;
    hd_st(p, (size_t)j, e, bf16);
    sum += e;
  }
  *l = *l * a + sum;
  *m = mx;
  *alpha = a;
}

/* P recomputed from the stats (the forward's m and 1/l), 0 outside [lo, hi). */
BOOST_HD float fa_prob(float s, float m, float inv, int j, int lo, int hi) {
  return (j >= lo && j < hi) ? expf(s - m) * inv : 0.0f;
}

/* ---- the forward ---------------------------------------------------------------------- */

typedef struct {
  const fa_args *a;
  fa_dims d;
  size_t base;             /* element offset of (b, 0, h, 0) */
  int bh, r0, nrows_valid; /* this block's (b, h) index and first row */
  int ntiles;              /* key tiles 0 .. up to the block's last row */
  void *Q, *K, *V, *P;
  float *S, *O, *m, *l, *alpha;
} fa_fwd_blk;

/* Shared memory of the forward (base NULL: the size only). */
BOOST_HD size_t fa_fwd_carve(fa_fwd_blk *c, const fa_dims *d, unsigned char *base) {
  fa_carver cv = {base, 0};
  c->Q = fa_take(&cv, fa_act_tile(d, d->rows));
  c->K = fa_take(&cv, fa_act_tile(d, d->cols));
  c->V = fa_take(&cv, fa_act_tile(d, d->cols));
  c->S = (float *)fa_take(&cv, (size_t)d->rows * d->ldf * 4);
  c->P = fa_take(&cv, (size_t)d->rows * d->ldp * hd_act_size(d->bf16));
  c->O = (float *)fa_take(&cv, (size_t)d->rows * d->ldo * 4);
  c->m = (float *)fa_take(&cv, (size_t)d->rows * 4);
  c->l = (float *)fa_take(&cv, (size_t)d->rows * 4);
  c->alpha = (float *)fa_take(&cv, (size_t)d->rows * 4);
  return cv.off;
}

/* Block (tile_x, bh): rows tile_x * rows of (b, h) = (bh / H, bh % H). */
BOOST_HD int fa_fwd_begin(fa_fwd_blk *c, const fa_args *a, unsigned char *smem, int tile_x, int bh) {
  c->a = a;
  c->d = a->d;
  fa_fwd_carve(c, &c->d, smem);
  c->bh = bh;
  c->base = ((size_t)(bh / a->H) * a->T * a->H + (size_t)(bh % a->H)) * a->d.hd;
  c->r0 = tile_x * a->d.rows;
  const int last = (c->r0 + a->d.rows < a->T ? c->r0 + a->d.rows : a->T) - 1;
  c->ntiles = last / a->d.cols + 1;
  return 1 + 5 * c->ntiles + 2; /* phases */
}

BOOST_HD void fa_fwd_phase(const fa_fwd_blk *c, int ph, int warp, int lane) {
  const fa_args *a = c->a;
  const fa_dims *d = &c->d;
  const int tid = warp * 32 + lane, nth = fa_threads(d), strip = warp * 16;
  if (ph == 0) {
    fa_load_rows(c->Q, d, a->q, c->base, a->H, c->r0, d->rows, a->T, tid, nth);
    fa_zero_f32(c->O, (size_t)d->rows * d->ldo, tid, nth);
    for (int r = tid; r < d->rows; r += nth) {
      c->m[r] = -INFINITY;
      c->l[r] = 0.0f;
    }
    return;
  }
  ph -= 1;
  if (ph < 5 * c->ntiles) {
    const int c0 = (ph / 5) * d->cols, step = ph % 5;
    const size_t as = hd_act_size(d->bf16);
    if (step == 0) {
      fa_load_rows(c->K, d, a->k, c->base, a->H, c0, d->cols, a->T, tid, nth);
      fa_load_rows(c->V, d, a->v, c->base, a->H, c0, d->cols, a->T, tid, nth);
    } else if (step == 1) {
      fa_mm_nt(c->S + (size_t)strip * d->ldf, d->ldf, (const char *)c->Q + (size_t)strip * d->ldt * as, d->ldt, c->K,
               d->ldt, d->cols, d->hdp, a->scale, d->bf16, lane);
    } else if (step == 2) {
      if (lane < 16) {
        const int r = strip + lane;
        fa_online_row(c->S + (size_t)r * d->ldf, (char *)c->P + (size_t)r * d->ldp * as, d->bf16, d->cols,
                      fa_causal_lim(c->r0 + r, c0, d->cols, a->T), &c->m[r], &c->l[r], &c->alpha[r]);
      }
    } else if (step == 3) {
      for (int idx = lane; idx < 16 * d->hdp; idx += 32) {
        const int r = strip + idx / d->hdp, col = idx % d->hdp;
        c->O[(size_t)r * d->ldo + col] *= c->alpha[r];
      }
    } else {
      fa_mm_nn(c->O + (size_t)strip * d->ldo, d->ldo, (const char *)c->P + (size_t)strip * d->ldp * as, d->ldp, c->V,
               d->ldt, d->hdp, d->cols, d->bf16, lane);
    }
    return;
  }
  if (ph == 5 * c->ntiles) { /* the row statistics; alpha becomes 1/l */
    for (int r = tid; r < d->rows; r += nth) {
      const int qi = c->r0 + r;
      const float inv = c->l[r] > 0.0f ? 1.0f / c->l[r] : 0.0f;
      c->alpha[r] = inv;
      if (qi < a->T) {
        a->stats[2 * ((size_t)c->bh * a->T + qi)] = c->m[r];
        a->stats[2 * ((size_t)c->bh * a->T + qi) + 1] = inv;
      }
    }
    return;
  }
  fa_store_rows(a->out, d, c->O, c->alpha, 1.0f, c->base, a->H, c->r0, d->rows, a->T, tid, nth);
}

#include "hd_flash_bwd.h"

#endif
