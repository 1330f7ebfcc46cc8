/* What boost-reshard's rewrite shares between its serial path
 * (boost_reshard.c) and its parallel one under mpirun (reshard_parallel.c). */
#ifndef BOOST_RESHARD_REWRITE_H
#define BOOST_RESHARD_REWRITE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_slab.h"
#include "model.h"
#include "reshard.h"
#include "reshard_rank.h"
#include "status.h"

/* One rewrite of IN into OUT. */
typedef struct {
  hid_t in, out;
  const model *m;
  const options *o;
  int level;
  size_t done, total;
  uint64_t reserve_bytes; /* OUT's expected size, reserved before any write */
  long global_batch;      /* IN's global batch: kept, or recorded when IN predates the attribute */
  const rank_change *ranks; /* --rank: the tensors it converts (NULL: none) */
  const char *config;       /* --rank: OUT's stored config (the new ranks) */
  ckpt_slab_reader *sr;     /* IN's tensors, decoded on this rank's cores */
  boost_status err;
} rewrite;

/* Chunk dims of a tensor aligned to its shards: the default rule applied to
 * one shard's shape, with every extent a divisor of the shard's. */
void reshard_aligned_chunk(const tensor_desc *t, int ndim, const int64_t *shape, hsize_t *chunk);
/* The progress line on stderr (unless --quiet): what, done of total. */
void reshard_progress(const options *o, size_t done, size_t total, const char *what);
/* OUT's space reserved on rank 0 before any write (a full disk fails here). */
int reshard_reserve_out(rewrite *r, const char *tmp);
/* OUT's root attributes and groups, IN's unknown attributes copied. */
int reshard_write_root(rewrite *r, tp_mode mode);
/* The parallel rewrite: every rank writes its band of every tensor
 * collectively, rank 0 copies the rest (reshard_parallel.c). */
int reshard_write_out_parallel(rewrite *r, const char *tmp, tp_mode mode);

#endif
