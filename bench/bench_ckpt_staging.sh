#!/usr/bin/env bash
# Bounded checkpoint staging (issue 27): the curve of ckpt.staging_limit.
#
#   bash bench/bench_ckpt_staging.sh [BUILD_DIR]          (default ./build)
#
# Environment: PRESETS ("cola-350m cola-1b"), LIMITS ("100% 50% 25% 10%"),
# BATCH (1), SEQ (64), THREADS (2: train.threads), LOCK (a flock file every
# run holds, default /tmp/boost-bigmem.lock: cola-1b needs ~17 GB), WORK
# (scratch on the disk to measure; default a new /tmp/bench_ckpt_staging.*,
# removed at the end unless KEEP=1).
#
# Per preset and limit, one run of boost-train on the fortunes shard: four
# steps, a checkpoint after steps 2 and 4 (ckpt.every=2, keep_last=1). Step 2
# runs with no checkpoint in flight (the step time); the checkpoint of step
# 2 is staged at its end, and step 3's optimizer step waits for whatever of
# it is not staged yet. Reported:
#   peak RSS      /usr/bin/time's maximum resident set size of the run
#                 (the final save of step 4 included), and its excess over
#                 the 100 % run's minus that run's staging buffer (the
#                 process without staging)
#   ring          the staging buffer: the limit, or the state when above it
#   stall         checkpoints.jsonl's stall_s of step 2 (staging at the step
#                 boundary + step 3's wait before its optimizer step)
#   durable       its write_s: from the hand-over to the commit (staging,
#                 encode and write, fsync, read-back, rename)
#   share         stall / the step time of step 2
# Prints a Markdown table.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
TRAIN=$BUILD/trainer/boost-train
PRESETS=${PRESETS:-cola-350m cola-1b}
LIMITS=${LIMITS:-100% 50% 25% 10%}
BATCH=${BATCH:-1}
SEQ=${SEQ:-64}
THREADS=${THREADS:-2}
LOCK=${LOCK:-/tmp/boost-bigmem.lock}
PY=${PY:-/usr/bin/python3}
[ -x "$TRAIN" ] || { echo "bench_ckpt_staging: $TRAIN not built" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_ckpt_staging: /usr/bin/time is needed (Debian: time)" >&2; exit 2; }
WORK=${WORK:-$(mktemp -d /tmp/bench_ckpt_staging.XXXXXX)}
mkdir -p "$WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
export HDF5_PLUGIN_PATH=${HDF5_PLUGIN_PATH:-$BUILD/hdf5-plugins} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$BUILD/tools/boost-data" -q -o "$WORK/f.tok" /usr/share/games/fortunes >/dev/null
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) | disk: $(df -h "$WORK" | awk 'NR==2{print $1}')"
echo "B=$BATCH T=$SEQ train.threads=$THREADS; steps 4, ckpt.every=2; the checkpoint of step 2 measured"
echo
echo "| preset | limit | ring | state | peak RSS | over the run without staging | stall | step | stall / step | durable | committed |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for preset in $PRESETS; do
  base_rss=""
  for lim in $LIMITS; do
    tag=$preset.${lim%\%}
    dir=$WORK/$tag
    rm -rf "$dir"
    flock "$LOCK" /usr/bin/time -f "%M" -o "$WORK/$tag.rss" "$TRAIN" --set model.preset="$preset" \
      --set model.seq_len="$SEQ" --set train.batch_size="$BATCH" --set train.threads="$THREADS" --set train.steps=4 \
      --set train.warmup_steps=0 --set train.val_batches=0 --set data.train="$WORK/f.tok" --set ckpt.every=2 \
      --set ckpt.keep_last=1 --set ckpt.dir="$dir" --set ckpt.staging_limit="$lim" \
      --set train.metrics="$WORK/$tag.jsonl" >"$WORK/$tag.log" 2>&1 ||
      { echo "bench_ckpt_staging: $tag failed: $(tail -3 "$WORK/$tag.log")" >&2; exit 1; }
    row=$("$PY" - "$dir/checkpoints.jsonl" "$WORK/$tag.jsonl" "$WORK/$tag.rss" "$WORK/$tag.log" "$preset" "$lim" \
      "$base_rss" <<'PYEOF'
import json, re, sys
ck = [json.loads(l) for l in open(sys.argv[1])]
c = next(o for o in ck if o["step"] == 2)
steps = {o["step"]: o for o in map(json.loads, open(sys.argv[2]))}
rss = int(open(sys.argv[3]).read().split()[-1]) / 1024.0  # MiB
state = (c["raw_bytes"]["weights"] + c["raw_bytes"]["moments"]) / 2**20
m = re.search(r"staging in a ring of ([0-9.]+) (GiB|MiB|KiB)", open(sys.argv[4]).read())
ring = float(m.group(1)) * {"GiB": 1024, "MiB": 1, "KiB": 1 / 1024}[m.group(2)] if m else state
base = float(sys.argv[7]) if sys.argv[7] else rss - ring  # the 100 % run first: the process without staging
step = steps[2]["step_ms"] / 1e3
print("%s|%s|%.0f MiB|%.0f MiB|%.0f MiB|+%.0f MiB (%.0f%%)|%.2f s|%.2f s|%.0f%%|%.1f s|%s|%.1f" % (
    sys.argv[5], sys.argv[6], ring, state, rss, rss - base, 100 * (rss - base) / base, c["stall_s"], step,
    100 * c["stall_s"] / step, c["write_s"], "yes" if c["committed"] else "NO", base))
PYEOF
)
    base_rss=${row##*|}
    echo "| ${row%|*} |"
  done
done
