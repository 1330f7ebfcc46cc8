/* See ckpt_direct.h. */
#include "ckpt_direct.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "ckpt_direct_chunk.h"
#include "ckpt_h5.h"
#include "ckpt_vfd.h"
#include "comm.h"
#include "tensor.h"
#include "util.h"

/* Encoded chunks on their way to the file, of one or more datasets. Two
 * alternate, so that the next chunks are encoded while the flusher thread
 * writes the previous ones (on a node whose page-cache copies cost as much
 * as zstd, that overlap is most of the gain). */
typedef struct {
  unsigned char *slots; /* each chunk's bound-sized slot, at off[k] */
  size_t slots_cap, used;
  uint64_t *rec; /* (item, global chunk index, stored size) triples */
  size_t *off;
  haddr_t *addr; /* where rank 0 placed each */
  size_t rec_cap;
  int64_t n;
  int fd, pending; /* pending: handed to the flusher */
} batch;

/* A dataset of the file being written (ckpt_direct_begin). */
typedef struct {
  ckpt_direct_item d;
  size_t chunk_elems, bound;
  int64_t grid[TENSOR_MAX_DIMS]; /* chunks per dim of the dataset */
  int64_t nloc;                  /* this rank's chunks */
  int64_t most;                  /* the most chunks any rank has */
  int64_t per_piece;             /* chunks encoded between two placements at most */
  hid_t dset;                    /* rank 0: open until its chunks are placed */
  double *stored;                /* rank 0: where its stored bytes add up */
  int added;                     /* every piece encoded */
} item;

/* Rank 0's placement: every rank's triples gathered, the addresses HDF5
 * gave them, and what it hands H5Dwrite_chunk (the driver drops the write). */
typedef struct {
  uint64_t *all;
  haddr_t *addr;
  size_t cap;
  unsigned char *dummy;
  size_t dummy_cap;
} placer;

/* The thread that writes a placed batch's chunks (pwrite) while the next
 * batch is encoded; err: its first errno. */
typedef struct {
  pthread_t thread;
  int started, quit, err;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} flusher;

struct ckpt_direct {
  ckpt_chunk_encoder *enc;
  int nenc;
  batch b[2];
  int cur;
  placer place;
  /* the file being written */
  item *items;
  int nitems, items_cap;
  MPI_Comm comm;
  int fd, level, verdict; /* verdict: every rank was fine at the last placement */
  size_t pending_most;    /* encoded bytes since the last placement on the busiest rank, at most */
  boost_status why;       /* this rank's first failure */
  flusher flush;
};

ckpt_direct *ckpt_direct_new(void) {
  ckpt_direct *dx = boost_calloc(1, sizeof(ckpt_direct));
  pthread_mutex_init(&dx->flush.mu, NULL);
  pthread_cond_init(&dx->flush.cv, NULL);
  return dx;
}

static void *flusher_main(void *arg) {
  ckpt_direct *dx = arg;
  pthread_setname_np(pthread_self(), "ckpt-flush");
  pthread_mutex_lock(&dx->flush.mu);
  for (;;) {
    batch *b = dx->b[0].pending ? &dx->b[0] : dx->b[1].pending ? &dx->b[1] : NULL;
    if (!b) {
      if (dx->flush.quit) break;
      pthread_cond_wait(&dx->flush.cv, &dx->flush.mu);
      continue;
    }
    const int skip = dx->flush.err != 0; /* the file has failed already */
    pthread_mutex_unlock(&dx->flush.mu);
    int e = 0;
    for (int64_t k = 0; !skip && k < b->n; k++)
      if (ckpt_chunk_pwrite(b->fd, b->slots + b->off[k], (size_t)b->rec[3 * k + 2], (off_t)b->addr[k]) != 0) {
        e = errno ? errno : EIO;
        break;
      }
    pthread_mutex_lock(&dx->flush.mu);
    if (e && !dx->flush.err) dx->flush.err = e;
    b->pending = 0;
    pthread_cond_broadcast(&dx->flush.cv);
  }
  pthread_mutex_unlock(&dx->flush.mu);
  return NULL;
}

static void wait_batch(ckpt_direct *dx, const batch *b) {
  pthread_mutex_lock(&dx->flush.mu);
  while (b->pending) pthread_cond_wait(&dx->flush.cv, &dx->flush.mu);
  pthread_mutex_unlock(&dx->flush.mu);
}

