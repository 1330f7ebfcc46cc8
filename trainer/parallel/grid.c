#include "grid.h"

#include <stdio.h>
#include <string.h>

void grid_coords(int rank, int dp, int tp, int pp, int *dp_rank, int *tp_rank, int *pp_rank) {
  (void)pp;
  *tp_rank = rank % tp;
  *dp_rank = (rank / tp) % dp;
  *pp_rank = rank / (tp * dp);
}

int grid_rank_of(int dp_rank, int tp_rank, int pp_rank, int dp, int tp) { return tp_rank + tp * dp_rank + tp * dp * pp_rank; }

int grid_init(process_grid *g, MPI_Comm world, int dp, int tp, int pp, boost_status *err) {
  memset(g, 0, sizeof *g);
  int size, rank;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  if (dp < 1 || tp < 1 || pp < 1 || (long)dp * tp * pp != size) {
    boost_err(err, "layout parallel.dp*tp*pp = %d*%d*%d = %ld does not match the %d MPI ranks", dp, tp, pp,
             (long)dp * tp * pp, size);
    return -1;
  }
  g->dp = dp;
  g->tp = tp;
  g->pp = pp;
  g->rank = rank;
  g->world_size = size;
  grid_coords(rank, dp, tp, pp, &g->dp_rank, &g->tp_rank, &g->pp_rank);
  MPI_Comm_dup(world, &g->world);
  /* color = the coordinates that stay fixed; key = the one that varies */
  MPI_Comm_split(world, g->dp_rank + dp * g->pp_rank, g->tp_rank, &g->tp_comm);
  MPI_Comm_split(world, g->tp_rank + tp * g->pp_rank, g->dp_rank, &g->dp_comm);
  MPI_Comm_split(world, g->tp_rank + tp * g->dp_rank, g->pp_rank, &g->pp_comm);
  return 0;
}

void grid_free(process_grid *g) {
  if (g->world == MPI_COMM_NULL || g->world == 0) return;
  MPI_Comm_free(&g->tp_comm);
  MPI_Comm_free(&g->dp_comm);
  MPI_Comm_free(&g->pp_comm);
  MPI_Comm_free(&g->world);
  memset(g, 0, sizeof *g);
}
