/* Placeholder until the checkpoint writer lands: checkpoints are off. */
#include "ckpt.h"

#include <stdio.h>

#include "check.h"

ckpt_session *ckpt_open(const train_config *cfg, const process_grid *grid, model *m) {
  (void)grid;
  (void)m;
  if (cfg->ckpt.dir[0]) boost_fail("ckpt.dir is set but this build has no checkpoint writer yet");
  return NULL;
}

int ckpt_resume(ckpt_session *s, train_state *st, char *msg, size_t msglen) {
  (void)s;
  (void)st;
  snprintf(msg, msglen, "fresh start");
  return 0;
}

void ckpt_after_step(ckpt_session *s, const train_state *st, int force, char *status, size_t statuslen) {
  (void)s;
  (void)st;
  (void)force;
  snprintf(status, statuslen, "-");
}

int ckpt_wait(ckpt_session *s) {
  (void)s;
  return 0;
}

void ckpt_close(ckpt_session *s) { (void)s; }
