#!/usr/bin/env bash
# Set-aside branches on real runs (docs/GUARD.md, docs/CHECKPOINT_FORMAT.md
# "Retention"): two rollbacks past step 8 keep both branches' step 8 under
# their own names (step_00000008.h5.superseded.1 and .2), boost-inspect
# summary of the folder lists them, ckpt.keep_set_aside removes the oldest
# branches only; and a kill -9 at every point of a rollback's set-aside (the
# test hook BOOST_CKPT_TEST_SET_ASIDE_KILL kills rank 0 there), and of the
# set-aside a resume from an older checkpoint makes at its first commit,
# leaves the folder so that a relaunch resumes from a committed checkpoint
# at or before the step rolled back to, and no branch file is lost.
# The faults: loss spikes (BOOST_TRAIN_TEST_FAULT, docs/CHAOS.md) at batches
# 7, 9, 10 (a cluster: rollback to step 4, step 8 set aside) and 13, 16, 17
# (after the first rollback's skip: step 8 committed again, then a second
# rollback to step 4).
source "$(dirname "$0")/ckpt_common.bash"
make_data

GUARD=(--set train.steps=12 --set train.min_lr_ratio=1 --set ckpt.every=4 --set train.guard=rollback --set train.guard_cluster=3
       --set train.guard_cluster_window=6 --set train.guard_skip_batches=3)
ONE=loss-spike@7,loss-spike@9,loss-spike@10
TWO=$ONE,loss-spike@13,loss-spike@16,loss-spike@17
md5() { md5sum <"$1" | cut -d' ' -f1; }
verify() { "$INSPECT" verify "$1" >/dev/null 2>&1 || fail "$2: $1 does not verify"; }

# ---- two rollbacks past step 8: both branches kept, listed --------------------------
d=$tmp/two
BOOST_TRAIN_TEST_FAULT=$TWO train 0 "$tmp/two.log" "${GUARD[@]}" --set ckpt.dir="$d" || fail "two rollbacks: $(tail -3 "$tmp/two.log")"
grep -q "^guard: rollback 1 of 3 to step 4: .*; set aside step_00000008.h5 as branch 1 (\*.h5.superseded.1)" "$tmp/two.log" &&
  grep -q "^guard: rollback 2 of 3 to step 4: .*; set aside step_00000008.h5 as branch 2 (\*.h5.superseded.2)" "$tmp/two.log" ||
  fail "two rollbacks past step 8 not reported as two branches: $(grep '^guard' "$tmp/two.log")"
for b in 1 2; do verify "$d/step_00000008.h5.superseded.$b" "two rollbacks"; done
[ "$(md5 "$d/step_00000008.h5.superseded.1")" != "$(md5 "$d/step_00000008.h5.superseded.2")" ] ||
  fail "the two branches' step 8 are the same file"
[ "$(cat "$d/latest")" = step_00000012.h5 ] || fail "latest: $(cat "$d/latest")"
"$INSPECT" summary "$d" >"$tmp/two.summary" || fail "summary of the folder failed"
grep -q "set aside: 2 branches" "$tmp/two.summary" && grep -q "^    branch 1: step 8 (1 file, .* MiB)" "$tmp/two.summary" &&
  grep -q "^    branch 2: step 8 (1 file, " "$tmp/two.summary" || fail "summary: $(grep -A3 'set aside' "$tmp/two.summary")"
"$INSPECT" summary --json "$d" | "$PY" -c 'import json,sys
d = json.load(sys.stdin)
b = d["set_aside"]
assert [(e["branch"], e["steps"], e["files"]) for e in b] == [(1, [8], 1), (2, [8], 1)] and all(e["bytes"] > 100000 for e in b), b
assert d["set_aside_pending"] is False, d' || fail "summary --json: the set-aside branches are wrong"
"$INSPECT" summary "$d/step_00000012.h5" | grep -q "set aside" && fail "summary of a file lists branches"
echo "ok: two rollbacks past step 8 keep both branches (*.superseded.1, .2), listed by boost-inspect summary"

