/* The training run's test hook BOOST_TRAIN_TEST_FAULT (docs/CHAOS.md,
 * "The test hook of the numeric faults"): the faulty step source, wrapped
 * around the run's own (step_source.h) when the hook is set. It injects
 * the faults the step guard's tests and boost-chaos ask for -- a batch of
 * noise, a NaN or a flipped bit in one rank's own gradients before the
 * data-parallel reduction (or a bit after it), a loss far too high -- and
 * passes everything on to the source it wraps, so the replay's hash sees
 * the faults as a broken part would have made them. */
#include "trainer_faults.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rng.h"

typedef struct {
  step_source base;
  step_source *inner; /* the run's own source */
  step_batches batches;
  int64_t global_batch;
  uint64_t vocab;    /* the data's: noise draws from it */
  boost_backend *be;
  float *grads;      /* the gradient arena */
  size_t numel;
  int rank;
  int64_t batch;     /* the global batch of the execution under way */
  size_t fault_at;   /* the gradient to flip before the reduction (SIZE_MAX: none) */
  size_t nan_at;     /* the gradient to make a NaN before the reduction (SIZE_MAX: none) */
} faulty_source;

/* Sample `idx` as noise: tokens drawn uniformly from the data's
 * vocabulary, a pure function of the sample index (every execution, rank
 * and layout draws the same: a bad batch of data, not a hardware fault). */
static void noise_window(uint64_t vocab, int T, int64_t idx, int32_t *in, int32_t *tg) {
  for (int t = 0; t <= T; t++) {
    const int32_t tok = (int32_t)(rng_mix64(rng_mix64((uint64_t)idx) ^ (uint64_t)t) % vocab);
    if (t < T) in[t] = tok;
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

static int test_fault(const faulty_source *f, const char *kind) { return fault_entry(kind, f->batch, f->rank); }

/* The sdc kinds of the hook: the gradient one of whose bits flips at this
 * execution of the step (SIZE_MAX: none). kind "sdc" (with
 * "sdc-persistent") flips before the data-parallel reduction, as a fault
 * in the rank's backward would; "sdc-reduced" after it. */
static size_t test_flip_at(const faulty_source *f, const char *kind) {
  static int64_t transient_done[2] = {-1, -1}; /* the batch whose first execution was corrupted, per kind */
  static size_t persistent_count;
  const int after = !strcmp(kind, "sdc-reduced");
  if (test_fault(f, kind) && transient_done[after] != f->batch) {
    transient_done[after] = f->batch;
    return f->numel / 2;
  }
  if (!after && test_fault(f, "sdc-persistent")) return (persistent_count++ * 7919u) % f->numel;
  return SIZE_MAX;
}

/* The mantissa's top bit of gradient `at`: no spike, a different result. */
static void flip_gradient_bit(const faulty_source *f, size_t at) {
  float g;
  uint32_t bits;
  float *p = f->grads + at;
  f->be->mem->download(f->be, &g, p, sizeof g);
  memcpy(&bits, &g, sizeof bits);
  bits ^= 1u << 22;
  memcpy(&g, &bits, sizeof g);
  f->be->mem->upload(f->be, p, &g, sizeof g);
}

/* Before the execution: the batch from the data, or noise (spike); which
 * of this rank's gradients gets a flipped bit (sdc, sdc-persistent) or a
 * NaN (nan) before the reduction. */
static void fill(step_source *s, int64_t cursor, int32_t *in, int32_t *tg) {
  faulty_source *f = (faulty_source *)s;
  f->inner->ops->fill(f->inner, cursor, in, tg);
  f->batch = cursor / f->global_batch;
  f->fault_at = test_flip_at(f, "sdc");
  f->nan_at = test_fault(f, "nan") ? f->numel / 3 : SIZE_MAX;
  if (!fault_entry("spike", f->batch, -1)) return;
  const step_batches *b = &f->batches;
  for (int micro = 0; micro < b->micro_batches; micro++)
    for (int row = 0; row < b->B; row++) {
      const int64_t idx = data_sample_index(cursor, micro, b->dp, b->dp_rank, b->B, row);
      const size_t at = ((size_t)micro * b->B + row) * (size_t)b->T;
      noise_window(f->vocab, b->T, idx, in + at, tg + at);
    }
}

/* The reduction's view of this rank's own gradients, range by range: the
 * bit flip or NaN lands here, then the source it wraps sees them. */
static void local_grads(step_source *s, float *grads, size_t from, size_t to) {
  faulty_source *f = (faulty_source *)s;
  if (f->fault_at >= from && f->fault_at < to) flip_gradient_bit(f, f->fault_at);
  if (f->nan_at >= from && f->nan_at < to) {
    const float nan = NAN;
    f->be->mem->upload(f->be, grads + f->nan_at, &nan, sizeof nan);
  }
  f->inner->ops->local_grads(f->inner, grads, from, to);
}

/* After the reduction: the sdc-reduced flip; the loss-spike kind's 1e4 in
 * this rank's share of the loss. */
static void reduced(step_source *s, double *loss_share) {
  faulty_source *f = (faulty_source *)s;
  const size_t at = test_flip_at(f, "sdc-reduced");
  if (at != SIZE_MAX) flip_gradient_bit(f, at);
  if (test_fault(f, "loss-spike")) {
    double mine;
    f->be->mem->download(f->be, &mine, loss_share, sizeof mine);
    mine += 1e4;
    f->be->mem->upload(f->be, loss_share, &mine, sizeof mine);
  }
  f->inner->ops->reduced(f->inner, loss_share);
}

static void destroy(step_source *s) {
  faulty_source *f = (faulty_source *)s;
  f->inner->ops->destroy(f->inner);
  boost_free(f);
}

static const step_source_ops faulty_ops = {fill, local_grads, reduced, destroy};

step_source *step_source_faulty(step_source *inner, const step_batches *batches, int64_t global_batch, int vocab,
                                boost_backend *be, float *grads, size_t numel, int rank) {
  if (!getenv("BOOST_TRAIN_TEST_FAULT")) return inner;
  faulty_source *f = boost_calloc(1, sizeof *f);
  f->base.ops = &faulty_ops;
  f->inner = inner;
  f->batches = *batches;
  f->global_batch = global_batch;
  f->vocab = (uint64_t)vocab;
  f->be = be;
  f->grads = grads;
  f->numel = numel;
  f->rank = rank;
  f->fault_at = f->nan_at = SIZE_MAX;
  return &f->base;
}
