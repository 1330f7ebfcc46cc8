/* Causal multi-head attention, one (batch, head) at a time, never storing
 * the [B, H, T, T] probabilities.
 *
 * q, k, v, out, dq, dk, dv: [B, T, H, hd] (token stride ld = H*hd), so the
 * (b, h) slice starts at b*T*ld + h*hd with leading dimension ld.
 * stats: [B, H, T, 2], each row's max logit m and 1/sum of exponentials,
 * all the forward keeps for the backward. scale = 1/sqrt(hd).
 *   forward : S = scale Q K^T; P = softmax over j <= i (j > i exactly 0);
 *             O = P V
 *   backward: P recomputed from Q, K and stats; dP = dO V^T;
 *             dS = P * (dP - rowsum(dP * P));
 *             dQ = scale dS K; dK = scale dS^T Q; dV = P^T dO
 * The recomputation repeats the forward's own operations (the same sgemm
 * call per row block, the same exp of S - m, the same product with 1/sum),
 * so P is bit for bit the forward's and so is every result. Memory: O(B H T)
 * kept per layer instead of O(B H T^2) (1 GiB less for cola-60m at T=1024,
 * B=4), and a scratch of a few T x T blocks (attention_scratch_floats). The
 * cost is one more Q K^T GEMM and exp per element in the backward.
 *
 * Causality is used to skip work: rows go in blocks of ATT_BLOCK and each
 * block only multiplies against keys 0..end of block (about half the GEMM
 * flops of the full T x T product for long T).
 *
 * Threads: one OpenMP region, OpenBLAS single-threaded inside (see
 * cpu_internal.h). With at least as many (b, h) slices as threads, each
 * thread takes whole slices (static schedule) and keeps the slice's P and dS
 * in its own scratch, in cache from the row pass to the column pass. With
 * fewer slices (B*H = 1 at inference) the row blocks are dealt round-robin
 * (static, chunk 1, which balances the causal triangle) into one scratch
 * per slice, then a barrier, then the column blocks. Every output element
 * comes from one fixed sequence of operations: deterministic. */
#include "cpu_internal.h"

#include <cblas.h>

#include "ops.h"

#define ATT_BLOCK 128 /* 64 measured 3-6% slower at T=1024: row blocks that small keep the GEMMs far from peak */

/* Rows [i0, i1) of one (b, h) slice's P into Prow (row i at Prow + (i -
 * i0) * T, zero right of the diagonal up to column i1; the columns from i1
 * on are left as they are: no GEMM of the forward or backward reads them). With stats_out, the rows' max and
 * 1/sum are computed and stored (forward); else they are read from stats
 * (backward) and P comes out bit for bit the same. */
static void attn_probs(float *Prow, float *stats, int write_stats, const float *Q, const float *K, int T, int hd, int ld,
                       float scale, int i0, int i1) {
  int mb = i1 - i0;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mb, i1, hd, scale, Q + (size_t)i0 * ld, ld, K, ld, 0.0f, Prow,
              T);
  for (int i = i0; i < i1; i++) {
    float *row = Prow + (size_t)(i - i0) * T;
    int len = i + 1;
    attn_softmax_row(row, len, 1.0f, stats + 2 * (size_t)i, write_stats); /* S is already scaled (sgemm's alpha) */
    for (int j = len; j < i1; j++) row[j] = 0.0f; /* columns >= i1 are never read (see attn_backward_cols) */
  }
}

/* Row block [i0, i1) of the forward: P rows into Prow (scratch), O = P V. */
static void attn_forward_block(float *O, float *Prow, float *stats, const float *Q, const float *K, const float *V,
                               int T, int hd, int ld, float scale, int i0, int i1) {
  attn_probs(Prow, stats, 1, Q, K, T, hd, ld, scale, i0, i1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i1 - i0, hd, i1, 1.0f, Prow, T, V, ld, 0.0f,
              O + (size_t)i0 * ld, ld);
}

