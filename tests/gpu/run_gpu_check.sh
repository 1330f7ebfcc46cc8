#!/usr/bin/env bash
# Everything boost's GPU path owes, verified on one GPU machine in one go:
#
#   tests/gpu/run_gpu_check.sh --all [--out DIR] [--build DIR] [--arch SM] [--no-device]
#   tests/gpu/run_gpu_check.sh --stage NAME ...     (one or more stages; build first unless already built)
#
# The machine needs the CUDA toolkit (nvcc, compute-sanitizer), CMake, a C
# compiler and Python 3 (PyTorch for the bench); boost's Debian libraries
# come from tests/gpu/carry/prefix.tar.xz, which tests/gpu/prepare_carry.sh
# makes on a Debian machine and the device tool carries (docs/CUDA.md).
# Stages, in order, each with its own time limit (seconds) and log $OUT/NAME.log:
#   env      (30)  the machine: GPU, driver, toolkit, glibc, Python, PyTorch
#   build    (300) unpack the carry, configure for sm_ARCH (default 90), build
#                  boost-train, boost-data, boost-inspect, boost-gpu-check
#   check    (120) boost-gpu-check: every seam entry against the CPU backend,
#                  f32 and bf16 activations (tolerances in docs/CUDA.md)
#   sanitize (180) compute-sanitizer memcheck (f32, bf16) and racecheck (bf16)
#                  over boost-gpu-check --small
#   train    (120) tiny preset, 50 steps, same seed: cuda f32 against cpu
#                  (loss within 1e-4 relative), cuda twice (bit for bit), and
#                  with train.precision: cuda bf16 against cpu (2e-2)
#   ckpt     (120) save on cuda -> resume on cpu, and the reverse (steps
#                  11-20 within 1e-4 of the uninterrupted run); boost-inspect --verify
#   bench    (300) cola-1b, bf16 (where train.precision exists), seq 1024:
#                  tokens/s, TFLOP/s, MFU, beside PyTorch (bf16 autocast, SDPA,
#                  fused AdamW, torch.compile: tests/gpu/torch_gpu_peer.py)
#   stall    (180) the checkpoint stall on the GPU against a synchronous save
# The stages share a budget of BOOST_GPU_BUDGET_S (480) seconds: a stage that
# would start past it is not run. $OUT/summary.txt and summary.json say what
# each stage did. Stage status: ok, FAIL, TIMEOUT, skipped (needs what is not
# here), not-run (out of time), no-device.
#
# Exit: 0 every stage that ran passed; 1 one failed; 77 no GPU -- with
# --no-device (what ctest runs on machines without one) after env and build,
# so the build and the packaging are known to work; 2 usage.
# Environment: OUT (default $OUT or ./gpu-check-out), BOOST_GPU_BUILD
# (default ./build-gpu), BOOST_GPU_PEAK_TFLOPS (the GPU's dense bf16 peak,
# for MFU; known for H100/H200/A100), BENCH_BATCH (8), STALL_PRESET (cola-350m).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
self=$root/tests/gpu/run_gpu_check.sh
STAGES=(env build check sanitize train ckpt bench stall)
declare -A LIMIT=([env]=30 [build]=300 [check]=120 [sanitize]=180 [train]=120 [ckpt]=120 [bench]=300 [stall]=180)

usage() {
  sed -n '2,12p' "$self" >&2
  exit 2
}

# ---- one stage, run by the script itself under `timeout` ------------------------------
stage_main() { # NAME
  export OUT BUILD ARCH
  source "$root/tests/gpu/gpu_stages.sh"
  "stage_$1"
}
if [ "${1:-}" = "--_stage" ]; then stage_main "$2"; exit $?; fi

