#!/usr/bin/env bash
# The global batch is the run's, not the layout's (issue 20, item 1). A
# checkpoint records it (root attribute global_batch, sequences per
# optimizer step); boost-reshard keeps it; a resume on any dp/tp/pp derives
# batch_size x grad_accum per replica from it. Sources written by dp=2
# (global batch 4) and dp=4 (global batch 8: 1 x 2 accum x 4) are resharded
# to other layouts -- dp=1, dp=4, tp=2; dp=2, pp=2 -- and each resharded
# file resumes exactly like the source itself resumed directly on the same
# layout: the same global batch in the log, the same per-step losses bit
# for bit. A global batch the target's dp cannot split is refused with one
# line, the same for both. Files from before the attribute (it deleted with
# h5py) keep the global batch their config and writer layout say, a
# resharded one that of the layout it was resharded from; boost-reshard of
# such a file records it.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RESHARD=$B/tools/boost-reshard
[ -x "$RESHARD" ] || fail "$RESHARD not built"
BASE=(--set train.min_lr_ratio=1 --set model.seq_len=32)

# the global batch a run logged; the global_batch attribute of a file
gbatch() { sed -n 's/.*| global batch \([0-9]*\) sequences.*/\1/p' "$1"; }
attr() { state "$1" global_batch; }

train 2 "$tmp/s2.log" "${BASE[@]}" --set train.steps=2 --set ckpt.dir="$tmp/s2" || fail "dp=2 source: $(tail -3 "$tmp/s2.log")"
train 4 "$tmp/s4.log" "${BASE[@]}" --set train.batch_size=1 --set train.grad_accum=2 --set train.steps=2 \
  --set ckpt.dir="$tmp/s4" || fail "dp=4 source: $(tail -3 "$tmp/s4.log")"
S2=$tmp/s2/step_00000002.h5 S4=$tmp/s4/step_00000002.h5
[ "$(attr "$S2")" = 4 ] || fail "dp=2 source: global_batch attribute $(attr "$S2"), expected 4"
[ "$(attr "$S4")" = 8 ] || fail "dp=4 source: global_batch attribute $(attr "$S4"), expected 8"
echo "ok: sources record global_batch 4 (dp=2) and 8 (dp=4, accum 2)"

# case NAME SRC GLOBAL RESHARD_LAYOUT NP [train args]: reshard SRC, resume
# both files on NP ranks with the args, compare.
case_() {
  local name=$1 src=$2 want=$3 layout=$4 np=$5
  shift 5
  "$RESHARD" "$src" "$tmp/$name.h5" --layout "$layout" --quiet >"$tmp/$name.rs.log" 2>&1 ||
    fail "$name: boost-reshard: $(cat "$tmp/$name.rs.log")"
  [ "$(attr "$tmp/$name.h5")" = "$want" ] || fail "$name: boost-reshard wrote global_batch $(attr "$tmp/$name.h5"), not $want"
  local how
  for how in direct resharded; do
    local from=$src
    [ "$how" = resharded ] && from=$tmp/$name.h5
    train "$np" "$tmp/$name.$how.log" "${BASE[@]}" --set train.steps=4 --set ckpt.resume="$from" \
      --set train.metrics="$tmp/$name.$how.jsonl" "$@" || fail "$name: $how resume: $(tail -3 "$tmp/$name.$how.log")"
    [ "$(gbatch "$tmp/$name.$how.log")" = "$want" ] ||
      fail "$name: $how resume trains a global batch of $(gbatch "$tmp/$name.$how.log"), the checkpoint's is $want"
  done
  [ "$(losses "$tmp/$name.direct.jsonl" | wc -l)" = 2 ] || fail "$name: the direct resume did not log steps 3 and 4"
  [ "$(losses "$tmp/$name.direct.jsonl")" = "$(losses "$tmp/$name.resharded.jsonl")" ] ||
    fail "$name: losses differ: direct $(losses "$tmp/$name.direct.jsonl" | tr '\n' ' ') vs resharded $(losses "$tmp/$name.resharded.jsonl" | tr '\n' ' ')"
  echo "ok: $name: resharded to $layout, resumed with global batch $want, losses bit for bit those of the direct resume"
}