static int finish_writes(ckpt_direct *dx, boost_status *err) {
  wait_batch(dx, &dx->b[0]);
  wait_batch(dx, &dx->b[1]);
  pthread_mutex_lock(&dx->flush.mu);
  const int e = dx->flush.err;
  dx->flush.err = 0;
  pthread_mutex_unlock(&dx->flush.mu);
  if (e) boost_err(err, "writing chunks: %s", strerror(e));
  return e == 0;
}

void ckpt_direct_free(ckpt_direct *dx) {
  if (!dx) return;
  if (dx->flush.started) {
    pthread_mutex_lock(&dx->flush.mu);
    dx->flush.quit = 1;
    pthread_cond_broadcast(&dx->flush.cv);
    pthread_mutex_unlock(&dx->flush.mu);
    pthread_join(dx->flush.thread, NULL);
  }
  pthread_mutex_destroy(&dx->flush.mu);
  pthread_cond_destroy(&dx->flush.cv);
  for (int i = 0; i < 2; i++) {
    boost_free(dx->b[i].slots);
    boost_free(dx->b[i].rec);
    boost_free(dx->b[i].off);
    boost_free(dx->b[i].addr);
  }
  boost_free(dx->items);
  for (int i = 0; i < dx->nenc; i++) ckpt_chunk_encoder_free(&dx->enc[i]);
  boost_free(dx->enc);
  boost_free(dx->place.all);
  boost_free(dx->place.addr);
  boost_free(dx->place.dummy);
  boost_free(dx);
}

/* p grown to hold need elements of size bytes, its content kept. */
static void *grow_keep(void *p, size_t *cap, size_t need, size_t size) {
  if (*cap >= need) return p;
  *cap = need + need / 4 + 16;
  return boost_realloc(p, *cap, size);
}

static void batch_reserve(batch *b, int64_t more_chunks, size_t more_bytes) {
  b->slots = grow_keep(b->slots, &b->slots_cap, b->used + more_bytes, 1);
  const size_t need = (size_t)(b->n + more_chunks), cap = b->rec_cap;
  if (cap >= need) return;
  size_t c3 = cap * 3, c1 = cap, c2 = cap;
  b->rec = grow_keep(b->rec, &c3, 3 * need, sizeof *b->rec);
  b->off = grow_keep(b->off, &c1, need, sizeof *b->off);
  b->addr = grow_keep(b->addr, &c2, need, sizeof *b->addr);
  b->rec_cap = c1 < c2 ? c1 : c2;
  if (c3 / 3 < b->rec_cap) b->rec_cap = c3 / 3;
}

/* Encodes the item's local chunks [k0, k0 + nloc) into the batch's slots
 * and triples. Returns 0, -1 on a zstd failure. */
static int encode_chunks(ckpt_direct *dx, batch *b, int which, const ckpt_slab_grid *g, int64_t k0, int64_t nloc,
                         int threads, size_t bound) {
  if (threads < 1) threads = 1;
  if (threads > nloc) threads = nloc > 0 ? (int)nloc : 1;
  if (dx->nenc < threads) {
    dx->enc = boost_realloc(dx->enc, (size_t)threads, sizeof *dx->enc);
    memset(dx->enc + dx->nenc, 0, (size_t)(threads - dx->nenc) * sizeof *dx->enc);
    dx->nenc = threads;
  }
  for (int t = 0; t < threads; t++)
    if (!ckpt_chunk_encoder_ready(&dx->enc[t], g->chunk_elems * g->esz, dx->level)) return -1;
  batch_reserve(b, nloc, (size_t)nloc * bound);
  const int64_t base = b->n;
  const size_t at = b->used;
  int failed = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(| : failed)
  for (int64_t k = 0; k < nloc; k++) {
    ckpt_chunk_encoder *e = &dx->enc[omp_get_thread_num()];
    const uint64_t idx = ckpt_slab_stage_chunk(g, k0 + k, e);
    const size_t o = at + (size_t)k * bound;
    const size_t n = ZSTD_compress2(e->cctx, b->slots + o, bound, e->shuffled, g->chunk_elems * g->esz);
    uint64_t *r = &b->rec[3 * (size_t)(base + k)];
    r[0] = (uint64_t)which;
    r[1] = idx;
    r[2] = ZSTD_isError(n) ? 0 : (uint64_t)n;
    b->off[base + k] = o;
    failed |= ZSTD_isError(n) != 0;
  }
  b->n += nloc;
  b->used += (size_t)nloc * bound;
  return failed ? -1 : 0;
}

