/* See ckpt_direct.h. */
#include "ckpt_direct.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_vfd.h"
#include "tensor.h"
#include "util.h"

typedef struct {
  ZSTD_CCtx *cctx;
  unsigned char *plain, *shuffled; /* one chunk each */
  size_t cap;                      /* bytes of each */
  int level, configured;
} encoder;

/* One dataset's encoded chunks on their way to the file. Two alternate, so
 * that a dataset is encoded while the flusher thread writes the previous
 * one (on a node whose page-cache copies cost as much as zstd, that overlap
 * is most of the gain). */
typedef struct {
  unsigned char *slots; /* one bound-sized slot per chunk */
  size_t slots_cap, bound;
  uint64_t *rec; /* (global chunk index, stored size) pairs */
  haddr_t *addr; /* where rank 0 placed each */
  size_t rec_cap;
  int64_t n;
  int fd, pending; /* pending: handed to the flusher */
} batch;

struct ckpt_direct {
  encoder *enc;
  int nenc;
  batch b[2];
  int cur;
  uint64_t *all; /* rank 0: every rank's pairs, gathered */
  haddr_t *all_addr;
  size_t all_cap;
  pthread_t flusher;
  int flusher_started, quit, write_errno;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned char *dummy; /* what rank 0 hands H5Dwrite_chunk; the driver drops the write */
  size_t dummy_cap;
};

ckpt_direct *ckpt_direct_new(void) {
  ckpt_direct *dx = boost_calloc(1, sizeof(ckpt_direct));
  pthread_mutex_init(&dx->mu, NULL);
  pthread_cond_init(&dx->cv, NULL);
  return dx;
}

