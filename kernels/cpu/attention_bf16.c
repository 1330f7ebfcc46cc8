/* Causal attention on bf16 GEMMs (contract in attention_bf16.h). The loop
 * structure is attention.c's: row blocks of ATT_BLOCK against keys 0..end
 * of block, whole (batch, head) slices per thread, P and dS of a slice in
 * the thread's scratch from the row pass to the column pass. */
#include "cpu_internal.h" /* first (see there) */
#include "attention_bf16.h"

#include <string.h>

#include "check.h"
#include "gemm_bf16.h"

#define ATT_BLOCK 128

/* A slice's q, k, v, dO and outputs as dense T x hd blocks (row stride hd),
 * copied once per slice: the heads' columns of [B, T, H, hd] are strided
 * (rows H*hd apart), and oneDNN runs only dense operands on brgemm, so
 * gemm_bf16 used to copy each tile's operands dense per call (K and V once
 * per row block). A copy changes no value: the same primitives on the same
 * values, the same bits. Per thread, grow-only (the threads of the
 * kernels' parallel region persist). */
enum { HEAD_Q, HEAD_K, HEAD_V, HEAD_DO, HEAD_OUT0, HEAD_OUT1, HEAD_OUT2, HEAD_N };
static _Thread_local bf16_t *head_buf;
static _Thread_local size_t head_cap;

static bf16_t *head_block(int which, size_t block) {
  if (HEAD_N * block > head_cap) {
    boost_free(head_buf);
    head_buf = boost_calloc(HEAD_N * block, sizeof *head_buf);
    head_cap = HEAD_N * block;
  }
  return head_buf + (size_t)which * block;
}

/* T rows of hd from row stride ld into a dense block, and back. */
static const bf16_t *head_in(int which, const bf16_t *x, int T, int hd, int ld) {
  bf16_t *d = head_block(which, (size_t)T * hd);
  for (int t = 0; t < T; t++) memcpy(d + (size_t)t * hd, x + (size_t)t * ld, (size_t)hd * sizeof *d);
  return d;
}
static void head_out(bf16_t *x, const bf16_t *d, int T, int hd, int ld) {
  for (int t = 0; t < T; t++) memcpy(x + (size_t)t * ld, d + (size_t)t * hd, (size_t)hd * sizeof *d);
}

/* One thread's scratch: the slice's bf16 P and scale*dS (T x T each), and
 * a row block's fp32 S/P and dP (ATT_BLOCK x T each). */
typedef struct {
  bf16_t *Pb, *Db;
  float *S, *dP;
} att_scratch;

static att_scratch scratch_of(void *base, int T) {
  const size_t TT = (size_t)T * T, BT = (size_t)ATT_BLOCK * T;
  char *p = (char *)base + (size_t)boost_thread_id() * attention_bf16_scratch_bytes(T);
  att_scratch s = {(bf16_t *)p, (bf16_t *)(p + 2 * TT), (float *)(p + 4 * TT), (float *)(p + 4 * TT + 4 * BT)};
  return s;
}

size_t attention_bf16_scratch_bytes(int T) {
  const size_t TT = (size_t)T * T, BT = (size_t)ATT_BLOCK * T;
  return 4 * TT + 8 * BT; /* per thread; the caller multiplies by the thread count */
}

int attention_bf16_applies(int B, int H) { return gemm_bf16_native() && B * H >= boost_omp_threads(); }

/* Rows [i0, i1) of P: S = Q K^T in fp32 into S, a dense (i1 - i0) x i1
 * block, softmax of scale*S over j <= i in place (fp32), and its bf16 copy
 * into P's rows (row i at P + (i - p0) pld), zero from i+1 to i1.
 * write_stats: the forward, which computes and stores each row's max and
 * 1/sum; else they are read and P comes out as the forward's. Q and K are
 * dense head blocks (row stride hd). */
static void probs(float *S, bf16_t *P, int pld, int p0, float *st, int write_stats, const bf16_t *Q, const bf16_t *K,
                  int hd, float scale, int i0, int i1) {
  kern_gemm_bf16(0, 1, i1 - i0, i1, hd, Q + (size_t)i0 * hd, hd, K, hd, 0.0f, S, i1, 1);
  for (int i = i0; i < i1; i++) {
    float *row = S + (size_t)(i - i0) * i1;
    const int len = i + 1;
    attn_softmax_row(row, len, scale, st + 2 * (size_t)i, write_stats);
    bf16_t *prow = P + (size_t)(i - p0) * pld;
    bf16_from_f32(prow, row, (size_t)len);
    for (int j = len; j < i1; j++) prow[j] = 0;
  }
}

#define ATT_SLICE(bh)                               \
  const int b = (bh) / H, h = (bh) % H;             \
  const size_t off = (size_t)b * T * ld + (size_t)h * hd; \
  float *st = stats + 2 * (size_t)T * (bh)

static int block_end(int i0, int T) { return i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T; }

