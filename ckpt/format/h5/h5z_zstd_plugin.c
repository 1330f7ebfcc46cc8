/* Loadable HDF5 filter plugin for zstd (filter id 32015), per HDF5's dynamic
 * plugin contract: HDF5 dlopen()s every library in HDF5_PLUGIN_PATH and asks
 * it for its type and its H5Z_class2_t. The filter code is h5z_zstd.c,
 * compiled into this library with H5Z_ZSTD_PLUGIN (no libhdf5 dependency; see
 * there). Usage: HDF5_PLUGIN_PATH=<build>/hdf5-plugins h5dump file.h5 */
#include <H5PLextern.h>
#include <stdio.h>

#include "h5z_zstd.h"

/* A failure of the filter inside a foreign process (h5dump, h5py): no
 * program of ours owns its terminal, so the plugin says it on stderr
 * itself, once per failure, after which HDF5 reports the read failed. */
void h5z_zstd_plugin_error(const char *func, const char *msg) {
  fprintf(stderr, "h5z_zstd plugin (HDF5 filter 32015): %s: %s\n", func, msg);
}

H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }

const void *H5PLget_plugin_info(void) { return h5z_zstd_class; }
