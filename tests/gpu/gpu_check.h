/* What tests/gpu/gpu_check.c (the op checks and main) shares with
 * tests/gpu/gpu_bench.c (the throughput lines). */
#ifndef BOOST_TEST_GPU_CHECK_H
#define BOOST_TEST_GPU_CHECK_H

#include <stddef.h>

#include "cuda_ops.h"

extern gpu_ctx ctx; /* the device and stream every check runs on */

/* x[i] = offset + scale * U[-1, 1) from the check's fixed-seed generator */
void fill(float *x, size_t n, float scale, float offset);
/* zeroed host floats (boost_free) */
float *hnew(size_t n);
/* device copies: of host floats; zeroed bf16 / fp32 buffers (gpu_free) */
float *dev_f32(const float *h, size_t n);
gpu_bf16 *dev_bf16_empty(size_t n);
float *dev_f32_empty(size_t n);

/* Throughput of the cola-60m GEMM set, LM head and attention (gpu_bench.c). */
void gpu_bench(void);

#endif
