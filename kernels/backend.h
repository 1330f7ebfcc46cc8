/* The backend seam: where the model's memory lives and how its math runs.
 *
 * A backend is an object (in the spirit of ggml's): memory operations, one
 * table of ops, and a context every op receives. The model, the optimizer,
 * the pipeline and the checkpoint package hold a `boost_backend *` and touch
 * backend memory only through it: they may compute addresses inside it
 * (base + offset) but never read or write through them. The guarded test
 * backend (guarded_backend.c) hands out addresses the host cannot
 * dereference, so any line that breaks this rule faults where it stands.
 *
 * Memory and ordering. Backend memory is what alloc returns. Every op and
 * every memory operation below is queued, in call order, on the backend's
 * compute stream: a later call sees the effects of an earlier one. On the
 * CPU backend "queued" means "done on return"; on a GPU backend the host
 * returns at once and only the calls documented as synchronising wait
 * (download, sync, copy_sync). A second stream, the copy stream, serves
 * checkpoint staging: mark() records the compute stream's position, and
 * download_async() copies that state to host memory while later compute
 * work runs; copy_sync() waits for those copies. mark, download_async and
 * copy_sync may be called from one thread other than the one that queues
 * compute work (the checkpoint writer); everything else from one thread.
 *
 * Precision. A backend runs one precision policy (docs/PRECISION.md), fixed
 * at creation: act_dtype is the type of activations, activation gradients
 * and the working copy of the weights (BOOST_F32 or BOOST_BF16); master
 * weights, their gradients and the AdamW moments are always float;
 * statistics (RMSNorm rstd, sums of squares, attention row statistics,
 * cross-entropy pieces, losses) are float, norms and loss sums double.
 * Pointers of type `boost_act *` hold act_dtype elements: the type is
 * incomplete on purpose, so the host can neither index nor dereference it
 * and offsets go through boost_act_at().
 *
 * The ops are declared once, in kernels/op_list.h, with their contracts;
 * the table type below, each backend's table and the guarded forwarders
 * are made from that list. Collectives are not ops: the model calls the
 * comm layer (trainer/parallel/comm.h) between them. */
#ifndef BOOST_KERNELS_BACKEND_H
#define BOOST_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef enum { BOOST_F32 = 0, BOOST_BF16, BOOST_F64, BOOST_I32, BOOST_DTYPE_COUNT } boost_dtype;
extern const char *const boost_dtype_names[BOOST_DTYPE_COUNT];
size_t boost_dtype_size(boost_dtype t);

/* Elements of a backend's act_dtype (incomplete: never dereferenced). */
typedef struct boost_act boost_act;

typedef struct boost_backend boost_backend;

/* AdamW hyper-parameters (decoupled weight decay, bias correction); a
 * segment without BOOST_SEG_DECAY takes no decay. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
} adamw_hparams;

/* A run of one tensor in the arena index space (floats), for the
 * whole-arena optimizer ops: offset, length, and flags. */
enum {
  BOOST_SEG_DECAY = 1u << 0, /* AdamW weight decay applies */
  BOOST_SEG_NORM = 1u << 1,  /* counts in the gradient norm on this rank */
};
typedef struct {
  size_t offset, n;
  unsigned flags;
} boost_segment;
/* The segments of one optimizer shard, handed to the backend once
 * (optim_plan_create); the moment arenas hold [mom_begin, mom_end). */
typedef struct boost_optim_plan boost_optim_plan;

