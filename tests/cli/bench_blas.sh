#!/usr/bin/env bash
# bench/bench_blas.sh: builds bench/blas/shapes.c against each installed
# Debian BLAS and prints one row per GEMM shape with every library's rate
# (OpenBLAS always; BLIS columns only where it is installed); bad arguments
# of the shape program stop it with the program's own message.
set -euo pipefail
src=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_bench_blas_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

bash "$src/bench/bench_blas.sh" --min-ms 1 >"$tmp/out" 2>"$tmp/err" || fail "bench_blas: $(tail -n 3 "$tmp/err")"
sed -n 2p "$tmp/out" | grep -q '^shape (op M N K beta) | openblas GFLOP/s' || fail "header: $(sed -n 2p "$tmp/out")"
cols=$(sed -n 2p "$tmp/out" | awk -F' [|] ' '{print NF}')
rows=$(tail -n +3 "$tmp/out")
[ "$(echo "$rows" | wc -l)" -eq 9 ] || fail "expected 9 shape rows: $rows"
echo "$rows" | awk -F' [|] ' -v c="$cols" '
  NF != c { print "row with " NF " columns, header has " c ": " $0; bad = 1 }
  $1 !~ /^[NT][NT] [0-9]+ [0-9]+ [0-9]+ [01]$/ { print "shape column: " $1; bad = 1 }
  { g = $2 + 0; if (!(g > 0.5)) { print "implausible OpenBLAS rate: " $0; bad = 1 } }
  END { exit bad }' || fail "bad rows"
echo "$rows" | grep -q '^NN 2048 2048 2048 0 ' || fail "no 2048^3 row"

rc=0
bash "$src/bench/bench_blas.sh" --min-ms 0 >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
[ "$rc" -ne 0 ] || fail "--min-ms 0 was accepted"
grep -q -- "--min-ms wants a number of milliseconds" "$tmp/bad.err" || fail "--min-ms 0: $(cat "$tmp/bad.err")"
rc=0
bash "$src/bench/bench_blas.sh" --shape 3 >/dev/null 2>"$tmp/arg.err" || rc=$?
[ "$rc" -eq 2 ] || fail "an unknown argument exited $rc, expected 2"
grep -q "bench_blas: unknown argument '--shape'" "$tmp/arg.err" || fail "unknown argument: $(cat "$tmp/arg.err")"
echo "PASS: bench_blas prints a row per shape for $((cols / 2)) librar(y/ies) and refuses bad arguments"
