#include "tensor.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rng.h"
#include "log.h"

const char *const tensor_category_names[TENSOR_NUM_CATEGORIES] = {"params", "grads", "adam_m", "adam_v"};

/* Arena offsets (elements, shared by every category) are rounded to 32 so
 * that every tensor starts on a 64-byte line in every arena: the float
 * ones (128 bytes) and the bf16 working copy (64 bytes), whose one-row
 * decode products then read whole lines from the first load on. */
#define TENSOR_ALIGN_ELEMS 32

void registry_init(tensor_registry *reg, int tp_rank, int tp_size) {
  memset(reg, 0, sizeof *reg);
  BOOST_ASSERT(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size);
  reg->tp_rank = tp_rank;
  reg->tp_size = tp_size;
}

void registry_free(tensor_registry *reg) {
  free(reg->tensors);
  memset(reg, 0, sizeof *reg);
}

int registry_add(tensor_registry *reg, const char *name, int ndim, const int64_t *shape, int split_dim,
                 unsigned flags) {
  BOOST_ASSERT(ndim >= 1 && ndim <= TENSOR_MAX_DIMS);
  BOOST_ASSERT(split_dim >= -1 && split_dim < ndim);
  BOOST_ASSERT(strlen(name) < TENSOR_NAME_MAX);
  BOOST_ASSERT(registry_find(reg, name) < 0);
  if (reg->count == reg->capacity) {
    reg->capacity = reg->capacity ? 2 * reg->capacity : 64;
    reg->tensors = boost_realloc(reg->tensors, (size_t)reg->capacity, sizeof *reg->tensors);
  }
  tensor_desc *t = &reg->tensors[reg->count];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = ndim;
  t->split_dim = split_dim;
  t->flags = flags;
  t->numel = 1;
  for (int i = 0; i < ndim; i++) {
    BOOST_ASSERT(shape[i] > 0);
    t->shape[i] = shape[i];
    t->local_shape[i] = shape[i];
    if (i == split_dim) {
      BOOST_ASSERT(shape[i] % reg->tp_size == 0);
      t->local_shape[i] = shape[i] / reg->tp_size;
      t->offset[i] = t->local_shape[i] * reg->tp_rank;
    }
    t->numel *= (size_t)t->local_shape[i];
  }
  t->arena_offset = reg->numel;
  reg->numel += (t->numel + TENSOR_ALIGN_ELEMS - 1) / TENSOR_ALIGN_ELEMS * TENSOR_ALIGN_ELEMS;
  return reg->count++;
}

static int is_moment(int c) { return c == TENSOR_ADAM_M || c == TENSOR_ADAM_V; }

void weights_allocate(tensor_weights *w, const tensor_registry *reg, boost_backend *be) {
  if (!w->params) w->params = boost_be_alloc(be, reg->numel * sizeof(float), "the params arena");
  if (!w->work)
    w->work = be->act_dtype == BOOST_F32 ? (boost_act *)w->params
                                         : boost_be_alloc(be, boost_act_bytes(be, reg->numel), "the working weights");
}

void weights_free(tensor_weights *w, boost_backend *be) {
  if (w->work && (void *)w->work != (void *)w->params) be->mem->free(be, w->work);
  if (w->params) be->mem->free(be, w->params);
  w->params = NULL;
  w->work = NULL;
}

void weights_refresh_work(const tensor_weights *w, const tensor_registry *reg, boost_backend *be) {
  if ((void *)w->work != (void *)w->params) be->ops->to_act(be, w->work, w->params, reg->numel);
}

void weights_upload(tensor_weights *w, const tensor_registry *reg, boost_backend *be, int index, const float *host) {
  be->mem->upload(be, tensor_at(reg, w->params, index), host, reg->tensors[index].numel * sizeof(float));
}

void store_init(tensor_store *st, const tensor_registry *reg, const tensor_weights *w, boost_backend *be) {
  memset(st, 0, sizeof *st);
  st->reg = reg;
  st->be = be;
  st->arena[TENSOR_PARAMS] = w->params;
  st->work = w->work;
  st->mom_end = reg->numel;
}

