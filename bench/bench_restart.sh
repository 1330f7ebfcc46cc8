#!/usr/bin/env bash
# Restart cost on another layout vs the same layout, and boost-reshard's
# throughput against the disk, measured in one run (issue 8).
#
#   bash bench/bench_restart.sh [BUILD_DIR] [PRESET]      (default build, cola-130m)
#
# 1. Trains PRESET for one step on 2 ranks (dp=2) and checkpoints it.
# 2. Restarts from it (one more step) on the same layout (dp=2) and on
#    others (tp=2; dp=1 x tp=2 x pp=... as the model allows), REPEAT times
#    each, and reports the loader's own "verified and loaded in X s" and the
#    whole job's wall time.
# 3. boost-reshard of the checkpoint to tp=2 (read, decode, re-chunk,
#    compress, write, verify), against dd reading the file and writing the
#    same number of bytes (conv=fsync) on the same disk, in the same run;
#    serially and under mpirun -n 2 (the parallel rewrite).
# Prints one table; docs/PERFORMANCE.md has the figures and the machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
preset=${2:-cola-130m}
REPEAT=${REPEAT:-3}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
export OMP_NUM_THREADS=1 HDF5_PLUGIN_PATH=$B/hdf5-plugins
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/boost_bench_restart.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$B/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | disk: $(df -h "$tmp" | awk 'NR==2{print $1, $2}') | preset $preset"
common=(--set model.preset="$preset" --set data.train="$tmp/f.tok" --set model.seq_len=64 --set train.batch_size=1
  --set train.val_batches=0 --set train.threads=1 --set train.warmup_steps=0)
$MPIRUN -n 2 "$B/trainer/boost-train" "${common[@]}" --set train.steps=1 --set ckpt.dir="$tmp/ck" >"$tmp/save.log" 2>&1 ||
  { tail -3 "$tmp/save.log"; exit 1; }
f=$tmp/ck/step_00000001.h5
bytes=$(stat -c %s "$f")
echo "checkpoint: $(basename "$f"), $((bytes / 1048576)) MiB on disk"

restart() { # name np sets...
  local name=$1 np=$2 r
  shift 2
  for r in $(seq 1 "$REPEAT"); do
    rm -rf "$tmp/rs" && mkdir "$tmp/rs"
    local t0 t1
    t0=$(date +%s.%N)
    $MPIRUN -n "$np" "$B/trainer/boost-train" "${common[@]}" --set train.steps=2 --set ckpt.resume="$f" \
      --set ckpt.dir="$tmp/rs" --set ckpt.every=0 "$@" >"$tmp/r.log" 2>&1 || { tail -3 "$tmp/r.log"; exit 1; }
    t1=$(date +%s.%N)
    local load
    load=$(grep -o 'loaded in [0-9.]* s' "$tmp/r.log" | grep -o '[0-9.]*' | head -1)
    printf '%-28s run %d: load %6.2f s, whole job %6.2f s\n' "$name" "$r" "$load" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')"
  done
}
restart "same layout (dp=2)" 2
restart "other layout (tp=2)" 2 --set parallel.tp=2
restart "other layout (dp=1, 1 rank)" 1

t0=$(date +%s.%N)
"$B/tools/boost-reshard" "$f" "$tmp/resharded.h5" --layout tp=2 --quiet >/dev/null
t1=$(date +%s.%N)
tp0=$(date +%s.%N)
$MPIRUN -n 2 "$B/tools/boost-reshard" "$f" "$tmp/resharded2.h5" --layout tp=2 --quiet >/dev/null
tp1=$(date +%s.%N)
t2=$(date +%s.%N)
dd if="$f" of=/dev/null bs=4M status=none
dd if=/dev/zero of="$tmp/dd.bin" bs=4M count=$(((bytes + 4194303) / 4194304)) conv=fsync status=none
t3=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$tp0" -v g="$tp1" -v n="$bytes" 'BEGIN {
  rs = b - a; dd = d - c; rp = g - e
  printf "boost-reshard to tp=2: %.2f s (%.0f MB/s of file); dd read + write of the same bytes: %.2f s (%.0f MB/s); reshard at %.2fx of the disk\n", rs, n / rs / 1e6, dd, n / dd / 1e6, dd / rs
  printf "boost-reshard to tp=2 under mpirun -n 2: %.2f s (%.0f MB/s of file): %.2fx of the disk, %.2fx the serial rewrite\n", rp, n / rp / 1e6, dd / rp, rs / rp }'
