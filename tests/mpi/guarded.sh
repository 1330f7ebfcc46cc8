#!/usr/bin/env bash
# The guarded backend's suite: the trainer and the checkpoint package touch
# backend memory only through the backend (kernels/backend.h). The guarded
# backend (train.device=guarded) runs the CPU kernels behind addresses the
# host cannot dereference (any host read or write of backend memory faults
# at its line, SIGSEGV); every scenario below runs on it and on the CPU
# backend and the two must agree bit for bit (tests/trajectory/fingerprint.py:
# each step's loss and gradient norm as float.hex, SHA-256 of every tensor of
# the final checkpoint; plus the stored activations where there are some):
#   single   1 process, with activations stored (ckpt.activations=sample)
#   tp2      tp=2 btp
#   pp2      pp=2, 2 micro-batches
#   dpz      dp=2 with ZeRO-1
# each trained 2 steps, checkpointed, resumed from that checkpoint and
# trained 2 more (a save and a resume on every layout; the step-2 saves of
# pp2 and dpz synchronous, BOOST_CKPT_SYNC=1, the others staged by the
# writer on the backend's copy stream), and
#   elastic  dpz's step-2 checkpoint resumed on tp=2
#   reshard  single's step-2 checkpoint rewritten by boost-reshard for tp=2,
#            then resumed on tp=2
source "$(dirname "$0")/ckpt_common.bash"
make_data
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RESHARD=$B/tools/boost-reshard
BASE=(--set model.seq_len=32 --set train.warmup_steps=1 --set train.lr=3e-3 --set ckpt.every=2)

declare -A NP=([single]=0 [tp2]=2 [pp2]=2 [dpz]=2)
declare -A LAYOUT=([single]="--set ckpt.activations=sample" [tp2]="--set parallel.tp=2 --set parallel.tp_mode=btp"
                   [pp2]="--set parallel.pp=2 --set train.grad_accum=2" [dpz]="--set parallel.dp=2 --set parallel.zero=1")

# run DEVICE NAME NP LOG args...: one boost-train run on DEVICE; its step
# log must show that device.
run() {
  local dev=$1 name=$2 np=$3 log=$4
  shift 4
  local rc=0
  train "$np" "$log" "${BASE[@]}" --set train.device="$dev" --set train.metrics="$tmp/$dev/$name.jsonl" "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    local why
    why=$(grep -m1 -i 'signal\|segmentation\|boost-train:\|boost:' "$log" || true)
    [ "$rc" = 139 ] || grep -qi 'signal 11\|segmentation fault' "$log" &&
      why="SIGSEGV: host code read or wrote backend memory (run it under gdb to see the line); $why"
    fail "$name on $dev: exit $rc: ${why:-$(tail -n 2 "$log")}"
  fi
  grep -q "train.device *= *$dev" "$log" || fail "$name: the log does not show train.device = $dev"
}

fingerprint() { # DEVICE NAME -> the run's fingerprint, and its activations' hashes
  "$PY" "$SRC/tests/trajectory/fingerprint.py" "$tmp/$1/$2.jsonl" "$tmp/$1/$2/step_00000004.h5" ||
    fail "$2 on $1: fingerprint"
  "$PY" - "$tmp/$1/$2/step_00000004.h5" <<'PYEOF'
import hashlib, sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    if "activations" in f:
        for k in sorted(f["activations"]):
            a = np.ascontiguousarray(f["activations"][k][()])
            print("activation", k, hashlib.sha256(a.tobytes()).hexdigest())
PYEOF
}

for dev in cpu guarded; do
  mkdir -p "$tmp/$dev"
  for name in single tp2 pp2 dpz; do
    sync=0
    case $name in pp2 | dpz) sync=1 ;; esac
    # shellcheck disable=SC2086 # LAYOUT entries are lists of --set arguments
    BOOST_CKPT_SYNC=$sync run "$dev" "$name" "${NP[$name]}" "$tmp/$dev/$name.log1" ${LAYOUT[$name]} --set train.steps=2 \
      --set ckpt.dir="$tmp/$dev/$name"
    cp -r "$tmp/$dev/$name" "$tmp/$dev/$name-at2" # the step-2 state, for the elastic and reshard restarts
    # shellcheck disable=SC2086
    run "$dev" "$name" "${NP[$name]}" "$tmp/$dev/$name.log2" ${LAYOUT[$name]} --set train.steps=4 \
      --set ckpt.dir="$tmp/$dev/$name"
    grep -q "resumed from .*step_00000002.h5" "$tmp/$dev/$name.log2" || fail "$name on $dev did not resume from step 2"
  done
  # elastic: dp=2 with ZeRO-1 -> tp=2 (the global batch of 4 is kept)
  cp -r "$tmp/$dev/dpz-at2" "$tmp/$dev/elastic"
  run "$dev" elastic 2 "$tmp/$dev/elastic.log" ${LAYOUT[tp2]} --set train.steps=4 --set ckpt.dir="$tmp/$dev/elastic"
  grep -q "resumed from .*step_00000002.h5" "$tmp/$dev/elastic.log" || fail "elastic on $dev did not resume"
  # reshard: the single run's step-2 checkpoint rewritten for tp=2, resumed there
  "$RESHARD" --quiet "$tmp/$dev/single-at2/step_00000002.h5" "$tmp/$dev/resharded.h5" --layout dp=1,tp=2,pp=1 \
    >"$tmp/$dev/reshard.log" 2>&1 || fail "boost-reshard of the $dev checkpoint: $(cat "$tmp/$dev/reshard.log")"
  run "$dev" reshard 2 "$tmp/$dev/reshard.log2" ${LAYOUT[tp2]} --set train.steps=4 --set ckpt.dir="$tmp/$dev/reshard" \
    --set ckpt.resume="$tmp/$dev/resharded.h5"
  grep -q "resumed from .*resharded.h5" "$tmp/$dev/reshard.log2" || fail "reshard on $dev did not resume"
done

for name in single tp2 pp2 dpz elastic reshard; do
  fingerprint cpu "$name" >"$tmp/$name.cpu"
  fingerprint guarded "$name" >"$tmp/$name.guarded"
  [ "$(grep -c ' loss ' "$tmp/$name.cpu")" -ge 2 ] && [ "$(grep -c '^tensor ' "$tmp/$name.cpu")" -gt 0 ] ||
    fail "$name: an empty fingerprint"
  diff -u "$tmp/$name.cpu" "$tmp/$name.guarded" >"$tmp/$name.diff" ||
    { head -20 "$tmp/$name.diff"; fail "$name: the guarded backend is not bit-identical to the CPU backend"; }
done
grep -q '^activation ' "$tmp/single.cpu" || fail "single: no activations stored"
echo "ok: single, tp2, pp2, dpz (each saved and resumed), elastic and reshard: guarded bit-identical to cpu"
