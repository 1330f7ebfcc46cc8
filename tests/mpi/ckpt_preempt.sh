#!/usr/bin/env bash
# Preemption: SIGTERM to a single process (as SLURM/srun or kill deliver it)
# and SIGUSR1 to mpirun (which forwards it to the ranks and waits; under
# mpirun SIGTERM kills the ranks about a second later, see
# docs/CHECKPOINT_FORMAT.md, "Preemption"). All ranks agree to stop at one step boundary, commit a
# final checkpoint, and exit with status 75; the resumed run continues from
# it and produces exactly the losses and final tensors of an uninterrupted
# run with the same config (cosine LR schedule included).
source "$(dirname "$0")/ckpt_common.bash"
make_data
STEPS=40
CFG=(--set train.steps=$STEPS --set ckpt.every=0 --set train.lr=2e-3)
# The runs that get a signal sleep 50 ms after each step: a fast machine
# runs the tiny model's 40 steps in ~50 ms, before the signal could land.
SLOW=50

# waits until the metrics file has at least N lines (the run is N steps in)
wait_steps() {
  local i
  for i in $(seq 1 400); do
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}

preempt_case() { # tag NP signal
  local tag=$1 np=$2 sig=$3 rc=0 pid
  train "$np" "$tmp/$tag.a.log" "${CFG[@]}" --set ckpt.dir="$tmp/$tag.a" --set train.metrics="$tmp/$tag.a.jsonl" ||
    fail "$tag: uninterrupted run: $(tail -5 "$tmp/$tag.a.log")"
  BOOST_TRAIN_TEST_STEP_DELAY_MS=$SLOW train_bg "$np" "$tmp/$tag.b1.log" "${CFG[@]}" --set ckpt.dir="$tmp/$tag.b" --set train.metrics="$tmp/$tag.b.jsonl"
  pid=$!
  CLEANUP="kill -9 $pid 2>/dev/null"
  wait_steps "$tmp/$tag.b.jsonl" 3 || { kill -9 $pid 2>/dev/null; fail "$tag: the run did not get going"; }
  kill -s "$sig" $pid
  wait $pid || rc=$?
  [ "$rc" = 75 ] || fail "$tag: exit status $rc after SIG$sig, expected 75: $(tail -5 "$tmp/$tag.b1.log")"
  local k
  k=$(grep -o 'preempted by signal [0-9]* at step [0-9]*: checkpoint committed' "$tmp/$tag.b1.log" | grep -o 'step [0-9]*' | cut -d' ' -f2)
  [ -n "$k" ] || fail "$tag: no 'preempted ... checkpoint committed' line: $(tail -3 "$tmp/$tag.b1.log")"
  [ "$k" -lt $STEPS ] || fail "$tag: the signal arrived too late (step $k)"
  local f
  f=$(printf '%s/step_%08d.h5' "$tmp/$tag.b" "$k")
  [ -f "$f" ] || fail "$tag: final checkpoint $f missing"
  [ "$(cat "$tmp/$tag.b/latest")" = "$(basename "$f")" ] || fail "$tag: latest does not point at step $k"
  "$INSPECT" --verify "$f" >/dev/null || fail "$tag: the preemption checkpoint does not verify"
  [ "$(state "$f" step)" = "$k" ] || fail "$tag: checkpoint state step != $k"
  train "$np" "$tmp/$tag.b2.log" "${CFG[@]}" --set ckpt.dir="$tmp/$tag.b" --set train.metrics="$tmp/$tag.b.jsonl" ||
    fail "$tag: resumed run: $(tail -5 "$tmp/$tag.b2.log")"
  grep -q "resumed from $f (step $k" "$tmp/$tag.b2.log" || fail "$tag: did not resume from step $k"
  losses "$tmp/$tag.a.jsonl" >"$tmp/$tag.a.loss"
  losses "$tmp/$tag.b.jsonl" >"$tmp/$tag.b.loss"
  cmp -s "$tmp/$tag.a.loss" "$tmp/$tag.b.loss" || fail "$tag: losses differ: $(diff "$tmp/$tag.a.loss" "$tmp/$tag.b.loss" | head -4)"
  local fa fb
  fa=$(printf '%s/step_%08d.h5' "$tmp/$tag.a" $STEPS)
  fb=$(printf '%s/step_%08d.h5' "$tmp/$tag.b" $STEPS)
  checksums "$fa" >"$tmp/$tag.a.sum"
  checksums "$fb" >"$tmp/$tag.b.sum"
  cmp -s "$tmp/$tag.a.sum" "$tmp/$tag.b.sum" || fail "$tag: final tensors differ"
  echo "ok ($tag): SIG$sig at step $k -> checkpoint committed, exit 75; resumed run matches the uninterrupted one ($STEPS losses, all tensors)"
}

