#!/usr/bin/env bash
# bench/bench_bf16_gemm.sh in its tiny mode: one row per GEMM of the tiny
# model's step for each thread count, OpenBLAS and oneDNN rates present, the
# implementation oneDNN chose named, the step table and the per-call table;
# bad arguments stop it with one line and exit 2. Skips (77) where the build
# has no oneDNN (Debian: libdnnl-dev), the library the script compares.
set -euo pipefail
src=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${BOOST_BINARY_DIR:-$src/build}
fail() { echo "FAIL: $*" >&2; exit 1; }
bin=$build/bench/bf16-shapes
[ -x "$bin" ] || fail "$bin not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_bench_bf16_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$bin" --configs tiny:64 --overhead-only >"$tmp/probe" 2>&1 || fail "bf16-shapes: $(tail -n 3 "$tmp/probe")"
if grep -q '^oneDNN: not built in' "$tmp/probe"; then
  echo "SKIP: the build has no oneDNN (apt-get install libdnnl-dev, then reconfigure)"
  exit 77
fi

bash "$src/bench/bench_bf16_gemm.sh" "$build" --tiny >"$tmp/out" 2>"$tmp/err" || fail "bench_bf16_gemm: $(tail -n 3 "$tmp/err")"
grep -q '^CPU: ' "$tmp/out" || fail "no CPU line"
for t in 1 2; do
  # the section of this thread count: its shape table's header and rows
  sed -n "/^### $t thread(s)/,/^### /p" "$tmp/out" >"$tmp/sec$t"
  header=$(grep '^| shape (op M N K beta; lda ldb ldc) | out | calls in | openblas GFLOP/s | onednn-f32 GFLOP/s' "$tmp/sec$t") ||
    fail "$t thread(s): no shape table header"
  cols=$(echo "$header" | awk -F' [|] ' '{print NF}')
  rows=$(grep -E '^\| [NT][NT] [0-9]+ ' "$tmp/sec$t")
  [ "$(echo "$rows" | wc -l)" -eq 24 ] || fail "$t thread(s): expected the tiny step's 24 GEMM shapes: $rows"
  echo "$rows" | awk -F' [|] ' -v c="$cols" '
    NF != c { print "row with " NF " columns, header has " c ": " $0; bad = 1 }
    $1 !~ /^\| [NT][NT] [0-9]+ [0-9]+ [0-9]+ [01]; [0-9]+ [0-9]+ [0-9]+$/ { print "shape column: " $1; bad = 1 }
    $2 != "act" && $2 != "f32" { print "output column: " $2; bad = 1 }
    # a number, however small: a 2-thread run next to another busy process
    # can fall to a fraction of a GFLOP/s while a thread waits for its core
    $4 !~ /^[0-9]+[.][0-9]$/ || $6 !~ /^[0-9]+[.][0-9]$/ { print "no OpenBLAS or oneDNN bf16 rate: " $0; bad = 1 }
    $0 !~ /(brg|gemm):/ { print "no oneDNN implementation named: " $0; bad = 1 }
    END { exit bad }' || fail "$t thread(s): bad rows"
  grep -q '^| tiny T64 | ' "$tmp/sec$t" || fail "$t thread(s): no step table row"
  grep -q '^| gemm_bf16 | [0-9.]* |$' "$tmp/sec$t" || fail "$t thread(s): no per-call overhead of gemm_bf16"
done
grep -q '^| NT 256 48 64 0; 64 64 48 | act | tiny:64 qkv A fwd |' "$tmp/sec1" || fail "the grouped q/k/v A GEMM is missing"

rc=0
bash "$src/bench/bench_bf16_gemm.sh" "$build" --min-ms 0 >/dev/null 2>"$tmp/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--min-ms 0 exited $rc, expected 2"
grep -q -- "--min-ms wants a number of milliseconds" "$tmp/bad.err" || fail "--min-ms 0: $(cat "$tmp/bad.err")"
[ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || fail "--min-ms 0: more than one line: $(cat "$tmp/bad.err")"
for bad in "--shape 3" "--threads 0" "--configs cola-60m" "--configs nosuch:64" "--rounds x" "$tmp/nosuchdir"; do
  rc=0
  # shellcheck disable=SC2086 # split on purpose: option and value
  bash "$src/bench/bench_bf16_gemm.sh" "$build" $bad >/dev/null 2>"$tmp/arg.err" || rc=$?
  [ "$rc" -eq 2 ] || fail "'$bad' exited $rc, expected 2"
  [ "$(wc -l <"$tmp/arg.err")" -eq 1 ] || fail "'$bad': not one line: $(cat "$tmp/arg.err")"
done
bash "$src/bench/bench_bf16_gemm.sh" --help | grep -q 'bench_bf16_gemm.sh \[BUILD\]' || fail "--help"
echo "PASS: bench_bf16_gemm prints 24 rows per thread count with oneDNN's implementation, refuses bad arguments"
