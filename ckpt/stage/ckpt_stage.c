/* The stager (ckpt_stage.h): a save's bands from the arenas (backend
 * memory) into the host staging buffer through the backend's copies -- by
 * the training thread at the step boundary, or deferred to the writer
 * thread on the backend's copy stream while the next forward/backward runs
 * -- and a verified load the other way. ZeRO-1 moments and the replicas'
 * bands move between ranks through the comm layer on host memory
 * (st->hcomm). */
#include "ckpt_stage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_hash.h"
#include "ckpt_test_hooks.h"
#include "util.h"

/* The host exchange buffer (ckpt_stager_init sized it). */
static float *xbuf(ckpt_stager *st, size_t floats) {
  BOOST_ASSERT(floats <= st->xbuf_floats);
  return st->xbuf;
}

/* The limit as given: "25%", "80 KiB", "1000 bytes". */
static void limit_text(const ckpt_settings *cfg, char *out, size_t n) {
  const double b = cfg->staging_limit_bytes;
  if (cfg->staging_limit_percent > 0) boost_msgf(out, n, "%g%%", cfg->staging_limit_percent);
  else if (b < 1024 || fmod(b, 1024) != 0) boost_msgf(out, n, "%.0f byte%s", b, b == 1 ? "" : "s");
  else ckpt_format_bytes(b, out, n);
}

/* "the smallest limit that works on this layout is 81920 (80K) or 5.72%":
 * need[0] bytes, need[1] percent, each every rank's least, rounded up. */
static void least_text(const double *need, char *out, size_t n) {
  const double pct = ceil(need[1] * 100 * (1 + 1e-9)) / 100;
  boost_msgf(out, n, "the smallest limit that works on this layout is %.0f (%.0fK) or %.2f%%", need[0],
             ceil(need[0] / 1024), pct > 100 ? 100 : pct);
}

/* The ring's size from ckpt.staging_limit; -1 with err (naming the key
 * and the least limit that works) when it cannot hold some rank's largest
 * band, or the moments are ZeRO-1 chunks. Collective over the world: every
 * rank refuses the same limit with the same least value. */
static int size_ring(ckpt_stager *st, const ckpt_settings *cfg, boost_status *err) {
  const ckpt_file_plan *p = st->plan;
  int big;
  const size_t most = ckpt_file_plan_largest_save(p, st->reg, &big), all_floats = p->save_floats;
  const double limit = cfg->staging_limit_bytes > 0     ? cfg->staging_limit_bytes / sizeof(float)
                       : cfg->staging_limit_percent > 0 ? cfg->staging_limit_percent / 100.0 * (double)all_floats
                                                        : (double)all_floats;
  st->ring.bounded = p->nitems > 0 && limit < (double)all_floats;
  st->ring.floats = st->ring.bounded ? (size_t)limit & ~(size_t)15 : 0;
  /* A rank works with a ring of whole 16-float lines that holds its
   * largest band, or with a limit at or above all it writes. */
  const size_t fits = (most + 15) & ~(size_t)15, least = fits < all_floats ? fits : all_floats;
  const int short_here = st->ring.bounded && st->ring.floats < most;
  double need[3] = {4.0 * (double)least, all_floats ? 100.0 * (double)least / (double)all_floats : 0, short_here};
  comm_control(st->grid->world, COMM_WORLD, "checkpoint staging limit", need, 3, MPI_DOUBLE, MPI_MAX);
  char lim[64], need_txt[32], all[32], least_txt[160];
  limit_text(cfg, lim, sizeof lim);
  least_text(need, least_txt, sizeof least_txt);
  ckpt_format_bytes(4.0 * (double)all_floats, all, sizeof all);
  if (st->ring.bounded && store_moments_sharded(st->store))
    return boost_err(err,
                     "ckpt.staging_limit=%s is below the %s this rank writes, and bounded staging does not take ZeRO-1 "
                     "moment chunks (parallel.zero) yet: set ckpt.staging_limit=100%% or parallel.zero=false",
                     lim, all);
  if (short_here) {
    ckpt_format_bytes(4.0 * (double)most, need_txt, sizeof need_txt);
    return boost_err(err,
                     "ckpt.staging_limit=%s is too small: the largest tensor band this rank writes (%s/%s) takes %s "
                     "(%.1f%% of the %s it writes); %s",
                     lim, ckpt_category_group[big % CKPT_NUM_CATEGORIES], p->ents[big / CKPT_NUM_CATEGORIES].name,
                     need_txt, 100.0 * (double)most / (double)all_floats, all, least_txt);
  }
  if (need[2] > 0)
    return boost_err(err, "ckpt.staging_limit=%s is too small for another rank's largest tensor band; %s", lim,
                     least_txt);
  return 0;
}

int ckpt_stager_init(ckpt_stager *st, const ckpt_file_plan *p, tensor_store *store, const process_grid *grid,
                     const ckpt_settings *cfg, ckpt_worker *notify, boost_status *err) {
  memset(st, 0, sizeof *st);
  st->plan = p;
  st->store = store;
  const tensor_registry *reg = st->reg = store->reg;
  st->grid = grid;
  st->notify = notify;
  boost_backend *be = store->be;
  const size_t nkeys = (size_t)p->nent * CKPT_NUM_CATEGORIES;
  st->ring.slot = boost_calloc(nkeys ? nkeys : 1, sizeof *st->ring.slot);
  st->ring.item_sum = boost_calloc(nkeys ? nkeys : 1, sizeof *st->ring.item_sum);
  for (size_t k = 0; k < nkeys; k++) /* not bounded: the plan's offsets, always */
    st->ring.slot[k] = p->ents[k / CKPT_NUM_CATEGORIES].stage_off[k % CKPT_NUM_CATEGORIES];
  if (size_ring(st, cfg, err) != 0) return -1;
  /* A load streams into the arenas unless the moments are ZeRO-1 chunks
   * (ckpt_load_stage.c): through the ring only where the decoders cannot
   * write backend memory, which then holds at least the largest band. */
  st->load_streamed = !store_moments_sharded(store);
  st->load_host = st->load_streamed && !ckpt_test_hooks_now()->load_ring && be->mem->host_view(be, store->arena[TENSOR_PARAMS]);
  st->stage_floats = p->save_floats;
  if (st->ring.bounded) st->stage_floats = st->ring.floats;
  else if (!st->load_streamed && p->load_floats > st->stage_floats) st->stage_floats = p->load_floats;
  const size_t largest_load = ckpt_file_plan_largest_load(p, reg);
  if (st->load_streamed && !st->load_host && largest_load > st->stage_floats) st->stage_floats = largest_load;
  if (grid->dp > 1) /* whole tensors and ZeRO-1 chunk pieces, one at a time */
    for (int i = 0; i < reg->count; i++)
      if (reg->tensors[i].numel > st->xbuf_floats) st->xbuf_floats = reg->tensors[i].numel;
  const size_t mchunk_floats = store_moments_sharded(store) ? 2 * (store->mom_end - store->mom_begin) : 0;
  /* Allocated and touched now (zero-filled): a checkpoint is always written
   * at the end of a run, and faulting the pages in at the first checkpoint
   * would make its deferred copy outlast the next step. */
  st->stage = st->stage_floats ? be->mem->host_alloc(be, st->stage_floats * sizeof(float)) : NULL;
  st->xbuf = st->xbuf_floats ? be->mem->host_alloc(be, st->xbuf_floats * sizeof(float)) : NULL;
  st->mchunk = mchunk_floats ? be->mem->host_alloc(be, mchunk_floats * sizeof(float)) : NULL;
  if ((st->stage_floats && !st->stage) || (st->xbuf_floats && !st->xbuf) || (mchunk_floats && !st->mchunk))
    return boost_err(err, "out of host memory for checkpoint staging (%.1f MiB)",
                     4.0 * (double)(st->stage_floats + st->xbuf_floats + mchunk_floats) / (1 << 20));
  return 0;
}

