/* The training run's test hook BOOST_TRAIN_TEST_FAULT (docs/CHAOS.md,
 * "The test hook of the numeric faults"): the faults the step guard's
 * tests and boost-chaos inject -- a batch of noise, a NaN or a flipped bit
 * in one rank's own gradients before the data-parallel reduction (or a bit
 * after it), a loss far too high -- and the reduction's view of each rank's
 * own gradients, where they land and where the replay hashes them. */
#include "trainer_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* Sample `idx` as noise: tokens drawn uniformly from the data's
 * vocabulary, a pure function of the sample index (every execution, rank
 * and layout draws the same: a bad batch of data, not a hardware fault). */
void noise_window(const run *r, int64_t idx, int32_t *in, int32_t *tg) {
  const uint64_t vocab = (uint64_t)data_vocab_size(r->train_src);
  for (int t = 0; t <= r->T; t++) {
    const int32_t tok = (int32_t)(rng_mix64(rng_mix64((uint64_t)idx) ^ (uint64_t)t) % vocab);
    if (t < r->T) in[t] = tok;
    if (t > 0) tg[t - 1] = tok;
  }
}

/* The test hook BOOST_TRAIN_TEST_FAULT=KIND@BATCH[:RANK][,...]
 * (docs/CHAOS.md): whether an entry of KIND is for global batch `batch`
 * on rank `rank` (RANK omitted: every rank; rank -1: whatever the entry's
 * RANK). spike: the whole batch BATCH is noise (noise_window; RANK does not
 * matter: a batch is every rank's). nan: at BATCH, one of RANK's own
 * gradients is a NaN before the data-parallel reduction, at every
 * execution (the batch's fault). loss-spike: at BATCH, RANK's share of the
 * loss reduction gets 1e4 more; sdc: at BATCH, one bit of one of RANK's own gradients
 * flips before the data-parallel reduction, on the step's first execution
 * only (a transient fault: a replay is clean); sdc-reduced: the same after
 * the reduction; sdc-persistent: from BATCH on, a different bit flips
 * before the reduction at every execution on RANK (a failing part). */
static int fault_entry(const char *kind, int64_t batch, int rank) {
  const char *v = getenv("BOOST_TRAIN_TEST_FAULT");
  const size_t klen = strlen(kind);
  while (v && *v) {
    char *end;
    const int match = !strncmp(v, kind, klen) && v[klen] == '@';
    const char *at = strchr(v, '@');
    const long long b = at ? strtoll(at + 1, &end, 10) : -1;
    if (!at) return 0;
    const long entry_rank = *end == ':' ? strtol(end + 1, &end, 10) : -1;
    const int persistent = !strcmp(kind, "sdc-persistent");
    if (match && (persistent ? batch >= b : b == batch) && (entry_rank < 0 || rank < 0 || entry_rank == rank)) return 1;
    v = strchr(end, ',');
    if (v) v++;
  }
  return 0;
}

static int test_fault(const run *r, const char *kind, int64_t batch) { return fault_entry(kind, batch, r->grid.rank); }

/* The sdc kinds of the hook: the gradient one of whose bits flips at this
 * execution of the step of global batch `batch` (SIZE_MAX: none). kind
 * "sdc" (with "sdc-persistent") flips before the data-parallel reduction,
 * as a fault in the rank's backward would; "sdc-reduced" after it. */
static size_t test_flip_at(const run *r, const char *kind, int64_t batch) {
  static int64_t transient_done[2] = {-1, -1}; /* the batch whose first execution was corrupted, per kind */
  static size_t persistent_count;
  const int after = !strcmp(kind, "sdc-reduced");
  if (test_fault(r, kind, batch) && transient_done[after] != batch) {
    transient_done[after] = batch;
    return r->m.reg.numel / 2;
  }
  if (!after && test_fault(r, "sdc-persistent", batch)) return (persistent_count++ * 7919u) % r->m.reg.numel;
  return SIZE_MAX;
}

/* The mantissa's top bit of gradient `at`: no spike, a different result. */
static void flip_gradient_bit(run *r, size_t at) {
  float g;
  uint32_t bits;
  float *p = r->mt.store.arena[TENSOR_GRADS] + at;
  r->be->mem->download(r->be, &g, p, sizeof g);
  memcpy(&bits, &g, sizeof bits);
  bits ^= 1u << 22;
  memcpy(&g, &bits, sizeof g);
  r->be->mem->upload(r->be, p, &g, sizeof g);
}

/* The dp reduction's view of this rank's own gradients, range by range
 * (grad_buckets_set_local): the test hook's bit flip or NaN lands here, and
 * the replay's hash sees them. */
void test_faults_local_grads(void *ctx, float *grads, size_t from, size_t to) {
  run *r = ctx;
  if (r->fault_at >= from && r->fault_at < to) flip_gradient_bit(r, r->fault_at);
  if (r->nan_at >= from && r->nan_at < to) {
    const float nan = NAN;
    r->be->mem->upload(r->be, grads + r->nan_at, &nan, sizeof nan);
  }
  replay_hash_grads(r, grads, from, to);
}

/* (trainer_internal.h) */
double test_fault_loss(const run *r, int64_t batch) { return test_fault(r, "loss-spike", batch) ? 1e4 : 0; }

int test_fault_noise(int64_t batch) { return fault_entry("spike", batch, -1); }

void test_faults_begin(run *r, int64_t batch) {
  r->fault_at = test_flip_at(r, "sdc", batch);
  r->nan_at = test_fault(r, "nan", batch) ? r->m.reg.numel / 3 : SIZE_MAX;
}

void test_faults_reduced(run *r, int64_t batch) {
  const size_t at = test_flip_at(r, "sdc-reduced", batch);
  if (at != SIZE_MAX) flip_gradient_bit(r, at);
}
