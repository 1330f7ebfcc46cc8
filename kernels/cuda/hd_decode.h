/* The decode step's attention over a KV cache (backend.h's
 * attention_decode; kernels/cpu/attention_decode.c is the CPU's): the
 * per-thread arithmetic and the kernel's phases (hd_grid.h explains
 * phases), host/device. attention_decode.cu's __global__ wrapper only
 * builds the indices and runs the phases; tests/unit/test_cuda_decode.c
 * runs the same phases over the whole grid on the CPU.
 *
 * One block of HD_DEC_THREADS per (sequence, head) slice, block bx =
 * b * H + h. Phases: (0) each pair i of the head's dimensions is rotated
 * at pos (q into the block's qs, k into the cache row pos) and v is copied
 * into its cache row; (1) each cached position j gets its score (kept in
 * scratch) and each thread its running max; (2..5) the block max; (6) each
 * j its exponential and each thread its sum; (7..10) the block sum; (11)
 * each output dimension i sums p_j v_j[i] in position order. Threads
 * stride by HD_DEC_THREADS in every loop. The roundings are those of the
 * CPU kernel: fp32 scales the scores before the softmax; bf16 rounds the
 * rotated q to bf16, scales inside the exponent and rounds p to bf16. */
#ifndef BOOST_CUDA_HD_DECODE_H
#define BOOST_CUDA_HD_DECODE_H

#include "hd_grid.h"

#define HD_DEC_THREADS 128
#define HD_DEC_WARPS (HD_DEC_THREADS / 32)

/* phase 0, pair i: q rotated into qs, k rotated into the cache, v copied. row:
 * the slice's start in q/k/v; crow: the cache row pos of the slice. */
BOOST_HD void hd_decode_append(float *qs, void *kc, void *vc, const void *q, const void *k, const void *v,
                               const float *c, const float *s, size_t row, size_t crow, int i, int bf16) {
  const float q0 = hd_ld(q, row + 2 * i, bf16), q1 = hd_ld(q, row + 2 * i + 1, bf16);
  const float k0 = hd_ld(k, row + 2 * i, bf16), k1 = hd_ld(k, row + 2 * i + 1, bf16);
  const float qr0 = q0 * c[i] - q1 * s[i], qr1 = q0 * s[i] + q1 * c[i];
  qs[2 * i] = bf16 ? hd_round_bf16(qr0) : qr0;
  qs[2 * i + 1] = bf16 ? hd_round_bf16(qr1) : qr1;
  hd_st(kc, crow + 2 * i, k0 * c[i] - k1 * s[i], bf16);
  hd_st(kc, crow + 2 * i + 1, k0 * s[i] + k1 * c[i], bf16);
  hd_mv(vc, crow + 2 * i, v, row + 2 * i, bf16);
  hd_mv(vc, crow + 2 * i + 1, v, row + 2 * i + 1, bf16);
}

/* phase 1: the score of the cached row krow: scaled for fp32, raw for bf16 (its
 * scale enters the exponent, hd_decode_exp). */
BOOST_HD float hd_decode_score(const float *qs, const void *kc, size_t krow, int hd, float scale, int bf16) {
  float dot = 0.0f;
  for (int i = 0; i < hd; i++) dot += qs[i] * hd_ld(kc, krow + i, bf16);
  return bf16 ? dot : scale * dot;
}

/* phase 6: exp(a * score - m) where m = a * max score, a = 1 (fp32) or the scale (bf16). */
BOOST_HD float hd_decode_exp(float score, float m, float scale, int bf16) {
  return expf((bf16 ? scale : 1.0f) * score - m);
}

/* phase 11: output dimension i of the slice: sum over j of p_j (rounded to bf16
 * for bf16) times v_j[i], p_j = e_j * inv. */
BOOST_HD float hd_decode_out(const float *e, float inv, const void *vc, size_t base, size_t ld, int len, int i,
                             int bf16) {
  float acc = 0.0f;
  for (int j = 0; j < len; j++) {
    const float p = e[j] * inv;
    acc += (bf16 ? hd_round_bf16(p) : p) * hd_ld(vc, base + (size_t)j * ld + i, bf16);
  }
  return acc;
}

