/* Shared by the checkpoint package's files; not for other modules.
 *
 * Threads. The training thread stages a checkpoint at a step boundary and
 * hands a job to this rank's writer thread; the writer thread makes every
 * HDF5 call of the process (saves and loads), on s->comm / s->dp_comm,
 * duplicates of the grid's world and data-parallel communicators. They meet
 * under s->sync.mu: `busy` is set from hand-over until the job's result is
 * posted, `staged` once the writer no longer reads the live arenas. */
#ifndef BOOST_CKPT_INTERNAL_H
#define BOOST_CKPT_INTERNAL_H

#include <hdf5.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "ckpt_direct.h"
#include "comm.h"
#include "ckpt_plan.h"
#include "ckpt_test_hooks.h"
#include "util.h"

#define REASON_MAX 1024
#define ACT_NAME_MAX 112

/* Size classes reported in logs and benchmarks. */
typedef enum { SIZE_WEIGHTS = 0, SIZE_MOMENTS, SIZE_ACTS, SIZE_NUM_CLASSES } size_class;
extern const char *const size_class_names[SIZE_NUM_CLASSES];

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

/* The activations of a save job (the sink the trainer's hook fills). */
struct ckpt_acts_sink {
  int nact, act_cap;
  act_item *acts;
  unsigned char *act_buf;
  size_t act_bytes, act_buf_cap;
  int act_B, act_T;
  int failed; /* out of memory: the checkpoint fails, training goes on */
};

typedef struct {
  int64_t step;
  ckpt_meta meta; /* the root attributes: the run's block, then the package's fields */
  ckpt_state state; /* the run's state datasets (a copy) */
  int deferred;                /* the writer copies parameters and moments from the live arenas */
  int oom;                     /* no memory for the copy of the metadata or state: the checkpoint fails */
  double stall_s, wait_prev_s; /* measured by the training thread */
  ckpt_acts_sink acts;
} save_job;

typedef struct {
  int64_t step;
  int ok, valid;
  char reason[REASON_MAX];
  double write_s, write_cpu_s, stall_s, wait_prev_s, update_wait_s;
  /* write_s by phase: checksums + shuffle/zstd + HDF5/MPI-IO writes into the
   * file system; fsync; the read-back verification; rename and retention */
  double encode_s, fsync_s, verify_s, commit_s;
  double raw[SIZE_NUM_CLASSES], stored[SIZE_NUM_CLASSES], file_bytes;
  int direct; /* written by the direct writer (ckpt_direct.h), not HDF5's collective filtered writes */
  char retention[512];
  int latest_ok;
} save_result;

typedef struct {
  int status; /* 1 read and verified (into the arenas, or host staging), 0 nothing loaded, -1 fatal */
  char msg[2048];
  char path[PATH_MAX + 64], skipped[1536]; /* what was loaded; what was passed over, with why */
  double t0;                               /* when the load started */
  ckpt_meta meta;                          /* the loaded file's root attributes */
  ckpt_state state;                        /* its state datasets */
  double bytes_needed, bytes_decoded; /* over all ranks: their bands, and the chunks those touch */
} load_result;

/* The production switches of the environment, read at open (the test
 * switches are ckpt_test_hooks.h's). */
typedef struct {
  int sync_mode;    /* BOOST_CKPT_SYNC=1: save synchronously, the baseline of bench/ */
  int writer_nice;  /* BOOST_CKPT_WRITER_NICE (default 10) */
  int direct_write; /* BOOST_CKPT_DIRECT (default 1): 0 always writes through HDF5's collective filters */
} ckpt_env;

/* What the writer thread and the training thread share, under mu. */
typedef enum { JOB_NONE = 0, JOB_SAVE, JOB_LOAD } job_kind;
typedef struct {
  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job_kind pending; /* taken by the writer */
  int busy, staged, quit;
  int staged_items; /* a bounded ring: the bands staged so far, in file order */
  int trainer_waiting; /* the training thread waits for the job in flight (wait_idle) */
  int res_unreported;
  double update_wait; /* ckpt_before_update's wait for the job in flight */
  double job_started; /* boost_now_s() when the writer took the job in flight, 0 when idle */
  int64_t job_step;
  job_kind job_kind; /* of the job in flight (the watchdog's exit status) */
  pthread_t watchdog;
  int watchdog_started;
} writer_sync;

