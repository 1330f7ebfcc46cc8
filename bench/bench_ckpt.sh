#!/usr/bin/env bash
# Checkpoint benchmark (issue 4): asynchronous checkpoints of cola-60m and
# cola-130m with AdamW state on 1 and 4 ranks (data parallel), against a
# synchronous save of the same state.
#
#   bench/bench_ckpt.sh [BUILD_DIR]        (default: ./build)
#
# Environment: PRESETS ("cola-60m cola-130m"), RANKS ("1 4"), STEPS (9),
# OMP_WAIT_POLICY (default here: passive -- with libgomp's default spinning,
# the training threads and the writer thread fight for the cores and steps
# during a flush are several times slower; see docs/PERFORMANCE.md),
# EVERY (3), BATCH (1), SEQ (64), LEVEL (3), WORK (scratch directory on the
# disk to measure; default a new /tmp/bench_ckpt.XXXXXX, removed at the end
# unless KEEP=1), OUT (results file, default $WORK/results.jsonl copied to
# ./bench_ckpt.jsonl).
#
# Per preset and rank count it runs boost-train four times on the fortunes
# shard (same config, train.steps=STEPS, a checkpoint every EVERY steps and at
# the end):
#   base   no checkpoints                      -> step time without a flush
#   async  checkpoints as shipped              -> stall per checkpoint (staging
#          + waiting for the deferred copy before the optimizer step), step time
#          while a flush runs, write time and size (<dir>/checkpoints.jsonl)
#   sync   BOOST_CKPT_SYNC=1: training blocks until the commit -> the
#          synchronous save time of the same state
#   load   resume from the sync run's last checkpoint (0 steps left) -> load
#          time (read, decompress, verify checksums, broadcast to replicas)
# plus, once per preset, a 1-step run with ckpt.activations=sample for the
# activations' compression ratio. The disk's sequential write speed is
# measured in the same run with dd (1 GiB, conv=fsync) into WORK; the
# compression of each category is compared with `zstd -3` on the same raw
# bytes (boost-inspect --dump-category). Prints a Markdown table.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
TRAIN=$BUILD/trainer/boost-train
INSPECT=$BUILD/tools/boost-inspect
PRESETS=${PRESETS:-cola-60m cola-130m}
RANKS=${RANKS:-1 4}
STEPS=${STEPS:-9}
EVERY=${EVERY:-3}
BATCH=${BATCH:-1}
SEQ=${SEQ:-64}
LEVEL=${LEVEL:-3}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
PY=${PY:-/usr/bin/python3}
for x in "$TRAIN" "$INSPECT"; do [ -x "$x" ] || { echo "bench_ckpt: $x not built" >&2; exit 1; }; done
command -v zstd >/dev/null || { echo "bench_ckpt: the zstd CLI is needed (Debian: zstd)" >&2; exit 1; }
WORK=${WORK:-$(mktemp -d /tmp/bench_ckpt.XXXXXX)}
mkdir -p "$WORK"
RES=$WORK/results.jsonl
: >"$RES"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
export HDF5_PLUGIN_PATH=${HDF5_PLUGIN_PATH:-$BUILD/hdf5-plugins}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

"$BUILD/tools/boost-data" -o "$WORK/f.tok" /usr/share/games/fortunes >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "disk: $(df -h "$WORK" | awk 'NR==2 {print $1, $2}') ($WORK); OMP_WAIT_POLICY=$OMP_WAIT_POLICY"

# Sequential write speed of the disk, fsync'ed.
dd_out=$(dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=1024 conv=fsync 2>&1 | tail -1)
rm -f "$WORK/dd.bin"
dd_bytes=$(echo "$dd_out" | awk '{print $1}')
dd_s=$(echo "$dd_out" | sed -E 's/.*copied, ([0-9.]+) s.*/\1/')
echo "dd: $dd_out"
echo "{\"kind\":\"dd\",\"bytes\":$dd_bytes,\"seconds\":$dd_s}" >>"$RES"