/* ---- the kernel's phases ------------------------------------------------------- */
#define HD_DEC_MAX_DONE (2 + HD_BLOCK_REDUCE_STEPS) /* first phase with the block max */
#define HD_DEC_SUM_DONE (HD_DEC_MAX_DONE + 1 + HD_BLOCK_REDUCE_STEPS)
#define HD_DEC_PHASES (HD_DEC_SUM_DONE + 1)

BOOST_HD int hd_decode_sync(int ph) {
  if (ph == 0) return HD_SYNC_BARRIER; /* qs and the cache row pos, block-wide */
  if (ph == 1) return HD_WARP_MAX_F;
  if (ph < HD_DEC_MAX_DONE) return hd_block_reduce_sync(ph - 2, HD_WARP_MAX_F);
  if (ph == HD_DEC_MAX_DONE) return HD_WARP_SUM_F;
  if (ph < HD_DEC_SUM_DONE) return hd_block_reduce_sync(ph - HD_DEC_MAX_DONE - 1, HD_WARP_SUM_F);
  return HD_SYNC_NONE;
}

typedef struct {
  void *out, *kc, *vc;        /* [B, H*hd]; the caches [B, max_T, H*hd] */
  const void *q, *k, *v;      /* [B, H*hd] */
  const float *cos_t, *sin_t; /* [max_T, hd/2] */
  float *scores;              /* [B*H, pos+1] */
  int H, pos, max_T, hd;
  float scale;
} hd_decode_args;

/* Block bx's phase ph for thread ix.tx. red: HD_DEC_WARPS floats of shared
 * memory; qs: hd floats of shared memory. */
BOOST_HDI void hd_decode_phase(const hd_decode_args *a, int bf16, hd_ix ix, int ph, hd_regs *r, float *red,
                               float *qs) {
  const int bh = (int)ix.bx, b = bh / a->H, h = bh % a->H, len = a->pos + 1, tid = (int)ix.tx, hd = a->hd;
  const size_t ld = (size_t)a->H * hd, row = (size_t)b * ld + (size_t)h * hd;
  const size_t base = (size_t)b * a->max_T * ld + (size_t)h * hd;
  float *e = a->scores + (size_t)bh * len;
  if (ph == 0) {
    const float *c = a->cos_t + (size_t)a->pos * (hd / 2), *s = a->sin_t + (size_t)a->pos * (hd / 2);
    for (int i = tid; i < hd / 2; i += HD_DEC_THREADS)
      hd_decode_append(qs, a->kc, a->vc, a->q, a->k, a->v, c, s, row, base + (size_t)a->pos * ld, i, bf16);
  } else if (ph == 1) {
    float mx = -INFINITY;
    for (int j = tid; j < len; j += HD_DEC_THREADS) {
      e[j] = hd_decode_score(qs, a->kc, base + (size_t)j * ld, hd, a->scale, bf16);
      mx = fmaxf(mx, e[j]);
    }
    r->red.f = mx;
  } else if (ph < HD_DEC_MAX_DONE) {
    hd_block_reduce_step(ph - 2, HD_WARP_MAX_F, ix, &r->red, red, NULL);
  } else if (ph == HD_DEC_MAX_DONE) {
    const float m = (bf16 ? a->scale : 1.0f) * r->red.f;
    float sum = 0.0f;
    for (int j = tid; j < len; j += HD_DEC_THREADS) {
      e[j] = hd_decode_exp(e[j], m, a->scale, bf16);
      sum += e[j];
    }
    r->red.f = sum;
  } else if (ph < HD_DEC_SUM_DONE) {
    hd_block_reduce_step(ph - HD_DEC_MAX_DONE - 1, HD_WARP_SUM_F, ix, &r->red, red, NULL);
  } else {
    const float inv = 1.0f / r->red.f;
    for (int i = tid; i < hd; i += HD_DEC_THREADS)
      hd_st(a->out, row + i, hd_decode_out(e, inv, a->vc, base, ld, len, i, bf16), bf16);
  }
}

#endif
