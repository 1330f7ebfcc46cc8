/* Decisions a resume makes before the model is built (every rank calls
 * this, collectively over world, before trainer_run):
 *  - a checkpoint of a different model is refused, naming the keys that
 *    differ (the stored config is compared, not only tensor shapes);
 *  - changed training settings are allowed and listed in the log;
 *  - the stored global batch (the `global_batch` attribute: sequences per
 *    optimizer step; in older files batch_size * grad_accum * dp of the
 *    writer) is kept by default, whatever layout boost-reshard wrote for: batch_size and grad_accum are re-derived for this
 *    run's data-parallel degree, so the sample sequence, the LR schedule and
 *    AdamW's step continue exactly (ckpt.resume_batch=config keeps the
 *    config's split instead, and the log says the global batch changed);
 *  - checkpoints that exist but none of whose attributes can be read stop
 *    the run (never a silent fresh start over them).
 * Rank 0 reads the checkpoint's root attributes and broadcasts them. */
#ifndef BOOST_RESUME_PLAN_H
#define BOOST_RESUME_PLAN_H

#include <mpi.h>
#include <stddef.h>

#include "ckpt_meta.h"
#include "config.h"
#include "status.h"

/* May change cfg->train.batch_size and cfg->train.grad_accum. Returns 0 with
 * a one-line account in note (empty when there is nothing to resume), or -1
 * with err (the same on every rank). */
int resume_plan(train_config *cfg, MPI_Comm world, char *note, size_t notelen, boost_status *err);

/* The global batch (sequences per optimizer step) of the run that wrote a
 * checkpoint with root attributes m and stored config `stored`: its
 * `global_batch` attribute, or, in a file written before that attribute,
 * the stored train.batch_size x train.grad_accum times the data-parallel
 * degree that config ran with (ckpt_meta_config_dp). -1 when unusable. */
long resume_global_batch(const ckpt_meta *m, const train_config *stored);

/* The data-parallel degree this config runs with on world_size ranks (plain
 * `mpirun -n K` without a layout means K replicas). */
int config_dp_degree(const train_config *cfg, int world_size);

#endif
