/* The direct writer's chunks (ckpt_direct_chunk.h): a chunk of a rank's
 * slab gathered, shuffled as HDF5's shuffle filter does, ready for zstd;
 * its bytes written whole. */
#include "ckpt_direct_chunk.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_direct.h"

/* HDF5's shuffle filter: byte b of element i goes to b * n + i. */
static void shuffle(unsigned char *restrict out, const unsigned char *restrict in, size_t n, size_t esz) {
  if (esz == 4) {
    unsigned char *o0 = out, *o1 = out + n, *o2 = out + 2 * n, *o3 = out + 3 * n;
    for (size_t i = 0; i < n; i++) {
      o0[i] = in[4 * i];
      o1[i] = in[4 * i + 1];
      o2[i] = in[4 * i + 2];
      o3[i] = in[4 * i + 3];
    }
    return;
  }
  for (size_t b = 0; b < esz; b++)
    for (size_t i = 0; i < n; i++) out[b * n + i] = in[i * esz + b];
}

int ckpt_chunk_encoder_ready(ckpt_chunk_encoder *e, size_t chunk_bytes, int level) {
  if (!e->cctx) e->cctx = ZSTD_createCCtx();
  if (!e->cctx) return 0;
  if (e->cap < chunk_bytes) {
    boost_free(e->plain);
    boost_free(e->shuffled);
    e->plain = boost_calloc(chunk_bytes, 1);
    e->shuffled = boost_calloc(chunk_bytes, 1);
    e->cap = chunk_bytes;
  }
  if (!e->configured || e->level != level) { /* the frame as the filter writes it (h5z_zstd.c) */
    size_t r = ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_contentSizeFlag, 1);
    if (ZSTD_isError(r)) return 0;
    e->level = level;
    e->configured = 1;
  }
  return 1;
}

/* Chunk k of the slab (row-major over its chunks) into e->shuffled: the
 * chunk's elements gathered (zero past the dataset's edge), shuffled.
 * Returns its global chunk index. */
uint64_t ckpt_slab_stage_chunk(const ckpt_slab_grid *g, int64_t k, ckpt_chunk_encoder *e) {
  int64_t q[TENSOR_MAX_DIMS], ext[TENSOR_MAX_DIMS], b0[TENSOR_MAX_DIMS] = {0};
  for (int d = g->ndim - 1; d >= 0; d--) {
    q[d] = g->lo[d] + k % g->n[d];
    k /= g->n[d];
  }
  uint64_t idx = 0;
  int whole_rows = 1, full = 1; /* trailing dims whole (contiguous in the slab), no padding */
  for (int d = 0; d < g->ndim; d++) {
    idx = idx * (uint64_t)g->grid[d] + (uint64_t)q[d];
    const int64_t c = (int64_t)g->cd[d], at = q[d] * c;
    ext[d] = g->gshape[d] - at < c ? g->gshape[d] - at : c;
    b0[d] = at - g->start[d];
    if (ext[d] != c) full = 0;
    if (d > 0 && (ext[d] != g->count[d] || ext[d] != c)) whole_rows = 0;
  }
  size_t row = g->esz; /* bytes of a slab row (dims 1..) */
  for (int d = 1; d < g->ndim; d++) row *= (size_t)g->count[d];
  const unsigned char *src;
  if (whole_rows) { /* contiguous in the slab: shuffle straight from it */
    src = g->buf + (size_t)b0[0] * row;
    if (!full) { /* an edge chunk in dim 0: the tail is padding */
      const size_t valid = (size_t)ext[0] * (row / g->esz);
      memcpy(e->plain, src, valid * g->esz);
      memset(e->plain + valid * g->esz, 0, (g->chunk_elems - valid) * g->esz);
      src = e->plain;
    }
  } else { /* runs along the last dim */
    if (!full) memset(e->plain, 0, g->chunk_elems * g->esz);
    const int L = g->ndim - 1;
    int64_t i[TENSOR_MAX_DIMS] = {0};
    for (;;) {
      size_t so = 0, co = 0;
      for (int d = 0; d < L; d++) {
        so = so * (size_t)g->count[d] + (size_t)(b0[d] + i[d]);
        co = co * (size_t)g->cd[d] + (size_t)i[d];
      }
      so = (so * (size_t)g->count[L] + (size_t)b0[L]) * g->esz;
      co = co * (size_t)g->cd[L] * g->esz;
      memcpy(e->plain + co, g->buf + so, (size_t)ext[L] * g->esz);
      int d = L - 1;
      while (d >= 0 && ++i[d] == ext[d]) i[d--] = 0;
      if (d < 0) break;
    }
    src = e->plain;
  }
  shuffle(e->shuffled, src, g->chunk_elems, g->esz);
  return idx;
}

void ckpt_chunk_encoder_free(ckpt_chunk_encoder *e) {
  ZSTD_freeCCtx(e->cctx);
  boost_free(e->plain);
  boost_free(e->shuffled);
}

int ckpt_direct_slab_aligned(int ndim, const int64_t *gshape, const hsize_t *cd, const int64_t *start,
                             const int64_t *count) {
  for (int d = 0; d < ndim; d++) {
    const int64_t c = (int64_t)cd[d], end = start[d] + count[d];
    if (start[d] % c != 0 || (end % c != 0 && end != gshape[d])) return 0;
  }
  return 1;
}

int ckpt_chunk_pwrite(int fd, const unsigned char *p, size_t n, off_t at) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
    at += w;
  }
  return 0;
}
