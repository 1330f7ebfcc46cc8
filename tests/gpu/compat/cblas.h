/* Minimal cblas.h for the standalone GPU-check build (tests/gpu/run_gpu_check.sh
 * --standalone) on machines without OpenBLAS: declares exactly what
 * kernels/cpu uses, implemented naively in tests/gpu/mini_cblas.c. The CMake
 * build never sees this header (it uses OpenBLAS's). */
#ifndef BOOST_GPU_COMPAT_CBLAS_H
#define BOOST_GPU_COMPAT_CBLAS_H

/* same names and values as OpenBLAS's cblas.h */
typedef enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_ORDER;
typedef enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113, CblasConjNoTrans = 114 } CBLAS_TRANSPOSE;
typedef CBLAS_ORDER CBLAS_LAYOUT;

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

#endif