all=0 nodev=0 picked=()
OUT=${OUT:-$PWD/gpu-check-out}
BUILD=${BOOST_GPU_BUILD:-$root/build-gpu}
ARCH=90
while [ $# -gt 0 ]; do
  case "$1" in
  --all) all=1 ;;
  --no-device) nodev=1 ;;
  --out) OUT=$2; shift ;;
  --build) BUILD=$2; shift ;;
  --arch) ARCH=$2; shift ;;
  --stage) picked+=("$2"); shift ;;
  -h | --help) usage ;;
  *) echo "run_gpu_check: unknown argument $1" >&2; usage ;;
  esac
  shift
done
[ "$all" = 1 ] || [ ${#picked[@]} -gt 0 ] || usage
[ "$all" = 1 ] && picked=("${STAGES[@]}")
for s in "${picked[@]}"; do [ -n "${LIMIT[$s]:-}" ] || { echo "run_gpu_check: no stage '$s'" >&2; exit 2; }; done
mkdir -p "$OUT" "$BUILD"
OUT=$(cd "$OUT" && pwd) BUILD=$(cd "$BUILD" && pwd)
export OUT BUILD ARCH

budget=${BOOST_GPU_BUDGET_S:-480}
t0=$(date +%s)
declare -A status secs code
rc_all=0 no_gpu=0
for s in "${picked[@]}"; do
  left=$((budget - ($(date +%s) - t0)))
  if [ "$no_gpu" = 1 ] && [ "$s" != env ] && [ "$s" != build ]; then
    status[$s]=no-device secs[$s]=0 code[$s]=77
    continue
  fi
  if [ "$left" -lt 15 ]; then
    status[$s]=not-run secs[$s]=0 code[$s]=-
    rc_all=1
    continue
  fi
  lim=${LIMIT[$s]}
  [ "$lim" -le "$left" ] || lim=$left
  printf '== %-8s (limit %3d s) ... ' "$s" "$lim"
  ts=$(date +%s)
  timeout --kill-after=10 "$lim" "$self" --_stage "$s" >"$OUT/$s.log" 2>&1
  rc=$?
  secs[$s]=$(($(date +%s) - ts)) code[$s]=$rc
  case $rc in
  0) status[$s]=ok ;;
  77) status[$s]=skipped ;;
  124 | 137) status[$s]=TIMEOUT rc_all=1 ;;
  *) status[$s]=FAIL rc_all=1 ;;
  esac
  echo "${status[$s]} (${secs[$s]} s)"
  grep -E '^(ok|FAIL|note|result):' "$OUT/$s.log" | sed 's/^/     /' | head -8
  # after the build, the rest needs a GPU (or BOOST_GPU_FAKE_DEVICE: gpu_stages.sh)
  if [ "$s" = build ] && [ "$rc" = 0 ] && [ -z "${BOOST_GPU_FAKE_DEVICE:-}" ] &&
    { [ "$nodev" = 1 ] || ! "$self" --_stage probe >"$OUT/probe.log" 2>&1; }; then
    no_gpu=1
  fi
done

{
  echo "boost GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - t0)) s of $budget s"
  grep -m1 '^gpu:' "$OUT/env.log" 2>/dev/null || true
  for s in "${picked[@]}"; do
    printf '%-9s %-9s exit %-3s %4s s  %s\n' "$s" "${status[$s]}" "${code[$s]}" "${secs[$s]}" \
      "$(grep -E '^result:' "$OUT/$s.log" 2>/dev/null | head -1 | sed 's/^result: //')"
  done
} | tee "$OUT/summary.txt"
{
  printf '{"budget_s": %d, "elapsed_s": %d, "stages": [' "$budget" "$(($(date +%s) - t0))"
  sep=""
  for s in "${picked[@]}"; do
    printf '%s{"stage": "%s", "status": "%s", "exit": "%s", "seconds": %d}' "$sep" "$s" "${status[$s]}" "${code[$s]}" \
      "${secs[$s]}"
    sep=", "
  done
  printf ']}\n'
} >"$OUT/summary.json"
if [ "$no_gpu" = 1 ] && [ "$rc_all" = 0 ]; then
  echo "run_gpu_check: built and packaged; no GPU here (exit 77): the device stages remain"
  exit 77
fi
exit "$rc_all"
