/* The CUDA backend object (kernels/backend.h): one device, a compute stream
 * every op and memory operation is queued on, a copy stream for checkpoint
 * staging, cuBLAS with a workspace allocated once, and the op table (the
 * entries live in the other .cu files; both act types share one table and
 * dispatch on be->act_dtype). docs/CUDA.md describes it. */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.cuh"

extern "C" {
#include "device_wait.h"
}

#define CUBLAS_WS_BYTES ((size_t)32 << 20)

void cuda_check(cudaError_t err, const char *what, const char *file, int line) {
  if (err == cudaSuccess) return;
  boost_fail("CUDA error at %s:%d: %s: %s (%s)", file, line, what, cudaGetErrorString(err), cudaGetErrorName(err));
}

void cublas_check(cublasStatus_t st, const char *file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  boost_fail("cuBLAS error at %s:%d: %s (%s)", file, line, cublasGetStatusString(st), cublasGetStatusName(st));
}

void *cuda_scratch(cuda_be *c, size_t bytes) {
  if (bytes > c->scratch_bytes) {
    if (c->scratch) cudaCheck(cudaFreeAsync(c->scratch, c->stream));
    const size_t want = ((bytes + bytes / 4) + 255) & ~(size_t)255;
    cudaCheck(cudaMallocAsync(&c->scratch, want, c->stream));
    c->scratch_bytes = want;
  }
  return c->scratch;
}

/* ---- waits ---------------------------------------------------------------------
 * The host never blocks in the driver: a wait polls the stream
 * (kernels/device_wait.h), so the collective watchdog sees it and NCCL's
 * asynchronous errors are checked while it lasts. */

extern "C" int cuda_stream_ready(void *ctx, char *err, size_t errlen) {
  const cudaError_t e = cudaStreamQuery((cudaStream_t)ctx);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  boost_err(err, errlen, "CUDA error on the stream: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

static void stream_wait(cudaStream_t s, const char *what) { boost_device_wait(what, cuda_stream_ready, (void *)s); }

/* ---- memory ------------------------------------------------------------------ */

static void *m_alloc(boost_backend *be, size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError(); /* out of memory is not sticky: the caller reports it */
    return NULL;
  }
  cudaCheck(cudaMemsetAsync(p, 0, bytes, CB(be)->stream));
  return p;
}
static void m_free(boost_backend *be, void *p) {
  (void)be;
  if (p) cudaCheck(cudaFree(p));
}
/* Portable: pinned for every context, whichever thread asks. */
static void *m_host_alloc(boost_backend *be, size_t bytes) {
  (void)be;
  void *p = NULL;
  if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  memset(p, 0, bytes);
  return p;
}
static void m_host_free(boost_backend *be, void *p) {
  (void)be;
  if (p) cudaCheck(cudaFreeHost(p));
}
static void m_zero(boost_backend *be, void *p, size_t bytes) {
  if (bytes) cudaCheck(cudaMemsetAsync(p, 0, bytes, CB(be)->stream));
}
static void m_copy(boost_backend *be, void *dst, const void *src, size_t bytes) {
  if (bytes) cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, CB(be)->stream));
}
static void m_copy2d(boost_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t rows) {
  if (width && rows)
    cudaCheck(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, CB(be)->stream));
}
/* From pageable memory the copy is staged before cudaMemcpyAsync returns,
 * so src may be reused at once; from pinned memory the DMA reads src later,
 * so the stream is waited for (the seam lets the caller reuse src). A
 * resume uploads from the checkpoint writer's thread (the training thread
 * waits meanwhile), so the device is selected here too. */
static void m_upload(boost_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  cuda_be *c = CB(be);
  cudaCheck(cudaSetDevice(c->device));
  cudaPointerAttributes at;
  const cudaError_t e = cudaPointerGetAttributes(&at, src);
  if (e != cudaSuccess) (void)cudaGetLastError(); /* clears that error only */
  const int pinned = e == cudaSuccess && at.type == cudaMemoryTypeHost;
  cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
  if (pinned) stream_wait(c->stream, "device upload");
}
static void m_download(boost_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_be *c = CB(be);
  if (bytes) cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
  stream_wait(c->stream, "device download");
}
/* mark, download_async and copy_sync may come from the checkpoint writer's
 * thread: the device is per thread in the runtime, so each selects it. */
