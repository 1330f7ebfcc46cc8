/* bf16 GEMM with fp32 accumulation: the matrix product of the bf16 training
 * precision on the CPU.
 *
 *   C[M,N] = op(A) . op(B) + beta C,   op(X) = X^T when trans_x
 *
 * Row-major with explicit leading dimensions, as the fp32 kern_gemm() of ops.h:
 * op(A) is M x K (A stored M x K, or K x M when trans_a, row stride lda),
 * op(B) is K x N (stored K x N, or N x K when trans_b, row stride ldb).
 * A and B are bf16 (bf16.h). beta is 0 or 1. C is float when c_is_f32 (the
 * weight gradients, accumulated with beta = 1) and otherwise bf16 rounded to
 * nearest even (activations and activation gradients; with beta = 1 the
 * old bf16 C is added in fp32 before the rounding). Products are exact and
 * summed in fp32. Near the bottom of the range the paths differ: the bf16
 * dot-product instructions treat denormal inputs and partial sums as zero
 * (VDPBF16PS flushes them, like the conversion in bf16.h), the fp32
 * fallback keeps them; below 1.2e-38 that does not matter to training.
 *
 * Runs on oneDNN's matmul primitive where the CPU executes bf16 dot-product
 * instructions (AVX512_BF16, AMX), the library chosen by measurement on the
 * training step's shapes (docs/PERFORMANCE.md, "bf16 GEMMs"); strided
 * operands reach it as dense copies (gemm_bf16_pack.h: oneDNN runs only
 * dense ones on its brgemm/AMX kernels), so a strided product has the bits
 * of the same product on dense copies. Elsewhere --
 * no oneDNN in the build, a CPU without bf16 instructions, or a shape
 * oneDNN refuses -- the inputs are widened to fp32 (exact) and OpenBLAS's
 * sgemm runs through kern_gemm() of ops.h, the output rounded with f32_to_bf16.
 *
 * Threads, as the fp32 kernels do it (cpu_internal.h): C is split by rows
 * or columns over the process's OpenMP threads and each thread runs a
 * single-threaded primitive on its share (a product too small to pay for
 * threads, or a call from inside a parallel region, runs on the calling
 * thread). Debian's oneDNN uses GNU OpenMP, the kernels' own runtime, and
 * creates no threads. Each distinct (transposes, M, N, K, leading
 * dimensions, beta, output type, thread count) creates its primitives once,
 * on first use, and keeps them: a creation costs a JIT compile (0.02-1 ms
 * measured), a cached call half a microsecond. Deterministic: every element of
 * C comes from one primitive, so the same inputs and thread count give the
 * same bits, call after call.
 *
 * Threads: call it from the training thread, or from the threads of an
 * OpenMP parallel region (attention's per-slice products): there each
 * thread runs the whole product single-threaded on its own cached
 * primitive (the cache is shared under a lock), with the same bits as the
 * same product called from outside with one thread. */
#ifndef BOOST_KERNELS_CPU_GEMM_BF16_H
#define BOOST_KERNELS_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

void kern_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
               float beta, void *C, int ldc, int c_is_f32);

/* One line for a start-up log: library and version, implementation and ISA,
 * threads, and whether real bf16 instructions run the products (or that the
 * fp32 fallback does, and why). Always NUL-terminated. */
void gemm_bf16_info(char *buf, size_t n);

/* 1 when the GEMMs run on bf16 dot-product instructions, 0 when the fp32
 * fallback emulates them. */
int gemm_bf16_native(void);

/* Frees every cached primitive (the next call creates them again). For
 * tests and leak checkers; a training run keeps them until exit. */
void gemm_bf16_release(void);

/* The environment variable BOOST_GEMM_BF16 overrides the choice, read once
 * at the first call: "fallback" (widen to fp32 + OpenBLAS), "onednn"
 * (oneDNN even without bf16 instructions: its own emulation), "auto"
 * (default: oneDNN iff it runs bf16 instructions). */

#endif
