#!/usr/bin/env bash
# Stop signals however they arrive: under tools/mpirun/boost-mpirun the first
# SIGTERM or Ctrl-C -- to the launcher alone, to the ranks alone, or to
# every process at once -- ends in a committed final checkpoint and exit
# 75, even when that save takes seconds (plain Open MPI mpirun kills the
# ranks about 1 s after a SIGTERM or SIGINT reaches it, and exits 1). A
# second Ctrl-C forces the exit: 74, the checkpoint in flight
# abandoned, the next start removes its temporary; a repeated SIGTERM does
# not. boost-train says so at start when it runs under plain mpirun.
source "$(dirname "$0")/ckpt_common.bash"
make_data
LAUNCH="${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tools/mpirun/boost-mpirun"
PLAIN=$MPIRUN
MPIRUN="$LAUNCH --allow-run-as-root --oversubscribe" # train/train_bg launch through boost-mpirun
CFG=(--set train.steps=400 --set ckpt.every=0)
# Every dataset of a save sleeps 25 ms: the final checkpoint takes ~3 s.
export BOOST_CKPT_TEST_DELAY_MS=25 BOOST_TRAIN_TEST_STEP_DELAY_MS=50

# start TAG NP: a run in the background ($pid), its own process group (as a
# shell job with job control: Ctrl-C goes to that group); waits for 3 steps.
start() {
  local tag=$1 np=$2 i
  set -m
  train_bg "$np" "$tmp/$tag.log" "${CFG[@]}" --set ckpt.dir="$tmp/$tag" --set train.metrics="$tmp/$tag.jsonl"
  pid=$!
  set +m
  CLEANUP="kill -9 $pid 2>/dev/null; pkill -9 -P $pid 2>/dev/null"
  for i in $(seq 1 400); do
    [ -f "$tmp/$tag.jsonl" ] && [ "$(wc -l <"$tmp/$tag.jsonl")" -ge 3 ] && return 0
    sleep 0.05
  done
  fail "$tag: the run did not get going: $(tail -3 "$tmp/$tag.log")"
}

# mpirun's PID ($pid is boost-mpirun) and the ranks' (mpirun's children).
mpirun_pid() { pgrep -P "$pid" -x mpirun || fail "no mpirun under boost-mpirun"; }
ranks_of() { pgrep -P "$1" || fail "no ranks under mpirun $1"; }