struct ckpt_session {
  ckpt_settings cfg;
  ckpt_env set;
  const process_grid *grid;
  tensor_registry *reg;
  int read_only; /* no ckpt.dir: only a resume from a PATH */
  int lock_fd;   /* rank 0: the directory's lock (ckpt_fs_lock), -1 elsewhere */
  ckpt_hooks hooks;
  MPI_Comm comm, dp_comm; /* writer thread only */
  int rank, world_size;

  ckpt_entry *ents; /* the plan (ckpt_plan.h) */
  ckpt_direct *direct; /* writer thread: the direct writer's scratch */
  int nent;
  /* Host memory (the backend's host_alloc): the staging buffer (a save's
   * bands, a load's bands), the exchange buffer (a whole tensor or a ZeRO-1
   * chunk piece, dp > 1) and, with ZeRO-1, a save's copy of this replica's
   * chunks of both moments (mchunk: m then v). */
  float *stage, *xbuf, *mchunk;
  size_t stage_floats, xbuf_floats;
  /* The save ring (ckpt_stage.c). What this rank writes is nitems bands
   * (item_key: entry * CKPT_NUM_CATEGORIES + category, in file order). With
   * ckpt.staging_limit at or above them (save_floats) the staging buffer
   * holds them all at their plan offsets, as it always did; below it
   * (`bounded`), the buffer is a ring of ring_floats: the writer stages
   * bands [ring_w, ring_h) into it, each where it fits (slot, by key), and
   * a band leaves when it is written. item_sum: each band's checksum, taken
   * as it is staged. */
  int nitems, bounded, ring_w, ring_h, ring_async;
  /* A load (ckpt_load_stage.c): streamed into the arenas (moments whole),
   * by the decoders themselves where backend memory is host memory
   * (load_host), else through the staging buffer as a ring of bands
   * uploaded when it is full (lring_*: the bands in it, key and offset). */
  int load_streamed, load_host, lring_n;
  int *lring_key;
  size_t *lring_at, lring_used;
  int *item_key;
  int *tensor_need; /* per registry tensor: the bands (in file order) staged once all of its are */
  size_t *slot;
  uint64_t *item_sum;
  size_t save_floats, load_floats, ring_floats;
  comm_ctx hcomm; /* the data plane on host memory over comm / dp_comm: ZeRO-1 moments, the replicas' bands */

  writer_sync sync;
  save_job job;
  save_result res;
  load_result lres;
  int deferred_seen;
  int attempted, last_ok;
  int64_t last_staged_step, last_committed_step;
  save_result last_done; /* for ckpt_last_stats */
  FILE *log;             /* rank 0: <dir>/checkpoints.jsonl */
  double prev_file_bytes, prev_raw_bytes; /* writer thread: the last committed file, for the next reservation */
  char open_note[512];
};

/* ckpt_agree.c (a leaf: calls nothing of the package). Agreement over
 * s->comm (writer thread): every rank learns whether all were ok; if not,
 * `out` gets the message of the lowest failing rank, prefixed with its rank
 * when world_size > 1. */
int ckpt_agree(ckpt_session *s, int ok, const char *mine, char *out, size_t outlen);
int ckpt_all_true(ckpt_session *s, int v);
/* ckpt_table.c: v[i] = the gcd of every rank's v[i] (0 counts as none). */
void ckpt_allreduce_gcd(int64_t *v, int n, MPI_Comm comm);
/* Whether the training thread is waiting for the writer now (synchronous
 * saves, the final save, a save waiting for the previous one). */
int ckpt_trainer_waiting(ckpt_session *s);
/* Threads the writer may use now: all of the rank's while training waits
 * for it, one beside training otherwise. */
int ckpt_work_threads(ckpt_session *s);