void kern_attention_bf16_forward(bf16_t *out, float *stats, void *scratch, const bf16_t *q, const bf16_t *k,
                            const bf16_t *v, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  const int ld = H * hd, BH = B * H;
  const float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
  {
    const att_scratch s = scratch_of(scratch, T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
      ATT_SLICE(bh);
      const bf16_t *qh = head_in(HEAD_Q, q + off, T, hd, ld), *kh = head_in(HEAD_K, k + off, T, hd, ld),
                   *vh = head_in(HEAD_V, v + off, T, hd, ld);
      bf16_t *oh = head_block(HEAD_OUT0, (size_t)T * hd);
      for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
        const int i1 = block_end(i0, T);
        /* the block's P dense (row stride i1): the forward keeps no other rows */
        probs(s.S, s.Pb, i1, i0, st, 1, qh, kh, hd, scale, i0, i1);
        kern_gemm_bf16(0, 0, i1 - i0, hd, i1, s.Pb, i1, vh, hd, 0.0f, oh + (size_t)i0 * hd, hd, 0);
      }
      head_out(out + off, oh, T, hd, ld);
    }
  }
}

/* Row block [i0, i1) of the backward: P recomputed, dP = dO V^T, scale*dS
 * into Db's rows (zero right of the diagonal up to i1), dQ = (scale dS) K. */
static void backward_rows(bf16_t *dQ, const att_scratch *s, float *st, int need_ds, const bf16_t *dO, const bf16_t *Q,
                          const bf16_t *K, const bf16_t *V, int T, int hd, float scale, int i0, int i1) {
  const int mb = i1 - i0;
  probs(s->S, s->Pb, T, 0, st, 0, Q, K, hd, scale, i0, i1);
  if (!need_ds) return;
  kern_gemm_bf16(0, 1, mb, i1, hd, dO + (size_t)i0 * hd, hd, V, hd, 0.0f, s->dP, i1, 1);
  for (int i = i0; i < i1; i++) {
    float *d = s->dP + (size_t)(i - i0) * i1;
    const float *p = s->S + (size_t)(i - i0) * i1;
    const int len = i + 1;
    float rs = 0.0f;
#pragma omp simd reduction(+ : rs)
    for (int j = 0; j < len; j++) rs += d[j] * p[j];
#pragma omp simd
    for (int j = 0; j < len; j++) d[j] = scale * p[j] * (d[j] - rs);
    bf16_t *drow = s->Db + (size_t)i * T;
    bf16_from_f32(drow, d, (size_t)len);
    for (int j = len; j < i1; j++) drow[j] = 0;
  }
  if (dQ) kern_gemm_bf16(0, 0, mb, hd, i1, s->Db + (size_t)i0 * T, T, K, hd, 0.0f, dQ + (size_t)i0 * hd, hd, 0);
}

/* Column block [j0, j1): rows i < j0 of these columns are 0, so the
 * contraction runs over i in [j0, T): dV = P^T dO, dK = (scale dS)^T Q. */
static void backward_cols(bf16_t *dK, bf16_t *dV, const att_scratch *s, const bf16_t *dO, const bf16_t *Q, int T,
                          int hd, int j0, int j1) {
  const int nb = j1 - j0;
  if (dV)
    kern_gemm_bf16(1, 0, nb, hd, T - j0, s->Pb + (size_t)j0 * T + j0, T, dO + (size_t)j0 * hd, hd, 0.0f,
                   dV + (size_t)j0 * hd, hd, 0);
  if (dK)
    kern_gemm_bf16(1, 0, nb, hd, T - j0, s->Db + (size_t)j0 * T + j0, T, Q + (size_t)j0 * hd, hd, 0.0f,
                   dK + (size_t)j0 * hd, hd, 0);
}

void kern_attention_bf16_backward(bf16_t *dq, bf16_t *dk, bf16_t *dv, void *scratch, const bf16_t *dout, const bf16_t *q,
                             const bf16_t *k, const bf16_t *v, const float *stats_in, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0 || (!dq && !dk && !dv)) return;
  float *stats = (float *)stats_in; /* read only here (probs with write_stats 0) */
  const int ld = H * hd, BH = B * H, need_ds = dq != NULL || dk != NULL;
  const float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
  {
    const att_scratch s = scratch_of(scratch, T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
      ATT_SLICE(bh);
      const bf16_t *qh = head_in(HEAD_Q, q + off, T, hd, ld), *kh = head_in(HEAD_K, k + off, T, hd, ld),
                   *vh = head_in(HEAD_V, v + off, T, hd, ld), *doh = head_in(HEAD_DO, dout + off, T, hd, ld);
      bf16_t *dqh = dq ? head_block(HEAD_OUT0, (size_t)T * hd) : NULL,
             *dkh = dk ? head_block(HEAD_OUT1, (size_t)T * hd) : NULL,
             *dvh = dv ? head_block(HEAD_OUT2, (size_t)T * hd) : NULL;
      for (int i0 = 0; i0 < T; i0 += ATT_BLOCK)
        backward_rows(dqh, &s, st, need_ds, doh, qh, kh, vh, T, hd, scale, i0, block_end(i0, T));
      for (int j0 = 0; (dk || dv) && j0 < T; j0 += ATT_BLOCK)
        backward_cols(dkh, dvh, &s, doh, qh, T, hd, j0, block_end(j0, T));
      if (dq) head_out(dq + off, dqh, T, hd, ld);
      if (dk) head_out(dk + off, dkh, T, hd, ld);
      if (dv) head_out(dv + off, dvh, T, hd, ld);
    }
  }
}
