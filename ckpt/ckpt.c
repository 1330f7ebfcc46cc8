/* Checkpoint session: staging, the writer thread, the commit protocol and
 * resume (docs/CHECKPOINT_FORMAT.md describes the file; ckpt.h the calls).
 *
 * Threads. The training thread stages a checkpoint at a step boundary and
 * hands a job to this rank's writer thread; the writer thread makes every
 * HDF5 call of the process (saves and loads), on s->comm / s->dp_comm,
 * duplicates of the grid's world and data-parallel communicators. They meet
 * under s->mu: `busy` is set from hand-over until the job's result is posted,
 * `staged` once the writer no longer reads the live arenas.
 *
 * Who writes what. Data-parallel replicas hold the same tensors; each
 * replica writes a different band of every tensor: the rows (first dimension)
 * of its hyperslab cut at the dataset's chunk boundaries into dp contiguous
 * bands, so that inside every collective H5Dwrite all replicas compress their
 * own chunks at the same time. A tensor with fewer chunk rows than replicas
 * goes, chunk row by chunk row, to the replicas from a `base` chosen by a
 * greedy balance of bytes (from global shapes only, so every rank computes
 * the same plan). Inside a replica every tensor/pipeline rank writes its own
 * hyperslab. All ranks take part in every collective HDF5 call; the others
 * select nothing. Loading mirrors it: each replica reads and verifies its
 * bands, then the replicas all-gather them.
 */
#include "ckpt.h"

#include <cJSON.h>
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_fs.h"
#include "ckpt_h5.h"
#include "ckpt_hash.h"
#include "h5z_zstd.h"
#include "optim.h"

enum { CAT_PARAMS = 0, CAT_M, CAT_V, NCAT };
static const tensor_category cat_tensor[NCAT] = {TENSOR_PARAMS, TENSOR_ADAM_M, TENSOR_ADAM_V};
static const char *const cat_group[NCAT] = {CKPT_GROUP_MODEL, CKPT_GROUP_ADAM_M, CKPT_GROUP_ADAM_V};
/* Size categories reported in logs and benchmarks. */
enum { KIND_WEIGHTS = 0, KIND_MOMENTS, KIND_ACTS };
static const char *const kind_names[3] = {"weights", "moments", "activations"};

#define NO_STAGE SIZE_MAX
#define REASON_MAX 1024

/* One global tensor (the union of every pipeline stage's registry). */
typedef struct {
  char name[TENSOR_NAME_MAX];
  int ndim;
  int64_t shape[TENSOR_MAX_DIMS];
  int writer_stage;        /* the first pipeline stage holding it */
  int local;               /* index in this rank's registry, -1 if none */
  int primary;             /* no lower tensor-parallel rank holds the same hyperslab */
  int64_t chunk0;          /* chunk extent along dim 0 (a function of the global shape) */
  int base[NCAT];          /* replica of the first chunk row when there are fewer than dp */
  int64_t r0[NCAT], r1[NCAT]; /* this rank's band: local rows [r0, r1) of its hyperslab */
  size_t stage_off[NCAT];  /* floats into s->stage when this rank writes it */
} entry;

typedef enum { ACT_F32 = 0, ACT_I32, ACT_I64 } act_type;

#define ACT_NAME_MAX 112

/* An activation dataset's global description (identical on every rank; also
 * what the pipeline stages exchange). */
typedef struct {
  char name[ACT_NAME_MAX];
  int32_t type, ndim;
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
} act_item;

typedef struct {
  int64_t step, data_cursor;
  double tokens_seen;
  float *losses;
  int64_t nloss, loss_cap;
  int deferred;  /* the writer copies parameters and moments from the live arenas */
  double stall_s, wait_prev_s; /* measured by the training thread */
  /* activations */
  int nact, act_cap;
  act_item *acts;
  unsigned char *act_buf;
  size_t act_bytes, act_buf_cap;
  int act_B, act_T;
} save_job;

typedef struct {
  int64_t step;
  int ok, valid;
  char reason[REASON_MAX];
  double write_s, write_cpu_s, stall_s, wait_prev_s, update_wait_s;
  double raw[3], stored[3], file_bytes;
  char retention[512];
  int latest_ok;
} save_result;

typedef struct {
  int status; /* 1 loaded, 0 fresh start, -1 fatal */
  char msg[2048];
  int touched; /* some arena was (partly) overwritten by a failed attempt */
  int64_t step, data_cursor;
  double tokens_seen;
  float *losses;
  int64_t nloss;
} load_result;

enum { JOB_NONE = 0, JOB_SAVE, JOB_LOAD };

struct ckpt_session {
  train_config cfg;
  const process_grid *grid;
  model *m;
  MPI_Comm comm, dp_comm; /* writer thread only */
  int rank, world_size;
  char dir[CONFIG_STR];
  int acts_mode; /* 0 none, 1 sample, 2 all */
  int sync_mode, delay_ms, no_reserve, writer_nice;
  int64_t fail_step;
  int fail_rank;

  entry *ents;
  int nent;
  float *stage;
  size_t stage_floats;

  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int job_kind; /* pending job, taken by the writer */
  int busy, staged, quit;
  save_job job;
  save_result res;
  int res_unreported;
  load_result lres;
  double update_wait; /* ckpt_before_update wait for the job in flight */
  int deferred_seen;
  int attempted, last_ok;
  int64_t last_staged_step, last_committed_step;
  save_result last_done; /* for ckpt_last_stats */
  FILE *log;             /* rank 0: <dir>/checkpoints.jsonl */
  char open_note[512];
};

/* snprintf that truncates silently (messages are bounded on purpose). */
static void msgf(char *out, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void msgf(char *out, size_t n, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  vsnprintf(out, n, f, ap);
  va_end(ap);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU time of the calling thread (the writer's own work, whatever else
 * runs on the machine). */
static double thread_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static int64_t entry_numel(const entry *e) {
  int64_t n = 1;
  for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
  return n;
}

/* ---- agreement helpers (writer thread, s->comm) --------------------------- */

/* Every rank learns whether all were ok; if not, `out` gets the message of
 * the lowest failing rank, prefixed with its rank when world_size > 1. */
static int agree(ckpt_session *s, int ok, const char *mine, char *out, size_t outlen) {
  int who = ok ? INT_MAX : s->rank;
  MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, s->comm);
  if (who == INT_MAX) return 1;
  char buf[REASON_MAX];
  if (s->rank == who) {
    if (s->world_size > 1) msgf(buf, sizeof buf, "rank %d: %s", s->rank, mine);
    else msgf(buf, sizeof buf, "%s", mine);
  }
  MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, who, s->comm);
  if (out) msgf(out, outlen, "%s", buf);
  return 0;
}

static int all_true(ckpt_session *s, int v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, s->comm);
  return v;
}

/* ---- the global tensor table --------------------------------------------- */

/* Floats per row (dim 0) of a local hyperslab. */
static size_t row_floats(const tensor_desc *t) {
  size_t n = 1;
  for (int d = 1; d < t->ndim; d++) n *= (size_t)t->local_shape[d];
  return n;
}

/* Replica k's band of a rank's hyperslab t (local rows [*r0, *r1)): the
 * chunk rows (global multiples of chunk0) the hyperslab touches, cut into dp
 * contiguous ranges, or one chunk row per replica from e->base[c] when there
 * are fewer than dp. The same on every replica of a tp/pp position. */
static void band_of(const entry *e, const tensor_desc *t, int c, int k, int dp, int64_t *r0, int64_t *r1) {
  const int64_t o = t->offset[0], L = t->local_shape[0], c0 = e->chunk0;
  const int64_t u0 = o / c0, units = (o + L + c0 - 1) / c0 - u0;
  int64_t ua, ub; /* this replica's units [ua, ub) */
  if (units >= dp) {
    ua = units * k / dp;
    ub = units * (k + 1) / dp;
  } else {
    const int64_t j = ((int64_t)k - e->base[c] + dp) % dp;
    ua = j < units ? j : units;
    ub = j < units ? j + 1 : units;
  }
  int64_t a = (u0 + ua) * c0 - o, b = (u0 + ub) * c0 - o;
  if (a < 0) a = 0;
  if (b > L) b = L;
  if (b < a) b = a;
  *r0 = a;
  *r1 = b;
}

typedef struct {
  char name[TENSOR_NAME_MAX];
  int32_t ndim, stage;
  int64_t shape[TENSOR_MAX_DIMS];
} packed_desc;

