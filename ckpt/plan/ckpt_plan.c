#include "ckpt_plan.h"

#include "check.h"
#include "util.h"
#include "ckpt_h5.h"

const tensor_category ckpt_category_arena[CKPT_NUM_CATEGORIES] = {TENSOR_PARAMS, TENSOR_ADAM_M, TENSOR_ADAM_V};
const char *const ckpt_category_group[CKPT_NUM_CATEGORIES] = {CKPT_GROUP_MODEL, CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V};

int64_t ckpt_entry_numel(const ckpt_entry *e) {
  int64_t n = 1;
  for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
  return n;
}

size_t ckpt_row_floats(const tensor_desc *t) {
  size_t n = 1;
  for (int d = 1; d < t->ndim; d++) n *= (size_t)t->local_shape[d];
  return n;
}

/* Replica k's band of a rank's hyperslab t (local rows [*r0, *r1)): the
 * chunk rows (global multiples of chunk0) the hyperslab touches, cut into dp
 * contiguous ranges, or one chunk row per replica from e->base[c] when there
 * are fewer than dp. The same on every replica of a tp/pp position. */
void ckpt_band_of(const ckpt_entry *e, const tensor_desc *t, int c, int k, int dp, int64_t *r0, int64_t *r1) {
  const int64_t o = t->offset[0], L = t->local_shape[0], c0 = e->chunk0;
  const int64_t u0 = o / c0, units = (o + L + c0 - 1) / c0 - u0;
  int64_t ua, ub; /* this replica's units [ua, ub) */
  if (units >= dp) {
    ua = units * k / dp;
    ub = units * (k + 1) / dp;
  } else {
    const int64_t j = ((int64_t)k - e->base[c] + dp) % dp;
    ua = j < units ? j : units;
    ub = j < units ? j + 1 : units;
  }
  int64_t a = (u0 + ua) * c0 - o, b = (u0 + ub) * c0 - o;
  if (a < 0) a = 0;
  if (b > L) b = L;
  if (b < a) b = a;
  *r0 = a;
  *r1 = b;
}

/* The global hyperslab of local rows [r0, r1) of t. */
void ckpt_band_slab(const tensor_desc *t, int64_t r0, int64_t r1, int64_t *start, int64_t *count) {
  for (int d = 0; d < t->ndim; d++) {
    start[d] = t->offset[d];
    count[d] = t->local_shape[d];
  }
  start[0] += r0;
  count[0] = r1 - r0;
}

/* Base replicas. Greedy over (tensor, category), largest first: a tensor
 * with at least dp chunk rows is spread evenly; a smaller one starts at the
 * least loaded replica. */
static void plan_bases(ckpt_entry *ents, int n, int dp) {
  const int nitems = n * CKPT_NUM_CATEGORIES;
  int *order = boost_calloc((size_t)(nitems ? nitems : 1), sizeof *order);
  for (int i = 0; i < nitems; i++) order[i] = i;
  for (int i = 1; i < nitems; i++) { /* insertion sort: by size desc, index asc */
    int v = order[i], j = i - 1;
    const int64_t nv = ckpt_entry_numel(&ents[v / CKPT_NUM_CATEGORIES]);
    while (j >= 0 && ckpt_entry_numel(&ents[order[j] / CKPT_NUM_CATEGORIES]) < nv) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = v;
  }
  double *load = boost_calloc((size_t)dp, sizeof *load);
  for (int k = 0; k < nitems; k++) {
    ckpt_entry *e = &ents[order[k] / CKPT_NUM_CATEGORIES];
    const int c = order[k] % CKPT_NUM_CATEGORIES;
    const int64_t units = (e->shape[0] + e->chunk0 - 1) / e->chunk0;
    const double size = (double)ckpt_entry_numel(e);
    int best = 0;
    for (int r = 1; r < dp; r++)
      if (load[r] < load[best]) best = r;
    e->base[c] = best;
    if (units >= dp) {
      for (int r = 0; r < dp; r++) load[r] += size / dp;
    } else {
      for (int64_t u = 0; u < units; u++) load[(best + u) % dp] += size / (double)units;
    }
  }
  boost_free(load);
  boost_free(order);
}

size_t ckpt_band_floats(const ckpt_entry *e, const tensor_registry *reg, int c) {
  return ((size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&reg->tensors[e->local]) + 15) & ~(size_t)15;
}