/* Rank 0: the gathered chunks [0, total) into the file's index, each write
 * of its bytes dropped; their addresses into dx->place.addr. */
static int place_chunks(ckpt_direct *dx, int64_t total, boost_status *err) {
  int ok = 1;
  for (int64_t r = 0; r < total; r++) {
    dx->place.addr[r] = HADDR_UNDEF;
    if (!ok) continue;
    const uint64_t which = dx->place.all[3 * r], size = dx->place.all[3 * r + 2];
    uint64_t idx = dx->place.all[3 * r + 1];
    if (which >= (uint64_t)dx->nitems || dx->items[which].dset < 0) {
      boost_err(err, "a chunk of a dataset that is not open");
      ok = 0;
      continue;
    }
    const item *it = &dx->items[which];
    hsize_t off[TENSOR_MAX_DIMS];
    for (int d = it->d.ndim - 1; d >= 0; d--) {
      off[d] = (hsize_t)(idx % (uint64_t)it->grid[d]) * it->d.cd[d];
      idx /= (uint64_t)it->grid[d];
    }
    if (size == 0 || size > dx->place.dummy_cap) {
      boost_err(err, "a chunk failed to compress");
      ok = 0;
      continue;
    }
    ckpt_vfd_drop_next_raw((size_t)size);
    haddr_t at = HADDR_UNDEF;
    if (H5Dwrite_chunk(it->dset, H5P_DEFAULT, 0, off, (size_t)size, dx->place.dummy) < 0) {
      ckpt_vfd_dropped(&at);
      ckpt_h5_fail(err, "H5Dwrite_chunk");
      ok = 0;
      continue;
    }
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t got = 0;
    if (!ckpt_vfd_dropped(&at) || H5Dget_chunk_info_by_coord(it->dset, off, &mask, &addr, &got) < 0 || addr != at ||
        got != size || mask != 0) {
      H5Eclear2(H5E_DEFAULT);
      boost_err(err, "HDF5 did not place a chunk where the driver saw it written");
      ok = 0;
      continue;
    }
    dx->place.addr[r] = addr;
    if (it->stored) *it->stored += (double)size;
  }
  return ok;
}

/* Rank 0: closes the datasets whose every chunk is placed. */
static int close_placed(ckpt_direct *dx, boost_status *err) {
  int ok = 1;
  for (int k = 0; k < dx->nitems; k++) {
    item *it = &dx->items[k];
    if (!it->added || it->dset < 0) continue;
    if (H5Dclose(it->dset) < 0 && ok) {
      ckpt_h5_fail(err, "H5Dclose");
      ok = 0;
    }
    it->dset = -1;
  }
  return ok;
}

static void say(ckpt_direct *dx, const char *why) {
  if (!dx->why.failed) boost_err(&dx->why, "%s", why);
}

/* A placement, collective over the file's ranks: every rank's chunk sizes
 * and state to rank 0, which places the chunks and decides whether every
 * rank is fine; the addresses and that verdict back; the chunks to the
 * flusher. Three collectives whatever the number of datasets. */
