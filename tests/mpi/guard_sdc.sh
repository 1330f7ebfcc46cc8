#!/usr/bin/env bash
# The step guard's replay (docs/GUARD.md, "Silent data corruption"): with
# train.replay_every=1 every step is taken twice; a bit flipped once in one
# rank's gradients before the data-parallel reduction (the test hook's sdc
# kind: a fault in that rank's backward, which the reduction carries to
# every replica) or after it (sdc-reduced) makes the two differ, a third
# execution agrees with the second, and the run ends bit for bit equal to
# the uninterrupted reference, its log naming the step, the rank whose own
# gradients differed and the host; the checkpoint's /state/guard_replays
# records it, and a resumed run keeps the record and counts the rank's
# faults against train.guard_sdc_limit across the restart; a rank that
# corrupts every execution (sdc-persistent) ends the job with exit 69 and
# one line naming it and its host. On 1 rank and dp=2.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RUN=(--set train.steps=8 --set ckpt.every=4)

# replays PATH: the replays of a checkpoint's ledger, one "step batch trigger
# outcome rank where" line each (where: its name's second word, - for none)
replays() {
  "$INSPECT" summary --json "$1" | "$PY" -c 'import json,sys
for r in json.load(sys.stdin)["guard"]["replays"]:
    print(r["step"], r["batch"], r["trigger"], r["outcome"].replace(" ", "_"), r["rank"], (r["where"].split() + ["-", "-"])[1])'
}

one() { # tag np fault where args...
  local tag=$1 np=$2 fault=$3 where=$4
  shift 4
  train "$np" "$tmp/$tag.ref.log" "${RUN[@]}" "$@" --set ckpt.dir="$tmp/$tag.ref" || fail "$tag reference: $(tail -3 "$tmp/$tag.ref.log")"
  BOOST_TRAIN_TEST_FAULT=$fault train "$np" "$tmp/$tag.log" "${RUN[@]}" "$@" --set train.replay_every=1 \
    --set ckpt.dir="$tmp/$tag" || fail "$tag: $(tail -3 "$tmp/$tag.log")"
  grep -q "^guard: silent data corruption at step 6 (batch 5) on rank ${fault##*:}, host $(hostname): .*; it differed in $where\$" "$tmp/$tag.log" ||
    fail "$tag: no corruption line naming rank ${fault##*:} ($where): $(grep '^guard' "$tmp/$tag.log")"
  checksums "$tmp/$tag.ref/step_00000008.h5" >"$tmp/$tag.ref.sum"
  checksums "$tmp/$tag/step_00000008.h5" >"$tmp/$tag.sum"
  cmp -s "$tmp/$tag.ref.sum" "$tmp/$tag.sum" || fail "$tag: the healed run differs from the reference"
  ! grep -q FLAGGED "$tmp/$tag.log" || fail "$tag: a step was flagged"
  # the ledger: 8 replays (train.replay_every=1), the one at step 6 healed, naming the rank
  replays "$tmp/$tag/step_00000008.h5" >"$tmp/$tag.replays"
  [ "$(wc -l <"$tmp/$tag.replays")" = 8 ] && [ "$(grep -c '^[0-9]* [0-9]* replay_every the_same_bits -1 -$' "$tmp/$tag.replays")" = 7 ] &&
    grep -q "^6 5 replay_every a_fault,_healed ${fault##*:} $(echo "$where" | cut -d' ' -f2)\$" "$tmp/$tag.replays" ||
    fail "$tag: the checkpoint's replays: $(cat "$tmp/$tag.replays")"
  echo "ok ($tag): a transient bit flip caught by replay, blamed on rank ${fault##*:} ($where), the run equal to the reference"
}
LOCAL="its own gradients or loss before the data-parallel reduction"
one p1 0 sdc@5:0 "$LOCAL"
one dp2 2 sdc@5:1 "$LOCAL" --set train.grad_accum=2
one dp2r0 2 sdc@5:0 "$LOCAL" --set train.grad_accum=2
one dp2zero 2 sdc@5:1 "$LOCAL" --set train.grad_accum=2 --set parallel.zero=1
one dp2after 2 sdc-reduced@5:1 "its gradients after the data-parallel reduction" --set train.grad_accum=2
"$INSPECT" summary "$tmp/dp2/step_00000008.h5" | grep -q "^  replays: 8, 1 found a fault" ||
  fail "summary: $("$INSPECT" summary "$tmp/dp2/step_00000008.h5" | grep -A2 replays)"

