/* The wall-clock checkpoint interval (ckpt_interval.h). */
#include "ckpt_interval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

double ckpt_interval_young(double delta_s, double mtbf_s) { return sqrt(2.0 * delta_s * mtbf_s); }

double ckpt_interval_daly(double delta_s, double mtbf_s) {
  if (!(delta_s < 2.0 * mtbf_s)) return mtbf_s;
  const double x = delta_s / (2.0 * mtbf_s);
  return sqrt(2.0 * delta_s * mtbf_s) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

double ckpt_interval_mtbf_estimate(double first_start_s, double now_s, int starts) {
  if (starts < 2 || !(now_s > first_start_s)) return 0.0;
  return (now_s - first_start_s) / starts;
}

/* One level's clock: auto (Young/Daly) or every_seconds (0: none). */
static void init_level(ckpt_interval *iv, const char *what, int is_auto, double every_seconds, const train_config *cfg,
                       double history_mtbf_s, const char *history_source, double now_s) {
  memset(iv, 0, sizeof *iv);
  iv->what = what;
  iv->last_s = now_s;
  if (is_auto) {
    iv->mode = INTERVAL_AUTO;
    if (cfg->ckpt.mtbf_s > 0) {
      iv->mtbf_s = cfg->ckpt.mtbf_s;
      snprintf(iv->mtbf_source, sizeof iv->mtbf_source, "ckpt.mtbf");
    } else if (history_mtbf_s > 0) {
      iv->mtbf_s = history_mtbf_s;
      snprintf(iv->mtbf_source, sizeof iv->mtbf_source, "%s", history_source ? history_source : "the run's starts");
    } else {
      iv->mtbf_s = CKPT_INTERVAL_DEFAULT_MTBF_S;
      snprintf(iv->mtbf_source, sizeof iv->mtbf_source, "default: one start so far and no ckpt.mtbf");
    }
    const char *inj = getenv("BOOST_CKPT_TEST_DELTA_S");
    if (inj && *inj) iv->delta_test_s = atof(inj);
  } else if (every_seconds > 0) {
    iv->mode = INTERVAL_SECONDS;
    iv->tau_s = every_seconds;
  }
}

void ckpt_interval_init(ckpt_interval *iv, const train_config *cfg, double history_mtbf_s, const char *history_source,
                        double now_s) {
  init_level(iv, "checkpoint", cfg->ckpt.every_auto, cfg->ckpt.every_seconds, cfg, history_mtbf_s, history_source,
             now_s);
}

void ckpt_interval_init_local(ckpt_interval *iv, const train_config *cfg, double history_mtbf_s,
                              const char *history_source, double now_s) {
  init_level(iv, "local checkpoint", cfg->ckpt.local.every_auto, 0, cfg, history_mtbf_s, history_source, now_s);
}

static void set_tau(ckpt_interval *iv, double delta_s, const char *why, char *msg, size_t msglen) {
  iv->delta_s = delta_s;
  iv->tau_s = ckpt_interval_daly(delta_s, iv->mtbf_s);
  boost_msgf(msg, msglen,
             "%s interval: %.3f s (Daly; Young %.3f s) from a %s cost of %.3f s (%s) and M = %.0f s (%s)", iv->what,
             iv->tau_s, ckpt_interval_young(delta_s, iv->mtbf_s), iv->what, delta_s, why, iv->mtbf_s, iv->mtbf_source);
}

int ckpt_interval_first_estimate(ckpt_interval *iv, double step_s, char *msg, size_t msglen) {
  if (iv->mode != INTERVAL_AUTO || iv->tau_s > 0) return 0;
  if (iv->delta_test_s > 0)
    set_tau(iv, iv->delta_test_s, "injected by BOOST_CKPT_TEST_DELTA_S", msg, msglen);
  else
    set_tau(iv, step_s > 0 ? step_s : 1.0, "first estimate: one training step", msg, msglen);
  return 1;
}

int ckpt_interval_due(const ckpt_interval *iv, double now_s) {
  return iv->mode != INTERVAL_STEPS && iv->tau_s > 0 && now_s - iv->last_s >= iv->tau_s;
}

void ckpt_interval_taken(ckpt_interval *iv, double now_s) { iv->last_s = now_s; }

int ckpt_interval_measured(ckpt_interval *iv, double delta_s, char *msg, size_t msglen) {
  if (iv->mode != INTERVAL_AUTO) return 0;
  if (iv->delta_test_s > 0) delta_s = iv->delta_test_s;
  if (!(delta_s > 0)) delta_s = 1e-3; /* a checkpoint that cost nothing measurable */
  const double old = iv->tau_s, tau = ckpt_interval_daly(delta_s, iv->mtbf_s);
  if (old > 0 && fabs(tau - old) <= 0.1 * old) return 0;
  set_tau(iv, delta_s, "measured", msg, msglen);
  return 1;
}
