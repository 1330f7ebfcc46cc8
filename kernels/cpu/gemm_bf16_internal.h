/* The pieces of kern_gemm_bf16 (gemm_bf16.c: the choice, the entry point and
 * the fp32 fallback) kept in their own files: the oneDNN primitives
 * (gemm_bf16_dnnl.c) and the one-row product of a decode step
 * (gemm_bf16_row.c). Not for use outside kernels/cpu/gemm_bf16*.c. */
#ifndef BOOST_KERNELS_CPU_GEMM_BF16_INTERNAL_H
#define BOOST_KERNELS_CPU_GEMM_BF16_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static inline int gemm_bf16_in_parallel(void) {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return 0;
#endif
}

/* Starts oneDNN: 1 when it runs bf16 here (or forced, BOOST_GEMM_BF16=onednn,
 * emulated); info receives the backend's line, *native whether the
 * instructions are bf16 ones. 0 with the reason in why (always 0 in a build
 * without oneDNN). Reads BOOST_GEMM_BF16_PACK. */
int gemm_bf16_dnnl_start(int forced, char *why, size_t why_n, char *info, size_t info_n, int *native);

/* The product on oneDNN (kern_gemm_bf16's contract, K > 0): strided
 * operands packed dense, C split over the threads (or the caller's own
 * primitive inside a parallel region). 0 when oneDNN does not take the
 * shape: the caller runs the fallback. */
int gemm_bf16_dnnl_run(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                       float beta, void *C, int ldc, int c_is_f32);

/* Whether the matmul implementation oneDNN names for a bf16 product
 * (e.g. "brg:avx512_core_bf16" on a Zen 4, "brg:avx512_core_amx" on a Xeon
 * with AMX, "gemm:jit" where bf16 is emulated) runs bf16 instructions, on a
 * CPU whose ISA has AVX512-BF16 (isa_has_bf16). A function of its own so
 * that a test gives it the other CPU kind's names (tests/unit/test_bf16.c). */
int gemm_bf16_impl_is_native(int isa_has_bf16, const char *impl);

/* Every cached primitive freed (gemm_bf16_release). */
void gemm_bf16_dnnl_release(void);

/* C[1,N] = bf16(A[1,K] . B[N,K]^T (+ C)) (gemm_bf16_row.c). */
void gemm_bf16_row_times_bt(int N, int K, const uint16_t *A, const uint16_t *B, int ldb, float beta, uint16_t *C);

#endif
