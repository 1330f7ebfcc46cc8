/* The decode step's attention over a KV cache (backend.h's
 * attention_decode; kernels/cpu/attention_decode.c is the CPU's), as
 * functions of a (sequence, head) slice and a thread index, host/device:
 * the __global__ wrapper in attention_decode.cu only maps block and thread
 * indices onto them, and a CPU test can run them in a loop.
 *
 * Per slice: (1) each pair i of the head's dimensions is rotated at pos
 * (q into the block's qs, k into the cache row pos) and v is copied into
 * its cache row; (2) each cached position j gets its score; (3) the
 * softmax over positions 0..pos (a block max and sum); (4) each output
 * dimension i sums p_j v_j[i] in position order. The roundings are those
 * of the CPU kernel: fp32 scales the scores before the softmax; bf16 rounds
 * the rotated q to bf16, scales inside the exponent and rounds p to bf16. */
#ifndef BOOST_CUDA_HD_DECODE_H
#define BOOST_CUDA_HD_DECODE_H

#include "hd_common.h"

/* (1) pair i: q rotated into qs, k rotated into the cache, v copied. row:
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

/* (2) the score of the cached row krow: scaled for fp32, raw for bf16 (its
 * scale enters the exponent, hd_decode_exp). */
BOOST_HD float hd_decode_score(const float *qs, const void *kc, size_t krow, int hd, float scale, int bf16) {
  float dot = 0.0f;
  for (int i = 0; i < hd; i++) dot += qs[i] * hd_ld(kc, krow + i, bf16);
  return bf16 ? dot : scale * dot;
}

/* (3) exp(a * score - m) where m = a * max score, a = 1 (fp32) or the scale (bf16). */
BOOST_HD float hd_decode_exp(float score, float m, float scale, int bf16) {
  return expf((bf16 ? scale : 1.0f) * score - m);
}

/* (4) output dimension i of the slice: sum over j of p_j (rounded to bf16
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

#endif
