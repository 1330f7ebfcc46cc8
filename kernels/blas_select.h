/* OpenBLAS kernel selection (see blas_select.c): every program that links
 * boost_kernels runs with the fastest sgemm kernel the CPU can execute. */
#ifndef BOOST_BLAS_SELECT_H
#define BOOST_BLAS_SELECT_H

typedef enum { BLAS_ISA_BASELINE = 0, BLAS_ISA_AVX2 = 1, BLAS_ISA_AVX512 = 2 } blas_isa;

/* What the CPU and OS can execute (CPUID + XGETBV). */
blas_isa blas_cpu_isa(void);
/* The OPENBLAS_CORETYPE to use instead of current_core, or NULL when the
 * current core already uses the best kernel tier the CPU supports. */
const char *blas_better_core(const char *current_core, blas_isa cpu);
/* The core OpenBLAS runs with in this process. */
const char *blas_core_name(void);

#endif