/* ckpt_state.c. The checksum of state set k (ckpt_meta.h CKPT_STATE_SETS)
 * as written. */
uint64_t ckpt_state_hash(int k, const ckpt_series *set);
/* Set k of file f read whole into *out (malloc'd), its stored checksum into
 * *stored and the computed one into *sum. A set the file lacks is empty (0,
 * sums 0) unless a resume needs it (CKPT_META_RESUME). -1 with err: missing,
 * misshapen or unreadable. */
int ckpt_state_read(hid_t f, hid_t dxpl, int k, ckpt_series *out, uint64_t *stored, uint64_t *sum, char *err,
                    size_t errlen);

/* ckpt_table.c: the plan from every rank's registry (collective over the
 * grid). Returns -1 with err when the registries disagree. */
int ckpt_build_table(ckpt_session *s, char *err, size_t errlen);
/* ckpt_stage.c. The staging and exchange buffers (after ckpt_build_table);
 * -1 with err when host memory cannot be had. */
int ckpt_stage_alloc(ckpt_session *s, char *err, size_t errlen);
void ckpt_stage_free(ckpt_session *s);
/* What this rank writes, from the arenas into host memory through the
 * backend: synchronously (the training thread at the step boundary) or, when
 * async, on the copy stream from the state at the training thread's last
 * mark() (the writer thread, before it lets the optimizer go on). Its bands
 * go to the staging buffer; with ZeRO-1 its moment chunks go whole to
 * s->mchunk, for ckpt_stage_moments. */
void ckpt_copy_to_stage(ckpt_session *s, int async);
/* The start of a save job (writer thread). Not bounded: the deferred copy
 * of everything (async), training let go, ZeRO-1 moments gathered, every
 * band hashed -- as it always was. Bounded: the ring filled as far as it
 * goes (async: on the copy stream from the last mark()). */
void ckpt_ring_begin(ckpt_session *s, int async);
/* Band (i, c), this rank's, in the ring: stages ahead until it is (the
 * bands before it must have been released). */
float *ckpt_ring_take(ckpt_session *s, int i, int c);
/* Band (i, c) is written: its room goes to the next ones. */
void ckpt_ring_release(ckpt_session *s, int i, int c);
/* ckpt.c: training may update the arenas now (the job no longer reads them). */
void ckpt_signal_staged(ckpt_session *s);
/* ZeRO-1, after ckpt_copy_to_stage: the moment bands this rank writes, from
 * the chunk owners' host copies (comm_alltoallv_f32 over s->hcomm, one per
 * tensor and moment; host memory only, so the writer does it after the
 * optimizer was let go). Collective over dp; nothing when the moments are
 * whole. */
void ckpt_stage_moments(ckpt_session *s);
/* A verified load into the arenas: the replicas' bands all-gathered (the
 * bands already in the arenas when streamed, else in the staging buffer),
 * ZeRO-1 moment bands sent to the chunk owners, uploaded, the working copy
 * refreshed (training thread; collective over dp). */
void ckpt_upload_loaded(ckpt_session *s);
void ckpt_acts_reset(ckpt_acts_sink *k);
void ckpt_acts_free(ckpt_acts_sink *k);
/* The dataset list as the union over pipeline stages, in stage order. */
void ckpt_acts_union(ckpt_acts_sink *k, MPI_Comm pp_comm);
/* ckpt_write.c: the raw (uncompressed) bytes of a checkpoint (j NULL: no
 * activations or history), and the file size to reserve for it. */
double ckpt_raw_bytes(const ckpt_session *s, const save_job *j);
double ckpt_expected_file_bytes(const ckpt_session *s, const save_job *j);
/* ckpt_write.c: the whole file, collectively; returns this rank's ok.
 * sums: this rank's checksums of the loss history and activations; the
 * tensors' are added as their bands are staged, then all summed over the
 * ranks (what ckpt_readback compares with). */
int ckpt_write_file(ckpt_session *s, save_job *j, const char *path, uint64_t *sums, save_result *r, char *err,
                    size_t errlen);
