/* The read-back verification of a written checkpoint, before its commit:
 * every rank reads back, decodes and hashes the bands it wrote, so a
 * checkpoint counts only once it has been read back verified (retention,
 * which runs after the commit, deletes nothing before that).
 *
 * The file is closed by the collective write by then, so each rank opens it
 * on its own (read-only, POSIX driver) and reads the stored chunks of its
 * bands directly (H5Dread_chunk, which parallel HDF5 refuses through MPI-IO):
 * one zstd decode per chunk, the byte unshuffle below and the checksum
 * terms of the chunk's elements while it is in cache, with no trip through
 * HDF5's filter pipeline, chunk cache and copies (that path was a quarter
 * of a cola-60m save). A dataset whose pipeline is not the one we
 * write (shuffle, then zstd; element type float32 little-endian), or a chunk
 * stored with a filter skipped, is read through H5Dread instead. Either way
 * the hyperslab goes through the same element-sum checksum as the written
 * data, so a difference anywhere (metadata, chunk index, compressed bytes,
 * zstd frame checksum, values) fails the save. */
#include <omp.h>
#include <string.h>
#include <zstd.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"
#include "h5z_zstd.h"

/* One decoding thread's state. */
typedef struct {
  ZSTD_DCtx *dctx;
  unsigned char *shuffled; /* a decoded chunk; then the compacted part of an edge chunk */
  uint32_t *plain;         /* unshuffled elements */
  size_t cap;              /* elements */
} chunk_decoder;

/* Chunks are read (HDF5: one thread) RB at a time and decoded and hashed on
 * all of the rank's threads when training waits, the next batch read
 * meanwhile. */
#define RB 16

struct ckpt_chunk_reader {
  chunk_decoder *dec;
  int ndec, threads;
  unsigned char *packed[2 * RB]; /* stored chunks of the batch being decoded and of the one being read */
  size_t packed_cap[2 * RB];
  hsize_t stored[2 * RB], off[2 * RB][TENSOR_MAX_DIMS];
  uint64_t part[2 * RB];
  char bad[2 * RB][160]; /* a chunk that does not decode: why */
};
typedef ckpt_chunk_reader chunk_reader;

ckpt_chunk_reader *ckpt_chunk_reader_new(int threads) {
  ckpt_chunk_reader *cr = boost_calloc(1, sizeof *cr);
  cr->threads = threads > 0 ? threads : 1;
  return cr;
}

void ckpt_chunk_reader_free(ckpt_chunk_reader *cr) {
  if (!cr) return;
  for (int t = 0; t < cr->ndec; t++) {
    ZSTD_freeDCtx(cr->dec[t].dctx);
    boost_free(cr->dec[t].shuffled);
    boost_free(cr->dec[t].plain);
  }
  free(cr->dec);
  for (int i = 0; i < 2 * RB; i++) boost_free(cr->packed[i]);
  boost_free(cr);
}

/* Decoders for chunks of ce elements on cr->threads threads; -1 with err
 * when memory cannot be had (the checkpoint fails, training goes on). */
static int reader_ready(chunk_reader *cr, size_t ce, char *err, size_t errlen) {
  if (cr->ndec < cr->threads) {
    chunk_decoder *dec = realloc(cr->dec, (size_t)cr->threads * sizeof *dec);
    if (!dec) return boost_err(err, errlen, "read-back: out of memory (%d chunk decoders)", cr->threads);
    memset(dec + cr->ndec, 0, (size_t)(cr->threads - cr->ndec) * sizeof *dec);
    cr->dec = dec;
    cr->ndec = cr->threads;
  }
  for (int t = 0; t < cr->ndec; t++) {
    chunk_decoder *d = &cr->dec[t];
    if (!d->dctx && !(d->dctx = ZSTD_createDCtx()))
      return boost_err(err, errlen, "read-back: out of memory (zstd decompression context)");
    if (d->cap < ce) {
      boost_free(d->shuffled);
      boost_free(d->plain);
      d->shuffled = boost_try_calloc(ce, 4);
      d->plain = boost_try_calloc(ce, sizeof *d->plain);
      d->cap = d->shuffled && d->plain ? ce : 0;
      if (!d->cap)
        return boost_err(err, errlen, "read-back: out of memory (decode buffers of %.1f MiB)", 8.0 * (double)ce / (1 << 20));
    }
  }
  return 0;
}

/* HDF5's shuffle filter for 4-byte elements stores byte b of element i at
 * b*n + i; this is its inverse. */
