/* Multi-rank correctness of the parallel trainer (run under mpirun).
 * Parts: common.c, equiv.c, comm.c (parallel_check.h).
 *
 *   parallel_check equiv --data SHARD [--preset P] [--steps N] [--batch B]
 *                        [--tol X] [--set KEY=VALUE]... --layout SPEC... [--repeat SPEC]
 *   parallel_check comm  --data SHARD [--set KEY=VALUE]... --case SPEC...
 *                        [--b B] [--s S] [--max-ratio X]
 *
 * equiv: every rank first trains the single-process reference on
 * MPI_COMM_SELF (the model is tiny), then each layout on the first
 * dp*tp*pp ranks of MPI_COMM_WORLD, with real trainer steps. Each rank
 * compares its own hyperslab (registry offset / local_shape) of every
 * parameter against the reference's global tensor, and the losses step by
 * step. Verdicts are combined with MPI_Allreduce; rank 0 prints one line per
 * check; the exit status is 1 when any check failed.
 *
 *   SPEC = dp=D,tp=T[,pp=P][,mode=M][,accum=A][,zero=Z][,recompute=R]
 *          (defaults pp=1 mode=auto accum=1 zero=0 recompute=none)
 *
 * The global batch is B*A*D sequences in both runs: the layout runs
 * batch_size=B per replica with grad_accum=A; the reference runs it as one
 * micro-batch (batch_size=B*A*D, "ref batch") and, when A*D > 1, also as
 * A*D accumulated micro-batches (batch_size=B, "ref accum"). Samples are
 * assigned by global index, so all of them see the same sequences.
 *
 * Tolerance (fp32): every loss and every parameter element satisfies
 *   |a - b| <= TOL * max(1, |b|),  TOL = 1e-5 (--tol)   (b = reference)
 * and every step's pre-clip gradient norm |a - b| <= TOL * |b| (it checks
 * that tp-replicated tensors are counted once; with the norm under
 * grad_clip a wrong norm would not show in the parameters).
 * Parameters start at ~0.02-0.15 and move ~lr per step, so a wrong
 * gradient shard shows up as ~1e-4..1e-3, far above TOL.
 * Also checked per layout: dp replicas hold bitwise-identical parameters, tp
 * ranks hold bitwise-identical copies of every tp-replicated tensor, the
 * hyperslabs cover every global element (pipeline stages hold disjoint
 * layers), the dp and pp traffic of a step is what check_traffic says, and
 * a layout with zero=1 or recompute != none matches its twin without them
 * (check_twin). --repeat SPEC: that layout run twice gives bitwise-identical
 * losses, parameters and AdamW moments, and prints a digest of them so a
 * script can compare two jobs.
 *
 * comm: for each case (preset=P,mode=M[,recompute=R]) one model_forward and
 * one model_backward of a b x s micro-batch on tp = world size, with
 * counters reset in between; asserts the counted tp all-reduce bytes equal
 * the formulas of docs/PARALLELISM.md exactly (recompute: see
 * check_comm_case), and (--max-ratio) that btp's per-layer bytes are at most
 * X times vanilla's for the same preset. */
#include <stdlib.h>
#include <string.h>

#include "parallel_check.h"

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc < 2) die("usage: parallel_check equiv|comm --data SHARD ... (see the source)");
  const char *cmd = argv[1];
  options o = {.preset = "tiny", .steps = 6, .batch = 2, .b = 1, .s = 8};
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) die("missing value after %s", a);
    i++;
    if (!strcmp(a, "--data")) o.data = v;
    else if (!strcmp(a, "--preset")) o.preset = v;
    else if (!strcmp(a, "--steps")) o.steps = atoi(v);
    else if (!strcmp(a, "--batch")) o.batch = atoi(v);
    else if (!strcmp(a, "--b")) o.b = atoi(v);
    else if (!strcmp(a, "--s")) o.s = atoi(v);
    else if (!strcmp(a, "--max-ratio")) o.max_ratio = atof(v);
    else if (!strcmp(a, "--tol")) TOL = atof(v);
    else if (!strcmp(a, "--set") && o.nsets < MAX_SETS - 1) o.sets[o.nsets++] = argv[i];
    else if (!strcmp(a, "--layout") && o.nlayouts < MAX_SPECS) parse_layout(v, &o.layouts[o.nlayouts++]);
    else if (!strcmp(a, "--repeat")) parse_layout(v, &o.repeat), o.has_repeat = 1;
    else if (!strcmp(a, "--case") && o.ncases < MAX_SPECS) {
      parse_case(v, o.cases[o.ncases][0], o.cases[o.ncases][1], o.cases[o.ncases][2]);
      o.ncases++;
    } else die("unknown argument %s", a);
  }
  if (!o.data) die("--data SHARD is required");
  if (o.steps < 1 || o.batch < 1 || o.b < 1 || o.s < 1) die("bad --steps/--batch/--b/--s");

  if (!strcmp(cmd, "equiv")) {
    if (!o.nlayouts && !o.has_repeat) die("equiv needs --layout or --repeat");
    for (int i = 0; i < o.nlayouts; i++) check_layout(&o, &o.layouts[i]);
    if (o.has_repeat) check_repeat(&o, &o.repeat);
    free_references();
  } else if (!strcmp(cmd, "comm")) {
    if (!o.ncases) die("comm needs --case");
    check_comm(&o);
  } else {
    die("unknown command '%s' (equiv, comm)", cmd);
  }
  say("%s: %d check(s) failed\n", n_failed ? "FAILED" : "OK", n_failed);
  MPI_Finalize();
  return n_failed ? 1 : 0;
}
