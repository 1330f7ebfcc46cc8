#!/usr/bin/env bash
# boost-reshard: A (tp=2) -> B (tp=4, pp=2) -> A' (tp=2) is bit-exact for
# every tensor; B's chunks line up with its layout (--plan: read
# amplification 1.00x, the original's is higher); training resumes from a
# resharded file and continues the original run; an export without
# optimizer state is refused for training with a clear line; bad inputs get
# one line and a non-zero exit.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RESHARD=$B/tools/boost-reshard
[ -x "$RESHARD" ] || fail "$RESHARD not built"
BASE=(--set train.min_lr_ratio=1 --set train.warmup_steps=0 --set model.seq_len=32)

train 2 "$tmp/a.log" "${BASE[@]}" --set parallel.tp=2 --set train.steps=6 --set ckpt.dir="$tmp/full" \
  --set train.metrics="$tmp/full.jsonl" || fail "uninterrupted run: $(tail -3 "$tmp/a.log")"
train 2 "$tmp/a3.log" "${BASE[@]}" --set parallel.tp=2 --set train.steps=3 --set ckpt.dir="$tmp/a" ||
  fail "first run: $(tail -3 "$tmp/a3.log")"
A=$tmp/a/step_00000003.h5

"$RESHARD" "$A" "$tmp/b.h5" --layout dp=1,tp=4,pp=2 --quiet >"$tmp/r1.log" 2>&1 || fail "A -> B: $(cat "$tmp/r1.log")"
"$RESHARD" "$tmp/b.h5" "$tmp/a2.h5" --layout tp=2 --quiet >"$tmp/r2.log" 2>&1 || fail "B -> A': $(cat "$tmp/r2.log")"
"$PY" - "$A" "$tmp/b.h5" "$tmp/a2.h5" <<'PYEOF' || fail "A -> B -> A' is not bit-exact"
import hashlib, sys
import h5py, numpy as np
def digest(path):
    out = {}
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and name.split("/")[0] in ("model", "optim", "state"):
            out[name] = hashlib.sha256(np.ascontiguousarray(obj[()]).tobytes()).hexdigest()
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return out
a, b, a2 = (digest(p) for p in sys.argv[1:4])
assert a and a == b == a2, [k for k in a if a.get(k) != b.get(k) or a.get(k) != a2.get(k)][:5]
print("%d datasets bit-exact through A -> B -> A'" % len(a))
PYEOF
echo "ok: A -> B -> A' bit-exact for every tensor"

amp() { "$RESHARD" "$1" --plan --json --layout "$2" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["amplification"])'; }
a_amp=$(amp "$A" tp=4,pp=2)
b_amp=$(amp "$tmp/b.h5" tp=4,pp=2)
"$PY" -c "import sys; a, b = $a_amp, $b_amp; sys.exit(0 if b == 1.0 and a > 1.0 else 1)" ||
  fail "read amplification for tp=4,pp=2: original $a_amp, resharded $b_amp (expected > 1 and 1.0)"
echo "ok: read amplification on tp=4,pp=2: $a_amp as written on tp=2, $b_amp after boost-reshard"

# Training resumes from the resharded file (on its layout) and continues the run.
train 8 "$tmp/b.log" "${BASE[@]}" --set parallel.tp=4 --set parallel.pp=2 --set train.grad_accum=2 --set train.batch_size=1 \
  --set train.steps=6 --set ckpt.resume="$tmp/b.h5" --set ckpt.dir="$tmp/bdir" --set train.metrics="$tmp/b.jsonl" ||
  fail "resume from B on tp=4,pp=2: $(tail -3 "$tmp/b.log")"
grep -q "resumed from $tmp/b.h5 (step 3" "$tmp/b.log" || fail "did not resume from B: $(grep checkpoints: "$tmp/b.log")"
continues_run "$tmp/full.jsonl" "$tmp/b.jsonl" 4 6 || fail "the run resumed from B does not continue the original"
echo "ok: training resumed from the resharded file on tp=4,pp=2 continues the tp=2 run"

