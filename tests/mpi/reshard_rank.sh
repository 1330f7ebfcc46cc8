#!/usr/bin/env bash
# boost-reshard --rank: growing is exact — a run resumed from the grown
# checkpoint logs the same first loss, bit for bit, as the run resumed from
# the source (tp=1, and tp=2 btp from a tp=2-written source); the grown file
# verifies and reports no loss change; its new channels are what the rule
# says (B columns and moments zero, old channels unchanged). Shrinking
# reports the loss change on the stored batch and verifies. --rank 0,
# nonsense and ranks a layout cannot split get one line and a non-zero exit;
# nothing already written is overwritten.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RESHARD=$B/tools/boost-reshard
[ -x "$RESHARD" ] || fail "$RESHARD not built"
BASE=(--set model.seq_len=32 --set ckpt.activations=sample --set train.min_lr_ratio=1)
GROW=(--set model.rank_attn=24 --set model.rank_mlp=32)

train 0 "$tmp/a.log" "${BASE[@]}" --set train.steps=3 --set ckpt.dir="$tmp/a" || fail "source run: $(tail -3 "$tmp/a.log")"
A=$tmp/a/step_00000003.h5
"$RESHARD" "$A" "$tmp/g.h5" --rank attn=24,mlp=32 --quiet >"$tmp/g.out" 2>&1 || fail "grow: $(cat "$tmp/g.out")"
"$RESHARD" "$A" "$tmp/g_loud.h5" --rank attn=24,mlp=32 >"$tmp/g_loud.out" 2>&1 || fail "grow: $(cat "$tmp/g_loud.out")"
grep -q "ranks attn 16 -> 24, mlp 16 -> 32: loss on the stored batch \([0-9.]*\) -> \1 (change +0.000000)" "$tmp/g_loud.out" ||
  fail "grow: the loss on the stored batch changed: $(cat "$tmp/g_loud.out")"
"$INSPECT" verify "$tmp/g.h5" >"$tmp/v.log" 2>&1 || fail "the grown checkpoint does not verify: $(cat "$tmp/v.log")"
# A run of the new ranks that does not move its weights (lr 0): its initialisation.
train 0 "$tmp/i.log" "${BASE[@]}" "${GROW[@]}" --set train.steps=1 --set train.lr=0 --set ckpt.dir="$tmp/init" ||
  fail "initialisation run: $(tail -3 "$tmp/i.log")"
"$PY" - "$A" "$tmp/g.h5" "$tmp/init/step_00000001.h5" <<'PYEOF' || fail "the grown tensors do not follow the rule"
import json, sys
import h5py, numpy as np
a, g, init = (h5py.File(p, "r") for p in sys.argv[1:4])
cfg = json.loads(g.attrs["config"])
assert cfg["model.rank_attn"] == 24 and cfg["model.rank_mlp"] == 32, cfg
n = 0
for grp in ("model", "optim/adam_m", "optim/adam_v"):
    for name, d in a[grp].items():
        x, y = d[()], g[grp][name][()]
        if name.endswith(".A"):
            r = x.shape[-2]
            assert np.array_equal(y[..., :r, :], x), name
            new = y[..., r:, :]
            assert np.all(new == 0) if grp != "model" else np.array_equal(new, init[grp][name][()][..., r:, :]), (grp, name)
            n += 1
        elif name.endswith(".B"):
            r = x.shape[-1]
            assert np.array_equal(y[..., :r], x) and np.all(y[..., r:] == 0), (grp, name)
        else:
            assert np.array_equal(x, y), name
assert n == 3 * 16, n  # qkv, o, gate_up, down of 4 layers, in the weights and both moments
print("ok: %d A tensors grown by the rule (old channels kept, new A rows = a rank-24/32 run's initial ones, B columns and moments zero)" % n)
PYEOF

first_loss() { "$PY" -c 'import json,sys; print(repr(json.loads(open(sys.argv[1]).readline())["loss"]))' "$1"; }
resume_pair() { # resume_pair NP TAG SOURCE GROWN extra...: both resumed for 2 steps, first losses compared
  local np=$1 tag=$2 src=$3 grown=$4
  shift 4
  train "$np" "$tmp/$tag.s.log" "${BASE[@]}" "$@" --set train.steps=5 --set ckpt.resume="$src" --set ckpt.dir="$tmp/$tag.s" \
    --set train.metrics="$tmp/$tag.s.jsonl" || fail "$tag: resume from the source: $(tail -3 "$tmp/$tag.s.log")"
  train "$np" "$tmp/$tag.g.log" "${BASE[@]}" "${GROW[@]}" "$@" --set train.steps=5 --set ckpt.resume="$grown" \
    --set ckpt.dir="$tmp/$tag.g" --set train.metrics="$tmp/$tag.g.jsonl" || fail "$tag: resume from the grown: $(tail -3 "$tmp/$tag.g.log")"
  local s g
  s=$(first_loss "$tmp/$tag.s.jsonl") g=$(first_loss "$tmp/$tag.g.jsonl")
  [ "$s" = "$g" ] || fail "$tag: first loss after resume: source $s, grown $g"
  echo "ok: $tag: first loss after resuming the grown checkpoint $g = the source's, bit for bit"
}
resume_pair 0 tp1 "$A" "$tmp/g.h5"

# A tp=2 (btp) source, grown, both resumed on tp=2.
train 2 "$tmp/a2.log" "${BASE[@]}" --set parallel.tp=2 --set train.steps=3 --set ckpt.dir="$tmp/a2" ||
  fail "tp=2 source run: $(tail -3 "$tmp/a2.log")"
