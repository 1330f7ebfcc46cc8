#!/usr/bin/env bash
# bench/bench_onednn_share.sh --parse on small recorded logs in each verbose
# format oneDNN writes: 2.6 (no strides in the layouts), 3.2 (strides of
# non-dense operands), and 3.3+ ("primitive" before "exec"). The lines are
# as oneDNN 2.6.3 and 3.2.0 printed them for boost-train's bf16 step on an
# AVX512-BF16 CPU, with the execution times set to round numbers so the
# shares can be checked exactly; the 3.3+ lines are the 3.2 ones in that
# layout, on AMX. A log without execution lines exits 1 with one line
# (never an empty table), bad arguments exit 2.
set -euo pipefail
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_onednn_share.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
bench=$SRC/bench/bench_onednn_share.sh

# 2 steps: brgemm 2 x 3 ms, a per-head attention tile 4 x 1 ms, a
# projection 2 x 5 ms: 30 % / 70 %; outside brgemm 50 % and 20 %.
cat >"$tmp/v26.log" <<'EOF'
onednn_verbose,info,oneDNN v2.6.3 (commit N/A)
onednn_verbose,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support
onednn_verbose,info,prim_template:operation,engine,primitive,implementation,prop_kind,memory_descriptors,attributes,auxiliary,problem_desc,exec_time
onednn_verbose,exec,cpu,matmul,brg:avx512_core_bf16,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ba:f0 dst_bf16::blocked:ab:f0,,,512x1024:1024x1024:512x1024,3
onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ba:f0 dst_f32::blocked:ab:f0,,,128x64:64x256:128x256,1
onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ba:f0 dst_f32::blocked:ab:f0,,,128x64:64x256:128x256,1.0
onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ab:f0 dst_bf16::blocked:ab:f0,,,1024x128:128x688:1024x688,5
step     1/2 | loss 5.9926 | lr 1.00e-04 | gnorm 8.311 | 261 tok/s | 17.6 GFLOP/s | MFU 12.4% | 3923 ms | ckpt -
onednn_verbose,exec,cpu,matmul,brg:avx512_core_bf16,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ba:f0 dst_bf16::blocked:ab:f0,,,512x1024:1024x1024:512x1024,3
onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ba:f0 dst_f32::blocked:ab:f0,,,128x64:64x256:128x256,1
onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ba:f0 dst_f32::blocked:ab:f0,,,128x64:64x256:128x256,1
onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_bf16::blocked:ab:f0 wei_bf16::blocked:ab:f0 dst_bf16::blocked:ab:f0,,,1024x128:128x688:1024x688,5
step     2/2 | loss 5.4350 | lr 2.00e-04 | gnorm 8.191 | 307 tok/s | 20.7 GFLOP/s | MFU 14.5% | 3332 ms | ckpt -
EOF
# the same calls as 3.2 prints them (problem without the destination, strides of non-dense operands)
sed -e 's/v2\.6\.3 (commit N\/A)/v3.2.0 (commit 40112196287e8866a7259df35f817229454d0c96)/' -e 's/gemm:jit,/gemm:jit:bf16,/' \
  -e 's/:f0/::f0/g' -e 's/:\(128x256\|1024x688\|512x1024\),/,/' \
  -e '/1024x128:128x688/s/src_bf16::blocked:ab::f0/src_bf16::blocked:ab:256x1:f0/' "$tmp/v26.log" >"$tmp/v32.log"
grep -q 'src_bf16::blocked:ab:256x1:f0 wei_bf16::blocked:ab::f0 dst_bf16::blocked:ab::f0,,,1024x128:128x688,5' "$tmp/v32.log" ||
  fail "the 3.2 sample was not made: $(cat "$tmp/v32.log")"
# 3.3+: "primitive" before "exec", on AMX
sed -e 's/^onednn_verbose,exec,/onednn_verbose,primitive,exec,/' -e 's/v3\.2\.0/v3.3.0/' \
  -e 's/brg:avx512_core_bf16/brg:avx512_core_amx/' "$tmp/v32.log" >"$tmp/v33.log"

