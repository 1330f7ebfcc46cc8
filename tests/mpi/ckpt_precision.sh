#!/usr/bin/env bash
# Checkpoints across precisions and layouts (docs/PRECISION.md, "Checkpoints";
# docs/CHECKPOINT_FORMAT.md, root attribute `precision` and "Activations"):
#  1. a bf16 run saved at dp=1 with ckpt.activations=sample records precision
#     bf16 and stores its bottlenecks as bfloat16; boost-inspect verify
#     recomputes them in bf16, bit for bit. Resumed on dp=2 in fp32 (logged as
#     a switch) it saves precision fp32 with float32 activations, verified.
#  2. The reverse: an fp32 run saved at dp=2 resumed in bf16 on tp=2 (btp):
#     bf16 activations again, verified within bf16's tolerance (2^-4).
#  3. boost-reshard of the bf16 checkpoint to tp=2 keeps precision and the
#     bfloat16 activations (verified bit for bit, and a bf16 run on tp=2
#     resumes from it); the --bf16 export of it is recomputed too.
#  4. Two layers' bf16 bottlenecks swapped together with their checksums fail
#     verify, naming the dataset: the bf16 tolerance still sees wrong values.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RESHARD=$B/tools/boost-reshard
SAMPLE=(--set ckpt.activations=sample)

# precision and activation dtypes of a checkpoint: "bf16 bfloat16"
describe() {
  "$INSPECT" --json "$1" | "$PY" -c 'import json, sys
d = json.load(sys.stdin)
kinds = {t["dtype"] for t in d["tensors"]
         if t["category"] == "activations" and not t["name"].endswith(("/tokens", "/sample_index"))}
print(d["precision"], " ".join(sorted(kinds)))'
}
# verify FILE REGEX: boost-inspect verify passes and its activations line matches
verify() {
  "$INSPECT" verify "$1" >"$tmp/v.log" 2>&1 || fail "verify $1: $(grep -m3 BAD "$tmp/v.log")"
  grep -Eq "^activations: $2" "$tmp/v.log" || fail "verify $1: $(grep -E '^activations' "$tmp/v.log"), expected '$2'"
}
resumed() { # LOG STEP FROM TO: resumed at STEP, the precision switch logged
  grep -q "from step $2" "$1" || fail "$1: did not resume at step $2: $(grep -m2 -i resum "$1")"
  grep -q "train.precision $3 -> $4" "$1" || fail "$1: the switch $3 -> $4 is not logged"
}

# 1. bf16 at dp=1 -> fp32 at dp=2
train 0 "$tmp/a.log" --set train.precision=bf16 --set train.steps=3 --set ckpt.dir="$tmp/a" "${SAMPLE[@]}" ||
  fail "bf16 dp=1: $(tail -3 "$tmp/a.log")"
a3=$tmp/a/step_00000003.h5
[ "$(describe "$a3")" = "bf16 bfloat16" ] || fail "bf16 checkpoint: $(describe "$a3"), expected precision bf16 with bfloat16 activations"
verify "$a3" "16 datasets recomputed from the stored weights, bit for bit \(bf16"
train 2 "$tmp/b.log" --set parallel.dp=2 --set train.steps=5 --set ckpt.dir="$tmp/a" "${SAMPLE[@]}" ||
  fail "fp32 dp=2 from bf16: $(tail -3 "$tmp/b.log")"
resumed "$tmp/b.log" 3 bf16 fp32
a5=$tmp/a/step_00000005.h5
[ "$(describe "$a5")" = "fp32 float32" ] || fail "fp32 checkpoint: $(describe "$a5"), expected precision fp32 with float32 activations"
verify "$a5" "16 datasets recomputed from the stored weights, (bit for bit|within 1e-5) \(fp32"
echo "ok: bf16 saved at dp=1 (bfloat16 activations, verified bit for bit) resumes in fp32 on dp=2 (float32, verified)"

# 2. fp32 at dp=2 -> bf16 at tp=2
train 2 "$tmp/c.log" --set parallel.dp=2 --set train.steps=3 --set ckpt.dir="$tmp/c" "${SAMPLE[@]}" ||
  fail "fp32 dp=2: $(tail -3 "$tmp/c.log")"
