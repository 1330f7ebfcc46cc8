/* The step guard's rollback on the file system (ckpt_rollback.c). */
#ifndef BOOST_CKPT_ROLLBACK_H
#define BOOST_CKPT_ROLLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Rank 0: the committed checkpoints of dir newer than max_step renamed
 * *.superseded (never deleted: a person may still want them), `latest`
 * pointed at the newest left, or removed when none is. 0, or -1 with err. */
int ckpt_set_aside_newer(const char *dir, int64_t max_step, boost_status *err);

#endif
