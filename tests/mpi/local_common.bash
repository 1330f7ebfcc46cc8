# Helpers for the local level's tests (tests/mpi/ckpt_local*.sh source this
# file after ckpt_common.bash; it is not a test itself: ctest runs only *.sh).

# kill_job MPIRUN_PID: kill -9 of every rank under that mpirun and of mpirun
# itself (Open MPI puts each rank in its own process group), then waits
# until they are gone.
kill_job() {
  local mp=$1 ranks p i
  ranks=$(pgrep -P "$mp" || true)
  [ -n "$ranks" ] || fail "no rank processes under mpirun $mp"
  kill -9 $ranks "$mp" 2>/dev/null || true
  wait "$mp" 2>/dev/null || true
  for p in $ranks; do
    for i in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  done
}

# last_step METRICS: the newest step a metrics file logged (0: none).
last_step() {
  [ -s "$1" ] || { echo 0; return; }
  "$PY" -c 'import json,sys
s = 0
for l in open(sys.argv[1]):
    try: s = max(s, json.loads(l)["step"])
    except ValueError: pass
print(s)' "$1"
}

# wait_step METRICS N SECONDS: until the run logged step N.
wait_step() {
  local i
  for i in $(seq 1 $(($3 * 10))); do
    [ "$(last_step "$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# same_losses REF.jsonl RUN.jsonl: every step the run logged has exactly the
# reference's loss (bit for bit: repr of the float).
same_losses() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
def read(p):
    d = {}
    for l in open(p):
        try: o = json.loads(l)
        except ValueError: continue
        d[o["step"]] = o["loss"]
    return d
a, b = read(sys.argv[1]), read(sys.argv[2])
if not b: sys.exit("no steps logged in " + sys.argv[2])
for s, l in sorted(b.items()):
    if s not in a or repr(a[s]) != repr(l):
        sys.exit("step %d: loss %r, uninterrupted %r" % (s, l, a.get(s)))
PYEOF
}

# resumed_local_step LOG: the step a start resumed from the local level ("" if not).
resumed_local_step() {
  sed -n 's/.*resumed from the local level: step \([0-9]*\) .*/\1/p' "$1" | head -1
}

# run_and_kill NP TAG N ARGS...: boost-train on NP ranks in the background
# (the caller's LOCAL settings, a checkpoint file every 4 steps, steps
# slowed down), every rank killed (kill -9) somewhere inside a step after
# step N was logged; prints the last step logged. ARGS must set
# train.metrics.
run_and_kill() {
  local np=$1 tag=$2 n=$3 metrics
  shift 3
  metrics=$(printf '%s\n' "$@" | sed -n 's/^train.metrics=//p')
  BOOST_TRAIN_TEST_STEP_DELAY_MS=400 $MPIRUN -n "$np" "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" \
    "${LOCAL[@]}" --set ckpt.every=4 "$@" >"$tmp/$tag.1.log" 2>&1 &
  local mp=$!
  CLEANUP="kill -9 $mp 2>/dev/null"
  wait_step "$metrics" "$n" 120 || fail "$tag: step $n never logged: $(tail -5 "$tmp/$tag.1.log")"
  if [ -n "${KILL_AFTER_FILE:-}" ]; then # DIR:STEP: that file checkpoint committed first (the save is asynchronous)
    local i
    for i in $(seq 1 1200); do
      [ "$(cat "${KILL_AFTER_FILE%:*}/latest" 2>/dev/null)" = "$(printf 'step_%08d.h5' "${KILL_AFTER_FILE##*:}")" ] && break
      sleep 0.1
    done
  fi
  sleep 0.$((RANDOM % 4))
  kill_job "$mp"
  last_step "$metrics"
}