void store_allocate(tensor_store *st, unsigned category_mask) {
  BOOST_ASSERT(!(category_mask & (1u << TENSOR_PARAMS)));
  for (int c = 0; c < TENSOR_NUM_CATEGORIES; c++)
    if ((category_mask & (1u << c)) && !st->arena[c]) {
      char what[64];
      snprintf(what, sizeof what, "the %s arena", tensor_category_names[c]);
      st->arena[c] = boost_be_alloc(st->be, (is_moment(c) ? st->mom_end - st->mom_begin : st->reg->numel) * sizeof(float),
                                    what);
    }
}

void store_free(tensor_store *st) {
  for (int c = 0; c < TENSOR_NUM_CATEGORIES; c++)
    if (c != TENSOR_PARAMS && st->arena[c]) st->be->mem->free(st->be, st->arena[c]);
  memset(st, 0, sizeof *st);
}

/* cat's place of tensor index, checked to be held whole. */
static float *store_tensor(const tensor_store *st, tensor_category cat, int index) {
  const tensor_desc *t = &st->reg->tensors[index];
  BOOST_ASSERT(st->arena[cat]);
  BOOST_ASSERT(!is_moment(cat) || (t->arena_offset >= st->mom_begin && t->arena_offset + t->numel <= st->mom_end));
  return is_moment(cat) ? store_moment_at(st, cat, t->arena_offset) : store_data(st, cat, index);
}

void store_download(const tensor_store *st, tensor_category cat, int index, float *host) {
  st->be->mem->download(st->be, host, store_tensor(st, cat, index), st->reg->tensors[index].numel * sizeof(float));
}

void store_upload(tensor_store *st, tensor_category cat, int index, const float *host) {
  st->be->mem->upload(st->be, store_tensor(st, cat, index), host, st->reg->tensors[index].numel * sizeof(float));
}

void store_refresh_work(const tensor_store *st) {
  const tensor_weights w = {st->arena[TENSOR_PARAMS], st->work};
  weights_refresh_work(&w, st->reg, st->be);
}

void store_shard_moments(tensor_store *st, int shards, int rank) {
  const size_t numel = st->reg->numel;
  BOOST_ASSERT(shards >= 1 && rank >= 0 && rank < shards && numel % (size_t)shards == 0);
  BOOST_ASSERT(!st->arena[TENSOR_ADAM_M] && !st->arena[TENSOR_ADAM_V]);
  const size_t chunk = numel / (size_t)shards;
  st->mom_shards = shards;
  st->mom_begin = chunk * (size_t)rank;
  st->mom_end = st->mom_begin + chunk;
}

int registry_find(const tensor_registry *reg, const char *name) {
  for (int i = 0; i < reg->count; i++)
    if (strcmp(reg->tensors[i].name, name) == 0) return i;
  return -1;
}

int64_t tensor_global_numel(const tensor_desc *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

void store_print_memory(const tensor_store *st, const char *prefix) {
  const tensor_registry *reg = st->reg;
  for (int c = 0; c < TENSOR_NUM_CATEGORIES; c++) {
    if (!st->arena[c]) continue;
    const size_t n = is_moment(c) ? st->mom_end - st->mom_begin : reg->numel;
    char zero1[64] = "";
    if (is_moment(c) && store_moments_sharded(st)) snprintf(zero1, sizeof zero1, "; ZeRO-1: 1/%d of %zu", st->mom_shards, reg->numel);
    boost_log_info("%s%-8s %9.2f MiB  (%d tensors, %zu floats%s)", prefix, tensor_category_names[c],
                   (double)n * sizeof(float) / (1 << 20), reg->count, n, zero1);
  }
}

void tensor_init_values(const tensor_desc *t, uint64_t seed, float *w) {
  if (t->flags & TENSOR_INIT_ONES) {
    for (size_t j = 0; j < t->numel; j++) w[j] = 1.0f;
    return;
  }
  const uint64_t key = rng_mix64(seed) ^ rng_hash_str(t->name);
  /* Local element j -> its global row-major index, dimension by dimension. */
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < t->numel; j++) {
    size_t rem = j;
    uint64_t global = 0, stride = 1;
    for (int dim = t->ndim - 1; dim >= 0; dim--) {
      uint64_t coord = rem % (size_t)t->local_shape[dim] + (uint64_t)t->offset[dim];
      rem /= (size_t)t->local_shape[dim];
      global += coord * stride;
      stride *= (uint64_t)t->shape[dim];
    }
    w[j] = (float)(t->init_std * rng_normal(key, global));
  }
}
