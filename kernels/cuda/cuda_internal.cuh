/* Private parts of the CUDA backend (kernels/cuda/ (the .cu files)): its state, checked
 * calls, launch helpers, vector loads of activations, and every op entry
 * (the table is assembled in cuda_backend.cu). The per-thread arithmetic is
 * in hd_*.h, shared with the CPU-side tests. */
#ifndef BOOST_KERNELS_CUDA_INTERNAL_CUH
#define BOOST_KERNELS_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

extern "C" {
#include "backend.h"
#include "check.h"
#include "util.h"
}
#include "cuda_backend.h"
#include "hd_grid.h"
#include "hd_ops.h"

/* Pinned buffers a copy between pageable host memory and the device goes
 * through, chunk by chunk (two chunks in flight): a cudaMemcpyAsync that
 * touches pageable memory returns only when the copy is done, i.e. after
 * everything queued before it on its stream -- possibly a collective that
 * never completes -- so it would block in the driver where the watchdog
 * cannot see; a copy between pinned memory and the device only queues. */
#define CUDA_STAGE_CHUNKS 2
typedef struct {
  pthread_mutex_t lock; /* one staged copy at a time (the training or the writer thread) */
  void *buf[CUDA_STAGE_CHUNKS];
  cudaEvent_t done[CUDA_STAGE_CHUNKS]; /* the chunk's copy on the stream: the buffer is free again */
  size_t bytes;                         /* of each buffer */
} cuda_staging;

/* Host buffers given back (host_free): freed at the backend's destruction,
 * when both streams are known idle -- cudaFreeHost waits for the device. */
typedef struct cuda_host_block {
  void *p;
  struct cuda_host_block *next;
} cuda_host_block;

typedef struct {
  int device, sm_count, cc_major, cc_minor;
  size_t smem_optin; /* largest dynamic shared memory a block may ask for */
  cudaStream_t stream;      /* compute: every op and memory operation */
  cudaStream_t copy_stream; /* checkpoint staging (download_async) */
  cudaEvent_t mark;         /* the compute stream's position at the last mark() */
  cublasHandle_t cublas;
  void *cublas_ws; /* cuBLAS workspace, allocated once */
  size_t cublas_ws_bytes;
  void *scratch; /* op temporaries (sort buffers, column partials): grows, stream-ordered */
  size_t scratch_bytes;
  cuda_staging stage_compute, stage_copy; /* for the compute stream and the copy stream */
  cudaEvent_t copy_fence; /* the copy stream's position when device memory is freed */
  pthread_mutex_t host_lock;
  cuda_host_block *host_freed;
} cuda_be;

static inline cuda_be *CB(boost_backend *be) { return (cuda_be *)be->impl; }
static inline int is_bf16(const boost_backend *be) { return be->act_dtype == BOOST_BF16; }

/* A failing CUDA or cuBLAS call ends the process with one line naming it. */
void cuda_check(cudaError_t err, const char *what, const char *file, int line);
void cublas_check(cublasStatus_t st, const char *file, int line);
#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) cublas_check((call), __FILE__, __LINE__)
#define LAUNCH_CHECK() cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

/* Op temporaries of at least `bytes` on the compute stream (one live use at
 * a time: a second call may move the first's buffer). Growth is
 * stream-ordered (cudaFreeAsync / cudaMallocAsync) and happens only when a
 * larger shape first appears. */
void *cuda_scratch(cuda_be *c, size_t bytes);

static inline unsigned cdiv_u(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }
/* Blocks for a grid-stride loop over `work` items: enough to cover it,
 * capped at 32 waves' worth (elementwise work: the cap never changes a
 * result). */
static inline unsigned ew_grid(const cuda_be *c, size_t work, int block) {
  size_t g = (work + (size_t)block - 1) / (size_t)block, cap = (size_t)(c->sm_count > 0 ? c->sm_count : 1) * 32;
  return (unsigned)(g > cap ? cap : (g < 1 ? 1 : g));
}
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---- warp shuffles and phases ---------------------------------------------------
 * A warp combines with the xor butterfly (every lane ends with the same
 * bits: the combining operations are commutative). A kernel written as
 * phases (hd_grid.h) runs them with RUN_PHASES: each phase, then the
 * barrier or shuffle its kernel's sync function names. */
struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ void phase_sync(int s, hd_red *r) {
  if (s == HD_SYNC_NONE) return;
  if (s == HD_SYNC_BARRIER) {
    __syncthreads();
    return;
  }
  if ((s & HD_WARP0) && threadIdx.x >= 32) return;
  const int op = s & HD_WARP_OP;
  if (op == HD_WARP_SUM_F)
    r->f = warp_reduce(r->f, SumOp());
  else if (op == HD_WARP_MAX_F)
    r->f = warp_reduce(r->f, MaxOp());
  else
    r->d = warp_reduce(r->d, SumOp());
}
/* PHASE: a call using `ph`; SYNC(ph): what follows it (constants: the loop
 * unrolls and the branches fold). */
#define RUN_PHASES(NPH, SYNC, REGS, PHASE)  \
  _Pragma("unroll") for (int ph = 0; ph < (NPH); ph++) { \
    PHASE;                                  \
    phase_sync(SYNC(ph), &(REGS).red);      \
  }

/* Dispatch a kernel template on the backend's act type. */
#define ACT_LAUNCH(be, kernel, grid, block, smem, ...)                                               \
  do {                                                                                              \
    if (is_bf16(be))                                                                                \
      kernel<1><<<(grid), (block), (smem), CB(be)->stream>>>(__VA_ARGS__);                          \
    else                                                                                            \
      kernel<0><<<(grid), (block), (smem), CB(be)->stream>>>(__VA_ARGS__);                          \
    LAUNCH_CHECK();                                                                                 \
  } while (0)

