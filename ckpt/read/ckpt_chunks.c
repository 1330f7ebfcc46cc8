/* The stored chunks of a hyperslab, read and decoded in a pipeline.
 *
 * One thread -- the caller, the only one that calls HDF5 -- looks up the
 * stored chunks (H5Dget_chunk_info_by_coord) into a ring of slots; a pool
 * of decoder threads (threads - 1 of them) reads (pread at the chunk's
 * address: POSIX driver; else the caller reads with H5Dread_chunk) and
 * decodes them as they arrive, and
 * the caller decodes too whenever the ring is full or it waits for the
 * end, so neither side waits on the other while there is work. Reads run
 * ahead across calls: ckpt_read_slab_chunks_async returns once the slab's
 * chunks are read, the next dataset is opened and read while its chunks
 * decode, and ckpt_chunk_reader_wait ends the batch.
 *
 * A chunk is decoded in one pass while it is in cache: zstd into the
 * decoder's buffer (the byte planes of HDF5's shuffle), then each run of
 * the chunk's part of the slab is unshuffled straight into its place in
 * dst and its checksum terms taken there, block by block while the block
 * is in L1 -- no intermediate copy of the elements. */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "ckpt_chunks.h"
#include "ckpt_chunks_file.h"
#include "ckpt_internal.h"
#include "tensor.h"
#include "util.h"
#include "h5z_zstd.h"

enum { SLOTS_PER_THREAD = 4, WHAT_MAX = TENSOR_NAME_MAX + 64 };

/* One ckpt_read_slab_chunks call: its geometry, where its elements and sum
 * go, and its chunks still to decode. */
typedef struct {
  int ndim, reading, pending, used;
  int64_t gshape[TENSOR_MAX_DIMS];
  hsize_t st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS], cd[TENSOR_MAX_DIMS];
  size_t ce; /* elements per chunk */
  float *dst;
  uint64_t *sum, acc;
  char what[WHAT_MAX];
} slab_job;

/* A stored chunk read (or being read) into the ring. */
typedef struct {
  unsigned char *packed;
  size_t cap;
  hsize_t stored, off[TENSOR_MAX_DIMS];
  off_t at; /* where in file fd the decoder reads it itself; -1: read already */
  int fd, slab;
} chunk_slot;

/* One decoding thread's state. */
typedef struct {
  ZSTD_DCtx *dctx;
  unsigned char *planes; /* a decoded chunk: HDF5's shuffled byte planes */
  float *block;          /* unshuffled elements when there is no dst */
} chunk_decoder;

/* The slots of the ring: read and waiting for a decoder (a FIFO), free,
 * or being decoded. */
typedef struct {
  int *ready, nready, head;
  int *free_slot, nfree;
  int inflight;
} slot_queue;

/* The file being read (POSIX driver), and the range asked of the kernel. */
typedef struct {
  int fd;
  off_t base, lo, hi;
} ahead_range;

struct ckpt_chunk_reader {
  int threads, nslot, nslab, started, quit;
  size_t cap; /* elements a decoder's buffers hold */
  chunk_decoder *dec;
  chunk_slot *slot;
  slab_job *slab;
  slot_queue q;
  pthread_t *pool;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  char failed[REASON_MAX]; /* the first chunk that did not decode */
  ahead_range ra;
};
typedef ckpt_chunk_reader chunk_reader;

/* The decoders' block: elements unshuffled and hashed at a time (in L1). */
#define BLOCK 1024

/* HDF5's shuffle filter for 4-byte elements stores byte b of element i of
 * a chunk of ce elements at b*ce + i; this is its inverse for n elements
 * starting at element i0. */
static void unshuffle32(uint32_t *restrict out, const unsigned char *restrict planes, size_t ce, size_t i0, size_t n) {
  const unsigned char *restrict b0 = planes + i0, *restrict b1 = b0 + ce, *restrict b2 = b1 + ce, *restrict b3 = b2 + ce;
  for (size_t i = 0; i < n; i++)
    out[i] = (uint32_t)b0[i] | (uint32_t)b1[i] << 8 | (uint32_t)b2[i] << 16 | (uint32_t)b3[i] << 24;
}

/* n elements of the chunk from element i0 into out (or the decoder's
 * block when out is NULL), with the sum of their checksum terms (global
 * indices g, g + 1, ...). */
