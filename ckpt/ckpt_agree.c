/* Agreement among the writer threads of all ranks (s->comm, the control
 * plane's one watched call: small host values), whether training waits for the writer, and a sleep
 * for the test hooks. A leaf: it calls nothing else of the package, so the
 * session, the writer, the reader and the read-back all use it without
 * calling one another. */
#include <errno.h>
#include <time.h>

#include "ckpt_internal.h"

int ckpt_agree(ckpt_session *s, int ok, const char *mine, char *out, size_t outlen) {
  char buf[REASON_MAX] = "";
  if (!ok && s->world_size > 1) boost_msgf(buf, sizeof buf, "rank %d: %s", s->rank, mine);
  else if (!ok) boost_msgf(buf, sizeof buf, "%s", mine);
  if (comm_control_first_failure(s->comm, COMM_WORLD, "checkpoint agreement", ok, buf, (int)sizeof buf) < 0) return 1;
  if (out) boost_msgf(out, outlen, "%s", buf);
  return 0;
}

int ckpt_all_true(ckpt_session *s, int v) { return comm_control_all(s->comm, COMM_WORLD, "checkpoint agreement", v); }

int ckpt_trainer_waiting(ckpt_session *s) {
  if (s->set.sync_mode) return 1;
  pthread_mutex_lock(&s->sync.mu);
  const int w = s->sync.trainer_waiting > 0;
  pthread_mutex_unlock(&s->sync.mu);
  return w;
}

int ckpt_work_threads(ckpt_session *s) {
  return ckpt_trainer_waiting(s) && s->cfg.threads > 1 ? s->cfg.threads : 1;
}