/* ckpt_save.c: checksums, write, commit (writer thread). */
void ckpt_do_save(ckpt_session *s, save_result *r);
/* ckpt_read.c: resume (writer thread): the newest usable candidate read
 * (into the arenas, or host staging: ckpt_load_stage.c) and verified. */
void ckpt_do_load(ckpt_session *s, load_result *lr);
/* The one-line account of a load the arenas now hold (lr->msg). */
void ckpt_load_report(ckpt_session *s, load_result *lr);

/* ckpt_chunks.c: stored chunks read with H5Dread_chunk (one thread: HDF5)
 * and decoded on `threads` threads (zstd, unshuffle, checksum terms). For
 * the hyperslab [st, st + ct) of dataset ds (global shape gshape): its
 * elements into dst (row-major, when not NULL) and their checksum terms
 * summed into *sum. Returns 1, 0 when the dataset's pipeline is not the
 * writer's (read it through H5Dread), -1 with err. The file must be open
 * through a POSIX driver (parallel HDF5 refuses H5Dread_chunk). */
typedef struct ckpt_chunk_reader ckpt_chunk_reader;
ckpt_chunk_reader *ckpt_chunk_reader_new(int threads);
void ckpt_chunk_reader_free(ckpt_chunk_reader *cr);
int ckpt_read_slab_chunks(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                          const hsize_t *ct, float *dst, uint64_t *sum, const char *what, char *err, size_t errlen);
/* The same without waiting for the decoding: returns once the slab's
 * chunks are read (1), so the caller can read the next slab meanwhile;
 * dst and *sum (sum may be NULL) are written by the decoders until
 * ckpt_chunk_reader_wait returns, which reports a chunk that did not
 * decode (-1 with err; 0 when all did). A failure is reported once, by
 * the next call of either (the slabs after it start afresh). */
int ckpt_read_slab_chunks_async(ckpt_chunk_reader *cr, hid_t ds, int ndim, const int64_t *gshape, const hsize_t *st,
                                const hsize_t *ct, float *dst, uint64_t *sum, const char *what, char *err,
                                size_t errlen);
int ckpt_chunk_reader_wait(ckpt_chunk_reader *cr, char *err, size_t errlen);
/* The slab through HDF5's filter pipeline (one thread) into dst, and its
 * checksum terms: the path for what the chunk reader does not take. 0, or
 * -1 with the reason on HDF5's error stack (ckpt_h5_error). ndim at most
 * CKPT_HASH_MAX_DIMS. */
int ckpt_read_slab_hdf5(hid_t ds, hid_t space, int ndim, const int64_t *gshape, const hsize_t *st, const hsize_t *ct,
                        float *dst, uint64_t *sum);

/* The arena address of rows [r0, ...) of entry e's tensor in category c
 * (backend memory: never dereferenced on the host). */
float *ckpt_arena_rows(const ckpt_session *s, const ckpt_entry *e, int c, int64_t r0);
/* ckpt_load_stage.c (writer thread): a candidate's load begins (the ring
 * empty) and ends; where band (entry i, category c) is decoded (NULL with
 * err when a full ring's upload failed); the ring's bands uploaded after
 * the decoders are done (-1 with err: a chunk did not decode); the
 * largest band this rank loads. */
void ckpt_load_begin(ckpt_session *s);
void ckpt_load_end(ckpt_session *s);
float *ckpt_load_dst(ckpt_session *s, ckpt_chunk_reader *cr, int i, int c, char *err, size_t errlen);
int ckpt_load_flush(ckpt_session *s, ckpt_chunk_reader *cr, char *err, size_t errlen);
size_t ckpt_load_largest_band(const ckpt_session *s);

/* ckpt_readback.c: every rank reads back, decodes and hashes the bands it
 * wrote to the closed file at path and compares the sums with `sums`
 * (collective). Returns this rank's ok; err says what failed. */
int ckpt_readback(ckpt_session *s, const char *path, const uint64_t *sums, char *err, size_t errlen);

#endif