typedef struct {
  /* Zero-filled memory of `bytes`; NULL when it cannot be had. */
  void *(*alloc)(boost_backend *be, size_t bytes);
  void (*free)(boost_backend *be, void *p);
  /* Host memory the backend copies to and from fastest (pinned on a GPU),
   * zero-filled; NULL when it cannot be had. The host may use it freely. */
  void *(*host_alloc)(boost_backend *be, size_t bytes);
  void (*host_free)(boost_backend *be, void *p);
  void (*zero)(boost_backend *be, void *p, size_t bytes);
  /* Within backend memory; the ranges must not overlap. */
  void (*copy)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* rows of `width` bytes: dst + i*dpitch <- src + i*spitch (no overlap). */
  void (*copy2d)(boost_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                 size_t rows);
  /* Host -> backend; src may be reused when it returns. */
  void (*upload)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* Backend -> host; waits for the compute stream, complete on return. */
  void (*download)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* The compute stream's position that the next download_async calls copy from. */
  void (*mark)(boost_backend *be);
  /* Backend -> host on the copy stream, ordered after the last mark(). */
  void (*download_async)(boost_backend *be, void *dst, const void *src, size_t bytes);
  /* Waits until every download_async issued so far is complete. */
  void (*copy_sync)(boost_backend *be);
  /* Waits until everything queued on the compute stream is done. */
  void (*sync)(boost_backend *be);
  /* A host pointer to backend memory when the backend's memory is host
   * memory (the CPU backends), NULL otherwise. Only a communication
   * backend that moves host buffers (MPI), a checkpoint load (which
   * decodes straight into the arenas) and the step guard's read-only hash
   * of a rank's own gradients before the dp reduction may use it. */
  void *(*host_view)(boost_backend *be, const void *p);
} boost_mem_ops;

typedef const boost_act cact;                   /* shorthand for the op list */
typedef boost_optim_plan *boost_optim_plan_ptr; /* a return type of one token (op_list.h) */

#include "op_list.h"
#include "status.h"

/* The op table: one entry per line of BOOST_OP_LIST (kernels/op_list.h,
 * where each op's contract is written). */
#define BOOST_OP_FIELD(cpu, ret, name, params, args) ret(*name) params;
typedef struct boost_ops {
  BOOST_OP_LIST(BOOST_OP_FIELD)
} boost_ops;
#undef BOOST_OP_FIELD

/* The ops by number (BOOST_OP_<name>), and their names. */
#define BOOST_OP_ID(cpu, ret, name, params, args) BOOST_OP_##name,
enum { BOOST_OP_LIST(BOOST_OP_ID) BOOST_OP_COUNT };
#undef BOOST_OP_ID
extern const char *const boost_op_names[BOOST_OP_COUNT];

struct boost_backend {
  const char *name;    /* "cpu", "guarded", "cuda" */
  char info[192];      /* one line for the start-up log: the device, precision, GEMM library and instructions */
  boost_dtype act_dtype;
  const boost_mem_ops *mem;
  const boost_ops *ops;
  void *impl;          /* the backend's own state */
  void (*destroy)(boost_backend *be);
};

/* The backend `name` ("cpu", "guarded": the CPU kernels behind memory the
 * host cannot touch, for tests; "cuda": kernels/cuda, when built) with act
 * type act_dtype and `threads` host threads (0: the OpenMP default) on
 * `device` (GPU index; ignored by the CPU backends), into *out. -1 (and
 * *out NULL) with a one-line message when it cannot be created (unknown
 * name, no GPU, no build support, a precision the backend does not run). */
int boost_backend_create(const char *name, boost_dtype act_dtype, int threads, int device, boost_backend **out,
                         boost_status *err);
void boost_backend_destroy(boost_backend *be);
/* The process's shared CPU backend with float activations and the threads
 * OpenMP was given (tools and tests that build a model without choosing). */
boost_backend *boost_backend_default(void);
/* Whether this build has the named backend (cuda: compiled in). */
int boost_backend_built(const char *name);
/* Whether every op and memory operation of be is there: 0, or -1 with the
 * first missing one named (boost_backend_create checks every backend it
 * makes). */
int boost_backend_check(const boost_backend *be, boost_status *err);

/* An offset of n elements into act_dtype memory. */
static inline boost_act *boost_act_at(const boost_backend *be, const boost_act *p, size_t n) {
  return (boost_act *)((char *)p + n * boost_dtype_size(be->act_dtype));
}
static inline size_t boost_act_bytes(const boost_backend *be, size_t n) { return n * boost_dtype_size(be->act_dtype); }

/* Allocation that fails the process with one line naming what (the model's
 * arenas: a run that cannot hold them cannot start). */
void *boost_be_alloc(boost_backend *be, size_t bytes, const char *what);

/* Clip scale for a global gradient norm: min(1, max_norm / norm); 1 when
 * max_norm <= 0. Host arithmetic on the downloaded norm. */
float boost_clip_scale(double norm, float max_norm);

#endif