static uint64_t place_run(chunk_decoder *dc, const unsigned char *planes, size_t ce, size_t i0, size_t n, float *out,
                          uint64_t g) {
  uint64_t sum = 0;
  for (size_t j = 0; j < n; j += BLOCK) {
    const size_t m = n - j < BLOCK ? n - j : BLOCK;
    uint32_t *to = (uint32_t *)(void *)(out ? out + j : dc->block);
    unshuffle32(to, planes, ce, i0 + j, m);
    sum += ckpt_hash_run32(to, m, g + j);
  }
  return sum;
}

/* Decodes slot k: its part of the slab into the slab's dst, its checksum
 * terms returned; *bad says why when it does not decode. */
static uint64_t decode_chunk(chunk_reader *cr, const chunk_slot *k, chunk_decoder *dc, char *bad, size_t badlen) {
  const slab_job *j = &cr->slab[k->slab];
  const int nd = j->ndim;
  const size_t ce = j->ce;
  if (k->at >= 0 && pread(k->fd, k->packed, (size_t)k->stored, k->at) != (ssize_t)k->stored) {
    boost_msgf(bad, badlen, "%s: a stored chunk of %llu bytes at %lld cannot be read (truncated file?)", j->what,
               (unsigned long long)k->stored, (long long)k->at);
    return 0;
  }
  if (k->stored == 0) { /* never written: HDF5 would read the fill value (0) */
    memset(dc->planes, 0, ce * 4);
  } else {
    const size_t got = ZSTD_decompressDCtx(dc->dctx, dc->planes, ce * 4, k->packed, (size_t)k->stored);
    if (ZSTD_isError(got) || got != ce * 4) {
      boost_msgf(bad, badlen, "%s: a stored chunk does not decode to %zu bytes (%s)", j->what, ce * 4,
                 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong size");
      return 0;
    }
  }
  /* The chunk's part of the slab, [lo, hi) in global coordinates, by runs
   * along the last dimension. */
  hsize_t lo[TENSOR_MAX_DIMS], hi[TENSOR_MAX_DIMS], idx[TENSOR_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    lo[d] = k->off[d] > j->st[d] ? k->off[d] : j->st[d];
    hi[d] = k->off[d] + j->cd[d] < j->st[d] + j->ct[d] ? k->off[d] + j->cd[d] : j->st[d] + j->ct[d];
    idx[d] = lo[d];
  }
  const size_t run = (size_t)(hi[nd - 1] - lo[nd - 1]);
  uint64_t sum = 0;
  for (;;) {
    size_t src = 0, at = 0;
    uint64_t g = 0;
    for (int d = 0; d < nd; d++) {
      src = src * (size_t)j->cd[d] + (size_t)(idx[d] - k->off[d]);
      at = at * (size_t)j->ct[d] + (size_t)(idx[d] - j->st[d]);
      g = g * (uint64_t)j->gshape[d] + (uint64_t)idx[d];
    }
    sum += place_run(dc, dc->planes, ce, src, run, j->dst ? j->dst + at : NULL, g);
    int d = nd - 2;
    for (; d >= 0; d--) {
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
    }
    if (d < 0) break;
  }
  return sum;
}

/* Decodes the oldest ready slot with decoder dc (mu held on entry and on
 * return; released while decoding). 0 when none is ready. */
static int decode_one(chunk_reader *cr, chunk_decoder *dc) {
  if (cr->q.nready == 0) return 0;
  const int s = cr->q.ready[cr->q.head];
  cr->q.head = (cr->q.head + 1) % cr->nslot;
  cr->q.nready--;
  cr->q.inflight++;
  pthread_mutex_unlock(&cr->mu);
  char bad[REASON_MAX] = "";
  const uint64_t part = decode_chunk(cr, &cr->slot[s], dc, bad, sizeof bad);
  pthread_mutex_lock(&cr->mu);
  slab_job *j = &cr->slab[cr->slot[s].slab];
  j->acc += part;
  if (bad[0] && !cr->failed[0]) boost_msgf(cr->failed, sizeof cr->failed, "%s", bad);
  if (--j->pending == 0 && !j->reading) {
    if (j->sum) *j->sum = j->acc;
    j->used = 0;
  }
  cr->q.free_slot[cr->q.nfree++] = s;
  cr->q.inflight--;
  pthread_cond_broadcast(&cr->done);
  return 1;
}

static void *decoder_main(void *arg) {
  chunk_reader *cr = arg;
  pthread_mutex_lock(&cr->mu);
  const int me = cr->started++;
  pthread_cond_broadcast(&cr->done);
  chunk_decoder *dc = &cr->dec[me + 1];
  while (!cr->quit)
    if (!decode_one(cr, dc)) pthread_cond_wait(&cr->work, &cr->mu);
  pthread_mutex_unlock(&cr->mu);
  return NULL;
}

ckpt_chunk_reader *ckpt_chunk_reader_new(int threads) {
  chunk_reader *cr = boost_calloc(1, sizeof *cr);
  cr->threads = threads > 0 ? threads : 1;
  cr->ra.fd = -1;
  cr->nslot = SLOTS_PER_THREAD * cr->threads;
  cr->nslab = cr->nslot + 2; /* a slab holds a slot or is being read */
  cr->dec = boost_calloc((size_t)cr->threads, sizeof *cr->dec);
  cr->slot = boost_calloc((size_t)cr->nslot, sizeof *cr->slot);
  cr->slab = boost_calloc((size_t)cr->nslab, sizeof *cr->slab);
  cr->q.ready = boost_calloc((size_t)cr->nslot, sizeof *cr->q.ready);
  cr->q.free_slot = boost_calloc((size_t)cr->nslot, sizeof *cr->q.free_slot);
  for (int s = 0; s < cr->nslot; s++) cr->q.free_slot[cr->q.nfree++] = s;
  pthread_mutex_init(&cr->mu, NULL);
  pthread_cond_init(&cr->work, NULL);
  pthread_cond_init(&cr->done, NULL);
  return cr;
}

/* Until every slot read is decoded, the caller decoding too. Returns 0, or
 * -1 with the first failure in err -- reported once (report = 1: the next
 * slabs start afresh, as a caller reading dataset after dataset expects),
 * or kept for the next report (0). */
static int drain_keep(chunk_reader *cr, boost_status *err, int report) {
  pthread_mutex_lock(&cr->mu);
  while (cr->q.nready > 0 || cr->q.inflight > 0)
    if (!decode_one(cr, &cr->dec[0])) pthread_cond_wait(&cr->done, &cr->mu);
  const int rc = cr->failed[0] ? -1 : 0;
  if (rc) boost_err(err, "%s", cr->failed);
  if (report) cr->failed[0] = 0;
  pthread_mutex_unlock(&cr->mu);
  return rc;
}
static int drain(chunk_reader *cr, boost_status *err) { return drain_keep(cr, err, 1); }

void ckpt_chunk_reader_free(ckpt_chunk_reader *cr) {
  if (!cr) return;
  drain(cr, NULL);
  pthread_mutex_lock(&cr->mu);
  cr->quit = 1;
  pthread_cond_broadcast(&cr->work);
  pthread_mutex_unlock(&cr->mu);
  for (int t = 0; t < cr->started; t++) pthread_join(cr->pool[t], NULL);
  for (int t = 0; t < cr->threads; t++) {
    ZSTD_freeDCtx(cr->dec[t].dctx);
    boost_free(cr->dec[t].planes);
    boost_free(cr->dec[t].block);
  }
  for (int s = 0; s < cr->nslot; s++) boost_free(cr->slot[s].packed);
  pthread_mutex_destroy(&cr->mu);
  pthread_cond_destroy(&cr->work);
  pthread_cond_destroy(&cr->done);
  boost_free(cr->pool);
  boost_free(cr->dec);
  boost_free(cr->slot);
  boost_free(cr->slab);
  boost_free(cr->q.ready);
  boost_free(cr->q.free_slot);
  boost_free(cr);
}

int ckpt_chunk_reader_wait(ckpt_chunk_reader *cr, boost_status *err) { return drain(cr, err); }

/* Decoders for chunks of ce elements, the pool started; -1 with err when
 * memory cannot be had. Buffers grow only with nothing in flight. */
static int reader_ready(chunk_reader *cr, size_t ce, boost_status *err) {
  if (ce > cr->cap) {
    if (drain(cr, err) != 0) return -1;
    for (int t = 0; t < cr->threads; t++) {
      chunk_decoder *d = &cr->dec[t];
      boost_free(d->planes);
      d->planes = boost_try_calloc(ce, 4);
      if (!d->planes) {
        cr->cap = 0;
        return boost_err(err, "chunk reader: out of memory (decode buffers of %.1f MiB)",
                         4.0 * (double)ce / (1 << 20));
      }
    }
    cr->cap = ce;
  }
  for (int t = 0; t < cr->threads; t++) {
    chunk_decoder *d = &cr->dec[t];
    if (!d->dctx && !(d->dctx = ZSTD_createDCtx()))
      return boost_err(err, "chunk reader: out of memory (zstd decompression context)");
    if (!d->block && !(d->block = boost_try_calloc(BLOCK, sizeof *d->block)))
      return boost_err(err, "chunk reader: out of memory (decode block)");
  }
  if (!cr->pool && cr->threads > 1) {
    cr->pool = boost_calloc((size_t)cr->threads - 1, sizeof *cr->pool);
    pthread_mutex_lock(&cr->mu);
    for (int t = 0; t < cr->threads - 1; t++) {
      const int want = cr->started + 1;
      if (pthread_create(&cr->pool[t], NULL, decoder_main, cr) != 0) break; /* fewer decoders: still correct */
      while (cr->started < want) pthread_cond_wait(&cr->done, &cr->mu);
    }
    pthread_mutex_unlock(&cr->mu);
  }
  return 0;
}

/* Asks the kernel for the next READ_AHEAD bytes of the file from a chunk
 * at addr whenever the reads come near the end of what it was asked for:
 * from a cold page cache the disk then streams while the chunks decode,
 * instead of one synchronous read per chunk. */
#define READ_AHEAD ((off_t)64 << 20)
static void read_ahead(chunk_reader *cr, off_t a, hsize_t size) {
  if (a >= cr->ra.lo && a + (off_t)size + READ_AHEAD / 2 <= cr->ra.hi) return;
  posix_fadvise(cr->ra.fd, a, READ_AHEAD, POSIX_FADV_WILLNEED);
  cr->ra.lo = a;
  cr->ra.hi = a + READ_AHEAD;
}

/* Finds the stored chunk at k->off and reads it into slot k -- or, when
 * the file is open through the POSIX driver, leaves the read (pread) to
 * the decoder, so that the copies out of the page cache run on all the
 * threads too. Returns 1, 0 when the chunk was stored with a filter
 * skipped (read it through HDF5), -1 on an error (message in err). */
static int read_chunk(chunk_reader *cr, chunk_slot *k, hid_t ds, const char *what, boost_status *err) {
  hsize_t stored = 0;
  haddr_t addr = HADDR_UNDEF;
  unsigned filters = 0;
  if (H5Dget_chunk_info_by_coord(ds, k->off, &filters, &addr, &stored) < 0) {
    ckpt_h5_fail(err, what);
    return -1;
  }
  k->stored = addr == HADDR_UNDEF ? 0 : stored;
  k->at = -1;
  if (k->stored == 0) return 1;
  if (filters != 0) return 0;
  if (stored > k->cap) {
    boost_free(k->packed);
    k->packed = boost_try_calloc((size_t)stored, 1);
    k->cap = k->packed ? (size_t)stored : 0;
    if (!k->packed) {
      boost_err(err, "%s: out of memory (a stored chunk of %llu bytes)", what, (unsigned long long)stored);
      return -1;
    }
  }
  if (cr->ra.fd >= 0) {
    k->at = cr->ra.base + (off_t)addr;
    k->fd = cr->ra.fd;
    read_ahead(cr, k->at, stored);
    return 1;
  }
  uint32_t mask = 0;
  if (H5Dread_chunk(ds, H5P_DEFAULT, k->off, &mask, k->packed) < 0) {
    ckpt_h5_fail(err, what);
    return -1;
  }
  return mask == 0 ? 1 : 0;
}

/* A free slot for the reader; while there is none it decodes. */
static int take_slot(chunk_reader *cr) {
  pthread_mutex_lock(&cr->mu);
  while (cr->q.nfree == 0)
    if (!decode_one(cr, &cr->dec[0])) pthread_cond_wait(&cr->done, &cr->mu);
  const int s = cr->q.free_slot[--cr->q.nfree];
  pthread_mutex_unlock(&cr->mu);
  return s;
}

/* A free slab record (one always is: every other one in use holds a slot). */
static int take_slab(chunk_reader *cr) {
  pthread_mutex_lock(&cr->mu);
  int b = 0;
  while (cr->slab[b].used) b++;
  BOOST_ASSERT(b < cr->nslab);
  cr->slab[b].used = cr->slab[b].reading = 1;
  cr->slab[b].pending = 0;
  cr->slab[b].acc = 0;
  pthread_mutex_unlock(&cr->mu);
  return b;
}

/* The end of slab b's reading: its sum when its chunks are decoded
 * (complete = 1), or dropped (0: after a drain, nothing of it is left). */
static void end_slab(chunk_reader *cr, int b, int complete) {
  pthread_mutex_lock(&cr->mu);
  slab_job *j = &cr->slab[b];
  j->reading = 0;
  if (!complete) j->sum = NULL;
  if (j->pending == 0) {
    if (j->sum) *j->sum = j->acc;
    j->used = 0;
  }
  pthread_mutex_unlock(&cr->mu);
}

/* Reads every chunk meeting slab b, in row-major order of the chunk grid,
 * handing each to the decoders. Returns read_chunk's 1, 0 or -1. */
static int read_slab(chunk_reader *cr, int b, hid_t ds, boost_status *err) {
  const slab_job *j = &cr->slab[b];
  hsize_t off[TENSOR_MAX_DIMS], first[TENSOR_MAX_DIMS];
  for (int d = 0; d < j->ndim; d++) off[d] = first[d] = j->st[d] / j->cd[d] * j->cd[d];
  for (;;) {
    const int s = take_slot(cr);
    chunk_slot *k = &cr->slot[s];
    memcpy(k->off, off, sizeof off);
    k->slab = b;
    const int rc = read_chunk(cr, k, ds, j->what, err);
    pthread_mutex_lock(&cr->mu);
    if (rc > 0) {
      cr->slab[b].pending++;
      cr->q.ready[(cr->q.head + cr->q.nready++) % cr->nslot] = s;
      pthread_cond_signal(&cr->work);
    } else {
      cr->q.free_slot[cr->q.nfree++] = s;
    }
    pthread_mutex_unlock(&cr->mu);
    if (rc <= 0) return rc;
    int d = j->ndim - 1;
    for (; d >= 0; d--) {
      off[d] += j->cd[d];
      if (off[d] < j->st[d] + j->ct[d]) break;
      off[d] = first[d];
    }
    if (d < 0) return 1;
  }
}

int ckpt_read_slab_chunks_async(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                                const hsize_t *ct, float *dst, uint64_t *sum, const char *what, boost_status *err) {
  hsize_t cd[TENSOR_MAX_DIMS];
  if (ndim < 1 || ndim > TENSOR_MAX_DIMS || !ckpt_chunks_direct_readable(ds, ndim, cd)) return 0;
  size_t ce = 1;
  for (int d = 0; d < ndim; d++) ce *= (size_t)cd[d];
  if (reader_ready(cr, ce, err) != 0) return -1;
  pthread_mutex_lock(&cr->mu);
  const int failed = cr->failed[0] != 0;
  if (failed) boost_err(err, "%s", cr->failed);
  cr->failed[0] = 0; /* reported */
  pthread_mutex_unlock(&cr->mu);
  if (failed) return -1;
  if (sum) *sum = 0;
  for (int d = 0; d < ndim; d++)
    if (ct[d] == 0) return 1;
  const int b = take_slab(cr);
  slab_job *j = &cr->slab[b];
  j->ndim = ndim;
  j->ce = ce;
  j->dst = dst;
  j->sum = sum;
  for (int d = 0; d < ndim; d++) j->gshape[d] = gshape[d], j->st[d] = st[d], j->ct[d] = ct[d], j->cd[d] = cd[d];
  boost_msgf(j->what, sizeof j->what, "%s", what);
  cr->ra.fd = ckpt_chunks_file_fd(ds, &cr->ra.base);
  const int rc = read_slab(cr, b, ds, err);
  if (rc <= 0) { /* nothing of this slab may still be written into dst: the caller reads it otherwise */
    drain_keep(cr, NULL, 0);
  }
  end_slab(cr, b, rc > 0);
  return rc;
}

int ckpt_read_slab_chunks(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                          const hsize_t *ct, float *dst, uint64_t *sum, const char *what, boost_status *err) {
  const int rc = ckpt_read_slab_chunks_async(cr, ds, ndim, gshape, st, ct, dst, sum, what, err);
  return rc <= 0 ? rc : drain(cr, err) == 0 ? 1 : -1;
}