size_t ckpt_plan(ckpt_entry *ents, int n, const tensor_registry *reg, int dp, int dp_rank, int pp_rank) {
  for (int i = 0; i < n; i++) {
    hsize_t ch[TENSOR_MAX_DIMS];
    ckpt_chunk_dims_cut(ents[i].ndim, ents[i].shape, ents[i].cut, ch);
    for (int d = 0; d < ents[i].ndim; d++) ents[i].chunk[d] = (int64_t)ch[d];
    ents[i].chunk0 = ents[i].chunk[0];
  }
  plan_bases(ents, n, dp);
  size_t stage_floats = 0;
  for (int i = 0; i < n; i++) {
    ckpt_entry *e = &ents[i];
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      e->r0[c] = e->r1[c] = 0;
      if (e->local >= 0) ckpt_band_of(e, &reg->tensors[e->local], c, dp_rank, dp, &e->r0[c], &e->r1[c]);
      /* what this rank writes waits in the staging buffer */
      e->stage_off[c] = CKPT_NO_STAGE;
      if (e->local < 0 || !e->primary || e->writer_stage != pp_rank || e->r1[c] <= e->r0[c]) continue;
      e->stage_off[c] = stage_floats;
      stage_floats += ckpt_band_floats(e, reg, c);
    }
  }
  return stage_floats;
}

size_t ckpt_plan_load(ckpt_entry *ents, int n, const tensor_registry *reg) {
  size_t floats = 0;
  for (int i = 0; i < n; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      ckpt_entry *e = &ents[i];
      e->load_off[c] = CKPT_NO_STAGE;
      if (e->local < 0 || e->r1[c] <= e->r0[c]) continue;
      e->load_off[c] = floats;
      floats += ckpt_band_floats(e, reg, c);
    }
  return floats;
}

size_t ckpt_band_rows_floats(const ckpt_entry *e, const tensor_registry *reg, int c) {
  return (size_t)(e->r1[c] - e->r0[c]) * ckpt_row_floats(&reg->tensors[e->local]);
}

void ckpt_file_plan_items(ckpt_file_plan *p, const tensor_registry *reg) {
  const size_t nkeys = (size_t)p->nent * CKPT_NUM_CATEGORIES;
  p->item_key = boost_calloc(nkeys ? nkeys : 1, sizeof *p->item_key);
  p->ntensors = reg->count;
  p->tensor_need = boost_calloc((size_t)(reg->count ? reg->count : 1), sizeof *p->tensor_need);
  p->nitems = 0;
  for (int i = 0; i < p->nent; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const ckpt_entry *e = &p->ents[i];
      if (e->stage_off[c] == CKPT_NO_STAGE) continue;
      p->item_key[p->nitems++] = i * CKPT_NUM_CATEGORIES + c;
      p->tensor_need[e->local] = p->nitems;
    }
  p->load_floats = ckpt_plan_load(p->ents, p->nent, reg);
}

void ckpt_file_plan_free(ckpt_file_plan *p) {
  boost_free(p->ents);
  boost_free(p->item_key);
  boost_free(p->tensor_need);
  p->ents = NULL;
  p->item_key = p->tensor_need = NULL;
  p->nent = p->nitems = 0;
}

size_t ckpt_file_plan_largest_save(const ckpt_file_plan *p, const tensor_registry *reg, int *key) {
  size_t most = 0;
  *key = -1;
  for (int n = 0; n < p->nitems; n++) {
    const int k = p->item_key[n];
    const size_t f = ckpt_band_floats(&p->ents[k / CKPT_NUM_CATEGORIES], reg, k % CKPT_NUM_CATEGORIES);
    if (f > most) most = f, *key = k;
  }
  return most;
}

size_t ckpt_file_plan_largest_load(const ckpt_file_plan *p, const tensor_registry *reg) {
  size_t most = 0;
  for (int i = 0; i < p->nent; i++)
    for (int c = 0; c < CKPT_NUM_CATEGORIES; c++) {
      const ckpt_entry *e = &p->ents[i];
      if (e->load_off[c] != CKPT_NO_STAGE && ckpt_band_rows_floats(e, reg, c) > most)
        most = ckpt_band_rows_floats(e, reg, c);
    }
  return most;
}

float *ckpt_arena_rows(const tensor_store *store, const ckpt_entry *e, int c, int64_t r0) {
  const tensor_desc *t = &store->reg->tensors[e->local];
  const size_t at = t->arena_offset + (size_t)r0 * ckpt_row_floats(t);
  return c == 0 ? store->arena[TENSOR_PARAMS] + at : store_moment_at(store, ckpt_category_arena[c], at);
}

double ckpt_file_plan_raw_bytes(const ckpt_file_plan *p) {
  double raw = 0;
  for (int i = 0; i < p->nent; i++) raw += CKPT_NUM_CATEGORIES * 4.0 * (double)ckpt_entry_numel(&p->ents[i]);
  return raw;
}
