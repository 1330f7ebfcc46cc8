#!/usr/bin/env bash
# Checkpoint coordination from 1 to 32 ranks (issue 27): per checkpoint and
# per rank, the collectives, point-to-point messages, MPI-IO and POSIX file
# opens and metadata operations, counted by an LD_PRELOAD library
# (bench/trace/ckpt_counts.c); and the commit's cost from checkpoints.jsonl.
#
#   bench/bench_ckpt_scale.sh [BUILD_DIR]          (default: ./build)
#
# Environment: LAYOUTS (default "1:1:1 2:1:1 2:2:1 2:2:2 4:2:2 2:4:4", each
# dp:tp:pp), LAYERS (the tiny preset's 4 layers, and 8 to show that the
# counts do not grow with the number of tensors: "4 8"), STEPS (5), WORK
# (scratch, default a new /tmp directory).
#
# Per layout and layer count it trains the tiny preset STEPS steps twice on
# the fortunes shard: with a checkpoint after every step (ckpt.every=1) and
# with only the final one (ckpt.every=0). The difference of the two runs'
# counts divided by STEPS-1 is what one checkpoint costs each rank: the
# training's own collectives cancel. Oversubscribed on a small machine the
# times measure the machine, not the protocol; the counts are exact.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
TRAIN=$BUILD/trainer/boost-train
LIB=$BUILD/bench/trace/libckpt-counts.so
LAYOUTS=${LAYOUTS:-1:1:1 2:1:1 2:2:1 2:2:2 4:2:2 2:4:4}
LAYERS=${LAYERS:-4 8}
STEPS=${STEPS:-5}
[ -x "$TRAIN" ] && [ -f "$LIB" ] || { echo "bench_ckpt_scale: build first ($TRAIN, $LIB)" >&2; exit 1; }
WORK=${WORK:-$(mktemp -d /tmp/bench_ckpt_scale.XXXXXX)}
mkdir -p "$WORK"
"$BUILD/tools/boost-data" -o "$WORK/f.tok" /usr/share/games/fortunes >/dev/null 2>&1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
export OMP_NUM_THREADS=1

run() { # tag np every args...
  local tag=$1 np=$2 every=$3
  shift 3
  rm -rf "$WORK/$tag" && mkdir -p "$WORK/$tag/counts"
  BOOST_COUNTS_DIR=$WORK/$tag/counts LD_PRELOAD=$LIB "${MPIRUN[@]}" -n "$np" -x LD_PRELOAD -x BOOST_COUNTS_DIR \
    -x OMP_NUM_THREADS "$TRAIN" --set data.train="$WORK/f.tok" --set model.preset=tiny --set train.val_batches=0 \
    --set train.batch_size=1 --set train.threads=1 --set train.steps="$STEPS" --set ckpt.dir="$WORK/$tag/ckpt" \
    --set ckpt.every="$every" "$@" >"$WORK/$tag/log" 2>&1 || { echo "bench_ckpt_scale: $tag failed: $(tail -3 "$WORK/$tag/log")" >&2; exit 1; }
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
for L in $LAYERS; do
  for lay in $LAYOUTS; do
    IFS=: read -r dp tp pp <<<"$lay"
    np=$((dp * tp * pp))
    args=(--set parallel.dp="$dp" --set parallel.tp="$tp" --set parallel.pp="$pp" --set model.n_layers="$L")
    run "L$L.$lay.e1" "$np" 1 "${args[@]}"
    run "L$L.$lay.e0" "$np" 0 "${args[@]}"
    /usr/bin/python3 - "$WORK" "L$L.$lay" "$np" "$STEPS" "$L" "$dp·$tp·$pp" <<'PY'
import json, glob, os, statistics, sys
work, tag, np_, steps, layers, layout = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
def counts(run):
    return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(work, run, "counts", "rank*.json")))]
a, b = counts(tag + ".e1"), counts(tag + ".e0")
if len(a) != np_ or len(b) != np_:
    sys.exit(f"bench_ckpt_scale: {tag}: {len(a)}/{len(b)} rank counts, expected {np_}")
coll = ["MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Barrier", "MPI_Gather", "MPI_Gatherv", "MPI_Allgather",
        "MPI_Allgatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Exscan", "MPI_Scan",
        "MPI_Reduce_scatter", "MPI_Iallreduce", "MPI_Ibcast", "MPI_Ibarrier", "MPI_Comm_dup", "MPI_Comm_split",
        "MPI_File_open", "MPI_File_close", "MPI_File_sync", "MPI_File_set_size"]
p2p = ["MPI_Send", "MPI_Isend", "MPI_Recv", "MPI_Irecv"]
meta = ["stat", "rename", "unlink", "mkdir", "fsync", "truncate", "allocate"]
n = steps - 1
def per(keys):
    vals = [sum(x[k] - y[k] for k in keys) / n for x, y in zip(a, b)]
    return max(vals), statistics.mean(vals)
rows = [json.loads(l) for l in open(os.path.join(work, tag + ".e1", "ckpt", "checkpoints.jsonl"))]
commit = statistics.median(r["phases_s"]["commit"] for r in rows if r.get("committed"))
write = statistics.median(r["write_s"] for r in rows if r.get("committed"))
c, p, o, m = per(coll), per(p2p), per(["open"]), per(meta)
print(f"| {layers} | {layout} | {np_} | {c[0]:.1f} / {c[1]:.1f} | {p[0]:.1f} | {o[0]:.1f} / {o[1]:.1f} | {m[0]:.1f} / {m[1]:.1f} | {commit*1e3:.0f} | {write:.2f} |")
PY
  done
done | { echo "| layers | dp·tp·pp | ranks | collectives max / mean | p2p max | opens max / mean | metadata ops max / mean | commit ms (median) | write s (median) |"; echo "|---|---|---|---|---|---|---|---|---|"; cat; }
[ -n "${KEEP:-}" ] || rm -rf "$WORK"
