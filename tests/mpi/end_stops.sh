#!/usr/bin/env bash
# A rank stopped (SIGSTOP, as a frozen or swapped-out node would be) at each
# phase of a job's end, with the local level on (ckpt.local_every=1, two
# simulated nodes: partner copies): the other rank's watchdogs end the job
# in bounded time every time (docs/PARALLELISM.md, "The collective
# watchdog"), with the documented exit status, and no rank is left.
#   last-step     after the last step trained, before its checkpoint: the
#                 final state cannot be committed, 74
#   final-save    the final save under way (file and local level): 74
#   local-commit  the final save committed; the local level's last commit
#                 and retire (a barrier of every rank): 75
#   end-agreement the agreement every rank makes before MPI_Finalize: 75
#   finalize      entering MPI_Finalize: 75
# The test hook BOOST_TRAIN_TEST_STOP_IN=PHASE:RANK makes the rank stop
# itself on entering PHASE (ckpt/session/ckpt_test_hooks.h).
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/watchdog_common.bash"
make_data
T=3 # parallel.timeout and ckpt.timeout of every run here

# stopped_state PID: waits (60 s at most) until the process is stopped.
wait_stopped() {
  local i st
  for i in $(seq 1 1200); do
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || st=
    [ "$st" = T ] && return 0
    [ -z "$st" ] && break
    sleep 0.05
  done
  fail "$2: rank $3 never stopped itself (state '${st:-gone}'): $(tail -3 "$log")"
}

# stop_in PHASE RANK RC: the job ends within twice the timeout + 15 s of the
# stop (a checkpoint phase: parallel.timeout + ckpt.timeout, plus the
# watchdog's 2 s question and MPI_Abort), exit RC, no rank left.
stop_in() {
  local phase=$1 rank=$2 want=$3 pid hook
  hook="BOOST_TRAIN_TEST_STOP_IN=$phase:$rank BOOST_RANKS_PER_NODE=1"
  log="$tmp/$phase.$rank.log"
  rm -rf "$tmp/c" "$tmp/local"
  launch "$log" "$hook" "$hook" --set train.steps=6 --set ckpt.every=4 --set ckpt.dir="$tmp/c" \
    --set ckpt.local_every=1 --set ckpt.local_dir="$tmp/local" --set ckpt.timeout=$T
  rank_pid 0 >/dev/null
  pid=$(rank_pid "$rank")
  wait_stopped "$pid" "$phase" "$rank"
  end_within $((2 * T + 15))
  echo "$phase (rank $rank stopped): rc $rc after $secs s: $(grep -E "watchdog" "$log" | head -1 | cut -c1-240)"
  [ "$rc" = "$want" ] || fail "$phase: exit $rc, expected $want: $(grep -v '^  ' "$log" | tail -4)"
  grep -Eq "^boost(-train)?: (checkpoint )?watchdog" "$log" || fail "$phase: no watchdog line: $(tail -4 "$log")"
  no_rank_left
  PIDS=""
}

stop_in last-step 1 74
stop_in final-save 1 74
stop_in local-commit 1 75
stop_in local-commit 0 75
stop_in end-agreement 1 75
stop_in finalize 1 75
stop_in finalize 0 75
echo "PASS: end_stops"
