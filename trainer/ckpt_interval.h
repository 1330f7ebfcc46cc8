/* When to checkpoint by the clock: a fixed wall-clock interval
 * (ckpt.every_seconds) or the interval that minimises the expected loss of
 * work (ckpt.every = auto), from the measured cost of a checkpoint to the
 * training (delta: its stall plus any wait for the previous one) and the
 * mean time between interruptions M (ckpt.mtbf, or the run's own history of
 * starts). docs/CHECKPOINT_FORMAT.md, "Choosing the interval", explains the
 * choice. One clock per level: ckpt.local_every = auto gives the local
 * level its own (its own delta, the same M).
 *
 *   Young:  tau = sqrt(2 delta M)
 *   Daly:   tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta / 2M) + (delta / 2M) / 9] - delta   for delta < 2M
 *           tau = M                                                                       otherwise
 *
 * auto uses Daly's form (it agrees with Young's when delta << M and stays
 * right when checkpoints are expensive against M). */
#ifndef BOOST_CKPT_INTERVAL_H
#define BOOST_CKPT_INTERVAL_H

#include "config.h"

double ckpt_interval_young(double delta_s, double mtbf_s);
double ckpt_interval_daly(double delta_s, double mtbf_s);

/* M from a run's history: its wall time since the first start divided by
 * its number of starts (SCR's estimate); 0 when the history is too short to
 * say (fewer than two starts). */
double ckpt_interval_mtbf_estimate(double first_start_s, double now_s, int starts);

typedef enum { INTERVAL_STEPS = 0, INTERVAL_SECONDS, INTERVAL_AUTO } interval_mode;

typedef struct {
  const char *what;    /* the level, for its log lines: "checkpoint" or "local checkpoint" */
  interval_mode mode;
  double tau_s;        /* the wall-clock interval in force */
  double delta_s;      /* auto: the checkpoint cost tau was computed from */
  double mtbf_s;       /* auto: M */
  char mtbf_source[96];/* auto: where M came from ("ckpt.mtbf", "3 starts in 5.2 h", "default") */
  double delta_test_s; /* > 0: delta injected by a test (BOOST_CKPT_TEST_DELTA_S) instead of measured */
  double last_s;       /* when the last checkpoint was taken (or the run started) */
} ckpt_interval;

/* The default M when neither ckpt.mtbf nor the history gives one: a day. */
#define CKPT_INTERVAL_DEFAULT_MTBF_S 86400.0

/* From the config; history_mtbf_s / history_source: the history's estimate
 * (0: none). now: the run's start. */
void ckpt_interval_init(ckpt_interval *iv, const train_config *cfg, double history_mtbf_s, const char *history_source,
                        double now_s);
/* The same for the local level (ckpt.local_every = auto): its own interval
 * from its own cost, with the M the file level uses. */
void ckpt_interval_init_local(ckpt_interval *iv, const train_config *cfg, double history_mtbf_s,
                              const char *history_source, double now_s);
/* auto before any checkpoint was measured: delta taken as one training step
 * (an asynchronous checkpoint stalls about that long or less). Writes a line
 * for the log into msg when tau was set (1), else returns 0. */
int ckpt_interval_first_estimate(ckpt_interval *iv, double step_s, char *msg, size_t msglen);
/* Whether a checkpoint is due by the clock on this rank (callers agree
 * across ranks). */
int ckpt_interval_due(const ckpt_interval *iv, double now_s);
/* A checkpoint was taken at now. */
void ckpt_interval_taken(ckpt_interval *iv, double now_s);
/* auto: a checkpoint's measured cost; tau is recomputed, and when it moved
 * by more than 10 % a line for the log is written into msg (returns 1). */
int ckpt_interval_measured(ckpt_interval *iv, double delta_s, char *msg, size_t msglen);

#endif
