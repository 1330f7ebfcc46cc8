#!/usr/bin/env bash
# The offline tools' reads (issue 27): boost-inspect verify and boost-reshard
# on a checkpoint, against the zstd command line and the disk, from a cold
# page cache, in one run (the sibling of bench_ckpt_load.sh, which measures
# the trainer's resume).
#
#   bash bench/bench_ckpt_tools.sh [BUILD_DIR] [PRESET] [BEFORE_BUILD_DIR]   (default ./build cola-350m)
#
# One step of PRESET is trained and checkpointed (B=1, T=64; CKPT=FILE uses
# that checkpoint instead), then, REPEAT times (default 3), each after
# dropping the page cache (echo 3 > /proc/sys/vm/drop_caches: root):
#   verify       boost-inspect verify (every dataset decoded and checksummed)
#   reshard      boost-reshard to LAYOUT (default tp=2): read, check, rewrite
#                with chunks aligned to the target, verify OUT
#   reshard_np2  the same under mpirun -n 2 (the parallel rewrite)
#   verify_before, reshard_before, reshard_np2_before
#                the same with the programs of BEFORE_BUILD_DIR, if given
#   dd           dd of the checkpoint file to /dev/null (the disk's read rate)
#   cat          cat of a zstd file of the same tensors to /dev/null
#   zstd         zstd -d -T0 of that file to /dev/null
# The zstd file holds the checkpoint's weights and moments (boost-inspect
# --dump-category) as plain `zstd -1 -T0` (no shuffle, so larger than the
# checkpoint: its size is printed). Medians, and each row over the slower
# of zstd and cat. The tools decode on every core (OMP_NUM_THREADS unset).
# The training step holds LOCK (default /tmp/boost-bigmem.lock).
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
PRESET=${2:-cola-350m}
BEFORE=${3:+$(cd "$3" && pwd)}
REPEAT=${REPEAT:-3}
LAYOUT=${LAYOUT:-tp=2}
LOCK=${LOCK:-/tmp/boost-bigmem.lock}
PY=${PY:-/usr/bin/python3}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
command -v zstd >/dev/null || { echo "bench_ckpt_tools: the zstd CLI is needed (Debian: zstd)" >&2; exit 2; }
[ -w /proc/sys/vm/drop_caches ] || { echo "bench_ckpt_tools: dropping the page cache needs root" >&2; exit 2; }
export HDF5_PLUGIN_PATH=$BUILD/hdf5-plugins OMP_WAIT_POLICY=passive
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/boost_bench_ckpt_tools.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
if [ -n "${CKPT:-}" ]; then
  f=$CKPT
else
  "$BUILD/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
  ARGS=(--set model.preset="$PRESET" --set model.seq_len=64 --set train.batch_size=1 --set train.steps=1
        --set train.val_batches=0 --set data.train="$tmp/f.tok" --set ckpt.dir="$tmp/ck" --set ckpt.keep_last=1)
  flock "$LOCK" "$BUILD/run/boost-train" "${ARGS[@]}" >"$tmp/save.log" 2>&1 ||
    { echo "bench_ckpt_tools: the save failed: $(tail -3 "$tmp/save.log")" >&2; exit 1; }
  f=$tmp/ck/step_00000001.h5
fi
for cat in weights moments; do "$BUILD/tools/boost-inspect" --dump-category $cat "$tmp/$cat.raw" "$f" >/dev/null; done
cat "$tmp/weights.raw" "$tmp/moments.raw" | zstd -1 -T0 -q -c >"$tmp/state.zst"
raw=$(($(stat -c %s "$tmp/weights.raw") + $(stat -c %s "$tmp/moments.raw")))
rm -f "$tmp/weights.raw" "$tmp/moments.raw"
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) | disk: $(df -h "$tmp" | awk 'NR==2{print $1}')"
echo "$PRESET: tensors $raw bytes raw, checkpoint $(stat -c %s "$f") bytes, zstd -1 file $(stat -c %s "$tmp/state.zst") bytes; reshard --layout $LAYOUT"
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
secs() { # command...: its wall time; a failure stops the bench
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$tmp/cmd.log" 2>&1 || { echo "bench_ckpt_tools: failed: $* : $(tail -3 "$tmp/cmd.log")" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
tools() { # BUILD SUFFIX: verify and reshard (serial, 2 ranks) of that build
  cold; echo "verify$2 $(secs "$1/tools/boost-inspect" verify "$f")" >>"$tmp/times"
  rm -f "$tmp/out.h5"
  cold; echo "reshard$2 $(secs "$1/tools/boost-reshard" "$f" "$tmp/out.h5" --layout "$LAYOUT" --quiet)" >>"$tmp/times"
  rm -f "$tmp/out.h5"
  cold; echo "reshard_np2$2 $(secs $MPIRUN -n 2 "$1/tools/boost-reshard" "$f" "$tmp/out.h5" --layout "$LAYOUT" --quiet)" >>"$tmp/times"
  rm -f "$tmp/out.h5"
}
: >"$tmp/times"
for rep in $(seq "$REPEAT"); do
  tools "$BUILD" ""
  [ -z "$BEFORE" ] || tools "$BEFORE" _before
  cold; echo "dd $(secs dd if="$f" of=/dev/null bs=8M status=none)" >>"$tmp/times"
  cold; echo "cat $(secs sh -c "cat '$tmp/state.zst' >/dev/null")" >>"$tmp/times"
  cold; echo "zstd $(secs zstd -d -T0 -q -c "$tmp/state.zst" -o /dev/null)" >>"$tmp/times"
done
"$PY" - "$tmp/times" "$raw" <<'PYEOF'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    t.setdefault(k, []).append(float(v))
raw = float(sys.argv[2])
med = {k: statistics.median(v) for k, v in t.items()}
ref = max(med["zstd"], med["cat"])
print("| | median s (runs) | GB/s of tensors | / the slower of zstd -d and cat | / before |")
print("|---|---:|---:|---:|---:|")
for k in ("verify", "verify_before", "reshard", "reshard_before", "reshard_np2", "reshard_np2_before", "dd", "cat", "zstd"):
    if k in med:
        b = med.get(k + "_before")
        print("| %s | %.2f (%s) | %.2f | %.2fx | %s |" % (k, med[k], " ".join("%.2f" % x for x in t[k]), raw / med[k] / 1e9,
                                                     med[k] / ref, "%.2fx" % (med[k] / b) if b else ""))
PYEOF
