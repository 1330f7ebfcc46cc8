# shellcheck shell=bash disable=SC2154  # root, OUT, BUILD, ARCH come from run_gpu_check.sh
# The stages of tests/gpu/run_gpu_check.sh (sourced; each stage_NAME runs in
# a process of its own under the stage's time limit, its output in
# $OUT/NAME.log; OUT is the run's logs folder). Lines a stage prints that
# start with "ok:", "FAIL:", "SLOW:", "note:" or "result:" are its verdicts;
# the summary shows the "result:" line. A stage's exit: 0 passed, 1 a wrong
# result, 4 right but a speed bar missed, 77 not judged (a missing tool or
# peer result, or out of its own time). Needs root, OUT, BUILD, ARCH.
# BOOST_GPU_FAKE_DEVICE=cpu runs the device stages with the CPU in the GPU's
# place (ctest gpu_stages_cpu: the stages' own logic, checked where there
# is no GPU).
prefix=$BUILD/prefix
bin=$BUILD/cmake
W=$OUT/work
mkdir -p "$W"
gc=$bin/tests/gpu/boost-gpu-check
train=$bin/trainer/boost-train
cmp() { python3 "$root/tests/gpu/gpu_compare.py" "$@"; }
# boost's programs with the carried libraries (a subshell: the rest of the
# machine -- Python, PyTorch -- keeps its own)
benv() { (
  # shellcheck disable=SC1091
  source "$prefix/env.sh"
  "$@"
); }
# benv under a time limit (timeout runs programs, not shell functions)
tbenv() {
  local secs=$1
  shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  timeout "$secs" bash -c 'source "$0/env.sh" && exec "$@"' "$prefix" "$@"
}
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
# the same with 2 ranks under the carried Open MPI: the ranks started on
# this node by mpirun itself (plm isolated: the GPU machine has no ssh or
# rsh, which the default launcher wants even for one node), shared-memory
# transport without the single-copy mechanism (containers often refuse it)
btm() {
  local name=$1
  shift
  rm -f "$W/$name.jsonl"
  benv orterun --allow-run-as-root --oversubscribe -n 2 --mca plm isolated --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
    "$train" --set data.train="$W/text.tok" --set train.val_batches=0 --set train.log_every=1 \
    --set train.threads="$(($(threads) / 2))" --set train.metrics="$W/$name.jsonl" "$@" >"$W/$name.log" 2>&1 ||
    { echo "FAIL: mpirun -n 2 boost-train $name: $(grep -v '^ *$' "$W/$name.log" | tail -2 | tr '\n' ' ')"; return 1; }
}
# seconds left of this stage's limit (gpu_plan.py sets BOOST_GPU_STAGE_LIMIT)
left() { echo $((${BOOST_GPU_STAGE_LIMIT:-600} - SECONDS)); }

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