/* Row block [i0, i1): dP = dO V^T over keys [0, i1), dS in place of dP
 * (exactly 0 above the diagonal), dQ = scale dS K. */
static void attn_backward_rows(float *dQ, float *D, const float *dO, const float *K, const float *V, const float *P,
                               int T, int hd, int ld, float scale, int i0, int i1) {
  int mb = i1 - i0;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mb, i1, hd, 1.0f, dO + (size_t)i0 * ld, ld, V, ld, 0.0f,
              D + (size_t)i0 * T, T);
  for (int i = i0; i < i1; i++) {
    float *d = D + (size_t)i * T;
    const float *p = P + (size_t)i * T;
    int len = i + 1;
    float rs = 0.0f;
#pragma omp simd reduction(+ : rs)
    for (int j = 0; j < len; j++) rs += d[j] * p[j];
#pragma omp simd
    for (int j = 0; j < len; j++) d[j] = p[j] * (d[j] - rs);
    for (int j = len; j < i1; j++) d[j] = 0.0f;
  }
  if (dQ)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mb, hd, i1, scale, D + (size_t)i0 * T, T, K, ld, 0.0f,
                dQ + (size_t)i0 * ld, ld);
}

/* Column block [j0, j1): rows i < j0 of these columns are 0, so contract
 * over i in [j0, T): dV = P^T dO, dK = scale dS^T Q. The rows it reads are
 * i >= j0, whose row blocks end at or after j1: every entry read was
 * written (or zeroed) by the row pass. */
static void attn_backward_cols(float *dK, float *dV, const float *D, const float *dO, const float *Q, const float *P,
                               int T, int hd, int ld, float scale, int j0, int j1) {
  int nb = j1 - j0;
  if (dV)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nb, hd, T - j0, 1.0f, P + (size_t)j0 * T + j0, T,
                dO + (size_t)j0 * ld, ld, 0.0f, dV + (size_t)j0 * ld, ld);
  if (dK)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nb, hd, T - j0, scale, D + (size_t)j0 * T + j0, T,
                Q + (size_t)j0 * ld, ld, 0.0f, dK + (size_t)j0 * ld, ld);
}

static int attn_par(int B, int T, int H, int hd) {
  /* causal attention does about B*H*T*T*hd multiply-adds */
  return gemm_worth_threads((double)B * H * T * T * hd);
}

#define ATT_SLICE(bh)                               \
  int b = (bh) / H, h = (bh) % H;                   \
  size_t off = (size_t)b * T * ld + (size_t)h * hd; \
  float *st = stats + 2 * (size_t)T * (bh)

size_t kern_attention_scratch_floats(int B, int T, int H) {
  const size_t threads = (size_t)boost_omp_threads(), BH = (size_t)B * H, TT = (size_t)T * T;
  const size_t fwd = threads * ATT_BLOCK * (size_t)T, bwd = (BH < threads ? BH : threads) * 2 * TT;
  return fwd > bwd ? fwd : bwd;
}

void kern_attention_forward(float *out, float *stats, float *scratch, const float *q, const float *k, const float *v, int B,
                       int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  const int ld = H * hd, BH = B * H;
  const float scale = 1.0f / sqrtf((float)hd);
  const int nblk = (T + ATT_BLOCK - 1) / ATT_BLOCK;
  int saved = blas_serial_begin();
#pragma omp parallel if (attn_par(B, T, H, hd))
  {
    float *Prow = scratch + (size_t)boost_thread_id() * ATT_BLOCK * T;
    if (BH >= boost_team_size()) {
#pragma omp for schedule(static)
      for (int bh = 0; bh < BH; bh++) {
        ATT_SLICE(bh);
        for (int i0 = 0; i0 < T; i0 += ATT_BLOCK)
          attn_forward_block(out + off, Prow, st, q + off, k + off, v + off, T, hd, ld, scale, i0,
                             i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T);
      }
    } else {
      /* few slices: deal row blocks round-robin */
#pragma omp for schedule(static, 1)
      for (long task = 0; task < (long)BH * nblk; task++) {
        int bh = (int)(task / nblk), i0 = (int)(task % nblk) * ATT_BLOCK;
        ATT_SLICE(bh);
        attn_forward_block(out + off, Prow, st, q + off, k + off, v + off, T, hd, ld, scale, i0,
                           i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T);
      }
    }
  }
  blas_serial_end(saved);
}