# ---- a rollback past every checkpoint: back to the initial weights, the branch said -----
BOOST_TRAIN_TEST_FAULT=loss-spike@2,loss-spike@5,loss-spike@6 train 0 "$tmp/z.log" "${GUARD[@]}" --set train.steps=5 \
  --set ckpt.dir="$tmp/z" || fail "rollback to step 0: $(tail -3 "$tmp/z.log")"
grep -q "^guard: rollback 1 of 3 to step 0: no checkpoint at or before step 2: back to the initial weights; set aside step_00000004.h5 as branch 1 " "$tmp/z.log" ||
  fail "rollback to step 0: $(grep '^guard' "$tmp/z.log")"
verify "$tmp/z/step_00000004.h5.superseded.1" "rollback to step 0"
rm "$tmp/z"/step_*.h5 "$tmp/z/latest" # the run's checkpoints gone: a folder of a branch only
"$INSPECT" summary "$tmp/z" >"$tmp/z.summary" 2>&1 && fail "summary of a folder without a checkpoint: exit 0"
grep -q "^    branch 1: step 4 (1 file, " "$tmp/z.summary" || fail "summary of a folder of branches only: $(cat "$tmp/z.summary")"
echo "ok: a rollback past every checkpoint sets the branch aside and says so"

# ---- the bound: the oldest branches only ---------------------------------------------
md5_2=$(md5 "$d/step_00000008.h5.superseded.2")
train 0 "$tmp/b.log" "${GUARD[@]}" --set ckpt.dir="$d" --set ckpt.resume="$d/step_00000004.h5" --set ckpt.keep_set_aside=2 ||
  fail "bound: $(tail -3 "$tmp/b.log")"
grep -q "checkpoint: newer checkpoints of an abandoned run set aside after step 8: set aside step_00000008.h5, step_00000012.h5 as branch 3 (\*.h5.superseded.3); removed the oldest set-aside branch 1 (step_00000008.h5; .* MiB): ckpt.keep_set_aside=2 keeps the newest 2" "$tmp/b.log" ||
  fail "bound: not said in one line: $(grep 'set aside' "$tmp/b.log")"
[ ! -e "$d/step_00000008.h5.superseded.1" ] || fail "bound: the oldest branch is still there"
[ "$(md5 "$d/step_00000008.h5.superseded.2")" = "$md5_2" ] || fail "bound: branch 2 was touched"
verify "$d/step_00000008.h5.superseded.3" bound
verify "$d/step_00000012.h5.superseded.3" bound
# 0 = keep all: a guard run with keep 0 over three branches removes none
d0=$tmp/all
BOOST_TRAIN_TEST_FAULT=$TWO train 0 "$tmp/all.log" "${GUARD[@]}" --set ckpt.dir="$d0" --set ckpt.keep_set_aside=1 ||
  fail "keep 1: $(tail -3 "$tmp/all.log")"
[ ! -e "$d0/step_00000008.h5.superseded.1" ] && [ -f "$d0/step_00000008.h5.superseded.2" ] ||
  fail "keep 1: the second rollback did not remove the first branch: $(ls "$d0")"
grep -q "^guard: rollback 2 of 3 .*removed the oldest set-aside branch 1 (step_00000008.h5; " "$tmp/all.log" ||
  fail "keep 1: the removal is not said: $(grep '^guard' "$tmp/all.log")"
BOOST_TRAIN_TEST_FAULT=$TWO train 0 "$tmp/all2.log" "${GUARD[@]}" --set ckpt.dir="$d0" --set ckpt.resume="$d0/step_00000004.h5" \
  --set ckpt.keep_set_aside=0 || fail "keep 0: $(tail -3 "$tmp/all2.log")"
ls "$d0" | grep -c 'superseded\.[0-9]*$' | grep -qx 5 || fail "keep 0 removed branches: $(ls "$d0")" # 2 + (8,12) as 3 + 4 + 5
grep -q "removed the oldest" "$tmp/all2.log" && fail "keep 0 removed a branch: $(grep 'removed the oldest' "$tmp/all2.log")"
echo "ok: ckpt.keep_set_aside removes the oldest branches only, one line; 0 keeps all"

