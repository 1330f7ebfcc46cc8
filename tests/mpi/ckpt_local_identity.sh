#!/usr/bin/env bash
# A restart reads only its own run's state from the local level (issue 41,
# docs/LOCAL.md "Whose steps"): every run has an identity (root attribute
# run_id, manifest boost-local-v3, the marker ckpt.dir/run.id).
#  - a fresh run pointed at another run's ckpt.local_dir does not resume it
#    and leaves it byte for byte; that run then resumes from it;
#  - another run's step planted in a victim's local level (a newer step,
#    every checksum valid) is passed over in one line and left in place,
#    and no file checkpoint is set aside; the files carry the run's
#    identity, the marker too; a file older than identities resumes and the
#    next file gets one;
#  - a step of the run's own whose manifest says step 99999999 while its
#    state part says another: passed over, left in place, nothing set aside;
#  - 4 ranks (dp=4, partner copies) relaunched on 2 (dp=2, partner copies):
#    from the file, said so, the partner copies of the other layout too;
#  - a state part restored from a partner copy and broadcast in pieces of 64
#    bytes (BOOST_CKPT_TEST_LOCAL_PIECE) ends bit for bit where an
#    uninterrupted run ends.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
make_data
STEPS=16
LOCAL=(--set ckpt.local_every=1 --set train.steps=$STEPS --set train.lr=3e-3)
FORGE=$B/tests/mpi/local_forge
[ -x "$FORGE" ] || fail "$FORGE not built"
final() { echo "$1/step_$(printf %08d $STEPS).h5"; }
# snap DIR: every file under DIR with its checksum
snap() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum); }
newest_local() { ls "$1" | grep -v tmp | tail -1; }
no_set_aside() { ! ls "$1" | grep -q superseded || fail "$2: a file checkpoint was set aside: $(ls "$1")"; }

# The other run: killed after step 12, its local level kept (newer than
# any step the victim below, killed after step 4, keeps under a slow build).
oth=$tmp/other
run_and_kill 2 other 12 --set ckpt.dir="$oth" --set ckpt.local_dir="$oth.shm" --set train.metrics="$oth.jsonl" >/dev/null
[ -s "$oth/run.id" ] && grep -Eq '^boost-run-id [0-9a-f]{32}$' "$oth/run.id" || fail "no run identity marker in $oth: $(ls "$oth")"
ostep=$(newest_local "$oth.shm/rank_00000")
[ -n "$ostep" ] || fail "the other run kept no local step: $(ls -R "$oth.shm")"

# 1. A fresh run given the other run's ckpt.local_dir (steps 1-3, below the
# other run's): not resumed, nothing of it removed.
before=$(snap "$oth.shm")
train 2 "$tmp/fresh.log" "${LOCAL[@]}" --set train.steps=3 --set ckpt.every=100 --set ckpt.dir="$tmp/fresh" \
  --set ckpt.local_dir="$oth.shm" --set train.metrics="$tmp/fresh.jsonl" || fail "fresh: $(tail -5 "$tmp/fresh.log")"
line=$(grep "^checkpoints: " "$tmp/fresh.log")
echo "$line" | grep -q "resumed from the local level" && fail "fresh: resumed another run's local level: $line"
echo "$line" | grep -q "the local level in $oth.shm is another run's: from the file (.*$ostep is another run's (identity [0-9a-f]*, this run's not yet known): passed over, left in place)" ||
  fail "fresh: $line"
[ "$(snap "$oth.shm")" = "$before" ] || fail "fresh: the other run's local level changed: $(ls -R "$oth.shm")"
[ "$(grep -c "" "$tmp/fresh.jsonl")" = 3 ] || fail "fresh: did not train steps 1-3 from scratch"
echo "ok: a fresh run on another run's ckpt.local_dir: not resumed, left byte for byte ($line)"

# 2. Another run's newer step planted in a victim's local level.
vic=$tmp/victim
KILL_AFTER_FILE=$vic:4 run_and_kill 2 victim 4 --set ckpt.dir="$vic" --set ckpt.local_dir="$vic.shm" \
  --set train.metrics="$vic.jsonl" >/dev/null
vstep=$(newest_local "$vic.shm/rank_00000")
[ "$((10#${vstep#step_}))" -lt "$((10#${ostep#step_}))" ] || fail "victim: its step $vstep is not older than $ostep"
for r in rank_00000 rank_00001; do cp -a "$oth.shm/$r/$ostep" "$vic.shm/$r/"; done
planted=$(snap "$vic.shm/rank_00000/$ostep")
train 2 "$tmp/victim.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$vic" --set ckpt.local_dir="$vic.shm" \
  --set train.metrics="$vic.jsonl" || fail "victim: relaunch: $(tail -5 "$tmp/victim.2.log")"
