# Equivalence of parallel layouts with the single-process run (issue 3,
# acceptance "Equivalence"): for the tiny preset (low-rank; tp modes btp and
# vanilla) and llama-tiny (full-rank; megatron), every layout with
# dp, tp, pp in {1, 2} trains 6 real steps and must give the single-process
# losses and parameters within |a - b| <= 1e-5 * max(1, |b|) per loss and per
# parameter element (gradient norms within 1e-5 relative); dp replicas and
# tp-replicated tensors must be bitwise identical; the dp/pp traffic of a
# step must be what the formulas say; zero=1 must match zero=0 and every
# recompute mode must match none (bitwise); one multi-rank layout run twice
# (in one job and in two jobs) must be bitwise identical.
# The check itself is tests/mpi/parallel_check/ (one line per check).
set -euo pipefail

: "${BOOST_BINARY_DIR:?set BOOST_BINARY_DIR to the build directory}"
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
CHECK="$BOOST_BINARY_DIR/tests/mpi/parallel_check"
DATA_TOOL="$BOOST_BINARY_DIR/tools/boost-data"
CORPUS=${BOOST_TEST_CORPUS:-/usr/share/games/fortunes}
for f in "$CHECK" "$DATA_TOOL"; do [[ -x "$f" ]] || { echo "FAIL: $f is not built" >&2; exit 1; }; done
[[ -e "$CORPUS" ]] || { echo "FAIL: corpus $CORPUS is missing (Debian: fortunes-min or fortunes)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$DATA_TOOL" -q -o "$tmp/f.tok" "$CORPUS" >/dev/null

status=0
run() { # run LOG NP ARGS... : one parallel_check invocation; any failed check fails the test
  local log=$1 np=$2
  shift 2
  echo "== parallel_check (np=$np) $*"
  # shellcheck disable=SC2086 # MPIRUN is a command line
  $MPIRUN -n "$np" "$CHECK" "$@" --data "$tmp/f.tok" >"$tmp/$log" 2>&1 || status=1
  cat "$tmp/$log"
}
digest() { sed -n "s/^PASS bitwise $1 .*(digest \([0-9a-f]*\))$/\1/p" "$tmp/$2"; }

# Per replica: batch_size 2, 6 steps; the reference runs the same global
# batch as one micro-batch ("ref batch") and as accumulated micro-batches
# ("ref accum"). tp=1 layouts run the plain (auto) path; mode=btp at tp=1
# runs the online-RMSNorm path on one rank. Pipeline layouts use accum=2 so
# that 1F1B has two micro-batches in flight.
both=(--steps 6 --batch 2)
run tiny.log 4 equiv --preset tiny "${both[@]}" \
  --layout dp=1,tp=1 \
  --layout dp=2,tp=1 \
  --layout dp=2,tp=1,mode=btp \
  --layout dp=1,tp=2,mode=btp \
  --layout dp=1,tp=2,mode=vanilla \
  --layout dp=2,tp=2,mode=btp \
  --layout dp=2,tp=2,mode=vanilla \
  --layout dp=2,tp=2,mode=btp,accum=2 \
  --layout dp=2,tp=2,mode=btp,zero=1 \
  --layout dp=2,tp=2,mode=btp,recompute=lowrank \
  --layout dp=1,tp=2,mode=vanilla,recompute=lowrank \
  --layout dp=2,tp=1,recompute=full \
  --repeat dp=2,tp=2,mode=btp,zero=1,recompute=lowrank

run tiny-pp.log 8 equiv --preset tiny "${both[@]}" \
  --layout dp=1,tp=1,pp=2,accum=2 \
  --layout dp=2,tp=1,pp=2,accum=2 \
  --layout dp=1,tp=2,pp=2,mode=btp,accum=2 \
  --layout dp=1,tp=2,pp=2,mode=vanilla,accum=2 \
  --layout dp=2,tp=2,pp=2,mode=btp,accum=2 \
  --layout dp=2,tp=2,pp=2,mode=vanilla,accum=2 \
  --layout dp=2,tp=2,pp=2,mode=btp,accum=2,zero=1,recompute=lowrank \
  --layout dp=2,tp=1,pp=2,accum=4,recompute=full \
  --repeat dp=2,tp=2,pp=2,mode=btp,accum=2,zero=1,recompute=lowrank

run llama.log 8 equiv --preset llama-tiny "${both[@]}" \
  --layout dp=1,tp=1 \
  --layout dp=2,tp=1 \
  --layout dp=1,tp=2,mode=megatron \
  --layout dp=2,tp=2,mode=megatron \
  --layout dp=2,tp=2,mode=megatron,zero=1 \
  --layout dp=1,tp=2,mode=megatron,recompute=full \
  --layout dp=1,tp=1,pp=2,accum=2 \
  --layout dp=2,tp=1,pp=2,accum=2 \
  --layout dp=1,tp=2,pp=2,mode=megatron,accum=2 \
  --layout dp=2,tp=2,pp=2,mode=megatron,accum=2,recompute=lowrank

# Bitwise across processes: the repeated layout in a fresh mpirun gives the
# same digest (losses, parameters, AdamW moments over all ranks).
run again.log 4 equiv --preset tiny "${both[@]}" --repeat dp=2,tp=2,mode=btp,zero=1,recompute=lowrank
d1=$(digest tiny tiny.log) d2=$(digest tiny again.log)
if [[ -z $d1 || $d1 != "$d2" ]]; then
  echo "FAIL bitwise across processes: digests '$d1' and '$d2' differ" >&2
  status=1
else
  echo "PASS bitwise across processes: tiny dp=2 tp=2 btp zero=1 recompute=lowrank digest $d1 in two mpirun jobs"
fi

[[ $status == 0 ]] || echo "FAIL: parallel equivalence (see the FAIL lines above)" >&2
exit $status
