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
[ -x "$BOOST_GPU_BUILD/cmake/run/boost-train" ] || { echo "SKIP: no build from gpu_script ($BOOST_GPU_BUILD)"; exit 77; }
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
[ $rc = 0 ] && echo "gpu_stages_cpu: every stage's logic passed on the CPU; the bench is not judged without a PyTorch result"
exit $rc
