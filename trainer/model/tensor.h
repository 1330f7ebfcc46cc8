/* Tensor registry: named tensors with global logical shapes, carved from one
 * arena per category.
 *
 * Every parameter is described once (name, global shape, how it is sharded
 * over tensor-parallel ranks); its gradient and both AdamW moments live at the
 * same offset in their own arenas. Parallelism and checkpoints address tensors
 * only through these descriptors: a rank holds the hyperslab
 * [offset, offset + local_shape) of each global tensor it owns.
 */
#ifndef BOOST_TENSOR_H
#define BOOST_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define TENSOR_MAX_DIMS 4
#define TENSOR_NAME_MAX 96

typedef enum {
  TENSOR_PARAMS = 0,
  TENSOR_GRADS,
  TENSOR_ADAM_M,
  TENSOR_ADAM_V,
  TENSOR_NUM_CATEGORIES
} tensor_category;

extern const char *const tensor_category_names[TENSOR_NUM_CATEGORIES];

enum {
  TENSOR_DECAY = 1u << 0,    /* AdamW weight decay applies (matrices) */
  TENSOR_INIT_ONES = 1u << 1, /* initialised to 1 (norm gains), not drawn */
};

typedef struct {
  char name[TENSOR_NAME_MAX]; /* global logical name, e.g. "layers.3.attn.q.A" */
  int ndim;
  int64_t shape[TENSOR_MAX_DIMS];       /* global logical shape */
  int split_dim;                        /* dim split over tp ranks, -1 = replicated */
  int64_t offset[TENSOR_MAX_DIMS];      /* this rank's hyperslab start */
  int64_t local_shape[TENSOR_MAX_DIMS]; /* this rank's hyperslab extent */
  size_t numel;                         /* local element count */
  size_t arena_offset;                  /* in floats, same in every category */
  unsigned flags;
  float init_std;                       /* normal(0, init_std) at init */
} tensor_desc;

/* The descriptors: what every rank agrees on about a layout (names, global
 * shapes, this rank's hyperslabs, arena offsets). No memory: the parameter
 * arena belongs to the weights (tensor_weights), the gradient and moment
 * arenas to the training state; a tensor_store gathers them for the code
 * that moves every category (checkpoints). */
typedef struct {
  tensor_desc *tensors;
  int count, capacity;
  int tp_rank, tp_size; /* how split_dim is divided */
  size_t numel;         /* local floats per category (every arena's index space) */
} tensor_registry;

void registry_init(tensor_registry *reg, int tp_rank, int tp_size);
void registry_free(tensor_registry *reg);

/* Declare a tensor; returns its index. split_dim must divide evenly over
 * tp_size (callers validate layouts first; this asserts). */
int registry_add(tensor_registry *reg, const char *name, int ndim, const int64_t *shape, int split_dim,
                 unsigned flags);

/* The weights of a registry: the float parameter arena (backend memory,
 * reg->numel floats, zeroed at allocation) and the working copy in the
 * backend's act_dtype that the ops read (the float arena itself when that
 * is float). */
typedef struct {
  float *params;
  boost_act *work;
} tensor_weights;

void weights_allocate(tensor_weights *w, const tensor_registry *reg, boost_backend *be);
void weights_free(tensor_weights *w, boost_backend *be);
/* The working copy follows the float parameters (after an init, a load or an update). */
void weights_refresh_work(const tensor_weights *w, const tensor_registry *reg, boost_backend *be);
/* Host -> backend copy of tensor index's local hyperslab of the parameters. */
void weights_upload(tensor_weights *w, const tensor_registry *reg, boost_backend *be, int index, const float *host);

/* Every category's arena over one registry, for the code that moves them
 * all (checkpoints, the local level, tests): the parameters and working
 * copy are the weights' (not owned here), the gradients and moments the
 * training state's (model_train owns them; NULL where not held).
 *
 * The AdamW moment arenas hold the floats [mom_begin, mom_end) of the arena
 * index space: everything (0, numel) unless ZeRO-1 shards them over
 * mom_shards data-parallel replicas, each holding one equal chunk. */
