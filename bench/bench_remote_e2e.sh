#!/usr/bin/env bash
# A machine lost, a fresh start from the remote level (issue 42): the time
# from launch to the first step's line of a relaunch that finds nothing
# local and downloads the newest remote checkpoint (R), against the same
# relaunch from the file in ckpt.dir, the machine kept (K).
#
#   bash bench/bench_remote_e2e.sh [BUILD] [--preset P] [--precision bf16|fp32]
#        [--rounds R] [--batch B] [--seq T] [--threads N] [--warm]
#
# Defaults: build/, cola-350m, bf16, 3 rounds, B=1, T=64, train.threads=2,
# 1 rank, no local level (a lost machine takes it anyway). SeaweedFS on
# 127.0.0.1 (scripts/setup-seaweedfs.sh), its data in the bench's folder.
#  1. One training step of P, its checkpoint file committed and uploaded
#     (ckpt.remote, grace 900 s; the upload must finish before the exit).
#  2. Rounds of R and K, interleaved (R K R K ...). R: a new, empty ckpt.dir
#     (the machine is lost: ckpt.dir and the local level gone), same
#     ckpt.remote. K: the original ckpt.dir. Both: the same settings, two
#     steps; killed (kill -9, by its pid) once the first step's metrics line
#     is written, so that no save or upload of the relaunch changes what
#     the next round finds. Before each relaunch the checkpoint's bytes
#     (K: the file; R: the server's volume files) are dropped from the page
#     cache (fsync + POSIX_FADV_DONTNEED, these files only), as on a new
#     machine or after a reboot; --warm leaves them cached.
# Reported per round and as medians: launch to the first step's metrics
# line (the step done), split into the parts the log tells: the download
# ("downloaded X MiB in Y s"), the verified load ("verified and loaded in
# Y s"), the first step (its step_ms), and the rest (process start, model
# and buffers, the store's listing, the GEMM peak measured at start); and
# the ratio R / K. `df` of the folder is checked first: the run needs about
# three times the checkpoint file (file, server copy, download).
# KEEP=1 keeps the folder. Exit 0, 1 when a run failed, 2 on bad arguments
# or too little disk.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build preset=cola-350m precision=bf16 rounds=3 batch=1 seq=64 threads=2 warm=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
  -h | --help) usage; exit 0 ;;
  --preset) preset=$2; shift ;;
  --precision) precision=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  --batch) batch=$2; shift ;;
  --seq) seq=$2; shift ;;
  --threads) threads=$2; shift ;;
  --warm) warm=1 ;;
  -*) echo "bench_remote_e2e: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  *) build=$(cd "$1" && pwd) ;;
  esac
  shift