static void build_table(ckpt_session *s) {
  const tensor_registry *reg = &s->m->reg;
  const process_grid *g = s->grid;
  packed_desc *mine = boost_calloc((size_t)(reg->count ? reg->count : 1), sizeof *mine);
  for (int i = 0; i < reg->count; i++) {
    const tensor_desc *t = &reg->tensors[i];
    if (strchr(t->name, '/')) boost_fail("tensor name '%s' contains '/' (not allowed in a checkpoint)", t->name);
    memcpy(mine[i].name, t->name, sizeof mine[i].name);
    mine[i].ndim = t->ndim;
    mine[i].stage = g->pp_rank;
    for (int d = 0; d < t->ndim; d++) mine[i].shape[d] = t->shape[d];
  }
  /* Gather every stage's descriptors along the pipeline (pp = 1: just ours). */
  int pp = 1;
  MPI_Comm_size(g->pp_comm, &pp);
  int *counts = boost_calloc((size_t)pp, sizeof *counts), *displs = boost_calloc((size_t)pp, sizeof *displs);
  int nbytes = reg->count * (int)sizeof(packed_desc);
  MPI_Allgather(&nbytes, 1, MPI_INT, counts, 1, MPI_INT, g->pp_comm);
  int total = 0;
  for (int i = 0; i < pp; i++) {
    displs[i] = total;
    total += counts[i];
  }
  packed_desc *all = boost_calloc((size_t)total / sizeof(packed_desc) + 1, sizeof *all);
  MPI_Allgatherv(mine, nbytes, MPI_BYTE, all, counts, displs, MPI_BYTE, g->pp_comm);
  const int nall = total / (int)sizeof(packed_desc);
  s->ents = boost_calloc((size_t)(nall ? nall : 1), sizeof *s->ents);
  s->nent = 0;
  for (int i = 0; i < nall; i++) {
    int dup = -1;
    for (int j = 0; j < s->nent; j++)
      if (strcmp(s->ents[j].name, all[i].name) == 0) dup = j;
    if (dup >= 0) { /* a tensor two stages hold (tied embeddings): same shape */
      for (int d = 0; d < all[i].ndim; d++)
        if (all[i].shape[d] != s->ents[dup].shape[d]) boost_fail("tensor %s has different shapes on two pipeline stages", all[i].name);
      continue;
    }
    entry *e = &s->ents[s->nent++];
    memcpy(e->name, all[i].name, sizeof e->name);
    e->ndim = all[i].ndim;
    e->writer_stage = all[i].stage;
    for (int d = 0; d < e->ndim; d++) e->shape[d] = all[i].shape[d];
    e->local = registry_find(reg, e->name);
  }
  boost_free(all);
  boost_free(counts);
  boost_free(displs);
  boost_free(mine);

  /* Replication inside the tensor-parallel group (split_dim -1, or any
   * hyperslab two tp ranks share): only the lowest tp rank holding a given
   * hyperslab writes and hashes it. */
  {
    int tpn = 1;
    MPI_Comm_size(g->tp_comm, &tpn);
    int cnt = reg->count, cmin = cnt, cmax = cnt;
    MPI_Allreduce(&cnt, &cmin, 1, MPI_INT, MPI_MIN, g->tp_comm);
    MPI_Allreduce(&cnt, &cmax, 1, MPI_INT, MPI_MAX, g->tp_comm);
    if (cmin != cmax) boost_fail("tensor-parallel ranks of one stage hold different tensor lists (%d vs %d)", cmin, cmax);
    const size_t per = (size_t)(cnt ? cnt : 1) * TENSOR_MAX_DIMS;
    int64_t *offs = boost_calloc(per * (size_t)tpn, sizeof *offs);
    for (int i = 0; i < cnt; i++)
      for (int d = 0; d < reg->tensors[i].ndim; d++) offs[(size_t)g->tp_rank * per + (size_t)i * TENSOR_MAX_DIMS + d] = reg->tensors[i].offset[d];
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, offs, (int)per, MPI_INT64_T, g->tp_comm);
    for (int k = 0; k < s->nent; k++) {
      entry *e = &s->ents[k];
      e->primary = 0;
      if (e->local < 0) continue;
      e->primary = 1;
      for (int r = 0; r < g->tp_rank && e->primary; r++)
        if (!memcmp(&offs[(size_t)r * per + (size_t)e->local * TENSOR_MAX_DIMS], &offs[(size_t)g->tp_rank * per + (size_t)e->local * TENSOR_MAX_DIMS],
                    TENSOR_MAX_DIMS * sizeof *offs))
          e->primary = 0;
    }
    boost_free(offs);
  }

  /* Bands. Greedy over (tensor, category), largest first: a tensor with at
   * least dp chunk rows is spread evenly; a smaller one starts at the least
   * loaded replica. */
  const int dp = g->dp, nitems = s->nent * NCAT;
  for (int i = 0; i < s->nent; i++) {
    hsize_t ch[TENSOR_MAX_DIMS];
    ckpt_chunk_dims(s->ents[i].ndim, s->ents[i].shape, ch);
    s->ents[i].chunk0 = (int64_t)ch[0];
  }
  int *order = boost_calloc((size_t)(nitems ? nitems : 1), sizeof *order);
  for (int i = 0; i < nitems; i++) order[i] = i;
  for (int i = 1; i < nitems; i++) { /* insertion sort: by size desc, index asc */
    int v = order[i], j = i - 1;
    const int64_t nv = entry_numel(&s->ents[v / NCAT]);
    while (j >= 0 && entry_numel(&s->ents[order[j] / NCAT]) < nv) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = v;
  }
  double *load = boost_calloc((size_t)dp, sizeof *load);
  for (int k = 0; k < nitems; k++) {
    entry *e = &s->ents[order[k] / NCAT];
    const int c = order[k] % NCAT;
    const int64_t units = (e->shape[0] + e->chunk0 - 1) / e->chunk0;
    const double size = (double)entry_numel(e);
    int best = 0;
    for (int r = 1; r < dp; r++)
      if (load[r] < load[best]) best = r;
    e->base[c] = best;
    if (units >= dp) {
      for (int r = 0; r < dp; r++) load[r] += size / dp;
    } else {
      for (int64_t u = 0; u < units; u++) load[(best + u) % dp] += size / (double)units;
    }
  }
  boost_free(load);
  boost_free(order);
  for (int i = 0; i < s->nent; i++) {
    entry *e = &s->ents[i];
    for (int c = 0; c < NCAT; c++) {
      e->r0[c] = e->r1[c] = 0;
      if (e->local >= 0) band_of(e, &reg->tensors[e->local], c, g->dp_rank, dp, &e->r0[c], &e->r1[c]);
    }
  }

  /* Staging for what this rank writes. */
  s->stage_floats = 0;
  for (int i = 0; i < s->nent; i++) {
    entry *e = &s->ents[i];
    for (int c = 0; c < NCAT; c++) {
      e->stage_off[c] = NO_STAGE;
      if (e->local < 0 || !e->primary || e->writer_stage != g->pp_rank || e->r1[c] <= e->r0[c]) continue;
      e->stage_off[c] = s->stage_floats;
      s->stage_floats += ((size_t)(e->r1[c] - e->r0[c]) * row_floats(&reg->tensors[e->local]) + 15) & ~(size_t)15;
    }
  }
  /* Allocated and touched now (zero-filled): a checkpoint is always written
   * at the end of a run, and faulting the pages in at the first checkpoint
   * would make its deferred copy outlast the next step. */
  s->stage = s->stage_floats ? boost_calloc(s->stage_floats, sizeof(float)) : NULL;
}

/* The global hyperslab of local rows [r0, r1) of t. */
static void band_slab(const tensor_desc *t, int64_t r0, int64_t r1, int64_t *start, int64_t *count) {
  for (int d = 0; d < t->ndim; d++) {
    start[d] = t->offset[d];
    count[d] = t->local_shape[d];
  }
  start[0] += r0;
  count[0] = r1 - r0;
}

/* Copies what this rank writes from the live arenas into the staging buffer. */
static void copy_to_stage(ckpt_session *s, int parallel) {
  const tensor_registry *reg = &s->m->reg;
  for (int i = 0; i < s->nent; i++) {
    const entry *e = &s->ents[i];
    for (int c = 0; c < NCAT; c++) {
      if (e->stage_off[c] == NO_STAGE) continue;
      const size_t rf = row_floats(&reg->tensors[e->local]);
      const float *src = registry_data(reg, cat_tensor[c], e->local) + (size_t)e->r0[c] * rf;
      float *dst = s->stage + e->stage_off[c];
      const size_t n = (size_t)(e->r1[c] - e->r0[c]) * rf, blk = (size_t)1 << 18;
      if (parallel && n > blk) {
        const long nb = (long)((n + blk - 1) / blk);
#pragma omp parallel for schedule(static)
        for (long b = 0; b < nb; b++) {
          const size_t o = (size_t)b * blk, k = n - o < blk ? n - o : blk;
          memcpy(dst + o, src + o, k * sizeof(float));
        }
      } else {
        memcpy(dst, src, n * sizeof(float));
      }
    }
  }
}

/* ---- activations ----------------------------------------------------------- */

static void *job_act_alloc(save_job *j, size_t bytes) {
  size_t off = (j->act_bytes + 63) & ~(size_t)63;
  if (off + bytes > j->act_buf_cap) {
    size_t cap = j->act_buf_cap ? j->act_buf_cap : ((size_t)1 << 20);
    while (cap < off + bytes) cap *= 2;
    unsigned char *p = realloc(j->act_buf, cap);
    if (!p) boost_fail("out of memory staging activations (%zu bytes)", cap);
    j->act_buf = p;
    j->act_buf_cap = cap;
  }
  j->act_bytes = off + bytes;
  return j->act_buf + off;
}