typedef const boost_act cact;

/* ---- the op entries (kernels/backend.h), by file ---------------------------------- */
/* gemm.cu */
void cu_gemm(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb, float beta,
             boost_act *C, int ldc);
void cu_gemm_acc_f32(boost_backend *be, int ta, int tb, int M, int N, int K, cact *A, int lda, cact *B, int ldb,
                     float *C, int ldc);
void cu_linear_forward(boost_backend *be, boost_act *out, cact *in, cact *W, int N, int Cin, int Cout);
void cu_linear_backward(boost_backend *be, boost_act *din, float *dW, cact *dout, cact *in, cact *W, int N, int Cin,
                        int Cout);
/* elementwise.cu */
void cu_add_inplace(boost_backend *be, boost_act *y, cact *x, size_t n);
void cu_add_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n);
void cu_mul_forward(boost_backend *be, boost_act *out, cact *a, cact *b, size_t n);
void cu_mul_backward(boost_backend *be, boost_act *da, boost_act *db, cact *dout, cact *a, cact *b, size_t n);
void cu_silu_forward(boost_backend *be, boost_act *out, cact *x, size_t n);
void cu_silu_backward(boost_backend *be, boost_act *dx, cact *dout, cact *x, size_t n);
void cu_to_act(boost_backend *be, boost_act *dst, const float *src, size_t n);
void cu_to_f32(boost_backend *be, float *dst, cact *src, size_t n);
/* embedding.cu */
void cu_embedding_forward(boost_backend *be, boost_act *out, const int32_t *tokens, cact *wte, int N, int V, int C);
void cu_embedding_backward(boost_backend *be, float *dwte, cact *dout, const int32_t *tokens, int N, int V, int C);
/* norms.cu */
void cu_rmsnorm_forward(boost_backend *be, boost_act *out, float *rstd, cact *x, cact *w, int N, int C, float eps);
void cu_rmsnorm_backward(boost_backend *be, boost_act *dx, float *dw, cact *dout, cact *x, cact *w, const float *rstd,
                         int N, int C);
void cu_gain_sumsq_forward(boost_backend *be, boost_act *xg, float *ss, cact *x, cact *gain, int N, int C);
void cu_gain_sumsq_backward(boost_backend *be, boost_act *dx_acc, float *dgain, cact *dxg, cact *x, cact *gain,
                            const float *dss, int N, int C);
void cu_online_rms_forward(boost_backend *be, boost_act *h, float *rstd, const float *ss, int N, int w, float inv_d,
                           float eps);
void cu_online_rms_backward(boost_backend *be, boost_act *dh, float *dss, cact *h_scaled, const float *rstd, int N,
                            int w, float inv_d);
/* rope.cu */
void cu_rope_tables(boost_backend *be, float *cos_t, float *sin_t, int T, int hd, float theta);
void cu_rope_forward(boost_backend *be, boost_act *out, cact *in, const float *c, const float *s, int B, int T, int H,
                     int hd);
void cu_rope_backward(boost_backend *be, boost_act *din, cact *dout, const float *c, const float *s, int B, int T,
                      int H, int hd);
/* attention_decode.cu */
void cu_attention_decode(boost_backend *be, boost_act *out, boost_act *k_cache, boost_act *v_cache, cact *q, cact *k,
                         cact *v, const float *cos_t, const float *sin_t, int B, int pos, int max_T, int H, int hd);
/* attention.cu */
void cu_attention_setup(cuda_be *c);
size_t cu_attention_scratch_bytes(boost_backend *be, int B, int T, int H);
void cu_attention_forward(boost_backend *be, boost_act *out, float *stats, void *scratch, cact *q, cact *k, cact *v,
                          int B, int T, int H, int hd);
void cu_attention_backward(boost_backend *be, boost_act *dq, boost_act *dk, boost_act *dv, void *scratch, cact *dout,
                           cact *q, cact *k, cact *v, const float *stats, int B, int T, int H, int hd);
/* loss.cu */
void cu_crossentropy_forward(boost_backend *be, float *losses, cact *logits, const int32_t *targets, int N, int V);
void cu_crossentropy_backward(boost_backend *be, boost_act *dlogits, float *losses, cact *logits,
                              const int32_t *targets, int N, int V, float dloss);
void cu_vocab_ce_max(boost_backend *be, float *mx, cact *logits, int N, int V);
void cu_vocab_ce_sums(boost_backend *be, float *sums, cact *logits, const float *mx, const int32_t *targets, int v0,
                      int N, int V);
void cu_vocab_ce_losses(boost_backend *be, float *losses, const float *sums, const float *mx, int N);
void cu_vocab_ce_backward(boost_backend *be, boost_act *logits, const float *sums, const float *mx,
                          const int32_t *targets, int v0, int N, int V, float scale);
void cu_loss_accumulate(boost_backend *be, const float *losses, int N, double *acc);
/* optim.cu */
boost_optim_plan *cu_optim_plan_create(boost_backend *be, const boost_segment *segs, int nseg, size_t mom_begin,
                                       size_t mom_end);
void cu_optim_plan_free(boost_backend *be, boost_optim_plan *plan);
void cu_grad_sumsq(boost_backend *be, const boost_optim_plan *plan, const float *grads, double *out);
void cu_adamw(boost_backend *be, const boost_optim_plan *plan, float *params, const float *grads, float *m, float *v,
              boost_act *work, adamw_hparams hp, int t, float grad_scale);

#endif
