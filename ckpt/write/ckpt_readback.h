/* The read-back verification of a written checkpoint, before its commit. */
#ifndef BOOST_CKPT_READBACK_H
#define BOOST_CKPT_READBACK_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_agree.h"
#include "ckpt_plan.h"
#include "ckpt_stage.h"
#include "status.h"

/* Every rank reads back, decodes (on `threads` threads) and hashes the
 * bands it wrote to the closed file at path and compares the sums with
 * `sums` (collective). Returns this rank's ok; err says what failed. */
int ckpt_readback(const ckpt_team *team, const ckpt_file_plan *p, ckpt_stager *st, int threads, const char *path,
                  const uint64_t *sums, boost_status *err);

#endif