"$RESHARD" "$tmp/a2/step_00000003.h5" "$tmp/g2.h5" --rank attn=24,mlp=32 --quiet >"$tmp/g2.out" 2>&1 || fail "grow tp=2: $(cat "$tmp/g2.out")"
"$PY" -c 'import h5py, json, sys; sys.exit(0 if json.loads(h5py.File(sys.argv[1], "r").attrs["layout"])["tp"] == 2 else 1)' "$tmp/g2.h5" ||
  fail "--rank without --layout did not keep IN's layout"
resume_pair 2 tp2 "$tmp/a2/step_00000003.h5" "$tmp/g2.h5" --set parallel.tp=2

# Shrink: the loss change is reported, the file verifies and resumes.
"$RESHARD" "$A" "$tmp/s.h5" --rank 8 --layout tp=2 >"$tmp/s.out" 2>&1 || fail "shrink: $(cat "$tmp/s.out")"
grep -q "ranks attn 16 -> 8, mlp 16 -> 8: loss on the stored batch [0-9.]* -> [0-9.]* (change [-+][0-9.]*); 16 stored activations recomputed" \
  "$tmp/s.out" || fail "shrink: no loss change line: $(cat "$tmp/s.out")"
"$INSPECT" verify "$tmp/s.h5" >"$tmp/vs.log" 2>&1 || fail "the shrunk checkpoint does not verify: $(cat "$tmp/vs.log")"
"$PY" - "$A" "$tmp/s.h5" <<'PYEOF' || fail "shrink did not keep the channels with the largest |B[:,i]|*|A[i,:]|"
import sys
import h5py, numpy as np
a, s = (h5py.File(p, "r") for p in sys.argv[1:3])
groups = 0
for name in a["model"]:
    if not name.endswith(".A"):
        continue
    A, B = a["model"][name][()], a["model"][name[:-1] + "B"][()]
    A, B = A.reshape((-1,) + A.shape[-2:]), B.reshape((-1,) + B.shape[-2:])  # [g, r, din], [g, dout, r]
    for grp in ("model", "optim/adam_m", "optim/adam_v"):
        SA = s[grp][name][()].reshape((A.shape[0], 8, A.shape[2]))
        SB = s[grp][name[:-1] + "B"][()].reshape((B.shape[0], B.shape[1], 8))
        XA = a[grp][name][()].reshape(A.shape)
        XB = a[grp][name[:-1] + "B"][()].reshape(B.shape)
        for k in range(A.shape[0]):
            score = np.linalg.norm(B[k].astype(np.float64), axis=0) * np.linalg.norm(A[k].astype(np.float64), axis=1)
            keep = np.sort(np.argsort(-score, kind="stable")[:8])
            assert np.array_equal(SA[k], XA[k][keep]) and np.array_equal(SB[k], XB[k][:, keep]), (grp, name, k)
    groups += 1
print("ok: shrink kept the 8 channels of largest |B[:,i]|*|A[i,:]| in each of %d groups (weights and moments)" % groups)
PYEOF
train 2 "$tmp/s.log" "${BASE[@]}" --set model.rank_attn=8 --set model.rank_mlp=8 --set parallel.tp=2 --set train.steps=4 \
  --set ckpt.resume="$tmp/s.h5" --set ckpt.dir="$tmp/sdir" || fail "resume from the shrunk: $(tail -3 "$tmp/s.log")"
echo "ok: shrink: $(grep -o 'loss on the stored batch.*(change [^)]*)' "$tmp/s.out"), verifies, resumes on tp=2"

# Refusals: one line, non-zero exit, nothing written or overwritten.
echo keep >"$tmp/exists.h5"
expect() { # expect STATUS PATTERN args...
  local want=$1 pat=$2 rc=0
  shift 2
  "$RESHARD" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" = "$want" ] || fail "boost-reshard $*: exit $rc, expected $want ($(cat "$tmp/bad.err"))"
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || fail "boost-reshard $*: not one line: $(cat "$tmp/bad.err")"
  grep -q -- "$pat" "$tmp/bad.err" || fail "boost-reshard $*: '$(cat "$tmp/bad.err")' lacks '$pat'"
}
expect 2 "a rank is a whole number" "$A" "$tmp/x.h5" --rank 0
expect 2 "a rank is a whole number" "$A" "$tmp/x.h5" --rank -3
expect 2 "a rank is a whole number" "$A" "$tmp/x.h5" --rank attn=big
expect 2 "bad --rank item" "$A" "$tmp/x.h5" --rank qkv=8
expect 2 "bad --rank" "$A" "$tmp/x.h5" --rank 8,9
expect 2 "gives attn twice" "$A" "$tmp/x.h5" --rank attn=8,attn=9
expect 2 "does not go with --bf16" "$A" "$tmp/x.h5" --rank 8 --bf16
expect 1 "exceeds the" "$A" "$tmp/x.h5" --rank mlp=100
expect 1 "exceeds the" "$A" "$tmp/exists.h5" --rank mlp=100
expect 1 "on the target layout (tp=2)" "$A" "$tmp/x.h5" --rank 7 --layout tp=2,mode=vanilla
expect 1 "is a directory\|directory" "$A" "$tmp" --rank 24
[ ! -e "$tmp/x.h5" ] && [ ! -e "$tmp/x.h5.tmp" ] || fail "a refused --rank left a file behind"
[ "$(cat "$tmp/exists.h5")" = keep ] || fail "an existing file was touched"
echo "ok: --rank 0, nonsense and unsplittable ranks refused with one line; nothing written"
