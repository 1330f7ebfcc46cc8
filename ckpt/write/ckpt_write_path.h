/* The two ways a checkpoint file is written, behind one small interface,
 * with the same file as the result (datasets, pipeline, chunk shapes):
 *  - collective (ckpt_write_collective.c): every rank creates every dataset
 *    through MPI-IO; ranks with data select their hyperslab, the others
 *    nothing (filtered parallel writes are collective), and HDF5 runs the
 *    filters;
 *  - direct (ckpt_write_direct.c, over ckpt_direct.h): rank 0 alone holds
 *    the file in HDF5, every rank encodes its own chunks and writes them
 *    where rank 0 placed them. It needs every chunk to come from one rank,
 *    which the chunk shapes give on every layout; it says so before a file
 *    (prepare) or the file goes the collective way.
 * ckpt_write.c lays out the file (groups, attributes, tensors, state,
 * activations) the same way through either. */
#ifndef BOOST_CKPT_WRITE_PATH_H
#define BOOST_CKPT_WRITE_PATH_H

#include <hdf5.h>
#include <stdint.h>

#include "ckpt_agree.h"
#include "ckpt_direct.h"
#include "ckpt_internal.h"
#include "ckpt_jobs.h"
#include "ckpt_plan.h"
#include "ckpt_stage.h"
#include "ckpt_worker.h"

/* What a file is written with (the writer's parts, lent for one file). */
typedef struct {
  const ckpt_team *team;
  const ckpt_file_plan *plan;
  ckpt_stager *st;
  ckpt_worker *pace; /* how many threads may encode now */
  ckpt_direct *dx;   /* the direct path's scratch, kept across files */
  int level;         /* zstd */
  int direct_write;  /* the direct path may be taken */
  double reserve_bytes; /* rank 0 reserves this much before writing (0: no reservation) */
} ckpt_write_setup;

/* One dataset: global shape, chunk shape of a filtered one (NULL:
 * contiguous, no filters), this rank's hyperslab (count NULL: none) and its
 * data, its checksum attribute (NULL: put later), its size class (-1: not
 * counted). */
typedef struct {
  hid_t loc;
  const char *path, *name;
  hid_t ftype, mtype;
  int ndim;
  const int64_t *gshape, *chunk, *start, *count;
  const void *buf;
  const uint64_t *checksum;
  int kind;
} ckpt_dataset;

typedef struct ckpt_write_path ckpt_write_path;

/* One file being written (writer thread). */
typedef struct {
  const ckpt_write_path *how;
  const ckpt_write_setup *ws;
  int holds_file; /* this rank makes the HDF5 calls of groups, attributes and small datasets */
  hid_t file, dxpl;
  int ok; /* this rank has not failed yet */
  boost_status err; /* the first failure of this rank, handed to the caller at the end */
  save_result *r;
  int fd;        /* direct: this rank's descriptor of the file */
  int next_item; /* direct: the next dataset of prepare's list */
  int placed_ok; /* direct: the verdict of the last placement of chunks */
} ckpt_file_writer;

struct ckpt_write_path {
  const char *name;
  /* Before a file (collective): whether this path takes it. */
  int (*prepare)(ckpt_file_writer *w, const save_job *j);
  /* The file, and this rank's way into it (sets holds_file and dxpl). */
  void (*create)(ckpt_file_writer *w, const char *path);
  void (*dataset)(ckpt_file_writer *w, const ckpt_dataset *d);
  /* A dataset this rank cannot describe: its place, passed with the failure. */
  void (*skip)(ckpt_file_writer *w);
  /* After a dataset: whether every rank goes on. */
  int (*go_on)(ckpt_file_writer *w);
  /* Every rank's data in, the file closed (go: nothing failed so far). */
  void (*finish)(ckpt_file_writer *w, const char *path, int go);
};

extern const ckpt_write_path ckpt_write_collective, ckpt_write_direct;

/* The first failure of this rank, with HDF5's reason. */
void ckpt_wfail(ckpt_file_writer *w, const char *fmt, const char *arg);
/* A dataset created and written through HDF5 by the ranks that hold the
 * file (filtered ones through its filter pipeline). */
void ckpt_write_dataset_h5(ckpt_file_writer *w, const ckpt_dataset *d);

#endif