static int pwrite_all(int fd, const unsigned char *p, size_t n, off_t at) {
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

static void *flusher_main(void *arg) {
  ckpt_direct *dx = arg;
  pthread_setname_np(pthread_self(), "ckpt-flush");
  pthread_mutex_lock(&dx->mu);
  for (;;) {
    batch *b = dx->b[0].pending ? &dx->b[0] : dx->b[1].pending ? &dx->b[1] : NULL;
    if (!b) {
      if (dx->quit) break;
      pthread_cond_wait(&dx->cv, &dx->mu);
      continue;
    }
    const int skip = dx->write_errno != 0; /* the file has failed already */
    pthread_mutex_unlock(&dx->mu);
    int e = 0;
    for (int64_t k = 0; !skip && k < b->n; k++)
      if (pwrite_all(b->fd, b->slots + (size_t)k * b->bound, (size_t)b->rec[2 * k + 1], (off_t)b->addr[k]) != 0) {
        e = errno ? errno : EIO;
        break;
      }
    pthread_mutex_lock(&dx->mu);
    if (e && !dx->write_errno) dx->write_errno = e;
    b->pending = 0;
    pthread_cond_broadcast(&dx->cv);
  }
  pthread_mutex_unlock(&dx->mu);
  return NULL;
}

static void wait_batch(ckpt_direct *dx, const batch *b) {
  pthread_mutex_lock(&dx->mu);
  while (b->pending) pthread_cond_wait(&dx->cv, &dx->mu);
  pthread_mutex_unlock(&dx->mu);
}

int ckpt_direct_finish(ckpt_direct *dx, char *err, size_t errlen) {
  wait_batch(dx, &dx->b[0]);
  wait_batch(dx, &dx->b[1]);
  pthread_mutex_lock(&dx->mu);
  const int e = dx->write_errno;
  dx->write_errno = 0;
  pthread_mutex_unlock(&dx->mu);
  if (e) boost_msgf(err, errlen, "writing chunks: %s", strerror(e));
  return e == 0;
}

void ckpt_direct_free(ckpt_direct *dx) {
  if (!dx) return;
  if (dx->flusher_started) {
    pthread_mutex_lock(&dx->mu);
    dx->quit = 1;
    pthread_cond_broadcast(&dx->cv);
    pthread_mutex_unlock(&dx->mu);
    pthread_join(dx->flusher, NULL);
  }
  pthread_mutex_destroy(&dx->mu);
  pthread_cond_destroy(&dx->cv);
  for (int i = 0; i < 2; i++) {
    boost_free(dx->b[i].slots);
    boost_free(dx->b[i].rec);
    boost_free(dx->b[i].addr);
  }
  for (int i = 0; i < dx->nenc; i++) {
    ZSTD_freeCCtx(dx->enc[i].cctx);
    boost_free(dx->enc[i].plain);
    boost_free(dx->enc[i].shuffled);
  }
  boost_free(dx->enc);
  boost_free(dx->all);
  boost_free(dx->all_addr);
  boost_free(dx->dummy);
  boost_free(dx);
}

int ckpt_direct_slab_aligned(int ndim, const int64_t *gshape, const hsize_t *cd, const int64_t *start,
                             const int64_t *count) {
  for (int d = 0; d < ndim; d++) {
    const int64_t c = (int64_t)cd[d], end = start[d] + count[d];
    if (start[d] % c != 0 || (end % c != 0 && end != gshape[d])) return 0;
  }
  return 1;
}

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

static int encoder_ready(encoder *e, size_t chunk_bytes, int level) {
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

/* The chunk grid of one rank's slab. */
typedef struct {
  int ndim;
  size_t esz, chunk_elems;
  int64_t lo[TENSOR_MAX_DIMS], n[TENSOR_MAX_DIMS]; /* first chunk and chunks per dim of the slab */
  int64_t grid[TENSOR_MAX_DIMS];                    /* chunks per dim of the dataset */
  const int64_t *gshape, *start, *count;
  const hsize_t *cd;
  const unsigned char *buf;
} slab_grid;

/* Chunk k of the slab (row-major over its chunks) into e->shuffled: the
 * chunk's elements gathered (zero past the dataset's edge), shuffled.
 * Returns its global chunk index. */
static uint64_t stage_chunk(const slab_grid *g, int64_t k, encoder *e) {
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

static void grow(void **p, size_t *cap, size_t need, size_t size) {
  if (*cap >= need) return;
  boost_free(*p);
  *cap = need + need / 4 + 16;
  *p = boost_calloc(*cap, size);
}

/* Encodes the slab's chunks [k0, k0 + nloc) into b's slots and pairs.
 * Returns nloc, -1 on a zstd failure. */
static int64_t encode_chunks(ckpt_direct *dx, batch *b, const slab_grid *g, int64_t k0, int64_t nloc, int level,
                             int threads, size_t bound) {
  if (threads < 1) threads = 1;
  if (threads > nloc) threads = nloc > 0 ? (int)nloc : 1;
  if (dx->nenc < threads) {
    dx->enc = boost_realloc(dx->enc, (size_t)threads, sizeof *dx->enc);
    memset(dx->enc + dx->nenc, 0, (size_t)(threads - dx->nenc) * sizeof *dx->enc);
    dx->nenc = threads;
  }
  for (int t = 0; t < threads; t++)
    if (!encoder_ready(&dx->enc[t], g->chunk_elems * g->esz, level)) return -1;
  void *p = b->slots;
  grow(&p, &b->slots_cap, (size_t)nloc * bound, 1);
  b->slots = p;
  b->bound = bound;
  size_t cap = b->rec_cap;
  p = b->rec;
  grow(&p, &cap, 2 * (size_t)nloc, sizeof(uint64_t));
  if (p != (void *)b->rec) { /* addresses sized with the pairs */
    boost_free(b->addr);
    b->addr = boost_calloc(cap / 2 + 1, sizeof *b->addr);
  }
  b->rec = p;
  b->rec_cap = cap;
  int failed = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(| : failed)
  for (int64_t k = 0; k < nloc; k++) {
    encoder *e = &dx->enc[omp_get_thread_num()];
    const uint64_t idx = stage_chunk(g, k0 + k, e);
    const size_t n = ZSTD_compress2(e->cctx, b->slots + (size_t)k * bound, bound, e->shuffled, g->chunk_elems * g->esz);
    b->rec[2 * k] = idx;
    b->rec[2 * k + 1] = ZSTD_isError(n) ? 0 : (uint64_t)n;
    failed |= ZSTD_isError(n) != 0;
  }
  return failed ? -1 : nloc;
}

/* Rank 0: every gathered chunk into the file's index, with its raw write
 * dropped; addresses into dx->all_addr. */
static int place_chunks(ckpt_direct *dx, hid_t dset, int ndim, const int64_t *grid, const hsize_t *cd, int64_t total,
                        double *stored, char *err, size_t errlen) {
  int ok = 1;
  for (int64_t r = 0; r < total; r++) {
    dx->all_addr[r] = HADDR_UNDEF;
    if (!ok) continue;
    uint64_t idx = dx->all[2 * r];
    const uint64_t size = dx->all[2 * r + 1];
    hsize_t off[TENSOR_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
      off[d] = (hsize_t)(idx % (uint64_t)grid[d]) * cd[d];
      idx /= (uint64_t)grid[d];
    }
    if (size == 0 || size > dx->dummy_cap) {
      boost_msgf(err, errlen, "a chunk failed to compress");
      ok = 0;
      continue;
    }
    ckpt_vfd_drop_next_raw((size_t)size);
    haddr_t at = HADDR_UNDEF;
    if (H5Dwrite_chunk(dset, H5P_DEFAULT, 0, off, (size_t)size, dx->dummy) < 0) {
      ckpt_vfd_dropped(&at);
      ckpt_h5_error(err, errlen, "H5Dwrite_chunk");
      ok = 0;
      continue;
    }
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t got = 0;
    if (!ckpt_vfd_dropped(&at) || H5Dget_chunk_info_by_coord(dset, off, &mask, &addr, &got) < 0 || addr != at ||
        got != size || mask != 0) {
      H5Eclear2(H5E_DEFAULT);
      boost_msgf(err, errlen, "HDF5 did not place a chunk where the driver saw it written");
      ok = 0;
      continue;
    }
    dx->all_addr[r] = addr;
    *stored += (double)size;
  }
  return ok;
}

/* Chunks [k0, k0 + nloc) of this rank's slab (nloc 0: none this round):
 * encoded, placed by rank 0, handed to the flusher. Collective. */
static int write_piece(ckpt_direct *dx, MPI_Comm comm, hid_t dset, int fd, const slab_grid *g, int64_t k0, int64_t nloc,
                       int level, int threads, size_t bound, double *stored, char *err, size_t errlen) {
  int rank, nranks;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  batch *b = &dx->b[dx->cur];
  wait_batch(dx, b); /* the flusher is done with its slots */
  int ok = 1;
  pthread_mutex_lock(&dx->mu);
  const int werr = dx->write_errno; /* a write failed: report it now, encode no more */
  pthread_mutex_unlock(&dx->mu);
  if (werr) {
    boost_msgf(err, errlen, "writing chunks: %s", strerror(werr));
    ok = 0;
    nloc = 0;
  }
  if (nloc > 0 && encode_chunks(dx, b, g, k0, nloc, level, threads, bound) < 0) {
    boost_msgf(err, errlen, "zstd failed on a chunk");
    ok = 0;
    nloc = 0;
  }
  /* Sizes to rank 0, which places them; addresses back. */
  int my_vals = (int)(2 * nloc), *counts = NULL, *displs = NULL;
  int64_t total = 0;
  if (rank == 0) {
    counts = boost_calloc((size_t)nranks, sizeof *counts);
    displs = boost_calloc((size_t)nranks, sizeof *displs);
  }
  MPI_Gather(&my_vals, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
  if (rank == 0) {
    for (int r = 0; r < nranks; r++) {
      displs[r] = (int)total;
      total += counts[r];
    }
    void *all = dx->all;
    size_t cap = dx->all_cap;
    grow(&all, &cap, (size_t)total + 2, sizeof(uint64_t));
    if (all != (void *)dx->all) {
      boost_free(dx->all_addr);
      dx->all_addr = boost_calloc(cap / 2 + 1, sizeof *dx->all_addr);
    }
    dx->all = all;
    dx->all_cap = cap;
  }
  MPI_Gatherv(b->rec, my_vals, MPI_UINT64_T, dx->all, counts, displs, MPI_UINT64_T, 0, comm);
  if (rank == 0) {
    if (dx->dummy_cap < bound) {
      boost_free(dx->dummy);
      dx->dummy = boost_calloc(bound, 1);
      dx->dummy_cap = bound;
    }
    char why[512] = "";
    if (!place_chunks(dx, dset, g->ndim, g->grid, g->cd, total / 2, stored, why, sizeof why) && ok) {
      boost_msgf(err, errlen, "%s", why);
      ok = 0;
    }
    for (int r = 0; r < nranks; r++) { /* now in chunks, not values */
      counts[r] /= 2;
      displs[r] /= 2;
    }
  }
  MPI_Scatterv(dx->all_addr, counts, displs, MPI_UINT64_T, b->addr, (int)nloc, MPI_UINT64_T, 0, comm);
  boost_free(counts);
  boost_free(displs);
  for (int64_t k = 0; k < nloc; k++)
    if (b->addr[k] == HADDR_UNDEF) { /* rank 0 failed: it reports why */
      if (ok) boost_msgf(err, errlen, "rank 0 could not place this rank's chunks");
      ok = 0;
    }
  if (!ok || nloc == 0) return ok;
  pthread_mutex_lock(&dx->mu);
  if (!dx->flusher_started) /* started here: it inherits the writer thread's niceness */
    dx->flusher_started = pthread_create(&dx->flusher, NULL, flusher_main, dx) == 0;
  const int started = dx->flusher_started;
  if (started) {
    b->n = nloc;
    b->fd = fd;
    b->pending = 1;
    dx->cur ^= 1;
    pthread_cond_broadcast(&dx->cv);
  }
  pthread_mutex_unlock(&dx->mu);
  if (!started) { /* no thread to spare: write here */
    for (int64_t k = 0; k < nloc; k++)
      if (pwrite_all(fd, b->slots + (size_t)k * bound, (size_t)b->rec[2 * k + 1], (off_t)b->addr[k]) != 0) {
        boost_msgf(err, errlen, "writing a chunk: %s", strerror(errno));
        return 0;
      }
  }
  return ok;
}

/* Chunks per collective round: bounds the encoded bytes held per rank (two
 * rounds' worth, ~2 x 32 MiB) whatever the tensor's size. */
#define PIECE_CHUNKS 32

int ckpt_direct_write(ckpt_direct *dx, MPI_Comm comm, hid_t dset, int fd, int ndim, const int64_t *gshape,
                      const hsize_t *cd, size_t esz, int level, int threads, const int64_t *start,
                      const int64_t *count, const void *buf, double *stored, char *err, size_t errlen) {
  slab_grid g = {.ndim = ndim, .esz = esz, .chunk_elems = 1, .gshape = gshape, .start = start, .count = count,
                 .cd = cd, .buf = buf};
  int has = count != NULL && buf != NULL;
  int64_t nloc = 1;
  for (int d = 0; d < ndim; d++) {
    g.chunk_elems *= (size_t)cd[d];
    g.grid[d] = (gshape[d] + (int64_t)cd[d] - 1) / (int64_t)cd[d];
    if (has) {
      has = count[d] > 0;
      g.lo[d] = start[d] / (int64_t)cd[d];
      g.n[d] = (start[d] + count[d] + (int64_t)cd[d] - 1) / (int64_t)cd[d] - g.lo[d];
      nloc *= g.n[d];
    }
  }
  if (!has) nloc = 0;
  int64_t rounds = (nloc + PIECE_CHUNKS - 1) / PIECE_CHUNKS;
  MPI_Allreduce(MPI_IN_PLACE, &rounds, 1, MPI_INT64_T, MPI_MAX, comm);
  const size_t bound = ZSTD_compressBound(g.chunk_elems * esz);
  int ok = 1;
  for (int64_t p = 0; p < rounds; p++) {
    const int64_t k0 = p * PIECE_CHUNKS, k1 = k0 + PIECE_CHUNKS < nloc ? k0 + PIECE_CHUNKS : nloc;
    char why[512] = "";
    if (!write_piece(dx, comm, dset, fd, &g, k0, ok && k1 > k0 ? k1 - k0 : 0, level, threads, bound, stored, why,
                     sizeof why) &&
        ok) {
      boost_msgf(err, errlen, "%s", why);
      ok = 0;
    }
  }
  return ok;
}
