#!/usr/bin/env bash
# The step guard's policies on real runs (docs/GUARD.md): the defaults never
# fire on the quick start; the quick start with train.lr=10 ends after
# train.guard_max_rollbacks rollbacks with exit 65 and one line naming the
# flagged steps and batches, in bounded time, never looping; train.guard=skip
# drops flagged steps and counts them without rolling back, and a run of
# flagged batches ends it; train.guard=off applies a spike as before.
source "$(dirname "$0")/ckpt_common.bash"
make_data
QS=(--config "$BOOST_SOURCE_DIR/examples/quickstart.ini" --set data.train="$tmp/f.tok" --set train.threads=1)

# ---- the quick start as a new user runs it: the guard never fires -------------
"$TRAIN" "${QS[@]}" --set ckpt.dir="$tmp/qs" --set train.metrics="$tmp/qs.jsonl" >"$tmp/qs.log" 2>&1 ||
  fail "quick start: $(tail -3 "$tmp/qs.log")"
! grep -qE "FLAGGED|^guard:|^skip:" "$tmp/qs.log" || fail "the guard fired on the quick start: $(grep -E 'FLAGGED|^guard' "$tmp/qs.log" | head -3)"
grep -q "^done: step 300" "$tmp/qs.log" || fail "quick start did not finish"
echo "ok: the quick start (300 steps) never flagged"

# ---- train.lr=10: exit 65 after 3 rollbacks, bounded --------------------------
rc=0
timeout 120 "$TRAIN" "${QS[@]}" --set train.lr=10 --set ckpt.dir="$tmp/lr10" --set train.metrics= >"$tmp/lr10.out" 2>"$tmp/lr10.err" || rc=$?
[ "$rc" = 65 ] || fail "lr=10: exit $rc, expected 65 (124: it did not end in 120 s): $(tail -3 "$tmp/lr10.err")"
[ "$(wc -l <"$tmp/lr10.err")" = 1 ] || fail "lr=10: stderr is not one line: $(cat "$tmp/lr10.err")"
grep -q "^boost-train: the guard gave up after 3 rollbacks (train.guard_max_rollbacks=3): flagged step 2 batch 1 (loss .*batches skipped 0-599" \
  "$tmp/lr10.err" || fail "lr=10: $(cat "$tmp/lr10.err")"
[ "$(grep -c '^guard: rollback' "$tmp/lr10.out")" = 3 ] || fail "lr=10: $(grep -c '^guard: rollback' "$tmp/lr10.out") rollbacks"
echo "ok: lr=10 ends with exit 65 after 3 rollbacks: $(cut -c1-160 "$tmp/lr10.err")..."

# ---- skip: dropped and counted, no rollback ----------------------------------
BASE=(--set train.steps=10 --set train.min_lr_ratio=1 --set ckpt.every=4)
BOOST_TRAIN_TEST_FAULT=loss-spike@3,nan@5,loss-spike@6,loss-spike@7 train 0 "$tmp/skip.log" "${BASE[@]}" --set train.guard=skip \
  --set ckpt.dir="$tmp/skip" || fail "skip: $(tail -3 "$tmp/skip.log")"
[ "$(grep -c 'FLAGGED.*dropped' "$tmp/skip.log")" = 4 ] || fail "skip: $(grep FLAGGED "$tmp/skip.log")"
! grep -q "^guard: rollback" "$tmp/skip.log" || fail "skip rolled back"
"$INSPECT" --json --no-tensors "$tmp/skip/step_00000010.h5" | "$PY" -c 'import json,sys
d = json.load(sys.stdin); g = d["guard"]
assert d["step"] == 10 and d["data_cursor"] == 2 * 14 and g["flagged"] == 4 and g["rollbacks"] == 0, d
assert g["skip_batches"] == "3,5-7", g' || fail "skip: the ledger is wrong"
# the same as a run that skips those batches by hand
train 0 "$tmp/skipf.log" "${BASE[@]}" --set train.skip_batches=3,5-7 --set ckpt.dir="$tmp/skipf" || fail "skip fresh: $(tail -3 "$tmp/skipf.log")"
checksums "$tmp/skip/step_00000010.h5" >"$tmp/a.sum"
checksums "$tmp/skipf/step_00000010.h5" >"$tmp/b.sum"
cmp -s "$tmp/a.sum" "$tmp/b.sum" || fail "skip: the run that dropped 4 steps differs from one that skipped their batches"
# a run of flagged batches ends it (train.guard_cluster_window in a row)
rc=0
BOOST_TRAIN_TEST_FAULT=loss-spike@2,loss-spike@3,loss-spike@4 train 0 "$tmp/skipend.log" "${BASE[@]}" --set train.guard=skip \
  --set train.guard_cluster_window=3 || rc=$?
[ "$rc" = 65 ] || fail "skip: 3 flagged in a row with a window of 3: exit $rc"
echo "ok: skip dropped 4 steps (no rollback), equal to skipping their batches; a run of them ends with 65"

# ---- off: the spike is applied and logged as a step --------------------------
BOOST_TRAIN_TEST_FAULT=loss-spike@3 train 0 "$tmp/off.log" "${BASE[@]}" --set train.guard=off || fail "off: $(tail -3 "$tmp/off.log")"
grep -qE "^step +4/10 \| loss 1000[0-9]\." "$tmp/off.log" || fail "off: the spike is not a step: $(grep '^step +4/' "$tmp/off.log")"
! grep -q FLAGGED "$tmp/off.log" || fail "off: flagged"
echo "ok: guard=off applies the spike"
