/* The step guard (docs/GUARD.md): every step's global loss and gradient
 * norm are judged before the optimizer applies it -- non-finite, or a spike
 * against a trailing window of accepted steps (robust z-scores: median and
 * MAD; and a loss far above the window's largest) -- and the run's skips of
 * data (train.skip_batches, the guard's own) are kept in its ledger
 * (train_state.h: guard_events, skipped), which checkpoints carry.
 * Pure functions of the config and the state: every rank reaches the same
 * verdict from the same reduced values, and a resumed or rolled-back run
 * judges as an uninterrupted one. */
#ifndef BOOST_RUN_GUARD_H
#define BOOST_RUN_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "train_state.h"

/* Why a step is flagged (bits; the reason column of guard_events). */
enum { GUARD_NONFINITE = 1, GUARD_LOSS_Z = 2, GUARD_GNORM_Z = 4, GUARD_LOSS_RATIO = 8 };
/* The action column of guard_events. */
enum { GUARD_ACT_DROPPED = 0, GUARD_ACT_ROLLBACK = 1, GUARD_ACT_ENDED = 2 };
/* The reason column of skipped. */
enum { GUARD_SKIP_CONFIG = 0, GUARD_SKIP_ROLLBACK = 1, GUARD_SKIP_FLAGGED = 2 };

/* The columns of replays (train_state.h): trigger, outcome, where. */
enum { GUARD_REPLAY_EVERY = 0, GUARD_REPLAY_FLAGGED = 1 };
enum { GUARD_REPLAY_SAME = 0, GUARD_REPLAY_HEALED = 1, GUARD_REPLAY_ENDED = 2 };
enum { GUARD_WHERE_NONE = 0, GUARD_WHERE_LOCAL = 1, GUARD_WHERE_REDUCED = 2, GUARD_WHERE_GLOBAL = 3 };

/* The exit status of a run the guard could not heal (EX_DATAERR). */
#define BOOST_EXIT_DIVERGED 65
/* The exit status of a run whose replays found a rank giving different
 * results for the same step (EX_UNAVAILABLE): exclude its host. */
#define BOOST_EXIT_FAULTY_HOST 69

typedef struct {
  unsigned reasons; /* 0: accepted */
  double z_loss, z_gnorm; /* NAN where not judged (fewer than train.guard_warmup steps) */
} guard_verdict;

/* The verdict on a step of global mean loss `loss` and pre-clip gradient
 * norm `gnorm`, given the accepted steps of st (its loss and gradient-norm
 * histories: their last train.guard_window entries). */
guard_verdict guard_judge(const train_config *cfg, const train_state *st, float loss, double gnorm);

/* "non-finite loss", "loss spike (z 9.3)", ... joined by ", " into out. */
void guard_describe(const guard_verdict *v, float loss, double gnorm, char *out, size_t outlen);

/* Whether global batch `batch` is to be passed over: in a range of
 * train.skip_batches or of a rollback's window in st's ledger. Returns 1
 * with the range's last batch and the reason (GUARD_SKIP_*), else 0. */
int guard_skip_range(const train_config *cfg, const train_state *st, int64_t batch, int64_t *last, int *reason);

/* Ledger rows (a skip range identical to one already there is not added). */
void guard_note_event(train_state *st, int64_t batch, const guard_verdict *v, float loss, double gnorm, int action);
void guard_note_skip(train_state *st, int64_t first, int64_t last, int reason);

/* A replay's row: the step st->step + 1 of global batch `batch`. */
void guard_note_replay(train_state *st, int64_t batch, int trigger, int outcome, int rank, int where);
/* Replays in which `rank` was named (what train.guard_sdc_limit bounds,
 * across resumes and rollbacks). */
int guard_sdc_count(const train_state *st, int rank);

/* Rollbacks so far (skip rows of GUARD_SKIP_ROLLBACK). */
int guard_rollbacks(const train_state *st);

/* Flagged batches among the `window` batches up to and including `batch`,
 * since the last rollback; *first_step: the step of the earliest of them. */
int guard_recent_flags(const train_state *st, int64_t batch, int window, int64_t *first_step);

/* Every batch a ledger of skips (rows of GUARD_SKIP_COLS: train_state's
 * `skipped`, /state/skipped_batches) passed over, merged into
 * train.skip_batches ranges ("10-209,311"): what a fresh run is given to
 * train exactly as the run that wrote it. */
void guard_format_skips(const double *skipped, int64_t rows, char *out, size_t outlen);

/* Flagged steps and rollbacks of a ledger of events (rows of
 * GUARD_EVENT_COLS) and skips. */
void guard_count(const double *events, int64_t nevents, const double *skipped, int64_t nskipped, int64_t *flagged,
                 int64_t *rollbacks);

/* "loss spike" etc. for a reason column's bits, joined by '+'. */
void guard_reason_names(unsigned reasons, char *out, size_t outlen);
extern const char *const guard_action_names[3];
extern const char *const guard_replay_outcomes[3]; /* "same bits", ... */
extern const char *const guard_where_names[4];     /* "", "before the reduction", ... */

#endif
