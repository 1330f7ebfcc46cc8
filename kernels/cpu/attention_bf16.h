/* Causal attention of the bf16 precision on bf16 GEMMs: the contract of
 * attention_forward/kern_attention_backward (ops.h) with q, k, v, out, dout and
 * the gradients in bf16 ([B, T, H, hd], token stride H*hd) and the per-row
 * statistics in fp32 ([B, H, T, 2]: max logit, 1/sum).
 *
 * Its products run on kern_gemm_bf16 (bf16 inputs, fp32 accumulation) from each
 * thread's own slices: S = Q K^T and dP = dO V^T come out in fp32, the
 * softmax and dS = P (dP - rowsum(dP P)) are fp32, and P and scale*dS are
 * rounded to bf16 only as the inputs of O = P V, dV = P^T dO, dQ = dS K and
 * dK = dS^T Q -- the rounding a bf16 flash attention on a GPU makes. The
 * backward recomputes P from Q, K and the statistics with the forward's own
 * operations, so the two agree bit for bit; deterministic for a given
 * thread count.
 *
 * Only where gemm_bf16 runs on bf16 instructions and every thread gets
 * whole (batch, head) slices (attention_bf16_applies); elsewhere the bf16
 * table widens to fp32 and runs the fp32 kernel. */
#ifndef BOOST_KERNELS_CPU_ATTENTION_BF16_H
#define BOOST_KERNELS_CPU_ATTENTION_BF16_H

#include <stddef.h>

#include "bf16.h"

/* 1 when this kernel runs shape (B, H) on this machine and thread count. */
int attention_bf16_applies(int B, int H);
/* Scratch bytes of either direction. */
size_t attention_bf16_scratch_bytes(int T);

void kern_attention_bf16_forward(bf16_t *out, float *stats, void *scratch, const bf16_t *q, const bf16_t *k,
                            const bf16_t *v, int B, int T, int H, int hd);
/* dq, dk, dv may each be NULL (not wanted); they are assigned, not
 * accumulated. */
void kern_attention_bf16_backward(bf16_t *dq, bf16_t *dk, bf16_t *dv, void *scratch, const bf16_t *dout, const bf16_t *q,
                             const bf16_t *k, const bf16_t *v, const float *stats, int B, int T, int H, int hd);

#endif
