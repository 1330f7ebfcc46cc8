#!/usr/bin/env bash
# The step guard's exactness (docs/GUARD.md): a run healed by a rollback
# ends bit for bit equal -- every weight and moment, every loss logged after
# the rollback -- to a fresh run given the same train.skip_batches, on one
# process and on two ranks (dp=2, tp=2 btp, pp=2). The faults come from the
# test hook BOOST_TRAIN_TEST_FAULT (docs/CHAOS.md): loss spikes at batches
# 7, 9 and 10 (on rank 1 only with two ranks). With checkpoints every 4
# steps and a cluster of 3 flagged batches within 6: batch 7 is dropped,
# batch 8 is step 8 (its checkpoint written), batches 9 and 10 complete the
# cluster, and the run rolls back to step 4 -- the newest checkpoint before
# the first flagged step; step 8's is set aside (*.superseded.1) -- and skips
# batches 4-10 (a constant LR: the resumed run below stops at 8 of 16). Also: a run stopped after step 8 and resumed judges as the
# uninterrupted one (the guard's ledger is in the checkpoint); the summary
# shows the ledger; the guard never fires on a clean run.
source "$(dirname "$0")/ckpt_common.bash"
make_data

GUARD=(--set train.steps=16 --set train.min_lr_ratio=1 --set ckpt.every=4 --set train.guard=rollback --set train.guard_cluster=3
       --set train.guard_cluster_window=6 --set train.guard_skip_batches=3)

# last_losses FILE N: the last N "step loss" lines of a metrics file
last_losses() { losses "$1" | tail -n "$2"; }

