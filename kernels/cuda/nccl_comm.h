/* NCCL collectives over device buffers, counted like trainer/comm.h's MPI
 * backend (same byte conventions), so a NCCL backend of the comm layer can be
 * a thin switch over these. Built only when nccl.h and libnccl are found
 * (target boost_nccl, which defines BOOST_HAVE_NCCL for its users).
 *
 * One gpu_nccl per communicator (e.g. one for each of tp, dp, pp). Every
 * call is enqueued on the communicator's stream and returns without waiting.
 * Groups of one rank skip the call and count nothing, as comm.c does.
 *
 * Byte counts (per call, this rank's logical payload, not wire bytes):
 *   allreduce      n * elem
 *   reduce-scatter size * chunk * elem (the whole input buffer)
 *   all-gather     chunk * elem (this rank's contribution)
 *   broadcast      n * elem
 *   send / recv    n * elem */
#ifndef BOOST_KERNELS_CUDA_NCCL_COMM_H
#define BOOST_KERNELS_CUDA_NCCL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

void gpu_check_nccl(ncclResult_t r, const char *file, int line);
#define ncclCheck(call) gpu_check_nccl((call), __FILE__, __LINE__)

typedef enum { GPU_DT_F32 = 0, GPU_DT_BF16 } gpu_dtype;
typedef enum { GPU_NCCL_ALLREDUCE = 0, GPU_NCCL_ALLGATHER, GPU_NCCL_REDUCE_SCATTER, GPU_NCCL_BROADCAST,
               GPU_NCCL_SENDRECV, GPU_NCCL_NUM_KINDS } gpu_nccl_kind;

typedef struct {
  uint64_t bytes, calls;
} gpu_nccl_counter;

typedef struct {
  ncclComm_t comm;
  int rank, size;
  cudaStream_t stream;
  gpu_nccl_counter count[GPU_NCCL_NUM_KINDS];
} gpu_nccl;

/* Make the id on one rank and share its sizeof(ncclUniqueId) bytes with the
 * others (e.g. MPI_Bcast), then every rank calls gpu_nccl_init. The device
 * must be selected (cudaSetDevice) before init. */
void gpu_nccl_unique_id(ncclUniqueId *id);
void gpu_nccl_init(gpu_nccl *c, const ncclUniqueId *id, int size, int rank, cudaStream_t stream);
void gpu_nccl_destroy(gpu_nccl *c);
void gpu_nccl_reset_counts(gpu_nccl *c);

/* In-place sum of n elements. */
void gpu_nccl_allreduce_sum(gpu_nccl *c, void *buf, size_t n, gpu_dtype dt);
/* buf holds size * chunk elements; leaves this rank's chunk of the sum at
 * buf + rank * chunk (NCCL's in-place form). */
void gpu_nccl_reduce_scatter_sum(gpu_nccl *c, void *buf, size_t chunk, gpu_dtype dt);
/* buf holds size * chunk elements, this rank's chunk at buf + rank * chunk;
 * gathers every rank's chunk into place. */
void gpu_nccl_allgather_chunks(gpu_nccl *c, void *buf, size_t chunk, gpu_dtype dt);
void gpu_nccl_broadcast(gpu_nccl *c, void *buf, size_t n, gpu_dtype dt, int root);
/* Point-to-point (pipeline stages). */
void gpu_nccl_send(gpu_nccl *c, const void *buf, size_t n, gpu_dtype dt, int peer);
void gpu_nccl_recv(gpu_nccl *c, void *buf, size_t n, gpu_dtype dt, int peer);

#ifdef __cplusplus
}
#endif

#endif