void ckpt_stager_connect(ckpt_stager *st, MPI_Comm world, MPI_Comm dp) {
  comm_init_mpi(&st->hcomm, NULL, MPI_COMM_SELF, dp, MPI_COMM_SELF, world);
}

void ckpt_stager_free(ckpt_stager *st) {
  if (!st->store) return;
  boost_backend *be = st->store->be;
  if (st->stage) be->mem->host_free(be, st->stage);
  if (st->xbuf) be->mem->host_free(be, st->xbuf);
  if (st->mchunk) be->mem->host_free(be, st->mchunk);
  st->stage = st->xbuf = st->mchunk = NULL;
  boost_free(st->ring.slot);
  boost_free(st->ring.item_sum);
  st->ring.slot = NULL;
  st->ring.item_sum = NULL;
  boost_free(st->lring.key);
  boost_free(st->lring.at);
  st->lring.key = NULL;
  st->lring.at = NULL;
  if (st->hcomm.ops) comm_free(&st->hcomm); /* connected */
}

int ckpt_stager_bounded(const ckpt_stager *st) { return st->ring.bounded; }

const uint64_t *ckpt_ring_sums(const ckpt_stager *st) { return st->ring.item_sum; }

/* ---- the save ring ------------------------------------------------------------ */

static size_t item_floats(const ckpt_stager *st, int k) {
  return ckpt_band_floats(&st->plan->ents[k / CKPT_NUM_CATEGORIES], st->reg, k % CKPT_NUM_CATEGORIES);
}

/* Where n floats fit after the newest staged band (or, wrapping, before the
 * oldest); 0 when they do not fit yet. */
static int ring_place(const ckpt_stager *st, size_t n, size_t *at) {
  if (st->ring.w == st->ring.h) {
    *at = 0;
    return n <= st->ring.floats;
  }
  const int old = st->plan->item_key[st->ring.w], young = st->plan->item_key[st->ring.h - 1];
  const size_t lo = st->ring.slot[old], hi = st->ring.slot[young] + item_floats(st, young);
  if (hi > lo) { /* one run [lo, hi): room after it, or from the start */
    *at = hi + n <= st->ring.floats ? hi : 0;
    return hi + n <= st->ring.floats || n <= lo;
  }
  *at = hi; /* wrapped: the room is [hi, lo) */
  return hi + n <= lo;
}

