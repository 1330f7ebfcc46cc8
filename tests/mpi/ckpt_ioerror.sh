#!/usr/bin/env bash
# An I/O error on ONE rank (injected, BOOST_CKPT_TEST_FAIL=STEP:RANK, after
# that rank wrote its part) aborts the commit on every rank: nothing of that
# step is committed or left behind, the previous checkpoint stays the latest,
# training continues and the next checkpoint commits.
source "$(dirname "$0")/ckpt_common.bash"
make_data
d=$tmp/ck
BOOST_CKPT_TEST_FAIL=4:1 train 2 "$tmp/t.log" --set ckpt.dir="$d" --set train.steps=6 --set ckpt.every=2 ||
  fail "run with an injected error: $(tail -5 "$tmp/t.log")"
grep -q "checkpoint of step 4 FAILED, nothing committed (training continues; step 2 remains the latest): rank 1: injected I/O error" "$tmp/t.log" ||
  fail "failure of step 4 not reported with rank 1's reason: $(grep -i fail "$tmp/t.log" | head -3)"
got=$(cd "$d" && ls step_* | tr '\n' ' ')
[ "$got" = "step_00000002.h5 step_00000006.h5 " ] || fail "committed: $got (expected steps 2 and 6)"
[ "$(cat "$d/latest")" = step_00000006.h5 ] || fail "latest = $(cat "$d/latest")"
"$INSPECT" --verify "$d/step_00000006.h5" >/dev/null || fail "step 6 does not verify"
grep -q '"step":4,"committed":false,"reason":"rank 1: injected I/O error' "$d/checkpoints.jsonl" || fail "checkpoints.jsonl lacks the failure"
echo "ok: rank 1's error aborted step 4 on both ranks; steps 2 and 6 committed"
echo "PASS: ckpt_ioerror"
