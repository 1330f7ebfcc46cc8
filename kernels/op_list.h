/* The ops of the backend seam, declared once. Every place that lists the
 * ops is made from BOOST_OP_LIST: the table type boost_ops (backend.h), the
 * op names and the completeness check (backend.c), the guarded backend's
 * forwarders (guarded_backend.c), the CPU backend's float and bf16 tables
 * (cpu/cpu_backend.c, cpu/cpu_bf16.c), the CUDA table (cuda/cuda_backend.cu)
 * and the coverage of the op harness (tests/backend_ops). Adding an op to
 * the CPU and guarded backends is its kernel and one line here; the CUDA
 * backend adds its kernel (cu_<name>, in a .cu file of kernels/cuda).
 *
 * One line per op:  OP(cpu, ret, name, (parameters), (arguments))
 *  - cpu: how the CPU backend provides it --
 *      RAW  the float entry calls the fp32 kernel `kern_<name>` of cpu/ops.h
 *           with the arguments (no backend); the bf16 entry is b_<name>
 *           (cpu/cpu_bf16.c);
 *      OWN  f_<name> (cpu/cpu_backend.c) and b_<name> (cpu/cpu_bf16.c);
 *      ANY  cpu_<name>, one entry for both act types (it reads
 *           be->act_dtype where it must; declared from this list in
 *           cpu/cpu_backend.h).
 *  - ret: one token (void, size_t, boost_optim_plan_ptr): BOOST_OP_RETURN
 *    below knows each; a new return type adds its line there.
 *  - parameters: the entry's, `boost_backend *be` first.
 *  - arguments: the parameters after be, as a forwarder passes them on:
 *    MEM(p) marks backend memory (tagged by the guarded backend; may be
 *    NULL where the op allows), HOST(p) host memory; values and host objects (the
 *    optimizer plan) are bare.
 *
 * Op contracts are those of kernels/cpu/ops.h (shapes, row-major layout,
 * weights [out, in]; parameter gradients accumulate, activation gradients
 * assign; NULL activation gradients skip work). */
#ifndef BOOST_KERNELS_OP_LIST_H
#define BOOST_KERNELS_OP_LIST_H

