#!/usr/bin/env bash
# Data-parallel gradient reduction overlapped with the backward (issue 26):
# tokens/s of dp=2 (mpirun -n 2) relative to one process, with the one
# reduction after the backward (parallel.dp_bucket_mb=0) and with buckets
# posted during the last backward (parallel.dp_bucket_mb = each of
# BENCH_BUCKETS), and the share of the reduction's time hidden.
#
#   bash bench/bench_dp_overlap.sh [BUILD_DIR]      (default BUILD_DIR: ./build)
#
# Needs BUILD_DIR/trainer/boost-train, BUILD_DIR/tools/boost-data, mpirun (Open
# MPI) and python3 (standard library only). Run it under
# `flock /tmp/boost-bench.lock` on a shared machine.
#
# Each round runs every configuration once (even rounds in reverse order, so
# other load on the machine spreads evenly); the timed steps (all but the
# first of each run) of all rounds pool into one median per configuration.
# Configurations: one process (dp1); dp=2 with the one MPI_Allreduce after
# the backward (dp2-mb0); dp=2 with the bucketed path's sums posted as one
# bucket after the backward (dp2-after: parallel.dp_bucket_mb=1024, more
# than the arena: the same sums as the buckets, nothing overlapped); dp=2
# with buckets of each BENCH_BUCKETS size (dp2-mbS).
# Per configuration it reports the median step time and tokens/s (global
# tokens: dp x batch x seq per step), tokens/s relative to one process and to
# dp2-mb0, the host's milliseconds inside the dp reduction per step (metrics
# comm.dp_allreduce.seconds: the whole blocking call, or for buckets the time
# spent posting, testing and waiting for them: what is not hidden) and the
# share of it hidden:
#   hidden = 1 - (dp ms with buckets) / (dp ms of dp2-after)
# all medians from the same run.
#
# Environment (all optional):
#   BENCH_PRESET   model.preset (default cola-60m)
#   BENCH_SEQ      model.seq_len (default 64)
#   BENCH_BATCH    train.batch_size per replica (default 2)
#   BENCH_ACCUM    train.grad_accum (default 1: the whole backward can overlap)
#   BENCH_STEPS    steps per run (default 6; steps >= 2 are timed)
#   BENCH_ROUNDS   rounds (default 3)
#   BENCH_BUCKETS  parallel.dp_bucket_mb values with buckets (default "4 16 64 256")
#   BENCH_THREADS  train.threads per rank (default 1)
#   BENCH_OUT      results folder (default BUILD_DIR/bench-dp-overlap/YYYYmmdd-HHMMSS)
#   BENCH_MPIRUN   launcher (default "mpirun --allow-run-as-root --oversubscribe")
# Exit status: 0 every run succeeded, 1 a run failed, 2 setup error.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench_dp_overlap: build folder '${1:-$ROOT/build}' not found" >&2; exit 2; }
TRAIN=$BUILD/trainer/boost-train
[ -x "$TRAIN" ] && [ -x "$BUILD/tools/boost-data" ] || { echo "bench_dp_overlap: build boost-train and boost-data first" >&2; exit 2; }
PRESET=${BENCH_PRESET:-cola-60m}
SEQ=${BENCH_SEQ:-64}
BATCH=${BENCH_BATCH:-2}
ACCUM=${BENCH_ACCUM:-1}
STEPS=${BENCH_STEPS:-6}
ROUNDS=${BENCH_ROUNDS:-3}
BUCKETS=${BENCH_BUCKETS:-"4 16 64 256"}
THREADS=${BENCH_THREADS:-1}
OUT=${BENCH_OUT:-$BUILD/bench-dp-overlap/$(date +%Y%m%d-%H%M%S)}
MPIRUN=${BENCH_MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
mkdir -p "$OUT" || exit 2

if [ ! -f "$OUT/data.tok" ]; then
  "$BUILD/tools/boost-data" -q -o "$OUT/data.tok" /usr/share/games/fortunes >"$OUT/data.log" 2>&1 ||
    { echo "bench_dp_overlap: boost-data failed: $(tail -n 2 "$OUT/data.log")" >&2; exit 2; }
fi

# dp2-after: the bucketed path with one bucket bigger than any arena here,
# posted after the backward: the same sums, nothing overlapped (the control
# that separates the overlap from the way the sums move)
configs=("dp1 1 0" "dp2-mb0 2 0" "dp2-after 2 1024")
for mb in $BUCKETS; do configs+=("dp2-mb$mb 2 $mb"); done

run_one() { # NAME NP MB ROUND
  local name=$1 np=$2 mb=$3 round=$4 dir=$OUT/$1/r$4
  mkdir -p "$dir"
  local args=(--set model.preset="$PRESET" --set model.seq_len="$SEQ" --set train.batch_size="$BATCH"
    --set train.grad_accum="$ACCUM" --set train.steps="$STEPS" --set train.warmup_steps=0 --set train.val_batches=0
    --set train.log_every=1 --set train.threads="$THREADS" --set data.train="$OUT/data.tok"
    --set parallel.dp="$np" --set parallel.dp_bucket_mb="$mb" --set train.metrics="$dir/metrics.jsonl")
  if [ "$np" = 1 ]; then
    OMP_NUM_THREADS=$THREADS "$TRAIN" "${args[@]}" </dev/null >"$dir/log" 2>&1
  else
    # shellcheck disable=SC2086 # MPIRUN is a command line
    OMP_NUM_THREADS=$THREADS $MPIRUN -n "$np" "$TRAIN" "${args[@]}" </dev/null >"$dir/log" 2>&1
  fi
}

failed=0
echo "bench_dp_overlap: $PRESET, batch $BATCH x seq $SEQ per replica, grad_accum $ACCUM, $STEPS steps, $ROUNDS rounds -> $OUT" >&2
for ((round = 1; round <= ROUNDS; round++)); do
  order=("${configs[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[$i]}"); done
  fi
  for c in "${order[@]}"; do
    read -r name np mb <<<"$c"
    printf '  round %d %-10s ' "$round" "$name" >&2
    if run_one "$name" "$np" "$mb" "$round"; then echo "ok" >&2; else echo "FAILED (see $OUT/$name/r$round/log)" >&2; failed=1; fi
  done
done

python3 - "$OUT" "${configs[@]}" <<'PY' | tee "$OUT/results.md"
import glob, json, os, statistics, sys
out, configs = sys.argv[1], [c.split() for c in sys.argv[2:]]
rows = {}
for name, np_, mb in configs:
    dts, tok, dp_s, calls = [], [], [], []
    for f in sorted(glob.glob(os.path.join(out, name, "r*", "metrics.jsonl"))):
        recs = [json.loads(l) for l in open(f) if '"loss"' in l]
        for r in recs[1:]:  # the first step is not timed
            dts.append(r["step_ms"]); tok.append(r["tokens_per_s"])
            c = r.get("comm", {}).get("dp_allreduce", {"seconds": 0.0, "calls": 0})
            dp_s.append(c["seconds"] * 1e3); calls.append(c["calls"])
    if dts:
        rows[name] = dict(mb=mb, np=np_, n=len(dts), step=statistics.median(dts), tok=statistics.median(tok),
                          dp=statistics.median(dp_s), calls=max(calls))
base = rows.get("dp1", {}).get("tok")
after = rows.get("dp2-after", {}).get("dp")
print("| configuration | dp_bucket_mb | steps timed | step ms (median) | tokens/s (median) | vs 1 process | vs dp=2 one call | dp reduction ms/step (host) | dp calls/step | hidden |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, _, _ in configs:
    r = rows.get(name)
    if not r: print(f"| {name} | | failed | | | | | | | |"); continue
    rel = f"{r['tok'] / base:.3f}" if base else ""
    rel2 = f"{r['tok'] / rows['dp2-mb0']['tok']:.3f}" if "dp2-mb0" in rows and r["np"] == "2" else ""
    hid = f"{1 - r['dp'] / after:.0%}" if after and name.startswith("dp2-mb") and r["mb"] != "0" else ""
    dp = f"{r['dp']:.1f}" if r["np"] == "2" else ""
    print(f"| {name} | {r['mb']} | {r['n']} | {r['step']:.0f} | {r['tok']:.1f} | {rel} | {rel2} | {dp} | {r['calls'] if r['np'] == '2' else ''} | {hid} |")
PY
exit $failed
