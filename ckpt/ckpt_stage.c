/* Staging: what a checkpoint writes goes from the arenas (backend memory)
 * into the host staging buffer through the backend's copies -- by the
 * training thread at the step boundary, or deferred to the writer thread on
 * the backend's copy stream while the next forward/backward runs -- and a
 * verified load goes the other way. ZeRO-1 moments and the replicas' bands
 * move between ranks through the comm layer on host memory (s->hcomm). The
 * activations the trainer hands over are copied into the job's buffer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_hash.h"
#include "ckpt_internal.h"

float *ckpt_arena_rows(const ckpt_session *s, const ckpt_entry *e, int c, int64_t r0) {
  const tensor_registry *reg = s->reg;
  const tensor_desc *t = &reg->tensors[e->local];
  const size_t at = t->arena_offset + (size_t)r0 * ckpt_row_floats(t);
  return c == 0 ? reg->arena[TENSOR_PARAMS] + at : registry_moment_at(reg, ckpt_category_arena[c], at);
}

/* The host exchange buffer (ckpt_stage_alloc sized it). */
static float *xbuf(ckpt_session *s, size_t floats) {
  BOOST_ASSERT(floats <= s->xbuf_floats);
  return s->xbuf;
}

/* The bands this rank writes, in file order; returns the largest's floats
 * (*which: its key). */
static size_t list_items(ckpt_session *s, int *which) {
  const size_t nkeys = (size_t)s->nent * CKPT_NUM_CATEGORIES;
  s->item_key = boost_calloc(nkeys ? nkeys : 1, sizeof *s->item_key);
  s->slot = boost_calloc(nkeys ? nkeys : 1, sizeof *s->slot);
  s->item_sum = boost_calloc(nkeys ? nkeys : 1, sizeof *s->item_sum);
  s->tensor_need = boost_calloc((size_t)(s->reg->count ? s->reg->count : 1), sizeof *s->tensor_need);
  size_t most = 0;
  *which = -1;
  s->nitems = 0;
  for (int i = 0; i < s->nent; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const ckpt_entry *e = &s->ents[i];
      const int k = i * CKPT_NUM_CATEGORIES + c;
      s->slot[k] = e->stage_off[c]; /* not bounded: the plan's offsets, always */
      if (e->stage_off[c] == CKPT_NO_STAGE) continue;
      s->item_key[s->nitems++] = k;
      s->tensor_need[e->local] = s->nitems;
      const size_t n = ckpt_band_floats(e, s->reg, c);
      if (n > most) most = n, *which = k;
    }
  return most;
}

/* The limit as given: "25%", "80 KiB", "1000 bytes". */
static void limit_text(const ckpt_session *s, char *out, size_t n) {
  const double b = s->cfg.staging_limit_bytes;
  if (s->cfg.staging_limit_percent > 0) boost_msgf(out, n, "%g%%", s->cfg.staging_limit_percent);
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
static int size_ring(ckpt_session *s, char *err, size_t errlen) {
  int big;
  const size_t most = list_items(s, &big);
  const double limit = s->cfg.staging_limit_bytes > 0 ? s->cfg.staging_limit_bytes / sizeof(float)
                       : s->cfg.staging_limit_percent > 0 ? s->cfg.staging_limit_percent / 100.0 * (double)s->save_floats
                                                          : (double)s->save_floats;
  s->bounded = s->nitems > 0 && limit < (double)s->save_floats;
  s->ring_floats = s->bounded ? (size_t)limit & ~(size_t)15 : 0;
  /* A rank works with a ring of whole 16-float lines that holds its
   * largest band, or with a limit at or above all it writes. */
  const size_t fits = (most + 15) & ~(size_t)15, least = fits < s->save_floats ? fits : s->save_floats;
  const int short_here = s->bounded && s->ring_floats < most;
  double need[3] = {4.0 * (double)least, s->save_floats ? 100.0 * (double)least / (double)s->save_floats : 0, short_here};
  comm_control(s->grid->world, COMM_WORLD, "checkpoint staging limit", need, 3, MPI_DOUBLE, MPI_MAX);
  char lim[64], need_txt[32], all[32], least_txt[160];
  limit_text(s, lim, sizeof lim);
  least_text(need, least_txt, sizeof least_txt);
  ckpt_format_bytes(4.0 * (double)s->save_floats, all, sizeof all);
  if (s->bounded && registry_moments_sharded(s->reg))
    return boost_err(err, errlen,
                     "ckpt.staging_limit=%s is below the %s this rank writes, and bounded staging does not take ZeRO-1 "
                     "moment chunks (parallel.zero) yet: set ckpt.staging_limit=100%% or parallel.zero=false",
                     lim, all);
  if (short_here) {
    ckpt_format_bytes(4.0 * (double)most, need_txt, sizeof need_txt);
    return boost_err(err, errlen,
                     "ckpt.staging_limit=%s is too small: the largest tensor band this rank writes (%s/%s) takes %s "
                     "(%.1f%% of the %s it writes); %s",
                     lim, ckpt_category_group[big % CKPT_NUM_CATEGORIES], s->ents[big / CKPT_NUM_CATEGORIES].name, need_txt,
                     100.0 * (double)most / (double)s->save_floats, all, least_txt);
  }
  if (need[2] > 0)
    return boost_err(err, errlen, "ckpt.staging_limit=%s is too small for another rank's largest tensor band; %s", lim,
                     least_txt);
  return 0;
}

int ckpt_stage_alloc(ckpt_session *s, char *err, size_t errlen) {
  boost_backend *be = s->reg->be;
  s->save_floats = s->stage_floats;
  s->load_floats = ckpt_plan_load(s->ents, s->nent, s->reg);
  if (size_ring(s, err, errlen) != 0) return -1;
  /* A load streams into the arenas unless the moments are ZeRO-1 chunks
   * (ckpt_load_stage.c): through the ring only where the decoders cannot
   * write backend memory, which then holds at least the largest band. */
  s->load_streamed = !registry_moments_sharded(s->reg);
  s->load_host = s->load_streamed && !ckpt_test_hooks_now()->load_ring && be->mem->host_view(be, s->reg->arena[TENSOR_PARAMS]);
  if (s->bounded) s->stage_floats = s->ring_floats;
  else if (!s->load_streamed && s->load_floats > s->stage_floats) s->stage_floats = s->load_floats;
  if (s->load_streamed && !s->load_host && ckpt_load_largest_band(s) > s->stage_floats)
    s->stage_floats = ckpt_load_largest_band(s);
  if (s->grid->dp > 1) /* whole tensors and ZeRO-1 chunk pieces, one at a time */
    for (int i = 0; i < s->reg->count; i++)
      if (s->reg->tensors[i].numel > s->xbuf_floats) s->xbuf_floats = s->reg->tensors[i].numel;
  const size_t mchunk_floats = registry_moments_sharded(s->reg) ? 2 * (s->reg->mom_end - s->reg->mom_begin) : 0;
  /* Allocated and touched now (zero-filled): a checkpoint is always written
   * at the end of a run, and faulting the pages in at the first checkpoint
   * would make its deferred copy outlast the next step. */
  s->stage = s->stage_floats ? be->mem->host_alloc(be, s->stage_floats * sizeof(float)) : NULL;
  s->xbuf = s->xbuf_floats ? be->mem->host_alloc(be, s->xbuf_floats * sizeof(float)) : NULL;
  s->mchunk = mchunk_floats ? be->mem->host_alloc(be, mchunk_floats * sizeof(float)) : NULL;
  if ((s->stage_floats && !s->stage) || (s->xbuf_floats && !s->xbuf) || (mchunk_floats && !s->mchunk))
    return boost_err(err, errlen, "out of host memory for checkpoint staging (%.1f MiB)",
                     4.0 * (double)(s->stage_floats + s->xbuf_floats + mchunk_floats) / (1 << 20));
  return 0;
}

void ckpt_stage_free(ckpt_session *s) {
  boost_backend *be = s->reg->be;
  if (s->stage) be->mem->host_free(be, s->stage);
  if (s->xbuf) be->mem->host_free(be, s->xbuf);
  if (s->mchunk) be->mem->host_free(be, s->mchunk);
  s->stage = s->xbuf = s->mchunk = NULL;
  boost_free(s->item_key);
  boost_free(s->slot);
  boost_free(s->item_sum);
  boost_free(s->tensor_need);
  s->tensor_need = NULL;
  s->item_key = NULL;
  s->slot = NULL;
  s->item_sum = NULL;
}

/* ---- the save ring ------------------------------------------------------------ */

static size_t item_floats(const ckpt_session *s, int k) {
  return ckpt_band_floats(&s->ents[k / CKPT_NUM_CATEGORIES], s->reg, k % CKPT_NUM_CATEGORIES);
}

/* Where n floats fit after the newest staged band (or, wrapping, before the
 * oldest); 0 when they do not fit yet. */
static int ring_place(const ckpt_session *s, size_t n, size_t *at) {
  if (s->ring_w == s->ring_h) {
    *at = 0;
    return n <= s->ring_floats;
  }
  const int old = s->item_key[s->ring_w], young = s->item_key[s->ring_h - 1];
  const size_t lo = s->slot[old], hi = s->slot[young] + item_floats(s, young);
  if (hi > lo) { /* one run [lo, hi): room after it, or from the start */
    *at = hi + n <= s->ring_floats ? hi : 0;
    return hi + n <= s->ring_floats || n <= lo;
  }
  *at = hi; /* wrapped: the room is [hi, lo) */
  return hi + n <= lo;
}

/* Band k from the arenas into the ring at slot[k], hashed. */
static void stage_item(ckpt_session *s, int k) {
  boost_backend *be = s->reg->be;
  const ckpt_entry *e = &s->ents[k / CKPT_NUM_CATEGORIES];
  const int c = k % CKPT_NUM_CATEGORIES;
  const tensor_desc *t = &s->reg->tensors[e->local];
  float *dst = s->stage + s->slot[k];
  const size_t bytes = (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(t) * sizeof(float);
  if (s->ring_async) {
    be->mem->download_async(be, dst, ckpt_arena_rows(s, e, c, e->r0[c]), bytes);
    be->mem->copy_sync(be);
  } else {
    be->mem->download(be, dst, ckpt_arena_rows(s, e, c, e->r0[c]), bytes);
  }
  int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
  ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
  s->item_sum[k] = ckpt_hash_slab32(dst, t->ndim, t->shape, start, count);
}

/* Stages the next bands while they fit; the last one lets training go on. */
static void ring_fill(ckpt_session *s) {
  const int before = s->ring_h;
  size_t at;
  while (s->ring_h < s->nitems && ring_place(s, item_floats(s, s->item_key[s->ring_h]), &at)) {
    const int k = s->item_key[s->ring_h];
    s->slot[k] = at;
    stage_item(s, k);
    s->ring_h++;
    pthread_mutex_lock(&s->sync.mu); /* the optimizer may be waiting for this band */
    s->sync.staged_items = s->ring_h;
    pthread_cond_broadcast(&s->sync.cv);
    pthread_mutex_unlock(&s->sync.mu);
  }
  if (s->ring_h == s->nitems && before < s->nitems) ckpt_signal_staged(s);
}

void ckpt_ring_begin(ckpt_session *s, int async) {
  const size_t nkeys = (size_t)s->nent * CKPT_NUM_CATEGORIES;
  memset(s->item_sum, 0, (nkeys ? nkeys : 1) * sizeof *s->item_sum);
  s->ring_w = s->ring_h = 0;
  s->ring_async = async;
  if (s->bounded) {
    for (size_t k = 0; k < nkeys; k++) s->slot[k] = CKPT_NO_STAGE;
    ring_fill(s);
    return;
  }
  if (async) { /* the copy training waits for before its next update */
    ckpt_copy_to_stage(s, 1);
    ckpt_signal_staged(s);
    ckpt_stage_moments(s); /* ZeRO-1, from the host copies: training goes on meanwhile */
  }
  for (int n = 0; n < s->nitems; n++) {
    const int k = s->item_key[n];
    const ckpt_entry *e = &s->ents[k / CKPT_NUM_CATEGORIES];
    const int c = k % CKPT_NUM_CATEGORIES;
    const tensor_desc *t = &s->reg->tensors[e->local];
    int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
    ckpt_band_slab(t, e->r0[c], e->r1[c], start, count);
    s->item_sum[k] = ckpt_hash_slab32(s->stage + s->slot[k], t->ndim, t->shape, start, count);
  }
  s->ring_h = s->nitems;
}

float *ckpt_ring_take(ckpt_session *s, int i, int c) {
  const int k = i * CKPT_NUM_CATEGORIES + c;
  if (s->bounded) {
    BOOST_ASSERT(s->ring_w < s->nitems && s->item_key[s->ring_w] == k); /* in file order */
    ring_fill(s);
    BOOST_ASSERT(s->ring_h > s->ring_w);
  }
  return s->stage + s->slot[k];
}

void ckpt_ring_release(ckpt_session *s, int i, int c) {
  if (!s->bounded) return;
  BOOST_ASSERT(s->ring_w < s->ring_h && s->item_key[s->ring_w] == i * CKPT_NUM_CATEGORIES + c);
  s->ring_w++;
  ring_fill(s); /* its room to the next bands at once: the optimizer may be waiting for them */
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
static void moment_counts(const ckpt_session *s, const ckpt_entry *e, int c, size_t *cc, size_t *cd, size_t *bc,
                          size_t *bd, size_t *m0, size_t *m1) {
  const tensor_registry *reg = s->reg;
  const tensor_desc *t = &reg->tensors[e->local];
  const int dp = s->grid->dp, me = s->grid->dp_rank;
  const size_t rf = ckpt_row_floats(t), t0 = t->arena_offset, t1 = t0 + t->numel, len = reg->mom_end - reg->mom_begin;
  BOOST_ASSERT(reg->mom_shards == dp && reg->mom_begin == len * (size_t)me);
  intersect(t0, t1, reg->mom_begin, reg->mom_end, m0, m1); /* this tensor in my chunk */
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
 * host copy of its chunk (s->mchunk). Collective over dp. */
static void stage_moment(ckpt_session *s, const ckpt_entry *e, int c, float *band) {
  const int dp = s->grid->dp;
  const size_t len = s->reg->mom_end - s->reg->mom_begin;
  size_t *cnt = boost_calloc((size_t)dp * 4, sizeof *cnt), m0, m1;
  moment_counts(s, e, c, cnt, cnt + dp, cnt + 2 * dp, cnt + 3 * dp, &m0, &m1);
  const float *piece = s->mchunk + (size_t)(c - 1) * len + (m1 > m0 ? m0 - s->reg->mom_begin : 0);
  comm_alltoallv_f32(&s->hcomm, COMM_DP, piece, cnt, cnt + dp, band, cnt + 2 * dp, cnt + 3 * dp);
  boost_free(cnt);
}

/* ZeRO-1: a load's moment band of entry e, category c (host) to the chunk
 * owners, each uploading its piece. Collective over dp. */
static void load_moment(ckpt_session *s, const ckpt_entry *e, int c, const float *band) {
  boost_backend *be = s->reg->be;
  const int dp = s->grid->dp;
  size_t *cnt = boost_calloc((size_t)dp * 4, sizeof *cnt), m0, m1;
  moment_counts(s, e, c, cnt, cnt + dp, cnt + 2 * dp, cnt + 3 * dp, &m0, &m1);
  float *piece = xbuf(s, m1 > m0 ? m1 - m0 : 1);
  comm_alltoallv_f32(&s->hcomm, COMM_DP, band, cnt + 2 * dp, cnt + 3 * dp, piece, cnt, cnt + dp);
  if (m1 > m0)
    be->mem->upload(be, registry_moment_at(s->reg, ckpt_category_arena[c], m0), piece, (m1 - m0) * sizeof(float));
  boost_free(cnt);
}

/* ---- a save: arenas -> staging ----------------------------------------------- */

void ckpt_copy_to_stage(ckpt_session *s, int async) {
  const tensor_registry *reg = s->reg;
  boost_backend *be = reg->be;
  const int sharded = registry_moments_sharded(reg);
  for (int i = 0; i < s->nent; i++) {
    const ckpt_entry *e = &s->ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      if (e->stage_off[c] == CKPT_NO_STAGE || (c != 0 && sharded)) continue;
      const size_t bytes = (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&reg->tensors[e->local]) * sizeof(float);
      if (async) be->mem->download_async(be, s->stage + e->stage_off[c], ckpt_arena_rows(s, e, c, e->r0[c]), bytes);
      else be->mem->download(be, s->stage + e->stage_off[c], ckpt_arena_rows(s, e, c, e->r0[c]), bytes);
    }
  }
  const size_t len = reg->mom_end - reg->mom_begin;
  for (int c = 1; sharded && c < CKPT_NUM_CATEGORIES; c++) { /* ZeRO-1: this replica's chunks, whole */
    float *dst = s->mchunk + (size_t)(c - 1) * len;
    if (async) be->mem->download_async(be, dst, reg->arena[ckpt_category_arena[c]], len * sizeof(float));
    else be->mem->download(be, dst, reg->arena[ckpt_category_arena[c]], len * sizeof(float));
  }
  if (async) be->mem->copy_sync(be);
}

void ckpt_stage_moments(ckpt_session *s) {
  if (!registry_moments_sharded(s->reg)) return;
  for (int i = 0; i < s->nent; i++) {
    const ckpt_entry *e = &s->ents[i];
    /* the replicas of one dp group agree on this: they share tp and pp ranks */
    if (e->local < 0 || !e->primary || e->writer_stage != s->grid->pp_rank) continue;
    for (int c = 1; c < CKPT_NUM_CATEGORIES; c++)
      stage_moment(s, e, c, e->stage_off[c] != CKPT_NO_STAGE ? s->stage + e->stage_off[c] : NULL);
  }
}

/* ---- a verified load: staging -> arenas ------------------------------------- */

/* Band (e, c) of every replica, all-gathered into the whole local tensor
 * on the host, then uploaded (dp = 1: the band is the whole tensor). */
static void load_whole(ckpt_session *s, const ckpt_entry *e, int c, const float *band) {
  boost_backend *be = s->reg->be;
  const tensor_desc *t = &s->reg->tensors[e->local];
  const int dp = s->grid->dp;
  const size_t rf = ckpt_row_floats(t);
  if (dp == 1) {
    if (band) be->mem->upload(be, ckpt_arena_rows(s, e, c, 0), band, t->numel * sizeof(float));
    return;
  }
  size_t *cnt = boost_calloc((size_t)dp * 4, sizeof *cnt);
  int64_t a, b;
  for (int k = 0; k < dp; k++) {
    ckpt_band_of(e, t, c, k, dp, &a, &b);
    cnt[2 * dp + k] = (size_t)(b - a) * rf; /* from replica k: its band, at its rows */
    cnt[3 * dp + k] = (size_t)a * rf;
    if (k == s->grid->dp_rank) /* to every replica: mine */
      for (int q = 0; q < dp; q++) cnt[q] = (size_t)(b - a) * rf;
  }
  float *whole = xbuf(s, t->numel ? t->numel : 1);
  comm_alltoallv_f32(&s->hcomm, COMM_DP, band, cnt, cnt + dp, whole, cnt + 2 * dp, cnt + 3 * dp);
  if (t->numel) be->mem->upload(be, ckpt_arena_rows(s, e, c, 0), whole, t->numel * sizeof(float));
  boost_free(cnt);
}

/* A streamed load's band (e, c), in the arenas already, as host memory
 * (the staging buffer, free again, when backend memory is not host). */
static const float *streamed_band(ckpt_session *s, const ckpt_entry *e, int c) {
  if (e->load_off[c] == CKPT_NO_STAGE) return NULL;
  boost_backend *be = s->reg->be;
  const float *rows = ckpt_arena_rows(s, e, c, e->r0[c]);
  if (s->load_host) return be->mem->host_view(be, rows);
  const size_t n = (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&s->reg->tensors[e->local]);
  BOOST_ASSERT(n <= s->stage_floats);
  be->mem->download(be, s->stage, rows, n * sizeof(float));
  return s->stage;
}

void ckpt_upload_loaded(ckpt_session *s) {
  const int sharded = registry_moments_sharded(s->reg);
  for (int i = 0; i < s->nent; i++) {
    const ckpt_entry *e = &s->ents[i];
    if (e->local < 0) continue;
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const float *staged = e->load_off[c] != CKPT_NO_STAGE ? s->stage + e->load_off[c] : NULL;
      if (c != 0 && sharded) load_moment(s, e, c, staged);
      else if (!s->load_streamed) load_whole(s, e, c, staged);
      else if (s->grid->dp > 1) load_whole(s, e, c, streamed_band(s, e, c));
    }
  }
  registry_refresh_work(s->reg); /* the working copy the ops read */
}

/* ---- activations ----------------------------------------------------------- */

size_t ckpt_act_esize(ckpt_act_type type) { return type == CKPT_ACT_I64 ? 8 : type == CKPT_ACT_BF16 ? 2 : 4; }

static void *acts_alloc(ckpt_acts_sink *k, size_t bytes) {
  size_t off = (k->act_bytes + 63) & ~(size_t)63;
  if (off + bytes > k->act_buf_cap) {
    size_t cap = k->act_buf_cap ? k->act_buf_cap : ((size_t)1 << 20);
    while (cap < off + bytes) cap *= 2;
    unsigned char *p = realloc(k->act_buf, cap);
    if (!p) return NULL;
    k->act_buf = p;
    k->act_buf_cap = cap;
  }
  k->act_bytes = off + bytes;
  return k->act_buf + off;
}

static int acts_grow(ckpt_acts_sink *k) {
  if (k->nact < k->act_cap) return 0;
  const int cap = k->act_cap ? 2 * k->act_cap : 64;
  act_item *p = realloc(k->acts, (size_t)cap * sizeof *p);
  if (!p) return -1;
  k->acts = p;
  k->act_cap = cap;
  return 0;
}

void ckpt_acts_add(ckpt_acts_sink *k, const char *name, ckpt_act_type type, int ndim, const int64_t *shape,
                   const int64_t *start, const int64_t *count, int has, const void *src) {
  if (k->failed || acts_grow(k) != 0) {
    k->failed = 1;
    return;
  }
  act_item *a = &k->acts[k->nact++];
  memset(a, 0, sizeof *a);
  boost_msgf(a->d.name, sizeof a->d.name, "%s", name);
  a->d.type = type;
  a->d.ndim = ndim;
  size_t n = 1;
  for (int d = 0; d < ndim; d++) {
    a->d.shape[d] = shape[d];
    a->start[d] = start[d];
    a->count[d] = count[d];
    n *= (size_t)count[d];
  }
  a->has = has && n > 0;
  if (!a->has) return;
  const size_t bytes = n * ckpt_act_esize(type);
  void *dst = acts_alloc(k, bytes);
  if (!dst) {
    k->failed = 1;
    a->has = 0;
    return;
  }
  a->off = (size_t)((unsigned char *)dst - k->act_buf);
  memcpy(dst, src, bytes);
}

void ckpt_acts_set_batch(ckpt_acts_sink *k, int B, int T) {
  k->act_B = B;
  k->act_T = T;
}

void ckpt_acts_reset(ckpt_acts_sink *k) {
  k->nact = 0;
  k->act_bytes = 0;
  k->failed = 0;
}

void ckpt_acts_free(ckpt_acts_sink *k) {
  free(k->acts);
  free(k->act_buf);
  memset(k, 0, sizeof *k);
}

void ckpt_acts_union(ckpt_acts_sink *j, MPI_Comm pp_comm) {
  /* The dataset list is the union over pipeline stages, in stage order. */
  int pp = 1;
  MPI_Comm_size(pp_comm, &pp);
  if (pp > 1) {
    act_desc *mine = boost_calloc((size_t)(j->nact ? j->nact : 1), sizeof *mine);
    for (int k = 0; k < j->nact; k++) mine[k] = j->acts[k].d;
    int *counts = boost_calloc((size_t)pp, sizeof *counts), *displs = boost_calloc((size_t)pp, sizeof *displs);
    int nb = j->nact * (int)sizeof(act_desc), total = 0;
    MPI_Allgather(&nb, 1, MPI_INT, counts, 1, MPI_INT, pp_comm);
    for (int k = 0; k < pp; k++) displs[k] = total, total += counts[k];
    act_desc *allv = boost_calloc((size_t)total / sizeof(act_desc) + 1, sizeof *allv);
    MPI_Allgatherv(mine, nb, MPI_BYTE, allv, counts, displs, MPI_BYTE, pp_comm);
    const int nall = total / (int)sizeof(act_desc);
    act_item *items = calloc((size_t)(nall ? nall : 1), sizeof *items);
    if (!items) {
      j->failed = 1;
      return;
    }
    int n = 0;
    for (int k = 0; k < nall; k++) {
      int dup = 0;
      for (int q = 0; q < n && !dup; q++) dup = !strcmp(items[q].d.name, allv[k].name);
      if (dup) continue;
      act_item *it = &items[n++];
      it->d = allv[k];
      for (int q = 0; q < j->nact; q++)
        if (!strcmp(j->acts[q].d.name, allv[k].name)) {
          *it = j->acts[q];
          break;
        }
    }
    free(j->acts);
    j->acts = items;
    j->nact = n;
    j->act_cap = nall ? nall : 1;
    boost_free(allv);
    boost_free(counts);
    boost_free(displs);
    boost_free(mine);
  }
}
