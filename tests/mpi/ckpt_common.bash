# Helpers for the checkpoint tests (tests/mpi/ckpt_*.sh source this file;
# it is not a test itself: ctest runs only *.sh).
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

B=${BOOST_BINARY_DIR:?BOOST_BINARY_DIR must point at the build directory}
TRAIN=$B/trainer/boost-train
INSPECT=$B/tools/boost-inspect
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
PY=/usr/bin/python3 # Debian's h5py and numpy belong to this interpreter
export HDF5_PLUGIN_PATH=${HDF5_PLUGIN_PATH:-$B/hdf5-plugins}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -x "$TRAIN" ] || fail "$TRAIN not built"
[ -x "$INSPECT" ] || fail "$INSPECT not built"

# Per-test scratch directory, removed on exit (extra cleanup: add to CLEANUP).
CLEANUP=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_ckpt_test.XXXXXX")
cleanup() {
  eval "$CLEANUP" || true
  rm -rf "$tmp" || true
}

# Unmounts a test's tmpfs even while a rank a watchdog aborted is still
# going away (on a loaded machine it can hold a file there for a moment):
# its processes are killed, the unmount retried, then done lazily.
unmount_scratch() {
  local mnt=$1 i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    umount "$mnt" 2>/dev/null && return 0
    fuser -k -m "$mnt" >/dev/null 2>&1 || true
    sleep 0.5
  done
  umount -l "$mnt"
}
trap cleanup EXIT

# The fortunes corpus as a token shard (fast).
make_data() {
  [ -f "$tmp/f.tok" ] && return 0
  "$B/tools/boost-data" -o "$tmp/f.tok" /usr/share/games/fortunes >"$tmp/data.log" 2>&1 ||
    fail "boost-data: $(cat "$tmp/data.log")"
}

# Common settings: the tiny preset, no validation, constant LR unless a test
# overrides it (later --set win).
COMMON=(--set model.preset=tiny --set train.val_batches=0 --set train.warmup_steps=0 --set train.log_every=1
        --set train.threads=1 --set train.batch_size=2)

# train NP LOG args...: boost-train on NP ranks (NP=0: no mpirun, singleton).
train() {
  local np=$1 log=$2
  shift 2
  if [ "$np" = 0 ]; then
    "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" "$@" >"$log" 2>&1
  else
    $MPIRUN -n "$np" "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" "$@" >"$log" 2>&1
  fi
}

# train_bg NP LOG args...: as train, in the background; $! is boost-train's
# (or mpirun's) own PID, so signals reach it.
train_bg() {
  local np=$1 log=$2
  shift 2
  if [ "$np" = 0 ]; then
    "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" "$@" >"$log" 2>&1 &
  else
    $MPIRUN -n "$np" "$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" "$@" >"$log" 2>&1 &
  fi
}

# "step loss" lines from a metrics file (one JSON object per step).
losses() {
  "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l); print(o["step"], repr(o["loss"]))' "$1"
}

# name=checksum lines of weights and moments (checksums are layout-independent).
checksums() {
  "$INSPECT" --json "$1" | "$PY" -c 'import json,sys
d = json.load(sys.stdin)
for t in d["tensors"]:
    if t["category"] in ("weights", "moments"): print(t["name"] + "=" + t["checksum"])'
}

# continues_run FULL.jsonl PART.jsonl FIRST LAST: the resumed run logged
# exactly steps FIRST..LAST, each loss within fp32 rounding (2e-5 relative)
# of the uninterrupted run's -- another layout sums in another order.
continues_run() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
a = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1]))}
b = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[2]))}
want = list(range(int(sys.argv[3]), int(sys.argv[4]) + 1))
if sorted(b) != want:
    sys.exit("resumed run logged steps %s, expected %s" % (sorted(b), want))
for s, l in b.items():
    if abs(l - a[s]) > 2e-5 * max(1, abs(a[s])):
        sys.exit("step %d: loss %r vs %r" % (s, l, a[s]))
PYEOF
}

# state field of a checkpoint (step, data_cursor, tokens_seen, ...).
state() {
  "$INSPECT" --json --no-tensors "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

# Waits (up to $2 s) for a path to exist.
wait_for() {
  local i
  for i in $(seq 1 $(($2 * 20))); do
    [ -e "$1" ] && return 0
    sleep 0.05
  done
  return 1
}