static void m_mark(boost_backend *be) {
  cuda_be *c = CB(be);
  cudaCheck(cudaSetDevice(c->device));
  cudaCheck(cudaEventRecord(c->mark, c->stream));
}
static void m_download_async(boost_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_be *c = CB(be);
  if (!bytes) return;
  cudaCheck(cudaSetDevice(c->device));
  cudaCheck(cudaStreamWaitEvent(c->copy_stream, c->mark, 0));
  cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->copy_stream));
}
static void m_copy_sync(boost_backend *be) {
  cuda_be *c = CB(be);
  cudaCheck(cudaSetDevice(c->device));
  stream_wait(c->copy_stream, "device checkpoint copy");
}
static void m_sync(boost_backend *be) {
  stream_wait(CB(be)->stream, "device sync");
  cudaCheck(cudaGetLastError());
}
static void *m_host_view(boost_backend *be, const void *p) {
  (void)be, (void)p;
  return NULL;
}

static const boost_mem_ops cuda_mem = {
    .alloc = m_alloc,
    .free = m_free,
    .host_alloc = m_host_alloc,
    .host_free = m_host_free,
    .zero = m_zero,
    .copy = m_copy,
    .copy2d = m_copy2d,
    .upload = m_upload,
    .download = m_download,
    .mark = m_mark,
    .download_async = m_download_async,
    .copy_sync = m_copy_sync,
    .sync = m_sync,
    .host_view = m_host_view,
};

static const boost_ops cuda_ops = {
    .gemm = cu_gemm,
    .gemm_acc_f32 = cu_gemm_acc_f32,
    .add_inplace = cu_add_inplace,
    .add_forward = cu_add_forward,
    .mul_forward = cu_mul_forward,
    .mul_backward = cu_mul_backward,
    .silu_forward = cu_silu_forward,
    .silu_backward = cu_silu_backward,
    .linear_forward = cu_linear_forward,
    .linear_backward = cu_linear_backward,
    .embedding_forward = cu_embedding_forward,
    .embedding_backward = cu_embedding_backward,
    .rmsnorm_forward = cu_rmsnorm_forward,
    .rmsnorm_backward = cu_rmsnorm_backward,
    .gain_sumsq_forward = cu_gain_sumsq_forward,
    .gain_sumsq_backward = cu_gain_sumsq_backward,
    .online_rms_forward = cu_online_rms_forward,
    .online_rms_backward = cu_online_rms_backward,
    .rope_tables = cu_rope_tables,
    .rope_forward = cu_rope_forward,
    .rope_backward = cu_rope_backward,
    .attention_scratch_bytes = cu_attention_scratch_bytes,
    .attention_forward = cu_attention_forward,
    .attention_backward = cu_attention_backward,
    .attention_decode = cu_attention_decode,
    .crossentropy_forward = cu_crossentropy_forward,
    .crossentropy_backward = cu_crossentropy_backward,
    .vocab_ce_max = cu_vocab_ce_max,
    .vocab_ce_sums = cu_vocab_ce_sums,
    .vocab_ce_losses = cu_vocab_ce_losses,
    .vocab_ce_backward = cu_vocab_ce_backward,
    .loss_accumulate = cu_loss_accumulate,
    .to_act = cu_to_act,
    .to_f32 = cu_to_f32,
    .optim_plan_create = cu_optim_plan_create,
    .optim_plan_free = cu_optim_plan_free,
    .grad_sumsq = cu_grad_sumsq,
    .adamw = cu_adamw,
};

/* ---- the object ---------------------------------------------------------------- */

__global__ void probe_kernel(int *p) {
  if (p) *p = 1;
}

static void cuda_destroy(boost_backend *be) {
  cuda_be *c = CB(be);
  cudaCheck(cudaSetDevice(c->device));
  stream_wait(c->copy_stream, "device checkpoint copy");
  stream_wait(c->stream, "device sync");
  if (c->scratch) cudaCheck(cudaFreeAsync(c->scratch, c->stream));
  stream_wait(c->stream, "device sync");
  cublasCheck(cublasDestroy(c->cublas));
  cudaCheck(cudaFree(c->cublas_ws));
  cudaCheck(cudaEventDestroy(c->mark));
  cudaCheck(cudaStreamDestroy(c->copy_stream));
  cudaCheck(cudaStreamDestroy(c->stream));
  boost_free(c);
  boost_free(be);
}

int cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* Whether `device` can run this backend; a one-line reason when not. */
static int device_usable(int device, cudaDeviceProp *prop, char *err, size_t errlen) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
    return boost_err(err, errlen, "train.device = cuda: no CUDA GPU is usable here (%s)",
                     e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime"
                                                      : "no CUDA device is visible");
  if (e != cudaSuccess)
    return boost_err(err, errlen, "train.device = cuda: the CUDA runtime cannot start: %s", cudaGetErrorString(e));
  if (device < 0 || device >= n)
    return boost_err(err, errlen, "train.device = cuda: device %d does not exist (%d visible)", device, n);
  cudaCheck(cudaGetDeviceProperties(prop, device));
  if (prop->major < 8)
    return boost_err(err, errlen, "train.device = cuda: %s is sm_%d%d; the CUDA backend needs sm_80 or newer (bf16)",
                     prop->name, prop->major, prop->minor);
  cudaCheck(cudaSetDevice(device));
  cudaFuncAttributes fa;
  if (cudaFuncGetAttributes(&fa, probe_kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return boost_err(err, errlen,
                     "train.device = cuda: this build has no kernels for %s (sm_%d%d): rebuild with "
                     "-DBOOST_CUDA_ARCHITECTURES=%d%d",
                     prop->name, prop->major, prop->minor, prop->major, prop->minor);
  }
  return 0;
}

extern "C" boost_backend *cuda_backend_create(boost_dtype act_dtype, int device, char *err, size_t errlen) {
  cudaDeviceProp prop;
  if (device_usable(device, &prop, err, errlen) != 0) return NULL;
  if (act_dtype != BOOST_F32 && act_dtype != BOOST_BF16) {
    boost_err(err, errlen, "the CUDA backend runs f32 or bf16 activations, not %s", boost_dtype_names[act_dtype]);
    return NULL;
  }
  cuda_be *c = (cuda_be *)boost_calloc(1, sizeof *c);
  c->device = device;
  c->sm_count = prop.multiProcessorCount;
  c->cc_major = prop.major;
  c->cc_minor = prop.minor;
  c->smem_optin = prop.sharedMemPerBlockOptin;
  cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  cudaCheck(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
  cudaCheck(cudaEventCreateWithFlags(&c->mark, cudaEventDisableTiming));
  cudaCheck(cudaEventRecord(c->mark, c->stream));
  cublasCheck(cublasCreate(&c->cublas));
  cublasCheck(cublasSetStream(c->cublas, c->stream));
  cublasCheck(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST));
  /* fp32 accumulation throughout, also inside split-K reductions */
  cublasCheck(cublasSetMathMode(c->cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  c->cublas_ws_bytes = CUBLAS_WS_BYTES;
  cudaCheck(cudaMalloc(&c->cublas_ws, c->cublas_ws_bytes));
  cublasCheck(cublasSetWorkspace(c->cublas, c->cublas_ws, c->cublas_ws_bytes));
  cu_attention_setup(c);
  boost_backend *be = (boost_backend *)boost_calloc(1, sizeof *be);
  be->name = "cuda";
  be->act_dtype = act_dtype;
  be->mem = &cuda_mem;
  be->ops = &cuda_ops;
  be->impl = c;
  be->destroy = cuda_destroy;
  /* the start-up log's "backend:" line: device, precision, library versions */
  int cublas_v = 0, rt_v = 0, drv_v = 0;
  cublasCheck(cublasGetVersion(c->cublas, &cublas_v));
  cudaCheck(cudaRuntimeGetVersion(&rt_v));
  cudaCheck(cudaDriverGetVersion(&drv_v));
  snprintf(be->info, sizeof be->info,
           "cuda, %s: %.64s (sm_%d%d, %d SMs, %.1f GiB), cuBLAS %d.%d.%d, CUDA runtime %d.%d, driver %d.%d",
           act_dtype == BOOST_BF16 ? "bf16 over fp32 masters" : "fp32", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30), cublas_v / 10000, cublas_v / 100 % 100,
           cublas_v % 100, rt_v / 1000, rt_v % 1000 / 10, drv_v / 1000, drv_v % 1000 / 10);
  return be;
}

extern "C" cudaStream_t cuda_backend_stream(boost_backend *be) {
  return be && be->destroy == cuda_destroy ? CB(be)->stream : NULL;
}
extern "C" int cuda_backend_device(boost_backend *be) { return be && be->destroy == cuda_destroy ? CB(be)->device : -1; }

extern "C" void cuda_backend_describe(boost_backend *be, char *out, size_t len) {
  const int dev = cuda_backend_device(be);
  cudaDeviceProp p;
  if (dev < 0 || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    snprintf(out, len, "not a CUDA backend");
    return;
  }
  snprintf(out, len, "%s (sm_%d%d, %d SMs, %.1f GiB), device %d, act %s", p.name, p.major, p.minor,
           p.multiProcessorCount, (double)p.totalGlobalMem / (1 << 30), dev, boost_dtype_names[be->act_dtype]);
}
