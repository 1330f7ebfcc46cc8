#!/usr/bin/env bash
# The step guard's replay (docs/GUARD.md, "Silent data corruption"): with
# train.replay_every=1 every step is taken twice; a bit flipped once in one
# rank's gradients (the test hook's sdc kind) makes the two differ, a third
# execution agrees with the second, and the run ends bit for bit equal to
# the uninterrupted reference, its log naming the step, the rank and the
# host; a rank that corrupts every execution (sdc-persistent) ends the job
# with exit 69 and one line naming it and its host. On 1 rank and dp=2.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RUN=(--set train.steps=8 --set ckpt.every=4)

one() { # tag np fault args...
  local tag=$1 np=$2 fault=$3
  shift 3
  train "$np" "$tmp/$tag.ref.log" "${RUN[@]}" "$@" --set ckpt.dir="$tmp/$tag.ref" || fail "$tag reference: $(tail -3 "$tmp/$tag.ref.log")"
  BOOST_TRAIN_TEST_FAULT=$fault train "$np" "$tmp/$tag.log" "${RUN[@]}" "$@" --set train.replay_every=1 \
    --set ckpt.dir="$tmp/$tag" || fail "$tag: $(tail -3 "$tmp/$tag.log")"
  grep -q "^guard: silent data corruption at step 6 (batch 5) on rank ${fault##*:}, host $(hostname):" "$tmp/$tag.log" ||
    fail "$tag: no corruption line: $(grep '^guard' "$tmp/$tag.log")"
  checksums "$tmp/$tag.ref/step_00000008.h5" >"$tmp/$tag.ref.sum"
  checksums "$tmp/$tag/step_00000008.h5" >"$tmp/$tag.sum"
  cmp -s "$tmp/$tag.ref.sum" "$tmp/$tag.sum" || fail "$tag: the healed run differs from the reference"
  ! grep -q FLAGGED "$tmp/$tag.log" || fail "$tag: a step was flagged"
  echo "ok ($tag): a transient bit flip caught by replay, the run equal to the reference"
}
one p1 0 sdc@5:0
one dp2 2 sdc@5:1 --set train.grad_accum=2

rc=0
BOOST_TRAIN_TEST_FAULT=sdc-persistent@3:1 train 2 "$tmp/pers.log" "${RUN[@]}" --set train.grad_accum=2 --set train.replay_every=1 \
  --set ckpt.dir="$tmp/pers" || rc=$?
[ "$rc" = 69 ] || fail "sdc-persistent: exit $rc, expected 69: $(tail -3 "$tmp/pers.log")"
[ "$(grep -c '^boost-train: silent data corruption: rank 1 on host' "$tmp/pers.log")" = 1 ] ||
  fail "sdc-persistent: $(grep boost-train: "$tmp/pers.log")"
echo "ok (sdc-persistent): exit 69: $(grep '^boost-train: silent' "$tmp/pers.log" | cut -c1-140)"

# the same rank failing again (train.guard_sdc_limit=2): two transient flips
rc=0
BOOST_TRAIN_TEST_FAULT=sdc@2:0,sdc@5:0 train 0 "$tmp/lim.log" "${RUN[@]}" --set train.replay_every=1 --set ckpt.dir="$tmp/lim" || rc=$?
[ "$rc" = 69 ] || fail "sdc limit: exit $rc: $(tail -3 "$tmp/lim.log")"
grep -q "^boost-train: silent data corruption: rank 0 on host .* step 6 (batch 5) again (train.guard_sdc_limit)" "$tmp/lim.log" ||
  fail "sdc limit: $(grep boost-train: "$tmp/lim.log")"
# replay is refused where steps are not bit-deterministic
train 0 "$tmp/cuda.log" --set train.replay_every=3 --set train.device=cuda && fail "replay on cuda accepted"
grep -q "train.replay_every needs bit-deterministic steps" "$tmp/cuda.log" || fail "cuda refusal: $(cat "$tmp/cuda.log")"
echo "ok: the sdc limit, and the refusal on cuda"
