/* The write/read plan of a checkpoint: which global tensors it holds, which
 * rank writes which part of each, and where that part waits in the staging
 * buffer. Pure logic over global shapes and this rank's registry: no MPI, no
 * HDF5 (ckpt_table.c gathers its inputs across ranks).
 *
 * Data-parallel replicas hold the same tensors; each replica writes a
 * different band of every tensor: the rows (first dimension) of its
 * hyperslab cut at the dataset's chunk boundaries into dp contiguous bands,
 * so that inside every collective write all replicas compress their own
 * chunks at once. A tensor with fewer chunk rows than replicas goes, chunk
 * row by chunk row, to the replicas from a `base` replica chosen by a greedy
 * balance of bytes (from global shapes only: every rank computes the same
 * plan). Inside a replica every tensor/pipeline rank writes its own
 * hyperslab; of tensor-parallel ranks holding the same hyperslab only the
 * lowest (`primary`) writes. Loading mirrors it: each replica reads its
 * bands, then the replicas all-gather them. */
#ifndef BOOST_CKPT_PLAN_H
#define BOOST_CKPT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* What a checkpoint stores of every tensor. */
typedef enum { CKPT_PARAMS = 0, CKPT_ADAM_M, CKPT_ADAM_V, CKPT_NUM_CATEGORIES } ckpt_category;
extern const tensor_category ckpt_category_arena[CKPT_NUM_CATEGORIES]; /* the registry arena of each */
extern const char *const ckpt_category_group[CKPT_NUM_CATEGORIES];    /* its HDF5 group */

#define CKPT_NO_STAGE SIZE_MAX

/* One global tensor (the union of every pipeline stage's registry). */
typedef struct {
  char name[TENSOR_NAME_MAX];
  int ndim;
  int64_t shape[TENSOR_MAX_DIMS];
  int writer_stage; /* the first pipeline stage holding it */
  int local;        /* index in this rank's registry, -1 if none */
  int primary;      /* no lower tensor-parallel rank holds the same hyperslab */
  int64_t cut[TENSOR_MAX_DIMS];   /* input: every rank's hyperslab meets the others at multiples of cut[d] (0:
                                     nowhere inside dim d; ckpt_chunk_cut_add) */
  int64_t chunk[TENSOR_MAX_DIMS]; /* the dataset's chunk shape (ckpt_chunk_dims_cut: each chunk has one writer) */
  int64_t chunk0;                 /* chunk[0] */
  int base[CKPT_NUM_CATEGORIES];                /* replica of the first chunk row when there are fewer than dp */
  int64_t r0[CKPT_NUM_CATEGORIES], r1[CKPT_NUM_CATEGORIES]; /* this rank's band: local rows [r0, r1) */
  size_t stage_off[CKPT_NUM_CATEGORIES];        /* what this rank writes: floats into the staging buffer, or CKPT_NO_STAGE */
  size_t load_off[CKPT_NUM_CATEGORIES];         /* what this rank reads on a load (its band of every tensor it
                                                   holds): floats into the staging buffer, or CKPT_NO_STAGE */
} ckpt_entry;

int64_t ckpt_entry_numel(const ckpt_entry *e);

/* Floats per row (dim 0) of a local hyperslab. */
size_t ckpt_row_floats(const tensor_desc *t);

/* Replica k's band of hyperslab t (local rows [*r0, *r1)) for category c. */
void ckpt_band_of(const ckpt_entry *e, const tensor_desc *t, int c, int k, int dp, int64_t *r0, int64_t *r1);

/* Floats this rank's band (e, c) takes in the staging buffer (64-byte
 * aligned). */
size_t ckpt_band_floats(const ckpt_entry *e, const tensor_registry *reg, int c);

/* The global hyperslab of local rows [r0, r1) of t. */
void ckpt_band_slab(const tensor_desc *t, int64_t r0, int64_t r1, int64_t *start, int64_t *count);

/* Completes entries whose name, ndim, shape, cut, writer_stage, local and
 * primary are set: chunk shapes, base replicas, this rank's bands and staging offsets.
 * Returns the staging buffer's size in floats. */
size_t ckpt_plan(ckpt_entry *ents, int n, const tensor_registry *reg, int dp, int dp_rank, int pp_rank);

/* After ckpt_plan: where a load puts this rank's bands (every tensor it
 * holds, written by it or not) in the same staging buffer. Returns the
 * floats that takes. */
size_t ckpt_plan_load(ckpt_entry *ents, int n, const tensor_registry *reg);

/* The plan of this session, immutable once made (ckpt_file_plan_build,
 * ckpt_table.h): the global tensors (entries, with chunk shapes, this
 * rank's bands and their staging offsets), the bands this rank writes in
 * file order, and the floats a save and a load stage. The stager, the
 * writer and the reader read it; none changes it. */
typedef struct {
  ckpt_entry *ents;
  int nent;
  int *item_key; /* the bands this rank writes, in file order: entry * CKPT_NUM_CATEGORIES + category */
  int nitems;
  int *tensor_need; /* per registry tensor: how many bands (in file order) are staged once all of its are */
  int ntensors;
  size_t save_floats, load_floats; /* a save's bands and a load's, at their plan offsets */
  int dp, dp_rank, pp_rank;
} ckpt_file_plan;

/* Fills the item list, tensor_need and the sizes of a plan whose entries
 * ckpt_plan has completed. */
void ckpt_file_plan_items(ckpt_file_plan *p, const tensor_registry *reg);
void ckpt_file_plan_free(ckpt_file_plan *p);
/* Floats of this rank's band (e, c) (no alignment). */
size_t ckpt_band_rows_floats(const ckpt_entry *e, const tensor_registry *reg, int c);
/* This rank's largest band of a save (*key: its key, -1 if none), and of a load. */
size_t ckpt_file_plan_largest_save(const ckpt_file_plan *p, const tensor_registry *reg, int *key);
size_t ckpt_file_plan_largest_load(const ckpt_file_plan *p, const tensor_registry *reg);
/* The arena address of rows [r0, ...) of entry e's tensor in category c
 * (backend memory: never dereferenced on the host). */
float *ckpt_arena_rows(const tensor_store *store, const ckpt_entry *e, int c, int64_t r0);
/* The bytes of every tensor of a checkpoint (parameters and both moments). */
double ckpt_file_plan_raw_bytes(const ckpt_file_plan *p);

#endif