# finish TAG: waits; exit 75 with the final checkpoint committed and whole.
expect_committed() {
  local tag=$1 rc=0 t0 k f
  t0=$(date +%s)
  wait "$pid" || rc=$?
  [ "$rc" = 75 ] || fail "$tag: exit status $rc, expected 75: $(grep -v '^  ' "$tmp/$tag.log" | tail -4)"
  k=$(grep -o 'preempted by signal [0-9]* at step [0-9]*: checkpoint committed' "$tmp/$tag.log" | grep -o 'step [0-9]*' | cut -d' ' -f2)
  [ -n "$k" ] || fail "$tag: no committed final checkpoint: $(tail -3 "$tmp/$tag.log")"
  f=$(printf '%s/step_%08d.h5' "$tmp/$tag" "$k")
  "$INSPECT" --verify "$f" >/dev/null || fail "$tag: $f does not verify"
  ! ls "$tmp/$tag"/*.tmp >/dev/null 2>&1 || fail "$tag: a temporary was left"
  grep -q 'checkpoint: step [0-9]* committed [0-9.]* s' "$tmp/$tag.log" || fail "$tag: no commit time logged"
  echo "ok ($tag): step $k committed (final save $(grep -o 'checkpoint: step [0-9]* committed [0-9.]* s' "$tmp/$tag.log" | tail -1 | awk '{print $5}') s), exit 75 after $(($(date +%s) - t0)) s"
}

# 0. SIGTERM to the launcher as the job starts (as soon as its trap is
# there): boost-mpirun relays it once the ranks catch SIGUSR1, and the run
# stops after start-up with nothing to save.
set -m
BOOST_CKPT_TEST_DELAY_MS=0 train_bg 2 "$tmp/early.log" "${CFG[@]}" --set ckpt.dir="$tmp/early"
pid=$!
set +m
CLEANUP="kill -9 $pid 2>/dev/null; pkill -9 -P $pid 2>/dev/null"
# Up to 60 s for the trap: under a loaded machine (the sanitizer suite at
# -j2) bash took over a second to start, and a SIGTERM before the trap
# killed the launcher itself (143) -- not what this case tests.
trapped=0
for i in $(seq 1 6000); do
  mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || true
  [ -n "$mask" ] && (((16#$mask >> 14) & 1)) && trapped=1 && break
  sleep 0.01
done
[ "$trapped" = 1 ] || fail "early: boost-mpirun never installed its SIGTERM trap (60 s)"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 75 ] || fail "early: SIGTERM to boost-mpirun as the job starts exited $rc, expected 75: $(tail -3 "$tmp/early.log")"
grep -q '^preempted by signal 10 during start-up' "$tmp/early.log" || fail "early: not stopped at start-up: $(tail -3 "$tmp/early.log")"
echo "ok (early): SIGTERM to boost-mpirun as the job starts -> stopped after start-up, exit 75"

# expect_forced TAG LINE: waits; exit 74 and the forced-exit LINE in the log.
expect_forced() {
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" = 74 ] || fail "$1: exit status $rc, expected 74: $(grep -v '^  ' "$tmp/$1.log" | tail -4)"
  grep -q "$2" "$tmp/$1.log" || fail "$1: no forced-exit line '$2'"
}

# 1. SIGTERM to every process of the job at once (a batch system that
# signals the whole step): the wrapper, mpirun and the ranks.
start all 2
mp=$(mpirun_pid)
kill -TERM "$pid" "$mp" $(ranks_of "$mp")
expect_committed all

# 2. Ctrl-C on the terminal: SIGINT to the launcher's process group.
start ctrlc 2
kill -INT -- -"$pid"
expect_committed ctrlc

# 3. SIGTERM to the ranks alone (kill, srun).
start ranks 2
kill -TERM $(ranks_of "$(mpirun_pid)")
expect_committed ranks

# 4. A second Ctrl-C (2.5 s after a SIGTERM, while the final save runs:
# ~8 s now) forces the exit: 74, nothing committed; the next start cleans
# up. A repeated SIGTERM does not (batch systems send one right before
# their SIGKILL; the seconds left may finish the save).
export BOOST_CKPT_TEST_DELAY_MS=60
start second 2
kill -TERM "$pid"
sleep 1
kill -TERM "$pid"
sleep 1.5
kill -INT "$pid"
expect_forced second 'boost-train: signal 12: exiting now with status 74'
grep -q 'boost-mpirun: SIGTERM again: the ranks are still saving' "$tmp/second.log" || fail "second: the repeated SIGTERM was not reported"
! grep -q 'checkpoint committed' "$tmp/second.log" || fail "second: the save committed anyway (too fast to test)"
train 0 "$tmp/second.2.log" --set train.steps=1 --set ckpt.dir="$tmp/second" || fail "second: the next start failed"
grep -q 'removed 1 temporary' "$tmp/second.2.log" || fail "second: the next start did not remove the temporary"
echo "ok (second): a second Ctrl-C 2.5 s into the final save -> exit 74 at once; the next start removed the temporary"

# 5. One process: SIGTERM three times (twice at once, once 2.5 s later)
# still ends in the committed checkpoint; SIGINT twice, 2.5 s apart, forces.
start single 0
kill -TERM "$pid"
kill -TERM "$pid"
sleep 2.5
kill -TERM "$pid"
expect_committed single
start single2 0
kill -INT "$pid"
sleep 2.5
kill -INT "$pid"
expect_forced single2 'boost-train: signal 2 again: exiting now with status 74'
echo "ok (single2): Ctrl-C twice, 2.5 s apart -> exit 74"

# 6. The start-up line about plain mpirun: there, not under the wrapper or
# without mpirun.
note='^launcher: plain Open MPI mpirun: SIGTERM or Ctrl-C to mpirun kills the ranks'
unset BOOST_CKPT_TEST_DELAY_MS BOOST_TRAIN_TEST_STEP_DELAY_MS
MPIRUN=$PLAIN train 2 "$tmp/plain.log" --set train.steps=1 || fail "plain: $(tail -3 "$tmp/plain.log")"
[ "$(grep -c "$note" "$tmp/plain.log")" = 1 ] || fail "plain mpirun: no (or more than one) launcher line"
train 2 "$tmp/wrapped.log" --set train.steps=1 || fail "wrapped: $(tail -3 "$tmp/wrapped.log")"
! grep -q "$note" "$tmp/wrapped.log" || fail "boost-mpirun: the plain-mpirun line was printed"
train 0 "$tmp/alone.log" --set train.steps=1 || fail "alone: $(tail -3 "$tmp/alone.log")"
! grep -q "$note" "$tmp/alone.log" || fail "without mpirun: the plain-mpirun line was printed"
echo "ok (note): the plain-mpirun line appears under plain mpirun only"
echo "PASS: preempt_launchers"
