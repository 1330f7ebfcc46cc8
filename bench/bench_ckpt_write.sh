#!/usr/bin/env bash
# Checkpoint write throughput against the zstd command line and the disk
# (issue 10), one rank, in one run:
#
#   bash bench/bench_ckpt_write.sh [BUILD_DIR] [PRESET]     (default ./build cola-60m)
#
# For each zstd level in LEVELS (default "1 3"), REPEAT times (default 3),
# boost-train trains three steps of PRESET, checkpointing each synchronously
# (BOOST_CKPT_SYNC=1), and the last save is measured: its time-to-durable,
# what a final save on preemption costs (staging, checksums, shuffle + zstd
# per chunk, HDF5 write, fsync, read-back verification, rename and directory
# fsync), and its phases. The same raw tensor bytes (weights and AdamW
# moments, dumped by boost-inspect) then go through `zstd -L -T1` (single
# thread, same level, no shuffle: what the CLI does with a file), then the
# same guarantees as the durable save (`sync FILE`, an fsync, and `zstd -t`,
# the read-back test), and dd writes as many bytes with conv=fsync.
# THREADS (default 2) is train.threads: a save that training waits for
# encodes its chunks on that many threads (the direct writer,
# ckpt/write/ckpt_direct.h); THREADS=1 compares core for core with `zstd -T1`
# (whose own reads and writes run on an I/O thread, as our chunk writes do).
# Prints
# per level, in MB/s of raw bytes: the write (boost's checksums, shuffle +
# zstd and writes into the file system, from checkpoints.jsonl's phases_s
# against `zstd -T1` writing its file) and the time-to-durable (boost's whole
# save against zstd + fsync + test), with both compression ratios.
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
REPEAT=${REPEAT:-3}
for level in $LEVELS; do
  : >"$tmp/times"
  for rep in $(seq "$REPEAT"); do
    # Three synchronous saves in one run; the last is measured (a save after
    # others, as a final save on preemption is: buffers already in place).
    rm -rf "$tmp/ck"
    BOOST_CKPT_SYNC=1 "$BUILD/trainer/boost-train" --set model.preset="$PRESET" --set data.train="$tmp/f.tok" \
      --set model.seq_len=64 --set train.batch_size=1 --set train.val_batches=0 --set train.threads="${THREADS:-2}" --set train.steps=3 \
      --set ckpt.every=1 --set ckpt.dir="$tmp/ck" --set ckpt.level="$level" >"$tmp/train.log" 2>&1 ||
      { tail -3 "$tmp/train.log"; exit 1; }
    f=$tmp/ck/step_00000003.h5
    if [ "$rep" = 1 ]; then
      : >"$tmp/raw"
      for cat in weights moments; do
        "$BUILD/tools/boost-inspect" --dump-category "$cat" "$tmp/$cat.raw" "$f" >/dev/null
        cat "$tmp/$cat.raw" >>"$tmp/raw"
        rm -f "$tmp/$cat.raw"
      done
    fi
    tail -1 "$tmp/ck/checkpoints.jsonl" >>"$tmp/saves.jsonl"
    sync
    t0=$(date +%s.%N)
    zstd "-$level" -T1 -q -f "$tmp/raw" -o "$tmp/raw.zst"
    t1=$(date +%s.%N)
    sync "$tmp/raw.zst"
    zstd -t -T1 -q "$tmp/raw.zst"
    t2=$(date +%s.%N)
    dd if=/dev/zero of="$tmp/dd.bin" bs=4M count=$(( ($(stat -c %s "$f") + 4194303) / 4194304 )) conv=fsync status=none
    t3=$(date +%s.%N)
    rm -f "$tmp/dd.bin"
    echo "$t0 $t1 $t2 $t3 $(stat -c %s "$f")" >>"$tmp/times"
  done
  python3 - "$tmp/saves.jsonl" "$tmp/times" "$(stat -c %s "$tmp/raw")" "$(stat -c %s "$tmp/raw.zst")" "$level" "$REPEAT" "${THREADS:-2}" <<'EOF'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])][-int(sys.argv[6]):]
times = [list(map(float, l.split())) for l in open(sys.argv[2])]
raw, zst, level = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
for r in recs:
    assert r["committed"] and r["raw_bytes"]["weights"] + r["raw_bytes"]["moments"] == raw, r
med = statistics.median
# In sync mode stall_s is the whole time training was blocked: staging + the writer's write_s.
b_enc, b_dur = med(r["phases_s"]["encode_write"] for r in recs), med(r["stall_s"] for r in recs)
b_stage = med(r["stall_s"] - r["write_s"] for r in recs)
b_ver = med(r["phases_s"]["verify"] for r in recs)
b_sync = med(r["phases_s"]["fsync"] for r in recs)
z_enc, z_dur = med(t[1] - t[0] for t in times), med(t[2] - t[0] for t in times)
dd = med(t[4] / (t[3] - t[2]) / 1e6 for t in times)
mbs = lambda sec: raw / sec / 1e6
print(f"level {level} ({raw / 1e6:.0f} MB raw, median of {len(recs)}; {recs[-1].get('writer', 'collective')} writer, "
      f"{sys.argv[7]} encoding thread(s)): write: boost {b_enc:.2f} s ({mbs(b_enc):.0f} MB/s, "
      f"ratio {recs[-1]['ratio']:.3f}) | zstd -{level} -T1 {z_enc:.2f} s ({mbs(z_enc):.0f} MB/s, ratio {raw / zst:.3f}) | "
      f"boost / zstd {z_enc / b_enc:.2f}x")
print(f"level {level}: durable: boost {b_dur:.2f} s ({mbs(b_dur):.0f} MB/s; staging {b_stage:.2f} s, fsync {b_sync:.2f} s, read-back verification "
      f"{b_ver:.2f} s) | zstd + fsync + zstd -t {z_dur:.2f} s ({mbs(z_dur):.0f} MB/s) | boost / zstd {z_dur / b_dur:.2f}x | "
      f"dd of the file's bytes (fsync) {dd:.0f} MB/s")
print(f"level {level}: each run (boost write, zstd write): " +
      ", ".join(f"{r['phases_s']['encode_write']:.2f}/{t[1] - t[0]:.2f}" for r, t in zip(recs, times)))
EOF
done