case_ dp2_to_dp1 "$S2" 4 dp=1,tp=1,pp=1 0
case_ dp2_to_dp4 "$S2" 4 dp=4,tp=1,pp=1 4
case_ dp2_to_tp2 "$S2" 4 dp=1,tp=2,pp=1 2 --set parallel.tp=2
case_ dp4_to_dp2 "$S4" 8 dp=2,tp=1,pp=1 2
case_ dp4_to_pp2 "$S4" 8 dp=1,tp=1,pp=2 2 --set parallel.pp=2

# dp=3 cannot split 8 sequences: one line, the same from either file.
"$RESHARD" "$S4" "$tmp/dp3.h5" --layout dp=3,tp=1,pp=1 --quiet >/dev/null 2>&1 || fail "reshard to dp=3"
for from in "$S4" "$tmp/dp3.h5"; do
  rc=0
  train 3 "$tmp/dp3.log" "${BASE[@]}" --set train.steps=4 --set ckpt.resume="$from" || rc=$?
  [ "$rc" = 1 ] || fail "dp=3 from $from: exit $rc, expected 1: $(tail -2 "$tmp/dp3.log")"
  grep -q "cannot keep the checkpoint's global batch of 8 sequences over parallel.dp=3" "$tmp/dp3.log" ||
    fail "dp=3 from $from: no line naming the global batch: $(grep -v '^  ' "$tmp/dp3.log" | tail -2)"
done
echo "ok: a global batch of 8 over dp=3 is refused with one line, directly and after resharding"

# Files from before the attribute: the global batch comes from the stored
# config and the layout that ran it.
if "$PY" -c 'import h5py' 2>/dev/null; then
  strip() { cp "$1" "$2" && "$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); del f.attrs["global_batch"]' "$2"; }
  strip "$S4" "$tmp/old.h5"
  strip "$tmp/dp4_to_dp2.h5" "$tmp/old_rs.h5"
  for f in old old_rs; do
    train 2 "$tmp/$f.log" "${BASE[@]}" --set train.steps=4 --set ckpt.resume="$tmp/$f.h5" \
      --set train.metrics="$tmp/$f.jsonl" || fail "$f: resume: $(tail -3 "$tmp/$f.log")"
    [ "$(gbatch "$tmp/$f.log")" = 8 ] || fail "$f (no global_batch attribute): global batch $(gbatch "$tmp/$f.log"), expected 8"
    [ "$(losses "$tmp/$f.jsonl")" = "$(losses "$tmp/dp4_to_dp2.direct.jsonl")" ] || fail "$f: losses differ from the direct resume"
  done
  "$RESHARD" "$tmp/old_rs.h5" "$tmp/old_rs1.h5" --layout dp=1,tp=1,pp=1 --quiet >/dev/null 2>&1 || fail "reshard of an old file"
  [ "$(attr "$tmp/old_rs1.h5")" = 8 ] || fail "boost-reshard of an old resharded file recorded global_batch $(attr "$tmp/old_rs1.h5")"
  echo "ok: files without the attribute keep the global batch of their config and writer layout (8), boost-reshard records it"
  cp "$S4" "$tmp/bad.h5"
  "$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); f.attrs["global_batch"]=f.attrs["global_batch"]*2' "$tmp/bad.h5"
  "$INSPECT" verify "$tmp/bad.h5" >"$tmp/bad.log" 2>&1 && fail "boost-inspect verify accepts a global_batch its config and layout contradict"
  grep -q "attribute global_batch.*16 differs from the config's batch_size x grad_accum x the layout's dp = 8" "$tmp/bad.log" ||
    fail "verify does not name global_batch: $(tail -3 "$tmp/bad.log")"
  "$INSPECT" verify "$S4" >/dev/null 2>&1 || fail "verify refuses the dp=4 source"
  echo "ok: boost-inspect verify checks global_batch against the stored config and layout"
  cp "$S4" "$tmp/zero.h5"
  "$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); f.attrs["global_batch"]=0' "$tmp/zero.h5"
  rc=0
  train 2 "$tmp/zero.log" "${BASE[@]}" --set train.steps=4 --set ckpt.resume="$tmp/zero.h5" || rc=$?
  [ "$rc" = 1 ] || fail "a global_batch of 0: exit $rc, expected 1"
  grep -q "zero.h5: global_batch attribute 0 is not a positive number of sequences" "$tmp/zero.log" ||
    fail "a global_batch of 0 is not named: $(grep boost-train: "$tmp/zero.log")"
  echo "ok: a global_batch of 0 is refused with one line"
else
  echo "SKIP part: h5py not importable by $PY: files without the attribute not tested"
fi
echo "PASS: ckpt_reshard_batch"
