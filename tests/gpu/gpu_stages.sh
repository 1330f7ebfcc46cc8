# shellcheck shell=bash disable=SC2154  # root, OUT, BUILD, ARCH come from run_gpu_check.sh
# The stages of tests/gpu/run_gpu_check.sh (sourced; each stage_NAME runs in
# a process of its own under the stage's time limit, its output in
# $OUT/NAME.log). Lines a stage prints that start with "ok:", "FAIL:",
# "note:" or "result:" are its verdicts; the summary shows the "result:"
# line. Needs root, OUT, BUILD, ARCH. BOOST_GPU_FAKE_DEVICE=cpu runs the
# device stages with the CPU in the GPU's place (ctest gpu_stages_cpu: the
# stages' own logic, checked where there is no GPU).
prefix=$BUILD/prefix
bin=$BUILD/cmake
W=$OUT/work
mkdir -p "$W"
gc=$bin/tests/gpu/boost-gpu-check
train=$bin/run/boost-train
cmp() { python3 "$root/tests/gpu/gpu_compare.py" "$@"; }
# boost's programs with the carried libraries (a subshell: the rest of the
# machine -- Python, PyTorch -- keeps its own)
benv() { (
  # shellcheck disable=SC1091
  source "$prefix/env.sh"
  "$@"
); }
threads() { local n; n=$(nproc); echo $((n < 8 ? n : 8)); }
dev=${BOOST_GPU_FAKE_DEVICE:-cuda}
# judge LABEL gpu_compare-args...: prints the verdict with the label; its status
judge() {
  local label=$1 out r=0
  shift
  out=$(cmp "$@") || r=1
  echo "$out ($label)"
  return $r
}
has_key() { benv "$train" --help 2>/dev/null | grep -q "^ *$1 "; }

# a token shard of the repository's own text (the machine has no corpus)
shard() {
  [ -s "$W/text.tok" ] || benv "$bin/tools/boost-data" -o "$W/text.tok" "$root/docs" "$root/README.md" "$root/kernels" \
    "$root/trainer" "$root/ckpt" >/dev/null
}

# boost-train NAME [--set ...]: metrics to $W/NAME.jsonl, log to $W/NAME.log
bt() {
  local name=$1
  shift
  rm -f "$W/$name.jsonl"
  benv "$train" --set data.train="$W/text.tok" --set train.val_batches=0 --set train.log_every=1 \
    --set train.threads="$(threads)" --set train.metrics="$W/$name.jsonl" "$@" >"$W/$name.log" 2>&1 ||
    { echo "FAIL: boost-train $name: $(tail -2 "$W/$name.log" | tr '\n' ' ')"; return 1; }
}

stage_env() {
  echo "date: $(date -u)"
  uname -a
  echo "cores: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2}') GiB; disk: $(df -h "$OUT" | awk 'NR==2 {print $4}') free"
  echo "glibc: $(ldd --version | head -1)"
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | head -1)"
    nvidia-smi
  else
    echo "gpu: none (nvidia-smi finds no GPU)"
  fi
  command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not on PATH"
  cmake --version | head -1
  command -v compute-sanitizer >/dev/null && compute-sanitizer --version | head -2 || echo "compute-sanitizer: not on PATH"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available())" 2>&1 |
    tail -1
  ls -la "$root/tests/gpu/carry" 2>&1
  grep '^# glibc' "$root/tests/gpu/carry/MANIFEST" 2>/dev/null
  echo "result: $(grep -m1 '^gpu:' "$OUT/env.log" 2>/dev/null || echo see env.log)"
  return 0
}