/* Adds a local item (global shape; this rank's hyperslab when `has`) and
 * copies its data (count elements, contiguous) into the job's buffer. */
static void job_act_add(save_job *j, const char *name, act_type type, int ndim, const int64_t *shape,
                        const int64_t *start, const int64_t *count, int has, const void *src) {
  if (j->nact == j->act_cap) {
    j->act_cap = j->act_cap ? 2 * j->act_cap : 64;
    act_item *p = realloc(j->acts, (size_t)j->act_cap * sizeof *p);
    if (!p) boost_fail("out of memory staging activations");
    j->acts = p;
  }
  act_item *a = &j->acts[j->nact++];
  memset(a, 0, sizeof *a);
  msgf(a->d.name, sizeof a->d.name, "%s", name);
  a->d.type = type;
  a->d.ndim = ndim;
  size_t n = 1;
  for (int k = 0; k < ndim; k++) {
    a->d.shape[k] = shape[k];
    a->start[k] = start[k];
    a->count[k] = count[k];
    n *= (size_t)count[k];
  }
  a->has = has && n > 0;
  if (!a->has) return;
  const size_t bytes = n * (type == ACT_I64 ? 8 : 4);
  void *dst = job_act_alloc(j, bytes);
  a->off = (size_t)((unsigned char *)dst - j->act_buf);
  memcpy(dst, src, bytes);
}

#define ACT_PP_TAG 0x6b63 /* p2p tag of the recompute forward (no other message is in flight at a step boundary) */

/* The last micro-batch (tokens and sample indices) and, recomputed with the
 * weights being saved, the bottleneck activations h = silu(A x) of every
 * low-rank group of every layer ("sample": replica 0's micro-batch; "all":
 * every replica's, plus the pre-activations A x and each layer's input).
 * Global datasets: tokens [nseq, T], sample_index [nseq], per layer
 * layers.L.{attn,mlp}.<group>.h / .hpre [nseq*T, nproj, r] and
 * layers.L.input [nseq*T, d]; each rank writes the hyperslab it holds
 * (rows of its replica, r or d columns of its tensor-parallel shard, layers of
 * its pipeline stage). Collective over world. */
static void stage_activations(ckpt_session *s, const train_state *st) {
  save_job *j = &s->job;
  j->nact = 0;
  j->act_bytes = 0;
  int have = s->acts_mode && st->last_tokens && st->last_B > 0 && st->last_T > 0;
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, s->grid->world);
  if (!have) return;
  model *m = s->m;
  const process_grid *g = s->grid;
  const int B = st->last_B, T = st->last_T, dp = g->dp;
  const int all = s->acts_mode == 2;
  /* Recompute the forward pass with the weights of this checkpoint (through
   * the pipeline): the stored activations are what the stored weights give. */
  model_use_acts(m, 0);
  const size_t act = (size_t)B * T * (size_t)m->d_res;
  if (g->pp_rank > 0)
    MPI_Recv(model_stage_input(m), (int)act, MPI_FLOAT, g->pp_rank - 1, ACT_PP_TAG, g->pp_comm, MPI_STATUS_IGNORE);
  model_forward(m, st->last_tokens, NULL, B, T);
  if (g->pp_rank < g->pp - 1) MPI_Send(model_stage_output(m), (int)act, MPI_FLOAT, g->pp_rank + 1, ACT_PP_TAG, g->pp_comm);

  const int64_t nseq = all ? (int64_t)dp * B : B, seq0 = all ? (int64_t)g->dp_rank * B : 0;
  const int replica_writes = all || g->dp_rank == 0;
  const int64_t N = (int64_t)B * T, row0 = seq0 * T;
  j->act_B = B;
  j->act_T = T;
  if (g->pp_rank == 0) {
    const int64_t sh[2] = {nseq, T}, st0[2] = {seq0, 0}, ct[2] = {B, T};
    job_act_add(j, "tokens", ACT_I32, 2, sh, st0, ct, replica_writes && g->tp_rank == 0, st->last_tokens);
    /* Global sample index of each sequence (the trainer's order: cursor
     * before the step + ((accum - 1) * dp + dp_rank) * B + b). */
    int64_t *idx = boost_calloc((size_t)B, sizeof *idx);
    const int64_t global_batch = (int64_t)B * s->cfg.train.grad_accum * dp;
    for (int b = 0; b < B; b++)
      idx[b] = st->data_cursor - global_batch + ((int64_t)(s->cfg.train.grad_accum - 1) * dp + g->dp_rank) * B + b;
    const int64_t sh1[1] = {nseq}, st1[1] = {seq0}, ct1[1] = {B};
    job_act_add(j, "sample_index", ACT_I64, 1, sh1, st1, ct1, replica_writes && g->tp_rank == 0, idx);
    boost_free(idx);
  }
  char name[ACT_NAME_MAX];
  const int d = m->cfg.d_model;
  /* full recompute keeps no per-layer bottleneck: inputs only */
  const int keep_h = m->recompute != RECOMPUTE_FULL;
  for (int l = 0; l < m->nl; l++) {
    const int L = m->stage.first_layer + l;
    const layer_param *lp = &m->layers[l];
    const layer_acts *la = &m->cur->acts[l];
    if (all || !keep_h) { /* the layer's input (residual stream, columns of this tp shard) */
      const int sharded = m->d_res < d;
      const int64_t sh[2] = {nseq * T, d}, st0[2] = {row0, sharded ? (int64_t)g->tp_rank * m->d_res : 0},
                    ct[2] = {N, m->d_res};
      msgf(name, sizeof name, "layers.%d.input", L);
      job_act_add(j, name, ACT_F32, 2, sh, st0, ct, replica_writes && (sharded || g->tp_rank == 0), m->cur->resid[l]);
    }
    if (!keep_h) continue;
    for (int gi = 0; gi < lp->ngroups; gi++) {
      const proj_group *pg = &lp->groups[gi];
      if (!pg->lowrank || !la->h[gi]) continue;
      const int sharded = pg->r_loc < pg->r;
      const int64_t sh[3] = {nseq * T, pg->nproj, pg->r}, st0[3] = {row0, 0, sharded ? (int64_t)g->tp_rank * pg->r_loc : 0},
                    ct[3] = {N, pg->nproj, pg->r_loc};
      const int w = replica_writes && (sharded || g->tp_rank == 0);
      const char *blk = pg->kinds[0] <= PROJ_O ? "attn" : "mlp";
      msgf(name, sizeof name, "layers.%d.%s.%s.h", L, blk, model_group_name(pg));
      job_act_add(j, name, ACT_F32, 3, sh, st0, ct, w, la->h[gi]);
      if (all) {
        msgf(name, sizeof name, "layers.%d.%s.%s.hpre", L, blk, model_group_name(pg));
        job_act_add(j, name, ACT_F32, 3, sh, st0, ct, w, la->hpre[gi]);
      }
    }
  }
  /* The dataset list is the union over pipeline stages, in stage order. */
  int pp = 1;
  MPI_Comm_size(g->pp_comm, &pp);
  if (pp > 1) {
    act_desc *mine = boost_calloc((size_t)(j->nact ? j->nact : 1), sizeof *mine);
    for (int k = 0; k < j->nact; k++) mine[k] = j->acts[k].d;
    int *counts = boost_calloc((size_t)pp, sizeof *counts), *displs = boost_calloc((size_t)pp, sizeof *displs);
    int nb = j->nact * (int)sizeof(act_desc), total = 0;
    MPI_Allgather(&nb, 1, MPI_INT, counts, 1, MPI_INT, g->pp_comm);
    for (int k = 0; k < pp; k++) displs[k] = total, total += counts[k];
    act_desc *allv = boost_calloc((size_t)total / sizeof(act_desc) + 1, sizeof *allv);
    MPI_Allgatherv(mine, nb, MPI_BYTE, allv, counts, displs, MPI_BYTE, g->pp_comm);
    const int nall = total / (int)sizeof(act_desc);
    act_item *items = calloc((size_t)(nall ? nall : 1), sizeof *items);
    if (!items) boost_fail("out of memory staging activations");
    int n = 0;
    for (int k = 0; k < nall; k++) {
      int dup = 0;
      for (int q = 0; q < n && !dup; q++) dup = !strcmp(items[q].d.name, allv[k].name);
      if (dup) continue;
      act_item *it = &items[n++];
      it->d = allv[k];
      for (int q = 0; q < j->nact; q++)
        if (!strcmp(j->acts[q].d.name, allv[k].name)) {
          *it = j->acts[q];
          break;
        }
    }
    free(j->acts);
    j->acts = items;
    j->nact = n;
    j->act_cap = nall ? nall : 1;
    boost_free(allv);
    boost_free(counts);
    boost_free(displs);
    boost_free(mine);
  }
}

/* ---- writing (writer thread) ---------------------------------------------- */

typedef struct {
  ckpt_session *s;
  hid_t file, dxpl;
  int ok;                  /* this rank has not failed yet */
  char err[REASON_MAX];
  save_result *r;
} writer;

