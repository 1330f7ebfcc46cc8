/* The stager: owns the host staging memory and moves tensors between the
 * arenas (backend memory) and it. On a save it stages this rank's bands --
 * on the training thread at the step boundary, or deferred to the writer
 * thread on the backend's copy stream (from the state at the training
 * thread's last mark()), or in turns through a bounded ring the writer
 * empties as it writes (ckpt.staging_limit) -- and takes each band's
 * checksum as it is staged. On a load it gives the reader where each band
 * is decoded (ckpt_load_stage.c) and, once verified, gathers the replicas'
 * bands into the arenas. ZeRO-1 moments and the replicas' bands move
 * between ranks through the comm layer on host memory (hcomm). It reads the
 * plan, never changes it, and tells the writer thread's hand-over
 * (ckpt_worker.h) how far it has staged. */
#ifndef BOOST_CKPT_STAGE_H
#define BOOST_CKPT_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "ckpt_chunks.h"
#include "ckpt_plan.h"
#include "ckpt_worker.h"
#include "comm.h"
#include "status.h"

/* The save ring. Not bounded: the staging buffer holds every band this
 * rank writes at its plan offset. Bounded: a ring of `floats`; the writer
 * stages bands [w, h) (in the plan's file order) into it, each where it fits
 * (slot, by key), and a band leaves when it is written. item_sum: each
 * band's checksum, taken as it is staged. */
typedef struct {
  int bounded;
  size_t floats;
  int w, h, async;
  size_t *slot;
  uint64_t *item_sum;
} ckpt_save_ring;

/* A streamed load through the staging buffer (CUDA): the bands in it, by
 * key and offset, uploaded when it is full. */
typedef struct {
  int n;
  int *key;
  size_t *at;
  size_t used;
} ckpt_load_ring;

typedef struct {
  const ckpt_file_plan *plan;
  tensor_store *store;       /* the arenas saved and loaded */
  const tensor_registry *reg; /* their descriptors (store->reg) */
  const process_grid *grid;
  ckpt_worker *notify; /* told how far a save has staged */
  comm_ctx hcomm;      /* the data plane on host memory: ZeRO-1 moments, the replicas' bands */
  /* Host memory (the backend's host_alloc): the staging buffer (a save's
   * bands, a load's bands), the exchange buffer (a whole tensor or a ZeRO-1
   * chunk piece, dp > 1) and, with ZeRO-1, a save's copy of this replica's
   * chunks of both moments (mchunk: m then v). */
  float *stage, *xbuf, *mchunk;
  size_t stage_floats, xbuf_floats;
  ckpt_save_ring ring;
  ckpt_load_ring lring;
  /* A load streams into the arenas (moments whole): by the decoders
   * themselves where backend memory is host memory (load_host), else
   * through the staging buffer as a ring. */
  int load_streamed, load_host;
} ckpt_stager;

/* The staging and exchange buffers for plan p; -1 with err when host
 * memory cannot be had or ckpt.staging_limit cannot work (collective over
 * the world: every rank refuses the same limit). */
int ckpt_stager_init(ckpt_stager *st, const ckpt_file_plan *p, tensor_store *store, const process_grid *grid,
                     const ckpt_settings *cfg, ckpt_worker *notify, boost_status *err);
/* The data plane over the writer thread's duplicates of the world and
 * data-parallel communicators. */
void ckpt_stager_connect(ckpt_stager *st, MPI_Comm world, MPI_Comm dp);
void ckpt_stager_free(ckpt_stager *st);
int ckpt_stager_bounded(const ckpt_stager *st);

/* What this rank writes, from the arenas into host memory through the
 * backend: synchronously (the training thread at the step boundary) or, when
 * async, on the copy stream from the state at the training thread's last
 * mark() (the writer thread, before it lets the optimizer go on). Its bands
 * go to the staging buffer; with ZeRO-1 its moment chunks go whole to
 * mchunk, for ckpt_stage_moments. */
void ckpt_copy_to_stage(ckpt_stager *st, int async);
/* ZeRO-1, after ckpt_copy_to_stage: the moment bands this rank writes, from
 * the chunk owners' host copies (one all-to-all per tensor and moment over
 * hcomm). Collective over dp; nothing when the moments are whole. */
void ckpt_stage_moments(ckpt_stager *st);
/* The start of a save job (writer thread). Not bounded: the deferred copy
 * of everything (async), training let go, ZeRO-1 moments gathered, every
 * band hashed. Bounded: the ring filled as far as it goes. */
void ckpt_ring_begin(ckpt_stager *st, int async);
/* Band (i, c), this rank's, in the ring: stages ahead until it is (the
 * bands before it must have been released). */
float *ckpt_ring_take(ckpt_stager *st, int i, int c);
/* Band (i, c) is written: its room goes to the next ones. */
void ckpt_ring_release(ckpt_stager *st, int i, int c);
/* The bands' checksums taken as they were staged, by key. */
const uint64_t *ckpt_ring_sums(const ckpt_stager *st);
/* A verified load into the arenas: the replicas' bands all-gathered, ZeRO-1
 * moment bands sent to the chunk owners, uploaded, the working copy
 * refreshed (training thread; collective over dp). */
void ckpt_upload_loaded(ckpt_stager *st);

/* ckpt_load_stage.c (writer thread): a candidate's load begins (the ring
 * empty) and ends; where band (entry i, category c) is decoded (NULL with
 * err when a full ring's upload failed); the ring's bands uploaded after
 * the decoders are done (-1 with err: a chunk did not decode). */
void ckpt_load_begin(ckpt_stager *st);
void ckpt_load_end(ckpt_stager *st);
float *ckpt_load_dst(ckpt_stager *st, ckpt_chunk_reader *cr, int i, int c, boost_status *err);
int ckpt_load_flush(ckpt_stager *st, ckpt_chunk_reader *cr, boost_status *err);

#endif