static void unshuffle32(uint32_t *restrict out, const unsigned char *restrict in, size_t n) {
  const unsigned char *b0 = in, *b1 = in + n, *b2 = in + 2 * n, *b3 = in + 3 * n;
  for (size_t i = 0; i < n; i++)
    out[i] = (uint32_t)b0[i] | (uint32_t)b1[i] << 8 | (uint32_t)b2[i] << 16 | (uint32_t)b3[i] << 24;
}

/* The dataset's chunk shape when its pipeline is exactly what the writer
 * sets (shuffle, zstd) on float32 little-endian; 0 otherwise. */
static int direct_readable(hid_t ds, int ndim, hsize_t *cdims) {
  hid_t dcpl = H5Dget_create_plist(ds), type = H5Dget_type(ds);
  int ok = dcpl >= 0 && type >= 0 && H5Tequal(type, H5T_IEEE_F32LE) > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
           H5Pget_chunk(dcpl, ndim, cdims) == ndim && H5Pget_nfilters(dcpl) == 2;
  for (unsigned i = 0; ok && i < 2; i++) {
    unsigned flags, cd[8];
    size_t ncd = 8;
    char name[64];
    const H5Z_filter_t id = H5Pget_filter2(dcpl, i, &flags, &ncd, cd, sizeof name, name, NULL);
    ok = id == (i == 0 ? H5Z_FILTER_SHUFFLE : (H5Z_filter_t)H5Z_FILTER_ZSTD);
  }
  if (type >= 0) H5Tclose(type);
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  return ok;
}

/* Reads the stored chunk at off into batch slot i. Returns 1, 0 when the
 * chunk was stored with a filter skipped (read it through HDF5), -1 on an
 * error (message in err). */
static int read_chunk(chunk_reader *cr, int i, hid_t ds, const hsize_t *off, const char *what, char *err,
                      size_t errlen) {
  hsize_t stored = 0;
  if (H5Dget_chunk_storage_size(ds, off, &stored) < 0) {
    ckpt_h5_error(err, errlen, what);
    return -1;
  }
  cr->stored[i] = stored;
  if (stored == 0) return 1; /* never written: HDF5 would read the fill value (0) */
  if (stored > cr->packed_cap[i]) {
    boost_free(cr->packed[i]);
    cr->packed[i] = boost_try_calloc((size_t)stored, 1);
    cr->packed_cap[i] = cr->packed[i] ? (size_t)stored : 0;
    if (!cr->packed[i]) {
      boost_msgf(err, errlen, "%s: out of memory (a stored chunk of %llu bytes)", what, (unsigned long long)stored);
      return -1;
    }
  }
  uint32_t mask = 0;
  if (H5Dread_chunk(ds, H5P_DEFAULT, off, &mask, cr->packed[i]) < 0) {
    ckpt_h5_error(err, errlen, what);
    return -1;
  }
  return mask == 0 ? 1 : 0;
}

/* Block [lo, lo + ext) of the slab [st, st + ct) (row-major, `part`) into
 * dst, the slab's row-major buffer. */
static void place_block(float *dst, const uint32_t *part, int ndim, const hsize_t *st, const hsize_t *ct,
                        const int64_t *lo, const int64_t *ext) {
  int64_t i[TENSOR_MAX_DIMS] = {0};
  const size_t run = (size_t)ext[ndim - 1];
  for (size_t w = 0;; w += run) {
    size_t at = 0;
    for (int d = 0; d < ndim; d++) at = at * (size_t)ct[d] + (size_t)(lo[d] - (int64_t)st[d] + (d < ndim - 1 ? i[d] : 0));
    memcpy(dst + at, part + w, run * sizeof *dst);
    int d = ndim - 2;
    while (d >= 0 && ++i[d] == ext[d]) i[d--] = 0;
    if (d < 0) break;
  }
}

/* Decodes batch slot i; its part of the slab [st, st + ct) goes into dst
 * (when not NULL) and its checksum terms into cr->part[i] (cr->bad[i] on
 * failure). */