heal_and_compare() { # tag np fault args...
  local tag=$1 np=$2 fault=$3
  shift 3
  BOOST_TRAIN_TEST_FAULT=$fault train "$np" "$tmp/$tag.h.log" "${GUARD[@]}" "$@" --set ckpt.dir="$tmp/$tag.h" \
    --set train.metrics="$tmp/$tag.h.jsonl" || fail "$tag: healed run: $(tail -5 "$tmp/$tag.h.log")"
  grep -q "^guard: rollback 1 of 3 to step 4: resumed from $tmp/$tag.h/step_00000004.h5" "$tmp/$tag.h.log" ||
    fail "$tag: no rollback to step 4: $(grep -E '^(guard|step +[0-9]+/16 \| FLAG)' "$tmp/$tag.h.log")"
  [ "$(grep -c FLAGGED "$tmp/$tag.h.log")" = 3 ] || fail "$tag: expected 3 flagged steps: $(grep FLAGGED "$tmp/$tag.h.log")"
  [ -f "$tmp/$tag.h/step_00000008.h5.superseded.1" ] || fail "$tag: step 8 of the abandoned branch was not set aside"
  grep -q "^guard: rollback 1 of 3 to step 4: resumed from .*; set aside step_00000008.h5 as branch 1 (\*.h5.superseded.1)" "$tmp/$tag.h.log" ||
    fail "$tag: the rollback does not say what it set aside: $(grep '^guard: rollback' "$tmp/$tag.h.log")"
  local skips
  skips=$("$INSPECT" --json --no-tensors "$tmp/$tag.h/step_00000016.h5" | "$PY" -c 'import json,sys
g = json.load(sys.stdin)["guard"]
assert g["flagged"] == 3 and g["rollbacks"] == 1, g
assert [e["batch"] for e in g["events"]] == [7, 9, 10], g
print(g["skip_batches"])') || fail "$tag: the final checkpoint's guard ledger is wrong"
  [ "$skips" = 4-10 ] || fail "$tag: the ledger's skip_batches is '$skips', expected 4-10"
  train "$np" "$tmp/$tag.f.log" "${GUARD[@]}" "$@" --set ckpt.dir="$tmp/$tag.f" --set train.skip_batches="$skips" \
    --set train.metrics="$tmp/$tag.f.jsonl" || fail "$tag: fresh run: $(tail -5 "$tmp/$tag.f.log")"
  ! grep -q FLAGGED "$tmp/$tag.f.log" || fail "$tag: the guard fired on the fresh run"
  checksums "$tmp/$tag.h/step_00000016.h5" >"$tmp/$tag.h.sum"
  checksums "$tmp/$tag.f/step_00000016.h5" >"$tmp/$tag.f.sum"
  [ -s "$tmp/$tag.h.sum" ] || fail "$tag: no checksums"
  cmp -s "$tmp/$tag.h.sum" "$tmp/$tag.f.sum" ||
    fail "$tag: healed and fresh runs end with different tensors: $(diff "$tmp/$tag.h.sum" "$tmp/$tag.f.sum" | head -4)"
  last_losses "$tmp/$tag.h.jsonl" 12 >"$tmp/$tag.h.loss"
  last_losses "$tmp/$tag.f.jsonl" 12 >"$tmp/$tag.f.loss"
  [ "$(head -1 "$tmp/$tag.f.loss" | cut -d' ' -f1)" = 5 ] || fail "$tag: the fresh run's step 5 is not 12 steps from its end"
  cmp -s "$tmp/$tag.h.loss" "$tmp/$tag.f.loss" ||
    fail "$tag: losses after the rollback differ: $(diff "$tmp/$tag.h.loss" "$tmp/$tag.f.loss" | head -4)"
  echo "ok ($tag): healed run = fresh run with train.skip_batches=$skips: $(wc -l <"$tmp/$tag.h.sum") tensors, 12 losses identical"
}

# ---- one process ------------------------------------------------------------
heal_and_compare p1 0 loss-spike@7,loss-spike@9,loss-spike@10

# boost-inspect plot marks the flagged steps and the rollback.
if command -v gnuplot >/dev/null; then
  "$INSPECT" plot "$tmp/p1.h" -o "$tmp/p1.png" --data-dir "$tmp/p1.plot" >/dev/null 2>&1 || fail "plot failed"
  [ "$(head -c 4 "$tmp/p1.png" | tail -c 3)" = PNG ] || fail "plot wrote no PNG"
  grep -q "rollback at step 4: batches 4-10 skipped" "$tmp/p1.plot/plot.gp" || fail "plot: no rollback mark"
  grep -q "3 steps flagged by the guard" "$tmp/p1.plot/plot.gp" || fail "plot: no flagged marks"
  [ "$(grep -c "dt 3 lw 1 lc rgb '#e67e22'" "$tmp/p1.plot/plot.gp")" = 3 ] || fail "plot: not 3 flagged lines"
fi

# The ledger through boost-reshard and an elastic restart on another layout.
guard_skips() { "$INSPECT" --json --no-tensors "$1" | "$PY" -c 'import json,sys; g = json.load(sys.stdin)["guard"]; print(g["flagged"], g["rollbacks"], g["skip_batches"])'; }
"$B/tools/boost-reshard" "$tmp/p1.h/step_00000016.h5" "$tmp/rs.h5" --layout dp=1,tp=2,pp=1 --quiet >"$tmp/rs.log" 2>&1 ||
  fail "reshard: $(tail -3 "$tmp/rs.log")"
[ "$(guard_skips "$tmp/rs.h5")" = "3 1 4-10" ] || fail "reshard: the ledger is '$(guard_skips "$tmp/rs.h5")'"
train 2 "$tmp/el.log" "${GUARD[@]}" --set parallel.tp=2 --set ckpt.resume="$tmp/rs.h5" --set ckpt.dir="$tmp/el" \
  --set train.steps=18 || fail "elastic: $(tail -5 "$tmp/el.log")"
[ "$(guard_skips "$tmp/el/step_00000018.h5")" = "3 1 4-10" ] || fail "elastic: the ledger is '$(guard_skips "$tmp/el/step_00000018.h5")'"
echo "ok (reshard, elastic): the guard's ledger carried to tp=2"

# Stopped after step 8 (batch 7 flagged before it) and resumed: the resumed
# run needs the ledger to count batch 7 in the cluster; it rolls back as
# the uninterrupted run did and ends identical to it.
F=loss-spike@7,loss-spike@9,loss-spike@10
BOOST_TRAIN_TEST_FAULT=$F train 0 "$tmp/r1.log" "${GUARD[@]}" --set train.steps=8 --set ckpt.dir="$tmp/r" ||
  fail "resume: first part: $(tail -5 "$tmp/r1.log")"
BOOST_TRAIN_TEST_FAULT=$F train 0 "$tmp/r2.log" "${GUARD[@]}" --set ckpt.dir="$tmp/r" || fail "resume: second part: $(tail -5 "$tmp/r2.log")"
grep -q "^guard: rollback 1 of 3 to step 4" "$tmp/r2.log" || fail "resume: the resumed run did not roll back to step 4: $(grep -E '^guard|FLAG' "$tmp/r2.log")"
checksums "$tmp/r/step_00000016.h5" >"$tmp/r.sum"
cmp -s "$tmp/r.sum" "$tmp/p1.h.sum" || fail "resume: the resumed healed run differs from the uninterrupted one"
"$INSPECT" summary "$tmp/r/step_00000016.h5" >"$tmp/r.summary" || fail "summary failed"
grep -q "guard: 3 flagged steps, 1 rollback; batches skipped: 4-10" "$tmp/r.summary" || fail "summary: $(grep -A4 guard: "$tmp/r.summary")"
grep -q "step 8 batch 7: loss above ratio (loss .*): dropped" "$tmp/r.summary" || fail "summary events: $(grep -A4 guard: "$tmp/r.summary")"
echo "ok (resume): the guard's ledger carried through a resume; same rollback, same final tensors"

# A NaN rolls back at once (no cluster needed).
BOOST_TRAIN_TEST_FAULT=nan@9 train 0 "$tmp/n.log" "${GUARD[@]}" --set ckpt.dir="$tmp/n" || fail "nan: $(tail -5 "$tmp/n.log")"
grep -q "FLAGGED batch 9: non-finite gradient norm .* rolling back" "$tmp/n.log" || fail "nan: $(grep FLAG "$tmp/n.log")"
grep -q "^guard: rollback 1 of 3 to step 8" "$tmp/n.log" || fail "nan: $(grep '^guard' "$tmp/n.log")"

# A checkpoint older than the guard (no /state/grad_norm_history, guard_replays,
# guard_events, skipped_batches: a fuzz seed) resumes; the guard judges
# from what it holds, and the new checkpoint carries the new sets.
OLD=(--set model.vocab=257 --set model.d_model=16 --set model.n_layers=1 --set model.n_heads=2 --set model.ffn=32
     --set model.seq_len=16 --set model.rank_attn=4 --set model.rank_mlp=4 --set train.batch_size=1)
train 0 "$tmp/old.log" "${OLD[@]}" --set ckpt.resume="$BOOST_SOURCE_DIR/tests/fuzz/seeds/tiny-history.h5" \
  --set ckpt.dir="$tmp/old" --set train.steps=8 || fail "old checkpoint: $(tail -5 "$tmp/old.log")"
grep -q "resumed from .*tiny-history.h5 (step 4" "$tmp/old.log" || fail "old checkpoint: not resumed: $(grep checkpoints: "$tmp/old.log")"
"$INSPECT" --json --no-tensors "$tmp/old/step_00000008.h5" | "$PY" -c 'import json,sys
d = json.load(sys.stdin)
assert d["loss_history"]["count"] == 8 and d["guard"]["flagged"] == 0 and d["guard"]["skip_batches"] == "" and d["guard"]["replays"] == [], d' ||
  fail "old checkpoint: the resumed run's state is wrong"
echo "ok (old): a checkpoint without the guard's state resumes"

# ---- two ranks ----------------------------------------------------------------
TWO=(--set train.grad_accum=2)
heal_and_compare dp2 2 loss-spike@7:1,loss-spike@9:1,loss-spike@10:1 "${TWO[@]}"
heal_and_compare tp2 2 loss-spike@7:1,loss-spike@9:1,loss-spike@10:1 "${TWO[@]}" --set parallel.tp=2 --set parallel.tp_mode=btp
heal_and_compare pp2 2 loss-spike@7:1,loss-spike@9:1,loss-spike@10:1 "${TWO[@]}" --set parallel.pp=2
