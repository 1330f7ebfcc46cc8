/* Strided GEMM operands packed dense before oneDNN sees them (gemm_bf16.c).
 *
 * Measured with bench/bench_onednn_share.sh (docs/PERFORMANCE.md, issue
 * 45): oneDNN 2.6 and 3.2 give every bf16 matmul with a non-dense operand
 * -- a slice of a fused projection, a head's columns of q/k/v, an output
 * written into a wider row -- to gemm:jit, and every dense one to brgemm
 * (on AMX CPUs the AMX kernels). A copy changes no value, so a product on
 * strided operands gets the bits of the same product on dense copies.
 *
 * Buffers are per thread and only grow (attention calls from the threads
 * of its parallel region); gemm_bf16_pack_release frees the calling
 * thread's. */
#ifndef BOOST_KERNELS_CPU_GEMM_BF16_PACK_H
#define BOOST_KERNELS_CPU_GEMM_BF16_PACK_H

#include <stddef.h>
#include <stdint.h>

/* The operands as the primitive will see them. */
typedef struct {
  const uint16_t *A;
  int lda;
  const uint16_t *B;
  int ldb;
  void *C;
  int ldc;
} gemm_operands;

/* Replaces each strided operand of op(A)[M,K] . op(B)[K,N] -> C[M,N] in o
 * by a dense copy (leading dimension = its width); a strided C by a dense
 * buffer, holding C's values when beta (C is float when c_is_f32, else
 * bf16). */
void gemm_bf16_pack(gemm_operands *o, int trans_a, int trans_b, int M, int N, int K, int beta, int c_is_f32);

/* After the product: a C that gemm_bf16_pack replaced is copied back into
 * C (row stride ldc). Nothing when it was not replaced. */
void gemm_bf16_unpack(const gemm_operands *o, void *C, int ldc, int M, int N, int c_is_f32);

/* rows x cols of elem-byte elements from row stride sld to row stride dld. */
void gemm_bf16_copy_rows(void *dst, size_t dld, const void *src, size_t sld, int rows, int cols, size_t elem);

/* One thread's share of a product split over threads (gemm_bf16.c splits C
 * by rows or columns): a column share of a stored matrix -- a transposed
 * A's, a B's, C's -- is strided even where the whole is dense, and oneDNN
 * gives such shares gemm:jit. The calling thread's buffer slot (0: A, 1: B,
 * 2: C; not gemm_bf16_pack's buffers, which may hold the whole operand)
 * sized for rows x cols elem-byte elements, with X's values (row stride ld)
 * when copy. */
void *gemm_bf16_share_dense(int slot, const void *X, int rows, int cols, int ld, size_t elem, int copy);

void gemm_bf16_pack_release(void);

#endif
