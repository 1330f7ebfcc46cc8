#!/usr/bin/env bash
# The step guard's cost (docs/PERFORMANCE.md, "The step guard"): first the
# guard's own work per step (bench/guard_judge_cost.c: guard_judge with a
# full window, timed over many calls: all it adds to a step it does not
# flag) and, with data parallelism, the replay's hash of each rank's own
# gradients before the reduction (bench/replay_hash_cost.c, cola-60m's
# parameter count), then boost-train
# on cola-60m with train.guard=off and with the default guard (rollback,
# never firing on clean data), interleaved, on 1 rank (2 threads) and on
# dp=2 (1 thread each); the median step time over steps > 2 of each run, the
# best of BENCH_REPEAT runs per side. Also the largest robust z-scores and
# loss ratio the guard saw on the clean run (recomputed from its metrics
# with the default window and warm-up): how far below the thresholds a
# clean cola-60m run stays.
#
#   bash bench/bench_guard.sh [BUILD_DIR]      (default ./build)
#
# Needs BUILD_DIR/bench/guard-judge-cost and replay-hash-cost (cmake --build
# BUILD_DIR --target guard-judge-cost replay-hash-cost boost-train boost-data).
# Environment: BENCH_STEPS (default 12), BENCH_REPEAT (default 2),
# BENCH_ZSTEPS (steps of the clean run the z-scores come from; default 60),
# BENCH_DATA (token shard; default made from /usr/share/games/fortunes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$root/build}" && pwd)
TRAIN=$B/trainer/boost-train
STEPS=${BENCH_STEPS:-12}
REPEAT=${BENCH_REPEAT:-2}
ZSTEPS=${BENCH_ZSTEPS:-60}
PY=/usr/bin/python3
out=$(mktemp -d "${TMPDIR:-/tmp}/bench_guard.XXXXXX")
trap 'rm -rf "$out"' EXIT
data=${BENCH_DATA:-$out/f.tok}
[ -f "$data" ] || "$B/tools/boost-data" -o "$data" /usr/share/games/fortunes >/dev/null
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
"$B/bench/guard-judge-cost" 100 20000
"$B/bench/guard-judge-cost" 1000 2000
"$B/bench/replay-hash-cost" 42770000 4 10
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; flags: $(grep -m1 -o -w -E 'avx512f|avx512_bf16|amx_tile|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
COMMON=(--set model.preset=cola-60m --set data.train="$data" --set train.batch_size=4 --set train.val_batches=0
        --set train.warmup_steps=10 --set train.log_every=1000)

# median step_ms of a metrics file over steps > 2
median_ms() { "$PY" -c 'import json,sys,statistics
v = [json.loads(l)["step_ms"] for l in open(sys.argv[1])]
print("%.1f" % statistics.median(v[2:]))' "$1"; }

run() { # np guard tag
  local np=$1 g=$2 tag=$3 th=$(( 2 / $1 ))
  rm -f "$out/$tag.jsonl"
  if [ "$np" = 1 ]; then
    OMP_NUM_THREADS=$th "$TRAIN" "${COMMON[@]}" --set train.threads=$th --set train.steps="$STEPS" --set train.guard="$g" \
      --set train.metrics="$out/$tag.jsonl" >"$out/$tag.log" 2>&1
  else
    OMP_NUM_THREADS=$th $MPIRUN -n "$np" "$TRAIN" "${COMMON[@]}" --set train.threads=$th --set train.steps="$STEPS" \
      --set train.guard="$g" --set train.metrics="$out/$tag.jsonl" >"$out/$tag.log" 2>&1
  fi
  ! grep -q FLAGGED "$out/$tag.log" || { echo "the guard fired on a clean run: $(grep FLAGGED "$out/$tag.log" | head -2)" >&2; exit 1; }
  median_ms "$out/$tag.jsonl"
}

printf '| ranks | guard=off step ms | guard=rollback step ms | difference |\n|---|---|---|---|\n'
for np in 1 2; do
  best_off=1e9 best_on=1e9
  for r in $(seq 1 "$REPEAT"); do
    a=$(run "$np" off "off$np.$r"); b=$(run "$np" rollback "on$np.$r")
    best_off=$("$PY" -c "print(min($best_off, $a))"); best_on=$("$PY" -c "print(min($best_on, $b))")
  done
  printf '| %s | %.1f | %.1f | %+.2f %% |\n' "$( [ "$np" = 1 ] && echo "1 (2 threads)" || echo "dp=2 (1 thread each)")" \
    "$best_off" "$best_on" "$("$PY" -c "print(100 * ($best_on - $best_off) / $best_off)")"
done

# A replay's cost: train.replay_every=2 replays every second step (logged
# steps s with s % 2 == 0); its cost in steps is the median of the replayed
# steps over the median of the others, less one; train.replay_every=N then
# adds that over N to every step.
printf '\n| ranks | step ms | step with a replay, ms | a replay costs | train.replay_every=100 adds |\n|---|---|---|---|---|\n'
for np in 1 2; do
  th=$(( 2 / np )) tag=replay$np
  rm -f "$out/$tag.jsonl"
  launch=()
  [ "$np" = 1 ] || launch=($MPIRUN -n "$np")
  OMP_NUM_THREADS=$th "${launch[@]}" "$TRAIN" "${COMMON[@]}" --set train.threads=$th --set train.steps="$STEPS" \
    --set train.replay_every=2 --set train.metrics="$out/$tag.jsonl" >"$out/$tag.log" 2>&1
  "$PY" - "$out/$tag.jsonl" "$( [ "$np" = 1 ] && echo "1 (2 threads)" || echo "dp=2 (1 thread each)")" <<'PYEOF'
import json, sys, statistics as S
rows = [json.loads(l) for l in open(sys.argv[1])][2:]
plain = [o["step_ms"] for o in rows if o["step"] % 2]
again = [o["step_ms"] for o in rows if o["step"] % 2 == 0]
p, r = S.median(plain), S.median(again)
cost = r / p - 1
print("| %s | %.1f | %.1f | %.2f steps | %+.2f %% |" % (sys.argv[2], p, r, cost, 100 * cost / 100))
PYEOF
done

# The clean run's z-scores, as the guard computes them (docs/GUARD.md).
OMP_NUM_THREADS=2 "$TRAIN" "${COMMON[@]}" --set train.threads=2 --set train.steps="$ZSTEPS" \
  --set train.metrics="$out/z.jsonl" >"$out/z.log" 2>&1
! grep -q FLAGGED "$out/z.log" || { echo "the guard fired on the clean run" >&2; exit 1; }
"$PY" - "$out/z.jsonl" <<'PYEOF'
import json, sys, statistics as S
W, WU = 100, 20
L, G, zl, zg, ratio = [], [], 0.0, 0.0, 0.0
def z(v, h):
    h = h[-W:]; m = S.median(h); mad = 1.4826 * S.median([abs(a - m) for a in h])
    return (v - m) / max(mad, 0.01 * abs(m), 1e-12)
for line in open(sys.argv[1]):
    o = json.loads(line); x, g = o["loss"], o["grad_norm"]
    if L: ratio = max(ratio, x / max(L[-W:]))
    if len(L) >= WU: zl = max(zl, z(x, L)); zg = max(zg, z(g, G))
    L.append(x); G.append(g)
print("clean cola-60m, %d steps: max loss z %.2f, max gradient-norm z %.2f, max loss / window max %.3f" % (len(L), zl, zg, ratio))
PYEOF
