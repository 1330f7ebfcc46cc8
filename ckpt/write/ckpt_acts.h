/* The activations a save stores (ckpt.activations): the set a save request
 * carries, filled by the run (ckpt.h declares what it calls), as the writer
 * reads it. */
#ifndef BOOST_CKPT_ACTS_H
#define BOOST_CKPT_ACTS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

#define ACT_NAME_MAX 112

/* An activation dataset's global description (identical on every rank; also
 * what the pipeline stages exchange). */
typedef struct {
  char name[ACT_NAME_MAX];
  int32_t type, ndim; /* type: ckpt_act_type */
  int64_t shape[3];
} act_desc;

/* One activation dataset of a checkpoint; when `has`, this rank writes the
 * hyperslab [start, start + count) from byte offset `off` of the job's
 * buffer (row-major). */
typedef struct {
  act_desc d;
  int has;
  int64_t start[3], count[3];
  size_t off;
  int64_t chunk[3]; /* the dataset's chunk shape, set by the writer (one writer per chunk) */
} act_item;

struct ckpt_acts_sink {
  int nact, act_cap;
  act_item *acts;
  unsigned char *act_buf;
  size_t act_bytes, act_buf_cap;
  int act_B, act_T;
  int failed; /* out of memory: the checkpoint fails, training goes on */
};

void ckpt_acts_reset(ckpt_acts_sink *k);
void ckpt_acts_free(ckpt_acts_sink *k);
/* What `from` holds moved into `into`; `from` left empty, with the
 * buffers `into` had (no copy, no allocation at a save). */
void ckpt_acts_take(ckpt_acts_sink *into, ckpt_acts_sink *from);
/* The dataset list as the union over pipeline stages, in stage order. */
void ckpt_acts_union(ckpt_acts_sink *k, MPI_Comm pp_comm);

#endif