done
for v in "$rounds" "$batch" "$seq" "$threads"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench_remote_e2e: '$v' is not a positive number" >&2; exit 2; }
done
TRAIN=$build/trainer/boost-train
[ -x "$TRAIN" ] || { echo "bench_remote_e2e: $TRAIN not built (bash scripts/build.sh)" >&2; exit 2; }
export BOOST_BINARY_DIR=$build BOOST_SOURCE_DIR=$root
export HDF5_PLUGIN_PATH=$build/hdf5-plugins OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=passive
work=$(mktemp -d /tmp/bench_remote_e2e.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
avail=$(df -Pk "$work" | awk 'NR==2{print $4}')
[ "$avail" -gt $((12 << 20)) ] || { echo "bench_remote_e2e: $((avail >> 20)) GiB free on $work, 12 GiB needed" >&2; rm -rf "$work"; exit 2; }
source "$root/tests/mpi/remote_common.bash" # its EXIT trap stops the server, then calls cleanup
"$build/tools/boost-data" -q -o "$work/f.tok" /usr/share/games/fortunes >/dev/null
start_server
rc s3://e2e/run mkbucket >/dev/null
common=(--set model.preset="$preset" --set train.precision="$precision" --set model.seq_len="$seq"
  --set train.batch_size="$batch" --set train.threads="$threads" --set train.warmup_steps=0 --set train.val_batches=0
  --set data.train="$work/f.tok" --set ckpt.keep_last=1 --set ckpt.remote=s3://e2e/run
  --set ckpt.remote_endpoint="$BOOST_S3_ENDPOINT" --set ckpt.remote_grace=900)
t0=$(date +%s.%N)
"$TRAIN" "${common[@]}" --set train.steps=1 --set ckpt.dir="$work/kept" >"$work/first.log" 2>&1 ||
  { echo "bench_remote_e2e: the first run failed: $(tail -3 "$work/first.log")" >&2; exit 1; }
grep -q "remote upload finished before exit" "$work/first.log" ||
  { echo "bench_remote_e2e: step 1 did not reach the remote: $(grep -i remote "$work/first.log" | tail -3)" >&2; exit 1; }
file=$(ls "$work"/kept/step_*.h5)
echo "bench_remote_e2e: $preset $precision B=$batch T=$seq train.threads=$threads, 1 rank; checkpoint $(basename "$file")" \
  "$(($(stat -c %s "$file") >> 20)) MiB; first run (1 step, save, upload) $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5) s;" \
  "$(grep -o 'uploaded to .*MiB/s)' "$work/first.log" | cut -d, -f2-)"
echo "disk: $(df -h "$work" | awk 'NR==2{print $1, $4 " free"}'); cpu: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "page cache: $([ "$warm" = 1 ] && echo "warm (--warm)" || echo "the checkpoint's bytes dropped before each relaunch")"
evict() { # the files under the folders, out of the page cache
  /usr/bin/python3 - "$@" <<'PYEOF'
import os, sys
for top in sys.argv[1:]:
    for d, _, names in os.walk(top):
        for n in names:
            try:
                fd = os.open(os.path.join(d, n), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            os.close(fd)
PYEOF
}
relaunch() { # ARM ROUND DIR: launch, wait for the first step's metrics line, kill -9
  local arm=$1 r=$2 dir=$3 log=$work/$1$2.log m=$work/$1$2.jsonl
  rm -f "$m"
  [ "$warm" = 1 ] || evict "$dir" "$([ "$arm" = R ] && echo "$T/weed" || echo "$dir")"
  local t0
  t0=$(date +%s.%N)
  "$TRAIN" "${common[@]}" --set train.steps=3 --set ckpt.every=1000 --set ckpt.dir="$dir" --set train.metrics="$m" \
    >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 12000); do # up to 20 minutes
    [ -s "$m" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "bench_remote_e2e: relaunch $arm$r exited: $(tail -3 "$log")" >&2; exit 1; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  echo "$t0" >"$work/$arm$r.t0"
}
for r in $(seq 1 "$rounds"); do
  rm -rf "$work/lost"
  relaunch R "$r" "$work/lost"
  relaunch K "$r" "$work/kept"
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$rounds" <<'PYEOF'
import json, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def parts(arm, r):
    log = open("%s/%s%d.log" % (work, arm, r), errors="replace").read()
    m = json.loads(open("%s/%s%d.jsonl" % (work, arm, r)).readline())
    t0 = float(open("%s/%s%d.t0" % (work, arm, r)).read())
    d = re.search(r"downloaded ([0-9.]+) MiB in ([0-9.]+) s", log)
    l = re.search(r"verified and loaded in ([0-9.]+) s", log)
    if arm == "R" and not d:
        sys.exit("bench_remote_e2e: relaunch R%d did not download: %s" % (r, log[-300:]))
    if arm == "K" and (d or "downloaded from the remote" in log):
        sys.exit("bench_remote_e2e: relaunch K%d downloaded" % r)
    total = m["time"] - t0
    dl = float(d.group(2)) if d else 0.0
    ld = float(l.group(1)) if l else float("nan")
    st = m["step_ms"] / 1e3
    return dict(total=total, dl=dl, mib=float(d.group(1)) if d else 0.0, load=ld, step=st, rest=total - dl - ld - st,
                resumed=m["step"] - 1)
rows = [(r, parts("R", r), parts("K", r)) for r in range(1, rounds + 1)]
print()
print("| round | arm | to the first step | download | verified load | first step | the rest |")
print("|---:|---|---:|---:|---:|---:|---:|")
for r, R, K in rows:
    for name, o in (("remote (machine lost)", R), ("file (machine kept)", K)):
        print("| %d | %s | %.2f s | %s | %.2f s | %.2f s | %.2f s |" % (r, name, o["total"],
              "%.2f s (%.0f MiB, %.0f MiB/s)" % (o["dl"], o["mib"], o["mib"] / o["dl"]) if o["dl"] else "-",
              o["load"], o["step"], o["rest"]))
med = lambda arm, k: statistics.median(o[k] for _, R, K in rows for o in ([R] if arm == "R" else [K]))
ratios = [R["total"] / K["total"] for _, R, K in rows]
print()
print("median: remote %.2f s (download %.2f, load %.2f, step %.2f, rest %.2f) | file %.2f s (load %.2f, step %.2f, rest %.2f)"
      % (med("R", "total"), med("R", "dl"), med("R", "load"), med("R", "step"), med("R", "rest"),
         med("K", "total"), med("K", "load"), med("K", "step"), med("K", "rest")))
print("ratio remote / file, to the first step: median %.2f (%.2f-%.2f over %d rounds, each round's own pair)"
      % (statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
PYEOF
