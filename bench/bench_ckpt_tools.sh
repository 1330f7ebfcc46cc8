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
BENCH_NAME=bench_ckpt_tools
# shellcheck source=bench/ckpt_reference.bash
. "$(dirname "$0")/ckpt_reference.bash"
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/boost_bench_ckpt_tools.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
if [ -n "${CKPT:-}" ]; then
  f=$CKPT
else
  "$BUILD/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
  ARGS=(--set model.preset="$PRESET" --set model.seq_len=64 --set train.batch_size=1 --set train.steps=1
        --set train.val_batches=0 --set data.train="$tmp/f.tok" --set ckpt.dir="$tmp/ck" --set ckpt.keep_last=1)
  flock "$LOCK" "$BUILD/trainer/boost-train" "${ARGS[@]}" >"$tmp/save.log" 2>&1 ||
    { echo "bench_ckpt_tools: the save failed: $(tail -3 "$tmp/save.log")" >&2; exit 1; }
  f=$tmp/ck/step_00000001.h5
fi
reference_prepare "; reshard --layout $LAYOUT"
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
  reference_round
done
BEFORE_COLUMN=1 reference_table verify verify_before reshard reshard_before reshard_np2 reshard_np2_before dd cat zstd
