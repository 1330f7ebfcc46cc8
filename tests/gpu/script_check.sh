#!/usr/bin/env bash
# ctest gpu_script: tests/gpu/run_gpu_check.sh --all --no-device, as on a
# GPU machine without boost's Debian libraries (without_debian_libs.sh):
# first that namespace itself is the GPU machine's image as the check meets
# it (no ssh or rsh on PATH, no PMIx or munge library, no Open MPI); then
# the carry unpacks, configures and builds boost for sm_90 there (nvcc taken
# from /usr/local/cuda/bin, which PATH lacks), two ranks
# start under the carried mpirun (the build stage's smoke run), and the run
# stops where a GPU is needed with exit 77, leaving in --out what comes back
# from that machine: at most 8 files, none more than 2 folders down -- here
# summary.txt, summary.json and logs.tar.xz. Prepares the carry first when
# tests/gpu/carry has none or an older one (from this build's programs).
set -uo pipefail
src=${BOOST_SOURCE_DIR:?} bin=${BOOST_BINARY_DIR:?}
hide=$src/tests/gpu/without_debian_libs.sh
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  echo "SKIP: no private mount namespace here (root and unshare -m): the GPU machine cannot be imitated"
  exit 77
fi
# 1. the namespace: what the GPU machine lacks is missing here too
# shellcheck disable=SC2016 # expanded inside the namespace
if ! bash "$hide" bash -c 'for c in ssh rsh; do p=$(command -v $c) && [ -x "$p" ] && { echo "$c is on PATH"; exit 1; }; done
  for f in /usr/lib/x86_64-linux-gnu/libpmix.so.2 /usr/lib/x86_64-linux-gnu/libmunge.so.2 /usr/bin/orterun; do
    [ ! -s "$(readlink -f "$f")" ] || { echo "$f is visible"; exit 1; }; done' 2>/dev/null; then
  echo "FAIL: without_debian_libs.sh leaves what the GPU machine lacks visible (above)"
  exit 1
fi
# A carry older than the scripts that pack and unpack it lacks what they now
# handle: packed again.
if [ ! -f "$src/tests/gpu/carry/prefix.tar.xz" ] || [ "$src/tests/gpu/prepare_carry.sh" -nt "$src/tests/gpu/carry/prefix.tar.xz" ] ||
  [ "$src/tests/gpu/carry_unpack.py" -nt "$src/tests/gpu/carry/prefix.tar.xz" ]; then
  bash "$src/tests/gpu/prepare_carry.sh" "$bin" || { echo "FAIL: prepare_carry.sh"; exit 1; }
fi
# the carry: PMIx and munge in, oneDNN out, and with the working tree under the device tool's 64 MiB
man=$src/tests/gpu/carry/MANIFEST
for p in libpmix2 libmunge2 openmpi-bin; do grep -q "^$p " "$man" || { echo "FAIL: the carry lacks $p ($man)"; exit 1; }; done
! grep -q '^libdnnl' "$man" || { echo "FAIL: the carry packs oneDNN, which the GPU build cannot use"; exit 1; }
tree=$(cd "$src" && git ls-files -z -c -o --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$(($(stat -c %s "$src/tests/gpu/carry/prefix.tar.xz") + ${tree:-0}))
[ "$total" -lt $((62 << 20)) ] || { echo "FAIL: the carry and the working tree come to $((total >> 20)) MiB (64 MiB travel)"; exit 1; }
out=$bin/gpu-script-out logs=$bin/gpu-script-logs
rm -rf "$out"
rc=0
# the toolkit off PATH (every folder holding an nvcc left out), as on an
# image that only installs it in /usr/local/cuda
nocuda_path=$(echo "$PATH" | tr ':' '\n' | while read -r d; do [ -x "$d/nvcc" ] || echo "$d"; done | paste -sd: -)
env -u CUDA_HOME -u CUDA_PATH PATH="$nocuda_path" OUT="$out" BOOST_GPU_LOGS="$logs" BOOST_GPU_BUILD="$bin/gpu-script-build" \
  BOOST_GPU_LIMIT_SCALE="${BOOST_GPU_LIMIT_SCALE:-8}" bash "$hide" bash "$src/tests/gpu/run_gpu_check.sh" --all --no-device || rc=$?
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
if [ "$rc" != 77 ]; then
  fail "run_gpu_check.sh --all --no-device exited $rc, not 77"
  tail -20 "$logs"/build.log "$logs"/configure.log 2>/dev/null
fi
grep -q '^build *passed' "$out/summary.txt" || fail "the build stage did not pass: $(grep '^build' "$out/summary.txt")"
grep -q 'two under mpirun' "$logs/build.log" || fail "the build stage's mpirun -n 2 smoke run did not pass"
if [ -x /usr/local/cuda/bin/nvcc ] && ! grep -q 'note: nvcc from /usr/local/cuda/bin' "$logs/build.log"; then
  fail "with nvcc off PATH the build stage did not take /usr/local/cuda/bin's"
fi
for s in probe check train ckpt decode multi nccl sanitize stall bench; do
  grep -q "^$s *no-device" "$out/summary.txt" || fail "stage $s is not marked no-device"
done
# what comes back from the GPU machine: at most 8 files, at most 2 folders down
files=$(cd "$out" && find . -type f | sort)
[ "$(echo "$files" | grep -c .)" -le 8 ] || fail "$out holds $(echo "$files" | grep -c .) files (at most 8 come back): $files"
deep=$(cd "$out" && find . -mindepth 4 | head -3)
[ -z "$deep" ] || fail "$out has paths more than 2 folders down: $deep"
[ -z "$(cd "$out" && find . ! -type f ! -type d)" ] || fail "$out holds something that is not a plain file"
[ "$files" = "$(printf './logs.tar.xz\n./summary.json\n./summary.txt')" ] ||
  fail "$out holds $(echo "$files" | tr '\n' ' '), not summary.txt, summary.json and logs.tar.xz"
packed=$(tar -tJf "$out/logs.tar.xz" 2>/dev/null)
grep -q '^logs/build.log$' <<<"$packed" || fail "logs.tar.xz lacks logs/build.log"
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); assert d['exit'] == 77 and len(d['stages']) == 12" \
  "$out/summary.json" || fail "summary.json does not hold the run's 12 stages and exit 77"
[ "$fails" = 0 ] || exit 1
echo "gpu_script: built and packaged for sm_90 without the Debian libraries or ssh; mpirun -n 2 started;" \
  "exit 77 where a GPU is needed; the report is $(echo "$files" | wc -l) files"
