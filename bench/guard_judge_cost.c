/* The step guard's own work per step (bench/bench_guard.sh): guard_judge
 * with a full window of train.guard_window accepted steps, timed over many
 * calls. It is all the guard adds to a step that is not flagged: it rides
 * the step's existing reduction and communicates nothing.
 *   guard-judge-cost [WINDOW] [CALLS] */
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "guard.h"
#include "util.h"

int main(int argc, char **argv) {
  const int window = argc > 1 ? atoi(argv[1]) : 100, calls = argc > 2 ? atoi(argv[2]) : 20000;
  if (window < 1 || calls < 1) {
    fprintf(stderr, "usage: guard-judge-cost [WINDOW>=1] [CALLS>=1]\n");
    return 2;
  }
  train_config cfg;
  config_defaults(&cfg);
  cfg.train.guard.window = window;
  cfg.train.guard.warmup = window < cfg.train.guard.warmup ? window : cfg.train.guard.warmup;
  train_state st;
  train_state_init(&st);
  for (int i = 0; i < 10 * window; i++) { /* a noisy, falling loss and gradient norm */
    const double noise = (double)((i * 7919) % 101) / 1000.0, g = 0.8 + noise;
    train_state_push_loss(&st, (float)(3.0 + 5.0 / (1 + i) + noise));
    train_rows_push(&st.grad_norms, &g, 1);
  }
  unsigned flagged = 0;
  const double t0 = boost_now_s();
  for (int i = 0; i < calls; i++) flagged += guard_judge(&cfg, &st, 3.05f + (float)(i % 7) * 1e-3f, 0.85).reasons;
  const double us = (boost_now_s() - t0) / calls * 1e6;
  printf("guard_judge, window %d: %.2f us per step (%d calls, %u flagged)\n", window, us, calls, flagged);
  train_state_free(&st);
  return 0;
}