line=$(grep "^checkpoints: " "$tmp/victim.2.log")
got=$(resumed_local_step "$tmp/victim.2.log")
[ "$got" = "$((10#${vstep#step_}))" ] || fail "victim: resumed $got, its own newest local step is $vstep: $line"
echo "$line" | grep -q "passed over: .*rank_00000/$ostep is another run's (identity" || fail "victim: not said: $line"
[ "$(snap "$vic.shm/rank_00000/$ostep")" = "$planted" ] || fail "victim: the planted step was changed or removed"
[ -d "$vic.shm/rank_00001/$ostep" ] || fail "victim: rank 1's planted step removed"
no_set_aside "$vic" victim
[ -f "$(final "$vic")" ] || fail "victim: no final checkpoint"
echo "ok: another run's step planted (valid checksums): passed over in one line, left in place, nothing set aside"
run_id_of() { "$INSPECT" summary --json "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["run_id"])'; }
vid=$(run_id_of "$(final "$vic")")
[ "boost-run-id $vid" = "$(cat "$vic/run.id")" ] || fail "victim: the file's run_id '$vid' is not the marker's: $(cat "$vic/run.id")"
[ "boost-run-id $vid" != "$(cat "$oth/run.id")" ] || fail "victim and other run share an identity"

# A file older than identities (no run_id, no marker): resumed as before,
# and the run's next file carries a new identity, the marker too.
"$PY" -c 'import sys, h5py
with h5py.File(sys.argv[1], "r+") as f: del f.attrs["run_id"]' "$(final "$vic")"
rm "$vic/run.id"
train 2 "$tmp/old.log" "${LOCAL[@]}" --set train.steps=$((STEPS + 2)) --set ckpt.every=4 --set ckpt.dir="$vic" \
  --set ckpt.local_dir="$vic.shm" --set train.metrics="$tmp/old.jsonl" || fail "old: $(tail -5 "$tmp/old.log")"
grep -q "^checkpoints: resumed from $(final "$vic") (step $STEPS" "$tmp/old.log" || fail "old: $(grep checkpoints: "$tmp/old.log")"
nid=$(run_id_of "$vic/step_$(printf %08d $((STEPS + 2))).h5")
[ "boost-run-id $nid" = "$(cat "$vic/run.id")" ] && [ "$nid" != "$vid" ] ||
  fail "old: the next file's run_id '$nid', marker '$(cat "$vic/run.id")', before '$vid'"
echo "ok: a file without an identity resumed as before; the next file and the marker carry a new one"

# 3. The run's own step forged into step 99999999 (its manifest rewritten,
# its checksum recomputed; the state part says the step it was).
own=$tmp/own
KILL_AFTER_FILE=$own:4 run_and_kill 2 own 5 --set ckpt.dir="$own" --set ckpt.local_dir="$own.shm" \
  --set train.metrics="$own.jsonl" >/dev/null
wstep=$(newest_local "$own.shm/rank_00000")
for r in rank_00000 rank_00001; do
  cp -a "$own.shm/$r/$wstep" "$own.shm/$r/step_99999999"
  "$FORGE" "$own.shm/$r/step_99999999" --step 99999999 >/dev/null || fail "local_forge"
done
forged=$(snap "$own.shm/rank_00000/step_99999999")
train 2 "$tmp/own.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$own" --set ckpt.local_dir="$own.shm" \
  --set train.metrics="$own.jsonl" || fail "own: relaunch: $(tail -5 "$tmp/own.2.log")"
line=$(grep "^checkpoints: " "$tmp/own.2.log")
got=$(resumed_local_step "$tmp/own.2.log")
[ "$got" = "$((10#${wstep#step_}))" ] || fail "own: resumed '$got', expected ${wstep}: $line"
echo "$line" | grep -q "passed over: local step 99999999 is damaged: .*step_99999999: its state part is of step $got, its manifest says 99999999 (passed over, left in place)" ||
  fail "own: not said: $line"
[ "$(snap "$own.shm/rank_00000/step_99999999")" = "$forged" ] || fail "own: the forged step was changed or removed"
no_set_aside "$own" own
ls "$own" | grep -q "step_$(printf %08d $STEPS).h5" || fail "own: no final checkpoint: $(ls "$own")"
echo "ok: a step whose manifest and state part disagree: passed over in one line, left in place, nothing set aside"

# 4. 4 ranks dp=4 (two simulated nodes: partner copies) -> 2 ranks dp=2
# (two nodes of one rank: partner copies): the file, and it says so.
wide=$tmp/wide
KILL_AFTER_FILE=$wide:4 BOOST_RANKS_PER_NODE=2 run_and_kill 4 wide 5 --set ckpt.dir="$wide" \
  --set ckpt.local_dir="$wide.shm" --set train.metrics="$wide.jsonl" >/dev/null
ls "$wide.shm" | grep -q partner_00000 || fail "wide: no partner copies: $(ls "$wide.shm")"
BOOST_RANKS_PER_NODE=1 train 2 "$tmp/wide.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$wide" \
  --set ckpt.local_dir="$wide.shm" --set train.metrics="$tmp/wide.2.jsonl" || fail "wide: relaunch: $(tail -5 "$tmp/wide.2.log")"
line=$(grep "^checkpoints: " "$tmp/wide.2.log")
echo "$line" | grep -q "resumed from $wide/step_00000004.h5 (step 4.*the local level in $wide.shm is another layout's: from the file" ||
  fail "wide: $line"
grep -q "partner copies" <<<"$line" && fail "wide: partner copies of another layout used: $line"
no_set_aside "$wide" wide
echo "ok: 4 ranks dp=4 -> 2 ranks: from the file, said so"

# 5. Rank 1's own directory gone: its parts and the state part come from
# its partner in pieces of 64 bytes, rank 0's state part is broadcast in
# pieces of 64 bytes; the run ends bit for bit as an uninterrupted one.
export BOOST_RANKS_PER_NODE=1
ref=$tmp/ref
train 2 "$tmp/ref.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$ref" --set ckpt.local_dir="$ref.shm" \
  --set train.metrics="$ref.jsonl" || fail "reference run: $(tail -5 "$tmp/ref.log")"
export BOOST_CKPT_TEST_LOCAL_PIECE=64
pc=$tmp/piece
run_and_kill 2 piece 5 --set ckpt.dir="$pc" --set ckpt.local_dir="$pc.shm" --set train.metrics="$pc.jsonl" >/dev/null
pstep=$(newest_local "$pc.shm/rank_00000")
bytes=$(stat -c %s "$pc.shm/rank_00000/$pstep/state.bin")
[ "$bytes" -gt $((64 * 20)) ] || fail "piece: the state part has $bytes bytes: not many pieces of 64"
rm -rf "$pc.shm/rank_00001"
train 2 "$tmp/piece.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$pc" --set ckpt.local_dir="$pc.shm" \
  --set train.metrics="$pc.jsonl" || fail "piece: relaunch: $(tail -5 "$tmp/piece.2.log")"
line=$(grep "^checkpoints: " "$tmp/piece.2.log")
echo "$line" | grep -q "resumed from the local level: step $((10#${pstep#step_})) .*1 rank from partner copies" || fail "piece: $line"
same_losses "$ref.jsonl" "$pc.jsonl" || fail "piece: losses differ from the uninterrupted run"
[ "$(checksums "$(final "$ref")")" = "$(checksums "$(final "$pc")")" ] || fail "piece: the final checkpoint differs"
"$PY" - "$(final "$ref")" "$(final "$pc")" <<'PYEOF' || fail "piece: the state datasets differ from the uninterrupted run's"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
for k in ("loss_history", "grad_norm_history"):
    if not np.array_equal(a["state"][k][()], b["state"][k][()]): sys.exit(k)
PYEOF
echo "ok: a $bytes-byte state part in pieces of 64 bytes (partner copy and broadcast): bit-identical"
unset BOOST_CKPT_TEST_LOCAL_PIECE BOOST_RANKS_PER_NODE

# The other run, relaunched: its own local level is there, whole.
train 2 "$tmp/other.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$oth" --set ckpt.local_dir="$oth.shm" \
  --set train.metrics="$oth.jsonl" || fail "other: relaunch: $(tail -5 "$tmp/other.2.log")"
[ "$(resumed_local_step "$tmp/other.2.log")" = "$((10#${ostep#step_}))" ] ||
  fail "other: did not resume its own step $ostep: $(grep checkpoints: "$tmp/other.2.log")"
echo "ok: the other run resumed its own local step $ostep afterwards"
echo "PASS: ckpt_local_identity"
