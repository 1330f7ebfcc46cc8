/* The step guard's replay (docs/GUARD.md, "Silent data corruption"): what
 * a rank compares between two executions of a step, and the blame the
 * ranks agree on when they differ. Its own state: the hash of this rank's
 * gradients and loss share as the data-parallel reduction takes them, and
 * a host buffer where the backend's memory is not the host's. The run's
 * step source (step_source.h) feeds it; the healing (trainer_heal.c) takes
 * the step again and compares. */
#ifndef BOOST_REPLAY_H
#define BOOST_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "comm.h"
#include "grid.h"

typedef struct replay replay;

/* NULL when the run has no replay (train.guard=off, or train.device=cuda:
 * not bit-deterministic), so nothing is hashed. */
replay *replay_create(int guard_on, int cuda, boost_backend *be, comm_ctx *comm, const process_grid *grid);
void replay_destroy(replay *rp);

/* One execution of a step: begun, given every range of this rank's own
 * gradients the dp reduction takes before it does, ended with the rank's
 * share of the loss. */
void replay_begin(replay *rp);
void replay_grads(replay *rp, const float *grads, size_t from, size_t to);
void replay_end(replay *rp, double local_loss);

/* What a rank compares between two executions of a step: its own
 * gradients and loss share before the data-parallel reduction, its
 * gradients after it (the arena as the optimizer would read them), and the
 * step's reduced loss and norm. */
typedef struct {
  uint64_t local, reduced, global;
} step_print;

/* The latest execution's print: grads, the arena of numel reduced gradients. */
step_print replay_fingerprint(const replay *rp, const float *grads, size_t numel, float loss, double gnorm);
/* The GUARD_WHERE_* bits (1 << (where - 1)) at which two executions differ. */
unsigned replay_differences(const step_print *a, const step_print *b);

/* Whom a difference is blamed on: the earliest place in the step where a
 * rank differed (where: GUARD_WHERE_*; a fault in one rank's backward
 * reaches every replica after the reduction, so only the place before it
 * tells them apart), the lowest rank differing there, its host, and how
 * many ranks differed there. */
typedef struct {
  int where, rank, ranks;
  char host[256];
} replay_blame;

/* Every rank's differences gathered, the blame decided the same on every
 * rank; 0 when no rank differed. Collective. */
int replay_agree_blame(replay *rp, unsigned diff, replay_blame *b);
/* " (3 ranks differed there: the lowest is named)" when more than one did. */
void replay_blame_others(const replay_blame *b, char *out, size_t outlen);

#endif