# a resumed run keeps the record: steps 9-10 append to it
train 2 "$tmp/dp2.resume.log" "${RUN[@]}" --set train.grad_accum=2 --set train.replay_every=1 --set train.steps=10 \
  --set ckpt.dir="$tmp/dp2" || fail "resume: $(tail -3 "$tmp/dp2.resume.log")"
replays "$tmp/dp2/step_00000010.h5" >"$tmp/dp2.resumed.replays"
[ "$(head -8 "$tmp/dp2.resumed.replays")" = "$(cat "$tmp/dp2.replays")" ] && [ "$(wc -l <"$tmp/dp2.resumed.replays")" = 10 ] ||
  fail "resume: the record: $(cat "$tmp/dp2.resumed.replays")"
# boost-reshard carries it to another layout
"$B/tools/boost-reshard" "$tmp/dp2/step_00000010.h5" "$tmp/dp2.tp2.h5" --layout dp=1,tp=2,pp=1,mode=btp --quiet ||
  fail "reshard of the record"
[ "$(replays "$tmp/dp2.tp2.h5")" = "$(cat "$tmp/dp2.resumed.replays")" ] || fail "reshard: the record: $(replays "$tmp/dp2.tp2.h5")"
echo "ok: a resumed run keeps the record of replays, and boost-reshard carries it"

rc=0
BOOST_TRAIN_TEST_FAULT=sdc-persistent@3:1 train 2 "$tmp/pers.log" "${RUN[@]}" --set train.grad_accum=2 --set train.replay_every=1 \
  --set ckpt.dir="$tmp/pers" || rc=$?
[ "$rc" = 69 ] || fail "sdc-persistent: exit $rc, expected 69: $(tail -3 "$tmp/pers.log")"
[ "$(grep -c '^boost-train: silent data corruption: rank 1 on host' "$tmp/pers.log")" = 1 ] ||
  fail "sdc-persistent: $(grep boost-train: "$tmp/pers.log")"
echo "ok (sdc-persistent): exit 69: $(grep '^boost-train: silent' "$tmp/pers.log" | cut -c1-140)"

# the same rank failing again (train.guard_sdc_limit=2): two transient
# flips, the first before a restart (the record carries the count over it)
BOOST_TRAIN_TEST_FAULT=sdc@2:0 train 0 "$tmp/lim0.log" "${RUN[@]}" --set train.replay_every=1 --set train.steps=4 \
  --set ckpt.dir="$tmp/lim" || fail "sdc limit, first part: $(tail -3 "$tmp/lim0.log")"
rc=0
BOOST_TRAIN_TEST_FAULT=sdc@5:0 train 0 "$tmp/lim.log" "${RUN[@]}" --set train.replay_every=1 --set ckpt.dir="$tmp/lim" || rc=$?
[ "$rc" = 69 ] || fail "sdc limit: exit $rc: $(tail -3 "$tmp/lim.log")"
grep -q "^boost-train: silent data corruption: rank 0 on host .* step 6 (batch 5) again (train.guard_sdc_limit)" "$tmp/lim.log" ||
  fail "sdc limit: $(grep boost-train: "$tmp/lim.log")"
# replay is refused where steps are not bit-deterministic
train 0 "$tmp/cuda.log" --set train.replay_every=3 --set train.device=cuda && fail "replay on cuda accepted"
grep -q "train.replay_every needs bit-deterministic steps" "$tmp/cuda.log" || fail "cuda refusal: $(cat "$tmp/cuda.log")"
echo "ok: the sdc limit, and the refusal on cuda"
