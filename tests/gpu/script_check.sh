#!/usr/bin/env bash
# ctest gpu_script: tests/gpu/run_gpu_check.sh --all --no-device, as on a
# GPU machine without boost's Debian libraries (without_debian_libs.sh), so
# the carry is known to unpack, configure and build boost for sm_90; it
# must stop where a GPU is needed with exit 77. Prepares the carry first
# when tests/gpu/carry has none or an older one (from this build's programs).
set -uo pipefail
src=${BOOST_SOURCE_DIR:?} bin=${BOOST_BINARY_DIR:?}
# A carry older than the script that packs it lacks what the script now
# packs (mpirun came later): packed again.
if [ ! -f "$src/tests/gpu/carry/prefix.tar.xz" ] || [ "$src/tests/gpu/prepare_carry.sh" -nt "$src/tests/gpu/carry/prefix.tar.xz" ] ||
  [ "$src/tests/gpu/carry_unpack.py" -nt "$src/tests/gpu/carry/prefix.tar.xz" ]; then
  bash "$src/tests/gpu/prepare_carry.sh" "$bin" || { echo "FAIL: prepare_carry.sh"; exit 1; }
fi
out=$bin/gpu-script-out
rm -rf "$out"
rc=0
OUT=$out BOOST_GPU_BUILD=$bin/gpu-script-build BOOST_GPU_LIMIT_SCALE=${BOOST_GPU_LIMIT_SCALE:-8} bash "$src/tests/gpu/without_debian_libs.sh" \
  bash "$src/tests/gpu/run_gpu_check.sh" --all --no-device || rc=$?
if [ "$rc" != 77 ]; then
  echo "FAIL: run_gpu_check.sh --all --no-device exited $rc, not 77"
  tail -20 "$out"/build.log "$out"/configure.log 2>/dev/null
  exit 1
fi
grep -q '^build *passed' "$out/summary.txt" || { echo "FAIL: the build stage did not pass"; exit 1; }
for s in probe check train ckpt multi nccl bench stall sanitize; do
  grep -q "^$s *no-device" "$out/summary.txt" || { echo "FAIL: stage $s is not marked no-device"; exit 1; }
done
echo "gpu_script: built and packaged for sm_90 without the Debian libraries; exit 77 where a GPU is needed"
