/* The CPU's bf16 GEMM: C = op(A).op(B) + beta C (beta 0 or 1), row-major
 * with explicit leading dimensions, bf16 A and B, fp32 accumulation; C
 * float when c_is_f32 (weight gradients accumulate there) or bf16 rounded
 * to nearest even (activations). */
#ifndef BOOST_KERNELS_CPU_GEMM_BF16_H
#define BOOST_KERNELS_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
               float beta, void *C, int ldc, int c_is_f32);
/* Which library and instructions it runs, for the start-up log. */
void gemm_bf16_info(char *buf, size_t n);

#endif