check() { # log brgemm-name jit-name strided
  local log=$1 brg=$2 jit=$3 strided=$4 out=$tmp/out dense=-
  [ -n "$strided" ] || dense="?" # 2.6 prints no strides: unknown
  bash "$bench" --parse "$tmp/$log" >"$out" 2>&1 || fail "$log: exit $?: $(cat "$out")"
  grep -qF "| matmul $jit | 70.0 % | 3.0 | 7.0 |" "$out" || fail "$log: no 70 % row for $jit: $(cat "$out")"
  grep -qF "| matmul $brg | 30.0 % | 1.0 | 3.0 |" "$out" || fail "$log: no 30 % row for $brg: $(cat "$out")"
  grep -qF "2 steps | 8 calls | oneDNN execution time 10 ms/step" "$out" || fail "$log: steps or totals wrong: $(cat "$out")"
  grep -qF "step median 307 tok/s" "$out" || fail "$log: tok/s of steps 2.. missing: $(cat "$out")"
  grep -q "^top 2 of 2 shapes/layouts outside brgemm (70.0 % of oneDNN time)" "$out" || fail "$log: outside-brgemm header: $(cat "$out")"
  # the projection first (50 %), with its layouts and the strided flag
  grep -A3 '^| implementation | problem' "$out" | sed -n 3p | grep -q "^| ${jit} | 1024x128:128x688[:0-9x]* | src_bf16 ab${strided:+:256x1}, wei_bf16 ab, dst_bf16 ab | ${strided:-?} | 50.0 % | 1.0 |$" ||
    fail "$log: the projection row is not first or wrong: $(cat "$out")"
  grep -q "| 128x64:64x256[:0-9x]* | src_bf16 ab, wei_bf16 ba, dst_f32 ab | $dense | 20.0 % | 2.0 |$" "$out" ||
    fail "$log: the attention row is wrong: $(cat "$out")"
  echo "ok: $log: shares, calls per step and the fallback's layouts"
}
check v26.log brg:avx512_core_bf16 gemm:jit ""
check v32.log brg:avx512_core_bf16 gemm:jit:bf16 yes
check v33.log brg:avx512_core_amx gemm:jit:bf16 yes
bash "$bench" --parse "$tmp/v33.log" >"$tmp/out" # to a file: grep -q would close a pipe early
grep -q "^oneDNN v3.3.0, isa: Intel AVX-512" "$tmp/out" || fail "the 3.3 version line is wrong: $(cat "$tmp/out")"

# --steps overrides the step lines: per step halves
bash "$bench" --parse "$tmp/v32.log" --steps 4 >"$tmp/out"
grep -qF "| matmul gemm:jit:bf16 | 70.0 % | 1.5 | 3.5 |" "$tmp/out" ||
  fail "--steps 4 did not give per-step numbers over 4 steps: $(cat "$tmp/out")"
echo "ok: --steps"

# a log without oneDNN's lines (fp32, or a build without oneDNN): exit 1 and one line
grep -v '^onednn_verbose' "$tmp/v26.log" >"$tmp/none.log"
rc=0
bash "$bench" --parse "$tmp/none.log" >"$tmp/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a log without execution lines exited $rc: $(cat "$tmp/out")"
[ "$(wc -l <"$tmp/out")" = 1 ] && grep -q "^bench_onednn_share: no oneDNN execution lines in" "$tmp/out" ||
  fail "a log without execution lines said: $(cat "$tmp/out")"
echo "ok: no execution lines: exit 1, one line"

for args in "--steps 0" "--steps" "--config cola-60m" "--bogus" "--parse $tmp/missing.log" "/nonexistent-build"; do
  rc=0
  # shellcheck disable=SC2086
  bash "$bench" $args >"$tmp/out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "'$args' exited $rc: $(cat "$tmp/out")"
  [ "$(wc -l <"$tmp/out")" = 1 ] && grep -q "^bench_onednn_share: " "$tmp/out" || fail "'$args' said: $(cat "$tmp/out")"
done
echo "ok: bad arguments: exit 2, one line each"
