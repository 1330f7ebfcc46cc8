#!/usr/bin/env bash
# Checkpoint write throughput against the zstd command line and the disk
# (issue 10), one rank, in one run:
#
#   bash bench/bench_ckpt_write.sh [BUILD_DIR] [PRESET]     (default ./build cola-60m)
#
# For each zstd level in LEVELS (default "1 3") boost-train trains one step
# of PRESET and writes its checkpoint synchronously (BOOST_CKPT_SYNC=1: the
# time-to-durable of a final save on preemption: staging, checksums,
# shuffle + zstd per chunk, HDF5 write, fsync, read-back verification,
# rename and directory fsync). The same raw tensor bytes (weights and AdamW
# moments, dumped by boost-inspect) then go through `zstd -L -T1` (single
# thread, same level, no shuffle: what the CLI does with a file), and dd
# writes as many bytes with conv=fsync. Prints per level: boost's MB/s of
# raw bytes and its ratio, zstd's, and boost over zstd.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
PRESET=${2:-cola-60m}
LEVELS=${LEVELS:-1 3}
command -v zstd >/dev/null || { echo "bench_ckpt_write: the zstd CLI is needed (Debian: zstd)" >&2; exit 2; }
export OMP_NUM_THREADS=2 HDF5_PLUGIN_PATH=$BUILD/hdf5-plugins
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/boost_bench_ckpt_write.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$BUILD/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | disk: $(df -h "$tmp" | awk 'NR==2{print $1}') | preset $PRESET"
for level in $LEVELS; do
  rm -rf "$tmp/ck"
  BOOST_CKPT_SYNC=1 "$BUILD/trainer/boost-train" --set model.preset="$PRESET" --set data.train="$tmp/f.tok" \
    --set model.seq_len=64 --set train.batch_size=1 --set train.val_batches=0 --set train.threads=2 --set train.steps=1 \
    --set ckpt.dir="$tmp/ck" --set ckpt.level="$level" >"$tmp/train.log" 2>&1 || { tail -3 "$tmp/train.log"; exit 1; }
  f=$tmp/ck/step_00000001.h5
  : >"$tmp/raw"
  for cat in weights moments; do
    "$BUILD/tools/boost-inspect" --dump-category "$cat" "$tmp/$cat.raw" "$f" >/dev/null
    cat "$tmp/$cat.raw" >>"$tmp/raw"
    rm -f "$tmp/$cat.raw"
  done
  sync
  t0=$(date +%s.%N)
  zstd "-$level" -T1 -q -f "$tmp/raw" -o "$tmp/raw.zst"
  t1=$(date +%s.%N)
  dd if=/dev/zero of="$tmp/dd.bin" bs=4M count=$(( ($(stat -c %s "$f") + 4194303) / 4194304 )) conv=fsync status=none
  t2=$(date +%s.%N)
  rm -f "$tmp/dd.bin"
  python3 - "$tmp/ck/checkpoints.jsonl" "$(stat -c %s "$tmp/raw")" "$(stat -c %s "$tmp/raw.zst")" "$t0" "$t1" "$t2" \
    "$(stat -c %s "$f")" "$level" <<'EOF'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1])][-1]
raw, zst, t0, t1, t2, fbytes, level = int(sys.argv[2]), int(sys.argv[3]), *map(float, sys.argv[4:7]), int(sys.argv[7]), sys.argv[8]
ours = rec["raw_bytes"]["weights"] + rec["raw_bytes"]["moments"]
assert ours == raw, (ours, raw)
b_mbs, z_mbs, dd_mbs = raw / rec["write_s"] / 1e6, raw / (t1 - t0) / 1e6, fbytes / (t2 - t1) / 1e6
print(f"level {level}: boost durable save {rec['write_s']:.2f} s ({b_mbs:.0f} MB/s of raw, ratio {rec['ratio']:.3f}) | "
      f"zstd -{level} -T1 {t1 - t0:.2f} s ({z_mbs:.0f} MB/s, ratio {raw / zst:.3f}) | boost / zstd {b_mbs / z_mbs:.2f}x | "
      f"dd of the file's bytes (fsync) {t2 - t1:.2f} s ({dd_mbs:.0f} MB/s)")
EOF
done
