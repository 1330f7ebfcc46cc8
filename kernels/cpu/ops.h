/* CPU kernels: fp32, OpenMP across tokens/heads, OpenBLAS for every GEMM.
 *
 * Conventions (shared by every op here and by the CUDA backend):
 *  - Row-major. N = B*T tokens; activations are [N, C].
 *  - Weight matrices are stored [out, in] (PyTorch's nn.Linear layout), so a
 *    projection is out[N,Cout] = in[N,Cin] . W^T. Stacking the [out, in]
 *    matrices of a group (q/k/v A's, gate/up A's) along `out` gives one
 *    [sum out, in] matrix: grouped projections are one GEMM.
 *  - Parameter gradients ACCUMULATE (+=): a step zeroes them once and
 *    micro-batches add. Activation gradients ASSIGN (=). A NULL activation
 *    gradient pointer means "not needed" and skips that work.
 *  - Every op has *_forward and *_backward.
 *  - Every kernel here is kern_<op>: the raw fp32 kernel, called with host
 *    pointers and no backend. The model never calls it; it reaches the op
 *    through the backend seam (be->ops-><op>, kernels/op_list.h), whose CPU
 *    float entry f_<op> forwards to it.
 */
#ifndef BOOST_KERNELS_CPU_OPS_H
#define BOOST_KERNELS_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* ---- embedding: out[N,C] = wte[tokens[n], :], wte [V, C] ---------------- */
void kern_embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int V, int C);
/* dwte[V,C] += scatter of dout rows (deterministic: no atomics). */
void kern_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N, int V, int C);

/* ---- RMSNorm: out = x * rstd * w, rstd[n] = 1/sqrt(mean_c x^2 + eps) ---- */
void kern_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps);
/* dx = (assign), dw += ; uses x, w and the rstd saved by forward. */
void kern_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C);

/* ---- RoPE on [B, T, H, hd] (interleaved pairs (2i, 2i+1), as in Meta's
 * LLaMA). cos/sin tables are [T, hd/2], from kern_rope_tables(). In-place allowed
 * (out == in). Backward rotates by -theta. ------------------------------- */
void kern_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta);
void kern_rope_forward(float *out, const float *in, const float *cos_t, const float *sin_t, int B, int T, int H, int hd);
void kern_rope_backward(float *din, const float *dout, const float *cos_t, const float *sin_t, int B, int T, int H, int hd);

/* ---- causal multi-head attention ---------------------------------------
 * q, k, v, out: [B, T, H, hd] (row stride H*hd per token).
 * stats: [B, H, T, 2] per row max logit and 1/sum of exponentials, saved by
 * the forward for the backward (which recomputes the probabilities from
 * them, bit for bit). scratch: kern_attention_scratch_floats(B, T, H) floats,
 * sized with the OpenMP thread count the kernels will run with.
 * scale = 1/sqrt(hd). */
size_t kern_attention_scratch_floats(int B, int T, int H);
void kern_attention_forward(float *out, float *stats, float *scratch, const float *q, const float *k, const float *v,
                       int B, int T, int H, int hd);
/* dq, dk, dv assigned (NULL skips). */
void kern_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                        const float *q, const float *k, const float *v, const float *stats,
                        int B, int T, int H, int hd);

/* ---- SiLU: out = x * sigmoid(x) ---------------------------------------- */
void kern_silu_forward(float *out, const float *x, size_t n);
void kern_silu_backward(float *dx, const float *dout, const float *x, size_t n);

/* ---- elementwise product out = a * b ----------------------------------- */
void kern_mul_forward(float *out, const float *a, const float *b, size_t n);
void kern_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);

/* ---- residual add out = a + b (backward is the identity to both) -------- */
void kern_add_forward(float *out, const float *a, const float *b, size_t n);

/* ---- full-rank linear: out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T ----------- */
void kern_linear_forward(float *out, const float *in, const float *W, int N, int Cin, int Cout);
/* din = dout . W (assign, skipped if NULL); dW += dout^T . in */
void kern_linear_backward(float *din, float *dW, const float *dout, const float *in, const float *W,
                     int N, int Cin, int Cout);

/* ---- fused softmax cross-entropy over logits [N, V] ----------------------
 * losses[n] = logsumexp(logits[n]) - logits[n][target[n]] (max-subtracted,
 * stable for large logits). Targets must be in [0, V). */
void kern_crossentropy_forward(float *losses, const float *logits, const int32_t *targets, int N, int V);
/* dlogits = (softmax(logits) - onehot(target)) * dloss (assign). dlogits may
 * alias logits (in-place), which is how the trainer saves memory. Also
 * writes losses (may be NULL). */
