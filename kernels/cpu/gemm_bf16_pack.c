/* Dense copies of strided GEMM operands (contract in gemm_bf16_pack.h). */
#include "gemm_bf16_pack.h"

#include <stddef.h>
#include <string.h>

#include "check.h"

typedef struct {
  void *p;
  size_t bytes;
} pack_buf;
static _Thread_local pack_buf pack_a, pack_b, pack_c;
static _Thread_local pack_buf share_buf[3]; /* a thread's share of a split product: A, B, C */

static void *buf_get(pack_buf *b, size_t bytes) {
  if (bytes > b->bytes) {
    boost_free(b->p);
    b->p = boost_calloc(bytes, 1);
    b->bytes = bytes;
  }
  return b->p;
}

/* rows x cols of elem-byte elements from row stride sld to row stride dld */
void gemm_bf16_copy_rows(void *dst, size_t dld, const void *src, size_t sld, int rows, int cols, size_t elem) {
  for (int r = 0; r < rows; r++)
    memcpy((char *)dst + (size_t)r * dld * elem, (const char *)src + (size_t)r * sld * elem, (size_t)cols * elem);
}

/* X stored rows x cols with row stride *ld: itself when dense, else a copy. */
static const uint16_t *dense(pack_buf *b, const uint16_t *X, int rows, int cols, int *ld) {
  if (*ld == cols) return X;
  uint16_t *d = buf_get(b, (size_t)rows * cols * sizeof *d);
  gemm_bf16_copy_rows(d, (size_t)cols, X, (size_t)*ld, rows, cols, sizeof *d);
  *ld = cols;
  return d;
}

void gemm_bf16_pack(gemm_operands *o, int trans_a, int trans_b, int M, int N, int K, int beta, int c_is_f32) {
  o->A = dense(&pack_a, o->A, trans_a ? K : M, trans_a ? M : K, &o->lda);
  o->B = dense(&pack_b, o->B, trans_b ? N : K, trans_b ? K : N, &o->ldb);
  if (o->ldc == N) return;
  const size_t esize = c_is_f32 ? sizeof(float) : sizeof(uint16_t);
  void *c = buf_get(&pack_c, (size_t)M * N * esize);
  if (beta) gemm_bf16_copy_rows(c, (size_t)N, o->C, (size_t)o->ldc, M, N, esize); /* the sum post-op reads the old C */
  o->C = c;
  o->ldc = N;
}

void gemm_bf16_unpack(const gemm_operands *o, void *C, int ldc, int M, int N, int c_is_f32) {
  if (o->C == C) return;
  gemm_bf16_copy_rows(C, (size_t)ldc, o->C, (size_t)N, M, N, c_is_f32 ? sizeof(float) : sizeof(uint16_t));
}

void *gemm_bf16_share_dense(int slot, const void *X, int rows, int cols, int ld, size_t elem, int copy) {
  void *d = buf_get(&share_buf[slot], (size_t)rows * cols * elem);
  if (copy) gemm_bf16_copy_rows(d, (size_t)cols, X, (size_t)ld, rows, cols, elem);
  return d;
}

void gemm_bf16_pack_release(void) {
  pack_buf *all[6] = {&pack_a, &pack_b, &pack_c, &share_buf[0], &share_buf[1], &share_buf[2]};
  for (int i = 0; i < 6; i++) {
    boost_free(all[i]->p);
    *all[i] = (pack_buf){NULL, 0};
  }
}
