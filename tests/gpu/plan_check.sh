#!/usr/bin/env bash
# ctest gpu_plan: the GPU check's plan and verdicts, on the CPU, with stage
# times injected (gpu_plan.py's BOOST_GPU_PLAN_SIM: a virtual clock, no
# stage runs): every plan fits the 540 s budget, even when every stage takes
# or overruns its whole limit; a stage that does not fit is not-run, never
# passed; a missed bench ratio, MFU or stall bar makes its stage slow (exit
# 4, the figures shown) and never hides a failure elsewhere; a missing
# PyTorch result or an unknown peak leaves the bench not judged, a sanitizer
# out of time is not run, never failed; a gradient-norm difference fails; a
# failing line of boost-gpu-check ("FAIL bf16 ...") reaches the summary; the
# stage script runs without its executable bit; the report is summary.txt,
# summary.json (with every figure) and logs.tar.xz; the exit codes (0
# passed, 1 failed, 3 incomplete, 4 slow, 77 no GPU) are distinct.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
plan=(python3 "$here/gpu_plan.py")
cmp=(python3 "$here/gpu_compare.py")
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
unset BOOST_GPU_BUDGET_S BOOST_GPU_LIMIT_SCALE BOOST_GPU_BAR_RATIO BOOST_GPU_BAR_MFU BOOST_GPU_BAR_STALL

# sim JSON -> run every stage with it; sets rc and $t/out
simrun() { # JSON [args...]
  local json=$1
  shift
  echo "$json" >"$t/sim.json"
  rm -rf "$t/out"
  rc=0
  BOOST_GPU_PLAN_SIM=$t/sim.json "${plan[@]}" run --out "$t/out" "$@" >"$t/run.log" 2>&1 || rc=$?
}
field() { python3 -c "import json,sys; d=json.load(open('$t/out/summary.json')); print($1)"; }
status_of() { field "{s['stage']: s['status'] for s in d['stages']}['$1']"; }
all_stages="env build probe check train ckpt decode multi nccl sanitize stall bench"

# 1. the static plan: all stages fit 540 s with their whole limits
"${plan[@]}" plan >"$t/plan.txt" && grep -q 'of 540 s' "$t/plan.txt" && ! grep -q not-run "$t/plan.txt" &&
  pass "every stage's limit fits 540 s: $(tail -1 "$t/plan.txt")" || fail "the full plan does not fit 540 s: $(cat "$t/plan.txt")"

# 2. every stage takes exactly its limit, then overruns it: the run still ends within 540 s
limits=$("${plan[@]}" table | awk '$1 != "total" {printf "%s\"%s\": {\"seconds\": %s}", s, $1, $4; s=", "}')
simrun "{$limits}"
el=$(field "d['elapsed_s']")
[ "$rc" = 0 ] && python3 -c "assert $el <= 540" && [ "$(field "sum(s['status'] == 'passed' for s in d['stages'])")" = 12 ] &&
  pass "every stage at its whole limit: all 12 pass in $el s" || fail "stages at their limits: exit $rc, $el s: $(cat "$t/run.log")"
over=$(for s in $all_stages; do printf '%s"%s": {"seconds": 9999}' "${sep:-}" "$s"; sep=", "; done)
simrun "{$over}"
el=$(field "d['elapsed_s']")
[ "$rc" = 1 ] && python3 -c "assert $el <= 540" && grep -q 'killed at its limit' "$t/out/summary.txt" &&
  pass "every stage overrunning: killed at its limit, exit 1, $el s" || fail "overrunning stages: exit $rc, $el s"
