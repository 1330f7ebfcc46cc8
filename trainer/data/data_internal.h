/* What data.c (sources, splits, samples) and data_shard.c (one shard) share. */
#ifndef BOOST_DATA_INTERNAL_H
#define BOOST_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"

/* One shard, mapped: its header read and checked, its tokens in place. */
typedef struct {
  char *path;
  data_shard_info info;
  const uint8_t *map;
  size_t map_len;
  const uint8_t *tokens;
  int64_t first; /* global index of its first token */
} shard;

/* Maps and checks the shard at path into *s (0, or -1 with err). */
int data_shard_open(const char *path, shard *s, boost_status *err);
void data_shard_unmap(shard *s);

#endif
