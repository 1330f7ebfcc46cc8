/* Process grid: world = dp * tp * pp ranks, tp varying fastest, then dp,
 * then pp:  rank = tp_rank + tp * dp_rank + tp * dp * pp_rank.
 * Every communicator is derived from that one order (grid_init). */
#ifndef BOOST_GRID_H
#define BOOST_GRID_H

#include <mpi.h>

#include "status.h"

typedef struct {
  int dp, tp, pp;
  int rank, world_size;
  int dp_rank, tp_rank, pp_rank;
  MPI_Comm world;   /* all ranks (a dup of the caller's) */
  MPI_Comm tp_comm; /* same (dp, pp): the tensor-parallel group */
  MPI_Comm dp_comm; /* same (tp, pp): replicas of the same shards */
  MPI_Comm pp_comm; /* same (tp, dp): the stages of one pipeline */
} process_grid;

/* Coordinates of a world rank. */
void grid_coords(int rank, int dp, int tp, int pp, int *dp_rank, int *tp_rank, int *pp_rank);
/* World rank of coordinates. */
int grid_rank_of(int dp_rank, int tp_rank, int pp_rank, int dp, int tp);

/* Collective over world. Returns 0, or -1 with a message when
 * dp * tp * pp differs from the size of world. */
int grid_init(process_grid *g, MPI_Comm world, int dp, int tp, int pp, boost_status *err);
void grid_free(process_grid *g);

#endif