for seed in 1 2 3 4 5; do
  json=$(python3 -c "import json, random; random.seed($seed)
print(json.dumps({s: {'seconds': random.uniform(0, 200)} for s in '$all_stages'.split()}))")
  simrun "$json" --budget "$((200 + 70 * seed))"
  el=$(field "d['elapsed_s']")
  python3 -c "assert $el <= $((200 + 70 * seed))" || fail "random stage times (seed $seed): $el s over the budget"
done
pass "random stage times, budgets 270..550 s: never over the budget"

# 3. a stage that does not fit is not-run (and listed so), never passed; exit 3
simrun "{}" --budget 300
st=$(status_of bench)
[ "$st" = not-run ] && [ "$rc" = 3 ] && grep -q -- '-- not run (does not fit the budget)' "$t/out/summary.txt" &&
  grep -A20 -- '-- not run' "$t/out/summary.txt" | grep -q '^bench' && ! grep -A20 -- '-- passed' "$t/out/summary.txt" |
  sed '/^-- [^p]/,$d' | grep -q '^bench' && pass "--budget 300: bench is not-run, exit 3" ||
  fail "--budget 300: bench $st, exit $rc: $(cat "$t/out/summary.txt")"
"${plan[@]}" plan --budget 300 >/dev/null && fail "plan --budget 300 claims everything fits" || pass "plan --budget 300 exits 1"

# 4. the bench verdict: ratio, MFU, the PyTorch peer (peak 1000 TFLOP/s)
bench_files() { # TOKENS_PER_S GFLOPS TORCH_TOKENS_PER_S (0: no torch result)
  : >"$t/boost.jsonl"
  for i in 1 2 3 4 5 6; do echo "{\"step\": $i, \"tokens_per_s\": $1, \"gflops\": $2}" >>"$t/boost.jsonl"; done
  rm -f "$t/torch.json"
  [ "$3" = 0 ] || echo "{\"tokens_per_s\": $3, \"tflops\": 300, \"dtype\": \"bf16\", \"compile\": true, \"torch_version\": \"x\"}" >"$t/torch.json"
}
bench_sim() { simrun "{\"bench\": {\"seconds\": 60, \"cmd\": [\"python3\", \"$here/gpu_compare.py\", \"bench\", \"$t/boost.jsonl\", \"$t/torch.json\", \"1000\", \"3\", \"$t/bench.json\"]}}" "$@"; }
bench_files 15000 450000 10000 # ratio 1.5, MFU 45%
bench_sim
[ "$rc" = 0 ] && [ "$(status_of bench)" = passed ] && pass "bench at ratio 1.5, MFU 45%: passes" || fail "a bench meeting its bars: exit $rc"
bench_files 11000 450000 10000 # ratio 1.1
bench_sim
[ "$rc" = 4 ] && [ "$(status_of bench)" = slow ] && grep -q 'SLOW: boost / torch = 1.10' "$t/out/summary.txt" &&
  pass "bench at ratio 1.1: the stage is slow, the run exits 4, the ratio shown" ||
  fail "a missed bench ratio: exit $rc, $(cat "$t/out/summary.txt")"
simrun "{\"bench\": {\"seconds\": 60, \"cmd\": [\"python3\", \"$here/gpu_compare.py\", \"bench\", \"$t/boost.jsonl\", \"$t/torch.json\", \"1000\", \"3\", \"$t/bench.json\"]}, \"train\": {\"exit\": 1}}"
[ "$rc" = 1 ] && [ "$(status_of bench)" = slow ] && [ "$(status_of train)" = failed ] &&
  pass "a slow bench beside a failed train: exit 1 (the failure is not hidden)" || fail "slow bench and failed train: exit $rc"
bench_files 15000 350000 10000 # MFU 35%
r=0
"${cmp[@]}" bench "$t/boost.jsonl" "$t/torch.json" 1000 3 "$t/bench.json" >"$t/c.log" || r=$?
[ "$r" = 4 ] && pass "bench at MFU 35%: slow, exit 4 ($(tail -1 "$t/c.log" | cut -c1-80))" || fail "MFU 35%: exit $r"
bench_files 15000 450000 0 # no PyTorch result
r=0
"${cmp[@]}" bench "$t/boost.jsonl" "$t/torch.json" 1000 3 "$t/bench.json" >"$t/c.log" || r=$?
[ "$r" = 77 ] && grep -q '^note: .*not judged' "$t/c.log" && pass "bench without a PyTorch result: not judged (77)" ||
  fail "no PyTorch result: exit $r"
bench_files 15000 450000 10000
r=0
"${cmp[@]}" bench "$t/boost.jsonl" "$t/torch.json" 0 3 "$t/bench.json" >/dev/null || r=$?
[ "$r" = 77 ] && pass "bench with an unknown peak: not judged (77)" || fail "an unknown peak: exit $r"
bench_files 11000 450000 0 # ratio unknown, MFU 45%... and a boost loss that is not finite
echo '{"step": 7, "tokens_per_s": 1, "gflops": 1, "loss": NaN}' >>"$t/boost.jsonl"
r=0
"${cmp[@]}" bench "$t/boost.jsonl" "$t/torch.json" 1000 3 "$t/bench.json" >/dev/null || r=$?
[ "$r" = 1 ] && pass "bench whose loss is not finite: fails (1)" || fail "a bench with a NaN loss: exit $r"

# 5. the stall and losses verdicts
mkdir -p "$t/a" "$t/s"
printf '{"step": 3, "stall_s": 0.02}\n{"step": 6, "stall_s": 0.02}\n{"step": 9, "stall_s": 0.5}\n' >"$t/a/checkpoints.jsonl"
printf '{"step": 3, "stall_s": 1.0}\n{"step": 6, "stall_s": 1.0}\n' >"$t/s/checkpoints.jsonl"
r=0
"${cmp[@]}" stall "$t/a" "$t/s" "$t/st.json" >/dev/null || r=$?
[ "$r" = 4 ] && pass "stall at 2% of a synchronous save: slow (4)" || fail "a 2% stall: exit $r"
BOOST_GPU_BAR_STALL=0.05 "${cmp[@]}" stall "$t/a" "$t/s" "$t/st.json" >/dev/null && pass "stall at 2% under a 5% bar: passes" ||
  fail "stall 2% under a 5% bar"
printf '{"step": 1, "loss": 5.0, "grad_norm": 2.0}\n{"step": 2, "loss": 4.0, "grad_norm": 1.5}\n' >"$t/l1.jsonl"
printf '{"step": 1, "loss": 5.0, "grad_norm": 2.0}\n{"step": 2, "loss": 4.0, "grad_norm": 1.6}\n' >"$t/l2.jsonl"
"${cmp[@]}" losses "$t/l1.jsonl" "$t/l2.jsonl" 1e-4 >/dev/null && fail "equal losses, grad norms 6% apart pass" ||
  pass "equal losses, grad norms 6% apart: fails"
"${cmp[@]}" losses "$t/l1.jsonl" "$t/l1.jsonl" 1e-4 >/dev/null && pass "identical runs: pass" || fail "identical runs"

# 6. no GPU: the probe fails or --no-device -> the GPU stages are no-device, exit 77; a skipped stage -> 3
simrun '{"probe": {"exit": 77}}'
[ "$rc" = 77 ] && [ "$(status_of train)" = no-device ] && [ "$(status_of build)" = passed ] &&
  pass "the probe finds no GPU: exit 77, train no-device" || fail "probe without a GPU: exit $rc"
simrun '{}' --no-device env build probe train
[ "$rc" = 77 ] && [ "$(status_of probe)" = no-device ] && pass "--no-device: exit 77" || fail "--no-device: exit $rc"
simrun '{"build": {"exit": 1}}' --no-device env build train
[ "$rc" = 1 ] && pass "--no-device with a failed build: exit 1" || fail "--no-device with a failed build: exit $rc"
simrun '{"sanitize": {"exit": 77}}'
[ "$rc" = 3 ] && [ "$(status_of sanitize)" = skipped ] && pass "a skipped stage: exit 3" || fail "a skipped stage: exit $rc"
"${plan[@]}" run --out "$t/o2" --self /bin/false nosuchstage 2>/dev/null
[ $? = 2 ] && pass "an unknown stage: exit 2" || fail "an unknown stage is not a usage error"

# 7. what a stage prints reaches the summary: boost-gpu-check's "FAIL bf16 ..."
simrun '{"check": {"exit": 1, "lines": ["ok   f32 gemm                rel_l2 1e-7", "FAIL bf16 rmsnorm_forward rel_l2 3.1e-01 (max 2) tol 1e-02", "gpu_check: 2 checks, 1 failed"]}}'
[ "$rc" = 1 ] && grep -q 'FAIL bf16 rmsnorm_forward' "$t/out/summary.txt" && grep -q 'FAIL bf16 rmsnorm_forward' "$t/run.log" &&
  pass "a 'FAIL bf16 ...' line of boost-gpu-check reaches the summary and the output" ||
  fail "the failing check's name is lost: $(cat "$t/out/summary.txt")"
# 8. the sanitizer: out of time is not run, never failed; at its limit too
simrun '{"sanitize": {"exit": 77, "lines": ["note: memcheck: out of its time: not run to the end (not judged)"]}}'
[ "$rc" = 3 ] && [ "$(status_of sanitize)" = skipped ] && pass "a sanitizer out of its time: not judged, exit 3" ||
  fail "a sanitizer out of time: exit $rc"
simrun '{"sanitize": {"seconds": 9999}}'
[ "$rc" = 3 ] && [ "$(status_of sanitize)" = skipped ] && pass "a sanitize stage killed at its limit: not judged, exit 3" ||
  fail "sanitize killed at its limit: exit $rc, $(status_of sanitize)"
# 9. the stage script runs without its executable bit; the report is three files
printf '#!/bin/false\n[ "$1" = --_stage ] && echo "result: stage $2 ran" && exit 0\nexit 9\n' >"$t/stage.sh"
chmod 644 "$t/stage.sh"
mkdir -p "$t/logs/work" && echo x >"$t/logs/work/big.h5" && echo y >"$t/logs/work/a.log" && echo '{"x": 1.5}' >"$t/logs/fig.json"
rm -rf "$t/rep"
r=0
"${plan[@]}" run --self "$t/stage.sh" --out "$t/rep" --logs "$t/logs" env build >"$t/run.log" 2>&1 || r=$?
files=$(cd "$t/rep" 2>/dev/null && find . -type f | sort | tr '\n' ' ')
[ "$r" = 0 ] && grep -q 'stage env ran' "$t/rep/summary.txt" && [ "$files" = "./logs.tar.xz ./summary.json ./summary.txt " ] &&
  packed=$(tar -tJf "$t/rep/logs.tar.xz") && grep -q '^logs/work/a.log$' <<<"$packed" && ! grep -q 'big.h5' <<<"$packed" &&
  python3 -c "import json; assert json.load(open('$t/rep/summary.json'))['figures']['fig'] == {'x': 1.5}" &&
  pass "a stage script without its executable bit runs; the report: $files(logs packed, .h5 left out, figures in)" ||
  fail "the report of a run: exit $r, files $files: $(cat "$t/run.log")"

[ "$fails" = 0 ] || { echo "gpu_plan: $fails failed"; exit 1; }
echo "gpu_plan: all checks passed"
