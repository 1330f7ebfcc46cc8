/* HDF5 Zstandard filter (registered filter id 32015).
 *
 * Chunk encoding: one plain zstd frame per chunk (what the community
 * HDF5Plugin-Zstandard and Python's hdf5plugin write and read). Our encoder
 * records the content size and the frame's XXH64 content checksum (a standard
 * frame flag every zstd decoder understands and verifies); the decoder accepts
 * any sequence of zstd frames, with or without content size or checksum.
 *
 *   cd_values[0]  compression level (optional; absent -> ZSTD_CLEVEL_DEFAULT;
 *                 negative levels are stored as the unsigned two's complement,
 *                 as hdf5plugin does; out-of-range levels are clamped)
 *   further cd_values are ignored.
 *
 * The same filter is built twice: into boost_ckpt (registered in-process with
 * h5z_zstd_register) and into the loadable plugin libh5z_zstd.so
 * (<build>/hdf5-plugins, installed to lib/hdf5-plugins) so h5dump and h5py read
 * our checkpoints with HDF5_PLUGIN_PATH.
 *
 * The filter has no mutable global state: every call makes and frees its own
 * zstd contexts, so it is reentrant. (HDF5 itself is called from one thread.)
 */
#ifndef BOOST_H5Z_ZSTD_H
#define BOOST_H5Z_ZSTD_H

#include <hdf5.h>
#include <stddef.h>

#define H5Z_FILTER_ZSTD 32015
#define H5Z_ZSTD_DEFAULT_LEVEL 3

/* Flags for h5z_zstd_set_dcpl_ex. */
#define H5Z_ZSTD_FLETCHER32 0x1u /* append HDF5's fletcher32 after zstd (checksums the stored bytes) */

/* The plugin build only (H5Z_ZSTD_PLUGIN): where the filter's errors go in
 * a foreign process, defined by h5z_zstd_plugin.c. */
void h5z_zstd_plugin_error(const char *func, const char *msg);

/* The filter class (what H5Zregister and the plugin's H5PLget_plugin_info use). */
extern const H5Z_class2_t h5z_zstd_class[1];

/* Register the filter with the HDF5 library of this process (H5Zregister).
 * Idempotent: registering again replaces the entry with the same class.
 * Returns 0 on success, <0 on failure (an entry is pushed on HDF5's error
 * stack naming what failed). */
int h5z_zstd_register(void);

/* Set up a dataset creation property list: H5Pset_chunk(ndim, chunk_dims),
 * H5Pset_shuffle (HDF5 byte shuffle), then zstd at `level` (0 means
 * ZSTD_CLEVEL_DEFAULT; must lie in [ZSTD_minCLevel(), ZSTD_maxCLevel()]).
 * Registers the filter first. The dcpl must not carry any filter yet.
 * Returns >=0 on success, <0 on failure with an HDF5 error-stack entry. */
herr_t h5z_zstd_set_dcpl(hid_t dcpl, int ndim, const hsize_t *chunk_dims, int level);

/* As h5z_zstd_set_dcpl; flags: 0 or H5Z_ZSTD_FLETCHER32. */
herr_t h5z_zstd_set_dcpl_ex(hid_t dcpl, int ndim, const hsize_t *chunk_dims, int level, unsigned flags);

/* The H5Z_func_t itself; exposed for tests. With H5Z_FLAG_REVERSE set it
 * decodes, otherwise encodes. *buf must come from H5allocate_memory (the
 * in-process build hands buffers to HDF5's allocator). Returns the new data
 * size, or 0 on failure (and leaves *buf, *buf_size untouched). */
size_t h5z_zstd_filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[], size_t nbytes,
                       size_t *buf_size, void **buf);

#endif
