/* The checkpoint's tensor table from every rank's registry: the union of
 * the pipeline stages' tensors and which tensor-parallel rank writes each
 * hyperslab (collectives over the grid's pp and tp groups), then the pure
 * plan (ckpt_plan.c). */
#include <limits.h>
#include <string.h>

#include "check.h"
#include "ckpt_h5.h"
#include "ckpt_table.h"
#include "util.h"

typedef struct {
  char name[TENSOR_NAME_MAX];
  int32_t ndim, stage;
  int64_t shape[TENSOR_MAX_DIMS];
} packed_desc;

/* Every stage's tensors (pp = 1: just ours) as one list of global tensors
 * in stage order; a tensor two stages hold (tied embeddings) once. */
static int gather_union(ckpt_file_plan *p, const process_grid *g, const tensor_registry *reg, boost_status *err) {
  int bad_name = 0;
  packed_desc *mine = boost_calloc((size_t)(reg->count ? reg->count : 1), sizeof *mine);
  for (int i = 0; i < reg->count; i++) {
    const tensor_desc *t = &reg->tensors[i];
    if (strchr(t->name, '/')) /* reported after the collectives, which every rank must join */
      bad_name = boost_err(err, "tensor name '%s' contains '/' (not allowed in a checkpoint)", t->name);
    memcpy(mine[i].name, t->name, sizeof mine[i].name);
    mine[i].ndim = t->ndim;
    mine[i].stage = g->pp_rank;
    for (int d = 0; d < t->ndim; d++) mine[i].shape[d] = t->shape[d];
  }
  /* Gather every stage's descriptors along the pipeline (pp = 1: just ours). */
  int pp = 1;
  MPI_Comm_size(g->pp_comm, &pp);
  int *counts = boost_calloc((size_t)pp, sizeof *counts), *displs = boost_calloc((size_t)pp, sizeof *displs);
  int nbytes = reg->count * (int)sizeof(packed_desc);
  MPI_Allgather(&nbytes, 1, MPI_INT, counts, 1, MPI_INT, g->pp_comm);
  int total = 0;
  for (int i = 0; i < pp; i++) {
    displs[i] = total;
    total += counts[i];
  }
  packed_desc *all = boost_calloc((size_t)total / sizeof(packed_desc) + 1, sizeof *all);
  MPI_Allgatherv(mine, nbytes, MPI_BYTE, all, counts, displs, MPI_BYTE, g->pp_comm);
  const int nall = total / (int)sizeof(packed_desc);
  int bad = bad_name;
  p->ents = boost_calloc((size_t)(nall ? nall : 1), sizeof *p->ents);
  p->nent = 0;
  for (int i = 0; i < nall; i++) {
    int dup = -1;
    for (int j = 0; j < p->nent; j++)
      if (strcmp(p->ents[j].name, all[i].name) == 0) dup = j;
    if (dup >= 0) { /* a tensor two stages hold (tied embeddings): same shape */
      for (int d = 0; d < all[i].ndim; d++)
        if (all[i].shape[d] != p->ents[dup].shape[d])
          bad = bad ? bad : boost_err(err, "tensor %s has different shapes on two pipeline stages", all[i].name);
      continue;
    }
    ckpt_entry *e = &p->ents[p->nent++];
    memcpy(e->name, all[i].name, sizeof e->name);
    e->ndim = all[i].ndim;
    e->writer_stage = all[i].stage;
    for (int d = 0; d < e->ndim; d++) e->shape[d] = all[i].shape[d];
    e->local = registry_find(reg, e->name);
  }
  boost_free(all);
  boost_free(counts);
  boost_free(displs);
  boost_free(mine);
  return bad;
}

/* Replication inside the tensor-parallel group (split_dim -1, or any
 * hyperslab two tp ranks share): only the lowest tp rank holding a given
 * hyperslab writes and hashes it. */