static void wfail(writer *w, const char *fmt, const char *arg) {
  if (!w->ok) return;
  char what[512];
  msgf(what, sizeof what, fmt, arg);
  ckpt_h5_error(w->err, sizeof w->err, what);
  w->ok = 0;
}

/* One dataset, collectively: every rank creates it; ranks with data select
 * their hyperslab (start/count over the global shape), the others nothing. */
static void write_dataset(writer *w, hid_t loc, const char *path, const char *name, hid_t ftype, hid_t mtype,
                          int ndim, const int64_t *gshape, int filtered, const int64_t *start, const int64_t *count,
                          const void *buf, uint64_t checksum, int kind) {
  ckpt_session *s = w->s;
  hsize_t dims[TENSOR_MAX_DIMS], chunk[TENSOR_MAX_DIMS], st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    dims[d] = (hsize_t)gshape[d];
    n *= gshape[d];
  }
  hid_t space = H5Screate_simple(ndim, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (space < 0 || dcpl < 0) wfail(w, "creating the dataspace of %s", path);
  if (filtered && n > 0) {
    ckpt_chunk_dims(ndim, gshape, chunk);
    if (h5z_zstd_set_dcpl(dcpl, ndim, chunk, s->cfg.ckpt.level) < 0) wfail(w, "zstd filter setup for %s", path);
  }
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  hid_t dset = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset < 0) {
    wfail(w, "H5Dcreate %s", path);
  } else {
    int has = count != NULL && buf != NULL;
    if (has)
      for (int d = 0; d < ndim; d++) has = has && count[d] > 0;
    hid_t mem;
    if (has) {
      for (int d = 0; d < ndim; d++) {
        st[d] = (hsize_t)start[d];
        ct[d] = (hsize_t)count[d];
      }
      H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL);
      mem = H5Screate_simple(ndim, ct, NULL);
    } else {
      hsize_t one = 1;
      H5Sselect_none(space);
      mem = H5Screate_simple(1, &one, NULL);
      H5Sselect_none(mem);
    }
    static const float dummy[1] = {0};
    if (n > 0 && H5Dwrite(dset, mtype, mem, space, w->dxpl, has ? buf : (const void *)dummy) < 0)
      wfail(w, "H5Dwrite %s", path);
    H5Sclose(mem);
    if (ckpt_attr_put_u64(dset, CKPT_ATTR_CHECKSUM, checksum) < 0) wfail(w, "checksum attribute of %s", path);
    if (kind >= 0) {
      w->r->raw[kind] += (double)n * (double)H5Tget_size(ftype);
      w->r->stored[kind] += (double)H5Dget_storage_size(dset);
    }
    if (H5Dclose(dset) < 0) wfail(w, "H5Dclose %s", path);
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  if (space >= 0) H5Sclose(space);
  if (s->delay_ms > 0) sleep_ms(s->delay_ms);
}

static hid_t make_group(writer *w, const char *path) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t gid = H5Gcreate2(w->file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  if (gid < 0) wfail(w, "H5Gcreate %s", path);
  return gid;
}

static char *layout_json(const ckpt_session *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "world_size", s->world_size);
  cJSON_AddNumberToObject(o, "dp", s->grid->dp);
  cJSON_AddNumberToObject(o, "tp", s->grid->tp);
  cJSON_AddNumberToObject(o, "pp", s->grid->pp);
  cJSON_AddStringToObject(o, "tp_mode", tp_mode_names[s->m->mode]);
  cJSON_AddNumberToObject(o, "zero", s->cfg.parallel.zero);
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return txt;
}

static void write_root_attrs(writer *w, const save_job *j) {
  ckpt_session *s = w->s;
  hid_t f = w->file;
  char *cfg_json = config_to_json(&s->cfg), *lay = layout_json(s);
  int rc = 0;
  rc |= ckpt_attr_put_str(f, "format", CKPT_FORMAT_NAME);
  rc |= ckpt_attr_put_i64(f, "format_version", CKPT_FORMAT_VERSION);
  rc |= ckpt_attr_put_str(f, "software_version", BOOST_VERSION);
  rc |= ckpt_attr_put_str(f, "checksum_algorithm", CKPT_CHECKSUM_ALGORITHM);
  rc |= ckpt_attr_put_i64(f, "step", j->step);
  rc |= ckpt_attr_put_i64(f, "lr_schedule_step", j->step);
  rc |= ckpt_attr_put_f64(f, "lr_next", (double)lr_at(&s->cfg, (int)j->step));
  rc |= ckpt_attr_put_i64(f, "adam_t", j->step);
  rc |= ckpt_attr_put_i64(f, "data_cursor", j->data_cursor);
  rc |= ckpt_attr_put_f64(f, "tokens_seen", j->tokens_seen);
  rc |= ckpt_attr_put_i64(f, "train_seed", s->cfg.train.seed);
  rc |= ckpt_attr_put_i64(f, "data_seed", s->cfg.data.seed);
  rc |= ckpt_attr_put_str(f, "config", cfg_json ? cfg_json : "{}");
  rc |= ckpt_attr_put_str(f, "layout", lay ? lay : "{}");
  rc |= ckpt_attr_put_str(f, "activations", acts_mode_names[s->cfg.ckpt.activations]);
  rc |= ckpt_attr_put_i64(f, "n_tensors", s->nent);
  if (rc) wfail(w, "root attributes of %s", "the checkpoint");
  free(cfg_json);
  free(lay);
}

/* Writes the whole file collectively; returns this rank's ok. */
static int write_file(ckpt_session *s, save_job *j, const char *path, const uint64_t *sums, save_result *r,
                      char *err, size_t errlen) {
  writer w = {s, -1, -1, 1, "", r};
  const tensor_registry *reg = &s->m->reg;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, s->comm, MPI_INFO_NULL);
  H5Pset_coll_metadata_write(fapl, 1);
  H5Pset_all_coll_metadata_ops(fapl, 1);
  /* The 1.10 file format: compact chunk indexes (single chunk, fixed array)
   * instead of one v1 B-tree per dataset; every HDF5 >= 1.10 reads it. */
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  w.file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (w.file < 0) wfail(&w, "H5Fcreate %s", path);
  H5Pclose(fapl);
  if (!agree(s, w.ok, w.err, err, errlen)) {
    if (w.file >= 0) H5Fclose(w.file);
    return 0;
  }
  /* Reserve the uncompressed size (an upper bound) so that a full disk fails
   * here, on every rank at once, not in the middle of collective writes. */
  if (s->rank == 0 && !s->no_reserve) {
    double need = 256 << 10;
    for (int i = 0; i < s->nent; i++) need += 1.01 * NCAT * 4.0 * (double)entry_numel(&s->ents[i]) + NCAT * 2048.0;
    for (int a = 0; a < j->nact; a++) {
      double n = 1;
      for (int k = 0; k < j->acts[a].d.ndim; k++) n *= (double)j->acts[a].d.shape[k];
      need += 1.01 * (j->acts[a].d.type == ACT_I64 ? 8.0 : 4.0) * n + 2048.0;
    }
    need += 4.0 * (double)j->nloss;
    char rerr[512];
    if (ckpt_fs_reserve(path, (uint64_t)need, rerr, sizeof rerr) < 0) {
      msgf(w.err, sizeof w.err, "%s", rerr);
      w.ok = 0;
    }
  }
  int go = agree(s, w.ok, w.err, err, errlen);
  w.dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(w.dxpl, H5FD_MPIO_COLLECTIVE);
  if (go) {
    write_root_attrs(&w, j);
    hid_t groups[NCAT];
    for (int c = 0; c < NCAT; c++) groups[c] = make_group(&w, cat_group[c]);
    go = all_true(s, w.ok);
    char path_ds[TENSOR_NAME_MAX + 32];
    for (int i = 0; go && i < s->nent; i++) {
      const entry *e = &s->ents[i];
      for (int c = 0; go && c < NCAT; c++) {
        const int mine = e->stage_off[c] != NO_STAGE;
        int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
        if (mine) band_slab(&reg->tensors[e->local], e->r0[c], e->r1[c], start, count);
        msgf(path_ds, sizeof path_ds, "%s/%s", cat_group[c], e->name);
        write_dataset(&w, groups[c], path_ds, e->name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, e->ndim, e->shape, 1,
                      mine ? start : NULL, mine ? count : NULL, mine ? s->stage + e->stage_off[c] : NULL,
                      sums[(size_t)i * NCAT + c], c == CAT_PARAMS ? KIND_WEIGHTS : KIND_MOMENTS);
        go = all_true(s, w.ok); /* stop everywhere at the first failure */
      }
    }
    for (int c = 0; c < NCAT; c++)
      if (groups[c] >= 0) H5Gclose(groups[c]);
    if (go) { /* training state */
      hid_t gs = make_group(&w, CKPT_GROUP_STATE);
      const int64_t n = j->nloss, zero = 0;
      write_dataset(&w, gs, CKPT_GROUP_STATE "/loss_history", "loss_history", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1,
                    &n, 0, &zero, s->rank == 0 ? &n : NULL, j->losses, sums[(size_t)s->nent * NCAT], -1);
      if (gs >= 0) H5Gclose(gs);
      go = all_true(s, w.ok);
    }
    if (go && j->nact > 0) {
      hid_t ga = make_group(&w, CKPT_GROUP_ACTS);
      if (ga >= 0) {
        int rc = ckpt_attr_put_str(ga, "mode", acts_mode_names[s->cfg.ckpt.activations]);
        rc |= ckpt_attr_put_str(ga, "weights", "recomputed at save time with the weights of this checkpoint");
        rc |= ckpt_attr_put_i64(ga, "micro_batch", j->act_B);
        rc |= ckpt_attr_put_i64(ga, "seq_len", j->act_T);
        if (rc) wfail(&w, "attributes of %s", CKPT_GROUP_ACTS);
      }
      for (int a = 0; go && a < j->nact; a++) {
        const act_item *it = &j->acts[a];
        hid_t ft = it->d.type == ACT_F32 ? H5T_IEEE_F32LE : it->d.type == ACT_I32 ? H5T_STD_I32LE : H5T_STD_I64LE;
        hid_t mt = it->d.type == ACT_F32 ? H5T_NATIVE_FLOAT : it->d.type == ACT_I32 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT64;
        msgf(path_ds, sizeof path_ds, CKPT_GROUP_ACTS "/%s", it->d.name);
        write_dataset(&w, ga, path_ds, it->d.name, ft, mt, it->d.ndim, it->d.shape, 1, it->start, it->has ? it->count : NULL,
                      it->has ? j->act_buf + it->off : NULL, sums[(size_t)s->nent * NCAT + 1 + a], KIND_ACTS);
        go = all_true(s, w.ok);
      }
      if (ga >= 0) H5Gclose(ga);
    }
  }
  H5Pclose(w.dxpl);
  /* Collective MPI_File_sync of what HDF5 wrote, then close. */
  if (go && H5Fflush(w.file, H5F_SCOPE_GLOBAL) < 0) wfail(&w, "H5Fflush %s", path);
  if (H5Fclose(w.file) < 0) wfail(&w, "H5Fclose %s", path);
  if (!w.ok) msgf(err, errlen, "%s", w.err);
  return w.ok;
}

