#!/usr/bin/env bash
# Regression test over the libFuzzer corpus of the checkpoint reader
# (tests/fuzz/corpus, built by tools/inspect_fuzz, docs/INSPECT.md): every file
# goes through the verifier in process (tools/inspect_verify_files: any crash
# fails the test) and through `boost-inspect verify`, which must end with
# exit 0 or 1 and never die of a signal. The seeds are real checkpoints and
# must verify.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
B=${BOOST_BINARY_DIR:?}
C=$BOOST_SOURCE_DIR/tests/fuzz/corpus
n=$(ls "$C" | wc -l)
[ "$n" -gt 0 ] || fail "empty corpus $C"
"$B/tools/inspect_verify_files" "$C" >"${TMPDIR:-/tmp}/inspect_corpus.$$" 2>&1 ||
  fail "inspect_verify_files: $(tail -5 "${TMPDIR:-/tmp}/inspect_corpus.$$")"
rm -f "${TMPDIR:-/tmp}/inspect_corpus.$$"
for f in "$C"/*; do
  set +e; "$B/tools/boost-inspect" verify "$f" >/dev/null 2>&1; rc=$?; set -e
  [ $rc = 0 ] || [ $rc = 1 ] || fail "boost-inspect verify $(basename "$f"): exit $rc"
done
for s in "$BOOST_SOURCE_DIR"/tests/fuzz/seeds/*.h5; do
  "$B/tools/boost-inspect" verify "$s" >/dev/null || fail "seed $(basename "$s") does not verify"
done
echo "ok: $n corpus files, no crash"
