/* HDF5 Zstandard filter, id 32015: one zstd frame per chunk. See h5z_zstd.h.
 *
 * Compiled twice:
 *  - into boost_ckpt: buffers come from HDF5's allocator, errors go on HDF5's
 *    error stack, and h5z_zstd_register / h5z_zstd_set_dcpl exist;
 *  - with H5Z_ZSTD_PLUGIN into the loadable plugin libh5z_zstd.so. The plugin
 *    links no HDF5 library, because it is loaded into whichever HDF5 the host
 *    process uses (serial in h5dump and h5py, parallel in our programs) and a
 *    second copy of libhdf5 in one process is a bug farm. So the plugin build
 *    calls no HDF5 function: plain malloc/free (what HDF5's allocator is on
 *    Linux builds, and what the community zstd plugin and hdf5plugin use) and
 *    errors handed to h5z_zstd_plugin_error (h5z_zstd_plugin.c: the host
 *    process's stderr, the plugin's only voice). HDF5 adds its own "filter
 *    returned failure" entry.
 */
#include "h5z_zstd.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* HDF5 (1.10) stores a chunk's size in 32 bits: nothing we decode may be
 * larger. Guards against corrupt frame headers asking for absurd buffers. */
#define H5Z_ZSTD_MAX_CHUNK ((size_t)UINT32_MAX)

#ifdef H5Z_ZSTD_PLUGIN
#define ZBUF_ALLOC(n) malloc(n)
#define ZBUF_REALLOC(p, n) realloc((p), (n))
#define ZBUF_FREE(p) free(p)
#else
#define ZBUF_ALLOC(n) H5allocate_memory((n), 0)
#define ZBUF_REALLOC(p, n) H5resize_memory((p), (n))
#define ZBUF_FREE(p) H5free_memory(p)
#endif

enum zerr_kind { ZERR_FILTER, ZERR_NOSPACE, ZERR_BADVALUE, ZERR_CANTINIT };

static void zerr(const char *func, unsigned line, enum zerr_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void zerr(const char *func, unsigned line, enum zerr_kind kind, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
#ifdef H5Z_ZSTD_PLUGIN
  (void)line;
  (void)kind;
  h5z_zstd_plugin_error(func, msg);
#else
  hid_t min = H5E_CANTFILTER;
  switch (kind) {
    case ZERR_FILTER: min = H5E_CANTFILTER; break;
    case ZERR_NOSPACE: min = H5E_CANTALLOC; break;
    case ZERR_BADVALUE: min = H5E_BADVALUE; break;
    case ZERR_CANTINIT: min = H5E_CANTINIT; break;
  }
  H5Epush2(H5E_DEFAULT, __FILE__, func, line, H5E_ERR_CLS, H5E_PLINE, min, "zstd filter (32015): %s", msg);
#endif
}
#define ZERR(kind, ...) zerr(__func__, __LINE__, kind, __VA_ARGS__)

/* cd_values[0] is the level as hdf5plugin stores it: an int cast to unsigned. */
static int level_from_cd(size_t cd_nelmts, const unsigned int cd_values[]) {
  int level = H5Z_ZSTD_DEFAULT_LEVEL;
  if (cd_nelmts >= 1 && cd_values) {
    unsigned u = cd_values[0];
    level = u <= (unsigned)INT_MAX ? (int)u : -(int)(~u) - 1;
  }
  if (level < ZSTD_minCLevel()) level = ZSTD_minCLevel();
  if (level > ZSTD_maxCLevel()) level = ZSTD_maxCLevel();
  return level;
}

static size_t zstd_encode(int level, size_t nbytes, size_t *buf_size, void **buf) {
  size_t bound = ZSTD_compressBound(nbytes);
  if (bound == 0 || ZSTD_isError(bound)) {
    ZERR(ZERR_FILTER, "a chunk of %zu bytes is too large for zstd", nbytes);
    return 0;
  }
  void *out = ZBUF_ALLOC(bound);
  if (!out) {
    ZERR(ZERR_NOSPACE, "cannot allocate %zu bytes for a compressed chunk", bound);
    return 0;
  }
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  if (!cctx) {
    ZBUF_FREE(out);
    ZERR(ZERR_NOSPACE, "ZSTD_createCCtx failed (out of memory)");
    return 0;
  }
  size_t r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  if (ZSTD_isError(r)) {
    ZSTD_freeCCtx(cctx);
    ZBUF_FREE(out);
    ZERR(ZERR_FILTER, "ZSTD_CCtx_setParameter (level %d) failed: %s", level, ZSTD_getErrorName(r));
    return 0;
  }
  size_t n = ZSTD_compress2(cctx, out, bound, *buf, nbytes);
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) {
    ZBUF_FREE(out);
    ZERR(ZERR_FILTER, "ZSTD_compress2 of a %zu-byte chunk at level %d failed: %s", nbytes, level,
         ZSTD_getErrorName(n));
    return 0;
  }
  ZBUF_FREE(*buf);
  *buf = out;
  *buf_size = bound;
  return n;
}