# ---- kill -9 at every point of a rollback's set-aside ---------------------------------
# An older boost's branch (branch 0) is there and ckpt.keep_set_aside=1, so the
# set-aside's last part, the bound, removes it (point 6: killed after its file).
for point in 1 2 3 4 5 6; do
  k=$tmp/k$point
  mkdir -p "$k"
  printf 'an older set-aside\n' >"$k/step_00000020.h5.superseded"
  rc=0
  BOOST_CKPT_TEST_SET_ASIDE_KILL=$point BOOST_TRAIN_TEST_FAULT=$ONE train 0 "$tmp/k$point.log" "${GUARD[@]}" \
    --set ckpt.dir="$k" --set ckpt.keep_set_aside=1 || rc=$?
  [ "$rc" = 137 ] || fail "point $point: exit $rc, expected 137 (killed): $(tail -3 "$tmp/k$point.log")"
  grep -q "^guard: rollback" "$tmp/k$point.log" && fail "point $point: the rollback finished before the kill"
  # as the kill left it: `latest` names a file that is there, or the intent is
  [ -f "$k/$(cat "$k/latest")" ] || [ -f "$k/set_aside.pending" ] || fail "point $point: latest names a missing file, no intent"
  train 0 "$tmp/k$point.r.log" "${GUARD[@]}" --set ckpt.dir="$k" --set ckpt.keep_set_aside=1 ||
    fail "point $point: relaunch: $(tail -3 "$tmp/k$point.r.log")"
  grep -q "checkpoints: resumed from $k/step_00000004.h5 (step 4" "$tmp/k$point.r.log" ||
    fail "point $point: relaunch did not resume step 4: $(grep -i resume "$tmp/k$point.r.log" | head -3)"
  if [ "$point" -le 4 ]; then
    grep -q "finished the set-aside of branch 1 that an interrupted run began" "$tmp/k$point.r.log" ||
      fail "point $point: the relaunch does not say it finished the set-aside: $(grep -i 'set-aside' "$tmp/k$point.r.log")"
  fi
  verify "$k/step_00000008.h5.superseded.1" "point $point"
  [ "$point" = 6 ] || [ "$(cat "$k/step_00000020.h5.superseded")" = "an older set-aside" ] ||
    fail "point $point: the older branch was lost before the bound"
  [ ! -e "$k/set_aside.pending" ] && [ "$(cat "$k/latest")" = step_00000012.h5 ] && [ -f "$k/step_00000012.h5" ] ||
    fail "point $point: after the relaunch: $(ls "$k")"
done
echo "ok: a kill -9 at each of the 6 points of a rollback: the relaunch resumes step 4, branch 1 whole"

# ---- kill -9 in the set-aside of a resume from an older checkpoint (2 ranks) ------------
for point in 1 2 4; do
  r=$tmp/r$point
  train 2 "$tmp/r$point.0.log" "${GUARD[@]}" --set ckpt.dir="$r" --set train.grad_accum=2 || fail "resume $point: first run"
  m8=$(md5 "$r/step_00000008.h5")
  m12=$(md5 "$r/step_00000012.h5")
  rc=0
  BOOST_CKPT_TEST_SET_ASIDE_KILL=$point train 2 "$tmp/r$point.1.log" "${GUARD[@]}" --set ckpt.dir="$r" \
    --set ckpt.resume="$r/step_00000004.h5" --set train.grad_accum=2 || rc=$?
  [ "$rc" != 0 ] || fail "resume $point: not killed"
  train 2 "$tmp/r$point.2.log" "${GUARD[@]}" --set ckpt.dir="$r" --set train.grad_accum=2 ||
    fail "resume $point: relaunch: $(tail -3 "$tmp/r$point.2.log")"
  grep -q "checkpoints: resumed from $r/step_00000004.h5 (step 4" "$tmp/r$point.2.log" ||
    fail "resume $point: relaunch did not resume step 4: $(grep -i resume "$tmp/r$point.2.log" | head -3)"
  [ "$(md5 "$r/step_00000008.h5.superseded.1")" = "$m8" ] && [ "$(md5 "$r/step_00000012.h5.superseded.1")" = "$m12" ] ||
    fail "resume $point: the first run's checkpoints were not kept whole: $(ls "$r")"
done
echo "ok: a kill -9 in a resume's set-aside (2 ranks): the relaunch resumes step 4, the old run's files whole"