COMMON=(--set data.train="$WORK/f.tok" --set train.steps="$STEPS" --set train.batch_size="$BATCH" --set model.seq_len="$SEQ"
        --set train.val_batches=0 --set train.warmup_steps=0 --set train.log_every=1 --set ckpt.level="$LEVEL")

run() { # NP LOG args...
  local np=$1 log=$2
  shift 2
  if [ "$np" = 1 ]; then "$TRAIN" "${COMMON[@]}" "$@" >"$log" 2>&1; else $MPIRUN -n "$np" "$TRAIN" "${COMMON[@]}" "$@" >"$log" 2>&1; fi ||
    { echo "bench_ckpt: boost-train failed: $(tail -3 "$log")" >&2; exit 1; }
}

zstd3() { zstd -3 -q -c "$1" | wc -c; }

for preset in $PRESETS; do
  # Activations' compression: one step, one process, ckpt.activations=sample.
  d=$WORK/$preset-acts
  run 1 "$WORK/$preset-acts.log" --set model.preset="$preset" --set train.steps=1 --set ckpt.dir="$d" --set ckpt.activations=sample
  "$INSPECT" --dump-category activations "$WORK/acts.raw" "$d" >/dev/null
  "$INSPECT" --json --no-tensors "$d" >"$WORK/acts.json"
  echo "{\"kind\":\"acts\",\"preset\":\"$preset\",\"raw\":$(stat -c %s "$WORK/acts.raw"),\"zstd3\":$(zstd3 "$WORK/acts.raw"),\"inspect\":$(cat "$WORK/acts.json" | tr -d '\n\t')}" >>"$RES"
  rm -rf "$d" "$WORK/acts.raw"
  for np in $RANKS; do
    tag=$preset-np$np
    echo "== $tag: base, async, sync, load" >&2
    run "$np" "$WORK/$tag-base.log" --set model.preset="$preset" --set train.metrics="$WORK/$tag-base.jsonl"
    run "$np" "$WORK/$tag-async.log" --set model.preset="$preset" --set train.metrics="$WORK/$tag-async.jsonl" \
      --set ckpt.dir="$WORK/$tag-async" --set ckpt.every="$EVERY"
    BOOST_CKPT_SYNC=1 run "$np" "$WORK/$tag-sync.log" --set model.preset="$preset" --set train.metrics="$WORK/$tag-sync.jsonl" \
      --set ckpt.dir="$WORK/$tag-sync" --set ckpt.every="$EVERY"
    run "$np" "$WORK/$tag-load.log" --set model.preset="$preset" --set ckpt.dir="$WORK/$tag-sync"
    load_s=$(grep -o 'loaded in [0-9.]* s' "$WORK/$tag-load.log" | awk '{print $3}')
    f=$(ls "$WORK/$tag-sync"/step_*.h5 | tail -1)
    for cat in weights moments; do "$INSPECT" --dump-category $cat "$WORK/$cat.raw" "$f" >/dev/null; done
    "$PY" - "$WORK" "$tag" "$preset" "$np" "$load_s" "$(stat -c %s "$WORK/weights.raw")" "$(zstd3 "$WORK/weights.raw")" \
      "$(stat -c %s "$WORK/moments.raw")" "$(zstd3 "$WORK/moments.raw")" >>"$RES" <<'PYEOF'
import json, sys
work, tag, preset, np_, load_s, wraw, wz, mraw, mz = sys.argv[1:]
def lines(p): return [json.loads(l) for l in open(p)]
base = lines(f"{work}/{tag}-base.jsonl")
asyn = lines(f"{work}/{tag}-async.jsonl")
ca = lines(f"{work}/{tag}-async/checkpoints.jsonl")
cs = lines(f"{work}/{tag}-sync/checkpoints.jsonl")
# steps that started while a checkpoint was being written (async run)
during, inflight = [], False
for m in asyn:
    if inflight and m["step"] > 1: during.append(m["step_ms"])
    st = m.get("ckpt", "")
    if "committed" in st or "FAILED" in st: inflight = False
    if "staged" in st: inflight = True