static int mark_primary(ckpt_file_plan *p, const process_grid *g, const tensor_registry *reg, boost_status *err) {
  {
    int tpn = 1;
    MPI_Comm_size(g->tp_comm, &tpn);
    int cnt = reg->count, cmin = cnt, cmax = cnt;
    MPI_Allreduce(&cnt, &cmin, 1, MPI_INT, MPI_MIN, g->tp_comm);
    MPI_Allreduce(&cnt, &cmax, 1, MPI_INT, MPI_MAX, g->tp_comm);
    if (cmin != cmax)
      return boost_err(err, "tensor-parallel ranks of one stage hold different tensor lists (%d vs %d)", cmin, cmax);
    const size_t per = (size_t)(cnt ? cnt : 1) * TENSOR_MAX_DIMS;
    int64_t *offs = boost_calloc(per * (size_t)tpn, sizeof *offs);
    for (int i = 0; i < cnt; i++)
      for (int d = 0; d < reg->tensors[i].ndim; d++) offs[(size_t)g->tp_rank * per + (size_t)i * TENSOR_MAX_DIMS + d] = reg->tensors[i].offset[d];
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, offs, (int)per, MPI_INT64_T, g->tp_comm);
    for (int k = 0; k < p->nent; k++) {
      ckpt_entry *e = &p->ents[k];
      e->primary = 0;
      if (e->local < 0) continue;
      e->primary = 1;
      for (int r = 0; r < g->tp_rank && e->primary; r++)
        if (!memcmp(&offs[(size_t)r * per + (size_t)e->local * TENSOR_MAX_DIMS], &offs[(size_t)g->tp_rank * per + (size_t)e->local * TENSOR_MAX_DIMS],
                    TENSOR_MAX_DIMS * sizeof *offs))
          e->primary = 0;
    }
    boost_free(offs);
  }
  return 0;
}

static void gcd_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const int64_t *a = in;
  int64_t *b = inout;
  for (int i = 0; i < *len; i++) b[i] = ckpt_gcd64(a[i], b[i]);
}

void ckpt_allreduce_gcd(int64_t *v, int n, MPI_Comm comm) {
  MPI_Op op;
  MPI_Op_create(gcd_op, 1, &op);
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, op, comm);
  MPI_Op_free(&op);
}

/* Where the ranks' hyperslabs of each tensor meet (every rank's, over the
 * world), so that its chunks never straddle two writers. */
static void gather_cuts(ckpt_file_plan *p, const process_grid *g, const tensor_registry *reg) {
  int nent = p->nent; /* the same everywhere, unless the table failed: then only the count must match */
  MPI_Allreduce(MPI_IN_PLACE, &nent, 1, MPI_INT, MPI_MAX, g->world);
  const int n = nent * TENSOR_MAX_DIMS;
  int64_t *cut = boost_calloc((size_t)(n ? n : 1), sizeof *cut);
  for (int k = 0; k < p->nent; k++) {
    const ckpt_entry *e = &p->ents[k];
    if (e->local < 0) continue;
    const tensor_desc *t = &reg->tensors[e->local];
    ckpt_chunk_cut_add(e->ndim, e->shape, t->offset, t->local_shape, &cut[(size_t)k * TENSOR_MAX_DIMS]);
  }
  ckpt_allreduce_gcd(cut, n, g->world);
  for (int k = 0; k < p->nent; k++) memcpy(p->ents[k].cut, &cut[(size_t)k * TENSOR_MAX_DIMS], sizeof p->ents[k].cut);
  boost_free(cut);
}

int ckpt_file_plan_build(ckpt_file_plan *p, const process_grid *g, const tensor_registry *reg, boost_status *err) {
  memset(p, 0, sizeof *p);
  int rc = gather_union(p, g, reg, err);
  if (rc == 0) rc = mark_primary(p, g, reg, err);
  gather_cuts(p, g, reg); /* collective: every rank, whatever rc */
  for (int i = 0; rc == 0 && i < reg->count; i++)
    if ((size_t)reg->tensors[i].numel > (size_t)INT_MAX) /* MPI counts of one tensor's exchange on load */
      rc = boost_err(err, "tensor %s has %zu elements on one rank, more than checkpoints handle (2^31 - 1): "
                     "use more tensor-parallel ranks", reg->tensors[i].name, reg->tensors[i].numel);
  if (rc != 0) return -1;
  p->dp = g->dp;
  p->dp_rank = g->dp_rank;
  p->pp_rank = g->pp_rank;
  p->save_floats = ckpt_plan(p->ents, p->nent, reg, g->dp, g->dp_rank, g->pp_rank);
  ckpt_file_plan_items(p, reg);
  return 0;
}
