#include "comm.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

const char *const comm_group_names[COMM_NUM_GROUPS] = {"tp", "dp", "pp", "world"};
const char *const comm_kind_names[COMM_NUM_KINDS] = {"allreduce", "allgather", "reduce_scatter", "sendrecv"};

void comm_init_self(comm_ctx *c) {
  memset(c, 0, sizeof *c);
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    c->comm[g] = MPI_COMM_SELF;
    c->size[g] = 1;
  }
}

comm_ctx *comm_self(void) {
  static comm_ctx self;
  static int ready;
  if (!ready) {
    comm_init_self(&self);
    ready = 1;
  }
  return &self;
}

void comm_init(comm_ctx *c, MPI_Comm tp, MPI_Comm dp, MPI_Comm pp, MPI_Comm world) {
  memset(c, 0, sizeof *c);
  c->comm[COMM_TP] = tp;
  c->comm[COMM_DP] = dp;
  c->comm[COMM_PP] = pp;
  c->comm[COMM_WORLD] = world;
  for (int g = 0; g < COMM_NUM_GROUPS; g++) {
    MPI_Comm_size(c->comm[g], &c->size[g]);
    MPI_Comm_rank(c->comm[g], &c->rank[g]);
  }
}

void comm_reset_counts(comm_ctx *c) { memset(c->count, 0, sizeof c->count); }

uint64_t comm_bytes(const comm_ctx *c, comm_group g, comm_kind k) { return c->count[g][k].bytes; }

static void count(comm_ctx *c, comm_group g, comm_kind k, size_t bytes, double t0) {
  comm_counter *ct = &c->count[g][k];
  ct->bytes += bytes;
  ct->calls++;
  ct->seconds += MPI_Wtime() - t0;
}

/* MPI counts are int: large buffers go in pieces. */
#define COMM_CHUNK ((size_t)1 << 28)

static void allreduce(comm_ctx *c, comm_group g, float *buf, size_t n, MPI_Op op) {
  if (c->size[g] == 1 || n == 0) return;
  double t0 = MPI_Wtime();
  for (size_t off = 0; off < n; off += COMM_CHUNK) {
    int cnt = (int)(n - off < COMM_CHUNK ? n - off : COMM_CHUNK);
    MPI_Allreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, op, c->comm[g]);
  }
  count(c, g, COMM_ALLREDUCE, n * sizeof(float), t0);
}

void comm_allreduce_sum(comm_ctx *c, comm_group g, float *buf, size_t n) { allreduce(c, g, buf, n, MPI_SUM); }
void comm_allreduce_max(comm_ctx *c, comm_group g, float *buf, size_t n) { allreduce(c, g, buf, n, MPI_MAX); }

void comm_allreduce_sum_f64(comm_ctx *c, comm_group g, double *buf, size_t n) {
  if (c->size[g] == 1 || n == 0) return;
  BOOST_ASSERT(n < (size_t)1 << 31);
  double t0 = MPI_Wtime();
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, c->comm[g]);
  count(c, g, COMM_ALLREDUCE, n * sizeof(double), t0);
}

void comm_reduce_scatter_sum(comm_ctx *c, comm_group g, float *buf, size_t chunk) {
  if (c->size[g] == 1 || chunk == 0) return;
  BOOST_ASSERT(chunk < (size_t)1 << 31);
  double t0 = MPI_Wtime();
  /* In place, MPI leaves the result at the start of the buffer. */
  MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, (int)chunk, MPI_FLOAT, MPI_SUM, c->comm[g]);
  if (c->rank[g] != 0) memmove(buf + (size_t)c->rank[g] * chunk, buf, chunk * sizeof(float));
  count(c, g, COMM_REDUCE_SCATTER, chunk * c->size[g] * sizeof(float), t0);
}

void comm_allgather_chunks(comm_ctx *c, comm_group g, float *buf, size_t chunk) {
  if (c->size[g] == 1 || chunk == 0) return;
  BOOST_ASSERT(chunk < (size_t)1 << 31);
  double t0 = MPI_Wtime();
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)chunk, MPI_FLOAT, c->comm[g]);
  count(c, g, COMM_ALLGATHER, chunk * sizeof(float), t0);
}

void comm_allgather_cols(comm_ctx *c, comm_group g, const float *local, float *full, size_t rows, size_t cols) {
  const int p = c->size[g];
  if (p == 1) {
    memcpy(full, local, rows * cols * sizeof(float));
    return;
  }
  double t0 = MPI_Wtime();
  size_t n = rows * cols;
  BOOST_ASSERT(n * p < (size_t)1 << 31);
  /* Gather [p][rows][cols] into the tail of full's space? full is exactly
   * rows*cols*p, so gather into a scratch then interleave. */
  float *stage = boost_calloc(n * p, sizeof(float));
  MPI_Allgather(local, (int)n, MPI_FLOAT, stage, (int)n, MPI_FLOAT, c->comm[g]);
  for (int r = 0; r < p; r++)
    for (size_t i = 0; i < rows; i++) memcpy(full + i * cols * p + r * cols, stage + (size_t)r * n + i * cols, cols * sizeof(float));
  boost_free(stage);
  count(c, g, COMM_ALLGATHER, n * sizeof(float), t0);
}

void comm_scatter_cols(const comm_ctx *c, comm_group g, const float *full, float *local, size_t rows, size_t cols) {
  const int p = c->size[g], me = c->rank[g];
  for (size_t i = 0; i < rows; i++) memcpy(local + i * cols, full + i * cols * p + me * cols, cols * sizeof(float));
}

void comm_isend(comm_ctx *c, comm_group g, const float *buf, size_t n, int peer, int tag, MPI_Request *req) {
  BOOST_ASSERT(n < (size_t)1 << 31);
  double t0 = MPI_Wtime();
  MPI_Isend(buf, (int)n, MPI_FLOAT, peer, tag, c->comm[g], req);
  count(c, g, COMM_SENDRECV, n * sizeof(float), t0);
}

void comm_recv(comm_ctx *c, comm_group g, float *buf, size_t n, int peer, int tag) {
  BOOST_ASSERT(n < (size_t)1 << 31);
  double t0 = MPI_Wtime();
  MPI_Recv(buf, (int)n, MPI_FLOAT, peer, tag, c->comm[g], MPI_STATUS_IGNORE);
  count(c, g, COMM_SENDRECV, n * sizeof(float), t0);
}

void comm_format_counts(const comm_ctx *c, char *out, size_t outlen) {
  size_t used = 0;
  out[0] = '\0';
  for (int g = 0; g < COMM_NUM_GROUPS; g++)
    for (int k = 0; k < COMM_NUM_KINDS; k++) {
      const comm_counter *ct = &c->count[g][k];
      if (!ct->calls || used >= outlen) continue;
      used += (size_t)snprintf(out + used, outlen - used, "%s%s %s %.2f MiB/%llu", used ? ", " : "", comm_group_names[g],
                               comm_kind_names[k], (double)ct->bytes / (1 << 20), (unsigned long long)ct->calls);
    }
  if (!used) snprintf(out, outlen, "none");
}
