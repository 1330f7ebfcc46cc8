/* The direct checkpoint writer: each rank shuffles and compresses its own
 * chunks in one pass per chunk (on all of the rank's cores when training
 * waits for the save), rank 0 places them in the file, every rank writes
 * its chunks with pwrite.
 *
 * HDF5 1.10 compresses a parallel write inside H5Dwrite, one chunk at a
 * time, through its own shuffle filter and copies; and it refuses direct
 * chunk writes through MPI-IO. So rank 0 alone opens the file, through
 * ckpt_vfd.c, creates every dataset and, for every chunk of every rank (the
 * sizes gathered), calls H5Dwrite_chunk with the chunk's raw write dropped;
 * the addresses HDF5 gave go back to the owners, who write the bytes. The
 * file is what the filter pipeline would have written: the same datasets,
 * pipeline (shuffle, zstd 32015), chunk shapes and frames.
 *
 * It needs every chunk to come from one rank. The chunk shapes follow the
 * ranks' hyperslabs on every layout (ckpt_chunk_dims_cut), so it does;
 * should a hyperslab still cut a chunk, the file takes the collective
 * HDF5 writer instead. */
#ifndef BOOST_CKPT_DIRECT_H
#define BOOST_CKPT_DIRECT_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct ckpt_direct ckpt_direct; /* scratch kept across saves */

ckpt_direct *ckpt_direct_new(void);
void ckpt_direct_free(ckpt_direct *dx);

/* 1 when the hyperslab [start, start + count) of a dataset of shape gshape
 * chunked by cd is a union of whole chunks (the dataset's edges count as
 * chunk boundaries). */
int ckpt_direct_slab_aligned(int ndim, const int64_t *gshape, const hsize_t *cd, const int64_t *start,
                             const int64_t *count);

/* The direct writer places the encoded chunks of many datasets at once:
 * a placement (three collectives) happens wherever the busiest rank's
 * encoded chunks since the last one would pass this many bytes, so the
 * collectives of a file grow with its size, not with its number of
 * datasets; each rank holds at most two batches of this size. */
#define CKPT_DIRECT_BATCH_BYTES ((size_t)32 << 20)

/* One filtered dataset of the file: its global shape and chunk shape (the
 * shuffle + zstd pipeline), element size, and this rank's hyperslab
 * [start, start + count) when it has one (has). */
typedef struct {
  int ndim;
  int64_t gshape[4];
  hsize_t cd[4];
  size_t esz;
  int has;
  int64_t start[4], count[4];
} ckpt_direct_item;

/* Before a file, collectively over comm (one reduction): every rank lists
 * the same datasets in the order it will add them, each with its own
 * hyperslab; level is the zstd level. ok: this rank can write them directly (its
 * hyperslabs are unions of whole chunks). Returns 1 when every rank can;
 * the placements are then fixed identically on every rank. */
int ckpt_direct_begin(ckpt_direct *dx, MPI_Comm comm, int level, int n, const ckpt_direct_item *items, int ok);

/* Dataset k of begin's list, on every rank in the list's order (fd: this
 * rank's descriptor of the file, open for writing): rank 0
 * passes the dataset it created (with the pipeline and chunk shape; -1
 * elsewhere), whose ownership passes here: it is closed once its chunks are
 * placed; stored (rank 0; may be NULL) is where the dataset's stored bytes
 * are added. buf: this rank's hyperslab row-major (NULL when none), needed
 * only during the call (its chunks are encoded here, on `threads`
 * threads). ok: this rank is still fine. Collective only at the placements
 * begin fixed. Returns the verdict of the last placement: 0 when some rank
 * failed (every rank learns it at the same dataset: stop adding). */
int ckpt_direct_add(ckpt_direct *dx, int k, int fd, hid_t dset, const void *buf, double *stored, int threads, int ok);

/* The last placement (collective), then waits until every chunk is
 * written. Returns 1 when every rank's chunks are in the file; else 0 with
 * this rank's reason (or "another rank failed") in err. Before the file's
 * descriptor is closed. */
int ckpt_direct_end(ckpt_direct *dx, int ok, boost_status *err);

#endif
