/* One decode step of causal attention over a KV cache (backend.h's
 * attention_decode), for both of the CPU backend's act types: one table
 * entry serves the fp32 and the bf16 table (the act type is read from the
 * backend). Each (sequence, head) is independent: RoPE of the new q and k
 * at position pos, k and v appended at row pos of the caches, scores
 * against rows 0..pos, the softmax of attention.c (the same
 * attn_softmax_row: max, exp of the difference, 1/sum), then P V.
 *
 * The rounding follows the full attention of each precision so that a
 * cached decode and a recomputation agree within rounding: fp32 scales the
 * scores before the softmax (attention.c's sgemm alpha); bf16 rounds the
 * rotated q and k to bf16 (rope_rotate_bf16 stores them so), applies the
 * scale inside the softmax and rounds P to bf16 before P V
 * (attention_bf16.c). Statistics and accumulations are fp32. */
#include "cpu_internal.h" /* first (see there) */

#include <stdlib.h>

#include "bf16.h"
#include "check.h"
#include "cpu_backend.h"

/* A step reads 2 * len * hd cached values per (sequence, head) and does as
 * many multiply-adds: far less than a fork and join costs until the cache is
 * long (8 heads of 64: from 512 positions on), and on a machine whose cores
 * are shared every parallel region may wait a time slice for its threads. */
#define DECODE_PAR_MIN ((size_t)1 << 18)

/* Element i of activation memory as float, and a store rounded to the act type. */
static inline float ld_act(const void *p, size_t i, int bf16) {
  return bf16 ? bf16_to_f32(((const bf16_t *)p)[i]) : ((const float *)p)[i];
}
static inline void st_act(void *p, size_t i, float v, int bf16) {
  if (bf16)
    ((bf16_t *)p)[i] = f32_to_bf16(v);
  else
    ((float *)p)[i] = v;
}

/* RoPE at pos of the new q (into qr, rounded as the act type stores it) and
 * k (into the cache row), and v copied into its cache row. */
static void rotate_and_append(float *qr, void *kc, void *vc, const void *q, const void *k, const void *v,
                              const float *c, const float *s, size_t row, size_t crow, int hd, int bf16) {
  for (int i = 0; i < hd / 2; i++) {
    const float q0 = ld_act(q, row + 2 * i, bf16), q1 = ld_act(q, row + 2 * i + 1, bf16);
    const float k0 = ld_act(k, row + 2 * i, bf16), k1 = ld_act(k, row + 2 * i + 1, bf16);
    qr[2 * i] = q0 * c[i] - q1 * s[i];
    qr[2 * i + 1] = q0 * s[i] + q1 * c[i];
    st_act(kc, crow + 2 * i, k0 * c[i] - k1 * s[i], bf16);
    st_act(kc, crow + 2 * i + 1, k0 * s[i] + k1 * c[i], bf16);
  }
  for (int i = 0; i < hd; i++) {
    if (bf16) qr[i] = bf16_to_f32(f32_to_bf16(qr[i]));
    st_act(vc, crow + i, ld_act(v, row + i, bf16), bf16);
  }
}

/* qr . row (hd act elements at off), and acc += p * row: the loops split by
 * act type so that each vectorises. */
static float dot_act(const float *qr, const void *kc, size_t off, int hd, int bf16) {
  float dot = 0.0f;
  if (bf16) {
    const bf16_t *k = (const bf16_t *)kc + off;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < hd; i++) dot += qr[i] * bf16_to_f32(k[i]);
  } else {
    const float *k = (const float *)kc + off;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < hd; i++) dot += qr[i] * k[i];
  }
  return dot;
}
static void axpy_act(float *acc, float p, const void *vc, size_t off, int hd, int bf16) {
  if (bf16) {
    const bf16_t *v = (const bf16_t *)vc + off;
#pragma omp simd
    for (int i = 0; i < hd; i++) acc[i] += p * bf16_to_f32(v[i]);
  } else {
    const float *v = (const float *)vc + off;
#pragma omp simd
    for (int i = 0; i < hd; i++) acc[i] += p * v[i];
  }
}

/* One (sequence, head): scores into p[0..len), softmax, out row = P V. */
static void attend(void *out, float *p, float *acc, const float *qr, const void *kc, const void *vc, size_t base,
                   size_t ld, size_t orow, int len, int hd, int bf16) {
  const float scale = 1.0f / sqrtf((float)hd);
  for (int j = 0; j < len; j++) {
    const float dot = dot_act(qr, kc, base + (size_t)j * ld, hd, bf16);
    p[j] = bf16 ? dot : scale * dot;
  }
  float st[2];
  attn_softmax_row(p, len, bf16 ? scale : 1.0f, st, 1);
  for (int i = 0; i < hd; i++) acc[i] = 0.0f;
  for (int j = 0; j < len; j++) axpy_act(acc, bf16 ? bf16_to_f32(f32_to_bf16(p[j])) : p[j], vc, base + (size_t)j * ld, hd, bf16);
  for (int i = 0; i < hd; i++) st_act(out, orow + i, acc[i], bf16);
}

void cpu_attention_decode(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q,
                          cact *k, cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H,
                          int hd) {
  BOOST_ASSERT(pos >= 0 && pos < max_T && hd % 2 == 0);
  const int bf16 = be->act_dtype == BOOST_BF16, len = pos + 1, BH = B * H;
  const size_t ld = (size_t)H * hd;
  const float *c = cos_t + (size_t)pos * (hd / 2), *s = sin_t + (size_t)pos * (hd / 2);
#pragma omp parallel if ((size_t)BH * len * hd >= DECODE_PAR_MIN)
  {
    float *buf = boost_calloc((size_t)len + 2 * (size_t)hd, sizeof(float));
#pragma omp for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
      const int b = bh / H, h = bh % H;
      const size_t row = (size_t)b * ld + (size_t)h * hd;
      const size_t base = (size_t)b * max_T * ld + (size_t)h * hd; /* (b, position 0, head h) of the caches */
      float *qr = buf + len, *acc = qr + hd;
      rotate_and_append(qr, k_cache, v_cache, q, k, v, c, s, row, base + (size_t)pos * ld, hd, bf16);
      attend(out, buf, acc, qr, k_cache, v_cache, base, ld, row, len, hd, bf16);
    }
    boost_free(buf);
  }
}