void kern_crossentropy_backward(float *dlogits, float *losses, const float *logits, const int32_t *targets,
                           int N, int V, float dloss);

/* ---- general matrix product -------------------------------------------
 * C[M,N] = op(A) . op(B) + beta C, row-major with explicit leading
 * dimensions; op(X) = X^T when trans_x. One library call (OpenBLAS,
 * threaded by itself): the model's grouped projections, strided slices. */
void kern_gemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
          float *C, int ldc);
/* y += x */
void kern_add_inplace(float *y, const float *x, size_t n);

/* ---- tensor-parallel RMSNorm pieces (btp: residual sharded over d) -------
 * The norm of a d-sharded stream is folded into the following A-GEMM:
 * gain_sumsq gives the GEMM input xg = x * gain and each token's LOCAL sum
 * of squares ss[n] = sum_c x[n,c]^2; the caller all-reduces [x.A^T, ss]
 * together; online_rms then scales the reduced bottleneck by the global
 * rstd[n] = 1/sqrt(ss[n]/d + eps) (a per-token scalar commutes with the
 * linear map, so this is exact). x, xg: [N, C] (C = the local width). */
void kern_gain_sumsq_forward(float *xg, float *ss, const float *x, const float *gain, int N, int C);
/* dx_acc += dxg * gain + 2 x dss (accumulates into the residual gradient);
 * dgain += sum_n dxg * x. */
void kern_gain_sumsq_backward(float *dx_acc, float *dgain, const float *dxg, const float *x, const float *gain,
                         const float *dss, int N, int C);
/* h[N,w] *= rstd[n], rstd[n] = 1/sqrt(ss[n] * inv_d + eps) (saved). */
void kern_online_rms_forward(float *h, float *rstd, const float *ss, int N, int w, float inv_d, float eps);
/* dh (in place) from d(h*rstd) to dh_raw; dss[n] = d loss / d ss[n].
 * h_scaled: the forward's output (h * rstd). */
void kern_online_rms_backward(float *dh, float *dss, const float *h_scaled, const float *rstd, int N, int w, float inv_d);

/* ---- vocab-parallel cross-entropy (logits sharded over the vocabulary) ----
 * Each rank holds logits[N, V] for the vocab rows [v0, v0 + V). The caller
 * reduces between the pieces: max over ranks after vocab_ce_max, sum after
 * vocab_ce_sums; full logits are never gathered.
 *   vocab_ce_max:    mx[n] = max_v logits[n, v]
 *   vocab_ce_sums:   sums[n] = sum_v exp(logits[n,v] - mx[n]),
 *                    sums[N + n] = logits[n, target - v0] if this rank holds
 *                    the target, else 0
 *   vocab_ce_losses: losses[n] = log(sums[n]) + mx[n] - sums[N + n]
 *   vocab_ce_backward: logits (in place) = (softmax - onehot) * scale */
void kern_vocab_ce_max(float *mx, const float *logits, int N, int V);
void kern_vocab_ce_sums(float *sums, const float *logits, const float *mx, const int32_t *targets, int v0, int N, int V);
void kern_vocab_ce_losses(float *losses, const float *sums, const float *mx, int N);
void kern_vocab_ce_backward(float *logits, const float *sums, const float *mx, const int32_t *targets, int v0, int N, int V,
                       float scale);
/* sum_n losses[n] / N in double, in index order (deterministic). */
double kern_loss_mean(const float *losses, int N);

/* ---- AdamW (decoupled weight decay, bias correction) ---------------------
 * step t starts at 1. grad is multiplied by grad_scale first (clipping).
 * adamw_hparams: backend.h. */
/* Tensors that take no decay (norms, embeddings) pass hp.weight_decay = 0. */
void kern_adamw_update(float *param, const float *grad, float *m, float *v, size_t n, adamw_hparams hp, int t,
                  float grad_scale);
/* The same update, and work[i] = the new param[i] rounded to bf16 (bf16.h's
 * rule) in the same pass; work NULL: adamw_update. */
void kern_adamw_update_round(float *param, const float *grad, float *m, float *v, uint16_t *work, size_t n,
                        adamw_hparams hp, int t, float grad_scale);

/* ---- gradient norm ------------------------------------------------------
 * Sum of squares in double with a fixed reduction order (deterministic for a
 * given n and thread count). */
double kern_sum_squares(const float *x, size_t n);
void kern_scale_inplace(float *x, size_t n, float s);

#endif
