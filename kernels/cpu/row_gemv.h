/* One row against a weight matrix in fp32: c[n] = a . B[n] (+ c[n] when
 * beta = 1), B [N, K] row-major with row stride ldb -- a decode step's
 * products, which read every weight once per token and so run at the
 * speed memory delivers B.
 *
 * The rows are read four at a time and, where they are one block (ldb = K,
 * a model's weights), the block 32 KB ahead (16 rows of K = 512) is
 * prefetched in address order, as gemm_bf16.c's one-row kernel does: the
 * hardware prefetcher follows four interleaved row streams badly. On one
 * Zen 4 core llama-60m's fp32 decode went from 87-90 tok/s on OpenBLAS's
 * sgemv (which this replaces for the decode step) to 135-150
 * (docs/PERFORMANCE.md, issue 36, "Generation: both precisions at the speed
 * of their bytes").
 * Single-threaded: the caller splits N. Each element is one fixed-order sum
 * of K products: the same bits whatever the split.
 *
 * Returns 0 without touching c where the build has no AVX-512 (the caller
 * then runs sgemv). */
#ifndef BOOST_KERNELS_CPU_ROW_GEMV_H
#define BOOST_KERNELS_CPU_ROW_GEMV_H

int row_gemv_f32(int N, int K, const float *a, const float *B, int ldb, float beta, float *c);

#endif
