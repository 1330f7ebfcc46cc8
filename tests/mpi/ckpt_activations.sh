#!/usr/bin/env bash
# ckpt.activations: the stored bottleneck activations of a micro-batch are
# what the stored weights compute from the stored tokens
# (tests/mpi/ckpt_acts_check.c re-runs the forward pass on one process):
# bit for bit on the saving layout, within 1e-5 across layouts (tp=2 saved
# with a sharded residual and online RMSNorm); the datasets are sharded over
# ranks and compressed like the tensors.
source "$(dirname "$0")/ckpt_common.bash"
make_data
CHECK=$B/tests/mpi/ckpt_acts_check
[ -x "$CHECK" ] || fail "$CHECK not built"

train 0 "$tmp/s.log" --set ckpt.dir="$tmp/s" --set train.steps=3 --set ckpt.activations=sample || fail "sample run: $(tail -5 "$tmp/s.log")"
f=$tmp/s/step_00000003.h5
"$CHECK" "$f" "${COMMON[@]}" >"$tmp/c1.log" 2>&1 || fail "sample, same layout: $(tail -5 "$tmp/c1.log")"
grep -q "^ok: 16 datasets, the stored weights reproduce the stored activations bit for bit" "$tmp/c1.log" ||
  fail "sample: $(tail -1 "$tmp/c1.log") (expected 16 = 4 layers x 4 groups qkv, o, gate_up, down)"
"$INSPECT" --json "$f" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
t = {x["name"]: x for x in d["tensors"]}
assert t["/activations/tokens"]["shape"] == [2, 64], t["/activations/tokens"]["shape"]
assert t["/activations/layers.0.attn.qkv.h"]["shape"] == [128, 3, 16]
assert t["/activations/layers.3.mlp.down.h"]["shape"] == [128, 1, 16]
assert "/activations/layers.0.attn.qkv.hpre" not in t      # sample: h only
assert d["categories"]["activations"]["stored_bytes"] > 0
' || fail "sample: unexpected activation datasets"
echo "ok: sample (one process): $(tail -1 "$tmp/c1.log")"

# boost-inspect verify recomputes them too, and refuses a file whose stored
# activations are intact (checksums agree) but not what its weights compute:
# two layers' bottlenecks swapped together with their checksum attributes.
"$INSPECT" verify "$f" >"$tmp/v1.log" || fail "sample: verify: $(tail -3 "$tmp/v1.log")"
grep -q "^activations: 16 datasets recomputed from the stored weights, bit for bit" "$tmp/v1.log" ||
  fail "sample: verify did not recompute the activations: $(cat "$tmp/v1.log")"
"$INSPECT" verify --no-recompute "$f" >"$tmp/v1n.log" || fail "sample: verify --no-recompute: $(tail -3 "$tmp/v1n.log")"
! grep -q "^activations:" "$tmp/v1n.log" || fail "sample: --no-recompute recomputed"
cp "$f" "$tmp/swapped.h5"
"$PY" - "$tmp/swapped.h5" <<'PYEOF' || fail "could not swap two activation datasets"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    a, b = f["activations/layers.0.attn.qkv.h"], f["activations/layers.1.attn.qkv.h"]
    va, vb = a[...], b[...]
    assert (va != vb).any()
    attrs_a, attrs_b = dict(a.attrs), dict(b.attrs)
    a[...], b[...] = vb, va
    for k, v in attrs_b.items(): a.attrs[k] = v
    for k, v in attrs_a.items(): b.attrs[k] = v
PYEOF
"$INSPECT" verify --no-recompute "$tmp/swapped.h5" >"$tmp/v2n.log" ||
  fail "swapped: the checksums should still agree (the test tampers consistently): $(tail -3 "$tmp/v2n.log")"
if "$INSPECT" verify "$tmp/swapped.h5" >"$tmp/v2.log" 2>&1; then fail "swapped activations verified: $(cat "$tmp/v2.log")"; fi
grep -q "^BAD /activations/layers.0.attn.qkv.h: not what the stored weights compute" "$tmp/v2.log" ||
  fail "swapped: the problem does not name the dataset: $(cat "$tmp/v2.log")"
"$INSPECT" verify --json "$tmp/swapped.h5" >"$tmp/v2.json" 2>/dev/null && fail "swapped: verify --json exit 0"
"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] is False and d["activations_recomputed"]["mismatched"] == 2, d
' "$tmp/v2.json" || fail "swapped: verify --json"
echo "ok: verify recomputes the stored activations (bit for bit) and refuses swapped ones"

train 2 "$tmp/a.log" --set ckpt.dir="$tmp/a" --set train.steps=3 --set ckpt.activations=all --set parallel.tp=2 ||
  fail "all, tp=2: $(tail -5 "$tmp/a.log")"
f=$tmp/a/step_00000003.h5
"$INSPECT" --verify "$f" >"$tmp/v.log" || fail "all, tp=2: does not verify: $(tail -3 "$tmp/v.log")"
grep -Eq "^activations: 36 datasets recomputed from the stored weights, (bit for bit|within 1e-5)" "$tmp/v.log" ||
  fail "all, tp=2: verify did not recompute 36 datasets: $(cat "$tmp/v.log")"
"$CHECK" "$f" "${COMMON[@]}" >"$tmp/c2.log" 2>&1 || fail "all, tp=2 -> 1 process: $(grep -E 'MISMATCH|FAIL|boost' "$tmp/c2.log" | head -5)"
grep -q "^ok: 36 datasets" "$tmp/c2.log" || fail "all: $(tail -1 "$tmp/c2.log") (expected 4 layers x (4 h + 4 hpre + 1 input) = 36)"
echo "ok: all (tp=2, checked on one process): $(tail -1 "$tmp/c2.log")"
echo "PASS: ckpt_activations"