preempt_case term 0 TERM   # one process, SIGTERM straight to it
preempt_case usr1 2 USR1   # mpirun -n 2, SIGUSR1 to mpirun
# SIGTERM to the launcher -- what a batch system or a person sends first --
# with a final checkpoint that takes seconds (BOOST_CKPT_TEST_DELAY_MS
# slows every dataset): tools/mpirun/boost-mpirun turns it into SIGUSR1 for
# mpirun, so the ranks get the time they need (plain mpirun would SIGKILL
# them about a second after forwarding SIGTERM).
LAUNCH="${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tools/mpirun/boost-mpirun"
MPIRUN="$LAUNCH --allow-run-as-root --oversubscribe" BOOST_CKPT_TEST_DELAY_MS=25 BOOST_TRAIN_TEST_STEP_DELAY_MS=$SLOW \
  train_bg 2 "$tmp/launch.log" "${CFG[@]}" --set ckpt.dir="$tmp/launch" --set train.metrics="$tmp/launch.jsonl"
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null; pkill -9 -f boost_ckpt_test 2>/dev/null"
wait_steps "$tmp/launch.jsonl" 2 || { kill -9 $pid 2>/dev/null; fail "launch: the run did not get going"; }
t0=$(date +%s.%N)
kill -TERM $pid
rc=0
wait $pid || rc=$?
t1=$(date +%s.%N)
[ "$rc" = 75 ] || fail "launch: SIGTERM to boost-mpirun exited $rc, expected 75: $(tail -4 "$tmp/launch.log")"
k=$(grep -o 'preempted by signal [0-9]* at step [0-9]*: checkpoint committed' "$tmp/launch.log" | grep -o 'step [0-9]*' | cut -d' ' -f2)
[ -n "$k" ] || fail "launch: no committed preemption checkpoint: $(tail -3 "$tmp/launch.log")"
f=$(printf '%s/step_%08d.h5' "$tmp/launch" "$k")
"$INSPECT" --verify "$f" >/dev/null || fail "launch: $f does not verify"
echo "ok (launch): SIGTERM to tools/mpirun/boost-mpirun -> step $k committed after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s, exit 75"

# Preempted with nothing committed (no ckpt.dir): not 75 -- nothing to
# requeue from -- but 74, "ended without its final state committed".
BOOST_TRAIN_TEST_STEP_DELAY_MS=$SLOW train_bg 0 "$tmp/nockpt.log" "${CFG[@]}" --set train.metrics="$tmp/nockpt.jsonl"
pid=$!
CLEANUP="kill -9 $pid 2>/dev/null"
wait_steps "$tmp/nockpt.jsonl" 2 || { kill -9 $pid 2>/dev/null; fail "nockpt: the run did not get going"; }
kill -s USR1 $pid
rc=0
wait $pid || rc=$?
[ "$rc" = 74 ] || fail "nockpt: preempted without checkpoints exited $rc, expected 74"
grep -q "preempted at step [0-9]*, but its final state was NOT committed (no ckpt.dir)" "$tmp/nockpt.log" ||
  fail "nockpt: not reported: $(tail -3 "$tmp/nockpt.log")"
echo "ok (nockpt): preempted with nothing committed -> exit 74"
echo "PASS: ckpt_preempt"
