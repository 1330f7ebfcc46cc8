/* The direct writer's chunks (ckpt_direct.c): one chunk of a rank's slab
 * gathered (zero past the dataset's edge) and shuffled as HDF5's shuffle
 * filter does, into an encoder's buffers, and the zstd context that
 * compresses it as the filter would (h5z_zstd.c: level, checksum, content
 * size; one encoder per thread); then its bytes written at the address
 * rank 0 placed it at. */
#ifndef BOOST_CKPT_DIRECT_CHUNK_H
#define BOOST_CKPT_DIRECT_CHUNK_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zstd.h>

#include "tensor.h"

typedef struct {
  ZSTD_CCtx *cctx;
  unsigned char *plain, *shuffled; /* one chunk each */
  size_t cap;                      /* bytes of each */
  int level, configured;
} ckpt_chunk_encoder;

/* e ready for chunks of chunk_bytes at zstd `level`; 0 when zstd cannot be set up. */
int ckpt_chunk_encoder_ready(ckpt_chunk_encoder *e, size_t chunk_bytes, int level);
void ckpt_chunk_encoder_free(ckpt_chunk_encoder *e);

/* The chunk grid of one rank's slab. */
typedef struct {
  int ndim;
  size_t esz, chunk_elems;
  int64_t lo[TENSOR_MAX_DIMS], n[TENSOR_MAX_DIMS]; /* first chunk and chunks per dim of the slab */
  int64_t grid[TENSOR_MAX_DIMS];                    /* chunks per dim of the dataset */
  const int64_t *gshape, *start, *count;
  const hsize_t *cd;
  const unsigned char *buf;
} ckpt_slab_grid;

/* Chunk k of the slab (row-major over its chunks) into e->shuffled: the
 * chunk's elements gathered (zero past the dataset's edge), shuffled.
 * Returns its global chunk index. */
uint64_t ckpt_slab_stage_chunk(const ckpt_slab_grid *g, int64_t k, ckpt_chunk_encoder *e);

/* n bytes at p written at offset `at` of fd, through short writes and
 * EINTR; -1 with errno on a failure. */
int ckpt_chunk_pwrite(int fd, const unsigned char *p, size_t n, off_t at);

#endif
