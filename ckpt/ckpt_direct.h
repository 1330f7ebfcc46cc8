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
 * should a hyperslab still cut a chunk, ckpt_write.c takes the collective
 * HDF5 writer instead. */
#ifndef BOOST_CKPT_DIRECT_H
#define BOOST_CKPT_DIRECT_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_direct ckpt_direct; /* scratch kept across saves */

ckpt_direct *ckpt_direct_new(void);
void ckpt_direct_free(ckpt_direct *dx);

/* 1 when the hyperslab [start, start + count) of a dataset of shape gshape
 * chunked by cd is a union of whole chunks (the dataset's edges count as
 * chunk boundaries). */
int ckpt_direct_slab_aligned(int ndim, const int64_t *gshape, const hsize_t *cd, const int64_t *start,
                             const int64_t *count);

/* One dataset, collectively over comm. Every rank passes its hyperslab of
 * the dataset (count NULL: none) with the data row-major in buf, elements
 * of esz bytes; rank 0 passes the dataset (created with the shuffle + zstd
 * pipeline at `level` and chunk shape cd; -1 elsewhere) and fd is this
 * rank's descriptor of the file, open for writing. Encodes on `threads`
 * threads. The chunks are written by a flusher thread while the next
 * dataset is encoded: ckpt_direct_finish waits for them. Returns this
 * rank's ok (err set otherwise); rank 0 adds the stored bytes of the
 * dataset to *stored. A failure on rank 0 leaves the other ranks' chunks
 * unwritten and is theirs to agree on. */
int ckpt_direct_write(ckpt_direct *dx, MPI_Comm comm, hid_t dset, int fd, int ndim, const int64_t *gshape,
                      const hsize_t *cd, size_t esz, int level, int threads, const int64_t *start,
                      const int64_t *count, const void *buf, double *stored, char *err, size_t errlen);

/* Waits until every chunk handed over is written; 0 with err if a write
 * failed since the last call. Before the file's descriptor is closed. */
int ckpt_direct_finish(ckpt_direct *dx, char *err, size_t errlen);

#endif