/* Band k from the arenas into the ring at slot[k], hashed. */
static void stage_item(ckpt_stager *st, int k) {
  boost_backend *be = st->store->be;
  const ckpt_entry *e = &st->plan->ents[k / CKPT_NUM_CATEGORIES];
  const int c = k % CKPT_NUM_CATEGORIES;
  const tensor_desc *t = &st->reg->tensors[e->local];
  float *dst = st->stage + st->ring.slot[k];
  const size_t bytes = (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(t) * sizeof(float);
  if (st->ring.async) {
    be->mem->download_async(be, dst, ckpt_arena_rows(st->store, e, c, e->r0[c]), bytes);
    be->mem->copy_sync(be);
  } else {
    be->mem->download(be, dst, ckpt_arena_rows(st->store, e, c, e->r0[c]), bytes);
  }
  int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
  ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
  st->ring.item_sum[k] = ckpt_hash_slab32(dst, t->ndim, t->shape, start, count);
}

/* Stages the next bands while they fit; the last one lets training go on. */
static void ring_fill(ckpt_stager *st) {
  const int before = st->ring.h;
  size_t at;
  while (st->ring.h < st->plan->nitems && ring_place(st, item_floats(st, st->plan->item_key[st->ring.h]), &at)) {
    const int k = st->plan->item_key[st->ring.h];
    st->ring.slot[k] = at;
    stage_item(st, k);
    st->ring.h++;
    ckpt_worker_staged_items(st->notify, st->ring.h); /* the optimizer may be waiting for this band */
  }
  if (st->ring.h == st->plan->nitems && before < st->plan->nitems) ckpt_worker_signal_staged(st->notify);
}

void ckpt_ring_begin(ckpt_stager *st, int async) {
  const size_t nkeys = (size_t)st->plan->nent * CKPT_NUM_CATEGORIES;
  memset(st->ring.item_sum, 0, (nkeys ? nkeys : 1) * sizeof *st->ring.item_sum);
  st->ring.w = st->ring.h = 0;
  st->ring.async = async;
  if (st->ring.bounded) {
    for (size_t k = 0; k < nkeys; k++) st->ring.slot[k] = CKPT_NO_STAGE;
    ring_fill(st);
    return;
  }
  if (async) { /* the copy training waits for before its next update */
    ckpt_copy_to_stage(st, 1);
    ckpt_worker_signal_staged(st->notify);
    ckpt_stage_moments(st); /* ZeRO-1, from the host copies: training goes on meanwhile */
  }
  for (int n = 0; n < st->plan->nitems; n++) {
    const int k = st->plan->item_key[n];
    const ckpt_entry *e = &st->plan->ents[k / CKPT_NUM_CATEGORIES];
    const int c = k % CKPT_NUM_CATEGORIES;
    const tensor_desc *t = &st->reg->tensors[e->local];
    int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
    ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
    st->ring.item_sum[k] = ckpt_hash_slab32(st->stage + st->ring.slot[k], t->ndim, t->shape, start, count);
  }
  st->ring.h = st->plan->nitems;
}

float *ckpt_ring_take(ckpt_stager *st, int i, int c) {
  const int k = i * CKPT_NUM_CATEGORIES + c;
  if (st->ring.bounded) {
    BOOST_ASSERT(st->ring.w < st->plan->nitems && st->plan->item_key[st->ring.w] == k); /* in file order */
    ring_fill(st);
    BOOST_ASSERT(st->ring.h > st->ring.w);
  }
  return st->stage + st->ring.slot[k];
}

void ckpt_ring_release(ckpt_stager *st, int i, int c) {
  if (!st->ring.bounded) return;
  BOOST_ASSERT(st->ring.w < st->ring.h && st->plan->item_key[st->ring.w] == i * CKPT_NUM_CATEGORIES + c);
  st->ring.w++;
  ring_fill(st); /* its room to the next bands at once: the optimizer may be waiting for them */
}

/* ---- ZeRO-1 moments --------------------------------------------------------------
 * Each replica holds one chunk of the moment arenas; a checkpoint is written
 * in bands of rows per replica (ckpt_band_of). Both are contiguous ranges
 * of the arena index space, so for one tensor the pieces a replica sends
 * to the others are consecutive in its buffer, in replica order: one
 * all-to-all per tensor and category moves them (each element once) between
 * a host copy of this replica's piece of the chunk and its band. */

static void intersect(size_t a0, size_t a1, size_t b0, size_t b1, size_t *x0, size_t *x1) {
  *x0 = a0 > b0 ? a0 : b0;
  *x1 = a1 < b1 ? a1 : b1;
  if (*x1 < *x0) *x1 = *x0;
}

/* Who sends what for entry e, category c: the piece [*m0, *m1) of this
 * replica's chunk that holds the tensor, cut by the replicas' bands (cc/cd,
 * displacements from m0), and this replica's band cut by their chunks
 * (bc/bd, from the band's start). Arrays of dp. */
static void moment_counts(const ckpt_stager *st, const ckpt_entry *e, int c, size_t *cc, size_t *cd, size_t *bc,
                          size_t *bd, size_t *m0, size_t *m1) {
  const tensor_store *ms = st->store;
  const tensor_desc *t = &st->reg->tensors[e->local];
  const int dp = st->grid->dp, me = st->grid->dp_rank;
  const size_t rf = ckpt_row_floats(t), t0 = t->arena_offset, t1 = t0 + t->numel, len = ms->mom_end - ms->mom_begin;
  BOOST_ASSERT(ms->mom_shards == dp && ms->mom_begin == len * (size_t)me);
  intersect(t0, t1, ms->mom_begin, ms->mom_end, m0, m1); /* this tensor in my chunk */
  int64_t a, b;
  ckpt_band_of(e, t, c, me, dp, &a, &b);
  const size_t band0 = t0 + (size_t)a * rf, band1 = t0 + (size_t)b * rf; /* my band */
  for (int k = 0; k < dp; k++) {
    size_t x0, x1;
    ckpt_band_of(e, t, c, k, dp, &a, &b); /* replica k's band against my chunk */
    intersect(t0 + (size_t)a * rf, t0 + (size_t)b * rf, *m0, *m1, &x0, &x1);
    cc[k] = x1 - x0;
    cd[k] = x1 > x0 ? x0 - *m0 : 0;
    intersect(band0, band1, len * (size_t)k, len * (size_t)(k + 1), &x0, &x1); /* my band against k's chunk */
    bc[k] = x1 - x0;
    bd[k] = x1 > x0 ? x0 - band0 : 0;
  }
}

/* A save's moments of entry e, category c, into its band (NULL when this
 * replica's band is empty) from the chunk owners, each sending from its
 * host copy of its chunk (st->mchunk). Collective over dp. */
static void stage_moment(ckpt_stager *st, const ckpt_entry *e, int c, float *band) {
  const int dp = st->grid->dp;
  const size_t len = st->store->mom_end - st->store->mom_begin;
  size_t *cnt = boost_calloc((size_t)dp * 4, sizeof *cnt), m0, m1;
  moment_counts(st, e, c, cnt, cnt + dp, cnt + 2 * dp, cnt + 3 * dp, &m0, &m1);
  const float *piece = st->mchunk + (size_t)(c - 1) * len + (m1 > m0 ? m0 - st->store->mom_begin : 0);
  comm_alltoallv_f32(&st->hcomm, COMM_DP, piece, cnt, cnt + dp, band, cnt + 2 * dp, cnt + 3 * dp);
  boost_free(cnt);
}

/* ZeRO-1: a load's moment band of entry e, category c (host) to the chunk
 * owners, each uploading its piece. Collective over dp. */
static void load_moment(ckpt_stager *st, const ckpt_entry *e, int c, const float *band) {
  boost_backend *be = st->store->be;
  const int dp = st->grid->dp;
  size_t *cnt = boost_calloc((size_t)dp * 4, sizeof *cnt), m0, m1;
  moment_counts(st, e, c, cnt, cnt + dp, cnt + 2 * dp, cnt + 3 * dp, &m0, &m1);
  float *piece = xbuf(st, m1 > m0 ? m1 - m0 : 1);
  comm_alltoallv_f32(&st->hcomm, COMM_DP, band, cnt + 2 * dp, cnt + 3 * dp, piece, cnt, cnt + dp);
  if (m1 > m0)
    be->mem->upload(be, store_moment_at(st->store, ckpt_category_arena[c], m0), piece, (m1 - m0) * sizeof(float));
  boost_free(cnt);
}

/* ---- a save: arenas -> staging ----------------------------------------------- */

void ckpt_copy_to_stage(ckpt_stager *st, int async) {
  const tensor_registry *reg = st->reg;
  const tensor_store *store = st->store;
  boost_backend *be = store->be;
  const int sharded = store_moments_sharded(store);
  for (int i = 0; i < st->plan->nent; i++) {
    const ckpt_entry *e = &st->plan->ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      if (e->stage_off[c] == CKPT_NO_STAGE || (c != 0 && sharded)) continue;
      const size_t bytes = (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&reg->tensors[e->local]) * sizeof(float);
      if (async) be->mem->download_async(be, st->stage + e->stage_off[c], ckpt_arena_rows(st->store, e, c, e->r0[c]), bytes);
      else be->mem->download(be, st->stage + e->stage_off[c], ckpt_arena_rows(st->store, e, c, e->r0[c]), bytes);
    }
  }
  const size_t len = store->mom_end - store->mom_begin;
  for (int c = 1; sharded && c < CKPT_NUM_CATEGORIES; c++) { /* ZeRO-1: this replica's chunks, whole */
    float *dst = st->mchunk + (size_t)(c - 1) * len;
    if (async) be->mem->download_async(be, dst, store->arena[ckpt_category_arena[c]], len * sizeof(float));
    else be->mem->download(be, dst, store->arena[ckpt_category_arena[c]], len * sizeof(float));
  }
  if (async) be->mem->copy_sync(be);
}

