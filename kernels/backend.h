/* The backend seam: where the model's memory lives and how its math runs.
 *
 * A backend is an object (in the spirit of ggml's): memory operations, one
 * table of ops, and a context every op receives. The model, the optimizer,
 * the pipeline and the checkpoint package hold a `boost_backend *` and touch
 * backend memory only through it: they may compute addresses inside it
 * (base + offset) but never read or write through them. The guarded test
 * backend (guarded_backend.c) hands out addresses the host cannot
 * dereference, so any line that breaks this rule faults where it stands.
 *
 * Memory and ordering. Backend memory is what alloc returns. Every op and
 * every memory operation below is queued, in call order, on the backend's
 * compute stream: a later call sees the effects of an earlier one. On the
 * CPU backend "queued" means "done on return"; on a GPU backend the host
 * returns at once and only the calls documented as synchronising wait
 * (download, sync, copy_sync). A second stream, the copy stream, serves
 * checkpoint staging: mark() records the compute stream's position, and
 * download_async() copies that state to host memory while later compute
 * work runs; copy_sync() waits for those copies. mark, download_async and
 * copy_sync may be called from one thread other than the one that queues
 * compute work (the checkpoint writer); everything else from one thread.
 *
 * Precision. A backend runs one precision policy (docs/PRECISION.md), fixed
 * at creation: act_dtype is the type of activations, activation gradients
 * and the working copy of the weights (BOOST_F32 or BOOST_BF16); master
 * weights, their gradients and the AdamW moments are always float;
 * statistics (RMSNorm rstd, sums of squares, attention row statistics,
 * cross-entropy pieces, losses) are float, norms and loss sums double.
 * Pointers of type `boost_act *` hold act_dtype elements: the type is
 * incomplete on purpose, so the host can neither index nor dereference it
 * and offsets go through boost_act_at().
 *
 * Op contracts are those of kernels/cpu/ops.h (shapes, row-major layout,
 * weights [out, in]; parameter gradients accumulate, activation gradients
 * assign; NULL activation gradients skip work). Collectives are not ops:
 * the model calls the comm layer (trainer/comm.h) between them. */
#ifndef BOOST_KERNELS_BACKEND_H
#define BOOST_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef enum { BOOST_F32 = 0, BOOST_BF16, BOOST_F64, BOOST_I32, BOOST_DTYPE_COUNT } boost_dtype;
extern const char *const boost_dtype_names[BOOST_DTYPE_COUNT];
size_t boost_dtype_size(boost_dtype t);

/* Elements of a backend's act_dtype (incomplete: never dereferenced). */
typedef struct boost_act boost_act;

typedef struct boost_backend boost_backend;

/* AdamW hyper-parameters (decoupled weight decay, bias correction); a
 * segment without BOOST_SEG_DECAY takes no decay. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
} adamw_hparams;

/* A run of one tensor in the arena index space (floats), for the
 * whole-arena optimizer ops: offset, length, and flags. */
enum {
  BOOST_SEG_DECAY = 1u << 0, /* AdamW weight decay applies */
  BOOST_SEG_NORM = 1u << 1,  /* counts in the gradient norm on this rank */
};
typedef struct {
  size_t offset, n;
  unsigned flags;
} boost_segment;
/* The segments of one optimizer shard, handed to the backend once
 * (optim_plan_create); the moment arenas hold [mom_begin, mom_end). */
typedef struct boost_optim_plan boost_optim_plan;

typedef struct {
  /* Zero-filled memory of `bytes`; NULL when it cannot be had. */
  void *(*alloc)(boost_backend *be, size_t bytes);
  void (*free)(boost_backend *be, void *p);
  /* Host memory the backend copies to and from fastest (pinned on a GPU),
   * zero-filled; NULL when it cannot be had. The host may use it freely. */
  void *(*host_alloc)(boost_backend *be, size_t bytes);
  void (*host_free)(boost_backend *be, void *p);
  void (*zero)(boost_backend *be, void *p, size_t bytes);
  /* Within backend memory; the ranges must not overlap. */
  void (*copy)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* rows of `width` bytes: dst + i*dpitch <- src + i*spitch (no overlap). */
  void (*copy2d)(boost_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                 size_t rows);
  /* Host -> backend; src may be reused when it returns. */
  void (*upload)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* Backend -> host; waits for the compute stream, complete on return. */
  void (*download)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* The compute stream's position that the next download_async calls copy from. */
  void (*mark)(boost_backend *be);
  /* Backend -> host on the copy stream, ordered after the last mark(). */
  void (*download_async)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* Waits until every download_async issued so far is complete. */
  void (*copy_sync)(boost_backend *be);
  /* Waits until everything queued on the compute stream is done. */
  void (*sync)(boost_backend *be);
  /* A host pointer to backend memory when the backend's memory is host
   * memory (the CPU backends), NULL otherwise. Only a communication
   * backend that moves host buffers (MPI) and a checkpoint load (which
   * decodes straight into the arenas) may use it. */
  void *(*host_view)(boost_backend *be, const void *p);
} boost_mem_ops;

