#!/usr/bin/env bash
# Regression test over the seeds and the corpus of the local level's fuzz
# harness (tools/testkit/local_fuzz.c, tools/testkit/local_fuzz_one.h: manifest, state
# part, partner message; docs/INSPECT.md "Fuzzing"): every file of
# tests/fuzz/local (the seeds) and tests/fuzz/local-corpus (what the
# recorded fuzzing run found, merged) goes through the readers in process
# (tools/local_fuzz_files: any crash fails the test); the whole ones are
# accepted, each malformed one (bad-*.bin) refused with the line that names
# what is wrong; and the seeds are the ones --make-seeds writes today (a
# change of the formats shows up here, not as a fuzzer starting from stale
# inputs).
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
B=${BOOST_BINARY_DIR:?}
S=$BOOST_SOURCE_DIR/tests/fuzz/local
C=$BOOST_SOURCE_DIR/tests/fuzz/local-corpus
RUN=$B/tools/local_fuzz_files
[ -x "$RUN" ] || fail "$RUN not built"
log=$(mktemp "${TMPDIR:-/tmp}/local_fuzz.XXXXXX")
fresh=$(mktemp -d "${TMPDIR:-/tmp}/local_seeds.XXXXXX")
trap 'rm -rf "$log" "$fresh"' EXIT
"$RUN" "$S" "$C" >"$log" 2>&1 || fail "local_fuzz_files: $(tail -5 "$log")"
[ "$(ls "$C" | wc -l)" -gt 0 ] || fail "empty corpus $C"
"$RUN" --make-seeds "$fresh" || fail "--make-seeds"
for f in "$fresh"/*; do
  cmp -s "$f" "$S/$(basename "$f")" || fail "tests/fuzz/local/$(basename "$f") is not what --make-seeds writes now: rerun it"
done
for ok in manifest state partner; do
  grep -qx "$ok.bin: accepted" "$log" || fail "$ok.bin: $(grep "^$ok.bin" "$log")"
done
# bad-<what>.bin: the refusal it must get
declare -A want=(
  [manifest-arena]='its adam_m part has 1099511627776 bytes where its layout holds 128'
  [manifest-run]="manifest is another run's \\(identity fe23456789abcdef0123456789abcdef, this run's 0123456789abcdef0123456789abcdef\\)"
  [manifest-v2]='a manifest of another format \(boost-local-v2, this boost writes boost-local-v3\): passed over'
  [manifest-layout]='was written by another layout .*tensors placed otherwise'
  [state-rows]='state part is malformed'
  [state-step]='its state part is of step 11, its manifest says 7'
  [partner-size]='its state part has [0-9]* bytes, more than a step-7 state can hold'
  [partner-step]='its manifest says step 99999999'
  [partner-state]='its state part is of step 11, its manifest says 7'
)
nbad=0
for f in "$S"/bad-*.bin; do
  tag=$(basename "$f" .bin)
  tag=${tag#bad-}
  [ -n "${want[$tag]:-}" ] || fail "$(basename "$f"): no expected refusal listed for it"
  grep -Eq "^bad-$tag.bin: refused: .*${want[$tag]}" "$log" || fail "bad-$tag.bin: $(grep "^bad-$tag.bin" "$log")"
  nbad=$((nbad + 1))
done
[ "$nbad" = ${#want[@]} ] || fail "$nbad malformed seeds, expected ${#want[@]}"
n=$(grep -c "" "$log")
echo "ok: $n inputs through the local level's readers, no crash; $nbad malformed ones refused, each naming the problem"
