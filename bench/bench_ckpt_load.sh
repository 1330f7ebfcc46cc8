#!/usr/bin/env bash
# Resume speed (issue 27): a checkpoint's load against the zstd command line
# and the disk, from a cold page cache, in one run.
#
#   bash bench/bench_ckpt_load.sh [BUILD_DIR] [PRESET] [BEFORE_BUILD_DIR]   (default ./build cola-350m)
#   CKPT_DIR=DIR bash bench/bench_ckpt_load.sh BUILD cola-1b BEFORE   (reuse DIR's newest checkpoint)
#
# One step of PRESET is trained and checkpointed (B=1, T=64, train.threads =
# all cores) -- or, with CKPT_DIR, the newest step_N.h5 there is used as it
# is (written by a run of PRESET with B=1, T=64; EXTRA adds --set options
# when its config differed; nothing is written there) --, then, REPEAT
# times (default 3), each after dropping the page cache (echo 3 >
# /proc/sys/vm/drop_caches: root):
#   boost    a resume with no step left (boost-train, same config): "verified
#            and loaded in X s" of its log -- read, decode, verify checksums,
#            into the arenas -- and the run's peak RSS
#   before   the same with the boost-train of BEFORE_BUILD_DIR, if given
#   dd       dd of the checkpoint file to /dev/null (the disk's read rate)
#   cat      cat of a zstd file of the same tensors to /dev/null
#   zstd     zstd -d -T0 of that file to /dev/null (the CLI decoding the
#            same amount of data on every core)
# The zstd file holds the checkpoint's weights and moments (boost-inspect
# --dump-category), compressed with zstd -1 after HDF5's byte shuffle would
# have made them compressible alike: here plain `zstd -1 -T0`, so it is
# larger than the checkpoint (no shuffle) -- its size is printed. Medians.
# Runs hold LOCK (default /tmp/boost-bigmem.lock): cola-1b needs ~17 GB.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
PRESET=${2:-cola-350m}
BEFORE=${3:-}
REPEAT=${REPEAT:-3}
LOCK=${LOCK:-/tmp/boost-bigmem.lock}
PY=${PY:-/usr/bin/python3}
command -v zstd >/dev/null || { echo "bench_ckpt_load: the zstd CLI is needed (Debian: zstd)" >&2; exit 2; }
[ -w /proc/sys/vm/drop_caches ] || { echo "bench_ckpt_load: dropping the page cache needs root" >&2; exit 2; }
export HDF5_PLUGIN_PATH=$BUILD/hdf5-plugins OMP_WAIT_POLICY=passive
BENCH_NAME=bench_ckpt_load
# shellcheck source=bench/ckpt_reference.bash
. "$(dirname "$0")/ckpt_reference.bash"
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/boost_bench_ckpt_load.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
"$BUILD/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
ARGS=(--set model.preset="$PRESET" --set model.seq_len=64 --set train.batch_size=1
      --set train.val_batches=0 --set data.train="$tmp/f.tok")
CKPT_DIR=${CKPT_DIR:-}
CKPT_DIR=${CKPT_DIR%/}
if [ -n "$CKPT_DIR" ]; then
  f=$(ls "$CKPT_DIR"/step_*.h5 2>/dev/null | sort | tail -1)
  [ -n "$f" ] || { echo "bench_ckpt_load: no step_N.h5 in CKPT_DIR=$CKPT_DIR" >&2; exit 2; }
  step=$(basename "$f" .h5 | sed 's/^step_0*//')
  # ${EXTRA} is split into words on purpose: "--set a=b --set c=d"
  # shellcheck disable=SC2206
  ARGS+=(--set train.steps="$step" --set ckpt.dir="$CKPT_DIR" ${EXTRA:-})
else
  ARGS+=(--set train.steps=1 --set ckpt.dir="$tmp/ck" --set ckpt.keep_last=1)
  flock "$LOCK" "$BUILD/trainer/boost-train" "${ARGS[@]}" >"$tmp/save.log" 2>&1 ||
    { echo "bench_ckpt_load: the save failed: $(tail -3 "$tmp/save.log")" >&2; exit 1; }
  f=$tmp/ck/step_00000001.h5
fi
reference_prepare
load() { # BUILD: the resume's own figure
  cold
  flock "$LOCK" "$1/trainer/boost-train" "${ARGS[@]}" >"$tmp/load.log" 2>&1 ||
    { echo "bench_ckpt_load: the resume failed: $(tail -3 "$tmp/load.log")" >&2; exit 1; }
  grep -q "resumed from $f" "$tmp/load.log" ||
    { echo "bench_ckpt_load: the run did not resume from $f: $(grep -m1 checkpoints "$tmp/load.log")" >&2; exit 1; }
  echo "$(grep -o 'peak RSS [0-9]*' "$tmp/load.log" | grep -o '[0-9]*')" >>"$tmp/rss.$2"
  grep -o 'verified and loaded in [0-9.]* s' "$tmp/load.log" | grep -o '[0-9.]*'
}
: >"$tmp/times"
for rep in $(seq "$REPEAT"); do
  echo "boost $(load "$BUILD" boost)" >>"$tmp/times"
  [ -n "$BEFORE" ] && echo "before $(load "$BEFORE" before)" >>"$tmp/times"
  reference_round
done
for k in boost before; do [ -s "$tmp/rss.$k" ] && echo "peak RSS of the resume ($k): $(sort -n "$tmp/rss.$k" | tail -1) MiB"; done
reference_table boost before dd cat zstd