void ckpt_stage_moments(ckpt_stager *st) {
  if (!store_moments_sharded(st->store)) return;
  for (int i = 0; i < st->plan->nent; i++) {
    const ckpt_entry *e = &st->plan->ents[i];
    /* the replicas of one dp group agree on this: they share tp and pp ranks */
    if (e->local < 0 || !e->primary || e->writer_stage != st->grid->pp_rank) continue;
    for (int c = 1; c < CKPT_NUM_CATEGORIES; c++)
      stage_moment(st, e, c, e->stage_off[c] != CKPT_NO_STAGE ? st->stage + e->stage_off[c] : NULL);
  }
}

/* ---- a verified load: staging -> arenas ------------------------------------- */

/* Band (e, c) of every replica, all-gathered into the whole local tensor
 * on the host, then uploaded (dp = 1: the band is the whole tensor). */
static void load_whole(ckpt_stager *st, const ckpt_entry *e, int c, const float *band) {
  boost_backend *be = st->store->be;
  const tensor_desc *t = &st->reg->tensors[e->local];
  const int dp = st->grid->dp;
  const size_t rf = ckpt_row_floats(t);
  if (dp == 1) {
    if (band) be->mem->upload(be, ckpt_arena_rows(st->store, e, c, 0), band, t->numel * sizeof(float));
    return;
  }
  size_t *cnt = boost_calloc((size_t)dp * 4, sizeof *cnt);
  int64_t a, b;
  for (int k = 0; k < dp; k++) {
    ckpt_band_of(e, t, c, k, dp, &a, &b);
    cnt[2 * dp + k] = (size_t)(b - a) * rf; /* from replica k: its band, at its rows */
    cnt[3 * dp + k] = (size_t)a * rf;
    if (k == st->grid->dp_rank) /* to every replica: mine */
      for (int q = 0; q < dp; q++) cnt[q] = (size_t)(b - a) * rf;
  }
  float *whole = xbuf(st, t->numel ? t->numel : 1);
  comm_alltoallv_f32(&st->hcomm, COMM_DP, band, cnt, cnt + dp, whole, cnt + 2 * dp, cnt + 3 * dp);
  if (t->numel) be->mem->upload(be, ckpt_arena_rows(st->store, e, c, 0), whole, t->numel * sizeof(float));
  boost_free(cnt);
}

