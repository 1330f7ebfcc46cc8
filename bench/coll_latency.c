/* Small-message latency of the collectives a checkpoint's coordination
 * uses (bench/bench_ckpt_scale.sh): MPI_Allreduce of one int64 and of a
 * 1 KiB vector, MPI_Bcast of 64 bytes, MPI_Gather of 8 bytes per rank.
 * Prints one JSON line (rank 0) with the median microseconds of each over
 * ITERS repetitions, barrier-separated.
 *
 *   mpirun -n P build/bench/coll-latency [ITERS] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iters = argc > 1 ? atoi(argv[1]) : 200;
  if (iters < 1) {
    if (rank == 0) fprintf(stderr, "coll-latency: ITERS must be a positive count\n");
    MPI_Finalize();
    return 2;
  }
  double *t = calloc((size_t)iters, sizeof *t), med[4];
  int64_t v[128] = {0}, *all = calloc((size_t)size, sizeof *all);
  char b64[64] = {0};
  for (int op = 0; op < 4; op++) {
    for (int i = 0; i < iters; i++) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (op == 0) MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
      if (op == 1) MPI_Allreduce(MPI_IN_PLACE, v, 128, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
      if (op == 2) MPI_Bcast(b64, sizeof b64, MPI_CHAR, 0, MPI_COMM_WORLD);
      if (op == 3) MPI_Gather(v, 1, MPI_INT64_T, all, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
      t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* the slowest rank's */
    qsort(t, (size_t)iters, sizeof *t, cmp);
    med[op] = t[iters / 2];
  }
  if (rank == 0)
    printf("{\"ranks\": %d, \"allreduce_8B_us\": %.1f, \"allreduce_1KiB_us\": %.1f, \"bcast_64B_us\": %.1f, "
           "\"gather_8B_us\": %.1f}\n",
           size, med[0], med[1], med[2], med[3]);
  free(t);
  free(all);
  MPI_Finalize();
  return 0;
}
