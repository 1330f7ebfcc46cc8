/* A POSIX HDF5 file driver for the direct checkpoint writer (ckpt_direct.c).
 *
 * Rank 0 builds the file's metadata alone through this driver while every
 * rank writes its own compressed chunks with pwrite: rank 0 places each
 * chunk with H5Dwrite_chunk while raw-data writes are switched off, reads
 * the address HDF5 gave it, and the chunk's owner writes the bytes there.
 * The driver keeps no metadata accumulator and no sieve buffer, so no raw
 * data it was told to drop can come back through a cache. It writes no
 * driver block into the superblock: every reader opens the file with its
 * default driver. */
#ifndef BOOST_CKPT_VFD_H
#define BOOST_CKPT_VFD_H

#include <hdf5.h>

/* A file access property list using the driver (registered on first use),
 * with the 1.10 format bounds of checkpoint files; -1 on error. */
hid_t ckpt_vfd_fapl(void);

/* Arms the driver to drop the next raw-data write (H5FD_MEM_DRAW) of
 * exactly `size` bytes: the one H5Dwrite_chunk makes for a chunk another
 * write fills. It still counts toward the file's end. Returns, after the
 * call that should have made it, 1 with its address, 0 if no such write
 * came (the arming is then cleared). Only the writer thread calls HDF5. */
void ckpt_vfd_drop_next_raw(size_t size);
int ckpt_vfd_dropped(haddr_t *addr);

/* Gives up the file open through the driver: its writes and truncation
 * succeed without touching it from now on, so that H5Fclose can release a
 * file whose write failed (HDF5 cannot close one whose flush fails). The
 * caller deletes the file. Cleared when the driver opens the next file. */
void ckpt_vfd_abandon(void);
/* A write or truncation of the open file that the file system refused
 * gives the file up the same way (HDF5 is told it succeeded: it does not
 * survive a failing metadata flush); this returns its errno, 0 when none
 * failed since the driver opened the file. */
int ckpt_vfd_failed(void);

#endif
