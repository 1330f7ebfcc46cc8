/* The plan's inputs gathered across the grid (collective), then the pure
 * plan (ckpt_plan.h): where the ranks' shards meet decides the chunk
 * shapes, so that every chunk has one writer. */
#ifndef BOOST_CKPT_TABLE_H
#define BOOST_CKPT_TABLE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_plan.h"
#include "grid.h"
#include "status.h"

/* The plan from every rank's registry (collective over the grid). Returns
 * -1 with err when the registries disagree; the plan is then to be freed
 * all the same (ckpt_file_plan_free). */
int ckpt_file_plan_build(ckpt_file_plan *p, const process_grid *grid, const tensor_registry *reg, boost_status *err);
/* v[i] = the gcd of every rank's v[i] (0 counts as none). */
void ckpt_allreduce_gcd(int64_t *v, int n, MPI_Comm comm);

#endif
