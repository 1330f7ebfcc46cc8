#!/usr/bin/env bash
# Same checkpoints before and after a refactor: trains the same short runs
# with two builds of boost-train and compares every checkpoint file they
# write with h5diff, all but what differs between any two runs of one build
# (the run's random identity, the start times in /state/run_starts). The
# stored config may gain keys (new settings, at their defaults); a key
# changed or gone is a difference.
#
#   bash bench/refactor_same_bits.sh OLD_BUILD NEW_BUILD
#
# Runs: the tiny model fp32 on one rank, bf16 on one rank, and on two ranks
# with tensor parallelism (btp) and with pipeline stages, each with the
# activations saved. Exit 0 when every file is equal, 1 naming the first
# difference.
set -euo pipefail
old=$(cd "${1:?OLD_BUILD}" && pwd); new=$(cd "${2:?NEW_BUILD}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
"$new/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
common=(--set model.preset=tiny --set data.train=f.tok --set train.steps=6 --set ckpt.dir=ck --set ckpt.every=2
        --set ckpt.activations=sample --set train.val_batches=0 --set train.threads=1)
runs=("fp32|1|--set train.precision=fp32" "bf16|1|--set train.precision=bf16"
      "btp|2|--set parallel.tp=2 --set parallel.tp_mode=btp" "pp|2|--set parallel.pp=2 --set train.grad_accum=2" "dp|2|--set parallel.dp=2 --set ckpt.local_every=1")
bin_of() { local b=$1/trainer/boost-train; [ -x "$b" ] || b=$(find "$1" -name boost-train -type f -perm -u+x | head -1); echo "$b"; }
status=0
for run in "${runs[@]}"; do
  IFS='|' read -r name np args <<<"$run"
  for side in old new; do
    dir=$old; [ "$side" = new ] && dir=$new
    mkdir -p "$tmp/$name/$side" && cp "$tmp/f.tok" "$tmp/$name/$side/"
    launch=(); [ "$np" = 2 ] && launch=("${mpirun[@]}")
    # shellcheck disable=SC2086
    (cd "$tmp/$name/$side" && OMP_NUM_THREADS=1 "${launch[@]}" "$(bin_of "$dir")" "${common[@]}" $args >log 2>&1) ||
      { echo "$name/$side: boost-train failed: $(tail -2 "$tmp/$name/$side/log")"; status=1; continue 2; }
  done
  files=$(cd "$tmp/$name/old/ck" && ls step_*.h5)
  [ "$files" = "$(cd "$tmp/$name/new/ck" && ls step_*.h5)" ] || { echo "$name: different checkpoint files"; status=1; continue; }
  for f in $files; do
    out=$(h5diff -r --exclude-path /state/run_starts "$tmp/$name/old/ck/$f" "$tmp/$name/new/ck/$f" || true)
    diffs=$(echo "$out" | awk '/^(attribute|dataset): / { what=$0; skip=/^attribute: <(run_id|config) of/ } /differences? found/ { if (!skip && $1 > 0) print what " (" $1 ")" }')
    # the stored config: a key the new build added is a new setting at its default, not a difference
    diffs+=$(python3 - "$tmp/$name/old/ck/$f" "$tmp/$name/new/ck/$f" <<'PY'
import json, subprocess, sys
def config(path):
    out = subprocess.run(["h5dump", "-a", "/config", "-m", "%s", path], capture_output=True, text=True).stdout
    text = out[out.index('(0): "') + 6:out.rindex('"')]
    return json.loads(text.replace('\\"', '"').replace("\\\\", "\\"))
def flat(d, pre=""):
    return {k2: v2 for k, v in d.items() for k2, v2 in (flat(v, pre + k + ".").items() if isinstance(v, dict) else [(pre + k, v)])}
old, new = flat(config(sys.argv[1])), flat(config(sys.argv[2]))
bad = [k for k in old if k not in new or old[k] != new[k]]
if bad:
    print("config keys changed or gone: " + ", ".join(bad[:5]))
added = sorted(set(new) - set(old))
if added:
    print("note: config keys the new build adds: " + ", ".join(added), file=sys.stderr)
PY
)
    if [ -n "$diffs" ]; then echo "$name: $f differs: $(echo "$diffs" | head -3 | tr '\n' ' ')"; status=1; fi
  done
  [ "$status" = 0 ] && echo "$name: $(echo "$files" | wc -w) checkpoint files equal"
done
exit $status