static void place(ckpt_direct *dx, int ok) {
  int rank, nranks;
  MPI_Comm_rank(dx->comm, &rank);
  MPI_Comm_size(dx->comm, &nranks);
  batch *b = &dx->b[dx->cur];
  int mine[2] = {(int)(3 * b->n), ok && !dx->why.failed}, *got = NULL, *counts = NULL, *displs = NULL;
  int64_t total = 0;
  if (rank == 0) {
    got = boost_calloc(2 * (size_t)nranks, sizeof *got);
    counts = boost_calloc((size_t)nranks, sizeof *counts);
    displs = boost_calloc((size_t)nranks, sizeof *displs);
  }
  MPI_Gather(mine, 2, MPI_INT, got, 2, MPI_INT, 0, dx->comm);
  int verdict = 1;
  if (rank == 0) {
    for (int r = 0; r < nranks; r++) {
      counts[r] = got[2 * r];
      displs[r] = (int)total;
      total += counts[r];
      verdict &= got[2 * r + 1];
    }
    size_t cap = dx->place.cap;
    dx->place.all = grow_keep(dx->place.all, &cap, (size_t)total + 3, sizeof(uint64_t));
    if (cap != dx->place.cap) {
      boost_free(dx->place.addr);
      dx->place.addr = boost_calloc(cap / 3 + (size_t)nranks + 1, sizeof *dx->place.addr);
      dx->place.cap = cap;
    }
  }
  MPI_Gatherv(b->rec, mine[0], MPI_UINT64_T, dx->place.all, counts, displs, MPI_UINT64_T, 0, dx->comm);
  haddr_t *send = NULL;
  if (rank == 0) {
    boost_status why = {0};
    if (verdict && !place_chunks(dx, total / 3, &why)) say(dx, why.msg), verdict = 0;
    if (!close_placed(dx, &why)) say(dx, why.msg), verdict = 0;
    /* per rank: the verdict, then the addresses of its chunks */
    send = boost_calloc((size_t)(total / 3) + (size_t)nranks, sizeof *send);
    for (int r = 0, at = 0; r < nranks; r++) {
      send[at] = (haddr_t)verdict;
      if (counts[r] > 0) memcpy(send + at + 1, dx->place.addr + displs[r] / 3, (size_t)(counts[r] / 3) * sizeof *send);
      displs[r] = at;
      counts[r] = counts[r] / 3 + 1;
      at += counts[r];
    }
  }
  haddr_t *recv = boost_calloc((size_t)b->n + 1, sizeof *recv);
  MPI_Scatterv(send, counts, displs, MPI_UINT64_T, recv, (int)b->n + 1, MPI_UINT64_T, 0, dx->comm);
  dx->verdict = recv[0] == 1;
  if (b->n > 0) memcpy(b->addr, recv + 1, (size_t)b->n * sizeof *b->addr); /* b->addr is NULL while empty */
  boost_free(recv);
  boost_free(send);
  boost_free(got);
  boost_free(counts);
  boost_free(displs);
  dx->pending_most = 0;
  if (!dx->verdict || b->n == 0) {
    b->n = 0;
    b->used = 0;
    return;
  }
  pthread_mutex_lock(&dx->flush.mu);
  if (!dx->flush.started) /* started here: it inherits the writer thread's niceness */
    dx->flush.started = pthread_create(&dx->flush.thread, NULL, flusher_main, dx) == 0;
  const int started = dx->flush.started;
  if (started) {
    b->fd = dx->fd;
    b->pending = 1;
    dx->cur ^= 1;
    pthread_cond_broadcast(&dx->flush.cv);
  }
  pthread_mutex_unlock(&dx->flush.mu);
  if (!started) /* no thread to spare: write here */
    for (int64_t k = 0; k < b->n; k++)
      if (ckpt_chunk_pwrite(dx->fd, b->slots + b->off[k], (size_t)b->rec[3 * k + 2], (off_t)b->addr[k]) != 0) {
        pthread_mutex_lock(&dx->flush.mu);
        if (!dx->flush.err) dx->flush.err = errno ? errno : EIO;
        pthread_mutex_unlock(&dx->flush.mu);
        break;
      }
  batch *next = &dx->b[dx->cur];
  wait_batch(dx, next); /* the flusher is done with its slots */
  next->n = 0;
  next->used = 0;
}

int ckpt_direct_begin(ckpt_direct *dx, MPI_Comm comm, int level, int n, const ckpt_direct_item *items, int ok) {
  wait_batch(dx, &dx->b[0]);
  wait_batch(dx, &dx->b[1]);
  dx->comm = comm;
  dx->fd = -1;
  dx->level = level;
  dx->why = (boost_status){0};
  dx->verdict = 1;
  dx->pending_most = 0;
  dx->cur = 0;
  dx->b[0].n = dx->b[1].n = 0;
  dx->b[0].used = dx->b[1].used = 0;
  if (n > dx->items_cap) {
    dx->items = boost_realloc(dx->items, (size_t)n, sizeof *dx->items);
    dx->items_cap = n;
  }
  dx->nitems = n;
  /* one reduction: [a rank cannot write directly, each item's chunk count] */
  int64_t *most = boost_calloc((size_t)n + 1, sizeof *most);
  most[0] = !ok;
  size_t dummy = 0;
  for (int k = 0; k < n; k++) {
    item *it = &dx->items[k];
    memset(it, 0, sizeof *it);
    it->d = items[k];
    it->dset = -1;
    it->chunk_elems = 1;
    it->nloc = it->d.has ? 1 : 0;
    for (int d = 0; d < it->d.ndim; d++) {
      it->chunk_elems *= (size_t)it->d.cd[d];
      it->grid[d] = (it->d.gshape[d] + (int64_t)it->d.cd[d] - 1) / (int64_t)it->d.cd[d];
      if (it->d.has) {
        const int64_t c = (int64_t)it->d.cd[d], lo = it->d.start[d] / c;
        it->nloc *= (it->d.start[d] + it->d.count[d] + c - 1) / c - lo;
      }
    }
    it->bound = ZSTD_compressBound(it->chunk_elems * it->d.esz);
    if (it->bound > dummy) dummy = it->bound;
    it->per_piece = CKPT_DIRECT_BATCH_BYTES / it->bound > 0 ? (int64_t)(CKPT_DIRECT_BATCH_BYTES / it->bound) : 1;
    most[k + 1] = it->nloc;
  }
  comm_control(comm, COMM_WORLD, "checkpoint agreement", most, n + 1, MPI_INT64_T, MPI_MAX);
  for (int k = 0; k < n; k++) dx->items[k].most = most[k + 1];
  const int all_ok = most[0] == 0;
  boost_free(most);
  if (dx->place.dummy_cap < dummy) {
    boost_free(dx->place.dummy);
    dx->place.dummy = boost_calloc(dummy, 1);
    dx->place.dummy_cap = dummy;
  }
  return all_ok;
}

