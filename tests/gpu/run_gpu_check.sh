#!/usr/bin/env bash
# Everything boost's GPU path owes, verified on one GPU machine in one go:
#
#   tests/gpu/run_gpu_check.sh --all [--budget S] [--out DIR] [--build DIR] [--arch SM] [--no-device]
#   tests/gpu/run_gpu_check.sh --stage NAME ...   (some stages, in priority order; the probe with any GPU stage)
#   tests/gpu/run_gpu_check.sh --plan [--budget S] (the stages, their limits, what fits; runs nothing)
#
# Stages in priority order (gpu_plan.py holds each one's estimate and limit,
# which add to 535 s within the 540 s budget on one H200, the build included):
# env, build, probe, check, train, ckpt, decode, multi, nccl, sanitize,
# stall, bench. A stage starts only if its whole limit fits what is left of
# the budget (--budget S, or BOOST_GPU_BUDGET_S; default 540) and is killed
# at its limit; a stage that does not fit is reported not-run. Each stage
# judges by its figures and prints them. The report is three files in --out:
# summary.txt (passed, failed, slow, not run), summary.json (every stage and
# every figure) and logs.tar.xz (every log and small work file); the logs
# and the work live in BOOST_GPU_LOGS (default BUILD/check) meanwhile.
# Exit: 0 every stage passed; 1 a wrong result (whatever else happened);
# 77 no GPU (--no-device, or the probe finds none; what needs no GPU
# passed); 3 none failed but some did not run (budget, a missing tool, a
# sanitizer out of time); 4 all right but a speed bar not met; 2 usage.
#
# The machine needs the CUDA toolkit (nvcc, compute-sanitizer), CMake, a C
# compiler and Python 3 with PyTorch (its NCCL is used when the toolkit has
# none); boost's Debian libraries and Open MPI come from
# tests/gpu/carry/prefix.tar.xz (tests/gpu/prepare_carry.sh; docs/CUDA.md).
# Environment: OUT (./gpu-check-out), BOOST_GPU_BUILD (./build-gpu),
# BOOST_GPU_LOGS (BUILD/check),
# BOOST_GPU_PEAK_TFLOPS (dense bf16 peak, for MFU; known for H200/H100/A100),
# BOOST_GPU_BAR_RATIO (1.3), BOOST_GPU_BAR_MFU (0.40), BOOST_GPU_BAR_STALL
# (0.01), BOOST_GPU_NCCL_SWITCH (the config that routes size-1 groups
# through NCCL), BENCH_BATCH (8), STALL_PRESET (cola-350m).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
self=$root/tests/gpu/run_gpu_check.sh

help_text() { sed -n '2,21p' "$self" | sed 's/^# \{0,1\}//'; }
usage() {
  help_text >&2
  exit 2
}

# ---- one stage, run by gpu_plan.py as its own process group under the stage's limit ----
if [ "${1:-}" = "--_stage" ]; then
  # a stage's OUT is the logs folder (gpu_plan.py packs it into the report)
  OUT=$LOGS
  export OUT BUILD ARCH
  # shellcheck source=tests/gpu/gpu_stages.sh
  source "$root/tests/gpu/gpu_stages.sh"
  "stage_$2"
  exit $?
fi

all=0 nodev=0 plan=0 picked=() budget=()
OUT=${OUT:-$PWD/gpu-check-out}
BUILD=${BOOST_GPU_BUILD:-$root/build-gpu}
ARCH=90
while [ $# -gt 0 ]; do
  case "$1" in
  --all) all=1 ;;
  --plan) plan=1 ;;
  --no-device) nodev=1 ;;
  --budget | --out | --build | --arch | --stage)
    [ $# -ge 2 ] || { echo "run_gpu_check: $1 needs a value" >&2; exit 2; }
    case "$1" in
    --budget) budget=(--budget "$2") ;;
    --out) OUT=$2 ;;
    --build) BUILD=$2 ;;
    --arch) ARCH=$2 ;;
    --stage) picked+=("$2") ;;
    esac
    shift
    ;;
  -h | --help) help_text; exit 0 ;;
  *) echo "run_gpu_check: unknown argument $1" >&2; usage ;;
  esac
  shift
done
plan_py=(python3 "$root/tests/gpu/gpu_plan.py")
if [ "$plan" = 1 ]; then
  "${plan_py[@]}" table
  exec "${plan_py[@]}" plan "${budget[@]}" "${picked[@]}"
fi
[ "$all" = 1 ] || [ ${#picked[@]} -gt 0 ] || usage
[ "$all" = 1 ] && picked=()
mkdir -p "$OUT" "$BUILD"
OUT=$(cd "$OUT" && pwd) BUILD=$(cd "$BUILD" && pwd)
LOGS=${BOOST_GPU_LOGS:-$BUILD/check}
mkdir -p "$LOGS"
# one run's logs: what the report packs (the previous run's, and only those, removed)
rm -rf "$LOGS"/*.log "$LOGS"/*.json "$LOGS"/summary.txt "$LOGS/work"
LOGS=$(cd "$LOGS" && pwd)
export OUT BUILD ARCH LOGS
nd=()
[ "$nodev" = 1 ] && nd=(--no-device)
rc=0
"${plan_py[@]}" run --self "$self" --out "$OUT" --logs "$LOGS" "${budget[@]}" "${nd[@]}" "${picked[@]}" || rc=$?
[ "$rc" = 77 ] && echo "run_gpu_check: built and packaged; no GPU here (exit 77): the device stages remain"
exit "$rc"
