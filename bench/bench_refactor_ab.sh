#!/usr/bin/env bash
# A/B of training step time between two builds of boost-train -- the tree
# before a refactor and the tree now -- in interleaved runs on the same
# machine, so the ratio holds even when the machine is loaded.
#
#   bash bench/bench_refactor_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]
#
# Build the old tree with e.g.
#   git archive REV | tar -x -C /tmp/old && cmake -S /tmp/old -B /tmp/old/build \
#     -DCMAKE_BUILD_TYPE=Release -DBOOST_CUDA=OFF && cmake --build /tmp/old/build --target boost-train
# cola-60m shapes (vocab 320: the byte-level corpus), T=256 (AB_SEQ), B=4,
# 2 threads, 12 steps (AB_STEPS), the build's default precision or
# AB_PRECISION (fp32, bf16); the median step time of steps 3.. per run.
set -euo pipefail
old=${1:?OLD_BUILD}; new=${2:?NEW_BUILD}; rounds=${3:-3}
seq_len=${AB_SEQ:-256}; steps=${AB_STEPS:-12}
precision=()
[ -n "${AB_PRECISION:-}" ] && precision=(--set train.precision="$AB_PRECISION")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$new/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
for round in $(seq 1 "$rounds"); do
  for side in old new; do
    dir=$old
    [ "$side" = new ] && dir=$new
    bin=$dir/trainer/boost-train
    [ -x "$bin" ] || bin=$dir/run/boost-train # builds from when the loop was in run/
    OMP_NUM_THREADS=2 "$bin" --set model.preset=cola-60m --set model.vocab=320 --set data.train="$tmp/f.tok" \
      --set train.batch_size=4 --set model.seq_len="$seq_len" --set train.steps="$steps" --set train.val_batches=0 \
      --set train.threads=2 "${precision[@]}" >"$tmp/$side.log" 2>&1
    /usr/bin/python3 - "$tmp/$side.log" "$side" "$round" <<'PYEOF'
import re, statistics, sys
ms = [float(m.group(1)) for m in re.finditer(r"\| (\d+) ms", open(sys.argv[1]).read())][2:]
print("%s round %s: median %.1f ms/step" % (sys.argv[2], sys.argv[3], statistics.median(ms)))
PYEOF
  done
done
