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
 * act type so that each vectorises. qb: the same q as bf16, zero-padded to
 * a multiple of 32 (bf16 only). With AVX512_BF16 a bf16 row is one
 * VDPBF16PS per 32 elements (q is bf16-exact: its products are exact, as
 * the widening loop's are; only the order of the fp32 sum differs): the
 * widening loop, one call per head and position, took 6 % of a llama-60m
 * bf16 decode step at 256 positions, more than the step's share of bytes. */
static float dot_act(const float *qr, const bf16_t *qb, const void *kc, size_t off, int hd, int bf16) {
  float dot = 0.0f;
#if defined(__AVX512BF16__)
  if (bf16) {
    const bf16_t *k = (const bf16_t *)kc + off;
    __m512 s = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= hd; i += 32)
      s = _mm512_dpbf16_ps(s, (__m512bh)_mm512_loadu_si512(qb + i), (__m512bh)_mm512_loadu_si512(k + i));
    if (i < hd)
      s = _mm512_dpbf16_ps(s, (__m512bh)_mm512_loadu_si512(qb + i),
                           (__m512bh)_mm512_maskz_loadu_epi16((__mmask32)((1ull << (hd - i)) - 1), k + i));
    (void)qr;
    return _mm512_reduce_add_ps(s);
  }
#else
  (void)qb;
#endif
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

/* q as bf16 per head, each padded to a multiple of 32 elements. */
static size_t padded_hd(int hd) { return ((size_t)hd + 31) / 32 * 32; }
static size_t decode_buf_floats(int nh, int len, int hd) {
  return (size_t)nh * ((size_t)len + 2 * (size_t)hd + padded_hd(hd) / 2);
}

/* Heads [h0, h1) of sequence b. Positions outer, heads inner: a cache row
 * holds every head's k (or v) of one position side by side, so the heads
 * of one thread read each row front to back, one sequential stream per
 * cache, where a head at a time read a short piece of every row (a strided
 * walk the hardware prefetcher follows poorly). Per head the arithmetic is
 * that of one (sequence, head) at a time: qr . k row, softmax, P V. buf:
 * decode_buf_floats(h1 - h0, len, hd) floats. */
static void attend_heads(void *out, float *buf, const void *q, const void *k, const void *v, void *kc, void *vc,
                         const float *c, const float *s, int b, int h0, int h1, int pos, int max_T, int H, int hd,
                         int bf16) {
  const int nh = h1 - h0, len = pos + 1;
  const size_t ld = (size_t)H * hd, row = (size_t)b * ld, base = (size_t)b * max_T * ld;
  float *p = buf, *qr = p + (size_t)nh * len, *acc = qr + (size_t)nh * hd;
  bf16_t *qb = (bf16_t *)(acc + (size_t)nh * hd);
  const size_t qbs = padded_hd(hd);
  for (int h = h0; h < h1; h++) {
    float *qh = qr + (size_t)(h - h0) * hd;
    rotate_and_append(qh, kc, vc, q, k, v, c, s, row + (size_t)h * hd, base + (size_t)pos * ld + (size_t)h * hd, hd,
                      bf16);
    if (bf16) {
      bf16_t *qbh = qb + (size_t)(h - h0) * qbs;
      for (size_t i = 0; i < qbs; i++) qbh[i] = i < (size_t)hd ? f32_to_bf16(qh[i]) : 0; /* exact: qh is rounded */
    }
  }
  const float scale = 1.0f / sqrtf((float)hd);
  for (int j = 0; j < len; j++)
    for (int h = h0; h < h1; h++) {
      const float dot = dot_act(qr + (size_t)(h - h0) * hd, qb + (size_t)(h - h0) * qbs, kc,
                                base + (size_t)j * ld + (size_t)h * hd, hd, bf16);
      p[(size_t)(h - h0) * len + j] = bf16 ? dot : scale * dot;
    }
  for (int h = 0; h < nh; h++) {
    float st[2], *ph = p + (size_t)h * len;
    attn_softmax_row(ph, len, bf16 ? scale : 1.0f, st, 1);
    if (bf16)
      for (int j = 0; j < len; j++) ph[j] = bf16_to_f32(f32_to_bf16(ph[j]));
  }
  for (size_t i = 0; i < (size_t)nh * hd; i++) acc[i] = 0.0f;
  for (int j = 0; j < len; j++)
    for (int h = h0; h < h1; h++)
      axpy_act(acc + (size_t)(h - h0) * hd, p[(size_t)(h - h0) * len + j], vc, base + (size_t)j * ld + (size_t)h * hd,
               hd, bf16);
  for (size_t i = 0; i < (size_t)nh * hd; i++) st_act(out, row + (size_t)h0 * hd + i, acc[i], bf16);
}

void cpu_attention_decode(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q,
                          cact *k, cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H,
                          int hd) {
  BOOST_ASSERT(pos >= 0 && pos < max_T && hd % 2 == 0);
  const int bf16 = be->act_dtype == BOOST_BF16, len = pos + 1, BH = B * H;
  const float *c = cos_t + (size_t)pos * (hd / 2), *s = sin_t + (size_t)pos * (hd / 2);
#pragma omp parallel if ((size_t)BH * len * hd >= DECODE_PAR_MIN)
  {
    /* this thread's (sequence, head) pairs: a contiguous range, cut into
     * runs of heads of one sequence */
    const int nt = boost_team_size(), t = boost_thread_id();
    const int lo = (int)((long)BH * t / nt), hi = (int)((long)BH * (t + 1) / nt);
    float *buf = boost_calloc(decode_buf_floats(H, len, hd), sizeof(float));
    for (int bh = lo; bh < hi;) {
      const int b = bh / H, h1 = (b + 1) * H < hi ? (b + 1) * H : hi;
      attend_heads(out, buf, q, k, v, k_cache, v_cache, c, s, b, bh - b * H, h1 - b * H, pos, max_T, H, hd, bf16);
      bh = h1;
    }
    boost_free(buf);
  }
}