/* Frames without a content size (streamed by other writers): grow as we go. */
static size_t zstd_decode_stream(size_t nbytes, size_t *buf_size, void **buf) {
  ZSTD_DStream *ds = ZSTD_createDStream();
  if (!ds) {
    ZERR(ZERR_NOSPACE, "ZSTD_createDStream failed (out of memory)");
    return 0;
  }
  size_t cap = nbytes <= H5Z_ZSTD_MAX_CHUNK / 4 ? nbytes * 4 : H5Z_ZSTD_MAX_CHUNK;
  if (cap < ZSTD_DStreamOutSize()) cap = ZSTD_DStreamOutSize();
  void *out = ZBUF_ALLOC(cap);
  if (!out) {
    ZSTD_freeDStream(ds);
    ZERR(ZERR_NOSPACE, "cannot allocate %zu bytes for a decompressed chunk", cap);
    return 0;
  }
  ZSTD_inBuffer in = {*buf, nbytes, 0};
  ZSTD_outBuffer ob = {out, cap, 0};
  for (;;) {
    if (ob.pos == ob.size) {
      if (cap >= H5Z_ZSTD_MAX_CHUNK) {
        ZERR(ZERR_FILTER, "a %zu-byte chunk decompresses to more than 4 GiB, more than an HDF5 chunk holds "
                          "(corrupt chunk?)", nbytes);
        goto fail;
      }
      size_t ncap = cap <= H5Z_ZSTD_MAX_CHUNK / 2 ? cap * 2 : H5Z_ZSTD_MAX_CHUNK;
      void *grown = ZBUF_REALLOC(out, ncap);
      if (!grown) {
        ZERR(ZERR_NOSPACE, "cannot grow a decompressed chunk to %zu bytes", ncap);
        goto fail;
      }
      out = grown;
      cap = ncap;
      ob.dst = out;
      ob.size = cap;
    }
    size_t r = ZSTD_decompressStream(ds, &ob, &in);
    if (ZSTD_isError(r)) {
      ZERR(ZERR_FILTER, "zstd stream decompression of a %zu-byte chunk failed at input byte %zu: %s "
                        "(corrupt chunk?)", nbytes, in.pos, ZSTD_getErrorName(r));
      goto fail;
    }
    if (r == 0 && in.pos == in.size) break; /* last frame complete, input used up */
    if (in.pos == in.size && ob.pos < ob.size) {
      ZERR(ZERR_FILTER, "a %zu-byte chunk ends inside a zstd frame (truncated or corrupt chunk)", nbytes);
      goto fail;
    }
  }
  ZSTD_freeDStream(ds);
  if (ob.pos == 0) {
    ZBUF_FREE(out);
    ZERR(ZERR_FILTER, "a %zu-byte chunk decompresses to 0 bytes (corrupt chunk?)", nbytes);
    return 0;
  }
  ZBUF_FREE(*buf);
  *buf = out;
  *buf_size = cap;
  return ob.pos;
fail:
  ZSTD_freeDStream(ds);
  ZBUF_FREE(out);
  return 0;
}

/* Total content size of the frames in src (zstd frames and skippable frames),
 * with the stable API: ZSTD_CONTENTSIZE_UNKNOWN if a frame does not record
 * it, ZSTD_CONTENTSIZE_ERROR if src is not a sequence of whole frames. */