verify "$tmp/c/step_00000003.h5" "16 datasets recomputed from the stored weights, (bit for bit|within 1e-5) \(fp32"
train 2 "$tmp/d.log" --set parallel.tp=2 --set train.precision=bf16 --set train.steps=5 --set ckpt.dir="$tmp/c" "${SAMPLE[@]}" ||
  fail "bf16 tp=2 from fp32: $(tail -3 "$tmp/d.log")"
resumed "$tmp/d.log" 3 fp32 bf16
c5=$tmp/c/step_00000005.h5
[ "$(describe "$c5")" = "bf16 bfloat16" ] || fail "bf16 tp=2 checkpoint: $(describe "$c5")"
verify "$c5" "16 datasets recomputed from the stored weights, (bit for bit|within 2\^-4) \(bf16"
echo "ok: fp32 saved at dp=2 resumes in bf16 on tp=2: $(grep -E '^activations' "$tmp/v.log")"

# 3. boost-reshard keeps the precision and the bfloat16 activations
"$RESHARD" "$a3" "$tmp/r.h5" --layout tp=2 --quiet >"$tmp/r.log" 2>&1 || fail "reshard: $(cat "$tmp/r.log")"
[ "$(describe "$tmp/r.h5")" = "bf16 bfloat16" ] || fail "resharded: $(describe "$tmp/r.h5")"
verify "$tmp/r.h5" "16 datasets recomputed from the stored weights, bit for bit \(bf16"
"$INSPECT" diff "$a3" "$tmp/r.h5" | grep -q "diff: 0 datasets differ" || fail "resharding changed values"
train 2 "$tmp/e.log" --set parallel.tp=2 --set train.precision=bf16 --set train.steps=4 --set ckpt.dir="$tmp/e" \
  --set ckpt.resume="$tmp/r.h5" "${SAMPLE[@]}" || fail "bf16 tp=2 from the resharded file: $(tail -3 "$tmp/e.log")"
grep -q "from step 3" "$tmp/e.log" || fail "did not resume from the resharded file at step 3"
verify "$tmp/e/step_00000004.h5" "16 datasets recomputed from the stored weights, (bit for bit|within 2\^-4) \(bf16"
"$RESHARD" "$a3" "$tmp/x.h5" --layout tp=2 --bf16 --quiet >"$tmp/x.log" 2>&1 || fail "--bf16 export: $(cat "$tmp/x.log")"
[ "$(describe "$tmp/x.h5")" = "bf16 bfloat16" ] || fail "export: $(describe "$tmp/x.h5")"
"$INSPECT" summary "$tmp/x.h5" | grep -q "export: weights bf16" || fail "the export is not marked bf16"
verify "$tmp/x.h5" "16 datasets recomputed from the stored weights, bit for bit \(bf16"
echo "ok: boost-reshard keeps precision bf16 and bfloat16 activations (tp=2 rewrite resumed on tp=2; --bf16 export recomputed bit for bit)"

# 4. swapped bf16 bottlenecks (checksums swapped too) are caught
cp "$a3" "$tmp/s.h5"
"$PY" - "$tmp/s.h5" <<'PYEOF' || fail "could not swap two bf16 activation datasets"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    a, b = f["activations/layers.0.attn.qkv.h"], f["activations/layers.1.attn.qkv.h"]
    assert a.id.get_type().get_size() == 2
    va, vb = a[...], b[...]
    attrs_a, attrs_b = dict(a.attrs), dict(b.attrs)
    a[...], b[...] = vb, va   # bf16 values: exact through the float32 -> bfloat16 conversion
    for k, v in attrs_b.items(): a.attrs[k] = v
    for k, v in attrs_a.items(): b.attrs[k] = v
PYEOF
"$INSPECT" verify --no-recompute "$tmp/s.h5" >"$tmp/sn.log" 2>&1 || fail "swapped: checksums should agree: $(grep -m3 BAD "$tmp/sn.log")"
if "$INSPECT" verify "$tmp/s.h5" >"$tmp/s.log" 2>&1; then fail "swapped bf16 activations verified"; fi
grep -q "^BAD /activations/layers.0.attn.qkv.h: not what the stored weights compute" "$tmp/s.log" ||
  fail "swapped: the problem does not name the dataset: $(head -3 "$tmp/s.log")"
echo "ok: swapped bf16 bottlenecks fail verify: $(grep -m1 '^BAD' "$tmp/s.log")"
echo "PASS: ckpt_precision"