static void format_bytes(double b, char *out, size_t n) {
  if (b >= (double)(1 << 30)) msgf(out, n, "%.2f GiB", b / (1 << 30));
  else if (b >= (double)(1 << 20)) msgf(out, n, "%.1f MiB", b / (1 << 20));
  else msgf(out, n, "%.0f KiB", b / 1024);
}

static void do_save(ckpt_session *s, save_result *r) {
  save_job *j = &s->job;
  const double t0 = now_s(), c0 = thread_cpu_s();
  memset(r, 0, sizeof *r);
  r->valid = 1;
  r->step = j->step;
  r->stall_s = j->stall_s;
  r->wait_prev_s = j->wait_prev_s;
  if (j->deferred) { /* the copy training waits for before its next update */
    copy_to_stage(s, 0);
    pthread_mutex_lock(&s->mu);
    s->staged = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  /* Checksums: each element is hashed by the one rank that writes it. */
  const tensor_registry *reg = &s->m->reg;
  const size_t nsum = (size_t)s->nent * NCAT + 1 + (size_t)j->nact;
  uint64_t *sums = boost_calloc(nsum, sizeof *sums);
  for (int i = 0; i < s->nent; i++)
    for (int c = 0; c < NCAT; c++) {
      const entry *e = &s->ents[i];
      if (e->stage_off[c] == NO_STAGE) continue;
      const tensor_desc *t = &reg->tensors[e->local];
      int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
      band_slab(t, e->r0[c], e->r1[c], start, count);
      sums[(size_t)i * NCAT + c] = ckpt_hash_slab32(s->stage + e->stage_off[c], t->ndim, t->shape, start, count);
    }
  if (s->rank == 0) sums[(size_t)s->nent * NCAT] = ckpt_hash_run32(j->losses, (size_t)j->nloss, 0);
  for (int a = 0; a < j->nact; a++) {
    const act_item *it = &j->acts[a];
    if (!it->has) continue;
    const void *p = j->act_buf + it->off;
    sums[(size_t)s->nent * NCAT + 1 + a] =
        it->d.type == ACT_I64 ? ckpt_hash_run64(p, (size_t)it->count[0], (uint64_t)it->start[0])
                              : ckpt_hash_slab32(p, it->d.ndim, it->d.shape, it->start, it->count);
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, (int)nsum, MPI_UINT64_T, MPI_SUM, s->comm);

  char name[64], tmp_name[80], path[PATH_MAX + 96], err[REASON_MAX] = "";
  ckpt_file_name(name, sizeof name, j->step);
  msgf(tmp_name, sizeof tmp_name, "%s" CKPT_TMP_SUFFIX, name);
  msgf(path, sizeof path, "%s/%s", s->dir, tmp_name);
  int ok = write_file(s, j, path, sums, r, err, sizeof err);
  boost_free(sums);
  if (ok && s->rank == 0) ckpt_fs_trim(path);
  if (ok && ckpt_fs_fsync(path, err, sizeof err) != 0) ok = 0;
  if (ok && s->fail_step == j->step && (s->fail_rank < 0 || s->fail_rank == s->rank)) {
    msgf(err, sizeof err, "injected I/O error (BOOST_CKPT_TEST_FAIL): %s", strerror(EIO));
    ok = 0;
  }
  ok = agree(s, ok, err, r->reason, sizeof r->reason);
  /* Commit (rank 0 renames; every rank learns the outcome). */
  int committed = 0;
  char cerr[REASON_MAX] = "";
  if (s->rank == 0) {
    if (ok) {
      struct stat stt;
      if (stat(path, &stt) == 0) r->file_bytes = (double)stt.st_size;
      if (ckpt_fs_commit(s->dir, tmp_name, name, cerr, sizeof cerr) == 0) {
        committed = 1;
        r->latest_ok = ckpt_fs_write_latest(s->dir, name, cerr, sizeof cerr) == 0;
        ckpt_fs_retain(s->dir, j->step, s->cfg.ckpt.keep_last, s->cfg.ckpt.keep_every, r->retention,
                       sizeof r->retention);
      }
    }
    if (!committed) unlink(path);
  }
  double meta[2] = {(double)committed, r->file_bytes};
  MPI_Bcast(meta, 2, MPI_DOUBLE, 0, s->comm);
  committed = meta[0] != 0.0;
  r->file_bytes = meta[1];
  if (ok && !committed) {
    MPI_Bcast(cerr, (int)sizeof cerr, MPI_CHAR, 0, s->comm);
    msgf(r->reason, sizeof r->reason, "rank 0: %s", cerr);
  }
  r->ok = committed;
  r->write_s = now_s() - t0;
  r->write_cpu_s = thread_cpu_s() - c0;
}

/* ---- loading (writer thread) ---------------------------------------------- */

/* H5Lexists on every component of an absolute path. */
static int path_exists(hid_t f, const char *path) {
  char p[TENSOR_NAME_MAX + 64];
  msgf(p, sizeof p, "%s", path);
  for (char *c = p + 1;; c++) {
    if (*c == '/' || *c == 0) {
      const char save = *c;
      *c = 0;
      if (H5Lexists(f, p, H5P_DEFAULT) <= 0) return 0;
      if (!save) return 1;
      *c = save;
    }
  }
}

/* Reads one candidate into the arenas. Returns 1 ok, 0 unusable (reason in
 * why), -2 incompatible with this model (fatal). Collective. */
static int try_load(ckpt_session *s, const char *path, load_result *lr, char *why, size_t whylen) {
  const process_grid *g = s->grid;
  tensor_registry *reg = &s->m->reg;
  char err[REASON_MAX] = "";
  int ok = 1, incompatible = 0;
  struct stat stt;
  if (stat(path, &stt) != 0) {
    msgf(err, sizeof err, "cannot stat %s: %s", path, strerror(errno));
    ok = 0;
  }
  if (!agree(s, ok, err, why, whylen)) return 0;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, s->comm, MPI_INFO_NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  if (f < 0) { /* before any other HDF5 call: each one clears the error stack */
    ckpt_h5_error(err, sizeof err, "cannot open (truncated or not an HDF5 file)");
    ok = 0;
  }
  H5Pclose(fapl);
  if (!agree(s, ok, err, why, whylen)) {
    if (f >= 0) H5Fclose(f);
    return 0;
  }
  /* Root attributes. */
  char *fmt = NULL;
  int64_t version = 0;
  if (ckpt_attr_get_str(f, "format", &fmt) < 0 || strcmp(fmt, CKPT_FORMAT_NAME) != 0) {
    ckpt_h5_error(err, sizeof err, "not a boost checkpoint (attribute 'format')");
    ok = 0;
  } else if (ckpt_attr_get_i64(f, "format_version", &version) < 0 || version < 1 || version > CKPT_FORMAT_VERSION) {
    msgf(err, sizeof err, "format_version %lld is not supported (this build reads 1..%d)", (long long)version,
             CKPT_FORMAT_VERSION);
    ok = 0;
  } else if (ckpt_attr_get_i64(f, "step", &lr->step) < 0 || ckpt_attr_get_i64(f, "data_cursor", &lr->data_cursor) < 0 ||
             ckpt_attr_get_f64(f, "tokens_seen", &lr->tokens_seen) < 0) {
    ckpt_h5_error(err, sizeof err, "training state attributes");
    ok = 0;
  }
  free(fmt);
  int64_t seeds[2] = {0, 0};
  if (ok) {
    ckpt_attr_get_i64(f, "data_seed", &seeds[0]);
    ckpt_attr_get_i64(f, "train_seed", &seeds[1]);
  }
  if (!agree(s, ok, err, why, whylen)) {
    H5Fclose(f);
    return 0;
  }
  if (seeds[0] != s->cfg.data.seed && s->rank == 0)
    fprintf(stderr, "boost: warning: %s was saved with data.seed=%lld, this run uses %lld: the sample order will not continue the saved run\n",
            path, (long long)seeds[0], (long long)s->cfg.data.seed);

  /* Tensors: everyone opens every dataset (shape check, stored checksum);
   * each replica reads its band of its hyperslab (independent I/O) and the
   * rank that would write it hashes it. */
  const size_t nsum = (size_t)s->nent * NCAT + 1;
  uint64_t *stored = boost_calloc(nsum, sizeof *stored), *sums = boost_calloc(nsum, sizeof *sums);
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT);
  char dpath[TENSOR_NAME_MAX + 32];
  lr->touched = 1;
  for (int i = 0; i < s->nent && ok && !incompatible; i++) {
    const entry *e = &s->ents[i];
    for (int c = 0; c < NCAT && ok && !incompatible; c++) {
      msgf(dpath, sizeof dpath, "%s/%s", cat_group[c], e->name);
      if (!path_exists(f, dpath)) {
        msgf(err, sizeof err, "tensor %s is missing (a checkpoint of a different model?)", dpath);
        incompatible = 1;
        break;
      }
      hid_t d = H5Dopen2(f, dpath, H5P_DEFAULT);
      hid_t space = d >= 0 ? H5Dget_space(d) : -1;
      hsize_t dims[TENSOR_MAX_DIMS + 1];
      int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
      if (d < 0 || space < 0 || nd < 0 || nd > TENSOR_MAX_DIMS) {
        ckpt_h5_error(err, sizeof err, dpath);
        ok = 0;
      } else {
        H5Sget_simple_extent_dims(space, dims, NULL);
        int same = nd == e->ndim;
        for (int k = 0; same && k < nd; k++) same = (int64_t)dims[k] == e->shape[k];
        if (!same) {
          char a[96] = "", b[96] = "";
          for (int k = 0; k < nd; k++) msgf(a + strlen(a), sizeof a - strlen(a), "%s%llu", k ? "x" : "", (unsigned long long)dims[k]);
          for (int k = 0; k < e->ndim; k++) msgf(b + strlen(b), sizeof b - strlen(b), "%s%lld", k ? "x" : "", (long long)e->shape[k]);
          msgf(err, sizeof err, "tensor %s has shape %s in the checkpoint but %s in this model", dpath, a, b);
          incompatible = 1;
        } else if (ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &stored[(size_t)i * NCAT + c]) < 0) {
          ckpt_h5_error(err, sizeof err, "checksum attribute missing");
          char tmp[REASON_MAX];
          msgf(tmp, sizeof tmp, "tensor %s: %s", dpath, err);
          msgf(err, sizeof err, "%s", tmp);
          ok = 0;
        } else if (e->local >= 0 && e->r1[c] > e->r0[c]) { /* this replica's band */
          const tensor_desc *t = &reg->tensors[e->local];
          int64_t start[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
          band_slab(t, e->r0[c], e->r1[c], start, count);
          hsize_t st[TENSOR_MAX_DIMS], ct[TENSOR_MAX_DIMS];
          for (int k = 0; k < nd; k++) {
            st[k] = (hsize_t)start[k];
            ct[k] = (hsize_t)count[k];
          }
          hid_t mem = H5Screate_simple(nd, ct, NULL);
          H5Sselect_hyperslab(space, H5S_SELECT_SET, st, NULL, ct, NULL);
          float *dst = registry_data(reg, cat_tensor[c], e->local) + (size_t)e->r0[c] * row_floats(t);
          if (H5Dread(d, H5T_NATIVE_FLOAT, mem, space, dxpl, dst) < 0) {
            char what[TENSOR_NAME_MAX + 64];
            msgf(what, sizeof what, "tensor %s: read failed (corrupt data?)", dpath);
            ckpt_h5_error(err, sizeof err, what);
            ok = 0;
          } else if (e->writer_stage == g->pp_rank && e->primary) {
            sums[(size_t)i * NCAT + c] = ckpt_hash_slab32(dst, t->ndim, t->shape, start, count);
          }
          H5Sclose(mem);
        }
      }
      if (space >= 0) H5Sclose(space);
      if (d >= 0) H5Dclose(d);
      if (s->delay_ms > 0) sleep_ms(s->delay_ms);
    }
  }
  /* Loss history: everyone reads it (small). */
  lr->nloss = 0;
  free(lr->losses);
  lr->losses = NULL;
  if (ok && !incompatible) {
    hid_t d = H5Dopen2(f, CKPT_GROUP_STATE "/loss_history", H5P_DEFAULT);
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (n < 0 || ckpt_attr_get_u64(d, CKPT_ATTR_CHECKSUM, &stored[(size_t)s->nent * NCAT]) < 0) {
      ckpt_h5_error(err, sizeof err, "loss history " CKPT_GROUP_STATE "/loss_history");
      ok = 0;
    } else {
      lr->losses = malloc((size_t)n * sizeof(float) + 4);
      lr->nloss = n;
      if (!lr->losses || (n > 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, dxpl, lr->losses) < 0)) {
        ckpt_h5_error(err, sizeof err, "tensor " CKPT_GROUP_STATE "/loss_history: read failed (corrupt data?)");
        ok = 0;
      } else if (s->rank == 0) {
        sums[(size_t)s->nent * NCAT] = ckpt_hash_run32(lr->losses, (size_t)n, 0);
      }
    }
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
  }
  H5Pclose(dxpl);
  if (H5Fclose(f) < 0 && ok) {
    ckpt_h5_error(err, sizeof err, "H5Fclose");
    ok = 0;
  }
  /* Incompatibility is fatal on every rank; otherwise agree, then verify. */
  int inc = incompatible;
  MPI_Allreduce(MPI_IN_PLACE, &inc, 1, MPI_INT, MPI_MAX, s->comm);
  int rc = 1;
  if (inc) {
    agree(s, !incompatible, err, why, whylen);
    rc = -2;
  } else if (!agree(s, ok, err, why, whylen)) {
    rc = 0;
  } else {
    MPI_Allreduce(MPI_IN_PLACE, sums, (int)nsum, MPI_UINT64_T, MPI_SUM, s->comm);
    for (size_t k = 0; k < nsum; k++) {
      if (sums[k] == stored[k]) continue;
      const char *nm = k < (size_t)s->nent * NCAT ? s->ents[k / NCAT].name : "loss_history";
      const char *grp = k < (size_t)s->nent * NCAT ? cat_group[k % NCAT] : CKPT_GROUP_STATE;
      msgf(why, whylen, "tensor %s/%s: checksum mismatch (stored %016llx, computed %016llx)", grp, nm,
               (unsigned long long)stored[k], (unsigned long long)sums[k]);
      rc = 0;
      break;
    }
  }
  boost_free(stored);
  boost_free(sums);
  if (rc != 1) return rc;
  /* Replicas all-gather their bands. */
  if (g->dp > 1) {
    int *counts = boost_calloc((size_t)g->dp, sizeof *counts), *displs = boost_calloc((size_t)g->dp, sizeof *displs);
    for (int i = 0; i < s->nent; i++) {
      const entry *e = &s->ents[i];
      if (e->local < 0) continue;
      const tensor_desc *t = &reg->tensors[e->local];
      const size_t rf = row_floats(t);
      if ((size_t)t->numel > (size_t)INT_MAX) boost_fail("tensor %s is too large for one MPI_Allgatherv (%zu floats)", e->name, t->numel);
      for (int c = 0; c < NCAT; c++) {
        for (int k = 0; k < g->dp; k++) {
          int64_t a, b;
          band_of(e, t, c, k, g->dp, &a, &b);
          counts[k] = (int)((size_t)(b - a) * rf);
          displs[k] = (int)((size_t)a * rf);
        }
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, registry_data(reg, cat_tensor[c], e->local), counts, displs,
                       MPI_FLOAT, s->dp_comm);
      }
    }
    boost_free(counts);
    boost_free(displs);
  }
  return 1;
}