static unsigned long long frames_content_size(const void *src, size_t n) {
  const char *p = src;
  unsigned long long total = 0;
  size_t pos = 0;
  while (pos < n) {
    unsigned long long c = ZSTD_getFrameContentSize(p + pos, n - pos);
    if (c == ZSTD_CONTENTSIZE_ERROR) return ZSTD_CONTENTSIZE_ERROR;
    size_t fsize = ZSTD_findFrameCompressedSize(p + pos, n - pos);
    if (ZSTD_isError(fsize) || fsize == 0) return ZSTD_CONTENTSIZE_ERROR;
    if (c == ZSTD_CONTENTSIZE_UNKNOWN) return ZSTD_CONTENTSIZE_UNKNOWN;
    if (c > H5Z_ZSTD_MAX_CHUNK || total + c > H5Z_ZSTD_MAX_CHUNK) return (unsigned long long)H5Z_ZSTD_MAX_CHUNK + 1;
    total += c;
    pos += fsize;
  }
  return total;
}

static size_t zstd_decode(size_t nbytes, size_t *buf_size, void **buf) {
  if (nbytes == 0) {
    ZERR(ZERR_FILTER, "empty chunk: no zstd frame to decompress");
    return 0;
  }
  unsigned long long content = frames_content_size(*buf, nbytes);
  if (content == ZSTD_CONTENTSIZE_ERROR) {
    ZERR(ZERR_FILTER, "a %zu-byte chunk is not a valid sequence of zstd frames (corrupt chunk, or not "
                      "written by a zstd filter)", nbytes);
    return 0;
  }
  if (content == ZSTD_CONTENTSIZE_UNKNOWN) return zstd_decode_stream(nbytes, buf_size, buf);
  if (content == 0 || content > H5Z_ZSTD_MAX_CHUNK) {
    ZERR(ZERR_FILTER, "zstd frame headers of a %zu-byte chunk claim %s decompressed bytes; an HDF5 chunk holds "
                      "1 to 4294967295 (corrupt chunk?)", nbytes, content == 0 ? "0" : "more than 4294967295");
    return 0;
  }
  size_t size = (size_t)content;
  void *out = ZBUF_ALLOC(size);
  if (!out) {
    ZERR(ZERR_NOSPACE, "cannot allocate %zu bytes for a decompressed chunk", size);
    return 0;
  }
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  if (!dctx) {
    ZBUF_FREE(out);
    ZERR(ZERR_NOSPACE, "ZSTD_createDCtx failed (out of memory)");
    return 0;
  }
  /* The output is bounded by the content size already allocated: accept any
   * window a valid frame of that size may declare. */
  ZSTD_bounds wl = ZSTD_dParam_getBounds(ZSTD_d_windowLogMax);
  size_t r = ZSTD_isError(wl.error) ? wl.error : ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, wl.upperBound);
  if (!ZSTD_isError(r)) r = ZSTD_decompressDCtx(dctx, out, size, *buf, nbytes);
  ZSTD_freeDCtx(dctx);
  if (ZSTD_isError(r)) {
    ZBUF_FREE(out);
    ZERR(ZERR_FILTER, "zstd decompression of a %zu-byte chunk (%zu bytes expected) failed: %s (corrupt chunk?)",
         nbytes, size, ZSTD_getErrorName(r));
    return 0;
  }
  if (r != size) {
    ZBUF_FREE(out);
    ZERR(ZERR_FILTER, "a %zu-byte chunk decompressed to %zu bytes, its frame header says %zu (corrupt chunk?)",
         nbytes, r, size);
    return 0;
  }
  ZBUF_FREE(*buf);
  *buf = out;
  *buf_size = size;
  return size;
}

size_t h5z_zstd_filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[], size_t nbytes,
                       size_t *buf_size, void **buf) {
  if (!buf || !*buf || !buf_size) {
    ZERR(ZERR_BADVALUE, "called without a buffer");
    return 0;
  }
  if (flags & H5Z_FLAG_REVERSE) return zstd_decode(nbytes, buf_size, buf);
  return zstd_encode(level_from_cd(cd_nelmts, cd_values), nbytes, buf_size, buf);
}

