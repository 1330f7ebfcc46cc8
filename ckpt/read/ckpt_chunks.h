/* The chunk reader a load, the read-back and the tools' slab reader share:
 * stored chunks looked up with H5Dread_chunk on the HDF5 thread, read,
 * zstd-decoded, unshuffled into place and hashed by a pool of threads. */
#ifndef BOOST_CKPT_CHUNKS_H
#define BOOST_CKPT_CHUNKS_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Stored chunks read with H5Dread_chunk (one thread: HDF5)
 * and decoded on `threads` threads (zstd, unshuffle, checksum terms). For
 * the hyperslab [st, st + ct) of dataset ds (global shape gshape): its
 * elements into dst (row-major, when not NULL) and their checksum terms
 * summed into *sum. Returns 1, 0 when the dataset's pipeline is not the
 * writer's (read it through H5Dread), -1 with err. The file must be open
 * through a POSIX driver (parallel HDF5 refuses H5Dread_chunk). */
typedef struct ckpt_chunk_reader ckpt_chunk_reader;
ckpt_chunk_reader *ckpt_chunk_reader_new(int threads);
void ckpt_chunk_reader_free(ckpt_chunk_reader *cr);
int ckpt_read_slab_chunks(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                          const hsize_t *ct, float *dst, uint64_t *sum, const char *what, boost_status *err);
/* The same without waiting for the decoding: returns once the slab's
 * chunks are read (1), so the caller can read the next slab meanwhile;
 * dst and *sum (sum may be NULL) are written by the decoders until
 * ckpt_chunk_reader_wait returns, which reports a chunk that did not
 * decode (-1 with err; 0 when all did). A failure is reported once, by
 * the next call of either (the slabs after it start afresh). */
int ckpt_read_slab_chunks_async(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                                const hsize_t *ct, float *dst, uint64_t *sum, const char *what, boost_status *err);
int ckpt_chunk_reader_wait(ckpt_chunk_reader *cr, boost_status *err);
/* The slab through HDF5's filter pipeline (one thread) into dst, and its
 * checksum terms: the path for what the chunk reader does not take. 0, or
 * -1 with the reason on HDF5's error stack (ckpt_h5_error). ndim at most
 * CKPT_HASH_MAX_DIMS. */
int ckpt_read_slab_hdf5(hid_t ds, hid_t space, int ndim, const int64_t *gshape, const hsize_t *st, const hsize_t *ct,
                        float *dst, uint64_t *sum);
#endif
