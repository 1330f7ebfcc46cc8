#!/usr/bin/env bash
# Elastic restart with the real trainer: train N steps on layout A, resume on
# layout B for M more steps; the losses of steps N+1..N+M and the final
# weights and AdamW moments must equal the uninterrupted N+M-step run on A
# within fp32 rounding:
#   |loss_b - loss_a| <= TOL * max(1, |loss_a|), every tensor element
#   |x_b - x_a| <= TOL * max(1, max|x_a| of that tensor),  TOL = 2e-5
# (different layouts sum in different orders, so bit equality is not
# expected; a wrong shard or a lost moment shows up as ~1e-3 or more).
# Pairs cover a change of each of dp, tp, pp, ZeRO and tp mode, the world
# size going up and down, on the low-rank tiny preset and its full-rank twin.
# The global batch stays the same (batch_size * grad_accum * dp = 4).
# The LR is constant (min_lr_ratio 1, no warm-up) so that stopping at N with
# train.steps=N is the same run as the first N steps of train.steps=N+M.
source "$(dirname "$0")/ckpt_common.bash"
make_data
TOL=2e-5
N=4
M=4
# Each side sets its own batch split; later --set win over COMMON's.
BASE=(--set train.min_lr_ratio=1 --set train.warmup_steps=0 --set ckpt.every=2 --set model.seq_len=32)

# layout spec -> "NP --set ..." (np first)
layout_args() {
  local spec=$1 dp=1 tp=1 pp=1 mode=auto zero=0 batch accum=1 kv
  for kv in ${spec//,/ }; do
    case $kv in
    dp=*) dp=${kv#dp=} ;; tp=*) tp=${kv#tp=} ;; pp=*) pp=${kv#pp=} ;;
    mode=*) mode=${kv#mode=} ;; zero=*) zero=${kv#zero=} ;; accum=*) accum=${kv#accum=} ;;
    *) fail "bad layout spec $spec" ;;
    esac
  done
  batch=$((4 / (dp * accum)))
  echo "$((dp * tp * pp)) --set parallel.dp=$dp --set parallel.tp=$tp --set parallel.pp=$pp --set parallel.tp_mode=$mode" \
    "--set parallel.zero=$zero --set train.batch_size=$batch --set train.grad_accum=$accum"
}

compare_final() { # a.h5 b.h5 -> prints the worst relative difference, fails above TOL
  "$PY" - "$1" "$2" "$TOL" <<'PYEOF'
import sys
import h5py, numpy as np
a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
worst, where, names = 0.0, "", []
with h5py.File(a_path, "r") as fa, h5py.File(b_path, "r") as fb:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and name.split("/")[0] in ("model", "optim"):
            names.append(name)
    fa.visititems(visit)
    for n in names:
        if n not in fb:
            sys.exit("tensor %s missing after the elastic restart" % n)
        a = fa[n][()].astype(np.float64)
        b = fb[n][()].astype(np.float64)
        if a.shape != b.shape:
            sys.exit("tensor %s: shape %s vs %s" % (n, a.shape, b.shape))
        d = float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(a))))
        if d > worst:
            worst, where = d, n
print("%d tensors, worst relative difference %.2e (%s)" % (len(names), worst, where))
sys.exit(0 if worst <= tol else 1)
PYEOF
}

compare_losses() { # a.jsonl b.jsonl (b holds only the resumed steps)
  "$PY" - "$1" "$2" "$TOL" <<'PYEOF'
import json, sys
a = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1]))}
b = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[2]))}
tol = float(sys.argv[3])
if not b:
    sys.exit("the resumed run logged no step")
worst = 0.0
for s, lb in b.items():
    if s not in a:
        sys.exit("step %d not in the uninterrupted run" % s)
    worst = max(worst, abs(lb - a[s]) / max(1.0, abs(a[s])))
print("steps %d-%d, worst loss difference %.2e" % (min(b), max(b), worst))
sys.exit(0 if worst <= tol else 1)
PYEOF
}

pair=0
elastic() { # preset layoutA layoutB
  local preset=$1 la=$2 lb=$3 tag
  pair=$((pair + 1))
  tag=p$pair
  local a b
  read -r -a a <<<"$(layout_args "$la")"
  read -r -a b <<<"$(layout_args "$lb")"
  local npa=${a[0]} npb=${b[0]}
  local seta=("${a[@]:1}") setb=("${b[@]:1}")
  local f
  f=$(printf 'step_%08d.h5' $((N + M)))
  train "$npa" "$tmp/$tag.full.log" "${BASE[@]}" --set model.preset="$preset" "${seta[@]}" --set train.steps=$((N + M)) \
    --set ckpt.dir="$tmp/$tag.full" --set train.metrics="$tmp/$tag.full.jsonl" ||
    fail "$tag uninterrupted $la: $(tail -3 "$tmp/$tag.full.log")"
  train "$npa" "$tmp/$tag.first.log" "${BASE[@]}" --set model.preset="$preset" "${seta[@]}" --set train.steps=$N \
    --set ckpt.dir="$tmp/$tag.el" ||
    fail "$tag first $N steps on $la: $(tail -3 "$tmp/$tag.first.log")"
  train "$npb" "$tmp/$tag.second.log" "${BASE[@]}" --set model.preset="$preset" "${setb[@]}" --set train.steps=$((N + M)) \
    --set ckpt.dir="$tmp/$tag.el" --set train.metrics="$tmp/$tag.el.jsonl" ||
    fail "$tag resume on $lb: $(tail -3 "$tmp/$tag.second.log")"
  grep -q "resumed\|loaded" "$tmp/$tag.second.log" || fail "$tag: the second run did not say it resumed: $(grep -i ckpt "$tmp/$tag.second.log" | head -3)"
  local rl rt
  rl=$(compare_losses "$tmp/$tag.full.jsonl" "$tmp/$tag.el.jsonl") || fail "$tag $preset $la -> $lb: losses: $rl"
  rt=$(compare_final "$tmp/$tag.full/$f" "$tmp/$tag.el/$f") || fail "$tag $preset $la -> $lb: final state: $rt"
  echo "ok ($tag) $preset $la -> $lb: $rl; $rt"
}

elastic tiny dp=2 dp=1                              # world down, dp change
elastic tiny dp=1 dp=2,zero=1                       # world up, ZeRO on
elastic tiny dp=2,zero=1 dp=2                       # ZeRO off, same world
elastic tiny tp=2,mode=btp tp=1                     # tp down
elastic tiny dp=1 tp=2,mode=vanilla                 # tp up into vanilla
elastic tiny tp=2,mode=btp tp=2,mode=vanilla        # tp mode btp -> vanilla
elastic tiny tp=2,mode=vanilla dp=2,tp=2,mode=btp   # vanilla -> btp, world up
elastic tiny pp=2,accum=2 dp=2                      # pp -> dp
elastic tiny dp=2,tp=2,pp=2,accum=2 tp=2,mode=vanilla,pp=2,accum=2  # world 8 -> 4, mode change
elastic llama-tiny tp=2,mode=megatron dp=2,zero=1   # full-rank: tp -> dp + ZeRO
elastic llama-tiny dp=2 tp=2,pp=2,accum=2           # full-rank: dp -> tp x pp
elastic tiny dp=2,pp=2,zero=1,accum=2 dp=2,tp=2,zero=1,accum=1  # ZeRO-1 chunks per stage -> per tp shard
echo "PASS: $pair elastic restarts continue the uninterrupted run within $TOL"