typedef const boost_act cact; /* shorthand for the table below */

typedef struct boost_ops {
  /* ---- dense algebra ----
   * C[M,N] = op(A).op(B) + beta C (beta 0 or 1), row-major, explicit
   * leading dimensions, fp32 accumulation; op(X) = X^T when trans_x. */
  void (*gemm)(boost_backend *be, int trans_a, int trans_b, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
               float beta, boost_act *C, int ldc);
  /* The same accumulated into float C (C += op(A).op(B)): weight gradients. */
  void (*gemm_acc_f32)(boost_backend *be, int trans_a, int trans_b, int M, int N, int K, cact *A, int lda, cact *B,
                       int ldb, float *C, int ldc);
  void (*add_inplace)(boost_backend *be, boost_act *y, cact *x, size_t n);
  void (*add_forward)(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n);
  void (*mul_forward)(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n);
  void (*mul_backward)(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n);
  void (*silu_forward)(boost_backend *be, boost_act *out, cact *x, size_t n);
  void (*silu_backward)(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n);
  /* out[N,Cout] = in[N,Cin] . W[Cout,Cin]^T; backward: din assigned (NULL
   * skips), dW += dout^T . in */
  void (*linear_forward)(boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout);
  void (*linear_backward)(boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N, int Cin,
                          int Cout);
  /* ---- embedding, norms, RoPE, attention ---- (tokens: backend memory) */
  void (*embedding_forward)(boost_backend *be, boost_act *out, const int32_t *tokens, cact *wte, int N, int V, int C);
  void (*embedding_backward)(boost_backend *be, float *dwte, cact *dout, const int32_t *tokens, int N, int V, int C);
  void (*rmsnorm_forward)(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C, float eps);
  void (*rmsnorm_backward)(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w,
                           const float *rstd, int N, int C);
  void (*gain_sumsq_forward)(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C);
  void (*gain_sumsq_backward)(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                              const float *dss, int N, int C);
  void (*online_rms_forward)(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w, float inv_d,
                             float eps);
  void (*online_rms_backward)(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd, int N,
                              int w, float inv_d);
  void (*rope_tables)(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta);
  void (*rope_forward)(boost_backend *be, boost_act *out, cact *in, const float *cos_t, const float *sin_t, int B,
                       int T, int H, int hd);
  void (*rope_backward)(boost_backend *be, boost_act *din, cact *dout, const float *cos_t, const float *sin_t, int B,
                        int T, int H, int hd);
  /* Attention keeps per-row statistics [B,H,T,2] (max, 1/sum) for the
   * backward, never [B,H,T,T]; scratch: attention_scratch_bytes of backend
   * memory. */
  size_t (*attention_scratch_bytes)(boost_backend *be, int B, int T, int H);
  void (*attention_forward)(boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k, cact *v,
                            int B, int T, int H, int hd);
  void (*attention_backward)(boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch,
                             cact *dout, cact *q, cact *k, cact *v, const float *stats, int B, int T, int H, int hd);
  /* One decode step over a KV cache (generation): for each of B sequences
   * the new token at position pos, q/k/v [B, H*hd] before RoPE, gets RoPE
   * at pos (cos_t/sin_t: tables of at least pos + 1 rows); its rotated k
   * and its v are written to row pos of k_cache/v_cache [B, max_T, H*hd];
   * out [B, H*hd] = softmax(q.K[0..pos]^T / sqrt(hd)) V[0..pos]: the last
   * row of attention_forward over the positions 0..pos, within rounding. */
  void (*attention_decode)(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q,
                           cact *k, cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H,
                           int hd);
  /* ---- loss ---- (targets: backend memory) */
  void (*crossentropy_forward)(boost_backend *be, float *losses, cact *logits, const int32_t *targets, int N, int V);
  /* dlogits may alias logits (in place); losses may be NULL */
  void (*crossentropy_backward)(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                                const int32_t *targets, int N, int V, float dloss);
  void (*vocab_ce_max)(boost_backend *be, float *mx, cact *logits, int N, int V);
  void (*vocab_ce_sums)(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *targets, int v0,
                        int N, int V);
  void (*vocab_ce_losses)(boost_backend *be, float *losses, const float *sums, const float *mx, int N);
  void (*vocab_ce_backward)(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                            const int32_t *targets, int v0, int N, int V, float scale);
  /* *acc += (double)(float)(mean of losses[0..N)), the mean summed in
   * double in an order fixed by N alone (reproducible run to run) but the
   * backend's own: the CPU's in index order, CUDA's as 32 strided lane sums
   * combined by a warp butterfly; so backends agree to rounding of the
   * double sum, not bit for bit. acc: one double of backend memory. */
  void (*loss_accumulate)(boost_backend *be, const float *losses, int N, double *acc);
  /* ---- precision ---- */
  /* dst (act_dtype) <- src (float), rounded to nearest even; a no-op when
   * act_dtype is float and dst == src. */
  void (*to_act)(boost_backend *be, boost_act *dst, const float *src, size_t n);
  /* dst (float) <- src (act_dtype), exact. */
  void (*to_f32)(boost_backend *be, float *dst, cact *src, size_t n);
  /* ---- optimizer, over whole arenas ---- */
  boost_optim_plan *(*optim_plan_create)(boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin,
                                         size_t mom_end);
  void (*optim_plan_free)(boost_backend *be, boost_optim_plan *plan);
  /* *out = sum of grads^2 over the plan's BOOST_SEG_NORM segments, each
   * segment summed in double in a fixed order and added in plan order
   * (deterministic for a given plan and thread count); out: one double of
   * backend memory. */
  void (*grad_sumsq)(boost_backend *be, const boost_optim_plan *plan, const float *grads, double *out);
  /* AdamW over every segment of the plan (step t from 1, grads scaled by
   * grad_scale first); params/grads/work indexed from arena offset 0,
   * m/v from mom_begin. work (act_dtype) receives the updated weights
   * rounded; ignored (may be NULL) when act_dtype is float. */
  void (*adamw)(boost_backend *be, const boost_optim_plan *plan, float *params, const float *grads, float *m, float *v,
                boost_act *work, adamw_hparams hp, int t, float grad_scale);
} boost_ops;