static void do_load(ckpt_session *s, load_result *lr) {
  const double t0 = now_s();
  const char *resume = s->cfg.ckpt.resume;
  char dir[PATH_MAX], single[PATH_MAX] = "";
  msgf(dir, sizeof dir, "%s", s->dir);
  int explicit_path = strcmp(resume, "auto") != 0;
  if (explicit_path) {
    struct stat st;
    if (stat(resume, &st) == 0 && S_ISDIR(st.st_mode)) msgf(dir, sizeof dir, "%s", resume);
    else msgf(single, sizeof single, "%s", resume);
  }
  /* Candidates, newest first (rank 0 lists; everyone gets the same list). */
  int64_t *steps = NULL;
  int n = 0;
  if (!single[0]) {
    char err[512];
    if (s->rank == 0 && ckpt_fs_list(dir, &steps, &n, err, sizeof err) != 0) n = 0;
    MPI_Bcast(&n, 1, MPI_INT, 0, s->comm);
    if (s->rank != 0) steps = n ? boost_calloc((size_t)n, sizeof *steps) : NULL;
    if (n) MPI_Bcast(steps, n, MPI_INT64_T, 0, s->comm);
  } else {
    n = 1;
  }
  char skipped[1024] = "", why[REASON_MAX], path[PATH_MAX + 64];
  lr->status = 0;
  lr->touched = 0;
  for (int k = 0; k < n; k++) {
    if (single[0]) {
      msgf(path, sizeof path, "%s", single);
    } else {
      char name[64];
      ckpt_file_name(name, sizeof name, steps[k]);
      msgf(path, sizeof path, "%s/%s", dir, name);
    }
    why[0] = 0;
    int rc = try_load(s, path, lr, why, sizeof why);
    if (rc == 1) {
      lr->status = 1;
      const double dt = now_s() - t0;
      double bytes = 0;
      for (int i = 0; i < s->nent; i++) bytes += 4.0 * NCAT * (double)entry_numel(&s->ents[i]);
      char b[32];
      format_bytes(bytes, b, sizeof b);
      msgf(lr->msg, sizeof lr->msg, "resumed from %s (step %lld, %s of tensors verified and loaded in %.2f s)%s%s", path,
               (long long)lr->step, b, dt, skipped[0] ? "; skipped " : "", skipped);
      break;
    }
    if (rc == -2 || single[0]) {
      lr->status = -1;
      msgf(lr->msg, sizeof lr->msg, "cannot resume from %s: %s", path, why);
      break;
    }
    if (s->rank == 0) {
      fprintf(stderr, "boost: checkpoint %s is unusable: %s; trying the previous one\n", path, why);
      fflush(stderr);
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t used = strlen(skipped);
    msgf(skipped + used, sizeof skipped - used, "%s%s (%.200s)", used ? ", " : "", base, why);
  }
  if (lr->status == 0) {
    if (n == 0) msgf(lr->msg, sizeof lr->msg, "fresh start (no checkpoint in %s)", dir);
    else msgf(lr->msg, sizeof lr->msg, "fresh start: no usable checkpoint in %s; skipped %s", dir, skipped);
  }
  free(steps);
}

/* ---- the writer thread ----------------------------------------------------- */

static void *writer_main(void *arg) {
  ckpt_session *s = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* signals go to the training thread */
  pthread_setname_np(pthread_self(), "ckpt-writer");  /* top -H, perf --comm */
  if (s->writer_nice) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), s->writer_nice); /* Linux: per thread */
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (s->job_kind == JOB_NONE && !s->quit) pthread_cond_wait(&s->cv, &s->mu);
    const int kind = s->job_kind;
    s->job_kind = JOB_NONE;
    pthread_mutex_unlock(&s->mu);
    if (kind == JOB_NONE) break; /* quit */
    ckpt_h5_quiet();
    h5z_zstd_register();
    if (kind == JOB_SAVE) {
      save_result r;
      do_save(s, &r);
      pthread_mutex_lock(&s->mu);
      s->res = r;
      s->res_unreported = 1;
      s->staged = 1;
      s->busy = 0;
      pthread_cond_broadcast(&s->cv);
      pthread_mutex_unlock(&s->mu);
    } else {
      do_load(s, &s->lres);
      pthread_mutex_lock(&s->mu);
      s->busy = 0;
      pthread_cond_broadcast(&s->cv);
      pthread_mutex_unlock(&s->mu);
    }
  }
  H5close();
  return NULL;
}

