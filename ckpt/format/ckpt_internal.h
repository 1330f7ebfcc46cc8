/* What the checkpoint package's parts share and no other module needs: the
 * length of a failure's reason, and the training state's datasets
 * (ckpt_state.c). The parts themselves each have their header:
 * ckpt_plan.h (the immutable plan), ckpt_stage.h (the stager), ckpt_worker.h
 * (the writer thread and its job queue), ckpt_save.h (the writer),
 * ckpt_read.h (the reader), ckpt_write_path.h (the two write paths). */
#ifndef BOOST_CKPT_INTERNAL_H
#define BOOST_CKPT_INTERNAL_H

#include <hdf5.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "ckpt_meta.h"
#include "util.h"

#define REASON_MAX 1024

/* ckpt_state.c. The checksum of state set k (ckpt_meta.h CKPT_STATE_SETS)
 * as written. */
uint64_t ckpt_state_hash(int k, const ckpt_series *set);
/* Set k of file f read whole into *out (malloc'd), its stored checksum into
 * *stored and the computed one into *sum. A set the file lacks is empty (0,
 * sums 0) unless a resume needs it (CKPT_META_RESUME). -1 with err: missing,
 * misshapen or unreadable. */
int ckpt_state_read(hid_t f, hid_t dxpl, int k, ckpt_series *out, uint64_t *stored, uint64_t *sum, boost_status *err);

#endif