const H5Z_class2_t h5z_zstd_class[1] = {{
    .version = H5Z_CLASS_T_VERS,
    .id = (H5Z_filter_t)H5Z_FILTER_ZSTD,
    .encoder_present = 1,
    .decoder_present = 1,
    .name = "Zstandard (boost h5z_zstd)",
    .can_apply = NULL,
    .set_local = NULL,
    .filter = h5z_zstd_filter,
}};

#ifndef H5Z_ZSTD_PLUGIN

int h5z_zstd_register(void) {
  /* H5Zregister replaces an entry with the same id, so calling it again is
   * harmless; it also makes our code win over a plugin loaded earlier. */
  if (H5Zregister(h5z_zstd_class) < 0) {
    ZERR(ZERR_CANTINIT, "H5Zregister of the zstd filter (id %d) failed", H5Z_FILTER_ZSTD);
    return -1;
  }
  return 0;
}

herr_t h5z_zstd_set_dcpl_ex(hid_t dcpl, int ndim, const hsize_t *chunk_dims, int level, unsigned flags) {
  if (ndim < 1 || ndim > H5S_MAX_RANK || !chunk_dims) {
    ZERR(ZERR_BADVALUE, "h5z_zstd_set_dcpl: chunk rank %d is not in 1..%d (or chunk_dims is NULL)", ndim,
         H5S_MAX_RANK);
    return -1;
  }
  for (int d = 0; d < ndim; d++) {
    if (chunk_dims[d] == 0 || chunk_dims[d] > UINT32_MAX) {
      ZERR(ZERR_BADVALUE, "h5z_zstd_set_dcpl: chunk_dims[%d] = %llu is not in 1..4294967295", d,
           (unsigned long long)chunk_dims[d]);
      return -1;
    }
  }
  if (level == 0) level = H5Z_ZSTD_DEFAULT_LEVEL;
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    ZERR(ZERR_BADVALUE, "h5z_zstd_set_dcpl: zstd level %d is not in %d..%d", level, ZSTD_minCLevel(),
         ZSTD_maxCLevel());
    return -1;
  }
  if (flags & ~H5Z_ZSTD_FLETCHER32) {
    ZERR(ZERR_BADVALUE, "h5z_zstd_set_dcpl: unknown flags 0x%x", flags & ~H5Z_ZSTD_FLETCHER32);
    return -1;
  }
  if (h5z_zstd_register() < 0) return -1;
  int nfilters = H5Pget_nfilters(dcpl);
  if (nfilters < 0) {
    ZERR(ZERR_BADVALUE, "h5z_zstd_set_dcpl: H5Pget_nfilters failed (not a dataset creation property list?)");
    return -1;
  }
  if (nfilters > 0) {
    ZERR(ZERR_BADVALUE, "h5z_zstd_set_dcpl: the property list already has %d filter(s)", nfilters);
    return -1;
  }
  if (H5Pset_chunk(dcpl, ndim, chunk_dims) < 0) {
    ZERR(ZERR_CANTINIT, "h5z_zstd_set_dcpl: H5Pset_chunk (rank %d) failed", ndim);
    return -1;
  }
  if (H5Pset_shuffle(dcpl) < 0) {
    ZERR(ZERR_CANTINIT, "h5z_zstd_set_dcpl: H5Pset_shuffle failed");
    return -1;
  }
  const unsigned cd_values[1] = {(unsigned)level};
  if (H5Pset_filter(dcpl, (H5Z_filter_t)H5Z_FILTER_ZSTD, H5Z_FLAG_MANDATORY, 1, cd_values) < 0) {
    ZERR(ZERR_CANTINIT, "h5z_zstd_set_dcpl: H5Pset_filter (zstd, id %d, level %d) failed", H5Z_FILTER_ZSTD, level);
    return -1;
  }
  if ((flags & H5Z_ZSTD_FLETCHER32) && H5Pset_fletcher32(dcpl) < 0) {
    ZERR(ZERR_CANTINIT, "h5z_zstd_set_dcpl: H5Pset_fletcher32 failed");
    return -1;
  }
  return 0;
}

herr_t h5z_zstd_set_dcpl(hid_t dcpl, int ndim, const hsize_t *chunk_dims, int level) {
  return h5z_zstd_set_dcpl_ex(dcpl, ndim, chunk_dims, level, 0);
}

#endif /* !H5Z_ZSTD_PLUGIN */