quiet_async = [m["step_ms"] for m in asyn if m["step"] > 1 and m["step_ms"] not in during]
basems = [m["step_ms"] for m in base if m["step"] > 1]
final = max(c["step"] for c in ca)
print(json.dumps({"kind": "run", "preset": preset, "np": int(np_),
    "base_step_ms": basems, "during_flush_step_ms": during, "async": [c for c in ca],
    "async_nonfinal": [c for c in ca if c["step"] != final], "sync": cs, "load_s": float(load_s),
    "weights_raw": int(wraw), "weights_zstd3": int(wz), "moments_raw": int(mraw), "moments_zstd3": int(mz)}))
PYEOF
    rm -rf "$WORK/$tag-async" "$WORK/$tag-sync" "$WORK/weights.raw" "$WORK/moments.raw"
  done
done

"$PY" - "$RES" <<'PYEOF'
import json, statistics as S, sys
R = [json.loads(l) for l in open(sys.argv[1])]
dd = next(r for r in R if r["kind"] == "dd")
dd_mbs = dd["bytes"] / dd["seconds"] / 1e6
med = lambda v: S.median(v) if v else float("nan")
print(f"\ndisk sequential write (dd 1 GiB, conv=fsync): {dd_mbs:.0f} MB/s\n")
print("| model | ranks | state (raw) | file | stall / ckpt (async) | sync save | stall / sync | step ms: no flush / during flush | write time (async) | writer CPU | write MB/s (file) vs dd | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in (r for r in R if r["kind"] == "run"):
    a = r["async_nonfinal"] or r["async"]
    stall = med([c["stall_s"] for c in a])
    sync = med([c["stall_s"] for c in r["sync"]])
    raw = sum(r["sync"][-1]["raw_bytes"].values())
    fb = med([c["file_bytes"] for c in r["async"]])
    wr = med([c["write_s"] for c in r["async"]])
    sw = med([c["write_s"] for c in r["sync"]])
    b, dfl = med(r["base_step_ms"]), med(r["during_flush_step_ms"])
    cpu = med([c.get("write_cpu_s", float("nan")) for c in r["sync"]])
    print(f"| {r['preset']} | {r['np']} | {raw/2**20:.0f} MiB | {fb/2**20:.0f} MiB | {stall*1e3:.1f} ms | {sync:.2f} s | "
          f"{100*stall/sync:.2f}% | {b:.0f} / {dfl:.0f} ({100*(dfl/b-1):+.0f}%) | {wr:.2f} s (sync {sw:.2f} s) | "
          f"{cpu:.2f} s/rank ({raw/r['np']/cpu/1e6:.0f} MB/s raw per CPU-s) | "
          f"{fb/wr/1e6:.0f} ({100*fb/wr/1e6/dd_mbs:.0f}% of dd) | {r['load_s']:.2f} s |")
print("\n| model | weights: ours / zstd -3 | moments: ours / zstd -3 | activations (sample): ours / zstd -3 |")
print("|---|---|---|---|")
for p in dict.fromkeys(r["preset"] for r in R if r["kind"] == "run"):
    r = next(x for x in R if x["kind"] == "run" and x["preset"] == p)
    c = r["sync"][-1]
    ac = next(x for x in R if x["kind"] == "acts" and x["preset"] == p)
    ai = ac["inspect"]["categories"]["activations"]
    w = c["raw_bytes"]["weights"] / c["stored_bytes"]["weights"]
    m = c["raw_bytes"]["moments"] / c["stored_bytes"]["moments"]
    print(f"| {p} | {w:.3f}x / {r['weights_raw']/r['weights_zstd3']:.3f}x | {m:.3f}x / {r['moments_raw']/r['moments_zstd3']:.3f}x | "
          f"{ai['ratio']:.3f}x / {ac['raw']/ac['zstd3']:.3f}x |")
PYEOF
cp "$RES" "${OUT:-./bench_ckpt.jsonl}"
echo "results: ${OUT:-./bench_ckpt.jsonl}"
