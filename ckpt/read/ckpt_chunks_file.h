/* The file's side of the chunk reader (ckpt_chunks.c): what it asks of
 * HDF5 about a dataset before it reads the stored chunks itself. */
#ifndef BOOST_CKPT_CHUNKS_FILE_H
#define BOOST_CKPT_CHUNKS_FILE_H

#include <hdf5.h>
#include <sys/types.h>

/* The dataset's chunk shape when its pipeline is exactly what the writer
 * sets (shuffle, zstd) on float32 little-endian; 0 otherwise. */
int ckpt_chunks_direct_readable(hid_t ds, int ndim, hsize_t *cdims);

/* The file descriptor under ds when its file is open through the POSIX
 * driver (-1 otherwise), and the file offset of HDF5 address 0. */
int ckpt_chunks_file_fd(hid_t ds, off_t *base);

#endif