# -D hints for an NCCL outside CMake's search: the one PyTorch brings (its
# nvidia-nccl wheel), with the carried nccl.h where the wheel has no header
nccl_hints() {
  local lib inc
  lib=$(python3 -c 'import glob, site
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for p in sorted(glob.glob(d + "/nvidia/**/libnccl.so*", recursive=True)): print(p)' 2>/dev/null | head -1)
  [ -n "$lib" ] || return 1
  inc=$(dirname "$(dirname "$lib")")/include
  [ -f "$inc/nccl.h" ] || inc=$prefix/opt/boost-nccl/include
  [ -f "$inc/nccl.h" ] || return 1
  echo "-DBOOST_NCCL_LIBRARY=$lib"
  echo "-DBOOST_NCCL_INCLUDE_DIR=$inc"
}

# nvcc where CMake looks for it (PATH): a toolkit in CUDA_HOME or
# /usr/local/cuda is used when PATH has none
cuda_on_path() {
  command -v nvcc >/dev/null && return 0
  local d
  for d in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda; do
    [ -x "$d/bin/nvcc" ] && { export PATH=$d/bin:$PATH; echo "note: nvcc from $d/bin (not on PATH)"; return 0; }
  done
  return 1
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
  local gen=() hints=() nccl=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cuda_on_path || { echo "FAIL: no nvcc (not on PATH, nor in CUDA_HOME or /usr/local/cuda/bin)"; return 1; }
  mapfile -t hints <"$prefix/cmake.args"
  # another nvcc than the one this build was configured with: CMake would
  # drop its cache and with it the hints below, so the cache goes first
  local cached
  cached=$(grep '^CMAKE_CUDA_COMPILER:' "$bin/CMakeCache.txt" 2>/dev/null | cut -d= -f2)
  if [ -n "$cached" ] && [ "$cached" != "$(command -v nvcc)" ]; then
    echo "note: nvcc is now $(command -v nvcc), was $cached: configured afresh"
    rm -f "$bin/CMakeCache.txt"
  fi
  # the host compiler's warnings in .cu files are counted, not fatal: the
  # machine's gcc may be newer than the one this code is kept clean with,
  # and warn in CUDA's own headers. No oneDNN: the carry has none (the CPU
  # runs beside the GPU's take the fp32 GEMM fallback for bf16).
  benv cmake -S "$root" -B "$bin" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBOOST_CUDA_ARCHITECTURES="$ARCH" \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DBOOST_CUDA_HOST_WERROR=OFF -DBOOST_DNNL=OFF \
    "${hints[@]}" >"$OUT/configure.log" 2>&1 || { echo "FAIL: configure (configure.log)"; tail -15 "$OUT/configure.log"; return 1; }
  grep -q "boost: CUDA backend ON" "$OUT/configure.log" || { echo "FAIL: CUDA backend off (no nvcc?)"; return 1; }
  if ! grep -q "NCCL communication ON" "$OUT/configure.log" && mapfile -t nccl < <(nccl_hints) && [ ${#nccl[@]} = 2 ]; then
    echo "note: NCCL from PyTorch's wheel: ${nccl[*]}"
    benv cmake -S "$root" -B "$bin" "${nccl[@]}" >>"$OUT/configure.log" 2>&1 || { echo "FAIL: configure with ${nccl[*]}"; return 1; }
  fi
  local have_nccl=1
  grep "NCCL communication O" "$OUT/configure.log" | tail -1 | grep -q ' ON' || have_nccl=0
  local c
  for c in MPI_mpi_LIBRARY HDF5_hdf5_LIBRARY_RELEASE OPENBLAS_OPENMP_LIBRARY pkgcfg_lib_ZSTD_zstd BOOST_NCCL_LIBRARY; do
    echo "note: $c = $(grep "^$c:" "$bin/CMakeCache.txt" | cut -d= -f2)"
  done
  benv cmake --build "$bin" --target boost-train boost-data boost-inspect boost-gpu-check boost-generate boost-eval \
    -j"$(nproc)" >"$OUT/compile.log" 2>&1 || { echo "FAIL: build (compile.log)"; grep -m5 -E 'error|Error' "$OUT/compile.log"; return 1; }
  local warn
  warn=$(grep -c -E 'warning[: ]' "$OUT/compile.log")
  [ "$warn" = 0 ] || echo "note: $warn compiler warnings (compile.log): $(grep -m1 -E 'warning[: ]' "$OUT/compile.log" | cut -c1-160)"
  if benv ldd "$train" "$gc" "$bin/tools/boost-generate" "$bin/tools/boost-eval" | grep 'not found'; then
    echo "FAIL: libraries not found at run time"
    return 1
  fi
  # the carried libraries at work, no GPU needed: MPI started alone and by
  # mpirun, a checkpoint written and verified, the GPU check's harness
  shard
  rm -rf "$W/smoke"
  bt smoke --set model.preset=tiny --set model.seq_len=32 --set train.batch_size=2 --set train.steps=2 \
    --set train.device=cpu --set ckpt.dir="$W/smoke" --set ckpt.every=2 || return 1
  benv "$bin/tools/boost-inspect" --verify "$W/smoke" >"$W/smoke_inspect.log" 2>&1 ||
    { echo "FAIL: boost-inspect --verify: $(tail -1 "$W/smoke_inspect.log")"; return 1; }
  benv "$gc" --self-test --small >"$W/smoke_selftest.log" 2>&1 || { echo "FAIL: boost-gpu-check --self-test"; return 1; }
  btm smoke_mpi --set model.preset=tiny --set model.seq_len=32 --set train.batch_size=2 --set train.steps=2 \
    --set train.device=cpu --set parallel.dp=2 || return 1
  echo "ok: 2-step cpu runs (one process with a checkpoint, two under mpirun with plm isolated), boost-inspect --verify, boost-gpu-check --self-test"
  if [ "$have_nccl" = 0 ]; then
    echo "FAIL: configured WITHOUT NCCL (no nccl.h/libnccl next to the toolkit, in /usr/local or in PyTorch's wheel): the nccl stage cannot run"
    echo "result: built for sm_$ARCH but WITHOUT NCCL"
    return 1
  fi
  echo "result: built for sm_$ARCH with NCCL ($(grep '^BOOST_NCCL_LIBRARY:' "$bin/CMakeCache.txt" | cut -d= -f2)); the carried libraries run"
}

# the probe: is a GPU usable (BOOST_GPU_FAKE_DEVICE: the CPU stands in)
stage_probe() {
  if [ -n "${BOOST_GPU_FAKE_DEVICE:-}" ]; then
    echo "result: BOOST_GPU_FAKE_DEVICE=$BOOST_GPU_FAKE_DEVICE stands in for the GPU"
    return 0
  fi
  local rc=0
  benv "$gc" --probe || rc=$?
  echo "result: $([ $rc = 0 ] && echo 'a GPU is usable' || echo "no usable GPU (exit $rc)")"
  return $rc
}

stage_check() {
  local rc=0
  benv "$gc" || rc=$?
  [ "$rc" = 77 ] && return 77
  local failed
  failed=$(grep -E '^FAIL' "$OUT/check.log" | head -3 | sed -E 's/^FAIL:? +//; s/ +rel_l2.*//' | paste -sd ';' -)
  echo "result: $(grep -m1 '^gpu_check:' "$OUT/check.log" 2>/dev/null)${failed:+; first failures: $failed}"
  return "$rc"
}

# compute-sanitizer over the small shapes, each tool in half of what is left;
# a sandbox that refuses the device to the sanitizer is a missing tool, and a
# tool that runs out of its time was not judged: both 77, never a failure
stage_sanitize() {
  local cs tool r rc=0 res=() share=2 late=0
  cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  [ -x "$cs" ] || { echo "note: no compute-sanitizer"; return 77; }
  local secs
  for tool in memcheck racecheck; do
    r=0 secs=$(($(left) / share - 2))
    if [ "$secs" -lt 5 ]; then
      echo "note: $tool: ${secs} s left: not run (not judged)"
      res+=("$tool not judged (time)")
      late=1
      continue
    fi
    tbenv "$secs" "$cs" --tool "$tool" --error-exitcode 1 "$gc" --small --no-bench >"$W/$tool.log" 2>&1 || r=$?
    if grep -q -E 'Device not supported|Target application terminated before first instrumented API call' "$W/$tool.log" &&
      [ "$r" != 0 ]; then
      echo "note: $tool: compute-sanitizer cannot instrument this device here: $(grep -m1 -E 'not supported|terminated' "$W/$tool.log")"
      return 77
    fi
    share=1
    if [ "$r" = 124 ] || [ "$r" = 137 ]; then
      echo "note: $tool: out of its time: not run to the end (not judged)"
      res+=("$tool not judged (time)")
      late=1
      continue
    fi
    echo "$([ $r = 0 ] && echo ok || echo FAIL): $tool: $(grep -m1 -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$W/$tool.log")"
    res+=("$tool $([ $r = 0 ] && echo clean || echo "NOT clean (exit $r)")")
    [ $r = 0 ] || rc=1
  done
  echo "result: ${res[*]}"
  [ $rc = 0 ] && [ $late = 1 ] && return 77
  return $rc
}

TINY=(--set model.preset=tiny --set model.seq_len=64 --set train.batch_size=4 --set train.seed=7)

stage_train() {
  shard
  local t=("${TINY[@]}" --set train.steps=50)
  bt cpu "${t[@]}" --set train.device=cpu || return 1
  bt cuda "${t[@]}" --set train.device="$dev" || return 1
  bt cuda2 "${t[@]}" --set train.device="$dev" || return 1
  local rc=0
  judge "cuda f32 vs cpu" losses "$W/cuda.jsonl" "$W/cpu.jsonl" 1e-4 1 1e-3 || rc=1
  judge "cuda twice" same "$W/cuda.jsonl" "$W/cuda2.jsonl" || rc=1
  bt cudabf "${t[@]}" --set train.device="$dev" --set train.precision=bf16 || return 1
  bt cpubf "${t[@]}" --set train.device=cpu --set train.precision=bf16 || return 1
  judge "cuda bf16 vs cpu f32" losses "$W/cudabf.jsonl" "$W/cpu.jsonl" 2e-2 1 1e-1 || rc=1
  judge "cuda bf16 vs cpu bf16" losses "$W/cudabf.jsonl" "$W/cpubf.jsonl" 2e-2 1 1e-1 || rc=1
  echo "result: tiny 50 steps: $([ $rc = 0 ] && echo 'cuda matches cpu (losses and grad norms)' || echo 'MISMATCH') ($(tail -1 "$W/cuda.log" | cut -c1-60))"
  return $rc
}

stage_ckpt() {
  shard
  local t=(--set model.preset=tiny --set model.seq_len=64 --set train.batch_size=4 --set train.steps=20 --set train.seed=7
    --set ckpt.every=10 --set ckpt.level=1) rc=0 a b
  for a in cuda cpu; do
    b=$([ $a = cuda ] && echo cpu || echo cuda)
    local da=cpu db=cpu
    [ "$a" = cuda ] && da=$dev
    [ "$b" = cuda ] && db=$dev
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

# Decoding end to end: one tiny checkpoint (trained 20 steps on the CPU),
# then boost-generate on the CPU and on the GPU -- the prefill, the KV cache
# in device memory, and without the cache -- must give the same tokens, and
# boost-eval the same loss within 1e-4. The tokens are sampled with a fixed
# seed (temperature 0.8), not greedy: so young a model's greedy text is one
# byte repeated, while a draw from the same random stream differs only where
# the two devices' probabilities straddle it, a chance of about 1e-6 a token.
stage_decode() {
  shard
  local ck=$W/dec_ck rc=0 d generate=$bin/tools/boost-generate evaluate=$bin/tools/boost-eval
  rm -rf "$ck"
  bt dec_train "${TINY[@]}" --set train.steps=20 --set train.device=cpu --set ckpt.dir="$ck" --set ckpt.every=20 ||
    return 1
  local g=(--prompt "The checkpoint " --max-new-tokens 48 --temperature 0.8 --seed 11 --precision fp32 --threads "$(threads)" --json)
  for d in cpu:cpu "cuda:$dev" "cuda_no_cache:$dev --no-cache"; do
    read -r -a dd <<<"${d#*:}"
    benv "$generate" "$ck" "${g[@]}" --device "${dd[@]}" >"$W/dec_${d%%:*}.json" 2>"$W/dec_${d%%:*}.log" ||
      { echo "FAIL: boost-generate on ${d#*:}: $(tail -2 "$W/dec_${d%%:*}.log" | tr '\n' ' ')"; return 1; }
  done
  for d in cpu:cpu "cuda:$dev"; do
    benv "$evaluate" "$ck" --data "$W/text.tok" --batches 4 --precision fp32 --threads "$(threads)" --json --quiet \
      --device "${d#*:}" >"$W/eval_${d%%:*}.json" 2>"$W/eval_${d%%:*}.log" ||
      { echo "FAIL: boost-eval on ${d#*:}: $(tail -2 "$W/eval_${d%%:*}.log" | tr '\n' ' ')"; return 1; }
  done
  local line
  line=$(cmp decode "$W/dec_cpu.json" "$W/dec_cuda.json" "$W/dec_cuda_no_cache.json" "$W/eval_cpu.json" \
    "$W/eval_cuda.json" 1e-4 "$OUT/decode.json") || rc=1
  echo "$line"
  echo "result: $(echo "$line" | cut -c5-150)"
  return $rc
}

# 2 ranks sharing the one GPU, device memory through MPI (host staging): NCCL
# refuses two ranks on one device. Each layout against the CPU backend's run.
MPI_SWITCH=${BOOST_GPU_MPI_SWITCH:---set parallel.comm=mpi}
stage_multi() {
  shard
  local t=("${TINY[@]}" --set train.steps=20 --set parallel.timeout=60) rc=0 name lay sw=()
  [ "$dev" = cuda ] && read -r -a sw <<<"$MPI_SWITCH"
  local layouts=("tp2:--set parallel.tp=2 --set parallel.tp_mode=btp" "pp2:--set parallel.pp=2"
    "dp2z:--set parallel.dp=2 --set parallel.zero=1")
  for lay in "${layouts[@]}"; do
    name=${lay%%:*}
    read -r -a la <<<"${lay#*:}"
    btm "mr_${name}_cpu" "${t[@]}" "${la[@]}" --set train.device=cpu || { rc=1; continue; }
    btm "mr_${name}_cuda" "${t[@]}" "${la[@]}" --set train.device="$dev" "${sw[@]}" || { rc=1; continue; }
    if [ "$dev" = cuda ] && ! grep -q 'communication mpi' "$W/mr_${name}_cuda.log"; then
      echo "FAIL: $name: the run did not use the MPI communication backend: $(grep -m1 '^device:' "$W/mr_${name}_cuda.log")"
      rc=1
    fi
    judge "2 ranks $name: cuda vs cpu" losses "$W/mr_${name}_cuda.jsonl" "$W/mr_${name}_cpu.jsonl" 1e-4 1 1e-3 || rc=1
  done
  echo "result: 2 ranks on one GPU, MPI communication (tp=2 btp, pp=2, dp=2 + ZeRO-1): $([ $rc = 0 ] && echo 'match the cpu' || echo FAILED)"
  return $rc
}

# One rank with every group (all of size 1) through NCCL: each collective
# runs on a one-rank communicator. BOOST_GPU_NCCL_SWITCH is the config that
# turns this on.
NCCL_SWITCH=${BOOST_GPU_NCCL_SWITCH:---set parallel.nccl_single=true}
stage_nccl() {
  shard
  local t=("${TINY[@]}" --set train.steps=20 --set parallel.timeout=60) sw=() rc=0
  if [ "$dev" = cuda ]; then
    grep -q -E '^BOOST_NCCL_LIBRARY:[A-Z]+=/' "$bin/CMakeCache.txt" ||
      { echo "FAIL: this build has no NCCL (build.log)"; return 1; }
    read -r -a sw <<<"$NCCL_SWITCH"
  else
    echo "note: BOOST_GPU_FAKE_DEVICE: no NCCL, the run's logic only"
  fi
  bt nccl_cpu "${t[@]}" --set train.device=cpu || return 1
  bt nccl_cuda "${t[@]}" --set train.device="$dev" "${sw[@]}" || return 1
  if [ "$dev" = cuda ] && ! grep -q 'communication nccl' "$W/nccl_cuda.log"; then
    echo "FAIL: the run did not communicate through NCCL ($NCCL_SWITCH): $(grep -m1 '^device:' "$W/nccl_cuda.log")"
    rc=1
  fi
  judge "size-1 groups through NCCL vs cpu" losses "$W/nccl_cuda.jsonl" "$W/nccl_cpu.jsonl" 1e-4 1 1e-3 || rc=1
  echo "result: one rank, size-1 NCCL communicators: $([ $rc = 0 ] && echo 'match the cpu' || echo FAILED)"
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

# boost first (cola-1b, bf16, 12 steps), then PyTorch in what is left of the limit
stage_bench() {
  shard
  local B=${BENCH_BATCH:-8} P=${BENCH_PRESET:-cola-1b} T=${BENCH_SEQ:-1024} tl
  bt bench_boost --set model.preset="$P" --set model.seq_len="$T" --set train.batch_size="$B" --set train.steps=12 \
    --set train.device="$dev" --set train.precision=bf16 || return 1
  tl=$(($(left) - 4))
  rm -f "$W/bench_torch.json"
  if [ "$tl" -lt 10 ]; then
    echo "note: ${tl} s left for PyTorch: not started"
  else
    timeout "$tl" python3 "$root/tests/gpu/torch_gpu_peer.py" --preset "$P" --batch "$B" --seq "$T" --steps 10 \
      --warmup 3 --json >"$W/bench_torch.json" 2>"$W/bench_torch.log" ||
      echo "note: the PyTorch peer failed or ran out of its ${tl} s: $(tail -1 "$W/bench_torch.log")"
  fi
  local lines rc=0
  lines=$(cmp bench "$W/bench_boost.jsonl" "$W/bench_torch.json" "$(peak_tflops)" 3 "$OUT/bench.json") || rc=$?
  echo "$lines"
  echo "result: $P: $(echo "$lines" | grep -E '^(ok|FAIL|SLOW|note):' | tail -1 | cut -c1-150)"
  return $rc
}

stage_stall() {
  shard
  local preset=${STALL_PRESET:-cola-350m}
  local t=(--set model.preset="$preset" --set model.seq_len="${STALL_SEQ:-1024}" --set train.batch_size=4
    --set train.steps=9 --set train.device="$dev" --set train.precision=bf16 --set ckpt.every=3 --set ckpt.level=1
    --set ckpt.keep_last=1)
  rm -rf "$W/stall_async" "$W/stall_sync"
  bt stall_async "${t[@]}" --set ckpt.dir="$W/stall_async" || return 1
  BOOST_CKPT_SYNC=1 bt stall_sync "${t[@]}" --set ckpt.dir="$W/stall_sync" || return 1
  local line rc=0
  line=$(cmp stall "$W/stall_async" "$W/stall_sync" "$OUT/stall.json") || rc=$?
  echo "$line"
  echo "result: $preset: $(echo "$line" | cut -c1-140)"
  rm -rf "$W/stall_async" "$W/stall_sync"
  return $rc
}
