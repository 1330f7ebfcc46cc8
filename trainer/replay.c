/* The step guard's replay: the hash of a rank's own gradients, the prints
 * two executions of a step compare and the blame (replay.h). */
#include "replay.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h> /* the same hashes, with AVX2 / AVX-512 where the CPU has them: 3x here */
#endif

#include "check.h"
#include "guard.h"

/* Host floats hashed per download where the backend's memory is not the host's. */
#define HASH_HOST_FLOATS ((size_t)1 << 18)

struct replay {
  boost_backend *be;
  comm_ctx *comm;
  const process_grid *grid;
  XXH3_state_t *hash;    /* this rank's own gradients and loss share, as the dp reduction takes them */
  uint64_t local_digest; /* of the step's latest execution */
  float *host;           /* a host copy's buffer where the backend's memory is not the host's */
};

replay *replay_create(int guard_on, int cuda, boost_backend *be, comm_ctx *comm, const process_grid *grid) {
  if (!guard_on || cuda) return NULL; /* no replay: nothing to hash */
  replay *rp = boost_calloc(1, sizeof *rp);
  rp->be = be;
  rp->comm = comm;
  rp->grid = grid;
  if (!(rp->hash = XXH3_createState())) boost_fail("out of memory for the guard's replay hash");
  return rp;
}

void replay_destroy(replay *rp) {
  if (!rp) return;
  XXH3_freeState(rp->hash);
  boost_free(rp->host);
  boost_free(rp);
}

void replay_begin(replay *rp) {
  if (rp) XXH3_64bits_reset(rp->hash);
}

/* Hashed where the reduction takes them, range by range: the reduction
 * sums in place, so after it no rank holds its own gradients any more.
 * Without data parallelism nothing is reduced and nothing is hashed here:
 * a step costs no hash at all, only a replay does (replay_fingerprint). */
void replay_grads(replay *rp, const float *grads, size_t from, size_t to) {
  if (!rp || to <= from || rp->grid->dp == 1) return; /* no reduction: the fingerprint hashes them when it replays */
  XXH3_state_t *h = rp->hash;
  const uint64_t range[2] = {from, to};
  XXH3_64bits_update(h, range, sizeof range);
  boost_backend *be = rp->be;
  const float *view = be->mem->host_view(be, grads + from);
  if (view) {
    XXH3_64bits_update(h, view, (to - from) * sizeof *view);
    return;
  }
  if (!rp->host) rp->host = boost_calloc(HASH_HOST_FLOATS, sizeof *rp->host);
  for (size_t at = from; at < to; at += HASH_HOST_FLOATS) {
    const size_t n = to - at < HASH_HOST_FLOATS ? to - at : HASH_HOST_FLOATS;
    be->mem->download(be, rp->host, grads + at, n * sizeof *rp->host);
    XXH3_64bits_update(h, rp->host, n * sizeof *rp->host);
  }
}

void replay_end(replay *rp, double local_loss) {
  if (!rp) return;
  XXH3_64bits_update(rp->hash, &local_loss, sizeof local_loss);
  rp->local_digest = XXH3_64bits_digest(rp->hash);
}

step_print replay_fingerprint(const replay *rp, const float *grads, size_t numel, float loss, double gnorm) {
  float *host = boost_calloc(numel ? numel : 1, sizeof *host);
  rp->be->mem->download(rp->be, host, grads, numel * sizeof *host);
  const double global[2] = {loss, gnorm};
  step_print p = {rp->local_digest, XXH3_64bits(host, numel * sizeof *host), XXH3_64bits(global, sizeof global)};
  if (rp->grid->dp == 1) { /* nothing reduced them: the rank's own gradients are the arena */
    const uint64_t own[2] = {rp->local_digest, p.reduced};
    p.local = XXH3_64bits(own, sizeof own);
  }
  boost_free(host);
  return p;
}

unsigned replay_differences(const step_print *a, const step_print *b) {
  return (a->local != b->local) | (a->reduced != b->reduced) << 1 | (a->global != b->global) << 2;
}

int replay_agree_blame(replay *rp, unsigned diff, replay_blame *b) {
  const process_grid *g = rp->grid;
  const int W = g->world_size;
  double *v = boost_calloc((size_t)W, sizeof *v);
  v[g->rank] = diff;
  comm_control_sum_f64(rp->comm, COMM_WORLD, v, W);
  memset(b, 0, sizeof *b);
  b->rank = -1;
  for (int where = GUARD_WHERE_LOCAL; where <= GUARD_WHERE_GLOBAL && b->rank < 0; where++)
    for (int k = 0; k < W; k++)
      if ((unsigned)v[k] & 1u << (where - 1)) {
        if (b->rank < 0) b->rank = k, b->where = where;
        b->ranks++;
      }
  boost_free(v);
  if (b->rank < 0) return 0;
  char name[256] = "";
  if (gethostname(name, sizeof name - 1) != 0) snprintf(name, sizeof name, "?");
  comm_control_bcast(g->world, COMM_WORLD, "the faulty rank's host", name, (int)sizeof name, b->rank);
  snprintf(b->host, sizeof b->host, "%s", name);
  return 1;
}

void replay_blame_others(const replay_blame *b, char *out, size_t outlen) {
  out[0] = 0;
  if (b->ranks > 1) snprintf(out, outlen, " (%d ranks differed there: the lowest is named)", b->ranks);
}
