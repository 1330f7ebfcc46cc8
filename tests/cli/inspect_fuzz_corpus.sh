#!/usr/bin/env bash
# Regression test over the libFuzzer corpus of the checkpoint reader
# (tests/fuzz/corpus, built by tools/inspect_fuzz, docs/INSPECT.md) and its
# seeds: every file goes through the verifier in process
# (tools/inspect_verify_files: any crash fails the test) and through
# `boost-inspect verify`, which must end with exit 0 or 1 and never die of a
# signal. The seeds are real checkpoints and must verify, except the
# malformed ones (bad-bf16-*.h5, tests/fuzz/make_bf16_seeds.sh;
# bad-history-*.h5, tests/fuzz/make_history_seeds.sh): verify refuses each
# (exit 1) with a line naming what is wrong, and every other subcommand
# reads them without crashing, each error one line.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
B=${BOOST_BINARY_DIR:?}
C=$BOOST_SOURCE_DIR/tests/fuzz/corpus
S=$BOOST_SOURCE_DIR/tests/fuzz/seeds
INSPECT=$B/tools/boost-inspect
n=$(ls "$C" | wc -l)
[ "$n" -gt 0 ] || fail "empty corpus $C"
log=${TMPDIR:-/tmp}/inspect_corpus.$$
"$B/tools/inspect_verify_files" "$C" "$S" >"$log" 2>&1 || fail "inspect_verify_files: $(tail -5 "$log")"
rm -f "$log"
for f in "$C"/*; do
  set +e; "$INSPECT" verify "$f" >/dev/null 2>&1; rc=$?; set -e
  [ $rc = 0 ] || [ $rc = 1 ] || fail "boost-inspect verify $(basename "$f"): exit $rc"
done
nbad=0
for s in "$S"/*.h5; do
  case $(basename "$s") in bad-*) continue ;; esac
  "$INSPECT" verify "$s" >/dev/null || fail "seed $(basename "$s") does not verify"
done
# bad-<tag>.h5: the line verify must print for it
declare -A want=(
  [bf16-size]='^BAD /activations/layers.0.attn.qkv.h: shape does not match'
  [bf16-half]='^BAD /activations/layers.0.attn.qkv.h: expected bfloat16 \(precision bf16\) .*found other'
  [bf16-uint16]='^BAD /activations/layers.0.attn.qkv.h: expected bfloat16 \(precision bf16\) .*found other'
  [bf16-f32]='^BAD /activations/layers.0.attn.qkv.h: expected bfloat16 \(precision bf16\) .*found float32'
  [bf16-attr-value]="^BAD attribute precision: 'bf17', expected fp32 or bf16"
  [bf16-attr-type]='^BAD attribute: precision: unreadable or not of its type'
  [bf16-attr-fp32]="^BAD attribute precision: 'fp32' differs from the config's train.precision 'bf16'"
  [history-valorder]='^BAD /state/val_loss_history: row 1: step 1 is not a step after 2'
  [history-startcols]='^BAD /state/run_starts: expected float64 \[n, 13\]'
  [history-startchain]='^BAD /state/run_starts: row 0 reaches step 1, the next start is at step 2'
  [history-startlayout]="^BAD /state/run_starts: the newest start's layout \(dp2 tp1 pp1, none, fp32\) is not the one"
)
for s in "$S"/bad-*.h5; do
  tag=$(basename "$s" .h5)
  tag=${tag#bad-}
  [ -n "${want[$tag]:-}" ] || fail "$(basename "$s"): no expected refusal listed for it"
  set +e; "$INSPECT" verify "$s" >"$log" 2>"$log.err"; rc=$?; set -e
  [ $rc = 1 ] || fail "verify $(basename "$s"): exit $rc, expected 1"
  grep -Eq "${want[$tag]}" "$log" || fail "verify $(basename "$s") does not say '${want[$tag]}': $(head -3 "$log")"
  rm -rf "$log.plot"
  for sub in summary tensors stats "dump --category activations $log.bin" "plot --data-dir $log.plot"; do
    # shellcheck disable=SC2086 # sub is a subcommand with its arguments
    set +e; "$INSPECT" $sub "$s" >/dev/null 2>"$log.err"; rc=$?; set -e
    [ $rc = 0 ] || [ $rc = 1 ] || fail "$sub $(basename "$s"): exit $rc"
    [ $rc = 0 ] || [ "$(wc -l <"$log.err")" = 1 ] || fail "$sub $(basename "$s"): not one line: $(cat "$log.err")"
  done
  nbad=$((nbad + 1))
done
rm -rf "$log" "$log.err" "$log.bin" "$log.plot"
[ "$nbad" = ${#want[@]} ] || fail "$nbad malformed seeds, expected ${#want[@]}"
echo "ok: $n corpus files and the seeds, no crash; $nbad malformed seeds (bf16, histories) refused, each naming the problem"
