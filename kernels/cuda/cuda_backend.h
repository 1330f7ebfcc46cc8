/* What the rest of boost may ask of the CUDA backend besides the seam
 * (kernels/backend.h): the NCCL communication backend (trainer/parallel/comm_nccl.c)
 * queues its collectives on the backend's compute stream, and the GPU
 * check (tests/gpu) names the device. C-callable; only built with CUDA. */
#ifndef BOOST_KERNELS_CUDA_BACKEND_H
#define BOOST_KERNELS_CUDA_BACKEND_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA devices this process sees; 0 when there is no driver or no device
 * (never fails). */
int cuda_device_count(void);
/* The compute stream and device of a "cuda" backend (NULL / -1 for any
 * other backend). */
cudaStream_t cuda_backend_stream(boost_backend *be);
int cuda_backend_device(boost_backend *be);
/* A device_wait.h ready function for a cudaStream_t (ctx): 1 when the
 * stream's work is done, 0 while it runs, -1 with the CUDA error. */
int cuda_stream_ready(void *ctx, boost_status *err);
/* One line: "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB), device 0". */
void cuda_backend_describe(boost_backend *be, char *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif
