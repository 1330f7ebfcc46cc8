/* Staging: what a checkpoint writes is copied out of the live arenas (by
 * the training thread, or deferred to the writer while the next
 * forward/backward runs), and the activations the trainer hands over are
 * copied into the job's buffer. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_internal.h"

/* Copies what this rank writes from the live arenas into the staging buffer
 * (sharded ZeRO-1 moments excepted: ckpt_stage_moments brought them). */
void ckpt_copy_to_stage(ckpt_session *s, int parallel) {
  const tensor_registry *reg = s->reg;
  for (int i = 0; i < s->nent; i++) {
    const ckpt_entry *e = &s->ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      if (e->stage_off[c] == CKPT_NO_STAGE || (c != 0 && registry_moments_sharded(reg))) continue;
      const tensor_desc *t = &reg->tensors[e->local];
      const size_t rf = ckpt_row_floats(t), at = t->arena_offset + (size_t)e->r0[c] * rf;
      const float *src = c == 0 ? reg->arena[TENSOR_PARAMS] + at : registry_moment_at(reg, ckpt_category_arena[c], at);
      float *dst = s->stage + e->stage_off[c];
      const size_t n = (size_t)(e->r1[c] - e->r0[c]) * rf, blk = (size_t)1 << 18;
      if (parallel && n > blk) {
        const long nb = (long)((n + blk - 1) / blk);
#pragma omp parallel for schedule(static)
        for (long b = 0; b < nb; b++) {
          const size_t o = (size_t)b * blk, k = n - o < blk ? n - o : blk;
          memcpy(dst + o, src + o, k * sizeof(float));
        }
      } else {
        memcpy(dst, src, n * sizeof(float));
      }
    }
  }
}

/* ---- ZeRO-1 moments --------------------------------------------------------------
 * Each replica holds one chunk of the moment arenas; a checkpoint is written
 * in bands of rows per replica (ckpt_band_of). Both are contiguous ranges
 * of the arena index space, so for one tensor the pieces a replica sends
 * to the others are consecutive in its buffer, in replica order: one
 * MPI_Alltoallv per tensor and category moves them (each element once),
 * without a whole copy of the moments anywhere. */

static void intersect(size_t a0, size_t a1, size_t b0, size_t b1, size_t *x0, size_t *x1) {
  *x0 = a0 > b0 ? a0 : b0;
  *x1 = a1 < b1 ? a1 : b1;
  if (*x1 < *x0) *x1 = *x0;
}

void ckpt_exchange_moments(ckpt_session *s, const ckpt_entry *e, int c, float *band, int to_bands) {
  const tensor_registry *reg = s->reg;
  const tensor_desc *t = &reg->tensors[e->local];
  const int dp = s->grid->dp, me = s->grid->dp_rank;
  const size_t rf = ckpt_row_floats(t), t0 = t->arena_offset, t1 = t0 + t->numel, len = reg->mom_end - reg->mom_begin;
  BOOST_ASSERT(reg->mom_shards == dp && reg->mom_begin == len * (size_t)me);
  int *cc = boost_calloc((size_t)dp * 4, sizeof *cc), *cd = cc + dp, *bc = cc + 2 * dp, *bd = cc + 3 * dp;
  size_t m0, m1, mine0, mine1;
  intersect(t0, t1, reg->mom_begin, reg->mom_end, &m0, &m1); /* this tensor in my chunk */
  int64_t a, b;
  ckpt_band_of(e, t, c, me, dp, &a, &b);
  const size_t band0 = t0 + (size_t)a * rf, band1 = t0 + (size_t)b * rf; /* my band */
  for (int k = 0; k < dp; k++) {
    size_t x0, x1;
    ckpt_band_of(e, t, c, k, dp, &a, &b); /* replica k's band against my chunk */
    intersect(t0 + (size_t)a * rf, t0 + (size_t)b * rf, m0, m1, &x0, &x1);
    cc[k] = (int)(x1 - x0);
    cd[k] = x1 > x0 ? (int)(x0 - m0) : 0;
    intersect(band0, band1, len * (size_t)k, len * (size_t)(k + 1), &mine0, &mine1); /* my band against k's chunk */
    bc[k] = (int)(mine1 - mine0);
    bd[k] = mine1 > mine0 ? (int)(mine0 - band0) : 0;
  }
  float no_chunk = 0.0f, no_band = 0.0f; /* distinct: send and receive buffers must not alias */
  float *chunk = m1 > m0 ? registry_moment_at(reg, ckpt_category_arena[c], m0) : &no_chunk;
  if (!band || band1 == band0) band = &no_band;
  if (to_bands)
    MPI_Alltoallv(chunk, cc, cd, MPI_FLOAT, band, bc, bd, MPI_FLOAT, s->dp_comm);
  else
    MPI_Alltoallv(band, bc, bd, MPI_FLOAT, chunk, cc, cd, MPI_FLOAT, s->dp_comm);
  boost_free(cc);
}

void ckpt_stage_moments(ckpt_session *s) {
  if (!registry_moments_sharded(s->reg)) return;
  for (int i = 0; i < s->nent; i++) {
    const ckpt_entry *e = &s->ents[i];
    /* the replicas of one dp group agree on this: they share tp and pp ranks */
    if (e->local < 0 || !e->primary || e->writer_stage != s->grid->pp_rank) continue;
    for (int c = 1; c < CKPT_NUM_CATEGORIES; c++)
      ckpt_exchange_moments(s, e, c, e->stage_off[c] != CKPT_NO_STAGE ? s->stage + e->stage_off[c] : NULL, 1);
  }
}

/* ---- activations ----------------------------------------------------------- */

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
  const size_t bytes = n * (type == CKPT_ACT_I64 ? 8 : 4);
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