static void decode_chunk(chunk_reader *cr, int i, chunk_decoder *dc, int ndim, const int64_t *gshape, const hsize_t *cd,
                         size_t ce, const hsize_t *st, const hsize_t *ct, float *dst) {
  const hsize_t *off = cr->off[i];
  cr->bad[i][0] = 0;
  if (cr->stored[i] == 0) {
    memset(dc->plain, 0, ce * sizeof *dc->plain);
  } else {
    const size_t got = ZSTD_decompressDCtx(dc->dctx, dc->shuffled, ce * 4, cr->packed[i], (size_t)cr->stored[i]);
    if (ZSTD_isError(got) || got != ce * 4) {
      boost_msgf(cr->bad[i], sizeof cr->bad[i], "a stored chunk does not decode to %zu bytes (%s)", ce * 4,
                 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong size");
      return;
    }
    unshuffle32(dc->plain, dc->shuffled, ce);
  }
  /* The chunk's part of the slab: the whole chunk, or (at the slab's
   * edges) a block compacted into the free decode buffer first. */
  int64_t lo[TENSOR_MAX_DIMS], ext[TENSOR_MAX_DIMS];
  hsize_t idx[TENSOR_MAX_DIMS];
  int whole = 1;
  for (int d = 0; d < ndim; d++) {
    const hsize_t l = off[d] > st[d] ? off[d] : st[d];
    const hsize_t h = off[d] + cd[d] < st[d] + ct[d] ? off[d] + cd[d] : st[d] + ct[d];
    lo[d] = (int64_t)l;
    ext[d] = (int64_t)(h - l);
    idx[d] = l;
    whole &= l == off[d] && h == off[d] + cd[d];
  }
  const void *part = dc->plain;
  if (!whole) {
    uint32_t *packed = (uint32_t *)(void *)dc->shuffled;
    size_t w = 0;
    const size_t run = (size_t)ext[ndim - 1];
    for (;;) {
      size_t src = 0;
      for (int d = 0; d < ndim; d++) src = src * (size_t)cd[d] + (size_t)(idx[d] - off[d]);
      memcpy(packed + w, dc->plain + src, run * sizeof *packed);
      w += run;
      int d = ndim - 2;
      for (; d >= 0; d--) {
        if (++idx[d] < (hsize_t)(lo[d] + ext[d])) break;
        idx[d] = (hsize_t)lo[d];
      }
      if (d < 0) break;
    }
    part = packed;
  }
  if (dst) place_block(dst, part, ndim, st, ct, lo, ext);
  cr->part[i] = ckpt_hash_slab32(part, ndim, gshape, lo, ext);
}

/* Where a slab's chunk walk is. */
typedef struct {
  int ndim, more;
  hid_t ds;
  const hsize_t *cd, *st, *ct;
  hsize_t off[TENSOR_MAX_DIMS], first[TENSOR_MAX_DIMS];
} slab_walk;

/* The next (up to) RB chunks of the walk into bank `bank`'s slots; *n of
 * them. Returns read_chunk's 1, 0 or -1. */
static int read_batch(chunk_reader *cr, slab_walk *w, int bank, int *n, const char *what, char *err, size_t errlen) {
  *n = 0;
  while (w->more && *n < RB) {
    const int slot = bank * RB + *n;
    memcpy(cr->off[slot], w->off, sizeof w->off);
    const int rc = read_chunk(cr, slot, w->ds, w->off, what, err, errlen);
    if (rc <= 0) return rc;
    (*n)++;
    int d = w->ndim - 1;
    for (; d >= 0; d--) {
      w->off[d] += w->cd[d];
      if (w->off[d] < w->st[d] + w->ct[d]) break;
      w->off[d] = w->first[d];
    }
    w->more = d >= 0;
  }
  return 1;
}

int ckpt_read_slab_chunks(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                          const hsize_t *ct, float *dst, uint64_t *sum, const char *what, char *err, size_t errlen) {
  hsize_t cd[TENSOR_MAX_DIMS];
  if (ndim < 1 || ndim > TENSOR_MAX_DIMS || !direct_readable(ds, ndim, cd)) return 0;
  size_t ce = 1;
  for (int d = 0; d < ndim; d++) ce *= (size_t)cd[d];
  if (reader_ready(cr, ce, err, errlen) != 0) return -1;
  *sum = 0;
  for (int d = 0; d < ndim; d++)
    if (ct[d] == 0) return 1;
  /* Every chunk meeting the slab, in row-major order of the chunk grid, in
   * batches of RB: while the team decodes one, its master thread (the only
   * one calling HDF5) reads the next, then joins the decoding. */
  slab_walk w = {.ndim = ndim, .ds = ds, .cd = cd, .st = st, .ct = ct, .more = 1};
  for (int d = 0; d < ndim; d++) w.off[d] = w.first[d] = st[d] / cd[d] * cd[d];
  int bank = 0, n = 0, rc = read_batch(cr, &w, bank, &n, what, err, errlen);
  while (rc > 0 && n > 0) {
    int next_n = 0, next_rc = 1;
    const int b0 = bank * RB;
#pragma omp parallel num_threads(cr->threads)
    {
#pragma omp master
      if (w.more) next_rc = read_batch(cr, &w, bank ^ 1, &next_n, what, err, errlen);
#pragma omp for schedule(dynamic, 1) nowait
      for (int i = 0; i < n; i++)
        decode_chunk(cr, b0 + i, &cr->dec[omp_get_thread_num()], ndim, gshape, cd, ce, st, ct, dst);
    }
    for (int i = b0; i < b0 + n; i++) {
      if (cr->bad[i][0]) {
        boost_msgf(err, errlen, "%s: %s", what, cr->bad[i]);
        return -1;
      }
      *sum += cr->part[i];
    }
    bank ^= 1;
    n = next_n;
    rc = next_rc;
  }
  return rc;
}

int ckpt_readback(ckpt_session *s, const char *path, const uint64_t *sums, char *err, size_t errlen) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  int ok = f >= 0;
  if (!ok) ckpt_h5_error(err, errlen, "read-back: cannot open the written file");
  /* Into the staging buffer: its contents are written and hashed, and the
   * writer owns it until this job ends. A fresh buffer of that size cost
   * more in first-touch page faults (~1.2 s for cola-60m's 513 MB) than
   * the decoding itself. */
  float *buf = s->stage;
  const size_t n = (size_t)s->nent * CKPT_NUM_CATEGORIES;
  uint64_t *got = boost_try_calloc(n ? n : 1, sizeof *got);
  if (!got && ok) {
    boost_msgf(err, errlen, "read-back: out of memory (%zu checksums)", n);
    ok = 0;
  }
  chunk_reader *cr = ckpt_chunk_reader_new(ckpt_work_threads(s));
  char dpath[TENSOR_NAME_MAX + 48];
  /* Every rank opens every dataset, in the same order (as a load does); the
   * ranks that wrote a band read it back. */
  for (size_t k = 0; f >= 0 && got && k < n; k++) {
    const ckpt_entry *e = &s->ents[k / CKPT_NUM_CATEGORIES];
    const int c = (int)(k % CKPT_NUM_CATEGORIES);
    boost_msgf(dpath, sizeof dpath, "read-back of %s/%s", ckpt_category_group[c], e->name);
    hid_t ds = H5Dopen2(f, dpath + strlen("read-back of "), H5P_DEFAULT), space = ds >= 0 ? H5Dget_space(ds) : -1;
    if (space < 0 && ok) {
      ckpt_h5_error(err, errlen, dpath);
      ok = 0;
    }
    if (ok && e->stage_off[c] != CKPT_NO_STAGE) {
      const tensor_desc *t = &s->reg->tensors[e->local];
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      hsize_t st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
      ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
      for (int d = 0; d < t->ndim; d++) st[d] = (hsize_t)start[d], ct[d] = (hsize_t)count[d];
      int rc = !s->set.readback_hdf5 && H5Sget_simple_extent_ndims(space) == t->ndim
                   ? ckpt_read_slab_chunks(cr, ds, t->ndim, t->shape, st, ct, NULL, &got[k], dpath, err, errlen)
                   : 0;
      if (rc == 0) { /* another pipeline: through HDF5, into the staging buffer (a ring: each band at its start) */
        float *dst = s->bounded ? buf : buf + e->stage_off[c];
        hid_t mem = H5Screate_simple(t->ndim, ct, NULL);
        rc = H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL) >= 0 &&
                     H5Dread(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, dst) >= 0
                 ? 1
                 : -1;
        if (rc < 0) ckpt_h5_error(err, errlen, dpath);
        else got[k] = ckpt_hash_slab32(dst, t->ndim, t->shape, start, count);
        H5Sclose(mem);
      }
      ok = rc > 0;
    }
    if (space >= 0) H5Sclose(space);
    if (ds >= 0) H5Dclose(ds);
  }
  ckpt_chunk_reader_free(cr);
  if (f >= 0 && H5Fclose(f) < 0 && ok) {
    ckpt_h5_error(err, errlen, "read-back: closing the written file");
    ok = 0;
  }
  int all_ok = ckpt_all_true(s, ok);
  if (all_ok) { /* every rank has its sums here */
    MPI_Allreduce(MPI_IN_PLACE, got, (int)(n ? n : 1), MPI_UINT64_T, MPI_SUM, s->comm);
    for (size_t k = 0; k < n && all_ok; k++)
      if (got[k] != sums[k]) {
        boost_msgf(err, errlen, "read-back: %s/%s does not match what was written", ckpt_category_group[k % CKPT_NUM_CATEGORIES],
                   s->ents[k / CKPT_NUM_CATEGORIES].name);
        ok = all_ok = 0;
      }
  }
  boost_free(got);
  return ok;
}