/* A streamed load's band (e, c), in the arenas already, as host memory
 * (the staging buffer, free again, when backend memory is not host). */
static const float *streamed_band(ckpt_stager *st, const ckpt_entry *e, int c) {
  if (e->load_off[c] == CKPT_NO_STAGE) return NULL;
  boost_backend *be = st->store->be;
  const float *rows = ckpt_arena_rows(st->store, e, c, e->r0[c]);
  if (st->load_host) return be->mem->host_view(be, rows);
  const size_t n = (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&st->reg->tensors[e->local]);
  BOOST_ASSERT(n <= st->stage_floats);
  be->mem->download(be, st->stage, rows, n * sizeof(float));
  return st->stage;
}

void ckpt_upload_loaded(ckpt_stager *st) {
  const int sharded = store_moments_sharded(st->store);
  for (int i = 0; i < st->plan->nent; i++) {
    const ckpt_entry *e = &st->plan->ents[i];
    if (e->local < 0) continue;
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const float *staged = e->load_off[c] != CKPT_NO_STAGE ? st->stage + e->load_off[c] : NULL;
      if (c != 0 && sharded) load_moment(st, e, c, staged);
      else if (!st->load_streamed) load_whole(st, e, c, staged);
      else if (st->grid->dp > 1) load_whole(st, e, c, streamed_band(st, e, c));
    }
  }
  store_refresh_work(st->store); /* the working copy the ops read */
}
