#!/usr/bin/env bash
# The data-parallel gradient reduction in buckets overlapped with the last
# backward (parallel.dp_bucket_mb > 0, trainer/parallel/grad_buckets.h) trains
# bit for bit as the one call after the backward (parallel.dp_bucket_mb=0):
# every step's loss and gradient norm (float.hex) and a SHA-256 of every
# weight and AdamW moment of the final checkpoint (the trajectory test's
# fingerprint), on dp=2 alone, with ZeRO-1 and tied embeddings, with tp=2,
# with pp=2 and ZeRO-1, each with gradient accumulation, and on dp=4 (more
# than two replicas: one call by design). Tiny buckets (0.02 MiB) so every
# layout posts several; the bucketed runs must count several dp calls per
# step and the same dp bytes as the one call.
source "$(dirname "$0")/ckpt_common.bash"
[ -x "$B/tools/boost-data" ] || fail "boost-data not built"
"$PY" -c 'import h5py, numpy' 2>/dev/null || fail "h5py/numpy not importable by $PY (Debian: python3-h5py)"
FINGERPRINT=$(cd "$(dirname "$0")/../trajectory" && pwd)/fingerprint.py
make_data

# the last step's dp traffic of a metrics file: "KIND CALLS BYTES"
dp_traffic() {
  "$PY" -c '
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if "\"loss\"" in l][-1]
for k, v in sorted(rec["comm"].items()):
    if k.startswith("dp_") and k != "dp_allgather": print(k, int(v["calls"]), int(v["bytes"]))' "$1"
}

# run NAME NP BUCKET_MB args...: trains 4 steps, prints nothing; fingerprint in $tmp/NAME.fp
run() {
  local name=$1 np=$2 mb=$3
  shift 3
  local dir=$tmp/$name
  mkdir -p "$dir"
  train "$np" "$dir/log" --set model.seq_len=64 --set train.steps=4 --set ckpt.every=4 --set ckpt.dir="$dir/ck" \
    --set train.metrics="$dir/metrics.jsonl" --set parallel.dp_bucket_mb="$mb" "$@" ||
    fail "$name: $(tail -n 3 "$dir/log")"
  "$PY" "$FINGERPRINT" "$dir/metrics.jsonl" "$dir/ck/step_00000004.h5" >"$tmp/$name.fp" || fail "$name: fingerprint"
  [ "$(grep -c ' loss ' "$tmp/$name.fp")" = 4 ] || fail "$name: expected 4 steps in the metrics"
}

# same NAME NP MIN_CALLS args...: bucketed and one-call runs compared
same() {
  local name=$1 np=$2 min_calls=$3
  shift 3
  run "$name-one" "$np" 0 "$@"
  run "$name-buckets" "$np" 0.02 "$@"
  diff -u "$tmp/$name-one.fp" "$tmp/$name-buckets.fp" >"$tmp/$name.diff" ||
    { head -n 20 "$tmp/$name.diff"; fail "$name: the bucketed reduction is not bit-identical to the one call"; }
  local one buckets
  one=$(dp_traffic "$tmp/$name-one/metrics.jsonl")
  buckets=$(dp_traffic "$tmp/$name-buckets/metrics.jsonl")
  [ -n "$one" ] || fail "$name: no dp reduction counted"
  read -r kind1 calls1 bytes1 <<<"$one"
  read -r kind2 calls2 bytes2 <<<"$buckets"
  [ "$kind1" = "$kind2" ] && [ "$bytes1" = "$bytes2" ] ||
    fail "$name: counted dp traffic differs: one call '$one', buckets '$buckets'"
  [ "$calls1" = 1 ] || fail "$name: the one-call run counted $calls1 dp calls in a step"
  [ "$calls2" -ge "$min_calls" ] || fail "$name: the bucketed run counted $calls2 dp calls in a step, expected >= $min_calls"
  echo "ok: $name bit-identical ($kind2: $calls2 buckets, $bytes2 bytes per step)"
}

same dp2 2 3 --set parallel.dp=2 --set train.grad_accum=2
same dp2-zero1-tied 2 3 --set parallel.dp=2 --set parallel.zero=1 --set model.tie_embeddings=1
same dp2-tp2 4 3 --set parallel.dp=2 --set parallel.tp=2 --set parallel.tp_mode=btp --set train.grad_accum=2
same dp2-pp2-zero1 4 2 --set parallel.dp=2 --set parallel.pp=2 --set parallel.zero=1 --set train.grad_accum=3
same dp4 4 1 --set parallel.dp=4 --set train.grad_accum=2 # more than two replicas: one call either way
read -r _ calls _ <<<"$(dp_traffic "$tmp/dp4-buckets/metrics.jsonl")"
[ "$calls" = 1 ] || fail "dp4: $calls dp calls in a step with buckets asked for, expected the one call"
echo "PASS: bucketed dp reduction bit-identical to the one call on 5 layouts"