static void submit(ckpt_session *s, int kind, int staged) {
  pthread_mutex_lock(&s->mu);
  s->job_kind = kind;
  s->busy = 1;
  s->staged = staged;
  s->update_wait = 0.0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Blocks until the job in flight is done; returns the seconds waited. */
static double wait_idle(ckpt_session *s) {
  const double t0 = now_s();
  pthread_mutex_lock(&s->mu);
  while (s->busy) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return now_s() - t0;
}

/* ---- session (training thread) -------------------------------------------- */

static int64_t env_int(const char *name, int64_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  long long x = strtoll(v, &end, 10);
  return end == v ? dflt : (int64_t)x;
}

ckpt_session *ckpt_open(const train_config *cfg, const process_grid *grid, model *m) {
  if (!cfg->ckpt.dir[0]) return NULL;
  ckpt_session *s = calloc(1, sizeof *s);
  if (!s) boost_fail("out of memory opening the checkpoint session");
  s->cfg = *cfg;
  s->grid = grid;
  s->m = m;
  s->rank = grid->rank;
  s->world_size = grid->world_size;
  msgf(s->dir, sizeof s->dir, "%s", cfg->ckpt.dir);
  s->acts_mode = (int)cfg->ckpt.activations;
  s->sync_mode = env_int("BOOST_CKPT_SYNC", 0) != 0;
  s->delay_ms = (int)env_int("BOOST_CKPT_TEST_DELAY_MS", 0);
  s->no_reserve = env_int("BOOST_CKPT_TEST_NO_RESERVE", 0) != 0;
  /* Below training by default: on a CPU node whose cores train, the writer
   * then fills the gaps instead of stretching every step (PERFORMANCE.md). */
  s->writer_nice = (int)env_int("BOOST_CKPT_WRITER_NICE", 10);
  s->fail_step = -1;
  s->fail_rank = -1;
  const char *fs = getenv("BOOST_CKPT_TEST_FAIL");
  if (fs && *fs) {
    long long a = -1, b = -1;
    int k = sscanf(fs, "%lld:%lld", &a, &b);
    if (k >= 1) s->fail_step = a;
    if (k == 2) s->fail_rank = (int)b;
  }
  s->last_staged_step = -1;
  s->last_committed_step = -1;
  for (int c = 0; c < NCAT; c++)
    if (!m->reg.arena[cat_tensor[c]]) boost_fail("checkpoints need the %s arena allocated", tensor_category_names[cat_tensor[c]]);

  /* Rank 0 prepares the directory; everyone gets the verdict. */
  char err[1024] = "";
  int ok = 1;
  if (s->rank == 0) {
    if (ckpt_fs_mkdirs(s->dir, err, sizeof err) != 0) {
      ok = 0;
    } else {
      char removed[400];
      int nrem = ckpt_fs_clean_temporaries(s->dir, removed, sizeof removed);
      if (nrem > 0) msgf(s->open_note, sizeof s->open_note, "removed %d temporar%s left by an interrupted run (%s)", nrem, nrem == 1 ? "y" : "ies", removed);
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, grid->world);
  MPI_Bcast(err, (int)sizeof err, MPI_CHAR, 0, grid->world);
  if (!ok) boost_fail("ckpt.dir: %s", err);
  /* Every rank must see the directory (MPI-IO needs a shared file system). */
  struct stat st;
  ok = stat(s->dir, &st) == 0 && S_ISDIR(st.st_mode);
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, grid->world);
  if (!ok) boost_fail("ckpt.dir %s is not visible on every rank (checkpoints need a shared file system)", s->dir);

  build_table(s);
  MPI_Comm_dup(grid->world, &s->comm);
  MPI_Comm_dup(grid->dp_comm, &s->dp_comm);
  if (s->rank == 0) {
    char p[PATH_MAX];
    msgf(p, sizeof p, "%s/checkpoints.jsonl", s->dir);
    s->log = fopen(p, "a");
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->thread, NULL, writer_main, s) != 0) boost_fail("cannot start the checkpoint writer thread");
  s->thread_started = 1;
  return s;
}

int ckpt_resume(ckpt_session *s, train_state *st, char *msg, size_t msglen) {
  if (!s) {
    msgf(msg, msglen, "fresh start");
    return 0;
  }
  const char *note = s->open_note[0] ? s->open_note : NULL;
  if (strcmp(s->cfg.ckpt.resume, "none") == 0 || s->cfg.ckpt.resume[0] == 0) {
    msgf(msg, msglen, "fresh start (ckpt.resume=none)%s%s", note ? "; " : "", note ? note : "");
    return 0;
  }
  submit(s, JOB_LOAD, 1);
  wait_idle(s);
  load_result *lr = &s->lres;
  if (lr->status < 0) boost_fail("%s", lr->msg);
  if (lr->status == 0) {
    if (lr->touched) { /* a failed attempt wrote into the arenas: start clean */
      model_init_params(s->m, (uint64_t)s->cfg.train.seed);
      tensor_registry *reg = &s->m->reg;
      memset(reg->arena[TENSOR_ADAM_M], 0, reg->numel * sizeof(float));
      memset(reg->arena[TENSOR_ADAM_V], 0, reg->numel * sizeof(float));
    }
    msgf(msg, msglen, "%s%s%s", lr->msg, note ? "; " : "", note ? note : "");
    free(lr->losses);
    lr->losses = NULL;
    return 0;
  }
  st->step = lr->step;
  st->data_cursor = lr->data_cursor;
  st->tokens_seen = lr->tokens_seen;
  st->loss_count = 0;
  for (int64_t i = 0; i < lr->nloss; i++) train_state_push_loss(st, lr->losses[i]);
  free(lr->losses);
  lr->losses = NULL;
  s->last_committed_step = lr->step;
  s->last_staged_step = lr->step;
  msgf(msg, msglen, "%s%s%s", lr->msg, note ? "; " : "", note ? note : "");
  return 1;
}

