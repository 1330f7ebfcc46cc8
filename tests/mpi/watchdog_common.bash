# Helpers for the watchdog tests (tests/mpi/parallel_watchdog*.sh source
# this file after ckpt_common.bash; it is not a test itself). They expect
# $T (parallel.timeout of every run) and $tmp/f.tok (make_data).

# launch LOG "ENV0" "ENV1" args...: 2 ranks in the background, rank 0 with
# the environment assignments ENV0, rank 1 with ENV1; $mp is mpirun's PID.
launch() {
  local log=$1 e0=$2 e1=$3
  shift 3
  local a=(--set data.train="$tmp/f.tok" "${COMMON[@]}" --set parallel.timeout=$T "$@")
  # shellcheck disable=SC2086 # ENV0/ENV1 are lists of assignments
  $MPIRUN -n 1 env $e0 "$TRAIN" "${a[@]}" : -n 1 env $e1 "$TRAIN" "${a[@]}" >"$log" 2>&1 &
  mp=$!
  PIDS=""
  CLEANUP='for p in $PIDS; do kill -CONT $p; kill -9 $p; done 2>/dev/null; kill -9 $mp 2>/dev/null'
}

# launch_stuck WHERE STARTED args...: 2 ranks, rank 1 stuck at step 3 in
# WHERE (BOOST_TRAIN_TEST_STUCK_AT=3:1:WHERE: control, device, device-error,
# op-error; both ranks get it, rank 1 acts on it), logging to $log
# ($tmp/stuck_WHERE.log); returns once both ranks run and rank 1 has
# announced it (its line matches STARTED).
launch_stuck() {
  local where=$1 started=$2 hook="BOOST_TRAIN_TEST_STUCK_AT=3:1:$1"
  shift 2
  log="$tmp/stuck_$where.log"
  launch "$log" "$hook" "$hook" --set train.steps=100000 "$@"
  rank_pid 1 >/dev/null
  rank_pid 0 >/dev/null
  wait_log "$log" "$started"
}

# rank_pid R: the PID of world rank R of the job (waits up to 20 s for it).
rank_pid() {
  local i p
  for i in $(seq 1 400); do
    for p in $(pgrep -P "$mp" -x boost-train); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
        PIDS="$PIDS $p"
        echo "$p"
        return 0
      fi
    done
    sleep 0.05
  done
  fail "rank $1 never started"
}

# wait_log LOG PATTERN: until the log has the pattern (60 s at most).
wait_log() {
  local i
  for i in $(seq 1 1200); do
    grep -q "$2" "$1" && return 0
    sleep 0.05
  done
  fail "never logged '$2': $(tail -3 "$1")"
}

# end_within S: waits up to S s for mpirun; sets rc and secs (fails on a hang).
end_within() {
  local t0 i
  t0=$(date +%s.%N)
  for i in $(seq 1 $(($1 * 20))); do
    kill -0 "$mp" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$mp" 2>/dev/null && fail "the job was still running $1 s later (hang): $(tail -3 "$log")"
  rc=0
  wait "$mp" || rc=$?
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
}

# no_rank_left: every rank of the job is gone (or a zombie being reaped) within 10 s.
no_rank_left() {
  local p i st
  for p in $PIDS; do
    for i in $(seq 1 200); do
      st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || st=
      [ -z "$st" ] || [ "$st" = Z ] && break
      sleep 0.05
    done
    [ -z "$st" ] || [ "$st" = Z ] || fail "rank process $p left running (state $st)"
  done
}

# ends CASE RC PATTERN: the job ends within the timeout + 12 s with exit RC,
# one watchdog line matching the extended regex PATTERN, and no rank left.
ends() {
  local n line
  end_within $((T + 12))
  n=$(grep -c "boost-train: watchdog:" "$log" || true)
  line=$(grep "boost-train: watchdog:" "$log" || true)
  echo "$1. rc $rc after $secs s: $line"
  [ "$n" = 1 ] || fail "$1: $n watchdog lines, expected 1: $(grep -v '^  ' "$log" | tail -5)"
  [ "$rc" = "$2" ] || fail "$1: exit $rc, expected $2"
  echo "$line" | grep -Eq "$3" || fail "$1: the line does not match '$3'"
  no_rank_left
}

