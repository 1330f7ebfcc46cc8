#!/usr/bin/env bash
# ctest gpu_stages_cpu: the device stages of run_gpu_check.sh with the CPU in
# the GPU's place (BOOST_GPU_FAKE_DEVICE=cpu, tiny models, every limit times
# BOOST_GPU_LIMIT_SCALE for a slower machine), from the build gpu_script
# made: their runs, resumes, 2-rank layouts, generation and evaluation,
# comparisons and figures. Each stage must pass, except the bench where this
# machine has no PyTorch on a GPU: it must then be not judged (skipped, for
# want of a PyTorch result; never passed without one).
set -uo pipefail
src=${BOOST_SOURCE_DIR:?} bin=${BOOST_BINARY_DIR:?}
out=$bin/gpu-stages-out logs=$bin/gpu-stages-logs
rm -rf "$out"
export BOOST_GPU_FAKE_DEVICE=cpu BENCH_PRESET=tiny BENCH_SEQ=64 STALL_PRESET=tiny STALL_SEQ=64 OUT=$out BOOST_GPU_LOGS=$logs \
  BOOST_GPU_BUILD=$bin/gpu-script-build BOOST_GPU_LIMIT_SCALE=${BOOST_GPU_LIMIT_SCALE:-12} BOOST_GPU_BAR_STALL=1
[ -x "$BOOST_GPU_BUILD/cmake/trainer/boost-train" ] || { echo "SKIP: no build from gpu_script ($BOOST_GPU_BUILD)"; exit 77; }
bash "$src/tests/gpu/run_gpu_check.sh" --stage build --stage train --stage ckpt --stage decode --stage multi --stage nccl \
  --stage bench --stage stall
st() { python3 -c "import json; print({s['stage']: s['status'] for s in json.load(open('$out/summary.json'))['stages']}['$1'])"; }
rc=0
for s in build probe train ckpt decode multi nccl stall; do
  [ "$(st $s)" = passed ] || { echo "FAIL: stage $s: $(st $s)"; rc=1; }
done
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  [ "$(st bench)" = passed ] || { echo "FAIL: stage bench: $(st bench)"; rc=1; }
elif [ "$(st bench)" != skipped ] || ! grep -q 'no PyTorch result' "$logs/bench.log"; then
  echo "FAIL: without PyTorch on a GPU the bench must be not judged for want of its result, not $(st bench)"
  rc=1
fi
python3 -c "import json, sys; f = json.load(open(sys.argv[1]))['figures']; assert f['decode']['same_tokens'] and 'stall' in f" \
  "$out/summary.json" || { echo "FAIL: summary.json lacks the decode and stall figures"; rc=1; }
# the sanitize stage's verdicts, with a stand-in compute-sanitizer: one that
# never ends is not judged (never failed); one that reports an error fails
fake=$bin/gpu-stages-fake
mkdir -p "$fake"
printf '#!/bin/sh\nexec sleep 1000\n' >"$fake/compute-sanitizer"
chmod 755 "$fake/compute-sanitizer"
PATH=$fake:$PATH BOOST_GPU_LIMIT_SCALE=0.5 OUT=$out.san bash "$src/tests/gpu/run_gpu_check.sh" --stage sanitize >/dev/null
if [ "$(out=$out.san st sanitize)" != skipped ] || ! grep -q 'memcheck: out of its time' "$logs/sanitize.log"; then
  echo "FAIL: a sanitizer out of its time must be not judged, not $(out=$out.san st sanitize): $(cat "$logs/sanitize.log")"
  rc=1
fi
printf '#!/bin/sh\necho "========= ERROR SUMMARY: 1 error"\nexit 1\n' >"$fake/compute-sanitizer"
PATH=$fake:$PATH BOOST_GPU_LIMIT_SCALE=0.5 OUT=$out.san bash "$src/tests/gpu/run_gpu_check.sh" --stage sanitize >/dev/null
[ "$(out=$out.san st sanitize)" = failed ] || { echo "FAIL: a sanitizer reporting an error must fail the stage"; rc=1; }
[ $rc = 0 ] && echo "gpu_stages_cpu: every stage's logic passed on the CPU; the bench is not judged without a PyTorch result;" \
  "a sanitizer out of time is not judged, one with errors fails"
exit $rc
