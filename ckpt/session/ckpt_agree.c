/* Agreement among the writer threads of all ranks (ckpt_agree.h). */
#include "ckpt_agree.h"

#include "comm.h"
#include "ckpt_internal.h"
#include "util.h"

int ckpt_agree(const ckpt_team *t, int ok, const char *mine, boost_status *out) {
  char buf[REASON_MAX] = "";
  if (!ok && t->size > 1) boost_msgf(buf, sizeof buf, "rank %d: %s", t->rank, mine);
  else if (!ok) boost_msgf(buf, sizeof buf, "%s", mine);
  if (comm_control_first_failure(t->comm, COMM_WORLD, "checkpoint agreement", ok, buf, (int)sizeof buf) < 0) return 1;
  boost_err(out, "%s", buf);
  return 0;
}

int ckpt_all_true(const ckpt_team *t, int v) {
  return comm_control_all(t->comm, COMM_WORLD, "checkpoint agreement", v);
}