struct boost_backend {
  const char *name;    /* "cpu", "guarded", "cuda" */
  char info[192];      /* one line for the start-up log: the device, precision, GEMM library and instructions */
  boost_dtype act_dtype;
  const boost_mem_ops *mem;
  const boost_ops *ops;
  void *impl;          /* the backend's own state */
  void (*destroy)(boost_backend *be);
};

/* The backend `name` ("cpu", "guarded": the CPU kernels behind memory the
 * host cannot touch, for tests; "cuda": kernels/cuda, when built) with act
 * type act_dtype and `threads` host threads (0: the OpenMP default) on
 * `device` (GPU index; ignored by the CPU backends). NULL with a one-line
 * message when it cannot be created (unknown name, no GPU, no build support,
 * a precision the backend does not run). */
boost_backend *boost_backend_create(const char *name, boost_dtype act_dtype, int threads, int device, char *err,
                                    size_t errlen);
void boost_backend_destroy(boost_backend *be);
/* The process's shared CPU backend with float activations and the threads
 * OpenMP was given (tools and tests that build a model without choosing). */
boost_backend *boost_backend_default(void);
/* Whether this build has the named backend (cuda: compiled in). */
int boost_backend_built(const char *name);

/* An offset of n elements into act_dtype memory. */
static inline boost_act *boost_act_at(const boost_backend *be, const boost_act *p, size_t n) {
  return (boost_act *)((char *)p + n * boost_dtype_size(be->act_dtype));
}
static inline size_t boost_act_bytes(const boost_backend *be, size_t n) { return n * boost_dtype_size(be->act_dtype); }

/* Allocation that fails the process with one line naming what (the model's
 * arenas: a run that cannot hold them cannot start). */
void *boost_be_alloc(boost_backend *be, size_t bytes, const char *what);

/* Clip scale for a global gradient norm: min(1, max_norm / norm); 1 when
 * max_norm <= 0. Host arithmetic on the downloaded norm. */
float boost_clip_scale(double norm, float max_norm);

#endif