typedef struct {
  const tensor_registry *reg;
  boost_backend *be;
  float *arena[TENSOR_NUM_CATEGORIES];
  boost_act *work;
  size_t mom_begin, mom_end;
  int mom_shards;
} tensor_store;

/* A store over reg and w (params and working copy) in be's memory: no
 * gradients or moments yet, the moment range everything. */
void store_init(tensor_store *st, const tensor_registry *reg, const tensor_weights *w, boost_backend *be);
/* Allocate (zeroed) the gradient and moment arenas whose bit is set in
 * mask, e.g. (1 << TENSOR_GRADS). The moment arenas get mom_end - mom_begin
 * floats (all of numel unless sharded). Never the parameters. */
void store_allocate(tensor_store *st, unsigned category_mask);
/* Frees what store_allocate allocated (never the weights). */
void store_free(tensor_store *st);

/* ZeRO-1: the moments are split into `shards` equal chunks of the (padded)
 * arena, this replica holding chunk `rank`. numel must be a multiple of
 * shards. Before the moments are allocated. */
void store_shard_moments(tensor_store *st, int shards, int rank);

/* Whether the moment arenas hold only a chunk. */
static inline int store_moments_sharded(const tensor_store *st) { return st->mom_shards > 1; }

/* The moment arena of category cat (TENSOR_ADAM_M or TENSOR_ADAM_V) at arena
 * index `at`, which must lie in [mom_begin, mom_end). */
static inline float *store_moment_at(const tensor_store *st, tensor_category cat, size_t at) {
  return st->arena[cat] + (at - st->mom_begin);
}

/* The initial values of tensor t's local hyperslab into host memory
 * (t->numel floats): normal(0, init_std) as a function of (seed, tensor
 * name, global element index) only, so any sharding yields the same global
 * values; 1 for TENSOR_INIT_ONES. */
void tensor_init_values(const tensor_desc *t, uint64_t seed, float *host);

/* Host <-> backend copies of one tensor's local hyperslab (cat's arena; the
 * moments must hold it whole) and the refresh of the working copy from the
 * float parameters, all through the store's backend. */
void store_download(const tensor_store *st, tensor_category cat, int index, float *host);
void store_upload(tensor_store *st, tensor_category cat, int index, const float *host);
void store_refresh_work(const tensor_store *st);

/* -1 when absent. */
int registry_find(const tensor_registry *reg, const char *name);

/* A tensor's place in an arena of its registry (backend memory: an address,
 * not for the host), and in a working copy. */
static inline float *tensor_at(const tensor_registry *reg, float *arena, int index) {
  return arena + reg->tensors[index].arena_offset;
}
static inline float *store_data(const tensor_store *st, tensor_category cat, int index) {
  return tensor_at(st->reg, st->arena[cat], index);
}
static inline boost_act *weights_work(const tensor_weights *w, const tensor_registry *reg, const boost_backend *be,
                                      int index) {
  return boost_act_at(be, w->work, reg->tensors[index].arena_offset);
}

/* Global element count of a tensor. */
int64_t tensor_global_numel(const tensor_desc *t);

/* Print one line per category held with MiB, e.g. to the start-up log. */
void store_print_memory(const tensor_store *st, const char *prefix);

/* The part of tensor t inside the arena range [begin, end), as [*lo, *hi)
 * arena offsets; 0 when they do not meet. */
static inline int tensor_clip_range(const tensor_desc *t, size_t begin, size_t end, size_t *lo, size_t *hi) {
  *lo = t->arena_offset > begin ? t->arena_offset : begin;
  *hi = t->arena_offset + t->numel < end ? t->arena_offset + t->numel : end;
  return *lo < *hi;
}

#endif