/* clang-format off */
#define BOOST_OP_LIST(OP) \
  /* ---- dense algebra ---- C[M,N] = op(A).op(B) + beta C (beta 0 or 1), row-major, explicit leading
   * dimensions, fp32 accumulation; op(X) = X^T when trans_x. */ \
  OP(RAW, void, gemm, (boost_backend *be, int trans_a, int trans_b, int M, int N, int K, cact *A, int lda, cact *B, int ldb, float beta, boost_act *C, int ldc), (trans_a, trans_b, M, N, K, MEM(A), lda, MEM(B), ldb, beta, MEM(C), ldc)) \
  /* the same accumulated into float C (C += op(A).op(B)): weight gradients */ \
  OP(OWN, void, gemm_acc_f32, (boost_backend *be, int trans_a, int trans_b, int M, int N, int K, cact *A, int lda, cact *B, int ldb, float *C, int ldc), (trans_a, trans_b, M, N, K, MEM(A), lda, MEM(B), ldb, MEM(C), ldc)) \
  OP(RAW, void, add_inplace, (boost_backend *be, boost_act *y, cact *x, size_t n), (MEM(y), MEM(x), n)) \
  OP(RAW, void, add_forward, (boost_backend *be, boost_act *out, cact *a, cact *b, size_t n), (MEM(out), MEM(a), MEM(b), n)) \
  OP(RAW, void, mul_forward, (boost_backend *be, boost_act *out, cact *a, cact *b, size_t n), (MEM(out), MEM(a), MEM(b), n)) \
  OP(RAW, void, mul_backward, (boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n), (MEM(da), MEM(db), MEM(dout), MEM(a), MEM(b), n)) \
  OP(RAW, void, silu_forward, (boost_backend *be, boost_act *out, cact *x, size_t n), (MEM(out), MEM(x), n)) \
  OP(RAW, void, silu_backward, (boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n), (MEM(dx), MEM(dout), MEM(x), n)) \
  /* out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T; backward: din assigned (NULL skips), dW += dout^T . in */ \
  OP(RAW, void, linear_forward, (boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout), (MEM(out), MEM(in), MEM(W), N, Cin, Cout)) \
  OP(RAW, void, linear_backward, (boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N, int Cin, int Cout), (MEM(din), MEM(dW), MEM(dout), MEM(in), MEM(W), N, Cin, Cout)) \
  /* ---- embedding, norms, RoPE, attention ---- (tokens: backend memory) */ \
  OP(RAW, void, embedding_forward, (boost_backend *be, boost_act *out, const int32_t *tokens, cact *wte, int N, int V, int C), (MEM(out), MEM(tokens), MEM(wte), N, V, C)) \
  OP(RAW, void, embedding_backward, (boost_backend *be, float *dwte, cact *dout, const int32_t *tokens, int N, int V, int C), (MEM(dwte), MEM(dout), MEM(tokens), N, V, C)) \
  OP(RAW, void, rmsnorm_forward, (boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C, float eps), (MEM(out), MEM(rstd), MEM(x), MEM(w), N, C, eps)) \
  OP(RAW, void, rmsnorm_backward, (boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w, const float *rstd, int N, int C), (MEM(dx), MEM(dw), MEM(dout), MEM(x), MEM(w), MEM(rstd), N, C)) \
  OP(RAW, void, gain_sumsq_forward, (boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C), (MEM(xg), MEM(ss), MEM(x), MEM(gain), N, C)) \
  OP(RAW, void, gain_sumsq_backward, (boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain, const float *dss, int N, int C), (MEM(dx_acc), MEM(dgain), MEM(dxg), MEM(x), MEM(gain), MEM(dss), N, C)) \
  OP(RAW, void, online_rms_forward, (boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w, float inv_d, float eps), (MEM(h), MEM(rstd), MEM(ss), N, w, inv_d, eps)) \
  OP(RAW, void, online_rms_backward, (boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd, int N, int w, float inv_d), (MEM(dh), MEM(dss), MEM(h_scaled), MEM(rstd), N, w, inv_d)) \
  OP(ANY, void, rope_tables, (boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta), (MEM(cos_t), MEM(sin_t), T, hd, theta)) \
  OP(RAW, void, rope_forward, (boost_backend *be, boost_act *out, cact *in, const float *cos_t, const float *sin_t, int B, int T, int H, int hd), (MEM(out), MEM(in), MEM(cos_t), MEM(sin_t), B, T, H, hd)) \
  OP(RAW, void, rope_backward, (boost_backend *be, boost_act *din, cact *dout, const float *cos_t, const float *sin_t, int B, int T, int H, int hd), (MEM(din), MEM(dout), MEM(cos_t), MEM(sin_t), B, T, H, hd)) \
  /* Attention keeps per-row statistics [B,H,T,2] (max, 1/sum) for the backward, never [B,H,T,T];
   * scratch: attention_scratch_bytes of backend memory. */ \
  OP(OWN, size_t, attention_scratch_bytes, (boost_backend *be, int B, int T, int H), (B, T, H)) \
  OP(RAW, void, attention_forward, (boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k, cact *v, int B, int T, int H, int hd), (MEM(out), MEM(stats), MEM(scratch), MEM(q), MEM(k), MEM(v), B, T, H, hd)) \
  OP(RAW, void, attention_backward, (boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch, cact *dout, cact *q, cact *k, cact *v, const float *stats, int B, int T, int H, int hd), (MEM(dq), MEM(dk), MEM(dv), MEM(scratch), MEM(dout), MEM(q), MEM(k), MEM(v), MEM(stats), B, T, H, hd)) \
  /* One decode step over a KV cache (generation): for each of B sequences the new token at position
   * pos, q/k/v [B, H*hd] before RoPE, gets RoPE at pos (cos_t/sin_t: tables of at least pos + 1 rows);
   * its rotated k and its v are written to row pos of k_cache/v_cache [B, max_T, H*hd];
   * out [B, H*hd] = softmax(q.K[0..pos]^T / sqrt(hd)) V[0..pos]: the last row of attention_forward
   * over the positions 0..pos, within rounding. */ \
  OP(ANY, void, attention_decode, (boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q, cact *k, cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H, int hd), (MEM(out), MEM(k_cache), MEM(v_cache), MEM(q), MEM(k), MEM(v), MEM(cos_t), MEM(sin_t), B, pos, max_T, H, hd)) \
  /* ---- loss ---- (targets: backend memory) */ \
  OP(RAW, void, crossentropy_forward, (boost_backend *be, float *losses, cact *logits, const int32_t *targets, int N, int V), (MEM(losses), MEM(logits), MEM(targets), N, V)) \
  /* dlogits may alias logits (in place); losses may be NULL */ \
  OP(RAW, void, crossentropy_backward, (boost_backend *be, boost_act *dlogits, float *losses, cact *logits, const int32_t *targets, int N, int V, float dloss), (MEM(dlogits), MEM(losses), MEM(logits), MEM(targets), N, V, dloss)) \
  OP(RAW, void, vocab_ce_max, (boost_backend *be, float *mx, cact *logits, int N, int V), (MEM(mx), MEM(logits), N, V)) \
  OP(RAW, void, vocab_ce_sums, (boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *targets, int v0, int N, int V), (MEM(sums), MEM(logits), MEM(mx), MEM(targets), v0, N, V)) \
  OP(ANY, void, vocab_ce_losses, (boost_backend *be, float *losses, const float *sums, const float *mx, int N), (MEM(losses), MEM(sums), MEM(mx), N)) \
  OP(RAW, void, vocab_ce_backward, (boost_backend *be, boost_act *logits, const float *sums, const float *mx, const int32_t *targets, int v0, int N, int V, float scale), (MEM(logits), MEM(sums), MEM(mx), MEM(targets), v0, N, V, scale)) \
  /* *acc += (double)(float)(mean of losses[0..N)), the mean summed in double in an order fixed by N
   * alone (reproducible run to run) but the backend's own: the CPU's in index order, CUDA's as 32
   * strided lane sums combined by a warp butterfly; so backends agree to rounding of the double sum,
   * not bit for bit. acc: one double of backend memory. */ \
  OP(ANY, void, loss_accumulate, (boost_backend *be, const float *losses, int N, double *acc), (MEM(losses), N, MEM(acc))) \
  /* ---- precision ---- dst (act_dtype) <- src (float), rounded to nearest even; a no-op when act_dtype
   * is float and dst == src */ \
  OP(OWN, void, to_act, (boost_backend *be, boost_act *dst, const float *src, size_t n), (MEM(dst), MEM(src), n)) \
  /* dst (float) <- src (act_dtype), exact */ \
  OP(OWN, void, to_f32, (boost_backend *be, float *dst, cact *src, size_t n), (MEM(dst), MEM(src), n)) \
  /* ---- optimizer, over whole arenas ---- the plan is a host object of the backend */ \
  OP(ANY, boost_optim_plan_ptr, optim_plan_create, (boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin, size_t mom_end), (HOST(segs), nseg, mom_begin, mom_end)) \
  OP(ANY, void, optim_plan_free, (boost_backend *be, boost_optim_plan *plan), (plan)) \
  /* *out = sum of grads^2 over the plan's BOOST_SEG_NORM segments, each segment summed in double in a
   * fixed order and added in plan order (deterministic for a given plan and thread count); out: one
   * double of backend memory. */ \
  OP(ANY, void, grad_sumsq, (boost_backend *be, const boost_optim_plan *plan, const float *grads, double *out), (plan, MEM(grads), MEM(out))) \
  /* AdamW over every segment of the plan (step t from 1, grads scaled by grad_scale first);
   * params/grads/work indexed from arena offset 0, m/v from mom_begin. work (act_dtype) receives the
   * updated weights rounded; ignored (may be NULL) when act_dtype is float. */ \
  OP(OWN, void, adamw, (boost_backend *be, const boost_optim_plan *plan, float *params, const float *grads, float *m, float *v, boost_act *work, adamw_hparams hp, int t, float grad_scale), (plan, MEM(params), MEM(grads), MEM(m), MEM(v), MEM(work), hp, t, grad_scale))
/* clang-format on */

/* `return call;` or `call;` by the entry's return type. */
#define BOOST_OP_RETURN(ret, call) BOOST_OP_RETURN_##ret(call)
#define BOOST_OP_RETURN_void(call) call
#define BOOST_OP_RETURN_size_t(call) return call
#define BOOST_OP_RETURN_boost_optim_plan_ptr(call) return call

/* The parameter and argument lists as written (for use inside OP). */
#define BOOST_OP_UNPAREN(...) __VA_ARGS__

#endif
