#!/usr/bin/env bash
# Build and run boost-gpu-check (tests/gpu/gpu_check.c) on a machine with a
# GPU, then print a summary. Exit status: the check's own (0 pass, 1 mismatch,
# 77 no CUDA device), or 2 when the build fails.
#
#   tests/gpu/run_gpu_check.sh               # CMake build if the project configures, else standalone
#   tests/gpu/run_gpu_check.sh --cmake       # only the CMake build (target boost-gpu-check)
#   tests/gpu/run_gpu_check.sh --standalone  # nvcc + cc only: no MPI, HDF5, OpenBLAS or Criterion needed
#
# Environment: BOOST_BUILD_DIR (CMake build dir, default <repo>/build-gpu),
# BOOST_GPU_OUT (standalone build dir, default <repo>/build-gpu-standalone),
# BOOST_GPU_ARCH (e.g. 90; default: read from nvidia-smi, else 80 and 90),
# BOOST_GPU_LOG (copy of the full output), BOOST_GPU_DEVICE, BOOST_GPU_BENCH=0,
# NVCC, CC, JOBS.
#
# The standalone build exists for GPU machines whose image carries CUDA but
# not the project's CPU-side dependencies: it compiles kernels/cuda/*.cu,
# kernels/cpu/*.c (the reference), kernels/check.c and the check, and uses
# OpenBLAS when it is installed, else tests/gpu/mini_cblas.c (a naive reference
# sgemm; BOOST_GPU_MINI_BLAS=1 forces it).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-auto}
case "$mode" in auto | --cmake | --standalone) ;; *)
  echo "usage: $0 [--cmake|--standalone]" >&2
  exit 2
  ;;
esac
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
exe=""

cmake_build() {
  local build=${BOOST_BUILD_DIR:-$root/build-gpu}
  command -v cmake >/dev/null || return 1
  echo "== CMake build in $build"
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build/configure.log" 2>&1 || {
    echo "   configure failed (see $build/configure.log)"
    return 1
  }
  grep -q "boost: CUDA backend ON" "$build/configure.log" || {
    echo "   CUDA backend not enabled (nvcc not found?)"
    return 1
  }
  cmake --build "$build" --target boost-gpu-check -j "$jobs" || return 1
  exe=$build/tests/gpu/boost-gpu-check
}

standalone_build() {
  local out=${BOOST_GPU_OUT:-$root/build-gpu-standalone}
  local nvcc=${NVCC:-nvcc} cc=${CC:-cc}
  command -v "$nvcc" >/dev/null || nvcc=/usr/local/cuda/bin/nvcc
  local cuda_home
  cuda_home=$(cd "$(dirname "$(command -v "$nvcc")")/.." && pwd)
  local archs=${BOOST_GPU_ARCH:-}
  if [ -z "$archs" ] && command -v nvidia-smi >/dev/null; then
    archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  fi
  [ -n "$archs" ] || archs="80 90"
  local gencode=()
  for a in $archs; do gencode+=("-gencode=arch=compute_$a,code=sm_$a"); done
  echo "== standalone build in $out (sm: $archs)"
  mkdir -p "$out"
  rm -f "$out"/*.o
  local pids=() f
  for f in "$root"/kernels/cuda/*.cu; do
    "$nvcc" -O3 -std=c++17 "${gencode[@]}" -lineinfo -I"$root/kernels/cuda" -c "$f" \
      -o "$out/$(basename "$f" .cu).cu.o" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || return 1
      pids=("${pids[@]:1}")
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || return 1; done
  local csrc=("$root"/kernels/check.c "$root"/kernels/cpu/*.c "$root"/tests/gpu/gpu_check.c "$root"/tests/gpu/gpu_bench.c)
  # the CPU reference's BLAS: OpenBLAS where it is installed, else the naive one
  local blas_inc=() blas_lib=()
  local probe=$out/blas_probe
  printf '#include <cblas.h>\nint main(void){float a=1,b=1,c=0;cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,1,1,1,1.0f,&a,1,&b,1,0.0f,&c,1);return openblas_get_num_threads()<1;}\n' >"$probe.c"
  local inc
  for inc in /usr/include/openblas /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include; do
    [ "${BOOST_GPU_MINI_BLAS:-0}" = 1 ] && break
    if "$cc" -I"$inc" "$probe.c" -o "$probe" -lopenblas >/dev/null 2>&1; then
      blas_inc=(-I"$inc")
      blas_lib=(-lopenblas)
      break
    fi
  done
  if [ ${#blas_lib[@]} -eq 0 ]; then
    echo "   no OpenBLAS: using tests/gpu/mini_cblas.c for the CPU reference"
    blas_inc=(-I"$root/tests/gpu/compat")
    csrc+=("$root/tests/gpu/mini_cblas.c")
  else
    echo "   CPU reference on OpenBLAS (${blas_inc[*]})"
  fi
  # NCCL wrappers and their one-rank smoke test, where NCCL is installed
  local nccl_def=() nccl_lib=()
  printf '#include <nccl.h>\nint main(void){int v=0;return ncclGetVersion(&v)!=ncclSuccess;}\n' >"$probe.c"
  if "$cc" -I"$cuda_home/include" "$probe.c" -o "$probe" -L"$cuda_home/lib64" -L"$cuda_home/lib" -lnccl >/dev/null 2>&1; then
    echo "   NCCL found: building kernels/cuda/nccl_comm.c"
    nccl_def=(-DBOOST_HAVE_NCCL=1)
    nccl_lib=(-L"$cuda_home/lib64" -L"$cuda_home/lib" -lnccl)
    csrc+=("$root/kernels/cuda/nccl_comm.c")
  fi
  for f in "${csrc[@]}"; do
    "$cc" -O2 -std=c11 -D_GNU_SOURCE -fopenmp "${nccl_def[@]}" "${blas_inc[@]}" -I"$root/kernels" -I"$root/kernels/cpu" \
      -I"$root/kernels/cuda" -I"$cuda_home/include" -c "$f" -o "$out/$(basename "$f" .c).c.o" || return 1
  done
  "$nvcc" "${gencode[@]}" -o "$out/boost-gpu-check" "$out"/*.o -lcublas "${blas_lib[@]}" "${nccl_lib[@]}" -Xcompiler -fopenmp -lm ||
    return 1
  exe=$out/boost-gpu-check
}

case "$mode" in
--cmake) cmake_build || { echo "BUILD FAILED"; exit 2; } ;;
--standalone) standalone_build || { echo "BUILD FAILED"; exit 2; } ;;
auto) cmake_build || { echo "== falling back to the standalone build"; standalone_build; } || {
  echo "BUILD FAILED"
  exit 2
} ;;
esac

log=${BOOST_GPU_LOG:-$(dirname "$exe")/gpu_check.log}
echo "== running $exe (log: $log)"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( jobs < 8 ? jobs : 8 ))} "$exe" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

echo "== summary"
head -1 "$log"
grep -E "^gpu_check:" "$log" || true
grep -E " FAIL$" "$log" || true
grep -E "^bench " "$log" || true
case $rc in
0) echo "GPU CHECK PASSED" ;;
77) echo "GPU CHECK SKIPPED (no CUDA device)" ;;
*) echo "GPU CHECK FAILED (exit $rc)" ;;
esac
exit "$rc"