stage_build() {
  local tar=$root/tests/gpu/carry/prefix.tar.xz lib=$prefix/usr/lib/x86_64-linux-gnu
  [ -f "$tar" ] || { echo "FAIL: no $tar: run tests/gpu/prepare_carry.sh on a Debian machine, carry tests/gpu/carry"; return 1; }
  if [ ! -f "$prefix/.unpacked" ] || [ "$tar" -nt "$prefix/.unpacked" ] || [ "$root/tests/gpu/carry_unpack.py" -nt "$prefix/.unpacked" ]; then
    rm -rf "$prefix"
    python3 "$root/tests/gpu/carry_unpack.py" "$tar" "$prefix" || { echo "FAIL: the carry does not unpack here"; return 1; }
    touch "$prefix/.unpacked"
  fi
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig # the carried .pc files only
  command -v pkg-config >/dev/null || export PKG_CONFIG=$prefix/pkg-config
  local gen=() hints=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  mapfile -t hints <"$prefix/cmake.args"
  benv cmake -S "$root" -B "$bin" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBOOST_CUDA_ARCHITECTURES="$ARCH" \
    "${hints[@]}" >"$OUT/configure.log" 2>&1 || { echo "FAIL: configure (configure.log)"; tail -15 "$OUT/configure.log"; return 1; }
  grep -q "boost: CUDA backend ON" "$OUT/configure.log" || { echo "FAIL: CUDA backend off (no nvcc?)"; return 1; }
  local c
  for c in MPI_mpi_LIBRARY HDF5_hdf5_LIBRARY_RELEASE OPENBLAS_OPENMP_LIBRARY pkgcfg_lib_ZSTD_zstd; do
    echo "note: $c = $(grep "^$c:" "$bin/CMakeCache.txt" | cut -d= -f2)"
  done
  benv cmake --build "$bin" --target boost-train boost-data boost-inspect boost-gpu-check -j"$(nproc)" \
    >"$OUT/compile.log" 2>&1 || { echo "FAIL: build (compile.log)"; grep -m5 -E 'error|Error' "$OUT/compile.log"; return 1; }
  if benv ldd "$train" "$gc" | grep 'not found'; then
    echo "FAIL: libraries not found at run time"
    return 1
  fi
  # the carried libraries at work, no GPU needed: MPI started alone, a
  # checkpoint written and verified, the GPU check's harness
  shard
  rm -rf "$W/smoke"
  bt smoke --set model.preset=tiny --set model.seq_len=32 --set train.batch_size=2 --set train.steps=2 \
    --set train.device=cpu --set ckpt.dir="$W/smoke" --set ckpt.every=2 || return 1
  benv "$bin/tools/boost-inspect" --verify "$W/smoke" >"$W/smoke_inspect.log" 2>&1 ||
    { echo "FAIL: boost-inspect --verify: $(tail -1 "$W/smoke_inspect.log")"; return 1; }
  benv "$gc" --self-test --small >"$W/smoke_selftest.log" 2>&1 || { echo "FAIL: boost-gpu-check --self-test"; return 1; }
  echo "ok: a 2-step cpu run with a checkpoint, boost-inspect --verify, boost-gpu-check --self-test"
  echo "result: built for sm_$ARCH ($(grep -o 'NCCL communication O[NF]*' "$OUT/configure.log" || echo 'NCCL ?')); the carried libraries run"
}

stage_probe() { benv "$gc" --probe; }

stage_check() {
  local rc=0
  benv "$gc" || rc=$?
  [ "$rc" = 77 ] && return 77
  echo "result: $(grep -m1 '^gpu_check:' "$OUT/check.log" 2>/dev/null)"
  return "$rc"
}

stage_sanitize() {
  local cs rc=0
  cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  [ -x "$cs" ] || { echo "note: no compute-sanitizer"; return 77; }
  benv "$cs" --tool memcheck --error-exitcode 1 "$gc" --small --no-bench >"$W/memcheck.log" 2>&1 || rc=1
  echo "$([ $rc = 0 ] && echo ok || echo FAIL): memcheck: $(grep -m1 'ERROR SUMMARY' "$W/memcheck.log")"
  local r2=0
  benv "$cs" --tool racecheck --error-exitcode 1 "$gc" --small --no-bench >"$W/racecheck.log" 2>&1 || r2=1
  echo "$([ $r2 = 0 ] && echo ok || echo FAIL): racecheck: $(grep -m1 -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$W/racecheck.log")"
  echo "result: memcheck $([ $rc = 0 ] && echo clean || echo ERRORS), racecheck $([ $r2 = 0 ] && echo clean || echo HAZARDS)"
  [ $rc = 0 ] && [ $r2 = 0 ]
}

stage_train() {
  shard
  local t=(--set model.preset=tiny --set model.seq_len=64 --set train.batch_size=4 --set train.steps=50 --set train.seed=7)
  bt cpu "${t[@]}" --set train.device=cpu || return 1
  bt cuda "${t[@]}" --set train.device="$dev" || return 1
  bt cuda2 "${t[@]}" --set train.device="$dev" || return 1
  local rc=0
  judge "cuda f32 vs cpu" losses "$W/cuda.jsonl" "$W/cpu.jsonl" 1e-4 || rc=1
  judge "cuda twice" same "$W/cuda.jsonl" "$W/cuda2.jsonl" || rc=1
  if has_key train.precision; then
    bt cudabf "${t[@]}" --set train.device="$dev" --set train.precision=bf16 || return 1
    judge "cuda bf16 vs cpu f32" losses "$W/cudabf.jsonl" "$W/cpu.jsonl" 2e-2 || rc=1
  else
    echo "note: this build has no train.precision: the bf16 trajectory is not checked"
  fi
  echo "result: tiny 50 steps: $([ $rc = 0 ] && echo 'cuda matches cpu' || echo 'MISMATCH') ($(tail -1 "$W/cuda.log" | cut -c1-60))"
  return $rc
}

