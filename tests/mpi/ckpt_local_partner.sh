#!/usr/bin/env bash
# The local level's partner copies, on 4 ranks split into two simulated
# nodes (BOOST_RANKS_PER_NODE=2; layout tp=2 x dp=2): every rank's parts are
# also kept by the same rank of the other node. A node's ranks killed and
# its local directories removed: the restart takes their parts from the
# partners and ends bit for bit where an uninterrupted run ends. A rank
# whose own copy and partner's copy are both gone: the file, and the log
# says so. A flipped byte in a rank's own part: named in one line, the
# partner's copy used, still exact.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
make_data
export BOOST_RANKS_PER_NODE=2
STEPS=10
LOCAL=(--set ckpt.local_every=1 --set train.steps=$STEPS --set train.lr=3e-3 --set parallel.tp=2 --set parallel.dp=2)
final() { echo "$1/step_$(printf %08d $STEPS).h5"; }

ref=$tmp/ref
train 4 "$tmp/ref.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$ref" --set ckpt.local_dir="$tmp/refshm" \
  --set train.metrics="$ref.jsonl" || fail "reference run: $(tail -5 "$tmp/ref.log")"
grep -q "checkpoint: local level every 1 step in $tmp/refshm: .* on a node of 2 ranks (its own copies and its partners'); each rank's parts also kept by the same rank of the next node (rank 0's by rank 2)" \
  "$tmp/ref.log" || fail "the start does not report the partner copies: $(grep "checkpoint:" "$tmp/ref.log" | head -2)"

# relaunch TAG: the run continued to the end; its log in $tmp/TAG.2.log.
relaunch() {
  train 4 "$tmp/$1.2.log" "${LOCAL[@]}" --set ckpt.every=4 --set ckpt.dir="$tmp/$1" --set ckpt.local_dir="$tmp/$1.shm" \
    --set train.metrics="$tmp/$1.jsonl" || fail "$1: relaunch: $(tail -5 "$tmp/$1.2.log")"
  same_losses "$ref.jsonl" "$tmp/$1.jsonl" || fail "$1: losses differ from the uninterrupted run"
  [ "$(checksums "$(final "$ref")")" = "$(checksums "$(final "$tmp/$1")")" ] ||
    fail "$1: the final checkpoint differs from the uninterrupted run's"
}
killed() { run_and_kill 4 "$1" 5 --set ckpt.dir="$tmp/$1" --set ckpt.local_dir="$tmp/$1.shm" --set train.metrics="$tmp/$1.jsonl"; }

# Node 1 (ranks 2 and 3) lost: its own parts and the copies it kept for node 0.
logged=$(killed node)
ls "$tmp/node.shm" | tr '\n' ' ' | grep -q "partner_00000 partner_00001 partner_00002 partner_00003 rank_00000 rank_00001 rank_00002 rank_00003" ||
  fail "node: local directories: $(ls "$tmp/node.shm")"
rm -rf "$tmp/node.shm"/{rank_00002,rank_00003,partner_00000,partner_00001}
relaunch node
got=$(resumed_local_step "$tmp/node.2.log")
[ -n "$got" ] || fail "node: not resumed from the local level: $(grep checkpoints: "$tmp/node.2.log")"
[ "$got" -ge $((logged - 1)) ] || fail "node: resumed from local step $got, but step $logged had been logged"
grep -q "checkpoints: resumed from the local level: step $got .*, 2 ranks from partner copies (rank 2: no copy of step $got in $tmp/node.shm/rank_00002)" \
  "$tmp/node.2.log" || fail "node: $(grep checkpoints: "$tmp/node.2.log")"
"$INSPECT" summary "$(final "$tmp/node")" | grep -q "steps $got-$STEPS .*, from the local level (partner copies)$" ||
  fail "node: boost-inspect summary: $("$INSPECT" summary "$(final "$tmp/node")" | grep -A3 starts:)"
echo "ok: a node's directories gone: resumed from its partners' copies at step $got (last logged $logged), bit-identical"

# Rank 2's own copy and its partner's copy (kept by rank 0) both gone: the file.
logged=$(killed both)
rm -rf "$tmp/both.shm"/{rank_00002,partner_00002}
relaunch both
grep -q "checkpoints: resumed from $tmp/both/step_00000004.h5 (step 4.*; local step [0-9]*: rank 2 has neither its own copy nor its partner's: from the file" \
  "$tmp/both.2.log" || fail "both: $(grep checkpoints: "$tmp/both.2.log")"
echo "ok: both copies of rank 2 gone: resumed from the file, said so, bit-identical"

# A flipped byte in rank 1's own part: its partner's copy is used.
logged=$(killed flip)
newest=$(ls "$tmp/flip.shm/rank_00001" | grep -v tmp | tail -1)
part=$tmp/flip.shm/rank_00001/$newest/params.bin
"$PY" -c 'import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 3] ^= 0x01; open(p, "wb").write(b)' "$part"
relaunch flip
grep -q "checkpoints: resumed from the local level: step $((10#${newest#step_})) .*, 1 rank from partner copies (rank 1: $part: checksum mismatch (damaged))" \
  "$tmp/flip.2.log" || fail "flip: $(grep checkpoints: "$tmp/flip.2.log")"
echo "ok: flipped byte in $part named, partner's copy used, bit-identical"
echo "PASS: ckpt_local_partner"