void ckpt_before_update(ckpt_session *s) {
  if (!s) return;
  s->deferred_seen = 1;
  pthread_mutex_lock(&s->mu);
  if (s->busy && !s->staged) {
    const double t0 = now_s();
    while (s->busy && !s->staged) pthread_cond_wait(&s->cv, &s->mu);
    s->update_wait += now_s() - t0;
  }
  pthread_mutex_unlock(&s->mu);
}

static void log_result(ckpt_session *s, const save_result *r) {
  if (!s->log) return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)r->step);
  cJSON_AddBoolToObject(o, "committed", r->ok);
  if (!r->ok) cJSON_AddStringToObject(o, "reason", r->reason);
  cJSON_AddNumberToObject(o, "stall_s", r->stall_s);
  cJSON_AddNumberToObject(o, "update_wait_s", r->update_wait_s);
  cJSON_AddNumberToObject(o, "wait_prev_s", r->wait_prev_s);
  cJSON_AddNumberToObject(o, "write_s", r->write_s);
  cJSON_AddNumberToObject(o, "write_cpu_s", r->write_cpu_s);
  cJSON_AddNumberToObject(o, "file_bytes", r->file_bytes);
  cJSON *raw = cJSON_AddObjectToObject(o, "raw_bytes"), *sto = cJSON_AddObjectToObject(o, "stored_bytes");
  double tr = 0, ts = 0;
  for (int k = 0; k < 3; k++) {
    cJSON_AddNumberToObject(raw, kind_names[k], r->raw[k]);
    cJSON_AddNumberToObject(sto, kind_names[k], r->stored[k]);
    tr += r->raw[k];
    ts += r->stored[k];
  }
  cJSON_AddNumberToObject(o, "ratio", ts > 0 ? tr / ts : 0.0);
  cJSON_AddNumberToObject(o, "dp", s->grid->dp);
  cJSON_AddNumberToObject(o, "tp", s->grid->tp);
  cJSON_AddNumberToObject(o, "pp", s->grid->pp);
  cJSON_AddBoolToObject(o, "sync", s->sync_mode);
  if (r->retention[0]) cJSON_AddStringToObject(o, "retention", r->retention);
  char *txt = cJSON_PrintUnformatted(o);
  if (txt) {
    fprintf(s->log, "%s\n", txt);
    fflush(s->log);
  }
  free(txt);
  cJSON_Delete(o);
}

/* Takes the finished result (if not yet reported): status text, log lines. */
static void collect(ckpt_session *s, char *out, size_t outlen, int print) {
  if (out && outlen) out[0] = 0;
  pthread_mutex_lock(&s->mu);
  int have = !s->busy && s->res_unreported;
  save_result r;
  if (have) {
    s->res.update_wait_s = s->update_wait;
    s->res.stall_s += s->update_wait;
    r = s->res;
    s->res_unreported = 0;
  }
  pthread_mutex_unlock(&s->mu);
  if (!have) return;
  s->last_ok = r.ok;
  s->last_done = r;
  if (r.ok) s->last_committed_step = r.step;
  double tr = 0, ts = 0;
  for (int k = 0; k < 3; k++) tr += r.raw[k], ts += r.stored[k];
  char b[32];
  format_bytes(r.file_bytes, b, sizeof b);
  if (r.ok && out)
    msgf(out, outlen, "step %lld committed %.2f s %s %.2fx stall %.0f ms", (long long)r.step, r.write_s, b,
             ts > 0 ? tr / ts : 0.0, r.stall_s * 1e3);
  else if (out)
    msgf(out, outlen, "step %lld FAILED: %s", (long long)r.step, r.reason);
  if (s->rank == 0) {
    log_result(s, &r);
    if (!r.ok) {
      fprintf(stderr, "boost: checkpoint of step %lld FAILED, nothing committed (training continues; ", (long long)r.step);
      if (s->last_committed_step >= 0) fprintf(stderr, "step %lld remains the latest): %s\n", (long long)s->last_committed_step, r.reason);
      else fprintf(stderr, "no checkpoint committed yet): %s\n", r.reason);
      fflush(stderr);
    } else if (r.ok && !r.latest_ok) {
      fprintf(stderr, "boost: checkpoint of step %lld committed but the `latest` pointer was not updated\n", (long long)r.step);
    }
    if (print && out && out[0]) {
      printf("checkpoint: %s\n", out);
      fflush(stdout);
    }
  }
}

void ckpt_after_step(ckpt_session *s, const train_state *st, int force, char *status, size_t statuslen) {
  if (statuslen) msgf(status, statuslen, "-");
  if (!s) return;
  char done[REASON_MAX + 128] = "", waited[96] = "";
  collect(s, done, sizeof done, 0);
  const int due = force || (s->cfg.ckpt.every > 0 && st->step % s->cfg.ckpt.every == 0);
  if (!due || st->step == s->last_staged_step) {
    if (done[0] && statuslen) msgf(status, statuslen, "%s", done);
    return;
  }
  double wait_prev = 0.0;
  pthread_mutex_lock(&s->mu);
  int inflight = s->busy;
  pthread_mutex_unlock(&s->mu);
  if (inflight) {
    wait_prev = wait_idle(s);
    char d2[sizeof done];
    collect(s, d2, sizeof d2, 0);
    if (d2[0]) msgf(done, sizeof done, "%s", d2);
    msgf(waited, sizeof waited, "waited %.2f s; ", wait_prev);
  }
  const double t1 = now_s();
  save_job *j = &s->job;
  j->step = st->step;
  j->data_cursor = st->data_cursor;
  j->tokens_seen = st->tokens_seen;
  if (st->loss_count > j->loss_cap) {
    j->loss_cap = st->loss_count + 1024;
    float *p = realloc(j->losses, (size_t)j->loss_cap * sizeof *p);
    if (!p) boost_fail("out of memory staging the loss history");
    j->losses = p;
  }
  j->nloss = st->loss_count;
  if (j->nloss) memcpy(j->losses, st->loss_history, (size_t)j->nloss * sizeof(float));
  stage_activations(s, st);
  j->deferred = s->deferred_seen && !s->sync_mode;
  if (!j->deferred) copy_to_stage(s, 1);
  const double stall = now_s() - t1;
  j->stall_s = stall;
  j->wait_prev_s = wait_prev;
  s->attempted = 1;
  s->last_staged_step = st->step;
  submit(s, JOB_SAVE, !j->deferred);
  char now_txt[96] = "";
  if (s->sync_mode) { /* the baseline: training blocks for the whole save */
    wait_idle(s);
    pthread_mutex_lock(&s->mu);
    s->res.stall_s = now_s() - t1;
    pthread_mutex_unlock(&s->mu);
    collect(s, done, sizeof done, 0);
  } else {
    msgf(now_txt, sizeof now_txt, "step %lld staged, stall %.0f ms", (long long)st->step, stall * 1e3);
  }
  if (statuslen)
    msgf(status, statuslen, "%s%s%s%s", waited, done, done[0] && now_txt[0] ? " | " : "", now_txt);
}

int ckpt_wait(ckpt_session *s) {
  if (!s) return 0;
  wait_idle(s);
  collect(s, NULL, 0, 0);
  if (!s->attempted) return 0;
  return s->last_ok ? 0 : -1;
}

void ckpt_close(ckpt_session *s) {
  if (!s) return;
  wait_idle(s);
  char done[REASON_MAX + 128];
  collect(s, done, sizeof done, 1);
  pthread_mutex_lock(&s->mu);
  s->quit = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (s->thread_started) pthread_join(s->thread, NULL);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  MPI_Comm_free(&s->comm);
  MPI_Comm_free(&s->dp_comm);
  if (s->log) fclose(s->log);
  boost_free(s->stage);
  boost_free(s->ents);
  free(s->job.losses);
  free(s->job.acts);
  free(s->job.act_buf);
  free(s->lres.losses);
  free(s);
}

int ckpt_last_stats(const ckpt_session *s, ckpt_stats *out) {
  memset(out, 0, sizeof *out);
  if (!s || !s->last_done.valid) return -1;
  const save_result *r = &s->last_done;
  out->step = r->step;
  out->committed = r->ok;
  out->stall_s = r->stall_s;
  out->wait_prev_s = r->wait_prev_s;
  out->write_s = r->write_s;
  for (int k = 0; k < 3; k++) {
    out->raw_bytes[k] = r->raw[k];
    out->stored_bytes[k] = r->stored[k];
  }
  out->file_bytes = r->file_bytes;
  return 0;
}