stage_ckpt() {
  shard
  local t=(--set model.preset=tiny --set model.seq_len=64 --set train.batch_size=4 --set train.steps=20 --set train.seed=7
    --set ckpt.every=10 --set ckpt.level=1) rc=0 a b
  for a in cuda cpu; do
    b=$([ $a = cuda ] && echo cpu || echo cuda)
    local da=cpu db=cpu
    [ $a = cuda ] && da=$dev
    [ $b = cuda ] && db=$dev
    rm -rf "$W/ck_$a" "$W/ck_${a}_to_$b"
    bt "ck_$a" "${t[@]}" --set train.device="$da" --set ckpt.dir="$W/ck_$a" || return 1
    bt "ck_${a}_to_$b" "${t[@]}" --set train.device="$db" --set ckpt.dir="$W/ck_${a}_to_$b" \
      --set ckpt.resume="$W/ck_$a/step_00000010.h5" || return 1
    judge "saved on $a, resumed on $b" losses "$W/ck_${a}_to_$b.jsonl" "$W/ck_$a.jsonl" 1e-4 11 || rc=1
  done
  if benv "$bin/tools/boost-inspect" --verify "$W/ck_cuda/step_00000020.h5" >"$W/inspect.log" 2>&1; then
    echo "ok: boost-inspect --verify of the checkpoint written on cuda"
  else
    echo "FAIL: boost-inspect --verify: $(tail -1 "$W/inspect.log")"
    rc=1
  fi
  echo "result: cuda -> cpu and cpu -> cuda resume $([ $rc = 0 ] && echo continue the run || echo FAILED)"
  return $rc
}

# the GPU's dense bf16 peak in TFLOP/s (0: unknown)
peak_tflops() {
  [ -n "${BOOST_GPU_PEAK_TFLOPS:-}" ] && { echo "$BOOST_GPU_PEAK_TFLOPS"; return; }
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  *H200* | *H100*SXM* | *H100\ 80GB\ HBM3*) echo 989.4 ;;
  *H100*PCIe*) echo 756 ;;
  *A100*) echo 312 ;;
  *L40S*) echo 362 ;;
  *) echo 0 ;;
  esac
}

precision_args() { has_key train.precision && echo "--set train.precision=bf16"; }

stage_bench() {
  shard
  local B=${BENCH_BATCH:-8} P=${BENCH_PRESET:-cola-1b} T=${BENCH_SEQ:-1024} p
  p=$(precision_args) || echo "note: no train.precision in this build: boost runs f32 (torch: bf16 autocast)"
  # shellcheck disable=SC2086
  bt bench_boost --set model.preset="$P" --set model.seq_len="$T" --set train.batch_size="$B" --set train.steps=12 \
    --set train.device="$dev" $p || return 1
  timeout 200 python3 "$root/tests/gpu/torch_gpu_peer.py" --preset "$P" --batch "$B" --seq "$T" --steps 10 \
    --warmup 3 --json >"$W/bench_torch.json" 2>"$W/bench_torch.log" || echo "note: the PyTorch peer failed: $(tail -1 "$W/bench_torch.log")"
  local lines
  lines=$(cmp bench "$W/bench_boost.jsonl" "$W/bench_torch.json" "$(peak_tflops)" 3 "$OUT/bench.json") || return 1
  echo "$lines"
  echo "result: $(echo "$lines" | head -2 | tr '\n' ' ' | cut -c1-120)"
}

stage_stall() {
  shard
  local preset=${STALL_PRESET:-cola-350m} p
  p=$(precision_args)
  local t=(--set model.preset="$preset" --set model.seq_len="${STALL_SEQ:-1024}" --set train.batch_size=4
    --set train.steps=9 --set train.device="$dev" --set ckpt.every=3 --set ckpt.level=1 --set ckpt.keep_last=1)
  rm -rf "$W/stall_async" "$W/stall_sync"
  # shellcheck disable=SC2086
  bt stall_async "${t[@]}" $p --set ckpt.dir="$W/stall_async" || return 1
  # shellcheck disable=SC2086
  BOOST_CKPT_SYNC=1 bt stall_sync "${t[@]}" $p --set ckpt.dir="$W/stall_sync" || return 1
  local line
  line=$(cmp stall "$W/stall_async" "$W/stall_sync" "$OUT/stall.json") || { echo "FAIL: no stall figures"; return 1; }
  echo "$line"
  echo "result: $preset: $(echo "$line" | cut -c1-110)"
  rm -rf "$W/stall_async" "$W/stall_sync"
}
