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
 * The host never blocks in the driver on queued work: a wait polls the
 * stream or an event (kernels/device_wait.h), so the collective watchdog
 * sees it and NCCL's asynchronous errors are checked while it lasts. The
 * calls that do block (docs/CUDA.md lists them) run only when both streams
 * have been polled idle. */

extern "C" int cuda_stream_ready(void *ctx, boost_status *err) {
  const cudaError_t e = cudaStreamQuery((cudaStream_t)ctx);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  boost_err(err, "CUDA error on the stream: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

static int event_ready(void *ctx, boost_status *err) {
  const cudaError_t e = cudaEventQuery((cudaEvent_t)ctx);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  boost_err(err, "CUDA error on the stream: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

static void stream_wait(cudaStream_t s, const char *what) { boost_device_wait(what, cuda_stream_ready, (void *)s); }
static void event_wait(cudaEvent_t e, const char *what) { boost_device_wait(what, event_ready, (void *)e); }

/* ---- pinned staging ---------------------------------------------------------- */

#define STAGE_CHUNK_BYTES ((size_t)4 << 20)

/* Allocated with the backend, while no work is queued (cudaHostAlloc may
 * wait for the device). */
static void staging_init(cuda_staging *st) {
  pthread_mutex_init(&st->lock, NULL);
  st->bytes = STAGE_CHUNK_BYTES;
  for (int k = 0; k < CUDA_STAGE_CHUNKS; k++) {
    cudaCheck(cudaHostAlloc(&st->buf[k], st->bytes, cudaHostAllocPortable));
    cudaCheck(cudaEventCreateWithFlags(&st->done[k], cudaEventDisableTiming));
  }
}
static void staging_free(cuda_staging *st) {
  for (int k = 0; k < CUDA_STAGE_CHUNKS; k++) {
    cudaCheck(cudaEventDestroy(st->done[k]));
    cudaCheck(cudaFreeHost(st->buf[k]));
  }
  pthread_mutex_destroy(&st->lock);
}

static int host_pinned(const void *p) {
  cudaPointerAttributes at;
  const cudaError_t e = cudaPointerGetAttributes(&at, p);
  if (e != cudaSuccess) (void)cudaGetLastError(); /* clears that error only */
  return e == cudaSuccess && at.type == cudaMemoryTypeHost;
}

/* pageable src -> device, through the pinned chunks: each chunk is copied
 * into a free buffer (its previous copy polled complete) and queued; the
 * caller may reuse src on return, the device copies are still queued. */
static void staged_upload(cuda_staging *st, cudaStream_t s, char *dst, const char *src, size_t bytes) {
  pthread_mutex_lock(&st->lock);
  for (size_t off = 0, k = 0; off < bytes; off += st->bytes, k = (k + 1) % CUDA_STAGE_CHUNKS) {
    const size_t n = bytes - off < st->bytes ? bytes - off : st->bytes;
    event_wait(st->done[k], "device upload");
    memcpy(st->buf[k], src + off, n);
    cudaCheck(cudaMemcpyAsync(dst + off, st->buf[k], n, cudaMemcpyHostToDevice, s));
    cudaCheck(cudaEventRecord(st->done[k], s));
  }
  pthread_mutex_unlock(&st->lock);
}

/* device -> pageable dst: chunk k+1 is queued before chunk k is polled and
 * copied out, so the device copies while the host does. */
static void staged_download(cuda_staging *st, cudaStream_t s, char *dst, const char *src, size_t bytes,
                            const char *what) {
  pthread_mutex_lock(&st->lock);
  const size_t chunks = (bytes + st->bytes - 1) / st->bytes;
  for (size_t i = 0; i < chunks + 1; i++) {
    if (i < chunks) { /* queue chunk i (its buffer was emptied at i - 2) */
      const size_t off = i * st->bytes, n = bytes - off < st->bytes ? bytes - off : st->bytes, k = i % CUDA_STAGE_CHUNKS;
      cudaCheck(cudaMemcpyAsync(st->buf[k], src + off, n, cudaMemcpyDeviceToHost, s));
      cudaCheck(cudaEventRecord(st->done[k], s));
    }
    if (i >= 1) { /* chunk i - 1 arrived: out of its buffer */
      const size_t j = i - 1, off = j * st->bytes, n = bytes - off < st->bytes ? bytes - off : st->bytes,
                   k = j % CUDA_STAGE_CHUNKS;
      event_wait(st->done[k], what);
      memcpy(dst + off, st->buf[k], n);
    }
  }
  pthread_mutex_unlock(&st->lock);
}

/* ---- memory ------------------------------------------------------------------
 * Device memory is stream-ordered (cudaMallocAsync / cudaFreeAsync on the
 * compute stream): cudaFree would wait for the whole device, and so for a
 * collective that may never complete. A free is ordered after the copy
 * stream's queued work too (the checkpoint copy may still read it). */

static void *m_alloc(boost_backend *be, size_t bytes) {
  cuda_be *c = CB(be);
  void *p = NULL;
  if (cudaMallocAsync(&p, bytes ? bytes : 1, c->stream) != cudaSuccess) {
    (void)cudaGetLastError(); /* out of memory is not sticky: the caller reports it */
    return NULL;
  }
  cudaCheck(cudaMemsetAsync(p, 0, bytes, c->stream));
  return p;
}
static void m_free(boost_backend *be, void *p) {
  if (!p) return;
  cuda_be *c = CB(be);
  cudaCheck(cudaEventRecord(c->copy_fence, c->copy_stream));
  cudaCheck(cudaStreamWaitEvent(c->stream, c->copy_fence, 0));
  cudaCheck(cudaFreeAsync(p, c->stream));
}
/* Portable: pinned for every context, whichever thread asks. Checkpoint
 * staging allocates these when a run sets up, before training queues any
 * collective. */
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
/* cudaFreeHost waits for the device: the block is kept until the backend is
 * destroyed, after both streams are polled idle. */
static void m_host_free(boost_backend *be, void *p) {
  if (!p) return;
  cuda_be *c = CB(be);
  cuda_host_block *b = (cuda_host_block *)boost_calloc(1, sizeof *b);
  b->p = p;
  pthread_mutex_lock(&c->host_lock);
  b->next = c->host_freed;
  c->host_freed = b;
  pthread_mutex_unlock(&c->host_lock);
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
/* The seam lets the caller reuse src on return. From pageable memory the
 * bytes go through the pinned chunks (copied out of src before return); from
 * pinned memory the DMA reads src later, so the copy is polled complete. A
 * resume uploads from the checkpoint writer's thread (the training thread
 * waits meanwhile), so the device is selected here too. */
static void m_upload(boost_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  cuda_be *c = CB(be);
  cudaCheck(cudaSetDevice(c->device));
  if (!host_pinned(src)) {
    staged_upload(&c->stage_compute, c->stream, (char *)dst, (const char *)src, bytes);
    return;
  }
  cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
  stream_wait(c->stream, "device upload");
}
static void m_download(boost_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_be *c = CB(be);
  if (bytes && !host_pinned(dst)) {
    staged_download(&c->stage_compute, c->stream, (char *)dst, (const char *)src, bytes, "device download");
    return;
  }
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
/* dst is the checkpoint's staging (host_alloc: pinned), so the copy only
 * queues; a pageable dst goes through the copy stream's own chunks, which
 * makes this call wait (polling) for the copy. */
static void m_download_async(boost_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_be *c = CB(be);
  if (!bytes) return;
  cudaCheck(cudaSetDevice(c->device));
  cudaCheck(cudaStreamWaitEvent(c->copy_stream, c->mark, 0));
  if (!host_pinned(dst)) {
    staged_download(&c->stage_copy, c->copy_stream, (char *)dst, (const char *)src, bytes, "device checkpoint copy");
    return;
  }
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

/* The op table: cu_<name> for every line of the op list (kernels/op_list.h),
 * declared here from the list too, so a new op's kernel file needs no
 * declaration elsewhere. */
#define CU_DECLARE(cpu, ret, name, params, args) ret cu_##name params;
BOOST_OP_LIST(CU_DECLARE)
#define CU_ENTRY(cpu, ret, name, params, args) .name = cu_##name,
static const boost_ops cuda_ops = {BOOST_OP_LIST(CU_ENTRY)};

/* ---- the object ---------------------------------------------------------------- */

__global__ void probe_kernel(int *p) {
  if (p) *p = 1;
}

/* Every call after the two polled waits may block on the device (cuBLAS's
 * destroy and cudaFreeHost synchronize it): both streams are idle by then,
 * so nothing a collective holds is left to wait for. */
static void cuda_destroy(boost_backend *be) {
  cuda_be *c = CB(be);
  cudaCheck(cudaSetDevice(c->device));
  stream_wait(c->copy_stream, "device checkpoint copy");
  if (c->scratch) cudaCheck(cudaFreeAsync(c->scratch, c->stream));
  cudaCheck(cudaFreeAsync(c->cublas_ws, c->stream));
  stream_wait(c->stream, "device sync");
  cublasCheck(cublasDestroy(c->cublas));
  for (cuda_host_block *b = c->host_freed, *next; b; b = next) {
    next = b->next;
    cudaCheck(cudaFreeHost(b->p));
    boost_free(b);
  }
  pthread_mutex_destroy(&c->host_lock);
  staging_free(&c->stage_compute);
  staging_free(&c->stage_copy);
  cudaCheck(cudaEventDestroy(c->copy_fence));
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
static int device_usable(int device, cudaDeviceProp *prop, boost_status *err) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
    return boost_err(err, "train.device = cuda: no CUDA GPU is usable here (%s)",
                     e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime"
                                                      : "no CUDA device is visible");
  if (e != cudaSuccess)
    return boost_err(err, "train.device = cuda: the CUDA runtime cannot start: %s", cudaGetErrorString(e));
  if (device < 0 || device >= n)
    return boost_err(err, "train.device = cuda: device %d does not exist (%d visible)", device, n);
  cudaCheck(cudaGetDeviceProperties(prop, device));
  if (prop->major < 8)
    return boost_err(err, "train.device = cuda: %s is sm_%d%d; the CUDA backend needs sm_80 or newer (bf16)",
                     prop->name, prop->major, prop->minor);
  cudaCheck(cudaSetDevice(device));
  cudaFuncAttributes fa;
  if (cudaFuncGetAttributes(&fa, probe_kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return boost_err(err,
                     "train.device = cuda: this build has no kernels for %s (sm_%d%d): rebuild with "
                     "-DBOOST_CUDA_ARCHITECTURES=%d%d",
                     prop->name, prop->major, prop->minor, prop->major, prop->minor);
  }
  return 0;
}

extern "C" boost_backend *cuda_backend_create(boost_dtype act_dtype, int device, boost_status *err) {
  cudaDeviceProp prop;
  if (device_usable(device, &prop, err) != 0) return NULL;
  if (act_dtype != BOOST_F32 && act_dtype != BOOST_BF16) {
    boost_err(err, "the CUDA backend runs f32 or bf16 activations, not %s", boost_dtype_names[act_dtype]);
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
  cudaCheck(cudaEventCreateWithFlags(&c->copy_fence, cudaEventDisableTiming));
  cudaCheck(cudaEventRecord(c->mark, c->stream));
  staging_init(&c->stage_compute);
  staging_init(&c->stage_copy);
  pthread_mutex_init(&c->host_lock, NULL);
  cublasCheck(cublasCreate(&c->cublas));
  cublasCheck(cublasSetStream(c->cublas, c->stream));
  cublasCheck(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST));
  /* fp32 accumulation throughout, also inside split-K reductions */
  cublasCheck(cublasSetMathMode(c->cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  c->cublas_ws_bytes = CUBLAS_WS_BYTES;
  cudaCheck(cudaMallocAsync(&c->cublas_ws, c->cublas_ws_bytes, c->stream));
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
