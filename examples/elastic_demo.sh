#!/usr/bin/env bash
# Elastic restart, end to end: train the tiny CoLA model on 8 ranks
# (tp2 x pp2 x dp2, btp), preempt it with SIGTERM, resume on 4 ranks
# (tp2 x pp2), preempt again, finish on 2 ranks with another tensor-parallel
# mode (tp2, vanilla), then plot the run the three jobs wrote into one
# checkpoint directory: one continuous loss curve with its validation points,
# a mark where each job started and on which layout it ran (8, 4 and 2 ranks),
# the committed checkpoints, and tokens/s with the checkpoint stalls below.
# The global batch (8 sequences) is kept across the layouts by the resume
# plan, so samples, LR schedule and AdamW continue exactly.
#
#   bash examples/elastic_demo.sh [OUT_DIR]     (default runs/elastic)
#
# Needs a build (bash scripts/build.sh) and a token shard
# (data/fortunes.tok, made by examples/quickstart.sh or boost-data).
# 8 ranks on 2 cores work for the tiny model (--oversubscribe); a few minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BOOST_BUILD_DIR:-$root/build}
out=${1:-$root/runs/elastic}
data=${BOOST_DEMO_DATA:-$root/data/fortunes.tok}
launch=("$root/tools/mpirun/boost-mpirun" --allow-run-as-root --oversubscribe)
[ -x "$build/trainer/boost-train" ] || { echo "elastic_demo: build first: bash scripts/build.sh" >&2; exit 1; }
if [ ! -f "$data" ]; then
  mkdir -p "$(dirname "$data")"
  "$build/tools/boost-data" -q -o "$data" /usr/share/games/fortunes
fi
rm -rf "$out"
mkdir -p "$out"
export OMP_NUM_THREADS=1
common=(--set model.preset=tiny --set data.train="$data" --set train.steps=60 --set train.warmup_steps=5
  --set train.lr=3e-3 --set train.val_every=10 --set train.val_batches=4 --set ckpt.dir="$out/ckpt" --set ckpt.every=10
  --set train.metrics="$out/metrics.jsonl" --set train.threads=1)

# run NAME STOP_AFTER_STEPS NP layout...: a job, preempted with SIGTERM once
# the metrics file holds STOP_AFTER_STEPS lines (0: run to the end).
run() {
  local name=$1 stop=$2 np=$3
  shift 3
  echo "== $name: $np ranks, $*"
  "${launch[@]}" -n "$np" "$build/trainer/boost-train" "${common[@]}" "$@" >"$out/$name.log" 2>&1 &
  local pid=$! rc=0
  if [ "$stop" -gt 0 ]; then
    while kill -0 "$pid" 2>/dev/null && [ "$(cat "$out/metrics.jsonl" 2>/dev/null | wc -l)" -lt "$stop" ]; do sleep 0.2; done
    echo "   SIGTERM after step $(wc -l <"$out/metrics.jsonl")"
    kill -TERM "$pid" 2>/dev/null || true
  fi
  wait "$pid" || rc=$?
  grep -E "^resume plan|^checkpoints:|^layout|preempted|^done" "$out/$name.log" | sed 's/^/   /'
  echo "   exit status $rc"
  [ "$rc" = 0 ] || [ "$rc" = 75 ] || { tail -5 "$out/$name.log"; exit 1; }
}

run job1-8ranks 25 8 --set parallel.dp=2 --set parallel.tp=2 --set parallel.pp=2 --set parallel.tp_mode=btp \
  --set train.batch_size=2 --set train.grad_accum=2
run job2-4ranks 45 4 --set parallel.tp=2 --set parallel.pp=2 --set parallel.tp_mode=btp \
  --set train.batch_size=2 --set train.grad_accum=2
run job3-2ranks 0 2 --set parallel.tp=2 --set parallel.tp_mode=vanilla --set train.batch_size=2 --set train.grad_accum=2

"$build/tools/boost-inspect" plot "$out/ckpt" -o "$out/loss.png"
echo "the run of all three jobs, their restarts and layouts: $out/loss.png"
"$build/tools/boost-inspect" summary "$out/ckpt"