/* Row block [i0, i1) of the backward: P's rows recomputed into the slice's
 * P scratch, then (when dQ or dK is wanted) dS's rows and dQ. */
static void attn_backward_block(float *dQ, float *P, float *D, const float *st, int need_ds, const float *dO,
                                const float *Q, const float *K, const float *V, int T, int hd, int ld, float scale,
                                int i0, int i1) {
  attn_probs(P + (size_t)i0 * T, (float *)st, 0, Q, K, T, hd, ld, scale, i0, i1);
  if (need_ds) attn_backward_rows(dQ, D, dO, K, V, P, T, hd, ld, scale, i0, i1);
}

void kern_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout, const float *q,
                        const float *k, const float *v, const float *stats_in, int B, int T, int H, int hd) {
  if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
  if (!dq && !dk && !dv) return;
  float *stats = (float *)stats_in; /* read only here (attn_probs with write_stats 0) */
  const int ld = H * hd, BH = B * H;
  const float scale = 1.0f / sqrtf((float)hd);
  const int nblk = (T + ATT_BLOCK - 1) / ATT_BLOCK;
  const int need_ds = dq != NULL || dk != NULL;
  const size_t TT = (size_t)T * T;
  int saved = blas_serial_begin();
#pragma omp parallel if (attn_par(B, T, H, hd))
  {
    if (BH >= boost_team_size()) {
      /* whole slices per thread, P and dS in this thread's scratch */
      float *P = scratch + (size_t)boost_thread_id() * 2 * TT, *D = P + TT;
#pragma omp for schedule(static)
      for (int bh = 0; bh < BH; bh++) {
        ATT_SLICE(bh);
        for (int i0 = 0; i0 < T; i0 += ATT_BLOCK)
          attn_backward_block(dq ? dq + off : NULL, P, D, st, need_ds, dout + off, q + off, k + off, v + off, T, hd,
                              ld, scale, i0, i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T);
        for (int j0 = 0; (dk || dv) && j0 < T; j0 += ATT_BLOCK)
          attn_backward_cols(dk ? dk + off : NULL, dv ? dv + off : NULL, D, dout + off, q + off, P, T, hd, ld, scale,
                             j0, j0 + ATT_BLOCK < T ? j0 + ATT_BLOCK : T);
      }
    } else {
      /* few slices: one P, dS scratch per slice */
#pragma omp for schedule(static, 1)
      for (long task = 0; task < (long)BH * nblk; task++) {
        int bh = (int)(task / nblk), i0 = (int)(task % nblk) * ATT_BLOCK;
        ATT_SLICE(bh);
        float *P = scratch + (size_t)bh * 2 * TT;
        attn_backward_block(dq ? dq + off : NULL, P, P + TT, st, need_ds, dout + off, q + off, k + off, v + off, T, hd,
                            ld, scale, i0, i0 + ATT_BLOCK < T ? i0 + ATT_BLOCK : T);
      } /* implicit barrier: dK and dV need every row below their block */
      if (dk || dv) {
#pragma omp for schedule(static, 1)
        for (long task = 0; task < (long)BH * nblk; task++) {
          int bh = (int)(task / nblk), j0 = (int)(task % nblk) * ATT_BLOCK;
          ATT_SLICE(bh);
          (void)st;
          float *P = scratch + (size_t)bh * 2 * TT;
          attn_backward_cols(dk ? dk + off : NULL, dv ? dv + off : NULL, P + TT, dout + off, q + off, P, T, hd, ld,
                             scale, j0, j0 + ATT_BLOCK < T ? j0 + ATT_BLOCK : T);
        }
      }
    }
  }
  blas_serial_end(saved);
}