int ckpt_direct_add(ckpt_direct *dx, int k, int fd, hid_t dset, const void *buf, double *stored, int threads, int ok) {
  BOOST_ASSERT(k >= 0 && k < dx->nitems);
  dx->fd = fd;
  item *it = &dx->items[k];
  it->dset = dset;
  it->stored = stored;
  if (!dx->verdict) { /* every rank knows: nothing more is placed */
    it->added = 1;
    return 0;
  }
  ckpt_slab_grid g = {.ndim = it->d.ndim, .esz = it->d.esz, .chunk_elems = it->chunk_elems, .gshape = it->d.gshape,
                 .start = it->d.start, .count = it->d.count, .cd = it->d.cd, .buf = buf};
  for (int d = 0; d < g.ndim; d++) {
    g.grid[d] = it->grid[d];
    if (it->d.has) {
      const int64_t c = (int64_t)it->d.cd[d];
      g.lo[d] = it->d.start[d] / c;
      g.n[d] = (it->d.start[d] + it->d.count[d] + c - 1) / c - g.lo[d];
    }
  }
  const int has = it->d.has && buf != NULL;
  if (it->d.has && !buf) say(dx, "no data for a dataset this rank writes");
  for (int64_t k0 = 0; k0 < it->most; k0 += it->per_piece) {
    /* The same arithmetic on every rank (it->most is everyone's): a
     * placement wherever the busiest rank's encoded bytes would pass the
     * bound. */
    const int64_t piece_most = it->most - k0 < it->per_piece ? it->most - k0 : it->per_piece;
    const size_t piece_bytes = (size_t)piece_most * it->bound;
    if (dx->pending_most > 0 && dx->pending_most + piece_bytes > CKPT_DIRECT_BATCH_BYTES) {
      place(dx, ok);
      if (!dx->verdict) break;
    }
    dx->pending_most += piece_bytes;
    const int64_t n_mine = has && ok && !dx->why.failed && k0 < it->nloc
                               ? (it->nloc - k0 < it->per_piece ? it->nloc - k0 : it->per_piece)
                               : 0;
    pthread_mutex_lock(&dx->flush.mu);
    const int werr = dx->flush.err; /* a write failed: report it now, encode no more */
    pthread_mutex_unlock(&dx->flush.mu);
    if (werr) {
      boost_status why = {0};
      boost_err(&why, "writing chunks: %s", strerror(werr));
      say(dx, why.msg);
    } else if (n_mine > 0 && encode_chunks(dx, &dx->b[dx->cur], k, &g, k0, n_mine, threads, it->bound) < 0) {
      say(dx, "zstd failed on a chunk");
    }
  }
  it->added = 1;
  return dx->verdict;
}

int ckpt_direct_end(ckpt_direct *dx, int ok, boost_status *err) {
  if (dx->verdict) place(dx, ok);
  int rank;
  MPI_Comm_rank(dx->comm, &rank);
  if (rank == 0) {
    boost_status why = {0};
    for (int k = 0; k < dx->nitems; k++) dx->items[k].added = 1;
    if (!close_placed(dx, &why)) say(dx, why.msg);
  }
  boost_status werr = {0};
  if (!finish_writes(dx, &werr)) say(dx, werr.msg);
  if (dx->why.failed) boost_status_take(err, &dx->why);
  else if (!dx->verdict) boost_err(err, "another rank failed");
  return !dx->why.failed && dx->verdict;
}
