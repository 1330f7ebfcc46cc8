/* Hyperslabs of checkpoint tensors read on every core, for the offline
 * tools (boost-reshard, boost-inspect verify): the resume's path
 * (ckpt_readback.c) behind a public seam. The stored chunks are read with
 * H5Dread_chunk (one thread: HDF5 is not thread-safe) and decoded --
 * zstd, byte unshuffle, the checksum terms of their elements -- on all
 * threads, the next batch of chunks read while one is decoded. A dataset
 * written with another pipeline or element type (a bf16 export, other
 * filters, a chunk stored with a filter skipped) is read through H5Dread as
 * before, and its checksum computed after. Either way the values and the
 * checksum are those HDF5's own read gives.
 *
 * The file must be open through a driver other than MPI-IO (POSIX, core):
 * parallel HDF5 refuses H5Dread_chunk through MPI-IO. One reader per
 * thread that calls HDF5; it keeps its decode buffers between reads.
 * BOOST_CKPT_SLAB_HDF5=1 in the environment sends every read through
 * H5Dread (the tests compare the two paths' results). */
#ifndef BOOST_CKPT_SLAB_H
#define BOOST_CKPT_SLAB_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct ckpt_slab_reader ckpt_slab_reader;

/* A reader decoding on `threads` threads (<= 0: omp_get_max_threads()).
 * NULL when memory cannot be had. */
ckpt_slab_reader *ckpt_slab_reader_new(int threads);
void ckpt_slab_reader_free(ckpt_slab_reader *r);

/* The hyperslab [start, start + count) of dataset ds (1..8 dimensions;
 * start NULL: the whole dataset) as float32 (bfloat16 widens exactly) into
 * dst, row-major in count's shape (dst NULL: only the checksum), and the
 * sum of its elements' checksum terms (ckpt_hash.h, at their global
 * indices) into *sum: for the whole dataset, what its checksum attribute
 * holds. Returns 0, or -1 with one line in err starting with `what`. */
int ckpt_slab_read(ckpt_slab_reader *r, hid_t ds, const hsize_t *start, const hsize_t *count, float *dst,
                   uint64_t *sum, const char *what, boost_status *err);

#endif