# An export without optimizer state cannot resume training.
"$RESHARD" "$A" "$tmp/export.h5" --layout tp=1 --no-optimizer --quiet >/dev/null 2>&1 || fail "--no-optimizer export"
rc=0
train 0 "$tmp/e.log" "${BASE[@]}" --set train.steps=6 --set ckpt.resume="$tmp/export.h5" || rc=$?
[ "$rc" = 1 ] || fail "resuming from a --no-optimizer export exited $rc, expected 1"
grep -q "has no optimizer state (an export written by boost-reshard --no-optimizer)" "$tmp/e.log" ||
  fail "export: $(grep boost-train: "$tmp/e.log")"
echo "ok: an export without optimizer state is refused for training"
"$INSPECT" verify "$tmp/export.h5" >"$tmp/v.log" 2>&1 || fail "verify of a --no-optimizer export: $(tail -3 "$tmp/v.log")"
echo "ok: boost-inspect verify accepts the --no-optimizer export"

# bf16 export: weights rounded to nearest even bfloat16 (what numpy computes
# independently), read back as float32 by h5py, about half the weight bytes,
# verified by boost-inspect, refused for training, and kept bf16 when
# resharded again.
"$RESHARD" "$A" "$tmp/bf16.h5" --layout tp=2 --bf16 --quiet >"$tmp/r3.log" 2>&1 || fail "--bf16: $(cat "$tmp/r3.log")"
"$INSPECT" verify "$tmp/bf16.h5" >"$tmp/v16.log" 2>&1 || fail "verify of the bf16 export: $(tail -3 "$tmp/v16.log")"
"$INSPECT" summary "$tmp/bf16.h5" | grep -q "export: weights bf16, no optimizer state" || fail "summary does not show the bf16 export"
"$PY" - "$A" "$tmp/bf16.h5" <<'PYEOF' || fail "bf16 export values"
import sys
import h5py, numpy as np
def rne(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    assert "optim" not in b, "moments in a bf16 export"
    n = 0
    for name, d in b["model"].items():
        assert d.id.get_type().get_size() == 2, (name, "not 2-byte elements")
        got, want = d[()].astype(np.float32), rne(a["model"][name][()])
        assert np.array_equal(got, want), (name, float(np.abs(got - want).max()))
        n += 1
    wa = sum(d.id.get_storage_size() for d in a["model"].values())
    wb = sum(d.id.get_storage_size() for d in b["model"].values())
    assert wb < 0.65 * wa, (wa, wb)
print("%d weight tensors are the bf16 rounding of the original; stored weight bytes %d -> %d" % (n, wa, wb))
PYEOF
rc=0
train 0 "$tmp/e16.log" "${BASE[@]}" --set train.steps=6 --set ckpt.resume="$tmp/bf16.h5" || rc=$?
[ "$rc" = 1 ] || fail "resuming from a bf16 export exited $rc, expected 1"
"$RESHARD" "$tmp/bf16.h5" "$tmp/bf16b.h5" --layout tp=1 --quiet >/dev/null 2>&1 || fail "resharding the bf16 export"
"$INSPECT" diff "$tmp/bf16.h5" "$tmp/bf16b.h5" | grep -q "diff: 0 datasets differ" || fail "resharding a bf16 export changed values"
"$INSPECT" summary "$tmp/bf16b.h5" | grep -q "export: weights bf16" || fail "resharding a bf16 export widened it"
echo "ok: --bf16 export: nearest-even bf16 weights, verified, refused for training, stays bf16 when resharded"

# Under mpirun: the parallel rewrite (3 ranks: uneven bands, ranks with
# empty bands) writes the same values as the serial one, f32 and bf16; a
# damaged IN (a flipped byte in a weight chunk) fails on every rank with one
# line, within a bounded time, leaving nothing.
"$RESHARD" "$A" "$tmp/s4.h5" --layout tp=4,pp=2 --quiet >/dev/null 2>&1 || fail "serial A -> tp=4,pp=2"
timeout 120 $MPIRUN -n 3 "$RESHARD" "$A" "$tmp/p4.h5" --layout tp=4,pp=2 >"$tmp/p.log" 2>&1 || fail "parallel rewrite: $(cat "$tmp/p.log")"
grep -q "(parallel rewrite)" "$tmp/p.log" || fail "the rewrite under mpirun was not parallel: $(cat "$tmp/p.log")"
timeout 120 $MPIRUN -n 3 "$RESHARD" "$A" "$tmp/p16.h5" --layout tp=2 --bf16 --quiet >"$tmp/p.log" 2>&1 || fail "parallel --bf16: $(cat "$tmp/p.log")"
for pair in "s4.h5 p4.h5" "bf16.h5 p16.h5"; do
  set -- $pair
  "$INSPECT" verify "$tmp/$2" >/dev/null 2>&1 || fail "the parallel rewrite $2 does not verify"
  "$INSPECT" diff "$tmp/$1" "$tmp/$2" | grep -q "diff: 0 datasets differ" || fail "parallel $2 differs from serial $1"
done
cp "$A" "$tmp/damaged.h5"
"$PY" - "$tmp/damaged.h5" <<'PYEOF' || fail "could not damage the copy"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    c = f["model/layers.0.mlp.down.A"].id.get_chunk_info(0)
off = c.byte_offset + c.size // 2
d = bytearray(open(sys.argv[1], "rb").read()); d[off] ^= 0x10; open(sys.argv[1], "wb").write(d)
PYEOF
for np in 1 3; do
  rc=0
  timeout 120 $MPIRUN -n $np "$RESHARD" "$tmp/damaged.h5" "$tmp/dmg.h5" --layout tp=2 --quiet >"$tmp/d.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "damaged IN on $np ranks: exit $rc (124: a hang), expected 1: $(cat "$tmp/d.log")"
  [ "$(grep -c '^boost-reshard: .*layers.0.mlp.down.A' "$tmp/d.log")" = 1 ] || fail "damaged IN on $np ranks: $(cat "$tmp/d.log")"
  [ ! -e "$tmp/dmg.h5" ] && [ ! -e "$tmp/dmg.h5.tmp" ] || fail "a failed parallel reshard left a file"
done
echo "ok: the parallel rewrite under mpirun equals the serial one (f32 and bf16); a damaged IN fails with one line on 1 and 3 ranks"

# Bad inputs: one line, non-zero exit.
expect() { # want_status description command...
  local want=$1 what=$2 rc=0
  shift 2
  "$@" >"$tmp/bad.out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "$what: exit $rc, expected $want: $(cat "$tmp/bad.out")"
  [ "$(grep -c 'boost-reshard:' "$tmp/bad.out")" = 1 ] || fail "$what: expected one line: $(cat "$tmp/bad.out")"
}
expect 1 "missing file" "$RESHARD" "$tmp/nope.h5" "$tmp/x.h5" --layout tp=2
printf 'not hdf5' >"$tmp/junk.h5"
expect 1 "not an HDF5 file" "$RESHARD" "$tmp/junk.h5" "$tmp/x.h5" --layout tp=2
expect 1 "tp that does not divide the model" "$RESHARD" "$A" "$tmp/x.h5" --layout tp=3
expect 2 "bad --layout" "$RESHARD" "$A" "$tmp/x.h5" --layout tp=two
expect 2 "no --layout" "$RESHARD" "$A" "$tmp/x.h5"
[ ! -e "$tmp/x.h5" ] && [ ! -e "$tmp/x.h5.tmp" ] || fail "a failed reshard left a file"
echo "ok: bad inputs get one line and a non-zero exit, nothing written"
echo "PASS: ckpt_reshard"
