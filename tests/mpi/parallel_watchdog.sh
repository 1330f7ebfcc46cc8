#!/usr/bin/env bash
# The collective watchdog (parallel.timeout; docs/PARALLELISM.md, "The
# collective watchdog"). Before it, a rank stopped with SIGSTOP left its
# peer spinning in the collective for as long as it stayed stopped.
#  1. SIGSTOP of one rank of two (dp=2) mid-run: the other rank names the
#     collective, the step and the rank that has not arrived, and the job
#     ends within the timeout + a few seconds, exit 74, no rank left.
#  2. The same right after a checkpoint committed: exit 75 (the rank stops
#     itself at the start of the next step, BOOST_TRAIN_TEST_STOP_AT); the
#     requeued run resumes it.
#  3. A healthy run never fires: one rank slower than the other by most of
#     the timeout at every step, checkpoint writes, the final save and a
#     checkpoint load each longer than the timeout.
#  4. Pipeline pp=2, the second stage stopped: the first names the pipeline
#     message (or the step's collective) it waits for, exit 74.
#  5. A rank stopped before MPI_Init: the other ends the job from MPI
#     start-up, exit 75 (nothing trained), "not arrived: unknown".
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/watchdog_common.bash"
make_data
T=3 # parallel.timeout of every run here

# stopped CASE LOG "ENV0" "ENV1" MARK args...: launches 2 ranks (as
# launch), stops rank 1 with SIGSTOP once the log shows MARK (MARK "-": at
# once; "self": rank 1 stops itself, BOOST_TRAIN_TEST_STOP_AT in ENV0 and
# ENV1: every rank waits for the checkpoint in flight first).
stopped() {
  local case=$1 mark=$5 r1
  log=$2
  launch "$log" "$3" "$4" "${@:6}"
  r1=$(rank_pid 1)
  rank_pid 0 >/dev/null
  case $mark in
  self) wait_log "$log" "rank 1 stops itself at the start of step" ;;
  -) kill -STOP "$r1" ;;
  *) wait_log "$log" "$mark" && kill -STOP "$r1" ;;
  esac
  echo "$case. rank 1 stopped"
}

# healthy CASE LOG "ENV0" "ENV1" args...: the run ends, exit 0, and the watchdog never fired.
healthy() {
  local case=$1
  log=$2
  launch "$log" "$3" "$4" "${@:5}"
  rank_pid 1 >/dev/null
  end_within 240
  echo "$case. rc $rc after $secs s: $(grep -E '^checkpoint: |^done: ' "$log" | tr '\n' ' ')"
  [ "$rc" = 0 ] || fail "$case: the healthy run exited $rc: $(grep -v '^  ' "$log" | tail -5)"
  ! grep -q "boost-train: watchdog:" "$log" || fail "$case: the watchdog fired on a healthy run: $(grep watchdog: "$log")"
}

NOANSWER='not arrived: rank 1 \(no answer in 2 s: stopped, dead, or stuck in MPI\); ending the job with exit'

# 1. dp=2, rank 1 stopped mid-run.
stopped 1 "$tmp/stop.log" "" "" "^step     3/" --set train.steps=100000
ends 1 74 "^boost-train: watchdog: rank 0 has waited [0-9]+ s in (dp allreduce \(collective [0-9]+ on dp\)|world [a-z -]+ \(collective [0-9]+ on world\)) in step [0-9]+, longer than parallel.timeout=$T s; $NOANSWER 74 \(step [0-9]+ done"

# 2. The checkpoint of step 3 committed, rank 1 stopped at the start of step 4: exit 75.
hook="BOOST_TRAIN_TEST_STOP_AT=4:1"
stopped 2 "$tmp/stop75.log" "$hook" "$hook" self --set train.steps=8 --set ckpt.every=3 \
  --set ckpt.dir="$tmp/ck"
ends 2 75 "has waited [0-9]+ s in dp allreduce \(collective 4 on dp\) in step 4, .*$NOANSWER 75 \(nothing trained since the checkpoint of step 3 committed\)"
[ "$(cat "$tmp/ck/latest")" = step_00000003.h5 ] || fail "2: latest = $(cat "$tmp/ck/latest")"
train 2 "$tmp/requeue.log" --set train.steps=5 --set ckpt.every=3 --set ckpt.dir="$tmp/ck" --set parallel.timeout=$T ||
  fail "2: the requeued run failed: $(tail -3 "$tmp/requeue.log")"
grep -q "checkpoints: resumed from $tmp/ck/step_00000003.h5 (step 3" "$tmp/requeue.log" || fail "2: did not resume step 3"
echo "2. requeued: resumed step 3, done: step 5"

# 3. Healthy: rank 1 sleeps 2 s after each step (rank 0 waits for it ~2 s
# each time), every save and the load take longer than the timeout.
slow="BOOST_CKPT_TEST_DELAY_MS=40"
healthy 3 "$tmp/healthy.log" "$slow" "$slow BOOST_TRAIN_TEST_STEP_DELAY_MS=2000" --set train.steps=4 --set ckpt.every=2 \
  --set ckpt.dir="$tmp/h"
grep -q "boost-train: warning: rank 0 waited 2 s in world stop-signal agreement .*more than half of parallel.timeout=$T s" "$log" ||
  fail "3: no warning about the 2 s waits"
save_s=$(grep -o "step 4 committed [0-9.]* s" "$log" | awk '{print $4}')
[ "$(echo "$save_s > $T" | bc)" = 1 ] || fail "3: the final save took $save_s s, not longer than the timeout: slow it more"
healthy 3 "$tmp/healthy2.log" "$slow" "$slow" --set train.steps=5 --set ckpt.every=2 --set ckpt.dir="$tmp/h"
grep -q "checkpoints: resumed from $tmp/h/step_00000004.h5" "$log" || fail "3: did not resume step 4 (slowed load)"

# 4. pp=2: the second stage stopped mid-run, then at the start of step 4
# (stage 0 then sends micro-batches 0 and 1 and waits for the gradient of 0).
PP=(--set parallel.pp=2 --set train.grad_accum=2)
stopped 4 "$tmp/pp.log" "" "" "^step     3/" --set train.steps=100000 "${PP[@]}"
ends 4 74 "rank 0 has waited [0-9]+ s in (pp recv from pp rank 1 \(tag [0-9]+\)|pp send completion to pp rank 1 \(tag [0-9]+\)|world [a-z -]+ \(collective [0-9]+ on world\)) in step [0-9]+, .*$NOANSWER 74"
stopped 4 "$tmp/pp4.log" "$hook" "$hook" self --set train.steps=8 "${PP[@]}"
ends 4 74 "rank 0 has waited [0-9]+ s in pp recv from pp rank 1 \(tag 0\) in step 4, .*$NOANSWER 74"

# 5. Rank 1 stopped before MPI_Init (held in start-up by the start delay).
stopped 5 "$tmp/startup.log" "" "BOOST_TRAIN_TEST_START_DELAY_MS=60000" - --set train.steps=4
ends 5 75 "rank 0 has waited [0-9]+ s in MPI start-up, longer than parallel.timeout=$T s; not arrived: unknown"
echo "PASS: parallel_watchdog"
