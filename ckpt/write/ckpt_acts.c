/* The activations a save stores: the set a save request carries
 * (ckpt.h), its data copied into one growing buffer, and the dataset list
 * made the same on every pipeline stage. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ckpt_acts.h"
#include "util.h"

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

ckpt_acts_sink *ckpt_acts_new(void) { return boost_calloc(1, sizeof(ckpt_acts_sink)); }

void ckpt_acts_delete(ckpt_acts_sink *k) {
  if (!k) return;
  ckpt_acts_free(k);
  free(k);
}

void ckpt_acts_take(ckpt_acts_sink *into, ckpt_acts_sink *from) {
  const ckpt_acts_sink held = *into; /* its buffers go back to `from`, emptied: both keep their capacity */
  *into = *from;
  *from = held;
  ckpt_acts_reset(from);
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
