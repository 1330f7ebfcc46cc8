/* What the local level's parts share (ckpt_local.c: the level, its saves
 * and the local writer thread; ckpt_local_restore.c: the restart's choice
 * and load) and no other module needs. */
#ifndef BOOST_CKPT_LOCAL_INTERNAL_H
#define BOOST_CKPT_LOCAL_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "ckpt_agree.h"
#include "ckpt_local.h"
#include "ckpt_local_partner.h"
#include "ckpt_local_store.h"
#include "ckpt_run_id.h"

#define LOCAL_LIST_MAX 8                /* committed steps a rank reports at a restart */
#define LOCAL_BOUNCE_BYTES (16u << 20) /* host buffer of a device backend's copies */

struct ckpt_local {
  int every;
  char root[CKPT_PATH_MAX]; /* ckpt.local_dir */
  char mine[CKPT_PATH_MAX]; /* root/rank_RRRRR */
  ckpt_team team;           /* a duplicate of the world */
  ckpt_node node;
  ckpt_partner partner;
  const process_grid *grid;
  tensor_store *store;
  ckpt_local_shape shape;
  ckpt_local_shape held_shape; /* that of the rank whose copy this rank keeps (partner.held) */
  unsigned char run_id[CKPT_RUN_ID_BYTES]; /* the run's identity (ckpt_local_set_run; zeros: not yet known) */
  void *bounce;
  int64_t last_step; /* the newest committed (as the training thread knows it) */
  int64_t handed;    /* the newest handed to a save */
  int restored_partner; /* ranks the last restore took from partner copies */
  double last_s;
  /* What the saves cost training (ckpt.local_every = auto feeds it to
   * Young/Daly): the seconds in ckpt_local_save and the optimizer's waits
   * for the save in flight; the save's total once collected. */
  struct {
    double stall_s;      /* the save in flight's, so far */
    int64_t step;        /* the newest collected save (-1: none) */
    double last_stall_s; /* ... its total */
  } cost;
  /* The save job: run on the local writer thread where the arenas are host
   * memory (it reads them while the next forward/backward runs: they
   * change only at the optimizer step, which waits for it), else inline. */
  struct {
    int async;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, busy, reading, quit, unreported;
    int64_t job_step;
    unsigned char *job_blob;
    size_t job_len;
    int res_ok;
    double res_s;
    char res_why[1024];
  } saver;
};

/* The local writer thread (ckpt_local_save.c), started by ckpt_local_open. */
void *ckpt_local_writer_main(void *arg);
/* Waits for the save in flight; its outcome (if not yet told) into
 * note->msg (NULL: not told) and, when it failed, one warning line on rank 0. */
void ckpt_local_collect(ckpt_local *L, boost_status *note);

/* The part sizes of this rank's arenas (the state part is sized at a save). */
static inline uint64_t part_bytes(const ckpt_local *L, int k) {
  if (k == LOCAL_PARAMS) return (uint64_t)L->shape.numel * sizeof(float);
  if (k == LOCAL_ADAM_M || k == LOCAL_ADAM_V) return (uint64_t)(L->shape.mom_end - L->shape.mom_begin) * sizeof(float);
  return 0;
}

static inline float *part_arena(const ckpt_local *L, int k) {
  static const tensor_category cat[3] = {TENSOR_PARAMS, TENSOR_ADAM_M, TENSOR_ADAM_V};
  return L->store->arena[cat[k]];
}

#endif
